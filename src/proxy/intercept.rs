//! Response interceptors: decode a destination response, rewrite it, re-encode it — and only
//! re-encode when something changed, so Fetch and Produce responses without KIP-951
//! `node_endpoints` go back as the broker's own bytes. Fetch responses are walked first and
//! decoded only when an edit is due ([`super::fetch_pass`]).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, DescribeClusterResponse, FindCoordinatorResponse, MetadataResponse, ProduceResponse,
    ShareAcknowledgeResponse, ShareFetchResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::wire::{header, produce_response_scan};

use super::brokers::BrokerDirectory;
use super::fetch_pass::{self, FetchContext};
use super::mirror_gate::{self, MirrorGate};
use super::rewrite::{self, AddressMap};
use super::route::ResponseAction;
use super::versions;

/// Extra api keys mirrorgate serves itself and advertises in ApiVersions:
/// `(api_key, min_version, max_version)`.
pub type ExtraApis = [(i16, i16, i16)];

/// Applies `action` to a response `frame` (header + body, no length prefix) for a request of
/// `api_key` at `api_version`.
///
/// # Errors
/// A description of why the response could not be decoded or encoded; the caller closes the
/// client connection with it.
#[allow(clippy::too_many_arguments)] // one call site; the arguments are the response's context
pub fn apply(
    action: ResponseAction,
    api_key: i16,
    api_version: i16,
    frame: Bytes,
    map: &impl AddressMap,
    directory: &BrokerDirectory,
    extra_apis: &ExtraApis,
    gate: Option<&MirrorGate>,
) -> Result<Bytes, String> {
    if matches!(action, ResponseAction::Forward) {
        return Ok(frame);
    }
    if let ResponseAction::Present(inner) = action {
        let frame = apply(*inner, api_key, api_version, frame, map, directory, extra_apis, gate)?;
        return super::present::response(api_key, api_version, frame, gate);
    }
    if let ResponseAction::Merged(inner, merge) = action {
        let frame = apply(*inner, api_key, api_version, frame, map, directory, extra_apis, gate)?;
        return merge.apply(&frame);
    }
    let key = ApiKey::try_from(api_key).map_err(|_| format!("api key {api_key} not decodable"))?;
    let (decode_version, header_version) = match &action {
        ResponseAction::ApiVersions { fallback: true } => (0, 0),
        _ => (api_version, key.response_header_version(api_version)),
    };
    let correlation_id = header::response_correlation_id(&frame).map_err(|e| e.to_string())?;
    let body_start = header::response_header_len(&frame, header_version).map_err(|e| e.to_string())?;
    let body = frame.slice(body_start..);
    let ctx = |e: anyhow::Error| format!("{key:?} v{decode_version} response: {e}");
    // The response header and `resp` encoded at `version`: only for an edited response (one
    // that goes back as it came costs no allocation).
    let encoded_at = |resp: &dyn Encode, version: i16| -> Result<Bytes, String> {
        let mut out = BytesMut::with_capacity(body.len() + 64);
        header::put_response_header(&mut out, correlation_id, header_version);
        resp.encode_into(&mut out, version).map_err(ctx)?;
        Ok(out.freeze())
    };
    let encoded = |resp: &dyn Encode| encoded_at(resp, decode_version);
    match action {
        ResponseAction::Forward | ResponseAction::Merged(..) | ResponseAction::Present(..) => {
            unreachable!("handled above")
        }
        ResponseAction::ApiVersions { fallback } => {
            // KIP-511: a broker that does not know the requested version answers in the v0
            // schema with UNSUPPORTED_VERSION; its first field is the error code either way.
            let error_code = body.get(..2).map(|b| i16::from_be_bytes([b[0], b[1]])).unwrap_or(0);
            let v = if error_code == versions::UNSUPPORTED_VERSION { 0 } else { decode_version };
            let mut resp = ApiVersionsResponse::decode(&mut body.clone(), v).map_err(ctx)?;
            let reserved: Vec<i16> = extra_apis.iter().map(|e| e.0).collect();
            versions::negotiate(&mut resp, &reserved, extra_apis);
            if fallback {
                resp.error_code = versions::UNSUPPORTED_VERSION;
            }
            encoded_at(&resp, v)
        }
        ResponseAction::Metadata => {
            let mut resp = MetadataResponse::decode(&mut body.clone(), decode_version).map_err(ctx)?;
            for (node_id, host, port) in rewrite::metadata(&mut resp, map) {
                directory.observe(node_id, &host, port);
            }
            if let Some(gate) = gate {
                gate.state.hide_in_metadata(&mut resp);
                for t in &resp.topics {
                    if let Some(name) = &t.name {
                        gate.learn_topic_id(t.topic_id.as_bytes(), name);
                    }
                }
            }
            encoded(&resp)
        }
        ResponseAction::FindCoordinator => {
            let mut resp = FindCoordinatorResponse::decode(&mut body.clone(), decode_version).map_err(ctx)?;
            rewrite::find_coordinator(&mut resp, decode_version, map);
            encoded(&resp)
        }
        ResponseAction::DescribeCluster => {
            let mut resp = DescribeClusterResponse::decode(&mut body.clone(), decode_version).map_err(ctx)?;
            rewrite::describe_cluster(&mut resp, map);
            encoded(&resp)
        }
        ResponseAction::Produce => {
            // Walked first: decoded only when it carries KIP-951 node endpoints to rewrite
            // (a body the walk refuses is decoded, and refused by the decoder as before).
            if produce_response_scan::has_node_endpoints(&body, decode_version) == Ok(false) {
                return Ok(frame);
            }
            let mut resp = ProduceResponse::decode(&mut body.clone(), decode_version).map_err(ctx)?;
            if !rewrite::produce(&mut resp, map) {
                return Ok(frame);
            }
            encoded(&resp)
        }
        ResponseAction::ProduceMerge(rejected) => {
            let mut resp = ProduceResponse::decode(&mut body.clone(), decode_version).map_err(ctx)?;
            rewrite::produce(&mut resp, map);
            let resp = mirror_gate::produce_rejections(resp, rejected.as_slice());
            encoded(&resp)
        }
        ResponseAction::Fetch => {
            // Walked first: decoded only when an edit is due (super::fetch_pass).
            let fetch_ctx = gate.map(FetchContext::of);
            match fetch_pass::response(&body, decode_version, map, fetch_ctx.as_ref()).map_err(ctx)? {
                None => Ok(frame),
                Some(resp) => encoded(&resp),
            }
        }
        ResponseAction::ShareFetch => {
            let mut resp = ShareFetchResponse::decode(&mut body.clone(), decode_version).map_err(ctx)?;
            for e in &mut resp.node_endpoints {
                (e.host, e.port) = map.advertised(e.node_id.0);
            }
            let mut changed = !resp.node_endpoints.is_empty();
            for p in resp.responses.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                if let Some(restored) = p.records.as_ref().and_then(|r| restore_mirror_records(r, false)) {
                    p.records = Some(restored);
                    changed = true;
                }
            }
            if !changed {
                return Ok(frame);
            }
            encoded(&resp)
        }
        ResponseAction::ShareAcknowledge => {
            let mut resp = ShareAcknowledgeResponse::decode(&mut body.clone(), decode_version).map_err(ctx)?;
            if resp.node_endpoints.is_empty() {
                return Ok(frame);
            }
            for e in &mut resp.node_endpoints {
                (e.host, e.port) = map.advertised(e.node_id.0);
            }
            encoded(&resp)
        }
    }
}

/// [`Encodable`] as an object: the one method [`apply`]'s encoder needs.
trait Encode {
    fn encode_into(&self, out: &mut BytesMut, version: i16) -> anyhow::Result<()>;
}

impl<T: Encodable> Encode for T {
    fn encode_into(&self, out: &mut BytesMut, version: i16) -> anyhow::Result<()> {
        self.encode(out, version)
    }
}

/// An ApiVersions response (header v0 + body at `version`) built by mirrorgate itself while
/// no destination broker is reachable: the api ranges the destination advertised at startup,
/// narrowed as a forwarded answer would be ([`versions::negotiate`]), plus `extra_apis`; with
/// `fallback` (KIP-511: the client asked for a version above ours) the error code is
/// UNSUPPORTED_VERSION (35) and `version` should be 0. No finalized features are listed: a
/// client learns them once the destination answers again.
///
/// # Errors
/// The response cannot be encoded at `version`.
pub fn local_api_versions(
    correlation_id: i32,
    version: i16,
    fallback: bool,
    directory: &BrokerDirectory,
    extra_apis: &ExtraApis,
) -> Result<Bytes, String> {
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    let mut resp = ApiVersionsResponse::default();
    resp.api_keys = directory
        .api_ranges()
        .into_iter()
        .map(|(k, (min, max))| ApiVersion::default().with_api_key(k).with_min_version(min).with_max_version(max))
        .collect();
    let reserved: Vec<i16> = extra_apis.iter().map(|e| e.0).collect();
    versions::negotiate(&mut resp, &reserved, extra_apis);
    if fallback {
        resp.error_code = versions::UNSUPPORTED_VERSION;
    }
    let mut out = BytesMut::with_capacity(16 + 8 * resp.api_keys.len());
    header::put_response_header(&mut out, correlation_id, 0);
    resp.encode(&mut out, version)
        .map_err(|e| format!("cannot encode a local ApiVersions v{version} response: {e}"))?;
    Ok(out.freeze())
}

/// The `records` of one partition of a Fetch or ShareFetch response as the client must see
/// them ([`super::fetch_pass`]): each placeholder batch replaced by a COMMIT control batch
/// for the same offsets, and, with `log_append_time` (the source stamps LogAppendTime), each
/// data batch marked LogAppendTime. Batches after the first malformed one, and a trailing
/// partial batch, are kept as they are. `None` when nothing needs changing. Never panics on
/// broker bytes (the fuzz target `responses` drives it).
pub fn restore_mirror_records(records: &Bytes, log_append_time: bool) -> Option<Bytes> {
    use crate::wire::batch::{self, BatchIter, OwnBatch};
    if !log_append_time && !batch::has_placeholder(records) {
        return None;
    }
    let mut iter = BatchIter::new(records.clone());
    let batches: Vec<_> = iter.by_ref().map_while(Result::ok).collect();
    let consumed: usize = batches.iter().map(|b| b.bytes().len()).sum();
    let mut out = BytesMut::with_capacity(records.len());
    for b in &batches {
        let start = out.len();
        if b.is_placeholder() {
            out.extend_from_slice(&batch::control_batch(&OwnBatch {
                base_offset: b.base_offset(),
                count: b.last_offset_delta().saturating_add(1),
                timestamp: b.max_timestamp(),
                producer_id: b.producer_id(),
                producer_epoch: b.producer_epoch(),
                base_sequence: -1,
            }));
            // partitionLeaderEpoch sits outside the CRC'd region: keep the broker's.
            out[start + 12..start + 16].copy_from_slice(&b.partition_leader_epoch().to_be_bytes());
        } else if log_append_time && !b.is_control() && !b.is_log_append_time() {
            out.extend_from_slice(b.bytes());
            batch::set_log_append_time(&mut out[start..]);
        } else {
            out.extend_from_slice(b.bytes());
        }
    }
    out.extend_from_slice(&records[consumed..]);
    Some(out.freeze())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use kafka_protocol::messages::{ApiVersionsResponse, FetchResponse};
    use kafka_protocol::protocol::Decodable;

    use super::*;

    fn directory() -> BrokerDirectory {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let d = BrokerDirectory::new(vec!["b:9092".into()], tx);
        let produce_max = ApiKey::Produce.valid_versions().max;
        d.set_api_ranges(HashMap::from([(0, (3, produce_max + 3)), (18, (0, 4)), (94, (0, 7)), (11, (0, 9))]));
        d
    }

    fn body(frame: &Bytes) -> (i32, Bytes) {
        (header::response_correlation_id(frame).unwrap(), frame.slice(4..))
    }

    #[test]
    fn local_api_versions_narrows_like_a_forwarded_answer() {
        let frame = local_api_versions(7, 3, false, &directory(), &[(94, 0, 0)]).unwrap();
        let (cid, mut b) = body(&frame);
        assert_eq!(cid, 7);
        let resp = ApiVersionsResponse::decode(&mut b, 3).unwrap();
        assert_eq!(resp.error_code, 0);
        let got: Vec<_> = resp.api_keys.iter().map(|a| (a.api_key, a.min_version, a.max_version)).collect();
        let produce = intercepted_produce_range();
        assert_eq!(got, vec![(0, produce.0, produce.1), (11, 0, 9), (18, 0, 4), (94, 0, 0)]);
    }

    #[test]
    fn local_api_versions_fallback_is_v0_with_unsupported_version() {
        let frame = local_api_versions(9, 0, true, &directory(), &[]).unwrap();
        let (cid, mut b) = body(&frame);
        assert_eq!(cid, 9);
        let resp = ApiVersionsResponse::decode(&mut b, 0).unwrap();
        assert_eq!(resp.error_code, versions::UNSUPPORTED_VERSION);
        assert!(resp.api_keys.iter().any(|a| a.api_key == 18));
    }

    struct NoMap;
    impl AddressMap for NoMap {
        fn advertised(&self, node_id: i32) -> (kafka_protocol::protocol::StrBytes, i32) {
            (kafka_protocol::protocol::StrBytes::from_static_str("127.0.0.1"), 9000 + node_id)
        }
    }

    /// Found by the fuzz target `responses`: a response declaring ~2^32 array elements in a
    /// few bytes made kafka-protocol 0.18.0 size a Vec from the count and the process abort
    /// on the allocation (vendor/kafka-protocol/PATCHED.md). Now a decode error, which closes
    /// the client connection with a reason.
    #[test]
    fn huge_array_counts_in_broker_responses_are_errors_not_allocations() {
        // Fetch v16 (flexible): header (correlation id, no tags), throttle_time_ms,
        // error_code, session_id, then `responses` as a compact array of 2^32 - 2 entries.
        let mut fetch = vec![0, 0, 0, 7, 0];
        fetch.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        fetch.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        let err = apply(ResponseAction::Fetch, 1, 16, Bytes::from(fetch), &NoMap, &directory(), &[], None)
            .expect_err("a Fetch response with an impossible array count");
        assert!(err.contains("exceeds"), "{err}");
        // Metadata v1 (not flexible): header, then `brokers` as an array of i32::MAX entries.
        let mut metadata = vec![0, 0, 0, 8];
        metadata.extend_from_slice(&i32::MAX.to_be_bytes());
        let err = apply(ResponseAction::Metadata, 3, 1, Bytes::from(metadata), &NoMap, &directory(), &[], None)
            .expect_err("a Metadata response with an impossible array count");
        assert!(err.contains("exceeds"), "{err}");
    }

    /// Found by the fuzz target `responses`: an ApiVersions v3 response whose api key entry
    /// carried a tagged field numbered 2^32 - 1 was decoded (the tag kept as -1) and
    /// re-encoded into bytes a client cannot decode. Now the response is refused.
    #[test]
    fn tagged_field_numbers_beyond_31_bits_are_refused() {
        // Header v0 (correlation id), error_code 0, api_keys: 1 entry (key 18, v0..v3) whose
        // tagged fields hold one field numbered 0xFFFFFFFF of size 0; throttle, no tags.
        let mut frame = vec![0, 0, 0, 9, 0, 0, 2, 0, 18, 0, 0, 0, 3, 1];
        frame.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0]);
        frame.extend_from_slice(&[0, 0, 0, 0, 0]);
        let action = ResponseAction::ApiVersions { fallback: false };
        let err = apply(action, 18, 3, Bytes::from(frame), &NoMap, &directory(), &[], None)
            .expect_err("a tag number beyond 31 bits");
        assert!(err.contains("out of range"), "{err}");
    }

    /// The same bound on the data plane's Fetch version (v12, the mirror's source reads), for
    /// the aborted transactions of a partition (the fuzz target `fetch_batches`' finding).
    #[test]
    fn huge_aborted_transactions_count_is_an_error() {
        use kafka_protocol::messages::FetchResponse;
        let mut body = vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 1]; // throttle, error, session id
        body.push(2); // one topic
        body.extend_from_slice(&[2, b't']); // topic name "t"
        body.push(2); // one partition
        body.extend_from_slice(&[0, 0, 0, 0, 0, 0]); // partition index, error code
        body.extend_from_slice(&[0; 24]); // high watermark, last stable offset, log start
        body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]); // aborted_transactions count
        let err = FetchResponse::decode(&mut Bytes::from(body), 12).expect_err("impossible count");
        assert!(err.to_string().contains("exceeds"), "{err}");
    }

    fn placeholder_and_data() -> (Bytes, Bytes) {
        use crate::wire::batch::{control_batch, placeholder_batch, OwnBatch};
        let own = |base, count| OwnBatch {
            base_offset: base,
            count,
            timestamp: 5,
            producer_id: 9,
            producer_epoch: 0,
            base_sequence: 0,
        };
        // A control batch stands in for "anything that is not a placeholder".
        let data = control_batch(&own(0, 2));
        let records = [data.as_ref(), placeholder_batch(&own(2, 3), 1, 2).as_ref()].concat();
        (Bytes::from(records), data)
    }

    /// Placeholders are replaced by content, without a gate and for a topic id no Metadata
    /// answer taught the proxy (right after a restart, or a deleted mirror's topic).
    #[test]
    fn fetch_by_an_unknown_topic_id_gets_placeholders_replaced() {
        use crate::wire::batch::BatchIter;
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        let (records, data) = placeholder_and_data();
        let resp = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic_id(uuid::Uuid::from_bytes([7; 16]))
            .with_partitions(vec![PartitionData::default().with_records(Some(records))])]);
        let mut frame = BytesMut::new();
        header::put_response_header(&mut frame, 11, 1);
        resp.encode(&mut frame, 13).unwrap();
        let out = apply(ResponseAction::Fetch, 1, 13, frame.freeze(), &NoMap, &directory(), &[], None).unwrap();
        let mut body = out.slice(header::response_header_len(&out, 1).unwrap()..);
        let got = FetchResponse::decode(&mut body, 13).unwrap();
        let records = got.responses[0].partitions[0].records.clone().unwrap();
        let batches: Vec<_> = BatchIter::new(records).map(Result::unwrap).collect();
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0].bytes(), &data, "other batches stay byte for byte");
        assert!(batches[1].is_control() && batches[1].crc_is_valid());
        assert_eq!((batches[1].base_offset(), batches[1].last_offset()), (2, 4));

        // Nothing to replace: the broker's own bytes go back.
        let resp = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic_id(uuid::Uuid::from_bytes([7; 16]))
            .with_partitions(vec![PartitionData::default().with_records(Some(data))])]);
        let mut frame = BytesMut::new();
        header::put_response_header(&mut frame, 12, 1);
        resp.encode(&mut frame, 13).unwrap();
        let frame = frame.freeze();
        let out = apply(ResponseAction::Fetch, 1, 13, frame.clone(), &NoMap, &directory(), &[], None).unwrap();
        assert_eq!(out.as_ptr(), frame.as_ptr(), "forwarded as it came");
    }

    /// At every Fetch version the proxy forwards (v4 and up), a response with nothing to
    /// change is the broker's own `Bytes` (walked, not decoded); one with a placeholder is
    /// decoded and edited.
    #[test]
    fn fetch_responses_pass_as_the_brokers_bytes_unless_an_edit_is_due() {
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        let (with_placeholder, data) = placeholder_and_data();
        for version in 4..=ApiKey::Fetch.valid_versions().max {
            let frame = |records: Bytes| {
                let mut t = FetchableTopicResponse::default().with_partitions(vec![PartitionData::default()
                    .with_partition_index(2)
                    .with_records(Some(records))]);
                if version >= 13 {
                    t.topic_id = uuid::Uuid::from_bytes([7; 16]);
                } else {
                    t.topic =
                        kafka_protocol::messages::TopicName(kafka_protocol::protocol::StrBytes::from_static_str("t"));
                }
                let mut out = BytesMut::new();
                let header_version = ApiKey::Fetch.response_header_version(version);
                header::put_response_header(&mut out, 21, header_version);
                FetchResponse::default().with_responses(vec![t]).encode(&mut out, version).unwrap();
                out.freeze()
            };
            let plain = frame(data.clone());
            let out = apply(ResponseAction::Fetch, 1, version, plain.clone(), &NoMap, &directory(), &[], None).unwrap();
            assert_eq!((out.as_ptr(), out.len()), (plain.as_ptr(), plain.len()), "v{version}: forwarded as it came");
            let edited = frame(with_placeholder.clone());
            let out =
                apply(ResponseAction::Fetch, 1, version, edited.clone(), &NoMap, &directory(), &[], None).unwrap();
            assert_ne!(out.as_ptr(), edited.as_ptr(), "v{version}");
            assert_ne!(out, edited, "v{version}: the placeholder became a control batch");
        }
    }

    /// ShareFetch (KIP-932): placeholder batches become control batches, which the share
    /// consumer skips and acknowledges as gaps (Kafka's `ShareCompletedFetch`); node endpoints
    /// point at mirrorgate.
    #[test]
    fn share_fetch_placeholders_become_control_batches() {
        use crate::wire::batch::BatchIter;
        use kafka_protocol::messages::share_fetch_response::{
            NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
        };
        let (records, _) = placeholder_and_data();
        let resp = ShareFetchResponse::default()
            .with_responses(vec![ShareFetchableTopicResponse::default()
                .with_topic_id(uuid::Uuid::from_bytes([3; 16]))
                .with_partitions(vec![PartitionData::default().with_records(Some(records))])])
            .with_node_endpoints(vec![NodeEndpoint::default()
                .with_node_id(kafka_protocol::messages::BrokerId(1))
                .with_host(kafka_protocol::protocol::StrBytes::from_static_str("broker"))
                .with_port(9092)]);
        let mut frame = BytesMut::new();
        header::put_response_header(&mut frame, 13, 1);
        resp.encode(&mut frame, 1).unwrap();
        let out = apply(ResponseAction::ShareFetch, 78, 1, frame.freeze(), &NoMap, &directory(), &[], None).unwrap();
        let mut body = out.slice(header::response_header_len(&out, 1).unwrap()..);
        let got = ShareFetchResponse::decode(&mut body, 1).unwrap();
        let records = got.responses[0].partitions[0].records.clone().unwrap();
        let kinds: Vec<_> = BatchIter::new(records).map(|b| b.unwrap().is_placeholder()).collect();
        assert_eq!(kinds, vec![false, false]);
        assert_eq!((got.node_endpoints[0].host.as_str(), got.node_endpoints[0].port), ("127.0.0.1", 9001));
    }

    /// ShareAcknowledge (KIP-932): the `node_endpoints` Kafka sends with
    /// NOT_LEADER_OR_FOLLOWER point at mirrorgate; without endpoints the broker's bytes go back.
    #[test]
    fn share_acknowledge_node_endpoints_point_at_mirrorgate() {
        use kafka_protocol::messages::share_acknowledge_response::NodeEndpoint;
        let resp = ShareAcknowledgeResponse::default().with_node_endpoints(vec![NodeEndpoint::default()
            .with_node_id(kafka_protocol::messages::BrokerId(1))
            .with_host(kafka_protocol::protocol::StrBytes::from_static_str("broker"))
            .with_port(9092)]);
        let mut frame = BytesMut::new();
        header::put_response_header(&mut frame, 14, 1);
        resp.encode(&mut frame, 1).unwrap();
        let out =
            apply(ResponseAction::ShareAcknowledge, 79, 1, frame.freeze(), &NoMap, &directory(), &[], None).unwrap();
        let mut body = out.slice(header::response_header_len(&out, 1).unwrap()..);
        let got = ShareAcknowledgeResponse::decode(&mut body, 1).unwrap();
        assert_eq!((got.node_endpoints[0].host.as_str(), got.node_endpoints[0].port), ("127.0.0.1", 9001));

        let mut frame = BytesMut::new();
        header::put_response_header(&mut frame, 15, 1);
        ShareAcknowledgeResponse::default().encode(&mut frame, 1).unwrap();
        let frame = frame.freeze();
        let out =
            apply(ResponseAction::ShareAcknowledge, 79, 1, frame.clone(), &NoMap, &directory(), &[], None).unwrap();
        assert_eq!(out.as_ptr(), frame.as_ptr(), "forwarded as it came");
    }

    /// Produce v10+ (KIP-951): a response without node endpoints goes back as the broker's
    /// own `Bytes`; one with them gets them pointed at mirrorgate. (What the client gets, as
    /// before the walk; that the walk agrees with the decoder is `wire::produce_response_scan`'s
    /// tests and the `responses` fuzz target.)
    #[test]
    fn produce_responses_pass_as_the_brokers_bytes_unless_they_carry_node_endpoints() {
        use kafka_protocol::messages::produce_response::{
            NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
        };
        for version in 10..=ApiKey::Produce.valid_versions().max {
            let frame = |endpoints: bool| {
                let mut resp = ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
                    .with_topic_id(uuid::Uuid::from_bytes([4; 16]))
                    .with_name(kafka_protocol::messages::TopicName(if version < 13 {
                        kafka_protocol::protocol::StrBytes::from_static_str("t")
                    } else {
                        Default::default()
                    }))
                    .with_partition_responses(vec![PartitionProduceResponse::default().with_base_offset(41)])]);
                if endpoints {
                    resp.node_endpoints = vec![NodeEndpoint::default()
                        .with_node_id(kafka_protocol::messages::BrokerId(2))
                        .with_host(kafka_protocol::protocol::StrBytes::from_static_str("broker-2"))
                        .with_port(9092)];
                }
                let mut out = BytesMut::new();
                header::put_response_header(&mut out, 31, 1);
                resp.encode(&mut out, version).unwrap();
                out.freeze()
            };
            let plain = frame(false);
            let out =
                apply(ResponseAction::Produce, 0, version, plain.clone(), &NoMap, &directory(), &[], None).unwrap();
            assert_eq!((out.as_ptr(), out.len()), (plain.as_ptr(), plain.len()), "v{version}: forwarded as it came");
            let with = frame(true);
            let out =
                apply(ResponseAction::Produce, 0, version, with.clone(), &NoMap, &directory(), &[], None).unwrap();
            let mut body = out.slice(header::response_header_len(&out, 1).unwrap()..);
            let got = ProduceResponse::decode(&mut body, version).unwrap();
            assert_eq!(header::response_correlation_id(&out).unwrap(), 31);
            assert_eq!((got.node_endpoints[0].host.as_str(), got.node_endpoints[0].port), ("127.0.0.1", 9002));
            assert_eq!(got.responses[0].partition_responses[0].base_offset, 41, "v{version}");
        }
    }

    fn intercepted_produce_range() -> (i16, i16) {
        let (min, max) = versions::intercepted_range(0).unwrap();
        (min.max(3), max)
    }
}
