//! What filling a large removed head costs on a real broker, and removing it again: the
//! measurement behind `mirror.fill.max.gap` (docs/performance.md "Filling a removed head").
//!
//! For each head-fill encoding, a fresh one-partition topic gets `MIRRORGATE_BENCH_HEAD`
//! offsets (default 100,000,000) appended as the copy loop does it (one batch in flight,
//! acks=all, sequence = offset under one idempotent producer id), then one DeleteRecords
//! moves its log start to the end of the head. Reported per encoding: fill time and rate,
//! bytes sent, bytes on the broker's disk after the fill, broker CPU seconds (utime + stime
//! of the broker process, from /proc) during the fill, and the DeleteRecords time.
//!
//! Encodings (`MIRRORGATE_BENCH_ENCODINGS`, comma separated, default all):
//! - `placeholder`: what the mirror writes, [`placeholder_batch`] — uncompressed, one record
//!   per offset with a 24-byte magic key and a null value, 5,000 offsets per batch;
//! - `placeholder-zstd`: the same records zstd-compressed, 50,000 offsets per batch;
//! - `minimal`: uncompressed records with a null key and a null value (7-9 bytes each; not
//!   recognisable as placeholders, and refused on compacted topics), 50,000 per batch;
//! - `minimal-zstd`: the same, zstd-compressed, 200,000 offsets per batch.
//!
//! Run: `make bench-fill-head` (or `cargo bench --bench fill_head`); starts a 1-node Kafka
//! 4.1.1 with scripts/kafka.sh. Not part of CI: 100 M offsets write ≈ 3 GB.

use std::process::Command;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use mirrorgate::client::cluster::{Acks, ClusterClient, ClusterOptions};
use mirrorgate::mirror::dataplane::partition::delete_records;
use mirrorgate::wire::batch::{placeholder_batch, OwnBatch, HEADER_LEN};

fn put_varint(out: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    out.put_u8(z as u8);
}

/// `count` records with null key and value, as a v2 batch payload (records only).
fn minimal_records(count: i32) -> BytesMut {
    let mut out = BytesMut::with_capacity(count as usize * 9);
    for i in 0..count {
        let mut body = BytesMut::with_capacity(8);
        body.put_i8(0); // attributes
        put_varint(&mut body, 0); // timestamp delta
        put_varint(&mut body, i64::from(i));
        put_varint(&mut body, -1); // key
        put_varint(&mut body, -1); // value
        put_varint(&mut body, 0); // headers
        put_varint(&mut out, body.len() as i64);
        out.put_slice(&body);
    }
    out
}

/// A v2 batch with `header` (61 bytes, taken from a placeholder batch of the same count) and
/// `records`, zstd-compressed when `zstd`; batch length and CRC32C recomputed.
fn rebuild(header: &[u8], records: &[u8], zstd: bool) -> Bytes {
    let payload = if zstd { zstd::bulk::compress(records, 3).expect("zstd") } else { records.to_vec() };
    let mut out = BytesMut::with_capacity(HEADER_LEN + payload.len());
    out.put_slice(&header[..HEADER_LEN]);
    out.put_slice(&payload);
    let len = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    if zstd {
        let attrs = i16::from_be_bytes([out[21], out[22]]) | 4;
        out[21..23].copy_from_slice(&attrs.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

fn batch(encoding: &str, own: &OwnBatch, source_base: i64) -> Bytes {
    let p = placeholder_batch(own, 7, source_base);
    match encoding {
        "placeholder" => p,
        "placeholder-zstd" => rebuild(&p, &p[HEADER_LEN..], true),
        "minimal" => rebuild(&p, &minimal_records(own.count), false),
        "minimal-zstd" => rebuild(&p, &minimal_records(own.count), true),
        other => panic!("unknown encoding {other}"),
    }
}

fn chunk(encoding: &str) -> i32 {
    match encoding {
        "placeholder" => 5_000,
        "minimal-zstd" => 200_000,
        _ => 50_000,
    }
}

/// utime + stime of `pid`, seconds.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn du_bytes(path: &std::path::Path) -> u64 {
    let out = Command::new("du").args(["-sb"]).arg(path).output().expect("du");
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn main() {
    // `cargo test --all-targets` runs bench binaries without `--bench`: only build-check then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("fill_head: run with `make bench-fill-head` (cargo bench --bench fill_head)");
        return;
    }
    let repo = env!("CARGO_MANIFEST_DIR");
    let head: i64 = std::env::var("MIRRORGATE_BENCH_HEAD").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000_000);
    let encodings = std::env::var("MIRRORGATE_BENCH_ENCODINGS")
        .unwrap_or_else(|_| "placeholder,placeholder-zstd,minimal,minimal-zstd".into());
    let name = format!("bench-head-{}", std::process::id());
    let out = Command::new(format!("{repo}/scripts/kafka.sh"))
        .args([
            "start",
            &name,
            "--owner-pid",
            &std::process::id().to_string(),
            "--prop",
            "log.segment.delete.delay.ms=0",
        ])
        .output()
        .expect("scripts/kafka.sh");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bootstrap = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").trim().to_string();
    let state = std::env::var("MIRRORGATE_KAFKA_DIR").unwrap_or_else(|_| format!("{repo}/.kafka"));
    let node = std::path::PathBuf::from(format!("{state}/{name}/node-1"));
    let pid = std::fs::read_to_string(node.join("pid")).expect("broker pid").trim().to_string();
    let rt = tokio::runtime::Runtime::new().unwrap();
    println!("head = {head} offsets, Kafka at {bootstrap} (pid {pid})");
    println!(
        "| encoding | offsets/batch | fill s | offsets/s | MB sent | MB on disk | broker CPU s | DeleteRecords s | MB on disk after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    rt.block_on(async {
        let client = ClusterClient::connect(ClusterOptions::new(vec![bootstrap.clone()])).await.unwrap();
        for (i, encoding) in encodings.split(',').enumerate() {
            let topic = format!("head-{encoding}-{}", std::process::id());
            // The configs the mirror sets on destination topics (no retention: the head's
            // placeholders carry timestamp 0, which time retention would remove on its own).
            let configs: std::collections::BTreeMap<String, String> = [
                ("retention.ms", "-1"),
                ("retention.bytes", "-1"),
                ("message.timestamp.before.max.ms", "9223372036854775807"),
                ("compression.type", "producer"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            client.create_topic(&topic, 1, 1, &configs).await.unwrap();
            let _ = client.refresh_metadata(Some(&[topic.as_str()])).await;
            let pid_producer = 2_000_000 + i as i64;
            let per = chunk(encoding);
            let cpu0 = cpu_seconds(&pid);
            let start = Instant::now();
            let (mut offset, mut sent) = (0i64, 0usize);
            while offset < head {
                let count = (head - offset).min(i64::from(per)) as i32;
                let own = OwnBatch {
                    base_offset: 0,
                    count,
                    timestamp: 0,
                    producer_id: pid_producer,
                    producer_epoch: 0,
                    base_sequence: (offset & 0x7fff_ffff) as i32,
                };
                let b = batch(encoding, &own, offset);
                sent += b.len();
                let base = client.produce_segments(&topic, 0, vec![b], Acks::All).await.unwrap();
                assert_eq!(base, offset, "{encoding}: appended at {base}, expected {offset}");
                offset += i64::from(count);
            }
            let fill = start.elapsed().as_secs_f64();
            let cpu = cpu_seconds(&pid) - cpu0;
            let dir = node.join("data").join(format!("{topic}-0"));
            let on_disk = du_bytes(&dir);
            let t = Instant::now();
            delete_records(&client, &topic, 0, head).await.unwrap();
            let delete = t.elapsed().as_secs_f64();
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            let after = du_bytes(&dir);
            let mb = |b: f64| b / 1e6;
            println!(
                "| {encoding} | {per} | {fill:.1} | {:.0} | {:.0} | {:.0} | {cpu:.1} | {delete:.2} | {:.1} |",
                head as f64 / fill,
                mb(sent as f64),
                mb(on_disk as f64),
                mb(after as f64)
            );
        }
    });
    let _ = Command::new(format!("{repo}/scripts/kafka.sh")).args(["stop", &name]).status();
}
