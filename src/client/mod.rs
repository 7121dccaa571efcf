//! The small async Kafka client mirrorgate uses for its own requests (destination discovery
//! now; the data plane's fetchers and writers later), built on `kafka-protocol` messages.
//! It never decodes record payloads.

pub mod cluster;
pub mod conn;
pub mod connect;
pub mod metrics;
pub mod oauth;
pub mod reauth;
pub mod sasl;
pub mod security;
pub mod stream;
pub mod tls;
pub mod txn;

pub use cluster::{
    Acks, BrokerInfo, ClusterClient, ClusterError, ClusterMetadata, ClusterOptions, CreateTopicOutcome,
    FetchedPartition, KafkaErrorCode, PartitionInfo, PartitionLeader, TopicInfo,
};
pub use conn::{BrokerConnection, ClientError};
pub use connect::{ConnectPolicy, SocketOptions};
pub use security::{ClientSecurity, SecurityError, SecurityProtocol};
