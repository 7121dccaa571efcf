//! The data plane under trouble, against real Kafka 4.1.1 clusters: a source broker restart
//! (3-node source), old history whose producer state the destination expires while the
//! connections to the destination drop (a second mirrorgate in front of the destination,
//! killed and restarted), a source partition whose log diverges under the mirror (unclean
//! leader election), and compacted sources (holes between batches, holes inside batches,
//! empty batches) mirrored into a compacted destination.
//!
//! Tests run one at a time (`SERIAL`): several of them stop brokers and the test machine may
//! have few cores; broker session timeouts are seconds.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::mirror::verify::{verify_partition, VerifyReport};
use mirrorgate::wire::batch::{Batch, BatchIter};
use serde_json::Value;
use support::*;

const V: &str = "4.1.1";

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn create_topic(bootstrap: &str, topic: &str, partitions: u32, rf: u32, configs: &[&str]) {
    let (p, r) = (partitions.to_string(), rf.to_string());
    let mut args = vec!["--bootstrap-server", bootstrap, "--create", "--topic", topic];
    args.extend(["--partitions", p.as_str(), "--replication-factor", r.as_str()]);
    for c in configs {
        args.extend(["--config", c]);
    }
    kafka_tool_ok(V, "topics", &args, None);
}

fn client(bootstrap: &str) -> ClusterClient {
    block(ClusterClient::connect(ClusterOptions::new(bootstrap.split(',').map(String::from).collect()))).unwrap()
}

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// `scripts/kafka.sh ARGS...` with a timeout and extra environment; returns the output.
fn kafka_sh(args: &[&str], env: &[(&str, &str)], timeout: Duration) -> std::process::Output {
    let mut cmd = Command::new(repo().join("scripts/kafka.sh"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(cmd, None, timeout)
}

fn stop_node(c: &Cluster, node: u32) {
    let out = kafka_sh(&["stop-node", &c.name, &node.to_string()], &[], Duration::from_secs(60));
    ok(out, "stop-node");
}

/// Starts node `node` again and waits until it answers. `kafka.sh start-node` waits for the
/// whole cluster to be live; with another node still down it cannot, so this waits itself.
fn start_node(c: &Cluster, node: u32) {
    let out = kafka_sh(
        &["start-node", &c.name, &node.to_string()],
        &[("MIRRORGATE_KAFKA_START_TIMEOUT", "60")],
        Duration::from_secs(120),
    );
    if !out.status.success() {
        let status = kafka_sh(&["status", &c.name], &[], Duration::from_secs(30));
        let text = String::from_utf8_lossy(&status.stdout).into_owned();
        assert!(
            text.lines().any(|l| l.starts_with(&format!("node-{node} ")) && l.contains(" up ")),
            "node {node} of {} did not come back: {text}\n{}",
            c.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `(leader, isr)` of `topic`-`partition` from the topics tool `--describe`.
fn describe_partition(bootstrap: &str, topic: &str, partition: i32) -> Result<(i32, Vec<i32>), String> {
    let out = kafka_tool(V, "topics", &["--bootstrap-server", bootstrap, "--describe", "--topic", topic], None);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains(&format!("\tPartition: {partition}\t")))
        .ok_or_else(|| format!("no partition {partition} in: {text} {}", String::from_utf8_lossy(&out.stderr)))?;
    let field = |name: &str| -> String {
        line.split('\t').find_map(|f| f.strip_prefix(&format!("{name}: "))).unwrap_or("").trim().to_string()
    };
    let leader = field("Leader").parse::<i32>().map_err(|e| format!("{line}: {e}"))?;
    let isr = field("Isr").split(',').filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    Ok((leader, isr))
}

/// Creates a mirror on `mg` (extra mirror configs in `extra`) and starts `topics`.
fn start_mirror(mg: &Mirrorgate, source: &Cluster, topics: &[&str], extra: &str) -> String {
    let mirror = unique_name("m");
    let cfg = mirror_config_file(source, extra);
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topics.join(",")]), "--start");
    mirror
}

fn describe_json(mg: &Mirrorgate, mirror: &str) -> Vec<Value> {
    let out = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", mirror, "--json"]), "--describe --json");
    serde_json::from_str::<Value>(&out).unwrap().as_array().unwrap().clone()
}

/// Panics at once with the error message when a partition of `mirror` is FAILED.
/// A `--describe` that fails (mirrorgate briefly unreachable, e.g. its destination is down)
/// is reported on stderr and checked again at the next call; output that is not a JSON array
/// of rows is a failure.
fn no_failed_partition(mg: &Mirrorgate, mirror: &str) {
    let out = mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", mirror, "--json"]);
    if !out.status.success() {
        eprintln!("--describe failed (checked again later): {}", String::from_utf8_lossy(&out.stderr).trim());
        return;
    }
    let rows = match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(Value::Array(rows)) if !rows.is_empty() => rows,
        other => {
            panic!("--describe --json: not a list of partitions: {other:?}: {}", String::from_utf8_lossy(&out.stdout))
        }
    };
    if let Some(r) = rows.iter().find(|r| r["state"] == "FAILED") {
        panic!("mirror partition {}-{} FAILED: {}\nall rows: {rows:#?}", r["topic"], r["partition"], r["errorMessage"]);
    }
}

/// Waits until every partition of `topic` verifies; fails fast when a partition is FAILED.
fn wait_identical(
    mg: &Mirrorgate,
    mirror: &str,
    src: &ClusterClient,
    dst: &ClusterClient,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Vec<VerifyReport> {
    let mut polls = 0u32;
    eventually(timeout, || {
        polls += 1;
        if polls % 10 == 1 {
            no_failed_partition(mg, mirror);
        }
        (0..partitions).map(|p| block(verify_partition(src, dst, topic, p, &[], None))).collect::<Result<Vec<_>, _>>()
    })
}

/// (partition, offset, key, value) of every record a librdkafka consumer sees, sorted.
fn consume_all(bootstrap: &str, topic: &str, count: usize) -> Vec<(i64, i64, String, String)> {
    let group = unique_name("check");
    let n = count.to_string();
    let out = ok(
        python_client(&[
            "consume",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--group",
            &group,
            "--count",
            &n,
            "--timeout",
            "90",
            "--isolation",
            "read_committed",
            "--no-commit",
        ]),
        "consume",
    );
    let mut recs: Vec<_> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            (
                v["partition"].as_i64().unwrap(),
                v["offset"].as_i64().unwrap(),
                v["key"].as_str().unwrap_or("").to_string(),
                v["value"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    recs.sort();
    recs
}

/// Runs `tests/java/OldProducer.java`; panics unless every record was delivered.
fn old_producer(bootstrap: &str, topic: &str, count: usize, extra: &[&str]) {
    let n = count.to_string();
    let mut args = vec!["--bootstrap-server", bootstrap, "--topic", topic, "--count", n.as_str()];
    args.extend_from_slice(extra);
    let out = ok(java_program(V, "OldProducer.java", &args), "OldProducer");
    assert_eq!(out.trim(), format!("delivered {count}"), "OldProducer {args:?}");
}

// ---------------------------------------------------------------------------------------
// 1. Source broker restart
// ---------------------------------------------------------------------------------------

/// A 3-node source (RF 3, min.insync 2) written continuously by an idempotent producer; the
/// leader of partition 0 is stopped (controlled shutdown) and started again, twice. The
/// mirror resumes by itself; every partition verifies identical; every produced record is on
/// the destination exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_broker_restart_during_mirroring_resumes_by_itself() {
    let _serial = serial();
    let t0 = Instant::now();
    let source = owned_cluster("source3", 3, V, &[]);
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("restart");
    create_topic(&source.bootstrap, &topic, 3, 3, &["min.insync.replicas=2"]);
    let produce = |prefix: &str, count: usize| {
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &topic,
            "--count",
            &count.to_string(),
            "--prefix",
            prefix,
            "--idempotent",
            "--timeout",
            "90",
        ])
    };
    ok(produce("first", 3000), "produce");
    let mirror = start_mirror(&mg, &source, &[&topic], "");

    // A producer keeps writing 500-record rounds until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, bootstrap, topic) = (stop.clone(), source.bootstrap.clone(), topic.clone());
        std::thread::spawn(move || {
            let mut rounds = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let out = python_client(&[
                    "produce",
                    "--bootstrap",
                    &bootstrap,
                    "--topic",
                    &topic,
                    "--count",
                    "500",
                    "--prefix",
                    &format!("w{rounds}"),
                    "--idempotent",
                    "--timeout",
                    "90",
                ]);
                ok(out, &format!("continuous produce round {rounds}"));
                rounds += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            rounds
        })
    };
    eventually(Duration::from_secs(120), || {
        let end = block(dst.list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        if end > 0 {
            Ok(())
        } else {
            Err("nothing mirrored yet".into())
        }
    });
    let mut stopped = Vec::new();
    for round in 0..2 {
        let (leader, _) = eventually(Duration::from_secs(120), || describe_partition(&source.bootstrap, &topic, 0));
        assert!(leader > 0, "partition 0 has no leader before round {round}");
        let t = Instant::now();
        stop_node(&source, leader as u32);
        stopped.push(leader);
        // The other brokers take over; the mirror must follow the new leader.
        let survivors: Vec<String> = source
            .bootstrap
            .split(',')
            .enumerate()
            .filter(|(i, _)| *i as i32 + 1 != leader)
            .map(|(_, a)| a.to_string())
            .collect();
        let (new_leader, _) = eventually(Duration::from_secs(120), || {
            let (l, isr) = describe_partition(&survivors.join(","), &topic, 0)?;
            if l > 0 && l != leader {
                Ok((l, isr))
            } else {
                Err(format!("leader {l}"))
            }
        });
        eprintln!("round {round}: stopped node {leader} ({:?}); partition 0 led by {new_leader}", t.elapsed());
        std::thread::sleep(Duration::from_secs(5));
        start_node(&source, leader as u32);
        // Back in the ISR of partition 0 (so that the next round never leaves the partition
        // without an in-sync replica to elect).
        eventually(Duration::from_secs(120), || {
            let (l, isr) = describe_partition(&source.bootstrap, &topic, 0)?;
            if l > 0 && isr.len() == 3 {
                Ok(())
            } else {
                Err(format!("leader {l}, isr {isr:?}"))
            }
        });
        eprintln!("round {round}: node {leader} back in sync after {:?}", t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().expect("writer thread");
    let total = 3000 + 500 * rounds;
    let reports = wait_identical(&mg, &mirror, &src, &dst, &topic, 3, Duration::from_secs(180));
    assert_eq!(reports.iter().map(|r| r.records).sum::<i64>(), total as i64, "{reports:?}");
    // Every produced record exactly once through mirrorgate.
    let via = consume_all(&mg.bootstrap, &topic, total);
    let values: HashSet<&str> = via.iter().map(|r| r.3.as_str()).collect();
    assert_eq!(values.len(), total, "duplicates on the destination");
    let mut want: HashSet<String> = (0..3000).map(|i| format!("first-{i}")).collect();
    for r in 0..rounds {
        want.extend((0..500).map(|i| format!("w{r}-{i}")));
    }
    assert!(values.iter().all(|v| want.contains(*v)) && values.len() == want.len(), "records differ");
    // (A leader rebalance after the restarts may send a partition through LOG_ALIGNMENT.)
    eventually(Duration::from_secs(120), || {
        let rows = describe_json(&mg, &mirror);
        (rows.len() == 3 && rows.iter().all(|r| r["state"] == "MIRRORING")).then_some(()).ok_or(format!("{rows:#?}"))
    });
    let restarts = mg.log().matches("re-aligning mirror partition").count();
    eprintln!(
        "source restart: {total} records ({rounds} rounds while stopping nodes {stopped:?}), {restarts} re-alignments, {:?}",
        t0.elapsed()
    );
}

// ---------------------------------------------------------------------------------------
// 2. Old history, producer-id expiry, destination connections dropping
// ---------------------------------------------------------------------------------------

/// Source records stamped in 2001 (older than the destination's `producer.id.expiration.ms`
/// of 2 s, so the destination forgets the mirror's producer between appends), copied while
/// the mirroring instance reaches the destination through a second, plain mirrorgate that is
/// killed (SIGKILL) and restarted on the same ports four times during the copy, each kill checked
/// to land mid-copy. No duplicate, no misplaced batch, nothing beyond the source's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_history_with_producer_expiry_while_destination_connections_drop() {
    const PER_RUN: usize = 40_000;
    let _serial = serial();
    let t0 = Instant::now();
    let source = cluster("source");
    let dest = cluster_with(
        "dest-expiry",
        1,
        V,
        &["producer.id.expiration.ms=2000", "producer.id.expiration.check.interval.ms=500"],
    );
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("old");
    create_topic(&source.bootstrap, &topic, 3, 1, &["retention.ms=-1"]);
    // Small batches: many appends, so that the kills land in the middle of the copy.
    let small = ["--partitions", "3", "--prop", "batch.size=1024", "--prop", "linger.ms=0"];
    let mut args = small.to_vec();
    args.extend(["--prefix", "old"]);
    old_producer(&source.bootstrap, &topic, PER_RUN, &args);

    let front_state = unique_name("__mirror_state-front");
    // The front instance advertises its mirror RPCs too; the mirroring instance refuses a
    // destination that already uses its api keys (DESIGN §3), so the front's move away.
    let front_keys = "mirror_api_keys:\n  create_cluster_mirror: 200\n  start_mirror_topics: 201\n  stop_mirror_topics: 202\n  list_cluster_mirrors: 203\n  describe_cluster_mirrors: 204\n  pause_mirror_topics: 205\n  resume_mirror_topics: 206\n  delete_cluster_mirror: 207\n";
    let front_opts = || MirrorgateOptions {
        state_topic: Some(&front_state),
        admin: false,
        extra_yaml: front_keys,
        ..Default::default()
    };
    let front_port = free_port_range(12);
    let start_front = || {
        Mirrorgate::start_in_front_of(
            &dest.bootstrap,
            FrontOptions { first_port: Some(front_port), destination_yaml: "", ..FrontOptions::default() },
            front_opts(),
        )
    };
    let mut front = start_front();
    let mg = Mirrorgate::start_in_front_of(
        &front.bootstrap,
        FrontOptions { first_port: None, destination_yaml: "  request_timeout_ms: 5000\n", ..FrontOptions::default() },
        MirrorgateOptions::default(),
    );
    // Batches appended as they are (no merging): the copy must take enough appends for each
    // kill to land mid-copy; merged, the one-record batches go over in a few appends.
    let mirror = start_mirror(&mg, &source, &[&topic], "mirror.coalesce.max.bytes=0\n");

    // More old history arrives while the copy runs.
    let writer = {
        let (bootstrap, topic) = (source.bootstrap.clone(), topic.clone());
        let small: Vec<String> = small.iter().map(|s| s.to_string()).collect();
        std::thread::spawn(move || {
            let mut args: Vec<&str> = small.iter().map(String::as_str).collect();
            args.extend(["--prefix", "later", "--timestamp-start", "978400000000"]);
            old_producer(&bootstrap, &topic, PER_RUN, &args);
        })
    };
    let dest_total = || -> i64 { (0..3).map(|p| block(dst.list_offsets(&topic, p, -1)).unwrap_or(0)).sum() };
    let source_total = || -> i64 { (0..3).map(|p| block(src.list_offsets(&topic, p, -1)).unwrap_or(0)).sum() };
    const KILLS: usize = 4;
    let mut seen = Vec::new();
    for kill in 0..KILLS {
        let before = dest_total();
        // Kill as soon as the copy makes progress (the drop lands mid-copy).
        let at = eventually(Duration::from_secs(120), || {
            let now = dest_total();
            if now > before {
                Ok(now)
            } else {
                Err(format!("destination stuck at {now} offsets"))
            }
        });
        drop(front); // SIGKILL: the mirror's destination connections drop mid-request
        let (after, source_end) = (dest_total(), source_total());
        eprintln!(
            "kill {kill}: front proxy killed at {at} destination offsets ({after} after the kill, source end {source_end})"
        );
        assert!(
            before < after && after < source_end,
            "kill {kill} did not land mid-copy: destination {before} before, {after} after the kill, source end {source_end}"
        );
        seen.push(after);
        std::thread::sleep(Duration::from_millis(1000));
        front = start_front();
    }
    assert_eq!(seen.len(), KILLS, "kills at {seen:?}");
    writer.join().expect("writer");
    let reports = wait_identical(&mg, &mirror, &src, &dst, &topic, 3, Duration::from_secs(240));
    assert_eq!(reports.iter().map(|r| r.records).sum::<i64>(), 2 * PER_RUN as i64, "{reports:?}");
    // Same offsets as the source: identical (delta 0), nothing skipped.
    for (p, r) in reports.iter().enumerate() {
        assert_eq!(r.destination_end, r.source_end, "partition {p}: {r:?}");
        assert_eq!(r.skipped_offsets, 0, "partition {p}: {r:?}");
    }
    // Nothing beyond the source's end on the destination (verify refuses a longer
    // destination; the log ends, read directly, say it again).
    for p in 0..3 {
        let ends = (block(dst.list_offsets(&topic, p, -1)).unwrap(), block(src.list_offsets(&topic, p, -1)).unwrap());
        assert_eq!(ends.0, ends.1, "partition {p}: destination end, source end");
    }
    let via = consume_all(&mg.bootstrap, &topic, 2 * PER_RUN);
    let values: HashSet<&str> = via.iter().map(|r| r.3.as_str()).collect();
    assert_eq!(values.len(), 2 * PER_RUN, "no duplicate, nothing missing");
    let on_source = consume_all(&source.bootstrap, &topic, 2 * PER_RUN);
    assert!(on_source == via, "records or offsets differ between source and destination");
    let ambiguous = mg.log().matches("ambiguous append").count();
    eprintln!(
        "old history: kills at {seen:?} destination offsets, {ambiguous} ambiguous appends logged, {:?}",
        t0.elapsed()
    );
}

// ---------------------------------------------------------------------------------------
// 3. Divergence (unclean leader election)
// ---------------------------------------------------------------------------------------

/// The source partition's log diverges under the mirror: RF 2 on nodes 1 (leader) and 2,
/// min.insync 1, unclean election allowed, acks=1. Node 2 stops; node 1 takes 50 more records
/// which the mirror copies (it stands at 150); node 1 stops; node 2 starts and is elected
/// uncleanly (its log ends at 100, new leader epoch); 50 + 100 different records are written
/// (a batch starts at 150). The mirror must
/// put the partition in FAILED naming the divergence and must not copy any of the new records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diverged_source_log_fails_the_partition_without_recopy() {
    let _serial = serial();
    let t0 = Instant::now();
    let source = owned_cluster("diverge3", 3, V, &[]);
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("unclean");
    kafka_tool_ok(
        V,
        "topics",
        &[
            "--bootstrap-server",
            &source.bootstrap,
            "--create",
            "--topic",
            &topic,
            "--replica-assignment",
            "1:2",
            "--config",
            "min.insync.replicas=1",
            "--config",
            "unclean.leader.election.enable=true",
        ],
        None,
    );
    let addr = |n: usize| source.bootstrap.split(',').nth(n - 1).unwrap().to_string();
    let produce = |bootstrap: &str, prefix: &str, count: usize| {
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                bootstrap,
                "--topic",
                &topic,
                "--count",
                &count.to_string(),
                "--prefix",
                prefix,
                "--acks",
                "1",
            ]),
            "produce",
        )
    };
    produce(&source.bootstrap, "a", 100);
    let mirror = start_mirror(&mg, &source, &[&topic], "");
    wait_identical(&mg, &mirror, &src, &dst, &topic, 1, Duration::from_secs(60));
    // Node 2 must hold the 100 records before it is stopped: back in the ISR (a follower
    // rejoins only once it has reached the high watermark, 100). (With acks=1 a follower slow
    // to start fetching drops out of the ISR and the leader's high watermark moves without
    // it; stopped then, node 2 came back empty and was elected with log end 0, so the source
    // ended at 150 instead of 250.)
    let in_sync = eventually(Duration::from_secs(120), || match describe_partition(&source.bootstrap, &topic, 0)? {
        (1, mut isr) => {
            isr.sort_unstable();
            if isr == [1, 2] {
                Ok(isr)
            } else {
                Err(format!("isr {isr:?}"))
            }
        }
        other => Err(format!("(leader, isr) {other:?}")),
    });
    eprintln!("node 2 in sync before it stops: isr {in_sync:?} after {:?}", t0.elapsed());

    stop_node(&source, 2);
    let others = format!("{},{}", addr(1), addr(3));
    eventually(Duration::from_secs(120), || match describe_partition(&others, &topic, 0)? {
        (1, isr) if isr == [1] => Ok(()),
        other => Err(format!("{other:?}")),
    });
    produce(&others, "b", 50);
    // The mirror copies the 50 records only node 1 has.
    let r = wait_identical(&mg, &mirror, &src, &dst, &topic, 1, Duration::from_secs(60));
    assert_eq!(r[0].source_end, 150, "{r:?}");

    stop_node(&source, 1);
    start_node(&source, 2);
    let node2 = format!("{},{}", addr(2), addr(3));
    // The unclean election is the controller's, on its own schedule (86 s once on an idle
    // machine): wait generously, and report what was seen.
    let t_elect = Instant::now();
    let (leader, isr) = eventually(Duration::from_secs(300), || match describe_partition(&node2, &topic, 0)? {
        (2, isr) => Ok((2, isr)),
        other => Err(format!("not yet elected uncleanly: (leader, isr) {other:?}")),
    });
    eprintln!(
        "unclean election: leader {leader}, isr {isr:?} after {:?} (test at {:?})",
        t_elect.elapsed(),
        t0.elapsed()
    );
    // (Right after the unclean election ListOffsets(latest) on node 2 answered 0: the new
    // leader's high watermark only moves once something is appended.) Each write must be
    // acknowledged by node 2 and move its log end where the next step needs it; a fresh client
    // each time, so that no metadata from before the election is used.
    let end_on_node2 = || -> Result<(i64, i64), String> {
        let c = block(ClusterClient::connect(ClusterOptions::new(vec![addr(2)]))).map_err(|e| e.to_string())?;
        let hw = block(c.list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        let leo = block(c.leader_log_end(&topic, 0)).map_err(|e| e.to_string())?;
        Ok((hw, leo))
    };
    let (hw, leo) = eventually(Duration::from_secs(60), end_on_node2);
    eprintln!("node 2 as leader before any write: (high watermark, log end) ({hw}, {leo})");
    assert_eq!(leo, 100, "node 2 was elected holding {leo} of the 100 records it had in sync");
    // Two writes, so that a new-leader batch starts exactly at 150, where the mirror stands
    // (one 100-record batch 100..199 would straddle it and fail the partition by accident).
    for (prefix, count, end) in [("c", 50, 150), ("d", 100, 250)] {
        produce(&node2, prefix, count);
        let seen = eventually(Duration::from_secs(120), || {
            match end_on_node2()? {
            (hw, leo) if hw == end => Ok((hw, leo)),
            (hw, leo) => Err(format!(
                "after writing {count} \"{prefix}\" records to node 2: high watermark {hw}, log end {leo}, want {end}; partition {:?}",
                describe_partition(&node2, &topic, 0)
            )),
        }
        });
        eprintln!("wrote {count} {prefix:?} records to node 2: (high watermark, log end) {seen:?}");
    }
    start_node(&source, 1); // truncates to node 2's log
    let t_back = Instant::now();
    eventually(Duration::from_secs(300), || {
        // A fresh client per poll: node 1 must not be asked with metadata from before.
        let c =
            block(ClusterClient::connect(ClusterOptions::new(source.bootstrap.split(',').map(String::from).collect())))
                .map_err(|e| e.to_string())?;
        let e = block(c.list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        if e == 250 {
            Ok(())
        } else {
            Err(format!(
                "source end {e}, want 250; partition (leader, isr) {:?}; node 2 (high watermark, log end) {:?}",
                describe_partition(&source.bootstrap, &topic, 0),
                end_on_node2()
            ))
        }
    });
    eprintln!("node 1 back, source end 250 after {:?}", t_back.elapsed());

    let failed = eventually(Duration::from_secs(120), || {
        let rows = describe_json(&mg, &mirror);
        let p0 = rows.iter().find(|r| r["partition"] == 0).cloned().ok_or("no row")?;
        if p0["state"] == "FAILED" {
            Ok(p0)
        } else {
            let dest_end = block(dst.list_offsets(&topic, 0, -1)).unwrap_or(-1);
            Err(format!("state {} (destination end {dest_end}): {rows:?}", p0["state"]))
        }
    });
    let msg = failed["errorMessage"].as_str().unwrap_or("").replace(&topic, "TOPIC").to_lowercase();
    assert!(msg.contains("diverge") || msg.contains("truncat"), "{failed:#?}");
    // Nothing of the new leader's records was copied: the destination still ends at 150 and
    // holds the 50 records of the old leader at 100..149.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(block(dst.list_offsets(&topic, 0, -1)).unwrap(), 150);
    let dest_records = raw_records(&dst, &topic, 0);
    let above: Vec<_> = dest_records.iter().filter(|r| r.0 >= 100).collect();
    assert_eq!(above.len(), 50, "{above:?}");
    assert!(above.iter().all(|r| r.2.as_deref().unwrap_or("").starts_with("b-")), "{above:?}");
    eprintln!("divergence: FAILED with {msg:?} after {:?}", t0.elapsed());
}

// ---------------------------------------------------------------------------------------
// 4. Compacted sources
// ---------------------------------------------------------------------------------------

/// Raw view of one partition, read_uncommitted, from its log start to its high watermark:
/// `(base, last, record_count, is_placeholder, batch)` per batch.
fn raw_batches(c: &ClusterClient, topic: &str, p: i32) -> Vec<(i64, i64, i32, bool, Batch)> {
    let mut offset = block(c.list_offsets(topic, p, -2)).unwrap();
    let hw = block(c.list_offsets(topic, p, -1)).unwrap();
    let mut out = Vec::new();
    while offset < hw {
        let f = block(c.fetch(topic, p, offset, 1 << 20)).unwrap();
        let before = offset;
        for b in BatchIter::new(f.records.clone()) {
            let b = b.unwrap();
            if b.next_offset() <= offset {
                continue;
            }
            offset = b.next_offset();
            out.push((b.base_offset(), b.last_offset(), b.record_count(), b.is_placeholder(), b));
        }
        assert!(offset > before, "no progress reading {topic}-{p} at {offset} (hw {hw})");
    }
    out
}

fn varint(buf: &[u8], pos: &mut usize) -> i64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let b = buf[*pos];
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// `(offset, key, value)` of a record.
type Rec = (i64, Option<String>, Option<String>);

/// `(offset, key, value)` of the records of an uncompressed batch.
fn batch_records(b: &Batch) -> Vec<(i64, Option<String>, Option<String>)> {
    assert_eq!(b.compression(), 0, "test records are uncompressed");
    let payload = b.payload();
    let buf = &payload[..];
    let mut pos = 0;
    let mut out = Vec::new();
    for _ in 0..b.record_count() {
        let len = varint(buf, &mut pos) as usize;
        let start = pos;
        pos += 1; // attributes
        let _ts = varint(buf, &mut pos);
        let delta = varint(buf, &mut pos);
        let bytes = |pos: &mut usize| {
            let n = varint(buf, pos);
            (n >= 0).then(|| {
                let s = String::from_utf8_lossy(&buf[*pos..*pos + n as usize]).into_owned();
                *pos += n as usize;
                s
            })
        };
        let key = bytes(&mut pos);
        let value = bytes(&mut pos);
        out.push((b.base_offset() + delta, key, value));
        pos = start + len;
    }
    out
}

/// Every data record (not control, not placeholder) of a partition: `(offset, key, value)`.
fn raw_records(c: &ClusterClient, topic: &str, p: i32) -> Vec<(i64, Option<String>, Option<String>)> {
    raw_batches(c, topic, p).iter().filter(|b| !b.3 && !b.4.is_control()).flat_map(|b| batch_records(&b.4)).collect()
}

#[derive(Debug, Default)]
struct Holes {
    /// Batches whose record count is below their offset span (holes inside).
    inside: usize,
    /// Empty batches (all records removed, header kept for producer state).
    empty: usize,
    /// Gaps between consecutive batches.
    between: usize,
}

fn holes(batches: &[(i64, i64, i32, bool, Batch)]) -> Holes {
    let mut h = Holes::default();
    let mut next = None;
    for (base, last, count, _, _) in batches {
        if *count == 0 {
            h.empty += 1;
        } else if i64::from(*count) < last - base + 1 {
            h.inside += 1;
        }
        if next.is_some_and(|n| *base > n) {
            h.between += 1;
        }
        next = Some(last + 1);
    }
    h
}

/// How the compacted source is written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Layout {
    /// Big batches of updates to 5 keys: the cleaner leaves batches with holes inside.
    HolesInside,
    /// One record per batch, one non-idempotent producer, updates to 5 keys followed by 3
    /// keys written once per round: whole batches disappear between the surviving ones,
    /// every remaining batch is dense.
    HolesBetween,
    /// One record per batch, a new idempotent producer per round: the cleaner keeps each
    /// producer's last batch as an empty batch (header only) for its producer state.
    Empty,
}

const COMPACT: [&str; 4] =
    ["cleanup.policy=compact", "segment.ms=100", "min.cleanable.dirty.ratio=0.01", "delete.retention.ms=100"];

/// Writes 6 rounds of 300 updates to 5 keys (segments roll between rounds), then one record
/// to roll the last round's segment, and waits until the cleaner has made
/// holes of the kind `layout` is about.
fn write_compacted_source(source: &Cluster, src: &ClusterClient, topic: &str, layout: Layout) -> Holes {
    let props: &[&str] = match layout {
        Layout::HolesInside => {
            &["--prop", "batch.size=1000000", "--prop", "linger.ms=200", "--prop", "enable.idempotence=false"]
        }
        Layout::HolesBetween => &["--sync", "--prop", "enable.idempotence=false"],
        Layout::Empty => &["--sync"],
    };
    for round in 0..6 {
        let prefix = format!("r{round}");
        let mut args = vec!["--keys", "5", "--timestamp-start", "now", "--prefix", prefix.as_str()];
        args.extend_from_slice(props);
        old_producer(&source.bootstrap, topic, 300, &args);
        if layout == Layout::HolesBetween {
            // Keys written once: they survive compaction between the superseded updates, so
            // the cleaned log has holes between batches (not only a removed head).
            let keys = format!("once-{round}-");
            let mut args = vec!["--timestamp-start", "now", "--prefix", prefix.as_str(), "--key-prefix", keys.as_str()];
            args.extend_from_slice(props);
            old_producer(&source.bootstrap, topic, 3, &args);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    // One more record (key "k-0", value "end-0") rolls the last round's segment.
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            topic,
            "--count",
            "1",
            "--prefix",
            "end",
            "--prop",
            "enable.idempotence=false",
        ]),
        "produce",
    );
    eventually(Duration::from_secs(240), || {
        let h = holes(&raw_batches(src, topic, 0));
        let wanted = match layout {
            Layout::HolesInside => h.inside > 0,
            Layout::HolesBetween => h.between > 0 && h.inside == 0 && h.empty == 0,
            Layout::Empty => h.empty > 0 && h.inside == 0,
        };
        if wanted {
            Ok(h)
        } else {
            Err(format!("cleaner has not made the holes yet: {h:?}"))
        }
    })
}

/// For a compacted mirror: every record at offset o on the destination is the source's
/// record at o when the source still has o, and the source's latest record of every key is
/// on the destination at the same offset.
fn check_compacted_mirror(src: &ClusterClient, dst: &ClusterClient, topic: &str) -> Result<usize, String> {
    let s = raw_records(src, topic, 0);
    let d = raw_records(dst, topic, 0);
    let s_at: BTreeMap<i64, _> = s.iter().map(|r| (r.0, r)).collect();
    let d_at: BTreeMap<i64, _> = d.iter().map(|r| (r.0, r)).collect();
    for r in &d {
        if let Some(x) = s_at.get(&r.0) {
            if *x != r {
                return Err(format!("destination record {r:?} differs from the source's {x:?}"));
            }
        }
    }
    let mut latest: BTreeMap<&Option<String>, &Rec> = BTreeMap::new();
    for r in &s {
        latest.insert(&r.1, r);
    }
    for r in latest.values() {
        if d_at.get(&r.0) != Some(r) {
            return Err(format!("latest source record {r:?} of its key is not on the destination at {}", r.0));
        }
    }
    Ok(latest.len())
}

/// Brokers whose log cleaner looks for work every 500 ms (default 15 s), so the compaction
/// tests do not wait on the cleaner's backoff behind other compacted topics.
const FAST_CLEANER: &[&str] = &["log.cleaner.backoff.ms=500"];

fn compacted_source_into_compacted_destination(layout: Layout) {
    let t0 = Instant::now();
    let source = cluster_with("source-compact", 1, V, FAST_CLEANER);
    let dest = cluster_with("dest-compact", 1, V, FAST_CLEANER);
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("compacted");
    create_topic(&source.bootstrap, &topic, 1, 1, &COMPACT);
    let h = write_compacted_source(&source, &src, &topic, layout);
    let src_batches = raw_batches(&src, &topic, 0);
    eprintln!(
        "{layout:?}: source cleaned after {:?}: {h:?}, {} batches, log start {}, end {}",
        t0.elapsed(),
        src_batches.len(),
        src_batches.first().map_or(-1, |b| b.0),
        src_batches.last().map_or(-1, |b| b.1 + 1)
    );
    let mirror = start_mirror(&mg, &source, &[&topic], "");
    let src_end = block(src.list_offsets(&topic, 0, -1)).unwrap();
    let mut polls = 0;
    eventually(Duration::from_secs(120), || {
        polls += 1;
        if polls % 10 == 1 {
            no_failed_partition(&mg, &mirror);
        }
        let end = block(dst.list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        if end == src_end {
            Ok(())
        } else {
            Err(format!("destination end {end}, source end {src_end}"))
        }
    });
    // Same offsets, same records, right after the copy.
    let keys = check_compacted_mirror(&src, &dst, &topic).unwrap();
    let dest_cfg = block(dst.describe_topic_configs(&topic)).unwrap();
    assert_eq!(dest_cfg.get("cleanup.policy").map(String::as_str), Some("compact"), "{dest_cfg:?}");

    // Let the destination's cleaner run over the copied range: roll its segment (one more
    // source record, mirrored), then wait until it removed placeholders (tombstones with
    // unique keys, dropped after delete.retention.ms on a later pass).
    let placeholders =
        |c: &ClusterClient| -> i64 { raw_batches(c, &topic, 0).iter().filter(|b| b.3).map(|b| i64::from(b.2)).sum() };
    let before = placeholders(&dst);
    let mut extra = 0;
    let cleaned = eventually(Duration::from_secs(150), || {
        if before == 0 {
            // On a slow machine the destination's cleaner may have removed every placeholder
            // before this first look: the copy left holes behind (checked), nothing to wait for.
            let dh = holes(&raw_batches(&dst, &topic, 0));
            return if dh.between + dh.inside > 0 {
                Ok((0, dh))
            } else {
                Err(format!("no placeholder and no hole on the destination ({dh:?})"))
            };
        }
        extra += 1;
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                &topic,
                "--count",
                "1",
                "--prefix",
                &format!("tick{extra}"),
                "--prop",
                "enable.idempotence=false",
            ]),
            "produce",
        );
        std::thread::sleep(Duration::from_secs(3));
        no_failed_partition(&mg, &mirror);
        let now = placeholders(&dst);
        let dh = holes(&raw_batches(&dst, &topic, 0));
        if now < before {
            Ok((now, dh))
        } else {
            Err(format!("destination cleaner has not removed placeholders yet ({now} of {before}; {dh:?})"))
        }
    });
    eprintln!(
        "{layout:?}: destination cleaner ran: placeholder offsets {before} -> {cleaned:?} after {:?}",
        t0.elapsed()
    );
    let src_end = block(src.list_offsets(&topic, 0, -1)).unwrap();
    eventually(Duration::from_secs(120), || {
        let end = block(dst.list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        if end == src_end {
            Ok(())
        } else {
            Err(format!("destination end {end}, source end {src_end}"))
        }
    });
    // Placeholders never shadow a real key: every real record the source has is still there.
    check_compacted_mirror(&src, &dst, &topic).unwrap();
    // A read_committed consumer through mirrorgate sees the destination's real records at
    // their offsets.
    // The destination's cleaner may still remove records between two reads: compare against
    // a raw read that is the same before and after the consumer's.
    let mut attempt = 0;
    let (dest_real, via) = loop {
        attempt += 1;
        // Wait for the cleaner to be done: two raw reads 3 s apart agree.
        let before = eventually(Duration::from_secs(120), || {
            let first = raw_records(&dst, &topic, 0);
            std::thread::sleep(Duration::from_secs(3));
            (raw_records(&dst, &topic, 0) == first)
                .then_some(first)
                .ok_or_else(|| "the cleaner is still at work".to_string())
        });
        let via = consume_all(&mg.bootstrap, &topic, before.len());
        if raw_records(&dst, &topic, 0) == before || attempt == 5 {
            break (before, via);
        }
    };
    let want: Vec<_> =
        dest_real.iter().map(|r| (0, r.0, r.1.clone().unwrap_or_default(), r.2.clone().unwrap_or_default())).collect();
    assert!(
        via == want,
        "through mirrorgate: {:?}\nraw destination: {:?}",
        &via[..via.len().min(20)],
        &want[..want.len().min(20)]
    );
    eprintln!("{layout:?}: {keys} keys, {} records on the destination, passed in {:?}", dest_real.len(), t0.elapsed());
}

/// Holes between dense batches (whole batches removed by the cleaner): filled with
/// placeholders, every remaining record at its source offset, also after the destination's
/// cleaner ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_source_with_holes_between_batches() {
    let _serial = serial();
    compacted_source_into_compacted_destination(Layout::HolesBetween);
}

/// Batches with holes inside (the cleaner kept a few records of a big batch): DESIGN §4.2
/// splits them into dense runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_source_with_holes_inside_batches() {
    let _serial = serial();
    compacted_source_into_compacted_destination(Layout::HolesInside);
}

/// Empty batches the cleaner keeps for idempotent producers' state: their offsets are gaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_source_with_empty_batches() {
    let _serial = serial();
    compacted_source_into_compacted_destination(Layout::Empty);
}
