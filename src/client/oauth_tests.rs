//! Unit tests of [`super`].

use base64::Engine as _;

use super::*;

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

const JAAS: &str = r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="mirror-a" clientSecret="s3cret:&=x" scope="kafka read";"#;

#[test]
fn request_matches_kafkas_http_access_token_retriever() {
    let p = props(&[("sasl.oauthbearer.token.endpoint.url", "http://127.0.0.1:1/token"), ("sasl.jaas.config", JAAS)]);
    let s = OAuthSettings::from_properties(&p).unwrap();
    assert_eq!(s.body(), "grant_type=client_credentials&scope=kafka+read");
    assert_eq!(s.authorization().expose(), format!("Basic {}", B64.encode("mirror-a:s3cret:&=x")));
    let mut p2 = p.clone();
    p2.insert("sasl.oauthbearer.header.urlencode".into(), "true".into());
    let s2 = OAuthSettings::from_properties(&p2).unwrap();
    assert_eq!(s2.authorization().expose(), format!("Basic {}", B64.encode("mirror-a:s3cret%3A%26%3Dx")));
    assert!(!format!("{s:?}").contains("s3cret"));
    assert_eq!(
        (s.refresh, s.retry_backoff, s.retry_backoff_max),
        (RefreshConfig::default(), Duration::from_millis(100), Duration::from_secs(10))
    );
}

#[test]
fn settings_errors_name_the_key_and_hide_the_secret() {
    let e = |pairs: &[(&str, &str)]| OAuthSettings::from_properties(&props(pairs)).unwrap_err();
    assert_eq!(e(&[("sasl.jaas.config", JAAS)]).key, "sasl.oauthbearer.token.endpoint.url");
    let url = ("sasl.oauthbearer.token.endpoint.url", "http://h:1/t");
    assert_eq!(
        e(&[("sasl.oauthbearer.token.endpoint.url", "ftp://h/t"), ("sasl.jaas.config", JAAS)]).key,
        "sasl.oauthbearer.token.endpoint.url"
    );
    let no_secret = r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="a";"#;
    assert!(e(&[url, ("sasl.jaas.config", no_secret)]).reason.contains("clientSecret"));
    let no_id =
        r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientSecret="hunter2";"#;
    let err = e(&[url, ("sasl.jaas.config", no_id)]);
    assert!(err.reason.contains("clientId") && !err.to_string().contains("hunter2"), "{err}");
    let plain = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="hunter2";"#;
    assert!(e(&[url, ("sasl.jaas.config", plain)]).reason.contains("does not fit"));
    assert_eq!(
        e(&[url, ("sasl.jaas.config", JAAS), ("sasl.login.refresh.window.factor", "0.3")]).key,
        "sasl.login.refresh.window.factor"
    );
    assert_eq!(
        e(&[url, ("sasl.jaas.config", JAAS), ("sasl.login.callback.handler.class", "x.Other")]).key,
        "sasl.login.callback.handler.class"
    );
    let java = OAuthSettings::from_properties(&props(&[
        url,
        ("sasl.jaas.config", JAAS),
        (
            "sasl.login.callback.handler.class",
            "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
        ),
    ]));
    assert!(java.is_ok());
}

/// Kafka's `ExpiringCredentialRefreshingLoginTest` cases, in seconds.
#[test]
fn refresh_time_follows_kafka() {
    let cfg = RefreshConfig::default();
    let s = 1000;
    // 1 h token issued now: 0.8 of it (jitter draw 0) = 2880 s, before the 300 s buffer.
    assert_eq!(refresh_at_ms(&cfg, 0, Some(0), 3600 * s, 0.0), 2880 * s);
    // Jitter adds up to 0.05 of the lifetime: 0.85 × 3600 = 3060 < 3300.
    assert_eq!(refresh_at_ms(&cfg, 0, Some(0), 3600 * s, 1.0), 3060 * s);
    // 1000 s token: 800 s would be inside the 300 s buffer, so at 700 s.
    assert_eq!(refresh_at_ms(&cfg, 0, Some(0), 1000 * s, 0.0), 700 * s);
    // Remaining life (20 s) below min period + buffer: both ignored, 0.8 × 20 s.
    assert_eq!(refresh_at_ms(&cfg, 0, Some(0), 20 * s, 0.0), 16 * s);
    // Never sooner than the minimum period: token issued long ago.
    let c2 = RefreshConfig { buffer_seconds: 0, ..cfg };
    assert_eq!(refresh_at_ms(&c2, 5000 * s, Some(0), 6000 * s, 0.0), 5060 * s);
    // Already expired: 10 s from now.
    assert_eq!(refresh_at_ms(&cfg, 100 * s, None, 50 * s, 0.0), 110 * s);
}

fn jwt(claims: &str) -> String {
    let e = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!("{}.{}.sig", e(r#"{"alg":"ES256"}"#), e(claims))
}

#[test]
fn tokens_are_read_like_kafkas_login_validator() {
    let t =
        AccessToken::parse(&jwt(r#"{"sub":"mirror-a","exp":2000,"iat":1000,"scope":"a b"}"#), "sub", "scope").unwrap();
    assert_eq!((t.principal.as_str(), t.issued_at_ms, t.expires_at_ms), ("mirror-a", Some(1_000_000), 2_000_000));
    assert!(AccessToken::parse(&jwt(r#"{"sub":"a"}"#), "sub", "scope").unwrap_err().contains("exp"));
    assert!(AccessToken::parse(&jwt(r#"{"exp":2}"#), "sub", "scope").unwrap_err().contains("`sub`"));
    let custom = AccessToken::parse(&jwt(r#"{"client":"c","exp":2,"scp":["x"]}"#), "client", "scp").unwrap();
    assert_eq!(custom.principal, "c");
    assert!(AccessToken::parse(&jwt(r#"{"sub":"a","exp":2,"scope":7}"#), "sub", "scope").is_err());
    let e = AccessToken::parse("opaque-token-value", "sub", "scope").unwrap_err();
    assert!(e.contains("not a JWT") && !e.contains("opaque-token-value"));
}

#[test]
fn error_answers_are_named_by_status_only() {
    assert_eq!(
        failed_answer(401),
        "answered HTTP 401: the endpoint refused the client credentials (check clientId and clientSecret)"
    );
    assert!(failed_answer(503).starts_with("answered HTTP 503: "));
    assert!(failed_answer(302).ends_with("not a token answer"));
    let long = format!("line1\nline2 {}", "d".repeat(5000));
    let logged = logged_body(long.as_bytes());
    assert!(logged.starts_with("line1\\nline2 ") && logged.len() < MAX_LOGGED_BODY_CHARS + 10, "{logged}");
}

#[tokio::test]
async fn a_failed_token_answer_never_shows_its_body() {
    let body = r#"{"error":"invalid_client","error_description":"internal-host-secret-marker"}"#;
    let (url, n) = endpoint(vec![(401, body.into())]);
    let p = props(&[("sasl.oauthbearer.token.endpoint.url", &url), ("sasl.jaas.config", JAAS)]);
    let login = OAuthBearerLogin::shared("test:failed-answer", &p).unwrap();
    let e = login.token().await.unwrap_err();
    assert!(e.contains("answered HTTP 401") && e.contains("(not retried)"), "{e}");
    assert!(!e.contains("internal-host-secret-marker") && !e.contains("invalid_client"), "{e}");
    assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn a_login_is_shared_by_one_owner_only() {
    let p = props(&[("sasl.oauthbearer.token.endpoint.url", "http://127.0.0.1:1/token"), ("sasl.jaas.config", JAAS)]);
    let a1 = OAuthBearerLogin::shared("mirror:a", &p).unwrap();
    let a2 = OAuthBearerLogin::shared("mirror:a", &p).unwrap();
    let b = OAuthBearerLogin::shared("mirror:b", &p).unwrap();
    assert!(Arc::ptr_eq(&a1, &a2));
    assert!(!Arc::ptr_eq(&a1, &b));
}

#[test]
fn extensions_are_encoded_like_kafkas_initial_response() {
    let jaas = r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="c" clientSecret="s" extension_logicalCluster="lkc-abc" extension_identityPoolId="pool-1";"#;
    let p = props(&[("sasl.oauthbearer.token.endpoint.url", "http://127.0.0.1:1/token"), ("sasl.jaas.config", jaas)]);
    let s = OAuthSettings::from_properties(&p).unwrap();
    assert_eq!(
        initial_response("a.b.c", &s.extensions),
        b"n,,\x01auth=Bearer a.b.c\x01identityPoolId=pool-1\x01logicalCluster=lkc-abc\x01\x01".to_vec()
    );
    assert_eq!(initial_response("a.b.c", &BTreeMap::new()), b"n,,\x01auth=Bearer a.b.c\x01\x01".to_vec());
    let bad = |opt: &str| {
        let jaas = format!(
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="c" clientSecret="s" {opt};"#
        );
        let p = props(&[("sasl.oauthbearer.token.endpoint.url", "http://h:1/t"), ("sasl.jaas.config", &jaas)]);
        OAuthSettings::from_properties(&p).unwrap_err()
    };
    assert!(bad(r#"extension_auth="x""#).reason.contains("`auth`"));
    assert!(bad(r#"extension_a1="x""#).reason.contains("invalid"));
    let e = bad("extension_ok=\"bad\u{1}value\"");
    assert!(e.reason.contains("value") && !e.reason.contains("bad"), "{e}");
}

#[test]
fn zero_login_timeouts_mean_none_and_urls_are_shown_without_credentials() {
    let p = props(&[
        ("sasl.oauthbearer.token.endpoint.url", "http://user:pw@127.0.0.1:1/token"),
        ("sasl.jaas.config", JAAS),
        ("sasl.login.connect.timeout.ms", "0"),
        ("sasl.login.read.timeout.ms", "0"),
    ]);
    let s = OAuthSettings::from_properties(&p).unwrap();
    assert_eq!((s.connect_timeout, s.read_timeout), (None, None));
    assert_eq!(s.shown_endpoint, "http://127.0.0.1:1/token");
    assert!(!format!("{s:?}").contains("pw"));
    let d = OAuthSettings::from_properties(&props(&[
        ("sasl.oauthbearer.token.endpoint.url", "http://h:1/t"),
        ("sasl.jaas.config", JAAS),
    ]))
    .unwrap();
    assert_eq!((d.connect_timeout, d.read_timeout), (Some(DEFAULT_CONNECT_TIMEOUT), Some(DEFAULT_READ_TIMEOUT)));
}

#[test]
fn tokens_must_be_b64tokens() {
    assert!(is_b64token("eyJ.eyJ-_~+/.x=="));
    assert!(!is_b64token("a b") && !is_b64token("a\u{1}b") && !is_b64token("==") && !is_b64token("a=b"));
    let t = jwt(r#"{"sub":"a","exp":2}"#);
    assert!(AccessToken::parse(&format!("{t}\u{1}x"), "sub", "scope").unwrap_err().contains("b64token"));
}

/// A token endpoint on 127.0.0.1 answering each request with the next of `answers`
/// (status, body); counts requests.
fn endpoint(answers: Vec<(u16, String)>) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}/token", server.server_addr().to_ip().unwrap());
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = n.clone();
    std::thread::spawn(move || {
        for (req, (status, body)) in server.incoming_requests().zip(answers.into_iter().cycle()) {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = req.respond(tiny_http::Response::from_string(body).with_status_code(status));
        }
    });
    (url, n)
}

fn token_body(exp_s: i64) -> String {
    format!(r#"{{"access_token":"{}","token_type":"bearer"}}"#, jwt(&format!(r#"{{"sub":"a","exp":{exp_s}}}"#)))
}

#[tokio::test]
async fn a_5xx_answer_is_retried_and_the_next_200_used() {
    let exp = now_ms() / 1000 + 3600;
    let (url, n) = endpoint(vec![(503, "busy".into()), (200, token_body(exp))]);
    let p = props(&[("sasl.oauthbearer.token.endpoint.url", &url), ("sasl.jaas.config", JAAS)]);
    let login = OAuthBearerLogin::shared("test:retry", &p).unwrap();
    let (_, principal) = login.token().await.unwrap();
    assert_eq!(principal, "a");
    assert_eq!((n.load(std::sync::atomic::Ordering::SeqCst), login.requests_sent()), (2, 2));
}

#[tokio::test]
async fn an_already_expired_token_is_a_failure_held_for_the_relogin_delay() {
    let exp = now_ms() / 1000 - 30;
    let (url, n) = endpoint(vec![(200, token_body(exp))]);
    let p = props(&[("sasl.oauthbearer.token.endpoint.url", &url), ("sasl.jaas.config", JAAS)]);
    let login = OAuthBearerLogin::shared("test:expired", &p).unwrap();
    let e = login.token().await.unwrap_err();
    assert!(e.contains("expired"), "{e}");
    let e2 = login.token().await.unwrap_err();
    assert_eq!(e, e2);
    assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), 1, "the endpoint was asked again within 10 s");
}

/// A [`SaslTransport`] answering SaslAuthenticate with `answers` in turn, recording requests.
struct MockTransport {
    answers: std::collections::VecDeque<kafka_protocol::messages::SaslAuthenticateResponse>,
    sent: Vec<Vec<u8>>,
}

impl SaslTransport for MockTransport {
    fn peer(&self) -> String {
        "broker:9092".into()
    }
    async fn sasl_handshake(
        &mut self,
        _: &kafka_protocol::messages::SaslHandshakeRequest,
    ) -> Result<kafka_protocol::messages::SaslHandshakeResponse, ClientError> {
        unreachable!("authenticate does not send SaslHandshake")
    }
    async fn sasl_authenticate(
        &mut self,
        req: &SaslAuthenticateRequest,
    ) -> Result<kafka_protocol::messages::SaslAuthenticateResponse, ClientError> {
        self.sent.push(req.auth_bytes.to_vec());
        Ok(self.answers.pop_front().expect("an unexpected SaslAuthenticate"))
    }
}

#[tokio::test]
async fn authenticate_sends_kafkas_bytes_and_answers_an_error_challenge_with_0x01() {
    use kafka_protocol::messages::SaslAuthenticateResponse as R;
    use kafka_protocol::protocol::StrBytes;
    let exp = now_ms() / 1000 + 3600;
    let (url, _) = endpoint(vec![(200, token_body(exp))]);
    let p = props(&[("sasl.oauthbearer.token.endpoint.url", &url), ("sasl.jaas.config", JAAS)]);
    let login = OAuthBearerLogin::shared("test:authenticate", &p).unwrap();
    let token = jwt(&format!(r#"{{"sub":"a","exp":{exp}}}"#));
    let first = format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes();
    // Accepted at once.
    let mut ok = MockTransport { answers: [R::default()].into(), sent: vec![] };
    authenticate(&mut ok, &login).await.unwrap();
    assert_eq!(ok.sent, vec![first.clone()]);
    // An error challenge, answered with 0x01, then the broker's failure.
    let challenge = R::default().with_auth_bytes(Bytes::from_static(br#"{"status":"invalid_token"}"#));
    let failure = R::default()
        .with_error_code(SASL_AUTHENTICATION_FAILED)
        .with_error_message(Some(StrBytes::from_static_str("token expired")));
    let mut refused = MockTransport { answers: [challenge.clone(), failure].into(), sent: vec![] };
    let e = authenticate(&mut refused, &login).await.unwrap_err();
    assert_eq!(refused.sent, vec![first.clone(), vec![1u8]]);
    match e {
        ClientError::Authentication { error, message, .. } => {
            assert_eq!(error, SASL_AUTHENTICATION_FAILED);
            assert!(message.contains("token expired") && message.contains("invalid_token"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A challenge and then success is not a state Kafka's client accepts.
    let mut odd = MockTransport { answers: [challenge, R::default()].into(), sent: vec![] };
    match authenticate(&mut odd, &login).await.unwrap_err() {
        ClientError::Authentication { error, .. } => assert_eq!(error, ILLEGAL_SASL_STATE),
        other => panic!("{other:?}"),
    }
}

#[test]
fn kafka_4_1_client_credentials_properties_win_over_the_jaas_options() {
    let bare = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;";
    let url = ("sasl.oauthbearer.token.endpoint.url", "http://h:1/t");
    let s = OAuthSettings::from_properties(&props(&[
        url,
        ("sasl.jaas.config", bare),
        ("sasl.oauthbearer.client.credentials.client.id", "new-id"),
        ("sasl.oauthbearer.client.credentials.client.secret", "new-secret"),
        ("sasl.oauthbearer.scope", "s1 s2"),
        (
            "sasl.oauthbearer.jwt.retriever.class",
            "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever",
        ),
    ]))
    .unwrap();
    assert_eq!((s.client_id.as_str(), s.scope.as_deref()), ("new-id", Some("s1 s2")));
    assert_eq!(s.authorization().expose(), format!("Basic {}", B64.encode("new-id:new-secret")));
    // Both given: the properties win (Kafka's ConfigOrJaas).
    let both = OAuthSettings::from_properties(&props(&[
        url,
        ("sasl.jaas.config", JAAS),
        ("sasl.oauthbearer.client.credentials.client.secret", "new-secret"),
    ]))
    .unwrap();
    assert_eq!(both.authorization().expose(), format!("Basic {}", B64.encode("mirror-a:new-secret")));
    assert_eq!(both.scope.as_deref(), Some("kafka read"));
    let e = OAuthSettings::from_properties(&props(&[url, ("sasl.jaas.config", bare)])).unwrap_err();
    assert!(e.reason.contains("client.credentials.client.id"), "{e}");
    let e = OAuthSettings::from_properties(&props(&[
        url,
        ("sasl.jaas.config", JAAS),
        ("sasl.oauthbearer.jwt.retriever.class", "x.FileJwtRetriever"),
    ]))
    .unwrap_err();
    assert_eq!(e.key, "sasl.oauthbearer.jwt.retriever.class");
}
