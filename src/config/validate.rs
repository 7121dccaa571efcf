//! [`ProxyConfig::validate`]: every section checked, in one order, into [`Settings`].

use std::net::SocketAddr;
use std::time::Duration;

use super::limits::MAX_NETWORK_THREADS;
use super::{
    invalid, listeners, parse_bootstrap, upstream, ClientUpstream, ConfigError, Listener, LogConfig, MirrorStateConfig,
    ProxyConfig, ReadTimeouts, TracesSettings,
};
use crate::wire::mirror::MirrorApiTable;

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
    pub read_timeouts: ReadTimeouts,
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
    /// `mirrors.ssl_files_dir`, canonical (`None`: unset).
    pub mirror_ssl_files_dir: Option<std::path::PathBuf>,
    /// `instances.*`: this instance's group membership.
    pub membership: super::MembershipSettings,
    /// `traces.*` resolved against the `OTEL_*` environment; `None` = no spans.
    pub traces: Option<TracesSettings>,
}

impl ProxyConfig {
    /// Checks every value and returns the typed settings.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key: empty or unparsable bootstrap servers, a bad
    /// bind address, a port range that is malformed or holds fewer than 2 ports, overlapping
    /// listener ranges, a zero frame cap or timeout, or an unknown log level.
    pub fn validate(self) -> Result<Settings, ConfigError> {
        let destination_bootstrap = parse_bootstrap(&self.destination.bootstrap_servers)
            .map_err(|r| invalid("destination.bootstrap_servers", r))?;
        let listeners = listeners::validate(&self.listeners)?;
        self.check_limits()?;
        self.mirror_api_keys.validate().map_err(|e| invalid("mirror_api_keys", e.to_string()))?;
        self.mirror_state.check()?;
        let metrics_listen = self.metrics.listen_addr()?;
        self.log.check()?;
        let destination_security =
            crate::client::ClientSecurity::from_properties(&self.destination.security_properties())
                .map_err(|e| invalid(format!("destination.{}", e.key.replace('.', "_")), e.reason))?;
        let client_upstream = upstream::client_upstream(
            &self.destination,
            &destination_security,
            self.destination.client_upstream.as_ref(),
        )?;
        self.authorization.check()?;
        let sasl_oauthbearer_allowed_urls = self.mirrors.allowed_urls()?;
        let mirror_ssl_files_dir = self.mirrors.files_dir()?;
        let membership = self.instances.validate(&self.mirror_state.topic)?;
        let traces = self.traces.validate()?;
        Ok(Settings {
            membership,
            traces,
            super_users: self.authorization.super_users.clone(),
            sasl_oauthbearer_allowed_urls,
            mirror_ssl_files_dir,
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
            read_timeouts: ReadTimeouts::of(&self),
            log: self.log,
            mirror_api_keys: self.mirror_api_keys,
            mirror_state: self.mirror_state,
            metrics_listen,
        })
    }
}
