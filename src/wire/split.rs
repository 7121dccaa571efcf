//! Splitting a compacted v2 batch — one whose records do not fill its offset range, because
//! the log cleaner removed some — into dense runs of consecutive offsets and the holes between
//! them, at the byte level (DESIGN §4.2). A broker assigns consecutive offsets to what a
//! client appends, so such a batch cannot be appended as it is; each run becomes one new
//! batch and each hole is filled by the caller.
//!
//! Each record of a run is copied byte for byte except its offset delta (rewritten relative
//! to the run's first offset) and its length prefix (re-counted when the delta's varint
//! changes length). The run keeps the source batch's base timestamp, so timestamp deltas are
//! unchanged; headers, keys and values are never decoded into types that could merge or
//! re-encode them. The run is compressed with the source batch's own codec and gets a new
//! v2 header: the source's attributes (timestamp type included) without the transactional
//! and delete-horizon bits, the caller's producer id / epoch / base sequence, and a CRC32C.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::{Batch, ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL, HEADER_LEN, LOG_OVERHEAD};
use super::records::{self, put_varint, RecordView, RecordsError};

/// Delete-horizon bit of the attributes (KIP-534): the base timestamp holds the time after
/// which the cleaner may drop the batch's tombstones. Cleared on runs: the destination's
/// cleaner sets its own.
pub const ATTR_DELETE_HORIZON: i16 = 0x40;

/// One part of a batch's offset range, in offset order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Source offsets `[from, to)` hold no record.
    Hole {
        /// First offset.
        from: i64,
        /// Offset after the last.
        to: i64,
    },
    /// Records `records` (indices into the walked records) hold consecutive offsets from
    /// `first`.
    Run {
        /// Source offset of the first record.
        first: i64,
        /// Indices of the records.
        records: Range<usize>,
    },
}

/// Why a batch cannot be split.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SplitError {
    /// The records section cannot be read.
    #[error(transparent)]
    Records(#[from] RecordsError),
    /// Record offsets that are not increasing inside the batch's range.
    #[error("record {index} has offset delta {delta}, outside the batch's range or not after the previous record")]
    BadOffset {
        /// Index of the record.
        index: usize,
        /// Its offset delta.
        delta: i32,
    },
}

/// The records section of `b`, decompressed when the batch is compressed (at most `limit`
/// bytes; [`records::decompressed_len`] tells the size first). An uncompressed section is the
/// batch's own bytes, not a copy.
///
/// # Errors
/// [`RecordsError`] from the codec, or [`RecordsError::TooLarge`].
pub fn records_section(b: &Batch, limit: usize) -> Result<Bytes, RecordsError> {
    if b.compression() == records::codec::NONE || b.record_count() == 0 {
        // An empty batch (the cleaner keeps one for a producer's state) may carry a codec
        // but no records section at all.
        return Ok(if b.record_count() == 0 { Bytes::new() } else { b.payload() });
    }
    records::decompress(b.compression(), &b.payload(), limit).map(Bytes::from)
}

/// Bytes the records section of `b` takes decompressed (0 for an uncompressed or empty
/// batch: nothing new is allocated), read with output capped at `limit + 1`.
///
/// # Errors
/// [`RecordsError::TooLarge`] beyond `limit`, or the codec's error.
pub fn decompressed_len(b: &Batch, limit: usize) -> Result<usize, RecordsError> {
    if b.compression() == records::codec::NONE || b.record_count() == 0 {
        return Ok(0);
    }
    records::decompressed_len(b.compression(), &b.payload(), limit)
}

/// The pieces of `b`'s offset range from source offset `from` (at least the base offset) to
/// its end, given its walked `records`: records before `from` are left out, so a copy that
/// stopped inside the batch resumes at `from`.
///
/// # Errors
/// [`SplitError::BadOffset`] for offset deltas outside the batch or out of order.
pub fn plan(b: &Batch, records: &[RecordView<'_>], from: i64) -> Result<Vec<Piece>, SplitError> {
    let base = b.base_offset();
    let mut prev = -1;
    for (index, r) in records.iter().enumerate() {
        let delta = r.offset_delta;
        if delta <= prev || delta > b.last_offset_delta() {
            return Err(SplitError::BadOffset { index, delta });
        }
        prev = delta;
    }
    let mut pieces = Vec::new();
    let mut next = from.max(base);
    let mut i = 0;
    while i < records.len() {
        let offset = base.saturating_add(i64::from(records[i].offset_delta));
        if offset < next {
            i += 1;
            continue;
        }
        if offset > next {
            pieces.push(Piece::Hole { from: next, to: offset });
        }
        let mut j = i + 1;
        while j < records.len() && records[j - 1].offset_delta.checked_add(1) == Some(records[j].offset_delta) {
            j += 1;
        }
        pieces.push(Piece::Run { first: offset, records: i..j });
        next = base.saturating_add(i64::from(records[j - 1].offset_delta)).saturating_add(1);
        i = j;
    }
    if next < b.next_offset() {
        pieces.push(Piece::Hole { from: next, to: b.next_offset() });
    }
    Ok(pieces)
}

/// Producer fields of a run's new header (the destination writer's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunHeader {
    /// `producerId`.
    pub producer_id: i64,
    /// `producerEpoch`.
    pub producer_epoch: i16,
    /// `baseSequence`.
    pub base_sequence: i32,
}

/// One new v2 batch holding the records `run` (consecutive offsets) of source batch `b`,
/// with `baseOffset` 0 (Kafka 4 refuses client batches with another base offset; the broker
/// assigns offsets), `partitionLeaderEpoch` -1, and `producer`'s fields.
///
/// # Errors
/// [`RecordsError`] from the codec.
pub fn build_run(b: &Batch, run: &[RecordView<'_>], producer: &RunHeader) -> Result<Bytes, RecordsError> {
    let first_delta = run.first().map_or(0, |r| r.offset_delta);
    let base_ts = b.base_timestamp();
    let mut section = BytesMut::with_capacity(run.iter().map(|r| r.raw.len() + 5).sum());
    let mut body_head = BytesMut::with_capacity(32);
    for r in run {
        // attributes and timestamp delta as they are, the new offset delta, the rest as is.
        body_head.clear();
        body_head.put_slice(&r.body[..r.offset_delta_at.start]);
        put_varint(&mut body_head, r.offset_delta - first_delta);
        let tail = &r.body[r.offset_delta_at.end..];
        put_varint(&mut section, (body_head.len() + tail.len()) as i32);
        section.put_slice(&body_head);
        section.put_slice(tail);
    }
    let max_ts = if b.is_log_append_time() {
        // Every record reads as the batch's append time (its max timestamp).
        b.max_timestamp()
    } else {
        run.iter().map(|r| base_ts.saturating_add(r.timestamp_delta)).max().unwrap_or(base_ts)
    };
    let payload = records::compress(b.compression(), &section)?;
    let attributes = b.attributes() & !ATTR_TRANSACTIONAL & !ATTR_DELETE_HORIZON;
    debug_assert_eq!(attributes & ATTR_LOG_APPEND_TIME, b.attributes() & ATTR_LOG_APPEND_TIME);
    Ok(new_batch(attributes, base_ts, max_ts, producer, run.len() as i32, &payload))
}

/// A new v2 batch of `count` dense records (`payload`: the records section, compressed as
/// `attributes` say): `baseOffset` 0 (the broker assigns offsets), `partitionLeaderEpoch` -1,
/// `lastOffsetDelta` `count - 1`, `producer`'s fields, and its CRC32C.
pub(crate) fn new_batch(
    attributes: i16,
    base_ts: i64,
    max_ts: i64,
    producer: &RunHeader,
    count: i32,
    payload: &[u8],
) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER_LEN + payload.len());
    out.put_i64(0);
    out.put_i32((HEADER_LEN - LOG_OVERHEAD + payload.len()) as i32);
    out.put_i32(-1);
    out.put_i8(2);
    out.put_u32(0);
    out.put_i16(attributes);
    out.put_i32(count - 1);
    out.put_i64(base_ts);
    out.put_i64(max_ts);
    out.put_i64(producer.producer_id);
    out.put_i16(producer.producer_epoch);
    out.put_i32(producer.base_sequence);
    out.put_i32(count);
    out.put_slice(payload);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::BatchIter;
    use crate::wire::records::{codec, put_record, walk, NewRecord};

    /// A source batch at `base` with records at the given offset deltas (`last_delta` is the
    /// batch's `lastOffsetDelta`), compressed with `codec`.
    pub(crate) fn source_batch(base: i64, deltas: &[i32], last_delta: i32, codec: i16, attrs: i16) -> Batch {
        let mut s = BytesMut::new();
        let big = vec![0xabu8; 300]; // a value whose length varint takes two bytes
        for (n, d) in deltas.iter().enumerate() {
            let key = format!("key-{d}");
            let headers: Vec<(&[u8], Option<&[u8]>)> = vec![
                (b"k", Some(b"1")),
                (b"dup", Some(b"a")),
                (b"dup", Some(b"a")),
                (b"\xc3\x28", None), // not UTF-8
            ];
            put_record(
                &mut s,
                &NewRecord {
                    timestamp_delta: i64::from(*d) * 10 - 5,
                    offset_delta: *d,
                    key: (n % 3 != 1).then_some(key.as_bytes()),
                    value: match n % 3 {
                        0 => Some(&big[..]),
                        1 => Some(b"v"),
                        _ => None,
                    },
                    headers,
                },
            );
        }
        let payload = records::compress(codec, &s).unwrap();
        let mut out = BytesMut::new();
        out.put_i64(base);
        out.put_i32((HEADER_LEN - LOG_OVERHEAD + payload.len()) as i32);
        out.put_i32(7);
        out.put_i8(2);
        out.put_u32(0);
        out.put_i16(codec | attrs);
        out.put_i32(last_delta);
        out.put_i64(1_700_000_000_000);
        out.put_i64(1_700_000_009_999);
        out.put_i64(99);
        out.put_i16(1);
        out.put_i32(0);
        out.put_i32(deltas.len() as i32);
        out.put_slice(&payload);
        let crc = crc32c::crc32c(&out[21..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        BatchIter::new(out.freeze()).next().unwrap().unwrap()
    }

    /// `(offset, timestamp, tail bytes)` of a record as a consumer reads it.
    type Read = (i64, i64, Vec<u8>);

    /// Every record of `b`.
    fn read(b: &Batch) -> Vec<Read> {
        let sec = records_section(b, 1 << 24).unwrap();
        walk(&sec, b.record_count())
            .unwrap()
            .iter()
            .map(|r| {
                let ts =
                    if b.is_log_append_time() { b.max_timestamp() } else { b.base_timestamp() + r.timestamp_delta };
                (b.base_offset().saturating_add(i64::from(r.offset_delta)), ts, r.tail().to_vec())
            })
            .collect()
    }

    fn split_all(b: &Batch, from: i64) -> (Vec<Piece>, Vec<Read>) {
        let sec = records_section(b, 1 << 24).unwrap();
        let rs = walk(&sec, b.record_count()).unwrap();
        let pieces = plan(b, &rs, from).unwrap();
        let mut got = Vec::new();
        for p in &pieces {
            if let Piece::Run { first, records } = p {
                let h = RunHeader { producer_id: 5, producer_epoch: 2, base_sequence: 40 };
                let bytes = build_run(b, &rs[records.clone()], &h).unwrap();
                let mut it = BatchIter::new(bytes);
                let nb = it.next().unwrap().unwrap();
                assert!(it.next().is_none());
                assert!(nb.crc_is_valid());
                assert_eq!(nb.compression(), b.compression());
                assert_eq!(nb.is_log_append_time(), b.is_log_append_time());
                assert!(!nb.is_transactional());
                assert_eq!(
                    (nb.base_offset(), nb.producer_id(), nb.producer_epoch(), nb.base_sequence()),
                    (0, 5, 2, 40)
                );
                assert_eq!(i64::from(nb.record_count()), i64::from(nb.last_offset_delta()) + 1);
                // Read it back as if the broker had appended it at `first`.
                let mut whole = BytesMut::from(&nb.bytes()[..]);
                whole[0..8].copy_from_slice(&first.to_be_bytes());
                let placed = BatchIter::new(whole.freeze()).next().unwrap().unwrap();
                got.extend(read(&placed));
            }
        }
        (pieces, got)
    }

    #[test]
    fn runs_are_byte_identical_records_for_every_codec_and_timestamp_type() {
        // Deltas 0..2, a hole, 130..131 (a two-byte varint delta becomes one byte), hole at the end.
        let deltas = [0, 1, 2, 130, 131, 140];
        for c in [codec::NONE, codec::GZIP, codec::SNAPPY, codec::LZ4, codec::ZSTD] {
            for attrs in [0, ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL | ATTR_DELETE_HORIZON] {
                let b = source_batch(1000, &deltas, 150, c, attrs);
                let (pieces, got) = split_all(&b, 1000);
                assert_eq!(
                    pieces,
                    vec![
                        Piece::Run { first: 1000, records: 0..3 },
                        Piece::Hole { from: 1003, to: 1130 },
                        Piece::Run { first: 1130, records: 3..5 },
                        Piece::Hole { from: 1132, to: 1140 },
                        Piece::Run { first: 1140, records: 5..6 },
                        Piece::Hole { from: 1141, to: 1151 },
                    ]
                );
                assert_eq!(got, read(&b), "codec {c} attrs {attrs}");
            }
        }
    }

    #[test]
    fn a_resumed_split_emits_only_what_is_at_or_after_the_position() {
        let b = source_batch(0, &[0, 1, 2, 130, 131], 140, codec::ZSTD, 0);
        let all = read(&b);
        for (from, want_first) in [(2, Piece::Run { first: 2, records: 2..3 }), (3, Piece::Hole { from: 3, to: 130 })] {
            let (pieces, got) = split_all(&b, from);
            assert_eq!(pieces[0], want_first);
            assert_eq!(got, all.iter().filter(|r| r.0 >= from).cloned().collect::<Vec<_>>());
        }
        let (pieces, _) = split_all(&b, 100);
        assert_eq!(pieces[0], Piece::Hole { from: 100, to: 130 });
        let (pieces, got) = split_all(&b, 132);
        assert_eq!((pieces, got.len()), (vec![Piece::Hole { from: 132, to: 141 }], 0));
    }

    #[test]
    fn an_empty_batch_is_one_hole_and_bad_offsets_are_errors() {
        let b = source_batch(10, &[], 4, codec::GZIP, 0);
        // The cleaner's empty batches have a codec but no records section.
        let mut h = BytesMut::from(&b.bytes()[..HEADER_LEN]);
        h[8..12].copy_from_slice(&((HEADER_LEN - LOG_OVERHEAD) as i32).to_be_bytes());
        let empty = BatchIter::new(h.freeze()).next().unwrap().unwrap();
        let sec = records_section(&empty, 0).unwrap();
        let rs = walk(&sec, 0).unwrap();
        assert_eq!(plan(&empty, &rs, 10).unwrap(), vec![Piece::Hole { from: 10, to: 15 }]);
        for deltas in [[0, 0], [3, 2], [0, 9]] {
            let b = source_batch(0, &deltas, 5, codec::NONE, 0);
            let sec = records_section(&b, 1 << 20).unwrap();
            let rs = walk(&sec, 2).unwrap();
            assert!(matches!(plan(&b, &rs, 0), Err(SplitError::BadOffset { .. })), "{deltas:?}");
        }
    }

    #[test]
    fn decompression_is_capped() {
        let b = source_batch(0, &[0, 2], 3, codec::LZ4, 0);
        let n = decompressed_len(&b, 1 << 20).unwrap();
        assert!(n > 300, "{n}");
        assert_eq!(decompressed_len(&b, n - 1), Err(RecordsError::TooLarge { limit: n - 1 }));
        assert!(records_section(&b, n - 1).is_err());
        assert_eq!(records_section(&b, n).unwrap().len(), n);
    }
}
