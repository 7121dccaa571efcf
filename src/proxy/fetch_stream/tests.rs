//! What a [`FetchStream`] lets go while a response arrives: a prefix of the broker's frame
//! ending at a checked partition, never its last byte, nothing from a partition with a
//! placeholder or a topic the mirror state edits; and the client addresses it holds back.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::FetchResponse;
use kafka_protocol::protocol::{Decodable, Encodable};

use super::*;
use crate::mirror::offset_maps::OffsetMaps;
use crate::proxy::fetch_pass::MirrorTopics;
use crate::proxy::present::ReadCaps;
use crate::wire::batch::OwnBatch;
use crate::wire::frame::length_prefix;

const CORRELATION_ID: i32 = 77;
const T_ID: [u8; 16] = [9; 16];
const U_ID: [u8; 16] = [4; 16];

/// Topic `t` is a mirror topic whose source stamps LogAppendTime; `u` is not.
struct Topics;

impl MirrorTopics for Topics {
    fn topic_name(&self, topic_id: &[u8; 16]) -> Option<String> {
        match *topic_id {
            T_ID => Some("t".into()),
            U_ID => Some("u".into()),
            _ => None,
        }
    }
    fn source_log_append_time(&self, topic: &str) -> bool {
        topic == "t"
    }
}

fn ctx(lat: bool) -> FetchContext<'static> {
    FetchContext {
        caps: ReadCaps::new(),
        maps: Arc::new(OffsetMaps::default()),
        any_log_append_time: lat,
        topics: &Topics,
    }
}

/// Uncompressed data batches of `count` records of `value_len` bytes each from `base`.
fn data(base: i64, count: i64, value_len: usize) -> Bytes {
    crate::proxy::fetch_pass::tests::data_batch_of(base, count, Bytes::from(vec![b'v'; value_len]))
}

fn placeholder(base: i64) -> Bytes {
    let own =
        OwnBatch { base_offset: base, count: 2, timestamp: 5, producer_id: 9, producer_epoch: 0, base_sequence: 0 };
    crate::wire::batch::placeholder_batch(&own, 1, base)
}

/// A v16 Fetch response frame (length prefix, header, body) of `topics`: (topic id,
/// partitions' records), each partition about 100 KiB of data unless given.
fn frame(topics: &[([u8; 16], Vec<Bytes>)]) -> (Vec<u8>, usize) {
    frame_at(16, topics)
}

/// [`frame`] at `version` (topics named `u` and `t` by id before v13).
fn frame_at(version: i16, topics: &[([u8; 16], Vec<Bytes>)]) -> (Vec<u8>, usize) {
    let resp = FetchResponse::default().with_responses(
        topics
            .iter()
            .map(|(id, parts)| {
                let mut t = FetchableTopicResponse::default().with_partitions(
                    parts
                        .iter()
                        .enumerate()
                        .map(|(p, r)| {
                            PartitionData::default()
                                .with_partition_index(p as i32)
                                .with_high_watermark(1000)
                                .with_last_stable_offset(1000)
                                .with_records(Some(r.clone()))
                        })
                        .collect(),
                );
                if version >= 13 {
                    t.topic_id = uuid::Uuid::from_bytes(*id);
                } else {
                    let name = if *id == T_ID { "t" } else { "u" };
                    t.topic =
                        kafka_protocol::messages::TopicName(kafka_protocol::protocol::StrBytes::from_static_str(name));
                }
                t
            })
            .collect(),
    );
    let mut body = BytesMut::new();
    body.put_i32(CORRELATION_ID);
    if version >= 12 {
        body.put_u8(0); // response header v1: no tagged fields
    }
    resp.encode(&mut body, version).unwrap();
    let mut wire = length_prefix(body.len()).to_vec();
    wire.extend_from_slice(&body);
    (wire, body.len())
}

/// `wire` (a v16 frame of [`frame`]) with its response changed by `edit`: the new frame and
/// its length after the prefix.
fn edited(wire: &[u8], edit: impl FnOnce(&mut FetchResponse)) -> (Vec<u8>, usize) {
    let mut resp = FetchResponse::decode(&mut Bytes::copy_from_slice(&wire[9..]), 16).unwrap();
    edit(&mut resp);
    let mut body = BytesMut::new();
    body.put_i32(CORRELATION_ID);
    body.put_u8(0);
    resp.encode(&mut body, 16).unwrap();
    let mut out = length_prefix(body.len()).to_vec();
    out.extend_from_slice(&body);
    (out, body.len())
}

fn endpoint(node: i32, host: &'static str) -> kafka_protocol::messages::fetch_response::NodeEndpoint {
    kafka_protocol::messages::fetch_response::NodeEndpoint::default()
        .with_node_id(kafka_protocol::messages::BrokerId(node))
        .with_host(kafka_protocol::protocol::StrBytes::from_static_str(host))
        .with_port(9092)
}

/// Feeds `wire` to a stream `chunk` bytes at a time; the ranges it let go.
fn feed(
    wire: &[u8],
    frame_len: usize,
    chunk: usize,
    ctx: Option<FetchContext<'_>>,
) -> (Vec<std::ops::Range<usize>>, Option<&'static str>) {
    let mut s = FetchStream::start(DEFAULT_STREAM_MIN_BYTES, 16, 1, CORRELATION_ID, frame_len, ctx)
        .expect("large enough to stream");
    let mut sent = Vec::new();
    let mut have = 0;
    while have < wire.len() {
        have = (have + chunk).min(wire.len());
        let r = s.ready(&wire[..have]);
        if !r.is_empty() {
            assert_eq!(r.start, s.sent(), "ranges follow each other");
            s.wrote(r.end);
            sent.push(r);
        }
    }
    (sent, s.stopped())
}

fn hundred_k(base: i64) -> Bytes {
    data(base, 100, 1000)
}

#[test]
fn a_large_response_goes_out_partition_by_partition_but_its_last_byte() {
    let (wire, len) = frame(&[(U_ID, vec![hundred_k(0), hundred_k(0), hundred_k(0)]), (T_ID, vec![hundred_k(0)])]);
    for chunk in [1000, 64 * 1024, 300_000, wire.len()] {
        let (sent, stopped) = feed(&wire, len, chunk, None);
        assert_eq!(stopped, None);
        let end = sent.last().map_or(0, |r| r.end);
        assert!(end < wire.len(), "chunk {chunk}: the last byte was let go");
        // The rest held back is the last partition's tail at most: its tagged fields, the
        // topic's and the response's.
        assert!(wire.len() - end <= 8, "chunk {chunk}: {} bytes held at the end", wire.len() - end);
        if chunk < 300_000 {
            assert!(sent.len() >= 3, "chunk {chunk}: sent in {} pieces", sent.len());
        }
        // Every piece ends where a batch of a partition's records or a partition does, or
        // inside a batch after its header (which cleared it: no placeholder).
        let body = &wire[9..];
        assert_eq!(body.len(), len - 5, "correlation id and header tags before the body");
        let whole = fetch_scan::fetch_response(body, 16).unwrap();
        let mut ends = Vec::new();
        let mut inside = Vec::new();
        for p in &whole.partitions {
            let r = p.records.clone().unwrap();
            ends.push(r.end + 1); // after its tagged fields
            let mut at = r.start;
            for b in crate::wire::batch::BatchIter::new(Bytes::copy_from_slice(&body[r.clone()])) {
                let n = b.unwrap().bytes().len();
                inside.push(at + crate::wire::batch::HEADER_LEN..at + n);
                at += n;
                ends.push(at);
            }
        }
        for r in &sent[..sent.len() - 1] {
            let e = r.end - 9;
            assert!(
                ends.contains(&e) || inside.iter().any(|b| b.contains(&e)),
                "chunk {chunk}: a piece ends at body byte {e}, inside a batch's header"
            );
        }
    }
}

/// Before v12 the body ends with the last partition's records: the walk reaches the end of
/// the frame, and its last byte still waits.
#[test]
fn the_last_byte_waits_when_the_last_partition_ends_the_frame() {
    let (wire, len) = frame_at(11, &[(U_ID, vec![hundred_k(0), hundred_k(0), hundred_k(0)])]);
    let mut s = FetchStream::start(DEFAULT_STREAM_MIN_BYTES, 11, 0, CORRELATION_ID, len, None).unwrap();
    let r = s.ready(&wire);
    assert_eq!(r, 0..wire.len() - 1);
    s.wrote(r.end);
    assert!(s.ready(&wire).is_empty());
    assert_eq!(s.stopped(), None);
}

#[test]
fn nothing_goes_from_a_partition_with_a_placeholder_on() {
    let with_placeholder = Bytes::from([placeholder(0), hundred_k(2)].concat());
    // In the first partition: nothing at all goes.
    let (wire, len) = frame(&[(U_ID, vec![with_placeholder.clone(), hundred_k(0), hundred_k(0)])]);
    let (sent, stopped) = feed(&wire, len, 16 * 1024, None);
    assert_eq!((sent.len(), stopped), (0, Some("placeholder batch")));
    // In the third: the first two partitions go, then nothing.
    let (wire, len) = frame(&[(U_ID, vec![hundred_k(0), hundred_k(0), with_placeholder])]);
    let body = &wire[9..];
    let whole = fetch_scan::fetch_response(body, 16).unwrap();
    let second_end = whole.partitions[1].records.as_ref().unwrap().end + 9;
    let third_start = whole.partitions[2].records.as_ref().unwrap().start + 9;
    let (sent, stopped) = feed(&wire, len, 16 * 1024, None);
    assert_eq!(stopped, Some("placeholder batch"));
    // Some of the first two partitions may have gone, nothing of the third's records.
    let end = sent.last().map_or(0, |r| r.end);
    assert!(end <= second_end + 1 && end < third_start, "sent up to {end}, partition 2 ends at {second_end}");
    // A placeholder after whole batches of the partition: those batches may go, not it.
    let late = Bytes::from([hundred_k(0), placeholder(100)].concat());
    let (wire, len) = frame(&[(U_ID, vec![hundred_k(0), hundred_k(0), late.clone()])]);
    let whole = fetch_scan::fetch_response(&wire[9..], 16).unwrap();
    let second = whole.partitions[2].records.clone().unwrap();
    let placeholder_at = 9 + second.start + hundred_k(0).len();
    let (sent, stopped) = feed(&wire, len, 4096, None);
    assert_eq!(stopped, Some("placeholder batch"));
    let end = sent.last().unwrap().end;
    assert!(
        end > 9 + second.start && end <= placeholder_at,
        "sent up to {end}, the placeholder starts at {placeholder_at}"
    );
}

#[test]
fn nothing_goes_from_a_topic_the_mirror_state_edits() {
    // `t`'s source stamps LogAppendTime: its batches get their timestamp type back.
    let (wire, len) = frame(&[(U_ID, vec![hundred_k(0), hundred_k(0)]), (T_ID, vec![hundred_k(0), hundred_k(0)])]);
    let body = &wire[9..];
    let whole = fetch_scan::fetch_response(body, 16).unwrap();
    let t_start = whole.partitions[2].records.as_ref().unwrap().start + 9;
    let (sent, stopped) = feed(&wire, len, 32 * 1024, Some(ctx(true)));
    assert_eq!(stopped, Some("mirror topic edit"));
    assert!(sent.last().unwrap().end < t_start);
    // Without that state the whole response goes.
    let (sent, stopped) = feed(&wire, len, 32 * 1024, Some(ctx(false)));
    assert_eq!(stopped, None);
    assert!(sent.last().unwrap().end > t_start);
    // A read cap on `t` stops it too.
    let mut capped = ctx(false);
    capped.caps = HashMap::from([(("t".to_string(), 1), 5)]);
    assert_eq!(feed(&wire, len, 32 * 1024, Some(capped)).1, Some("mirror topic edit"));
}

#[test]
fn small_responses_other_correlation_ids_and_old_versions_do_not_stream() {
    let (wire, len) = frame(&[(U_ID, vec![data(0, 10, 100)])]);
    assert!(len < DEFAULT_STREAM_MIN_BYTES);
    assert!(FetchStream::start(DEFAULT_STREAM_MIN_BYTES, 16, 1, CORRELATION_ID, len, None).is_none());
    assert!(FetchStream::start(DEFAULT_STREAM_MIN_BYTES, 3, 0, CORRELATION_ID, 1 << 20, None).is_none());
    assert!(FetchStream::start(0, 16, 1, CORRELATION_ID, 1 << 20, None).is_none(), "0: off");
    assert!(FetchStream::start(1 << 20, 16, 1, CORRELATION_ID, (1 << 20) - 1, None).is_none());
    let (wire2, len2) = frame(&[(U_ID, vec![hundred_k(0), hundred_k(0), hundred_k(0)])]);
    let mut s = FetchStream::start(DEFAULT_STREAM_MIN_BYTES, 16, 1, CORRELATION_ID + 1, len2, None).unwrap();
    assert!(s.ready(&wire2).is_empty());
    assert_eq!(s.stopped(), Some("correlation id"));
    // Bytes of the next frame after this one are never let go.
    let mut two = wire2.clone();
    two.extend_from_slice(&wire);
    let mut s = FetchStream::start(DEFAULT_STREAM_MIN_BYTES, 16, 1, CORRELATION_ID, len2, None).unwrap();
    // Up to the end of the last partition: the topic's and the response's tagged fields wait.
    assert_eq!(s.ready(&two).end, wire2.len() - 2);
}

#[test]
fn a_malformed_body_stops_the_stream() {
    let (mut wire, len) = frame(&[(U_ID, vec![hundred_k(0), hundred_k(0), hundred_k(0)])]);
    // The topic count (after throttle, error code, session id) made huge.
    let at = 4 + 5 + 4 + 2 + 4;
    wire[at] = 0xff;
    wire.splice(at + 1..at + 1, [0xff, 0xff, 0x0f]);
    let mut s = FetchStream::start(DEFAULT_STREAM_MIN_BYTES, 16, 1, CORRELATION_ID, len + 3, None).unwrap();
    assert!(s.ready(&wire).is_empty());
    assert_eq!(s.stopped(), Some("refused by the walk"));
}

#[test]
fn denials_hold_an_address_and_stay_bounded() {
    let d = Denials::default();
    let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    assert!(!d.denied(a));
    d.deny(a);
    assert!(d.denied(a));
    assert!(!d.denied(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))));
    for i in 0..(MAX_DENIALS as u32 + 10) {
        d.deny(IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + i)));
    }
    assert!(d.until.lock().unwrap().len() <= MAX_DENIALS);
    // The newest are kept.
    assert!(d.denied(IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + MAX_DENIALS as u32 + 9))));
}

/// A partition answering NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH (v16+: the broker then
/// adds `node_endpoints`, which mirrorgate rewrites) stops the stream before it goes, and so
/// do `node_endpoints` themselves when the whole body came in one read.
#[test]
fn a_leader_change_stops_the_stream() {
    use kafka_protocol::messages::fetch_response::LeaderIdAndEpoch;
    use kafka_protocol::messages::BrokerId;
    for error in [6i16, 74] {
        let (wire, _) = frame(&[(U_ID, vec![hundred_k(0), hundred_k(0), hundred_k(0), hundred_k(0)])]);
        // The same response with partition 3 moved: error, new leader, its endpoint.
        let (moved, moved_len) = edited(&wire, |resp| {
            let p = &mut resp.responses[0].partitions[3];
            p.error_code = error;
            p.records = Some(Bytes::new());
            p.current_leader = LeaderIdAndEpoch::default().with_leader_id(BrokerId(2)).with_leader_epoch(5);
            resp.node_endpoints = vec![endpoint(2, "broker-2.internal")];
        });
        let (sent, stopped) = feed(&moved, moved_len, 16 * 1024, None);
        assert_eq!(stopped, Some("leader change"), "error {error}");
        let whole = fetch_scan::fetch_response(&moved[9..], 16).unwrap();
        let third_end = whole.partitions[2].records.as_ref().unwrap().end + 9;
        // Whatever went before it, never a byte of the moved partition.
        let moved_start = whole.partitions[3].records.as_ref().unwrap().start + 9;
        assert!(sent.last().map_or(0, |r| r.end) <= third_end + 1 && third_end < moved_start);
        // All at once: nothing goes.
        let mut s = FetchStream::start(DEFAULT_STREAM_MIN_BYTES, 16, 1, CORRELATION_ID, moved_len, None).unwrap();
        assert!(s.ready(&moved).is_empty());
        assert_eq!(s.stopped(), Some("leader change"));
    }
}

/// `node_endpoints` without a partition error (not what Kafka sends, but the edit would be
/// made): the stream stops once the body is complete.
#[test]
fn node_endpoints_stop_the_stream() {
    let (wire, _) = frame(&[(U_ID, vec![hundred_k(0), hundred_k(0), hundred_k(0)])]);
    let (with_endpoints, len) = edited(&wire, |resp| resp.node_endpoints = vec![endpoint(1, "broker-1.internal")]);
    let mut s = FetchStream::start(DEFAULT_STREAM_MIN_BYTES, 16, 1, CORRELATION_ID, len, None).unwrap();
    assert!(s.ready(&with_endpoints).is_empty());
    assert_eq!(s.stopped(), Some("node_endpoints"));
}

/// Inside the partition still arriving, nothing goes past a batch of another message format
/// (or an impossible length) before the partition is complete; whole, it goes as
/// `has_placeholder` sees it (the walk stops there, no placeholder).
#[test]
fn nothing_goes_past_a_strange_batch_before_its_partition_is_complete() {
    let good = hundred_k(0);
    let mut odd = data(100, 5, 1000).to_vec();
    odd[16] = 1; // magic 1
    let records = Bytes::from([good.clone(), Bytes::from(odd), hundred_k(105)].concat());
    let (wire, len) = frame(&[(U_ID, vec![hundred_k(0), hundred_k(0), records])]);
    let whole = fetch_scan::fetch_response(&wire[9..], 16).unwrap();
    let third = whole.partitions[2].records.clone().unwrap();
    let odd_at = 9 + third.start + good.len();
    let mut s = FetchStream::start(DEFAULT_STREAM_MIN_BYTES, 16, 1, CORRELATION_ID, len, None).unwrap();
    let mut have = 0;
    while have < wire.len() - 10 {
        have = (have + 4096).min(wire.len() - 10);
        let r = s.ready(&wire[..have]);
        if !r.is_empty() {
            assert!(r.end <= odd_at, "sent up to {} past the strange batch at {odd_at}", r.end);
            s.wrote(r.end);
        }
    }
    assert!(s.sent() > 9 + third.start, "the whole batches before it went");
    let r = s.ready(&wire);
    assert_eq!((r.end, s.stopped()), (wire.len() - 2, None), "complete: up to the tagged fields");
}

/// Feeds `wire` as a connection with zero-copy does: `chunk` bytes a read, and whenever the
/// stream allows it, the rest of a batch moved unseen (zeros in the stream's view, as the
/// connection puts them). The view at the end, the ranges sent from it, the ranges moved
/// unseen, and why the stream stopped.
#[allow(clippy::type_complexity)]
fn feed_splicing(
    wire: &[u8],
    version: i16,
    frame_len: usize,
    chunk: usize,
    ctx: Option<FetchContext<'_>>,
) -> (Vec<u8>, Vec<std::ops::Range<usize>>, Vec<std::ops::Range<usize>>, Option<&'static str>) {
    feed_splicing_until(wire, version, frame_len, chunk, ctx, usize::MAX)
}

/// [`feed_splicing`], where the splice after `fails_after` good ones fails before taking a
/// byte, and the connection copies the rest instead (`set_splicing(false)`), as `responses()`
/// does.
#[allow(clippy::type_complexity)]
fn feed_splicing_until(
    wire: &[u8],
    version: i16,
    frame_len: usize,
    chunk: usize,
    ctx: Option<FetchContext<'_>>,
    fails_after: usize,
) -> (Vec<u8>, Vec<std::ops::Range<usize>>, Vec<std::ops::Range<usize>>, Option<&'static str>) {
    let header_version = if version >= 12 { 1 } else { 0 };
    let mut s = FetchStream::start(DEFAULT_STREAM_MIN_BYTES, version, header_version, CORRELATION_ID, frame_len, ctx)
        .expect("large enough to stream")
        .splicing(true);
    let (mut view, mut sent, mut spliced) = (Vec::new(), Vec::new(), Vec::new());
    loop {
        let r = s.ready(&view);
        if !r.is_empty() {
            assert_eq!(r.start, s.sent(), "ranges follow each other");
            s.wrote(r.end);
            sent.push(r);
        }
        let n = s.splice_len(view.len());
        if n >= crate::proxy::splice::MIN_SPLICE_BYTES && spliced.len() == fails_after {
            s.set_splicing(false);
            assert_eq!(s.splice_len(view.len()), 0, "nothing to splice once off");
        } else if n >= crate::proxy::splice::MIN_SPLICE_BYTES {
            spliced.push(view.len()..view.len() + n);
            view.resize(view.len() + n, 0);
            s.spliced(view.len());
            continue;
        }
        if view.len() == wire.len() {
            break;
        }
        // Short reads while the stream wants them, as the connection makes them.
        let take =
            chunk.min(if s.wants_short_reads() { SHORT_READ_BYTES } else { usize::MAX }).min(wire.len() - view.len());
        view.extend_from_slice(&wire[view.len()..view.len() + take]);
    }
    (view, sent, spliced, s.stopped())
}

/// `batch` as written by an idempotent producer (producer id 7): its first key decides
/// whether its first bytes clear it. (The CRC is not what is looked at here.)
fn idempotent(batch: Bytes) -> Bytes {
    let mut v = batch.to_vec();
    v[43..51].copy_from_slice(&7i64.to_be_bytes());
    Bytes::from(v)
}

/// A data batch of one record of `value_len` bytes from an idempotent producer whose key
/// starts with the placeholder magic (a placeholder candidate until all of it is in).
fn magic_keyed(base: i64, value_len: usize) -> Bytes {
    use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let mut key = crate::wire::batch::PLACEHOLDER_MAGIC.to_vec();
    key.extend_from_slice(&[1; 16]);
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 1,
        producer_id: 7,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset: base,
        sequence: 0,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(vec![b'v'; value_len])),
        headers: Default::default(),
    };
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        &[record],
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    out.freeze()
}

/// The batches of `records` as (start, length) in the frame, given where `records` start.
fn batch_spans(records: &[u8], at: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    for b in crate::wire::batch::BatchIter::new(Bytes::copy_from_slice(records)) {
        let n = b.unwrap().bytes().len();
        out.push((at + pos, n));
        pos += n;
    }
    out
}

/// Every range moved unseen lies inside one batch of `wire`, after the first bytes that
/// cleared it, and that batch is no placeholder; the final look over the view (zeros in those
/// ranges) decides as it would over `wire`.
fn check_unseen(wire: &[u8], view: &[u8], version: i16, spliced: &[std::ops::Range<usize>], what: &str) {
    let body_at = LENGTH_PREFIX_BYTES + 4 + usize::from(version >= 12);
    let whole = fetch_scan::fetch_response(&wire[body_at..], version).unwrap();
    let spans: Vec<(usize, usize)> = whole
        .partitions
        .iter()
        .filter_map(|p| p.records.clone())
        .flat_map(|r| batch_spans(&wire[body_at + r.start..body_at + r.end], body_at + r.start))
        .collect();
    for r in spliced {
        let (start, len) = *spans
            .iter()
            .find(|(start, len)| r.start > *start && r.end <= start + len)
            .unwrap_or_else(|| panic!("{what}: {r:?} is not inside one batch"));
        let batch = &wire[start..start + len];
        assert!(!crate::wire::batch::is_placeholder_batch(batch), "{what}: a placeholder moved unseen");
        assert_eq!(
            crate::wire::batch::cleared_by_prefix(&batch[..r.start - start]),
            Some(len),
            "{what}: {r:?} moved before its batch's first bytes cleared it"
        );
    }
    let scan = |b: &[u8]| {
        let s = fetch_scan::fetch_response(&b[body_at..], version).expect("walks");
        crate::proxy::fetch_pass::needs_edit(&s, &b[body_at..], None)
    };
    assert_eq!(scan(view), scan(wire), "{what}: the final look over the view differs");
}

/// Batches of 200 KB: all but their first bytes move unseen, the response stays whole for the
/// final look (no edit due on the view with zeros in place), and its last byte waits.
#[test]
fn large_batches_cleared_by_their_first_bytes_move_unseen_but_the_last_byte() {
    let big = |base| Bytes::from([data(base, 1, 200_000), data(base + 1, 1, 200_000)].concat());
    for version in [11i16, 16] {
        let (wire, len) = frame_at(version, &[(U_ID, vec![big(0), big(0), big(0)])]);
        for chunk in [4096, 64 * 1024, 1 << 20] {
            let (view, sent, spliced, stopped) = feed_splicing(&wire, version, len, chunk, None);
            assert_eq!(stopped, None, "v{version} chunk {chunk}");
            let moved: usize = spliced.iter().map(|r| r.len()).sum();
            let end = sent.iter().chain(&spliced).map(|r| r.end).max().unwrap();
            assert!(end < wire.len(), "v{version} chunk {chunk}: the last byte went");
            // Every range follows the last from the first byte on: nothing sent twice, nothing
            // skipped; all but the trailing tagged fields at most.
            let mut all: Vec<_> = sent.iter().chain(&spliced).cloned().collect();
            all.sort_by_key(|r| r.start);
            assert_eq!(all[0].start, 0, "v{version} chunk {chunk}");
            assert!(all.windows(2).all(|w| w[0].end == w[1].start), "v{version} chunk {chunk}: gaps or overlaps");
            assert!(end + 8 >= wire.len(), "v{version} chunk {chunk}: sent up to {end} of {}", wire.len());
            // (Reads are short while batches are large, whatever `chunk` is.)
            assert!(moved > wire.len() * 9 / 10, "v{version} chunk {chunk}: only {moved} of {} unseen", wire.len());
            check_unseen(&wire, &view, version, &spliced, &format!("v{version} chunk {chunk}"));
        }
    }
}

/// Batches of an idempotent producer clear by their first key (over several reads when they
/// come in small pieces); a batch whose first key starts with the placeholder magic is a
/// candidate: nothing of it moves unseen, and its partition goes once complete.
#[test]
fn idempotent_batches_clear_by_their_first_key_and_magic_keys_wait() {
    let idem = |base| idempotent(data(base, 1, 200_000));
    let records = Bytes::from([idem(0), magic_keyed(1, 200_000), idem(2)].concat());
    let (wire, len) = frame(&[(U_ID, vec![Bytes::from([idem(0), idem(1)].concat()), records])]);
    let body_at = 9;
    let whole = fetch_scan::fetch_response(&wire[body_at..], 16).unwrap();
    let second = whole.partitions[1].records.clone().unwrap();
    let magic_at = body_at + second.start + idem(0).len();
    let magic_len = magic_keyed(1, 200_000).len();
    for chunk in [7, 100, 4096, 1 << 20] {
        let what = format!("chunk {chunk}");
        let (view, sent, spliced, stopped) = feed_splicing(&wire, 16, len, chunk, None);
        assert_eq!(stopped, None, "{what}");
        assert!(!spliced.is_empty(), "{what}: idempotent batches moved unseen");
        assert!(
            spliced.iter().all(|r| r.end <= magic_at || r.start >= magic_at + magic_len),
            "{what}: part of the magic-keyed batch moved unseen: {spliced:?}"
        );
        // After the candidate, reads are no longer short: a read of all that arrived takes the
        // next batch whole; smaller ones leave its rest to move unseen.
        assert_eq!(
            spliced.iter().any(|r| r.start >= magic_at + magic_len),
            chunk < 1 << 20,
            "{what}: the batch after the magic-keyed one: {spliced:?}"
        );
        // Complete: all but the trailing tagged fields went.
        let end = sent.iter().chain(&spliced).map(|r| r.end).max().unwrap();
        assert!(end < wire.len() && end + 8 >= wire.len(), "{what}: sent up to {end} of {}", wire.len());
        check_unseen(&wire, &view, 16, &spliced, &what);
    }
}

/// A placeholder after large batches: the large batches move unseen, nothing of the
/// placeholder goes, and the stream stops there.
#[test]
fn nothing_of_a_placeholder_moves_unseen() {
    let records = Bytes::from([data(0, 1, 200_000), placeholder(1), data(3, 1, 200_000)].concat());
    let (wire, len) = frame(&[(U_ID, vec![data(0, 1, 300_000), records])]);
    let whole = fetch_scan::fetch_response(&wire[9..], 16).unwrap();
    let second = whole.partitions[1].records.clone().unwrap();
    let placeholder_at = 9 + second.start + data(0, 1, 200_000).len();
    for chunk in [100, 4096, 1 << 20] {
        let (view, sent, spliced, stopped) = feed_splicing(&wire, 16, len, chunk, None);
        assert_eq!(stopped, Some("placeholder batch"), "chunk {chunk}");
        let end = sent.iter().chain(&spliced).map(|r| r.end).max().unwrap_or(0);
        assert!(end <= placeholder_at, "chunk {chunk}: sent up to {end}, the placeholder starts at {placeholder_at}");
        // (Reads are short while batches are large, whatever `chunk` is.)
        assert!(!spliced.is_empty(), "chunk {chunk}: the large batches before it moved unseen");
        check_unseen(&wire, &view, 16, &spliced, &format!("chunk {chunk}"));
    }
}

/// A splice that fails before taking a byte, at any point of a response: the connection copies
/// the rest, and the response still goes out whole, once, in order.
#[test]
fn a_failed_splice_falls_back_to_copying_the_rest() {
    let big = |base| Bytes::from([data(base, 1, 200_000), data(base + 1, 1, 200_000)].concat());
    let (wire, len) = frame(&[(U_ID, vec![big(0), big(0), big(0)])]);
    let all_spliced = feed_splicing(&wire, 16, len, 4096, None).2.len();
    assert!(all_spliced >= 6, "{all_spliced} splices");
    for fails_after in 0..all_spliced {
        let what = format!("failing after {fails_after} splices");
        let (view, sent, spliced, stopped) = feed_splicing_until(&wire, 16, len, 4096, None, fails_after);
        assert_eq!((spliced.len(), stopped), (fails_after, None), "{what}");
        let mut all: Vec<_> = sent.iter().chain(&spliced).cloned().collect();
        all.sort_by_key(|r| r.start);
        assert_eq!(all[0].start, 0, "{what}");
        assert!(all.windows(2).all(|w| w[0].end == w[1].start), "{what}: gaps or overlaps");
        let end = all.last().unwrap().end;
        assert!(end < wire.len() && end + 8 >= wire.len(), "{what}: sent up to {end} of {}", wire.len());
        // What went from the view after the failure is the broker's bytes.
        let copied_from = spliced.last().map_or(0, |r| r.end);
        assert_eq!(view[copied_from..], wire[copied_from..], "{what}");
        check_unseen(&wire, &view, 16, &spliced, &what);
    }
}
