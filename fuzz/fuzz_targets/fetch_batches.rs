//! Fetch response walking and record-batch iteration on the mirror's source side
//! (src/mirror/dataplane/source.rs `chunk_of`, partition.rs's batch loop and `append_split`):
//! `BatchIter`, the header accessors, CRC, decompression, `records::walk`, the split of a
//! compacted batch (`split::plan`, `split::build_run`), and the proxy's placeholder
//! restoration on the same bytes (`intercept::restore_mirror_records`), the base offset
//! patch of a shifted partition (`proxy::present::fetch::patch_base_offsets`, also with a map
//! that hides destination offsets), the proxy's read cap (`fetch::records_below`), and the
//! merge of small uncompressed batches (`wire::coalesce`).
//!
//! Input: byte 0 = mode (even: the rest after byte 1 is raw `records` bytes; odd: a Fetch
//! response body at the data plane's `FETCH_VERSION`), byte 1 = where a resumed copy starts
//! inside each batch (offsets past its base offset).
//! Invariants beyond "no panic":
//! - `split::plan` pieces cover exactly the batch's offsets from the resume point, in order,
//!   without overlap; a run's records hold consecutive offsets;
//! - each run `build_run` makes is one valid v2 batch (CRC, count, offset deltas 0..n,
//!   base offset 0) holding the same keys, values, headers and timestamps;
//! - restoring placeholders keeps every batch's offset range;
//! - patching base offsets keeps the length, every batch's CRC validity and record count,
//!   moves each batch by the shift of its segment, and changes no byte outside the first 8
//!   of a batch; with hidden offsets, exactly the batches whose base offset is hidden go;
//! - a read cap keeps a prefix of whole batches, each ending below the cap;
//! - merging consecutive coalescible batches gives one valid v2 batch with their records
//!   (keys, values, headers, attributes) in order.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::FetchResponse;
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;
use mirrorgate::mirror::dataplane::source::{chunk_of, FETCH_VERSION};
use mirrorgate::mirror::model::{is_hidden, source_offset, OffsetSegment};
use mirrorgate::proxy::intercept::restore_mirror_records;
use mirrorgate::proxy::present::fetch::{patch_base_offsets, records_below};
use mirrorgate::wire::coalesce::{coalesce, is_coalescible};
use mirrorgate::wire::batch::{Batch, BatchIter};
use mirrorgate::wire::records;
use mirrorgate::wire::split::{self, Piece, RunHeader};

/// Decompression cap (the data plane uses `mirror.inflight.max.bytes`).
const LIMIT: usize = 4 << 20;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let from = i64::from(data[1]);
    let payload = Bytes::copy_from_slice(&data[2..]);
    if data[0] & 1 == 0 {
        records_bytes(&payload, from, data[0] & 2 != 0);
    } else if let Ok(resp) = FetchResponse::decode(&mut payload.clone(), FETCH_VERSION) {
        for t in &resp.responses {
            for p in &t.partitions {
                let chunk = chunk_of(p);
                assert!(chunk.aborted.windows(2).all(|w| w[0].1 <= w[1].1), "aborted list sorted by first offset");
                records_bytes(&chunk.records, from, data[0] & 2 != 0);
            }
        }
    }
});

fn records_bytes(records: &Bytes, from: i64, log_append_time: bool) {
    let mut iter = BatchIter::new(records.clone());
    let mut ranges = Vec::new();
    for b in iter.by_ref() {
        let Ok(b) = b else { break };
        ranges.push((b.base_offset(), b.last_offset()));
        batch(&b, from);
    }
    let _ = iter.truncated_at();
    present(records, from);
    hidden(records, from);
    capped(records, from);
    merged(records);
    if let Some(restored) = restore_mirror_records(records, log_append_time) {
        let after: Vec<_> =
            BatchIter::new(restored).map_while(Result::ok).map(|b| (b.base_offset(), b.last_offset())).collect();
        assert_eq!(after, ranges, "restoring placeholders changed the batches' offset ranges");
    }
}

/// Two segments: destination `[0, 100)` is source `from + 1000..`, destination `100..` is
/// source `from + 5000..`.
fn present(records: &Bytes, from: i64) {
    let segments = [
        OffsetSegment { source_start: from + 1000, destination_start: 0 },
        OffsetSegment { source_start: from + 5000, destination_start: 100 },
    ];
    let Some(patched) = patch_base_offsets(records, &segments) else { return };
    assert_eq!(patched.len(), records.len(), "patching changed the length");
    let before: Vec<Batch> = BatchIter::new(records.clone()).map_while(Result::ok).collect();
    let after: Vec<Batch> = BatchIter::new(patched.clone()).map_while(Result::ok).collect();
    assert_eq!(before.len(), after.len(), "patching changed which batches walk");
    let mut at = 0;
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(a.base_offset(), source_offset(&segments, b.base_offset()));
        assert_eq!((a.crc_is_valid(), a.record_count()), (b.crc_is_valid(), b.record_count()));
        let n = b.bytes().len();
        assert_eq!(patched[at + 8..at + n], records[at + 8..at + n], "bytes past the base offset changed");
        at += n;
    }
}

fn batch(b: &Batch, from: i64) {
    let _ = (b.partition_leader_epoch(), b.is_transactional(), b.is_control(), b.max_timestamp());
    let _ = (b.producer_id(), b.producer_epoch(), b.base_sequence(), b.is_placeholder());
    let _ = b.next_offset();
    let _ = b.crc_is_valid();
    let Ok(n) = split::decompressed_len(b, LIMIT) else { return };
    let Ok(section) = split::records_section(b, n.max(1)) else { return };
    let Ok(recs) = records::walk(&section, b.record_count()) else { return };
    let start = b.base_offset().saturating_add(from);
    let Ok(pieces) = split::plan(b, &recs, start) else { return };
    // A batch whose last offset does not fit in an i64 (wire input): `plan` saturates its
    // offsets and must only not panic; the coverage invariants below need real offsets.
    let last = b.base_offset().checked_add(i64::from(b.last_offset_delta()));
    if last.and_then(|l| l.checked_add(1)).is_none() {
        return;
    }
    // Coverage: [max(start, base), next_offset) exactly, in order.
    let mut at = start.max(b.base_offset());
    for piece in &pieces {
        match piece {
            Piece::Hole { from, to } => {
                assert_eq!(*from, at, "hole does not start where the previous piece ended");
                assert!(to > from, "empty hole");
                at = *to;
            }
            Piece::Run { first, records: range } => {
                assert_eq!(*first, at, "run does not start where the previous piece ended");
                assert!(!range.is_empty(), "empty run");
                for (k, r) in recs[range.clone()].iter().enumerate() {
                    // Saturating, as `split::plan` computes offsets (a base offset near
                    // i64::MAX is wire input).
                    assert_eq!(
                        b.base_offset().saturating_add(i64::from(r.offset_delta)),
                        first.saturating_add(k as i64),
                        "run not consecutive"
                    );
                }
                at = first.saturating_add(range.len() as i64);
                run(b, &recs[range.clone()]);
            }
        }
    }
    if start.max(b.base_offset()) < b.next_offset() {
        assert_eq!(at, b.next_offset(), "pieces end before the batch does");
    } else {
        assert!(pieces.is_empty());
    }
}

fn run(b: &Batch, recs: &[records::RecordView<'_>]) {
    let producer = RunHeader { producer_id: 7, producer_epoch: 3, base_sequence: 11 };
    let Ok(bytes) = split::build_run(b, recs, &producer) else { return };
    let mut it = BatchIter::new(bytes.clone());
    let out = it.next().expect("one batch").expect("a valid batch");
    assert!(it.next().is_none() && it.truncated_at().is_none(), "exactly one batch");
    assert!(out.crc_is_valid());
    assert_eq!(out.base_offset(), 0);
    assert_eq!(out.record_count() as usize, recs.len());
    assert_eq!(out.last_offset_delta() as usize, recs.len() - 1);
    assert_eq!((out.producer_id(), out.producer_epoch(), out.base_sequence()), (7, 3, 11));
    assert_eq!(out.compression(), b.compression());
    let n = split::decompressed_len(&out, LIMIT).expect("our own run decompresses");
    let section = split::records_section(&out, n.max(1)).expect("our own run decompresses");
    let got = records::walk(&section, out.record_count()).expect("our own run walks");
    for (k, (g, r)) in got.iter().zip(recs).enumerate() {
        assert_eq!(g.offset_delta as usize, k);
        assert_eq!(g.tail(), r.tail(), "key, value or headers changed");
        assert_eq!(g.timestamp_delta, r.timestamp_delta);
        assert_eq!(g.attributes, r.attributes);
    }
}

/// Destination `[0, 40]` is source `0..=40`, destination `41..=from+41` are hidden (markers
/// written again), destination `from + 42..` is source `41..`.
fn hidden(records: &Bytes, from: i64) {
    let segments = [
        OffsetSegment { source_start: 0, destination_start: 0 },
        OffsetSegment { source_start: 41, destination_start: from + 42 },
    ];
    let before: Vec<Batch> = BatchIter::new(records.clone()).map_while(Result::ok).collect();
    let Some(patched) = patch_base_offsets(records, &segments) else {
        assert!(before.iter().all(|b| !is_hidden(&segments, b.base_offset()) && source_offset(&segments, b.base_offset()) == b.base_offset()));
        return;
    };
    assert!(patched.len() <= records.len());
    let kept: Vec<&Batch> = before.iter().filter(|b| !is_hidden(&segments, b.base_offset())).collect();
    let after: Vec<Batch> = BatchIter::new(patched.clone()).map_while(Result::ok).collect();
    assert_eq!(after.len(), kept.len(), "exactly the batches at hidden offsets go");
    for (b, a) in kept.iter().zip(&after) {
        assert_eq!(a.base_offset(), source_offset(&segments, b.base_offset()));
        assert_eq!(a.bytes()[8..], b.bytes()[8..], "bytes past the base offset changed");
    }
}

/// A read cap at `from + 3`: a prefix of whole batches, each ending below it.
fn capped(records: &Bytes, from: i64) {
    let cap = from + 3;
    let Some(kept) = records_below(records, cap) else { return };
    assert!(kept.len() <= records.len());
    assert_eq!(kept[..], records[..kept.len()], "a read cap keeps a prefix");
    for b in BatchIter::new(kept.clone()).map_while(Result::ok) {
        assert!(b.last_offset() < cap, "batch {}..={} at or above the cap {cap}", b.base_offset(), b.last_offset());
    }
}

/// The leading run of consecutive coalescible batches, merged.
fn merged(records: &Bytes) {
    let mut run: Vec<Batch> = Vec::new();
    for b in BatchIter::new(records.clone()).map_while(Result::ok) {
        let consecutive = run.last().is_none_or(|p| p.next_offset() == b.base_offset());
        if !is_coalescible(&b, 1 << 20) || !consecutive {
            break;
        }
        run.push(b);
    }
    if run.len() < 2 {
        return;
    }
    let producer = RunHeader { producer_id: 7, producer_epoch: 3, base_sequence: 11 };
    let Ok(bytes) = coalesce(&run, &producer) else { return };
    let mut it = BatchIter::new(bytes);
    let out = it.next().expect("one batch").expect("a valid batch");
    assert!(it.next().is_none(), "exactly one batch");
    assert!(out.crc_is_valid());
    let want: Vec<Vec<u8>> = run
        .iter()
        .flat_map(|b| {
            let payload = b.payload();
            records::walk(&payload, b.record_count())
                .map(|rs| rs.iter().map(|r| r.tail().to_vec()).collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .collect();
    let payload = out.payload();
    let got: Vec<Vec<u8>> =
        records::walk(&payload, out.record_count()).expect("our merged batch walks").iter().map(|r| r.tail().to_vec()).collect();
    assert_eq!(got, want, "merged records differ");
}
