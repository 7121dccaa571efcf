//! StartMirrorTopics (KIP-1279): the source topics a mirror's patterns match are checked
//! (source cluster id, owner mirror, replication loops), created on the destination with
//! the source's partition count and configs (or adopted when they exist empty), recorded as
//! mirror topics and stepped towards MIRRORING. A topic the destination refuses is recorded
//! FAILED (non-retryable) so that it is shown and not retried by every discovery round.

use regex::Regex;

use crate::wire::mirror::{MirrorErrorCode, MirrorPartitionState};

use super::super::configs;
use super::super::model::{now_ms, DesiredState, MirrorDefinition, MirrorTopic, PartitionStateRecord, StartPosition};
use super::super::topic_configs::destination_topic_configs;
use super::super::topics::{ClusterAccess, TopicConfigSupport, TopicInfo};
use super::{err, ControlPlane, MirrorError, StateWrite, INVALID_CONFIG, TOPIC_ALREADY_EXISTS, UNKNOWN_SERVER_ERROR};

impl ControlPlane {
    /// Refuses topics whose source copy is a mirror topic fed from this destination (a
    /// replication loop, [`super::super::loops`]). A source that cannot be read for this check is
    /// not a refusal (its topics were just listed; the check is best effort and logged).
    async fn refuse_loops(&self, def: &MirrorDefinition, matched: &[TopicInfo]) -> Result<(), MirrorError> {
        if matched.is_empty() {
            return Ok(());
        }
        let Ok((Some(destination_id), _)) = self.destination.topics().await else {
            return Ok(());
        };
        let Some(source) = configs::source_options(&def.name, &def.configs) else { return Ok(()) };
        let names: Vec<String> = matched.iter().map(|t| t.name.clone()).collect();
        match super::super::loops::loops_through_source(source, &[], &destination_id, &names).await {
            Ok(loops) if !loops.is_empty() => {
                let list: Vec<String> = loops
                    .iter()
                    .map(|l| format!("`{}` (mirror `{}` on the source)", l.topic, l.source_mirror))
                    .collect();
                Err(MirrorError {
                    code: INVALID_CONFIG,
                    message: format!(
                        "replication loop: on the source cluster of mirror `{}`, {} mirrored from this destination cluster ({destination_id}); mirroring it back would copy it in a circle. Stop that mirror topic on the source first (a failback), or mirror another topic",
                        def.name,
                        list.join(", ")
                    ),
                })
            }
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::warn!(mirror = %def.name, error = %e, "cannot read the source cluster's __mirror_state to rule out a replication loop");
                Ok(())
            }
        }
    }

    fn source_access(&self, def: &MirrorDefinition) -> ClusterAccess {
        let bootstrap: Vec<String> = configs::effective(&def.configs, "bootstrap.servers")
            .map(|b| configs::split_list(b).map(String::from).collect())
            .unwrap_or_default();
        let ms = |k: &str, d: std::time::Duration| {
            configs::effective(&def.configs, k)
                .and_then(|v| v.parse::<u64>().ok())
                .map(std::time::Duration::from_millis)
                .unwrap_or(d)
        };
        let security =
            configs::source_security(&def.name, &def.configs).unwrap_or_else(crate::client::ClientSecurity::broken);
        ClusterAccess {
            bootstrap: super::super::topics::Bootstrap::secured(bootstrap, security),
            connect_timeout: ms("socket.connection.setup.timeout.ms", self.source_timeouts.0),
            request_timeout: ms("request.timeout.ms", self.source_timeouts.1),
        }
    }

    /// StartMirrorTopics: resolves `include` (topic names or full-match regexes) minus
    /// `exclude` against the source's topics, saves the patterns to the mirror, creates each
    /// matched topic on the destination with the source's partition count, and sets it to
    /// mirroring. Topics already in this mirror are resumed from STOPPED (failback) or left
    /// as they are.
    ///
    /// # Errors
    /// UNKNOWN_CLUSTER_MIRROR, INVALID_CONFIG for a bad pattern, TOPIC_ALREADY_IN_CLUSTER_MIRROR
    /// naming the other mirror, an unreachable source (with the address), or a store failure.
    /// Returns the topics started.
    pub async fn start_topics(
        &self,
        mirror: &str,
        include: &[String],
        exclude: &[String],
        position: Option<StartPosition>,
    ) -> Result<Vec<String>, MirrorError> {
        self.check_loaded()?;
        let def = self.mirror(mirror)?;
        let compile = |p: &String| {
            Regex::new(&format!("^(?:{p})$")).map_err(|e| MirrorError {
                code: INVALID_CONFIG,
                message: format!("`{p}` is not a valid pattern: {e}"),
            })
        };
        let inc = include.iter().map(compile).collect::<Result<Vec<_>, _>>()?;
        let mut exc = exclude.iter().map(compile).collect::<Result<Vec<_>, _>>()?;
        let default_exclude = configs::effective(&def.configs, "topics.exclude").unwrap_or("");
        for p in configs::split_list(default_exclude) {
            exc.push(compile(&p.to_string())?);
        }
        let access = self.source_access(&def);
        let (cluster_id, source_topics) = access.topics().await.map_err(|e| MirrorError {
            code: UNKNOWN_SERVER_ERROR,
            message: format!("source cluster of mirror `{mirror}` unreachable: {e}"),
        })?;
        let matched: Vec<TopicInfo> = source_topics
            .values()
            .filter(|t| !t.internal)
            .filter(|t| inc.iter().any(|r| r.is_match(&t.name)) && !exc.iter().any(|r| r.is_match(&t.name)))
            .cloned()
            .collect();
        let _w = self.write_lock.lock().await;
        if let Some(expected) = configs::effective(&def.configs, "source.cluster.id") {
            if cluster_id.as_deref() != Some(expected) {
                return Err(MirrorError {
                    code: INVALID_CONFIG,
                    message: format!("source cluster id is {cluster_id:?}, mirror `{mirror}` expects `{expected}`"),
                });
            }
        }
        for t in &matched {
            if let Some(owner) = self.with_state(|s| s.topics.get(&t.name).map(|x| x.mirror.clone())) {
                if owner != mirror {
                    return Err(err(
                        MirrorErrorCode::TopicAlreadyInClusterMirror,
                        format!("topic `{}` already belongs to mirror `{owner}`", t.name),
                    ));
                }
            }
        }
        self.refuse_loops(&def, &matched).await?;
        let mut def = self.mirror(mirror)?;
        for p in include {
            if !def.include_patterns.contains(p) {
                def.include_patterns.push(p.clone());
            }
        }
        for p in exclude {
            if !def.exclude_patterns.contains(p) {
                def.exclude_patterns.push(p.clone());
            }
        }
        if def.source_cluster_id.is_none() {
            def.source_cluster_id = cluster_id;
        }
        if let Some(position) = position {
            def.start_position = position;
        }
        let start_position = position.unwrap_or(def.start_position);
        self.persist(StateWrite::Mirror(def.clone())).await?;
        self.update_state(|s| {
            s.mirrors.insert(mirror.to_string(), def.clone());
        });
        let broker_count = self.destination.broker_count().await.unwrap_or(1).max(1);
        let support = if matched.is_empty() {
            TopicConfigSupport::default()
        } else {
            self.destination.topic_config_support().await.map_err(|e| MirrorError {
                code: UNKNOWN_SERVER_ERROR,
                message: format!("cannot read which topic configs the destination accepts: {e}"),
            })?
        };
        let mut started = Vec::new();
        let mut refused = Vec::new();
        let mut foreign = Vec::new();
        for t in matched {
            let source_configs = access.topic_configs(&t.name).await.map_err(|e| MirrorError {
                code: UNKNOWN_SERVER_ERROR,
                message: format!("cannot read the configs of source topic `{}`: {e}", t.name),
            })?;
            let (dest_configs, unsupported) = destination_topic_configs(&def, &source_configs, &support);
            if !unsupported.is_empty() {
                tracing::info!(
                    mirror,
                    topic = %t.name,
                    configs = ?unsupported,
                    tiered_storage = support.tiered_storage,
                    "source topic configs the destination cannot take are not copied"
                );
            }
            let rf = broker_count.min(3) as i16;
            let already_mirrored = self.with_state(|s| s.topics.contains_key(&t.name));
            let created = match self.destination.create_topic(&t.name, t.partitions, rf, &dest_configs).await {
                Ok(c) => c,
                Err(e) => {
                    // Recorded as a FAILED mirror topic (non-retryable): shown by --describe,
                    // logged once, and not retried by every discovery round; an explicit
                    // --start of the topic tries again.
                    let reason = format!("cannot create mirror topic `{}` on the destination: {e}", t.name);
                    tracing::error!(mirror, topic = %t.name, %reason, "mirror topic FAILED");
                    self.record_refused_topic(mirror, &t, &reason).await?;
                    refused.push(reason);
                    continue;
                }
            };
            if created {
                self.forget_refused_start(&t.name).await?;
            }
            // An existing destination topic must have the source's partition count (and be
            // empty with nothing writing to it: checked below).
            let mismatch = if created {
                None
            } else {
                let (_, dest_topics) = self.destination.topics().await.map_err(|e| MirrorError {
                    code: UNKNOWN_SERVER_ERROR,
                    message: format!("cannot describe destination topic `{}`: {e}", t.name),
                })?;
                dest_topics.get(&t.name).filter(|d| d.partitions != t.partitions).map(|d| {
                    format!(
                        "destination topic {} already exists with {} partition(s), the source has {}; it cannot be made identical",
                        t.name, d.partitions, t.partitions
                    )
                })
            };
            // An existing destination topic that is not ours yet is adopted only when it is
            // empty and nothing writes to it (issue 9, item 13); else its start is refused.
            // A foreign topic with another partition count is refused the same way (never
            // recorded, so it does not become read-only).
            if !created && !already_mirrored {
                let verdict = match &mismatch {
                    Some(reason) => Err(super::super::adopt::NotAdopted::Foreign(reason.clone())),
                    None => super::super::adopt::check_adoptable(&self.destination, &t.name, t.partitions).await,
                };
                match verdict {
                    Ok(()) => {}
                    Err(super::super::adopt::NotAdopted::Foreign(reason)) => {
                        tracing::error!(mirror, topic = %t.name, %reason, "mirror topic refused: the destination topic exists and is not empty");
                        foreign.push(reason);
                        continue;
                    }
                    Err(super::super::adopt::NotAdopted::Unchecked(reason)) => {
                        tracing::error!(mirror, topic = %t.name, %reason, "mirror topic refused: the existing destination topic could not be checked");
                        refused.push(reason);
                        continue;
                    }
                }
            }
            let source_log_append_time = access
                .effective_topic_config(&t.name, "message.timestamp.type")
                .await
                .map_err(|e| MirrorError {
                    code: UNKNOWN_SERVER_ERROR,
                    message: format!("cannot read the timestamp type of source topic `{}`: {e}", t.name),
                })?
                .is_some_and(|v| v == "LogAppendTime");
            let topic = MirrorTopic {
                mirror: mirror.to_string(),
                topic: t.name.clone(),
                source_topic_id: Some(t.topic_id.clone()),
                desired: DesiredState::Mirroring,
                partitions: Some(t.partitions),
                source_log_append_time,
                start_position,
                // A re-start keeps the topic's migration routing.
                migration: self.with_state(|s| s.topics.get(&t.name).and_then(|x| x.migration.clone())),
                updated_ms: now_ms(),
            };
            self.persist(StateWrite::Topic(topic.clone())).await?;
            self.update_state(|s| {
                s.topics.insert(t.name.clone(), topic);
            });
            match mismatch {
                None => self.step_partitions(&t.name, t.partitions).await?,
                Some(reason) => {
                    tracing::error!(mirror, topic = %t.name, %reason, "mirror topic FAILED");
                    for p in 0..t.partitions {
                        let rec = PartitionStateRecord {
                            error_message: Some(reason.clone()),
                            ..PartitionStateRecord::new(mirror, &t.name, p, MirrorPartitionState::Failed)
                        };
                        self.persist(StateWrite::Partition(rec.clone())).await?;
                        self.update_state(|s| {
                            s.partitions.insert((t.name.clone(), p), rec);
                        });
                    }
                }
            }
            started.push(t.name);
        }
        tracing::info!(mirror, topics = ?started, "mirror topics started");
        if !refused.is_empty() || !foreign.is_empty() {
            let started = if started.is_empty() { String::new() } else { format!("started {started:?}; ") };
            // TOPIC_ALREADY_EXISTS (36, a StartMirrorTopics error of KIP-1279) when only
            // existing foreign destination topics were refused.
            let code = if refused.is_empty() { TOPIC_ALREADY_EXISTS } else { UNKNOWN_SERVER_ERROR };
            refused.extend(foreign);
            return Err(MirrorError { code, message: format!("{started}{}", refused.join("; ")) });
        }
        Ok(started)
    }

    /// Records `t` as a mirror topic of `mirror` whose partitions are FAILED,
    /// non-retryable, with `reason`: a start the destination refused.
    async fn record_refused_topic(&self, mirror: &str, t: &TopicInfo, reason: &str) -> Result<(), MirrorError> {
        let topic = MirrorTopic {
            mirror: mirror.to_string(),
            topic: t.name.clone(),
            source_topic_id: Some(t.topic_id.clone()),
            desired: DesiredState::Mirroring,
            partitions: Some(t.partitions),
            source_log_append_time: false,
            start_position: StartPosition::Earliest,
            migration: None,
            updated_ms: now_ms(),
        };
        self.persist(StateWrite::Topic(topic.clone())).await?;
        self.update_state(|s| {
            s.topics.insert(t.name.clone(), topic);
        });
        for p in 0..t.partitions {
            let rec = PartitionStateRecord {
                error_message: Some(reason.to_string()),
                ..PartitionStateRecord::new(mirror, &t.name, p, MirrorPartitionState::Failed)
            };
            self.persist(StateWrite::Partition(rec.clone())).await?;
            self.update_state(|s| {
                s.partitions.insert((t.name.clone(), p), rec);
            });
        }
        Ok(())
    }

    /// After the destination topic `topic` was just created: drops the FAILED partition
    /// records of an earlier refused start (nothing ever appended: no offset segment), so
    /// the partitions start from LOG_ALIGNMENT.
    async fn forget_refused_start(&self, topic: &str) -> Result<(), MirrorError> {
        let stale: Vec<PartitionStateRecord> = self.with_state(|s| {
            s.partitions
                .values()
                .filter(|p| {
                    p.topic == topic
                        && p.state == MirrorPartitionState::Failed
                        && !p.retryable
                        && p.segments.is_empty()
                        && p.last_mirrored_offset < 0
                })
                .cloned()
                .collect()
        });
        for mut rec in stale {
            // FAILED → LOG_ALIGNMENT is a valid transition (KIP-1279 §4.2).
            rec.previous_state = Some(rec.state);
            rec.state = MirrorPartitionState::LogAlignment;
            rec.state_epoch += 1;
            rec.error_message = None;
            rec.retry_attempt = 0;
            rec.updated_ms = now_ms();
            self.persist(StateWrite::Partition(rec.clone())).await?;
            self.update_state(|s| {
                s.partitions.insert((topic.to_string(), rec.partition), rec);
            });
        }
        Ok(())
    }
}
