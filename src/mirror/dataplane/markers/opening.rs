//! Whether the first aborted batch of a source transaction opens a destination transaction
//! (a slot) now, is written as placeholders, or waits for the chunk that holds its ABORT
//! marker (docs/real-markers.md).

use bytes::Bytes;

use crate::wire::batch::{Batch, BatchIter};

use super::super::partition::is_abort_marker;

/// What to do with the first aborted batch `b` of a source transaction, given the chunk it
/// came in (`records`, the source's `lso`) and whether a batch before it in the chunk was
/// copied (`walked`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::mirror::dataplane) enum SlotOpening {
    /// The transaction's ABORT marker is in the chunk: open a slot; it ends within this walk.
    Open,
    /// The marker is below the LSO but more than a fetch away from the transaction's first
    /// batch: a slot could stay open across fetches (and a stop), so this batch is written as
    /// placeholders instead.
    Placeholders,
    /// Fetch again from `b`: the marker may be in a chunk that starts there (`park` false), or
    /// it is above the source's LSO — another source transaction still open — and the copy
    /// waits for the LSO to pass it (`park`: after `fetch.backoff`).
    Refetch {
        /// Wait `fetch.backoff` first.
        park: bool,
    },
}

/// See [`SlotOpening`].
pub(in crate::mirror::dataplane) fn slot_opening(records: &Bytes, b: &Batch, lso: i64, walked: bool) -> SlotOpening {
    let mut end = b.next_offset();
    for other in BatchIter::new(records.clone()) {
        let Ok(other) = other else { break };
        end = end.max(other.next_offset());
        if other.base_offset() > b.last_offset()
            && other.is_control()
            && other.producer_id() == b.producer_id()
            && is_abort_marker(&other)
        {
            return SlotOpening::Open;
        }
    }
    if lso >= 0 && end >= lso {
        SlotOpening::Refetch { park: true }
    } else if walked {
        SlotOpening::Refetch { park: false }
    } else {
        SlotOpening::Placeholders
    }
}
