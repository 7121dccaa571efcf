//! [`ClusterClient`]'s data requests: Produce (single batch, zero-copy segments, on a
//! [`DedicatedConnection`]) and Fetch. Record batches stay raw bytes: never decoded here.

use super::*;

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

impl ClusterClient {
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
}
