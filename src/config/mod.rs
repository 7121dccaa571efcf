//! `proxy.yaml`: loaded once with the `config` crate (YAML file, then environment overrides
//! `MIRRORGATE__SECTION__KEY`), validated up front into typed structs. After startup no code
//! reads raw strings from the configuration.
//!
//! One file per section: [`destination`] (the destination cluster), [`listeners`] (client
//! listeners), [`limits`] (frame, memory and timeout limits of client connections),
//! [`mirror_state`] (the state topic), [`instances`] (group membership), [`access`]
//! (authorization and what mirrors may point at), [`telemetry`] and [`traces`] (logs,
//! metrics, spans); [`validate`] turns a [`ProxyConfig`] into [`Settings`].

use std::path::Path;

use serde::Deserialize;

use crate::wire::frame::DEFAULT_MAX_FRAME_BYTES;
use crate::wire::mirror::MirrorApiTable;

pub use crate::secret::Secret;

mod access;
mod destination;
mod instances;
mod limits;
mod listeners;
mod mirror_state;
mod telemetry;
mod traces;
mod upstream;
mod validate;

pub use access::{parse_allowed_urls, parse_files_dir, AuthorizationConfig, MirrorsConfig};
pub use destination::{parse_bootstrap, DestinationConfig};
pub use instances::{default_instance_name, InstancesConfig, MembershipSettings};
pub use limits::{ReadTimeouts, DEFAULT_FETCH_STREAM_MIN_BYTES};
pub use listeners::{Listener, ListenerConfig, ListenerTls, ListenerTlsConfig};
pub use mirror_state::{MirrorStateConfig, MIN_ENCODER_SECRET_CHARS};
pub use telemetry::{LogConfig, LogFormat, MetricsConfig};
pub use traces::{OtlpProtocol, TracesConfig, TracesSettings};
pub use upstream::{ClientUpstream, ClientUpstreamConfig};
pub use validate::Settings;

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
    DEFAULT_FETCH_STREAM_MIN_BYTES
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
}

#[cfg(test)]
mod tests;
