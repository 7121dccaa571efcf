"""The fault runner's verdict: everything besides the checker's violations that makes a run
fail, as pure functions of the run's figures (unit-tested in faults/tests/test_verdict.py).

A run fails when:
- a fault kind it needs was never confirmed (`faults_problems`; kinds named in FAULTS_WITHOUT
  are not needed, and the summary says the run went without them);
- a mirrorgate instance exited by itself, or its log reports a panic (`mirrorgate_problems`);
- the final check was not made or not conclusive, or more than `MAX_INCONCLUSIVE` of the views
  of the run's checks were inconclusive (`check_problems`);
- the workload delivered nothing to a topic, left records undelivered, had a producer or
  transactional error outside the time of a fault or not followed by a retry, or put no
  aborted record on the log (`workload_problems`);
- a tailing consumer never saw a record (`tail_problems`).
"""

MAX_INCONCLUSIVE = 0.10
# A workload error up to this long after a fault ended is caused by it (a broker back in its
# ISRs can still move coordinators and leaders; a transaction outcome may take its timeout).
FAULT_TAIL_S = 90
FAULT_LEAD_S = 2


def faults_problems(counts, unconfirmed, without, required):
    """`counts` {kind: confirmed}, `unconfirmed` {kind: [reason]}, `without` kinds the run was
    told to do without, `required` kinds it needs at least once."""
    out = []
    for kind in required:
        if kind in without:
            continue
        if counts.get(kind, 0) == 0:
            why = "; ".join(unconfirmed.get(kind, [])[-3:]) or "never drawn"
            out.append(f"fault {kind} never confirmed ({why})")
    return out


def mirrorgate_problems(crashes, panics):
    """`crashes`: [{"instance", "pid", "exit", "last_lines"}]; `panics` {instance: [lines]}."""
    out = []
    for c in crashes:
        last = " | ".join(c.get("last_lines", [])[-5:])
        out.append(f"{c['instance']} (pid {c['pid']}) exited by itself with status {c['exit']}; last log lines: {last}")
    for name, lines in panics.items():
        if lines:
            out.append(f"{name}'s log reports {len(lines)} panic(s), first: {lines[0]}")
    return out


def check_problems(checks):
    """`checks`: {"views", "views_inconclusive", "final_views", "final_inconclusive",
    "final_made"} of the run's checks (final included)."""
    out = []
    if not checks.get("final_made"):
        out.append("the final check was not made")
    elif checks.get("final_inconclusive", 0) > 0:
        out.append(f"the final check was not conclusive: {checks['final_inconclusive']} of {checks['final_views']} views inconclusive")
    views, inc = checks.get("views", 0), checks.get("views_inconclusive", 0)
    if views == 0:
        out.append("no view was checked")
    elif inc / views > MAX_INCONCLUSIVE:
        out.append(f"{inc} of {views} views inconclusive ({100 * inc / views:.0f} %, more than {100 * MAX_INCONCLUSIVE:.0f} %)")
    return out


def in_fault(t, windows):
    return any(s - FAULT_LEAD_S <= t <= e + FAULT_TAIL_S for s, e, _ in windows)


def workload_problems(stats, errors, aborted_records, topics, windows, txn_topics=()):
    """`stats`: Stats.snapshot(); `errors`: [(time, topic, text, retried)]; `aborted_records`
    on the log (the ledger's count); `topics` every topic written; `windows` [(start, end,
    kind)] of the faults."""
    out = []
    delivered = stats.get("delivered", {})
    for t in topics:
        if delivered.get(t, 0) == 0:
            out.append(f"the workload delivered no record to {t}")
    left = {t: n for t, n in stats.get("undelivered", {}).items() if n}
    if left:
        out.append(f"records undelivered at the end: {left}")
    for t, topic, text, retried in errors:
        if not retried:
            out.append(f"workload error on {topic} not retried: {text}")
        elif not in_fault(t, windows):
            out.append(f"workload error on {topic} outside any fault: {text}")
    if txn_topics:
        if stats.get("committed_txns", 0) == 0:
            out.append("no transaction committed")
        if stats.get("aborted_txns", 0) == 0 or aborted_records == 0:
            out.append(f"no aborted record on the log ({stats.get('aborted_txns', 0)} aborted transactions, {aborted_records} aborted records delivered)")
    return out


def tail_problems(tails):
    """`tails`: {name: {"checked": n, ...}}: a tailing consumer that checked nothing did not
    run."""
    return [f"tailing consumer {name} checked no record" for name, t in tails.items() if t.get("checked", 0) == 0]
