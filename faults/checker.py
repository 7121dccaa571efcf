"""The fault runner's checker: the prefix invariant of every mirror partition, at each
isolation level, through mirrorgate and directly on the destination.

A check (`check`) takes the destination end E of every partition through mirrorgate
(ListOffsets at read_committed: mirrorgate's last stable offset, in source offsets) and reads:

- the destination THROUGH mirrorgate (every live instance in the bootstrap list) at
  read_uncommitted and at read_committed, from offset 0 up to E;
- the destination DIRECTLY (what a consumer migrated off mirrorgate sees) at both levels up to
  its own ends, translated to source offsets through the offset map of
  `mirrors --describe --json` (a hidden duplicate marker shifts a direct reader's offsets);
  placeholder records are left out and remembered (`compare.direct_to_source`);
- the source directly at read_uncommitted and at read_committed up to E.

Each destination view is compared with the source view of the SAME isolation level
(`compare.compare_view`, whose docstring says what must hold): aborted records are on the
source log (the workload flushes before it aborts) and, with real markers, on the destination
as aborted records, so read_uncommitted shows them on both sides at the same offsets and
read_committed on neither. Compacted topics are read to their current ends on both sides and
judged from what the workload wrote (its ledger).

A view that cannot be read to its end within the time limit is *inconclusive*: counted, and
judged by `verdict` (the final check must be conclusive; more than 10 % inconclusive views in
a run fails it).
"""

import json
import os
import time

import compare
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition


def _record(msg):
    ts_type, ts = msg.timestamp()
    headers = tuple((k, v) for k, v in (msg.headers() or []))
    return (msg.offset(), msg.key(), msg.value(), headers, ts_type, ts)


class ReadResult:
    def __init__(self):
        self.records = {}  # (topic, partition) -> [record]
        self.incomplete = {}  # (topic, partition) -> reason


def read_views(bootstrap, isolation, targets, timeout_s, label):
    """Reads every partition of `targets` ({(topic, partition): end}) from offset 0 up to
    (excluding) its end; returns a ReadResult. A partition not read to its end within
    `timeout_s` is listed in `incomplete` (an inconclusive read, not a violation)."""
    res = ReadResult()
    pending = {tp: e for tp, e in targets.items() if e > 0}
    for tp in targets:
        res.records[tp] = []
    if not pending:
        return res
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"faults-check-{label}-{time.time_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 200,
            "socket.timeout.ms": 10000,
            "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": 5000,
            "log_level": 2,
        }
    )
    try:
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for (t, p) in pending])
        deadline = time.time() + timeout_s
        while pending and time.time() < deadline:
            msgs = c.consume(500, 1.0)
            done = []
            for m in msgs:
                tp = (m.topic(), m.partition())
                if tp not in pending:
                    continue
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        pos = c.position([TopicPartition(tp[0], tp[1])])[0].offset
                        if pos >= pending[tp]:
                            done.append(tp)
                    continue
                if m.offset() < pending[tp]:
                    res.records[tp].append(_record(m))
                if m.offset() >= pending[tp] - 1:
                    done.append(tp)
            if done:
                gone = [TopicPartition(t, p) for (t, p) in set(done) if (t, p) in pending]
                if gone:
                    c.pause(gone)
                for tp in set(done):
                    pending.pop(tp, None)
        for tp, e in pending.items():
            got = res.records[tp][-1][0] if res.records[tp] else -1
            res.incomplete[tp] = f"{label}: read to offset {got} of end {e} within {timeout_s}s"
    finally:
        c.close()
    return res


def end_offsets(bootstrap, partitions, timeout_s=30, isolation="read_committed"):
    """{(topic, partition): end} read with ListOffsets through `bootstrap`: the last stable
    offset at read_committed, the high watermark at read_uncommitted (librdkafka sends the
    consumer's isolation level)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"faults-ends-{time.time_ns()}", "enable.auto.commit": False, "isolation.level": isolation, "log_level": 2})
    try:
        out = {}
        for t, p in partitions:
            # Leader moves and broker restarts answer NOT_LEADER_OR_FOLLOWER or
            # OFFSET_NOT_AVAILABLE (a new leader's high watermark not caught up) for a while.
            deadline = time.time() + 60
            while True:
                try:
                    _, hi = c.get_watermark_offsets(TopicPartition(t, p), timeout=timeout_s)
                    break
                except KafkaException:
                    if time.time() > deadline:
                        raise
                    time.sleep(1)
            out[(t, p)] = hi
        return out
    finally:
        c.close()


LEVELS = ("read_uncommitted", "read_committed")
OTHER = {"read_uncommitted": "read_committed", "read_committed": "read_uncommitted"}


def check_timeout(final):
    """Seconds a check may spend reading one view (FAULTS_CHECK_TIMEOUT overrides both)."""
    if os.environ.get("FAULTS_CHECK_TIMEOUT"):
        return float(os.environ["FAULTS_CHECK_TIMEOUT"])
    return 600 if final else 240


class Check:
    """One full check of every mirror partition (see the module docstring). `run` collects
    violations and counts (`run.violation`, `run.log`, `run.checks`); `partitions` lists the
    (topic, partition) pairs, `compacted` the compacted topics; `segments` maps a partition to
    its offset map (None: direct views are inconclusive); `ledger(tp)` gives what the workload
    wrote; `aborted_hidden_ok` accepts aborted records missing at read_uncommitted
    (placeholder markers)."""

    def __init__(self, run, partitions, compacted, ledger, aborted_hidden_ok=False):
        self.run, self.parts, self.compacted, self.ledger = run, partitions, compacted, ledger
        self.aborted_hidden_ok = aborted_hidden_ok

    def _read(self, bootstrap, level, targets, timeout, label):
        try:
            return read_views(bootstrap, level, targets, timeout, label)
        except Exception as e:  # noqa: BLE001 - a read that fails is inconclusive
            res = ReadResult()
            for tp in targets:
                res.records[tp] = []
                res.incomplete[tp] = f"{label}: {e!r}"
            return res

    def run_check(self, mg_bootstrap, src_bootstrap, dst_bootstrap, segments_fn, final=False):
        """Reads and compares; returns E ({tp: end through mirrorgate}) or None when the ends
        could not be read (every view inconclusive). `segments_fn()` gives the offset maps
        ({tp: map}) of `mirrors --describe --json`, or None."""
        run, parts = self.run, self.parts
        segments = segments_fn()
        t_from = time.time()
        timeout = check_timeout(final)
        n_views = 4 * len(parts)
        try:
            ends = end_offsets(mg_bootstrap, parts)
        except Exception as e:  # noqa: BLE001 - mirrorgate may be down right now
            run.log(f"check inconclusive: destination ends unavailable through mirrorgate ({e})", event=False)
            run.count_views(n_views, n_views, final)
            return None
        comp = [tp for tp in parts if tp[0] in self.compacted]
        views, reads_to = {}, {}
        for level in LEVELS:
            # A compacted partition is read to its current end, past E: either cleaner may
            # have removed a record below E because of a later one above E.
            targets = dict(ends)
            if comp:
                targets.update(end_offsets(mg_bootstrap, comp, isolation=level))
            reads_to[("mg", level)] = targets
            views[("mg", level)] = self._read(mg_bootstrap, level, targets, timeout, f"through-mirrorgate-{level}")
        for level in LEVELS:
            targets = end_offsets(dst_bootstrap, parts, isolation=level)
            reads_to[("direct", level)] = targets
            views[("direct", level)] = self._read(dst_bootstrap, level, targets, timeout, f"direct-{level}")
        # The offset map again: a partition whose map changed during the direct reads (a
        # hidden duplicate marker) cannot be translated for sure; its direct views are
        # inconclusive.
        after = segments_fn() if segments is not None else None
        if after is not None:
            segments = {tp: m for tp, m in segments.items() if after.get(tp) == m}
        elif segments is not None:
            segments = None
        source, source_to = {}, {}
        for level in LEVELS:
            targets = dict(ends)
            if comp:
                targets.update(end_offsets(src_bootstrap, comp, isolation=level))
            # A direct reader sees the destination up to its own end, which may be past E
            # (an append mirrorgate has not recorded yet): the source is read that far too.
            for tp in parts:
                if segments is not None and tp in segments:
                    d_end = compare.source_offset(reads_to[("direct", level)][tp], segments[tp])
                    targets[tp] = max(targets[tp], d_end)
            source_to[level] = targets
            source[level] = self._read(src_bootstrap, level, targets, timeout, f"source-{level}")
        t_to = time.time()
        n_ok = n_inconclusive = 0
        for tp in parts:
            n_ok_tp, n_inc_tp = self._compare_partition(tp, ends[tp], views, reads_to, source, source_to, segments, final, t_from, t_to)
            n_ok += n_ok_tp
            n_inconclusive += n_inc_tp
        run.count_views(n_views, n_inconclusive, final)
        run.checks["made"] += 1
        run.prev_check_start = t_from
        run.checks["views_matching"] += n_ok
        total = sum(len(v.records.get(tp, [])) for v in views.values() for tp in parts)
        run.log(
            f"check {run.checks['made']}{' (final)' if final else ''}: {n_ok} of {n_views} views match the source at their isolation level, "
            f"{n_inconclusive} inconclusive ({total} destination records read, ends {sum(ends.values())} offsets) in {t_to - t_from:.1f}s",
            event=False,
        )
        return ends

    def _compare_partition(self, tp, e, views, reads_to, source, source_to, segments, final, t_from, t_to):
        run = self.run
        compacted = tp[0] in self.compacted
        ledger = self.ledger(tp) if compacted else None
        n_ok = n_inc = 0
        seg = (segments or {}).get(tp)
        holes = set()
        direct = {}
        for level in LEVELS:
            v = views[("direct", level)]
            if seg is not None and tp not in v.incomplete:
                direct[level], h = compare.direct_to_source(v.records[tp], seg)
                holes |= h
        for level in LEVELS:
            src = source[level]
            other = source[OTHER[level]]
            for where in ("mg", "direct"):
                v = views[(where, level)]
                why = src.incomplete.get(tp) or other.incomplete.get(tp) or v.incomplete.get(tp)
                if why is None and where == "direct" and level not in direct:
                    why = "no offset map from mirrors --describe" if seg is None else "unreadable"
                if why is not None:
                    run.log(f"check inconclusive on {tp[0]}-{tp[1]} ({where} at {level}): {why}", event=False)
                    n_inc += 1
                    continue
                dest = v.records[tp] if where == "mg" else direct[level]
                read_end = reads_to[(where, level)][tp]
                end = e
                if where == "direct":
                    # Compared up to the destination's own end (in source offsets).
                    read_end = compare.source_offset(read_end, seg)
                    end = max(e, read_end) if not compacted else e
                stats = run.checks["compaction"] if final else None
                s_records = src.records[tp] if compacted else [r for r in src.records[tp] if r[0] < end]
                problems = compare.compare_view(
                    s_records,
                    dest,
                    end,
                    level=level,
                    other_source=other.records[tp],
                    compacted=compacted,
                    ledger=ledger,
                    read_end=read_end,
                    source_end=source_to[level][tp],
                    placeholders=holes,
                    aborted_hidden_ok=self.aborted_hidden_ok,
                    stats=stats,
                )
                view = f"{'destination through mirrorgate' if where == 'mg' else 'destination read directly'} at {level}, end {end}"
                if problems:
                    run.violation(tp, view, problems, t_from, t_to)
                else:
                    n_ok += 1
        return n_ok, n_inc


def describe_segments(rows):
    """{(topic, partition): offset map} from `mirrors --describe --json` rows."""
    return {(x["topic"], x["partition"]): x.get("segments") or [] for x in rows}


def parse_describe(text):
    try:
        return json.loads(text)
    except ValueError:
        return None
