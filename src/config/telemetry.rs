//! `log.*` and `metrics.*`: logging and the Prometheus endpoint (spans: [`super::traces`]).

use std::net::SocketAddr;

use serde::Deserialize;

use super::{invalid, ConfigError};

/// Where Prometheus scrapes mirrorgate.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// `host:port` of the `/metrics` endpoint, e.g. `127.0.0.1:9464`; unset = no endpoint.
    #[serde(default)]
    pub listen: Option<String>,
}

impl MetricsConfig {
    /// The `/metrics` endpoint's address, if set.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `metrics.listen` when it is not `ip:port`.
    pub(super) fn listen_addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        match &self.listen {
            None => Ok(None),
            Some(a) => Ok(Some(
                a.parse::<SocketAddr>().map_err(|_| invalid("metrics.listen", format!("`{a}` is not `ip:port`")))?,
            )),
        }
    }
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

impl LogConfig {
    /// Checks that `level` is a `tracing` filter directive.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `log.level`.
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        tracing_subscriber::EnvFilter::try_new(&self.level)
            .map_err(|e| invalid("log.level", format!("`{}`: {e}", self.level)))?;
        Ok(())
    }
}

fn default_log_level() -> String {
    "info".into()
}
