//! SASL/OAUTHBEARER against real Kafka 4.1 brokers validating tokens with Kafka's
//! `OAuthBearerValidatorCallbackHandler` (JWKS from the token server the test starts,
//! `tests/support/oauth.rs`):
//! - a mirror from an OAUTHBEARER source copies identically, refreshes its token before it
//!   expires, and authenticates new connections after the first token expired;
//! - a wrong client secret fails the mirror's partitions naming the token endpoint's error,
//!   without a retry storm, and a fixed secret heals them;
//! - mirrorgate's own destination connections use OAUTHBEARER, and Java and librdkafka clients
//!   authenticate with OAUTHBEARER through mirrorgate to the destination, whose ACLs apply to
//!   the token's `sub`; `mirrors --command-config` with OAUTHBEARER settings is authorized
//!   for the token's `sub`.
//!
//! Each cluster also has a PLAINTEXT listener, which the tests use to create topics, produce
//! data, set ACLs and verify.

mod support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::mirror::verify::verify_partition;
use support::oauth::OAuthServer;
use support::*;

const V: &str = "4.1.1";
const SECRET_REFRESH: &str = "refresh-client-secret-4411";
const SECRET_WRONG_CASE: &str = "wrongcase-client-secret-5522";
const WRONG_SECRET: &str = "not-the-secret-6633";
const SECRET_DEST: &str = "mg-dest-client-secret-7744";
const SECRET_APP: &str = "app-client-secret-8855";
const SECRET_NOBODY: &str = "nobody-client-secret-9966";
const SECRET_OPERATOR: &str = "operator-client-secret-1077";
/// Every client secret of this binary: none may appear in mirrorgate's log or `--describe`.
const SECRETS: &[&str] =
    &[SECRET_REFRESH, SECRET_WRONG_CASE, WRONG_SECRET, SECRET_DEST, SECRET_APP, SECRET_NOBODY, SECRET_OPERATOR];

fn server() -> &'static OAuthServer {
    static SERVER: OnceLock<OAuthServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let s = OAuthServer::start();
        // The refresh test's tokens live 20 s, so a refresh and an expiry happen within it.
        s.add_client("mirror-refresh", SECRET_REFRESH, "mirror-refresh", 20);
        s.add_client("mirror-wrongcase", SECRET_WRONG_CASE, "mirror-wrongcase", 3600);
        s.add_client("mirrorgate-dest", SECRET_DEST, "mirrorgate", 3600);
        s.add_client("app-client", SECRET_APP, "app", 3600);
        s.add_client("nobody-client", SECRET_NOBODY, "nobody", 3600);
        s.add_client("operator-client", SECRET_OPERATOR, "operator", 3600);
        s
    })
}

fn java_env() -> Vec<(&'static str, String)> {
    vec![("MIRRORGATE_KAFKA_JAVA_OPTS", server().java_opts()), ("MIRRORGATE_TOOL_JAVA_OPTS", server().java_opts())]
}

/// A one-node cluster whose SECURE (SASL_PLAINTEXT) listener accepts the server's tokens.
fn oauth_cluster(name: &str, extra: &[&str]) -> Arc<Cluster> {
    let mut props = server().broker_props();
    props.extend(extra.iter().map(|s| s.to_string()));
    let props: Vec<&str> = props.iter().map(String::as_str).collect();
    let env = java_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    secure_cluster_env(name, "SASL_PLAINTEXT", "none", &[], &props, &env)
}

fn oauth_source() -> Arc<Cluster> {
    oauth_cluster("oauth-src", &[])
}

/// The OAUTHBEARER destination, with StandardAuthorizer; `mirrorgate`, `app` and the
/// PLAINTEXT listener's ANONYMOUS are super users.
fn oauth_destination() -> Arc<Cluster> {
    oauth_cluster(
        "oauth-dst",
        &[
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:mirrorgate;User:ANONYMOUS;User:app",
        ],
    )
}

fn jaas(client_id: &str, secret: &str) -> String {
    format!(
        r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="{client_id}" clientSecret="{secret}" scope="kafka";"#
    )
}

/// The OAUTHBEARER client properties a Java client's file has (Kafka 4.x names).
fn oauth_props(client_id: &str, secret: &str) -> Vec<String> {
    vec![
        "security.protocol=SASL_PLAINTEXT".into(),
        "sasl.mechanism=OAUTHBEARER".into(),
        "sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler".into(),
        format!("sasl.oauthbearer.token.endpoint.url={}", server().token_url()),
        format!("sasl.jaas.config={}", jaas(client_id, secret)),
    ]
}

/// librdkafka's OIDC client-credentials settings (`sasl.oauthbearer.method=oidc`).
fn rdkafka_oauth(client_id: &str, secret: &str) -> Vec<String> {
    vec![
        "security.protocol=SASL_PLAINTEXT".into(),
        "sasl.mechanism=OAUTHBEARER".into(),
        "sasl.oauthbearer.method=oidc".into(),
        format!("sasl.oauthbearer.client.id={client_id}"),
        format!("sasl.oauthbearer.client.secret={secret}"),
        format!("sasl.oauthbearer.token.endpoint.url={}", server().token_url()),
        "sasl.oauthbearer.scope=kafka".into(),
    ]
}

fn write_props(prefix: &str, lines: &[String]) -> PathBuf {
    let dir = repo().join("target/test-mirrorgate");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.properties", unique_name(prefix)));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
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

fn produce_mixed(bootstrap: &str, topic: &str, count: usize, seed: u32) {
    let (count, seed) = (count.to_string(), seed.to_string());
    let args = [
        "produce-mixed",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--count",
        &count,
        "--codec",
        "lz4",
        "--seed",
        &seed,
    ];
    ok(python_client(&args), "produce-mixed");
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

fn create_and_start(mg: &Mirrorgate, cfg: &Path, topic: &str) -> String {
    let mirror = unique_name("m");
    let created =
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]);
    ok(created, "--create");
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", topic]), "--start");
    mirror
}

fn mirror_config(source: &Cluster, client_id: &str, secret: &str, extra: &[&str]) -> PathBuf {
    let mut lines = vec![
        format!("bootstrap.servers={}", source.secure.as_ref().unwrap()),
        "mirror.metadata.refresh.interval.ms=2000".to_string(),
    ];
    lines.extend(oauth_props(client_id, secret));
    lines.extend(extra.iter().map(|s| s.to_string()));
    write_props("oauth-mirror", &lines)
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
            a.config_operation = 0;
            a.value = Some(StrBytes::from_string(v.to_string()));
            a
        })
        .collect();
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![res];
    let resp = block(c.send_any(&req, 1)).unwrap();
    for r in &resp.responses {
        assert_eq!(r.error_code, 0, "IncrementalAlterConfigs: {:?}", r.error_message);
    }
}

/// The broker's server.log of a one-node cluster started by `scripts/kafka.sh`.
fn broker_log(c: &Cluster) -> String {
    let state = std::env::var("MIRRORGATE_KAFKA_DIR").map(PathBuf::from).unwrap_or_else(|_| repo().join(".kafka"));
    std::fs::read_to_string(state.join(&c.name).join("node-1/server.log")).unwrap_or_default()
}

fn kafka_sh(args: &[&str]) {
    let mut cmd = std::process::Command::new(repo().join("scripts/kafka.sh"));
    cmd.args(args).envs(java_env());
    ok(run(cmd, None, Duration::from_secs(180)), &format!("kafka.sh {args:?}"));
}

/// No client secret and no issued token in `text`.
fn assert_no_secrets(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} contains the client secret `{s}`");
    }
    for t in server().issued_tokens() {
        let signature = t.rsplit('.').next().unwrap();
        assert!(!text.contains(signature), "{what} contains an access token");
    }
}

/// A mirror from an OAUTHBEARER source: the data set lands identical; with 20 s tokens the
/// endpoint sees a refresh before expiry (≥ 2 requests, not one per connection); after the
/// first token expired the source broker restarts and the new connections authenticate
/// with the refreshed token (the broker logs no failed authentication), and the copy goes
/// on. No secret or token appears in mirrorgate's log or `--describe`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_from_an_oauthbearer_source_refreshes_its_token_and_copies_identically() {
    // Its own source cluster: the test restarts the broker and reads its log for failed
    // authentications, which the other tests' sources would disturb (and be disturbed by).
    let (source, dest) = (oauth_cluster("oauth-src-restart", &[]), cluster("dst"));
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("oauth-src");
    create_topic(&source.bootstrap, &topic, 3);
    produce_mixed(&source.bootstrap, &topic, 3000, 1);
    let cfg = mirror_config(&source, "mirror-refresh", SECRET_REFRESH, &[]);
    let mirror = create_and_start(&mg, &cfg, &topic);
    wait_identical(&source, &dest, &topic, 3, 3000);
    let first = server().requests("mirror-refresh");
    assert!(!first.is_empty(), "the token endpoint saw no request");
    assert!(first[0].body.contains("grant_type=client_credentials") && first[0].body.contains("scope=kafka"));
    // 20 s tokens: refreshed at 0.8-0.85 of the lifetime (min period and buffer do not fit).
    eventually(Duration::from_secs(60), || {
        let n = server().requests("mirror-refresh").iter().filter(|r| r.issued).count();
        (n >= 2).then_some(()).ok_or(format!("{n} token request(s)"))
    });
    // Wait until the first token has expired (20 s + the broker's 1 s skew), then make
    // mirrorgate open new source connections: restart the source broker.
    let first_at = first[0].at;
    while server().elapsed() < first_at + Duration::from_secs(22) {
        std::thread::sleep(Duration::from_secs(1));
    }
    let restarted_at = Instant::now();
    kafka_sh(&["stop-node", &source.name, "1"]);
    kafka_sh(&["start-node", &source.name, "1"]);
    produce_mixed(&source.bootstrap, &topic, 500, 2);
    wait_identical(&source, &dest, &topic, 3, 3500);
    let log = broker_log(&source);
    assert!(
        !log.contains("Failed authentication with"),
        "the source broker refused an authentication: {}",
        log.lines().filter(|l| l.contains("Failed authentication")).take(3).collect::<Vec<_>>().join("\n")
    );
    let requests = server().requests("mirror-refresh");
    let span = requests.last().unwrap().at.saturating_sub(first_at).as_secs_f64();
    assert!(requests.iter().all(|r| r.issued), "a token request failed: {requests:?}");
    // The refresh came before the first token expired: at 0.8-0.85 of its 20 s lifetime,
    // never after it (20 s). `exp` is in whole seconds, so the lifetime mirrorgate sees is
    // 19-20 s from the request: 0.8 × 19 s = 15.2 s is the earliest on time.
    let gap = requests[1].at.saturating_sub(requests[0].at).as_secs_f64();
    assert!((15.1..20.0).contains(&gap), "the first refresh came {gap:.1} s after the first token (lifetime 20 s)");
    // One token per refresh (every ~16-17 s), not one per connection: 3 partitions' loops,
    // metadata and the restart's reconnects share it.
    assert!(
        (requests.len() as f64) <= span / 15.0 + 2.0,
        "{} token requests in {span:.0} s (restart {:.0} s ago)",
        requests.len(),
        restarted_at.elapsed().as_secs_f64()
    );
    let describe = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror, "--json"]), "--describe");
    assert_no_secrets("--describe", &describe);
    assert_no_secrets("mirrorgate's log", &mg.log());
    assert!(mg.log().contains("OAUTHBEARER token obtained"), "no token log line");
}

/// A wrong client secret: the token endpoint answers 401 invalid_client, the partitions go
/// FAILED naming the status (never the answer's body), the endpoint is not hammered (one request per 10 s at most, as Kafka's
/// refresh thread), and the right secret heals the mirror.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_client_secret_fails_the_mirror_naming_the_endpoint_error_without_a_retry_storm() {
    let (source, dest) = (oauth_source(), cluster("dst"));
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("oauth-wrong");
    create_topic(&source.bootstrap, &topic, 2);
    produce_mixed(&source.bootstrap, &topic, 400, 3);
    let cfg = mirror_config(
        &source,
        "mirror-wrongcase",
        SECRET_WRONG_CASE,
        &["mirror.failed.retry.max.attempts=3", "mirror.failed.retry.max.backoff.ms=2000"],
    );
    let mirror = create_and_start(&mg, &cfg, &topic);
    wait_identical(&source, &dest, &topic, 2, 400);
    let altered_at = Instant::now();
    let failed_before = server().requests("mirror-wrongcase").iter().filter(|r| !r.issued).count();
    assert_eq!(failed_before, 0);
    alter_mirror_configs(&mg, &mirror, &[("sasl.jaas.config", &jaas("mirror-wrongcase", WRONG_SECRET))]);
    produce_mixed(&source.bootstrap, &topic, 100, 4);
    let failed = eventually(Duration::from_secs(120), || {
        let rows = describe_json(&mg, &mirror);
        let all = rows.len() == 2 && rows.iter().all(|r| r["state"] == "FAILED");
        all.then_some(rows.clone()).ok_or(format!("{rows:?}"))
    });
    let msg = failed[0]["errorMessage"].as_str().unwrap().to_string();
    assert!(msg.contains("HTTP 401") && msg.contains("refused the client credentials"), "{msg}");
    // Status and a fixed meaning, never the endpoint's body (issue 32: a token URL must not
    // read a page into --describe).
    assert!(!msg.contains("invalid_client") && !msg.contains("client authentication failed"), "{msg}");
    std::thread::sleep(Duration::from_secs(15));
    let window = altered_at.elapsed().as_secs_f64();
    let refused = server().requests("mirror-wrongcase").iter().filter(|r| !r.issued).count();
    assert!(refused >= 1, "the endpoint saw no request with the wrong secret");
    assert!(
        (refused as f64) <= window / 10.0 + 2.0,
        "{refused} refused token requests in {window:.0} s: a retry storm"
    );
    let describe = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror, "--json"]), "--describe");
    assert_no_secrets("--describe", &describe);
    assert_no_secrets("mirrorgate's log", &mg.log());
    // Fixed: the partitions heal and copy what was produced meanwhile.
    alter_mirror_configs(&mg, &mirror, &[("sasl.jaas.config", &jaas("mirror-wrongcase", SECRET_WRONG_CASE))]);
    wait_identical(&source, &dest, &topic, 2, 500);
}

/// mirrorgate in front of an OAUTHBEARER destination with StandardAuthorizer: its own
/// connections (state topic, metadata) authenticate with its token; a Java client
/// (`OAuthBearerLoginCallbackHandler`) and librdkafka (`sasl.oauthbearer.method=oidc`)
/// produce and consume through it; a token whose `sub` has no ACL on the topic gets
/// TOPIC_AUTHORIZATION_FAILED from the broker; `mirrors --command-config` with OAUTHBEARER
/// is authorized for the token's `sub` (ALTER on the cluster for `operator`, nothing for
/// `nobody`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_and_the_mirror_cli_authenticate_with_oauthbearer_through_mirrorgate() {
    let dest = oauth_destination();
    let destination_yaml = format!(
        "  security_protocol: SASL_PLAINTEXT\n  sasl_mechanism: OAUTHBEARER\n  sasl_oauthbearer_token_endpoint_url: {}\n  sasl_jaas_config: '{}'\n  sasl_login_retry_backoff_ms: 200\n",
        server().token_url(),
        jaas("mirrorgate-dest", SECRET_DEST)
    );
    let authz_yaml = "authorization:\n  super_users: [\"User:mirrorgate\", \"User:ANONYMOUS\", \"User:app\"]\n";
    let mg = Mirrorgate::start_in_front_of(
        dest.secure.as_ref().unwrap(),
        FrontOptions { destination_yaml: &destination_yaml, ..FrontOptions::default() },
        MirrorgateOptions { extra_yaml: authz_yaml, ..MirrorgateOptions::default() },
    );
    assert!(
        server().requests("mirrorgate-dest").iter().any(|r| r.issued),
        "mirrorgate did not get a token for its destination connections"
    );
    let topic = unique_name("oauth-clients");
    create_topic(&dest.bootstrap, &topic, 1);

    // librdkafka, as `app` (a super user), produces and consumes through mirrorgate.
    let rd = |cmd: &str, client: &str, secret: &str, args: &[&str]| {
        let props = rdkafka_oauth(client, secret);
        let mut all = vec![cmd, "--bootstrap", mg.bootstrap.as_str(), "--topic", topic.as_str()];
        all.extend(args);
        for p in &props {
            all.extend(["--prop", p.as_str()]);
        }
        python_client(&all)
    };
    ok(rd("produce", "app-client", SECRET_APP, &["--count", "5", "--prefix", "rd"]), "librdkafka produce");
    let consumed = ok(
        rd("consume", "app-client", SECRET_APP, &["--count", "5", "--group", &unique_name("g"), "--timeout", "60"]),
        "librdkafka consume",
    );
    assert_eq!(consumed.lines().count(), 5, "{consumed}");

    // The Java console clients, as `app`, with the properties file users have.
    let java_props = write_props("java-oauth", &oauth_props("app-client", SECRET_APP));
    let tool = |tool: &str, args: &[&str], stdin: Option<&str>| {
        let mut cmd = std::process::Command::new(repo().join("scripts/kafka.sh"));
        cmd.arg("tool").arg(tool).args(args).env("KAFKA_VERSION", V).envs(java_env());
        run(cmd, stdin, Duration::from_secs(120))
    };
    let out = tool(
        "console-producer",
        &["--bootstrap-server", &mg.bootstrap, "--topic", &topic, "--producer.config", java_props.to_str().unwrap()],
        Some("java-1\njava-2\njava-3\n"),
    );
    ok(out, "Java console producer with OAUTHBEARER");
    let out = tool(
        "console-consumer",
        &[
            "--bootstrap-server",
            &mg.bootstrap,
            "--topic",
            &topic,
            "--from-beginning",
            "--max-messages",
            "8",
            "--timeout-ms",
            "60000",
            "--consumer.config",
            java_props.to_str().unwrap(),
        ],
        None,
    );
    let read = ok(out, "Java console consumer with OAUTHBEARER");
    for v in ["java-1", "java-2", "java-3"] {
        assert!(read.lines().any(|l| l == v), "{v} not read back: {read}");
    }
    assert_eq!(read.lines().filter(|l| !l.trim().is_empty()).count(), 8, "{read}");

    // `nobody` authenticates but has no ACL on the topic: the broker refuses, through
    // mirrorgate.
    let out = rd("produce", "nobody-client", SECRET_NOBODY, &["--count", "1", "--timeout", "10"]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.to_ascii_uppercase().contains("TOPIC_AUTHORIZATION_FAILED"), "{text}");

    // The mirror CLI with OAUTHBEARER settings: the principal is the token's `sub`.
    let acl = ["--bootstrap-server", dest.bootstrap.as_str(), "--add", "--allow-principal", "User:operator"];
    kafka_tool_ok(V, "acls", &[&acl[..], &["--operation", "Alter", "--cluster"]].concat(), None);
    let source = cluster("src");
    let mirror_cfg = write_props("plain-mirror", &[format!("bootstrap.servers={}", source.bootstrap)]);
    let cli = |client: &str, secret: &str, args: &[&str]| {
        let props = write_props("cli-oauth", &oauth_props(client, secret));
        let mut all = vec!["--command-config", props.to_str().unwrap()];
        all.extend(args);
        let out = mirrors_cli(&mg.bootstrap, &all);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    };
    let mirror = unique_name("m");
    let create = ["--create", "--mirror", mirror.as_str(), "--mirror-config", mirror_cfg.to_str().unwrap()];
    let (created, text) = cli("nobody-client", SECRET_NOBODY, &create);
    assert!(!created && text.contains("CLUSTER_AUTHORIZATION_FAILED"), "--create by nobody: {text}");
    assert!(mg.log().contains("User:nobody"), "the refusal does not name the token's principal");
    let (created, text) = eventually(Duration::from_secs(30), || {
        let r = cli("operator-client", SECRET_OPERATOR, &create);
        if r.0 {
            Ok(r)
        } else {
            Err(r.1)
        }
    });
    assert!(created, "{text}");
    let (listed, text) = cli("operator-client", SECRET_OPERATOR, &["--list"]);
    assert!(listed && text.contains(&mirror), "--list by operator: {text}");
    assert_no_secrets("mirrorgate's log", &mg.log());
    assert_no_secrets("the CLI output", &text);
}

/// A token the broker refuses (here expired two minutes before it was issued): the broker answers the initial
/// response with a JSON error challenge, the client sends `\x01`, and the broker's
/// SASL_AUTHENTICATION_FAILED is surfaced with the challenge's status (RFC 7628 §3.2.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_the_broker_refuses_surfaces_the_brokers_error() {
    // The destination cluster of the client test: the refresh test requires that the source
    // broker logs no failed authentication.
    let source = oauth_destination();
    // A token for another audience: valid to mirrorgate, refused by the broker.
    server().add_client_for_audience("aud-client", "aud-client-secret-2288", "aud", 300, "another-audience");
    server().add_client("expired-client", "expired-client-secret-2289", "expired", -120);
    let options = |id: &str, secret: &str| {
        let props = oauth_props(id, secret)
            .into_iter()
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        let mut o = ClusterOptions::new(vec![source.secure.clone().unwrap()]);
        o.security = mirrorgate::client::ClientSecurity::from_properties(&props).unwrap();
        o.max_attempts = 1;
        o.connect_timeout = Duration::from_secs(5);
        o
    };
    let err = block(ClusterClient::connect(options("aud-client", "aud-client-secret-2288"))).map(|_| ()).unwrap_err();
    let err = err.to_string();
    assert!(err.contains("SASL_AUTHENTICATION_FAILED") && err.contains("invalid_token"), "{err}");
    assert!(!err.contains("aud-client-secret-2288"), "{err}");
    // A token already expired when issued: refused by mirrorgate itself, and the endpoint is
    // not asked again by the next connect (held 10 s, as Kafka's refreshing login).
    let expired = options("expired-client", "expired-client-secret-2289");
    let e1 = block(ClusterClient::connect(expired.clone())).map(|_| ()).unwrap_err().to_string();
    let e2 = block(ClusterClient::connect(expired)).map(|_| ()).unwrap_err().to_string();
    assert!(e1.contains("expired 120 s ago") || e1.contains("expired 119 s ago"), "{e1}");
    assert!(e2.contains("issued a token that expired"), "{e2}");
    assert_eq!(server().requests("expired-client").len(), 1);
    for t in server().issued_tokens() {
        assert!(!err.contains(t.rsplit('.').next().unwrap()), "the error shows the token: {err}");
    }
}
