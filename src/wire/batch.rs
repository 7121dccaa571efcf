//! The zero-copy record-batch toolkit (Kafka message format v2, `RecordBatch`): iterate
//! batches by header, read header fields, patch producer id / epoch / base sequence and the
//! transactional bit with a fresh CRC32C, and build the two kinds of batch mirrorgate writes
//! itself — placeholder batches and synthesised control batches (DESIGN §4.3).
//!
//! Never decompresses and never copies a payload: a patched header is 61 new bytes, the
//! payload stays the `Bytes` slice it came in, and the CRC is computed over both in place.
//!
//! Layout (Kafka `DefaultRecordBatch`): baseOffset i64 @0, batchLength i32 @8,
//! partitionLeaderEpoch i32 @12, magic i8 @16, crc u32 @17 (CRC32C of bytes 21..end),
//! attributes i16 @21, lastOffsetDelta i32 @23, baseTimestamp i64 @27, maxTimestamp i64 @35,
//! producerId i64 @43, producerEpoch i16 @51, baseSequence i32 @53, recordCount i32 @57,
//! records @61.

use bytes::{BufMut, Bytes, BytesMut};

/// Bytes of a v2 batch header.
pub const HEADER_LEN: usize = 61;
/// Bytes before `batchLength`'s count starts (baseOffset + batchLength).
pub const LOG_OVERHEAD: usize = 12;
/// Offset of the CRC'd region.
const CRC_START: usize = 21;

/// Attribute bits.
pub const ATTR_COMPRESSION_MASK: i16 = 0x07;
/// Timestamp type bit: 1 = LogAppendTime.
pub const ATTR_LOG_APPEND_TIME: i16 = 0x08;
/// Transactional bit.
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
/// Control batch bit.
pub const ATTR_CONTROL: i16 = 0x20;

/// The first bytes of every placeholder record key: mirrorgate's magic. A placeholder key is
/// `PLACEHOLDER_MAGIC ++ nonce (8 bytes) ++ source offset (i64)`: unique per installation and
/// offset, so placeholders never share a key with each other or (in practice) with real data.
pub const PLACEHOLDER_MAGIC: &[u8; 8] = b"\x00MGPH\x01\xfe\x00";
/// Bytes of a placeholder record key: magic, nonce, source offset.
const PLACEHOLDER_KEY_LEN: usize = 24;

/// Why bytes are not a usable record batch.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    /// Magic byte other than 2 (message format v0/v1 is not supported).
    #[error("record batch at offset {base_offset} has magic {magic}; only v2 is supported")]
    UnsupportedMagic {
        /// The batch's base offset.
        base_offset: i64,
        /// Its magic byte.
        magic: i8,
    },
    /// `batchLength` smaller than a header.
    #[error("record batch at offset {base_offset} has an impossible length {length}")]
    BadLength {
        /// The batch's base offset.
        base_offset: i64,
        /// The announced `batchLength`.
        length: i32,
    },
}

/// A view of one whole v2 batch (header and payload) in a shared buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    bytes: Bytes,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

impl Batch {
    /// The whole batch, as received.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }
    /// `baseOffset`.
    pub fn base_offset(&self) -> i64 {
        be_i64(&self.bytes, 0)
    }
    /// `baseOffset + lastOffsetDelta`, saturating: wire values near `i64::MAX` never overflow
    /// (such a batch is refused by the checks that compare offsets, never a panic).
    pub fn last_offset(&self) -> i64 {
        self.base_offset().saturating_add(i64::from(self.last_offset_delta()))
    }
    /// The offset after this batch (saturating, as [`Self::last_offset`]).
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }
    /// `partitionLeaderEpoch` (the source leader epoch that wrote it).
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(&self.bytes, 12)
    }
    /// `crc` as stored.
    pub fn crc(&self) -> u32 {
        be_i32(&self.bytes, 17) as u32
    }
    /// `attributes`.
    pub fn attributes(&self) -> i16 {
        be_i16(&self.bytes, 21)
    }
    /// Compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn compression(&self) -> i16 {
        self.attributes() & ATTR_COMPRESSION_MASK
    }
    /// Whether the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes() & ATTR_TRANSACTIONAL != 0
    }
    /// Whether it is a control batch (transaction marker).
    pub fn is_control(&self) -> bool {
        self.attributes() & ATTR_CONTROL != 0
    }
    /// Whether timestamps are LogAppendTime.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes() & ATTR_LOG_APPEND_TIME != 0
    }
    /// `lastOffsetDelta`.
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(&self.bytes, 23)
    }
    /// `baseTimestamp`, ms.
    pub fn base_timestamp(&self) -> i64 {
        be_i64(&self.bytes, 27)
    }
    /// `maxTimestamp`, ms.
    pub fn max_timestamp(&self) -> i64 {
        be_i64(&self.bytes, 35)
    }
    /// `producerId`.
    pub fn producer_id(&self) -> i64 {
        be_i64(&self.bytes, 43)
    }
    /// `producerEpoch`.
    pub fn producer_epoch(&self) -> i16 {
        be_i16(&self.bytes, 51)
    }
    /// `baseSequence`.
    pub fn base_sequence(&self) -> i32 {
        be_i32(&self.bytes, 53)
    }
    /// `recordCount` (a compacted batch may hold fewer records than offsets).
    pub fn record_count(&self) -> i32 {
        be_i32(&self.bytes, 57)
    }
    /// The records after the header, untouched (compressed if the batch is).
    pub fn payload(&self) -> Bytes {
        self.bytes.slice(HEADER_LEN..)
    }
    /// Whether the stored CRC matches the content.
    pub fn crc_is_valid(&self) -> bool {
        crc32c::crc32c(&self.bytes[CRC_START..]) == self.crc()
    }
    /// Whether this is a placeholder batch written by a mirror (every record a placeholder
    /// record of one nonce and consecutive source offsets). See [`is_placeholder_batch`].
    pub fn is_placeholder(&self) -> bool {
        is_placeholder_batch(&self.bytes)
    }
}

/// Whether the whole v2 batch in `bytes` (header and records, as [`BatchIter`] yields it) is a
/// placeholder batch (DESIGN §4.3), by content alone and exactly as [`placeholder_batch`]
/// writes one. The fast path reads the header first — attributes with no compression, control
/// or transactional bit (a mirror writes placeholders as plain idempotent batches), a producer
/// id ≥ 0, at least one record — and then the first record's key, which must start with
/// [`PLACEHOLDER_MAGIC`]. A batch of real data therefore costs a few header reads, and at most
/// a few varints of its first record when it is an uncompressed non-transactional batch.
///
/// Only when that first key matches is the whole batch checked, so that a batch which merely
/// starts with a placeholder (a client that read placeholders directly and forwarded them with
/// real records after them) is never taken for one: `recordCount == lastOffsetDelta + 1`, and
/// every record `i` has attributes 0, offset delta `i`, a key of exactly
/// `PLACEHOLDER_MAGIC ++ nonce ++ source offset` with the first record's nonce and source
/// offset `first + i`, a null value and no headers, its varint length matching its bytes, and
/// the records ending exactly at the end of the batch. A placeholder batch partly removed by
/// compaction (records missing, offset deltas with gaps) is therefore not recognised; the log
/// cleaner removes placeholder tombstones a whole batch at a time (one timestamp, one delete
/// horizon per batch), which leaves no batch or an empty one (`recordCount` 0, skipped by
/// clients). Never panics on short or malformed bytes (`false`).
pub fn is_placeholder_batch(bytes: &[u8]) -> bool {
    const KEY_LEN: usize = PLACEHOLDER_KEY_LEN;
    let p = match placeholder_fast_path(bytes, bytes.len()) {
        FastPath::Candidate(p) => p,
        FastPath::NotPlaceholder | FastPath::NeedMore => return false,
    };
    let count = be_i32(bytes, 57);
    let rec = &bytes[HEADER_LEN..];
    // Full check: every record is a placeholder of the same nonce and consecutive offsets.
    if i64::from(be_i32(bytes, 23)) + 1 != i64::from(count) {
        return false;
    }
    let Some(first_key) = rec.get(p..p + KEY_LEN) else { return false };
    let nonce = &first_key[8..16];
    let first = i64::from_be_bytes(first_key[16..24].try_into().unwrap_or([0; 8]));
    let mut pos = 0usize;
    for i in 0..i64::from(count) {
        let ok = (|| {
            let (len, body) = read_varint(rec, pos)?;
            let end = body.checked_add(usize::try_from(len).ok()?)?;
            if end > rec.len() || *rec.get(body)? != 0 {
                return None; // cut short, or record attributes other than 0
            }
            let (_ts, q) = read_varlong(rec, body + 1)?;
            let (offset_delta, q) = read_varint(rec, q)?;
            let (key_len, q) = read_varint(rec, q)?;
            if offset_delta != i || key_len != KEY_LEN as i64 {
                return None;
            }
            let key = rec.get(q..q + KEY_LEN)?;
            let offset = i64::from_be_bytes(key[16..24].try_into().ok()?);
            if key[..8] != PLACEHOLDER_MAGIC[..] || &key[8..16] != nonce || Some(offset) != first.checked_add(i) {
                return None;
            }
            let (value_len, q) = read_varint(rec, q + KEY_LEN)?;
            let (headers, q) = read_varint(rec, q)?;
            (value_len == -1 && headers == 0 && q == end).then_some(end)
        })();
        match ok {
            Some(end) => pos = end,
            None => return false,
        }
    }
    pos == rec.len()
}

/// What the first bytes of a batch say of it being a placeholder batch.
enum FastPath {
    /// It is not one, whatever its other bytes.
    NotPlaceholder,
    /// Its header and first key fit a placeholder: the whole batch must be checked (`usize`:
    /// where the first key starts in the records).
    Candidate(usize),
    /// More of it is needed to tell.
    NeedMore,
}

/// The fast path of [`is_placeholder_batch`] over `prefix`, the first bytes of a v2 batch of
/// `total` bytes (`LOG_OVERHEAD + batchLength`; `prefix` may be all of it): the header, then
/// the first record's key. With the whole batch it never answers `NeedMore`.
fn placeholder_fast_path(prefix: &[u8], total: usize) -> FastPath {
    if total < HEADER_LEN + 1 + PLACEHOLDER_MAGIC.len() {
        return FastPath::NotPlaceholder;
    }
    if prefix.len() < HEADER_LEN {
        return FastPath::NeedMore;
    }
    if be_i16(prefix, 21) & (ATTR_COMPRESSION_MASK | ATTR_CONTROL | ATTR_TRANSACTIONAL) != 0
        || be_i32(prefix, 57) < 1
        || be_i64(prefix, 43) < 0
    {
        return FastPath::NotPlaceholder;
    }
    let rec = &prefix[HEADER_LEN..prefix.len().min(total)];
    // Short of the batch's end, what cannot be read yet may still come.
    let unknown = if prefix.len() < total { FastPath::NeedMore } else { FastPath::NotPlaceholder };
    let first_key_at = (|| {
        let (_len, p) = read_varint(rec, 0)?;
        let (_ts, p) = read_varlong(rec, p + 1)?; // after the record's attributes byte
        let (_offset_delta, p) = read_varint(rec, p)?;
        let (key_len, p) = read_varint(rec, p)?;
        Some((key_len, p))
    })();
    let Some((key_len, p)) = first_key_at else { return unknown };
    if key_len < PLACEHOLDER_MAGIC.len() as i64 {
        return FastPath::NotPlaceholder;
    }
    match rec.get(p..p + PLACEHOLDER_MAGIC.len()) {
        None => unknown,
        Some(magic) if magic != &PLACEHOLDER_MAGIC[..] => FastPath::NotPlaceholder,
        Some(_) => FastPath::Candidate(p),
    }
}

/// Bytes of a batch's start that always suffice for [`cleared_by_prefix`] to tell: the header
/// and, of the first record, its length, attributes, timestamp delta, offset delta and key
/// length varints (read as varlongs here: at most 10 + 1 + 10 + 10 + 10 bytes) and the 8
/// bytes of [`PLACEHOLDER_MAGIC`].
pub const CLEAR_PREFIX_BYTES: usize = HEADER_LEN + 49;

/// The length (`LOG_OVERHEAD + batchLength`, bytes) of the v2 batch that starts `rest`, when
/// its first bytes already prove it is not a placeholder batch (the header and, for an
/// uncompressed non-transactional batch of a producer id, its first record's key; the fast
/// path of [`is_placeholder_batch`]), even though the rest of it has not arrived: its other
/// bytes can go to a client unseen. `None` when that is not known yet, when it is a
/// placeholder candidate, or when `rest` does not start a v2 batch of a possible length (what
/// [`leading_batches`] stops at).
pub fn cleared_by_prefix(rest: &[u8]) -> Option<usize> {
    if rest.len() < HEADER_LEN {
        return None;
    }
    let length = be_i32(rest, 8);
    if length < (HEADER_LEN - LOG_OVERHEAD) as i32 || rest[16] != 2 {
        return None;
    }
    let total = LOG_OVERHEAD + length as usize;
    matches!(placeholder_fast_path(rest, total), FastPath::NotPlaceholder).then_some(total)
}

/// Whether a Fetch (or ShareFetch) partition's `records` hold at least one placeholder batch
/// among their whole v2 batches ([`is_placeholder_batch`]). Walks batch headers in place (no
/// `Bytes` handles, no allocation); stops at a partial batch at the end, at a batch of another
/// message format, or at an impossible length. This is the check the proxy runs on every
/// partition of every Fetch response (docs/performance.md "Placeholder check").
pub fn has_placeholder(records: &[u8]) -> bool {
    leading_batches(records).is_err()
}

/// The walk of [`has_placeholder`] over `records`, which may be the first part of a
/// partition's records still arriving: `Ok(n)` when none of the whole v2 batches at the front
/// is a placeholder batch, `n` being the bytes they take; `Err(at)` at the first placeholder
/// batch, `at` its offset in `records`. Stops at a partial batch, a batch of another message
/// format, or an impossible length.
pub fn leading_batches(records: &[u8]) -> Result<usize, usize> {
    let mut pos = 0usize;
    while records.len() - pos >= HEADER_LEN {
        let rest = &records[pos..];
        let length = be_i32(rest, 8);
        if length < (HEADER_LEN - LOG_OVERHEAD) as i32 || rest[16] != 2 {
            break;
        }
        let total = LOG_OVERHEAD + length as usize;
        if rest.len() < total {
            break;
        }
        if is_placeholder_batch(&rest[..total]) {
            return Err(pos);
        }
        pos += total;
    }
    Ok(pos)
}

/// Iterates the whole batches at the front of a Fetch response's `records` bytes. A partial
/// batch at the end (the broker cuts at `max_bytes`) ends the iteration; see
/// [`BatchIter::truncated_at`].
#[derive(Debug, Clone)]
pub struct BatchIter {
    buf: Bytes,
    pos: usize,
    failed: bool,
}

impl BatchIter {
    /// Batches of `records`.
    pub fn new(records: Bytes) -> Self {
        Self { buf: records, pos: 0, failed: false }
    }

    /// Byte position where iteration stopped at a partial batch, if it did.
    pub fn truncated_at(&self) -> Option<usize> {
        (self.pos < self.buf.len()).then_some(self.pos)
    }
}

impl Iterator for BatchIter {
    type Item = Result<Batch, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let rest = &self.buf[self.pos..];
        if rest.len() < HEADER_LEN {
            return None;
        }
        let base_offset = be_i64(rest, 0);
        let length = be_i32(rest, 8);
        if length < (HEADER_LEN - LOG_OVERHEAD) as i32 {
            self.failed = true;
            return Some(Err(BatchError::BadLength { base_offset, length }));
        }
        let magic = rest[16] as i8;
        if magic != 2 {
            self.failed = true;
            return Some(Err(BatchError::UnsupportedMagic { base_offset, magic }));
        }
        let total = LOG_OVERHEAD + length as usize;
        if rest.len() < total {
            return None;
        }
        let bytes = self.buf.slice(self.pos..self.pos + total);
        self.pos += total;
        Some(Ok(Batch { bytes }))
    }
}

/// New values for a batch header. Fields left `None` keep the batch's own value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeaderPatch {
    /// `baseOffset` (the broker overwrites it on append; set it for readability).
    pub base_offset: Option<i64>,
    /// `producerId`.
    pub producer_id: Option<i64>,
    /// `producerEpoch`.
    pub producer_epoch: Option<i16>,
    /// `baseSequence`.
    pub base_sequence: Option<i32>,
    /// Clear the transactional bit (the mirror writes committed data outside transactions).
    pub clear_transactional: bool,
    /// `baseTimestamp` (LogAppendTime sources, DESIGN §4.10).
    pub base_timestamp: Option<i64>,
}

/// Returns the patched 61-byte header of `batch` with its CRC32C recomputed over the new
/// header and the untouched payload. The payload is neither copied nor decompressed: send
/// `[patched header, batch.payload()]` as two slices.
pub fn patch_header(batch: &Batch, patch: &HeaderPatch) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h.copy_from_slice(&batch.bytes[..HEADER_LEN]);
    if let Some(v) = patch.base_offset {
        h[0..8].copy_from_slice(&v.to_be_bytes());
    }
    if patch.clear_transactional {
        let attrs = batch.attributes() & !ATTR_TRANSACTIONAL;
        h[21..23].copy_from_slice(&attrs.to_be_bytes());
    }
    if let Some(v) = patch.base_timestamp {
        h[27..35].copy_from_slice(&v.to_be_bytes());
    }
    if let Some(v) = patch.producer_id {
        h[43..51].copy_from_slice(&v.to_be_bytes());
    }
    if let Some(v) = patch.producer_epoch {
        h[51..53].copy_from_slice(&v.to_be_bytes());
    }
    if let Some(v) = patch.base_sequence {
        h[53..57].copy_from_slice(&v.to_be_bytes());
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&h[CRC_START..]), &batch.bytes[HEADER_LEN..]);
    h[17..21].copy_from_slice(&crc.to_be_bytes());
    h
}

/// Sets the LogAppendTime bit of the whole batch in `bytes` and recomputes its CRC (the
/// proxy restores a LogAppendTime source's timestamp type; the max timestamp already holds
/// the append time). Does nothing to a buffer shorter than a header.
pub fn set_log_append_time(bytes: &mut [u8]) {
    if bytes.len() < HEADER_LEN {
        return;
    }
    let attrs = be_i16(bytes, 21) | ATTR_LOG_APPEND_TIME;
    bytes[21..23].copy_from_slice(&attrs.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[CRC_START..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Parameters of a batch mirrorgate writes itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnBatch {
    /// `baseOffset`.
    pub base_offset: i64,
    /// Offsets covered (`lastOffsetDelta + 1`), ≥ 1.
    pub count: i32,
    /// Timestamp of every record, ms.
    pub timestamp: i64,
    /// `producerId`.
    pub producer_id: i64,
    /// `producerEpoch`.
    pub producer_epoch: i16,
    /// `baseSequence`.
    pub base_sequence: i32,
}

fn finish(out: &mut BytesMut, start: usize) {
    let len = (out.len() - start - LOG_OVERHEAD) as i32;
    out[start + 8..start + 12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&out[start + CRC_START..]);
    out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
}

fn put_header(out: &mut BytesMut, b: &OwnBatch, attributes: i16, last_offset_delta: i32, record_count: i32) {
    out.put_i64(b.base_offset);
    out.put_i32(0); // batchLength, set by finish
    out.put_i32(-1); // partitionLeaderEpoch, set by the broker
    out.put_i8(2);
    out.put_u32(0); // crc, set by finish
    out.put_i16(attributes);
    out.put_i32(last_offset_delta);
    out.put_i64(b.timestamp);
    out.put_i64(b.timestamp);
    out.put_i64(b.producer_id);
    out.put_i16(b.producer_epoch);
    out.put_i32(b.base_sequence);
    out.put_i32(record_count);
}

fn put_record(out: &mut BytesMut, offset_delta: i32, key: &[u8], value: Option<&[u8]>) {
    let mut body = BytesMut::with_capacity(32 + key.len());
    body.put_i8(0); // attributes
    put_varlong(&mut body, 0); // timestamp delta
    put_varint(&mut body, offset_delta as i64);
    put_varint(&mut body, key.len() as i64);
    body.put_slice(key);
    match value {
        Some(v) => {
            put_varint(&mut body, v.len() as i64);
            body.put_slice(v);
        }
        None => put_varint(&mut body, -1),
    }
    put_varint(&mut body, 0); // headers
    put_varint(out, body.len() as i64);
    out.put_slice(&body);
}

/// A placeholder batch for `b.count` offsets starting at `b.base_offset`: uncompressed, one
/// record per offset, null values, keys `PLACEHOLDER_MAGIC ++ nonce ++ source offset`
/// (`source_base` is the source offset of the first record). Appended where the source has
/// no data record (markers, aborted records, compaction holes, a removed head).
pub fn placeholder_batch(b: &OwnBatch, nonce: u64, source_base: i64) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER_LEN + b.count.max(1) as usize * 32);
    put_header(&mut out, b, 0, b.count - 1, b.count);
    for i in 0..b.count {
        let mut key = [0u8; PLACEHOLDER_KEY_LEN];
        key[..8].copy_from_slice(PLACEHOLDER_MAGIC);
        key[8..16].copy_from_slice(&nonce.to_be_bytes());
        key[16..24].copy_from_slice(&(source_base + i64::from(i)).to_be_bytes());
        put_record(&mut out, i, &key, None);
    }
    finish(&mut out, 0);
    out.freeze()
}

/// A COMMIT control batch covering `b.count` offsets from `b.base_offset` with one control
/// record (key: version 0, type 1 = COMMIT; value: EndTxnMarker version 0, coordinator epoch
/// 0) and attributes control + transactional. Clients skip it and continue at
/// `base_offset + count`, exactly as after a transaction marker or a compacted range.
pub fn control_batch(b: &OwnBatch) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER_LEN + 32);
    put_header(&mut out, b, ATTR_CONTROL | ATTR_TRANSACTIONAL, b.count - 1, 1);
    put_record(&mut out, 0, &[0, 0, 0, 1], Some(&[0, 0, 0, 0, 0, 0]));
    finish(&mut out, 0);
    out.freeze()
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn put_varlong(out: &mut BytesMut, v: i64) {
    let mut z = zigzag(v);
    while z >= 0x80 {
        out.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    out.put_u8(z as u8);
}

fn put_varint(out: &mut BytesMut, v: i64) {
    put_varlong(out, v);
}

fn read_varlong(b: &[u8], mut pos: usize) -> Option<(i64, usize)> {
    let mut v: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *b.get(pos)?;
        pos += 1;
        v |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some((((v >> 1) as i64) ^ -((v & 1) as i64), pos));
        }
    }
    None
}

fn read_varint(b: &[u8], pos: usize) -> Option<(i64, usize)> {
    read_varlong(b, pos)
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
