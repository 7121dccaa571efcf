//! The record format of `__mirror_state`, v1 (docs/state-topic.md): [`StateKey`]s and the
//! JSON values under them, one-record batches for writing, and the decoding of what a Fetch
//! read back ([`apply_fetched`], [`decode_fetched`]).

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{StateChange, StateSnapshot, StateValue, StoreError, RECORD_FORMAT_VERSION};
use crate::mirror::model::{now_ms, MirrorDefinition, MirrorTopic, PartitionStateRecord};

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

pub(super) fn encode_value<T: Serialize>(kind: &'static str, body: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(&ValueOut { v: RECORD_FORMAT_VERSION, kind, body })
        .map_err(|e| StoreError::Encode(e.to_string()))
}

pub(super) fn decode_value<T: DeserializeOwned>(bytes: &[u8], key_kind: &str) -> Result<T, String> {
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
pub(super) fn encode_batch(key: Vec<u8>, value: Option<Vec<u8>>) -> Result<Bytes, StoreError> {
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
pub(super) struct RawBatch {
    pub(super) base_offset: i64,
    pub(super) last_offset: i64,
    pub(super) bytes: Bytes,
}

/// Cuts `records` into complete batches; a trailing partial batch (Fetch `max_bytes` cut
/// it) is left out. Only the batch header is read here; the length is checked first.
pub(super) fn split_batches(mut records: Bytes) -> Result<Vec<RawBatch>, String> {
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

/// Applies the records of one Fetch answer for state topic `partition` (of `partitions`) to
/// `snap`, from offset `offset` on: complete batches only (a trailing partial batch is left
/// out), control records and records below `offset` skipped. Returns the offset after the
/// last complete batch, or `None` when `records` holds no complete batch. This is the whole
/// decoding [`super::StateStore::load`] does on what it fetched (also the fuzz target
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
