//! The records inside a v2 batch, at the byte level: bounded decompression of a batch's
//! records section, a walk over its records by their length prefixes, and the codecs to
//! compress a records section again. Sans-IO; nothing here decodes a record into types that
//! could lose what it holds (header keys stay raw bytes, duplicates and order kept).
//!
//! Record layout (Kafka `DefaultRecord`, message format v2): length varint (bytes after it),
//! attributes int8, timestampDelta varlong, offsetDelta varint, keyLength varint (-1 = null),
//! key, valueLength varint (-1 = null), value, header count varint, then per header
//! keyLength varint (never negative), key, valueLength varint (-1 = null), value.
//!
//! Compressed sections are read with the crates kafka-protocol builds on (flate2, snap, lz4,
//! zstd), as streams whose output is capped, so a small batch cannot decompress into an
//! unbounded allocation; compression uses kafka-protocol's own compressors (the same framing
//! as its record encoder: Kafka's xerial snappy blocks, LZ4 frames).

use std::io::{self, Read};

use bytes::{BufMut, Bytes, BytesMut};

/// Compression codec ids of the batch attributes (Kafka `CompressionType`).
pub mod codec {
    /// No compression.
    pub const NONE: i16 = 0;
    /// gzip.
    pub const GZIP: i16 = 1;
    /// snappy (xerial block framing).
    pub const SNAPPY: i16 = 2;
    /// lz4 (LZ4 frame format).
    pub const LZ4: i16 = 3;
    /// zstd.
    pub const ZSTD: i16 = 4;
}

/// Smallest possible record: length, attributes, timestamp delta, offset delta, key length,
/// value length and header count, one byte each.
pub const MIN_RECORD_BYTES: usize = 7;

/// Why a records section cannot be read or written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordsError {
    /// The codec id is not one Kafka defines.
    #[error("unknown compression codec {0}")]
    UnknownCodec(i16),
    /// The compressed bytes are corrupt.
    #[error("cannot decompress ({codec}): {message}")]
    Decompress {
        /// Codec id.
        codec: i16,
        /// What the codec said.
        message: String,
    },
    /// Decompressed, the section would exceed the limit the caller can afford.
    #[error("decompresses to more than {limit} bytes")]
    TooLarge {
        /// The limit, bytes.
        limit: usize,
    },
    /// Compressing failed.
    #[error("cannot compress ({codec}): {message}")]
    Compress {
        /// Codec id.
        codec: i16,
        /// What the codec said.
        message: String,
    },
    /// A record is malformed; `at` is its byte position in the (decompressed) section.
    #[error("malformed record {index} at byte {at}: {what}")]
    Malformed {
        /// Index of the record in the batch.
        index: usize,
        /// Byte position of its length prefix.
        at: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// The section holds another number of records than the batch header says, or bytes
    /// after the last record.
    #[error("batch header announces {expected} records, the records section holds {found}{}", if *.trailing > 0 { format!(" and {} trailing bytes", .trailing) } else { String::new() })]
    CountMismatch {
        /// `recordCount` of the header.
        expected: i32,
        /// Records found.
        found: usize,
        /// Bytes after the last record.
        trailing: usize,
    },
}

/// One record of a records section, borrowed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The whole record, its length prefix included.
    pub raw: &'a [u8],
    /// The record after its length prefix.
    pub body: &'a [u8],
    /// Record attributes (unused by Kafka so far; kept as is).
    pub attributes: i8,
    /// `timestampDelta`, ms from the batch's base timestamp.
    pub timestamp_delta: i64,
    /// `offsetDelta` from the batch's base offset.
    pub offset_delta: i32,
    /// Byte range of the offset delta varint inside [`Self::body`].
    pub offset_delta_at: std::ops::Range<usize>,
    /// Key (`None` = null).
    pub key: Option<&'a [u8]>,
    /// Value (`None` = null).
    pub value: Option<&'a [u8]>,
    /// Headers in order, keys as raw bytes (duplicates and non-UTF-8 keys kept).
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

impl<'a> RecordView<'a> {
    /// Key, value and headers exactly as they are on the wire (everything after the offset
    /// delta): two records with equal tails carry the same key, value and headers.
    pub fn tail(&self) -> &'a [u8] {
        &self.body[self.offset_delta_at.end..]
    }
}

/// Reads a zigzag varint of at most `max_bytes` bytes at `pos` (Kafka `ByteUtils.readVarlong`
/// refuses more than 10 bytes, `readVarint` more than 5). Returns the value and the position
/// after it.
pub(crate) fn read_zigzag(b: &[u8], mut pos: usize, max_bytes: usize) -> Option<(i64, usize)> {
    let mut v: u64 = 0;
    for i in 0..max_bytes {
        let byte = *b.get(pos)?;
        pos += 1;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((((v >> 1) as i64) ^ -((v & 1) as i64), pos));
        }
    }
    None
}

fn read_varint(b: &[u8], pos: usize) -> Option<(i32, usize)> {
    let (v, p) = read_zigzag(b, pos, 5)?;
    i32::try_from(v).ok().map(|v| (v, p))
}

/// Appends `v` as a zigzag varlong.
pub fn put_varlong(out: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    out.put_u8(z as u8);
}

/// Appends `v` as a zigzag varint.
pub fn put_varint(out: &mut BytesMut, v: i32) {
    put_varlong(out, i64::from(v));
}

/// Reads a length-prefixed byte string (`-1` = null) of `body` at `pos`.
fn read_bytes(body: &[u8], pos: usize, nullable: bool) -> Result<(Option<&[u8]>, usize), &'static str> {
    let (len, p) = read_varint(body, pos).ok_or("truncated length")?;
    if len == -1 && nullable {
        return Ok((None, p));
    }
    let len = usize::try_from(len).map_err(|_| "negative length")?;
    let end = p.checked_add(len).filter(|e| *e <= body.len()).ok_or("length beyond the record")?;
    Ok((Some(&body[p..end]), end))
}

fn parse_body(raw: &[u8], body_at: usize) -> Result<RecordView<'_>, &'static str> {
    let body = &raw[body_at..];
    let attributes = *body.first().ok_or("empty record")? as i8;
    let (timestamp_delta, p) = read_zigzag(body, 1, 10).ok_or("bad timestamp delta")?;
    let (offset_delta, od_end) = read_varint(body, p).ok_or("bad offset delta")?;
    let offset_delta_at = p..od_end;
    let (key, p) = read_bytes(body, od_end, true)?;
    let (value, p) = read_bytes(body, p, true)?;
    let (count, mut p) = read_varint(body, p).ok_or("bad header count")?;
    let count = usize::try_from(count).map_err(|_| "negative header count")?;
    // Each header takes at least two bytes: the count cannot size more than the body holds.
    if count > (body.len() - p) / 2 {
        return Err("header count beyond the record");
    }
    let mut headers = Vec::with_capacity(count);
    for _ in 0..count {
        let (k, q) = read_bytes(body, p, false)?;
        let (v, q) = read_bytes(body, q, true)?;
        headers.push((k.unwrap_or_default(), v));
        p = q;
    }
    if p != body.len() {
        return Err("record length does not match its content");
    }
    Ok(RecordView { raw, body, attributes, timestamp_delta, offset_delta, offset_delta_at, key, value, headers })
}

/// Walks a decompressed records section holding `record_count` records (the batch header's
/// `recordCount`). Every length is checked against the bytes that remain; nothing is sized
/// from a wire value beyond what `section` holds.
///
/// # Errors
/// [`RecordsError::Malformed`] for a record that does not parse (Kafka `DefaultRecord.readFrom`
/// refuses the same), [`RecordsError::CountMismatch`] when the count or the total length
/// disagree with the header.
pub fn walk(section: &[u8], record_count: i32) -> Result<Vec<RecordView<'_>>, RecordsError> {
    let expected = usize::try_from(record_count).unwrap_or(usize::MAX);
    if expected > section.len() / MIN_RECORD_BYTES {
        return Err(RecordsError::CountMismatch {
            expected: record_count,
            found: section.len() / MIN_RECORD_BYTES,
            trailing: 0,
        });
    }
    let mut out = Vec::with_capacity(expected);
    let mut pos = 0;
    while pos < section.len() {
        let index = out.len();
        let malformed = |what| RecordsError::Malformed { index, at: pos, what };
        let (len, body_at) = read_varint(section, pos).ok_or_else(|| malformed("truncated length"))?;
        let len = usize::try_from(len).map_err(|_| malformed("negative length"))?;
        let end = body_at
            .checked_add(len)
            .filter(|e| *e <= section.len())
            .ok_or_else(|| malformed("length beyond the section"))?;
        if out.len() == expected {
            return Err(RecordsError::CountMismatch {
                expected: record_count,
                found: out.len(),
                trailing: section.len() - pos,
            });
        }
        let view = parse_body(&section[pos..end], body_at - pos).map_err(malformed)?;
        out.push(view);
        pos = end;
    }
    if out.len() != expected {
        return Err(RecordsError::CountMismatch { expected: record_count, found: out.len(), trailing: 0 });
    }
    Ok(out)
}

/// The reader that decompresses `data` with `codec` (not snappy, whose xerial blocks are
/// sized up front). The `lz4` crate's reader ends quietly at a truncated frame: the short
/// section it yields fails [`walk`]'s record count check.
fn stream<'a>(codec: i16, data: &'a [u8]) -> Result<Box<dyn Read + 'a>, RecordsError> {
    let err = |e: io::Error| RecordsError::Decompress { codec, message: e.to_string() };
    Ok(match codec {
        codec::GZIP => Box::new(flate2::read::MultiGzDecoder::new(data)),
        codec::LZ4 => Box::new(lz4::Decoder::new(data).map_err(err)?),
        codec::ZSTD => Box::new(zstd::stream::read::Decoder::with_buffer(data).map_err(err)?),
        other => return Err(RecordsError::UnknownCodec(other)),
    })
}

/// xerial snappy framing (Kafka's `SnappyOutputStream`): 16-byte magic header, then blocks of
/// a big-endian u32 length and a raw snappy block. Without the header, one raw block.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

/// The raw snappy blocks of `data`.
fn snappy_blocks(data: &[u8]) -> Result<Vec<&[u8]>, RecordsError> {
    let bad = |m: &str| RecordsError::Decompress { codec: codec::SNAPPY, message: m.to_string() };
    if !data.starts_with(XERIAL_MAGIC) {
        return Ok(vec![data]);
    }
    let mut blocks = Vec::new();
    let mut pos = XERIAL_HEADER_LEN.min(data.len());
    while pos < data.len() {
        let len = data.get(pos..pos + 4).ok_or_else(|| bad("truncated block length"))?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let start = pos + 4;
        let end = start.checked_add(len).filter(|e| *e <= data.len()).ok_or_else(|| bad("block beyond the data"))?;
        blocks.push(&data[start..end]);
        pos = end;
    }
    Ok(blocks)
}

/// Bytes `data` (a records section compressed with `codec`) decompresses to, reading at most
/// `limit + 1` bytes of output and keeping none of it.
///
/// # Errors
/// [`RecordsError::TooLarge`] beyond `limit`, or the codec's error.
pub fn decompressed_len(codec: i16, data: &[u8], limit: usize) -> Result<usize, RecordsError> {
    if codec == codec::NONE {
        return if data.len() > limit { Err(RecordsError::TooLarge { limit }) } else { Ok(data.len()) };
    }
    if codec == codec::SNAPPY {
        let mut total = 0usize;
        for block in snappy_blocks(data)? {
            let n = snap::raw::decompress_len(block)
                .map_err(|e| RecordsError::Decompress { codec, message: e.to_string() })?;
            total = total.saturating_add(n);
            if total > limit {
                return Err(RecordsError::TooLarge { limit });
            }
        }
        return Ok(total);
    }
    let mut capped = stream(codec, data)?.take(limit as u64 + 1);
    let n = io::copy(&mut capped, &mut io::sink())
        .map_err(|e| RecordsError::Decompress { codec, message: e.to_string() })?;
    if n > limit as u64 {
        return Err(RecordsError::TooLarge { limit });
    }
    Ok(n as usize)
}

/// Decompresses `data` (a records section compressed with `codec`) into at most `limit`
/// bytes (use [`decompressed_len`] to learn the size and reserve memory for it first).
///
/// # Errors
/// [`RecordsError::TooLarge`] beyond `limit`, or the codec's error.
pub fn decompress(codec: i16, data: &[u8], limit: usize) -> Result<Vec<u8>, RecordsError> {
    let err = |message: String| RecordsError::Decompress { codec, message };
    match codec {
        codec::NONE => {
            if data.len() > limit {
                return Err(RecordsError::TooLarge { limit });
            }
            Ok(data.to_vec())
        }
        codec::SNAPPY => {
            let total = decompressed_len(codec, data, limit)?;
            let mut out = vec![0u8; total];
            let mut at = 0;
            for block in snappy_blocks(data)? {
                let n = snap::raw::decompress_len(block).map_err(|e| err(e.to_string()))?;
                let written = snap::raw::Decoder::new()
                    .decompress(block, &mut out[at..at + n])
                    .map_err(|e| err(e.to_string()))?;
                at += written;
            }
            out.truncate(at);
            Ok(out)
        }
        _ => {
            let mut out = Vec::new();
            stream(codec, data)?.take(limit as u64 + 1).read_to_end(&mut out).map_err(|e| err(e.to_string()))?;
            if out.len() > limit {
                return Err(RecordsError::TooLarge { limit });
            }
            Ok(out)
        }
    }
}

/// Compresses a records section with `codec`, framed as Kafka clients frame it (through
/// kafka-protocol's compressors).
///
/// # Errors
/// [`RecordsError::UnknownCodec`] or the codec's error.
pub fn compress(codec: i16, section: &[u8]) -> Result<Bytes, RecordsError> {
    use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};
    let mut out = BytesMut::with_capacity(section.len() / 2 + 64);
    let fill = |tmp: &mut BytesMut| -> anyhow::Result<()> {
        tmp.put_slice(section);
        Ok(())
    };
    let result = match codec {
        codec::NONE => return Ok(Bytes::copy_from_slice(section)),
        codec::GZIP => Gzip::compress(&mut out, fill),
        codec::SNAPPY => Snappy::compress(&mut out, fill),
        codec::LZ4 => Lz4::compress(&mut out, fill),
        codec::ZSTD => Zstd::compress(&mut out, fill),
        other => return Err(RecordsError::UnknownCodec(other)),
    };
    result.map_err(|e| RecordsError::Compress { codec, message: format!("{e:#}") })?;
    Ok(out.freeze())
}

/// A record to encode with [`put_record`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewRecord<'a> {
    /// `timestampDelta`, ms.
    pub timestamp_delta: i64,
    /// `offsetDelta`.
    pub offset_delta: i32,
    /// Key (`None` = null).
    pub key: Option<&'a [u8]>,
    /// Value (`None` = null).
    pub value: Option<&'a [u8]>,
    /// Headers in order (raw keys).
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

/// Appends one record (length-prefixed) to a records section.
pub fn put_record(out: &mut BytesMut, r: &NewRecord<'_>) {
    let mut body = BytesMut::new();
    body.put_i8(0);
    put_varlong(&mut body, r.timestamp_delta);
    put_varint(&mut body, r.offset_delta);
    let put_bytes = |body: &mut BytesMut, b: Option<&[u8]>| match b {
        Some(b) => {
            put_varint(body, b.len() as i32);
            body.put_slice(b);
        }
        None => put_varint(body, -1),
    };
    put_bytes(&mut body, r.key);
    put_bytes(&mut body, r.value);
    put_varint(&mut body, r.headers.len() as i32);
    for (k, v) in &r.headers {
        put_bytes(&mut body, Some(k));
        put_bytes(&mut body, *v);
    }
    put_varint(out, body.len() as i32);
    out.put_slice(&body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section() -> BytesMut {
        let mut s = BytesMut::new();
        put_record(
            &mut s,
            &NewRecord {
                timestamp_delta: -5,
                offset_delta: 0,
                key: Some(b"k"),
                value: Some(b"v"),
                headers: vec![(b"k", None), (b"dup", Some(b"a")), (b"dup", Some(b"a")), (b"\xff\xfe", Some(b""))],
            },
        );
        put_record(&mut s, &NewRecord { timestamp_delta: 300, offset_delta: 7, ..Default::default() });
        s
    }

    #[test]
    fn walk_keeps_duplicate_and_binary_header_keys_and_nulls() {
        let s = section();
        let rs = walk(&s, 2).unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!(
            (rs[0].timestamp_delta, rs[0].offset_delta, rs[0].key, rs[0].value),
            (-5, 0, Some(&b"k"[..]), Some(&b"v"[..]))
        );
        let keys: Vec<&[u8]> = rs[0].headers.iter().map(|h| h.0).collect();
        assert_eq!(keys, vec![&b"k"[..], b"dup", b"dup", b"\xff\xfe"]);
        assert_eq!(rs[0].headers[0].1, None);
        assert_eq!(rs[0].headers[3].1, Some(&b""[..]));
        assert_eq!((rs[1].key, rs[1].value, rs[1].headers.len(), rs[1].offset_delta), (None, None, 0, 7));
        assert_eq!(rs[0].raw.len() + rs[1].raw.len(), s.len());
    }

    #[test]
    fn malformed_sections_are_errors_not_panics() {
        let s = section();
        assert!(matches!(walk(&s, 3), Err(RecordsError::CountMismatch { found: 2, .. })));
        assert!(matches!(walk(&s, 1), Err(RecordsError::CountMismatch { found: 1, .. })));
        assert!(matches!(walk(&s, i32::MAX), Err(RecordsError::CountMismatch { .. })));
        for cut in 0..s.len() {
            assert!(walk(&s[..cut], 2).is_err(), "cut at {cut}");
        }
        // Every single-byte corruption parses or fails cleanly.
        for i in 0..s.len() {
            for v in [0x00, 0x7f, 0x80, 0xff] {
                let mut c = s.clone();
                c[i] = v;
                let _ = walk(&c, 2);
            }
        }
        // A header count far beyond the record.
        let mut b = BytesMut::new();
        b.put_i8(0);
        put_varlong(&mut b, 0);
        put_varint(&mut b, 0);
        put_varint(&mut b, -1);
        put_varint(&mut b, -1);
        put_varint(&mut b, i32::MAX);
        let mut r = BytesMut::new();
        put_varint(&mut r, b.len() as i32);
        r.put_slice(&b);
        assert!(matches!(walk(&r, 1), Err(RecordsError::Malformed { what: "header count beyond the record", .. })));
    }

    #[test]
    fn every_codec_round_trips_and_decompression_is_capped() {
        let mut s = BytesMut::new();
        for i in 0..200 {
            put_record(&mut s, &NewRecord { offset_delta: i, value: Some(&[b'x'; 100]), ..Default::default() });
        }
        for c in [codec::NONE, codec::GZIP, codec::SNAPPY, codec::LZ4, codec::ZSTD] {
            let z = compress(c, &s).unwrap();
            assert_eq!(decompressed_len(c, &z, 1 << 20).unwrap(), s.len(), "codec {c}");
            assert_eq!(decompress(c, &z, s.len()).unwrap(), s.to_vec(), "codec {c}");
            assert_eq!(decompressed_len(c, &z, s.len() - 1), Err(RecordsError::TooLarge { limit: s.len() - 1 }));
            assert_eq!(decompress(c, &z, 100), Err(RecordsError::TooLarge { limit: 100 }));
            if c != codec::NONE {
                // A truncated stream is an error, or (lz4's reader ends quietly) a short
                // section that the walk refuses.
                let cut = decompress(c, &z[..z.len() / 2], 1 << 20);
                assert!(cut.as_ref().map_or(true, |d| walk(d, 200).is_err()), "codec {c}");
            }
        }
        assert_eq!(compress(5, &s), Err(RecordsError::UnknownCodec(5)));
        // A small batch that would decompress to 4 MiB stops at the cap.
        let mut bomb = BytesMut::new();
        put_record(&mut bomb, &NewRecord { value: Some(&vec![0u8; 4 << 20]), ..Default::default() });
        let z = compress(codec::ZSTD, &bomb).unwrap();
        assert!(z.len() < 4096);
        assert_eq!(decompressed_len(codec::ZSTD, &z, 1 << 20), Err(RecordsError::TooLarge { limit: 1 << 20 }));
    }

    #[test]
    fn snappy_garbage_is_an_error() {
        let mut framed = XERIAL_MAGIC.to_vec();
        framed.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0xff, 1, 2]);
        assert!(decompress(codec::SNAPPY, &framed, 1 << 20).is_err());
        assert!(decompress(codec::SNAPPY, &[0xff, 0xff, 0xff, 0xff, 0x0f], 1 << 20).is_err());
    }
}
