//! The data plane against real Kafka 4.1 source and destination clusters: every committed
//! source record lands on the destination at the same offset (or at a recorded constant
//! shift) with identical compressed payload bytes, through transactions, restarts (kill -9),
//! failover, retention on the source and foreign writes on the destination.
//!
//! Each test checks with `mirrorgate::mirror::verify` (batch by batch, payload bytes) and
//! with real consumers (librdkafka, Kafka's Java tools) through mirrorgate against the source.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::mirror::model::OffsetSegment;
use mirrorgate::mirror::verify::{verify_partition, VerifyReport};
use support::*;

const V: &str = "4.1.1";

fn create_topic(bootstrap: &str, topic: &str, partitions: u32, configs: &[&str]) {
    let mut args = vec!["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--replication-factor", "1"];
    let p = partitions.to_string();
    args.extend(["--partitions", p.as_str()]);
    for c in configs {
        args.extend(["--config", c]);
    }
    kafka_tool_ok(V, "topics", &args, None);
}

fn client(bootstrap: &str) -> ClusterClient {
    let rt = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| {
        rt.block_on(ClusterClient::connect(ClusterOptions::new(vec![bootstrap.to_string()])))
    })
    .unwrap()
}

/// Creates a mirror (extra mirror configs in `extra`) and starts `topics`.
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

/// Waits until every partition of `topic` verifies (destination caught up and identical).
fn wait_identical(
    src: &ClusterClient,
    dst: &ClusterClient,
    topic: &str,
    partitions: i32,
    segments: &[OffsetSegment],
) -> Vec<VerifyReport> {
    eventually(Duration::from_secs(120), || {
        (0..partitions)
            .map(|p| block(verify_partition(src, dst, topic, p, segments, None)))
            .collect::<Result<Vec<_>, _>>()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codecs_keys_headers_and_big_records_are_offset_identical() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    // (name, codecs, records per codec, records over 1 MiB): 100,002 records in all.
    let codecs: [(&str, &[&str], usize, u32); 3] = [
        ("plain", &["none", "gzip"], 17_000, 0),
        ("fast", &["snappy", "lz4"], 17_000, 0),
        ("zstd", &["zstd"], 32_000, 2),
    ];
    let mut topics = Vec::new();
    for (name, _, _, _) in &codecs {
        let t = unique_name(&format!("codec-{name}"));
        create_topic(&source.bootstrap, &t, 3, &["max.message.bytes=4000000"]);
        topics.push(t);
    }
    let mut total = Vec::new();
    for ((_, cs, count, big), t) in codecs.iter().zip(&topics) {
        let mut n = 0;
        for (i, c) in cs.iter().enumerate() {
            let count_arg = count.to_string();
            ok(
                python_client(&[
                    "produce-mixed",
                    "--bootstrap",
                    &source.bootstrap,
                    "--topic",
                    t,
                    "--count",
                    &count_arg,
                    "--codec",
                    c,
                    "--seed",
                    &i.to_string(),
                    "--big",
                    &big.to_string(),
                ]),
                "produce-mixed",
            );
            n += count + *big as usize;
        }
        total.push(n);
    }
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    // An in-flight budget below the 1.5 MB records and below fetch.response.max.bytes: the
    // fetchers share 2 MiB and still copy records larger than their reservation.
    start_mirror(&mg, &source, &refs, "mirror.inflight.max.bytes=2097152\n");
    for (t, n) in topics.iter().zip(&total) {
        let reports = wait_identical(&src, &dst, t, 3, &[]);
        let records: i64 = reports.iter().map(|r| r.records).sum();
        assert_eq!(records, *n as i64, "{t}: {reports:?}");
        // Same (offset, timestamp, type, key, value, headers) through mirrorgate as on the source.
        let on_source = consume_all(&source.bootstrap, t, *n, "read_committed");
        let via_mirrorgate = consume_all(&mg.bootstrap, t, *n, "read_committed");
        assert_eq!(on_source.len(), *n);
        assert!(on_source == via_mirrorgate, "{t}: records differ through mirrorgate");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_source_commits_aborts_and_markers() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("txn");
    create_topic(&source.bootstrap, &topic, 2, &[]);
    let txn = |commit: &str, abort: &str, order: &str| {
        let id = unique_name("tx");
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
                    &id,
                    "--commit",
                    commit,
                    "--abort",
                    abort,
                    "--order",
                    order,
                ],
            ),
            "TxnProducer",
        );
    };
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &topic,
            "--count",
            "200",
            "--prefix",
            "plain-a",
        ]),
        "produce",
    );
    txn("c1,c2,c3", "a1,a2", "commit-first");
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &topic,
            "--count",
            "100",
            "--prefix",
            "plain-b",
        ]),
        "produce",
    );
    txn("c4,c5", "a3,a4,a5", "abort-first");
    let mirror = start_mirror(&mg, &source, &[&topic], "");
    let reports = wait_identical(&src, &dst, &topic, 2, &[]);
    assert!(
        reports.iter().map(|r| r.skipped_offsets).sum::<i64>() >= 4 + 5,
        "markers and aborted records are skipped: {reports:?}"
    );
    // The operator's check, through mirrorgate.
    let verified = ok(mirrors_cli(&mg.bootstrap, &["--verify", "--mirror", &mirror]), "--verify");
    assert!(
        verified.contains("Verified 2 partition(s)") && verified.contains("2 identical, 0 different"),
        "{verified}"
    );
    let committed = 300 + 5;
    let on_source = consume_all(&source.bootstrap, &topic, committed, "read_committed");
    let via = consume_all(&mg.bootstrap, &topic, committed, "read_committed");
    assert!(via == on_source, "read_committed through mirrorgate differs from the source");
    // Real markers (the default): aborted records are aborted records on the destination, so
    // read_uncommitted reads them as it does on the source.
    let all = committed + 5;
    let via = consume_all(&mg.bootstrap, &topic, all, "read_uncommitted");
    let uncommitted_on_source = consume_all(&source.bootstrap, &topic, all, "read_uncommitted");
    assert_eq!(via.len(), all);
    assert!(via == uncommitted_on_source, "read_uncommitted through mirrorgate differs from the source");
    assert!(on_source.iter().all(|r| !r["value"].as_str().unwrap_or("").starts_with('a')));
    // Java's console consumer in read_committed sees the same values.
    let java = kafka_tool_ok(
        V,
        "console-consumer",
        &[
            "--bootstrap-server",
            &mg.bootstrap,
            "--topic",
            &topic,
            "--from-beginning",
            "--max-messages",
            &committed.to_string(),
            "--timeout-ms",
            "60000",
            "--consumer-property",
            "isolation.level=read_committed",
        ],
        None,
    );
    let mut got: Vec<&str> = java.lines().collect();
    got.sort_unstable();
    let mut want: Vec<&str> = on_source.iter().map(|r| r["value"].as_str().unwrap()).collect();
    want.sort_unstable();
    assert_eq!(got, want);

    // A destination longer than the source is a difference: after a failover (--stop) one
    // record is written to partition 0 through mirrorgate while the source stays as it is.
    // Everything up to the source's end still matches; `--verify` must see the extra offset
    // at the destination's end and exit with status 1.
    ok(mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &topic]), "--stop");
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &mg.bootstrap,
            "--topic",
            &topic,
            "--partition",
            "0",
            "--count",
            "1",
            "--prefix",
            "extra",
        ]),
        "produce after --stop",
    );
    let out = mirrors_cli(&mg.bootstrap, &["--verify", "--mirror", &mirror]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "--verify of a longer destination: {text}");
    assert!(text.contains(&format!("DIFF  {topic}-0: ")) && text.contains("beyond the source's log end"), "{text}");
    assert!(text.contains(&format!("OK    {topic}-1: ")) && text.contains("1 identical, 1 different"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_makes_the_topic_writable_at_the_next_offset() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("failover");
    create_topic(&source.bootstrap, &topic, 1, &[]);
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &topic,
            "--count",
            "500",
            "--prefix",
            "before",
        ]),
        "produce",
    );
    let mirror = start_mirror(&mg, &source, &[&topic], "");
    wait_identical(&src, &dst, &topic, 1, &[]);
    // Keep writing to the source while failing over.
    let bs = source.bootstrap.clone();
    let t = topic.clone();
    let writer = std::thread::spawn(move || {
        python_client(&["produce", "--bootstrap", &bs, "--topic", &t, "--count", "3000", "--prefix", "during"])
    });
    // Fail over while the copy follows the writer: once the destination has moved past 500.
    eventually(Duration::from_secs(120), || {
        let end = block(dst.list_offsets(&topic, 0, -1)).map_err(|e| e.to_string())?;
        (end > 500).then_some(()).ok_or(format!("destination end {end}"))
    });
    ok(mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &topic]), "--stop");
    let rows = describe_json(&mg, &mirror);
    assert_eq!(rows[0]["state"], "STOPPED", "{rows:?}");
    writer.join().unwrap();
    let dest_end = block(dst.list_offsets(&topic, 0, -1)).unwrap();
    // Everything on the destination is what the source has at the same offsets.
    block(verify_partition(&src, &dst, &topic, 0, &[], Some(dest_end))).unwrap();
    // A producer through mirrorgate appends at the next offset.
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &mg.bootstrap,
            "--topic",
            &topic,
            "--count",
            "1",
            "--prefix",
            "after",
        ]),
        "produce after failover",
    );
    let after = kafka_tool_ok(
        V,
        "console-consumer",
        &[
            "--bootstrap-server",
            &mg.bootstrap,
            "--topic",
            &topic,
            "--partition",
            "0",
            "--offset",
            &dest_end.to_string(),
            "--max-messages",
            "1",
            "--timeout-ms",
            "30000",
            "--property",
            "print.offset=true",
        ],
        None,
    );
    assert_eq!(after.trim(), format!("Offset:{dest_end}\tafter-0"));
    // Failback onto a destination that took writes after the failover: reported, not kept.
    // The operator's check sees the record written after the failover where the source has
    // another one: a difference, exit status 1.
    let out = mirrors_cli(&mg.bootstrap, &["--verify", "--mirror", &mirror]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "--verify after a write on the destination: {text}");
    assert!(text.contains(&format!("DIFF  {topic}-0: ")) && text.contains("0 identical, 1 different"), "{text}");
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start again");
    let failed = eventually(Duration::from_secs(120), || {
        let rows = describe_json(&mg, &mirror);
        if rows[0]["state"] == "FAILED" {
            Ok(rows[0].clone())
        } else {
            Err(format!("{rows:?}"))
        }
    });
    let msg = failed["errorMessage"].as_str().unwrap();
    assert!(msg.contains("written on the destination after the failover"), "{msg}");
    assert_eq!(failed["retryAttempt"], -1, "not retryable");
    // `--describe --failed` lists it with the reason (docs/operations.md).
    let table = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror, "--failed"]), "--describe --failed");
    let row = table.lines().find(|l| l.contains(&topic)).unwrap_or_else(|| panic!("{table}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[..4], &[mirror.as_str(), topic.as_str(), "0", "NonRetryable"], "{table}");
    assert!(row.contains("written on the destination after the failover"), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_destination_topic_with_other_partitions_fails() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("mismatch");
    create_topic(&source.bootstrap, &topic, 3, &[]);
    create_topic(&dest.bootstrap, &topic, 2, &[]);
    // Refused at --start, never recorded: the foreign topic does not become a read-only
    // mirror topic (its own producers keep writing through mirrorgate).
    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    let out = mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "the start was accepted: {stderr}");
    assert!(
        stderr.contains("TOPIC_ALREADY_EXISTS")
            && stderr.contains("already exists with 2 partition(s), the source has 3"),
        "{stderr}"
    );
    let rows = describe_json(&mg, &mirror);
    assert!(rows.iter().all(|r| r["topic"] != topic.as_str()), "the refused topic was recorded: {rows:?}");
    ok(
        python_client(&["produce", "--bootstrap", &mg.bootstrap, "--topic", &topic, "--count", "3", "--prefix", "own"]),
        "the destination topic's own producer writes through mirrorgate",
    );
}

/// Three kill -9s of the mirroring instance, each in the middle of a copy: a round of 4,000
/// records (small batches: many appends) is written while mirrorgate is down, mirrorgate is
/// started, and killed as soon as the destination has moved, before it holds the round. Each
/// kill is checked to have landed mid-copy (the destination's end after the kill strictly
/// between its end before the restart and the source's end). After the last restart the
/// destination must end exactly where the source ends, with the same records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_mirroring_loses_and_repeats_nothing() {
    const ROUNDS: i64 = 3;
    const PER_ROUND: i64 = 4000;
    let source = cluster("source");
    let dest = cluster("dest");
    let state_topic = unique_name("__mirror_state-kill");
    let opts = || MirrorgateOptions { state_topic: Some(&state_topic), ..Default::default() };
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("kill9");
    create_topic(&source.bootstrap, &topic, 2, &[]);
    let end_of = |c: &ClusterClient| -> i64 { (0..2).map(|p| block(c.list_offsets(&topic, p, -1)).unwrap_or(0)).sum() };
    let mut mg = Mirrorgate::start_with(&dest, opts());
    // Small source fetches: a round takes many Fetch/Produce round trips to copy.
    let mirror = start_mirror(&mg, &source, &[&topic], "fetch.max.bytes=4096\n");
    eventually(Duration::from_secs(120), || {
        let rows = describe_json(&mg, &mirror);
        (rows.len() == 2 && rows.iter().all(|r| r["state"] == "MIRRORING")).then_some(()).ok_or(format!("{rows:?}"))
    });
    let mut kills = Vec::new();
    for round in 0..ROUNDS {
        drop(mg); // SIGKILL (the first one with nothing to copy)
        let before = end_of(&dst);
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                &topic,
                "--count",
                &PER_ROUND.to_string(),
                "--prefix",
                &format!("r{round}"),
                "--prop",
                "batch.size=512",
                "--prop",
                "linger.ms=0",
            ]),
            "produce",
        );
        let source_end = end_of(&src);
        assert_eq!(source_end, (round + 1) * PER_ROUND, "round {round}: source end");
        mg = Mirrorgate::start_with(&dest, opts());
        // Kill as soon as the copy has moved the destination.
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while end_of(&dst) == before {
            assert!(std::time::Instant::now() < deadline, "round {round}: the copy did not start within 120 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(mg); // SIGKILL mid-copy
        let after = end_of(&dst);
        eprintln!("kill {round}: destination end {before} -> {after} of source end {source_end}");
        assert!(
            before < after && after < source_end,
            "kill {round} did not land mid-copy: destination end {before} before the restart, {after} after the kill, source end {source_end}"
        );
        kills.push((before, after, source_end));
        mg = Mirrorgate::start_with(&dest, opts());
    }
    assert_eq!(kills.len(), ROUNDS as usize, "{kills:?}");
    let reports = wait_identical(&src, &dst, &topic, 2, &[]);
    assert_eq!(reports.iter().map(|r| r.records).sum::<i64>(), ROUNDS * PER_ROUND, "{reports:?}");
    // Nothing extra at the destination's end (verify compares up to the source's end and
    // refuses a longer destination; the log ends say it again).
    for (p, r) in reports.iter().enumerate() {
        assert_eq!(r.destination_end, r.source_end, "partition {p}: {r:?}");
        assert_eq!(r.destination_end, block(src.list_offsets(&topic, p as i32, -1)).unwrap(), "partition {p}");
    }
    let total = (ROUNDS * PER_ROUND) as usize;
    let via = consume_all(&mg.bootstrap, &topic, total, "read_committed");
    let mut values: Vec<&str> = via.iter().map(|r| r["value"].as_str().unwrap()).collect();
    values.sort_unstable();
    values.dedup();
    assert_eq!(values.len(), total, "no duplicate, nothing missing");
    let mut want: Vec<String> = (0..ROUNDS).flat_map(|r| (0..PER_ROUND).map(move |i| format!("r{r}-{i}"))).collect();
    want.sort_unstable();
    assert!(values.iter().copied().eq(want.iter().map(String::as_str)), "records differ from the produced ones");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_head_removed_by_retention_filled_or_shifted() {
    let source = cluster("source");
    let dest = cluster("dest");
    let state_topic = unique_name("__mirror_state-shift");
    let opts = || MirrorgateOptions { state_topic: Some(&state_topic), ..Default::default() };
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let filled = unique_name("head-filled");
    let shifted = unique_name("head-shifted");
    for t in [&filled, &shifted] {
        create_topic(&source.bootstrap, t, 1, &[]);
        // Batches of 10 records, so that offset 200 starts a batch.
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                t,
                "--count",
                "300",
                "--partition",
                "0",
                "--prop",
                "batch.num.messages=10",
                "--prop",
                "linger.ms=0",
            ]),
            "produce",
        );
        let out = java_program(
            V,
            "AdminOps.java",
            &["delete-records", t, "0", "200", "--bootstrap-server", &source.bootstrap],
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
    }
    let mg = Mirrorgate::start_with(&dest, opts());
    // Within the fill bound: the head is filled and then removed, log starts match.
    start_mirror(&mg, &source, &[&filled], "");
    wait_identical(&src, &dst, &filled, 1, &[]);
    eventually(Duration::from_secs(120), || {
        let start = block(dst.list_offsets(&filled, 0, -2)).map_err(|e| e.to_string())?;
        if start == 200 {
            Ok(())
        } else {
            Err(format!("destination log start {start}, source 200"))
        }
    });
    // Beyond the bound (set low): one shifted segment, every record at source offset - 200.
    start_mirror(&mg, &source, &[&shifted], "mirror.fill.max.gap=50\n");
    let seg = [OffsetSegment { source_start: 200, destination_start: 0 }];
    wait_identical(&src, &dst, &shifted, 1, &seg);
    assert_eq!(block(dst.list_offsets(&shifted, 0, -1)).unwrap(), 100);
    // The shift survives a restart.
    drop(mg);
    let _mg = Mirrorgate::start_with(&dest, opts());
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &shifted,
            "--count",
            "10",
            "--partition",
            "0",
            "--prefix",
            "later",
        ]),
        "produce",
    );
    let reports = wait_identical(&src, &dst, &shifted, 1, &seg);
    assert_eq!(reports[0].records, 110);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_write_fails_only_that_partition() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("foreign");
    create_topic(&source.bootstrap, &topic, 2, &[]);
    for p in ["0", "1"] {
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                &topic,
                "--count",
                "50",
                "--partition",
                p,
            ]),
            "produce",
        );
    }
    let mirror = start_mirror(&mg, &source, &[&topic], "");
    wait_identical(&src, &dst, &topic, 2, &[]);
    // Straight to the destination broker, bypassing mirrorgate.
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &dest.bootstrap,
            "--topic",
            &topic,
            "--count",
            "1",
            "--partition",
            "0",
            "--prefix",
            "intruder",
        ]),
        "foreign write",
    );
    for p in ["0", "1"] {
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                &topic,
                "--count",
                "20",
                "--partition",
                p,
                "--prefix",
                "more",
            ]),
            "produce",
        );
    }
    let failed = eventually(Duration::from_secs(120), || {
        let rows = describe_json(&mg, &mirror);
        let p0 = rows.iter().find(|r| r["partition"] == 0).cloned().unwrap();
        if p0["state"] == "FAILED" {
            Ok(p0)
        } else {
            Err(format!("{rows:?}"))
        }
    });
    let msg = failed["errorMessage"].as_str().unwrap();
    assert!(msg.contains("at offset 51, expected 50") || msg.contains("out of sequence"), "{msg}");
    // The other partition keeps mirroring.
    let r = eventually(Duration::from_secs(120), || block(verify_partition(&src, &dst, &topic, 1, &[], None)));
    assert_eq!(r.records, 70);
    let rows = describe_json(&mg, &mirror);
    assert_eq!(rows.iter().find(|r| r["partition"] == 1).unwrap()["state"], "MIRRORING");
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_metrics_report_states_lag_and_bytes() {
    let source = cluster("source");
    let dest = cluster("dest");
    let port = free_port_range(1);
    let yaml = format!("metrics:\n  listen: 127.0.0.1:{port}\n");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { extra_yaml: &yaml, ..Default::default() });
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("metrics");
    create_topic(&source.bootstrap, &topic, 2, &[]);
    ok(python_client(&["produce", "--bootstrap", &source.bootstrap, "--topic", &topic, "--count", "500"]), "produce");
    let mirror = start_mirror(&mg, &source, &[&topic], "");
    wait_identical(&src, &dst, &topic, 2, &[]);
    let addr = format!("127.0.0.1:{port}");
    let body = eventually(Duration::from_secs(120), || {
        let body = http_get(&addr, "/metrics");
        let mirroring = format!("mirrorgate_mirror_partitions{{mirror=\"{mirror}\",state=\"MIRRORING\"}} 2");
        let lag = format!("mirrorgate_mirror_max_lag{{mirror=\"{mirror}\"}} 0");
        if body.contains(&mirroring) && body.contains(&lag) {
            Ok(body)
        } else {
            Err(body)
        }
    });
    let bytes_line = body
        .lines()
        .find(|l| l.starts_with(&format!("mirrorgate_mirror_records_total{{mirror=\"{mirror}\"}}")))
        .unwrap_or_else(|| panic!("no records counter: {body}"));
    assert!(bytes_line.ends_with(" 500"), "{bytes_line}");
    assert!(body.contains("mirrorgate_client_connections"), "{body}");
    // The source is read in an incremental fetch session: after the first (full) request the
    // idle partitions' long polls are incremental.
    let incremental = eventually(Duration::from_secs(120), || {
        let body = http_get(&addr, "/metrics");
        let n = body
            .lines()
            .filter(|l| l.starts_with("mirrorgate_mirror_fetch_requests_total{"))
            .filter(|l| l.contains(&format!("mirror=\"{mirror}\"")) && l.contains("kind=\"incremental\""))
            .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0);
        if n >= 3.0 {
            Ok(n)
        } else {
            Err(body)
        }
    });
    assert!(incremental >= 3.0);
}

/// `client.id` reaches the source: a consumer byte-rate quota on that client id on the
/// source slows the mirror down (the broker throttles by the request header's client id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mirror_client_id_is_what_the_source_throttles() {
    let source = cluster("source");
    let dest = cluster("dest");
    let port = free_port_range(1);
    let yaml = format!("metrics:\n  listen: 127.0.0.1:{port}\n");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { extra_yaml: &yaml, ..Default::default() });
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("quota");
    create_topic(&source.bootstrap, &topic, 1, &[]);
    // Small batches: Kafka answers a Fetch whose response alone exceeds the quota over its
    // window (11 s) with a throttle forever (the throttled bytes are not counted, so the rate
    // never drops); a mirror cannot copy a batch larger than that, nor can any consumer.
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &topic,
            "--count",
            "6000",
            "--prop",
            "batch.size=2000",
        ]),
        "produce",
    );
    let client_id = unique_name("throttled-mirror");
    kafka_tool_ok(
        V,
        "configs",
        &[
            "--bootstrap-server",
            &source.bootstrap,
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            &client_id,
            "--add-config",
            "consumer_byte_rate=10000",
        ],
        None,
    );
    let t = std::time::Instant::now();
    // Small responses, so that the quota acts between them.
    start_mirror(
        &mg,
        &source,
        &[&topic],
        &format!("client.id={client_id}\nfetch.max.bytes=16384\nfetch.response.max.bytes=16384\n"),
    );
    wait_identical(&src, &dst, &topic, 1, &[]);
    let took = t.elapsed();
    let end = block(src.list_offsets(&topic, 0, -1)).unwrap();
    eprintln!("6000 records under a 10000 B/s quota in {took:?}");
    assert_eq!(end, 6000);
    // The source answered throttled Fetches (KIP-219): the quota on that client id applied.
    let body = http_get(&format!("127.0.0.1:{port}"), "/metrics");
    let throttled = body
        .lines()
        .filter(|l| l.starts_with("mirrorgate_mirror_fetch_throttled_total{"))
        .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(throttled >= 1.0, "no throttled Fetch in {took:?}: the quota on client id {client_id} did not apply");
}

/// The in-flight budget (`mirror.inflight.max.bytes`) against the real source: while a copy
/// loop holds fetched records that fill the budget, the next Fetch waits; once they are
/// dropped (appended), it goes out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetched_records_held_by_a_copy_loop_hold_back_the_next_fetch() {
    use mirrorgate::mirror::dataplane::mux::FetchMux;
    use mirrorgate::mirror::dataplane::source::FetchSettings;

    let source = cluster("source");
    let topic = unique_name("budget");
    create_topic(&source.bootstrap, &topic, 2, &[]);
    for p in 0..2 {
        let p = p.to_string();
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                &topic,
                "--count",
                "3000",
                "--partition",
                &p,
            ]),
            "produce",
        );
    }
    let src = client(&source.bootstrap);
    let cap = 16 << 10;
    let settings = FetchSettings {
        max_wait: Duration::from_millis(100),
        backoff: Duration::from_millis(100),
        min_bytes: 1,
        response_max_bytes: 1 << 20,
        partition_max_bytes: 1 << 20,
        inflight_max_bytes: cap,
        ..FetchSettings::default()
    };
    let mux = FetchMux::new(src, settings, "test");
    let held = mux.fetch(&topic, 0, 0, -1).await.expect("fetch partition 0");
    assert!(!held.records.is_empty(), "partition 0 returned no records");
    let taken = mux.inflight_bytes();
    assert!(taken > 0 && taken <= cap as usize, "the held records take room in the budget: {taken}");

    // Another partition on the same broker: its Fetch waits for room.
    let next = {
        let mux = mux.clone();
        let topic = topic.clone();
        tokio::spawn(async move { mux.fetch(&topic, 1, 0, -1).await })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!next.is_finished(), "a Fetch went out while the budget was full");
    drop(held);
    let got = tokio::time::timeout(Duration::from_secs(60), next).await.expect("the Fetch never went out").unwrap();
    let got = got.expect("fetch partition 1");
    assert!(!got.records.is_empty(), "partition 1 returned no records");
    assert!(mux.inflight_bytes() > 0 && mux.inflight_bytes() <= cap as usize);
    drop(got);
    assert_eq!(mux.inflight_bytes(), 0, "room given back once the records are dropped");
}

/// The mirror's fetcher ([`FetchMux`]) against the real source: records come back complete
/// and in order per partition, idle partitions stay out of the incremental requests, and news
/// on an idle partition (left out of the request) still arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fetcher_reads_in_an_incremental_session_and_loses_nothing() {
    use mirrorgate::client::cluster::LATEST_TIMESTAMP;
    use mirrorgate::mirror::dataplane::mux::FetchMux;
    use mirrorgate::mirror::dataplane::source::FetchSettings;
    use mirrorgate::wire::batch::BatchIter;
    use std::sync::atomic::Ordering::Relaxed;

    let source = cluster("source");
    let topic = unique_name("session");
    create_topic(&source.bootstrap, &topic, 4, &[]);
    let src = client(&source.bootstrap);
    let settings = FetchSettings {
        max_wait: Duration::from_millis(100),
        backoff: Duration::from_millis(100),
        min_bytes: 1,
        response_max_bytes: 1 << 20,
        // Small: every partition takes several rounds to read.
        partition_max_bytes: 8 << 10,
        inflight_max_bytes: 64 << 20,
        ..FetchSettings::default()
    };
    let mux = FetchMux::new(src.clone(), settings, "test");

    // Reads each partition from `from[p]` to `to[p]`, checking that batches follow each other
    // without a hole, then long-polls `idle_polls` times at the end expecting nothing.
    async fn read(mux: std::sync::Arc<FetchMux>, topic: String, p: i32, from: i64, to: i64, idle_polls: usize) -> i64 {
        let mut at = from;
        let mut records = 0i64;
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while at < to {
            assert!(std::time::Instant::now() < deadline, "{topic}-{p} stuck at {at} of {to}");
            let chunk = mux.fetch(&topic, p, at, -1).await.expect("fetch");
            assert_eq!(chunk.error_code, 0, "{topic}-{p} at {at}");
            for b in BatchIter::new(chunk.records.clone()) {
                let b = b.expect("batch");
                assert_eq!(b.base_offset(), at, "{topic}-{p}: a batch does not start where the last ended");
                records += i64::from(b.record_count());
                at = b.next_offset();
            }
        }
        assert_eq!(at, to, "{topic}-{p}");
        for _ in 0..idle_polls {
            let chunk = mux.fetch(&topic, p, at, -1).await.expect("fetch");
            assert_eq!((chunk.error_code, chunk.records.len(), chunk.high_watermark), (0, 0, to), "idle {topic}-{p}");
        }
        records
    }

    let ends = |src: &ClusterClient| -> Vec<i64> {
        (0..4).map(|p| block(src.list_offsets(&topic, p, LATEST_TIMESTAMP)).unwrap()).collect()
    };
    ok(python_client(&["produce", "--bootstrap", &source.bootstrap, "--topic", &topic, "--count", "2000"]), "produce");
    let first = ends(&src);
    assert_eq!(first.iter().sum::<i64>(), 2000, "{first:?}");
    let tasks: Vec<_> =
        (0..4).map(|p| tokio::spawn(read(mux.clone(), topic.clone(), p, 0, first[p as usize], 5))).collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 2000);
    let stats = mux.stats();
    let (full, incremental) = (stats.full.load(Relaxed), stats.incremental.load(Relaxed));
    let (listed, answered) = (stats.partitions_listed.load(Relaxed), stats.partitions_answered.load(Relaxed));
    eprintln!("full {full}, incremental {incremental}, partitions listed {listed}, answered {answered}");
    assert!(full >= 1 && incremental > full, "full {full}, incremental {incremental}");
    assert!(listed < answered, "idle partitions were listed every time: listed {listed}, answered {answered}");
    assert_eq!(stats.session_resets.load(Relaxed), 0);

    // News while the session holds every partition at its end.
    ok(python_client(&["produce", "--bootstrap", &source.bootstrap, "--topic", &topic, "--count", "1000"]), "produce");
    let second = ends(&src);
    let tasks: Vec<_> = (0..4)
        .map(|p| tokio::spawn(read(mux.clone(), topic.clone(), p, first[p as usize], second[p as usize], 1)))
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_append_time_source_keeps_its_timestamps_through_mirrorgate() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("lat");
    create_topic(&source.bootstrap, &topic, 1, &["message.timestamp.type=LogAppendTime"]);
    ok(python_client(&["produce", "--bootstrap", &source.bootstrap, "--topic", &topic, "--count", "200"]), "produce");
    start_mirror(&mg, &source, &[&topic], "");
    wait_identical(&src, &dst, &topic, 1, &[]);
    let on_source = consume_all(&source.bootstrap, &topic, 200, "read_committed");
    let via = consume_all(&mg.bootstrap, &topic, 200, "read_committed");
    // librdkafka: timestamp type 2 = LogAppendTime, the same append times as on the source.
    assert!(on_source.iter().all(|r| r["timestamp_type"] == 2), "{:?}", on_source.first());
    assert!(
        on_source == via,
        "timestamps or types differ through mirrorgate: {:?} vs {:?}",
        on_source.first(),
        via.first()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_open_at_failover_is_never_visible_and_the_topic_is_writable() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("open-txn");
    create_topic(&source.bootstrap, &topic, 1, &[]);
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &topic,
            "--count",
            "20",
            "--prefix",
            "before",
        ]),
        "produce",
    );
    let mirror = start_mirror(&mg, &source, &[&topic], "");
    wait_identical(&src, &dst, &topic, 1, &[]);
    // A transaction stays open on the source while failing over.
    let cp = String::from_utf8(
        Command::new(repo().join("scripts/kafka.sh")).args(["classpath", "4.1.1"]).output().unwrap().stdout,
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
    // More committed data after the open transaction's records (held back by the LSO).
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &topic,
            "--count",
            "5",
            "--prefix",
            "after-open",
        ]),
        "produce",
    );
    std::thread::sleep(Duration::from_secs(2));
    ok(mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &topic]), "--stop");
    // Writable at once.
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &mg.bootstrap,
            "--topic",
            &topic,
            "--count",
            "1",
            "--prefix",
            "failover",
        ]),
        "produce after --stop",
    );
    let seen = consume_all(&mg.bootstrap, &topic, 21, "read_committed");
    let values: Vec<&str> = seen.iter().map(|r| r["value"].as_str().unwrap()).collect();
    assert!(values.iter().all(|v| !v.starts_with('o')), "records of the open transaction are visible: {values:?}");
    assert!(values.contains(&"failover-0"), "{values:?}");
    let _ = open.kill();
    let _ = open.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failback_onto_a_deleted_destination_topic_reseeds_it() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("reseed");
    create_topic(&source.bootstrap, &topic, 2, &[]);
    ok(python_client(&["produce", "--bootstrap", &source.bootstrap, "--topic", &topic, "--count", "300"]), "produce");
    let mirror = start_mirror(&mg, &source, &[&topic], "");
    wait_identical(&src, &dst, &topic, 2, &[]);
    ok(mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &topic]), "--stop");
    // The operator throws the destination copy away (allowed once STOPPED) and starts again.
    kafka_tool_ok(V, "topics", &["--bootstrap-server", &mg.bootstrap, "--delete", "--topic", &topic], None);
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            &source.bootstrap,
            "--topic",
            &topic,
            "--count",
            "100",
            "--prefix",
            "later",
        ]),
        "produce",
    );
    eventually(Duration::from_secs(120), || {
        let out = mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]);
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    let reports = wait_identical(&src, &dst, &topic, 2, &[]);
    assert_eq!(reports.iter().map(|r| r.records).sum::<i64>(), 400);
    for (p, r) in reports.iter().enumerate() {
        assert_eq!((r.destination_end, r.skipped_offsets), (r.source_end, 0), "partition {p} re-seeded from 0: {r:?}");
    }
    let rows = describe_json(&mg, &mirror);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r["state"] == "MIRRORING"), "{rows:?}");
}

/// Pause and resume (docs/operations.md): a paused topic copies nothing and stays PAUSED;
/// pausing it again answers MIRROR_TOPIC_ALREADY_PAUSED (140), resuming a topic that is not
/// paused MIRROR_TOPIC_NOT_PAUSED (141), both with exit status 1; after `--resume` the copy
/// continues where it stopped and the destination ends where the source does. While paused,
/// source retention (DeleteRecords) removes 30 offsets the mirror had not copied: counted by
/// `mirrorgate_mirror_lost_offsets_total`, filled on the destination, the rest copied. Then
/// a graceful shutdown (SIGTERM: exit status 0) and a restart that continues the copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_with_their_errors_and_offsets_lost_meanwhile() {
    let source = cluster("source");
    let dest = cluster("dest");
    let port = free_port_range(1);
    let yaml = format!("metrics:\n  listen: 127.0.0.1:{port}\n");
    let state_topic = unique_name("__mirror_state-pause");
    let opts = || MirrorgateOptions { extra_yaml: &yaml, state_topic: Some(&state_topic), ..Default::default() };
    let mut mg = Mirrorgate::start_with(&dest, opts());
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("pause");
    create_topic(&source.bootstrap, &topic, 1, &[]);
    let produce = |prefix: &str, count: &str| {
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                &topic,
                "--count",
                count,
                "--prefix",
                prefix,
            ]),
            "produce",
        )
    };
    produce("before", "100");
    let mirror = start_mirror(&mg, &source, &[&topic], "");
    wait_identical(&src, &dst, &topic, 1, &[]);
    let refused = |action: &str, name: &str| {
        let out = mirrors_cli(&mg.bootstrap, &[action, "--mirror", &mirror, "--topics", &topic]);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{action}: {text}");
        assert!(text.contains(&format!("Error: {name}: topic {topic}")), "{action}: {text}");
    };
    refused("--resume", "MIRROR_TOPIC_NOT_PAUSED");

    ok(mirrors_cli(&mg.bootstrap, &["--pause", "--mirror", &mirror, "--topics", &topic]), "--pause");
    eventually(Duration::from_secs(60), || {
        let rows = describe_json(&mg, &mirror);
        (rows.len() == 1 && rows[0]["state"] == "PAUSED").then_some(()).ok_or(format!("{rows:?}"))
    });
    refused("--pause", "MIRROR_TOPIC_ALREADY_PAUSED");
    // Two writes (100..129, 130..149): the source log start can then move to a batch boundary.
    produce("paused", "30");
    produce("kept", "20");
    // Nothing is copied while paused (a negative check: a few fetch intervals).
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(block(dst.list_offsets(&topic, 0, -1)).unwrap(), 100, "copied while paused");
    let rows = describe_json(&mg, &mirror);
    assert_eq!(rows[0]["state"], "PAUSED", "{rows:?}");
    // Retention on the source removes 100..129 before they were copied.
    block(mirrorgate::mirror::dataplane::partition::delete_records(&src, &topic, 0, 130)).unwrap();
    assert_eq!(block(src.list_offsets(&topic, 0, -2)).unwrap(), 130);

    ok(mirrors_cli(&mg.bootstrap, &["--resume", "--mirror", &mirror, "--topics", &topic]), "--resume");
    let reports = wait_identical(&src, &dst, &topic, 1, &[]);
    assert_eq!((reports[0].records, reports[0].destination_end), (20, 150), "{reports:?}");
    let addr = format!("127.0.0.1:{port}");
    eventually(Duration::from_secs(60), || {
        let body = http_get(&addr, "/metrics");
        let lost = body.lines().find_map(|l| l.strip_prefix("mirrorgate_mirror_lost_offsets_total ")).map(str::trim);
        (lost == Some("30")).then_some(()).ok_or(format!("lost offsets {lost:?}"))
    });
    // The lost range reads as nothing at the same offsets: the kept records at 130..149.
    let via = consume_all(&mg.bootstrap, &topic, 20, "read_committed");
    let got: Vec<(i64, &str)> =
        via.iter().map(|r| (r["offset"].as_i64().unwrap(), r["value"].as_str().unwrap())).collect();
    let want: Vec<(i64, String)> = (0..20).map(|i| (130 + i, format!("kept-{i}"))).collect();
    assert!(got.iter().zip(&want).all(|(g, w)| g.0 == w.0 && g.1 == w.1) && got.len() == 20, "{got:?}");

    // Graceful shutdown (docs/operations.md, "Restarts and upgrades"): SIGTERM, exit status 0;
    // started again on the same state topic, the copy continues.
    let status = mg.terminate(Duration::from_secs(60));
    assert!(status.success(), "exit status after SIGTERM: {status:?}\n{}", tail(&mg.log(), 20));
    assert!(mg.log().contains("SIGTERM received, shutting down"), "{}", tail(&mg.log(), 20));
    produce("after-restart", "10");
    let mg = Mirrorgate::start_with(&dest, opts());
    let reports = wait_identical(&src, &dst, &topic, 1, &[]);
    assert_eq!((reports[0].records, reports[0].destination_end), (30, 160), "{reports:?}");
    let rows = describe_json(&mg, &mirror);
    assert_eq!((rows.len(), rows[0]["state"].as_str()), (1, Some("MIRRORING")), "{rows:?}");
    eventually(Duration::from_secs(60), || {
        let rows = describe_json(&mg, &mirror);
        (rows.len() == 1 && rows[0]["state"] == "MIRRORING").then_some(()).ok_or(format!("{rows:?}"))
    });
}

/// Number of batches and their bytes in `topic`-`p` below `end`, read raw from the leader.
fn batches_of(c: &ClusterClient, topic: &str, p: i32, end: i64) -> (usize, i64) {
    let mut offset = 0;
    let (mut n, mut bytes) = (0, 0);
    while offset < end {
        let f = block(c.fetch(topic, p, offset, 1 << 20)).unwrap();
        let before = offset;
        for b in mirrorgate::wire::batch::BatchIter::new(f.records.clone()) {
            let b = b.unwrap();
            if b.next_offset() > offset {
                n += 1;
                bytes += b.bytes().len() as i64;
                offset = b.next_offset();
            }
        }
        assert!(offset > before, "{topic}-{p}: no batch at {offset}");
    }
    (n, bytes)
}

/// Issue 13, item 2: one-record uncompressed source batches are merged into far fewer
/// destination batches (`mirror.coalesce.max.bytes`, on by default), and every record still
/// sits at its source offset with its timestamp, key, value and headers: read through
/// mirrorgate, and straight from the destination as an application reads it once mirrorgate
/// is gone, at both isolation levels; `--verify` compares them record by record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_uncompressed_batches_are_merged_and_every_record_reads_the_same() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("merge");
    create_topic(&source.bootstrap, &topic, 2, &[]);
    let one_per_batch = |count: &str, prefix: &str| {
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                &topic,
                "--count",
                count,
                "--prefix",
                prefix,
                "--prop",
                "linger.ms=0",
                "--prop",
                "batch.num.messages=1",
                "--prop",
                "compression.type=none",
            ]),
            "produce one record per batch",
        )
    };
    // One-record batches, then batched records with headers and nulls (uncompressed, and
    // lz4, which is never merged), then one-record batches again.
    one_per_batch("1500", "a");
    for (codec, seed) in [("none", "1"), ("lz4", "2")] {
        ok(
            python_client(&[
                "produce-mixed",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                &topic,
                "--count",
                "1000",
                "--codec",
                codec,
                "--seed",
                seed,
            ]),
            "produce-mixed",
        );
    }
    one_per_batch("1500", "b");
    let total = 5000;
    start_mirror(&mg, &source, &[&topic], "");
    let reports = wait_identical(&src, &dst, &topic, 2, &[]);
    assert_eq!(reports.iter().map(|r| r.records).sum::<i64>(), total as i64, "{reports:?}");
    // Far fewer batches on the destination, at the same offsets.
    for p in 0..2 {
        let end = block(src.list_offsets(&topic, p, mirrorgate::client::cluster::LATEST_TIMESTAMP)).unwrap();
        let dest_end = block(dst.list_offsets(&topic, p, mirrorgate::client::cluster::LATEST_TIMESTAMP)).unwrap();
        assert_eq!(dest_end, end, "{topic}-{p}");
        let (on_source, on_dest) = (batches_of(&src, &topic, p, end).0, batches_of(&dst, &topic, p, end).0);
        assert!(on_source > 1000, "{topic}-{p}: {on_source} source batches");
        assert!(on_dest * 5 < on_source, "{topic}-{p}: {on_dest} destination batches for {on_source} source batches");
    }
    let on_source = consume_all(&source.bootstrap, &topic, total, "read_committed");
    assert_eq!(on_source.len(), total);
    for (bootstrap, isolation) in
        [(&mg.bootstrap, "read_committed"), (&dest.bootstrap, "read_committed"), (&dest.bootstrap, "read_uncommitted")]
    {
        let got = consume_all(bootstrap, &topic, total, isolation);
        assert!(got == on_source, "records differ reading {bootstrap} at {isolation}");
    }
}

/// The compression codec of every data batch of `topic`-`p` below `end` (control batches and
/// placeholders left out).
fn data_codecs(c: &ClusterClient, topic: &str, p: i32, end: i64) -> Vec<i16> {
    let mut offset = 0;
    let mut codecs = Vec::new();
    while offset < end {
        let f = block(c.fetch(topic, p, offset, 1 << 20)).unwrap();
        let before = offset;
        for b in mirrorgate::wire::batch::BatchIter::new(f.records.clone()) {
            let b = b.unwrap();
            if b.next_offset() > offset {
                if !b.is_control() && !b.is_placeholder() {
                    codecs.push(b.compression());
                }
                offset = b.next_offset();
            }
        }
        assert!(offset > before, "{topic}-{p}: no batch at {offset}");
    }
    codecs
}

/// Issue 13, item 2, the opt-in: with `mirror.coalesce.recompress=true`, one-record lz4 source
/// batches (keys and null keys, binary headers with duplicate keys) are merged into
/// far fewer lz4 destination batches, and every record still sits at its source offset with
/// its timestamp, key, value and headers (read through mirrorgate and straight from the
/// destination; `--verify` compares them record by record). With the default (off), the same
/// source keeps one destination batch per source batch, payloads byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_lz4_batches_are_recompressed_and_merged_only_with_the_opt_in() {
    use mirrorgate::wire::records::codec;
    let source = cluster("source");
    let dest = cluster("dest");
    let port = free_port_range(1);
    let yaml = format!("metrics:\n  listen: 127.0.0.1:{port}\n");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { extra_yaml: &yaml, ..Default::default() });
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let (on, off) = (unique_name("recompress"), unique_name("keep-lz4"));
    let total = 2000;
    for topic in [&on, &off] {
        create_topic(&source.bootstrap, topic, 2, &[]);
        ok(
            python_client(&[
                "produce-mixed",
                "--bootstrap",
                &source.bootstrap,
                "--topic",
                topic,
                "--count",
                &total.to_string(),
                "--codec",
                "lz4",
                "--seed",
                "3",
                "--prop",
                "linger.ms=0",
                "--prop",
                "batch.num.messages=1",
                // (librdkafka sends a batch uncompressed when lz4 would not make it smaller.)
                "--compressible",
            ]),
            "produce-mixed, one record per batch",
        );
    }
    let mirror_on = start_mirror(&mg, &source, &[&on], "mirror.coalesce.recompress=true\n");
    let mirror_off = start_mirror(&mg, &source, &[&off], "");
    for topic in [&on, &off] {
        let reports = wait_identical(&src, &dst, topic, 2, &[]);
        assert_eq!(reports.iter().map(|r| r.records).sum::<i64>(), total as i64, "{topic}: {reports:?}");
    }
    for mirror in [&mirror_on, &mirror_off] {
        let verified = ok(mirrors_cli(&mg.bootstrap, &["--verify", "--mirror", mirror]), "--verify");
        assert!(verified.contains("2 identical, 0 different"), "{verified}");
    }
    for p in 0..2 {
        let end = block(src.list_offsets(&on, p, mirrorgate::client::cluster::LATEST_TIMESTAMP)).unwrap();
        let (on_source, on_dest) = (batches_of(&src, &on, p, end).0, batches_of(&dst, &on, p, end).0);
        assert!(on_source as i64 == end && on_source > 500, "{on}-{p}: {on_source} source batches for {end} records");
        let codecs = data_codecs(&src, &on, p, end);
        assert!(codecs.iter().all(|c| *c == codec::LZ4), "{on}-{p}: source codecs {codecs:?}");
        assert!(on_dest * 10 < on_source, "{on}-{p}: {on_dest} destination batches for {on_source} source batches");
        let codecs = data_codecs(&dst, &on, p, end);
        assert!(codecs.iter().all(|c| *c == codec::LZ4), "{on}-{p}: destination codecs {codecs:?}");
        // Off (the default): one destination batch per source batch (`--verify` above compared
        // their payloads byte for byte).
        let end = block(src.list_offsets(&off, p, mirrorgate::client::cluster::LATEST_TIMESTAMP)).unwrap();
        let (off_source, off_dest) = (batches_of(&src, &off, p, end).0, batches_of(&dst, &off, p, end).0);
        assert!(off_source as i64 == end, "{off}-{p}: {off_source} source batches for {end} records");
        assert_eq!(off_dest, off_source, "{off}-{p}: compressed batches are not merged by default");
        assert!(data_codecs(&dst, &off, p, end).iter().all(|c| *c == codec::LZ4));
    }
    let on_source = consume_all(&source.bootstrap, &on, total, "read_committed");
    assert_eq!(on_source.len(), total);
    for (bootstrap, isolation) in
        [(&mg.bootstrap, "read_committed"), (&dest.bootstrap, "read_committed"), (&dest.bootstrap, "read_uncommitted")]
    {
        let got = consume_all(bootstrap, &on, total, isolation);
        assert!(got == on_source, "records differ reading {bootstrap} at {isolation}");
    }
    // Operators see the recompressed merges, per mirror; none for the mirror without the opt-in.
    let addr = format!("127.0.0.1:{port}");
    let count = |body: &str, name: &str, mirror: &str| {
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}{{mirror=\"{mirror}\"}} ")))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // (Counted as each append is acknowledged: all of them once the source batches are counted.)
    let body = eventually(Duration::from_secs(30), || {
        let body = http_get(&addr, "/metrics");
        if count(&body, "mirrorgate_mirror_recompressed_source_batches_total", &mirror_on) >= 1000.0 {
            Ok(body)
        } else {
            Err(body)
        }
    });
    let recompressed = count(&body, "mirrorgate_mirror_recompressed_appends_total", &mirror_on);
    assert!(recompressed > 0.0, "no recompressed appends counted: {body}");
    assert!(count(&body, "mirrorgate_mirror_coalesced_appends_total", &mirror_on) >= recompressed, "{body}");
    assert_eq!(count(&body, "mirrorgate_mirror_recompressed_appends_total", &mirror_off), 0.0, "{body}");
}

/// Issue 13, item 3: `mirror.replication.throttled.rate` caps the mirror's source fetch rate
/// across all its fetchers (`mirror.num.replica.fetchers` = 3 here, each a fetch session on a
/// connection of its own), and every partition is still copied whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_mirror_with_several_fetchers_copies_everything_at_the_capped_rate() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("throttled");
    create_topic(&source.bootstrap, &topic, 3, &[]);
    let props = format!("bootstrap.servers={} compression.type=none linger.ms=5", source.bootstrap);
    let mut args = vec!["--topic", &topic, "--num-records", "2000", "--record-size", "1000", "--throughput", "-1"];
    args.push("--producer-props");
    args.extend(props.split(' '));
    kafka_tool_ok(V, "producer-perf", &args, None);
    let total_bytes: i64 = (0..3)
        .map(|p| {
            let end = block(src.list_offsets(&topic, p, mirrorgate::client::cluster::LATEST_TIMESTAMP)).unwrap();
            batches_of(&src, &topic, p, end).1
        })
        .sum();
    assert!(total_bytes > 2_000_000, "{total_bytes} bytes on the source");
    let rate = 250_000;
    let started = std::time::Instant::now();
    start_mirror(
        &mg,
        &source,
        &[&topic],
        &format!("mirror.replication.throttled.rate={rate}\nmirror.num.replica.fetchers=3\n"),
    );
    let reports = wait_identical(&src, &dst, &topic, 3, &[]);
    let took = started.elapsed();
    assert_eq!(reports.iter().map(|r| r.records).sum::<i64>(), 2000, "{reports:?}");
    // One second of burst, then at most `rate` bytes/s: well over 6 s for > 2 MB.
    let floor = Duration::from_secs_f64((total_bytes - rate) as f64 / rate as f64 * 0.8);
    assert!(took >= floor, "copied {total_bytes} bytes in {took:?}, faster than {rate} bytes/s allows ({floor:?})");
}
