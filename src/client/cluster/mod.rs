//! [`ClusterClient`]: the async Kafka client the control plane and the data plane use to talk
//! to a whole cluster. It bootstraps from `host:port` addresses, keeps a Metadata cache
//! (brokers, topics with topic ids, partition leaders and leader epochs), holds one
//! [`BrokerConnection`] per broker, picks request versions from each broker's ApiVersions,
//! retries retriable errors with backoff (refreshing metadata where a leader moved) and
//! surfaces the rest as typed [`ClusterError`]s naming the api, the broker and the Kafka error.
//!
//! It never decodes or rewrites record payloads: Produce takes and Fetch returns raw record
//! batch bytes. It never retries a Produce whose outcome is ambiguous (sent, then no answer):
//! that decision belongs to the caller (DESIGN §4.6).
//!
//! Concurrency: one connection per broker behind a `tokio::sync::Mutex`, so requests to one
//! broker run one at a time. Pipelining several in-flight requests per connection (which the
//! data plane needs for throughput) comes later and will keep this API.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig, CreateTopicsRequest};
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_configs_request::{DescribeConfigsRequest, DescribeConfigsResource};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, TopicName};
use kafka_protocol::protocol::{Request, StrBytes};
use tokio::sync::Mutex;

use crate::client::conn::{BrokerConnection, ClientError};
use crate::client::connect::ConnectPolicy;
use crate::wire::mirror::KafkaUuid;

mod admin;
mod data;
mod error;
mod model;
mod offsets;
#[cfg(test)]
mod tests;

pub use data::DedicatedConnection;
pub use error::{ClusterError, KafkaErrorCode};
pub use model::*;

/// `ListOffsets` timestamp asking for the log start offset.
pub const EARLIEST_TIMESTAMP: i64 = -2;
/// `ListOffsets` timestamp asking for the log end offset (the high watermark at
/// `read_uncommitted`).
pub const LATEST_TIMESTAMP: i64 = -1;
/// ListOffsets `ReplicaId` of a consumer: answers are bounded by the isolation level.
const CONSUMER_REPLICA_ID: i32 = -1;
/// ListOffsets `ReplicaId` of a debugging client (`ListOffsetsRequest.DEBUGGING_REPLICA_ID`):
/// no isolation level, so [`LATEST_TIMESTAMP`] answers the log end offset.
const DEBUGGING_REPLICA_ID: i32 = -2;

/// How a [`ClusterClient`] connects, times out and retries.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Bootstrap addresses, `host:port`, tried in order (rotating) until one answers.
    pub bootstrap: Vec<String>,
    /// TCP connect timeout per broker (default 10 s).
    pub connect_timeout: Duration,
    /// Timeout of one request/response round trip (default 30 s); also the `timeout_ms`
    /// sent in Produce, CreateTopics and ListOffsets.
    pub request_timeout: Duration,
    /// Largest response frame accepted, bytes (default 100 MiB).
    pub max_frame_bytes: usize,
    /// Attempts per operation for retriable errors, first try included (default 10).
    pub max_attempts: u32,
    /// First backoff between attempts (default 100 ms), doubled each time up to
    /// `retry_backoff_max` (default 2 s).
    pub retry_backoff: Duration,
    /// Upper bound of the backoff.
    pub retry_backoff_max: Duration,
    /// `ClientSoftwareName` sent in ApiVersions (KIP-511; default `mirrorgate`).
    pub client_software_name: String,
    /// `client_id` of every request header (default `mirrorgate`): what brokers log and
    /// apply client quotas to.
    pub client_id: String,
    /// Largest connect timeout: `connect_timeout` doubles per consecutive failed connect to
    /// a broker up to this (`socket.connection.setup.timeout.max.ms`, KIP-601; default =
    /// `connect_timeout`, no growth).
    pub connect_timeout_max: Duration,
    /// Pause before reconnecting to a broker whose last connect failed
    /// (`reconnect.backoff.ms`; default 0).
    pub reconnect_backoff: Duration,
    /// A connection unused this long is closed and reopened on its next use
    /// (`connections.max.idle.ms`; default `None`, kept).
    pub connections_max_idle: Option<Duration>,
    /// Socket buffer sizes and read timeout of new connections (default: OS defaults, no
    /// read timeout).
    pub socket: crate::client::connect::SocketOptions,
    /// TLS and SASL of every connection (default PLAINTEXT).
    pub security: crate::client::security::ClientSecurity,
}

impl ClusterOptions {
    /// Options with the defaults above for `bootstrap`.
    pub fn new(bootstrap: Vec<String>) -> Self {
        Self {
            bootstrap,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_frame_bytes: crate::wire::frame::DEFAULT_MAX_FRAME_BYTES,
            max_attempts: 10,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(2),
            client_software_name: "mirrorgate".into(),
            client_id: "mirrorgate".into(),
            connect_timeout_max: Duration::from_secs(10),
            reconnect_backoff: Duration::ZERO,
            connections_max_idle: None,
            socket: crate::client::connect::SocketOptions::default(),
            security: crate::client::security::ClientSecurity::plaintext(),
        }
    }
}

// Versions this client can build, inclusive. Kept in one place (DESIGN §2).
const API_VERSIONS_VERSION: i16 = 3;
const METADATA_VERSIONS: (i16, i16) = (1, 12);
const PRODUCE_VERSIONS: (i16, i16) = (3, 13);
const FETCH_VERSIONS: (i16, i16) = (4, 17);
const LIST_OFFSETS_VERSIONS: (i16, i16) = (1, 10);
const CREATE_TOPICS_VERSIONS: (i16, i16) = (2, 7);
const DESCRIBE_CLUSTER_VERSIONS: (i16, i16) = (0, 2);
const DESCRIBE_CONFIGS_VERSIONS: (i16, i16) = (1, 4);
/// DescribeConfigs resource type of a topic.
const RESOURCE_TYPE_TOPIC: i8 = 2;

struct NodeConn {
    conn: BrokerConnection,
    /// api key → (min, max) advertised by the broker on this connection.
    versions: HashMap<i16, (i16, i16)>,
    /// When a request last started on it (`connections.max.idle.ms`).
    last_used: std::time::Instant,
}

type Slot = Arc<Mutex<Option<NodeConn>>>;

struct Inner {
    opts: ClusterOptions,
    metadata: RwLock<ClusterMetadata>,
    /// One connection slot per broker address.
    slots: StdMutex<HashMap<String, Slot>>,
    next_any: AtomicUsize,
    policy: ConnectPolicy,
}

/// An async client for one Kafka cluster. Cheap to clone (shared state).
#[derive(Clone)]
pub struct ClusterClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterClient").field("bootstrap", &self.inner.opts.bootstrap).finish_non_exhaustive()
    }
}

fn to_string(s: &StrBytes) -> String {
    s.as_str().to_string()
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Converts a [`KafkaUuid`] into the `uuid::Uuid` kafka-protocol's messages hold, without a
/// direct `uuid` dependency (through its `FromStr`).
fn to_proto_uuid<T: std::str::FromStr>(id: KafkaUuid) -> T
where
    T::Err: std::fmt::Debug,
{
    let hex: String = id.0.iter().map(|b| format!("{b:02x}")).collect();
    hex.parse().expect("32 hex digits always parse as a UUID")
}

impl ClusterClient {
    /// Bootstraps: connects to the first reachable bootstrap address and loads the broker
    /// list (Metadata for no topics).
    ///
    /// # Errors
    /// [`ClusterError::InvalidArgument`] for an empty bootstrap list; otherwise as
    /// [`ClusterClient::refresh_metadata`].
    pub async fn connect(opts: ClusterOptions) -> Result<Self, ClusterError> {
        if opts.bootstrap.is_empty() {
            return Err(ClusterError::InvalidArgument("empty bootstrap list".into()));
        }
        let policy = ConnectPolicy::new(
            opts.connect_timeout,
            opts.connect_timeout_max,
            opts.reconnect_backoff,
            opts.connections_max_idle,
        );
        let client = Self {
            inner: Arc::new(Inner {
                policy,
                opts,
                metadata: RwLock::new(ClusterMetadata::default()),
                slots: StdMutex::new(HashMap::new()),
                next_any: AtomicUsize::new(0),
            }),
        };
        client.refresh_metadata(Some(&[])).await?;
        Ok(client)
    }

    /// The options this client was built with.
    pub fn options(&self) -> &ClusterOptions {
        &self.inner.opts
    }

    /// A copy of the Metadata cache.
    pub fn metadata(&self) -> ClusterMetadata {
        self.inner.metadata.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sends Metadata for `topics` (`None` = all topics, `Some(&[])` = brokers only) to any
    /// broker and updates the cache: the broker list is replaced; each topic asked for is
    /// replaced, or removed when the broker reports an error for it (e.g.
    /// `UNKNOWN_TOPIC_OR_PARTITION`). Never asks the broker to auto-create topics.
    ///
    /// # Errors
    /// [`ClusterError`] after retries (no broker reachable, transport failures).
    pub async fn refresh_metadata(&self, topics: Option<&[&str]>) -> Result<(), ClusterError> {
        self.retrying(ApiKey::Metadata, &[], |_| true, || self.refresh_metadata_once(topics)).await
    }

    /// One Metadata round trip (no retry), see [`ClusterClient::refresh_metadata`].
    async fn refresh_metadata_once(&self, topics: Option<&[&str]>) -> Result<(), ClusterError> {
        let (resp, _, broker) = self
            .call_any(METADATA_VERSIONS, |_v| {
                let mut req = MetadataRequest::default();
                req.topics = topics.map(|ts| {
                    ts.iter()
                        .map(|t| {
                            let mut mt = MetadataRequestTopic::default();
                            mt.name = Some(topic_name(t));
                            mt
                        })
                        .collect()
                });
                req.allow_auto_topic_creation = false;
                req
            })
            .await?;
        if resp.error_code != 0 {
            return Err(ClusterError::Kafka {
                api: ApiKey::Metadata,
                broker,
                resource: "cluster".into(),
                error: KafkaErrorCode(resp.error_code),
                message: None,
            });
        }
        let mut md = self.inner.metadata.write().unwrap_or_else(|e| e.into_inner());
        md.cluster_id = resp.cluster_id.as_ref().map(to_string);
        md.controller_id = resp.controller_id.0;
        md.brokers = resp
            .brokers
            .iter()
            .map(|b| {
                let info = BrokerInfo {
                    node_id: b.node_id.0,
                    host: to_string(&b.host),
                    port: b.port,
                    rack: b.rack.as_ref().map(to_string),
                };
                (info.node_id, info)
            })
            .collect();
        if topics.is_none() {
            md.topics.clear();
        }
        for t in &resp.topics {
            let Some(name) = t.name.as_ref().map(|n| to_string(&n.0)) else { continue };
            if t.error_code != 0 {
                md.topics.remove(&name);
                continue;
            }
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    (
                        p.partition_index,
                        PartitionInfo {
                            partition: p.partition_index,
                            leader_id: p.leader_id.0,
                            leader_epoch: p.leader_epoch,
                            replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                            isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                            error_code: p.error_code,
                        },
                    )
                })
                .collect();
            let info = TopicInfo {
                name: name.clone(),
                topic_id: KafkaUuid(*t.topic_id.as_bytes()),
                is_internal: t.is_internal,
                partitions,
            };
            md.topics.insert(name, info);
        }
        Ok(())
    }

    /// The topic as Metadata describes it, asking the cluster when it is not cached.
    ///
    /// # Errors
    /// [`ClusterError::NoLeader`] (partition -1) when the cluster does not know the topic;
    /// otherwise as [`ClusterClient::refresh_metadata`].
    pub async fn topic(&self, topic: &str) -> Result<TopicInfo, ClusterError> {
        if let Some(t) = self.cached_topic(topic) {
            return Ok(t);
        }
        self.refresh_metadata(Some(&[topic])).await?;
        self.cached_topic(topic).ok_or_else(|| ClusterError::NoLeader {
            topic: topic.into(),
            partition: -1,
            reason: "topic not in Metadata".into(),
        })
    }

    fn cached_topic(&self, topic: &str) -> Option<TopicInfo> {
        self.inner.metadata.read().unwrap_or_else(|e| e.into_inner()).topics.get(topic).cloned()
    }

    /// The leader (broker id and leader epoch) of `topic`-`partition`, from the cache, or
    /// from a Metadata refresh when the cache has none.
    ///
    /// # Errors
    /// [`ClusterError::NoLeader`] when the topic or partition is unknown or leaderless
    /// after a refresh (retriable: a new topic's metadata may still be propagating).
    pub async fn leader_for(&self, topic: &str, partition: i32) -> Result<PartitionLeader, ClusterError> {
        if let Some(l) = self.cached_leader(topic, partition) {
            return Ok(l);
        }
        self.refresh_metadata_once(Some(&[topic])).await?;
        self.cached_leader(topic, partition).ok_or_else(|| {
            let md = self.inner.metadata.read().unwrap_or_else(|e| e.into_inner());
            let reason = match md.topics.get(topic) {
                None => "topic not in Metadata".to_string(),
                Some(t) => match t.partitions.get(&partition) {
                    None => format!("partition not in Metadata (topic has {})", t.partitions.len()),
                    Some(p) => format!("no leader (Metadata error {})", KafkaErrorCode(p.error_code)),
                },
            };
            ClusterError::NoLeader { topic: topic.into(), partition, reason }
        })
    }

    fn cached_leader(&self, topic: &str, partition: i32) -> Option<PartitionLeader> {
        let md = self.inner.metadata.read().unwrap_or_else(|e| e.into_inner());
        let p = md.topics.get(topic)?.partitions.get(&partition)?;
        (p.leader_id >= 0 && md.brokers.contains_key(&p.leader_id))
            .then_some(PartitionLeader { node_id: p.leader_id, leader_epoch: p.leader_epoch })
    }

    fn invalidate_topic(&self, topic: &str) {
        self.inner.metadata.write().unwrap_or_else(|e| e.into_inner()).topics.remove(topic);
    }

    fn addr_of(&self, node_id: i32) -> Option<String> {
        self.inner.metadata.read().unwrap_or_else(|e| e.into_inner()).brokers.get(&node_id).map(BrokerInfo::addr)
    }

    /// The highest version of `R` that both this client (up to `max`) and broker `node_id`
    /// support, asking the broker for its ApiVersions when no connection is open yet.
    ///
    /// # Errors
    /// [`ClusterError::UnsupportedVersion`], [`ClusterError::UnknownBroker`], or a connect
    /// failure.
    pub async fn version_for<R: Request>(&self, node_id: i32, max: i16) -> Result<i16, ClusterError> {
        let addr = self.addr_of(node_id).ok_or(ClusterError::UnknownBroker { node_id })?;
        let slot = self.slot(&addr);
        let mut guard = slot.lock().await;
        let nc = self.ensure_connected(&addr, &mut guard).await?;
        pick_version(api_key(R::KEY), &addr, nc, (R::VERSIONS.min, max.min(R::VERSIONS.max)))
    }

    /// Sends `req` at `version` to broker `node_id` and returns its response. No retry; a
    /// transport failure closes that broker's connection (the next request reconnects).
    ///
    /// # Errors
    /// [`ClusterError::UnknownBroker`], [`ClusterError::UnsupportedVersion`] when the broker
    /// does not advertise `version`, [`ClusterError::Connect`], [`ClusterError::Transport`].
    pub async fn send_to_node<R: Request + Clone>(
        &self,
        node_id: i32,
        req: &R,
        version: i16,
    ) -> Result<R::Response, ClusterError> {
        let addr = self.addr_of(node_id).ok_or(ClusterError::UnknownBroker { node_id })?;
        self.call(&addr, (version, version), |_| req.clone()).await.map(|(r, _)| r)
    }

    /// Sends `req` at `version` to any reachable broker (rotating through the known
    /// brokers, or the bootstrap list before Metadata is known).
    ///
    /// # Errors
    /// [`ClusterError::NoBrokerAvailable`] when none accepts a connection; otherwise as
    /// [`ClusterClient::send_to_node`].
    pub async fn send_any<R: Request + Clone>(&self, req: &R, version: i16) -> Result<R::Response, ClusterError> {
        self.call_any((version, version), |_| req.clone()).await.map(|(r, _, _)| r)
    }

    /// The cached topic id of `topic` (Kafka's all-zero id when unknown).
    pub fn cached_topic_id(&self, topic: &str) -> KafkaUuid {
        // (Not through `cached_topic`: that clones the topic's whole partition map, once per
        // append.)
        self.inner
            .metadata
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .topics
            .get(topic)
            .map(|t| t.topic_id)
            .unwrap_or_default()
    }

    /// Drops the cached metadata of `topic` so the next lookup asks the cluster.
    pub fn forget_topic(&self, topic: &str) {
        self.invalidate_topic(topic);
    }

    fn timeout_ms(&self) -> i32 {
        i32::try_from(self.inner.opts.request_timeout.as_millis()).unwrap_or(i32::MAX)
    }

    /// Runs `attempt` until it succeeds, fails with an error that is not retriable or that
    /// `retry_if` refuses, or `max_attempts` is reached; backs off between attempts and
    /// refreshes Metadata for `topics` when the error says leaders or topics moved.
    async fn retrying<T, F, Fut>(
        &self,
        api: ApiKey,
        topics: &[&str],
        retry_if: impl Fn(&ClusterError) -> bool,
        mut attempt: F,
    ) -> Result<T, ClusterError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ClusterError>>,
    {
        let opts = &self.inner.opts;
        let mut backoff = opts.retry_backoff;
        let mut n = 0u32;
        loop {
            n += 1;
            let err = match attempt().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if !err.is_retriable() || !retry_if(&err) {
                return Err(err);
            }
            if n >= opts.max_attempts.max(1) {
                return Err(ClusterError::RetriesExhausted { api, attempts: n, last: Box::new(err) });
            }
            tracing::debug!(api = ?api, attempt = n, error = %err, "retrying");
            if err.needs_metadata_refresh() {
                for t in topics {
                    self.invalidate_topic(t);
                }
                // A failed refresh is not fatal here: the next attempt reports its own error.
                if api != ApiKey::Metadata {
                    let _ = self.refresh_metadata_once(Some(topics)).await;
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(opts.retry_backoff_max);
        }
    }

    fn slot(&self, addr: &str) -> Slot {
        let mut slots = self.inner.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.entry(addr.to_string()).or_default().clone()
    }

    async fn ensure_connected<'g>(
        &self,
        addr: &str,
        guard: &'g mut Option<NodeConn>,
    ) -> Result<&'g mut NodeConn, ClusterError> {
        if guard.as_ref().is_some_and(|nc| self.inner.policy.is_idle(nc.last_used)) {
            tracing::debug!(broker = addr, "closing an idle connection (connections.max.idle.ms)");
            *guard = None;
        }
        if guard.is_none() {
            *guard = Some(self.open(addr).await?);
        }
        let nc = guard.as_mut().expect("just set");
        nc.last_used = std::time::Instant::now();
        Ok(nc)
    }

    /// Opens a connection and asks ApiVersions once for it.
    async fn open(&self, addr: &str) -> Result<NodeConn, ClusterError> {
        let o = &self.inner.opts;
        let connect_err = |source| ClusterError::Connect { broker: addr.to_string(), source };
        let policy = &self.inner.policy;
        let (wait, connect_timeout) = policy.before_connect(addr);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let connected = BrokerConnection::connect_with(
            addr,
            connect_timeout,
            o.request_timeout,
            o.max_frame_bytes,
            &o.socket,
            &o.security,
        )
        .await;
        policy.record(addr, connected.is_ok());
        let mut conn = connected.map_err(connect_err)?;
        conn.set_client_id(&o.client_id);
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = StrBytes::from_string(o.client_software_name.clone());
        req.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        let resp = match conn.send(&req, API_VERSIONS_VERSION).await {
            Ok(r) => r,
            Err(e) => {
                // TLS 1.3 reports a refused client certificate at the first read.
                o.security.remember_failure(addr, &e);
                return Err(connect_err(e));
            }
        };
        if resp.error_code != 0 {
            return Err(connect_err(ClientError::Protocol {
                addr: addr.to_string(),
                reason: format!("ApiVersions v{API_VERSIONS_VERSION}: {}", KafkaErrorCode(resp.error_code)),
            }));
        }
        let versions = resp.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
        tracing::debug!(broker = addr, "connected");
        Ok(NodeConn { conn, versions, last_used: std::time::Instant::now() })
    }

    /// Sends the request `build` makes for the highest version in `ours` ∩ the broker's
    /// range, on the connection to `addr`. Returns the response and the version used.
    async fn call<R: Request>(
        &self,
        addr: &str,
        ours: (i16, i16),
        build: impl FnOnce(i16) -> R,
    ) -> Result<(R::Response, i16), ClusterError> {
        let api = api_key(R::KEY);
        let slot = self.slot(addr);
        let mut guard = slot.lock().await;
        let nc = self.ensure_connected(addr, &mut guard).await?;
        let version = pick_version(api, addr, nc, (ours.0.max(R::VERSIONS.min), ours.1.min(R::VERSIONS.max)))?;
        let req = build(version);
        match nc.conn.send(&req, version).await {
            Ok(resp) => Ok((resp, version)),
            Err(source) => {
                // The connection's state is unknown (a late response would be mismatched).
                *guard = None;
                Err(ClusterError::Transport { api, broker: addr.to_string(), source })
            }
        }
    }

    /// [`Self::call`] on any reachable broker; returns the response, the version and the
    /// broker address.
    async fn call_any<R: Request>(
        &self,
        ours: (i16, i16),
        build: impl Fn(i16) -> R,
    ) -> Result<(R::Response, i16, String), ClusterError> {
        let mut candidates: Vec<String> = {
            let md = self.inner.metadata.read().unwrap_or_else(|e| e.into_inner());
            md.brokers.values().map(BrokerInfo::addr).collect()
        };
        for b in &self.inner.opts.bootstrap {
            if !candidates.contains(b) {
                candidates.push(b.clone());
            }
        }
        let start = self.inner.next_any.fetch_add(1, Ordering::Relaxed);
        let n = candidates.len();
        let mut last = String::new();
        for i in 0..n {
            let addr = &candidates[(start + i) % n];
            match self.call(addr, ours, &build).await {
                Ok((r, v)) => return Ok((r, v, addr.clone())),
                Err(e @ ClusterError::Connect { .. }) if e.security_refusal().is_none() => {
                    tracing::debug!(broker = %addr, error = %e, "broker unreachable, trying the next");
                    last = e.to_string();
                }
                Err(e) => return Err(e),
            }
        }
        Err(ClusterError::NoBrokerAvailable { tried: candidates, last })
    }
}

fn api_key(key: i16) -> ApiKey {
    ApiKey::try_from(key).expect("kafka-protocol request types have known api keys")
}

fn pick_version(api: ApiKey, addr: &str, nc: &NodeConn, ours: (i16, i16)) -> Result<i16, ClusterError> {
    let theirs = nc.versions.get(&(api as i16)).copied();
    match theirs {
        Some((min, max)) if min.max(ours.0) <= max.min(ours.1) => Ok(max.min(ours.1)),
        _ => Err(ClusterError::UnsupportedVersion { api, broker: addr.to_string(), ours, theirs }),
    }
}
