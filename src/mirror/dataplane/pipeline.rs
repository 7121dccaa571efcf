//! The appends of one copy loop in flight (issue 13, item 1): a dense data batch is submitted
//! to the destination ([`super::produce::ProduceMux::submit`]) without waiting for its
//! answer, up to [`MAX_APPENDS_IN_FLIGHT`] at a time, and the loop goes on to the next batch
//! and the next source Fetch. Every other write of the loop (placeholders, a split compacted
//! batch, real markers and aborted records) first waits for the appends in flight
//! ([`PartitionTask::settle_all`]), so it sees the acknowledged log end.
//!
//! Appends are in flight together only while the broker surely holds the partition
//! producer's state ([`Writer::may_pipeline`]: an append of this alignment acknowledged, and
//! the batch recent enough that `producer.id.expiration.ms` cannot expire the state): a broker
//! without it takes any sequence (Kafka `ProducerAppendInfo.checkSequence`), so an append
//! following a failed one would land at the failed one's offset. Otherwise (the first append
//! after an alignment, a backfill of old records, an unknown expiry) appends go one at a
//! time. Should a later append land elsewhere anyway, the partition fails naming the offsets.
//!
//! Every guarantee of a single append holds for each one in flight:
//! - the base offset is checked against the destination offset the batch maps to;
//! - the answers are taken in submission order, and the first failure is the outcome: the
//!   later appends of the producer are refused by the broker (OUT_OF_ORDER_SEQUENCE_NUMBER,
//!   docs/broker-behaviour.md, pipelined Produce) or, at worst, appended at their own offsets
//!   (a leader move between two of them), and the loop re-aligns from the destination log end
//!   after all of them were answered;
//! - memory stays bounded: each append holds its share of the in-flight budget (the fetched
//!   chunk its payload is a slice of) until it is answered.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::OwnedSemaphorePermit;

use crate::wire::batch::{self, Batch, HeaderPatch};
use crate::wire::coalesce;
use crate::wire::split::RunHeader;

use super::errors::{self, ErrorClass};
use super::mux::MuxError;
use super::partition::{fail, Outcome, PartitionTask, Retry, Writer};
use super::produce::{PendingAppend, MAX_REQUESTS_IN_FLIGHT};

/// Appends in flight per mirror partition. The destination writer carries at most one batch
/// of a partition per Produce request and keeps [`MAX_REQUESTS_IN_FLIGHT`] requests in
/// flight per connection; both are within the broker's de-duplication window of 5 batches
/// per producer.
pub(super) const MAX_APPENDS_IN_FLIGHT: usize = MAX_REQUESTS_IN_FLIGHT;

/// One append in flight.
#[derive(Debug)]
struct InFlight {
    answer: PendingAppend,
    sent: Sent,
}

/// What an append in flight was: where it must land and what it covers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sent {
    /// Destination offset the batch must land at.
    expected: i64,
    /// Offsets it covers.
    count: i64,
    /// Source offset after it.
    source_next: i64,
    /// Batch bytes and records (metrics).
    bytes: usize,
    records: i64,
    /// Submitted while an earlier append of the partition was still in flight.
    behind: bool,
    /// Source batches merged into this one ([`crate::wire::coalesce`]; 1: not merged).
    merged: usize,
    /// The merged batch was compressed again (`mirror.coalesce.recompress`).
    recompressed: bool,
    /// The batch's max timestamp, ms (what the broker keeps as the producer's last timestamp).
    max_ts: i64,
}

/// What an append in flight keeps from being reused: the in-flight budget of the fetched
/// chunk its payload is a slice of, or the budget taken for the merged batch it built.
#[derive(Debug, Default)]
pub(super) struct Hold {
    _chunk: Option<Arc<OwnedSemaphorePermit>>,
    _own: Option<OwnedSemaphorePermit>,
}

/// Consecutive small source batches of one codec (uncompressed; with
/// `mirror.coalesce.recompress` also compressed) of the chunk being copied, not submitted
/// yet: merged into one append when the run ends (`mirror.coalesce.max.bytes`).
#[derive(Debug, Default)]
pub(super) struct Run {
    batches: Vec<Batch>,
    bytes: usize,
    /// The codec of every batch in the run ([`coalesce::merge_codec`]).
    codec: i16,
    chunk: Option<Arc<OwnedSemaphorePermit>>,
}

/// The appends of a copy loop in flight, oldest first.
#[derive(Debug, Default)]
pub(super) struct Pipeline {
    pending: VecDeque<(InFlight, Hold)>,
}

impl Pipeline {
    /// No append in flight.
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Where the oldest append in flight lands: the destination offset below which every
    /// append of the loop is acknowledged (None with nothing in flight).
    pub(super) fn acknowledged_end(&self) -> Option<i64> {
        self.pending.front().map(|(f, _)| f.sent.expected)
    }

    fn is_full(&self) -> bool {
        self.pending.len() >= MAX_APPENDS_IN_FLIGHT
    }

    /// The oldest append in flight and its answer, once it came (None with nothing in
    /// flight). Cancel-safe: the append leaves the pipeline only with its answer.
    pub(super) async fn next(&mut self) -> Option<(Sent, Result<i64, MuxError>)> {
        let front = self.pending.front_mut()?;
        let answer = front.0.answer.answer().await;
        let (f, _hold) = self.pending.pop_front().expect("the front just answered");
        Some((f.sent, answer))
    }

    /// Waits for every append in flight and forgets their answers (the loop is leaving, or an
    /// earlier append failed, and re-reads the destination log end before it writes again).
    /// Returns whether any outcome is unknown ([`MuxError::Ambiguous`]), and the first append
    /// that landed anywhere but where it had to (the broker accepted it without its
    /// predecessor: a producer it holds no state of takes any sequence, Kafka
    /// `ProducerAppendInfo.checkSequence`), as (expected offset, offset it landed at).
    pub(super) async fn quiesce_after_failure(&mut self) -> (bool, Option<(i64, i64)>) {
        let mut ambiguous = false;
        let mut misplaced = None;
        while let Some((sent, answer)) = self.next().await {
            match answer {
                Err(MuxError::Ambiguous(_)) => ambiguous = true,
                Ok(base) if base != sent.expected => {
                    misplaced.get_or_insert((sent.expected, base));
                }
                _ => {}
            }
        }
        (ambiguous, misplaced)
    }
}

impl PartitionTask {
    /// Copies the dense data batch `b` (source offsets up to `b.next_offset()`): merged with
    /// its neighbours of the same codec when it is small and uncompressed, or compressed with
    /// `mirror.coalesce.recompress` (`w.run`, flushed by [`PartitionTask::settle_all`] and at
    /// the end of each chunk), submitted on its own otherwise. `chunk` is the in-flight budget
    /// of the chunk it was fetched in.
    pub(super) async fn copy_data(
        &self,
        w: &mut Writer<'_>,
        b: &Batch,
        chunk: &Option<Arc<OwnedSemaphorePermit>>,
    ) -> Result<Option<Outcome>, Retry> {
        let max = w.coalesce_max;
        let codec = if max > 0 && !self.coalesce_refused.load(std::sync::atomic::Ordering::Relaxed) {
            coalesce::merge_codec(b, max / 2, w.recompress)
        } else {
            None
        };
        let merge = codec.is_some();
        // Never mixes codecs (nor compressed with uncompressed batches) in one run.
        let joins = merge
            && w.run
                .batches
                .last()
                .is_none_or(|last| last.next_offset() == b.base_offset() && Some(w.run.codec) == codec)
            && w.run.bytes + b.bytes().len() <= max;
        if !joins {
            if let Some(o) = self.flush_run(w).await? {
                return Ok(Some(o));
            }
        }
        if let Some(codec) = codec {
            w.run.codec = codec;
            w.run.bytes += b.bytes().len();
            w.run.batches.push(b.clone());
            w.run.chunk = chunk.clone();
            return Ok(None);
        }
        if chunk.is_none() {
            // The chunk's budget was given up (a split waited for room): its batches are not
            // counted any more, so one at a time.
            if let Some(o) = self.submit_data(w, b, Hold::default()).await? {
                return Ok(Some(o));
            }
            return self.drain(w).await;
        }
        self.submit_data(w, b, Hold { _chunk: chunk.clone(), _own: None }).await
    }

    /// Submits the batches of `w.run`: one on its own as it is, several as one merged batch
    /// (as they are when the merged batch's memory is not free in the in-flight budget);
    /// compressed ones through [`PartitionTask::flush_recompressed`].
    pub(super) async fn flush_run(&self, w: &mut Writer<'_>) -> Result<Option<Outcome>, Retry> {
        let run = std::mem::take(&mut w.run);
        let n = run.batches.len();
        if n > 1 && run.codec != crate::wire::records::codec::NONE {
            return self.flush_recompressed(w, run).await;
        }
        let own = if n > 1 { self.fetcher.try_take_budget(run.bytes) } else { None };
        if own.is_some() {
            let producer =
                RunHeader { producer_id: w.producer_id, producer_epoch: w.producer_epoch, base_sequence: w.next_seq };
            match coalesce::coalesce(&run.batches, &producer) {
                // (Re-framed records may be a little longer than the source's: the destination
                // topic's limit is checked on the batch as built.)
                Ok(merged) if w.max_message_bytes.is_some_and(|max| merged.len() > max) => {
                    tracing::debug!(mirror = %self.mirror, topic = %self.topic, partition = self.partition, bytes = merged.len(), "merged batch over the destination's max.message.bytes: appended one by one");
                }
                Ok(merged) => {
                    let sent = match self.merged_sent(w, &run.batches, false) {
                        Ok(sent) => sent,
                        Err(o) => return Ok(Some(o)),
                    };
                    return self.submit(w, vec![merged], sent, Hold { _chunk: None, _own: own }).await;
                }
                Err(e) => {
                    tracing::debug!(mirror = %self.mirror, topic = %self.topic, partition = self.partition, error = %e, "source batches not merged: appended one by one");
                }
            }
        }
        for b in &run.batches {
            if let Some(o) = self.submit_unmerged(w, b, &run.chunk).await? {
                return Ok(Some(o));
            }
        }
        Ok(None)
    }

    /// What is due for one merged append of `group` (consecutive source batches, at least
    /// one): its destination offset, offsets, bytes and records; or the failure when it would
    /// not start at the destination's next offset.
    fn merged_sent(&self, w: &Writer<'_>, group: &[Batch], recompressed: bool) -> Result<Sent, Outcome> {
        let (first, last) = (&group[0], &group[group.len() - 1]);
        let expected = first.base_offset() - w.shift;
        if expected != w.dest_next {
            return Err(self.mismatch(first, expected, w.dest_next));
        }
        Ok(Sent {
            expected,
            count: last.next_offset() - first.base_offset(),
            source_next: last.next_offset(),
            bytes: group.iter().map(|b| b.bytes().len()).sum(),
            records: group.iter().map(|b| i64::from(b.record_count())).sum(),
            behind: false,
            merged: group.len(),
            recompressed,
            max_ts: group.iter().map(Batch::max_timestamp).max().unwrap_or(0),
        })
    }

    /// Submits a run of at least two batches compressed with one codec
    /// (`mirror.coalesce.recompress`): as few merged batches as fit, each holding the records
    /// of as many consecutive batches as decompress into `w.coalesce_max` bytes
    /// ([`coalesce::recompress`]), compressed again with the same codec; a batch that cannot
    /// be merged with the next (its records alone too large) on its own as it is. Batches
    /// that cannot be read, or when the merged batch's memory is not free in the in-flight
    /// budget, are appended as they are (the destination then judges them as it would
    /// without merging).
    async fn flush_recompressed(&self, w: &mut Writer<'_>, run: Run) -> Result<Option<Outcome>, Retry> {
        let mut rest: &[Batch] = &run.batches;
        while rest.len() > 1 {
            let producer =
                RunHeader { producer_id: w.producer_id, producer_epoch: w.producer_epoch, base_sequence: w.next_seq };
            // The merged batch's memory is taken from the in-flight budget before any work
            // (about the compressed size of what it merges, at most `mirror.coalesce.max.bytes`),
            // so a mirror out of budget spends no CPU on merges it could not send.
            let estimate = rest.iter().map(|b| b.bytes().len()).sum::<usize>().min(w.coalesce_max);
            let Some(own) = self.fetcher.try_take_budget(estimate) else { break };
            // Decompression and compression run on tokio's blocking pool, not on the workers
            // that also serve the proxy and heartbeats: at most `mirror.coalesce.max.bytes`
            // (256 KiB by default) of records per merged batch, which lz4 compresses in well
            // under a millisecond but gzip in several.
            let (batches, max) = (rest.to_vec(), w.coalesce_max);
            let merged = match tokio::task::spawn_blocking(move || coalesce::recompress(&batches, &producer, max)).await
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(mirror = %self.mirror, topic = %self.topic, partition = self.partition, error = %e, "recompression task failed: batches appended one by one");
                    break;
                }
            };
            match merged {
                Ok(r) if w.max_message_bytes.is_some_and(|max| r.batch.len() > max) => {
                    tracing::debug!(mirror = %self.mirror, topic = %self.topic, partition = self.partition, bytes = r.batch.len(), "recompressed batch over the destination's max.message.bytes: appended one by one");
                    break;
                }
                Ok(r) => {
                    let sent = match self.merged_sent(w, &rest[..r.merged], true) {
                        Ok(sent) => sent,
                        Err(o) => return Ok(Some(o)),
                    };
                    if let Some(o) = self.submit(w, vec![r.batch], sent, Hold { _chunk: None, _own: Some(own) }).await?
                    {
                        return Ok(Some(o));
                    }
                    rest = &rest[r.merged..];
                }
                Err(coalesce::CoalesceError::TooLarge { .. }) => {
                    if let Some(o) = self.submit_unmerged(w, &rest[0], &run.chunk).await? {
                        return Ok(Some(o));
                    }
                    rest = &rest[1..];
                }
                Err(e) => {
                    tracing::debug!(mirror = %self.mirror, topic = %self.topic, partition = self.partition, error = %e, "compressed source batches not merged: appended one by one");
                    break;
                }
            }
        }
        for b in rest {
            if let Some(o) = self.submit_unmerged(w, b, &run.chunk).await? {
                return Ok(Some(o));
            }
        }
        Ok(None)
    }

    /// Submits `b` as it is ([`PartitionTask::submit_data`]), holding `chunk`; without a
    /// chunk budget (given up by a split that waited for room) it is waited for at once.
    async fn submit_unmerged(
        &self,
        w: &mut Writer<'_>,
        b: &Batch,
        chunk: &Option<Arc<OwnedSemaphorePermit>>,
    ) -> Result<Option<Outcome>, Retry> {
        if let Some(o) = self.submit_data(w, b, Hold { _chunk: chunk.clone(), _own: None }).await? {
            return Ok(Some(o));
        }
        if chunk.is_none() {
            return self.drain(w).await;
        }
        Ok(None)
    }

    /// The failure for an append due at destination offset `expected` that landed at `base`
    /// after an earlier one went wrong (`why`).
    pub(super) fn misplaced(&self, expected: i64, base: i64, why: &str) -> Outcome {
        let (topic, p) = (&self.topic, self.partition);
        fail(
            format!("destination appended a batch of {topic}-{p} due at offset {expected} at offset {base} after {why}: the destination holds records at the wrong offsets; delete and re-create the destination topic to re-seed it"),
            false,
        )
    }

    fn mismatch(&self, b: &Batch, expected: i64, at: i64) -> Outcome {
        fail(format!("mirror position mismatch for {}-{}: source batch {} maps to destination {expected} but the destination is at {at}", self.topic, self.partition, b.base_offset()), false)
    }

    /// Submits the dense data batch `b` as it is (header patched: base offset 0, this
    /// partition's producer id, epoch and next sequence, transactional bit cleared) at
    /// `w.dest_next`; see [`PartitionTask::submit`].
    async fn submit_data(&self, w: &mut Writer<'_>, b: &Batch, hold: Hold) -> Result<Option<Outcome>, Retry> {
        let expected = b.base_offset() - w.shift;
        if expected != w.dest_next {
            return Ok(Some(self.mismatch(b, expected, w.dest_next)));
        }
        let header = batch::patch_header(
            b,
            &HeaderPatch {
                // Kafka 4 refuses client batches whose baseOffset is not 0 (LogValidator:
                // "The baseOffset of the record batch ... should be 0"); it assigns offsets.
                base_offset: Some(0),
                producer_id: Some(w.producer_id),
                producer_epoch: Some(w.producer_epoch),
                base_sequence: Some(w.next_seq),
                clear_transactional: true,
                base_timestamp: None,
            },
        );
        // The payload goes to the socket as the slice of the fetch response it came in.
        let segments = vec![Bytes::copy_from_slice(&header), b.payload()];
        let sent = Sent {
            expected,
            count: i64::from(b.last_offset_delta()) + 1,
            source_next: b.next_offset(),
            bytes: b.bytes().len(),
            records: i64::from(b.record_count()),
            behind: false,
            merged: 1,
            recompressed: false,
            max_ts: b.max_timestamp(),
        };
        self.submit(w, segments, sent, hold).await
    }

    /// Submits one batch (`segments`, landing where `sent` says, which must be `w.dest_next`)
    /// without waiting for its answer; first waits for the oldest append when
    /// [`MAX_APPENDS_IN_FLIGHT`] are in flight. `hold` is kept until the append is answered.
    async fn submit(
        &self,
        w: &mut Writer<'_>,
        segments: Vec<Bytes>,
        mut sent: Sent,
        hold: Hold,
    ) -> Result<Option<Outcome>, Retry> {
        // Several appends in flight only while the broker surely holds this producer's state
        // (an append of this alignment was acknowledged, and the batch is too recent for the
        // state to expire, `producer.id.expiration.ms` counting from the batch's max
        // timestamp): only then does it refuse what follows a failed append
        // (OUT_OF_ORDER_SEQUENCE_NUMBER) instead of appending it at the failed one's offset.
        let alone = !w.may_pipeline(sent.max_ts);
        if w.inflight.is_full() || alone {
            let settled = if alone { self.drain(w).await? } else { self.settle_one(w).await? };
            if let Some(o) = settled {
                return Ok(Some(o));
            }
        }
        sent.behind = !w.inflight.is_empty();
        match self.writer.submit(&self.mirror, &self.topic, self.partition, segments, sent.behind).await {
            Ok(answer) => {
                w.inflight.pending.push_back((InFlight { answer, sent }, hold));
                w.appended(sent.count);
                if alone {
                    return self.drain(w).await;
                }
                Ok(None)
            }
            Err(e) => {
                // Not sent: what came before it is answered first, then the error counts.
                if let Some(o) = self.drain(w).await? {
                    return Ok(Some(o));
                }
                self.judge(&sent, Err(e))
            }
        }
    }

    /// Waits for the oldest append in flight (nothing to do when none is) and takes its
    /// answer: see [`PartitionTask::settled`].
    pub(super) async fn settle_one(&self, w: &mut Writer<'_>) -> Result<Option<Outcome>, Retry> {
        match w.inflight.next().await {
            Some((sent, answer)) => self.settled(w, sent, answer).await,
            None => Ok(None),
        }
    }

    /// Waits for every append in flight, oldest first; stops at the first failure.
    async fn drain(&self, w: &mut Writer<'_>) -> Result<Option<Outcome>, Retry> {
        while !w.inflight.is_empty() {
            if let Some(o) = self.settle_one(w).await? {
                return Ok(Some(o));
            }
        }
        Ok(None)
    }

    /// Submits the batches waiting to be merged, then waits for every append in flight: after
    /// it, `w.dest_next` is the acknowledged destination log end.
    pub(super) async fn settle_all(&self, w: &mut Writer<'_>) -> Result<Option<Outcome>, Retry> {
        if let Some(o) = self.flush_run(w).await? {
            return Ok(Some(o));
        }
        self.drain(w).await
    }

    /// Takes the answer of the oldest append in flight: acknowledged at its offset, it moves
    /// the partition's progress and metrics; anything else is the loop's outcome, once every
    /// later append was answered too (their answers only add whether an outcome is unknown).
    pub(super) async fn settled(
        &self,
        w: &mut Writer<'_>,
        sent: Sent,
        answer: Result<i64, MuxError>,
    ) -> Result<Option<Outcome>, Retry> {
        if answer.as_ref().is_ok_and(|base| *base == sent.expected) {
            w.state_ts = Some(sent.max_ts);
            crate::mirror::metrics::record_append(&self.mirror, sent.bytes, sent.records);
            if sent.merged > 1 {
                crate::mirror::metrics::record_coalesced(&self.mirror, sent.merged);
                if sent.recompressed {
                    crate::mirror::metrics::record_recompressed(&self.mirror, sent.merged);
                }
            }
            if let Some(mut g) = self.control.progress(&self.topic, self.partition) {
                g.destination_end = g.destination_end.max(sent.expected + sent.count);
                g.next_source = g.next_source.max(sent.source_next);
                self.control.set_progress(&self.topic, self.partition, g);
            }
            return Ok(None);
        }
        let (later_ambiguous, misplaced) = w.inflight.quiesce_after_failure().await;
        if let Some((expected, base)) = misplaced {
            let why = match &answer {
                Ok(b) => format!("the append due at {} landed at {b}", sent.expected),
                Err(e) => format!("the append due at {} failed: {e}", sent.expected),
            };
            return Ok(Some(self.misplaced(expected, base, &why)));
        }
        match self.judge(&sent, answer) {
            Err(mut r) => {
                r.after_ambiguous_append |= later_ambiguous;
                Err(r)
            }
            other => other,
        }
    }

    /// What an append's answer means for the loop: `Ok(None)` when it landed where `sent`
    /// says; a failure naming both offsets when it landed elsewhere; a [`Retry`] (after the
    /// request timeout when the outcome is unknown, DESIGN §4.6) or a failure for an error,
    /// by [`errors::classify`]. A merged batch the destination refuses turns merging off
    /// for the partition and re-aligns (the batches are then appended as they are).
    pub(super) fn judge(&self, sent: &Sent, answer: Result<i64, MuxError>) -> Result<Option<Outcome>, Retry> {
        let (topic, p, expected) = (&self.topic, self.partition, sent.expected);
        match answer {
            Ok(base) if base == expected => Ok(None),
            // (Also an offset below the one due: the broker may have taken it for a resend
            // of a batch it holds with the same producer id, epoch and sequences, appending
            // nothing — or, holding no state of the producer, appended it after a
            // truncation. The two cannot be told apart from the answer: failed, never
            // re-aligned over.)
            Ok(base) => Ok(Some(fail(
                format!("destination appended {topic}-{p} at offset {base}, expected {expected}; something else writes to this mirror partition"),
                false,
            ))),
            // The append may or may not have landed: `run` waits until any request in flight
            // has timed out on the broker, then re-reads the log end (DESIGN §4.6).
            Err(MuxError::Ambiguous(e)) => {
                Err(Retry { why: format!("ambiguous append: {e}"), after_ambiguous_append: true })
            }
            // OUT_OF_ORDER_SEQUENCE_NUMBER behind another append in flight: that one's
            // leader moved (it may have landed on the old leader and not be replicated yet to
            // the new one): re-align.
            Err(MuxError::Kafka(45, _)) if sent.behind => Err(Retry::new(format!(
                "append to {topic}-{p} at {expected} refused as out of sequence behind an append in flight (leader moved?)"
            ))),
            // OUT_OF_ORDER_SEQUENCE_NUMBER on its own: another append with this partition's
            // producer id landed first — an instance that lost the partition, or this
            // instance's earlier life (a Produce of a process killed during a network cut,
            // which TCP delivered when the cut healed, after the restart aligned). Sequence =
            // offset let it land only where it belongs, with the same records: re-align from
            // the destination log end and go on (the stall guard fails the partition if this
            // never makes progress). A foreign producer never causes this error: its records
            // move the base offset, refused above as "landed at". (issue 33 item 5)
            Err(MuxError::Kafka(45, _)) => Err(Retry::new(format!(
                "destination refused the append to {topic}-{p} at {expected} as out of sequence: another append with this partition's producer id landed first (an instance that lost the partition, or this one before a restart); re-aligning"
            ))),
            // MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, CORRUPT_MESSAGE, INVALID_TIMESTAMP,
            // INVALID_RECORD: about the batch itself.
            Err(MuxError::Kafka(code @ (10 | 18 | 2 | 32 | 87), message)) if sent.merged > 1 => {
                let m = errors::refusal("destination", code, message.as_deref(), topic, p, expected);
                tracing::warn!(mirror = %self.mirror, topic = %topic, partition = p, error = %m, "the destination refused a batch of merged source batches: merging is off for this partition, the batches are appended as they are");
                self.coalesce_refused.store(true, std::sync::atomic::Ordering::Relaxed);
                Err(Retry::new(format!("merged batch refused: {m}")))
            }
            Err(MuxError::Kafka(code, message)) => {
                let m = errors::refusal("destination", code, message.as_deref(), topic, p, expected);
                match errors::classify(code) {
                    ErrorClass::Transient => Err(Retry::new(format!("append failed: {m}"))),
                    ErrorClass::FailRetryable => Ok(Some(fail(m, true))),
                    ErrorClass::FailPermanent => Ok(Some(fail(m, false))),
                }
            }
            Err(e) => Err(Retry::new(format!("append failed: {e}"))),
        }
    }
}

impl Sent {
    /// An append waited for at once (placeholders, split runs): `count` offsets at
    /// `expected`, nothing in flight before it.
    pub(super) fn single(expected: i64, count: i64) -> Self {
        Self {
            expected,
            count,
            source_next: 0,
            bytes: 0,
            records: 0,
            behind: false,
            merged: 1,
            recompressed: false,
            max_ts: 0,
        }
    }
}
