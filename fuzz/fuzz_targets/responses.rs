//! Destination responses the proxy decodes and rewrites before a client sees them
//! (src/proxy/intercept.rs `apply`, src/proxy/rewrite.rs, src/proxy/mirror_gate.rs
//! `produce_rejections`), and the Produce response parsing of mirrorgate's own client
//! (src/client/conn.rs) that the mirror's writer relies on.
//!
//! Input: byte 0 = flags (bit 0: ApiVersions KIP-511 fallback; bit 1: Produce with refused
//! mirror partitions merged in), bytes 1–2 = the request's api key, bytes 3–4 = its api
//! version, the rest = the response frame (header and body, no length prefix).
//! Invariant beyond "no panic": a rewritten response is accepted again by the same rewrite
//! (what the proxy sends a client decodes at the version the client asked for). For Fetch,
//! the walk that lets a response pass without a decode (src/wire/fetch_scan.rs) is driven
//! too: a body it accepts must decode, to the same topics, partitions and records; for Produce,
//! the walk that decides whether a response has KIP-951 node endpoints to rewrite
//! (src/wire/produce_response_scan.rs): a body it accepts must decode, with the same answer.
#![no_main]

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, FetchResponse, ProduceResponse, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};
use libfuzzer_sys::fuzz_target;
use mirrorgate::proxy::brokers::BrokerDirectory;
use mirrorgate::proxy::intercept;
use mirrorgate::proxy::mirror_gate::Rejected;
use mirrorgate::proxy::rewrite::AddressMap;
use mirrorgate::proxy::route::ResponseAction;
use mirrorgate::wire::{fetch_scan, header, produce_response_scan};
use mirrorgate::wire::scan::TopicRef;

struct Map;

impl AddressMap for Map {
    fn advertised(&self, node_id: i32) -> (StrBytes, i32) {
        (StrBytes::from_static_str("127.0.0.1"), 10_000 + node_id.rem_euclid(1000))
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let flags = data[0];
    let api_key = i16::from_be_bytes([data[1], data[2]]);
    let api_version = i16::from_be_bytes([data[3], data[4]]);
    let frame = Bytes::copy_from_slice(&data[5..]);
    let Ok(key) = ApiKey::try_from(api_key) else { return };
    // The proxy only forwards requests at versions kafka-protocol knows (ApiVersions narrows).
    let valid = key.valid_versions();
    if api_version < valid.min || api_version > valid.max {
        return;
    }
    let action = match key {
        ApiKey::ApiVersions => ResponseAction::ApiVersions { fallback: flags & 1 != 0 },
        ApiKey::Metadata => ResponseAction::Metadata,
        ApiKey::FindCoordinator => ResponseAction::FindCoordinator,
        ApiKey::DescribeCluster => ResponseAction::DescribeCluster,
        ApiKey::Produce if flags & 2 != 0 => ResponseAction::ProduceMerge(Arc::new(vec![Rejected {
            topic: TopicRef::Name(TopicName(StrBytes::from_static_str("mirrored"))),
            partition: 0,
            message: "read-only mirror topic".into(),
            code: 44,
        }])),
        ApiKey::Produce => ResponseAction::Produce,
        ApiKey::Fetch => ResponseAction::Fetch,
        _ => ResponseAction::Forward,
    };
    if key == ApiKey::Produce {
        client_produce(&frame, api_version);
    }
    if key == ApiKey::Fetch {
        fetch_walk(&frame, api_version);
    }
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let directory = BrokerDirectory::new(vec!["127.0.0.1:9092".into()], tx);
    let extra = [(94, 0, 0), (95, 0, 0)];
    let Ok(out) = intercept::apply(action.clone(), api_key, api_version, frame, &Map, &directory, &extra, None) else {
        return;
    };
    if let Err(e) = intercept::apply(action, api_key, api_version, out, &Map, &directory, &extra, None) {
        panic!("the proxy's own {key:?} v{api_version} response does not decode again: {e}");
    }
});

/// src/client/conn.rs: correlation id, header, body.
fn client_produce(frame: &Bytes, version: i16) {
    if header::response_correlation_id(frame).is_err() {
        return;
    }
    let Ok(start) = header::response_header_len(frame, ApiKey::Produce.response_header_version(version)) else {
        return;
    };
    let body = frame.slice(start..);
    let decoded = ProduceResponse::decode(&mut body.clone(), version);
    if let Ok(endpoints) = produce_response_scan::has_node_endpoints(&body, version) {
        match decoded {
            Ok(resp) => assert_eq!(endpoints, !resp.node_endpoints.is_empty(), "Produce v{version}"),
            Err(e) => panic!("Produce v{version}: the walk accepted a body kafka-protocol refuses: {e}"),
        }
    }
}

/// src/wire/fetch_scan.rs: whatever the walk accepts decodes to what the walk saw.
fn fetch_walk(frame: &Bytes, version: i16) {
    let Ok(start) = header::response_header_len(frame, ApiKey::Fetch.response_header_version(version)) else {
        return;
    };
    let body = frame.slice(start..);
    let Ok(scan) = fetch_scan::fetch_response(&body, version) else { return };
    let resp = match FetchResponse::decode(&mut body.clone(), version) {
        Ok(r) => r,
        Err(e) => panic!("Fetch v{version}: the walk accepted a body kafka-protocol refuses: {e}"),
    };
    assert_eq!(scan.topics.len(), resp.responses.len());
    for (t, d) in scan.topics.iter().zip(&resp.responses) {
        let (name, id) = t.topic.name_and_id();
        assert_eq!((name, &id), (d.topic.0.as_str(), d.topic_id.as_bytes()));
        let parts = scan.partitions_of(t);
        assert_eq!(parts.len(), d.partitions.len());
        for (p, dp) in parts.iter().zip(&d.partitions) {
            assert_eq!(p.partition_index, dp.partition_index);
            assert_eq!(p.records.as_ref().map(|r| &body[r.clone()]), dp.records.as_deref());
        }
    }
    assert_eq!(scan.node_endpoints, !resp.node_endpoints.is_empty());
}
