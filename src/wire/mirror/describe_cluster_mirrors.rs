//! DescribeClusterMirrors (KIP-1279 §3.1; prototype api key 99, listener broker): per-mirror,
//! per-partition state and lag for admins, and — with the tagged `ClusterId` and
//! `LastMirrorEpochLookups` — the failback lookup a destination sends to its old source for the
//! last mirror epoch. Schema: showuon/kafka
//! `clients/src/main/resources/common/message/DescribeClusterMirrors{Request,Response}.json`
//! (validVersions 0, flexibleVersions 0+).
//!
//! Deviation: the request follows the stored prototype spec (nullable `MirrorNames`,
//! `IncludeAuthorizedOperations`, tagged `ClusterId` / `LastMirrorEpochLookups`). The KIP's
//! latest mail (msg158057) and the response's field docs also mention `IncludeMirrorState` /
//! `IncludeMirrorOffset` request flags (and a prototype test filters by topic name); no
//! stored prototype JSON carries them, so they are not modelled. A peer that sends them as
//! tagged fields still round-trips via `unknown_tagged_fields`; as non-tagged fields it would
//! fail to decode here.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use super::codec::*;
use super::{MirrorMessage, WireError};

/// Tag of the request's `ClusterId` field.
pub const CLUSTER_ID_TAG: u32 = 0;
/// Tag of the request's `LastMirrorEpochLookups` field.
pub const LAST_MIRROR_EPOCH_LOOKUPS_TAG: u32 = 1;

/// DescribeClusterMirrorsRequest body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DescribeClusterMirrorsRequest {
    /// `MirrorNames` (nullable, default null): the mirrors to describe; null (or, per the
    /// prototype's earlier wording, empty) means all mirrors.
    pub mirror_names: Option<Vec<StrBytes>>,
    /// `IncludeAuthorizedOperations` (default false): fill `AuthorizedOperations`.
    pub include_authorized_operations: bool,
    /// `ClusterId` (tagged, tag 0, nullable, default null): the requesting cluster's own ID,
    /// for the last-mirror-epoch lookup on failback. Written only when non-null.
    pub cluster_id: Option<StrBytes>,
    /// `LastMirrorEpochLookups` (tagged, tag 1): partitions whose last mirror epoch the
    /// requester wants. Written only when non-empty.
    pub last_mirror_epoch_lookups: Vec<LastMirrorEpochLookup>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// One `LastMirrorEpochLookups` entry of [`DescribeClusterMirrorsRequest`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LastMirrorEpochLookup {
    /// `TopicId`: the topic ID (identical on source and destination).
    pub topic_id: KafkaUuid,
    /// `Partitions`: the partition indexes.
    pub partitions: Vec<i32>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// DescribeClusterMirrorsResponse body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DescribeClusterMirrorsResponse {
    /// `ThrottleTimeMs`: how long the request was throttled for a quota, in ms (0 if not).
    pub throttle_time_ms: i32,
    /// `ErrorCode`: the top-level error code, 0 if none.
    pub error_code: i16,
    /// `ErrorMessage` (default null): the top-level error message.
    pub error_message: Option<StrBytes>,
    /// `Mirrors`: each described mirror.
    pub mirrors: Vec<DescribedMirror>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// One `Mirrors` entry of [`DescribeClusterMirrorsResponse`].
#[derive(Debug, Clone, PartialEq)]
pub struct DescribedMirror {
    /// `ErrorCode`: per-mirror error, e.g. `UNKNOWN_CLUSTER_MIRROR` (137) or
    /// `CLUSTER_MIRROR_AUTHORIZATION_FAILED` (144); 0 if none.
    pub error_code: i16,
    /// `ErrorMessage` (default null): the per-mirror error message.
    pub error_message: Option<StrBytes>,
    /// `MirrorName`: the cluster mirror name.
    pub mirror_name: StrBytes,
    /// `SourceBootstrap` (nullable, default null): the source `bootstrap.servers`.
    pub source_bootstrap: Option<StrBytes>,
    /// `SourceClusterId` (nullable, default null): the source cluster ID, null until resolved.
    pub source_cluster_id: Option<StrBytes>,
    /// `AuthorizedOperations` (default `i32::MIN` = not requested): 32-bit bitfield of the
    /// ACL operations the caller may perform on this mirror.
    pub authorized_operations: i32,
    /// `Topics`: per-topic results.
    pub topics: Vec<TopicResult>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl Default for DescribedMirror {
    fn default() -> Self {
        Self {
            error_code: 0,
            error_message: None,
            mirror_name: StrBytes::default(),
            source_bootstrap: None,
            source_cluster_id: None,
            authorized_operations: i32::MIN,
            topics: Vec::new(),
            unknown_tagged_fields: BTreeMap::new(),
        }
    }
}

/// One `Topics` entry of [`DescribedMirror`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopicResult {
    /// `TopicName`: the mirror topic's name (same on source and destination).
    pub topic_name: TopicName,
    /// `Partitions`: per-partition details.
    pub partitions: Vec<PartitionDetail>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// One `Partitions` entry of [`TopicResult`].
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionDetail {
    /// `PartitionIndex`: the partition index.
    pub partition_index: i32,
    /// `StateValue`: the [`MirrorPartitionState`](super::MirrorPartitionState) name, or
    /// `UNKNOWN` if not actively mirroring or state was not requested.
    pub state_value: StrBytes,
    /// `ErrorMessage` (default null): the failure reason in `FAILED`, else null.
    pub error_message: Option<StrBytes>,
    /// `RetryAttempt` (default 0): retry count in `FAILED`; 0 if not failed, -1 non-retryable.
    pub retry_attempt: i16,
    /// `SourceOffset` (default -1): the source partition's high watermark (offset), -1 if
    /// not actively mirroring or not requested.
    pub source_offset: i64,
    /// `DestinationOffset` (default -1): the destination log end offset, -1 if n/a.
    pub destination_offset: i64,
    /// `LastMirrorEpoch` (default -1): maximum last mirror epoch (leader epoch) across the
    /// requested mirrors, -1 if not found.
    pub last_mirror_epoch: i32,
    /// `LastMirrorOffset` (default -1): maximum last mirror offset, -1 if not found.
    pub last_mirror_offset: i64,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl Default for PartitionDetail {
    fn default() -> Self {
        Self {
            partition_index: 0,
            state_value: StrBytes::default(),
            error_message: None,
            retry_attempt: 0,
            source_offset: -1,
            destination_offset: -1,
            last_mirror_epoch: -1,
            last_mirror_offset: -1,
            unknown_tagged_fields: BTreeMap::new(),
        }
    }
}

impl LastMirrorEpochLookup {
    /// A UUID, an empty array and an empty tag section.
    const MIN_BYTES: usize = 18;

    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            topic_id: get_uuid(buf, "LastMirrorEpochLookups.TopicId")?,
            partitions: get_compact_array(buf, 4, "LastMirrorEpochLookups.Partitions", |b| {
                get_i32(b, "LastMirrorEpochLookups.Partitions")
            })?,
            unknown_tagged_fields: get_tagged_fields(buf, "LastMirrorEpochLookups", |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_uuid(buf, &self.topic_id);
        put_compact_array(buf, &self.partitions, "LastMirrorEpochLookups.Partitions", |b, p| {
            b.put_i32(*p);
            Ok(())
        })?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, "LastMirrorEpochLookups")
    }
}

impl DescribeClusterMirrorsRequest {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        let mirror_names = get_compact_nullable_array(buf, 1, "MirrorNames", |b| get_compact_string(b, "MirrorNames"))?;
        let include_authorized_operations = get_bool(buf, "IncludeAuthorizedOperations")?;
        let mut cluster_id = None;
        let mut last_mirror_epoch_lookups = Vec::new();
        let unknown_tagged_fields = get_tagged_fields(buf, Self::NAME, |tag, payload| {
            match tag {
                CLUSTER_ID_TAG => {
                    cluster_id =
                        decode_tagged_payload(payload, "ClusterId", |b| get_compact_nullable_string(b, "ClusterId"))?;
                }
                LAST_MIRROR_EPOCH_LOOKUPS_TAG => {
                    last_mirror_epoch_lookups = decode_tagged_payload(payload, "LastMirrorEpochLookups", |b| {
                        get_compact_array(
                            b,
                            LastMirrorEpochLookup::MIN_BYTES,
                            "LastMirrorEpochLookups",
                            LastMirrorEpochLookup::read,
                        )
                    })?;
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(Self {
            mirror_names,
            include_authorized_operations,
            cluster_id,
            last_mirror_epoch_lookups,
            unknown_tagged_fields,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_nullable_array(buf, self.mirror_names.as_deref(), "MirrorNames", |b, n| {
            put_compact_string(b, n, "MirrorNames")
        })?;
        put_bool(buf, self.include_authorized_operations);
        let mut known = Vec::new();
        if let Some(id) = &self.cluster_id {
            known.push((CLUSTER_ID_TAG, tagged_payload(|b| put_compact_nullable_string(b, Some(id), "ClusterId"))?));
        }
        if !self.last_mirror_epoch_lookups.is_empty() {
            known.push((
                LAST_MIRROR_EPOCH_LOOKUPS_TAG,
                tagged_payload(|b| {
                    put_compact_array(b, &self.last_mirror_epoch_lookups, "LastMirrorEpochLookups", |b, l| l.write(b))
                })?,
            ));
        }
        put_tagged_fields(buf, &known, &self.unknown_tagged_fields, Self::NAME)
    }
}

impl PartitionDetail {
    /// Fixed fields (4+2+8+8+4+8), two one-byte strings and an empty tag section.
    const MIN_BYTES: usize = 37;

    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            partition_index: get_i32(buf, "Partitions.PartitionIndex")?,
            state_value: get_compact_string(buf, "Partitions.StateValue")?,
            error_message: get_compact_nullable_string(buf, "Partitions.ErrorMessage")?,
            retry_attempt: get_i16(buf, "Partitions.RetryAttempt")?,
            source_offset: get_i64(buf, "Partitions.SourceOffset")?,
            destination_offset: get_i64(buf, "Partitions.DestinationOffset")?,
            last_mirror_epoch: get_i32(buf, "Partitions.LastMirrorEpoch")?,
            last_mirror_offset: get_i64(buf, "Partitions.LastMirrorOffset")?,
            unknown_tagged_fields: get_tagged_fields(buf, "Partitions", |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        buf.put_i32(self.partition_index);
        put_compact_string(buf, &self.state_value, "Partitions.StateValue")?;
        put_compact_nullable_string(buf, self.error_message.as_deref(), "Partitions.ErrorMessage")?;
        buf.put_i16(self.retry_attempt);
        buf.put_i64(self.source_offset);
        buf.put_i64(self.destination_offset);
        buf.put_i32(self.last_mirror_epoch);
        buf.put_i64(self.last_mirror_offset);
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, "Partitions")
    }
}

impl TopicResult {
    /// A one-byte string, an empty array and an empty tag section.
    const MIN_BYTES: usize = 3;

    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            topic_name: get_topic_name(buf, "Topics.TopicName")?,
            partitions: get_compact_array(buf, PartitionDetail::MIN_BYTES, "Topics.Partitions", PartitionDetail::read)?,
            unknown_tagged_fields: get_tagged_fields(buf, "Topics", |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.topic_name, "Topics.TopicName")?;
        put_compact_array(buf, &self.partitions, "Topics.Partitions", |b, p| p.write(b))?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, "Topics")
    }
}

impl DescribedMirror {
    /// int16, four one-byte (empty or null) strings, int32, an empty array and an empty tag
    /// section.
    const MIN_BYTES: usize = 12;

    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            error_code: get_i16(buf, "Mirrors.ErrorCode")?,
            error_message: get_compact_nullable_string(buf, "Mirrors.ErrorMessage")?,
            mirror_name: get_compact_string(buf, "Mirrors.MirrorName")?,
            source_bootstrap: get_compact_nullable_string(buf, "Mirrors.SourceBootstrap")?,
            source_cluster_id: get_compact_nullable_string(buf, "Mirrors.SourceClusterId")?,
            authorized_operations: get_i32(buf, "Mirrors.AuthorizedOperations")?,
            topics: get_compact_array(buf, TopicResult::MIN_BYTES, "Mirrors.Topics", TopicResult::read)?,
            unknown_tagged_fields: get_tagged_fields(buf, "Mirrors", |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        buf.put_i16(self.error_code);
        put_compact_nullable_string(buf, self.error_message.as_deref(), "Mirrors.ErrorMessage")?;
        put_compact_string(buf, &self.mirror_name, "Mirrors.MirrorName")?;
        put_compact_nullable_string(buf, self.source_bootstrap.as_deref(), "Mirrors.SourceBootstrap")?;
        put_compact_nullable_string(buf, self.source_cluster_id.as_deref(), "Mirrors.SourceClusterId")?;
        buf.put_i32(self.authorized_operations);
        put_compact_array(buf, &self.topics, "Mirrors.Topics", |b, t| t.write(b))?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, "Mirrors")
    }
}

impl DescribeClusterMirrorsResponse {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_compact_nullable_string(buf, "ErrorMessage")?,
            mirrors: get_compact_array(buf, DescribedMirror::MIN_BYTES, "Mirrors", DescribedMirror::read)?,
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

mirror_message!(DescribeClusterMirrorsRequest, "DescribeClusterMirrorsRequest", DescribeClusterMirrors, request);
mirror_message!(DescribeClusterMirrorsResponse, "DescribeClusterMirrorsResponse", DescribeClusterMirrors, response);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mirror::testutil::*;
    use crate::wire::mirror::MirrorPartitionState;

    fn request() -> DescribeClusterMirrorsRequest {
        DescribeClusterMirrorsRequest {
            mirror_names: Some(vec![StrBytes::from_static_str("a-to-b")]),
            include_authorized_operations: true,
            cluster_id: Some(StrBytes::from_static_str("dst-cluster-id")),
            last_mirror_epoch_lookups: vec![LastMirrorEpochLookup {
                topic_id: KafkaUuid([7; 16]),
                partitions: vec![0, 1, 2],
                unknown_tagged_fields: unknown_tag(),
            }],
            unknown_tagged_fields: unknown_tag(),
        }
    }

    fn response() -> DescribeClusterMirrorsResponse {
        DescribeClusterMirrorsResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            mirrors: vec![
                DescribedMirror {
                    mirror_name: StrBytes::from_static_str("a-to-b"),
                    source_bootstrap: Some(StrBytes::from_static_str("a1:9092")),
                    source_cluster_id: Some(StrBytes::from_static_str("src-id")),
                    authorized_operations: 0b1_0000_0000,
                    topics: vec![TopicResult {
                        topic_name: TopicName(StrBytes::from_static_str("orders")),
                        partitions: vec![
                            PartitionDetail {
                                partition_index: 0,
                                state_value: StrBytes::from_static_str(MirrorPartitionState::Mirroring.as_str()),
                                source_offset: 100,
                                destination_offset: 98,
                                last_mirror_epoch: 5,
                                last_mirror_offset: 97,
                                unknown_tagged_fields: unknown_tag(),
                                ..Default::default()
                            },
                            PartitionDetail {
                                partition_index: 1,
                                state_value: StrBytes::from_static_str("FAILED"),
                                error_message: Some(StrBytes::from_static_str("Detected mirror loop")),
                                retry_attempt: -1,
                                ..Default::default()
                            },
                        ],
                        unknown_tagged_fields: unknown_tag(),
                    }],
                    unknown_tagged_fields: unknown_tag(),
                    ..Default::default()
                },
                DescribedMirror {
                    error_code: 137,
                    error_message: Some(StrBytes::from_static_str("no such mirror")),
                    mirror_name: StrBytes::from_static_str("ghost"),
                    ..Default::default()
                },
            ],
            unknown_tagged_fields: unknown_tag(),
        }
    }

    #[test]
    fn round_trips() {
        round_trip_all_versions(&request());
        round_trip_all_versions(&DescribeClusterMirrorsRequest::default());
        round_trip_all_versions(&response());
        round_trip_all_versions(&DescribeClusterMirrorsResponse::default());
        // Only one of the two known tagged fields set.
        let mut r = request();
        r.last_mirror_epoch_lookups.clear();
        r.mirror_names = Some(vec![]);
        round_trip_all_versions(&r);
    }

    #[test]
    fn golden_request_tagged_fields() {
        let req =
            DescribeClusterMirrorsRequest { cluster_id: Some(StrBytes::from_static_str("c")), ..Default::default() };
        // null MirrorNames | false | 1 tagged field: tag 0, size 2, "c"
        assert_eq!(encode(&req, 0), vec![0, 0, 1, 0, 2, 2, b'c']);
        // Defaults write no tagged fields.
        assert_eq!(encode(&DescribeClusterMirrorsRequest::default(), 0), vec![0, 0, 0]);
    }

    #[test]
    fn min_bytes_match_the_smallest_encoding() {
        fn len(f: impl FnOnce(&mut Vec<u8>) -> Result<(), WireError>) -> usize {
            let mut v = Vec::new();
            f(&mut v).unwrap();
            v.len()
        }
        assert_eq!(len(|b| LastMirrorEpochLookup::default().write(b)), LastMirrorEpochLookup::MIN_BYTES);
        assert_eq!(len(|b| PartitionDetail::default().write(b)), PartitionDetail::MIN_BYTES);
        assert_eq!(len(|b| TopicResult::default().write(b)), TopicResult::MIN_BYTES);
        assert_eq!(len(|b| DescribedMirror::default().write(b)), DescribedMirror::MIN_BYTES);
    }

    #[test]
    fn known_tag_with_trailing_bytes_is_an_error() {
        // tag 0 with size 3 but the string inside is only 2 bytes long.
        let mut buf = Bytes::from_static(&[0, 0, 1, 0, 3, 2, b'c', b'x']);
        assert!(matches!(
            DescribeClusterMirrorsRequest::decode_body(&mut buf, 0),
            Err(WireError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn hostile_input_is_an_error() {
        truncations_fail::<DescribeClusterMirrorsRequest>(&request());
        truncations_fail::<DescribeClusterMirrorsResponse>(&response());
        mutations_never_panic::<DescribeClusterMirrorsRequest>(&request());
        mutations_never_panic::<DescribeClusterMirrorsResponse>(&response());
        huge_count_fails::<DescribeClusterMirrorsRequest>(&[]);
        huge_count_fails::<DescribeClusterMirrorsResponse>(&[0, 0, 0, 0, 0, 0, 0]);
    }
}

/// mirrorgate's extensions to [`PartitionDetail`], carried as tagged fields that other
/// clients skip: the source high watermark and the partition's offset map (DESIGN §4.2).
pub mod ext {
    use bytes::Bytes;

    use super::PartitionDetail;

    /// Tag of the source high watermark (INT64, offsets).
    pub const TAG_SOURCE_HIGH_WATERMARK: i32 = 10_000;
    /// Tag of the offset map: JSON `[[source_start, destination_start], ...]`.
    pub const TAG_OFFSET_SEGMENTS: i32 = 10_001;

    /// Tag of the source offset copying started from when it was not the source's log start
    /// (INT64, offsets; absent = from the log start): a `--start-position`.
    pub const TAG_COPY_START: i32 = 10_002;

    /// Tag of [`PartitionStateRecord::placeholder_end`](crate::mirror::model::PartitionStateRecord)
    /// (INT64, destination offset; absent = no placeholder written).
    pub const TAG_PLACEHOLDER_END: i32 = 10_003;

    /// Tag of the instance that copies the partition (UTF-8 instance name, `instances.name`;
    /// absent = not assigned, or no group).
    pub const TAG_OWNER: i32 = 10_004;

    /// Sets the owner extension on `p`.
    pub fn set_owner(p: &mut PartitionDetail, instance: &str) {
        p.unknown_tagged_fields.insert(TAG_OWNER, Bytes::copy_from_slice(instance.as_bytes()));
    }

    /// The instance that copies the partition, if sent.
    pub fn owner(p: &PartitionDetail) -> Option<String> {
        let b = p.unknown_tagged_fields.get(&TAG_OWNER)?;
        std::str::from_utf8(b).ok().map(str::to_string)
    }

    /// Sets the placeholder end extension on `p`.
    pub fn set_placeholder_end(p: &mut PartitionDetail, destination_offset: i64) {
        p.unknown_tagged_fields.insert(TAG_PLACEHOLDER_END, Bytes::copy_from_slice(&destination_offset.to_be_bytes()));
    }

    /// Every placeholder of the partition lies below this destination offset, if any was written.
    pub fn placeholder_end(p: &PartitionDetail) -> Option<i64> {
        let b = p.unknown_tagged_fields.get(&TAG_PLACEHOLDER_END)?;
        Some(i64::from_be_bytes(b.as_ref().try_into().ok()?))
    }

    /// What a reader of the destination without mirrorgate gets compared with a reader through
    /// it: `same`; `placeholders below destination offset N` (none once the destination's log
    /// start is at or above N); or `shifted by N` (destination offsets = source − N).
    pub fn direct_reads(segments: &[(i64, i64)], placeholder_end: Option<i64>) -> String {
        if let Some((s, d)) = segments.iter().rev().find(|(s, d)| s != d) {
            return format!("shifted by {}", s - d);
        }
        match placeholder_end {
            Some(n) if n > 0 => format!("placeholders below destination offset {n}"),
            _ => "same".into(),
        }
    }

    /// Sets the copy start extension on `p`.
    pub fn set_copy_start(p: &mut PartitionDetail, source_offset: i64) {
        p.unknown_tagged_fields.insert(TAG_COPY_START, Bytes::copy_from_slice(&source_offset.to_be_bytes()));
    }

    /// The source offset copying started from, if not the log start.
    pub fn copy_start(p: &PartitionDetail) -> Option<i64> {
        let b = p.unknown_tagged_fields.get(&TAG_COPY_START)?;
        Some(i64::from_be_bytes(b.as_ref().try_into().ok()?))
    }

    /// Sets the extensions on `p`.
    pub fn set(p: &mut PartitionDetail, source_high_watermark: i64, segments: &[(i64, i64)]) {
        p.unknown_tagged_fields
            .insert(TAG_SOURCE_HIGH_WATERMARK, Bytes::copy_from_slice(&source_high_watermark.to_be_bytes()));
        let json = serde_json::to_vec(segments).unwrap_or_default();
        p.unknown_tagged_fields.insert(TAG_OFFSET_SEGMENTS, Bytes::from(json));
    }

    /// The source high watermark, if sent.
    pub fn source_high_watermark(p: &PartitionDetail) -> Option<i64> {
        let b = p.unknown_tagged_fields.get(&TAG_SOURCE_HIGH_WATERMARK)?;
        Some(i64::from_be_bytes(b.as_ref().try_into().ok()?))
    }

    /// The offset map segments `(source_start, destination_start)`, if sent.
    pub fn segments(p: &PartitionDetail) -> Option<Vec<(i64, i64)>> {
        serde_json::from_slice(p.unknown_tagged_fields.get(&TAG_OFFSET_SEGMENTS)?).ok()
    }

    /// Source offset − destination offset at the end of the map (0 = identical).
    pub fn current_shift(segments: &[(i64, i64)]) -> i64 {
        segments.last().map_or(0, |(s, d)| s - d)
    }

    /// "identical", or "shifted by N since source offset X".
    pub fn offset_mode(segments: &[(i64, i64)]) -> String {
        match segments.iter().rev().find(|(s, d)| s != d) {
            None => "identical".into(),
            Some((s, d)) => format!("shifted by {} since source offset {s}", s - d),
        }
    }
}
