//! Placeholder fill rate on a real broker: how many source offsets per second the mirror can
//! fill with placeholder batches (acks=all, one batch in flight, as the copy loop does), and
//! what a placeholder offset costs on disk. `mirror.fill.max.gap` is set from this figure.
//!
//! Run: `cargo bench --bench fill_rate` (starts a 1-node Kafka 4.1.1 with scripts/kafka.sh,
//! or uses `MIRRORGATE_BENCH_BOOTSTRAP=host:port`).

use std::process::Command;
use std::time::{Duration, Instant};

use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::wire::batch::{placeholder_batch, OwnBatch};

fn main() {
    // `cargo test --all-targets` runs bench binaries without `--bench`: only build-check then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("fill_rate: run with `cargo bench --bench fill_rate`");
        return;
    }
    let repo = env!("CARGO_MANIFEST_DIR");
    let bootstrap = std::env::var("MIRRORGATE_BENCH_BOOTSTRAP").unwrap_or_else(|_| {
        let out = Command::new(format!("{repo}/scripts/kafka.sh"))
            .args(["start", "bench-fill", "--owner-pid", &std::process::id().to_string()])
            .output()
            .expect("scripts/kafka.sh");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    });
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = ClusterClient::connect(ClusterOptions::new(vec![bootstrap.clone()])).await.unwrap();
        println!("{:>10} {:>14} {:>12}", "chunk", "offsets/s", "bytes/offset");
        for chunk in [100i32, 1000, 5000] {
            let topic = format!("fill-rate-{chunk}-{}", std::process::id());
            client.create_topic(&topic, 1, 1, &Default::default()).await.unwrap();
            let _ = client.refresh_metadata(Some(&[topic.as_str()])).await;
            let (pid, epoch) = (1_000_000 + i64::from(chunk), 0);
            let start = Instant::now();
            let mut offset = 0i64;
            let mut bytes = 0usize;
            while start.elapsed() < Duration::from_secs(3) {
                let b = placeholder_batch(
                    &OwnBatch {
                        base_offset: 0,
                        count: chunk,
                        timestamp: 0,
                        producer_id: pid,
                        producer_epoch: epoch,
                        base_sequence: offset as i32,
                    },
                    7,
                    offset,
                );
                bytes += b.len();
                client.produce_segments(&topic, 0, vec![b], mirrorgate::client::cluster::Acks::All).await.unwrap();
                offset += i64::from(chunk);
            }
            let secs = start.elapsed().as_secs_f64();
            println!("{chunk:>10} {:>14.0} {:>12.1}", offset as f64 / secs, bytes as f64 / offset as f64);
        }
    });
}
