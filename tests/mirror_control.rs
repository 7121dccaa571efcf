//! The mirror control plane through mirrorgate, against real Kafka 4.1 source and destination
//! clusters: the `mirrorgate mirrors` CLI and the KIP-1279 admin RPCs, state that survives a
//! restart, mirror configs through DescribeConfigs / IncrementalAlterConfigs (type 64), and
//! read-only mirror topics for Java clients, librdkafka and raw Produce requests.

mod support;

use std::process::Output;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use mirrorgate::client::BrokerConnection;
use support::*;

const V: &str = "4.1.1";

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Creates a mirror from `source` and starts `topics` on it; returns the mirror name.
fn mirror_with_topics(mg: &Mirrorgate, source: &Cluster, topics: &[&str]) -> String {
    let mirror = unique_name("m");
    let cfg = mirror_config_file(source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    let out =
        ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topics.join(",")]), "--start");
    for t in topics {
        assert!(out.contains(t), "--start did not start {t}: {out}");
    }
    mirror
}

fn create_topic(bootstrap: &str, topic: &str, partitions: u32) {
    kafka_tool_ok(
        V,
        "topics",
        &[
            "--bootstrap-server",
            bootstrap,
            "--create",
            "--topic",
            topic,
            "--partitions",
            &partitions.to_string(),
            "--replication-factor",
            "1",
        ],
        None,
    );
}

#[test]
fn mirrors_survive_a_restart_and_errors_are_named() {
    let source = cluster("source");
    let dest = cluster("dest");
    let state_topic = unique_name("__mirror_state-restart");
    let opts = || MirrorgateOptions { state_topic: Some(&state_topic), ..Default::default() };
    let topic = unique_name("orders");
    create_topic(&source.bootstrap, &topic, 2);

    let mg = Mirrorgate::start_with(&dest, opts());
    // A fresh state topic on this 1-broker cluster: the default replication factor 3 is lowered,
    // and the operator is told so.
    let log = mg.log();
    assert!(
        log.contains("WARN") && log.contains("replication factor 3") && log.contains("created it with 1"),
        "expected a warning about the lowered state topic replication factor; log:\n{}",
        tail(&log, 30)
    );
    let mirror = unique_name("m");
    let cfg = mirror_config_file(
        &source,
        "fetch.max.bytes=2097152\nsasl.jaas.config=org.example.Login required password=\"s3cret\";\n",
    );
    let out = ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    assert!(out.contains(&format!("Created mirror {mirror}")), "{out}");
    assert!(!out.contains("s3cret"));

    // Errors, each with its KIP name.
    let again =
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("CLUSTER_MIRROR_ALREADY_EXISTS"), "{}", stderr(&again));
    let bad =
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", "bad/name", "--mirror-config", cfg.to_str().unwrap()]);
    assert!(stderr(&bad).contains("INVALID_CLUSTER_MIRROR_NAME"), "{}", stderr(&bad));
    let unknown = mirrors_cli(&mg.bootstrap, &["--delete", "--mirror", "no-such-mirror"]);
    assert!(stderr(&unknown).contains("UNKNOWN_CLUSTER_MIRROR"), "{}", stderr(&unknown));

    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    let busy = mirrors_cli(&mg.bootstrap, &["--delete", "--mirror", &mirror]);
    assert!(stderr(&busy).contains("CLUSTER_MIRROR_NOT_EMPTY"), "{}", stderr(&busy));

    let list = ok(mirrors_cli(&mg.bootstrap, &["--list"]), "--list");
    let row = list.lines().find(|l| l.starts_with(&mirror)).unwrap_or_else(|| panic!("{list}"));
    assert!(row.contains(&source.bootstrap) && row.split_whitespace().nth(1) == Some("1"), "{row}");

    // Restart: same state topic, everything is still there, with its configs.
    drop(mg);
    let mg = Mirrorgate::start_with(&dest, opts());
    // The state topic exists now: the warning was true once and is not repeated.
    assert!(!mg.log().contains("replication factor 3"), "{}", tail(&mg.log(), 30));
    let list = ok(mirrors_cli(&mg.bootstrap, &["--list"]), "--list after restart");
    assert!(list.lines().any(|l| l.starts_with(&mirror)), "{list}");
    let json = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror, "--json"]), "--describe --json");
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{json}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["mirror"], mirror.as_str());
        assert_eq!(r["topic"], topic.as_str());
        assert_eq!(r["partition"], i as i64);
        assert!(matches!(r["state"].as_str(), Some("MIRRORING" | "LOG_ALIGNMENT")), "{r}");
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let configs = rt.block_on(describe_mirror_configs(&mg, &mirror));
    assert_eq!(configs.get("fetch.max.bytes").cloned().flatten().as_deref(), Some("2097152"));
    assert_eq!(configs.get("bootstrap.servers").cloned().flatten().as_deref(), Some(source.bootstrap.as_str()));
    assert_eq!(configs.get("sasl.jaas.config"), Some(&None), "secrets are never returned in clear");

    // IncrementalAlterConfigs on resource type 64, then DescribeConfigs shows it.
    let codes = rt.block_on(alter_mirror_config(&mg, &mirror, "fetch.max.bytes", "4096"));
    assert_eq!(codes, (0, None));
    let codes = rt.block_on(alter_mirror_config(&mg, &mirror, "no.such.config", "1"));
    assert_eq!(codes.0, 40, "INVALID_CONFIG for an unknown key: {codes:?}");
    assert!(codes.1.unwrap().contains("no.such.config"));
    let codes = rt.block_on(alter_mirror_config(&mg, &mirror, "fetch.max.bytes", "lots"));
    assert_eq!(codes.0, 40, "INVALID_CONFIG for a bad value");
    let configs = rt.block_on(describe_mirror_configs(&mg, &mirror));
    assert_eq!(configs.get("fetch.max.bytes").cloned().flatten().as_deref(), Some("4096"));
    assert!(!mg.log().contains("s3cret"), "a secret reached the log");

    // Stop every topic, then the mirror can be deleted.
    ok(mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", ".*"]), "--stop");
    let out = ok(mirrors_cli(&mg.bootstrap, &["--delete", "--mirror", &mirror]), "--delete");
    assert!(out.contains(&mirror), "{out}");
    let list = ok(mirrors_cli(&mg.bootstrap, &["--list"]), "--list after delete");
    assert!(!list.contains(&mirror), "{list}");
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

#[test]
fn produce_to_a_mirror_topic_is_refused_and_other_topics_are_written() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let mirrored = unique_name("mirrored");
    let plain = unique_name("plain");
    create_topic(&source.bootstrap, &mirrored, 1);
    create_topic(&mg.bootstrap, &plain, 1);
    let mirror = mirror_with_topics(&mg, &source, &[&mirrored]);

    // Kafka's console producer: refused with a message naming the topic and the mirror.
    let out = kafka_tool(
        V,
        "console-producer",
        &["--bootstrap-server", &mg.bootstrap, "--topic", &mirrored],
        Some("refused\n"),
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!("topic {mirrored} is a read-only mirror topic of mirror {mirror}")),
        "console producer: {err}"
    );
    // librdkafka: POLICY_VIOLATION on the mirror topic's partition (tests/produce_refusal.rs
    // checks each client's report in detail).
    let out = python_client(&["produce", "--bootstrap", &mg.bootstrap, "--topic", &mirrored, "--count", "1"]);
    assert!(!out.status.success());
    let text = stdout(&out) + &stderr(&out);
    assert!(text.contains(&format!("ERROR {mirrored}[")) && text.contains("POLICY_VIOLATION"), "librdkafka: {text}");

    // One Produce request for both topics: the mirror partition gets POLICY_VIOLATION with the
    // message, the other topic is written.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let resp = rt.block_on(async {
        let mut conn = BrokerConnection::connect(
            &format!("127.0.0.1:{}", mg.first_port + 2),
            Duration::from_secs(5),
            Duration::from_secs(30),
            1 << 24,
        )
        .await
        .unwrap();
        let topic = |name: &str, v: &str| {
            TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(name.into())))
                .with_partition_data(vec![PartitionProduceData::default().with_index(0).with_records(Some(batch(v)))])
        };
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![topic(&mirrored, "no"), topic(&plain, "yes")]);
        conn.send(&req, 11).await.unwrap()
    });
    let by_topic = |n: &str| {
        resp.responses.iter().find(|t| t.name.0.as_str() == n).unwrap_or_else(|| panic!("{n} missing: {resp:?}"))
    };
    let refused = &by_topic(&mirrored).partition_responses[0];
    assert_eq!(refused.error_code, 44, "POLICY_VIOLATION, never the KIP's 134");
    assert!(refused.error_message.as_ref().unwrap().contains("read-only mirror topic"));
    let written = &by_topic(&plain).partition_responses[0];
    assert_eq!((written.error_code, written.base_offset), (0, 0), "{written:?}");
    // Read back through mirrorgate with mirrorgate's own client (Metadata, ListOffsets and
    // Fetch all through the proxy; a Java console consumer here waited out its 60 s timeout
    // on a loaded CI machine without a record).
    let fetched = rt.block_on(async {
        let c = mirrorgate::client::cluster::ClusterClient::connect(mirrorgate::client::cluster::ClusterOptions::new(
            vec![mg.bootstrap.clone()],
        ))
        .await
        .unwrap();
        c.fetch(&plain, 0, 0, 1 << 20).await.unwrap()
    });
    let batches: Vec<_> =
        mirrorgate::wire::batch::BatchIter::new(fetched.records.clone()).map(|b| b.unwrap()).collect();
    assert_eq!(batches.len(), 1, "one batch read back through mirrorgate: {batches:?}");
    assert_eq!((batches[0].base_offset(), batches[0].record_count()), (0, 1));
    assert!(batches[0].payload().windows(3).any(|w| w == b"yes"), "the record written with the refused one");

    // After --stop (failover) the topic is writable.
    ok(mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &mirrored]), "--stop");
    let describe = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror]), "--describe");
    assert!(describe.contains("STOPPED"), "{describe}");
    kafka_tool_ok(
        V,
        "console-producer",
        &["--bootstrap-server", &mg.bootstrap, "--topic", &mirrored],
        Some("after-failover\n"),
    );
    let consumed = kafka_tool_ok(
        V,
        "console-consumer",
        &[
            "--bootstrap-server",
            &mg.bootstrap,
            "--topic",
            &mirrored,
            "--from-beginning",
            "--max-messages",
            "1",
            "--timeout-ms",
            "30000",
        ],
        None,
    );
    assert_eq!(consumed.trim(), "after-failover");
}

#[test]
fn admin_writes_on_a_mirror_topic_are_refused_and_work_elsewhere() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let mirrored = unique_name("mirrored-admin");
    let plain = unique_name("plain-admin");
    create_topic(&source.bootstrap, &mirrored, 1);
    create_topic(&mg.bootstrap, &plain, 1);
    mirror_with_topics(&mg, &source, &[&mirrored]);
    let bs = mg.bootstrap.as_str();
    let ops: [&[&str]; 4] = [
        &["create-partitions", "TOPIC", "3"],
        &["delete-records", "TOPIC", "0", "0"],
        &["incremental-alter-config", "TOPIC", "retention.ms=1000"],
        &["delete-topic", "TOPIC"],
    ];
    for op in ops {
        let on = |t: &str| -> Vec<String> {
            let mut v: Vec<String> =
                op.iter().map(|a| if *a == "TOPIC" { t.to_string() } else { a.to_string() }).collect();
            v.extend(["--bootstrap-server".to_string(), bs.to_string()]);
            v
        };
        let args = on(&mirrored);
        let out = java_program(V, "AdminOps.java", &args.iter().map(String::as_str).collect::<Vec<_>>());
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{op:?} on a mirror topic must fail: {text} {}", stderr(&out));
        assert!(text.starts_with("ERROR "), "{text}");
        if op[0] != "delete-records" {
            // DeleteRecords responses have no message field; the others carry ours.
            assert!(text.contains("read-only mirror topic"), "{op:?}: {text}");
        }
        let args = on(&plain);
        let out = java_program(V, "AdminOps.java", &args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(stdout(&out).trim(), "OK", "{op:?} on an ordinary topic: {} {}", stdout(&out), stderr(&out));
    }
    // The mirror topic is still there, with one partition.
    let describe = kafka_tool_ok(V, "topics", &["--bootstrap-server", bs, "--describe", "--topic", &mirrored], None);
    assert!(describe.contains("PartitionCount: 1"), "{describe}");
}

#[test]
fn mirror_admin_rpcs_need_an_admin_listener() {
    let dest = cluster("dest");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { admin: false, ..Default::default() });
    let out = mirrors_cli(&mg.bootstrap, &["--list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("CLUSTER_MIRROR_AUTHORIZATION_FAILED"), "{}", stderr(&out));
}

/// The cutover's safety checks (issue 36 item 3, `mirror::migration::safety`) against a real
/// source: a Java producer writing to the source directly (idempotent by default) is named by
/// its producer id until its id is one mirrorgate forwarded, and a console consumer group on
/// the source is named with its member while it runs, and no longer once it left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_safety_checks_name_direct_producers_and_groups_on_the_source() {
    use mirrorgate::mirror::migration::safety::{active_groups, foreign_producers};
    use std::collections::{BTreeSet, HashSet};

    let source = cluster("source");
    let topic = unique_name("migrating");
    create_topic(&source.bootstrap, &topic, 2);
    kafka_tool_ok(
        V,
        "console-producer",
        &["--bootstrap-server", &source.bootstrap, "--topic", &topic, "--property", "parse.key=false"],
        Some("a\nb\nc\n"),
    );
    let client = plaintext_client(&source.bootstrap);
    let partitions = vec![(topic.clone(), 0), (topic.clone(), 1)];
    let found = block(foreign_producers(&client, &partitions, &HashSet::new(), 0)).expect("DescribeProducers");
    assert!(!found.is_empty(), "the direct producer is not named");
    for p in &found {
        assert!(p.topic == topic && p.producer_id >= 0 && p.last_timestamp_ms > 0, "{p:?}");
        assert!(p.to_string().contains(&format!("producer id {}", p.producer_id)), "{p}");
    }
    let forwarded: HashSet<i64> = found.iter().map(|p| p.producer_id).collect();
    assert_eq!(
        block(foreign_producers(&client, &partitions, &forwarded, 0)).unwrap(),
        vec![],
        "forwarded ids are ours"
    );
    let later = found.iter().map(|p| p.last_timestamp_ms).max().unwrap() + 1;
    assert_eq!(block(foreign_producers(&client, &partitions, &HashSet::new(), later)).unwrap(), vec![], "older writes");

    let group = unique_name("direct-group");
    let (bootstrap, t, g) = (source.bootstrap.clone(), topic.clone(), group.clone());
    let consumer = std::thread::spawn(move || {
        kafka_tool(
            V,
            "console-consumer",
            &[
                "--bootstrap-server",
                &bootstrap,
                "--topic",
                &t,
                "--group",
                &g,
                "--from-beginning",
                "--timeout-ms",
                "15000",
            ],
            None,
        )
    });
    let topics = BTreeSet::from([topic.clone()]);
    let none_forwarded = |_: &str| false;
    let active = eventually(Duration::from_secs(40), || {
        let groups = block(active_groups(&client, &topics, &none_forwarded)).map_err(|e| e.to_string())?;
        groups.into_iter().find(|x| x.group == group).ok_or_else(|| "group not listed yet".to_string())
    });
    assert_eq!(active.topics, topics);
    assert_eq!(active.members.len(), 1, "{active:?}");
    assert!(active.members[0].client_id.contains("console-consumer"), "{active:?}");
    assert!(active.to_string().contains(&active.members[0].member_id), "{active}");
    let all_forwarded = |_: &str| true;
    let groups = block(active_groups(&client, &topics, &all_forwarded)).unwrap();
    assert!(groups.iter().all(|x| x.group != group), "members joined through mirrorgate are not named: {groups:?}");
    let out = consumer.join().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).lines().count() >= 3, "{}", String::from_utf8_lossy(&out.stderr));
    let groups = block(active_groups(&client, &topics, &none_forwarded)).unwrap();
    assert!(groups.iter().all(|x| x.group != group), "a group whose members left is not active: {groups:?}");
}
