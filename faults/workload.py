"""The fault runner's workload: real librdkafka producers writing to the source cluster for
the whole run (plain, lz4/zstd/gzip-compressed, compacted with rewritten keys, and
transactional topics with committed and aborted transactions).

Every producer runs in its own thread, paced at a modest rate, with acks=all and
idempotence; `message.timeout.ms=0` (librdkafka: never time out) so a record is never given
up while a broker or the network is down. Counters are kept per topic for the report.
"""

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


class Stats:
    """Per-topic counters shared by the producer threads (guarded by a lock)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.delivered = {}
        self.errors = {}
        self.committed_txns = 0
        self.aborted_txns = 0
        self.txn_errors = 0

    def add(self, field, topic, n=1):
        with self.lock:
            d = getattr(self, field)
            d[topic] = d.get(topic, 0) + n

    def snapshot(self):
        with self.lock:
            return {
                "delivered": dict(self.delivered),
                "errors": dict(self.errors),
                "committed_txns": self.committed_txns,
                "aborted_txns": self.aborted_txns,
                "txn_errors": self.txn_errors,
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
    """Starts one producer thread per topic; `stop()` flushes them and joins."""

    def __init__(self, bootstrap, seed, log):
        self.bootstrap = bootstrap
        self.rng = random.Random(seed ^ 0x5EED)
        self.log = log
        self.stats = Stats()
        self.stopping = threading.Event()
        self.threads = []

    def start(self):
        for topic, partitions, _, extra, rate, kind in TOPICS:
            seed = self.rng.randrange(1 << 30)
            target = self._txn_loop if kind == "txn" else self._plain_loop
            t = threading.Thread(
                target=target, args=(topic, partitions, extra, rate, kind, seed), name=f"produce-{topic}", daemon=True
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

        def on_delivery(err, msg):
            if err is None:
                self.stats.add("delivered", topic)
            else:
                self.stats.add("errors", topic)
                self.log(f"produce error on {topic}: {err}")

        seq = 0
        while not self.stopping.is_set():
            for _ in range(rate):
                if kind == "compact":
                    key = f"key-{rng.randrange(COMPACT_KEYS)}".encode()
                else:
                    key = None if seq % 7 == 0 else f"k{seq % 500}".encode()
                value = f"{topic}|{seq}|".encode() + bytes(rng.randrange(256) for _ in range(rng.randrange(8, 120)))
                part = rng.randrange(partitions)
                while True:
                    try:
                        p.produce(topic, value=value, key=key, partition=part, headers=_headers(seq), on_delivery=on_delivery)
                        break
                    except BufferError:
                        p.poll(0.5)
                seq += 1
            p.poll(0)
            self.stopping.wait(1.0)
            p.poll(0)
        left = p.flush(240)
        if left:
            self.log(f"WARNING: {left} records of {topic} still undelivered at the end")

    def _txn_loop(self, topic, partitions, extra, rate, kind, seed):
        """Transactions of 1..rate records over the topic's partitions; about 30% aborted."""
        rng = random.Random(seed)
        seq = 0
        generation = 0
        while not self.stopping.is_set():
            generation += 1
            conf = _base_conf(self.bootstrap, extra)
            conf.update({"transactional.id": f"faults-txn-{seed}", "transaction.timeout.ms": 60000, "linger.ms": 5})
            p = Producer(conf)
            try:
                p.init_transactions(120)
            except KafkaException as e:
                self.log(f"txn producer init failed ({e}); retrying")
                with self.stats.lock:
                    self.stats.txn_errors += 1
                self.stopping.wait(2)
                continue
            while not self.stopping.is_set():
                n = rng.randrange(1, rate + 1)
                abort = rng.random() < 0.3
                try:
                    p.begin_transaction()
                    for _ in range(n):
                        value = f"{topic}|{seq}|{'A' if abort else 'C'}|".encode() + bytes(rng.randrange(256) for _ in range(rng.randrange(8, 60)))
                        p.produce(topic, value=value, key=f"t{seq % 300}".encode(), partition=rng.randrange(partitions), headers=_headers(seq))
                        seq += 1
                    if abort:
                        p.abort_transaction(120)
                    else:
                        p.commit_transaction(120)
                    with self.stats.lock:
                        if abort:
                            self.stats.aborted_txns += 1
                        else:
                            self.stats.committed_txns += 1
                            self.stats.delivered[topic] = self.stats.delivered.get(topic, 0) + n
                except KafkaException as e:
                    err = e.args[0] if e.args else None
                    with self.stats.lock:
                        self.stats.txn_errors += 1
                    if isinstance(err, KafkaError) and err.txn_requires_abort():
                        try:
                            p.abort_transaction(120)
                        except KafkaException:
                            break
                    elif isinstance(err, KafkaError) and err.retriable():
                        # commit/abort outcome unknown: retry the same call as librdkafka asks
                        try:
                            if abort:
                                p.abort_transaction(120)
                            else:
                                p.commit_transaction(120)
                        except KafkaException:
                            break
                    else:
                        self.log(f"txn producer error ({e}); new producer")
                        break
                self.stopping.wait(rng.uniform(0.3, 1.2))
            try:
                p.flush(30)
            except Exception:  # noqa: BLE001 - a broken producer is replaced anyway
                pass
