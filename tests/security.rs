//! TLS and SASL against real Kafka 4.1 brokers configured for them (`scripts/kafka.sh start
//! --secure`): mirrors from SASL_SSL (SCRAM-SHA-512), SSL with mutual TLS and SASL_PLAINTEXT
//! (PLAIN) sources land identical on a plaintext destination; a wrong password fails the
//! mirror's partitions naming SASL_AUTHENTICATION_FAILED and a fixed one heals them; the
//! client's certificate checks (trust, host name, JKS); a TLS client listener with
//! librdkafka; a SASL destination with librdkafka clients authenticating through mirrorgate.
//!
//! Each secured cluster also has a PLAINTEXT listener, which the tests use to create topics,
//! produce data and verify; mirrorgate only ever gets the secured address.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::client::ClientSecurity;
use mirrorgate::mirror::verify::verify_partition;
use serde_json::Value;
use support::*;

const V: &str = "4.1.1";
const SCRAM512: &str = "SCRAM-SHA-512:alice:alice-secret-512";
const SCRAM256: &str = "SCRAM-SHA-256:carol:carol-secret-256";
const PLAIN: &str = "PLAIN:bob:bob-secret-plain";
const DEST_SCRAM: &str = "SCRAM-SHA-512:dave:dave-secret-dest";
/// Every secret used in this binary: none may appear in mirrorgate's logs or `--describe`.
const SECRETS: &[&str] =
    &["alice-secret-512", "carol-secret-256", "bob-secret-plain", "dave-secret-dest", "wrong-pw-9876"];

fn sasl_ssl() -> Arc<Cluster> {
    secure_cluster("sasl-ssl", "SASL_SSL", "none", &[SCRAM512, SCRAM256])
}

fn mtls() -> Arc<Cluster> {
    secure_cluster("mtls", "SSL", "required", &[])
}

fn sasl_plaintext() -> Arc<Cluster> {
    secure_cluster("sasl-plain", "SASL_PLAINTEXT", "none", &[PLAIN, DEST_SCRAM])
}

fn tls(c: &Cluster, file: &str) -> String {
    c.tls_dir.as_ref().expect("secure cluster").join(file).to_string_lossy().into_owned()
}

fn jaas(module: &str, user: &str, password: &str) -> String {
    format!(r#"org.apache.kafka.common.security.{module} required username="{user}" password="{password}";"#)
}

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

fn plain_client(bootstrap: &str) -> ClusterClient {
    block(ClusterClient::connect(ClusterOptions::new(vec![bootstrap.to_string()]))).unwrap()
}

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A ClusterClient to `bootstrap` with the Java client properties `p`.
fn secure_client(bootstrap: &str, p: &[(&str, &str)]) -> Result<ClusterClient, String> {
    let mut o = ClusterOptions::new(vec![bootstrap.to_string()]);
    o.security = ClientSecurity::from_properties(&props(p)).map_err(|e| e.to_string())?;
    o.max_attempts = 1;
    o.connect_timeout = Duration::from_secs(5);
    block(ClusterClient::connect(o)).map_err(|e| e.to_string())
}

fn create_topic(bootstrap: &str, topic: &str, partitions: u32) {
    let p = partitions.to_string();
    kafka_tool_ok(
        V,
        "topics",
        &[
            "--bootstrap-server",
            bootstrap,
            "--create",
            "--topic",
            topic,
            "--partitions",
            &p,
            "--replication-factor",
            "1",
        ],
        None,
    );
}

fn produce_mixed(bootstrap: &str, topic: &str, count: usize, codec: &str, seed: u32) {
    let (count, seed) = (count.to_string(), seed.to_string());
    ok(
        python_client(&[
            "produce-mixed",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--count",
            &count,
            "--codec",
            codec,
            "--seed",
            &seed,
        ]),
        "produce-mixed",
    );
}

/// A mirror config file: `bootstrap.servers` = the cluster's secured listener, then `lines`
/// (Java properties, values escaped by the caller).
fn secure_mirror_config(source: &Cluster, lines: &[String]) -> PathBuf {
    let dir = repo().join("target/test-mirrorgate");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.properties", unique_name("secure-mirror")));
    let mut text =
        format!("bootstrap.servers={}\nmirror.metadata.refresh.interval.ms=2000\n", source.secure.as_ref().unwrap());
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    path
}

fn create_and_start(mg: &Mirrorgate, cfg: &Path, topic: &str) -> String {
    let mirror = unique_name("m");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", topic]), "--start");
    mirror
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

fn describe_json(mg: &Mirrorgate, mirror: &str) -> Vec<Value> {
    let out = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", mirror, "--json"]), "--describe --json");
    serde_json::from_str::<Value>(&out).unwrap().as_array().unwrap().clone()
}

/// The broker's server.log of a one-node cluster started by `scripts/kafka.sh`.
fn broker_log(c: &Cluster) -> String {
    let state = std::env::var("MIRRORGATE_KAFKA_DIR").map(PathBuf::from).unwrap_or_else(|_| repo().join(".kafka"));
    std::fs::read_to_string(state.join(&c.name).join("node-1/server.log")).unwrap_or_default()
}

fn assert_no_secrets(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} contains the secret `{s}`");
    }
    assert!(!text.contains("BEGIN PRIVATE KEY"), "{what} contains a private key");
}

/// Sets mirror configs through mirrorgate (IncrementalAlterConfigs on CLUSTER_MIRROR, 64).
fn alter_mirror_configs(mg: &Mirrorgate, mirror: &str, configs: &[(&str, &str)]) {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let c = plain_client(&mg.bootstrap);
    let mut res = AlterConfigsResource::default();
    res.resource_type = 64;
    res.resource_name = StrBytes::from_string(mirror.to_string());
    res.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut a = AlterableConfig::default();
            a.name = StrBytes::from_string(k.to_string());
            a.value = Some(StrBytes::from_string(v.to_string()));
            a
        })
        .collect();
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![res];
    let resp = block(c.send_any(&req, 1)).unwrap();
    assert!(resp.responses.iter().all(|r| r.error_code == 0), "{resp:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_scram_sha_512_source_mirrors_identically_and_a_wrong_password_fails_then_heals() {
    let source = sasl_ssl();
    let dest = cluster("dest");
    let state_topic = unique_name("__mirror_state-secrets");
    let metrics_port = free_port_range(1);
    let metrics_yaml = format!("metrics:\n  listen: 127.0.0.1:{metrics_port}\n");
    let mg = Mirrorgate::start_with(
        &dest,
        MirrorgateOptions {
            state_topic: Some(&state_topic),
            extra_yaml: &metrics_yaml,
            ..MirrorgateOptions::default()
        },
    );
    let topic = unique_name("sasl-ssl");
    create_topic(&source.bootstrap, &topic, 3);
    produce_mixed(&source.bootstrap, &topic, 3000, "lz4", 1);
    let cfg = secure_mirror_config(
        &source,
        &[
            "security.protocol=SASL_SSL".into(),
            "sasl.mechanism=SCRAM-SHA-512".into(),
            format!("sasl.jaas.config={}", jaas("scram.ScramLoginModule", "alice", "alice-secret-512")),
            format!("ssl.truststore.location={}", tls(&source, "ca.pem")),
            "mirror.failed.retry.max.attempts=3".into(),
            "mirror.failed.retry.max.backoff.ms=2000".into(),
        ],
    );
    let mirror = create_and_start(&mg, &cfg, &topic);
    wait_identical(&source, &dest, &topic, 3, 3000);
    // A second mirror from another source cluster, with other credentials (SASL_PLAINTEXT,
    // PLAIN), runs side by side and must keep copying while the first one fails.
    let other = sasl_plaintext();
    let other_topic = unique_name("side-by-side");
    create_topic(&other.bootstrap, &other_topic, 1);
    produce_mixed(&other.bootstrap, &other_topic, 200, "none", 11);
    let other_cfg = secure_mirror_config(
        &other,
        &[
            "security.protocol=SASL_PLAINTEXT".into(),
            "sasl.mechanism=PLAIN".into(),
            format!("sasl.jaas.config={}", jaas("plain.PlainLoginModule", "bob", "bob-secret-plain")),
        ],
    );
    create_and_start(&mg, &other_cfg, &other_topic);
    wait_identical(&other, &dest, &other_topic, 1, 200);

    // The password changes to a wrong one: the source refuses, the partitions go FAILED
    // (retryable) naming the authentication error, nothing more is copied.
    let altered_at = std::time::Instant::now();
    alter_mirror_configs(
        &mg,
        &mirror,
        &[("sasl.jaas.config", &jaas("scram.ScramLoginModule", "alice", "wrong-pw-9876"))],
    );
    produce_mixed(&source.bootstrap, &topic, 500, "none", 2);
    let failed = eventually(Duration::from_secs(90), || {
        let rows = describe_json(&mg, &mirror);
        let all_failed = rows.len() == 3
            && rows.iter().all(|r| {
                r["state"] == "FAILED"
                    && r["errorMessage"].as_str().is_some_and(|m| m.contains("SASL_AUTHENTICATION_FAILED"))
            });
        all_failed.then_some(rows.clone()).ok_or(format!("{rows:?}"))
    });
    let msg = failed[0]["errorMessage"].as_str().unwrap().to_string();
    assert!(msg.contains("SCRAM-SHA-512") || msg.contains("authentication"), "{msg}");
    // Automatic retries stop at mirror.failed.retry.max.attempts (3): FAILED with 3 retries,
    // and no fourth.
    let capped = |rows: &Vec<Value>| {
        rows.len() == 3 && rows.iter().all(|r| r["state"] == "FAILED" && r["retryAttempt"].as_i64() == Some(3))
    };
    eventually(Duration::from_secs(120), || {
        let rows = describe_json(&mg, &mirror);
        capped(&rows).then_some(()).ok_or(format!("retries not at the cap of 3: {rows:?}"))
    });
    std::thread::sleep(Duration::from_secs(8));
    let rows = describe_json(&mg, &mirror);
    assert!(capped(&rows), "a retry beyond the cap: {rows:?}");
    // Meanwhile the other mirror copies what its source receives.
    produce_mixed(&other.bootstrap, &other_topic, 300, "none", 12);
    wait_identical(&other, &dest, &other_topic, 1, 500);
    // The failed connects are held back: the broker sees about one attempt per 5 s, not one
    // per 200 ms per partition (the data plane's reconcile pace).
    std::thread::sleep(Duration::from_secs(10));
    let window = altered_at.elapsed().as_secs_f64();
    let attempts = broker_log(&source).matches("Failed authentication with").count();
    assert!(attempts >= 1, "the broker saw no failed authentication");
    assert!(
        (attempts as f64) <= window / 5.0 * 2.0 + 4.0,
        "{attempts} failed authentications in {window:.0} s: a retry storm"
    );

    // Fixed: the partitions heal and copy what was produced meanwhile.
    alter_mirror_configs(
        &mg,
        &mirror,
        &[("sasl.jaas.config", &jaas("scram.ScramLoginModule", "alice", "alice-secret-512"))],
    );
    wait_identical(&source, &dest, &topic, 3, 3500);
    eventually(Duration::from_secs(120), || {
        let rows = describe_json(&mg, &mirror);
        (rows.len() == 3 && rows.iter().all(|r| r["state"] == "MIRRORING")).then_some(()).ok_or(format!("{rows:?}"))
    });
    let describe = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror, "--json"]), "--describe");
    assert_no_secrets("--describe --json", &describe);
    assert_no_secrets("mirrorgate's log", &mg.log());
    let metrics = http_get(metrics_port, "/metrics");
    assert_no_secrets("the Prometheus output", &metrics);
    // The KIP's authentication and connection metrics per source broker: the wrong password
    // counted failures, the right one successes, against the source's SASL_SSL listener.
    let secure_addr = source.secure.clone().unwrap();
    let counted = |needle: &str| {
        metrics
            .lines()
            .filter(|l| l.starts_with(needle) && l.contains(&secure_addr))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let auth_lines: Vec<&str> =
        metrics.lines().filter(|l| l.starts_with("mirrorgate_broker_authentications_total")).collect();
    assert!(
        auth_lines
            .iter()
            .any(|l| l.contains(&secure_addr) && l.contains("result=\"failure\"") && l.contains("SCRAM-SHA-512")),
        "no failed authentication counted for {secure_addr}: {auth_lines:?}"
    );
    assert!(auth_lines.iter().any(|l| l.contains(&secure_addr) && l.contains("result=\"success\"")), "{auth_lines:?}");
    assert!(counted("mirrorgate_broker_connections_created_total") >= 2.0, "connection creations not counted");
    // The raw state records, read from the destination directly: the credentials of every
    // version of the mirror's configs are there only encrypted.
    let raw = raw_partitions(&dest.bootstrap, &state_topic, 3);
    assert!(raw.contains("sasl.jaas.config"), "the mirror record was not found in the raw state topic");
    assert!(raw.contains("\"sasl.jaas.config\":\"enc:v1:"), "sasl.jaas.config is not stored encrypted");
    assert_no_secrets("the raw __mirror_state records", &raw);
}

/// `GET path` on `127.0.0.1:port`; the whole response as text.
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.contains("mirrorgate_"), "no mirrorgate metric in the Prometheus output: {}", tail(&out, 5));
    out
}

/// Every record batch of `partitions` partitions of `topic`, as (lossy) text.
fn raw_partitions(bootstrap: &str, topic: &str, partitions: i32) -> String {
    let c = plain_client(bootstrap);
    let mut text = String::new();
    for p in 0..partitions {
        let mut offset = 0;
        loop {
            let f = block(c.fetch(topic, p, offset, 1 << 20)).unwrap();
            if f.records.is_empty() || offset >= f.high_watermark {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&f.records));
            offset = f.high_watermark;
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_source_with_pkcs12_stores_mirrors_identically() {
    let source = mtls();
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("mtls");
    create_topic(&source.bootstrap, &topic, 2);
    produce_mixed(&source.bootstrap, &topic, 2000, "zstd", 3);

    // Without a client certificate the broker refuses the handshake: --start names TLS.
    let no_cert = secure_mirror_config(
        &source,
        &["security.protocol=SSL".into(), format!("ssl.truststore.location={}", tls(&source, "ca.pem"))],
    );
    let m = unique_name("m");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &m, "--mirror-config", no_cert.to_str().unwrap()]),
        "--create",
    );
    let out = mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &m, "--topics", &topic]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("TLS"), "start without a client certificate: {err}");

    let cfg = secure_mirror_config(
        &source,
        &[
            "security.protocol=SSL".into(),
            "ssl.truststore.type=PKCS12".into(),
            format!("ssl.truststore.location={}", tls(&source, "truststore.p12")),
            "ssl.truststore.password=changeit".into(),
            "ssl.keystore.type=PKCS12".into(),
            format!("ssl.keystore.location={}", tls(&source, "client.p12")),
            "ssl.keystore.password=changeit".into(),
        ],
    );
    create_and_start(&mg, &cfg, &topic);
    wait_identical(&source, &dest, &topic, 2, 2000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plaintext_plain_source_mirrors_identically() {
    let source = sasl_plaintext();
    let dest = cluster("dest");
    let state_topic = unique_name("__mirror_state-rotate");
    let opts = || MirrorgateOptions { state_topic: Some(&state_topic), ..MirrorgateOptions::default() };
    let mut mg = Mirrorgate::start_with(&dest, opts());
    let topic = unique_name("plain");
    create_topic(&source.bootstrap, &topic, 2);
    produce_mixed(&source.bootstrap, &topic, 2000, "gzip", 4);
    let cfg = secure_mirror_config(
        &source,
        &[
            "security.protocol=SASL_PLAINTEXT".into(),
            "sasl.mechanism=PLAIN".into(),
            format!("sasl.jaas.config={}", jaas("plain.PlainLoginModule", "bob", "bob-secret-plain")),
        ],
    );
    create_and_start(&mg, &cfg, &topic);
    wait_identical(&source, &dest, &topic, 2, 2000);
    assert_no_secrets("mirrorgate's log", &mg.log());

    // Key rotation (docs/security.md "Secrets at rest"): restart with a new
    // password_encoder_secret and the previous one as the old secret; the mirror's secret is
    // written again under the new key; a restart with the new key alone still authenticates.
    drop(mg);
    let new_key = "rotated-encoder-secret-51c2";
    let rotate = [
        ("MIRRORGATE__MIRROR_STATE__PASSWORD_ENCODER_SECRET", new_key),
        ("MIRRORGATE__MIRROR_STATE__PASSWORD_ENCODER_OLD_SECRET", TEST_ENCODER_SECRET),
    ];
    mg = Mirrorgate::start_with(&dest, MirrorgateOptions { env: &rotate, ..opts() });
    mg.wait_for_log("written again under the current password_encoder_secret", Duration::from_secs(60));
    drop(mg);
    let only_new = [("MIRRORGATE__MIRROR_STATE__PASSWORD_ENCODER_SECRET", new_key)];
    mg = Mirrorgate::start_with(&dest, MirrorgateOptions { env: &only_new, ..opts() });
    produce_mixed(&source.bootstrap, &topic, 500, "none", 5);
    wait_identical(&source, &dest, &topic, 2, 2500);
    assert!(!mg.log().contains("cannot decrypt"), "{}", tail(&mg.log(), 20));
    assert_no_secrets("mirrorgate's log", &mg.log());
    // With the old key alone the secret no longer opens: said in the log, never in clear.
    drop(mg);
    mg = Mirrorgate::start_with(&dest, opts());
    mg.wait_for_log("cannot decrypt a secret mirror config", Duration::from_secs(60));
    assert_no_secrets("mirrorgate's log", &mg.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificate_checks_and_mechanisms_against_real_brokers() {
    let s = sasl_ssl();
    let m = mtls();
    let secure_s = s.secure.clone().unwrap();
    let secure_m = m.secure.clone().unwrap();
    let port = |b: &str| b.rsplit_once(':').unwrap().1.to_string();
    let ca = tls(&s, "ca.pem");
    let scram256 = jaas("scram.ScramLoginModule", "carol", "carol-secret-256");
    let base = || -> Vec<(&'static str, String)> {
        vec![
            ("security.protocol", "SASL_SSL".into()),
            ("sasl.mechanism", "SCRAM-SHA-256".into()),
            ("sasl.jaas.config", scram256.clone()),
            ("ssl.truststore.location", ca.clone()),
        ]
    };
    let with = |extra: &[(&'static str, String)], bootstrap: &str| {
        let mut p = base();
        p.extend(extra.iter().cloned());
        let refs: Vec<(&str, &str)> = p.iter().map(|(k, v)| (*k, v.as_str())).collect();
        secure_client(bootstrap, &refs)
    };
    // SCRAM-SHA-256 at 127.0.0.1 and at `localhost` (both in the certificate).
    with(&[], &secure_s).expect("SCRAM-SHA-256 over TLS");
    with(&[], &format!("localhost:{}", port(&secure_s))).expect("localhost is in the certificate");
    // `vm` resolves to 127.0.0.1 (/etc/hosts) but is not in the certificate: refused with
    // https, accepted with host name checks off.
    let wrong_host = format!("vm:{}", port(&secure_s));
    if std::net::ToSocketAddrs::to_socket_addrs(&wrong_host.as_str()).is_ok() {
        let e = with(&[], &wrong_host).unwrap_err();
        assert!(e.contains("TLS") && e.contains("not valid for name"), "{e}");
        with(&[("ssl.endpoint.identification.algorithm", String::new())], &wrong_host).expect("host checks off");
    }
    // ssl.enabled.protocols and ssl.cipher.suites are honoured: TLS 1.2 with one RSA suite
    // works against the broker (RSA certificate); TLS 1.2 offered with TLS 1.3 suites only
    // cannot be configured; an unknown suite and TLSv1.1 are refused by name.
    with(
        &[
            ("ssl.enabled.protocols", "TLSv1.2".into()),
            ("ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into()),
        ],
        &secure_s,
    )
    .expect("TLSv1.2 with TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
    with(&[("ssl.enabled.protocols", "TLSv1.3".into())], &secure_s).expect("TLSv1.3 only");
    let e = with(
        &[("ssl.enabled.protocols", "TLSv1.2".into()), ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256".into())],
        &secure_s,
    )
    .unwrap_err();
    assert!(e.contains("ssl.enabled.protocols"), "{e}");
    let e = with(&[("ssl.cipher.suites", "TLS_RSA_WITH_RC4_128_SHA".into())], &secure_s).unwrap_err();
    assert!(e.contains("ssl.cipher.suites") && e.contains("TLS_AES_128_GCM_SHA256"), "{e}");
    let e = with(&[("ssl.enabled.protocols", "TLSv1.1".into())], &secure_s).unwrap_err();
    assert!(e.contains("obsolete"), "{e}");
    // A wrong password: SASL_AUTHENTICATION_FAILED with the broker's message, no password.
    let bad = jaas("scram.ScramLoginModule", "carol", "wrong-pw-9876");
    let e = with(&[("sasl.jaas.config", bad)], &secure_s).unwrap_err();
    assert!(e.contains("SASL_AUTHENTICATION_FAILED") && !e.contains("wrong-pw-9876"), "{e}");
    // An untrusted CA: the handshake fails, nothing is sent in clear.
    let other_ca = repo().join("target/test-mirrorgate").join(unique_name("other-ca"));
    std::fs::create_dir_all(&other_ca).unwrap();
    let st = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other"])
        .arg("-keyout")
        .arg(other_ca.join("k.pem"))
        .arg("-out")
        .arg(other_ca.join("ca.pem"))
        .output()
        .unwrap();
    assert!(st.status.success());
    let other = other_ca.join("ca.pem").to_string_lossy().into_owned();
    let e = with(&[("ssl.truststore.location", other)], &secure_s).unwrap_err();
    assert!(e.contains("TLS handshake failed") && e.contains("UnknownIssuer"), "{e}");
    // A JKS trust store is refused with the conversion command.
    let e = with(&[("ssl.truststore.location", tls(&s, "truststore.jks"))], &secure_s).unwrap_err();
    assert!(e.contains("keytool -importkeystore"), "{e}");
    // Mutual TLS with PEM strings (ssl.keystore.key / .certificate.chain /
    // ssl.truststore.certificates), then without a certificate (refused by the broker).
    let read = |f: &str| std::fs::read_to_string(tls(&m, f)).unwrap();
    let (key, chain, cas) = (read("client-pkcs8.key"), read("client-chain.pem"), read("ca.pem"));
    secure_client(
        &secure_m,
        &[
            ("security.protocol", "SSL"),
            ("ssl.truststore.certificates", &cas),
            ("ssl.keystore.key", &key),
            ("ssl.keystore.certificate.chain", &chain),
        ],
    )
    .expect("mutual TLS with PEM strings");
    let e = secure_client(&secure_m, &[("security.protocol", "SSL"), ("ssl.truststore.certificates", &cas)])
        .map(|_| ())
        .unwrap_err();
    assert!(e.contains("TLS") || e.contains("closed"), "no client certificate: {e}");
    // A plaintext client on a TLS listener and TLS on a plaintext one fail clearly.
    let e = secure_client(&secure_m, &[]).map(|_| ()).unwrap_err();
    assert!(!e.is_empty());
    let e = secure_client(&m.bootstrap, &[("security.protocol", "SSL"), ("ssl.truststore.certificates", &cas)])
        .map(|_| ())
        .unwrap_err();
    assert!(e.contains("TLS"), "TLS to a plaintext port: {e}");
}

/// mirrorgate's listener terminates TLS: librdkafka produces and consumes with and without
/// the client certificate the listener asks for; a plaintext client is closed with a log
/// line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_client_listener_with_librdkafka() {
    let certs = mtls();
    let dest = cluster("dest");
    let listener_yaml = format!(
        "    tls:\n      cert_file: {}\n      key_file: {}\n      client_auth: required\n      ca_file: {}\n",
        tls(&certs, "broker-chain.pem"),
        tls(&certs, "broker.key"),
        tls(&certs, "ca.pem")
    );
    let mg = Mirrorgate::start_in_front_of(
        &dest.bootstrap,
        FrontOptions { listener_yaml: &listener_yaml, ..FrontOptions::default() },
        MirrorgateOptions::default(),
    );
    let topic = unique_name("tls-listener");
    create_topic(&dest.bootstrap, &topic, 1);
    let ssl = [
        "security.protocol=SSL".to_string(),
        format!("ssl.ca.location={}", tls(&certs, "ca.pem")),
        format!("ssl.certificate.location={}", tls(&certs, "client.pem")),
        format!("ssl.key.location={}", tls(&certs, "client.key")),
    ];
    let mut produce = vec!["produce", "--bootstrap", &mg.bootstrap, "--topic", &topic, "--count", "50"];
    for p in &ssl {
        produce.extend(["--prop", p]);
    }
    ok(python_client(&produce), "produce over TLS with a client certificate");
    let group = unique_name("g");
    let mut consume = vec![
        "consume",
        "--bootstrap",
        &mg.bootstrap,
        "--topic",
        &topic,
        "--group",
        &group,
        "--count",
        "50",
        "--no-commit",
    ];
    for p in &ssl {
        consume.extend(["--prop", p]);
    }
    let out = ok(python_client(&consume), "consume over TLS");
    let offsets: Vec<i64> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["offset"].as_i64())
        .collect();
    assert_eq!(offsets, (0..50).collect::<Vec<_>>());

    // Without the client certificate the listener refuses the handshake.
    let no_cert = [
        "produce",
        "--bootstrap",
        &mg.bootstrap,
        "--topic",
        &topic,
        "--count",
        "1",
        "--timeout",
        "8",
        "--prop",
        "security.protocol=SSL",
        "--prop",
        &ssl[1],
    ];
    let out = python_client(&no_cert);
    assert!(!out.status.success(), "produced without a client certificate");
    // A plaintext client: closed, and the log says why.
    let out =
        python_client(&["produce", "--bootstrap", &mg.bootstrap, "--topic", &topic, "--count", "1", "--timeout", "5"]);
    assert!(!out.status.success(), "a plaintext client produced through a TLS listener");
    mg.wait_for_log("plaintext client on a TLS listener", Duration::from_secs(10));
    // The mirror CLI reaches the TLS admin listener with --command-config.
    let cli_config = |lines: &[String]| {
        let path = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("cmd")));
        std::fs::write(&path, lines.join("\n")).unwrap();
        path
    };
    let with_cert = cli_config(&[
        "security.protocol=SSL".into(),
        format!("ssl.truststore.location={}", tls(&certs, "ca.pem")),
        format!("ssl.keystore.location={}", tls(&certs, "client.p12")),
        "ssl.keystore.password=changeit".into(),
    ]);
    ok(mirrors_cli(&mg.bootstrap, &["--command-config", with_cert.to_str().unwrap(), "--list"]), "--list over TLS");
    let out = mirrors_cli(&mg.bootstrap, &["--list"]);
    assert!(!out.status.success(), "the CLI in plaintext reached a TLS listener");
    // Nothing but the 50 records arrived.
    let dst = plain_client(&dest.bootstrap);
    let end = block(dst.list_offsets(&topic, 0, -1)).unwrap();
    assert_eq!(end, 50);
}

/// A SASL_PLAINTEXT destination: mirrorgate's own connections authenticate with its
/// credentials (state store, a mirror from a SASL_SSL source copied into it); librdkafka
/// clients and the mirror CLI authenticate themselves through mirrorgate (their
/// SaslHandshake/SaslAuthenticate are forwarded to the broker).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_destination_clients_authenticate_through_mirrorgate() {
    let dest = sasl_plaintext();
    let destination_yaml = format!(
        "  security_protocol: SASL_PLAINTEXT\n  sasl_mechanism: PLAIN\n  sasl_jaas_config: '{}'\n",
        jaas("plain.PlainLoginModule", "bob", "bob-secret-plain")
    );
    let mg = Mirrorgate::start_in_front_of(
        dest.secure.as_ref().unwrap(),
        FrontOptions { destination_yaml: &destination_yaml, ..FrontOptions::default() },
        MirrorgateOptions::default(),
    );
    let topic = unique_name("sasl-client");
    create_topic(&dest.bootstrap, &topic, 1);
    let sasl = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512", "sasl.username=dave"];
    let mut produce = vec!["produce", "--bootstrap", &mg.bootstrap, "--topic", &topic, "--count", "20"];
    for p in sasl.iter().chain(["sasl.password=dave-secret-dest"].iter()) {
        produce.extend(["--prop", p]);
    }
    ok(python_client(&produce), "produce with SCRAM-SHA-512 through mirrorgate");
    let group = unique_name("g");
    let mut consume = vec![
        "consume",
        "--bootstrap",
        &mg.bootstrap,
        "--topic",
        &topic,
        "--group",
        &group,
        "--count",
        "20",
        "--no-commit",
    ];
    for p in sasl.iter().chain(["sasl.password=dave-secret-dest"].iter()) {
        consume.extend(["--prop", p]);
    }
    let out = ok(python_client(&consume), "consume with SCRAM-SHA-512 through mirrorgate");
    assert_eq!(out.lines().filter(|l| l.contains("\"offset\"")).count(), 20, "{out}");
    // A wrong password: the broker refuses it through mirrorgate; nothing is written.
    let mut bad = vec!["produce", "--bootstrap", &mg.bootstrap, "--topic", &topic, "--count", "1", "--timeout", "8"];
    for p in sasl.iter().chain(["sasl.password=wrong-pw-9876"].iter()) {
        bad.extend(["--prop", p]);
    }
    let out = python_client(&bad);
    assert!(!out.status.success(), "produced with a wrong password");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Authentication") || text.contains("SASL"), "{text}");
    let dst = plain_client(&dest.bootstrap);
    assert_eq!(block(dst.list_offsets(&topic, 0, -1)).unwrap(), 20);
    // The mirror CLI authenticates as its own user (forwarded to the broker); a wrong
    // password is refused by the broker.
    let cli_config = |password: &str| {
        let path = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("cmd")));
        let text = format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={}\n",
            jaas("scram.ScramLoginModule", "dave", password)
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let good = cli_config("dave-secret-dest");
    ok(mirrors_cli(&mg.bootstrap, &["--command-config", good.to_str().unwrap(), "--list"]), "--list with SCRAM");
    let bad = cli_config("wrong-pw-9876");
    let out = mirrors_cli(&mg.bootstrap, &["--command-config", bad.to_str().unwrap(), "--list"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("SASL_AUTHENTICATION_FAILED"), "{err}");
    assert!(!err.contains("wrong-pw-9876"), "{err}");
    // A mirror from a SASL_SSL source into this SASL destination: the data plane's appends
    // and the state store authenticate as mirrorgate.
    let source = sasl_ssl();
    let mirrored = unique_name("sasl-both");
    create_topic(&source.bootstrap, &mirrored, 2);
    produce_mixed(&source.bootstrap, &mirrored, 1500, "snappy", 5);
    let cfg = secure_mirror_config(
        &source,
        &[
            "security.protocol=SASL_SSL".into(),
            "sasl.mechanism=SCRAM-SHA-256".into(),
            format!("sasl.jaas.config={}", jaas("scram.ScramLoginModule", "carol", "carol-secret-256")),
            format!("ssl.truststore.location={}", tls(&source, "ca.pem")),
        ],
    );
    // The destination authenticates its clients, so mirrorgate answers the mirror commands
    // only to an authenticated one (issue 32).
    let mirror = unique_name("m");
    let create = ["--create", "--mirror", mirror.as_str(), "--mirror-config", cfg.to_str().unwrap()];
    let out = mirrors_cli(&mg.bootstrap, &create);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("SASL_AUTHENTICATION_FAILED"), "anonymous --create: {err}");
    let as_dave = |args: &[&str]| {
        let mut all = vec!["--command-config", good.to_str().unwrap()];
        all.extend(args);
        mirrors_cli(&mg.bootstrap, &all)
    };
    ok(as_dave(&create), "--create as dave");
    ok(as_dave(&["--start", "--mirror", &mirror, "--topics", &mirrored]), "--start as dave");
    wait_identical(&source, &dest, &mirrored, 2, 1500);
    assert_no_secrets("mirrorgate's log", &mg.log());
}

/// The certificate a TLS listener at `addr` serves, as openssl prints its subject.
fn served_subject(addr: &str) -> String {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {addr} -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -subject"
        ))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A renewed listener certificate is served to new connections without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_listener_certificate_is_served_without_a_restart() {
    let certs = mtls();
    let dest = cluster("dest");
    let dir = repo().join("target/test-mirrorgate").join(unique_name("listener-cert"));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::copy(tls(&certs, "broker-chain.pem"), &cert).unwrap();
    std::fs::copy(tls(&certs, "broker.key"), &key).unwrap();
    let listener_yaml = format!("    tls:\n      cert_file: {}\n      key_file: {}\n", cert.display(), key.display());
    let mg = Mirrorgate::start_in_front_of(
        &dest.bootstrap,
        FrontOptions { listener_yaml: &listener_yaml, ..FrontOptions::default() },
        MirrorgateOptions::default(),
    );
    assert!(served_subject(&mg.bootstrap).contains("CN = broker"), "{}", served_subject(&mg.bootstrap));
    // A half-written pair (new certificate, old key) is refused and the old pair kept.
    std::fs::copy(tls(&certs, "client-chain.pem"), &cert).unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    assert!(served_subject(&mg.bootstrap).contains("CN = broker"));
    mg.wait_for_log("changed listener certificate not usable", Duration::from_secs(10));
    std::fs::copy(tls(&certs, "client.key"), &key).unwrap();
    eventually(Duration::from_secs(10), || {
        let s = served_subject(&mg.bootstrap);
        s.contains("CN = client").then_some(()).ok_or(s)
    });
    mg.wait_for_log("listener certificate reloaded", Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_mirror_config_is_refused_without_an_encoder_key() {
    let source = sasl_plaintext();
    let dest = cluster("dest");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { encoder_secret: None, ..MirrorgateOptions::default() });
    let cfg = secure_mirror_config(
        &source,
        &[
            "security.protocol=SASL_PLAINTEXT".into(),
            "sasl.mechanism=PLAIN".into(),
            format!("sasl.jaas.config={}", jaas("plain.PlainLoginModule", "bob", "bob-secret-plain")),
        ],
    );
    let mirror = unique_name("m");
    let out = mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "a secret config was accepted without an encoder key: {text}");
    assert!(text.contains("INVALID_CONFIG") && text.contains("password_encoder_secret"), "{text}");
    assert_no_secrets("the refusal", &text);
    let listed = ok(mirrors_cli(&mg.bootstrap, &["--list"]), "--list");
    assert!(!listed.contains(&mirror), "the refused mirror exists: {listed}");
}

/// Mirror RPCs are authorized for the client's own principal from the destination's CLUSTER
/// ACLs (StandardAuthorizer): without ALTER, `--create` and `--stop` get
/// CLUSTER_AUTHORIZATION_FAILED; DESCRIBE lets `--list`/`--describe` through; granted, the
/// same commands succeed. A client without a topic ACL gets TOPIC_AUTHORIZATION_FAILED from
/// the broker through mirrorgate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_requests_are_authorized_for_the_client_principal() {
    let dest = secure_cluster_with(
        "authz",
        "SASL_PLAINTEXT",
        "none",
        &[
            "SCRAM-SHA-512:admin:admin-secret-acl",
            "SCRAM-SHA-512:erin:erin-secret-acl",
            "SCRAM-SHA-512:frank:frank-secret-acl",
        ],
        // Inter-broker and controller listeners are PLAINTEXT (ANONYMOUS), so it is a super
        // user; clients through mirrorgate reach only the SASL listener.
        &[
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin;User:ANONYMOUS",
        ],
    );
    let source = cluster("src");
    let destination_yaml = format!(
        "  security_protocol: SASL_PLAINTEXT\n  sasl_mechanism: SCRAM-SHA-512\n  sasl_jaas_config: '{}'\n",
        jaas("scram.ScramLoginModule", "admin", "admin-secret-acl")
    );
    let metrics_port = free_port_range(1);
    let metrics_yaml = format!(
        "metrics:\n  listen: 127.0.0.1:{metrics_port}\nauthorization:\n  super_users: [\"User:admin\", \"User:ANONYMOUS\"]\n"
    );
    let mg = Mirrorgate::start_in_front_of(
        dest.secure.as_ref().unwrap(),
        FrontOptions { destination_yaml: &destination_yaml, ..FrontOptions::default() },
        MirrorgateOptions { extra_yaml: &metrics_yaml, ..MirrorgateOptions::default() },
    );
    let as_user = |user: &str, password: &str| {
        let path = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name(user)));
        let text = format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={}\n",
            jaas("scram.ScramLoginModule", user, password)
        );
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (erin, frank) = (as_user("erin", "erin-secret-acl"), as_user("frank", "frank-secret-acl"));
    let acl = |args: &[&str]| {
        let mut all = vec!["--bootstrap-server", dest.bootstrap.as_str(), "--add"];
        all.extend(args);
        kafka_tool_ok("4.1.1", "acls", &all, None);
    };
    acl(&["--allow-principal", "User:frank", "--operation", "Describe", "--cluster"]);
    let topic = unique_name("authz");
    create_topic(&source.bootstrap, &topic, 1);
    produce_mixed(&source.bootstrap, &topic, 100, "none", 7);
    let mirror_cfg = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("authz-mirror")));
    std::fs::write(&mirror_cfg, format!("bootstrap.servers={}\n", source.bootstrap)).unwrap();
    let mirror = unique_name("m");
    let cli = |props: &str, args: &[&str]| {
        let mut all = vec!["--command-config", props];
        all.extend(args);
        let out = mirrors_cli(&mg.bootstrap, &all);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    };
    let create = ["--create", "--mirror", mirror.as_str(), "--mirror-config", mirror_cfg.to_str().unwrap()];
    let refused = |(ok, text): (bool, String), what: &str| {
        assert!(!ok && text.contains("CLUSTER_AUTHORIZATION_FAILED"), "{what}: {text}");
    };
    // The destination's super users (repeated in `authorization.super_users`) may do
    // anything; a client that did not authenticate is refused even though User:ANONYMOUS is
    // one of them: this destination authenticates its clients (issue 32).
    let admin = as_user("admin", "admin-secret-acl");
    let (listed, text) = cli(&admin, &["--list"]);
    assert!(listed, "--list by a super user: {text}");
    let out = mirrors_cli(&mg.bootstrap, &["--list"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("SASL_AUTHENTICATION_FAILED"), "anonymous --list: {err}");
    // erin has no ACL: neither changes nor reads.
    refused(cli(&erin, &create), "--create by erin (no ACL)");
    refused(cli(&erin, &["--describe", "--mirror", &mirror]), "--describe by erin (no ACL)");
    // frank has DESCRIBE: reads work, changes do not.
    let (ok_list, text) = cli(&frank, &["--list"]);
    assert!(ok_list, "--list by frank (DESCRIBE): {text}");
    refused(cli(&frank, &create), "--create by frank (DESCRIBE only)");
    assert!(mg.log().contains("User:frank"), "the refusal does not name the principal");
    // erin gets ALTER: create, start and stop succeed (the ACL view refreshes within 5 s);
    // frank still cannot stop.
    acl(&["--allow-principal", "User:erin", "--operation", "Alter", "--cluster"]);
    eventually(Duration::from_secs(30), || {
        let (ok, text) = cli(&erin, &create);
        ok.then_some(()).ok_or(text)
    });
    let (started, text) = cli(&erin, &["--start", "--mirror", &mirror, "--topics", &topic]);
    assert!(started, "--start by erin: {text}");
    refused(cli(&frank, &["--stop", "--mirror", &mirror, "--topics", &topic]), "--stop by frank");
    let (ok_describe, text) = cli(&frank, &["--describe", "--mirror", &mirror]);
    assert!(ok_describe && text.contains(&topic), "--describe by frank: {text}");
    let (stopped, text) = cli(&erin, &["--stop", "--mirror", &mirror, "--topics", &topic]);
    assert!(stopped, "--stop by erin: {text}");
    // The broker enforces topic ACLs on forwarded requests: frank may not write a topic.
    let dtopic = unique_name("authz-topic");
    create_topic(&dest.bootstrap, &dtopic, 1);
    let out = python_client(&[
        "produce",
        "--bootstrap",
        &mg.bootstrap,
        "--topic",
        &dtopic,
        "--count",
        "1",
        "--timeout",
        "10",
        "--prop",
        "security.protocol=SASL_PLAINTEXT",
        "--prop",
        "sasl.mechanism=SCRAM-SHA-512",
        "--prop",
        "sasl.username=frank",
        "--prop",
        "sasl.password=frank-secret-acl",
    ]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.to_ascii_uppercase().contains("TOPIC_AUTHORIZATION_FAILED"), "{text}");
    // A wrong password is refused by the broker through mirrorgate, and counted.
    let wrong = as_user("erin", "not-erins-password");
    let (ok_wrong, text) = cli(&wrong, &["--list"]);
    assert!(!ok_wrong, "--list with a wrong password: {text}");
    let metrics = http_get(metrics_port, "/metrics");
    let count = |result: &str| {
        metrics
            .lines()
            .filter(|l| l.starts_with("mirrorgate_client_authentications_total") && l.contains(result))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert!(count("result=\"success\"") >= 5.0, "client authentications not counted: {}", tail(&metrics, 40));
    assert!(count("result=\"failure\"") >= 1.0, "the failed client authentication was not counted");
}
