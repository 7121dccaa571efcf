//! [`StateStore`]: mirrorgate's durable state in the compacted topic `__mirror_state` on the
//! destination cluster — mirror definitions, mirror topics and per-partition state records
//! ([`crate::mirror::model`]), one Kafka record per entity, keyed deterministically so that
//! compaction keeps the latest value of each and a tombstone (null value) deletes it.
//!
//! Record format v1 (documented for operators in `docs/state-topic.md`): key and value are
//! JSON objects that start with `"v": 1` and a `"type"` of `mirror`, `topic` or `partition`.
//! Every record of a mirror goes to partition `crc32c(mirror name) % partitions`, so one owner
//! can load a whole mirror from one partition and writes of a mirror stay ordered.
//!
//! This module never drops a record it does not understand: an unknown `v` or `type`, bad
//! JSON, or a record in the wrong partition fails the load with the partition and offset.

use std::collections::BTreeMap;

use crate::client::cluster::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::client::{Acks, ClusterClient, ClusterError, CreateTopicOutcome, KafkaErrorCode};
use crate::config::MirrorStateConfig;
use crate::mirror::control::ControlState;
use crate::mirror::model::{MirrorDefinition, MirrorTopic, PartitionStateRecord};

/// Default name of the state topic.
/// How long loading the state waits for a partition of `__mirror_state` to answer ListOffsets
/// while its leader is still getting ready (retriable errors only).
const PARTITION_READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Whether `e`, or the last error behind [`ClusterError::RetriesExhausted`], is retriable.
fn retriable_through_retries(e: &ClusterError) -> bool {
    match e {
        ClusterError::RetriesExhausted { last, .. } => last.is_retriable(),
        e => e.is_retriable(),
    }
}

pub const DEFAULT_STATE_TOPIC: &str = "__mirror_state";
/// Version of the record format this build writes and reads (the `"v"` field).
pub const RECORD_FORMAT_VERSION: u64 = 1;
/// Setting for the partition count of a new state topic (default 50).
pub const NUM_PARTITIONS_KEY: &str = "mirror.state.topic.num.partitions";
/// Setting for the replication factor of a new state topic (default 3).
pub const REPLICATION_FACTOR_KEY: &str = "mirror.state.topic.replication.factor";

/// Where and how the state topic lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateStoreSettings {
    /// Topic name (default [`DEFAULT_STATE_TOPIC`]; tests use unique names).
    pub topic: String,
    /// Partitions when the topic is created (`mirror.state.topic.num.partitions`, default
    /// 50). An existing topic keeps its own count.
    pub num_partitions: i32,
    /// Replication factor when the topic is created (`mirror.state.topic.replication.factor`,
    /// default 3), lowered to the number of live brokers with a warning.
    pub replication_factor: i16,
    /// `max_bytes` of each Fetch while loading, bytes (default 1 MiB).
    pub fetch_max_bytes: i32,
    /// Encrypts secret mirror configs at rest (`mirror_state.password_encoder_secret`);
    /// `None` = secrets are refused (and stored ones cannot be read).
    pub secrets: Option<std::sync::Arc<super::secrets::SecretCodec>>,
}

impl Default for StateStoreSettings {
    fn default() -> Self {
        Self {
            topic: DEFAULT_STATE_TOPIC.into(),
            num_partitions: 50,
            replication_factor: 3,
            fetch_max_bytes: 1 << 20,
            secrets: None,
        }
    }
}

impl StateStoreSettings {
    /// Defaults overridden by [`NUM_PARTITIONS_KEY`] and [`REPLICATION_FACTOR_KEY`] from
    /// `props` (other keys are ignored).
    ///
    /// # Errors
    /// [`StoreError::InvalidSetting`] for a value that is not a positive integer in range.
    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<Self, StoreError> {
        let mut s = Self::default();
        if let Some(v) = props.get(NUM_PARTITIONS_KEY) {
            s.num_partitions =
                v.trim().parse().ok().filter(|n: &i32| *n > 0).ok_or_else(|| StoreError::InvalidSetting {
                    key: NUM_PARTITIONS_KEY.into(),
                    reason: format!("`{v}` is not an integer >= 1"),
                })?;
        }
        if let Some(v) = props.get(REPLICATION_FACTOR_KEY) {
            s.replication_factor =
                v.trim().parse().ok().filter(|n: &i16| *n > 0).ok_or_else(|| StoreError::InvalidSetting {
                    key: REPLICATION_FACTOR_KEY.into(),
                    reason: format!("`{v}` is not an integer in 1..=32767"),
                })?;
        }
        Ok(s)
    }
}

impl From<&MirrorStateConfig> for StateStoreSettings {
    fn from(c: &MirrorStateConfig) -> Self {
        Self {
            topic: c.topic.clone(),
            num_partitions: c.num_partitions,
            replication_factor: c.replication_factor,
            secrets: crate::mirror::secrets::SecretCodec::from_config(c),
            ..Self::default()
        }
    }
}

/// Why a state store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The destination cluster refused or could not be reached.
    #[error("state topic `{topic}`: {source}")]
    Cluster {
        /// State topic name.
        topic: String,
        /// The client error (names the api, broker and Kafka error).
        #[source]
        source: Box<ClusterError>,
    },
    /// The state topic exists but cannot be used as it is (not compacted, recompressed by
    /// the broker, wrong partition count).
    #[error("state topic `{topic}` is unusable: {reason}")]
    InvalidTopic {
        /// State topic name.
        topic: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// A record that this build cannot apply: unknown `v` or `type`, bad JSON, a null key,
    /// a value that disagrees with its key, or a record in the wrong partition.
    #[error("state topic `{topic}` partition {partition} offset {offset}: {reason}")]
    Corrupt {
        /// State topic name.
        topic: String,
        /// Partition.
        partition: i32,
        /// Offset of the record.
        offset: i64,
        /// What is wrong.
        reason: String,
    },
    /// A bad setting.
    #[error("invalid setting `{key}`: {reason}")]
    InvalidSetting {
        /// The setting name.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A record could not be encoded (a bug).
    #[error("cannot encode a state record: {0}")]
    Encode(String),
}

/// What [`StateStore::open`] found or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateTopic {
    /// Topic name.
    pub name: String,
    /// Its partition count (the existing topic's, if it already existed).
    pub partitions: i32,
    /// Replication factor asked for at creation (after lowering to the broker count);
    /// for an existing topic, its first partition's replica count.
    pub replication_factor: i16,
    /// Whether `open` created the topic.
    pub created: bool,
}

/// Everything loaded from the state topic. Later records win; tombstones remove.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateSnapshot {
    /// Mirror definitions by mirror name.
    pub mirrors: BTreeMap<String, MirrorDefinition>,
    /// Mirror topics by (mirror, topic).
    pub topics: BTreeMap<(String, String), MirrorTopic>,
    /// Partition state records by (mirror, topic, partition).
    pub partitions: BTreeMap<(String, String, i32), PartitionStateRecord>,
}

/// The value of one state record as read back: what a key now holds, or `None` for a
/// tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateValue {
    /// A mirror definition (secret configs still as stored: encrypted).
    Mirror(MirrorDefinition),
    /// A mirror topic.
    Topic(MirrorTopic),
    /// A mirror partition's state.
    Partition(PartitionStateRecord),
}

/// One record of the state topic as read back: its offset, key and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateChange {
    /// Offset in its state-topic partition.
    pub offset: i64,
    /// Which entity.
    pub key: StateKey,
    /// Its new value; `None` deletes it (tombstone).
    pub value: Option<StateValue>,
}

impl StateSnapshot {
    /// Keeps only the entries of `mirror`.
    pub fn retain_mirror(&mut self, mirror: &str) {
        self.mirrors.retain(|k, _| k == mirror);
        self.topics.retain(|(m, _), _| m == mirror);
        self.partitions.retain(|(m, _, _), _| m == mirror);
    }

    /// The control plane's view of this snapshot.
    pub fn into_control_state(self) -> ControlState {
        ControlState::from_records(self.mirrors, self.topics.into_values(), self.partitions.into_values())
    }
}

/// The `__mirror_state` store on the destination cluster.
#[derive(Debug)]
pub struct StateStore {
    client: ClusterClient,
    settings: StateStoreSettings,
    topic: StateTopic,
    /// One write lock per partition: writes of a mirror go out one at a time, in order.
    write_locks: Vec<tokio::sync::Mutex<()>>,
}

impl StateStore {
    /// Opens the store: creates the state topic when missing (`cleanup.policy=compact`,
    /// `settings.num_partitions` partitions, `settings.replication_factor` lowered to the live
    /// broker count with a warning), waits until every partition has a leader, and checks
    /// that an existing topic is compacted and keeps batches as produced.
    ///
    /// # Errors
    /// [`StoreError::Cluster`] when the cluster refuses or is unreachable;
    /// [`StoreError::InvalidTopic`] when the existing topic is not compacted or recompresses.
    pub async fn open(client: ClusterClient, settings: StateStoreSettings) -> Result<Self, StoreError> {
        let name = settings.topic.clone();
        let cluster = |source| StoreError::Cluster { topic: name.clone(), source: Box::new(source) };
        if settings.num_partitions < 1 || settings.replication_factor < 1 {
            return Err(StoreError::InvalidSetting {
                key: format!("{NUM_PARTITIONS_KEY} / {REPLICATION_FACTOR_KEY}"),
                reason: "must be >= 1".into(),
            });
        }
        let brokers = client.describe_cluster_broker_count().await.map_err(cluster)?;
        let requested = settings.replication_factor;
        let available = i16::try_from(brokers).unwrap_or(i16::MAX).max(1);
        let rf = requested.min(available);
        let configs = BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]);
        let outcome = client.create_topic(&name, settings.num_partitions, rf, &configs).await.map_err(cluster)?;
        let created = matches!(outcome, CreateTopicOutcome::Created { .. });
        if created {
            // Said once, when it happens: an existing topic keeps its replication factor.
            if rf < requested {
                tracing::warn!(
                    topic = %name,
                    requested,
                    brokers,
                    "state topic replication factor {requested} ({REPLICATION_FACTOR_KEY}) exceeds the {brokers} live broker(s); \
                     created it with {rf}"
                );
            }
            tracing::info!(topic = %name, partitions = settings.num_partitions, replication_factor = rf, "created the state topic");
        }

        // Wait until Metadata shows every partition with a leader (new topics take a moment).
        let deadline = tokio::time::Instant::now() + client.options().request_timeout;
        let info = loop {
            client.refresh_metadata(Some(&[&name])).await.map_err(cluster)?;
            let md = client.metadata();
            let ready = md.topics.get(&name).filter(|t| {
                !t.partitions.is_empty()
                    && t.partitions.values().all(|p| p.leader_id >= 0 && md.brokers.contains_key(&p.leader_id))
            });
            if let Some(t) = ready {
                break t.clone();
            }
            if tokio::time::Instant::now() > deadline {
                return Err(StoreError::InvalidTopic {
                    topic: name.clone(),
                    reason: format!(
                        "some partitions have no leader after {} ms",
                        client.options().request_timeout.as_millis()
                    ),
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        };
        let partitions = info.partitions.len() as i32;
        if info.partitions.keys().copied().ne(0..partitions) {
            return Err(StoreError::InvalidTopic { topic: name, reason: "partition indexes are not 0..n".into() });
        }
        if partitions != settings.num_partitions {
            if created {
                return Err(StoreError::InvalidTopic {
                    topic: name,
                    reason: format!("created with {} partitions but has {partitions}", settings.num_partitions),
                });
            }
            tracing::warn!(
                topic = %name,
                partitions,
                configured = settings.num_partitions,
                "the existing state topic has {partitions} partitions, not the configured {}; using {partitions} \
                 (never add partitions to it: mirrors are placed by crc32c(name) % partitions)",
                settings.num_partitions
            );
        }
        let replication_factor =
            if created { rf } else { info.partitions.get(&0).map_or(0, |p| p.replicas.len() as i16) };

        let topic_configs = client.describe_topic_configs(&name).await.map_err(cluster)?;
        let policy = topic_configs.get("cleanup.policy").map(String::as_str).unwrap_or("");
        if !policy.split(',').any(|p| p.trim() == "compact") {
            return Err(StoreError::InvalidTopic {
                topic: name,
                reason: format!("cleanup.policy is `{policy}`; it must include `compact`"),
            });
        }
        let compression = topic_configs.get("compression.type").map(String::as_str).unwrap_or("producer");
        if !matches!(compression, "producer" | "uncompressed" | "none") {
            return Err(StoreError::InvalidTopic {
                topic: name,
                reason: format!(
                    "compression.type is `{compression}`; mirrorgate writes and reads this topic uncompressed, \
                     set it to `producer`"
                ),
            });
        }

        let write_locks = (0..partitions).map(|_| tokio::sync::Mutex::new(())).collect();
        Ok(Self { client, settings, topic: StateTopic { name, partitions, replication_factor, created }, write_locks })
    }

    /// Opens an existing state topic for reading only (another mirrorgate's, e.g. on a
    /// mirror's source cluster): never creates or checks it. `None` when the cluster has no
    /// topic of that name.
    ///
    /// # Errors
    /// [`StoreError::Cluster`] when the cluster cannot be asked.
    pub async fn open_existing(client: ClusterClient, topic: &str) -> Result<Option<Self>, StoreError> {
        let cluster = |source| StoreError::Cluster { topic: topic.to_string(), source: Box::new(source) };
        client.refresh_metadata(Some(&[topic])).await.map_err(cluster)?;
        let md = client.metadata();
        let Some(info) = md.topics.get(topic).filter(|t| !t.partitions.is_empty()) else {
            return Ok(None);
        };
        let partitions = info.partitions.len() as i32;
        let replication_factor = info.partitions.get(&0).map_or(0, |p| p.replicas.len() as i16);
        let settings =
            StateStoreSettings { topic: topic.to_string(), num_partitions: partitions, ..Default::default() };
        let write_locks = Vec::new();
        Ok(Some(Self {
            client,
            settings,
            topic: StateTopic { name: topic.to_string(), partitions, replication_factor, created: false },
            write_locks,
        }))
    }

    /// The state topic as opened.
    pub fn topic(&self) -> &StateTopic {
        &self.topic
    }

    /// The settings the store was opened with.
    pub fn settings(&self) -> &StateStoreSettings {
        &self.settings
    }

    /// The state topic partition holding every record of `mirror`.
    pub fn partition_for(&self, mirror: &str) -> i32 {
        partition_for(mirror, self.topic.partitions)
    }

    /// Reads every partition from its log start offset to its high watermark (as of the
    /// start of the load) and returns the latest value of every key.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] naming partition and offset for a record this build cannot
    /// apply; [`StoreError::Cluster`] for Fetch/ListOffsets failures.
    ///
    /// Secret mirror configs are decrypted (see `secrets.rs`); a mirror whose secrets were
    /// read with `password_encoder_old_secret`, or stored in clear by an older build, is
    /// written again under the current secret.
    pub async fn load(&self) -> Result<StateSnapshot, StoreError> {
        Ok(self.load_and_position().await?.0)
    }

    /// [`StateStore::load`], and per state-topic partition (by index) the offset after the
    /// last record read: where following the topic ([`super::follow`]) goes on.
    ///
    /// # Errors
    /// As [`StateStore::load`].
    pub async fn load_and_position(&self) -> Result<(StateSnapshot, Vec<i64>), StoreError> {
        let mut snapshot = StateSnapshot::default();
        let mut next_offsets = Vec::new();
        for p in 0..self.topic.partitions {
            next_offsets.push(self.load_partition_into(p, &mut snapshot).await?);
        }
        let rewrite = self.open_secrets(&mut snapshot);
        for name in rewrite {
            if let Some(def) = snapshot.mirrors.get(&name) {
                self.put_mirror(def).await?;
                tracing::info!(mirror = %name, "secret mirror configs written again under the current password_encoder_secret");
            }
        }
        Ok((snapshot, next_offsets))
    }

    /// Decrypts the secret configs of every mirror in `snapshot`; returns the mirrors to
    /// write again (opened with the old secret, or stored in clear while a secret is set).
    /// A value no secret opens stays as stored, with an error logged naming mirror and key.
    fn open_secrets(&self, snapshot: &mut StateSnapshot) -> Vec<String> {
        let mut rewrite = Vec::new();
        for (name, def) in snapshot.mirrors.iter_mut() {
            if self.open_mirror_secrets(def) {
                rewrite.push(name.clone());
            }
        }
        rewrite
    }

    /// Decrypts the secret configs of one mirror definition read from the state topic in
    /// place; `true` when it should be written again (opened with the old secret, or stored
    /// in clear while a secret is set). A value no secret opens stays as stored, with an
    /// error logged naming mirror and key.
    pub fn open_mirror_secrets(&self, def: &mut MirrorDefinition) -> bool {
        let name = def.name.clone();
        let mut again = false;
        for (k, v) in def.configs.iter_mut() {
            if !super::configs::is_sensitive(k) || v.is_empty() {
                continue;
            }
            let Some(codec) = &self.settings.secrets else {
                if super::secrets::is_encrypted(v) {
                    tracing::error!(mirror = %name, config = %k, "secret mirror config is encrypted and no mirror_state.password_encoder_secret is set: the mirror cannot authenticate until it is");
                }
                continue;
            };
            match codec.decrypt(&format!("{name}/{k}"), v) {
                Ok((plain, opened)) => {
                    again |= opened != super::secrets::Opened::Current;
                    *v = plain;
                }
                Err(e) => {
                    tracing::error!(mirror = %name, config = %k, error = %e, "cannot decrypt a secret mirror config")
                }
            }
        }
        again
    }

    /// The high watermark of every partition of the state topic (by index), now: one
    /// ListOffsets per partition, all in flight at once (an admin request waits for them,
    /// `ControlPlane::follow_barrier`).
    ///
    /// # Errors
    /// [`StoreError::Cluster`] for a ListOffsets failure.
    pub async fn high_watermarks(&self) -> Result<Vec<i64>, StoreError> {
        let mut asks = tokio::task::JoinSet::new();
        for p in 0..self.topic.partitions {
            let (client, topic) = (self.client.clone(), self.topic.name.clone());
            asks.spawn(async move { (p, client.list_offsets(&topic, p, LATEST_TIMESTAMP).await) });
        }
        let mut hws = vec![0; self.topic.partitions.max(0) as usize];
        while let Some(done) = asks.join_next().await {
            let (p, hw) = done.map_err(|e| StoreError::Cluster {
                topic: self.topic.name.clone(),
                source: Box::new(crate::client::cluster::ClusterError::Unexpected {
                    api: kafka_protocol::messages::ApiKey::ListOffsets,
                    broker: String::new(),
                    reason: format!("the ListOffsets task ended: {e}"),
                }),
            })?;
            hws[p as usize] =
                hw.map_err(|e| StoreError::Cluster { topic: self.topic.name.clone(), source: Box::new(e) })?;
        }
        Ok(hws)
    }

    /// Loads one mirror only (its definition, topics and partitions), reading only its
    /// partition.
    ///
    /// # Errors
    /// As [`StateStore::load`].
    pub async fn load_mirror(&self, mirror: &str) -> Result<StateSnapshot, StoreError> {
        let mut snapshot = StateSnapshot::default();
        self.load_partition_into(self.partition_for(mirror), &mut snapshot).await?;
        snapshot.retain_mirror(mirror);
        self.open_secrets(&mut snapshot);
        Ok(snapshot)
    }

    /// ListOffsets of a state-topic partition, waiting up to [`PARTITION_READY_TIMEOUT`] while
    /// the answer is retriable: a partition that Metadata already shows with a leader can still
    /// answer NOT_LEADER_OR_FOLLOWER (6) until that broker has created it locally, which takes
    /// seconds for a new 50-partition topic on a loaded broker (seen in `make test`).
    ///
    /// # Errors
    /// The last [`ClusterError`] once it is not retriable or the wait is over.
    async fn list_offsets_when_ready(&self, partition: i32, timestamp: i64) -> Result<i64, ClusterError> {
        let deadline = tokio::time::Instant::now() + PARTITION_READY_TIMEOUT;
        let mut logged = false;
        loop {
            match self.client.list_offsets(&self.topic.name, partition, timestamp).await {
                Err(e) if retriable_through_retries(&e) && tokio::time::Instant::now() < deadline => {
                    if !logged {
                        tracing::info!(topic = %self.topic.name, partition, error = %e, "waiting for the state topic partition to be ready on its leader");
                        logged = true;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
                other => return other,
            }
        }
    }

    /// Applies partition `partition` from its log start to its high watermark (as of now) to
    /// `snap`; returns the offset after the last record read.
    async fn load_partition_into(&self, partition: i32, snap: &mut StateSnapshot) -> Result<i64, StoreError> {
        let topic = &self.topic.name;
        let cluster = |source| StoreError::Cluster { topic: topic.clone(), source: Box::new(source) };
        let mut offset = self.list_offsets_when_ready(partition, EARLIEST_TIMESTAMP).await.map_err(cluster)?;
        let end = self.list_offsets_when_ready(partition, LATEST_TIMESTAMP).await.map_err(cluster)?;
        while offset < end {
            let fetched = match self.client.fetch(topic, partition, offset, self.settings.fetch_max_bytes).await {
                Ok(f) => f,
                Err(e) if e.kafka_error() == Some(KafkaErrorCode(1)) => {
                    // OFFSET_OUT_OF_RANGE: the log start moved past us (only with
                    // cleanup.policy=compact,delete); continue from the new start.
                    let start =
                        self.client.list_offsets(topic, partition, EARLIEST_TIMESTAMP).await.map_err(cluster)?;
                    if start <= offset {
                        return Err(cluster(e));
                    }
                    offset = start;
                    continue;
                }
                Err(e) => return Err(cluster(e)),
            };
            let corrupt =
                |offset: i64, reason: String| StoreError::Corrupt { topic: topic.clone(), partition, offset, reason };
            match apply_fetched(snap, self.topic.partitions, partition, offset, fetched.records.clone()) {
                Ok(Some(next)) => offset = next,
                Ok(None) => {
                    if !fetched.records.is_empty() {
                        return Err(corrupt(
                            offset,
                            format!(
                                "Fetch returned {} bytes but no complete batch (max_bytes {})",
                                fetched.records.len(),
                                self.settings.fetch_max_bytes
                            ),
                        ));
                    }
                    // Nothing readable between `offset` and the high watermark.
                    tracing::debug!(topic = %topic, partition, offset, end, "empty fetch below the high watermark");
                    break;
                }
                Err((at, reason)) => return Err(corrupt(at, reason)),
            }
        }
        Ok(offset.max(end))
    }

    /// Writes (upserts) a mirror definition; returns the record's offset once acknowledged
    /// by all in-sync replicas.
    ///
    /// # Errors
    /// [`StoreError::Cluster`] when the write is refused or cannot be confirmed.
    pub async fn put_mirror(&self, mirror: &MirrorDefinition) -> Result<i64, StoreError> {
        let key = StateKey::Mirror { name: mirror.name.clone() };
        let mut stored = mirror.clone();
        for (k, v) in stored.configs.iter_mut() {
            if !super::configs::is_sensitive(k) || v.is_empty() {
                continue;
            }
            let Some(codec) = &self.settings.secrets else {
                return Err(StoreError::InvalidSetting {
                    key: "mirror_state.password_encoder_secret".into(),
                    reason: format!("not set, so secret mirror config `{k}` cannot be stored"),
                });
            };
            *v = codec.encrypt(&format!("{}/{k}", mirror.name), v).map_err(StoreError::Encode)?;
        }
        let value = encode_value("mirror", &stored)?;
        self.write(&key, Some(value)).await
    }

    /// Deletes a mirror definition (tombstone). Its topics and partitions are separate
    /// records: delete them too.
    ///
    /// # Errors
    /// As [`StateStore::put_mirror`].
    pub async fn delete_mirror(&self, name: &str) -> Result<i64, StoreError> {
        self.write(&StateKey::Mirror { name: name.into() }, None).await
    }

    /// Writes (upserts) a mirror topic.
    ///
    /// # Errors
    /// As [`StateStore::put_mirror`].
    pub async fn put_topic(&self, topic: &MirrorTopic) -> Result<i64, StoreError> {
        let key = StateKey::Topic { mirror: topic.mirror.clone(), topic: topic.topic.clone() };
        let value = encode_value("topic", topic)?;
        self.write(&key, Some(value)).await
    }

    /// Deletes a mirror topic (tombstone).
    ///
    /// # Errors
    /// As [`StateStore::put_mirror`].
    pub async fn delete_topic(&self, mirror: &str, topic: &str) -> Result<i64, StoreError> {
        self.write(&StateKey::Topic { mirror: mirror.into(), topic: topic.into() }, None).await
    }

    /// Writes (upserts) a partition state record.
    ///
    /// # Errors
    /// As [`StateStore::put_mirror`].
    pub async fn put_partition(&self, record: &PartitionStateRecord) -> Result<i64, StoreError> {
        let key = StateKey::Partition {
            mirror: record.mirror.clone(),
            topic: record.topic.clone(),
            partition: record.partition,
        };
        let value = encode_value("partition", record)?;
        self.write(&key, Some(value)).await
    }

    /// Deletes a partition state record (tombstone).
    ///
    /// # Errors
    /// As [`StateStore::put_mirror`].
    pub async fn delete_partition(&self, mirror: &str, topic: &str, partition: i32) -> Result<i64, StoreError> {
        self.write(&StateKey::Partition { mirror: mirror.into(), topic: topic.into(), partition }, None).await
    }

    /// Produces one record with acks=all to the mirror's partition, one write at a time per
    /// partition. A write whose outcome is ambiguous (timeout, disconnect) is sent again:
    /// state records are idempotent upserts of whole values, so a duplicate is harmless and
    /// compaction removes it.
    async fn write(&self, key: &StateKey, value: Option<Vec<u8>>) -> Result<i64, StoreError> {
        let partition = self.partition_for(key.mirror());
        let batch = encode_batch(key.encode(), value)?;
        let Some(lock) = self.write_locks.get(partition as usize) else {
            return Err(StoreError::InvalidSetting {
                key: self.topic.name.clone(),
                reason: "opened read-only (another mirrorgate's state topic): not written".into(),
            });
        };
        let _ordered = lock.lock().await;
        let opts = self.client.options();
        let mut backoff = opts.retry_backoff;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            match self.client.produce(&self.topic.name, partition, batch.clone(), Acks::All).await {
                Ok(offset) => return Ok(offset),
                Err(e) if e.is_ambiguous() && e.is_retriable() && attempt < opts.max_attempts => {
                    tracing::warn!(topic = %self.topic.name, partition, attempt, error = %e, "state write unconfirmed; sending it again");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(opts.retry_backoff_max);
                }
                Err(source) => {
                    return Err(StoreError::Cluster { topic: self.topic.name.clone(), source: Box::new(source) })
                }
            }
        }
    }
}

mod records;

pub use records::{apply_fetched, decode_fetched, partition_for, Decoded, StateKey};
use records::{encode_batch, encode_value};

#[cfg(test)]
mod tests;
