//! Source batches the mirror writes as several Produce requests, against real Kafka 4.1.1
//! clusters: compacted batches with holes inside (split into dense runs and holes at the
//! byte level) and an aborted transaction larger than one placeholder chunk.
//!
//! - Splitting changes no record: duplicate header keys, header keys that are not UTF-8,
//!   null values (tombstones, with the cleaner's delete horizon), every codec, CreateTime and
//!   LogAppendTime topics come out byte for byte identical.
//! - An interruption between two Produce requests of one source batch resumes inside the
//!   batch: mirrorgate exits at a test failpoint (`MIRRORGATE_FAILPOINT=mid-batch:N`, an
//!   exit without cleanup, as after a kill -9) between the appends of one batch, is started
//!   again, and the partition ends MIRRORING with the destination identical to the source.
//!
//! Tests run one at a time (`SERIAL`): the machine may have few cores.

mod support;

use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use mirrorgate::client::cluster::{Acks, ClusterClient, ClusterOptions};
use mirrorgate::mirror::verify::verify_partition;
use mirrorgate::wire::batch::{BatchIter, HEADER_LEN, LOG_OVERHEAD};
use mirrorgate::wire::records::{self, codec, put_record, walk, NewRecord};
use mirrorgate::wire::split::{records_section, ATTR_DELETE_HORIZON};
use serde_json::Value;
use support::*;

const V: &str = "4.1.1";

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Brokers whose log cleaner looks for work every 500 ms (default 15 s).
const FAST_CLEANER: &[&str] = &["log.cleaner.backoff.ms=500"];

/// Compacted, segments rolled at the next append after 100 ms, cleaned as soon as anything is
/// dirty; tombstones kept for a day (the default), so null values stay on the source.
const COMPACT: [&str; 3] = ["cleanup.policy=compact", "segment.ms=100", "min.cleanable.dirty.ratio=0.01"];

const CODECS: [i16; 5] = [codec::NONE, codec::GZIP, codec::SNAPPY, codec::LZ4, codec::ZSTD];

/// Records per written batch.
const PER_BATCH: i32 = 20;

fn create_topic(bootstrap: &str, topic: &str, configs: &[&str]) {
    let mut args = vec!["--bootstrap-server", bootstrap, "--create", "--topic", topic];
    args.extend(["--partitions", "1", "--replication-factor", "1"]);
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

/// One client batch (no producer id, base offset 0) of `records` compressed with `codec`.
fn client_batch(codec: i16, base_ts: i64, records: &[NewRecord<'_>]) -> Bytes {
    let mut section = BytesMut::new();
    for r in records {
        put_record(&mut section, r);
    }
    let payload = records::compress(codec, &section).unwrap();
    let max_delta = records.iter().map(|r| r.timestamp_delta).max().unwrap_or(0);
    let mut out = BytesMut::new();
    out.put_i64(0);
    out.put_i32((HEADER_LEN - LOG_OVERHEAD + payload.len()) as i32);
    out.put_i32(-1);
    out.put_i8(2);
    out.put_u32(0);
    out.put_i16(codec);
    out.put_i32(records.len() as i32 - 1);
    out.put_i64(base_ts);
    out.put_i64(base_ts + max_delta);
    out.put_i64(-1);
    out.put_i16(-1);
    out.put_i32(-1);
    out.put_i32(records.len() as i32);
    out.put_slice(&payload);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// Writes `rounds` rounds of one batch per codec to partition 0 of `topic`: round 0 writes
/// keys 0..20 of each codec's key space, every later round rewrites the even keys only, so
/// the cleaner leaves the earlier batches with a hole at every even offset. Every record has
/// headers `k=1, dup=a, dup=a, \xff\xfe=null, ""=""`; every fourth value is null (a tombstone).
/// Waits until the cleaner has made holes inside at least `5 * (rounds - 1)` batches.
fn write_holey_source(src: &ClusterClient, topic: &str, rounds: usize) {
    // Timestamps of the present: `segment.ms` rolls a segment by record time.
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    for round in 0..rounds {
        for c in CODECS {
            let keys: Vec<String> = (0..PER_BATCH)
                .filter(|i| round == 0 || i % 2 == 0)
                .map(|i| format!("c{c}-k{i}"))
                .chain((0..PER_BATCH / 2).filter(|_| round > 0).map(|i| format!("c{c}-r{round}-x{i}")))
                .collect();
            let values: Vec<Vec<u8>> = (0..keys.len())
                .map(|i| format!("r{round}-v{i}-\u{e9}").into_bytes().into_iter().chain([0xff, 0]).collect())
                .collect();
            let recs: Vec<NewRecord<'_>> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| NewRecord {
                    timestamp_delta: (i as i64) * 7 - 3,
                    offset_delta: i as i32,
                    key: Some(k.as_bytes()),
                    value: (i % 4 != 3).then(|| values[i].as_slice()),
                    headers: vec![
                        (b"k", Some(b"1")),
                        (b"dup", Some(b"a")),
                        (b"dup", Some(b"a")),
                        (b"\xff\xfe", None),
                        (b"", Some(b"")),
                    ],
                })
                .collect();
            block(src.produce(topic, 0, client_batch(c, now(), &recs), Acks::All)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    // One more record rolls the last round's segment.
    let tail = [NewRecord { key: Some(b"end"), value: Some(b"end"), ..Default::default() }];
    block(src.produce(topic, 0, client_batch(codec::NONE, now(), &tail), Acks::All)).unwrap();
    let want = CODECS.len() * (rounds - 1);
    eventually(Duration::from_secs(240), || {
        let inside = raw_batches(src, topic).iter().filter(|b| b.2 > 0 && i64::from(b.2) < b.1 - b.0 + 1).count();
        if inside >= want {
            Ok(())
        } else {
            Err(format!("cleaner made holes inside {inside} batches, waiting for {want}"))
        }
    });
}

/// `(base, last, record count, is control, is placeholder, bytes)` of every batch of
/// partition 0, read_uncommitted, from the log start to the high watermark.
fn raw_batches(c: &ClusterClient, topic: &str) -> Vec<(i64, i64, i32, bool, bool, Bytes)> {
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
            out.push((
                b.base_offset(),
                b.last_offset(),
                b.record_count(),
                b.is_control(),
                b.is_placeholder(),
                b.bytes().clone(),
            ));
        }
        assert!(offset > before, "no progress reading {topic} at {offset} (hw {hw})");
    }
    out
}

/// What a consumer reads of every data record: `(offset, timestamp, key + value + headers as
/// their raw bytes)` (the LogAppendTime bit makes a record read as its batch's max timestamp).
fn records_read(c: &ClusterClient, topic: &str) -> Vec<(i64, i64, Vec<u8>)> {
    let mut out = Vec::new();
    for (_, _, _, control, placeholder, bytes) in raw_batches(c, topic) {
        if control || placeholder {
            continue;
        }
        let b = BatchIter::new(bytes).next().unwrap().unwrap();
        let section = records_section(&b, 64 << 20).unwrap();
        for r in walk(&section, b.record_count()).unwrap() {
            let ts = if b.is_log_append_time() { b.max_timestamp() } else { b.base_timestamp() + r.timestamp_delta };
            out.push((b.base_offset() + i64::from(r.offset_delta), ts, r.tail().to_vec()));
        }
    }
    out
}

/// The source's records, read through mirrorgate from the destination, are the same bytes.
fn assert_same_records(src: &ClusterClient, via: &ClusterClient, topic: &str) -> usize {
    let s = records_read(src, topic);
    let d = records_read(via, topic);
    if let Some(i) = (0..s.len().max(d.len())).find(|i| s.get(*i) != d.get(*i)) {
        panic!(
            "{topic}: record {i} differs: source {:?}\n destination {:?}",
            s.get(i).map(|r| (r.0, r.1, String::from_utf8_lossy(&r.2).into_owned())),
            d.get(i).map(|r| (r.0, r.1, String::from_utf8_lossy(&r.2).into_owned()))
        );
    }
    s.len()
}

fn start_mirror(mg: &Mirrorgate, source: &Cluster, topics: &[&str]) -> String {
    start_mirror_with(mg, source, topics, "")
}

/// Like [`start_mirror`] with extra mirror configs (properties lines).
fn start_mirror_with(mg: &Mirrorgate, source: &Cluster, topics: &[&str], extra: &str) -> String {
    let mirror = unique_name("m");
    let cfg = mirror_config_file(source, extra);
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topics.join(",")]), "--start");
    mirror
}

fn describe_rows(mg: &Mirrorgate, mirror: &str) -> Vec<Value> {
    let out = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", mirror, "--json"]), "--describe --json");
    serde_json::from_str::<Value>(&out).unwrap().as_array().unwrap().clone()
}

/// Waits until the destination ends where the source does; panics at once on FAILED.
fn wait_copied(mg: &Mirrorgate, mirror: &str, src: &ClusterClient, dst: &ClusterClient, topic: &str) {
    let src_end = block(src.list_offsets(topic, 0, -1)).unwrap();
    let mut polls = 0;
    eventually(Duration::from_secs(180), || {
        polls += 1;
        if polls % 10 == 1 {
            if let Some(r) = describe_rows(mg, mirror).iter().find(|r| r["state"] == "FAILED") {
                panic!("{}-{} FAILED: {}", r["topic"], r["partition"], r["errorMessage"]);
            }
        }
        let end = block(dst.list_offsets(topic, 0, -1)).map_err(|e| e.to_string())?;
        (end == src_end).then_some(()).ok_or_else(|| format!("destination end {end}, source end {src_end}"))
    });
}

fn assert_mirroring(mg: &Mirrorgate, mirror: &str) {
    let rows = describe_rows(mg, mirror);
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r["state"], "MIRRORING", "{rows:#?}");
    }
}

/// Compacted batches with holes inside, on a CreateTime and a LogAppendTime topic, with every
/// codec: each record reads back through mirrorgate with the same offset, timestamp and key,
/// value and header bytes (duplicate and non-UTF-8 header keys, null values); `--verify`
/// agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_compacted_batches_keep_every_record_byte_for_byte() {
    let _serial = serial();
    let t0 = Instant::now();
    let source = cluster_with("source-split", 1, V, FAST_CLEANER);
    let dest = cluster("dest-split");
    let mg = Mirrorgate::start(&dest);
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let create_time = unique_name("split-ct");
    let append_time = unique_name("split-lat");
    create_topic(&source.bootstrap, &create_time, &COMPACT);
    let mut lat = COMPACT.to_vec();
    lat.push("message.timestamp.type=LogAppendTime");
    create_topic(&source.bootstrap, &append_time, &lat);
    for t in [&create_time, &append_time] {
        write_holey_source(&src, t, 3);
        // Holes inside batches of every codec, and the cleaner's delete horizon on some.
        let holey: Vec<_> = raw_batches(&src, t)
            .into_iter()
            .filter(|b| b.2 > 0 && i64::from(b.2) < b.1 - b.0 + 1)
            .map(|b| BatchIter::new(b.5).next().unwrap().unwrap())
            .collect();
        let codecs: std::collections::BTreeSet<i16> = holey.iter().map(|b| b.compression()).collect();
        assert_eq!(codecs.len(), CODECS.len(), "{t}: holes inside batches of codecs {codecs:?}");
        assert!(holey.iter().any(|b| b.attributes() & ATTR_DELETE_HORIZON != 0), "{t}: no delete horizon");
    }
    let mirror = start_mirror(&mg, &source, &[&create_time, &append_time]);
    let via = client(&mg.bootstrap);
    for t in [&create_time, &append_time] {
        wait_copied(&mg, &mirror, &src, &dst, t);
        let n = assert_same_records(&src, &via, t);
        let dup = records_read(&src, t).iter().filter(|r| r.2.windows(8).any(|w| w == b"\x06dup\x02a\x06d")).count();
        // Every record but the one that rolled the last segment has the headers.
        assert!(n > 100 && dup == n - 1, "{t}: {n} records, {dup} with the duplicate header");
        let report = block(verify_partition(&src, &via, t, 0, &[], None)).unwrap();
        assert_eq!(report.records as usize, n, "{report:?}");
    }
    assert_mirroring(&mg, &mirror);
    eprintln!("split: passed in {:?}", t0.elapsed());
}

/// Runs mirrorgate with `config` (an instance's config file) and `MIRRORGATE_FAILPOINT`
/// until it exits; returns whether it exited at the failpoint (false: still running after
/// `timeout`, then killed).
fn run_until_failpoint(config: &std::path::Path, failpoint: &str, log: &std::path::Path, timeout: Duration) -> bool {
    let out = std::fs::File::create(log).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mirrorgate"))
        .args(["run", "--config"])
        .arg(config)
        .env_remove("RUST_LOG")
        .env("MIRRORGATE_FAILPOINT", failpoint)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code() == Some(86);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// Mirrors `topic` with mirrorgate exiting at `MIRRORGATE_FAILPOINT=mid-batch:N` (between two
/// Produce requests of one source batch) up to `kills` times, restarting it each time, then
/// once more without the failpoint; returns the final instance, its mirror and the number
/// of exits at the failpoint.
fn mirror_through_kills(
    dest: &Cluster,
    source: &Cluster,
    topic: &str,
    every: u32,
    kills: u32,
    extra: &str,
) -> (Mirrorgate, String, u32) {
    let state = unique_name("__mirror_state-split");
    let fp = format!("mid-batch:{every}");
    let env = [("MIRRORGATE_FAILPOINT", fp.as_str())];
    let mut first =
        Mirrorgate::start_with(dest, MirrorgateOptions { state_topic: Some(&state), env: &env, ..Default::default() });
    let mirror = start_mirror_with(&first, source, &[topic], extra);
    let mut exits = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while first.is_running() {
        assert!(Instant::now() < deadline, "mirrorgate never reached the failpoint:\n{}", tail(&first.log(), 30));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(first.log().contains("MIRRORGATE_FAILPOINT mid-batch"), "{}", tail(&first.log(), 30));
    exits += 1;
    let config = first.config_path.clone();
    drop(first);
    for k in 1..kills {
        let log = config.with_extension(format!("restart{k}.log"));
        if !run_until_failpoint(&config, &fp, &log, Duration::from_secs(60)) {
            break;
        }
        exits += 1;
    }
    let mg = Mirrorgate::start_with(dest, MirrorgateOptions { state_topic: Some(&state), ..Default::default() });
    (mg, mirror, exits)
}

/// A compacted source whose batches have a hole at every other offset (about 20 Produce
/// requests per batch): mirrorgate exits between two of them, again and again; each restart
/// resumes inside the batch. The partition ends MIRRORING and identical, record for record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_batch_interrupted_between_its_appends_resumes_inside_it() {
    let _serial = serial();
    let t0 = Instant::now();
    let source = cluster_with("source-split", 1, V, FAST_CLEANER);
    let dest = cluster("dest-split");
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("split-kill");
    create_topic(&source.bootstrap, &topic, &COMPACT);
    write_holey_source(&src, &topic, 3);
    let (mg, mirror, exits) = mirror_through_kills(&dest, &source, &topic, 7, 6, "");
    wait_copied(&mg, &mirror, &src, &dst, &topic);
    let via = client(&mg.bootstrap);
    let n = assert_same_records(&src, &via, &topic);
    block(verify_partition(&src, &via, &topic, 0, &[], None)).unwrap();
    assert_mirroring(&mg, &mirror);
    assert!(exits >= 3, "only {exits} exits at the failpoint");
    eprintln!("split kill: {exits} exits mid-batch, {n} records identical, {:?}", t0.elapsed());
}

/// One aborted transaction of 6000 records in a single source batch (more than one 5000-offset
/// placeholder chunk), between committed records: mirrorgate exits after the first chunk and
/// is started again; the fill resumes inside the batch and the partition ends MIRRORING with
/// every committed record at its source offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_transaction_interrupted_mid_fill_resumes_inside_it() {
    let _serial = serial();
    let t0 = Instant::now();
    let source = cluster_with("source-split", 1, V, FAST_CLEANER);
    let dest = cluster("dest-split");
    let (src, dst) = (client(&source.bootstrap), client(&dest.bootstrap));
    let topic = unique_name("big-abort");
    create_topic(&source.bootstrap, &topic, &[]);
    let aborted: Vec<String> = (0..6000).map(|i| format!("a{i}")).collect();
    let aborted = aborted.join(",");
    let txn = |commit: &str, abort: &str, id: &str| {
        let out = java_program(
            V,
            "TxnProducer.java",
            &[
                "--bootstrap-server",
                &source.bootstrap,
                "--topic",
                &topic,
                "--transactional-id",
                id,
                "--partition",
                "0",
                "--commit",
                commit,
                "--abort",
                abort,
                "--prop",
                "batch.size=1000000",
                "--prop",
                "linger.ms=30000",
                "--prop",
                "delivery.timeout.ms=120000",
            ],
        );
        ok(out, "TxnProducer");
    };
    txn("c0,c1,c2", &aborted, &unique_name("txn"));
    txn("c3,c4,c5", "", &unique_name("txn"));
    let big = raw_batches(&src, &topic).into_iter().map(|b| b.1 - b.0 + 1).max().unwrap();
    assert!(big > 5000, "the aborted transaction is not one batch of more than 5000 offsets (largest {big})");
    // Placeholders for the aborted records: the fill of 6000 offsets is what is interrupted (with
    // real markers the batch is one aborted append, tests/real_markers.rs).
    let (mg, mirror, exits) =
        mirror_through_kills(&dest, &source, &topic, 1, 1, "mirror.transaction.markers=placeholder\n");
    assert_eq!(exits, 1);
    wait_copied(&mg, &mirror, &src, &dst, &topic);
    let via = client(&mg.bootstrap);
    let report = block(verify_partition(&src, &via, &topic, 0, &[], None)).unwrap();
    assert_eq!((report.records, report.destination_end), (6, report.source_end), "{report:?}");
    let s = records_read(&src, &topic);
    // Tail bytes end with the value and a header count of 0: "...c3\0".
    let committed: Vec<_> = s.iter().filter(|r| r.2.len() > 3 && r.2[r.2.len() - 3] == b'c').cloned().collect();
    let d = records_read(&via, &topic);
    assert_eq!(committed.len(), 6);
    assert_eq!(d, committed, "through mirrorgate");
    assert_mirroring(&mg, &mirror);
    eprintln!("big abort: passed in {:?}", t0.elapsed());
}

/// A compacted batch whose split needs more memory than the whole in-flight budget
/// (`mirror.inflight.max.bytes=100`) fails the partition, non-retryable, naming the sizes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_larger_than_the_inflight_budget_fails_naming_the_sizes() {
    let _serial = serial();
    let source = cluster_with("source-split", 1, V, FAST_CLEANER);
    let dest = cluster("dest-split");
    let src = client(&source.bootstrap);
    let topic = unique_name("split-budget");
    create_topic(&source.bootstrap, &topic, &COMPACT);
    write_holey_source(&src, &topic, 2);
    let mg = Mirrorgate::start(&dest);
    let mirror = start_mirror_with(&mg, &source, &[&topic], "mirror.inflight.max.bytes=100\n");
    let row = eventually(Duration::from_secs(120), || {
        let rows = describe_rows(&mg, &mirror);
        rows.into_iter().find(|r| r["state"] == "FAILED").ok_or_else(|| "not FAILED yet".to_string())
    });
    let msg = row["errorMessage"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("compacted source batch") && msg.contains("mirror.inflight.max.bytes is 100"), "{row:#?}");
    assert_eq!(row["retryAttempt"], -1, "{row:#?}");
}
