//! What [`ClusterClient`](super::ClusterClient) returns: cluster metadata (brokers, topics,
//! partitions, leaders), producers, acks, fetch answers.

use super::*;

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
    /// Max timestamp of the producer's last batch on the partition (ms since the epoch, as the
    /// batch carries it: CreateTime set by the producer, or LogAppendTime), -1 when none.
    pub last_timestamp: i64,
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
    pub(super) fn wire(self) -> i16 {
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
