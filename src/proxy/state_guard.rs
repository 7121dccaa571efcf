//! Clients cannot read, write or change mirrorgate's state topic (`mirror_state.topic`,
//! default `__mirror_state`) through the proxy: the proxy answers as a destination broker
//! would if an ACL denied every operation on that topic to the client's principal
//! (Kafka's `AuthHelper` / `KafkaApis` rules, Kafka 4.1):
//!
//! - **Listing.** Metadata and DescribeTopicPartitions answers for all topics leave the state
//!   topic out (a broker lists only the topics the principal may DESCRIBE); a request that
//!   names it gets TOPIC_AUTHORIZATION_FAILED (29) for it, with no partitions and a zero
//!   topic id.
//! - **Reads and per-partition requests.** Fetch (by name, and by topic id from v13),
//!   ListOffsets, OffsetForLeaderEpoch, OffsetCommit, TxnOffsetCommit, CreateTopics and
//!   DescribeConfigs: the state topic's entries are taken out of the request, the rest is
//!   forwarded, and each taken entry is added to the broker's answer with
//!   TOPIC_AUTHORIZATION_FAILED, as a broker answers a mix of allowed and denied topics.
//! - Produce, DeleteRecords, DeleteTopics, CreatePartitions, AlterConfigs,
//!   IncrementalAlterConfigs and AddPartitionsToTxn are refused by
//!   [`super::mirror_gate::MirrorGate`] with the machinery that makes mirror topics
//!   read-only (the state topic gets TOPIC_AUTHORIZATION_FAILED there); ids are checked
//!   against the state topic's before they are resolved.
//! - **Refused whole** ([`REFUSED_WHOLE`]): ShareFetch and ShareAcknowledge (KIP-932, topic
//!   ids only) and WriteTxnMarkers containing the state topic's id (or name) are not
//!   forwarded; the connection is closed with a WARN line.
//!
//! **Cost.** A request is decoded only when its bytes contain the state topic's name or one
//! of its topic ids (a `memchr::memmem` search over the frame); every other request passes
//! as the client's own bytes. Decoding is safe on client bytes: the vendored kafka-protocol
//! refuses array counts larger than the bytes left (vendor/kafka-protocol/PATCHED.md).
//! ApiVersions keeps the broker's minimum versions for these APIs and caps their maximum at
//! what kafka-protocol decodes ([`super::versions::intercepted_range`]); a request naming the
//! state topic at a version it cannot decode closes the connection (fail closed).
//!
//! mirrorgate's own state store connects to the destination directly and is not affected.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::describe_topic_partitions_response::{self, DescribeTopicPartitionsResponseTopic};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, FetchRequest, FetchResponse, ListOffsetsRequest,
    ListOffsetsResponse, MetadataRequest, MetadataResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use memchr::memmem;
use uuid::Uuid;

use super::fetch_sessions::FetchSessions;
use crate::wire::header;
use crate::wire::request::ParsedRequest;
#[cfg(test)]
use listing::cursor_past;

mod admin;
mod commits;
mod fetch;
mod listing;
mod offsets;

/// Kafka error TOPIC_AUTHORIZATION_FAILED (29).
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

/// `ConfigResource.Type.TOPIC`.
const TOPIC_RESOURCE: i8 = 2;

/// APIs whose requests the guard looks into when they mention the state topic (besides
/// DescribeTopicPartitions, whose answers are always filtered). ApiVersions caps their
/// maximum version at what kafka-protocol decodes and keeps the broker's minimum.
pub const GUARDED: &[ApiKey] = &[
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::TxnOffsetCommit,
    ApiKey::CreateTopics,
    ApiKey::DescribeConfigs,
    ApiKey::DescribeTopicPartitions,
];

/// APIs refused as a whole, by closing the connection, when they name the state topic
/// ([`StateTopicGuard::check`]).
pub const REFUSED_WHOLE: &[ApiKey] = &[ApiKey::WriteTxnMarkers, ApiKey::ShareFetch, ApiKey::ShareAcknowledge];

/// A rewrite of a whole response frame (header and body), applied after the usual
/// response action.
#[derive(Clone)]
pub struct ResponseMerge(Arc<MergeFn>);

/// Response frame in, rewritten response frame out.
type MergeFn = dyn Fn(&Bytes) -> Result<Bytes, String> + Send + Sync;

impl std::fmt::Debug for ResponseMerge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResponseMerge")
    }
}

impl ResponseMerge {
    /// Applies the rewrite to a response `frame` (header + body, no length prefix).
    ///
    /// # Errors
    /// The response cannot be decoded or encoded.
    pub fn apply(&self, frame: &Bytes) -> Result<Bytes, String> {
        (self.0)(frame)
    }
}

/// What the guard does with a request.
#[derive(Debug)]
pub enum Guarded {
    /// Not the guard's business.
    Pass,
    /// Forward `frame` (the request without the state topic) and pass the answer through
    /// `merge`, which adds the refusals.
    Forward {
        /// The request frame to send.
        frame: Bytes,
        /// Adds TOPIC_AUTHORIZATION_FAILED entries to the answer.
        merge: ResponseMerge,
    },
}

/// A topic entry taken out of a request: its name (empty when named by id), its id (zero
/// when named by name) and its partitions.
#[derive(Debug, Clone)]
pub struct Taken {
    /// The topic name as the client sent it (empty when named by id).
    pub name: TopicName,
    /// The topic id as the client sent it (zero when named by name).
    pub id: Uuid,
    /// Partition indexes.
    pub partitions: Vec<i32>,
}

impl Taken {
    /// Whether `other` names the same topic the same way.
    pub fn same_topic(&self, other: &Taken) -> bool {
        self.name == other.name && self.id == other.id
    }
}

/// Refusals are logged at INFO at most once per this interval; the others are counted.
const LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Rate limit of the INFO line written for refused requests (a consumer polling the state
/// topic would otherwise write one per Fetch).
#[derive(Debug, Default)]
struct RefusalLog {
    /// When the last line was written, and how many refusals were not logged since.
    state: std::sync::Mutex<(Option<std::time::Instant>, u64)>,
}

impl RefusalLog {
    fn note(&self, key: ApiKey, client_id: Option<&str>, partitions: usize) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        if st.0.is_some_and(|t| now.duration_since(t) < LOG_INTERVAL) {
            st.1 += 1;
            return;
        }
        let suppressed = std::mem::take(&mut st.1);
        st.0 = Some(now);
        drop(st);
        tracing::info!(
            api = ?key,
            client_id = client_id.unwrap_or(""),
            partitions,
            suppressed,
            "request for the state topic answered with TOPIC_AUTHORIZATION_FAILED (suppressed: like refusals not logged in the last 10 s)"
        );
    }
}

/// The state topic's name and the topic ids it is known under.
#[derive(Debug)]
pub struct StateTopicGuard {
    name: String,
    ids: RwLock<Vec<[u8; 16]>>,
    sessions: Arc<FetchSessions>,
    log: RefusalLog,
}

fn refusal_message(topic: &str) -> String {
    format!("Not authorized to access topic {topic}: it is mirrorgate's state topic, which clients cannot read, write or change through mirrorgate")
}

impl StateTopicGuard {
    /// A guard for the state topic `name`.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            ids: RwLock::new(Vec::new()),
            sessions: Arc::new(FetchSessions::default()),
            log: RefusalLog::default(),
        }
    }

    /// The state topic's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `topic` is the state topic.
    pub fn is_state_topic(&self, topic: &str) -> bool {
        topic == self.name
    }

    /// Whether `id` is a topic id the state topic is known under.
    pub fn is_state_topic_id(&self, id: &[u8; 16]) -> bool {
        *id != [0; 16] && self.ids.read().unwrap_or_else(|e| e.into_inner()).contains(id)
    }

    /// Records a topic id seen for `topic` (ignored unless `topic` is the state topic or
    /// the id is zero). Ids are kept for the life of the process, so a re-created state
    /// topic's old id stays refused too.
    pub fn learn(&self, id: &[u8; 16], topic: &str) {
        if *id == [0; 16] || !self.is_state_topic(topic) || self.is_state_topic_id(id) {
            return;
        }
        self.ids.write().unwrap_or_else(|e| e.into_inner()).push(*id);
    }

    /// The message a refusal carries.
    pub fn message(&self) -> String {
        refusal_message(&self.name)
    }

    fn mentions_id(&self, frame: &[u8]) -> bool {
        self.ids.read().unwrap_or_else(|e| e.into_inner()).iter().any(|id| memmem::find(frame, id).is_some())
    }

    /// ShareFetch and ShareAcknowledge (KIP-932) name topics by id only; WriteTxnMarkers
    /// (a broker-to-broker API, by name) has no per-topic error a client could act on. A
    /// request of these whose bytes contain the state topic's id (or, for WriteTxnMarkers,
    /// its name) is not forwarded: the connection is closed (fail closed; a 16-byte id
    /// matching by chance is negligible).
    fn refuse_whole(&self, key: ApiKey, request: &ParsedRequest) -> Result<Guarded, String> {
        let frame = request.frame();
        let named = self.mentions_id(frame)
            || (key == ApiKey::WriteTxnMarkers && memmem::find(frame, self.name.as_bytes()).is_some());
        if !named {
            return Ok(Guarded::Pass);
        }
        let client_id = request.client_id().unwrap_or("");
        tracing::warn!(api = ?key, version = request.api_version(), client_id, topic = %self.name, "request naming the state topic refused: connection closed");
        Err(format!(
            "{key:?} v{} names the state topic {}, which clients cannot read, write or change through mirrorgate",
            request.api_version(),
            self.name
        ))
    }

    fn mentions(&self, frame: &[u8]) -> bool {
        memmem::find(frame, self.name.as_bytes()).is_some()
            || self.ids.read().unwrap_or_else(|e| e.into_inner()).iter().any(|id| memmem::find(frame, id).is_some())
    }

    fn named(&self, name: &TopicName, id: &Uuid) -> bool {
        (!name.0.is_empty() && self.is_state_topic(&name.0)) || self.is_state_topic_id(id.as_bytes())
    }

    /// Removes the state topic from a Metadata answer, learning its id first. Returns
    /// whether anything was removed.
    pub fn hide_in_metadata(&self, resp: &mut MetadataResponse) -> bool {
        let before = resp.topics.len();
        resp.topics.retain(|t| match &t.name {
            Some(n) if self.is_state_topic(&n.0) => {
                self.learn(t.topic_id.as_bytes(), &n.0);
                false
            }
            _ => !self.is_state_topic_id(t.topic_id.as_bytes()),
        });
        resp.topics.len() != before
    }

    /// Looks at one client request from the connection of `peer` (fetch sessions are
    /// remembered per connection, [`super::fetch_sessions`]).
    ///
    /// # Errors
    /// The request mentions the state topic and cannot be decoded or re-encoded (the
    /// caller closes the connection with the reason).
    pub fn check(&self, request: &ParsedRequest, peer: SocketAddr) -> Result<Guarded, String> {
        let Ok(key) = ApiKey::try_from(request.api_key()) else { return Ok(Guarded::Pass) };
        if key == ApiKey::DescribeTopicPartitions {
            return self.describe_topic_partitions(request);
        }
        if REFUSED_WHOLE.contains(&key) {
            return self.refuse_whole(key, request);
        }
        let fetch_session = key == ApiKey::Fetch && self.sessions.has(peer);
        if !GUARDED.contains(&key) || !(fetch_session || self.mentions(request.frame())) {
            return Ok(Guarded::Pass);
        }
        let out = self.filtered(key, request, peer);
        out.map_err(|e| {
            tracing::warn!(api = ?key, version = request.api_version(), topic = %self.name, "request mentioning the state topic cannot be decoded: connection closed ({e})");
            format!("request mentioning the state topic {} not forwarded: {e}", self.name)
        })
    }

    /// Takes the state topic's entries out of a guarded request that mentions it: one handler
    /// per api key (Kafka's `KafkaApis.handle`), in `state_guard/`.
    fn filtered(&self, key: ApiKey, request: &ParsedRequest, peer: SocketAddr) -> Result<Guarded, String> {
        match key {
            ApiKey::Fetch => self.fetch(request, peer),
            ApiKey::ListOffsets => self.list_offsets(request),
            ApiKey::OffsetForLeaderEpoch => self.offset_for_leader_epoch(request),
            ApiKey::OffsetCommit => self.offset_commit(request),
            ApiKey::TxnOffsetCommit => self.txn_offset_commit(request),
            ApiKey::CreateTopics => self.create_topics(request),
            ApiKey::DescribeConfigs => self.describe_configs(request),
            ApiKey::Metadata => self.metadata(request),
            _ => Ok(Guarded::Pass),
        }
    }
}

/// Takes the entries matching `hit` out of `items`, describing each with `describe`.
fn take<T>(items: &mut Vec<T>, hit: impl Fn(&T) -> bool, describe: impl Fn(&T) -> Taken) -> Vec<Taken> {
    let mut taken = Vec::new();
    items.retain(|t| {
        if hit(t) {
            taken.push(describe(t));
            false
        } else {
            true
        }
    });
    taken
}

/// Decodes the request, takes the state topic's entries out with `take_out`; if there were
/// any, re-encodes the rest behind the client's own header and returns a merge that adds
/// them to the answer with `add`.
fn filter<Req, Resp>(
    log: &RefusalLog,
    key: ApiKey,
    request: &ParsedRequest,
    take_out: impl FnOnce(&mut Req) -> Vec<Taken>,
    add: impl Fn(&mut Resp, &[Taken]) + Send + Sync + 'static,
) -> Result<Guarded, String>
where
    Req: Decodable + Encodable,
    Resp: Decodable + Encodable + 'static,
{
    let v = request.api_version();
    let mut req: Req = decode(key, request)?;
    let taken = take_out(&mut req);
    if taken.is_empty() {
        return Ok(Guarded::Pass);
    }
    log.note(key, request.client_id(), taken.iter().map(|t| t.partitions.len()).sum());
    let frame = reencoded(key, request, &req)?;
    let merge = response_merge(key, v, move |resp: &mut Resp| add(resp, &taken));
    Ok(Guarded::Forward { frame, merge })
}

/// The body of `request` decoded at its version, with the messages a refused request is
/// closed with.
fn decode<Req: Decodable>(key: ApiKey, request: &ParsedRequest) -> Result<Req, String> {
    let v = request.api_version();
    let mut body = request.body().map_err(|e| format!("malformed {key:?} header: {e}"))?;
    Req::decode(&mut body, v).map_err(|e| format!("malformed {key:?} v{v} request: {e}"))
}

/// `req` encoded at the request's version behind the client's own header bytes.
fn reencoded<Req: Encodable>(key: ApiKey, request: &ParsedRequest, req: &Req) -> Result<Bytes, String> {
    let v = request.api_version();
    request
        .with_body(|out| req.encode(out, v))
        .map_err(|e: anyhow::Error| format!("cannot encode {key:?} v{v} request: {e}"))
}

fn response_merge<Resp>(key: ApiKey, v: i16, edit: impl Fn(&mut Resp) + Send + Sync + 'static) -> ResponseMerge
where
    Resp: Decodable + Encodable + 'static,
{
    ResponseMerge(Arc::new(move |frame: &Bytes| {
        let hv = key.response_header_version(v);
        let cid = header::response_correlation_id(frame).map_err(|e| e.to_string())?;
        let start = header::response_header_len(frame, hv).map_err(|e| e.to_string())?;
        let mut resp = Resp::decode(&mut frame.slice(start..), v).map_err(|e| format!("{key:?} v{v} response: {e}"))?;
        edit(&mut resp);
        let mut out = BytesMut::with_capacity(frame.len() + 64);
        header::put_response_header(&mut out, cid, hv);
        resp.encode(&mut out, v).map_err(|e| format!("{key:?} v{v} response: {e}"))?;
        Ok(out.freeze())
    }))
}

#[cfg(test)]
#[path = "state_guard_tests.rs"]
mod tests;
