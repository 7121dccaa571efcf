//! Kafka versions on either side of the mirror, and source topics a destination cannot take
//! as they are (issue 9, items 10 and 16, and the versions acceptance):
//!
//! - the `tests/mirror_data.rs` data set (every codec, null and repeated keys, null and empty
//!   values, duplicate binary headers, records over 1 MiB), trimmed for CI time, mirrored
//!   from a Kafka 3.9 source to a 3.9 destination and to a 4.1 destination, identical;
//! - records with timestamps years in the past and in the future reach a 3.9 destination whose
//!   brokers bound timestamps (`log.message.timestamp.difference.max.ms`, which 3.x still
//!   applies when the newer before/after limits are at their defaults) and a 4.1 destination
//!   (whose `after.max.ms` defaults to one hour);
//! - a tiered-storage (KIP-405, Kafka's `LocalTieredStorage`) source topic whose head is only
//!   in remote storage mirrors by default to destinations without tiered storage;
//! - a start the destination refuses is a FAILED mirror topic in `--describe`, logged once,
//!   not retried every metadata refresh;
//! - through mirrorgate, a 3.9 destination's minimum versions stay advertised for the APIs
//!   the state topic guard decodes (old clients keep working).
//!
//! Clusters (shared by the tests): a 3.9.1 source with tiered storage on, a 3.9.1 destination
//! and a 4.1.1 destination, one node each.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::mirror::topics::ClusterAccess;
use mirrorgate::mirror::verify::verify_partition;
use serde_json::Value;
use support::*;

/// One day, ms: the 3.9 destination's broker-wide timestamp bound.
const DAY_MS: i64 = 86_400_000;

/// The 3.9.1 source, with tiered storage on (`scripts/kafka.sh start --tiered`); only the
/// tiered test's topic uses it.
fn source() -> std::sync::Arc<Cluster> {
    tiered_cluster("src39", "3.9.1")
}

fn dest39() -> std::sync::Arc<Cluster> {
    cluster_with("dst39", 1, "3.9.1", &["log.message.timestamp.difference.max.ms=86400000"])
}

fn dest41() -> std::sync::Arc<Cluster> {
    cluster("dst41")
}

/// Creates `topic` on `c` with the tools of `c`'s Kafka version (TopicCommand checks config
/// values against its own version's rules: 4.x refuses what 3.9 takes).
fn create_topic(c: &Cluster, topic: &str, partitions: u32, configs: &[&str]) {
    let mut args =
        vec!["--bootstrap-server", c.bootstrap.as_str(), "--create", "--topic", topic, "--replication-factor", "1"];
    let p = partitions.to_string();
    args.extend(["--partitions", p.as_str()]);
    for c in configs {
        args.extend(["--config", c]);
    }
    kafka_tool_ok(&c.version, "topics", &args, None);
}

fn client(bootstrap: &str) -> ClusterClient {
    block(ClusterClient::connect(ClusterOptions::new(vec![bootstrap.to_string()]))).unwrap()
}

fn access(bootstrap: &str) -> ClusterAccess {
    ClusterAccess {
        bootstrap: vec![bootstrap.to_string()].into(),
        connect_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(30),
    }
}

fn create_mirror(mg: &Mirrorgate, source: &Cluster, extra: &str) -> String {
    let mirror = unique_name("m");
    let cfg = mirror_config_file(source, extra);
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    mirror
}

fn start(mg: &Mirrorgate, mirror: &str, topics: &[&str]) {
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", mirror, "--topics", &topics.join(",")]), "--start");
}

/// Waits until every partition of `topic` verifies (identical, caught up); returns the
/// number of records.
fn wait_identical(src: &ClusterClient, dst: &ClusterClient, topic: &str, partitions: i32) -> i64 {
    let reports = eventually(Duration::from_secs(120), || {
        (0..partitions).map(|p| block(verify_partition(src, dst, topic, p, &[], None))).collect::<Result<Vec<_>, _>>()
    });
    reports.iter().map(|r| r.records).sum()
}

/// The mirror_data.rs data set on `source`, trimmed: one topic per codec group, 3
/// partitions, (name, codecs, records per codec, records over 1 MiB). Returns the topics and
/// their record counts.
fn produce_data_set(source: &Cluster) -> Vec<(String, usize)> {
    let codecs: [(&str, &[&str], usize, u32); 3] =
        [("plain", &["none", "gzip"], 1500, 0), ("fast", &["snappy", "lz4"], 1500, 0), ("zstd", &["zstd"], 3000, 1)];
    let mut out = Vec::new();
    for (name, cs, count, big) in codecs {
        let t = unique_name(&format!("v-{name}"));
        create_topic(source, &t, 3, &["max.message.bytes=4000000"]);
        let mut n = 0;
        for (i, c) in cs.iter().enumerate() {
            let (count_arg, seed, big_arg) = (count.to_string(), i.to_string(), big.to_string());
            ok(
                python_client(&[
                    "produce-mixed",
                    "--bootstrap",
                    &source.bootstrap,
                    "--topic",
                    &t,
                    "--count",
                    &count_arg,
                    "--codec",
                    c,
                    "--seed",
                    &seed,
                    "--big",
                    &big_arg,
                ]),
                "produce-mixed",
            );
            n += count + big as usize;
        }
        out.push((t, n));
    }
    out
}

/// A topic with 10 records stamped `years` years before now and 10 stamped one year after
/// now (CreateTime), on one partition. Returns the topic.
fn produce_far_timestamps(source: &Cluster, years: i64) -> String {
    let t = unique_name("v-ts");
    // No time retention on the source: it would delete the old records before the mirror starts.
    create_topic(source, &t, 1, &["retention.ms=-1"]);
    let now = mirrorgate::mirror::model::now_ms();
    for (prefix, ts) in [("old", now - years * 365 * DAY_MS), ("future", now + 365 * DAY_MS)] {
        let ts = ts.to_string();
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                &t,
                "--count",
                "10",
                "--prefix",
                prefix,
                "--timestamp-ms",
                &ts,
            ]),
            "produce with far timestamps",
        );
    }
    t
}

/// Mirrors the data set and the far-timestamp topic from the 3.9 source to `dest`; checks
/// batch-level identity (verify) and what a consumer reads through mirrorgate.
fn data_set_mirrors_identically(dest: &Cluster) {
    let source = source();
    let mg = Mirrorgate::start(dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let mut topics = produce_data_set(&source);
    topics.push((produce_far_timestamps(&source, 7), 20));
    let mirror = create_mirror(&mg, &source, "mirror.inflight.max.bytes=4194304\n");
    let names: Vec<&str> = topics.iter().map(|(t, _)| t.as_str()).collect();
    start(&mg, &mirror, &names);
    for (t, n) in &topics {
        let partitions = if t.contains("v-ts") { 1 } else { 3 };
        let records = wait_identical(&src, &dst, t, partitions);
        assert_eq!(records, *n as i64, "{t}: records on the destination");
        let on_source = consume_all(&source.bootstrap, t, *n, "read_committed");
        let via_mirrorgate = consume_all(&mg.bootstrap, t, *n, "read_committed");
        assert_eq!(on_source.len(), *n, "{t}");
        assert!(on_source == via_mirrorgate, "{t}: records differ through mirrorgate (Kafka {})", dest.version);
    }
    // The timestamps arrived unchanged, and the destination topic accepts any timestamp.
    let ts_topic = &topics.last().unwrap().0;
    let recs = consume_all(&mg.bootstrap, ts_topic, 20, "read_committed");
    let now = mirrorgate::mirror::model::now_ms();
    assert!(recs[..10].iter().all(|r| r["timestamp"].as_i64().unwrap() < now - 6 * 365 * DAY_MS), "{recs:?}");
    assert!(recs[10..].iter().all(|r| r["timestamp"].as_i64().unwrap() > now + 300 * DAY_MS), "{recs:?}");
    let configs = block(access(&dest.bootstrap).topic_configs(ts_topic)).unwrap();
    let max = i64::MAX.to_string();
    assert_eq!(configs.get("message.timestamp.before.max.ms"), Some(&max), "{configs:?}");
    assert_eq!(configs.get("message.timestamp.after.max.ms"), Some(&max), "{configs:?}");
    if dest.version.starts_with("3.") {
        assert_eq!(configs.get("message.timestamp.difference.max.ms"), Some(&max), "{configs:?}");
    } else {
        assert!(!configs.contains_key("message.timestamp.difference.max.ms"), "{configs:?}");
    }
    let failed: Vec<Value> =
        describe_json(&mg, &mirror).into_iter().filter(|p| p["state"].as_str() != Some("MIRRORING")).collect();
    assert!(failed.is_empty(), "partitions not MIRRORING: {failed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_3_9_to_3_9_data_set_and_far_timestamps_are_identical() {
    data_set_mirrors_identically(&dest39());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_3_9_to_4_1_data_set_and_far_timestamps_are_identical() {
    data_set_mirrors_identically(&dest41());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiered_storage_source_mirrors_by_default_to_destinations_without_it() {
    let source = source();
    let t = unique_name("v-tiered");
    // Small segments, local copies deleted as soon as they are in remote storage: the head of
    // the log is only in LocalTieredStorage when the mirror starts.
    create_topic(
        &source,
        &t,
        1,
        &["remote.storage.enable=true", "local.retention.ms=1000", "segment.bytes=1048576", "cleanup.policy=delete"],
    );
    ok(python_client(&["produce", "--bootstrap", &source.bootstrap, "--topic", &t, "--count", "100000"]), "produce");
    let src = client(&source.bootstrap);
    eventually(Duration::from_secs(90), || {
        let local_start = local_log_start(&source, &t);
        let start = block(src.list_offsets(&t, 0, -2)).map_err(|e| e.to_string())?;
        if local_start > 0 && start == 0 {
            Ok(())
        } else {
            Err(format!("local log start {local_start}, log start {start}: the head is not remote-only yet"))
        }
    });
    for dest in [dest41(), dest39()] {
        let mg = Mirrorgate::start(&dest);
        let dst = client(&dest.bootstrap);
        let mirror = create_mirror(&mg, &source, "");
        start(&mg, &mirror, &[&t]);
        assert_eq!(wait_identical(&src, &dst, &t, 1), 100_000, "Kafka {}", dest.version);
        let configs = block(access(&dest.bootstrap).topic_configs(&t)).unwrap();
        assert!(
            !configs.keys().any(|k| k.starts_with("remote.") || k.starts_with("local.retention.")),
            "tiered-storage configs reached a destination without tiered storage: {configs:?}"
        );
        assert_eq!(configs.get("segment.bytes").map(String::as_str), Some("1048576"), "other configs are copied");
        assert!(mg.log().contains("source topic configs the destination cannot take are not copied"), "{}", mg.log());
    }
}

/// The local log start offset of `topic`-0 on the (single) broker of `c`: the base offset of
/// the first segment file still in its log directory.
fn local_log_start(c: &Cluster, topic: &str) -> i64 {
    let dir = std::env::var("MIRRORGATE_KAFKA_DIR").map(std::path::PathBuf::from).unwrap_or(repo().join(".kafka"));
    let log_dir = dir.join(&c.name).join("node-1/data").join(format!("{topic}-0"));
    std::fs::read_dir(&log_dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter_map(|n| n.strip_suffix(".log").and_then(|b| b.parse::<i64>().ok()))
                .min()
                .unwrap_or(-1)
        })
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_the_destination_refuses_fails_visibly_once_and_is_not_retried() {
    // Kafka 4 refuses segment.bytes below 1 MiB, which Kafka 3.9 allows.
    let source = source();
    let dest = dest41();
    let mg = Mirrorgate::start(&dest);
    let prefix = unique_name("v-refused");
    let (bad, good) = (format!("{prefix}-small-segments"), format!("{prefix}-plain"));
    create_topic(&source, &bad, 2, &["segment.bytes=65536"]);
    create_topic(&source, &good, 1, &[]);
    ok(python_client(&["produce", "--bootstrap", &source.bootstrap, "--topic", &good, "--count", "100"]), "produce");
    let mirror =
        create_mirror(&mg, &source, &format!("topics.include={prefix}-.*\nmirror.metadata.refresh.interval.ms=1000\n"));
    // Discovery starts both; the refused one must not hold back the other.
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    assert_eq!(wait_identical(&src, &dst, &good, 1), 100);
    let parts = eventually(Duration::from_secs(30), || {
        let parts: Vec<Value> =
            describe_json(&mg, &mirror).into_iter().filter(|p| p["topic"].as_str() == Some(bad.as_str())).collect();
        if parts.len() == 2 && parts.iter().all(|p| p["state"].as_str() == Some("FAILED")) {
            Ok(parts)
        } else {
            Err(format!("{parts:?}"))
        }
    });
    for p in &parts {
        let msg = p.to_string();
        assert!(msg.contains("segment.bytes") || msg.contains("INVALID_CONFIG") || msg.contains("error 40"), "{msg}");
    }
    // Several refresh rounds later: one refusal logged, no retry loop.
    std::thread::sleep(Duration::from_secs(5));
    let log = mg.log();
    let refusals = log.matches(&format!("cannot create mirror topic `{bad}`")).count();
    let by_kind: BTreeMap<&str, usize> = [("refusals", refusals)].into_iter().collect();
    assert!(refusals <= 2, "the refused start is retried: {by_kind:?}\n{}", tail(&log, 40));
    let parts_after: Vec<Value> =
        describe_json(&mg, &mirror).into_iter().filter(|p| p["topic"].as_str() == Some(bad.as_str())).collect();
    assert_eq!(parts_after.len(), 2);
    assert!(parts_after.iter().all(|p| p["state"].as_str() == Some("FAILED")), "{parts_after:?}");
}

/// The broker facts the destination topic configs rest on (docs/broker-behaviour.md,
/// "Versions"): Kafka 3.9 still bounds timestamps by `message.timestamp.difference.max.ms`
/// (here its broker default, one day) when `before.max.ms` is at its default; Kafka 4.1
/// refuses that name, tiered-storage configs without tiered storage, and `segment.bytes`
/// below 1 MiB — each with INVALID_CONFIG (40), nothing created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_pins_timestamp_limits_and_topic_configs_per_version() {
    let (d39, d41) = (dest39(), dest41());
    let max = i64::MAX.to_string();
    let create = |c: &Cluster, topic: &str, configs: &[(&str, &str)]| {
        let configs = configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        block(access(&c.bootstrap).create_topic(topic, 1, 1, &configs)).map_err(|e| e.to_string())
    };
    let produce_old = |c: &Cluster, topic: &str| {
        let ts = (mirrorgate::mirror::model::now_ms() - 7 * 365 * DAY_MS).to_string();
        python_client(&[
            "produce",
            "--bootstrap",
            &c.bootstrap,
            "--topic",
            topic,
            "--count",
            "1",
            "--timeout",
            "10",
            "--timestamp-ms",
            &ts,
        ])
    };
    // 3.9: before/after at Long.MAX alone fall back to the difference limit.
    let only_new = unique_name("pin-ts");
    let before_after =
        [("message.timestamp.before.max.ms", max.as_str()), ("message.timestamp.after.max.ms", max.as_str())];
    assert_eq!(create(&d39, &only_new, &before_after), Ok(true));
    let out = produce_old(&d39, &only_new);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        !out.status.success() && text.to_lowercase().contains("timestamp"),
        "3.9 accepted a 7-year-old record: {text}"
    );
    let all_three = unique_name("pin-ts");
    let mut three = before_after.to_vec();
    three.push(("message.timestamp.difference.max.ms", max.as_str()));
    assert_eq!(create(&d39, &all_three, &three), Ok(true));
    ok(produce_old(&d39, &all_three), "3.9 with difference.max.ms = Long.MAX");
    // 4.1: the difference name, tiered storage without it and small segments are refused.
    for (what, configs) in [
        ("difference", vec![("message.timestamp.difference.max.ms", max.as_str())]),
        ("tiered", vec![("remote.storage.enable", "true")]),
        ("segment", vec![("segment.bytes", "65536")]),
    ] {
        let t = unique_name("pin-cfg");
        let err = create(&d41, &t, &configs).expect_err(what);
        assert!(err.contains("error 40"), "{what}: {err}");
    }
    let t = unique_name("pin-ts");
    assert_eq!(create(&d41, &t, &before_after), Ok(true));
    ok(produce_old(&d41, &t), "4.1 with before/after = Long.MAX");
}

/// Old clients keep working through mirrorgate on a 3.9 destination: for the APIs only the
/// state topic guard decodes, ApiVersions advertises the broker's minimum versions (3.9
/// still serves ListOffsets v0, OffsetCommit v0-1, OffsetForLeaderEpoch v0-1 and
/// CreateTopics v0-1, below kafka-protocol's baseline); only maximums may be lower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_apis_keep_a_3_9_destinations_minimum_versions() {
    use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
    use kafka_protocol::protocol::StrBytes;
    use mirrorgate::client::BrokerConnection;
    let dest = dest39();
    let mg = Mirrorgate::start(&dest);
    let ranges = |bootstrap: String| async move {
        let mut conn = BrokerConnection::connect(&bootstrap, Duration::from_secs(5), Duration::from_secs(30), 1 << 24)
            .await
            .unwrap();
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("mirrorgate-test"))
            .with_client_software_version(StrBytes::from_static_str("1.0"));
        let resp = conn.send(&req, 3).await.unwrap();
        assert_eq!(resp.error_code, 0, "ApiVersions from {bootstrap}");
        resp.api_keys.iter().map(|a| (a.api_key, (a.min_version, a.max_version))).collect::<BTreeMap<i16, (i16, i16)>>()
    };
    let direct = ranges(dest.bootstrap.clone()).await;
    let through = ranges(mg.bootstrap.clone()).await;
    for key in [ApiKey::ListOffsets, ApiKey::OffsetCommit, ApiKey::OffsetForLeaderEpoch, ApiKey::CreateTopics] {
        let (d, t) = (direct[&(key as i16)], through[&(key as i16)]);
        assert_eq!(d.0, 0, "{key:?}: the 3.9 broker serves v0");
        assert_eq!(t.0, d.0, "{key:?}: minimum through mirrorgate {t:?}, broker {d:?}");
        assert!(t.1 <= d.1 && t.1 >= 1, "{key:?}: maximum through mirrorgate {t:?}, broker {d:?}");
    }
    let (d, t) = (direct[&(ApiKey::TxnOffsetCommit as i16)], through[&(ApiKey::TxnOffsetCommit as i16)]);
    assert_eq!(t.0, d.0, "TxnOffsetCommit: minimum through mirrorgate {t:?}, broker {d:?}");
    // Fetch is the exception: a 3.9 broker down-converts placeholders into data messages for
    // Fetch v0-3 (tests/broker_behaviour.rs), so mirrorgate advertises Fetch from v4 and closes
    // a connection that sends an older Fetch anyway.
    let (d, t) = (direct[&(ApiKey::Fetch as i16)], through[&(ApiKey::Fetch as i16)]);
    assert_eq!((d.0, t.0), (0, 4), "Fetch minimum: broker {d:?}, through mirrorgate {t:?}");
    assert!(fetch_v3_answered(&dest.bootstrap), "the 3.9 broker answers Fetch v3");
    assert!(!fetch_v3_answered(&mg.bootstrap), "mirrorgate closes the connection on Fetch v3");
}

/// Whether `addr` answers a Fetch v3 request (for a topic that does not exist) rather than
/// closing the connection.
fn fetch_v3_answered(addr: &str) -> bool {
    use std::io::{Read, Write};
    let mut b: Vec<u8> = Vec::new();
    b.extend_from_slice(&1i16.to_be_bytes()); // Fetch
    b.extend_from_slice(&3i16.to_be_bytes());
    b.extend_from_slice(&7i32.to_be_bytes());
    b.extend_from_slice(&3i16.to_be_bytes());
    b.extend_from_slice(b"old");
    for v in [-1i32, 0, 1, 1 << 20, 1] {
        b.extend_from_slice(&v.to_be_bytes()); // replica, max wait, min bytes, max bytes, 1 topic
    }
    b.extend_from_slice(&1i16.to_be_bytes());
    b.extend_from_slice(b"x");
    b.extend_from_slice(&1i32.to_be_bytes()); // 1 partition
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&(1i32 << 20).to_be_bytes());
    let mut frame = (b.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&b);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&frame).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).is_ok()
}
