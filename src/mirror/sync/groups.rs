//! Consumer group offset sync (KIP-1279 §6 "Group Offsets", DESIGN §5): committed offsets of
//! source groups matching `groups.include` / `groups.exclude`, for mirrored topics, mapped
//! through each partition's offset segments, clamped to the destination log, and committed on
//! the destination with leader epoch -1 as a "simple" commit (generation -1, no member). Groups
//! with members on the destination are skipped: their own progress wins.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::{
    DescribeGroupsRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::cluster::{ClusterClient, ClusterError, KafkaErrorCode, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::mirror::configs;
use crate::mirror::control::ControlState;
use crate::mirror::model::{destination_offset, DesiredState, MirrorDefinition, OffsetSegment};

use super::{report, send, Patterns, SyncKind, METRICS};

/// Kafka errors of a commit refused because the group has members (or is rebalancing):
/// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, NON_EMPTY_GROUP,
/// STALE_MEMBER_EPOCH.
const ACTIVE_GROUP_ERRORS: [i16; 5] = [22, 25, 27, 68, 113];

/// The destination offset of source offset `source` through the partition's offset
/// `segments`: [`destination_offset`] (an offset inside a gap between two segments maps to
/// the start of the next segment, never past records).
pub fn map_offset(source: i64, segments: &[OffsetSegment]) -> i64 {
    destination_offset(segments, source)
}

/// The offset to commit on the destination for a source commit at `source`, or `None` to
/// leave the destination as it is. The mapped offset is clamped to
/// `[dest_start, dest_end]`; when clamping lowered it (the mirror is behind), a destination
/// commit already past the clamped value is kept — clamping never moves an offset backwards —
/// while an unclamped lower value (the source group was reset backwards) is followed.
pub fn plan_offset(
    source: i64,
    segments: &[OffsetSegment],
    dest_start: i64,
    dest_end: i64,
    current: Option<i64>,
) -> Option<i64> {
    let mapped = map_offset(source, segments);
    let target = mapped.clamp(dest_start, dest_end.max(dest_start));
    if target < mapped && current.is_some_and(|c| c > target) {
        return None;
    }
    (current != Some(target)).then_some(target)
}

fn kafka(api: &str, what: &str, code: i16, message: Option<&StrBytes>) -> String {
    format!("{api} {what}: error {}{}", KafkaErrorCode(code), message.map(|m| format!(": {m}")).unwrap_or_default())
}

/// The group coordinator of `group` on `c` (FindCoordinator, key type GROUP).
async fn coordinator(c: &ClusterClient, group: &str) -> Result<i32, String> {
    let mut req = FindCoordinatorRequest::default();
    req.key = StrBytes::from_string(group.to_string());
    req.key_type = 0;
    let resp = send(c, None, &req, 3).await.map_err(|e| e.to_string())?;
    if resp.error_code != 0 {
        return Err(kafka("FindCoordinator", group, resp.error_code, resp.error_message.as_ref()));
    }
    let node = resp.node_id.0;
    if !c.metadata().brokers.contains_key(&node) {
        c.refresh_metadata(Some(&[])).await.map_err(|e| e.to_string())?;
    }
    Ok(node)
}

/// Committed offsets of a group: `(topic, partition)` → (offset, commit metadata).
type Committed = BTreeMap<(String, i32), (i64, Option<String>)>;

/// Committed offsets of `group`.
async fn fetch_offsets(c: &ClusterClient, node: i32, group: &str) -> Result<Committed, String> {
    let mut req = OffsetFetchRequest::default();
    req.group_id = GroupId(StrBytes::from_string(group.to_string()));
    req.topics = None;
    req.require_stable = false;
    let resp = send(c, Some(node), &req, 7).await.map_err(|e| e.to_string())?;
    if resp.error_code != 0 {
        return Err(kafka("OffsetFetch", group, resp.error_code, None));
    }
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            if p.error_code == 0 && p.committed_offset >= 0 {
                out.insert(
                    (t.name.0.to_string(), p.partition_index),
                    (p.committed_offset, p.metadata.as_ref().map(|m| m.to_string())),
                );
            }
        }
    }
    Ok(out)
}

/// Consumer groups of the source (ListGroups on every broker), share groups left out.
async fn list_groups(c: &ClusterClient) -> Result<BTreeSet<String>, ClusterError> {
    c.refresh_metadata(Some(&[])).await?;
    let mut out = BTreeSet::new();
    for node in c.metadata().brokers.keys() {
        let resp = send(c, Some(*node), &ListGroupsRequest::default(), 4).await?;
        if resp.error_code != 0 {
            return Err(ClusterError::InvalidArgument(kafka("ListGroups", "cluster", resp.error_code, None)));
        }
        for g in resp.groups {
            let consumer = matches!(g.protocol_type.as_str(), "consumer" | "");
            if consumer && g.group_type.as_str() != "share" {
                out.insert(g.group_id.0.to_string());
            }
        }
    }
    Ok(out)
}

/// Syncs the committed offsets of every matching source group; each failing group is
/// counted and logged, the others continue.
pub(super) async fn sync_groups(
    source: &ClusterClient,
    dest: &ClusterClient,
    def: &MirrorDefinition,
    state: &ControlState,
    active: &mut BTreeSet<(String, String)>,
) {
    let mirror = def.name.as_str();
    let mirrored: BTreeSet<&str> = state
        .topics
        .values()
        .filter(|t| t.mirror == mirror && t.desired == DesiredState::Mirroring)
        .map(|t| t.topic.as_str())
        .collect();
    if mirrored.is_empty() {
        return;
    }
    let list = |k: &str| configs::split_list(configs::effective(&def.configs, k).unwrap_or("")).collect::<Vec<_>>();
    let (include, exclude) =
        match (Patterns::compile(list("groups.include")), Patterns::compile(list("groups.exclude"))) {
            (Ok(i), Ok(e)) => (i, e),
            (Err(e), _) | (_, Err(e)) => return report(SyncKind::GroupOffsets, mirror, "group patterns", &e),
        };
    let groups = match list_groups(source).await {
        Ok(g) => g,
        Err(e) => return report(SyncKind::GroupOffsets, mirror, "source ListGroups", &e),
    };
    for group in groups.iter().filter(|g| include.matches(g) && !exclude.matches(g)) {
        if let Err(e) = sync_group(source, dest, mirror, state, &mirrored, group, active).await {
            report(SyncKind::GroupOffsets, mirror, &format!("group `{group}`"), &e);
        }
    }
}

async fn sync_group(
    source: &ClusterClient,
    dest: &ClusterClient,
    mirror: &str,
    state: &ControlState,
    mirrored: &BTreeSet<&str>,
    group: &str,
    active: &mut BTreeSet<(String, String)>,
) -> Result<(), String> {
    let src_node = coordinator(source, group).await?;
    let mut committed = fetch_offsets(source, src_node, group).await?;
    committed.retain(|(t, p), _| mirrored.contains(t.as_str()) && state.partitions.contains_key(&(t.clone(), *p)));
    if committed.is_empty() {
        return Ok(());
    }
    let dst_node = coordinator(dest, group).await?;
    let mut dg = DescribeGroupsRequest::default();
    dg.groups = vec![GroupId(StrBytes::from_string(group.to_string()))];
    let described = send(dest, Some(dst_node), &dg, 5).await.map_err(|e| e.to_string())?;
    let key = (mirror.to_string(), group.to_string());
    if let Some(g) = described.groups.iter().find(|g| g.error_code == 0 && !g.members.is_empty()) {
        METRICS.group_offset_skipped_active.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if active.insert(key) {
            tracing::info!(
                mirror,
                group,
                members = g.members.len(),
                state = %g.group_state,
                "consumer group has active members on the destination; its offsets are not synced"
            );
        }
        return Ok(());
    }
    active.remove(&key);
    let current = fetch_offsets(dest, dst_node, group).await?;
    let mut commits: BTreeMap<String, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((topic, p), (offset, metadata)) in &committed {
        let segments = &state.partitions[&(topic.clone(), *p)].segments;
        let start = dest.list_offsets(topic, *p, EARLIEST_TIMESTAMP).await.map_err(|e| e.to_string())?;
        let end = dest.list_offsets(topic, *p, LATEST_TIMESTAMP).await.map_err(|e| e.to_string())?;
        let cur = current.get(&(topic.clone(), *p)).map(|c| c.0);
        let Some(target) = plan_offset(*offset, segments, start, end, cur) else { continue };
        tracing::debug!(mirror, group, topic = %topic, partition = p, source = offset, target, ?cur, "group offset");
        let mut cp = OffsetCommitRequestPartition::default();
        cp.partition_index = *p;
        cp.committed_offset = target;
        cp.committed_leader_epoch = -1;
        cp.committed_metadata = metadata.clone().map(StrBytes::from_string);
        commits.entry(topic.clone()).or_default().push(cp);
    }
    if commits.is_empty() {
        return Ok(());
    }
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_string(group.to_string()));
    req.generation_id_or_member_epoch = -1;
    req.member_id = StrBytes::default();
    req.group_instance_id = None;
    req.retention_time_ms = -1;
    req.topics = commits
        .into_iter()
        .map(|(t, ps)| {
            let mut ct = OffsetCommitRequestTopic::default();
            ct.name = TopicName(StrBytes::from_string(t));
            ct.partitions = ps;
            ct
        })
        .collect();
    let resp = send(dest, Some(dst_node), &req, 8).await.map_err(|e| e.to_string())?;
    let mut written = Vec::new();
    for t in &resp.topics {
        for p in &t.partitions {
            if ACTIVE_GROUP_ERRORS.contains(&p.error_code) {
                METRICS.group_offset_skipped_active.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::info!(mirror, group, error = %KafkaErrorCode(p.error_code), "consumer group became active on the destination; its offsets are not synced");
                return Ok(());
            }
            if p.error_code != 0 {
                return Err(kafka("OffsetCommit", &format!("{}-{}", t.name.0, p.partition_index), p.error_code, None));
            }
            written.push(format!("{}-{}", t.name.0, p.partition_index));
        }
    }
    tracing::info!(mirror, group, partitions = ?written, "consumer group offsets synced to the destination");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Source 200..510 at destination 0..310, a gap, source 2000.. at destination 310...
    const SHIFTED: [OffsetSegment; 2] = [
        OffsetSegment { source_start: 200, destination_start: 0 },
        OffsetSegment { source_start: 2000, destination_start: 310 },
    ];

    #[test]
    fn offsets_map_through_segments() {
        assert_eq!(map_offset(42, &[]), 42);
        assert_eq!(map_offset(42, &[OffsetSegment { source_start: 0, destination_start: 0 }]), 42);
        assert_eq!(map_offset(250, &SHIFTED), 50);
        assert_eq!(map_offset(2100, &SHIFTED), 410);
        assert_eq!(map_offset(1000, &SHIFTED), 310, "inside the gap: the next segment's start");
        assert_eq!(map_offset(100, &SHIFTED), 0, "before the first segment: its first destination offset");
    }

    #[test]
    fn clamping_never_moves_backwards_but_resets_are_followed() {
        // Identical partition within the log: same offset.
        assert_eq!(plan_offset(50, &[], 0, 100, None), Some(50));
        assert_eq!(plan_offset(50, &[], 0, 100, Some(50)), None, "unchanged: no write");
        // Beyond the destination end: clamped to it.
        assert_eq!(plan_offset(5000, &[], 0, 100, None), Some(100));
        assert_eq!(plan_offset(5000, &[], 0, 100, Some(80)), Some(100));
        // Clamping would move it backwards: kept.
        assert_eq!(plan_offset(5000, &[], 0, 100, Some(120)), None);
        // A source reset backwards is followed.
        assert_eq!(plan_offset(10, &[], 0, 100, Some(90)), Some(10));
        // Below the destination log start: raised to it.
        assert_eq!(plan_offset(3, &[], 20, 100, None), Some(20));
        assert_eq!(plan_offset(0, &[], 0, 100, None), Some(0));
    }
}
