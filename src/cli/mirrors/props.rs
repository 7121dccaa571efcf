//! Java-properties style files for `mirrorgate mirrors`: `--mirror-config` (the source
//! connection and mirror settings sent in CreateClusterMirror's `Config`, KIP-1279 §8.4) and
//! `--command-config` (client settings for the connection to the destination).
//!
//! A deliberately strict subset of `java.util.Properties`: `key=value` lines, `#`/`!` comment
//! lines and blank lines; anything else is rejected with its line number. Values of sensitive
//! keys (see [`is_sensitive`]) are never put into an error message, a `Debug` string or any
//! other output.

use std::fmt;
use std::path::Path;

/// What is printed instead of the value of a sensitive key.
pub const HIDDEN: &str = "[hidden]";

/// Whether the value of `key` must never be shown: [`mirrorgate::secret::is_secret_key`] (keys
/// containing `password`, `jaas` or `secret`, case-insensitive, e.g. `ssl.truststore.password`,
/// and the private key `ssl.keystore.key`).
pub fn is_sensitive(key: &str) -> bool {
    mirrorgate::secret::is_secret_key(key)
}

/// `value`, or [`HIDDEN`] if `key` is sensitive.
pub fn display_value<'a>(key: &str, value: &'a str) -> &'a str {
    if is_sensitive(key) {
        HIDDEN
    } else {
        value
    }
}

/// A properties file that could not be read or parsed. The message never contains the value of
/// a sensitive key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PropsError {
    message: String,
}

impl PropsError {
    fn at(line: usize, message: impl fmt::Display) -> Self {
        Self { message: format!("line {line}: {message}") }
    }

    /// Prefixes the message with the file it came from.
    pub fn in_file(self, path: &Path) -> Self {
        Self { message: format!("{}: {}", path.display(), self.message) }
    }
}

/// One `key=value` entry.
#[derive(Clone, PartialEq, Eq)]
pub struct Property {
    /// The key, e.g. `bootstrap.servers`.
    pub key: String,
    /// The value after unescaping, surrounding whitespace removed.
    pub value: String,
    /// 1-based line number in the file.
    pub line: usize,
}

impl fmt::Debug for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={} (line {})", self.key, display_value(&self.key, &self.value), self.line)
    }
}

/// The entries of a properties file, in file order, keys unique.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Properties {
    /// The entries in file order.
    pub entries: Vec<Property>,
}

impl Properties {
    /// Reads and parses `path`.
    ///
    /// Errors: the file cannot be read or is not valid UTF-8, or any [`Properties::parse`] error;
    /// the message starts with the path.
    pub fn load(path: &Path) -> Result<Self, PropsError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| PropsError { message: format!("{}: cannot read: {e}", path.display()) })?;
        Self::parse(&text).map_err(|e| e.in_file(path))
    }

    /// Parses properties text.
    ///
    /// Errors (with the 1-based line number): a line that is not blank, a `#`/`!` comment or
    /// `key=value`; a key with characters other than letters, digits, `.`, `_`, `-`; a
    /// duplicate key; a line continuation (trailing `\`); an unknown escape in a value.
    pub fn parse(text: &str) -> Result<Self, PropsError> {
        let mut entries: Vec<Property> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
                continue;
            }
            let Some((key, value)) = trimmed.split_once('=') else {
                let shown = if is_sensitive(trimmed) { HIDDEN } else { trimmed };
                return Err(PropsError::at(line, format!("expected key=value, got '{shown}'")));
            };
            let key = key.trim();
            if key.is_empty() {
                return Err(PropsError::at(line, "missing key before '='"));
            }
            if let Some(bad) = key.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
                let shown = if is_sensitive(key) { HIDDEN } else { key };
                return Err(PropsError::at(
                    line,
                    format!("invalid character {bad:?} in key '{shown}' (keys use letters, digits, '.', '_' and '-')"),
                ));
            }
            let value = unescape(value.trim()).map_err(|m| PropsError::at(line, format!("{key}: {m}")))?;
            if let Some(first) = entries.iter().find(|p| p.key == key) {
                return Err(PropsError::at(line, format!("duplicate key '{key}' (first set on line {})", first.line)));
            }
            entries.push(Property { key: key.to_string(), value, line });
        }
        Ok(Self { entries })
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.iter().find(|p| p.key == key).map(|p| p.value.as_str())
    }

    /// The values of sensitive keys that are not empty (to redact them from server messages).
    pub fn secrets(&self) -> Vec<&str> {
        self.entries.iter().filter(|p| is_sensitive(&p.key) && !p.value.is_empty()).map(|p| p.value.as_str()).collect()
    }
}

/// Java-properties escapes in a value: `\\ \t \n \r \f \= \: \# \! \ ` and `\uXXXX`. A trailing
/// lone backslash (a line continuation) and any other escape are errors. Error messages never
/// contain the value.
fn unescape(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => return Err("line continuations (a trailing '\\') are not supported".into()),
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some(c @ ('\\' | '=' | ':' | '#' | '!' | ' ')) => out.push(c),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let decoded = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32))
                    .flatten()
                    .ok_or_else(|| "malformed \\uXXXX escape".to_string())?;
                out.push(decoded);
            }
            Some(other) => return Err(format!("unsupported escape '\\{other}'")),
        }
    }
    Ok(out)
}

/// The validated `--command-config`: settings of the client connection to the destination.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandConfig {
    /// `client.id` sent in every request header (default `mirrorgate-mirrors`).
    pub client_id: Option<String>,
    /// The mirror RPC api keys, when mirrorgate's `mirror_api_keys` moved them
    /// (`mirror.api.key.<rpc>=N`, e.g. `mirror.api.key.create_cluster_mirror=1094`).
    pub api_keys: mirrorgate::wire::mirror::MirrorApiTable,
    /// TLS and SASL of the connection (default PLAINTEXT).
    pub security: mirrorgate::client::ClientSecurity,
}

impl CommandConfig {
    /// Validates client properties: the Java client's security settings
    /// (`security.protocol`, `sasl.*`, `ssl.*`, as for a mirror's source), `client.id` and
    /// `mirror.api.key.<rpc>`.
    ///
    /// Errors: unusable security settings (naming the key, never a secret), an empty
    /// `client.id`, or any other key.
    pub fn from_properties(props: &Properties) -> Result<Self, PropsError> {
        let mut cfg = CommandConfig::default();
        let mut security_props = std::collections::BTreeMap::new();
        for p in &props.entries {
            match p.key.as_str() {
                k if mirrorgate::client::security::security_keys().any(|s| s == k) => {
                    security_props.insert(k.to_string(), p.value.clone());
                }
                k if k.starts_with("mirror.api.key.") => {
                    let rpc = &k["mirror.api.key.".len()..];
                    let key: i16 = p.value.trim().parse().map_err(|_| PropsError::at(p.line, format!("{k}: '{}' is not an api key number", p.value)))?;
                    let slot = match rpc {
                        "create_cluster_mirror" => &mut cfg.api_keys.create_cluster_mirror,
                        "delete_cluster_mirror" => &mut cfg.api_keys.delete_cluster_mirror,
                        "list_cluster_mirrors" => &mut cfg.api_keys.list_cluster_mirrors,
                        "describe_cluster_mirrors" => &mut cfg.api_keys.describe_cluster_mirrors,
                        "start_mirror_topics" => &mut cfg.api_keys.start_mirror_topics,
                        "stop_mirror_topics" => &mut cfg.api_keys.stop_mirror_topics,
                        "pause_mirror_topics" => &mut cfg.api_keys.pause_mirror_topics,
                        "resume_mirror_topics" => &mut cfg.api_keys.resume_mirror_topics,
                        other => return Err(PropsError::at(p.line, format!("unknown mirror RPC '{other}' in {k}"))),
                    };
                    *slot = key;
                }
                "client.id" => {
                    if p.value.is_empty() {
                        return Err(PropsError::at(p.line, "client.id is empty"));
                    }
                    cfg.client_id = Some(p.value.clone());
                }
                k => {
                    return Err(PropsError::at(
                        p.line,
                        format!("unsupported key '{k}' (supported: security.protocol, sasl.mechanism, sasl.jaas.config, sasl.oauthbearer.*, sasl.login.*, ssl.truststore.*, ssl.keystore.*, ssl.key.password, ssl.endpoint.identification.algorithm, client.id, mirror.api.key.<rpc>)"),
                    ))
                }
            }
        }
        cfg.security = mirrorgate::client::ClientSecurity::from_properties(&security_props).map_err(|e| {
            let line = props.entries.iter().find(|p| p.key == e.key).map_or(0, |p| p.line);
            PropsError::at(line, e)
        })?;
        Ok(cfg)
    }
}

/// Replaces every occurrence of each secret in `text` with [`HIDDEN`] (for messages a server
/// may have built from the configs it was sent). Longer secrets are replaced first, so a secret
/// that contains another is still hidden whole.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut sorted: Vec<&str> = secrets.iter().copied().filter(|s| !s.is_empty()).collect();
    sorted.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_string();
    for s in sorted {
        out = out.replace(s, HIDDEN);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Properties::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn parses_key_values_comments_and_blank_lines() {
        let p = Properties::parse(
            "# source\n! also a comment\n\n  bootstrap.servers = src1:9092,src2:9092  \r\ntopics.exclude=__.*\nempty=\n\
             a=b=c\n",
        )
        .unwrap();
        let kv: Vec<(&str, &str, usize)> =
            p.entries.iter().map(|e| (e.key.as_str(), e.value.as_str(), e.line)).collect();
        assert_eq!(
            kv,
            vec![
                ("bootstrap.servers", "src1:9092,src2:9092", 4),
                ("topics.exclude", "__.*", 5),
                ("empty", "", 6),
                ("a", "b=c", 7),
            ]
        );
        assert_eq!(p.get("topics.exclude"), Some("__.*"));
        assert_eq!(p.get("nope"), None);
    }

    #[test]
    fn unescapes_java_escapes() {
        let p = Properties::parse(r"path=C:\\certs\\x.jks\t\u0041\=\:").unwrap();
        assert_eq!(p.entries[0].value, "C:\\certs\\x.jks\tA=:");
    }

    #[test]
    fn rejects_bad_syntax_with_line_numbers() {
        assert_eq!(
            err("a=1\nbootstrap.servers src:9092\n"),
            "line 2: expected key=value, got 'bootstrap.servers src:9092'"
        );
        assert_eq!(err("\n=x\n"), "line 2: missing key before '='");
        assert_eq!(
            err("a b=1"),
            "line 1: invalid character ' ' in key 'a b' (keys use letters, digits, '.', '_' and '-')"
        );
        assert_eq!(
            err("k:v=1"),
            "line 1: invalid character ':' in key 'k:v' (keys use letters, digits, '.', '_' and '-')"
        );
        assert_eq!(err("a=1\nb=2\na=3"), "line 3: duplicate key 'a' (first set on line 1)");
        assert_eq!(err("a=1 \\\n  2"), "line 1: a: line continuations (a trailing '\\') are not supported");
        assert_eq!(err(r"a=\q"), r"line 1: a: unsupported escape '\q'");
        assert_eq!(err(r"a=\u00"), r"line 1: a: malformed \uXXXX escape");
    }

    #[test]
    fn never_shows_sensitive_values() {
        let secret = "s3cr3t-value";
        let texts = [
            format!("ssl.truststore.password {secret}"),
            format!("sasl.jaas.config org.apache.kafka.common.security.plain.PlainLoginModule password=\"{secret}\""),
            format!("ssl.key.password=\\q{secret}"),
            format!("ssl.key.password={secret}\nssl.key.password={secret}"),
        ];
        for t in &texts {
            let e = err(t);
            assert!(!e.contains(secret), "{e}");
        }
        assert_eq!(err(&texts[0]), "line 1: expected key=value, got '[hidden]'");

        let p =
            Properties::parse(&format!("SSL.KEYSTORE.PASSWORD={secret}\nsasl.jaas.config=x {secret};\nb=1")).unwrap();
        let dbg = format!("{p:?}");
        assert!(!dbg.contains(secret), "{dbg}");
        assert!(dbg.contains("SSL.KEYSTORE.PASSWORD=[hidden] (line 1)"), "{dbg}");
        assert!(dbg.contains("b=1 (line 3)"), "{dbg}");
        assert_eq!(p.secrets(), vec![secret, "x s3cr3t-value;"]);
        assert_eq!(
            redact("bad value 'x s3cr3t-value;' for s3cr3t-value", &p.secrets()),
            "bad value '[hidden]' for [hidden]"
        );
    }

    #[test]
    fn sensitive_keys() {
        assert!(is_sensitive("ssl.truststore.password"));
        assert!(is_sensitive("Password"));
        assert!(is_sensitive("sasl.jaas.config"));
        assert!(is_sensitive("listener.name.x.sasl.jaas.config"));
        assert!(!is_sensitive("bootstrap.servers"));
        assert_eq!(display_value("ssl.key.password", "x"), HIDDEN);
        assert_eq!(display_value("client.id", "x"), "x");
    }

    #[test]
    fn command_config_takes_the_java_security_settings() {
        let ok = Properties::parse("security.protocol=plaintext\nclient.id=ops\n").unwrap();
        assert_eq!(
            CommandConfig::from_properties(&ok).unwrap(),
            CommandConfig { client_id: Some("ops".into()), ..Default::default() }
        );
        assert_eq!(CommandConfig::from_properties(&Properties::default()).unwrap(), CommandConfig::default());
        let sasl = Properties::parse(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"ops\" password=\"hunter2\";\n",
        )
        .unwrap();
        let cfg = CommandConfig::from_properties(&sasl).unwrap();
        assert_eq!(cfg.security.sasl.as_ref().map(|s| s.username.as_str()), Some("ops"));

        let cfg_err = |t: &str| CommandConfig::from_properties(&Properties::parse(t).unwrap()).unwrap_err().to_string();
        assert_eq!(
            cfg_err("client.id=x\nsecurity.protocol=SASL_SSL\nsasl.mechanism=GSSAPI"),
            "line 3: `sasl.mechanism`: `GSSAPI` is not supported; use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (Kafka's default GSSAPI is not)"
        );
        assert!(cfg_err("security.protocol=TLS").starts_with("line 1: `security.protocol`: `TLS` is not one of"));
        let e = cfg_err("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=x password=\"hunter2\";");
        assert!(e.starts_with("line 3: `sasl.jaas.config`") && !e.contains("hunter2"), "{e}");
        assert_eq!(cfg_err("client.id="), "line 1: client.id is empty");
        assert!(cfg_err("request.timeout.ms=1").starts_with("line 1: unsupported key 'request.timeout.ms'"));
    }

    #[test]
    fn load_reports_the_path() {
        let dir = std::env::temp_dir().join(format!("mirrorgate-props-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bad.properties");
        std::fs::write(&f, "ok=1\nnot a property\n").unwrap();
        let e = Properties::load(&f).unwrap_err().to_string();
        assert_eq!(e, format!("{}: line 2: expected key=value, got 'not a property'", f.display()));
        let missing = dir.join("missing.properties");
        assert!(Properties::load(&missing)
            .unwrap_err()
            .to_string()
            .starts_with(&format!("{}: cannot read", missing.display())));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
