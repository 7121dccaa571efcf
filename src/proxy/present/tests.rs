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
    assert!(fetch::request(&mut req, &maps()));
    let got: Vec<(i64, i64)> =
        req.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (p.fetch_offset, p.log_start_offset))).collect();
    assert_eq!(got, vec![(1000, -1), (4000, -1), (1600, -1), (4000, -1)]);
    // Inside the gap between the segments (source 4500..7000): the next record.
    let mut req = FetchRequest::default()
        .with_topics(vec![FetchTopic::default().with_topic(name("t")).with_partitions(vec![part(0, 5000)])]);
    fetch::request(&mut req, &maps());
    assert_eq!(req.topics[0].partitions[0].fetch_offset, 1500);
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
    assert!(fetch::response(&mut resp, &maps()));
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
    assert!(fetch::response(&mut resp, &maps()));
    let p = &resp.responses[0].partitions[0];
    assert_eq!((p.high_watermark, p.last_stable_offset), (4500, 4500), "the end of the first segment");
    assert_eq!(p.log_start_offset, 4500, "the log start never above the high watermark");
}
