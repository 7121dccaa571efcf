//! Issue 12 item 2 on real clusters: with `mirror.transaction.markers = real` (the default)
//! the destination holds real transaction markers and real aborted records at the source's
//! offsets, no placeholder, so that it reads like the source *without* mirrorgate — during the
//! mirror, and after `--stop` and `--delete` end a migration:
//!
//! - lone COMMIT markers, and aborted records followed by their ABORT marker, with mirrorgate
//!   exiting (as after kill -9) right after opening its destination transaction for them, then
//!   (the next process having taken that transaction over) between an aborted record and its
//!   marker: the last process resumes it and ends it at the marker's offset;
//! - an aborted transaction whose ABORT marker stays above the source's last stable offset
//!   while a second transaction is open: the copy waits before its first record (a
//!   destination transaction must not stay open for as long as a source transaction may);
//! - a direct read of the destination, batch by batch: the same control batches (offset and
//!   type), aborted records as transactional batches at the source's offsets, no placeholder;
//! - librdkafka reading the destination directly at read_committed and read_uncommitted gets
//!   what it gets from the source (offsets, keys, values, timestamps), before and after
//!   `--stop` / `--delete`.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use mirrorgate::client::cluster::ClusterClient;
use mirrorgate::mirror::verify::{verify_partition, VerifyReport};
use mirrorgate::wire::batch::{Batch, BatchIter};
use support::*;

const V: &str = "4.1.1";

/// What a direct reader finds at one batch: `(base offset, last offset, kind)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A control batch: COMMIT (true) or ABORT (false).
    Marker(bool),
    /// Records with the transactional bit.
    Transactional,
    /// Records without it.
    Plain,
    /// A mirrorgate placeholder (must never be found here).
    Placeholder,
}

/// Control record type of a marker batch: the key (version INT16, type INT16) follows the
/// record's length, attributes, timestamp delta, offset delta and key length (one byte each
/// for a marker, but the length).
fn is_commit(b: &Batch) -> bool {
    let payload = b.payload();
    payload.get(5..9).is_some_and(|k| k[2..4] == [0, 1])
}

/// Every batch of partition 0 of `topic` from the log start to the log end (READ_UNCOMMITTED).
fn layout(c: &ClusterClient, topic: &str) -> Vec<(i64, i64, Kind)> {
    let mut offset = block(c.list_offsets(topic, 0, -2)).unwrap();
    let end = block(c.list_offsets(topic, 0, -1)).unwrap();
    let mut out = vec![];
    while offset < end {
        let f = block(c.fetch(topic, 0, offset, 1 << 20)).unwrap();
        let before = offset;
        for b in BatchIter::new(f.records.clone()).map(Result::unwrap) {
            if b.next_offset() <= offset {
                continue;
            }
            offset = b.next_offset();
            let kind = if b.is_placeholder() {
                Kind::Placeholder
            } else if b.is_control() {
                Kind::Marker(is_commit(&b))
            } else if b.is_transactional() {
                Kind::Transactional
            } else {
                Kind::Plain
            };
            out.push((b.base_offset(), b.last_offset(), kind));
        }
        assert!(offset > before, "no progress reading {topic} at {offset} (end {end})");
    }
    out
}

/// The destination layout the source's implies: markers where the source has markers, aborted
/// records (values starting `x-`) as transactional batches, committed records as plain ones.
fn expected_layout(source: &[(i64, i64, Kind)], aborted_offsets: &BTreeSet<i64>) -> Vec<(i64, i64, Kind)> {
    source
        .iter()
        .map(|(base, last, kind)| {
            let kind = match kind {
                Kind::Transactional if aborted_offsets.contains(base) => Kind::Transactional,
                Kind::Transactional => Kind::Plain,
                k => k.clone(),
            };
            (*base, *last, kind)
        })
        .collect()
}

fn records(bootstrap: &str, topic: &str, count: usize, isolation: &str) -> Vec<serde_json::Value> {
    consume_all(bootstrap, topic, count, isolation)
}

fn values(recs: &[serde_json::Value]) -> Vec<String> {
    recs.iter().map(|r| r["value"].as_str().unwrap_or("null").to_string()).collect()
}

/// `Offset:N<TAB>value` lines a Java console consumer (Kafka 4.1, default isolation
/// read_uncommitted unless `isolation` says otherwise) reads from partition 0 of `topic`.
fn java_read(bootstrap: &str, topic: &str, count: usize, isolation: &str) -> Vec<String> {
    let n = count.to_string();
    let args = [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        &n,
        "--timeout-ms",
        "60000",
        "--isolation-level",
        isolation,
        "--property",
        "print.offset=true",
    ];
    kafka_tool_ok(V, "console-consumer", &args, None).lines().map(String::from).collect()
}

fn txn_state(bootstrap: &str, id: &str) -> String {
    let out =
        kafka_tool(V, "transactions", &["--bootstrap-server", bootstrap, "describe", "--transactional-id", id], None);
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_are_mirrored_as_real_markers_and_aborted_records_across_a_kill() {
    let source = cluster("source");
    let dest = cluster("dest");
    let state = unique_name("__mirror_state-markers");
    let port = free_port_range(12);
    let start = || {
        Mirrorgate::start_in_front_of(
            &dest.bootstrap,
            FrontOptions { first_port: Some(port), ..FrontOptions::default() },
            MirrorgateOptions { state_topic: Some(&state), ..Default::default() },
        )
    };
    let mg = start();
    let (src, dst) = (plaintext_client(&source.bootstrap), plaintext_client(&dest.bootstrap));
    let topic = unique_name("markers");
    create_topic_with(V, &source.bootstrap, &topic, 1, &[]);

    // Before the mirror: plain records, then an aborted and a committed transaction of one
    // transactional id (ABORT marker, then a COMMIT marker of committed records).
    produce_to_partition_0(&source.bootstrap, &topic, 5, "p");
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
                "--commit",
                "c1,c2",
                "--abort",
                "x-a1,x-a2",
                "--order",
                "abort-first",
            ],
        ),
        "TxnProducer",
    );
    let e0 = block(src.list_offsets(&topic, 0, -1)).unwrap();

    // Two interleaved transactions: A (x-i1, x-i2) aborted while B (i-b1) is open, so A's
    // ABORT marker is above the source's LSO until B commits (held by a gate file).
    let gate = repo().join("target/test-mirrorgate").join(unique_name("gate"));
    let (bs, t, g, id) = (source.bootstrap.clone(), topic.clone(), gate.clone(), unique_name("itx"));
    let interleaved = std::thread::spawn(move || {
        java_program(
            V,
            "InterleavedTxns.java",
            &[
                "--bootstrap-server",
                &bs,
                "--topic",
                &t,
                "--transactional-id",
                &id,
                "--aborted",
                "x-i1,x-i2",
                "--committed",
                "i-b1,i-b2",
                "--gate",
                g.to_str().unwrap(),
            ],
        )
    });
    // x-i1, x-i2, i-b1 and A's ABORT marker.
    eventually(Duration::from_secs(90), || match block(src.list_offsets(&topic, 0, -1)) {
        Ok(end) if end >= e0 + 4 => Ok(()),
        other => Err(format!("source end {other:?}, waiting for {}", e0 + 4)),
    });

    let mirror = unique_name("m");
    let slot = format!("mirrorgate.{}.{mirror}.{topic}.0.a0", mirror.len());
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    drop(mg);
    let with_failpoint = |fp: &str| {
        Mirrorgate::start_in_front_of(
            &dest.bootstrap,
            FrontOptions { first_port: Some(port), ..FrontOptions::default() },
            MirrorgateOptions { state_topic: Some(&state), env: &[("MIRRORGATE_FAILPOINT", fp)], ..Default::default() },
        )
    };
    let exited = |mg: &mut Mirrorgate, fp: &str| {
        eventually(
            Duration::from_secs(120),
            || if mg.is_running() { Err("still running".to_string()) } else { Ok(()) },
        );
        assert!(mg.log().contains(&format!("MIRRORGATE_FAILPOINT {fp} reached")), "{}", tail(&mg.log(), 30));
    };
    // A mirrorgate that exits (as after kill -9) right after it opened its destination
    // transaction for the aborted records x-a1, x-a2, before writing any of them...
    let mut mg = with_failpoint("slot-added:1");
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    exited(&mut mg, "slot-added:1");
    drop(mg);
    assert!(txn_state(&dest.bootstrap, &slot).contains("Ongoing"), "an open transaction with no record");
    assert_eq!(block(dst.list_offsets(&topic, 0, -1)).unwrap(), 5, "p-0..p-4 copied, nothing of x-a1");
    // ...then one that takes that transaction over and exits right after its first append
    // into it (x-a1), before the ABORT marker.
    let mut mg = with_failpoint("slot-append:1");
    exited(&mut mg, "slot-append:1");
    drop(mg);
    let described = txn_state(&dest.bootstrap, &slot);
    assert!(described.contains("Ongoing"), "the slot transaction is left open: {described}");
    let dest_end = block(dst.list_offsets(&topic, 0, -1)).unwrap();
    assert!((6..=7).contains(&dest_end), "p-0..p-4 and x-a1 (and x-a2) copied: {dest_end}");

    // A new process resumes the open transaction and ends it at the source's ABORT marker;
    // then it copies up to A's first record and waits there: A's ABORT marker is above the
    // source LSO (B is open), so no destination transaction is opened for A yet.
    let mg = start();
    eventually(Duration::from_secs(120), || match block(dst.list_offsets(&topic, 0, -1)) {
        Ok(end) if end == e0 => Ok(()),
        other => Err(format!("destination end {other:?}, waiting for {e0}")),
    });
    let described = txn_state(&dest.bootstrap, &slot);
    assert!(described.contains("CompleteAbort"), "the resumed transaction ended by its ABORT: {described}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        block(dst.list_offsets(&topic, 0, -1)).unwrap(),
        e0,
        "nothing of A is copied while its marker is above the LSO"
    );
    std::fs::write(&gate, b"go").unwrap();
    let out = interleaved.join().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("COMMITTED"), "InterleavedTxns: {out:?}");

    let report: VerifyReport =
        eventually(Duration::from_secs(120), || block(verify_partition(&src, &dst, &topic, 0, &[], None)));
    let src_end = block(src.list_offsets(&topic, 0, -1)).unwrap();
    assert_eq!(report.destination_end, src_end, "the destination ends where the source does: {report:?}");
    let rows = describe_json(&mg, &mirror);
    assert_eq!(
        rows[0]["directReads"], "same",
        "--describe: the destination reads the same without mirrorgate: {rows:?}"
    );
    // A's records went into a destination transaction too, opened and ended in one pass.
    let described = txn_state(&dest.bootstrap, &slot);
    assert!(described.contains("CompleteAbort"), "{described}");

    // Read directly: the destination's batches are the source's, with real markers.
    let check_direct = |when: &str| {
        let source_layout = layout(&src, &topic);
        let dest_layout = layout(&dst, &topic);
        let aborted: BTreeSet<i64> = records(&source.bootstrap, &topic, 13, "read_uncommitted")
            .iter()
            .filter(|r| r["value"].as_str().is_some_and(|v| v.starts_with("x-")))
            .map(|r| r["offset"].as_i64().unwrap())
            .collect();
        assert_eq!(aborted.len(), 4, "{when}: aborted source records");
        assert!(!dest_layout.iter().any(|(_, _, k)| *k == Kind::Placeholder), "{when}: placeholder in {dest_layout:?}");
        assert_eq!(
            dest_layout,
            expected_layout(&source_layout, &aborted),
            "{when}: destination batches (source {source_layout:?})"
        );
        assert_eq!(dest_layout.iter().filter(|(_, _, k)| matches!(k, Kind::Marker(_))).count(), 4, "{when}: markers");
        for isolation in ["read_committed", "read_uncommitted"] {
            let count = if isolation == "read_committed" { 9 } else { 13 };
            let from_source = records(&source.bootstrap, &topic, count, isolation);
            let from_dest = records(&dest.bootstrap, &topic, count, isolation);
            assert_eq!(from_dest, from_source, "{when}: librdkafka {isolation}, destination read directly");
            let java_source = java_read(&source.bootstrap, &topic, count, isolation);
            assert_eq!(java_source.len(), count, "{when}: Java {isolation} on the source: {java_source:?}");
            assert_eq!(
                java_read(&dest.bootstrap, &topic, count, isolation),
                java_source,
                "{when}: Java consumer {isolation}, destination read directly"
            );
            if isolation == "read_committed" {
                assert_eq!(
                    values(&from_dest),
                    ["p-0", "p-1", "p-2", "p-3", "p-4", "c1", "c2", "i-b1", "i-b2"],
                    "{when}: committed values"
                );
            }
        }
    };
    check_direct("while mirroring");

    // The end of a migration: the destination stays a plain, correct Kafka topic.
    ok(mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", ".*"]), "--stop");
    ok(mirrors_cli(&mg.bootstrap, &["--delete", "--mirror", &mirror]), "--delete");
    drop(mg);
    check_direct("after --stop and --delete, mirrorgate stopped");
}
