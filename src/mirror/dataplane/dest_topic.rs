//! The destination topic a mirror partition copies into: is it still the same topic, and the
//! topic configs the mirror keeps on it (DESIGN §4.9): retention off while mirroring (the
//! mirror follows the source's log start with DeleteRecords) and CreateTime timestamps
//! accepted however old or new. Used at a failback and when the destination topic was
//! deleted and re-created behind the mirror (issue 9, items 5 and 12).

use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::IncrementalAlterConfigsRequest;
use kafka_protocol::protocol::StrBytes;

use crate::client::cluster::ClusterClient;
use crate::wire::mirror::KafkaUuid;

/// The topic id of `topic` on the destination (base64, as Kafka prints it) from a fresh
/// Metadata read; `None` when the destination has no such topic.
///
/// # Errors
/// Transport or Kafka errors of the Metadata request, as text.
pub async fn topic_id(dest: &ClusterClient, topic: &str) -> Result<Option<String>, String> {
    dest.refresh_metadata(Some(&[topic])).await.map_err(|e| e.to_string())?;
    if !dest.metadata().topics.contains_key(topic) {
        return Ok(None);
    }
    let id = dest.cached_topic_id(topic);
    Ok((id != KafkaUuid::ZERO).then(|| crate::mirror::topics::base64_uuid(&id.0)))
}

/// Sets the configs the mirror keeps on a destination topic while mirroring:
/// `retention.ms`/`retention.bytes` -1, `message.timestamp.before.max.ms`/`after.max.ms` at
/// Long.MAX, `compression.type=producer` (a broker that recompresses would rewrite batches,
/// LogValidator) and `message.timestamp.type=CreateTime` (IncrementalAlterConfigs v1, SET);
/// then, best effort, `message.timestamp.difference.max.ms` at Long.MAX for Kafka 3.6-3.9.
///
/// # Errors
/// Transport errors, or the broker's error code and message, as text.
pub async fn set_mirroring_configs(dest: &ClusterClient, topic: &str) -> Result<(), String> {
    let max = i64::MAX.to_string();
    // As on a topic mirrorgate creates (topic_configs::destination_topic_configs): batches
    // kept as sent (no recompression, which would hide placeholders), source timestamps kept.
    let ops = [
        ("retention.ms", "-1".to_string()),
        ("retention.bytes", "-1".to_string()),
        ("message.timestamp.before.max.ms", max.clone()),
        ("message.timestamp.after.max.ms", max),
        ("compression.type", "producer".to_string()),
        ("message.timestamp.type", "CreateTime".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| {
        AlterableConfig::default()
            .with_name(StrBytes::from_static_str(k))
            .with_config_operation(0)
            .with_value(Some(StrBytes::from_string(v)))
    })
    .collect();
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.to_string()))
        .with_configs(ops)]);
    let r = dest.send_any(&req, 1).await.map_err(|e| e.to_string())?;
    match r.responses.iter().find(|x| x.error_code != 0) {
        None => {
            // Kafka 3.6-3.9 fall back to message.timestamp.difference.max.ms; 4.x removed it
            // (then this SET fails, harmlessly).
            let legacy =
                IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_string(topic.to_string()))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("message.timestamp.difference.max.ms"))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_string(i64::MAX.to_string())))])]);
            let _ = dest.send_any(&legacy, 1).await;
            Ok(())
        }
        Some(x) => Err(format!(
            "{}{}",
            crate::client::cluster::KafkaErrorCode(x.error_code),
            x.error_message.as_ref().map(|m| format!(": {m}")).unwrap_or_default()
        )),
    }
}
