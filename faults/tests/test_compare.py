"""Unit tests of the fault runner's judge (faults/compare.py): synthetic views, one per
violation class, each detected; and the views a correct mirror gives, accepted."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import compare  # noqa: E402


def rec(off, key=None, value=None, headers=(), ts=1000):
    key = f"k{off}".encode() if key is None else key
    value = f"v{off}".encode() if value is None else value
    return (off, key, value, tuple(headers), 1, ts + off)


def classes(problems):
    return [p.split("]")[0] + "]" for p in problems if p.startswith("[")]


# A transactional partition: offsets 0..2 committed (marker at 3), 4..5 aborted (marker at
# 6), 7 committed (marker at 8).
RC = [rec(0), rec(1), rec(2), rec(7)]
RU = [rec(0), rec(1), rec(2), rec(4), rec(5), rec(7)]


def test_identical_views_pass_at_both_levels():
    assert compare.compare_view(RU, list(RU), 9, level="read_uncommitted", other_source=RC) == []
    assert compare.compare_view(RC, list(RC), 9, level="read_committed", other_source=RU) == []


def test_missing_record_is_detected():
    dest = [r for r in RC if r[0] != 1]
    p = compare.compare_view(RC, dest, 9, level="read_committed", other_source=RU)
    assert classes(p) == ["[missing]"], p
    assert "offset 1" in p[0]


def test_committed_record_hidden_at_read_uncommitted_is_missing():
    dest = [r for r in RU if r[0] != 7]
    p = compare.compare_view(RU, dest, 9, level="read_uncommitted", other_source=RC)
    assert classes(p) == ["[missing]"], p


def test_duplicate_is_detected():
    dest = RC[:2] + [RC[1]] + RC[2:]
    p = compare.compare_view(RC, dest, 9, level="read_committed", other_source=RU)
    assert "[duplicate]" in classes(p), p


def test_reorder_is_detected():
    dest = [RC[0], RC[2], RC[1], RC[3]]
    p = compare.compare_view(RC, dest, 9, level="read_committed", other_source=RU)
    assert classes(p) == ["[reorder]"], p


def test_differing_record_is_detected():
    dest = [RC[0], rec(1, value=b"other"), RC[2], RC[3]]
    p = compare.compare_view(RC, dest, 9, level="read_committed", other_source=RU)
    assert classes(p) == ["[differs]"], p
    dest = [RC[0], rec(1, headers=[("h", b"x")]), RC[2], RC[3]]
    assert classes(compare.compare_view(RC, dest, 9, level="read_committed", other_source=RU)) == ["[differs]"]


def test_aborted_record_shown_at_read_committed_is_detected():
    # What serving read_uncommitted for read_committed gives.
    p = compare.compare_view(RC, list(RU), 9, level="read_committed", other_source=RU)
    assert classes(p) == ["[aborted-shown]", "[aborted-shown]"], p
    # Without the other level the same record is still an extra record.
    p = compare.compare_view(RC, list(RU), 9, level="read_committed")
    assert classes(p) == ["[extra]", "[extra]"], p


def test_aborted_record_hidden_at_read_uncommitted_is_detected():
    # What placeholders for aborted records give at read_uncommitted.
    p = compare.compare_view(RU, list(RC), 9, level="read_uncommitted", other_source=RC)
    assert classes(p) == ["[aborted-hidden]"], p
    assert "4..5" in p[0]
    # Accepted only when the mirror writes placeholders for aborted records by configuration.
    stats = {}
    assert compare.compare_view(RU, list(RC), 9, level="read_uncommitted", other_source=RC, aborted_hidden_ok=True, stats=stats) == []
    assert stats["aborted_hidden"] == 2


def test_crosswise_comparison_would_have_missed_both():
    """The old checker compared every destination view with the source at read_committed: a
    destination that hides aborted records at read_uncommitted looks right that way."""
    assert compare.compare_view(RC, list(RC), 9, level="read_committed") == []
    assert compare.compare_view(RU, list(RC), 9, level="read_uncommitted", other_source=RC) != []


def test_records_at_or_above_the_end_are_not_compared():
    assert compare.compare_view(RC, RC[:3], 7, level="read_committed", other_source=RU) == []
    assert classes(compare.compare_view(RC, RC[:3], 8, level="read_committed", other_source=RU)) == ["[missing]"]


# A compacted partition: keys a, b, c; the workload wrote a@0 b@1 c@2 a@3 b@4 c@5 a@6.
def crec(off, key):
    return rec(off, key=key, value=f"{key.decode()}{off}".encode())


WRITTEN = [crec(0, b"a"), crec(1, b"b"), crec(2, b"c"), crec(3, b"a"), crec(4, b"b"), crec(5, b"c"), crec(6, b"a")]
LEDGER = {r[0]: (r[1], r[2]) for r in WRITTEN}


def test_compacted_record_cleaned_below_a_later_same_key_record_is_excused():
    # The destination's cleaner removed a@0 and b@1 (a@3, b@4 are in its log).
    dest = [r for r in WRITTEN if r[0] not in (0, 1)]
    stats = {}
    assert compare.compare_view(WRITTEN, dest, 7, level="read_committed", compacted=True, ledger=LEDGER, read_end=7, stats=stats) == []
    assert stats["compacted_excused"] == 2


def test_compacted_loss_without_a_later_same_key_record_is_detected():
    dest = [r for r in WRITTEN if r[0] != 6]
    p = compare.compare_view(WRITTEN, dest, 7, level="read_committed", compacted=True, ledger=LEDGER, read_end=7)
    assert classes(p) == ["[compacted-loss]"], p


def test_compacted_loss_below_a_later_same_key_record_written_past_the_read_end_is_detected():
    """The old rule excused a loss whenever the destination showed a later record with the
    same key anywhere; the later record must have been written below the end the destination
    was read to (no cleaner acts on a record it does not have)."""
    # c@2 lost; the next c was written at 5, above the read end 5.
    dest = [r for r in WRITTEN if r[0] not in (2,) and r[0] < 5]
    p = compare.compare_view(WRITTEN[:5], dest, 5, level="read_committed", compacted=True, ledger=LEDGER, read_end=5)
    assert classes(p) == ["[compacted-loss]"], p
    assert "offset 2" in p[0]


def test_compacted_loss_the_source_also_lacks_is_detected_from_the_ledger():
    source = [r for r in WRITTEN if r[0] != 5]  # cleaned (wrongly) on the source too, or unread
    dest = [r for r in WRITTEN if r[0] != 5]
    p = compare.compare_view(source, dest, 7, level="read_committed", compacted=True, ledger=LEDGER, read_end=7)
    assert classes(p) == ["[compacted-loss]"], p


def test_compacted_source_hole_excused_up_to_the_source_end():
    # The source's cleaner removed c@2 (c@5 in its log) before it was copied: a placeholder on
    # the destination, whose read end (4) is below c@5.
    dest = [r for r in WRITTEN if r[0] != 2 and r[0] < 4]
    src = [r for r in WRITTEN if r[0] != 2]
    assert compare.compare_view(src, dest, 4, level="read_committed", compacted=True, ledger=LEDGER, read_end=4, source_end=7, placeholders={2}) == []
    # Without a later record of its key below the source end, the same hole is a loss.
    p = compare.compare_view(src, dest, 4, level="read_committed", compacted=True, ledger=LEDGER, read_end=4, source_end=5, placeholders={2})
    assert classes(p) == ["[compacted-loss]"], p


def test_compacted_record_gone_from_both_sides_excused_up_to_the_source_end():
    # The source's cleaner removed c@2 (c@5 in its log, above the destination's read end 4)
    # and the destination's cleaner removed the placeholder copied for it.
    src = [r for r in WRITTEN if r[0] != 2]
    dest = [r for r in WRITTEN if r[0] != 2 and r[0] < 4]
    assert compare.compare_view(src, dest, 4, level="read_committed", compacted=True, ledger=LEDGER, read_end=4, source_end=7) == []
    # A record the source still shows gets no such excuse: the destination lost it.
    p = compare.compare_view(WRITTEN, dest, 4, level="read_committed", compacted=True, ledger=LEDGER, read_end=4, source_end=7)
    assert classes(p) == ["[compacted-loss]"], p


def test_compacted_destination_record_the_source_cleaned_must_match_the_ledger():
    source = [r for r in WRITTEN if r[0] != 0]
    assert compare.compare_view(source, list(WRITTEN), 7, level="read_committed", compacted=True, ledger=LEDGER, read_end=7) == []
    bad = [crec(0, b"z")] + WRITTEN[1:]
    p = compare.compare_view(source, bad, 7, level="read_committed", compacted=True, ledger=LEDGER, read_end=7)
    assert classes(p) == ["[differs]"], p


def test_direct_read_translated_through_segments_and_placeholders():
    # Destination: offsets 0..2 as the source; a hidden duplicate marker at destination 3;
    # source offset 3 onwards at destination 4 (segment [3, 4]); a placeholder for source 5.
    ph = compare.PLACEHOLDER_MAGIC + (7).to_bytes(8, "big") + (5).to_bytes(8, "big", signed=True)
    direct = [rec(0), rec(1), rec(2), (4,) + rec(3)[1:], (6, ph, None, (), 1, 0), (7,) + rec(6)[1:]]
    out, holes = compare.direct_to_source(direct, [[0, 0], [3, 4]])
    assert [r[0] for r in out] == [0, 1, 2, 3, 6]
    assert holes == {5}
    source = [rec(0), rec(1), rec(2), rec(3), rec(6)]
    assert compare.compare_view(source, out, 7, level="read_committed") == []
    # A placeholder where the source shows a record is a missing record, and says so.
    p = compare.compare_view(source + [rec(5)], out, 7, level="read_committed", placeholders=holes)
    assert classes(p) == ["[missing]"] and "placeholder" in p[0], p


def test_source_offset_without_segments_is_identity():
    assert compare.source_offset(42, []) == 42
    assert compare.source_offset(42, [[0, 0], [10, 9]]) == 43
