//! Source offsets for shifted mirror partitions (issue 12, item 1; DESIGN §4.2): a mirror
//! partition whose offset map has a shift holds source offset `x` at destination offset
//! `x − shift`. Through mirrorgate, every offset a client sends for such a partition is
//! taken as a source offset and mapped to the destination's, and every offset the destination
//! answers is mapped back, so clients see the source's numbering: Fetch ([`fetch`]),
//! ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers and Produce
//! ([`offsets`]), OffsetCommit, TxnOffsetCommit and OffsetFetch ([`groups`]).
//!
//! Partitions without a shift are never touched: with no shifted partition at all, one
//! read-locked reference count per request; otherwise a request is decoded only when its bytes name a
//! shifted topic (a `memmem` search per shifted topic name and id), and a response only for
//! the APIs that carry offsets. The maps come from the control plane
//! ([`crate::mirror::offset_maps`]), which has them before the data plane appends into a new
//! segment. Versions kafka-protocol cannot decode close the connection when they name a
//! shifted topic (fail closed, never destination offsets presented as source offsets).
//!
//! Not translated (docs/protocol.md): KIP-932 share groups (ShareFetch acquired records,
//! ShareAcknowledge batches, share-group offset admin APIs), refused for shifted topics
//! ([`SHARE_GROUP_APIS`]: the connection is closed with the reason, never destination
//! offsets presented as source offsets), and WriteTxnMarkers (brokers only).

pub mod fetch;
pub mod groups;
pub mod offsets;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, DeleteRecordsRequest, DeleteRecordsResponse, DescribeProducersResponse, FetchRequest, ListOffsetsResponse,
    OffsetCommitRequest, OffsetFetchResponse, OffsetForLeaderEpochResponse, ProduceResponse, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::mirror::offset_maps::OffsetMaps;
use crate::wire::header;
use crate::wire::request::ParsedRequest;
use crate::wire::scan::{self, TopicRef};

use super::mirror_gate::MirrorGate;
use super::route::ResponseAction;

/// APIs decoded only to present source offsets (besides those [`super::versions`] already
/// lists): their advertised maximum is capped at what kafka-protocol decodes.
pub const DECODED: &[ApiKey] = &[
    ApiKey::ListOffsets,
    ApiKey::OffsetCommit,
    ApiKey::TxnOffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::DeleteRecords,
    ApiKey::DescribeProducers,
];

/// KIP-932 share-group APIs that carry offsets of the topics they name: ShareFetch
/// (acquired records), ShareAcknowledge (acknowledged offset ranges), and the share-group
/// offset admin APIs (KIP-932 `kafka-share-groups --describe/--reset-offsets/--delete-offsets`:
/// start offsets). Not translated: a request naming a shifted topic (by name or id) closes
/// the connection, and a DescribeShareGroupOffsets answer naming one does too (a request
/// may ask for every topic of a group).
pub const SHARE_GROUP_APIS: &[ApiKey] = &[
    ApiKey::ShareFetch,
    ApiKey::ShareAcknowledge,
    ApiKey::DescribeShareGroupOffsets,
    ApiKey::AlterShareGroupOffsets,
    ApiKey::DeleteShareGroupOffsets,
];

/// The reason a share-group request or answer naming a shifted topic is refused.
fn share_group_refusal(key: ApiKey) -> String {
    format!(
        "{key:?} naming a shifted mirror topic: share-group offsets are not translated to source offsets \
         (docs/protocol.md), refused"
    )
}

/// The request as it goes upstream and what to do with its answer: offsets in the request
/// mapped source → destination, and the response action wrapped in
/// [`ResponseAction::Present`] when the answer carries offsets of a shifted partition.
/// Fetch answers are handled by the Fetch action itself ([`fetch::response`] through
/// [`super::fetch_pass`]).
///
/// # Errors
/// A request naming a shifted topic that cannot be decoded or re-encoded, or a share-group
/// request naming one ([`SHARE_GROUP_APIS`]) (the caller closes the connection with the reason).
pub fn request(
    gate: &MirrorGate,
    request: &ParsedRequest,
    frame: Bytes,
    action: ResponseAction,
) -> Result<(Bytes, ResponseAction), String> {
    // While some partition's reads are held (`ControlPlane::hold_reads`), the end offsets
    // ListOffsets and OffsetForLeaderEpoch answer are capped too: their answers are looked at.
    if gate.control.reads_held()
        && matches!(ApiKey::try_from(request.api_key()), Ok(ApiKey::ListOffsets | ApiKey::OffsetForLeaderEpoch))
    {
        return Ok((frame, ResponseAction::Present(Box::new(action))));
    }
    let maps = gate.control.offset_maps();
    request_with(&maps, &|id| gate.known_topic_name(id), request, frame, action)
}

/// [`request`] with the offset maps `m`, topic ids the state does not know named by `resolve`.
fn request_with(
    m: &OffsetMaps,
    resolve: &dyn Fn(&[u8; 16]) -> Option<String>,
    request: &ParsedRequest,
    frame: Bytes,
    action: ResponseAction,
) -> Result<(Bytes, ResponseAction), String> {
    if m.is_empty() {
        return Ok((frame, action));
    }
    let prefix = request.header();
    let Ok(key) = ApiKey::try_from(prefix.api_key) else { return Ok((frame, action)) };
    let wrap = |a: ResponseAction| ResponseAction::Present(Box::new(a));
    let by_name = matches!(
        key,
        ApiKey::Fetch
            | ApiKey::OffsetCommit
            | ApiKey::TxnOffsetCommit
            | ApiKey::DeleteRecords
            | ApiKey::ListOffsets
            | ApiKey::OffsetForLeaderEpoch
            | ApiKey::DescribeProducers
    );
    // Fetch v13+ names topics by id: with a shifted topic whose id the state lacks, every
    // such Fetch is decoded (ids resolved through Metadata, unknown ones refused).
    let by_unknown_id = key == ApiKey::Fetch && prefix.api_version >= 13 && m.has_topic_without_id();
    if by_name && !by_unknown_id && !m.mentioned_in(&frame) {
        return Ok((frame, action));
    }
    if SHARE_GROUP_APIS.contains(&key) {
        if m.mentioned_in(&frame) {
            return Err(share_group_refusal(key));
        }
        // Every topic of the group may be answered: the answer is looked at.
        return Ok(if key == ApiKey::DescribeShareGroupOffsets { (frame, wrap(action)) } else { (frame, action) });
    }
    Ok(match key {
        // OffsetFetch v8+ may ask for every topic of a group: its answer is always looked at.
        ApiKey::OffsetFetch => (frame, wrap(action)),
        ApiKey::Produce => {
            let scan = scan::produce_topics(&request.with_frame(frame.clone()), prefix.api_version)
                .map_err(|e| format!("malformed Produce v{} request: {e}", prefix.api_version))?;
            let shifted = scan.topics.iter().any(|t| match &t.topic {
                TopicRef::Name(n) => m.topic(&n.0).is_some(),
                TopicRef::Id(id) => m.topic_by_id(&id.0).is_some(),
            });
            if shifted {
                (frame, wrap(action))
            } else {
                (frame, action)
            }
        }
        ApiKey::Fetch => {
            let mut refused = None;
            let frame = rewrite(key, request, frame, |r: &mut FetchRequest| {
                fetch::request(r, m, resolve).unwrap_or_else(|e| {
                    refused = Some(e);
                    false
                })
            })?;
            if let Some(reason) = refused {
                return Err(reason);
            }
            (frame, action)
        }
        ApiKey::OffsetCommit => {
            (rewrite(key, request, frame, |r: &mut OffsetCommitRequest| groups::offset_commit(r, m))?, action)
        }
        ApiKey::TxnOffsetCommit => {
            (rewrite(key, request, frame, |r: &mut TxnOffsetCommitRequest| groups::txn_offset_commit(r, m))?, action)
        }
        ApiKey::DeleteRecords => (
            rewrite(key, request, frame, |r: &mut DeleteRecordsRequest| offsets::delete_records_request(r, m))?,
            wrap(action),
        ),
        ApiKey::ListOffsets | ApiKey::OffsetForLeaderEpoch | ApiKey::DescribeProducers => (frame, wrap(action)),
        _ => (frame, action),
    })
}

/// Maps the offsets of shifted partitions in a response `frame` (header + body) to a
/// request of `api_key` at `api_version` destination → source; the frame unchanged when
/// nothing changes.
///
/// # Errors
/// The response cannot be decoded or encoded (the caller closes the client connection).
pub fn response(api_key: i16, api_version: i16, frame: Bytes, gate: Option<&MirrorGate>) -> Result<Bytes, String> {
    let Some(gate) = gate else { return Ok(frame) };
    // Caps first, then the maps: a cap released between the two was released after the maps
    // it protects were rebuilt, so the answer is never mapped with old maps and no cap.
    let caps = gate.control.read_caps();
    let maps = gate.control.offset_maps();
    response_with(&maps, &caps, api_key, api_version, frame)
}

/// [`response`] with the offset maps `m` and read caps `caps`.
fn response_with(
    m: &OffsetMaps,
    caps: &ReadCaps,
    api_key: i16,
    api_version: i16,
    frame: Bytes,
) -> Result<Bytes, String> {
    let Ok(key) = ApiKey::try_from(api_key) else { return Ok(frame) };
    let v = api_version;
    match key {
        ApiKey::ListOffsets => edit(key, v, frame, |r: &mut ListOffsetsResponse| {
            let capped = offsets::cap_list_offsets(r, caps);
            offsets::list_offsets(r, m) | capped
        }),
        ApiKey::OffsetForLeaderEpoch => edit(key, v, frame, |r: &mut OffsetForLeaderEpochResponse| {
            let capped = offsets::cap_offset_for_leader_epoch(r, caps);
            offsets::offset_for_leader_epoch(r, m) | capped
        }),
        ApiKey::DeleteRecords => {
            edit(key, v, frame, |r: &mut DeleteRecordsResponse| offsets::delete_records_response(r, m))
        }
        ApiKey::DescribeProducers => {
            edit(key, v, frame, |r: &mut DescribeProducersResponse| offsets::describe_producers(r, m))
        }
        ApiKey::Produce => edit(key, v, frame, |r: &mut ProduceResponse| offsets::produce(r, m)),
        ApiKey::OffsetFetch => edit(key, v, frame, |r: &mut OffsetFetchResponse| groups::offset_fetch(r, m)),
        ApiKey::DescribeShareGroupOffsets if m.mentioned_in(&frame) => Err(share_group_refusal(key)),
        _ => Ok(frame),
    }
}

/// Decodes the request body of `frame`, applies `f`, and re-encodes it behind the client's
/// own header bytes when `f` changed something.
fn rewrite<T: Decodable + Encodable>(
    key: ApiKey,
    request: &ParsedRequest,
    frame: Bytes,
    f: impl FnOnce(&mut T) -> bool,
) -> Result<Bytes, String> {
    let v = request.api_version();
    let why = |e: String| format!("{key:?} v{v} request naming a shifted mirror topic (source offsets): {e}");
    // `frame` carries the client's header bytes (it may be the request filtered by the gate).
    let start = request.header_len().map_err(|e| why(e.to_string()))?;
    if start > frame.len() {
        return Err(why("frame shorter than its header".into()));
    }
    let mut req = T::decode(&mut frame.slice(start..), v).map_err(|e| why(e.to_string()))?;
    if !f(&mut req) {
        return Ok(frame);
    }
    let mut out = BytesMut::with_capacity(frame.len() + 16);
    out.extend_from_slice(&frame[..start]);
    req.encode(&mut out, v).map_err(|e| why(e.to_string()))?;
    Ok(out.freeze())
}

/// Decodes the response body of `frame`, applies `f`, and re-encodes it behind the broker's
/// header bytes when `f` changed something.
fn edit<T: Decodable + Encodable>(
    key: ApiKey,
    v: i16,
    frame: Bytes,
    f: impl FnOnce(&mut T) -> bool,
) -> Result<Bytes, String> {
    let why = |e: String| format!("{key:?} v{v} response (source offsets): {e}");
    let start = header::response_header_len(&frame, key.response_header_version(v)).map_err(|e| why(e.to_string()))?;
    let mut resp = T::decode(&mut frame.slice(start..), v).map_err(|e| why(e.to_string()))?;
    if !f(&mut resp) {
        return Ok(frame);
    }
    let mut out = BytesMut::with_capacity(frame.len() + 16);
    out.extend_from_slice(&frame[..start]);
    resp.encode(&mut out, v).map_err(|e| why(e.to_string()))?;
    Ok(out.freeze())
}

/// Read caps by destination topic and partition (`ControlPlane::hold_reads`).
pub type ReadCaps = std::collections::HashMap<(String, i32), i64>;

#[cfg(test)]
mod tests;
