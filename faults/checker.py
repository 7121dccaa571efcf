"""The fault runner's checker: the prefix invariant of every mirror partition.

A check reads every destination partition THROUGH mirrorgate (its client listener) at
read_uncommitted and at read_committed, up to the destination end E that mirrorgate's
ListOffsets answered at the start of the check, then reads the source (directly, at
read_committed) up to the same E, and compares the records each view shows below E:
(offset, key, value, headers in order, timestamp type and value).

Non-data offsets (transaction markers, aborted records, compaction holes, the placeholders
mirrorgate writes for them) are invisible to consumers on both sides, so the sequences must be
equal record for record. The one exception is a compacted topic: the source's and the
destination's log cleaners run independently, so an offset one side still shows may already
be cleaned on the other. There a record missing on one side is accepted only when that side
shows a later record with the same key below E (what the cleaner keeps); every offset both
sides show must still be identical, and the destination must never show a record at an offset
where the source never had one (checked against the source read, where a missing source record
needs a later same-key source record). For compacted topics both sides are read to their
own current ends, past E (only offsets below E are compared): either cleaner may have removed
a record below E because of a later record with the same key above E.
"""

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition


def _record(msg):
    ts_type, ts = msg.timestamp()
    headers = tuple((k, v) for k, v in (msg.headers() or []))
    return (msg.offset(), msg.key(), msg.value(), headers, ts_type, ts)


def _short(b, n=40):
    if b is None:
        return "null"
    if isinstance(b, bytes):
        s = b[:n].hex() if any(c < 32 or c > 126 for c in b[:n]) else b[:n].decode()
        return s + ("..." if len(b) > n else "")
    return str(b)


def describe_record(r):
    if r is None:
        return "(none)"
    off, key, value, headers, ts_type, ts = r
    return f"offset {off} key={_short(key)} value={_short(value)} headers={[(k, _short(v, 16)) for k, v in headers]} ts={ts_type}:{ts}"


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


def _ranges(offsets):
    """'3..5, 9' for [3, 4, 5, 9] (at most 5 ranges listed)."""
    out = []
    for o in offsets:
        if out and out[-1][1] == o - 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    text = ", ".join(f"{a}..{b}" if a != b else f"{a}" for a, b in out[:5])
    return text + (f" and {len(out) - 5} more ranges" if len(out) > 5 else "")


def _by_offset(records):
    return {r[0]: r for r in records}


def _later_same_key(records_by_offset, key, offset):
    return any(o > offset and r[1] == key for o, r in records_by_offset.items())


def compare_partition(tp, source, dest, compacted, end, stats=None):
    """Problems (strings) of one destination view against the source view below `end`.
    `stats` (a dict) counts the compacted-topic offsets accepted because one side's cleaner
    removed them: `cleaned_on_destination_only`, `cleaned_on_source_only`."""
    problems = []
    stats = {} if stats is None else stats
    offs = [r[0] for r in dest]
    if any(b <= a for a, b in zip(offs, offs[1:])):
        dup = next(b for a, b in zip(offs, offs[1:]) if b <= a)
        problems.append(f"offsets not strictly increasing (offset {dup} repeated or out of order)")
    if not compacted:
        for i, (s, d) in enumerate(zip(source, dest)):
            if s != d:
                if s[0] < d[0]:
                    lost = [r[0] for r in source[i:] if r[0] < d[0]]
                    problems.append(
                        f"source offset(s) {_ranges(lost)} missing on the destination (its next visible record is at offset {d[0]}): "
                        f"first missing {describe_record(s)}"
                    )
                elif s[0] > d[0]:
                    problems.append(f"destination shows offset {d[0]}, which the source does not (source's next visible record is at {s[0]}): {describe_record(d)}")
                else:
                    problems.append(f"record at offset {s[0]} differs: source {describe_record(s)} / destination {describe_record(d)}")
                break
        else:
            if len(source) != len(dest):
                i = min(len(source), len(dest))
                extra = "source" if len(source) > len(dest) else "destination"
                r = (source if extra == "source" else dest)[i]
                problems.append(
                    f"{extra} has {abs(len(source) - len(dest))} more visible records below end {end}: "
                    f"first {describe_record(r)} ({'missing on the destination' if extra == 'source' else 'not on the source'})"
                )
        return problems
    s_by, d_by = _by_offset(source), _by_offset(dest)
    for off in sorted(o for o in set(s_by) | set(d_by) if o < end):
        s, d = s_by.get(off), d_by.get(off)
        if s is not None and d is not None:
            if s != d:
                problems.append(f"offset {off} differs: source {describe_record(s)} / destination {describe_record(d)}")
        elif s is not None:
            if not _later_same_key(d_by, s[1], off):
                problems.append(f"offset {off} missing on the destination and not compacted there: source {describe_record(s)}")
            else:
                stats["cleaned_on_destination_only"] = stats.get("cleaned_on_destination_only", 0) + 1
        else:
            if not _later_same_key(s_by, d[1], off):
                problems.append(f"offset {off} on the destination has no source record nor a later source record with its key: {describe_record(d)}")
            else:
                stats["cleaned_on_source_only"] = stats.get("cleaned_on_source_only", 0) + 1
        if len(problems) >= 5:
            problems.append("(further differences of this partition not listed)")
            break
    return problems


def end_offsets(bootstrap, partitions, timeout_s=30):
    """{(topic, partition): high watermark} read with ListOffsets through `bootstrap`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"faults-ends-{time.time_ns()}", "enable.auto.commit": False, "log_level": 2})
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
