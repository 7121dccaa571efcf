//! CreateClusterMirror and DeleteClusterMirror (KIP-1279): a mirror's lifecycle.

use std::collections::BTreeMap;

use crate::wire::mirror::{
    CreateClusterMirrorRequest, CreateClusterMirrorResponse, DeleteClusterMirrorRequest, DeleteClusterMirrorResponse,
    MirrorResponse,
};

use super::{Answer, ControlPlane};

/// CreateClusterMirror: a new mirror with the request's configs (null values skipped).
pub(super) async fn create_cluster_mirror(cp: &ControlPlane, r: CreateClusterMirrorRequest) -> Answer {
    let configs: BTreeMap<String, String> =
        r.config.iter().filter_map(|c| c.value.as_ref().map(|v| (c.name.to_string(), v.to_string()))).collect();
    cp.create_mirror(&r.mirror_name, configs).await?;
    Ok(MirrorResponse::CreateClusterMirror(CreateClusterMirrorResponse::default()))
}

/// DeleteClusterMirror: removes a mirror.
pub(super) async fn delete_cluster_mirror(cp: &ControlPlane, r: DeleteClusterMirrorRequest) -> Answer {
    cp.delete_mirror(&r.mirror_name).await?;
    Ok(MirrorResponse::DeleteClusterMirror(DeleteClusterMirrorResponse::default()))
}
