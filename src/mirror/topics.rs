//! Topic lookups the control plane needs on either cluster, over short-lived connections:
//! list the source's topics (to resolve `--start` patterns), and create or look up mirror
//! topics on the destination.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::client::{BrokerConnection, ClientError};

/// How to reach a cluster for admin lookups.
#[derive(Debug, Clone)]
pub struct ClusterAccess {
    /// `host:port` bootstrap list.
    pub bootstrap: Vec<String>,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Request timeout.
    pub request_timeout: Duration,
}

/// A topic as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// Topic id (base64, as Kafka prints it).
    pub topic_id: String,
    /// Partition count.
    pub partitions: i32,
    /// Whether Kafka marks it internal (`__consumer_offsets`, ...).
    pub internal: bool,
}

/// Error code of a topic that already exists (Kafka `TOPIC_ALREADY_EXISTS`).
const TOPIC_ALREADY_EXISTS: i16 = 36;

impl ClusterAccess {
    async fn connect(&self) -> Result<BrokerConnection, ClientError> {
        let mut last = None;
        for addr in &self.bootstrap {
            match BrokerConnection::connect(addr, self.connect_timeout, self.request_timeout, 100 << 20).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(ClientError::Closed { addr: "(no bootstrap servers)".into() }))
    }

    /// Every topic of the cluster with its id and partition count, plus the cluster id.
    ///
    /// # Errors
    /// [`ClientError`] when no bootstrap server answers.
    pub async fn topics(&self) -> Result<(Option<String>, BTreeMap<String, TopicInfo>), ClientError> {
        let mut conn = self.connect().await?;
        let resp = conn.send(&MetadataRequest::default().with_topics(None), 12).await?;
        let topics = resp
            .topics
            .iter()
            .filter(|t| t.error_code == 0)
            .filter_map(|t| {
                let name = t.name.as_ref()?.to_string();
                Some((
                    name.clone(),
                    TopicInfo {
                        name,
                        topic_id: base64_uuid(t.topic_id.as_bytes()),
                        partitions: t.partitions.len() as i32,
                        internal: t.is_internal,
                    },
                ))
            })
            .collect();
        Ok((resp.cluster_id.map(|s| s.to_string()), topics))
    }

    /// The configs set on `topic` itself (DescribeConfigs, `config_source` =
    /// DYNAMIC_TOPIC_CONFIG), name → value; broker defaults are left out. Sensitive values
    /// (null) are left out too.
    ///
    /// # Errors
    /// [`ClientError`] when no bootstrap server answers or the broker refuses.
    pub async fn topic_configs(&self, topic: &str) -> Result<BTreeMap<String, String>, ClientError> {
        use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
        use kafka_protocol::messages::DescribeConfigsRequest;
        const DYNAMIC_TOPIC_CONFIG: i8 = 1;
        let mut conn = self.connect().await?;
        let req = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configuration_keys(None)]);
        let resp = conn.send(&req, 4).await?;
        let mut out = BTreeMap::new();
        for r in &resp.results {
            if r.error_code != 0 {
                return Err(ClientError::Protocol {
                    addr: conn.addr().into(),
                    reason: format!("DescribeConfigs {topic}: error {}", r.error_code),
                });
            }
            for c in r.configs.iter().filter(|c| c.config_source == DYNAMIC_TOPIC_CONFIG) {
                if let Some(v) = &c.value {
                    out.insert(c.name.to_string(), v.to_string());
                }
            }
        }
        Ok(out)
    }

    /// The value of one config of `topic` wherever it comes from (topic, broker default).
    ///
    /// # Errors
    /// [`ClientError`] when no bootstrap server answers or the broker refuses.
    pub async fn effective_topic_config(&self, topic: &str, key: &str) -> Result<Option<String>, ClientError> {
        use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
        use kafka_protocol::messages::DescribeConfigsRequest;
        let mut conn = self.connect().await?;
        let req = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configuration_keys(Some(vec![StrBytes::from_string(key.to_string())]))]);
        let resp = conn.send(&req, 4).await?;
        Ok(resp
            .results
            .iter()
            .flat_map(|r| r.configs.iter())
            .find(|c| c.name.as_str() == key)
            .and_then(|c| c.value.as_ref().map(|v| v.to_string())))
    }

    /// Number of brokers in the cluster.
    ///
    /// # Errors
    /// [`ClientError`] when no bootstrap server answers.
    pub async fn broker_count(&self) -> Result<usize, ClientError> {
        let mut conn = self.connect().await?;
        let resp = conn.send(&MetadataRequest::default().with_topics(Some(vec![])), 12).await?;
        Ok(resp.brokers.len())
    }

    /// Creates `name` with `partitions` partitions and `configs`; an existing topic is not an
    /// error (returns `false`).
    ///
    /// # Errors
    /// [`ClientError::Protocol`] carrying the Kafka error code and message for any other
    /// failure.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &BTreeMap<String, String>,
    ) -> Result<bool, ClientError> {
        let mut conn = self.connect().await?;
        let topic = CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(replication_factor)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.clone()))
                            .with_value(Some(StrBytes::from_string(v.clone())))
                    })
                    .collect(),
            );
        let req = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(30_000);
        let resp = conn.send(&req, 5).await?;
        let t = resp.topics.first().ok_or_else(|| ClientError::Protocol {
            addr: conn.addr().into(),
            reason: "CreateTopics answered no topic".into(),
        })?;
        match t.error_code {
            0 => Ok(true),
            TOPIC_ALREADY_EXISTS => Ok(false),
            code => Err(ClientError::Protocol {
                addr: conn.addr().into(),
                reason: format!(
                    "CreateTopics {name}: error {code}{}",
                    t.error_message.as_ref().map(|m| format!(": {m}")).unwrap_or_default()
                ),
            }),
        }
    }
}

/// Kafka's printed form of a topic id: URL-safe base64 without padding (`Uuid.toString()`).
pub fn base64_uuid(bytes: &[u8; 16]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn topic_id_prints_like_kafka() {
        // Uuid.fromString("AAAAAAAAAAAAAAAAAAAAAQ") is 0...01
        let mut b = [0u8; 16];
        b[15] = 1;
        assert_eq!(super::base64_uuid(&b), "AAAAAAAAAAAAAAAAAAAAAQ");
    }
}
