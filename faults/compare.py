"""The fault runner's judge: one view of a destination partition against the source, at the
same isolation level, as pure functions over lists of records (unit-tested in
faults/tests/test_compare.py with synthetic views).

A record is a tuple `(offset, key, value, headers, timestamp type, timestamp)` as a
confluent-kafka consumer returns it (`checker._record`); offsets are source offsets (a direct
read of the destination is translated first, `direct_to_source`).

What each view must show, below the check's end E (the destination end asked through
mirrorgate, in source offsets):

- **Same isolation level on both sides.** A destination view read at read_uncommitted is
  compared with the source read at read_uncommitted, one at read_committed with the source at
  read_committed. With real transaction markers (`mirror.transaction.markers=real`, the
  default) the destination holds the source's aborted records as aborted records, so at
  read_uncommitted they are visible exactly where the source shows them, and at
  read_committed neither side shows them (Kafka's consumer drops aborted batches by the
  `aborted_transactions` of the Fetch answer, KIP-98). With `placeholder` markers aborted
  records are placeholders, which read_uncommitted does not show: `aborted_hidden_ok`.
- **Every problem is classed** (the first word of each problem, in brackets): `[duplicate]`
  an offset served twice, `[reorder]` an offset served after a higher one, `[missing]` a
  source record the destination does not show, `[aborted-hidden]` an aborted source record
  (visible at read_uncommitted only) the destination does not show at read_uncommitted,
  `[extra]` a destination record at an offset where the source shows none at this level,
  `[aborted-shown]` such a record that is an aborted source record (shown at read_committed),
  `[differs]` a record whose key, value, headers or timestamp differ, `[compacted-loss]` a
  record missing on a compacted topic that no later record with its key excuses.
- **Compacted topics are judged from what was written.** Either cleaner may remove a record
  once a later record with its key is in its log. A record the workload wrote below E (its
  ledger: every delivered record with its offset, `workload.Ledger`) or the source shows, and
  the destination view does not, is excused only when the workload wrote a later record with
  the same key below the end the view was read to (`read_end`: no cleaner can act on a
  record it does not have yet); or, for an offset the source view lacks too or the
  destination holds as a placeholder (the source's cleaner removed it, perhaps before it was
  copied, and the destination's cleaner may since have removed the placeholder), below the
  source's end as read by the check (`source_end`). A destination record where the source view shows none must equal
  the record the workload wrote at that offset (the source's cleaner removed it since).
"""

# mirrorgate's placeholder record key: magic (8 bytes) ++ nonce (8) ++ source offset (i64,
# big-endian); value null (src/wire/batch.rs PLACEHOLDER_MAGIC, placeholder_batch).
PLACEHOLDER_MAGIC = b"\x00MGPH\x01\xfe\x00"
PLACEHOLDER_KEY_LEN = 24
MAX_LISTED = 5


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


def ranges(offsets):
    """'3..5, 9' for [3, 4, 5, 9] (at most 5 ranges listed)."""
    out = []
    for o in offsets:
        if out and out[-1][1] == o - 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    text = ", ".join(f"{a}..{b}" if a != b else f"{a}" for a, b in out[:5])
    return text + (f" and {len(out) - 5} more ranges" if len(out) > 5 else "")


def placeholder_source_offset(key, value):
    """The source offset a placeholder record stands for, or None for a real record."""
    if value is None and key is not None and len(key) == PLACEHOLDER_KEY_LEN and key[:8] == PLACEHOLDER_MAGIC:
        return int.from_bytes(key[16:24], "big", signed=True)
    return None


def source_offset(dest_offset, segments):
    """The source offset of destination offset `dest_offset` by the offset map `segments`
    (`[[source_start, destination_start], ...]` of `mirrors --describe --json`, ascending):
    the last segment starting at or below it; identical offsets without a segment."""
    s, d = 0, 0
    for seg_s, seg_d in segments or []:
        if seg_d <= dest_offset:
            s, d = seg_s, seg_d
        else:
            break
    return dest_offset + (s - d)


def direct_to_source(records, segments):
    """A direct read of the destination in source offsets: (records, placeholders), where
    placeholders is the set of source offsets the destination holds as placeholder records
    (left out of the records: mirrorgate turns them into control batches for its own readers,
    and they stand for offsets the source shows no record at)."""
    out, holes = [], set()
    for r in records:
        ph = placeholder_source_offset(r[1], r[2])
        if ph is not None:
            holes.add(ph)
            continue
        out.append((source_offset(r[0], segments),) + tuple(r[1:]))
    return out, holes


def _order_problems(dest):
    problems = []
    seen = set()
    prev = None
    for r in dest:
        o = r[0]
        if o in seen:
            problems.append(f"[duplicate] offset {o} served more than once: {describe_record(r)}")
        elif prev is not None and o < prev:
            problems.append(f"[reorder] offset {o} served after offset {prev}: {describe_record(r)}")
        seen.add(o)
        prev = o if prev is None else max(prev, o)
        if len(problems) >= MAX_LISTED:
            break
    return problems


class Written:
    """The records known to have been written to a compacted partition: the workload's ledger
    ({offset: (key, value)}) and the source view, by offset and by key."""

    def __init__(self, ledger, source):
        self.by_offset = {}
        for o, kv in (ledger or {}).items():
            self.by_offset[o] = kv
        for r in source:
            self.by_offset.setdefault(r[0], (r[1], r[2]))
        self.by_key = {}
        for o, (k, _) in self.by_offset.items():
            self.by_key.setdefault(k, []).append(o)
        for offs in self.by_key.values():
            offs.sort()

    def later_same_key(self, key, offset, below):
        """The first offset above `offset` and below `below` the workload wrote `key` at."""
        for o in self.by_key.get(key, ()):
            if offset < o < below:
                return o
        return None


def compare_view(source, dest, end, *, start=0, level, other_source=None, compacted=False, ledger=None, written=None, read_end=None, source_end=None, placeholders=(), aborted_hidden_ok=False, stats=None):
    """Problems (strings, each starting with its class in brackets) of one destination view
    `dest` against the source view `source` read at the same isolation level `level`
    (`read_uncommitted` or `read_committed`), for the offsets below `end`.

    Offsets below `start` are not compared (a tailing consumer judges the span since its
    previous record). `other_source`: the source read at the other isolation level (names aborted records
    shown at read_committed or hidden at read_uncommitted); `compacted`, `ledger`
    ({offset: (key, value)} written by the workload), `read_end` (the end the destination view
    was read to), `source_end` (the end the source was read to) and `placeholders` (source
    offsets the destination holds as placeholders): the compacted-topic rule of the module
    docstring; `aborted_hidden_ok`: aborted records may be missing at read_uncommitted
    (placeholder markers). `written`: a `Written` built once from the ledger, used instead
    of `ledger` (a tailing consumer judges many records against the same ledger). `stats` (a
    dict) counts the compacted offsets excused.
    """
    stats = {} if stats is None else stats
    problems = _order_problems(dest)
    d_by = {}
    for r in dest:
        d_by.setdefault(r[0], r)
    s_by = {r[0]: r for r in source}
    o_by = {r[0]: r for r in other_source} if other_source is not None else None
    if compacted and written is None:
        written = Written(ledger, source)
    elif not compacted:
        written = None
    read_end = end if read_end is None else read_end
    source_end = read_end if source_end is None else source_end
    offsets = set(o for o in s_by if start <= o < end) | set(o for o in d_by if start <= o < end)
    if compacted:
        offsets |= set(o for o in (ledger or {}) if start <= o < end)
    missing, n = [], 0
    for off in sorted(offsets):
        s, d = s_by.get(off), d_by.get(off)
        if s is not None and d is not None:
            if s != d:
                problems.append(f"[differs] record at offset {off} differs: source {describe_record(s)} / destination {describe_record(d)}")
        elif d is None:
            p = _missing(off, s, level, o_by, written, read_end, source_end, placeholders, aborted_hidden_ok, stats)
            if p is not None:
                missing.append((off, p))
        else:
            p = _extra(off, d, level, o_by, written, stats)
            if p is not None:
                problems.append(p)
        n = len(problems) + len(missing)
        if n >= 4 * MAX_LISTED:
            break
    if missing:
        # One line per class of missing records: the offsets as ranges, the first record.
        by_class = {}
        for off, p in missing:
            by_class.setdefault(p.split("]")[0] + "]", []).append((off, p))
        for cls, items in by_class.items():
            offs = [o for o, _ in items]
            problems.append(f"{items[0][1]} ({len(offs)} such offset(s) below end {end}: {ranges(offs)})")
    if n >= 4 * MAX_LISTED:
        problems.append("(further differences of this partition not listed)")
    return problems


def _missing(off, s, level, o_by, written, read_end, source_end, placeholders, aborted_hidden_ok, stats):
    """The problem of a record below the end the destination view does not show, or None."""
    if written is not None:
        key, value = (s[1], s[2]) if s is not None else written.by_offset[off]
        later = written.later_same_key(key, off, read_end)
        if later is not None:
            stats["compacted_excused"] = stats.get("compacted_excused", 0) + 1
            return None
        # Gone from the source view too (its cleaner removed it, perhaps before it was copied:
        # a placeholder, which the destination's cleaner may have removed since), or held as
        # a placeholder: the source's cleaner needed a later record of its key on the source.
        later = written.later_same_key(key, off, max(read_end, source_end)) if (s is None or off in placeholders) else None
        if later is not None:
            stats["compacted_excused_source_hole"] = stats.get("compacted_excused_source_hole", 0) + 1
            return None
        if s is None:
            # Written, gone from the source view too, and nothing written with its key later
            # below the end: neither cleaner may remove it.
            s = (off, key, value, (), None, None)
        return (
            f"[compacted-loss] offset {off} missing on the destination with no later record of its key written below "
            f"the destination's read end {read_end}: source {describe_record(s)}"
        )
    if level == "read_uncommitted" and o_by is not None and off not in o_by and s is not None:
        if aborted_hidden_ok:
            stats["aborted_hidden"] = stats.get("aborted_hidden", 0) + 1
            return None
        where = " (the destination holds a placeholder there)" if off in placeholders else ""
        return f"[aborted-hidden] aborted source record at offset {off} not shown at read_uncommitted{where}: source {describe_record(s)}"
    where = " (the destination holds a placeholder there)" if off in placeholders else ""
    return f"[missing] source record at offset {off} missing on the destination at {level}{where}: first {describe_record(s)}"


def _extra(off, d, level, o_by, written, stats):
    """The problem of a destination record below the end the source view does not show, or
    None."""
    if written is not None and off in written.by_offset:
        key, value = written.by_offset[off]
        if (d[1], d[2]) == (key, value):
            stats["cleaned_on_source_only"] = stats.get("cleaned_on_source_only", 0) + 1
            return None
        return f"[differs] record at offset {off} is not what the workload wrote there (key={_short(key)} value={_short(value)}): destination {describe_record(d)}"
    if level == "read_committed" and o_by is not None and off in o_by:
        same = "identical to" if o_by[off] == d else "differing from"
        return f"[aborted-shown] aborted record shown at read_committed at offset {off} ({same} the source's aborted record): {describe_record(d)}"
    return f"[extra] destination shows a record at offset {off}, where the source shows none at {level}: {describe_record(d)}"
