//! The data plane on replicated clusters (issue 9 acceptance): a 3-node source and a 3-node
//! destination (replication factor 3, `min.insync.replicas=2`), shared by the tests of this
//! binary. Pins what a replicated destination does with an append the ISR has not
//! acknowledged yet, and mirrors plain, compressed, transactional and compacted (holes inside
//! batches) topics identically while destination partition leaders move and a destination
//! broker restarts mid-copy.

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use mirrorgate::client::cluster::{Acks, ClusterClient, ClusterOptions};
use mirrorgate::mirror::verify::{verify_partition, VerifyReport};
use mirrorgate::wire::batch::BatchIter;
use support::*;

const V: &str = "4.1.1";

/// (The log cleaner looks for work every 500 ms, default 15 s: the compacted source is
/// cleaned within seconds.)
fn source() -> Arc<Cluster> {
    cluster_with("rsrc", 3, V, &["min.insync.replicas=2", "log.cleaner.backoff.ms=500"])
}

fn destination() -> Arc<Cluster> {
    cluster_with("rdst", 3, V, &["min.insync.replicas=2"])
}

fn create_topic(bootstrap: &str, topic: &str, partitions: u32, configs: &[&str]) {
    let p = partitions.to_string();
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        topic,
        "--replication-factor",
        "3",
        "--partitions",
        &p,
    ];
    for c in configs {
        args.extend(["--config", c]);
    }
    kafka_tool_ok(V, "topics", &args, None);
}

fn client(bootstrap: &str) -> ClusterClient {
    block(ClusterClient::connect(ClusterOptions::new(bootstrap.split(',').map(String::from).collect()))).unwrap()
}

/// Pid of node `n` (1-based, its `node.id`) of a cluster started by `scripts/kafka.sh`.
fn node_pid(c: &Cluster, n: i32) -> i32 {
    let state = std::env::var("MIRRORGATE_KAFKA_DIR").map(std::path::PathBuf::from).unwrap_or(repo().join(".kafka"));
    let path = state.join(&c.name).join(format!("node-{n}/pid"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).trim().parse().unwrap()
}

fn signal(pid: i32, sig: &str) {
    let st = Command::new("kill").args([sig, &pid.to_string()]).status().unwrap();
    assert!(st.success(), "kill {sig} {pid}");
}

/// Sends SIGCONT when dropped, so a failed assertion does not leave a broker stopped.
struct Resume(i32);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.0.to_string()]).status();
    }
}

/// One uncompressed batch of `count` records (values "r0".."rN"), base offset 0.
fn plain_batch(count: i32) -> Bytes {
    let mut recs = BytesMut::new();
    for i in 0..count {
        let value = format!("r{i}");
        let mut body = BytesMut::new();
        body.put_i8(0); // attributes
        put_varint(&mut body, 0); // timestamp delta
        put_varint(&mut body, i64::from(i)); // offset delta
        put_varint(&mut body, -1); // null key
        put_varint(&mut body, value.len() as i64);
        body.put_slice(value.as_bytes());
        put_varint(&mut body, 0); // no headers
        put_varint(&mut recs, body.len() as i64);
        recs.put_slice(&body);
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let mut after_crc = BytesMut::new();
    after_crc.put_i16(0); // attributes
    after_crc.put_i32(count - 1); // last offset delta
    after_crc.put_i64(now);
    after_crc.put_i64(now);
    after_crc.put_i64(-1); // producer id
    after_crc.put_i16(-1);
    after_crc.put_i32(-1);
    after_crc.put_i32(count);
    after_crc.put_slice(&recs);
    let mut b = BytesMut::new();
    b.put_i64(0);
    b.put_i32((4 + 1 + 4 + after_crc.len()) as i32);
    b.put_i32(-1); // partition leader epoch
    b.put_i8(2);
    b.put_u32(crc32c::crc32c(&after_crc));
    b.put_slice(&after_crc);
    b.freeze()
}

fn put_varint(out: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    out.put_u8(z as u8);
}

/// ListOffsets LATEST for partition 0 of `topic`, sent to `node` as replica `replica_id`.
fn list_offsets_as(c: &ClusterClient, node: i32, topic: &str, replica_id: i32) -> i64 {
    let req = ListOffsetsRequest::default().with_replica_id(BrokerId(replica_id)).with_topics(vec![
        ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1)]),
    ]);
    let resp = block(c.send_to_node(node, &req, 7)).unwrap();
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "ListOffsets as replica {replica_id}");
    p.offset
}

/// Pin (DESIGN §4.6, issue 9 item 2): with RF=3 an append can sit in the leader's log above
/// the high watermark. A consumer's ListOffsets (replica id -1) answers the high watermark
/// and does not see it; ListOffsets as the debugging replica (-2) answers the leader's log
/// end offset (broker: `KafkaApis.handleListOffsetRequest` applies an isolation level only to
/// replica id -1). Once the follower is back, the high watermark reaches the log end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_holds_appends_above_the_high_watermark_that_only_replica_id_minus_2_shows() {
    let dest = destination();
    let dst = client(&dest.bootstrap);
    let topic = unique_name("pin-leo");
    create_topic(&dest.bootstrap, &topic, 1, &[]);
    let leader = eventually(Duration::from_secs(60), || block(dst.leader_for(&topic, 0)).map_err(|e| e.to_string()));
    let base = eventually(Duration::from_secs(60), || {
        block(dst.produce(&topic, 0, plain_batch(3), Acks::All)).map_err(|e| e.to_string())
    });
    assert_eq!(base, 0);
    let follower = (1..=3).find(|n| *n != leader.node_id).unwrap();
    let pid = node_pid(&dest, follower);
    signal(pid, "-STOP");
    let resume = Resume(pid);
    // acks=1: appended on the leader, not replicated to the stopped follower (still in the
    // ISR for replica.lag.time.max.ms), so the high watermark stays at 3.
    let base = block(dst.produce(&topic, 0, plain_batch(2), Acks::Leader)).unwrap();
    assert_eq!(base, 3);
    let hw = list_offsets_as(&dst, leader.node_id, &topic, -1);
    let leo = list_offsets_as(&dst, leader.node_id, &topic, -2);
    let via_client = block(dst.leader_log_end(&topic, 0)).unwrap();
    drop(resume);
    assert_eq!(
        (hw, leo, via_client),
        (3, 5, 5),
        "high watermark, log end offset (raw and client) while a follower is stopped"
    );
    let hw = eventually(Duration::from_secs(60), || match list_offsets_as(&dst, leader.node_id, &topic, -1) {
        5 => Ok(5),
        other => Err(format!("high watermark {other}")),
    });
    assert_eq!(hw, 5);
}

fn wait_identical(src: &ClusterClient, dst: &ClusterClient, topic: &str, partitions: i32) -> Vec<VerifyReport> {
    eventually(Duration::from_secs(240), || {
        (0..partitions).map(|p| block(verify_partition(src, dst, topic, p, &[], None))).collect::<Result<Vec<_>, _>>()
    })
}

fn produce_mixed(bootstrap: &str, topic: &str, count: usize, codec: &str, seed: u32) {
    ok(
        python_client(&[
            "produce-mixed",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--count",
            &count.to_string(),
            "--codec",
            codec,
            "--seed",
            &seed.to_string(),
            "--timeout",
            "120",
        ]),
        "produce-mixed",
    );
}

fn transactions(bootstrap: &str, topic: &str, commit: &str, abort: &str) {
    let id = unique_name("tx");
    ok(
        java_program(
            V,
            "TxnProducer.java",
            &[
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--transactional-id",
                &id,
                "--commit",
                commit,
                "--abort",
                abort,
                "--order",
                "commit-first",
            ],
        ),
        "TxnProducer",
    );
}

/// Moves the leadership of `topic`-0 on `c` to another replica: a reassignment that puts
/// another broker first, then a preferred leader election. Returns the new leader.
fn move_leader(c: &Cluster, client: &ClusterClient, topic: &str) -> i32 {
    block(client.refresh_metadata(Some(&[topic]))).unwrap();
    let old = block(client.leader_for(topic, 0)).unwrap().node_id;
    let target = old % 3 + 1;
    let others: Vec<i32> = (1..=3).filter(|n| *n != target).collect();
    let plan = format!(
        r#"{{"version":1,"partitions":[{{"topic":"{topic}","partition":0,"replicas":[{target},{},{}]}}]}}"#,
        others[0], others[1]
    );
    let dir = repo().join("target/test-mirrorgate");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{}.json", unique_name("reassign")));
    std::fs::write(&file, plan).unwrap();
    kafka_tool_ok(
        V,
        "reassign-partitions",
        &["--bootstrap-server", &c.bootstrap, "--reassignment-json-file", file.to_str().unwrap(), "--execute"],
        None,
    );
    eventually(Duration::from_secs(120), || {
        let out = kafka_tool(
            V,
            "leader-election",
            &["--bootstrap-server", &c.bootstrap, "--election-type", "PREFERRED", "--topic", topic, "--partition", "0"],
            None,
        );
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        block(client.refresh_metadata(Some(&[topic]))).map_err(|e| e.to_string())?;
        let now = block(client.leader_for(topic, 0)).map_err(|e| e.to_string())?.node_id;
        if now == target {
            Ok(now)
        } else {
            Err(format!("leader of {topic}-0 is {now}, not {target}: {text}"))
        }
    })
}

/// Runs `tests/java/OldProducer.java`; panics unless every record was delivered.
fn old_producer(bootstrap: &str, topic: &str, count: usize, extra: &[&str]) {
    let n = count.to_string();
    let mut args = vec!["--bootstrap-server", bootstrap, "--topic", topic, "--count", n.as_str()];
    args.extend_from_slice(extra);
    let out = ok(java_program(V, "OldProducer.java", &args), "OldProducer");
    assert_eq!(out.trim(), format!("delivered {count}"), "OldProducer {args:?}");
}

/// Topic configs of a source the cleaner compacts at once: segments roll after 100 ms (or
/// 1 MiB, the least Kafka 4 accepts), any dirty ratio and record age is cleanable.
const COMPACT: [&str; 6] = [
    "cleanup.policy=compact",
    "segment.ms=100",
    "segment.bytes=1048576",
    "min.cleanable.dirty.ratio=0.01",
    "min.compaction.lag.ms=0",
    "delete.retention.ms=100",
];

/// One round of 300 updates to keys `k-0`..`k-4` in one big uncompressed batch (non-idempotent
/// producer): once compacted, the batch keeps the last update of each key, holes inside.
fn compaction_round(bootstrap: &str, topic: &str, round: u32) {
    let prefix = format!("r{round}");
    old_producer(
        bootstrap,
        topic,
        300,
        &[
            "--keys",
            "5",
            "--timestamp-start",
            "now",
            "--prefix",
            &prefix,
            "--prop",
            "batch.size=1000000",
            "--prop",
            "linger.ms=200",
            "--prop",
            "enable.idempotence=false",
        ],
    );
}

/// `(base offset, last offset, record count)` of the data batches of `topic`-0 whose records
/// do not fill their offset range (holes inside), read from the leader.
fn batches_with_holes_inside(c: &ClusterClient, topic: &str) -> Vec<(i64, i64, i32)> {
    let mut offset = block(c.list_offsets(topic, 0, -2)).unwrap();
    let hw = block(c.list_offsets(topic, 0, -1)).unwrap();
    let mut out = Vec::new();
    while offset < hw {
        let f = block(c.fetch(topic, 0, offset, 1 << 20)).unwrap();
        let before = offset;
        for b in BatchIter::new(f.records.clone()) {
            let b = b.unwrap();
            if b.next_offset() <= offset {
                continue;
            }
            offset = b.next_offset();
            if !b.is_control() && i64::from(b.record_count()) < b.last_offset() - b.base_offset() + 1 {
                out.push((b.base_offset(), b.last_offset(), b.record_count()));
            }
        }
        assert!(offset > before, "no progress reading {topic}-0 at {offset} (hw {hw})");
    }
    out
}

fn restart_node(c: &Cluster, n: i32) {
    let kafka = repo().join("scripts/kafka.sh");
    let st = Command::new(&kafka).args(["stop-node", &c.name, &n.to_string()]).status().unwrap();
    assert!(st.success(), "stop-node {n}");
    std::thread::sleep(Duration::from_secs(2));
    let st = Command::new(&kafka).args(["start-node", &c.name, &n.to_string()]).status().unwrap();
    assert!(st.success(), "start-node {n}");
}

/// Waits until every partition of `topic` has its full ISR of 3 on `client`'s cluster.
fn wait_isr(client: &ClusterClient, topic: &str) {
    eventually(Duration::from_secs(120), || {
        block(client.refresh_metadata(Some(&[topic]))).map_err(|e| e.to_string())?;
        let info = block(client.topic(topic)).map_err(|e| e.to_string())?;
        let short: Vec<i32> = info.partitions.iter().filter(|(_, p)| p.isr.len() < 3).map(|(i, _)| *i).collect();
        if short.is_empty() {
            Ok(())
        } else {
            Err(format!("{topic}: partitions {short:?} have a short ISR"))
        }
    });
}

/// The acceptance scenario: plain/compressed and transactional sources mirror identically
/// (verify, and librdkafka through mirrorgate against the source at both isolation levels)
/// while a destination partition leader moves and a destination broker restarts mid-copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_identically_through_a_destination_leader_move_and_broker_restart() {
    let (source, dest) = (source(), destination());
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let plain = unique_name("rplain");
    let txn = unique_name("rtxn");
    create_topic(&source.bootstrap, &plain, 1, &["max.message.bytes=4000000"]);
    create_topic(&source.bootstrap, &txn, 1, &[]);
    produce_mixed(&source.bootstrap, &plain, 6_000, "lz4", 1);
    transactions(&source.bootstrap, &txn, "c1,c2", "a1");
    // A compacted source whose cleaner has left batches with holes inside (checked on the
    // source before mirroring): the mirror writes each as several appends.
    let compacted = unique_name("rcompact");
    create_topic(&source.bootstrap, &compacted, 1, &COMPACT);
    for round in 0..2 {
        compaction_round(&source.bootstrap, &compacted, round);
        std::thread::sleep(Duration::from_millis(300));
    }
    // One more record rolls the last round's segment, so the cleaner may clean it.
    old_producer(&source.bootstrap, &compacted, 1, &["--timestamp-start", "now", "--prefix", "end"]);
    let holes = eventually(Duration::from_secs(120), || {
        let h = batches_with_holes_inside(&src, &compacted);
        if h.is_empty() {
            Err(format!("the cleaner has not left holes inside batches of {compacted}-0 yet"))
        } else {
            Ok(h)
        }
    });
    eprintln!("{compacted}-0: batches with holes inside before mirroring: {holes:?}");

    let mirror = unique_name("rm");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(
        mirrors_cli(
            &mg.bootstrap,
            &["--start", "--mirror", &mirror, "--topics", &format!("{plain},{txn},{compacted}")],
        ),
        "--start",
    );

    // More data arrives while the destination changes under the copy (the compacted source
    // keeps being written and cleaned).
    let writer = {
        let (b, plain, txn, compacted) = (source.bootstrap.clone(), plain.clone(), txn.clone(), compacted.clone());
        std::thread::spawn(move || {
            for round in 0..4u32 {
                produce_mixed(&b, &plain, 4_000, if round % 2 == 0 { "zstd" } else { "none" }, 10 + round);
                transactions(&b, &txn, "c3,c4", "a2,a3");
                if round < 2 {
                    compaction_round(&b, &compacted, 2 + round);
                }
            }
        })
    };
    eventually(Duration::from_secs(120), || match block(dst.list_offsets(&plain, 0, -1)) {
        Ok(end) if end > 0 => Ok(end),
        other => Err(format!("destination {plain}-0 end {other:?}")),
    });
    let moved = move_leader(&dest, &dst, &plain);
    eprintln!("moved the leader of {plain}-0 to broker {moved}");
    let moved = move_leader(&dest, &dst, &compacted);
    eprintln!("moved the leader of {compacted}-0 to broker {moved}");
    // Restart the broker that leads the transactional partition now.
    block(dst.refresh_metadata(Some(&[txn.as_str()]))).unwrap();
    let txn_leader = block(dst.leader_for(&txn, 0)).unwrap().node_id;
    restart_node(&dest, txn_leader);
    eprintln!("restarted destination broker {txn_leader}");
    writer.join().unwrap();
    wait_isr(&dst, &plain);
    wait_isr(&dst, &txn);
    wait_isr(&dst, &compacted);

    for topic in [&plain, &txn, &compacted] {
        let reports = wait_identical(&src, &dst, topic, 1);
        eprintln!("{topic}: {reports:?}");
    }
    let states = describe_json(&mg, &mirror);
    for p in &states {
        assert_eq!(p["state"], "MIRRORING", "{states:?}");
    }
    let plain_n = 6_000 + 4 * 4_000;
    let on_source = consume_all(&source.bootstrap, &plain, plain_n, "read_committed");
    let via_mirrorgate = consume_all(&mg.bootstrap, &plain, plain_n, "read_committed");
    assert_eq!(on_source.len(), plain_n);
    assert!(on_source == via_mirrorgate, "{plain}: records differ through mirrorgate");
    // Transactional: the committed records (c1,c2 + 4 × c3,c4) at read_committed, and with
    // the aborted ones (a1 + 4 × a2,a3: real aborted records, the default) at
    // read_uncommitted, through mirrorgate as on the source.
    let committed = 2 + 4 * 2;
    for (isolation, count) in [("read_committed", committed), ("read_uncommitted", committed + 1 + 4 * 2)] {
        let on_source = consume_all(&source.bootstrap, &txn, count, isolation);
        let via_mirrorgate = consume_all(&mg.bootstrap, &txn, count, isolation);
        assert_eq!(on_source.len(), count, "{txn} ({isolation}) on the source");
        assert!(on_source == via_mirrorgate, "{txn} ({isolation}): records differ through mirrorgate");
    }
}
