//! [`ClusterClient`]'s offset queries: ListOffsets (log start, log end, LSO, by timestamp) and
//! DescribeProducers.

use super::*;

impl ClusterClient {
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
                        last_timestamp: a.last_timestamp,
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
}
