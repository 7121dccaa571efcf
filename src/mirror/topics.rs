//! Topic lookups the control plane needs on either cluster, over short-lived connections:
//! list the source's topics (to resolve `--start` patterns), and create or look up mirror
//! topics on the destination.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::client::{BrokerConnection, ClientError, ClusterOptions};

/// Options of mirrorgate's own clients towards the destination cluster, from the validated
/// proxy settings (bootstrap list, timeouts, frame cap, TLS and SASL).
pub fn destination_options(settings: &crate::config::Settings) -> ClusterOptions {
    ClusterOptions {
        connect_timeout: settings.connect_timeout,
        connect_timeout_max: settings.connect_timeout,
        request_timeout: settings.request_timeout,
        max_frame_bytes: settings.max_frame_bytes,
        security: settings.destination_security.clone(),
        ..ClusterOptions::new(settings.destination_bootstrap.clone())
    }
}

/// How to reach a cluster for admin lookups.
#[derive(Debug, Clone)]
pub struct ClusterAccess {
    /// `host:port` bootstrap list, with the TLS and SASL settings of its connections.
    pub bootstrap: Bootstrap,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Request timeout.
    pub request_timeout: Duration,
}

/// A bootstrap list and the security of the cluster it leads to. Built with
/// [`Bootstrap::secured`]; collected from `host:port` strings it is PLAINTEXT: security is
/// never looked up by address, so no mirror's credentials reach another mirror's connections
/// (issue 32 review finding R6).
#[derive(Debug, Clone, Default)]
pub struct Bootstrap {
    addrs: Vec<String>,
    security: Option<crate::client::ClientSecurity>,
}

impl Bootstrap {
    /// `addrs` reached with `security`.
    pub fn secured(addrs: Vec<String>, security: crate::client::ClientSecurity) -> Self {
        Self { addrs, security: Some(security) }
    }

    /// The security of its connections.
    pub fn security(&self) -> crate::client::ClientSecurity {
        match &self.security {
            Some(s) => s.clone(),
            None => crate::client::ClientSecurity::default(),
        }
    }
}

impl std::ops::Deref for Bootstrap {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.addrs
    }
}

impl From<Vec<String>> for Bootstrap {
    fn from(addrs: Vec<String>) -> Self {
        Self { addrs, security: None }
    }
}

impl FromIterator<String> for Bootstrap {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Self {
        Self { addrs: iter.into_iter().collect(), security: None }
    }
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

/// What a destination cluster's brokers accept in topic configs, from
/// [`ClusterAccess::topic_config_support`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicConfigSupport {
    /// Every topic config name the brokers know; `None` when the cluster has no topic to
    /// describe (then nothing is filtered by name).
    pub topic_configs: Option<std::collections::BTreeSet<String>>,
    /// Whether tiered storage (KIP-405) is on: `remote.log.storage.system.enable=true`.
    pub tiered_storage: bool,
}

impl TopicConfigSupport {
    /// Whether the brokers know topic config `name` (`true` when unknown which they know).
    pub fn knows(&self, name: &str) -> bool {
        self.topic_configs.as_ref().is_none_or(|k| k.contains(name))
    }
}

/// Error code of a topic that already exists (Kafka `TOPIC_ALREADY_EXISTS`).
const TOPIC_ALREADY_EXISTS: i16 = 36;

impl ClusterAccess {
    /// The TLS and SASL settings of this cluster's connections ([`Bootstrap::security`]).
    fn security(&self) -> crate::client::ClientSecurity {
        self.bootstrap.security()
    }

    async fn connect(&self) -> Result<BrokerConnection, ClientError> {
        let mut last = None;
        let security = self.security();
        for addr in self.bootstrap.iter() {
            match BrokerConnection::connect_with(
                addr,
                self.connect_timeout,
                self.request_timeout,
                100 << 20,
                &crate::client::SocketOptions::default(),
                &security,
            )
            .await
            {
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

    /// What the cluster's brokers accept in topic configs (DESIGN §4.9): the topic config
    /// names its brokers know — read with DescribeConfigs (all keys) of an existing topic,
    /// which lists every topic config with its default (Kafka `ConfigHelper`) — and whether
    /// tiered storage (KIP-405) is on: broker config `remote.log.storage.system.enable`,
    /// described on a broker reached at its advertised address (a BROKER resource must be
    /// described on that broker).
    ///
    /// # Errors
    /// [`ClientError`] when no bootstrap server answers or a DescribeConfigs is refused.
    pub async fn topic_config_support(&self) -> Result<TopicConfigSupport, ClientError> {
        use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
        use kafka_protocol::messages::DescribeConfigsRequest;
        const RESOURCE_TOPIC: i8 = 2;
        const RESOURCE_BROKER: i8 = 4;
        let mut conn = self.connect().await?;
        let md = conn.send(&MetadataRequest::default().with_topics(None), 12).await?;
        let refused = |addr: &str, what: &str, code: i16| ClientError::Protocol {
            addr: addr.into(),
            reason: format!("DescribeConfigs {what}: error {code}"),
        };
        let mut topic_configs = None;
        if let Some(topic) = md.topics.iter().filter(|t| t.error_code == 0).find_map(|t| t.name.as_ref()) {
            let req = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(topic.0.clone())
                .with_configuration_keys(None)]);
            let resp = conn.send(&req, 4).await?;
            let r = resp.results.first().ok_or_else(|| refused(conn.addr(), "topic", -1))?;
            if r.error_code != 0 {
                return Err(refused(conn.addr(), &format!("topic {}", topic.0), r.error_code));
            }
            topic_configs = Some(r.configs.iter().map(|c| c.name.to_string()).collect());
        }
        // The first broker that answers (a BROKER resource is described on that broker).
        let mut reached = None;
        let mut last = None;
        for broker in &md.brokers {
            let addr = format!("{}:{}", broker.host, broker.port);
            match BrokerConnection::connect_with(
                &addr,
                self.connect_timeout,
                self.request_timeout,
                100 << 20,
                &crate::client::SocketOptions::default(),
                &self.security(),
            )
            .await
            {
                Ok(c) => {
                    reached = Some((broker, addr, c));
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let Some((broker, addr, mut bconn)) = reached else {
            return Err(last.unwrap_or_else(|| refused(conn.addr(), "broker (Metadata lists none)", -1)));
        };
        let key = "remote.log.storage.system.enable";
        let req = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_BROKER)
            .with_resource_name(StrBytes::from_string(broker.node_id.0.to_string()))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str(key)]))]);
        let resp = bconn.send(&req, 4).await?;
        let r = resp.results.first().ok_or_else(|| refused(&addr, "broker", -1))?;
        if r.error_code != 0 {
            return Err(refused(&addr, &format!("broker {}", broker.node_id.0), r.error_code));
        }
        let tiered_storage =
            r.configs.iter().any(|c| c.name.as_str() == key && c.value.as_ref().is_some_and(|v| v.as_str() == "true"));
        Ok(TopicConfigSupport { topic_configs, tiered_storage })
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

/// The 16 bytes of a topic id printed in Kafka's base64 ([`base64_uuid`]); `None` for a
/// string that is not one.
pub fn uuid_from_base64(s: &str) -> Option<[u8; 16]> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).ok()?.try_into().ok()
}

#[cfg(test)]
mod tests {
    /// Issue 32 review finding R6: security is never looked up by address. A mirror's source
    /// settings (here a PLAIN password) once registered per bootstrap list were handed to any
    /// address-only `Bootstrap` of the same list.
    #[test]
    fn an_address_only_bootstrap_never_gets_a_mirrors_credentials() {
        let configs: std::collections::BTreeMap<String, String> = [
            ("bootstrap.servers", "r6-source:9092"),
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="r6-pw";"#,
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let options = crate::mirror::configs::source_options("r6", &configs).expect("bootstrap.servers is set");
        assert!(options.security.sasl.is_some(), "the mirror's own client has its credentials");
        let by_address = super::Bootstrap::from(vec!["r6-source:9092".to_string()]).security();
        assert!(by_address.sasl.is_none() && by_address.unusable().is_none(), "{by_address:?}");
    }

    #[test]
    fn topic_id_prints_like_kafka() {
        // Uuid.fromString("AAAAAAAAAAAAAAAAAAAAAQ") is 0...01
        let mut b = [0u8; 16];
        b[15] = 1;
        assert_eq!(super::base64_uuid(&b), "AAAAAAAAAAAAAAAAAAAAAQ");
    }
}
