//! The data plane: one copy loop per mirror partition that should be copying, started and
//! stopped by a reconciler that follows the control plane's desired states (KIP-1279 §4.3):
//! LOG_ALIGNMENT/MIRRORING run a loop; PAUSING and STOPPING stop it (finishing the append in
//! flight) and then complete the transition; FAILED partitions are retried with backoff
//! (`mirror.failed.retry.*`) unless the failure is not retryable.

mod coord;
pub mod dest_topic;
pub mod errors;
mod fill;
pub mod live;
pub mod log_end;
mod markers;
pub mod mux;
pub mod partition;
mod pipeline;
pub mod produce;
pub mod session;
pub mod source;
pub mod throttle;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::client::cluster::ClusterClient;
use crate::wire::mirror::MirrorPartitionState as S;

use super::configs;
use super::control::ControlPlane;
use super::model::{now_ms, DesiredState, MirrorDefinition};
use partition::{Outcome, PartitionTask};
use source::FetchSettings;

/// What the data plane last saw of a partition, for `--describe` and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Source log start offset.
    pub source_log_start: i64,
    /// Source high watermark.
    pub source_high_watermark: i64,
    /// Source last stable offset (what read_committed can copy).
    pub source_lso: i64,
    /// Destination log end offset.
    pub destination_end: i64,
    /// Source offset − destination offset in the current segment.
    pub shift: i64,
    /// Next source offset to copy.
    pub next_source: i64,
    /// When these figures were seen, ms since the epoch.
    pub read_ms: i64,
}

/// Default of `mirror.coalesce.max.bytes`, bytes.
const COALESCE_MAX_BYTES: i64 = 262_144;

/// Default of `mirror.fill.max.gap`, offsets.
const FILL_MAX_GAP: i64 = 100_000_000;

struct Running {
    stop: CancellationToken,
    handle: JoinHandle<Outcome>,
}

/// The data plane service.
pub struct DataPlane {
    control: Arc<ControlPlane>,
    dest: ClusterClient,
    sources: HashMap<String, ClusterClient>,
    fetchers: HashMap<String, Arc<mux::FetchMux>>,
    writer: Arc<produce::ProduceMux>,
    running: HashMap<(String, i32), Running>,
    /// Mirrors whose source was refused (another cluster id) in this reconcile pass.
    refused: std::collections::HashSet<String>,
    /// Per mirror, the configs its source client, fetcher and copy loops were built with.
    built_with: HashMap<String, String>,
    /// Topics whose destination retention this process disabled again for a failback.
    retention_disabled: std::collections::HashSet<String>,
    nonce: u64,
    request_timeout: Duration,
    /// The number of copy loops running, published after every reconcile pass (the group
    /// membership's revocation barrier waits for 0 before rejoining).
    busy: Arc<std::sync::atomic::AtomicUsize>,
}

/// What the data plane builds a mirror's source client, fetcher and copy loops from (source
/// client options, fetch settings, fill bound), as text: when it changes (an operator's
/// IncrementalAlterConfigs on the mirror), the mirror's loops restart.
fn data_plane_settings(def: &MirrorDefinition) -> String {
    format!(
        "{:?} {:?} {} {} {} {}",
        configs::source_options(&def.name, &def.configs),
        fetch_settings(def),
        long(def, "mirror.fill.max.gap", FILL_MAX_GAP),
        real_markers(def),
        coalesce_max_bytes(def),
        coalesce_recompress(def)
    )
}

impl DataPlane {
    /// A data plane appending to `dest`.
    pub fn new(control: Arc<ControlPlane>, dest: ClusterClient, request_timeout: Duration) -> Self {
        let nonce = rand::random::<u64>();
        // Appends of a partition this instance no longer owns are never written (fencing).
        let owner = control.clone();
        let writer = produce::ProduceMux::with_guard(
            dest.clone(),
            request_timeout.as_millis().min(i32::MAX as u128) as i32,
            Arc::new(move |topic: &str, partition: i32| owner.owns_partition(topic, partition)),
            {
                let control = control.clone();
                Arc::new(move || control.lease_token())
            },
        );
        Self {
            control,
            dest,
            sources: HashMap::new(),
            fetchers: HashMap::new(),
            writer,
            running: HashMap::new(),
            built_with: HashMap::new(),
            retention_disabled: std::collections::HashSet::new(),
            refused: std::collections::HashSet::new(),
            nonce,
            request_timeout,
            busy: Default::default(),
        }
    }

    /// Publishes the number of running copy loops to `busy` from now on.
    pub fn report_busy(mut self, busy: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        self.busy = busy;
        self
    }

    /// Reconciles every 200 ms until `shutdown`, then stops every loop (finishing in-flight
    /// appends) before returning.
    pub async fn run(mut self, shutdown: CancellationToken) {
        self.control.attach_data_plane();
        let live = tokio::spawn(live::run(self.control.clone(), self.dest.options().clone(), shutdown.clone()));
        loop {
            self.reconcile().await;
            self.busy.store(self.running.len(), std::sync::atomic::Ordering::SeqCst);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
        let loops: Vec<Running> = self.running.drain().map(|(_, r)| r).collect();
        for r in &loops {
            r.stop.cancel();
        }
        for r in loops {
            let _ = r.handle.await;
        }
        let _ = live.await;
    }

    async fn source_client(&mut self, def: &MirrorDefinition) -> Option<ClusterClient> {
        if let Some(c) = self.sources.get(&def.name) {
            return Some(c.clone());
        }
        if self.refused.contains(&def.name) {
            return None;
        }
        let opts = configs::source_options(&def.name, &def.configs)?;
        match ClusterClient::connect(opts).await {
            Ok(c) => {
                // Never copy from another cluster than the one the mirror started on (KIP-1279
                // §4.3): its partitions go FAILED, non-retryable, naming both ids.
                let actual = c.metadata().cluster_id;
                if let (Some(expected), Some(actual)) = (&def.source_cluster_id, &actual) {
                    if expected != actual {
                        let reason = format!("source cluster id changed from {expected} to {actual}");
                        tracing::error!(mirror = %def.name, %reason, "refusing to copy from another source cluster");
                        let topics: Vec<String> = self
                            .control
                            .snapshot()
                            .topics
                            .values()
                            .filter(|t| t.mirror == def.name && t.desired == DesiredState::Mirroring)
                            .map(|t| t.topic.clone())
                            .collect();
                        for t in topics {
                            let _ = self.control.fail_topic(&t, &reason, false).await;
                        }
                        self.refused.insert(def.name.clone());
                        return None;
                    }
                }
                self.sources.insert(def.name.clone(), c.clone());
                Some(c)
            }
            Err(e) => {
                tracing::warn!(mirror = %def.name, error = %e, "source cluster unreachable");
                None
            }
        }
    }

    async fn reconcile(&mut self) {
        self.refused.clear();
        // Collect finished loops first.
        let done: Vec<(String, i32)> =
            self.running.iter().filter(|(_, r)| r.handle.is_finished()).map(|(k, _)| k.clone()).collect();
        for key in done {
            let r = self.running.remove(&key).expect("present");
            self.record_outcome(&key, r.handle.await).await;
        }
        let state = self.control.snapshot();
        if self.follow_config_changes(&state).await {
            // Loops were stopped (and may have failed meanwhile): start them from a fresh
            // snapshot on the next pass.
            return;
        }
        for ((topic, p), rec) in &state.partitions {
            let key = (topic.clone(), *p);
            let Some(t) = state.topics.get(topic) else { continue };
            let Some(def) = state.mirrors.get(&t.mirror) else { continue };
            // With several instances, only the partition's owner copies it and steps its
            // state (group membership, docs/operations.md).
            let owned = self.control.owns_partition(topic, *p);
            // A partition paused before its log alignment ended finishes it first: PAUSING
            // is only entered from MIRRORING (KIP-1279 §4.2).
            let wants_loop = owned
                && matches!(
                    (t.desired, rec.state),
                    (DesiredState::Mirroring, S::LogAlignment | S::Mirroring) | (DesiredState::Paused, S::LogAlignment)
                );
            match (wants_loop, self.running.contains_key(&key)) {
                (true, false) => {
                    if rec.state == S::LogAlignment
                        && rec.previous_state == Some(S::Stopped)
                        && !self.retention_disabled.contains(topic)
                    {
                        // Failback: retention was handed back at STOPPED; off again while
                        // mirroring, before anything is copied (old history would otherwise
                        // be deleted by the destination's retention as it lands).
                        if !self.disable_retention(topic).await {
                            continue;
                        }
                        self.retention_disabled.insert(topic.clone());
                    }
                    let Some(source) = self.source_client(def).await else { continue };
                    let fetcher = self
                        .fetchers
                        .entry(def.name.clone())
                        .or_insert_with(|| mux::FetchMux::new(source.clone(), fetch_settings(def), &def.name))
                        .clone();
                    let task = PartitionTask {
                        control: self.control.clone(),
                        source,
                        dest: self.dest.clone(),
                        fetcher,
                        writer: self.writer.clone(),
                        mirror: def.name.clone(),
                        topic: topic.clone(),
                        partition: *p,
                        fetch: fetch_settings(def),
                        fill_max_gap: long(def, "mirror.fill.max.gap", FILL_MAX_GAP),
                        real_markers: real_markers(def),
                        markers_refused: Default::default(),
                        coalesce_max_bytes: coalesce_max_bytes(def),
                        coalesce_refused: Default::default(),
                        coalesce_recompress: coalesce_recompress(def),
                        nonce: self.nonce,
                        request_timeout: self.request_timeout,
                    };
                    let stop = CancellationToken::new();
                    let handle = tokio::spawn(task.run(stop.clone()));
                    self.running.insert(key, Running { stop, handle });
                }
                (false, true) => {
                    let r = self.running.remove(&key).expect("present");
                    r.stop.cancel();
                    let _ = r.handle.await;
                }
                _ => {}
            }
            // Transient states complete once no loop runs.
            if owned && !self.running.contains_key(&(topic.clone(), *p)) {
                let next = match rec.state {
                    S::Pausing => Some(S::Paused),
                    S::Stopping => Some(S::Stopped),
                    // Steps an admin request could not take while the loop ran (a pause
                    // that came during log alignment, a request through another instance).
                    S::Mirroring if t.desired == DesiredState::Paused => Some(S::Pausing),
                    S::LogAlignment | S::Mirroring if t.desired == DesiredState::Stopped => Some(S::Stopping),
                    S::Failed if t.desired == DesiredState::Mirroring && rec.retryable => {
                        let max = long(def, "mirror.failed.retry.max.attempts", 20);
                        let initial = long(def, "mirror.failed.retry.initial.backoff.ms", 100);
                        let cap = long(def, "mirror.failed.retry.max.backoff.ms", 300_000);
                        let backoff = initial.saturating_mul(1i64 << rec.retry_attempt.clamp(0, 30)).min(cap);
                        let due = rec.updated_ms + rand::random_range(0..=backoff.max(1));
                        (i64::from(rec.retry_attempt) < max && now_ms() >= due).then_some(S::LogAlignment)
                    }
                    _ => None,
                };
                if next == Some(S::Stopped) {
                    // The failback check compares with this: read it from the destination log
                    // (settled: nothing of ours above the high watermark), through the offset
                    // map as the loop that just ended left it (not the pass's snapshot).
                    let stop = CancellationToken::new();
                    let settled = log_end::settled_log_end(&self.dest, topic, *p, &stop, self.request_timeout).await;
                    let segments = self.control.partition(topic, *p).map(|r| r.segments).unwrap_or_default();
                    let shift = segments.last().map_or(0, |s| s.shift());
                    match settled.clone().map_err(|e| e.to_string()) {
                        Ok(end) if end > 0 => self.control.set_stopped_at(topic, *p, end + shift - 1),
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(topic = %topic, partition = p, error = %e, "cannot read the destination log end at STOPPED; recording the last copied offset")
                        }
                    }
                    self.end_open_transactions(&def.name, topic, *p, settled.ok(), shift).await;
                }
                if let Some(next) = next {
                    let moved = self.control.transition_owned(topic, *p, next, None).await.unwrap_or(false);
                    if moved && next == S::Stopped {
                        self.apply_source_retention(def, topic).await;
                        // A later failback disables retention again.
                        self.retention_disabled.remove(topic);
                    }
                }
            }
        }
    }
}

impl DataPlane {
    /// At STOPPED: aborts mirrorgate's transactions still open on the destination partition
    /// (`coord::end_open_transactions`, no source needed) and hides their ABORT markers after
    /// `settled` (the destination log end read before, `shift` its segment's) from a failback.
    /// A failure is logged: the partition still stops, its last stable offset then held by
    /// the open transaction until the coordinator's timeout.
    async fn end_open_transactions(&self, mirror: &str, topic: &str, p: i32, settled: Option<i64>, shift: i64) {
        let ended = match coord::end_open_transactions(&self.control, &self.dest, mirror, topic, p).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(mirror, topic, partition = p, error = %e, "stop: cannot end mirrorgate's open destination transactions; the topic's last stable offset stays at the first of them until the destination's transaction timeout");
                return;
            }
        };
        let Some(before) = settled.filter(|_| ended > 0) else { return };
        let stop = CancellationToken::new();
        match log_end::settled_log_end(&self.dest, topic, p, &stop, self.request_timeout).await {
            Ok(after) if after > before => {
                if let Err(e) = coord::hide_stop_markers(&self.control, topic, p, before, after, before + shift).await {
                    tracing::warn!(mirror, topic, partition = p, error = %e, "stop: cannot record the ABORT markers of mirrorgate's transactions as hidden offsets");
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(mirror, topic, partition = p, error = %e, "stop: cannot read the destination log end after ending mirrorgate's transactions")
            }
        }
    }

    /// Drops the clients of deleted mirrors, and of mirrors whose data-plane configs changed
    /// (a new `bootstrap.servers`, new `fetch.*` settings, ...): their copy loops stop here
    /// (finishing the append in flight) and start again with the new settings, from the
    /// destination log end like after any restart.
    /// Puts a partition whose loop ended with a failure in FAILED.
    async fn record_outcome(&self, key: &(String, i32), joined: Result<Outcome, tokio::task::JoinError>) {
        let outcome = joined.unwrap_or_else(|e| {
            if e.is_panic() {
                // KIP-1279 DeadThreadCount: counted per mirror; the partition goes FAILED
                // (retryable) and a new loop takes over after the backoff.
                let mirror = self.control.partition(&key.0, key.1).map(|r| r.mirror).unwrap_or_default();
                crate::mirror::metrics::dead_task(&mirror, "copy_loop");
            }
            Outcome::Failed { message: format!("mirror loop panicked: {e}"), retryable: true }
        });
        if let Outcome::Failed { message, retryable } = outcome {
            if !self.control.owns_partition(&key.0, key.1) {
                // Its work moved to another instance (or the lease ran out): not a failure.
                tracing::info!(topic = %key.0, partition = key.1, %message, "mirror partition loop ended: no longer owned here");
                return;
            }
            tracing::error!(topic = %key.0, partition = key.1, %message, retryable, "mirror partition FAILED");
            let _ = self.control.transition_owned(&key.0, key.1, S::Failed, Some((message, retryable))).await;
        }
    }

    /// Returns whether any copy loop was stopped.
    async fn follow_config_changes(&mut self, state: &super::control::ControlState) -> bool {
        let mut stopped = false;
        self.built_with.retain(|m, _| state.mirrors.contains_key(m));
        self.sources.retain(|m, _| state.mirrors.contains_key(m));
        self.fetchers.retain(|m, _| state.mirrors.contains_key(m));
        for (name, def) in &state.mirrors {
            let now = data_plane_settings(def);
            let changed = match self.built_with.get(name) {
                Some(before) => *before != now,
                None => false,
            };
            self.built_with.insert(name.clone(), now);
            if !changed {
                continue;
            }
            self.sources.remove(name);
            self.fetchers.remove(name);
            let keys: Vec<(String, i32)> = self
                .running
                .keys()
                .filter(|(topic, _)| state.topics.get(topic).is_some_and(|t| &t.mirror == name))
                .cloned()
                .collect();
            tracing::info!(mirror = %name, partitions = keys.len(), "mirror configs changed: its copy loops restart with the new settings");
            // Stop them all first, then wait for each (each finishes its append in flight);
            // a loop that failed meanwhile goes FAILED rather than being restarted.
            let loops: Vec<_> = keys.into_iter().filter_map(|k| self.running.remove(&k).map(|r| (k, r))).collect();
            for (_, r) in &loops {
                r.stop.cancel();
            }
            for (key, r) in loops {
                self.record_outcome(&key, r.handle.await).await;
                stopped = true;
            }
        }
        stopped
    }

    /// Failback: the destination topic's retention goes off again (`retention.ms` and
    /// `retention.bytes` -1, with the timestamp limits), as at the first start (DESIGN §4.9);
    /// the mirror follows the source's log start with DeleteRecords instead.
    /// Returns whether it worked (the copy loops wait for it, retried every pass).
    async fn disable_retention(&self, topic: &str) -> bool {
        match dest_topic::set_mirroring_configs(&self.dest, topic).await {
            Ok(()) => {
                tracing::info!(topic, "failback: destination retention disabled again while mirroring");
                true
            }
            Err(e) => {
                tracing::warn!(topic, error = %e, "cannot disable destination retention for the failback; the copy waits for it");
                false
            }
        }
    }

    /// At STOPPED the destination topic takes the source's retention settings back
    /// (retention was disabled while mirroring, DESIGN §4.9): `retention.ms` and
    /// `retention.bytes` set on the source topic are set, those not set are removed so the
    /// destination broker's defaults apply.
    async fn apply_source_retention(&mut self, def: &MirrorDefinition, topic: &str) {
        use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
        use kafka_protocol::messages::IncrementalAlterConfigsRequest;
        use kafka_protocol::protocol::StrBytes;
        let addrs: Vec<String> =
            configs::split_list(configs::effective(&def.configs, "bootstrap.servers").unwrap_or(""))
                .map(String::from)
                .collect();
        // This mirror's own TLS/SASL settings (never another mirror's of the same source).
        let security =
            configs::source_security(&def.name, &def.configs).unwrap_or_else(crate::client::ClientSecurity::broken);
        let access = super::topics::ClusterAccess {
            bootstrap: super::topics::Bootstrap::secured(addrs, security),
            connect_timeout: Duration::from_secs(10),
            request_timeout: self.request_timeout,
        };
        let source = match access.topic_configs(topic).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(topic, error = %e, "cannot read the source's retention settings; the destination keeps retention disabled");
                return;
            }
        };
        let ops = ["retention.ms", "retention.bytes"]
            .iter()
            .map(|k| {
                let (op, value) = match source.get(*k) {
                    Some(v) => (0, Some(StrBytes::from_string(v.clone()))),
                    None => (1, None),
                };
                AlterableConfig::default()
                    .with_name(StrBytes::from_static_str(k))
                    .with_config_operation(op)
                    .with_value(value)
            })
            .collect();
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configs(ops)]);
        match self.dest.send_any(&req, 1).await {
            Ok(r) if r.responses.iter().all(|x| x.error_code == 0) => {
                tracing::info!(topic, "destination topic takes the source's retention settings (mirroring stopped)")
            }
            Ok(r) => {
                tracing::warn!(topic, error = ?r.responses.first().map(|x| (x.error_code, x.error_message.clone())), "cannot apply retention")
            }
            Err(e) => tracing::warn!(topic, error = %e, "cannot apply retention"),
        }
    }
}

/// `mirror.coalesce.max.bytes`, bytes (0 = off).
fn coalesce_max_bytes(def: &MirrorDefinition) -> usize {
    long(def, "mirror.coalesce.max.bytes", COALESCE_MAX_BYTES).clamp(0, i64::from(i32::MAX)) as usize
}

/// `mirror.coalesce.recompress` = `true` (case-insensitive, as Kafka reads booleans; `false`
/// by default).
fn coalesce_recompress(def: &MirrorDefinition) -> bool {
    configs::effective(&def.configs, "mirror.coalesce.recompress")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// `mirror.transaction.markers` = `real` (the default).
fn real_markers(def: &MirrorDefinition) -> bool {
    configs::effective(&def.configs, "mirror.transaction.markers").is_none_or(|v| v != "placeholder")
}

fn long(def: &MirrorDefinition, key: &str, default: i64) -> i64 {
    configs::effective(&def.configs, key).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn fetch_settings(def: &MirrorDefinition) -> FetchSettings {
    FetchSettings {
        max_wait: Duration::from_millis(long(def, "fetch.wait.max.ms", 1000).max(0) as u64),
        // (At least 50 ms: a persistent error never makes a copy loop spin.)
        backoff: Duration::from_millis(long(def, "fetch.backoff.ms", 1000).max(50) as u64),
        min_bytes: long(def, "fetch.min.bytes", 1) as i32,
        response_max_bytes: long(def, "fetch.response.max.bytes", 10 << 20) as i32,
        partition_max_bytes: long(def, "fetch.max.bytes", 1 << 20) as i32,
        inflight_max_bytes: long(def, "mirror.inflight.max.bytes", 64 << 20).clamp(1, i64::from(i32::MAX)) as i32,
        throttled_rate: configs::effective(&def.configs, "mirror.replication.throttled.rate")
            .and_then(|v| v.parse::<i64>().ok())
            .map(|v| v.max(1) as u64),
        fetchers: long(def, "mirror.num.replica.fetchers", 1).clamp(1, 64) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(configs: &[(&str, &str)]) -> MirrorDefinition {
        MirrorDefinition {
            name: "m".into(),
            configs: configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            created_ms: 0,
            source_cluster_id: None,
            include_patterns: Vec::new(),
            start_position: Default::default(),
            exclude_patterns: Vec::new(),
        }
    }

    #[test]
    fn recompress_is_off_by_default_and_a_change_restarts_the_copy_loops() {
        let off = def(&[("bootstrap.servers", "a:1")]);
        assert!(!coalesce_recompress(&off));
        assert!(!coalesce_recompress(&def(&[("mirror.coalesce.recompress", "false")])));
        let on = def(&[("bootstrap.servers", "a:1"), ("mirror.coalesce.recompress", " TRUE ")]);
        assert!(coalesce_recompress(&on));
        // The copy loops are rebuilt when the settings text changes (live IncrementalAlterConfigs).
        assert_ne!(data_plane_settings(&off), data_plane_settings(&on));
    }
}
