"""Helpers for benches/harness/mirror.sh (run with the project's venv python, which has
confluent-kafka). Measures from the outside only: broker offsets, log files, /proc.

  bench_util.py ends BOOTSTRAP TOPIC
      per-partition high watermarks as JSON {"0": n, ...}
  bench_util.py wait-ends BOOTSTRAP TOPIC TOTAL TIMEOUT_S [PARTITIONS]
      polls the summed high watermark of TOPIC every 50 ms until it reaches TOTAL; prints
      "FIRST_MS DONE_MS" (epoch ms: first offset seen > 0, total reached). Exit 1 on timeout.
  bench_util.py log-stats DATA_DIR TOPIC
      walks the record batch headers of TOPIC's segment files under DATA_DIR; prints
      "BYTES BATCHES RECORDS" (log bytes, batches, offsets covered).
  bench_util.py cpu PID...
      prints the CPU time (utime + stime, seconds) of each PID, space-separated (-1 if gone).
  bench_util.py threads PID
      per-thread CPU seconds of PID (name and seconds, busiest first).
  bench_util.py free-ports COUNT
      first port of COUNT consecutive free loopback ports.
  bench_util.py produce-uneven BOOTSTRAP TOPIC TOTAL SIZE PARTITIONS
      writes TOTAL records of SIZE random bytes (lz4, linger.ms=20, batch.size=262144,
      acks=all) with partition p getting a share proportional to p + 1 (the last partition
      holds PARTITIONS times the first one's records); prints "RECORDS/S MB/S".
"""

import glob
import json
import os
import socket
import struct
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def _consumer(bootstrap):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-offsets", "enable.auto.commit": False})


def _ends(c, topic, partitions=None):
    from confluent_kafka import TopicPartition

    if partitions is None:
        md = c.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            return None
        partitions = sorted(t.partitions)
    return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1] for p in partitions}


def cmd_ends(bootstrap, topic):
    c = _consumer(bootstrap)
    ends = _ends(c, topic)
    c.close()
    if ends is None:
        sys.exit(f"topic {topic} not found on {bootstrap}")
    print(json.dumps({str(p): e for p, e in ends.items()}))


def cmd_wait_ends(bootstrap, topic, total, timeout_s, partitions=None):
    total, deadline = int(total), time.time() + float(timeout_s)
    parts = list(range(int(partitions))) if partitions else None
    c = _consumer(bootstrap)
    first, last_sum = None, -1
    while time.time() < deadline:
        try:
            ends = _ends(c, topic, parts)
        except Exception:  # topic not there yet (MM2 creates it), leader moving
            ends = None
        if ends:
            s = sum(max(e, 0) for e in ends.values())
            now = int(time.time() * 1000)
            if s > 0 and first is None:
                first = now
            last_sum = s
            if s >= total:
                c.close()
                first = first or now
                print(first, now)
                return
        time.sleep(0.05)
    c.close()
    sys.exit(f"timeout: {topic} holds {last_sum} of {total} offsets on {bootstrap}")


def cmd_produce_uneven(bootstrap, topic, total, size, partitions):
    from confluent_kafka import Producer

    total, size, partitions = int(total), int(size), int(partitions)
    weights = [p + 1 for p in range(partitions)]
    counts = [total * w // sum(weights) for w in weights]
    counts[-1] += total - sum(counts)
    payload = os.urandom(size * 16)
    prod = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": 20,
            "batch.size": 262144,
            "queue.buffering.max.kbytes": 1048576,
        }
    )
    start = time.time()
    sent = 0
    for p, n in enumerate(counts):
        for i in range(n):
            off = (i * 7919) % (size * 15)
            while True:
                try:
                    prod.produce(topic, payload[off : off + size], partition=p)
                    break
                except BufferError:
                    prod.poll(0.05)
            sent += 1
            if sent % 10000 == 0:
                prod.poll(0)
    if prod.flush(120) != 0:
        sys.exit("produce-uneven: records still unsent after 120 s")
    secs = max(time.time() - start, 1e-3)
    print(f"{total / secs:.1f} {total * size / secs / 1048576:.2f}")


def cmd_log_stats(data_dir, topic):
    total_bytes = batches = records = 0
    for d in glob.glob(os.path.join(data_dir, f"{topic}-[0-9]*")):
        for seg in sorted(glob.glob(os.path.join(d, "*.log"))):
            with open(seg, "rb") as f:
                data = f.read()
            total_bytes += len(data)
            pos = 0
            # RecordBatch: baseOffset int64, batchLength int32, ..., lastOffsetDelta int32 at 23
            while pos + 27 <= len(data):
                length = struct.unpack_from(">i", data, pos + 8)[0]
                if length <= 0:
                    break
                last_delta = struct.unpack_from(">i", data, pos + 23)[0]
                batches += 1
                records += last_delta + 1
                pos += 12 + length
    print(total_bytes, batches, records)


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return -1.0


def cmd_cpu(*pids):
    print(" ".join(f"{cpu_seconds(p):.2f}" for p in pids))


def cmd_threads(pid):
    rows = []
    for t in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(os.path.join(t, "comm")) as f:
                name = f.read().strip()
            with open(os.path.join(t, "stat")) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            rows.append(((int(fields[11]) + int(fields[12])) / TICK, name, os.path.basename(t)))
        except (OSError, IndexError, ValueError):
            pass
    for secs, name, tid in sorted(rows, reverse=True)[:12]:
        print(f"{name:<24} tid {tid:<8} {secs:8.2f} s")


def cmd_free_ports(count):
    count = int(count)
    for _ in range(500):
        base = 20000 + int.from_bytes(os.urandom(2), "big") % 10000
        socks = []
        try:
            for p in range(base, base + count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        print(base)
        return
    sys.exit("no free port range")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {
        "ends": cmd_ends,
        "wait-ends": cmd_wait_ends,
        "log-stats": cmd_log_stats,
        "cpu": cmd_cpu,
        "threads": cmd_threads,
        "free-ports": cmd_free_ports,
        "produce-uneven": cmd_produce_uneven,
    }[cmd](*args)
