//! Clients cannot read, write or change mirrorgate's state topic through mirrorgate
//! (issue 11 item 5): mirrorgate answers as a broker whose ACLs deny the client every
//! operation on the topic, with TOPIC_AUTHORIZATION_FAILED (29). Real clients (Kafka's
//! console consumer and producer, kafka-delete-records, kafka-topics, librdkafka) and raw
//! requests of every API that names a topic are sent through mirrorgate; the state topic is
//! then read directly on the destination (Kafka 4.1) to show that nothing moved.

mod support;

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::client::BrokerConnection;
use support::*;

const V: &str = "4.1.1";
const DENIED: i16 = 29;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn batch(value: &str) -> Bytes {
    let rec = Record {
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
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: IndexMap::new(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, [&rec], &RecordEncodeOptions { version: 2, compression: Compression::None })
        .unwrap();
    buf.freeze()
}

/// Log end offset of each partition of `topic`, read on the destination itself.
fn log_ends(direct: &ClusterClient, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    (0..partitions).map(|p| (p, block(direct.leader_log_end(topic, p)).unwrap())).collect()
}

/// The topic as the destination itself describes it: (partition count, topic id).
fn describe_direct(direct: &ClusterClient, topic: &str) -> (usize, [u8; 16]) {
    direct.forget_topic(topic);
    let t = block(direct.topic(topic)).unwrap_or_else(|e| panic!("{topic} gone from the destination: {e}"));
    (t.partitions.len(), t.topic_id.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_cannot_read_write_or_change_the_state_topic() {
    let dest = cluster("dest");
    let state = unique_name("__mirror_state-guard");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { state_topic: Some(&state), ..Default::default() });
    // Something in the state topic to steal: a mirror record.
    let cfg = mirror_config_file(&dest, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", "guarded", "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    let direct = block(ClusterClient::connect(ClusterOptions::new(vec![dest.bootstrap.clone()]))).unwrap();
    let (partitions, state_id) = describe_direct(&direct, &state);
    assert_eq!(partitions, 3);
    let before = log_ends(&direct, &state, 3);
    assert!(before.values().sum::<i64>() >= 1, "the state topic holds the mirror record: {before:?}");
    let other = unique_name("other");
    ok(
        kafka_tool(
            V,
            "topics",
            &["--bootstrap-server", &dest.bootstrap, "--create", "--topic", &other, "--partitions", "1"],
            None,
        ),
        "create other",
    );
    ok(
        python_client(&["produce", "--bootstrap", &mg.bootstrap, "--topic", &other, "--count", "5"]),
        "produce to another topic",
    );

    // Kafka's console consumer: a topic authorization error, no record.
    let out = kafka_tool(
        V,
        "console-consumer",
        &["--bootstrap-server", &mg.bootstrap, "--topic", &state, "--from-beginning", "--timeout-ms", "15000"],
        None,
    );
    let t = text(&out);
    assert!(t.contains("TopicAuthorizationException") && t.contains(&state), "console consumer: {t}");
    assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty(), "console consumer printed records: {t}");

    // librdkafka consumer: the same.
    let out = python_client(&[
        "consume",
        "--bootstrap",
        &mg.bootstrap,
        "--topic",
        &state,
        "--group",
        &unique_name("thief"),
        "--count",
        "1",
        "--timeout",
        "20",
        "--no-commit",
    ]);
    let t = text(&out);
    assert!(!out.status.success(), "librdkafka consumer: {t}");
    assert!(t.to_lowercase().contains("topic authorization failed"), "librdkafka consumer: {t}");
    assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty(), "librdkafka consumer read records: {t}");

    // Producers: Java and librdkafka.
    let out =
        kafka_tool(V, "console-producer", &["--bootstrap-server", &mg.bootstrap, "--topic", &state], Some("forged\n"));
    let t = text(&out);
    assert!(t.contains("TopicAuthorizationException"), "console producer: {t}");
    let out =
        python_client(&["produce", "--bootstrap", &mg.bootstrap, "--topic", &state, "--count", "1", "--timeout", "15"]);
    let t = text(&out);
    assert!(!out.status.success() && t.to_lowercase().contains("authorization failed"), "librdkafka producer: {t}");

    // Admin tools.
    let offsets = repo().join(format!("target/test-mirrorgate/{}.json", unique_name("delete-records")));
    std::fs::write(
        &offsets,
        format!(r#"{{"partitions":[{{"topic":"{state}","partition":0,"offset":-1}}],"version":1}}"#),
    )
    .unwrap();
    let out = kafka_tool(
        V,
        "delete-records",
        &["--bootstrap-server", &mg.bootstrap, "--offset-json-file", offsets.to_str().unwrap()],
        None,
    );
    let t = text(&out);
    assert!(t.contains("TopicAuthorizationException") || t.contains("Not authorized"), "delete-records: {t}");
    for args in [vec!["--delete", "--topic", &state], vec!["--alter", "--topic", &state, "--partitions", "6"]] {
        let mut a = vec!["--bootstrap-server", mg.bootstrap.as_str()];
        a.extend(args.iter().copied());
        let out = kafka_tool(V, "topics", &a, None);
        assert!(!out.status.success(), "kafka-topics {args:?} succeeded: {}", text(&out));
    }
    let listed = ok(kafka_tool(V, "topics", &["--bootstrap-server", &mg.bootstrap, "--list"], None), "--list");
    assert!(listed.lines().any(|l| l == other) && !listed.lines().any(|l| l == state), "--list: {listed}");
    let described = kafka_tool(V, "topics", &["--bootstrap-server", &mg.bootstrap, "--describe"], None);
    assert!(!text(&described).contains(&state), "--describe lists the state topic: {}", text(&described));

    // Raw requests of every API that names a topic, straight to mirrorgate's broker port.
    let mut conn = BrokerConnection::connect(
        &format!("127.0.0.1:{}", mg.first_port + 2),
        Duration::from_secs(5),
        Duration::from_secs(30),
        1 << 24,
    )
    .await
    .unwrap();
    let all = (0..3).collect::<Vec<i32>>();

    let md = conn
        .send(
            &MetadataRequest::default()
                .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name(&state)))])),
            12,
        )
        .await
        .unwrap();
    assert_eq!(md.topics.len(), 1);
    assert_eq!(md.topics[0].error_code, DENIED, "Metadata naming the state topic");
    assert!(md.topics[0].partitions.is_empty() && md.topics[0].topic_id.is_nil());
    let md = conn.send(&MetadataRequest::default().with_topics(None), 12).await.unwrap();
    let names: Vec<String> = md.topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.to_string())).collect();
    assert!(names.contains(&other) && !names.contains(&state), "all-topics Metadata: {names:?}");

    let produce = ProduceRequest::default().with_acks(-1).with_timeout_ms(5000).with_topic_data(vec![
        TopicProduceData::default().with_name(name(&state)).with_partition_data(vec![PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(batch("forged")))]),
        TopicProduceData::default()
            .with_name(name(&other))
            .with_partition_data(vec![PartitionProduceData::default().with_index(0).with_records(Some(batch("fine")))]),
    ]);
    let resp = conn.send(&produce, 9).await.unwrap();
    let code =
        |t: &str| resp.responses.iter().find(|r| r.name.0.as_str() == t).map(|r| r.partition_responses[0].error_code);
    assert_eq!((code(&state), code(&other)), (Some(DENIED), Some(0)), "mixed Produce: {resp:?}");

    let fetch_topic = |t: FetchTopic, ps: &[i32]| {
        t.with_partitions(
            ps.iter()
                .map(|p| {
                    FetchPartition::default().with_partition(*p).with_fetch_offset(0).with_partition_max_bytes(1 << 20)
                })
                .collect(),
        )
    };
    let fetch = |topics| {
        FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(100)
            .with_max_bytes(1 << 24)
            .with_topics(topics)
    };
    // By name (v12), mixed with another topic that has records.
    let resp = conn
        .send(
            &fetch(vec![
                fetch_topic(FetchTopic::default().with_topic(name(&state)), &all),
                fetch_topic(FetchTopic::default().with_topic(name(&other)), &[0]),
            ]),
            12,
        )
        .await
        .unwrap();
    for t in &resp.responses {
        for p in &t.partitions {
            if t.topic.0.as_str() == state {
                assert_eq!(p.error_code, DENIED, "Fetch v12 {state}-{}", p.partition_index);
                assert!(p.records.as_ref().is_none_or(|r| r.is_empty()), "Fetch v12 returned state records");
            } else {
                assert_eq!(p.error_code, 0);
                assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()), "the other topic's records are served");
            }
        }
    }
    assert_eq!(
        resp.responses.iter().filter(|t| t.topic.0.as_str() == state).map(|t| t.partitions.len()).sum::<usize>(),
        3
    );
    // By topic id (v16), the id the client could only know from elsewhere.
    let id = uuid::Uuid::from_bytes(state_id);
    let resp = conn.send(&fetch(vec![fetch_topic(FetchTopic::default().with_topic_id(id), &all)]), 16).await.unwrap();
    let parts: Vec<(i32, i16, bool)> = resp
        .responses
        .iter()
        .filter(|t| t.topic_id == id)
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.error_code, p.records.as_ref().is_some_and(|r| !r.is_empty())))
        })
        .collect();
    assert_eq!(parts, vec![(0, DENIED, false), (1, DENIED, false), (2, DENIED, false)], "Fetch v16 by id");

    let resp = conn
        .send(
            &ListOffsetsRequest::default().with_replica_id((-1).into()).with_topics(vec![ListOffsetsTopic::default()
                .with_name(name(&state))
                .with_partitions(vec![ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1)])]),
            7,
        )
        .await
        .unwrap();
    assert_eq!(resp.topics[0].partitions[0].error_code, DENIED, "ListOffsets");
    let resp = conn
        .send(
            &OffsetForLeaderEpochRequest::default().with_replica_id((-1).into()).with_topics(vec![
                OffsetForLeaderTopic::default().with_topic(name(&state)).with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_leader_epoch(0)
                        .with_current_leader_epoch(-1),
                ]),
            ]),
            4,
        )
        .await
        .unwrap();
    assert_eq!(resp.topics[0].partitions[0].error_code, DENIED, "OffsetForLeaderEpoch");
    let resp = conn
        .send(
            &DeleteRecordsRequest::default().with_timeout_ms(5000).with_topics(vec![DeleteRecordsTopic::default()
                .with_name(name(&state))
                .with_partitions(vec![DeleteRecordsPartition::default().with_partition_index(0).with_offset(-1)])]),
            2,
        )
        .await
        .unwrap();
    assert_eq!(resp.topics[0].partitions[0].error_code, DENIED, "DeleteRecords");
    let resp = conn
        .send(
            &CreatePartitionsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(vec![CreatePartitionsTopic::default().with_name(name(&state)).with_count(6)]),
            3,
        )
        .await
        .unwrap();
    assert_eq!(resp.results[0].error_code, DENIED, "CreatePartitions");
    // A mixed DeleteTopics is refused as a whole: neither topic is deleted.
    let resp = conn
        .send(
            &DeleteTopicsRequest::default().with_timeout_ms(5000).with_topics(vec![
                DeleteTopicState::default().with_name(Some(name(&state))),
                DeleteTopicState::default().with_name(Some(name(&other))),
            ]),
            6,
        )
        .await
        .unwrap();
    let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![DENIED, 42], "DeleteTopics");
    let resp = conn
        .send(
            &IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(state.clone()))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("cleanup.policy"))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_static_str("delete")))])]),
            1,
        )
        .await
        .unwrap();
    assert_eq!(resp.responses[0].error_code, DENIED, "IncrementalAlterConfigs");
    let resp = conn
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_string(state.clone())),
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_string(other.clone())),
            ]),
            4,
        )
        .await
        .unwrap();
    let codes: BTreeMap<String, i16> =
        resp.results.iter().map(|r| (r.resource_name.to_string(), r.error_code)).collect();
    assert_eq!(codes, BTreeMap::from([(state.clone(), DENIED), (other.clone(), 0)]), "DescribeConfigs");
    let resp = conn
        .send(
            &CreateTopicsRequest::default().with_timeout_ms(5000).with_topics(vec![CreatableTopic::default()
                .with_name(name(&state))
                .with_num_partitions(1)
                .with_replication_factor(1)]),
            7,
        )
        .await
        .unwrap();
    assert_eq!(resp.topics[0].error_code, DENIED, "CreateTopics");

    // Group offsets for the state topic, plain and transactional, and adding it to a transaction.
    let resp = conn
        .send(
            &OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(unique_name("thieves"))))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default().with_name(name(&state)).with_partitions(vec![
                    OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(0),
                ])]),
            8,
        )
        .await
        .unwrap();
    assert_eq!(resp.topics[0].partitions[0].error_code, DENIED, "OffsetCommit: {resp:?}");
    let resp = conn
        .send(
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("thief-txn")))
                .with_group_id(GroupId(StrBytes::from_string(unique_name("thieves"))))
                .with_producer_id(ProducerId(1))
                .with_generation_id(-1)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(name(&state))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default().with_partition_index(0)])]),
            3,
        )
        .await
        .unwrap();
    let codes: Vec<i16> =
        resp.topics.iter().filter(|t| t.name.0.as_str() == state).map(|t| t.partitions[0].error_code).collect();
    assert_eq!(codes, vec![DENIED], "TxnOffsetCommit: {resp:?}");
    let resp = conn
        .send(
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str("thief-txn")))
                .with_v3_and_below_producer_id(ProducerId(1))
                .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(name(&state))
                    .with_partitions(vec![0])]),
            3,
        )
        .await
        .unwrap();
    assert_eq!(
        resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code, DENIED,
        "AddPartitionsToTxn"
    );

    // On the destination itself: nothing moved, the topic is whole.
    assert_eq!(log_ends(&direct, &state, 3), before, "state topic log ends after all attempts");
    assert_eq!(describe_direct(&direct, &state), (3, state_id), "state topic partitions and id");
    let configs = block(direct.describe_topic_configs(&state)).unwrap();
    assert_eq!(configs.get("cleanup.policy").map(String::as_str), Some("compact"));
    // mirrorgate's own use of the state topic is unaffected.
    let listed = ok(mirrors_cli(&mg.bootstrap, &["--list"]), "--list mirrors");
    assert!(listed.contains("guarded"), "{listed}");
}

/// What a client can tell about one topic from the answers the guard imitates: Metadata and
/// DescribeTopicPartitions for all topics (listed?) and naming it (error, partitions, topic
/// id), Fetch v12 and ListOffsets (error, offsets, records).
#[derive(Debug, PartialEq)]
struct Seen {
    listed_in_metadata: bool,
    listed_in_describe: bool,
    metadata_named: (i16, usize, bool),
    describe_named: (i16, usize, bool),
    fetch: Vec<(i16, i64, i64, i64, bool)>,
    list_offsets: i16,
}

async fn seen(client: &ClusterClient, topic: &str) -> Seen {
    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
    let md = client.send_any(&MetadataRequest::default().with_topics(None), 12).await.unwrap();
    let listed_in_metadata = md.topics.iter().any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic));
    let md = client
        .send_any(
            &MetadataRequest::default()
                .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name(topic)))])),
            12,
        )
        .await
        .unwrap();
    let t = &md.topics[0];
    let metadata_named = (t.error_code, t.partitions.len(), t.topic_id.is_nil());
    let all = client
        .send_any(&DescribeTopicPartitionsRequest::default().with_response_partition_limit(2000), 0)
        .await
        .unwrap();
    let listed_in_describe = all.topics.iter().any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic));
    let one = client
        .send_any(
            &DescribeTopicPartitionsRequest::default()
                .with_response_partition_limit(2000)
                .with_topics(vec![TopicRequest::default().with_name(name(topic))]),
            0,
        )
        .await
        .unwrap();
    let t = &one.topics[0];
    let describe_named = (t.error_code, t.partitions.len(), t.topic_id.is_nil());
    let fetch = client
        .send_any(
            &FetchRequest::default()
                .with_replica_id((-1).into())
                .with_max_wait_ms(10)
                .with_max_bytes(1 << 20)
                .with_topics(vec![FetchTopic::default().with_topic(name(topic)).with_partitions(vec![
                    FetchPartition::default().with_partition(0).with_partition_max_bytes(1 << 20),
                ])]),
            12,
        )
        .await
        .unwrap();
    let fetch = fetch
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    p.error_code,
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                    p.records.as_ref().is_some_and(|r| !r.is_empty()),
                )
            })
        })
        .collect();
    let lo = client
        .send_any(
            &ListOffsetsRequest::default().with_replica_id((-1).into()).with_topics(vec![ListOffsetsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1)])]),
            7,
        )
        .await
        .unwrap();
    Seen {
        listed_in_metadata,
        listed_in_describe,
        metadata_named,
        describe_named,
        fetch,
        list_offsets: lo.topics[0].partitions[0].error_code,
    }
}

/// Pins the broker behaviour the guard imitates: a Kafka 4.1 broker with StandardAuthorizer
/// and a DENY ALL ACL for the principal on one topic (ALLOW ALL on the others) answers exactly
/// as mirrorgate answers for its state topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_answers_as_a_broker_denying_the_topic() {
    use mirrorgate::client::ClientSecurity;
    let dest = secure_cluster_with(
        "deny",
        "SASL_PLAINTEXT",
        "none",
        &["SCRAM-SHA-512:eve:eve-secret-deny"],
        &[
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:ANONYMOUS",
        ],
    );
    let denied = unique_name("denied");
    let create = |t: &str| {
        kafka_tool_ok(
            V,
            "topics",
            &["--bootstrap-server", &dest.bootstrap, "--create", "--topic", t, "--partitions", "1"],
            None,
        )
    };
    create(&denied);
    kafka_tool_ok(V, "console-producer", &["--bootstrap-server", &dest.bootstrap, "--topic", &denied], Some("x\n"));
    let acl = |args: &[&str]| {
        let mut all = vec!["--bootstrap-server", dest.bootstrap.as_str(), "--add"];
        all.extend(args);
        kafka_tool_ok(V, "acls", &all, None);
    };
    acl(&["--allow-principal", "User:eve", "--operation", "All", "--topic", "*"]);
    acl(&["--deny-principal", "User:eve", "--operation", "All", "--topic", &denied]);
    let mut o = ClusterOptions::new(vec![dest.secure.clone().unwrap()]);
    let p: BTreeMap<String, String> = [
        ("security.protocol", "SASL_PLAINTEXT".to_string()),
        ("sasl.mechanism", "SCRAM-SHA-512".into()),
        (
            "sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"eve\" password=\"eve-secret-deny\";"
                .into(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    o.security = ClientSecurity::from_properties(&p).unwrap();
    let eve = ClusterClient::connect(o).await.unwrap();
    let broker = eventually(Duration::from_secs(20), || {
        let s = block(seen(&eve, &denied));
        (!s.listed_in_metadata).then_some(s).ok_or("the DENY ACL is not in force yet".to_string())
    });

    let state = unique_name("__mirror_state-pin");
    let mg = Mirrorgate::start_in_front_of(
        &dest.bootstrap,
        FrontOptions::default(),
        MirrorgateOptions { state_topic: Some(&state), ..Default::default() },
    );
    let through = ClusterClient::connect(ClusterOptions::new(vec![mg.bootstrap.clone()])).await.unwrap();
    let guard = seen(&through, &state).await;
    assert_eq!(guard, broker, "mirrorgate's answers for its state topic differ from a broker's denying a topic");
    assert_eq!(broker.metadata_named.0, DENIED);
}

/// Requests naming the state topic by id only, on a fresh mirrorgate that has answered no
/// Metadata yet (the id was learned at startup, nowhere else): Fetch v16 gets 29 for every
/// partition; ShareFetch (KIP-932, topic ids only) and WriteTxnMarkers are never forwarded:
/// the connection is closed with a log line naming the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_named_by_id_only_are_refused_from_the_first_request() {
    use kafka_protocol::messages::share_fetch_request::{
        FetchPartition as ShareFetchPartition, FetchTopic as ShareTopic,
    };
    use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
    let dest = cluster("dest");
    let state = unique_name("__mirror_state-ids");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { state_topic: Some(&state), ..Default::default() });
    let direct = block(ClusterClient::connect(ClusterOptions::new(vec![dest.bootstrap.clone()]))).unwrap();
    let (_, state_id) = describe_direct(&direct, &state);
    let before = log_ends(&direct, &state, 3);
    let id = uuid::Uuid::from_bytes(state_id);
    let connect = || async {
        BrokerConnection::connect(
            &format!("127.0.0.1:{}", mg.first_port + 2),
            Duration::from_secs(5),
            Duration::from_secs(30),
            1 << 24,
        )
        .await
        .unwrap()
    };

    // Fetch v16 by id, the connection's first request after ApiVersions.
    let mut conn = connect().await;
    let fetch = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(100)
        .with_max_bytes(1 << 24)
        .with_topics(vec![FetchTopic::default().with_topic_id(id).with_partitions(
            (0..3)
                .map(|p| {
                    FetchPartition::default().with_partition(p).with_fetch_offset(0).with_partition_max_bytes(1 << 20)
                })
                .collect(),
        )]);
    let resp = conn.send(&fetch, 16).await.unwrap();
    let parts: Vec<(i32, i16, bool)> = resp
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                assert_eq!(t.topic_id, id);
                (p.partition_index, p.error_code, p.records.as_ref().is_some_and(|r| !r.is_empty()))
            })
        })
        .collect();
    assert_eq!(parts, vec![(0, DENIED, false), (1, DENIED, false), (2, DENIED, false)], "Fetch v16 by id");

    // KIP-227: a fetch session opened with the state topic and another topic keeps answering
    // 29 for the state topic in incremental fetches that no longer list it, as a broker does
    // for a denied partition, until the client forgets it.
    let other = unique_name("session-other");
    kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", &dest.bootstrap, "--create", "--topic", &other, "--partitions", "1"],
        None,
    );
    let other_id = uuid::Uuid::from_bytes(describe_direct(&direct, &other).1);
    let partition =
        |p: i32| FetchPartition::default().with_partition(p).with_fetch_offset(0).with_partition_max_bytes(1 << 20);
    let session_fetch = |sid: i32, epoch: i32, topics: Vec<FetchTopic>, forgotten: Vec<ForgottenTopic>| {
        FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(10)
            .with_max_bytes(1 << 24)
            .with_session_id(sid)
            .with_session_epoch(epoch)
            .with_topics(topics)
            .with_forgotten_topics_data(forgotten)
    };
    let codes = |resp: &FetchResponse| -> Vec<(bool, i32, i16)> {
        let mut v: Vec<_> = resp
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id == id, p.partition_index, p.error_code)))
            .collect();
        v.sort();
        v
    };
    let full = session_fetch(
        0,
        0,
        vec![
            FetchTopic::default().with_topic_id(id).with_partitions((0..3).map(partition).collect()),
            FetchTopic::default().with_topic_id(other_id).with_partitions(vec![partition(0)]),
        ],
        vec![],
    );
    let resp = conn.send(&full, 16).await.unwrap();
    assert_eq!(resp.error_code, 0);
    let sid = resp.session_id;
    assert_ne!(sid, 0, "the broker opened a fetch session");
    assert_eq!(codes(&resp), vec![(false, 0, 0), (true, 0, DENIED), (true, 1, DENIED), (true, 2, DENIED)]);
    let resp = conn.send(&session_fetch(sid, 1, vec![], vec![]), 16).await.unwrap();
    assert_eq!((resp.error_code, resp.session_id), (0, sid));
    assert_eq!(codes(&resp), vec![(true, 0, DENIED), (true, 1, DENIED), (true, 2, DENIED)], "incremental fetch");
    let forget = ForgottenTopic::default().with_topic_id(id).with_partitions(vec![0, 1]);
    let resp = conn.send(&session_fetch(sid, 2, vec![], vec![forget]), 16).await.unwrap();
    assert_eq!(resp.error_code, 0);
    assert_eq!(codes(&resp), vec![(true, 2, DENIED)], "after forgetting partitions 0 and 1");

    // DescribeTopicPartitions for all topics, one partition per page: no page names the
    // state topic, not even in its cursor, and the topic right after it is listed.
    let after = format!("{state}-after");
    kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", &dest.bootstrap, "--create", "--topic", &after, "--partitions", "2"],
        None,
    );
    let mut listed: Vec<String> = Vec::new();
    let mut cursor: Option<describe_topic_partitions_request::Cursor> = None;
    for page in 0.. {
        assert!(page < 10_000, "DescribeTopicPartitions paging does not end");
        let req = DescribeTopicPartitionsRequest::default().with_response_partition_limit(1).with_cursor(cursor.take());
        let resp = conn.send(&req, 0).await.unwrap();
        for t in &resp.topics {
            let n = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
            assert_ne!(n, state, "page {page} lists the state topic");
            if listed.last() != Some(&n) {
                listed.push(n);
            }
        }
        match resp.next_cursor {
            Some(c) => {
                assert_ne!(c.topic_name.0.as_str(), state, "page {page}'s cursor names the state topic");
                cursor = Some(
                    describe_topic_partitions_request::Cursor::default()
                        .with_topic_name(c.topic_name)
                        .with_partition_index(c.partition_index),
                );
            }
            None => break,
        }
    }
    assert!(listed.contains(&after) && listed.contains(&other), "listing through mirrorgate: {listed:?}");

    // ShareFetch naming the state topic's id.
    let share = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(StrBytes::from_static_str("thieves"))))
        .with_member_id(Some(StrBytes::from_static_str("AAAAAAAAAAAAAAAAAAAAAA")))
        .with_max_wait_ms(100)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_batch_size(500)
        .with_topics(vec![ShareTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![ShareFetchPartition::default().with_partition_index(0)])]);
    let mut conn = connect().await;
    let got = conn.send(&share, 1).await;
    assert!(got.is_err(), "ShareFetch naming the state topic's id was answered: {got:?}");
    mg.wait_for_log("api=ShareFetch", Duration::from_secs(10));

    // WriteTxnMarkers (a broker-to-broker API) naming the state topic.
    let markers = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(1))
        .with_producer_epoch(0)
        .with_transaction_result(true)
        .with_topics(vec![WritableTxnMarkerTopic::default().with_name(name(&state)).with_partition_indexes(vec![0])])]);
    let mut conn = connect().await;
    let got = conn.send(&markers, 1).await;
    assert!(got.is_err(), "WriteTxnMarkers naming the state topic was answered: {got:?}");
    mg.wait_for_log("api=WriteTxnMarkers", Duration::from_secs(10));
    assert!(mg.log().contains("request naming the state topic refused"), "{}", tail(&mg.log(), 20));

    // Nothing was written to the state topic.
    assert_eq!(log_ends(&direct, &state, 3), before, "state topic log ends");
}
