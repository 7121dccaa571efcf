#!/usr/bin/env python3
"""librdkafka-based (confluent-kafka) test client for mirrorgate.

Run with the venv from scripts/pyenv.sh:

  PY=$(scripts/pyenv.sh)
  $PY tests/python/client.py produce --bootstrap HOST:PORT --topic T --count N \
      [--idempotent] [--prefix P] [--partition P] [--acks all|1|0] [--timeout S]
  $PY tests/python/client.py consume --bootstrap HOST:PORT --topic T --group G --count N \
      [--timeout S] [--isolation read_committed|read_uncommitted] [--offset-reset earliest|latest]
      [--no-commit] [--to-end]

produce: values "P-0".."P-(N-1)" (default prefix "msg"), keys "k-0".."k-(N-1)".
  Prints "delivered N" on stdout. Exit 1 (and prints "ERROR ..." lines) on any
  delivery error or if not all messages were delivered in time.
consume: prints one JSON object per record on stdout:
  {"topic", "partition", "offset", "key", "value", "headers": [[k, v], ...], "timestamp"}
  Stops after N records; exit 1 (with "ERROR ..." on stderr) if fewer than N
  arrive before --timeout seconds (default 30) or on a fatal consumer error.
  With --to-end, goes on after N records until every partition of the topic is at its end
  (high watermark; last stable offset at read_committed) with nothing more to read, so records
  beyond N are printed too (the caller compares counts); exit 1 if that end is not reached
  before --timeout.
  Extra client properties: --prop key=value (repeatable) on both subcommands.
"""

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer


def _props(pairs):
    out = {}
    for kv in pairs or []:
        if "=" not in kv:
            raise SystemExit(f"--prop expects key=value, got {kv!r}")
        k, v = kv.split("=", 1)
        out[k] = v
    return out


def _dec(b):
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b.hex()


def produce(args):
    conf = {
        "bootstrap.servers": args.bootstrap,
        "client.id": "mirrorgate-pyclient",
        "acks": args.acks,
        "enable.idempotence": args.idempotent,
        "message.timeout.ms": int(args.timeout * 1000),
        "linger.ms": 5,
    }
    conf.update(_props(args.prop))
    p = Producer(conf)
    delivered = 0
    errors = []

    def on_delivery(err, msg):
        nonlocal delivered
        if err is not None:
            errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")
        else:
            delivered += 1

    for i in range(args.count):
        kw = {"key": f"k-{i}", "value": f"{args.prefix}-{i}", "on_delivery": on_delivery}
        if args.timestamp_ms is not None:
            kw["timestamp"] = args.timestamp_ms
        if args.partition is not None:
            kw["partition"] = args.partition
        while True:
            try:
                p.produce(args.topic, **kw)
                break
            except BufferError:
                p.poll(0.1)
            except KafkaException as e:
                errors.append(str(e))
                break
        p.poll(0)
    remaining = p.flush(args.timeout)
    print(f"delivered {delivered}", flush=True)
    for e in errors:
        print(f"ERROR {e}", flush=True)
    if remaining:
        print(f"ERROR {remaining} message(s) still undelivered after {args.timeout}s", flush=True)
    return 0 if delivered == args.count and not errors and not remaining else 1


def produce_mixed(args):
    """Varied records for offset-identity tests: keyed and null keys, null and empty values,
    binary headers with duplicate keys, optional records over 1 MiB, one compression codec."""
    import random

    conf = {
        "bootstrap.servers": args.bootstrap,
        "client.id": "mirrorgate-pyclient-mixed",
        "acks": "all",
        "enable.idempotence": True,
        "compression.type": args.codec,
        "linger.ms": 20,
        "batch.size": 1000000,
        "message.max.bytes": 4000000,
        "message.timeout.ms": int(args.timeout * 1000),
    }
    conf.update(_props(args.prop))
    p = Producer(conf)
    rnd = random.Random(args.seed)
    delivered = 0
    errors = []

    def on_delivery(err, msg):
        nonlocal delivered
        if err is not None:
            errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")
        else:
            delivered += 1

    total = args.count + args.big
    for i in range(total):
        key = None if i % 7 == 0 else f"key-{i % 50}".encode()
        if i >= args.count:
            value = rnd.randbytes(1_500_000)
        elif args.compressible:
            value = (f"value-{i}-" * rnd.randint(10, 40)).encode()
        elif i % 11 == 0:
            value = None
        elif i % 13 == 0:
            value = b""
        else:
            value = rnd.randbytes(rnd.randint(1, 200))
        headers = [("h", bytes([i % 256, 0])), ("h", b"dup"), ("bin", rnd.randbytes(4))] if i % 3 == 0 else None
        while True:
            try:
                p.produce(args.topic, key=key, value=value, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    remaining = p.flush(args.timeout)
    print(f"delivered {delivered}", flush=True)
    for e in errors[:10]:
        print(f"ERROR {e}", flush=True)
    return 0 if delivered == total and not errors and not remaining else 1


def consume(args):
    conf = {
        "bootstrap.servers": args.bootstrap,
        "client.id": "mirrorgate-pyclient",
        "group.id": args.group,
        "auto.offset.reset": args.offset_reset,
        "isolation.level": args.isolation,
        "enable.auto.commit": not args.no_commit,
        "enable.partition.eof": bool(args.until_eof or args.to_end),
    }
    conf.update(_props(args.prop))
    c = Consumer(conf)
    assigned = set()
    at_end = {}  # partition -> at its end with nothing read since (--to-end)

    def on_assign(consumer, partitions):
        assigned.update(p.partition for p in partitions)

    c.subscribe([args.topic], on_assign=on_assign)
    got = 0
    rc = 0
    eof = None
    deadline = time.monotonic() + args.timeout

    def more():
        if got < args.count or (args.until_eof and eof is None):
            return True
        return args.to_end and not (assigned and all(at_end.get(p) for p in assigned))

    try:
        while more():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            msg = c.poll(min(left, 1.0))
            if msg is None:
                continue
            err = msg.error()
            if args.to_end:
                at_end[msg.partition()] = err is not None and err.code() == KafkaError._PARTITION_EOF
                if err is not None and err.code() == KafkaError._PARTITION_EOF and not args.until_eof:
                    continue
            if err is not None and args.until_eof and err.code() == KafkaError._PARTITION_EOF:
                # librdkafka raises EOF only once its position reaches the high watermark
                # (the LSO at read_committed).
                if got >= args.count:
                    eof = msg.offset()
                    print(json.dumps({"eof": eof, "partition": msg.partition()}), flush=True)
                continue
            if err is not None:
                if err.fatal() or not err.retriable() and err.code() not in (
                    KafkaError._PARTITION_EOF,
                    KafkaError.UNKNOWN_TOPIC_OR_PART,
                ):
                    print(f"ERROR consumer: {err}", file=sys.stderr, flush=True)
                    rc = 1
                    break
                continue
            rec = {
                "topic": msg.topic(),
                "partition": msg.partition(),
                "offset": msg.offset(),
                "key": _dec(msg.key()),
                "value": _dec(msg.value()),
                "headers": [[k, _dec(v)] for k, v in (msg.headers() or [])],
                "timestamp": msg.timestamp()[1],
                "timestamp_type": msg.timestamp()[0],
            }
            print(json.dumps(rec), flush=True)
            got += 1
    finally:
        try:
            if got and not args.no_commit:
                c.commit(asynchronous=False)
        except KafkaException:
            pass
        c.close()
    if rc == 0 and args.until_eof and eof is None:
        print(f"ERROR no partition EOF within {args.timeout}s", file=sys.stderr, flush=True)
        rc = 1
    if rc == 0 and got >= args.count and args.to_end and more():
        ends = {p: bool(at_end.get(p)) for p in sorted(assigned)}
        print(f"ERROR {got} record(s) read but not every partition at its end within {args.timeout}s: {ends}", file=sys.stderr, flush=True)
        rc = 1
    if rc == 0 and got < args.count:
        print(f"ERROR only {got} of {args.count} record(s) received within {args.timeout}s",
              file=sys.stderr, flush=True)
        rc = 1
    return rc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    pp = sub.add_parser("produce")
    pp.add_argument("--bootstrap", required=True)
    pp.add_argument("--topic", required=True)
    pp.add_argument("--count", type=int, required=True)
    pp.add_argument("--idempotent", action="store_true")
    pp.add_argument("--prefix", default="msg")
    pp.add_argument("--partition", type=int)
    pp.add_argument("--acks", default="all")
    pp.add_argument("--timeout", type=float, default=30.0)
    pp.add_argument("--prop", action="append")
    pp.add_argument("--timestamp-ms", type=int, help="CreateTime of every record, ms since the epoch")

    mp = sub.add_parser("produce-mixed", help="varied records (keys, nulls, headers, big values) with one codec")
    mp.add_argument("--bootstrap", required=True)
    mp.add_argument("--topic", required=True)
    mp.add_argument("--count", type=int, required=True)
    mp.add_argument("--big", type=int, default=0, help="extra records of 1.5 MB")
    mp.add_argument("--codec", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    mp.add_argument("--seed", type=int, default=1)
    mp.add_argument("--timeout", type=float, default=60.0)
    mp.add_argument("--prop", action="append", help="producer property key=value (overrides the defaults)")
    mp.add_argument("--compressible", action="store_true",
                    help="values of 100-600 B that compress well, never null or empty (librdkafka sends a batch "
                         "uncompressed when compression does not make it smaller)")

    cp = sub.add_parser("consume")
    cp.add_argument("--bootstrap", required=True)
    cp.add_argument("--topic", required=True)
    cp.add_argument("--group", required=True)
    cp.add_argument("--count", type=int, required=True)
    cp.add_argument("--timeout", type=float, default=30.0)
    cp.add_argument("--isolation", choices=["read_committed", "read_uncommitted"], default="read_committed")
    cp.add_argument("--offset-reset", choices=["earliest", "latest"], default="earliest")
    cp.add_argument("--no-commit", action="store_true")
    cp.add_argument("--prop", action="append")
    cp.add_argument("--to-end", action="store_true",
                    help="after --count records, read on to the end of every partition (records past N printed too)")
    cp.add_argument("--until-eof", action="store_true",
                    help="after --count records, wait for the partition EOF and print {\"eof\": offset}")

    args = ap.parse_args(argv)
    if args.cmd == "produce-mixed":
        return produce_mixed(args)
    return produce(args) if args.cmd == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
