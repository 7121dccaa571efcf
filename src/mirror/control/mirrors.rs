//! Mirror definitions (CreateClusterMirror, IncrementalAlterConfigs on CLUSTER_MIRROR,
//! DeleteClusterMirror, List/Describe): validated before anything is stored, persisted to
//! `__mirror_state` before they change in memory.

use std::collections::{BTreeMap, HashMap};

use crate::wire::mirror::{MirrorErrorCode, MirrorPartitionState};

use super::super::configs;
use super::super::model::{now_ms, MirrorDefinition, MirrorTopic, PartitionStateRecord, StartPosition};
use super::{
    err, validate_mirror_name, ControlPlane, ControlState, MirrorError, MirrorView, StateWrite, INVALID_CONFIG,
};

impl ControlPlane {
    /// CreateClusterMirror: validates the name and configs and stores the mirror.
    ///
    /// # Errors
    /// INVALID_CLUSTER_MIRROR_NAME, CLUSTER_MIRROR_ALREADY_EXISTS, INVALID_CONFIG, or a
    /// store failure.
    pub async fn create_mirror(&self, name: &str, configs_in: BTreeMap<String, String>) -> Result<(), MirrorError> {
        self.check_loaded()?;
        validate_mirror_name(name)?;
        configs::validate_all(&configs_in).map_err(|e| MirrorError { code: INVALID_CONFIG, message: e.to_string() })?;
        self.check_secrets_storable(&configs_in)?;
        let _w = self.write_lock.lock().await;
        if self.with_state(|s| s.mirrors.contains_key(name)) {
            return Err(err(MirrorErrorCode::ClusterMirrorAlreadyExists, format!("mirror `{name}` already exists")));
        }
        let def = MirrorDefinition {
            name: name.to_string(),
            configs: configs_in,
            created_ms: now_ms(),
            source_cluster_id: None,
            include_patterns: Vec::new(),
            exclude_patterns: Vec::new(),
            start_position: StartPosition::Earliest,
        };
        self.persist(StateWrite::Mirror(def.clone())).await?;
        self.update_state(|s| {
            s.mirrors.insert(name.to_string(), def);
        });
        tracing::info!(mirror = name, "mirror created");
        Ok(())
    }

    /// Changes mirror configs (IncrementalAlterConfigs on CLUSTER_MIRROR): `Some` sets,
    /// `None` removes (back to the default). All changes are validated before any applies.
    ///
    /// # Errors
    /// UNKNOWN_CLUSTER_MIRROR, INVALID_CONFIG, or a store failure.
    pub async fn alter_mirror_configs(
        &self,
        name: &str,
        changes: Vec<(String, Option<String>)>,
    ) -> Result<(), MirrorError> {
        self.check_loaded()?;
        let _w = self.write_lock.lock().await;
        let mut def = self.mirror(name)?;
        super::super::bound_credentials::validate_changes(&def.configs, &changes)
            .map_err(|e| MirrorError { code: INVALID_CONFIG, message: e.to_string() })?;
        for (k, v) in &changes {
            match v {
                Some(v) => configs::validate(k, v),
                None if configs::key(k).is_none() => Err(configs::ConfigValueError::Unknown(k.clone())),
                None => Ok(()),
            }
            .map_err(|e| MirrorError { code: INVALID_CONFIG, message: e.to_string() })?;
        }
        for (k, v) in changes {
            match v {
                Some(v) => def.configs.insert(k, v),
                None => def.configs.remove(&k),
            };
        }
        configs::validate_all(&def.configs)
            .map_err(|e| MirrorError { code: INVALID_CONFIG, message: e.to_string() })?;
        self.check_secrets_storable(&def.configs)?;
        self.persist(StateWrite::Mirror(def.clone())).await?;
        self.update_state(|s| {
            s.mirrors.insert(name.to_string(), def);
        });
        // A config change is the operator's fix for a retryable failure (credentials,
        // certificates, addresses): its FAILED partitions get a fresh retry budget, even when
        // `mirror.failed.retry.max.attempts` was used up.
        let failed: Vec<PartitionStateRecord> = self.with_state(|s| {
            s.partitions
                .values()
                .filter(|p| {
                    p.mirror == name && p.state == MirrorPartitionState::Failed && p.retryable && p.retry_attempt > 0
                })
                .cloned()
                .collect()
        });
        for mut rec in failed {
            rec.retry_attempt = 0;
            self.persist(StateWrite::Partition(rec.clone())).await?;
            self.update_state(|s| {
                s.partitions.insert((rec.topic.clone(), rec.partition), rec);
            });
        }
        tracing::info!(mirror = name, "mirror configs changed");
        Ok(())
    }

    /// INVALID_CONFIG when `configs` holds a secret (a sensitive key with a value) and no
    /// `mirror_state.password_encoder_secret` is set to encrypt it in `__mirror_state`.
    fn check_secrets_storable(&self, configs: &BTreeMap<String, String>) -> Result<(), MirrorError> {
        if self.persist.can_store_secrets() {
            return Ok(());
        }
        match configs.iter().find(|(k, v)| configs::is_sensitive(k) && !v.is_empty()) {
            None => Ok(()),
            Some((k, _)) => Err(MirrorError {
                code: INVALID_CONFIG,
                message: format!(
                    "mirror config `{k}` is a secret and mirrorgate has no key to encrypt it in the state topic: set `mirror_state.password_encoder_secret` in proxy.yaml (or MIRRORGATE__MIRROR_STATE__PASSWORD_ENCODER_SECRET) and restart mirrorgate (docs/security.md, \"Secrets at rest\")"
                ),
            }),
        }
    }

    /// The definition of mirror `name`.
    ///
    /// # Errors
    /// UNKNOWN_CLUSTER_MIRROR.
    pub fn mirror(&self, name: &str) -> Result<MirrorDefinition, MirrorError> {
        self.with_state(|s| s.mirrors.get(name).cloned())
            .ok_or_else(|| err(MirrorErrorCode::UnknownClusterMirror, format!("mirror `{name}` does not exist")))
    }

    /// DeleteClusterMirror: only when every topic of the mirror is STOPPED.
    ///
    /// # Errors
    /// UNKNOWN_CLUSTER_MIRROR, CLUSTER_MIRROR_NOT_EMPTY naming the non-stopped topics, or a
    /// store failure.
    pub async fn delete_mirror(&self, name: &str) -> Result<(), MirrorError> {
        self.check_loaded()?;
        let _w = self.write_lock.lock().await;
        self.mirror(name)?;
        let (topics, busy): (Vec<String>, Vec<String>) = self.with_state(|s| {
            let topics: Vec<String> = s.topics.values().filter(|t| t.mirror == name).map(|t| t.topic.clone()).collect();
            let busy = topics.iter().filter(|t| self.read_only_in(s, t)).cloned().collect();
            (topics, busy)
        });
        if !busy.is_empty() {
            return Err(err(
                MirrorErrorCode::ClusterMirrorNotEmpty,
                format!("mirror `{name}` still has topics that are not STOPPED: {}; stop them first", busy.join(", ")),
            ));
        }
        for topic in &topics {
            let parts: Vec<i32> =
                self.with_state(|s| s.partitions.keys().filter(|(t, _)| t == topic).map(|(_, p)| *p).collect());
            for p in parts {
                self.persist(StateWrite::DeletePartition(name.into(), topic.clone(), p)).await?;
            }
            self.persist(StateWrite::DeleteTopic(name.into(), topic.clone())).await?;
        }
        self.persist(StateWrite::DeleteMirror(name.into())).await?;
        self.update_state(|s| {
            s.mirrors.remove(name);
            s.topics.retain(|_, t| t.mirror != name);
            s.partitions.retain(|_, p| p.mirror != name);
            self.read_caps.retain(|(t, p), _| s.partitions.contains_key(&(t.clone(), *p)));
        });
        tracing::info!(mirror = name, "mirror deleted");
        Ok(())
    }

    fn read_only_in(&self, s: &ControlState, topic: &str) -> bool {
        let parts: Vec<_> = s.partitions.range((topic.to_string(), i32::MIN)..=(topic.to_string(), i32::MAX)).collect();
        parts.is_empty() || !parts.iter().all(|(_, p)| p.state == MirrorPartitionState::Stopped)
    }

    /// Mirrors with their topics and partition states, for List/Describe.
    pub fn mirrors_view(&self) -> Vec<MirrorView> {
        self.with_state(|s| {
            s.mirrors
                .values()
                .map(|m| {
                    let topics: Vec<MirrorTopic> = s.topics.values().filter(|t| t.mirror == m.name).cloned().collect();
                    let mut parts: HashMap<String, Vec<PartitionStateRecord>> = HashMap::new();
                    for p in s.partitions.values().filter(|p| p.mirror == m.name) {
                        parts.entry(p.topic.clone()).or_default().push(p.clone());
                    }
                    (m.clone(), topics, parts)
                })
                .collect()
        })
    }
}
