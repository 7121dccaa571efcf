//! The per-API translations on decoded messages, for a shifted partition (`t`-0: source
//! 3000.. at destination 0..; a second segment from source 7000 at destination 1500) next to
//! an identical one (`t`-1) and another topic (`u`).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    FetchRequest, FetchResponse, ListOffsetsResponse, OffsetCommitRequest, OffsetFetchResponse, ProduceResponse,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::*;
use crate::mirror::control::ControlState;
use crate::mirror::model::{OffsetSegment, PartitionStateRecord};
use crate::wire::batch::{self, BatchIter, OwnBatch};
use crate::wire::mirror::MirrorPartitionState;

const ID: [u8; 16] = [9; 16];

fn maps() -> OffsetMaps {
    let mut state = ControlState::default();
    for (p, segs) in [
        (
            0,
            vec![
                OffsetSegment { source_start: 3000, destination_start: 0 },
                OffsetSegment { source_start: 7000, destination_start: 1500 },
            ],
        ),
        (1, vec![OffsetSegment { source_start: 0, destination_start: 0 }]),
    ] {
        let mut r = PartitionStateRecord::new("m", "t", p, MirrorPartitionState::Mirroring);
        r.segments = segs;
        r.destination_topic_id = Some(crate::mirror::topics::base64_uuid(&ID));
        state.partitions.insert(("t".into(), p), r);
    }
    OffsetMaps::build(&state)
}

/// A proxy that learned no topic id from Metadata.
fn no_ids(_: &[u8; 16]) -> Option<String> {
    None
}

fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

#[test]
fn fetch_request_offsets_go_to_the_destination_by_name_and_by_id() {
    let part =
        |p: i32, o: i64| FetchPartition::default().with_partition(p).with_fetch_offset(o).with_log_start_offset(-1);
    let mut req = FetchRequest::default().with_topics(vec![
        FetchTopic::default().with_topic(name("t")).with_partitions(vec![part(0, 4000), part(1, 4000)]),
        FetchTopic::default().with_topic_id(uuid::Uuid::from_bytes(ID)).with_partitions(vec![part(0, 7100)]),
        FetchTopic::default().with_topic(name("u")).with_partitions(vec![part(0, 4000)]),
    ]);
    assert!(fetch::request(&mut req, &maps(), &no_ids).unwrap());
    let got: Vec<(i64, i64)> =
        req.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (p.fetch_offset, p.log_start_offset))).collect();
    assert_eq!(got, vec![(1000, -1), (4000, -1), (1600, -1), (4000, -1)]);
    // Inside the gap between the segments (source 4500..7000): the next record.
    let mut req = FetchRequest::default()
        .with_topics(vec![FetchTopic::default().with_topic(name("t")).with_partitions(vec![part(0, 5000)])]);
    fetch::request(&mut req, &maps(), &no_ids).unwrap();
    assert_eq!(req.topics[0].partitions[0].fetch_offset, 1500);
    // Below the first segment (source 0..3000, never on the destination): -1, which the
    // broker answers OFFSET_OUT_OF_RANGE; the first source offset itself is destination 0.
    for (source, destination) in [(0, -1), (2999, -1), (3000, 0)] {
        let mut req = FetchRequest::default()
            .with_topics(vec![FetchTopic::default().with_topic(name("t")).with_partitions(vec![part(0, source)])]);
        fetch::request(&mut req, &maps(), &no_ids).unwrap();
        assert_eq!(req.topics[0].partitions[0].fetch_offset, destination, "source {source}");
    }
}

#[test]
fn fetch_response_offsets_and_batches_go_to_the_source() {
    let own = |base: i64, count: i32| {
        batch::control_batch(&OwnBatch {
            base_offset: base,
            count,
            timestamp: 1,
            producer_id: 5,
            producer_epoch: 0,
            base_sequence: -1,
        })
    };
    let mut records = BytesMut::new();
    records.extend_from_slice(&own(1498, 2));
    records.extend_from_slice(&own(1500, 3));
    let part = |p: i32, records: Bytes| {
        PartitionData::default()
            .with_partition_index(p)
            .with_high_watermark(1503)
            .with_last_stable_offset(1500)
            .with_log_start_offset(0)
            .with_aborted_transactions(Some(vec![AbortedTransaction::default().with_first_offset(1499)]))
            .with_records(Some(records))
    };
    let records = records.freeze();
    let mut resp = FetchResponse::default().with_responses(vec![
        FetchableTopicResponse::default()
            .with_topic_id(uuid::Uuid::from_bytes(ID))
            .with_partitions(vec![part(0, records.clone()), part(1, records.clone())]),
        FetchableTopicResponse::default().with_topic(name("u")).with_partitions(vec![part(0, records.clone())]),
    ]);
    assert!(fetch::response(&mut resp, &maps(), &no_ids, false, &|_, _| None));
    // Round trip through the wire, as a client decodes it.
    let mut buf = BytesMut::new();
    resp.encode(&mut buf, 16).unwrap();
    let resp = FetchResponse::decode(&mut buf.freeze(), 16).unwrap();
    let p = &resp.responses[0].partitions[0];
    // The LSO sits at the second segment's start: end-style, the end of the first segment
    // (source 4500), which a consumer reading the first segment reaches; not 7000.
    assert_eq!((p.high_watermark, p.last_stable_offset, p.log_start_offset), (7003, 4500, 3000));
    assert_eq!(p.aborted_transactions.as_ref().unwrap()[0].first_offset, 4499);
    assert_eq!(p.diverging_epoch.end_offset, -1, "Kafka's 'none' stays");
    let bases: Vec<(i64, bool)> = BatchIter::new(p.records.clone().unwrap())
        .map(|b| b.map(|b| (b.base_offset(), b.crc_is_valid())).unwrap())
        .collect();
    assert_eq!(bases, vec![(4498, true), (7000, true)]);
    for untouched in [&resp.responses[0].partitions[1], &resp.responses[1].partitions[0]] {
        assert_eq!(untouched.high_watermark, 1503);
        assert_eq!(untouched.records.as_ref(), Some(&records), "bytes as the broker sent them");
    }
}

#[test]
fn list_offsets_and_produce_answers_go_to_the_source() {
    let part = |p: i32, o: i64| ListOffsetsPartitionResponse::default().with_partition_index(p).with_offset(o);
    let mut resp = ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
        .with_name(name("t"))
        .with_partitions(vec![part(0, 0), part(0, 2000), part(0, -1), part(1, 2000)])]);
    assert!(offsets::list_offsets(&mut resp, &maps()));
    let got: Vec<i64> = resp.topics[0].partitions.iter().map(|p| p.offset).collect();
    assert_eq!(got, vec![3000, 7500, -1, 2000]);
    // At the second segment's start (an empty segment: the destination ends there): latest
    // (timestamp -1) is the end of the first segment, a record found by timestamp the next one.
    let mut resp = ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
        .with_name(name("t"))
        .with_partitions(vec![part(0, 1500), part(0, 1500).with_timestamp(1_700_000_000_000)])]);
    offsets::list_offsets(&mut resp, &maps());
    let got: Vec<i64> = resp.topics[0].partitions.iter().map(|p| p.offset).collect();
    assert_eq!(got, vec![4500, 7000]);
    let mut produce = ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
        .with_name(name("t"))
        .with_partition_responses(vec![
            PartitionProduceResponse::default().with_index(0).with_base_offset(2003).with_log_start_offset(10),
            PartitionProduceResponse::default().with_index(0).with_base_offset(-1).with_log_start_offset(-1),
        ])]);
    assert!(offsets::produce(&mut produce, &maps()));
    let got: Vec<(i64, i64)> =
        produce.responses[0].partition_responses.iter().map(|p| (p.base_offset, p.log_start_offset)).collect();
    assert_eq!(got, vec![(7503, 3010), (-1, -1)]);
}

#[test]
fn committed_offsets_round_trip_in_both_offset_fetch_layouts() {
    let mut commit = OffsetCommitRequest::default().with_topics(vec![OffsetCommitRequestTopic::default()
        .with_name(name("t"))
        .with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(4000),
            OffsetCommitRequestPartition::default().with_partition_index(1).with_committed_offset(4000),
        ])]);
    assert!(groups::offset_commit(&mut commit, &maps()));
    let stored: Vec<i64> = commit.topics[0].partitions.iter().map(|p| p.committed_offset).collect();
    assert_eq!(stored, vec![1000, 4000]);
    let mut v7 = OffsetFetchResponse::default().with_topics(vec![OffsetFetchResponseTopic::default()
        .with_name(name("t"))
        .with_partitions(vec![
            OffsetFetchResponsePartition::default().with_partition_index(0).with_committed_offset(1000),
            OffsetFetchResponsePartition::default().with_partition_index(0).with_committed_offset(-1),
        ])]);
    assert!(groups::offset_fetch(&mut v7, &maps()));
    let got: Vec<i64> = v7.topics[0].partitions.iter().map(|p| p.committed_offset).collect();
    assert_eq!(got, vec![4000, -1]);
    let mut v8 =
        OffsetFetchResponse::default().with_groups(vec![OffsetFetchResponseGroup::default().with_topics(vec![
            OffsetFetchResponseTopics::default().with_name(name("t")).with_partitions(vec![
                OffsetFetchResponsePartitions::default().with_partition_index(0).with_committed_offset(1500),
                OffsetFetchResponsePartitions::default().with_partition_index(1).with_committed_offset(1500),
            ]),
        ])]);
    assert!(groups::offset_fetch(&mut v8, &maps()));
    let got: Vec<i64> = v8.groups[0].topics[0].partitions.iter().map(|p| p.committed_offset).collect();
    // A position at the second segment's start reads as the end of the first (end-style,
    // never above the presented high watermark): the next record read is the same.
    assert_eq!(got, vec![4500, 1500]);
}

#[test]
fn nothing_changes_without_a_shifted_partition() {
    let empty = OffsetMaps::default();
    let mut resp = ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
        .with_name(name("t"))
        .with_partitions(vec![ListOffsetsPartitionResponse::default().with_offset(5)])]);
    assert!(!offsets::list_offsets(&mut resp, &empty));
    assert_eq!(resp.topics[0].partitions[0].offset, 5);
    resp.topics[0].partitions[0].partition_index = 1;
    assert!(!offsets::list_offsets(&mut resp, &maps()), "an identical partition of a shifted topic");
    resp.topics[0].name = name("u");
    resp.topics[0].partitions[0].partition_index = 0;
    assert!(!offsets::list_offsets(&mut resp, &maps()), "another topic");
    assert_eq!(resp.topics[0].partitions[0].offset, 5);
}

#[test]
fn fetch_end_offsets_at_an_empty_segment_are_reachable() {
    // The destination ends at 1500, where the second segment starts with no record yet.
    let mut resp = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic(name("t"))
        .with_partitions(vec![PartitionData::default()
            .with_partition_index(0)
            .with_high_watermark(1500)
            .with_last_stable_offset(1500)
            .with_log_start_offset(1500)])]);
    assert!(fetch::response(&mut resp, &maps(), &no_ids, false, &|_, _| None));
    let p = &resp.responses[0].partitions[0];
    assert_eq!((p.high_watermark, p.last_stable_offset), (4500, 4500), "the end of the first segment");
    assert_eq!(p.log_start_offset, 4500, "the log start never above the high watermark");
}

#[test]
fn share_group_apis_naming_a_shifted_topic_are_refused() {
    // A request of `key` v1; the frames passed with it stand for its bytes.
    let prefix = |key: ApiKey| {
        let mut buf = BytesMut::new();
        kafka_protocol::messages::RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(1)
            .with_correlation_id(1)
            .encode(&mut buf, 2)
            .unwrap();
        ParsedRequest::parse(buf.freeze()).unwrap()
    };
    // The bytes only matter through the shifted topic's name or id occurring in them.
    let naming_t = Bytes::from_static(b"\x00\x01\x00\x01t\x00");
    let by_id = Bytes::from(ID.to_vec());
    let other = Bytes::from_static(b"\x00\x01\x00\x01u\x00");
    for key in SHARE_GROUP_APIS {
        for frame in [naming_t.clone(), by_id.clone()] {
            let err = request_with(&maps(), &no_ids, &prefix(*key), frame, ResponseAction::Forward).unwrap_err();
            assert!(err.contains("shifted mirror topic"), "{key:?}: {err}");
        }
        let (out, _) = request_with(&maps(), &no_ids, &prefix(*key), other.clone(), ResponseAction::Forward).unwrap();
        assert_eq!(out, other, "{key:?}: another topic passes");
        let (_, _) =
            request_with(&OffsetMaps::default(), &no_ids, &prefix(*key), naming_t.clone(), ResponseAction::Forward)
                .expect("no shifted partition: untouched");
    }
    // DescribeShareGroupOffsets for every topic of a group: the answer is looked at.
    let (_, action) = request_with(
        &maps(),
        &no_ids,
        &prefix(ApiKey::DescribeShareGroupOffsets),
        other.clone(),
        ResponseAction::Forward,
    )
    .unwrap();
    assert!(matches!(action, ResponseAction::Present(_)));
    assert!(response_with(&maps(), &ReadCaps::new(), ApiKey::DescribeShareGroupOffsets as i16, 0, naming_t).is_err());
    assert!(response_with(&maps(), &ReadCaps::new(), ApiKey::DescribeShareGroupOffsets as i16, 0, other).is_ok());
    // Share-group membership (no offsets) is unaffected.
    let hb = Bytes::from_static(b"\x00\x01\x00\x01t\x00");
    assert!(request_with(&maps(), &no_ids, &prefix(ApiKey::ShareGroupHeartbeat), hb, ResponseAction::Forward).is_ok());
}

#[test]
fn fetch_by_an_id_the_state_lacks_is_resolved_or_refused() {
    // `t` shifted, its destination topic id not in the state.
    let mut state = ControlState::default();
    let mut r = PartitionStateRecord::new("m", "t", 0, MirrorPartitionState::Mirroring);
    r.segments = vec![OffsetSegment { source_start: 3000, destination_start: 0 }];
    state.partitions.insert(("t".into(), 0), r);
    let m = OffsetMaps::build(&state);
    assert!(m.has_topic_without_id() && !maps().has_topic_without_id());
    let by_id = |id: [u8; 16]| {
        FetchRequest::default().with_topics(vec![FetchTopic::default()
            .with_topic_id(uuid::Uuid::from_bytes(id))
            .with_partitions(vec![FetchPartition::default().with_partition(0).with_fetch_offset(4000)])])
    };
    // Metadata taught the proxy that ID is `t`: translated.
    let learned = |id: &[u8; 16]| (*id == ID).then(|| "t".to_string());
    let mut req = by_id(ID);
    assert!(fetch::request(&mut req, &m, &learned).unwrap());
    assert_eq!(req.topics[0].partitions[0].fetch_offset, 1000);
    // An id nobody knows: refused (it may be `t`).
    let err = fetch::request(&mut by_id([3; 16]), &m, &learned).unwrap_err();
    assert!(err.contains("unknown"), "{err}");
    // A learned id of another topic: untouched.
    let other = |_: &[u8; 16]| Some("u".to_string());
    let mut req = by_id([3; 16]);
    assert!(!fetch::request(&mut req, &m, &other).unwrap());
    assert_eq!(req.topics[0].partitions[0].fetch_offset, 4000);
    // With every shifted topic's id in the state, unknown ids are other topics.
    assert!(!fetch::request(&mut by_id([3; 16]), &maps(), &no_ids).unwrap());
    // Through request_with: a Fetch v13 by an unknown id closes the connection (its bytes
    // do not name `t`, so it must not be skipped unread).
    let mut buf = BytesMut::new();
    kafka_protocol::messages::RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(13)
        .encode(&mut buf, ApiKey::Fetch.request_header_version(13))
        .unwrap();
    by_id([3; 16]).encode(&mut buf, 13).unwrap();
    let request = ParsedRequest::parse(buf.freeze()).unwrap();
    assert!(request_with(&m, &no_ids, &request, request.frame().clone(), ResponseAction::Forward).is_err());
}

fn control_batches(ranges: &[(i64, i32)]) -> Bytes {
    let mut records = BytesMut::new();
    for (base, count) in ranges {
        let own = OwnBatch {
            base_offset: *base,
            count: *count,
            timestamp: 1_700_000_000_000,
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
        };
        records.extend_from_slice(&batch::control_batch(&own));
    }
    records.freeze()
}

fn bases(records: &Bytes) -> Vec<i64> {
    BatchIter::new(records.clone()).map(|b| b.expect("a batch").base_offset()).collect()
}

#[test]
fn a_read_cap_drops_batches_at_and_above_it_and_lowers_the_ends() {
    // `u` (not shifted) held below destination offset 6: a marker at 5 landed, 6 may be its
    // duplicate.
    let part = PartitionData::default()
        .with_partition_index(0)
        .with_high_watermark(8)
        .with_last_stable_offset(8)
        .with_records(Some(control_batches(&[(3, 2), (5, 1), (6, 1), (7, 1)])));
    let mut resp = FetchResponse::default()
        .with_responses(vec![FetchableTopicResponse::default().with_topic(name("u")).with_partitions(vec![part])]);
    let cap = |t: &str, p: i32| (t == "u" && p == 0).then_some(6);
    assert!(fetch::response(&mut resp, &OffsetMaps::default(), &no_ids, true, &cap));
    let p = &resp.responses[0].partitions[0];
    assert_eq!((p.high_watermark, p.last_stable_offset), (6, 6));
    assert_eq!(bases(p.records.as_ref().unwrap()), [3, 5]);
    // Not held: untouched.
    let mut resp2 = resp.clone();
    assert!(!fetch::response(&mut resp2, &OffsetMaps::default(), &no_ids, true, &|_, _| None));
    assert_eq!(resp2, resp);
}

#[test]
fn a_session_whose_fetch_offset_is_hidden_is_sent_to_start_again() {
    // `t`-0 of a map that hides destination 6 and 7 (source 0..=5 at 0..=5, source 6.. at 8..).
    let mut state = ControlState::default();
    let mut r = PartitionStateRecord::new("m", "h", 0, MirrorPartitionState::Mirroring);
    r.segments = vec![
        OffsetSegment { source_start: 0, destination_start: 0 },
        OffsetSegment { source_start: 6, destination_start: 8 },
    ];
    state.partitions.insert(("h".into(), 0), r);
    let maps = OffsetMaps::build(&state);
    let response = |session_id: i32, batches: &[(i64, i32)]| {
        let part = PartitionData::default()
            .with_partition_index(0)
            .with_high_watermark(8)
            .with_last_stable_offset(8)
            .with_records(Some(control_batches(batches)));
        FetchResponse::default()
            .with_session_id(session_id)
            .with_responses(vec![FetchableTopicResponse::default().with_topic(name("h")).with_partitions(vec![part])])
    };
    // A session's cached fetch offset at 6 (the client's position before the hiding): only
    // hidden batches come back, so the session is ended and the client starts a new one.
    let mut resp = response(42, &[(6, 1), (7, 1)]);
    assert!(fetch::response(&mut resp, &maps, &no_ids, false, &|_, _| None));
    assert_eq!((resp.error_code, resp.session_id, resp.responses.len()), (70, 0, 0));
    // The same without a session: an empty partition (never asked for in practice).
    let mut resp = response(0, &[(6, 1), (7, 1)]);
    assert!(fetch::response(&mut resp, &maps, &no_ids, false, &|_, _| None));
    assert_eq!(resp.error_code, 0);
    // A fetch from the marker before them: the marker, then the next record; no error.
    let mut resp = response(42, &[(5, 1), (6, 1), (7, 1)]);
    assert!(fetch::response(&mut resp, &maps, &no_ids, false, &|_, _| None));
    assert_eq!(resp.error_code, 0);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(bases(p.records.as_ref().unwrap()), [5]);
    assert_eq!(p.high_watermark, 6, "the end after the hidden offsets: the next record's source offset");
}

#[test]
fn a_read_cap_lowers_list_offsets_and_leader_epoch_end_offsets() {
    let mut caps = ReadCaps::new();
    caps.insert(("u".into(), 0), 6);
    let mut resp = ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
        .with_name(name("u"))
        .with_partitions(vec![
            ListOffsetsPartitionResponse::default().with_partition_index(0).with_offset(8),
            ListOffsetsPartitionResponse::default().with_partition_index(1).with_offset(8),
        ])]);
    assert!(offsets::cap_list_offsets(&mut resp, &caps));
    let got: Vec<i64> = resp.topics[0].partitions.iter().map(|p| p.offset).collect();
    assert_eq!(got, [6, 8], "only the held partition, down to its cap");
    assert!(!offsets::cap_list_offsets(&mut resp, &caps), "already at the cap");
}
