//! PauseMirrorTopics (KIP-1279 §3.1; prototype api key 102, listeners broker + controller):
//! stops fetching for the topics **without** making them writable (maintenance); partitions go
//! PAUSING → PAUSED. Schema: showuon/kafka
//! `clients/src/main/resources/common/message/PauseMirrorTopics{Request,Response}.json`
//! (validVersions 0, flexibleVersions 0+).

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use super::codec::*;
use super::{MirrorMessage, WireError};

/// PauseMirrorTopicsRequest body, version 0.
#[derive(Debug, Clone, PartialEq)]
pub struct PauseMirrorTopicsRequest {
    /// `MirrorName`: the cluster mirror name.
    pub mirror_name: StrBytes,
    /// `Topics`: the topics to pause (`TopicName` is the prototype's `mapKey`; kept as a list).
    pub topics: Vec<TopicMetadata>,
    /// `StateOffset` (default -1): the per-topic cluster-metadata offset at which the broker
    /// validated the partition-state preconditions; -1 skips validation.
    pub state_offset: i64,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl Default for PauseMirrorTopicsRequest {
    fn default() -> Self {
        Self {
            mirror_name: StrBytes::default(),
            topics: Vec::new(),
            state_offset: -1,
            unknown_tagged_fields: BTreeMap::new(),
        }
    }
}

/// One `Topics` entry of [`PauseMirrorTopicsRequest`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopicMetadata {
    /// `TopicName`: the topic to pause.
    pub topic_name: TopicName,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// PauseMirrorTopicsResponse body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PauseMirrorTopicsResponse {
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

/// One `Topics` entry of [`PauseMirrorTopicsResponse`]. (The prototype names the field
/// `TopicName` here but `Name` in Stop/Resume; the wire format is the same.)
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopicResult {
    /// `TopicName`: the topic name.
    pub topic_name: TopicName,
    /// `ErrorCode`: 0, or e.g. `TOPIC_NOT_IN_CLUSTER_MIRROR` (139),
    /// `MIRROR_TOPIC_ALREADY_PAUSED` (140), `MIRROR_TOPIC_BEING_STOPPED` (142).
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
            topic_name: get_topic_name(buf, "Topics.TopicName")?,
            error_code: get_i16(buf, "Topics.ErrorCode")?,
            error_message: get_compact_nullable_string(buf, "Topics.ErrorMessage")?,
            unknown_tagged_fields: get_tagged_fields(buf, "Topics", |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.topic_name, "Topics.TopicName")?;
        buf.put_i16(self.error_code);
        put_compact_nullable_string(buf, self.error_message.as_deref(), "Topics.ErrorMessage")?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, "Topics")
    }
}

impl PauseMirrorTopicsRequest {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            mirror_name: get_compact_string(buf, "MirrorName")?,
            topics: get_compact_array(buf, TopicMetadata::MIN_BYTES, "Topics", TopicMetadata::read)?,
            state_offset: get_i64(buf, "StateOffset")?,
            unknown_tagged_fields: get_tagged_fields(buf, Self::NAME, |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.mirror_name, "MirrorName")?;
        put_compact_array(buf, &self.topics, "Topics", |b, t| t.write(b))?;
        buf.put_i64(self.state_offset);
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, Self::NAME)
    }
}

impl PauseMirrorTopicsResponse {
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

mirror_message!(PauseMirrorTopicsRequest, "PauseMirrorTopicsRequest", PauseMirrorTopics, request);
mirror_message!(PauseMirrorTopicsResponse, "PauseMirrorTopicsResponse", PauseMirrorTopics, response);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mirror::testutil::*;

    fn topic(name: &'static str) -> TopicName {
        TopicName(StrBytes::from_static_str(name))
    }

    fn request() -> PauseMirrorTopicsRequest {
        PauseMirrorTopicsRequest {
            mirror_name: StrBytes::from_static_str("a-to-b"),
            topics: vec![TopicMetadata { topic_name: topic("orders"), unknown_tagged_fields: unknown_tag() }],
            state_offset: 77,
            unknown_tagged_fields: unknown_tag(),
        }
    }

    fn response() -> PauseMirrorTopicsResponse {
        PauseMirrorTopicsResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            topics: vec![TopicResult {
                topic_name: topic("orders"),
                error_code: 140,
                error_message: Some(StrBytes::from_static_str("already paused")),
                unknown_tagged_fields: unknown_tag(),
            }],
            unknown_tagged_fields: unknown_tag(),
        }
    }

    #[test]
    fn round_trips() {
        round_trip_all_versions(&request());
        round_trip_all_versions(&PauseMirrorTopicsRequest::default());
        round_trip_all_versions(&response());
        round_trip_all_versions(&PauseMirrorTopicsResponse::default());
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
    fn hostile_input_is_an_error() {
        truncations_fail::<PauseMirrorTopicsRequest>(&request());
        truncations_fail::<PauseMirrorTopicsResponse>(&response());
        mutations_never_panic::<PauseMirrorTopicsRequest>(&request());
        mutations_never_panic::<PauseMirrorTopicsResponse>(&response());
        huge_count_fails::<PauseMirrorTopicsRequest>(&[2, b'm']);
        huge_count_fails::<PauseMirrorTopicsResponse>(&[0, 0, 0, 0, 0, 0, 0]);
    }
}
