"""Tailing consumers of the fault runner: every record is checked against the source as it
arrives, during the faults, so a transient exposure (a duplicate marker served for a moment, an
unmapped offset, an aborted record shown at read_committed) is caught when it happens, not only
in the views read afterwards.

- Two source tails (read_uncommitted, read_committed) read every partition from offset 0 and
  keep what the source shows at each level, and how far they have read.
- A destination tail per (mirrorgate instance, isolation level) reads through that instance
  only (its bootstrap address: each instance advertises its own ports), and one per level
  reads the destination directly (offsets translated to source offsets by the offset map of
  `mirrors --describe`, fetched after the record arrived; placeholders left out).
- Every second the verifier takes each destination record whose offset the source tail of its
  level has read past and judges it with `compare.compare_view` over the span since the tail's
  previous record: the record itself (same offset, key, value, headers, timestamp as the
  source's at that level), the source records in between (skipped ones are missing, except on
  the compacted topic where a later record of its key was written), and the order (an offset
  served twice or going back).

Consumers use `assign` (no group) and `auto.offset.reset=error`: a position out of range is
reported (`resets`) and the tail continues after its last record.
"""

import threading
import time

import compare
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

LEVELS = ("read_uncommitted", "read_committed")


def _record(msg):
    ts_type, ts = msg.timestamp()
    headers = tuple((k, v) for k, v in (msg.headers() or []))
    return (msg.offset(), msg.key(), msg.value(), headers, ts_type, ts)


class _Reader:
    """One consumer in a thread: `on_record(tp, record)` for each record, `on_eof(tp, position)`
    at each end of partition."""

    def __init__(self, name, bootstrap, level, parts, on_record, on_eof, on_error, stopping):
        self.name, self.bootstrap, self.level, self.parts = name, bootstrap, level, parts
        self.on_record, self.on_eof, self.on_error, self.stopping = on_record, on_eof, on_error, stopping
        self.next = {tp: 0 for tp in parts}
        self.thread = threading.Thread(target=self._loop, name=f"tail-{name}", daemon=True)

    def _consumer(self):
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"faults-tail-{self.name}-{time.time_ns()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": self.level,
                "auto.offset.reset": "error",
                "fetch.wait.max.ms": 200,
                "socket.timeout.ms": 10000,
                "reconnect.backoff.max.ms": 1000,
                "topic.metadata.refresh.interval.ms": 5000,
                "log_level": 2,
            }
        )
        c.assign([TopicPartition(t, p, self.next[(t, p)] or OFFSET_BEGINNING) for (t, p) in self.parts])
        return c

    def _loop(self):
        c = self._consumer()
        try:
            while not self.stopping.is_set():
                reset = False
                for m in c.consume(500, 0.5):
                    err = m.error()
                    tp = (m.topic(), m.partition())
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            self.on_eof(tp, m.offset())
                        elif err.code() == KafkaError._AUTO_OFFSET_RESET:
                            self.on_error(f"{self.name}: position out of range ({err.str()}); going on after its last record")
                            reset = True
                        continue
                    if tp in self.next:
                        self.next[tp] = m.offset() + 1
                        self.on_record(tp, _record(m))
                if reset:
                    c.close()
                    c = self._consumer()
        finally:
            c.close()


class Tails:
    """The source tails, the destination tails and the verifier. `run` gets violations
    (`run.violation`) and log lines; `ledger(tp)` is what the workload wrote; `segments()`
    returns {tp: offset map} from `mirrors --describe` (None when unavailable);
    `aborted_hidden_ok` as in `compare.compare_view` (placeholder markers)."""

    def __init__(self, run, parts, compacted, ledger, segments, aborted_hidden_ok=False):
        self.run, self.parts, self.compacted, self.ledger, self.segments_fn = run, parts, compacted, ledger, segments
        self.aborted_hidden_ok = aborted_hidden_ok
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.source = {lv: {tp: {} for tp in parts} for lv in LEVELS}
        self.source_pos = {lv: {tp: 0 for tp in parts} for lv in LEVELS}
        self.readers = []
        self.queues = {}  # tail name -> [(received at, tp, record)]
        self.state = {}  # tail name -> {"level", "direct", "last": {tp: source offset}, "checked", "problems", "resets"}
        self.segments, self.segments_at = None, 0.0
        self._ledgers = {}
        self.verifier = threading.Thread(target=self._verify_loop, name="tail-verifier", daemon=True)

    def add_source(self, bootstrap):
        for lv in LEVELS:

            def on_record(tp, r, lv=lv):
                with self.lock:
                    self.source[lv][tp][r[0]] = r
                    self.source_pos[lv][tp] = max(self.source_pos[lv][tp], r[0] + 1)

            def on_eof(tp, pos, lv=lv):
                with self.lock:
                    self.source_pos[lv][tp] = max(self.source_pos[lv][tp], pos)

            self.readers.append(_Reader(f"source-{lv}", bootstrap, lv, self.parts, on_record, on_eof, self._reset, self.stopping))

    def add_destination(self, name, bootstrap, direct):
        for lv in LEVELS:
            tail = f"{name}-{lv}"
            self.queues[tail] = []
            self.state[tail] = {"level": lv, "direct": direct, "last": {}, "checked": 0, "problems": 0, "resets": 0}

            def on_record(tp, r, tail=tail):
                with self.lock:
                    self.queues[tail].append((time.time(), tp, r))

            def on_error(text, tail=tail):
                self.state[tail]["resets"] += 1
                self._reset(text)

            self.readers.append(_Reader(tail, bootstrap, lv, self.parts, on_record, lambda tp, pos: None, on_error, self.stopping))

    def _reset(self, text):
        self.run.log(f"tail: {text}", event=False)

    def start(self):
        for r in self.readers:
            r.thread.start()
        self.verifier.start()

    def stop(self):
        """Stops the consumers after a last verification pass; returns the figures."""
        self._verify()
        self.stopping.set()
        for r in self.readers:
            r.thread.join(30)
        self.verifier.join(30)
        self._verify()
        return self.figures()

    def figures(self):
        with self.lock:
            return {
                t: {"checked": s["checked"], "problems": s["problems"], "unverified": len(self.queues[t]), "resets": s["resets"]}
                for t, s in self.state.items()
            }

    def _verify_loop(self):
        while not self.stopping.wait(1.0):
            try:
                self._verify()
            except Exception as e:  # noqa: BLE001 - a verifier error is logged, the run goes on
                self.run.log(f"tail verifier error: {e!r}", event=False)

    def _refresh_segments(self):
        if time.time() - self.segments_at >= 3:
            t = time.time()
            seg = self.segments_fn()
            if seg is not None:
                self.segments, self.segments_at = seg, t

    def _verify(self):
        self._ledgers = {}
        if any(s["direct"] for s in self.state.values()):
            self._refresh_segments()
        for tail, st in self.state.items():
            with self.lock:
                queue = self.queues[tail]
                ready, keep = [], []
                for item in queue:
                    recv, tp, r = item
                    if st["direct"]:
                        if self.segments is None or recv > self.segments_at or tp not in self.segments:
                            keep.append(item)
                            continue
                        ph = compare.placeholder_source_offset(r[1], r[2])
                        off = ph if ph is not None else compare.source_offset(r[0], self.segments[tp])
                        item = (recv, tp, (off,) + tuple(r[1:]) if ph is None else None, off)
                    else:
                        item = (recv, tp, r, r[0])
                    if item[3] < self.source_pos[st["level"]][tp] and not keep_pending(keep, tp):
                        ready.append(item)
                    else:
                        keep.append((recv, tp, r))
                self.queues[tail] = keep
            for recv, tp, r, off in ready:
                self._judge(tail, st, tp, r, off, recv)

    def _judge(self, tail, st, tp, r, off, recv):
        lv = st["level"]
        other = "read_committed" if lv == "read_uncommitted" else "read_uncommitted"
        prev = st["last"].get(tp, -1)
        with self.lock:
            src = [x for o, x in self.source[lv][tp].items() if prev < o <= off]
            oth = [x for o, x in self.source[other][tp].items() if prev < o <= off]
        if r is None:
            # A placeholder read directly: it stands for an offset the source shows nothing
            # at (judged when the next real record comes: a source record there is missing).
            return
        st["checked"] += 1
        if off <= prev:
            problems = [f"[{'duplicate' if off == prev else 'reorder'}] offset {off} served after offset {prev}: {compare.describe_record(r)}"]
        else:
            st["last"][tp] = off
            compacted = tp[0] in self.compacted
            problems = compare.compare_view(
                sorted(src),
                [r],
                off + 1,
                start=prev + 1,
                level=lv,
                other_source=sorted(oth),
                compacted=compacted,
                # (The ledger's records between the two, which the source tail never saw, are
                # left to the checks: a scan of the whole ledger per record is too slow.)
                written=self._ledger(tp) if compacted else None,
                read_end=float("inf"),
                aborted_hidden_ok=self.aborted_hidden_ok,
            )
        if problems:
            st["problems"] += 1
            self.run.violation(tp, f"tailing consumer {tail} ({'direct' if st['direct'] else 'through mirrorgate'}) at {lv}", problems, recv, time.time())


    def _ledger(self, tp):
        """What the workload wrote to `tp` (a `compare.Written`), built once per verification
        pass."""
        if tp not in self._ledgers:
            self._ledgers[tp] = compare.Written(self.ledger(tp), [])
        return self._ledgers[tp]


def keep_pending(keep, tp):
    """True when an earlier record of `tp` is still waiting: records of a partition are judged
    in the order they arrived."""
    return any(k[1] == tp for k in keep)
