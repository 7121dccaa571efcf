#!/usr/bin/env python3
"""Run the integration-test binaries that `cargo test --no-run --message-format=json` built,
JOBS at a time (scripts/test.sh; default 2).

Each binary keeps its own Kafka clusters, shared by its tests (tests/support); binaries never
share one, and their ports come from disjoint searches (tests/support::free_port_range starts
at a PID-derived port; scripts/kafka.sh allocates under a global lock), so two binaries can
run side by side. The integration tests spend most of their time waiting on brokers, so two
lanes on 2 cores roughly halve the wall time of the suite.

Longest binaries start first (durations of the last run in target/test-logs/durations.json,
else the order below), so the lanes end together. Each binary's output goes to
target/test-logs/NAME.log and is printed whole when the binary fails. Exit status 1 when any
binary failed, 2 when none was found (a build that produced no test binary is an error).

Usage: cargo test --tests --no-run --message-format=json | run_test_binaries.py JOBS [ARGS...]
ARGS go to every binary (test-name filters, --test-threads, ...).
"""

import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time

# Order for a first run, longest first (figures of a CI run on 2 idle cores, seconds).
KNOWN_ORDER = [
    "mirror_resilience", "mirror_failures", "mirror_data", "metadata_sync", "broker_txn",
    "replicated", "security_tls", "security", "security_reauth", "mirror_control",
    "source_offsets", "broker_behaviour", "mirror_split", "security_oauth", "versions",
    "placeholder_reads", "mirror_loops", "produce_refusal", "admin_offline", "limits", "demo",
]


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    jobs = max(1, int(sys.argv[1]))
    args = sys.argv[2:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    logs = os.path.join(root, "target", "test-logs")
    os.makedirs(logs, exist_ok=True)

    binaries = {}
    for line in sys.stdin:
        line = line.strip()
        if not line.startswith("{"):
            continue
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        target = msg.get("target", {})
        if "test" in target.get("kind", []) and msg.get("profile", {}).get("test"):
            binaries[target["name"]] = msg["executable"]
    if not binaries:
        print("run_test_binaries: no integration-test binary in cargo's output", file=sys.stderr)
        return 2

    durations_file = os.path.join(logs, "durations.json")
    try:
        last = json.load(open(durations_file))
    except (OSError, ValueError):
        last = {}

    def expected(name: str) -> float:
        if name in last:
            return float(last[name])
        if name in KNOWN_ORDER:
            return 10_000.0 - KNOWN_ORDER.index(name)
        return 0.0

    order = sorted(binaries, key=expected, reverse=True)
    print(f"{len(order)} integration-test binaries, {jobs} at a time; logs in {logs}", flush=True)

    env = dict(os.environ, CARGO_MANIFEST_DIR=root)
    out_lock = threading.Lock()
    results = {}

    def run(name: str):
        log_path = os.path.join(logs, f"{name}.log")
        start = time.monotonic()
        with open(log_path, "w") as log:
            rc = subprocess.call([binaries[name], *args], cwd=root, env=env,
                                 stdout=log, stderr=subprocess.STDOUT)
        took = time.monotonic() - start
        summary = ""
        with open(log_path, errors="replace") as log:
            text = log.read()
        for l in text.splitlines():
            if l.startswith("test result:"):
                summary = l
        with out_lock:
            verdict = "ok" if rc == 0 else f"FAILED (exit {rc})"
            print(f"--- {name}: {verdict} in {took:.0f} s; {summary}", flush=True)
            if rc != 0:
                print(text, flush=True)
                print(f"--- end of {name}", flush=True)
        results[name] = (rc, took, " 0 filtered out" in summary)

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(run, n) for n in order]:
            f.result()

    merged = dict(last)
    # Only whole-binary runs teach the order (a filtered run says nothing of the full length).
    merged.update({n: round(t, 1) for n, (_, t, whole) in results.items() if whole})
    with open(durations_file, "w") as f:
        json.dump(merged, f, indent=1, sort_keys=True)

    failed = sorted(n for n, (rc, _, _) in results.items() if rc != 0)
    wall = time.monotonic() - started
    busy = sum(t for _, t, _ in results.values())
    print(f"\nintegration tests: {len(results) - len(failed)} of {len(results)} binaries passed "
          f"in {wall:.0f} s wall ({busy:.0f} s of binary time, {jobs} lanes)")
    if failed:
        print("failed: " + " ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
