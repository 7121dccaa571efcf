//! SASL/OAUTHBEARER (RFC 7628, KIP-255, KIP-768) towards a broker: an access token from an
//! OAuth 2 token endpoint with the client-credentials grant (RFC 6749 §4.4), cached and
//! refreshed before it expires, sent in the GS2 initial response.
//!
//! Behaviour follows Kafka's Java client:
//! - `HttpAccessTokenRetriever`: POST `grant_type=client_credentials[&scope=...]` as
//!   `application/x-www-form-urlencoded`, HTTP Basic `clientId:clientSecret` (each URL-encoded
//!   first when `sasl.oauthbearer.header.urlencode=true`, RFC 6749 §2.3.1; Kafka's default is
//!   false), `Accept: application/json`, `Cache-Control: no-cache`; 200 and 201 carry the
//!   token in `access_token`; 400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413,
//!   414, 415, 501 and 505 are not retried, anything else is retried with a backoff from
//!   `sasl.login.retry.backoff.ms` doubling per attempt within `sasl.login.retry.backoff.max.ms`
//!   (Kafka's `Retry`). Unlike Kafka, an error answer is reported by its status and a fixed
//!   meaning, never its body (which goes to the debug log, truncated): see [`failed_answer`].
//! - `LoginAccessTokenValidator`: the token is a JWT whose payload (not verified: the broker
//!   verifies it) holds `exp` (seconds), the subject claim (`sasl.oauthbearer.sub.claim.name`,
//!   `sub`), optionally `iat` and the scope claim (`sasl.oauthbearer.scope.claim.name`,
//!   `scope`, a string or a list of strings).
//! - `ExpiringCredentialRefreshingLogin`: a refresh at `sasl.login.refresh.window.factor`
//!   (+ up to `sasl.login.refresh.window.jitter`) of the lifetime, no sooner than
//!   `sasl.login.refresh.min.period.seconds` from now and no later than
//!   `sasl.login.refresh.buffer.seconds` before expiry (both ignored when the lifetime left
//!   is shorter than their sum); a failed refresh is tried again every 10 s while the current
//!   token is kept (see [`refresh_at_ms`]).
//! - `OAuthBearerSaslClient`: client-first `n,,\x01auth=Bearer <token>\x01\x01`; a non-empty
//!   server answer is a JSON error challenge, answered with `\x01`, after which the broker
//!   fails the exchange with SASL_AUTHENTICATION_FAILED and its message.
//!
//! One [`OAuthBearerLogin`] per owner (a mirror, the destination) and settings is shared by
//! all that owner's connections ([`OAuthBearerLogin::shared`]); another mirror with the same
//! settings gets its own. The client secret and tokens are [`Secret`]s: never in `Debug`,
//! logs or error messages.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::SaslAuthenticateRequest;

use crate::client::conn::ClientError;
use crate::client::sasl::{SaslTransport, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED};
use crate::client::security::{sec_err, Secret, SecurityError};
mod settings;
mod token;

pub(crate) use settings::shown_url;
pub use settings::{OAuthSettings, RefreshConfig, DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, OAUTH_KEYS};
#[cfg(test)]
use token::is_b64token;
pub use token::{initial_response, AccessToken};

/// Pause before another token request after one failed (Kafka's
/// `ExpiringCredentialRefreshingLogin.DELAY_SECONDS_BEFORE_NEXT_RETRY_WHEN_RELOGIN_FAILS`).
/// Connects in that time fail with the same error without asking the endpoint again.
pub const RELOGIN_DELAY: Duration = Duration::from_secs(10);
/// Least overall time allowed to one token request ([`OAuthBearerLogin`]'s attempt timeout).
pub const MIN_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);
/// Most characters of a token endpoint's error body written to mirrorgate's debug log (never
/// to an error message: see [`failed_answer`]).
const MAX_LOGGED_BODY_CHARS: usize = 200;
/// Largest token endpoint response read, bytes.
const MAX_RESPONSE_BYTES: usize = 1 << 20;
/// HTTP statuses not retried (Kafka's `HttpAccessTokenRetriever.UNRETRYABLE_HTTP_CODES`).
const UNRETRYABLE: &[u16] = &[400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413, 414, 415, 501, 505];
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
/// When to refresh a token valid from `start_ms` (its `iat`, else `now_ms`) to `expire_ms`,
/// all epoch ms; `jitter_draw` is a uniform draw in [0, 1). Kafka's
/// `ExpiringCredentialRefreshingLogin.refreshMs`, without its "exit the refresh thread" cases:
/// an already expired token is refreshed in [`RELOGIN_DELAY`].
pub fn refresh_at_ms(cfg: &RefreshConfig, now_ms: i64, start_ms: Option<i64>, expire_ms: i64, jitter_draw: f64) -> i64 {
    if now_ms > expire_ms {
        return now_ms + RELOGIN_DELAY.as_millis() as i64;
    }
    let pct = cfg.window_factor + cfg.window_jitter * jitter_draw;
    let (min_period_ms, buffer_ms) = (cfg.min_period_seconds as i64 * 1000, cfg.buffer_seconds as i64 * 1000);
    if now_ms + min_period_ms + buffer_ms > expire_ms {
        return now_ms + ((expire_ms - now_ms) as f64 * pct) as i64;
    }
    let start = start_ms.unwrap_or(now_ms);
    let proposed = start + ((expire_ms - start) as f64 * pct) as i64;
    let buffer_begins = expire_ms - buffer_ms;
    if proposed > buffer_begins {
        return buffer_begins;
    }
    proposed.max(now_ms + min_period_ms)
}

#[derive(Default)]
struct LoginState {
    token: Option<AccessToken>,
    refresh_at_ms: i64,
    /// The last failed token request, answered to connects for [`RELOGIN_DELAY`].
    failure: Option<(Instant, String)>,
    refresher: bool,
}

/// One owner's token source: the settings, an HTTP client and the cached token.
pub struct OAuthBearerLogin {
    settings: OAuthSettings,
    http: reqwest::Client,
    state: tokio::sync::Mutex<LoginState>,
    /// Token requests sent (each HTTP attempt).
    requests: std::sync::atomic::AtomicU64,
    key: String,
    owner: String,
}

impl std::fmt::Debug for OAuthBearerLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthBearerLogin").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl PartialEq for OAuthBearerLogin {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for OAuthBearerLogin {}

type Registry = Mutex<HashMap<String, Weak<OAuthBearerLogin>>>;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

impl OAuthBearerLogin {
    /// The login of `owner` (e.g. `mirror:<name>`) for `props`: the same one while any of its
    /// users lives and the settings are the same, so the owner's connections share one token;
    /// another owner never gets it.
    ///
    /// # Errors
    /// As [`OAuthSettings::from_properties`], or an HTTP client that cannot be built.
    pub fn shared(owner: &str, props: &BTreeMap<String, String>) -> Result<Arc<Self>, SecurityError> {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        let settings = OAuthSettings::from_properties(props)?;
        let mut material = format!("{owner}\n");
        for k in OAUTH_KEYS.iter().chain(&["sasl.jaas.config"]) {
            material.push_str(&format!("{k}={}\n", props.get(*k).map(String::as_str).unwrap_or_default()));
        }
        let key: String = ring::digest::digest(&ring::digest::SHA256, material.as_bytes())
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut reg = REGISTRY.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        reg.retain(|_, w| w.strong_count() > 0);
        if let Some(login) = reg.get(&key).and_then(Weak::upgrade) {
            return Ok(login);
        }
        let mut http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).http1_only();
        if let Some(t) = settings.connect_timeout {
            http = http.connect_timeout(t);
        }
        if let Some(t) = settings.read_timeout {
            http = http.read_timeout(t);
        }
        if let Some(tls) = &settings.tls {
            http = http.use_preconfigured_tls((**tls).clone());
        }
        let http = http.build().map_err(|e| {
            sec_err("sasl.oauthbearer.token.endpoint.url", format!("cannot build the HTTP client: {e}"))
        })?;
        let login = Arc::new(Self {
            settings,
            http,
            state: tokio::sync::Mutex::new(LoginState::default()),
            requests: Default::default(),
            key: key.clone(),
            owner: owner.to_string(),
        });
        reg.insert(key, Arc::downgrade(&login));
        Ok(login)
    }

    /// Whose token source it is (e.g. `mirror:<name>`).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The settings.
    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// Token requests this login sent (HTTP attempts).
    pub fn requests_sent(&self) -> u64 {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A valid token: the cached one, else a new one from the endpoint (one request at a time
    /// per login; a failure is answered for [`RELOGIN_DELAY`] without asking again). Starts the
    /// background refresher with the first token.
    ///
    /// # Errors
    /// Why no token could be had, naming the endpoint and its answer (never the secret).
    pub async fn token(self: &Arc<Self>) -> Result<(Secret, String), String> {
        let mut st = self.state.lock().await;
        if let Some(t) = st.token.as_ref().filter(|t| now_ms() < t.expires_at_ms) {
            return Ok((t.value.clone(), t.principal.clone()));
        }
        if let Some((at, e)) = &st.failure {
            if at.elapsed() < RELOGIN_DELAY {
                return Err(e.clone());
            }
        }
        match self.fetch().await {
            Ok(t) => {
                let out = (t.value.clone(), t.principal.clone());
                self.install(&mut st, t);
                Ok(out)
            }
            Err(e) => {
                st.failure = Some((Instant::now(), e.clone()));
                Err(e)
            }
        }
    }

    fn install(self: &Arc<Self>, st: &mut LoginState, t: AccessToken) {
        let now = now_ms();
        st.refresh_at_ms = refresh_at_ms(&self.settings.refresh, now, t.issued_at_ms, t.expires_at_ms, rand::random());
        tracing::info!(
            endpoint = %self.settings.shown_endpoint,
            principal = %t.principal,
            expires_in_s = (t.expires_at_ms - now) / 1000,
            refresh_in_s = (st.refresh_at_ms - now) / 1000,
            "OAUTHBEARER token obtained"
        );
        st.token = Some(t);
        st.failure = None;
        if !st.refresher && tokio::runtime::Handle::try_current().is_ok() {
            st.refresher = true;
            tokio::spawn(refresher(Arc::downgrade(self)));
        }
    }

    /// One token request with Kafka's retries (`Retry.execute`).
    async fn fetch(&self) -> Result<AccessToken, String> {
        let started = Instant::now();
        let mut attempt: u32 = 0;
        let mut first_error = None;
        loop {
            attempt += 1;
            let limit = self.attempt_timeout();
            let result = match tokio::time::timeout(limit, self.attempt()).await {
                Ok(r) => r,
                Err(_) => Err((
                    format!(
                        "token endpoint {}: no complete answer within {} ms",
                        self.settings.shown_endpoint,
                        limit.as_millis()
                    ),
                    true,
                )),
            };
            match result {
                // A token already expired by this clock (Kafka's refreshing login gives up on
                // it the same way): a failure, held for RELOGIN_DELAY, not a token to fetch
                // again on every connect.
                Ok(t) if t.expires_at_ms <= now_ms() => {
                    return Err(format!(
                    "token endpoint {} issued a token that expired {} s ago by this host's clock (check the clocks)",
                    self.settings.shown_endpoint,
                    (now_ms() - t.expires_at_ms) / 1000
                ))
                }
                Ok(t) => return Ok(t),
                Err((e, retryable)) => {
                    let e = first_error.get_or_insert(e).clone();
                    let left = self.settings.retry_backoff_max.saturating_sub(started.elapsed());
                    let wait = self.settings.retry_backoff.saturating_mul(1u32 << (attempt - 1).min(20)).min(left);
                    if !retryable || wait.is_zero() {
                        return Err(e);
                    }
                    tracing::warn!(endpoint = %self.settings.shown_endpoint, attempt, error = %e, wait_ms = wait.as_millis() as u64, "OAUTHBEARER token request failed; retrying");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// The longest one token request may take, connect to last byte: the connect and read
    /// timeouts together, at least [`MIN_ATTEMPT_TIMEOUT`] (a drip-feeding endpoint cannot
    /// hold the login for ever).
    fn attempt_timeout(&self) -> Duration {
        let s = &self.settings;
        (s.connect_timeout.unwrap_or_default() + s.read_timeout.unwrap_or_default()).max(MIN_ATTEMPT_TIMEOUT)
    }

    /// One HTTP POST; the error says whether it may be retried.
    async fn attempt(&self) -> Result<AccessToken, (String, bool)> {
        let s = &self.settings;
        let url = &s.shown_endpoint;
        self.requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut authorization = reqwest::header::HeaderValue::from_str(s.authorization().expose()).map_err(|_| {
            (format!("token endpoint {url}: clientId or clientSecret cannot be sent in a header"), false)
        })?;
        authorization.set_sensitive(true);
        let req = self
            .http
            .post(s.endpoint.clone())
            .header(reqwest::header::AUTHORIZATION, authorization)
            .header(reqwest::header::ACCEPT, "application/json")
            .header(reqwest::header::CACHE_CONTROL, "no-cache")
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(s.body());
        let mut resp = req
            .send()
            .await
            .map_err(|e| (format!("token endpoint {url}: request failed: {}", error_chain(&e.without_url())), true))?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(c)) if body.len() + c.len() <= MAX_RESPONSE_BYTES => body.extend_from_slice(&c),
                Ok(Some(_)) => {
                    return Err((format!("token endpoint {url}: response over {MAX_RESPONSE_BYTES} bytes"), true))
                }
                Ok(None) => break,
                Err(e) => {
                    return Err((
                        format!("token endpoint {url}: reading the response failed: {}", error_chain(&e.without_url())),
                        true,
                    ))
                }
            }
        }
        if status != 200 && status != 201 {
            let retryable = !UNRETRYABLE.contains(&status);
            tracing::debug!(endpoint = %url, status, body = %logged_body(&body), "OAUTHBEARER token endpoint error answer");
            return Err((
                format!(
                    "token endpoint {url} {}{}",
                    failed_answer(status),
                    if retryable { "" } else { " (not retried)" }
                ),
                retryable,
            ));
        }
        let json: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|_| (format!("token endpoint {url}: the response is not JSON"), true))?;
        let token = json
            .get("access_token")
            .and_then(|v| v.as_str())
            .filter(|t| !t.trim().is_empty())
            .ok_or_else(|| (format!("token endpoint {url}: the response has no access_token"), true))?;
        AccessToken::parse(token, &s.sub_claim, &s.scope_claim)
            .map_err(|e| (format!("token endpoint {url}: {e}"), false))
    }
}

/// Refreshes the token at its refresh time while the login is in use; a failed refresh keeps
/// the current token and is tried again after [`RELOGIN_DELAY`].
async fn refresher(login: Weak<OAuthBearerLogin>) {
    loop {
        let wait_ms = match login.upgrade() {
            Some(l) => l.state.lock().await.refresh_at_ms - now_ms(),
            None => return,
        };
        tokio::time::sleep(Duration::from_millis(wait_ms.max(0) as u64)).await;
        let Some(l) = login.upgrade() else { return };
        let result = l.fetch().await;
        let mut st = l.state.lock().await;
        match result {
            Ok(t) => {
                st.refresher = true;
                l.install(&mut st, t);
            }
            Err(e) => {
                tracing::warn!(endpoint = %l.settings.shown_endpoint, error = %e, "OAUTHBEARER token refresh failed; the current token is kept and the refresh tried again in 10 s");
                st.refresh_at_ms = now_ms() + RELOGIN_DELAY.as_millis() as i64;
                if st.token.as_ref().is_none_or(|t| now_ms() >= t.expires_at_ms) {
                    st.failure = Some((Instant::now(), e));
                }
            }
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(&format!(": {c}"));
        src = c.source();
    }
    s
}

/// What an error message says of a token answer with HTTP `status` other than 200 or 201:
/// the status and a fixed meaning, never the body. The endpoint is only as trustworthy as
/// whoever named it, and a body reflected into `--describe` would let a mirror config read
/// any URL mirrorgate can reach (Kafka 4.0 shows RFC 6749 §5.2's `error` and
/// `error_description`; mirrorgate logs the body at debug level only, [`logged_body`]).
fn failed_answer(status: u16) -> String {
    let meaning = match status {
        400 => "the endpoint refused the token request (RFC 6749 §5.2: check the grant, scope and client id)",
        401 => "the endpoint refused the client credentials (check clientId and clientSecret)",
        403 => "the client may not obtain this token (check its grants and scope)",
        404 => "there is no token endpoint at this URL",
        429 => "the endpoint is rate limiting this client",
        500..=599 => "the endpoint failed",
        _ => "not a token answer",
    };
    format!("answered HTTP {status}: {meaning}")
}

/// An error body for mirrorgate's debug log: at most [`MAX_LOGGED_BODY_CHARS`] characters,
/// control characters escaped.
fn logged_body(body: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(body).chars().take(MAX_LOGGED_BODY_CHARS).collect();
    text.escape_debug().to_string()
}

/// The OAUTHBEARER exchange on `conn` with a token from `login` (Kafka's
/// `OAuthBearerSaslClient`, RFC 7628 §3.1 and §3.2.3).
///
/// # Errors
/// [`ClientError::Authentication`]: SASL_AUTHENTICATION_FAILED with the token endpoint's
/// error when no token could be had, or the broker's error and message (with the status of
/// its JSON error challenge) when it refused the token.
pub async fn authenticate<T: SaslTransport>(conn: &mut T, login: &Arc<OAuthBearerLogin>) -> Result<(), ClientError> {
    let addr = conn.peer();
    let fail = |error: i16, message: String| ClientError::Authentication { addr: addr.clone(), error, message };
    let (token, _principal) = login.token().await.map_err(|m| fail(SASL_AUTHENTICATION_FAILED, m))?;
    let first = initial_response(token.expose(), &login.settings().extensions);
    let send = |bytes: Vec<u8>| SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
    let resp = conn.sasl_authenticate(&send(first)).await?;
    let message =
        |m: Option<kafka_protocol::protocol::StrBytes>| m.map(|m| m.to_string()).unwrap_or_else(|| "no message".into());
    if resp.error_code != 0 {
        return Err(fail(resp.error_code, message(resp.error_message)));
    }
    if resp.auth_bytes.is_empty() {
        return Ok(());
    }
    // An error challenge: `{"status":"invalid_token",...}` (RFC 7628 §3.2.2). Its status is
    // named; the rest may echo claims, so only known fields are kept.
    let status = serde_json::from_slice::<serde_json::Value>(&resp.auth_bytes)
        .ok()
        .and_then(|v| v.get("status").and_then(|s| s.as_str()).map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    let resp = conn.sasl_authenticate(&send(vec![1])).await?;
    if resp.error_code != 0 {
        return Err(fail(
            resp.error_code,
            format!("{} (error challenge status {status})", message(resp.error_message)),
        ));
    }
    Err(fail(
        ILLEGAL_SASL_STATE,
        format!("the broker sent an error challenge (status {status}) and then accepted the exchange"),
    ))
}

#[cfg(test)]
#[path = "oauth_tests.rs"]
mod tests;
