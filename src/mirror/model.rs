//! What a mirror is, as stored in `__mirror_state` and held in memory: mirror definitions,
//! mirror topics with their desired state, and per-partition state records (KIP-1279 §2, §4).
//! Plain data; persistence lives in `store`, rules in `state_machine`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wire::mirror::MirrorPartitionState;

/// A cluster mirror: a named link from this destination cluster to one source cluster.
/// `Debug` shows secret configs as `[hidden]` ([`super::configs::is_sensitive`]).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Start position of topics started by the saved patterns (auto-discovery): the one
    /// given with the last `--start`.
    #[serde(default)]
    pub start_position: StartPosition,
    /// Topic exclude patterns saved by `--start --exclude`.
    #[serde(default)]
    pub exclude_patterns: Vec<String>,
}

impl std::fmt::Debug for MirrorDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorDefinition")
            .field("name", &self.name)
            .field("configs", &crate::secret::RedactedConfigs::new(&self.configs, super::configs::is_sensitive))
            .field("created_ms", &self.created_ms)
            .field("source_cluster_id", &self.source_cluster_id)
            .field("include_patterns", &self.include_patterns)
            .field("start_position", &self.start_position)
            .field("exclude_patterns", &self.exclude_patterns)
            .finish()
    }
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

/// Where a mirror partition starts copying when it is first started (issue 9, item 9; the
/// start positions of Cluster Linking and Redpanda shadowing). Offsets below the start are
/// never copied: within `mirror.fill.max.gap` they are placeholders, so offsets stay
/// identical; beyond it the partition is shifted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StartPosition {
    /// The source's log start (the default).
    #[default]
    Earliest,
    /// The source's high watermark at the first start: only new records.
    Latest,
    /// The first record with a timestamp at or after this one (ms since the epoch); the end
    /// when there is none (ListOffsets answers -1).
    Timestamp(i64),
}

impl StartPosition {
    /// Parses `earliest`, `latest` or a timestamp in ms since the epoch.
    ///
    /// # Errors
    /// A sentence naming the accepted forms.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "earliest" => Ok(Self::Earliest),
            "latest" => Ok(Self::Latest),
            t => t.parse::<i64>().ok().filter(|ms| *ms >= 0).map(Self::Timestamp).ok_or_else(|| {
                format!("start position `{s}` is not `earliest`, `latest` or a timestamp in ms since the epoch")
            }),
        }
    }
}

impl std::fmt::Display for StartPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Earliest => write!(f, "earliest"),
            Self::Latest => write!(f, "latest"),
            Self::Timestamp(ms) => write!(f, "{ms}"),
        }
    }
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
    /// Where its partitions start copying when first started.
    #[serde(default)]
    pub start_position: StartPosition,
    /// Its migration routing (issue 36, `docs/migration.md`); `None`: a plain mirror topic,
    /// read-only until `--stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<super::migration::routing::Migration>,
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

/// Most offset segments a mirror partition keeps (DESIGN §4.2). Every segment is part of the
/// partition's state record in `__mirror_state`, rewritten on every state change, so the list
/// must stay short whatever the source does: once a partition has this many segments, further
/// gaps are filled with placeholders whatever `mirror.fill.max.gap` says (see [`gap_action`]).
pub const MAX_OFFSET_SEGMENTS: usize = 64;

/// What the copy loop does with a gap of source offsets (control markers, aborted records,
/// compaction holes, a head removed by retention) before the next source batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapAction {
    /// Write placeholder batches for every offset of the gap (the partition stays identical
    /// to the source, up to its current shift).
    Fill,
    /// Start a new offset segment at the first source offset after the gap, replacing the
    /// last segment when nothing was written since it started (its destination start equals
    /// the destination log end), else appended.
    NewSegment {
        /// Whether the last segment is replaced (it holds no offset) rather than kept.
        replace_last: bool,
    },
}

/// Largest gap, in offsets, filled at [`MAX_OFFSET_SEGMENTS`] whatever `mirror.fill.max.gap`
/// says (about 0.35 s and 32 MB of placeholders, docs/performance.md).
/// A larger gap still starts a segment, so past the cap the list grows by at most one
/// segment per million source offsets.
pub const FORCED_FILL_MAX_GAP: i64 = 1_000_000;

/// The action for a gap of `gap` source offsets (`> 0`) when the destination log ends at
/// `destination_end` and the partition has `segments`:
///
/// - `gap <= fill_max_gap`: [`GapAction::Fill`];
/// - the last segment holds no offset yet (its destination start is `destination_end`, and
///   it is not the first, nor one that hides destination offsets of the segment before it):
///   a new segment replacing it — a run of gaps with no record between them leaves one
///   segment, not one per gap;
/// - fewer than [`MAX_OFFSET_SEGMENTS`] segments: a new segment;
/// - at the cap: [`GapAction::Fill`] up to [`FORCED_FILL_MAX_GAP`] offsets, a new segment
///   beyond.
///
/// So `mirror.fill.max.gap = 0` (never fill) cannot grow the list without bound on a source
/// whose every transaction leaves a one-offset marker.
pub fn gap_action(segments: &[OffsetSegment], destination_end: i64, gap: i64, fill_max_gap: i64) -> GapAction {
    if gap <= fill_max_gap {
        return GapAction::Fill;
    }
    // (Not a last segment that hides destination offsets before it, [`is_hidden`]: without
    // it they would be served again.)
    let replace_last = match segments {
        [.., prev, last] => {
            last.destination_start == destination_end
                && last.source_start - prev.source_start >= last.destination_start - prev.destination_start
        }
        _ => false,
    };
    if replace_last || segments.len() < MAX_OFFSET_SEGMENTS || gap > FORCED_FILL_MAX_GAP {
        GapAction::NewSegment { replace_last }
    } else {
        GapAction::Fill
    }
}

/// The destination offset at which a consumer resumes that would resume at source offset
/// `source` (a committed offset: the next record to read), through the offset `segments`
/// (DESIGN §4.2, ascending by `source_start`, destination offsets contiguous):
///
/// - no segments: `source` (the partition is identical);
/// - before the first segment (never copied): the first segment's destination start;
/// - inside segment *i*, which holds source offsets `[sᵢ, min(sᵢ₊₁, sᵢ + (dᵢ₊₁ − dᵢ)))`:
///   `source − shiftᵢ` (a segment with more destination offsets than source offsets ends
///   with hidden ones, [`is_hidden`]);
/// - inside the gap between segment *i*'s last offset and segment *i+1* (offsets the
///   destination does not hold): segment *i+1*'s destination start `dᵢ₊₁`, the first record
///   after the gap, never past it;
/// - in the last segment (open-ended): `source − shift`.
pub fn destination_offset(segments: &[OffsetSegment], source: i64) -> i64 {
    let Some(first) = segments.first() else { return source };
    if source < first.source_start {
        return first.destination_start;
    }
    for (i, seg) in segments.iter().enumerate() {
        let Some(next) = segments.get(i + 1) else { break };
        if source >= next.source_start {
            continue;
        }
        // `seg` holds `next.destination_start - seg.destination_start` offsets.
        let end = seg.source_start.saturating_add(next.destination_start - seg.destination_start);
        return if source < end { source - seg.shift() } else { next.destination_start };
    }
    let last = segments.last().unwrap_or(first);
    source - last.shift()
}

/// Whether an offset map presents offsets that differ from the destination's: some segment
/// has a shift (source offset ≠ destination offset). Such partitions are translated by the
/// proxy (`proxy::present`); all others are forwarded untouched.
pub fn is_shifted(segments: &[OffsetSegment]) -> bool {
    segments.iter().any(|s| s.shift() != 0)
}

/// The source offset of destination offset `destination` through the offset `segments`
/// (DESIGN §4.2), the inverse of [`destination_offset`] for the offsets the destination holds:
///
/// - a negative offset (Kafka's "none", e.g. -1 for an unknown last stable offset or no
///   committed offset) or no segments: `destination` unchanged;
/// - inside segment *i*, destination `[dᵢ, dᵢ₊₁)`: `destination + shiftᵢ`;
/// - exactly at a segment's destination start `dᵢ₊₁` (an end offset or high watermark
///   between two segments, or the first record of the later one): that segment's source
///   start `sᵢ₊₁` — the source offset of the next record, past the gap;
/// - a **hidden** offset (see [`is_hidden`]: destination offsets of segment *i* beyond the
///   source offsets it holds, `destination + shiftᵢ ≥ sᵢ₊₁`): `sᵢ₊₁`, the next record's;
/// - in the last (open-ended) segment, also past the destination log end (offsets written
///   after a failover continue the source's numbering): `destination + shift`;
/// - below the first segment's destination start (only when it is not 0): with the first
///   segment's shift.
///
/// So `source_offset(s, destination_offset(s, x)) == x` for every source offset `x` a
/// segment holds, and a source offset inside a gap maps back to the first source offset
/// after the gap. Monotonic.
pub fn source_offset(segments: &[OffsetSegment], destination: i64) -> i64 {
    if destination < 0 {
        return destination;
    }
    match locate(segments, destination) {
        Located::Identical => destination,
        Located::Held(source) => source,
        Located::Hidden { next_source } => next_source,
    }
}

/// Where a destination offset falls in an offset map.
enum Located {
    /// No segments: the offset itself.
    Identical,
    /// A destination offset of segment *i* (or beyond the last segment's start, or below the
    /// first's): the source offset with that segment's shift.
    Held(i64),
    /// A hidden destination offset (see [`is_hidden`]) before segment *i+1*, whose source
    /// start is `next_source`.
    Hidden { next_source: i64 },
}

fn locate(segments: &[OffsetSegment], destination: i64) -> Located {
    if segments.is_empty() {
        return Located::Identical;
    }
    // The last segment whose destination start is at or below `destination`: on equal
    // destination starts (an empty segment followed by its successor) the later one wins.
    let i = segments.iter().rposition(|s| s.destination_start <= destination).unwrap_or(0);
    let seg = &segments[i];
    let source = destination.saturating_add(seg.shift());
    match segments.get(i + 1) {
        Some(next) if source >= next.source_start && destination >= seg.destination_start => {
            Located::Hidden { next_source: next.source_start }
        }
        _ => Located::Held(source),
    }
}

/// Whether destination offset `destination` is **hidden** by the offset map: it lies in
/// segment *i* (`[dᵢ, dᵢ₊₁)`) beyond the source offsets the segment holds (`sᵢ₊₁ − sᵢ`), so
/// no source offset maps to it. The data plane makes such offsets when the destination's
/// transaction coordinator writes one of mirrorgate's transaction markers twice (Kafka's
/// `TransactionMarkerChannelManager` re-sends WriteTxnMarkers to a new partition leader that
/// may already hold the marker), or writes one on its own (a transaction timed out while
/// mirrorgate was away): the extra control batches stay in the destination log, the next
/// segment starts after them, and the proxy drops them from Fetch responses
/// (`proxy::present::fetch`). A direct reader skips them as it skips any control batch.
pub fn is_hidden(segments: &[OffsetSegment], destination: i64) -> bool {
    held_source_offset(segments, destination).is_none()
}

/// [`source_offset`] of destination offset `destination`, `None` when it is hidden
/// ([`is_hidden`]): one walk of the map for both answers (the proxy asks per record batch).
pub fn held_source_offset(segments: &[OffsetSegment], destination: i64) -> Option<i64> {
    if destination < 0 {
        return Some(destination);
    }
    match locate(segments, destination) {
        Located::Identical => Some(destination),
        Located::Held(source) => Some(source),
        Located::Hidden { .. } => None,
    }
}

/// The source offset of a destination END offset `end` (a high watermark, last stable
/// offset, log end, ListOffsets latest, OffsetForLeaderEpoch end offset, a committed
/// position): one past the source offset of the last record before it,
/// `source_offset(end − 1) + 1`, when `end` is above the first segment's destination start
/// and `end − 1` is not hidden ([`is_hidden`]; after a hidden offset the end is the next
/// record's source offset, `sᵢ₊₁`); [`source_offset`] otherwise (and for negative offsets).
///
/// It differs from [`source_offset`] only at a later segment's destination start `dᵢ₊₁`
/// whose previous segment holds records: there it is `sᵢ + (dᵢ₊₁ − dᵢ)` (the end of
/// segment *i*), not `sᵢ₊₁` (past the gap). The data plane starts a segment when it skips
/// a gap, before any record is written into it, and no batch covers the gap, so a consumer
/// at the end of segment *i* never advances over it: an end presented as `sᵢ₊₁` would never
/// be reached (Java `CompletedFetch` advances only through received batches, librdkafka
/// raises EOF only at the high watermark). The cost: while the destination holds no record
/// after a gap at its end, the presented end is below the source's (docs/protocol.md).
/// Monotonic, and never above [`source_offset`].
pub fn source_end_offset(segments: &[OffsetSegment], end: i64) -> i64 {
    match segments.first() {
        Some(first) if end > first.destination_start => match locate(segments, end - 1) {
            Located::Hidden { next_source } => next_source,
            Located::Held(source) => source.saturating_add(1),
            Located::Identical => end,
        },
        _ => source_offset(segments, end),
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
    /// Topic id (base64) of the destination topic this partition copies into, recorded when
    /// the copy loop first runs: a different id later means the destination topic was deleted
    /// and re-created behind the mirror.
    #[serde(default)]
    pub destination_topic_id: Option<String>,
    /// The source offset copying started from, when the start position was not the log start
    /// (offsets below it were never copied). `None`: from the source's log start.
    #[serde(default)]
    pub copy_start: Option<i64>,
    /// Every placeholder record the mirror wrote to this partition lies below this destination
    /// offset (`None`: none written). Recorded before the placeholders are appended, rounded up
    /// (to 100,000 offsets) for gaps after the head, so it never claims less than the log
    /// holds: `--describe` calls a partition's direct reads `same` only without it.
    #[serde(default)]
    pub placeholder_end: Option<i64>,
    /// The partition's copy loop has used destination transactions (real markers): recorded
    /// before its first AddPartitionsToTxn, so a restart asks the transaction coordinator what
    /// is open only for partitions that may have something open.
    #[serde(default)]
    pub transactions_used: bool,
    /// Group generation of the instance that wrote this record as the partition's owner
    /// (`None`: written by an admin request or a single instance). A record with an older
    /// generation than one already seen comes from a stale owner and is not applied
    /// (docs/operations.md, "Several instances").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_generation: Option<i32>,
    /// Group generation whose owner last finished aligning the partition's copy loop (its
    /// transactions of real markers complete, any marker written twice hidden, the log end
    /// checked). Written once per generation, by partitions that use transactions: other
    /// instances then end their read holds at a marker (`ControlPlane::hold_reads`) that an
    /// earlier owner, possibly themselves, left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aligned_generation: Option<i32>,
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
            destination_topic_id: None,
            copy_start: None,
            placeholder_end: None,
            transactions_used: false,
            owner_generation: None,
            aligned_generation: None,
            updated_ms: now_ms(),
        }
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(source_start: i64, destination_start: i64) -> OffsetSegment {
        OffsetSegment { source_start, destination_start }
    }

    /// Source 200..510 at destination 0..310, a source gap 510..2000, then source 2000.. at
    /// destination 310.. (shift 200, then 1690).
    const SHIFTED: [OffsetSegment; 2] = [
        OffsetSegment { source_start: 200, destination_start: 0 },
        OffsetSegment { source_start: 2000, destination_start: 310 },
    ];

    #[test]
    fn debug_of_a_mirror_definition_hides_its_secrets() {
        let secrets = ["pw-model-1", "client-secret-2", "ksp-3", "kp-4", "key-5", "tp-6"];
        let configs = [
            ("bootstrap.servers", "src:9092".to_string()),
            ("sasl.jaas.config", format!("PlainLoginModule required username=\"u\" password=\"{}\";", secrets[0])),
            ("sasl.oauthbearer.client.credentials.client.secret", secrets[1].to_string()),
            ("ssl.keystore.password", secrets[2].to_string()),
            ("ssl.key.password", secrets[3].to_string()),
            ("ssl.keystore.key", format!("-----BEGIN PRIVATE KEY----- {}", secrets[4])),
            ("ssl.truststore.password", secrets[5].to_string()),
        ];
        let def = MirrorDefinition {
            name: "m".into(),
            configs: configs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            created_ms: 1,
            source_cluster_id: None,
            include_patterns: Vec::new(),
            start_position: StartPosition::Earliest,
            exclude_patterns: Vec::new(),
        };
        let shown = format!("{def:?} {def:#?}");
        assert!(shown.contains("src:9092"), "{shown}");
        for s in secrets {
            assert!(!shown.contains(s), "`{s}` shown: {shown}");
        }
    }

    #[test]
    fn offsets_in_segments_keep_their_shift() {
        assert_eq!(destination_offset(&[], 42), 42);
        assert_eq!(destination_offset(&[seg(0, 0)], 42), 42);
        assert_eq!(destination_offset(&SHIFTED, 200), 0);
        assert_eq!(destination_offset(&SHIFTED, 509), 309, "last offset of the first segment");
        assert_eq!(destination_offset(&SHIFTED, 2000), 310);
        assert_eq!(destination_offset(&SHIFTED, 2600), 910, "open-ended last segment");
        assert_eq!(destination_offset(&SHIFTED, 100), 0, "before the first segment: its first destination offset");
    }

    #[test]
    fn offsets_inside_a_gap_map_to_the_next_segment_start() {
        assert_eq!(destination_offset(&SHIFTED, 510), 310, "first offset of the gap");
        assert_eq!(destination_offset(&SHIFTED, 511), 310, "inside the gap: never past the next records");
        assert_eq!(destination_offset(&SHIFTED, 1999), 310);
        // Three segments, the middle one empty of gaps on its left: 0..3 | gap 3..10 | 10..13 | gap 13..20 | 20..
        let three = [seg(0, 0), seg(10, 3), seg(20, 6)];
        assert_eq!(destination_offset(&three, 2), 2);
        assert_eq!(destination_offset(&three, 6), 3);
        assert_eq!(destination_offset(&three, 12), 5);
        assert_eq!(destination_offset(&three, 13), 6);
        assert_eq!(destination_offset(&three, 17), 6);
        assert_eq!(destination_offset(&three, 25), 11);
        // Monotonic: a later source offset never maps to an earlier destination offset.
        let mapped: Vec<i64> = (0..30).map(|o| destination_offset(&three, o)).collect();
        assert!(mapped.windows(2).all(|w| w[0] <= w[1]), "{mapped:?}");
    }

    #[test]
    fn destination_offsets_map_back_to_source_offsets() {
        assert_eq!(source_offset(&[], 42), 42, "no map: identical");
        assert_eq!(source_offset(&[seg(0, 0)], 42), 42);
        assert_eq!(source_offset(&SHIFTED, 0), 200, "a segment's destination start: its source start");
        assert_eq!(source_offset(&SHIFTED, 309), 509, "last offset of the first segment");
        assert_eq!(source_offset(&SHIFTED, 310), 2000, "the boundary: the next segment's source start");
        assert_eq!(source_offset(&SHIFTED, 910), 2600, "open-ended last segment");
        assert_eq!(source_offset(&SHIFTED, 5_000_000), 5_001_690, "past the log end (writes after a failover)");
        assert_eq!(source_offset(&SHIFTED, -1), -1, "Kafka's 'none' stays");
        assert_eq!(source_offset(&SHIFTED, i64::MIN), i64::MIN);
        assert_eq!(source_offset(&[seg(i64::MAX - 5, 0)], 10), i64::MAX, "saturates, never wraps");
        assert!(!is_shifted(&[]));
        assert!(!is_shifted(&[seg(0, 0)]));
        assert!(is_shifted(&SHIFTED));
        assert!(is_shifted(&[seg(0, 0), seg(500, 400)]), "identical head, shifted later");
    }

    #[test]
    fn source_and_destination_offsets_round_trip() {
        // 0..3 | gap 3..10 | 10..13 | gap 13..20 | 20.. ; and a shifted head with three segments.
        let maps: [&[OffsetSegment]; 4] = [
            &[seg(0, 0), seg(10, 3), seg(20, 6)],
            &SHIFTED,
            &[seg(3000, 0), seg(7000, 1500), seg(9000, 1600)],
            &[seg(100, 0)],
        ];
        for segs in maps {
            let held = |x: i64| {
                segs.iter().enumerate().any(|(i, s)| {
                    x >= s.source_start
                        && segs
                            .get(i + 1)
                            .is_none_or(|n| x < s.source_start + (n.destination_start - s.destination_start))
                })
            };
            let mut last = i64::MIN;
            for x in 0..12_000 {
                let d = destination_offset(segs, x);
                let back = source_offset(segs, d);
                if held(x) {
                    assert_eq!(back, x, "{segs:?}: source {x} -> destination {d} -> {back}");
                } else {
                    // In a gap (or before the first segment): the first source offset after it.
                    assert!(back >= x, "{segs:?}: gap offset {x} -> {d} -> {back}");
                    assert_eq!(destination_offset(segs, back), d, "{segs:?}: {x}");
                }
                assert!(back >= last, "monotonic");
                last = back;
            }
            // Every destination offset maps to a source offset that maps back to it.
            for d in 0..2_000 {
                assert_eq!(destination_offset(segs, source_offset(segs, d)), d, "{segs:?}: destination {d}");
            }
        }
    }

    #[test]
    fn an_empty_segment_boundary_maps_to_the_latest_source_start() {
        // Segment (10, 3) holds nothing (replaced in the data plane, but a reader may see the
        // list with it): destination 3 is the first record of the segment starting at 20.
        let segs = [seg(0, 0), seg(10, 3), seg(20, 3)];
        assert_eq!(source_offset(&segs, 3), 20);
        assert_eq!(source_offset(&segs, 2), 2);
        // High watermark of [3000, 0] with 2000 records: the source's log end.
        assert_eq!(source_offset(&[seg(3000, 0)], 2000), 5000);
    }

    #[test]
    fn end_offsets_stop_at_the_last_record_before_an_empty_segment() {
        // 200..510 at 0..310, then 2000.. at 310.. (empty while the log ends at 310).
        assert_eq!(source_end_offset(&SHIFTED, 310), 510, "the end of the first segment, not past the gap");
        assert_eq!(source_offset(&SHIFTED, 310), 2000, "a record offset: the next record");
        assert_eq!(source_end_offset(&SHIFTED, 311), 2001, "inside the second segment: the same");
        assert_eq!(source_end_offset(&SHIFTED, 309), 509);
        assert_eq!(source_end_offset(&SHIFTED, 0), 200, "at the first segment's start: start-style");
        assert_eq!(source_end_offset(&SHIFTED, -1), -1);
        assert_eq!(source_end_offset(&[], 42), 42);
        assert_eq!(source_end_offset(&[seg(3000, 0)], 2000), 5000);
        // An empty first segment followed by another at the same destination start.
        let empty_head = [seg(100, 0), seg(2000, 0)];
        assert_eq!(source_end_offset(&empty_head, 0), 2000);
        assert_eq!(source_end_offset(&empty_head, 5), 2005);
        // Three segments with an empty middle one: the end of the first.
        let segs = [seg(0, 0), seg(10, 3), seg(20, 3)];
        assert_eq!(source_end_offset(&segs, 3), 3);
        assert_eq!(source_end_offset(&segs, 4), 21);
        for segs in [&SHIFTED[..], &segs[..], &[seg(3000, 0), seg(7000, 1500), seg(9000, 1600)][..]] {
            let mapped: Vec<i64> = (0..2_000).map(|d| source_end_offset(segs, d)).collect();
            assert!(mapped.windows(2).all(|w| w[0] <= w[1]), "monotonic: {segs:?}");
            for d in 0..2_000 {
                assert!(source_end_offset(segs, d) <= source_offset(segs, d), "{segs:?}: {d}");
                // A consumer fetching at the end offset is sent to the end itself.
                assert_eq!(destination_offset(segs, source_end_offset(segs, d)), d, "{segs:?}: {d}");
            }
        }
    }

    #[test]
    fn destination_offsets_beyond_a_segments_source_offsets_are_hidden() {
        // Source 0..=5 at destination 0..=5 (a marker at 5), the coordinator wrote that marker
        // twice more (destination 6 and 7), then source 6.. at destination 8.. (shift -2).
        let segs = [seg(0, 0), seg(6, 8)];
        assert!(is_shifted(&segs));
        for d in 0..=5 {
            assert!(!is_hidden(&segs, d));
            assert_eq!(source_offset(&segs, d), d);
        }
        assert!(is_hidden(&segs, 6) && is_hidden(&segs, 7));
        assert!(!is_hidden(&segs, 8) && !is_hidden(&segs, -1));
        assert_eq!(source_offset(&segs, 6), 6, "a hidden offset: the next record's source offset");
        assert_eq!(source_offset(&segs, 7), 6);
        assert_eq!(source_offset(&segs, 8), 6);
        assert_eq!(source_offset(&segs, 20), 18, "open-ended last segment, dest ahead of source");
        assert_eq!(destination_offset(&segs, 5), 5);
        assert_eq!(destination_offset(&segs, 6), 8, "the next record skips the hidden offsets");
        assert_eq!(destination_offset(&segs, 18), 20);
        // End offsets: a log end right after the hidden ones is the next record's offset, so a
        // consumer there is at the end on the source too.
        assert_eq!(source_end_offset(&segs, 6), 6, "log end after the first marker");
        assert_eq!(source_end_offset(&segs, 7), 6);
        assert_eq!(source_end_offset(&segs, 8), 6, "log end after the hidden markers");
        assert_eq!(source_end_offset(&segs, 9), 7);
        assert_eq!(destination_offset(&segs, source_end_offset(&segs, 8)), 8);
        // Monotonic, and every offset that is not hidden round-trips.
        let (mut last, mut last_end) = (i64::MIN, i64::MIN);
        for d in 0..100 {
            let (s, e) = (source_offset(&segs, d), source_end_offset(&segs, d));
            assert!(s >= last && e >= last_end && e <= s, "{d}: {s} {e}");
            (last, last_end) = (s, e);
            if !is_hidden(&segs, d) {
                assert_eq!(destination_offset(&segs, s), d, "{d}");
            }
        }
        // A segment that hides offsets is never replaced by the next gap's.
        assert_eq!(gap_action(&[seg(0, 0), seg(6, 8)], 8, 10, 0), GapAction::NewSegment { replace_last: false });
        assert_eq!(gap_action(&[seg(0, 0), seg(16, 8)], 8, 10, 0), GapAction::NewSegment { replace_last: true });
        // A hidden tail after a shifted head, then a gap segment after it.
        let segs = [seg(100, 0), seg(151, 52), seg(900, 60)];
        assert!(is_hidden(&segs, 51));
        assert_eq!(source_offset(&segs, 50), 150);
        assert_eq!(source_offset(&segs, 51), 151);
        assert_eq!(source_offset(&segs, 59), 158);
        assert!(!is_hidden(&segs, 59));
        assert_eq!(source_offset(&segs, 60), 900);
        assert_eq!(source_end_offset(&segs, 52), 151);
        assert_eq!(source_end_offset(&segs, 60), 159, "the end of the middle segment, not past the gap");
    }

    #[test]
    fn gaps_fill_within_the_bound_and_segments_stay_bounded() {
        assert_eq!(gap_action(&[seg(0, 0)], 10, 5, 5), GapAction::Fill);
        assert_eq!(gap_action(&[seg(0, 0)], 10, 6, 5), GapAction::NewSegment { replace_last: false });
        // mirror.fill.max.gap = 0: every gap starts a segment, until the cap.
        let mut segs = vec![seg(0, 0)];
        let (mut src, mut dst) = (0i64, 0i64);
        for _ in 0..10_000 {
            // 3 records, then a 1-offset commit marker.
            src += 3;
            dst += 3;
            match gap_action(&segs, dst, 1, 0) {
                GapAction::Fill => dst += 1,
                GapAction::NewSegment { replace_last } => {
                    if replace_last {
                        segs.pop();
                    }
                    segs.push(seg(src + 1, dst));
                }
            }
            src += 1;
        }
        assert_eq!(segs.len(), MAX_OFFSET_SEGMENTS, "the segment list is capped");
        // Gaps with nothing between them replace the empty last segment, even at the cap.
        assert_eq!(gap_action(&segs, dst, 7, 0), GapAction::Fill, "at the cap with records since: fill");
        assert_eq!(
            gap_action(&segs, dst, FORCED_FILL_MAX_GAP + 1, 0),
            GapAction::NewSegment { replace_last: false },
            "a gap too large to fill still starts a segment"
        );
        let empty_last = [seg(0, 0), seg(10, 3)];
        assert_eq!(gap_action(&empty_last, 3, 7, 0), GapAction::NewSegment { replace_last: true });
        assert_eq!(
            gap_action(&[seg(100, 0)], 0, 7, 0),
            GapAction::NewSegment { replace_last: false },
            "the first segment is never replaced"
        );
    }
}
