//! Reading a mirror partition from the source cluster: Fetch at `READ_COMMITTED` (up to the
//! LSO) with `LastFetchedEpoch`, returning raw batches plus what the gap logic needs
//! (aborted transactions, LSO, log start, diverging epoch). Never decompresses.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::OwnedSemaphorePermit;

use crate::client::cluster::{ClusterClient, ClusterError, KafkaErrorCode};

/// Fetch version used: v12 names topics, carries `LastFetchedEpoch` and `diverging_epoch`
/// (KIP-320/KIP-595) and is supported by every Kafka 3.x/4.x broker.
pub const FETCH_VERSION: i16 = 12;
/// How many throttled answers [`fetch`] waits out before giving up.
const THROTTLED_ATTEMPTS: u32 = 10;
/// `isolation_level` READ_COMMITTED.
const READ_COMMITTED: i8 = 1;

/// Errors the partition loop reacts to by name.
pub mod codes {
    /// OFFSET_OUT_OF_RANGE.
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    /// NOT_LEADER_OR_FOLLOWER.
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    /// FENCED_LEADER_EPOCH.
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    /// UNKNOWN_LEADER_EPOCH.
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
}

/// One partition's Fetch answer.
#[derive(Debug, Clone)]
pub struct SourceChunk {
    /// Kafka error code of the partition (0 = none).
    pub error_code: i16,
    /// Raw batches (may start before the requested offset, may end with a partial batch).
    pub records: Bytes,
    /// High watermark.
    pub high_watermark: i64,
    /// Last stable offset (the read_committed end).
    pub last_stable_offset: i64,
    /// Log start offset.
    pub log_start_offset: i64,
    /// `(producer_id, first_offset)` of aborted transactions in the returned range.
    pub aborted: Vec<(i64, i64)>,
    /// `(epoch, end_offset)` when the source log diverged from `LastFetchedEpoch`.
    pub diverging: Option<(i32, i64)>,
    /// Room in the mirror's in-flight byte budget (`mirror.inflight.max.bytes`) taken by the
    /// response these records came in; given back when the last chunk of it is dropped.
    pub hold: Option<Arc<OwnedSemaphorePermit>>,
}

/// Fetch settings from the mirror's configs.
#[derive(Debug, Clone, Copy)]
pub struct FetchSettings {
    /// `fetch.wait.max.ms`.
    pub max_wait: Duration,
    /// `fetch.backoff.ms`: the wait before a copy loop re-aligns after an error.
    pub backoff: Duration,
    /// `fetch.min.bytes`.
    pub min_bytes: i32,
    /// `fetch.response.max.bytes`.
    pub response_max_bytes: i32,
    /// `fetch.max.bytes` (per partition).
    pub partition_max_bytes: i32,
    /// `mirror.inflight.max.bytes`: source record bytes the mirror may hold at once.
    pub inflight_max_bytes: i32,
    /// `mirror.replication.throttled.rate`: cap on the mirror's source fetch rate, bytes/s.
    pub throttled_rate: Option<u64>,
    /// `mirror.num.replica.fetchers`: fetch sessions (each on a connection of its own) per
    /// source broker, at least 1.
    pub fetchers: usize,
}

impl Default for FetchSettings {
    /// The mirror configs' defaults.
    fn default() -> Self {
        Self {
            max_wait: Duration::from_millis(1000),
            backoff: Duration::from_millis(1000),
            min_bytes: 1,
            response_max_bytes: 10 << 20,
            partition_max_bytes: 1 << 20,
            inflight_max_bytes: 64 << 20,
            throttled_rate: None,
            fetchers: 1,
        }
    }
}

/// Fetches `topic`-`partition` at `offset` from its source leader.
///
/// # Errors
/// A [`ClusterError`] for transport failures or a missing leader; partition-level Kafka
/// errors come back in [`SourceChunk::error_code`].
pub async fn fetch(
    client: &ClusterClient,
    topic: &str,
    partition: i32,
    offset: i64,
    last_fetched_epoch: i32,
    s: &FetchSettings,
) -> Result<SourceChunk, ClusterError> {
    let leader = client.leader_for(topic, partition).await?;
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(s.max_wait.as_millis().min(i32::MAX as u128) as i32)
        .with_min_bytes(s.min_bytes)
        .with_max_bytes(s.response_max_bytes)
        .with_isolation_level(READ_COMMITTED)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_rack_id(StrBytes::default())
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(leader.leader_epoch)
                .with_fetch_offset(offset)
                .with_last_fetched_epoch(last_fetched_epoch)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(s.partition_max_bytes)])]);
    // A quota on the client id (KIP-219) gets an empty answer and a throttle time: wait it
    // out and ask again (a few times; the caller re-aligns after that).
    let mut attempts = 0;
    let resp = loop {
        let resp = client.send_to_node(leader.node_id, &req, FETCH_VERSION).await?;
        attempts += 1;
        if resp.error_code == 0
            && resp.throttle_time_ms > 0
            && resp.responses.is_empty()
            && attempts < THROTTLED_ATTEMPTS
        {
            tracing::debug!(topic, partition, throttle_ms = resp.throttle_time_ms, "source Fetch throttled by a quota");
            tokio::time::sleep(Duration::from_millis(resp.throttle_time_ms.max(0) as u64)).await;
            continue;
        }
        break resp;
    };
    if resp.error_code != 0 {
        return Err(ClusterError::Kafka {
            api: kafka_protocol::messages::ApiKey::Fetch,
            broker: format!("node {}", leader.node_id),
            resource: format!("{topic}-{partition}"),
            error: KafkaErrorCode(resp.error_code),
            message: None,
        });
    }
    let p =
        resp.responses.iter().flat_map(|t| t.partitions.iter()).find(|p| p.partition_index == partition).ok_or_else(
            || ClusterError::Unexpected {
                api: kafka_protocol::messages::ApiKey::Fetch,
                broker: format!("node {}", leader.node_id),
                reason: if resp.throttle_time_ms > 0 {
                    format!(
                        "no answer for {topic}-{partition}: throttled by a quota on the client id ({} ms), {attempts} times",
                        resp.throttle_time_ms
                    )
                } else {
                    format!("no answer for {topic}-{partition}")
                },
            },
        )?;
    Ok(chunk_of(p))
}

/// The mirror's view of one partition of a Fetch response.
pub fn chunk_of(p: &kafka_protocol::messages::fetch_response::PartitionData) -> SourceChunk {
    let mut aborted: Vec<(i64, i64)> =
        p.aborted_transactions.iter().flatten().map(|a| (a.producer_id.0, a.first_offset)).collect();
    aborted.sort_by_key(|a| a.1);
    SourceChunk {
        error_code: p.error_code,
        records: p.records.clone().unwrap_or_default(),
        high_watermark: p.high_watermark,
        last_stable_offset: p.last_stable_offset,
        log_start_offset: p.log_start_offset,
        aborted,
        diverging: (p.diverging_epoch.epoch >= 0).then_some((p.diverging_epoch.epoch, p.diverging_epoch.end_offset)),
        hold: None,
    }
}
