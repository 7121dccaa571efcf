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

const I32: i64 = i32::MAX as i64;

/// The default of `topic.properties.exclude` (seed: configs that belong to the destination or
/// to mirrorgate's offset identity; `mirror.name` is always excluded).
pub const DEFAULT_TOPIC_PROPERTIES_EXCLUDE: &str = "follower.replication.throttled.replicas,leader.replication.throttled.replicas,message.timestamp.difference.max.ms,message.timestamp.before.max.ms,message.timestamp.after.max.ms,message.timestamp.type,unclean.leader.election.enable,min.insync.replicas,mirror.name";

/// Every mirror config key mirrorgate accepts.
pub const KEYS: &[ConfigKey] = &[
    ConfigKey {
        name: "bootstrap.servers",
        default: None,
        kind: ConfigType::HostPortList,
        sensitive: false,
        doc: "Source cluster bootstrap servers (required).",
    },
    ConfigKey {
        name: "source.cluster.id",
        default: None,
        kind: ConfigType::String,
        sensitive: false,
        doc: "Expected source cluster id; a different id fails the mirror.",
    },
    ConfigKey {
        name: "client.id",
        default: Some("mirrorgate"),
        kind: ConfigType::String,
        sensitive: false,
        doc: "Client id mirrorgate uses towards the source.",
    },
    ConfigKey {
        name: "request.timeout.ms",
        default: Some("30000"),
        kind: ConfigType::Long { min: 1, max: I32 },
        sensitive: false,
        doc: "Timeout of one request to the source, ms.",
    },
    ConfigKey {
        name: "socket.connection.setup.timeout.ms",
        default: Some("10000"),
        kind: ConfigType::Long { min: 1, max: I32 },
        sensitive: false,
        doc: "TCP connect timeout to a source broker, ms.",
    },
    ConfigKey {
        name: "socket.connection.setup.timeout.max.ms",
        default: Some("30000"),
        kind: ConfigType::Long { min: 1, max: I32 },
        sensitive: false,
        doc: "Largest TCP connect timeout: the connect timeout doubles per consecutive failed connect to a source broker up to this, ms.",
    },
    ConfigKey {
        name: "connections.max.idle.ms",
        default: Some("600000"),
        kind: ConfigType::Long { min: -1, max: i64::MAX },
        sensitive: false,
        doc: "A source connection unused this long is closed and reopened on its next use, ms (-1 = never).",
    },
    ConfigKey {
        name: "reconnect.backoff.ms",
        default: Some("50"),
        kind: ConfigType::Long { min: 0, max: I32 },
        sensitive: false,
        doc: "Pause before reconnecting to a source broker whose last connect failed, ms.",
    },
    ConfigKey {
        name: "fetch.wait.max.ms",
        default: Some("1000"),
        kind: ConfigType::Long { min: 0, max: I32 },
        sensitive: false,
        doc: "Longest a source Fetch waits for fetch.min.bytes, ms.",
    },
    ConfigKey {
        name: "fetch.backoff.ms",
        default: Some("1000"),
        kind: ConfigType::Long { min: 0, max: I32 },
        sensitive: false,
        doc: "Wait before a copy loop re-aligns after an error (failed Fetch, leader move, failed append), ms.",
    },
    ConfigKey {
        name: "fetch.min.bytes",
        default: Some("1"),
        kind: ConfigType::Long { min: 0, max: I32 },
        sensitive: false,
        doc: "Bytes a source Fetch waits for, bytes.",
    },
    ConfigKey {
        name: "fetch.response.max.bytes",
        default: Some("10485760"),
        kind: ConfigType::Long { min: 1, max: I32 },
        sensitive: false,
        doc: "Largest source Fetch response, bytes.",
    },
    ConfigKey {
        name: "fetch.max.bytes",
        default: Some("1048576"),
        kind: ConfigType::Long { min: 1, max: I32 },
        sensitive: false,
        doc: "Largest data per partition in a source Fetch, bytes.",
    },
    ConfigKey {
        name: "socket.timeout.ms",
        default: Some("30000"),
        kind: ConfigType::Long { min: 1, max: I32 },
        sensitive: false,
        doc: "Longest wait for more bytes of a source response once a request is sent, ms; at least fetch.wait.max.ms.",
    },
    ConfigKey {
        name: "socket.receive.buffer.bytes",
        default: Some("-1"),
        kind: ConfigType::Long { min: -1, max: I32 },
        sensitive: false,
        doc: "TCP receive buffer (SO_RCVBUF) of source connections, bytes (-1 = OS default, with autotuning).",
    },
    ConfigKey {
        name: "socket.send.buffer.bytes",
        default: Some("-1"),
        kind: ConfigType::Long { min: -1, max: I32 },
        sensitive: false,
        doc: "TCP send buffer (SO_SNDBUF) of source connections, bytes (-1 = OS default, with autotuning).",
    },
    ConfigKey {
        name: "mirror.metadata.refresh.interval.ms",
        default: Some("30000"),
        kind: ConfigType::Long { min: 1000, max: i64::MAX },
        sensitive: false,
        doc: "Period of topic, config, group offset and ACL sync, ms.",
    },
    ConfigKey {
        name: "mirror.failed.retry.initial.backoff.ms",
        default: Some("100"),
        kind: ConfigType::Long { min: 1, max: i64::MAX },
        sensitive: false,
        doc: "First retry backoff of a FAILED partition, ms (full jitter).",
    },
    ConfigKey {
        name: "mirror.failed.retry.max.backoff.ms",
        default: Some("300000"),
        kind: ConfigType::Long { min: 1, max: i64::MAX },
        sensitive: false,
        doc: "Largest retry backoff of a FAILED partition, ms.",
    },
    ConfigKey {
        name: "mirror.failed.retry.max.attempts",
        default: Some("20"),
        kind: ConfigType::Long { min: 0, max: 32767 },
        sensitive: false,
        doc: "Automatic retries of a FAILED partition (0 = none).",
    },
    ConfigKey {
        name: "topic.properties.exclude",
        default: Some(DEFAULT_TOPIC_PROPERTIES_EXCLUDE),
        kind: ConfigType::List,
        sensitive: false,
        doc: "Topic configs never copied from the source.",
    },
    ConfigKey {
        name: "topics.include",
        default: Some(""),
        kind: ConfigType::RegexList,
        sensitive: false,
        doc: "Source topics started automatically (full-match regexes; empty = explicit only).",
    },
    ConfigKey {
        name: "topics.exclude",
        default: Some("__.*"),
        kind: ConfigType::RegexList,
        sensitive: false,
        doc: "Source topics never mirrored (wins over include).",
    },
    ConfigKey {
        name: "groups.include",
        default: Some(".*"),
        kind: ConfigType::RegexList,
        sensitive: false,
        doc: "Consumer groups whose offsets are synced.",
    },
    ConfigKey {
        name: "groups.exclude",
        default: Some(""),
        kind: ConfigType::RegexList,
        sensitive: false,
        doc: "Consumer groups never synced (wins over include).",
    },
    ConfigKey {
        name: "acls.include",
        default: Some("*"),
        kind: ConfigType::AclRules,
        sensitive: false,
        doc: "ACL include rules resourceType;resourceName;operation;permissionType;principal.",
    },
    ConfigKey {
        name: "acls.sync.mode",
        default: Some("safe"),
        kind: ConfigType::Choice(&["safe", "full"]),
        sensitive: false,
        doc: "What the ACL sync copies: safe = MirrorMaker 2's rules (TOPIC and GROUP ALLOW bindings only, ALL as READ, \
              never WRITE, nothing deleted on the destination); full = every selected binding including CLUSTER, DENY \
              and WRITE, deleting covered destination ACLs the source lacks (docs/metadata-sync.md).",
    },
    ConfigKey {
        name: "security.protocol",
        default: Some("PLAINTEXT"),
        kind: ConfigType::Choice(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
        sensitive: false,
        doc: "Protocol towards the source (docs/security.md).",
    },
    ConfigKey {
        name: "sasl.mechanism",
        default: Some("PLAIN"),
        kind: ConfigType::Choice(&["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]),
        sensitive: false,
        doc: "SASL mechanism towards the source.",
    },
    ConfigKey {
        name: "sasl.jaas.config",
        default: None,
        kind: ConfigType::String,
        sensitive: true,
        doc: "JAAS line with the source credentials, Java syntax: PlainLoginModule or ScramLoginModule with username and password (secret).",
    },
    ConfigKey {
        name: "sasl.login.callback.handler.class",
        default: None,
        kind: ConfigType::String,
        sensitive: false,
        doc: "OAUTHBEARER: Kafka's OAuthBearerLoginCallbackHandler (either package) or unset; any other handler is refused.",
    },
    ConfigKey {
        name: "sasl.oauthbearer.token.endpoint.url",
        default: None,
        kind: ConfigType::String,
        sensitive: false,
        doc: "OAUTHBEARER: the OAuth token endpoint (http or https) of the client-credentials grant; required with OAUTHBEARER.",
    },
    ConfigKey {
        name: "sasl.oauthbearer.client.credentials.client.id",
        default: None,
        kind: ConfigType::String,
        sensitive: false,
        doc: "OAUTHBEARER (Kafka 4.1, KIP-1139): the client id of the client-credentials grant; wins over the JAAS option clientId.",
    },
    ConfigKey {
        name: "sasl.oauthbearer.client.credentials.client.secret",
        default: None,
        kind: ConfigType::String,
        sensitive: true,
        doc: "OAUTHBEARER (Kafka 4.1, KIP-1139): the client secret (secret); wins over the JAAS option clientSecret.",
    },
    ConfigKey {
        name: "sasl.oauthbearer.scope",
        default: None,
        kind: ConfigType::String,
        sensitive: false,
        doc: "OAUTHBEARER (Kafka 4.1, KIP-1139): the scope requested; wins over the JAAS option scope.",
    },
    ConfigKey {
        name: "sasl.oauthbearer.jwt.retriever.class",
        default: None,
        kind: ConfigType::String,
        sensitive: false,
        doc: "OAUTHBEARER (Kafka 4.1): Kafka's ClientCredentialsJwtRetriever or DefaultJwtRetriever, or unset; any other retriever is refused.",
    },
    ConfigKey {
        name: "sasl.oauthbearer.scope.claim.name",
        default: Some("scope"),
        kind: ConfigType::String,
        sensitive: false,
        doc: "OAUTHBEARER: the token claim holding its scopes.",
    },
    ConfigKey {
        name: "sasl.oauthbearer.sub.claim.name",
        default: Some("sub"),
        kind: ConfigType::String,
        sensitive: false,
        doc: "OAUTHBEARER: the token claim holding its principal.",
    },
    ConfigKey {
        name: "sasl.oauthbearer.header.urlencode",
        default: Some("false"),
        kind: ConfigType::Choice(&["true", "false"]),
        sensitive: false,
        doc: "OAUTHBEARER: URL-encode clientId and clientSecret in the token request's Basic authorization.",
    },
    ConfigKey {
        name: "sasl.login.refresh.window.factor",
        default: Some("0.8"),
        kind: ConfigType::String,
        sensitive: false,
        doc: "OAUTHBEARER: refresh the token after this fraction of its lifetime, 0.5 to 1.0.",
    },
    ConfigKey {
        name: "sasl.login.refresh.window.jitter",
        default: Some("0.05"),
        kind: ConfigType::String,
        sensitive: false,
        doc: "OAUTHBEARER: random fraction of the lifetime added to the refresh time, 0 to 0.25.",
    },
    ConfigKey {
        name: "sasl.login.refresh.min.period.seconds",
        default: Some("60"),
        kind: ConfigType::Long { min: 0, max: 900 },
        sensitive: false,
        doc: "OAUTHBEARER: least time between two token refreshes, seconds.",
    },
    ConfigKey {
        name: "sasl.login.refresh.buffer.seconds",
        default: Some("300"),
        kind: ConfigType::Long { min: 0, max: 3600 },
        sensitive: false,
        doc: "OAUTHBEARER: refresh at least this long before the token expires, seconds.",
    },
    ConfigKey {
        name: "sasl.login.connect.timeout.ms",
        default: None,
        kind: ConfigType::Long { min: 0, max: I32 },
        sensitive: false,
        doc: "OAUTHBEARER: connect timeout towards the token endpoint, ms (unset: 10000; 0: none).",
    },
    ConfigKey {
        name: "sasl.login.read.timeout.ms",
        default: None,
        kind: ConfigType::Long { min: 0, max: I32 },
        sensitive: false,
        doc: "OAUTHBEARER: read timeout towards the token endpoint, ms (unset: 30000; 0: none).",
    },
    ConfigKey {
        name: "sasl.login.retry.backoff.ms",
        default: Some("100"),
        kind: ConfigType::Long { min: 0, max: I32 },
        sensitive: false,
        doc: "OAUTHBEARER: first wait before retrying a failed token request, doubling per attempt, ms.",
    },
    ConfigKey {
        name: "sasl.login.retry.backoff.max.ms",
        default: Some("10000"),
        kind: ConfigType::Long { min: 0, max: I32 },
        sensitive: false,
        doc: "OAUTHBEARER: window in which one token request is retried, ms.",
    },
    ConfigKey {
        name: "ssl.truststore.type",
        default: None,
        kind: ConfigType::Choice(&["PEM", "PKCS12", "JKS"]),
        sensitive: false,
        doc: "Trust store format: PEM or PKCS12 (guessed from the file when unset; JKS is refused with the keytool command that converts it).",
    },
    ConfigKey {
        name: "ssl.truststore.location",
        default: None,
        kind: ConfigType::String,
        sensitive: false,
        doc: "Trust store file (PEM or PKCS12) with the CAs of the source's certificates; unset = the system's CAs.",
    },
    ConfigKey {
        name: "ssl.truststore.password",
        default: None,
        kind: ConfigType::String,
        sensitive: true,
        doc: "PKCS12 trust store password (secret).",
    },
    ConfigKey {
        name: "ssl.truststore.certificates",
        default: None,
        kind: ConfigType::String,
        sensitive: false,
        doc: "Trusted CA certificates as PEM text.",
    },
    ConfigKey {
        name: "ssl.keystore.type",
        default: None,
        kind: ConfigType::Choice(&["PEM", "PKCS12", "JKS"]),
        sensitive: false,
        doc: "Key store format: PEM or PKCS12 (guessed from the file when unset).",
    },
    ConfigKey {
        name: "ssl.keystore.location",
        default: None,
        kind: ConfigType::String,
        sensitive: false,
        doc: "Client key store for mutual TLS: PKCS12, or PEM with the private key and the certificate chain.",
    },
    ConfigKey {
        name: "ssl.keystore.password",
        default: None,
        kind: ConfigType::String,
        sensitive: true,
        doc: "PKCS12 key store password (secret).",
    },
    ConfigKey {
        name: "ssl.keystore.key",
        default: None,
        kind: ConfigType::String,
        sensitive: true,
        doc: "Client private key as PEM text, unencrypted (secret).",
    },
    ConfigKey {
        name: "ssl.keystore.certificate.chain",
        default: None,
        kind: ConfigType::String,
        sensitive: false,
        doc: "Client certificate chain as PEM text (with ssl.keystore.key).",
    },
    ConfigKey {
        name: "ssl.key.password",
        default: None,
        kind: ConfigType::String,
        sensitive: true,
        doc: "Private key password (secret); encrypted PEM keys are refused.",
    },
    ConfigKey {
        name: "ssl.endpoint.identification.algorithm",
        default: Some("https"),
        kind: ConfigType::Choice(&["https", ""]),
        sensitive: false,
        doc: "Host name verification of the source: https = the certificate must name the broker host, empty = off.",
    },
    ConfigKey {
        name: "ssl.enabled.protocols",
        default: Some("TLSv1.2,TLSv1.3"),
        kind: ConfigType::List,
        sensitive: false,
        doc: "TLS versions offered to the source: TLSv1.2 and/or TLSv1.3 (older ones are refused).",
    },
    ConfigKey {
        name: "ssl.cipher.suites",
        default: None,
        kind: ConfigType::List,
        sensitive: false,
        doc: "Cipher suites offered to the source, IANA names (TLS_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, ...); unset = all rustls implements.",
    },
    ConfigKey {
        name: "mirror.fill.max.gap",
        default: Some("100000000"),
        kind: ConfigType::Long { min: 0, max: i64::MAX },
        sensitive: false,
        doc: "Largest source offset gap filled with placeholders, offsets (larger gaps start a new offset segment). \
              The default fills a removed head of up to 100 million offsets, so such a topic is mirrored physically identical; \
              see docs/performance.md for what a fill costs.",
    },
    ConfigKey {
        name: "mirror.transaction.markers",
        default: Some("real"),
        kind: ConfigType::Choice(&["real", "placeholder"]),
        sensitive: false,
        doc: "How source transaction markers and aborted records are written to the destination. \
              real = as real transaction markers and aborted transactional records (mirrorgate's own transactional ids \
              on the destination), so the destination reads right without mirrorgate; placeholder = as placeholder \
              records that only reads through mirrorgate turn into control batches (no transactional ids needed). \
              See docs/real-markers.md.",
    },
    ConfigKey {
        name: "mirror.replication.throttled.rate",
        default: None,
        kind: ConfigType::Long { min: 1, max: i64::MAX },
        sensitive: false,
        doc: "Cap on the mirror's source fetch rate, bytes/s (KIP-1279 throttling; unset = no cap). Shared by all of the \
              mirror's fetchers; a Fetch asks for at most one second of it, and a first batch larger than that is still \
              returned (so no partition stalls). The measured rate is the mirrorgate_mirror_byte_rate metric. \
              Keep it above 1 MB/s for an even rate.",
    },
    ConfigKey {
        name: "mirror.num.replica.fetchers",
        default: Some("1"),
        kind: ConfigType::Long { min: 1, max: 64 },
        sensitive: false,
        doc: "Fetch sessions per source broker for this mirror (KIP-1279), each on a connection of its own; a partition \
              always uses the same one. More than one lets a source broker serve the mirror's partitions in parallel.",
    },
    ConfigKey {
        name: "mirror.coalesce.max.bytes",
        default: Some("262144"),
        kind: ConfigType::Long { min: 0, max: I32 },
        sensitive: false,
        doc: "Largest destination batch built by merging consecutive small uncompressed source batches of a partition, bytes \
              (0 = never merge). Records keep their offsets, timestamps, keys, values and headers; only batch boundaries change. \
              Only batches already fetched are merged (no added latency). Compressed batches are merged only with \
              mirror.coalesce.recompress. See docs/performance.md.",
    },
    ConfigKey {
        name: "mirror.coalesce.recompress",
        default: Some("false"),
        kind: ConfigType::Boolean,
        sensitive: false,
        doc: "Also merge consecutive small compressed source batches of one codec (gzip, snappy, lz4, zstd; each at most half \
              of mirror.coalesce.max.bytes): their records are decompressed (at most mirror.coalesce.max.bytes), re-framed as for \
              uncompressed batches and compressed again with the same codec at its default level, in mirrorgate (CPU). \
              Records stay identical (offsets, timestamps, keys, values, headers) and --verify compares them; the payload \
              bytes of such destination batches differ from the source's. Codecs are never mixed.",
    },
    ConfigKey {
        name: "mirror.inflight.max.bytes",
        default: Some("67108864"),
        kind: ConfigType::Long { min: 1, max: I32 },
        sensitive: false,
        doc: "Most source record bytes a mirror holds at once (fetched and not yet appended), bytes. \
              Fetchers wait for room, so a slow destination slows them instead of growing buffers.",
    },
];

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

/// How long a built [`source_security`] is reused for the same settings before the stores
/// it names are read again (callers ask several times a second).
const SECURITY_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(60);

type SecurityCache = std::sync::Mutex<
    std::collections::HashMap<(String, BTreeMap<String, String>), (std::time::Instant, crate::client::ClientSecurity)>,
>;

/// The TLS and SASL settings towards the source of mirror `mirror` with `configs` (effective
/// values of `security.protocol`, `sasl.*`, `ssl.*`). The same mirror and settings give the
/// same result for [`SECURITY_CACHE_TTL`] (60 s) once built: store files are re-read after
/// that. An OAUTHBEARER token is the mirror's own, shared by its connections, never by
/// another mirror's.
///
/// # Errors
/// [`crate::client::SecurityError`] naming the key that cannot be used, including a token
/// endpoint outside proxy.yaml's allow-list ([`super::bound_credentials::check_token_url`]).
pub fn source_security(
    mirror: &str,
    configs: &BTreeMap<String, String>,
) -> Result<crate::client::ClientSecurity, crate::client::SecurityError> {
    static CACHE: std::sync::OnceLock<SecurityCache> = std::sync::OnceLock::new();
    // Never a token request to an endpoint the operator's allow-list does not hold.
    super::bound_credentials::check_token_url(configs)?;
    // Never a file outside proxy.yaml's mirrors.ssl_files_dir.
    super::store_files::check_locations(configs)?;
    let props: BTreeMap<String, String> = crate::client::security::security_keys()
        .filter_map(|k| effective(configs, k).map(|v| (k.to_string(), v.to_string())))
        .collect();
    let owner = format!("mirror:{mirror}");
    let key = (owner.clone(), props);
    let cache = CACHE.get_or_init(Default::default);
    {
        let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
        c.retain(|_, (at, _)| at.elapsed() < SECURITY_CACHE_TTL);
        // Held for the TTL only: a deleted or reconfigured mirror's OAUTHBEARER token source
        // (and its refresher) dies with its clients and this entry, while a failing one keeps
        // its 10 s failure hold across connects.
        if let Some((_, built)) = c.get(&key) {
            return Ok(built.clone());
        }
    }
    // Only usable settings are kept: a fixed store file is seen at the next call.
    let built = crate::client::ClientSecurity::from_properties_for(&owner, &key.1)?;
    cache.lock().unwrap_or_else(|e| e.into_inner()).insert(key, (std::time::Instant::now(), built.clone()));
    Ok(built)
}

/// Options of a client towards the source cluster of mirror `mirror` with `configs` (keys or their
/// aliases): `bootstrap.servers`, `client.id`, `request.timeout.ms`,
/// `socket.connection.setup.timeout.ms` and `.max.ms`, `reconnect.backoff.ms`,
/// `connections.max.idle.ms` (-1 = never), `socket.timeout.ms` and
/// `socket.send.buffer.bytes` / `socket.receive.buffer.bytes` (-1 = OS default), and TLS and
/// SASL ([`source_security`]; settings that stopped being usable give a client whose every
/// connect fails naming them, never a plaintext one). `None` when `bootstrap.servers` is
/// missing. Registers the security for the bootstrap list
/// ([`crate::client::security::register_for`]).
pub fn source_options(mirror: &str, configs: &BTreeMap<String, String>) -> Option<crate::client::ClusterOptions> {
    let bootstrap: Vec<String> = split_list(effective(configs, "bootstrap.servers")?).map(String::from).collect();
    let security = source_security(mirror, configs).unwrap_or_else(crate::client::ClientSecurity::broken);
    crate::client::security::register_for(&bootstrap, &security);
    let long = |k: &str| effective(configs, k).and_then(|v| v.trim().parse::<i64>().ok());
    let ms = |k: &str| long(k).and_then(|v| u64::try_from(v).ok()).map(std::time::Duration::from_millis);
    let bytes = |k: &str| long(k).and_then(|v| u32::try_from(v).ok()).filter(|v| *v > 0);
    let mut opts = crate::client::ClusterOptions::new(bootstrap);
    if let Some(t) = ms("request.timeout.ms") {
        opts.request_timeout = t;
    }
    if let Some(t) = ms("socket.connection.setup.timeout.ms") {
        opts.connect_timeout = t;
    }
    opts.connect_timeout_max = ms("socket.connection.setup.timeout.max.ms").unwrap_or(opts.connect_timeout);
    if let Some(t) = ms("reconnect.backoff.ms") {
        opts.reconnect_backoff = t;
    }
    opts.connections_max_idle = ms("connections.max.idle.ms");
    opts.socket = crate::client::SocketOptions {
        send_buffer_bytes: bytes("socket.send.buffer.bytes"),
        receive_buffer_bytes: bytes("socket.receive.buffer.bytes"),
        read_timeout: ms("socket.timeout.ms"),
    };
    if let Some(id) = effective(configs, "client.id") {
        opts.client_id = id.to_string();
    }
    opts.security = security;
    Some(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_known_keys_and_refuses_unknown_ones() {
        assert_eq!(validate("fetch.max.bytes", "1024"), Ok(()));
        assert!(matches!(validate("fetch.max.bytes", "lots"), Err(ConfigValueError::Invalid { .. })));
        assert!(matches!(validate("fetch.max.bytes", "0"), Err(ConfigValueError::Invalid { .. })));
        assert_eq!(validate("no.such.key", "1"), Err(ConfigValueError::Unknown("no.such.key".into())));
        assert!(validate("topics.include", "orders.*,(bad").is_err());
        assert_eq!(validate("bootstrap.servers", "a:1,b:2"), Ok(()));
        assert!(validate("bootstrap.servers", "nope").is_err());
        assert!(validate("security.protocol", "TLS").is_err());
        for v in ["true", "false", "TRUE", " False "] {
            assert_eq!(validate("mirror.coalesce.recompress", v), Ok(()), "{v:?}");
        }
        for v in ["yes", "1", ""] {
            assert!(
                matches!(validate("mirror.coalesce.recompress", v), Err(ConfigValueError::Invalid { .. })),
                "{v:?}"
            );
        }
        assert_eq!(effective(&BTreeMap::new(), "mirror.coalesce.recompress"), Some("false"));
    }

    #[test]
    fn secrets_are_never_echoed() {
        let err = validate("sasl.mechanism", "secret-value").unwrap_err().to_string();
        assert!(err.contains("secret-value"), "non-secret values may be echoed: {err}");
        assert!(is_sensitive("sasl.jaas.config") && is_sensitive("ssl.key.password"));
        assert_eq!(displayed("sasl.jaas.config", "x"), None);
        assert_eq!(displayed("fetch.max.bytes", "5"), Some("5".into()));
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn source_client_options_apply_every_socket_config() {
        let o = source_options(
            "m",
            &map(&[
                ("bootstrap.servers", "a:1"),
                ("socket.connection.setup.timeout.ms", "100"),
                ("socket.connection.setup.timeout.max.ms", "800"),
                ("reconnect.backoff.ms", "70"),
                ("connections.max.idle.ms", "5000"),
                ("socket.timeout.ms", "9000"),
                ("socket.send.buffer.bytes", "131072"),
                ("socket.receive.buffer.bytes", "-1"),
            ]),
        )
        .unwrap();
        let ms = std::time::Duration::from_millis;
        assert_eq!((o.connect_timeout, o.connect_timeout_max, o.reconnect_backoff), (ms(100), ms(800), ms(70)));
        assert_eq!(o.connections_max_idle, Some(ms(5000)));
        assert_eq!(o.socket.read_timeout, Some(ms(9000)));
        assert_eq!((o.socket.send_buffer_bytes, o.socket.receive_buffer_bytes), (Some(131072), None));
        // Defaults: Kafka's timeouts, OS buffers, idle connections closed after 10 minutes.
        let d = source_options("m", &map(&[("bootstrap.servers", "a:1")])).unwrap();
        assert_eq!((d.connect_timeout, d.connect_timeout_max, d.reconnect_backoff), (ms(10_000), ms(30_000), ms(50)));
        assert_eq!((d.connections_max_idle, d.socket.read_timeout), (Some(ms(600_000)), Some(ms(30_000))));
        assert_eq!((d.socket.send_buffer_bytes, d.socket.receive_buffer_bytes), (None, None));
        let never =
            source_options("m", &map(&[("bootstrap.servers", "a:1"), ("connections.max.idle.ms", "-1")])).unwrap();
        assert_eq!(never.connections_max_idle, None);
    }

    #[test]
    fn kip_names_are_aliases_and_mirrorgate_names_win() {
        for (alias, k) in ALIASES {
            assert!(key(k).is_some(), "alias `{alias}` of unknown key `{k}`");
            assert_eq!(key(alias).map(|d| d.name), Some(*k));
            assert!(key(alias).map(|d| d.name) != Some(*alias));
        }
        assert!(matches!(validate("replica.fetch.max.bytes", "0"), Err(ConfigValueError::Invalid { .. })));
        assert_eq!(validate("replica.fetch.max.bytes", "2048"), Ok(()));
        let c = map(&[("replica.fetch.max.bytes", "2048"), ("replica.fetch.wait.max.ms", "250")]);
        assert_eq!(effective(&c, "fetch.max.bytes"), Some("2048"));
        assert_eq!(effective(&c, "fetch.wait.max.ms"), Some("250"));
        assert_eq!(effective(&c, "fetch.min.bytes"), Some("1"), "unset: the default");
        let both = map(&[("replica.fetch.max.bytes", "2048"), ("fetch.max.bytes", "4096")]);
        assert_eq!(effective(&both, "fetch.max.bytes"), Some("4096"), "mirrorgate's name wins");
        let sock = map(&[
            ("bootstrap.servers", "a:1"),
            ("replica.socket.receive.buffer.bytes", "65536"),
            ("replica.socket.timeout.ms", "4000"),
        ]);
        let o = source_options("m", &sock).unwrap();
        assert_eq!(o.socket.receive_buffer_bytes, Some(65536));
        assert_eq!(o.socket.read_timeout, Some(std::time::Duration::from_millis(4000)));
    }

    #[test]
    fn socket_timeout_must_cover_the_fetch_wait() {
        let bad =
            map(&[("bootstrap.servers", "a:1"), ("replica.socket.timeout.ms", "500"), ("fetch.wait.max.ms", "1000")]);
        assert!(matches!(validate_all(&bad), Err(ConfigValueError::Invalid { key, .. }) if key == "socket.timeout.ms"));
        let ok =
            map(&[("bootstrap.servers", "a:1"), ("socket.timeout.ms", "1000"), ("replica.fetch.wait.max.ms", "1000")]);
        assert_eq!(validate_all(&ok), Ok(()));
    }

    #[test]
    fn bootstrap_servers_is_required() {
        let mut m = BTreeMap::new();
        m.insert("fetch.max.bytes".to_string(), "100".to_string());
        assert_eq!(validate_all(&m), Err(ConfigValueError::Missing("bootstrap.servers".into())));
    }
}
