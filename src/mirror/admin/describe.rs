//! ListClusterMirrors and DescribeClusterMirrors (KIP-1279): what the control plane holds,
//! with each partition's live figures.

use kafka_protocol::messages::TopicName;

use crate::mirror::configs;
use crate::mirror::model::PartitionStateRecord;
use crate::wire::mirror::describe_cluster_mirrors::{
    ext, DescribedMirror, PartitionDetail, TopicResult as DescribedTopic,
};
use crate::wire::mirror::list_cluster_mirrors::ListedMirror;
use crate::wire::mirror::{
    DescribeClusterMirrorsRequest, DescribeClusterMirrorsResponse, ListClusterMirrorsRequest,
    ListClusterMirrorsResponse, MirrorErrorCode, MirrorResponse,
};

use super::{loaded, s, Answer, ControlPlane};

/// ListClusterMirrors: every mirror, its source and topic count (and names when asked).
pub(super) fn list_cluster_mirrors(cp: &ControlPlane, r: ListClusterMirrorsRequest) -> Answer {
    let mirrors = cp
        .mirrors_view()
        .into_iter()
        .map(|(m, topics, _)| ListedMirror {
            mirror_name: s(m.name.clone()),
            source_bootstrap: s(configs::effective(&m.configs, "bootstrap.servers").unwrap_or("")),
            source_cluster_id: s(m.source_cluster_id.clone().unwrap_or_default()),
            topic_count: topics.len() as i32,
            topic_names: r.include_topic_names.then(|| topics.iter().map(|t| TopicName(s(t.topic.clone()))).collect()),
            ..Default::default()
        })
        .collect();
    loaded(cp)?;
    Ok(MirrorResponse::ListClusterMirrors(ListClusterMirrorsResponse { mirrors, ..Default::default() }))
}

/// DescribeClusterMirrors: the named mirrors (all when null), each topic and partition with
/// its state and figures; UNKNOWN_CLUSTER_MIRROR for a name that does not exist.
pub(super) fn describe_cluster_mirrors(cp: &ControlPlane, r: DescribeClusterMirrorsRequest) -> Answer {
    loaded(cp)?;
    let view = cp.mirrors_view();
    let wanted: Option<Vec<String>> = r.mirror_names.map(|n| n.iter().map(|x| x.to_string()).collect());
    let mut mirrors = Vec::new();
    if let Some(names) = &wanted {
        for n in names.iter().filter(|n| !view.iter().any(|(m, _, _)| &m.name == *n)) {
            mirrors.push(DescribedMirror {
                error_code: MirrorErrorCode::UnknownClusterMirror.code(),
                error_message: Some(s(format!("mirror `{n}` does not exist"))),
                mirror_name: s(n.clone()),
                ..Default::default()
            });
        }
    }
    for (m, topics, parts) in view {
        if wanted.as_ref().is_some_and(|w| !w.contains(&m.name)) {
            continue;
        }
        let topics = topics
            .iter()
            .map(|t| {
                let mut ps = parts.get(&t.topic).cloned().unwrap_or_default();
                ps.sort_by_key(|p| p.partition);
                DescribedTopic {
                    topic_name: TopicName(s(t.topic.clone())),
                    partitions: ps.iter().map(|p| partition_detail(cp, p)).collect(),
                    ..Default::default()
                }
            })
            .collect();
        mirrors.push(DescribedMirror {
            mirror_name: s(m.name.clone()),
            source_bootstrap: configs::effective(&m.configs, "bootstrap.servers").map(s),
            source_cluster_id: m.source_cluster_id.clone().map(s),
            topics,
            ..Default::default()
        });
    }
    Ok(MirrorResponse::DescribeClusterMirrors(DescribeClusterMirrorsResponse { mirrors, ..Default::default() }))
}

/// One partition of a described mirror: its state, error, retry attempt, offsets (source
/// LSO and destination end, -1 without live figures) and mirrorgate's extensions (segments,
/// copy start, placeholder end, owner).
fn partition_detail(cp: &ControlPlane, p: &PartitionStateRecord) -> PartitionDetail {
    let figures = crate::mirror::dataplane::live::figures(cp, &p.topic, p.partition);
    let progress = figures.as_ref().map(|f| f.progress);
    // Figures the live refresh could not renew: why, and their age.
    let stale = figures.and_then(|f| f.stale).map(|(e, age)| {
        if age >= 0 {
            format!("lag figures are {} s old: {e}", age / 1000)
        } else {
            format!("no lag figures yet: {e}")
        }
    });
    let mut detail = PartitionDetail {
        partition_index: p.partition,
        state_value: s(p.state.as_str()),
        // FAILED: why; a retrying copy loop: its last error.
        error_message: p
            .error_message
            .clone()
            .filter(|_| p.state == crate::wire::mirror::MirrorPartitionState::Failed)
            .or_else(|| cp.retrying(&p.topic, p.partition).map(|e| format!("retrying: {e}")))
            .or_else(|| p.error_message.clone())
            .or(stale)
            .map(s),
        retry_attempt: if p.error_message.is_some() && !p.retryable {
            -1
        } else {
            p.retry_attempt.clamp(0, i16::MAX as i32) as i16
        },
        source_offset: progress.map_or(-1, |g| g.source_lso),
        destination_offset: progress.map_or(-1, |g| g.destination_end),
        last_mirror_epoch: -1,
        last_mirror_offset: p.last_mirrored_offset,
        ..Default::default()
    };
    let segs: Vec<(i64, i64)> = p.segments.iter().map(|s| (s.source_start, s.destination_start)).collect();
    ext::set(&mut detail, progress.map_or(-1, |g| g.source_high_watermark), &segs);
    if let Some(start) = p.copy_start {
        ext::set_copy_start(&mut detail, start);
    }
    if let Some(end) = p.placeholder_end {
        ext::set_placeholder_end(&mut detail, end);
    }
    if let Some(owner) = cp.owner_of(&p.topic, p.partition) {
        ext::set_owner(&mut detail, &owner);
    }
    detail
}
