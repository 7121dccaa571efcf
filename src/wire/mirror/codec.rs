//! Primitive readers and writers for the flexible ("compact") Kafka encodings the mirror
//! messages use: fixed-width integers, unsigned varints, compact (nullable) strings, compact
//! (nullable) arrays, UUIDs and tagged-field sections.
//!
//! kafka-protocol 0.18 keeps its own `Encoder`/`Decoder` helpers crate-private, so the mirror
//! messages carry this small equivalent. Every reader checks a length or count read from the
//! wire against the bytes that remain *before* it sizes anything, and returns
//! [`WireError`] instead of panicking; nothing here touches a socket or a clock.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use super::error::WireError;

/// Longest string the Kafka protocol allows (Java `Short.MAX_VALUE`), in bytes.
pub const MAX_STRING_BYTES: usize = i16::MAX as usize;

/// A Kafka `uuid` field (16 bytes, most significant half first), e.g. a topic ID.
///
/// Kept as raw bytes so the crate needs no `uuid` dependency; `Uuid::from_bytes(id.0)` converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct KafkaUuid(pub [u8; 16]);

impl KafkaUuid {
    /// The all-zero UUID Kafka uses for "no topic ID" (`Uuid.ZERO_UUID`).
    pub const ZERO: KafkaUuid = KafkaUuid([0; 16]);
}

/// Fails with [`WireError::Truncated`] unless `n` bytes remain.
fn need<B: Buf>(buf: &B, n: usize, what: &'static str) -> Result<(), WireError> {
    if buf.remaining() < n {
        return Err(WireError::Truncated { what, needed: n, remaining: buf.remaining() });
    }
    Ok(())
}

pub(crate) fn get_bool<B: Buf>(buf: &mut B, what: &'static str) -> Result<bool, WireError> {
    need(buf, 1, what)?;
    // Kafka's Java reader treats any non-zero byte as true.
    Ok(buf.get_u8() != 0)
}

pub(crate) fn get_i16<B: Buf>(buf: &mut B, what: &'static str) -> Result<i16, WireError> {
    need(buf, 2, what)?;
    Ok(buf.get_i16())
}

pub(crate) fn get_i32<B: Buf>(buf: &mut B, what: &'static str) -> Result<i32, WireError> {
    need(buf, 4, what)?;
    Ok(buf.get_i32())
}

pub(crate) fn get_i64<B: Buf>(buf: &mut B, what: &'static str) -> Result<i64, WireError> {
    need(buf, 8, what)?;
    Ok(buf.get_i64())
}

pub(crate) fn get_uuid<B: Buf>(buf: &mut B, what: &'static str) -> Result<KafkaUuid, WireError> {
    need(buf, 16, what)?;
    let mut id = [0u8; 16];
    buf.copy_to_slice(&mut id);
    Ok(KafkaUuid(id))
}

/// An unsigned LEB128 varint of at most 5 bytes (Kafka `UNSIGNED_VARINT`).
pub(crate) fn get_uvarint<B: Buf>(buf: &mut B, what: &'static str) -> Result<u32, WireError> {
    let mut value: u32 = 0;
    for i in 0..5 {
        need(buf, 1, what)?;
        let b = buf.get_u8();
        if i == 4 && b > 0x0f {
            return Err(WireError::VarIntTooLong { what });
        }
        value |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(WireError::VarIntTooLong { what })
}

/// Compact nullable string: uvarint(len + 1), 0 = null, then UTF-8 bytes (zero-copy on `Bytes`).
pub(crate) fn get_compact_nullable_string<B: Buf>(
    buf: &mut B,
    what: &'static str,
) -> Result<Option<StrBytes>, WireError> {
    let n = get_uvarint(buf, what)?;
    if n == 0 {
        return Ok(None);
    }
    let len = (n - 1) as usize;
    if len > MAX_STRING_BYTES {
        return Err(WireError::StringTooLong { what, len });
    }
    need(buf, len, what)?;
    let raw = buf.copy_to_bytes(len);
    StrBytes::from_utf8(raw).map(Some).map_err(|_| WireError::InvalidUtf8 { what })
}

/// Compact (non-nullable) string; a null on the wire is [`WireError::UnexpectedNull`].
pub(crate) fn get_compact_string<B: Buf>(buf: &mut B, what: &'static str) -> Result<StrBytes, WireError> {
    get_compact_nullable_string(buf, what)?.ok_or(WireError::UnexpectedNull { what })
}

/// A topic name (`entityType: topicName`), a non-nullable compact string.
pub(crate) fn get_topic_name<B: Buf>(buf: &mut B, what: &'static str) -> Result<TopicName, WireError> {
    get_compact_string(buf, what).map(TopicName)
}

/// Compact nullable array length: uvarint(count + 1), 0 = null. The count is checked against
/// the remaining bytes assuming every element takes at least `min_elem_bytes` (≥ 1), so a
/// hostile count can never size an allocation larger than the frame that carried it.
pub(crate) fn get_compact_nullable_array_len<B: Buf>(
    buf: &mut B,
    min_elem_bytes: usize,
    what: &'static str,
) -> Result<Option<usize>, WireError> {
    let n = get_uvarint(buf, what)?;
    if n == 0 {
        return Ok(None);
    }
    let count = (n - 1) as usize;
    let min_total = count.saturating_mul(min_elem_bytes.max(1));
    if min_total > buf.remaining() {
        return Err(WireError::CountExceedsRemaining { what, count, remaining: buf.remaining() });
    }
    Ok(Some(count))
}

/// Compact (non-nullable) array length; see [`get_compact_nullable_array_len`].
pub(crate) fn get_compact_array_len<B: Buf>(
    buf: &mut B,
    min_elem_bytes: usize,
    what: &'static str,
) -> Result<usize, WireError> {
    get_compact_nullable_array_len(buf, min_elem_bytes, what)?.ok_or(WireError::UnexpectedNull { what })
}

/// Reads a compact array whose elements are decoded by `elem`; `min_elem_bytes` as in
/// [`get_compact_nullable_array_len`].
pub(crate) fn get_compact_array<B: Buf, T>(
    buf: &mut B,
    min_elem_bytes: usize,
    what: &'static str,
    mut elem: impl FnMut(&mut B) -> Result<T, WireError>,
) -> Result<Vec<T>, WireError> {
    let count = get_compact_array_len(buf, min_elem_bytes, what)?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        out.push(elem(buf)?);
    }
    Ok(out)
}

/// Reads a compact nullable array; see [`get_compact_array`].
pub(crate) fn get_compact_nullable_array<B: Buf, T>(
    buf: &mut B,
    min_elem_bytes: usize,
    what: &'static str,
    mut elem: impl FnMut(&mut B) -> Result<T, WireError>,
) -> Result<Option<Vec<T>>, WireError> {
    let Some(count) = get_compact_nullable_array_len(buf, min_elem_bytes, what)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        out.push(elem(buf)?);
    }
    Ok(Some(out))
}

/// Reads a tagged-field section: uvarint count, then `(uvarint tag, uvarint size, bytes)` per
/// field. `known` is called with each tag and its payload and returns `true` if it consumed
/// the tag; every other tag lands in the returned map unchanged, so it survives a re-encode.
pub(crate) fn get_tagged_fields<B: Buf>(
    buf: &mut B,
    what: &'static str,
    mut known: impl FnMut(u32, Bytes) -> Result<bool, WireError>,
) -> Result<BTreeMap<i32, Bytes>, WireError> {
    let count = get_uvarint(buf, what)? as usize;
    // Each tagged field is at least two bytes: its tag and its size.
    if count.saturating_mul(2) > buf.remaining() {
        return Err(WireError::CountExceedsRemaining { what, count, remaining: buf.remaining() });
    }
    let mut unknown = BTreeMap::new();
    for _ in 0..count {
        let tag = get_uvarint(buf, what)?;
        let size = get_uvarint(buf, what)? as usize;
        need(buf, size, what)?;
        let payload = buf.copy_to_bytes(size);
        let Ok(tag_i32) = i32::try_from(tag) else {
            return Err(WireError::InvalidTag { what, tag });
        };
        if !known(tag, payload.clone())? {
            unknown.insert(tag_i32, payload);
        }
    }
    Ok(unknown)
}

/// Decodes the payload of a known tagged field with `f`, requiring that it is consumed exactly.
pub(crate) fn decode_tagged_payload<T>(
    mut payload: Bytes,
    what: &'static str,
    f: impl FnOnce(&mut Bytes) -> Result<T, WireError>,
) -> Result<T, WireError> {
    let value = f(&mut payload)?;
    if payload.has_remaining() {
        return Err(WireError::TrailingBytes { what, remaining: payload.remaining() });
    }
    Ok(value)
}

pub(crate) fn put_bool<B: BufMut>(buf: &mut B, v: bool) {
    buf.put_u8(u8::from(v));
}

pub(crate) fn put_uuid<B: BufMut>(buf: &mut B, v: &KafkaUuid) {
    buf.put_slice(&v.0);
}

pub(crate) fn put_uvarint<B: BufMut>(buf: &mut B, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// Encoded length of [`put_uvarint`]`(v)`, in bytes.
#[cfg(test)]
fn uvarint_len(v: u32) -> usize {
    match v {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0x0fff_ffff => 4,
        _ => 5,
    }
}

pub(crate) fn put_compact_nullable_string<B: BufMut>(
    buf: &mut B,
    v: Option<&str>,
    what: &'static str,
) -> Result<(), WireError> {
    match v {
        None => put_uvarint(buf, 0),
        Some(s) => {
            if s.len() > MAX_STRING_BYTES {
                return Err(WireError::StringTooLong { what, len: s.len() });
            }
            put_uvarint(buf, s.len() as u32 + 1);
            buf.put_slice(s.as_bytes());
        }
    }
    Ok(())
}

pub(crate) fn put_compact_string<B: BufMut>(buf: &mut B, v: &str, what: &'static str) -> Result<(), WireError> {
    put_compact_nullable_string(buf, Some(v), what)
}

/// Writes a compact array length, uvarint(count + 1); `None` writes the null marker 0.
pub(crate) fn put_compact_array_len<B: BufMut>(
    buf: &mut B,
    count: Option<usize>,
    what: &'static str,
) -> Result<(), WireError> {
    match count {
        None => put_uvarint(buf, 0),
        Some(n) => {
            let Some(v) = u32::try_from(n).ok().and_then(|n| n.checked_add(1)) else {
                return Err(WireError::CountTooLarge { what, count: n });
            };
            put_uvarint(buf, v);
        }
    }
    Ok(())
}

/// Writes a compact array, encoding each element with `elem`.
pub(crate) fn put_compact_array<B: BufMut, T>(
    buf: &mut B,
    items: &[T],
    what: &'static str,
    mut elem: impl FnMut(&mut B, &T) -> Result<(), WireError>,
) -> Result<(), WireError> {
    put_compact_array_len(buf, Some(items.len()), what)?;
    for item in items {
        elem(buf, item)?;
    }
    Ok(())
}

/// Writes a compact nullable array, encoding each element with `elem`.
pub(crate) fn put_compact_nullable_array<B: BufMut, T>(
    buf: &mut B,
    items: Option<&[T]>,
    what: &'static str,
    elem: impl FnMut(&mut B, &T) -> Result<(), WireError>,
) -> Result<(), WireError> {
    match items {
        None => put_compact_array_len(buf, None, what),
        Some(items) => put_compact_array(buf, items, what, elem),
    }
}

/// Writes a tagged-field section in ascending tag order: the `known` fields (tag and already
/// encoded payload, only those that differ from their default) merged with the `unknown` ones
/// kept from decoding. A tag present in both is [`WireError::DuplicateTag`].
pub(crate) fn put_tagged_fields<B: BufMut>(
    buf: &mut B,
    known: &[(u32, Bytes)],
    unknown: &BTreeMap<i32, Bytes>,
    what: &'static str,
) -> Result<(), WireError> {
    let mut fields: BTreeMap<u32, &Bytes> = BTreeMap::new();
    for (tag, payload) in known {
        fields.insert(*tag, payload);
    }
    for (tag, payload) in unknown {
        let Ok(tag) = u32::try_from(*tag) else {
            return Err(WireError::InvalidTag { what, tag: *tag as u32 });
        };
        if fields.insert(tag, payload).is_some() {
            return Err(WireError::DuplicateTag { what, tag });
        }
    }
    put_count(buf, fields.len(), what)?;
    for (tag, payload) in fields {
        let Ok(size) = u32::try_from(payload.len()) else {
            return Err(WireError::CountTooLarge { what, count: payload.len() });
        };
        put_uvarint(buf, tag);
        put_uvarint(buf, size);
        buf.put_slice(payload);
    }
    Ok(())
}

/// A plain uvarint count (no +1 bias), as the tagged-field section uses.
fn put_count<B: BufMut>(buf: &mut B, count: usize, what: &'static str) -> Result<(), WireError> {
    let Ok(v) = u32::try_from(count) else {
        return Err(WireError::CountTooLarge { what, count });
    };
    put_uvarint(buf, v);
    Ok(())
}

/// Encodes one known tagged field's payload into its own buffer with `f`.
pub(crate) fn tagged_payload(f: impl FnOnce(&mut Vec<u8>) -> Result<(), WireError>) -> Result<Bytes, WireError> {
    let mut v = Vec::new();
    f(&mut v)?;
    Ok(Bytes::from(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uvarint_round_trip_and_len() {
        for v in [0u32, 1, 127, 128, 300, 16_383, 16_384, 2_097_151, 2_097_152, u32::MAX] {
            let mut out = Vec::new();
            put_uvarint(&mut out, v);
            assert_eq!(out.len(), uvarint_len(v), "len of {v}");
            let mut b = Bytes::from(out);
            assert_eq!(get_uvarint(&mut b, "v").unwrap(), v);
            assert!(b.is_empty());
        }
    }

    #[test]
    fn uvarint_rejects_overlong_and_truncated() {
        let mut b = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x1f]);
        assert!(matches!(get_uvarint(&mut b, "v"), Err(WireError::VarIntTooLong { .. })));
        let mut b = Bytes::from_static(&[0xff, 0xff]);
        assert!(matches!(get_uvarint(&mut b, "v"), Err(WireError::Truncated { .. })));
    }

    #[test]
    fn strings_are_checked() {
        // Length 32768 (> i16::MAX) is refused before any read.
        let mut out = Vec::new();
        put_uvarint(&mut out, 32_769);
        let mut b = Bytes::from(out);
        assert!(matches!(get_compact_nullable_string(&mut b, "s"), Err(WireError::StringTooLong { .. })));
        let mut b = Bytes::from_static(&[3, 0xff, 0xfe]);
        assert!(matches!(get_compact_string(&mut b, "s"), Err(WireError::InvalidUtf8 { .. })));
        let mut b = Bytes::from_static(&[0]);
        assert!(matches!(get_compact_string(&mut b, "s"), Err(WireError::UnexpectedNull { .. })));
        let mut b = Bytes::from_static(&[0]);
        assert_eq!(get_compact_nullable_string(&mut b, "s").unwrap(), None);
    }

    #[test]
    fn huge_array_count_is_refused_before_allocating() {
        let mut out = Vec::new();
        put_uvarint(&mut out, u32::MAX);
        let mut b = Bytes::from(out);
        let r = get_compact_array(&mut b, 4, "a", |b| get_i32(b, "e"));
        assert!(matches!(r, Err(WireError::CountExceedsRemaining { .. })));
        let mut out = Vec::new();
        put_uvarint(&mut out, u32::MAX);
        let mut b = Bytes::from(out);
        let r = get_tagged_fields(&mut b, "t", |_, _| Ok(false));
        assert!(matches!(r, Err(WireError::CountExceedsRemaining { .. })));
    }

    #[test]
    fn tagged_fields_merge_in_order_and_reject_duplicates() {
        let mut unknown = BTreeMap::new();
        unknown.insert(9999, Bytes::from_static(b"xyz"));
        unknown.insert(0, Bytes::from_static(b"a"));
        let mut out = Vec::new();
        put_tagged_fields(&mut out, &[(1, Bytes::from_static(b"b"))], &unknown, "t").unwrap();
        let mut b = Bytes::from(out);
        let mut seen = Vec::new();
        let back = get_tagged_fields(&mut b, "t", |tag, _| {
            seen.push(tag);
            Ok(tag == 1)
        })
        .unwrap();
        assert_eq!(seen, vec![0, 1, 9999]);
        assert_eq!(back, unknown);

        let mut out = Vec::new();
        let r = put_tagged_fields(&mut out, &[(0, Bytes::new())], &unknown, "t");
        assert!(matches!(r, Err(WireError::DuplicateTag { tag: 0, .. })));
    }
}
