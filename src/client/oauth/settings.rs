//! The OAUTHBEARER settings of one owner, read from Java client properties and the JAAS
//! options as Kafka's `OAuthBearerLoginCallbackHandler` and `ClientCredentialsJwtRetriever`
//! read them ([`OAuthSettings::from_properties`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;

use super::B64;
use crate::client::security::{sec_err, Secret, SecurityError};

/// The OAUTHBEARER client properties mirrorgate reads (Kafka's `SaslConfigs` names).
pub const OAUTH_KEYS: &[&str] = &[
    "sasl.login.callback.handler.class",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.header.urlencode",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.ms",
    "sasl.login.retry.backoff.max.ms",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.jwt.retriever.class",
];

/// Connect timeout towards the token endpoint when `sasl.login.connect.timeout.ms` is unset
/// (Kafka leaves it to the JVM, which never times out).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Read timeout towards the token endpoint when `sasl.login.read.timeout.ms` is unset.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);
const LOGIN_MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// The `sasl.login.refresh.*` settings (Kafka's `ExpiringCredentialRefreshConfig`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RefreshConfig {
    /// Fraction of the lifetime after which to refresh, 0.5..=1.0 (default 0.8).
    pub window_factor: f64,
    /// Random fraction added to it, 0..=0.25 (default 0.05).
    pub window_jitter: f64,
    /// Fewest seconds between a refresh and the next, 0..=900 (default 60).
    pub min_period_seconds: u64,
    /// Seconds before expiry by which to refresh, 0..=3600 (default 300).
    pub buffer_seconds: u64,
}

impl Default for RefreshConfig {
    fn default() -> Self {
        Self { window_factor: 0.8, window_jitter: 0.05, min_period_seconds: 60, buffer_seconds: 300 }
    }
}

/// Everything needed to get tokens, from the client properties and the JAAS options.
#[derive(Clone)]
pub struct OAuthSettings {
    /// `sasl.oauthbearer.token.endpoint.url` (http or https).
    pub endpoint: reqwest::Url,
    /// JAAS `clientId`.
    pub client_id: String,
    pub(super) client_secret: Secret,
    /// JAAS `scope`, sent when not blank.
    pub scope: Option<String>,
    /// `sasl.oauthbearer.scope.claim.name` (default `scope`).
    pub scope_claim: String,
    /// `sasl.oauthbearer.sub.claim.name` (default `sub`).
    pub sub_claim: String,
    /// `sasl.oauthbearer.header.urlencode` (default false).
    pub urlencode_header: bool,
    /// `sasl.login.refresh.*`.
    pub refresh: RefreshConfig,
    /// `sasl.login.connect.timeout.ms` (unset: [`DEFAULT_CONNECT_TIMEOUT`]; 0: none, as in
    /// Java's `URLConnection.setConnectTimeout`).
    pub connect_timeout: Option<Duration>,
    /// `sasl.login.read.timeout.ms` (unset: [`DEFAULT_READ_TIMEOUT`]; 0: none).
    pub read_timeout: Option<Duration>,
    /// SASL extensions from the JAAS options `extension_<name>="<value>"` (Kafka's
    /// `OAuthBearerLoginCallbackHandler.handleExtensionsCallback`), sent in the initial
    /// response, by name.
    pub extensions: BTreeMap<String, String>,
    /// The endpoint as shown in messages: without `user:password@`.
    pub shown_endpoint: String,
    /// `sasl.login.retry.backoff.ms` (default 100 ms).
    pub retry_backoff: Duration,
    /// `sasl.login.retry.backoff.max.ms` (default 10000 ms): the window in which one token
    /// request is retried.
    pub retry_backoff_max: Duration,
    /// TLS towards an https endpoint: the JAAS options' `ssl.*` (Kafka's
    /// `JaasOptionsUtils.createSSLSocketFactory`), else the system's roots.
    pub(super) tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSettings")
            .field("endpoint", &self.shown_endpoint)
            .field("client_id", &self.client_id)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl OAuthSettings {
    /// Reads the OAUTHBEARER settings from Java client properties (`props`, the
    /// [`OAUTH_KEYS`] and `sasl.jaas.config` with
    /// `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
    /// clientId="..." clientSecret="..." [scope="..."];`).
    ///
    /// # Errors
    /// [`SecurityError`] naming the property: a missing or non-http(s) endpoint URL, a JAAS
    /// line without `clientId`/`clientSecret` or with another login module, a value out of
    /// Kafka's range, an unknown login callback handler. Never echoes the secret.
    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<Self, SecurityError> {
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        if let Some(h) = get("sasl.login.callback.handler.class") {
            if h.rsplit('.').next() != Some("OAuthBearerLoginCallbackHandler") {
                return Err(sec_err(
                    "sasl.login.callback.handler.class",
                    format!("`{h}` is not supported; use org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler or leave it unset"),
                ));
            }
        }
        let url_text = get("sasl.oauthbearer.token.endpoint.url").ok_or_else(|| {
            sec_err(
                "sasl.oauthbearer.token.endpoint.url",
                "is required with sasl.mechanism OAUTHBEARER (the OAuth token endpoint of the client-credentials grant)",
            )
        })?;
        let endpoint = reqwest::Url::parse(url_text)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| sec_err("sasl.oauthbearer.token.endpoint.url", "is not an http:// or https:// URL"))?;
        let jaas = get("sasl.jaas.config").ok_or_else(|| {
            sec_err(
                "sasl.jaas.config",
                format!(
                    "is required with OAUTHBEARER: `{LOGIN_MODULE} required clientId=\"...\" clientSecret=\"...\";`"
                ),
            )
        })?;
        let (module, mut options) = crate::client::security::jaas_options(jaas)?;
        if module.rsplit('.').next() != Some("OAuthBearerLoginModule") {
            return Err(sec_err(
                "sasl.jaas.config",
                format!("login module `{module}` does not fit sasl.mechanism OAUTHBEARER; use {LOGIN_MODULE}"),
            ));
        }
        if let Some(r) = get("sasl.oauthbearer.jwt.retriever.class") {
            if !matches!(r.rsplit('.').next(), Some("ClientCredentialsJwtRetriever" | "DefaultJwtRetriever")) {
                return Err(sec_err(
                    "sasl.oauthbearer.jwt.retriever.class",
                    format!("`{r}` is not supported; use org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever or leave it unset"),
                ));
            }
        }
        // Kafka 4.1 (KIP-1139, `ConfigOrJaas`): the client properties win over the
        // deprecated JAAS options.
        let jaas_err = |reason: &str| sec_err("sasl.jaas.config", reason.to_string());
        let mut pick = |config: &str, option: &str| {
            let from_jaas = options.remove(option).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
            get(config).map(str::to_string).or(from_jaas)
        };
        let client_id = pick("sasl.oauthbearer.client.credentials.client.id", "clientId").ok_or_else(|| {
            jaas_err("option `clientId` is missing or empty (or set sasl.oauthbearer.client.credentials.client.id)")
        })?;
        let client_secret =
            Secret::new(pick("sasl.oauthbearer.client.credentials.client.secret", "clientSecret").ok_or_else(|| {
                jaas_err(
                    "option `clientSecret` is missing or empty (or set sasl.oauthbearer.client.credentials.client.secret)",
                )
            })?);
        let scope = pick("sasl.oauthbearer.scope", "scope");
        let extensions: BTreeMap<String, String> = options
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("extension_").map(|name| (name.to_string(), v.clone())))
            .collect();
        validate_extensions(&extensions)?;
        let tls = if endpoint.scheme() == "https" {
            let ssl = |k: &str| options.get(k).map(String::as_str);
            Some(Arc::new(crate::client::tls::client_config(&ssl).map_err(|e| {
                sec_err(
                    "sasl.jaas.config",
                    format!("TLS towards the token endpoint (JAAS option {}): {}", e.key, e.reason),
                )
            })?))
        } else {
            None
        };
        let num = |k: &str, lo: f64, hi: f64, default: f64| -> Result<f64, SecurityError> {
            match get(k) {
                None => Ok(default),
                Some(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| (lo..=hi).contains(x))
                    .ok_or_else(|| sec_err(k, format!("`{v}` is not a number in [{lo}, {hi}]"))),
            }
        };
        let refresh = RefreshConfig {
            window_factor: num("sasl.login.refresh.window.factor", 0.5, 1.0, 0.8)?,
            window_jitter: num("sasl.login.refresh.window.jitter", 0.0, 0.25, 0.05)?,
            min_period_seconds: num("sasl.login.refresh.min.period.seconds", 0.0, 900.0, 60.0)? as u64,
            buffer_seconds: num("sasl.login.refresh.buffer.seconds", 0.0, 3600.0, 300.0)? as u64,
        };
        let ms = |k: &str, default: Duration| -> Result<Duration, SecurityError> {
            Ok(match get(k) {
                None => default,
                Some(_) => Duration::from_millis(num(k, 0.0, i32::MAX as f64, 0.0)? as u64),
            })
        };
        let retry_backoff = ms("sasl.login.retry.backoff.ms", Duration::from_millis(100))?;
        let retry_backoff_max = ms("sasl.login.retry.backoff.max.ms", Duration::from_millis(10_000))?;
        if retry_backoff_max < retry_backoff {
            return Err(sec_err("sasl.login.retry.backoff.max.ms", "is below sasl.login.retry.backoff.ms"));
        }
        let urlencode_header = match get("sasl.oauthbearer.header.urlencode").map(str::to_ascii_lowercase).as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => return Err(sec_err("sasl.oauthbearer.header.urlencode", "is not true or false")),
        };
        let claim = |k: &str, d: &str| get(k).unwrap_or(d).to_string();
        Ok(Self {
            shown_endpoint: shown_url(&endpoint),
            endpoint,
            client_id,
            client_secret,
            scope,
            scope_claim: claim("sasl.oauthbearer.scope.claim.name", "scope"),
            sub_claim: claim("sasl.oauthbearer.sub.claim.name", "sub"),
            urlencode_header,
            refresh,
            connect_timeout: Some(ms("sasl.login.connect.timeout.ms", DEFAULT_CONNECT_TIMEOUT)?)
                .filter(|t| !t.is_zero()),
            read_timeout: Some(ms("sasl.login.read.timeout.ms", DEFAULT_READ_TIMEOUT)?).filter(|t| !t.is_zero()),
            extensions,
            retry_backoff,
            retry_backoff_max,
            tls,
        })
    }

    /// `Authorization: Basic ...` of the token request (Kafka's `formatAuthorizationHeader`).
    pub(super) fn authorization(&self) -> Secret {
        let enc = |s: &str| {
            if self.urlencode_header {
                url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
            } else {
                s.to_string()
            }
        };
        Secret::new(format!(
            "Basic {}",
            B64.encode(format!("{}:{}", enc(&self.client_id), enc(self.client_secret.expose())))
        ))
    }

    /// The form body (Kafka's `formatRequestBody`).
    pub(super) fn body(&self) -> String {
        let mut body = "grant_type=client_credentials".to_string();
        if let Some(scope) = &self.scope {
            body.push_str("&scope=");
            body.extend(url::form_urlencoded::byte_serialize(scope.as_bytes()));
        }
        body
    }
}

/// `url` without its `user:password@`, for messages.
pub(crate) fn shown_url(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.to_string()
}

/// Checks SASL extensions as Kafka's `OAuthBearerClientInitialResponse.validateExtensions`
/// does: names `[A-Za-z]+` other than `auth`, values `[\x21-\x7E \t\r\n]+`.
///
/// # Errors
/// [`SecurityError`] on `sasl.jaas.config` naming the extension (never its value).
fn validate_extensions(extensions: &BTreeMap<String, String>) -> Result<(), SecurityError> {
    for (name, value) in extensions {
        if name == "auth" || name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(sec_err(
                "sasl.jaas.config",
                format!("SASL extension name `{name}` (option extension_{name}) is invalid: letters only, not `auth`"),
            ));
        }
        if value.is_empty() || !value.bytes().all(|b| matches!(b, 0x21..=0x7E | b' ' | b'\t' | b'\r' | b'\n')) {
            return Err(sec_err(
                "sasl.jaas.config",
                format!("the value of SASL extension `{name}` is invalid: printable ASCII, space, tab, CR or LF only"),
            ));
        }
    }
    Ok(())
}
