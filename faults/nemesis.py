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
import signal
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
    """The mirrorgate process under test: same config (ports, state topic) on every restart."""

    def __init__(self, binary, config_path, log_path):
        self.binary, self.config_path, self.log_path = binary, config_path, log_path
        self.proc = None
        self.starts = 0

    def start(self, wait_s=120):
        log = open(self.log_path, "ab")
        mark = os.path.getsize(self.log_path)
        env = dict(os.environ)
        env.pop("RUST_LOG", None)
        self.proc = subprocess.Popen([self.binary, "run", "--config", self.config_path], stdout=log, stderr=log, env=env)
        self.starts += 1
        deadline = time.time() + wait_s
        while time.time() < deadline:
            with open(self.log_path, "rb") as f:
                f.seek(mark)
                if b"mirrorgate ready" in f.read():
                    return True
            if self.proc.poll() is not None:
                raise RuntimeError(f"mirrorgate exited with {self.proc.returncode} at start; see {self.log_path}")
            time.sleep(0.2)
        return False

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def signal(self, sig):
        self.proc.send_signal(sig)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


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
WEIGHTS = {
    "kill9-mirrorgate": 6,
    "pause-mirrorgate": 2,
    "restart-source-broker": 2,
    "restart-destination-broker": 2,
    "move-source-leaders": 2,
    "move-destination-leaders": 2,
    "cut-source-network": 2,
    "cut-destination-network": 2,
}


class Nemesis:
    """Draws actions from a seeded generator and applies them one at a time; every step is
    written to the event log with its wall time."""

    def __init__(self, rng, source, destination, mg, topics_prefix, log_event, netns):
        self.rng, self.src, self.dst, self.mg = rng, source, destination, mg
        self.prefix, self.log_event, self.netns = topics_prefix, log_event, netns
        self.counts = {k: 0 for k in KINDS}
        self.cut = None
        self.paused = False
        self.lock = threading.Lock()

    def plan(self, short):
        """The next (kind, params) pair; the first len(KINDS) draws of a short run cover every kind."""
        if short and not hasattr(self, "_first"):
            self._first = list(KINDS)
            self.rng.shuffle(self._first)
        if short and self._first:
            kind = self._first.pop()
        else:
            kinds = [k for k in KINDS if self.netns or not k.startswith("cut-")]
            kind = self.rng.choices(kinds, [WEIGHTS[k] for k in kinds])[0]
        params = {
            "down_s": round(self.rng.uniform(2, 20), 1),
            "node": self.rng.randint(1, 3),
            "hard": self.rng.random() < 0.5,
            "topic_pick": self.rng.random(),
            "restart_delay_s": round(self.rng.uniform(0, 3), 1),
        }
        return kind, params

    def apply(self, kind, params):
        if kind.startswith("cut-") and not self.netns:
            self.log_event(f"{kind} skipped: no network namespace")
            return
        getattr(self, kind.replace("-", "_"))(params)
        self.counts[kind] += 1

    def kill9_mirrorgate(self, p):
        self.log_event(f"kill -9 mirrorgate (pid {self.mg.proc.pid})")
        self.mg.kill9()
        time.sleep(p["restart_delay_s"])
        t0 = time.time()
        ready = self.mg.start()
        self.log_event(f"mirrorgate restarted (pid {self.mg.proc.pid}), {'ready' if ready else 'NOT ready'} after {time.time() - t0:.1f}s")

    def pause_mirrorgate(self, p):
        d = min(p["down_s"], 15)
        self.log_event(f"SIGSTOP mirrorgate (pid {self.mg.proc.pid}) for {d}s")
        self.paused = True
        self.mg.signal(signal.SIGSTOP)
        time.sleep(d)
        self.mg.signal(signal.SIGCONT)
        self.paused = False
        self.log_event("SIGCONT mirrorgate")

    def _restart_broker(self, c, p):
        n = p["node"]
        t0 = time.time()
        while not c.fully_replicated() and time.time() - t0 < 90:
            time.sleep(2)
        if time.time() - t0 > 1:
            self.log_event(f"waited {time.time() - t0:.0f}s for full ISRs on {c.role} (fully replicated: {c.fully_replicated()})")
        how = "kill -9" if p["hard"] else "stop (SIGTERM)"
        self.log_event(f"{how} {c.role} broker {n} for {p['down_s']}s")
        c.down = n
        if p["hard"]:
            pid = c.node_pid(n)
            if pid:
                os.kill(pid, signal.SIGKILL)
        sh([KAFKA_SH, "stop-node", c.name, str(n)], timeout=120)
        time.sleep(p["down_s"])
        t0 = time.time()
        sh([KAFKA_SH, "start-node", c.name, str(n)], timeout=300)
        c.down = None
        self.log_event(f"{c.role} broker {n} back after {time.time() - t0:.1f}s start")

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
        admin = c.admin()  # kept referenced until the result is in: a destroyed handle fails the future
        fut = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, part) for t, part in mine])
        try:
            res = fut.result(60)
            errs = {f"{k.topic}-{k.partition}": str(v) for k, v in res.items() if v is not None and "ELECTION_NOT_NEEDED" not in str(v)}
        except Exception as e:  # noqa: BLE001 - reported in the event log
            errs = {"all": str(e)}
        time.sleep(1)
        after = {tp: v[2] for tp, v in c.partitions(topic).items() if tp[0] == topic}
        moved = sorted(f"{t}-{part}:{before.get((t, part))}->{after.get((t, part))}" for t, part in mine)
        self.log_event(f"moved {c.role} leaders of {topic} (replica order rotated, preferred election): {' '.join(moved)}{' errors ' + str(errs) if errs else ''}")

    def move_source_leaders(self, p):
        self._move_leaders(self.src, p)

    def move_destination_leaders(self, p):
        self._move_leaders(self.dst, p)

    def _cut(self, role, p):
        addr = MG_ADDR[role]
        self.log_event(f"cut network mirrorgate <-> {role} ({addr}) for {p['down_s']}s")
        self.cut = role
        net_rules(addr, True)
        time.sleep(p["down_s"])
        net_rules(addr, False)
        self.cut = None
        self.log_event(f"network mirrorgate <-> {role} restored")

    def cut_source_network(self, p):
        self._cut("source", p)

    def cut_destination_network(self, p):
        self._cut("destination", p)

    def heal(self):
        """Undo whatever a failed action may have left behind."""
        if self.cut:
            net_rules(MG_ADDR[self.cut], False)
            self.cut = None
        if self.mg.alive():
            self.mg.signal(signal.SIGCONT)
        for c in (self.src, self.dst):
            if c.down:
                sh([KAFKA_SH, "start-node", c.name, str(c.down)], timeout=300, check=False)
                c.down = None
        if not self.mg.alive():
            self.mg.start()
