//! Replication-loop detection at `--start` (issue 9, item 13).
//!
//! A topic must never be mirrored back into the cluster it is mirrored from: A→B by one
//! mirrorgate and B→A by another, same topic names, would copy each side's copy back for ever
//! (each would also refuse the other's records as foreign writes, FAILED on both sides). A
//! mirrorgate in front of a mirror's source keeps its state in that cluster's
//! `__mirror_state`: if that state says a topic there is a mirror topic fed *from this
//! mirrorgate's destination cluster* (by cluster id), starting it here closes a loop.
//! Chained mirroring (A→B→C) stays allowed: B's topic is fed from A, not from C. Read-only.

use crate::client::cluster::ClusterClient;
use crate::client::ClusterOptions;

use super::model::DesiredState;
use super::store::{StateStore, DEFAULT_STATE_TOPIC};

/// A source topic that is itself a mirror topic fed from this destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    /// Topic name (the same on both clusters).
    pub topic: String,
    /// The mirror on the source cluster that feeds it.
    pub source_mirror: String,
    /// That mirror's source cluster id: this destination's.
    pub cluster_id: String,
}

/// The topics of `topics` that the source cluster (reached with `source`) mirrors, not
/// stopped, from the cluster with id `destination_cluster_id`, according to the source's
/// state topics `state_topics` (read if they exist; [`DEFAULT_STATE_TOPIC`] always).
///
/// # Errors
/// Text naming the state topic when the source cannot be read.
pub async fn loops_through_source(
    source: ClusterOptions,
    state_topics: &[&str],
    destination_cluster_id: &str,
    topics: &[String],
) -> Result<Vec<Loop>, String> {
    let client = ClusterClient::connect(source).await.map_err(|e| e.to_string())?;
    let mut names: Vec<&str> = state_topics.to_vec();
    if !names.contains(&DEFAULT_STATE_TOPIC) {
        names.push(DEFAULT_STATE_TOPIC);
    }
    let mut found = Vec::new();
    for name in names {
        let Some(store) = StateStore::open_existing(client.clone(), name).await.map_err(|e| e.to_string())? else {
            continue;
        };
        let snapshot = store.load().await.map_err(|e| e.to_string())?;
        for ((mirror, topic), t) in &snapshot.topics {
            if t.desired == DesiredState::Stopped || !topics.contains(topic) {
                continue;
            }
            let from = snapshot.mirrors.get(mirror).and_then(|m| m.source_cluster_id.as_deref());
            if from == Some(destination_cluster_id) {
                found.push(Loop {
                    topic: topic.clone(),
                    source_mirror: mirror.clone(),
                    cluster_id: destination_cluster_id.to_string(),
                });
            }
        }
    }
    Ok(found)
}
