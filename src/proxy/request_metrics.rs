//! The client side's request metrics: requests per api key and version, request latency,
//! errors mirrorgate answers itself per error code, bytes in and out and open connections per
//! listener (KIP-1279 RequestMetrics for the mirror RPCs, and the proxy's own figures).
//!
//! Cheap on the hot path: label values are `&'static str` from tables built once at startup
//! (api names, small integers); the handles of each (api key, version) are made on first use and
//! kept, and the per-listener handles once per connection, so counting a request allocates
//! nothing and looks nothing up in the recorder's registry.

use std::sync::OnceLock;
use std::time::Instant;

use kafka_protocol::messages::ApiKey;
use metrics::{Counter, Gauge, Histogram};

/// Highest api key with its own name label; keys above it (and negative ones) are `unknown`.
const MAX_NAMED_KEY: i16 = 255;
/// Api versions whose request counter handle is kept; a higher one is counted through the
/// registry (no Kafka API has that many versions yet).
const CACHED_VERSIONS: usize = 32;

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
/// them, the mirror RPCs' (`CreateClusterMirror`, ...), with the request metrics' handles of
/// each key. Built once; handles are made on first use (after the recorder is installed).
pub struct ApiNames {
    names: Vec<&'static str>,
    /// [`REQUESTS`] per (api key, version): `key * CACHED_VERSIONS + version`.
    requests: Vec<OnceLock<Counter>>,
    /// [`REQUEST_DURATION`] per api key.
    durations: Vec<OnceLock<Histogram>>,
}

impl std::fmt::Debug for ApiNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiNames").field("keys", &self.names.len()).finish()
    }
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
        let keys = MAX_NAMED_KEY as usize + 1;
        Self {
            names,
            requests: (0..keys * CACHED_VERSIONS).map(|_| OnceLock::new()).collect(),
            durations: (0..keys).map(|_| OnceLock::new()).collect(),
        }
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

impl ApiNames {
    /// Counts one client request of `api_key` at `version` ([`REQUESTS`]).
    pub fn request(&self, api_key: i16, version: i16) {
        let api = self.name(api_key);
        let make = || metrics::counter!(REQUESTS, "api" => api, "version" => int_label(version));
        let slot = usize::try_from(api_key)
            .ok()
            .zip(usize::try_from(version).ok().filter(|v| *v < CACHED_VERSIONS))
            .and_then(|(k, v)| self.requests.get(k * CACHED_VERSIONS + v));
        match slot {
            Some(cell) => cell.get_or_init(make).increment(1),
            None => make().increment(1),
        }
    }

    /// Records the time from `read` (the request of `api_key` read) to now, when its response
    /// went out ([`REQUEST_DURATION`], seconds).
    pub fn responded(&self, api_key: i16, read: Instant) {
        let api = self.name(api_key);
        let make = || metrics::histogram!(REQUEST_DURATION, "api" => api);
        let seconds = read.elapsed().as_secs_f64();
        match usize::try_from(api_key).ok().and_then(|k| self.durations.get(k)) {
            Some(cell) => cell.get_or_init(make).record(seconds),
            None => make().record(seconds),
        }
    }
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
    fn requests_latency_and_errors_reach_the_prometheus_output_under_their_labels() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
            .set_buckets_for_metric(
                metrics_exporter_prometheus::Matcher::Full(REQUEST_DURATION.into()),
                REQUEST_DURATION_BUCKETS,
            )
            .unwrap()
            .build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            let names = ApiNames::new(|k| (k == 104).then_some("DeleteClusterMirror"));
            names.request(0, 9);
            names.request(0, 9); // the cached handle
            names.request(0, 40); // beyond the cache
            names.request(104, 0);
            names.responded(104, Instant::now());
            error("DeleteClusterMirror", 0);
            error("DeleteClusterMirror", 120);
            let conn = ConnectionMetrics::open("plain");
            conn.received.increment(10);
            let text = handle.render();
            for line in [
                "mirrorgate_requests_total{api=\"Produce\",version=\"9\"} 2",
                "mirrorgate_requests_total{api=\"Produce\",version=\"40\"} 1",
                "mirrorgate_requests_total{api=\"DeleteClusterMirror\",version=\"0\"} 1",
                "mirrorgate_request_duration_seconds_count{api=\"DeleteClusterMirror\"} 1",
                "mirrorgate_request_errors_total{api=\"DeleteClusterMirror\",code=\"120\"} 1",
                "mirrorgate_client_received_bytes_total{listener=\"plain\"} 10",
                "mirrorgate_client_connections{listener=\"plain\"} 1",
            ] {
                assert!(text.contains(line), "{line} not in:\n{text}");
            }
            assert!(!text.contains("code=\"0\""), "a zero error code was counted:\n{text}");
            drop(conn);
            assert!(handle.render().contains("mirrorgate_client_connections{listener=\"plain\"} 0"));
        });
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
