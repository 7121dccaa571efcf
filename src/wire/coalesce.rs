//! Coalescing consecutive small source batches of a partition into one v2 batch (issue 13,
//! item 2): the destination broker's cost is per batch and per request, so a source of
//! one-record batches is copied many times faster as batches of hundreds of records.
//!
//! By default only what can be merged without decompressing or re-encoding a record is
//! merged ([`coalesce`]): uncompressed, CreateTime, non-control batches whose records fill
//! their offset range, with no delete horizon ([`is_coalescible`]). Each record is copied byte
//! for byte except its timestamp delta and offset delta (rewritten relative to the new batch's
//! base timestamp and first offset) and its length prefix; attributes, keys, values and headers
//! are the source's bytes. So a consumer reads every record at the same offset with the same
//! timestamp, key, value and headers; only the batch boundaries (and the producer fields, as
//! for every mirrored batch) differ.
//!
//! With `mirror.coalesce.recompress` ([`recompress`]), batches compressed with one codec are
//! merged the same way: their records sections are decompressed (each bounded by the caller's
//! limit), re-framed exactly as above, and compressed again with that codec at its default
//! level. The records are the same; the batch's payload bytes are not the source's. Never
//! mixes codecs, nor compressed with uncompressed batches.

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::{Batch, ATTR_COMPRESSION_MASK, ATTR_TRANSACTIONAL};
use super::records::{self, codec, put_varint, put_varlong, RecordsError};
use super::split::{self, RunHeader};

/// Whether source batch `b` may be merged with its neighbours: uncompressed, CreateTime,
/// not a control batch, records filling its offset range, no delete horizon (KIP-534), and
/// at most `max_bytes` long. (The transactional bit of committed data is cleared anyway.)
pub fn is_coalescible(b: &Batch, max_bytes: usize) -> bool {
    b.attributes() & !ATTR_TRANSACTIONAL == 0
        && i64::from(b.record_count()) == i64::from(b.last_offset_delta()) + 1
        && b.bytes().len() <= max_bytes
}

/// The codec (Kafka `CompressionType` id, [`records::codec`]) under which source batch `b`
/// may be merged with neighbours of the same codec, or `None` when it may not be merged:
/// [`codec::NONE`] when [`is_coalescible`]; with `recompress` (`mirror.coalesce.recompress`),
/// also gzip, snappy, lz4 or zstd for a batch that is otherwise coalescible (CreateTime, not
/// control, dense, no delete horizon, at most `max_bytes` long as compressed).
pub fn merge_codec(b: &Batch, max_bytes: usize, recompress: bool) -> Option<i16> {
    let c = b.compression();
    let other = b.attributes() & !ATTR_TRANSACTIONAL & !ATTR_COMPRESSION_MASK;
    let dense = i64::from(b.record_count()) == i64::from(b.last_offset_delta()) + 1;
    if other != 0 || !dense || b.bytes().len() > max_bytes {
        return None;
    }
    match c {
        codec::NONE => Some(codec::NONE),
        codec::GZIP | codec::SNAPPY | codec::LZ4 | codec::ZSTD if recompress => Some(c),
        _ => None,
    }
}

/// Why batches cannot be coalesced.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CoalesceError {
    /// A records section cannot be read (or compressed again).
    #[error(transparent)]
    Records(#[from] RecordsError),
    /// A batch is not coalescible, or does not start where the one before it ends.
    #[error("batch {index} (base offset {base_offset}) cannot be merged: {why}")]
    NotMergeable {
        /// Index of the batch.
        index: usize,
        /// Its base offset.
        base_offset: i64,
        /// Why.
        why: &'static str,
    },
    /// [`recompress`]: the records of batch `index` do not fit in `limit` bytes (decompressed)
    /// after those of the batches before it, and fewer than two batches fit.
    #[error(
        "batch {index} (base offset {base_offset}) cannot be merged: its records exceed {limit} bytes decompressed"
    )]
    TooLarge {
        /// Index of the batch (0 or 1).
        index: usize,
        /// Its base offset.
        base_offset: i64,
        /// The limit, bytes.
        limit: usize,
    },
}

/// The new batch's records so far: the re-framed section, its record count, the next source
/// offset expected, and the largest record timestamp (ms).
struct Merged {
    first_offset: i64,
    base_ts: i64,
    max_ts: i64,
    next: i64,
    count: i32,
    section: BytesMut,
    head: BytesMut,
}

impl Merged {
    fn new(first: &Batch, capacity: usize) -> Self {
        Self {
            first_offset: first.base_offset(),
            base_ts: first.base_timestamp(),
            max_ts: i64::MIN,
            next: first.base_offset(),
            count: 0,
            section: BytesMut::with_capacity(capacity),
            head: BytesMut::with_capacity(32),
        }
    }

    /// Appends every record of `b` (whose records section, uncompressed, is `section`):
    /// attributes byte, new timestamp and offset deltas, the rest (key, value, headers) as is.
    fn push(&mut self, b: &Batch, section: &[u8]) -> Result<(), RecordsError> {
        for r in records::walk(section, b.record_count())? {
            let ts = b.base_timestamp().saturating_add(r.timestamp_delta);
            let offset = b.base_offset() + i64::from(r.offset_delta);
            self.max_ts = self.max_ts.max(ts);
            self.head.clear();
            self.head.put_i8(r.attributes);
            put_varlong(&mut self.head, ts.saturating_sub(self.base_ts));
            put_varint(&mut self.head, (offset - self.first_offset) as i32);
            let tail = r.tail();
            put_varint(&mut self.section, (self.head.len() + tail.len()) as i32);
            self.section.put_slice(&self.head);
            self.section.put_slice(tail);
            self.count += 1;
        }
        self.next = b.next_offset();
        Ok(())
    }

    /// Whether the records fill the offsets from the first batch's base to `next`.
    fn is_dense(&self) -> bool {
        i64::from(self.count) == self.next - self.first_offset
    }

    fn max_ts(&self) -> i64 {
        if self.count > 0 {
            self.max_ts
        } else {
            self.base_ts
        }
    }
}

/// One new v2 batch holding every record of `batches` (consecutive and each
/// [`is_coalescible`]), with `baseOffset` 0 (the broker assigns offsets), `partitionLeaderEpoch`
/// -1, attributes 0 (uncompressed, CreateTime), the first batch's base timestamp, the largest
/// record timestamp as max timestamp, `producer`'s fields, and a CRC32C. The records are those
/// of the source batches in order, offset deltas 0..n-1.
///
/// # Errors
/// [`CoalesceError`] for a batch that is not coalescible, not consecutive, or whose records
/// cannot be read (nothing is built then).
pub fn coalesce(batches: &[Batch], producer: &RunHeader) -> Result<Bytes, CoalesceError> {
    let Some(first) = batches.first() else {
        return Err(CoalesceError::NotMergeable { index: 0, base_offset: -1, why: "no batch" });
    };
    let capacity = batches.iter().map(|b| b.payload().len() + 8 * b.record_count().max(0) as usize).sum();
    let mut m = Merged::new(first, capacity);
    for (index, b) in batches.iter().enumerate() {
        let not = |why| CoalesceError::NotMergeable { index, base_offset: b.base_offset(), why };
        if !is_coalescible(b, usize::MAX) {
            return Err(not("compressed, LogAppendTime, control, compacted or with a delete horizon"));
        }
        if b.base_offset() != m.next {
            return Err(not("does not start where the batch before it ends"));
        }
        m.push(b, &b.payload())?;
    }
    if !m.is_dense() {
        return Err(CoalesceError::NotMergeable {
            index: 0,
            base_offset: m.first_offset,
            why: "records do not fill the offsets",
        });
    }
    // Attributes 0: uncompressed, CreateTime, not transactional, not control.
    Ok(split::new_batch(0, m.base_ts, m.max_ts(), producer, m.count, &m.section))
}

/// A batch built by [`recompress`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recompressed {
    /// The new v2 batch (compressed with the source batches' codec).
    pub batch: Bytes,
    /// How many source batches it holds: the first `merged` of those given, at least 2.
    pub merged: usize,
}

/// One new v2 batch holding the records of the longest prefix (at least two batches) of
/// `batches` (consecutive, all compressed with the same codec, each [`merge_codec`] with
/// `recompress`) whose records, decompressed and re-framed, take at most about `limit` bytes:
/// the records re-framed as [`coalesce`] does (offset and timestamp deltas rewritten; record
/// attributes, keys, values and headers byte for byte), compressed again with that codec at
/// its default level ([`records::compress`]). Header: `baseOffset` 0, `partitionLeaderEpoch`
/// -1, attributes = the codec (CreateTime, not transactional, not control), the first batch's
/// base timestamp, the largest record timestamp as max timestamp, `producer`'s fields, and a
/// CRC32C.
///
/// Memory: each records section is decompressed with output capped at what is left of
/// `limit`, one at a time, so at most about twice `limit` bytes are held while building.
///
/// # Errors
/// [`CoalesceError::TooLarge`] when fewer than two batches fit in `limit`;
/// [`CoalesceError::NotMergeable`] for an uncompressed batch, another codec, a batch that is
/// otherwise not mergeable or not consecutive; [`CoalesceError::Records`] for a payload that
/// cannot be decompressed or read (nothing is built then).
pub fn recompress(batches: &[Batch], producer: &RunHeader, limit: usize) -> Result<Recompressed, CoalesceError> {
    let Some(first) = batches.first() else {
        return Err(CoalesceError::NotMergeable { index: 0, base_offset: -1, why: "no batch" });
    };
    let codec = first.compression();
    let capacity = batches.iter().map(|b| b.payload().len()).sum::<usize>().min(limit);
    let mut m = Merged::new(first, capacity);
    let mut merged = 0;
    for (index, b) in batches.iter().enumerate() {
        let not = |why| CoalesceError::NotMergeable { index, base_offset: b.base_offset(), why };
        match merge_codec(b, usize::MAX, true) {
            Some(codec::NONE) => return Err(not("uncompressed")),
            Some(c) if c == codec => {}
            Some(_) => return Err(not("compressed with another codec than the first batch")),
            None => return Err(not("LogAppendTime, control, compacted, with a delete horizon or an unknown codec")),
        }
        if b.base_offset() != m.next {
            return Err(not("does not start where the batch before it ends"));
        }
        let room = limit.saturating_sub(m.section.len());
        let section = match split::records_section(b, room) {
            Ok(s) => s,
            Err(RecordsError::TooLarge { .. }) if index >= 2 => break,
            Err(RecordsError::TooLarge { .. }) => {
                return Err(CoalesceError::TooLarge { index, base_offset: b.base_offset(), limit })
            }
            Err(e) => return Err(e.into()),
        };
        m.push(b, &section)?;
        merged = index + 1;
    }
    if merged < 2 {
        return Err(CoalesceError::NotMergeable {
            index: merged,
            base_offset: batches.get(merged).map_or(-1, Batch::base_offset),
            why: "fewer than two batches to merge",
        });
    }
    if !m.is_dense() {
        return Err(CoalesceError::NotMergeable {
            index: 0,
            base_offset: m.first_offset,
            why: "records do not fill the offsets",
        });
    }
    let payload = records::compress(codec, &m.section)?;
    // Attributes: the codec; CreateTime, not transactional, not control.
    let batch = split::new_batch(codec, m.base_ts, m.max_ts(), producer, m.count, &payload);
    Ok(Recompressed { batch, merged })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::{BatchIter, ATTR_CONTROL, ATTR_LOG_APPEND_TIME, HEADER_LEN, LOG_OVERHEAD};
    use crate::wire::records::{put_record, NewRecord};
    use crate::wire::split::ATTR_DELETE_HORIZON;

    /// A batch at `base` with one record per `(timestamp, key, value)`, its records section
    /// compressed with the codec of `attrs`.
    fn batch(base: i64, base_ts: i64, recs: &[(i64, &str, Option<&str>)], attrs: i16) -> Batch {
        let mut s = BytesMut::new();
        for (n, (ts, k, v)) in recs.iter().enumerate() {
            let headers: Vec<(&[u8], Option<&[u8]>)> = vec![(b"h", Some(k.as_bytes())), (b"\xc3\x28", None)];
            put_record(
                &mut s,
                &NewRecord {
                    timestamp_delta: ts - base_ts,
                    offset_delta: n as i32,
                    key: Some(k.as_bytes()),
                    value: v.map(str::as_bytes),
                    headers,
                },
            );
        }
        let n = recs.len() as i32;
        let s = records::compress(attrs & ATTR_COMPRESSION_MASK, &s).unwrap();
        let mut out = BytesMut::new();
        out.put_i64(base);
        out.put_i32((HEADER_LEN - LOG_OVERHEAD + s.len()) as i32);
        out.put_i32(7);
        out.put_i8(2);
        out.put_u32(0);
        out.put_i16(attrs);
        out.put_i32(n - 1);
        out.put_i64(base_ts);
        out.put_i64(recs.iter().map(|r| r.0).max().unwrap_or(base_ts));
        out.put_i64(99);
        out.put_i16(1);
        out.put_i32(5);
        out.put_i32(n);
        out.put_slice(&s);
        let crc = crc32c::crc32c(&out[21..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        BatchIter::new(out.freeze()).next().unwrap().unwrap()
    }

    /// (offset, timestamp, key, value and headers as on the wire) of every record, as a
    /// consumer reads them.
    fn read(b: &Batch) -> Vec<(i64, i64, Vec<u8>)> {
        let payload = split::records_section(b, 1 << 20).unwrap();
        records::walk(&payload, b.record_count())
            .unwrap()
            .iter()
            .map(|r| {
                (b.base_offset() + i64::from(r.offset_delta), b.base_timestamp() + r.timestamp_delta, r.tail().to_vec())
            })
            .collect()
    }

    const PRODUCER: RunHeader = RunHeader { producer_id: 4242, producer_epoch: 3, base_sequence: 17 };

    #[test]
    fn consecutive_batches_become_one_with_every_record_read_the_same() {
        let now = 1_700_000_000_000;
        let src = vec![
            batch(100, now, &[(now, "a", Some("1"))], 0),
            // Earlier timestamp than the first batch: a negative delta.
            batch(101, now - 5_000, &[(now - 5_000, "b", None), (now + 7, "c", Some("3"))], ATTR_TRANSACTIONAL),
            batch(103, now + (1 << 33), &[(now + (1 << 33), "d", Some(""))], 0),
        ];
        let merged = coalesce(&src, &PRODUCER).unwrap();
        let m = BatchIter::new(merged).next().unwrap().unwrap();
        assert!(m.crc_is_valid());
        assert_eq!((m.base_offset(), m.record_count(), m.last_offset_delta()), (0, 4, 3));
        assert_eq!((m.producer_id(), m.producer_epoch(), m.base_sequence()), (4242, 3, 17));
        assert_eq!((m.attributes(), m.compression()), (0, codec::NONE));
        assert_eq!(m.base_timestamp(), now);
        assert_eq!(m.max_timestamp(), now + (1 << 33));
        assert_eq!(m.partition_leader_epoch(), -1);
        // Read at the source's offsets (the broker assigns base 100 here).
        let want: Vec<_> = src.iter().flat_map(read).collect();
        let mut bytes = BytesMut::from(&m.bytes()[..]);
        bytes[..8].copy_from_slice(&100i64.to_be_bytes());
        let at_100 = BatchIter::new(bytes.freeze()).next().unwrap().unwrap();
        assert_eq!(read(&at_100), want);
    }

    #[test]
    fn batches_that_cannot_be_merged_are_refused() {
        let now = 1_700_000_000_000;
        let a = batch(0, now, &[(now, "a", None)], 0);
        let gap = batch(2, now, &[(now, "b", None)], 0);
        assert!(matches!(coalesce(&[a.clone(), gap], &PRODUCER), Err(CoalesceError::NotMergeable { index: 1, .. })));
        for attrs in [codec::GZIP, ATTR_LOG_APPEND_TIME, ATTR_CONTROL, ATTR_DELETE_HORIZON] {
            let b = batch(1, now, &[(now, "b", None)], attrs);
            assert!(!is_coalescible(&b, 1 << 20), "attributes {attrs:#x}");
            assert!(coalesce(&[a.clone(), b], &PRODUCER).is_err());
        }
        assert!(is_coalescible(&a, a.bytes().len()));
        assert!(!is_coalescible(&a, a.bytes().len() - 1));
        assert!(coalesce(&[], &PRODUCER).is_err());
    }

    const CODECS: [i16; 4] = [codec::GZIP, codec::SNAPPY, codec::LZ4, codec::ZSTD];

    /// `merged` as the destination holds it: at source base offset `base`.
    fn at(base: i64, merged: &Bytes) -> Batch {
        let mut bytes = BytesMut::from(&merged[..]);
        bytes[..8].copy_from_slice(&base.to_be_bytes());
        BatchIter::new(bytes.freeze()).next().unwrap().unwrap()
    }

    #[test]
    fn compressed_batches_of_one_codec_become_one_batch_of_that_codec() {
        let now = 1_700_000_000_000;
        for c in CODECS {
            let src = vec![
                batch(100, now, &[(now, "a", Some("1"))], c),
                batch(101, now - 5_000, &[(now - 5_000, "b", None), (now + 7, "c", Some("3"))], c | ATTR_TRANSACTIONAL),
                batch(103, now + (1 << 33), &[(now + (1 << 33), "d", Some(""))], c),
            ];
            for b in &src {
                assert_eq!(merge_codec(b, 1 << 20, true), Some(c));
                assert_eq!(merge_codec(b, 1 << 20, false), None, "compressed batches only with the opt-in");
                assert!(!is_coalescible(b, 1 << 20));
            }
            let r = recompress(&src, &PRODUCER, 1 << 20).unwrap();
            assert_eq!(r.merged, 3);
            let m = at(100, &r.batch);
            assert!(m.crc_is_valid());
            assert_eq!((m.record_count(), m.last_offset_delta()), (4, 3));
            assert_eq!((m.producer_id(), m.producer_epoch(), m.base_sequence()), (4242, 3, 17));
            assert_eq!((m.attributes(), m.compression()), (c, c), "codec {c}: CreateTime, not transactional");
            assert_eq!((m.base_timestamp(), m.max_timestamp()), (now, now + (1 << 33)));
            assert_eq!(m.partition_leader_epoch(), -1);
            assert_eq!(BatchIter::new(r.batch.clone()).next().unwrap().unwrap().base_offset(), 0);
            let want: Vec<_> = src.iter().flat_map(read).collect();
            assert_eq!(read(&m), want, "codec {c}");
            // The same records as merging the uncompressed batches would give.
            let plain: Vec<Batch> = src
                .iter()
                .map(|b| {
                    let section = split::records_section(b, 1 << 20).unwrap();
                    let mut bytes = BytesMut::from(&b.bytes()[..HEADER_LEN]);
                    bytes[21..23].copy_from_slice(&0i16.to_be_bytes());
                    bytes[8..12].copy_from_slice(&((HEADER_LEN - LOG_OVERHEAD + section.len()) as i32).to_be_bytes());
                    bytes.put_slice(&section);
                    BatchIter::new(bytes.freeze()).next().unwrap().unwrap()
                })
                .collect();
            let uncompressed = at(100, &coalesce(&plain, &PRODUCER).unwrap());
            assert_eq!(
                split::records_section(&m, 1 << 20).unwrap(),
                uncompressed.payload(),
                "codec {c}: re-framed as uncompressed merges are"
            );
        }
    }

    #[test]
    fn codecs_are_never_mixed() {
        let now = 1_700_000_000_000;
        let lz4 = batch(0, now, &[(now, "a", None)], codec::LZ4);
        for other in [codec::NONE, codec::GZIP, codec::SNAPPY, codec::ZSTD] {
            let b = batch(1, now, &[(now, "b", None)], other);
            assert!(matches!(
                recompress(&[lz4.clone(), b.clone()], &PRODUCER, 1 << 20),
                Err(CoalesceError::NotMergeable { index: 1, .. })
            ));
            assert!(matches!(
                recompress(&[b, lz4.clone()], &PRODUCER, 1 << 20),
                Err(CoalesceError::NotMergeable { index: 0 | 1, .. })
            ));
        }
        // A compressed batch never goes into an uncompressed merge.
        let plain = batch(1, now, &[(now, "b", None)], 0);
        assert!(coalesce(&[plain.clone(), batch(2, now, &[(now, "c", None)], codec::LZ4)], &PRODUCER).is_err());
        // LogAppendTime, control, delete horizon, compaction holes, gaps: refused as well.
        for attrs in [ATTR_LOG_APPEND_TIME, ATTR_CONTROL, ATTR_DELETE_HORIZON] {
            let b = batch(1, now, &[(now, "b", None)], codec::LZ4 | attrs);
            assert_eq!(merge_codec(&b, 1 << 20, true), None, "attributes {attrs:#x}");
            assert!(recompress(&[lz4.clone(), b], &PRODUCER, 1 << 20).is_err());
        }
        let gap = batch(2, now, &[(now, "b", None)], codec::LZ4);
        assert!(matches!(
            recompress(&[lz4.clone(), gap], &PRODUCER, 1 << 20),
            Err(CoalesceError::NotMergeable { index: 1, .. })
        ));
        assert!(recompress(std::slice::from_ref(&lz4), &PRODUCER, 1 << 20).is_err(), "one batch is not a merge");
        assert!(recompress(&[], &PRODUCER, 1 << 20).is_err());
        assert_eq!(merge_codec(&lz4, lz4.bytes().len() - 1, true), None, "too large compressed");
    }

    #[test]
    fn records_beyond_the_limit_end_the_merge_or_refuse_it() {
        let now = 1_700_000_000_000;
        // Values that compress well: ~2 KB of records per batch, far less compressed.
        let v = "x".repeat(2000);
        let src: Vec<Batch> = (0..4).map(|n| batch(n, now, &[(now + n, "k", Some(v.as_str()))], codec::LZ4)).collect();
        let one = split::records_section(&src[0], 1 << 20).unwrap().len();
        assert!(src[0].bytes().len() * 4 < one, "compressed {} of {one}", src[0].bytes().len());
        // Room for two sections (and a little): the first two merged, the rest left.
        let r = recompress(&src, &PRODUCER, 2 * one + 10).unwrap();
        assert_eq!(r.merged, 2);
        assert_eq!(read(&at(0, &r.batch)), src[..2].iter().flat_map(read).collect::<Vec<_>>());
        // Room for one: nothing merged, naming the batch that does not fit.
        assert!(matches!(
            recompress(&src, &PRODUCER, one + 10),
            Err(CoalesceError::TooLarge { index: 1, base_offset: 1, .. })
        ));
        assert!(matches!(recompress(&src, &PRODUCER, one - 1), Err(CoalesceError::TooLarge { index: 0, .. })));
    }

    #[test]
    fn a_malformed_compressed_payload_is_an_error() {
        let now = 1_700_000_000_000;
        for c in CODECS {
            let ok = batch(1, now, &[(now, "b", Some("2"))], c);
            let payload = ok.payload();
            let mut cases: Vec<Vec<u8>> = vec![
                vec![0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                payload[..payload.len() / 2].to_vec(),
                Vec::new(),
            ];
            // Flipped bytes in the middle of a valid payload.
            let mut flipped = payload.to_vec();
            let mid = flipped.len() / 2;
            flipped[mid] ^= 0xff;
            flipped[mid + 1] ^= 0x55;
            cases.push(flipped);
            for bad in cases {
                let mut bytes = BytesMut::from(&ok.bytes()[..HEADER_LEN]);
                bytes[8..12].copy_from_slice(&((HEADER_LEN - LOG_OVERHEAD + bad.len()) as i32).to_be_bytes());
                bytes.put_slice(&bad);
                let b = BatchIter::new(bytes.freeze()).next().unwrap().unwrap();
                let first = batch(0, now, &[(now, "a", Some("1"))], c);
                // An error (a snappy block header may claim a size beyond the limit) or, for
                // a flip the codec cannot see, the same count of records; never a panic.
                match recompress(&[first, b], &PRODUCER, 1 << 20) {
                    Err(
                        CoalesceError::Records(_)
                        | CoalesceError::NotMergeable { .. }
                        | CoalesceError::TooLarge { index: 1, .. },
                    ) => {}
                    Err(e) => panic!("codec {c}: unexpected {e}"),
                    Ok(r) => assert_eq!(at(0, &r.batch).record_count(), 2, "codec {c}"),
                }
            }
        }
    }
}
