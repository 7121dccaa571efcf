//! OTLP traces against a real OTLP receiver (tests/python/otlp_receiver.py: grpcio serving the
//! opentelemetry-proto TraceService, and OTLP/HTTP protobuf on `/v1/traces`) and real Kafka
//! 4.1 clusters: proxied requests, mirror admin RPCs and the mirror's work arrive as spans with
//! their attributes, linked into traces, and no configured secret (the OTLP `authorization`
//! header) appears in any span or log line.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::*;

const V: &str = "4.1.1";

/// The receiver process; stopped on drop (stdin closed, then killed).
struct Receiver {
    child: Child,
    grpc_port: u16,
    http_port: u16,
    spans_path: PathBuf,
    requests_path: PathBuf,
}

impl Receiver {
    /// Starts the receiver and waits for its READY line; panics (with its stderr) if it cannot.
    fn start() -> Self {
        let py = repo().join(".venv/bin/python");
        assert!(
            py.exists(),
            "{} is missing: run `scripts/pyenv.sh` (installs grpcio, opentelemetry-proto)",
            py.display()
        );
        let dir = repo().join("target/test-mirrorgate");
        std::fs::create_dir_all(&dir).unwrap();
        let id = unique_name("otlp");
        let spans_path = dir.join(format!("{id}.spans.jsonl"));
        let requests_path = dir.join(format!("{id}.requests.jsonl"));
        let err_path = dir.join(format!("{id}.receiver.log"));
        let mut child = Command::new(py)
            .arg(repo().join("tests/python/otlp_receiver.py"))
            .arg("--out")
            .arg(&spans_path)
            .arg("--requests")
            .arg(&requests_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .spawn()
            .expect("spawn the OTLP receiver");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        let Some(ports) = line.strip_prefix("READY ") else {
            let _ = child.kill();
            panic!(
                "the OTLP receiver did not start (stdout {line:?}); its stderr:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        };
        let ports: Value = serde_json::from_str(ports.trim()).unwrap();
        Self {
            child,
            grpc_port: ports["grpc"].as_u64().unwrap() as u16,
            http_port: ports["http"].as_u64().unwrap() as u16,
            spans_path,
            requests_path,
        }
    }

    fn spans(&self) -> Vec<Value> {
        read_lines(&self.spans_path)
    }

    fn requests(&self) -> Vec<Value> {
        read_lines(&self.requests_path)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_lines(path: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Spans named `name` whose attributes satisfy `f`.
fn named<'a>(spans: &'a [Value], name: &str, f: impl Fn(&Value) -> bool) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name && f(&s["attributes"])).collect()
}

fn has_str(list: &Value, want: &str) -> bool {
    list.as_array().is_some_and(|a| a.iter().any(|v| v == want))
}

fn produce(bootstrap: &str, topic: &str, count: usize, prefix: &str) {
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--count",
            &count.to_string(),
            "--prefix",
            prefix,
        ]),
        "produce",
    );
}

fn create_topic(bootstrap: &str, topic: &str) {
    create_topic_with(V, bootstrap, topic, 1, &[]);
}

/// A secret that must never show up in a span or a log line.
const SECRET: &str = "otlp-token-5c1f9e0d";

/// Spans exported over OTLP/gRPC with every attribute the issue lists, mirror work linked
/// into traces, and the authorization header sent to the collector but nowhere in the data.
#[test]
fn grpc_export_carries_requests_admin_rpcs_and_mirror_work() {
    let receiver = Receiver::start();
    let source = cluster("source");
    let dest = cluster("dest");
    let yaml = format!(
        "traces:\n  enabled: true\n  protocol: grpc\n  endpoint: http://127.0.0.1:{}\n  sampling_ratio: 1.0\n  service_name: mirrorgate-otlp-test\n  resource_attributes: deployment.environment=test,team=kafka\n  headers:\n    authorization: \"Bearer {SECRET}\"\n",
        receiver.grpc_port
    );
    // The environment loses against the explicit configuration.
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
        ("OTEL_TRACES_SAMPLER_ARG", "0.0"),
        ("OTEL_SERVICE_NAME", "from-env"),
    ];
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { extra_yaml: &yaml, env: &env, ..Default::default() });

    // A produce and a consume through mirrorgate to a plain destination topic.
    let plain = unique_name("otlp-plain");
    create_topic(&dest.bootstrap, &plain);
    produce(&mg.bootstrap, &plain, 20, "through");
    assert_eq!(consume_all(&mg.bootstrap, &plain, 20, "read_committed").len(), 20);

    // A mirror copy.
    let topic = unique_name("otlp-mirrored");
    create_topic(&source.bootstrap, &topic);
    produce(&source.bootstrap, &topic, 50, "src");
    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");

    let spans = eventually(Duration::from_secs(60), || {
        let spans = receiver.spans();
        let want = [
            ("Produce", !named(&spans, "Produce", |a| a["kafka.client_id"] == "mirrorgate-pyclient").is_empty()),
            ("Fetch", !named(&spans, "Fetch", |_| true).is_empty()),
            ("CreateClusterMirror", !named(&spans, "CreateClusterMirror", |_| true).is_empty()),
            ("StartMirrorTopics", !named(&spans, "StartMirrorTopics", |_| true).is_empty()),
            ("mirror.fetch", !named(&spans, "mirror.fetch", |a| a["mirror.name"] == mirror.as_str()).is_empty()),
            (
                "mirror.append",
                !named(&spans, "mirror.append", |a| has_str(&a["mirror.partitions"], &format!("{topic}-0"))).is_empty(),
            ),
            (
                "mirror.partition_state MIRRORING",
                !named(&spans, "mirror.partition_state", |a| {
                    a["mirror.topic"] == topic.as_str() && a["mirror.state"] == "MIRRORING"
                })
                .is_empty(),
            ),
            (
                "mirror.metadata_sync",
                !named(&spans, "mirror.metadata_sync", |a| a["mirror.name"] == mirror.as_str()).is_empty(),
            ),
        ];
        let missing: Vec<_> = want.iter().filter(|(_, ok)| !ok).map(|(n, _)| *n).collect();
        if missing.is_empty() {
            Ok(spans)
        } else {
            let names: std::collections::BTreeSet<_> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
            Err(format!("missing {missing:?}; received {} spans named {names:?}", spans.len()))
        }
    });

    // Resource: explicit service name and attributes, not the environment's.
    let r = &spans[0]["resource"];
    assert_eq!(r["service.name"], "mirrorgate-otlp-test", "{r}");
    assert_eq!(r["deployment.environment"], "test", "{r}");
    assert_eq!(r["team"], "kafka", "{r}");
    assert!(spans.iter().all(|s| s["protocol"] == "grpc"));

    // A proxied Produce: every request attribute, and its upstream child in the same trace.
    let p = named(&spans, "Produce", |a| a["kafka.client_id"] == "mirrorgate-pyclient")[0];
    let a = &p["attributes"];
    assert_eq!(a["kafka.api_key"], 0, "{p}");
    assert_eq!(a["kafka.api_name"], "Produce", "{p}");
    assert!(a["kafka.api_version"].as_i64().unwrap() >= 3, "{p}");
    assert!(a["kafka.correlation_id"].as_i64().is_some(), "{p}");
    assert_eq!(a["mirrorgate.listener"], "test", "{p}");
    let upstream = a["server.address"].as_str().unwrap_or_default();
    assert!(dest.ports().iter().any(|port| upstream.ends_with(&format!(":{port}"))), "upstream {upstream} in {p}");
    assert!(a["kafka.request.bytes"].as_i64().unwrap() > 0 && a["kafka.response.bytes"].as_i64().unwrap() > 0, "{p}");
    assert!(a["mirrorgate.upstream_latency_ms"].as_f64().is_some(), "{p}");
    assert_eq!(p["kind"], 2, "SERVER: {p}");
    assert_eq!(p["parent_span_id"], "", "a request span is a root: {p}");
    let child = spans
        .iter()
        .find(|s| s["name"] == "upstream" && s["parent_span_id"] == p["span_id"])
        .unwrap_or_else(|| panic!("no upstream child of {p}"));
    assert_eq!(child["trace_id"], p["trace_id"]);
    assert!(child["start_ns"].as_u64() >= p["start_ns"].as_u64() && child["end_ns"].as_u64() <= p["end_ns"].as_u64());
    // A top-level error code is recorded where the API has one (ApiVersions: 0).
    let av = named(&spans, "ApiVersions", |_| true);
    assert!(!av.is_empty() && av.iter().all(|s| s["attributes"]["kafka.error_code"] == 0), "{av:?}");

    // The admin RPC mirrorgate answers itself.
    let c = named(&spans, "CreateClusterMirror", |_| true)[0];
    assert_eq!(c["attributes"]["kafka.error_code"], 0, "{c}");
    assert!(c["attributes"]["kafka.correlation_id"].as_i64().is_some(), "{c}");

    // Mirror work: mirror, topic and partition attributes.
    let f =
        named(&spans, "mirror.fetch", |a| a["mirror.name"] == mirror.as_str() && has_str(&a["mirror.topics"], &topic));
    assert!(!f.is_empty(), "no mirror.fetch naming {topic}");
    assert!(f.iter().any(|s| s["attributes"]["kafka.response.records_bytes"].as_i64().unwrap_or(0) > 0), "{f:?}");
    let ap = named(&spans, "mirror.append", |a| has_str(&a["mirror.partitions"], &format!("{topic}-0")))[0];
    assert_eq!(ap["attributes"]["mirror.name"], mirror.as_str(), "{ap}");
    assert_eq!(ap["attributes"]["mirror.topic"], topic.as_str(), "{ap}");
    assert!(ap["attributes"]["kafka.request.bytes"].as_i64().unwrap() > 0, "{ap}");
    let st = named(&spans, "mirror.partition_state", |a| a["mirror.topic"] == topic.as_str())[0];
    assert_eq!(st["attributes"]["mirror.name"], mirror.as_str(), "{st}");
    assert_eq!(st["attributes"]["mirror.partition"], 0, "{st}");

    // The metadata sync pass is the parent of its steps, in one trace.
    let passes = named(&spans, "mirror.metadata_sync", |a| a["mirror.name"] == mirror.as_str());
    let by_id: HashMap<&str, &Value> = spans.iter().map(|s| (s["span_id"].as_str().unwrap(), s)).collect();
    let steps: Vec<_> = spans
        .iter()
        .filter(|s| s["name"] == "mirror.metadata_sync.step" && s["attributes"]["mirror.name"] == mirror.as_str())
        .collect();
    assert!(!steps.is_empty(), "no sync step spans");
    for s in &steps {
        let parent =
            by_id.get(s["parent_span_id"].as_str().unwrap()).unwrap_or_else(|| panic!("parent of {s} not received"));
        assert_eq!(parent["name"], "mirror.metadata_sync", "{s}");
        assert_eq!(parent["trace_id"], s["trace_id"], "{s}");
        assert!(passes.iter().any(|p| p["span_id"] == parent["span_id"]));
    }

    // The header went to the collector, and nowhere else.
    let reqs = receiver.requests();
    assert!(reqs.iter().any(|r| r["headers"]["authorization"] == format!("Bearer {SECRET}")), "{reqs:?}");
    let spans_text = std::fs::read_to_string(&receiver.spans_path).unwrap();
    assert!(!spans_text.contains(SECRET), "the OTLP header value appears in a span");
    assert!(!mg.log().contains(SECRET), "the OTLP header value appears in mirrorgate's log");
}

/// OTLP/HTTP protobuf configured from the standard environment variables, with the sampling
/// ratio at 0 in the file (which wins over OTEL_TRACES_SAMPLER_ARG): ordinary requests are not
/// exported, a failed admin RPC is (errors are always kept).
#[test]
fn http_export_from_the_environment_keeps_errors_at_ratio_zero() {
    let receiver = Receiver::start();
    let source = cluster("source");
    let dest = cluster("dest");
    let endpoint = format!("http://127.0.0.1:{}", receiver.http_port);
    let header = format!("authorization=Bearer%20{SECRET}");
    let env = [
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_HEADERS", header.as_str()),
        ("OTEL_TRACES_SAMPLER_ARG", "1.0"),
        ("OTEL_SERVICE_NAME", "mirrorgate-from-env"),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=env-test"),
    ];
    let yaml = "traces:\n  enabled: true\n  sampling_ratio: 0.0\n";
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { extra_yaml: yaml, env: &env, ..Default::default() });

    let plain = unique_name("otlp-http");
    create_topic(&dest.bootstrap, &plain);
    produce(&mg.bootstrap, &plain, 5, "through");
    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    let args = ["--create", "--mirror", mirror.as_str(), "--mirror-config", cfg.to_str().unwrap()];
    ok(mirrors_cli(&mg.bootstrap, &args), "--create");
    let again = mirrors_cli(&mg.bootstrap, &args);
    assert!(!again.status.success(), "creating {mirror} twice succeeded");

    let failed = eventually(Duration::from_secs(60), || {
        let spans = receiver.spans();
        let f: Vec<Value> =
            named(&spans, "CreateClusterMirror", |a| a["error.type"].is_string()).into_iter().cloned().collect();
        if f.is_empty() {
            Err(format!("{} spans, none a failed CreateClusterMirror", spans.len()))
        } else {
            Ok(f)
        }
    });
    let s = &failed[0];
    assert_eq!(s["protocol"], "http", "{s}");
    assert_ne!(s["attributes"]["kafka.error_code"], 0, "{s}");
    assert_eq!(s["status"]["code"], 2, "status ERROR: {s}");
    assert_eq!(s["resource"]["service.name"], "mirrorgate-from-env", "{s}");
    assert_eq!(s["resource"]["deployment.environment"], "env-test", "{s}");
    let spans = receiver.spans();
    let unsampled: Vec<_> = spans.iter().filter(|s| s["attributes"]["error.type"].is_null()).collect();
    assert!(unsampled.is_empty(), "spans without an error were exported at ratio 0: {unsampled:?}");
    let reqs = receiver.requests();
    assert!(reqs.iter().any(|r| r["headers"]["authorization"] == format!("Bearer {SECRET}")), "{reqs:?}");
    assert!(!std::fs::read_to_string(&receiver.spans_path).unwrap().contains(SECRET));
    assert!(!mg.log().contains(SECRET), "the OTLP header value appears in mirrorgate's log");
    let _ = writeln!(std::io::stderr(), "{} error spans over OTLP/HTTP", failed.len());
}
