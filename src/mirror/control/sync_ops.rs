//! Control-plane operations used by the metadata sync (`mirror::sync`): discovered topics,
//! partition increases, source topic re-creation. A child module of `control`, so it may use
//! the control plane's private state. Like every control-plane operation, each change is
//! persisted to `__mirror_state` before it takes effect in memory.

use super::*;

impl ControlPlane {
    /// Starts source topics found by auto-discovery (`topics.include` or patterns saved by
    /// `--start`) as [`ControlPlane::start_topics`] does, without saving their names as
    /// patterns of the mirror: discovery follows the patterns, not the names it found.
    /// Only topics that belong to no mirror yet should be passed (a STOPPED topic of this
    /// mirror would be restarted).
    ///
    /// # Errors
    /// As [`ControlPlane::start_topics`].
    pub async fn add_discovered_topics(&self, mirror: &str, topics: &[String]) -> Result<Vec<String>, MirrorError> {
        let before = self.mirror(mirror)?;
        let names: Vec<String> = topics.iter().map(|t| regex::escape(t)).collect();
        let started = self.start_topics(mirror, &names, &[], None).await;
        let _w = self.write_lock.lock().await;
        if let Ok(mut def) = self.mirror(mirror) {
            let len = def.include_patterns.len();
            def.include_patterns.retain(|p| before.include_patterns.contains(p) || !names.contains(p));
            if def.include_patterns.len() != len {
                self.persist(StateWrite::Mirror(def.clone())).await?;
                self.update_state(|s| {
                    s.mirrors.insert(mirror.to_string(), def);
                });
            }
        }
        started
    }

    /// Records that mirror topic `topic` now has `count` partitions (after CreatePartitions on
    /// the destination) and creates a LOG_ALIGNMENT state record for each new partition, so
    /// the data plane mirrors them from their start. Existing partitions are not touched.
    /// Returns the new partition indexes (empty when `count` is not larger).
    ///
    /// # Errors
    /// UNKNOWN_TOPIC_OR_PARTITION for a topic that is not a mirror topic; a store failure.
    pub async fn add_partitions(&self, topic: &str, count: i32) -> Result<Vec<i32>, MirrorError> {
        let _w = self.write_lock.lock().await;
        let mut t = self.with_state(|s| s.topics.get(topic).cloned()).ok_or_else(|| MirrorError {
            code: UNKNOWN_TOPIC_OR_PARTITION,
            message: format!("`{topic}` is not a mirror topic"),
        })?;
        let old = t.partitions.unwrap_or(0);
        if count <= old {
            return Ok(Vec::new());
        }
        t.partitions = Some(count);
        t.updated_ms = now_ms();
        self.persist(StateWrite::Topic(t.clone())).await?;
        self.update_state(|s| {
            s.topics.insert(topic.to_string(), t.clone());
        });
        let mut added = Vec::new();
        for p in old..count {
            if self.with_state(|s| s.partitions.contains_key(&(topic.to_string(), p))) {
                continue;
            }
            let rec = PartitionStateRecord::new(&t.mirror, topic, p, MirrorPartitionState::LogAlignment);
            self.persist(StateWrite::Partition(rec.clone())).await?;
            tracing::info!(mirror = %t.mirror, topic, partition = p, state = rec.state.as_str(), "mirror partition state");
            self.update_state(|s| {
                s.partitions.insert((topic.to_string(), p), rec);
            });
            added.push(p);
        }
        Ok(added)
    }

    /// Moves every partition of `topic` that is not STOPPING or STOPPED to FAILED with
    /// `reason` (KIP-1279 §4.3: source topic deleted or recreated, source cluster changed).
    /// A partition already FAILED with the same reason and retryability is left alone.
    /// Returns the partitions moved.
    ///
    /// # Errors
    /// A store failure.
    pub async fn fail_topic(&self, topic: &str, reason: &str, retryable: bool) -> Result<Vec<i32>, MirrorError> {
        let parts: Vec<PartitionStateRecord> = self.with_state(|s| {
            s.partitions
                .range((topic.to_string(), i32::MIN)..=(topic.to_string(), i32::MAX))
                .map(|(_, p)| p.clone())
                .collect()
        });
        let mut failed = Vec::new();
        for p in parts {
            let done = p.state == MirrorPartitionState::Failed
                && p.error_message.as_deref() == Some(reason)
                && p.retryable == retryable;
            if done || matches!(p.state, MirrorPartitionState::Stopping | MirrorPartitionState::Stopped) {
                continue;
            }
            if self
                .transition(topic, p.partition, MirrorPartitionState::Failed, Some((reason.to_string(), retryable)))
                .await?
            {
                failed.push(p.partition);
            }
        }
        Ok(failed)
    }
}
