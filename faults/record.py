#!/usr/bin/env python3
"""Writes a fault run's record for docs/results/ from its work directory's summary.json:
commit, seed, binary, confirmed fault counts, checks and views, tails, workload figures, the
failures and the first distinct violations with their text.

    faults/record.py WORK_DIR LABEL [--what TEXT] [--out FILE]

The runner calls it at the end of a run when FAULTS_RECORD=LABEL is set (FAULTS_RECORD_WHAT
says what the run was); the file is docs/results/faults-<UTC start>-<LABEL>.md unless --out.
"""

import argparse
import json
import os
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def render(summary, label, what, work):
    s = summary
    lines = [
        f"# Fault run `{label}`",
        "",
        f"- what: {what or label}",
        f"- result: **{'passed' if s.get('passed') else 'FAILED'}** ({s.get('violations')} violations, {s.get('distinct_violations')} distinct; {len(s.get('failures') or [])} other failures)",
        f"- commit: `{s.get('commit')}`; mirrorgate binary: `{os.path.relpath(s.get('mirrorgate', ''), REPO) if s.get('mirrorgate', '').startswith(REPO) else s.get('mirrorgate')}`",
        f"- seed: {s.get('seed')} (`FAULTS_SEED={s.get('seed')}`); short form: {s.get('short')}; markers: {s.get('markers')}; instances: {s.get('instances')}",
        f"- duration: {s.get('duration_s')} s in all, {s.get('fault_duration_s')} s of faults; work dir `{os.path.relpath(work, REPO) if work.startswith(REPO) else work}` (not committed)",
        f"- done without: {', '.join(s.get('done_without') or []) or 'nothing'}",
        f"- confirmed faults: {json.dumps(s.get('nemesis_confirmed'))}",
        f"- unconfirmed: {json.dumps(s.get('nemesis_unconfirmed'))}",
        f"- mirrorgate starts: {s.get('mirrorgate_starts')}; exits by itself: {json.dumps(s.get('mirrorgate_exits'))}",
        f"- checks: {json.dumps(s.get('checks'))}",
        f"- tailing consumers: {json.dumps(s.get('tails'))}",
        f"- workload: {json.dumps(s.get('workload'))}; aborted records on the source log: {s.get('aborted_records_on_log')}",
        "",
    ]
    if s.get("failures"):
        lines += ["## Failures", ""] + [f"- {f}" for f in s["failures"]] + [""]
    details = s.get("violation_details") or []
    if details:
        lines += ["## Violations (first of each partition, view and class)", ""]
        seen = set()
        for v in details:
            p0 = v["problems"][0]
            key = (v["partition"], v["view"].split(",")[0], p0.split("]")[0])
            if key in seen:
                continue
            seen.add(key)
            lines.append(f"- {v['partition']} ({v['view']}): `{p0[:400]}`")
            if len(seen) >= 12:
                lines.append(f"- ... {len(details) - 12} more in summary.json")
                break
        lines.append("")
    return "\n".join(lines)


def write(work, label, what=None, out=None):
    with open(os.path.join(work, "summary.json")) as f:
        summary = json.load(f)
    stamp = os.path.basename(os.path.normpath(work)) or time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = out or os.path.join(REPO, "docs", "results", f"faults-{stamp}-{label}.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(render(summary, label, what, work))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work")
    ap.add_argument("label")
    ap.add_argument("--what")
    ap.add_argument("--out")
    a = ap.parse_args()
    print(write(a.work, a.label, a.what, a.out))


if __name__ == "__main__":
    main()
