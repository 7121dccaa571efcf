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
  bench_util.py cpu-split PID...
      user and system CPU seconds of each PID, its reaped children included (a forking
      relay's per-connection processes): "USER SYSTEM" per PID, space-separated.
  bench_util.py machine-snapshot / machine-since SNAPSHOT
      the machine's CPU counters (/proc/stat), and the share of the time since SNAPSHOT that
      the CPUs were busy, steal included (the time the hypervisor gave a VM's neighbours).
  bench_util.py free-ports COUNT
      first port of COUNT consecutive free loopback ports.
  bench_util.py produce-uneven BOOTSTRAP TOPIC TOTAL SIZE PARTITIONS
      writes TOTAL records of SIZE random bytes (lz4, linger.ms=20, batch.size=262144,
      acks=all) with partition p getting a share proportional to p + 1 (the last partition
      holds PARTITIONS times the first one's records); prints "RECORDS/S MB/S".
  bench_util.py create-topics BOOTSTRAP PREFIX TOPICS PARTITIONS
      creates PREFIX0..PREFIX<TOPICS-1> with PARTITIONS partitions each (replication 1) in one
      CreateTopics call (benches/harness/scale.sh).
  bench_util.py seed BOOTSTRAP PREFIX TOPICS PARTITIONS PER_PARTITION SIZE
      writes PER_PARTITION records of SIZE bytes to every partition; prints the total.
  bench_util.py produce-steady BOOTSTRAP PREFIX TOPICS PARTITIONS RATE SIZE SECONDS
      a steady RATE records/s of SIZE bytes for SECONDS, round-robin over every partition of
      every topic (librdkafka, acks=all, linger.ms=$BENCH_SCALE_LINGER_MS or 50: with 5 ms,
      librdkafka 2.16 fell ever further behind at 2,000 records/s over 1,000 partitions);
      progress every 10 s on stderr; prints "SENT DELIVERED FAILED LOOP_S TOTAL_S" (LOOP_S:
      the rate-limited loop, TOTAL_S: including the final flush).
  bench_util.py lag MG_BIN MG_ADDR MIRROR
      one `mirrors --describe --json`; prints "PARTITIONS TOTAL_LAG NOT_MIRRORING SRC_SUM DST_SUM".
  bench_util.py wait-lag0 MG_BIN MG_ADDR MIRROR PARTITIONS TIMEOUT_S
      polls `--describe --json` until PARTITIONS partitions are MIRRORING with lag 0; prints the
      epoch ms it happened. Exit 1 on timeout.
  bench_util.py sample PID MG_BIN MG_ADDR MIRROR SRC_PORT DST_PORT LISTEN_LO LISTEN_HI INTERVAL CSV
      every INTERVAL s until SIGTERM, appends a CSV row: elapsed s, VmRSS KiB, CPU% over the
      interval, CPU s, threads, established TCP connections of PID to the source broker port,
      to the destination broker port, accepted on its listener ports, others; total lag,
      partitions not MIRRORING, destination offsets summed.
  bench_util.py soak-summary CSV WARMUP_S
      key=value lines summarising the samples taken at or after WARMUP_S.
  bench_util.py spread RUNS_TSV MIN_COPY_S
      the summary table of benches/harness/mirror.sh: for every case, each path's MB/s and
      CPU-seconds per GB as median (min–max) over the runs, and the mirrorgate/MM2 ratios
      taken within each run, then summarised; ratios of runs with a copy under MIN_COPY_S
      seconds are not stated. RUNS_TSV lines: case, run, path (mg|mm2), time ms, bytes,
      records, CPU-s.
  bench_util.py latency-paired DIRECT_FILE PROXY_FILE [BLOCK]
      latencies in µs from one `LatencyPerf.java --paired` run (one file per side, send order;
      line i of both files are sends 1/RATE s apart). Prints key=value lines: each side's
      p50/p99/p99.9 (nearest rank), the differences (proxy − direct), and for each a 90 %
      bootstrap interval from resampling blocks of BLOCK (2000) consecutive pairs, the same
      blocks on both sides (the machine's noise comes in bursts that a block shares).
"""

import glob
import signal
import statistics
import subprocess
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


def _stat_ticks(path):
    """utime, stime, cutime, cstime (ticks) of a /proc/PID/stat or /proc/PID/task/TID/stat file
    (proc(5): the fields after the command name); OSError, IndexError or ValueError if gone."""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return [int(v) for v in fields[11:15]]


def cpu_seconds(pid):
    try:
        utime, stime, _, _ = _stat_ticks(f"/proc/{pid}/stat")
        return (utime + stime) / TICK
    except (OSError, IndexError, ValueError):
        return -1.0


def cmd_cpu(*pids):
    print(" ".join(f"{cpu_seconds(p):.2f}" for p in pids))


def cpu_split(pid):
    """(user, system) CPU seconds of PID and of its children it has reaped (utime + cutime,
    stime + cstime; proc(5)); (-1, -1) if gone."""
    try:
        utime, stime, cutime, cstime = _stat_ticks(f"/proc/{pid}/stat")
        return ((utime + cutime) / TICK, (stime + cstime) / TICK)
    except (OSError, IndexError, ValueError):
        return (-1.0, -1.0)


def cmd_cpu_split(*pids):
    print(" ".join(f"{u:.2f} {s:.2f}" for u, s in map(cpu_split, pids)))


def _machine():
    # /proc/stat "cpu" line: user nice system idle iowait irq softirq steal (guest time is
    # already in user), in ticks.
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:9]]
    return ticks


def cmd_machine_snapshot():
    print(",".join(map(str, _machine())))


def cmd_machine_since(snapshot):
    before = [int(v) for v in snapshot.split(",")]
    d = [b - a for a, b in zip(before, _machine())]
    total = max(sum(d), 1)
    busy = total - d[3] - d[4]
    print(f"busy {100 * busy / total:.0f} % (steal {100 * d[7] / total:.1f} % of it)")


def cmd_threads(pid):
    rows = []
    for t in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(os.path.join(t, "comm")) as f:
                name = f.read().strip()
            utime, stime, _, _ = _stat_ticks(os.path.join(t, "stat"))
            rows.append(((utime + stime) / TICK, name, os.path.basename(t)))
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


def _topics(prefix, topics):
    return [f"{prefix}{i}" for i in range(int(topics))]


def cmd_create_topics(bootstrap, prefix, topics, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.create_topics(
        [NewTopic(t, num_partitions=int(partitions), replication_factor=1) for t in _topics(prefix, topics)],
        operation_timeout=60,
    )
    for t, f in futs.items():
        f.result(timeout=120)
    # wait until every partition has a leader in the metadata
    deadline = time.time() + 60
    while time.time() < deadline:
        md = admin.list_topics(timeout=10)
        ok = all(
            t in md.topics
            and md.topics[t].error is None
            and len(md.topics[t].partitions) == int(partitions)
            and all(p.leader >= 0 for p in md.topics[t].partitions.values())
            for t in _topics(prefix, topics)
        )
        if ok:
            return
        time.sleep(0.5)
    sys.exit("create-topics: partitions without a leader after 60 s")


def _producer(bootstrap, **extra):
    from confluent_kafka import Producer

    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": int(os.environ.get("BENCH_SCALE_LINGER_MS", "50")),
        "queue.buffering.max.kbytes": 262144,
    }
    conf.update(extra)
    return Producer(conf)


def cmd_seed(bootstrap, prefix, topics, partitions, per_partition, size):
    prod = _producer(bootstrap)
    payload = os.urandom(int(size))
    failed = []

    def cb(err, _msg):
        if err is not None:
            failed.append(err)

    n = 0
    for t in _topics(prefix, topics):
        for p in range(int(partitions)):
            for _ in range(int(per_partition)):
                while True:
                    try:
                        prod.produce(t, payload, partition=p, on_delivery=cb)
                        break
                    except BufferError:
                        prod.poll(0.05)
                n += 1
        prod.poll(0)
    if prod.flush(120) != 0 or failed:
        sys.exit(f"seed: {len(failed)} failed deliveries ({failed[:1]}), or records unsent after 120 s")
    print(n)


def cmd_produce_steady(bootstrap, prefix, topics, partitions, rate, size, seconds):
    rate, size, seconds, partitions = float(rate), int(size), float(seconds), int(partitions)
    targets = [(t, p) for t in _topics(prefix, topics) for p in range(partitions)]
    prod = _producer(bootstrap)
    payload = os.urandom(size * 16)
    stats = {"ok": 0, "failed": 0}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    def cb(err, _msg):
        stats["failed" if err is not None else "ok"] += 1

    start = time.time()
    sent = 0
    next_report = start + 10
    while not stop:
        now = time.time()
        elapsed = now - start
        if elapsed >= seconds:
            break
        if now >= next_report:
            next_report += 10
            print(f"{elapsed:.0f} s: {sent} sent, {stats['ok']} delivered, {stats['failed']} failed", file=sys.stderr, flush=True)
        due = min(int(rate * elapsed), int(rate * seconds))
        while sent < due:
            t, p = targets[sent % len(targets)]
            off = (sent * 7919) % (size * 15)
            try:
                prod.produce(t, payload[off : off + size], partition=p, on_delivery=cb)
            except BufferError:
                break
            sent += 1
        prod.poll(0.01)
    loop_s = time.time() - start
    prod.flush(120)
    print(sent, stats["ok"], stats["failed"], f"{loop_s:.1f}", f"{time.time() - start:.1f}")


def _describe(mg_bin, mg_addr, mirror):
    out = subprocess.run(
        [mg_bin, "mirrors", "--bootstrap-server", mg_addr, "--describe", "--mirror", mirror, "--json"],
        capture_output=True, text=True, timeout=60,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout or "[]")


def _lag_summary(rows):
    lag = sum(max(r.get("lag") or 0, 0) for r in rows)
    not_mirroring = sum(1 for r in rows if r.get("state") != "MIRRORING")
    src = sum(max(r.get("sourceOffset") or 0, 0) for r in rows)
    dst = sum(max(r.get("destinationOffset") or 0, 0) for r in rows)
    return len(rows), lag, not_mirroring, src, dst


def cmd_lag(mg_bin, mg_addr, mirror):
    print(*_lag_summary(_describe(mg_bin, mg_addr, mirror)))


def cmd_wait_lag0(mg_bin, mg_addr, mirror, partitions, timeout_s):
    deadline, partitions = time.time() + float(timeout_s), int(partitions)
    last = None
    while time.time() < deadline:
        try:
            rows = _describe(mg_bin, mg_addr, mirror)
            last = _lag_summary(rows)
            if last[0] >= partitions and all(r.get("lag") == 0 and r.get("state") == "MIRRORING" for r in rows):
                print(int(time.time() * 1000))
                return
        except Exception as e:  # noqa: BLE001 — mirrorgate busy; retry
            last = str(e)
        time.sleep(1)
    sys.exit(f"wait-lag0: not at lag 0 after {timeout_s} s: {last}")


def _tcp_table():
    """inode -> (local port, remote port) of ESTABLISHED sockets."""
    table = {}
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(f) as fh:
                next(fh)
                for line in fh:
                    parts = line.split()
                    if parts[3] != "01":
                        continue
                    lport = int(parts[1].rsplit(":", 1)[1], 16)
                    rport = int(parts[2].rsplit(":", 1)[1], 16)
                    table[parts[9]] = (lport, rport)
        except OSError:
            pass
    return table


def connections(pid, src_port, dst_port, listen_lo, listen_hi):
    table = _tcp_table()
    counts = [0, 0, 0, 0]  # source, destination, accepted on the listener, other
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return counts
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if not link.startswith("socket:["):
            continue
        conn = table.get(link[8:-1])
        if conn is None:
            continue
        lport, rport = conn
        if rport == src_port:
            counts[0] += 1
        elif rport == dst_port:
            counts[1] += 1
        elif listen_lo <= lport <= listen_hi:
            counts[2] += 1
        else:
            counts[3] += 1
    return counts


def _rss_threads(pid):
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, threads


def cmd_sample(pid, mg_bin, mg_addr, mirror, src_port, dst_port, listen_lo, listen_hi, interval, csv_path):
    src_port, dst_port, listen_lo, listen_hi = int(src_port), int(dst_port), int(listen_lo), int(listen_hi)
    interval = float(interval)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    start = time.time()
    prev_t, prev_cpu = start, cpu_seconds(pid)
    with open(csv_path, "w", buffering=1) as out:
        out.write("elapsed_s,rss_kib,cpu_pct,cpu_s,threads,conns_source,conns_destination,conns_listener,conns_other,"
                  "total_lag,not_mirroring,destination_offsets\n")
        next_at = start
        while not stop:
            next_at += interval
            while not stop and time.time() < next_at:
                time.sleep(min(0.2, max(next_at - time.time(), 0)))
            if stop:
                break
            now, cpu = time.time(), cpu_seconds(pid)
            if cpu < 0:
                break
            pct = 100 * (cpu - prev_cpu) / max(now - prev_t, 1e-3)
            prev_t, prev_cpu = now, cpu
            rss, threads = _rss_threads(pid)
            conns = connections(pid, src_port, dst_port, listen_lo, listen_hi)
            try:
                _, lag, nm, _, dst = _lag_summary(_describe(mg_bin, mg_addr, mirror))
            except Exception:  # noqa: BLE001
                lag = nm = dst = ""
            out.write(f"{now - start:.1f},{rss},{pct:.1f},{cpu:.2f},{threads},{conns[0]},{conns[1]},{conns[2]},{conns[3]},"
                      f"{lag},{nm},{dst}\n")


def cmd_soak_summary(csv_path, warmup_s):
    import csv

    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("soak-summary: no samples")
    post = [r for r in rows if float(r["elapsed_s"]) >= float(warmup_s)] or rows
    rss = [int(r["rss_kib"]) for r in post]
    med = statistics.median(rss)
    cpu = [float(r["cpu_pct"]) for r in post]

    def rng(key):
        v = [int(r[key]) for r in rows]
        return f"{min(v)}" if min(v) == max(v) else f"{min(v)}–{max(v)}"

    lags = [int(r["total_lag"]) for r in post if r["total_lag"] != ""]
    print(f"samples={len(rows)}")
    print(f"post_warmup_samples={len(post)}")
    print(f"warmup_s={warmup_s}")
    print(f"rss_first_mib={rss[0] / 1024:.1f}")
    print(f"rss_min_mib={min(rss) / 1024:.1f}")
    print(f"rss_max_mib={max(rss) / 1024:.1f}")
    print(f"rss_median_mib={med / 1024:.1f}")
    print(f"rss_last_mib={rss[-1] / 1024:.1f}")
    print(f"rss_all_min_mib={min(int(r['rss_kib']) for r in rows) / 1024:.1f}")
    print(f"rss_all_max_mib={max(int(r['rss_kib']) for r in rows) / 1024:.1f}")
    print(f"rss_low_pct={100 * (min(rss) - med) / med:+.1f}")
    print(f"rss_high_pct={100 * (max(rss) - med) / med:+.1f}")
    print(f"rss_flat={'yes' if min(rss) >= 0.9 * med and max(rss) <= 1.1 * med else 'no'}")
    print(f"cpu_pct_avg={statistics.mean(cpu):.1f}")
    print(f"cpu_pct_max={max(cpu):.1f}")
    print(f"threads={rng('threads')}")
    print(f"conns_source={rng('conns_source')}")
    print(f"conns_destination={rng('conns_destination')}")
    print(f"conns_listener={rng('conns_listener')}")
    print(f"conns_other={rng('conns_other')}")
    print(f"lag_max={max(lags) if lags else ''}")
    print(f"lag_median={statistics.median(lags) if lags else ''}")


def _pct(sorted_vals, q):
    """Nearest-rank percentile, as LatencyPerf.java computes it."""
    import math

    rank = math.ceil(q / 100.0 * len(sorted_vals))
    return sorted_vals[max(0, min(len(sorted_vals) - 1, rank - 1))]


def cmd_latency_paired(direct_file, proxy_file, block="2000"):
    import random

    sides = {}
    for side, f in (("direct", direct_file), ("proxy", proxy_file)):
        with open(f) as fh:
            sides[side] = [int(line) for line in fh if line.strip()]
    n = min(len(sides["direct"]), len(sides["proxy"]))
    block = int(block)
    if n < block:
        sys.exit(f"latency-paired: {n} pairs, fewer than one block of {block}")
    # Blocks of consecutive pairs: the unit the bootstrap resamples (the machine's noise comes
    # in bursts longer than one send, and hits both sides of a block alike).
    blocks = [(k, min(k + block, n)) for k in range(0, n - block + 1, block)]
    qs = (("p50", 50), ("p99", 99), ("p999", 99.9))

    def pct(side, idx):
        vals = sorted(v for k in idx for v in sides[side][blocks[k][0] : blocks[k][1]])
        return {q: _pct(vals, q) for _, q in qs}

    every = range(len(blocks))
    d, p = pct("direct", every), pct("proxy", every)
    for name, q in qs:
        print(f"direct_{name}_us={d[q]}")
        print(f"proxy_{name}_us={p[q]}")
        print(f"added_{name}_us={p[q] - d[q]}")
    print(f"pairs={blocks[-1][1]}")
    print(f"blocks={len(blocks)}")
    rng = random.Random(1279)
    boot = {q: [] for _, q in qs}
    for _ in range(200):
        idx = [rng.randrange(len(blocks)) for _ in blocks]
        bd, bp = pct("direct", idx), pct("proxy", idx)
        for _, q in qs:
            boot[q].append(bp[q] - bd[q])
    for name, q in qs:
        b = sorted(boot[q])
        print(f"added_{name}_boot90_low_us={_pct(b, 5)}")
        print(f"added_{name}_boot90_high_us={_pct(b, 95)}")


def _spread(values, fmt):
    """ "median (min–max)" of VALUES with FMT, or "—" when there are none."""
    if not values:
        return "—"
    med = fmt.format(statistics.median(values))
    if len(values) == 1:
        return med
    return f"{med} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def cmd_spread(tsv_path, min_copy_s):
    min_ms = float(min_copy_s) * 1000
    runs = {}  # case -> run -> path -> (ms, bytes, records, cpu_s)
    order = []
    with open(tsv_path) as f:
        for line in f:
            case, run, path, ms, nbytes, records, cpu_s = line.rstrip("\n").split("\t")
            if case not in runs:
                order.append(case)
            runs.setdefault(case, {}).setdefault(run, {})[path] = (
                float(ms), int(nbytes), int(records), float(cpu_s))
    print("| case | runs | mirrorgate MB/s | MM2 MB/s | mirrorgate ÷ MM2 (MB/s) "
          "| mirrorgate CPU-s/GB | MM2 CPU-s/GB | MM2 ÷ mirrorgate (CPU-s/GB) |")
    print("|---|---|---|---|---|---|---|---|")
    for case in order:
        mbs = {"mg": [], "mm2": []}
        cpu_gb = {"mg": [], "mm2": []}
        speed_ratio, cpu_ratio, short = [], [], []
        for run, paths in sorted(runs[case].items(), key=lambda kv: int(kv[0])):
            for path, (ms, nbytes, _records, cpu_s) in paths.items():
                mbs[path].append(nbytes / 1e6 / (ms / 1000) if ms > 0 else 0.0)
                cpu_gb[path].append(cpu_s / (nbytes / 1e9) if nbytes else 0.0)
                if ms < min_ms:
                    short.append(f"run {run} {path} {ms / 1000:.1f} s")
            if "mg" in paths and "mm2" in paths:
                if all(p[0] >= min_ms for p in paths.values()):
                    mg, mm = mbs["mg"][-1], mbs["mm2"][-1]
                    speed_ratio.append(mg / mm if mm else 0.0)
                    if cpu_gb["mg"][-1] > 0:
                        cpu_ratio.append(cpu_gb["mm2"][-1] / cpu_gb["mg"][-1])
        unranked = "not ranked: " + ", ".join(short) if short and not speed_ratio else None
        print(f"| {case} | {len(runs[case])} | {_spread(mbs['mg'], '{:.1f}')} "
              f"| {_spread(mbs['mm2'], '{:.1f}')} "
              f"| {unranked or '× ' + _spread(speed_ratio, '{:.2f}')} "
              f"| {_spread(cpu_gb['mg'], '{:.1f}')} | {_spread(cpu_gb['mm2'], '{:.1f}')} "
              f"| {unranked or '× ' + _spread(cpu_ratio, '{:.1f}')} |")
        if short and speed_ratio:
            print(f"\n(case {case}: copies under {min_copy_s} s left out of the ratios: "
                  + ", ".join(short) + ")\n")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {
        "ends": cmd_ends,
        "wait-ends": cmd_wait_ends,
        "log-stats": cmd_log_stats,
        "cpu": cmd_cpu,
        "threads": cmd_threads,
        "cpu-split": cmd_cpu_split,
        "machine-snapshot": cmd_machine_snapshot,
        "machine-since": cmd_machine_since,
        "free-ports": cmd_free_ports,
        "produce-uneven": cmd_produce_uneven,
        "create-topics": cmd_create_topics,
        "seed": cmd_seed,
        "produce-steady": cmd_produce_steady,
        "lag": cmd_lag,
        "wait-lag0": cmd_wait_lag0,
        "sample": cmd_sample,
        "soak-summary": cmd_soak_summary,
        "latency-paired": cmd_latency_paired,
        "spread": cmd_spread,
    }[cmd](*args)
