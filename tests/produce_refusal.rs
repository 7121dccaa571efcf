//! A write to a mirror topic through mirrorgate, as each real client sees it: the Java
//! producer, librdkafka (confluent-kafka), franz-go and sarama (`tests/go`, built by this test
//! with the Go toolchain). Each must report POLICY_VIOLATION (44) — a final refusal every
//! client knows — and must not retry. The Java producer also shows mirrorgate's message naming
//! the topic and the mirror; librdkafka, franz-go and sarama drop a Produce response's error
//! message and show their own text for the code, so mirrorgate logs every refusal with its
//! message (checked here too). Against real Kafka 4.1 source and destination clusters.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use support::*;

const V: &str = "4.1.1";

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Builds `tests/go/produce` once per test binary (`go build`, modules pinned by
/// `tests/go/go.sum`); panics with the Go toolchain's output when it cannot.
fn go_produce() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out_dir = repo().join("target/test-mirrorgate");
        std::fs::create_dir_all(&out_dir).unwrap();
        let bin = out_dir.join("go-produce");
        let mut cmd = Command::new("go");
        cmd.current_dir(repo().join("tests/go")).args(["build", "-mod=readonly", "-o"]).arg(&bin).arg("./produce");
        let out = run(cmd, None, Duration::from_secs(600));
        assert!(
            out.status.success(),
            "cannot build the Go test client tests/go/produce (Go toolchain and module proxy needed):\n{}",
            text(&out)
        );
        bin
    })
    .clone()
}

/// Refused Produce requests mirrorgate logged for `client_id` with `message`.
fn refused_requests(mg: &Mirrorgate, client_id: &str, message: &str) -> usize {
    let id = format!("client_id=\"{client_id}\"");
    mg.log()
        .lines()
        .filter(|l| l.contains("Produce refused with POLICY_VIOLATION") && l.contains(message) && l.contains(&id))
        .count()
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Sum of the `/metrics` series of `name` whose labels contain every one of `labels`.
fn metric(metrics: &str, name: &str, labels: &[&str]) -> f64 {
    http_get(metrics, "/metrics")
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

/// Produce requests mirrorgate answered with POLICY_VIOLATION so far (counted when the
/// refusal is decided, before the response goes out).
fn refusals(metrics: &str) -> f64 {
    metric(metrics, "mirrorgate_request_errors_total", &["api=\"Produce\"", "code=\"44\""])
}

/// Waits until mirrorgate holds no client connection (it has read each to its end, so every
/// request a finished client sent has been answered or refused).
fn no_client_connection(metrics: &str) {
    eventually(Duration::from_secs(60), || {
        let n = metric(metrics, "mirrorgate_client_connections", &[]);
        if n == 0.0 {
            Ok(())
        } else {
            Err(format!("{n} client connections still open"))
        }
    });
}

/// Runs one client (`run_client`, which returns once the client process has exited) and
/// checks that mirrorgate refused exactly one Produce request of it: the refusal counter,
/// read once every connection of the finished client is closed on mirrorgate's side, moved
/// by exactly one (a retry would be a second request, read before the connection's end), and
/// the refusal was logged with `message` (which names the mirror). Returns the client's
/// output and an error description instead of panicking, so that every client is tried.
fn one_request<T>(
    mg: &Mirrorgate,
    metrics: &str,
    client_id: &str,
    message: &str,
    run_client: impl FnOnce() -> T,
) -> (T, Result<(), String>) {
    no_client_connection(metrics);
    let before = refusals(metrics);
    let out = run_client();
    no_client_connection(metrics);
    let n = refusals(metrics) - before;
    if n != 1.0 {
        return (
            out,
            Err(format!("{client_id}: mirrorgate refused {n} Produce requests, expected exactly 1 (no retry)")),
        );
    }
    // (The log line is written when the refusal is decided; its writer may lag a moment.)
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while refused_requests(mg, client_id, message) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let logged = refused_requests(mg, client_id, message);
    if logged != 1 {
        return (out, Err(format!("{client_id}: {logged} refusal log lines naming the mirror, expected 1")));
    }
    (out, Ok(()))
}

fn check(failures: &mut Vec<String>, ok: bool, what: String) {
    if !ok {
        failures.push(what);
    }
}

#[test]
fn every_client_reports_a_final_refusal_and_does_not_retry() {
    let source = cluster("source");
    let dest = cluster("dest");
    let metrics = format!("127.0.0.1:{}", free_port_range(1));
    let yaml = format!("metrics:\n  listen: {metrics}\n");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { extra_yaml: &yaml, ..Default::default() });
    let topic = unique_name("mirrored");
    kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", &source.bootstrap, "--create", "--topic", &topic, "--partitions", "1"],
        None,
    );
    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    let names_mirror = format!("topic {topic} is a read-only mirror topic of mirror {mirror}");
    let mut failures: Vec<String> = Vec::new();

    // Java producer (Kafka 4.1 client, idempotent by default): PolicyViolationException, not
    // retriable, with mirrorgate's message.
    let id = unique_name("java");
    let (out, once) = one_request(&mg, &metrics, &id, &names_mirror, || {
        java_program(
            V,
            "ProduceOnce.java",
            &["--bootstrap-server", &mg.bootstrap, "--topic", &topic, "--client-id", &id],
        )
    });
    let t = text(&out);
    check(
        &mut failures,
        t.contains("exception org.apache.kafka.common.errors.PolicyViolationException"),
        format!("Java: expected PolicyViolationException: {t}"),
    );
    check(&mut failures, t.contains("retriable false"), format!("Java: retriable: {t}"));
    check(&mut failures, t.contains(&names_mirror), format!("Java: message does not name the mirror: {t}"));
    if let Err(e) = once {
        failures.push(format!("{e}\n{t}"));
    }

    // librdkafka: the delivery report names POLICY_VIOLATION (44), with librdkafka's own text
    // (it does not surface a Produce response's error message).
    let id = unique_name("rdkafka");
    let (out, once) = one_request(&mg, &metrics, &id, &names_mirror, || {
        python_client(&[
            "produce",
            "--bootstrap",
            &mg.bootstrap,
            "--topic",
            &topic,
            "--count",
            "1",
            "--timeout",
            "60",
            "--prop",
            &format!("client.id={id}"),
        ])
    });
    let t = text(&out);
    check(&mut failures, !out.status.success(), format!("librdkafka: produce succeeded: {t}"));
    check(
        &mut failures,
        t.contains("POLICY_VIOLATION") && t.contains("val=44"),
        format!("librdkafka: expected POLICY_VIOLATION: {t}"),
    );
    if let Err(e) = once {
        failures.push(format!("{e}\n{t}"));
    }

    // franz-go and sarama: error code 44 by its Kafka name, not retriable.
    let go = go_produce();
    for (client, name) in [("franz", "POLICY_VIOLATION"), ("sarama", "policy")] {
        let id = unique_name(client);
        let mut cmd = Command::new(&go);
        cmd.args(["-client", client, "-bootstrap", &mg.bootstrap, "-topic", &topic, "-client-id", &id]);
        let (out, once) = one_request(&mg, &metrics, &id, &names_mirror, || run(cmd, None, Duration::from_secs(120)));
        let t = text(&out);
        let line = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").to_string();
        match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(v) => {
                check(&mut failures, v["code"] == 44, format!("{client}: expected code 44: {t}"));
                check(&mut failures, v["retriable"] == false, format!("{client}: retriable: {t}"));
                check(
                    &mut failures,
                    v["error"].as_str().is_some_and(|e| e.contains(name)),
                    format!("{client}: error does not name {name}: {t}"),
                );
            }
            Err(e) => failures.push(format!("{client}: no result line ({e}): {t}")),
        }
        if let Err(e) = once {
            failures.push(format!("{e}\n{t}"));
        }
    }

    // Nothing reached the destination topic.
    let offsets = kafka_tool_ok(V, "get-offsets", &["--bootstrap-server", &dest.bootstrap, "--topic", &topic], None);
    check(&mut failures, offsets.trim().ends_with(":0"), format!("destination topic was written: {offsets}"));
    assert!(failures.is_empty(), "{}\nmirrorgate log:\n{}", failures.join("\n\n"), tail(&mg.log(), 30));
}

/// The other refused writes of docs/protocol.md ("Writes to mirror topics"): a transactional
/// producer that adds a mirror topic to its transaction with AddPartitionsToTxn (the Kafka
/// 3.9 client: transaction version 1) is refused with TOPIC_AUTHORIZATION_FAILED and writes
/// nothing; a DeleteTopics request naming a mirror topic and an ordinary topic is refused as
/// a whole, so the ordinary topic survives.
#[test]
fn add_partitions_to_txn_and_a_mixed_admin_request_are_refused() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("mirrored-txn");
    let plain = unique_name("plain-mixed");
    for (bootstrap, t) in [(&source.bootstrap, &topic), (&mg.bootstrap, &plain)] {
        kafka_tool_ok(
            V,
            "topics",
            &["--bootstrap-server", bootstrap, "--create", "--topic", t, "--partitions", "1"],
            None,
        );
    }
    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    eventually(Duration::from_secs(60), || {
        let rows = describe_json(&mg, &mirror);
        (rows.len() == 1 && rows[0]["state"] == "MIRRORING").then_some(()).ok_or(format!("{rows:?}"))
    });

    let out = java_program(
        "3.9.1",
        "TxnProducer.java",
        &[
            "--bootstrap-server",
            &mg.bootstrap,
            "--topic",
            &topic,
            "--transactional-id",
            &unique_name("txn"),
            "--commit",
            "t1,t2",
        ],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "transactional write to a mirror topic: {t}");
    assert!(t.contains("TopicAuthorizationException"), "{t}");
    assert!(
        mg.log().lines().any(|l| l.contains("AddPartitionsToTxn") && l.contains(&topic)),
        "mirrorgate did not log the refused AddPartitionsToTxn:\n{}",
        tail(&mg.log(), 30)
    );

    let out = java_program(V, "AdminOps.java", &["--bootstrap-server", &mg.bootstrap, "delete-topic", &topic, &plain]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "DeleteTopics of a mirror topic and another: {t}");
    assert!(t.starts_with("ERROR "), "{t}");
    let list = kafka_tool_ok(V, "topics", &["--bootstrap-server", &mg.bootstrap, "--list"], None);
    for name in [&topic, &plain] {
        assert!(list.lines().any(|l| l.trim() == name.as_str()), "{name} was deleted: {list}");
    }
    let offsets = kafka_tool_ok(V, "get-offsets", &["--bootstrap-server", &dest.bootstrap, "--topic", &topic], None);
    assert!(offsets.trim().ends_with(":0"), "the mirror topic was written: {offsets}");
}
