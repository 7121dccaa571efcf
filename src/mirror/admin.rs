//! Answers to the KIP-1279 mirror admin RPCs, computed from the control plane. [`handle`]
//! dispatches on the RPC to one handler each (`mirrors`: create and delete; `describe`: list
//! and describe; `topics`: start, stop, pause, resume); each takes the decoded request and
//! returns the response body; errors are carried in the response's error code and message,
//! never as a dropped connection.

use kafka_protocol::protocol::StrBytes;

use crate::wire::mirror::create_cluster_mirror::CreateClusterMirrorResponse;
use crate::wire::mirror::delete_cluster_mirror::DeleteClusterMirrorResponse;
use crate::wire::mirror::describe_cluster_mirrors::DescribeClusterMirrorsResponse;
use crate::wire::mirror::list_cluster_mirrors::ListClusterMirrorsResponse;
use crate::wire::mirror::pause_mirror_topics::PauseMirrorTopicsResponse;
use crate::wire::mirror::resume_mirror_topics::ResumeMirrorTopicsResponse;
use crate::wire::mirror::start_mirror_topics::StartMirrorTopicsResponse;
use crate::wire::mirror::stop_mirror_topics::StopMirrorTopicsResponse;
use crate::wire::mirror::{MirrorApi, MirrorErrorCode, MirrorRequest, MirrorResponse};

use super::control::{ControlPlane, MirrorError, TopicResults};

mod describe;
mod mirrors;
mod topics;

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

/// Answers one mirror admin request: the handler of its api (one per RPC, as Kafka's
/// `KafkaApis.handle` dispatches), after the follow barrier.
pub async fn handle(cp: &ControlPlane, req: MirrorRequest) -> MirrorResponse {
    // Read-your-writes across instances: what another instance wrote to `__mirror_state`
    // before this request arrived is applied here before it is answered.
    cp.follow_barrier().await;
    let api = req.api();
    let answered = match req {
        MirrorRequest::CreateClusterMirror(r) => mirrors::create_cluster_mirror(cp, r).await,
        MirrorRequest::DeleteClusterMirror(r) => mirrors::delete_cluster_mirror(cp, r).await,
        MirrorRequest::ListClusterMirrors(r) => describe::list_cluster_mirrors(cp, r),
        MirrorRequest::DescribeClusterMirrors(r) => describe::describe_cluster_mirrors(cp, r),
        MirrorRequest::StartMirrorTopics(r) => topics::start_mirror_topics(cp, r).await,
        MirrorRequest::StopMirrorTopics(r) => topics::stop_mirror_topics(cp, r).await,
        MirrorRequest::PauseMirrorTopics(r) => topics::pause_mirror_topics(cp, r).await,
        MirrorRequest::ResumeMirrorTopics(r) => topics::resume_mirror_topics(cp, r).await,
    };
    answered.unwrap_or_else(|e| error_response(api, e.code, &e.message))
}

/// What a handler returns: its response, or the error that becomes a response carrying only
/// the error code and message ([`error_response`]).
type Answer = Result<MirrorResponse, MirrorError>;

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
