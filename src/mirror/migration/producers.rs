//! Producer ids across a cutover (`docs/migration.md`, "Producer ids" and "Retries across the
//! switch"). While a topic is in migration a client's idempotent batches carry its
//! **destination** producer id `D` and are forwarded to the source under a source producer id
//! `S(D)` of mirrorgate's; after the cutover they go to the destination unchanged. A batch the
//! source stored but whose answer the client never got is retried; after the switch the
//! destination holds no state for `D` and would write it again. The [`CutoverSnapshot`] —
//! the source's producer state of the cutover's partitions once the drain is complete —
//! recognises such retries, so that mirrorgate answers them as duplicates instead.
//!
//! Pure: no I/O; the cutover builds the snapshot from DescribeProducers answers, the proxy
//! asks [`CutoverSnapshot::judge`] for the first batches of each producer after the switch.

use std::collections::HashMap;

use crate::client::cluster::ActiveProducer;

/// Sequence numbers wrap at `i32::MAX` to 0 (Kafka's `DefaultRecordBatch.incrementSequence`).
const SEQUENCE_SPACE: i64 = i32::MAX as i64 + 1;

/// What the source held of one mapped producer on one partition at the cutover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    /// The producer epoch of its last batch there.
    epoch: i16,
    /// The sequence of its last record there.
    last_sequence: i32,
}

/// What to do with a batch of a client's producer on a cut-over partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterCutover {
    /// Send it to the destination unchanged.
    Forward,
    /// A retry of a batch the source stored before the switch (every sequence of it at or
    /// before the snapshot's last): answer DUPLICATE_SEQUENCE_NUMBER (46), which the Java
    /// producer, librdkafka and franz-go complete as success; write nothing.
    Duplicate,
    /// A batch that does not continue the snapshot's sequence (a gap, or overlapping the last
    /// stored batch): answer OUT_OF_ORDER_SEQUENCE_NUMBER (45), as the source broker would.
    OutOfOrder,
}

/// The source's producer state of the cutover's partitions, keyed by the client's
/// destination producer id, topic and partition. Entries are dropped once the producer has
/// moved past them ([`Self::judge`] answered `Forward` for its next sequence, or a new epoch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CutoverSnapshot {
    held: HashMap<(i64, String, i32), Held>,
}

impl CutoverSnapshot {
    /// Builds the snapshot from DescribeProducers answers per source partition
    /// (`partitions`: topic, partition and its active producers) and the producer id mapping
    /// (`source_of`: the source producer id `S(D)` → the client's destination id `D`).
    /// Producers mirrorgate did not map (direct source writers, transactional producers) and
    /// producers without a record (last sequence -1) are left out.
    pub fn new<'a>(
        partitions: impl IntoIterator<Item = (&'a str, i32, &'a [ActiveProducer])>,
        source_of: &HashMap<i64, i64>,
    ) -> Self {
        let mut held = HashMap::new();
        for (topic, partition, producers) in partitions {
            for p in producers {
                let Some(&destination_id) = source_of.get(&p.producer_id) else { continue };
                if p.last_sequence < 0 {
                    continue;
                }
                held.insert(
                    (destination_id, topic.to_string(), partition),
                    Held { epoch: p.producer_epoch, last_sequence: p.last_sequence },
                );
            }
        }
        Self { held }
    }

    /// How many (producer, partition) entries are still watched.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether no entry is left (the proxy stops asking).
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The verdict for a batch of `producer_id` (the client's destination id) with
    /// `producer_epoch`, `base_sequence` and `record_count` records (≥ 1) on
    /// `topic`-`partition` after the switch:
    ///
    /// - no entry (not a mapped producer, or already past it): [`AfterCutover::Forward`];
    /// - another epoch (the client bumped it: its sequences restart at 0, which the
    ///   destination takes): `Forward`, entry dropped;
    /// - the batch's last sequence at or before the snapshot's (modulo the wrap at
    ///   `i32::MAX`): [`AfterCutover::Duplicate`];
    /// - the batch starts right after the snapshot's last sequence: `Forward`, entry dropped;
    /// - anything else (a gap, or a batch overlapping the stored ones):
    ///   [`AfterCutover::OutOfOrder`].
    pub fn judge(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        topic: &str,
        partition: i32,
        base_sequence: i32,
        record_count: i32,
    ) -> AfterCutover {
        let key = (producer_id, topic.to_string(), partition);
        let Some(held) = self.held.get(&key).copied() else { return AfterCutover::Forward };
        if producer_epoch != held.epoch {
            self.held.remove(&key);
            return AfterCutover::Forward;
        }
        let base = i64::from(base_sequence);
        let last = (base + i64::from(record_count.max(1)) - 1).rem_euclid(SEQUENCE_SPACE);
        let stored = i64::from(held.last_sequence);
        // Distance from the batch's last sequence forward to the snapshot's, in the
        // wrapping sequence space: small = the batch ends at or before it.
        let behind = (stored - last).rem_euclid(SEQUENCE_SPACE);
        let next = (stored + 1).rem_euclid(SEQUENCE_SPACE);
        if base == next {
            self.held.remove(&key);
            AfterCutover::Forward
        } else if behind < SEQUENCE_SPACE / 2 && (stored - base).rem_euclid(SEQUENCE_SPACE) >= behind {
            AfterCutover::Duplicate
        } else {
            AfterCutover::OutOfOrder
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn producer(id: i64, epoch: i16, last_sequence: i32) -> ActiveProducer {
        ActiveProducer {
            producer_id: id,
            producer_epoch: epoch,
            last_sequence,
            last_timestamp: 1,
            current_txn_start_offset: -1,
        }
    }

    /// Client producer 7 (destination id) was forwarded as source id 1007; it wrote sequences
    /// 0..=9 to orders-0 and 0..=4 to orders-1 (epoch 2). Source id 55 is a direct writer.
    fn snapshot() -> CutoverSnapshot {
        let p0 = [producer(1007, 2, 9), producer(55, 0, 100)];
        let p1 = [producer(1007, 2, 4)];
        let map = HashMap::from([(1007, 7)]);
        CutoverSnapshot::new([("orders", 0, &p0[..]), ("orders", 1, &p1[..])], &map)
    }

    #[test]
    fn retries_of_stored_batches_are_duplicates_and_the_next_batch_goes_on() {
        let mut s = snapshot();
        assert_eq!(s.len(), 2, "the direct writer is not watched");
        assert_eq!(s.judge(7, 2, "orders", 0, 5, 5), AfterCutover::Duplicate, "the last stored batch, retried");
        assert_eq!(s.judge(7, 2, "orders", 0, 0, 5), AfterCutover::Duplicate, "an older one");
        assert_eq!(s.judge(7, 2, "orders", 0, 8, 4), AfterCutover::OutOfOrder, "overlapping the stored ones");
        assert_eq!(s.judge(7, 2, "orders", 0, 12, 1), AfterCutover::OutOfOrder, "a gap, as the source would say");
        assert_eq!(s.judge(7, 2, "orders", 0, 10, 3), AfterCutover::Forward, "the next sequence");
        assert_eq!(s.len(), 1, "past the snapshot on orders-0");
        assert_eq!(s.judge(7, 2, "orders", 0, 5, 5), AfterCutover::Forward, "from now on the destination judges");
        assert_eq!(s.judge(7, 2, "orders", 1, 0, 5), AfterCutover::Duplicate, "orders-1 is still watched");
    }

    #[test]
    fn a_new_epoch_or_an_unknown_producer_goes_on() {
        let mut s = snapshot();
        assert_eq!(s.judge(8, 0, "orders", 0, 0, 1), AfterCutover::Forward, "not a mapped producer");
        assert_eq!(s.judge(7, 2, "payments", 0, 0, 1), AfterCutover::Forward, "not a cut-over partition");
        assert_eq!(s.judge(7, 3, "orders", 1, 0, 1), AfterCutover::Forward, "a bumped epoch restarts at 0");
        assert_eq!(s.judge(7, 2, "orders", 1, 0, 1), AfterCutover::Forward, "entry dropped with the new epoch");
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        let ps = [producer(1, 0, i32::MAX - 1), producer(2, 0, 3)];
        let map = HashMap::from([(1, 10), (2, 20)]);
        let mut s = CutoverSnapshot::new([("t", 0, &ps[..])], &map);
        assert_eq!(s.judge(10, 0, "t", 0, i32::MAX - 4, 4), AfterCutover::Duplicate, "ends at the stored last");
        assert_eq!(s.judge(20, 0, "t", 0, i32::MAX - 1, 5), AfterCutover::Duplicate, "wrapped past 0, ends at 2");
        assert_eq!(s.judge(20, 0, "t", 0, i32::MAX, 5), AfterCutover::Duplicate, "wrapped, ends at 3");
        assert_eq!(s.judge(20, 0, "t", 0, i32::MAX, 6), AfterCutover::OutOfOrder, "ends at 4: overlaps");
        assert_eq!(s.judge(10, 0, "t", 0, i32::MAX, 2), AfterCutover::Forward, "the next sequence is i32::MAX");
        assert!(
            CutoverSnapshot::new([("t", 0, &[producer(1, 0, -1)][..])], &map).is_empty(),
            "no record: nothing to watch"
        );
    }
}
