//! Real transaction markers and aborted records on the destination (issue 12 item 2; the
//! design and the broker facts T0–T7 it rests on are in docs/real-markers.md, pinned by
//! `tests/broker_txn.rs`).
//!
//! With `mirror.transaction.markers = real` a mirror partition's copy loop writes
//! - a source COMMIT marker, and an ABORT marker of a transaction that left no record on the
//!   destination partition, as an empty transaction of the partition's *marker* transactional
//!   id: AddPartitionsToTxn → EndTxn → the coordinator writes the marker at the log end (T1);
//! - the records of an aborted source transaction as transactional batches of a *slot*
//!   transactional id (one open slot per aborted source producer), whose EndTxn(ABORT) at the
//!   source's ABORT marker offset writes the marker (T2).
//!
//! Client protocol V1 everywhere (AddPartitionsToTxn v3, Produce v11, EndTxn v4): it exists on
//! Kafka 3.9 to 4.x and keeps the producer epoch across transactions (T0). Nothing else is
//! appended to a partition between an EndTxn and its marker: the loop waits until the log end
//! is the marker offset + 1 (T4, T6). The data producer keeps its own contiguous sequence
//! ([`resume_sequence`], T5).
//!
//! Nothing about transactions is kept in `__mirror_state`: after a restart (or any re-align)
//! [`Txns::recover`] asks the transaction coordinator (DescribeTransactions, T3) and the
//! partition leader (DescribeProducers) what is open, and resumes it without InitProducerId,
//! which would abort an open transaction at the log end (T4); such an id is fenced with
//! InitProducerId once its transaction ended, and every id with nothing open is fenced at once
//! (issue 33 item 4). Every transactional request goes through [`coord::Leased`]: not sent
//! without the partition's lease, its connection reset when the lease ends.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use bytes::Bytes;

use crate::client::txn::{self, AnyBroker, TxnDescription, TxnError, TxnProducer, TxnProtocol};
use crate::mirror::model::{self, OffsetSegment};
use crate::wire::batch::{self, Batch, HeaderPatch};
use crate::wire::produce::ProduceFrameBuilder;

use super::coord::{self, CoordConns, Leased, ProduceFailed};
use super::errors::{self, ErrorClass};
use super::partition::{
    fail, failpoint, init_producer_id, is_abort_marker, next_sequence, retry, Outcome, PartitionTask, Retry, Writer,
};

mod landed;
mod opening;

use landed::{batch_and_high_watermark, batch_at, hide_extra_markers, landed, wait_marker, Landed};
pub(super) use opening::{slot_opening, SlotOpening};

/// Transaction timeout of the marker transactional id, ms: it is open only between an
/// AddPartitionsToTxn and the EndTxn that follows it.
const MARKER_TXN_TIMEOUT_MS: i32 = 60_000;
/// Transaction timeout of a slot, ms: Kafka's default `transaction.max.timeout.ms` (15 min).
/// A slot stays open while the source keeps the aborted transaction's marker above its last
/// stable offset (another source transaction still open); a destination whose maximum is lower
/// gets [`SLOT_TXN_TIMEOUT_FALLBACK_MS`].
const SLOT_TXN_TIMEOUT_MS: i32 = 900_000;
const SLOT_TXN_TIMEOUT_FALLBACK_MS: i32 = 60_000;
/// How long a marker may take to appear in the partition after EndTxn (1–140 ms on an idle
/// broker, T1).
const MARKER_WAIT: Duration = Duration::from_secs(30);
/// Produce version of slot batches: the last one before Produce v12 adds a partition to the
/// transaction by itself on a `transaction.version` 2 cluster (KIP-890 part 2).
const SLOT_PRODUCE_VERSION: i16 = 11;
/// Kafka error codes met here.
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

/// One aborted-data slot: a transactional id `….a<index>` with its producer identity and the
/// sequence of its next batch on this partition.
#[derive(Debug, Clone)]
struct Slot {
    index: u32,
    producer: TxnProducer,
    next_seq: i32,
}

/// The transactions of one mirror partition's writer, rebuilt by [`Txns::recover`] at every
/// (re-)alignment.
#[derive(Debug, Default)]
pub(super) struct Txns {
    /// The marker transactional id's producer, once known.
    marker: Option<TxnProducer>,
    /// The partition is in the marker id's open transaction (AddPartitionsToTxn done, EndTxn
    /// not yet).
    marker_open: bool,
    /// Slots with an open transaction on this partition, by the *source* producer id whose
    /// aborted records they hold.
    open: HashMap<i64, Slot>,
    /// Slots without an open transaction.
    free: BTreeMap<u32, Slot>,
    /// A slot whose transaction holds this partition but no record yet (a restart between
    /// AddPartitionsToTxn and the first Produce): the next aborted source transaction takes it,
    /// or the next marker ends it.
    orphan: Option<Slot>,
    /// The first slot index the coordinator does not know.
    next_index: u32,
    /// Transaction coordinator per transactional id (forgotten on any error).
    coordinators: HashMap<String, i32>,
    /// Transactional ids resumed in an open transaction at the epoch the coordinator reported
    /// (not fenced yet): each is fenced with InitProducerId right after that transaction ends.
    unfenced: HashSet<String>,
    /// The connections of this partition's transactional requests ([`coord::Leased`]).
    conns: CoordConns,
    /// `transactions_used` is recorded in the partition's state.
    pub(super) used: bool,
}

/// The data producer's next sequence after a (re-)alignment: `last_sequence + 1` of its
/// producer id on the destination partition (DescribeProducers, T5), or, when the broker holds
/// no state for it (never written, or expired: it then accepts any sequence, broker-behaviour
/// pin 3), the offset-derived one already in `w` with placeholders only (both are the same), or,
/// with real markers, sequence 0 of the producer's next epoch (persisted before it is used).
///
/// # Errors
/// [`Retry`] when DescribeProducers fails and real markers are on (a guessed sequence would
/// be refused, T7); with placeholders the offset-derived sequence stays.
pub(super) async fn resume_sequence(task: &PartitionTask, w: &mut Writer<'_>, real: bool) -> Result<(), Retry> {
    match task.dest.describe_producers(&task.topic, task.partition).await {
        Ok(producers) => {
            let ours =
                producers.iter().find(|a| a.producer_id == w.producer_id && a.producer_epoch == w.producer_epoch);
            match ours {
                Some(a) if a.last_sequence >= 0 => w.next_seq = next_sequence(a.last_sequence, 1),
                _ if real && w.dest_next > 0 => {
                    // With real markers the offset-derived sequence is not the producer's. The
                    // producer's epoch is bumped (sequence 0 again, accepted by every replica,
                    // Kafka `ProducerAppendInfo.checkSequence`) rather than a new producer id
                    // taken: once a batch of the new epoch lands, the leader refuses any batch
                    // of an older one (`checkProducerEpoch`), so an append another writer of
                    // this partition (an instance that lost it) still had on the wire cannot
                    // land after ours. A new producer id only when the epoch is exhausted.
                    let seen =
                        producers.iter().filter(|a| a.producer_id == w.producer_id).map(|a| a.producer_epoch).max();
                    let current = seen.unwrap_or(w.producer_epoch).max(w.producer_epoch);
                    let (id, epoch) = if current < i16::MAX - 1 {
                        (w.producer_id, current + 1)
                    } else {
                        init_producer_id(&task.dest).await.map_err(|e| Retry::new(format!("InitProducerId: {e}")))?
                    };
                    task.control
                        .update_partition(&task.topic, task.partition, |r| {
                            r.producer_id = Some(id);
                            r.producer_epoch = Some(epoch);
                        })
                        .await
                        .map_err(|e| Retry::new(e.to_string()))?;
                    tracing::debug!(topic = %task.topic, partition = task.partition, producer_id = id, old_epoch = w.producer_epoch, producer_epoch = epoch, "the destination holds no state of the partition's producer at its epoch: the epoch is bumped, sequences start at 0");
                    (w.producer_id, w.producer_epoch, w.next_seq) = (id, epoch, 0);
                }
                _ => {}
            }
            Ok(())
        }
        Err(e) if real => {
            if e.kafka_error().is_some_and(|c| c.0 == TOPIC_AUTHORIZATION_FAILED) {
                refuse(task, &format!("DescribeProducers of the destination topic was refused ({e}); grant mirrorgate's principal Read on it"));
            }
            Err(Retry::new(format!("DescribeProducers of the destination: {e}")))
        }
        Err(e) => {
            tracing::debug!(topic = %task.topic, partition = task.partition, error = %e, "DescribeProducers failed; the data producer's sequence follows the destination offset");
            Ok(())
        }
    }
}

/// Real markers are not possible on this destination for `task`'s partition: its loop
/// re-aligns and writes placeholders from then on (logged once per loop).
fn refuse(task: &PartitionTask, why: &str) {
    if !task.markers_refused.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!(mirror = %task.mirror, topic = %task.topic, partition = task.partition, "real transaction markers are not possible: {why}; markers and aborted records are written as placeholders instead (reads through mirrorgate are unchanged; set mirror.transaction.markers=placeholder to silence this)");
    }
}

impl Txns {
    /// `mirrorgate.<length of the mirror name>.<mirror>.<topic>.<partition>.<suffix>`: the
    /// length keeps ids of different mirror/topic pairs apart when names contain dots.
    fn txn_id(task: &PartitionTask, suffix: &str) -> String {
        coord::txn_id(&task.mirror, &task.topic, task.partition, suffix)
    }

    fn marker_id(task: &PartitionTask) -> String {
        Self::txn_id(task, "m")
    }

    fn slot_id(task: &PartitionTask, index: u32) -> String {
        Self::txn_id(task, &format!("a{index}"))
    }

    /// Whether a transaction of ours is open on the partition (a slot, the orphan, or the
    /// marker id).
    pub(super) fn any_open(&self) -> bool {
        !self.open.is_empty() || self.orphan.is_some() || self.marker_open
    }

    /// Whether a slot holds an open transaction for source producer `source_pid`.
    pub(super) fn is_open(&self, source_pid: i64) -> bool {
        self.open.contains_key(&source_pid)
    }

    /// Rebuilds the partition's transactions from the coordinator and the partition leader:
    /// the marker id's state (an open empty transaction is kept open and ended when the copy
    /// reaches the marker), every slot `a0, a1, …` up to the first id the coordinator does not
    /// know, and for an open slot the source producer it holds (the source batch at the slot's
    /// first destination offset, DescribeProducers `current_txn_start_offset`). A transaction
    /// still being completed (PrepareCommit/PrepareAbort) makes the loop re-align later.
    /// Then checks that a control batch of mirrorgate's ending the destination sits where the
    /// source has a marker: a transaction the coordinator aborted on its timeout puts its
    /// marker at the log end of that moment (T4), which the copy must not build on.
    ///
    /// # Errors
    /// [`Retry`] for transient failures; `Ok(Some(outcome))` when the partition must fail.
    pub(super) async fn recover(
        &mut self,
        task: &PartitionTask,
        w: &Writer<'_>,
        segments: &[OffsetSegment],
    ) -> Result<Option<Outcome>, Retry> {
        *self = Txns { conns: std::mem::take(&mut self.conns), ..Txns::default() };
        if !task.record().is_some_and(|r| r.transactions_used) {
            return Ok(None);
        }
        self.used = true;
        let producers = task.dest.describe_producers(&task.topic, task.partition).await.map_err(retry)?;
        let marker_id = Self::marker_id(task);
        if let Some(d) = self.describe(task, &marker_id).await? {
            completing(&marker_id, &d)?;
            let producer = TxnProducer::resume(&marker_id, d.producer_id, d.producer_epoch, TxnProtocol::V1);
            match d.state.as_str() {
                "Dead" => {}
                "Ongoing" => {
                    // Ended when the copy reaches its marker, then fenced.
                    self.marker = Some(producer);
                    self.marker_open = true;
                    self.unfenced.insert(marker_id.clone());
                }
                // Nothing open: fenced now (a new epoch, nothing written to the partition), so
                // a request of an instance that used it before is refused from here on.
                _ => self.marker = Some(self.fence(task, &marker_id, MARKER_TXN_TIMEOUT_MS).await?),
            }
        }
        let mut index = 0u32;
        loop {
            let id = Self::slot_id(task, index);
            let Some(d) = self.describe(task, &id).await? else { break };
            completing(&id, &d)?;
            let producer = TxnProducer::resume(&id, d.producer_id, d.producer_epoch, TxnProtocol::V1);
            // (Sequences start over at 0 with a new epoch: an entry of an older epoch says
            // nothing about the next one.)
            let state =
                producers.iter().find(|a| a.producer_id == d.producer_id && a.producer_epoch == d.producer_epoch);
            let next_seq = state.filter(|a| a.last_sequence >= 0).map_or(0, |a| next_sequence(a.last_sequence, 1));
            let mut slot = Slot { index, producer, next_seq };
            if d.state == "Ongoing" {
                self.unfenced.insert(id.clone());
            }
            match (d.state.as_str(), state) {
                ("Dead", _) => {}
                ("Ongoing", Some(a)) if a.current_txn_start_offset >= 0 => {
                    let source_offset = model::source_offset(segments, a.current_txn_start_offset);
                    let Some(source_pid) = self.source_producer_at(task, source_offset).await? else {
                        return Ok(Some(fail(
                            format!(
                                "{}-{}: mirrorgate's open transaction {id} starts at destination offset {} but the source has no batch at offset {source_offset} any more; delete the destination topic to re-seed it",
                                task.topic, task.partition, a.current_txn_start_offset
                            ),
                            false,
                        )));
                    };
                    self.open.insert(source_pid, slot);
                }
                ("Ongoing", _) => self.orphan = Some(slot),
                _ => {
                    // Free: fenced now, its sequences start over with the new epoch.
                    slot.producer = self.fence(task, &id, SLOT_TXN_TIMEOUT_MS).await?;
                    slot.next_seq = 0;
                    self.free.insert(index, slot);
                }
            }
            index += 1;
        }
        self.next_index = index;
        self.check_last_marker(task, w, segments).await
    }

    /// See [`Txns::recover`]: the control batches of mirrorgate's transactional producers
    /// ending the destination must be markers on the source too. From the first that is not
    /// (the source has a record there, or nothing yet), they are hidden behind a new offset
    /// segment ([`hide_extra_markers`]) and the loop re-aligns; one whose source offset
    /// retention already removed is taken as it is.
    async fn check_last_marker(
        &self,
        task: &PartitionTask,
        w: &Writer<'_>,
        segments: &[OffsetSegment],
    ) -> Result<Option<Outcome>, Retry> {
        let last = w.dest_next - 1;
        if last < 0 {
            return Ok(None);
        }
        let ours: HashSet<i64> = self
            .marker
            .iter()
            .map(|p| p.producer_id)
            .chain(
                self.open.values().chain(self.free.values()).chain(self.orphan.iter()).map(|s| s.producer.producer_id),
            )
            .collect();
        // Every trailing marker of ours, from the last offset down (several transactions timed
        // out at once all put their marker at the same log end, one after the other).
        let mut trailing = Vec::new();
        let mut at = last;
        while at >= 0 {
            let Some(dest_batch) = batch_at(&task.dest, &task.topic, task.partition, at).await? else { break };
            if !dest_batch.is_control() || !ours.contains(&dest_batch.producer_id()) {
                break;
            }
            trailing.push((at, dest_batch));
            at -= 1;
        }
        for (at, dest_batch) in trailing.into_iter().rev() {
            if model::is_hidden(segments, at) {
                continue; // hidden before a restart
            }
            let source_offset = model::source_offset(segments, at);
            let (found, source_hw) =
                batch_and_high_watermark(&task.source, &task.topic, task.partition, source_offset).await?;
            let accepted = match found {
                // The source's marker; when a slot is open for its producer, only that slot's
                // marker stands for it (a duplicate of an earlier marker does not end it).
                Some(src) if src.is_control() && src.base_offset() == source_offset => {
                    let slot = self.open.get(&src.producer_id()).map(|s| s.producer.producer_id);
                    let ours = slot.is_none_or(|pid| pid == dest_batch.producer_id());
                    if ours && is_abort_marker(&src) != is_abort_marker(&dest_batch) {
                        tracing::warn!(mirror = %task.mirror, topic = %task.topic, partition = task.partition, destination_offset = at, source_offset, "a source COMMIT marker was written as ABORT (the destination's coordinator timed the empty transaction out); consumers skip both alike");
                    }
                    ours
                }
                Some(_) => false,
                // No batch there: below the source's high watermark of the same answer, the
                // marker was removed by compaction (nothing to compare with); at or above it,
                // the source has nothing there yet, so the marker is extra. Out of range:
                // below the log start (retention removed it), or above the log end (extra).
                None => match source_hw {
                    Some(hw) if source_offset < hw => true,
                    // A new source leader's high watermark may lag its log for a moment
                    // (KIP-207): confirm with ListOffsets latest, which it answers
                    // OFFSET_NOT_AVAILABLE until then (retried); a source that moved on
                    // meanwhile is looked at again after a re-align.
                    Some(_) => {
                        let latest = task.source.list_offsets(&task.topic, task.partition, -1).await.map_err(retry)?;
                        if latest > source_offset {
                            return Err(Retry::new(format!(
                                "source {}-{} grew past offset {source_offset} while mirrorgate's trailing transaction markers were checked",
                                task.topic, task.partition
                            )));
                        }
                        false
                    }
                    None => {
                        source_offset
                            < task.source.list_offsets(&task.topic, task.partition, -2).await.map_err(retry)?
                    }
                },
            };
            if !accepted {
                tracing::warn!(mirror = %task.mirror, topic = %task.topic, partition = task.partition, destination_offset = at, producer_id = dest_batch.producer_id(), source_offset, "destination offset is a transaction marker of mirrorgate's where the source has none");
                if let Some(o) = hide_extra_markers(task, segments.to_vec(), at, last + 1, source_offset).await? {
                    return Ok(Some(o));
                }
                return Err(Retry::new(format!(
                    "destination offsets {at}..{last} of {}-{} hidden behind a new offset segment (transaction markers of mirrorgate's where the source has none)",
                    task.topic, task.partition
                )));
            }
        }
        Ok(None)
    }

    /// The producer id of the source batch holding `offset`, if the source still has it.
    async fn source_producer_at(&self, task: &PartitionTask, offset: i64) -> Result<Option<i64>, Retry> {
        Ok(batch_at(&task.source, &task.topic, task.partition, offset).await?.map(|b| b.producer_id()))
    }

    async fn coordinator(&mut self, task: &PartitionTask, id: &str) -> Result<i32, Retry> {
        if let Some(node) = self.coordinators.get(id) {
            return Ok(*node);
        }
        if !self.used {
            // Before anything of this partition can be open in a transaction.
            task.control
                .update_partition(&task.topic, task.partition, |r| r.transactions_used = true)
                .await
                .map_err(|e| Retry::new(e.to_string()))?;
            self.used = true;
        }
        let (node, _, _) =
            txn::find_coordinator(&mut AnyBroker(&task.dest), id).await.map_err(|e| self.txn_retry(e))?;
        if !task.dest.metadata().brokers.contains_key(&node) {
            let _ = task.dest.refresh_metadata(Some(&[task.topic.as_str()])).await;
        }
        self.coordinators.insert(id.to_owned(), node);
        Ok(node)
    }

    fn txn_retry(&mut self, e: TxnError) -> Retry {
        self.coordinators.clear();
        Retry::new(format!("destination transaction coordinator: {e}"))
    }

    /// Every transaction error re-aligns; a transactional-id refusal also switches the
    /// partition to placeholders (logged with what to grant).
    fn txn_error(&mut self, task: &PartitionTask, e: TxnError) -> Retry {
        if e.code() == Some(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) {
            refuse(
                task,
                &format!("the destination refused mirrorgate's transactional id ({e}); grant its principal Write and Describe on TransactionalId resources with the prefix 'mirrorgate.'"),
            );
        }
        self.txn_retry(e)
    }

    async fn describe(&mut self, task: &PartitionTask, id: &str) -> Result<Option<TxnDescription>, Retry> {
        let node = self.coordinator(task, id).await?;
        let described = txn::describe(&mut leased(task, &mut self.conns, node), id).await;
        described.map_err(|e| self.txn_retry(e))
    }

    /// InitProducerId of `id` (a transaction of it is not open): a new epoch, so that a
    /// request another instance (one that owned the partition before) still sends at the old
    /// one is refused by the coordinator (`PRODUCER_FENCED`).
    async fn fence(&mut self, task: &PartitionTask, id: &str, timeout_ms: i32) -> Result<TxnProducer, Retry> {
        self.coordinator(task, id).await?;
        let p = match self.init(task, id, timeout_ms).await {
            Ok(p) => p,
            Err(e) => return Err(self.txn_error(task, e)),
        };
        self.unfenced.remove(id);
        tracing::debug!(topic = %task.topic, partition = task.partition, transactional_id = id, producer_id = p.producer_id, producer_epoch = p.producer_epoch, "transactional id fenced");
        Ok(p)
    }

    async fn init(&mut self, task: &PartitionTask, id: &str, timeout_ms: i32) -> Result<TxnProducer, TxnError> {
        let node = self.coordinators.get(id).copied().unwrap_or(-1);
        let mut conn = leased(task, &mut self.conns, node);
        match TxnProducer::init(&mut conn, id, timeout_ms, TxnProtocol::V1).await {
            Err(e) if e.code() == Some(INVALID_TRANSACTION_TIMEOUT) && timeout_ms > SLOT_TXN_TIMEOUT_FALLBACK_MS => {
                TxnProducer::init(&mut conn, id, SLOT_TXN_TIMEOUT_FALLBACK_MS, TxnProtocol::V1).await
            }
            other => other,
        }
    }

    /// Writes the source control batch `b` (one marker at source offset `b.base_offset()`,
    /// destination offset `w.dest_next`): the EndTxn(ABORT) of the slot holding the aborted
    /// records of `b`'s producer, or else a lone marker of `b`'s type through the marker id.
    /// Returns when the marker is in the destination log, `w` moved past it.
    pub(super) async fn write_marker(
        &mut self,
        task: &PartitionTask,
        w: &mut Writer<'_>,
        b: &Batch,
    ) -> Result<Option<Outcome>, Retry> {
        let expected = b.base_offset() - w.shift;
        if expected != w.dest_next {
            return Ok(Some(mismatch(task, b.base_offset(), expected, w.dest_next)));
        }
        let commit = !is_abort_marker(b);
        if !commit {
            if let Some(slot) = self.open.remove(&b.producer_id()) {
                return self.end_slot(task, w, slot, false).await;
            }
        }
        // A slot left open with no record (a restart between its AddPartitionsToTxn and its
        // first Produce) ends here: its marker lands at this offset, as the source's does
        // (consumers skip a COMMIT or ABORT of a producer with no record alike).
        if let Some(slot) = self.orphan.take() {
            return self.end_slot(task, w, slot, commit).await;
        }
        let id = Self::marker_id(task);
        let node = self.coordinator(task, &id).await?;
        let producer = match self.marker.clone() {
            Some(p) => p,
            None => match self.init(task, &id, MARKER_TXN_TIMEOUT_MS).await {
                Ok(p) => {
                    self.marker = Some(p.clone());
                    p
                }
                Err(e) => return Err(self.txn_error(task, e)),
            },
        };
        if !self.marker_open {
            failpoint("marker-add");
            let added = producer
                .add_partitions(&mut leased(task, &mut self.conns, node), &[(task.topic.as_str(), task.partition)])
                .await;
            match added {
                Ok(codes) if codes.first() == Some(&0) => self.marker_open = true,
                Ok(codes) => {
                    let code = codes.first().copied().unwrap_or(-1);
                    if matches!(code, txn::PRODUCER_FENCED | txn::INVALID_PRODUCER_EPOCH) {
                        // Someone took the id over (another mirrorgate?): a new epoch next time.
                        self.marker = None;
                    }
                    return Err(
                        self.txn_error(task, TxnError::Kafka { api: "AddPartitionsToTxn", transactional_id: id, code })
                    );
                }
                Err(e) => return Err(self.txn_error(task, e)),
            }
        }
        let mut producer = producer;
        // Fencing: no marker from an instance that no longer owns the partition (the new
        // owner finishes or aborts what is open).
        if !task.control.owns_partition(&task.topic, task.partition) {
            return Err(Retry::new("this instance does not own the partition any more: no EndTxn".to_string()));
        }
        // Until the marker is known to have landed once, nothing from its offset on is
        // served: the coordinator may write it again (`hide_extra_markers`).
        task.control.hold_reads(&task.topic, task.partition, expected + 1);
        let ended = producer.end(&mut leased(task, &mut self.conns, node), commit).await;
        if let Err(e) = ended {
            if matches!(e.code(), Some(txn::PRODUCER_FENCED | txn::INVALID_PRODUCER_EPOCH)) {
                self.marker = None;
                self.marker_open = false;
            }
            return Err(self.txn_error(task, e));
        }
        self.marker_open = false;
        self.wait_complete(task, &id).await?;
        if self.unfenced.contains(&id) {
            self.marker = Some(self.fence(task, &id, MARKER_TXN_TIMEOUT_MS).await?);
        }
        landed(task, w, wait_marker(task, expected).await?).await
    }

    /// Waits (up to `MARKER_WAIT`) until the coordinator says transaction `id` is complete
    /// (no longer `PrepareCommit`/`PrepareAbort`): from then on it writes no marker. While it
    /// is preparing, it may still write the marker, and write it again: Kafka's coordinator
    /// re-sends WriteTxnMarkers to a partition's new leader when the old one did not answer,
    /// even if the old one had appended it (`TransactionMarkerChannelManager`). Nothing is
    /// appended to the partition before that, so no record lands between two copies.
    async fn wait_complete(&mut self, task: &PartitionTask, id: &str) -> Result<(), Retry> {
        let started = tokio::time::Instant::now();
        loop {
            match self.describe(task, id).await? {
                Some(d) if d.state.starts_with("Prepare") => {
                    if started.elapsed() > MARKER_WAIT {
                        return Err(Retry::new(format!(
                            "destination transaction {id} still {} after {} s",
                            d.state,
                            MARKER_WAIT.as_secs()
                        )));
                    }
                }
                _ => return Ok(()),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Ends `slot`'s transaction (COMMIT when `commit`) so that its marker lands at
    /// `w.dest_next`, waits for it, and frees the slot.
    async fn end_slot(
        &mut self,
        task: &PartitionTask,
        w: &mut Writer<'_>,
        mut slot: Slot,
        commit: bool,
    ) -> Result<Option<Outcome>, Retry> {
        let id = slot.producer.transactional_id.clone();
        let node = self.coordinator(task, &id).await?;
        if !task.control.owns_partition(&task.topic, task.partition) {
            return Err(Retry::new("this instance does not own the partition any more: no EndTxn".to_string()));
        }
        task.control.hold_reads(&task.topic, task.partition, w.dest_next + 1);
        let ended = slot.producer.end(&mut leased(task, &mut self.conns, node), commit).await;
        if let Err(e) = ended {
            return Err(self.txn_error(task, e));
        }
        self.wait_complete(task, &id).await?;
        if self.unfenced.contains(&id) {
            slot.producer = self.fence(task, &id, SLOT_TXN_TIMEOUT_MS).await?;
            slot.next_seq = 0;
        }
        let marker = wait_marker(task, w.dest_next).await?;
        if !matches!(marker, Landed::Failed(_)) {
            self.free.insert(slot.index, slot);
        }
        landed(task, w, marker).await
    }

    /// Writes the aborted source batch `b` (dense, starting at `w.dest_next` after the shift)
    /// as a transactional batch of the slot of `b`'s producer, opening a slot transaction
    /// (the orphan, the lowest free slot, or a new one) for a producer that has none.
    pub(super) async fn write_aborted(
        &mut self,
        task: &PartitionTask,
        w: &mut Writer<'_>,
        b: &Batch,
    ) -> Result<Option<Outcome>, Retry> {
        let expected = b.base_offset() - w.shift;
        if expected != w.dest_next {
            return Ok(Some(mismatch(task, b.base_offset(), expected, w.dest_next)));
        }
        // Fencing: aborted records go out with a Produce of their own, not through the
        // guarded ProduceMux.
        if !task.control.owns_partition(&task.topic, task.partition) {
            return Err(Retry::new(
                "this instance does not own the partition any more: no aborted records".to_string(),
            ));
        }
        let source_pid = b.producer_id();
        if !self.open.contains_key(&source_pid) {
            let slot = match self.orphan.take() {
                Some(slot) => slot,
                None => self.open_slot(task).await?,
            };
            self.open.insert(source_pid, slot);
        }
        let slot = self.open.get_mut(&source_pid).expect("inserted above");
        let header = batch::patch_header(
            b,
            &HeaderPatch {
                base_offset: Some(0),
                producer_id: Some(slot.producer.producer_id),
                producer_epoch: Some(slot.producer.producer_epoch),
                base_sequence: Some(slot.next_seq),
                clear_transactional: false,
                base_timestamp: None,
            },
        );
        let segments = vec![Bytes::copy_from_slice(&header), b.payload()];
        let leader = task.dest.leader_for(&task.topic, task.partition).await.map_err(retry)?.node_id;
        let id = slot.producer.transactional_id.clone();
        let client_id = task.dest.options().client_id.clone();
        let timeout_ms = task.request_timeout.as_millis().min(i32::MAX as u128) as i32;
        let (topic, p) = (task.topic.as_str(), task.partition);
        let sent = leased(task, &mut self.conns, leader)
            .produce(SLOT_PRODUCE_VERSION, |version| {
                let mut builder = ProduceFrameBuilder::new(version, 0, &client_id, -1, timeout_ms);
                builder.transactional_id(&id).partition(topic, p, segments);
                builder.finish()
            })
            .await;
        let resp = match sent {
            Ok(resp) => resp,
            Err(ProduceFailed::Ambiguous(e)) => {
                return Err(Retry {
                    why: format!("ambiguous append of aborted records: {e}"),
                    after_ambiguous_append: true,
                })
            }
            Err(ProduceFailed::NotSent(e)) => return Err(Retry::new(format!("append of aborted records: {e}"))),
        };
        let answer = resp
            .responses
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partition_responses.iter())
            .find(|r| r.index == p)
            .map(|r| (r.error_code, r.base_offset, r.error_message.as_ref().map(|m| m.to_string())));
        let count = i64::from(b.last_offset_delta()) + 1;
        match answer {
            Some((0, base, _)) if base == w.dest_next => {
                slot.next_seq = next_sequence(slot.next_seq, count);
                w.dest_next += count;
                failpoint("slot-append");
                Ok(None)
            }
            Some((0, base, _)) => Ok(Some(fail(
                format!("destination appended {topic}-{p} at offset {base}, expected {}; something else writes to this mirror partition", w.dest_next),
                false,
            ))),
            // A sequence the broker does not expect: re-align, which re-reads it (T7).
            Some((OUT_OF_ORDER_SEQUENCE_NUMBER, _, _)) => {
                Err(Retry::new(format!("aborted records of {topic}-{p} at {} refused as out of sequence", w.dest_next)))
            }
            Some((code, _, message)) => {
                let m = errors::refusal("destination", code, message.as_deref(), topic, p, w.dest_next);
                match errors::classify(code) {
                    ErrorClass::Transient => Err(Retry::new(format!("append failed: {m}"))),
                    ErrorClass::FailRetryable => Ok(Some(fail(m, true))),
                    ErrorClass::FailPermanent => Ok(Some(fail(m, false))),
                }
            }
            None => Err(Retry::new(format!("no Produce answer for {topic}-{p}"))),
        }
    }

    /// A slot with this partition added to its new transaction: the lowest free one, or a new
    /// index (InitProducerId). A free slot whose epoch someone else took gets a new one.
    async fn open_slot(&mut self, task: &PartitionTask) -> Result<Slot, Retry> {
        // InitProducerId would fence the new owner's open slot transaction.
        if !task.control.owns_partition(&task.topic, task.partition) {
            return Err(Retry::new(
                "this instance does not own the partition any more: no transaction opened".to_string(),
            ));
        }
        let mut slot = match self.free.pop_first() {
            Some((_, slot)) => slot,
            None => {
                let index = self.next_index;
                let id = Self::slot_id(task, index);
                self.coordinator(task, &id).await?;
                let producer = match self.init(task, &id, SLOT_TXN_TIMEOUT_MS).await {
                    Ok(p) => p,
                    Err(e) => return Err(self.txn_error(task, e)),
                };
                self.next_index += 1;
                Slot { index, producer, next_seq: 0 }
            }
        };
        let id = slot.producer.transactional_id.clone();
        for attempt in 0..2 {
            let node = self.coordinator(task, &id).await?;
            let added = slot
                .producer
                .add_partitions(&mut leased(task, &mut self.conns, node), &[(task.topic.as_str(), task.partition)])
                .await;
            let code = match added {
                Ok(codes) => codes.first().copied().unwrap_or(-1),
                Err(e) => return Err(self.txn_error(task, e)),
            };
            match code {
                0 => {
                    failpoint("slot-added");
                    return Ok(slot);
                }
                txn::PRODUCER_FENCED | txn::INVALID_PRODUCER_EPOCH if attempt == 0 => {
                    // The id was initialised elsewhere since: take a new epoch (no transaction
                    // of ours is open on it) and start its sequences over.
                    slot.producer = match self.init(task, &id, SLOT_TXN_TIMEOUT_MS).await {
                        Ok(p) => p,
                        Err(e) => return Err(self.txn_error(task, e)),
                    };
                    slot.next_seq = 0;
                }
                code => {
                    let e = TxnError::Kafka { api: "AddPartitionsToTxn", transactional_id: id.clone(), code };
                    return Err(self.txn_error(task, e));
                }
            }
        }
        Err(Retry::new(format!("cannot add {}-{} to the transaction of {id}", task.topic, task.partition)))
    }
}

/// Broker `node_id` for `task`'s transactional requests: sent only while the partition is
/// owned here under a valid lease, on `conns` ([`coord::Leased`]).
fn leased<'a>(task: &'a PartitionTask, conns: &'a mut CoordConns, node_id: i32) -> Leased<'a> {
    Leased { control: &task.control, dest: &task.dest, topic: &task.topic, partition: task.partition, conns, node_id }
}

/// A transaction still being completed (its markers being written) is waited for by
/// re-aligning later.
fn completing(id: &str, d: &TxnDescription) -> Result<(), Retry> {
    if d.state.starts_with("Prepare") {
        return Err(Retry::new(format!("destination transaction {id} is completing ({})", d.state)));
    }
    Ok(())
}

fn mismatch(task: &PartitionTask, source: i64, expected: i64, at: i64) -> Outcome {
    fail(
        format!(
            "mirror position mismatch for {}-{}: source offset {source} maps to destination {expected} but the destination is at {at}",
            task.topic, task.partition
        ),
        false,
    )
}
