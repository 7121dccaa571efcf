//! Logs, Prometheus metrics and OTLP traces. Log lines and span attributes never contain
//! secrets.

pub mod http;
pub mod metrics;
pub mod traces;

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// Installs the global `tracing` subscriber: `RUST_LOG` when set, else `log.level`; text or
/// JSON lines on stderr.
pub fn init_logging(log: &LogConfig) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&log.level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match log.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
