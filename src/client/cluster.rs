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

    /// Options for the destination cluster from the validated proxy settings.
    pub fn for_destination(settings: &crate::config::Settings) -> Self {
        Self {
            connect_timeout: settings.connect_timeout,
            connect_timeout_max: settings.connect_timeout,
            request_timeout: settings.request_timeout,
            max_frame_bytes: settings.max_frame_bytes,
            security: settings.destination_security.clone(),
            ..Self::new(settings.destination_bootstrap.clone())
        }
    }
}

/// A Kafka error code as found in a response, displayed with Kafka's name
/// (`NOT_LEADER_OR_FOLLOWER (6)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KafkaErrorCode(pub i16);

impl KafkaErrorCode {
    /// The error, `None` for 0 (no error).
    pub fn response_error(self) -> Option<ResponseError> {
        ResponseError::try_from_code(self.0)
    }

    /// Kafka's name for the error, e.g. `UNKNOWN_TOPIC_OR_PARTITION`; `NONE` for 0 and
    /// `UNKNOWN_ERROR_CODE` for a code this build does not know.
    pub fn name(self) -> String {
        match self.response_error() {
            None => "NONE".into(),
            Some(ResponseError::Unknown(_)) => "UNKNOWN_ERROR_CODE".into(),
            Some(e) => screaming_snake(&format!("{e:?}")),
        }
    }

    /// Whether Kafka's protocol marks the error retriable.
    pub fn is_retriable(self) -> bool {
        self.response_error().is_some_and(|e| e.is_retriable())
    }

    /// Whether this error means "your view of leaders or topics is stale": the client
    /// refreshes its Metadata before retrying.
    pub fn needs_metadata_refresh(self) -> bool {
        matches!(
            self.response_error(),
            Some(
                ResponseError::NotLeaderOrFollower
                    | ResponseError::FencedLeaderEpoch
                    | ResponseError::UnknownLeaderEpoch
                    | ResponseError::UnknownTopicId
                    | ResponseError::UnknownTopicOrPartition
                    | ResponseError::LeaderNotAvailable
                    | ResponseError::NotController
            )
        )
    }

    fn is(self, e: ResponseError) -> bool {
        self.0 == e.code()
    }
}

impl std::fmt::Display for KafkaErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Why a [`ClusterClient`] operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No connection to the broker could be set up (TCP connect, or its ApiVersions
    /// handshake). Nothing was sent.
    #[error("connecting to broker {broker}: {source}")]
    Connect {
        /// Broker `host:port`.
        broker: String,
        /// What failed.
        #[source]
        source: ClientError,
    },
    /// The request was sent but no valid response came back (I/O error, timeout, closed
    /// connection, undecodable response). For Produce the outcome is unknown.
    #[error("{api:?} to broker {broker}: {source}")]
    Transport {
        /// The api.
        api: ApiKey,
        /// Broker `host:port`.
        broker: String,
        /// What failed.
        #[source]
        source: ClientError,
    },
    /// The broker answered with a Kafka error code.
    #[error("{api:?} to broker {broker} for {resource}: {error}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka {
        /// The api.
        api: ApiKey,
        /// Broker `host:port`.
        broker: String,
        /// What the error is about: `topic-partition`, a topic name, or `cluster`.
        resource: String,
        /// The error code.
        error: KafkaErrorCode,
        /// The broker's error message, when the response carries one.
        message: Option<String>,
    },
    /// The broker does not support any version of the api that mirrorgate can speak.
    #[error("{api:?}: broker {broker} supports {}, mirrorgate speaks v{}-v{}", theirs.map(|(a, b)| format!("v{a}-v{b}")).unwrap_or_else(|| "no version".into()), ours.0, ours.1)]
    UnsupportedVersion {
        /// The api.
        api: ApiKey,
        /// Broker `host:port`.
        broker: String,
        /// Versions mirrorgate can build, inclusive.
        ours: (i16, i16),
        /// Versions the broker advertised, inclusive; `None` if it does not list the api.
        theirs: Option<(i16, i16)>,
    },
    /// None of the known broker addresses accepted a connection.
    #[error("no broker reachable (tried {tried:?}); last error: {last}")]
    NoBrokerAvailable {
        /// Addresses tried.
        tried: Vec<String>,
        /// The last connect error.
        last: String,
    },
    /// The node id is not in the cluster's Metadata.
    #[error("broker {node_id} is not in the cluster metadata")]
    UnknownBroker {
        /// Broker id.
        node_id: i32,
    },
    /// The topic or partition is unknown, or has no leader, in the latest Metadata.
    #[error("{topic}-{partition}: {reason}")]
    NoLeader {
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
        /// What Metadata said.
        reason: String,
    },
    /// A response that is well-formed but does not answer the question (e.g. lacks the
    /// partition asked for).
    #[error("{api:?} to broker {broker}: unexpected response: {reason}")]
    Unexpected {
        /// The api.
        api: ApiKey,
        /// Broker `host:port`.
        broker: String,
        /// What was wrong.
        reason: String,
    },
    /// A retriable error kept happening.
    #[error("{api:?}: gave up after {attempts} attempts: {last}")]
    RetriesExhausted {
        /// The api.
        api: ApiKey,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        #[source]
        last: Box<ClusterError>,
    },
    /// The caller asked for something the client cannot do (e.g. `acks=0`).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl ClusterError {
    /// The Kafka error code behind this error, if the broker sent one (also through
    /// [`ClusterError::RetriesExhausted`]).
    pub fn kafka_error(&self) -> Option<KafkaErrorCode> {
        match self {
            ClusterError::Kafka { error, .. } => Some(*error),
            ClusterError::Connect { source: ClientError::Authentication { error, .. }, .. } => {
                Some(KafkaErrorCode(*error))
            }
            ClusterError::RetriesExhausted { last, .. } => last.kafka_error(),
            _ => None,
        }
    }

    /// The TLS or SASL refusal behind this error, if a broker refused the connection's
    /// certificates or credentials (also through [`ClusterError::RetriesExhausted`]).
    pub fn security_refusal(&self) -> Option<&ClientError> {
        match self {
            ClusterError::Connect { source, .. } if source.is_security() => Some(source),
            ClusterError::RetriesExhausted { last, .. } => last.security_refusal(),
            _ => None,
        }
    }

    /// Whether trying again soon may succeed (a TLS or SASL refusal does not: the settings
    /// or the broker's users must change first).
    pub fn is_retriable(&self) -> bool {
        if self.security_refusal().is_some() {
            return false;
        }
        match self {
            ClusterError::Connect { .. }
            | ClusterError::Transport { .. }
            | ClusterError::NoBrokerAvailable { .. }
            | ClusterError::UnknownBroker { .. }
            | ClusterError::NoLeader { .. } => true,
            ClusterError::Kafka { error, .. } => error.is_retriable(),
            _ => false,
        }
    }

    /// Whether a Produce that failed this way may nevertheless have been appended: the
    /// request went out and no clear answer came back (timeout, disconnect,
    /// `REQUEST_TIMED_OUT`, `NOT_ENOUGH_REPLICAS_AFTER_APPEND`, `NETWORK_EXCEPTION`).
    pub fn is_ambiguous(&self) -> bool {
        match self {
            ClusterError::Transport { .. } => true,
            ClusterError::Kafka { error, .. } => {
                error.is(ResponseError::RequestTimedOut)
                    || error.is(ResponseError::NotEnoughReplicasAfterAppend)
                    || error.is(ResponseError::NetworkException)
            }
            ClusterError::RetriesExhausted { last, .. } => last.is_ambiguous(),
            _ => false,
        }
    }

    fn needs_metadata_refresh(&self) -> bool {
        match self {
            ClusterError::Kafka { error, .. } => error.needs_metadata_refresh(),
            ClusterError::Connect { .. }
            | ClusterError::Transport { .. }
            | ClusterError::UnknownBroker { .. }
            | ClusterError::NoLeader { .. } => true,
            _ => false,
        }
    }
}

/// A broker as listed in Metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Broker id.
    pub node_id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// Rack, if configured.
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// A partition as listed in Metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Partition index.
    pub partition: i32,
    /// Leader broker id (-1 when there is none).
    pub leader_id: i32,
    /// Leader epoch (-1 when unknown).
    pub leader_epoch: i32,
    /// Replica broker ids.
    pub replicas: Vec<i32>,
    /// In-sync replica broker ids.
    pub isr: Vec<i32>,
    /// Partition-level error code from Metadata (0 = none).
    pub error_code: i16,
}

/// A topic as listed in Metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// Topic id (zero before Metadata v10).
    pub topic_id: KafkaUuid,
    /// Whether Kafka marks the topic internal.
    pub is_internal: bool,
    /// Partitions by index.
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

/// The Metadata cache's content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// Cluster id, if the broker reported one.
    pub cluster_id: Option<String>,
    /// Controller id as Metadata reports it.
    pub controller_id: i32,
    /// Live brokers by id.
    pub brokers: BTreeMap<i32, BrokerInfo>,
    /// Topics known so far (those asked for), by name.
    pub topics: BTreeMap<String, TopicInfo>,
}

/// One producer the partition leader holds state for (DescribeProducers, KIP-664).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Sequence of the last record appended, -1 when none.
    pub last_sequence: i32,
    /// First offset of the producer's open transaction on the partition, -1 when none.
    pub current_txn_start_offset: i64,
}

/// The leader of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLeader {
    /// Leader broker id.
    pub node_id: i32,
    /// Its leader epoch.
    pub leader_epoch: i32,
}

/// Produce acknowledgement level. `acks=0` is not offered: it has no response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=1`: the leader appended.
    Leader,
    /// `acks=all` (-1): every in-sync replica has it.
    All,
}

impl Acks {
    fn wire(self) -> i16 {
        match self {
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// The outcome of [`ClusterClient::create_topic`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateTopicOutcome {
    /// The topic was created now.
    Created {
        /// Its topic id (zero before CreateTopics v7).
        topic_id: KafkaUuid,
    },
    /// A topic of that name already existed (`TOPIC_ALREADY_EXISTS`); nothing was changed.
    AlreadyExists,
}

/// One partition's answer to [`ClusterClient::fetch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    /// Raw record batches as the broker sent them (may end with a partial batch, and may
    /// start before the requested offset). Empty when there is nothing at the offset.
    pub records: Bytes,
    /// High watermark.
    pub high_watermark: i64,
    /// Last stable offset (-1 when the broker does not report it).
    pub last_stable_offset: i64,
    /// Log start offset (-1 when the broker does not report it).
    pub log_start_offset: i64,
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

/// A connection of its own to one broker ([`ClusterClient::open_dedicated`]).
#[derive(Debug)]
pub struct DedicatedConnection {
    /// The broker's `host:port`.
    pub addr: String,
    /// The connection (authenticated, ApiVersions asked).
    pub conn: BrokerConnection,
    /// api key → (min, max) advertised by the broker on this connection.
    versions: HashMap<i16, (i16, i16)>,
}

impl DedicatedConnection {
    /// Sends `req` at `version` (which the broker must advertise) and returns its response,
    /// re-authenticating first when due (KIP-368).
    ///
    /// # Errors
    /// [`ClusterError::UnsupportedVersion`], or [`ClusterError::Transport`]: the connection
    /// is then unusable (drop it).
    pub async fn send<R: Request>(&mut self, req: &R, version: i16) -> Result<R::Response, ClusterError> {
        let api = api_key(R::KEY);
        match self.versions.get(&R::KEY).copied() {
            Some((min, max)) if min <= version && version <= max => {}
            theirs => {
                return Err(ClusterError::UnsupportedVersion {
                    api,
                    broker: self.addr.clone(),
                    ours: (version, version),
                    theirs,
                })
            }
        }
        self.conn.send(req, version).await.map_err(|source| ClusterError::Transport {
            api,
            broker: self.addr.clone(),
            source,
        })
    }

    /// The Produce version to send: the highest in mirrorgate's range (at most
    /// `max_version`) that the broker also supports.
    ///
    /// # Errors
    /// [`ClusterError::UnsupportedVersion`] when the ranges do not meet.
    pub fn produce_version(&self, max_version: i16) -> Result<i16, ClusterError> {
        let ours = (PRODUCE_VERSIONS.0.max(9), PRODUCE_VERSIONS.1.min(max_version));
        match self.versions.get(&(ApiKey::Produce as i16)).copied() {
            Some((min, max)) if min.max(ours.0) <= max.min(ours.1) => Ok(max.min(ours.1)),
            theirs => {
                Err(ClusterError::UnsupportedVersion { api: ApiKey::Produce, broker: self.addr.clone(), ours, theirs })
            }
        }
    }
}

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

    /// Creates `name` with `partitions` partitions, `replication_factor` replicas and the
    /// given topic configs (CreateTopics, sent to any broker, which forwards to the
    /// controller).
    ///
    /// # Errors
    /// A [`ClusterError::Kafka`] naming the topic for refusals such as
    /// `INVALID_REPLICATION_FACTOR`, `INVALID_CONFIG` or `POLICY_VIOLATION`;
    /// `TOPIC_ALREADY_EXISTS` is not an error but [`CreateTopicOutcome::AlreadyExists`].
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &BTreeMap<String, String>,
    ) -> Result<CreateTopicOutcome, ClusterError> {
        let timeout_ms = self.timeout_ms();
        let (resp, _, broker) = self
            .retrying(
                ApiKey::CreateTopics,
                &[],
                |_| true,
                || async move {
                    self.call_any(CREATE_TOPICS_VERSIONS, |_v| {
                        let mut t = CreatableTopic::default();
                        t.name = topic_name(name);
                        t.num_partitions = partitions;
                        t.replication_factor = replication_factor;
                        t.configs = configs
                            .iter()
                            .map(|(k, v)| {
                                let mut c = CreatableTopicConfig::default();
                                c.name = StrBytes::from_string(k.clone());
                                c.value = Some(StrBytes::from_string(v.clone()));
                                c
                            })
                            .collect();
                        let mut req = CreateTopicsRequest::default();
                        req.topics = vec![t];
                        req.timeout_ms = timeout_ms;
                        req.validate_only = false;
                        req
                    })
                    .await
                    .and_then(|(resp, v, broker)| {
                        let r = resp.topics.iter().find(|t| t.name.0.as_str() == name).ok_or_else(|| {
                            ClusterError::Unexpected {
                                api: ApiKey::CreateTopics,
                                broker: broker.clone(),
                                reason: format!("no result for topic {name}"),
                            }
                        })?;
                        let code = KafkaErrorCode(r.error_code);
                        if code.0 != 0 && !code.is(ResponseError::TopicAlreadyExists) {
                            return Err(ClusterError::Kafka {
                                api: ApiKey::CreateTopics,
                                broker: broker.clone(),
                                resource: name.into(),
                                error: code,
                                message: r.error_message.as_ref().map(to_string),
                            });
                        }
                        Ok((resp, v, broker))
                    })
                },
            )
            .await?;
        let _ = broker;
        let r = resp.topics.iter().find(|t| t.name.0.as_str() == name).expect("checked above");
        if KafkaErrorCode(r.error_code).is(ResponseError::TopicAlreadyExists) {
            return Ok(CreateTopicOutcome::AlreadyExists);
        }
        self.invalidate_topic(name);
        Ok(CreateTopicOutcome::Created { topic_id: KafkaUuid(*r.topic_id.as_bytes()) })
    }

    /// The number of live (unfenced) brokers, from DescribeCluster.
    ///
    /// # Errors
    /// A [`ClusterError::Kafka`] for an error code in the response, otherwise transport
    /// errors after retries.
    pub async fn describe_cluster_broker_count(&self) -> Result<usize, ClusterError> {
        let (resp, _, _) = self
            .retrying(
                ApiKey::DescribeCluster,
                &[],
                |_| true,
                || async move {
                    let (resp, v, broker) =
                        self.call_any(DESCRIBE_CLUSTER_VERSIONS, |_v| DescribeClusterRequest::default()).await?;
                    if resp.error_code != 0 {
                        return Err(ClusterError::Kafka {
                            api: ApiKey::DescribeCluster,
                            broker,
                            resource: "cluster".into(),
                            error: KafkaErrorCode(resp.error_code),
                            message: resp.error_message.as_ref().map(to_string),
                        });
                    }
                    Ok((resp, v, broker))
                },
            )
            .await?;
        Ok(resp.brokers.iter().filter(|b| !b.is_fenced).count())
    }

    /// The configs of `topic` (DescribeConfigs on resource type TOPIC), name → value, with
    /// defaults included; sensitive values come back as the broker sends them (null → absent).
    ///
    /// # Errors
    /// A [`ClusterError::Kafka`] such as `UNKNOWN_TOPIC_OR_PARTITION`.
    pub async fn describe_topic_configs(&self, topic: &str) -> Result<BTreeMap<String, String>, ClusterError> {
        let (resp, _, _) = self
            .retrying(
                ApiKey::DescribeConfigs,
                &[],
                |_| true,
                || async move {
                    let (resp, v, broker) = self
                        .call_any(DESCRIBE_CONFIGS_VERSIONS, |_v| {
                            let mut r = DescribeConfigsResource::default();
                            r.resource_type = RESOURCE_TYPE_TOPIC;
                            r.resource_name = StrBytes::from_string(topic.to_string());
                            r.configuration_keys = None;
                            let mut req = DescribeConfigsRequest::default();
                            req.resources = vec![r];
                            req
                        })
                        .await?;
                    if let Some(r) = resp.results.iter().find(|r| r.error_code != 0) {
                        return Err(ClusterError::Kafka {
                            api: ApiKey::DescribeConfigs,
                            broker,
                            resource: topic.into(),
                            error: KafkaErrorCode(r.error_code),
                            message: r.error_message.as_ref().map(to_string),
                        });
                    }
                    Ok((resp, v, broker))
                },
            )
            .await?;
        Ok(resp
            .results
            .iter()
            .flat_map(|r| r.configs.iter())
            .filter_map(|c| c.value.as_ref().map(|v| (to_string(&c.name), to_string(v))))
            .collect())
    }

    /// The value of broker config `key` as broker `node_id` has it (DescribeConfigs for the
    /// BROKER resource named by its id, sent to that broker; static, dynamic or default).
    /// `None` when the broker does not report it.
    ///
    /// # Errors
    /// Transport errors, or a [`ClusterError::Kafka`] for a refusal (e.g.
    /// CLUSTER_AUTHORIZATION_FAILED).
    pub async fn describe_broker_config(&self, node_id: i32, key: &str) -> Result<Option<String>, ClusterError> {
        /// DescribeConfigs resource type of a broker.
        const RESOURCE_TYPE_BROKER: i8 = 4;
        let mut r = DescribeConfigsResource::default();
        r.resource_type = RESOURCE_TYPE_BROKER;
        r.resource_name = StrBytes::from_string(node_id.to_string());
        r.configuration_keys = Some(vec![StrBytes::from_string(key.to_string())]);
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![r];
        let resp = self.send_to_node(node_id, &req, DESCRIBE_CONFIGS_VERSIONS.0).await?;
        if let Some(r) = resp.results.iter().find(|r| r.error_code != 0) {
            return Err(ClusterError::Kafka {
                api: ApiKey::DescribeConfigs,
                broker: format!("node {node_id}"),
                resource: format!("broker {node_id}"),
                error: KafkaErrorCode(r.error_code),
                message: r.error_message.as_ref().map(to_string),
            });
        }
        Ok(resp
            .results
            .iter()
            .flat_map(|r| r.configs.iter())
            .find(|c| to_string(&c.name) == key)
            .and_then(|c| c.value.as_ref().map(to_string)))
    }

    /// The offset ListOffsets returns for `timestamp` on `topic`-`partition`, asked of its
    /// leader with `read_uncommitted`: [`EARLIEST_TIMESTAMP`] (-2) gives the log start
    /// offset, [`LATEST_TIMESTAMP`] (-1) the high watermark.
    ///
    /// # Errors
    /// A [`ClusterError::Kafka`] naming the partition for non-retriable errors, after
    /// retrying (with a Metadata refresh) leader changes and unknown-topic errors.
    pub async fn list_offsets(&self, topic: &str, partition: i32, timestamp: i64) -> Result<i64, ClusterError> {
        self.list_offsets_as(topic, partition, timestamp, CONSUMER_REPLICA_ID).await
    }

    /// The leader's log end offset of `topic`-`partition`: ListOffsets [`LATEST_TIMESTAMP`]
    /// asked as the debugging replica (replica id -2), which the broker answers without an
    /// isolation level, from the log end rather than the high watermark (broker behaviour:
    /// `KafkaApis.handleListOffsetRequest` applies the isolation level only to replica id
    /// -1; pinned in `tests/replicated.rs`). Above the high watermark sit appends not yet
    /// replicated to the whole ISR, which a leader change may still truncate.
    ///
    /// # Errors
    /// As [`Self::list_offsets`].
    pub async fn leader_log_end(&self, topic: &str, partition: i32) -> Result<i64, ClusterError> {
        self.list_offsets_as(topic, partition, LATEST_TIMESTAMP, DEBUGGING_REPLICA_ID).await
    }

    /// The active producers of `topic`-`partition` on its leader (DescribeProducers v0,
    /// KIP-664): producer id, epoch, last sequence (-1 none) and the first offset of its open
    /// transaction (-1 none), in the broker's order. A producer the broker no longer holds
    /// state for (expired, `transactional.id.expiration.ms` / `producer.id.expiration.ms`) is
    /// absent. Leader changes are retried with a Metadata refresh.
    ///
    /// # Errors
    /// A [`ClusterError::Kafka`] naming the partition, or transport errors.
    pub async fn describe_producers(&self, topic: &str, partition: i32) -> Result<Vec<ActiveProducer>, ClusterError> {
        use kafka_protocol::messages::describe_producers_request::TopicRequest;
        use kafka_protocol::messages::DescribeProducersRequest;
        self.retrying(
            ApiKey::DescribeProducers,
            &[topic],
            |_| true,
            || async move {
                let leader = self.leader_for(topic, partition).await?;
                let addr =
                    self.addr_of(leader.node_id).ok_or(ClusterError::UnknownBroker { node_id: leader.node_id })?;
                let (resp, _) = self
                    .call(&addr, (0, 0), |_v| {
                        DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
                            .with_name(topic_name(topic))
                            .with_partition_indexes(vec![partition])])
                    })
                    .await?;
                let p = resp
                    .topics
                    .iter()
                    .filter(|t| t.name.0.as_str() == topic)
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == partition)
                    .ok_or_else(|| ClusterError::Unexpected {
                        api: ApiKey::DescribeProducers,
                        broker: addr.clone(),
                        reason: format!("no answer for {topic}-{partition}"),
                    })?;
                if p.error_code != 0 {
                    if KafkaErrorCode(p.error_code).needs_metadata_refresh() {
                        self.invalidate_topic(topic);
                    }
                    return Err(ClusterError::Kafka {
                        api: ApiKey::DescribeProducers,
                        broker: addr,
                        resource: format!("{topic}-{partition}"),
                        error: KafkaErrorCode(p.error_code),
                        message: p.error_message.as_ref().map(to_string),
                    });
                }
                Ok(p.active_producers
                    .iter()
                    .map(|a| ActiveProducer {
                        producer_id: a.producer_id.0,
                        producer_epoch: a.producer_epoch as i16,
                        last_sequence: a.last_sequence,
                        current_txn_start_offset: a.current_txn_start_offset,
                    })
                    .collect())
            },
        )
        .await
    }

    async fn list_offsets_as(
        &self,
        topic: &str,
        partition: i32,
        timestamp: i64,
        replica_id: i32,
    ) -> Result<i64, ClusterError> {
        let timeout_ms = self.timeout_ms();
        self.retrying(
            ApiKey::ListOffsets,
            &[topic],
            |_| true,
            || async move {
                let leader = self.leader_for(topic, partition).await?;
                let addr =
                    self.addr_of(leader.node_id).ok_or(ClusterError::UnknownBroker { node_id: leader.node_id })?;
                let (resp, _) = self
                    .call(&addr, LIST_OFFSETS_VERSIONS, |_v| {
                        let mut p = ListOffsetsPartition::default();
                        p.partition_index = partition;
                        p.current_leader_epoch = leader.leader_epoch;
                        p.timestamp = timestamp;
                        let mut t = ListOffsetsTopic::default();
                        t.name = topic_name(topic);
                        t.partitions = vec![p];
                        let mut req = ListOffsetsRequest::default();
                        req.replica_id = BrokerId(replica_id);
                        req.isolation_level = 0;
                        req.topics = vec![t];
                        req.timeout_ms = timeout_ms;
                        req
                    })
                    .await?;
                let p = resp
                    .topics
                    .iter()
                    .filter(|t| t.name.0.as_str() == topic)
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == partition)
                    .ok_or_else(|| ClusterError::Unexpected {
                        api: ApiKey::ListOffsets,
                        broker: addr.clone(),
                        reason: format!("no answer for {topic}-{partition}"),
                    })?;
                if p.error_code != 0 {
                    return Err(ClusterError::Kafka {
                        api: ApiKey::ListOffsets,
                        broker: addr,
                        resource: format!("{topic}-{partition}"),
                        error: KafkaErrorCode(p.error_code),
                        message: None,
                    });
                }
                Ok(p.offset)
            },
        )
        .await
    }

    /// Appends `records` (one or more complete record batches, magic v2) to
    /// `topic`-`partition` on its leader and returns the `base_offset` the broker assigned.
    ///
    /// Retries only failures that prove nothing was appended (connect failures, leader
    /// changes, `NOT_ENOUGH_REPLICAS`, unknown topic while metadata propagates). An
    /// ambiguous failure ([`ClusterError::is_ambiguous`]: timeout or disconnect after
    /// sending, `REQUEST_TIMED_OUT`, `NOT_ENOUGH_REPLICAS_AFTER_APPEND`) is returned at
    /// once: the caller decides whether a resend is safe.
    ///
    /// # Errors
    /// A [`ClusterError::Kafka`] naming the partition, with the broker's error message (e.g.
    /// `CORRUPT_MESSAGE`, `INVALID_RECORD`, `OUT_OF_ORDER_SEQUENCE_NUMBER`), or transport
    /// errors.
    pub async fn produce(&self, topic: &str, partition: i32, records: Bytes, acks: Acks) -> Result<i64, ClusterError> {
        self.produce_segments(topic, partition, vec![records], acks).await
    }

    /// Sends one Produce request to broker `node_id`, built by `build` for the version
    /// negotiated with that broker (9..=13, at most `max_version`): the frame's record segments go to the socket
    /// as they are (vectored I/O). No retry.
    ///
    /// # Errors
    /// [`ClusterError::UnknownBroker`], [`ClusterError::Connect`],
    /// [`ClusterError::Transport`] (ambiguous: the request may have been appended), or
    /// [`ClusterError::InvalidArgument`] when `build` fails.
    pub async fn send_produce_to_node(
        &self,
        node_id: i32,
        max_version: i16,
        build: impl FnOnce(i16) -> Result<crate::wire::produce::ProduceFrame, crate::wire::produce::ProduceFrameError>,
    ) -> Result<(kafka_protocol::messages::ProduceResponse, i16), ClusterError> {
        let addr = self.addr_of(node_id).ok_or(ClusterError::UnknownBroker { node_id })?;
        let slot = self.slot(&addr);
        let mut guard = slot.lock().await;
        let nc = self.ensure_connected(&addr, &mut guard).await?;
        let version =
            pick_version(ApiKey::Produce, &addr, nc, (PRODUCE_VERSIONS.0.max(9), PRODUCE_VERSIONS.1.min(max_version)))?;
        let frame = build(version).map_err(|e| ClusterError::InvalidArgument(e.to_string()))?;
        match nc.conn.send_produce(frame).await {
            Ok(r) => Ok((r, version)),
            Err(source) => {
                *guard = None;
                Err(ClusterError::Transport { api: ApiKey::Produce, broker: addr, source })
            }
        }
    }

    /// A connection of its own to broker `node_id` (not shared with the client's other
    /// requests), with the cluster's TLS and SASL settings and the broker's ApiVersions, for
    /// a caller that keeps several requests in flight on it (the data plane's pipelined
    /// Produce, [`BrokerConnection::write_produce`]).
    ///
    /// # Errors
    /// [`ClusterError::UnknownBroker`], or the connect and ApiVersions errors.
    pub async fn open_dedicated(&self, node_id: i32) -> Result<DedicatedConnection, ClusterError> {
        let addr = self.addr_of(node_id).ok_or(ClusterError::UnknownBroker { node_id })?;
        let nc = self.open(&addr).await?;
        Ok(DedicatedConnection { addr, conn: nc.conn, versions: nc.versions })
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

    /// Like [`ClusterClient::produce`] for one batch given as segments (e.g. a patched
    /// 61-byte header and the untouched payload slice): the segments are written to the
    /// socket as they are (vectored I/O), never copied into a request buffer. Returns the
    /// base offset the broker assigned. Ambiguous failures are not retried.
    ///
    /// # Errors
    /// As [`ClusterClient::produce`].
    pub async fn produce_segments(
        &self,
        topic: &str,
        partition: i32,
        segments: Vec<Bytes>,
        acks: Acks,
    ) -> Result<i64, ClusterError> {
        use crate::wire::produce::ProduceFrameBuilder;
        let timeout_ms = self.timeout_ms();
        let retry_if = |e: &ClusterError| !e.is_ambiguous();
        self.retrying(ApiKey::Produce, &[topic], retry_if, || {
            let segments = segments.clone();
            async move {
                let leader = self.leader_for(topic, partition).await?;
                let topic_id = self.cached_topic(topic).map(|t| t.topic_id).unwrap_or_default();
                let addr =
                    self.addr_of(leader.node_id).ok_or(ClusterError::UnknownBroker { node_id: leader.node_id })?;
                let slot = self.slot(&addr);
                let mut guard = slot.lock().await;
                let nc = self.ensure_connected(&addr, &mut guard).await?;
                let max = if topic_id == KafkaUuid::ZERO { 12 } else { PRODUCE_VERSIONS.1 };
                let version = pick_version(ApiKey::Produce, &addr, nc, (PRODUCE_VERSIONS.0.max(9), max))?;
                let mut builder =
                    ProduceFrameBuilder::new(version, 0, &self.inner.opts.client_id, acks.wire(), timeout_ms);
                if version >= 13 {
                    builder.partition(to_proto_uuid::<uuid::Uuid>(topic_id), partition, segments);
                } else {
                    builder.partition(topic, partition, segments);
                }
                let frame = builder.finish().map_err(|e| ClusterError::InvalidArgument(e.to_string()))?;
                let resp = match nc.conn.send_produce(frame).await {
                    Ok(r) => r,
                    Err(source) => {
                        *guard = None;
                        return Err(ClusterError::Transport { api: ApiKey::Produce, broker: addr.clone(), source });
                    }
                };
                drop(guard);
                let p = resp
                    .responses
                    .iter()
                    .filter(|t| {
                        if version >= 13 {
                            KafkaUuid(*t.topic_id.as_bytes()) == topic_id
                        } else {
                            t.name.0.as_str() == topic
                        }
                    })
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|p| p.index == partition)
                    .ok_or_else(|| ClusterError::Unexpected {
                        api: ApiKey::Produce,
                        broker: addr.clone(),
                        reason: format!("no answer for {topic}-{partition}"),
                    })?;
                if p.error_code != 0 {
                    if KafkaErrorCode(p.error_code).needs_metadata_refresh() {
                        self.invalidate_topic(topic);
                    }
                    return Err(ClusterError::Kafka {
                        api: ApiKey::Produce,
                        broker: addr,
                        resource: format!("{topic}-{partition}"),
                        error: KafkaErrorCode(p.error_code),
                        message: p.error_message.as_ref().map(to_string),
                    });
                }
                Ok(p.base_offset)
            }
        })
        .await
    }

    /// Fetches from `topic`-`partition` at `offset` (up to `max_bytes`, at least one batch
    /// even if larger, `read_uncommitted`, no wait) from its leader. Returns the raw record
    /// bytes with the high watermark and the log start offset.
    ///
    /// # Errors
    /// A [`ClusterError::Kafka`] naming the partition, e.g. `OFFSET_OUT_OF_RANGE` (not
    /// retried), after retrying leader changes with a Metadata refresh.
    pub async fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
    ) -> Result<FetchedPartition, ClusterError> {
        self.retrying(
            ApiKey::Fetch,
            &[topic],
            |_| true,
            || async move {
                let leader = self.leader_for(topic, partition).await?;
                let topic_id = self.cached_topic(topic).map(|t| t.topic_id).unwrap_or_default();
                let addr =
                    self.addr_of(leader.node_id).ok_or(ClusterError::UnknownBroker { node_id: leader.node_id })?;
                let max = if topic_id == KafkaUuid::ZERO { 12 } else { FETCH_VERSIONS.1 };
                let (resp, version) = self
                    .call(&addr, (FETCH_VERSIONS.0, max), |v| {
                        let mut p = FetchPartition::default();
                        p.partition = partition;
                        p.current_leader_epoch = leader.leader_epoch;
                        p.fetch_offset = offset;
                        p.partition_max_bytes = max_bytes;
                        let mut t = FetchTopic::default();
                        if v >= 13 {
                            t.topic_id = to_proto_uuid(topic_id);
                        } else {
                            t.topic = topic_name(topic);
                        }
                        t.partitions = vec![p];
                        let mut req = FetchRequest::default();
                        req.replica_id = BrokerId(-1);
                        req.max_wait_ms = 0;
                        req.min_bytes = 1;
                        req.max_bytes = max_bytes;
                        req.isolation_level = 0;
                        req.session_id = 0;
                        req.session_epoch = -1;
                        req.topics = vec![t];
                        req
                    })
                    .await?;
                let kafka = |error: i16, addr: String| ClusterError::Kafka {
                    api: ApiKey::Fetch,
                    broker: addr,
                    resource: format!("{topic}-{partition}"),
                    error: KafkaErrorCode(error),
                    message: None,
                };
                if resp.error_code != 0 {
                    return Err(kafka(resp.error_code, addr));
                }
                let p = resp
                    .responses
                    .iter()
                    .filter(|t| {
                        if version >= 13 {
                            KafkaUuid(*t.topic_id.as_bytes()) == topic_id
                        } else {
                            t.topic.0.as_str() == topic
                        }
                    })
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == partition)
                    .ok_or_else(|| ClusterError::Unexpected {
                        api: ApiKey::Fetch,
                        broker: addr.clone(),
                        reason: format!("no answer for {topic}-{partition}"),
                    })?;
                if p.error_code != 0 {
                    return Err(kafka(p.error_code, addr));
                }
                Ok(FetchedPartition {
                    records: p.records.clone().unwrap_or_default(),
                    high_watermark: p.high_watermark,
                    last_stable_offset: p.last_stable_offset,
                    log_start_offset: p.log_start_offset,
                })
            },
        )
        .await
    }

    /// Fetches several partitions of `topic` from broker `node_id` in one Fetch request
    /// (no fetch session, read_uncommitted), waiting up to `max_wait_ms` for at least one
    /// byte (Fetch `max_wait_ms` / `min_bytes` = 1), at most `partition_max_bytes` bytes per
    /// partition. `partitions` lists `(partition index, fetch offset)`; each answer carries
    /// the partition's own error code (e.g. NOT_LEADER_OR_FOLLOWER (6) when it moved). No
    /// retry.
    ///
    /// # Errors
    /// The request failed as a whole: as [`ClusterClient::send_to_node`], or a top-level
    /// Fetch error.
    pub async fn fetch_from_node(
        &self,
        node_id: i32,
        topic: &str,
        partitions: &[(i32, i64)],
        max_wait_ms: i32,
        partition_max_bytes: i32,
    ) -> Result<Vec<(i32, Result<FetchedPartition, KafkaErrorCode>)>, ClusterError> {
        let addr = self.addr_of(node_id).ok_or(ClusterError::UnknownBroker { node_id })?;
        let topic_id = self.cached_topic(topic).map(|t| t.topic_id).unwrap_or_default();
        let max = if topic_id == KafkaUuid::ZERO { 12 } else { FETCH_VERSIONS.1 };
        let (resp, version) = self
            .call(&addr, (FETCH_VERSIONS.0, max), |v| {
                let mut t = FetchTopic::default();
                if v >= 13 {
                    t.topic_id = to_proto_uuid(topic_id);
                } else {
                    t.topic = topic_name(topic);
                }
                t.partitions = partitions
                    .iter()
                    .map(|&(partition, offset)| {
                        let mut p = FetchPartition::default();
                        p.partition = partition;
                        p.fetch_offset = offset;
                        p.partition_max_bytes = partition_max_bytes;
                        p
                    })
                    .collect();
                let mut req = FetchRequest::default();
                req.replica_id = BrokerId(-1);
                req.max_wait_ms = max_wait_ms;
                req.min_bytes = 1;
                req.max_bytes = partition_max_bytes.saturating_mul(partitions.len().max(1) as i32);
                req.isolation_level = 0;
                req.session_id = 0;
                req.session_epoch = -1;
                req.topics = vec![t];
                req
            })
            .await?;
        if resp.error_code != 0 {
            return Err(ClusterError::Kafka {
                api: ApiKey::Fetch,
                broker: addr,
                resource: topic.to_string(),
                error: KafkaErrorCode(resp.error_code),
                message: None,
            });
        }
        Ok(resp
            .responses
            .iter()
            .filter(|t| {
                if version >= 13 {
                    KafkaUuid(*t.topic_id.as_bytes()) == topic_id
                } else {
                    t.topic.0.as_str() == topic
                }
            })
            .flat_map(|t| t.partitions.iter())
            .map(|p| {
                let answer = if p.error_code != 0 {
                    Err(KafkaErrorCode(p.error_code))
                } else {
                    Ok(FetchedPartition {
                        records: p.records.clone().unwrap_or_default(),
                        high_watermark: p.high_watermark,
                        last_stable_offset: p.last_stable_offset,
                        log_start_offset: p.log_start_offset,
                    })
                };
                (p.partition_index, answer)
            })
            .collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_error_names_are_kafkas() {
        assert_eq!(KafkaErrorCode(6).name(), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(KafkaErrorCode(100).name(), "UNKNOWN_TOPIC_ID");
        assert_eq!(KafkaErrorCode(36).to_string(), "TOPIC_ALREADY_EXISTS (36)");
        assert_eq!(KafkaErrorCode(0).name(), "NONE");
        assert_eq!(KafkaErrorCode(-1).name(), "UNKNOWN_SERVER_ERROR");
        assert_eq!(KafkaErrorCode(31000).name(), "UNKNOWN_ERROR_CODE");
    }

    #[test]
    fn refresh_and_retry_classification() {
        for code in [6, 74, 100, 3] {
            assert!(KafkaErrorCode(code).needs_metadata_refresh(), "{code}");
        }
        assert!(!KafkaErrorCode(1).needs_metadata_refresh());
        let timed_out = ClusterError::Kafka {
            api: ApiKey::Produce,
            broker: "b:1".into(),
            resource: "t-0".into(),
            error: KafkaErrorCode(7),
            message: None,
        };
        assert!(timed_out.is_retriable() && timed_out.is_ambiguous());
        let not_leader = ClusterError::Kafka {
            api: ApiKey::Produce,
            broker: "b:1".into(),
            resource: "t-0".into(),
            error: KafkaErrorCode(6),
            message: None,
        };
        assert!(not_leader.is_retriable() && !not_leader.is_ambiguous());
        assert!(not_leader.to_string().contains("NOT_LEADER_OR_FOLLOWER"), "{not_leader}");
        assert!(not_leader.to_string().contains("b:1"), "{not_leader}");
    }

    #[test]
    fn uuid_round_trip_without_naming_the_type() {
        let id = KafkaUuid([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
        let mut t = FetchTopic::default();
        t.topic_id = to_proto_uuid(id);
        assert_eq!(KafkaUuid(*t.topic_id.as_bytes()), id);
    }
}
