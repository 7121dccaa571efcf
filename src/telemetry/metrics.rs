//! Prometheus metrics: the KIP-1279 metric set (seed "Metrics" table) under Prometheus names,
//! served on `metrics.listen` (e.g. `127.0.0.1:9464/metrics`) by `metrics-exporter-prometheus`.
//! The operators' table, KIP JMX name beside Prometheus name for every row of the KIP's, is
//! `docs/operations.md` ("The KIP's metrics on Prometheus"; checked by `tests/prometheus.rs`).
//! The series are registered and updated where their data is, through the `metrics` facade:
//! `mirror::metrics` (copy loops, fetchers, the per-partition gauges), `client::metrics`
//! (mirrorgate's own broker connections), `proxy::request_metrics` (the client side). This
//! module only installs the exporter, and holds the two client-authentication counters.
//!
//! | Prometheus name | KIP metric |
//! |---|---|
//! | `mirrorgate_mirror_partition_lag{mirror,topic,partition}` | FetcherLagMetrics ConsumerLag (offsets): source LSO − destination end, read live every 2 s whatever the partition's state (`mirror::dataplane::live`); a failed read keeps the last value |
//! | `mirrorgate_mirror_partition_lag_high_watermark{mirror,topic,partition}` | (extension) lag against the source high watermark: grows while a source transaction stays open (offsets) |
//! | `mirrorgate_mirror_max_lag{mirror}` | MirrorFetcherManager MaxLag (offsets) |
//! | `mirrorgate_mirror_partitions{mirror,state}` | *PartitionState gauges (FailedPartitionState, ...) |
//! | `mirrorgate_mirror_failed_partitions{mirror}` | FailedPartitionsCount |
//! | `mirrorgate_mirror_bytes_total{mirror}` / `mirrorgate_mirror_records_total{mirror}` | FetcherStats BytesPerSec (rate() of it) |
//! | `mirrorgate_mirror_lost_offsets_total` | source offsets removed by retention before they were copied |
//! | `mirrorgate_metadata_sync_errors_total{kind}` | MetadataRefreshError, TopicConfigMetadataSyncError, ConsumerGroupOffsetSyncError, AclSyncError |
//! | `mirrorgate_client_connections{listener}` | connection-count (clients, per listener; `proxy::request_metrics`) |
//! | `mirrorgate_requests_total{api,version}`, `mirrorgate_request_duration_seconds{api}` (histogram), `mirrorgate_request_errors_total{api,code}` | RequestMetrics RequestsPerSec / TotalTimeMs / ErrorsPerSec (`proxy::request_metrics`) |
//! | `mirrorgate_client_received_bytes_total{listener}`, `mirrorgate_client_sent_bytes_total{listener}` | incoming-byte-total / outgoing-byte-total of the client side |
//! | `mirrorgate_mirror_source_fetch_requests_total{mirror,broker}`, `..._bytes_total`, `..._errors_total`, `mirrorgate_mirror_source_fetch_duration_seconds` (histogram) | FetcherStats RequestsPerSec / BytesPerSec per source broker; MinFetchRate = `min by (mirror) (rate(...requests_total[1m]))` |
//! | `mirrorgate_mirror_dead_tasks_total{mirror,task}` | DeadThreadCount (copy loops and fetchers that panicked; replaced, so a count of deaths) |
//! | `mirrorgate_mirror_partition_state{mirror,topic,partition}`, `mirrorgate_mirror_partition_source_offset{...}`, `mirrorgate_mirror_partition_destination_offset{...}` | (extension) each partition's state id and live offsets, for the "stalled" alert |
//! | `mirrorgate_broker_connections_created_total{broker}` / `..._closed_total{broker}` | connection-creation-total / connection-close-total (mirrorgate's own connections to source and destination brokers; rates by `rate()`) |
//! | `mirrorgate_broker_authentications_total{broker,mechanism,result}` | successful-authentication-total / failed-authentication-total (`result` = `success` / `failure`) |
//! | `mirrorgate_broker_reauthentications_total{broker,mechanism,result}` | successful-reauthentication-total / failed-reauthentication-total (KIP-368 in-band re-authentications) |
//! | `mirrorgate_broker_reauthentication_latency_seconds{broker,mechanism}` (summary) | reauthentication-latency-avg (`_sum` / `_count`) / reauthentication-latency-max (`quantile="1"`, over the summary's recent window) |
//! | `mirrorgate_client_reauthentications_total{result}` | clients' KIP-368 re-authentications through mirrorgate, as the destination answered |
//! | `mirrorgate_client_authentications_total{result}` | clients' SASL exchanges through mirrorgate, as the destination answered (failed client authentications) |
//! | `mirrorgate_client_sasl_refused_total{reason}` | client SASL requests or answers that closed the connection (`proxy::sasl_inspect`: `pipelined`, `out_of_sequence`, `duplicate_key`, ...); each is also a failure in the two counters above |
//! | `mirrorgate_client_connections_refused_total{listener,reason}` | connections closed at accept by `max_connections` / `max_connections_per_ip` |
//! | `mirrorgate_client_connections_timed_out_total{reason}` | connections closed by `connections_max_idle_ms` (`idle`), `client_frame_timeout_ms` (`partial_frame`) or `client_write_timeout_ms` (`write`) |
//! | `mirrorgate_client_request_memory_bytes`, `mirrorgate_client_request_memory_waits_total` | request bytes charged to `queued_max_request_bytes` (as they arrive), and reads paused because it was used up |
//! | `mirrorgate_client_fetch_streamed_total{outcome}` | Fetch responses forwarded to clients while they arrived (`proxy::fetch_stream`): `whole`, or `closed` when an edit found late closed the connection |
//! | `mirrorgate_client_fetch_spliced_bytes_total` | bytes of those responses moved from the destination broker's socket to the client's by `splice(2)`, never copied through mirrorgate (`proxy::splice`; plain TCP on both sides, Linux) |
//! | `mirrorgate_mirror_fetch_requests_total{mirror,kind}` | source Fetch requests, `kind` = `full` / `incremental` (KIP-227 sessions) |
//! | `mirrorgate_mirror_fetch_throttled_total{mirror}`, `mirrorgate_mirror_fetch_throttle_ms_total{mirror}` | source Fetches throttled by a quota, and the time waited (ms) |
//! | `mirrorgate_mirror_fetch_partitions_listed_total{mirror}` | partitions listed in those requests (an idle partition in a session is not) |

use std::net::SocketAddr;
use std::time::Duration;

/// A histogram's name and its bucket bounds (seconds), given to [`install`] by the layer that
/// owns the series.
pub type HistogramBuckets = (&'static str, &'static [f64]);

/// Installs the Prometheus recorder and serves it on `addr` with `/health` and `/ready`
/// ([`super::http`]); keeps the recorder's histograms up to date every 5 s. `histograms` are
/// the series recorded as histograms with explicit buckets (the others are summaries).
///
/// # Errors
/// The listener cannot be bound, a bucket list is empty, or a recorder is already installed.
pub fn install(addr: SocketAddr, histograms: &[HistogramBuckets]) -> anyhow::Result<()> {
    let listener = super::http::bind(addr).map_err(|e| anyhow::anyhow!("cannot serve metrics on {addr}: {e}"))?;
    let mut builder = metrics_exporter_prometheus::PrometheusBuilder::new();
    for (name, buckets) in histograms {
        builder = builder
            .set_buckets_for_metric(metrics_exporter_prometheus::Matcher::Full((*name).to_string()), buckets)
            .map_err(|e| anyhow::anyhow!("cannot configure the histogram {name}: {e}"))?;
    }
    let handle = builder.install_recorder().map_err(|e| anyhow::anyhow!("cannot install the metrics recorder: {e}"))?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    tokio::spawn(super::http::serve(listener, handle));
    tracing::info!(%addr, "metrics served at http://{addr}/metrics (health: /health, readiness: /ready)");
    Ok(())
}

/// A client's re-authentication (KIP-368) through mirrorgate ended, as the destination
/// broker answered (`ok` or not): `mirrorgate_client_reauthentications_total{result}`.
pub fn client_reauthentication(ok: bool) {
    let result = if ok { "success" } else { "failure" };
    metrics::counter!("mirrorgate_client_reauthentications_total", "result" => result).increment(1);
}

/// A client's SASL exchange through mirrorgate ended, as the destination broker answered
/// (`ok` or not): `mirrorgate_client_authentications_total{result}`.
pub fn client_authentication(ok: bool) {
    let result = if ok { "success" } else { "failure" };
    metrics::counter!("mirrorgate_client_authentications_total", "result" => result).increment(1);
}
