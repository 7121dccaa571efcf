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
//!
//! The loop runs as phases, each in its own module: [`align`] (where the destination ends
//! and which source offset that is), [`recover`] (what a previous loop left open is
//! finished, the data producer's sequence resumed), [`start`] (failback check, MIRRORING),
//! [`copy`] (Fetch, then [`walk`] each chunk's batches onto the destination and [`settle`]
//! it), with [`split`] for compacted batches; [`PartitionTask::run`] re-aligns after a
//! retry.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::client::cluster::{ClusterClient, ClusterError};
use crate::mirror::control::ControlPlane;
use crate::mirror::model::{OffsetSegment, PartitionStateRecord};
use crate::wire::batch::Batch;

use super::errors;
use super::markers;
use super::mux::FetchMux;
use super::pipeline::{Pipeline, Run, Sent};
use super::produce::ProduceMux;
use super::source::{self, FetchSettings};
use super::Progress;

/// What a phase of the loop returns: `Continue(value)` to go on with, `Break(outcome)` when
/// the loop ends with `outcome` (stopped, or failed), `Err(Retry)` to re-align.
type Flow<T> = Result<ControlFlow<Outcome, T>, Retry>;

impl<T> From<Outcome> for ControlFlow<Outcome, T> {
    fn from(outcome: Outcome) -> Self {
        ControlFlow::Break(outcome)
    }
}

/// `proceed!(phase)`: the value a phase ([`Flow`]) goes on with; when the phase ended the
/// loop (`Break(outcome)`), returns that outcome from the calling function (as `Outcome`,
/// `Option<Outcome>` or `ControlFlow`, whichever it returns); a [`Retry`] is passed up.
macro_rules! proceed {
    ($phase:expr) => {
        match $phase? {
            std::ops::ControlFlow::Continue(value) => value,
            std::ops::ControlFlow::Break(outcome) => return Ok(outcome.into()),
        }
    };
}

mod align;
mod copy;
mod recover;
mod settle;
mod split;
mod start;
mod walk;

use copy::CopyState;

/// When this process's data plane started its first copy loop.
static PROCESS_START: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
/// How long after the process start a resuming loop waits before reading the destination
/// log end (see [`PartitionTask::run`]).
const RESTART_SETTLE: Duration = Duration::from_secs(3);

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
/// was opened on the partition, before its first record), `slot-append` (after an
/// acknowledged append of aborted records into a destination transaction that is still open,
/// `markers::Txns::write_aborted`) or `marker-add` (right before the AddPartitionsToTxn of a
/// lone marker, `markers::Txns::write_marker`). With `<name>:N:stop` the process stops itself
/// (SIGSTOP, as a frozen process: the test sends SIGCONT) at the Nth pass instead, once.
pub(super) fn failpoint(name: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static LIMIT: OnceLock<Option<(String, u64, bool)>> = OnceLock::new();
    static SEEN: AtomicU64 = AtomicU64::new(0);
    let limit = LIMIT.get_or_init(|| {
        let v = std::env::var("MIRRORGATE_FAILPOINT").ok()?;
        let (n, rest) = v.split_once(':')?;
        let (count, stop) = match rest.split_once(':') {
            Some((count, "stop")) => (count, true),
            _ => (rest, false),
        };
        Some((n.to_string(), count.parse().ok()?, stop))
    });
    if let Some((n, count, stop)) = limit {
        if n != name {
            return;
        }
        let seen = SEEN.fetch_add(1, Ordering::SeqCst) + 1;
        if *stop && seen == *count {
            eprintln!("MIRRORGATE_FAILPOINT {n}:{count}:stop reached: stopping");
            let _ = std::process::Command::new("kill").args(["-STOP", &std::process::id().to_string()]).status();
            // (The stop may take effect a moment after `kill` returned: nothing goes on before.)
            std::thread::sleep(std::time::Duration::from_millis(500));
        } else if !*stop && seen >= *count {
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

    /// One alignment and the copy that follows it, phase by phase: [`PartitionTask::align`]
    /// (the destination log end and the source offset it maps to),
    /// [`PartitionTask::aligned_writer`] (appends at that end, sequence = destination offset),
    /// [`PartitionTask::recover`] (open destination transactions of ours ended, the
    /// sequence resumed, the log end confirmed), [`PartitionTask::start_copying`] (failback
    /// check, MIRRORING) and [`PartitionTask::copy`] (fetch, walk, settle, until a stop, a
    /// failure or a retry). `Err` asks [`PartitionTask::run`] to re-align.
    async fn run_once(&self, stop: &CancellationToken, inflight: &mut Pipeline) -> Result<Outcome, Retry> {
        let aligned = proceed!(self.align(stop).await);
        let mut w = self.aligned_writer(&aligned, inflight).await;
        self.note_legacy_placeholders(&aligned).await?;
        let mut txns = markers::Txns::default();
        let real_markers = proceed!(self.recover(stop, &mut w, &mut txns, &aligned).await);
        let next_src = proceed!(self.start_copying(&mut w, &aligned).await);
        let mut state = CopyState::new(self, &aligned, next_src, real_markers);
        self.copy(stop, &mut w, &mut txns, &mut state).await
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
