//! A hostile client cannot borrow a principal or skip authentication (issue 32 items 1 and 2),
//! against real Kafka 4.1 brokers with SASL on their SECURE listener:
//!
//! - a destination with StandardAuthorizer, `admin` a super user and `eve` without any ACL:
//!   eve's valid login pipelined with a second exchange naming admin (PLAIN, and the SCRAM
//!   variant) closes the connection, the mirror is unchanged, the attempt is counted; an
//!   OAUTHBEARER initial response naming `auth` twice (a forged admin token, then eve's real
//!   one, which the broker validates) closes the connection, while eve's own token
//!   authenticates and is authorized as eve;
//! - a destination without an authorizer: a client that never authenticated gets
//!   SASL_AUTHENTICATION_FAILED for the mirror RPCs and mirror configs, and an `admin: false`
//!   listener refuses mirror configs to an authenticated one; before authentication a request
//!   over `sasl_server_max_receive_size` closes the connection at its length prefix (issue 32
//!   item 6).
//!
//! The hostile clients write raw frames on a socket. Each cluster also has a PLAINTEXT
//! listener (its ANONYMOUS a super user), which the tests use for ACLs.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::client::conn::ClientError;
use mirrorgate::client::sasl::SaslTransport;
use mirrorgate::client::security::{SaslCredentials, SaslMechanism, Secret};
use mirrorgate::client::ClientSecurity;
use support::oauth::OAuthServer;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const V: &str = "4.1.1";
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const SASL_AUTHENTICATION_FAILED: i16 = 58;
const REFRESH: &str = "mirror.metadata.refresh.interval.ms";

fn oauth() -> &'static OAuthServer {
    static SERVER: OnceLock<OAuthServer> = OnceLock::new();
    SERVER.get_or_init(OAuthServer::start)
}

/// SASL_PLAINTEXT with PLAIN, SCRAM-SHA-512 and OAUTHBEARER, StandardAuthorizer; `admin` and
/// the PLAINTEXT listener's ANONYMOUS are super users, `eve` has no ACL.
fn authz_destination() -> Arc<Cluster> {
    let mut props = oauth().broker_props();
    props.extend([
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".to_string(),
        "super.users=User:admin;User:ANONYMOUS".to_string(),
    ]);
    let props: Vec<&str> = props.iter().map(String::as_str).collect();
    let opts = oauth().java_opts();
    secure_cluster_env(
        "spoof-authz",
        "SASL_PLAINTEXT",
        "none",
        &["PLAIN:eve:eve-pw", "PLAIN:admin:admin-pw", "SCRAM-SHA-512:eve:eve-scram", "SCRAM-SHA-512:admin:admin-scram"],
        &props,
        &[("MIRRORGATE_KAFKA_JAVA_OPTS", opts.as_str())],
    )
}

/// SASL_PLAINTEXT without an authorizer.
fn open_destination() -> Arc<Cluster> {
    secure_cluster("spoof-open", "SASL_PLAINTEXT", "none", &["PLAIN:eve:eve-pw"])
}

fn jaas(module: &str, user: &str, password: &str) -> String {
    format!(r#"org.apache.kafka.common.security.{module} required username="{user}" password="{password}";"#)
}

/// Java client properties authenticating as `user` with `mechanism` (PLAIN or SCRAM-SHA-512).
fn client_props(mechanism: &str, user: &str, password: &str) -> BTreeMap<String, String> {
    let module = if mechanism == "PLAIN" { "plain.PlainLoginModule" } else { "scram.ScramLoginModule" };
    [
        ("security.protocol", "SASL_PLAINTEXT".to_string()),
        ("sasl.mechanism", mechanism.to_string()),
        ("sasl.jaas.config", jaas(module, user, password)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The same properties in a file, for `--command-config`.
fn props_file(props: &BTreeMap<String, String>) -> String {
    let path = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("spoof-cmd")));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, props.iter().map(|(k, v)| format!("{k}={v}\n")).collect::<String>()).unwrap();
    path.to_str().unwrap().to_string()
}

/// A client of `bootstrap` authenticating with `props` (our own client library).
fn client(bootstrap: &str, props: &BTreeMap<String, String>) -> ClusterClient {
    let mut o = ClusterOptions::new(vec![bootstrap.to_string()]);
    o.security = ClientSecurity::from_properties(props).unwrap();
    o.max_attempts = 1;
    block(ClusterClient::connect(o)).unwrap()
}

/// mirrorgate in front of `dest`'s SASL listener, its own connections as `admin`
/// (SCRAM-SHA-512 on the authorizing cluster, PLAIN as eve on the open one).
fn mirrorgate(dest: &Cluster, own: (&str, &str, &str), extra: &str, opts: MirrorgateOptions<'_>) -> Mirrorgate {
    let (mechanism, user, password) = own;
    let module = if mechanism == "PLAIN" { "plain.PlainLoginModule" } else { "scram.ScramLoginModule" };
    let destination_yaml = format!(
        "  security_protocol: SASL_PLAINTEXT\n  sasl_mechanism: {mechanism}\n  sasl_jaas_config: '{}'\n",
        jaas(module, user, password)
    );
    Mirrorgate::start_in_front_of(
        dest.secure.as_ref().unwrap(),
        FrontOptions { destination_yaml: &destination_yaml, ..FrontOptions::default() },
        MirrorgateOptions { extra_yaml: extra, ..opts },
    )
}

/// Creates a mirror (its source need not exist) through `mg` with `--command-config props`.
fn create_mirror(mg: &Mirrorgate, props: &str) -> String {
    let cfg = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("spoof-mirror")));
    std::fs::write(&cfg, "bootstrap.servers=127.0.0.1:9\n").unwrap();
    let mirror = unique_name("m");
    ok(
        mirrors_cli(
            &mg.bootstrap,
            &["--command-config", props, "--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()],
        ),
        "--create",
    );
    mirror
}

fn describe_request(mirror: &str) -> DescribeConfigsRequest {
    DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(64)
        .with_resource_name(StrBytes::from_string(mirror.into()))])
}

fn alter_request(mirror: &str, value: &str) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(64)
        .with_resource_name(StrBytes::from_string(mirror.into()))
        .with_configs(vec![AlterableConfig::default()
            .with_name(StrBytes::from_static_str(REFRESH))
            .with_config_operation(0)
            .with_value(Some(StrBytes::from_string(value.into())))])])
}

/// The mirror's refresh interval as `c` reads it, or the error code.
fn refresh_of(c: &ClusterClient, mirror: &str) -> Result<String, i16> {
    let r = block(c.send_any(&describe_request(mirror), 4)).unwrap();
    let r = &r.results[0];
    if r.error_code != 0 {
        return Err(r.error_code);
    }
    Ok(r.configs.iter().find(|c| c.name.as_str() == REFRESH).and_then(|c| c.value.clone()).unwrap().to_string())
}

/// A client connection writing raw request frames.
struct Raw {
    s: tokio::net::TcpStream,
    next: i32,
}

impl Raw {
    async fn connect(addr: &str) -> Self {
        Self { s: tokio::net::TcpStream::connect(addr).await.unwrap(), next: 1 }
    }

    /// The frame (length prefix included) of `req` at `version`, with the next correlation id.
    fn frame<R: Encodable>(&mut self, key: ApiKey, version: i16, req: &R) -> Vec<u8> {
        let mut b = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.next)
            .with_client_id(Some(StrBytes::from_static_str("spoof")))
            .encode(&mut b, key.request_header_version(version))
            .unwrap();
        req.encode(&mut b, version).unwrap();
        self.next += 1;
        let mut out = (b.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&b);
        out
    }

    /// Writes `bytes` in one write; false when the connection is gone.
    async fn send(&mut self, bytes: &[u8]) -> bool {
        self.s.write_all(bytes).await.is_ok()
    }

    /// The next response frame after its length prefix; `None` once the connection closed.
    async fn read(&mut self) -> Option<Bytes> {
        let read = async {
            let mut len = [0u8; 4];
            self.s.read_exact(&mut len).await.ok()?;
            let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
            self.s.read_exact(&mut body).await.ok()?;
            Some(Bytes::from(body))
        };
        tokio::time::timeout(Duration::from_secs(30), read).await.expect("no answer and no close within 30 s")
    }

    /// Sends `req` and decodes its answer; `None` when the connection closed instead.
    async fn call<R: Encodable, T: Decodable>(&mut self, key: ApiKey, version: i16, req: &R) -> Option<T> {
        let f = self.frame(key, version, req);
        if !self.send(&f).await {
            return None;
        }
        let mut answer = self.read().await?;
        ResponseHeader::decode(&mut answer, key.response_header_version(version)).unwrap();
        Some(T::decode(&mut answer, version).unwrap())
    }
}

/// What a hostile connection got for the mirror: the connection closed (after `answers` SASL
/// answers), or DescribeConfigs and IncrementalAlterConfigs error codes.
#[derive(Debug, PartialEq)]
enum Attempt {
    Closed,
    Answered { describe: i16, alter: i16 },
}

/// After its SASL exchange, the spoofing client asks for the mirror's configs and changes one.
async fn use_for_mirror(c: &mut Raw, mirror: &str) -> Attempt {
    let Some(d) = c.call::<_, DescribeConfigsResponse>(ApiKey::DescribeConfigs, 4, &describe_request(mirror)).await
    else {
        return Attempt::Closed;
    };
    let Some(a) = c
        .call::<_, IncrementalAlterConfigsResponse>(ApiKey::IncrementalAlterConfigs, 1, &alter_request(mirror, "45000"))
        .await
    else {
        return Attempt::Closed;
    };
    Attempt::Answered { describe: d.results[0].error_code, alter: a.responses[0].error_code }
}

fn handshake(mechanism: &'static str) -> SaslHandshakeRequest {
    SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism))
}

fn authenticate(auth: impl Into<Bytes>) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest::default().with_auth_bytes(auth.into())
}

/// The reproduced attack: eve's PLAIN exchange and one for admin with a wrong password, in
/// one write; then the mirror.
async fn plain_spoof(addr: &str, mirror: &str) -> Attempt {
    let mut c = Raw::connect(addr).await;
    let mut burst = c.frame(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
    burst.extend(c.frame(ApiKey::SaslAuthenticate, 2, &authenticate(&b"\0eve\0eve-pw"[..])));
    burst.extend(c.frame(ApiKey::SaslHandshake, 1, &handshake("PLAIN")));
    burst.extend(c.frame(ApiKey::SaslAuthenticate, 2, &authenticate(&b"\0admin\0wrong"[..])));
    if !c.send(&burst).await {
        return Attempt::Closed;
    }
    for _ in 0..4 {
        if c.read().await.is_none() {
            return Attempt::Closed;
        }
    }
    use_for_mirror(&mut c, mirror).await
}

/// SCRAM through mirrorgate's own client code, with `after_final` written in the same write
/// as the client-final message.
struct Injecting<'a> {
    c: &'a mut Raw,
    after_final: Vec<u8>,
    rounds: u32,
}

impl SaslTransport for Injecting<'_> {
    fn peer(&self) -> String {
        "mirrorgate".into()
    }

    async fn sasl_handshake(&mut self, req: &SaslHandshakeRequest) -> Result<SaslHandshakeResponse, ClientError> {
        self.c.call(ApiKey::SaslHandshake, 1, req).await.ok_or(ClientError::Closed { addr: self.peer() })
    }

    async fn sasl_authenticate(
        &mut self,
        req: &SaslAuthenticateRequest,
    ) -> Result<SaslAuthenticateResponse, ClientError> {
        self.rounds += 1;
        let mut bytes = self.c.frame(ApiKey::SaslAuthenticate, 1, req);
        if self.rounds == 2 {
            bytes.extend(std::mem::take(&mut self.after_final));
        }
        let closed = ClientError::Closed { addr: self.peer() };
        if !self.c.send(&bytes).await {
            return Err(closed);
        }
        let mut answer = self.c.read().await.ok_or(closed)?;
        ResponseHeader::decode(&mut answer, 0).unwrap();
        Ok(SaslAuthenticateResponse::decode(&mut answer, 1).unwrap())
    }
}

/// The SCRAM variant: eve's SCRAM-SHA-512 exchange whose client-final goes out together with
/// a PLAIN exchange for admin; then the mirror.
async fn scram_spoof(addr: &str, mirror: &str) -> Attempt {
    let mut c = Raw::connect(addr).await;
    let mut after_final = c.frame(ApiKey::SaslHandshake, 1, &handshake("PLAIN"));
    after_final.extend(c.frame(ApiKey::SaslAuthenticate, 1, &authenticate(&b"\0admin\0wrong"[..])));
    let creds = SaslCredentials {
        mechanism: SaslMechanism::ScramSha512,
        username: "eve".into(),
        password: Secret::new("eve-scram"),
        oauth: None,
    };
    let mut t = Injecting { c: &mut c, after_final, rounds: 0 };
    if mirrorgate::client::sasl::authenticate(&mut t, &creds).await.is_err() {
        return Attempt::Closed;
    }
    for _ in 0..2 {
        if c.read().await.is_none() {
            return Attempt::Closed;
        }
    }
    use_for_mirror(&mut c, mirror).await
}

/// An OAUTHBEARER exchange with `message`, then the mirror.
async fn oauth_attempt(addr: &str, mirror: &str, message: String) -> Attempt {
    let mut c = Raw::connect(addr).await;
    let Some(hs) = c.call::<_, SaslHandshakeResponse>(ApiKey::SaslHandshake, 1, &handshake("OAUTHBEARER")).await else {
        return Attempt::Closed;
    };
    assert_eq!(hs.error_code, 0);
    let Some(auth) =
        c.call::<_, SaslAuthenticateResponse>(ApiKey::SaslAuthenticate, 2, &authenticate(message.into_bytes())).await
    else {
        return Attempt::Closed;
    };
    assert_eq!((auth.error_code, auth.auth_bytes.len()), (0, 0), "the broker accepts the token: {auth:?}");
    use_for_mirror(&mut c, mirror).await
}

/// An admin token that expired a moment ago, within the broker's clock skew
/// (`sasl.oauthbearer.clock.skew.seconds=1`): the broker accepts it with session lifetime 0,
/// its session over at once (`SaslServerAuthenticator`: the credential's expiry is before the
/// exchange's end), and closes the connection at the next request. The client then asks to
/// change the mirror first: `None` when the connection closed instead of answering.
async fn expired_token_attempt(addr: &str, mirror: &str) -> Option<i16> {
    let token = oauth().mint("admin", 1);
    let payload = token.split('.').nth(1).unwrap();
    let claims: serde_json::Value = {
        use base64::Engine as _;
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
    };
    let exp_ms = claims["exp"].as_u64().unwrap() * 1000 + 150;
    let now_ms = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    tokio::time::sleep(Duration::from_millis(exp_ms.saturating_sub(now_ms()))).await;
    let mut c = Raw::connect(addr).await;
    let hs = c.call::<_, SaslHandshakeResponse>(ApiKey::SaslHandshake, 1, &handshake("OAUTHBEARER")).await?;
    assert_eq!(hs.error_code, 0);
    let message = format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}");
    let auth =
        c.call::<_, SaslAuthenticateResponse>(ApiKey::SaslAuthenticate, 2, &authenticate(message.into_bytes())).await?;
    assert_eq!(
        (auth.error_code, auth.session_lifetime_ms),
        (0, 0),
        "the broker accepts the just-expired token with lifetime 0 ({} ms after its exp): {auth:?}",
        now_ms() - exp_ms + 150
    );
    let a = c
        .call::<_, IncrementalAlterConfigsResponse>(ApiKey::IncrementalAlterConfigs, 1, &alter_request(mirror, "46000"))
        .await?;
    Some(a.responses[0].error_code)
}

/// `GET /metrics` on `127.0.0.1:port`: the sum of the samples of `name` with every label in
/// `labels`.
fn metric(port: u16, name: &str, labels: &[&str]) -> f64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// eve (PLAIN, no ACL) pipelines admin's exchange behind her own (PLAIN, then the SCRAM
/// variant), and sends an OAUTHBEARER message naming `auth` twice: each closes the connection,
/// the mirror is unchanged, each attempt is counted. On the code before issue 32, each
/// connection became `User:admin` and both mirror config requests were answered with error 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_borrow_a_principal() {
    let dest = authz_destination();
    let metrics_port = free_port_range(1);
    let extra = format!(
        "metrics:\n  listen: 127.0.0.1:{metrics_port}\nauthorization:\n  super_users: [\"User:admin\", \"User:ANONYMOUS\"]\n"
    );
    let mg = mirrorgate(&dest, ("SCRAM-SHA-512", "admin", "admin-scram"), &extra, MirrorgateOptions::default());
    let admin_props = client_props("SCRAM-SHA-512", "admin", "admin-scram");
    let mirror = create_mirror(&mg, &props_file(&admin_props));
    let admin = client(&mg.bootstrap, &admin_props);
    let before = refresh_of(&admin, &mirror).unwrap();
    assert_ne!(before, "45000");
    // eve authenticated honestly has no right on the mirror.
    let eve = client(&mg.bootstrap, &client_props("PLAIN", "eve", "eve-pw"));
    assert_eq!(refresh_of(&eve, &mirror), Err(CLUSTER_AUTHORIZATION_FAILED), "eve has no ACL");

    let refused = |kind: &str| metric(metrics_port, "mirrorgate_client_sasl_refused_total", &[kind]);
    let failures = || metric(metrics_port, "mirrorgate_client_authentications_total", &["result=\"failure\""]);
    let failed_before = failures();
    // OAUTHBEARER: a forged, unsigned admin token first, eve's real token last (the one Kafka
    // validates).
    let forged_claims = serde_json::json!({"sub": "admin", "exp": 4_000_000_000u64, "aud": "kafka"});
    let b64 = |v: &[u8]| {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
    };
    let forged = format!("{}.{}.", b64(br#"{"alg":"none"}"#), b64(forged_claims.to_string().as_bytes()));
    let eves = oauth().mint("eve", 3600);
    let twice = format!("n,,\u{1}auth=Bearer {forged}\u{1}auth=Bearer {eves}\u{1}\u{1}");
    let attempts = [
        ("PLAIN: eve's login, then admin's", plain_spoof(&mg.bootstrap, &mirror).await),
        ("SCRAM: eve's client-final with admin's PLAIN", scram_spoof(&mg.bootstrap, &mirror).await),
        ("OAUTHBEARER with `auth` twice", oauth_attempt(&mg.bootstrap, &mirror, twice).await),
    ];
    for (what, got) in &attempts {
        eprintln!("{what}: {got:?}");
    }
    assert!(attempts.iter().all(|(_, got)| *got == Attempt::Closed), "{attempts:?}");
    assert!(refused("reason=\"pipelined\"") >= 2.0, "the refusals are not counted");
    assert!(refused("reason=\"duplicate_key\"") >= 1.0);
    assert!(failures() >= failed_before + 3.0, "the refusals are not failed authentications");
    // eve's own token authenticates, and is authorized as eve: nothing without an ACL...
    let own = || format!("n,,\u{1}auth=Bearer {eves}\u{1}\u{1}");
    let answered = oauth_attempt(&mg.bootstrap, &mirror, own()).await;
    assert_eq!(
        answered,
        Attempt::Answered { describe: CLUSTER_AUTHORIZATION_FAILED, alter: CLUSTER_AUTHORIZATION_FAILED }
    );
    // ...and DESCRIBE once the destination grants it to User:eve (read within 5 s).
    kafka_tool_ok(
        V,
        "acls",
        &[
            "--bootstrap-server",
            &dest.bootstrap,
            "--add",
            "--allow-principal",
            "User:eve",
            "--operation",
            "Describe",
            "--cluster",
        ],
        None,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = oauth_attempt(&mg.bootstrap, &mirror, own()).await;
        if got == (Attempt::Answered { describe: 0, alter: CLUSTER_AUTHORIZATION_FAILED }) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "eve's DESCRIBE not applied: {got:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A token of admin that expired a moment ago: the broker's session is over before the
    // first request; the mirror change is neither answered nor applied. (Before the review
    // recorded in docs/security.md, lifetime 0 meant "no limit" to mirrorgate: the change was
    // answered with error 0 and applied.)
    let expired = expired_token_attempt(&mg.bootstrap, &mirror).await;
    assert_eq!(expired, None, "a mirror change on a session the broker has ended");
    mg.wait_for_log("SASL session expired without a re-authentication", Duration::from_secs(10));

    // Nothing changed the mirror; admin can.
    assert_eq!(refresh_of(&admin, &mirror).unwrap(), before, "a spoofing connection changed the mirror");
    let changed = block(admin.send_any(&alter_request(&mirror, "45000"), 1)).unwrap();
    assert_eq!(changed.responses[0].error_code, 0);
    assert_eq!(refresh_of(&admin, &mirror).unwrap(), "45000");
    let log = mg.log();
    assert!(
        log.contains("SASL refused (pipelined)") && log.contains("SASL refused (duplicate_key)"),
        "{}",
        tail(&log, 30)
    );
}

/// A SASL destination without an authorizer: its broker serves no unauthenticated request,
/// so neither does mirrorgate (mirror RPCs and mirror configs: SASL_AUTHENTICATION_FAILED);
/// an `admin: false` listener refuses mirror configs as it refuses mirror RPCs. On the code
/// before issue 32, the anonymous `--create`, `--list` and DescribeConfigs were answered, and
/// the `admin: false` listener answered mirror configs with error 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrorgate_answers_only_authenticated_clients_of_a_sasl_destination() {
    let dest = open_destination();
    let state = unique_name("__mirror_state-open");
    let opts = || MirrorgateOptions { state_topic: Some(&state), ..MirrorgateOptions::default() };
    let mg = mirrorgate(&dest, ("PLAIN", "eve", "eve-pw"), "", opts());
    let eve_props = client_props("PLAIN", "eve", "eve-pw");
    let eve_file = props_file(&eve_props);
    let cfg = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("open-mirror")));
    std::fs::write(&cfg, "bootstrap.servers=127.0.0.1:9\n").unwrap();
    let refused = |out: std::process::Output, what: &str| {
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success() && text.contains("SASL_AUTHENTICATION_FAILED"), "{what}: {text}");
        assert!(text.contains("not authenticated"), "{what}: the refusal does not say why: {text}");
    };
    let anonymous_create = unique_name("m");
    refused(
        mirrors_cli(
            &mg.bootstrap,
            &["--create", "--mirror", &anonymous_create, "--mirror-config", cfg.to_str().unwrap()],
        ),
        "anonymous --create",
    );
    refused(mirrors_cli(&mg.bootstrap, &["--list"]), "anonymous --list");
    // Authenticated, eve may do anything (no authorizer).
    let mirror = create_mirror(&mg, &eve_file);
    let listed = ok(mirrors_cli(&mg.bootstrap, &["--command-config", &eve_file, "--list"]), "--list as eve");
    assert!(listed.contains(&mirror) && !listed.contains(&anonymous_create), "{listed}");
    let eve = client(&mg.bootstrap, &eve_props);
    assert!(refresh_of(&eve, &mirror).is_ok());
    // A raw DescribeConfigs on the mirror without authentication.
    let mut c = Raw::connect(&mg.bootstrap).await;
    let d: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &describe_request(&mirror)).await.unwrap();
    assert_eq!(d.results[0].error_code, SASL_AUTHENTICATION_FAILED, "{d:?}");
    assert!(d.results[0].configs.is_empty(), "configs leaked to an anonymous client: {d:?}");
    let a: IncrementalAlterConfigsResponse =
        c.call(ApiKey::IncrementalAlterConfigs, 1, &alter_request(&mirror, "45000")).await.unwrap();
    assert_eq!(a.responses[0].error_code, SASL_AUTHENTICATION_FAILED);
    assert_ne!(refresh_of(&eve, &mirror).unwrap(), "45000");

    // An `admin: false` listener over the same state: authenticated mirror configs refused.
    let app = mirrorgate(&dest, ("PLAIN", "eve", "eve-pw"), "", MirrorgateOptions { admin: false, ..opts() });
    let eve_app = client(&app.bootstrap, &eve_props);
    assert_eq!(refresh_of(&eve_app, &mirror), Err(CLUSTER_AUTHORIZATION_FAILED), "DescribeConfigs on admin: false");
    let altered = block(eve_app.send_any(&alter_request(&mirror, "45000"), 1)).unwrap();
    assert_eq!(altered.responses[0].error_code, CLUSTER_AUTHORIZATION_FAILED);
    assert!(altered.responses[0].error_message.as_deref().is_some_and(|m| m.contains("admin: true")), "{altered:?}");
    assert_ne!(refresh_of(&eve, &mirror).unwrap(), "45000");
}

/// A Produce request (acks all) of one record of 1,000,000 bytes to partition 0 of `topic`.
fn one_mib_produce(topic: &str) -> kafka_protocol::messages::ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(vec![b'v'; 1_000_000])),
        headers: kafka_protocol::indexmap::IndexMap::new(),
    };
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        &[record],
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    kafka_protocol::messages::ProduceRequest::default().with_acks(-1).with_timeout_ms(20_000).with_topic_data(vec![
        TopicProduceData::default()
            .with_name(kafka_protocol::messages::TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch.freeze()))]),
    ])
}

/// Before SASL authentication, a request over `sasl_server_max_receive_size` (512 KiB, the
/// broker's `sasl.server.max.receive.size`) closes the connection at its length prefix: three
/// clients announcing 100 MiB requests are gone at once and counted; eve, authenticated, then
/// produces 1 MiB. On the code before issue 32 the announcements were held, each reserving
/// 100 MiB of the request memory until the partial-frame timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_before_authentication_are_capped() {
    let dest = open_destination();
    let metrics_port = free_port_range(1);
    let extra = format!("metrics:\n  listen: 127.0.0.1:{metrics_port}\n");
    let mg = mirrorgate(&dest, ("PLAIN", "eve", "eve-pw"), &extra, MirrorgateOptions::default());
    let topic = unique_name("precap");
    kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", &dest.bootstrap, "--create", "--topic", &topic, "--partitions", "1"],
        None,
    );
    let mut hostile = Vec::new();
    for _ in 0..3 {
        let mut c = Raw::connect(&mg.bootstrap).await;
        assert!(c.send(&(100i32 << 20).to_be_bytes()).await);
        hostile.push(c);
    }
    for (i, c) in hostile.iter_mut().enumerate() {
        assert!(c.read().await.is_none(), "hostile connection {i} got an answer");
    }
    let refused = metric(metrics_port, "mirrorgate_client_sasl_refused_total", &["frame_before_authentication"]);
    assert_eq!(refused, 3.0);
    // Small frames (ApiVersions, the SASL exchange) pass; authenticated, large ones too.
    let eve = client(&mg.bootstrap, &client_props("PLAIN", "eve", "eve-pw"));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let resp = block(eve.send_any(&one_mib_produce(&topic), 9)).unwrap();
        let p = &resp.responses[0].partition_responses[0];
        if p.error_code == 0 {
            break;
        }
        assert!([5, 6].contains(&p.error_code) && std::time::Instant::now() < deadline, "{p:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(mg.log().contains("before SASL authentication (sasl_server_max_receive_size 524288)"));
}
