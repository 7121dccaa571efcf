//! Fetch through the offset map: the request's fetch offsets go source → destination, the
//! response's offsets destination → source, batch base offsets included.
//!
//! A record batch (magic 2) starts with `baseOffset: int64`, `batchLength: int32`,
//! `partitionLeaderEpoch: int32`, `magic: int8`, `crc: uint32`; the CRC-32C covers the bytes
//! from `attributes` on (Kafka `DefaultRecordBatch`, KIP-98), so the base offset is patched
//! in place — no CRC is recomputed, no record is decompressed — and record offsets, stored as
//! deltas from it, follow. A batch never spans two segments (a new segment starts where the
//! destination log ends, before the next append), so one shift applies per batch.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{FetchRequest, FetchResponse};

use crate::mirror::model::{held_source_offset, source_end_offset, source_offset, OffsetSegment};
use crate::mirror::offset_maps::OffsetMaps;

/// Bytes before `batchLength`'s end: `baseOffset` (8) + `batchLength` (4).
const LOG_OVERHEAD: usize = 12;
/// Offset of the `magic` byte in a batch.
const MAGIC_OFFSET: usize = 16;

/// Rewrites the fetch offsets (and a follower's `log_start_offset`, if set) of the shifted
/// partitions in a Fetch request source → destination. Returns whether anything changed.
/// A fetch offset below the first segment's source start (records the destination never
/// held: the source answers OFFSET_OUT_OF_RANGE there, its log start being at or below it)
/// is sent as -1, which the broker answers OFFSET_OUT_OF_RANGE (pinned in
/// tests/broker_behaviour.rs, `a_fetch_at_offset_minus_one_is_offset_out_of_range`), so the
/// client's `auto.offset.reset` applies, as on the source.
/// Partitions an incremental fetch session (KIP-227) leaves out keep the destination offset
/// the broker cached from an earlier request, which the map still gives them (a map only
/// ever grows at the destination log end).
///
/// Topics named by id that the state does not know are resolved with `resolve` (the ids
/// Metadata taught the proxy).
///
/// # Errors
/// A topic id neither knows while a shifted topic's id is unknown
/// ([`OffsetMaps::topic_ref_resolved`]: the caller closes the connection).
pub fn request(
    req: &mut FetchRequest,
    maps: &OffsetMaps,
    resolve: &dyn Fn(&[u8; 16]) -> Option<String>,
) -> Result<bool, String> {
    let mut changed = false;
    for t in &mut req.topics {
        let Some(tm) = maps.topic_ref_resolved(&t.topic.0, t.topic_id.as_bytes(), resolve)? else { continue };
        for p in &mut t.partitions {
            let Some(segs) = tm.partition(p.partition) else { continue };
            let below_first = segs.first().is_some_and(|f| p.fetch_offset < f.source_start);
            p.fetch_offset = if below_first { -1 } else { tm.to_destination(p.partition, p.fetch_offset) };
            p.log_start_offset = tm.to_destination(p.partition, p.log_start_offset);
            changed = true;
        }
    }
    Ok(changed)
}

/// Rewrites every offset of the shifted partitions in a Fetch response destination →
/// source: high watermark, last stable offset and the diverging epoch's end offset as end
/// offsets ([`source_end_offset`]); log start offset, each aborted transaction's first
/// offset and each batch's base offset as record offsets ([`source_offset`]), the log start
/// capped at the high watermark. Partitions
/// an incremental session leaves out are simply absent. Returns whether anything changed.
///
/// First, partitions with a read cap (`cap(topic, partition)`, a destination offset:
/// `ControlPlane::hold_reads`, asked only when `capping`) lose every batch at or above it,
/// and their high watermark and LSO are lowered to it.
///
/// A partition whose every batch was at hidden destination offsets ([`crate::mirror::model::is_hidden`]) in an
/// incremental fetch session (KIP-227) means the broker's session holds a fetch offset that
/// the offset map no longer gives (it grew hidden offsets after the client's position was
/// sent): the client would fetch the same hidden batch forever. The response then becomes
/// FETCH_SESSION_ID_NOT_FOUND (70), so the client starts a new session with its positions,
/// which map past the hidden offsets (Java `FetchSessionHandler.handleResponse`).
///
/// Topic ids the state does not know are resolved with `resolve`, as in [`request`].
pub fn response(
    resp: &mut FetchResponse,
    maps: &OffsetMaps,
    resolve: &dyn Fn(&[u8; 16]) -> Option<String>,
    capping: bool,
    cap: &dyn Fn(&str, i32) -> Option<i64>,
) -> bool {
    let mut changed = false;
    if capping {
        for t in &mut resp.responses {
            let name = if t.topic.0.is_empty() { resolve(t.topic_id.as_bytes()) } else { Some(t.topic.0.to_string()) };
            let Some(name) = name else { continue };
            for p in &mut t.partitions {
                if let Some(c) = cap(&name, p.partition_index) {
                    changed |= cap_partition(p, c);
                }
            }
        }
    }
    if maps.is_empty() {
        return changed;
    }
    let mut stale_session_offset = false;
    for t in &mut resp.responses {
        let Ok(Some(tm)) = maps.topic_ref_resolved(&t.topic.0, t.topic_id.as_bytes(), resolve) else { continue };
        for p in &mut t.partitions {
            let Some(segs) = tm.partition(p.partition_index) else { continue };
            // End offsets end-style (a consumer at the end of a segment reaches them), record
            // offsets and the log start start-style, the log start never above the end.
            p.high_watermark = source_end_offset(segs, p.high_watermark);
            p.last_stable_offset = source_end_offset(segs, p.last_stable_offset);
            let log_start = source_offset(segs, p.log_start_offset);
            p.log_start_offset = if p.high_watermark >= 0 { log_start.min(p.high_watermark) } else { log_start };
            p.diverging_epoch.end_offset = source_end_offset(segs, p.diverging_epoch.end_offset);
            for a in p.aborted_transactions.iter_mut().flatten() {
                a.first_offset = source_offset(segs, a.first_offset);
            }
            if let Some(original) = p.records.take() {
                p.records = Some(match patch_base_offsets(&original, segs) {
                    Some(patched) => {
                        // Complete batches came and none is left: all were hidden (a partial
                        // batch after them would not move the client's position either).
                        stale_session_offset |= has_complete_batch(&original) && !has_complete_batch(&patched);
                        patched
                    }
                    None => original,
                });
            }
            changed = true;
        }
    }
    if stale_session_offset && resp.session_id != 0 {
        resp.error_code = FETCH_SESSION_ID_NOT_FOUND;
        resp.session_id = 0;
        resp.responses.clear();
        changed = true;
    }
    changed
}

/// Whether `records` starts with a whole entry (its length within the bytes).
fn has_complete_batch(records: &[u8]) -> bool {
    records.get(8..12).is_some_and(|l| {
        let length = i32::from_be_bytes([l[0], l[1], l[2], l[3]]);
        length >= 0 && (length as usize).checked_add(LOG_OVERHEAD).is_some_and(|n| n <= records.len())
    })
}

/// Kafka error code FETCH_SESSION_ID_NOT_FOUND.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;

/// Applies read cap `cap` (a destination offset) to one partition of a Fetch response:
/// batches from the first one reaching `cap` on are dropped, the high watermark and LSO
/// lowered to `cap`. Returns whether anything changed.
fn cap_partition(p: &mut kafka_protocol::messages::fetch_response::PartitionData, cap: i64) -> bool {
    let mut changed = false;
    if p.high_watermark > cap {
        p.high_watermark = cap;
        changed = true;
    }
    if p.last_stable_offset > cap {
        p.last_stable_offset = cap;
        changed = true;
    }
    if let Some(kept) = p.records.as_ref().and_then(|r| records_below(r, cap)) {
        p.records = Some(kept);
        changed = true;
    }
    changed
}

/// The batches of `records` that end below destination offset `cap` (a prefix: batches are
/// in offset order), `None` when that is all of them. A batch's last offset is its base
/// offset plus `lastOffsetDelta` (int32 at byte 23 of a magic 2 batch); an entry that is not
/// magic 2, or cut short, ends the prefix only if its base offset reaches `cap`.
pub fn records_below(records: &Bytes, cap: i64) -> Option<Bytes> {
    let mut pos = 0usize;
    while let Some(head) = records.get(pos..pos + LOG_OVERHEAD) {
        let base = i64::from_be_bytes(head[..8].try_into().ok()?);
        let length = i32::from_be_bytes(head[8..12].try_into().ok()?);
        let delta = records
            .get(pos + 23..pos + 27)
            .filter(|_| records.get(pos + MAGIC_OFFSET) == Some(&2))
            .map_or(0, |d| i64::from(i32::from_be_bytes([d[0], d[1], d[2], d[3]])));
        if length < 0 || base >= cap || base.saturating_add(delta) >= cap {
            return Some(records.slice(..pos));
        }
        pos = pos.checked_add(LOG_OVERHEAD + length as usize)?;
    }
    None
}

/// A copy of `records` (a Fetch response partition's record batches) with each batch's base
/// offset mapped destination → source through `segments`, and the batches at hidden
/// destination offsets ([`crate::mirror::model::is_hidden`]: a transaction marker of mirrorgate's that the
/// destination's coordinator wrote again, which no source offset maps to) left out; `None`
/// when nothing changes. Only the first 8 bytes of a batch kept change: no CRC-covered byte,
/// no payload. Walking stops at the first entry whose length is negative or that is not
/// magic 2 (the mirror writes only magic 2; older entries are left as the broker sent them),
/// and a trailing partial batch (the broker cuts at `max_bytes`) keeps its bytes, its base
/// offset patched when present. Never panics on broker bytes; allocates at most
/// `records.len()` bytes.
pub fn patch_base_offsets(records: &[u8], segments: &[OffsetSegment]) -> Option<Bytes> {
    // Created at the first entry that changes, with the unchanged entries before it.
    let mut out: Option<BytesMut> = None;
    let mut pos = 0usize;
    while let Some(head) = records.get(pos..pos + LOG_OVERHEAD) {
        let base = i64::from_be_bytes(head[..8].try_into().ok()?);
        let length = i32::from_be_bytes(head[8..12].try_into().ok()?);
        let magic_ok = records.get(pos + MAGIC_OFFSET).is_none_or(|m| *m == 2);
        if length < 0 || !magic_ok {
            break;
        }
        let end = pos.saturating_add(LOG_OVERHEAD + length as usize).min(records.len());
        let mapped = held_source_offset(segments, base);
        if mapped != Some(base) && out.is_none() {
            let mut buf = BytesMut::with_capacity(records.len());
            buf.extend_from_slice(&records[..pos]);
            out = Some(buf);
        }
        if let (Some(buf), Some(mapped)) = (out.as_mut(), mapped) {
            let at = buf.len();
            buf.extend_from_slice(&records[pos..end]);
            buf[at..at + 8].copy_from_slice(&mapped.to_be_bytes());
        }
        pos = end;
    }
    let mut buf = out?;
    buf.extend_from_slice(&records[pos..]);
    Some(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::{self, BatchIter, OwnBatch};

    fn batch_at(base: i64, count: i32) -> Bytes {
        let own = OwnBatch {
            base_offset: base,
            count,
            timestamp: 1_700_000_000_000,
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
        };
        batch::control_batch(&own)
    }

    #[test]
    fn base_offsets_move_and_crcs_stay_valid() {
        // Destination 0..5 is source 3000..3005; destination 5.. is source 7000.. .
        let segs = [
            OffsetSegment { source_start: 3000, destination_start: 0 },
            OffsetSegment { source_start: 7000, destination_start: 5 },
        ];
        let mut records = BytesMut::new();
        let mut starts = Vec::new();
        for (base, count) in [(0, 3), (3, 2), (5, 4)] {
            starts.push(records.len());
            records.extend_from_slice(&batch_at(base, count));
        }
        starts.push(records.len());
        let whole = records.clone().freeze();
        records.extend_from_slice(&batch_at(9, 1)[..20]); // a partial batch cut at max_bytes
        let patched = patch_base_offsets(&records, &segs).expect("shifted");
        assert_eq!(patched.len(), records.len());
        let got: Vec<(i64, i64)> = BatchIter::new(patched.slice(..whole.len()))
            .map(|b| {
                let b = b.expect("a valid batch");
                assert!(b.crc_is_valid(), "the CRC still matches");
                (b.base_offset(), b.last_offset())
            })
            .collect();
        assert_eq!(got, vec![(3000, 3002), (3003, 3004), (7000, 7003)]);
        assert_eq!(i64::from_be_bytes(patched[whole.len()..whole.len() + 8].try_into().unwrap()), 7004);
        // Everything but the base offsets is byte for byte the broker's.
        for (i, (a, b)) in patched.iter().zip(records.iter()).enumerate() {
            let in_base = starts.iter().any(|s| (*s..*s + 8).contains(&i));
            if !in_base {
                assert_eq!(a, b, "byte {i}");
            }
        }
        assert!(patch_base_offsets(&whole, &[OffsetSegment { source_start: 0, destination_start: 0 }]).is_none());
    }

    #[test]
    fn batches_at_hidden_offsets_are_left_out() {
        // Destination 0..=5 is source 0..=5 (a marker at 5, written again at 6 and 7 by the
        // destination's coordinator), destination 8.. is source 6.. .
        let segs = [
            OffsetSegment { source_start: 0, destination_start: 0 },
            OffsetSegment { source_start: 6, destination_start: 8 },
        ];
        let mut records = BytesMut::new();
        for (base, count) in [(3, 2), (5, 1), (6, 1), (7, 1), (8, 3)] {
            records.extend_from_slice(&batch_at(base, count));
        }
        let patched = patch_base_offsets(&records, &segs).expect("hidden batches dropped");
        let got: Vec<(i64, i64)> = BatchIter::new(patched.clone())
            .map(|b| {
                let b = b.expect("a valid batch");
                assert!(b.crc_is_valid());
                (b.base_offset(), b.last_offset())
            })
            .collect();
        assert_eq!(got, vec![(3, 4), (5, 5), (6, 8)], "contiguous source offsets, nothing twice");
        assert_eq!(patched.len(), records.len() - 2 * batch_at(6, 1).len());
        // Only the unshifted head: nothing to change.
        let head: Vec<u8> = batch_at(3, 2).to_vec();
        assert!(patch_base_offsets(&head, &segs).is_none());
    }

    #[test]
    fn broker_bytes_never_panic() {
        let segs = [OffsetSegment { source_start: 10, destination_start: 0 }];
        for bytes in [&[][..], &[0; 11], &[0xff; 40], &[0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 2]]
        {
            let _ = patch_base_offsets(bytes, &segs);
        }
        // A magic 1 entry is left alone.
        let mut v1 = vec![0u8; 30];
        v1[11] = 18;
        v1[16] = 1;
        assert!(patch_base_offsets(&v1, &segs).is_none());
    }
}
