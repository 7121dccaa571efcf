//! Client request path: what the proxy runs on the bytes a client sends before anything is
//! forwarded (src/proxy/connection.rs `requests`, src/proxy/mirror_gate.rs `intercept`,
//! src/proxy/route.rs `decide`).
//!
//! Input: a client's byte stream (length-prefixed request frames, as on the socket).
//! Invariants beyond "no panic":
//! - a Produce request that scans has the acks `route::produce_acks` reads;
//! - `produce_without` keeps exactly the partitions not dropped, in order, and its output
//!   scans again (byte-level filtering keeps the request well formed);
//! - a mirror RPC request that decodes re-encodes to a body that decodes to the same value.
#![no_main]

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;
use mirrorgate::proxy::route;
use mirrorgate::wire::frame::FrameDecoder;
use mirrorgate::wire::request::ParsedRequest;
use mirrorgate::wire::mirror::{self as mwire, MirrorApiTable};
use mirrorgate::wire::scan;

/// Frames above this are refused as `max_frame_bytes` would (kept small for speed).
const MAX_FRAME: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let decoder = FrameDecoder::new(MAX_FRAME);
    let mut buf = BytesMut::from(data);
    let table = MirrorApiTable::default();
    loop {
        let frame = match decoder.decode(&mut buf) {
            Ok(Some(f)) => f,
            Ok(None) => {
                let _ = decoder.check_eof(&buf);
                break;
            }
            Err(_) => break,
        };
        request(&frame, &table);
    }
});

fn request(frame: &Bytes, table: &MirrorApiTable) {
    // As the connection parses it: header v2 for the mirror RPCs.
    let header_version =
        |k, v| if table.lookup(k).is_some() { Some(2) } else { mirrorgate::wire::header::request_header_version(k, v) };
    let Ok(request) = ParsedRequest::parse_with(frame.clone(), header_version) else { return };
    let _ = request.client_id();
    let prefix = *request.header();
    if let Some(api) = table.lookup(prefix.api_key) {
        let Ok(mut body) = request.body() else { return };
        if let Ok(req) = mwire::decode_request(api, prefix.api_version, &mut body) {
            let mut out = BytesMut::new();
            mwire::encode_request(&req, prefix.api_version, &mut out).expect("a decoded request encodes");
            let again = mwire::decode_request(api, prefix.api_version, &mut out.freeze()).expect("re-decodes");
            assert_eq!(again, req);
        }
        return;
    }
    gate(&request);
    // route::decide for both answers of "does the destination know this api key".
    let _ = route::decide(&request, |_| true);
    let _ = route::decide(&request, |_| false);
}

/// The read-only gate's walks (src/proxy/mirror_gate.rs `intercept`).
fn gate(request: &ParsedRequest) {
    let prefix = request.header();
    let Ok(key) = ApiKey::try_from(prefix.api_key) else { return };
    if let Some(r) = scan::supported_versions(prefix.api_key) {
        if prefix.api_version < r.min || prefix.api_version > r.max {
            return;
        }
    }
    let v = prefix.api_version;
    match key {
        ApiKey::Produce => produce(request),
        ApiKey::DescribeConfigs => {
            if scan::describe_configs_resources(request, v).is_ok() {
                let _ = decode_body::<DescribeConfigsRequest>(v, request);
            }
        }
        ApiKey::IncrementalAlterConfigs => {
            if scan::incremental_alter_configs_resources(request, v).is_ok() {
                let _ = decode_body::<IncrementalAlterConfigsRequest>(v, request);
            }
        }
        ApiKey::AlterConfigs => {
            if let Ok(res) = scan::alter_configs_resources(request, v) {
                for r in &res {
                    let _ = r.topic();
                }
            }
        }
        ApiKey::CreatePartitions => {
            let _ = scan::create_partitions_topics(request, v);
        }
        ApiKey::DeleteTopics => {
            let _ = scan::delete_topics_topics(request, v);
        }
        ApiKey::DeleteRecords => {
            let _ = scan::delete_records_topics(request, v);
        }
        ApiKey::AddPartitionsToTxn => {
            let _ = scan::add_partitions_to_txn_topics(request, v);
        }
        _ => {}
    }
}

fn decode_body<T: Decodable>(version: i16, request: &ParsedRequest) -> Option<T> {
    T::decode(&mut request.body().ok()?, version).ok()
}

fn produce(request: &ParsedRequest) {
    let v = request.api_version();
    let frame = request.frame();
    let Ok(s) = scan::produce_topics(request, v) else { return };
    assert_eq!(route::produce_acks(request), Some(s.acks), "acks read two ways differ");
    for t in &s.topics {
        assert!(t.range.end <= frame.len());
        for p in &t.partitions {
            assert!(p.range.start >= t.range.start && p.range.end <= t.range.end);
            if let Some(r) = &p.records {
                assert!(r.start >= p.range.start && r.end <= p.range.end);
            }
        }
    }
    // Drop every partition whose index is odd (a deterministic mix of kept and dropped).
    let dropped = |p: i32| p & 1 == 1;
    let filtered = scan::produce_without(frame, v, &s, |_, p| dropped(p)).expect("scan of this frame");
    let kept: Vec<_> = s
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.clone(), p.index)))
        .filter(|(_, p)| !dropped(*p))
        .collect();
    let again = scan::produce_topics(&request.with_frame(filtered.clone()), v).expect("a filtered Produce request scans");
    let got: Vec<_> =
        again.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic.clone(), p.index))).collect();
    assert_eq!(got, kept);
    assert_eq!(again.acks, s.acks);
    // Every kept partition's records are the same bytes.
    let old: Vec<&[u8]> = s
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter(|p| !dropped(p.index))
        .map(|p| p.records.clone().map_or(&[][..], |r| &frame[r]))
        .collect();
    let new: Vec<&[u8]> = again
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.records.clone().map_or(&[][..], |r| &filtered[r]))
        .collect();
    assert_eq!(old, new);
}
