//! `--verify`: reads each partition of the mirror's topics from the source cluster (its
//! `bootstrap.servers`, read from the mirror's configs through mirrorgate) and from the
//! destination through mirrorgate, and compares them batch by batch with
//! `mirrorgate::mirror::verify` (offsets, record counts, timestamps, payload bytes). Through
//! mirrorgate every mirror partition shows the source's offsets, a shifted one too
//! (`proxy::present`), so offsets are compared as they are. Prints one line per partition and fails on any difference.
//! On a terminal, a progress line on stderr counts partitions and offsets done, with an
//! estimate of the time left (from the offsets compared so far per second).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::client::BrokerConnection;
use mirrorgate::mirror::verify::verify_partition;
use mirrorgate::wire::mirror::describe_cluster_mirrors::ext;
use mirrorgate::wire::mirror::describe_cluster_mirrors::DescribeClusterMirrorsResponse;
use regex::Regex;

use super::actions::Report;
use super::transport::AdminConnection;

/// Runs the comparison for `mirror` (topics matching `topics`, or all).
///
/// # Errors
/// The mirror's configs cannot be read or a cluster cannot be reached.
pub async fn run(
    conn: &mut AdminConnection,
    mirror: &str,
    topics: &[String],
    described: &DescribeClusterMirrorsResponse,
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let Some(m) = described.mirrors.iter().find(|m| m.mirror_name.as_str() == mirror) else {
        report.stderr.push(format!("Error: UNKNOWN_CLUSTER_MIRROR: mirror {mirror} does not exist"));
        report.failed = true;
        return Ok(report);
    };
    if m.error_code != 0 {
        report.stderr.push(format!("Error: {}: {}", m.error_code, m.error_message.as_deref().unwrap_or("")));
        report.failed = true;
        return Ok(report);
    }
    let patterns: Vec<Regex> = topics.iter().map(|p| Regex::new(&format!("^(?:{p})$"))).collect::<Result<_, _>>()?;
    let bootstrap = source_bootstrap(conn.addr(), mirror).await?;
    let connect = |b: Vec<String>| async move {
        let mut o = ClusterOptions::new(b);
        o.request_timeout = Duration::from_secs(30);
        ClusterClient::connect(o).await
    };
    let source =
        connect(bootstrap.clone()).await.map_err(|e| anyhow::anyhow!("source cluster {}: {e}", bootstrap.join(",")))?;
    let dest =
        connect(vec![conn.addr().to_string()]).await.map_err(|e| anyhow::anyhow!("mirrorgate {}: {e}", conn.addr()))?;
    let (mut ok, mut bad) = (0, 0);
    let chosen = |topic: &str| patterns.is_empty() || patterns.iter().any(|r| r.is_match(topic));
    let mut progress = Progress::new(
        m.topics
            .iter()
            .filter(|t| chosen(t.topic_name.0.as_str()))
            .flat_map(|t| t.partitions.iter().map(|p| p.source_offset.max(0)))
            .collect(),
    );
    for t in &m.topics {
        let topic = t.topic_name.0.as_str();
        if !chosen(topic) {
            continue;
        }
        for p in &t.partitions {
            progress.show();
            let pairs: Vec<(i64, i64)> = ext::segments(p).unwrap_or_default();
            // Read through mirrorgate, a shifted partition already shows the source's offsets
            // (proxy::present): the destination is compared as if identical.
            match verify_partition(&source, &dest, topic, p.partition_index, &[], None).await {
                Ok(r) => {
                    ok += 1;
                    report.stdout.push_str(&format!(
                        "OK    {topic}-{}: {} batches, {} records up to source offset {}, {} offsets without data, {}\n",
                        p.partition_index,
                        r.data_batches,
                        r.records,
                        r.source_end,
                        r.skipped_offsets,
                        ext::offset_mode(&pairs)
                    ));
                }
                Err(e) => {
                    bad += 1;
                    report.stdout.push_str(&format!("DIFF  {topic}-{}: {e}\n", p.partition_index));
                }
            }
            progress.done(p.source_offset.max(0));
        }
    }
    progress.finish();
    report.stdout.push_str(&format!(
        "Verified {} partition(s) of mirror {mirror}: {ok} identical, {bad} different.\n",
        ok + bad
    ));
    report.failed = bad > 0;
    Ok(report)
}

/// The progress line of `--verify` on a terminal (stderr, rewritten in place): partitions
/// and offsets done of the total, elapsed time and the time left at the rate so far.
struct Progress {
    /// Offsets (the mirror's source offset) of each partition to verify.
    sizes: Vec<i64>,
    done_partitions: usize,
    done_offsets: i64,
    started: Instant,
    on: bool,
}

impl Progress {
    fn new(sizes: Vec<i64>) -> Self {
        let on = std::io::stderr().is_terminal() && sizes.len() > 1;
        Self { sizes, done_partitions: 0, done_offsets: 0, started: Instant::now(), on }
    }

    fn done(&mut self, offsets: i64) {
        self.done_partitions += 1;
        self.done_offsets += offsets;
    }

    fn line(&self) -> String {
        self.line_at(self.started.elapsed().as_secs_f64())
    }

    /// The line after `elapsed` seconds.
    fn line_at(&self, elapsed: f64) -> String {
        let total: i64 = self.sizes.iter().sum();
        let rate = (elapsed > 0.0 && self.done_offsets > 0).then(|| self.done_offsets as f64 / elapsed);
        format!(
            "verifying: {}/{} partitions, {} of {} offsets, {:.0} s elapsed, about {} left",
            self.done_partitions,
            self.sizes.len(),
            self.done_offsets,
            total,
            elapsed,
            super::watch::eta(total - self.done_offsets, rate)
        )
    }

    fn show(&self) {
        if self.on {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[K{}", self.line());
            let _ = e.flush();
        }
    }

    fn finish(&self) {
        if self.on {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[K");
            let _ = e.flush();
        }
    }
}

/// The mirror's `bootstrap.servers`, via DescribeConfigs on resource type CLUSTER_MIRROR.
async fn source_bootstrap(addr: &str, mirror: &str) -> anyhow::Result<Vec<String>> {
    let mut c = BrokerConnection::connect(addr, Duration::from_secs(10), Duration::from_secs(30), 1 << 24).await?;
    let req = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(64)
        .with_resource_name(StrBytes::from_string(mirror.to_string()))
        .with_configuration_keys(Some(vec![StrBytes::from_static_str("bootstrap.servers")]))]);
    let resp = c.send(&req, 4).await?;
    let r = resp.results.first().ok_or_else(|| anyhow::anyhow!("DescribeConfigs answered nothing"))?;
    if r.error_code != 0 {
        anyhow::bail!(
            "cannot read the configs of mirror {mirror}: error {} {}",
            r.error_code,
            r.error_message.as_deref().unwrap_or("")
        );
    }
    let v = r
        .configs
        .iter()
        .find(|c| c.name.as_str() == "bootstrap.servers")
        .and_then(|c| c.value.as_ref())
        .ok_or_else(|| anyhow::anyhow!("mirror {mirror} has no bootstrap.servers"))?;
    Ok(v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_counts_partitions_and_offsets() {
        let mut p = Progress::new(vec![100, 300]);
        assert_eq!(p.line_at(2.0), "verifying: 0/2 partitions, 0 of 400 offsets, 2 s elapsed, about - left");
        p.done(100);
        // 100 offsets in 2 s: 300 left at 50/s.
        assert_eq!(p.line_at(2.0), "verifying: 1/2 partitions, 100 of 400 offsets, 2 s elapsed, about 6s left");
    }
}
