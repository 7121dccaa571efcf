//! StopMirrorTopics (KIP-1279 §3.1; prototype api key 96, listeners broker + controller;
//! formerly RemoveTopicsFromMirror): failover / migration cut-over — the topics' partitions go
//! STOPPING → STOPPED and become writable. Schema: showuon/kafka
//! `clients/src/main/resources/common/message/StopMirrorTopics{Request,Response}.json`
//! (validVersions 0, flexibleVersions 0+).

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use super::codec::*;
use super::{MirrorMessage, WireError};

/// Tag of the request's `Patterns` field.
pub const PATTERNS_TAG: u32 = 0;

/// StopMirrorTopicsRequest body, version 0.
#[derive(Debug, Clone, PartialEq)]
pub struct StopMirrorTopicsRequest {
    /// `MirrorName`: the cluster mirror name.
    pub mirror_name: StrBytes,
    /// `Topics`: the topics to stop (`TopicName` is the prototype's `mapKey`; kept as a list).
    pub topics: Vec<TopicMetadata>,
    /// `Patterns` (tagged, tag 0): topic patterns to remove from `mirror.topics.include` or add
    /// to `mirror.topics.exclude` (the KIP thread, MM8, finds this meaning unclear). Written
    /// only when non-empty.
    pub patterns: Vec<StrBytes>,
    /// `StateOffset` (default -1): the per-topic cluster-metadata offset at which the broker
    /// validated the partition-state preconditions; -1 skips validation. A mismatch is
    /// `INVALID_CLUSTER_MIRROR_STATES` (145).
    pub state_offset: i64,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl Default for StopMirrorTopicsRequest {
    fn default() -> Self {
        Self {
            mirror_name: StrBytes::default(),
            topics: Vec::new(),
            patterns: Vec::new(),
            state_offset: -1,
            unknown_tagged_fields: BTreeMap::new(),
        }
    }
}

/// One `Topics` entry of [`StopMirrorTopicsRequest`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopicMetadata {
    /// `TopicName`: the topic to stop.
    pub topic_name: TopicName,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// StopMirrorTopicsResponse body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StopMirrorTopicsResponse {
    /// `ThrottleTimeMs`: how long the request was throttled for a quota, in ms (0 if not).
    pub throttle_time_ms: i32,
    /// `ErrorCode`: the top-level error, e.g. `UNKNOWN_CLUSTER_MIRROR` (137); 0 if none.
    pub error_code: i16,
    /// `ErrorMessage` (default null): the top-level error message.
    pub error_message: Option<StrBytes>,
    /// `Topics`: per-topic results.
    pub topics: Vec<TopicResult>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// One `Topics` entry of [`StopMirrorTopicsResponse`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopicResult {
    /// `Name`: the topic name.
    pub name: TopicName,
    /// `ErrorCode`: 0, or e.g. `TOPIC_NOT_IN_CLUSTER_MIRROR` (139),
    /// `MIRROR_TOPIC_BEING_STOPPED` (142), `INVALID_CLUSTER_MIRROR_STATES` (145).
    pub error_code: i16,
    /// `ErrorMessage` (default null): the error message.
    pub error_message: Option<StrBytes>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl TopicMetadata {
    /// A one-byte string and an empty tag section.
    const MIN_BYTES: usize = 2;

    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            topic_name: get_topic_name(buf, "Topics.TopicName")?,
            unknown_tagged_fields: get_tagged_fields(buf, "Topics", |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.topic_name, "Topics.TopicName")?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, "Topics")
    }
}

impl TopicResult {
    /// A one-byte string, an int16, a null string and an empty tag section.
    const MIN_BYTES: usize = 5;

    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            name: get_topic_name(buf, "Topics.Name")?,
            error_code: get_i16(buf, "Topics.ErrorCode")?,
            error_message: get_compact_nullable_string(buf, "Topics.ErrorMessage")?,
            unknown_tagged_fields: get_tagged_fields(buf, "Topics", |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.name, "Topics.Name")?;
        buf.put_i16(self.error_code);
        put_compact_nullable_string(buf, self.error_message.as_deref(), "Topics.ErrorMessage")?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, "Topics")
    }
}

impl StopMirrorTopicsRequest {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        let mirror_name = get_compact_string(buf, "MirrorName")?;
        let topics = get_compact_array(buf, TopicMetadata::MIN_BYTES, "Topics", TopicMetadata::read)?;
        let state_offset = get_i64(buf, "StateOffset")?;
        let mut patterns = Vec::new();
        let unknown_tagged_fields = get_tagged_fields(buf, Self::NAME, |tag, payload| {
            if tag != PATTERNS_TAG {
                return Ok(false);
            }
            patterns = decode_tagged_payload(payload, "Patterns", |b| {
                get_compact_array(b, 1, "Patterns", |b| get_compact_string(b, "Patterns"))
            })?;
            Ok(true)
        })?;
        Ok(Self { mirror_name, topics, patterns, state_offset, unknown_tagged_fields })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.mirror_name, "MirrorName")?;
        put_compact_array(buf, &self.topics, "Topics", |b, t| t.write(b))?;
        buf.put_i64(self.state_offset);
        let mut known = Vec::new();
        if !self.patterns.is_empty() {
            known.push((
                PATTERNS_TAG,
                tagged_payload(|b| {
                    put_compact_array(b, &self.patterns, "Patterns", |b, p| put_compact_string(b, p, "Patterns"))
                })?,
            ));
        }
        put_tagged_fields(buf, &known, &self.unknown_tagged_fields, Self::NAME)
    }
}

impl StopMirrorTopicsResponse {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_compact_nullable_string(buf, "ErrorMessage")?,
            topics: get_compact_array(buf, TopicResult::MIN_BYTES, "Topics", TopicResult::read)?,
            unknown_tagged_fields: get_tagged_fields(buf, Self::NAME, |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_compact_nullable_string(buf, self.error_message.as_deref(), "ErrorMessage")?;
        put_compact_array(buf, &self.topics, "Topics", |b, t| t.write(b))?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, Self::NAME)
    }
}

mirror_message!(StopMirrorTopicsRequest, "StopMirrorTopicsRequest", StopMirrorTopics, request);
mirror_message!(StopMirrorTopicsResponse, "StopMirrorTopicsResponse", StopMirrorTopics, response);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mirror::testutil::*;

    fn topic(name: &'static str) -> TopicName {
        TopicName(StrBytes::from_static_str(name))
    }

    fn request() -> StopMirrorTopicsRequest {
        StopMirrorTopicsRequest {
            mirror_name: StrBytes::from_static_str("a-to-b"),
            topics: vec![
                TopicMetadata { topic_name: topic("orders"), unknown_tagged_fields: unknown_tag() },
                TopicMetadata { topic_name: topic("payments"), ..Default::default() },
            ],
            patterns: vec![StrBytes::from_static_str("logs.*")],
            state_offset: 812,
            unknown_tagged_fields: unknown_tag(),
        }
    }

    fn response() -> StopMirrorTopicsResponse {
        StopMirrorTopicsResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            topics: vec![
                TopicResult { name: topic("orders"), unknown_tagged_fields: unknown_tag(), ..Default::default() },
                TopicResult {
                    name: topic("payments"),
                    error_code: 139,
                    error_message: Some(StrBytes::from_static_str("not in mirror")),
                    ..Default::default()
                },
            ],
            unknown_tagged_fields: unknown_tag(),
        }
    }

    #[test]
    fn round_trips() {
        round_trip_all_versions(&request());
        round_trip_all_versions(&StopMirrorTopicsRequest::default());
        round_trip_all_versions(&response());
        round_trip_all_versions(&StopMirrorTopicsResponse::default());
    }

    #[test]
    fn min_bytes_match_the_smallest_encoding() {
        let mut v = Vec::new();
        TopicMetadata::default().write(&mut v).unwrap();
        assert_eq!(v.len(), TopicMetadata::MIN_BYTES);
        let mut v = Vec::new();
        TopicResult::default().write(&mut v).unwrap();
        assert_eq!(v.len(), TopicResult::MIN_BYTES);
    }

    #[test]
    fn patterns_tag_is_written_after_the_fixed_fields() {
        let req = StopMirrorTopicsRequest {
            mirror_name: StrBytes::from_static_str("m"),
            patterns: vec![StrBytes::from_static_str("x")],
            state_offset: -1,
            ..Default::default()
        };
        let mut want = vec![2, b'm', 1];
        want.extend_from_slice(&[0xff; 8]);
        want.extend_from_slice(&[1, 0, 3, 2, 2, b'x']);
        assert_eq!(encode(&req, 0), want);
    }

    #[test]
    fn hostile_input_is_an_error() {
        truncations_fail::<StopMirrorTopicsRequest>(&request());
        truncations_fail::<StopMirrorTopicsResponse>(&response());
        mutations_never_panic::<StopMirrorTopicsRequest>(&request());
        mutations_never_panic::<StopMirrorTopicsResponse>(&response());
        huge_count_fails::<StopMirrorTopicsRequest>(&[2, b'm']);
        huge_count_fails::<StopMirrorTopicsResponse>(&[0, 0, 0, 0, 0, 0, 0]);
    }
}
