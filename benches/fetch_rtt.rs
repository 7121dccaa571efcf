//! The round trip of one large Fetch, directly and through mirrorgate with and without
//! forwarding responses while they arrive (`fetch_stream_min_bytes`, issue 13 item 4).
//!
//! A consumer fetches, then waits for the whole response before it can parse it. Through a
//! proxy that reads a response whole before it writes it out (store-and-forward), each Fetch
//! takes the response's transfer time twice; forwarded while it arrives, about once. This bench
//! measures that per-Fetch time on one machine: a sessionless Fetch v16 of 3 partitions ×
//! `MIRRORGATE_BENCH_PARTITION_MIB` MiB (default 1) from offset 0 (max_wait_ms 0), sent in turn
//! to the broker, to mirrorgate with its defaults (streamed, batches spliced), to mirrorgate
//! with `fetch_stream_zero_copy: false` (streamed, every byte copied through it), and to
//! mirrorgate with `fetch_stream_min_bytes: 0` (read whole first), `MIRRORGATE_BENCH_ROUNDS`
//! times (default 200). Checks that every path returns the broker's records byte for byte;
//! prints each path's median, p90 and mean round trip in ms, and the response size.
//!
//! Run: `cargo build --release --bin mirrorgate && cargo bench --bench fetch_rtt` (starts a
//! 1-node Kafka 4.1.1 with scripts/kafka.sh and three mirrorgate processes from
//! target/release/mirrorgate).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest};
use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::client::BrokerConnection;

const PARTITIONS: i32 = 3;

fn main() {
    // `cargo test --all-targets` runs bench binaries without `--bench`: only build-check then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("fetch_rtt: run with `cargo bench --bench fetch_rtt`");
        return;
    }
    let repo = env!("CARGO_MANIFEST_DIR");
    let mib: i64 = std::env::var("MIRRORGATE_BENCH_PARTITION_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let rounds: usize = std::env::var("MIRRORGATE_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let me = std::process::id().to_string();
    let kafka = |args: &[&str]| {
        let out = Command::new(format!("{repo}/scripts/kafka.sh")).args(args).output().expect("scripts/kafka.sh");
        assert!(out.status.success(), "kafka.sh {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let bootstrap = kafka(&["start", "bench-fetch-rtt", "--owner-pid", &me]);
    let topic = format!("fetch-rtt-{me}");
    kafka(&["tool", "topics", "--bootstrap-server", &bootstrap, "--create", "--topic", &topic, "--partitions", "3"]);
    let records = (mib * 1024 * PARTITIONS as i64 * 2).to_string(); // 1 KiB records, twice what one Fetch reads
    kafka(&[
        "tool",
        "producer-perf",
        "--topic",
        &topic,
        "--num-records",
        &records,
        "--record-size",
        "1024",
        "--throughput",
        "-1",
        "--producer-props",
        &format!("bootstrap.servers={bootstrap}"),
        "acks=1",
        "linger.ms=5",
        "batch.size=131072",
    ]);
    let mut children: Vec<Child> = Vec::new();
    let mut proxy = |name: &str, extra: &str| {
        let dir = format!("{repo}/target/bench-fetch-rtt");
        std::fs::create_dir_all(&dir).unwrap();
        let port = 30_000 + (std::process::id() % 1000) as u16 * 20 + children.len() as u16 * 10;
        let cfg = format!(
            "destination:\n  bootstrap_servers: {bootstrap}\nlisteners:\n  - name: bench\n    bind_host: 127.0.0.1\n    advertised_host: 127.0.0.1\n    port_range: {port}-{}\nmirror_state:\n  topic: __mirror_state\n  num_partitions: 3\nlog:\n  level: warn\n{extra}\n",
            port + 9
        );
        let path = format!("{dir}/{name}.yaml");
        std::fs::write(&path, cfg).unwrap();
        let child = Command::new(format!("{repo}/target/release/mirrorgate"))
            .args(["run", "--config", &path])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("target/release/mirrorgate (cargo build --release --bin mirrorgate)");
        children.push(child);
        // The port of broker 1 (bootstrap port + 1 + node id).
        format!("127.0.0.1:{}", port + 2)
    };
    let streamed = proxy("streamed", "");
    let copied = proxy("copied", "fetch_stream_zero_copy: false");
    let whole = proxy("whole", "fetch_stream_min_bytes: 0");
    let broker = bootstrap.split(',').next().unwrap().to_string();

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = ClusterClient::connect(ClusterOptions::new(vec![bootstrap.clone()])).await.unwrap();
        let id = client.topic(&topic).await.unwrap().topic_id.0;
        let max = (mib << 20) as i32;
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(max * PARTITIONS + (1 << 20))
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default().with_topic_id(uuid::Uuid::from_bytes(id)).with_partitions(
                (0..PARTITIONS)
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(max)
                            .with_current_leader_epoch(-1)
                            .with_last_fetched_epoch(-1)
                            .with_log_start_offset(-1)
                    })
                    .collect(),
            )]);
        let paths = [
            ("direct", broker),
            ("mirrorgate, streamed, spliced (default)", streamed),
            ("mirrorgate, streamed, copied", copied),
            ("mirrorgate, whole", whole),
        ];
        let mut conns = Vec::new();
        for (_, addr) in &paths {
            let deadline = Instant::now() + Duration::from_secs(30);
            let conn = loop {
                match BrokerConnection::connect(addr, Duration::from_secs(5), Duration::from_secs(30), 1 << 28).await {
                    Ok(c) => break c,
                    Err(e) if Instant::now() < deadline => {
                        let _ = e;
                        tokio::time::sleep(Duration::from_millis(200)).await
                    }
                    Err(e) => panic!("{addr}: {e}"),
                }
            };
            conns.push(conn);
        }
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
        let mut size = 0usize;
        let mut direct = Vec::new();
        for round in 0..rounds + 10 {
            for (i, conn) in conns.iter_mut().enumerate() {
                let t = Instant::now();
                let resp = conn.send(&req, 16).await.expect("Fetch");
                let ms = t.elapsed().as_secs_f64() * 1e3;
                let records: Vec<_> = resp.responses[0].partitions.iter().map(|p| p.records.clone()).collect();
                let bytes: usize = records.iter().map(|r| r.as_ref().map_or(0, |r| r.len())).sum();
                // Every path returns the broker's records byte for byte.
                if i == 0 {
                    direct = records;
                } else {
                    assert!(records == direct, "{}: records differ from the broker's", paths[i].0);
                }
                size = bytes;
                if round >= 10 {
                    times[i].push(ms);
                }
            }
        }
        println!(
            "Fetch v16 of {PARTITIONS} partitions, {size} record bytes a response, {rounds} rounds (after 10 warm-up)"
        );
        println!("{:<40} {:>10} {:>10} {:>10}", "path", "median ms", "p90 ms", "mean ms");
        for (i, (name, _)) in paths.iter().enumerate() {
            let mut t = times[i].clone();
            t.sort_by(f64::total_cmp);
            let pct = |q: f64| t[((q * t.len() as f64) as usize).min(t.len() - 1)];
            let mean = t.iter().sum::<f64>() / t.len() as f64;
            println!("{name:<40} {:>10.2} {:>10.2} {:>10.2}", pct(0.5), pct(0.9), mean);
        }
    });
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}
