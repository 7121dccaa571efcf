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

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::client::cluster::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::client::{Acks, ClusterClient, ClusterError, CreateTopicOutcome, KafkaErrorCode};
use crate::config::MirrorStateConfig;
use crate::mirror::control::ControlState;
use crate::mirror::model::{now_ms, MirrorDefinition, MirrorTopic, PartitionStateRecord};

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

/// The key of a state record: which entity it is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StateKey {
    /// A mirror definition.
    Mirror {
        /// Mirror name.
        name: String,
    },
    /// A mirror topic.
    Topic {
        /// Mirror name.
        mirror: String,
        /// Topic name.
        topic: String,
    },
    /// A mirror partition's state.
    Partition {
        /// Mirror name.
        mirror: String,
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
    },
}

/// Serialized field order is the key's byte layout: `v`, `type`, then the identity fields.
#[derive(Serialize)]
struct KeyOut<'a> {
    v: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mirror: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<i32>,
}

/// `v` and `type` of a key or value, read before anything else.
#[derive(Deserialize)]
struct Header {
    v: Option<serde_json::Value>,
    #[serde(rename = "type")]
    kind: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MirrorKeyIn {
    #[allow(dead_code)]
    v: u64,
    #[serde(rename = "type")]
    #[allow(dead_code)]
    kind: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopicKeyIn {
    #[allow(dead_code)]
    v: u64,
    #[serde(rename = "type")]
    #[allow(dead_code)]
    kind: String,
    mirror: String,
    topic: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionKeyIn {
    #[allow(dead_code)]
    v: u64,
    #[serde(rename = "type")]
    #[allow(dead_code)]
    kind: String,
    mirror: String,
    topic: String,
    partition: i32,
}

#[derive(Serialize)]
struct ValueOut<'a, T> {
    v: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    body: &'a T,
}

#[derive(Deserialize)]
struct ValueIn<T> {
    #[serde(rename = "v")]
    _v: serde_json::Value,
    #[serde(rename = "type")]
    _kind: serde_json::Value,
    #[serde(flatten)]
    body: T,
}

impl StateKey {
    /// The `type` discriminator.
    pub fn kind(&self) -> &'static str {
        match self {
            StateKey::Mirror { .. } => "mirror",
            StateKey::Topic { .. } => "topic",
            StateKey::Partition { .. } => "partition",
        }
    }

    /// The mirror this entity belongs to (which decides the partition).
    pub fn mirror(&self) -> &str {
        match self {
            StateKey::Mirror { name } => name,
            StateKey::Topic { mirror, .. } | StateKey::Partition { mirror, .. } => mirror,
        }
    }

    /// The key bytes (compact JSON, fields in a fixed order, so equal keys are equal bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut k = KeyOut {
            v: RECORD_FORMAT_VERSION,
            kind: self.kind(),
            name: None,
            mirror: None,
            topic: None,
            partition: None,
        };
        match self {
            StateKey::Mirror { name } => k.name = Some(name),
            StateKey::Topic { mirror, topic } => {
                k.mirror = Some(mirror);
                k.topic = Some(topic);
            }
            StateKey::Partition { mirror, topic, partition } => {
                k.mirror = Some(mirror);
                k.topic = Some(topic);
                k.partition = Some(*partition);
            }
        }
        serde_json::to_vec(&k).expect("a struct of strings and integers always serializes")
    }

    /// Parses key bytes.
    ///
    /// # Errors
    /// A description for an unknown `v` or `type`, bad JSON or unknown fields.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let kind = check_header(bytes, "key")?;
        let bad = |e: serde_json::Error| format!("bad {kind} key: {e}");
        Ok(match kind.as_str() {
            "mirror" => {
                let k: MirrorKeyIn = serde_json::from_slice(bytes).map_err(bad)?;
                StateKey::Mirror { name: k.name }
            }
            "topic" => {
                let k: TopicKeyIn = serde_json::from_slice(bytes).map_err(bad)?;
                StateKey::Topic { mirror: k.mirror, topic: k.topic }
            }
            "partition" => {
                let k: PartitionKeyIn = serde_json::from_slice(bytes).map_err(bad)?;
                StateKey::Partition { mirror: k.mirror, topic: k.topic, partition: k.partition }
            }
            other => return Err(format!("unknown key type `{other}`")),
        })
    }
}

/// Checks `v` is [`RECORD_FORMAT_VERSION`] and returns `type`.
fn check_header(bytes: &[u8], what: &str) -> Result<String, String> {
    let h: Header = serde_json::from_slice(bytes).map_err(|e| format!("{what} is not a JSON object: {e}"))?;
    match h.v {
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(RECORD_FORMAT_VERSION) => {}
        Some(v) => {
            return Err(format!("unknown {what} format version v={v} (this build reads v={RECORD_FORMAT_VERSION})"))
        }
        None => return Err(format!("{what} has no `v` field")),
    }
    match h.kind {
        Some(serde_json::Value::String(s)) if matches!(s.as_str(), "mirror" | "topic" | "partition") => Ok(s),
        Some(t) => Err(format!("unknown {what} type {t}")),
        None => Err(format!("{what} has no `type` field")),
    }
}

fn encode_value<T: Serialize>(kind: &'static str, body: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(&ValueOut { v: RECORD_FORMAT_VERSION, kind, body })
        .map_err(|e| StoreError::Encode(e.to_string()))
}

fn decode_value<T: DeserializeOwned>(bytes: &[u8], key_kind: &str) -> Result<T, String> {
    let kind = check_header(bytes, "value")?;
    if kind != key_kind {
        return Err(format!("value type `{kind}` under a `{key_kind}` key"));
    }
    let v: ValueIn<T> = serde_json::from_slice(bytes).map_err(|e| format!("bad {kind} value: {e}"))?;
    Ok(v.body)
}

/// The state topic partition of `mirror`: `crc32c(UTF-8 name) % partitions`.
pub fn partition_for(mirror: &str, partitions: i32) -> i32 {
    let n = u32::try_from(partitions.max(1)).unwrap_or(1);
    (crc32c::crc32c(mirror.as_bytes()) % n) as i32
}

/// One uncompressed record batch (magic v2) holding one record, no producer id.
fn encode_batch(key: Vec<u8>, value: Option<Vec<u8>>) -> Result<Bytes, StoreError> {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now_ms(),
        key: Some(Bytes::from(key)),
        value: value.map(Bytes::from),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&record],
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .map_err(|e| StoreError::Encode(e.to_string()))?;
    Ok(buf.freeze())
}

/// A complete record batch cut from Fetch bytes, with its offset range.
struct RawBatch {
    base_offset: i64,
    last_offset: i64,
    bytes: Bytes,
}

/// Cuts `records` into complete batches; a trailing partial batch (Fetch `max_bytes` cut
/// it) is left out. Only the batch header is read here; the length is checked first.
fn split_batches(mut records: Bytes) -> Result<Vec<RawBatch>, String> {
    // baseOffset(8) batchLength(4) partitionLeaderEpoch(4) magic(1) crc(4) attributes(2)
    // lastOffsetDelta(4)
    const LOG_OVERHEAD: usize = 12;
    const LAST_OFFSET_DELTA_AT: usize = 23;
    let mut out = Vec::new();
    while records.len() >= LOG_OVERHEAD {
        let base_offset = (&records[0..8]).get_i64();
        let len = (&records[8..12]).get_i32();
        if len < 0 {
            return Err(format!("negative batch length {len} at offset {base_offset}"));
        }
        let total = LOG_OVERHEAD + len as usize;
        if records.len() < total {
            break;
        }
        if total < LAST_OFFSET_DELTA_AT + 4 {
            return Err(format!("batch at offset {base_offset} is {total} bytes, too short for a header"));
        }
        let last_offset_delta = (&records[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4]).get_i32();
        let bytes = records.split_to(total);
        out.push(RawBatch {
            base_offset,
            last_offset: base_offset.saturating_add(i64::from(last_offset_delta)),
            bytes,
        });
    }
    Ok(out)
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

/// Applies the records of one Fetch answer for state topic `partition` (of `partitions`) to
/// `snap`, from offset `offset` on: complete batches only (a trailing partial batch is left
/// out), control records and records below `offset` skipped. Returns the offset after the
/// last complete batch, or `None` when `records` holds no complete batch. This is the whole
/// decoding [`StateStore::load`] does on what it fetched (also the fuzz target
/// `mirror_state`'s entry point).
///
/// # Errors
/// `(offset, reason)` for the first record or batch that cannot be applied: a bad batch
/// header or length, an undecodable batch (kafka-protocol's `RecordBatchDecoder`: CRC,
/// codec), or a record [`StateKey::decode`] or the value decoding refuses.
pub fn apply_fetched(
    snap: &mut StateSnapshot,
    partitions: i32,
    partition: i32,
    offset: i64,
    records: Bytes,
) -> Result<Option<i64>, (i64, String)> {
    let Some((changes, next)) = decode_fetched(partitions, partition, offset, records)? else {
        return Ok(None);
    };
    for change in changes {
        apply(snap, change);
    }
    Ok(Some(next))
}

/// What [`decode_fetched`] read: the changes in log order, and the offset after the last
/// complete batch.
pub type Decoded = (Vec<StateChange>, i64);

/// Decodes the records of one Fetch answer for state topic `partition` (of `partitions`)
/// from offset `offset` on, as [`apply_fetched`] reads them: complete batches only, control
/// records and records below `offset` skipped. Returns the changes in log order and the
/// offset after the last complete batch, or `None` when `records` holds no complete batch.
///
/// # Errors
/// As [`apply_fetched`].
pub fn decode_fetched(
    partitions: i32,
    partition: i32,
    mut offset: i64,
    records: Bytes,
) -> Result<Option<Decoded>, (i64, String)> {
    let batches = split_batches(records).map_err(|r| (offset, r))?;
    if batches.is_empty() {
        return Ok(None);
    }
    let mut changes = Vec::new();
    for batch in batches {
        if batch.last_offset < offset {
            continue;
        }
        let base_offset = batch.base_offset;
        let mut bytes = batch.bytes;
        let set = RecordBatchDecoder::decode(&mut bytes)
            .map_err(|e| (base_offset, format!("undecodable record batch: {e}")))?;
        for record in &set.records {
            if record.control || record.offset < offset {
                continue;
            }
            changes.push(decode_record(partitions, partition, record).map_err(|r| (record.offset, r))?);
        }
        offset = batch.last_offset + 1;
    }
    Ok(Some((changes, offset)))
}

/// Applies one decoded record to the snapshot (later records win; tombstones remove).
fn apply(snap: &mut StateSnapshot, change: StateChange) {
    match (change.key, change.value) {
        (StateKey::Mirror { name }, Some(StateValue::Mirror(m))) => {
            snap.mirrors.insert(name, m);
        }
        (StateKey::Mirror { name }, _) => {
            snap.mirrors.remove(&name);
        }
        (StateKey::Topic { mirror, topic }, Some(StateValue::Topic(t))) => {
            snap.topics.insert((mirror, topic), t);
        }
        (StateKey::Topic { mirror, topic }, _) => {
            snap.topics.remove(&(mirror, topic));
        }
        (StateKey::Partition { mirror, topic, partition }, Some(StateValue::Partition(p))) => {
            snap.partitions.insert((mirror, topic, partition), p);
        }
        (StateKey::Partition { mirror, topic, partition }, _) => {
            snap.partitions.remove(&(mirror, topic, partition));
        }
    }
}

/// Decodes one record read from state topic `partition` (of `partitions`).
fn decode_record(partitions: i32, partition: i32, record: &Record) -> Result<StateChange, String> {
    let key_bytes = record.key.as_ref().ok_or("record with a null key")?;
    let key = StateKey::decode(key_bytes)?;
    let home = partition_for(key.mirror(), partitions);
    if home != partition {
        return Err(format!(
            "record for mirror `{}` belongs in partition {home}; was the partition count of the state topic changed?",
            key.mirror()
        ));
    }
    let kind = key.kind();
    let value = match (&key, record.value.as_deref()) {
        (_, None) => None,
        (StateKey::Mirror { name }, Some(v)) => {
            let m: MirrorDefinition = decode_value(v, kind)?;
            if &m.name != name {
                return Err(format!("value names mirror `{}` under the key of mirror `{name}`", m.name));
            }
            Some(StateValue::Mirror(m))
        }
        (StateKey::Topic { mirror, topic }, Some(v)) => {
            let t: MirrorTopic = decode_value(v, kind)?;
            if (&t.mirror, &t.topic) != (mirror, topic) {
                return Err(format!("value names {}/{} under the key of {mirror}/{topic}", t.mirror, t.topic));
            }
            Some(StateValue::Topic(t))
        }
        (StateKey::Partition { mirror, topic, partition: index }, Some(v)) => {
            let p: PartitionStateRecord = decode_value(v, kind)?;
            if (&p.mirror, &p.topic, p.partition) != (mirror, topic, *index) {
                return Err(format!(
                    "value names {}/{}/{} under the key of {mirror}/{topic}/{index}",
                    p.mirror, p.topic, p.partition
                ));
            }
            Some(StateValue::Partition(p))
        }
    };
    Ok(StateChange { offset: record.offset, key, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::model::{DesiredState, OffsetSegment};
    use crate::wire::mirror::MirrorPartitionState;

    fn partition_record() -> PartitionStateRecord {
        PartitionStateRecord {
            mirror: "m1".into(),
            topic: "orders".into(),
            partition: 3,
            state: MirrorPartitionState::Mirroring,
            state_epoch: 2,
            last_mirrored_offset: 41,
            error_message: None,
            retry_attempt: 0,
            retryable: false,
            previous_state: None,
            segments: vec![OffsetSegment { source_start: 0, destination_start: 0 }],
            source_epochs: Vec::new(),
            producer_id: Some(7),
            producer_epoch: Some(0),
            destination_topic_id: None,
            copy_start: None,
            placeholder_end: None,
            transactions_used: false,
            owner_generation: None,
            aligned_generation: None,
            updated_ms: 1,
        }
    }

    #[test]
    fn keys_are_deterministic_bytes_and_round_trip() {
        let k = StateKey::Partition { mirror: "m1".into(), topic: "orders".into(), partition: 3 };
        assert_eq!(
            String::from_utf8(k.encode()).unwrap(),
            r#"{"v":1,"type":"partition","mirror":"m1","topic":"orders","partition":3}"#
        );
        assert_eq!(
            String::from_utf8(StateKey::Mirror { name: "m1".into() }.encode()).unwrap(),
            r#"{"v":1,"type":"mirror","name":"m1"}"#
        );
        for k in [
            StateKey::Mirror { name: "m".into() },
            StateKey::Topic { mirror: "m".into(), topic: "t".into() },
            k.clone(),
        ] {
            assert_eq!(StateKey::decode(&k.encode()).unwrap(), k);
        }
    }

    #[test]
    fn unknown_version_or_type_is_refused() {
        let e = StateKey::decode(br#"{"v":2,"type":"mirror","name":"m"}"#).unwrap_err();
        assert!(e.contains("v=2"), "{e}");
        let e = StateKey::decode(br#"{"v":1,"type":"group","name":"m"}"#).unwrap_err();
        assert!(e.contains("group"), "{e}");
        let e = StateKey::decode(br#"{"type":"mirror","name":"m"}"#).unwrap_err();
        assert!(e.contains("no `v`"), "{e}");
        let e = decode_value::<MirrorTopic>(br#"{"v":1,"type":"mirror"}"#, "topic").unwrap_err();
        assert!(e.contains("under a `topic` key"), "{e}");
    }

    #[test]
    fn values_round_trip_and_model_fields_do_not_collide_with_the_envelope() {
        let p = partition_record();
        let bytes = encode_value("partition", &p).unwrap();
        assert!(bytes.starts_with(br#"{"v":1,"type":"partition","mirror":"m1""#));
        assert_eq!(decode_value::<PartitionStateRecord>(&bytes, "partition").unwrap(), p);
        let t = MirrorTopic {
            mirror: "m1".into(),
            topic: "orders".into(),
            source_topic_id: None,
            desired: DesiredState::Paused,
            partitions: Some(4),
            source_log_append_time: false,
            start_position: crate::mirror::model::StartPosition::Latest,
            migration: None,
            updated_ms: 5,
        };
        let m = MirrorDefinition {
            name: "m1".into(),
            configs: BTreeMap::from([("bootstrap.servers".into(), "src:9092".into())]),
            created_ms: 1,
            source_cluster_id: None,
            include_patterns: vec![],
            exclude_patterns: vec![],
            start_position: crate::mirror::model::StartPosition::Timestamp(7),
        };
        for body in
            [serde_json::to_value(&p).unwrap(), serde_json::to_value(&t).unwrap(), serde_json::to_value(&m).unwrap()]
        {
            let obj = body.as_object().unwrap();
            assert!(!obj.contains_key("v") && !obj.contains_key("type"), "{body}");
        }
    }

    #[test]
    fn placement_is_crc32c_mod_partitions() {
        assert_eq!(partition_for("m1", 50), (crc32c::crc32c(b"m1") % 50) as i32);
        assert_eq!(partition_for("anything", 1), 0);
    }

    #[test]
    fn batches_are_split_and_a_partial_tail_is_left_out() {
        let a = encode_batch(b"k1".to_vec(), Some(b"v".to_vec())).unwrap();
        let b = encode_batch(b"k2".to_vec(), None).unwrap();
        let mut all = BytesMut::new();
        all.extend_from_slice(&a);
        all.extend_from_slice(&b);
        all.extend_from_slice(&a[..20]);
        let batches = split_batches(all.freeze()).unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!((batches[0].base_offset, batches[0].last_offset), (0, 0));
        let mut bytes = batches[1].bytes.clone();
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        assert_eq!(set.records[0].key.as_deref(), Some(&b"k2"[..]));
        assert_eq!(set.records[0].value, None);
    }
}
