//! Kafka request and response headers, read straight off a frame without decoding the body.
//!
//! Every request starts with `request_api_key: INT16`, `request_api_version: INT16`,
//! `correlation_id: INT32` (all header versions); header v1 adds `client_id: NULLABLE_STRING`
//! and v2 adds tagged fields. Every response starts with `correlation_id: INT32`; response
//! header v1 adds tagged fields. The header version follows from the api key and version
//! (Kafka's message JSON `flexibleVersions`), which [`request_header_version`] looks up.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::ApiKey;

use super::frame::FrameError;

/// The first eight bytes of every request: enough to route it and match its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPrefix {
    /// `request_api_key` (Kafka protocol); may be one kafka-protocol does not know.
    pub api_key: i16,
    /// `request_api_version`.
    pub api_version: i16,
    /// `correlation_id`, echoed by the broker in the response header.
    pub correlation_id: i32,
}

impl RequestPrefix {
    /// Reads the prefix of a request frame.
    ///
    /// # Errors
    /// [`FrameError::TooShort`] if the frame holds fewer than 8 bytes.
    pub fn parse(frame: &[u8]) -> Result<Self, FrameError> {
        if frame.len() < 8 {
            return Err(FrameError::TooShort(frame.len()));
        }
        Ok(Self {
            api_key: i16::from_be_bytes([frame[0], frame[1]]),
            api_version: i16::from_be_bytes([frame[2], frame[3]]),
            correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
        })
    }
}

/// Request header version (1 or 2) for an api key kafka-protocol knows, `None` otherwise.
pub fn request_header_version(api_key: i16, api_version: i16) -> Option<i16> {
    ApiKey::try_from(api_key).ok().map(|k| k.request_header_version(api_version))
}

/// Response header version (0 or 1) for an api key kafka-protocol knows, `None` otherwise.
/// ApiVersions responses always use v0 so that any client can read them (KIP-511).
pub fn response_header_version(api_key: i16, api_version: i16) -> Option<i16> {
    ApiKey::try_from(api_key).ok().map(|k| k.response_header_version(api_version))
}

/// Byte length of a request header of `header_version` at the front of `frame`, i.e. where the
/// body starts. Reads `client_id` (v1+) and skips tagged fields (v2).
///
/// # Errors
/// [`HeaderError`] if the header runs past the end of the frame or is malformed.
pub fn request_header_len(frame: &[u8], header_version: i16) -> Result<usize, HeaderError> {
    let mut pos = 8;
    if header_version >= 1 {
        let len = read_i16(frame, pos)?;
        pos += 2;
        if len > 0 {
            pos = checked_advance(frame, pos, len as usize)?;
        } else if len < -1 {
            return Err(HeaderError::Malformed("negative client_id length"));
        }
    }
    if header_version >= 2 {
        pos = skip_tagged_fields(frame, pos)?;
    }
    Ok(pos)
}

/// The `client_id` of a request header (v1+), if present and valid UTF-8.
pub fn request_client_id(frame: &[u8], header_version: i16) -> Option<&str> {
    if header_version < 1 {
        return None;
    }
    let len = read_i16(frame, 8).ok()?;
    if len < 0 {
        return None;
    }
    let end = 10usize.checked_add(len as usize)?;
    std::str::from_utf8(frame.get(10..end)?).ok()
}

/// Byte length of a response header of `header_version` at the front of `frame`.
///
/// # Errors
/// [`HeaderError`] if the header runs past the end of the frame.
pub fn response_header_len(frame: &[u8], header_version: i16) -> Result<usize, HeaderError> {
    if frame.len() < 4 {
        return Err(HeaderError::Truncated);
    }
    if header_version >= 1 {
        skip_tagged_fields(frame, 4)
    } else {
        Ok(4)
    }
}

/// Where the top-level `ErrorCode` of a response body sits: at its start, or after the
/// 4-byte `ThrottleTimeMs`. `None` for APIs (or versions) whose errors are per topic,
/// partition or group only (Produce, Metadata, OffsetCommit, ...).
fn top_level_error_offset(api_key: i16, api_version: i16) -> Option<usize> {
    match (api_key, api_version) {
        // ApiVersions, SaslHandshake, SaslAuthenticate: ErrorCode first.
        (18 | 17 | 36, _) => Some(0),
        // FindCoordinator v0, JoinGroup v0-1, Heartbeat/LeaveGroup/SyncGroup/ListGroups v0.
        (10, 0) | (11, 0..=1) | (12 | 13 | 14 | 16, 0) => Some(0),
        // FindCoordinator v1-3 (v4+ answers per key), JoinGroup v2+, Heartbeat/LeaveGroup/
        // SyncGroup/ListGroups v1+, Fetch v7+ (sessions), InitProducerId, AddOffsetsToTxn,
        // EndTxn, DescribeAcls, DescribeCluster, ConsumerGroupHeartbeat: after ThrottleTimeMs.
        (10, 1..=3) | (11, 2..) | (12 | 13 | 14 | 16, 1..) | (1, 7..) => Some(4),
        (22 | 25 | 26 | 29 | 60 | 68, _) => Some(4),
        _ => None,
    }
}

/// The top-level `ErrorCode` of a response frame (header included), for the APIs that carry
/// one; `None` for the others and for a frame too short to hold it.
pub fn response_error_code(api_key: i16, api_version: i16, frame: &[u8]) -> Option<i16> {
    let offset = top_level_error_offset(api_key, api_version)?;
    let header_version = response_header_version(api_key, api_version)?;
    let at = response_header_len(frame, header_version).ok()? + offset;
    let b = frame.get(at..at + 2)?;
    Some(i16::from_be_bytes([b[0], b[1]]))
}

/// The correlation id of a response frame.
///
/// # Errors
/// [`HeaderError::Truncated`] for a frame under 4 bytes.
pub fn response_correlation_id(frame: &[u8]) -> Result<i32, HeaderError> {
    let b = frame.get(..4).ok_or(HeaderError::Truncated)?;
    Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Writes a response header of `header_version` with `correlation_id` and no tagged fields.
pub fn put_response_header(out: &mut BytesMut, correlation_id: i32, header_version: i16) {
    out.put_i32(correlation_id);
    if header_version >= 1 {
        out.put_u8(0);
    }
}

/// Why a header could not be read.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum HeaderError {
    /// The header runs past the end of the frame.
    #[error("header runs past the end of the frame")]
    Truncated,
    /// A field holds an impossible value.
    #[error("malformed header: {0}")]
    Malformed(&'static str),
    /// The request header version of this api key and version is not known, so where the
    /// body starts is not known either.
    #[error("request header version of api key {api_key} v{api_version} is not known")]
    UnknownVersion {
        /// `request_api_key`.
        api_key: i16,
        /// `request_api_version`.
        api_version: i16,
    },
}

fn read_i16(frame: &[u8], pos: usize) -> Result<i16, HeaderError> {
    let b = frame.get(pos..pos + 2).ok_or(HeaderError::Truncated)?;
    Ok(i16::from_be_bytes([b[0], b[1]]))
}

fn checked_advance(frame: &[u8], pos: usize, n: usize) -> Result<usize, HeaderError> {
    let end = pos.checked_add(n).ok_or(HeaderError::Truncated)?;
    if end > frame.len() {
        return Err(HeaderError::Truncated);
    }
    Ok(end)
}

/// Reads an unsigned varint (Kafka `UNSIGNED_VARINT`, at most 5 bytes for 32 bits) at `pos`;
/// returns the value and the position after it.
///
/// # Errors
/// [`HeaderError::Truncated`] at the end of the frame, [`HeaderError::Malformed`] past 5 bytes.
pub fn read_uvarint(frame: &[u8], mut pos: usize) -> Result<(u32, usize), HeaderError> {
    let mut value: u32 = 0;
    for shift in (0..35).step_by(7) {
        let b = *frame.get(pos).ok_or(HeaderError::Truncated)?;
        pos += 1;
        value |= u32::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
        if b & 0x80 == 0 {
            return Ok((value, pos));
        }
    }
    Err(HeaderError::Malformed("varint longer than 5 bytes"))
}

/// Skips a tagged-field section: count, then (tag, size, bytes) per field.
fn skip_tagged_fields(frame: &[u8], pos: usize) -> Result<usize, HeaderError> {
    let (count, mut pos) = read_uvarint(frame, pos)?;
    for _ in 0..count {
        let (_tag, p) = read_uvarint(frame, pos)?;
        let (size, p) = read_uvarint(frame, p)?;
        pos = checked_advance(frame, p, size as usize)?;
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_error_codes_are_read_where_the_api_puts_them() {
        // ApiVersions v3: header v0 (ApiVersions responses never have tagged header fields).
        assert_eq!(response_error_code(18, 3, &[0, 0, 0, 9, 0, 35, 0]), Some(35));
        // InitProducerId v4 (flexible, header v1): correlation id, no tags, throttle, error.
        assert_eq!(response_error_code(22, 4, &[0, 0, 0, 9, 0, 0, 0, 0, 5, 0, 47]), Some(47));
        // Fetch v4 has no top-level error; Produce never has one.
        assert_eq!(response_error_code(1, 4, &[0, 0, 0, 9, 0, 0, 0, 0, 0, 1]), None);
        assert_eq!(response_error_code(0, 9, &[0, 0, 0, 9, 0, 0, 0, 0, 0, 1]), None);
        // Too short: no code, no panic.
        assert_eq!(response_error_code(22, 4, &[0, 0, 0, 9, 0, 0]), None);
    }

    #[test]
    fn reads_v2_header_with_client_id_and_tagged_fields() {
        let mut f = vec![0, 18, 0, 3, 0, 0, 0, 7];
        f.extend_from_slice(&[0, 3, b'a', b'b', b'c']);
        f.extend_from_slice(&[1, 5, 2, 0xaa, 0xbb]); // one tagged field, tag 5, 2 bytes
        f.extend_from_slice(b"body");
        let p = RequestPrefix::parse(&f).unwrap();
        assert_eq!((p.api_key, p.api_version, p.correlation_id), (18, 3, 7));
        assert_eq!(request_header_len(&f, 2).unwrap(), f.len() - 4);
        assert_eq!(request_client_id(&f, 2), Some("abc"));
        assert_eq!(request_header_len(&f, 1).unwrap(), 13);
    }

    #[test]
    fn truncated_or_hostile_headers_are_errors() {
        assert_eq!(RequestPrefix::parse(&[0, 1]), Err(FrameError::TooShort(2)));
        let f = [0, 1, 0, 1, 0, 0, 0, 1, 0x7f, 0xff];
        assert_eq!(request_header_len(&f, 1), Err(HeaderError::Truncated));
        let f = [0, 1, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert!(request_header_len(&f, 2).is_err());
        let f = [0, 1, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 1, 1, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(request_header_len(&f, 2), Err(HeaderError::Truncated));
    }

    #[test]
    fn header_versions_follow_flexible_versions() {
        assert_eq!(request_header_version(3, 8), Some(1)); // Metadata v8
        assert_eq!(request_header_version(3, 9), Some(2)); // Metadata v9 flexible
        assert_eq!(response_header_version(18, 3), Some(0)); // ApiVersions always v0
        assert_eq!(request_header_version(9999, 0), None);
    }
}
