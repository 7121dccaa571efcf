//! The KIP-1279 cluster-mirror admin RPCs as Kafka messages: request and response bodies for
//! CreateClusterMirror, DeleteClusterMirror, ListClusterMirrors, DescribeClusterMirrors and
//! Start/Stop/Pause/Resume MirrorTopics, in the shape of the authors' prototype
//! (GitHub `showuon/kafka`, `clients/src/main/resources/common/message/*.json`), plus the
//! runtime-overridable api-key table ([`MirrorApiTable`]), the prototype's error codes
//! ([`MirrorErrorCode`]) and partition states ([`MirrorPartitionState`]).
//!
//! Bodies only: request header v2 / response header v1 are handled by `wire::header`. All
//! messages are version 0 and flexible (compact strings and arrays, tagged fields); unknown
//! tagged fields are kept and re-encoded unchanged. This module never touches a socket or a
//! clock, never panics on network input, and never sizes an allocation from a wire count it
//! has not checked against the bytes that remain.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::protocol::VersionRange;

pub(crate) mod codec;
mod error;
mod error_code;
mod state;
mod table;

pub use codec::{KafkaUuid, MAX_STRING_BYTES};
pub use error::WireError;
pub use error_code::{MirrorErrorCode, KAFKA_ALLOCATED};
pub use state::MirrorPartitionState;
pub use table::{MirrorApi, MirrorApiEntry, MirrorApiTable, MirrorApiTableError};

/// The versions this codec supports for every mirror RPC: the prototype's `validVersions "0"`.
pub const SUPPORTED_VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// Fails with [`WireError::UnsupportedVersion`] unless `version` is in [`SUPPORTED_VERSIONS`].
fn check_version(message: &'static str, version: i16) -> Result<(), WireError> {
    if version < SUPPORTED_VERSIONS.min || version > SUPPORTED_VERSIONS.max {
        return Err(WireError::UnsupportedVersion { message, version });
    }
    Ok(())
}

/// A mirror RPC body (request or response) that can be decoded and encoded at a version.
///
/// Every message also implements kafka-protocol's `Message`, `Encodable`, `Decodable` and
/// `HeaderVersion`, which wrap these methods (their errors become `anyhow::Error`).
pub trait MirrorMessage: Sized {
    /// The prototype's message name, e.g. `CreateClusterMirrorRequest`.
    const NAME: &'static str;
    /// The RPC this message belongs to.
    const API: MirrorApi;
    /// Decodes the body at `version`, consuming exactly the bytes it reads from `buf`.
    ///
    /// Errors: [`WireError::UnsupportedVersion`] outside [`SUPPORTED_VERSIONS`]; otherwise any
    /// malformed-input variant of [`WireError`].
    fn decode_body<B: Buf>(buf: &mut B, version: i16) -> Result<Self, WireError>;
    /// Encodes the body at `version` onto `buf`.
    ///
    /// Errors: [`WireError::UnsupportedVersion`], [`WireError::StringTooLong`],
    /// [`WireError::CountTooLarge`], [`WireError::DuplicateTag`] / [`WireError::InvalidTag`]
    /// for a bad `unknown_tagged_fields` map. `buf` may hold a partial encoding on error.
    fn encode_body<B: bytes::BufMut>(&self, buf: &mut B, version: i16) -> Result<(), WireError>;
}

/// Implements [`MirrorMessage`] and kafka-protocol's message traits for a body type that has
/// private `read`/`write` methods for version 0.
macro_rules! mirror_message {
    ($ty:ident, $name:literal, $api:ident, $kind:ident) => {
        impl $crate::wire::mirror::MirrorMessage for $ty {
            const NAME: &'static str = $name;
            const API: $crate::wire::mirror::MirrorApi = $crate::wire::mirror::MirrorApi::$api;
            fn decode_body<B: ::bytes::Buf>(
                buf: &mut B,
                version: i16,
            ) -> Result<Self, $crate::wire::mirror::WireError> {
                $crate::wire::mirror::check_version($name, version)?;
                Self::read(buf)
            }
            fn encode_body<B: ::bytes::BufMut>(
                &self,
                buf: &mut B,
                version: i16,
            ) -> Result<(), $crate::wire::mirror::WireError> {
                $crate::wire::mirror::check_version($name, version)?;
                self.write(buf)
            }
        }
        impl ::kafka_protocol::protocol::Message for $ty {
            const VERSIONS: ::kafka_protocol::protocol::VersionRange =
                $crate::wire::mirror::SUPPORTED_VERSIONS;
            const DEPRECATED_VERSIONS: Option<::kafka_protocol::protocol::VersionRange> = None;
        }
        impl ::kafka_protocol::protocol::Encodable for $ty {
            fn encode<B: ::kafka_protocol::protocol::buf::ByteBufMut>(
                &self,
                buf: &mut B,
                version: i16,
            ) -> ::anyhow::Result<()> {
                Ok($crate::wire::mirror::MirrorMessage::encode_body(
                    self, buf, version,
                )?)
            }
            /// Computed by encoding into a scratch buffer (the mirror RPCs are small admin
            /// messages; kafka-protocol's size helpers are crate-private).
            fn compute_size(&self, version: i16) -> ::anyhow::Result<usize> {
                let mut scratch = Vec::new();
                $crate::wire::mirror::MirrorMessage::encode_body(self, &mut scratch, version)?;
                Ok(scratch.len())
            }
        }
        impl ::kafka_protocol::protocol::Decodable for $ty {
            fn decode<B: ::kafka_protocol::protocol::buf::ByteBuf>(
                buf: &mut B,
                version: i16,
            ) -> ::anyhow::Result<Self> {
                Ok(<Self as $crate::wire::mirror::MirrorMessage>::decode_body(
                    buf, version,
                )?)
            }
        }
        impl ::kafka_protocol::protocol::HeaderVersion for $ty {
            /// Flexible from v0: request header v2, response header v1.
            fn header_version(_version: i16) -> i16 {
                mirror_message!(@header $kind)
            }
        }
    };
    (@header request) => {
        2
    };
    (@header response) => {
        1
    };
}

pub mod create_cluster_mirror;
pub mod delete_cluster_mirror;
pub mod describe_cluster_mirrors;
pub mod list_cluster_mirrors;
pub mod pause_mirror_topics;
pub mod resume_mirror_topics;
pub mod start_mirror_topics;
pub mod stop_mirror_topics;

pub use create_cluster_mirror::{CreateClusterMirrorRequest, CreateClusterMirrorResponse};
pub use delete_cluster_mirror::{DeleteClusterMirrorRequest, DeleteClusterMirrorResponse};
pub use describe_cluster_mirrors::{DescribeClusterMirrorsRequest, DescribeClusterMirrorsResponse};
pub use list_cluster_mirrors::{ListClusterMirrorsRequest, ListClusterMirrorsResponse};
pub use pause_mirror_topics::{PauseMirrorTopicsRequest, PauseMirrorTopicsResponse};
pub use resume_mirror_topics::{ResumeMirrorTopicsRequest, ResumeMirrorTopicsResponse};
pub use start_mirror_topics::{StartMirrorTopicsRequest, StartMirrorTopicsResponse};
pub use stop_mirror_topics::{StopMirrorTopicsRequest, StopMirrorTopicsResponse};

/// A decoded mirror RPC request body, one variant per [`MirrorApi`].
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorRequest {
    /// CreateClusterMirror (prototype api key 94).
    CreateClusterMirror(CreateClusterMirrorRequest),
    /// DeleteClusterMirror (prototype api key 104).
    DeleteClusterMirror(DeleteClusterMirrorRequest),
    /// ListClusterMirrors (prototype api key 98).
    ListClusterMirrors(ListClusterMirrorsRequest),
    /// DescribeClusterMirrors (prototype api key 99).
    DescribeClusterMirrors(DescribeClusterMirrorsRequest),
    /// StartMirrorTopics (prototype api key 95).
    StartMirrorTopics(StartMirrorTopicsRequest),
    /// StopMirrorTopics (prototype api key 96).
    StopMirrorTopics(StopMirrorTopicsRequest),
    /// PauseMirrorTopics (prototype api key 102).
    PauseMirrorTopics(PauseMirrorTopicsRequest),
    /// ResumeMirrorTopics (prototype api key 103).
    ResumeMirrorTopics(ResumeMirrorTopicsRequest),
}

/// A decoded mirror RPC response body, one variant per [`MirrorApi`].
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorResponse {
    /// CreateClusterMirror (prototype api key 94).
    CreateClusterMirror(CreateClusterMirrorResponse),
    /// DeleteClusterMirror (prototype api key 104).
    DeleteClusterMirror(DeleteClusterMirrorResponse),
    /// ListClusterMirrors (prototype api key 98).
    ListClusterMirrors(ListClusterMirrorsResponse),
    /// DescribeClusterMirrors (prototype api key 99).
    DescribeClusterMirrors(DescribeClusterMirrorsResponse),
    /// StartMirrorTopics (prototype api key 95).
    StartMirrorTopics(StartMirrorTopicsResponse),
    /// StopMirrorTopics (prototype api key 96).
    StopMirrorTopics(StopMirrorTopicsResponse),
    /// PauseMirrorTopics (prototype api key 102).
    PauseMirrorTopics(PauseMirrorTopicsResponse),
    /// ResumeMirrorTopics (prototype api key 103).
    ResumeMirrorTopics(ResumeMirrorTopicsResponse),
}

/// Applies `$body` to the message inside any variant of `$enum`.
macro_rules! each_variant {
    ($enum:ident, $value:expr, $m:ident => $body:expr) => {
        match $value {
            $enum::CreateClusterMirror($m) => $body,
            $enum::DeleteClusterMirror($m) => $body,
            $enum::ListClusterMirrors($m) => $body,
            $enum::DescribeClusterMirrors($m) => $body,
            $enum::StartMirrorTopics($m) => $body,
            $enum::StopMirrorTopics($m) => $body,
            $enum::PauseMirrorTopics($m) => $body,
            $enum::ResumeMirrorTopics($m) => $body,
        }
    };
}

/// Decodes one whole message of type `T` from `buf`, requiring every byte to be consumed.
fn decode_whole<T: MirrorMessage>(buf: &mut Bytes, version: i16) -> Result<T, WireError> {
    let msg = T::decode_body(buf, version)?;
    if buf.has_remaining() {
        return Err(WireError::TrailingBytes { what: T::NAME, remaining: buf.remaining() });
    }
    Ok(msg)
}

/// Encodes `msg` onto `out`; on error `out` is restored to its previous length.
fn encode_whole<T: MirrorMessage>(msg: &T, version: i16, out: &mut BytesMut) -> Result<(), WireError> {
    let start = out.len();
    let r = msg.encode_body(out, version);
    if r.is_err() {
        out.truncate(start);
    }
    r
}

impl MirrorRequest {
    /// The RPC this request belongs to.
    pub fn api(&self) -> MirrorApi {
        match self {
            MirrorRequest::CreateClusterMirror(_) => MirrorApi::CreateClusterMirror,
            MirrorRequest::DeleteClusterMirror(_) => MirrorApi::DeleteClusterMirror,
            MirrorRequest::ListClusterMirrors(_) => MirrorApi::ListClusterMirrors,
            MirrorRequest::DescribeClusterMirrors(_) => MirrorApi::DescribeClusterMirrors,
            MirrorRequest::StartMirrorTopics(_) => MirrorApi::StartMirrorTopics,
            MirrorRequest::StopMirrorTopics(_) => MirrorApi::StopMirrorTopics,
            MirrorRequest::PauseMirrorTopics(_) => MirrorApi::PauseMirrorTopics,
            MirrorRequest::ResumeMirrorTopics(_) => MirrorApi::ResumeMirrorTopics,
        }
    }
}

impl MirrorResponse {
    /// The RPC this response belongs to.
    pub fn api(&self) -> MirrorApi {
        match self {
            MirrorResponse::CreateClusterMirror(_) => MirrorApi::CreateClusterMirror,
            MirrorResponse::DeleteClusterMirror(_) => MirrorApi::DeleteClusterMirror,
            MirrorResponse::ListClusterMirrors(_) => MirrorApi::ListClusterMirrors,
            MirrorResponse::DescribeClusterMirrors(_) => MirrorApi::DescribeClusterMirrors,
            MirrorResponse::StartMirrorTopics(_) => MirrorApi::StartMirrorTopics,
            MirrorResponse::StopMirrorTopics(_) => MirrorApi::StopMirrorTopics,
            MirrorResponse::PauseMirrorTopics(_) => MirrorApi::PauseMirrorTopics,
            MirrorResponse::ResumeMirrorTopics(_) => MirrorApi::ResumeMirrorTopics,
        }
    }

    /// The top-level `ErrorCode` of the response (0 = no error).
    pub fn error_code(&self) -> i16 {
        each_variant!(MirrorResponse, self, m => m.error_code)
    }
}

/// Decodes a mirror request body (the bytes after the v2 request header) for `api` at
/// `version`. The whole of `buf` must be the body.
///
/// Errors: [`WireError::UnsupportedVersion`] for a version other than 0,
/// [`WireError::TrailingBytes`] if bytes remain after the body, or any malformed-input
/// variant of [`WireError`]; never panics.
pub fn decode_request(api: MirrorApi, version: i16, buf: &mut Bytes) -> Result<MirrorRequest, WireError> {
    Ok(match api {
        MirrorApi::CreateClusterMirror => MirrorRequest::CreateClusterMirror(decode_whole(buf, version)?),
        MirrorApi::DeleteClusterMirror => MirrorRequest::DeleteClusterMirror(decode_whole(buf, version)?),
        MirrorApi::ListClusterMirrors => MirrorRequest::ListClusterMirrors(decode_whole(buf, version)?),
        MirrorApi::DescribeClusterMirrors => MirrorRequest::DescribeClusterMirrors(decode_whole(buf, version)?),
        MirrorApi::StartMirrorTopics => MirrorRequest::StartMirrorTopics(decode_whole(buf, version)?),
        MirrorApi::StopMirrorTopics => MirrorRequest::StopMirrorTopics(decode_whole(buf, version)?),
        MirrorApi::PauseMirrorTopics => MirrorRequest::PauseMirrorTopics(decode_whole(buf, version)?),
        MirrorApi::ResumeMirrorTopics => MirrorRequest::ResumeMirrorTopics(decode_whole(buf, version)?),
    })
}

/// Encodes a mirror request body at `version` onto `out` (CLI / client side).
///
/// Errors: see [`MirrorMessage::encode_body`]; on error `out` is left as it was.
pub fn encode_request(req: &MirrorRequest, version: i16, out: &mut BytesMut) -> Result<(), WireError> {
    each_variant!(MirrorRequest, req, m => encode_whole(m, version, out))
}

/// Decodes a mirror response body (the bytes after the v1 response header) for `api` at
/// `version` (CLI / client side). The whole of `buf` must be the body.
///
/// Errors: as [`decode_request`].
pub fn decode_response(api: MirrorApi, version: i16, buf: &mut Bytes) -> Result<MirrorResponse, WireError> {
    Ok(match api {
        MirrorApi::CreateClusterMirror => MirrorResponse::CreateClusterMirror(decode_whole(buf, version)?),
        MirrorApi::DeleteClusterMirror => MirrorResponse::DeleteClusterMirror(decode_whole(buf, version)?),
        MirrorApi::ListClusterMirrors => MirrorResponse::ListClusterMirrors(decode_whole(buf, version)?),
        MirrorApi::DescribeClusterMirrors => MirrorResponse::DescribeClusterMirrors(decode_whole(buf, version)?),
        MirrorApi::StartMirrorTopics => MirrorResponse::StartMirrorTopics(decode_whole(buf, version)?),
        MirrorApi::StopMirrorTopics => MirrorResponse::StopMirrorTopics(decode_whole(buf, version)?),
        MirrorApi::PauseMirrorTopics => MirrorResponse::PauseMirrorTopics(decode_whole(buf, version)?),
        MirrorApi::ResumeMirrorTopics => MirrorResponse::ResumeMirrorTopics(decode_whole(buf, version)?),
    })
}

/// Encodes a mirror response body at `version` onto `out` (proxy side).
///
/// Errors: see [`MirrorMessage::encode_body`]; on error `out` is left as it was.
pub fn encode_response(resp: &MirrorResponse, version: i16, out: &mut BytesMut) -> Result<(), WireError> {
    each_variant!(MirrorResponse, resp, m => encode_whole(m, version, out))
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Shared assertions for the per-message tests.

    use std::collections::BTreeMap;
    use std::fmt::Debug;

    use bytes::Bytes;
    use kafka_protocol::protocol::{Decodable, Encodable, Message};

    use super::codec::put_uvarint;
    use super::{MirrorMessage, WireError, SUPPORTED_VERSIONS};

    /// An unknown tagged field (tag 9999) that must survive every round trip.
    pub fn unknown_tag() -> BTreeMap<i32, Bytes> {
        BTreeMap::from([(9999, Bytes::from_static(b"\x01\x02future-field"))])
    }

    /// Encodes `msg` at `version`, panicking on error (tests only).
    pub fn encode<T: MirrorMessage>(msg: &T, version: i16) -> Vec<u8> {
        let mut out = Vec::new();
        msg.encode_body(&mut out, version).expect("encode");
        out
    }

    /// encode → decode → equal at every supported version, through both our entry points and
    /// kafka-protocol's traits; versions outside the range are refused both ways.
    pub fn round_trip_all_versions<T>(msg: &T)
    where
        T: MirrorMessage + Encodable + Decodable + Message + PartialEq + Debug,
    {
        assert_eq!(T::VERSIONS, SUPPORTED_VERSIONS);
        for version in T::VERSIONS.min..=T::VERSIONS.max {
            let bytes = encode(msg, version);
            assert_eq!(msg.compute_size(version).unwrap(), bytes.len());

            let mut buf = Bytes::from(bytes.clone());
            let back = T::decode_body(&mut buf, version).expect("decode");
            assert_eq!(&back, msg, "{} v{version}", T::NAME);
            assert!(buf.is_empty(), "{} v{version}: bytes left over", T::NAME);

            let mut buf = Bytes::from(bytes.clone());
            let back = <T as Decodable>::decode(&mut buf, version).expect("decode");
            assert_eq!(&back, msg);
            let mut again = bytes::BytesMut::new();
            Encodable::encode(&back, &mut again, version).unwrap();
            assert_eq!(&again[..], &bytes[..], "re-encoding is byte-identical");
        }
        for bad in [T::VERSIONS.min - 1, T::VERSIONS.max + 1] {
            let mut out = Vec::new();
            assert!(matches!(msg.encode_body(&mut out, bad), Err(WireError::UnsupportedVersion { .. })));
            let mut buf = Bytes::from(encode(msg, T::VERSIONS.max));
            assert!(matches!(T::decode_body(&mut buf, bad), Err(WireError::UnsupportedVersion { .. })));
        }
    }

    /// Every strict prefix of the encoding is an error (the tag section is always last).
    pub fn truncations_fail<T: MirrorMessage + Debug>(msg: &T) {
        let bytes = encode(msg, 0);
        for len in 0..bytes.len() {
            let mut buf = Bytes::copy_from_slice(&bytes[..len]);
            let r = T::decode_body(&mut buf, 0);
            assert!(r.is_err(), "{}: prefix of {len} bytes decoded: {r:?}", T::NAME);
        }
    }

    /// Overwriting any single byte with hostile values never panics, and whatever still
    /// decodes re-encodes.
    pub fn mutations_never_panic<T: MirrorMessage>(msg: &T) {
        let bytes = encode(msg, 0);
        for pos in 0..bytes.len() {
            for v in [0x00u8, 0x01, 0x7f, 0x80, 0xfe, 0xff] {
                let mut m = bytes.clone();
                m[pos] = v;
                let mut buf = Bytes::from(m);
                if let Ok(decoded) = T::decode_body(&mut buf, 0) {
                    let mut out = Vec::new();
                    decoded.encode_body(&mut out, 0).expect("re-encode of decoded");
                }
            }
        }
    }

    /// `prefix` followed by an array count of `u32::MAX - 1` and a few bytes is refused with
    /// [`WireError::CountExceedsRemaining`] before anything is allocated.
    pub fn huge_count_fails<T: MirrorMessage + Debug>(prefix: &[u8]) {
        let mut bytes = prefix.to_vec();
        put_uvarint(&mut bytes, u32::MAX);
        bytes.extend_from_slice(&[0; 8]);
        let mut buf = Bytes::from(bytes);
        let r = T::decode_body(&mut buf, 0);
        assert!(matches!(r, Err(WireError::CountExceedsRemaining { .. })), "{}: {r:?}", T::NAME);
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    #[test]
    fn entry_points_dispatch_by_api() {
        let req = MirrorRequest::DeleteClusterMirror(DeleteClusterMirrorRequest {
            mirror_name: StrBytes::from_static_str("a-to-b"),
            state_offset: 42,
            unknown_tagged_fields: testutil::unknown_tag(),
        });
        let mut out = BytesMut::new();
        encode_request(&req, 0, &mut out).unwrap();
        let mut buf = out.freeze();
        let back = decode_request(MirrorApi::DeleteClusterMirror, 0, &mut buf).unwrap();
        assert_eq!(back, req);
        assert_eq!(back.api(), MirrorApi::DeleteClusterMirror);

        let resp = MirrorResponse::StopMirrorTopics(StopMirrorTopicsResponse {
            error_code: MirrorErrorCode::UnknownClusterMirror.code(),
            ..Default::default()
        });
        let mut out = BytesMut::new();
        encode_response(&resp, 0, &mut out).unwrap();
        let mut buf = out.freeze();
        let back = decode_response(MirrorApi::StopMirrorTopics, 0, &mut buf).unwrap();
        assert_eq!(back, resp);
        assert_eq!(back.error_code(), 137);
    }

    #[test]
    fn entry_points_reject_trailing_bytes_and_bad_versions() {
        let mut out = BytesMut::new();
        let req = MirrorRequest::ListClusterMirrors(ListClusterMirrorsRequest::default());
        encode_request(&req, 0, &mut out).unwrap();
        out.extend_from_slice(&[0]);
        let mut buf = out.freeze();
        assert!(matches!(
            decode_request(MirrorApi::ListClusterMirrors, 0, &mut buf),
            Err(WireError::TrailingBytes { .. })
        ));

        let mut out = BytesMut::from(&b"keep"[..]);
        assert!(matches!(encode_request(&req, 1, &mut out), Err(WireError::UnsupportedVersion { .. })));
        assert_eq!(&out[..], b"keep", "output untouched on error");
    }

    #[test]
    fn every_api_decodes_an_empty_body_as_an_error() {
        for api in MirrorApi::ALL {
            assert!(decode_request(api, 0, &mut Bytes::new()).is_err(), "{api:?}");
            assert!(decode_response(api, 0, &mut Bytes::new()).is_err(), "{api:?}");
        }
    }
}
