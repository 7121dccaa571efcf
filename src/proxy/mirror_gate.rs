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

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use dashmap::DashMap;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as AlterResult;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncResult;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    AddPartitionsToTxnResponse, AlterConfigsResponse, ApiKey, CreatePartitionsResponse, DeleteRecordsResponse,
    DeleteTopicsResponse, DescribeConfigsRequest, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    ProduceResponse, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::authz::{self, AclCache, Operation, CLUSTER_AUTHORIZATION_FAILED, SASL_AUTHENTICATION_FAILED};
use super::identity::ClientIdentity;
use super::state_guard::{Guarded, StateTopicGuard};
use crate::mirror::control::ControlPlane;
use crate::mirror::topics::{uuid_from_base64, ClusterAccess};
use crate::mirror::{admin, config_rpc};
use crate::wire::header;
use crate::wire::mirror::{self as mwire, KafkaUuid, MirrorApiTable};
use crate::wire::request::{ParsedRequest, RequestHeader};
use crate::wire::scan::{self, TopicRef};

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
        let bad = |e: scan::ScanError| format!("malformed {key:?} v{} request: {e}", prefix.api_version);
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
        match key {
            ApiKey::Produce => self.produce(request).await,
            ApiKey::DescribeConfigs => {
                let res = scan::describe_configs_resources(request, prefix.api_version).map_err(bad)?;
                let any = config_rpc::names_mirror_resource(res.iter().map(|r| r.resource_type));
                if !any {
                    return Ok(match self.state.check(request, identity.peer)? {
                        Guarded::Forward { frame, merge } => GateDecision::ForwardMerge { frame, merge },
                        Guarded::Pass => GateDecision::Pass,
                    });
                }
                let req: DescribeConfigsRequest = decode_body(key, request)?;
                let resp = match self.allowed(identity, Operation::Describe, admin_listener).await {
                    Ok(()) => config_rpc::describe(&self.control, &req),
                    Err((code, m)) => config_rpc::refuse_describe(&req, code, &m),
                };
                Ok(GateDecision::Local(encode_response(key, prefix, &resp)?))
            }
            ApiKey::IncrementalAlterConfigs => {
                let res = scan::incremental_alter_configs_resources(request, prefix.api_version).map_err(bad)?;
                let any = config_rpc::names_mirror_resource(res.iter().map(|r| r.resource_type));
                if any {
                    let req: IncrementalAlterConfigsRequest = decode_body(key, request)?;
                    let resp = match self.allowed(identity, Operation::Alter, admin_listener).await {
                        Ok(()) => config_rpc::incremental_alter(&self.control, &req).await,
                        Err((code, m)) => config_rpc::refuse_alter(&req, code, &m),
                    };
                    return Ok(GateDecision::Local(encode_response(key, prefix, &resp)?));
                }
                let names: Vec<(i8, String)> =
                    res.iter().map(|r| (r.resource_type, r.resource_name.to_string())).collect();
                self.refuse_configs(key, prefix, names, |responses| {
                    encode_any(
                        IncrementalAlterConfigsResponse::default().with_responses(
                            responses
                                .into_iter()
                                .map(|(t, n, c, m)| {
                                    IncResult::default()
                                        .with_resource_type(t)
                                        .with_resource_name(s(n))
                                        .with_error_code(c)
                                        .with_error_message(m)
                                })
                                .collect(),
                        ),
                    )
                })
            }
            ApiKey::AlterConfigs => {
                let res = scan::alter_configs_resources(request, prefix.api_version).map_err(bad)?;
                let names: Vec<(i8, String)> =
                    res.iter().map(|r| (r.resource_type, r.resource_name.to_string())).collect();
                self.refuse_configs(key, prefix, names, |responses| {
                    encode_any(
                        AlterConfigsResponse::default().with_responses(
                            responses
                                .into_iter()
                                .map(|(t, n, c, m)| {
                                    AlterResult::default()
                                        .with_resource_type(t)
                                        .with_resource_name(s(n))
                                        .with_error_code(c)
                                        .with_error_message(m)
                                })
                                .collect(),
                        ),
                    )
                })
            }
            ApiKey::CreatePartitions => {
                let topics: Vec<String> = scan::create_partitions_topics(request, prefix.api_version)
                    .map_err(bad)?
                    .into_iter()
                    .map(|t| t.0.to_string())
                    .collect();
                let Some(results) = self.refusals(&topics, "add partitions to") else { return Ok(GateDecision::Pass) };
                let resp = CreatePartitionsResponse::default().with_results(
                    results
                        .into_iter()
                        .map(|(n, c, m)| {
                            CreatePartitionsTopicResult::default()
                                .with_name(TopicName(s(n)))
                                .with_error_code(c)
                                .with_error_message(Some(s(m)))
                        })
                        .collect(),
                );
                Ok(GateDecision::Local(encode_response(key, prefix, &resp)?))
            }
            ApiKey::DeleteTopics => {
                let entries = scan::delete_topics_topics(request, prefix.api_version).map_err(bad)?;
                let mut topics = Vec::new();
                for e in &entries {
                    let name = match (&e.name, &e.topic_id) {
                        (Some(n), _) => Some(n.0.to_string()),
                        (None, Some(id)) => self.topic_name_for_id(id).await.map(|n| n.to_string()),
                        (None, None) => None,
                    };
                    topics.push(name.unwrap_or_default());
                }
                let Some(results) = self.refusals(&topics, "delete") else { return Ok(GateDecision::Pass) };
                let resp = DeleteTopicsResponse::default().with_responses(
                    results
                        .into_iter()
                        .zip(&entries)
                        .map(|((n, c, m), e)| {
                            DeletableTopicResult::default()
                                .with_name(Some(TopicName(s(n))))
                                .with_topic_id(e.topic_id.map(|u| uuid_of(&u)).unwrap_or_default())
                                .with_error_code(c)
                                .with_error_message(Some(s(m)))
                        })
                        .collect(),
                );
                Ok(GateDecision::Local(encode_response(key, prefix, &resp)?))
            }
            ApiKey::DeleteRecords => {
                let tps = scan::delete_records_topics(request, prefix.api_version).map_err(bad)?;
                let names: Vec<String> = tps.iter().map(|t| t.name.0.to_string()).collect();
                let Some(results) = self.refusals(&names, "delete records of") else { return Ok(GateDecision::Pass) };
                for (n, _, m) in &results {
                    tracing::warn!(topic = %n, "DeleteRecords refused: {m}");
                }
                let resp = DeleteRecordsResponse::default().with_topics(
                    results
                        .into_iter()
                        .zip(&tps)
                        .map(|((n, c, _), t)| {
                            DeleteRecordsTopicResult::default().with_name(TopicName(s(n))).with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        DeleteRecordsPartitionResult::default()
                                            .with_partition_index(*p)
                                            .with_low_watermark(-1)
                                            .with_error_code(c)
                                    })
                                    .collect(),
                            )
                        })
                        .collect(),
                );
                Ok(GateDecision::Local(encode_response(key, prefix, &resp)?))
            }
            ApiKey::AddPartitionsToTxn => {
                let txns = scan::add_partitions_to_txn_topics(request, prefix.api_version).map_err(bad)?;
                let mut hit = None;
                for t in txns.iter().flat_map(|t| &t.topics) {
                    if let Some((_, m)) = self.refusal(&t.name.0) {
                        hit = Some((t.name.0.to_string(), m));
                        break;
                    }
                }
                let Some((topic, reason)) = hit else { return Ok(GateDecision::Pass) };
                tracing::warn!(topic = %topic, "AddPartitionsToTxn refused: {reason}");
                let topic_results = |t: &scan::TxnTopics| -> Vec<AddPartitionsToTxnTopicResult> {
                    t.topics
                        .iter()
                        .map(|tp| {
                            let code = if self.refusal(&tp.name.0).is_some() {
                                TOPIC_AUTHORIZATION_FAILED
                            } else {
                                OPERATION_NOT_ATTEMPTED
                            };
                            AddPartitionsToTxnTopicResult::default()
                                .with_name(tp.name.clone())
                                .with_results_by_partition(
                                    tp.partitions
                                        .iter()
                                        .map(|p| {
                                            AddPartitionsToTxnPartitionResult::default()
                                                .with_partition_index(*p)
                                                .with_partition_error_code(code)
                                        })
                                        .collect(),
                                )
                        })
                        .collect()
                };
                let mut resp = AddPartitionsToTxnResponse::default();
                if prefix.api_version >= 4 {
                    resp.results_by_transaction = txns
                        .iter()
                        .map(|t| {
                            AddPartitionsToTxnResult::default()
                                .with_transactional_id(TransactionalId(t.transactional_id.clone()))
                                .with_topic_results(topic_results(t))
                        })
                        .collect();
                } else if let Some(t) = txns.first() {
                    resp.results_by_topic_v3_and_below = topic_results(t);
                }
                Ok(GateDecision::Local(encode_response(key, prefix, &resp)?))
            }
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

    fn refuse_configs(
        &self,
        key: ApiKey,
        prefix: &RequestHeader,
        resources: Vec<(i8, String)>,
        build: impl FnOnce(Vec<(i8, String, i16, Option<StrBytes>)>) -> BodyEncoder,
    ) -> Result<GateDecision, String> {
        const TOPIC: i8 = 2;
        let topics: Vec<String> =
            resources.iter().map(|(t, n)| if *t == TOPIC { n.clone() } else { String::new() }).collect();
        let Some(results) = self.refusals(&topics, "change the configs of") else { return Ok(GateDecision::Pass) };
        let rows = resources.into_iter().zip(results).map(|((t, n), (_, c, m))| (t, n, c, Some(s(m)))).collect();
        let enc = build(rows);
        let mut out = BytesMut::new();
        let hv = key.response_header_version(prefix.api_version);
        header::put_response_header(&mut out, prefix.correlation_id, hv);
        enc(&mut out, prefix.api_version).map_err(|e| format!("cannot encode {key:?} response: {e}"))?;
        Ok(GateDecision::Local(out.freeze()))
    }

    async fn produce(&self, request: &ParsedRequest) -> Result<GateDecision, String> {
        let (prefix, frame) = (request.header(), request.frame());
        let scan = scan::produce_topics(request, prefix.api_version)
            .map_err(|e| format!("malformed Produce v{} request: {e}", prefix.api_version))?;
        let mut rejected = Vec::new();
        for t in &scan.topics {
            // By name (v3–12) without a copy; by id (v13) through the learned ids.
            let refusal = match &t.topic {
                TopicRef::Name(n) => self.refusal(&n.0),
                TopicRef::Id(id) => match self.topic_name_for_id(id).await {
                    Some(name) => self.refusal(&name),
                    None => continue,
                },
            };
            if let Some((code, message)) = refusal {
                for p in &t.partitions {
                    rejected.push(Rejected {
                        topic: t.topic.clone(),
                        partition: p.index,
                        message: message.clone(),
                        code,
                    });
                }
            }
        }
        if rejected.is_empty() {
            return Ok(GateDecision::Pass);
        }
        // One line per refused request (not per partition): operators see who writes to a
        // mirror topic, and tests count the Produce requests a client sent (no retries).
        let code_name =
            if rejected[0].code == POLICY_VIOLATION { "POLICY_VIOLATION" } else { "TOPIC_AUTHORIZATION_FAILED" };
        super::request_metrics::error("Produce", rejected[0].code);
        tracing::info!(
            client_id = request.client_id().unwrap_or(""),
            correlation_id = prefix.correlation_id,
            partitions = rejected.len(),
            "Produce refused with {code_name}: {}",
            rejected[0].message
        );
        let expect_response = scan.acks != 0;
        if !expect_response {
            for r in &rejected {
                tracing::warn!(partition = r.partition, "acks=0 Produce to a mirror partition dropped: {}", r.message);
            }
        }
        if rejected.len() == scan.partition_count() {
            if !expect_response {
                return Ok(GateDecision::Drop);
            }
            let resp = produce_rejections(ProduceResponse::default(), &rejected);
            return Ok(GateDecision::Local(encode_response(ApiKey::Produce, prefix, &resp)?));
        }
        let filtered = scan::produce_without(frame, prefix.api_version, &scan, |t, p| {
            rejected.iter().any(|r| &r.topic == t && r.partition == p)
        })
        .map_err(|e| format!("cannot filter Produce request: {e}"))?;
        Ok(GateDecision::ForwardProduce { frame: filtered, expect_response, rejected: Arc::new(rejected) })
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

    async fn mirror_admin(
        &self,
        api: mwire::MirrorApi,
        request: &ParsedRequest,
        admin_listener: bool,
        identity: &ClientIdentity,
    ) -> Result<Bytes, String> {
        let prefix = request.header();
        let timed = crate::telemetry::traces::Timed::start();
        let mut body = request.body().map_err(|e| format!("malformed {} request header: {e}", api.name()))?;
        let op = match api {
            mwire::MirrorApi::ListClusterMirrors | mwire::MirrorApi::DescribeClusterMirrors => Operation::Describe,
            _ => Operation::Alter,
        };
        let refusal = if admin_listener { self.allowed(identity, op, true).await.err() } else { None };
        let response = if !admin_listener {
            tracing::warn!(api = api.name(), "mirror admin request refused on a listener without `admin: true`");
            admin::unauthorized(api)
        } else if let Some((code, message)) = refusal {
            admin::error_response(api, code, &message)
        } else {
            match mwire::decode_request(api, prefix.api_version, &mut body) {
                Ok(req) => {
                    let resp = admin::handle(&self.control, req).await;
                    if resp.error_code() != 0 {
                        tracing::info!(api = api.name(), error_code = resp.error_code(), "mirror admin request failed");
                    }
                    resp
                }
                Err(mwire::WireError::UnsupportedVersion { .. }) => {
                    admin::error_response(api, UNSUPPORTED_VERSION, "unsupported version")
                }
                Err(e) => return Err(format!("malformed {} request: {e}", api.name())),
            }
        };
        super::request_metrics::error(api.name(), response.error_code());
        if let Some(t) = timed {
            admin_span(t, api, request, admin_listener, response.error_code());
        }
        let mut out = BytesMut::new();
        header::put_response_header(&mut out, prefix.correlation_id, 1);
        mwire::encode_response(&response, 0, &mut out)
            .map_err(|e| format!("cannot encode {} response: {e}", api.name()))?;
        Ok(out.freeze())
    }
}

/// The span of a mirror admin RPC mirrorgate answered itself (`SERVER`, named after the RPC).
fn admin_span(
    timed: crate::telemetry::traces::Timed,
    api: mwire::MirrorApi,
    request: &ParsedRequest,
    admin_listener: bool,
    error_code: i16,
) {
    let prefix = request.header();
    use crate::telemetry::traces::{error_type, Attr};
    let mut attrs = vec![
        Attr::new("kafka.api_key", i64::from(prefix.api_key)),
        Attr::new("kafka.api_name", api.name()),
        Attr::new("kafka.api_version", i64::from(prefix.api_version)),
        Attr::new("kafka.correlation_id", i64::from(prefix.correlation_id)),
        Attr::new("mirrorgate.admin_listener", admin_listener),
        Attr::new("kafka.error_code", i64::from(error_code)),
    ];
    if let Some(c) = request.client_id() {
        attrs.push(Attr::new("kafka.client_id", c.to_string()));
    }
    let error = (error_code != 0).then(|| error_type(error_code));
    timed.finish(api.name(), opentelemetry::trace::SpanKind::Server, attrs, error, None);
}

const UNSUPPORTED_VERSION: i16 = 35;
/// Kafka error OPERATION_NOT_ATTEMPTED (55).
const OPERATION_NOT_ATTEMPTED: i16 = 55;

fn uuid_of(u: &KafkaUuid) -> uuid::Uuid {
    uuid::Uuid::from_bytes(u.0)
}

/// Adds an entry with the refusal's code (POLICY_VIOLATION (44) for a mirror topic,
/// TOPIC_AUTHORIZATION_FAILED (29) for the state topic) and message for each of `rejected`
/// to a Produce response. POLICY_VIOLATION is non-retriable in every client (Java's
/// `PolicyViolationException` is an `ApiException`, not a `RetriableException`; librdkafka,
/// franz-go and sarama fail the batch at once), and Java clients and librdkafka show the
/// message (Produce v8+, KIP-467).
pub fn produce_rejections(mut resp: ProduceResponse, rejected: &[Rejected]) -> ProduceResponse {
    for r in rejected {
        let part = PartitionProduceResponse::default()
            .with_index(r.partition)
            .with_error_code(r.code)
            .with_base_offset(-1)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(-1)
            .with_error_message(Some(s(r.message.clone())));
        let matches = |t: &TopicProduceResponse| match &r.topic {
            TopicRef::Name(n) => t.name == *n,
            TopicRef::Id(id) => t.topic_id == uuid_of(id),
        };
        if let Some(t) = resp.responses.iter_mut().find(|t| matches(t)) {
            t.partition_responses.push(part);
        } else {
            let mut t = TopicProduceResponse::default().with_partition_responses(vec![part]);
            match &r.topic {
                TopicRef::Name(n) => t.name = n.clone(),
                TopicRef::Id(id) => t.topic_id = uuid_of(id),
            }
            resp.responses.push(t);
        }
    }
    resp
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
