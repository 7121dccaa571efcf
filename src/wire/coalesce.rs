//! Coalescing consecutive small uncompressed source batches of a partition into one v2 batch
//! (issue 13, item 2): the destination broker's cost is per batch and per request, so a
//! source of one-record batches is copied many times faster as batches of hundreds of records.
//!
//! Only what can be merged without decompressing or re-encoding a record is merged:
//! uncompressed, CreateTime, non-control batches whose records fill their offset range, with
//! no delete horizon ([`is_coalescible`]). Each record is copied byte for byte except its
//! timestamp delta and offset delta (rewritten relative to the new batch's base timestamp and
//! first offset) and its length prefix; attributes, keys, values and headers are the source's
//! bytes. So a consumer reads every record at the same offset with the same timestamp, key,
//! value and headers; only the batch boundaries (and the producer fields, as for every
//! mirrored batch) differ.

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::{Batch, ATTR_TRANSACTIONAL};
use super::records::{self, put_varint, put_varlong, RecordsError};
use super::split::{self, RunHeader};

/// Whether source batch `b` may be merged with its neighbours: uncompressed, CreateTime,
/// not a control batch, records filling its offset range, no delete horizon (KIP-534), and
/// at most `max_bytes` long. (The transactional bit of committed data is cleared anyway.)
pub fn is_coalescible(b: &Batch, max_bytes: usize) -> bool {
    b.attributes() & !ATTR_TRANSACTIONAL == 0
        && i64::from(b.record_count()) == i64::from(b.last_offset_delta()) + 1
        && b.bytes().len() <= max_bytes
}

/// Why batches cannot be coalesced.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CoalesceError {
    /// A records section cannot be read.
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
    let first_offset = first.base_offset();
    let base_ts = first.base_timestamp();
    let mut max_ts = i64::MIN;
    let mut next = first_offset;
    let mut count: i32 = 0;
    let mut section =
        BytesMut::with_capacity(batches.iter().map(|b| b.payload().len() + 8 * b.record_count().max(0) as usize).sum());
    let mut head = BytesMut::with_capacity(32);
    for (index, b) in batches.iter().enumerate() {
        let not = |why| CoalesceError::NotMergeable { index, base_offset: b.base_offset(), why };
        if !is_coalescible(b, usize::MAX) {
            return Err(not("compressed, LogAppendTime, control, compacted or with a delete horizon"));
        }
        if b.base_offset() != next {
            return Err(not("does not start where the batch before it ends"));
        }
        let payload = b.payload();
        for r in records::walk(&payload, b.record_count())? {
            let ts = b.base_timestamp().saturating_add(r.timestamp_delta);
            let offset = b.base_offset() + i64::from(r.offset_delta);
            max_ts = max_ts.max(ts);
            // attributes (one byte), the new timestamp and offset deltas, the rest as is.
            head.clear();
            head.put_i8(r.attributes);
            put_varlong(&mut head, ts.saturating_sub(base_ts));
            put_varint(&mut head, (offset - first_offset) as i32);
            let tail = r.tail();
            put_varint(&mut section, (head.len() + tail.len()) as i32);
            section.put_slice(&head);
            section.put_slice(tail);
            count += 1;
        }
        next = b.next_offset();
    }
    if i64::from(count) != next - first_offset {
        return Err(CoalesceError::NotMergeable {
            index: 0,
            base_offset: first_offset,
            why: "records do not fill the offsets",
        });
    }
    // Attributes 0: uncompressed, CreateTime, not transactional, not control.
    Ok(split::new_batch(0, base_ts, if count > 0 { max_ts } else { base_ts }, producer, count, &section))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::{BatchIter, ATTR_CONTROL, ATTR_LOG_APPEND_TIME, HEADER_LEN, LOG_OVERHEAD};
    use crate::wire::records::{codec, put_record, NewRecord};
    use crate::wire::split::ATTR_DELETE_HORIZON;

    /// An uncompressed batch at `base` with one record per `(timestamp, key, value)`.
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
        let payload = b.payload();
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
}
