//! Source offsets through mirrorgate for shifted mirror partitions (issue 12, item 1), against
//! real Kafka 4.1 source and destination clusters shared by the tests of this binary: a
//! source partition whose records 0–2999 were deleted (log start 3000, end 5000), mirrored
//! with `mirror.fill.max.gap=100` so that the destination holds it at offsets 0–1999 (one
//! segment, shift 3000). Through mirrorgate, Java and librdkafka consumers at both isolation
//! levels, ListOffsets, committed offsets, `kafka-consumer-groups --describe`, a consumer
//! resuming after failover and a producer writing after it all see the source's numbering;
//! read directly, the destination keeps its own.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::{FindCoordinatorRequest, GroupId, OffsetCommitRequest, OffsetFetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use serde_json::Value;
use support::*;

const V: &str = "4.1.1";
/// CreateTime of the records at source offsets 0–2999 ("old"), 3000–4199 ("mid") and
/// 4200–4999 ("new").
const T_OLD: i64 = 1_700_000_000_000;
const T_MID: i64 = 1_700_000_100_000;
const T_NEW: i64 = 1_700_000_200_000;

/// One partition; no time retention (the records carry fixed timestamps from 2023).
fn create_topic(bootstrap: &str, topic: &str) {
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
            "1",
            "--replication-factor",
            "1",
            "--config",
            "retention.ms=-1",
        ],
        None,
    );
}

fn client(bootstrap: &str) -> ClusterClient {
    block(ClusterClient::connect(ClusterOptions::new(vec![bootstrap.to_string()]))).unwrap()
}

/// librdkafka producer; batches of 10 records, so that DeleteRecords leaves the log start
/// on a batch boundary.
fn produce(bootstrap: &str, topic: &str, count: usize, prefix: &str, timestamp_ms: Option<i64>) {
    let n = count.to_string();
    let ts = timestamp_ms.map(|t| t.to_string());
    let mut args = vec![
        "produce",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--count",
        &n,
        "--partition",
        "0",
        "--prefix",
        prefix,
    ];
    args.extend(["--prop", "batch.num.messages=10", "--prop", "linger.ms=0"]);
    if let Some(ts) = &ts {
        args.extend(["--timestamp-ms", ts.as_str()]);
    }
    ok(python_client(&args), "produce");
}

fn delete_records(bootstrap: &str, topic: &str, before: i64) {
    let out = java_program(
        V,
        "AdminOps.java",
        &["delete-records", topic, "0", &before.to_string(), "--bootstrap-server", bootstrap],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK", "delete-records: {out:?}");
}

/// A source topic with records 0–4999 (three timestamps) whose head 0–2999 is deleted.
fn shifted_source(source: &Cluster, name: &str) -> String {
    let topic = unique_name(name);
    create_topic(&source.bootstrap, &topic);
    produce(&source.bootstrap, &topic, 3000, "old", Some(T_OLD));
    produce(&source.bootstrap, &topic, 1200, "mid", Some(T_MID));
    produce(&source.bootstrap, &topic, 800, "new", Some(T_NEW));
    delete_records(&source.bootstrap, &topic, 3000);
    topic
}

/// Creates a mirror (2 s metadata sync, fill bound 100) and starts `topic`.
fn start_mirror(mg: &Mirrorgate, source: &Cluster, topic: &str) -> String {
    start_mirror_filling(mg, source, topic, 100)
}

/// Creates a mirror (2 s metadata sync, fill bound `fill_max_gap`) and starts `topic`.
fn start_mirror_filling(mg: &Mirrorgate, source: &Cluster, topic: &str, fill_max_gap: i64) -> String {
    start_mirror_with(mg, source, topic, &format!("mirror.fill.max.gap={fill_max_gap}\n"))
}

/// Creates a mirror (2 s metadata sync, plus `extra` configs) and starts `topic`.
fn start_mirror_with(mg: &Mirrorgate, source: &Cluster, topic: &str, extra: &str) -> String {
    let mirror = unique_name("m");
    let cfg = mirror_config_file(source, &format!("mirror.metadata.refresh.interval.ms=2000\n{extra}"));
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", topic]), "--start");
    mirror
}

/// Waits until the destination (read directly) ends at `end`.
fn wait_destination_end(dst: &ClusterClient, topic: &str, end: i64) {
    eventually(Duration::from_secs(120), || {
        let got = block(dst.list_offsets(topic, 0, -1)).map_err(|e| e.to_string())?;
        (got == end).then_some(()).ok_or(format!("destination end {got}, want {end}"))
    });
}

/// `Offset:N\tvalue` lines of a Java console consumer reading partition 0 of `topic`.
fn java_read(
    bootstrap: &str,
    topic: &str,
    from: &str,
    count: usize,
    isolation: &str,
    group: Option<&str>,
) -> Vec<String> {
    let n = count.to_string();
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--max-messages",
        &n,
        "--timeout-ms",
        "60000",
        "--isolation-level",
        isolation,
        "--property",
        "print.offset=true",
    ];
    match group {
        Some(g) => args.extend(["--group", g]),
        None if from == "earliest" => args.extend(["--from-beginning"]),
        None => args.extend(["--partition", "0", "--offset", from]),
    }
    kafka_tool_ok(V, "console-consumer", &args, None).lines().map(String::from).collect()
}

/// The group coordinator of `group` (single-broker test clusters: its only broker).
fn coordinator(c: &ClusterClient, group: &str) -> i32 {
    let mut req = FindCoordinatorRequest::default();
    req.key = StrBytes::from_string(group.to_string());
    let node = *c.metadata().brokers.keys().next().unwrap();
    eventually(Duration::from_secs(120), || {
        let r = block(c.send_to_node(node, &req, 3)).map_err(|e| e.to_string())?;
        (r.error_code == 0).then_some(r.node_id.0).ok_or(format!("FindCoordinator error {}", r.error_code))
    })
}

fn commit(c: &ClusterClient, group: &str, topic: &str, offset: i64) {
    let node = coordinator(c, group);
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    p.committed_leader_epoch = -1;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_string(group.to_string()));
    req.generation_id_or_member_epoch = -1;
    req.topics = vec![t];
    eventually(Duration::from_secs(120), || {
        let resp = block(c.send_to_node(node, &req, 8)).map_err(|e| e.to_string())?;
        let code = resp.topics[0].partitions[0].error_code;
        (code == 0).then_some(()).ok_or(format!("commit error {code}"))
    });
}

/// Committed offsets of `group` on `topic` by OffsetFetch `version` (v7: `topics`; v8+:
/// `groups`), partition → offset.
fn committed(c: &ClusterClient, group: &str, topic: &str, version: i16) -> BTreeMap<i32, i64> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
    let node = coordinator(c, group);
    let mut req = OffsetFetchRequest::default();
    if version >= 8 {
        req.groups = vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_topics(None)];
    } else {
        req.group_id = GroupId(StrBytes::from_string(group.to_string()));
        req.topics = None;
    }
    let resp = eventually(Duration::from_secs(120), || {
        let resp = block(c.send_to_node(node, &req, version)).map_err(|e| e.to_string())?;
        let code = if version >= 8 { resp.groups.first().map_or(0, |g| g.error_code) } else { resp.error_code };
        (code == 0).then_some(resp).ok_or(format!("OffsetFetch error {code}"))
    });
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        if t.name.0.as_str() == topic {
            out.extend(
                t.partitions
                    .iter()
                    .filter(|p| p.committed_offset >= 0)
                    .map(|p| (p.partition_index, p.committed_offset)),
            );
        }
    }
    for g in &resp.groups {
        for t in g.topics.iter().filter(|t| t.name.0.as_str() == topic) {
            out.extend(
                t.partitions
                    .iter()
                    .filter(|p| p.committed_offset >= 0)
                    .map(|p| (p.partition_index, p.committed_offset)),
            );
        }
    }
    out
}

/// `(CURRENT-OFFSET, LOG-END-OFFSET, LAG)` of partition 0 of `topic` in
/// `kafka-consumer-groups --describe --group`.
fn group_describe(bootstrap: &str, group: &str, topic: &str) -> (String, String, String) {
    let out =
        kafka_tool_ok(V, "consumer-groups", &["--bootstrap-server", bootstrap, "--describe", "--group", group], None);
    let line = out
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(topic))
        .unwrap_or_else(|| panic!("no row for {topic}: {out}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    (cols[3].to_string(), cols[4].to_string(), cols[5].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shifted_partition_reads_like_the_source() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst, through) = (client(&source.bootstrap), client(&dest.bootstrap), client(&mg.bootstrap));
    let topic = shifted_source(&source, "shifted");
    let mirror = start_mirror(&mg, &source, &topic);
    // Read directly, the destination holds the 2000 records at 0..1999 (one segment, shift 3000).
    wait_destination_end(&dst, &topic, 2000);
    let rows = describe_json(&mg, &mirror);
    assert!(rows[0].to_string().contains("3000"), "shifted by 3000: {rows:?}");

    // ListOffsets: earliest, latest, max timestamp and by timestamp, as the source answers.
    for ts in [-2, -1, -3, T_OLD, T_MID, T_MID + 1, T_NEW, T_NEW + 1] {
        let want = block(src.list_offsets(&topic, 0, ts)).unwrap();
        eventually(Duration::from_secs(60), || {
            let got = block(through.list_offsets(&topic, 0, ts)).map_err(|e| e.to_string())?;
            (got == want)
                .then_some(())
                .ok_or(format!("ListOffsets {ts}: {got} through mirrorgate, {want} on the source"))
        });
    }
    assert_eq!(block(through.list_offsets(&topic, 0, -1)).unwrap(), 5000);
    assert_eq!(block(through.list_offsets(&topic, 0, T_NEW)).unwrap(), 4200);
    assert_eq!(block(dst.list_offsets(&topic, 0, T_NEW)).unwrap(), 1200, "the destination's own numbering");

    // librdkafka at both isolation levels: the source's records at the source's offsets.
    for isolation in ["read_committed", "read_uncommitted"] {
        let want = consume_all(&source.bootstrap, &topic, 2000, isolation);
        let got = consume_all(&mg.bootstrap, &topic, 2000, isolation);
        assert_eq!(got.len(), 2000);
        assert_eq!(got[0]["offset"], 3000, "{isolation}: {}", got[0]);
        assert_eq!(got, want, "{isolation}: librdkafka through mirrorgate vs the source");
    }
    // The Java consumer at both isolation levels, from the beginning and from an offset.
    for isolation in ["read_committed", "read_uncommitted"] {
        let want = java_read(&source.bootstrap, &topic, "earliest", 2000, isolation, None);
        let got = java_read(&mg.bootstrap, &topic, "earliest", 2000, isolation, None);
        assert_eq!(got.first().map(String::as_str), Some("Offset:3000\tmid-0"), "{isolation}");
        assert_eq!(got.last().map(String::as_str), Some("Offset:4999\tnew-799"), "{isolation}");
        assert_eq!(got, want, "{isolation}: Java consumer through mirrorgate vs the source");
        let one = java_read(&mg.bootstrap, &topic, "4200", 1, isolation, None);
        assert_eq!(one, vec!["Offset:4200\tnew-0".to_string()], "{isolation}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_lag_and_failover_are_in_source_offsets() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst, through) = (client(&source.bootstrap), client(&dest.bootstrap), client(&mg.bootstrap));
    let topic = shifted_source(&source, "groups");
    let group = unique_name("g");
    commit(&src, &group, &topic, 4000);
    let mirror = start_mirror(&mg, &source, &topic);
    wait_destination_end(&dst, &topic, 2000);
    // The metadata sync commits destination offset 1000; through mirrorgate it reads 4000,
    // in the single-group and the batched OffsetFetch layouts.
    eventually(Duration::from_secs(120), || {
        let c = committed(&dst, &group, &topic, 7);
        (c.get(&0) == Some(&1000)).then_some(()).ok_or(format!("destination commit {c:?}"))
    });
    assert_eq!(committed(&through, &group, &topic, 7).get(&0), Some(&4000));
    assert_eq!(committed(&through, &group, &topic, 8).get(&0), Some(&4000));
    // The tool shows the source's offset, log end and lag.
    let on_source = group_describe(&source.bootstrap, &group, &topic);
    assert_eq!(on_source, ("4000".into(), "5000".into(), "1000".into()));
    assert_eq!(group_describe(&mg.bootstrap, &group, &topic), on_source);

    // Failover: the group resumes at 4000, and writes continue at 5000.
    ok(mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &topic]), "--stop");
    eventually(Duration::from_secs(60), || {
        let rows = describe_json(&mg, &mirror);
        (rows[0]["state"] == "STOPPED").then_some(()).ok_or(format!("{rows:?}"))
    });
    let resumed = java_read(&mg.bootstrap, &topic, "", 1, "read_committed", Some(&group));
    assert_eq!(resumed, vec!["Offset:4000\tmid-1000".to_string()]);
    assert_eq!(committed(&through, &group, &topic, 8).get(&0), Some(&4001), "the consumer's commit, in source offsets");
    assert_eq!(committed(&dst, &group, &topic, 8).get(&0), Some(&1001), "stored as the destination offset");
    produce(&mg.bootstrap, &topic, 3, "after", None);
    let after = java_read(&mg.bootstrap, &topic, "5000", 3, "read_committed", None);
    assert_eq!(after, ["Offset:5000\tafter-0", "Offset:5001\tafter-1", "Offset:5002\tafter-2"]);
    assert_eq!(block(through.list_offsets(&topic, 0, -1)).unwrap(), 5003);
    assert_eq!(block(dst.list_offsets(&topic, 0, -1)).unwrap(), 2003);
    // DeleteRecords on the stopped topic, in source offsets.
    delete_records(&mg.bootstrap, &topic, 4500);
    assert_eq!(block(through.list_offsets(&topic, 0, -2)).unwrap(), 4500);
    assert_eq!(block(dst.list_offsets(&topic, 0, -2)).unwrap(), 1500);
}

/// Two segments: a shifted head (log start 200) and a mid-log gap larger than the fill bound
/// (an aborted transaction of 150 records at 302..451).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mid_log_gap_beyond_the_fill_bound_keeps_source_offsets() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst, through) = (client(&source.bootstrap), client(&dest.bootstrap), client(&mg.bootstrap));
    let topic = unique_name("segments");
    create_topic(&source.bootstrap, &topic);
    produce(&source.bootstrap, &topic, 300, "a", None);
    // c at 300, COMMIT marker 301, aborted 302..451, ABORT marker 452.
    let aborted: Vec<String> = (0..150).map(|i| format!("x{i}")).collect();
    let out = ok(
        java_program(
            V,
            "TxnProducer.java",
            &[
                "--bootstrap-server",
                &source.bootstrap,
                "--topic",
                &topic,
                "--transactional-id",
                &unique_name("tx"),
                "--commit",
                "c",
                "--abort",
                &aborted.join(","),
                "--order",
                "commit-first",
                // One batch per transaction: the aborted gap is one gap of 151 offsets.
                "--prop",
                "linger.ms=500",
            ],
        ),
        "TxnProducer",
    );
    assert!(out.contains("offsets=[300]"), "{out}");
    produce(&source.bootstrap, &topic, 100, "b", None);
    delete_records(&source.bootstrap, &topic, 200);
    // Placeholder markers: the aborted records are then a gap, not real aborted records.
    let mirror =
        start_mirror_with(&mg, &source, &topic, "mirror.fill.max.gap=100\nmirror.transaction.markers=placeholder\n");
    // The head (source 200..) is shifted to destination 0, and the aborted records (the data
    // plane takes each skipped batch as one gap) start a second segment.
    eventually(Duration::from_secs(120), || {
        let got = block(through.list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        let rows = describe_json(&mg, &mirror);
        let segments = rows[0]["segments"].as_array().map_or(0, Vec::len);
        (got == 553 && segments == 2).then_some(()).ok_or(format!("log end {got} through mirrorgate: {rows:?}"))
    });
    let direct = block(dst.list_offsets(&topic, 0, -1)).unwrap();
    assert!(direct < 553 - 200, "the destination's own numbering is shifted twice: {direct}");
    for ts in [-2, -1] {
        let want = block(src.list_offsets(&topic, 0, ts)).unwrap();
        eventually(Duration::from_secs(60), || {
            let got = block(through.list_offsets(&topic, 0, ts)).map_err(|e| e.to_string())?;
            (got == want).then_some(()).ok_or(format!("ListOffsets {ts}: {got}, source {want}"))
        });
    }
    let want = consume_all(&source.bootstrap, &topic, 201, "read_committed");
    assert_eq!(want.last().map(|r| r["offset"].clone()), Some(Value::from(552)));
    for isolation in ["read_committed", "read_uncommitted"] {
        // (At read_uncommitted the source also shows the aborted records; the destination
        // never holds them — DESIGN §4.1. Offsets of what both show are the same.)
        let got = consume_all(&mg.bootstrap, &topic, 201, isolation);
        assert_eq!(got, want, "{isolation}: librdkafka through mirrorgate");
        let java = java_read(&mg.bootstrap, &topic, "earliest", 201, isolation, None);
        let java_src = java_read(&source.bootstrap, &topic, "earliest", 201, "read_committed", None);
        assert_eq!(java, java_src, "{isolation}: Java consumer through mirrorgate");
        assert_eq!(java[101], "Offset:453\tb-0", "{isolation}");
    }
    let one = java_read(&mg.bootstrap, &topic, "302", 1, "read_committed", None);
    assert_eq!(one, vec!["Offset:453\tb-0".to_string()], "a position inside the gap reads the next record");
}

/// librdkafka consumer in group `group` reading `count` records of `topic`, then waiting for
/// the partition EOF (raised only once its position reaches the high watermark / LSO):
/// the records and the EOF offset.
fn consume_to_eof(bootstrap: &str, topic: &str, group: &str, count: usize) -> (Vec<Value>, i64) {
    let n = count.to_string();
    let out = ok(
        python_client(&[
            "consume",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--count",
            &n,
            "--until-eof",
            "--timeout",
            "60",
        ]),
        "consume --until-eof",
    );
    let rows: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let eof = rows.iter().find_map(|r| r["eof"].as_i64()).expect("an EOF row");
    (rows.into_iter().filter(|r| r.get("eof").is_none()).collect(), eof)
}

/// A shifted head (log start 200) and a gap at the end larger than the fill bound (an
/// aborted transaction of 150 records at 300..449 and its marker at 450, with
/// `mirror.fill.max.gap=0`): the data plane starts a segment at source 450 for the aborted
/// records, replaces it with one at 451 for the marker, and writes nothing into it: the
/// destination ends at that empty segment's start. Through mirrorgate the end is the end of
/// the records (300), which a consumer reaches; `--verify` passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trailing_gap_beyond_the_fill_bound_leaves_a_reachable_end() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst, through) = (client(&source.bootstrap), client(&dest.bootstrap), client(&mg.bootstrap));
    let topic = unique_name("tailgap");
    create_topic(&source.bootstrap, &topic);
    produce(&source.bootstrap, &topic, 300, "a", None);
    let aborted: Vec<String> = (0..150).map(|i| format!("x{i}")).collect();
    ok(
        java_program(
            V,
            "TxnProducer.java",
            &[
                "--bootstrap-server",
                &source.bootstrap,
                "--topic",
                &topic,
                "--transactional-id",
                &unique_name("tx"),
                "--abort",
                &aborted.join(","),
                "--prop",
                "linger.ms=500",
            ],
        ),
        "TxnProducer",
    );
    delete_records(&source.bootstrap, &topic, 200);
    assert_eq!(block(src.list_offsets(&topic, 0, -1)).unwrap(), 451, "the source ends after the ABORT marker");
    // Placeholder markers: the trailing aborted records are a gap then (real markers write them
    // as aborted records, with no gap: tests/real_markers.rs).
    let mirror =
        start_mirror_with(&mg, &source, &topic, "mirror.fill.max.gap=0\nmirror.transaction.markers=placeholder\n");
    eventually(Duration::from_secs(120), || {
        let rows = describe_json(&mg, &mirror);
        // The segment at 450 (aborted records) is replaced by one at 451 (the marker): wait
        // for the second (a new segment is followed by other instances before it is used,
        // so the replacement comes a moment later).
        let segments_final = rows[0]["segments"] == serde_json::json!([[200, 0], [451, 100]]);
        let direct = block(dst.list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        let caught_up = rows[0]["sourceOffset"] == 451;
        (direct == 100 && segments_final && caught_up)
            .then_some(())
            .ok_or(format!("destination end {direct}: {rows:?}"))
    });
    assert_eq!(describe_json(&mg, &mirror)[0]["segments"], serde_json::json!([[200, 0], [451, 100]]));
    // The presented end: one past the last record (299), not the source's 451.
    assert_eq!(block(through.list_offsets(&topic, 0, -1)).unwrap(), 300);
    assert_eq!(block(through.list_offsets(&topic, 0, -2)).unwrap(), 200);
    // librdkafka reaches the end: EOF at the presented high watermark.
    let group = unique_name("g");
    let (records, eof) = consume_to_eof(&mg.bootstrap, &topic, &group, 100);
    assert_eq!(records.first().map(|r| r["offset"].clone()), Some(Value::from(200)));
    assert_eq!(records.last().map(|r| r["offset"].clone()), Some(Value::from(299)));
    assert_eq!(eof, 300, "EOF at the presented end");
    // Its committed position (stored as destination 100) reads back at the end: lag 0.
    assert_eq!(committed(&through, &group, &topic, 8).get(&0), Some(&300));
    assert_eq!(group_describe(&mg.bootstrap, &group, &topic), ("300".into(), "300".into(), "0".into()));
    // --verify passes on the partition that ends in an empty segment.
    let verified = ok(mirrors_cli(&mg.bootstrap, &["--verify", "--mirror", &mirror]), "--verify");
    assert!(verified.contains("1 identical, 0 different"), "{verified}");
}
