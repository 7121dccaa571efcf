//! StartMirrorTopics, StopMirrorTopics, PauseMirrorTopics and ResumeMirrorTopics (KIP-1279):
//! the desired state of a mirror's topics.

use kafka_protocol::messages::TopicName;

use crate::mirror::model::{DesiredState, StartPosition};
use crate::wire::mirror::pause_mirror_topics::TopicResult as PauseResult;
use crate::wire::mirror::resume_mirror_topics::TopicResult as ResumeResult;
use crate::wire::mirror::stop_mirror_topics::TopicResult as StopResult;
use crate::wire::mirror::{
    MirrorResponse, PauseMirrorTopicsRequest, PauseMirrorTopicsResponse, ResumeMirrorTopicsRequest,
    ResumeMirrorTopicsResponse, StartMirrorTopicsRequest, StartMirrorTopicsResponse, StopMirrorTopicsRequest,
    StopMirrorTopicsResponse,
};

use super::{per_topic, s, Answer, ControlPlane};

/// StartMirrorTopics: the topics matching the include and not the exclude patterns start
/// mirroring from `start_position` (INVALID_REQUEST for a position that does not parse).
pub(super) async fn start_mirror_topics(cp: &ControlPlane, r: StartMirrorTopicsRequest) -> Answer {
    let inc: Vec<String> = r.include_patterns.iter().map(|p| p.to_string()).collect();
    let exc: Vec<String> = r.exclude_patterns.iter().map(|p| p.to_string()).collect();
    let position = match r.start_position.as_deref().map(StartPosition::parse) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(message)) => {
            return Ok(MirrorResponse::StartMirrorTopics(StartMirrorTopicsResponse {
                error_code: crate::mirror::config_rpc::INVALID_REQUEST,
                error_message: Some(s(message)),
                ..Default::default()
            }))
        }
    };
    cp.start_topics(&r.mirror_name, &inc, &exc, position).await?;
    Ok(MirrorResponse::StartMirrorTopics(StartMirrorTopicsResponse::default()))
}

/// StopMirrorTopics: the named topics and those matching the patterns stop (failover).
pub(super) async fn stop_mirror_topics(cp: &ControlPlane, r: StopMirrorTopicsRequest) -> Answer {
    let mut names: Vec<String> = r.topics.iter().map(|t| t.topic_name.0.to_string()).collect();
    let patterns: Vec<String> = r.patterns.iter().map(|p| p.to_string()).collect();
    names.extend(cp.resolve_topics(&r.mirror_name, &patterns)?);
    names.sort();
    names.dedup();
    let results = cp.set_desired(&r.mirror_name, &names, DesiredState::Stopped).await?;
    Ok(MirrorResponse::StopMirrorTopics(StopMirrorTopicsResponse {
        topics: per_topic(results, |n, code, m| StopResult {
            name: TopicName(s(n)),
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
        ..Default::default()
    }))
}

/// PauseMirrorTopics: the named topics pause.
pub(super) async fn pause_mirror_topics(cp: &ControlPlane, r: PauseMirrorTopicsRequest) -> Answer {
    let names: Vec<String> = r.topics.iter().map(|t| t.topic_name.0.to_string()).collect();
    let results = cp.set_desired(&r.mirror_name, &names, DesiredState::Paused).await?;
    Ok(MirrorResponse::PauseMirrorTopics(PauseMirrorTopicsResponse {
        topics: per_topic(results, |n, code, m| PauseResult {
            topic_name: TopicName(s(n)),
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
        ..Default::default()
    }))
}

/// ResumeMirrorTopics: the named topics mirror again.
pub(super) async fn resume_mirror_topics(cp: &ControlPlane, r: ResumeMirrorTopicsRequest) -> Answer {
    let names: Vec<String> = r.topics.iter().map(|t| t.topic_name.0.to_string()).collect();
    let results = cp.set_desired(&r.mirror_name, &names, DesiredState::Mirroring).await?;
    Ok(MirrorResponse::ResumeMirrorTopics(ResumeMirrorTopicsResponse {
        topics: per_topic(results, |n, code, m| ResumeResult {
            name: TopicName(s(n)),
            error_code: code,
            error_message: m,
            ..Default::default()
        }),
        ..Default::default()
    }))
}
