//! The control plane's migration operations (issue 36, `docs/migration.md`): a topic's
//! routing changed by a [`RoutingCommand`], persisted in its `topic` record before it takes
//! effect in memory, as every control-plane operation.

use super::*;
use crate::mirror::migration::routing::{self, Migration, RoutingCommand, TopicRouting};
use crate::mirror::model::is_shifted;

/// INVALID_CLUSTER_MIRROR_STATES (145): a routing command that does not apply in the topic's
/// current routing; the message says why ([`routing::RoutingError`]).
fn refused(e: routing::RoutingError) -> MirrorError {
    err(MirrorErrorCode::InvalidClusterMirrorStates, e.to_string())
}

impl ControlPlane {
    /// Applies `cmd` to the routing of each of `topics` of `mirror` ([`routing::apply`]),
    /// persisting each changed topic record before it takes effect; one result per topic, in
    /// order. A topic is refused when it is not in `mirror` (TOPIC_NOT_IN_CLUSTER_MIRROR),
    /// when the command does not apply in its routing (INVALID_CLUSTER_MIRROR_STATES, naming
    /// why), and, for `StartMigration`, when it is stopped (MIRROR_TOPIC_BEING_STOPPED: its
    /// writes already go to the destination) or has a shifted partition (INVALID_CONFIG: an
    /// acknowledgement from the source would name another offset than a reader sees).
    ///
    /// # Errors
    /// COORDINATOR_LOAD_IN_PROGRESS before the state is loaded, UNKNOWN_CLUSTER_MIRROR, and
    /// a failed `__mirror_state` write (UNKNOWN_SERVER_ERROR; the topics after it are not
    /// changed).
    pub async fn set_migration(
        &self,
        mirror: &str,
        topics: &[String],
        cmd: &RoutingCommand,
    ) -> Result<TopicResults, MirrorError> {
        self.check_loaded()?;
        self.mirror(mirror)?;
        let _w = self.write_lock.lock().await;
        let mut results = Vec::new();
        for name in topics {
            let current = self.with_state(|s| s.topics.get(name).filter(|t| t.mirror == mirror).cloned());
            let Some(topic) = current else {
                let e = err(
                    MirrorErrorCode::TopicNotInClusterMirror,
                    format!("topic `{name}` is not in mirror `{mirror}`"),
                );
                results.push((name.clone(), Err(e)));
                continue;
            };
            let checked = self
                .check_migration_start(&topic, cmd)
                .and_then(|()| routing::apply(name, topic.migration.as_ref(), cmd, now_ms()).map_err(refused));
            let next = match checked {
                Ok(next) => next,
                Err(e) => {
                    results.push((name.clone(), Err(e)));
                    continue;
                }
            };
            if topic.migration.as_ref() != Some(&next) {
                let mut t = topic;
                t.migration = Some(next);
                t.updated_ms = now_ms();
                self.persist(StateWrite::Topic(t.clone())).await?;
                self.update_state(|s| {
                    s.topics.insert(name.clone(), t);
                });
            }
            results.push((name.clone(), Ok(())));
        }
        let changed: Vec<&String> = results.iter().filter(|(_, r)| r.is_ok()).map(|(t, _)| t).collect();
        if !changed.is_empty() {
            tracing::info!(mirror, command = ?cmd, topics = ?changed, "mirror topics' migration routing set");
        }
        Ok(results)
    }

    /// The routing of `topic` (`None`: not in migration, or not a mirror topic).
    pub fn migration_routing(&self, topic: &str) -> Option<TopicRouting> {
        self.with_state(|s| s.topics.get(topic).and_then(|t| t.migration.as_ref()).map(|m| m.routing))
    }

    /// The migration of `topic`, for `--describe`.
    pub fn migration(&self, topic: &str) -> Option<Migration> {
        self.with_state(|s| s.topics.get(topic).and_then(|t| t.migration.clone()))
    }

    /// What `StartMigration` needs besides [`routing::apply`]: a topic that is not stopped
    /// and has no shifted partition.
    fn check_migration_start(&self, topic: &MirrorTopic, cmd: &RoutingCommand) -> Result<(), MirrorError> {
        if *cmd != RoutingCommand::StartMigration || topic.migration.is_some() {
            return Ok(());
        }
        if topic.desired == DesiredState::Stopped {
            return Err(err(
                MirrorErrorCode::MirrorTopicBeingStopped,
                format!("topic `{}` is stopped: clients already write it on the destination", topic.topic),
            ));
        }
        let shifted: Vec<i32> = self.with_state(|s| {
            s.partitions
                .values()
                .filter(|p| p.topic == topic.topic && is_shifted(&p.segments))
                .map(|p| p.partition)
                .collect()
        });
        if !shifted.is_empty() {
            return Err(MirrorError {
                code: INVALID_CONFIG,
                message: format!(
                    "topic `{}` has shifted partitions {shifted:?}: a write acknowledged by the source would name another offset than a reader sees through mirrorgate",
                    topic.topic
                ),
            });
        }
        Ok(())
    }
}
