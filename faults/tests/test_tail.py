"""Unit tests of the tailing consumers' judgement (faults/tail.py) without Kafka: records fed
to the source and destination sides as the consumers would, then one verification pass."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tail  # noqa: E402

TP = ("f-txn", 0)


class FakeRun:
    def __init__(self):
        self.violations = []

    def violation(self, tp, view, problems, t_from, t_to):
        self.violations.append((tp, view, problems))

    def log(self, text, event=True):
        pass


def rec(off, value=None):
    return (off, f"k{off}".encode(), value or f"v{off}".encode(), (), 1, 1000 + off)


def tails(run, compacted=()):
    t = tail.Tails(run, [TP], set(compacted), lambda tp: {}, lambda: {TP: []})
    t.add_destination("via-mg", "unused:1", direct=False)
    return t


def feed_source(t, level, records, pos):
    for r in records:
        t.source[level][TP][r[0]] = r
    t.source_pos[level][TP] = pos


def feed_dest(t, name, records):
    t.queues[name] += [(0.0, TP, r) for r in records]


# Committed 0, 1; aborted 2, 3 (marker 4); committed 5.
RU = [rec(0), rec(1), rec(2), rec(3), rec(5)]
RC = [rec(0), rec(1), rec(5)]


def setup(run):
    t = tails(run)
    feed_source(t, "read_uncommitted", RU, 7)
    feed_source(t, "read_committed", RC, 7)
    return t


def test_right_records_pass_at_both_levels():
    run = FakeRun()
    t = setup(run)
    feed_dest(t, "via-mg-read_uncommitted", RU)
    feed_dest(t, "via-mg-read_committed", RC)
    t._verify()
    assert run.violations == []
    assert t.figures()["via-mg-read_committed"]["checked"] == 3


def test_aborted_record_served_at_read_committed_is_caught_when_it_arrives():
    run = FakeRun()
    t = setup(run)
    feed_dest(t, "via-mg-read_committed", [rec(0), rec(1), rec(2)])
    t._verify()
    assert len(run.violations) == 1 and run.violations[0][2][0].startswith("[aborted-shown]"), run.violations


def test_skipped_and_repeated_records_are_caught():
    run = FakeRun()
    t = setup(run)
    feed_dest(t, "via-mg-read_uncommitted", [rec(0), rec(2), rec(2)])
    t._verify()
    problems = [p[0] for _, _, p in run.violations]
    assert problems[0].startswith("[missing]") and "offset 1" in problems[0], problems
    assert problems[1].startswith("[duplicate]"), problems


def test_records_wait_until_the_source_tail_has_passed_them():
    run = FakeRun()
    t = tails(run)
    feed_source(t, "read_committed", RC[:2], 2)
    feed_dest(t, "via-mg-read_committed", [rec(0), rec(1), rec(5)])
    t._verify()
    assert run.violations == [] and len(t.queues["via-mg-read_committed"]) == 1
    feed_source(t, "read_committed", RC, 7)
    t._verify()
    assert run.violations == [] and t.queues["via-mg-read_committed"] == []
