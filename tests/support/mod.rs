//! Test support: real Kafka clusters (started once per test binary with `scripts/kafka.sh`),
//! mirrorgate processes in front of them, unique topic names, and runners for the real clients
//! (Kafka's Java tools, librdkafka through `tests/python/client.py`).
//!
//! A test that needs Kafka and cannot start it panics with the reason; it never passes
//! silently. Clusters are killed by the script's watchdog when the test binary exits.
#![allow(dead_code)]

pub mod oauth;

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A running Kafka cluster.
#[derive(Debug)]
pub struct Cluster {
    /// Name given to `scripts/kafka.sh` (unique per test binary).
    pub name: String,
    /// `host:port,...` of its brokers.
    pub bootstrap: String,
    /// Kafka version.
    pub version: String,
    /// `host:port,...` of the SECURE client listener of a [`secure_cluster`].
    pub secure: Option<String>,
    /// Directory of a [`secure_cluster`]'s test certificates (`ca.pem`, `client.pem`,
    /// `client-pkcs8.key`, `client-chain.pem`, `client.p12`, `truststore.p12`,
    /// `truststore.jks`; store password `changeit`).
    pub tls_dir: Option<PathBuf>,
}

impl Cluster {
    /// Ports of the brokers.
    pub fn ports(&self) -> Vec<u16> {
        self.bootstrap.split(',').map(|a| a.rsplit_once(':').unwrap().1.parse().unwrap()).collect()
    }
}

static CLUSTERS: OnceLock<Mutex<HashMap<String, Arc<Cluster>>>> = OnceLock::new();

/// The cluster `name` of this test binary (1 node, Kafka 4.1.1), started on first use.
pub fn cluster(name: &str) -> Arc<Cluster> {
    cluster_with(name, 1, "4.1.1", &[])
}

/// The cluster `name` of this test binary, started on first use with `nodes` nodes of Kafka
/// `version` and extra broker properties.
pub fn cluster_with(name: &str, nodes: u32, version: &str, props: &[&str]) -> Arc<Cluster> {
    start_cluster(name, nodes, version, &[], props)
}

/// The one-node cluster `name` of Kafka `version` formatted with feature levels
/// (`scripts/kafka.sh start --feature NAME=LEVEL`, e.g. `transaction.version=1`) and extra
/// broker properties, started on first use.
pub fn cluster_with_features(name: &str, version: &str, features: &[&str], props: &[&str]) -> Arc<Cluster> {
    let flags: Vec<&str> = features.iter().flat_map(|f| ["--feature", *f]).collect();
    start_cluster(name, 1, version, &flags, props)
}

/// The one-node cluster `name` of Kafka `version` with tiered storage (KIP-405) on Kafka's
/// `LocalTieredStorage` (`scripts/kafka.sh start --tiered`), started on first use.
pub fn tiered_cluster(name: &str, version: &str) -> Arc<Cluster> {
    start_cluster(name, 1, version, &["--tiered"], &[])
}

/// The one-node Kafka 4.1.1 cluster `name` with a SECURE client listener of `protocol`
/// (`SSL`, `SASL_SSL`, `SASL_PLAINTEXT`), client certificates `client_auth` (`none`,
/// `requested`, `required`) and `users` (`MECHANISM:NAME:PASSWORD`), next to its PLAINTEXT
/// one (`scripts/kafka.sh start --secure`), started on first use.
pub fn secure_cluster(name: &str, protocol: &str, client_auth: &str, users: &[&str]) -> Arc<Cluster> {
    secure_cluster_with(name, protocol, client_auth, users, &[])
}

/// [`secure_cluster`] with extra broker properties (e.g. an authorizer).
pub fn secure_cluster_with(
    name: &str,
    protocol: &str,
    client_auth: &str,
    users: &[&str],
    props: &[&str],
) -> Arc<Cluster> {
    secure_cluster_env(name, protocol, client_auth, users, props, &[])
}

/// [`secure_cluster_with`] with extra environment for `scripts/kafka.sh` (e.g.
/// `MIRRORGATE_KAFKA_JAVA_OPTS` with a JVM system property the brokers need).
pub fn secure_cluster_env(
    name: &str,
    protocol: &str,
    client_auth: &str,
    users: &[&str],
    props: &[&str],
    env: &[(&str, &str)],
) -> Arc<Cluster> {
    let mut flags = vec!["--secure", protocol, "--client-auth", client_auth];
    for u in users {
        flags.extend(["--user", u]);
    }
    start_cluster_env(name, 1, "4.1.1", &flags, props, env)
}

fn start_cluster(name: &str, nodes: u32, version: &str, flags: &[&str], props: &[&str]) -> Arc<Cluster> {
    start_cluster_env(name, nodes, version, flags, props, &[])
}

fn start_cluster_env(
    name: &str,
    nodes: u32,
    version: &str,
    flags: &[&str],
    props: &[&str],
    env: &[(&str, &str)],
) -> Arc<Cluster> {
    let map = CLUSTERS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = map.get(name) {
        return c.clone();
    }
    let unique = format!("{name}-{}", std::process::id());
    let mut cmd = Command::new(repo().join("scripts/kafka.sh"));
    cmd.args(["start", &unique, "--nodes", &nodes.to_string(), "--version", version, "--owner-pid"])
        .arg(std::process::id().to_string())
        .args(flags);
    for p in props {
        cmd.args(["--prop", p]);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run scripts/kafka.sh: {e}"));
    if !out.status.success() {
        panic!(
            "Kafka cluster `{unique}` ({nodes} node(s), {version}) could not start; this test needs a real broker.\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lines = stdout.lines().map(str::trim);
    let bootstrap = lines.next().unwrap_or_default().to_string();
    assert!(!bootstrap.is_empty(), "kafka.sh printed no bootstrap servers");
    let (mut secure, mut tls_dir) = (None, None);
    for l in lines {
        if let Some(s) = l.strip_prefix("secure=") {
            secure = Some(s.to_string());
        } else if let Some(d) = l.strip_prefix("tls=") {
            tls_dir = Some(PathBuf::from(d));
        }
    }
    let c = Arc::new(Cluster { name: unique, bootstrap, version: version.into(), secure, tls_dir });
    map.insert(name.into(), c.clone());
    c
}

/// Stops the cluster `name` of this test binary, if it was started, and forgets it (its next
/// use starts a new one): for a binary whose groups of tests each use their own cluster.
pub fn stop_cluster(name: &str) {
    let cluster = CLUSTERS.get().and_then(|m| m.lock().unwrap_or_else(|e| e.into_inner()).remove(name));
    if let Some(c) = cluster {
        let _ = Command::new(repo().join("scripts/kafka.sh")).args(["stop", &c.name]).output();
    }
}

/// A cluster only one test uses, stopped when the test ends (passing or not), so that a
/// test binary does not keep every cluster of its tests running until it exits.
pub struct OwnedCluster(Arc<Cluster>);

impl std::ops::Deref for OwnedCluster {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.0
    }
}

impl Drop for OwnedCluster {
    fn drop(&mut self) {
        if let Some(map) = CLUSTERS.get() {
            map.lock().unwrap_or_else(|e| e.into_inner()).retain(|_, c| c.name != self.0.name);
        }
        let _ = Command::new(repo().join("scripts/kafka.sh")).args(["stop", &self.0.name]).output();
    }
}

/// Like [`cluster_with`], for a cluster that only the calling test uses.
pub fn owned_cluster(name: &str, nodes: u32, version: &str, props: &[&str]) -> OwnedCluster {
    OwnedCluster(cluster_with(name, nodes, version, props))
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A topic name no other test of any binary uses: `prefix-PID-N`.
pub fn unique_name(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Where the next [`free_port_range`] search of this process starts.
static NEXT_PORT: Mutex<Option<u32>> = Mutex::new(None);

/// A first port such that `first..first+count` are all free right now, from 10000..20000:
/// below `scripts/kafka.sh`'s band (20000..32000) and below the ephemeral range, so that no
/// outgoing connection takes one of them before the process meant to listen there binds.
/// One process never hands out the same port twice (until the band wraps).
pub fn free_port_range(count: u16) -> u16 {
    const LO: u32 = 10_000;
    const HI: u32 = 20_000;
    let count32 = u32::from(count.max(1));
    let mut next = NEXT_PORT.lock().unwrap_or_else(|e| e.into_inner());
    let mut at = next.unwrap_or_else(|| LO + (std::process::id().wrapping_mul(7919)) % (HI - LO));
    for _ in 0..(2 * (HI - LO) / count32) {
        if at + count32 > HI {
            at = LO;
        }
        let first = at as u16;
        at += count32;
        let held: Vec<_> = (first..first + count).map(|p| TcpListener::bind(("127.0.0.1", p))).collect();
        if held.iter().all(Result::is_ok) {
            *next = Some(at);
            return first;
        }
    }
    panic!("no free range of {count} loopback ports in {LO}..{HI}");
}

/// `mirror_state.password_encoder_secret` of every mirrorgate the tests start (secret mirror
/// configs are refused without one).
pub const TEST_ENCODER_SECRET: &str = "test-encoder-secret-7f3a9c";

/// A mirrorgate process; killed on drop.
pub struct Mirrorgate {
    child: Child,
    /// Bootstrap address clients use (`advertised_host:first_port`).
    pub bootstrap: String,
    /// First port of its listener range.
    pub first_port: u16,
    /// Its log file.
    pub log_path: PathBuf,
    /// Its config file.
    pub config_path: PathBuf,
}

/// Options for [`Mirrorgate::start`].
pub struct MirrorgateOptions<'a> {
    /// Host written into rewritten responses.
    pub advertised_host: &'a str,
    /// Extra YAML appended at the top level.
    pub extra_yaml: &'a str,
    /// Name of the state topic; `None` = a fresh unique one, so tests do not see each
    /// other's mirrors. Pass the same name to a restarted instance.
    pub state_topic: Option<&'a str>,
    /// Whether the listener answers mirror admin RPCs.
    pub admin: bool,
    /// Extra environment variables of the process (e.g. `MIRRORGATE_FAILPOINT`).
    pub env: &'a [(&'a str, &'a str)],
    /// `mirror_state.password_encoder_secret` (default [`TEST_ENCODER_SECRET`]; `None` =
    /// unset, so secret mirror configs are refused).
    pub encoder_secret: Option<&'a str>,
}

impl Default for MirrorgateOptions<'_> {
    fn default() -> Self {
        Self {
            advertised_host: "127.0.0.1",
            extra_yaml: "",
            state_topic: None,
            admin: true,
            env: &[],
            encoder_secret: Some(TEST_ENCODER_SECRET),
        }
    }
}

impl Mirrorgate {
    /// Starts mirrorgate in front of `destination` and waits until it is ready.
    pub fn start(destination: &Cluster) -> Self {
        Self::start_with(destination, MirrorgateOptions::default())
    }

    /// Starts mirrorgate with options and waits until it logs "mirrorgate ready".
    pub fn start_with(destination: &Cluster, opts: MirrorgateOptions<'_>) -> Self {
        Self::start_in_front_of(&destination.bootstrap, FrontOptions::default(), opts)
    }

    /// mirrorgate's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Waits until the log contains `needle`; panics with the log tail otherwise.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.log();
            if log.contains(needle) {
                return;
            }
            if Instant::now() > deadline {
                panic!("mirrorgate did not log `{needle}` within {timeout:?}; log:\n{}", tail(&log, 40));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Resident memory of the process, in KiB (from /proc).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    /// Process id (for signals other than SIGTERM: `kill -9`, `kill -STOP`, `kill -CONT`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM and waits up to `timeout` for the process to exit; returns its exit
    /// status (panics, after a SIGKILL, if it is still running then).
    pub fn terminate(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("kill -TERM");
        assert!(sent.success(), "kill -TERM {pid}");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for mirrorgate") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("mirrorgate still running {timeout:?} after SIGTERM; log:\n{}", tail(&self.log(), 40));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Mirrorgate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The mirrorgate binary the tests run: `MIRRORGATE_TEST_BIN` when set (a copy of the binary
/// under test, for checkouts that share one target directory, where another checkout's build
/// can replace `target/debug/mirrorgate` while tests run), else this build's.
pub fn mirrorgate_bin() -> String {
    std::env::var("MIRRORGATE_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mirrorgate").to_string())
}

/// Runs `mirrorgate mirrors --bootstrap-server BOOTSTRAP ARGS...` (the operator CLI).
pub fn mirrors_cli(bootstrap: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(mirrorgate_bin());
    cmd.args(["mirrors", "--bootstrap-server", bootstrap]).args(args);
    run(cmd, None, Duration::from_secs(60))
}

/// Writes a mirror config properties file pointing at `source` and returns its path.
pub fn mirror_config_file(source: &Cluster, extra: &str) -> PathBuf {
    let dir = repo().join("target/test-mirrorgate");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.properties", unique_name("mirror")));
    std::fs::write(&path, format!("bootstrap.servers={}\n{extra}", source.bootstrap)).unwrap();
    path
}

/// Last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status.code(),
        tail(&String::from_utf8_lossy(&out.stdout), 40),
        tail(&String::from_utf8_lossy(&out.stderr), 40)
    )
}

/// Runs `cmd` with `stdin` text and a timeout; returns its output.
pub fn run(mut cmd: Command, stdin: Option<&str>, timeout: Duration) -> Output {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot spawn {cmd:?}: {e}"));
    if let Some(text) = stdin {
        use std::io::Write;
        let mut si = child.stdin.take().unwrap();
        si.write_all(text.as_bytes()).unwrap();
    }
    let pid = child.id();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if d.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, Ordering::Relaxed);
    out
}

/// Runs a Kafka tool (`scripts/kafka.sh tool NAME ...`) of Kafka `version`.
pub fn kafka_tool(version: &str, tool: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(repo().join("scripts/kafka.sh"));
    cmd.arg("tool").arg(tool).args(args).env("KAFKA_VERSION", version);
    run(cmd, stdin, Duration::from_secs(120))
}

/// Like [`kafka_tool`], panicking with the output when it fails.
pub fn kafka_tool_ok(version: &str, tool: &str, args: &[&str], stdin: Option<&str>) -> String {
    let out = kafka_tool(version, tool, args, stdin);
    assert!(out.status.success(), "kafka tool {tool} {args:?} failed: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `tests/java/TxnProducer.java` (Kafka `version`'s Java producer, one transactional id
/// named `tx-…`) against `bootstrap` for `topic` with `args` (`--commit a,b`, `--abort x,y`,
/// `--order abort-first`, ...), asserting success; returns its stdout.
pub fn txn_producer(version: &str, bootstrap: &str, topic: &str, args: &[&str]) -> String {
    let id = unique_name("tx");
    let mut all = vec!["--bootstrap-server", bootstrap, "--topic", topic, "--transactional-id", &id];
    all.extend_from_slice(args);
    ok(java_program(version, "TxnProducer.java", &all), "TxnProducer")
}

/// Runs a single-file Java program from `tests/java/` against the Kafka `version` classpath.
pub fn java_program(version: &str, file: &str, args: &[&str]) -> Output {
    let cp = Command::new(repo().join("scripts/kafka.sh")).args(["classpath", version]).output().unwrap();
    assert!(cp.status.success(), "classpath: {}", describe(&cp));
    let cp = String::from_utf8_lossy(&cp.stdout).trim().to_string();
    let mut cmd = Command::new("java");
    cmd.args(["-Xmx256m", "-cp", &cp]).arg(repo().join("tests/java").join(file)).args(args);
    run(cmd, None, Duration::from_secs(120))
}

/// Runs `tests/python/client.py` (librdkafka via confluent-kafka) in the project virtualenv.
pub fn python_client(args: &[&str]) -> Output {
    let py = repo().join(".venv/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run `scripts/pyenv.sh` (the test command does) to install confluent-kafka",
        py.display()
    );
    let mut cmd = Command::new(py);
    cmd.arg(repo().join("tests/python/client.py")).args(args);
    run(cmd, None, Duration::from_secs(120))
}

/// Runs the Python program `tests/python/<file>` (librdkafka via confluent-kafka) in the
/// project virtualenv with `args`, within `timeout`.
pub fn python_program(file: &str, args: &[&str], timeout: Duration) -> Output {
    let py = repo().join(".venv/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run `scripts/pyenv.sh` (the test command does) to install confluent-kafka",
        py.display()
    );
    let mut cmd = Command::new(py);
    cmd.arg(repo().join("tests/python").join(file)).args(args);
    run(cmd, None, timeout)
}

/// Asserts success and returns stdout.
pub fn ok(out: Output, what: &str) -> String {
    assert!(out.status.success(), "{what} failed: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `f` until it returns `Ok` or `timeout` passes; panics with the last error.
pub fn eventually<T>(timeout: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("condition not met within {timeout:?}; last: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Extra options for [`Mirrorgate::start_in_front_of`].
#[derive(Default)]
pub struct FrontOptions<'a> {
    /// First port of the listener range (12 ports); `None` = a free range. Give a restarted
    /// instance the same first port so that clients find it where it was.
    pub first_port: Option<u16>,
    /// Extra YAML lines inside the `destination:` section, each indented by two spaces
    /// (e.g. `"  request_timeout_ms: 5000\n"`).
    pub destination_yaml: &'a str,
    /// Extra YAML lines inside the listener item, each indented by four spaces (e.g. a
    /// `tls:` block).
    pub listener_yaml: &'a str,
}

impl Mirrorgate {
    /// Starts mirrorgate with `destination.bootstrap_servers` set to an arbitrary `bootstrap`
    /// string (for example another mirrorgate in front of the real destination), and waits
    /// until it logs "mirrorgate ready". Waits up to 10 s for a fixed first port to be free.
    pub fn start_in_front_of(bootstrap: &str, front: FrontOptions<'_>, opts: MirrorgateOptions<'_>) -> Self {
        let first_port = match front.first_port {
            Some(p) => {
                let deadline = Instant::now() + Duration::from_secs(10);
                while (p..p + 12).any(|q| TcpListener::bind(("127.0.0.1", q)).is_err()) {
                    assert!(Instant::now() < deadline, "ports {p}..{} are still taken", p + 11);
                    std::thread::sleep(Duration::from_millis(100));
                }
                p
            }
            None => free_port_range(12),
        };
        let dir = repo().join("target/test-mirrorgate");
        std::fs::create_dir_all(&dir).unwrap();
        let id = unique_name("mg");
        let config_path = dir.join(format!("{id}.yaml"));
        let log_path = dir.join(format!("{id}.log"));
        let state_topic = opts.state_topic.map(String::from).unwrap_or_else(|| unique_name("__mirror_state-test"));
        let yaml = format!(
            "destination:\n  bootstrap_servers: {bootstrap}\n  metadata_refresh_interval_ms: 5000\n{}listeners:\n  - name: test\n    bind_host: 127.0.0.1\n    advertised_host: {}\n    port_range: {}-{}\n    admin: {}\n{}mirror_state:\n  topic: {state_topic}\n  num_partitions: 3\n{}log:\n  level: info,mirrorgate=debug\n{}\n",
            front.destination_yaml,
            opts.advertised_host,
            first_port,
            first_port + 11,
            opts.admin,
            front.listener_yaml,
            opts.encoder_secret.map(|s| format!("  password_encoder_secret: {s}\n")).unwrap_or_default(),
            opts.extra_yaml
        );
        std::fs::write(&config_path, yaml).unwrap();
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(mirrorgate_bin())
            .args(["run", "--config"])
            .arg(&config_path)
            .env_remove("RUST_LOG")
            // The tests' stores live in per-cluster temporary directories: any file is allowed
            // unless a test narrows it (docs/security.md, mirrors.ssl_files_dir).
            .env("MIRRORGATE__MIRRORS__SSL_FILES_DIR", "/")
            .envs(opts.env.iter().copied())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn mirrorgate");
        let mg = Self {
            child,
            bootstrap: format!("{}:{first_port}", opts.advertised_host),
            first_port,
            log_path,
            config_path,
        };
        mg.wait_for_log("mirrorgate ready", Duration::from_secs(60));
        mg
    }
}

/// Runs `f` to completion from a multi-threaded tokio test (blocking this worker).
pub fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// `mirrors --describe --mirror M --json` through `mg`, as a JSON array of partitions.
pub fn describe_json(mg: &Mirrorgate, mirror: &str) -> Vec<serde_json::Value> {
    let out = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", mirror, "--json"]), "--describe --json");
    serde_json::from_str::<serde_json::Value>(&out).unwrap().as_array().unwrap().clone()
}

/// (partition, offset, key, value, headers, timestamp, timestamp type) of every record a
/// librdkafka consumer reads from `topic` at `isolation`, sorted by partition and offset: it
/// waits (120 s at most) for `count` records, then reads on to the end of every partition
/// (high watermark; last stable offset at read_committed) and panics unless it read exactly
/// `count` records, so extra or duplicated records at the end are seen.
pub fn consume_all(bootstrap: &str, topic: &str, count: usize, isolation: &str) -> Vec<serde_json::Value> {
    let group = unique_name("verify");
    let out = ok(
        python_client(&[
            "consume",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--group",
            &group,
            "--count",
            &count.to_string(),
            "--timeout",
            "120",
            "--isolation",
            isolation,
            "--no-commit",
            "--to-end",
        ]),
        "consume",
    );
    let mut recs: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|mut v| {
            v.as_object_mut().unwrap().remove("topic");
            v
        })
        .collect();
    recs.sort_by_key(|v| (v["partition"].as_i64().unwrap(), v["offset"].as_i64().unwrap()));
    assert_eq!(
        recs.len(),
        count,
        "{topic} through {bootstrap} at {isolation}: {} records to the end of its partitions, expected {count}; the last ones: {:?}",
        recs.len(),
        &recs[recs.len().saturating_sub(5)..]
    );
    recs
}

/// A [`ClusterClient`](mirrorgate::client::cluster::ClusterClient) of a plaintext cluster at
/// `bootstrap`.
pub fn plaintext_client(bootstrap: &str) -> mirrorgate::client::cluster::ClusterClient {
    use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
    block(ClusterClient::connect(ClusterOptions::new(vec![bootstrap.to_string()]))).unwrap()
}

/// Creates `topic` with `partitions` partitions, replication factor 1 and `configs`
/// (`key=value`) with Kafka `version`'s `kafka-topics.sh`.
pub fn create_topic_with(version: &str, bootstrap: &str, topic: &str, partitions: u32, configs: &[&str]) {
    let p = partitions.to_string();
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        &p,
        "--replication-factor",
        "1",
    ];
    for c in configs {
        args.extend(["--config", c]);
    }
    kafka_tool_ok(version, "topics", &args, None);
}

/// Produces `count` records `PREFIX-i` (keys `key-i`) to partition 0 of `topic` with
/// librdkafka (`tests/python/client.py produce`).
pub fn produce_to_partition_0(bootstrap: &str, topic: &str, count: usize, prefix: &str) {
    let c = count.to_string();
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--partition",
            "0",
            "--count",
            &c,
            "--prefix",
            prefix,
        ]),
        "produce",
    );
}

/// A connection to `mg`'s first port (our own client, plaintext).
pub async fn connect(mg: &Mirrorgate) -> mirrorgate::client::conn::BrokerConnection {
    mirrorgate::client::conn::BrokerConnection::connect(
        &format!("127.0.0.1:{}", mg.first_port),
        Duration::from_secs(5),
        Duration::from_secs(30),
        1 << 24,
    )
    .await
    .unwrap()
}

/// The configs of `mirror` through `mg` (DescribeConfigs on CLUSTER_MIRROR, 64).
pub async fn describe_mirror_configs(
    mg: &Mirrorgate,
    mirror: &str,
) -> std::collections::HashMap<String, Option<String>> {
    let mut conn = connect(mg).await;
    let req = kafka_protocol::messages::DescribeConfigsRequest::default().with_resources(vec![
        kafka_protocol::messages::describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(64)
            .with_resource_name(kafka_protocol::protocol::StrBytes::from_string(mirror.into()))
            .with_configuration_keys(None),
    ]);
    let resp = conn.send(&req, 4).await.unwrap();
    let r = &resp.results[0];
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    r.configs.iter().map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()))).collect()
}

/// Sets one config of `mirror` through `mg` (IncrementalAlterConfigs on CLUSTER_MIRROR, 64):
/// the resource's error code and message.
pub async fn alter_mirror_config(mg: &Mirrorgate, mirror: &str, key: &str, value: &str) -> (i16, Option<String>) {
    let mut conn = connect(mg).await;
    let req = kafka_protocol::messages::IncrementalAlterConfigsRequest::default().with_resources(vec![
        kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(64)
            .with_resource_name(kafka_protocol::protocol::StrBytes::from_string(mirror.into()))
            .with_configs(vec![kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig::default(
            )
            .with_name(kafka_protocol::protocol::StrBytes::from_string(key.into()))
            .with_config_operation(0)
            .with_value(Some(kafka_protocol::protocol::StrBytes::from_string(value.into())))]),
    ]);
    let resp = conn.send(&req, 1).await.unwrap();
    let r = &resp.responses[0];
    (r.error_code, r.error_message.as_ref().map(|m| m.to_string()))
}
