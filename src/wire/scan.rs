//! Validating walks over the client requests that can write to a topic: Produce, DeleteRecords,
//! CreatePartitions, DeleteTopics, AlterConfigs, IncrementalAlterConfigs and AddPartitionsToTxn
//! (plus DescribeConfigs, for the read-only view). Each walk takes a [`ParsedRequest`] (its header
//! read once, by the connection) and reads the body field by field, checks every length and
//! count against the bytes that remain, requires the walk to end exactly at the end of the frame,
//! and returns only what the read-only rule needs: topic names or ids, partitions, and for
//! Produce the byte range of every partition entry so that [`produce_without`] can cut entries
//! out by copying slices. It never decodes or copies a record payload, never allocates from a
//! count it has not checked, never panics, and never touches a socket or a clock.
//!
//! **Check, then decode.** kafka-protocol 0.18 reserves `Vec` capacity straight from array
//! counts read off the wire, so decoding an unchecked client request with it lets a hostile count
//! abort the process. Once a frame has passed the walk for its api key and version here, every
//! count, length and string in it is proven to describe bytes that are really there, and it is
//! safe to decode the same frame with kafka-protocol's `RequestHeader` and request `Decodable`
//! at that version (the tests check this on mutated frames). That does **not** extend to the
//! record batches inside Produce's `records` bytes: those are opaque here and must never be
//! decoded with kafka-protocol's record decoder.
//!
//! Memory: no walk pre-reserves more than [`PREALLOC_MAX`] elements per array; beyond that the
//! result grows only as elements are actually read, so its size is bounded by the frame's.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::frame::FrameError;
use super::header::HeaderError;
use super::mirror::codec;
use super::mirror::{KafkaUuid, WireError, MAX_STRING_BYTES};
use super::request::ParsedRequest;

/// Most elements a walk reserves room for from one wire count before it has read them.
pub const PREALLOC_MAX: usize = 256;

/// `ConfigResource.Type.TOPIC` in DescribeConfigs / AlterConfigs / IncrementalAlterConfigs.
pub const CONFIG_RESOURCE_TOPIC: i8 = 2;

/// One request type a walk understands: api key, versions, first flexible version.
#[derive(Debug, Clone, Copy)]
struct Api {
    key: i16,
    name: &'static str,
    min: i16,
    max: i16,
    first_flexible: i16,
}

// Version ranges are those of Apache Kafka 4.x's message specs, which are also the ranges
// kafka-protocol 0.18 decodes, so a request that passes a walk can always be decoded with it.
const PRODUCE: Api = Api { key: 0, name: "ProduceRequest", min: 3, max: 13, first_flexible: 9 };
const DELETE_TOPICS: Api = Api { key: 20, name: "DeleteTopicsRequest", min: 1, max: 6, first_flexible: 4 };
const DELETE_RECORDS: Api = Api { key: 21, name: "DeleteRecordsRequest", min: 0, max: 2, first_flexible: 2 };
const ADD_PARTITIONS_TO_TXN: Api =
    Api { key: 24, name: "AddPartitionsToTxnRequest", min: 0, max: 5, first_flexible: 3 };
const DESCRIBE_CONFIGS: Api = Api { key: 32, name: "DescribeConfigsRequest", min: 1, max: 4, first_flexible: 4 };
const ALTER_CONFIGS: Api = Api { key: 33, name: "AlterConfigsRequest", min: 0, max: 2, first_flexible: 2 };
const CREATE_PARTITIONS: Api = Api { key: 37, name: "CreatePartitionsRequest", min: 0, max: 3, first_flexible: 2 };
const INCREMENTAL_ALTER_CONFIGS: Api =
    Api { key: 44, name: "IncrementalAlterConfigsRequest", min: 0, max: 1, first_flexible: 1 };

const APIS: [Api; 8] = [
    PRODUCE,
    DELETE_TOPICS,
    DELETE_RECORDS,
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    CREATE_PARTITIONS,
    INCREMENTAL_ALTER_CONFIGS,
];

/// The request versions this module can walk for `api_key`, or `None` if it has no walk for
/// that api key. A request of a scanned api key outside this range fails with
/// [`ScanError::UnsupportedVersion`]; the proxy must not forward such a request unchecked.
pub fn supported_versions(api_key: i16) -> Option<VersionRange> {
    APIS.iter().find(|a| a.key == api_key).map(|a| VersionRange { min: a.min, max: a.max })
}

/// Why a request frame did not pass its walk. Every variant means the frame is not a valid
/// request of the expected api key and version; none of them is retryable.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// The api version is outside [`supported_versions`] for the request type.
    #[error("{api} version {version} is not supported")]
    UnsupportedVersion {
        /// Request name, e.g. `ProduceRequest`.
        api: &'static str,
        /// The version asked for.
        version: i16,
    },
    /// The frame's `request_api_key` / `request_api_version` are not those the walk was asked for.
    #[error("frame carries api key {found_key} v{found_version}, expected {expected_key} v{expected_version}")]
    HeaderMismatch {
        /// Api key the caller expected.
        expected_key: i16,
        /// Api version the caller expected.
        expected_version: i16,
        /// `request_api_key` in the frame.
        found_key: i16,
        /// `request_api_version` in the frame.
        found_version: i16,
    },
    /// The frame is shorter than the 8-byte request prefix.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The request header (client id, tagged fields) is malformed or truncated.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// A body field is truncated or malformed (also: trailing bytes after the body, a count
    /// larger than the remaining bytes could hold, invalid UTF-8, a null where none is allowed).
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A non-flexible string, bytes or array length below -1.
    #[error("{what}: negative length {len}")]
    NegativeLength {
        /// Field being read.
        what: &'static str,
        /// The length read.
        len: i32,
    },
    /// [`produce_without`] was given a [`ProduceScan`] made from another frame or version.
    #[error("the Produce scan does not belong to this frame")]
    ScanMismatch,
}

/// The length of a string read off `rest` (compact when `flexible`: `n + 1`, 0 for null; else
/// `INT16`, -1 for null), refused above [`MAX_STRING_BYTES`]; `None` for null. Shared by the
/// request walks here and the response walks ([`super::response_cursor`]).
pub(super) fn string_len(rest: &mut &[u8], flexible: bool, what: &'static str) -> Result<Option<usize>, ScanError> {
    let len = if flexible {
        match codec::get_uvarint(rest, what)? {
            0 => return Ok(None),
            n => (n - 1) as usize,
        }
    } else {
        match codec::get_i16(rest, what)? {
            -1 => return Ok(None),
            n if n < -1 => return Err(ScanError::NegativeLength { what, len: n.into() }),
            n => n as usize,
        }
    };
    if len > MAX_STRING_BYTES {
        return Err(WireError::StringTooLong { what, len }.into());
    }
    Ok(Some(len))
}

/// A cursor over one request frame; `rest` is always a suffix of `frame`.
struct Walk<'a> {
    frame: &'a [u8],
    rest: &'a [u8],
    api: Api,
    flexible: bool,
}

impl<'a> Walk<'a> {
    /// Checks the version and the parsed request's api key and version, and starts after the
    /// request header (read once, by [`ParsedRequest::parse`]).
    fn start(request: &'a ParsedRequest, api: Api, version: i16) -> Result<Self, ScanError> {
        if version < api.min || version > api.max {
            return Err(ScanError::UnsupportedVersion { api: api.name, version });
        }
        let header = request.header();
        if header.api_key != api.key || header.api_version != version {
            return Err(ScanError::HeaderMismatch {
                expected_key: api.key,
                expected_version: version,
                found_key: header.api_key,
                found_version: header.api_version,
            });
        }
        let body = header.header_len()?;
        // The header's length bounds `client_id` but not its UTF-8; kafka-protocol's
        // `RequestHeader` decoder refuses invalid UTF-8, so the walk does too.
        if request.client_id_not_utf8() {
            return Err(WireError::InvalidUtf8 { what: "client_id" }.into());
        }
        let frame: &'a [u8] = request.frame();
        let rest = frame.get(body..).ok_or(HeaderError::Truncated)?;
        Ok(Self { frame, rest, api, flexible: version >= api.first_flexible })
    }

    /// Offset of the next unread byte within the frame.
    fn pos(&self) -> usize {
        self.frame.len() - self.rest.len()
    }

    /// Smallest encoding of a string length, an array count and a tagged-field section.
    fn min_str(&self) -> usize {
        if self.flexible {
            1
        } else {
            2
        }
    }
    fn min_array(&self) -> usize {
        if self.flexible {
            1
        } else {
            4
        }
    }
    fn min_tags(&self) -> usize {
        usize::from(self.flexible)
    }

    fn skip(&mut self, n: usize, what: &'static str) -> Result<Range<usize>, ScanError> {
        let start = self.pos();
        match self.rest.get(n..) {
            Some(rest) => {
                self.rest = rest;
                Ok(start..start + n)
            }
            None => Err(WireError::Truncated { what, needed: n, remaining: self.rest.len() }.into()),
        }
    }

    fn i8(&mut self, what: &'static str) -> Result<i8, ScanError> {
        let r = self.skip(1, what)?;
        Ok(self.frame.get(r.start).map_or(0, |b| *b as i8))
    }
    fn i16(&mut self, what: &'static str) -> Result<i16, ScanError> {
        Ok(codec::get_i16(&mut self.rest, what)?)
    }
    fn i32(&mut self, what: &'static str) -> Result<i32, ScanError> {
        Ok(codec::get_i32(&mut self.rest, what)?)
    }
    fn i64(&mut self, what: &'static str) -> Result<i64, ScanError> {
        Ok(codec::get_i64(&mut self.rest, what)?)
    }
    fn bool(&mut self, what: &'static str) -> Result<bool, ScanError> {
        Ok(codec::get_bool(&mut self.rest, what)?)
    }
    fn uuid(&mut self, what: &'static str) -> Result<KafkaUuid, ScanError> {
        Ok(codec::get_uuid(&mut self.rest, what)?)
    }

    /// A string (compact from the first flexible version, `INT16`-prefixed before), checked
    /// for length and UTF-8 without copying; `None` for null.
    fn str_slice(&mut self, what: &'static str) -> Result<Option<&'a str>, ScanError> {
        let Some(len) = string_len(&mut self.rest, self.flexible, what)? else { return Ok(None) };
        let r = self.skip(len, what)?;
        let raw = self.frame.get(r).unwrap_or_default();
        std::str::from_utf8(raw).map(Some).map_err(|_| WireError::InvalidUtf8 { what }.into())
    }

    /// A non-nullable string, validated and skipped.
    fn skip_str(&mut self, what: &'static str) -> Result<(), ScanError> {
        self.str_slice(what)?.ok_or(WireError::UnexpectedNull { what })?;
        Ok(())
    }

    /// A nullable string, validated and skipped.
    fn skip_nullable_str(&mut self, what: &'static str) -> Result<(), ScanError> {
        self.str_slice(what).map(|_| ())
    }

    /// A nullable string, copied out.
    fn nullable_string(&mut self, what: &'static str) -> Result<Option<StrBytes>, ScanError> {
        if self.flexible {
            // The colleague's compact reader: same checks as `str_slice`, returns an owned copy.
            return Ok(codec::get_compact_nullable_string(&mut self.rest, what)?);
        }
        Ok(self.str_slice(what)?.map(|s| StrBytes::from_string(s.to_owned())))
    }

    /// A non-nullable string, copied out.
    fn string(&mut self, what: &'static str) -> Result<StrBytes, ScanError> {
        Ok(self.nullable_string(what)?.ok_or(WireError::UnexpectedNull { what })?)
    }

    fn topic_name(&mut self, what: &'static str) -> Result<TopicName, ScanError> {
        self.string(what).map(TopicName)
    }

    /// A nullable array's element count (compact from the first flexible version, `INT32`
    /// before), refused unless `count × min_elem` bytes remain.
    fn nullable_array_len(&mut self, min_elem: usize, what: &'static str) -> Result<Option<usize>, ScanError> {
        if self.flexible {
            return Ok(codec::get_compact_nullable_array_len(&mut self.rest, min_elem, what)?);
        }
        let count = match codec::get_i32(&mut self.rest, what)? {
            -1 => return Ok(None),
            n if n < -1 => return Err(ScanError::NegativeLength { what, len: n }),
            n => n as usize,
        };
        let remaining = self.rest.len();
        if count.saturating_mul(min_elem.max(1)) > remaining {
            return Err(WireError::CountExceedsRemaining { what, count, remaining }.into());
        }
        Ok(Some(count))
    }

    /// A non-nullable array's element count; see [`Walk::nullable_array_len`].
    fn array_len(&mut self, min_elem: usize, what: &'static str) -> Result<usize, ScanError> {
        Ok(self.nullable_array_len(min_elem, what)?.ok_or(WireError::UnexpectedNull { what })?)
    }

    /// Nullable `bytes`: skipped, returning the byte range of the payload (`None` for null).
    fn nullable_bytes(&mut self, what: &'static str) -> Result<Option<Range<usize>>, ScanError> {
        let len = if self.flexible {
            match codec::get_uvarint(&mut self.rest, what)? {
                0 => return Ok(None),
                n => (n - 1) as usize,
            }
        } else {
            match codec::get_i32(&mut self.rest, what)? {
                -1 => return Ok(None),
                n if n < -1 => return Err(ScanError::NegativeLength { what, len: n }),
                n => n as usize,
            }
        };
        self.skip(len, what).map(Some)
    }

    /// A tagged-field section (flexible versions only), skipped without copying: none of the
    /// requests walked here has a known tagged field, so every field is opaque.
    fn tagged_fields(&mut self, what: &'static str) -> Result<(), ScanError> {
        if !self.flexible {
            return Ok(());
        }
        let count = codec::get_uvarint(&mut self.rest, what)? as usize;
        let remaining = self.rest.len();
        // Each field takes at least two bytes: its tag and its size.
        if count.saturating_mul(2) > remaining {
            return Err(WireError::CountExceedsRemaining { what, count, remaining }.into());
        }
        for _ in 0..count {
            let tag = codec::get_uvarint(&mut self.rest, what)?;
            if i32::try_from(tag).is_err() {
                return Err(WireError::InvalidTag { what, tag }.into());
            }
            let size = codec::get_uvarint(&mut self.rest, what)? as usize;
            self.skip(size, what)?;
        }
        Ok(())
    }

    /// Reads the request's own tagged fields and requires the frame to end there.
    fn finish(mut self) -> Result<(), ScanError> {
        self.tagged_fields(self.api.name)?;
        if !self.rest.is_empty() {
            return Err(WireError::TrailingBytes { what: self.api.name, remaining: self.rest.len() }.into());
        }
        Ok(())
    }
}

/// A `Vec` for `count` elements read off the wire, reserving at most [`PREALLOC_MAX`] up front.
fn vec_for<T>(count: usize) -> Vec<T> {
    Vec::with_capacity(count.min(PREALLOC_MAX))
}

// ---------------------------------------------------------------------------------------------
// Produce
// ---------------------------------------------------------------------------------------------

/// How a Produce request names a topic: by `name` up to v12, by `topic_id` from v13 (KIP-516).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TopicRef {
    /// `name` (Produce v3–v12).
    Name(TopicName),
    /// `topic_id` (Produce v13+); the proxy maps it to a name from Metadata.
    Id(KafkaUuid),
}

/// The result of walking a Produce request: what the read-only rule needs, plus the byte
/// layout [`produce_without`] uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceScan {
    /// The request's api version.
    pub api_version: i16,
    /// `acks`: 0 (no response is sent), 1 (leader) or -1 (all in-sync replicas).
    pub acks: i16,
    /// `topic_data`, in request order (a topic may appear more than once).
    pub topics: Vec<ProduceTopicScan>,
    /// Byte range of the `topic_data` count within the frame.
    topics_count: Range<usize>,
    /// Length of the scanned frame, in bytes.
    frame_len: usize,
}

impl ProduceScan {
    /// Number of partition entries in the request, over all topics.
    pub fn partition_count(&self) -> usize {
        self.topics.iter().map(|t| t.partitions.len()).sum()
    }
}

/// One `topic_data` entry of a Produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceTopicScan {
    /// The topic's `name` (v3–v12) or `topic_id` (v13).
    pub topic: TopicRef,
    /// Byte range of the whole entry (name or id, partitions, tagged fields) within the frame.
    pub range: Range<usize>,
    /// `partition_data`, in request order.
    pub partitions: Vec<ProducePartitionScan>,
    /// Byte range of the `partition_data` count within the frame.
    partitions_count: Range<usize>,
}

/// One `partition_data` entry of a Produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducePartitionScan {
    /// `index`: the partition.
    pub index: i32,
    /// Byte range of the whole entry (index, records with their length, tagged fields) within
    /// the frame.
    pub range: Range<usize>,
    /// Byte range of the `records` payload (the record batches, not parsed) within the frame;
    /// `None` for null records.
    pub records: Option<Range<usize>>,
}

/// Walks a Produce request frame (request header and body, no length prefix) of
/// `api_version` 3–13 and returns its acks, topics, partitions and their byte ranges. Record
/// payloads are skipped, never parsed or copied.
///
/// # Errors
/// [`ScanError::UnsupportedVersion`] outside v3–v13, [`ScanError::HeaderMismatch`] if the frame
/// is not a Produce request of `api_version`; any other [`ScanError`] for a truncated or
/// malformed frame, including bytes after the end of the request.
pub fn produce_topics(request: &ParsedRequest, api_version: i16) -> Result<ProduceScan, ScanError> {
    let mut w = Walk::start(request, PRODUCE, api_version)?;
    w.skip_nullable_str("transactional_id")?;
    let acks = w.i16("acks")?;
    w.i32("timeout_ms")?;
    let by_id = api_version >= 13;
    let topic_min = if by_id { 16 } else { w.min_str() } + w.min_array() + w.min_tags();
    let partition_min = 4 + w.min_array() + w.min_tags(); // index, records length, tags
    let count_start = w.pos();
    let n = w.array_len(topic_min, "topic_data")?;
    let topics_count = count_start..w.pos();
    let mut topics = vec_for(n);
    for _ in 0..n {
        let start = w.pos();
        let topic = if by_id {
            TopicRef::Id(w.uuid("topic_data.topic_id")?)
        } else {
            TopicRef::Name(w.topic_name("topic_data.name")?)
        };
        let count_start = w.pos();
        let pn = w.array_len(partition_min, "topic_data.partition_data")?;
        let partitions_count = count_start..w.pos();
        let mut partitions = vec_for(pn);
        for _ in 0..pn {
            let start = w.pos();
            let index = w.i32("partition_data.index")?;
            let records = w.nullable_bytes("partition_data.records")?;
            w.tagged_fields("partition_data")?;
            partitions.push(ProducePartitionScan { index, range: start..w.pos(), records });
        }
        w.tagged_fields("topic_data")?;
        topics.push(ProduceTopicScan { topic, range: start..w.pos(), partitions, partitions_count });
    }
    w.finish()?;
    Ok(ProduceScan { api_version, acks, topics, topics_count, frame_len: request.frame().len() })
}

/// Rebuilds the Produce request `frame` without the partition entries for which
/// `drop(topic, partition)` is true, and without the topics that this leaves with no partition
/// (a topic that had none to begin with is kept). The header, `transactional_id`, `acks`,
/// `timeout_ms`, every kept entry and every tagged-field section are copied byte for byte; only
/// the two array counts are re-encoded. If nothing is dropped, returns `frame` itself (no copy).
/// The result may have no topics left; the caller decides whether to send it.
///
/// # Errors
/// [`ScanError::ScanMismatch`] if `scan` was not made from a frame of this length and version.
pub fn produce_without(
    frame: &Bytes,
    api_version: i16,
    scan: &ProduceScan,
    mut drop: impl FnMut(&TopicRef, i32) -> bool,
) -> Result<Bytes, ScanError> {
    if frame.len() != scan.frame_len || api_version != scan.api_version {
        return Err(ScanError::ScanMismatch);
    }
    let keep: Vec<Vec<bool>> =
        scan.topics.iter().map(|t| t.partitions.iter().map(|p| !drop(&t.topic, p.index)).collect()).collect();
    if keep.iter().flatten().all(|k| *k) {
        return Ok(frame.clone());
    }
    let flexible = api_version >= PRODUCE.first_flexible;
    let topic_kept = |t: &ProduceTopicScan, k: &[bool]| t.partitions.is_empty() || k.iter().any(|k| *k);

    let mut out = BytesMut::with_capacity(frame.len());
    out.put_slice(slice(frame, 0..scan.topics_count.start)?);
    let kept_topics = scan.topics.iter().zip(&keep).filter(|(t, k)| topic_kept(t, k)).count();
    put_array_len(&mut out, kept_topics, flexible)?;
    for (t, k) in scan.topics.iter().zip(&keep) {
        if !topic_kept(t, k) {
            continue;
        }
        out.put_slice(slice(frame, t.range.start..t.partitions_count.start)?);
        put_array_len(&mut out, k.iter().filter(|k| **k).count(), flexible)?;
        for (p, _) in t.partitions.iter().zip(k).filter(|(_, k)| **k) {
            out.put_slice(slice(frame, p.range.clone())?);
        }
        let tail = t.partitions.last().map_or(t.partitions_count.end, |p| p.range.end);
        out.put_slice(slice(frame, tail..t.range.end)?);
    }
    let tail = scan.topics.last().map_or(scan.topics_count.end, |t| t.range.end);
    out.put_slice(slice(frame, tail..frame.len())?);
    Ok(out.freeze())
}

fn slice(frame: &[u8], r: Range<usize>) -> Result<&[u8], ScanError> {
    frame.get(r).ok_or(ScanError::ScanMismatch)
}

/// Writes an array count: compact (`count + 1` as uvarint) when flexible, `INT32` otherwise.
fn put_array_len(out: &mut BytesMut, count: usize, flexible: bool) -> Result<(), ScanError> {
    if flexible {
        codec::put_compact_array_len(out, Some(count), "array")?;
    } else {
        let count = i32::try_from(count).map_err(|_| WireError::CountTooLarge { what: "array", count })?;
        out.put_i32(count);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Topic-level admin requests
// ---------------------------------------------------------------------------------------------

/// A topic named in a request, with the partitions the request names for it (in request order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitions {
    /// The topic's name.
    pub name: TopicName,
    /// Partition indexes.
    pub partitions: Vec<i32>,
}

/// Walks a DeleteRecords request frame (api key 21, v0–v2) and returns its topics and the
/// partitions whose log start offset it would move.
///
/// # Errors
/// As [`produce_topics`], for DeleteRecords.
pub fn delete_records_topics(request: &ParsedRequest, api_version: i16) -> Result<Vec<TopicPartitions>, ScanError> {
    let mut w = Walk::start(request, DELETE_RECORDS, api_version)?;
    let topic_min = w.min_str() + w.min_array() + w.min_tags();
    let partition_min = 4 + 8 + w.min_tags();
    let n = w.array_len(topic_min, "topics")?;
    let mut topics = vec_for(n);
    for _ in 0..n {
        let name = w.topic_name("topics.name")?;
        let pn = w.array_len(partition_min, "topics.partitions")?;
        let mut partitions = vec_for(pn);
        for _ in 0..pn {
            partitions.push(w.i32("partitions.partition_index")?);
            w.i64("partitions.offset")?;
            w.tagged_fields("partitions")?;
        }
        w.tagged_fields("topics")?;
        topics.push(TopicPartitions { name, partitions });
    }
    w.i32("timeout_ms")?;
    w.finish()?;
    Ok(topics)
}

/// Walks a CreatePartitions request frame (api key 37, v0–v3) and returns the names of the
/// topics it would add partitions to.
///
/// # Errors
/// As [`produce_topics`], for CreatePartitions.
pub fn create_partitions_topics(request: &ParsedRequest, api_version: i16) -> Result<Vec<TopicName>, ScanError> {
    let mut w = Walk::start(request, CREATE_PARTITIONS, api_version)?;
    let topic_min = w.min_str() + 4 + w.min_array() + w.min_tags();
    let assignment_min = w.min_array() + w.min_tags();
    let n = w.array_len(topic_min, "topics")?;
    let mut topics = vec_for(n);
    for _ in 0..n {
        topics.push(w.topic_name("topics.name")?);
        w.i32("topics.count")?;
        let an = w.nullable_array_len(assignment_min, "topics.assignments")?.unwrap_or(0);
        for _ in 0..an {
            let bn = w.array_len(4, "assignments.broker_ids")?;
            for _ in 0..bn {
                w.i32("assignments.broker_ids")?;
            }
            w.tagged_fields("assignments")?;
        }
        w.tagged_fields("topics")?;
    }
    w.i32("timeout_ms")?;
    w.bool("validate_only")?;
    w.finish()?;
    Ok(topics)
}

/// A topic a DeleteTopics request would delete: by name (v1–v5), or by name and/or id (v6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteTopicsEntry {
    /// `name` (`topic_names` before v6); may be null in v6.
    pub name: Option<TopicName>,
    /// `topic_id` (v6); `None` before v6 and for the all-zero "no id".
    pub topic_id: Option<KafkaUuid>,
}

/// Walks a DeleteTopics request frame (api key 20, v1–v6) and returns the topics it would delete.
///
/// # Errors
/// As [`produce_topics`], for DeleteTopics.
pub fn delete_topics_topics(request: &ParsedRequest, api_version: i16) -> Result<Vec<DeleteTopicsEntry>, ScanError> {
    let mut w = Walk::start(request, DELETE_TOPICS, api_version)?;
    let mut topics;
    if api_version >= 6 {
        let n = w.array_len(1 + 16 + 1, "topics")?;
        topics = vec_for(n);
        for _ in 0..n {
            let name = w.nullable_string("topics.name")?.map(TopicName);
            let id = w.uuid("topics.topic_id")?;
            w.tagged_fields("topics")?;
            topics.push(DeleteTopicsEntry { name, topic_id: (id != KafkaUuid::ZERO).then_some(id) });
        }
    } else {
        let n = w.array_len(w.min_str(), "topic_names")?;
        topics = vec_for(n);
        for _ in 0..n {
            topics.push(DeleteTopicsEntry { name: Some(w.topic_name("topic_names")?), topic_id: None });
        }
    }
    w.i32("timeout_ms")?;
    w.finish()?;
    Ok(topics)
}

/// A config resource named by DescribeConfigs, AlterConfigs or IncrementalAlterConfigs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigResourceRef {
    /// `resource_type` (`ConfigResource.Type`: 2 topic, 4 broker, 8 broker logger, 16 client
    /// metrics, 32 group).
    pub resource_type: i8,
    /// `resource_name`: the topic name for topics, the broker id for brokers, …
    pub resource_name: StrBytes,
}

impl ConfigResourceRef {
    /// The topic name if this resource is a topic ([`CONFIG_RESOURCE_TOPIC`]).
    pub fn topic(&self) -> Option<TopicName> {
        (self.resource_type == CONFIG_RESOURCE_TOPIC).then(|| TopicName(self.resource_name.clone()))
    }
}

/// Walks an AlterConfigs request frame (api key 33, v0–v2) and returns its resources.
///
/// # Errors
/// As [`produce_topics`], for AlterConfigs.
pub fn alter_configs_resources(request: &ParsedRequest, api_version: i16) -> Result<Vec<ConfigResourceRef>, ScanError> {
    alter_configs_walk(request, ALTER_CONFIGS, api_version)
}

/// Walks an IncrementalAlterConfigs request frame (api key 44, v0–v1) and returns its resources.
///
/// # Errors
/// As [`produce_topics`], for IncrementalAlterConfigs.
pub fn incremental_alter_configs_resources(
    request: &ParsedRequest,
    api_version: i16,
) -> Result<Vec<ConfigResourceRef>, ScanError> {
    alter_configs_walk(request, INCREMENTAL_ALTER_CONFIGS, api_version)
}

/// AlterConfigs and IncrementalAlterConfigs share one layout, except that each incremental
/// config carries a `config_operation` (`INT8`) between its name and its value.
fn alter_configs_walk(
    request: &ParsedRequest,
    api: Api,
    api_version: i16,
) -> Result<Vec<ConfigResourceRef>, ScanError> {
    let incremental = api.key == INCREMENTAL_ALTER_CONFIGS.key;
    let mut w = Walk::start(request, api, api_version)?;
    let resource_min = 1 + w.min_str() + w.min_array() + w.min_tags();
    let config_min = 2 * w.min_str() + usize::from(incremental) + w.min_tags();
    let n = w.array_len(resource_min, "resources")?;
    let mut resources = vec_for(n);
    for _ in 0..n {
        let resource_type = w.i8("resources.resource_type")?;
        let resource_name = w.string("resources.resource_name")?;
        let cn = w.array_len(config_min, "resources.configs")?;
        for _ in 0..cn {
            w.skip_str("configs.name")?;
            if incremental {
                w.i8("configs.config_operation")?;
            }
            w.skip_nullable_str("configs.value")?;
            w.tagged_fields("configs")?;
        }
        w.tagged_fields("resources")?;
        resources.push(ConfigResourceRef { resource_type, resource_name });
    }
    w.bool("validate_only")?;
    w.finish()?;
    Ok(resources)
}

/// Walks a DescribeConfigs request frame (api key 32, v1–v4) and returns its resources.
///
/// # Errors
/// As [`produce_topics`], for DescribeConfigs.
pub fn describe_configs_resources(
    request: &ParsedRequest,
    api_version: i16,
) -> Result<Vec<ConfigResourceRef>, ScanError> {
    let mut w = Walk::start(request, DESCRIBE_CONFIGS, api_version)?;
    let resource_min = 1 + w.min_str() + w.min_array() + w.min_tags();
    let n = w.array_len(resource_min, "resources")?;
    let mut resources = vec_for(n);
    for _ in 0..n {
        let resource_type = w.i8("resources.resource_type")?;
        let resource_name = w.string("resources.resource_name")?;
        let kn = w.nullable_array_len(w.min_str(), "resources.configuration_keys")?.unwrap_or(0);
        for _ in 0..kn {
            w.skip_str("resources.configuration_keys")?;
        }
        w.tagged_fields("resources")?;
        resources.push(ConfigResourceRef { resource_type, resource_name });
    }
    w.bool("include_synonyms")?;
    if api_version >= 3 {
        w.bool("include_documentation")?;
    }
    w.finish()?;
    Ok(resources)
}

/// One transaction of an AddPartitionsToTxn request and the partitions it would add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnTopics {
    /// `transactional_id` (`v3_and_below_transactional_id` before v4).
    pub transactional_id: StrBytes,
    /// `producer_id`.
    pub producer_id: i64,
    /// `producer_epoch`.
    pub producer_epoch: i16,
    /// `verify_only` (v4+, sent by brokers): check membership instead of adding; `false` before v4.
    pub verify_only: bool,
    /// The topics and partitions to add.
    pub topics: Vec<TopicPartitions>,
}

/// Walks an AddPartitionsToTxn request frame (api key 24, v0–v5) and returns its transactions:
/// exactly one for v0–v3 (clients), the batched `transactions` array for v4+ (brokers).
///
/// # Errors
/// As [`produce_topics`], for AddPartitionsToTxn.
pub fn add_partitions_to_txn_topics(request: &ParsedRequest, api_version: i16) -> Result<Vec<TxnTopics>, ScanError> {
    let mut w = Walk::start(request, ADD_PARTITIONS_TO_TXN, api_version)?;
    let topic_min = w.min_str() + w.min_array() + w.min_tags();
    let read_topics = |w: &mut Walk<'_>| -> Result<Vec<TopicPartitions>, ScanError> {
        let n = w.array_len(topic_min, "topics")?;
        let mut topics = vec_for(n);
        for _ in 0..n {
            let name = w.topic_name("topics.name")?;
            let pn = w.array_len(4, "topics.partitions")?;
            let mut partitions = vec_for(pn);
            for _ in 0..pn {
                partitions.push(w.i32("topics.partitions")?);
            }
            w.tagged_fields("topics")?;
            topics.push(TopicPartitions { name, partitions });
        }
        Ok(topics)
    };
    let mut transactions;
    if api_version >= 4 {
        let txn_min = w.min_str() + 8 + 2 + 1 + w.min_array() + w.min_tags();
        let n = w.array_len(txn_min, "transactions")?;
        transactions = vec_for(n);
        for _ in 0..n {
            let transactional_id = w.string("transactions.transactional_id")?;
            let producer_id = w.i64("transactions.producer_id")?;
            let producer_epoch = w.i16("transactions.producer_epoch")?;
            let verify_only = w.bool("transactions.verify_only")?;
            let topics = read_topics(&mut w)?;
            w.tagged_fields("transactions")?;
            transactions.push(TxnTopics { transactional_id, producer_id, producer_epoch, verify_only, topics });
        }
    } else {
        let transactional_id = w.string("v3_and_below_transactional_id")?;
        let producer_id = w.i64("v3_and_below_producer_id")?;
        let producer_epoch = w.i16("v3_and_below_producer_epoch")?;
        let topics = read_topics(&mut w)?;
        transactions = vec![TxnTopics { transactional_id, producer_id, producer_epoch, verify_only: false, topics }];
    }
    w.finish()?;
    Ok(transactions)
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
