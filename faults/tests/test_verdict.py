"""Unit tests of the fault runner's verdict (faults/verdict.py): each failure it must
report."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import verdict  # noqa: E402

KINDS = ["kill9-mirrorgate", "cut-source-network", "cut-destination-network"]


def test_every_needed_fault_must_be_confirmed():
    counts = {"kill9-mirrorgate": 1, "cut-source-network": 0}
    p = verdict.faults_problems(counts, {"cut-source-network": ["+3.0s no network namespace"]}, set(), KINDS)
    assert len(p) == 2 and "cut-source-network" in p[0] and "no network namespace" in p[0], p
    assert verdict.faults_problems(counts, {}, {"cut-source-network", "cut-destination-network"}, KINDS) == []


def test_mirrorgate_exit_and_panic_fail():
    crash = {"instance": "mirrorgate", "pid": 7, "exit": 101, "last_lines": ["a", "thread 'x' panicked at src/y.rs:1:1"]}
    p = verdict.mirrorgate_problems([crash], {"mirrorgate": []})
    assert len(p) == 1 and "status 101" in p[0] and "panicked" in p[0]
    p = verdict.mirrorgate_problems([], {"mirrorgate": ["thread 'tokio' panicked at src/z.rs:2:3"]})
    assert len(p) == 1 and "panic" in p[0]
    assert verdict.mirrorgate_problems([], {"mirrorgate": []}) == []


def test_inconclusive_checks_fail():
    ok = {"views": 100, "views_inconclusive": 10, "final_made": True, "final_views": 52, "final_inconclusive": 0}
    assert verdict.check_problems(ok) == []
    assert verdict.check_problems({**ok, "views_inconclusive": 11})  # more than 10 %
    assert verdict.check_problems({**ok, "final_inconclusive": 1})
    assert verdict.check_problems({**ok, "final_made": False})
    every_check_timed_out = {"views": 104, "views_inconclusive": 104, "final_made": True, "final_views": 52, "final_inconclusive": 52}
    assert len(verdict.check_problems(every_check_timed_out)) == 2


def test_workload_that_delivers_nothing_fails():
    stats = {"delivered": {}, "undelivered": {}, "committed_txns": 0, "aborted_txns": 0}
    p = verdict.workload_problems(stats, [], 0, ["a", "b"], [], ["b"])
    assert any("no record to a" in x for x in p) and any("no aborted record" in x for x in p), p


def test_workload_errors_outside_faults_or_not_retried_fail():
    stats = {"delivered": {"a": 5}, "undelivered": {"a": 2}, "committed_txns": 1, "aborted_txns": 1}
    windows = [(100.0, 110.0, "restart-source-broker")]
    errors = [(105.0, "a", "in a fault, retried", True), (500.0, "a", "outside", True), (106.0, "a", "given up", False)]
    p = verdict.workload_problems(stats, errors, 3, ["a"], windows, ["a"])
    assert len(p) == 3, p
    assert "undelivered" in p[0] and "outside" in p[1] and "not retried" in p[2]


def test_tail_that_checked_nothing_fails():
    assert verdict.tail_problems({"direct-read_committed": {"checked": 0}, "x": {"checked": 3}}) == ["tailing consumer direct-read_committed checked no record"]
