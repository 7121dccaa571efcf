//! The walk of one Fetch answer: each source batch at or after the mirror position is
//! written at the destination offset its source offset maps to — a data batch copied with
//! its header patched, a gap before it filled, a marker or aborted records written as real
//! ones or as placeholders, a compacted batch split — so that every source offset of the
//! chunk has its destination offset before the next chunk's (offset identity).

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use crate::wire::batch::{Batch, BatchIter};

use super::super::markers::{self, SlotOpening};
use super::super::source::SourceChunk;
use super::copy::CopyState;
use super::{fail, is_abort_marker, Flow, Outcome, PartitionTask, Retry, Writer};

/// What the walk of one chunk tracks.
pub(super) struct ChunkWalk {
    /// Aborted transactions of the chunk not reached yet, `(producer id, first offset)`.
    aborted_pending: Vec<(i64, i64)>,
    /// Producers whose transaction is aborted from here until its ABORT marker (consumer
    /// logic).
    aborted_now: HashSet<i64>,
    /// This loop's share of the in-flight budget the fetched records take; a split that must
    /// wait for budget gives it up first (see `append_split`). Held until the chunk is
    /// settled.
    hold: Option<Arc<OwnedSemaphorePermit>>,
    /// Whether a batch of this chunk was copied yet.
    walked: bool,
    /// Whether the loop waits for the source LSO to pass an ABORT marker before it copies
    /// further (see `markers::slot_opening`).
    pub(super) parked: bool,
    /// Producers whose aborted transaction is written as placeholders for the rest of the
    /// chunk.
    placeholder_pids: HashSet<i64>,
}

/// How one batch of the walk ended.
enum BatchStep {
    /// Written (or already behind the mirror position): on to the next batch.
    Next,
    /// The rest of the chunk is fetched again from `c.next_src`.
    Refetch,
    /// The loop ends with this outcome.
    End(Outcome),
}

/// How one source batch is written.
struct BatchPlan {
    /// First source offset of the batch still to write: above its base when a copy cut short
    /// inside the batch resumes.
    from: i64,
    /// A marker or an aborted batch: no data for consumers.
    skip: bool,
    /// Fewer records than offsets (compaction holes): split.
    holey: bool,
    /// Written as a real marker or real aborted records (docs/real-markers.md), not as
    /// placeholders.
    real: bool,
}

impl PartitionTask {
    /// Walks the batches of `chunk` onto the destination, from `c.next_src`; returns the
    /// walk, which holds the chunk's in-flight budget until the chunk is settled.
    pub(super) async fn walk_chunk(
        &self,
        stop: &CancellationToken,
        w: &mut Writer<'_>,
        txns: &mut markers::Txns,
        c: &mut CopyState,
        chunk: &mut SourceChunk,
    ) -> Flow<ChunkWalk> {
        // Aborted transactions in this range (consumer logic: a producer is aborted from
        // its first offset until its ABORT marker).
        let mut walk = ChunkWalk {
            aborted_pending: chunk.aborted.clone(),
            aborted_now: HashSet::new(),
            hold: chunk.hold.take(),
            walked: false,
            parked: false,
            placeholder_pids: HashSet::new(),
        };
        let chunk = &*chunk;
        for b in BatchIter::new(chunk.records.clone()) {
            let b = b.map_err(|e| Retry::new(e.to_string()))?;
            match self.walk_batch(stop, w, txns, c, &mut walk, chunk, &b).await? {
                BatchStep::Next => {}
                BatchStep::Refetch => break,
                BatchStep::End(o) => return Ok(ControlFlow::Break(o)),
            }
        }
        Ok(ControlFlow::Continue(walk))
    }

    /// Writes one source batch `b` and moves `c.next_src` past it: the gap before it
    /// filled first, then the batch as its plan says ([`PartitionTask::write_batch`]).
    #[allow(clippy::too_many_arguments)]
    async fn walk_batch(
        &self,
        stop: &CancellationToken,
        w: &mut Writer<'_>,
        txns: &mut markers::Txns,
        c: &mut CopyState,
        walk: &mut ChunkWalk,
        chunk: &SourceChunk,
        b: &Batch,
    ) -> Result<BatchStep, Retry> {
        if b.next_offset() <= c.next_src {
            return Ok(BatchStep::Next);
        }
        walk.aborted_pending.retain(|(pid, first)| {
            if *first <= b.last_offset() {
                walk.aborted_now.insert(*pid);
                false
            } else {
                true
            }
        });
        self.note_source_epoch(c, b).await?;
        if b.base_offset() > c.next_src {
            if let Some(o) = self.gap(w, c.next_src, b.base_offset(), b.max_timestamp()).await? {
                return Ok(BatchStep::End(o));
            }
        }
        if std::mem::take(&mut c.resume_late) {
            if let Some(o) = self.gap(w, c.next_src.max(b.base_offset()), b.next_offset(), b.max_timestamp()).await? {
                return Ok(BatchStep::End(o));
            }
            c.next_src = b.next_offset();
            return Ok(BatchStep::Next);
        }
        let mut plan = match self.plan_batch(c, walk, b) {
            ControlFlow::Continue(plan) => plan,
            ControlFlow::Break(o) => return Ok(BatchStep::End(o)),
        };
        if plan.real && !b.is_control() && !txns.is_open(b.producer_id()) {
            match self.slot_opening(txns, walk, chunk, b) {
                SlotOpening::Open => {}
                SlotOpening::Placeholders => {
                    walk.placeholder_pids.insert(b.producer_id());
                    plan.real = false;
                }
                SlotOpening::Refetch { park } => {
                    walk.parked = park;
                    c.next_src = b.base_offset();
                    return Ok(BatchStep::Refetch);
                }
            }
        }
        walk.walked = true;
        if let Some(o) = self.write_batch(stop, w, txns, c, walk, b, &plan).await? {
            return Ok(BatchStep::End(o));
        }
        c.next_src = b.next_offset();
        Ok(BatchStep::Next)
    }

    /// A new source leader epoch starting at `b` is recorded (persisted) before the copy
    /// passes it; `c.last_epoch` follows the batches.
    async fn note_source_epoch(&self, c: &mut CopyState, b: &Batch) -> Result<(), Retry> {
        let epoch = b.partition_leader_epoch();
        if epoch > c.epochs.last().map_or(-1, |e| e.0) {
            // A new source leader epoch starts here: record it before copying past it.
            c.epochs.push((epoch, b.base_offset()));
            let snapshot = c.epochs.clone();
            self.control
                .update_partition(&self.topic, self.partition, |r| r.source_epochs = snapshot)
                .await
                .map_err(|e| Retry::new(e.to_string()))?;
        }
        c.last_epoch = epoch;
        Ok(())
    }

    /// How `b` is written: from where, and as data, a split, placeholders or real markers.
    /// A dense data batch the mirror position falls inside fails the partition for good.
    fn plan_batch(&self, c: &CopyState, walk: &mut ChunkWalk, b: &Batch) -> ControlFlow<Outcome, BatchPlan> {
        let (topic, p, next_src) = (self.topic.as_str(), self.partition, c.next_src);
        let skip = b.is_control() || (b.is_transactional() && walk.aborted_now.contains(&b.producer_id()));
        if b.is_control() && is_abort_marker(b) {
            walk.aborted_now.remove(&b.producer_id());
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
            return ControlFlow::Break(fail(
                format!(
                    "source batch {}..{} of {topic}-{p} straddles the mirror position {next_src}: the destination ends inside a batch the mirror appends whole; something else wrote to the destination or the source log was replaced",
                    b.base_offset(),
                    b.last_offset()
                ),
                false,
            ));
        }
        let mut real = skip && c.real_markers && from == b.base_offset() && (b.is_control() || !holey);
        if b.is_control() && crate::sabotage::active("skip-marker") {
            real = false;
        }
        ControlFlow::Continue(BatchPlan { from, skip, holey, real })
    }

    /// Whether the first aborted batch `b` of a source transaction opens a destination
    /// transaction, which must end (at the source's ABORT marker) well within its timeout:
    /// only when that marker is in this chunk. Never wait (or fetch again) while another one
    /// is open; a transaction written as placeholders stays placeholders for the rest of the
    /// chunk.
    fn slot_opening(&self, txns: &markers::Txns, walk: &ChunkWalk, chunk: &SourceChunk, b: &Batch) -> SlotOpening {
        if walk.placeholder_pids.contains(&b.producer_id()) {
            return SlotOpening::Placeholders;
        }
        match markers::slot_opening(&chunk.records, b, chunk.last_stable_offset, walk.walked) {
            SlotOpening::Refetch { .. } if txns.any_open() => SlotOpening::Placeholders,
            o => o,
        }
    }

    /// Writes `b` as `plan` says, at `w.dest_next`: real markers or aborted records after
    /// the appends in flight, placeholders for what is skipped, a split for a batch with
    /// holes, else the batch itself (merged with its neighbours where allowed).
    #[allow(clippy::too_many_arguments)]
    async fn write_batch(
        &self,
        stop: &CancellationToken,
        w: &mut Writer<'_>,
        txns: &mut markers::Txns,
        c: &mut CopyState,
        walk: &mut ChunkWalk,
        b: &Batch,
        plan: &BatchPlan,
    ) -> Result<Option<Outcome>, Retry> {
        if plan.real {
            // A marker, or a dense batch of aborted records: written as real ones,
            // after the appends in flight.
            if let Some(o) = self.settle_all(w).await? {
                return Ok(Some(o));
            }
            if b.is_control() {
                txns.write_marker(self, w, b).await
            } else {
                txns.write_aborted(self, w, b).await
            }
        } else if plan.skip {
            // (Placeholders also for what real markers leave: an aborted batch with
            // compaction holes, or one the destination already ends inside.)
            self.gap(w, plan.from, b.next_offset(), b.max_timestamp()).await
        } else if plan.holey {
            self.append_split(w, b, plan.from, &mut walk.hold, stop).await
        } else if let Some(o) = self.copy_data(w, b, &walk.hold).await? {
            Ok(Some(o))
        } else if std::mem::take(&mut c.append_twice) {
            self.copy_data(w, b, &walk.hold).await
        } else {
            Ok(None)
        }
    }
}
