//! Pins what a client can put in a destination log with transactions (issue 12, item 2), on
//! Kafka 3.9.1, 4.1.1 and 4.4.0, with the cluster's `transaction.version` feature at 1 and 2
//! (3.9.1: its default, 0), and with both client protocols where the broker has them:
//! `TxnProtocol::V1` (AddPartitionsToTxn v3, Produce v11, EndTxn v4) and `TxnProtocol::V2`
//! (EndTxn v5, KIP-890's epoch bump; Produce v12 adds the partition implicitly).
//!
//! Every test talks to the broker with `BrokerConnection`, the transaction primitive
//! `mirrorgate::client::txn` and raw kafka-protocol messages, and asserts on offsets, control
//! batches (type, producer id, epoch, timestamp), `aborted_transactions`, error codes and on
//! what librdkafka consumers at both isolation levels receive. docs/broker-behaviour.md
//! ("Transactions") lists each fact with its test and per-version result;
//! docs/real-markers.md draws the design from them.
//!
//! One module per cluster (`kafka_3_9_1`, `kafka_4_1_1_tv1`, ...): run one version at a
//! time with `cargo test --test broker_txn kafka_4_1_1_tv2`.

mod support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, CreateTopicsRequest, DescribeProducersRequest, FetchRequest, InitProducerIdRequest,
    ListOffsetsRequest, ProduceRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use mirrorgate::client::txn::{self, TxnProducer, TxnProtocol};
use mirrorgate::client::BrokerConnection;
use mirrorgate::wire::batch::{Batch, BatchIter, ATTR_TRANSACTIONAL, HEADER_LEN};
use support::Cluster;

const NONE: i16 = 0;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_TXN_STATE: i16 = 48;
const CONCURRENT_TRANSACTIONS: i16 = 51;
const PRODUCER_FENCED: i16 = 90;
const TRANSACTION_ABORTABLE: i16 = 120;
const COMMIT: i16 = 1;
const ABORT: i16 = 0;

/// Broker properties of every cluster here: timed-out transactions are aborted within a
/// second of their timeout (default check every 10 s).
const PROPS: &[&str] = &["transaction.abort.timed.out.transaction.cleanup.interval.ms=500"];

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// The cluster a test module runs on.
#[derive(Debug, Clone, Copy)]
struct Setup {
    version: &'static str,
    /// `transaction.version` given to `kafka-storage format` (`None`: the version's default).
    tv: Option<u8>,
}

impl Setup {
    /// The key of this setup's cluster in `support`.
    fn key(self) -> String {
        format!("txn-{}-tv{}", self.version, self.tv.map_or("d".into(), |t| t.to_string()))
    }

    fn cluster(self) -> std::sync::Arc<Cluster> {
        let feature = self.tv.map(|t| format!("transaction.version={t}"));
        let features: Vec<&str> = feature.iter().map(String::as_str).collect();
        support::cluster_with_features(&self.key(), self.version, &features, PROPS)
    }
}

/// Held by each test while it runs: when the last of the `tests` tests of a setup ends
/// (passing or not), that setup's cluster is stopped, so that a whole-suite run does not keep
/// five clusters up at once.
struct Lease {
    setup: Setup,
    tests: usize,
}

static FINISHED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

impl Drop for Lease {
    fn drop(&mut self) {
        let key = self.setup.key();
        let done = {
            let mut finished = FINISHED.lock().unwrap_or_else(|e| e.into_inner());
            finished.push(key.clone());
            finished.iter().filter(|k| **k == key).count()
        };
        if done == self.tests {
            support::stop_cluster(&key);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Batches built by hand (uncompressed) and read back.
// ---------------------------------------------------------------------------------------------

fn put_varlong(out: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    out.put_u8(z as u8);
}

fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    put_varlong(out, b.len() as i64);
    out.put_slice(b);
}

/// An uncompressed v2 batch of `count` records `tag-i` (key and value) at `timestamp`.
fn batch(pid: i64, epoch: i16, seq: i32, transactional: bool, count: i32, timestamp: i64, tag: &str) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i64(0);
    out.put_i32(0);
    out.put_i32(-1);
    out.put_i8(2);
    out.put_u32(0);
    out.put_i16(if transactional { ATTR_TRANSACTIONAL } else { 0 });
    out.put_i32(count - 1);
    out.put_i64(timestamp);
    out.put_i64(timestamp);
    out.put_i64(pid);
    out.put_i16(epoch);
    out.put_i32(seq);
    out.put_i32(count);
    for i in 0..count {
        let mut body = BytesMut::new();
        body.put_i8(0);
        put_varlong(&mut body, 0);
        put_varlong(&mut body, i64::from(i));
        put_bytes(&mut body, format!("{tag}-{i}").as_bytes());
        put_bytes(&mut body, format!("{tag}-{i}").as_bytes());
        put_varlong(&mut body, 0);
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

/// The control type of a control batch's record (0 = ABORT, 1 = COMMIT): its key is
/// `version: int16, type: int16` (Kafka's `ControlRecordType`).
fn control_type(b: &Batch) -> i16 {
    assert!(b.is_control() && b.record_count() == 1, "one control record: {b:?}");
    let p = &b.bytes()[HEADER_LEN..];
    let mut pos = 0;
    read_varlong(p, &mut pos); // length
    pos += 1; // attributes
    read_varlong(p, &mut pos); // timestamp delta
    read_varlong(p, &mut pos); // offset delta
    let klen = read_varlong(p, &mut pos);
    assert_eq!(klen, 4, "control key length");
    i16::from_be_bytes([p[pos + 2], p[pos + 3]])
}

fn batches(records: &Bytes) -> Vec<Batch> {
    BatchIter::new(records.clone()).map(|b| b.expect("valid batch")).collect()
}

// ---------------------------------------------------------------------------------------------
// The broker, spoken to directly.
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Fetched {
    high_watermark: i64,
    last_stable_offset: i64,
    aborted: Option<Vec<(i64, i64)>>,
    batches: Vec<Batch>,
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

    /// The highest version of `api_key` the broker advertises.
    async fn max_version(&mut self, api_key: i16) -> i16 {
        let resp = self.conn.send(&ApiVersionsRequest::default(), 0).await.expect("ApiVersions");
        resp.api_keys.iter().find(|k| k.api_key == api_key).map_or(-1, |k| k.max_version)
    }

    async fn create_topic(&mut self, topic: &str) {
        let mut t = CreatableTopic::default();
        t.name = name(topic);
        t.num_partitions = 1;
        t.replication_factor = 1;
        let mut c = CreatableTopicConfig::default();
        c.name = StrBytes::from_static_str("message.timestamp.before.max.ms");
        c.value = Some(StrBytes::from_static_str("9223372036854775807"));
        t.configs = vec![c];
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let resp = self.conn.send(&req, 7).await.expect("CreateTopics");
        assert_eq!(resp.topics[0].error_code, NONE, "CreateTopics {topic}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.try_log_end(topic).await.0 != NONE {
            assert!(Instant::now() < deadline, "{topic} not served after 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Produce (acks=all) of `records` to partition 0 of `topic` at `version`; returns
    /// (error code, base offset).
    async fn produce(
        &mut self,
        topic: &str,
        records: Bytes,
        transactional_id: Option<&str>,
        version: i16,
    ) -> (i16, i64) {
        let mut req = ProduceRequest::default();
        req.transactional_id = transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string())));
        req.acks = -1;
        req.timeout_ms = 30_000;
        let mut pd = PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(records);
        let mut td = TopicProduceData::default();
        td.name = name(topic);
        td.partition_data = vec![pd];
        req.topic_data.push(td);
        let resp = self.conn.send(&req, version).await.expect("Produce");
        let p = &resp.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    }

    async fn produce_ok(&mut self, topic: &str, records: Bytes, transactional_id: Option<&str>, version: i16) -> i64 {
        let (code, base) = self.produce(topic, records, transactional_id, version).await;
        assert_eq!(code, NONE, "Produce v{version} to {topic}");
        base
    }

    /// A sessionless Fetch v12 of partition 0 from `offset`, no wait.
    async fn fetch(&mut self, topic: &str, offset: i64, isolation_level: i8) -> Fetched {
        let mut p = FetchPartition::default();
        p.partition = 0;
        p.current_leader_epoch = -1;
        p.fetch_offset = offset;
        p.last_fetched_epoch = -1;
        p.log_start_offset = -1;
        p.partition_max_bytes = 1 << 20;
        let mut t = FetchTopic::default();
        t.topic = name(topic);
        t.partitions = vec![p];
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_bytes = 1 << 20;
        req.isolation_level = isolation_level;
        req.session_epoch = -1;
        req.topics = vec![t];
        let resp = self.conn.send(&req, 12).await.expect("Fetch");
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, NONE, "Fetch {topic} at {offset}");
        Fetched {
            high_watermark: p.high_watermark,
            last_stable_offset: p.last_stable_offset,
            aborted: p
                .aborted_transactions
                .as_ref()
                .map(|v| v.iter().map(|a| (a.producer_id.0, a.first_offset)).collect()),
            batches: batches(&p.records.clone().unwrap_or_default()),
        }
    }

    async fn try_log_end(&mut self, topic: &str) -> (i16, i64) {
        let (code, offset, _) = self.list_offsets(topic, -1).await;
        (code, offset)
    }

    /// ListOffsets v7 of partition 0 at `timestamp` (-1 latest, -3 max timestamp, or a
    /// timestamp): (error code, offset, timestamp).
    async fn list_offsets(&mut self, topic: &str, timestamp: i64) -> (i16, i64, i64) {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = 0;
        p.current_leader_epoch = -1;
        p.timestamp = timestamp;
        let mut t = ListOffsetsTopic::default();
        t.name = name(topic);
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(-1);
        req.topics = vec![t];
        let resp = self.conn.send(&req, 7).await.expect("ListOffsets");
        let p = &resp.topics[0].partitions[0];
        (p.error_code, p.offset, p.timestamp)
    }

    async fn log_end(&mut self, topic: &str) -> i64 {
        let (code, off) = self.try_log_end(topic).await;
        assert_eq!(code, NONE, "ListOffsets {topic}");
        off
    }

    /// Waits (15 s at most) until the log end of `topic` is `expected`, then checks that it
    /// stays there for 500 ms (the coordinator wrote one marker, not more). Returns when (ms
    /// since the epoch) it was first seen there.
    async fn wait_log_end(&mut self, topic: &str, expected: i64) -> i64 {
        let end = txn::wait_for_log_end(&mut self.conn, topic, 0, expected, Duration::from_secs(15))
            .await
            .unwrap_or_else(|e| panic!("{topic}: {e}"));
        assert_eq!(end, expected, "{topic}: log end passed the expected {expected}");
        let reached = now_ms();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(self.log_end(topic).await, expected, "{topic}: more than one marker");
        reached
    }

    /// A new idempotent producer id (InitProducerId with no transactional id).
    async fn idempotent_producer(&mut self) -> (i64, i16) {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let resp = self.conn.send(&req, 4).await.expect("InitProducerId");
            if resp.error_code == NONE {
                return (resp.producer_id.0, resp.producer_epoch);
            }
            assert!(Instant::now() < deadline, "InitProducerId error {}", resp.error_code);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// DescribeProducers v0 of partition 0: (producer id, epoch, last sequence, current txn
    /// start offset) of each active producer.
    async fn describe_producers(&mut self, topic: &str) -> Vec<(i64, i32, i32, i64)> {
        let req = DescribeProducersRequest::default()
            .with_topics(vec![TopicRequest::default().with_name(name(topic)).with_partition_indexes(vec![0])]);
        let resp = self.conn.send(&req, 0).await.expect("DescribeProducers");
        let p = &resp.topics[0].partitions[0];
        assert_eq!(p.error_code, NONE, "DescribeProducers {topic}");
        p.active_producers
            .iter()
            .map(|s| (s.producer_id.0, s.producer_epoch, s.last_sequence, s.current_txn_start_offset))
            .collect()
    }

    /// A transactional producer for a fresh transactional id (FindCoordinator first: the
    /// first request creates `__transaction_state`).
    async fn txn_producer(&mut self, prefix: &str, timeout_ms: i32, protocol: TxnProtocol) -> TxnProducer {
        let id = support::unique_name(prefix);
        // Right after startup the one broker is the coordinator but may still be loading
        // `__transaction_state`: NOT_COORDINATOR until then.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            txn::find_coordinator(&mut self.conn, &id).await.expect("FindCoordinator");
            match TxnProducer::init(&mut self.conn, &id, timeout_ms, protocol).await {
                Ok(t) => return t,
                Err(e) if e.code() == Some(txn::NOT_COORDINATOR) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await
                }
                Err(e) => panic!("InitProducerId: {e}"),
            }
        }
    }
}

/// The protocols the cluster's broker serves: V1 always, V2 when it advertises EndTxn v5.
async fn protocols(b: &mut Broker) -> Vec<TxnProtocol> {
    let end_txn = b.max_version(26).await;
    if end_txn >= 5 {
        vec![TxnProtocol::V1, TxnProtocol::V2]
    } else {
        vec![TxnProtocol::V1]
    }
}

/// (offset, value) of every record librdkafka reads from `topic` at `isolation` (stops at
/// `count` records, so a test ends its topic with a sentinel and expects it last).
fn consumed(cluster: &Cluster, topic: &str, count: usize, isolation: &str) -> Vec<(i64, String)> {
    support::consume_all(&cluster.bootstrap, topic, count, isolation)
        .iter()
        .map(|v| (v["offset"].as_i64().unwrap(), v["value"].as_str().unwrap_or_default().to_string()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The questions, each run on each cluster.
// ---------------------------------------------------------------------------------------------

/// Q1: AddPartitionsToTxn then EndTxn with no data appends exactly one control batch at the
/// log end (type, producer id, epoch; timestamp = the coordinator's clock), under each
/// protocol; consumers at both isolation levels skip it.
async fn q1_empty_transaction_appends_exactly_one_marker(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("txn-q1");
    b.create_topic(&topic).await;
    let (pid, epoch) = b.idempotent_producer().await;
    let mut seq = 0;
    let mut expected = vec![];
    let mut end = b.produce_ok(&topic, batch(pid, epoch, 0, false, 2, now_ms(), "data"), None, 11).await + 2;
    seq += 2;
    expected.extend([(0, "data-0".to_string()), (1, "data-1".to_string())]);
    for protocol in protocols(&mut b).await {
        for commit in [true, false] {
            let mut t = b.txn_producer("txn-q1", 60_000, protocol).await;
            let epoch_before = t.producer_epoch;
            let codes = t.add_partitions(&mut b.conn, &[(&topic, 0)]).await.unwrap();
            assert_eq!(codes, vec![NONE], "AddPartitionsToTxn");
            let before = now_ms();
            t.end(&mut b.conn, commit).await.expect("EndTxn");
            let after = now_ms();
            let reached = b.wait_log_end(&topic, end + 1).await;
            eprintln!(
                "[pin] {s:?} {protocol:?} commit={commit}: EndTxn took {} ms, marker in the log <= {} ms after it",
                after - before,
                reached - after
            );
            let f = b.fetch(&topic, end, 0).await;
            assert_eq!(f.batches.len(), 1, "{protocol:?} commit={commit}: one batch at {end}: {f:?}");
            let m = &f.batches[0];
            assert!(m.is_control() && m.is_transactional(), "{protocol:?}: a control batch: {m:?}");
            assert_eq!((m.base_offset(), m.record_count()), (end, 1));
            assert_eq!(control_type(m), if commit { COMMIT } else { ABORT });
            assert_eq!(m.producer_id(), t.producer_id, "{protocol:?}: the marker carries the txn's producer id");
            match protocol {
                // TV_0 client rules: no epoch bump, the marker has the producer's epoch.
                TxnProtocol::V1 => {
                    assert_eq!((t.producer_epoch, m.producer_epoch()), (epoch_before, epoch_before), "V1 epoch")
                }
                // KIP-890: EndTxn v5 answers the bumped epoch and the marker carries it.
                TxnProtocol::V2 => assert_eq!(
                    (t.producer_epoch, m.producer_epoch()),
                    (epoch_before + 1, epoch_before + 1),
                    "V2 epoch bump"
                ),
            }
            assert!(
                m.base_timestamp() >= before - 5 && m.base_timestamp() <= after + 5_000,
                "marker timestamp {} is the coordinator's clock ({before}..{after})",
                m.base_timestamp()
            );
            // EndTxn again with the same type and the identity it was sent with (a retry after
            // a lost answer) succeeds and writes no second marker.
            let mut retry = TxnProducer::resume(&t.transactional_id, t.producer_id, epoch_before, protocol);
            let again = retry.end(&mut b.conn, commit).await;
            eprintln!(
                "[pin] {s:?} {protocol:?} commit={commit}: EndTxn retried -> {:?}",
                again.as_ref().map_err(|e| e.code())
            );
            assert!(again.is_ok(), "{protocol:?}: a retried EndTxn is answered NONE: {again:?}");
            assert_eq!(retry.producer_epoch, t.producer_epoch, "the retry's answer carries the current epoch");
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(b.log_end(&topic).await, end + 1, "no second marker");
            // The LSO is not held by an empty transaction.
            let rc = b.fetch(&topic, end, 1).await;
            assert_eq!(rc.last_stable_offset, end + 1, "LSO after the marker");
            assert_eq!(rc.aborted.clone().unwrap_or_default(), vec![], "no aborted transaction listed");
            end += 1;
        }
    }
    let sentinel = b.produce_ok(&topic, batch(pid, epoch, seq, false, 1, now_ms(), "sentinel"), None, 11).await;
    assert_eq!(sentinel, end, "the idempotent producer continues after the markers");
    expected.push((end, "sentinel-0".into()));
    for isolation in ["read_committed", "read_uncommitted"] {
        assert_eq!(consumed(&cluster, &topic, expected.len(), isolation), expected, "{isolation}");
    }
}

/// Q2: transactional batches of our own, interleaved with another producer's idempotent
/// batch, then EndTxn(ABORT): offsets as written, `aborted_transactions` names the producer
/// and first offset, read_committed skips the aborted records, read_uncommitted sees them.
/// Also pins what a transactional Produce without AddPartitionsToTxn gets (KIP-890 part 1
/// verification; part 2's implicit add with Produce v12).
async fn q2_aborted_data_is_written_as_aborted_data(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    let (pid, epoch) = b.idempotent_producer().await;
    for protocol in protocols(&mut b).await {
        let topic = support::unique_name("txn-q2");
        b.create_topic(&topic).await;
        let mut t = b.txn_producer("txn-q2", 60_000, protocol).await;
        let tid = t.transactional_id.clone();
        let produce_version = if protocol == TxnProtocol::V2 { 12 } else { 11 };
        // Without AddPartitionsToTxn first.
        let (unadded, _) = b
            .produce(
                &topic,
                batch(t.producer_id, t.producer_epoch, 0, true, 2, now_ms(), "a"),
                Some(&tid),
                produce_version,
            )
            .await;
        let implicit = unadded == NONE;
        eprintln!("[pin] {s:?} {protocol:?}: transactional Produce v{produce_version} without AddPartitionsToTxn -> {unadded}");
        let expected = match protocol {
            // KIP-890 part 1: the leader verifies with the coordinator that the partition is in
            // the transaction (default `transaction.partition.verification.enable=true`).
            TxnProtocol::V1 => TRANSACTION_ABORTABLE,
            // KIP-890 part 2: Produce v12 adds the partition to the transaction itself, on a
            // cluster at transaction.version 1 too.
            TxnProtocol::V2 => NONE,
        };
        assert_eq!(
            unadded, expected,
            "{protocol:?}: transactional Produce v{produce_version} without AddPartitionsToTxn"
        );
        let first = 0;
        let seq = 2;
        if !implicit {
            assert_eq!(t.add_partitions(&mut b.conn, &[(&topic, 0)]).await.unwrap(), vec![NONE]);
            let base = b
                .produce_ok(
                    &topic,
                    batch(t.producer_id, t.producer_epoch, 0, true, 2, now_ms(), "a"),
                    Some(&tid),
                    produce_version,
                )
                .await;
            assert_eq!(base, 0);
        }
        let idem = b
            .produce_ok(&topic, batch(pid, epoch, 0, false, 1, now_ms(), &format!("c{produce_version}")), None, 11)
            .await;
        assert_eq!(idem, 2, "the idempotent batch lands right after the open transaction's");
        let base = b
            .produce_ok(
                &topic,
                batch(t.producer_id, t.producer_epoch, seq, true, 2, now_ms(), "b"),
                Some(&tid),
                produce_version,
            )
            .await;
        assert_eq!(base, 3);
        // The open transaction holds the LSO at its first offset.
        let open = b.fetch(&topic, 0, 1).await;
        assert_eq!((open.high_watermark, open.last_stable_offset), (5, first), "LSO held by the open txn");
        let aborted_pid = t.producer_id;
        t.end(&mut b.conn, false).await.expect("EndTxn(ABORT)");
        b.wait_log_end(&topic, 6).await;
        let rc = b.fetch(&topic, 0, 1).await;
        assert_eq!(rc.last_stable_offset, 6);
        assert_eq!(rc.aborted, Some(vec![(aborted_pid, 0)]), "{protocol:?}: aborted_transactions");
        let layout: Vec<(i64, i64, bool, bool, i64)> = rc
            .batches
            .iter()
            .map(|x| (x.base_offset(), x.last_offset(), x.is_transactional(), x.is_control(), x.producer_id()))
            .collect();
        assert_eq!(
            layout,
            vec![
                (0, 1, true, false, aborted_pid),
                (2, 2, false, false, pid),
                (3, 4, true, false, aborted_pid),
                (5, 5, true, true, aborted_pid)
            ],
            "{protocol:?}: offsets as written"
        );
        assert_eq!(control_type(&rc.batches[3]), ABORT);
        // A sentinel, then what the consumers see.
        let s_off = b.produce_ok(&topic, batch(pid, epoch, 1, false, 1, now_ms(), "sentinel"), None, 11).await;
        assert_eq!(s_off, 6);
        // The idempotent producer is shared by the topics of this test: use its next sequence.
        let cname = format!("c{produce_version}-0");
        assert_eq!(
            consumed(&cluster, &topic, 2, "read_committed"),
            vec![(2, cname.clone()), (6, "sentinel-0".into())],
            "read_committed skips the aborted records"
        );
        assert_eq!(
            consumed(&cluster, &topic, 6, "read_uncommitted"),
            vec![
                (0, "a-0".into()),
                (1, "a-1".into()),
                (2, cname),
                (3, "b-0".into()),
                (4, "b-1".into()),
                (6, "sentinel-0".into())
            ],
            "read_uncommitted sees the aborted records"
        );
        // The next topic's idempotent batches start a new partition: sequence 0 again.
    }
}

/// Q3: a transaction resumed from a new connection with the stored transactional id,
/// producer id and epoch, without InitProducerId: it keeps producing into the open
/// transaction and commits it.
async fn q3_a_resumed_producer_continues_the_open_transaction(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    for protocol in protocols(&mut b).await {
        let topic = support::unique_name("txn-q3");
        b.create_topic(&topic).await;
        let produce_version = if protocol == TxnProtocol::V2 { 12 } else { 11 };
        let t = b.txn_producer("txn-q3", 60_000, protocol).await;
        assert_eq!(t.add_partitions(&mut b.conn, &[(&topic, 0)]).await.unwrap(), vec![NONE]);
        let tid = t.transactional_id.clone();
        b.produce_ok(
            &topic,
            batch(t.producer_id, t.producer_epoch, 0, true, 2, now_ms(), "x"),
            Some(&tid),
            produce_version,
        )
        .await;
        let stored = (t.producer_id, t.producer_epoch);
        drop(t);
        drop(b);
        // A new process: new connection, the stored identity, no InitProducerId.
        let mut b2 = Broker::connect(&cluster).await;
        let mut r = TxnProducer::resume(&tid, stored.0, stored.1, protocol);
        assert_eq!(r.add_partitions(&mut b2.conn, &[(&topic, 0)]).await.unwrap(), vec![NONE], "re-adding is accepted");
        let base = b2
            .produce_ok(
                &topic,
                batch(r.producer_id, r.producer_epoch, 2, true, 1, now_ms(), "y"),
                Some(&tid),
                produce_version,
            )
            .await;
        assert_eq!(base, 2);
        r.end(&mut b2.conn, true).await.expect("EndTxn(COMMIT) of the resumed transaction");
        b2.wait_log_end(&topic, 4).await;
        let rc = b2.fetch(&topic, 0, 1).await;
        assert_eq!(rc.aborted.unwrap_or_default(), vec![]);
        assert_eq!(rc.batches.len(), 3);
        assert_eq!((rc.batches[2].base_offset(), control_type(&rc.batches[2])), (3, COMMIT));
        b = b2;
    }
}

/// Q4a: a new InitProducerId on the transactional id of an open transaction aborts it: the
/// ABORT marker lands at the log end (after anything appended meanwhile), the old epoch is
/// fenced.
async fn q4_init_producer_id_aborts_the_open_transaction_at_the_log_end(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    let (pid, epoch) = b.idempotent_producer().await;
    for protocol in protocols(&mut b).await {
        let topic = support::unique_name("txn-q4");
        b.create_topic(&topic).await;
        let produce_version = if protocol == TxnProtocol::V2 { 12 } else { 11 };
        let mut t = b.txn_producer("txn-q4", 60_000, protocol).await;
        let tid = t.transactional_id.clone();
        assert_eq!(t.add_partitions(&mut b.conn, &[(&topic, 0)]).await.unwrap(), vec![NONE]);
        b.produce_ok(
            &topic,
            batch(t.producer_id, t.producer_epoch, 0, true, 1, now_ms(), "open"),
            Some(&tid),
            produce_version,
        )
        .await;
        b.produce_ok(&topic, batch(pid, epoch, 0, false, 2, now_ms(), "other"), None, 11).await;
        // InitProducerId on the same id, raw, to see its first answer.
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_string(tid.clone()))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let mut answers = vec![];
        let deadline = Instant::now() + Duration::from_secs(30);
        let (new_pid, new_epoch) = loop {
            let resp = b.conn.send(&req, 4).await.expect("InitProducerId");
            answers.push(resp.error_code);
            if resp.error_code == NONE {
                break (resp.producer_id.0, resp.producer_epoch);
            }
            assert_eq!(resp.error_code, CONCURRENT_TRANSACTIONS, "{answers:?}");
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        eprintln!(
            "[pin] {s:?} {protocol:?}: InitProducerId on an open txn answered {answers:?}; epoch {} -> {new_pid}/{new_epoch}",
            t.producer_epoch
        );
        assert_eq!(
            answers[0], CONCURRENT_TRANSACTIONS,
            "the first InitProducerId aborts and answers CONCURRENT_TRANSACTIONS"
        );
        assert_eq!(new_pid, t.producer_id, "same producer id");
        // The abort fences the open epoch (epoch + 1 on the marker), the new InitProducerId
        // takes the next one.
        b.wait_log_end(&topic, 4).await;
        let f = b.fetch(&topic, 3, 0).await;
        let m = &f.batches[0];
        assert_eq!((m.base_offset(), control_type(m), m.producer_id()), (3, ABORT, t.producer_id));
        eprintln!("[pin] {s:?} {protocol:?}: abort marker epoch {}, new epoch {new_epoch}", m.producer_epoch());
        assert_eq!(m.producer_epoch(), t.producer_epoch + 1, "the abort marker carries the bumped epoch");
        assert_eq!(new_epoch, t.producer_epoch + 2, "InitProducerId returns the epoch after it");
        // The old producer is fenced.
        let err = t.end(&mut b.conn, true).await.expect_err("EndTxn with the fenced epoch");
        eprintln!("[pin] {s:?} {protocol:?}: EndTxn with the fenced epoch -> {:?}", err.code());
        assert_eq!(err.code(), Some(PRODUCER_FENCED), "{err}");
        // InitProducerId on an id whose transaction is complete writes nothing and answers
        // at once, with the next epoch.
        let again = TxnProducer::init(&mut b.conn, &tid, 60_000, protocol).await.expect("InitProducerId again");
        assert_eq!((again.producer_id, again.producer_epoch), (new_pid, new_epoch + 1));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(b.log_end(&topic).await, 4, "no marker for a completed transaction");
    }
}

/// Q4b: the transaction timeout aborts an open transaction (with data, or with a partition
/// added and no data) behind our back: ABORT marker at the log end, epoch bumped, the
/// stored epoch fenced.
async fn q4_the_transaction_timeout_aborts_the_open_transaction(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    for protocol in protocols(&mut b).await {
        for with_data in [true, false] {
            let topic = support::unique_name("txn-q4t");
            b.create_topic(&topic).await;
            let produce_version = if protocol == TxnProtocol::V2 { 12 } else { 11 };
            let mut t = b.txn_producer("txn-q4t", 1_000, protocol).await;
            let tid = t.transactional_id.clone();
            assert_eq!(t.add_partitions(&mut b.conn, &[(&topic, 0)]).await.unwrap(), vec![NONE]);
            let mut end = 0;
            if with_data {
                b.produce_ok(
                    &topic,
                    batch(t.producer_id, t.producer_epoch, 0, true, 1, now_ms(), "z"),
                    Some(&tid),
                    produce_version,
                )
                .await;
                end = 1;
            }
            b.wait_log_end(&topic, end + 1).await;
            let f = b.fetch(&topic, end, 0).await;
            let m = &f.batches[0];
            assert_eq!((m.base_offset(), control_type(m), m.producer_id()), (end, ABORT, t.producer_id));
            assert_eq!(m.producer_epoch(), t.producer_epoch + 1, "the timeout abort bumps the epoch");
            let err = t.end(&mut b.conn, true).await.expect_err("EndTxn after the timeout");
            eprintln!("[pin] {s:?} {protocol:?} data={with_data}: EndTxn after the timeout abort -> {:?}", err.code());
            let expected = match protocol {
                TxnProtocol::V1 => PRODUCER_FENCED,
                TxnProtocol::V2 => INVALID_TXN_STATE,
            };
            assert_eq!(err.code(), Some(expected), "{protocol:?}: {err}");
        }
    }
}

/// Q5: an idempotent producer whose sequence stays contiguous is accepted after other
/// producers' markers and records took offsets; a sequence that follows the offset (skips)
/// is refused; DescribeProducers reports its last sequence and epoch.
async fn q5_idempotent_sequences_stay_contiguous_across_foreign_offsets(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("txn-q5");
    b.create_topic(&topic).await;
    let (pid, epoch) = b.idempotent_producer().await;
    b.produce_ok(&topic, batch(pid, epoch, 0, false, 2, now_ms(), "d"), None, 11).await;
    let mut t = b.txn_producer("txn-q5", 60_000, TxnProtocol::V1).await;
    assert_eq!(t.add_partitions(&mut b.conn, &[(&topic, 0)]).await.unwrap(), vec![NONE]);
    t.end(&mut b.conn, true).await.unwrap();
    b.wait_log_end(&topic, 3).await;
    // Sequence = offset (3) skips sequence 2.
    let (code, _) = b.produce(&topic, batch(pid, epoch, 3, false, 1, now_ms(), "skip"), None, 11).await;
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER, "a sequence that skips is refused");
    let base = b.produce_ok(&topic, batch(pid, epoch, 2, false, 1, now_ms(), "next"), None, 11).await;
    assert_eq!(base, 3, "the contiguous sequence lands at the log end");
    let producers = b.describe_producers(&topic).await;
    let me = producers.iter().find(|p| p.0 == pid).expect("the idempotent producer is described");
    assert_eq!((me.1, me.2, me.3), (i32::from(epoch), 2, -1), "epoch, last sequence, no txn: {producers:?}");
    let marker = producers.iter().find(|p| p.0 == t.producer_id).expect("the marker's producer is described");
    assert_eq!(marker.3, -1, "no open transaction after the marker: {producers:?}");
}

/// Q6: one transaction over two partitions (different log ends) puts one marker at each
/// partition's own log end.
async fn q6_markers_of_one_transaction_land_at_each_partitions_log_end(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    let (pid, epoch) = b.idempotent_producer().await;
    let (t1, t2) = (support::unique_name("txn-q6a"), support::unique_name("txn-q6b"));
    b.create_topic(&t1).await;
    b.create_topic(&t2).await;
    b.produce_ok(&t1, batch(pid, epoch, 0, false, 5, now_ms(), "a"), None, 11).await;
    let mut t = b.txn_producer("txn-q6", 60_000, TxnProtocol::V1).await;
    assert_eq!(t.add_partitions(&mut b.conn, &[(&t1, 0), (&t2, 0)]).await.unwrap(), vec![NONE, NONE]);
    t.end(&mut b.conn, true).await.unwrap();
    b.wait_log_end(&t1, 6).await;
    b.wait_log_end(&t2, 1).await;
    for (topic, at) in [(&t1, 5), (&t2, 0)] {
        let f = b.fetch(topic, at, 0).await;
        assert_eq!((f.batches[0].base_offset(), control_type(&f.batches[0])), (at, COMMIT));
    }
}

/// Q0: what each cluster advertises: EndTxn v5 (the TV_2 client protocol) from Kafka 4.0 on,
/// whatever `transaction.version` is finalized; 3.9.1 stops at EndTxn v4 and Produce v11.
async fn q0_versions_and_the_finalized_transaction_version(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("mirrorgate-test"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    let resp = b.conn.send(&req, 3).await.expect("ApiVersions v3");
    let max = |key: i16| resp.api_keys.iter().find(|k| k.api_key == key).map_or(-1, |k| k.max_version);
    let tv = resp
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map_or(0, |f| f.max_version_level);
    let got = (max(0), max(24), max(26), tv);
    eprintln!(
        "[pin] {s:?}: Produce max {}, AddPartitionsToTxn max {}, EndTxn max {}, transaction.version {}",
        got.0, got.1, got.2, got.3
    );
    match s.tv {
        None => assert_eq!(got, (11, 5, 4, 0), "3.9.1: no TV_2 protocol, transaction.version 0"),
        Some(tv) => {
            assert_eq!(got, (13, 5, 5, i16::from(tv)), "4.x: TV_2 protocol advertised at any transaction.version")
        }
    }
}

/// Q3b: after a crash, DescribeTransactions on the (deterministic) transactional id gives the
/// open transaction's producer id, epoch and partitions; resuming with them ends it at the
/// right place. After EndTxn it shows the completed state (V2: the bumped epoch).
async fn q3_describe_transactions_recovers_an_open_transaction(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    for protocol in protocols(&mut b).await {
        let topic = support::unique_name("txn-q3d");
        b.create_topic(&topic).await;
        let produce_version = if protocol == TxnProtocol::V2 { 12 } else { 11 };
        let t = b.txn_producer("txn-q3d", 60_000, protocol).await;
        let tid = t.transactional_id.clone();
        assert_eq!(t.add_partitions(&mut b.conn, &[(&topic, 0)]).await.unwrap(), vec![NONE]);
        b.produce_ok(
            &topic,
            batch(t.producer_id, t.producer_epoch, 0, true, 1, now_ms(), "x"),
            Some(&tid),
            produce_version,
        )
        .await;
        let d = txn::describe(&mut b.conn, &tid).await.unwrap().expect("the open transaction is described");
        assert_eq!(
            (d.state.as_str(), d.producer_id, d.producer_epoch, d.timeout_ms, d.partitions.clone()),
            ("Ongoing", t.producer_id, t.producer_epoch, 60_000, vec![(topic.clone(), 0)]),
            "{protocol:?}"
        );
        let mut r = TxnProducer::resume(&tid, d.producer_id, d.producer_epoch, protocol);
        r.end(&mut b.conn, false).await.expect("EndTxn(ABORT) from the description");
        b.wait_log_end(&topic, 2).await;
        let f = b.fetch(&topic, 1, 0).await;
        assert_eq!((f.batches[0].base_offset(), control_type(&f.batches[0])), (1, ABORT));
        let done = txn::describe(&mut b.conn, &tid).await.unwrap().unwrap();
        let bump = i16::from(protocol == TxnProtocol::V2);
        assert_eq!(
            (done.state.as_str(), done.producer_epoch),
            ("CompleteAbort", t.producer_epoch + bump),
            "{protocol:?}"
        );
        assert_eq!(txn::describe(&mut b.conn, &support::unique_name("txn-unknown")).await.unwrap(), None);
    }
}

/// Q7: the sequences of a second transaction of the same producer on the same partition: V1
/// keeps the epoch, so the sequence continues; V2 bumped the epoch, so it starts at 0. And a
/// refused (out-of-order) first batch of a transaction on a partition with sequence s makes
/// every later batch there with a sequence above s refused too, even the right one (KIP-890
/// part 1's verification entry keeps the lowest sequence tried): with V1, trying 0 where 2
/// was due leaves the transaction unable to write to that partition.
async fn q7_sequences_of_the_next_transaction_on_the_same_partition(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    for protocol in protocols(&mut b).await {
        let (good, poisoned) = match protocol {
            TxnProtocol::V1 => ([2, 0, 1, 3], [0, 2, 3, 2]),
            TxnProtocol::V2 => ([2, 0, 1, 3], [1, 0, 1, 0]),
        };
        let tried = next_txn_sequences(&mut b, s, protocol, &good).await;
        let tried_after_refusal = next_txn_sequences(&mut b, s, protocol, &poisoned).await;
        let expected: [(i32, i16, i64); 4] = match protocol {
            TxnProtocol::V1 => [
                (2, NONE, 3),
                (0, OUT_OF_ORDER_SEQUENCE_NUMBER, -1),
                (1, OUT_OF_ORDER_SEQUENCE_NUMBER, -1),
                (3, NONE, 4),
            ],
            TxnProtocol::V2 => [
                (2, OUT_OF_ORDER_SEQUENCE_NUMBER, -1),
                (0, NONE, 3),
                (1, NONE, 4),
                (3, OUT_OF_ORDER_SEQUENCE_NUMBER, -1),
            ],
        };
        assert_eq!(tried, expected.to_vec(), "{protocol:?}: the next transaction's sequences");
        let oos = OUT_OF_ORDER_SEQUENCE_NUMBER;
        let expected_after_refusal: [(i32, i16, i64); 4] = match protocol {
            // Sequence 0 refused first: the right sequence 2 is refused as well, for good.
            TxnProtocol::V1 => [(0, oos, -1), (2, oos, -1), (3, oos, -1), (2, oos, -1)],
            // Sequence 1 refused first: the lower 0 is still accepted, then 1, and 0 again is
            // a duplicate (answered with the first append's offset).
            TxnProtocol::V2 => [(1, oos, -1), (0, NONE, 3), (1, NONE, 4), (0, NONE, 3)],
        };
        assert_eq!(tried_after_refusal, expected_after_refusal.to_vec(), "{protocol:?}: after a refused first batch");
    }
}

/// One transaction of 2 records (sequences 0, 1) aborted, then a second transaction of the
/// same producer on the same partition tries one-record batches with the sequences of
/// `order`: (sequence, error code, base offset) of each.
async fn next_txn_sequences(b: &mut Broker, s: Setup, protocol: TxnProtocol, order: &[i32]) -> Vec<(i32, i16, i64)> {
    let topic = support::unique_name("txn-q7");
    b.create_topic(&topic).await;
    let produce_version = if protocol == TxnProtocol::V2 { 12 } else { 11 };
    let mut t = b.txn_producer("txn-q7", 60_000, protocol).await;
    let tid = t.transactional_id.clone();
    assert_eq!(t.add_partitions(&mut b.conn, &[(&topic, 0)]).await.unwrap(), vec![NONE]);
    b.produce_ok(
        &topic,
        batch(t.producer_id, t.producer_epoch, 0, true, 2, now_ms(), "one"),
        Some(&tid),
        produce_version,
    )
    .await;
    t.end(&mut b.conn, false).await.unwrap();
    b.wait_log_end(&topic, 3).await;
    assert_eq!(t.add_partitions(&mut b.conn, &[(&topic, 0)]).await.unwrap(), vec![NONE]);
    let mut tried = vec![];
    for &seq in order {
        let (code, base) = b
            .produce(
                &topic,
                batch(t.producer_id, t.producer_epoch, seq, true, 1, now_ms(), "two"),
                Some(&tid),
                produce_version,
            )
            .await;
        tried.push((seq, code, base));
    }
    eprintln!("[pin] {s:?} {protocol:?}: next transaction, (sequence, error, base offset): {tried:?}");
    t.end(&mut b.conn, false).await.unwrap();
    tried
}

/// Q6b: a marker carries the coordinator's clock, not a timestamp of ours: on a partition of
/// year-old records, ListOffsets by a timestamp between the records and now answers the
/// marker's offset, and the max timestamp is the marker's.
async fn q6_a_markers_timestamp_is_seen_by_list_offsets(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    let topic = support::unique_name("txn-q6t");
    b.create_topic(&topic).await;
    let (pid, epoch) = b.idempotent_producer().await;
    let old = now_ms() - 365 * 24 * 3600 * 1000;
    b.produce_ok(&topic, batch(pid, epoch, 0, false, 2, old, "old"), None, 11).await;
    let mut t = b.txn_producer("txn-q6t", 60_000, TxnProtocol::V1).await;
    assert_eq!(t.add_partitions(&mut b.conn, &[(&topic, 0)]).await.unwrap(), vec![NONE]);
    t.end(&mut b.conn, true).await.unwrap();
    b.wait_log_end(&topic, 3).await;
    b.produce_ok(&topic, batch(pid, epoch, 2, false, 2, old + 1_000, "later"), None, 11).await;
    let by_time = b.list_offsets(&topic, old + 500).await;
    let max_ts = b.list_offsets(&topic, -3).await;
    eprintln!("[pin] {s:?}: ListOffsets(old+500) -> {by_time:?}, MAX_TIMESTAMP -> {max_ts:?}");
    assert_eq!((by_time.0, by_time.1), (NONE, 2), "the marker (offset 2, stamped now) answers a timestamp lookup");
    assert_eq!((max_ts.0, max_ts.1), (NONE, 2), "the marker holds the max timestamp");
}

/// Q8 (issue 36, docs/migration.md "Transactional producers"): a transactional producer that
/// comes from another cluster (its producer id allocated there) recovers on this one by
/// KIP-360's InitProducerId with its old producer id and epoch. (a) The transactional id is
/// unknown here: a fresh producer id at epoch 0 ("the metadata was just created").
/// (b) The id is known here with another producer id: PRODUCER_FENCED, fatal for the Java
/// producer, so mirrorgate must send such a request without the foreign producer id;
/// (c) without it (-1/-1) the same id gets its producer id here with the next epoch.
async fn q8_init_producer_id_with_a_foreign_producer_id(s: Setup) {
    let cluster = s.cluster();
    let mut b = Broker::connect(&cluster).await;
    const FOREIGN: i64 = 987_654_321;
    let init = |id: &str, pid: i64, epoch: i16| {
        InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_string(id.to_string()))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
    };
    // The coordinator of a fresh id may still be loading: a known id first (b's setup).
    let known = b.txn_producer("q8-known", 60_000, TxnProtocol::V1).await;
    let fresh = support::unique_name("q8-fresh");
    txn::find_coordinator(&mut b.conn, &fresh).await.expect("FindCoordinator");
    let resp = b.conn.send(&init(&fresh, FOREIGN, 7), 4).await.expect("InitProducerId");
    eprintln!(
        "[pin] {s:?}: unknown id, foreign producer id: error {}, producer id {}, epoch {}",
        resp.error_code, resp.producer_id.0, resp.producer_epoch
    );
    assert_eq!(resp.error_code, NONE, "(a) an unknown id with a foreign producer id");
    assert!(
        resp.producer_id.0 >= 0 && resp.producer_id.0 != FOREIGN,
        "(a) a fresh producer id: {}",
        resp.producer_id.0
    );
    assert_eq!(resp.producer_epoch, 0, "(a) epoch 0");

    let resp = b.conn.send(&init(&known.transactional_id, FOREIGN, 7), 4).await.expect("InitProducerId");
    eprintln!("[pin] {s:?}: known id, foreign producer id: error {}", resp.error_code);
    assert_eq!(resp.error_code, PRODUCER_FENCED, "(b) a known id with a foreign producer id is fenced");
    let resp = b.conn.send(&init(&known.transactional_id, -1, -1), 4).await.expect("InitProducerId");
    assert_eq!(resp.error_code, NONE, "(c)");
    assert_eq!(resp.producer_id.0, known.producer_id, "(c) its producer id here");
    assert_eq!(resp.producer_epoch, known.producer_epoch + 1, "(c) the next epoch");
}

/// One module per cluster setup with every question as a test; the test list is given once.
macro_rules! cluster_tests {
    ($module:ident, $setup:expr, [$($t:ident),* $(,)?]) => {
        mod $module {
            use super::*;
            const S: Setup = $setup;
            const TESTS: usize = [$(stringify!($t)),*].len();
            $(
                #[tokio::test]
                async fn $t() {
                    let _lease = Lease { setup: S, tests: TESTS };
                    super::$t(S).await
                }
            )*
        }
    };
}

macro_rules! pins {
    (tests = $tests:tt; $($module:ident => $setup:expr;)*) => {
        $( cluster_tests!($module, $setup, $tests); )*
    };
}

pins! {
    tests = [
        q0_versions_and_the_finalized_transaction_version,
        q1_empty_transaction_appends_exactly_one_marker,
        q2_aborted_data_is_written_as_aborted_data,
        q3_a_resumed_producer_continues_the_open_transaction,
        q3_describe_transactions_recovers_an_open_transaction,
        q4_init_producer_id_aborts_the_open_transaction_at_the_log_end,
        q4_the_transaction_timeout_aborts_the_open_transaction,
        q5_idempotent_sequences_stay_contiguous_across_foreign_offsets,
        q6_markers_of_one_transaction_land_at_each_partitions_log_end,
        q6_a_markers_timestamp_is_seen_by_list_offsets,
        q7_sequences_of_the_next_transaction_on_the_same_partition,
        q8_init_producer_id_with_a_foreign_producer_id,
    ];
    kafka_3_9_1 => Setup { version: "3.9.1", tv: None };
    kafka_4_1_1_tv1 => Setup { version: "4.1.1", tv: Some(1) };
    kafka_4_1_1_tv2 => Setup { version: "4.1.1", tv: Some(2) };
    kafka_4_4_0_tv1 => Setup { version: "4.4.0", tv: Some(1) };
    kafka_4_4_0_tv2 => Setup { version: "4.4.0", tv: Some(2) };
}
