#!/usr/bin/env python3
"""mirrorgate fault runner: a live workload mirrored between two 3-node clusters while a
seeded nemesis kills, pauses, partitions and reshuffles, tailing consumers check every record
as it arrives, and periodic checks compare every partition with the source at each isolation
level, through mirrorgate and directly on the destination. Run it with `make faults` /
`make faults-long` (scripts/faults.sh), which build mirrorgate, prepare the Python venv and
start this program in its own network namespace. See docs/reliability.md.

Exit status: 0 when no violation was found and nothing in verdict.py failed the run (every
fault kind confirmed, no mirrorgate exit or panic, checks conclusive, the workload clean, the
end-of-run checks passed); 1 otherwise. `summary.json` in the work directory says why.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import checker  # noqa: E402
import record  # noqa: E402
import verdict  # noqa: E402
from nemesis import REPO, Cluster, Fleet, Mirrorgate, Nemesis  # noqa: E402
from tail import Tails  # noqa: E402
from workload import TOPICS, Workload  # noqa: E402

MIRROR = "faults"
PREFIX = "f-"
MG_PORT = 19092  # the first instance's bootstrap port; instance i (0-based) listens from MG_PORT + 20 * i
PORT_STEP = 20
# Group timings of several-instances runs: short, so that work moves within seconds of a
# kill -9 or a pause (the defaults are 10000 / 3000 / 30000).
# mirrorgate's log level in the run (FAULTS_LOG_LEVEL, e.g. "info,mirrorgate::mirror=debug").
LOG_LEVEL = os.environ.get("FAULTS_LOG_LEVEL", "info")
# FAULTS_MARKERS: mirror.transaction.markers (real, the default, or placeholder).
MARKERS = os.environ.get("FAULTS_MARKERS", "real")
GROUP_TIMINGS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "rebalance_timeout_ms": 12000}


class Run:
    def __init__(self, args):
        self.args = args
        self.t0 = time.time()
        self.events = []  # (wall time, elapsed s, text)
        self.lock = threading.Lock()
        self.violations = []
        self.prev_check_start = None  # start of the previous completed check
        self.reported = set()  # (partition, view, first problem) already logged in full
        self.checks = {"made": 0, "views": 0, "views_inconclusive": 0, "views_matching": 0, "final_made": False, "final_views": 0, "final_inconclusive": 0, "compaction": {}}
        self.crashed = threading.Event()  # a mirrorgate instance exited by itself
        self.work = args.work
        os.makedirs(self.work, exist_ok=True)
        self.event_file = open(os.path.join(self.work, "events.log"), "a")

    def log(self, text, event=True):
        """Prints and records a line; `event=False` keeps it out of the nemesis context that
        violations quote (check results, violations themselves)."""
        now = time.time()
        line = f"{time.strftime('%H:%M:%S', time.gmtime(now))}.{int(now * 1000) % 1000:03d} +{now - self.t0:7.1f}s {text}"
        with self.lock:
            if event:
                self.events.append((now, text))
            print(line, flush=True)
            self.event_file.write(line + "\n")
            self.event_file.flush()

    def events_around(self, t_from, t_to, margin=30):
        """Nemesis events from `margin` s before the previous check (the last moment the
        partition was seen right) or `t_from`, whichever is earlier, to `t_to`."""
        start = min(t_from, self.prev_check_start if self.prev_check_start is not None else self.t0) - margin
        with self.lock:
            return [f"+{t - self.t0:.1f}s {e}" for t, e in self.events if start <= t <= t_to]

    def count_views(self, views, inconclusive, final):
        with self.lock:
            self.checks["views"] += views
            self.checks["views_inconclusive"] += inconclusive
            if final:
                self.checks["final_made"] = True
                self.checks["final_views"] += views
                self.checks["final_inconclusive"] += inconclusive

    def violation(self, tp, view, problems, t_from, t_to):
        v = {
            "partition": f"{tp[0]}-{tp[1]}",
            "view": view,
            "problems": problems,
            "events_around": self.events_around(t_from, t_to),
        }
        # One full report per partition, view and class of problem ("[missing]", ...).
        key = (v["partition"], view.split(",")[0], problems[0].split("]")[0] if problems[0].startswith("[") else problems[0])
        with self.lock:
            self.violations.append(v)
            seen = key in self.reported
            self.reported.add(key)
        if seen:
            self.log(f"VIOLATION {v['partition']} ({view}) again: {problems[0][:200]}", event=False)
            return
        self.log(f"VIOLATION {v['partition']} ({view}): {problems[0]}", event=False)
        for p in problems[1:]:
            self.log(f"  {p}", event=False)
        for e in v["events_around"][-15:]:
            self.log(f"  nemesis around it: {e}", event=False)


def mirrors_cli(binary, fleet, *args, timeout=90, bootstrap=None):
    """The `mirrors` CLI against one live instance (`bootstrap`, or one picked at random)."""
    return subprocess.run([binary, "mirrors", "--bootstrap-server", bootstrap or fleet.any_bootstrap(), *args], capture_output=True, text=True, timeout=timeout)


def owners_text(rows):
    """'mg1 (4): f-plain-0 f-lz4-1 ...; mg2 (5): ...' from `mirrors --describe --json` rows."""
    by = {}
    for x in rows:
        by.setdefault(x.get("owner") or "unassigned", []).append(f"{x['topic']}-{x['partition']}")
    return "; ".join(f"{o} ({len(ps)}): {' '.join(ps)}" for o, ps in sorted(by.items()))


def log_owners(run, binary, fleet, bootstrap, when):
    """With several instances, logs which instance owns each partition (as `bootstrap`'s
    instance describes it)."""
    if len(fleet) < 2:
        return
    try:
        r = mirrors_cli(binary, fleet, "--describe", "--mirror", MIRROR, "--json", timeout=30, bootstrap=bootstrap)
        text = owners_text(json.loads(r.stdout)) if r.returncode == 0 else f"describe failed: {(r.stdout + r.stderr).strip()[-300:]}"
    except Exception as e:  # noqa: BLE001 - only a log line
        text = f"describe failed: {e!r}"
    name = fleet.names_of(bootstrap)
    run.log(f"owners {when} (as {name} describes them): {text}", event=False)


def create_source_topics(src):
    admin = AdminClient({"bootstrap.servers": src.bootstrap, "log_level": 2})
    new = [NewTopic(t, num_partitions=n, replication_factor=3, config=dict(cfg)) for t, n, cfg, _, _, _ in TOPICS]
    for t, f in admin.create_topics(new, operation_timeout=60).items():
        f.result(120)


def all_partitions():
    return [(t, p) for t, n, _, _, _, _ in TOPICS for p in range(n)]


COMPACTED = {t for t, _, cfg, _, _, _ in TOPICS if cfg.get("cleanup.policy") == "compact"}


def describe_segments(run, fleet):
    """{(topic, partition): offset map} from `mirrors --describe --json` of a live instance,
    or None."""
    try:
        r = mirrors_cli(run.args.mirrorgate, fleet, "--describe", "--mirror", MIRROR, "--json", timeout=30)
        rows = checker.parse_describe(r.stdout) if r.returncode == 0 else None
        return checker.describe_segments(rows) if rows is not None else None
    except Exception:  # noqa: BLE001 - unavailable now: the caller retries or calls views inconclusive
        return None


def check(run, src, dst, fleet, judge, final=False):
    """One full check of every mirror partition (checker.Check); returns the destination
    ends read through mirrorgate, or None."""
    mg = fleet.bootstrap_list()
    log_owners(run, run.args.mirrorgate, fleet, mg.split(",")[0], f"at check {run.checks['made'] + 1}")
    return judge.run_check(mg, src.bootstrap, dst.bootstrap, lambda: describe_segments(run, fleet), final=final)


def wait_lag_zero(run, binary, fleet, src, timeout_s, give_up_failed_s=90):
    """Waits until every partition is MIRRORING with lag 0 and mirrored up to the source end
    (its source offset; the destination offset differs on a shifted partition). Gives up early when some partition stays FAILED and not retryable
    (`retryAttempt` -1: only an operator moves it on) for `give_up_failed_s`."""
    deadline = time.time() + timeout_s
    last = None
    failed_since = None
    while time.time() < deadline:
        mg = fleet.any_bootstrap()
        r = mirrors_cli(binary, fleet, "--describe", "--mirror", MIRROR, "--json", bootstrap=mg)
        if r.returncode == 0:
            rows = json.loads(r.stdout)
            src_ends = checker.end_offsets(src.bootstrap, all_partitions())
            bad = [
                f"{x['topic']}-{x['partition']}: state {x['state']} lag {x['lag']} at source offset {x['sourceOffset']} (dest {x['destinationOffset']}) source end {src_ends.get((x['topic'], x['partition']))}"
                + (f" owner {x.get('owner')}" if len(fleet) > 1 else "")
                + (f" error {x['errorMessage']!r}" if x.get("errorMessage") else "")
                for x in rows
                # (The source offset the mirror has reached: the destination offset differs from
                # it on a shifted partition, e.g. after a duplicate marker was hidden.)
                if x["lag"] != 0 or x["state"] != "MIRRORING" or x["sourceOffset"] != src_ends.get((x["topic"], x["partition"]))
            ]
            if len(rows) == len(all_partitions()) and not bad:
                run.log(f"lag 0 on all {len(rows)} partitions (mirrored up to the source end)")
                if len(fleet) > 1:
                    run.log(f"owners at lag 0 (as {fleet.names_of(mg)} describes them): {owners_text(rows)}", event=False)
                return True
            last = bad or [f"{len(rows)} rows"]
            stuck = [f"{x['topic']}-{x['partition']}" for x in rows if x["state"] == "FAILED" and x.get("retryAttempt") == -1]
            failed_since = (failed_since or time.time()) if stuck else None
            if stuck and time.time() - failed_since >= give_up_failed_s:
                run.log(f"lag will not reach 0: {', '.join(stuck)} FAILED and not retryable for {give_up_failed_s}s: {'; '.join(last)}")
                return False
        else:
            last = [r.stderr.strip()[-300:]]
        time.sleep(5)
    run.log(f"lag did not reach 0 within {timeout_s}s: {'; '.join(last or [])}")
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=float(os.environ.get("FAULTS_DURATION", 150)), help="seconds of faults (default FAULTS_DURATION or 150)")
    ap.add_argument("--seed", type=int, default=int(os.environ["FAULTS_SEED"]) if os.environ.get("FAULTS_SEED") else None)
    ap.add_argument("--short", action="store_true", help="every nemesis action first, in a seeded order, then random ones")
    ap.add_argument("--mirrorgate", default=os.environ.get("FAULTS_MG_BIN", os.path.join(REPO, "target/release/mirrorgate")))
    ap.add_argument("--work", default=None)
    ap.add_argument("--check-every", type=float, default=None, help="mean seconds between checks")
    ap.add_argument(
        "--instances",
        type=int,
        default=int(os.environ.get("FAULTS_INSTANCES") or 1),
        help="mirrorgate instances sharing the mirror work (default FAULTS_INSTANCES or 1)",
    )
    args = ap.parse_args()
    if args.instances < 1:
        ap.error("--instances must be at least 1")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    args.work = args.work or os.path.join(REPO, "target", "faults", run_id)
    run = Run(args)
    netns = os.environ.get("FAULTS_NETNS") == "1"
    commit = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    run.log(f"fault runner: seed {args.seed} (FAULTS_SEED={args.seed} reproduces the schedule), duration {args.duration:.0f}s, mirrorgate {args.mirrorgate}, commit {commit}, work dir {args.work}, network cuts {'on (own network namespace)' if netns else 'OFF (no network namespace)'}")
    if args.instances > 1:
        run.log(
            f"{args.instances} mirrorgate instances (mg1..mg{args.instances}, bootstrap ports "
            f"{', '.join(str(MG_PORT + PORT_STEP * i) for i in range(args.instances))}) sharing the work through the group on the destination; "
            f"short group timings: {', '.join(f'instances.{k}={v}' for k, v in GROUP_TIMINGS.items())}"
        )
    rng = random.Random(args.seed)
    check_rng = random.Random(args.seed + 1)
    state_dir = os.environ.get("MIRRORGATE_KAFKA_DIR", os.path.join(REPO, ".kafka"))
    tag = f"{os.getpid()}"
    props = ["min.insync.replicas=2", "log.cleaner.backoff.ms=1000", "unclean.leader.election.enable=false"]
    src = Cluster(f"faults-src-{tag}", "source", state_dir)
    dst = Cluster(f"faults-dst-{tag}", "destination", state_dir)
    if args.instances == 1:
        fleet = Fleet([Mirrorgate(args.mirrorgate, os.path.join(args.work, "mirrorgate.yaml"), os.path.join(args.work, "mirrorgate.log"), bootstrap=f"127.0.0.1:{MG_PORT}")])
    else:
        fleet = Fleet(
            [
                Mirrorgate(
                    args.mirrorgate,
                    os.path.join(args.work, f"mirrorgate-mg{i + 1}.yaml"),
                    os.path.join(args.work, f"mirrorgate-mg{i + 1}.log"),
                    name=f"mg{i + 1}",
                    bootstrap=f"127.0.0.1:{MG_PORT + PORT_STEP * i}",
                )
                for i in range(args.instances)
            ]
        )
    without = fault_opt_outs()
    cut_kinds = {"cut-source-network", "cut-destination-network"}
    if not netns and not cut_kinds <= without:
        run.log("FAILED: network cuts are impossible here (no network namespace: needs root or CAP_NET_ADMIN, unshare and ip) and the run was not told to do without them (FAULTS_WITHOUT=cuts)")
        return 1
    if without:
        run.log(f"told to do without: {', '.join(sorted(without))} (FAULTS_WITHOUT); the summary says so")
    state = {"workload": None, "nemesis": None, "tails": None, "end_ok": True, "verify_compacted": None}
    try:
        setup(run, src, dst, fleet, props)
        fault_phase(run, src, dst, fleet, rng, check_rng, netns, without, state)
        end_phase(run, src, dst, fleet, state)
    except Exception:
        run.log(f"runner error: {traceback.format_exc()}")
        state["end_ok"] = False
        state["runner_error"] = True
    finally:
        if state["workload"]:
            state["workload"].stopping.set()
        if state["tails"]:
            state["tails"].stopping.set()
        for m in fleet:
            m.exited_by_itself()
        fleet.stop()
        if os.environ.get("FAULTS_KEEP") != "1":
            src.stop()
            dst.stop()
    failures = judge_run(run, fleet, state, without)
    write_summary(run, commit, fleet, state, without, failures)
    if run.violations or failures:
        run.log(f"FAILED: {len(run.violations)} violation(s), {len(failures)} other failure(s); seed {args.seed}; details in {args.work}/summary.json")
        for f in failures:
            run.log(f"  failure: {f}", event=False)
        return 1
    run.log(f"PASSED: 0 violations, every fault confirmed, checks conclusive, workload clean; seed {args.seed}")
    return 0


def fault_opt_outs():
    """The fault kinds FAULTS_WITHOUT names (comma-separated kinds; `cuts` for both cuts)."""
    out = set()
    for k in (os.environ.get("FAULTS_WITHOUT") or "").split(","):
        k = k.strip()
        if k == "cuts":
            out |= {"cut-source-network", "cut-destination-network"}
        elif k:
            out.add(k)
    return out


def setup(run, src, dst, fleet, props):
    """Both clusters, the source topics, mirrorgate's configs and processes, the mirror."""
    args = run.args
    threads = [threading.Thread(target=c.start, args=(props,)) for c in (src, dst)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not (src.bootstrap and dst.bootstrap):
        raise RuntimeError("a cluster failed to start")
    run.log(f"source {src.bootstrap} (mirrorgate's listener {src.mg_bootstrap}); destination {dst.bootstrap} (mirrorgate's listener {dst.mg_bootstrap})")
    create_source_topics(src)
    for i, mg in enumerate(fleet):
        port = MG_PORT + PORT_STEP * i
        with open(mg.config_path, "w") as f:
            f.write(
                f"destination:\n  bootstrap_servers: {dst.mg_bootstrap}\n  metadata_refresh_interval_ms: 5000\n"
                f"listeners:\n  - name: clients\n    bind_host: 127.0.0.1\n    advertised_host: 127.0.0.1\n    port_range: {port}-{port + 11}\n    admin: true\n"
                f"mirror_state:\n  topic: __mirror_state\n  num_partitions: 3\n  replication_factor: 3\nlog:\n  level: {LOG_LEVEL}\n"
            )
            if len(fleet) > 1:
                f.write(f"instances:\n  name: {mg.name}\n" + "".join(f"  {k}: {v}\n" for k, v in GROUP_TIMINGS.items()))
    mirror_cfg = os.path.join(args.work, "mirror.properties")
    with open(mirror_cfg, "w") as f:
        f.write(f"bootstrap.servers={src.mg_bootstrap}\nmirror.metadata.refresh.interval.ms=5000\nmirror.failed.retry.max.backoff.ms=15000\nmirror.transaction.markers={MARKERS}\n")
    run.log(f"mirror.transaction.markers={MARKERS}")
    for mg in fleet:
        if not mg.start():
            raise RuntimeError(f"{mg.label} not ready")
    for a in (("--create", "--mirror", MIRROR, "--mirror-config", mirror_cfg), ("--start", "--mirror", MIRROR, "--topics", f"{PREFIX}.*")):
        # With several instances each call goes to a random one, which may not have read
        # the previous call's state record yet (UNKNOWN_CLUSTER_MIRROR): retried for 30 s.
        deadline = time.time() + (30 if len(fleet) > 1 else 0)
        while True:
            via = fleet.any_bootstrap()
            r = mirrors_cli(args.mirrorgate, fleet, *a, bootstrap=via)
            if r.returncode == 0 or time.time() > deadline or "UNKNOWN_CLUSTER_MIRROR" not in r.stdout + r.stderr:
                break
            run.log(f"mirrors {a[0]} through {fleet.names_of(via)} failed, retrying in 1 s: {(r.stdout + r.stderr).strip()[-300:]}")
            time.sleep(1)
        if r.returncode != 0:
            raise RuntimeError(f"mirrors {a[0]} failed: {r.stdout} {r.stderr}")
        if len(fleet) > 1:
            run.log(f"mirrors {a[0]} through {fleet.names_of(via)}: ok")
    run.log(f"mirror {MIRROR} created and started on {PREFIX}.*")


def watch_exits(run, fleet):
    """Every second: an instance that exited by itself is logged with its exit status and last
    log lines, and ends the fault phase (`run.crashed`)."""
    while not run.crashed.is_set():
        for m in fleet:
            if m.exited_by_itself():
                run.log(f"MIRRORGATE EXITED BY ITSELF: {m.label} pid {m.crashed['pid']} exit status {m.crashed['exit']}; last log lines:")
                for line in m.crashed["last_lines"]:
                    run.log(f"  {line}", event=False)
                run.crashed.set()
        time.sleep(1)


def fault_phase(run, src, dst, fleet, rng, check_rng, netns, without, state):
    """Tails, workload, checks during the faults, the nemesis; ends healed, producers stopped."""
    args = run.args
    parts = all_partitions()
    aborted_hidden_ok = MARKERS == "placeholder"
    workload = Workload(src.bootstrap, args.seed, run.log)
    state["workload"] = workload
    tails = Tails(run, parts, COMPACTED, workload.ledger.of, lambda: describe_segments(run, fleet), aborted_hidden_ok)
    tails.add_source(src.bootstrap)
    for m in fleet:
        tails.add_destination(f"via-{m.name or 'mirrorgate'}", m.bootstrap, direct=False)
    tails.add_destination("direct", dst.bootstrap, direct=True)
    state["tails"] = tails
    tails.start()
    workload.start()
    threading.Thread(target=watch_exits, args=(run, fleet), name="exits", daemon=True).start()
    nem = Nemesis(rng, src, dst, fleet, PREFIX, run.log, netns, t0=run.t0, without=without)
    state["nemesis"] = nem
    judge = checker.Check(run, parts, COMPACTED, workload.ledger.of, aborted_hidden_ok)
    state["judge"] = judge
    stop_checks = threading.Event()
    mean = args.check_every or (30 if args.duration <= 600 else 90)

    def checker_loop():
        while not stop_checks.wait(check_rng.uniform(0.5 * mean, 1.5 * mean)):
            try:
                check(run, src, dst, fleet, judge)
            except Exception as e:  # noqa: BLE001 - a broken check is reported, the run goes on
                run.log(f"check failed to run: {e!r}", event=False)
                run.count_views(4 * len(parts), 4 * len(parts), False)

    ct = threading.Thread(target=checker_loop, name="checker", daemon=True)
    ct.start()
    end = time.time() + args.duration
    # The short form goes on until every fault kind is confirmed once (at most 5 more minutes).
    hard_end = end + 300
    while not run.crashed.is_set() and (time.time() < end or (args.short and (getattr(nem, "_first", None) or nem.missing()) and time.time() < hard_end)):
        time.sleep(rng.uniform(2, 10))
        kind, params = nem.plan(args.short)
        nem.start_due()
        nem.apply(kind, params)
    nem.heal()
    run.log(f"nemesis done: confirmed {json.dumps(nem.counts)}{' unconfirmed: ' + json.dumps(nem.unconfirmed) if nem.unconfirmed else ''}{' skipped: ' + json.dumps(nem.skipped) if nem.skipped else ''}")
    stop_checks.set()
    ct.join()
    left = workload.stop()
    run.log(f"producers stopped{' (still running: ' + ','.join(left) + ')' if left else ''}: {json.dumps(workload.stats.snapshot())}, {workload.ledger.aborted_count()} aborted records on the log")


def end_phase(run, src, dst, fleet, state):
    """Lag 0, --verify, the final check, final ends; the tails' last records judged."""
    if run.crashed.is_set():
        run.log("end checks skipped: a mirrorgate instance exited by itself")
        state["end_ok"] = False
        return
    ok = wait_lag_zero(run, run.args.mirrorgate, fleet, src, 600)
    # --verify compares a compacted source batch's records with the destination's, but the
    # destination topic is compacted too, by its own cleaner: on compacted topics a
    # difference is expected and recorded, not failed (docs/reliability.md); the checker's
    # compaction-aware comparison covers them.
    plain_topics = ",".join(t for t, *_ in TOPICS if t not in COMPACTED)
    r = mirrors_cli(run.args.mirrorgate, fleet, "--verify", "--mirror", MIRROR, "--topics", plain_topics, timeout=600)
    run.log(f"mirrors --verify (non-compacted topics) exit {r.returncode}: {(r.stdout + r.stderr).strip()[-1500:]}")
    ok &= r.returncode == 0
    if COMPACTED:
        r = mirrors_cli(run.args.mirrorgate, fleet, "--verify", "--mirror", MIRROR, "--topics", ",".join(sorted(COMPACTED)), timeout=600)
        state["verify_compacted"] = r.returncode
        run.log(f"mirrors --verify (compacted topics, expected to differ once either cleaner ran) exit {r.returncode}: {(r.stdout + r.stderr).strip()[-800:]}")
    time.sleep(5)  # the tails reach the end
    state["tail_figures"] = state["tails"].stop()
    run.log(f"tailing consumers: {json.dumps(state['tail_figures'])}", event=False)
    ends = check(run, src, dst, fleet, state["judge"], final=True)
    if ends is None:
        ok = False
    else:
        src_ends = checker.end_offsets(src.bootstrap, all_partitions())
        for tp in all_partitions():
            if ends[tp] != src_ends[tp]:
                run.violation(tp, "final log ends", [f"destination end {ends[tp]} != source end {src_ends[tp]}"], time.time(), time.time())
    state["end_ok"] = bool(ok)


def judge_run(run, fleet, state, without):
    """Every failure besides the violations (verdict.py)."""
    nem, workload = state["nemesis"], state["workload"]
    failures = []
    if state.get("runner_error"):
        failures.append("the runner failed (see the runner error in events.log)")
    if not state["end_ok"]:
        failures.append("end-of-run checks did not pass (lag 0, --verify or the final check)")
    crashes = [m.crashed for m in fleet if m.crashed]
    failures += verdict.mirrorgate_problems(crashes, {m.label: m.panics() for m in fleet})
    if nem is not None:
        failures += verdict.faults_problems(nem.counts, nem.unconfirmed, without, nem.kinds)
    failures += verdict.check_problems(run.checks)
    if workload is not None:
        stats = workload.stats.snapshot()
        with workload.stats.lock:
            errors = list(workload.stats.errors)
        txn = [t for t, *_, kind in TOPICS if kind == "txn"]
        failures += verdict.workload_problems(stats, errors, workload.ledger.aborted_count(), [t for t, *_ in TOPICS], nem.windows if nem else [], txn)
    if state.get("tail_figures") is not None:
        failures += verdict.tail_problems(state["tail_figures"])
    elif not crashes:
        failures.append("the tailing consumers were not stopped and judged")
    return failures


def write_summary(run, commit, fleet, state, without, failures):
    args, nem, workload = run.args, state["nemesis"], state["workload"]
    summary = {
        "seed": args.seed,
        "commit": commit,
        "mirrorgate": args.mirrorgate,
        "markers": MARKERS,
        "duration_s": round(time.time() - run.t0),
        "fault_duration_s": args.duration,
        "short": args.short,
        "done_without": sorted(without),
        "nemesis_confirmed": nem.counts if nem else None,
        "nemesis_unconfirmed": nem.unconfirmed if nem else None,
        "nemesis_skipped": nem.skipped if nem else None,
        "leader_moves": nem.leader_moves if nem else None,
        "instances": len(fleet),
        "mirrorgate_starts": sum(m.starts for m in fleet),
        "starts_per_instance": fleet.starts(),
        "mirrorgate_exits": [m.crashed for m in fleet if m.crashed],
        "scale_actions": nem.scale_actions if nem else None,
        "checks": run.checks,
        "tails": state.get("tail_figures"),
        "workload": workload.stats.snapshot() if workload else None,
        "aborted_records_on_log": workload.ledger.aborted_count() if workload else None,
        "verify_compacted_exit": state.get("verify_compacted"),
        "violations": len(run.violations),
        "distinct_violations": len(run.reported),
        "failures": failures,
        "passed": not run.violations and not failures,
    }
    with open(os.path.join(args.work, "summary.json"), "w") as f:
        json.dump({**summary, "violation_details": run.violations}, f, indent=2, default=str)
    run.log(f"SUMMARY {json.dumps(summary, default=str)}")
    if os.environ.get("FAULTS_RECORD"):
        out = record.write(args.work, os.environ["FAULTS_RECORD"], os.environ.get("FAULTS_RECORD_WHAT"))
        run.log(f"record written to {out} (commit it)", event=False)


if __name__ == "__main__":
    sys.exit(main())
