//! `__mirror_state` store against a real Kafka broker (1 node, Kafka 4.1.1): topic creation
//! (partitions, compaction, replication factor lowered with a warning), put/load round trips,
//! overrides, tombstones, reload by a fresh store, many writes, and refusal of records of an
//! unknown format. Every test uses its own state topic.

mod support;

use std::collections::BTreeMap;

use kafka_protocol::messages::{FetchRequest, ProduceRequest};
use mirrorgate::client::cluster::ClusterClient;
use mirrorgate::client::{Acks, ClusterOptions};
use mirrorgate::mirror::model::{DesiredState, MirrorDefinition, MirrorTopic, OffsetSegment, PartitionStateRecord};
use mirrorgate::mirror::store::{StateKey, StateSnapshot, StateStore, StateStoreSettings, StoreError};
use mirrorgate::wire::mirror::MirrorPartitionState;

async fn connect() -> ClusterClient {
    let cluster = support::cluster("dest");
    let bootstrap = cluster.bootstrap.split(',').map(String::from).collect();
    ClusterClient::connect(ClusterOptions::new(bootstrap)).await.expect("connect to the test cluster")
}

fn settings(partitions: i32) -> StateStoreSettings {
    StateStoreSettings {
        topic: support::unique_name("__mirror_state-test"),
        num_partitions: partitions,
        // Secret mirror configs are stored encrypted, so the store needs a key.
        secrets: Some(std::sync::Arc::new(mirrorgate::mirror::secrets::SecretCodec::new(
            support::TEST_ENCODER_SECRET,
            None,
        ))),
        ..StateStoreSettings::default()
    }
}

fn mirror(name: &str, secret: &str) -> MirrorDefinition {
    MirrorDefinition {
        name: name.into(),
        configs: BTreeMap::from([
            ("bootstrap.servers".into(), "source:9092".into()),
            ("sasl.jaas.config".into(), secret.into()),
        ]),
        created_ms: 1_700_000_000_000,
        source_cluster_id: Some("src-cluster".into()),
        include_patterns: vec!["orders.*".into()],
        exclude_patterns: vec![],
        start_position: Default::default(),
    }
}

fn topic(mirror: &str, topic: &str, desired: DesiredState) -> MirrorTopic {
    MirrorTopic {
        mirror: mirror.into(),
        topic: topic.into(),
        source_topic_id: Some("AAAAAAAAAAAAAAAAAAAAAQ".into()),
        desired,
        partitions: Some(4),
        source_log_append_time: false,
        start_position: Default::default(),
        migration: None,
        updated_ms: 1_700_000_000_001,
    }
}

fn partition(mirror: &str, topic: &str, p: i32, epoch: i32) -> PartitionStateRecord {
    PartitionStateRecord {
        mirror: mirror.into(),
        topic: topic.into(),
        partition: p,
        state: if epoch % 2 == 0 { MirrorPartitionState::Mirroring } else { MirrorPartitionState::Failed },
        state_epoch: epoch,
        last_mirrored_offset: 1000 * i64::from(p) + i64::from(epoch),
        error_message: (epoch % 2 == 1).then(|| format!("failure {epoch}")),
        retry_attempt: epoch,
        retryable: true,
        previous_state: Some(MirrorPartitionState::LogAlignment),
        segments: vec![
            OffsetSegment { source_start: 0, destination_start: 0 },
            OffsetSegment { source_start: 500 + i64::from(epoch), destination_start: 480 },
        ],
        source_epochs: Vec::new(),
        producer_id: Some(4000 + i64::from(p)),
        producer_epoch: Some(0),
        destination_topic_id: None,
        copy_start: None,
        placeholder_end: None,
        transactions_used: false,
        owner_generation: None,
        aligned_generation: None,
        updated_ms: 1_700_000_000_002,
    }
}

#[tokio::test]
async fn topic_is_created_compacted_with_the_configured_partitions_and_rf_lowered_to_the_broker_count() {
    // The warning about the lowered replication factor is asserted on mirrorgate's own log in
    // `tests/mirror_control.rs`: a per-thread `tracing` subscriber misses events when other
    // tests of this binary touch the same callsites concurrently (it failed CI once).
    let client = connect().await;
    let s = StateStoreSettings { replication_factor: 3, ..settings(7) };
    let store = StateStore::open(client.clone(), s.clone()).await.unwrap();
    let t = store.topic().clone();
    assert_eq!((t.partitions, t.replication_factor, t.created), (7, 1, true), "{t:?}");

    // What the broker says about the topic, independent of the store.
    let other = connect().await;
    let info = other.topic(&s.topic).await.unwrap();
    assert_eq!(info.partitions.len(), 7);
    assert!(info.partitions.values().all(|p| p.replicas.len() == 1), "{info:?}");
    assert_ne!(info.topic_id, mirrorgate::wire::mirror::KafkaUuid::ZERO);
    let configs = other.describe_topic_configs(&s.topic).await.unwrap();
    assert_eq!(configs.get("cleanup.policy").map(String::as_str), Some("compact"));

    // Versions negotiated with this broker: topic-id Fetch (v13+) is what `load` used.
    let leader = other.leader_for(&s.topic, 0).await.unwrap();
    let fetch_v = other.version_for::<FetchRequest>(leader.node_id, 17).await.unwrap();
    let produce_v = other.version_for::<ProduceRequest>(leader.node_id, 13).await.unwrap();
    eprintln!("negotiated Fetch v{fetch_v}, Produce v{produce_v}");
    assert!(fetch_v >= 13, "Fetch v{fetch_v}");

    // Opening again finds the topic and leaves it as it is.
    let again = StateStore::open(other, s).await.unwrap();
    assert_eq!((again.topic().partitions, again.topic().created), (7, false));
}

#[tokio::test]
async fn every_record_type_round_trips() {
    let store = StateStore::open(connect().await, settings(5)).await.unwrap();
    let m =
        mirror("m-roundtrip", "org.apache.kafka.common.security.plain.PlainLoginModule required password=\"s3cret\";");
    let t = topic("m-roundtrip", "orders", DesiredState::Mirroring);
    let p = partition("m-roundtrip", "orders", 2, 4);
    let o1 = store.put_mirror(&m).await.unwrap();
    let o2 = store.put_topic(&t).await.unwrap();
    let o3 = store.put_partition(&p).await.unwrap();
    assert!(o1 < o2 && o2 < o3, "one partition, in order: {o1} {o2} {o3}");

    let snap = store.load().await.unwrap();
    let mut want = StateSnapshot::default();
    want.mirrors.insert(m.name.clone(), m.clone());
    want.topics.insert(("m-roundtrip".into(), "orders".into()), t.clone());
    want.partitions.insert(("m-roundtrip".into(), "orders".into(), 2), p.clone());
    assert_eq!(snap, want);
    assert_eq!(store.load_mirror("m-roundtrip").await.unwrap(), want);
    assert_eq!(store.load_mirror("another").await.unwrap(), StateSnapshot::default());
}

#[tokio::test]
async fn a_later_put_overrides_and_a_tombstone_deletes() {
    let store = StateStore::open(connect().await, settings(3)).await.unwrap();
    store.put_mirror(&mirror("m-over", "old")).await.unwrap();
    store.put_mirror(&mirror("m-over", "new")).await.unwrap();
    store.put_topic(&topic("m-over", "a", DesiredState::Mirroring)).await.unwrap();
    store.put_topic(&topic("m-over", "a", DesiredState::Paused)).await.unwrap();
    store.put_topic(&topic("m-over", "b", DesiredState::Mirroring)).await.unwrap();
    store.put_partition(&partition("m-over", "a", 0, 1)).await.unwrap();
    store.put_partition(&partition("m-over", "a", 0, 2)).await.unwrap();
    store.put_partition(&partition("m-over", "a", 1, 1)).await.unwrap();

    let snap = store.load().await.unwrap();
    assert_eq!(snap.mirrors["m-over"], mirror("m-over", "new"));
    assert_eq!(snap.topics[&("m-over".into(), "a".into())].desired, DesiredState::Paused);
    assert_eq!(snap.partitions[&("m-over".into(), "a".into(), 0)], partition("m-over", "a", 0, 2));
    assert_eq!(snap.partitions.len(), 2);

    store.delete_topic("m-over", "b").await.unwrap();
    store.delete_partition("m-over", "a", 1).await.unwrap();
    let snap = store.load().await.unwrap();
    assert_eq!(snap.topics.keys().cloned().collect::<Vec<_>>(), vec![("m-over".to_string(), "a".to_string())]);
    assert_eq!(snap.partitions.keys().cloned().collect::<Vec<_>>(), vec![("m-over".to_string(), "a".to_string(), 0)]);
    assert!(snap.mirrors.contains_key("m-over"));

    store.delete_partition("m-over", "a", 0).await.unwrap();
    store.delete_topic("m-over", "a").await.unwrap();
    store.delete_mirror("m-over").await.unwrap();
    assert_eq!(store.load().await.unwrap(), StateSnapshot::default());
    // Deleting what does not exist is a harmless tombstone.
    store.delete_mirror("never-existed").await.unwrap();
    assert_eq!(store.load().await.unwrap(), StateSnapshot::default());
}

#[tokio::test]
async fn a_fresh_store_loads_exactly_what_was_written() {
    let s = settings(4);
    let mut want = StateSnapshot::default();
    {
        let store = StateStore::open(connect().await, s.clone()).await.unwrap();
        for i in 0..6 {
            let name = format!("m-restart-{i}");
            let m = mirror(&name, &format!("secret-{i}"));
            store.put_mirror(&m).await.unwrap();
            want.mirrors.insert(name.clone(), m);
            for tn in ["t1", "t2"] {
                let t = topic(&name, tn, DesiredState::Mirroring);
                store.put_topic(&t).await.unwrap();
                want.topics.insert((name.clone(), tn.into()), t);
                for p in 0..3 {
                    let r = partition(&name, tn, p, i);
                    store.put_partition(&r).await.unwrap();
                    want.partitions.insert((name.clone(), tn.into(), p), r);
                }
            }
        }
        store.delete_mirror("m-restart-5").await.unwrap();
        want.mirrors.remove("m-restart-5");
        let used: std::collections::BTreeSet<i32> =
            (0..6).map(|i| store.partition_for(&format!("m-restart-{i}"))).collect();
        assert!(used.len() > 1, "the mirrors should spread over partitions: {used:?}");
    }
    // As after a restart: a new connection, a new store.
    let store = StateStore::open(connect().await, s).await.unwrap();
    assert!(!store.topic().created);
    assert_eq!(store.load().await.unwrap(), want);
}

#[tokio::test]
async fn two_hundred_partition_state_writes_load_correctly_across_many_fetches() {
    // A small fetch size makes the load cross many Fetch responses that end mid-batch.
    let s = StateStoreSettings { fetch_max_bytes: 2048, ..settings(2) };
    let store = StateStore::open(connect().await, s).await.unwrap();
    let mut want = BTreeMap::new();
    for i in 0..200 {
        // 120 partitions; the first 80 are written twice, the second write wins.
        let (p, epoch) = (i % 120, i / 120);
        let r = partition("m-many", "events", p, epoch);
        store.put_partition(&r).await.unwrap();
        want.insert(("m-many".to_string(), "events".to_string(), p), r);
    }
    let snap = store.load().await.unwrap();
    assert_eq!(snap.partitions.len(), 120);
    assert_eq!(snap.partitions, want);
    assert!(snap.mirrors.is_empty() && snap.topics.is_empty());
}

#[tokio::test]
async fn a_record_of_an_unknown_version_fails_the_load_with_partition_and_offset() {
    let client = connect().await;
    let store = StateStore::open(client.clone(), settings(3)).await.unwrap();
    store.put_mirror(&mirror("m-future", "x")).await.unwrap();
    let p = store.partition_for("m-future");

    // A record as a future mirrorgate might write it, produced with our own client.
    let key = br#"{"v":2,"type":"mirror","name":"m-future"}"#.to_vec();
    let batch = one_record_batch(key, Some(br#"{"v":2,"type":"mirror"}"#.to_vec()));
    let offset = client.produce(&store.topic().name, p, batch, Acks::All).await.unwrap();

    match store.load().await {
        Err(StoreError::Corrupt { partition, offset: at, reason, .. }) => {
            assert_eq!((partition, at), (p, offset));
            assert!(reason.contains("v=2"), "{reason}");
        }
        other => panic!("expected a Corrupt error at {p}/{offset}, got {other:?}"),
    }

    // An unknown type under the current version is refused the same way.
    let store2 = StateStore::open(client.clone(), settings(1)).await.unwrap();
    let key = br#"{"v":1,"type":"group","name":"g"}"#.to_vec();
    let offset = client.produce(&store2.topic().name, 0, one_record_batch(key, None), Acks::All).await.unwrap();
    let err = store2.load().await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("partition 0 offset {offset}")) && text.contains("group"), "{text}");
    // Our own keys parse.
    assert!(StateKey::decode(&StateKey::Mirror { name: "g".into() }.encode()).is_ok());
}

fn one_record_batch(key: Vec<u8>, value: Option<Vec<u8>>) -> bytes::Bytes {
    use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: Some(key.into()),
        value: value.map(Into::into),
        headers: Default::default(),
    };
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&record],
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    buf.freeze()
}
