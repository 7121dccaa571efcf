//! `destination.*`: how to reach the destination cluster, mirrorgate's own security towards it.

use serde::Deserialize;

use super::{ClientUpstreamConfig, Secret};

/// How to reach the destination cluster.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestinationConfig {
    /// Comma-separated `host:port` list, like a client's `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// TCP connect timeout to a destination broker, in ms (default 10000).
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Timeout of mirrorgate's own requests to the destination, in ms (default 30000).
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// How often mirrorgate refreshes the destination's broker list to open listeners for
    /// new brokers, in ms (default 30000).
    #[serde(default = "default_metadata_refresh_ms")]
    pub metadata_refresh_interval_ms: u64,
    /// Kafka's `security.protocol` towards the destination: `PLAINTEXT` (default), `SSL`,
    /// `SASL_PLAINTEXT` or `SASL_SSL`. Each `sasl_*` / `ssl_*` field below is the Java
    /// client property of the same name with `_` for `.` (docs/security.md).
    #[serde(default)]
    pub security_protocol: Option<String>,
    /// `sasl.mechanism`: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER.
    #[serde(default)]
    pub sasl_mechanism: Option<String>,
    /// `sasl.jaas.config` (secret).
    #[serde(default)]
    pub sasl_jaas_config: Option<Secret>,
    /// `sasl.login.callback.handler.class`: OAUTHBEARER's `OAuthBearerLoginCallbackHandler` or unset.
    #[serde(default)]
    pub sasl_login_callback_handler_class: Option<String>,
    /// `sasl.oauthbearer.token.endpoint.url`: OAUTHBEARER token endpoint (client-credentials grant).
    #[serde(default)]
    pub sasl_oauthbearer_token_endpoint_url: Option<String>,
    /// `sasl.oauthbearer.scope.claim.name` (default `scope`).
    #[serde(default)]
    pub sasl_oauthbearer_scope_claim_name: Option<String>,
    /// `sasl.oauthbearer.sub.claim.name` (default `sub`).
    #[serde(default)]
    pub sasl_oauthbearer_sub_claim_name: Option<String>,
    /// `sasl.oauthbearer.header.urlencode` (default false).
    #[serde(default)]
    pub sasl_oauthbearer_header_urlencode: Option<String>,
    /// `sasl.login.refresh.window.factor` (default 0.8).
    #[serde(default)]
    pub sasl_login_refresh_window_factor: Option<String>,
    /// `sasl.login.refresh.window.jitter` (default 0.05).
    #[serde(default)]
    pub sasl_login_refresh_window_jitter: Option<String>,
    /// `sasl.login.refresh.min.period.seconds`, seconds (default 60).
    #[serde(default)]
    pub sasl_login_refresh_min_period_seconds: Option<String>,
    /// `sasl.login.refresh.buffer.seconds`, seconds (default 300).
    #[serde(default)]
    pub sasl_login_refresh_buffer_seconds: Option<String>,
    /// `sasl.login.connect.timeout.ms`, ms (unset: 10000).
    #[serde(default)]
    pub sasl_login_connect_timeout_ms: Option<String>,
    /// `sasl.login.read.timeout.ms`, ms (unset: 30000).
    #[serde(default)]
    pub sasl_login_read_timeout_ms: Option<String>,
    /// `sasl.login.retry.backoff.ms`, ms (default 100).
    #[serde(default)]
    pub sasl_login_retry_backoff_ms: Option<String>,
    /// `sasl.login.retry.backoff.max.ms`, ms (default 10000).
    #[serde(default)]
    pub sasl_login_retry_backoff_max_ms: Option<String>,
    /// `ssl.truststore.type`: PEM or PKCS12 (guessed from the file when unset).
    #[serde(default)]
    pub ssl_truststore_type: Option<String>,
    /// `ssl.truststore.location`: PEM or PKCS12 file.
    #[serde(default)]
    pub ssl_truststore_location: Option<String>,
    /// `ssl.truststore.password` (secret; PKCS12 only).
    #[serde(default)]
    pub ssl_truststore_password: Option<Secret>,
    /// `ssl.truststore.certificates`: PEM text.
    #[serde(default)]
    pub ssl_truststore_certificates: Option<String>,
    /// `ssl.keystore.type`: PEM or PKCS12 (guessed from the file when unset).
    #[serde(default)]
    pub ssl_keystore_type: Option<String>,
    /// `ssl.keystore.location`: PEM (key and chain) or PKCS12 file, for mutual TLS.
    #[serde(default)]
    pub ssl_keystore_location: Option<String>,
    /// `ssl.keystore.password` (secret; PKCS12 only).
    #[serde(default)]
    pub ssl_keystore_password: Option<Secret>,
    /// `ssl.keystore.key`: PEM private key text (secret).
    #[serde(default)]
    pub ssl_keystore_key: Option<Secret>,
    /// `ssl.keystore.certificate.chain`: PEM certificate chain text.
    #[serde(default)]
    pub ssl_keystore_certificate_chain: Option<String>,
    /// `ssl.key.password` (secret; encrypted PEM keys are refused, see docs/security.md).
    #[serde(default)]
    pub ssl_key_password: Option<Secret>,
    /// `ssl.endpoint.identification.algorithm`: `https` (default) or empty.
    #[serde(default)]
    pub ssl_endpoint_identification_algorithm: Option<String>,
    /// `ssl.enabled.protocols`: `TLSv1.2,TLSv1.3` (default), or one of them.
    #[serde(default)]
    pub ssl_enabled_protocols: Option<String>,
    /// `ssl.cipher.suites`: IANA cipher suite names; unset = every suite rustls implements.
    #[serde(default)]
    pub ssl_cipher_suites: Option<String>,
    /// A separate certificate for the upstream side of client connections; unset = they
    /// present none (never mirrorgate's own `ssl_keystore_*`; docs/security.md).
    #[serde(default)]
    pub client_upstream: Option<ClientUpstreamConfig>,
}

impl DestinationConfig {
    /// The security fields as Java client properties (`security.protocol`, ...), set ones
    /// only; secrets in clear (the result is for [`crate::client::ClientSecurity`], never for
    /// display).
    pub fn security_properties(&self) -> std::collections::BTreeMap<String, String> {
        [
            ("security.protocol", self.security_protocol.as_deref()),
            ("sasl.mechanism", self.sasl_mechanism.as_deref()),
            ("sasl.jaas.config", self.sasl_jaas_config.as_ref().map(Secret::expose)),
            ("ssl.truststore.type", self.ssl_truststore_type.as_deref()),
            ("ssl.truststore.location", self.ssl_truststore_location.as_deref()),
            ("ssl.truststore.password", self.ssl_truststore_password.as_ref().map(Secret::expose)),
            ("ssl.truststore.certificates", self.ssl_truststore_certificates.as_deref()),
            ("ssl.keystore.type", self.ssl_keystore_type.as_deref()),
            ("ssl.keystore.location", self.ssl_keystore_location.as_deref()),
            ("ssl.keystore.password", self.ssl_keystore_password.as_ref().map(Secret::expose)),
            ("ssl.keystore.key", self.ssl_keystore_key.as_ref().map(Secret::expose)),
            ("ssl.keystore.certificate.chain", self.ssl_keystore_certificate_chain.as_deref()),
            ("ssl.key.password", self.ssl_key_password.as_ref().map(Secret::expose)),
            ("ssl.endpoint.identification.algorithm", self.ssl_endpoint_identification_algorithm.as_deref()),
            ("ssl.enabled.protocols", self.ssl_enabled_protocols.as_deref()),
            ("ssl.cipher.suites", self.ssl_cipher_suites.as_deref()),
            ("sasl.login.callback.handler.class", self.sasl_login_callback_handler_class.as_deref()),
            ("sasl.oauthbearer.token.endpoint.url", self.sasl_oauthbearer_token_endpoint_url.as_deref()),
            ("sasl.oauthbearer.scope.claim.name", self.sasl_oauthbearer_scope_claim_name.as_deref()),
            ("sasl.oauthbearer.sub.claim.name", self.sasl_oauthbearer_sub_claim_name.as_deref()),
            ("sasl.oauthbearer.header.urlencode", self.sasl_oauthbearer_header_urlencode.as_deref()),
            ("sasl.login.refresh.window.factor", self.sasl_login_refresh_window_factor.as_deref()),
            ("sasl.login.refresh.window.jitter", self.sasl_login_refresh_window_jitter.as_deref()),
            ("sasl.login.refresh.min.period.seconds", self.sasl_login_refresh_min_period_seconds.as_deref()),
            ("sasl.login.refresh.buffer.seconds", self.sasl_login_refresh_buffer_seconds.as_deref()),
            ("sasl.login.connect.timeout.ms", self.sasl_login_connect_timeout_ms.as_deref()),
            ("sasl.login.read.timeout.ms", self.sasl_login_read_timeout_ms.as_deref()),
            ("sasl.login.retry.backoff.ms", self.sasl_login_retry_backoff_ms.as_deref()),
            ("sasl.login.retry.backoff.max.ms", self.sasl_login_retry_backoff_max_ms.as_deref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v.to_string())))
        .collect()
    }
}

fn default_connect_timeout_ms() -> u64 {
    10_000
}
fn default_request_timeout_ms() -> u64 {
    30_000
}
fn default_metadata_refresh_ms() -> u64 {
    30_000
}

/// Splits and checks a `bootstrap.servers` style list; each entry must be `host:port`.
pub fn parse_bootstrap(list: &str) -> Result<Vec<String>, String> {
    let entries: Vec<String> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    if entries.is_empty() {
        return Err("no `host:port` entries".into());
    }
    for e in &entries {
        let Some((host, port)) = e.rsplit_once(':') else {
            return Err(format!("`{e}` is not `host:port`"));
        };
        if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!("`{e}` is not `host:port` with a port in 1-65535"));
        }
    }
    Ok(entries)
}
