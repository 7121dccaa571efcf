//! What a mirror is, as stored in `__mirror_state` and held in memory: mirror definitions,
//! mirror topics with their desired state, and per-partition state records (KIP-1279 §2, §4).
//! Plain data; persistence lives in `store`, rules in `state_machine`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wire::mirror::MirrorPartitionState;

/// A cluster mirror: a named link from this destination cluster to one source cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorDefinition {
    /// Mirror name (KIP rules: 1–249 chars of `[a-zA-Z0-9._-]`, not `.` or `..`).
    pub name: String,
    /// Mirror configs (resource type CLUSTER_MIRROR), e.g. `bootstrap.servers`. Validated on
    /// write; secrets are stored here but never returned in clear nor logged.
    pub configs: BTreeMap<String, String>,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
    /// Source cluster id learned on first contact (KIP `source.cluster.id`), if any.
    #[serde(default)]
    pub source_cluster_id: Option<String>,
    /// Topic include patterns saved by `--start` for auto-discovery (full-match regexes).
    #[serde(default)]
    pub include_patterns: Vec<String>,
    /// Topic exclude patterns saved by `--start --exclude`.
    #[serde(default)]
    pub exclude_patterns: Vec<String>,
}

/// What the operator asked for a mirror topic; the data plane drives the partitions there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DesiredState {
    /// Copy from the source (after `--start` or `--resume`).
    Mirroring,
    /// Hold copying, stay read-only (after `--pause`).
    Paused,
    /// Stop for good; the topic becomes writable (after `--stop`, failover).
    Stopped,
}

/// A topic owned by a mirror.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorTopic {
    /// Owning mirror.
    pub mirror: String,
    /// Topic name (same on source and destination).
    pub topic: String,
    /// Source topic id (base64 UUID as Kafka prints it), once known.
    #[serde(default)]
    pub source_topic_id: Option<String>,
    /// Desired state set by Start/Pause/Resume/Stop.
    pub desired: DesiredState,
    /// Partition count, once known from the source.
    #[serde(default)]
    pub partitions: Option<i32>,
    /// Whether the source topic stamps LogAppendTime (`message.timestamp.type`): the
    /// destination keeps CreateTime batches and mirrorgate restores the type on Fetch
    /// (DESIGN §4.10).
    #[serde(default)]
    pub source_log_append_time: bool,
    /// Last change, ms since the epoch.
    pub updated_ms: i64,
}

/// One segment of a mirror partition's offset map: from source offset `source_start` on,
/// destination offset = source offset − (`source_start` − `destination_start`) (DESIGN §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetSegment {
    /// First source offset of the segment.
    pub source_start: i64,
    /// Destination offset that `source_start` lands at.
    pub destination_start: i64,
}

impl OffsetSegment {
    /// Source offset − destination offset inside this segment (0 = identical).
    pub fn shift(&self) -> i64 {
        self.source_start - self.destination_start
    }
}

/// The state record of one mirror partition (KIP-1279 §4; prototype `MirrorPartitionMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStateRecord {
    /// Owning mirror.
    pub mirror: String,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Current state.
    pub state: MirrorPartitionState,
    /// Incremented on every state change; a writer with an older epoch is stale.
    pub state_epoch: i32,
    /// Last source offset appended to the destination (-1 before the first append).
    pub last_mirrored_offset: i64,
    /// Why the partition is FAILED (or last failed), if it did.
    #[serde(default)]
    pub error_message: Option<String>,
    /// FAILED retries so far (`mirror.failed.retry.max.attempts` caps it).
    #[serde(default)]
    pub retry_attempt: i32,
    /// Whether the failure can be retried automatically.
    #[serde(default)]
    pub retryable: bool,
    /// State before the current one.
    #[serde(default)]
    pub previous_state: Option<MirrorPartitionState>,
    /// Offset map segments, ascending by `source_start` (DESIGN §4.2). Empty until the first
    /// append decides the first segment.
    #[serde(default)]
    pub segments: Vec<OffsetSegment>,
    /// Source leader-epoch history of what was copied: `(leader epoch, first source offset)`
    /// ascending (DESIGN §4.1). The last entry is sent as `LastFetchedEpoch`, so a source log
    /// that diverged under the mirror is detected even after a retry or a restart.
    #[serde(default)]
    pub source_epochs: Vec<(i32, i64)>,
    /// Destination producer id used for this partition's appends (DESIGN §4.5), once allocated.
    #[serde(default)]
    pub producer_id: Option<i64>,
    /// Its producer epoch.
    #[serde(default)]
    pub producer_epoch: Option<i16>,
    /// Last change, ms since the epoch.
    pub updated_ms: i64,
}

impl PartitionStateRecord {
    /// The first state record of a mirror partition: `state`, epoch 0, nothing copied yet.
    pub fn new(mirror: &str, topic: &str, partition: i32, state: MirrorPartitionState) -> Self {
        Self {
            mirror: mirror.to_string(),
            topic: topic.to_string(),
            partition,
            state,
            state_epoch: 0,
            last_mirrored_offset: -1,
            error_message: None,
            retry_attempt: 0,
            retryable: false,
            previous_state: None,
            segments: Vec::new(),
            source_epochs: Vec::new(),
            producer_id: None,
            producer_epoch: None,
            updated_ms: now_ms(),
        }
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
