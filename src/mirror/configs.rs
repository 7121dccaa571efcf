//! Mirror configs (config resource type CLUSTER_MIRROR = 64): the known keys, their defaults
//! and validation, and secret masking. Keys and defaults follow the seed's "Mirror
//! Configuration" table and KIP-1279 §8.4; `topics.exclude` defaults to `__.*` and
//! `mirror.metadata.refresh.interval.ms` to the seed's 30000 ms.

use std::collections::BTreeMap;

/// Config resource type of a cluster mirror in DescribeConfigs / IncrementalAlterConfigs
/// (KIP-1279 `ConfigResource.Type.CLUSTER_MIRROR`).
pub const CLUSTER_MIRROR_RESOURCE_TYPE: i8 = 64;

/// What a value must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// Free text.
    String,
    /// Non-empty comma-separated `host:port` list.
    HostPortList,
    /// Integer (i64) within `[min, max]`.
    Long {
        /// Smallest accepted value.
        min: i64,
        /// Largest accepted value.
        max: i64,
    },
    /// Comma-separated list of regexes (each must compile).
    RegexList,
    /// Comma-separated list of names.
    List,
    /// One of a fixed set.
    Choice(&'static [&'static str]),
    /// `true` or `false`, case-insensitive, blanks around ignored (Kafka `ConfigDef.Type.BOOLEAN`).
    Boolean,
    /// ACL include rules `resourceType;resourceName;operation;permissionType;principal`,
    /// comma-separated, trailing fields optional.
    AclRules,
}

/// One known mirror config key.
#[derive(Debug, Clone, Copy)]
pub struct ConfigKey {
    /// Key name.
    pub name: &'static str,
    /// Default value (`None` = no default; `Some("")` = empty).
    pub default: Option<&'static str>,
    /// Value shape.
    pub kind: ConfigType,
    /// Never returned in clear, never logged.
    pub sensitive: bool,
    /// One-line meaning, with unit.
    pub doc: &'static str,
}

/// KIP-1279 names accepted as aliases of mirrorgate's keys: `(alias, key)`. The KIP names
/// the source-fetch settings after the broker's replica fetcher (`replica.fetch.*`,
/// `replica.socket.*`) and the client's socket buffers (`send.buffer.bytes`,
/// `receive.buffer.bytes`). An alias is validated as its key; when both are set, the key
/// (mirrorgate's name) wins.
pub const ALIASES: &[(&str, &str)] = &[
    ("replica.fetch.max.bytes", "fetch.max.bytes"),
    ("replica.fetch.min.bytes", "fetch.min.bytes"),
    ("replica.fetch.response.max.bytes", "fetch.response.max.bytes"),
    ("replica.fetch.wait.max.ms", "fetch.wait.max.ms"),
    ("replica.fetch.backoff.ms", "fetch.backoff.ms"),
    ("replica.socket.timeout.ms", "socket.timeout.ms"),
    ("replica.socket.receive.buffer.bytes", "socket.receive.buffer.bytes"),
    ("send.buffer.bytes", "socket.send.buffer.bytes"),
    ("receive.buffer.bytes", "socket.receive.buffer.bytes"),
];

/// The mirrorgate key `name` stands for: itself, or the key it is an alias of.
pub fn canonical(name: &str) -> &str {
    ALIASES.iter().find(|(a, _)| *a == name).map_or(name, |(_, k)| k)
}

/// The definition of `name` (a key or an alias of one, see [`ALIASES`]), if known.
pub fn key(name: &str) -> Option<&'static ConfigKey> {
    let name = canonical(name);
    KEYS.iter().find(|k| k.name == name)
}

/// The value set for key `name` in `configs`, under its own name or else under an alias
/// (first in [`ALIASES`] order); `None` when neither is set.
pub fn set_value<'a>(configs: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    configs
        .get(name)
        .map(String::as_str)
        .or_else(|| ALIASES.iter().filter(|(_, k)| *k == name).find_map(|(a, _)| configs.get(*a).map(String::as_str)))
}

/// Whether `name` holds a secret: a sensitive known key, or any key whose name says so
/// ([`crate::secret::is_secret_key`]: `password`, `jaas`, `secret`); never returned in clear,
/// never logged.
pub fn is_sensitive(name: &str) -> bool {
    key(name).is_some_and(|k| k.sensitive) || crate::secret::is_secret_key(name)
}

/// Why a mirror config is refused (reported as INVALID_CONFIG with this text).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigValueError {
    /// Not a mirror config key.
    #[error("unknown mirror config `{0}`")]
    Unknown(String),
    /// Bad value for a known key (the value itself is only echoed for non-secrets).
    #[error("invalid value for mirror config `{key}`: {reason}")]
    Invalid {
        /// Key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A required key is missing.
    #[error("mirror config `{0}` is required")]
    Missing(String),
}

/// Checks one key/value pair.
///
/// # Errors
/// [`ConfigValueError::Unknown`] or [`ConfigValueError::Invalid`].
pub fn validate(name: &str, value: &str) -> Result<(), ConfigValueError> {
    let k = key(name).ok_or_else(|| ConfigValueError::Unknown(name.to_string()))?;
    let shown = if k.sensitive { "[hidden]".to_string() } else { format!("`{value}`") };
    let bad = |reason: String| ConfigValueError::Invalid { key: name.to_string(), reason };
    match k.kind {
        ConfigType::String => Ok(()),
        ConfigType::HostPortList => crate::config::parse_bootstrap(value).map(|_| ()).map_err(bad),
        ConfigType::Long { min, max } => match value.trim().parse::<i64>() {
            Ok(v) if v >= min && v <= max => Ok(()),
            Ok(v) => Err(bad(format!("{v} is outside [{min}, {max}]"))),
            Err(_) => Err(bad(format!("{shown} is not an integer"))),
        },
        ConfigType::RegexList => {
            for p in split_list(value) {
                regex::Regex::new(&format!("^(?:{p})$")).map_err(|e| bad(format!("`{p}` is not a regex: {e}")))?;
            }
            Ok(())
        }
        ConfigType::List => Ok(()),
        ConfigType::Boolean => {
            let v = value.trim();
            if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") {
                Ok(())
            } else {
                Err(bad(format!("{shown} is not true or false")))
            }
        }
        ConfigType::Choice(options) => {
            if options.contains(&value) {
                Ok(())
            } else {
                Err(bad(format!("{shown} is not one of {}", options.join(", "))))
            }
        }
        ConfigType::AclRules => {
            for rule in split_list(value) {
                let fields = rule.split(';').count();
                if fields > 5 {
                    return Err(bad(format!(
                        "rule `{rule}` has {fields} fields; at most 5 (resourceType;resourceName;operation;permissionType;principal)"
                    )));
                }
            }
            Ok(())
        }
    }
}

/// Checks a whole mirror config map as given to CreateClusterMirror.
///
/// # Errors
/// The first invalid key, or [`ConfigValueError::Missing`] for `bootstrap.servers`.
pub fn validate_all(configs: &BTreeMap<String, String>) -> Result<(), ConfigValueError> {
    for (k, v) in configs {
        validate(k, v)?;
    }
    if !configs.contains_key("bootstrap.servers") {
        return Err(ConfigValueError::Missing("bootstrap.servers".into()));
    }
    // A socket read timeout shorter than the Fetch long poll would cut every idle Fetch
    // (Kafka checks replica.socket.timeout.ms >= replica.fetch.wait.max.ms the same way).
    let long = |k: &str| effective(configs, k).and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(0);
    if long("socket.timeout.ms") < long("fetch.wait.max.ms") {
        return Err(ConfigValueError::Invalid {
            key: "socket.timeout.ms".into(),
            reason: format!(
                "{} ms is below fetch.wait.max.ms ({} ms): every Fetch that waits would time out",
                long("socket.timeout.ms"),
                long("fetch.wait.max.ms")
            ),
        });
    }
    // TLS and SASL settings are checked by building them (stores read, JAAS parsed): a
    // mirror that cannot connect securely is refused at once, naming the key.
    source_security("", configs).map_err(|e| ConfigValueError::Invalid { key: e.key, reason: e.reason })?;
    Ok(())
}

/// The effective value of key `name`: the value set under its name, else under an alias
/// ([`set_value`]), else the default.
pub fn effective<'a>(configs: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    set_value(configs, name).or_else(|| key(name).and_then(|k| k.default))
}

/// Splits a comma-separated list, trimming blanks.
pub fn split_list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// A value fit for display: secrets become `None` (DescribeConfigs returns null for them,
/// as Kafka does for sensitive configs).
pub fn displayed(name: &str, value: &str) -> Option<String> {
    (!is_sensitive(name)).then(|| value.to_string())
}

mod keys;
mod source;

pub use keys::{DEFAULT_TOPIC_PROPERTIES_EXCLUDE, KEYS};
pub use source::{source_options, source_security};

#[cfg(test)]
mod tests;
