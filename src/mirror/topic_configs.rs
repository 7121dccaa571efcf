//! Topic configs of destination mirror topics (DESIGN §4.9): which source topic configs are
//! copied at creation and by the config sync, which mirrorgate owns, and which the
//! destination cannot take (tiered storage it does not have, names its Kafka version does not
//! know). Pure functions over config maps; the callers read the configs and
//! [`TopicConfigSupport`] from the clusters.

use std::collections::BTreeMap;

use crate::mirror::configs;
use crate::mirror::model::MirrorDefinition;
use crate::mirror::topics::TopicConfigSupport;

/// Timestamp limit that accepts any record: Kafka's `Long.MAX_VALUE`, the default of
/// `message.timestamp.difference.max.ms` and `.before.max.ms` (ms).
const ACCEPT_ANY_MS: i64 = i64::MAX;

/// What the sync does with one dynamic source topic config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigDecision {
    /// Copied to the destination when it differs.
    Copy,
    /// In `topic.properties.exclude` (or `mirror.name`): never copied, not reported.
    Excluded,
    /// Owned by mirrorgate while mirroring (retention: the mirror follows the source's log
    /// start instead); not copied, not reported.
    Owned,
    /// Owned by mirrorgate for offset identity, and this value would break it (recompression,
    /// broker-assigned or bounded timestamps): refused and reported.
    Refused,
    /// The destination cannot take it: a tiered-storage config (KIP-405: `remote.*`,
    /// `local.retention.*`) on a destination without tiered storage, or a name the
    /// destination's Kafka version does not know. Not copied, reported once.
    Unsupported,
}

/// Whether `key` is a tiered-storage (KIP-405) topic config: `remote.storage.enable`,
/// `remote.log.*` (KIP-950), `local.retention.ms` / `local.retention.bytes`.
pub fn is_tiered_storage_config(key: &str) -> bool {
    key.starts_with("remote.") || key.starts_with("local.retention.")
}

/// The decision for source config `key` = `value` given the exclude list and what the
/// destination supports.
pub fn config_decision(key: &str, value: &str, exclude: &[&str], support: &TopicConfigSupport) -> ConfigDecision {
    if key == "mirror.name" || exclude.contains(&key) {
        return ConfigDecision::Excluded;
    }
    match key {
        "retention.ms" | "retention.bytes" => ConfigDecision::Owned,
        "compression.type" if value == "producer" => ConfigDecision::Owned,
        "message.timestamp.type" if value == "CreateTime" => ConfigDecision::Owned,
        "compression.type" | "message.timestamp.type" => ConfigDecision::Refused,
        k if k.starts_with("message.timestamp.") => ConfigDecision::Refused,
        k if is_tiered_storage_config(k) && !support.tiered_storage => ConfigDecision::Unsupported,
        k if !support.knows(k) => ConfigDecision::Unsupported,
        _ => ConfigDecision::Copy,
    }
}

/// The exclude list of `def`'s `topic.properties.exclude`.
pub fn excluded(def: &MirrorDefinition) -> Vec<&str> {
    configs::split_list(configs::effective(&def.configs, "topic.properties.exclude").unwrap_or("")).collect()
}

/// Configs of a new destination mirror topic: the source topic's own configs that
/// [`config_decision`] copies, then what offset identity needs — no recompression
/// (`compression.type=producer`), CreateTime timestamps accepted however old or new, and no
/// retention while mirroring (the mirror follows the source's log start instead).
///
/// Timestamps: on Kafka 3.6–3.9 `message.timestamp.before.max.ms` at its default
/// (`Long.MAX_VALUE`) falls back to `message.timestamp.difference.max.ms`, whose broker
/// default (`log.message.timestamp.difference.max.ms`) may be lower (Kafka 3.9
/// `LogConfig.getMessageTimestampBeforeMaxMs`); Kafka 4.0 removed the difference config and
/// defaults `after.max.ms` to one hour (KIP-937). So each of the three that the destination
/// knows is set to `Long.MAX_VALUE`, and the others are left out (an unknown name fails
/// CreateTopics with INVALID_CONFIG).
///
/// Returns the configs and the source configs left out because the destination cannot take
/// them ([`ConfigDecision::Unsupported`]).
pub fn destination_topic_configs(
    def: &MirrorDefinition,
    source: &BTreeMap<String, String>,
    support: &TopicConfigSupport,
) -> (BTreeMap<String, String>, Vec<String>) {
    let exclude = excluded(def);
    let mut out = BTreeMap::new();
    let mut unsupported = Vec::new();
    for (k, v) in source {
        match config_decision(k, v, &exclude, support) {
            ConfigDecision::Copy => {
                out.insert(k.clone(), v.clone());
            }
            ConfigDecision::Unsupported => unsupported.push(k.clone()),
            ConfigDecision::Excluded | ConfigDecision::Owned | ConfigDecision::Refused => {}
        }
    }
    out.insert("compression.type".into(), "producer".into());
    out.insert("message.timestamp.type".into(), "CreateTime".into());
    for key in
        ["message.timestamp.before.max.ms", "message.timestamp.after.max.ms", "message.timestamp.difference.max.ms"]
    {
        // Without a known name list, the Kafka 3.6+ names (what every tested version knows).
        let known = match &support.topic_configs {
            Some(names) => names.contains(key),
            None => key != "message.timestamp.difference.max.ms",
        };
        if known {
            out.insert(key.into(), ACCEPT_ANY_MS.to_string());
        }
    }
    out.insert("retention.ms".into(), "-1".into());
    out.insert("retention.bytes".into(), "-1".into());
    (out, unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> TopicConfigSupport {
        TopicConfigSupport { topic_configs: Some(list.iter().map(|s| s.to_string()).collect()), tiered_storage: false }
    }

    fn def() -> MirrorDefinition {
        MirrorDefinition {
            name: "m".into(),
            configs: BTreeMap::new(),
            created_ms: 0,
            source_cluster_id: None,
            include_patterns: vec![],
            exclude_patterns: vec![],
            start_position: Default::default(),
        }
    }

    const KAFKA_39: &[&str] = &[
        "cleanup.policy",
        "compression.type",
        "local.retention.ms",
        "local.retention.bytes",
        "remote.storage.enable",
        "max.message.bytes",
        "message.timestamp.type",
        "message.timestamp.difference.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "retention.ms",
        "retention.bytes",
    ];
    const KAFKA_41: &[&str] = &[
        "cleanup.policy",
        "compression.type",
        "local.retention.ms",
        "local.retention.bytes",
        "remote.storage.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "max.message.bytes",
        "message.timestamp.type",
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "retention.ms",
        "retention.bytes",
    ];

    #[test]
    fn owned_and_excluded_configs_are_not_copied() {
        let exclude = ["min.insync.replicas", "message.timestamp.type"];
        let any = TopicConfigSupport::default();
        assert_eq!(config_decision("cleanup.policy", "compact", &exclude, &any), ConfigDecision::Copy);
        assert_eq!(config_decision("max.message.bytes", "2000000", &exclude, &any), ConfigDecision::Copy);
        assert_eq!(config_decision("min.insync.replicas", "2", &exclude, &any), ConfigDecision::Excluded);
        assert_eq!(config_decision("mirror.name", "x", &[], &any), ConfigDecision::Excluded);
        assert_eq!(config_decision("retention.ms", "1000", &exclude, &any), ConfigDecision::Owned);
        assert_eq!(config_decision("compression.type", "producer", &exclude, &any), ConfigDecision::Owned);
        assert_eq!(config_decision("compression.type", "gzip", &exclude, &any), ConfigDecision::Refused);
        assert_eq!(
            config_decision("message.timestamp.type", "LogAppendTime", &exclude, &any),
            ConfigDecision::Excluded
        );
        assert_eq!(config_decision("message.timestamp.type", "LogAppendTime", &[], &any), ConfigDecision::Refused);
        assert_eq!(config_decision("message.timestamp.after.max.ms", "1000", &[], &any), ConfigDecision::Refused);
    }

    #[test]
    fn tiered_storage_configs_are_copied_only_to_a_tiered_destination() {
        let source: BTreeMap<String, String> = [
            ("remote.storage.enable", "true"),
            ("local.retention.ms", "1000"),
            ("local.retention.bytes", "1"),
            ("remote.log.copy.disable", "false"),
            ("cleanup.policy", "delete"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (plain, left_out) = destination_topic_configs(&def(), &source, &names(KAFKA_41));
        assert!(!plain.keys().any(|k| is_tiered_storage_config(k)), "{plain:?}");
        assert_eq!(plain.get("cleanup.policy").map(String::as_str), Some("delete"));
        assert_eq!(
            left_out,
            ["local.retention.bytes", "local.retention.ms", "remote.log.copy.disable", "remote.storage.enable"]
        );
        let tiered = TopicConfigSupport { tiered_storage: true, ..names(KAFKA_41) };
        let (kept, left_out) = destination_topic_configs(&def(), &source, &tiered);
        assert_eq!(kept.get("remote.storage.enable").map(String::as_str), Some("true"));
        assert_eq!(kept.get("local.retention.ms").map(String::as_str), Some("1000"));
        assert!(left_out.is_empty());
        // A 3.9 tiered destination does not know KIP-950's remote.log.copy.disable.
        let tiered39 = TopicConfigSupport { tiered_storage: true, ..names(KAFKA_39) };
        let (kept, left_out) = destination_topic_configs(&def(), &source, &tiered39);
        assert!(kept.contains_key("remote.storage.enable") && !kept.contains_key("remote.log.copy.disable"));
        assert_eq!(left_out, ["remote.log.copy.disable"]);
    }

    #[test]
    fn timestamp_limits_accept_everything_on_each_version() {
        let max = i64::MAX.to_string();
        let (c39, _) = destination_topic_configs(&def(), &BTreeMap::new(), &names(KAFKA_39));
        for k in
            ["message.timestamp.difference.max.ms", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms"]
        {
            assert_eq!(c39.get(k), Some(&max), "3.9: {k}");
        }
        let (c41, _) = destination_topic_configs(&def(), &BTreeMap::new(), &names(KAFKA_41));
        assert!(!c41.contains_key("message.timestamp.difference.max.ms"), "4.x does not know it");
        assert_eq!(c41.get("message.timestamp.before.max.ms"), Some(&max));
        assert_eq!(c41.get("message.timestamp.after.max.ms"), Some(&max));
        assert_eq!(c41.get("message.timestamp.type").map(String::as_str), Some("CreateTime"));
        assert_eq!(c41.get("retention.ms").map(String::as_str), Some("-1"));
        // A source-set limit never reaches the destination.
        let src: BTreeMap<String, String> =
            [("message.timestamp.difference.max.ms".to_string(), "1000".to_string())].into_iter().collect();
        let (c, left_out) = destination_topic_configs(&def(), &src, &names(KAFKA_41));
        assert!(!c.contains_key("message.timestamp.difference.max.ms") && left_out.is_empty());
    }

    #[test]
    fn names_the_destination_does_not_know_are_left_out() {
        let src: BTreeMap<String, String> = [
            ("remote.log.delete.on.disable".to_string(), "true".to_string()),
            ("segment.ms".to_string(), "1000".to_string()),
        ]
        .into_iter()
        .collect();
        let tiered39 = TopicConfigSupport { tiered_storage: true, ..names(&[KAFKA_39, &["segment.ms"]].concat()) };
        let (c, left_out) = destination_topic_configs(&def(), &src, &tiered39);
        assert_eq!(c.get("segment.ms").map(String::as_str), Some("1000"));
        assert_eq!(left_out, ["remote.log.delete.on.disable"]);
    }
}
