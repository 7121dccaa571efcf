"""The fault runner's workload: real librdkafka producers writing to the source cluster for
the whole run (plain, lz4/zstd/gzip-compressed, compacted with rewritten keys, and
transactional topics with committed and aborted transactions).

Every producer runs in its own thread, paced at a modest rate (times `FAULTS_RATE_SCALE`,
default 1), with acks=all and idempotence; `message.timeout.ms=0` (librdkafka: never time
out) so a record is never given up while a broker or the network is down.

The workload is part of the verdict (`verdict.workload_problems`): every delivered record is
kept in the `Ledger` with its offset (what the checker judges compacted topics from); every
producer error and transactional error is kept with its time, and the record or transaction
it hit is written again; records still undelivered when the producers stop are counted.

`f-txn` has two transactional producers: short transactions (1..10 records over both
partitions) and long ones (a record every 0.3-0.8 s for 2-6 s, so a transaction spans
several of mirrorgate's fetches and overlaps the short ones); about 30% / 40% aborted. Every
transaction is flushed before it ends, so an aborted transaction's records are on the source
log (librdkafka purges what is still queued at abort) and mirrorgate has aborted records to
copy.
"""

import os
import random
import threading
import time

from confluent_kafka import KafkaError, KafkaException, Producer

# (topic, partitions, topic configs, producer overrides, records per second, kind)
TOPICS = [
    ("f-plain", 3, {}, {"compression.type": "none"}, 12, "plain"),
    ("f-lz4", 2, {}, {"compression.type": "lz4"}, 8, "plain"),
    ("f-zstd", 2, {}, {"compression.type": "zstd"}, 8, "plain"),
    ("f-gzip", 2, {}, {"compression.type": "gzip"}, 8, "plain"),
    (
        "f-compact",
        2,
        {
            "cleanup.policy": "compact",
            "segment.ms": "5000",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "1000",
        },
        {"compression.type": "none"},
        12,
        "compact",
    ),
    ("f-txn", 2, {}, {"compression.type": "none"}, 10, "txn"),
]

# Keys of the compacted topic: few, so the cleaner finds many older copies to delete.
COMPACT_KEYS = 40


def rate_scale():
    return float(os.environ.get("FAULTS_RATE_SCALE", "1"))


class Ledger:
    """Every record the workload got a delivery report for: {(topic, partition): {offset:
    (key, value)}}, and for transactional records their transaction's outcome."""

    def __init__(self):
        self.lock = threading.Lock()
        self.records = {}
        self.aborted = {}  # (topic, partition) -> set of offsets of aborted records on the log

    def add(self, msg):
        with self.lock:
            self.records.setdefault((msg.topic(), msg.partition()), {})[msg.offset()] = (msg.key(), msg.value())

    def mark_aborted(self, offsets):
        with self.lock:
            for tp, o in offsets:
                self.aborted.setdefault(tp, set()).add(o)

    def of(self, tp):
        """A copy of one partition's {offset: (key, value)}."""
        with self.lock:
            return dict(self.records.get(tp, {}))

    def aborted_count(self):
        with self.lock:
            return sum(len(v) for v in self.aborted.values())


class Stats:
    """Counters shared by the producer threads (guarded by a lock). `errors` holds every
    producer or transactional error as (time, topic, text, retried)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.delivered = {}
        self.errors = []
        self.undelivered = {}
        self.committed_txns = 0
        self.aborted_txns = 0
        self.long_txns = {"committed": 0, "aborted": 0}

    def add(self, field, topic, n=1):
        with self.lock:
            d = getattr(self, field)
            d[topic] = d.get(topic, 0) + n

    def error(self, topic, text, retried=True):
        with self.lock:
            self.errors.append((time.time(), topic, text, retried))

    def snapshot(self):
        with self.lock:
            return {
                "delivered": dict(self.delivered),
                "errors": len(self.errors),
                "undelivered": dict(self.undelivered),
                "committed_txns": self.committed_txns,
                "aborted_txns": self.aborted_txns,
                "long_txns": dict(self.long_txns),
            }


def _base_conf(bootstrap, extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "message.timeout.ms": 0,
        "linger.ms": 50,
        "socket.timeout.ms": 10000,
        "reconnect.backoff.max.ms": 2000,
        "log_level": 2,
    }
    conf.update(extra)
    return conf


def _headers(seq):
    if seq % 3 == 0:
        return None
    return [("seq", str(seq).encode()), ("h2", b"" if seq % 5 == 0 else b"\x00\xffv")]


class Workload:
    """Starts the producer threads; `stop()` flushes them and joins."""

    def __init__(self, bootstrap, seed, log):
        self.bootstrap = bootstrap
        self.rng = random.Random(seed ^ 0x5EED)
        self.log = log
        self.stats = Stats()
        self.ledger = Ledger()
        self.stopping = threading.Event()
        self.threads = []
        self.scale = rate_scale()

    def start(self):
        for topic, partitions, _, extra, rate, kind in TOPICS:
            seed = self.rng.randrange(1 << 30)
            rate = int(round(rate * self.scale))
            loops = [("short", self._txn_loop), ("long", self._txn_loop)] if kind == "txn" else [(kind, self._plain_loop)]
            for flavour, target in loops:
                t = threading.Thread(
                    target=target,
                    args=(topic, partitions, extra, rate, flavour, seed + len(self.threads)),
                    name=f"produce-{topic}-{flavour}",
                    daemon=True,
                )
                t.start()
                self.threads.append(t)

    def stop(self, timeout=300):
        self.stopping.set()
        deadline = time.time() + timeout
        for t in self.threads:
            t.join(max(1, deadline - time.time()))
        return [t.name for t in self.threads if t.is_alive()]

    def _plain_loop(self, topic, partitions, extra, rate, kind, seed):
        rng = random.Random(seed)
        p = Producer(_base_conf(self.bootstrap, extra))
        retry = []  # (value, key, partition, headers) of records whose delivery failed

        def on_delivery(err, msg):
            if err is None:
                self.stats.add("delivered", topic)
                self.ledger.add(msg)
            else:
                self.stats.error(topic, f"produce error: {err}")
                self.log(f"produce error on {topic}: {err} (written again)")
                retry.append((msg.value(), msg.key(), msg.partition(), msg.headers()))

        def send(value, key, part, headers):
            while True:
                try:
                    p.produce(topic, value=value, key=key, partition=part, headers=headers, on_delivery=on_delivery)
                    return
                except BufferError:
                    p.poll(0.5)

        seq = 0
        while not self.stopping.is_set():
            while retry:
                send(*retry.pop(0))
            for _ in range(rate):
                if kind == "compact":
                    key = f"key-{rng.randrange(COMPACT_KEYS)}".encode()
                else:
                    key = None if seq % 7 == 0 else f"k{seq % 500}".encode()
                value = f"{topic}|{seq}|".encode() + bytes(rng.randrange(256) for _ in range(rng.randrange(8, 120)))
                send(value, key, rng.randrange(partitions), _headers(seq))
                seq += 1
            p.poll(0)
            self.stopping.wait(1.0)
            p.poll(0)
        left = p.flush(240)
        while retry and not left:
            send(*retry.pop(0))
            left = p.flush(60)
        if left or retry:
            self.stats.add("undelivered", topic, left + len(retry))
            self.log(f"WARNING: {left + len(retry)} records of {topic} still undelivered at the end")

    def _txn_loop(self, topic, partitions, extra, rate, flavour, seed):
        """Transactions until stopped; one whose outcome is not the one asked for (an error)
        is written again, as a new transaction, until it gets that outcome."""
        rng = random.Random(seed)
        seq = 0
        pending = None  # (records, abort) of a transaction to write again
        while not self.stopping.is_set():
            conf = _base_conf(self.bootstrap, extra)
            conf.update({"transactional.id": f"faults-txn-{flavour}-{seed}", "transaction.timeout.ms": 60000, "linger.ms": 5})
            p = Producer(conf)
            try:
                p.init_transactions(120)
            except KafkaException as e:
                self.stats.error(topic, f"{flavour} txn producer init failed: {e}")
                self.log(f"{flavour} txn producer init failed ({e}); retrying")
                self.stopping.wait(2)
                continue
            while not self.stopping.is_set() or pending:
                if pending is None:
                    n = rng.randrange(1, rate + 1) if rate > 0 else 0
                    if flavour == "long":
                        n = rng.randrange(4, 12) if rate > 0 else 0
                    abort = rng.random() < (0.4 if flavour == "long" else 0.3)
                    records = []
                    for _ in range(n):
                        value = f"{topic}|{flavour}|{seq}|{'A' if abort else 'C'}|".encode() + bytes(rng.randrange(256) for _ in range(rng.randrange(8, 60)))
                        records.append((value, f"t{seq % 300}".encode(), rng.randrange(partitions), _headers(seq)))
                        seq += 1
                    pending = (records, abort)
                if not pending[0]:
                    pending = None
                    self.stopping.wait(1)
                    continue
                outcome = self._one_txn(p, topic, flavour, rng, *pending)
                if outcome == "done":
                    pending = None
                elif outcome == "new producer":
                    break
                self.stopping.wait(rng.uniform(0.3, 1.2))
            try:
                p.flush(30)
            except Exception:  # noqa: BLE001 - a broken producer is replaced anyway
                pass
            if self.stopping.is_set() and pending is None:
                break

    def _one_txn(self, p, topic, flavour, rng, records, abort):
        """Writes one transaction: 'done' (the outcome asked for), 'again' (ended otherwise:
        write it again) or 'new producer' (the producer is unusable)."""
        delivered = []

        def on_delivery(err, msg):
            if err is None:
                delivered.append(msg)

        try:
            p.begin_transaction()
            for value, key, part, headers in records:
                p.produce(topic, value=value, key=key, partition=part, headers=headers, on_delivery=on_delivery)
                if flavour == "long":
                    p.poll(0)
                    time.sleep(rng.uniform(0.3, 0.8))
            # On the log before the end, aborted or not (an abort purges what is queued).
            left = p.flush(120)
            if left:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{left} records not flushed in 120 s", retriable=True))
            if abort:
                p.abort_transaction(120)
            else:
                p.commit_transaction(120)
            p.poll(0)
            self._settle(topic, flavour, delivered, abort)
            return "done"
        except KafkaException as e:
            err = e.args[0] if e.args else None
            self.stats.error(topic, f"{flavour} transaction ({'abort' if abort else 'commit'} of {len(records)}): {e}")
            if isinstance(err, KafkaError) and err.retriable() and not err.txn_requires_abort():
                # Outcome unknown: retry the same call as librdkafka asks.
                try:
                    p.abort_transaction(120) if abort else p.commit_transaction(120)
                    p.poll(0)
                    self._settle(topic, flavour, delivered, abort)
                    return "done"
                except KafkaException as e2:
                    self.stats.error(topic, f"{flavour} transaction retry: {e2}")
                    err = e2.args[0] if e2.args else None
            if isinstance(err, KafkaError) and err.txn_requires_abort():
                try:
                    p.abort_transaction(120)
                    p.poll(0)
                    self._settle(topic, flavour, delivered, True)
                    return "done" if abort else "again"
                except KafkaException:
                    return "new producer"
            self.log(f"{flavour} txn producer error ({e}); new producer, the transaction written again")
            return "new producer"

    def _settle(self, topic, flavour, delivered, aborted):
        for m in delivered:
            self.ledger.add(m)
        with self.stats.lock:
            if aborted:
                self.stats.aborted_txns += 1
            else:
                self.stats.committed_txns += 1
                self.stats.delivered[topic] = self.stats.delivered.get(topic, 0) + len(delivered)
            if flavour == "long":
                self.stats.long_txns["aborted" if aborted else "committed"] += 1
        if aborted:
            self.ledger.mark_aborted([((m.topic(), m.partition()), m.offset()) for m in delivered])
