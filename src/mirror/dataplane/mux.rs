//! Per-broker request batching for the copy loops (issue: "many partitions per request").
//! Every copy loop has at most one Fetch and one Produce outstanding; the loops of a mirror
//! hand them to one task per source broker (Fetch) and one per destination broker (Produce),
//! which sends everything queued as one request and hands each loop its partition's answer.
//! While a request is in flight the next one's partitions queue up, so a broker sees one
//! request at a time per mirror, carrying every partition that is ready.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, oneshot};

use crate::client::cluster::{ClusterClient, KafkaErrorCode};
use crate::wire::mirror::KafkaUuid;
use crate::wire::produce::{ProduceFrameBuilder, ProduceTopic};

use super::source::{FetchSettings, SourceChunk};

/// Why a multiplexed request did not give a partition its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MuxError {
    /// The broker answered this partition with a Kafka error.
    Kafka(i16, Option<String>),
    /// The request went out and no answer came back: a Produce may have been appended.
    Ambiguous(String),
    /// Nothing was sent (no leader, no connection, ...).
    NotSent(String),
}

impl std::fmt::Display for MuxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MuxError::Kafka(code, msg) => {
                write!(f, "{}{}", KafkaErrorCode(*code), msg.as_ref().map(|m| format!(": {m}")).unwrap_or_default())
            }
            MuxError::Ambiguous(m) => write!(f, "no answer: {m}"),
            MuxError::NotSent(m) => write!(f, "not sent: {m}"),
        }
    }
}

struct FetchJob {
    topic: String,
    partition: i32,
    offset: i64,
    last_epoch: i32,
    leader_epoch: i32,
    reply: oneshot::Sender<Result<SourceChunk, MuxError>>,
}

/// Source-side batching: one Fetch per source broker carrying every waiting partition.
pub struct FetchMux {
    client: ClusterClient,
    settings: FetchSettings,
    brokers: Mutex<HashMap<i32, mpsc::UnboundedSender<FetchJob>>>,
}

impl FetchMux {
    /// A multiplexer over `client` with the mirror's fetch settings.
    pub fn new(client: ClusterClient, settings: FetchSettings) -> Arc<Self> {
        Arc::new(Self { client, settings, brokers: Mutex::new(HashMap::new()) })
    }

    /// Fetches `topic`-`partition` at `offset` (READ_COMMITTED, `LastFetchedEpoch`
    /// `last_epoch`) in the next request to its leader.
    ///
    /// # Errors
    /// [`MuxError`]; partition-level Kafka errors come back in [`SourceChunk::error_code`].
    pub async fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        last_epoch: i32,
    ) -> Result<SourceChunk, MuxError> {
        let leader = self.client.leader_for(topic, partition).await.map_err(|e| MuxError::NotSent(e.to_string()))?;
        let (reply, rx) = oneshot::channel();
        let job = FetchJob {
            topic: topic.to_string(),
            partition,
            offset,
            last_epoch,
            leader_epoch: leader.leader_epoch,
            reply,
        };
        self.broker(leader.node_id).send(job).map_err(|_| MuxError::NotSent("fetcher stopped".into()))?;
        rx.await.map_err(|_| MuxError::NotSent("fetcher stopped".into()))?
    }

    fn broker(&self, node_id: i32) -> mpsc::UnboundedSender<FetchJob> {
        let mut brokers = self.brokers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = brokers.get(&node_id).filter(|tx| !tx.is_closed()) {
            return tx.clone();
        }
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(fetch_loop(self.client.clone(), node_id, self.settings, rx));
        brokers.insert(node_id, tx.clone());
        tx
    }
}

async fn fetch_loop(client: ClusterClient, node_id: i32, s: FetchSettings, mut rx: mpsc::UnboundedReceiver<FetchJob>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while let Ok(j) = rx.try_recv() {
            jobs.push(j);
        }
        let mut topics: Vec<FetchTopic> = Vec::new();
        for j in &jobs {
            let part = FetchPartition::default()
                .with_partition(j.partition)
                .with_current_leader_epoch(j.leader_epoch)
                .with_fetch_offset(j.offset)
                .with_last_fetched_epoch(j.last_epoch)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(s.partition_max_bytes);
            match topics.iter_mut().find(|t| t.topic.0.as_str() == j.topic) {
                Some(t) => t.partitions.push(part),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(j.topic.clone())))
                        .with_partitions(vec![part]),
                ),
            }
        }
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(s.max_wait.as_millis().min(i32::MAX as u128) as i32)
            .with_min_bytes(s.min_bytes)
            .with_max_bytes(s.response_max_bytes)
            .with_isolation_level(1)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_rack_id(StrBytes::default())
            .with_topics(topics);
        let resp = client.send_to_node(node_id, &req, super::source::FETCH_VERSION).await;
        match resp {
            Err(e) => {
                let m = e.to_string();
                for j in jobs {
                    let _ = j.reply.send(Err(MuxError::NotSent(m.clone())));
                }
            }
            Ok(resp) if resp.error_code != 0 => {
                for j in jobs {
                    let _ = j.reply.send(Err(MuxError::Kafka(resp.error_code, None)));
                }
            }
            Ok(resp) => {
                for j in jobs {
                    let p = resp
                        .responses
                        .iter()
                        .filter(|t| t.topic.0.as_str() == j.topic)
                        .flat_map(|t| t.partitions.iter())
                        .find(|p| p.partition_index == j.partition);
                    let answer = match p {
                        Some(p) => Ok(super::source::chunk_of(p)),
                        None => Err(MuxError::NotSent(format!(
                            "broker {node_id} did not answer for {}-{}",
                            j.topic, j.partition
                        ))),
                    };
                    let _ = j.reply.send(answer);
                }
            }
        }
    }
}

struct ProduceJob {
    topic: String,
    partition: i32,
    segments: Vec<Bytes>,
    reply: oneshot::Sender<Result<i64, MuxError>>,
}

/// Destination-side batching: one Produce (acks=all) per destination leader carrying one
/// batch for every waiting partition.
pub struct ProduceMux {
    client: ClusterClient,
    timeout_ms: i32,
    brokers: Mutex<HashMap<i32, mpsc::UnboundedSender<ProduceJob>>>,
}

impl ProduceMux {
    /// A multiplexer over the destination `client`.
    pub fn new(client: ClusterClient, timeout_ms: i32) -> Arc<Self> {
        Arc::new(Self { client, timeout_ms, brokers: Mutex::new(HashMap::new()) })
    }

    /// Appends one batch (as segments) to `topic`-`partition`; returns its base offset.
    ///
    /// # Errors
    /// [`MuxError`]: [`MuxError::Ambiguous`] when the outcome is unknown.
    pub async fn append(&self, topic: &str, partition: i32, segments: Vec<Bytes>) -> Result<i64, MuxError> {
        let leader = self.client.leader_for(topic, partition).await.map_err(|e| MuxError::NotSent(e.to_string()))?;
        let (reply, rx) = oneshot::channel();
        let job = ProduceJob { topic: topic.to_string(), partition, segments, reply };
        self.broker(leader.node_id).send(job).map_err(|_| MuxError::NotSent("writer stopped".into()))?;
        let r = rx.await.map_err(|_| MuxError::Ambiguous("writer stopped".into()))?;
        if let Err(MuxError::Kafka(code, _)) = &r {
            if KafkaErrorCode(*code).needs_metadata_refresh() {
                self.client.forget_topic(topic);
            }
        }
        r
    }

    fn broker(&self, node_id: i32) -> mpsc::UnboundedSender<ProduceJob> {
        let mut brokers = self.brokers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = brokers.get(&node_id).filter(|tx| !tx.is_closed()) {
            return tx.clone();
        }
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(produce_loop(self.client.clone(), node_id, self.timeout_ms, rx));
        brokers.insert(node_id, tx.clone());
        tx
    }
}

async fn produce_loop(
    client: ClusterClient,
    node_id: i32,
    timeout_ms: i32,
    mut rx: mpsc::UnboundedReceiver<ProduceJob>,
) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while let Ok(j) = rx.try_recv() {
            jobs.push(j);
        }
        // Kafka takes one batch per partition per request: a second job for the same
        // partition (not expected: each copy loop has one append outstanding) waits.
        let mut later = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut now = Vec::new();
        for j in jobs {
            if seen.insert((j.topic.clone(), j.partition)) {
                now.push(j);
            } else {
                later.push(j);
            }
        }
        let ids: Vec<KafkaUuid> = now.iter().map(|j| client.cached_topic_id(&j.topic)).collect();
        let by_id = ids.iter().all(|id| *id != KafkaUuid::ZERO);
        let result = client
            .send_produce_to_node(node_id, |version| {
                let mut b = ProduceFrameBuilder::new(version, 0, "mirrorgate", -1, timeout_ms);
                for (j, id) in now.iter().zip(&ids) {
                    if version >= 13 && by_id {
                        b.partition(ProduceTopic::Id(uuid::Uuid::from_bytes(id.0)), j.partition, j.segments.clone());
                    } else {
                        b.partition(j.topic.as_str(), j.partition, j.segments.clone());
                    }
                }
                b.finish()
            })
            .await;
        match result {
            Err(e) => {
                let ambiguous = e.is_ambiguous();
                let m = e.to_string();
                for j in now {
                    let err = if ambiguous { MuxError::Ambiguous(m.clone()) } else { MuxError::NotSent(m.clone()) };
                    let _ = j.reply.send(Err(err));
                }
            }
            Ok((resp, version)) => {
                for (j, id) in now.into_iter().zip(ids) {
                    let p = resp
                        .responses
                        .iter()
                        .filter(|t| {
                            if version >= 13 && by_id {
                                KafkaUuid(*t.topic_id.as_bytes()) == id
                            } else {
                                t.name.0.as_str() == j.topic
                            }
                        })
                        .flat_map(|t| t.partition_responses.iter())
                        .find(|p| p.index == j.partition);
                    let answer = match p {
                        None => Err(MuxError::Ambiguous(format!(
                            "broker {node_id} did not answer for {}-{}",
                            j.topic, j.partition
                        ))),
                        Some(p) if p.error_code == 0 => Ok(p.base_offset),
                        Some(p) => Err(MuxError::Kafka(p.error_code, p.error_message.as_ref().map(|m| m.to_string()))),
                    };
                    let _ = j.reply.send(answer);
                }
            }
        }
        // Anything held back goes first in the next round.
        for j in later {
            let topic = j.topic.clone();
            let _ = j.reply.send(Err(MuxError::NotSent(format!("two appends to {topic} in one round"))));
        }
    }
}
