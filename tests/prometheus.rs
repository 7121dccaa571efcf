//! Issue 15 items 2 and 3: the KIP-1279 metrics on a REAL Prometheus, and the dashboard and
//! alert files of `docker/`.
//!
//! - `promtool` checks `docker/prometheus/alerts.yml` and `prometheus.yml`, and runs the rules'
//!   unit tests (`alerts_test.yml`: each alert fires on its case and not on its near miss).
//! - A Prometheus (Debian's package; `scripts/test.sh` installs it) scrapes mirrorgate's
//!   `metrics.listen` every second, with the alert rules loaded, in front of real source and
//!   destination Kafka clusters. PromQL over its HTTP API checks that every name of the
//!   docs table ("The KIP's metrics on Prometheus" in `docs/operations.md`) is scraped, that
//!   lag rises while a mirror is paused and falls to 0 after resume, that a FAILED partition is
//!   counted (and its alert goes pending), that the admin RPCs are counted with their errors,
//!   and that every rule evaluates without error. A second mirrorgate, whose first copy loop
//!   panics (a test failpoint), shows a dead copy loop counted once and its alert firing.
//! - Every metric a Grafana panel or an alert uses is in a live `/metrics` scrape, or is one
//!   of [`AFTER_AN_EVENT`] (listed in the docs table).
//!
//! Without `prometheus` / `promtool` on PATH the tests fail with the reason; they never pass
//! silently.

mod support;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

const V: &str = "4.1.1";

/// Metrics that exist only once what they count has happened (no SASL in this test, no quota,
/// no throttle, no connection closed on purpose). Each must be in the docs table, marked
/// "(after the first event)"; every other metric a dashboard, an alert or the docs table
/// names must be in a live scrape.
const AFTER_AN_EVENT: &[&str] = &[
    "mirrorgate_broker_connections_closed_total",
    "mirrorgate_broker_authentications_total",
    "mirrorgate_client_authentications_total",
    "mirrorgate_broker_reauthentications_total",
    "mirrorgate_client_reauthentications_total",
    "mirrorgate_broker_reauthentication_latency_seconds",
    "mirrorgate_mirror_rate_throttle_ms_total",
    "mirrorgate_mirror_fetch_throttled_total",
    "mirrorgate_mirror_fetch_throttle_ms_total",
];

// ---- files ---------------------------------------------------------------------------------

fn docker() -> PathBuf {
    repo().join("docker")
}

/// `mirrorgate_*` names in `text` (PromQL, Markdown), in order of first appearance.
fn metric_names(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("mirrorgate_") {
        let before = rest[..i].chars().last();
        let tail = &rest[i..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        let name = &tail[..end];
        rest = &tail[end..];
        // Not a name: part of a longer word (`tests/mirrorgate_...`), or a prefix in prose.
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/') || name.ends_with('_') {
            continue;
        }
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// The docs table "The KIP's metrics on Prometheus": its rows' metric names, and the names in
/// rows marked "(after the first event)".
fn docs_table() -> (Vec<String>, String) {
    let doc = std::fs::read_to_string(repo().join("docs/operations.md")).unwrap();
    let start = doc.find("### The KIP's metrics on Prometheus").expect("docs/operations.md has the KIP metrics table");
    let end = start + doc[start..].find("### Dashboard and alerts").expect("followed by \"Dashboard and alerts\"");
    let rows: String = doc[start..end].lines().filter(|l| l.starts_with('|')).collect::<Vec<_>>().join("\n");
    (metric_names(&rows), rows)
}

/// Every `expr` of the Grafana dashboard (panels, nested rows) and of the alert rules.
fn dashboard_and_alert_exprs() -> Vec<(String, String)> {
    let dash: Value =
        serde_json::from_str(&std::fs::read_to_string(docker().join("grafana/mirrorgate.json")).unwrap()).unwrap();
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(e)) = m.get("expr") {
                    out.push(("dashboard".into(), e.clone()));
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&dash, &mut out);
    if let Some(Value::String(q)) = dash.pointer("/templating/list/0/definition") {
        out.push(("dashboard variable".into(), q.clone()));
    }
    let rules = std::fs::read_to_string(docker().join("prometheus/alerts.yml")).unwrap();
    let rules = yaml_rust2::YamlLoader::load_from_str(&rules).unwrap();
    for group in rules[0]["groups"].as_vec().expect("alerts.yml has groups") {
        for rule in group["rules"].as_vec().expect("a group has rules") {
            let name = rule["alert"].as_str().unwrap_or("?").to_string();
            out.push((format!("alert {name}"), rule["expr"].as_str().expect("a rule has an expr").to_string()));
        }
    }
    out
}

// ---- promtool and prometheus ---------------------------------------------------------------

/// `tool` on PATH, or a panic that says how to get it.
fn require(tool: &str) {
    match Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(s) if s.success() => {}
        other => panic!(
            "`{tool}` is needed and not usable ({other:?}): run scripts/test.sh, or `apt-get install -y --no-install-recommends prometheus`"
        ),
    }
}

fn promtool(dir: &Path, args: &[&str]) -> String {
    require("promtool");
    let mut cmd = Command::new("promtool");
    cmd.current_dir(dir).args(args);
    let out = run(cmd, None, Duration::from_secs(60));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// A Prometheus server on a free loopback port, scraping one mirrorgate every second with
/// `docker/prometheus/alerts.yml` loaded; killed on drop (and by a watchdog if this test
/// process dies first).
struct Prometheus {
    child: Child,
    addr: String,
    dir: PathBuf,
}

impl Prometheus {
    fn start(metrics_port: u16) -> Self {
        require("prometheus");
        let dir = repo().join("target/test-mirrorgate").join(unique_name("prometheus"));
        std::fs::create_dir_all(&dir).unwrap();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: mirrorgate\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n",
            docker().join("prometheus/alerts.yml").display()
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let port = free_port_range(1);
        let addr = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start prometheus: {e}"));
        // The watchdog: kills Prometheus when this test process is gone.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {me} 2>/dev/null && kill -0 {p} 2>/dev/null; do sleep 1; done; kill {p} 2>/dev/null",
                me = std::process::id(),
                p = child.id()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let prom = Self { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http_get(&prom.addr, "/-/ready").map(|(status, _)| status) != Ok(200) {
            assert!(Instant::now() < deadline, "prometheus not ready after 30 s:\n{}", prom.log());
            std::thread::sleep(Duration::from_millis(200));
        }
        prom
    }

    fn log(&self) -> String {
        tail(&std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default(), 20)
    }

    /// The result vector of an instant PromQL query.
    fn query(&self, promql: &str) -> Result<Vec<Value>, String> {
        let (status, body) = http_get(&self.addr, &format!("/api/v1/query?query={}", url_encode(promql)))?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("HTTP {status}: {e}: {body}"))?;
        if v["status"] != "success" {
            return Err(format!("query {promql:?}: {v}"));
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    /// The single value of `promql`, or why not.
    fn value(&self, promql: &str) -> Result<f64, String> {
        let r = self.query(promql)?;
        match r.as_slice() {
            [one] => one["value"][1]
                .as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("{promql}: no number in {one}")),
            _ => Err(format!("{promql}: {} series: {r:?}", r.len())),
        }
    }

    /// Waits (up to `timeout`) until `promql` has one value that `ok` accepts; returns it.
    fn wait_for(&self, promql: &str, timeout: Duration, ok: impl Fn(f64) -> bool) -> f64 {
        eventually(timeout, || match self.value(promql) {
            Ok(v) if ok(v) => Ok(v),
            Ok(v) => Err(format!("{promql} = {v}")),
            Err(e) => Err(e),
        })
    }

    /// Metric names Prometheus has stored that match `regex`.
    fn names(&self, regex: &str) -> BTreeSet<String> {
        self.query(&format!("group by (__name__) ({{__name__=~\"{regex}\"}})"))
            .unwrap_or_default()
            .iter()
            .filter_map(|s| s["metric"]["__name__"].as_str().map(str::to_string))
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Its log stays for a failed test to read.
        let _ =
            std::fs::remove_dir_all(if std::thread::panicking() { self.dir.join("data") } else { self.dir.clone() });
    }
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `GET path` over HTTP/1.0: (status, body).
fn http_get(addr: &str, path: &str) -> Result<(u16, String), String> {
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    let status =
        out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| format!("no status: {out}"))?;
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

/// Metric names in a Prometheus text scrape: every sample's name, and the family name of
/// histograms and summaries (from `# TYPE`).
fn scraped_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(n) = rest.split_whitespace().next() {
                names.insert(n.to_string());
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

// ---- tests ---------------------------------------------------------------------------------

#[test]
fn alert_rules_and_scrape_config_pass_promtool_and_their_unit_tests() {
    let dir = docker().join("prometheus");
    let rules = promtool(&dir, &["check", "rules", "alerts.yml"]);
    let count = dashboard_and_alert_exprs().iter().filter(|(w, _)| w.starts_with("alert ")).count();
    assert!(rules.contains(&format!("SUCCESS: {count} rules found")), "{rules}");
    let config = promtool(&dir, &["check", "config", "prometheus.yml"]);
    assert!(config.contains("SUCCESS: 1 rule files found"), "{config}");
    let tests = promtool(&dir, &["test", "rules", "alerts_test.yml"]);
    assert!(tests.contains("SUCCESS"), "{tests}");
    // Each alert has a unit test that expects it to fire.
    let unit = std::fs::read_to_string(dir.join("alerts_test.yml")).unwrap();
    for (what, _) in dashboard_and_alert_exprs().iter().filter(|(w, _)| w.starts_with("alert ")) {
        let name = what.trim_start_matches("alert ");
        assert!(
            unit.contains(&format!("alertname: {name}\n        exp_alerts:\n          - ")),
            "no firing unit test for {name}"
        );
    }

    // The check can fail: a broken copy of the rules is refused, and a changed threshold
    // breaks the unit tests.
    let scratch = repo().join("target/test-mirrorgate").join(unique_name("promtool"));
    std::fs::create_dir_all(&scratch).unwrap();
    for f in ["alerts.yml", "alerts_test.yml", "prometheus.yml"] {
        std::fs::copy(dir.join(f), scratch.join(f)).unwrap();
    }
    let alerts = std::fs::read_to_string(dir.join("alerts.yml")).unwrap();
    std::fs::write(scratch.join("alerts.yml"), alerts.replace("> 10000", "> 10000 +")).unwrap();
    let mut cmd = Command::new("promtool");
    cmd.current_dir(&scratch).args(["check", "rules", "alerts.yml"]);
    assert!(!run(cmd, None, Duration::from_secs(60)).status.success(), "promtool accepted a broken expression");
    std::fs::write(scratch.join("alerts.yml"), alerts.replace("> 10000", "> 30000")).unwrap();
    let mut cmd = Command::new("promtool");
    cmd.current_dir(&scratch).args(["test", "rules", "alerts_test.yml"]);
    assert!(!run(cmd, None, Duration::from_secs(60)).status.success(), "the unit tests missed a changed threshold");
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn the_docs_table_names_every_event_only_metric_and_the_dashboard_has_panels() {
    let (names, rows) = docs_table();
    assert!(names.len() >= 25, "the docs table names only {} metrics: {names:?}", names.len());
    for m in AFTER_AN_EVENT {
        let row = rows.lines().find(|l| l.contains(&format!("`{m}")));
        let row = row.unwrap_or_else(|| panic!("{m} is not in the docs table"));
        assert!(
            row.contains("after the first event"),
            "{m}: its docs row does not say it appears after an event: {row}"
        );
    }
    let exprs = dashboard_and_alert_exprs();
    assert!(exprs.iter().filter(|(w, _)| w == "dashboard").count() >= 15, "{exprs:?}");
    for (what, e) in &exprs {
        assert!(!metric_names(e).is_empty(), "{what}: {e:?} uses no mirrorgate metric");
    }
}

/// The scenario: one mirror copies a topic, is paused while the source moves on (lag rises),
/// and resumed (lag back to 0); a second mirror's partition FAILED; admin RPCs counted with an
/// error. All checked with PromQL on a real Prometheus, then every name of the docs table,
/// the dashboard and the alerts against what Prometheus and `/metrics` hold.
#[test]
fn kip_metrics_reach_a_real_prometheus_and_move_with_the_mirror() {
    let started = Instant::now();
    let source = cluster("source");
    let dest = cluster("dest");
    let metrics_port = free_port_range(1);
    let yaml = format!("metrics:\n  listen: 127.0.0.1:{metrics_port}\n");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { extra_yaml: &yaml, ..Default::default() });
    let prom = Prometheus::start(metrics_port);
    let t = Duration::from_secs(60);
    prom.wait_for("up{job=\"mirrorgate\"}", t, |v| v == 1.0);

    // A mirror copies 100 records of partition 0 (partition 1 stays empty).
    let topic = unique_name("prom-lag");
    create_topic_with(V, &source.bootstrap, &topic, 2, &[]);
    produce_to_partition_0(&source.bootstrap, &topic, 100, "a");
    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    let p0 = format!("mirror=\"{mirror}\",topic=\"{topic}\",partition=\"0\"");
    prom.wait_for(&format!("mirrorgate_mirror_partition_destination_offset{{{p0}}}"), t, |v| v == 100.0);
    prom.wait_for(&format!("mirrorgate_mirror_partition_lag{{{p0}}}"), t, |v| v == 0.0);
    prom.wait_for(&format!("mirrorgate_mirror_max_lag{{mirror=\"{mirror}\"}}"), t, |v| v == 0.0);
    prom.wait_for(&format!("mirrorgate_mirror_partitions{{mirror=\"{mirror}\",state=\"MIRRORING\"}}"), t, |v| v == 2.0);
    prom.wait_for(&format!("mirrorgate_mirror_partition_state{{{p0}}}"), t, |v| v == 3.0);
    // Fetches and bytes per source broker (node 1 of a one-broker source).
    let by_broker = format!("mirror=\"{mirror}\",broker=~\"[0-9]+\"");
    prom.wait_for(&format!("sum(mirrorgate_mirror_source_fetch_bytes_total{{{by_broker}}})"), t, |v| v > 0.0);
    prom.wait_for(
        &format!("sum(increase(mirrorgate_mirror_source_fetch_requests_total{{{by_broker}}}[10s]))"),
        t,
        |v| v > 0.0,
    );
    prom.wait_for(&format!("mirrorgate_mirror_records_total{{mirror=\"{mirror}\"}}"), t, |v| v >= 100.0);
    prom.wait_for(&format!("mirrorgate_mirror_dead_tasks_total{{mirror=\"{mirror}\",task=\"copy_loop\"}}"), t, |v| {
        v == 0.0
    });
    // MinFetchRate as the docs give it: positive while the fetcher long-polls.
    prom.wait_for(
        &format!("min by (mirror) (rate(mirrorgate_mirror_source_fetch_requests_total{{mirror=\"{mirror}\"}}[5s]))"),
        t,
        |v| v > 0.0,
    );

    // Paused: the source moves on, the lag rises to exactly what was not copied.
    ok(mirrors_cli(&mg.bootstrap, &["--pause", "--mirror", &mirror, "--topics", &topic]), "--pause");
    prom.wait_for(&format!("mirrorgate_mirror_partitions{{mirror=\"{mirror}\",state=\"PAUSED\"}}"), t, |v| v == 2.0);
    prom.wait_for(&format!("mirrorgate_mirror_partition_state{{{p0}}}"), t, |v| v == 5.0);
    produce_to_partition_0(&source.bootstrap, &topic, 50, "b");
    prom.wait_for(&format!("mirrorgate_mirror_partition_lag{{{p0}}}"), t, |v| v == 50.0);
    prom.wait_for(&format!("mirrorgate_mirror_max_lag{{mirror=\"{mirror}\"}}"), t, |v| v == 50.0);
    prom.wait_for(&format!("mirrorgate_mirror_partition_source_offset{{{p0}}}"), t, |v| v == 150.0);
    assert_eq!(prom.value(&format!("mirrorgate_mirror_partition_destination_offset{{{p0}}}")), Ok(100.0));
    assert_eq!(
        prom.value(&format!(
            "mirrorgate_mirror_partition_lag{{mirror=\"{mirror}\",topic=\"{topic}\",partition=\"1\"}}"
        )),
        Ok(0.0)
    );
    // Resumed: copied, lag back to 0.
    ok(mirrors_cli(&mg.bootstrap, &["--resume", "--mirror", &mirror, "--topics", &topic]), "--resume");
    prom.wait_for(&format!("mirrorgate_mirror_partition_destination_offset{{{p0}}}"), t, |v| v == 150.0);
    prom.wait_for(&format!("mirrorgate_mirror_partition_lag{{{p0}}}"), t, |v| v == 0.0);
    prom.wait_for(&format!("mirrorgate_mirror_max_lag{{mirror=\"{mirror}\"}}"), t, |v| v == 0.0);
    prom.wait_for(&format!("mirrorgate_mirror_records_total{{mirror=\"{mirror}\"}}"), t, |v| v >= 150.0);

    // The admin RPCs: requests per api and version, latency, and an error answered with its
    // code (UNKNOWN_CLUSTER_MIRROR for a mirror that does not exist).
    for api in ["CreateClusterMirror", "StartMirrorTopics", "PauseMirrorTopics", "ResumeMirrorTopics"] {
        prom.wait_for(&format!("sum(mirrorgate_requests_total{{api=\"{api}\"}})"), t, |v| v >= 1.0);
        prom.wait_for(&format!("mirrorgate_request_duration_seconds_count{{api=\"{api}\"}}"), t, |v| v >= 1.0);
    }
    prom.wait_for("sum(mirrorgate_requests_total{api=\"ApiVersions\"})", t, |v| v >= 1.0);
    prom.wait_for("count(mirrorgate_requests_total{api=\"PauseMirrorTopics\",version=~\"[0-9]+\"})", t, |v| v >= 1.0);
    assert!(prom.query("mirrorgate_request_errors_total{api=\"DeleteClusterMirror\"}").unwrap().is_empty());
    let nosuch = unique_name("no-such-mirror");
    let out = mirrors_cli(&mg.bootstrap, &["--delete", "--mirror", &nosuch]);
    assert!(!out.status.success(), "deleting a mirror that does not exist succeeded");
    let errors = prom.query("mirrorgate_request_errors_total{api=\"DeleteClusterMirror\"}").unwrap_or_default();
    let errors = if errors.is_empty() {
        eventually(t, || match prom.query("mirrorgate_request_errors_total{api=\"DeleteClusterMirror\"}") {
            Ok(r) if !r.is_empty() => Ok(r),
            other => Err(format!("{other:?}")),
        })
    } else {
        errors
    };
    assert_eq!(errors.len(), 1, "{errors:?}");
    let code = errors[0]["metric"]["code"].as_str().unwrap_or_default();
    assert!(code.parse::<i16>().is_ok_and(|c| c != 0), "error code label {code:?}");
    prom.wait_for(
        "histogram_quantile(0.99, sum by (le) (rate(mirrorgate_request_duration_seconds_bucket[1m])))",
        t,
        |v| v > 0.0 && v < 30.0,
    );
    prom.wait_for("sum(mirrorgate_client_received_bytes_total)", t, |v| v > 0.0);
    prom.wait_for("sum(mirrorgate_client_sent_bytes_total)", t, |v| v > 0.0);

    // A FAILED partition: the destination's timestamp limit, narrowed behind the mirror's back,
    // refuses the source's old records.
    let refused = unique_name("prom-failed");
    create_topic_with(V, &source.bootstrap, &refused, 1, &[]);
    produce_to_partition_0(&source.bootstrap, &refused, 5, "fresh");
    let failing = unique_name("m-failing");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &failing, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &failing, "--topics", &refused]), "--start");
    let f0 = format!("mirror=\"{failing}\",topic=\"{refused}\",partition=\"0\"");
    prom.wait_for(&format!("mirrorgate_mirror_partition_destination_offset{{{f0}}}"), t, |v| v == 5.0);
    assert_eq!(prom.value(&format!("mirrorgate_mirror_failed_partitions{{mirror=\"{failing}\"}}")), Ok(0.0));
    kafka_tool_ok(
        V,
        "configs",
        &[
            "--bootstrap-server",
            &dest.bootstrap,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &refused,
            "--add-config",
            "message.timestamp.before.max.ms=3600000",
        ],
        None,
    );
    std::thread::sleep(Duration::from_secs(2));
    let two_hours_ago = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
        - 2 * 3600 * 1000)
        .to_string();
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &refused,
            "--partition",
            "0",
            "--count",
            "5",
            "--prefix",
            "old",
            "--timestamp-ms",
            &two_hours_ago,
        ]),
        "produce",
    );
    prom.wait_for(&format!("mirrorgate_mirror_failed_partitions{{mirror=\"{failing}\"}}"), t, |v| v == 1.0);
    prom.wait_for(&format!("mirrorgate_mirror_partitions{{mirror=\"{failing}\",state=\"FAILED\"}}"), t, |v| v == 1.0);
    prom.wait_for(&format!("mirrorgate_mirror_partition_state{{{f0}}}"), t, |v| v == 8.0);
    // The other mirror is not counted, and its alert goes pending (`for: 1m`) for this one only.
    assert_eq!(prom.value(&format!("mirrorgate_mirror_failed_partitions{{mirror=\"{mirror}\"}}")), Ok(0.0));
    prom.wait_for(&format!("count(ALERTS{{alertname=\"MirrorgatePartitionFailed\",mirror=\"{failing}\"}})"), t, |v| {
        v == 1.0
    });
    assert!(prom
        .query(&format!("ALERTS{{alertname=\"MirrorgatePartitionFailed\",mirror=\"{mirror}\"}}"))
        .unwrap()
        .is_empty());
    assert!(prom.query("ALERTS{alertname=\"MirrorgateLagHigh\"}").unwrap().is_empty(), "lag alert without lag");

    // Every rule evaluates without error against mirrorgate's series.
    let (_, rules) = http_get(&prom.addr, "/api/v1/rules").unwrap();
    let rules: Value = serde_json::from_str(&rules).unwrap();
    let loaded: Vec<&Value> = rules["data"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect();
    let alerts = dashboard_and_alert_exprs().iter().filter(|(w, _)| w.starts_with("alert ")).count();
    assert_eq!(loaded.len(), alerts, "rules loaded by Prometheus: {rules}");
    for r in &loaded {
        assert_eq!(r["health"], "ok", "rule {} does not evaluate: {r}", r["name"]);
    }

    // Every name of the docs table is in Prometheus (histograms as `_bucket`), unless it only
    // appears after an event this test does not cause.
    let (docs, _) = docs_table();
    let missing = eventually(Duration::from_secs(20), || {
        let stored = prom.names("mirrorgate_.+");
        let missing: Vec<&String> = docs
            .iter()
            .filter(|n| !AFTER_AN_EVENT.contains(&n.as_str()))
            .filter(|n| !stored.contains(*n) && !stored.contains(&format!("{n}_bucket")))
            .collect();
        if missing.is_empty() {
            Ok(missing.len())
        } else {
            Err(format!("not in Prometheus: {missing:?}; stored: {stored:?}"))
        }
    });
    assert_eq!(missing, 0);

    // Every metric of a dashboard panel or an alert is in a live scrape of mirrorgate.
    let (status, scrape) = http_get(&format!("127.0.0.1:{metrics_port}"), "/metrics").unwrap();
    assert_eq!(status, 200);
    let served = scraped_names(&scrape);
    let mut unknown = Vec::new();
    for (what, expr) in dashboard_and_alert_exprs() {
        for name in metric_names(&expr) {
            let live = served.contains(&name);
            if !live && !AFTER_AN_EVENT.contains(&name.as_str()) {
                unknown.push(format!("{what}: {name} (in {expr:?})"));
            }
            if !live && !docs.contains(&name) {
                unknown.push(format!("{what}: {name} is neither scraped nor in the docs table"));
            }
        }
    }
    assert!(unknown.is_empty(), "metrics not served by mirrorgate:\n{}", unknown.join("\n"));
    // The check can fail: a name mirrorgate does not serve is not in the scrape.
    assert!(!served.contains("mirrorgate_mirror_lagg"));
    drop(mg);
    eprintln!("prometheus scenario: {:?}", started.elapsed());
}

/// KIP-1279 DeadThreadCount: a copy loop that panics (`MIRRORGATE_FAILPOINT=loop-panic:1`, the
/// first loop started) is counted once in `mirrorgate_mirror_dead_tasks_total`, its alert
/// fires, and a new loop copies the partition to the end.
#[test]
fn a_copy_loop_that_panics_is_counted_dead_and_replaced() {
    let source = cluster("source");
    let dest = cluster("dest");
    let metrics_port = free_port_range(1);
    let yaml = format!("metrics:\n  listen: 127.0.0.1:{metrics_port}\n");
    let mg = Mirrorgate::start_with(
        &dest,
        MirrorgateOptions { extra_yaml: &yaml, env: &[("MIRRORGATE_FAILPOINT", "loop-panic:1")], ..Default::default() },
    );
    let prom = Prometheus::start(metrics_port);
    let t = Duration::from_secs(60);
    prom.wait_for("up{job=\"mirrorgate\"}", t, |v| v == 1.0);
    let topic = unique_name("prom-dead");
    create_topic_with(V, &source.bootstrap, &topic, 1, &[]);
    produce_to_partition_0(&source.bootstrap, &topic, 20, "d");
    let mirror = unique_name("m-dead");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    let dead = |task: &str| format!("mirrorgate_mirror_dead_tasks_total{{mirror=\"{mirror}\",task=\"{task}\"}}");
    prom.wait_for(&dead("copy_loop"), t, |v| v == 1.0);
    prom.wait_for(
        &format!("count(ALERTS{{alertname=\"MirrorgateDeadTask\",alertstate=\"firing\",mirror=\"{mirror}\"}})"),
        t,
        |v| v == 1.0,
    );
    // Replaced: the next loop copies everything, and no other death is counted.
    let p0 = format!("mirror=\"{mirror}\",topic=\"{topic}\",partition=\"0\"");
    prom.wait_for(&format!("mirrorgate_mirror_partition_destination_offset{{{p0}}}"), t, |v| v == 20.0);
    prom.wait_for(&format!("mirrorgate_mirror_partition_state{{{p0}}}"), t, |v| v == 3.0);
    assert_eq!(prom.value(&dead("copy_loop")), Ok(1.0));
    assert_eq!(prom.value(&dead("fetcher")), Ok(0.0));
    assert!(mg.log().contains("loop-panic:1 reached"), "{}", tail(&mg.log(), 20));
}
