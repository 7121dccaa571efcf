//! Errors a mirror partition cannot copy past are visible (issue 9, items 4 and 11): a record
//! the destination refuses puts the partition in FAILED with the broker's error named, not
//! retried; a partition whose source is down shows its last error while it retries, and goes
//! FAILED (retryable, with the retry count) once the outage outlasts the stall bound. A
//! planned failover (`--stop --drain`) stops only once the destination holds everything the
//! source has, and refuses while a source transaction is open.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use mirrorgate::mirror::verify::verify_partition;
use serde_json::Value;
use support::*;

const V: &str = "4.1.1";

fn create_topic(bootstrap: &str, topic: &str, partitions: u32) {
    let p = partitions.to_string();
    kafka_tool_ok(
        V,
        "topics",
        &[
            "--bootstrap-server",
            bootstrap,
            "--create",
            "--topic",
            topic,
            "--replication-factor",
            "1",
            "--partitions",
            &p,
        ],
        None,
    );
}

fn start_mirror(mg: &Mirrorgate, source: &Cluster, topic: &str) -> String {
    let mirror = unique_name("m");
    let cfg = mirror_config_file(source, "fetch.backoff.ms=200\n");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", topic]), "--start");
    mirror
}

fn describe(mg: &Mirrorgate, mirror: &str) -> Result<Vec<Value>, String> {
    let out = mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", mirror, "--json"]);
    if !out.status.success() {
        return Err(format!("--describe failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("--describe --json: {e}"))?;
    v.as_array().cloned().ok_or_else(|| format!("--describe --json is not an array: {v}"))
}

fn old_producer(bootstrap: &str, topic: &str, count: usize, extra: &[&str]) {
    let n = count.to_string();
    let mut args = vec!["--bootstrap-server", bootstrap, "--topic", topic, "--count", n.as_str()];
    args.extend_from_slice(extra);
    let out = ok(java_program(V, "OldProducer.java", &args), "OldProducer");
    assert_eq!(out.trim(), format!("delivered {count}"), "OldProducer {args:?}");
}

/// The destination refuses the source's records (its timestamp limit, set behind the mirror's
/// back, refuses 2001): the partition goes FAILED at once with INVALID_TIMESTAMP named, and
/// is not retried; the records before it are on the destination. (Old code: re-aligned for
/// ever, MIRRORING with no error.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_the_destination_refuses_fails_the_partition_naming_the_error() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("refused");
    create_topic(&source.bootstrap, &topic, 1);
    old_producer(&source.bootstrap, &topic, 10, &["--timestamp-start", "now", "--prefix", "fresh"]);
    let mirror = start_mirror(&mg, &source, &topic);
    eventually(Duration::from_secs(120), || {
        let d = describe(&mg, &mirror)?;
        match d.first() {
            Some(p) if p["state"] == "MIRRORING" && p["destinationOffset"] == 10 => Ok(()),
            _ => Err(format!("{d:?}")),
        }
    });
    // An operator (or a policy) narrows the destination topic's timestamp limit directly.
    kafka_tool_ok(
        V,
        "configs",
        &[
            "--bootstrap-server",
            &dest.bootstrap,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &topic,
            "--add-config",
            "message.timestamp.before.max.ms=3600000",
        ],
        None,
    );
    std::thread::sleep(Duration::from_secs(2));
    old_producer(&source.bootstrap, &topic, 5, &["--prefix", "old"]);
    let failed = eventually(Duration::from_secs(120), || {
        let d = describe(&mg, &mirror)?;
        match d.first() {
            Some(p) if p["state"] == "FAILED" => Ok(p.clone()),
            _ => Err(format!("not FAILED yet: {d:?}")),
        }
    });
    let message = failed["errorMessage"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("INVALID_TIMESTAMP") && message.contains("offset 10"), "{failed}");
    // Not retried: still FAILED a few seconds later, same attempt count.
    std::thread::sleep(Duration::from_secs(3));
    let again = describe(&mg, &mirror).unwrap();
    assert_eq!(again[0]["state"], "FAILED", "{again:?}");
    assert_eq!(again[0]["retryAttempt"], failed["retryAttempt"], "{again:?}");
    assert!(mg.log().contains("INVALID_TIMESTAMP"), "the log names the error");
}

/// The source goes away: while the copy loop retries, `--describe` shows its last error on a
/// MIRRORING partition; after the stall bound (10 attempts and 60 s without progress) the
/// partition is FAILED, retryable, and its retries count up; when the source is back the
/// partition mirrors again. (Old code: MIRRORING, lag 0 and no error throughout.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_outage_shows_the_last_error_then_failed_with_retries_then_heals() {
    let source = owned_cluster("source-outage", 1, V, &[]);
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("outage");
    create_topic(&source.bootstrap, &topic, 1);
    old_producer(&source.bootstrap, &topic, 20, &["--timestamp-start", "now"]);
    let mirror = start_mirror(&mg, &source, &topic);
    eventually(Duration::from_secs(120), || {
        let d = describe(&mg, &mirror)?;
        match d.first() {
            Some(p) if p["state"] == "MIRRORING" && p["destinationOffset"] == 20 => Ok(()),
            _ => Err(format!("{d:?}")),
        }
    });
    let kafka = repo().join("scripts/kafka.sh");
    let st = std::process::Command::new(&kafka).args(["stop-node", &source.name, "1"]).status().unwrap();
    assert!(st.success());
    let retrying = eventually(Duration::from_secs(60), || {
        let d = describe(&mg, &mirror)?;
        match d.first() {
            Some(p)
                if p["state"] == "MIRRORING"
                    && p["errorMessage"].as_str().is_some_and(|m| m.starts_with("retrying: ")) =>
            {
                Ok(p.clone())
            }
            _ => Err(format!("no retrying error yet: {d:?}")),
        }
    });
    eprintln!("while retrying: {retrying}");
    let failed = eventually(Duration::from_secs(180), || {
        let d = describe(&mg, &mirror)?;
        match d.first() {
            Some(p) if p["state"] == "FAILED" || p["retryAttempt"].as_i64().unwrap_or(0) > 0 => Ok(p.clone()),
            _ => Err(format!("not FAILED yet: {d:?}")),
        }
    });
    eprintln!("after the stall bound: {failed}");
    let log = mg.log();
    assert!(log.contains("no progress at source offset 20"), "the log says why it failed");
    let st = std::process::Command::new(&kafka).args(["start-node", &source.name, "1"]).status().unwrap();
    assert!(st.success());
    old_producer(&source.bootstrap, &topic, 5, &["--timestamp-start", "now", "--prefix", "after"]);
    eventually(Duration::from_secs(300), || {
        let d = describe(&mg, &mirror)?;
        match d.first() {
            Some(p) if p["state"] == "MIRRORING" && p["destinationOffset"] == 25 => Ok(()),
            _ => Err(format!("{d:?}")),
        }
    });
}

/// `--stop --drain` right after `--start` of a topic with 30,000 records: returns only when
/// the destination ends where the source ends, then the topic is STOPPED. With a transaction
/// left open on the source, `--drain` gives up (LAG-HW stays above 0) and stops nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planned_failover_waits_for_the_copy_and_refuses_an_open_transaction() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("drain");
    create_topic(&source.bootstrap, &topic, 2);
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &topic,
            "--count",
            "30000",
            "--prefix",
            "d",
        ]),
        "produce",
    );
    let mirror = start_mirror(&mg, &source, &topic);
    let out = ok(
        mirrors_cli(&mg.bootstrap, &["--stop", "--drain", "120", "--mirror", &mirror, "--topics", &topic]),
        "--stop --drain",
    );
    assert!(out.contains("Stopped mirroring 1 topic(s)"), "{out}");
    let d = describe(&mg, &mirror).unwrap();
    let dest_total: i64 = d.iter().map(|p| p["destinationOffset"].as_i64().unwrap()).sum();
    assert_eq!(dest_total, 30_000, "everything copied before the stop: {d:?}");
    eventually(Duration::from_secs(60), || {
        let d = describe(&mg, &mirror)?;
        if d.iter().all(|p| p["state"] == "STOPPED") {
            Ok(())
        } else {
            Err(format!("{d:?}"))
        }
    });

    // An open transaction on the source: --drain waits for it and gives up.
    let topic = unique_name("drain-open");
    create_topic(&source.bootstrap, &topic, 1);
    let mirror = start_mirror(&mg, &source, &topic);
    let cp = String::from_utf8(
        Command::new(repo().join("scripts/kafka.sh")).args(["classpath", V]).output().unwrap().stdout,
    )
    .unwrap();
    let mut open = Command::new("java")
        .args(["-Xmx256m", "-cp", cp.trim()])
        .arg(repo().join("tests/java/OpenTxn.java"))
        .args([
            "--bootstrap-server",
            &source.bootstrap,
            "--topic",
            &topic,
            "--transactional-id",
            &unique_name("open"),
            "--values",
            "o1,o2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(open.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "OPEN 2");
    let out = mirrors_cli(&mg.bootstrap, &["--stop", "--drain", "8", "--mirror", &mirror, "--topics", &topic]);
    let _ = open.kill();
    let _ = open.wait();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "--drain must give up while a transaction is open: {stderr}");
    assert!(stderr.contains("--drain gave up") && stderr.contains("lag-hw 2"), "{stderr}");
    let d = describe(&mg, &mirror).unwrap();
    assert!(d.iter().all(|p| p["state"] == "MIRRORING"), "nothing stopped: {d:?}");
}

/// Failover in the disaster case (issue 9, item 5): mirrorgate restarts while the source is
/// down, so nothing of the copy is in memory, and the operator stops the topic. The last
/// mirrored offset comes from the destination log; records written on the destination after
/// the failover are then caught by the failback check, which names them. (Old code: the last
/// mirrored offset stayed unknown and the failback copied on top of the foreign records.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_with_the_source_down_records_the_last_offset_from_the_destination_log() {
    let source = owned_cluster("source-disaster", 1, V, &[]);
    let dest = cluster("dest");
    let state = unique_name("__mirror_state-disaster");
    let opts = || MirrorgateOptions { state_topic: Some(&state), ..Default::default() };
    let mg = Mirrorgate::start_with(&dest, opts());
    let topic = unique_name("disaster");
    create_topic(&source.bootstrap, &topic, 1);
    old_producer(&source.bootstrap, &topic, 20, &["--timestamp-start", "now"]);
    let mirror = start_mirror(&mg, &source, &topic);
    eventually(Duration::from_secs(120), || {
        let d = describe(&mg, &mirror)?;
        match d.first() {
            Some(p) if p["destinationOffset"] == 20 => Ok(()),
            _ => Err(format!("{d:?}")),
        }
    });
    // Disaster: the source goes away and mirrorgate restarts.
    let kafka = repo().join("scripts/kafka.sh");
    assert!(Command::new(&kafka).args(["stop-node", &source.name, "1"]).status().unwrap().success());
    drop(mg);
    let mg = Mirrorgate::start_with(&dest, opts());
    ok(mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &topic]), "--stop (failover)");
    eventually(Duration::from_secs(60), || {
        let d = describe(&mg, &mirror)?;
        if d.iter().all(|p| p["state"] == "STOPPED") {
            Ok(())
        } else {
            Err(format!("{d:?}"))
        }
    });
    // The destination takes writes after the failover.
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &mg.bootstrap,
            "--topic",
            &topic,
            "--count",
            "3",
            "--prefix",
            "after",
        ]),
        "produce after failover",
    );
    // The source is back; a failback must see the 3 destination records.
    assert!(Command::new(&kafka).args(["start-node", &source.name, "1"]).status().unwrap().success());
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start (failback)");
    let failed = eventually(Duration::from_secs(120), || {
        let d = describe(&mg, &mirror)?;
        match d.first() {
            Some(p) if p["state"] == "FAILED" => Ok(p.clone()),
            _ => Err(format!("{d:?}")),
        }
    });
    let message = failed["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("mirroring stopped after source offset 19") && message.contains("3 offset(s)"),
        "{failed}"
    );
}

/// Failover with the source down while a destination transaction of mirrorgate's holds
/// aborted source records (issue 33 item 4): a process exits (as after kill -9) right after its
/// first append into the slot transaction, before the source's ABORT marker; the source goes
/// away; the next process cannot resume the slot (mapping it back needs the source) and the
/// operator stops the topic. The stop aborts the slot with InitProducerId, so the destination's
/// last stable offset reaches its log end at once and a read_committed consumer of the
/// failed-over topic sees the new writes. (Old code: the slot stayed open until the
/// coordinator's timeout, 15 minutes, and read_committed consumers saw nothing new.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_with_the_source_down_ends_an_open_slot_transaction() {
    let source = owned_cluster("source-slot", 1, V, &[]);
    let dest = cluster("dest");
    let state = unique_name("__mirror_state-slot-failover");
    let topic = unique_name("slotfailover");
    create_topic(&source.bootstrap, &topic, 1);
    old_producer(&source.bootstrap, &topic, 5, &["--timestamp-start", "now"]);
    txn_producer(V, &source.bootstrap, &topic, &["--abort", "x-a1,x-a2"]);
    let fp = "slot-append:1";
    let mut mg = Mirrorgate::start_with(
        &dest,
        MirrorgateOptions { state_topic: Some(&state), env: &[("MIRRORGATE_FAILPOINT", fp)], ..Default::default() },
    );
    let mirror = start_mirror(&mg, &source, &topic);
    eventually(Duration::from_secs(120), || if mg.is_running() { Err("still running".to_string()) } else { Ok(()) });
    assert!(mg.log().contains(&format!("MIRRORGATE_FAILPOINT {fp} reached")), "{}", tail(&mg.log(), 30));
    drop(mg);
    let dst = plaintext_client(&dest.bootstrap);
    let dest_end = block(dst.list_offsets(&topic, 0, -1)).unwrap();
    assert!((6..=7).contains(&dest_end), "5 records and the aborted ones copied: {dest_end}");
    let slot = format!("mirrorgate.{}.{mirror}.{topic}.0.a0", mirror.len());
    let out = kafka_tool(
        V,
        "transactions",
        &["--bootstrap-server", &dest.bootstrap, "describe", "--transactional-id", &slot],
        None,
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Ongoing"), "the slot transaction is left open: {out:?}");

    // Disaster: the source goes away; a new process; failover.
    let kafka = repo().join("scripts/kafka.sh");
    assert!(Command::new(&kafka).args(["stop-node", &source.name, "1"]).status().unwrap().success());
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { state_topic: Some(&state), ..Default::default() });
    ok(mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &topic]), "--stop (failover)");
    eventually(Duration::from_secs(60), || {
        let d = describe(&mg, &mirror)?;
        if d.iter().all(|p| p["state"] == "STOPPED") {
            Ok(())
        } else {
            Err(format!("{d:?}"))
        }
    });
    let stopped = std::time::Instant::now();
    // The application writes to the failed-over topic; a read_committed consumer reads the 5
    // committed records and the 3 new ones (not the aborted ones) within seconds.
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &dest.bootstrap,
            "--topic",
            &topic,
            "--count",
            "3",
            "--prefix",
            "after",
        ]),
        "produce after failover",
    );
    let group = unique_name("after");
    let out = python_client(&[
        "consume",
        "--bootstrap",
        &dest.bootstrap,
        "--topic",
        &topic,
        "--group",
        &group,
        "--count",
        "8",
        "--timeout",
        "15",
        "--isolation",
        "read_committed",
        "--no-commit",
    ]);
    let values: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["value"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        values.len(),
        8,
        "read_committed after the failover: {values:?} ({:?} after STOPPED; the destination's last stable offset is held by an open transaction of mirrorgate's?)\n{}",
        stopped.elapsed(),
        tail(&mg.log(), 20)
    );
    assert!(values[5..].iter().all(|v| v.starts_with("after")), "{values:?}");
    assert!(!values.iter().any(|v| v.starts_with("x-")), "aborted records read at read_committed: {values:?}");
    assert!(mg.log().contains("mirrorgate's open destination transaction aborted"), "{}", tail(&mg.log(), 20));
}

fn delete_and_recreate(dest: &Cluster, topic: &str) {
    kafka_tool_ok(V, "topics", &["--bootstrap-server", &dest.bootstrap, "--delete", "--topic", topic], None);
    eventually(Duration::from_secs(60), || {
        let out = kafka_tool(
            V,
            "topics",
            &[
                "--bootstrap-server",
                &dest.bootstrap,
                "--create",
                "--topic",
                topic,
                "--partitions",
                "1",
                "--replication-factor",
                "1",
            ],
            None,
        );
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).to_string())
        }
    });
}

/// The destination topic deleted and re-created directly on the brokers (issue 9, item 12):
/// empty, the partition re-seeds from the source and the mirror's topic configs are set
/// again; with records written into it meanwhile, the partition goes FAILED naming the
/// re-creation. (Old code: the empty case kept the old offset map and never re-applied the
/// configs; the written case copied on top of the foreign records.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_topic_recreated_behind_the_mirror_reseeds_when_empty_and_fails_when_written() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("recreated");
    create_topic(&source.bootstrap, &topic, 1);
    old_producer(&source.bootstrap, &topic, 10, &["--timestamp-start", "now"]);
    let mirror = start_mirror(&mg, &source, &topic);
    let wait_for = |end: i64| {
        eventually(Duration::from_secs(180), || {
            let d = describe(&mg, &mirror)?;
            match d.first() {
                Some(p) if p["state"] == "MIRRORING" && p["destinationOffset"] == end => Ok(()),
                _ => Err(format!("{d:?}")),
            }
        })
    };
    wait_for(10);
    delete_and_recreate(&dest, &topic);
    old_producer(&source.bootstrap, &topic, 2, &["--timestamp-start", "now", "--prefix", "more"]);
    // Re-seeded: all 12 source records again, at their offsets, with retention off.
    wait_for(12);
    let configs = kafka_tool_ok(
        V,
        "configs",
        &["--bootstrap-server", &dest.bootstrap, "--describe", "--entity-type", "topics", "--entity-name", &topic],
        None,
    );
    assert!(configs.contains("retention.ms=-1"), "{configs}");
    let verified = ok(mirrors_cli(&mg.bootstrap, &["--verify", "--mirror", &mirror]), "--verify");
    assert!(verified.contains("1 identical, 0 different"), "{verified}");
    assert!(mg.log().contains("re-created behind the mirror"), "the log says what happened");

    // Re-created again, and written to directly before the mirror notices.
    delete_and_recreate(&dest, &topic);
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &dest.bootstrap,
            "--topic",
            &topic,
            "--count",
            "2",
            "--prefix",
            "foreign",
        ]),
        "produce directly",
    );
    old_producer(&source.bootstrap, &topic, 1, &["--timestamp-start", "now", "--prefix", "last"]);
    let failed = eventually(Duration::from_secs(180), || {
        let d = describe(&mg, &mirror)?;
        match d.first() {
            Some(p) if p["state"] == "FAILED" => Ok(p.clone()),
            _ => Err(format!("{d:?}")),
        }
    });
    let message = failed["errorMessage"].as_str().unwrap_or_default();
    assert!(message.contains("re-created") || message.contains("something else writes"), "{failed}");
}

/// Lag is read live (issue 9, item 11): while a topic is PAUSED nothing fetches, yet
/// `--describe` shows the records produced since as lag; a transaction left open on the source
/// makes the lag against the high watermark grow while the lag against the LSO stays put; after
/// a resume both are current. (Old code: a PAUSED partition kept the figures of its last Fetch,
/// lag 0.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_is_read_live_while_paused_and_with_an_open_transaction() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("live-lag");
    create_topic(&source.bootstrap, &topic, 1);
    old_producer(&source.bootstrap, &topic, 10, &["--timestamp-start", "now"]);
    let mirror = start_mirror(&mg, &source, &topic);
    let figures = |want: (&str, i64, i64, i64)| {
        eventually(Duration::from_secs(90), || {
            let d = describe(&mg, &mirror)?;
            let p = d.first().ok_or("no partition")?;
            let got = (
                p["state"].as_str().unwrap_or_default(),
                p["destinationOffset"].as_i64().unwrap_or(-2),
                p["lag"].as_i64().unwrap_or(-2),
                p["lagHighWatermark"].as_i64().unwrap_or(-2),
            );
            if got == want {
                Ok(())
            } else {
                Err(format!("want (state, destinationOffset, lag, lagHighWatermark) {want:?}, got {got:?}: {p}"))
            }
        })
    };
    figures(("MIRRORING", 10, 0, 0));

    ok(mirrors_cli(&mg.bootstrap, &["--pause", "--mirror", &mirror, "--topics", &topic]), "--pause");
    figures(("PAUSED", 10, 0, 0));
    old_producer(&source.bootstrap, &topic, 15, &["--timestamp-start", "now"]);
    figures(("PAUSED", 10, 15, 15));

    // A transaction left open (3 records at 25..27): the LSO stays at 25.
    let cp = String::from_utf8(
        Command::new(repo().join("scripts/kafka.sh")).args(["classpath", V]).output().unwrap().stdout,
    )
    .unwrap();
    let mut open = Command::new("java")
        .args(["-Xmx256m", "-cp", cp.trim()])
        .arg(repo().join("tests/java/OpenTxn.java"))
        .args([
            "--bootstrap-server",
            &source.bootstrap,
            "--topic",
            &topic,
            "--transactional-id",
            &unique_name("open"),
            "--values",
            "o1,o2,o3",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(open.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "OPEN 3");
    figures(("PAUSED", 10, 15, 18));

    // Resumed: the copy stops at the LSO; both figures are current.
    ok(mirrors_cli(&mg.bootstrap, &["--resume", "--mirror", &mirror, "--topics", &topic]), "--resume");
    figures(("MIRRORING", 25, 0, 3));
    // Records after the open transaction wait behind it: only the high-watermark lag grows.
    old_producer(&source.bootstrap, &topic, 5, &["--timestamp-start", "now"]);
    figures(("MIRRORING", 25, 0, 8));
    let _ = open.kill();
    let _ = open.wait();
}

/// One source record at source offset `i` of `topic` as a batch of its own, timestamp
/// `base_ms + i`, written by the producer `producer` (id, epoch) with sequence `i` (as the
/// mirror's data producer writes it: sequence = destination offset), or without a producer
/// (`None`, as a plain producer). (Timestamps must be recent: retention deletes older ones.)
fn record_batch(topic: &str, base_ms: i64, i: i64, producer: Option<(i64, i16)>) -> bytes::Bytes {
    use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let (producer_id, producer_epoch, sequence) = producer.map_or((-1, -1, -1), |(id, e)| (id, e, i as i32));
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: base_ms + i,
        key: Some(bytes::Bytes::from(format!("{topic}-key-{i}"))),
        value: Some(bytes::Bytes::from(format!("{topic}-value-{i}"))),
        headers: Default::default(),
    };
    let mut out = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        &[record],
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    out.freeze()
}

/// A single instance meets an append of its own earlier life (issue 33 item 5): appends with
/// the mirror partition's producer id land on the destination after the copy loop aligned —
/// what a Produce of a mirrorgate killed during a network cut does when the cut heals after
/// the restart — so the loop's next append is refused as OUT_OF_ORDER_SEQUENCE_NUMBER.
/// Sequence = destination offset let those appends land only where they belong, with the same
/// records: the loop re-aligns from the destination log end and goes on, and the copy stays
/// identical. Staged without timing: the late appends (six single-record batches, one more
/// than the broker's window of cached batches, so that the loop's append of the first is no
/// duplicate) land before the source has the records. (Old code: FAILED for good, "out of
/// sequence; something else writes to this mirror partition"; only several instances
/// re-aligned.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_realigns_on_its_own_late_append() {
    use mirrorgate::client::cluster::Acks;
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("late-append");
    create_topic(&source.bootstrap, &topic, 1);
    let src = plaintext_client(&source.bootstrap);
    let dst = plaintext_client(&dest.bootstrap);
    let base_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    for i in 0..10 {
        assert_eq!(src.produce(&topic, 0, record_batch(&topic, base_ms, i, None), Acks::All).await.unwrap(), i);
    }
    let mirror = start_mirror(&mg, &source, &topic);
    let at = |end: i64| {
        eventually(Duration::from_secs(120), || {
            let d = describe(&mg, &mirror)?;
            match d.first() {
                Some(p) if p["state"] == "MIRRORING" && p["destinationOffset"] == end => Ok(()),
                _ => {
                    let log = mg.log();
                    let copy: Vec<&str> = log.lines().filter(|l| l.contains("dataplane")).collect();
                    Err(format!("{d:?}\n{}", tail(&copy.join("\n"), 30)))
                }
            }
        })
    };
    at(10);
    // The mirror's data producer on the destination partition, its last sequence 9 (offset 9).
    let producers = dst.describe_producers(&topic, 0).await.unwrap();
    let [mine] = producers.as_slice() else { panic!("one producer expected on the destination: {producers:?}") };
    assert_eq!(mine.last_sequence, 9, "{producers:?}");
    // The late appends: source offsets 10..16 as the mirror writes them, before the source
    // has them (the copy loop is idle, waiting for source records).
    for i in 10..16 {
        let batch = record_batch(&topic, base_ms, i, Some((mine.producer_id, mine.producer_epoch)));
        assert_eq!(dst.produce(&topic, 0, batch, Acks::All).await.unwrap(), i, "late append {i}");
    }
    for i in 10..20 {
        assert_eq!(src.produce(&topic, 0, record_batch(&topic, base_ms, i, None), Acks::All).await.unwrap(), i);
    }
    at(20);
    let report = verify_partition(&src, &dst, &topic, 0, &[], None).await.unwrap();
    assert_eq!(report.records, 20, "{report:?}");
    let log = mg.log();
    assert!(log.contains("out of sequence"), "the late appends were met: {}", tail(&log, 30));
    let d = describe(&mg, &mirror).unwrap();
    assert_eq!((d[0]["state"].as_str(), d[0]["destinationOffset"].as_i64()), (Some("MIRRORING"), Some(20)), "{d:?}");
}
