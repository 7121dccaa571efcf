//! Captures the fuzz seed corpora (`fuzz/corpus/<target>/`) from real traffic: real Kafka
//! 4.1.1 brokers, real clients (the Java console producer and consumer, librdkafka, a Java
//! transactional producer, Kafka's admin tools, mirrorgate's `mirrors` CLI) and a real
//! mirror, recorded on the wire.
//!
//! Not a test of the product: it is `#[ignore]`d and run on purpose when the corpora should be
//! refreshed (docs/reliability.md):
//!
//! ```text
//! MIRRORGATE_CACHE=/work/cache cargo test --test fuzz_corpus -- --ignored --nocapture
//! ```
//!
//! How: mirrorgate listens on 127.0.0.1 and advertises 127.0.0.2; a recording relay on
//! 127.0.0.2 (same ports) forwards every connection to 127.0.0.1 and keeps each frame in both
//! directions, so every client connection (bootstrap and per broker) passes through it. The
//! mirror's own Fetch v12 answers from the source and the `__mirror_state` records are read
//! with mirrorgate's client. It fails when a capture step does not see what it needs (no
//! frame of an api key, no compacted batch with a hole, no state record).

mod support;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::wire::batch::BatchIter;
use mirrorgate::wire::header;
use mirrorgate::wire::mirror::{MirrorApi, MirrorApiTable};
use support::*;

const V: &str = "4.1.1";

/// Largest seed file kept (bytes); bigger frames are left out.
const MAX_SEED: usize = 48 * 1024;

/// One recorded frame: connection id, whether it went client → server, the frame (no length
/// prefix).
type Recorded = (usize, bool, Bytes);

/// A relay on 127.0.0.2:`first..first+count` forwarding to 127.0.0.1 on the same ports.
struct Relay {
    frames: Arc<Mutex<Vec<Recorded>>>,
}

impl Relay {
    fn start(first: u16, count: u16) -> Self {
        let frames = Arc::new(Mutex::new(Vec::new()));
        let next_conn = Arc::new(Mutex::new(0usize));
        for port in first..first + count {
            let listener = TcpListener::bind(("127.0.0.2", port)).expect("bind 127.0.0.2 (loopback alias)");
            let (frames, next_conn) = (frames.clone(), next_conn.clone());
            std::thread::spawn(move || {
                for client in listener.incoming().flatten() {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else { continue };
                    let id = {
                        let mut n = next_conn.lock().unwrap();
                        *n += 1;
                        *n
                    };
                    for (from, to, up) in [
                        (client.try_clone().unwrap(), server.try_clone().unwrap(), true),
                        (server.try_clone().unwrap(), client.try_clone().unwrap(), false),
                    ] {
                        let frames = frames.clone();
                        std::thread::spawn(move || pipe(from, to, id, up, frames));
                    }
                }
            });
        }
        Self { frames }
    }

    fn frames(&self) -> Vec<Recorded> {
        self.frames.lock().unwrap().clone()
    }
}

/// Copies `from` to `to`, recording each complete length-prefixed frame.
fn pipe(mut from: TcpStream, mut to: TcpStream, id: usize, up: bool, frames: Arc<Mutex<Vec<Recorded>>>) {
    let mut pending = BytesMut::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        pending.extend_from_slice(&buf[..n]);
        while pending.len() >= 4 {
            let len = i32::from_be_bytes([pending[0], pending[1], pending[2], pending[3]]) as usize;
            if pending.len() < 4 + len {
                break;
            }
            let frame = pending.split_to(4 + len).freeze().slice(4..);
            frames.lock().unwrap().push((id, up, frame));
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn corpus_dir(target: &str) -> PathBuf {
    let d = repo().join("fuzz/corpus").join(target);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `data` as `dir/name` unless it is larger than [`MAX_SEED`]; returns whether it did.
fn seed(dir: &Path, name: &str, data: &[u8]) -> bool {
    if data.len() > MAX_SEED {
        return false;
    }
    std::fs::write(dir.join(name), data).unwrap();
    true
}

fn client(bootstrap: &str) -> ClusterClient {
    block(ClusterClient::connect(ClusterOptions::new(bootstrap.split(',').map(String::from).collect()))).unwrap()
}

fn create_topic(bootstrap: &str, topic: &str, configs: &[&str]) {
    let mut args = vec!["--bootstrap-server", bootstrap, "--create", "--topic", topic];
    args.extend(["--partitions", "1", "--replication-factor", "1"]);
    for c in configs {
        args.extend(["--config", c]);
    }
    kafka_tool_ok(V, "topics", &args, None);
}

fn console_produce(bootstrap: &str, topic: &str, compression: &str, lines: &str) {
    kafka_tool_ok(
        V,
        "console-producer",
        &[
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--compression-codec",
            compression,
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ],
        Some(lines),
    );
}

fn console_consume(bootstrap: &str, topic: &str, n: usize, isolation: &str) -> String {
    kafka_tool_ok(
        V,
        "console-consumer",
        &[
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            &n.to_string(),
            "--isolation-level",
            isolation,
            "--timeout-ms",
            "60000",
        ],
        None,
    )
}

/// Keys `k0..k{n}` with values of a few shapes (text, bytes-like, empty) as console lines.
fn lines(prefix: &str, n: usize) -> String {
    (0..n).map(|i| format!("{prefix}-k{}:{prefix}-value-{i}-{}\n", i % 7, "x".repeat(i % 13))).collect()
}

/// One Fetch v12 (the data plane's version) of `topic`-0 from `offset`, as the response body
/// kafka-protocol encodes back from the broker's answer (the records are the broker's bytes).
fn fetch_v12_body(c: &ClusterClient, topic: &str, offset: i64) -> Bytes {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(40 * 1024)
        .with_isolation_level(1)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_current_leader_epoch(-1)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(40 * 1024)])]);
    let leader = block(c.leader_for(topic, 0)).unwrap();
    let resp = block(c.send_to_node(leader.node_id, &req, 12)).unwrap();
    let mut out = BytesMut::new();
    resp.encode(&mut out, 12).unwrap();
    out.freeze()
}

/// Raw `records` of `topic`-`partition` from the log start, up to about 40 KiB.
fn raw_records(c: &ClusterClient, topic: &str, partition: i32) -> Bytes {
    let start = block(c.list_offsets(topic, partition, -2)).unwrap();
    block(c.fetch(topic, partition, start, 40 * 1024)).unwrap().records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "captures fuzz/corpus from real traffic; run on purpose (see the module doc)"]
async fn capture_fuzz_corpora() {
    let src = cluster_with("fuzzsrc", 1, V, &["log.cleaner.backoff.ms=500"]);
    let dst = cluster("fuzzdst");
    let mg = Mirrorgate::start_with(&dst, MirrorgateOptions { advertised_host: "127.0.0.2", ..Default::default() });
    let relay = Relay::start(mg.first_port, 12);
    let via = mg.bootstrap.clone();

    // --- Source topics: plain, every codec, transactional (committed + aborted), compacted.
    let plain = unique_name("fz-plain");
    let txn = unique_name("fz-txn");
    let compacted = unique_name("fz-compact");
    create_topic(&src.bootstrap, &plain, &[]);
    create_topic(&src.bootstrap, &txn, &[]);
    create_topic(
        &src.bootstrap,
        &compacted,
        &["cleanup.policy=compact", "segment.ms=100", "min.cleanable.dirty.ratio=0.01"],
    );
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        console_produce(&src.bootstrap, &plain, codec, &lines(codec, 12));
    }
    ok(
        java_program(
            V,
            "TxnProducer.java",
            &[
                "--bootstrap-server",
                &src.bootstrap,
                "--topic",
                &txn,
                "--transactional-id",
                &unique_name("fz-tid"),
                "--commit",
                "a,b,c",
                "--abort",
                "x,y",
                "--order",
                "abort-first",
            ],
        ),
        "TxnProducer",
    );
    // Compacted: the same keys rewritten in rounds, so the cleaner leaves holes inside the
    // older batches (one batch per console-producer line group and codec).
    for round in 0..4 {
        for codec in ["none", "gzip", "lz4"] {
            let l: String =
                (0..10).filter(|i| round == 0 || i % 2 == 0).map(|i| format!("{codec}-k{i}:r{round}-{i}\n")).collect();
            console_produce(&src.bootstrap, &compacted, codec, &l);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    console_produce(&src.bootstrap, &compacted, "none", "end:end\n");
    let sc = client(&src.bootstrap);
    eventually(Duration::from_secs(240), || {
        let records = raw_records(&sc, &compacted, 0);
        let holey = BatchIter::new(records)
            .map_while(Result::ok)
            .filter(|b| b.record_count() > 0 && i64::from(b.record_count()) < b.last_offset() - b.base_offset() + 1)
            .count();
        if holey >= 2 {
            Ok(())
        } else {
            Err(format!("cleaner made holes inside {holey} batches, waiting for 2"))
        }
    });

    // --- Fetch v12 answers from the source (what the data plane decodes) and raw records.
    let fetch_dir = corpus_dir("fetch_batches");
    for (name, topic) in [("plain", &plain), ("txn", &txn), ("compacted", &compacted)] {
        let body = fetch_v12_body(&sc, topic, 0);
        let mut input = vec![1u8, 0];
        input.extend_from_slice(&body);
        assert!(seed(&fetch_dir, &format!("fetch-v12-{name}"), &input), "Fetch v12 answer of {name} too large");
        let records = raw_records(&sc, topic, 0);
        for (k, b) in BatchIter::new(records).map_while(Result::ok).enumerate().take(8) {
            for from in [0u8, 1] {
                let mut input = vec![if from == 1 { 2 } else { 0 }, from];
                input.extend_from_slice(b.bytes());
                seed(&fetch_dir, &format!("batch-{name}-{k}-from{from}"), &input);
            }
        }
    }

    // --- A mirror of those topics: mirror RPCs through the relay, state records written.
    let cfg = mirror_config_file(&src, "");
    let mirror = unique_name("fzm");
    ok(mirrors_cli(&via, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]), "--create");
    ok(
        mirrors_cli(&via, &["--start", "--mirror", &mirror, "--topics", &format!("{plain},{txn},{compacted}")]),
        "--start",
    );
    ok(mirrors_cli(&via, &["--list"]), "--list");
    ok(mirrors_cli(&via, &["--describe", "--mirror", &mirror, "--json"]), "--describe");
    let _ = mirrors_cli(&via, &["--describe", "--mirror", "no-such-mirror"]);
    let _ = mirrors_cli(&via, &["--pause", "--mirror", &mirror, "--topics", &plain]);
    let _ = mirrors_cli(&via, &["--resume", "--mirror", &mirror, "--topics", &plain]);
    eventually(Duration::from_secs(120), || {
        let out = mirrors_cli(&via, &["--describe", "--mirror", &mirror, "--json"]);
        let s = String::from_utf8_lossy(&out.stdout).to_string();
        if s.matches("MIRRORING").count() >= 3 {
            Ok(())
        } else {
            Err(format!("waiting for 3 MIRRORING partitions: {s}"))
        }
    });

    // --- Client traffic through mirrorgate: produce (every codec, idempotent librdkafka,
    // transactions), consume at both isolation levels (mirror topics carry placeholders as
    // control batches), admin requests the read-only gate walks.
    let local = unique_name("fz-local");
    create_topic(&via, &local, &[]);
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        console_produce(&via, &local, codec, &lines(codec, 5));
    }
    ok(
        python_client(&["produce", "--bootstrap", &via, "--topic", &local, "--count", "20", "--idempotent"]),
        "librdkafka produce",
    );
    ok(
        java_program(
            V,
            "TxnProducer.java",
            &[
                "--bootstrap-server",
                &via,
                "--topic",
                &local,
                "--transactional-id",
                &unique_name("fz-tid"),
                "--commit",
                "c1,c2",
                "--abort",
                "a1",
            ],
        ),
        "TxnProducer via mirrorgate",
    );
    // A write to a mirror topic: refused by the gate (POLICY_VIOLATION), the exit status
    // does not matter here.
    let _ = kafka_tool(V, "console-producer", &["--bootstrap-server", &via, "--topic", &plain], Some("refused\n"));
    console_consume(&via, &local, 47, "read_committed");
    console_consume(&via, &plain, 60, "read_uncommitted");
    console_consume(&via, &txn, 3, "read_committed");
    ok(
        python_client(&[
            "consume",
            "--bootstrap",
            &via,
            "--topic",
            &compacted,
            "--group",
            &unique_name("fz-g"),
            "--count",
            "5",
        ]),
        "librdkafka consume",
    );
    kafka_tool_ok(V, "topics", &["--bootstrap-server", &via, "--describe", "--topic", &local], None);
    kafka_tool_ok(
        V,
        "configs",
        &["--bootstrap-server", &via, "--describe", "--entity-type", "topics", "--entity-name", &local],
        None,
    );
    kafka_tool_ok(
        V,
        "configs",
        &[
            "--bootstrap-server",
            &via,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &local,
            "--add-config",
            "retention.ms=86400000",
        ],
        None,
    );
    let _ = kafka_tool(
        V,
        "configs",
        &[
            "--bootstrap-server",
            &via,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &plain,
            "--add-config",
            "retention.ms=1000",
        ],
        None,
    );
    let _ =
        kafka_tool(V, "topics", &["--bootstrap-server", &via, "--alter", "--topic", &plain, "--partitions", "2"], None);
    let offsets = repo().join("target/test-mirrorgate").join(format!("{}.json", unique_name("fz-del")));
    std::fs::write(
        &offsets,
        format!(r#"{{"partitions":[{{"topic":"{plain}","partition":0,"offset":1}}],"version":1}}"#),
    )
    .unwrap();
    let _ = kafka_tool(
        V,
        "delete-records",
        &["--bootstrap-server", &via, "--offset-json-file", offsets.to_str().unwrap()],
        None,
    );
    let _ = kafka_tool(V, "topics", &["--bootstrap-server", &via, "--delete", "--topic", &plain], None);
    let _ = mirrors_cli(&via, &["--stop", "--mirror", &mirror, "--topics", &txn]);

    // --- The destination's copies: placeholder batches where the source had markers,
    // aborted records and compaction holes (the proxy restores them on the way to clients).
    let dc = client(&dst.bootstrap);
    for (name, topic) in [("txn", &txn), ("compacted", &compacted)] {
        let records = raw_records(&dc, topic, 0);
        let placeholders = BatchIter::new(records.clone()).map_while(Result::ok).filter(|b| b.is_placeholder()).count();
        assert!(placeholders > 0, "no placeholder batch in the destination's {name} topic");
        for flags in [0u8, 2] {
            let mut input = vec![flags, 0];
            input.extend_from_slice(&records);
            seed(&fetch_dir, &format!("dest-{name}-lat{flags}"), &input);
        }
    }

    // --- __mirror_state records as mirrorgate wrote them.
    let state_dir = corpus_dir("mirror_state");
    let state_topic = {
        let yaml = std::fs::read_to_string(&mg.config_path).unwrap();
        yaml.lines()
            .find_map(|l| l.trim().strip_prefix("topic: ").map(str::to_string))
            .expect("state topic in the config")
    };
    let mut state_records = 0;
    for partition in 0..3 {
        let records = raw_records(&dc, &state_topic, partition);
        if records.is_empty() {
            continue;
        }
        let mut input = vec![0u8, 3, partition as u8];
        input.extend_from_slice(&records);
        seed(&state_dir, &format!("state-partition-{partition}"), &input);
        for (k, b) in BatchIter::new(records).map_while(Result::ok).enumerate() {
            let mut bytes = b.bytes().clone();
            let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).unwrap();
            for r in &set.records {
                let mut kv = vec![1u8];
                kv.extend_from_slice(r.key.as_deref().unwrap_or_default());
                if let Some(v) = &r.value {
                    kv.push(0xFF);
                    kv.extend_from_slice(v);
                }
                // One seed per distinct record shape is enough; keep the first dozen.
                if k < 12 {
                    seed(&state_dir, &format!("record-p{partition}-{k}"), &kv);
                }
                state_records += 1;
            }
        }
    }
    assert!(state_records >= 4, "expected mirror, topic and partition records in {state_topic}, saw {state_records}");

    // --- The recorded frames: requests, responses (paired by connection and correlation id)
    // and the mirror RPC bodies.
    std::thread::sleep(Duration::from_millis(500));
    let frames = relay.frames();
    let table = MirrorApiTable::default();
    let req_dir = corpus_dir("client_request");
    let resp_dir = corpus_dir("responses");
    let rpc_dir = corpus_dir("mirror_rpc");
    let mut pending: HashMap<(usize, i32), (i16, i16)> = HashMap::new();
    let mut per_kind: BTreeMap<(bool, i16, i16), usize> = BTreeMap::new();
    let mut streams: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
    for (conn, up, frame) in &frames {
        if *up {
            let Ok(prefix) = header::RequestPrefix::parse(frame) else { continue };
            pending.insert((*conn, prefix.correlation_id), (prefix.api_key, prefix.api_version));
            let stream = streams.entry(*conn).or_default();
            if stream.len() + frame.len() + 4 <= MAX_SEED {
                stream.put_i32(frame.len() as i32);
                stream.extend_from_slice(frame);
            }
            let n = per_kind.entry((true, prefix.api_key, prefix.api_version)).or_default();
            if *n < 3 {
                let mut input = (frame.len() as i32).to_be_bytes().to_vec();
                input.extend_from_slice(frame);
                if seed(&req_dir, &format!("req-{}-v{}-{n}", prefix.api_key, prefix.api_version), &input) {
                    *n += 1;
                }
            }
            if let Some(api) = table.lookup(prefix.api_key) {
                let start = header::request_header_len(frame, 2).unwrap();
                let mut input = vec![api_index(api), prefix.api_version as u8];
                input.extend_from_slice(&frame[start..]);
                seed(&rpc_dir, &format!("req-{}-{}", api.name(), frame.len()), &input);
            }
        } else {
            let Ok(cid) = header::response_correlation_id(frame) else { continue };
            let Some((key, version)) = pending.remove(&(*conn, cid)) else { continue };
            if let Some(api) = table.lookup(key) {
                let start = header::response_header_len(frame, 1).unwrap();
                let mut input = vec![api_index(api) | 0x08, version as u8];
                input.extend_from_slice(&frame[start..]);
                seed(&rpc_dir, &format!("resp-{}-{}", api.name(), frame.len()), &input);
                continue;
            }
            let n = per_kind.entry((false, key, version)).or_default();
            if *n < 2 {
                let mut input = vec![0u8];
                input.extend_from_slice(&key.to_be_bytes());
                input.extend_from_slice(&version.to_be_bytes());
                input.extend_from_slice(frame);
                if seed(&resp_dir, &format!("resp-{key}-v{version}-{n}"), &input) {
                    *n += 1;
                }
            }
        }
    }
    for (conn, stream) in streams.iter().take(6) {
        seed(&req_dir, &format!("stream-{conn}"), stream);
    }
    let seen = |up: bool, key: i16| per_kind.iter().any(|((u, k, _), n)| *u == up && *k == key && *n > 0);
    for (key, what) in [
        (0, "Produce"),
        (1, "Fetch"),
        (3, "Metadata"),
        (10, "FindCoordinator"),
        (18, "ApiVersions"),
        (32, "DescribeConfigs"),
        (44, "IncrementalAlterConfigs"),
    ] {
        assert!(seen(true, key), "no {what} request captured");
        assert!(seen(false, key), "no {what} response captured");
    }
    let rpcs = std::fs::read_dir(&rpc_dir).unwrap().count();
    assert!(rpcs >= 8, "only {rpcs} mirror RPC seeds");
    println!("captured {} frames; seeds written under fuzz/corpus/", frames.len());
}

/// The target's selector for `api` (its index in [`MirrorApi::ALL`]).
fn api_index(api: MirrorApi) -> u8 {
    MirrorApi::ALL.iter().position(|a| *a == api).unwrap() as u8
}
