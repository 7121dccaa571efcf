//! Fetch responses (api key 1, v4+) on their way to the client (issue 13, item 4): the broker's
//! own bytes whenever nothing in them needs changing, decided by a walk over the body
//! ([`crate::wire::fetch_scan`]) without a decode; otherwise decoded with kafka-protocol and
//! edited: KIP-951 `node_endpoints` pointed at mirrorgate ([`rewrite::fetch`]), placeholder
//! batches turned into COMMIT control batches and LogAppendTime restored
//! ([`replace_placeholders`]), source offsets and read caps for shifted mirror partitions
//! ([`present::fetch::response`]). It must never forward a response one of those edits would
//! change: [`needs_edit`] errs towards the decode, and a body the walk refuses is decoded (and
//! refused by the decoder as before).

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::FetchResponse;
use kafka_protocol::protocol::Decodable;

use crate::mirror::offset_maps::OffsetMaps;
use crate::mirror::topics::base64_uuid;
use crate::wire::batch;
use crate::wire::fetch_scan::{self, FetchResponseScan};

use super::intercept::restore_mirror_records;
use super::mirror_gate::MirrorGate;
use super::present::{self, ReadCaps};
use super::rewrite::{self, AddressMap};

/// What the Fetch edits need to know of the mirror topics.
pub trait MirrorTopics {
    /// The name of the destination topic with id `topic_id` (Kafka `uuid`, 16 bytes): learned
    /// from Metadata, or else the mirror topic whose partition states copy into it; `None`
    /// when neither knows it.
    fn topic_name(&self, topic_id: &[u8; 16]) -> Option<String>;
    /// Whether `topic` is a mirror topic whose source stamps LogAppendTime (DESIGN §4.10).
    fn source_log_append_time(&self, topic: &str) -> bool;
}

impl MirrorTopics for MirrorGate {
    fn topic_name(&self, topic_id: &[u8; 16]) -> Option<String> {
        self.known_topic_name(topic_id).or_else(|| self.control.mirror_topic_by_destination_id(&base64_uuid(topic_id)))
    }

    fn source_log_append_time(&self, topic: &str) -> bool {
        self.control.source_log_append_time(topic)
    }
}

/// The mirror state one Fetch response is looked at and edited with, read once per response.
pub struct FetchContext<'a> {
    /// Read caps by destination topic and partition (destination offsets,
    /// `ControlPlane::hold_reads`); usually empty.
    pub caps: ReadCaps,
    /// The shifted partitions' offset maps (read after `caps`, as [`present::response`] does).
    pub maps: Arc<OffsetMaps>,
    /// Whether any mirror topic's source stamps LogAppendTime.
    pub any_log_append_time: bool,
    /// Topic names and LogAppendTime sources.
    pub topics: &'a (dyn MirrorTopics + Sync),
}

impl<'a> FetchContext<'a> {
    /// The current state of `gate`'s control plane: caps first, then the maps (a cap released
    /// between the two was released after the maps it protects were rebuilt).
    pub fn of(gate: &'a MirrorGate) -> Self {
        let caps = gate.control.read_caps();
        let maps = gate.control.offset_maps();
        Self { caps, maps, any_log_append_time: gate.control.any_source_log_append_time(), topics: gate }
    }

    /// The name of a response topic: `name` itself (v4–12), or its `topic_id`'s (v13+).
    fn name<'n>(&self, name: &'n str, topic_id: &[u8; 16]) -> Option<Cow<'n, str>> {
        if name.is_empty() {
            self.topics.topic_name(topic_id).map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(name))
        }
    }

    /// Whether the data batches of a response topic get their LogAppendTime type back.
    fn log_append_time(&self, name: &str, topic_id: &[u8; 16]) -> bool {
        self.any_log_append_time && self.name(name, topic_id).is_some_and(|n| self.topics.source_log_append_time(&n))
    }

    /// Whether some partition of a response topic has a read cap (any partition: a topic-level
    /// look, so that no partition key is built).
    fn capped(&self, name: &str, topic_id: &[u8; 16]) -> bool {
        !self.caps.is_empty() && self.name(name, topic_id).is_some_and(|n| self.caps.keys().any(|(t, _)| *t == *n))
    }

    /// Whether one of `partitions` of a response topic is shifted; also `true` when the topic
    /// cannot be told apart from a shifted one (an unknown id while a shifted topic's id is
    /// unknown: the edit skips such a topic, the decode costs nothing more).
    fn shifted(&self, name: &str, topic_id: &[u8; 16], mut partitions: impl Iterator<Item = i32>) -> bool {
        if self.maps.is_empty() {
            return false;
        }
        match self.maps.topic_ref_resolved(name, topic_id, &|id| self.topics.topic_name(id)) {
            Ok(Some(tm)) => partitions.any(|p| tm.partition(p).is_some()),
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// Whether a response topic (`name` v4–12, else `topic_id`) needs an edit for the mirror
    /// state whatever its records hold: its source stamps LogAppendTime, one of its partitions
    /// has a read cap, or one of `partitions` is shifted.
    pub fn topic_needs_edit(&self, name: &str, topic_id: &[u8; 16], partitions: impl Iterator<Item = i32>) -> bool {
        if crate::sabotage::active("read-uncommitted") {
            return true; // a broken build only (src/sabotage.rs): never streamed unedited
        }
        if !self.any_log_append_time && self.caps.is_empty() && self.maps.is_empty() {
            return false;
        }
        self.log_append_time(name, topic_id) || self.capped(name, topic_id) || self.shifted(name, topic_id, partitions)
    }

    /// [`present::fetch::response`] with this state.
    fn present(&self, resp: &mut FetchResponse) -> bool {
        let resolve = |id: &[u8; 16]| self.topics.topic_name(id);
        let cap = |t: &str, p: i32| self.caps.get(&(t.to_owned(), p)).copied();
        present::fetch::response(resp, &self.maps, &resolve, !self.caps.is_empty(), &cap)
    }
}

/// Whether the Fetch response walked as `scan` from `body` needs one of the edits: its
/// `node_endpoints` are non-empty, a partition's `records` hold a placeholder batch
/// ([`batch::has_placeholder`], the same check the edit makes), or, with `ctx`, a topic is a
/// LogAppendTime mirror topic, has a read-capped partition, or has a shifted partition among
/// those in the response. `false` means every edit would leave the response as it is.
pub fn needs_edit(scan: &FetchResponseScan<'_>, body: &[u8], ctx: Option<&FetchContext<'_>>) -> bool {
    if scan.node_endpoints {
        return true;
    }
    let placeholder = |p: &fetch_scan::FetchPartitionScan| {
        p.records.as_ref().is_some_and(|r| body.get(r.clone()).is_none_or(batch::has_placeholder))
    };
    if scan.partitions.iter().any(placeholder) {
        return true;
    }
    let Some(ctx) = ctx else { return false };
    scan.topics.iter().any(|t| {
        let (name, id) = t.topic.name_and_id();
        ctx.topic_needs_edit(name, &id, scan.partitions_of(t).iter().map(|p| p.partition_index))
    })
}

/// Applies every edit to a decoded Fetch response; whether anything changed.
fn edit(resp: &mut FetchResponse, map: &impl AddressMap, ctx: Option<&FetchContext<'_>>) -> bool {
    let endpoints = rewrite::fetch(resp, map);
    let placeholders = replace_placeholders(resp, ctx);
    // After the placeholders: base offsets of the batches as the client gets them.
    let offsets = ctx.is_some_and(|c| c.present(resp));
    endpoints || placeholders || offsets
}

/// The Fetch response `body` (after the response header) at `version` as the client must get
/// it: `None` when the broker's bytes go as they are, else the edited response to encode at
/// `version`. A body that [`fetch_scan::fetch_response`] refuses is decoded as before, so a
/// malformed one fails with the decoder's error.
///
/// # Errors
/// The body does not decode as a Fetch response at `version` (kafka-protocol's error).
pub fn response(
    body: &Bytes,
    version: i16,
    map: &impl AddressMap,
    ctx: Option<&FetchContext<'_>>,
) -> anyhow::Result<Option<FetchResponse>> {
    let sabotage = crate::sabotage::active("read-uncommitted");
    if let Ok(scan) = fetch_scan::fetch_response(body, version) {
        if !sabotage && !needs_edit(&scan, body, ctx) {
            return Ok(None);
        }
    }
    let mut resp = FetchResponse::decode(&mut body.clone(), version)?;
    let edited = edit(&mut resp, map, ctx);
    if sabotage {
        // A broken build only (src/sabotage.rs): aborted records reach read_committed readers.
        for p in resp.responses.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            p.aborted_transactions = None;
        }
        return Ok(Some(resp));
    }
    Ok(edited.then_some(resp))
}

/// Restores the source's view in a Fetch response: in every partition, whatever the topic,
/// each placeholder batch becomes a synthesised COMMIT control batch for the same offsets
/// (DESIGN §4.3), so clients skip those offsets exactly as they skip transaction markers and
/// compaction holes on the source. Placeholders are recognised by content
/// ([`crate::wire::batch::has_placeholder`], a header walk per partition), so a topic id the
/// proxy has not learned yet (right after a restart) and a topic whose mirror was deleted are
/// served right too. For a mirror topic whose source stamps LogAppendTime, each data batch
/// also gets its timestamp type back (the destination keeps the append time as the batch's
/// max timestamp, DESIGN §4.10); that needs the topic to be a mirror topic of `ctx`, found by
/// name, by a learned topic id, or by the destination topic id in the mirror's partition
/// states. Returns whether anything changed.
fn replace_placeholders(resp: &mut FetchResponse, ctx: Option<&FetchContext<'_>>) -> bool {
    let mut changed = false;
    for t in &mut resp.responses {
        let log_append_time = ctx.is_some_and(|c| c.log_append_time(&t.topic.0, t.topic_id.as_bytes()));
        for p in &mut t.partitions {
            let Some(records) = &p.records else { continue };
            if let Some(restored) = restore_mirror_records(records, log_append_time) {
                p.records = Some(restored);
                changed = true;
            }
        }
    }
    changed
}

#[cfg(test)]
pub(crate) mod tests;
