//! An OAuth 2 authorization server for the OAUTHBEARER tests, in the test process: a token
//! endpoint with the client-credentials grant (RFC 6749 §4.4: POST form
//! `grant_type=client_credentials[&scope=...]`, client authenticated with HTTP Basic) issuing
//! ES256-signed JWTs (RFC 7519; signed with ring on a P-256 key made at start), and a JWKS
//! endpoint (RFC 7517) with that key for the brokers' `OAuthBearerValidatorCallbackHandler`.
//! It counts token requests per client and can make tokens short-lived.
//!
//! [`OAuthServer::broker_props`] and [`OAuthServer::java_opts`] give what a `scripts/kafka.sh
//! start --secure SASL_*` cluster needs to accept these tokens on its SECURE listener.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

/// The `aud` of every token, and the brokers' `sasl.oauthbearer.expected.audience`.
pub const AUDIENCE: &str = "kafka-test";
const KID: &str = "mirrorgate-test-key";
const B64U: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// One token request as the endpoint saw it.
#[derive(Debug, Clone)]
pub struct TokenRequest {
    /// The client id of the Basic authorization (empty when there was none).
    pub client_id: String,
    /// Whether a token was issued.
    pub issued: bool,
    /// The form body.
    pub body: String,
    /// When, since the server started.
    pub at: std::time::Duration,
}

struct Client {
    secret: String,
    sub: String,
    lifetime_s: i64,
    audience: String,
}

struct State {
    key: EcdsaKeyPair,
    rng: ring::rand::SystemRandom,
    clients: Mutex<HashMap<String, Client>>,
    requests: Mutex<Vec<TokenRequest>>,
    issued: Mutex<Vec<String>>,
    started: std::time::Instant,
}

/// A running token + JWKS server on 127.0.0.1 (stops when the test process exits).
pub struct OAuthServer {
    /// Its port.
    pub port: u16,
    state: Arc<State>,
}

impl OAuthServer {
    /// Starts the server (no clients yet).
    pub fn start() -> Self {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let state = Arc::new(State {
            key,
            rng,
            clients: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            issued: Mutex::new(Vec::new()),
            started: std::time::Instant::now(),
        });
        let server = tiny_http::Server::http("127.0.0.1:0").expect("bind the OAuth test server");
        let port = server.server_addr().to_ip().expect("an IP listener").port();
        let st = state.clone();
        std::thread::spawn(move || {
            for req in server.incoming_requests() {
                handle(&st, req);
            }
        });
        Self { port, state }
    }

    /// `http://127.0.0.1:PORT/token`.
    pub fn token_url(&self) -> String {
        format!("http://127.0.0.1:{}/token", self.port)
    }

    /// `http://127.0.0.1:PORT/jwks`.
    pub fn jwks_url(&self) -> String {
        format!("http://127.0.0.1:{}/jwks", self.port)
    }

    /// Registers a client whose tokens carry `sub` and are valid for `lifetime_s` seconds
    /// (negative: expired when issued).
    pub fn add_client(&self, id: &str, secret: &str, sub: &str, lifetime_s: i64) {
        let c = Client { secret: secret.into(), sub: sub.into(), lifetime_s, audience: AUDIENCE.into() };
        self.state.clients.lock().unwrap().insert(id.into(), c);
    }

    /// Like [`OAuthServer::add_client`], with tokens for `audience` (a broker expecting
    /// another refuses them; mirrorgate cannot tell).
    pub fn add_client_for_audience(&self, id: &str, secret: &str, sub: &str, lifetime_s: i64, audience: &str) {
        let c = Client { secret: secret.into(), sub: sub.into(), lifetime_s, audience: audience.into() };
        self.state.clients.lock().unwrap().insert(id.into(), c);
    }

    /// Every token request by `client_id` so far.
    pub fn requests(&self, client_id: &str) -> Vec<TokenRequest> {
        self.state.requests.lock().unwrap().iter().filter(|r| r.client_id == client_id).cloned().collect()
    }

    /// Time since the server started (the clock of [`TokenRequest::at`]).
    pub fn elapsed(&self) -> std::time::Duration {
        self.state.started.elapsed()
    }

    /// Every token issued so far (for the tests' secret greps).
    pub fn issued_tokens(&self) -> Vec<String> {
        self.state.issued.lock().unwrap().clone()
    }

    /// A signed token for `sub` valid for `lifetime_s` seconds, as the endpoint would issue.
    pub fn mint(&self, sub: &str, lifetime_s: i64) -> String {
        mint(&self.state, sub, lifetime_s, AUDIENCE)
    }

    /// Broker properties for a `--secure SASL_*` cluster's SECURE listener to accept
    /// OAUTHBEARER tokens from this server besides PLAIN and SCRAM (Kafka's
    /// `OAuthBearerValidatorCallbackHandler`, in `org.apache.kafka.common.security.oauthbearer`
    /// in 3.9 and 4.x alike; the `...oauthbearer.secured` one is gone in 4.0).
    pub fn broker_props(&self) -> Vec<String> {
        vec![
            "listener.name.secure.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER".into(),
            "listener.name.secure.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;".into(),
            "listener.name.secure.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler".into(),
            format!("sasl.oauthbearer.jwks.endpoint.url={}", self.jwks_url()),
            // Kafka 4.1's default `DefaultJwtValidator`, as the callback handler builds it,
            // has no JWKS resolver and falls back to `ClientJwtValidator`, which checks
            // neither signature nor expiry (seen: a token expired 2 min earlier was
            // accepted). `BrokerJwtValidator` builds its resolver from the JWKS URL.
            "sasl.oauthbearer.jwt.validator.class=org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator".into(),
            format!("sasl.oauthbearer.expected.audience={AUDIENCE}"),
            // Tokens are short-lived in the tests; the default skew of 30 s would hide expiry.
            "sasl.oauthbearer.clock.skew.seconds=1".into(),
        ]
    }

    /// The JVM option Kafka 4.x needs before it fetches these URLs (brokers and Java clients:
    /// `org.apache.kafka.sasl.oauthbearer.allowed.urls`; 3.9.1 allows all by default).
    pub fn java_opts(&self) -> String {
        format!("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={},{}", self.token_url(), self.jwks_url())
    }
}

fn mint(st: &State, sub: &str, lifetime_s: i64, audience: &str) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let header = serde_json::json!({"alg": "ES256", "typ": "JWT", "kid": KID});
    let claims = serde_json::json!({
        "iss": "mirrorgate-test-issuer",
        "sub": sub,
        "aud": audience,
        "iat": now.min(now + lifetime_s),
        "exp": now + lifetime_s,
        "scope": "kafka",
    });
    let input = format!("{}.{}", B64U.encode(header.to_string()), B64U.encode(claims.to_string()));
    let sig = st.key.sign(&st.rng, input.as_bytes()).unwrap();
    let token = format!("{input}.{}", B64U.encode(sig.as_ref()));
    st.issued.lock().unwrap().push(token.clone());
    token
}

fn respond(req: tiny_http::Request, status: u16, body: String) {
    let json = tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap();
    let _ = req.respond(tiny_http::Response::from_string(body).with_status_code(status).with_header(json));
}

fn handle(st: &State, mut req: tiny_http::Request) {
    match (req.method(), req.url()) {
        (tiny_http::Method::Get, "/jwks") => {
            // Uncompressed P-256 point: 0x04 || X || Y.
            let point = st.key.public_key().as_ref();
            let jwk = serde_json::json!({
                "kty": "EC", "crv": "P-256", "kid": KID, "use": "sig", "alg": "ES256",
                "x": B64U.encode(&point[1..33]), "y": B64U.encode(&point[33..65]),
            });
            respond(req, 200, serde_json::json!({ "keys": [jwk] }).to_string());
        }
        (tiny_http::Method::Post, "/token") => {
            let mut body = String::new();
            let _ = std::io::Read::read_to_string(req.as_reader(), &mut body);
            let basic = req
                .headers()
                .iter()
                .find(|h| h.field.equiv("Authorization"))
                .and_then(|h| h.value.as_str().strip_prefix("Basic ").map(str::to_string))
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|s| s.split_once(':').map(|(a, b)| (a.to_string(), b.to_string())));
            let (id, secret) = basic.unwrap_or_default();
            let sub = {
                let clients = st.clients.lock().unwrap();
                clients
                    .get(&id)
                    .filter(|c| c.secret == secret)
                    .map(|c| (c.sub.clone(), c.lifetime_s, c.audience.clone()))
            };
            let grant_ok = body.split('&').any(|kv| kv == "grant_type=client_credentials");
            let issued = sub.is_some() && grant_ok;
            st.requests.lock().unwrap().push(TokenRequest {
                client_id: id,
                issued,
                body: body.clone(),
                at: st.started.elapsed(),
            });
            match sub {
                _ if !grant_ok => respond(req, 400, r#"{"error":"unsupported_grant_type"}"#.into()),
                None => respond(
                    req,
                    401,
                    r#"{"error":"invalid_client","error_description":"client authentication failed"}"#.into(),
                ),
                Some((sub, lifetime, audience)) => {
                    let token = mint(st, &sub, lifetime, &audience);
                    let answer = serde_json::json!({
                        "access_token": token, "token_type": "Bearer", "expires_in": lifetime, "scope": "kafka",
                    });
                    respond(req, 200, answer.to_string());
                }
            }
        }
        _ => respond(req, 404, r#"{"error":"not_found"}"#.into()),
    }
}
