//! The safety checks a cutover runs against the source before it holds anything (issue 36
//! item 3, `docs/migration.md` "Safety checks"): producers that write to a migrating topic's
//! source partitions without going through mirrorgate, and consumer groups of the topics that
//! are active on the source outside mirrorgate. A cutover refuses (unless forced) while either
//! list is not empty, and names what it found.
//!
//! Read-only towards the source: DescribeProducers (KIP-664), ListGroups, DescribeGroups and
//! OffsetFetch, with mirrorgate's source credentials. It never fences, aborts or changes
//! anything there.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use kafka_protocol::messages::{
    ConsumerProtocolAssignment, DescribeGroupsRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest,
    OffsetFetchRequest,
};
use kafka_protocol::protocol::{Decodable, Request, StrBytes};

use crate::client::cluster::{ClusterClient, ClusterError, KafkaErrorCode};

/// A producer the source partition leader holds state for (DescribeProducers) that
/// mirrorgate did not forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceProducer {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The source producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// Max timestamp of its last batch on the partition, ms since the epoch (CreateTime: the
    /// producer's clock), -1 when unknown.
    pub last_timestamp_ms: i64,
    /// First offset of its open transaction on the partition, when one is open.
    pub open_transaction_from: Option<i64>,
}

impl std::fmt::Display for SourceProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "producer id {} (epoch {}) wrote to {}-{} directly on the source (last batch timestamp {} ms)",
            self.producer_id, self.producer_epoch, self.topic, self.partition, self.last_timestamp_ms
        )?;
        if let Some(o) = self.open_transaction_from {
            write!(f, ", transaction open since offset {o}")?;
        }
        Ok(())
    }
}

/// The producers of the source `partitions` (topic, partition) that mirrorgate did not
/// forward (`forwarded`: the source producer ids mirrorgate handed out or mapped), and that
/// wrote at or after `since_ms` (their last batch's max timestamp) or have a transaction
/// open. In partition order, then the broker's order.
///
/// Producers that are neither idempotent nor transactional (`enable.idempotence=false`, the
/// default of librdkafka before 2.x) have no producer state and are never listed: the
/// cutover's log-end check (`docs/migration.md`) finds them.
///
/// # Errors
/// The first DescribeProducers that fails (after the client's retries), naming the partition.
pub async fn foreign_producers(
    source: &ClusterClient,
    partitions: &[(String, i32)],
    forwarded: &HashSet<i64>,
    since_ms: i64,
) -> Result<Vec<SourceProducer>, ClusterError> {
    let mut out = Vec::new();
    for (topic, partition) in partitions {
        for p in source.describe_producers(topic, *partition).await? {
            let open = (p.current_txn_start_offset >= 0).then_some(p.current_txn_start_offset);
            if forwarded.contains(&p.producer_id) || (p.last_timestamp < since_ms && open.is_none()) {
                continue;
            }
            out.push(SourceProducer {
                topic: topic.clone(),
                partition: *partition,
                producer_id: p.producer_id,
                producer_epoch: p.producer_epoch,
                last_timestamp_ms: p.last_timestamp,
                open_transaction_from: open,
            });
        }
    }
    Ok(out)
}

/// A member of a source consumer group, as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceGroupMember {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its `group.instance.id` (static membership, KIP-345), if any.
    pub group_instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// The address the coordinator saw it connect from (`/10.0.0.7`).
    pub client_host: String,
}

/// A consumer group active on the source for some of the checked topics, with the members
/// that did not join through mirrorgate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveSourceGroup {
    /// Group id.
    pub group: String,
    /// The coordinator's group state (`Stable`, `PreparingRebalance`, ...).
    pub state: String,
    /// The checked topics the group is assigned or has committed offsets for.
    pub topics: BTreeSet<String>,
    /// Members not joined through mirrorgate (never empty).
    pub members: Vec<SourceGroupMember>,
    /// Why the group's members could not be described, when they could not (a KIP-848
    /// group, which DescribeGroups does not describe): then `members` is empty and the group
    /// counts as active, since its activity is unknown.
    pub undescribed: Option<String>,
}

impl std::fmt::Display for ActiveSourceGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
        write!(
            f,
            "consumer group {} ({}) on topics {} is active on the source",
            self.group,
            self.state,
            topics.join(",")
        )?;
        if let Some(why) = &self.undescribed {
            return write!(f, " and its members could not be described: {why}");
        }
        let members: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{} (client id {}, from {})", m.member_id, m.client_id, m.client_host))
            .collect();
        write!(f, " outside mirrorgate: {}", members.join(", "))
    }
}

/// Why a group check could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum SafetyError {
    /// The source cluster refused or could not be reached.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A Kafka error in an answer that has no retry left.
    #[error("{api} {resource}: {error}")]
    Kafka {
        /// The API.
        api: &'static str,
        /// What it was about (group id, broker).
        resource: String,
        /// The error.
        error: KafkaErrorCode,
    },
}

/// The consumer groups of the source that have members outside mirrorgate and are assigned
/// or have committed offsets for one of `topics`. `forwarded_member` says whether a member id
/// belongs to a member that joined through mirrorgate (the proxy learns them from the
/// JoinGroup answers it forwards). Share groups are left out; KIP-848 consumer groups, which
/// DescribeGroups does not describe, are listed with `undescribed` when they have committed
/// offsets for the topics.
///
/// # Errors
/// ListGroups, FindCoordinator, DescribeGroups or OffsetFetch failing on the source.
pub async fn active_groups(
    source: &ClusterClient,
    topics: &BTreeSet<String>,
    forwarded_member: &(dyn Fn(&str) -> bool + Sync),
) -> Result<Vec<ActiveSourceGroup>, SafetyError> {
    let mut out = Vec::new();
    for (group, kind) in list_groups(source).await? {
        let node = coordinator(source, &group).await?;
        let committed = committed_topics(source, node, &group, topics).await?;
        let mut req = DescribeGroupsRequest::default();
        req.groups = vec![GroupId(StrBytes::from_string(group.clone()))];
        let resp = send(source, node, &req, 5).await?;
        let Some(g) = resp.groups.into_iter().find(|g| g.group_id.0.as_str() == group) else { continue };
        if g.error_code != 0 {
            // A KIP-848 group: DescribeGroups answers it with an error (Kafka 4.x).
            if !committed.is_empty() {
                out.push(ActiveSourceGroup {
                    group,
                    state: kind,
                    topics: committed,
                    members: Vec::new(),
                    undescribed: Some(format!("DescribeGroups: {}", KafkaErrorCode(g.error_code))),
                });
            }
            continue;
        }
        let mut assigned = BTreeSet::new();
        let mut outside = Vec::new();
        for m in &g.members {
            if g.protocol_type.as_str() == "consumer" {
                assigned.extend(assigned_topics(&m.member_assignment).into_iter().filter(|t| topics.contains(t)));
            }
            if !forwarded_member(m.member_id.as_str()) {
                outside.push(SourceGroupMember {
                    member_id: m.member_id.to_string(),
                    group_instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                });
            }
        }
        assigned.extend(committed);
        if !outside.is_empty() && !assigned.is_empty() {
            out.push(ActiveSourceGroup {
                group,
                state: g.group_state.to_string(),
                topics: assigned,
                members: outside,
                undescribed: None,
            });
        }
    }
    Ok(out)
}

/// The topics a consumer-protocol member assignment names (`ConsumerProtocolAssignment`,
/// versions 0–3, prefixed by its version); empty when the bytes are not one.
fn assigned_topics(assignment: &bytes::Bytes) -> Vec<String> {
    let mut buf = assignment.clone();
    if buf.len() < 2 {
        return Vec::new();
    }
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    if !(0..=3).contains(&version) {
        return Vec::new();
    }
    bytes::Buf::advance(&mut buf, 2);
    ConsumerProtocolAssignment::decode(&mut buf, version)
        .map(|a| a.assigned_partitions.iter().map(|tp| tp.topic.0.to_string()).collect())
        .unwrap_or_default()
}

/// Consumer groups of the source (ListGroups on every broker) with the state or type
/// ListGroups reports; share groups and other protocol types left out.
async fn list_groups(c: &ClusterClient) -> Result<BTreeMap<String, String>, SafetyError> {
    c.refresh_metadata(Some(&[])).await?;
    let mut out = BTreeMap::new();
    for node in c.metadata().brokers.keys() {
        let resp = send(c, *node, &ListGroupsRequest::default(), 5).await?;
        if resp.error_code != 0 {
            return Err(SafetyError::Kafka {
                api: "ListGroups",
                resource: format!("broker {node}"),
                error: KafkaErrorCode(resp.error_code),
            });
        }
        for g in resp.groups {
            if matches!(g.protocol_type.as_str(), "consumer" | "") && g.group_type.as_str() != "share" {
                let kind = if g.group_state.is_empty() { g.group_type.to_string() } else { g.group_state.to_string() };
                out.insert(g.group_id.0.to_string(), kind);
            }
        }
    }
    Ok(out)
}

/// The group coordinator of `group` (FindCoordinator, key type GROUP).
async fn coordinator(c: &ClusterClient, group: &str) -> Result<i32, SafetyError> {
    let mut req = FindCoordinatorRequest::default();
    req.key = StrBytes::from_string(group.to_string());
    req.key_type = 0;
    let node = c.metadata().brokers.keys().next().copied().ok_or(ClusterError::UnknownBroker { node_id: -1 })?;
    let resp = send(c, node, &req, 3).await?;
    if resp.error_code != 0 {
        return Err(SafetyError::Kafka {
            api: "FindCoordinator",
            resource: group.to_string(),
            error: KafkaErrorCode(resp.error_code),
        });
    }
    if !c.metadata().brokers.contains_key(&resp.node_id.0) {
        c.refresh_metadata(Some(&[])).await?;
    }
    Ok(resp.node_id.0)
}

/// The checked `topics` for which `group` has committed offsets.
async fn committed_topics(
    c: &ClusterClient,
    node: i32,
    group: &str,
    topics: &BTreeSet<String>,
) -> Result<BTreeSet<String>, SafetyError> {
    let mut req = OffsetFetchRequest::default();
    req.group_id = GroupId(StrBytes::from_string(group.to_string()));
    req.topics = None;
    let resp = send(c, node, &req, 7).await?;
    if resp.error_code != 0 {
        return Err(SafetyError::Kafka {
            api: "OffsetFetch",
            resource: group.to_string(),
            error: KafkaErrorCode(resp.error_code),
        });
    }
    Ok(resp
        .topics
        .iter()
        .filter(|t| topics.contains(t.name.0.as_str()))
        .filter(|t| t.partitions.iter().any(|p| p.error_code == 0 && p.committed_offset >= 0))
        .map(|t| t.name.0.to_string())
        .collect())
}

async fn send<R: Request + Clone>(
    c: &ClusterClient,
    node: i32,
    req: &R,
    max: i16,
) -> Result<R::Response, ClusterError> {
    let v = c.version_for::<R>(node, max).await?;
    c.send_to_node(node, req, v).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::Encodable;

    fn assignment(version: i16, topics: &[&str]) -> bytes::Bytes {
        let a = ConsumerProtocolAssignment::default().with_assigned_partitions(
            topics
                .iter()
                .map(|t| {
                    TopicPartition::default()
                        .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partitions(vec![0, 1])
                })
                .collect(),
        );
        let mut buf = bytes::BytesMut::new();
        buf.extend_from_slice(&version.to_be_bytes());
        a.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    #[test]
    fn member_assignments_name_their_topics() {
        for v in 0..=3 {
            assert_eq!(assigned_topics(&assignment(v, &["orders", "payments"])), ["orders", "payments"], "version {v}");
        }
        assert!(assigned_topics(&bytes::Bytes::new()).is_empty());
        assert!(assigned_topics(&bytes::Bytes::from_static(&[0, 9, 0, 0])).is_empty(), "unknown version");
        let mut cut = assignment(1, &["orders"]).to_vec();
        cut.truncate(cut.len() - 6);
        assert!(assigned_topics(&bytes::Bytes::from(cut)).is_empty(), "truncated: nothing, no panic");
    }

    #[test]
    fn findings_read_as_sentences() {
        let p = SourceProducer {
            topic: "orders".into(),
            partition: 3,
            producer_id: 4003,
            producer_epoch: 1,
            last_timestamp_ms: 1_700_000_000_000,
            open_transaction_from: Some(17),
        };
        assert_eq!(
            p.to_string(),
            "producer id 4003 (epoch 1) wrote to orders-3 directly on the source (last batch timestamp 1700000000000 ms), transaction open since offset 17"
        );
        let g = ActiveSourceGroup {
            group: "billing".into(),
            state: "Stable".into(),
            topics: BTreeSet::from(["orders".to_string()]),
            members: vec![SourceGroupMember {
                member_id: "c-1".into(),
                group_instance_id: None,
                client_id: "billing-1".into(),
                client_host: "/10.0.0.7".into(),
            }],
            undescribed: None,
        };
        assert_eq!(
            g.to_string(),
            "consumer group billing (Stable) on topics orders is active on the source outside mirrorgate: c-1 (client id billing-1, from /10.0.0.7)"
        );
    }
}
