//! [`ClusterClient`]'s admin requests: CreateTopics, DescribeCluster, DescribeConfigs.

use super::*;

impl ClusterClient {
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
}
