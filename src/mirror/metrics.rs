//! The mirror's Prometheus series (the KIP-1279 metric set; the table of names is in
//! `telemetry::metrics` and docs/operations.md): counters the copy loops and fetchers update
//! as they work, and [`collect`], which refreshes the per-partition and per-mirror gauges from
//! the control plane every second.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::mirror::control::ControlPlane;
use crate::wire::mirror::MirrorPartitionState;

/// Counts bytes and records appended by a mirror.
pub fn record_append(mirror: &str, bytes: usize, records: i64) {
    metrics::counter!("mirrorgate_mirror_bytes_total", "mirror" => mirror.to_string()).increment(bytes as u64);
    metrics::counter!("mirrorgate_mirror_records_total", "mirror" => mirror.to_string())
        .increment(records.max(0) as u64);
}

/// Counts an append of `source_batches` consecutive small source batches merged into one
/// destination batch (`mirror.coalesce.max.bytes`; recompressed ones included, also counted by
/// [`record_recompressed`]).
pub fn record_coalesced(mirror: &str, source_batches: usize) {
    metrics::counter!("mirrorgate_mirror_coalesced_appends_total", "mirror" => mirror.to_string()).increment(1);
    metrics::counter!("mirrorgate_mirror_coalesced_source_batches_total", "mirror" => mirror.to_string())
        .increment(source_batches as u64);
}

/// Counts an append of `source_batches` consecutive small compressed source batches merged
/// into one destination batch compressed again with their codec (`mirror.coalesce.recompress`).
pub fn record_recompressed(mirror: &str, source_batches: usize) {
    metrics::counter!("mirrorgate_mirror_recompressed_appends_total", "mirror" => mirror.to_string()).increment(1);
    metrics::counter!("mirrorgate_mirror_recompressed_source_batches_total", "mirror" => mirror.to_string())
        .increment(source_batches as u64);
}

/// Counts destination offsets hidden behind a new offset segment on `topic`-`partition`:
/// transaction markers of mirrorgate's that the destination's coordinator wrote where the
/// source has none (`mirror::dataplane::markers::hide_extra_markers`).
pub fn hidden_markers(mirror: &str, topic: &str, partition: i32, offsets: i64) {
    metrics::counter!(
        "mirrorgate_mirror_hidden_marker_offsets_total",
        "mirror" => mirror.to_string(),
        "topic" => topic.to_string(),
        "partition" => partition.to_string()
    )
    .increment(offsets.max(0) as u64);
}

/// Sets a mirror's measured source fetch rate, bytes/s (the KIP's MirrorReplication
/// `byte-rate`).
pub fn mirror_byte_rate(mirror: &str, bytes_per_second: f64) {
    metrics::gauge!("mirrorgate_mirror_byte_rate", "mirror" => mirror.to_string()).set(bytes_per_second);
}

/// Counts time a mirror's fetcher waited for `mirror.replication.throttled.rate`, ms.
pub fn mirror_rate_throttled(mirror: &str, waited: std::time::Duration) {
    metrics::counter!("mirrorgate_mirror_rate_throttle_ms_total", "mirror" => mirror.to_string())
        .increment(waited.as_millis() as u64);
}

/// Counts a Fetch request sent to a source broker (`kind` full or incremental, KIP-227) and
/// the partitions it listed.
pub fn record_fetch(mirror: &str, full: bool, partitions_listed: usize) {
    let kind = if full { "full" } else { "incremental" };
    metrics::counter!("mirrorgate_mirror_fetch_requests_total", "mirror" => mirror.to_string(), "kind" => kind)
        .increment(1);
    metrics::counter!("mirrorgate_mirror_fetch_partitions_listed_total", "mirror" => mirror.to_string())
        .increment(partitions_listed as u64);
}

/// Counts a source Fetch throttled by a quota on the mirror's `client.id` (KIP-219), and the
/// time waited, ms.
pub fn record_fetch_throttled(mirror: &str, wait_ms: u64) {
    metrics::counter!("mirrorgate_mirror_fetch_throttled_total", "mirror" => mirror.to_string()).increment(1);
    metrics::counter!("mirrorgate_mirror_fetch_throttle_ms_total", "mirror" => mirror.to_string()).increment(wait_ms);
}

/// `mirrorgate_mirror_source_fetch_duration_seconds{mirror,broker}` (histogram, seconds): one
/// Fetch round trip to a source broker (KIP-1279 FetcherStats / fetcher `request-latency`).
pub const SOURCE_FETCH_DURATION: &str = "mirrorgate_mirror_source_fetch_duration_seconds";

/// One fetcher's handles on its source broker's series, made once when the fetcher starts
/// (KIP-1279 FetcherStats `RequestsPerSec` / `BytesPerSec` per source broker, by `rate()`):
/// `mirrorgate_mirror_source_fetch_requests_total{mirror,broker}` (Fetch requests sent),
/// `mirrorgate_mirror_source_fetch_bytes_total{mirror,broker}` (record bytes in the answers),
/// `mirrorgate_mirror_source_fetch_errors_total{mirror,broker}` (Fetches that failed: no
/// answer, or a top-level error code) and [`SOURCE_FETCH_DURATION`]. `broker` is the source
/// broker's node id.
#[derive(Debug, Clone)]
pub struct SourceFetchMetrics {
    /// Fetch requests sent to the broker.
    pub requests: metrics::Counter,
    /// Record bytes the broker answered, bytes.
    pub bytes: metrics::Counter,
    /// Fetches without a usable answer.
    pub errors: metrics::Counter,
    /// Round-trip time of each Fetch, seconds.
    pub duration: metrics::Histogram,
}

impl SourceFetchMetrics {
    /// The series of `mirror`'s fetcher for source broker `node_id`.
    pub fn new(mirror: &str, node_id: i32) -> Self {
        let labels = [("mirror", mirror.to_string()), ("broker", node_id.to_string())];
        Self {
            requests: metrics::counter!("mirrorgate_mirror_source_fetch_requests_total", &labels),
            bytes: metrics::counter!("mirrorgate_mirror_source_fetch_bytes_total", &labels),
            errors: metrics::counter!("mirrorgate_mirror_source_fetch_errors_total", &labels),
            duration: metrics::histogram!(SOURCE_FETCH_DURATION, &labels),
        }
    }
}

/// `mirrorgate_mirror_dead_tasks_total{mirror,task}`: copy loops (`task="copy_loop"`) and
/// source fetchers (`task="fetcher"`) of `mirror` that ended by a panic (KIP-1279
/// MirrorFetcherManager DeadThreadCount). mirrorgate replaces them (a copy loop's partition
/// goes FAILED, retryable; a fetcher is started again by the next fetch), so the figure is a
/// count of deaths, not of tasks dead now: alert on `increase(...) > 0`. [`register_mirror`]
/// makes both series at 0.
pub fn dead_task(mirror: &str, task: &'static str) {
    metrics::counter!("mirrorgate_mirror_dead_tasks_total", "mirror" => mirror.to_string(), "task" => task)
        .increment(1);
}

/// Makes the series of a mirror that count rare events at 0 (so a dashboard and an alert
/// see 0, not "no data", before the first event): [`dead_task`].
pub fn register_mirror(mirror: &str) {
    for task in ["copy_loop", "fetcher"] {
        metrics::counter!("mirrorgate_mirror_dead_tasks_total", "mirror" => mirror.to_string(), "task" => task)
            .increment(0);
    }
}

/// The per-partition gauges of one mirror partition, registered once (their labels are
/// three `String`s each: made per second for 1,000 partitions they cost more than the
/// figures). Kept while the partition has a state record.
struct PartitionGauges {
    mirror: String,
    state: metrics::Gauge,
    source_offset: metrics::Gauge,
    destination_offset: metrics::Gauge,
    lag: metrics::Gauge,
    lag_high_watermark: metrics::Gauge,
}

impl PartitionGauges {
    fn new(mirror: &str, topic: &str, partition: i32) -> Self {
        let labels =
            [("mirror", mirror.to_string()), ("topic", topic.to_string()), ("partition", partition.to_string())];
        Self {
            mirror: mirror.to_string(),
            state: metrics::gauge!("mirrorgate_mirror_partition_state", &labels),
            source_offset: metrics::gauge!("mirrorgate_mirror_partition_source_offset", &labels),
            destination_offset: metrics::gauge!("mirrorgate_mirror_partition_destination_offset", &labels),
            lag: metrics::gauge!("mirrorgate_mirror_partition_lag", &labels),
            lag_high_watermark: metrics::gauge!("mirrorgate_mirror_partition_lag_high_watermark", &labels),
        }
    }
}

/// Refreshes the gauges from the control plane every second until `shutdown`.
pub async fn collect(control: Arc<ControlPlane>, shutdown: CancellationToken) {
    let mut gauges: std::collections::HashMap<(String, i32), PartitionGauges> = std::collections::HashMap::new();
    loop {
        let state = control.snapshot();
        let mut per_state: BTreeMap<String, BTreeMap<&'static str, f64>> = BTreeMap::new();
        let mut max_lag: BTreeMap<String, i64> = BTreeMap::new();
        for m in state.mirrors.keys() {
            register_mirror(m);
            per_state.insert(m.clone(), ALL_STATES.iter().map(|s| (s.as_str(), 0.0)).collect());
            max_lag.insert(m.clone(), 0);
        }
        gauges.retain(|k, g| state.partitions.get(k).is_some_and(|r| r.mirror == g.mirror));
        for (key, rec) in &state.partitions {
            let (topic, p) = (&key.0, key.1);
            if let Some(counts) = per_state.get_mut(&rec.mirror) {
                *counts.entry(rec.state.as_str()).or_default() += 1.0;
            } else {
                per_state.insert(rec.mirror.clone(), BTreeMap::from([(rec.state.as_str(), 1.0)]));
            }
            if !gauges.contains_key(key) {
                gauges.insert(key.clone(), PartitionGauges::new(&rec.mirror, topic, p));
            }
            let g = &gauges[key];
            g.state.set(f64::from(rec.state as i8));
            if let Some(f) = crate::mirror::dataplane::live::figures(&control, topic, p) {
                let f = f.progress;
                if f.source_lso < 0 || f.destination_end < 0 {
                    continue;
                }
                g.source_offset.set(f.source_lso as f64);
                g.destination_offset.set((f.destination_end + f.shift) as f64);
                let lag = (f.source_lso - (f.destination_end + f.shift)).max(0);
                g.lag.set(lag as f64);
                let lag_hw = (f.source_high_watermark - (f.destination_end + f.shift)).max(0);
                g.lag_high_watermark.set(lag_hw as f64);
                if let Some(e) = max_lag.get_mut(&rec.mirror) {
                    *e = (*e).max(lag);
                } else {
                    max_lag.insert(rec.mirror.clone(), lag);
                }
            }
        }
        for (m, counts) in &per_state {
            for (s, n) in counts {
                metrics::gauge!("mirrorgate_mirror_partitions", "mirror" => m.clone(), "state" => *s).set(*n);
                if *s == "FAILED" {
                    metrics::gauge!("mirrorgate_mirror_failed_partitions", "mirror" => m.clone()).set(*n);
                }
            }
        }
        for (m, lag) in max_lag {
            metrics::gauge!("mirrorgate_mirror_max_lag", "mirror" => m).set(lag as f64);
        }
        metrics::gauge!("mirrorgate_mirror_lost_offsets_total").set(control.lost_offsets() as f64);
        let sync = crate::mirror::sync::metrics();
        for (kind, v) in [
            ("metadata_refresh", &sync.metadata_refresh_errors),
            ("topic_config", &sync.topic_config_errors),
            ("consumer_group_offset", &sync.group_offset_errors),
            ("acl", &sync.acl_errors),
        ] {
            metrics::gauge!("mirrorgate_metadata_sync_errors_total", "kind" => kind)
                .set(v.load(Ordering::Relaxed) as f64);
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

const ALL_STATES: [MirrorPartitionState; 9] = [
    MirrorPartitionState::LogAlignment,
    MirrorPartitionState::EpochFencing,
    MirrorPartitionState::UleRecovery,
    MirrorPartitionState::Mirroring,
    MirrorPartitionState::Pausing,
    MirrorPartitionState::Paused,
    MirrorPartitionState::Stopping,
    MirrorPartitionState::Stopped,
    MirrorPartitionState::Failed,
];
