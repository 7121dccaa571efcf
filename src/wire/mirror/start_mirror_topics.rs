//! StartMirrorTopics (KIP-1279 §3.1; prototype api key 95, listeners broker + controller;
//! formerly AddTopicsToMirror): merges regex patterns into the mirror's `topics.include` /
//! `topics.exclude`; matching source topics are created on the destination with the source
//! topic ID and start mirroring. Schema: showuon/kafka
//! `clients/src/main/resources/common/message/StartMirrorTopics{Request,Response}.json`
//! (validVersions 0, flexibleVersions 0+).

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::protocol::StrBytes;

use super::codec::*;
use super::{MirrorMessage, WireError};

/// Tag of the request's `ExcludePatterns` field.
pub const EXCLUDE_PATTERNS_TAG: u32 = 0;
/// Tag of mirrorgate's start position extension (COMPACT_STRING: `earliest`, `latest` or a
/// timestamp in ms); clients that do not know it never send it.
pub const START_POSITION_TAG: u32 = 10_000;

/// StartMirrorTopicsRequest body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StartMirrorTopicsRequest {
    /// `MirrorName`: the cluster mirror name.
    pub mirror_name: StrBytes,
    /// `IncludePatterns`: regex (RE2/J) patterns to add to `topics.include`; `topics.exclude`
    /// takes precedence. A bad pattern is `INVALID_REGULAR_EXPRESSION` (128).
    pub include_patterns: Vec<StrBytes>,
    /// `ExcludePatterns` (tagged, tag 0): regex patterns to add to `topics.exclude` (these win
    /// over `topics.include`). Written only when non-empty.
    pub exclude_patterns: Vec<StrBytes>,
    /// `TimeoutMs`: how long to wait before timing out the request, in ms.
    pub timeout_ms: i32,
    /// mirrorgate extension (tagged, tag [`START_POSITION_TAG`]): where newly started topics
    /// begin copying: `earliest`, `latest` or a timestamp in ms. Written only when set.
    pub start_position: Option<StrBytes>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// StartMirrorTopicsResponse body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StartMirrorTopicsResponse {
    /// `ThrottleTimeMs`: how long the request was throttled for a quota, in ms (0 if not).
    pub throttle_time_ms: i32,
    /// `ErrorCode`: 0, or e.g. `UNKNOWN_CLUSTER_MIRROR` (137),
    /// `TOPIC_ALREADY_IN_CLUSTER_MIRROR` (138), `TOPIC_ALREADY_EXISTS` (36),
    /// `INVALID_REGULAR_EXPRESSION` (128), `CLUSTER_MIRROR_AUTHORIZATION_FAILED` (144).
    pub error_code: i16,
    /// `ErrorMessage` (default null): the top-level error message.
    pub error_message: Option<StrBytes>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl StartMirrorTopicsRequest {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        let mirror_name = get_compact_string(buf, "MirrorName")?;
        let include_patterns =
            get_compact_array(buf, 1, "IncludePatterns", |b| get_compact_string(b, "IncludePatterns"))?;
        let timeout_ms = get_i32(buf, "TimeoutMs")?;
        let mut exclude_patterns = Vec::new();
        let mut start_position = None;
        let unknown_tagged_fields = get_tagged_fields(buf, Self::NAME, |tag, payload| {
            if tag == START_POSITION_TAG {
                start_position =
                    Some(decode_tagged_payload(payload, "StartPosition", |b| get_compact_string(b, "StartPosition"))?);
                return Ok(true);
            }
            if tag != EXCLUDE_PATTERNS_TAG {
                return Ok(false);
            }
            exclude_patterns = decode_tagged_payload(payload, "ExcludePatterns", |b| {
                get_compact_array(b, 1, "ExcludePatterns", |b| get_compact_string(b, "ExcludePatterns"))
            })?;
            Ok(true)
        })?;
        Ok(Self { mirror_name, include_patterns, exclude_patterns, timeout_ms, start_position, unknown_tagged_fields })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.mirror_name, "MirrorName")?;
        put_compact_array(buf, &self.include_patterns, "IncludePatterns", |b, p| {
            put_compact_string(b, p, "IncludePatterns")
        })?;
        buf.put_i32(self.timeout_ms);
        let mut known = Vec::new();
        if !self.exclude_patterns.is_empty() {
            known.push((
                EXCLUDE_PATTERNS_TAG,
                tagged_payload(|b| {
                    put_compact_array(b, &self.exclude_patterns, "ExcludePatterns", |b, p| {
                        put_compact_string(b, p, "ExcludePatterns")
                    })
                })?,
            ));
        }
        if let Some(position) = &self.start_position {
            known.push((START_POSITION_TAG, tagged_payload(|b| put_compact_string(b, position, "StartPosition"))?));
        }
        put_tagged_fields(buf, &known, &self.unknown_tagged_fields, Self::NAME)
    }
}

impl StartMirrorTopicsResponse {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_compact_nullable_string(buf, "ErrorMessage")?,
            unknown_tagged_fields: get_tagged_fields(buf, Self::NAME, |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_compact_nullable_string(buf, self.error_message.as_deref(), "ErrorMessage")?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, Self::NAME)
    }
}

mirror_message!(StartMirrorTopicsRequest, "StartMirrorTopicsRequest", StartMirrorTopics, request);
mirror_message!(StartMirrorTopicsResponse, "StartMirrorTopicsResponse", StartMirrorTopics, response);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mirror::testutil::*;

    fn request() -> StartMirrorTopicsRequest {
        StartMirrorTopicsRequest {
            mirror_name: StrBytes::from_static_str("a-to-b"),
            include_patterns: vec![StrBytes::from_static_str("orders.*"), StrBytes::from_static_str("payments")],
            exclude_patterns: vec![StrBytes::from_static_str("orders\\.tmp.*")],
            timeout_ms: 30_000,
            start_position: Some(StrBytes::from_static_str("latest")),
            unknown_tagged_fields: unknown_tag(),
        }
    }

    fn response() -> StartMirrorTopicsResponse {
        StartMirrorTopicsResponse {
            throttle_time_ms: 1,
            error_code: 138,
            error_message: Some(StrBytes::from_static_str("orders is in mirror x")),
            unknown_tagged_fields: unknown_tag(),
        }
    }

    #[test]
    fn round_trips() {
        round_trip_all_versions(&request());
        round_trip_all_versions(&StartMirrorTopicsRequest::default());
        round_trip_all_versions(&response());
        round_trip_all_versions(&StartMirrorTopicsResponse::default());
    }

    #[test]
    fn golden_request_with_exclude_tag() {
        let req = StartMirrorTopicsRequest {
            mirror_name: StrBytes::from_static_str("m"),
            include_patterns: vec![],
            exclude_patterns: vec![StrBytes::from_static_str("x")],
            timeout_ms: 1,
            ..Default::default()
        };
        // "m" | [] | 1 | 1 tagged field: tag 0, size 3, ["x"]
        assert_eq!(encode(&req, 0), vec![2, b'm', 1, 0, 0, 0, 1, 1, 0, 3, 2, 2, b'x']);
    }

    #[test]
    fn hostile_input_is_an_error() {
        truncations_fail::<StartMirrorTopicsRequest>(&request());
        truncations_fail::<StartMirrorTopicsResponse>(&response());
        mutations_never_panic::<StartMirrorTopicsRequest>(&request());
        mutations_never_panic::<StartMirrorTopicsResponse>(&response());
        huge_count_fails::<StartMirrorTopicsRequest>(&[2, b'm']);
    }
}
