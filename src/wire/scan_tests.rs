//! Unit tests of `wire::scan`.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::str::FromStr;

use bytes::Buf;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::alter_configs_request::{AlterConfigsRequest, AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsRequest, CreatePartitionsTopic,
};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::{DeleteTopicState, DeleteTopicsRequest};
use kafka_protocol::messages::describe_configs_request::{DescribeConfigsRequest, DescribeConfigsResource};
use kafka_protocol::messages::incremental_alter_configs_request as inc;
use kafka_protocol::messages::produce_request::{PartitionProduceData, ProduceRequest, TopicProduceData};
use kafka_protocol::messages::{BrokerId, ProducerId, RequestHeader, TransactionalId};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use super::*;

/// The walks as these tests call them, on a frame: its header parsed first, once, as the
/// connection does ([`ParsedRequest::parse`]); a frame under 8 bytes fails there.
fn parsed(frame: &[u8]) -> Result<ParsedRequest, ScanError> {
    Ok(ParsedRequest::parse(Bytes::copy_from_slice(frame))?)
}

macro_rules! on_frames {
    ($($walk:ident -> $out:ty),* $(,)?) => {
        $(fn $walk(frame: &[u8], version: i16) -> Result<$out, ScanError> {
            super::$walk(&parsed(frame)?, version)
        })*
    };
}

on_frames!(
    produce_topics -> ProduceScan,
    delete_records_topics -> Vec<TopicPartitions>,
    create_partitions_topics -> Vec<TopicName>,
    delete_topics_topics -> Vec<DeleteTopicsEntry>,
    alter_configs_resources -> Vec<ConfigResourceRef>,
    incremental_alter_configs_resources -> Vec<ConfigResourceRef>,
    describe_configs_resources -> Vec<ConfigResourceRef>,
    add_partitions_to_txn_topics -> Vec<TxnTopics>,
);

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A kafka-protocol `Uuid` (the crate does not depend on `uuid` directly) of 16 × `b`.
fn uuid<U: FromStr>(b: u8) -> U
where
    U::Err: Debug,
{
    format!("{b:02x}").repeat(16).parse().unwrap()
}

/// One unknown tagged field in flexible versions, none before.
fn tags(flexible: bool) -> BTreeMap<i32, Bytes> {
    let mut m = BTreeMap::new();
    if flexible {
        m.insert(7, Bytes::from_static(b"tag"));
    }
    m
}

/// A request frame: header (client id "scan-test") and body, no length prefix.
fn encode<T: Encodable + HeaderVersion>(api_key: i16, version: i16, body: &T) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(api_key)
        .with_request_api_version(version)
        .with_correlation_id(42)
        .with_client_id(Some(sb("scan-test")));
    let mut out = BytesMut::new();
    header.encode(&mut out, T::header_version(version)).unwrap();
    body.encode(&mut out, version).unwrap();
    out.freeze()
}

/// Decodes a frame with kafka-protocol, requiring it to consume every byte.
fn decode<T: Decodable + HeaderVersion>(frame: &[u8], version: i16) -> anyhow::Result<T> {
    let mut b = Bytes::copy_from_slice(frame);
    RequestHeader::decode(&mut b, T::header_version(version))?;
    let body = T::decode(&mut b, version)?;
    anyhow::ensure!(!b.has_remaining(), "{} trailing bytes", b.remaining());
    Ok(body)
}

/// The robustness contract for one valid frame: the walk matches what kafka-protocol decodes;
/// every truncation and a trailing byte are errors; byte mutations and huge counts never
/// panic, and whenever the walk accepts a mutant, kafka-protocol decodes it to the same
/// answer (the "safe to decode after the walk" claim). Returns how many mutants passed.
fn assert_robust<T, O>(
    frame: &[u8],
    version: i16,
    walk: impl Fn(&[u8]) -> Result<O, ScanError>,
    expect: impl Fn(&T) -> O,
) -> usize
where
    T: Decodable + HeaderVersion,
    O: PartialEq + Debug,
{
    let got = walk(frame).expect("valid frame passes");
    assert_eq!(got, expect(&decode::<T>(frame, version).expect("kafka-protocol decodes the original")));
    for len in 0..frame.len() {
        assert!(walk(&frame[..len]).is_err(), "truncated to {len} of {} bytes", frame.len());
    }
    let mut longer = frame.to_vec();
    longer.push(0);
    assert!(matches!(walk(&longer), Err(ScanError::Wire(WireError::TrailingBytes { remaining: 1, .. }))));

    let mut accepted = 0;
    let mut check = |m: &[u8]| {
        if let Ok(got) = walk(m) {
            let decoded = decode::<T>(m, version)
                .unwrap_or_else(|e| panic!("walk accepted a frame kafka-protocol refuses: {e}: {m:02x?}"));
            assert_eq!(got, expect(&decoded), "walk and kafka-protocol disagree on {m:02x?}");
            accepted += 1;
        }
    };
    for i in 0..frame.len() {
        let b = frame[i];
        for v in [0x00, 0x01, 0x02, 0x7f, 0x80, 0xfe, 0xff, b.wrapping_add(1), b.wrapping_sub(1), b ^ 0x80] {
            let mut m = frame.to_vec();
            m[i] = v;
            check(&m);
        }
        if i + 4 <= frame.len() {
            let mut m = frame.to_vec();
            m[i..i + 4].copy_from_slice(&0x7fff_ffffi32.to_be_bytes());
            check(&m);
        }
        let mut m = frame[..i].to_vec();
        m.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]); // uvarint 0x7fffffff
        m.extend_from_slice(&frame[i + 1..]);
        check(&m);
    }
    assert!(accepted > 0, "mutating the correlation id alone keeps a frame valid");
    accepted
}

/// Overwrites the array count at `at` (as its encoding at `flexible`) with 0x7fffffff.
fn with_huge_count(frame: &[u8], at: Range<usize>, flexible: bool) -> Vec<u8> {
    let mut m = frame[..at.start].to_vec();
    if flexible {
        m.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
    } else {
        m.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
    }
    m.extend_from_slice(&frame[at.end..]);
    m
}

fn is_count_error(r: &Result<impl Debug, ScanError>) -> bool {
    // A compact array's count is the uvarint minus one.
    matches!(r, Err(ScanError::Wire(WireError::CountExceedsRemaining { count, .. })) if *count >= 0x7fff_fffe)
}

// --- Produce ------------------------------------------------------------------------------

fn produce_topic(version: i16, topic: &str, id: u8, parts: &[(i32, Option<&[u8]>)]) -> TopicProduceData {
    let flexible = version >= 9;
    let partitions = parts
        .iter()
        .map(|(index, records)| {
            PartitionProduceData::default()
                .with_index(*index)
                .with_records(records.map(Bytes::copy_from_slice))
                .with_unknown_tagged_fields(tags(flexible))
        })
        .collect();
    let t = TopicProduceData::default().with_partition_data(partitions).with_unknown_tagged_fields(tags(flexible));
    if version >= 13 {
        t.with_topic_id(uuid(id))
    } else {
        t.with_name(name(topic))
    }
}

fn produce_request(version: i16) -> ProduceRequest {
    let big = vec![0xab; 300]; // a records length that needs a 2-byte uvarint
    ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(sb("txn-1"))))
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            produce_topic(version, "orders", 1, &[(0, Some(b"batch-o0")), (1, Some(b"batch-o1")), (2, None)]),
            produce_topic(version, "mirror.payments", 2, &[(0, Some(&big)), (5, Some(b"p5"))]),
            produce_topic(version, "empty", 3, &[]),
            produce_topic(version, "audit", 4, &[(7, Some(b"a7"))]),
        ])
        .with_unknown_tagged_fields(tags(version >= 9))
}

/// Many minimal elements, so that an overestimated minimum element size would be caught.
fn produce_minimal(version: i16) -> ProduceRequest {
    let mut topics: Vec<_> = (0..60).map(|_| produce_topic(version, "", 0, &[])).collect();
    let nulls: Vec<(i32, Option<&[u8]>)> = (0..60).map(|i| (i, None)).collect();
    topics.push(produce_topic(version, "", 0, &nulls));
    ProduceRequest::default().with_acks(0).with_topic_data(topics)
}

fn topic_ref(version: i16, t: &TopicProduceData) -> TopicRef {
    if version >= 13 {
        TopicRef::Id(KafkaUuid(*t.topic_id.as_bytes()))
    } else {
        TopicRef::Name(t.name.clone())
    }
}

type ProduceSummary = (i16, Vec<(TopicRef, Vec<i32>)>);

fn produce_summary(scan: &ProduceScan) -> ProduceSummary {
    let topics =
        scan.topics.iter().map(|t| (t.topic.clone(), t.partitions.iter().map(|p| p.index).collect())).collect();
    (scan.acks, topics)
}

fn produce_expected(version: i16) -> impl Fn(&ProduceRequest) -> ProduceSummary {
    move |r| {
        let topics = r
            .topic_data
            .iter()
            .map(|t| (topic_ref(version, t), t.partition_data.iter().map(|p| p.index).collect()))
            .collect();
        (r.acks, topics)
    }
}

#[test]
fn produce_scan_reports_topics_partitions_and_byte_ranges() {
    for version in 3..=13 {
        let req = produce_request(version);
        let frame = encode(0, version, &req);
        let scan = produce_topics(&frame, version).unwrap();
        assert_eq!(scan.api_version, version);
        assert_eq!(scan.acks, -1);
        assert_eq!(scan.topics.len(), 4);
        assert_eq!(scan.partition_count(), 6);
        for (t, want) in scan.topics.iter().zip(&req.topic_data) {
            assert_eq!(t.topic, topic_ref(version, want), "v{version}");
            // Each range holds exactly the encoded entry.
            let mut b = Bytes::copy_from_slice(&frame[t.range.clone()]);
            assert_eq!(&TopicProduceData::decode(&mut b, version).unwrap(), want);
            assert!(b.is_empty());
            for (p, want) in t.partitions.iter().zip(&want.partition_data) {
                assert_eq!(p.index, want.index);
                let mut b = Bytes::copy_from_slice(&frame[p.range.clone()]);
                assert_eq!(&PartitionProduceData::decode(&mut b, version).unwrap(), want);
                assert!(b.is_empty());
                let records = p.records.clone().map(|r| Bytes::copy_from_slice(&frame[r]));
                assert_eq!(records, want.records, "v{version} partition {}", p.index);
            }
        }
        assert_eq!(scan.topics.last().unwrap().range.end, frame.len() - if version >= 9 { 6 } else { 0 });
    }
}

#[test]
fn produce_minimal_elements_are_accepted() {
    for version in 3..=13 {
        let req = produce_minimal(version);
        let frame = encode(0, version, &req);
        let scan = produce_topics(&frame, version).unwrap();
        assert_eq!(produce_summary(&scan), produce_expected(version)(&req), "v{version}");
        assert_eq!(scan.acks, 0);
    }
}

#[test]
fn produce_without_drops_partitions_and_emptied_topics() {
    for version in 3..=13 {
        let req = produce_request(version);
        let frame = encode(0, version, &req);
        let scan = produce_topics(&frame, version).unwrap();
        let payments = topic_ref(version, &req.topic_data[1]);
        let orders = topic_ref(version, &req.topic_data[0]);
        let drop = |t: &TopicRef, p: i32| *t == payments || (*t == orders && p == 1);
        let out = produce_without(&frame, version, &scan, drop).unwrap();

        let mut want = req.clone();
        want.topic_data.remove(1); // every partition of mirror.payments dropped
        want.topic_data[0].partition_data.remove(1);
        assert_eq!(decode::<ProduceRequest>(&out, version).unwrap(), want, "v{version}");
        // The header is untouched and the result scans cleanly.
        let header_len =
            crate::wire::header::request_header_len(&frame, ProduceRequest::header_version(version)).unwrap();
        assert_eq!(out[..header_len], frame[..header_len]);
        let rescan = produce_topics(&out, version).unwrap();
        assert_eq!(produce_summary(&rescan), produce_expected(version)(&want));

        // Dropping everything removes every topic that had partitions; the one that was sent
        // with none is not "left empty" by the cut and stays.
        let out = produce_without(&frame, version, &scan, |_, _| true).unwrap();
        let all = decode::<ProduceRequest>(&out, version).unwrap();
        assert_eq!(all.topic_data.len(), 1, "only the topic that had no partitions stays");
        assert!(all.topic_data[0].partition_data.is_empty());
        assert_eq!(all.transactional_id, req.transactional_id);
        assert_eq!(all.unknown_tagged_fields, req.unknown_tagged_fields);
    }
}

#[test]
fn produce_without_returns_the_frame_itself_when_nothing_is_dropped() {
    for version in [3, 9, 13] {
        let frame = encode(0, version, &produce_request(version));
        let scan = produce_topics(&frame, version).unwrap();
        let out = produce_without(&frame, version, &scan, |_, _| false).unwrap();
        assert_eq!(out.as_ptr(), frame.as_ptr(), "no copy");
        assert_eq!(out, frame);
    }
}

#[test]
fn produce_without_refuses_a_scan_of_another_frame() {
    let frame = encode(0, 9, &produce_request(9));
    let scan = produce_topics(&frame, 9).unwrap();
    let other = encode(0, 9, &produce_minimal(9));
    assert_eq!(produce_without(&other, 9, &scan, |_, _| true), Err(ScanError::ScanMismatch));
    assert_eq!(produce_without(&frame, 8, &scan, |_, _| true), Err(ScanError::ScanMismatch));
}

#[test]
fn produce_without_output_is_smaller_and_keeps_records_bytes() {
    // Large flexible request where the count shrinks from a 2-byte to a 1-byte uvarint.
    let parts: Vec<(i32, Option<&[u8]>)> = (0..200).map(|i| (i, Some(&b"records"[..]))).collect();
    let req = ProduceRequest::default().with_acks(1).with_topic_data(vec![produce_topic(9, "t", 0, &parts)]);
    let frame = encode(0, 9, &req);
    let scan = produce_topics(&frame, 9).unwrap();
    let out = produce_without(&frame, 9, &scan, |_, p| p >= 10).unwrap();
    let got = decode::<ProduceRequest>(&out, 9).unwrap();
    assert_eq!(got.topic_data[0].partition_data, req.topic_data[0].partition_data[..10]);
    assert!(out.len() < frame.len());
}

#[test]
fn produce_refuses_huge_counts_and_wrong_headers() {
    for version in 3..=13 {
        let frame = encode(0, version, &produce_request(version));
        let scan = produce_topics(&frame, version).unwrap();
        let flexible = version >= 9;
        let m = with_huge_count(&frame, scan.topics_count.clone(), flexible);
        assert!(is_count_error(&produce_topics(&m, version)), "v{version}");
        let m = with_huge_count(&frame, scan.topics[0].partitions_count.clone(), flexible);
        assert!(is_count_error(&produce_topics(&m, version)), "v{version}");
    }
    let frame = encode(0, 9, &produce_request(9));
    assert!(matches!(produce_topics(&frame, 8), Err(ScanError::HeaderMismatch { found_version: 9, .. })));
    assert!(matches!(produce_topics(&frame, 2), Err(ScanError::UnsupportedVersion { version: 2, .. })));
    assert!(matches!(produce_topics(&frame, 14), Err(ScanError::UnsupportedVersion { .. })));
    let fetch = encode(1, 12, &kafka_protocol::messages::FetchRequest::default());
    assert!(matches!(produce_topics(&fetch, 12), Err(ScanError::HeaderMismatch { found_key: 1, .. })));
    assert!(matches!(produce_topics(&[0, 0, 0], 9), Err(ScanError::Frame(FrameError::TooShort(3)))));
    // A negative (non-null) records length.
    let frame = encode(0, 3, &produce_request(3));
    let scan = produce_topics(&frame, 3).unwrap();
    let at = scan.topics[0].partitions[0].range.start + 4;
    let mut m = frame.to_vec();
    m[at..at + 4].copy_from_slice(&(-2i32).to_be_bytes());
    assert!(matches!(produce_topics(&m, 3), Err(ScanError::NegativeLength { len: -2, .. })));
}

#[test]
fn produce_fuzz_never_panics_and_agrees_with_kafka_protocol() {
    for version in 3..=13 {
        let frame = encode(0, version, &produce_request(version));
        let walk = |f: &[u8]| produce_topics(f, version).map(|s| produce_summary(&s));
        assert_robust::<ProduceRequest, _>(&frame, version, walk, produce_expected(version));
    }
}

#[test]
fn produce_without_on_mutants_never_panics() {
    // Whatever frame passes the walk, cutting it rebuilds a frame that passes again.
    let frame = encode(0, 9, &produce_request(9));
    for i in 0..frame.len() {
        for v in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            let mut m = frame.to_vec();
            m[i] = v;
            let m = Bytes::from(m);
            if let Ok(scan) = produce_topics(&m, 9) {
                let out = produce_without(&m, 9, &scan, |_, p| p % 2 == 1).unwrap();
                produce_topics(&out, 9).unwrap();
            }
        }
    }
}

// --- DeleteRecords ------------------------------------------------------------------------

fn delete_records_request(version: i16, minimal: bool) -> DeleteRecordsRequest {
    let f = version >= 2;
    let topic = |n: &str, parts: &[i32]| {
        DeleteRecordsTopic::default()
            .with_name(name(n))
            .with_partitions(
                parts
                    .iter()
                    .map(|p| {
                        DeleteRecordsPartition::default()
                            .with_partition_index(*p)
                            .with_offset(1000 + i64::from(*p))
                            .with_unknown_tagged_fields(tags(f && !minimal))
                    })
                    .collect(),
            )
            .with_unknown_tagged_fields(tags(f && !minimal))
    };
    let topics = if minimal {
        (0..60).map(|_| topic("", &[])).chain([topic("", &(0..60).collect::<Vec<_>>())]).collect()
    } else {
        vec![topic("mirror.a", &[0, 3]), topic("b", &[]), topic("c", &[9])]
    };
    DeleteRecordsRequest::default().with_topics(topics).with_timeout_ms(5000).with_unknown_tagged_fields(tags(f))
}

fn delete_records_expected(r: &DeleteRecordsRequest) -> Vec<TopicPartitions> {
    r.topics
        .iter()
        .map(|t| TopicPartitions {
            name: t.name.clone(),
            partitions: t.partitions.iter().map(|p| p.partition_index).collect(),
        })
        .collect()
}

#[test]
fn delete_records_topics_all_versions() {
    for version in 0..=2 {
        let frame = encode(21, version, &delete_records_request(version, false));
        let got = delete_records_topics(&frame, version).unwrap();
        assert_eq!(got[0], TopicPartitions { name: name("mirror.a"), partitions: vec![0, 3] });
        assert_eq!(got.len(), 3);
        assert_robust::<DeleteRecordsRequest, _>(
            &frame,
            version,
            |f| delete_records_topics(f, version),
            delete_records_expected,
        );
        let req = delete_records_request(version, true);
        let frame = encode(21, version, &req);
        assert_eq!(delete_records_topics(&frame, version).unwrap(), delete_records_expected(&req));
    }
    assert!(matches!(
        delete_records_topics(&encode(21, 2, &delete_records_request(2, false)), 3),
        Err(ScanError::UnsupportedVersion { .. })
    ));
}

// --- CreatePartitions ---------------------------------------------------------------------

fn create_partitions_request(version: i16, minimal: bool) -> CreatePartitionsRequest {
    let f = version >= 2;
    let topic = |n: &str, assignments: Option<Vec<Vec<i32>>>| {
        CreatePartitionsTopic::default()
            .with_name(name(n))
            .with_count(6)
            .with_assignments(assignments.map(|a| {
                a.into_iter()
                    .map(|ids| {
                        CreatePartitionsAssignment::default()
                            .with_broker_ids(ids.into_iter().map(BrokerId).collect())
                            .with_unknown_tagged_fields(tags(f && !minimal))
                    })
                    .collect()
            }))
            .with_unknown_tagged_fields(tags(f && !minimal))
    };
    let topics = if minimal {
        (0..60).map(|_| topic("", None)).chain([topic("", Some(vec![vec![]; 60]))]).collect()
    } else {
        vec![topic("mirror.a", Some(vec![vec![1, 2], vec![3]])), topic("b", None), topic("c", Some(vec![]))]
    };
    CreatePartitionsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5000)
        .with_validate_only(true)
        .with_unknown_tagged_fields(tags(f))
}

fn create_partitions_expected(r: &CreatePartitionsRequest) -> Vec<TopicName> {
    r.topics.iter().map(|t| t.name.clone()).collect()
}

#[test]
fn create_partitions_topics_all_versions() {
    for version in 0..=3 {
        let frame = encode(37, version, &create_partitions_request(version, false));
        assert_eq!(create_partitions_topics(&frame, version).unwrap(), vec![name("mirror.a"), name("b"), name("c")]);
        assert_robust::<CreatePartitionsRequest, _>(
            &frame,
            version,
            |f| create_partitions_topics(f, version),
            create_partitions_expected,
        );
        let req = create_partitions_request(version, true);
        let frame = encode(37, version, &req);
        assert_eq!(create_partitions_topics(&frame, version).unwrap(), create_partitions_expected(&req));
    }
}

// --- DeleteTopics -------------------------------------------------------------------------

fn delete_topics_request(version: i16, minimal: bool) -> DeleteTopicsRequest {
    let f = version >= 4;
    let r = DeleteTopicsRequest::default().with_timeout_ms(5000).with_unknown_tagged_fields(tags(f));
    if version >= 6 {
        let topics = if minimal {
            (0..60).map(|_| DeleteTopicState::default()).collect()
        } else {
            vec![
                DeleteTopicState::default().with_name(Some(name("mirror.a"))).with_unknown_tagged_fields(tags(f)),
                DeleteTopicState::default().with_topic_id(uuid(9)),
                DeleteTopicState::default().with_name(Some(name("b"))).with_topic_id(uuid(7)),
            ]
        };
        r.with_topics(topics)
    } else if minimal {
        r.with_topic_names(vec![name(""); 60])
    } else {
        r.with_topic_names(vec![name("mirror.a"), name("b")])
    }
}

fn delete_topics_expected(version: i16) -> impl Fn(&DeleteTopicsRequest) -> Vec<DeleteTopicsEntry> {
    move |r| {
        if version >= 6 {
            r.topics
                .iter()
                .map(|t| {
                    let id = KafkaUuid(*t.topic_id.as_bytes());
                    DeleteTopicsEntry { name: t.name.clone(), topic_id: (id != KafkaUuid::ZERO).then_some(id) }
                })
                .collect()
        } else {
            r.topic_names.iter().map(|n| DeleteTopicsEntry { name: Some(n.clone()), topic_id: None }).collect()
        }
    }
}

#[test]
fn delete_topics_topics_all_versions() {
    for version in 1..=6 {
        let frame = encode(20, version, &delete_topics_request(version, false));
        let got = delete_topics_topics(&frame, version).unwrap();
        assert_eq!(got[0], DeleteTopicsEntry { name: Some(name("mirror.a")), topic_id: None });
        if version >= 6 {
            assert_eq!(got[1], DeleteTopicsEntry { name: None, topic_id: Some(KafkaUuid([9; 16])) });
            assert_eq!(got[2], DeleteTopicsEntry { name: Some(name("b")), topic_id: Some(KafkaUuid([7; 16])) });
        } else {
            assert_eq!(got.len(), 2);
        }
        assert_robust::<DeleteTopicsRequest, _>(
            &frame,
            version,
            |f| delete_topics_topics(f, version),
            delete_topics_expected(version),
        );
        let req = delete_topics_request(version, true);
        let frame = encode(20, version, &req);
        assert_eq!(delete_topics_topics(&frame, version).unwrap(), delete_topics_expected(version)(&req));
    }
    // v0 has v1's layout but kafka-protocol 0.18 (and Kafka 4) no longer decode it.
    let mut v0 = encode(20, 1, &delete_topics_request(1, false)).to_vec();
    v0[3] = 0;
    assert!(matches!(delete_topics_topics(&v0, 0), Err(ScanError::UnsupportedVersion { version: 0, .. })));
}

// --- AlterConfigs / IncrementalAlterConfigs / DescribeConfigs -----------------------------

fn resource_expected<'a>(it: impl Iterator<Item = (i8, &'a StrBytes)>) -> Vec<ConfigResourceRef> {
    it.map(|(t, n)| ConfigResourceRef { resource_type: t, resource_name: n.clone() }).collect()
}

fn alter_configs_request(version: i16, minimal: bool) -> AlterConfigsRequest {
    let f = version >= 2;
    let res = |t: i8, n: &str, configs: Vec<AlterableConfig>| {
        AlterConfigsResource::default()
            .with_resource_type(t)
            .with_resource_name(sb(n))
            .with_configs(configs)
            .with_unknown_tagged_fields(tags(f && !minimal))
    };
    let resources = if minimal {
        let nulls = vec![AlterableConfig::default().with_name(sb("")).with_value(None); 60];
        (0..60).map(|_| res(0, "", vec![])).chain([res(0, "", nulls)]).collect()
    } else {
        vec![
            res(
                2,
                "mirror.a",
                vec![
                    AlterableConfig::default().with_name(sb("retention.ms")).with_value(Some(sb("1000"))),
                    AlterableConfig::default()
                        .with_name(sb("cleanup.policy"))
                        .with_value(None)
                        .with_unknown_tagged_fields(tags(f)),
                ],
            ),
            res(4, "1", vec![]),
        ]
    };
    AlterConfigsRequest::default().with_resources(resources).with_unknown_tagged_fields(tags(f))
}

fn alter_configs_expected(r: &AlterConfigsRequest) -> Vec<ConfigResourceRef> {
    resource_expected(r.resources.iter().map(|r| (r.resource_type, &r.resource_name)))
}

#[test]
fn alter_configs_resources_all_versions() {
    for version in 0..=2 {
        let frame = encode(33, version, &alter_configs_request(version, false));
        let got = alter_configs_resources(&frame, version).unwrap();
        assert_eq!(got[0].topic(), Some(name("mirror.a")));
        assert_eq!((got[1].resource_type, got[1].topic()), (4, None));
        assert_robust::<AlterConfigsRequest, _>(
            &frame,
            version,
            |f| alter_configs_resources(f, version),
            alter_configs_expected,
        );
        let req = alter_configs_request(version, true);
        let frame = encode(33, version, &req);
        assert_eq!(alter_configs_resources(&frame, version).unwrap(), alter_configs_expected(&req));
    }
    // Same layout but another api key: refused.
    let frame = encode(33, 1, &alter_configs_request(1, false));
    assert!(matches!(incremental_alter_configs_resources(&frame, 1), Err(ScanError::HeaderMismatch { .. })));
}

fn incremental_request(version: i16, minimal: bool) -> inc::IncrementalAlterConfigsRequest {
    let f = version >= 1;
    let res = |t: i8, n: &str, configs: Vec<inc::AlterableConfig>| {
        inc::AlterConfigsResource::default()
            .with_resource_type(t)
            .with_resource_name(sb(n))
            .with_configs(configs)
            .with_unknown_tagged_fields(tags(f && !minimal))
    };
    let resources = if minimal {
        let nulls = vec![inc::AlterableConfig::default().with_name(sb("")).with_value(None); 60];
        (0..60).map(|_| res(0, "", vec![])).chain([res(0, "", nulls)]).collect()
    } else {
        vec![
            res(4, "", vec![inc::AlterableConfig::default().with_name(sb("x")).with_config_operation(1)]),
            res(
                2,
                "mirror.a",
                vec![inc::AlterableConfig::default()
                    .with_name(sb("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(sb("1000")))
                    .with_unknown_tagged_fields(tags(f))],
            ),
        ]
    };
    inc::IncrementalAlterConfigsRequest::default()
        .with_resources(resources)
        .with_validate_only(true)
        .with_unknown_tagged_fields(tags(f))
}

fn incremental_expected(r: &inc::IncrementalAlterConfigsRequest) -> Vec<ConfigResourceRef> {
    resource_expected(r.resources.iter().map(|r| (r.resource_type, &r.resource_name)))
}

#[test]
fn incremental_alter_configs_resources_all_versions() {
    for version in 0..=1 {
        let frame = encode(44, version, &incremental_request(version, false));
        let got = incremental_alter_configs_resources(&frame, version).unwrap();
        assert_eq!(got.iter().filter_map(ConfigResourceRef::topic).collect::<Vec<_>>(), vec![name("mirror.a")]);
        assert_robust::<inc::IncrementalAlterConfigsRequest, _>(
            &frame,
            version,
            |f| incremental_alter_configs_resources(f, version),
            incremental_expected,
        );
        let req = incremental_request(version, true);
        let frame = encode(44, version, &req);
        assert_eq!(incremental_alter_configs_resources(&frame, version).unwrap(), incremental_expected(&req));
    }
}

fn describe_configs_request(version: i16, minimal: bool) -> DescribeConfigsRequest {
    let f = version >= 4;
    let res = |t: i8, n: &str, keys: Option<Vec<StrBytes>>| {
        DescribeConfigsResource::default()
            .with_resource_type(t)
            .with_resource_name(sb(n))
            .with_configuration_keys(keys)
            .with_unknown_tagged_fields(tags(f && !minimal))
    };
    let resources = if minimal {
        (0..60).map(|_| res(0, "", None)).chain([res(0, "", Some(vec![sb(""); 60]))]).collect()
    } else {
        vec![res(2, "mirror.a", Some(vec![sb("retention.ms"), sb("cleanup.policy")])), res(2, "b", None)]
    };
    DescribeConfigsRequest::default()
        .with_resources(resources)
        .with_include_synonyms(true)
        .with_include_documentation(version >= 3)
        .with_unknown_tagged_fields(tags(f))
}

fn describe_configs_expected(r: &DescribeConfigsRequest) -> Vec<ConfigResourceRef> {
    resource_expected(r.resources.iter().map(|r| (r.resource_type, &r.resource_name)))
}

#[test]
fn describe_configs_resources_all_versions() {
    for version in 1..=4 {
        let frame = encode(32, version, &describe_configs_request(version, false));
        let got = describe_configs_resources(&frame, version).unwrap();
        assert_eq!(
            got.iter().filter_map(ConfigResourceRef::topic).collect::<Vec<_>>(),
            vec![name("mirror.a"), name("b")]
        );
        assert_robust::<DescribeConfigsRequest, _>(
            &frame,
            version,
            |f| describe_configs_resources(f, version),
            describe_configs_expected,
        );
        let req = describe_configs_request(version, true);
        let frame = encode(32, version, &req);
        assert_eq!(describe_configs_resources(&frame, version).unwrap(), describe_configs_expected(&req));
    }
}

// --- AddPartitionsToTxn -------------------------------------------------------------------

fn txn_topic(f: bool, n: &str, parts: Vec<i32>) -> AddPartitionsToTxnTopic {
    AddPartitionsToTxnTopic::default().with_name(name(n)).with_partitions(parts).with_unknown_tagged_fields(tags(f))
}

fn add_partitions_request(version: i16, minimal: bool) -> AddPartitionsToTxnRequest {
    let f = version >= 3 && !minimal;
    let topics = if minimal {
        (0..60).map(|_| txn_topic(f, "", vec![])).chain([txn_topic(f, "", vec![0; 60])]).collect()
    } else {
        vec![txn_topic(f, "mirror.a", vec![0, 2]), txn_topic(f, "b", vec![])]
    };
    let r = AddPartitionsToTxnRequest::default().with_unknown_tagged_fields(tags(version >= 3));
    if version >= 4 {
        let mut transactions = vec![AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(sb("t1")))
            .with_producer_id(ProducerId(11))
            .with_producer_epoch(2)
            .with_verify_only(true)
            .with_topics(topics)
            .with_unknown_tagged_fields(tags(f))];
        if minimal {
            transactions.extend(
                (0..60)
                    .map(|_| AddPartitionsToTxnTransaction::default().with_transactional_id(TransactionalId(sb("")))),
            );
        } else {
            transactions.push(
                AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(TransactionalId(sb("t2")))
                    .with_producer_id(ProducerId(12))
                    .with_topics(vec![txn_topic(f, "c", vec![5])]),
            );
        }
        r.with_transactions(transactions)
    } else {
        r.with_v3_and_below_transactional_id(TransactionalId(sb("t1")))
            .with_v3_and_below_producer_id(ProducerId(11))
            .with_v3_and_below_producer_epoch(2)
            .with_v3_and_below_topics(topics)
    }
}

fn add_partitions_expected(version: i16) -> impl Fn(&AddPartitionsToTxnRequest) -> Vec<TxnTopics> {
    move |r| {
        let topics = |ts: &[AddPartitionsToTxnTopic]| {
            ts.iter().map(|t| TopicPartitions { name: t.name.clone(), partitions: t.partitions.clone() }).collect()
        };
        if version >= 4 {
            r.transactions
                .iter()
                .map(|t| TxnTopics {
                    transactional_id: t.transactional_id.0.clone(),
                    producer_id: t.producer_id.0,
                    producer_epoch: t.producer_epoch,
                    verify_only: t.verify_only,
                    topics: topics(&t.topics),
                })
                .collect()
        } else {
            vec![TxnTopics {
                transactional_id: r.v3_and_below_transactional_id.0.clone(),
                producer_id: r.v3_and_below_producer_id.0,
                producer_epoch: r.v3_and_below_producer_epoch,
                verify_only: false,
                topics: topics(&r.v3_and_below_topics),
            }]
        }
    }
}

#[test]
fn add_partitions_to_txn_topics_all_versions() {
    for version in 0..=5 {
        let frame = encode(24, version, &add_partitions_request(version, false));
        let got = add_partitions_to_txn_topics(&frame, version).unwrap();
        assert_eq!(got[0].transactional_id, sb("t1"));
        assert_eq!((got[0].producer_id, got[0].producer_epoch, got[0].verify_only), (11, 2, version >= 4));
        assert_eq!(got[0].topics[0], TopicPartitions { name: name("mirror.a"), partitions: vec![0, 2] });
        assert_eq!(got.len(), if version >= 4 { 2 } else { 1 });
        assert_robust::<AddPartitionsToTxnRequest, _>(
            &frame,
            version,
            |f| add_partitions_to_txn_topics(f, version),
            add_partitions_expected(version),
        );
        let req = add_partitions_request(version, true);
        let frame = encode(24, version, &req);
        assert_eq!(add_partitions_to_txn_topics(&frame, version).unwrap(), add_partitions_expected(version)(&req));
    }
}

// --- Shared ---------------------------------------------------------------------------------

#[test]
fn supported_versions_match_kafka_protocol() {
    use kafka_protocol::protocol::Message;
    let cases: [(i16, VersionRange); 8] = [
        (0, ProduceRequest::VERSIONS),
        (20, DeleteTopicsRequest::VERSIONS),
        (21, DeleteRecordsRequest::VERSIONS),
        (24, AddPartitionsToTxnRequest::VERSIONS),
        (32, DescribeConfigsRequest::VERSIONS),
        (33, AlterConfigsRequest::VERSIONS),
        (37, CreatePartitionsRequest::VERSIONS),
        (44, inc::IncrementalAlterConfigsRequest::VERSIONS),
    ];
    for (key, range) in cases {
        assert_eq!(supported_versions(key), Some(range), "api key {key}");
    }
    assert_eq!(supported_versions(1), None);
}

#[test]
fn hostile_header_and_tagged_fields_are_errors() {
    let frame = encode(0, 9, &produce_request(9));
    // A client_id length running past the frame.
    let mut m = frame.to_vec();
    m[8..10].copy_from_slice(&0x7fffi16.to_be_bytes());
    assert!(matches!(produce_topics(&m, 9), Err(ScanError::Header(HeaderError::Truncated))));
    // A request-level tagged-field count of 0x7fffffff.
    let scan = produce_topics(&frame, 9).unwrap();
    let tags_at = scan.topics.last().unwrap().range.end;
    let m = with_huge_count(&frame, tags_at..tags_at + 1, true);
    assert!(matches!(
        produce_topics(&m, 9),
        Err(ScanError::Wire(WireError::CountExceedsRemaining { count: 0x7fff_ffff, .. }))
    ));
}
