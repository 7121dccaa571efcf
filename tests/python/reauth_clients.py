#!/usr/bin/env python3
"""librdkafka (confluent-kafka) clients that run for a while, for the KIP-368
re-authentication tests (tests/security_reauth.rs) and the several-instances client test
(tests/scale_out_clients.rs).

  steady --bootstrap B --topic T --seconds S [--interval-ms I] [--prop k=v ...]
      Produces "v-0", "v-1", ... (keys "k-0", ...) round-robin over the topic's
      partitions, one record every I ms (default 100) for S seconds, acks=all.
      Prints "delivered N"; exit 1 on any delivery error.

  roundtrip --bootstrap B --topic T --seconds S [--interval-ms I] [--prop k=v ...]
      One producer and one consumer (partition 0 assigned from the beginning, no
      group) on the same connection settings, side by side for S seconds: produces
      "v-0", "v-1", ... to partition 0 every I ms while consuming, then waits up to
      30 s for the rest (--drain-seconds). Prints "produced N consumed M
      max_ack_gap_ms G max_read_gap_ms R" (the longest wait between two delivery
      reports, and between two consumed records); exit 1 unless the consumed values
      are exactly the produced ones, in order, at offsets 0..N-1.
"""

import argparse
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING


def _props(pairs):
    out = {}
    for kv in pairs or []:
        k, v = kv.split("=", 1)
        out[k] = v
    return out


def steady(args):
    conf = {"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 0}
    conf.update(_props(args.prop))
    p = Producer(conf)
    errors = []
    delivered = [0]

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            delivered[0] += 1

    n = 0
    start = time.time()
    end = start + args.seconds
    while time.time() < end:
        p.produce(args.topic, value=f"v-{n}".encode(), key=f"k-{n}".encode(), on_delivery=on_delivery)
        n += 1
        p.poll(0)
        # Paced by the clock: poll() returns early when a delivery report is served.
        time.sleep(max(0.0, start + n * args.interval_ms / 1000.0 - time.time()))
    p.flush(30)
    for e in errors[:10]:
        print(f"ERROR {e}", file=sys.stderr)
    print(f"delivered {delivered[0]}")
    return 0 if not errors and delivered[0] == n else 1


def roundtrip(args):
    extra = _props(args.prop)
    pconf = {"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 0}
    pconf.update(extra)
    cconf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": "reauth-unused",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 500,
    }
    cconf.update(extra)
    p = Producer(pconf)
    c = Consumer(cconf)
    c.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            mark("ack")

    got = []
    gaps = {"ack": 0.0, "read": 0.0}
    last = {"ack": time.time(), "read": time.time()}

    def mark(kind):
        now = time.time()
        gaps[kind] = max(gaps[kind], now - last[kind])
        last[kind] = now

    def consume(timeout):
        m = c.poll(timeout)
        if m is None:
            return
        if m.error():
            errors.append(str(m.error()))
            return
        mark("read")
        got.append((m.offset(), m.value().decode()))

    n = 0
    start = time.time()
    end = start + args.seconds
    while time.time() < end:
        p.produce(args.topic, value=f"v-{n}".encode(), partition=0, on_delivery=on_delivery)
        n += 1
        p.poll(0)
        next_at = start + n * args.interval_ms / 1000.0
        while time.time() < next_at:
            consume(max(0.0, next_at - time.time()))
    p.flush(args.drain_seconds)
    deadline = time.time() + args.drain_seconds
    while len(got) < n and time.time() < deadline:
        consume(0.5)
    c.close()
    want = [(i, f"v-{i}") for i in range(n)]
    for e in errors[:10]:
        print(f"ERROR {e}", file=sys.stderr)
    print(f"produced {n} consumed {len(got)} max_ack_gap_ms {int(gaps['ack'] * 1000)} max_read_gap_ms {int(gaps['read'] * 1000)}")
    if got != want:
        print(f"ERROR consumed records differ: first {got[:3]}, last {got[-3:]}", file=sys.stderr)
        return 1
    return 0 if not errors else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("steady", "roundtrip"):
        sp = sub.add_parser(name)
        sp.add_argument("--bootstrap", required=True)
        sp.add_argument("--topic", required=True)
        sp.add_argument("--seconds", type=float, required=True)
        sp.add_argument("--interval-ms", type=float, default=100)
        sp.add_argument("--prop", action="append")
        sp.add_argument("--drain-seconds", type=float, default=30)
    args = ap.parse_args()
    return steady(args) if args.cmd == "steady" else roundtrip(args)


if __name__ == "__main__":
    sys.exit(main())
