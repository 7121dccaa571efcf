//! The copy, the phase a partition spends its life in: Fetch from the source at
//! READ_COMMITTED, walk the batches of each answer onto the destination
//! ([`super::walk`]), settle the chunk ([`super::settle`]), and again — until a stop, a
//! failure, or a reason to re-align. The next Fetch goes out while the appends of the last
//! chunk are in flight; their answers are checked as they come ([`PartitionTask::settled`]).

use std::ops::ControlFlow;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::cluster::EARLIEST_TIMESTAMP;

use super::super::errors::{self, ErrorClass};
use super::super::markers;
use super::super::source::{codes, SourceChunk};
use super::align::Alignment;
use super::{fail, progress, retry, Flow, Outcome, PartitionTask, Retry, Writer};

/// How long a stop waits for the copy to end a destination transaction of ours that is open.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// Where the copy stands, carried from one Fetch answer to the next.
pub(super) struct CopyState {
    /// The next source offset to copy: `w.dest_next` plus the segment's shift (offset
    /// identity), once the appends in flight are acknowledged.
    pub(super) next_src: i64,
    /// Where the next Fetch reads: `next_src`, or the source log start when retention
    /// passed the mirror (the gap up to it is filled when its batch arrives).
    pub(super) fetch_at: i64,
    /// `next_src` when the copy started: copying past it resets the retry count.
    pub(super) aligned_at: i64,
    /// Whether the retry count was reset in this copy.
    pub(super) retries_reset: bool,
    /// The partition's retry count at alignment.
    pub(super) retry_attempt: i32,
    /// The source leader epochs seen, `(epoch, first offset)`, as persisted.
    pub(super) epochs: Vec<(i32, i64)>,
    /// LastFetchedEpoch: the source epoch of the last copied batch (-1: none yet).
    pub(super) last_epoch: i32,
    /// The source log start already followed on the destination (DeleteRecords).
    pub(super) dest_log_start_followed: i64,
    /// Until when a stop waits for an open destination transaction of ours to end.
    pub(super) stop_grace: Option<tokio::time::Instant>,
    /// The partition's key in the control plane's progress map.
    pub(super) progress_key: (String, i32),
    /// Source markers and aborted records are written as real ones (docs/real-markers.md).
    pub(super) real_markers: bool,
    /// `--start-position` offset below which nothing is copied (None: all).
    pub(super) copy_start: Option<i64>,
    /// The first source batch of a mirror partition created by this alignment.
    pub(super) created_at: Option<i64>,
    /// The source log start read at alignment.
    pub(super) src_start: i64,
    /// Broken builds only (src/sabotage.rs): the first batch is skipped as a gap.
    pub(super) resume_late: bool,
    /// Broken builds only (src/sabotage.rs): a data batch is appended twice.
    pub(super) append_twice: bool,
}

impl CopyState {
    /// The copy's start at source offset `next_src`, after alignment `a`.
    pub(super) fn new(task: &PartitionTask, a: &Alignment, next_src: i64, real_markers: bool) -> Self {
        // LastFetchedEpoch: the source epoch of the last copied batch, from the persisted
        // history (an empty history means nothing was copied yet, or a state from before it
        // was kept: the first batch starts it).
        let epochs = a.rec.source_epochs.clone();
        let last_epoch = if next_src > 0 { epochs.last().map_or(-1, |e| e.0) } else { -1 };
        CopyState {
            next_src,
            fetch_at: next_src,
            aligned_at: next_src,
            retries_reset: false,
            retry_attempt: a.rec.retry_attempt,
            epochs,
            last_epoch,
            dest_log_start_followed: -1,
            stop_grace: None,
            progress_key: (task.topic.clone(), task.partition),
            real_markers,
            copy_start: a.copy_start,
            created_at: a.created_at,
            src_start: a.src_start,
            // Broken builds only (src/sabotage.rs): both compile to `false` without the feature.
            resume_late: crate::sabotage::active("resume-late") && next_src > 0,
            append_twice: crate::sabotage::active("append-twice"),
        }
    }
}

/// What a Fetch answer lets the copy do.
enum Answer {
    /// Its records are copied.
    Copy,
    /// Nothing to copy: fetch again at `fetch_at`.
    Refetch,
}

impl PartitionTask {
    /// Copies until a stop, a failure or a retry. Each append lands at `w.dest_next` with
    /// the sequence of the data producer and is checked against it (a misplaced one fails
    /// the partition); the source offsets of one chunk are all written — data, fills,
    /// markers — before the next chunk's.
    pub(super) async fn copy(
        &self,
        stop: &CancellationToken,
        w: &mut Writer<'_>,
        txns: &mut markers::Txns,
        c: &mut CopyState,
    ) -> Result<Outcome, Retry> {
        loop {
            let mut chunk = proceed!(self.next_chunk(stop, w, txns, c).await);
            if let Answer::Refetch = proceed!(self.check_answer(&chunk, c).await) {
                continue;
            }
            self.control.set_progress_of(&c.progress_key, progress(&chunk, w, c.next_src));
            // (The walk keeps this loop's share of the in-flight budget until the chunk is
            // settled.)
            let walk = proceed!(self.walk_chunk(stop, w, txns, c, &mut chunk).await);
            if let Some(o) = self.settle_chunk(stop, w, c, &chunk, walk.parked).await? {
                return Ok(o);
            }
        }
    }

    /// The next Fetch answer at `c.fetch_at`, taking the answers of the appends in flight
    /// meanwhile. A stop ends the copy, but waits (up to [`STOP_GRACE`]) while a
    /// destination transaction of ours is open: the next fetch holds its marker, and the
    /// copy ends it instead of leaving it to the coordinator's timeout, which would put an
    /// ABORT at the log end.
    async fn next_chunk(
        &self,
        stop: &CancellationToken,
        w: &mut Writer<'_>,
        txns: &markers::Txns,
        c: &mut CopyState,
    ) -> Flow<SourceChunk> {
        let (topic, p) = (self.topic.as_str(), self.partition);
        loop {
            let open = txns.any_open();
            if stop.is_cancelled() && (!open || c.stop_grace.is_some_and(|t| tokio::time::Instant::now() >= t)) {
                if open {
                    tracing::warn!(mirror = %self.mirror, topic, partition = p, "stopping with a destination transaction of aborted records still open; the next start resumes it (it is aborted by the destination at its timeout otherwise)");
                }
                return Ok(ControlFlow::Break(Outcome::Stopped));
            }
            let grace_until = *c.stop_grace.get_or_insert_with(|| tokio::time::Instant::now() + STOP_GRACE);
            let stopped = async {
                stop.cancelled().await;
                if open {
                    tokio::time::sleep_until(grace_until).await;
                }
            };
            if !stop.is_cancelled() {
                c.stop_grace = None;
            }
            // The next Fetch goes out while the appends of the last chunk are in flight; their
            // answers are taken as they come.
            let fetch = self.fetcher.fetch(topic, p, c.fetch_at, c.last_epoch);
            tokio::pin!(fetch, stopped);
            loop {
                tokio::select! {
                    biased;
                    answered = w.inflight.next(), if !w.inflight.is_empty() => {
                        if let Some((sent, answer)) = answered {
                            if let Some(o) = self.settled(w, sent, answer).await? {
                                return Ok(ControlFlow::Break(o));
                            }
                        }
                    }
                    // (Checked again at the top: the grace may have run out.)
                    _ = &mut stopped => break,
                    chunk = &mut fetch => {
                        return Ok(ControlFlow::Continue(chunk.map_err(|e| Retry::new(format!("fetch: {e}")))?));
                    }
                }
            }
        }
    }

    /// Judges a Fetch answer's error code and divergence: retention that passed the mirror
    /// moves the fetch to the source log start (never to the latest offset); leadership
    /// errors are retries; others are classified ([`errors::classify`]); a diverging epoch
    /// (the source log truncated below what was copied) fails the partition for good.
    async fn check_answer(&self, chunk: &SourceChunk, c: &mut CopyState) -> Flow<Answer> {
        let (topic, p) = (self.topic.as_str(), self.partition);
        match chunk.error_code {
            0 => {}
            codes::OFFSET_OUT_OF_RANGE => {
                self.follow_source_log_start(c).await?;
                return Ok(ControlFlow::Continue(Answer::Refetch));
            }
            codes::NOT_LEADER_OR_FOLLOWER
            | codes::FENCED_LEADER_EPOCH
            | codes::UNKNOWN_LEADER_EPOCH
            | codes::UNKNOWN_TOPIC_OR_PARTITION => {
                let _ = self.source.refresh_metadata(Some(&[topic])).await;
                return Err(Retry::new(format!("source error {} on fetch", chunk.error_code)));
            }
            other => {
                let message = errors::refusal("source", other, None, topic, p, c.fetch_at);
                return match errors::classify(other) {
                    ErrorClass::Transient => Err(Retry::new(message)),
                    ErrorClass::FailRetryable => Ok(ControlFlow::Break(fail(message, true))),
                    ErrorClass::FailPermanent => Ok(ControlFlow::Break(fail(message, false))),
                };
            }
        }
        if let Some((epoch, end)) = chunk.diverging {
            return Ok(ControlFlow::Break(fail(
                format!("source log of {topic}-{p} diverged from the mirror: leader epoch {} ends at offset {end} on the source (epoch {epoch}) but the mirror has copied up to {}; the source was truncated (unclean election?)", c.last_epoch, c.next_src),
                false,
            )));
        }
        Ok(ControlFlow::Continue(Answer::Copy))
    }

    /// OFFSET_OUT_OF_RANGE: source retention passed the mirror. The next Fetch reads at the
    /// new source log start, and the gap up to its batch is filled (or re-segmented) when it
    /// arrives; the offsets the mirror was due to copy and never did are counted as lost.
    /// A log start at or below the mirror's position is a retry.
    async fn follow_source_log_start(&self, c: &mut CopyState) -> Result<(), Retry> {
        let (topic, p, next_src) = (self.topic.as_str(), self.partition, c.next_src);
        // Source retention passed the mirror: fill or re-segment up to the new
        // log start; never jump to the latest offset.
        let start = self.source.list_offsets(topic, p, EARLIEST_TIMESTAMP).await.map_err(retry)?;
        if start <= next_src {
            return Err(Retry::new(format!("OFFSET_OUT_OF_RANGE at {next_src} (source log start {start})")));
        }
        // The batch holding `start` may begin below it; the gap up to that
        // batch is filled (or re-segmented) when it arrives. Only offsets the
        // mirror was due to copy are lost: from the copy start, the first source
        // batch it saw, or (neither known) the source log start of this run; a
        // head below that (a head fill fetching at 0) was never to be copied.
        let due_from =
            c.copy_start.or(c.epochs.first().map(|e| e.1)).or(c.created_at).unwrap_or(c.src_start).max(next_src);
        if start > due_from {
            tracing::warn!(mirror = %self.mirror, topic, partition = p, lost_from = due_from, lost_to = start, "source retention removed offsets the mirror had not copied");
            self.control.count_lost_offsets(start - due_from);
        } else {
            tracing::debug!(mirror = %self.mirror, topic, partition = p, from = next_src, source_log_start = start, "filling a source head below the source log start");
        }
        c.fetch_at = start;
        Ok(())
    }
}
