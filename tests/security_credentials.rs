//! Credentials bound to where they were given (issue 32), against a real Kafka 4.1 broker with
//! a SASL_PLAINTEXT listener (PLAIN and SCRAM users):
//! - changing a SASL mirror's `bootstrap.servers` without the password is refused
//!   (INVALID_CONFIG naming the rule) and the new address, a recording relay the test starts,
//!   hears nothing, although the mirror reconnects meanwhile; with the password given again
//!   the change is accepted and the new address gets the connection;
//! - `security.protocol`, `sasl.mechanism`, `ssl.truststore.location` and
//!   `ssl.endpoint.identification.algorithm` changes are refused the same way and leave the
//!   mirror unchanged;
//! - OAuth token endpoints outside proxy.yaml's `mirrors.sasl_oauthbearer_allowed_urls` are
//!   refused at `--create` and at alter (and the refused endpoint hears nothing); without the
//!   list, a mirror keeps the endpoint it was created with.
//!
//! mirrorgate fronts the cluster's PLAINTEXT listener, and the mirrors' source is the same
//! cluster's SASL listener (no topic is mirrored: the metadata sync connects to the source
//! every `mirror.metadata.refresh.interval.ms`, which is all these tests need).

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::IncrementalAlterConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use support::*;

const PLAIN_PW: &str = "bob-bound-secret-4101";
const SCRAM_PW: &str = "dave-bound-secret-4102";
const INVALID_CONFIG: i16 = 40;

/// The cluster: PLAIN `bob` and SCRAM-SHA-512 `dave` on its SASL_PLAINTEXT listener, which
/// also offers OAUTHBEARER (Kafka's default, unsecured validator: these tests only need a
/// mirror to get past the SaslHandshake to its token request).
fn source() -> Arc<Cluster> {
    let plain = format!("PLAIN:bob:{PLAIN_PW}");
    let scram = format!("SCRAM-SHA-512:dave:{SCRAM_PW}");
    let props = [
        "listener.name.secure.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.secure.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
    ];
    secure_cluster_with("creds", "SASL_PLAINTEXT", "none", &[&plain, &scram], &props)
}

fn plain_jaas(password: &str) -> String {
    format!(r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="{password}";"#)
}

/// A TCP endpoint on 127.0.0.1 that records every byte clients send it and, with a target,
/// relays each connection there (both ways); without one it only listens.
struct Relay {
    addr: String,
    received: Arc<Mutex<Vec<u8>>>,
    connections: Arc<AtomicUsize>,
}

impl Relay {
    fn start(target: Option<String>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (received, connections) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicUsize::new(0)));
        let (rec, conns) = (received.clone(), connections.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                conns.fetch_add(1, Ordering::SeqCst);
                let upstream = target.as_ref().and_then(|t| TcpStream::connect(t).ok());
                if let Some(up) = &upstream {
                    let (mut from, mut to) = (up.try_clone().unwrap(), client.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
                let (rec, mut client, mut upstream) = (rec.clone(), client, upstream);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n) = client.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        rec.lock().unwrap().extend_from_slice(&buf[..n]);
                        if let Some(up) = upstream.as_mut() {
                            if up.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                    if let Some(up) = upstream {
                        let _ = up.shutdown(std::net::Shutdown::Both);
                    }
                });
            }
        });
        Self { addr, received, connections }
    }

    fn received(&self) -> Vec<u8> {
        self.received.lock().unwrap().clone()
    }

    fn saw(&self, needle: &str) -> bool {
        self.received().windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn config_file(lines: &[String]) -> PathBuf {
    let dir = repo().join("target/test-mirrorgate");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.properties", unique_name("bound")));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// `--create` with `lines`: whether it succeeded, and its output.
fn create(mg: &Mirrorgate, mirror: &str, lines: &[String]) -> (bool, String) {
    let cfg = config_file(lines);
    let out = mirrors_cli(&mg.bootstrap, &["--create", "--mirror", mirror, "--mirror-config", cfg.to_str().unwrap()]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// One IncrementalAlterConfigs on the mirror resource (SET, or DELETE for `None`): its error
/// code and message.
fn alter(mg: &Mirrorgate, mirror: &str, configs: &[(&str, Option<&str>)]) -> (i16, String) {
    let res = AlterConfigsResource::default()
        .with_resource_type(64)
        .with_resource_name(StrBytes::from_string(mirror.into()))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    AlterableConfig::default()
                        .with_name(StrBytes::from_string(k.to_string()))
                        .with_config_operation(if v.is_some() { 0 } else { 1 })
                        .with_value(v.map(|v| StrBytes::from_string(v.to_string())))
                })
                .collect(),
        );
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![res]);
    let resp = block(async {
        let mut conn = connect(mg).await;
        conn.send(&req, 1).await.unwrap()
    });
    let r = &resp.responses[0];
    (r.error_code, r.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default())
}

fn config(mg: &Mirrorgate, mirror: &str, key: &str) -> Option<String> {
    block(describe_mirror_configs(mg, mirror)).get(key).cloned().flatten()
}

fn assert_refused(got: (i16, String), key: &str) {
    assert_eq!(got.0, INVALID_CONFIG, "{got:?}");
    assert!(
        got.1.contains(&format!("`{key}`")) && got.1.contains("credentials are bound to where they were given"),
        "{key}: {got:?}"
    );
}

/// The relay `via` sees a connection it had not seen when this was called: the mirror has
/// built a new source client (after an alter) and connected with its current settings.
fn wait_for_reconnect(via: &Relay, what: &str) {
    let before = via.connections();
    eventually(Duration::from_secs(60), || {
        let now = via.connections();
        (now > before).then_some(()).ok_or(format!("{what}: {now} connection(s) through the relay"))
    });
}

/// A PLAIN mirror reaches its source through relay A. Moving `bootstrap.servers` to relay B
/// without the password is refused (INVALID_CONFIG naming the rule); the mirror then
/// reconnects through A (a `client.id` change rebuilds its client) and B has still heard
/// nothing. With the password given again the move is accepted and B gets the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_a_sasl_mirror_needs_its_password_and_the_new_address_hears_nothing_before() {
    let src = source();
    let secure = src.secure.clone().unwrap();
    let mg = Mirrorgate::start(&src);
    let (a, b) = (Relay::start(Some(secure.clone())), Relay::start(Some(secure.clone())));
    let mirror = unique_name("bound");
    let (created, text) = create(
        &mg,
        &mirror,
        &[
            format!("bootstrap.servers={}", a.addr),
            "security.protocol=SASL_PLAINTEXT".into(),
            "sasl.mechanism=PLAIN".into(),
            format!("sasl.jaas.config={}", plain_jaas(PLAIN_PW)),
            "mirror.metadata.refresh.interval.ms=1000".into(),
        ],
    );
    assert!(created, "--create: {text}");
    eventually(Duration::from_secs(60), || {
        a.saw(PLAIN_PW).then_some(()).ok_or("no PLAIN exchange through A yet".to_string())
    });

    assert_refused(alter(&mg, &mirror, &[("bootstrap.servers", Some(&b.addr))]), "bootstrap.servers");
    assert_eq!(config(&mg, &mirror, "bootstrap.servers").as_deref(), Some(a.addr.as_str()));
    // A later change the rule allows: the mirror's client is rebuilt and connects again, still
    // through A.
    assert_eq!(alter(&mg, &mirror, &[("client.id", Some("bound-test"))]), (0, String::new()));
    wait_for_reconnect(&a, "after the allowed change");
    assert_eq!((b.connections(), b.received().len()), (0, 0), "the refused address was contacted");

    // The operator's move, with the password again: accepted, and B gets the connection.
    let jaas = plain_jaas(PLAIN_PW);
    let moved = alter(&mg, &mirror, &[("bootstrap.servers", Some(&b.addr)), ("sasl.jaas.config", Some(&jaas))]);
    assert_eq!(moved, (0, String::new()));
    eventually(Duration::from_secs(60), || {
        b.saw(PLAIN_PW).then_some(()).ok_or("no connection through B yet".to_string())
    });
    assert_no_secret(&mg);
}

/// Other keys that decide where credentials go: `security.protocol` (TLS or not),
/// `sasl.mechanism`, the trusted CAs and host name verification. Each change alone is
/// refused on a SCRAM mirror and leaves it as it was (it keeps reconnecting through the same
/// relay, whose bytes never hold the password); with the password given again it is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_mechanism_and_trust_changes_need_the_password_too() {
    let src = source();
    let mg = Mirrorgate::start(&src);
    let via = Relay::start(src.secure.clone());
    let mirror = unique_name("bound-scram");
    let scram_jaas = format!(
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="dave" password="{SCRAM_PW}";"#
    );
    let (created, text) = create(
        &mg,
        &mirror,
        &[
            format!("bootstrap.servers={}", via.addr),
            "security.protocol=SASL_PLAINTEXT".into(),
            "sasl.mechanism=SCRAM-SHA-512".into(),
            format!("sasl.jaas.config={scram_jaas}"),
            "mirror.metadata.refresh.interval.ms=1000".into(),
        ],
    );
    assert!(created, "--create: {text}");
    wait_for_reconnect(&via, "first connect");
    let ca = repo().join("target/test-mirrorgate/some-other-ca.pem");
    let ca = ca.to_string_lossy().to_string();
    for (key, value) in [
        ("security.protocol", Some("SASL_SSL")),
        ("sasl.mechanism", Some("SCRAM-SHA-256")),
        ("ssl.truststore.location", Some(ca.as_str())),
        ("ssl.endpoint.identification.algorithm", Some("")),
    ] {
        assert_refused(alter(&mg, &mirror, &[(key, value)]), key);
    }
    let configs = block(describe_mirror_configs(&mg, &mirror));
    assert_eq!(configs["security.protocol"].as_deref(), Some("SASL_PLAINTEXT"));
    assert_eq!(configs["sasl.mechanism"].as_deref(), Some("SCRAM-SHA-512"));
    assert_eq!(configs["ssl.truststore.location"], None);
    assert_eq!(configs["ssl.endpoint.identification.algorithm"].as_deref(), Some("https"));
    assert_eq!(alter(&mg, &mirror, &[("client.id", Some("bound-scram"))]), (0, String::new()));
    wait_for_reconnect(&via, "after the allowed change");
    assert!(!via.saw(SCRAM_PW), "the SCRAM password crossed the relay");
    // With the password given again: accepted (SCRAM-SHA-256 with the same SCRAM login module).
    let jaas = scram_jaas.as_str();
    let changed = alter(&mg, &mirror, &[("sasl.mechanism", Some("SCRAM-SHA-256")), ("sasl.jaas.config", Some(jaas))]);
    assert_eq!(changed, (0, String::new()));
    assert_eq!(config(&mg, &mirror, "sasl.mechanism").as_deref(), Some("SCRAM-SHA-256"));
    assert_no_secret(&mg);
}

const OAUTH_JAAS: &str = r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="bound" clientSecret="bound-client-secret-4103";"#;
const URL_KEY: &str = "sasl.oauthbearer.token.endpoint.url";

/// An OAUTHBEARER mirror of the cluster with token endpoint `url` (short token request
/// timeouts: the test's endpoints never answer).
fn oauth_lines(src: &Cluster, url: &str) -> Vec<String> {
    vec![
        format!("bootstrap.servers={}", src.secure.as_ref().unwrap()),
        "security.protocol=SASL_PLAINTEXT".into(),
        "sasl.mechanism=OAUTHBEARER".into(),
        format!("{URL_KEY}={url}"),
        format!("sasl.jaas.config={OAUTH_JAAS}"),
        "sasl.login.connect.timeout.ms=500".into(),
        "sasl.login.read.timeout.ms=500".into(),
        "sasl.login.retry.backoff.ms=0".into(),
        "sasl.login.retry.backoff.max.ms=0".into(),
        "mirror.metadata.refresh.interval.ms=1000".into(),
    ]
}

/// With `mirrors.sasl_oauthbearer_allowed_urls` set, a token endpoint outside it is refused
/// at `--create` and at alter (client secret given or not); a listed one is accepted, with the
/// client secret. Without the list, a mirror keeps the endpoint it was created with. Each time,
/// the mirror goes on asking its own endpoint (a listener the test starts) for tokens, and the
/// refused endpoint (another one) never hears a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_endpoints_outside_the_allow_list_are_refused_at_create_and_at_alter() {
    let src = source();
    let (own, outside) = (Relay::start(None), Relay::start(None));
    let (own_url, outside_url) = (format!("http://{}/token", own.addr), format!("http://{}/token", outside.addr));
    let listed = "http://127.0.0.1:9/token-dr";
    let yaml = format!("mirrors:\n  sasl_oauthbearer_allowed_urls: \"{own_url}, {listed}\"\n");
    let mg = Mirrorgate::start_with(&src, MirrorgateOptions { extra_yaml: &yaml, ..MirrorgateOptions::default() });

    let mirror = unique_name("bound-oauth");
    let (created, text) = create(&mg, &mirror, &oauth_lines(&src, &outside_url));
    assert!(
        !created && text.contains("INVALID_CONFIG") && text.contains("mirrors.sasl_oauthbearer_allowed_urls"),
        "--create with an endpoint outside the list: {text}"
    );
    let (created, text) = create(&mg, &mirror, &oauth_lines(&src, &own_url));
    assert!(created, "--create with a listed endpoint: {text}");
    let refused = alter(&mg, &mirror, &[(URL_KEY, Some(&outside_url)), ("sasl.jaas.config", Some(OAUTH_JAAS))]);
    assert_eq!(refused.0, INVALID_CONFIG, "{refused:?}");
    assert!(refused.1.contains("is not in proxy.yaml's mirrors.sasl_oauthbearer_allowed_urls"), "{refused:?}");
    assert_eq!(config(&mg, &mirror, URL_KEY).as_deref(), Some(own_url.as_str()));
    // A listed endpoint without the client secret: the credentials rule.
    assert_refused(alter(&mg, &mirror, &[(URL_KEY, Some(listed))]), URL_KEY);
    wait_for_reconnect(&own, "a token request after the refusals");
    assert_eq!((outside.connections(), outside.received().len()), (0, 0), "the refused endpoint was contacted");
    // With it: accepted.
    assert_eq!(alter(&mg, &mirror, &[(URL_KEY, Some(listed)), ("sasl.jaas.config", Some(OAUTH_JAAS))]).0, 0);
    assert_eq!(config(&mg, &mirror, URL_KEY).as_deref(), Some(listed));

    // Without the list: any endpoint at --create, none other after it.
    let open = Mirrorgate::start(&src);
    let mirror = unique_name("bound-oauth-open");
    let (created, text) = create(&open, &mirror, &oauth_lines(&src, &own_url));
    assert!(created, "--create without a list: {text}");
    let kept = alter(&open, &mirror, &[(URL_KEY, Some(&outside_url)), ("sasl.jaas.config", Some(OAUTH_JAAS))]);
    assert_eq!(kept.0, INVALID_CONFIG, "{kept:?}");
    assert!(kept.1.contains("keeps the token endpoint it was created with"), "{kept:?}");
    wait_for_reconnect(&own, "a token request after the refusal");
    assert_eq!((outside.connections(), outside.received().len()), (0, 0), "the refused endpoint was contacted");
}

fn assert_no_secret(mg: &Mirrorgate) {
    let log = mg.log();
    for s in [PLAIN_PW, SCRAM_PW] {
        assert!(!log.contains(s), "mirrorgate's log shows a password");
    }
}

/// A self-signed certificate (`openssl req -x509 -subj "/C=US/O=corp/OU=eng/CN=alice, jr"`),
/// a usable trust store in PEM.
const CA_PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB0TCCAXegAwIBAgIUHNFwoiKCWdYkRvNSGj/fBSlkrWkwCgYIKoZIzj0EAwIw\nPjELMAkGA1UEBhMCVVMxDTALBgNVBAoMBGNvcnAxDDAKBgNVBAsMA2VuZzESMBAG\nA1UEAwwJYWxpY2UsIGpyMB4XDTI2MTIwMTE4MjUyNloXDTM2MTEyODE4MjUyNlow\nPjELMAkGA1UEBhMCVVMxDTALBgNVBAoMBGNvcnAxDDAKBgNVBAsMA2VuZzESMBAG\nA1UEAwwJYWxpY2UsIGpyMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAErmCmAdCj\nJhmuzbfHwE99+Jfq1v0AmgTTFB+0qdW0E3FKO5m4GZhxUHVLSimnWlOL7KHew7cA\nNTdswyy6ViomLaNTMFEwHQYDVR0OBBYEFEdJmXInnhJQTqcAA/2L0Rc9JodnMB8G\nA1UdIwQYMBaAFEdJmXInnhJQTqcAA/2L0Rc9JodnMA8GA1UdEwEB/wQFMAMBAf8w\nCgYIKoZIzj0EAwIDSAAwRQIgdq6SnJarErbbMmWIkPe1C5wC5vSsOzlnQ0q9W+eW\ntUcCIQDGGmdQxYILFQhC+XUWPwGNxADjM5Jj6hviTdk5rBGpoQ==\n-----END CERTIFICATE-----\n";

/// Issue 32 review finding R5: a mirror's `ssl.truststore.location` / `ssl.keystore.location`
/// name files on mirrorgate's host, set by whoever may alter mirrors. With proxy.yaml's
/// `mirrors.ssl_files_dir`, only regular files inside that directory are accepted, at
/// `--create` and at alter, links out of it included. On the code before, a trust store
/// anywhere on the host was read and accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_store_files_stay_inside_mirrors_ssl_files_dir() {
    let src = source();
    let base = repo().join("target/test-mirrorgate").join(unique_name("store-files"));
    let dir = base.join("stores");
    std::fs::create_dir_all(&dir).unwrap();
    let (inside, outside, link) = (dir.join("ca.pem"), base.join("host-ca.pem"), dir.join("link.pem"));
    std::fs::write(&inside, CA_PEM).unwrap();
    std::fs::write(&outside, CA_PEM).unwrap();
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let dir_text = dir.to_string_lossy().to_string();
    let env = [("MIRRORGATE__MIRRORS__SSL_FILES_DIR", dir_text.as_str())];
    let mg = Mirrorgate::start_with(&src, MirrorgateOptions { env: &env, ..MirrorgateOptions::default() });
    let lines = |location: &std::path::Path| {
        vec![
            "bootstrap.servers=127.0.0.1:1".to_string(),
            "security.protocol=SSL".into(),
            format!("ssl.truststore.location={}", location.display()),
        ]
    };
    for path in [&outside, &link] {
        let (created, text) = create(&mg, &unique_name("files-out"), &lines(path));
        assert!(
            !created && text.contains("INVALID_CONFIG") && text.contains("mirrors.ssl_files_dir"),
            "{}: {text}",
            path.display()
        );
    }
    let mirror = unique_name("files-in");
    let (created, text) = create(&mg, &mirror, &lines(&inside));
    assert!(created, "a trust store inside the directory: {text}");
    let outside_text = outside.to_string_lossy().to_string();
    for key in ["ssl.truststore.location", "ssl.keystore.location"] {
        let (code, message) = alter(&mg, &mirror, &[(key, Some(outside_text.as_str()))]);
        assert!(code == INVALID_CONFIG && message.contains("mirrors.ssl_files_dir"), "{key}: {code} {message}");
    }
    assert_eq!(config(&mg, &mirror, "ssl.truststore.location"), Some(inside.to_string_lossy().to_string()));
    std::fs::remove_dir_all(&base).unwrap();
}
