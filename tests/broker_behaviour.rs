//! Pins, against a real Kafka 4.1.1 broker (1 node), every broker behaviour the mirror's
//! offset-preserving write path rests on (DESIGN §4): broker-assigned offsets, byte-exact
//! compressed payloads, idempotent-producer sequence rules and their expiry, the batches a
//! client may not write, one batch per partition per request, DeleteRecords, placeholder
//! batches, what a read_committed Fetch of a transactional source returns and idempotent
//! Produce requests pipelined on one connection.
//!
//! Every test talks to the broker directly with `BrokerConnection` (the pipelining test over a
//! raw TCP stream) and kafka-protocol messages (Produce v11 with raw record bytes, Fetch v12,
//! InitProducerId with a null transactional id, ListOffsets, DeleteRecords, CreateTopics with
//! configs) and asserts on offsets, bytes and error codes. `docs/broker-behaviour.md`
//! summarises each fact with the test that pins it.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, DeleteRecordsRequest, FetchRequest, InitProducerIdRequest, ListOffsetsRequest,
    ProduceRequest, ProduceResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use mirrorgate::client::BrokerConnection;
use mirrorgate::wire::batch::{
    control_batch, patch_header, placeholder_batch, Batch, BatchIter, HeaderPatch, OwnBatch, ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL, HEADER_LEN, PLACEHOLDER_MAGIC,
};
use support::Cluster;

const V: &str = "4.1.1";
const FOREVER: &str = "9223372036854775807";
/// Topic configs the mirror sets on destination topics (DESIGN §4.9).
const MIRROR_TOPIC: &[(&str, &str)] = &[
    ("message.timestamp.type", "CreateTime"),
    ("message.timestamp.before.max.ms", FOREVER),
    ("message.timestamp.after.max.ms", FOREVER),
    ("compression.type", "producer"),
];

// Kafka error codes.
const UNKNOWN_SERVER_ERROR: i16 = -1;
const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const INVALID_TIMESTAMP: i16 = 32;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_RECORD: i16 = 87;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

const YEAR_MS: i64 = 365 * 24 * 3600 * 1000;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn pin_cluster() -> std::sync::Arc<Cluster> {
    support::cluster_with("pin", 1, V, &[])
}

fn expiry_cluster() -> std::sync::Arc<Cluster> {
    support::cluster_with(
        "pin-expiry",
        1,
        V,
        &["producer.id.expiration.ms=10000", "producer.id.expiration.check.interval.ms=500"],
    )
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Record batches built by hand (uncompressed), and a reader for uncompressed ones.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    offset_delta: i32,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Rec {
    fn kv(offset_delta: i32, timestamp: i64, key: &str, value: &str) -> Self {
        Self {
            offset_delta,
            timestamp,
            key: Some(key.as_bytes().to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: vec![],
        }
    }
}

fn put_varlong(out: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    out.put_u8(z as u8);
}

fn put_bytes(out: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.put_slice(b);
        }
        None => put_varlong(out, -1),
    }
}

/// Header fields of a hand-built batch.
#[derive(Debug, Clone, Copy)]
struct Hdr {
    base_offset: i64,
    attributes: i16,
    /// `None`: the last record's offset delta.
    last_offset_delta: Option<i32>,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

impl Default for Hdr {
    fn default() -> Self {
        Self {
            base_offset: 0,
            attributes: 0,
            last_offset_delta: None,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    }
}

/// An uncompressed v2 batch of `recs` (base timestamp = min, max timestamp = max).
fn build_batch(h: Hdr, recs: &[Rec]) -> Bytes {
    let base_ts = recs.iter().map(|r| r.timestamp).min().unwrap();
    let max_ts = recs.iter().map(|r| r.timestamp).max().unwrap();
    let last_delta = h.last_offset_delta.unwrap_or_else(|| recs.last().unwrap().offset_delta);
    let mut out = BytesMut::new();
    out.put_i64(h.base_offset);
    out.put_i32(0);
    out.put_i32(-1);
    out.put_i8(2);
    out.put_u32(0);
    out.put_i16(h.attributes);
    out.put_i32(last_delta);
    out.put_i64(base_ts);
    out.put_i64(max_ts);
    out.put_i64(h.producer_id);
    out.put_i16(h.producer_epoch);
    out.put_i32(h.base_sequence);
    out.put_i32(recs.len() as i32);
    for r in recs {
        let mut body = BytesMut::new();
        body.put_i8(0);
        put_varlong(&mut body, r.timestamp - base_ts);
        put_varlong(&mut body, i64::from(r.offset_delta));
        put_bytes(&mut body, r.key.as_deref());
        put_bytes(&mut body, r.value.as_deref());
        put_varlong(&mut body, r.headers.len() as i64);
        for (k, v) in &r.headers {
            put_bytes(&mut body, Some(k));
            put_bytes(&mut body, v.as_deref());
        }
        put_varlong(&mut out, body.len() as i64);
        out.put_slice(&body);
    }
    let len = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

fn read_varlong(b: &[u8], pos: &mut usize) -> i64 {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return ((v >> 1) as i64) ^ -((v & 1) as i64);
        }
        shift += 7;
    }
}

fn read_bytes(b: &[u8], pos: &mut usize) -> Option<Vec<u8>> {
    let len = read_varlong(b, pos);
    if len < 0 {
        return None;
    }
    let v = b[*pos..*pos + len as usize].to_vec();
    *pos += len as usize;
    Some(v)
}

/// The records of an uncompressed batch, with absolute timestamps (offset_delta kept).
fn records_of(batch: &Batch) -> Vec<Rec> {
    assert_eq!(batch.compression(), 0, "records_of reads uncompressed batches only");
    let b = &batch.bytes()[HEADER_LEN..];
    let mut pos = 0;
    let mut out = vec![];
    for _ in 0..batch.record_count() {
        let len = read_varlong(b, &mut pos) as usize;
        let end = pos + len;
        pos += 1; // attributes
        let ts = batch.base_timestamp() + read_varlong(b, &mut pos);
        let offset_delta = read_varlong(b, &mut pos) as i32;
        let key = read_bytes(b, &mut pos);
        let value = read_bytes(b, &mut pos);
        let n = read_varlong(b, &mut pos);
        let headers = (0..n).map(|_| (read_bytes(b, &mut pos).unwrap(), read_bytes(b, &mut pos))).collect();
        assert_eq!(pos, end, "record length");
        out.push(Rec { offset_delta, timestamp: ts, key, value, headers });
    }
    out
}

/// Runs `gzip ARGS` on `input` (the system gzip: Kafka's gzip codec is a plain gzip stream).
fn gzip(args: &[&str], input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = std::process::Command::new("gzip")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gzip");
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success());
    out.stdout
}

/// The gzip-compressed form of an uncompressed batch (same header fields, codec 1).
fn gzip_batch(uncompressed: &Bytes) -> Bytes {
    let mut out = BytesMut::from(&uncompressed[..HEADER_LEN]);
    out.extend_from_slice(&gzip(&["-c", "-n"], &uncompressed[HEADER_LEN..]));
    let attrs = i16::from_be_bytes([out[21], out[22]]) | 1;
    out[21..23].copy_from_slice(&attrs.to_be_bytes());
    let len = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// Records of an uncompressed or gzip batch.
fn records_of_any(batch: &Batch) -> Vec<Rec> {
    match batch.compression() {
        0 => records_of(batch),
        1 => {
            let mut raw = BytesMut::from(&batch.bytes()[..HEADER_LEN]);
            raw.extend_from_slice(&gzip(&["-d", "-c"], &batch.payload()));
            raw[21..23].copy_from_slice(&(batch.attributes() & !7).to_be_bytes());
            let len = (raw.len() - 12) as i32;
            raw[8..12].copy_from_slice(&len.to_be_bytes());
            records_of(&batches(&raw.freeze())[0])
        }
        c => panic!("codec {c} not readable here"),
    }
}

fn batches(records: &Bytes) -> Vec<Batch> {
    BatchIter::new(records.clone()).map(|b| b.expect("valid batch")).collect()
}

// ---------------------------------------------------------------------------------------------
// The broker, spoken to directly.
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Produced {
    error: i16,
    base_offset: i64,
    #[allow(dead_code)] // shown in assertion messages
    message: String,
}

#[derive(Debug)]
struct Fetched {
    error: i16,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    aborted: Option<Vec<(i64, i64)>>,
    records: Bytes,
}

/// A sessionless Fetch v12 of partition 0 of each of `topics` (topic, fetch offset), with no
/// wait: `partition_max_bytes` per partition, `max_bytes` in all.
fn fetch_request(
    topics: &[(&str, i64)],
    partition_max_bytes: i32,
    max_bytes: i32,
    isolation_level: i8,
) -> FetchRequest {
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = max_bytes;
    req.isolation_level = isolation_level;
    req.session_id = 0;
    req.session_epoch = -1;
    req.topics = topics
        .iter()
        .map(|(topic, offset)| {
            let mut p = FetchPartition::default();
            p.partition = 0;
            p.current_leader_epoch = -1;
            p.fetch_offset = *offset;
            p.last_fetched_epoch = -1;
            p.log_start_offset = -1;
            p.partition_max_bytes = partition_max_bytes;
            let mut t = FetchTopic::default();
            t.topic = name(topic);
            t.partitions = vec![p];
            t
        })
        .collect();
    req
}

/// A Produce request (acks=all, timeout 30 s) with `records` for partition 0 of each topic.
fn produce_request(parts: &[(&str, Bytes)], transactional_id: Option<&str>) -> ProduceRequest {
    let mut req = ProduceRequest::default();
    req.transactional_id = transactional_id.map(|t| StrBytes::from_string(t.to_string()).into());
    req.acks = -1;
    req.timeout_ms = 30_000;
    for (topic, records) in parts {
        let mut pd = PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(records.clone());
        let mut td = TopicProduceData::default();
        td.name = name(topic);
        td.partition_data = vec![pd];
        req.topic_data.push(td);
    }
    req
}

/// Partition 0 of `topic` in a Produce response.
fn produced(resp: &ProduceResponse, topic: &str) -> Produced {
    let t = resp.responses.iter().find(|t| t.name.0.as_str() == topic).expect("topic in response");
    let p = &t.partition_responses[0];
    let mut message = p.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
    for re in &p.record_errors {
        message.push_str(&format!(
            "; record {}: {}",
            re.batch_index,
            re.batch_index_error_message.as_ref().map(|m| m.to_string()).unwrap_or_default()
        ));
    }
    Produced { error: p.error_code, base_offset: p.base_offset, message }
}

struct Broker {
    conn: BrokerConnection,
}

impl Broker {
    async fn connect(cluster: &Cluster) -> Self {
        let addr = cluster.bootstrap.split(',').next().unwrap().to_string();
        let conn = BrokerConnection::connect(&addr, Duration::from_secs(10), Duration::from_secs(30), 64 << 20)
            .await
            .expect("connect to the broker");
        Self { conn }
    }

    /// Creates a 1-partition topic; returns the error code and message.
    async fn try_create_topic(&mut self, topic: &str, configs: &[(&str, &str)]) -> (i16, String) {
        let mut t = CreatableTopic::default();
        t.name = name(topic);
        t.num_partitions = 1;
        t.replication_factor = 1;
        t.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut c = CreatableTopicConfig::default();
                c.name = StrBytes::from_string(k.to_string());
                c.value = Some(StrBytes::from_string(v.to_string()));
                c
            })
            .collect();
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let resp = self.conn.send(&req, 7).await.expect("CreateTopics");
        let r = &resp.topics[0];
        (r.error_code, r.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default())
    }

    /// Creates a 1-partition topic and waits until its leader serves it.
    async fn create_topic(&mut self, topic: &str, configs: &[(&str, &str)]) {
        let (code, msg) = self.try_create_topic(topic, configs).await;
        assert_eq!(code, NONE, "CreateTopics {topic} {configs:?}: {msg}");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (code, _) = self.try_list_offset(topic, -1).await;
            if code == NONE {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{topic} not served after 30 s (ListOffsets error {code})");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn produce(&mut self, topic: &str, records: Bytes) -> Produced {
        self.produce_many(&[(topic, records)], None).await.remove(0)
    }

    /// One Produce request (v11, acks=all) with partition 0 of each topic; results in order.
    async fn produce_many(&mut self, parts: &[(&str, Bytes)], transactional_id: Option<&str>) -> Vec<Produced> {
        let resp = self.conn.send(&produce_request(parts, transactional_id), 11).await.expect("Produce");
        parts.iter().map(|(topic, _)| produced(&resp, topic)).collect()
    }

    /// Produces and asserts success; returns the base offset.
    async fn produce_ok(&mut self, topic: &str, records: Bytes) -> i64 {
        let p = self.produce(topic, records).await;
        assert_eq!(p.error, NONE, "produce to {topic}: {p:?}");
        p.base_offset
    }

    async fn fetch(&mut self, topic: &str, offset: i64, isolation_level: i8) -> Fetched {
        let req = fetch_request(&[(topic, offset)], 16 << 20, 32 << 20, isolation_level);
        let resp = self.conn.send(&req, 12).await.expect("Fetch");
        assert_eq!(resp.error_code, NONE, "Fetch top-level error");
        let p = &resp.responses[0].partitions[0];
        Fetched {
            error: p.error_code,
            high_watermark: p.high_watermark,
            last_stable_offset: p.last_stable_offset,
            log_start_offset: p.log_start_offset,
            aborted: p
                .aborted_transactions
                .as_ref()
                .map(|v| v.iter().map(|a| (a.producer_id.0, a.first_offset)).collect()),
            records: p.records.clone().unwrap_or_default(),
        }
    }

    /// All batches from `offset` to the high watermark (read_uncommitted).
    async fn fetch_all(&mut self, topic: &str, offset: i64) -> Vec<Batch> {
        let mut out = vec![];
        let mut at = offset;
        loop {
            let f = self.fetch(topic, at, 0).await;
            assert_eq!(f.error, NONE, "fetch {topic} at {at}");
            let got = batches(&f.records);
            if let Some(last) = got.last() {
                at = last.next_offset();
            }
            out.extend(got);
            if at >= f.high_watermark {
                return out;
            }
        }
    }

    async fn init_producer_id(&mut self) -> (i64, i16) {
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = None;
        req.transaction_timeout_ms = -1;
        req.producer_id = ProducerId(-1);
        req.producer_epoch = -1;
        // Right after startup the broker may still be fetching a producer-id block from the
        // controller: COORDINATOR_LOAD_IN_PROGRESS (14) / NOT_COORDINATOR (16) are retriable.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let resp = self.conn.send(&req, 4).await.expect("InitProducerId");
            if resp.error_code == NONE {
                return (resp.producer_id.0, resp.producer_epoch);
            }
            assert!(
                matches!(resp.error_code, 14..=16) && std::time::Instant::now() < deadline,
                "InitProducerId error {}",
                resp.error_code
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn try_list_offset(&mut self, topic: &str, timestamp: i64) -> (i16, i64) {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = 0;
        p.current_leader_epoch = -1;
        p.timestamp = timestamp;
        let mut t = ListOffsetsTopic::default();
        t.name = name(topic);
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(-1);
        req.isolation_level = 0;
        req.topics = vec![t];
        let resp = self.conn.send(&req, 7).await.expect("ListOffsets");
        let p = &resp.topics[0].partitions[0];
        (p.error_code, p.offset)
    }

    /// Log end offset (high watermark; 1 replica).
    async fn log_end(&mut self, topic: &str) -> i64 {
        let (code, off) = self.try_list_offset(topic, -1).await;
        assert_eq!(code, NONE, "ListOffsets latest {topic}");
        off
    }

    async fn log_start(&mut self, topic: &str) -> i64 {
        let (code, off) = self.try_list_offset(topic, -2).await;
        assert_eq!(code, NONE, "ListOffsets earliest {topic}");
        off
    }

    async fn delete_records(&mut self, topic: &str, offset: i64) -> (i16, i64) {
        let mut p = DeleteRecordsPartition::default();
        p.partition_index = 0;
        p.offset = offset;
        let mut t = DeleteRecordsTopic::default();
        t.name = name(topic);
        t.partitions = vec![p];
        let mut req = DeleteRecordsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let resp = self.conn.send(&req, 2).await.expect("DeleteRecords");
        let p = &resp.topics[0].partitions[0];
        (p.error_code, p.low_watermark)
    }
}

/// `count` records "key-i" / "value-i" at `timestamp`, as an idempotent batch.
fn idem_batch(pid: i64, epoch: i16, seq: i32, count: i32, timestamp: i64, tag: &str) -> Bytes {
    let recs: Vec<Rec> =
        (0..count).map(|i| Rec::kv(i, timestamp, &format!("{tag}-k{i}"), &format!("{tag}-v{i}"))).collect();
    build_batch(Hdr { producer_id: pid, producer_epoch: epoch, base_sequence: seq, ..Hdr::default() }, &recs)
}

// ---------------------------------------------------------------------------------------------
// 1. Offsets are assigned by the broker; records and timestamps round-trip unchanged.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn broker_assigns_offsets_and_keeps_records_and_any_timestamp_unchanged() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-offsets");
    b.create_topic(&topic, MIRROR_TOPIC).await;

    let now = now_ms();
    // Kafka 4.1 refuses a v2 batch whose baseOffset is not 0 (UnifiedLog
    // analyzeAndValidateRecords: "The baseOffset of the record batch in the append to ...
    // should be 0"): a copied source batch must have its baseOffset patched to 0.
    for claimed in [999_999, 1, -12345] {
        let p = b
            .produce(&topic, build_batch(Hdr { base_offset: claimed, ..Hdr::default() }, &[Rec::kv(0, now, "a", "1")]))
            .await;
        assert_eq!(p.error, INVALID_RECORD, "baseOffset {claimed}: {p:?}");
    }
    assert_eq!(b.log_end(&topic).await, 0, "refused batches append nothing");
    let first = build_batch(Hdr::default(), &[Rec::kv(0, now, "a", "1"), Rec::kv(1, now, "b", "2")]);
    assert_eq!(b.produce_ok(&topic, first.clone()).await, 0);
    // The offset is the log end, not the batch's: the same bytes again land at 2.
    assert_eq!(b.produce_ok(&topic, first).await, 2, "offsets are assigned at the log end");

    let recs = vec![
        Rec {
            offset_delta: 0,
            timestamp: 0, // 1970
            key: Some(b"epoch".to_vec()),
            value: Some(b"the first millisecond".to_vec()),
            headers: vec![(b"h1".to_vec(), Some(b"x".to_vec())), (b"h2".to_vec(), None)],
        },
        Rec {
            offset_delta: 1,
            timestamp: now + YEAR_MS, // a year ahead
            key: None,
            value: Some(vec![0u8, 255, 1, 254]),
            headers: vec![(b"trace".to_vec(), Some(vec![7; 40]))],
        },
        Rec { offset_delta: 2, timestamp: now, key: Some(b"tomb".to_vec()), value: None, headers: vec![] },
    ];
    let sent = build_batch(Hdr::default(), &recs);
    assert_eq!(b.produce_ok(&topic, sent.clone()).await, 4);
    assert_eq!(b.log_end(&topic).await, 7);

    let got = b.fetch_all(&topic, 4).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let g = &got[0];
    assert_eq!((g.base_offset(), g.last_offset(), g.record_count()), (4, 6, 3));
    assert!(!g.is_log_append_time(), "CreateTime topic keeps CreateTime");
    assert_eq!((g.base_timestamp(), g.max_timestamp()), (0, now + YEAR_MS));
    assert_eq!(records_of(g), recs, "keys, values, headers and timestamps unchanged");
    // Only baseOffset and partitionLeaderEpoch (outside the CRC) differ: the CRC'd part of the
    // batch (attributes onwards) is byte-identical, CRC included.
    assert_eq!(&g.bytes()[17..], &sent[17..], "batch bytes from the CRC on are unchanged");
    assert_eq!(g.partition_leader_epoch(), 0, "the broker stamps its leader epoch");
}

#[tokio::test]
async fn default_topic_configs_refuse_timestamps_an_hour_ahead_but_accept_1970() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-ts-default");
    b.create_topic(&topic, &[]).await;
    let now = now_ms();

    let future = b.produce(&topic, build_batch(Hdr::default(), &[Rec::kv(0, now + YEAR_MS, "k", "v")])).await;
    assert_eq!(future.error, INVALID_TIMESTAMP, "a year ahead, default after.max.ms: {future:?}");
    // 4.x default message.timestamp.after.max.ms is 1 hour: 2 hours ahead is refused too.
    let two_h = b.produce(&topic, build_batch(Hdr::default(), &[Rec::kv(0, now + 2 * 3_600_000, "k", "v")])).await;
    assert_eq!(two_h.error, INVALID_TIMESTAMP, "2 h ahead: {two_h:?}");
    assert_eq!(b.log_end(&topic).await, 0, "refused batches append nothing");

    // before.max.ms defaults to Long.MAX: 1970 is accepted.
    let old = b.produce(&topic, build_batch(Hdr::default(), &[Rec::kv(0, 0, "k", "v")])).await;
    assert_eq!((old.error, old.base_offset), (NONE, 0), "timestamp 0 with defaults: {old:?}");

    // With only before.max.ms limited, an old record is refused the same way.
    let limited = support::unique_name("pin-ts-before");
    b.create_topic(&limited, &[("message.timestamp.before.max.ms", "86400000")]).await;
    let old = b.produce(&limited, build_batch(Hdr::default(), &[Rec::kv(0, 0, "k", "v")])).await;
    assert_eq!(old.error, INVALID_TIMESTAMP, "1970 with before.max.ms=1 day: {old:?}");

    // A LogAppendTime topic overwrites the timestamps: why the mirror creates CreateTime topics.
    let lat = support::unique_name("pin-ts-lat");
    b.create_topic(&lat, &[("message.timestamp.type", "LogAppendTime")]).await;
    b.produce_ok(&lat, build_batch(Hdr::default(), &[Rec::kv(0, 0, "k", "v")])).await;
    let g = &b.fetch_all(&lat, 0).await[0];
    assert!(g.is_log_append_time() && g.max_timestamp() >= now, "LogAppendTime topic restamps: {}", g.max_timestamp());
}

#[tokio::test]
async fn log_append_time_bit_is_accepted_and_cleared_on_a_create_time_topic() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-lat-bit");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    // Like a batch fetched from a LogAppendTime source: create times in the records
    // (base 1000, deltas 0 and 5), the append time in maxTimestamp, the LogAppendTime bit.
    let mut raw = build_batch(Hdr::default(), &[Rec::kv(0, 1000, "a", "1"), Rec::kv(1, 1005, "b", "2")]).to_vec();
    raw[21..23].copy_from_slice(&ATTR_LOG_APPEND_TIME.to_be_bytes());
    raw[35..43].copy_from_slice(&1_700_000_000_000i64.to_be_bytes());
    let crc = crc32c::crc32c(&raw[21..]);
    raw[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(b.produce_ok(&topic, Bytes::from(raw)).await, 0);
    let g = &b.fetch_all(&topic, 0).await[0];
    // Stored as CreateTime: the bit is cleared (CRC recomputed), base and max timestamps kept,
    // so a reader now sees the records' own create times (base + delta).
    assert!(!g.is_log_append_time() && g.crc_is_valid());
    assert_eq!((g.base_timestamp(), g.max_timestamp()), (1000, 1_700_000_000_000));
    let ts: Vec<i64> = records_of(g).iter().map(|r| r.timestamp).collect();
    assert_eq!(ts, vec![1000, 1005]);
}

// ---------------------------------------------------------------------------------------------
// 2. Compressed payloads are preserved byte for byte with compression.type=producer.
// ---------------------------------------------------------------------------------------------

/// Produces `lines` with the Java console producer (one batch, `codec`), returns its batches.
async fn java_batches(b: &mut Broker, cluster: &Cluster, codec: &str, lines: &str) -> (String, Vec<Batch>) {
    let topic = support::unique_name(&format!("pin-src-{codec}"));
    b.create_topic(&topic, &[]).await;
    support::kafka_tool_ok(
        V,
        "console-producer",
        &[
            "--bootstrap-server",
            &cluster.bootstrap,
            "--topic",
            &topic,
            // The console producer's own options override --producer-property values.
            "--compression-codec",
            codec,
            "--timeout",
            "3000",
            "--batch-size",
            "1000000",
            "--producer-property",
            "batch.size=1000000",
        ],
        Some(lines),
    );
    let got = b.fetch_all(&topic, 0).await;
    (topic, got)
}

/// Copies `src` batches to a new topic with `configs` the mirror's way (patched header, same
/// payload); returns the destination batches.
async fn mirror_copy(b: &mut Broker, src: &[Batch], configs: &[(&str, &str)]) -> Vec<Batch> {
    let dest = support::unique_name("pin-dest");
    b.create_topic(&dest, configs).await;
    let (pid, epoch) = b.init_producer_id().await;
    let mut seq = 0;
    for s in src {
        let h = patch_header(
            s,
            &HeaderPatch {
                base_offset: Some(0), // required: see broker_assigns_offsets_...
                producer_id: Some(pid),
                producer_epoch: Some(epoch),
                base_sequence: Some(seq),
                clear_transactional: true,
                ..HeaderPatch::default()
            },
        );
        let mut buf = BytesMut::from(&h[..]);
        buf.extend_from_slice(&s.payload());
        let off = b.produce_ok(&dest, buf.freeze()).await;
        assert_eq!(off, s.base_offset(), "same offsets on an empty destination");
        seq += s.last_offset_delta() + 1;
    }
    let got = b.fetch_all(&dest, 0).await;
    for g in &got {
        assert_eq!((g.producer_id(), g.producer_epoch()), (pid, epoch));
    }
    got
}

#[tokio::test]
async fn compressed_payload_bytes_survive_a_header_patch_and_reproduce() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let lines: String =
        (0..200).map(|i| format!("record number {i} with some repetitive padding padding padding\n")).collect();
    for (codec, id) in [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)] {
        let (_src_topic, src) = java_batches(&mut b, &cluster, codec, &lines).await;
        let total: i64 = src.iter().map(|s| i64::from(s.record_count())).sum();
        assert_eq!(total, 200, "{codec}: all lines produced");
        let attrs: Vec<i16> = src.iter().map(Batch::attributes).collect();
        assert!(src.iter().all(|s| s.compression() == id), "{codec}: source batches use codec {id}: {attrs:?}");
        assert!(src.iter().any(|s| s.record_count() > 1), "{codec}: the producer batched records");

        // compression.type=producer (explicit), and unset (the 4.1 default is `producer`).
        for configs in [MIRROR_TOPIC, &[][..]] {
            let dest = mirror_copy(&mut b, &src, configs).await;
            assert_eq!(dest.len(), src.len(), "{codec} {configs:?}");
            for (s, d) in src.iter().zip(&dest) {
                assert_eq!(d.base_offset(), s.base_offset());
                assert_eq!(d.attributes(), s.attributes() & !ATTR_TRANSACTIONAL, "{codec}: attributes kept");
                assert_eq!(d.payload(), s.payload(), "{codec} {configs:?}: payload after the 61-byte header");
                assert!(d.crc_is_valid());
            }
        }

        // compression.type=gzip on the destination: the broker recompresses anything that is
        // not gzip (payload differs, codec becomes gzip); a gzip batch is kept as is.
        let dest = mirror_copy(&mut b, &src, &[("compression.type", "gzip")]).await;
        let dest_records: i64 = dest.iter().map(|d| i64::from(d.record_count())).sum();
        assert_eq!(dest_records, 200);
        assert!(dest.iter().all(|d| d.compression() == 1), "{codec} → gzip topic");
        if codec == "gzip" {
            for (s, d) in src.iter().zip(&dest) {
                assert_eq!(d.payload(), s.payload(), "gzip batch on a gzip topic is kept byte for byte");
            }
        } else {
            assert!(
                src.iter().zip(&dest).all(|(s, d)| d.payload() != s.payload()),
                "{codec} batch on a gzip topic is recompressed"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Idempotent producer state.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn idempotent_sequences_any_first_sequence_gaps_refused_duplicates_deduplicated_window_of_5() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-idem");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let (pid, epoch) = b.init_producer_id().await;
    let now = now_ms();

    // A fresh producer id may start at any sequence.
    let first = idem_batch(pid, epoch, 1000, 3, now, "b0");
    assert_eq!(b.produce_ok(&topic, first.clone()).await, 0);

    // A gap (1004 instead of 1003) is refused and appends nothing.
    let gap = b.produce(&topic, idem_batch(pid, epoch, 1004, 2, now, "gap")).await;
    assert_eq!(gap.error, OUT_OF_ORDER_SEQUENCE_NUMBER, "{gap:?}");
    assert_eq!(b.log_end(&topic).await, 3);
    // Going backwards (not a cached batch) is refused the same way.
    let back = b.produce(&topic, idem_batch(pid, epoch, 1001, 2, now, "back")).await;
    assert_eq!(back.error, OUT_OF_ORDER_SEQUENCE_NUMBER, "{back:?}");

    // A resend of the last batch succeeds, reports the ORIGINAL base offset, appends nothing.
    let dup = b.produce(&topic, first.clone()).await;
    assert_eq!((dup.error, dup.base_offset), (NONE, 0), "duplicate: {dup:?}");
    assert_eq!(b.log_end(&topic).await, 3);

    // The continuation (1003) lands. Then 6 more batches: 8 batches in all, 2 records each.
    let mut sent = vec![(first, 0i64)];
    let mut seq = 1003;
    let mut off = 3;
    for i in 1..8 {
        let batch = idem_batch(pid, epoch, seq, 2, now, &format!("b{i}"));
        assert_eq!(b.produce_ok(&topic, batch.clone()).await, off);
        sent.push((batch, off));
        seq += 2;
        off += 2;
    }
    assert_eq!(b.log_end(&topic).await, 17);

    // A resend with the same sequence but different content is still treated as the cached
    // duplicate (the broker matches on sequence range, not bytes).
    let (_, last_off) = sent[7];
    let other = idem_batch(pid, epoch, 1003 + 2 * 6, 2, now, "different");
    let d = b.produce(&topic, other).await;
    assert_eq!((d.error, d.base_offset), (NONE, last_off), "same seqs, other bytes: {d:?}");

    // The last 5 batches are remembered: resends of each get their original offset.
    for (batch, orig) in &sent[3..8] {
        let d = b.produce(&topic, batch.clone()).await;
        assert_eq!((d.error, d.base_offset), (NONE, *orig), "resend of a batch in the window: {d:?}");
    }
    // The 6th-last is forgotten: OUT_OF_ORDER_SEQUENCE_NUMBER, nothing appended.
    let (sixth, _) = &sent[2];
    let d = b.produce(&topic, sixth.clone()).await;
    assert_eq!(d.error, OUT_OF_ORDER_SEQUENCE_NUMBER, "resend of the 6th-last batch: {d:?}");
    assert_eq!(b.log_end(&topic).await, 17);

    // A new epoch of the same producer id must start at sequence 0.
    let e1 = b.produce(&topic, idem_batch(pid, epoch + 1, 5, 1, now, "e1")).await;
    assert_eq!(e1.error, OUT_OF_ORDER_SEQUENCE_NUMBER, "new epoch, sequence 5: {e1:?}");
    assert_eq!(b.produce_ok(&topic, idem_batch(pid, epoch + 1, 0, 1, now, "e1")).await, 17);
    // And the old epoch is now fenced.
    let old = b.produce(&topic, idem_batch(pid, epoch, seq, 1, now, "old")).await;
    assert_eq!(old.error, INVALID_PRODUCER_EPOCH, "old epoch after a bump: {old:?}");
}

// ---------------------------------------------------------------------------------------------
// 4. Producer-id expiry follows batch timestamps.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn producer_state_expires_by_batch_timestamp_not_by_wall_clock_append_time() {
    let cluster = expiry_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-expiry");
    b.create_topic(&topic, MIRROR_TOPIC).await;

    // Three producers, written at the same wall-clock moment, differing only in batch
    // timestamps: far in the past, 30 s ahead ("now-stamped": known until 40 s after the
    // write, a margin no loaded machine eats up before the check below), a year ahead.
    // `producer.id.expiration.ms` is 10 s,
    // checked every 500 ms. A refused (out of sequence) produce appends nothing, so the
    // checks below poll instead of sleeping a fixed time.
    let (old_pid, e_old) = b.init_producer_id().await;
    let (now_pid, e_now) = b.init_producer_id().await;
    let (fut_pid, e_fut) = b.init_producer_id().await;
    let now = now_ms();
    // The "now-stamped" producer's batch timestamp.
    const AHEAD_MS: i64 = 30_000;
    let recent = now + AHEAD_MS;
    b.produce_ok(&topic, idem_batch(old_pid, e_old, 0, 1, 1_000_000_000_000, "old")).await;
    b.produce_ok(&topic, idem_batch(now_pid, e_now, 0, 1, recent, "now")).await;
    b.produce_ok(&topic, idem_batch(fut_pid, e_fut, 0, 1, now + YEAR_MS, "future")).await;

    // The producer whose batch timestamp is 2001 is forgotten at the next expiry check, while
    // the now-stamped one (written at the same moment) is still known.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let old_gap = b.produce(&topic, idem_batch(old_pid, e_old, 500, 1, 1_000_000_000_000, "old")).await;
        if old_gap.error == NONE {
            assert_eq!(old_gap.base_offset, 3, "{old_gap:?}");
            break;
        }
        assert_eq!(old_gap.error, OUT_OF_ORDER_SEQUENCE_NUMBER, "{old_gap:?}");
        assert!(std::time::Instant::now() < deadline, "2001-stamped producer never forgotten");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let forgotten_old_after = now_ms() - now;
    let now_gap = b.produce(&topic, idem_batch(now_pid, e_now, 500, 1, recent, "now")).await;
    let checked_at = now_ms() - now;
    // (The loop above gives up after 30 s, so this holds unless one produce took 10 s.)
    assert!(checked_at < AHEAD_MS + 10_000, "checked {checked_at} ms after the batches, past the expiry");
    assert_eq!(
        now_gap.error, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "now-stamped producer still known {checked_at} ms after its batch: {now_gap:?}"
    );

    // About 10 s after its batch timestamp the now-stamped producer is forgotten; the
    // future-stamped one (a year ahead) is still remembered.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let now_gap = b.produce(&topic, idem_batch(now_pid, e_now, 700, 1, recent, "now")).await;
        if now_gap.error == NONE {
            assert_eq!(now_gap.base_offset, 4, "{now_gap:?}");
            break;
        }
        assert_eq!(now_gap.error, OUT_OF_ORDER_SEQUENCE_NUMBER, "{now_gap:?}");
        assert!(std::time::Instant::now() < deadline, "now-stamped producer never forgotten");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let forgotten_now_after = now_ms() - now;
    assert!(forgotten_now_after >= AHEAD_MS + 10_000, "forgotten before its expiration: {forgotten_now_after} ms");
    eprintln!(
        "2001-stamped producer forgotten after {forgotten_old_after} ms, now-stamped after {forgotten_now_after} ms"
    );
    let fut_gap = b.produce(&topic, idem_batch(fut_pid, e_fut, 700, 1, now + YEAR_MS, "future")).await;
    assert_eq!(fut_gap.error, OUT_OF_ORDER_SEQUENCE_NUMBER, "future-stamped producer kept: {fut_gap:?}");
    // ... and it still de-duplicates its last batch.
    let dup = b.produce(&topic, idem_batch(fut_pid, e_fut, 0, 1, now + YEAR_MS, "future")).await;
    assert_eq!((dup.error, dup.base_offset), (NONE, 2), "future-stamped duplicate: {dup:?}");

    // After expiry, the "forgotten" producer no longer de-duplicates: a resend appends again.
    // (Its entry from the sequence-500 batch, stamped 2001, expires at the next check.)
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let old_again = b.produce(&topic, idem_batch(old_pid, e_old, 500, 1, 1_000_000_000_000, "old")).await;
        assert_eq!(old_again.error, NONE, "{old_again:?}");
        if old_again.base_offset != 3 {
            assert_eq!(old_again.base_offset, 5, "appended again: {old_again:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the 2001-stamped entry is still de-duplicating");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Batches a client may not write.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn control_and_stray_transactional_batches_are_refused() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-refused");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let (pid, epoch) = b.init_producer_id().await;
    let now = now_ms();

    let ctl = control_batch(&OwnBatch {
        base_offset: 0,
        count: 1,
        timestamp: now,
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: 0,
    });
    // The Produce request has no transactional id, so any batch with the transactional bit
    // (a COMMIT control batch as `control_batch` builds it, or a data batch) fails the
    // authorisation check for transactional writes: TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
    let c = b.produce(&topic, ctl.clone()).await;
    assert_eq!(c.error, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "control batch from a client: {c:?}");
    let txn = build_batch(
        Hdr {
            attributes: ATTR_TRANSACTIONAL,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: 0,
            ..Hdr::default()
        },
        &[Rec::kv(0, now, "k", "v")],
    );
    let t = b.produce(&topic, txn.clone()).await;
    assert_eq!(t.error, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional bit, no transactional id: {t:?}");

    // It fails the WHOLE request: a plain batch for another topic in the same request gets
    // the same error and is not appended.
    let other = support::unique_name("pin-refused-other");
    b.create_topic(&other, MIRROR_TOPIC).await;
    let plain = build_batch(Hdr::default(), &[Rec::kv(0, now, "k", "v")]);
    let r = b.produce_many(&[(&topic, txn.clone()), (&other, plain.clone())], None).await;
    assert_eq!(
        (r[0].error, r[1].error),
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        "{r:?}"
    );
    assert_eq!(b.log_end(&other).await, 0, "the innocent partition got nothing");

    // A control batch WITHOUT the transactional bit gets past that check and is refused by log
    // validation as a client-written control batch: INVALID_RECORD.
    let plain_ctl = build_batch(
        Hdr { attributes: ATTR_CONTROL, producer_id: pid, producer_epoch: epoch, base_sequence: 0, ..Hdr::default() },
        &[Rec {
            offset_delta: 0,
            timestamp: now,
            key: Some(vec![0, 0, 0, 1]),
            value: Some(vec![0; 6]),
            headers: vec![],
        }],
    );
    let c = b.produce(&topic, plain_ctl).await;
    assert_eq!(c.error, INVALID_RECORD, "non-transactional control batch: {c:?}");

    // With a transactional id the mirror never registered, the broker cannot verify the
    // transaction (KIP-890) and refuses; the code depends on the coordinator's state
    // (NOT_ENOUGH_REPLICAS "...COORDINATOR_NOT_AVAILABLE" on a fresh cluster).
    let r = b.produce_many(&[(&topic, txn.clone())], Some(&support::unique_name("pin-no-such-txn"))).await;
    assert_ne!(r[0].error, NONE, "transactional batch under an unknown transactional id: {r:?}");
    assert_eq!(b.log_end(&topic).await, 0, "nothing appended");

    // The same producer id is unharmed: a plain idempotent batch at sequence 0 lands.
    assert_eq!(b.produce_ok(&topic, idem_batch(pid, epoch, 0, 1, now, "ok")).await, 0);
}

#[tokio::test]
async fn batches_with_offset_holes_are_refused_or_break_offsets() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-holes");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let now = now_ms();
    let holey = [Rec::kv(0, now, "k0", "v0"), Rec::kv(2, now, "k2", "v2")];

    // Like a compacted source batch: records at deltas 0 and 2, lastOffsetDelta 2, count 2.
    let h = b.produce(&topic, build_batch(Hdr::default(), &holey)).await;
    assert_eq!(h.error, INVALID_RECORD, "lastOffsetDelta 2 with 2 records: {h:?}");
    assert_eq!(b.log_end(&topic).await, 0);

    // Deltas 0 and 2 but a consistent header (lastOffsetDelta 1, count 2): the broker does not
    // read the inner deltas of an uncompressed batch; where do the records land?
    let h = b.produce(&topic, build_batch(Hdr { last_offset_delta: Some(1), ..Hdr::default() }, &holey)).await;
    assert_eq!((h.error, h.base_offset), (NONE, 0), "{h:?}");
    assert_eq!(b.log_end(&topic).await, 2);
    let g = &b.fetch_all(&topic, 0).await[0];
    let recs = records_of(g);
    let deltas: Vec<i32> = recs.iter().map(|r| r.offset_delta).collect();
    assert_eq!(deltas, vec![0, 2], "the broker neither checks nor renumbers inner deltas of an uncompressed batch");
    assert_eq!((g.last_offset(), g.next_offset()), (1, 2));
    // So the record stored at delta 2 claims offset 2, which the next append also gets: a
    // consumer would see offset 2 twice. The mirror must never write such a batch.
    let next = b.produce_ok(&topic, build_batch(Hdr::default(), &[Rec::kv(0, now, "k3", "v3")])).await;
    assert_eq!(next, 2, "the next batch reuses offset 2");

    // Compressed (gzip), like a compacted compressed source batch.
    let topic = support::unique_name("pin-holes-gzip");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let h = b.produce(&topic, gzip_batch(&build_batch(Hdr::default(), &holey))).await;
    assert_eq!(h.error, INVALID_RECORD, "gzip, lastOffsetDelta 2 with 2 records: {h:?}");
    // A dense gzip batch is kept byte for byte.
    let dense = gzip_batch(&build_batch(Hdr::default(), &[Rec::kv(0, now, "k0", "v0"), Rec::kv(1, now, "k1", "v1")]));
    assert_eq!(b.produce_ok(&topic, dense.clone()).await, 0);
    let g = &b.fetch_all(&topic, 0).await[0];
    assert_eq!(&g.bytes()[17..], &dense[17..], "dense gzip batch unchanged");
    assert_eq!(records_of_any(g).len(), 2);
    // With a consistent header (lastOffsetDelta 1, count 2) but inner deltas 0 and 2, the
    // broker notices the hole while validating the compressed batch and tries to rebuild it,
    // but it read the records with the key-skipping iterator: Kafka 4.1.1 fails with
    // UnsupportedOperationException ("key is skipped in PartialDefaultRecord") →
    // UNKNOWN_SERVER_ERROR (-1), nothing appended.
    let sent = gzip_batch(&build_batch(Hdr { last_offset_delta: Some(1), ..Hdr::default() }, &holey));
    let h = b.produce(&topic, sent).await;
    assert_eq!(h.error, UNKNOWN_SERVER_ERROR, "gzip, inner-delta hole, consistent header: {h:?}");
    assert_eq!(b.log_end(&topic).await, 2);
}

// ---------------------------------------------------------------------------------------------
// 6. One batch per partition per request.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn two_batches_in_one_partition_of_one_produce_request_are_refused() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-two");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let now = now_ms();
    let mut both = BytesMut::new();
    both.extend_from_slice(&build_batch(Hdr::default(), &[Rec::kv(0, now, "a", "1")]));
    both.extend_from_slice(&build_batch(Hdr::default(), &[Rec::kv(0, now, "b", "2")]));
    let p = b.produce(&topic, both.freeze()).await;
    assert_eq!(p.error, INVALID_RECORD, "two batches: {p:?}");
    assert_eq!(b.log_end(&topic).await, 0);
}

// ---------------------------------------------------------------------------------------------
// 7. DeleteRecords.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn delete_records_moves_the_log_start_to_exactly_the_offset_and_fetch_below_is_out_of_range() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-delete");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let now = now_ms();
    // Two batches of 5: offsets 0..4 and 5..9; delete in the middle of the second.
    for i in 0..2 {
        let recs: Vec<Rec> = (0..5).map(|j| Rec::kv(j, now, &format!("k{i}{j}"), "v")).collect();
        b.produce_ok(&topic, build_batch(Hdr::default(), &recs)).await;
    }
    let (code, low) = b.delete_records(&topic, 7).await;
    assert_eq!((code, low), (NONE, 7), "DeleteRecords to 7");
    assert_eq!(b.log_start(&topic).await, 7, "ListOffsets earliest");
    let below = b.fetch(&topic, 6, 0).await;
    // (An error partition carries no log start offset: -1.)
    assert_eq!((below.error, below.log_start_offset), (OFFSET_OUT_OF_RANGE, -1), "fetch at 6");
    let at = b.fetch(&topic, 7, 0).await;
    assert_eq!((at.error, at.log_start_offset), (NONE, 7));
    // The whole batch 5..9 is still returned (the broker does not cut batches).
    let got = batches(&at.records);
    assert_eq!(got.first().map(|g| g.base_offset()), Some(5), "fetch at 7 returns the batch from 5");
    // Deleting up to the log end leaves an empty log starting there; beyond it is refused.
    assert_eq!(b.delete_records(&topic, 10).await, (NONE, 10));
    assert_eq!((b.log_start(&topic).await, b.log_end(&topic).await), (10, 10));
    let beyond = b.delete_records(&topic, 11).await;
    assert_eq!(beyond.0, OFFSET_OUT_OF_RANGE, "DeleteRecords beyond the high watermark: {beyond:?}");
    // -1 means "up to the high watermark".
    b.produce_ok(&topic, build_batch(Hdr::default(), &[Rec::kv(0, now, "x", "y")])).await;
    assert_eq!(b.delete_records(&topic, -1).await, (NONE, 11));
}

// ---------------------------------------------------------------------------------------------
// 8. Placeholder batches.
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn placeholder_batches_occupy_exactly_count_offsets_and_are_tombstones_on_compacted_topics() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let nonce = 0x0123_4567_89ab_cdef_u64;
    for compact in [false, true] {
        let topic = support::unique_name("pin-placeholder");
        let mut configs = MIRROR_TOPIC.to_vec();
        if compact {
            configs.push(("cleanup.policy", "compact"));
        }
        b.create_topic(&topic, &configs).await;
        let (pid, epoch) = b.init_producer_id().await;
        let now = now_ms();
        let mut off = 0;
        let mut seq = 0;
        for count in [1, 3, 500] {
            let p = placeholder_batch(
                &OwnBatch {
                    base_offset: 0,
                    count,
                    timestamp: now,
                    producer_id: pid,
                    producer_epoch: epoch,
                    base_sequence: seq,
                },
                nonce,
                1000 + off,
            );
            assert_eq!(b.produce_ok(&topic, p).await, off, "placeholder of {count}");
            off += i64::from(count);
            seq += count;
            assert_eq!(b.log_end(&topic).await, off, "exactly {count} offsets");
        }
        // Data continues right after, under the same producer id and sequence numbering.
        assert_eq!(b.produce_ok(&topic, idem_batch(pid, epoch, seq, 2, now, "data")).await, off);

        let got = b.fetch_all(&topic, 0).await;
        assert_eq!(got.len(), 4);
        for g in &got[..3] {
            assert!(g.is_placeholder() && !g.is_control() && g.compression() == 0);
            let recs = records_of(g);
            assert_eq!(recs.len() as i32, g.last_offset_delta() + 1);
            for (i, r) in recs.iter().enumerate() {
                assert_eq!(r.value, None, "placeholder values are null (tombstones when compacted)");
                let key = r.key.as_ref().unwrap();
                assert_eq!(&key[..8], PLACEHOLDER_MAGIC);
                let src = i64::from_be_bytes(key[16..24].try_into().unwrap());
                assert_eq!(src, 1000 + g.base_offset() + i as i64, "key names the source offset");
            }
        }
        assert!(!got[3].is_placeholder());
    }

    // The compacted topic refuses a null key (why placeholders carry unique keys).
    let topic = support::unique_name("pin-compact-nullkey");
    b.create_topic(&topic, &[("cleanup.policy", "compact")]).await;
    let nk = Rec { offset_delta: 0, timestamp: now_ms(), key: None, value: Some(b"v".to_vec()), headers: vec![] };
    let p = b.produce(&topic, build_batch(Hdr::default(), &[nk])).await;
    assert_eq!(p.error, INVALID_RECORD, "null key on a compacted topic: {p:?}");
}

// ---------------------------------------------------------------------------------------------
// 9. Read-committed fetch of a transactional source.
// ---------------------------------------------------------------------------------------------

fn offsets_after(line_prefix: &str, out: &str) -> Vec<i64> {
    let line = out.lines().find(|l| l.starts_with(line_prefix)).unwrap_or_else(|| panic!("no {line_prefix} in {out}"));
    let list = line.split("offsets=[").nth(1).unwrap().trim_end_matches(']');
    list.split(", ").map(|s| s.parse().unwrap()).collect()
}

#[tokio::test]
async fn read_committed_fetch_returns_aborted_batches_markers_and_the_aborted_list_up_to_the_lso() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-txn");
    b.create_topic(&topic, &[]).await;
    // A plain record first, so transactional offsets do not start at 0.
    b.produce_ok(&topic, build_batch(Hdr::default(), &[Rec::kv(0, now_ms(), "plain", "p")])).await;

    let out = support::ok(
        support::java_program(
            V,
            "TxnProducer.java",
            &[
                "--bootstrap-server",
                &cluster.bootstrap,
                "--topic",
                &topic,
                "--transactional-id",
                &support::unique_name("pin-txn-id"),
                "--commit",
                "c0,c1,c2",
                "--abort",
                "a0,a1",
                "--partition",
                "0",
            ],
        ),
        "TxnProducer",
    );
    let committed = offsets_after("COMMITTED", &out);
    let aborted = offsets_after("ABORTED", &out);
    assert_eq!(committed, vec![1, 2, 3], "{out}");
    // The COMMIT marker takes offset 4, so the aborted transaction starts at 5.
    assert_eq!(aborted, vec![5, 6], "{out}");

    // The ABORT marker is at 7: high watermark = LSO = 8 once both markers are written.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let f = loop {
        let f = b.fetch(&topic, 0, 1).await;
        if f.last_stable_offset == 8 || std::time::Instant::now() > deadline {
            break f;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!((f.error, f.high_watermark, f.last_stable_offset, f.log_start_offset), (NONE, 8, 8, 0));
    let got = batches(&f.records);
    // Batches tile [0, 8) without gaps; how the Java producer splits a transaction's records
    // into batches varies, so the layout is checked per offset.
    let mut next = 0;
    let mut kind = vec![];
    for g in &got {
        assert_eq!(g.base_offset(), next, "contiguous batches");
        next = g.next_offset();
        for _ in g.base_offset()..g.next_offset() {
            kind.push(match (g.is_transactional(), g.is_control()) {
                (false, false) => "plain",
                (true, false) => "txn-data",
                (true, true) => "marker",
                (false, true) => "non-txn-control",
            });
        }
    }
    assert_eq!(
        kind,
        ["plain", "txn-data", "txn-data", "txn-data", "marker", "txn-data", "txn-data", "marker"],
        "read_committed Fetch returns every batch below the LSO, aborted data included"
    );
    let at = |o: i64| got.iter().find(|g| g.base_offset() <= o && o <= g.last_offset()).unwrap();
    let txn_pid = at(1).producer_id();
    assert!((1..8).all(|o| at(o).producer_id() == txn_pid), "one producer id for both transactions");
    assert_eq!(f.aborted, Some(vec![(txn_pid, 5)]), "aborted_transactions names the first aborted offset");
    // Marker types: control key type 1 = COMMIT, 0 = ABORT; a marker batch spans one offset.
    let marker_type = |g: &Batch| records_of(g)[0].key.as_ref().map(|k| i16::from_be_bytes([k[2], k[3]]));
    assert_eq!((marker_type(at(4)), marker_type(at(7))), (Some(1), Some(0)));
    assert_eq!((at(4).last_offset_delta(), at(7).last_offset_delta()), (0, 0));
    // Fetching from inside the aborted range still lists it; from after it, nothing.
    let f5 = b.fetch(&topic, 5, 1).await;
    assert_eq!(f5.aborted, Some(vec![(txn_pid, 5)]));
    // From the ABORT marker itself it is still listed (the aborted range ends at the marker).
    let f7 = b.fetch(&topic, 7, 1).await;
    assert_eq!(f7.aborted, Some(vec![(txn_pid, 5)]), "fetch at the ABORT marker");
    let f8 = b.fetch(&topic, 8, 1).await;
    assert_eq!((f8.error, f8.records.len(), f8.aborted), (NONE, 0, Some(vec![])), "fetch at the LSO");
    // read_uncommitted gives no aborted list.
    let ru = b.fetch(&topic, 0, 0).await;
    assert_eq!(ru.aborted, None);
}

// ---------------------------------------------------------------------------------------------
// 10. Incremental fetch sessions (KIP-227), as the mirror's fetcher uses them.
// ---------------------------------------------------------------------------------------------

const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

/// One Fetch v12 (read_committed, max_wait 0) in session `session_id` at `epoch`, listing
/// `list` (topic, fetch offset) and forgetting `forget`; returns the top-level error, the
/// session id and what each answered partition carried (topic, HW, log start, record count).
async fn session_fetch(
    b: &mut Broker,
    session_id: i32,
    epoch: i32,
    list: &[(&str, i64)],
    forget: &[&str],
) -> (i16, i32, Vec<(String, i64, i64, usize)>) {
    use kafka_protocol::messages::fetch_request::ForgottenTopic;
    let mut req = fetch_request(list, 1 << 20, 32 << 20, 1);
    req.session_id = session_id;
    req.session_epoch = epoch;
    req.forgotten_topics_data = forget
        .iter()
        .map(|topic| {
            let mut f = ForgottenTopic::default();
            f.topic = name(topic);
            f.partitions = vec![0];
            f
        })
        .collect();
    let resp = b.conn.send(&req, 12).await.expect("Fetch");
    let parts = resp
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                let records = p.records.clone().unwrap_or_default();
                (t.topic.0.to_string(), p.high_watermark, p.log_start_offset, batches(&records).len())
            })
        })
        .collect();
    (resp.error_code, resp.session_id, parts)
}

#[tokio::test]
async fn incremental_fetch_sessions_answer_only_partitions_with_news() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let a = support::unique_name("pin-session-a");
    let c = support::unique_name("pin-session-b");
    b.create_topic(&a, MIRROR_TOPIC).await;
    b.create_topic(&c, MIRROR_TOPIC).await;
    let now = now_ms();
    let three: Vec<Rec> = (0..3).map(|j| Rec::kv(j, now, &format!("a{j}"), "v")).collect();
    b.produce_ok(&a, build_batch(Hdr::default(), &three)).await;

    // Full request (session 0, epoch 0): a session is created and every partition answered.
    let (err, id, parts) = session_fetch(&mut b, 0, 0, &[(&a, 0), (&c, 0)], &[]).await;
    assert_eq!(err, NONE);
    assert!(id != 0, "the broker created no fetch session");
    assert_eq!(parts, vec![(a.clone(), 3, 0, 1), (c.clone(), 0, 0, 0)]);

    // Epoch 1: a moved to its end, c not listed. Nothing is new: nothing is answered.
    let (err, id1, parts) = session_fetch(&mut b, id, 1, &[(&a, 3)], &[]).await;
    assert_eq!((err, id1), (NONE, id));
    assert!(parts.is_empty(), "unchanged partitions answered: {parts:?}");

    // New records on c (still held at offset 0 by the session): only c is answered, with them.
    let two: Vec<Rec> = (0..2).map(|j| Rec::kv(j, now, &format!("c{j}"), "v")).collect();
    b.produce_ok(&c, build_batch(Hdr::default(), &two)).await;
    let (err, _, parts) = session_fetch(&mut b, id, 2, &[], &[]).await;
    assert_eq!(err, NONE);
    assert_eq!(parts, vec![(c.clone(), 2, 0, 1)]);

    // A moved log start (DeleteRecords) is news without records; an unchanged high watermark
    // after a changed fetch offset is not.
    assert_eq!(b.delete_records(&a, 1).await, (NONE, 1));
    let (err, _, parts) = session_fetch(&mut b, id, 3, &[(&c, 2)], &[]).await;
    assert_eq!(err, NONE);
    assert_eq!(parts, vec![(a.clone(), 3, 1, 0)]);

    // A forgotten partition is no longer answered, even with new records.
    let (err, _, parts) = session_fetch(&mut b, id, 4, &[], &[&a]).await;
    assert_eq!((err, parts.len()), (NONE, 0));
    b.produce_ok(&a, build_batch(Hdr::default(), &three)).await;
    let (err, _, parts) = session_fetch(&mut b, id, 5, &[], &[]).await;
    assert_eq!((err, parts.len()), (NONE, 0), "{parts:?}");
    // Listed again, it is answered in full (the broker's cached high watermark was dropped).
    let (err, _, parts) = session_fetch(&mut b, id, 6, &[(&a, 3)], &[]).await;
    assert_eq!(err, NONE);
    assert_eq!(parts, vec![(a.clone(), 6, 1, 1)]);

    // A wrong epoch or an unknown session id is a top-level error.
    let (err, _, _) = session_fetch(&mut b, id, 9, &[], &[]).await;
    assert_eq!(err, INVALID_FETCH_SESSION_EPOCH);
    let other = if id == i32::MAX { 1 } else { id + 1 };
    let (err, _, _) = session_fetch(&mut b, other, 1, &[], &[]).await;
    assert_eq!(err, FETCH_SESSION_ID_NOT_FOUND);
}

/// The in-flight budget asks for less than a batch may need: a Fetch whose `max_bytes` and
/// `partition_max_bytes` are below the first batch still returns that batch whole (KIP-74),
/// and nothing after it.
#[tokio::test]
async fn a_fetch_smaller_than_the_first_batch_returns_that_batch_whole() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-kip74");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let now = now_ms();
    let big = "x".repeat(20_000);
    for i in 0..2 {
        let recs: Vec<Rec> = (0..5).map(|j| Rec::kv(j, now, &format!("k{i}{j}"), &big)).collect();
        b.produce_ok(&topic, build_batch(Hdr::default(), &recs)).await;
    }
    let req = fetch_request(&[(&topic, 0)], 1024, 1024, 1);
    let resp = b.conn.send(&req, 12).await.expect("Fetch");
    let part = &resp.responses[0].partitions[0];
    assert_eq!(part.error_code, NONE);
    let got = batches(&part.records.clone().unwrap_or_default());
    assert_eq!(got.len(), 1, "exactly the first batch");
    assert_eq!((got[0].base_offset(), got[0].record_count()), (0, 5));
    assert!(got[0].bytes().len() > 100_000, "the whole batch: {} bytes", got[0].bytes().len());
}

/// A `consumer_byte_rate` quota and a Fetch answer larger than the quota allows over its
/// window: Kafka answers empty with a throttle time (KIP-219), does not count the bytes it did
/// not send, and so throttles the same Fetch again after every wait, for longer than the
/// quota window — the batch never comes.
/// (What `client.id` in docs/configuration.md warns about.)
#[tokio::test]
async fn a_fetch_answer_over_the_quota_window_is_throttled_every_time() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-quota");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let client_id = support::unique_name("pin-quota-client");
    support::kafka_tool_ok(
        V,
        "configs",
        &[
            "--bootstrap-server",
            &cluster.bootstrap,
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            &client_id,
            "--add-config",
            "consumer_byte_rate=10000",
        ],
        None,
    );
    // One batch of ~130 KB: over 10000 B/s × the 10 s the rate is measured over at first.
    let now = now_ms();
    let value = "v".repeat(13_000);
    let recs: Vec<Rec> = (0..10).map(|j| Rec::kv(j, now, &format!("k{j}"), &value)).collect();
    b.produce_ok(&topic, build_batch(Hdr::default(), &recs)).await;
    b.conn.set_client_id(&client_id);
    let mut throttles = Vec::new();
    // (The quota reaches the broker's quota manager shortly after kafka-configs returns.)
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // Throttled for longer than the 11 s quota window: whatever was counted before has left
    // the window, and still nothing comes.
    while throttles.iter().sum::<i32>() < 12_000 {
        let req = fetch_request(&[(&topic, 0)], 16 << 10, 16 << 10, 1);
        let resp = b.conn.send(&req, 12).await.expect("Fetch");
        assert_eq!(resp.error_code, NONE);
        if resp.throttle_time_ms == 0 {
            assert!(throttles.is_empty(), "answered after being throttled: {throttles:?}");
            assert!(std::time::Instant::now() < deadline, "the quota never applied");
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        assert!(resp.responses.is_empty(), "a throttled answer carries no partitions");
        throttles.push(resp.throttle_time_ms);
        tokio::time::sleep(Duration::from_millis(resp.throttle_time_ms as u64)).await;
    }
    eprintln!("throttled {} times: {throttles:?} ms", throttles.len());
}

/// One PLAIN exchange (SaslHandshake v1, SaslAuthenticate v1) on `conn`: the broker's
/// `(error_code, error_message, session_lifetime_ms)`, or the transport error.
async fn plain_exchange(
    conn: &mut BrokerConnection,
    user: &str,
    password: &str,
) -> Result<(i16, Option<String>, i64), mirrorgate::client::ClientError> {
    use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
    let hs = conn.send(&SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")), 1).await?;
    if hs.error_code != NONE {
        return Ok((hs.error_code, None, 0));
    }
    let token = format!("\0{user}\0{password}");
    let resp =
        conn.send(&SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token.into_bytes())), 1).await?;
    Ok((resp.error_code, resp.error_message.map(|m| m.to_string()), resp.session_lifetime_ms))
}

/// KIP-368 as the broker applies it with `connections.max.reauth.ms` = 3000 (what
/// `client::reauth` rests on): SaslAuthenticate v1 answers `session_lifetime_ms` 3000; a
/// request after the session's expiry closes the connection; a SaslHandshake + SaslAuthenticate
/// on the authenticated connection re-authenticates it in-band and extends the session, even
/// when sent after the expiry; a re-authentication as another user is refused with
/// SASL_AUTHENTICATION_FAILED and the connection closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_sessions_expire_and_reauthenticate_in_band_with_the_same_principal() {
    const SASL_AUTHENTICATION_FAILED: i16 = 58;
    let cluster = support::secure_cluster_with(
        "pin-reauth",
        "SASL_PLAINTEXT",
        "none",
        &["PLAIN:pin:pin-secret", "PLAIN:other:other-secret"],
        &["connections.max.reauth.ms=3000"],
    );
    let addr = cluster.secure.clone().unwrap();
    let connect = || async {
        BrokerConnection::connect(&addr, Duration::from_secs(10), Duration::from_secs(30), 1 << 20).await.unwrap()
    };
    // The lifetime, and the close after it.
    let mut a = connect().await;
    let t0 = std::time::Instant::now();
    let (code, _, lifetime) = plain_exchange(&mut a, "pin", "pin-secret").await.unwrap();
    assert_eq!((code, lifetime), (NONE, 3000), "first authentication");
    assert_eq!(api_versions(&mut a).await.unwrap(), NONE);
    tokio::time::sleep(Duration::from_millis(3500).saturating_sub(t0.elapsed())).await;
    let after = api_versions(&mut a).await;
    assert!(
        matches!(
            after,
            Err(mirrorgate::client::ClientError::Closed { .. } | mirrorgate::client::ClientError::Io { .. })
        ),
        "a request after the session expired: {after:?}"
    );
    // In-band re-authentication before the expiry extends the session.
    let mut b = connect().await;
    let t0 = std::time::Instant::now();
    assert_eq!(plain_exchange(&mut b, "pin", "pin-secret").await.unwrap().0, NONE);
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let (code, _, lifetime) = plain_exchange(&mut b, "pin", "pin-secret").await.unwrap();
    assert_eq!((code, lifetime), (NONE, 3000), "re-authentication");
    tokio::time::sleep(Duration::from_millis(4000).saturating_sub(t0.elapsed())).await;
    assert_eq!(api_versions(&mut b).await.unwrap(), NONE, "past the first session's expiry, within the second");
    // A re-authentication begun after the expiry is still accepted (the handshake is
    // checked before the expiry).
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let (code, _, lifetime) = plain_exchange(&mut b, "pin", "pin-secret").await.unwrap();
    assert_eq!((code, lifetime), (NONE, 3000), "re-authentication after the expiry");
    assert_eq!(api_versions(&mut b).await.unwrap(), NONE);
    // Another principal on re-authentication: refused, and the connection closed.
    let mut c = connect().await;
    assert_eq!(plain_exchange(&mut c, "pin", "pin-secret").await.unwrap().0, NONE);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let refused = plain_exchange(&mut c, "other", "other-secret").await;
    eprintln!("re-authentication as another user: {refused:?}");
    let (code, message, _) = refused.unwrap();
    assert_eq!(code, SASL_AUTHENTICATION_FAILED, "{message:?}");
    assert!(message.as_deref().unwrap_or_default().contains("principal"), "{message:?}");
    assert!(api_versions(&mut c).await.is_err(), "the connection outlived a refused re-authentication");
}

async fn api_versions(c: &mut BrokerConnection) -> Result<i16, mirrorgate::client::ClientError> {
    let req = kafka_protocol::messages::ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("pin"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    c.send(&req, 3).await.map(|r| r.error_code)
}

// ---------------------------------------------------------------------------------------------
// Fetch below v4 on a broker that still serves it (Kafka 3.x; 4.0 removed Fetch v0-3, KIP-896).
// ---------------------------------------------------------------------------------------------

/// A Fetch v3 request (header v1, client id "pin") for partition 0 of `topic` from `offset`.
fn fetch_v3_frame(topic: &str, offset: i64) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i16(1); // Fetch
    b.put_i16(3);
    b.put_i32(7); // correlation id
    b.put_i16(3);
    b.put_slice(b"pin");
    b.put_i32(-1); // replica id
    b.put_i32(0); // max wait ms
    b.put_i32(1); // min bytes
    b.put_i32(1 << 20); // max bytes
    b.put_i32(1); // topics
    b.put_i16(topic.len() as i16);
    b.put_slice(topic.as_bytes());
    b.put_i32(1); // partitions
    b.put_i32(0);
    b.put_i64(offset);
    b.put_i32(1 << 20);
    let mut frame = (b.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&b);
    frame
}

/// Sends a length-prefixed `frame` to `addr` and returns the response body after the
/// correlation id (header v0), or `None` when the broker closes the connection instead.
fn raw_exchange(addr: &str, frame: &[u8]) -> Option<Vec<u8>> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(frame).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body[4..].to_vec())
}

/// One message of a v0/v1 message set: `(offset, magic, key, value)`.
type LegacyMessage = (i64, i8, Option<Vec<u8>>, Option<Vec<u8>>);

/// Every message of a v0/v1 message set.
fn legacy_messages(mut b: &[u8]) -> Vec<LegacyMessage> {
    let i32_at = |b: &[u8], at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap());
    let mut out = Vec::new();
    while b.len() >= 12 {
        let offset = i64::from_be_bytes(b[..8].try_into().unwrap());
        let size = i32_at(b, 8) as usize;
        if b.len() < 12 + size {
            break;
        }
        let m = &b[12..12 + size];
        let magic = m[4] as i8;
        let mut pos = 6 + if magic >= 1 { 8 } else { 0 }; // crc, magic, attributes, timestamp
        let mut bytes = || {
            let n = i32_at(m, pos);
            pos += 4;
            (n >= 0).then(|| {
                let v = m[pos..pos + n as usize].to_vec();
                pos += n as usize;
                v
            })
        };
        let key = bytes();
        let value = bytes();
        out.push((offset, magic, key, value));
        b = &b[12 + size..];
    }
    out
}

/// Kafka 3.9 still serves Fetch v0-3 and down-converts v2 batches into v0/v1 message sets
/// for them (`LazyDownConversionRecords`): a placeholder batch becomes one ordinary v1
/// message per offset carrying the placeholder key and a null value — data to the client,
/// with no control-batch form to turn it into. This is why mirrorgate refuses Fetch below v4
/// (closes the connection) and advertises Fetch from v4 only, as Kafka 4.0 does.
#[tokio::test]
async fn fetch_v3_on_kafka_3_9_down_converts_placeholders_into_data_messages() {
    let cluster = support::cluster_with("pin39", 1, "3.9.1", &[]);
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-fetch-v3");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let (pid, epoch) = b.init_producer_id().await;
    let own = OwnBatch {
        base_offset: 0,
        count: 3,
        timestamp: now_ms(),
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: 0,
    };
    assert_eq!(b.produce_ok(&topic, placeholder_batch(&own, 5, 100)).await, 0);
    assert_eq!(b.produce_ok(&topic, idem_batch(pid, epoch, 3, 1, now_ms(), "data")).await, 3);

    let addr = cluster.bootstrap.split(',').next().unwrap();
    let body = raw_exchange(addr, &fetch_v3_frame(&topic, 0)).expect("Kafka 3.9 answers Fetch v3");
    // throttle_time_ms, 1 topic (name), 1 partition: index, error, high watermark, records.
    let mut pos = 4 + 4;
    pos += 2 + usize::from(u16::from_be_bytes([body[pos], body[pos + 1]]));
    pos += 4; // partitions count
    let error = i16::from_be_bytes([body[pos + 4], body[pos + 5]]);
    assert_eq!(error, NONE);
    pos += 4 + 2 + 8;
    let size = i32::from_be_bytes(body[pos..pos + 4].try_into().unwrap()) as usize;
    let messages = legacy_messages(&body[pos + 4..pos + 4 + size]);
    let offsets: Vec<i64> = messages.iter().map(|m| m.0).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3], "one message per offset: {messages:?}");
    for (offset, magic, key, value) in &messages[..3] {
        assert_eq!(*magic, 1, "down-converted to message format v1");
        assert_eq!(&key.as_ref().expect("the placeholder key")[..8], PLACEHOLDER_MAGIC, "offset {offset}");
        assert_eq!(*value, None);
    }
}

/// A consumer Fetch at offset -1 (below any log start) is answered OFFSET_OUT_OF_RANGE for
/// that partition, on an empty partition and on one with records (Kafka `UnifiedLog.read`
/// checks the start offset against the log start): mirrorgate forwards -1 for a fetch below
/// a shifted partition's first source offset so that the client's `auto.offset.reset`
/// applies, as on the source (proxy::present::fetch).
#[tokio::test]
async fn a_fetch_at_offset_minus_one_is_offset_out_of_range() {
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("pin-fetch-neg");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    for isolation in [0, 1] {
        assert_eq!(b.fetch(&topic, -1, isolation).await.error, OFFSET_OUT_OF_RANGE, "empty, isolation {isolation}");
    }
    let now = now_ms();
    b.produce_ok(&topic, build_batch(Hdr::default(), &[Rec::kv(0, now, "a", "1")])).await;
    for isolation in [0, 1] {
        let f = b.fetch(&topic, -1, isolation).await;
        assert_eq!(f.error, OFFSET_OUT_OF_RANGE, "isolation {isolation}");
        assert!(f.records.is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// 15. Idempotent Produce requests pipelined on one connection.
// ---------------------------------------------------------------------------------------------

/// A plaintext connection that writes Produce v11 requests back to back (pipelined) and reads
/// their responses afterwards; `BrokerConnection` waits for each response before the next.
struct Pipeline {
    stream: tokio::net::TcpStream,
    next_correlation_id: i32,
}

impl Pipeline {
    async fn connect(cluster: &Cluster) -> Self {
        let addr = cluster.bootstrap.split(',').next().unwrap();
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect to the broker");
        stream.set_nodelay(true).unwrap();
        Self { stream, next_correlation_id: 1 }
    }

    /// Writes one Produce request (v11, acks=all) of `records` to partition 0 of `topic`,
    /// without reading anything; returns its correlation id.
    async fn send(&mut self, topic: &str, records: Bytes) -> i32 {
        use kafka_protocol::messages::RequestHeader;
        use kafka_protocol::protocol::{Encodable, HeaderVersion, Request};
        use tokio::io::AsyncWriteExt;
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut hdr = RequestHeader::default();
        hdr.request_api_key = ProduceRequest::KEY;
        hdr.request_api_version = 11;
        hdr.correlation_id = correlation_id;
        hdr.client_id = Some(StrBytes::from_static_str("pin"));
        let mut out = BytesMut::new();
        out.put_i32(0); // length, set below
        hdr.encode(&mut out, ProduceRequest::header_version(11)).unwrap();
        produce_request(&[(topic, records)], None).encode(&mut out, 11).unwrap();
        let len = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&out).await.expect("write a Produce request");
        correlation_id
    }

    /// Reads the next response frame: its correlation id and partition 0 of `topic`.
    async fn recv(&mut self, topic: &str) -> (i32, Produced) {
        use kafka_protocol::messages::ResponseHeader;
        use kafka_protocol::protocol::{Decodable, HeaderVersion};
        use tokio::io::AsyncReadExt;
        let read = async {
            let mut len = [0u8; 4];
            self.stream.read_exact(&mut len).await?;
            let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
            self.stream.read_exact(&mut frame).await?;
            std::io::Result::Ok(Bytes::from(frame))
        };
        let mut frame = tokio::time::timeout(Duration::from_secs(60), read).await.expect("a response").expect("read");
        let header = ResponseHeader::decode(&mut frame, ProduceResponse::header_version(11)).unwrap();
        let resp = ProduceResponse::decode(&mut frame, 11).unwrap();
        (header.correlation_id, produced(&resp, topic))
    }

    /// Writes one request per batch back to back, then reads as many responses, in the order
    /// they arrive.
    async fn pipelined(&mut self, topic: &str, batches: &[Bytes]) -> Vec<(i32, Produced)> {
        for batch in batches {
            self.send(topic, batch.clone()).await;
        }
        let mut out = vec![];
        for _ in batches {
            out.push(self.recv(topic).await);
        }
        out
    }
}

/// The keys of every record from offset 0, in log order (uncompressed batches).
async fn keys_in_log(b: &mut Broker, topic: &str) -> Vec<String> {
    let mut keys = vec![];
    for batch in b.fetch_all(topic, 0).await {
        keys.extend(records_of(&batch).into_iter().map(|r| String::from_utf8(r.key.unwrap()).unwrap()));
    }
    keys
}

/// The keys `idem_batch` gives `count` records tagged `tag`.
fn keys_of(tag: &str, count: i32) -> Vec<String> {
    (0..count).map(|i| format!("{tag}-k{i}")).collect()
}

/// Up to 5 idempotent Produce requests (one 3-record batch each, base sequence = offset)
/// written back to back on one connection before any response is read (Kafka answers the
/// requests of one connection in order): responses in request order, offsets in sequence
/// order; a refused batch in the middle makes the later in-flight ones OUT_OF_ORDER and
/// appends nothing after it until it is resent; and a resend of in-flight batches after a
/// dropped connection (unknown outcome) leaves every record in the log exactly once.
#[tokio::test]
async fn pipelined_idempotent_produce_requests_keep_order_refuse_after_a_gap_and_deduplicate_resends() {
    const CORRUPT_MESSAGE: i16 = 2;
    const RECS: i32 = 3;
    let cluster = pin_cluster();
    let mut b = Broker::connect(&cluster).await;
    let now = now_ms();

    // 1. Order: 5 requests in flight, answered in request order, appended in sequence order.
    let topic = support::unique_name("pin-pipeline-order");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let (pid, epoch) = b.init_producer_id().await;
    let tags: Vec<String> = (0..5).map(|i| format!("o{i}")).collect();
    let sent: Vec<Bytes> =
        tags.iter().enumerate().map(|(i, tag)| idem_batch(pid, epoch, i as i32 * RECS, RECS, now, tag)).collect();
    let mut p = Pipeline::connect(&cluster).await;
    let got = p.pipelined(&topic, &sent).await;
    let answers: Vec<(i32, i16, i64)> = got.iter().map(|(c, r)| (*c, r.error, r.base_offset)).collect();
    assert_eq!(answers, vec![(1, NONE, 0), (2, NONE, 3), (3, NONE, 6), (4, NONE, 9), (5, NONE, 12)], "{got:?}");
    assert_eq!(b.log_end(&topic).await, 15);
    let expected: Vec<String> = tags.iter().flat_map(|t| keys_of(t, RECS)).collect();
    assert_eq!(keys_in_log(&mut b, &topic).await, expected, "records in request order");

    // 2. The batch of request 2 is refused (payload byte changed after the CRC): the in-flight
    // requests after it are refused too, nothing of them is appended.
    let topic = support::unique_name("pin-pipeline-refused");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let (pid, epoch) = b.init_producer_id().await;
    let tags: Vec<String> = (0..5).map(|i| format!("r{i}")).collect();
    let good: Vec<Bytes> =
        tags.iter().enumerate().map(|(i, tag)| idem_batch(pid, epoch, i as i32 * RECS, RECS, now, tag)).collect();
    let mut corrupt = good[1].to_vec();
    let last = corrupt.len() - 2; // the last byte of the last record's value ("r1-v2" → "r1-v3")
    corrupt[last] ^= 1;
    let mut sent = good.clone();
    sent[1] = Bytes::from(corrupt);
    let mut p = Pipeline::connect(&cluster).await;
    let got = p.pipelined(&topic, &sent).await;
    eprintln!("pipelined with a corrupt second batch: {got:?}");
    let answers: Vec<(i32, i16)> = got.iter().map(|(c, r)| (*c, r.error)).collect();
    assert_eq!(
        answers,
        vec![
            (1, NONE),
            (2, CORRUPT_MESSAGE),
            (3, OUT_OF_ORDER_SEQUENCE_NUMBER),
            (4, OUT_OF_ORDER_SEQUENCE_NUMBER),
            (5, OUT_OF_ORDER_SEQUENCE_NUMBER)
        ],
        "{got:?}"
    );
    assert_eq!(got[0].1.base_offset, 0);
    assert_eq!(b.log_end(&topic).await, RECS as i64, "only request 1 appended");
    // Recovery: sequences 3..12 (the second batch corrected) pipelined again on the same
    // connection land right after, in order.
    let got = p.pipelined(&topic, &good[1..]).await;
    let answers: Vec<(i32, i16, i64)> = got.iter().map(|(c, r)| (*c, r.error, r.base_offset)).collect();
    assert_eq!(answers, vec![(6, NONE, 3), (7, NONE, 6), (8, NONE, 9), (9, NONE, 12)], "{got:?}");
    assert_eq!(b.log_end(&topic).await, 15);
    let expected: Vec<String> = tags.iter().flat_map(|t| keys_of(t, RECS)).collect();
    assert_eq!(keys_in_log(&mut b, &topic).await, expected, "each record once, in sequence order");

    // 3. Three requests in flight, the connection dropped before any response is read; the
    // same three batches (same producer id, epoch, sequences) resent pipelined on a new one —
    // once after the broker is done with the dropped connection (its log end unchanged for
    // 1 s), once at once (racing with what the broker still does for the dropped one).
    let topic = support::unique_name("pin-pipeline-resend");
    b.create_topic(&topic, MIRROR_TOPIC).await;
    let (pid, epoch) = b.init_producer_id().await;
    // Two batches appended first: the in-flight ones continue at sequence (= offset) 6.
    for i in 0..2 {
        let at = i * RECS;
        assert_eq!(b.produce_ok(&topic, idem_batch(pid, epoch, at, RECS, now, &format!("s{i}"))).await, at as i64);
    }
    let mut tags: Vec<String> = (0..2).map(|i| format!("s{i}")).collect();
    for settle in [true, false] {
        let first = tags.len() as i32;
        let new_tags: Vec<String> = (first..first + 3).map(|i| format!("s{i}")).collect();
        let in_flight: Vec<Bytes> = new_tags
            .iter()
            .enumerate()
            .map(|(i, tag)| idem_batch(pid, epoch, (first + i as i32) * RECS, RECS, now, tag))
            .collect();
        let mut dropped = Pipeline::connect(&cluster).await;
        for batch in &in_flight {
            dropped.send(&topic, batch.clone()).await;
        }
        drop(dropped);
        let start = i64::from(first * RECS);
        let end_at_resend = if settle { settled_log_end(&mut b, &topic).await } else { b.log_end(&topic).await };
        let mut p = Pipeline::connect(&cluster).await;
        let got = p.pipelined(&topic, &in_flight).await;
        eprintln!(
            "dropped connection (settle {settle}): {} of 3 batches in the log at the resend; resend answers {got:?}",
            (end_at_resend - start) / i64::from(RECS)
        );
        assert!((start..=start + 9).contains(&end_at_resend), "log end {end_at_resend} at the resend");
        // Batches already in the log are answered with their original offsets (nothing
        // appended), the others appended: either way the offsets of sequence order.
        let answers: Vec<(i32, i16, i64)> = got.iter().map(|(c, r)| (*c, r.error, r.base_offset)).collect();
        assert_eq!(answers, vec![(1, NONE, start), (2, NONE, start + 3), (3, NONE, start + 6)], "{got:?}");
        tags.extend(new_tags);
        let end = settled_log_end(&mut b, &topic).await;
        let expected: Vec<String> = tags.iter().flat_map(|t| keys_of(t, RECS)).collect();
        let keys = keys_in_log(&mut b, &topic).await;
        assert_eq!(keys, expected, "each record exactly once, in sequence order (settle {settle})");
        assert_eq!(end, keys.len() as i64, "the log end is the number of distinct records");
    }
}

/// The log end once it has not changed for 1 s (polled every 100 ms, at most 30 s).
async fn settled_log_end(b: &mut Broker, topic: &str) -> i64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut end = b.log_end(topic).await;
    let mut since = std::time::Instant::now();
    while since.elapsed() < Duration::from_secs(1) {
        assert!(std::time::Instant::now() < deadline, "{topic}: log end still moving after 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = b.log_end(topic).await;
        if now != end {
            (end, since) = (now, std::time::Instant::now());
        }
    }
    end
}
