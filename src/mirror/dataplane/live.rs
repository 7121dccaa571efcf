//! Live lag figures (issue 9, item 11): every [`REFRESH`] a refresher reads, for every
//! partition of every mirror topic that is not STOPPED (MIRRORING, PAUSED, just resumed,
//! FAILED, ...), the source high watermark and last stable offset and the destination log end
//! with ListOffsets, whatever the copy loop is doing. `--describe` and the Prometheus lag
//! gauges take each figure as the larger of this read and the copy loop's last Fetch answer
//! (they only grow; [`figures`]), so a PAUSED partition, a just-resumed one and a source transaction left open
//! show current lag instead of what the last Fetch saw. A failed read keeps the last figures
//! and records the error, shown by `--describe` with the figures' age.
//!
//! Kafka facts relied on (`KafkaApis.handleListOffsetRequest`, `UnifiedLog.fetchOffsetByTimestamp`):
//! ListOffsets with timestamp -1 (LATEST) from a consumer (replica id -1) answers the high
//! watermark at `read_uncommitted` and the last stable offset at `read_committed`; it must be
//! sent to the partition's leader (NOT_LEADER_OR_FOLLOWER otherwise).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio_util::sync::CancellationToken;

use super::Progress;
use crate::client::cluster::{ClusterClient, ClusterOptions, KafkaErrorCode, LATEST_TIMESTAMP};
use crate::mirror::configs;
use crate::mirror::control::ControlPlane;
use crate::mirror::model::now_ms;
use crate::wire::mirror::MirrorPartitionState as S;

/// How often the live figures are read, and the bound on one read of a mirror (5 ×).
pub const REFRESH: Duration = Duration::from_secs(2);

/// The highest ListOffsets version asked for (v2+ has the isolation level; v7 is answered by
/// every Kafka release from 2.8 to 4.x).
const LIST_OFFSETS_MAX_VERSION: i16 = 7;

/// What the refresher last read of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveRead {
    /// Source high watermark (ListOffsets LATEST, read_uncommitted), offsets.
    pub source_high_watermark: i64,
    /// Source last stable offset (ListOffsets LATEST, read_committed), offsets.
    pub source_lso: i64,
    /// When the source figures were read, ms since the epoch (0: never).
    pub source_read_ms: i64,
    /// Destination log end as consumers see it (its high watermark), offsets.
    pub destination_end: i64,
    /// When the destination figure was read, ms since the epoch (0: never).
    pub destination_read_ms: i64,
    /// Why the last refresh failed (cleared by a complete read).
    pub error: Option<String>,
}

/// The live reads of every partition, shared by the refresher and the readers of figures.
#[derive(Debug, Default)]
pub struct LiveFigures {
    reads: dashmap::DashMap<(String, i32), LiveRead>,
}

impl LiveFigures {
    /// The last live read of `topic`-`partition`.
    pub fn get(&self, topic: &str, partition: i32) -> Option<LiveRead> {
        self.reads.get(&(topic.to_string(), partition)).map(|r| r.clone())
    }

    fn update(&self, topic: &str, partition: i32, f: impl FnOnce(&mut LiveRead)) {
        f(&mut self.reads.entry((topic.to_string(), partition)).or_default());
    }

    fn retain(&self, keep: impl Fn(&(String, i32)) -> bool) {
        self.reads.retain(|k, _| keep(k));
    }
}

/// The figures `--describe` and the metrics show for a partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Figures {
    /// Source high watermark, source LSO, destination end and shift (the larger of the
    /// copy loop's last Fetch and the live read, figure by figure).
    pub progress: Progress,
    /// When the last live refresh failed: its error and the age of the figures shown, ms.
    pub stale: Option<(String, i64)>,
}

/// The figures of `topic`-`partition`: each the larger of the copy loop's last Fetch answer
/// and the live read (they only grow); the shift from the loop, else from the offset map.
/// `None` when neither has seen the partition.
pub fn figures(cp: &ControlPlane, topic: &str, partition: i32) -> Option<Figures> {
    let loop_seen = cp.progress(topic, partition);
    let live = cp.live().get(topic, partition);
    if loop_seen.is_none() && live.as_ref().is_none_or(|l| l.source_read_ms == 0 && l.destination_read_ms == 0) {
        return None;
    }
    let mut p = loop_seen.unwrap_or(Progress {
        source_log_start: -1,
        source_high_watermark: -1,
        source_lso: -1,
        destination_end: -1,
        shift: cp.partition(topic, partition).and_then(|r| r.segments.last().map(|s| s.shift())).unwrap_or(0),
        next_source: -1,
        read_ms: 0,
    });
    let mut stale = None;
    if let Some(l) = live {
        // The source high watermark and LSO and the destination log end only grow (short of
        // an unclean election or a re-created topic, which both readers see on their next
        // read), so the larger of the two readings is the fresher one, whichever was stored
        // last: a reply that was slow to arrive never makes lag go backwards or read 0.
        if l.source_read_ms > 0 {
            p.source_high_watermark = p.source_high_watermark.max(l.source_high_watermark);
            p.source_lso = p.source_lso.max(l.source_lso);
        }
        if l.destination_read_ms > 0 {
            p.destination_end = p.destination_end.max(l.destination_end);
        }
        // Read by separate requests, the LSO can come out above the high watermark; Kafka's
        // LSO never is (UnifiedLog.lastStableOffset <= highWatermark).
        p.source_lso = p.source_lso.min(p.source_high_watermark);
        if let Some(e) = l.error {
            let newest = p.read_ms.max(l.source_read_ms.min(l.destination_read_ms));
            let age = if newest > 0 { now_ms() - newest } else { -1 };
            stale = Some((e, age));
        }
    }
    Some(Figures { progress: p, stale })
}

/// Reads the live figures of every non-STOPPED mirror partition every [`REFRESH`] until
/// `shutdown`. Source clients are built from each mirror's own configs and rebuilt when they
/// change; the destination client is built from `dest` (its own connections and Metadata
/// cache: the refresher's Metadata reads never change what the copy loops see).
pub async fn run(control: Arc<ControlPlane>, dest: ClusterOptions, shutdown: CancellationToken) {
    let mut sources: HashMap<String, (String, ClusterClient)> = HashMap::new();
    let mut dest_client: Option<ClusterClient> = None;
    loop {
        if dest_client.is_none() {
            match ClusterClient::connect(dest.clone()).await {
                Ok(c) => dest_client = Some(c),
                Err(e) => tracing::debug!(error = %e, "live lag figures: destination unreachable"),
            }
        }
        let state = control.snapshot();
        let mut per_mirror: BTreeMap<String, Vec<(String, i32)>> = BTreeMap::new();
        for ((topic, p), rec) in &state.partitions {
            if rec.state != S::Stopped {
                per_mirror.entry(rec.mirror.clone()).or_default().push((topic.clone(), *p));
            }
        }
        control.live().retain(|k| state.partitions.get(k).is_some_and(|r| r.state != S::Stopped));
        sources.retain(|m, _| state.mirrors.contains_key(m));
        let mut reads = tokio::task::JoinSet::new();
        for (mirror, parts) in per_mirror {
            let Some(def) = state.mirrors.get(&mirror) else { continue };
            let Some(opts) = configs::source_options(&def.name, &def.configs) else { continue };
            let Some(dest) = dest_client.clone() else {
                fail_all(&control, &parts, "cannot reach the destination cluster");
                continue;
            };
            let key = format!("{opts:?}");
            let cached = sources.get(&mirror).filter(|(k, _)| *k == key).map(|(_, c)| c.clone());
            let control = control.clone();
            reads.spawn(async move {
                let read = async {
                    let source = match cached {
                        Some(c) => c,
                        None => ClusterClient::connect(opts).await.map_err(|e| e.to_string())?,
                    };
                    refresh(&control, &source, &dest, &parts).await;
                    Ok::<_, String>(source)
                };
                let outcome = match tokio::time::timeout(REFRESH * 5, read).await {
                    Ok(Ok(c)) => Some(c),
                    Ok(Err(e)) => {
                        fail_all(&control, &parts, &format!("cannot reach the source cluster: {e}"));
                        None
                    }
                    Err(_) => {
                        let e = format!("no answer within {} ms", (REFRESH * 5).as_millis());
                        fail_all(&control, &parts, &e);
                        None
                    }
                };
                (mirror, key, outcome)
            });
        }
        while let Some(joined) = reads.join_next().await {
            if let Ok((mirror, key, Some(client))) = joined {
                sources.insert(mirror, (key, client));
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(REFRESH) => {}
        }
    }
}

fn fail_all(control: &ControlPlane, parts: &[(String, i32)], error: &str) {
    for (t, p) in parts {
        control.live().update(t, *p, |r| r.error = Some(error.to_string()));
    }
}

/// One read of `parts`: source high watermark and LSO, destination high watermark.
async fn refresh(control: &ControlPlane, source: &ClusterClient, dest: &ClusterClient, parts: &[(String, i32)]) {
    let (hw, lso, end) = tokio::join!(
        latest_offsets(source, parts, 0),
        latest_offsets(source, parts, 1),
        latest_offsets(dest, parts, 0)
    );
    let now = now_ms();
    for key in parts {
        let (t, p) = (key.0.as_str(), key.1);
        let mut errors = Vec::new();
        match (hw.get(key), lso.get(key)) {
            (Some(Ok(hw)), Some(Ok(lso))) => control.live().update(t, p, |r| {
                r.source_high_watermark = *hw;
                r.source_lso = *lso;
                r.source_read_ms = now;
            }),
            (h, l) => errors.push(format!(
                "source: {}",
                [h, l].into_iter().find_map(|x| x.and_then(|r| r.as_ref().err()).cloned()).unwrap_or_default()
            )),
        }
        match end.get(key) {
            Some(Ok(end)) => control.live().update(t, p, |r| {
                r.destination_end = *end;
                r.destination_read_ms = now;
            }),
            Some(Err(e)) => errors.push(format!("destination: {e}")),
            None => errors.push("destination: no answer".into()),
        }
        let error = (!errors.is_empty()).then(|| format!("cannot read the live offsets ({})", errors.join("; ")));
        control.live().update(t, p, |r| r.error = error);
    }
}

/// ListOffsets LATEST at `isolation_level` (0 read_uncommitted: high watermark; 1
/// read_committed: LSO) for `parts`, one request per leader, after a Metadata refresh of
/// their topics (a moved leader is found again on the next refresh).
async fn latest_offsets(
    client: &ClusterClient,
    parts: &[(String, i32)],
    isolation_level: i8,
) -> HashMap<(String, i32), Result<i64, String>> {
    let mut out = HashMap::new();
    let mut topics: Vec<&str> = parts.iter().map(|(t, _)| t.as_str()).collect();
    topics.sort_unstable();
    topics.dedup();
    if let Err(e) = client.refresh_metadata(Some(&topics)).await {
        for k in parts {
            out.insert(k.clone(), Err(e.to_string()));
        }
        return out;
    }
    let md = client.metadata();
    let mut by_leader: BTreeMap<i32, Vec<(String, i32, i32)>> = BTreeMap::new();
    for (t, p) in parts {
        match md.topics.get(t).and_then(|ti| ti.partitions.get(p)) {
            Some(pi) if pi.leader_id >= 0 => {
                by_leader.entry(pi.leader_id).or_default().push((t.clone(), *p, pi.leader_epoch))
            }
            Some(pi) => {
                out.insert((t.clone(), *p), Err(format!("no leader ({})", KafkaErrorCode(pi.error_code))));
            }
            None => {
                out.insert((t.clone(), *p), Err(format!("{t}-{p} is not in the cluster's Metadata")));
            }
        }
    }
    let mut asks = tokio::task::JoinSet::new();
    for (leader, ps) in by_leader {
        let client = client.clone();
        asks.spawn(async move {
            let answer = ask_leader(&client, leader, &ps, isolation_level).await;
            (ps, answer)
        });
    }
    while let Some(joined) = asks.join_next().await {
        let Ok((ps, answer)) = joined else { continue };
        match answer {
            Ok(found) => {
                for (t, p, _) in ps {
                    let r = found.get(&(t.clone(), p)).cloned().unwrap_or_else(|| Err("no answer".into()));
                    out.insert((t, p), r);
                }
            }
            Err(e) => {
                for (t, p, _) in ps {
                    out.insert((t, p), Err(e.clone()));
                }
            }
        }
    }
    out
}

type Answers = HashMap<(String, i32), Result<i64, String>>;

async fn ask_leader(
    client: &ClusterClient,
    leader: i32,
    parts: &[(String, i32, i32)],
    isolation_level: i8,
) -> Result<Answers, String> {
    let version =
        client.version_for::<ListOffsetsRequest>(leader, LIST_OFFSETS_MAX_VERSION).await.map_err(|e| e.to_string())?;
    let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
    for (t, p, epoch) in parts {
        topics.entry(t.as_str()).or_default().push(
            ListOffsetsPartition::default()
                .with_partition_index(*p)
                .with_current_leader_epoch(*epoch)
                .with_timestamp(LATEST_TIMESTAMP),
        );
    }
    let req =
        ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_isolation_level(isolation_level).with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let resp = client.send_to_node(leader, &req, version).await.map_err(|e| e.to_string())?;
    let mut out = HashMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            let r = if p.error_code == 0 { Ok(p.offset) } else { Err(KafkaErrorCode(p.error_code).to_string()) };
            out.insert((t.name.0.to_string(), p.partition_index), r);
        }
    }
    Ok(out)
}
