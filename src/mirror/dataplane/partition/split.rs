//! Compacted source batches with holes inside, split into dense runs and placeholders
//! (DESIGN §4.2, docs/broker-behaviour.md): the one place the copy loop decompresses.

use std::ops::ControlFlow;
use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use crate::wire::batch::Batch;
use crate::wire::records::{self, RecordView, RecordsError};
use crate::wire::split::{self, Piece, RunHeader};

use super::{fail, failpoint_mid_batch, Outcome, PartitionTask, Retry, Writer};

impl PartitionTask {
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
    pub(super) async fn append_split(
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
        if !b.crc_is_valid() {
            return Err(Retry::new(format!("{}: CRC mismatch in the fetched bytes", self.split_what(b))));
        }
        let (_room, decompressed) = match self.split_room(b, hold, stop).await {
            ControlFlow::Continue(room) => room,
            ControlFlow::Break(o) => return Ok(Some(o)),
        };
        let section = match split::records_section(b, decompressed) {
            Ok(s) => s,
            Err(e) => return Ok(Some(fail(format!("cannot read {}: {e}", self.split_what(b)), false))),
        };
        let records = match records::walk(&section, b.record_count()) {
            Ok(r) => r,
            Err(e) => return Ok(Some(fail(format!("cannot read {}: {e}", self.split_what(b)), false))),
        };
        let pieces = match split::plan(b, &records, from) {
            Ok(p) => p,
            Err(e) => return Ok(Some(fail(format!("cannot split {}: {e}", self.split_what(b)), false))),
        };
        self.write_pieces(w, b, &records, &pieces).await
    }

    /// How a split batch is named in messages.
    fn split_what(&self, b: &Batch) -> String {
        format!("compacted source batch {}..{} of {}-{}", b.base_offset(), b.last_offset(), self.topic, self.partition)
    }

    /// Takes the memory a split of `b` allocates from the in-flight budget: the decompressed
    /// records and one re-encoded run (twice the decompressed length), or the run copies of
    /// an uncompressed batch (its payload length). When it is not free, the room of the
    /// fetched records (`hold`) is given up first and the loop waits. Returns the budget
    /// taken and the decompressed length (0: uncompressed); a batch that could never fit
    /// fails the partition (permanent), naming the sizes.
    async fn split_room(
        &self,
        b: &Batch,
        hold: &mut Option<Arc<OwnedSemaphorePermit>>,
        stop: &CancellationToken,
    ) -> ControlFlow<Outcome, (OwnedSemaphorePermit, usize)> {
        let total = self.fetcher.budget_total();
        let too_large = |need: String| {
            fail(
                format!("{}: splitting it needs {need} bytes of memory (decompressed records and one re-encoded run) but mirror.inflight.max.bytes is {total}; raise it", self.split_what(b)),
                false,
            )
        };
        let decompressed = match split::decompressed_len(b, total) {
            Ok(n) => n,
            Err(RecordsError::TooLarge { .. }) => return ControlFlow::Break(too_large(format!("more than {total}"))),
            Err(e) => return ControlFlow::Break(fail(format!("cannot read {}: {e}", self.split_what(b)), false)),
        };
        let need = if decompressed > 0 { decompressed.saturating_mul(2) } else { b.payload().len() };
        if need > total {
            return ControlFlow::Break(too_large(need.to_string()));
        }
        let room = match self.fetcher.try_take_budget(need) {
            Some(room) => room,
            None => {
                drop(hold.take());
                tokio::select! {
                    _ = stop.cancelled() => return ControlFlow::Break(Outcome::Stopped),
                    room = self.fetcher.take_budget(need) => match room {
                        Some(room) => room,
                        None => return ControlFlow::Break(too_large(need.to_string())),
                    },
                }
            }
        };
        ControlFlow::Continue((room, decompressed))
    }

    /// Writes the pieces of a split batch `b` in order: holes as placeholders (the batch's
    /// max timestamp: a record's, or the append time; the base timestamp may be the
    /// cleaner's delete horizon), runs re-encoded with the data producer's next sequence,
    /// each at the destination offset its first source offset maps to (checked).
    async fn write_pieces(
        &self,
        w: &mut Writer<'_>,
        b: &Batch,
        records: &[RecordView<'_>],
        pieces: &[Piece],
    ) -> Result<Option<Outcome>, Retry> {
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
                                format!(
                                    "cannot re-encode the run at source offset {first} of {}: {e}",
                                    self.split_what(b)
                                ),
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
}
