//! The table of mirror config keys: every key mirrorgate accepts, its default, value shape
//! and meaning (docs/configuration.md lists the same; `tests/docs_config.rs` checks it).

use super::{ConfigKey, ConfigType};

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
