//! Zero-copy Produce frames ([`ProduceFrameBuilder`] + [`BrokerConnection::send_produce`])
//! against a real broker (1 node, Kafka 4.1.1): a request over two topics and three partitions,
//! each partition's batch given as `[patched header, untouched payload]` or as one whole batch,
//! lands every batch at the expected base offset, for every Produce version from 9 up to what
//! the broker offers (v13 names topics by id). The batches read back by Fetch carry exactly
//! the bytes that were sent (apart from the fields the broker assigns).

mod support;

use std::collections::HashMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, FetchRequest, ListOffsetsRequest, MetadataRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use mirrorgate::client::BrokerConnection;
use mirrorgate::wire::batch::{self, BatchIter, HeaderPatch, OwnBatch, HEADER_LEN};
use mirrorgate::wire::produce::{ProduceFrameBuilder, ProduceTopic};
use uuid::Uuid;

const V: &str = "4.1.1";

async fn connect() -> BrokerConnection {
    let cluster = support::cluster("dest");
    let addr = cluster.bootstrap.split(',').next().unwrap().to_string();
    BrokerConnection::connect(&addr, Duration::from_secs(10), Duration::from_secs(30), 100 << 20)
        .await
        .expect("connect to the test broker")
}

fn create_topic(topic: &str, partitions: u32) {
    let cluster = support::cluster("dest");
    let bs = cluster.bootstrap.as_str();
    let p = partitions.to_string();
    let out = support::kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", &p, "--replication-factor", "1"],
        None,
    );
    assert!(out.contains(&format!("Created topic {topic}")), "{out}");
}

/// An uncompressed, non-idempotent data batch of `count` records of `value_len` bytes.
fn data_batch(count: usize, value_len: usize, tag: u8) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kafka-protocol starts a new batch where `offset - sequence` changes; this keeps
            // one batch with baseSequence -1 (no idempotence).
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("key-{tag}-{i}"))),
            value: Some(Bytes::from(vec![tag.wrapping_add(i as u8); value_len])),
            headers: IndexMap::new(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(&mut out, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .unwrap();
    let out = out.freeze();
    let mut batches = BatchIter::new(out.clone());
    let b = batches.next().unwrap().unwrap();
    assert!(batches.next().is_none(), "one batch");
    assert_eq!((b.record_count(), b.base_sequence(), b.producer_id()), (count as i32, -1, -1));
    out
}

/// The records of one partition as the mirror sends them: a patched header and the untouched
/// payload (or, for placeholders, the whole batch as one segment).
fn segments(whole: &Bytes, patch: bool) -> Vec<Bytes> {
    if !patch {
        return vec![whole.clone()];
    }
    let b = BatchIter::new(whole.clone()).next().unwrap().unwrap();
    let h =
        batch::patch_header(&b, &HeaderPatch { base_offset: Some(0), clear_transactional: true, ..Default::default() });
    vec![Bytes::copy_from_slice(&h), b.payload()]
}

async fn produce_max_version(conn: &mut BrokerConnection) -> i16 {
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("mirrorgate-test"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"));
    let resp = conn.send(&req, 3).await.unwrap();
    assert_eq!(resp.error_code, 0, "ApiVersions: {resp:?}");
    resp.api_keys.iter().find(|k| k.api_key == ApiKey::Produce as i16).expect("Produce in ApiVersions").max_version
}

async fn topic_ids(conn: &mut BrokerConnection, names: &[&str]) -> HashMap<String, Uuid> {
    let req = MetadataRequest::default().with_topics(Some(
        names
            .iter()
            .map(|n| MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(n.to_string())))))
            .collect(),
    ));
    let resp = conn.send(&req, 12).await.unwrap();
    resp.topics.iter().map(|t| (t.name.as_ref().unwrap().0.to_string(), t.topic_id)).collect()
}

/// Waits (30 s at most) until the broker leads every partition of `topics` (name, partition
/// count) and answers ListOffsets for it: a Produce sent right after creation can otherwise
/// meet NOT_LEADER_OR_FOLLOWER (metadata may show the leader before the partition is loaded).
async fn wait_for_leaders(conn: &mut BrokerConnection, topics: &[(&str, i32)]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let req = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(
        topics
            .iter()
            .map(|(name, count)| {
                ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name.to_string())))
                    .with_partitions(
                        (0..*count)
                            .map(|p| ListOffsetsPartition::default().with_partition_index(p).with_timestamp(-1))
                            .collect(),
                    )
            })
            .collect(),
    );
    loop {
        let resp = conn.send(&req, 7).await.unwrap();
        let answered: i32 =
            resp.topics.iter().map(|t| t.partitions.iter().filter(|p| p.error_code == 0).count() as i32).sum();
        if answered == topics.iter().map(|(_, c)| c).sum::<i32>() {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{topics:?} not writable within 30 s; last: {resp:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Base offset and error code per (topic name, partition) in a Produce response.
fn outcomes(resp: &ProduceResponse, ids: &HashMap<String, Uuid>) -> HashMap<(String, i32), (i16, i64)> {
    let mut out = HashMap::new();
    for t in &resp.responses {
        let name = if t.name.0.is_empty() {
            ids.iter().find(|(_, id)| **id == t.topic_id).map(|(n, _)| n.clone()).expect("known topic id")
        } else {
            t.name.0.to_string()
        };
        for p in &t.partition_responses {
            out.insert((name.clone(), p.index), (p.error_code, p.base_offset));
        }
    }
    out
}

/// Every batch of `topic`-`partition` from offset 0.
async fn fetch_all(conn: &mut BrokerConnection, topic: &str, partition: i32) -> Vec<Bytes> {
    let req = FetchRequest::default().with_max_wait_ms(0).with_min_bytes(1).with_max_bytes(50 << 20).with_topics(vec![
        FetchTopic::default().with_topic(TopicName(StrBytes::from_string(topic.to_string()))).with_partitions(vec![
            FetchPartition::default().with_partition(partition).with_fetch_offset(0).with_partition_max_bytes(50 << 20),
        ]),
    ]);
    let resp = conn.send(&req, 12).await.unwrap();
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch {topic}-{partition}");
    let records = p.records.clone().unwrap_or_default();
    let mut iter = BatchIter::new(records);
    let out: Vec<Bytes> = iter.by_ref().map(|b| b.unwrap().bytes().clone()).collect();
    assert_eq!(iter.truncated_at(), None);
    out
}

#[tokio::test(flavor = "current_thread")]
async fn two_topics_three_partitions_land_at_the_expected_offsets() {
    let mut conn = connect().await;
    let max = produce_max_version(&mut conn).await.min(13);
    assert!(max >= 12, "Kafka {V} offers Produce v{max}");
    eprintln!("testing Produce v9..=v{max}");
    let mut correlation_id = 1_000_000;
    for version in 9..=max {
        let a = support::unique_name("produce-frames-a");
        let b = support::unique_name("produce-frames-b");
        create_topic(&a, 2);
        create_topic(&b, 1);
        wait_for_leaders(&mut conn, &[(&a, 2), (&b, 1)]).await;
        let ids = topic_ids(&mut conn, &[&a, &b]).await;
        let topic = |name: &str| -> ProduceTopic {
            if version >= 13 {
                ids[name].into()
            } else {
                name.into()
            }
        };
        // Partitions in a mixed order: the builder groups by topic and keeps first-seen order.
        let parts = [(a.clone(), 1), (b.clone(), 0), (a.clone(), 0)];
        let mut sent: HashMap<(String, i32), Vec<Bytes>> = HashMap::new();
        let mut next: HashMap<(String, i32), i64> = HashMap::new();
        for round in 0..3u8 {
            let mut builder = ProduceFrameBuilder::new(version, correlation_id, "produce-frames-test", -1, 30_000);
            correlation_id += 1;
            let mut expected = HashMap::new();
            for (i, (t, p)) in parts.iter().enumerate() {
                let key = (t.clone(), *p);
                let (whole, patch) = if (round as usize + i) % 3 == 2 {
                    let own = OwnBatch {
                        base_offset: 0,
                        count: 4,
                        timestamp: 1_700_000_000_000,
                        producer_id: -1,
                        producer_epoch: -1,
                        base_sequence: -1,
                    };
                    (batch::placeholder_batch(&own, 7, 0), false)
                } else {
                    (data_batch(1 + i + round as usize, 700 * (i + 1), round * 10 + i as u8), true)
                };
                let count = BatchIter::new(whole.clone()).next().unwrap().unwrap().next_offset();
                let base = *next.get(&key).unwrap_or(&0);
                expected.insert(key.clone(), base);
                next.insert(key.clone(), base + count);
                sent.entry(key).or_default().push(whole.clone());
                builder.partition(topic(t), *p, segments(&whole, patch));
            }
            let frame = builder.finish().unwrap();
            assert!(frame.segments.len() >= 6);
            let resp = conn.send_produce(frame).await.unwrap();
            let got = outcomes(&resp, &ids);
            assert_eq!(got.len(), 3, "v{version} round {round}: {resp:?}");
            for (key, base) in &expected {
                assert_eq!(got[key], (0, *base), "v{version} round {round} {key:?}");
            }
        }

        // acks=0: no response; the next request on the same connection shows it landed.
        let key = (b.clone(), 0);
        let mut builder = ProduceFrameBuilder::new(version, correlation_id, "produce-frames-test", 0, 30_000);
        correlation_id += 1;
        let whole = data_batch(2, 100, 99);
        builder.partition(topic(&b), 0, segments(&whole, true));
        let resp = conn.send_produce(builder.finish().unwrap()).await.unwrap();
        assert!(resp.responses.is_empty());
        sent.get_mut(&key).unwrap().push(whole);
        let base_after_acks0 = next[&key] + 2;
        let mut builder = ProduceFrameBuilder::new(version, correlation_id, "produce-frames-test", 1, 30_000);
        correlation_id += 1;
        let whole = data_batch(1, 10, 100);
        builder.partition(topic(&b), 0, segments(&whole, true));
        let resp = conn.send_produce(builder.finish().unwrap()).await.unwrap();
        assert_eq!(outcomes(&resp, &ids)[&key], (0, base_after_acks0), "v{version}: after acks=0");
        sent.get_mut(&key).unwrap().push(whole);

        // Read back: the same batches, in order, at contiguous offsets, with the bytes we sent
        // from `attributes` on (the broker assigns base offset and leader epoch only).
        for (key, batches) in &sent {
            let landed = fetch_all(&mut conn, &key.0, key.1).await;
            assert_eq!(landed.len(), batches.len(), "v{version} {key:?}");
            let mut offset = 0;
            for (got, want) in landed.iter().zip(batches) {
                let g = BatchIter::new(got.clone()).next().unwrap().unwrap();
                assert_eq!(g.base_offset(), offset, "v{version} {key:?}");
                assert!(g.crc_is_valid());
                assert_eq!(got[21..], want[21..], "v{version} {key:?} at {offset}");
                assert_eq!(got.len(), want.len());
                assert!(got.len() > HEADER_LEN);
                offset = g.next_offset();
            }
        }
    }
}

/// A frame of ~7 MiB (8 partitions × one ~900 KiB batch) is more than a loopback socket takes
/// in one `writev`: the partial-write path must resume mid-segment without losing or repeating
/// a byte, or the broker would reject the frame (bad CRC, bad size) or hang.
#[tokio::test(flavor = "current_thread")]
async fn a_frame_larger_than_the_socket_buffer_is_written_whole() {
    let mut conn = connect().await;
    let topic = support::unique_name("produce-frames-big");
    create_topic(&topic, 8);
    wait_for_leaders(&mut conn, &[(&topic, 8)]).await;
    let mut builder = ProduceFrameBuilder::new(9, 77, "produce-frames-test", -1, 30_000);
    let mut sent = Vec::new();
    for p in 0..8 {
        let whole = data_batch(9, 100_000, p as u8);
        builder.partition(topic.as_str(), p, segments(&whole, true));
        sent.push(whole);
    }
    let frame = builder.finish().unwrap();
    assert!(frame.len > 7_000_000, "{}", frame.len);
    let resp = conn.send_produce(frame).await.unwrap();
    let got = outcomes(&resp, &HashMap::new());
    for (p, want) in sent.iter().enumerate() {
        assert_eq!(got[&(topic.clone(), p as i32)], (0, 0), "partition {p}");
        let landed = fetch_all(&mut conn, &topic, p as i32).await;
        assert_eq!(landed.len(), 1);
        assert_eq!(landed[0][21..], want[21..], "partition {p}");
    }
}
