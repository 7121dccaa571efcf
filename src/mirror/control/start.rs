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
        let access = self.source_access(&def);
        let (cluster_id, matched) = self.match_source_topics(&def, &access, include, exclude).await?;
        let _w = self.write_lock.lock().await;
        self.check_startable(&def, cluster_id.as_deref(), &matched).await?;
        let start_position = self.save_start(mirror, include, exclude, cluster_id, position).await?;
        let dest = self.destination_facts(&matched).await?;
        let mut starts = Starts::default();
        for t in matched {
            let name = t.name.clone();
            match self.start_topic(&def, &access, &dest, t, start_position).await? {
                TopicStart::Started => starts.started.push(name),
                TopicStart::Refused(reason) => starts.refused.push(reason),
                TopicStart::Foreign(reason) => starts.foreign.push(reason),
            }
        }
        tracing::info!(mirror, topics = ?starts.started, "mirror topics started");
        starts.answer()
    }

    /// The source's cluster id and its non-internal topics that match `include` (names or
    /// full-match regexes) and neither `exclude` nor the mirror's `topics.exclude`.
    ///
    /// # Errors
    /// INVALID_CONFIG for a bad pattern (before the source is asked), UNKNOWN_SERVER_ERROR
    /// for an unreachable source.
    async fn match_source_topics(
        &self,
        def: &MirrorDefinition,
        access: &ClusterAccess,
        include: &[String],
        exclude: &[String],
    ) -> Result<(Option<String>, Vec<TopicInfo>), MirrorError> {
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
        let (cluster_id, source_topics) = access.topics().await.map_err(|e| MirrorError {
            code: UNKNOWN_SERVER_ERROR,
            message: format!("source cluster of mirror `{}` unreachable: {e}", def.name),
        })?;
        let matched: Vec<TopicInfo> = source_topics
            .values()
            .filter(|t| !t.internal)
            .filter(|t| inc.iter().any(|r| r.is_match(&t.name)) && !exc.iter().any(|r| r.is_match(&t.name)))
            .cloned()
            .collect();
        Ok((cluster_id, matched))
    }

    /// Whether the matched topics may start: the source is the cluster the mirror expects
    /// (`source.cluster.id`), no topic belongs to another mirror, and none would copy in a
    /// circle ([`ControlPlane::refuse_loops`]).
    ///
    /// # Errors
    /// INVALID_CONFIG, TOPIC_ALREADY_IN_CLUSTER_MIRROR naming the other mirror.
    async fn check_startable(
        &self,
        def: &MirrorDefinition,
        cluster_id: Option<&str>,
        matched: &[TopicInfo],
    ) -> Result<(), MirrorError> {
        let mirror = def.name.as_str();
        if let Some(expected) = configs::effective(&def.configs, "source.cluster.id") {
            if cluster_id != Some(expected) {
                return Err(MirrorError {
                    code: INVALID_CONFIG,
                    message: format!(
                        "source cluster id is {:?}, mirror `{mirror}` expects `{expected}`",
                        cluster_id.map(str::to_string)
                    ),
                });
            }
        }
        for t in matched {
            if let Some(owner) = self.with_state(|s| s.topics.get(&t.name).map(|x| x.mirror.clone())) {
                if owner != mirror {
                    return Err(err(
                        MirrorErrorCode::TopicAlreadyInClusterMirror,
                        format!("topic `{}` already belongs to mirror `{owner}`", t.name),
                    ));
                }
            }
        }
        self.refuse_loops(def, matched).await
    }

    /// Saves the start to the mirror's definition: the patterns (added to those it has), the
    /// source cluster id (when not known yet) and the start position (when given). Returns
    /// the start position of the topics started now.
    ///
    /// # Errors
    /// UNKNOWN_CLUSTER_MIRROR, or a store failure.
    async fn save_start(
        &self,
        mirror: &str,
        include: &[String],
        exclude: &[String],
        cluster_id: Option<String>,
        position: Option<StartPosition>,
    ) -> Result<StartPosition, MirrorError> {
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
        Ok(start_position)
    }

    /// What the destination takes: its broker count (for the replication factor, at most 3)
    /// and the topic configs it accepts (asked only when a topic is to be created).
    ///
    /// # Errors
    /// UNKNOWN_SERVER_ERROR when the accepted configs cannot be read.
    async fn destination_facts(&self, matched: &[TopicInfo]) -> Result<DestinationFacts, MirrorError> {
        let broker_count = self.destination.broker_count().await.unwrap_or(1).max(1);
        let support = if matched.is_empty() {
            TopicConfigSupport::default()
        } else {
            self.destination.topic_config_support().await.map_err(|e| MirrorError {
                code: UNKNOWN_SERVER_ERROR,
                message: format!("cannot read which topic configs the destination accepts: {e}"),
            })?
        };
        Ok(DestinationFacts { replication_factor: broker_count.min(3) as i16, support })
    }

    /// Starts one source topic `t`: created on the destination (or an existing one checked
    /// for adoption), then recorded as a mirror topic of `def` and stepped towards MIRRORING
    /// — or FAILED when an existing destination topic's partition count differs.
    ///
    /// # Errors
    /// UNKNOWN_SERVER_ERROR when the source or destination cannot be read, or a store failure.
    async fn start_topic(
        &self,
        def: &MirrorDefinition,
        access: &ClusterAccess,
        dest: &DestinationFacts,
        t: TopicInfo,
        start_position: StartPosition,
    ) -> Result<TopicStart, MirrorError> {
        let (created, already_mirrored) = match self.create_destination_topic(def, access, dest, &t).await? {
            Ok(created) => created,
            Err(reason) => return Ok(TopicStart::Refused(reason)),
        };
        let mismatch = match self.check_existing(&def.name, &t, created, already_mirrored).await? {
            Ok(mismatch) => mismatch,
            Err(refusal) => return Ok(refusal),
        };
        self.record_started_topic(&def.name, access, &t, start_position, mismatch).await?;
        Ok(TopicStart::Started)
    }

    /// Creates `t` on the destination with the source's partition count and the configs
    /// the destination takes. Returns `(created, already a mirror topic)`; `Err(reason)`
    /// when the destination refused the topic (recorded FAILED, non-retryable: shown by
    /// --describe, logged once, and not retried by every discovery round; an explicit
    /// --start of the topic tries again).
    ///
    /// # Errors
    /// UNKNOWN_SERVER_ERROR when the source topic's configs cannot be read, or a store failure.
    async fn create_destination_topic(
        &self,
        def: &MirrorDefinition,
        access: &ClusterAccess,
        dest: &DestinationFacts,
        t: &TopicInfo,
    ) -> Result<Result<(bool, bool), String>, MirrorError> {
        let mirror = def.name.as_str();
        let source_configs = access.topic_configs(&t.name).await.map_err(|e| MirrorError {
            code: UNKNOWN_SERVER_ERROR,
            message: format!("cannot read the configs of source topic `{}`: {e}", t.name),
        })?;
        let (dest_configs, unsupported) = destination_topic_configs(def, &source_configs, &dest.support);
        if !unsupported.is_empty() {
            tracing::info!(
                mirror,
                topic = %t.name,
                configs = ?unsupported,
                tiered_storage = dest.support.tiered_storage,
                "source topic configs the destination cannot take are not copied"
            );
        }
        let already_mirrored = self.with_state(|s| s.topics.contains_key(&t.name));
        let created =
            match self.destination.create_topic(&t.name, t.partitions, dest.replication_factor, &dest_configs).await {
                Ok(c) => c,
                Err(e) => {
                    let reason = format!("cannot create mirror topic `{}` on the destination: {e}", t.name);
                    tracing::error!(mirror, topic = %t.name, %reason, "mirror topic FAILED");
                    self.record_refused_topic(mirror, t, &reason).await?;
                    return Ok(Err(reason));
                }
            };
        if created {
            self.forget_refused_start(&t.name).await?;
        }
        Ok(Ok((created, already_mirrored)))
    }

    /// Checks a destination topic that existed before the start. It must have the source's
    /// partition count (else `Ok(Some(reason))`: the mirror topic is recorded FAILED); one
    /// that is not a mirror topic yet is adopted only when it is empty and nothing writes to
    /// it (issue 9, item 13), else its start is refused (`Err`, never recorded, so it does
    /// not become read-only).
    ///
    /// # Errors
    /// UNKNOWN_SERVER_ERROR when the destination topic cannot be described.
    async fn check_existing(
        &self,
        mirror: &str,
        t: &TopicInfo,
        created: bool,
        already_mirrored: bool,
    ) -> Result<Result<Option<String>, TopicStart>, MirrorError> {
        if created {
            return Ok(Ok(None));
        }
        let (_, dest_topics) = self.destination.topics().await.map_err(|e| MirrorError {
            code: UNKNOWN_SERVER_ERROR,
            message: format!("cannot describe destination topic `{}`: {e}", t.name),
        })?;
        let mismatch = dest_topics.get(&t.name).filter(|d| d.partitions != t.partitions).map(|d| {
            format!(
                "destination topic {} already exists with {} partition(s), the source has {}; it cannot be made identical",
                t.name, d.partitions, t.partitions
            )
        });
        if already_mirrored {
            return Ok(Ok(mismatch));
        }
        // A foreign topic with another partition count is refused the same way.
        let verdict = match &mismatch {
            Some(reason) => Err(super::super::adopt::NotAdopted::Foreign(reason.clone())),
            None => super::super::adopt::check_adoptable(&self.destination, &t.name, t.partitions).await,
        };
        match verdict {
            Ok(()) => Ok(Ok(mismatch)),
            Err(super::super::adopt::NotAdopted::Foreign(reason)) => {
                tracing::error!(mirror, topic = %t.name, %reason, "mirror topic refused: the destination topic exists and is not empty");
                Ok(Err(TopicStart::Foreign(reason)))
            }
            Err(super::super::adopt::NotAdopted::Unchecked(reason)) => {
                tracing::error!(mirror, topic = %t.name, %reason, "mirror topic refused: the existing destination topic could not be checked");
                Ok(Err(TopicStart::Refused(reason)))
            }
        }
    }

    /// Records `t` as a mirror topic of `mirror` (desired MIRRORING, with the source's
    /// timestamp type and the start position) and steps its partitions; with a partition
    /// count `mismatch` its partitions are recorded FAILED with that reason instead.
    ///
    /// # Errors
    /// UNKNOWN_SERVER_ERROR when the source topic's timestamp type cannot be read, or a store
    /// failure.
    async fn record_started_topic(
        &self,
        mirror: &str,
        access: &ClusterAccess,
        t: &TopicInfo,
        start_position: StartPosition,
        mismatch: Option<String>,
    ) -> Result<(), MirrorError> {
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
        Ok(())
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

/// What the destination takes for the topics a start creates.
struct DestinationFacts {
    /// Replication factor of a created topic: the destination's broker count, at most 3.
    replication_factor: i16,
    /// The topic configs the destination accepts.
    support: TopicConfigSupport,
}

/// How far one topic's start went.
enum TopicStart {
    /// Recorded as a mirror topic (its partitions stepped towards MIRRORING, or FAILED when
    /// the partition counts differ).
    Started,
    /// Refused: the destination refused the topic or could not be checked.
    Refused(String),
    /// Refused: an existing destination topic that is not empty.
    Foreign(String),
}

/// The topics of one StartMirrorTopics request, by how their start went.
#[derive(Default)]
struct Starts {
    started: Vec<String>,
    refused: Vec<String>,
    foreign: Vec<String>,
}

impl Starts {
    /// The answer: the topics started, or an error naming those started and every refusal —
    /// TOPIC_ALREADY_EXISTS (36, a StartMirrorTopics error of KIP-1279) when only existing
    /// foreign destination topics were refused, UNKNOWN_SERVER_ERROR otherwise.
    fn answer(self) -> Result<Vec<String>, MirrorError> {
        let Starts { started, mut refused, foreign } = self;
        if refused.is_empty() && foreign.is_empty() {
            return Ok(started);
        }
        let started = if started.is_empty() { String::new() } else { format!("started {started:?}; ") };
        let code = if refused.is_empty() { TOPIC_ALREADY_EXISTS } else { UNKNOWN_SERVER_ERROR };
        refused.extend(foreign);
        Err(MirrorError { code, message: format!("{started}{}", refused.join("; ")) })
    }
}
