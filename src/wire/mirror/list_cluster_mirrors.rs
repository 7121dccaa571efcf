//! ListClusterMirrors (KIP-1279 §3.1; prototype api key 98, listener broker): lists the
//! destination's cluster mirrors; also sent destination → source for mirror-loop detection.
//! Schema: showuon/kafka
//! `clients/src/main/resources/common/message/ListClusterMirrors{Request,Response}.json`
//! (validVersions 0, flexibleVersions 0+).

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use super::codec::*;
use super::{MirrorMessage, WireError};

/// ListClusterMirrorsRequest body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListClusterMirrorsRequest {
    /// `IncludeTopicNames` (default false): if true the response lists each mirror's topics.
    pub include_topic_names: bool,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// ListClusterMirrorsResponse body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListClusterMirrorsResponse {
    /// `ThrottleTimeMs`: how long the request was throttled for a quota, in ms (0 if not).
    pub throttle_time_ms: i32,
    /// `ErrorCode`: the top-level error code, 0 if none (e.g.
    /// `CLUSTER_MIRROR_AUTHORIZATION_FAILED` 144).
    pub error_code: i16,
    /// `ErrorMessage` (default null): the top-level error message.
    pub error_message: Option<StrBytes>,
    /// `Mirrors`: one entry per mirror.
    pub mirrors: Vec<ListedMirror>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// One `Mirrors` entry of [`ListClusterMirrorsResponse`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListedMirror {
    /// `MirrorName`: the cluster mirror name.
    pub mirror_name: StrBytes,
    /// `SourceBootstrap`: the source cluster's `bootstrap.servers`.
    pub source_bootstrap: StrBytes,
    /// `SourceClusterId` (default ""): the source cluster ID, empty if not yet resolved.
    pub source_cluster_id: StrBytes,
    /// `TopicCount` (default 0): topics configured for this mirror; 0 = empty mirror.
    pub topic_count: i32,
    /// `TopicNames` (nullable, default null): the mirror's topics, or null if not requested.
    pub topic_names: Option<Vec<TopicName>>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl ListClusterMirrorsRequest {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            include_topic_names: get_bool(buf, "IncludeTopicNames")?,
            unknown_tagged_fields: get_tagged_fields(buf, Self::NAME, |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_bool(buf, self.include_topic_names);
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, Self::NAME)
    }
}

impl ListedMirror {
    /// Three one-byte strings, an int32, a null array and an empty tag section.
    const MIN_BYTES: usize = 9;

    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            mirror_name: get_compact_string(buf, "Mirrors.MirrorName")?,
            source_bootstrap: get_compact_string(buf, "Mirrors.SourceBootstrap")?,
            source_cluster_id: get_compact_string(buf, "Mirrors.SourceClusterId")?,
            topic_count: get_i32(buf, "Mirrors.TopicCount")?,
            topic_names: get_compact_nullable_array(buf, 1, "Mirrors.TopicNames", |b| {
                get_topic_name(b, "Mirrors.TopicNames")
            })?,
            unknown_tagged_fields: get_tagged_fields(buf, "Mirrors", |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.mirror_name, "Mirrors.MirrorName")?;
        put_compact_string(buf, &self.source_bootstrap, "Mirrors.SourceBootstrap")?;
        put_compact_string(buf, &self.source_cluster_id, "Mirrors.SourceClusterId")?;
        buf.put_i32(self.topic_count);
        put_compact_nullable_array(buf, self.topic_names.as_deref(), "Mirrors.TopicNames", |b, t| {
            put_compact_string(b, t, "Mirrors.TopicNames")
        })?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, "Mirrors")
    }
}

impl ListClusterMirrorsResponse {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_compact_nullable_string(buf, "ErrorMessage")?,
            mirrors: get_compact_array(buf, ListedMirror::MIN_BYTES, "Mirrors", ListedMirror::read)?,
            unknown_tagged_fields: get_tagged_fields(buf, Self::NAME, |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_compact_nullable_string(buf, self.error_message.as_deref(), "ErrorMessage")?;
        put_compact_array(buf, &self.mirrors, "Mirrors", |b, m| m.write(b))?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, Self::NAME)
    }
}

mirror_message!(ListClusterMirrorsRequest, "ListClusterMirrorsRequest", ListClusterMirrors, request);
mirror_message!(ListClusterMirrorsResponse, "ListClusterMirrorsResponse", ListClusterMirrors, response);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mirror::testutil::*;

    fn response() -> ListClusterMirrorsResponse {
        ListClusterMirrorsResponse {
            throttle_time_ms: 3,
            error_code: 0,
            error_message: None,
            mirrors: vec![
                ListedMirror {
                    mirror_name: StrBytes::from_static_str("a-to-b"),
                    source_bootstrap: StrBytes::from_static_str("a1:9092,a2:9092"),
                    source_cluster_id: StrBytes::from_static_str("MkU3OEVBNTcwNTJENDM2Qg"),
                    topic_count: 2,
                    topic_names: Some(vec![
                        TopicName(StrBytes::from_static_str("orders")),
                        TopicName(StrBytes::from_static_str("payments")),
                    ]),
                    unknown_tagged_fields: unknown_tag(),
                },
                ListedMirror {
                    mirror_name: StrBytes::from_static_str("new-a-to-b"),
                    source_bootstrap: StrBytes::from_static_str("a1:9092"),
                    ..Default::default()
                },
            ],
            unknown_tagged_fields: unknown_tag(),
        }
    }

    #[test]
    fn round_trips() {
        let req = ListClusterMirrorsRequest { include_topic_names: true, unknown_tagged_fields: unknown_tag() };
        round_trip_all_versions(&req);
        round_trip_all_versions(&ListClusterMirrorsRequest::default());
        round_trip_all_versions(&response());
        round_trip_all_versions(&ListClusterMirrorsResponse::default());
    }

    #[test]
    fn min_bytes_match_the_smallest_encoding() {
        let mut v = Vec::new();
        ListedMirror::default().write(&mut v).unwrap();
        assert_eq!(v.len(), ListedMirror::MIN_BYTES);
    }

    #[test]
    fn null_and_empty_topic_names_differ() {
        let mut r = response();
        r.mirrors[0].topic_names = Some(vec![]);
        round_trip_all_versions(&r);
        r.mirrors[0].topic_names = None;
        round_trip_all_versions(&r);
    }

    #[test]
    fn hostile_input_is_an_error() {
        truncations_fail::<ListClusterMirrorsResponse>(&response());
        mutations_never_panic::<ListClusterMirrorsResponse>(&response());
        // ThrottleTimeMs, ErrorCode, null ErrorMessage, then a Mirrors count of u32::MAX - 1.
        huge_count_fails::<ListClusterMirrorsResponse>(&[0, 0, 0, 0, 0, 0, 0]);
        // One mirror with three empty strings and a count, then a TopicNames count.
        huge_count_fails::<ListClusterMirrorsResponse>(&[0, 0, 0, 0, 0, 0, 0, 2, 1, 1, 1, 0, 0, 0, 0]);
    }
}
