"""The fault runner's processes and nemesis: the two 3-node clusters (scripts/kafka.sh), the
mirrorgate process, and the fault actions with their seeded parameters.

Network cuts: the runner runs in its own network namespace (scripts/faults.sh starts it under
`unshare -n`). Each cluster has an extra listener, used only by mirrorgate, on its own loopback
address (source 127.0.0.2, destination 127.0.0.3; producers, the checker's source reads and
replication use 127.0.0.1). A cut adds `ip rule ... prohibit` rules for that address in both
directions: new connections fail at once (EACCES), established ones are blackholed, until the
rules are removed.
"""

import json
import os
import random
import signal
import socket
import subprocess
import tempfile
import threading
import time

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KAFKA_SH = os.path.join(REPO, "scripts", "kafka.sh")
MG_ADDR = {"source": "127.0.0.2", "destination": "127.0.0.3"}


def sh(args, timeout=180, check=True):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return r


class Cluster:
    """A 3-node KRaft cluster started by scripts/kafka.sh with an extra `MG` listener."""

    def __init__(self, name, role, state_dir):
        self.name, self.role, self.state_dir = name, role, state_dir
        self.bootstrap = None
        self.mg_bootstrap = None
        self.down = None  # node currently stopped by the nemesis

    def start(self, props):
        args = [KAFKA_SH, "start", self.name, "--nodes", "3", "--owner-pid", str(os.getpid()), "--extra-listener", f"MG@{MG_ADDR[self.role]}"]
        for p in props:
            args += ["--prop", p]
        self.bootstrap = sh(args, timeout=300).stdout.strip().splitlines()[-1]
        with open(os.path.join(self.state_dir, self.name, "bootstrap.MG")) as f:
            self.mg_bootstrap = f.read().strip()

    def stop(self):
        sh([KAFKA_SH, "stop", self.name, "--kill"], check=False)

    def node_pid(self, n):
        try:
            with open(os.path.join(self.state_dir, self.name, f"node-{n}", "pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def admin(self):
        return AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 10000, "log_level": 2})

    def partitions(self, prefix):
        md = self.admin().list_topics(timeout=30)
        out = {}
        for t, tm in md.topics.items():
            if t.startswith(prefix):
                for p, pm in tm.partitions.items():
                    out[(t, p)] = (list(pm.replicas), list(pm.isrs), pm.leader)
        return out

    def fully_replicated(self, prefix=""):
        try:
            return all(len(isr) == len(rep) for rep, isr, _ in self.partitions(prefix).values())
        except Exception:  # noqa: BLE001 - metadata unavailable counts as not ready
            return False


class Mirrorgate:
    """One mirrorgate process under test: same config (ports, state topic) on every restart."""

    def __init__(self, binary, config_path, log_path, name=None, bootstrap=None):
        self.binary, self.config_path, self.log_path = binary, config_path, log_path
        self.name, self.bootstrap = name, bootstrap
        self.proc = None
        self.starts = 0
        self.paused = False  # SIGSTOPped by the nemesis
        self.expected_exit = False  # the runner or the nemesis stopped it (kill -9, SIGTERM)
        self.crashed = None  # {"exit": status, "at_s", "last_lines"} when it exited by itself
        self.scaled_down = False  # SIGTERMed by the nemesis' `scale` action, to start again later
        self.up_at = None  # when a scaled-down instance is due to start again

    @property
    def label(self):
        """`mirrorgate` alone, `mirrorgate mg2` among several."""
        return f"mirrorgate {self.name}" if self.name else "mirrorgate"

    def start(self, wait_s=120):
        log = open(self.log_path, "ab")
        mark = os.path.getsize(self.log_path)
        env = dict(os.environ)
        env.pop("RUST_LOG", None)
        self.proc = subprocess.Popen([self.binary, "run", "--config", self.config_path], stdout=log, stderr=log, env=env)
        self.starts += 1
        self.paused = self.scaled_down = self.expected_exit = False
        self.up_at = None
        deadline = time.time() + wait_s
        while time.time() < deadline:
            with open(self.log_path, "rb") as f:
                f.seek(mark)
                if b"mirrorgate ready" in f.read():
                    return True
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode} at start; see {self.log_path}")
            time.sleep(0.2)
        return False

    def kill9(self):
        """SIGKILL; returns the exit status (-9 when the signal killed it)."""
        self.expected_exit = True
        self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait()

    def last_lines(self, n=20):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - 16384))
                return [x.decode("utf-8", "replace") for x in f.read().splitlines()[-n:]]
        except OSError as e:
            return [f"(log unreadable: {e})"]

    def exited_by_itself(self):
        """True (once) when the process exited without the runner or the nemesis stopping
        it; `crashed` then holds its exit status and last log lines."""
        if self.proc is None or self.expected_exit or self.crashed is not None or self.proc.poll() is None:
            return False
        self.crashed = {"instance": self.label, "pid": self.proc.pid, "exit": self.proc.returncode, "last_lines": self.last_lines()}
        return True

    def panics(self):
        """Lines of its log that report a panic (all its lives)."""
        out = []
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return out
        for i, line in enumerate(lines):
            if "panicked at" in line:
                out.append(" | ".join(lines[i : i + 3])[:600])
        return out

    def signal(self, sig):
        self.proc.send_signal(sig)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        self.expected_exit = True
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Fleet:
    """The mirrorgate instances under test: one (the default, today's behaviour) or several
    sharing the mirror work (same destination, same state topic, each its own listener ports
    and `instances.name`)."""

    def __init__(self, instances):
        self.instances = instances
        self.pick_rng = random.Random()  # which live instance the CLI and the checker use: not part of the schedule

    def __len__(self):
        return len(self.instances)

    def __iter__(self):
        return iter(self.instances)

    def running(self):
        """Instances whose process is up (paused ones included)."""
        return [m for m in self.instances if m.alive()]

    def serving(self):
        """Instances up and not paused: those a client can talk to now."""
        return [m for m in self.instances if m.alive() and not m.paused]

    def any_bootstrap(self):
        """A live instance's bootstrap address (the first instance's when none is up: the
        caller fails or retries as it would with a single mirrorgate down)."""
        live = self.serving()
        return (self.pick_rng.choice(live) if live else self.instances[0]).bootstrap

    def bootstrap_list(self):
        """Every serving instance's bootstrap address, in random order, comma-separated (all
        instances' when none serves): a librdkafka client moves to another instance when the
        one it talks to stops (each instance advertises the destination's node ids on its own
        ports, so new metadata re-points the same node ids)."""
        live = self.serving() or list(self.instances)
        live = list(live)
        self.pick_rng.shuffle(live)
        return ",".join(m.bootstrap for m in live)

    def names_of(self, bootstraps):
        by = {m.bootstrap: m.name or "mirrorgate" for m in self.instances}
        return ",".join(by.get(b, b) for b in bootstraps.split(","))

    def starts(self):
        return {m.name or "mirrorgate": m.starts for m in self.instances}

    def stop(self):
        for m in self.instances:
            m.stop()


def net_rules(addr, cut):
    op = "add" if cut else "del"
    for pref, sel in ((50, "to"), (51, "from")):
        sh(["ip", "rule", op, "pref", str(pref), sel, addr, "prohibit"], timeout=10, check=cut)


# Action kinds, each at least once in the short form.
KINDS = [
    "kill9-mirrorgate",
    "pause-mirrorgate",
    "restart-source-broker",
    "restart-destination-broker",
    "move-source-leaders",
    "move-destination-leaders",
    "cut-source-network",
    "cut-destination-network",
]
# Only with several instances (the schedule of a single-instance run is unchanged).
KINDS_SEVERAL = ["scale-mirrorgate"]
WEIGHTS = {
    "kill9-mirrorgate": 6,
    "pause-mirrorgate": 2,
    "restart-source-broker": 2,
    "restart-destination-broker": 2,
    "move-source-leaders": 2,
    "move-destination-leaders": 2,
    "cut-source-network": 2,
    "cut-destination-network": 2,
    "scale-mirrorgate": 3,
}


class Confirmed(Exception):
    """Raised by an action whose fault could not be confirmed (the message says why)."""


def process_state(pid):
    """The state letter of /proc/<pid>/stat ('R', 'S', 'T', ...), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def gone(pid, wait_s=15):
    """True once process `pid` no longer exists (or is a zombie) within `wait_s`."""
    deadline = time.time() + wait_s
    while time.time() < deadline:
        if process_state(pid) in (None, "Z", "X"):
            return True
        time.sleep(0.1)
    return False


def probe(hostport, timeout=2.0):
    """None when a TCP connection to `hostport` opens, else the error text."""
    host, port = hostport.split(",")[0].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return None
    except OSError as e:
        return f"{type(e).__name__}: {e}"


class Nemesis:
    """Draws actions from a seeded generator and applies them one at a time; every step is
    written to the event log with its wall time. With several mirrorgate instances, a
    mirrorgate action picks one of them at random (seeded), and `scale-mirrorgate` stops one
    (SIGTERM) that stays down across the next actions until it is due again (or the heal).

    Every fault is confirmed before it counts (`counts`): a kill by the process being gone, a
    pause by the process state `T`, a broker restart by the broker back in every ISR, a leader
    move by the leaders having changed (before -> after logged), a cut by a probe connection
    that fails during it and succeeds after it. An action that could not be confirmed, or
    raised, is listed in `unconfirmed` with the reason; `windows` holds (start, end, kind) of
    every action (the workload's errors inside one are caused by a fault). `without` names the
    kinds the run was told to do without (FAULTS_WITHOUT): never drawn."""

    def __init__(self, rng, source, destination, fleet, topics_prefix, log_event, netns, t0=None, without=()):
        self.t0 = time.time() if t0 is None else t0
        self.rng, self.src, self.dst, self.fleet = rng, source, destination, fleet
        self.several = len(fleet) > 1
        self.without = set(without)
        self.kinds = [k for k in KINDS + (KINDS_SEVERAL if self.several else []) if k not in self.without]
        self.prefix, self.log_event, self.netns = topics_prefix, log_event, netns
        self.counts = {k: 0 for k in self.kinds}
        self.unconfirmed = {}  # kind -> [reason]
        self.skipped = {}  # actions not taken (no instance to take them on)
        self.scale_actions = []  # one dict per scale action (instance, times, how it went)
        self.leader_moves = []  # {"cluster", "topic", "moved": {partition: "a->b"}}
        self.windows = []
        self.cut = None
        self.lock = threading.Lock()

    @property
    def paused(self):
        return any(m.paused for m in self.fleet)

    def missing(self):
        """Kinds not confirmed once yet."""
        return [k for k in self.kinds if self.counts[k] == 0]

    def plan(self, short):
        """The next (kind, params) pair; a short run first draws every kind once, then each
        kind not yet confirmed again, before random ones."""
        if short and not hasattr(self, "_first"):
            self._first = list(self.kinds)
            self.rng.shuffle(self._first)
        if short and self._first:
            kind = self._first.pop()
        elif short and self.missing():
            kind = self.missing()[0]
        else:
            kind = self.rng.choices(self.kinds, [WEIGHTS[k] for k in self.kinds])[0]
        params = {
            "down_s": round(self.rng.uniform(2, 20), 1),
            "node": self.rng.randint(1, 3),
            "hard": self.rng.random() < 0.5,
            "topic_pick": self.rng.random(),
            "restart_delay_s": round(self.rng.uniform(0, 3), 1),
        }
        if self.several:
            params["instance_pick"] = self.rng.random()
            params["scaled_down_s"] = round(self.rng.uniform(10, 40), 1)
        return kind, params

    def apply(self, kind, params):
        t0 = time.time()
        try:
            r = getattr(self, kind.replace("-", "_"))(params)
        except Exception as e:  # noqa: BLE001 - an action that raised is not a confirmed fault
            r = e
        finally:
            self.windows.append((t0, time.time(), kind))
        if r is False:
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
            return
        if isinstance(r, Exception):
            why = str(r) if isinstance(r, Confirmed) else f"raised {r!r}"
            self.unconfirmed.setdefault(kind, []).append(f"+{t0 - self.t0:.1f}s {why}")
            self.log_event(f"{kind} NOT confirmed: {why}")
            self.heal()
            return
        self.counts[kind] += 1

    def _pick(self, p, candidates):
        """The instance a mirrorgate action hits: one of `candidates` (in name order) chosen by
        the seeded draw `instance_pick`."""
        if not candidates:
            return None
        return candidates[int(p.get("instance_pick", 0.0) * len(candidates))]

    def start_due(self, force=False):
        """Starts the scaled-down instances whose time has come (all of them with `force`)."""
        for m in self.fleet:
            if m.scaled_down and not m.alive() and (force or time.time() >= m.up_at):
                t0 = time.time()
                ready = m.start()
                rec = next((a for a in reversed(self.scale_actions) if a["instance"] == m.name and a.get("up_at_s") is None), None)
                if rec is not None:
                    rec["up_at_s"] = round(time.time() - self.t0, 1)
                    rec["ready"] = ready
                self.log_event(f"{m.label} started again after scale-down (pid {m.proc.pid}), {'ready' if ready else 'NOT ready'} after {time.time() - t0:.1f}s")

    def kill9_mirrorgate(self, p):
        m = self._pick(p, [x for x in self.fleet.running() if x.crashed is None])
        if m is None:
            self.log_event("kill -9 mirrorgate skipped: no instance running")
            return False
        pid = m.proc.pid
        self.log_event(f"kill -9 {m.label} (pid {pid})")
        rc = m.kill9()
        if rc != -signal.SIGKILL or not gone(pid):
            raise Confirmed(f"{m.label} pid {pid} after SIGKILL: exit status {rc}, state {process_state(pid)}")
        time.sleep(p["restart_delay_s"])
        t0 = time.time()
        ready = m.start()
        self.log_event(f"{m.label} killed (exit {rc}, pid {pid} gone), restarted (pid {m.proc.pid}), {'ready' if ready else 'NOT ready'} after {time.time() - t0:.1f}s")
        if not ready:
            raise Confirmed(f"{m.label} not ready within 120 s of its restart after kill -9")

    def pause_mirrorgate(self, p):
        m = self._pick(p, [x for x in self.fleet.running() if x.crashed is None])
        if m is None:
            self.log_event("SIGSTOP mirrorgate skipped: no instance running")
            return False
        d = min(p["down_s"], 15)
        pid = m.proc.pid
        m.paused = True
        m.signal(signal.SIGSTOP)
        state = None
        for _ in range(50):
            state = process_state(pid)
            if state == "T":
                break
            time.sleep(0.1)
        self.log_event(f"SIGSTOP {m.label} (pid {pid}) for {d}s: process state {state}")
        time.sleep(d)
        m.signal(signal.SIGCONT)
        m.paused = False
        after = process_state(pid)
        self.log_event(f"SIGCONT {m.label}: process state {after}")
        if state != "T":
            raise Confirmed(f"{m.label} pid {pid} state {state} after SIGSTOP, not T")

    def scale_mirrorgate(self, p):
        """SIGTERM one instance (only while at least two run): it drains, leaves the group and
        its work moves at once; it starts again `scaled_down_s` later (checked before each
        action) or at the heal."""
        up = [m for m in self.fleet.running() if not m.paused and m.crashed is None]
        if len(up) < 2:
            self.log_event(f"scale-mirrorgate skipped: only {len(up)} instance(s) up")
            return False
        m = self._pick(p, up)
        pid = m.proc.pid
        self.log_event(f"scale down: SIGTERM {m.label} (pid {pid}), down for {p['scaled_down_s']}s")
        t0 = time.time()
        m.expected_exit = True
        m.signal(signal.SIGTERM)
        rec = {"instance": m.name, "pid": pid, "down_at_s": round(t0 - self.t0, 1), "planned_down_s": p["scaled_down_s"]}
        m.scaled_down = True
        m.up_at = time.time() + p["scaled_down_s"]
        self.scale_actions.append(rec)
        try:
            rc = m.proc.wait(60)
            rec["exit"] = rc
            rec["exit_after_s"] = round(time.time() - t0, 1)
            self.log_event(f"{m.label} exited {rc} {time.time() - t0:.1f}s after SIGTERM")
        except subprocess.TimeoutExpired:
            rec["exit"] = "killed: no exit within 60s of SIGTERM"
            self.log_event(f"{m.label} did not exit within 60s of SIGTERM: kill -9")
            m.kill9()
            raise Confirmed(f"{m.label} did not exit within 60 s of SIGTERM")

    def _in_every_isr(self, c, node, wait_s):
        """True once `node` is in the ISR of every partition it replicates (every topic)."""
        deadline = time.time() + wait_s
        while time.time() < deadline:
            try:
                parts = c.partitions("")
                if parts and all(node in isr for rep, isr, _ in parts.values() if node in rep):
                    return True
            except Exception:  # noqa: BLE001 - metadata unavailable: not back yet
                pass
            time.sleep(1)
        return False

    def _restart_broker(self, c, p):
        n = p["node"]
        t0 = time.time()
        while not c.fully_replicated() and time.time() - t0 < 90:
            time.sleep(2)
        if time.time() - t0 > 1:
            self.log_event(f"waited {time.time() - t0:.0f}s for full ISRs on {c.role} (fully replicated: {c.fully_replicated()})")
        pid = c.node_pid(n)
        if pid is None or process_state(pid) is None:
            raise Confirmed(f"{c.role} broker {n}: no live process behind its pid file ({pid})")
        how = "kill -9" if p["hard"] else "stop (SIGTERM)"
        self.log_event(f"{how} {c.role} broker {n} (pid {pid}) for {p['down_s']}s")
        c.down = n
        if p["hard"]:
            os.kill(pid, signal.SIGKILL)
        else:
            sh([KAFKA_SH, "stop-node", c.name, str(n)], timeout=120)
        if not gone(pid, 60):
            raise Confirmed(f"{c.role} broker {n} pid {pid} still there after {how}")
        if p["hard"]:
            sh([KAFKA_SH, "stop-node", c.name, str(n)], timeout=120)
        time.sleep(p["down_s"])
        t0 = time.time()
        sh([KAFKA_SH, "start-node", c.name, str(n)], timeout=300)
        c.down = None
        back = self._in_every_isr(c, n, 180)
        self.log_event(f"{c.role} broker {n} (pid {pid} gone) {'back in every ISR' if back else 'NOT back in every ISR'} {time.time() - t0:.1f}s after its start")
        if not back:
            raise Confirmed(f"{c.role} broker {n} not back in every ISR within 180 s")

    def restart_source_broker(self, p):
        self._restart_broker(self.src, p)

    def restart_destination_broker(self, p):
        self._restart_broker(self.dst, p)

    def _move_leaders(self, c, p):
        parts = c.partitions(self.prefix)
        topics = sorted({t for t, _ in parts})
        topic = topics[int(p["topic_pick"] * len(topics))]
        mine = {tp: v for tp, v in parts.items() if tp[0] == topic}
        plan = {"version": 1, "partitions": []}
        for (t, part), (replicas, _, leader) in sorted(mine.items()):
            # Rotate until another replica comes first: the preferred election then moves the
            # leader (a plain rotation may make the current leader the preferred one).
            rot = replicas[1:] + replicas[:1]
            while rot[0] == leader and rot != replicas:
                rot = rot[1:] + rot[:1]
            plan["partitions"].append({"topic": t, "partition": part, "replicas": rot})
        before = {tp: v[2] for tp, v in mine.items()}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(plan, f)
        try:
            sh([KAFKA_SH, "tool", "reassign-partitions", "--bootstrap-server", c.bootstrap, "--reassignment-json-file", f.name, "--execute"], timeout=180)
        finally:
            os.unlink(f.name)
        errs = {}
        after = dict(before)
        deadline = time.time() + 30
        while time.time() < deadline:
            admin = c.admin()  # kept referenced until the result is in: a destroyed handle fails the future
            fut = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, part) for t, part in mine])
            try:
                res = fut.result(60)
                errs = {f"{k.topic}-{k.partition}": str(v) for k, v in res.items() if v is not None and "ELECTION_NOT_NEEDED" not in str(v)}
            except Exception as e:  # noqa: BLE001 - reported in the event log
                errs = {"all": str(e)}
            time.sleep(1)
            after = {tp: v[2] for tp, v in c.partitions(topic).items() if tp[0] == topic}
            if all(after.get(tp) not in (None, -1, before[tp]) for tp in mine):
                break
        moved = {f"{t}-{part}": f"{before.get((t, part))}->{after.get((t, part))}" for t, part in sorted(mine)}
        self.leader_moves.append({"cluster": c.role, "topic": topic, "at_s": round(time.time() - self.t0, 1), "leaders": moved})
        self.log_event(f"moved {c.role} leaders of {topic} (replica order rotated, preferred election): {' '.join(f'{k}:{v}' for k, v in moved.items())}{' errors ' + str(errs) if errs else ''}")
        stayed = [k for (t, part), k in zip(sorted(mine), moved) if after.get((t, part)) in (None, -1, before[(t, part)])]
        if stayed:
            raise Confirmed(f"{c.role} leaders of {', '.join(stayed)} did not change within 30 s ({errs or 'no error'})")

    def move_source_leaders(self, p):
        self._move_leaders(self.src, p)

    def move_destination_leaders(self, p):
        self._move_leaders(self.dst, p)

    def _cut(self, role, p):
        if not self.netns:
            raise Confirmed("no network namespace: the cut cannot be made")
        addr = MG_ADDR[role]
        c = self.src if role == "source" else self.dst
        before = probe(c.mg_bootstrap)
        if before is not None:
            raise Confirmed(f"probe of {c.mg_bootstrap} failed before the cut: {before}")
        self.log_event(f"cut network mirrorgate <-> {role} ({addr}) for {p['down_s']}s")
        self.cut = role
        net_rules(addr, True)
        during = probe(c.mg_bootstrap)
        time.sleep(p["down_s"])
        net_rules(addr, False)
        self.cut = None
        after = probe(c.mg_bootstrap)
        for _ in range(20):
            if after is None:
                break
            time.sleep(0.5)
            after = probe(c.mg_bootstrap)
        self.log_event(f"network mirrorgate <-> {role} restored (probe of {c.mg_bootstrap}: during the cut {during or 'CONNECTED'}; after {after or 'connected'})")
        if during is None or after is not None:
            raise Confirmed(f"cut of {role} not confirmed: probe during the cut {'connected' if during is None else 'failed'}, after it {'connected' if after is None else 'failed: ' + after}")

    def cut_source_network(self, p):
        self._cut("source", p)

    def cut_destination_network(self, p):
        self._cut("destination", p)

    def heal(self):
        """Undo whatever a failed action may have left behind, and start again every instance
        the nemesis stopped. An instance that exited by itself stays down (the run fails on
        it: `Mirrorgate.crashed`)."""
        if self.cut:
            net_rules(MG_ADDR[self.cut], False)
            self.cut = None
        for m in self.fleet:
            if m.alive():
                m.signal(signal.SIGCONT)
                m.paused = False
        for c in (self.src, self.dst):
            if c.down:
                sh([KAFKA_SH, "start-node", c.name, str(c.down)], timeout=300, check=False)
                c.down = None
        self.start_due(force=True)
        for m in self.fleet:
            m.exited_by_itself()
            if not m.alive() and m.crashed is None and m.expected_exit:
                ready = m.start()
                self.log_event(f"{m.label} started at the heal (pid {m.proc.pid}), {'ready' if ready else 'NOT ready'}")
