//! A validating walk over a Fetch response body (api key 1, versions 4–18), in the manner of
//! [`super::scan`]: it reads the body field by field, checks every length and count against the
//! bytes that remain, requires the walk to end exactly at the end of the body, and returns only
//! what the proxy needs to decide whether the response can go to the client as the broker's
//! own bytes: each topic's `topic` name (v4–12) or `topic_id` (v13+), each partition's
//! `partition_index` and the byte range of its `records`, and whether the KIP-951
//! `node_endpoints` (top-level tagged field 0, v16+) are present and non-empty. It never reads
//! inside `records`, never copies a string, never allocates from a count it has not checked
//! (at most [`super::scan::PREALLOC_MAX`] elements are reserved up front), never panics, and
//! never touches a socket or a clock.
//!
//! The walk is at least as strict as kafka-protocol's `FetchResponse` decoder: a body it
//! accepts decodes (the tests check this on mutated bodies), and a known tagged field
//! (`diverging_epoch`, `current_leader`, `snapshot_id`, `node_endpoints`) must fill exactly
//! the size its tag announces, so the walk and the decoder never disagree on where a field
//! ends. Field order: Apache Kafka's `FetchResponse.json` (kafka-protocol's generated
//! `fetch_response.rs`).

use std::ops::Range;

use super::mirror::WireError;
use super::response_cursor::{fixed_tagged_struct, node_endpoints, Cursor};
use super::scan::{ScanError, PREALLOC_MAX};

/// Lowest Fetch response version walked (the proxy refuses Fetch below v4).
pub const MIN_VERSION: i16 = 4;
/// Highest Fetch response version walked (kafka-protocol 0.18's maximum).
pub const MAX_VERSION: i16 = 18;

const NAME: &str = "FetchResponse";

/// How a Fetch response names a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchTopic<'a> {
    /// `topic` (v4–12), borrowed from the body, checked UTF-8.
    Name(&'a str),
    /// `topic_id` (v13+, KIP-516).
    Id([u8; 16]),
}

impl<'a> FetchTopic<'a> {
    /// The `(name, id)` pair kafka-protocol's decoded `FetchableTopicResponse` carries:
    /// an empty name for a topic named by id, the zero id for a topic named by name.
    pub fn name_and_id(&self) -> (&'a str, [u8; 16]) {
        match *self {
            FetchTopic::Name(n) => (n, [0; 16]),
            FetchTopic::Id(id) => ("", id),
        }
    }
}

/// One `responses` entry of a Fetch response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopicScan<'a> {
    /// The topic's name or id.
    pub topic: FetchTopic<'a>,
    /// Indices of its partitions in [`FetchResponseScan::partitions`].
    pub partitions: Range<usize>,
}

/// One `partitions` entry of a Fetch response topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartitionScan {
    /// `partition_index`.
    pub partition_index: i32,
    /// `error_code`.
    pub error_code: i16,
    /// Byte range of the `records` payload (record batches, not parsed) within the walked
    /// body; `None` for null records.
    pub records: Option<Range<usize>>,
}

/// The result of walking a Fetch response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponseScan<'a> {
    /// `responses`, in response order.
    pub topics: Vec<FetchTopicScan<'a>>,
    /// Every partition of every topic, in response order.
    pub partitions: Vec<FetchPartitionScan>,
    /// Whether `node_endpoints` (KIP-951, v16+) holds at least one broker.
    pub node_endpoints: bool,
}

impl FetchResponseScan<'_> {
    /// The partitions of `topic` (an element of [`FetchResponseScan::topics`]).
    pub fn partitions_of(&self, topic: &FetchTopicScan<'_>) -> &[FetchPartitionScan] {
        self.partitions.get(topic.partitions.clone()).unwrap_or_default()
    }
}

/// Walks a Fetch response body (after the response header) of `version` 4–18 and returns its
/// topics, partitions and `records` byte ranges (relative to `body`), and whether
/// `node_endpoints` is non-empty. Record batches are skipped, never parsed or copied.
///
/// # Errors
/// [`ScanError::UnsupportedVersion`] outside v4–18; any other [`ScanError`] for a truncated or
/// malformed body: a length or count beyond the bytes left, a negative length, invalid UTF-8,
/// a null topic name or array, a tag number above `i32::MAX`, a known tagged field whose value
/// does not fill its announced size, `node_endpoints` below v16, bytes after the body.
pub fn fetch_response(body: &[u8], version: i16) -> Result<FetchResponseScan<'_>, ScanError> {
    let mut scan = FetchResponseScan { topics: Vec::new(), partitions: Vec::new(), node_endpoints: false };
    let mut c = Cursor::new(body, version >= 12);
    walk(&mut c, version, &mut scan, &mut 0, &mut None)?;
    Ok(scan)
}

/// What [`fetch_response_prefix`] found in the part of a body that has arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPrefixScan<'a> {
    /// The topics begun and the partitions completed so far, as [`fetch_response`] gives them
    /// for a whole body (a topic's `partitions` range covers its completed partitions only;
    /// `node_endpoints` is set only once the body is complete).
    pub scan: FetchResponseScan<'a>,
    /// Bytes of the body up to the end of the last completed partition (its tagged fields
    /// included): everything before it has been walked. 0 before the first partition ends.
    pub walked: usize,
    /// The walk met bytes it refuses (not merely bytes still to come); `walked` stays where
    /// it was before them.
    pub refused: bool,
    /// Bytes of the body that must have arrived before a new walk can get further (the end of
    /// the read it stopped at); the body's length when the walk ended.
    pub needed: usize,
    /// The partition whose `records` the arrived bytes end in, if they do: the next one of
    /// `scan.partitions` once complete, in the last topic of `scan.topics`.
    pub partial: Option<PartialPartition>,
}

/// A partition of a Fetch response whose `records` have partly arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialPartition {
    /// `partition_index`.
    pub partition_index: i32,
    /// `error_code`.
    pub error_code: i16,
    /// Byte range its `records` will fill in the body, by their announced length.
    pub records: Range<usize>,
}

/// Walks the first `body.len()` bytes of a Fetch response body whose whole length is
/// `total` bytes (`total ≥ body.len()`), as far as they go: the same walk and checks as
/// [`fetch_response`], with counts checked against the `total` bytes, stopping where the
/// bytes run out. Used to forward a large response while it is still arriving
/// (`proxy::fetch_stream`). When `body.len() == total` the result is [`fetch_response`]'s,
/// with `walked` at the end of the last partition.
///
/// # Errors
/// [`ScanError::UnsupportedVersion`] outside v4–18. A malformed prefix is not an error: the
/// result says `refused`.
pub fn fetch_response_prefix(body: &[u8], total: usize, version: i16) -> Result<FetchPrefixScan<'_>, ScanError> {
    if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
        return Err(ScanError::UnsupportedVersion { api: NAME, version });
    }
    let mut scan = FetchResponseScan { topics: Vec::new(), partitions: Vec::new(), node_endpoints: false };
    let mut c = Cursor::new(body, version >= 12);
    c.set_total(total);
    let mut walked = 0;
    let mut partial = None;
    let (refused, needed) = match walk(&mut c, version, &mut scan, &mut walked, &mut partial) {
        Ok(()) => (false, body.len()),
        // Bytes still to come, not a malformed body: a read past what has arrived that the
        // whole body still has room for.
        Err(ScanError::Wire(WireError::Truncated { needed, .. }))
            if body.len() < c.total() && c.pos() + needed <= c.total() =>
        {
            (false, c.pos() + needed)
        }
        Err(_) => (true, body.len()),
    };
    // Only a walk that stopped inside the records has a partition in progress.
    let partial = partial.filter(|p| !refused && c.pos() >= p.records.start && c.pos() < p.records.end);
    Ok(FetchPrefixScan { scan, walked, refused, needed, partial })
}

/// The walk of [`fetch_response`] over `c`, into `scan`; `walked` is set to the position after
/// each completed partition. A topic enters `scan.topics` when its header is read and its
/// `partitions` range grows as its partitions complete.
fn walk<'a>(
    c: &mut Cursor<'a>,
    version: i16,
    scan: &mut FetchResponseScan<'a>,
    walked: &mut usize,
    partial: &mut Option<PartialPartition>,
) -> Result<(), ScanError> {
    if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
        return Err(ScanError::UnsupportedVersion { api: NAME, version });
    }
    let flexible = version >= 12;
    let by_id = version >= 13;
    let (min_str, min_array, min_tags) = if flexible { (1, 1, 1) } else { (2, 4, 0) };
    c.skip(4, "throttle_time_ms")?;
    if version >= 7 {
        c.skip(2 + 4, "error_code, session_id")?;
    }
    let topic_min = if by_id { 16 } else { min_str } + min_array + min_tags;
    let log_start = if version >= 5 { 8 } else { 0 };
    let preferred = if version >= 11 { 4 } else { 0 };
    // index, error code, high watermark, LSO, log start, aborted, replica, records, tags
    let fixed_head = 4 + 2 + 8 + 8 + log_start;
    let partition_min = fixed_head + min_array + preferred + min_array + min_tags;
    let aborted_min = 8 + 8 + min_tags;

    let n = c.array_len(topic_min, "responses")?;
    scan.topics.reserve(n.min(PREALLOC_MAX));
    for _ in 0..n {
        let topic = if by_id {
            let raw = c.skip(16, "responses.topic_id")?;
            let mut id = [0u8; 16];
            id.copy_from_slice(raw);
            FetchTopic::Id(id)
        } else {
            FetchTopic::Name(c.str("responses.topic")?.ok_or(WireError::UnexpectedNull { what: "responses.topic" })?)
        };
        let pn = c.array_len(partition_min, "responses.partitions")?;
        let first = scan.partitions.len();
        scan.topics.push(FetchTopicScan { topic, partitions: first..first });
        scan.partitions.reserve(pn.min(PREALLOC_MAX));
        for _ in 0..pn {
            let partition_index = c.i32("partitions.partition_index")?;
            let error_code = c.i16("partitions.error_code")?;
            c.skip(fixed_head - 6, "partitions.high_watermark..log_start_offset")?;
            if let Some(an) = c.nullable_array_len(aborted_min, "partitions.aborted_transactions")? {
                for _ in 0..an {
                    c.skip(16, "aborted_transactions.producer_id, first_offset")?;
                    c.opaque_tagged_fields("aborted_transactions")?;
                }
            }
            c.skip(preferred, "partitions.preferred_read_replica")?;
            let records = c.nullable_bytes("partitions.records", |r| {
                *partial = Some(PartialPartition { partition_index, error_code, records: r.clone() });
            })?;
            c.tagged_fields("partitions", |tag, value| match tag {
                // diverging_epoch: epoch, end_offset
                0 => fixed_tagged_struct(value, 4 + 8, "partitions.diverging_epoch"),
                // current_leader: leader_id, leader_epoch
                1 => fixed_tagged_struct(value, 4 + 4, "partitions.current_leader"),
                // snapshot_id: end_offset, epoch
                2 => fixed_tagged_struct(value, 8 + 4, "partitions.snapshot_id"),
                _ => Ok(()),
            })?;
            *partial = None;
            scan.partitions.push(FetchPartitionScan { partition_index, error_code, records });
            if let Some(t) = scan.topics.last_mut() {
                t.partitions.end = scan.partitions.len();
            }
            *walked = c.pos();
        }
        c.opaque_tagged_fields("responses")?;
    }
    let mut endpoints = false;
    c.tagged_fields(NAME, |tag, value| {
        if tag != 0 {
            return Ok(());
        }
        if version < 16 {
            // kafka-protocol refuses tag 0 before `node_endpoints` exists.
            return Err(WireError::InvalidTag { what: NAME, tag }.into());
        }
        // The last tag 0 wins, as in kafka-protocol's decoder (Kafka writes each tag once).
        endpoints = node_endpoints(value)?;
        Ok(())
    })?;
    c.end(NAME)?;
    scan.node_endpoints = endpoints;
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
        SnapshotId,
    };
    use kafka_protocol::messages::{BrokerId, FetchResponse, ProducerId, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    use super::*;

    fn records(seed: u8, len: usize) -> Bytes {
        Bytes::from((0..len).map(|i| seed.wrapping_add(i as u8)).collect::<Vec<u8>>())
    }

    /// A response using every field of `version`: two topics, aborted transactions, preferred
    /// read replica, the three partition tagged fields and an unknown one, null, empty and
    /// non-empty records, node endpoints (v16+) and an unknown top-level tagged field.
    fn rich(version: i16, endpoints: bool) -> FetchResponse {
        let topic = |name: &'static str, id: u8, partitions: Vec<PartitionData>| {
            let t = FetchableTopicResponse::default().with_partitions(partitions);
            if version >= 13 {
                t.with_topic_id(uuid::Uuid::from_bytes([id; 16]))
            } else {
                t.with_topic(TopicName(StrBytes::from_static_str(name)))
            }
        };
        let aborted = |pid: i64, first: i64| {
            AbortedTransaction::default().with_producer_id(ProducerId(pid)).with_first_offset(first)
        };
        let mut p0 = PartitionData::default()
            .with_partition_index(0)
            .with_high_watermark(1000)
            .with_last_stable_offset(990)
            .with_log_start_offset(if version >= 5 { 10 } else { -1 })
            .with_aborted_transactions(Some(vec![aborted(7, 100), aborted(8, 200)]))
            .with_records(Some(records(1, 300)));
        if version >= 11 {
            p0.preferred_read_replica = BrokerId(2);
        }
        if version >= 12 {
            p0.diverging_epoch = EpochEndOffset::default().with_epoch(3).with_end_offset(100);
            p0.current_leader = LeaderIdAndEpoch::default().with_leader_id(BrokerId(1)).with_leader_epoch(5);
            p0.snapshot_id = SnapshotId::default().with_end_offset(200).with_epoch(4);
            p0.unknown_tagged_fields.insert(7, Bytes::from_static(b"xyz"));
        }
        let p1 = PartitionData::default().with_partition_index(3).with_error_code(6).with_records(None);
        let p2 = PartitionData::default().with_partition_index(1).with_records(Some(Bytes::new()));
        let mut resp = FetchResponse::default()
            .with_throttle_time_ms(7)
            .with_session_id(if version >= 7 { 99 } else { 0 })
            .with_responses(vec![
                topic("alpha", 1, vec![p0, p1]),
                topic("beta", 2, vec![p2]),
                topic("gamma", 3, vec![]),
            ]);
        if version >= 12 {
            resp.unknown_tagged_fields.insert(5, Bytes::from_static(b"future"));
        }
        if version >= 16 && endpoints {
            resp.node_endpoints = vec![
                NodeEndpoint::default()
                    .with_node_id(BrokerId(1))
                    .with_host(StrBytes::from_static_str("broker-1"))
                    .with_port(9092),
                NodeEndpoint::default()
                    .with_node_id(BrokerId(2))
                    .with_host(StrBytes::from_static_str("broker-2"))
                    .with_port(9093)
                    .with_rack(Some(StrBytes::from_static_str("rack-b"))),
            ];
        }
        resp
    }

    fn encode(resp: &FetchResponse, version: i16) -> Bytes {
        let mut out = BytesMut::new();
        resp.encode(&mut out, version).unwrap();
        out.freeze()
    }

    /// What the walk saw equals what kafka-protocol decodes from the same bytes.
    fn assert_agrees(scan: &FetchResponseScan<'_>, body: &Bytes, resp: &FetchResponse, version: i16) {
        assert_eq!(scan.topics.len(), resp.responses.len(), "v{version}");
        for (t, d) in scan.topics.iter().zip(&resp.responses) {
            let (name, id) = t.topic.name_and_id();
            assert_eq!((name, &id), (d.topic.0.as_str(), d.topic_id.as_bytes()), "v{version}");
            let parts = scan.partitions_of(t);
            assert_eq!(parts.len(), d.partitions.len(), "v{version}");
            for (p, dp) in parts.iter().zip(&d.partitions) {
                assert_eq!(p.partition_index, dp.partition_index, "v{version}");
                assert_eq!(p.records.as_ref().map(|r| &body[r.clone()]), dp.records.as_deref(), "v{version}");
            }
        }
        assert_eq!(scan.node_endpoints, !resp.node_endpoints.is_empty(), "v{version}");
    }

    #[test]
    fn a_repeated_node_endpoints_tag_counts_as_the_decoder_reads_it() {
        // v16: no topics, then tag 0 with one endpoint and tag 0 again with none; the decoder
        // keeps the last one.
        let mut b = vec![0u8; 10];
        b.extend_from_slice(&[0x01, 0x02, 0x00, 0x0d, 0x02, 0, 0, 0, 1, 0x02, b'h', 0, 0, 0, 1, 0x00, 0x00]);
        b.extend_from_slice(&[0x00, 0x01, 0x01]);
        let body = Bytes::from(b);
        let scan = fetch_response(&body, 16).unwrap();
        let resp = FetchResponse::decode(&mut body.clone(), 16).unwrap();
        assert!(resp.node_endpoints.is_empty());
        assert_agrees(&scan, &body, &resp, 16);
    }

    #[test]
    fn agrees_with_kafka_protocol_at_every_version() {
        for version in MIN_VERSION..=MAX_VERSION {
            for endpoints in [true, false] {
                let resp = rich(version, endpoints);
                let body = encode(&resp, version);
                let scan = fetch_response(&body, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
                assert_eq!(scan.topics.len(), 3);
                assert_eq!(scan.partitions.len(), 3);
                assert_eq!(scan.node_endpoints, endpoints && version >= 16, "v{version}");
                let alpha = if version >= 13 { FetchTopic::Id([1; 16]) } else { FetchTopic::Name("alpha") };
                assert_eq!(scan.topics[0].topic, alpha);
                assert!(scan.partitions_of(&scan.topics[2]).is_empty());
                let decoded = FetchResponse::decode(&mut body.clone(), version).unwrap();
                assert_agrees(&scan, &body, &decoded, version);
                assert_eq!(&body[scan.partitions[0].records.clone().unwrap()], &records(1, 300)[..]);
                assert_eq!(scan.partitions[1].records, None);
                assert_eq!(scan.partitions[2].records.as_ref().map(|r| r.len()), Some(0));
            }
        }
    }

    /// Fetch responses of real Kafka 4.1.1 brokers (the fuzz seed corpus, captured by
    /// tests/fuzz_corpus.rs: flags, api key, api version, then header v1 and body).
    #[test]
    fn captured_broker_responses_walk() {
        let corpus: [&[u8]; 4] = [
            include_bytes!("../../fuzz/corpus/responses/resp-1-v16-0"),
            include_bytes!("../../fuzz/corpus/responses/resp-1-v16-1"),
            include_bytes!("../../fuzz/corpus/responses/resp-1-v18-0"),
            include_bytes!("../../fuzz/corpus/responses/resp-1-v18-1"),
        ];
        for input in corpus {
            assert_eq!(i16::from_be_bytes([input[1], input[2]]), 1, "a Fetch response");
            let version = i16::from_be_bytes([input[3], input[4]]);
            let frame = Bytes::copy_from_slice(&input[5..]);
            let start = crate::wire::header::response_header_len(&frame, 1).unwrap();
            let body = frame.slice(start..);
            let scan = fetch_response(&body, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
            let decoded = FetchResponse::decode(&mut body.clone(), version).unwrap();
            assert_agrees(&scan, &body, &decoded, version);
        }
    }

    #[test]
    fn versions_outside_4_to_18_are_refused() {
        let body = encode(&rich(4, false), 4);
        for version in [-1, 0, 3, 19] {
            assert!(matches!(fetch_response(&body, version), Err(ScanError::UnsupportedVersion { .. })));
        }
    }

    /// Every cut of a valid body is an error, so is a trailing byte; a byte changed anywhere
    /// never panics, and whatever the walk accepts kafka-protocol decodes to the same topics,
    /// partitions and records.
    #[test]
    fn truncated_and_mutated_bodies() {
        for version in MIN_VERSION..=MAX_VERSION {
            let body = encode(&rich(version, true), version);
            for cut in 0..body.len() {
                assert!(fetch_response(&body[..cut], version).is_err(), "v{version} cut at {cut}");
            }
            let mut longer = body.to_vec();
            longer.push(0);
            assert!(fetch_response(&longer, version).is_err(), "v{version} trailing byte");
            for i in 0..body.len() {
                for m in [0x00, 0xff, body[i] ^ 0x01, body[i] ^ 0x80, body[i].wrapping_add(1)] {
                    let mut bytes = body.to_vec();
                    bytes[i] = m;
                    let bytes = Bytes::from(bytes);
                    let Ok(scan) = fetch_response(&bytes, version) else { continue };
                    let decoded = FetchResponse::decode(&mut bytes.clone(), version)
                        .unwrap_or_else(|e| panic!("v{version} byte {i} = {m:#x}: walked but not decoded: {e}"));
                    assert_agrees(&scan, &bytes, &decoded, version);
                }
            }
        }
    }

    /// The end of each partition in a whole body, by walking growing prefixes' `walked`.
    fn partition_ends(body: &[u8], version: i16) -> Vec<usize> {
        let mut ends = Vec::new();
        for cut in 0..=body.len() {
            let p = fetch_response_prefix(&body[..cut], body.len(), version).unwrap();
            if p.scan.partitions.len() > ends.len() {
                ends.push(p.walked);
            }
        }
        ends
    }

    /// Every prefix of a valid body walks as far as it goes: not refused, the partitions it
    /// completed are the whole walk's first ones with the same records ranges, each counted
    /// once its last byte (tagged fields included) is in and not before, and the whole body
    /// gives `fetch_response`'s result.
    #[test]
    fn every_prefix_of_a_body_walks_as_far_as_it_goes() {
        for version in MIN_VERSION..=MAX_VERSION {
            for endpoints in [true, false] {
                let body = encode(&rich(version, endpoints), version);
                let whole = fetch_response(&body, version).unwrap();
                let ends = partition_ends(&body, version);
                assert_eq!(ends.len(), whole.partitions.len(), "v{version}");
                for cut in 0..=body.len() {
                    let p = fetch_response_prefix(&body[..cut], body.len(), version).unwrap();
                    assert!(!p.refused, "v{version}: the prefix of {cut} bytes was refused");
                    let done = ends.iter().filter(|e| **e <= cut).count();
                    assert_eq!(p.scan.partitions, whole.partitions[..done], "v{version} cut {cut}");
                    assert_eq!(p.walked, if done == 0 { 0 } else { ends[done - 1] }, "v{version} cut {cut}");
                    assert!(p.scan.partitions.iter().all(|q| q.records.as_ref().is_none_or(|r| r.end <= p.walked)));
                    for t in &p.scan.topics {
                        assert_eq!(
                            whole.topics.iter().find(|w| w.topic == t.topic).map(|w| w.partitions.start),
                            Some(t.partitions.start)
                        );
                    }
                    // The partition in progress: exactly when the cut falls inside the next
                    // partition's (non-empty) records.
                    let inside = whole
                        .partitions
                        .get(done)
                        .and_then(|q| q.records.clone())
                        .filter(|r| r.start <= cut && cut < r.end);
                    assert_eq!(p.partial.as_ref().map(|q| q.records.clone()), inside, "v{version} cut {cut}");
                    if let Some(q) = &p.partial {
                        assert_eq!(q.partition_index, whole.partitions[done].partition_index);
                        assert_eq!(q.error_code, whole.partitions[done].error_code);
                    }
                    if cut < body.len() {
                        assert!(!p.scan.node_endpoints);
                    } else {
                        assert_eq!(p.scan, whole, "v{version}: the whole body");
                    }
                }
            }
        }
    }

    /// A prefix that holds an impossible length or count is refused, not waited on: the walk
    /// stops before it, and `walked` never passes a byte the whole walk would refuse.
    #[test]
    fn a_malformed_prefix_is_refused() {
        // v16: throttle, error code, session id, then `responses` with 2^32 - 2 entries, in a
        // body announced as 1 MiB long.
        let mut body = vec![0u8; 10];
        body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        let p = fetch_response_prefix(&body, 1 << 20, 16).unwrap();
        assert!(p.refused && p.walked == 0 && p.scan.partitions.is_empty());
        // A records length beyond the announced total.
        let version = 16;
        let good = encode(&rich(version, false), version);
        let ends = partition_ends(&good, version);
        let whole = fetch_response(&good, version).unwrap();
        let records = whole.partitions.iter().find_map(|q| q.records.clone().filter(|r| !r.is_empty())).unwrap();
        let mut bad = good.to_vec();
        // The compact length varint sits right before the records: make it claim 2^21 bytes.
        let at = records.start - 1;
        assert!(bad[at] < 0x80, "a one-byte length in this fixture");
        bad.splice(at..at + 1, [0x80, 0x80, 0x80, 0x01]);
        let cut = at + 10;
        let p = fetch_response_prefix(&bad[..cut], bad.len(), version).unwrap();
        assert!(p.refused, "a records length past the end of the body");
        assert!(p.walked <= at && ends.iter().filter(|e| **e <= at).count() == p.scan.partitions.len());
        // Other errors than running out of bytes are refusals too.
        assert!(fetch_response_prefix(&good, good.len(), 3).is_err());
        let mut utf8 = encode(&rich(4, false), 4).to_vec();
        let name_at = 4 + 4 + 2; // throttle, topic count, name length
        utf8[name_at] = 0xff;
        assert!(fetch_response_prefix(&utf8, utf8.len() + 100, 4).unwrap().refused);
    }

    /// Counts far beyond the bytes left are refused before anything is reserved.
    #[test]
    fn huge_counts_are_errors() {
        // v16: throttle, error code, session id, then `responses` with 2^32 - 2 entries.
        let mut body = vec![0u8; 10];
        body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(matches!(fetch_response(&body, 16), Err(ScanError::Wire(WireError::CountExceedsRemaining { .. }))));
        // v4: throttle, then i32::MAX topics.
        let mut body = vec![0u8; 4];
        body.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(fetch_response(&body, 4).is_err());
        // v16, no topics, then a tagged-field count of 2^31.
        let body = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x08];
        assert!(fetch_response(&body, 16).is_err());
    }

    /// kafka-protocol refuses tag 0 at the top level before v16, and so does the walk; a
    /// partition's known tagged field that does not fill its size is refused.
    #[test]
    fn tagged_fields_must_match_the_decoder() {
        // v12, no topics, one top-level tagged field 0 of size 1 holding an empty array.
        let body = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1];
        assert!(fetch_response(&body, 12).is_err());
        assert!(FetchResponse::decode(&mut Bytes::copy_from_slice(&body), 12).is_err());
        // The same at v16 is an empty node_endpoints.
        let scan = fetch_response(&body, 16).unwrap();
        assert!(!scan.node_endpoints);
        // diverging_epoch announced with one byte more than it holds.
        let mut resp = rich(12, false);
        resp.responses.truncate(1);
        resp.responses[0].partitions.truncate(1);
        let p = &mut resp.responses[0].partitions[0];
        p.current_leader = Default::default();
        p.snapshot_id = Default::default();
        p.unknown_tagged_fields.clear();
        resp.unknown_tagged_fields.clear();
        let body = encode(&resp, 12).to_vec();
        // ... records, then the partition's tags: count 1, tag 0, size 13 (12 + 1 tag byte).
        let at = body.windows(3).rposition(|w| w == [1, 0, 13]).expect("diverging_epoch tag");
        let mut bad = body.clone();
        bad[at + 2] = 14;
        bad.insert(at + 3 + 13, 0);
        assert!(fetch_response(&bad, 12).is_err());
    }
}
