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

/// A batch layout offset by offset: what each offset is (data, transactional data, marker),
/// without the batch boundaries. Consecutive small uncompressed batches are merged into one
/// destination batch when the in-flight budget has room at that moment
/// (`mirror.coalesce.max.bytes`, on by default), so boundaries depend on timing; offsets and
/// kinds do not.
fn per_offset(layout: Vec<(i64, i64, Kind)>) -> BTreeSet<(i64, Kind)> {
    layout.into_iter().flat_map(|(b, e, k)| (b..=e).map(move |o| (o, k.clone()))).collect()
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
    txn_producer(
        V,
        &source.bootstrap,
        &topic,
        &["--commit", "c1,c2", "--abort", "x-a1,x-a2", "--order", "abort-first"],
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
    // (Resumed at the epoch the coordinator reported, the slot is fenced with InitProducerId
    // once its transaction ended: Empty at the next epoch. Where its ABORT marker landed is
    // checked with the layout below.)
    let described = txn_state(&dest.bootstrap, &slot);
    assert!(
        described.contains("Empty") && !described.contains("Ongoing"),
        "the resumed transaction ended by its ABORT, then fenced: {described}"
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        block(dst.list_offsets(&topic, 0, -1)).unwrap(),
        e0,
        "nothing of A is copied while its marker is above the LSO"
    );
    std::fs::write(&gate, b"go").unwrap();
    let out = interleaved.join().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("COMMITTED"), "InterleavedTxns: {out:?}");

    // (The source is final: InterleavedTxns committed. `--verify` compares the data, which may
    // pass while the last COMMIT marker is still being copied: wait for that too.)
    let src_end = block(src.list_offsets(&topic, 0, -1)).unwrap();
    let report: VerifyReport = eventually(Duration::from_secs(120), || {
        let report = block(verify_partition(&src, &dst, &topic, 0, &[], None))?;
        if report.destination_end == src_end {
            Ok(report)
        } else {
            Err(format!("the destination ends at {}, the source at {src_end}: {report:?}", report.destination_end))
        }
    });
    assert_eq!(report.source_end, src_end, "{report:?}");
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
            per_offset(dest_layout.clone()),
            per_offset(expected_layout(&source_layout, &aborted)),
            "{when}: destination batches {dest_layout:?} (source {source_layout:?})"
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

/// The destination's transaction coordinator may write one of mirrorgate's markers where the
/// source has none: it re-sends WriteTxnMarkers to a partition's new leader that already holds
/// the marker (a fault run saw the same marker land twice), or it ends one of mirrorgate's
/// transactions on its timeout while mirrorgate is away. Staged here by ending two empty
/// transactions of the partition's marker transactional id while mirrorgate is down, before
/// the source has anything after its last marker. The next process hides those two offsets
/// behind a new offset segment instead of failing the partition (or, as before when the
/// source had nothing there yet, taking them for copied source offsets and skipping the
/// records that come next), and goes on: through mirrorgate every offset reads as on the
/// source; a direct reader skips the two control batches and sees later offsets two ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_of_mirrorgates_where_the_source_has_none_are_hidden_and_the_copy_goes_on() {
    use mirrorgate::client::txn::{self, AnyBroker, Node, TxnProducer, TxnProtocol};

    let source = cluster("source");
    let dest = cluster("dest");
    let state = unique_name("__mirror_state-stray");
    let port = free_port_range(12);
    let start = || {
        Mirrorgate::start_in_front_of(
            &dest.bootstrap,
            FrontOptions { first_port: Some(port), ..FrontOptions::default() },
            MirrorgateOptions { state_topic: Some(&state), ..Default::default() },
        )
    };
    let (src, dst) = (plaintext_client(&source.bootstrap), plaintext_client(&dest.bootstrap));
    let topic = unique_name("stray");
    create_topic_with(V, &source.bootstrap, &topic, 1, &[]);
    let commit = |values: &str| txn_producer(V, &source.bootstrap, &topic, &["--commit", values]);
    // Source 0..2 p-*, 3..4 c1 c2, 5 their COMMIT marker (written as a real marker).
    produce_to_partition_0(&source.bootstrap, &topic, 3, "p");
    commit("c1,c2");
    assert_eq!(block(src.list_offsets(&topic, 0, -1)).unwrap(), 6);

    let mg = start();
    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    eventually(Duration::from_secs(120), || match block(dst.list_offsets(&topic, 0, -1)) {
        Ok(6) => Ok(()),
        other => Err(format!("destination end {other:?}, waiting for 6")),
    });
    assert_eq!(layout(&dst, &topic).last(), Some(&(5, 5, Kind::Marker(true))), "the source's marker, real");
    drop(mg);

    // Two markers of mirrorgate's marker transactional id at destination 6 and 7, where the
    // source has nothing yet.
    let marker_id = format!("mirrorgate.{}.{mirror}.{topic}.0.m", mirror.len());
    let (node, _, _) = txn::find_coordinator(&mut AnyBroker(&dst), &marker_id).await.expect("FindCoordinator");
    let mut conn = Node { client: &dst, node_id: node };
    let mut stray = TxnProducer::init(&mut conn, &marker_id, 60_000, TxnProtocol::V1).await.expect("InitProducerId");
    for end in [7, 8] {
        let codes = stray.add_partitions(&mut conn, &[(topic.as_str(), 0)]).await.expect("AddPartitionsToTxn");
        assert_eq!(codes, [0]);
        stray.end(&mut conn, true).await.expect("EndTxn");
        eventually(Duration::from_secs(30), || match block(dst.list_offsets(&topic, 0, -1)) {
            Ok(e) if e == end => Ok(()),
            other => Err(format!("destination end {other:?}, waiting for {end}")),
        });
    }
    let direct = layout(&dst, &topic);
    assert_eq!(&direct[direct.len() - 2..], [(6, 6, Kind::Marker(true)), (7, 7, Kind::Marker(true))]);

    // The next process hides them; the source moves on after that.
    let mg = start();
    eventually(Duration::from_secs(60), || {
        let rows = describe_json(&mg, &mirror);
        match rows[0]["segments"].as_array().map(Vec::len) {
            Some(2) => Ok(()),
            _ => Err(format!("waiting for the second offset segment: {rows:?}")),
        }
    });
    // Source 6..9 p2-*, 10 d1, 11 its marker.
    produce_to_partition_0(&source.bootstrap, &topic, 4, "p2");
    commit("d1");
    let src_end = block(src.list_offsets(&topic, 0, -1)).unwrap();
    assert_eq!(src_end, 12);
    eventually(Duration::from_secs(120), || match block(dst.list_offsets(&topic, 0, -1)) {
        Ok(e) if e == src_end + 2 => Ok(()),
        other => Err(format!("destination end {other:?}, waiting for {}", src_end + 2)),
    });
    let rows = describe_json(&mg, &mirror);
    assert_eq!(rows[0]["state"], "MIRRORING", "{rows:?}");
    assert_eq!(rows[0]["segments"], serde_json::json!([[0, 0], [6, 8]]), "{rows:?}");
    assert_eq!(rows[0]["directReads"], "shifted by -2", "{rows:?}");
    assert_eq!(rows[0]["lag"], 0, "{rows:?}");

    // Read directly: the source's batches, two control batches more at 6 and 7.
    let mut expected: Vec<(i64, i64, Kind)> = expected_layout(&layout(&src, &topic), &BTreeSet::new())
        .into_iter()
        .map(|(b, l, k)| if b >= 6 { (b + 2, l + 2, k) } else { (b, l, k) })
        .collect();
    expected.extend([(6, 6, Kind::Marker(true)), (7, 7, Kind::Marker(true))]);
    // Offset by offset: merged one-record batches change batch boundaries, not offsets or kinds.
    assert_eq!(per_offset(layout(&dst, &topic)), per_offset(expected));

    assert_eq!(
        block(dst.list_offsets(&topic, 0, -2)).unwrap(),
        0,
        "the destination log start stays (DeleteRecords follows the source's through the offset map)"
    );
    // Through mirrorgate: every record at its source offset, nothing twice, at both
    // isolation levels, for librdkafka and the Java consumer.
    for isolation in ["read_committed", "read_uncommitted"] {
        let from_source = records(&source.bootstrap, &topic, 10, isolation);
        assert_eq!(
            values(&from_source),
            ["p-0", "p-1", "p-2", "c1", "c2", "p2-0", "p2-1", "p2-2", "p2-3", "d1"],
            "{isolation}"
        );
        assert_eq!(
            records(&mg.bootstrap, &topic, 10, isolation),
            from_source,
            "librdkafka {isolation} through mirrorgate"
        );
        assert_eq!(
            java_read(&mg.bootstrap, &topic, 10, isolation),
            java_read(&source.bootstrap, &topic, 10, isolation),
            "Java consumer {isolation} through mirrorgate"
        );
    }
    let segments = [
        mirrorgate::mirror::model::OffsetSegment { source_start: 0, destination_start: 0 },
        mirrorgate::mirror::model::OffsetSegment { source_start: 6, destination_start: 8 },
    ];
    let report: VerifyReport = block(verify_partition(&src, &dst, &topic, 0, &segments, None)).expect("--verify");
    assert_eq!((report.records, report.source_end, report.destination_end), (10, 12, 14), "{report:?}");
    assert!(
        mg.log().contains("those destination offsets are hidden behind a new offset segment"),
        "{}",
        tail(&mg.log(), 30)
    );
}
