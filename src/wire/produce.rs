//! Zero-copy Produce requests (api key 0, versions 9–13): the frame the mirror's writers send
//! to the destination, built as a list of `Bytes` segments — length prefix, request header v2
//! and body — in which each partition's `records` are the caller's own slices (typically
//! `[patched 61-byte header, untouched payload]`, DESIGN §4.4) placed between small framing
//! pieces. A vectored write sends the segments as they are.
//!
//! Never copies, decompresses or even reads a `records` slice: only the framing (header, topic
//! names or ids, partition indexes, length varints, tagged-field markers) is newly written, all
//! of it into one allocation. Sans-IO like the rest of `wire`.
//!
//! Encoding (Kafka `ProduceRequest.json`, all versions here flexible): `transactional_id`
//! `COMPACT_NULLABLE_STRING` (always null: the mirror writes outside transactions), `acks`
//! `INT16`, `timeout_ms` `INT32`, `topic_data` `COMPACT_ARRAY` of { `name` `COMPACT_STRING`
//! (v9–12) or `topic_id` `UUID` (v13), `partition_data` `COMPACT_ARRAY` of { `index` `INT32`,
//! `records` `COMPACT_RECORDS`, tagged fields }, tagged fields }, tagged fields. Compact
//! lengths are `n + 1` as an `UNSIGNED_VARINT`; every tagged-field section is empty.

use std::collections::HashSet;

use bytes::{BufMut, Bytes, BytesMut};
use indexmap::IndexMap;
use uuid::Uuid;

use super::frame::LENGTH_PREFIX_BYTES;

/// `ApiKey::Produce`.
pub const PRODUCE_API_KEY: i16 = 0;
/// Lowest Produce version the builder writes (the first flexible one).
pub const MIN_VERSION: i16 = 9;
/// Highest version that names topics (`name`); v13 names them by `topic_id` (KIP-516).
pub const MAX_VERSION_BY_NAME: i16 = 12;
/// Highest Produce version the builder writes.
pub const MAX_VERSION: i16 = 13;

/// Request header version of every Produce version the builder writes (v9+ are flexible).
pub const REQUEST_HEADER_VERSION: i16 = 2;

/// How a Produce request names a topic: by name up to v12, by topic id (KIP-516) from v13.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProduceTopic {
    /// `TopicProduceData.name` (v9–12).
    Name(String),
    /// `TopicProduceData.topic_id` (v13).
    Id(Uuid),
}

impl From<&str> for ProduceTopic {
    fn from(name: &str) -> Self {
        Self::Name(name.to_owned())
    }
}

impl From<String> for ProduceTopic {
    fn from(name: String) -> Self {
        Self::Name(name)
    }
}

impl From<Uuid> for ProduceTopic {
    fn from(id: Uuid) -> Self {
        Self::Id(id)
    }
}

impl std::fmt::Display for ProduceTopic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Name(n) => f.write_str(n),
            Self::Id(id) => write!(f, "topic id {id}"),
        }
    }
}

/// Why a Produce frame could not be built. All of them are caller mistakes or sizes Kafka
/// cannot express; none depends on the network.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ProduceFrameError {
    /// `api_version` outside [`MIN_VERSION`]..=[`MAX_VERSION`].
    #[error("Produce v{0} is not supported by the frame builder (v{MIN_VERSION}..=v{MAX_VERSION})")]
    UnsupportedVersion(i16),
    /// A topic named by name at v13, or by topic id before v13.
    #[error("{topic} cannot be written with Produce v{api_version} (names up to v12, topic ids from v13)")]
    TopicKindMismatch {
        /// The topic as given.
        topic: ProduceTopic,
        /// The request's version.
        api_version: i16,
    },
    /// The same partition added twice: the broker takes one `records` entry per partition.
    #[error("partition {topic}-{partition} added twice to one Produce request")]
    DuplicatePartition {
        /// The topic.
        topic: ProduceTopic,
        /// `PartitionProduceData.index`.
        partition: i32,
    },
    /// A `client_id` or topic name longer than a Kafka `STRING` allows (32767 bytes).
    #[error("string of {0} bytes is longer than a Kafka string can be")]
    StringTooLong(usize),
    /// One partition's `records`, or the whole frame, larger than `INT32` can count.
    #[error("{what} of {bytes} bytes exceeds the 2^31-1 bytes Kafka can frame")]
    TooLarge {
        /// `records` or `frame`.
        what: &'static str,
        /// The size, bytes.
        bytes: usize,
    },
}

/// A whole Produce request frame as segments: concatenated they are exactly the bytes on the
/// wire (`INT32` length prefix, request header v2, body).
#[derive(Debug, Clone)]
pub struct ProduceFrame {
    /// The frame's pieces in wire order: framing written by the builder, interleaved with the
    /// callers' `records` slices (the same allocations that were passed in). No segment is empty.
    pub segments: Vec<Bytes>,
    /// Total bytes of all segments, length prefix included.
    pub len: usize,
    api_version: i16,
    correlation_id: i32,
    acks: i16,
}

impl ProduceFrame {
    /// `request_api_version`.
    pub fn api_version(&self) -> i16 {
        self.api_version
    }
    /// `correlation_id`, echoed in the response header.
    pub fn correlation_id(&self) -> i32 {
        self.correlation_id
    }
    /// `acks` (0: the broker sends no response).
    pub fn acks(&self) -> i16 {
        self.acks
    }
    /// The frame copied into one buffer — for tests and captures, never the send path.
    pub fn to_contiguous(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.len);
        for s in &self.segments {
            out.extend_from_slice(s);
        }
        out.freeze()
    }
}

/// Builds a [`ProduceFrame`]. Partitions of one topic share one `TopicProduceData` entry;
/// topics and partitions keep the order in which they were first added. Misuse (wrong topic
/// kind for the version, a partition added twice) is remembered and reported by
/// [`ProduceFrameBuilder::finish`].
#[derive(Debug, Clone)]
pub struct ProduceFrameBuilder {
    api_version: i16,
    correlation_id: i32,
    client_id: String,
    acks: i16,
    timeout_ms: i32,
    transactional_id: Option<String>,
    topics: IndexMap<ProduceTopic, Vec<(i32, Vec<Bytes>)>>,
    seen: HashSet<(usize, i32)>,
    error: Option<ProduceFrameError>,
}

impl ProduceFrameBuilder {
    /// A Produce request of `api_version` (9–13) with request header v2 (`correlation_id`,
    /// `client_id`), `acks` (-1 all, 1 leader, 0 none) and `timeout_ms` (ms the broker waits
    /// for replication when `acks` = -1).
    pub fn new(api_version: i16, correlation_id: i32, client_id: &str, acks: i16, timeout_ms: i32) -> Self {
        let error = if (MIN_VERSION..=MAX_VERSION).contains(&api_version) {
            None
        } else {
            Some(ProduceFrameError::UnsupportedVersion(api_version))
        };
        Self {
            api_version,
            correlation_id,
            client_id: client_id.to_owned(),
            acks,
            timeout_ms,
            transactional_id: None,
            topics: IndexMap::new(),
            seen: HashSet::new(),
            error,
        }
    }

    /// Sets the request's `transactional_id` (null unless set): the records of a transactional
    /// producer must name it (Kafka `ProduceRequest.json`; the broker checks that the
    /// partition was added to the id's open transaction, `AddPartitionsToTxn`, for versions
    /// below 12).
    pub fn transactional_id(&mut self, id: &str) -> &mut Self {
        self.transactional_id = Some(id.to_owned());
        self
    }

    /// Adds `records` for `topic`-`partition`: the segments of the partition's `records` field
    /// in order (e.g. `[patched header, payload]` of one batch). They are moved into the frame,
    /// never copied or inspected; empty segments are dropped.
    pub fn partition(&mut self, topic: impl Into<ProduceTopic>, partition: i32, records: Vec<Bytes>) -> &mut Self {
        let topic = topic.into();
        if self.error.is_some() {
            return self;
        }
        let by_id = matches!(topic, ProduceTopic::Id(_));
        if by_id != (self.api_version > MAX_VERSION_BY_NAME) {
            self.error = Some(ProduceFrameError::TopicKindMismatch { topic, api_version: self.api_version });
            return self;
        }
        let entry = self.topics.entry(topic);
        let index = entry.index();
        if !self.seen.insert((index, partition)) {
            self.error = Some(ProduceFrameError::DuplicatePartition { topic: entry.key().clone(), partition });
            return self;
        }
        entry.or_default().push((partition, records));
        self
    }

    /// Number of partitions added so far.
    pub fn partition_count(&self) -> usize {
        self.seen.len()
    }

    /// Encodes the frame. All framing goes into one new buffer; the `records` segments are
    /// placed between its slices as they are.
    ///
    /// # Errors
    /// The first [`ProduceFrameError`] met while adding partitions, [`ProduceFrameError::StringTooLong`]
    /// for a long client id or topic name, [`ProduceFrameError::TooLarge`] for sizes over
    /// `i32::MAX`.
    pub fn finish(self) -> Result<ProduceFrame, ProduceFrameError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.client_id.len() > i16::MAX as usize {
            return Err(ProduceFrameError::StringTooLong(self.client_id.len()));
        }
        let mut framing = BytesMut::with_capacity(self.framing_capacity());
        // Positions in `framing` after which a partition's records go, with those records.
        let mut cuts: Vec<(usize, Vec<Bytes>)> = Vec::with_capacity(self.seen.len());
        let mut records_total: usize = 0;

        framing.put_i32(0); // length prefix, set below
        framing.put_i16(PRODUCE_API_KEY);
        framing.put_i16(self.api_version);
        framing.put_i32(self.correlation_id);
        framing.put_i16(self.client_id.len() as i16);
        framing.put_slice(self.client_id.as_bytes());
        framing.put_u8(0); // tagged fields of request header v2 (REQUEST_HEADER_VERSION)

        match &self.transactional_id {
            None => framing.put_u8(0), // transactional_id: null
            Some(id) => {
                if id.len() > i16::MAX as usize {
                    return Err(ProduceFrameError::StringTooLong(id.len()));
                }
                put_uvarint(&mut framing, id.len() as u64 + 1);
                framing.put_slice(id.as_bytes());
            }
        }
        framing.put_i16(self.acks);
        framing.put_i32(self.timeout_ms);
        put_uvarint(&mut framing, self.topics.len() as u64 + 1);
        for (topic, partitions) in self.topics {
            match &topic {
                ProduceTopic::Name(name) => {
                    if name.len() > i16::MAX as usize {
                        return Err(ProduceFrameError::StringTooLong(name.len()));
                    }
                    put_uvarint(&mut framing, name.len() as u64 + 1);
                    framing.put_slice(name.as_bytes());
                }
                ProduceTopic::Id(id) => framing.put_slice(id.as_bytes()),
            }
            put_uvarint(&mut framing, partitions.len() as u64 + 1);
            for (index, records) in partitions {
                framing.put_i32(index);
                let len: usize = records.iter().map(Bytes::len).sum();
                if len > i32::MAX as usize {
                    return Err(ProduceFrameError::TooLarge { what: "records", bytes: len });
                }
                put_uvarint(&mut framing, len as u64 + 1);
                records_total += len;
                cuts.push((framing.len(), records));
                framing.put_u8(0); // partition tagged fields
            }
            framing.put_u8(0); // topic tagged fields
        }
        framing.put_u8(0); // request tagged fields

        let len = framing.len() + records_total;
        let body_len = len - LENGTH_PREFIX_BYTES;
        if body_len > i32::MAX as usize {
            return Err(ProduceFrameError::TooLarge { what: "frame", bytes: body_len });
        }
        framing[..LENGTH_PREFIX_BYTES].copy_from_slice(&(body_len as i32).to_be_bytes());

        let framing = framing.freeze();
        let mut segments = Vec::with_capacity(2 * cuts.len() + 1 + cuts.iter().map(|(_, r)| r.len()).sum::<usize>());
        let mut from = 0;
        for (at, records) in cuts {
            segments.push(framing.slice(from..at));
            segments.extend(records.into_iter().filter(|s| !s.is_empty()));
            from = at;
        }
        segments.push(framing.slice(from..));
        Ok(ProduceFrame {
            segments,
            len,
            api_version: self.api_version,
            correlation_id: self.correlation_id,
            acks: self.acks,
        })
    }

    /// An upper bound of the framing bytes, so that `finish` allocates once.
    fn framing_capacity(&self) -> usize {
        let fixed = LENGTH_PREFIX_BYTES
            + 8
            + 2
            + self.client_id.len()
            + 1
            + 5
            + self.transactional_id.as_ref().map_or(0, String::len)
            + 2
            + 4
            + 5
            + 1;
        let topics: usize = self
            .topics
            .iter()
            .map(|(t, parts)| {
                let name = match t {
                    ProduceTopic::Name(n) => 5 + n.len(),
                    ProduceTopic::Id(_) => 16,
                };
                name + 5 + 1 + parts.len() * (4 + 5 + 1)
            })
            .sum();
        fixed + topics
    }
}

/// Kafka `UNSIGNED_VARINT`.
fn put_uvarint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::{patch_header, placeholder_batch, Batch, BatchIter, HeaderPatch, OwnBatch};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, ProduceRequest, RequestHeader, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    /// Topics with their (partition, records segments), in request order.
    type Grouped = Vec<(ProduceTopic, Vec<(i32, Vec<Bytes>)>)>;

    /// What kafka-protocol encodes for the same content: length prefix, header v2, body.
    fn reference(
        version: i16,
        correlation_id: i32,
        client_id: &str,
        acks: i16,
        timeout_ms: i32,
        topics: &Grouped,
    ) -> Bytes {
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Produce as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(client_id.to_owned())));
        let topic_data = topics
            .iter()
            .map(|(t, parts)| {
                let td = TopicProduceData::default().with_partition_data(
                    parts
                        .iter()
                        .map(|(i, recs)| {
                            let joined: Vec<u8> = recs.iter().flat_map(|s| s.iter().copied()).collect();
                            PartitionProduceData::default().with_index(*i).with_records(Some(Bytes::from(joined)))
                        })
                        .collect(),
                );
                match t {
                    ProduceTopic::Name(n) => td.with_name(TopicName(StrBytes::from_string(n.clone()))),
                    ProduceTopic::Id(id) => td.with_topic_id(*id),
                }
            })
            .collect();
        let req = ProduceRequest::default().with_acks(acks).with_timeout_ms(timeout_ms).with_topic_data(topic_data);
        let mut out = BytesMut::new();
        out.put_i32(0);
        header.encode(&mut out, ApiKey::Produce.request_header_version(version)).unwrap();
        req.encode(&mut out, version).unwrap();
        let n = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&n.to_be_bytes());
        out.freeze()
    }

    fn batch(base: i64, count: i32) -> Bytes {
        let own = OwnBatch {
            base_offset: base,
            count,
            timestamp: 1_700_000_000_000,
            producer_id: 11,
            producer_epoch: 0,
            base_sequence: 0,
        };
        placeholder_batch(&own, 0xabcd, base)
    }

    /// `[patched header, payload]` of a batch, the way the mirror writes one.
    fn patched(b: &Bytes, producer_id: i64) -> Vec<Bytes> {
        let batch = BatchIter::new(b.clone()).next().unwrap().unwrap();
        let h = patch_header(&batch, &HeaderPatch { producer_id: Some(producer_id), ..Default::default() });
        vec![Bytes::copy_from_slice(&h), batch.payload()]
    }

    /// (topic, partition, records) in insertion order, grouped as the builder groups them.
    fn grouped(adds: &[(ProduceTopic, i32, Vec<Bytes>)]) -> Grouped {
        let mut out = Grouped::new();
        for (t, p, r) in adds {
            match out.iter_mut().find(|(x, _)| x == t) {
                Some((_, parts)) => parts.push((*p, r.clone())),
                None => out.push((t.clone(), vec![(*p, r.clone())])),
            }
        }
        out
    }

    fn build(version: i16, adds: &[(ProduceTopic, i32, Vec<Bytes>)]) -> ProduceFrame {
        let mut b = ProduceFrameBuilder::new(version, 4242, "mirrorgate-test", -1, 30_000);
        for (t, p, r) in adds {
            b.partition(t.clone(), *p, r.clone());
        }
        b.finish().unwrap()
    }

    fn adds_for(version: i16) -> Vec<(ProduceTopic, i32, Vec<Bytes>)> {
        let (a, b): (ProduceTopic, ProduceTopic) = if version >= 13 {
            (Uuid::from_u128(0x1234).into(), Uuid::from_u128(0xfeed_beef).into())
        } else {
            ("orders".into(), "a-much-longer-topic-name.with.dots_and_underscores".into())
        };
        let big = Bytes::from(vec![7u8; 20_000]); // a 3-byte varint length
        vec![
            (a.clone(), 2, patched(&batch(0, 3), 100)),
            (b.clone(), 0, patched(&batch(10, 200), 101)), // 2-byte varint
            (a.clone(), 0, vec![batch(5, 1)]),             // an unpatched batch as one segment
            (b.clone(), 7, vec![Bytes::from_static(b"x"), big, Bytes::new(), Bytes::from_static(b"yz")]),
            (a, 1, vec![]),
        ]
    }

    #[test]
    fn matches_kafka_protocol_encoding_for_every_version() {
        for version in MIN_VERSION..=MAX_VERSION {
            let adds = adds_for(version);
            let frame = build(version, &adds);
            let expected = reference(version, 4242, "mirrorgate-test", -1, 30_000, &grouped(&adds));
            let got = frame.to_contiguous();
            assert_eq!(got.len(), frame.len, "v{version}");
            assert_eq!(got, expected, "v{version}");
            assert!(frame.segments.iter().all(|s| !s.is_empty()));
            assert_eq!((frame.api_version(), frame.correlation_id(), frame.acks()), (version, 4242, -1));
        }
    }

    #[test]
    fn single_partition_and_other_header_values() {
        for version in [9, 11, 12] {
            let recs = patched(&batch(0, 1), 5);
            let adds = [(ProduceTopic::from("t"), 0, recs)];
            let mut b = ProduceFrameBuilder::new(version, i32::MAX, "", 1, 0);
            b.partition("t", 0, adds[0].2.clone());
            let frame = b.finish().unwrap();
            assert_eq!(frame.to_contiguous(), reference(version, i32::MAX, "", 1, 0, &grouped(&adds)));
        }
    }

    #[test]
    fn kafka_protocol_decodes_the_frame_and_the_batches() {
        let adds = adds_for(9);
        let frame = build(9, &adds).to_contiguous();
        let mut body = frame.slice(4..);
        let header = RequestHeader::decode(&mut body, 2).unwrap();
        assert_eq!((header.request_api_key, header.request_api_version, header.correlation_id), (0, 9, 4242));
        let req = ProduceRequest::decode(&mut body, 9).unwrap();
        assert!(body.is_empty());
        let names: Vec<&str> = req.topic_data.iter().map(|t| t.name.0.as_str()).collect();
        assert_eq!(names, ["orders", "a-much-longer-topic-name.with.dots_and_underscores"]);
        let orders: Vec<i32> = req.topic_data[0].partition_data.iter().map(|p| p.index).collect();
        assert_eq!(orders, [2, 0, 1], "insertion order within a topic");
        let recs = req.topic_data[0].partition_data[0].records.clone().unwrap();
        let b: Batch = BatchIter::new(recs).next().unwrap().unwrap();
        assert!(b.crc_is_valid());
        assert_eq!((b.producer_id(), b.record_count()), (100, 3));
    }

    #[test]
    fn a_transactional_id_is_encoded_as_kafka_protocol_decodes_it() {
        for version in [9, 11, 12] {
            let mut b = ProduceFrameBuilder::new(version, 7, "mg", -1, 1000);
            b.transactional_id("mirrorgate.m1.orders.3.a0").partition("orders", 3, vec![batch(0, 2)]);
            let frame = b.finish().unwrap().to_contiguous();
            let mut body = frame.slice(4..);
            RequestHeader::decode(&mut body, 2).unwrap();
            let req = ProduceRequest::decode(&mut body, version).unwrap();
            assert!(body.is_empty(), "v{version}");
            assert_eq!(req.transactional_id.as_ref().map(|t| t.0.as_str()), Some("mirrorgate.m1.orders.3.a0"));
            assert_eq!(req.topic_data[0].partition_data[0].index, 3);
        }
    }

    #[test]
    fn records_are_the_callers_allocations() {
        let adds = adds_for(12);
        let frame = build(12, &adds);
        let given: Vec<&Bytes> = adds.iter().flat_map(|(_, _, r)| r.iter()).filter(|s| !s.is_empty()).collect();
        for g in &given {
            assert!(
                frame.segments.iter().any(|s| s.as_ptr() == g.as_ptr() && s.len() == g.len()),
                "a records segment of {} bytes was copied",
                g.len()
            );
        }
        // Everything else is framing: one small buffer, sliced.
        let framing: usize =
            frame.segments.iter().filter(|s| !given.iter().any(|g| g.as_ptr() == s.as_ptr())).map(Bytes::len).sum();
        assert!(framing < 300, "framing is {framing} bytes");
        let payload_total: usize = given.iter().map(|g| g.len()).sum();
        assert_eq!(framing + payload_total, frame.len);
    }

    #[test]
    fn misuse_is_a_typed_error() {
        let e = ProduceFrameBuilder::new(8, 1, "c", -1, 1000).finish().unwrap_err();
        assert_eq!(e, ProduceFrameError::UnsupportedVersion(8));
        let e = ProduceFrameBuilder::new(14, 1, "c", -1, 1000).finish().unwrap_err();
        assert_eq!(e, ProduceFrameError::UnsupportedVersion(14));

        let mut b = ProduceFrameBuilder::new(13, 1, "c", -1, 1000);
        b.partition("by-name", 0, vec![]);
        assert!(matches!(b.finish(), Err(ProduceFrameError::TopicKindMismatch { api_version: 13, .. })));
        let mut b = ProduceFrameBuilder::new(12, 1, "c", -1, 1000);
        b.partition(Uuid::from_u128(1), 0, vec![]);
        assert!(matches!(b.finish(), Err(ProduceFrameError::TopicKindMismatch { api_version: 12, .. })));

        let mut b = ProduceFrameBuilder::new(9, 1, "c", -1, 1000);
        b.partition("t", 0, vec![]).partition("u", 0, vec![]).partition("t", 0, vec![]);
        assert_eq!(b.partition_count(), 2);
        assert_eq!(b.finish().unwrap_err(), ProduceFrameError::DuplicatePartition { topic: "t".into(), partition: 0 });

        let long = "x".repeat(40_000);
        assert_eq!(
            ProduceFrameBuilder::new(9, 1, &long, -1, 1).finish().unwrap_err(),
            ProduceFrameError::StringTooLong(40_000)
        );
        let mut b = ProduceFrameBuilder::new(9, 1, "c", -1, 1);
        b.partition(long.as_str(), 0, vec![]);
        assert_eq!(b.finish().unwrap_err(), ProduceFrameError::StringTooLong(40_000));
    }

    #[test]
    fn empty_request_is_well_formed() {
        let frame = ProduceFrameBuilder::new(10, 3, "c", 0, 5).finish().unwrap();
        assert_eq!(frame.segments.len(), 1);
        assert_eq!(frame.to_contiguous(), reference(10, 3, "c", 0, 5, &Grouped::new()));
        for v in MIN_VERSION..=MAX_VERSION {
            assert_eq!(REQUEST_HEADER_VERSION, ApiKey::Produce.request_header_version(v));
        }
    }
}
