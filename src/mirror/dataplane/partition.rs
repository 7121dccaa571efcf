//! One mirror partition's copy loop (DESIGN §4): align, then fetch from the source at
//! READ_COMMITTED and append each data batch to the destination with its header patched
//! (producer id / epoch / sequence = destination offset, transactional bit cleared, CRC
//! recomputed), filling every source offset that carries no committed data (markers, aborted
//! records, compaction holes, a removed head) with placeholder batches while the gap is
//! within `mirror.fill.max.gap`, or starting a new offset segment beyond it.
//!
//! Every append is checked: a base offset other than the expected one fails the partition
//! with both offsets named. The destination log end is the checkpoint: after any ambiguous
//! outcome or a restart the loop re-reads it and continues from the source offset it maps to.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use crate::client::cluster::{ClusterClient, ClusterError, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::mirror::control::ControlPlane;
use crate::mirror::model::{OffsetSegment, PartitionStateRecord, StartPosition};
use crate::wire::batch::{Batch, BatchIter};
use crate::wire::mirror::MirrorPartitionState;
use crate::wire::records::{self, RecordsError};
use crate::wire::split::{self, Piece, RunHeader};

use super::dest_topic;
use super::errors::{self, ErrorClass};
use super::log_end;
use super::markers;
use super::mux::FetchMux;
use super::pipeline::{Pipeline, Run, Sent};
use super::produce::ProduceMux;
use super::source::{self, codes, FetchSettings};
use super::Progress;

/// When this process's data plane started its first copy loop.
static PROCESS_START: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
/// How long after the process start a resuming loop waits before reading the destination
/// log end (see [`PartitionTask::run`]).
const RESTART_SETTLE: Duration = Duration::from_secs(3);
/// How long a stop waits for the copy to end a destination transaction of ours that is open.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// How a partition loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Stopped on request with nothing in flight.
    Stopped,
    /// Failed; `retryable` says whether an automatic retry makes sense.
    Failed {
        /// What went wrong, naming offsets where they matter.
        message: String,
        /// Whether a retry may succeed.
        retryable: bool,
    },
}

pub(super) fn fail(message: impl Into<String>, retryable: bool) -> Outcome {
    Outcome::Failed { message: message.into(), retryable }
}

/// Everything one partition loop needs.
pub struct PartitionTask {
    /// Control plane (state records, transitions, progress).
    pub control: Arc<ControlPlane>,
    /// Source cluster client of the mirror.
    pub source: ClusterClient,
    /// Destination cluster client.
    pub dest: ClusterClient,
    /// The mirror's per-source-broker Fetch batching.
    pub fetcher: Arc<FetchMux>,
    /// The per-destination-broker Produce batching.
    pub writer: Arc<ProduceMux>,
    /// Mirror name.
    pub mirror: String,
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Fetch settings.
    pub fetch: FetchSettings,
    /// Largest gap filled with placeholders, offsets.
    pub fill_max_gap: i64,
    /// `mirror.transaction.markers = real`: source markers and aborted records are written as
    /// real ones (docs/real-markers.md), not as placeholders.
    pub real_markers: bool,
    /// Set when the destination refused what real markers need (the transactional ids, or
    /// DescribeProducers on the topic): the loop falls back to placeholders, logged once.
    pub markers_refused: std::sync::atomic::AtomicBool,
    /// `mirror.coalesce.max.bytes`: largest batch built by merging consecutive small
    /// uncompressed source batches, bytes (0 = off).
    pub coalesce_max_bytes: usize,
    /// Set when the destination refused a merged batch: the loop appends batches as they are.
    pub coalesce_refused: std::sync::atomic::AtomicBool,
    /// `mirror.coalesce.recompress`: small compressed source batches of one codec are merged
    /// too, their records compressed again with that codec.
    pub coalesce_recompress: bool,
    /// Per-installation nonce in placeholder keys.
    pub nonce: u64,
    /// Destination request timeout (the wait after an ambiguous append).
    pub request_timeout: Duration,
}

/// Destination append position of a partition: where the next append lands, counting the
/// appends in flight (`inflight`).
pub(super) struct Writer<'a> {
    pub(super) producer_id: i64,
    pub(super) producer_epoch: i16,
    /// Next destination offset.
    pub(super) dest_next: i64,
    /// Source offset − destination offset in the current segment.
    pub(super) shift: i64,
    /// Sequence of the data producer's next batch. Contiguous per producer: it equals the
    /// destination offset (mod 2^31) while the data producer writes every offset, and falls
    /// behind it by the offsets that real markers and aborted records take
    /// (docs/real-markers.md, T5).
    pub(super) next_seq: i32,
    /// Appends submitted and not answered yet ([`super::pipeline`]).
    pub(super) inflight: &'a mut Pipeline,
    /// Source batches waiting to be merged into one append.
    pub(super) run: Run,
    /// Largest merged batch, bytes: `mirror.coalesce.max.bytes`, below the destination
    /// topic's `max.message.bytes`.
    pub(super) coalesce_max: usize,
    /// `mirror.coalesce.recompress`: compressed batches are merged too (recompressed).
    pub(super) recompress: bool,
    /// Max timestamp of the data producer's last acknowledged append of this alignment, ms:
    /// what the broker keeps as the producer's last timestamp (None: not known, e.g. after
    /// placeholders or split runs, appended with [`PartitionTask::append`]).
    pub(super) state_ts: Option<i64>,
    /// The destination topic's `max.message.bytes`, when read.
    pub(super) max_message_bytes: Option<usize>,
    /// The destination leader's `producer.id.expiration.ms` (None: not known).
    pub(super) producer_expiry_ms: Option<i64>,
}

impl Writer<'_> {
    /// Whether an append of a batch whose max timestamp is `max_ts` may join others in
    /// flight: the broker surely holds this producer's state. Kafka keeps the state until
    /// `producer.id.expiration.ms` after the max timestamp of the producer's last batch
    /// (`ProducerStateEntry.lastTimestamp`, `ProducerStateManager.isProducerExpired`, checked
    /// every `producer.id.expiration.check.interval.ms`), so both the last acknowledged batch
    /// and this one must be newer than half of it (the other half is the margin), now.
    pub(super) fn may_pipeline(&self, max_ts: i64) -> bool {
        let Some(expiry) = self.producer_expiry_ms else { return false };
        let fresh_from = crate::mirror::model::now_ms().saturating_sub(expiry / 2);
        self.state_ts.is_some_and(|t| t >= fresh_from) && max_ts >= fresh_from
    }

    /// Moves past `count` offsets appended by the data producer.
    pub(super) fn appended(&mut self, count: i64) {
        self.dest_next += count;
        self.next_seq = next_sequence(self.next_seq, count);
    }
}

/// `seq` advanced by `count`, wrapping from `i32::MAX` to 0 as Kafka's producer does
/// (`DefaultRecordBatch.incrementSequence`).
pub(super) fn next_sequence(seq: i32, count: i64) -> i32 {
    ((i64::from(seq) + count) & 0x7fff_ffff) as i32
}

/// Test hook: with `MIRRORGATE_FAILPOINT=mid-batch:N` the process exits (code 86, no cleanup,
/// as after a kill -9) right after the Nth acknowledged append that leaves a source batch or
/// a filled gap partly written (a run or hole of a split compacted batch, or a placeholder
/// chunk, that is not the last of its batch), so that tests can restart mirrorgate at
/// exactly the points where the copy must resume inside a batch.
pub(super) fn failpoint_mid_batch() {
    failpoint("mid-batch");
}

/// Test hook: with `MIRRORGATE_FAILPOINT=<name>:N` the process exits (code 86, no cleanup, as
/// after a kill -9) the Nth time the data plane passes the failpoint `name`: `mid-batch` (see
/// [`failpoint_mid_batch`]), `slot-added` (after a destination transaction for aborted records
/// was opened on the partition, before its first record) or `slot-append` (after an
/// acknowledged append of aborted records into a destination transaction that is still open,
/// `markers::Txns::write_aborted`).
pub(super) fn failpoint(name: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static LIMIT: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static SEEN: AtomicU64 = AtomicU64::new(0);
    let limit = LIMIT.get_or_init(|| {
        let v = std::env::var("MIRRORGATE_FAILPOINT").ok()?;
        let (n, count) = v.split_once(':')?;
        Some((n.to_string(), count.parse().ok()?))
    });
    if let Some((n, count)) = limit {
        if n == name && SEEN.fetch_add(1, Ordering::SeqCst) + 1 >= *count {
            eprintln!("MIRRORGATE_FAILPOINT {n}:{count} reached: exiting");
            std::process::exit(86);
        }
    }
}

/// Test hook: with `MIRRORGATE_FAILPOINT=loop-panic:N` the Nth copy loop this process starts
/// panics (that one only), as a bug would: the data plane counts a dead copy loop
/// (`mirrorgate_mirror_dead_tasks_total`, KIP-1279 DeadThreadCount), the partition goes FAILED
/// (retryable) and a new loop takes over after the retry backoff.
fn failpoint_loop_panic() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static NTH: OnceLock<Option<u64>> = OnceLock::new();
    static STARTED: AtomicU64 = AtomicU64::new(0);
    let nth = NTH.get_or_init(|| {
        let v = std::env::var("MIRRORGATE_FAILPOINT").ok()?;
        v.strip_prefix("loop-panic:")?.parse().ok()
    });
    if let Some(nth) = nth {
        if STARTED.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
            panic!("MIRRORGATE_FAILPOINT loop-panic:{nth} reached");
        }
    }
}

pub(super) fn sequence_for(dest_offset: i64) -> i32 {
    (dest_offset & 0x7fff_ffff) as i32
}

impl PartitionTask {
    pub(super) fn record(&self) -> Option<PartitionStateRecord> {
        self.control.partition(&self.topic, self.partition)
    }

    /// Runs until stopped or failed.
    pub async fn run(self, stop: CancellationToken) -> Outcome {
        failpoint_loop_panic();
        let mut stall = errors::StallGuard::default();

        // Right after this process started, a Produce of the previous process (killed) may
        // still sit in the destination broker's request queue, not yet appended: give it a
        // moment before the first read of the log end. (Loops restarted within a process
        // always finish their own append first.)
        if self.record().is_some_and(|r| !r.segments.is_empty()) {
            let settle_until = *PROCESS_START.get_or_init(tokio::time::Instant::now) + RESTART_SETTLE;
            tokio::select! {
                _ = stop.cancelled() => return Outcome::Stopped,
                _ = tokio::time::sleep_until(settle_until) => {}
            }
        }
        let mut inflight = Pipeline::default();
        loop {
            let result = self.run_once(&stop, &mut inflight).await;
            // A loop never leaves appends in flight behind it: a restarted loop, or the
            // transition after a stop, must see every one of them answered.
            let (ambiguous, misplaced) = inflight.quiesce_after_failure().await;
            let result = match (result, misplaced) {
                (_, Some((expected, base))) => Ok(self.misplaced(expected, base, "the loop left")),
                (Err(mut r), None) => {
                    r.after_ambiguous_append |= ambiguous;
                    Err(r)
                }
                (ok, None) => ok,
            };
            match result {
                Ok(o) => {
                    // (Reads held at a marker stay held when the loop ends, failed or paused:
                    // its log end was not checked, and nothing is copied after it meanwhile.
                    // A transition to STOPPED releases them, `ControlPlane::transition`.)
                    self.control.set_retrying(&self.topic, self.partition, None);
                    return o;
                }
                Err(Retry { why, after_ambiguous_append }) => {
                    tracing::info!(mirror = %self.mirror, topic = %self.topic, partition = self.partition, %why, "re-aligning mirror partition");
                    let position = self.control.progress(&self.topic, self.partition).map_or(-1, |g| g.next_source);
                    if let Some(stalled) = stall.retried_at(position, tokio::time::Instant::now()) {
                        self.control.set_retrying(&self.topic, self.partition, None);
                        return fail(
                            format!(
                                "no progress at source offset {position} for {} s ({} attempts); last error: {why}",
                                stalled.as_secs(),
                                errors::STALL_ATTEMPTS
                            ),
                            true,
                        );
                    }
                    self.control.set_retrying(&self.topic, self.partition, Some(why));
                    // After an append whose outcome is unknown, wait until any request in
                    // flight has timed out on the broker before re-reading the log end
                    // (DESIGN §4.6); the fetched records are dropped by now, so the wait
                    // holds no in-flight budget.
                    let wait = if after_ambiguous_append { self.request_timeout } else { self.fetch.backoff };
                    tokio::select! {
                        _ = stop.cancelled() => return Outcome::Stopped,
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    async fn run_once(&self, stop: &CancellationToken, inflight: &mut Pipeline) -> Result<Outcome, Retry> {
        let (topic, p) = (self.topic.as_str(), self.partition);
        let rec = self.record().ok_or_else(|| Retry::new("partition state missing".into()))?;

        // Producer id for this partition (DESIGN §4.5), created once and kept in the state.
        let (producer_id, producer_epoch) = match (rec.producer_id, rec.producer_epoch) {
            (Some(id), Some(e)) => (id, e),
            _ => {
                let (id, e) =
                    init_producer_id(&self.dest).await.map_err(|e| Retry::new(format!("InitProducerId: {e}")))?;
                self.control
                    .update_partition(topic, p, |r| {
                        r.producer_id = Some(id);
                        r.producer_epoch = Some(e);
                    })
                    .await
                    .map_err(|e| Retry::new(e.to_string()))?;
                (id, e)
            }
        };

        // Still the destination topic this partition copies into? (Deleted, or deleted and
        // re-created, directly on the brokers: a new topic id.)
        let dest_id = match dest_topic::topic_id(&self.dest, topic).await {
            Ok(Some(id)) => id,
            Ok(None) => {
                return Err(Retry::new(format!(
                    "destination topic {topic} does not exist (deleted behind the mirror?); re-create it, or stop the mirror topic"
                )))
            }
            Err(e) => return Err(Retry::new(format!("destination metadata of {topic}: {e}"))),
        };
        // Where the destination really ends: nothing of ours above its high watermark.
        let dest_end = match log_end::settled_log_end(&self.dest, topic, p, stop, self.request_timeout).await {
            Ok(end) => end,
            Err(log_end::Unsettled::Stopped) => return Ok(Outcome::Stopped),
            Err(e) => return Err(Retry::new(format!("destination {topic}-{p}: {e}"))),
        };
        let src_start = self.source.list_offsets(topic, p, EARLIEST_TIMESTAMP).await.map_err(retry)?;

        let recreated = match &rec.destination_topic_id {
            Some(old) if *old != dest_id => {
                if dest_end != 0 {
                    return Ok(fail(
                        format!("destination topic {topic} was deleted and re-created behind the mirror (topic id {old} -> {dest_id}) and partition {p} holds {dest_end} offsets written outside the mirror; delete the topic (or its records) to re-seed it, or stop the mirror topic"),
                        false,
                    ));
                }
                tracing::warn!(mirror = %self.mirror, topic, partition = p, old_topic_id = %old, topic_id = %dest_id, "destination topic was re-created behind the mirror and is empty: re-seeding from the source");
                if let Err(e) = dest_topic::set_mirroring_configs(&self.dest, topic).await {
                    return Err(Retry::new(format!(
                        "cannot set the mirror's configs on the re-created destination topic {topic}: {e}"
                    )));
                }
                true
            }
            _ => false,
        };

        // Re-seed: a failback onto an empty destination partition (the operator deleted and
        // re-created the topic after the failover), or a re-created empty destination topic,
        // starts over as a new mirror partition.
        let mut rec = rec;
        let failback_onto_empty = rec.state == MirrorPartitionState::LogAlignment
            && rec.previous_state == Some(MirrorPartitionState::Stopped)
            && dest_end == 0
            && !rec.segments.is_empty();
        if failback_onto_empty || recreated {
            tracing::info!(mirror = %self.mirror, topic, partition = p, "destination partition is empty: re-seeding from the source");
            let id = dest_id.clone();
            rec = self
                .control
                .update_partition(topic, p, |r| {
                    r.segments.clear();
                    r.source_epochs.clear();
                    r.last_mirrored_offset = -1;
                    r.placeholder_end = None;
                    r.destination_topic_id = Some(id);
                })
                .await
                .map_err(|e| Retry::new(e.to_string()))?;
        } else if rec.destination_topic_id.is_none() {
            let id = dest_id.clone();
            rec = self
                .control
                .update_partition(topic, p, |r| r.destination_topic_id = Some(id))
                .await
                .map_err(|e| Retry::new(e.to_string()))?;
        }
        // The first segment: identical (delta 0) when the source head can be filled, else
        // shifted to start where the source starts (DESIGN §4.2). Persisted before the first append.
        let mut segments = rec.segments.clone();
        let mut copy_start = rec.copy_start;
        // The first source batch of a mirror created in this run (offsets below it were never
        // going to be copied; see `due_from` below).
        let mut created_at: Option<i64> = None;
        if segments.is_empty() {
            if dest_end != 0 {
                return Ok(fail(
                    format!("destination partition {topic}-{p} already holds {dest_end} offsets written outside the mirror; delete and re-create the topic, or stop the mirror"),
                    false,
                ));
            }
            // Where copying starts (`--start-position`): the log start, the end, or the first
            // record at or after a timestamp (the end when there is none).
            let position = self.control.start_position(topic);
            let start = match position {
                StartPosition::Earliest => src_start,
                StartPosition::Latest => self.source.list_offsets(topic, p, LATEST_TIMESTAMP).await.map_err(retry)?,
                StartPosition::Timestamp(ms) => match self.source.list_offsets(topic, p, ms).await.map_err(retry)? {
                    -1 => self.source.list_offsets(topic, p, LATEST_TIMESTAMP).await.map_err(retry)?,
                    offset => offset,
                },
            }
            .max(src_start);
            // The first source batch still on disk may start below the start (DeleteRecords,
            // retention and a timestamp inside a batch keep whole batches): the mirror starts at
            // that batch, and follows the log start with DeleteRecords once it is copied.
            let first_base = self.first_batch_base(start).await?;
            let first = if first_base <= self.fill_max_gap {
                OffsetSegment { source_start: 0, destination_start: 0 }
            } else {
                OffsetSegment { source_start: first_base, destination_start: 0 }
            };
            let from = (position != StartPosition::Earliest).then_some(first_base);
            if from.is_some() {
                tracing::info!(mirror = %self.mirror, topic, partition = p, %position, source_offset = first_base, "start position: copying from this source offset; offsets below it are never copied");
            }
            self.control
                .update_partition(topic, p, |r| {
                    r.segments = vec![first];
                    r.copy_start = from;
                    // (`Some`: written by a version that records placeholders; see below.)
                    r.placeholder_end = Some(0);
                })
                .await
                .map_err(|e| Retry::new(e.to_string()))?;
            copy_start = from;
            created_at = Some(first_base);
            segments = vec![first];
        }
        let seg = *segments.last().expect("at least one segment");
        if dest_end < seg.destination_start {
            return Ok(fail(
                format!("destination log end {dest_end} of {topic}-{p} is below the offset map's segment start {}; the destination lost data", seg.destination_start),
                false,
            ));
        }
        let (coalesce_max, max_message_bytes, producer_expiry_ms) = self.write_limits(topic, p).await;
        let mut w = Writer {
            producer_id,
            producer_epoch,
            dest_next: dest_end,
            shift: seg.shift(),
            next_seq: sequence_for(dest_end),
            inflight,
            run: Run::default(),
            coalesce_max,
            recompress: self.coalesce_recompress,
            state_ts: None,
            max_message_bytes,
            producer_expiry_ms,
        };
        // A partition copied by a version that did not record where its placeholders end
        // (it wrote markers as placeholders): everything below its end may be one.
        if rec.placeholder_end.is_none() && dest_end > 0 {
            self.control
                .update_partition(topic, p, |r| r.placeholder_end = Some(dest_end))
                .await
                .map_err(|e| Retry::new(e.to_string()))?;
        }
        let mut txns = markers::Txns::default();
        // Open transactions of ours are found and finished whatever the mode now (a switch to
        // placeholders, or a refusal, must not leave one to the coordinator's timeout).
        if let Some(o) = txns.recover(self, &w, &segments).await? {
            return Ok(o);
        }
        let real_markers =
            (self.real_markers && !self.markers_refused.load(std::sync::atomic::Ordering::Relaxed)) || txns.any_open();
        markers::resume_sequence(self, &mut w, real_markers).await?;
        // The log end is read again: the producer state just read must belong to it. Anything
        // that landed since the first read — a marker of ours that was still being written
        // (its transaction completing), or an append another writer had on the wire (an
        // instance that lost the partition, whose request TCP delivered after a network cut
        // healed) — would otherwise put the next sequence after records the offset count
        // does not know of, and the next append would land that many offsets late.
        match log_end::settled_log_end(&self.dest, topic, p, stop, self.request_timeout).await {
            Ok(end) if end == dest_end => {}
            Ok(end) => {
                return Err(Retry::new(format!(
                    "destination {topic}-{p} log end moved from {dest_end} to {end} while the partition was aligned (a marker of ours completing, or an append another writer had in flight)"
                )))
            }
            Err(log_end::Unsettled::Stopped) => return Ok(Outcome::Stopped),
            Err(e) => return Err(Retry::new(format!("destination {topic}-{p}: {e}"))),
        }
        // The log end is checked: reads held at a marker of ours end (`ControlPlane::hold_reads`),
        // here and, told through the state topic, on instances that copied it before.
        self.control.release_reads(topic, p);
        self.control.note_aligned(topic, p).await.map_err(|e| Retry::new(e.message))?;
        let mut next_src = dest_end + w.shift;
        // Failback (start after STOPPED): the destination must end where mirroring stopped;
        // records written after the failover are reported, never kept or overwritten silently.
        if rec.state == MirrorPartitionState::LogAlignment
            && rec.previous_state == Some(MirrorPartitionState::Stopped)
            && rec.last_mirrored_offset >= 0
            && next_src != rec.last_mirrored_offset + 1
        {
            let message = if next_src > rec.last_mirrored_offset + 1 {
                format!(
                    "destination {topic}-{p} ends at offset {dest_end} (source offset {next_src}) but mirroring stopped after source offset {}: {} offset(s) were written on the destination after the failover; delete the destination topic (or its records) to re-seed it",
                    rec.last_mirrored_offset,
                    next_src - rec.last_mirrored_offset - 1
                )
            } else {
                format!(
                    "destination {topic}-{p} ends at offset {dest_end} (source offset {next_src}) but mirroring stopped after source offset {}: the destination lost records after the failover; delete the destination topic to re-seed it",
                    rec.last_mirrored_offset
                )
            };
            return Ok(fail(message, false));
        }

        if rec.state == MirrorPartitionState::LogAlignment {
            self.control
                .transition_owned(topic, p, MirrorPartitionState::Mirroring, None)
                .await
                .map_err(|e| Retry::new(e.to_string()))?;
        }
        tracing::info!(mirror = %self.mirror, topic, partition = p, source_offset = next_src, destination_offset = dest_end, shift = w.shift, "mirroring partition");
        // Aligned: whatever made the loop retry is behind it.
        self.control.set_retrying(topic, p, None);

        // Below a start position nothing is copied: the offsets before it are a gap, filled
        // (or re-segmented) now, so the destination ends where the source does even before a
        // new record arrives. Placeholders of a skipped head carry timestamp 0: a lookup by
        // timestamp on the destination never lands on them.
        if let Some(start) = copy_start.filter(|s| *s > next_src) {
            if let Some(o) = self.gap(&mut w, next_src, start, 0).await? {
                return Ok(o);
            }
            next_src = start;
        }
        // Nothing below the copy start is readable data: the destination log start moves up to
        // it, as for a removed head (asked once per run; DeleteRecords is idempotent).
        if let Some(start) = copy_start {
            let target = self.destination_offset_of(start);
            if target > 0 && target <= w.dest_next {
                if let Err(e) = delete_records(&self.dest, topic, p, target).await {
                    tracing::warn!(topic, partition = p, error = %e, destination_offset = target, "cannot move the destination log start to the copy start; the placeholders below it stay (a topic whose cleanup.policy has no delete)");
                }
            }
        }
        let mut fetch_at = next_src;
        let aligned_at = next_src;
        let mut retries_reset = false;
        // LastFetchedEpoch: the source epoch of the last copied batch, from the persisted
        // history (an empty history means nothing was copied yet, or a state from before it
        // was kept: the first batch starts it).
        let mut epochs = rec.source_epochs.clone();
        let mut last_epoch = if next_src > 0 { epochs.last().map_or(-1, |e| e.0) } else { -1 };
        let mut last_ts: i64 = 0;
        let mut dest_log_start_followed = -1;
        let mut stop_grace: Option<tokio::time::Instant> = None;
        let progress_key = (topic.to_string(), p);
        // Broken builds only (src/sabotage.rs): both compile to `false` without the feature.
        let mut resume_late = crate::sabotage::active("resume-late") && next_src > 0;
        let mut append_twice = crate::sabotage::active("append-twice");
        'copy: loop {
            // A stop waits (up to STOP_GRACE) while a destination transaction of ours is open:
            // the next fetch holds its marker, and the copy ends it instead of leaving it to the
            // coordinator's timeout, which would put an ABORT at the log end.
            let open = txns.any_open();
            if stop.is_cancelled() && (!open || stop_grace.is_some_and(|t| tokio::time::Instant::now() >= t)) {
                if open {
                    tracing::warn!(mirror = %self.mirror, topic, partition = p, "stopping with a destination transaction of aborted records still open; the next start resumes it (it is aborted by the destination at its timeout otherwise)");
                }
                return Ok(Outcome::Stopped);
            }
            let grace_until = *stop_grace.get_or_insert_with(|| tokio::time::Instant::now() + STOP_GRACE);
            let stopped = async {
                stop.cancelled().await;
                if open {
                    tokio::time::sleep_until(grace_until).await;
                }
            };
            if !stop.is_cancelled() {
                stop_grace = None;
            }
            // The next Fetch goes out while the appends of the last chunk are in flight; their
            // answers are taken as they come.
            let fetch = self.fetcher.fetch(topic, p, fetch_at, last_epoch);
            tokio::pin!(fetch, stopped);
            let mut chunk = loop {
                tokio::select! {
                    biased;
                    answered = w.inflight.next(), if !w.inflight.is_empty() => {
                        if let Some((sent, answer)) = answered {
                            if let Some(o) = self.settled(&mut w, sent, answer).await? {
                                return Ok(o);
                            }
                        }
                    }
                    _ = &mut stopped => continue 'copy,
                    c = &mut fetch => break c.map_err(|e| Retry::new(format!("fetch: {e}")))?,
                }
            };
            match chunk.error_code {
                0 => {}
                codes::OFFSET_OUT_OF_RANGE => {
                    // Source retention passed the mirror: fill or re-segment up to the new
                    // log start; never jump to the latest offset.
                    let start = self.source.list_offsets(topic, p, EARLIEST_TIMESTAMP).await.map_err(retry)?;
                    if start > next_src {
                        // The batch holding `start` may begin below it; the gap up to that
                        // batch is filled (or re-segmented) when it arrives. Only offsets the
                        // mirror was due to copy are lost: from the copy start, the first source
                        // batch it saw, or (neither known) the source log start of this run; a
                        // head below that (a head fill fetching at 0) was never to be copied.
                        let due_from = copy_start
                            .or(epochs.first().map(|e| e.1))
                            .or(created_at)
                            .unwrap_or(src_start)
                            .max(next_src);
                        if start > due_from {
                            tracing::warn!(mirror = %self.mirror, topic, partition = p, lost_from = due_from, lost_to = start, "source retention removed offsets the mirror had not copied");
                            self.control.count_lost_offsets(start - due_from);
                        } else {
                            tracing::debug!(mirror = %self.mirror, topic, partition = p, from = next_src, source_log_start = start, "filling a source head below the source log start");
                        }
                        fetch_at = start;
                        continue;
                    }
                    return Err(Retry::new(format!("OFFSET_OUT_OF_RANGE at {next_src} (source log start {start})")));
                }
                codes::NOT_LEADER_OR_FOLLOWER
                | codes::FENCED_LEADER_EPOCH
                | codes::UNKNOWN_LEADER_EPOCH
                | codes::UNKNOWN_TOPIC_OR_PARTITION => {
                    let _ = self.source.refresh_metadata(Some(&[topic])).await;
                    return Err(Retry::new(format!("source error {} on fetch", chunk.error_code)));
                }
                other => {
                    let message = errors::refusal("source", other, None, topic, p, fetch_at);
                    return match errors::classify(other) {
                        ErrorClass::Transient => Err(Retry::new(message)),
                        ErrorClass::FailRetryable => Ok(fail(message, true)),
                        ErrorClass::FailPermanent => Ok(fail(message, false)),
                    };
                }
            }
            if let Some((epoch, end)) = chunk.diverging {
                return Ok(fail(
                    format!("source log of {topic}-{p} diverged from the mirror: leader epoch {last_epoch} ends at offset {end} on the source (epoch {epoch}) but the mirror has copied up to {next_src}; the source was truncated (unclean election?)"),
                    false,
                ));
            }
            self.control.set_progress_of(&progress_key, progress(&chunk, &w, next_src));

            // Aborted transactions in this range (consumer logic: a producer is aborted from
            // its first offset until its ABORT marker).
            let mut aborted_pending = chunk.aborted.clone();
            let mut aborted_now: HashSet<i64> = HashSet::new();
            // This loop's share of the in-flight budget the fetched records take; a split
            // that must wait for budget gives it up first (see `append_split`).
            let mut hold = chunk.hold.take();
            // Whether a batch of this chunk was copied yet, and whether the loop waits for the
            // source LSO to pass an ABORT marker before it copies further (see
            // `markers::slot_opening`).
            let (mut walked, mut parked) = (false, false);
            let mut placeholder_pids: HashSet<i64> = HashSet::new();
            for b in BatchIter::new(chunk.records.clone()) {
                let b = b.map_err(|e| Retry::new(e.to_string()))?;
                if b.next_offset() <= next_src {
                    continue;
                }
                aborted_pending.retain(|(pid, first)| {
                    if *first <= b.last_offset() {
                        aborted_now.insert(*pid);
                        false
                    } else {
                        true
                    }
                });
                last_ts = last_ts.max(b.max_timestamp());
                let epoch = b.partition_leader_epoch();
                if epoch > epochs.last().map_or(-1, |e| e.0) {
                    // A new source leader epoch starts here: record it before copying past it.
                    epochs.push((epoch, b.base_offset()));
                    let snapshot = epochs.clone();
                    self.control
                        .update_partition(topic, p, |r| r.source_epochs = snapshot)
                        .await
                        .map_err(|e| Retry::new(e.to_string()))?;
                }
                last_epoch = epoch;
                if b.base_offset() > next_src {
                    if let Some(o) = self.gap(&mut w, next_src, b.base_offset(), b.max_timestamp()).await? {
                        return Ok(o);
                    }
                }
                if std::mem::take(&mut resume_late) {
                    if let Some(o) =
                        self.gap(&mut w, next_src.max(b.base_offset()), b.next_offset(), b.max_timestamp()).await?
                    {
                        return Ok(o);
                    }
                    next_src = b.next_offset();
                    continue;
                }
                let skip = b.is_control() || (b.is_transactional() && aborted_now.contains(&b.producer_id()));
                if b.is_control() && is_abort_marker(&b) {
                    aborted_now.remove(&b.producer_id());
                }
                let holey = i64::from(b.record_count()) != i64::from(b.last_offset_delta()) + 1;
                // A batch written as several appends (a split compacted batch, a skipped range
                // filled in chunks) may have been cut short by a restart or an ambiguous
                // append: the copy resumes inside it, at `from`.
                let from = next_src.max(b.base_offset());
                if from > b.base_offset() && !skip && !holey {
                    // A dense data batch is appended whole, and the source keeps batch ranges
                    // (its cleaner only removes records inside them): the destination holds
                    // offsets this mirror did not write, or the source log was replaced.
                    return Ok(fail(
                        format!(
                            "source batch {}..{} of {topic}-{p} straddles the mirror position {next_src}: the destination ends inside a batch the mirror appends whole; something else wrote to the destination or the source log was replaced",
                            b.base_offset(),
                            b.last_offset()
                        ),
                        false,
                    ));
                }
                let mut real = skip && real_markers && from == b.base_offset() && (b.is_control() || !holey);
                if b.is_control() && crate::sabotage::active("skip-marker") {
                    real = false;
                }
                if real && !b.is_control() && !txns.is_open(b.producer_id()) {
                    // The first aborted batch of a source transaction opens a destination
                    // transaction, which must end (at the source's ABORT marker) well within
                    // its timeout: only when that marker is in this chunk. Never wait (or fetch
                    // again) while another one is open; a transaction written as placeholders
                    // stays placeholders for the rest of the chunk.
                    let opening = if placeholder_pids.contains(&b.producer_id()) {
                        markers::SlotOpening::Placeholders
                    } else {
                        match markers::slot_opening(&chunk.records, &b, chunk.last_stable_offset, walked) {
                            markers::SlotOpening::Refetch { .. } if txns.any_open() => {
                                markers::SlotOpening::Placeholders
                            }
                            o => o,
                        }
                    };
                    match opening {
                        markers::SlotOpening::Open => {}
                        markers::SlotOpening::Placeholders => {
                            placeholder_pids.insert(b.producer_id());
                            real = false;
                        }
                        markers::SlotOpening::Refetch { park } => {
                            parked = park;
                            next_src = b.base_offset();
                            break;
                        }
                    }
                }
                walked = true;
                if real {
                    // A marker, or a dense batch of aborted records: written as real ones,
                    // after the appends in flight.
                    if let Some(o) = self.settle_all(&mut w).await? {
                        return Ok(o);
                    }
                    let written = if b.is_control() {
                        txns.write_marker(self, &mut w, &b).await?
                    } else {
                        txns.write_aborted(self, &mut w, &b).await?
                    };
                    if let Some(o) = written {
                        return Ok(o);
                    }
                } else if skip {
                    // (Placeholders also for what real markers leave: an aborted batch with
                    // compaction holes, or one the destination already ends inside.)
                    if let Some(o) = self.gap(&mut w, from, b.next_offset(), b.max_timestamp()).await? {
                        return Ok(o);
                    }
                } else if holey {
                    if let Some(o) = self.append_split(&mut w, &b, from, &mut hold, stop).await? {
                        return Ok(o);
                    }
                } else if let Some(o) = self.copy_data(&mut w, &b, &hold).await? {
                    return Ok(o);
                } else if std::mem::take(&mut append_twice) {
                    if let Some(o) = self.copy_data(&mut w, &b, &hold).await? {
                        return Ok(o);
                    }
                }
                next_src = b.next_offset();
            }
            // The chunk's last small batches go out now: merging never waits for the next Fetch.
            if let Some(o) = self.flush_run(&mut w).await? {
                return Ok(o);
            }
            fetch_at = fetch_at.max(next_src);
            // Copying again after FAILED retries: the next incident starts its retry count (and
            // backoff) from zero, so unrelated outages over a mirror's life never add up to the
            // retry cap.
            if !retries_reset && next_src > aligned_at {
                retries_reset = true;
                if rec.retry_attempt > 0 {
                    self.control
                        .update_partition(topic, p, |r| r.retry_attempt = 0)
                        .await
                        .map_err(|e| Retry::new(e.to_string()))?;
                }
            }
            self.control.set_progress_of(&progress_key, progress(&chunk, &w, next_src));
            // Follow the source log start (retention) on the destination.
            if chunk.log_start_offset > dest_log_start_followed {
                let target = self.destination_offset_of(chunk.log_start_offset);
                if target > 0 && target <= w.dest_next {
                    // (DeleteRecords above the high watermark is refused: the appends in
                    // flight are answered first.)
                    if w.inflight.acknowledged_end().is_some_and(|end| target > end) {
                        if let Some(o) = self.settle_all(&mut w).await? {
                            return Ok(o);
                        }
                    }
                    match delete_records(&self.dest, topic, p, target).await {
                        Ok(()) => dest_log_start_followed = chunk.log_start_offset,
                        Err(e) => {
                            tracing::warn!(topic, partition = p, error = %e, "cannot move the destination log start")
                        }
                    }
                } else {
                    dest_log_start_followed = chunk.log_start_offset;
                }
            }
            if parked {
                tokio::select! {
                    _ = stop.cancelled() => return Ok(Outcome::Stopped),
                    _ = tokio::time::sleep(self.fetch.backoff) => {}
                }
            }
        }
    }

    /// Base offset of the source batch that holds `log_start` (or `log_start` itself when
    /// the log is empty there).
    async fn first_batch_base(&self, log_start: i64) -> Result<i64, Retry> {
        let chunk = source::fetch(
            &self.source,
            &self.topic,
            self.partition,
            log_start,
            -1,
            &FetchSettings { max_wait: Duration::ZERO, min_bytes: 0, ..self.fetch },
        )
        .await
        .map_err(retry)?;
        if chunk.error_code != 0 {
            return Err(Retry::new(format!("source fetch error {} at log start {log_start}", chunk.error_code)));
        }
        Ok(BatchIter::new(chunk.records)
            .next()
            .and_then(Result::ok)
            .map_or(log_start, |b| b.base_offset().min(log_start)))
    }

    /// What bounds the writes of this alignment: the largest merged batch
    /// (`mirror.coalesce.max.bytes`, kept below the destination topic's `max.message.bytes`
    /// less a batch header) and the destination leader's `producer.id.expiration.ms` (None
    /// when it cannot be read: appends then go one at a time).
    async fn write_limits(&self, topic: &str, p: i32) -> (usize, Option<usize>, Option<i64>) {
        let mut coalesce = self.coalesce_max_bytes;
        let mut max_message = None;
        if coalesce > 0 {
            match self.dest.describe_topic_configs(topic).await {
                Ok(c) => {
                    if let Some(max) = c.get("max.message.bytes").and_then(|v| v.parse::<usize>().ok()) {
                        coalesce = coalesce.min(max.saturating_sub(crate::wire::batch::HEADER_LEN + 1024));
                        max_message = Some(max);
                    }
                }
                Err(e) => {
                    tracing::debug!(mirror = %self.mirror, topic, partition = p, error = %e, "destination topic configs not read: merged batches use mirror.coalesce.max.bytes as it is")
                }
            }
        }
        let expiry = match self.dest.leader_for(topic, p).await {
            Ok(leader) => match self.dest.describe_broker_config(leader.node_id, "producer.id.expiration.ms").await {
                Ok(v) => v.and_then(|v| v.parse::<i64>().ok()),
                Err(e) => {
                    static ONCE: std::sync::Once = std::sync::Once::new();
                    ONCE.call_once(|| tracing::info!(mirror = %self.mirror, error = %e, "the destination's producer.id.expiration.ms cannot be read (DescribeConfigs on the broker): appends go one at a time (no pipelining)"));
                    None
                }
            },
            Err(_) => None,
        };
        (coalesce, max_message, expiry)
    }

    /// The destination offset of source offset `source` through the partition's offset map
    /// ([`crate::mirror::model::destination_offset`]): where DeleteRecords moves the
    /// destination log start when the source's moves to `source`. Not `source − shift` of the
    /// last segment, which is only right inside that segment (and, after hidden destination
    /// offsets, whose shift is negative, would delete records still to be read).
    pub(super) fn destination_offset_of(&self, source: i64) -> i64 {
        let segments = self.record().map(|r| r.segments).unwrap_or_default();
        crate::mirror::model::destination_offset(&segments, source)
    }

    pub(super) async fn persist_segments(&self, segments: Vec<OffsetSegment>) -> Result<(), Retry> {
        self.control
            .update_partition(&self.topic, self.partition, |r| r.segments = segments)
            .await
            .map(|_| ())
            .map_err(|e| Retry::new(e.to_string()))
    }

    /// A compacted source batch with holes inside (fewer records than offsets) cannot be
    /// appended as it is: the broker would refuse it or renumber it (docs/broker-behaviour.md).
    /// It is split at the byte level ([`crate::wire::split`]) into dense runs of consecutive
    /// offsets — each record copied unchanged but for its offset delta, re-compressed with
    /// the batch's own codec, the one place the mirror decompresses (DESIGN §4.2) — with
    /// placeholders for the holes. Only the pieces at or after source offset `from` are
    /// written, so a copy cut short inside the batch resumes where it stopped.
    ///
    /// The memory the split allocates (the decompressed records and one re-encoded run, or
    /// the run copies of an uncompressed batch) is taken from the in-flight budget
    /// (`mirror.inflight.max.bytes`) first; when it is not free, the loop gives up the room of
    /// the records it fetched (`hold`) and waits. A batch that could never fit fails the
    /// partition, naming the sizes.
    async fn append_split(
        &self,
        w: &mut Writer<'_>,
        b: &Batch,
        from: i64,
        hold: &mut Option<Arc<OwnedSemaphorePermit>>,
        stop: &CancellationToken,
    ) -> Result<Option<Outcome>, Retry> {
        // The appends in flight hold budget too (and the split appends after them).
        if let Some(o) = self.settle_all(w).await? {
            return Ok(Some(o));
        }
        let what = || {
            format!(
                "compacted source batch {}..{} of {}-{}",
                b.base_offset(),
                b.last_offset(),
                self.topic,
                self.partition
            )
        };
        if !b.crc_is_valid() {
            return Err(Retry::new(format!("{}: CRC mismatch in the fetched bytes", what())));
        }
        let total = self.fetcher.budget_total();
        let too_large = |need: String| {
            fail(
                format!("{}: splitting it needs {need} bytes of memory (decompressed records and one re-encoded run) but mirror.inflight.max.bytes is {total}; raise it", what()),
                false,
            )
        };
        let decompressed = match split::decompressed_len(b, total) {
            Ok(n) => n,
            Err(RecordsError::TooLarge { .. }) => return Ok(Some(too_large(format!("more than {total}")))),
            Err(e) => return Ok(Some(fail(format!("cannot read {}: {e}", what()), false))),
        };
        let need = if decompressed > 0 { decompressed.saturating_mul(2) } else { b.payload().len() };
        if need > total {
            return Ok(Some(too_large(need.to_string())));
        }
        let _room = match self.fetcher.try_take_budget(need) {
            Some(room) => room,
            None => {
                drop(hold.take());
                tokio::select! {
                    _ = stop.cancelled() => return Ok(Some(Outcome::Stopped)),
                    room = self.fetcher.take_budget(need) => match room {
                        Some(room) => room,
                        None => return Ok(Some(too_large(need.to_string()))),
                    },
                }
            }
        };
        let section = match split::records_section(b, decompressed) {
            Ok(s) => s,
            Err(e) => return Ok(Some(fail(format!("cannot read {}: {e}", what()), false))),
        };
        let records = match records::walk(&section, b.record_count()) {
            Ok(r) => r,
            Err(e) => return Ok(Some(fail(format!("cannot read {}: {e}", what()), false))),
        };
        let pieces = match split::plan(b, &records, from) {
            Ok(p) => p,
            Err(e) => return Ok(Some(fail(format!("cannot split {}: {e}", what()), false))),
        };
        // Placeholders take the batch's max timestamp (a record's, or the append time; the
        // base timestamp may be the cleaner's delete horizon).
        let ts = b.max_timestamp();
        for (k, piece) in pieces.iter().enumerate() {
            match piece {
                Piece::Hole { from, to } => {
                    if let Some(o) = self.gap(w, *from, *to, ts).await? {
                        return Ok(Some(o));
                    }
                }
                Piece::Run { first, records: range } => {
                    let expected_dest = first - w.shift;
                    if expected_dest != w.dest_next {
                        return Ok(Some(fail(format!("mirror position mismatch for {}-{}: source offset {first} maps to destination {expected_dest} but the destination is at {}", self.topic, self.partition, w.dest_next), false)));
                    }
                    let producer = RunHeader {
                        producer_id: w.producer_id,
                        producer_epoch: w.producer_epoch,
                        base_sequence: w.next_seq,
                    };
                    let run = match split::build_run(b, &records[range.clone()], &producer) {
                        Ok(run) => run,
                        Err(e) => {
                            return Ok(Some(fail(
                                format!("cannot re-encode the run at source offset {first} of {}: {e}", what()),
                                false,
                            )))
                        }
                    };
                    let (len, count) = (run.len(), range.len());
                    if let Some(o) = self.append(w, vec![run], count as i64).await? {
                        return Ok(Some(o));
                    }
                    crate::mirror::metrics::record_append(&self.mirror, len, count as i64);
                }
            }
            if k + 1 < pieces.len() {
                failpoint_mid_batch();
            }
        }
        Ok(None)
    }

    /// Appends one batch at `w.dest_next` covering `count` offsets and waits for it, after
    /// the appends in flight, checking the base offset ([`PartitionTask::judge`]).
    pub(super) async fn append(
        &self,
        w: &mut Writer<'_>,
        segments: Vec<Bytes>,
        count: i64,
    ) -> Result<Option<Outcome>, Retry> {
        if let Some(o) = self.settle_all(w).await? {
            return Ok(Some(o));
        }
        let answer = self.writer.append(&self.mirror, &self.topic, self.partition, segments).await;
        let outcome = self.judge(&Sent::single(w.dest_next, count), answer);
        if matches!(outcome, Ok(None)) {
            w.appended(count);
        }
        // (Its timestamp is not known here: the next data append goes alone.)
        w.state_ts = None;
        outcome
    }
}

/// What `--describe` and the metrics show of a partition after a Fetch answer.
/// The destination end and next source offset are the acknowledged ones: below the appends
/// in flight.
fn progress(chunk: &source::SourceChunk, w: &Writer<'_>, next_source: i64) -> Progress {
    let (destination_end, next_source) = match w.inflight.acknowledged_end() {
        Some(end) => (end, end + w.shift),
        None => (w.dest_next, next_source),
    };
    Progress {
        source_log_start: chunk.log_start_offset,
        source_high_watermark: chunk.high_watermark,
        source_lso: chunk.last_stable_offset,
        destination_end,
        shift: w.shift,
        next_source,
        read_ms: crate::mirror::model::now_ms(),
    }
}

/// A reason to re-align and start over (transient errors).
#[derive(Debug)]
pub struct Retry {
    /// What went wrong.
    pub why: String,
    /// The last append's outcome is unknown: wait the request timeout before re-aligning.
    pub after_ambiguous_append: bool,
}

impl Retry {
    pub(super) fn new(why: String) -> Self {
        Self { why, after_ambiguous_append: false }
    }
}

pub(super) fn retry(e: ClusterError) -> Retry {
    Retry::new(e.to_string())
}

pub(super) fn is_abort_marker(b: &Batch) -> bool {
    // Control record key: version INT16, type INT16 (0 = ABORT, 1 = COMMIT). The key sits
    // after the record's length, attributes, timestamp delta, offset delta and key length
    // varints; for a marker these are all one byte long except the length.
    let payload = b.payload();
    payload.len() >= 9 && payload.get(5..9).is_some_and(|k| k[2..4] == [0, 0])
}

/// A new idempotent producer id and epoch from the destination (InitProducerId with a null
/// transactional id). COORDINATOR_LOAD_IN_PROGRESS (14), COORDINATOR_NOT_AVAILABLE (15) and
/// NOT_COORDINATOR (16) — a broker whose producer id manager is not ready yet, as on a
/// freshly started cluster — are asked again within the call (100 ms, doubling, up to
/// about 6 s), so the copy does not wait a whole retry backoff.
///
/// # Errors
/// Transport errors, or the last Kafka error.
pub(super) async fn init_producer_id(dest: &ClusterClient) -> Result<(i64, i16), ClusterError> {
    use kafka_protocol::messages::{InitProducerIdRequest, ProducerId};
    let req = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let mut backoff = Duration::from_millis(100);
    let resp = loop {
        let resp = dest.send_any(&req, 4).await?;
        if !matches!(resp.error_code, 14..=16) || backoff > Duration::from_secs(4) {
            break resp;
        }
        tokio::time::sleep(backoff).await;
        backoff *= 2;
    };
    if resp.error_code != 0 {
        return Err(ClusterError::Kafka {
            api: kafka_protocol::messages::ApiKey::InitProducerId,
            broker: "destination".into(),
            resource: "producer id".into(),
            error: crate::client::cluster::KafkaErrorCode(resp.error_code),
            message: None,
        });
    }
    Ok((resp.producer_id.0, resp.producer_epoch))
}

/// Whether a [`delete_records`] error is the broker refusing it for the topic's
/// cleanup.policy: Kafka answers POLICY_VIOLATION (44) for a topic whose cleanup.policy has no
/// `delete` (`UnifiedLog.maybeIncrementLogStartOffset` / `ReplicaManager.deleteRecords`).
pub(super) fn is_policy_refusal(e: &ClusterError) -> bool {
    matches!(e, ClusterError::Kafka { error, .. } if error.0 == 44)
}

/// Moves the destination log start of `topic`-`partition` to `offset` (DeleteRecords).
///
/// # Errors
/// Transport or Kafka errors.
pub async fn delete_records(
    dest: &ClusterClient,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(), ClusterError> {
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    use kafka_protocol::messages::{DeleteRecordsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let leader = dest.leader_for(topic, partition).await?;
    let req = DeleteRecordsRequest::default().with_timeout_ms(30_000).with_topics(vec![DeleteRecordsTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_partitions(vec![DeleteRecordsPartition::default().with_partition_index(partition).with_offset(offset)])]);
    let resp = dest.send_to_node(leader.node_id, &req, 2).await?;
    let code = resp.topics.iter().flat_map(|t| t.partitions.iter()).map(|p| p.error_code).next().unwrap_or(0);
    if code != 0 {
        return Err(ClusterError::Kafka {
            api: kafka_protocol::messages::ApiKey::DeleteRecords,
            broker: format!("node {}", leader.node_id),
            resource: format!("{topic}-{partition}"),
            error: crate::client::cluster::KafkaErrorCode(code),
            message: None,
        });
    }
    Ok(())
}
