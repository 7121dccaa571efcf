//! TLS end to end with certificates the test makes (openssl): the mTLS subject as the
//! principal of the mirror RPCs against a destination with StandardAuthorizer, Java and
//! librdkafka clients with and without a client certificate on a listener that requests one,
//! and expired broker certificates on the source and on the destination (issue 11
//! acceptance); client connections never acting as mirrorgate's certificate on a destination
//! that requires client certificates (issue 32). Real Kafka 4.1 brokers.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use serde_json::Value;
use support::*;

const V: &str = "4.1.1";

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn sh(dir: &Path, script: &str) {
    let out = Command::new("sh").arg("-ec").arg(script).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "openssl script failed: {}\n{script}", text(&out));
}

fn fresh_dir(prefix: &str) -> PathBuf {
    let dir = repo().join("target/test-mirrorgate").join(unique_name(prefix));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A CA (`ca.pem`, `ca.key`) in `dir`.
fn make_ca(dir: &Path) {
    sh(
        dir,
        r#"openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 -subj "/CN=tls-test-ca" \
             -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null"#,
    );
}

/// A certificate `NAME.pem` (+ `NAME.key`, `NAME-chain.pem`, `NAME.p12` with password
/// `changeit`) for `subject`, valid for localhost and 127.0.0.1, signed by `dir`'s CA;
/// with `expired`, valid only in January 2024 (`openssl ca` backdates; OpenSSL 3.0 `x509`
/// cannot).
fn make_cert(dir: &Path, name: &str, subject: &str, expired: bool) {
    let dates = if expired {
        "printf '[ca]\\ndefault_ca=d\\n[d]\\ndatabase=./index.txt\\nnew_certs_dir=.\\nserial=./serial\\ndefault_md=sha256\\npolicy=p\\ncopy_extensions=copy\\nunique_subject=no\\n[p]\\ncommonName=supplied\\n' > ca.cnf
         : > index.txt; [ -f serial ] || echo 1000 > serial
         openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in NAME.csr -out NAME.pem -notext \
           -startdate 20240101000000Z -enddate 20240201000000Z 2>/dev/null"
    } else {
        "openssl x509 -req -in NAME.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out NAME.pem -days 30 -copy_extensions copy 2>/dev/null"
    };
    let script = format!(
        r#"openssl req -newkey rsa:2048 -nodes -keyout NAME.key -out NAME.csr -subj "{subject}" \
             -addext "basicConstraints=CA:FALSE" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
             -addext "extendedKeyUsage=serverAuth,clientAuth" 2>/dev/null
           {dates}
           cat NAME.pem ca.pem > NAME-chain.pem
           openssl pkcs12 -export -in NAME.pem -inkey NAME.key -certfile ca.pem -name NAME -out NAME.p12 -passout pass:changeit"#
    )
    .replace("NAME", name);
    sh(dir, &script);
}

fn path(dir: &Path, file: &str) -> String {
    dir.join(file).to_str().unwrap().to_string()
}

fn write_props(dir: &Path, name: &str, lines: &[String]) -> String {
    let p = dir.join(format!("{name}.properties"));
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p.to_str().unwrap().to_string()
}

/// Java client properties for TLS to a listener signed by `dir`'s CA, with the keystore of
/// `who` when given.
fn java_ssl(dir: &Path, who: Option<&str>) -> Vec<String> {
    let mut l = vec![
        "security.protocol=SSL".to_string(),
        "ssl.truststore.type=PEM".into(),
        format!("ssl.truststore.location={}", path(dir, "ca.pem")),
    ];
    if let Some(w) = who {
        l.extend([
            "ssl.keystore.type=PKCS12".into(),
            format!("ssl.keystore.location={}", path(dir, &format!("{w}.p12"))),
            "ssl.keystore.password=changeit".into(),
        ]);
    }
    l
}

/// librdkafka properties (`--prop` values) for the same.
fn rdkafka_ssl(dir: &Path, who: Option<&str>) -> Vec<String> {
    let mut l = vec!["security.protocol=SSL".to_string(), format!("ssl.ca.location={}", path(dir, "ca.pem"))];
    if let Some(w) = who {
        l.push(format!("ssl.certificate.location={}", path(dir, &format!("{w}.pem"))));
        l.push(format!("ssl.key.location={}", path(dir, &format!("{w}.key"))));
    }
    l
}

fn create_topic(bootstrap: &str, topic: &str, partitions: u32) {
    kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", &partitions.to_string()],
        None,
    );
}

fn plain_client(bootstrap: &str) -> ClusterClient {
    block(ClusterClient::connect(ClusterOptions::new(vec![bootstrap.to_string()]))).unwrap()
}

/// The mTLS subject is the principal of the mirror RPCs: `User:CN=ops,OU=eng,O=corp` (RFC
/// 2253, as Kafka's default principal builder gives it) has ALTER on the destination's
/// cluster and may create, start and stop; `User:CN=viewer,O=corp` has DESCRIBE and may
/// describe but not create; a client without a certificate (ANONYMOUS, no ACL) may do
/// neither. On the same listener (`client_auth: requested`), the Java console clients and
/// librdkafka produce and consume with and without a client certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_certificate_subject_is_the_mirror_rpc_principal() {
    let dir = fresh_dir("mtls-principal");
    make_ca(&dir);
    make_cert(&dir, "listener", "/CN=localhost", false);
    make_cert(&dir, "ops", "/O=corp/OU=eng/CN=ops", false);
    make_cert(&dir, "viewer", "/O=corp/CN=viewer", false);
    let dest = cluster_with(
        "authz-mtls",
        1,
        V,
        &[
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:ANONYMOUS",
        ],
    );
    let source = cluster("src");
    let listener_yaml = format!(
        "    tls:\n      cert_file: {}\n      key_file: {}\n      client_auth: requested\n      ca_file: {}\n",
        path(&dir, "listener-chain.pem"),
        path(&dir, "listener.key"),
        path(&dir, "ca.pem")
    );
    let mg = Mirrorgate::start_in_front_of(
        &dest.bootstrap,
        FrontOptions { listener_yaml: &listener_yaml, ..FrontOptions::default() },
        MirrorgateOptions::default(),
    );
    let acl = |principal: &str, op: &str| {
        kafka_tool_ok(
            V,
            "acls",
            &[
                "--bootstrap-server",
                &dest.bootstrap,
                "--add",
                "--allow-principal",
                principal,
                "--operation",
                op,
                "--cluster",
            ],
            None,
        );
    };
    acl("User:CN=ops,OU=eng,O=corp", "Alter");
    acl("User:CN=viewer,O=corp", "Describe");

    let topic = unique_name("mtls-authz");
    create_topic(&source.bootstrap, &topic, 1);
    kafka_tool_ok(
        V,
        "console-producer",
        &["--bootstrap-server", &source.bootstrap, "--topic", &topic],
        Some("a\nb\nc\n"),
    );
    let mirror_cfg = mirror_config_file(&source, "");
    let mirror = unique_name("m");
    let ops = write_props(&dir, "ops-cli", &java_ssl(&dir, Some("ops")));
    let viewer = write_props(&dir, "viewer-cli", &java_ssl(&dir, Some("viewer")));
    let anonymous = write_props(&dir, "anon-cli", &java_ssl(&dir, None));
    let cli = |props: &str, args: &[&str]| {
        let mut all = vec!["--command-config", props];
        all.extend(args);
        let out = mirrors_cli(&mg.bootstrap, &all);
        (out.status.success(), text(&out))
    };
    let refused = |(ok, t): (bool, String), what: &str| {
        assert!(!ok && t.contains("CLUSTER_AUTHORIZATION_FAILED"), "{what}: {t}");
    };
    let create = ["--create", "--mirror", mirror.as_str(), "--mirror-config", mirror_cfg.to_str().unwrap()];
    refused(cli(&viewer, &create), "--create by viewer (DESCRIBE only)");
    refused(cli(&anonymous, &["--list"]), "--list without a client certificate (no ACL)");
    assert!(mg.log().contains("User:CN=viewer,O=corp"), "the refusal does not name the certificate's principal");
    // The ACL view is re-read at most every 5 s; the ACLs were added before mirrorgate read them.
    let (created, t) = cli(&ops, &create);
    assert!(created, "--create by ops: {t}");
    let (started, t) = cli(&ops, &["--start", "--mirror", &mirror, "--topics", &topic]);
    assert!(started, "--start by ops: {t}");
    refused(cli(&viewer, &["--stop", "--mirror", &mirror, "--topics", &topic]), "--stop by viewer");
    let (described, t) = cli(&viewer, &["--describe", "--mirror", &mirror]);
    assert!(described && t.contains(&topic), "--describe by viewer: {t}");
    eventually(Duration::from_secs(60), || {
        let end = block(plain_client(&dest.bootstrap).list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        (end == 3).then_some(()).ok_or(format!("destination log end {end}"))
    });
    let (stopped, t) = cli(&ops, &["--stop", "--mirror", &mirror, "--topics", &topic]);
    assert!(stopped, "--stop by ops: {t}");

    // Clients with and without a certificate on the `requested` listener.
    let data = unique_name("tls-requested");
    create_topic(&dest.bootstrap, &data, 1);
    for who in [Some("ops"), None] {
        let tag = who.unwrap_or("none");
        let cfg = write_props(&dir, &format!("java-{tag}"), &java_ssl(&dir, who));
        kafka_tool_ok(
            V,
            "console-producer",
            &["--bootstrap-server", &mg.bootstrap, "--topic", &data, "--producer.config", &cfg],
            Some(&format!("java-{tag}-1\njava-{tag}-2\n")),
        );
        let mut args = vec![
            "produce".to_string(),
            "--bootstrap".into(),
            mg.bootstrap.clone(),
            "--topic".into(),
            data.clone(),
            "--count".into(),
            "2".into(),
            "--prefix".into(),
            format!("rdkafka-{tag}"),
        ];
        for p in rdkafka_ssl(&dir, who) {
            args.extend(["--prop".into(), p]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(python_client(&args), &format!("librdkafka produce ({tag})"));
    }
    for who in [Some("viewer"), None] {
        let tag = who.unwrap_or("none");
        let cfg = write_props(&dir, &format!("java-consumer-{tag}"), &java_ssl(&dir, who));
        let out = kafka_tool_ok(
            V,
            "console-consumer",
            &[
                "--bootstrap-server",
                &mg.bootstrap,
                "--topic",
                &data,
                "--from-beginning",
                "--max-messages",
                "8",
                "--timeout-ms",
                "30000",
                "--consumer.config",
                &cfg,
            ],
            None,
        );
        let mut got: Vec<&str> = out.lines().collect();
        got.sort();
        let want = [
            "java-none-1",
            "java-none-2",
            "java-ops-1",
            "java-ops-2",
            "rdkafka-none-0",
            "rdkafka-none-1",
            "rdkafka-ops-0",
            "rdkafka-ops-1",
        ];
        assert_eq!(got, want, "Java consumer ({tag})");
        let group = unique_name("g");
        let mut args = vec![
            "consume".to_string(),
            "--bootstrap".into(),
            mg.bootstrap.clone(),
            "--topic".into(),
            data.clone(),
            "--group".into(),
            group,
            "--count".into(),
            "8".into(),
            "--no-commit".into(),
        ];
        for p in rdkafka_ssl(&dir, who) {
            args.extend(["--prop".into(), p]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ok(python_client(&args), &format!("librdkafka consume ({tag})"));
        let offsets: Vec<i64> = out
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["offset"].as_i64())
            .collect();
        assert_eq!(offsets, (0..8).collect::<Vec<_>>(), "librdkafka consumer ({tag})");
    }
}

/// Replaces the broker certificate of one-node secure cluster `c` with an expired one signed
/// by the same CA, and restarts the node so that it serves it.
fn expire_broker_certificate(c: &Cluster) {
    let tls = c.tls_dir.clone().expect("secure cluster");
    make_cert(&tls, "expired", "/CN=broker", true);
    std::fs::copy(tls.join("expired.p12"), tls.join("broker.p12")).unwrap();
    for cmd in ["stop-node", "start-node"] {
        let out = Command::new(repo().join("scripts/kafka.sh")).args([cmd, &c.name, "1"]).output().unwrap();
        assert!(out.status.success(), "kafka.sh {cmd}: {}", text(&out));
    }
}

/// A source broker whose certificate expires while a mirror copies from it: the mirror's
/// partitions go FAILED with an error naming the expiry in `--describe` and the log, and no
/// record written after the expiry reaches the destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_source_certificate_fails_the_mirror_and_nothing_is_copied() {
    let source = secure_cluster("expiring-src", "SSL", "none", &[]);
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("expiring");
    create_topic(&source.bootstrap, &topic, 1);
    kafka_tool_ok(
        V,
        "console-producer",
        &["--bootstrap-server", &source.bootstrap, "--topic", &topic],
        Some("1\n2\n3\n"),
    );
    let tls = source.tls_dir.clone().unwrap();
    let cfg = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("expiring")));
    std::fs::write(
        &cfg,
        format!(
            "bootstrap.servers={}\nsecurity.protocol=SSL\nssl.truststore.location={}\nmirror.failed.retry.max.attempts=2\n",
            source.secure.as_ref().unwrap(),
            path(&tls, "ca.pem")
        ),
    )
    .unwrap();
    let mirror = unique_name("m");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    let dst = plain_client(&dest.bootstrap);
    eventually(Duration::from_secs(60), || {
        let end = block(dst.list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        (end == 3).then_some(()).ok_or(format!("destination log end {end}"))
    });

    expire_broker_certificate(&source);
    kafka_tool_ok(V, "console-producer", &["--bootstrap-server", &source.bootstrap, "--topic", &topic], Some("4\n5\n"));
    let failed = eventually(Duration::from_secs(120), || {
        let parts = describe_json(&mg, &mirror);
        let p = parts.first().ok_or("no partition")?.clone();
        (p["state"] == "FAILED").then_some(p.clone()).ok_or(format!("{p}"))
    });
    let message = failed["errorMessage"].as_str().unwrap_or_default().to_string();
    assert!(
        message.contains("the broker's certificate expired on Thu, 01 Feb 2024 00:00:00 GMT"),
        "--describe errorMessage does not name the expiry: {failed}"
    );
    let log = mg.log();
    assert!(
        log.lines().any(|l| l.contains("the broker's certificate expired on Thu, 01 Feb 2024")),
        "the log does not name the expiry:\n{}",
        tail(&log, 30)
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(block(dst.list_offsets(&topic, 0, -1)).unwrap(), 3, "records were copied after the expiry");
}

/// A destination broker with an expired certificate: mirrorgate does not start, and its log
/// names the expiry.
#[test]
fn an_expired_destination_certificate_stops_mirrorgate_at_startup() {
    let dest = secure_cluster("expired-dst", "SSL", "none", &[]);
    expire_broker_certificate(&dest);
    let tls = dest.tls_dir.clone().unwrap();
    let dir = fresh_dir("expired-dst");
    let port = free_port_range(12);
    let yaml = format!(
        "destination:\n  bootstrap_servers: {}\n  security_protocol: SSL\n  ssl_truststore_location: {}\nlisteners:\n  - name: test\n    bind_host: 127.0.0.1\n    advertised_host: 127.0.0.1\n    port_range: {port}-{}\nmirror_state:\n  topic: {}\n  password_encoder_secret: {TEST_ENCODER_SECRET}\n",
        dest.secure.as_ref().unwrap(),
        path(&tls, "ca.pem"),
        port + 11,
        unique_name("__mirror_state-expired")
    );
    let cfg = dir.join("proxy.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    let started = Instant::now();
    let out = run(
        {
            let mut c = Command::new(env!("CARGO_BIN_EXE_mirrorgate"));
            c.args(["run", "--startup-timeout-secs", "6", "--config"]).arg(&cfg).env_remove("RUST_LOG");
            c
        },
        None,
        Duration::from_secs(90),
    );
    let t = text(&out);
    assert!(!out.status.success(), "mirrorgate started against an expired destination certificate: {t}");
    assert!(started.elapsed() < Duration::from_secs(80), "mirrorgate was killed by the test timeout: {t}");
    assert!(
        t.contains("the broker's certificate expired on Thu, 01 Feb 2024")
            && t.contains("refused mirrorgate's TLS or SASL connection")
            && !t.contains("mirrorgate ready"),
        "the error does not name the expiry: {}",
        tail(&t, 20)
    );
}

/// Runs `mirrorgate run` on `yaml` expecting it to stop by itself at startup; its output.
fn run_expecting_refusal(yaml: &str, what: &str) -> String {
    let cfg = fresh_dir(what).join("proxy.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    let started = Instant::now();
    let mut c = Command::new(env!("CARGO_BIN_EXE_mirrorgate"));
    c.args(["run", "--startup-timeout-secs", "6", "--config"]).arg(&cfg).env_remove("RUST_LOG");
    let out = run(c, None, Duration::from_secs(60));
    let t = text(&out);
    assert!(!out.status.success() && !t.contains("mirrorgate ready"), "{what}: mirrorgate started: {}", tail(&t, 20));
    assert!(started.elapsed() < Duration::from_secs(55), "{what}: mirrorgate was killed by the test timeout: {t}");
    t
}

/// Issue 32: an SSL destination that requires client certificates and authorizes
/// (StandardAuthorizer; mirrorgate's own certificate, `User:CN=client`, is a super user).
/// Client connections never act at the broker as mirrorgate's principal:
/// - without `destination.client_upstream`, mirrorgate refuses to start and says why (on
///   earlier code it started and presented its own certificate for every client);
/// - with a separate certificate (`User:CN=proxied-clients,O=corp`, no ACL) it starts; a client
///   through it may not create a topic nor write one — both of which mirrorgate's principal
///   may — until an ACL grants that principal WRITE, and then it may write but still not
///   create.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_connections_never_act_as_mirrorgates_certificate_on_a_mtls_destination() {
    let dest = secure_cluster_with(
        "mtls-upstream",
        "SSL",
        "required",
        &[],
        &[
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:ANONYMOUS;User:CN=client",
        ],
    );
    let tls = dest.tls_dir.clone().unwrap();
    let secure = dest.secure.clone().unwrap();
    let own = format!(
        "  security_protocol: SSL\n  ssl_truststore_location: {}\n  ssl_keystore_location: {}\n  ssl_keystore_password: changeit\n",
        path(&tls, "ca.pem"),
        path(&tls, "client.p12")
    );
    // No separate identity: refused at startup, naming the requirement and the way out.
    let port = free_port_range(12);
    let yaml = format!(
        "destination:\n  bootstrap_servers: {secure}\n{own}listeners:\n  - name: test\n    bind_host: 127.0.0.1\n    port_range: {port}-{}\nmirror_state:\n  topic: {}\n  password_encoder_secret: {TEST_ENCODER_SECRET}\n",
        port + 11,
        unique_name("__mirror_state-upstream")
    );
    let t = run_expecting_refusal(&yaml, "mtls-no-upstream");
    assert!(
        t.contains("requires client certificates (ssl.client.auth=required)")
            && t.contains("never present mirrorgate's own certificate")
            && t.contains("destination.client_upstream"),
        "the refusal does not explain itself: {}",
        tail(&t, 20)
    );
    // The same principal as mirrorgate's own certificate under another file: refused too.
    let same = format!(
        "{own}  client_upstream:\n    ssl_keystore_type: PEM\n    ssl_keystore_location: {}\n",
        path(&tls, "client-combined.pem")
    );
    std::fs::write(
        tls.join("client-combined.pem"),
        std::fs::read_to_string(tls.join("client-pkcs8.key")).unwrap()
            + &std::fs::read_to_string(tls.join("client-chain.pem")).unwrap(),
    )
    .unwrap();
    let t = run_expecting_refusal(&yaml.replace(&own, &same), "mtls-same-upstream");
    assert!(t.contains("User:CN=client, the principal of mirrorgate's own certificate"), "{}", tail(&t, 20));

    // A separate, low-privilege certificate signed by the broker's CA.
    make_cert(&tls, "proxied", "/O=corp/CN=proxied-clients", false);
    let with_upstream = format!(
        "{own}  client_upstream:\n    ssl_keystore_location: {}\n    ssl_keystore_password: changeit\n",
        path(&tls, "proxied.p12")
    );
    let mg = Mirrorgate::start_in_front_of(
        &secure,
        FrontOptions { destination_yaml: &with_upstream, ..FrontOptions::default() },
        MirrorgateOptions::default(),
    );
    assert!(
        mg.log()
            .lines()
            .any(|l| l.contains("client connections reach the destination")
                && l.contains("User:CN=proxied-clients,O=corp")),
        "{}",
        tail(&mg.log(), 20)
    );
    // Creating a topic: mirrorgate's principal may (the state topic is there), a client
    // through mirrorgate may not.
    let created = unique_name("upstream-create");
    let out = kafka_tool(V, "topics", &["--bootstrap-server", &mg.bootstrap, "--create", "--topic", &created], None);
    let t = text(&out);
    assert!(!out.status.success() && t.contains("Authorization"), "topic created through mirrorgate: {t}");
    let listed = kafka_tool_ok(V, "topics", &["--bootstrap-server", &dest.bootstrap, "--list"], None);
    assert!(!listed.lines().any(|l| l.trim() == created), "the topic exists on the destination: {listed}");
    // Writing a topic: refused until the client principal, not mirrorgate's, gets WRITE.
    let topic = unique_name("upstream-write");
    create_topic(&dest.bootstrap, &topic, 1);
    let produce = || {
        let out = python_client(&[
            "produce",
            "--bootstrap",
            &mg.bootstrap,
            "--topic",
            &topic,
            "--count",
            "3",
            "--timeout",
            "15",
        ]);
        (out.status.success(), text(&out))
    };
    let (ok_before, t) = produce();
    assert!(!ok_before && t.to_ascii_uppercase().contains("TOPIC_AUTHORIZATION_FAILED"), "produce without an ACL: {t}");
    let principal = "User:CN=proxied-clients,O=corp";
    for op in ["Write", "Describe"] {
        kafka_tool_ok(
            V,
            "acls",
            &[
                "--bootstrap-server",
                &dest.bootstrap,
                "--add",
                "--allow-principal",
                principal,
                "--operation",
                op,
                "--topic",
                &topic,
            ],
            None,
        );
    }
    eventually(Duration::from_secs(30), || {
        let (ok, t) = produce();
        ok.then_some(()).ok_or(t)
    });
    let end = block(plain_client(&dest.bootstrap).list_offsets(&topic, 0, -1)).unwrap();
    assert!(end >= 3, "records written as {principal}: log end {end}");
}
