//! The coordinator side of a transactional producer (KIP-98, KIP-890), as the data plane
//! needs it to place real transaction markers: find the transaction coordinator, get or
//! resume a producer id and epoch for a transactional id, add partitions to the open
//! transaction, and end it (COMMIT or ABORT), retrying the answers Kafka's own producer
//! retries.
//!
//! The *client* transaction version is chosen by request versions, not by the cluster's
//! finalized `transaction.version` feature (Kafka's `TransactionVersion
//! .transactionVersionForEndTxn` / `transactionVersionForAddPartitionsToTxn`): `EndTxn` v0–4
//! and `AddPartitionsToTxn` v0–3 are a TV_0 client on every cluster, `EndTxn` v5 is a TV_2
//! client, whose transaction end bumps the producer epoch (the `EndTxn` v5 response carries the
//! new producer id and epoch). See docs/broker-behaviour.md ("Transactions") for what the
//! brokers were pinned to do with each, on Kafka 3.9, 4.1 and 4.4.
//!
//! Markers are written by the coordinator after `EndTxn` returns (asynchronously, through
//! WriteTxnMarkers to each partition leader): a caller that needs the marker at an exact
//! offset must not append anything else to the partition until the log end has moved past it
//! (the log end of a partition of one replica, or the last stable offset, as
//! `tests/broker_txn.rs` checks).

use std::time::{Duration, Instant};

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, BrokerId, DescribeTransactionsRequest, EndTxnRequest, FindCoordinatorRequest,
    InitProducerIdRequest, ListOffsetsRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use kafka_protocol::protocol::Request;

use crate::client::cluster::{ClusterClient, ClusterError};
use crate::client::conn::{BrokerConnection, ClientError};

/// Where the requests of this module go: one broker, over a plain [`BrokerConnection`] (the
/// broker-behaviour tests) or through a [`ClusterClient`] to one of its nodes ([`Node`]: the
/// data plane, with the cluster's TLS and SASL settings).
pub trait TxnTransport: Send {
    /// Sends `req` at `version` and returns the response.
    fn send_request<R: Request + Clone + Send + Sync>(
        &mut self,
        req: &R,
        version: i16,
    ) -> impl std::future::Future<Output = Result<R::Response, TxnError>> + Send;
}

impl TxnTransport for BrokerConnection {
    async fn send_request<R: Request + Clone + Send + Sync>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, TxnError> {
        Ok(self.send(req, version).await?)
    }
}

/// Node `node_id` of a [`ClusterClient`] as a [`TxnTransport`].
pub struct Node<'a> {
    /// The cluster.
    pub client: &'a ClusterClient,
    /// Broker id.
    pub node_id: i32,
}

/// Any reachable broker of a [`ClusterClient`] as a [`TxnTransport`] (FindCoordinator).
pub struct AnyBroker<'a>(pub &'a ClusterClient);

impl TxnTransport for AnyBroker<'_> {
    async fn send_request<R: Request + Clone + Send + Sync>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, TxnError> {
        self.0.send_any(req, version).await.map_err(|e| TxnError::Cluster(Box::new(e)))
    }
}

impl TxnTransport for Node<'_> {
    async fn send_request<R: Request + Clone + Send + Sync>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, TxnError> {
        self.client.send_to_node(self.node_id, req, version).await.map_err(|e| TxnError::Cluster(Box::new(e)))
    }
}

/// `COORDINATOR_LOAD_IN_PROGRESS`: retriable on the same coordinator.
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
/// `COORDINATOR_NOT_AVAILABLE`: retriable after finding the coordinator again.
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// `NOT_COORDINATOR`: find the coordinator again.
pub const NOT_COORDINATOR: i16 = 16;
/// `INVALID_PRODUCER_EPOCH`: the epoch is not the coordinator's (fenced before KIP-588).
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
/// `INVALID_TXN_STATE`: the request does not fit the transaction's state.
pub const INVALID_TXN_STATE: i16 = 48;
/// `INVALID_PRODUCER_ID_MAPPING`: the producer id is not the transactional id's.
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
/// `CONCURRENT_TRANSACTIONS`: the previous transaction's markers are still being written
/// (state PrepareCommit/PrepareAbort); retriable.
pub const CONCURRENT_TRANSACTIONS: i16 = 51;
/// `PRODUCER_FENCED` (KIP-588): a newer epoch holds the transactional id.
pub const PRODUCER_FENCED: i16 = 90;
/// `TRANSACTION_ABORTABLE` (KIP-890).
pub const TRANSACTION_ABORTABLE: i16 = 120;

/// Which client transaction version the requests speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnProtocol {
    /// `AddPartitionsToTxn` v3 and `EndTxn` v4 (the coordinator's TV_0 client rules: the
    /// epoch stays across transactions).
    V1,
    /// `AddPartitionsToTxn` v3 and `EndTxn` v5 (KIP-890 part 2, TV_2: every transaction end
    /// bumps the epoch; the marker carries the bumped epoch).
    V2,
}

impl TxnProtocol {
    /// The `EndTxn` version that makes the coordinator treat the client as this version.
    pub fn end_txn_version(self) -> i16 {
        match self {
            TxnProtocol::V1 => 4,
            TxnProtocol::V2 => 5,
        }
    }
}

/// Why a transactional request failed.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// The request did not get an answer.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The request did not get an answer through the cluster client.
    #[error(transparent)]
    Cluster(Box<ClusterError>),
    /// The partition's log end did not reach the expected offset in time (a marker not
    /// written yet, or written elsewhere).
    #[error("{topic}-{partition}: log end {seen} did not reach {expected} within {ms} ms")]
    LogEnd {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// The offset waited for.
        expected: i64,
        /// The last log end seen.
        seen: i64,
        /// How long it waited, ms.
        ms: u128,
    },
    /// The request was not sent, or its answer given up with its connection reset: the
    /// transport refused it (e.g. the partition's write permission ended, the data plane's
    /// coordinator fencing).
    #[error("not sent: {0}")]
    NotSent(String),
    /// The broker answered with a Kafka error code (not one this module retries, or still
    /// retriable when the deadline passed).
    #[error("{api} for transactional id {transactional_id}: Kafka error {code}")]
    Kafka {
        /// The API (`InitProducerId`, `AddPartitionsToTxn`, `EndTxn`, `FindCoordinator`).
        api: &'static str,
        /// The transactional id.
        transactional_id: String,
        /// Kafka's error code.
        code: i16,
    },
}

impl TxnError {
    /// The Kafka error code, if the broker answered with one.
    pub fn code(&self) -> Option<i16> {
        match self {
            TxnError::Kafka { code, .. } => Some(*code),
            TxnError::Client(_) | TxnError::Cluster(_) | TxnError::LogEnd { .. } | TxnError::NotSent(_) => None,
        }
    }
}

/// A transactional producer's identity: what a restart needs to resume an open transaction
/// without `InitProducerId` (which would abort it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnProducer {
    /// The transactional id.
    pub transactional_id: String,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// The client transaction version the requests speak.
    pub protocol: TxnProtocol,
}

/// What the coordinator holds for a transactional id (DescribeTransactions v0, KIP-664).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnDescription {
    /// Kafka's `TransactionState` name: `Empty`, `Ongoing`, `PrepareCommit`, `PrepareAbort`,
    /// `CompleteCommit`, `CompleteAbort`, `Dead`, `PrepareEpochFence`.
    pub state: String,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Transaction timeout, ms.
    pub timeout_ms: i32,
    /// The partitions (topic, partition) in the open transaction.
    pub partitions: Vec<(String, i32)>,
}

/// DescribeTransactions v0 of `transactional_id`, asked of its coordinator: `Ok(None)` when
/// the coordinator does not know the id (`TRANSACTIONAL_ID_NOT_FOUND`, 105). This is how a
/// restarted writer learns the producer id and epoch of a transaction it left open, without
/// InitProducerId (which would abort it at the log end).
///
/// # Errors
/// [`TxnError`] with the error code (retriable ones retried for 30 s).
pub async fn describe(
    conn: &mut impl TxnTransport,
    transactional_id: &str,
) -> Result<Option<TxnDescription>, TxnError> {
    let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![tid(transactional_id)]);
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        let resp = conn.send_request(&req, 0).await?;
        let Some(st) = resp.transaction_states.first() else {
            return Err(TxnError::Kafka {
                api: "DescribeTransactions",
                transactional_id: transactional_id.into(),
                code: -1,
            });
        };
        match st.error_code {
            0 => {
                return Ok(Some(TxnDescription {
                    state: st.transaction_state.to_string(),
                    producer_id: st.producer_id.0,
                    producer_epoch: st.producer_epoch,
                    timeout_ms: st.transaction_timeout_ms,
                    partitions: st
                        .topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
                        .collect(),
                }))
            }
            105 => return Ok(None),
            c if retriable(c) && Instant::now() < deadline => tokio::time::sleep(RETRY_EVERY).await,
            code => {
                return Err(TxnError::Kafka {
                    api: "DescribeTransactions",
                    transactional_id: transactional_id.into(),
                    code,
                })
            }
        }
    }
}

/// How long the retriable answers are retried, and how often.
const RETRY_FOR: Duration = Duration::from_secs(30);
const RETRY_EVERY: Duration = Duration::from_millis(50);

fn retriable(code: i16) -> bool {
    matches!(code, COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | CONCURRENT_TRANSACTIONS)
}

fn tid(s: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(s.to_string()))
}

/// The transaction coordinator of `transactional_id` (FindCoordinator v3, key type 1) as
/// `(node id, host, port)`; the first request for a cluster creates `__transaction_state`,
/// so `COORDINATOR_NOT_AVAILABLE` is retried for up to 30 s.
///
/// # Errors
/// [`TxnError`] with the last error code.
pub async fn find_coordinator(
    conn: &mut impl TxnTransport,
    transactional_id: &str,
) -> Result<(i32, String, i32), TxnError> {
    let req = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(transactional_id.to_string()))
        .with_key_type(1);
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        let resp = conn.send_request(&req, 3).await?;
        if resp.error_code == 0 {
            return Ok((resp.node_id.0, resp.host.to_string(), resp.port));
        }
        if !retriable(resp.error_code) || Instant::now() > deadline {
            return Err(TxnError::Kafka {
                api: "FindCoordinator",
                transactional_id: transactional_id.into(),
                code: resp.error_code,
            });
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

impl TxnProducer {
    /// A producer resumed from a stored identity, without a request (Q3 of
    /// docs/real-markers.md: the coordinator accepts it while the epoch is current).
    pub fn resume(transactional_id: &str, producer_id: i64, producer_epoch: i16, protocol: TxnProtocol) -> Self {
        Self { transactional_id: transactional_id.into(), producer_id, producer_epoch, protocol }
    }

    /// `InitProducerId` v4 for `transactional_id` with a transaction timeout of
    /// `transaction_timeout_ms`: a new epoch (fencing older ones) and, when a transaction of
    /// the id is open, its abort (the coordinator writes ABORT markers at the partitions' log
    /// ends and answers `CONCURRENT_TRANSACTIONS` until they are written; retried).
    ///
    /// # Errors
    /// [`TxnError`]: not-coordinator answers and non-retriable codes, or retriable ones past 30 s.
    pub async fn init(
        conn: &mut impl TxnTransport,
        transactional_id: &str,
        transaction_timeout_ms: i32,
        protocol: TxnProtocol,
    ) -> Result<Self, TxnError> {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(tid(transactional_id)))
            .with_transaction_timeout_ms(transaction_timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let deadline = Instant::now() + RETRY_FOR;
        loop {
            let resp = conn.send_request(&req, 4).await?;
            if resp.error_code == 0 {
                return Ok(Self::resume(transactional_id, resp.producer_id.0, resp.producer_epoch, protocol));
            }
            if !retriable(resp.error_code) || Instant::now() > deadline {
                return Err(TxnError::Kafka {
                    api: "InitProducerId",
                    transactional_id: transactional_id.into(),
                    code: resp.error_code,
                });
            }
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }

    /// `AddPartitionsToTxn` v3 (the client form) of `partitions` (topic, partition); returns
    /// the per-partition error codes in request order (0 = added). A whole-request
    /// `CONCURRENT_TRANSACTIONS` (previous transaction's markers not written yet) is retried.
    ///
    /// # Errors
    /// [`TxnError::Client`] when no answer came.
    pub async fn add_partitions(
        &self,
        conn: &mut impl TxnTransport,
        partitions: &[(&str, i32)],
    ) -> Result<Vec<i16>, TxnError> {
        let mut topics: Vec<AddPartitionsToTxnTopic> = vec![];
        for (topic, p) in partitions {
            match topics.iter_mut().find(|t| t.name.0.as_str() == *topic) {
                Some(t) => t.partitions.push(*p),
                None => topics.push(
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(vec![*p]),
                ),
            }
        }
        let req = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(tid(&self.transactional_id))
            .with_v3_and_below_producer_id(ProducerId(self.producer_id))
            .with_v3_and_below_producer_epoch(self.producer_epoch)
            .with_v3_and_below_topics(topics);
        let deadline = Instant::now() + RETRY_FOR;
        loop {
            let resp = conn.send_request(&req, 3).await?;
            let codes: Vec<i16> = partitions
                .iter()
                .map(|(topic, p)| {
                    resp.results_by_topic_v3_and_below
                        .iter()
                        .find(|t| t.name.0.as_str() == *topic)
                        .and_then(|t| t.results_by_partition.iter().find(|r| r.partition_index == *p))
                        .map_or(-1, |r| r.partition_error_code)
                })
                .collect();
            if codes.iter().all(|c| retriable(*c)) && Instant::now() < deadline {
                tokio::time::sleep(RETRY_EVERY).await;
                continue;
            }
            return Ok(codes);
        }
    }

    /// `EndTxn` (v4 for [`TxnProtocol::V1`], v5 for [`TxnProtocol::V2`]): commits or aborts
    /// the open transaction, retrying `CONCURRENT_TRANSACTIONS` and a coordinator still
    /// loading. Under V2 the response's producer id and epoch (the bumped epoch) replace this
    /// producer's. Returns when the coordinator has written PrepareCommit/PrepareAbort: the
    /// markers may not be in the partitions' logs yet.
    ///
    /// # Errors
    /// [`TxnError`] with the code (`INVALID_TXN_STATE`, `PRODUCER_FENCED`,
    /// `INVALID_PRODUCER_EPOCH`, ...).
    pub async fn end(&mut self, conn: &mut impl TxnTransport, commit: bool) -> Result<(), TxnError> {
        let req = EndTxnRequest::default()
            .with_transactional_id(tid(&self.transactional_id))
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.producer_epoch)
            .with_committed(commit);
        let deadline = Instant::now() + RETRY_FOR;
        loop {
            let resp = conn.send_request(&req, self.protocol.end_txn_version()).await?;
            if resp.error_code == 0 {
                if self.protocol == TxnProtocol::V2 && resp.producer_id.0 >= 0 {
                    self.producer_id = resp.producer_id.0;
                    self.producer_epoch = resp.producer_epoch;
                }
                return Ok(());
            }
            if !retriable(resp.error_code) || Instant::now() > deadline {
                return Err(TxnError::Kafka {
                    api: "EndTxn",
                    transactional_id: self.transactional_id.clone(),
                    code: resp.error_code,
                });
            }
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }
}

/// Waits until the log end of `topic`-`partition` — the high watermark that ListOffsets v7
/// (latest, READ_UNCOMMITTED) answers, so the marker is replicated — is at least
/// `expected`, polling the partition leader on `leader` every 20 ms for up to `timeout`.
/// Returns the log end seen. The data plane calls it after [`TxnProducer::end`] with
/// `expected` = marker offset + 1 before appending anything else to the partition: the
/// coordinator writes markers after EndTxn returns (1 to 140 ms later on one node,
/// docs/broker-behaviour.md T1).
///
/// # Errors
/// [`TxnError::LogEnd`] when `timeout` passes first; [`TxnError::Kafka`] for a ListOffsets
/// error code other than the retriable `LEADER_NOT_AVAILABLE` (5) / `OFFSET_NOT_AVAILABLE` (78).
pub async fn wait_for_log_end(
    leader: &mut impl TxnTransport,
    topic: &str,
    partition: i32,
    expected: i64,
    timeout: Duration,
) -> Result<i64, TxnError> {
    let req = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_isolation_level(0).with_topics(vec![
        ListOffsetsTopic::default().with_name(TopicName(StrBytes::from_string(topic.to_string()))).with_partitions(
            vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(-1)],
        ),
    ]);
    let started = Instant::now();
    let mut seen = -1;
    loop {
        let resp = leader.send_request(&req, 7).await?;
        let answer = resp.topics.first().and_then(|t| t.partitions.first()).map(|p| (p.error_code, p.offset));
        match answer {
            Some((0, offset)) => {
                seen = offset;
                if offset >= expected {
                    return Ok(offset);
                }
            }
            Some((5 | 78, _)) => {}
            other => {
                return Err(TxnError::Kafka {
                    api: "ListOffsets",
                    transactional_id: String::new(),
                    code: other.map_or(-1, |(code, _)| code),
                })
            }
        }
        if started.elapsed() > timeout {
            return Err(TxnError::LogEnd { topic: topic.into(), partition, expected, seen, ms: timeout.as_millis() });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_txn_version_chooses_the_client_transaction_version() {
        // Kafka's TransactionVersion.transactionVersionForEndTxn: v5+ is TV_2.
        assert_eq!(TxnProtocol::V1.end_txn_version(), 4);
        assert_eq!(TxnProtocol::V2.end_txn_version(), 5);
    }

    #[test]
    fn only_load_and_concurrency_answers_are_retried_on_the_same_coordinator() {
        for code in [COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS] {
            assert!(retriable(code), "{code}");
        }
        for code in
            [0, NOT_COORDINATOR, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED, TRANSACTION_ABORTABLE]
        {
            assert!(!retriable(code), "{code}");
        }
    }
}
