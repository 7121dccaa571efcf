//! Limits of client connections (frame sizes, in-flight requests, request memory, network
//! threads) and the timeouts of client and destination connections.

use std::time::Duration;

use super::{invalid, ConfigError, ProxyConfig};

/// Default smallest Fetch response (bytes after the length prefix) forwarded to a client
/// while it arrives (`fetch_stream_min_bytes`; `crate::proxy::fetch_stream`).
pub const DEFAULT_FETCH_STREAM_MIN_BYTES: usize = 256 * 1024;

/// The read deadlines of one client connection.
#[derive(Debug, Clone, Copy)]
pub struct ReadTimeouts {
    /// `connections_max_idle_ms`.
    pub idle: Duration,
    /// `client_frame_timeout_ms`.
    pub frame: Duration,
}

impl ReadTimeouts {
    /// `connections_max_idle_ms` and `client_frame_timeout_ms` of `cfg`.
    pub(super) fn of(cfg: &ProxyConfig) -> Self {
        Self {
            idle: Duration::from_millis(cfg.connections_max_idle_ms),
            frame: Duration::from_millis(cfg.client_frame_timeout_ms),
        }
    }
}

/// Most network threads accepted: more than any machine's useful count, fewer than would
/// exhaust its threads.
pub(super) const MAX_NETWORK_THREADS: usize = 256;

impl ProxyConfig {
    /// Checks the frame, pipelining, memory and thread limits, then every timeout (none 0).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key.
    pub(super) fn check_limits(&self) -> Result<(), ConfigError> {
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
        Ok(())
    }
}
