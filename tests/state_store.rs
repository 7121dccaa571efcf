//! `__mirror_state` store against a real Kafka broker (1 node, Kafka 4.1.1): topic creation
//! (partitions, compaction, replication factor lowered with a warning), put/load round trips,
//! overrides, tombstones, reload by a fresh store, many writes, and refusal of records of an
//! unknown format. Every test uses its own state topic.

mod support;

use std::collections::BTreeMap;

use kafka_protocol::messages::{FetchRequest, ProduceRequest};
use mirrorgate::client::cluster::ClusterClient;
use mirrorgate::client::{Acks, ClusterOptions};
use mirrorgate::mirror::migration::routing::{Migration, RoutingCommand, TopicRouting};
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
    // A topic in migration, with every optional field of its routing set (issue 36).
    let mut migrating = topic("m-roundtrip", "payments", DesiredState::Mirroring);
    migrating.migration = Some(Migration {
        routing: TopicRouting::CuttingOver,
        since_ms: 1_700_000_000_100,
        cutover_id: Some("c-1".into()),
        failover_started_ms: Some(1_700_000_000_200),
        forced_past: vec!["producer id 7 wrote to payments-0 directly on the source".into()],
    });
    let o1 = store.put_mirror(&m).await.unwrap();
    let o2 = store.put_topic(&t).await.unwrap();
    let o3 = store.put_partition(&p).await.unwrap();
    assert!(o1 < o2 && o2 < o3, "one partition, in order: {o1} {o2} {o3}");
    store.put_topic(&migrating).await.unwrap();

    let snap = store.load().await.unwrap();
    let mut want = StateSnapshot::default();
    want.mirrors.insert(m.name.clone(), m.clone());
    want.topics.insert(("m-roundtrip".into(), "orders".into()), t.clone());
    want.topics.insert(("m-roundtrip".into(), "payments".into()), migrating.clone());
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

/// The control plane's migration routing (issue 36, `ControlPlane::set_migration`) persisted in
/// the topic records and loaded back by a fresh store: a cutover begun, a second one refused,
/// aborted back to MIGRATING, begun again, failed over and completed; a stopped topic and a
/// topic of another mirror refused; the refusals name why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_routing_is_persisted_and_refusals_name_why() {
    use mirrorgate::mirror::control::{ControlPlane, ControlState};
    use mirrorgate::mirror::topics::ClusterAccess;
    use std::sync::Arc;

    let settings = settings(3);
    let store = Arc::new(StateStore::open(connect().await, settings.clone()).await.unwrap());
    let dest = support::cluster("dest");
    let access = ClusterAccess {
        bootstrap: dest.bootstrap.split(',').map(String::from).collect::<Vec<_>>().into(),
        connect_timeout: std::time::Duration::from_secs(10),
        request_timeout: std::time::Duration::from_secs(30),
    };
    let cp = ControlPlane::new(store.clone(), access);
    let m = mirror("m-migr", "x");
    let topics = [
        topic("m-migr", "orders", DesiredState::Mirroring),
        topic("m-migr", "archive", DesiredState::Stopped),
        topic("m-other", "elsewhere", DesiredState::Mirroring),
    ];
    cp.load(ControlState::from_records(BTreeMap::from([(m.name.clone(), m.clone())]), topics, []));
    let names = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let codes = |r: &[(String, Result<(), mirrorgate::mirror::control::MirrorError>)]| {
        r.iter().map(|(t, r)| (t.clone(), r.as_ref().err().map(|e| e.code))).collect::<Vec<_>>()
    };

    let r = cp
        .set_migration("m-migr", &names(&["orders", "archive", "elsewhere"]), &RoutingCommand::StartMigration)
        .await
        .unwrap();
    assert_eq!(
        codes(&r),
        vec![("orders".into(), None), ("archive".into(), Some(142)), ("elsewhere".into(), Some(139))],
        "{r:?}"
    );
    assert_eq!(cp.migration_routing("orders"), Some(TopicRouting::Migrating));
    assert_eq!(cp.migration_routing("archive"), None);
    let begin = |id: &str| RoutingCommand::BeginCutover { cutover_id: id.into(), forced_past: Vec::new() };
    let orders = names(&["orders"]);
    assert_eq!(
        codes(&cp.set_migration("m-migr", &orders, &begin("c-1")).await.unwrap()),
        vec![("orders".into(), None)]
    );
    let r = cp.set_migration("m-migr", &orders, &begin("c-2")).await.unwrap();
    let e = r[0].1.as_ref().unwrap_err();
    assert!(e.code == 145 && e.message.contains("cutover c-1"), "{e:?}");
    cp.set_migration("m-migr", &orders, &RoutingCommand::AbortCutover).await.unwrap();
    assert_eq!(cp.migration_routing("orders"), Some(TopicRouting::Migrating), "aborted");
    cp.set_migration("m-migr", &orders, &begin("c-3")).await.unwrap();
    cp.set_migration("m-migr", &orders, &RoutingCommand::BeginFailover).await.unwrap();
    let r = cp.set_migration("m-migr", &orders, &RoutingCommand::AbortCutover).await.unwrap();
    let e = r[0].1.as_ref().unwrap_err();
    assert!(e.code == 145 && e.message.contains("can no longer be aborted"), "{e:?}");

    // What is in __mirror_state now, read by a fresh store: CUTTING_OVER of c-3, past the
    // fail-over step.
    let loaded = StateStore::open(connect().await, settings.clone()).await.unwrap().load().await.unwrap();
    let stored = loaded.topics[&("m-migr".to_string(), "orders".to_string())].migration.clone().unwrap();
    assert_eq!((stored.routing, stored.cutover_id.as_deref()), (TopicRouting::CuttingOver, Some("c-3")));
    assert!(stored.failover_started_ms.is_some());
    assert!(
        !loaded.topics.contains_key(&("m-migr".to_string(), "archive".to_string())),
        "a refused topic's record is not written"
    );

    cp.set_migration("m-migr", &orders, &RoutingCommand::CompleteCutover).await.unwrap();
    let loaded = StateStore::open(connect().await, settings).await.unwrap().load().await.unwrap();
    let stored = loaded.topics[&("m-migr".to_string(), "orders".to_string())].migration.clone().unwrap();
    assert_eq!(stored.routing, TopicRouting::CutOver);
    assert_eq!(cp.migration("orders"), Some(stored));
}
