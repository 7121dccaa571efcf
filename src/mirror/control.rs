//! The control plane: mirror definitions, mirror topics and partition states held in memory,
//! changed only through the operations below, each persisted to `__mirror_state` before it
//! takes effect in memory. Start, Stop, Pause and Resume set a topic's desired state; the
//! partitions then step towards it (KIP-1279 §4.3) — driven by the data plane when it runs,
//! or straight through here for steps that need no data movement.
//!
//! The proxy reads [`ControlPlane::read_only_mirror`] to keep mirror topics read-only.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use regex::Regex;

use crate::wire::mirror::{MirrorErrorCode, MirrorPartitionState};

use super::model::{now_ms, DesiredState, MirrorDefinition, MirrorTopic, PartitionStateRecord, StartPosition};
use super::state_machine;
use super::topics::ClusterAccess;

mod figures;
mod follow_ops;
mod merge;
mod migration_ops;
mod mirrors;
mod start;
mod sync_ops;

pub use follow_ops::{FollowBarrier, Lease, Ownership};

/// One write to `__mirror_state`.
#[derive(Debug, Clone)]
pub enum StateWrite {
    /// Create or replace a mirror definition.
    Mirror(MirrorDefinition),
    /// Delete a mirror definition (tombstone).
    DeleteMirror(String),
    /// Create or replace a mirror topic.
    Topic(MirrorTopic),
    /// Delete a mirror topic `(mirror, topic)`.
    DeleteTopic(String, String),
    /// Create or replace a partition state.
    Partition(PartitionStateRecord),
    /// Delete a partition state `(mirror, topic, partition)`.
    DeletePartition(String, String, i32),
}

impl StateWrite {
    /// The state-topic key this write is about.
    pub fn key(&self) -> super::store::StateKey {
        use super::store::StateKey;
        match self {
            StateWrite::Mirror(m) => StateKey::Mirror { name: m.name.clone() },
            StateWrite::DeleteMirror(name) => StateKey::Mirror { name: name.clone() },
            StateWrite::Topic(t) => StateKey::Topic { mirror: t.mirror.clone(), topic: t.topic.clone() },
            StateWrite::DeleteTopic(mirror, topic) => StateKey::Topic { mirror: mirror.clone(), topic: topic.clone() },
            StateWrite::Partition(p) => {
                StateKey::Partition { mirror: p.mirror.clone(), topic: p.topic.clone(), partition: p.partition }
            }
            StateWrite::DeletePartition(mirror, topic, partition) => {
                StateKey::Partition { mirror: mirror.clone(), topic: topic.clone(), partition: *partition }
            }
        }
    }
}

/// Boxed future returned by [`Persist::write`]: the record's offset in its state-topic
/// partition once acknowledged.
pub type PersistFuture<'a> = Pin<Box<dyn Future<Output = Result<i64, String>> + Send + 'a>>;

/// Durable storage of control-plane writes (the `__mirror_state` topic in production).
pub trait Persist: Send + Sync {
    /// Writes one record durably (acks=all); resolves to its offset once acknowledged.
    fn write(&self, w: StateWrite) -> PersistFuture<'_>;

    /// Whether secret mirror configs can be stored (a `password_encoder_secret` is set);
    /// without one they are refused rather than written in clear.
    fn can_store_secrets(&self) -> bool {
        true
    }
}

/// A control-plane failure with the KIP error it maps to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code_name(*code))]
pub struct MirrorError {
    /// Kafka / KIP-1279 error code.
    pub code: i16,
    /// Human-readable message naming the mirror or topic.
    pub message: String,
}

/// How long the copy loop waits after persisting a new offset segment before appending into
/// it while other instances serve clients: they present source offsets through the segment
/// as soon as they have followed it from `__mirror_state` (typically within tens of ms;
/// [`super::follow`]), and must have it before the data it maps is readable.
pub const SEGMENT_PROPAGATION_DELAY: std::time::Duration = std::time::Duration::from_millis(500);

/// Kafka error INVALID_CONFIG (40).
pub const INVALID_CONFIG: i16 = 40;
/// Kafka error UNKNOWN_SERVER_ERROR (-1).
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
/// Kafka error UNKNOWN_TOPIC_OR_PARTITION (3).
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// Kafka error TOPIC_ALREADY_EXISTS (36): a StartMirrorTopics error in KIP-1279; mirrorgate
/// answers it when an existing destination topic cannot be adopted (not empty, or written).
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
/// Kafka error COORDINATOR_LOAD_IN_PROGRESS (14).
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;

fn code_name(code: i16) -> &'static str {
    match MirrorErrorCode::from_code(code) {
        Some(c) => c.name(),
        None => match code {
            INVALID_CONFIG => "INVALID_CONFIG",
            UNKNOWN_TOPIC_OR_PARTITION => "UNKNOWN_TOPIC_OR_PARTITION",
            TOPIC_ALREADY_EXISTS => "TOPIC_ALREADY_EXISTS",
            COORDINATOR_LOAD_IN_PROGRESS => "COORDINATOR_LOAD_IN_PROGRESS",
            _ => "UNKNOWN_SERVER_ERROR",
        },
    }
}

/// The span of a partition state transition (`mirror.partition_state`): mirror, topic,
/// partition, the states before and after. Entering FAILED counts as an error (the span is
/// kept whatever the sampling ratio); so does a failure to persist it.
fn transition_span(timed: crate::telemetry::traces::Timed, rec: &PartitionStateRecord, failed: Option<&MirrorError>) {
    use crate::telemetry::traces::{error_type, Attr};
    let mut attrs = vec![
        Attr::new("mirror.name", rec.mirror.clone()),
        Attr::new("mirror.topic", rec.topic.clone()),
        Attr::new("mirror.partition", i64::from(rec.partition)),
        Attr::new("mirror.state", rec.state.as_str()),
        Attr::new("mirror.state_epoch", i64::from(rec.state_epoch)),
    ];
    if let Some(p) = rec.previous_state {
        attrs.push(Attr::new("mirror.previous_state", p.as_str()));
    }
    let error = match failed {
        Some(e) => Some(error_type(e.code)),
        None => (rec.state == MirrorPartitionState::Failed).then(|| "MIRROR_PARTITION_FAILED".to_string()),
    };
    timed.finish("mirror.partition_state", opentelemetry::trace::SpanKind::Internal, attrs, error, None);
}

fn err(code: MirrorErrorCode, message: impl Into<String>) -> MirrorError {
    MirrorError { code: code.code(), message: message.into() }
}

/// Checks a mirror name against the KIP rules (topic-name rules): 1–249 characters of
/// `[a-zA-Z0-9._-]`, not `.` or `..`.
///
/// # Errors
/// INVALID_CLUSTER_MIRROR_NAME with the reason.
pub fn validate_mirror_name(name: &str) -> Result<(), MirrorError> {
    let bad =
        |why: &str| err(MirrorErrorCode::InvalidClusterMirrorName, format!("invalid mirror name `{name}`: {why}"));
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.len() > 249 {
        return Err(bad("longer than 249 characters"));
    }
    if name == "." || name == ".." {
        return Err(bad("`.` and `..` are not allowed"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return Err(bad("only ASCII letters, digits, `.`, `_` and `-` are allowed"));
    }
    Ok(())
}

/// Everything the control plane holds.
#[derive(Debug, Default, Clone)]
pub struct ControlState {
    /// Mirrors by name.
    pub mirrors: BTreeMap<String, MirrorDefinition>,
    /// Mirror topics by topic name (a topic belongs to at most one mirror).
    pub topics: BTreeMap<String, MirrorTopic>,
    /// Partition states by `(topic, partition)`.
    pub partitions: BTreeMap<(String, i32), PartitionStateRecord>,
}

impl ControlState {
    /// Builds the state from loaded records (mirror-keyed maps as the store returns them).
    pub fn from_records(
        mirrors: BTreeMap<String, MirrorDefinition>,
        topics: impl IntoIterator<Item = MirrorTopic>,
        partitions: impl IntoIterator<Item = PartitionStateRecord>,
    ) -> Self {
        Self {
            mirrors,
            topics: topics.into_iter().map(|t| (t.topic.clone(), t)).collect(),
            partitions: partitions.into_iter().map(|p| ((p.topic.clone(), p.partition), p)).collect(),
        }
    }
}

/// A mirror with its topics and their partition states by topic, for List/Describe.
pub type MirrorView = (MirrorDefinition, Vec<MirrorTopic>, HashMap<String, Vec<PartitionStateRecord>>);

/// Result of a per-topic operation.
pub type TopicResults = Vec<(String, Result<(), MirrorError>)>;

/// The control plane of one mirrorgate instance.
pub struct ControlPlane {
    state: RwLock<ControlState>,
    /// What the data plane last saw per `(topic, partition)`.
    progress: dashmap::DashMap<(String, i32), super::dataplane::Progress>,
    /// What the live refresher last read per `(topic, partition)`.
    live: super::dataplane::live::LiveFigures,
    /// The last error of partitions whose copy loop is retrying (cleared by progress).
    retrying: dashmap::DashMap<(String, i32), String>,
    /// Last mirrored source offset read from the destination log by the data plane for a
    /// partition about to become STOPPED (preferred over the in-memory progress).
    stopped_at: dashmap::DashMap<(String, i32), i64>,
    /// Set when a data plane drives the partitions: transient states (PAUSING, STOPPING)
    /// then wait for it to finish in-flight work.
    data_plane: AtomicBool,
    /// Source offsets lost to source retention before they were copied.
    lost_offsets: std::sync::atomic::AtomicI64,
    persist: Arc<dyn Persist>,
    /// Serialises writers so that persist order equals apply order.
    write_lock: tokio::sync::Mutex<()>,
    loaded: AtomicBool,
    /// The offset maps of shifted partitions, rebuilt on every state change (the proxy
    /// presents source offsets through them, `proxy::present`).
    offset_maps: RwLock<Arc<super::offset_maps::OffsetMaps>>,
    /// Read caps (destination offsets) of mirror partitions whose log end holds, or may soon
    /// hold, a transaction marker of mirrorgate's not yet checked against the source
    /// ([`ControlPlane::hold_reads`]).
    read_caps: dashmap::DashMap<(String, i32), i64>,
    destination: ClusterAccess,
    source_timeouts: (std::time::Duration, std::time::Duration),
    /// Per state key, the offset of the last record applied in memory (written here or
    /// followed from another instance): a followed record at or below it is older.
    key_offsets: std::sync::Mutex<HashMap<super::store::StateKey, i64>>,
    /// Records written here and not yet seen by the follower: `(key, offset)`.
    own_writes: std::sync::Mutex<std::collections::HashSet<(super::store::StateKey, i64)>>,
    /// Mirror and mirror-topic values before this instance's writes not yet followed back
    /// (`merge`: a concurrent change through another instance is merged, not lost).
    own_bases: std::sync::Mutex<merge::OwnBases>,
    /// Per mirror partition, the highest owner generation seen on its state records.
    generations: dashmap::DashMap<(String, i32), i32>,
    /// The mirror work this instance owns (group membership); `None`: no group, this
    /// instance owns everything.
    ownership: RwLock<Option<Arc<Ownership>>>,
    /// Admin requests wait on it before they are answered (`follow_ops::FollowBarrier`).
    follow_barrier: RwLock<Option<follow_ops::FollowBarrier>>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane").field("loaded", &self.loaded.load(Ordering::Relaxed)).finish()
    }
}

impl ControlPlane {
    /// A control plane persisting through `persist`, creating mirror topics on `destination`.
    /// Not loaded until [`ControlPlane::load`].
    pub fn new(persist: Arc<dyn Persist>, destination: ClusterAccess) -> Self {
        let source_timeouts = (destination.connect_timeout, destination.request_timeout);
        Self {
            state: RwLock::new(ControlState::default()),
            progress: dashmap::DashMap::new(),
            live: Default::default(),
            retrying: dashmap::DashMap::new(),
            stopped_at: dashmap::DashMap::new(),
            data_plane: AtomicBool::new(false),
            lost_offsets: std::sync::atomic::AtomicI64::new(0),
            persist,
            write_lock: tokio::sync::Mutex::new(()),
            loaded: AtomicBool::new(false),
            offset_maps: RwLock::new(Arc::default()),
            read_caps: dashmap::DashMap::new(),
            destination,
            source_timeouts,
            key_offsets: Default::default(),
            own_writes: Default::default(),
            own_bases: Default::default(),
            generations: Default::default(),
            ownership: RwLock::new(None),
            follow_barrier: RwLock::new(None),
        }
    }

    /// Installs the state loaded from `__mirror_state`; from now on mirror topics are served.
    pub fn load(&self, state: ControlState) {
        self.update_state(|s| *s = state);
        self.loaded.store(true, Ordering::Release);
    }

    /// Whether the state has been loaded (before that, mirror APIs answer
    /// COORDINATOR_LOAD_IN_PROGRESS and no topic is known to be a mirror topic).
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Declares that a data plane drives partition transitions from now on.
    pub fn attach_data_plane(&self) {
        self.data_plane.store(true, Ordering::Release);
    }

    /// Where the partitions of mirror topic `topic` start copying (earliest when unknown).
    pub fn start_position(&self, topic: &str) -> StartPosition {
        self.with_state(|s| s.topics.get(topic).map(|t| t.start_position).unwrap_or_default())
    }

    /// The state record of a partition.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<PartitionStateRecord> {
        self.with_state(|s| s.partitions.get(&(topic.to_string(), partition)).cloned())
    }

    /// Changes a partition record with `f` and persists it (no state change). The data
    /// plane's writes: refused unless this instance owns the partition. When the offset
    /// segments changed and other instances may serve clients (a group), returns only after
    /// [`SEGMENT_PROPAGATION_DELAY`], so that they apply the new segment (following
    /// `__mirror_state`) before the copy loop appends anything into it.
    ///
    /// # Errors
    /// UNKNOWN_TOPIC_OR_PARTITION when the partition has no state; UNKNOWN_SERVER_ERROR when
    /// this instance does not own the partition (any more); a store failure.
    pub async fn update_partition(
        &self,
        topic: &str,
        partition: i32,
        f: impl FnOnce(&mut PartitionStateRecord),
    ) -> Result<PartitionStateRecord, MirrorError> {
        self.check_owner(topic, partition)?;
        let _w = self.write_lock.lock().await;
        // Again under the lock: the wait for it may have outlasted the lease.
        self.check_owner(topic, partition)?;
        let mut rec = self.partition(topic, partition).ok_or_else(|| MirrorError {
            code: UNKNOWN_TOPIC_OR_PARTITION,
            message: format!("no mirror state for {topic}-{partition}"),
        })?;
        let segments_before = rec.segments.clone();
        let timed = crate::telemetry::traces::Timed::start();
        f(&mut rec);
        rec.updated_ms = now_ms();
        let persisted = self.persist(StateWrite::Partition(rec.clone())).await;
        if let (Some(t), Some(seg)) = (timed, rec.segments.last().filter(|_| rec.segments != segments_before)) {
            use crate::telemetry::traces::{error_type, Attr};
            let attrs = vec![
                Attr::new("mirror.name", rec.mirror.clone()),
                Attr::new("mirror.topic", topic.to_string()),
                Attr::new("mirror.partition", i64::from(partition)),
                Attr::new("mirror.segment.source_start", seg.source_start),
                Attr::new("mirror.segment.destination_start", seg.destination_start),
                Attr::new("mirror.segment_count", rec.segments.len() as i64),
            ];
            let error = persisted.as_ref().err().map(|e| error_type(e.code));
            t.finish("mirror.offset_segment", opentelemetry::trace::SpanKind::Internal, attrs, error, None);
        }
        persisted?;
        self.update_state(|s| {
            s.partitions.insert((topic.to_string(), partition), rec.clone());
        });
        drop(_w);
        if rec.segments != segments_before && self.other_instances() {
            tokio::time::sleep(SEGMENT_PROPAGATION_DELAY).await;
        }
        Ok(rec)
    }

    /// Moves a partition to `to` if the KIP allows it from its current state, persisting
    /// the record. Entering FAILED records `error` (message, retryable); an automatic retry
    /// (FAILED → LOG_ALIGNMENT) counts an attempt. Invalid transitions are refused silently
    /// (returns `false`): the caller's view was stale.
    ///
    /// # Errors
    /// A store failure.
    pub async fn transition(
        &self,
        topic: &str,
        partition: i32,
        to: MirrorPartitionState,
        error: Option<(String, bool)>,
    ) -> Result<bool, MirrorError> {
        let timed = crate::telemetry::traces::Timed::start();
        let _w = self.write_lock.lock().await;
        let Some(mut rec) = self.partition(topic, partition) else { return Ok(false) };
        if !state_machine::is_valid_transition(Some(rec.state), to) || rec.state == to && error.is_none() {
            return Ok(false);
        }
        // A non-retryable failure keeps its first reason (a later, derived error must not
        // hide why the partition failed).
        if rec.state == MirrorPartitionState::Failed && to == MirrorPartitionState::Failed && !rec.retryable {
            return Ok(false);
        }
        if rec.state == MirrorPartitionState::Failed && to == MirrorPartitionState::LogAlignment {
            rec.retry_attempt += 1;
        }
        rec.previous_state = Some(rec.state);
        rec.state = to;
        rec.state_epoch += 1;
        rec.updated_ms = now_ms();
        if let Some((message, retryable)) = error {
            rec.error_message = Some(message);
            rec.retryable = retryable;
        } else if to == MirrorPartitionState::Mirroring {
            rec.error_message = None;
        }
        if to == MirrorPartitionState::Stopped {
            // The destination is the partition's own from now on (a failover): nothing of
            // mirrorgate's is written any more, and new records must be read.
            self.release_reads(topic, partition);
            // From the destination log through the offset map when the data plane read it
            // (also right after a restart with the source down), else what it last copied.
            if let Some((_, last)) = self.stopped_at.remove(&(topic.to_string(), partition)) {
                rec.last_mirrored_offset = last;
            } else if let Some(p) = self.progress(topic, partition) {
                rec.last_mirrored_offset = p.next_source - 1;
            }
        }
        let persisted = self.persist(StateWrite::Partition(rec.clone())).await;
        if let Some(t) = timed {
            transition_span(t, &rec, persisted.as_ref().err());
        }
        persisted?;
        tracing::info!(mirror = %rec.mirror, topic, partition, state = to.as_str(), "mirror partition state");
        self.update_state(|s| {
            s.partitions.insert((topic.to_string(), partition), rec);
        });
        Ok(true)
    }

    /// A copy of the current state.
    pub fn snapshot(&self) -> ControlState {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn check_loaded(&self) -> Result<(), MirrorError> {
        if self.is_loaded() {
            Ok(())
        } else {
            Err(MirrorError {
                code: COORDINATOR_LOAD_IN_PROGRESS,
                message: "mirrorgate is loading __mirror_state".into(),
            })
        }
    }

    /// Writes `w` to `__mirror_state`; a partition record is stamped with this instance's
    /// owner generation when it owns the partition. Records the key's offset, so that
    /// following the state topic does not apply an older record over it. Callers hold
    /// `write_lock` and apply `w` in memory after it.
    async fn persist(&self, mut w: StateWrite) -> Result<(), MirrorError> {
        if let StateWrite::Partition(rec) = &mut w {
            rec.owner_generation = self.write_generation(&rec.topic, rec.partition);
            if let Some(g) = rec.owner_generation {
                self.note_generation(&rec.topic, rec.partition, g);
            }
        }
        let key = w.key();
        let followed = self.follow_barrier.read().unwrap_or_else(|e| e.into_inner()).is_some();
        let base = if followed { self.mergeable_value(&key) } else { None };
        let offset = self.persist.write(w).await.map_err(|e| MirrorError {
            code: UNKNOWN_SERVER_ERROR,
            message: format!("cannot write __mirror_state: {e}"),
        })?;
        if followed {
            // Followed back later; bounded by what the follower has not read yet.
            self.own_writes.lock().unwrap_or_else(|e| e.into_inner()).insert((key.clone(), offset));
            self.remember_base(&key, offset, base);
        }
        let mut offsets = self.key_offsets.lock().unwrap_or_else(|e| e.into_inner());
        let slot = offsets.entry(key).or_insert(offset);
        *slot = (*slot).max(offset);
        Ok(())
    }

    fn with_state<T>(&self, f: impl FnOnce(&ControlState) -> T) -> T {
        f(&self.state.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Changes the in-memory state (callers persist first) and rebuilds the offset maps of
    /// shifted partitions under the same lock, so a reader never sees a state newer than
    /// its maps.
    fn update_state(&self, f: impl FnOnce(&mut ControlState)) {
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        f(&mut state);
        let maps = Arc::new(super::offset_maps::OffsetMaps::build(&state));
        *self.offset_maps.write().unwrap_or_else(|e| e.into_inner()) = maps;
    }

    /// The offset maps of every shifted mirror partition (DESIGN §4.2), as of the last state
    /// change: persisted to `__mirror_state` before the data plane appends into a new
    /// segment, so they are at least as new as the destination data a reader can see.
    pub fn offset_maps(&self) -> Arc<super::offset_maps::OffsetMaps> {
        self.offset_maps.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Holds reads of `topic`-`partition` through mirrorgate below destination offset `cap`:
    /// Fetch responses carry no batch at or above it and a high watermark and LSO of at
    /// most `cap` (`proxy::present::fetch`). Set by the copy loop before an EndTxn whose
    /// marker lands at `cap − 1` (the destination's transaction coordinator may write it
    /// again after a leader change, docs/real-markers.md); released once the marker is known
    /// to have landed once, or the extra ones are hidden behind an offset segment
    /// ([`ControlPlane::release_reads`]), or a re-alignment checked the log end, or the
    /// partition goes STOPPED. So a consumer never reads such a marker as a source offset and
    /// skips the next record. (A failed or paused loop keeps the hold until then.)
    pub fn hold_reads(&self, topic: &str, partition: i32, cap: i64) {
        self.read_caps.insert((topic.to_owned(), partition), cap);
    }

    /// Ends [`ControlPlane::hold_reads`] for `topic`-`partition`.
    pub fn release_reads(&self, topic: &str, partition: i32) {
        self.read_caps.remove(&(topic.to_owned(), partition));
    }

    /// Whether some partition's reads are held.
    pub fn reads_held(&self) -> bool {
        !self.read_caps.is_empty()
    }

    /// A copy of every read cap (usually none: an empty map, no allocation).
    pub fn read_caps(&self) -> std::collections::HashMap<(String, i32), i64> {
        if self.read_caps.is_empty() {
            return Default::default();
        }
        self.read_caps.iter().map(|e| (e.key().clone(), *e.value())).collect()
    }

    /// Whether any topic belongs to a mirror.
    pub fn has_topics(&self) -> bool {
        self.with_state(|s| !s.topics.is_empty())
    }

    /// Whether `topic` belongs to a mirror (in any state).
    pub fn is_mirror_topic(&self, topic: &str) -> bool {
        self.with_state(|s| s.topics.contains_key(topic))
    }

    /// Whether `topic` is a mirror topic whose source stamps LogAppendTime.
    pub fn source_log_append_time(&self, topic: &str) -> bool {
        self.with_state(|s| s.topics.get(topic).is_some_and(|t| t.source_log_append_time))
    }

    /// Whether any mirror topic's source stamps LogAppendTime (the proxy then looks up the
    /// topics of a Fetch response; otherwise it never needs their names).
    pub fn any_source_log_append_time(&self) -> bool {
        self.with_state(|s| s.topics.values().any(|t| t.source_log_append_time))
    }

    /// The mirror topic whose destination topic id (Kafka's base64 form) is `id`, from the
    /// partition states (each records the destination topic it copies into); `None` when no
    /// mirror partition names it. A scan of the partition states: callers ask only for ids the
    /// proxy has not learned from Metadata.
    pub fn mirror_topic_by_destination_id(&self, id: &str) -> Option<String> {
        self.with_state(|s| {
            s.partitions
                .iter()
                .find(|(_, r)| r.destination_topic_id.as_deref() == Some(id))
                .map(|((topic, _), _)| topic.clone())
        })
    }

    /// The mirror that makes `topic` read-only, if any: a mirror topic is read-only unless
    /// every partition state is STOPPED (KIP-1279 §9). `None` for ordinary topics and stopped
    /// mirror topics.
    pub fn read_only_mirror(&self, topic: &str) -> Option<String> {
        self.with_state(|s| {
            let t = s.topics.get(topic)?;
            let parts: Vec<_> =
                s.partitions.range((topic.to_string(), i32::MIN)..=(topic.to_string(), i32::MAX)).collect();
            let writable = !parts.is_empty() && parts.iter().all(|(_, p)| state_machine::is_writable(Some(p.state)));
            (!writable).then(|| t.mirror.clone())
        })
    }

    /// Moves every partition of `topic` one or more steps towards the topic's desired state,
    /// as far as the control plane can go without the data plane (which owns LOG_ALIGNMENT →
    /// MIRRORING and the in-flight drain of STOPPING). Every transition is persisted.
    async fn step_partitions(&self, topic: &str, partitions: i32) -> Result<(), MirrorError> {
        let Some(t) = self.with_state(|s| s.topics.get(topic).cloned()) else { return Ok(()) };
        for p in 0..partitions {
            loop {
                let current = self.with_state(|s| s.partitions.get(&(topic.to_string(), p)).cloned());
                // A partition whose copy loop may be running is stepped by its owner's data
                // plane (`dataplane::reconcile`): a record written here would carry this
                // instance's view of the loop's offset map, which another instance's loop
                // may have moved on.
                if self.data_plane.load(Ordering::Acquire)
                    && current.as_ref().is_some_and(|c| {
                        matches!(c.state, MirrorPartitionState::LogAlignment | MirrorPartitionState::Mirroring)
                    })
                {
                    break;
                }
                let Some(next) = state_machine::next_step(current.as_ref().map(|c| c.state), t.desired) else { break };
                let rec = match current {
                    Some(mut c) => {
                        c.previous_state = Some(c.state);
                        c.state = next;
                        c.state_epoch += 1;
                        c.updated_ms = now_ms();
                        if next == MirrorPartitionState::LogAlignment {
                            c.error_message = None;
                            c.retry_attempt = 0;
                        }
                        c
                    }
                    None => PartitionStateRecord::new(&t.mirror, topic, p, next),
                };
                self.persist(StateWrite::Partition(rec.clone())).await?;
                tracing::info!(mirror = %t.mirror, topic, partition = p, state = rec.state.as_str(), "mirror partition state");
                self.update_state(|s| {
                    s.partitions.insert((topic.to_string(), p), rec);
                });
                // Steps the data plane must take stop here; with a data plane attached it also
                // completes PAUSING and STOPPING once the in-flight append is done.
                let driven = self.data_plane.load(Ordering::Acquire)
                    && matches!(next, MirrorPartitionState::Pausing | MirrorPartitionState::Stopping);
                if driven || matches!(next, MirrorPartitionState::LogAlignment | MirrorPartitionState::Mirroring) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Stop / Pause / Resume: sets the desired state of the named topics of `mirror`.
    ///
    /// Per topic: TOPIC_NOT_IN_CLUSTER_MIRROR if the topic is not in this mirror;
    /// MIRROR_TOPIC_ALREADY_PAUSED / MIRROR_TOPIC_NOT_PAUSED for a pause of a paused topic or a
    /// resume of one that is not paused; MIRROR_TOPIC_BEING_STOPPED for a pause or resume of a
    /// stopped topic.
    ///
    /// # Errors
    /// UNKNOWN_CLUSTER_MIRROR for the whole request.
    pub async fn set_desired(
        &self,
        mirror: &str,
        topics: &[String],
        desired: DesiredState,
    ) -> Result<TopicResults, MirrorError> {
        self.check_loaded()?;
        self.mirror(mirror)?;
        let _w = self.write_lock.lock().await;
        let mut results = Vec::new();
        for name in topics {
            let current = self.with_state(|s| s.topics.get(name).cloned());
            let r = match current {
                Some(t) if t.mirror == mirror => {
                    let check = match (desired, t.desired) {
                        (DesiredState::Paused, DesiredState::Paused) => Err(err(
                            MirrorErrorCode::MirrorTopicAlreadyPaused,
                            format!("topic `{name}` is already paused"),
                        )),
                        (DesiredState::Mirroring, DesiredState::Mirroring) => {
                            Err(err(MirrorErrorCode::MirrorTopicNotPaused, format!("topic `{name}` is not paused")))
                        }
                        (DesiredState::Paused | DesiredState::Mirroring, DesiredState::Stopped) => Err(err(
                            MirrorErrorCode::MirrorTopicBeingStopped,
                            format!("topic `{name}` is stopped; use --start to mirror it again"),
                        )),
                        _ => Ok(()),
                    };
                    match check {
                        Err(e) => Err(e),
                        Ok(()) if desired == t.desired => Ok(()),
                        Ok(()) => {
                            let mut t = t.clone();
                            t.desired = desired;
                            t.updated_ms = now_ms();
                            let partitions = t.partitions.unwrap_or(0);
                            self.persist(StateWrite::Topic(t.clone())).await?;
                            self.update_state(|s| {
                                s.topics.insert(name.clone(), t);
                            });
                            self.step_partitions(name, partitions).await?;
                            Ok(())
                        }
                    }
                }
                _ => Err(err(
                    MirrorErrorCode::TopicNotInClusterMirror,
                    format!("topic `{name}` is not in mirror `{mirror}`"),
                )),
            };
            results.push((name.clone(), r));
        }
        drop(_w);
        if desired == DesiredState::Stopped && self.data_plane.load(Ordering::Acquire) {
            self.wait_stopped(topics, std::time::Duration::from_secs(30)).await;
        }
        let changed: Vec<&String> = results.iter().filter(|(_, r)| r.is_ok()).map(|(t, _)| t).collect();
        let refused: Vec<String> =
            results.iter().filter_map(|(t, r)| r.as_ref().err().map(|e| format!("{t}: {e}"))).collect();
        if !changed.is_empty() {
            tracing::info!(mirror, ?desired, topics = ?changed, "mirror topics desired state set");
        }
        if !refused.is_empty() {
            tracing::info!(mirror, ?desired, refused = ?refused, "mirror topics left as they were");
        }
        Ok(results)
    }

    /// Waits until every partition of `topics` is STOPPED (the data plane finished its
    /// in-flight appends), up to `timeout`; failover answers only then.
    async fn wait_stopped(&self, topics: &[String], timeout: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let pending = self.with_state(|s| {
                s.partitions.values().any(|p| topics.contains(&p.topic) && p.state != MirrorPartitionState::Stopped)
            });
            if !pending || tokio::time::Instant::now() > deadline {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Topics of `mirror` matching `patterns` (names or full-match regexes).
    ///
    /// # Errors
    /// INVALID_CONFIG for a bad pattern.
    pub fn resolve_topics(&self, mirror: &str, patterns: &[String]) -> Result<Vec<String>, MirrorError> {
        let regs = patterns
            .iter()
            .map(|p| {
                Regex::new(&format!("^(?:{p})$")).map_err(|e| MirrorError {
                    code: INVALID_CONFIG,
                    message: format!("`{p}` is not a valid pattern: {e}"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.with_state(|s| {
            let mut out: BTreeSet<String> = s
                .topics
                .values()
                .filter(|t| t.mirror == mirror && regs.iter().any(|r| r.is_match(&t.topic)))
                .map(|t| t.topic.clone())
                .collect();
            // Names that match nothing are reported per topic by the caller.
            for p in patterns {
                if regex::escape(p) == *p {
                    out.insert(p.clone());
                }
            }
            out.into_iter().collect()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_names_follow_topic_rules() {
        assert!(validate_mirror_name("a-to-b_1.x").is_ok());
        for bad in ["", ".", "..", "has space", "ü", &"x".repeat(250)] {
            let e = validate_mirror_name(bad).unwrap_err();
            assert_eq!(e.code, MirrorErrorCode::InvalidClusterMirrorName.code(), "{bad}");
        }
        assert!(validate_mirror_name(&"x".repeat(249)).is_ok());
    }
}
