//! Where the proxy meets the control plane: mirror admin RPCs and CLUSTER_MIRROR configs are
//! answered locally, and writes to mirror topics are refused (DESIGN §4 "Read-only means").
//!
//! Every request that could touch a mirror topic is first walked with `wire::scan` (no
//! allocation from unchecked wire counts, no record payload parsed); only then, and only if
//! it names a mirror topic or a mirror resource, is it decoded with kafka-protocol. Requests
//! that touch no mirror topic are forwarded as the client's own bytes.
//!
//! Errors per API (the closest each API's clients understand, always with a message where the
//! response has a message field): Produce → POLICY_VIOLATION (44) per partition with the
//! mirror named in the partition's error message, the other partitions of the request are
//! written (never the KIP's provisional READ_ONLY_TOPIC 134: no released client knows it, and
//! Kafka 4.x and the clients that follow it read 134 as GROUP_DELETION_FAILED; see
//! docs/protocol.md "Error codes"); AddPartitionsToTxn → TOPIC_AUTHORIZATION_FAILED
//! (clients abort the transaction); DeleteRecords, CreatePartitions, DeleteTopics,
//! AlterConfigs and IncrementalAlterConfigs on a mirror topic → POLICY_VIOLATION with the
//! mirror named. A mixed admin request (mirror and other topics) is refused as a whole, each
//! other topic with INVALID_REQUEST and a message saying to send it separately.
//!
//! [`MirrorGate::intercept`] dispatches on the api key to one handler each (Kafka's
//! `KafkaApis.handle`), in `mirror_gate/`: `mirror_rpc` (the KIP-1279 RPCs), `produce`,
//! `configs` (DescribeConfigs, IncrementalAlterConfigs, AlterConfigs), `topics`
//! (CreatePartitions, DeleteTopics, DeleteRecords) and `txn` (AddPartitionsToTxn); each
//! receives the request parsed once by the connection ([`ParsedRequest`]).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use dashmap::DashMap;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::authz::{self, AclCache, Operation, CLUSTER_AUTHORIZATION_FAILED, SASL_AUTHENTICATION_FAILED};
use super::identity::ClientIdentity;
use super::state_guard::{Guarded, StateTopicGuard};
use crate::mirror::config_rpc;
use crate::mirror::control::ControlPlane;
use crate::mirror::topics::{uuid_from_base64, ClusterAccess};
use crate::wire::header;
use crate::wire::mirror::{KafkaUuid, MirrorApiTable};
use crate::wire::request::{ParsedRequest, RequestHeader};
use crate::wire::scan::{self, TopicRef};

mod configs;
mod mirror_rpc;
mod produce;
mod topics;
mod txn;

pub use produce::produce_rejections;

/// Kafka error POLICY_VIOLATION (44).
pub const POLICY_VIOLATION: i16 = 44;
/// Kafka error TOPIC_AUTHORIZATION_FAILED (29).
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

/// A partition of a Produce request refused because its topic is a mirror topic.
#[derive(Debug, Clone)]
pub struct Rejected {
    /// The topic as the request named it.
    pub topic: TopicRef,
    /// Partition index.
    pub partition: i32,
    /// The message returned to the client.
    pub message: String,
    /// The error code: POLICY_VIOLATION (44) for a mirror topic, TOPIC_AUTHORIZATION_FAILED
    /// (29) for the state topic.
    pub code: i16,
}

/// What the proxy does with a request after the gate looked at it.
#[derive(Debug)]
pub enum GateDecision {
    /// Not the gate's business: route as usual.
    Pass,
    /// Answer with this response frame (header + body); nothing goes upstream.
    Local(Bytes),
    /// Nothing is sent upstream and no response is due (Produce acks=0, all refused).
    Drop,
    /// Send `frame` (a request without the state topic's entries) and pass the answer
    /// through `merge` ([`super::state_guard`]).
    ForwardMerge {
        /// The filtered request frame.
        frame: Bytes,
        /// Adds the refused entries to the answer.
        merge: super::state_guard::ResponseMerge,
    },
    /// Send `frame` (the request without the refused partitions) and add `rejected` to the
    /// broker's Produce response.
    ForwardProduce {
        /// The filtered request frame.
        frame: Bytes,
        /// Whether the broker will answer (acks != 0).
        expect_response: bool,
        /// Partitions to add to the response with POLICY_VIOLATION.
        rejected: Arc<Vec<Rejected>>,
    },
}

/// The mirror side of the proxy.
pub struct MirrorGate {
    /// The control plane.
    pub control: Arc<ControlPlane>,
    /// Mirror RPC api keys.
    pub table: MirrorApiTable,
    destination: ClusterAccess,
    /// Destination topic id (Kafka `uuid`, 16 bytes) → name, for Produce v13 and DeleteTopics
    /// v6: looked up with every Produce v13 request, so keyed by the bytes as they come and
    /// shared, not copied, on a hit.
    topic_names: DashMap<[u8; 16], Arc<str>>,
    /// The destination's CLUSTER ACLs, for authorizing what mirrorgate answers itself.
    acls: AclCache,
    /// Whether the destination authenticates its clients, so that mirrorgate answers only
    /// authenticated ones ([`authz::destination_authenticates`]).
    require_authentication: bool,
    /// Keeps clients away from the state topic.
    pub state: StateTopicGuard,
    /// The runtime it was made on (the main runtime): lookups that open a destination
    /// connection run there, not on a client connection's network thread.
    main: Option<tokio::runtime::Handle>,
}

impl std::fmt::Debug for MirrorGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorGate").field("table", &self.table).finish()
    }
}

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn read_only_message(topic: &str, mirror: &str) -> String {
    format!("topic {topic} is a read-only mirror topic of mirror {mirror}; writes are refused until the mirror is stopped (failover)")
}

impl MirrorGate {
    /// A gate over `control`, answering mirror RPCs on the keys of `table`.
    /// `acl_client` reads the destination's ACLs (mirrorgate's own connection);
    /// `require_authentication`: answer only clients the destination authenticated.
    pub fn new(
        control: Arc<ControlPlane>,
        table: MirrorApiTable,
        destination: ClusterAccess,
        acl_client: crate::client::cluster::ClusterClient,
        super_users: Vec<String>,
        require_authentication: bool,
        state: StateTopicGuard,
    ) -> Self {
        Self {
            control,
            table,
            destination,
            topic_names: DashMap::new(),
            acls: AclCache::new(acl_client, super_users),
            require_authentication,
            state,
            main: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// `(api_key, min_version, max_version)` of the mirror RPCs, for ApiVersions.
    pub fn advertised(&self) -> Vec<(i16, i16, i16)> {
        self.table.entries().iter().map(|e| (e.api_key, e.versions.min, e.versions.max)).collect()
    }

    /// Whether any mirror topic exists (Fetch responses then need a look).
    pub fn has_mirror_topics(&self) -> bool {
        self.control.has_topics()
    }

    /// The name of a destination topic id learned from Metadata, without asking the cluster.
    pub fn known_topic_name(&self, id: &[u8; 16]) -> Option<String> {
        self.topic_names.get(id).map(|n| n.to_string())
    }

    /// Records a topic id seen in a Metadata response.
    pub fn learn_topic_id(&self, id: &[u8; 16], name: &str) {
        if *id != [0; 16] {
            self.state.learn(id, name);
            if self.topic_names.get(id).is_none_or(|known| **known != *name) {
                self.topic_names.insert(*id, Arc::from(name));
            }
        }
    }

    /// The name of destination topic `id`. The state topic's ids are checked first, so a
    /// request naming the state topic by id is refused even when the destination cannot be
    /// asked (fail closed).
    async fn topic_name_for_id(&self, id: &KafkaUuid) -> Option<Arc<str>> {
        if self.state.is_state_topic_id(&id.0) {
            return Some(Arc::from(self.state.name()));
        }
        if let Some(n) = self.topic_names.get(&id.0) {
            return Some(n.clone());
        }
        // A new destination connection (TLS, SASL key derivation): made on the main runtime.
        let topics = match &self.main {
            Some(main) => {
                let destination = self.destination.clone();
                main.spawn(async move { destination.topics().await }).await.ok()
            }
            None => Some(self.destination.topics().await),
        };
        if let Some(Ok((_, topics))) = topics {
            for t in topics.values() {
                if let Some(topic_id) = uuid_from_base64(&t.topic_id) {
                    self.topic_names.insert(topic_id, Arc::from(t.name.as_str()));
                }
            }
        }
        let name = self.topic_names.get(&id.0).map(|n| n.clone());
        if let Some(n) = &name {
            self.state.learn(&id.0, n);
        }
        name
    }

    /// Whether a request of `api_key` is handled on the main runtime rather than on the
    /// client connection's network thread (`proxy::network_threads`): the mirror RPCs and
    /// the config RPCs, whose handling reads the destination's ACLs through the shared cluster
    /// client, reads or writes the mirror state, or connects to a source cluster (TLS key
    /// stores, SASL/SCRAM key derivation, OAuth logins). Their connections and tasks then
    /// belong to the main runtime, and slow admin work never holds up the other connections
    /// of a network thread. Produce, Fetch and every other request stay on the network thread.
    pub fn runs_on_main(&self, api_key: i16) -> bool {
        self.table.lookup(api_key).is_some()
            || api_key == ApiKey::DescribeConfigs as i16
            || api_key == ApiKey::IncrementalAlterConfigs as i16
    }

    /// Looks at one client request. `admin_listener` says whether the listener answers
    /// mirror admin RPCs.
    ///
    /// # Errors
    /// A reason to close the connection (a request that cannot be walked safely).
    pub async fn intercept(
        &self,
        request: &ParsedRequest,
        admin_listener: bool,
        identity: &ClientIdentity,
    ) -> Result<GateDecision, String> {
        let prefix = request.header();
        if let Some(api) = self.table.lookup(prefix.api_key) {
            return self.mirror_admin(api, request, admin_listener, identity).await.map(GateDecision::Local);
        }
        let Ok(key) = ApiKey::try_from(prefix.api_key) else { return Ok(GateDecision::Pass) };
        if key != ApiKey::DescribeConfigs {
            if let Guarded::Forward { frame, merge } = self.state.check(request, identity.peer)? {
                return Ok(GateDecision::ForwardMerge { frame, merge });
            }
        }
        // ApiVersions advertises only the versions the walker covers for these APIs; a client
        // that sends another one anyway is closed rather than let past the read-only check.
        if let Some(r) = scan::supported_versions(prefix.api_key) {
            if prefix.api_version < r.min || prefix.api_version > r.max {
                return Err(format!(
                    "{key:?} v{} is not supported by mirrorgate (supported: v{}-v{})",
                    prefix.api_version, r.min, r.max
                ));
            }
        }
        // One handler per api key (Kafka's `KafkaApis.handle`); the others pass.
        match key {
            ApiKey::Produce => self.produce(request).await,
            ApiKey::DescribeConfigs => self.describe_configs(request, admin_listener, identity).await,
            ApiKey::IncrementalAlterConfigs => self.incremental_alter_configs(request, admin_listener, identity).await,
            ApiKey::AlterConfigs => self.alter_configs(request),
            ApiKey::CreatePartitions => self.create_partitions(request),
            ApiKey::DeleteTopics => self.delete_topics(request).await,
            ApiKey::DeleteRecords => self.delete_records(request),
            ApiKey::AddPartitionsToTxn => self.add_partitions_to_txn(request),
            _ => Ok(GateDecision::Pass),
        }
    }

    /// Why a request may not change `topic`: POLICY_VIOLATION (44) with the read-only
    /// message for a mirror topic, TOPIC_AUTHORIZATION_FAILED (29) for the state topic.
    fn refusal(&self, topic: &str) -> Option<(i16, String)> {
        if self.state.is_state_topic(topic) {
            return Some((TOPIC_AUTHORIZATION_FAILED, self.state.message()));
        }
        self.control.read_only_mirror(topic).map(|m| (POLICY_VIOLATION, read_only_message(topic, &m)))
    }

    /// `None` when no topic is a read-only mirror topic or the state topic; otherwise one
    /// `(name, code, message)` per topic in request order.
    fn refusals(&self, topics: &[String], verb: &str) -> Option<Vec<(String, i16, String)>> {
        let refused: Vec<Option<(i16, String)>> = topics.iter().map(|t| self.refusal(t)).collect();
        let first = refused.iter().zip(topics).find_map(|(r, t)| r.as_ref().map(|_| t.clone()))?;
        Some(
            topics
                .iter()
                .zip(refused)
                .map(|(t, r)| match r {
                    Some((code, why)) => (t.clone(), code, format!("cannot {verb} topic {t}: {why}")),
                    None => (
                        t.clone(),
                        config_rpc::INVALID_REQUEST,
                        format!("not attempted: the same request names topic {first}, which clients cannot change through mirrorgate; send requests for other topics separately"),
                    ),
                })
                .collect(),
        )
    }

    /// Whether mirrorgate answers `op` for `identity` itself on this listener: only on an
    /// `admin: true` listener, only for an authenticated principal where the destination
    /// authenticates its clients, and as the destination's CLUSTER ACLs allow.
    ///
    /// # Errors
    /// The refusal's error code (CLUSTER_AUTHORIZATION_FAILED, SASL_AUTHENTICATION_FAILED)
    /// and message.
    async fn allowed(
        &self,
        identity: &ClientIdentity,
        op: Operation,
        admin_listener: bool,
    ) -> Result<(), (i16, String)> {
        if !admin_listener {
            tracing::warn!(peer = %identity.peer, "mirror config request refused on a listener without `admin: true`");
            return Err((
                CLUSTER_AUTHORIZATION_FAILED,
                "mirror requests, mirror configs included, are only answered on listeners with `admin: true` in proxy.yaml".into(),
            ));
        }
        let principal = authz::authenticated_principal(&identity.who(), self.require_authentication).map_err(|m| {
            tracing::warn!(peer = %identity.peer, operation = ?op, "mirror request refused: {m}");
            (SASL_AUTHENTICATION_FAILED, m)
        })?;
        self.acls.authorize(&principal, identity.host, op).await.map_err(|m| (CLUSTER_AUTHORIZATION_FAILED, m))
    }
}

const UNSUPPORTED_VERSION: i16 = 35;
/// Kafka error OPERATION_NOT_ATTEMPTED (55).
const OPERATION_NOT_ATTEMPTED: i16 = 55;

fn uuid_of(u: &KafkaUuid) -> uuid::Uuid {
    uuid::Uuid::from_bytes(u.0)
}

/// The close reason for a request of `key` that did not pass its walk.
fn bad(key: ApiKey, request: &ParsedRequest) -> impl Fn(scan::ScanError) -> String {
    let v = request.api_version();
    move |e| format!("malformed {key:?} v{v} request: {e}")
}

fn decode_body<T: Decodable>(key: ApiKey, request: &ParsedRequest) -> Result<T, String> {
    let mut body = request.body().map_err(|e| format!("malformed {key:?} header: {e}"))?;
    T::decode(&mut body, request.api_version()).map_err(|e| format!("malformed {key:?} request: {e}"))
}

fn encode_response<T: Encodable>(key: ApiKey, prefix: &RequestHeader, resp: &T) -> Result<Bytes, String> {
    let mut out = BytesMut::new();
    header::put_response_header(&mut out, prefix.correlation_id, key.response_header_version(prefix.api_version));
    resp.encode(&mut out, prefix.api_version).map_err(|e| format!("cannot encode {key:?} response: {e}"))?;
    Ok(out.freeze())
}

/// Encodes a response body at a version.
type BodyEncoder = Box<dyn Fn(&mut BytesMut, i16) -> anyhow::Result<()>>;

fn encode_any<T: Encodable + 'static>(resp: T) -> BodyEncoder {
    Box::new(move |out, v| resp.encode(out, v))
}
