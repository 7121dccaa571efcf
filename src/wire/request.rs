//! A client request with its header parsed once, when the connection reads the frame (Kafka's
//! own broker does the same in `RequestContext`, then hands the parsed request to the handler
//! of its api key in `KafkaApis.handle`). Every later step (the SASL watcher, the state-topic
//! guard, the mirror gate, the request walks of [`super::scan`], the request span, routing)
//! reads the api key, version, correlation id, client id and the body from this value; none of
//! them reads the header bytes again.
//!
//! Layout (Kafka `RequestHeader`, header versions 0–2): `request_api_key: INT16`,
//! `request_api_version: INT16`, `correlation_id: INT32`; v1 adds `client_id:
//! NULLABLE_STRING` (an `INT16` length, never compact, even in v2); v2 adds tagged fields. The
//! header version follows from the api key and version (Kafka's message JSON
//! `flexibleVersions`); the mirror RPCs of KIP-1279 use v2.
//!
//! Parsing fails only for a frame too short for the 8-byte prefix. A header whose client id or
//! tagged fields run past the frame (or an api key whose header version nobody knows) still
//! parses: the fault is kept and returned by [`ParsedRequest::body`] and
//! [`RequestHeader::header_len`], so that only a step that needs the body refuses the request,
//! with its own message, as it did when each step read the header itself; a request no step
//! needs to look into goes to the broker as the client's bytes. Never panics on wire input and
//! allocates nothing from a wire length.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;

use super::frame::FrameError;
use super::header::{self, HeaderError, RequestPrefix};

/// The fixed fields of a request header and where its body starts: small and `Copy`, kept with
/// a request while its response is due (it holds no bytes of the frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// `request_api_key` (Kafka protocol); may be one kafka-protocol does not know.
    pub api_key: i16,
    /// `request_api_version`.
    pub api_version: i16,
    /// `correlation_id`, echoed by the broker in the response header.
    pub correlation_id: i32,
    /// The request header version (0, 1 or 2), `None` for an api key whose version is not known.
    pub header_version: Option<i16>,
    /// Byte length of the header (where the body starts), or why it cannot be read.
    header_len: Result<usize, HeaderError>,
}

impl RequestHeader {
    /// Byte length of the request header, i.e. the offset of the body within the frame.
    ///
    /// # Errors
    /// [`HeaderError`] when the client id or tagged fields run past the frame or are malformed,
    /// or [`HeaderError::UnknownVersion`] for an api key whose header version is not known.
    pub fn header_len(&self) -> Result<usize, HeaderError> {
        self.header_len
    }

    /// The 8-byte prefix (api key, version, correlation id).
    pub fn prefix(&self) -> RequestPrefix {
        RequestPrefix { api_key: self.api_key, api_version: self.api_version, correlation_id: self.correlation_id }
    }
}

/// The `client_id` of a request header, as read once.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ClientId {
    /// Header v0, an unknown header version, or a header too short to hold it.
    Absent,
    /// The null string (length -1).
    Null,
    /// A valid UTF-8 string (a zero-copy slice of the frame).
    Utf8(StrBytes),
    /// A string whose bytes are not UTF-8 (kafka-protocol's `RequestHeader` refuses it).
    NotUtf8,
}

/// One client request: its parsed header and the whole frame (header and body, without the
/// 4-byte length prefix). Cloning shares the frame's bytes.
#[derive(Debug, Clone)]
pub struct ParsedRequest {
    header: RequestHeader,
    client_id: ClientId,
    frame: Bytes,
}

impl ParsedRequest {
    /// Parses the header of `frame` with the header versions kafka-protocol knows.
    ///
    /// # Errors
    /// [`FrameError::TooShort`] for a frame under 8 bytes.
    pub fn parse(frame: Bytes) -> Result<Self, FrameError> {
        Self::parse_with(frame, header::request_header_version)
    }

    /// Parses the header of `frame`; `header_version(api_key, api_version)` names the request
    /// header version (`None`: not known, the client id and body are then not read).
    ///
    /// # Errors
    /// [`FrameError::TooShort`] for a frame under 8 bytes.
    pub fn parse_with(frame: Bytes, header_version: impl FnOnce(i16, i16) -> Option<i16>) -> Result<Self, FrameError> {
        let prefix = RequestPrefix::parse(&frame)?;
        let version = header_version(prefix.api_key, prefix.api_version);
        let (client_id, header_len) = match version {
            None => (
                ClientId::Absent,
                Err(HeaderError::UnknownVersion { api_key: prefix.api_key, api_version: prefix.api_version }),
            ),
            Some(v) => {
                let client_id = if v >= 1 { read_client_id(&frame) } else { ClientId::Absent };
                (client_id, header::request_header_len(&frame, v))
            }
        };
        let header = RequestHeader {
            api_key: prefix.api_key,
            api_version: prefix.api_version,
            correlation_id: prefix.correlation_id,
            header_version: version,
            header_len,
        };
        Ok(Self { header, client_id, frame })
    }

    /// The parsed header (a copy is cheap: it holds no bytes).
    pub fn header(&self) -> &RequestHeader {
        &self.header
    }

    /// `request_api_key`.
    pub fn api_key(&self) -> i16 {
        self.header.api_key
    }

    /// `request_api_version`.
    pub fn api_version(&self) -> i16 {
        self.header.api_version
    }

    /// `correlation_id`.
    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }

    /// The `client_id` (header v1+), `None` when null, absent or not valid UTF-8.
    pub fn client_id(&self) -> Option<&str> {
        match &self.client_id {
            ClientId::Utf8(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// Whether the header carries a `client_id` whose bytes are not UTF-8 (which
    /// kafka-protocol's decoder, and so a broker, refuses).
    pub fn client_id_not_utf8(&self) -> bool {
        self.client_id == ClientId::NotUtf8
    }

    /// The whole frame: header and body, without the length prefix.
    pub fn frame(&self) -> &Bytes {
        &self.frame
    }

    /// The frame, giving up the parsed request.
    pub fn into_frame(self) -> Bytes {
        self.frame
    }

    /// Byte length of the header; see [`RequestHeader::header_len`].
    ///
    /// # Errors
    /// As [`RequestHeader::header_len`].
    pub fn header_len(&self) -> Result<usize, HeaderError> {
        self.header.header_len
    }

    /// The request body (the bytes after the header), sharing the frame's memory.
    ///
    /// # Errors
    /// As [`RequestHeader::header_len`].
    pub fn body(&self) -> Result<Bytes, HeaderError> {
        Ok(self.frame.slice(self.header_len()?..))
    }

    /// The client's own header bytes followed by a new body written by `encode`: the request
    /// with its body replaced (a filtered request goes upstream behind the client's header).
    ///
    /// # Errors
    /// As [`RequestHeader::header_len`], or `encode`'s error.
    pub fn with_body<E: From<HeaderError>>(
        &self,
        encode: impl FnOnce(&mut BytesMut) -> Result<(), E>,
    ) -> Result<Bytes, E> {
        let start = self.header_len()?;
        let mut out = BytesMut::with_capacity(self.frame.len());
        out.extend_from_slice(&self.frame[..start]);
        encode(&mut out)?;
        Ok(out.freeze())
    }

    /// This request with its frame replaced by `frame`: an edit of the body behind the same
    /// header bytes (a filtered request), so the header is not read again.
    pub fn with_frame(&self, frame: Bytes) -> ParsedRequest {
        Self { header: self.header, client_id: self.client_id.clone(), frame }
    }

    /// A copy of the frame carrying `correlation_id` instead of the client's: for sending the
    /// request on a connection whose correlation ids are not the client's (another broker or
    /// cluster); the response's correlation id is then mapped back to [`Self::correlation_id`].
    pub fn frame_with_correlation_id(&self, correlation_id: i32) -> Bytes {
        let mut out = BytesMut::with_capacity(self.frame.len());
        out.put_slice(&self.frame[..4]);
        out.put_i32(correlation_id);
        out.put_slice(&self.frame[8..]);
        out.freeze()
    }
}

/// Reads a v1+ header's `client_id` (`INT16` length at byte 8, then that many bytes).
fn read_client_id(frame: &Bytes) -> ClientId {
    let Some(b) = frame.get(8..10) else { return ClientId::Absent };
    let len = i16::from_be_bytes([b[0], b[1]]);
    if len < 0 {
        return if len == -1 { ClientId::Null } else { ClientId::Absent };
    }
    let end = 10 + len as usize;
    if end > frame.len() {
        return ClientId::Absent;
    }
    match StrBytes::from_utf8(frame.slice(10..end)) {
        Ok(s) => ClientId::Utf8(s),
        Err(_) => ClientId::NotUtf8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(bytes: &[u8]) -> Bytes {
        Bytes::copy_from_slice(bytes)
    }

    #[test]
    fn a_v2_header_is_read_once_into_its_fields() {
        let mut f = vec![0, 18, 0, 3, 0, 0, 0, 7];
        f.extend_from_slice(&[0, 3, b'a', b'b', b'c']);
        f.extend_from_slice(&[1, 5, 2, 0xaa, 0xbb]); // one tagged field, tag 5, 2 bytes
        f.extend_from_slice(b"body");
        let r = ParsedRequest::parse(frame(&f)).unwrap();
        assert_eq!((r.api_key(), r.api_version(), r.correlation_id()), (18, 3, 7));
        assert_eq!(r.header().header_version, Some(2));
        assert_eq!(r.client_id(), Some("abc"));
        assert_eq!(r.header_len(), Ok(f.len() - 4));
        assert_eq!(&r.body().unwrap()[..], b"body");
        let swapped = r.with_body(|out| {
            out.extend_from_slice(b"new");
            Ok::<_, HeaderError>(())
        });
        assert_eq!(&swapped.unwrap()[..], [&f[..f.len() - 4], b"new"].concat());
        let moved = r.frame_with_correlation_id(99);
        assert_eq!(ParsedRequest::parse(moved.clone()).unwrap().correlation_id(), 99);
        assert_eq!(&moved[8..], &f[8..]);
    }

    #[test]
    fn a_bad_header_parses_and_keeps_its_fault_for_whoever_needs_the_body() {
        assert_eq!(ParsedRequest::parse(frame(&[0, 1])).unwrap_err(), FrameError::TooShort(2));
        // client_id length past the end: the prefix is there, the body is not.
        let r = ParsedRequest::parse(frame(&[0, 1, 0, 4, 0, 0, 0, 1, 0x7f, 0xff])).unwrap();
        assert_eq!((r.api_key(), r.correlation_id()), (1, 1));
        assert_eq!(r.body(), Err(HeaderError::Truncated));
        assert_eq!(r.client_id(), None);
        // Tagged fields past the end (header v2).
        let r =
            ParsedRequest::parse(frame(&[0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 1, 1, 0xff, 0xff, 0xff, 0x0f])).unwrap();
        assert_eq!(r.header_len(), Err(HeaderError::Truncated));
        // A client id that is not UTF-8.
        let r = ParsedRequest::parse(frame(&[0, 3, 0, 1, 0, 0, 0, 1, 0, 2, 0xff, 0xfe])).unwrap();
        assert!(r.client_id_not_utf8());
        assert_eq!(r.client_id(), None);
        assert_eq!(r.header_len(), Ok(12));
        // An api key nobody knows: no header version, no body.
        let r = ParsedRequest::parse(frame(&[0x79, 0, 0, 0, 0, 0, 0, 1, 0, 0])).unwrap();
        assert_eq!(r.header().header_version, None);
        assert!(matches!(r.body(), Err(HeaderError::UnknownVersion { api_key: 0x7900, .. })));
        // ... unless the caller knows it (the mirror RPCs use header v2).
        let r =
            ParsedRequest::parse_with(frame(&[0x79, 0, 0, 0, 0, 0, 0, 1, 0, 1, b'x', 0, 9]), |_, _| Some(2)).unwrap();
        assert_eq!((r.client_id(), r.header_len()), (Some("x"), Ok(12)));
    }
}
