//! `proxy.yaml`: loaded once with the `config` crate (YAML file, then environment overrides
//! `MIRRORGATE__SECTION__KEY`), validated up front into typed structs. After startup no code
//! reads raw strings from the configuration.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::wire::frame::DEFAULT_MAX_FRAME_BYTES;
use crate::wire::mirror::MirrorApiTable;

pub use crate::secret::Secret;

mod traces;
mod upstream;

pub use traces::{OtlpProtocol, TracesConfig, TracesSettings};
pub use upstream::{ClientUpstream, ClientUpstreamConfig};

/// Everything `mirrorgate run` needs, validated.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// The destination cluster mirrorgate fronts.
    pub destination: DestinationConfig,
    /// Client-facing listeners; at least one.
    pub listeners: Vec<ListenerConfig>,
    /// Largest request or response frame accepted, in bytes (default 100 MiB, like the
    /// broker's `socket.request.max.bytes`). A bigger length prefix closes the connection.
    #[serde(default = "default_max_frame_bytes")]
    pub max_frame_bytes: usize,
    /// Requests a client may have in flight on one connection before mirrorgate stops
    /// reading from it (default 256).
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight_requests: usize,
    /// Threads that serve client connections, each connection on one of them from accept
    /// to close (the broker's `num.network.threads`; default: the number of CPUs). See
    /// `proxy::network_threads`.
    #[serde(default)]
    pub num_network_threads: Option<usize>,
    /// Request bytes buffered across all client connections at most, in bytes (the broker's
    /// `queued.max.request.bytes`; default 256 MiB, at least `max_frame_bytes`). A request
    /// larger than 64 KiB is charged to it as its bytes arrive (`proxy::limits`); while the
    /// budget is used up that connection is not read (nothing is dropped). Smaller requests
    /// never wait.
    #[serde(default = "default_queued_max_request_bytes")]
    pub queued_max_request_bytes: usize,
    /// A Fetch response at least this large, in bytes, goes to the client while it arrives
    /// from the destination broker instead of after all of it has (default 262144 = 256 KiB;
    /// 0 = never). See `proxy::fetch_stream`.
    #[serde(default = "default_fetch_stream_min_bytes")]
    pub fetch_stream_min_bytes: usize,
    /// Whether the record batches of such a streamed response move from the destination
    /// broker's socket to the client's by `splice(2)`, without a copy through mirrorgate
    /// (default true; Linux, plain TCP on both sides only). See `proxy::splice`.
    #[serde(default = "default_true")]
    pub fetch_stream_zero_copy: bool,
    /// A client connection with no request bytes and no response due for this long is
    /// closed, in ms (the broker's `connections.max.idle.ms`; default 600000).
    #[serde(default = "default_connections_max_idle_ms")]
    pub connections_max_idle_ms: u64,
    /// A request frame must arrive whole within this many ms of its first byte, or the
    /// client connection is closed (default 60000): a client trickling bytes cannot hold a
    /// connection and its buffer for ever.
    #[serde(default = "default_client_frame_timeout_ms")]
    pub client_frame_timeout_ms: u64,
    /// Largest request frame, in bytes, a client may send before the destination broker has
    /// authenticated it, when the destination uses SASL (the broker's
    /// `sasl.server.max.receive.size`; default 524288 = 512 KiB, at least 1024): a larger
    /// length prefix closes the connection before its body is read.
    #[serde(default = "default_sasl_server_max_receive_size")]
    pub sasl_server_max_receive_size: usize,
    /// A client connection that takes none of its responses (writes to it make no progress)
    /// for this many ms is closed (default 60000).
    #[serde(default = "default_client_write_timeout_ms")]
    pub client_write_timeout_ms: u64,
    /// Logging.
    #[serde(default)]
    pub log: LogConfig,
    /// Api keys of the KIP-1279 mirror RPCs (the prototype's numbers by default; upstream may
    /// renumber them).
    #[serde(default)]
    pub mirror_api_keys: MirrorApiTable,
    /// The `__mirror_state` topic on the destination.
    #[serde(default)]
    pub mirror_state: MirrorStateConfig,
    /// Prometheus metrics.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// Authorization of the mirror RPCs mirrorgate answers itself.
    #[serde(default)]
    pub authorization: AuthorizationConfig,
    /// What mirror configs may point at.
    #[serde(default)]
    pub mirrors: MirrorsConfig,
    /// How several instances share the mirror work (group membership on the destination).
    #[serde(default)]
    pub instances: InstancesConfig,
    /// OTLP trace export (off by default).
    #[serde(default)]
    pub traces: TracesConfig,
}

/// Scale-out: the instances fronting one destination share the mirror work through a group on
/// the destination's group coordinator ([`crate::mirror::members`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstancesConfig {
    /// This instance's name in logs and `--describe` (default: host name, `-`, process id).
    #[serde(default)]
    pub name: Option<String>,
    /// The group id the instances join (default `mirrorgate.` + `mirror_state.topic`).
    #[serde(default)]
    pub group_id: Option<String>,
    /// JoinGroup session timeout, in ms (default 10000).
    #[serde(default = "default_session_timeout_ms")]
    pub session_timeout_ms: u64,
    /// Time between heartbeats, in ms (default 3000); less than half the session timeout.
    #[serde(default = "default_heartbeat_interval_ms")]
    pub heartbeat_interval_ms: u64,
    /// JoinGroup rebalance timeout, in ms (default 30000).
    #[serde(default = "default_rebalance_timeout_ms")]
    pub rebalance_timeout_ms: u64,
}

impl Default for InstancesConfig {
    fn default() -> Self {
        Self {
            name: None,
            group_id: None,
            session_timeout_ms: default_session_timeout_ms(),
            heartbeat_interval_ms: default_heartbeat_interval_ms(),
            rebalance_timeout_ms: default_rebalance_timeout_ms(),
        }
    }
}

fn default_session_timeout_ms() -> u64 {
    10_000
}
fn default_heartbeat_interval_ms() -> u64 {
    3_000
}
fn default_rebalance_timeout_ms() -> u64 {
    30_000
}

/// The default instance name: the host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`,
/// else `mirrorgate`), `-`, the process id.
pub fn default_instance_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "mirrorgate".into());
    format!("{host}-{}", std::process::id())
}

/// Authorization of what mirrorgate answers itself (docs/security.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationConfig {
    /// The destination's `super.users` (principals such as `User:admin`): they may run every
    /// mirror RPC whatever the ACLs say. Kafka does not expose this broker setting over the
    /// protocol, so it is repeated here.
    #[serde(default)]
    pub super_users: Vec<String>,
}

/// Limits on what mirror configs (set over the Kafka protocol by whoever may alter mirrors)
/// may point at; only the operator sets these (docs/security.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorsConfig {
    /// OAuth token endpoints mirrors may use: comma-separated exact URLs, as Kafka 4.0's
    /// `org.apache.kafka.sasl.oauthbearer.allowed.urls` (CVE-2025-27817). Unset: each mirror
    /// keeps the endpoint it was created with; empty: no mirror may use OAUTHBEARER.
    #[serde(default)]
    pub sasl_oauthbearer_allowed_urls: Option<String>,
}

/// Where Prometheus scrapes mirrorgate.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// `host:port` of the `/metrics` endpoint, e.g. `127.0.0.1:9464`; unset = no endpoint.
    #[serde(default)]
    pub listen: Option<String>,
}

/// Where mirrorgate keeps its state (KIP-1279 `mirror.state.topic.*` broker configs).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorStateConfig {
    /// Compacted state topic name (default `__mirror_state`).
    #[serde(default = "default_state_topic")]
    pub topic: String,
    /// Partitions when mirrorgate creates it (`mirror.state.topic.num.partitions`, default 50).
    #[serde(default = "default_state_partitions")]
    pub num_partitions: i32,
    /// Replication factor when mirrorgate creates it (`mirror.state.topic.replication.factor`,
    /// default 3; lowered to the destination's broker count with a warning).
    #[serde(default = "default_state_rf")]
    pub replication_factor: i16,
    /// Key that encrypts secret mirror configs in the state topic (like the broker's
    /// `password.encoder.secret`); without it a mirror config holding a secret is refused.
    #[serde(default)]
    pub password_encoder_secret: Option<Secret>,
    /// The previous key while rotating (`password.encoder.old.secret`): values it opens are
    /// written again under `password_encoder_secret` at startup.
    #[serde(default)]
    pub password_encoder_old_secret: Option<Secret>,
}

/// Fewest characters `mirror_state.password_encoder_secret` may have. Anyone who can read
/// `__mirror_state` holds each secret's salt and ciphertext and can try keys offline, and
/// PBKDF2 with 4096 iterations costs a guesser little: 16 random characters (about 95 bits
/// from letters and digits) put that out of reach, where a word or a short phrase does not.
pub const MIN_ENCODER_SECRET_CHARS: usize = 16;

impl MirrorStateConfig {
    /// Checks `password_encoder_secret` (at least [`MIN_ENCODER_SECRET_CHARS`] characters) and
    /// `password_encoder_old_secret` (not empty: it only has to open what an earlier, maybe
    /// shorter, secret wrote).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key.
    fn check_encoder_secrets(&self) -> Result<(), ConfigError> {
        if let Some(s) = &self.password_encoder_secret {
            let n = s.expose().chars().count();
            if n < MIN_ENCODER_SECRET_CHARS {
                return Err(invalid(
                    "mirror_state.password_encoder_secret",
                    format!(
                        "has {n} characters; at least {MIN_ENCODER_SECRET_CHARS} are required (a long random string, e.g. `openssl rand -base64 24`): whoever can read the state topic can try short keys offline"
                    ),
                ));
            }
        }
        if self.password_encoder_old_secret.as_ref().is_some_and(Secret::is_empty) {
            return Err(invalid("mirror_state.password_encoder_old_secret", "must not be empty (unset it instead)"));
        }
        Ok(())
    }

    /// The codec for secret mirror configs, if a key is set.
    pub fn secret_codec(&self) -> Option<std::sync::Arc<crate::mirror::secrets::SecretCodec>> {
        self.password_encoder_secret.as_ref().map(|s| {
            std::sync::Arc::new(crate::mirror::secrets::SecretCodec::new(
                s.expose(),
                self.password_encoder_old_secret.as_ref().map(Secret::expose),
            ))
        })
    }
}

impl Default for MirrorStateConfig {
    fn default() -> Self {
        Self {
            topic: default_state_topic(),
            num_partitions: default_state_partitions(),
            replication_factor: default_state_rf(),
            password_encoder_secret: None,
            password_encoder_old_secret: None,
        }
    }
}

fn default_state_topic() -> String {
    "__mirror_state".into()
}
fn default_state_partitions() -> i32 {
    50
}
fn default_state_rf() -> i16 {
    3
}

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

/// TLS termination of a client listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerTlsConfig {
    /// PEM file with the listener's certificate chain (leaf first).
    pub cert_file: String,
    /// PEM file with its private key (unencrypted PKCS#8, PKCS#1 or SEC1).
    pub key_file: String,
    /// Client certificates: `none` (default), `requested` or `required`.
    #[serde(default)]
    pub client_auth: crate::client::tls::ClientAuth,
    /// PEM file with the CAs client certificates must chain to (with `requested`/`required`).
    #[serde(default)]
    pub ca_file: Option<String>,
}

/// One client-facing listener: a bootstrap port and one port per destination broker.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// Name used in logs (default `"default"`).
    #[serde(default = "default_listener_name")]
    pub name: String,
    /// Address to bind, e.g. `127.0.0.1` or `0.0.0.0`.
    pub bind_host: String,
    /// Host name clients are told to connect to (Metadata, FindCoordinator, DescribeCluster).
    /// Defaults to `bind_host`.
    #[serde(default)]
    pub advertised_host: Option<String>,
    /// Port range `FIRST-LAST` (inclusive). `FIRST` is the bootstrap port; destination broker
    /// with node id `N` is served on `FIRST + 1 + N`.
    pub port_range: String,
    /// Whether mirror admin RPCs are answered on this listener (default false).
    #[serde(default)]
    pub admin: bool,
    /// TLS termination; unset = plaintext.
    #[serde(default)]
    pub tls: Option<ListenerTlsConfig>,
    /// Client connections this listener holds at most, over all its ports (the broker's
    /// `max.connections`); unset = unlimited. A connection over the limit is closed at
    /// accept, with a warning (at most one per second) and
    /// `mirrorgate_client_connections_refused_total{reason="max_connections"}`.
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// Client connections one source IP address holds at most on this listener (the
    /// broker's `max.connections.per.ip`); unset = unlimited.
    #[serde(default)]
    pub max_connections_per_ip: Option<usize>,
}

/// Logging settings; `RUST_LOG`, when set, wins over `level`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// `error`, `warn`, `info`, `debug` or `trace`, or a `tracing` filter directive
    /// (default `info`).
    #[serde(default = "default_log_level")]
    pub level: String,
    /// `text` (default) or `json`.
    #[serde(default)]
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { level: default_log_level(), format: LogFormat::Text }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Most network threads accepted: more than any machine's useful count, fewer than would
/// exhaust its threads.
const MAX_NETWORK_THREADS: usize = 256;

fn default_max_frame_bytes() -> usize {
    DEFAULT_MAX_FRAME_BYTES
}
fn default_max_in_flight() -> usize {
    256
}
fn default_queued_max_request_bytes() -> usize {
    256 * 1024 * 1024
}
fn default_true() -> bool {
    true
}
fn default_fetch_stream_min_bytes() -> usize {
    crate::proxy::fetch_stream::DEFAULT_STREAM_MIN_BYTES
}
fn default_connections_max_idle_ms() -> u64 {
    600_000
}
fn default_client_frame_timeout_ms() -> u64 {
    60_000
}
fn default_sasl_server_max_receive_size() -> usize {
    512 * 1024
}
fn default_client_write_timeout_ms() -> u64 {
    60_000
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
fn default_listener_name() -> String {
    "default".into()
}
fn default_log_level() -> String {
    "info".into()
}

/// A configuration that cannot be used, with the key it concerns.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file or an override could not be read or does not match the schema (unknown key,
    /// wrong type).
    #[error("cannot load configuration: {0}")]
    Load(#[from] config::ConfigError),
    /// A value is syntactically valid but unusable.
    #[error("invalid configuration `{key}`: {reason}")]
    Invalid {
        /// The offending key, e.g. `listeners[0].port_range`.
        key: String,
        /// What is wrong and what would be right.
        reason: String,
    },
}

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.into(), reason: reason.into() }
}

/// A listener with its port range parsed.
#[derive(Debug, Clone)]
pub struct Listener {
    /// Name used in logs.
    pub name: String,
    /// Address to bind.
    pub bind_ip: IpAddr,
    /// Host name written into rewritten responses.
    pub advertised_host: String,
    /// Bootstrap port (first of the range).
    pub bootstrap_port: u16,
    /// Last port of the range, inclusive.
    pub last_port: u16,
    /// Whether mirror admin RPCs are answered here.
    pub admin: bool,
    /// TLS termination, `None` = plaintext.
    pub tls: Option<ListenerTls>,
    /// `max_connections` / `max_connections_per_ip` and the live counts, shared by every
    /// port (and clone) of this listener.
    pub limits: std::sync::Arc<crate::proxy::limits::ConnectionLimits>,
}

/// A listener's TLS server config, loaded from its files.
#[derive(Clone)]
pub struct ListenerTls {
    /// The rustls config.
    pub config: std::sync::Arc<rustls::ServerConfig>,
    /// Client certificate policy (for logs).
    pub client_auth: crate::client::tls::ClientAuth,
}

impl std::fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls").field("client_auth", &self.client_auth).finish_non_exhaustive()
    }
}

impl Listener {
    /// Port that serves destination broker `node_id`: `bootstrap_port + 1 + node_id`, or
    /// `None` when that falls outside the configured range.
    pub fn broker_port(&self, node_id: i32) -> Option<u16> {
        let port = i64::from(self.bootstrap_port) + 1 + i64::from(node_id);
        (node_id >= 0 && port <= i64::from(self.last_port)).then_some(port as u16)
    }
}

/// The validated configuration `mirrorgate run` works from.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Destination bootstrap addresses, in the configured order, as `host:port` strings.
    pub destination_bootstrap: Vec<String>,
    /// TCP connect timeout to destination brokers.
    pub connect_timeout: Duration,
    /// Timeout of mirrorgate's own requests.
    pub request_timeout: Duration,
    /// TLS and SASL towards the destination, for mirrorgate's own connections.
    pub destination_security: crate::client::ClientSecurity,
    /// TLS of the upstream side of client connections (never mirrorgate's own certificate;
    /// no SASL: clients authenticate themselves); `None` when the destination is not TLS.
    pub client_upstream: Option<ClientUpstream>,
    /// Broker list refresh interval.
    pub metadata_refresh_interval: Duration,
    /// Client listeners.
    pub listeners: Vec<Listener>,
    /// Frame cap, bytes.
    pub max_frame_bytes: usize,
    /// In-flight request cap per client connection.
    pub max_in_flight_requests: usize,
    /// Network threads serving client connections (at least 1).
    pub num_network_threads: usize,
    /// Global request memory budget, bytes.
    pub queued_max_request_bytes: usize,
    /// Smallest Fetch response forwarded while it arrives, bytes (0: never).
    pub fetch_stream_min_bytes: usize,
    /// Whether streamed Fetch responses are spliced where the connections allow it.
    pub fetch_stream_zero_copy: bool,
    /// Idle and partial-frame timeouts of client connections.
    pub read_timeouts: crate::proxy::limits::ReadTimeouts,
    /// Frame cap before SASL authentication, bytes (`sasl_server_max_receive_size`).
    pub sasl_server_max_receive_size: usize,
    /// How long writes to a client may make no progress (`client_write_timeout_ms`).
    pub client_write_timeout: Duration,
    /// Logging.
    pub log: LogConfig,
    /// Mirror RPC api keys.
    pub mirror_api_keys: MirrorApiTable,
    /// State topic settings.
    pub mirror_state: MirrorStateConfig,
    /// Metrics endpoint, if any.
    pub metrics_listen: Option<SocketAddr>,
    /// `authorization.super_users`.
    pub super_users: Vec<String>,
    /// `mirrors.sasl_oauthbearer_allowed_urls`, parsed (`None`: unset).
    pub sasl_oauthbearer_allowed_urls: Option<Vec<String>>,
    /// `instances.*`: this instance's group membership.
    pub membership: crate::mirror::members::MembershipSettings,
    /// `traces.*` resolved against the `OTEL_*` environment; `None` = no spans.
    pub traces: Option<TracesSettings>,
}

impl ProxyConfig {
    /// Loads `path` (YAML) and applies `MIRRORGATE__SECTION__KEY` environment overrides
    /// (e.g. `MIRRORGATE__DESTINATION__BOOTSTRAP_SERVERS=host:9092`).
    ///
    /// # Errors
    /// [`ConfigError::Load`] for a missing file, bad YAML, an unknown key or a wrong type.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let cfg = config::Config::builder()
            .add_source(config::File::from(path).format(config::FileFormat::Yaml))
            .add_source(
                config::Environment::with_prefix("MIRRORGATE").prefix_separator("__").separator("__").try_parsing(true),
            )
            .build()?;
        Ok(cfg.try_deserialize()?)
    }

    /// Parses YAML text (no environment overrides); used by tests and `--check`.
    ///
    /// # Errors
    /// As [`ProxyConfig::load`].
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let cfg =
            config::Config::builder().add_source(config::File::from_str(text, config::FileFormat::Yaml)).build()?;
        Ok(cfg.try_deserialize()?)
    }

    /// Checks every value and returns the typed settings.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key: empty or unparsable bootstrap servers, a bad
    /// bind address, a port range that is malformed or holds fewer than 2 ports, overlapping
    /// listener ranges, a zero frame cap or timeout, or an unknown log level.
    pub fn validate(self) -> Result<Settings, ConfigError> {
        let destination_bootstrap = parse_bootstrap(&self.destination.bootstrap_servers)
            .map_err(|r| invalid("destination.bootstrap_servers", r))?;
        if self.listeners.is_empty() {
            return Err(invalid("listeners", "at least one listener is required"));
        }
        let mut listeners: Vec<Listener> = Vec::new();
        for (i, l) in self.listeners.iter().enumerate() {
            let key = |k: &str| format!("listeners[{i}].{k}");
            let bind_ip: IpAddr = l
                .bind_host
                .parse()
                .map_err(|_| invalid(key("bind_host"), format!("`{}` is not an IP address", l.bind_host)))?;
            let (first, last) = parse_port_range(&l.port_range).map_err(|r| invalid(key("port_range"), r))?;
            for other in &listeners {
                if first <= other.last_port && other.bootstrap_port <= last && other.bind_ip == bind_ip {
                    return Err(invalid(
                        key("port_range"),
                        format!("overlaps the port range of listener `{}`", other.name),
                    ));
                }
            }
            let advertised_host = l.advertised_host.clone().unwrap_or_else(|| {
                if bind_ip.is_unspecified() {
                    "127.0.0.1".into()
                } else {
                    l.bind_host.clone()
                }
            });
            if advertised_host.is_empty() {
                return Err(invalid(key("advertised_host"), "must not be empty"));
            }
            let tls = match &l.tls {
                None => None,
                Some(t) => Some(ListenerTls {
                    config: std::sync::Arc::new(
                        crate::client::tls::server_config(
                            &t.cert_file,
                            &t.key_file,
                            t.client_auth,
                            t.ca_file.as_deref(),
                        )
                        .map_err(|e| invalid(key(&format!("tls.{}", e.key)), e.reason))?,
                    ),
                    client_auth: t.client_auth,
                }),
            };
            listeners.push(Listener {
                name: l.name.clone(),
                bind_ip,
                advertised_host,
                bootstrap_port: first,
                last_port: last,
                admin: l.admin,
                tls,
                limits: std::sync::Arc::new(crate::proxy::limits::ConnectionLimits::new(
                    l.max_connections,
                    l.max_connections_per_ip,
                )),
            });
            for (k, v) in [("max_connections", l.max_connections), ("max_connections_per_ip", l.max_connections_per_ip)]
            {
                if v == Some(0) {
                    return Err(invalid(key(k), "must be at least 1 (unset = unlimited)"));
                }
            }
        }
        if self.max_frame_bytes < 1024 || self.max_frame_bytes > i32::MAX as usize {
            return Err(invalid("max_frame_bytes", "must be between 1024 and 2147483647 bytes"));
        }
        if self.max_in_flight_requests == 0 {
            return Err(invalid("max_in_flight_requests", "must be at least 1"));
        }
        if matches!(self.num_network_threads, Some(n) if n == 0 || n > MAX_NETWORK_THREADS) {
            return Err(invalid(
                "num_network_threads",
                format!("must be between 1 and {MAX_NETWORK_THREADS} (unset = the number of CPUs)"),
            ));
        }
        if self.sasl_server_max_receive_size < 1024 || self.sasl_server_max_receive_size > i32::MAX as usize {
            return Err(invalid("sasl_server_max_receive_size", "must be between 1024 and 2147483647 bytes"));
        }
        if self.queued_max_request_bytes < self.max_frame_bytes {
            return Err(invalid(
                "queued_max_request_bytes",
                format!(
                    "{} bytes is less than max_frame_bytes ({} bytes): a request of the largest accepted size could never be read",
                    self.queued_max_request_bytes, self.max_frame_bytes
                ),
            ));
        }
        for (k, v) in [
            ("destination.connect_timeout_ms", self.destination.connect_timeout_ms),
            ("destination.request_timeout_ms", self.destination.request_timeout_ms),
            ("destination.metadata_refresh_interval_ms", self.destination.metadata_refresh_interval_ms),
            ("connections_max_idle_ms", self.connections_max_idle_ms),
            ("client_frame_timeout_ms", self.client_frame_timeout_ms),
            ("client_write_timeout_ms", self.client_write_timeout_ms),
        ] {
            if v == 0 {
                return Err(invalid(k, "must be greater than 0 ms"));
            }
        }
        self.mirror_api_keys.validate().map_err(|e| invalid("mirror_api_keys", e.to_string()))?;
        if self.mirror_state.topic.is_empty() {
            return Err(invalid("mirror_state.topic", "must not be empty"));
        }
        if self.mirror_state.num_partitions < 1 {
            return Err(invalid("mirror_state.num_partitions", "must be at least 1"));
        }
        self.mirror_state.check_encoder_secrets()?;
        if self.mirror_state.replication_factor < 1 {
            return Err(invalid("mirror_state.replication_factor", "must be at least 1"));
        }
        let metrics_listen = match &self.metrics.listen {
            None => None,
            Some(a) => Some(
                a.parse::<SocketAddr>().map_err(|_| invalid("metrics.listen", format!("`{a}` is not `ip:port`")))?,
            ),
        };
        tracing_subscriber::EnvFilter::try_new(&self.log.level)
            .map_err(|e| invalid("log.level", format!("`{}`: {e}", self.log.level)))?;
        let destination_security =
            crate::client::ClientSecurity::from_properties(&self.destination.security_properties())
                .map_err(|e| invalid(format!("destination.{}", e.key.replace('.', "_")), e.reason))?;
        let client_upstream = upstream::client_upstream(
            &self.destination,
            &destination_security,
            self.destination.client_upstream.as_ref(),
        )?;
        for (i, p) in self.authorization.super_users.iter().enumerate() {
            if !p.split_once(':').is_some_and(|(t, n)| !t.is_empty() && !n.is_empty()) {
                return Err(invalid(
                    format!("authorization.super_users[{i}]"),
                    format!("`{p}` is not a principal like `User:admin`"),
                ));
            }
        }
        let sasl_oauthbearer_allowed_urls = match &self.mirrors.sasl_oauthbearer_allowed_urls {
            None => None,
            Some(text) => Some(
                crate::mirror::bound_credentials::parse_allowed_urls(text)
                    .map_err(|r| invalid("mirrors.sasl_oauthbearer_allowed_urls", r))?,
            ),
        };
        let membership = self.instances.validate(&self.mirror_state.topic)?;
        let traces = self.traces.validate()?;
        Ok(Settings {
            membership,
            traces,
            super_users: self.authorization.super_users.clone(),
            sasl_oauthbearer_allowed_urls,
            destination_bootstrap,
            destination_security,
            client_upstream,
            connect_timeout: Duration::from_millis(self.destination.connect_timeout_ms),
            request_timeout: Duration::from_millis(self.destination.request_timeout_ms),
            metadata_refresh_interval: Duration::from_millis(self.destination.metadata_refresh_interval_ms),
            listeners,
            max_frame_bytes: self.max_frame_bytes,
            max_in_flight_requests: self.max_in_flight_requests,
            num_network_threads: self.num_network_threads.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get).min(MAX_NETWORK_THREADS)
            }),
            queued_max_request_bytes: self.queued_max_request_bytes,
            fetch_stream_min_bytes: self.fetch_stream_min_bytes,
            fetch_stream_zero_copy: self.fetch_stream_zero_copy,
            sasl_server_max_receive_size: self.sasl_server_max_receive_size,
            client_write_timeout: Duration::from_millis(self.client_write_timeout_ms),
            read_timeouts: crate::proxy::limits::ReadTimeouts {
                idle: Duration::from_millis(self.connections_max_idle_ms),
                frame: Duration::from_millis(self.client_frame_timeout_ms),
            },
            log: self.log,
            mirror_api_keys: self.mirror_api_keys,
            mirror_state: self.mirror_state,
            metrics_listen,
        })
    }
}

impl InstancesConfig {
    /// The membership settings, defaults filled in.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`]: an empty name or group id, a timeout of 0 or above
    /// 2147483647 ms (JoinGroup's INT32 fields), a heartbeat interval not less than half the
    /// session timeout, or a rebalance timeout less than the session timeout.
    fn validate(&self, state_topic: &str) -> Result<crate::mirror::members::MembershipSettings, ConfigError> {
        for (k, v) in [("instances.name", &self.name), ("instances.group_id", &self.group_id)] {
            if v.as_ref().is_some_and(|s| s.trim().is_empty()) {
                return Err(invalid(k, "must not be empty (unset it for the default)"));
            }
        }
        for (k, v) in [
            ("instances.session_timeout_ms", self.session_timeout_ms),
            ("instances.heartbeat_interval_ms", self.heartbeat_interval_ms),
            ("instances.rebalance_timeout_ms", self.rebalance_timeout_ms),
        ] {
            if v == 0 || v > i32::MAX as u64 {
                return Err(invalid(k, "must be between 1 and 2147483647 ms"));
            }
        }
        if self.heartbeat_interval_ms.saturating_mul(2) >= self.session_timeout_ms {
            return Err(invalid(
                "instances.heartbeat_interval_ms",
                format!(
                    "{} ms must be less than half of instances.session_timeout_ms ({} ms): an instance stops \
                     its mirror work when no heartbeat succeeded for the session timeout minus one interval",
                    self.heartbeat_interval_ms, self.session_timeout_ms
                ),
            ));
        }
        if self.rebalance_timeout_ms < self.session_timeout_ms {
            return Err(invalid(
                "instances.rebalance_timeout_ms",
                format!(
                    "{} ms is less than instances.session_timeout_ms ({} ms): the coordinator drops an \
                     instance that has not rejoined within the rebalance timeout, which must not happen \
                     before that instance stops its work (session timeout − heartbeat interval)",
                    self.rebalance_timeout_ms, self.session_timeout_ms
                ),
            ));
        }
        Ok(crate::mirror::members::MembershipSettings {
            group_id: self.group_id.clone().unwrap_or_else(|| format!("mirrorgate.{state_topic}")),
            instance: self.name.clone().unwrap_or_else(default_instance_name),
            session_timeout: Duration::from_millis(self.session_timeout_ms),
            heartbeat_interval: Duration::from_millis(self.heartbeat_interval_ms),
            rebalance_timeout: Duration::from_millis(self.rebalance_timeout_ms),
        })
    }
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

fn parse_port_range(s: &str) -> Result<(u16, u16), String> {
    let (a, b) = s.split_once('-').ok_or_else(|| format!("`{s}` is not `FIRST-LAST` (e.g. `19092-19191`)"))?;
    let first: u16 = a.trim().parse().map_err(|_| format!("`{a}` is not a port"))?;
    let last: u16 = b.trim().parse().map_err(|_| format!("`{b}` is not a port"))?;
    if first == 0 || last < first {
        return Err(format!("`{s}`: FIRST must be > 0 and LAST >= FIRST"));
    }
    if last - first < 1 {
        return Err(format!(
            "`{s}` holds {} port(s); at least 2 are needed (a bootstrap port and one per broker)",
            last - first + 1
        ));
    }
    Ok((first, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "
destination:
  bootstrap_servers: 127.0.0.1:9092, 127.0.0.1:9093
listeners:
  - name: clients
    bind_host: 127.0.0.1
    port_range: 19092-19100
    admin: true
";

    #[test]
    fn good_config_validates_with_defaults() {
        let s = ProxyConfig::from_yaml(GOOD).unwrap().validate().unwrap();
        assert_eq!(s.destination_bootstrap, vec!["127.0.0.1:9092", "127.0.0.1:9093"]);
        assert_eq!(s.max_frame_bytes, 100 * 1024 * 1024);
        let l = &s.listeners[0];
        assert_eq!((l.bootstrap_port, l.advertised_host.as_str(), l.admin), (19092, "127.0.0.1", true));
        assert_eq!(l.broker_port(1), Some(19094));
        assert_eq!(l.broker_port(7), Some(19100));
        assert_eq!(l.broker_port(8), None);
    }

    #[test]
    fn instances_defaults_and_limits() {
        let s = ProxyConfig::from_yaml(GOOD).unwrap().validate().unwrap();
        let m = &s.membership;
        assert_eq!(m.group_id, "mirrorgate.__mirror_state");
        assert!(m.instance.ends_with(&format!("-{}", std::process::id())), "{}", m.instance);
        assert_eq!(
            (m.session_timeout, m.heartbeat_interval, m.rebalance_timeout),
            (Duration::from_secs(10), Duration::from_secs(3), Duration::from_secs(30))
        );
        let text = format!(
            "{GOOD}instances:\n  name: mg-a\n  group_id: g1\n  session_timeout_ms: 6000\n  heartbeat_interval_ms: 1000\n"
        );
        let m = ProxyConfig::from_yaml(&text).unwrap().validate().unwrap().membership;
        assert_eq!(
            (m.instance.as_str(), m.group_id.as_str(), m.self_fence_after()),
            ("mg-a", "g1", Duration::from_secs(5))
        );
        for (yaml, key) in [
            ("heartbeat_interval_ms: 5000", "instances.heartbeat_interval_ms"),
            ("session_timeout_ms: 0", "instances.session_timeout_ms"),
            ("rebalance_timeout_ms: 3000000000", "instances.rebalance_timeout_ms"),
            ("name: ''", "instances.name"),
            ("rebalance_timeout_ms: 9000", "instances.rebalance_timeout_ms"),
        ] {
            let text = format!("{GOOD}instances:\n  {yaml}\n");
            let err = ProxyConfig::from_yaml(&text).unwrap().validate().unwrap_err();
            assert!(err.to_string().contains(key), "{yaml}: {err}");
        }
    }

    #[test]
    fn network_threads_default_to_the_cpus_and_are_bounded() {
        let s = ProxyConfig::from_yaml(GOOD).unwrap().validate().unwrap();
        assert_eq!(s.num_network_threads, std::thread::available_parallelism().unwrap().get().min(MAX_NETWORK_THREADS));
        let s = ProxyConfig::from_yaml(&format!("{GOOD}num_network_threads: 3\n")).unwrap().validate().unwrap();
        assert_eq!(s.num_network_threads, 3);
        for n in [0, 257] {
            let err = ProxyConfig::from_yaml(&format!("{GOOD}num_network_threads: {n}\n"))
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(err.contains("num_network_threads") && err.contains("between 1 and 256"), "{n}: {err}");
        }
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let secrets = ["pw-dest-1", "tp-2", "ksp-3", "keymaterial-4", "kp-5", "encoder-secret-0123456789", "old-6"];
        let [pw, tp, ksp, key, kp, enc, old] = secrets;
        let text = format!(
            "destination:
  bootstrap_servers: 127.0.0.1:9092
  sasl_jaas_config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"{pw}\";'
  ssl_truststore_password: {tp}
  ssl_keystore_password: {ksp}
  ssl_keystore_key: '-----BEGIN PRIVATE KEY----- {key}'
  ssl_key_password: {kp}
listeners:
  - bind_host: 127.0.0.1
    port_range: 19092-19100
mirror_state:
  password_encoder_secret: {enc}
  password_encoder_old_secret: {old}
"
        );
        let cfg = ProxyConfig::from_yaml(&text).unwrap();
        assert_eq!(cfg.destination.ssl_key_password.as_ref().map(Secret::expose), Some(kp));
        let jaas = cfg.destination.sasl_jaas_config.as_ref().unwrap();
        let shown = format!("{cfg:?} {:?} {jaas}", cfg.mirror_state);
        for s in secrets {
            assert!(!shown.contains(s), "`{s}` shown: {shown}");
        }
        let settings = ProxyConfig::from_yaml(&format!("{GOOD}mirror_state:\n  password_encoder_secret: {enc}\n"))
            .unwrap()
            .validate()
            .unwrap();
        assert!(!format!("{settings:?}").contains(enc));
    }

    #[test]
    fn a_short_password_encoder_secret_is_refused() {
        let with = |secret: &str, old: &str| {
            ProxyConfig::from_yaml(&format!(
                "{GOOD}mirror_state:\n  password_encoder_secret: '{secret}'\n  password_encoder_old_secret: '{old}'\n"
            ))
            .unwrap()
            .validate()
        };
        let err = with("fifteen-chars-x", "old").unwrap_err().to_string();
        assert!(
            err.contains("mirror_state.password_encoder_secret")
                && err.contains("15 characters")
                && err.contains("at least 16"),
            "{err}"
        );
        assert!(!err.contains("fifteen-chars-x"), "the secret is echoed: {err}");
        // 16 characters (not bytes) are enough; the old secret only has to be non-empty.
        assert!(with("sixteen-chars-xy", "old").is_ok());
        assert!(with("ééééééééééééééé", "old").is_err(), "15 characters in 30 bytes");
        let err = with("sixteen-chars-xy", "").unwrap_err().to_string();
        assert!(err.contains("password_encoder_old_secret"), "{err}");
    }

    #[test]
    fn unknown_key_is_refused_by_name() {
        let err = ProxyConfig::from_yaml(&format!("{GOOD}\nmax_frame_byte: 5\n")).unwrap_err();
        assert!(err.to_string().contains("max_frame_byte"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            ("127.0.0.1:9092, 127.0.0.1:9093", "bootstrap_servers: nohost", "destination.bootstrap_servers"),
            ("bind_host: 127.0.0.1", "bind_host: not-an-ip", "listeners[0].bind_host"),
            ("port_range: 19092-19100", "port_range: 19092-19092", "listeners[0].port_range"),
            ("port_range: 19092-19100", "port_range: abc", "listeners[0].port_range"),
        ];
        for (from, to, key) in cases {
            let text =
                GOOD.replacen(from, to, 1).replace("bootstrap_servers: bootstrap_servers:", "bootstrap_servers:");
            let text = if from.starts_with("127") {
                GOOD.replacen(&format!("bootstrap_servers: {from}"), to, 1)
            } else {
                text
            };
            let err = ProxyConfig::from_yaml(&text).unwrap().validate().unwrap_err();
            assert!(err.to_string().contains(key), "{to}: {err}");
        }
    }
}
