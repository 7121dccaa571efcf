//! The metadata sync (KIP-1279 §6, DESIGN §5): a background service that, per mirror and every
//! `mirror.metadata.refresh.interval.ms`, makes what surrounds the mirrored data follow the
//! source — source topic ids and the source cluster id (a change fails the partitions),
//! auto-discovery of topics (`topics.include` / `topics.exclude` plus the patterns saved by
//! `--start`), partition increases, topic configs, consumer group offsets and ACLs
//! (`acls.include`).
//!
//! Each sync kind counts its failures ([`SyncMetrics`]) and logs the cause; one failing kind
//! never stops the others nor the data plane. It never writes to a destination topic's data,
//! never moves a destination group offset backwards because of clamping, never touches a
//! PAUSED or STOPPED topic, and never copies the configs mirrorgate owns for offset identity.

pub(crate) mod acls;
mod groups;
mod topics;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::protocol::Request;
use opentelemetry::trace::SpanKind;
use regex::Regex;
use tokio_util::sync::CancellationToken;

use crate::client::cluster::{ClusterClient, ClusterError, ClusterOptions};
use crate::telemetry::traces::{Attr, ParentTimed, Timed};

use super::configs;
use super::control::{ControlPlane, ControlState};
use super::model::{DesiredState, MirrorDefinition};

pub use crate::mirror::topic_configs::{config_decision, ConfigDecision};
pub use acls::AclRule;
pub use groups::{map_offset, plan_offset};

/// Error and event counters of the metadata sync, named after the prototype's meters
/// (KIP-1279 §11). Process-wide; read with [`metrics`].
#[derive(Debug, Default)]
pub struct SyncMetrics {
    /// Source metadata, topic id, discovery or partition sync failures
    /// (`MetadataRefreshError`).
    pub metadata_refresh_errors: AtomicU64,
    /// Topic config sync failures (`TopicConfigMetadataSyncError`).
    pub topic_config_errors: AtomicU64,
    /// Source config values refused because they would break offset identity.
    pub topic_config_refused: AtomicU64,
    /// Consumer group offset sync failures (`ConsumerGroupOffsetSyncError`).
    pub group_offset_errors: AtomicU64,
    /// Groups skipped because they have active members on the destination.
    pub group_offset_skipped_active: AtomicU64,
    /// ACL sync failures (`AclSyncError`).
    pub acl_errors: AtomicU64,
    /// Completed sync rounds (one per mirror per interval).
    pub rounds: AtomicU64,
}

static METRICS: SyncMetrics = SyncMetrics {
    metadata_refresh_errors: AtomicU64::new(0),
    topic_config_errors: AtomicU64::new(0),
    topic_config_refused: AtomicU64::new(0),
    group_offset_errors: AtomicU64::new(0),
    group_offset_skipped_active: AtomicU64::new(0),
    acl_errors: AtomicU64::new(0),
    rounds: AtomicU64::new(0),
};

/// The process-wide sync counters.
pub fn metrics() -> &'static SyncMetrics {
    &METRICS
}

/// One kind of sync, for counters and log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    /// Source metadata: cluster id, topic ids, discovery, partition counts.
    Metadata,
    /// Topic configs.
    TopicConfig,
    /// Consumer group offsets.
    GroupOffsets,
    /// ACLs.
    Acls,
}

impl SyncKind {
    fn name(self) -> &'static str {
        match self {
            SyncKind::Metadata => "MetadataRefreshError",
            SyncKind::TopicConfig => "TopicConfigMetadataSyncError",
            SyncKind::GroupOffsets => "ConsumerGroupOffsetSyncError",
            SyncKind::Acls => "AclSyncError",
        }
    }

    fn counter(self) -> &'static AtomicU64 {
        match self {
            SyncKind::Metadata => &METRICS.metadata_refresh_errors,
            SyncKind::TopicConfig => &METRICS.topic_config_errors,
            SyncKind::GroupOffsets => &METRICS.group_offset_errors,
            SyncKind::Acls => &METRICS.acl_errors,
        }
    }
}

/// Counts one failure of `kind` and logs it with its cause.
fn report(kind: SyncKind, mirror: &str, what: &str, cause: &dyn std::fmt::Display) {
    let n = kind.counter().fetch_add(1, Ordering::Relaxed) + 1;
    tracing::warn!(mirror, kind = kind.name(), errors = n, what, cause = %cause, "metadata sync error");
}

/// A broker of `c` to send cluster-wide requests to.
async fn any_node(c: &ClusterClient) -> Result<i32, ClusterError> {
    if let Some(n) = c.metadata().brokers.keys().next() {
        return Ok(*n);
    }
    c.refresh_metadata(Some(&[])).await?;
    c.metadata().brokers.keys().next().copied().ok_or_else(|| ClusterError::NoBrokerAvailable {
        tried: c.options().bootstrap.clone(),
        last: "Metadata lists no broker".into(),
    })
}

/// Sends `req` to broker `node` (any broker when `None`) at the highest version both sides
/// support up to `max`.
async fn send<R: Request + Clone>(
    c: &ClusterClient,
    node: Option<i32>,
    req: &R,
    max: i16,
) -> Result<R::Response, ClusterError> {
    let node = match node {
        Some(n) => n,
        None => any_node(c).await?,
    };
    let v = c.version_for::<R>(node, max).await?;
    c.send_to_node(node, req, v).await
}

/// Full-match regexes compiled from pattern lists.
#[derive(Debug, Default)]
pub(crate) struct Patterns(Vec<Regex>);

impl Patterns {
    /// Compiles every pattern as `^(?:p)$`.
    pub(crate) fn compile<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Result<Self, regex::Error> {
        patterns.into_iter().map(|p| Regex::new(&format!("^(?:{p})$"))).collect::<Result<_, _>>().map(Patterns)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn matches(&self, name: &str) -> bool {
        self.0.iter().any(|r| r.is_match(name))
    }
}

/// Spawns the metadata sync of this mirrorgate instance, with its own destination client
/// built from `settings`; it stops on `shutdown`.
pub fn spawn(control: Arc<ControlPlane>, settings: &crate::config::Settings, shutdown: CancellationToken) {
    tokio::spawn(MetadataSync::start(control, crate::mirror::topics::destination_options(settings), shutdown));
}

/// The metadata sync service: one per mirrorgate instance, covering every mirror.
pub struct MetadataSync {
    control: Arc<ControlPlane>,
    dest: ClusterClient,
    sources: HashMap<String, (String, ClusterClient)>,
    next_due: HashMap<String, Instant>,
    /// `(topic, key, value)` refusals already logged, so a refused value is reported once.
    refused: BTreeSet<(String, String, String)>,
    /// Groups last seen active on the destination (logged once per activity period).
    active_groups: BTreeSet<(String, String)>,
}

impl MetadataSync {
    /// A sync writing to the destination cluster through `dest` (directly, not through the
    /// proxy).
    pub fn new(control: Arc<ControlPlane>, dest: ClusterClient) -> Self {
        Self {
            control,
            dest,
            sources: HashMap::new(),
            next_due: HashMap::new(),
            refused: BTreeSet::new(),
            active_groups: BTreeSet::new(),
        }
    }

    /// Connects its own client to the destination (so that sync requests never queue behind
    /// data-plane appends), retrying every 5 s, then [`MetadataSync::run`]s.
    pub async fn start(control: Arc<ControlPlane>, dest: ClusterOptions, shutdown: CancellationToken) {
        let client = loop {
            match ClusterClient::connect(dest.clone()).await {
                Ok(c) => break c,
                Err(e) => tracing::warn!(error = %e, "metadata sync cannot reach the destination; retrying"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
        };
        Self::new(control, client).run(shutdown).await;
    }

    /// Runs until `shutdown`: every 250 ms, syncs each mirror whose interval has passed. A
    /// round in progress finishes its current step before the service returns.
    pub async fn run(mut self, shutdown: CancellationToken) {
        tracing::info!("metadata sync started");
        while !shutdown.is_cancelled() {
            if self.control.is_loaded() {
                self.tick(&shutdown).await;
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
        tracing::info!("metadata sync stopped");
    }

    async fn tick(&mut self, shutdown: &CancellationToken) {
        let state = self.control.snapshot();
        self.next_due.retain(|m, _| state.mirrors.contains_key(m));
        self.sources.retain(|m, _| state.mirrors.contains_key(m));
        for def in state.mirrors.values() {
            if shutdown.is_cancelled() {
                return;
            }
            // With several instances, one runs each mirror's sync (group membership).
            if !self.control.owns_mirror(&def.name) {
                self.next_due.remove(&def.name);
                continue;
            }
            let now = Instant::now();
            if self.next_due.get(&def.name).is_some_and(|due| now < *due) {
                continue;
            }
            let interval = configs::effective(&def.configs, "mirror.metadata.refresh.interval.ms")
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(30_000)
                .max(1000);
            self.next_due.insert(def.name.clone(), now + Duration::from_millis(interval));
            self.sync_mirror(def, &state, shutdown).await;
            METRICS.rounds.fetch_add(1, Ordering::Relaxed);
        }
    }

    async fn source(&mut self, def: &MirrorDefinition) -> Result<ClusterClient, ClusterError> {
        let Some(mut opts) = configs::source_options(&def.name, &def.configs) else {
            return Err(ClusterError::InvalidArgument("the mirror has no bootstrap.servers".into()));
        };
        opts.max_attempts = opts.max_attempts.min(3);
        // Rebuilt when any of the options changes (an operator altered the mirror's configs).
        let built_with = format!("{opts:?}");
        if let Some((b, c)) = self.sources.get(&def.name) {
            if *b == built_with {
                return Ok(c.clone());
            }
        }
        let c = ClusterClient::connect(opts).await?;
        self.sources.insert(def.name.clone(), (built_with, c.clone()));
        Ok(c)
    }

    /// A source that refuses the mirror's certificates or credentials: its mirroring
    /// partitions go FAILED (retryable) naming the refusal, so `--describe` shows why nothing
    /// is copied; the FAILED retries (and this sync, each round) try again, and an operator's
    /// fix of the mirror's configs heals them.
    async fn fail_for_security(&self, def: &MirrorDefinition, state: &ControlState, refusal: &str) {
        let reason = format!("source refused the connection: {refusal}; fix the mirror's security configs (IncrementalAlterConfigs) or the user on the source");
        tracing::error!(mirror = %def.name, %reason, "source authentication failed");
        let topics = state.topics.values().filter(|t| t.mirror == def.name && t.desired == DesiredState::Mirroring);
        for t in topics {
            if let Err(e) = self.control.fail_topic(&t.topic, &reason, true).await {
                tracing::warn!(mirror = %def.name, topic = %t.topic, error = %e, "cannot record the failure");
            }
        }
    }

    /// One round for one mirror: each kind in turn, each failure counted and logged.
    /// One metadata sync pass of a mirror; a `mirror.metadata_sync` span (with one child span
    /// per step) while traces are on.
    async fn sync_mirror(&mut self, def: &MirrorDefinition, state: &ControlState, shutdown: &CancellationToken) {
        let pass = ParentTimed::start();
        let failed = self.sync_steps(def, state, shutdown, pass.as_ref()).await;
        if let Some(p) = pass {
            let attrs = vec![Attr::new("mirror.name", def.name.clone())];
            p.finish("mirror.metadata_sync", SpanKind::Internal, attrs, failed.map(|s| format!("{s}_FAILED")));
        }
    }

    /// The steps of [`Self::sync_mirror`]; returns the first step that failed.
    async fn sync_steps(
        &mut self,
        def: &MirrorDefinition,
        state: &ControlState,
        shutdown: &CancellationToken,
        pass: Option<&ParentTimed>,
    ) -> Option<&'static str> {
        let mirror = def.name.as_str();
        let mut failed = None;
        let mut step = |name: &'static str, t: Option<Timed>, error: Option<&dyn std::fmt::Display>| {
            if error.is_some() && failed.is_none() {
                failed = Some(name);
            }
            if let (Some(t), Some(p)) = (t, pass) {
                let attrs = vec![Attr::new("mirror.name", mirror.to_string()), Attr::new("mirror.sync.step", name)];
                let error = error.map(|_| format!("{name}_FAILED"));
                t.finish("mirror.metadata_sync.step", SpanKind::Internal, attrs, error, Some(p.context()));
            }
        };
        let timed = || pass.and_then(|_| Timed::start());
        let t = timed();
        let source = match self.source(def).await {
            Ok(c) => c,
            Err(e) => {
                step("SOURCE_CLUSTER", t, Some(&e));
                if let Some(refusal) = e.security_refusal() {
                    self.fail_for_security(def, state, &refusal.to_string()).await;
                }
                report(SyncKind::Metadata, mirror, "source cluster", &e);
                return failed;
            }
        };
        if let Err(e) = source.refresh_metadata(None).await {
            step("SOURCE_METADATA", t, Some(&e));
            self.sources.remove(mirror);
            report(SyncKind::Metadata, mirror, "source metadata", &e);
            return failed;
        }
        step("SOURCE_METADATA", t, None);
        let md = source.metadata();
        let t = timed();
        let identity = topics::check_identity(&self.control, def, state, &md).await;
        if let Err(e) = &identity {
            report(SyncKind::Metadata, mirror, "source topic ids", e);
        }
        let discovered = topics::discover(&self.control, def, state, &md).await;
        if let Err(e) = &discovered {
            report(SyncKind::Metadata, mirror, "topic discovery", e);
        }
        match (&identity, &discovered) {
            (Err(e), _) => step("TOPIC_IDENTITY", t, Some(e)),
            (_, Err(e)) => step("TOPIC_DISCOVERY", t, Some(e)),
            _ => step("TOPIC_DISCOVERY", t, None),
        }
        // Later kinds see what discovery and identity checks changed.
        let state = self.control.snapshot();
        if shutdown.is_cancelled() {
            return failed;
        }
        let t = timed();
        topics::sync_partitions(&self.control, &self.dest, def, &state, &md).await;
        step("PARTITIONS", t, None);
        let t = timed();
        topics::sync_configs(&source, &self.dest, def, &state, &mut self.refused).await;
        step("TOPIC_CONFIGS", t, None);
        if shutdown.is_cancelled() {
            return failed;
        }
        let t = timed();
        groups::sync_groups(&source, &self.dest, def, &state, &mut self.active_groups).await;
        step("GROUPS", t, None);
        let t = timed();
        let mirrored = state.topics.values().filter(|t| t.mirror == def.name).map(|t| t.topic.clone()).collect();
        match acls::sync_acls(&source, &self.dest, def, &mirrored).await {
            Ok((0, 0)) => step("ACLS", t, None),
            Ok((created, deleted)) => {
                step("ACLS", t, None);
                tracing::info!(mirror, created, deleted, "ACLs synced from the source");
            }
            Err(e) => {
                step("ACLS", t, Some(&e));
                report(SyncKind::Acls, mirror, "ACLs", &e);
            }
        }
        failed
    }
}
