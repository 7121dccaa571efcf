//! The fast path against the edits: for each edit kind, a response that needs it is decoded
//! and edited; a response that needs none goes back as the broker's bytes; and over a grid of
//! responses and mirror states, the walk's "no edit" never hides an edit the decode would make.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, NodeEndpoint, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchResponse, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

use super::*;
use crate::mirror::control::ControlState;
use crate::mirror::model::{OffsetSegment, PartitionStateRecord};
use crate::wire::batch::{BatchIter, OwnBatch};
use crate::wire::mirror::MirrorPartitionState;

/// Destination topic id of mirror topic `t`.
const T_ID: [u8; 16] = [9; 16];
/// Destination topic id of the ordinary topic `u`.
const U_ID: [u8; 16] = [4; 16];

/// Topic `t` (id [`T_ID`]) is a mirror topic; `lat`: its source stamps LogAppendTime.
struct Topics {
    lat: bool,
}

impl MirrorTopics for Topics {
    fn topic_name(&self, topic_id: &[u8; 16]) -> Option<String> {
        match *topic_id {
            T_ID => Some("t".into()),
            U_ID => Some("u".into()),
            _ => None,
        }
    }
    fn source_log_append_time(&self, topic: &str) -> bool {
        self.lat && topic == "t"
    }
}

/// Offset maps with `t`-0 shifted (source 3000.. at destination 0..).
fn shifted() -> Arc<OffsetMaps> {
    let mut state = ControlState::default();
    let mut r = PartitionStateRecord::new("m", "t", 0, MirrorPartitionState::Mirroring);
    r.segments = vec![OffsetSegment { source_start: 3000, destination_start: 0 }];
    r.destination_topic_id = Some(base64_uuid(&T_ID));
    state.partitions.insert(("t".into(), 0), r);
    Arc::new(OffsetMaps::build(&state))
}

#[derive(Clone, Copy, Debug)]
enum State {
    Nothing,
    LogAppendTime,
    Shifted,
    Capped,
}

fn ctx(topics: &Topics, state: State) -> FetchContext<'_> {
    let mut c = FetchContext {
        caps: ReadCaps::new(),
        maps: Arc::new(OffsetMaps::default()),
        any_log_append_time: topics.lat,
        topics,
    };
    match state {
        State::Nothing | State::LogAppendTime => {}
        State::Shifted => c.maps = shifted(),
        State::Capped => c.caps = HashMap::from([(("t".to_string(), 0), 5)]),
    }
    c
}

/// One uncompressed data batch of `count` records from `base` (CreateTime).
fn data_batch(base: i64, count: i64) -> Bytes {
    data_batch_of(base, count, Bytes::from_static(b"value"))
}

/// One uncompressed data batch of `count` records from `base` (CreateTime), key `k`, each
/// with `value` (also used by the `fetch_stream` tests).
pub(crate) fn data_batch_of(base: i64, count: i64, value: Bytes) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: base + i,
            sequence: -1,
            timestamp: 1_700_000_000_000 + i,
            key: Some(Bytes::from_static(b"k")),
            value: Some(value.clone()),
            headers: Default::default(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(&mut out, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .unwrap();
    out.freeze()
}

fn placeholder(base: i64, count: i32) -> Bytes {
    let own = OwnBatch { base_offset: base, count, timestamp: 5, producer_id: 9, producer_epoch: 0, base_sequence: 0 };
    batch::placeholder_batch(&own, 1, base)
}

#[derive(Clone, Copy, Debug)]
enum Recs {
    Null,
    Data,
    Placeholder,
}

fn records(r: Recs) -> Option<Bytes> {
    match r {
        Recs::Null => None,
        Recs::Data => Some(data_batch(0, 3)),
        Recs::Placeholder => Some([data_batch(0, 3), placeholder(3, 2)].concat().into()),
    }
}

/// A response at `version` of topic `topic` (`t` or `u`) with `partitions`, each with
/// high watermark and LSO 10.
fn response(version: i16, topic: &str, partitions: &[(i32, Recs)], endpoints: bool) -> FetchResponse {
    let mut t = FetchableTopicResponse::default().with_partitions(
        partitions
            .iter()
            .map(|(p, r)| {
                PartitionData::default()
                    .with_partition_index(*p)
                    .with_high_watermark(10)
                    .with_last_stable_offset(10)
                    .with_log_start_offset(0)
                    .with_records(records(*r))
            })
            .collect(),
    );
    if version >= 13 {
        t.topic_id = uuid::Uuid::from_bytes(if topic == "t" { T_ID } else { U_ID });
    } else {
        t.topic = TopicName(StrBytes::from_string(topic.to_string()));
    }
    let mut resp = FetchResponse::default().with_responses(vec![t]);
    if endpoints {
        resp.node_endpoints = vec![NodeEndpoint::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("broker-1.internal"))
            .with_port(9092)];
    }
    resp
}

fn body(resp: &FetchResponse, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    resp.encode(&mut out, version).unwrap();
    out.freeze()
}

struct NoMap;
impl AddressMap for NoMap {
    fn advertised(&self, node_id: i32) -> (StrBytes, i32) {
        (StrBytes::from_static_str("127.0.0.1"), 9000 + node_id)
    }
}

fn fast(body: &Bytes, version: i16, ctx: Option<&FetchContext<'_>>) -> bool {
    let scan = fetch_scan::fetch_response(body, version).expect("a valid body walks");
    !needs_edit(&scan, body, ctx)
}

/// Each edit kind takes the decode path, and the edit is made.
#[test]
fn every_edit_kind_takes_the_decode_path() {
    for version in [4, 11, 12, 13, 16, 17, 18] {
        // (a) node_endpoints, v16+: pointed at mirrorgate.
        if version >= 16 {
            let b = body(&response(version, "u", &[(0, Recs::Data)], true), version);
            assert!(!fast(&b, version, None), "v{version}");
            let got = super::response(&b, version, &NoMap, None).unwrap().expect("edited");
            assert_eq!((got.node_endpoints[0].host.as_str(), got.node_endpoints[0].port), ("127.0.0.1", 9001));
        }
        // (b) a placeholder, any topic, no gate: a control batch.
        let b = body(&response(version, "u", &[(0, Recs::Data), (1, Recs::Placeholder)], false), version);
        assert!(!fast(&b, version, None), "v{version}");
        let got = super::response(&b, version, &NoMap, None).unwrap().expect("edited");
        let recs = got.responses[0].partitions[1].records.clone().unwrap();
        let kinds: Vec<_> = BatchIter::new(recs).map(|b| b.unwrap().is_control()).collect();
        assert_eq!(kinds.iter().filter(|c| **c).count(), 1, "v{version}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&true), "v{version}: the placeholder became a control batch");

        let plain = body(&response(version, "t", &[(0, Recs::Data), (1, Recs::Data)], false), version);
        // (c1) LogAppendTime mirror topic (by name up to v12, by id from v13).
        let topics = Topics { lat: true };
        let c = ctx(&topics, State::LogAppendTime);
        assert!(!fast(&plain, version, Some(&c)), "v{version}");
        let got = super::response(&plain, version, &NoMap, Some(&c)).unwrap().expect("edited");
        let recs = got.responses[0].partitions[0].records.clone().unwrap();
        assert!(BatchIter::new(recs).all(|b| b.unwrap().is_log_append_time()), "v{version}");
        // (c2) a shifted partition: source offsets.
        let topics = Topics { lat: false };
        let c = ctx(&topics, State::Shifted);
        assert!(!fast(&plain, version, Some(&c)), "v{version}");
        let got = super::response(&plain, version, &NoMap, Some(&c)).unwrap().expect("edited");
        assert_eq!(got.responses[0].partitions[0].high_watermark, 3010, "v{version}");
        assert_eq!(got.responses[0].partitions[1].high_watermark, 10, "v{version}");
        // (c3) a read cap: high watermark, LSO and batches at or above it cut.
        let c = ctx(&topics, State::Capped);
        assert!(!fast(&plain, version, Some(&c)), "v{version}");
        let got = super::response(&plain, version, &NoMap, Some(&c)).unwrap().expect("edited");
        let p = &got.responses[0].partitions[0];
        assert_eq!((p.high_watermark, p.last_stable_offset), (5, 5), "v{version}");

        // None due: the broker's bytes, for the same states on another topic or partition.
        let other = body(&response(version, "u", &[(0, Recs::Data), (1, Recs::Null)], false), version);
        for (lat, state) in
            [(false, State::Nothing), (true, State::LogAppendTime), (false, State::Shifted), (false, State::Capped)]
        {
            let topics = Topics { lat };
            let c = ctx(&topics, state);
            assert!(fast(&other, version, Some(&c)), "v{version} {state:?}");
            assert!(super::response(&other, version, &NoMap, Some(&c)).unwrap().is_none());
        }
        let t1 = body(&response(version, "t", &[(1, Recs::Data)], false), version);
        for state in [State::Shifted, State::Nothing] {
            let topics = Topics { lat: false };
            assert!(fast(&t1, version, Some(&ctx(&topics, state))), "v{version} {state:?}: t-1 is not shifted");
        }
    }
}

/// Over a grid of responses and mirror states: whenever the walk says "no edit", decoding
/// and editing changes nothing (the fast path never skips an edit).
#[test]
fn no_edit_from_the_walk_means_no_edit_from_the_decode() {
    let recs = [Recs::Null, Recs::Data, Recs::Placeholder];
    let states = [State::Nothing, State::LogAppendTime, State::Shifted, State::Capped];
    let mut fast_paths = 0;
    for version in 4..=18 {
        for topic in ["t", "u"] {
            for p in 0..2 {
                for r in recs {
                    for endpoints in [false, true] {
                        if endpoints && version < 16 {
                            continue;
                        }
                        let b = body(&response(version, topic, &[(p, r)], endpoints), version);
                        for lat in [false, true] {
                            for state in states {
                                let topics = Topics { lat };
                                let c = ctx(&topics, state);
                                for c in [None, Some(&c)] {
                                    let scan = fetch_scan::fetch_response(&b, version).unwrap();
                                    if needs_edit(&scan, &b, c) {
                                        continue;
                                    }
                                    fast_paths += 1;
                                    let mut resp = FetchResponse::decode(&mut b.clone(), version).unwrap();
                                    assert!(
                                        !edit(&mut resp, &NoMap, c),
                                        "v{version} {topic}-{p} {r:?} endpoints {endpoints} lat {lat} {state:?} \
                                         gate {}: skipped an edit",
                                        c.is_some()
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(fast_paths > 100, "the grid exercises the fast path ({fast_paths})");
}

/// A malformed body is left to the decoder, which refuses it as before.
#[test]
fn a_body_the_walk_refuses_is_decoded() {
    let b = body(&response(16, "u", &[(0, Recs::Data)], false), 16);
    let cut = b.slice(..b.len() - 3);
    assert!(fetch_scan::fetch_response(&cut, 16).is_err());
    assert!(super::response(&cut, 16, &NoMap, None).is_err());
}
