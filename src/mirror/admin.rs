//! Answers to the KIP-1279 mirror admin RPCs, computed from the control plane. Each handler
//! takes a decoded request and returns the response body; errors are carried in the
//! response's error code and message, never as a dropped connection.

use std::collections::BTreeMap;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use crate::wire::mirror::create_cluster_mirror::CreateClusterMirrorResponse;
use crate::wire::mirror::delete_cluster_mirror::DeleteClusterMirrorResponse;
use crate::wire::mirror::describe_cluster_mirrors::{
    ext, DescribeClusterMirrorsResponse, DescribedMirror, PartitionDetail, TopicResult as DescribedTopic,
};
use crate::wire::mirror::list_cluster_mirrors::{ListClusterMirrorsResponse, ListedMirror};
use crate::wire::mirror::pause_mirror_topics::{PauseMirrorTopicsResponse, TopicResult as PauseResult};
use crate::wire::mirror::resume_mirror_topics::{ResumeMirrorTopicsResponse, TopicResult as ResumeResult};
use crate::wire::mirror::start_mirror_topics::StartMirrorTopicsResponse;
use crate::wire::mirror::stop_mirror_topics::{StopMirrorTopicsResponse, TopicResult as StopResult};
use crate::wire::mirror::{MirrorApi, MirrorErrorCode, MirrorRequest, MirrorResponse};

use super::configs;
use super::control::{ControlPlane, MirrorError, TopicResults};
use super::model::DesiredState;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn msg(e: &MirrorError) -> Option<StrBytes> {
    Some(s(e.message.clone()))
}

/// A response of `api` that carries only `code` and `message` (e.g. authorization failure).
pub fn error_response(api: MirrorApi, code: i16, message: &str) -> MirrorResponse {
    let m = Some(s(message));
    match api {
        MirrorApi::CreateClusterMirror => MirrorResponse::CreateClusterMirror(CreateClusterMirrorResponse {
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
        MirrorApi::DeleteClusterMirror => MirrorResponse::DeleteClusterMirror(DeleteClusterMirrorResponse {
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
        MirrorApi::ListClusterMirrors => MirrorResponse::ListClusterMirrors(ListClusterMirrorsResponse {
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
        MirrorApi::DescribeClusterMirrors => MirrorResponse::DescribeClusterMirrors(DescribeClusterMirrorsResponse {
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
        MirrorApi::StartMirrorTopics => MirrorResponse::StartMirrorTopics(StartMirrorTopicsResponse {
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
        MirrorApi::StopMirrorTopics => MirrorResponse::StopMirrorTopics(StopMirrorTopicsResponse {
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
        MirrorApi::PauseMirrorTopics => MirrorResponse::PauseMirrorTopics(PauseMirrorTopicsResponse {
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
        MirrorApi::ResumeMirrorTopics => MirrorResponse::ResumeMirrorTopics(ResumeMirrorTopicsResponse {
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
    }
}

/// The response for an admin RPC on a listener without `admin: true`.
pub fn unauthorized(api: MirrorApi) -> MirrorResponse {
    error_response(
        api,
        MirrorErrorCode::ClusterMirrorAuthorizationFailed.code(),
        "mirror admin requests are only answered on listeners with `admin: true` in proxy.yaml",
    )
}

fn per_topic<T>(results: TopicResults, make: impl Fn(String, i16, Option<StrBytes>) -> T) -> Vec<T> {
    results
        .into_iter()
        .map(|(name, r)| match r {
            Ok(()) => make(name, 0, None),
            Err(e) => make(name, e.code, msg(&e)),
        })
        .collect()
}

/// Answers one mirror admin request.
pub async fn handle(cp: &ControlPlane, req: MirrorRequest) -> MirrorResponse {
    // Read-your-writes across instances: what another instance wrote to `__mirror_state`
    // before this request arrived is applied here before it is answered.
    cp.follow_barrier().await;
    let api = req.api();
    let fail = |e: MirrorError| error_response(api, e.code, &e.message);
    match req {
        MirrorRequest::CreateClusterMirror(r) => {
            let configs: BTreeMap<String, String> =
                r.config.iter().filter_map(|c| c.value.as_ref().map(|v| (c.name.to_string(), v.to_string()))).collect();
            match cp.create_mirror(&r.mirror_name, configs).await {
                Ok(()) => MirrorResponse::CreateClusterMirror(CreateClusterMirrorResponse::default()),
                Err(e) => fail(e),
            }
        }
        MirrorRequest::DeleteClusterMirror(r) => match cp.delete_mirror(&r.mirror_name).await {
            Ok(()) => MirrorResponse::DeleteClusterMirror(DeleteClusterMirrorResponse::default()),
            Err(e) => fail(e),
        },
        MirrorRequest::ListClusterMirrors(r) => {
            let mirrors = cp
                .mirrors_view()
                .into_iter()
                .map(|(m, topics, _)| ListedMirror {
                    mirror_name: s(m.name.clone()),
                    source_bootstrap: s(configs::effective(&m.configs, "bootstrap.servers").unwrap_or("")),
                    source_cluster_id: s(m.source_cluster_id.clone().unwrap_or_default()),
                    topic_count: topics.len() as i32,
                    topic_names: r
                        .include_topic_names
                        .then(|| topics.iter().map(|t| TopicName(s(t.topic.clone()))).collect()),
                    ..Default::default()
                })
                .collect();
            if let Err(e) = loaded(cp) {
                return fail(e);
            }
            MirrorResponse::ListClusterMirrors(ListClusterMirrorsResponse { mirrors, ..Default::default() })
        }
        MirrorRequest::DescribeClusterMirrors(r) => {
            if let Err(e) = loaded(cp) {
                return fail(e);
            }
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
                            partitions: ps
                                .iter()
                                .map(|p| (p, crate::mirror::dataplane::live::figures(cp, &p.topic, p.partition)))
                                .map(|(p, figures)| {
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
                                            .or_else(|| {
                                                cp.retrying(&p.topic, p.partition).map(|e| format!("retrying: {e}"))
                                            })
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
                                    let segs: Vec<(i64, i64)> =
                                        p.segments.iter().map(|s| (s.source_start, s.destination_start)).collect();
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
                                })
                                .collect(),
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
            MirrorResponse::DescribeClusterMirrors(DescribeClusterMirrorsResponse { mirrors, ..Default::default() })
        }
        MirrorRequest::StartMirrorTopics(r) => {
            let inc: Vec<String> = r.include_patterns.iter().map(|p| p.to_string()).collect();
            let exc: Vec<String> = r.exclude_patterns.iter().map(|p| p.to_string()).collect();
            let position = match r.start_position.as_deref().map(crate::mirror::model::StartPosition::parse) {
                None => None,
                Some(Ok(p)) => Some(p),
                Some(Err(message)) => {
                    return MirrorResponse::StartMirrorTopics(StartMirrorTopicsResponse {
                        error_code: crate::mirror::config_rpc::INVALID_REQUEST,
                        error_message: Some(s(message)),
                        ..Default::default()
                    })
                }
            };
            match cp.start_topics(&r.mirror_name, &inc, &exc, position).await {
                Ok(_) => MirrorResponse::StartMirrorTopics(StartMirrorTopicsResponse::default()),
                Err(e) => fail(e),
            }
        }
        MirrorRequest::StopMirrorTopics(r) => {
            let mut names: Vec<String> = r.topics.iter().map(|t| t.topic_name.0.to_string()).collect();
            let patterns: Vec<String> = r.patterns.iter().map(|p| p.to_string()).collect();
            match cp.resolve_topics(&r.mirror_name, &patterns) {
                Ok(found) => names.extend(found),
                Err(e) => return fail(e),
            }
            names.sort();
            names.dedup();
            match cp.set_desired(&r.mirror_name, &names, DesiredState::Stopped).await {
                Ok(results) => MirrorResponse::StopMirrorTopics(StopMirrorTopicsResponse {
                    topics: per_topic(results, |n, code, m| StopResult {
                        name: TopicName(s(n)),
                        error_code: code,
                        error_message: m,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                Err(e) => fail(e),
            }
        }
        MirrorRequest::PauseMirrorTopics(r) => {
            let names: Vec<String> = r.topics.iter().map(|t| t.topic_name.0.to_string()).collect();
            match cp.set_desired(&r.mirror_name, &names, DesiredState::Paused).await {
                Ok(results) => MirrorResponse::PauseMirrorTopics(PauseMirrorTopicsResponse {
                    topics: per_topic(results, |n, code, m| PauseResult {
                        topic_name: TopicName(s(n)),
                        error_code: code,
                        error_message: m,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                Err(e) => fail(e),
            }
        }
        MirrorRequest::ResumeMirrorTopics(r) => {
            let names: Vec<String> = r.topics.iter().map(|t| t.topic_name.0.to_string()).collect();
            match cp.set_desired(&r.mirror_name, &names, DesiredState::Mirroring).await {
                Ok(results) => MirrorResponse::ResumeMirrorTopics(ResumeMirrorTopicsResponse {
                    topics: per_topic(results, |n, code, m| ResumeResult {
                        name: TopicName(s(n)),
                        error_code: code,
                        error_message: m,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                Err(e) => fail(e),
            }
        }
    }
}

fn loaded(cp: &ControlPlane) -> Result<(), MirrorError> {
    if cp.is_loaded() {
        Ok(())
    } else {
        Err(MirrorError {
            code: super::control::COORDINATOR_LOAD_IN_PROGRESS,
            message: "mirrorgate is loading __mirror_state".into(),
        })
    }
}
