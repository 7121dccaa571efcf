//! Errors of [`ClusterClient`](super::ClusterClient): Kafka error codes by Kafka's names, and
//! [`ClusterError`] naming the api, the broker and the cause.

use super::*;

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

    pub(super) fn is(self, e: ResponseError) -> bool {
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

    pub(super) fn needs_metadata_refresh(&self) -> bool {
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
