//! The client side's request metrics: requests per api key and version, request latency,
//! errors mirrorgate answers itself per error code, bytes in and out and open connections per
//! listener (KIP-1279 RequestMetrics for the mirror RPCs, and the proxy's own figures).
//!
//! Cheap on the hot path: label values are `&'static str` from tables built once at startup
//! (api names, small integers), and the per-listener handles are made once per connection, so
//! counting a request never allocates a label string.

use std::sync::OnceLock;
use std::time::Instant;

use kafka_protocol::messages::ApiKey;
use metrics::{Counter, Gauge};

/// Highest api key with its own name label; keys above it (and negative ones) are `unknown`.
const MAX_NAMED_KEY: i16 = 255;

/// Histogram buckets of [`REQUEST_DURATION`], seconds: 0.5 ms .. 30 s (a long-polling Fetch
/// waits up to its `max_wait_ms`).
pub const REQUEST_DURATION_BUCKETS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// `mirrorgate_requests_total{api,version}`: client requests read, per api key name and
/// version (KIP-1279 RequestMetrics `RequestsPerSec{request,version}` by `rate()`).
pub const REQUESTS: &str = "mirrorgate_requests_total";
/// `mirrorgate_request_duration_seconds{api}` (histogram, seconds): from the request read off
/// the client connection to its response written back (KIP-1279 RequestMetrics
/// `TotalTimeMs`). Requests without a response (Produce with acks=0) are not timed.
pub const REQUEST_DURATION: &str = "mirrorgate_request_duration_seconds";
/// `mirrorgate_request_errors_total{api,code}`: responses mirrorgate answered itself with a
/// non-zero Kafka error code (mirror admin RPCs, refused Produce requests), per code
/// (KIP-1279 RequestMetrics `ErrorsPerSec{request,error}`). Forwarded responses are not
/// decoded: their errors are the destination broker's own RequestMetrics.
pub const REQUEST_ERRORS: &str = "mirrorgate_request_errors_total";

/// Names for api keys: Kafka's (`Produce`, `Fetch`, ...) and, on the keys a deployment gives
/// them, the mirror RPCs' (`CreateClusterMirror`, ...). Built once.
#[derive(Debug, Clone)]
pub struct ApiNames {
    names: Vec<&'static str>,
}

impl ApiNames {
    /// Kafka's api key names, with `mirror(key)` taking precedence where it names a key (the
    /// mirror RPCs' configured keys).
    pub fn new(mirror: impl Fn(i16) -> Option<&'static str>) -> Self {
        let names = (0..=MAX_NAMED_KEY)
            .map(|k| {
                mirror(k).unwrap_or_else(|| match ApiKey::try_from(k) {
                    // Once per api key at startup: the label must live as long as the recorder.
                    Ok(key) => Box::leak(format!("{key:?}").into_boxed_str()),
                    Err(_) => "unknown",
                })
            })
            .collect();
        Self { names }
    }

    /// The label of `api_key`: its name, or `unknown`.
    pub fn name(&self, api_key: i16) -> &'static str {
        usize::try_from(api_key).ok().and_then(|i| self.names.get(i)).copied().unwrap_or("unknown")
    }
}

/// A small integer (an api version, a Kafka error code) as a `&'static str` label: `-1` ..
/// `255` from a table made once, anything else `other`.
pub fn int_label(v: i16) -> &'static str {
    static TABLE: OnceLock<Vec<&'static str>> = OnceLock::new();
    let table = TABLE.get_or_init(|| (-1..=255i16).map(|i| &*Box::leak(i.to_string().into_boxed_str())).collect());
    usize::try_from(i32::from(v) + 1).ok().and_then(|i| table.get(i)).copied().unwrap_or("other")
}

/// Counts one client request of `api` (a name from [`ApiNames`]) at `version`.
pub fn request(api: &'static str, version: i16) {
    metrics::counter!(REQUESTS, "api" => api, "version" => int_label(version)).increment(1);
}

/// Records the time from `read` (the request read) to now, when its response went out.
pub fn responded(api: &'static str, read: Instant) {
    metrics::histogram!(REQUEST_DURATION, "api" => api).record(read.elapsed().as_secs_f64());
}

/// Counts a response mirrorgate answered itself with Kafka error `code` (0 is not counted).
pub fn error(api: &'static str, code: i16) {
    if code != 0 {
        metrics::counter!(REQUEST_ERRORS, "api" => api, "code" => int_label(code)).increment(1);
    }
}

/// One client connection's handles on its listener's series:
/// `mirrorgate_client_received_bytes_total{listener}` and
/// `mirrorgate_client_sent_bytes_total{listener}` (bytes of Kafka frames with their 4-byte
/// length prefix, KIP-1279 `incoming-byte-total` / `outgoing-byte-total`), and
/// `mirrorgate_client_connections{listener}` (open connections, `connection-count`), which it
/// raises while it lives.
#[derive(Debug)]
pub struct ConnectionMetrics {
    /// Bytes read from the client.
    pub received: Counter,
    /// Bytes written to the client.
    pub sent: Counter,
    open: Gauge,
}

impl ConnectionMetrics {
    /// Opens the connection's series on `listener` (one allocation per connection) and counts
    /// it open until dropped.
    pub fn open(listener: &str) -> Self {
        let open = metrics::gauge!("mirrorgate_client_connections", "listener" => listener.to_string());
        open.increment(1.0);
        Self {
            received: metrics::counter!("mirrorgate_client_received_bytes_total", "listener" => listener.to_string()),
            sent: metrics::counter!("mirrorgate_client_sent_bytes_total", "listener" => listener.to_string()),
            open,
        }
    }
}

impl Drop for ConnectionMetrics {
    fn drop(&mut self) {
        self.open.decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_names_prefer_the_mirror_rpcs_and_fall_back_to_unknown() {
        let names = ApiNames::new(|k| (k == 94).then_some("CreateClusterMirror"));
        assert_eq!(names.name(0), "Produce");
        assert_eq!(names.name(1), "Fetch");
        assert_eq!(names.name(18), "ApiVersions");
        assert_eq!(names.name(94), "CreateClusterMirror");
        assert_eq!(names.name(-3), "unknown");
        assert_eq!(names.name(i16::MAX), "unknown");
        assert_eq!(names.name(250), "unknown");
    }

    #[test]
    fn int_labels_cover_versions_and_error_codes() {
        assert_eq!(int_label(-1), "-1");
        assert_eq!(int_label(0), "0");
        assert_eq!(int_label(17), "17");
        assert_eq!(int_label(255), "255");
        assert_eq!(int_label(256), "other");
        assert_eq!(int_label(-2), "other");
        // The same &'static str every time: no allocation per call.
        assert!(std::ptr::eq(int_label(3), int_label(3)));
    }
}
