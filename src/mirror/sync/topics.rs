//! Topic-level sync: source cluster and topic identity (deleted or recreated topics fail their
//! partitions), auto-discovery by patterns, partition increases and topic configs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{
    CreatePartitionsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::cluster::{ClusterClient, ClusterError, ClusterMetadata};
use crate::mirror::configs;
use crate::mirror::control::{ControlPlane, ControlState};
use crate::mirror::model::{DesiredState, MirrorDefinition, MirrorTopic};
use crate::mirror::topic_configs::{config_decision, excluded, ConfigDecision};
use crate::mirror::topics::base64_uuid;
use crate::mirror::topics::{ClusterAccess, TopicConfigSupport};

use super::{report, send, Patterns, SyncKind, METRICS};

/// Config resource type TOPIC.
const RESOURCE_TOPIC: i8 = 2;
/// DescribeConfigs `config_source` DYNAMIC_TOPIC_CONFIG.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
/// IncrementalAlterConfigs operation SET.
const OP_SET: i8 = 0;
/// Kafka error INVALID_PARTITIONS (the topic already has that many partitions).
const INVALID_PARTITIONS: i16 = 37;

/// Topics of `mirror` in `desired`.
fn topics_of<'a>(
    state: &'a ControlState,
    mirror: &'a str,
    desired: DesiredState,
) -> impl Iterator<Item = &'a MirrorTopic> + 'a {
    state.topics.values().filter(move |t| t.mirror == mirror && t.desired == desired)
}

/// Fails the partitions of every mirroring topic whose source cluster id or topic id is not
/// the one the mirror started with (KIP-1279 §4.3, §6): nothing is silently skipped or
/// merged. Non-retryable; the reason names both ids.
///
/// # Errors
/// The first store failure, as text.
pub(super) async fn check_identity(
    control: &ControlPlane,
    def: &MirrorDefinition,
    state: &ControlState,
    md: &ClusterMetadata,
) -> Result<(), String> {
    let mut first_err = None;
    let cluster_changed = match (&def.source_cluster_id, &md.cluster_id) {
        (Some(expected), Some(actual)) if expected != actual => {
            Some(format!("source cluster id changed from {expected} to {actual}"))
        }
        _ => None,
    };
    for t in topics_of(state, &def.name, DesiredState::Mirroring) {
        let reason = if let Some(r) = &cluster_changed {
            r.clone()
        } else {
            let Some(expected) = &t.source_topic_id else { continue };
            match md.topics.get(&t.topic) {
                None => {
                    format!("source topic `{}` was deleted: topic id {expected} is no longer on the source", t.topic)
                }
                Some(now) if base64_uuid(&now.topic_id.0) != *expected => format!(
                    "source topic `{}` was recreated: topic id changed from {expected} to {}",
                    t.topic,
                    base64_uuid(&now.topic_id.0)
                ),
                Some(_) => continue,
            }
        };
        match control.fail_topic(&t.topic, &reason, false).await {
            Ok(p) if !p.is_empty() => {
                tracing::error!(mirror = %def.name, topic = %t.topic, partitions = ?p, %reason, "mirror partitions FAILED")
            }
            Ok(_) => {}
            Err(e) => first_err = first_err.or(Some(e.to_string())),
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// Include and exclude patterns of a mirror: its `topics.include` / `topics.exclude` configs
/// plus the patterns `--start` saved.
fn mirror_patterns(def: &MirrorDefinition) -> Result<(Patterns, Patterns), regex::Error> {
    let list = |k: &str| configs::split_list(configs::effective(&def.configs, k).unwrap_or("")).collect::<Vec<_>>();
    let include =
        Patterns::compile(list("topics.include").into_iter().chain(def.include_patterns.iter().map(String::as_str)))?;
    let exclude =
        Patterns::compile(list("topics.exclude").into_iter().chain(def.exclude_patterns.iter().map(String::as_str)))?;
    Ok((include, exclude))
}

/// Auto-discovery: starts source topics matching the mirror's include patterns and none of
/// its exclude patterns (internal topics never) that belong to no mirror yet; stops
/// mirroring topics that now match an exclude pattern, or no include pattern.
///
/// # Errors
/// A bad pattern, a failed start or stop, as text.
pub(super) async fn discover(
    control: &ControlPlane,
    def: &MirrorDefinition,
    state: &ControlState,
    md: &ClusterMetadata,
) -> Result<(), String> {
    let (include, exclude) = mirror_patterns(def).map_err(|e| format!("bad topic pattern: {e}"))?;
    let wanted = |name: &str| include.matches(name) && !exclude.matches(name);
    let new: Vec<String> = md
        .topics
        .values()
        .filter(|t| !t.is_internal && !state.topics.contains_key(&t.name) && wanted(&t.name))
        .map(|t| t.name.clone())
        .collect();
    let mut errors = Vec::new();
    if !new.is_empty() {
        match control.add_discovered_topics(&def.name, &new).await {
            Ok(started) => tracing::info!(mirror = %def.name, topics = ?started, "discovered source topics started"),
            Err(e) => errors.push(format!("cannot start discovered topics {new:?}: {e}")),
        }
    }
    let gone: Vec<String> = topics_of(state, &def.name, DesiredState::Mirroring)
        .filter(|t| exclude.matches(&t.topic) || (!include.is_empty() && !include.matches(&t.topic)))
        .map(|t| t.topic.clone())
        .collect();
    if !gone.is_empty() {
        tracing::info!(mirror = %def.name, topics = ?gone, "mirror topics no longer match the patterns; stopping them");
        match control.set_desired(&def.name, &gone, DesiredState::Stopped).await {
            Ok(results) => {
                for (t, r) in results {
                    if let Err(e) = r {
                        errors.push(format!("cannot stop `{t}`: {e}"));
                    }
                }
            }
            Err(e) => errors.push(format!("cannot stop {gone:?}: {e}")),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Partition increases: CreatePartitions on the destination, then LOG_ALIGNMENT records for
/// the new partitions. Each failing topic is counted and logged.
pub(super) async fn sync_partitions(
    control: &ControlPlane,
    dest: &ClusterClient,
    def: &MirrorDefinition,
    state: &ControlState,
    md: &ClusterMetadata,
) {
    for t in topics_of(state, &def.name, DesiredState::Mirroring) {
        let Some(src) = md.topics.get(&t.topic) else { continue };
        if t.source_topic_id.as_deref().is_some_and(|id| base64_uuid(&src.topic_id.0) != id) {
            continue; // recreated: failed by check_identity
        }
        let count = src.partitions.len() as i32;
        if count <= t.partitions.unwrap_or(0) {
            continue;
        }
        if let Err(e) = create_partitions(dest, &t.topic, count).await {
            report(SyncKind::Metadata, &def.name, &format!("partitions of `{}`", t.topic), &e);
            continue;
        }
        match control.add_partitions(&t.topic, count).await {
            Ok(added) => {
                tracing::info!(mirror = %def.name, topic = %t.topic, partitions = count, new = ?added, "source partition increase mirrored")
            }
            Err(e) => report(SyncKind::Metadata, &def.name, &format!("partitions of `{}`", t.topic), &e),
        }
    }
}

async fn create_partitions(dest: &ClusterClient, topic: &str, count: i32) -> Result<(), ClusterError> {
    let mut ct = CreatePartitionsTopic::default();
    ct.name = TopicName(StrBytes::from_string(topic.to_string()));
    ct.count = count;
    ct.assignments = None;
    let mut req = CreatePartitionsRequest::default();
    req.topics = vec![ct];
    req.timeout_ms = dest.options().request_timeout.as_millis().min(i32::MAX as u128) as i32;
    let resp = send(dest, None, &req, 3).await?;
    for r in &resp.results {
        if r.error_code != 0 && r.error_code != INVALID_PARTITIONS {
            return Err(kafka_err("CreatePartitions", topic, r.error_code, r.error_message.as_ref()));
        }
    }
    dest.refresh_metadata(Some(&[topic])).await?;
    Ok(())
}

fn kafka_err(api: &str, resource: &str, code: i16, message: Option<&StrBytes>) -> ClusterError {
    ClusterError::InvalidArgument(format!(
        "{api} {resource}: error {}{}",
        crate::client::cluster::KafkaErrorCode(code),
        message.map(|m| format!(": {m}")).unwrap_or_default()
    ))
}

/// Dynamic (topic-level) configs of `topics` (DescribeConfigs, `DYNAMIC_TOPIC_CONFIG` only),
/// per topic; a per-topic error comes back as text.
async fn dynamic_configs(
    c: &ClusterClient,
    topics: &[String],
) -> Result<HashMap<String, Result<BTreeMap<String, String>, String>>, ClusterError> {
    let mut req = DescribeConfigsRequest::default();
    req.resources = topics
        .iter()
        .map(|t| {
            let mut r = DescribeConfigsResource::default();
            r.resource_type = RESOURCE_TOPIC;
            r.resource_name = StrBytes::from_string(t.clone());
            r.configuration_keys = None;
            r
        })
        .collect();
    let resp = send(c, None, &req, 4).await?;
    Ok(resp
        .results
        .into_iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let v = if r.error_code != 0 {
                Err(format!(
                    "DescribeConfigs error {}{}",
                    crate::client::cluster::KafkaErrorCode(r.error_code),
                    r.error_message.map(|m| format!(": {m}")).unwrap_or_default()
                ))
            } else {
                Ok(r.configs
                    .into_iter()
                    .filter(|e| e.config_source == DYNAMIC_TOPIC_CONFIG && !e.is_sensitive)
                    .filter_map(|e| Some((e.name.to_string(), e.value?.to_string())))
                    .collect())
            };
            (name, v)
        })
        .collect())
}

/// What the destination's brokers accept in topic configs, read once per sync pass that has
/// a config to copy ([`ClusterAccess::topic_config_support`] over short-lived connections).
async fn destination_support(dest: &ClusterClient) -> Result<TopicConfigSupport, String> {
    let o = dest.options();
    let access = ClusterAccess {
        bootstrap: crate::mirror::topics::Bootstrap::secured(o.bootstrap.clone(), o.security.clone()),
        connect_timeout: o.connect_timeout,
        request_timeout: o.request_timeout,
    };
    access.topic_config_support().await.map_err(|e| e.to_string())
}

/// Topic configs: dynamic source configs copied to the destination mirror topics with
/// IncrementalAlterConfigs SET where they differ (never deletes a destination config),
/// except excluded and mirrorgate-owned keys; identity-breaking values are refused, and
/// configs the destination cannot take (tiered storage it does not have, names its version
/// does not know) left out, each reported once per value.
pub(super) async fn sync_configs(
    source: &ClusterClient,
    dest: &ClusterClient,
    def: &MirrorDefinition,
    state: &ControlState,
    refused: &mut BTreeSet<(String, String, String)>,
) {
    let topics: Vec<String> = topics_of(state, &def.name, DesiredState::Mirroring).map(|t| t.topic.clone()).collect();
    if topics.is_empty() {
        return;
    }
    let mirror = def.name.as_str();
    let exclude = excluded(def);
    let (src, dst) = match (dynamic_configs(source, &topics).await, dynamic_configs(dest, &topics).await) {
        (Ok(s), Ok(d)) => (s, d),
        (Err(e), _) => return report(SyncKind::TopicConfig, mirror, "source DescribeConfigs", &e),
        (_, Err(e)) => return report(SyncKind::TopicConfig, mirror, "destination DescribeConfigs", &e),
    };
    let mut support: Option<TopicConfigSupport> = None;
    for topic in &topics {
        let (Some(s), Some(d)) = (src.get(topic), dst.get(topic)) else { continue };
        let (s, d) = match (s, d) {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) | (_, Err(e)) => {
                report(SyncKind::TopicConfig, mirror, &format!("configs of `{topic}`"), e);
                continue;
            }
        };
        // Candidates first; what the destination accepts is only asked when one differs.
        let differs = s.iter().any(|(k, v)| {
            config_decision(k, v, &exclude, &TopicConfigSupport::default()) == ConfigDecision::Copy
                && d.get(k) != Some(v)
        });
        if !differs {
            continue;
        }
        if support.is_none() {
            match destination_support(dest).await {
                Ok(s) => support = Some(s),
                Err(e) => return report(SyncKind::TopicConfig, mirror, "destination topic config support", &e),
            }
        }
        let support = support.as_ref().expect("just set");
        let mut changes = Vec::new();
        for (k, v) in s {
            match config_decision(k, v, &exclude, support) {
                ConfigDecision::Copy if d.get(k) != Some(v) => changes.push((k.clone(), v.clone())),
                ConfigDecision::Unsupported if refused.insert((topic.clone(), k.clone(), v.clone())) => {
                    tracing::info!(
                        mirror,
                        topic = %topic,
                        key = %k,
                        value = %v,
                        tiered_storage = support.tiered_storage,
                        "source topic config not copied: the destination cannot take it"
                    );
                }
                ConfigDecision::Refused if refused.insert((topic.clone(), k.clone(), v.clone())) => {
                    let n = METRICS.topic_config_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    tracing::warn!(
                        mirror,
                        topic = %topic,
                        key = %k,
                        value = %v,
                        refused = n,
                        "source topic config refused: it would break offset identity on the mirror topic"
                    );
                }
                _ => {}
            }
        }
        if changes.is_empty() {
            continue;
        }
        match alter_configs(dest, topic, &changes).await {
            Ok(()) => {
                tracing::info!(mirror, topic = %topic, changes = ?changes, "topic configs synced from the source")
            }
            // The same refusal of the same changes is counted every round but logged once.
            Err(e) if !refused.insert((topic.clone(), format!("{changes:?}"), e.to_string())) => {
                SyncKind::TopicConfig.counter().fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => report(SyncKind::TopicConfig, mirror, &format!("configs of `{topic}`"), &e),
        }
    }
}

async fn alter_configs(dest: &ClusterClient, topic: &str, changes: &[(String, String)]) -> Result<(), ClusterError> {
    let mut res = AlterConfigsResource::default();
    res.resource_type = RESOURCE_TOPIC;
    res.resource_name = StrBytes::from_string(topic.to_string());
    res.configs = changes
        .iter()
        .map(|(k, v)| {
            let mut c = AlterableConfig::default();
            c.name = StrBytes::from_string(k.clone());
            c.config_operation = OP_SET;
            c.value = Some(StrBytes::from_string(v.clone()));
            c
        })
        .collect();
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![res];
    req.validate_only = false;
    let resp = send(dest, None, &req, 1).await?;
    for r in &resp.responses {
        if r.error_code != 0 {
            return Err(kafka_err("IncrementalAlterConfigs", topic, r.error_code, r.error_message.as_ref()));
        }
    }
    Ok(())
}
