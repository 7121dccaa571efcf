//! Committed offsets through the offset map: OffsetCommit and TxnOffsetCommit requests carry
//! source offsets, which are committed as destination offsets; OffsetFetch answers
//! destination offsets, which go back as source offsets. So a group's committed offsets read
//! the same through mirrorgate as on the source — also those the metadata sync copied from
//! the source (it commits destination offsets, `mirror::sync::groups`) — and
//! `kafka-consumer-groups --describe` computes the source's lag from them and from
//! ListOffsets (translated in [`super::offsets`]).

use kafka_protocol::messages::{OffsetCommitRequest, OffsetFetchResponse, TxnOffsetCommitRequest};

use crate::mirror::offset_maps::OffsetMaps;

/// OffsetCommit (every version; topics by name, or by id from v10): each committed offset of
/// a shifted partition source → destination (an offset inside a gap of the source becomes
/// the first destination offset after it). Returns whether anything changed.
pub fn offset_commit(req: &mut OffsetCommitRequest, maps: &OffsetMaps) -> bool {
    let mut changed = false;
    for t in &mut req.topics {
        let Some(tm) = maps.topic_ref(&t.name.0, t.topic_id.as_bytes()) else { continue };
        for p in &mut t.partitions {
            let mapped = tm.to_destination(p.partition_index, p.committed_offset);
            changed |= mapped != p.committed_offset;
            p.committed_offset = mapped;
        }
    }
    changed
}

/// TxnOffsetCommit (KIP-98: offsets committed inside a transaction, `sendOffsetsToTransaction`):
/// as [`offset_commit`].
pub fn txn_offset_commit(req: &mut TxnOffsetCommitRequest, maps: &OffsetMaps) -> bool {
    let mut changed = false;
    for t in &mut req.topics {
        let Some(tm) = maps.topic(&t.name.0) else { continue };
        for p in &mut t.partitions {
            let mapped = tm.to_destination(p.partition_index, p.committed_offset);
            changed |= mapped != p.committed_offset;
            p.committed_offset = mapped;
        }
    }
    changed
}

/// OffsetFetch: each committed offset of a shifted partition destination → source, in the
/// single-group layout (v0–v7, `topics`) and the batched one (v8+, `groups[].topics`, by name
/// or, from v10, by id). -1 (no committed offset) stays. A committed offset is a consumer's
/// position, an end offset: mapped end-style
/// ([`crate::mirror::model::source_end_offset`]), as the high watermark and ListOffsets
/// latest are, so `kafka-consumer-groups` lag is never negative (a position committed at
/// the start of a segment after a gap reads as the end of the segment before it; the next
/// record read is the same). Returns whether anything changed.
pub fn offset_fetch(resp: &mut OffsetFetchResponse, maps: &OffsetMaps) -> bool {
    let mut changed = false;
    for t in &mut resp.topics {
        let Some(tm) = maps.topic(&t.name.0) else { continue };
        for p in &mut t.partitions {
            let mapped = tm.to_source_end(p.partition_index, p.committed_offset);
            changed |= mapped != p.committed_offset;
            p.committed_offset = mapped;
        }
    }
    for g in &mut resp.groups {
        for t in &mut g.topics {
            let Some(tm) = maps.topic_ref(&t.name.0, t.topic_id.as_bytes()) else { continue };
            for p in &mut t.partitions {
                let mapped = tm.to_source_end(p.partition_index, p.committed_offset);
                changed |= mapped != p.committed_offset;
                p.committed_offset = mapped;
            }
        }
    }
    changed
}
