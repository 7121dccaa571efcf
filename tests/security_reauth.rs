//! KIP-368 re-authentication against real Kafka 4.1 brokers whose SASL listener has `connections.max.reauth.ms` = 5000 (a SASL session ends 5 s after it began; a request
//! read after that closes the connection, `tests/broker_behaviour.rs` pin 13):
//!
//! - a mirror from a SCRAM source (SASL_SSL) into a SCRAM destination (SASL_PLAINTEXT) copies a steady stream for 25 s
//!   identically while mirrorgate's own connections re-authenticate in-band on both sides,
//!   counted in `mirrorgate_broker_reauthentications_total`, without being dropped and made
//!   again (`mirrorgate_broker_connections_created_total`);
//! - Java and librdkafka clients through mirrorgate run for several session lifetimes and
//!   every record arrives (their re-authentications pass through to the broker); a
//!   long-lived mirrorgate client connection (the library the mirror CLI uses) keeps its
//!   principal after re-authenticating: still refused what its ACLs refuse, still allowed
//!   what they allow.
//!
//! Each secured cluster also has a PLAINTEXT listener, which the tests use to create topics,
//! produce and verify; mirrorgate only ever gets the secured address.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::client::ClientSecurity;
use mirrorgate::mirror::verify::verify_partition;
use support::*;

const V: &str = "4.1.1";
/// Every SASL session of the test clusters ends after 5 s (KIP-368).
const REAUTH_5S: &str = "connections.max.reauth.ms=5000";
/// How long the steady streams run: at least five session lifetimes.
const STREAM: Duration = Duration::from_secs(26);

/// The SASL_SSL SCRAM source of the mirror tests (one per test binary; every test names all
/// its users), so re-authentication runs inside TLS.
fn scram_source() -> Arc<Cluster> {
    secure_cluster_with(
        "reauth-src",
        "SASL_SSL",
        "none",
        &["SCRAM-SHA-512:src:src-pw", "SCRAM-SHA-512:src2:src2-pw"],
        &[REAUTH_5S],
    )
}

/// The mirror config lines that reach [`scram_source`] as `user`.
fn source_security(source: &Cluster, user: &str, password: &str) -> String {
    let ca = source.tls_dir.as_ref().expect("secure cluster").join("ca.pem");
    format!(
        "bootstrap.servers={}\nsecurity.protocol=SASL_SSL\nssl.truststore.location={}\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={}\n",
        source.secure.as_ref().unwrap(),
        ca.display(),
        jaas(user, password)
    )
}

fn jaas(user: &str, password: &str) -> String {
    format!(
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";"#
    )
}

fn plain_client(bootstrap: &str) -> ClusterClient {
    block(ClusterClient::connect(ClusterOptions::new(vec![bootstrap.to_string()]))).unwrap()
}

fn create_topic(bootstrap: &str, topic: &str, partitions: u32) {
    let p = partitions.to_string();
    let args = [
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
    kafka_tool_ok(V, "topics", &args, None);
}

/// `GET /metrics` on `127.0.0.1:port`.
fn metrics(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The sum of the samples of metric `name` whose labels contain every one of `labels`.
fn sample(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `tests/python/reauth_clients.py` (librdkafka) with `args`.
fn reauth_client(args: &[&str]) -> std::process::Output {
    python_program("reauth_clients.py", args, Duration::from_secs(180))
}

fn wait_identical(source: &Cluster, dest: &Cluster, topic: &str, partitions: i32, records: i64) {
    let (src, dst) = (plain_client(&source.bootstrap), plain_client(&dest.bootstrap));
    eventually(Duration::from_secs(120), || {
        let reports = (0..partitions)
            .map(|p| block(verify_partition(&src, &dst, topic, p, &[], None)))
            .collect::<Result<Vec<_>, _>>()?;
        let n: i64 = reports.iter().map(|r| r.records).sum();
        (n == records).then_some(()).ok_or(format!("{n} of {records} records verified: {reports:?}"))
    });
}

/// A mirror from a SASL_SSL SCRAM-SHA-512 source into a SASL_PLAINTEXT SCRAM-SHA-512
/// destination, both ending SASL
/// sessions after 5 s, copies a steady stream of 26 s identically (offsets and values).
/// mirrorgate's own connections re-authenticate in-band on both clusters (≥ 3 successes
/// each, no failure) and are not dropped and made again: over the stream, at most 2 new
/// connections per broker (the old code made every connection again each 5 s, as the broker
/// closed it at its first request after the expiry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_between_sasl_clusters_with_short_sessions_reauthenticates_without_reconnecting() {
    let source = scram_source();
    let dest = secure_cluster_with("reauth-dst", "SASL_PLAINTEXT", "none", &["SCRAM-SHA-512:mg:mg-pw"], &[REAUTH_5S]);
    let (source_addr, dest_addr) = (source.secure.clone().unwrap(), dest.secure.clone().unwrap());
    let metrics_port = free_port_range(1);
    let destination_yaml = format!(
        "  security_protocol: SASL_PLAINTEXT\n  sasl_mechanism: SCRAM-SHA-512\n  sasl_jaas_config: '{}'\n",
        jaas("mg", "mg-pw")
    );
    let mg = Mirrorgate::start_in_front_of(
        &dest_addr,
        FrontOptions { destination_yaml: &destination_yaml, ..FrontOptions::default() },
        MirrorgateOptions {
            extra_yaml: &format!("metrics:\n  listen: 127.0.0.1:{metrics_port}\n"),
            // The proxy's destination refresh opens a connection per round (every 5 s in
            // the test config): out of the way, so that the counters show only the
            // connections that live through the stream.
            env: &[("MIRRORGATE__DESTINATION__METADATA_REFRESH_INTERVAL_MS", "120000")],
            ..MirrorgateOptions::default()
        },
    );
    let topic = unique_name("reauth");
    create_topic(&source.bootstrap, &topic, 2);
    let cfg = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("reauth-mirror")));
    std::fs::write(
        &cfg,
        format!("{}mirror.metadata.refresh.interval.ms=60000\n", source_security(&source, "src", "src-pw")),
    )
    .unwrap();
    // The destination authenticates its clients: so must the mirror CLI (as `mg`).
    let mg_cfg = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("reauth-cli")));
    std::fs::write(
        &mg_cfg,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={}\n",
            jaas("mg", "mg-pw")
        ),
    )
    .unwrap();
    let cli = |args: &[&str]| {
        let mut all = vec!["--command-config", mg_cfg.to_str().unwrap()];
        all.extend(args);
        mirrors_cli(&mg.bootstrap, &all)
    };
    let mirror = unique_name("m");
    ok(cli(&["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]), "--create");
    ok(cli(&["--start", "--mirror", &mirror, "--topics", &topic]), "--start");

    // A steady stream into the source (its PLAINTEXT listener): 20 records a second.
    let bootstrap = source.bootstrap.clone();
    let (t, secs) = (topic.clone(), STREAM.as_secs().to_string());
    let producer = std::thread::spawn(move || {
        reauth_client(&["steady", "--bootstrap", &bootstrap, "--topic", &t, "--seconds", &secs, "--interval-ms", "50"])
    });
    // Connections are made while the mirror starts; count from when it copies.
    let first = plain_client(&dest.bootstrap);
    eventually(Duration::from_secs(60), || {
        let end = block(first.list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        (end > 0).then_some(()).ok_or("nothing copied yet".to_string())
    });
    let window = Instant::now();
    let before = metrics(metrics_port);
    let out = producer.join().unwrap();
    let after = metrics(metrics_port);
    let window = window.elapsed();
    let stdout = ok(out, "steady producer");
    let delivered: i64 = stdout.trim().strip_prefix("delivered ").and_then(|n| n.parse().ok()).expect("delivered N");
    assert!(delivered > 300, "{stdout}");
    wait_identical(&source, &dest, &topic, 2, delivered);
    eprintln!("window {window:?}, {delivered} records");

    let mut wrong = Vec::new();
    for (side, addr) in [("source", &source_addr), ("destination", &dest_addr)] {
        let broker = format!("broker=\"{addr}\"");
        let reauth_ok = sample(
            &after,
            "mirrorgate_broker_reauthentications_total",
            &[&broker, "result=\"success\"", "SCRAM-SHA-512"],
        );
        let reauth_failed =
            sample(&after, "mirrorgate_broker_reauthentications_total", &[&broker, "result=\"failure\""]);
        let created = |text: &str| sample(text, "mirrorgate_broker_connections_created_total", &[&broker]);
        let closed = |text: &str| sample(text, "mirrorgate_broker_connections_closed_total", &[&broker]);
        let (new, gone) = (created(&after) - created(&before), closed(&after) - closed(&before));
        let latency_count =
            sample(&after, "mirrorgate_broker_reauthentication_latency_seconds_count", &[&broker, "SCRAM-SHA-512"]);
        eprintln!(
            "{side} {addr}: re-authentications {reauth_ok} ok, {reauth_failed} failed; connections over the stream: {new} created, {gone} closed"
        );
        if new > 2.0 || gone > 2.0 {
            wrong.push(format!(
                "{side}: connections dropped and made again: {new} created, {gone} closed in {window:?}"
            ));
        }
        if reauth_ok < 3.0 {
            wrong.push(format!("{side}: {reauth_ok} re-authentications in {window:?}"));
        }
        if reauth_failed != 0.0 {
            wrong.push(format!("{side}: {reauth_failed} failed re-authentications"));
        }
        if latency_count != reauth_ok + reauth_failed {
            wrong.push(format!("{side}: {latency_count} re-authentication latencies recorded"));
        }
    }
    // The source Fetch session (KIP-227) lives on: no full Fetch after the first ones.
    let full = |text: &str| sample(text, "mirrorgate_mirror_fetch_requests_total", &["kind=\"full\""]);
    let incremental = sample(&after, "mirrorgate_mirror_fetch_requests_total", &["kind=\"incremental\""]);
    let full_fetches = full(&after) - full(&before);
    eprintln!("fetches over the stream: {full_fetches} full, {incremental} incremental in all");
    if full_fetches > 1.0 {
        wrong.push(format!("{full_fetches} full Fetch requests over the stream: the fetch session was lost"));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let described = ok(cli(&["--describe", "--mirror", &mirror, "--json"]), "--describe --json");
    let rows = serde_json::from_str::<serde_json::Value>(&described).unwrap().as_array().unwrap().clone();
    assert!(rows.len() == 2 && rows.iter().all(|r| r["state"] == "MIRRORING"), "{rows:?}");
    assert!(!mg.log().contains("re-authentication failed"), "{}", tail(&mg.log(), 30));
}

/// Clients through mirrorgate to a SCRAM destination ending sessions after 5 s: a Java
/// producer and consumer and a librdkafka producer and consumer run side by side for 26 s;
/// every record arrives at its offset (each client re-authenticates through mirrorgate, the
/// broker closing any connection that did not). A long-lived connection of mirrorgate's own
/// client library (what the mirror CLI uses) as `frank`, who may DESCRIBE but not ALTER the
/// cluster: before and after re-authenticating it reads mirror configs and is refused their
/// change with CLUSTER_AUTHORIZATION_FAILED (a lost principal would be User:ANONYMOUS, a
/// super user here, and allowed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_reauthenticate_through_mirrorgate_and_keep_their_principal() {
    let dest = secure_cluster_with(
        "reauth-clients",
        "SASL_PLAINTEXT",
        "none",
        &["SCRAM-SHA-512:admin:admin-pw", "SCRAM-SHA-512:dave:dave-pw", "SCRAM-SHA-512:frank:frank-pw"],
        &[
            REAUTH_5S,
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin;User:ANONYMOUS;User:dave",
        ],
    );
    let metrics_port = free_port_range(1);
    let destination_yaml = format!(
        "  security_protocol: SASL_PLAINTEXT\n  sasl_mechanism: SCRAM-SHA-512\n  sasl_jaas_config: '{}'\n",
        jaas("admin", "admin-pw")
    );
    let extra = format!(
        "metrics:\n  listen: 127.0.0.1:{metrics_port}\nauthorization:\n  super_users: [\"User:admin\", \"User:ANONYMOUS\", \"User:dave\"]\n"
    );
    let mg = Mirrorgate::start_in_front_of(
        dest.secure.as_ref().unwrap(),
        FrontOptions { destination_yaml: &destination_yaml, ..FrontOptions::default() },
        MirrorgateOptions { extra_yaml: &extra, ..MirrorgateOptions::default() },
    );
    kafka_tool_ok(
        V,
        "acls",
        &[
            "--bootstrap-server",
            &dest.bootstrap,
            "--add",
            "--allow-principal",
            "User:frank",
            "--operation",
            "Describe",
            "--cluster",
        ],
        None,
    );
    // A mirror to read and (try to) change; created by the CLI as admin, a super user
    // (mirrorgate answers only authenticated clients of a SASL destination).
    let source = cluster("src");
    let mirror_cfg = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("reauth-src")));
    std::fs::write(&mirror_cfg, format!("bootstrap.servers={}\n", source.bootstrap)).unwrap();
    let admin_cfg = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("reauth-admin")));
    std::fs::write(
        &admin_cfg,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={}\n",
            jaas("admin", "admin-pw")
        ),
    )
    .unwrap();
    let mirror = unique_name("m");
    ok(
        mirrors_cli(
            &mg.bootstrap,
            &[
                "--command-config",
                admin_cfg.to_str().unwrap(),
                "--create",
                "--mirror",
                &mirror,
                "--mirror-config",
                mirror_cfg.to_str().unwrap(),
            ],
        ),
        "--create",
    );
    let (java_topic, rdkafka_topic) = (unique_name("reauth-java"), unique_name("reauth-rdkafka"));
    create_topic(&dest.bootstrap, &java_topic, 1);
    create_topic(&dest.bootstrap, &rdkafka_topic, 1);
    let secs = STREAM.as_secs().to_string();
    let java = {
        let (b, t, s) = (mg.bootstrap.clone(), java_topic.clone(), secs.clone());
        std::thread::spawn(move || java_program(V, "ReauthClients.java", &[&b, &t, &s, "dave", "dave-pw"]))
    };
    let rdkafka = {
        let (b, t, s) = (mg.bootstrap.clone(), rdkafka_topic.clone(), secs.clone());
        std::thread::spawn(move || {
            reauth_client(&[
                "roundtrip",
                "--bootstrap",
                &b,
                "--topic",
                &t,
                "--seconds",
                &s,
                "--prop",
                "security.protocol=SASL_PLAINTEXT",
                "--prop",
                "sasl.mechanism=SCRAM-SHA-512",
                "--prop",
                "sasl.username=dave",
                "--prop",
                "sasl.password=dave-pw",
            ])
        })
    };

    // frank's long-lived connection through mirrorgate.
    let mut o = ClusterOptions::new(vec![mg.bootstrap.clone()]);
    let frank_props: BTreeMap<String, String> = [
        ("security.protocol", "SASL_PLAINTEXT".to_string()),
        ("sasl.mechanism", "SCRAM-SHA-512".to_string()),
        ("sasl.jaas.config", jaas("frank", "frank-pw")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    o.security = ClientSecurity::from_properties(&frank_props).unwrap();
    let frank = Arc::new(block(ClusterClient::connect(o)).unwrap());
    let check = |when: &str| {
        let (describe, alter) = frank_on_mirror_configs(&frank, &mirror);
        assert_eq!(describe, 0, "{when}: frank (DESCRIBE) reading the mirror's configs");
        assert_eq!(alter, 31, "{when}: frank (no ALTER) changing the mirror's configs: CLUSTER_AUTHORIZATION_FAILED");
    };
    check("first authentication");
    let client_reauths =
        |text: &str| sample(text, "mirrorgate_client_reauthentications_total", &["result=\"success\""]);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(14) {
        std::thread::sleep(Duration::from_millis(1500));
        check(&format!("after {:?}", started.elapsed()));
    }
    let java = java.join().unwrap();
    let rdkafka = rdkafka.join().unwrap();
    check("at the end");
    let java_out = ok(java, "Java producer and consumer through mirrorgate");
    let rdkafka_out = ok(rdkafka, "librdkafka producer and consumer through mirrorgate");
    eprintln!("java: {java_out}librdkafka: {rdkafka_out}");
    for (who, out, topic) in [("java", &java_out, &java_topic), ("librdkafka", &rdkafka_out, &rdkafka_topic)] {
        let n: i64 = out.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("produced N");
        assert!(n > 50, "{who}: {out}");
        // What the broker holds: exactly what the client produced.
        assert_eq!(block(plain_client(&dest.bootstrap).list_offsets(topic, 0, -1)).unwrap(), n, "{who}");
    }
    let m = metrics(metrics_port);
    let reauths = client_reauths(&m);
    eprintln!("client re-authentications through mirrorgate: {reauths}");
    // Java (producer, consumer, coordinator-less), librdkafka (two clients) and frank each
    // re-authenticate every 4.25..4.75 s.
    assert!(reauths >= 12.0, "client re-authentications counted: {reauths}");
    assert_eq!(sample(&m, "mirrorgate_client_reauthentications_total", &["result=\"failure\""]), 0.0);
    // mirrorgate's own connections to the destination re-authenticated too.
    assert!(sample(&m, "mirrorgate_broker_reauthentications_total", &["result=\"success\""]) >= 1.0);

    // A client that never re-authenticates: once its 5 s session has ended, mirrorgate
    // closes the connection at its next mirror request (which only mirrorgate answers), as a
    // broker closes an expired channel, instead of answering it for a principal whose
    // session is over.
    let creds = mirrorgate::client::security::SaslCredentials {
        mechanism: mirrorgate::client::security::SaslMechanism::ScramSha512,
        username: "frank".into(),
        password: mirrorgate::client::security::Secret::new("frank-pw"),
        oauth: None,
    };
    let mut raw = mirrorgate::client::BrokerConnection::connect(
        &mg.bootstrap,
        Duration::from_secs(10),
        Duration::from_secs(30),
        1 << 20,
    )
    .await
    .unwrap();
    // Authenticated by hand on a plaintext connection: the connection does not know it has a
    // session, so it never re-authenticates.
    mirrorgate::client::sasl::authenticate(&mut raw, &creds).await.unwrap();
    let describe = || {
        use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
        use kafka_protocol::messages::DescribeConfigsRequest;
        let mut d = DescribeConfigsResource::default();
        d.resource_type = 64;
        d.resource_name = kafka_protocol::protocol::StrBytes::from_string(mirror.to_string());
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![d];
        req
    };
    let first = raw.send(&describe(), 4).await.expect("a mirror request within the session");
    assert_eq!(first.results[0].error_code, 0, "frank (DESCRIBE) within his session");
    tokio::time::sleep(Duration::from_millis(6_000)).await;
    let after = raw.send(&describe(), 4).await;
    assert!(after.is_err(), "answered after the client's session ended: {after:?}");
    mg.wait_for_log("SASL session expired without a re-authentication", Duration::from_secs(10));
}

/// frank's DescribeConfigs and IncrementalAlterConfigs on mirror `mirror` (resource type 64,
/// CLUSTER_MIRROR) through his connection: the two error codes.
fn frank_on_mirror_configs(frank: &ClusterClient, mirror: &str) -> (i16, i16) {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};
    use kafka_protocol::protocol::StrBytes;
    let mut d = DescribeConfigsResource::default();
    d.resource_type = 64;
    d.resource_name = StrBytes::from_string(mirror.to_string());
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![d];
    let described = block(frank.send_any(&req, 4)).unwrap();
    let mut a = AlterableConfig::default();
    a.name = StrBytes::from_static_str("mirror.metadata.refresh.interval.ms");
    a.value = Some(StrBytes::from_static_str("45000"));
    let mut res = AlterConfigsResource::default();
    res.resource_type = 64;
    res.resource_name = StrBytes::from_string(mirror.to_string());
    res.configs = vec![a];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![res];
    let altered = block(frank.send_any(&req, 1)).unwrap();
    (described.results[0].error_code, altered.responses[0].error_code)
}

/// A password changed on the source broker while a mirror runs: the next re-authentication
/// of each of mirrorgate's source connections is refused; the connection is closed and the
/// refusal reported like a refused authentication (partitions FAILED naming
/// SASL_AUTHENTICATION_FAILED, `result="failure"` counted), without a loop of attempts; the
/// mirror's config set to the new password heals it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reauthentication_fails_the_mirror_like_a_refused_authentication() {
    let source = scram_source();
    let source_addr = source.secure.clone().unwrap();
    let dest = cluster("dest");
    let metrics_port = free_port_range(1);
    let mg = Mirrorgate::start_with(
        &dest,
        MirrorgateOptions {
            extra_yaml: &format!("metrics:\n  listen: 127.0.0.1:{metrics_port}\n"),
            ..MirrorgateOptions::default()
        },
    );
    let topic = unique_name("reauth-refused");
    create_topic(&source.bootstrap, &topic, 1);
    let steady = |seconds: &str| {
        let out = reauth_client(&["steady", "--bootstrap", &source.bootstrap, "--topic", &topic, "--seconds", seconds]);
        let stdout = ok(out, "steady producer");
        stdout.trim().strip_prefix("delivered ").and_then(|n| n.parse::<i64>().ok()).expect("delivered N")
    };
    let mut produced = steady("2");
    let cfg = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("reauth-refused")));
    std::fs::write(
        &cfg,
        format!(
            "{}mirror.metadata.refresh.interval.ms=2000\nmirror.failed.retry.max.backoff.ms=2000\n",
            source_security(&source, "src2", "src2-pw")
        ),
    )
    .unwrap();
    let mirror = unique_name("m");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    wait_identical(&source, &dest, &topic, 1, produced);
    // Sessions re-authenticate while the password holds.
    produced += steady("7");
    wait_identical(&source, &dest, &topic, 1, produced);
    let broker = format!("broker=\"{source_addr}\"");
    let reauths =
        |result: &str| sample(&metrics(metrics_port), "mirrorgate_broker_reauthentications_total", &[&broker, result]);
    assert!(reauths("result=\"success\"") >= 1.0, "no re-authentication before the password change");
    assert_eq!(reauths("result=\"failure\""), 0.0);

    kafka_tool_ok(
        V,
        "configs",
        &[
            "--bootstrap-server",
            &source.bootstrap,
            "--alter",
            "--add-config",
            "SCRAM-SHA-512=[iterations=8192,password=src2-new-pw]",
            "--entity-type",
            "users",
            "--entity-name",
            "src2",
        ],
        None,
    );
    let changed = Instant::now();
    produced += steady("3");
    eventually(Duration::from_secs(60), || {
        let rows = describe_json(&mg, &mirror);
        let failed = rows.len() == 1
            && rows[0]["state"] == "FAILED"
            && rows[0]["errorMessage"].as_str().is_some_and(|m| m.contains("SASL_AUTHENTICATION_FAILED"));
        failed.then_some(()).ok_or(format!("{rows:?}"))
    });
    mg.wait_for_log("SASL re-authentication failed", Duration::from_secs(30));
    // No loop: a refused re-authentication is not tried again on its connection, and new
    // connections are held back by the remembered refusal.
    std::thread::sleep(Duration::from_secs(10));
    let failures = reauths("result=\"failure\"");
    let window = changed.elapsed();
    eprintln!("{failures} refused re-authentications in {window:?}");
    assert!(failures >= 1.0, "the refused re-authentication was not counted");
    assert!(failures <= 4.0, "{failures} refused re-authentications in {window:?}: a loop");

    // The mirror's config gets the new password: it heals and copies what came meanwhile.
    alter_jaas(&mg, &mirror, &jaas("src2", "src2-new-pw"));
    wait_identical(&source, &dest, &topic, 1, produced);
    eventually(Duration::from_secs(60), || {
        let rows = describe_json(&mg, &mirror);
        (rows.len() == 1 && rows[0]["state"] == "MIRRORING").then_some(()).ok_or(format!("{rows:?}"))
    });
    for secret in ["src2-pw", "src2-new-pw"] {
        assert!(!mg.log().contains(secret), "mirrorgate's log holds a password");
    }
}

/// Sets the mirror's `sasl.jaas.config` (IncrementalAlterConfigs on CLUSTER_MIRROR, 64).
fn alter_jaas(mg: &Mirrorgate, mirror: &str, jaas: &str) {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let mut a = AlterableConfig::default();
    a.name = StrBytes::from_static_str("sasl.jaas.config");
    a.value = Some(StrBytes::from_string(jaas.to_string()));
    let mut res = AlterConfigsResource::default();
    res.resource_type = 64;
    res.resource_name = StrBytes::from_string(mirror.to_string());
    res.configs = vec![a];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![res];
    let resp = block(plain_client(&mg.bootstrap).send_any(&req, 1)).unwrap();
    assert!(resp.responses.iter().all(|r| r.error_code == 0), "{resp:?}");
}
