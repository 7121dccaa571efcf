//! How a client secures its broker connections, from the Java client's properties
//! (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`, `ssl.*`): the protocol, the
//! TLS settings ([`crate::client::tls`]) and the SASL credentials ([`crate::client::sasl`]).
//! Built once per cluster (a mirror's source, the destination) and shared by its connections;
//! every connection does its own TLS handshake and SASL exchange.
//!
//! Secrets (passwords, the JAAS line, private keys) are kept in [`Secret`]s whose `Debug`
//! never shows them; an options' `Debug` carries a keyed fingerprint of every setting instead,
//! so a changed password still changes what callers compare (the data plane rebuilds a source
//! client when its options' `Debug` text changes).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::client::conn::ClientError;

/// How long a TLS or SASL refusal by a broker is remembered for the settings that got it
/// (see [`ClientSecurity::recent_failure`]).
pub const SECURITY_FAILURE_HOLD: Duration = Duration::from_secs(5);

type FailureMemo = Mutex<HashMap<(String, String), (Instant, FailureKind)>>;

#[derive(Debug, Clone)]
enum FailureKind {
    Tls(String),
    Sasl(i16, String),
}

fn failures() -> &'static FailureMemo {
    static MEMO: OnceLock<FailureMemo> = OnceLock::new();
    MEMO.get_or_init(|| Mutex::new(HashMap::new()))
}

/// `security.protocol` (Kafka `SecurityProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    /// No TLS, no SASL.
    #[default]
    Plaintext,
    /// TLS, no SASL.
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Parses Kafka's name (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`; case-insensitive
    /// as in Kafka).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Self::Plaintext),
            "SSL" => Some(Self::Ssl),
            "SASL_PLAINTEXT" => Some(Self::SaslPlaintext),
            "SASL_SSL" => Some(Self::SaslSsl),
            _ => None,
        }
    }

    /// Whether connections use TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// `sasl.mechanism` values mirrorgate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// RFC 4616.
    Plain,
    /// RFC 5802 / RFC 7677 with SHA-256.
    ScramSha256,
    /// RFC 5802 with SHA-512.
    ScramSha512,
    /// RFC 7628 with a client-credentials token ([`crate::client::oauth`]).
    OAuthBearer,
}

impl SaslMechanism {
    /// Parses Kafka's name.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "PLAIN" => Some(Self::Plain),
            "SCRAM-SHA-256" => Some(Self::ScramSha256),
            "SCRAM-SHA-512" => Some(Self::ScramSha512),
            "OAUTHBEARER" => Some(Self::OAuthBearer),
            _ => None,
        }
    }

    /// Kafka's name, as sent in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
            Self::OAuthBearer => "OAUTHBEARER",
        }
    }
}

pub use crate::secret::Secret;

/// A SASL user and its mechanism (from `sasl.mechanism` and `sasl.jaas.config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    /// Mechanism.
    pub mechanism: SaslMechanism,
    /// User name (shown in logs).
    pub username: String,
    /// Password (never shown; empty for OAUTHBEARER).
    pub password: Secret,
    /// OAUTHBEARER's token source, shared by the owner's connections (`None` otherwise).
    pub oauth: Option<Arc<crate::client::oauth::OAuthBearerLogin>>,
}

/// Why security settings cannot be used. Messages name the setting and never contain a
/// secret value.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("`{key}`: {reason}")]
pub struct SecurityError {
    /// The property concerned, e.g. `ssl.truststore.location`.
    pub key: String,
    /// What is wrong and what would be right.
    pub reason: String,
}

pub(crate) fn sec_err(key: &str, reason: impl Into<String>) -> SecurityError {
    SecurityError { key: key.into(), reason: reason.into() }
}

/// The security of one cluster's connections, ready to use.
#[derive(Clone)]
pub struct ClientSecurity {
    /// The protocol.
    pub protocol: SecurityProtocol,
    /// TLS client config when the protocol uses TLS.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// SASL credentials when the protocol uses SASL.
    pub sasl: Option<SaslCredentials>,
    /// Keyed digest of every setting it was built from (see the module docs).
    fingerprint: String,
    /// Settings that could not be used: every connect fails with this instead of falling
    /// back to a weaker protocol.
    broken: Option<SecurityError>,
}

impl std::fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecurity")
            .field("protocol", &self.protocol)
            .field("mechanism", &self.sasl.as_ref().map(|s| s.mechanism))
            .field("username", &self.sasl.as_ref().map(|s| s.username.as_str()))
            .field("settings", &self.fingerprint)
            .finish()
    }
}

impl PartialEq for ClientSecurity {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl Eq for ClientSecurity {}

impl Default for ClientSecurity {
    /// PLAINTEXT (equal to PLAINTEXT built from properties).
    fn default() -> Self {
        Self {
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl: None,
            fingerprint: fingerprint(&format!("{:?}\n", SecurityProtocol::Plaintext)),
            broken: None,
        }
    }
}

/// Every security property mirrorgate reads: [`SECURITY_KEYS`] then
/// [`crate::client::oauth::OAUTH_KEYS`].
pub fn security_keys() -> impl Iterator<Item = &'static str> {
    SECURITY_KEYS.iter().chain(crate::client::oauth::OAUTH_KEYS).copied()
}

/// The security properties mirrorgate reads (Java client names), without the OAUTHBEARER
/// ones ([`crate::client::oauth::OAUTH_KEYS`]); [`security_keys`] gives both.
pub const SECURITY_KEYS: &[&str] = &[
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
];

impl ClientSecurity {
    /// PLAINTEXT.
    pub fn plaintext() -> Self {
        Self::default()
    }

    /// Whether [`ClientSecurity::default`] and PLAINTEXT from properties agree (for tests).
    #[cfg(test)]
    fn plaintext_fingerprint_matches() -> bool {
        Self::default() == Self::from_properties(&BTreeMap::new()).expect("plaintext")
    }

    /// Security that refuses every connect with `error` (settings that stopped being usable,
    /// e.g. a trust store file removed after the mirror was created): never a fallback to
    /// plaintext.
    pub fn broken(error: SecurityError) -> Self {
        Self { fingerprint: fingerprint(&format!("broken {error}")), broken: Some(error), ..Self::plaintext() }
    }

    /// The error every connect fails with, for [`ClientSecurity::broken`] settings.
    pub fn unusable(&self) -> Option<&SecurityError> {
        self.broken.as_ref()
    }

    /// A TLS or SASL refusal `addr` gave these settings less than
    /// [`SECURITY_FAILURE_HOLD`] ago, as the error to return without connecting.
    pub fn recent_failure(&self, addr: &str) -> Option<ClientError> {
        if let Some(e) = &self.broken {
            return Some(ClientError::Tls { addr: addr.into(), reason: format!("unusable security settings: {e}") });
        }
        if self.is_plaintext() {
            return None;
        }
        let mut memo = failures().lock().unwrap_or_else(|e| e.into_inner());
        memo.retain(|_, (at, _)| at.elapsed() < SECURITY_FAILURE_HOLD);
        let (_, kind) = memo.get(&(addr.to_string(), self.fingerprint.clone()))?;
        Some(match kind.clone() {
            FailureKind::Tls(reason) => ClientError::Tls { addr: addr.into(), reason },
            FailureKind::Sasl(error, message) => ClientError::Authentication { addr: addr.into(), error, message },
        })
    }

    /// Records a failed connect to `addr` if TLS or SASL refused it.
    pub fn remember_failure(&self, addr: &str, e: &ClientError) {
        let kind = match e {
            ClientError::Tls { reason, .. } => FailureKind::Tls(reason.clone()),
            ClientError::Authentication { error, message, .. } => FailureKind::Sasl(*error, message.clone()),
            _ => return,
        };
        let mut memo = failures().lock().unwrap_or_else(|e| e.into_inner());
        memo.insert((addr.to_string(), self.fingerprint.clone()), (Instant::now(), kind));
    }

    /// Whether connections are plain TCP without SASL.
    pub fn is_plaintext(&self) -> bool {
        self.protocol == SecurityProtocol::Plaintext
    }

    /// Builds the security from Java client properties (`props` holds any keys; only
    /// [`security_keys`] are read). Files named by `*.location` are read now.
    ///
    /// # Errors
    /// [`SecurityError`] naming the property: an unknown protocol or mechanism, a missing or
    /// malformed `sasl.jaas.config`, an unreadable or unusable store or PEM, a JKS store (with
    /// the `keytool` command that converts it), a wrong store password.
    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<Self, SecurityError> {
        Self::from_properties_for("", props)
    }

    /// [`ClientSecurity::from_properties`] for `owner` (e.g. `mirror:<name>`): an OAUTHBEARER
    /// token is shared by the connections of one owner only
    /// ([`crate::client::oauth::OAuthBearerLogin::shared`]).
    ///
    /// # Errors
    /// As [`ClientSecurity::from_properties`].
    pub fn from_properties_for(owner: &str, props: &BTreeMap<String, String>) -> Result<Self, SecurityError> {
        let get = |k: &str| props.get(k).map(String::as_str).filter(|v| !v.trim().is_empty());
        let protocol = match get("security.protocol") {
            None => SecurityProtocol::Plaintext,
            Some(p) => SecurityProtocol::parse(p).ok_or_else(|| {
                sec_err("security.protocol", format!("`{p}` is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"))
            })?,
        };
        let tls = if protocol.uses_tls() {
            Some(Arc::new(crate::client::tls::client_config(&|k: &str| props.get(k).map(String::as_str))?))
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            let m = get("sasl.mechanism").unwrap_or("GSSAPI");
            let mechanism = SaslMechanism::parse(m).ok_or_else(|| {
                sec_err(
                    "sasl.mechanism",
                    format!(
                        "`{m}` is not supported; use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (Kafka's default GSSAPI is not)"
                    ),
                )
            })?;
            let jaas = get("sasl.jaas.config")
                .ok_or_else(|| sec_err("sasl.jaas.config", format!("is required with {}", security_name(protocol))))?;
            if mechanism == SaslMechanism::OAuthBearer {
                let login = crate::client::oauth::OAuthBearerLogin::shared(owner, props)?;
                let username = login.settings().client_id.clone();
                Some(SaslCredentials { mechanism, username, password: Secret::new(""), oauth: Some(login) })
            } else {
                let (username, password) = parse_jaas(jaas, mechanism)?;
                Some(SaslCredentials { mechanism, username, password, oauth: None })
            }
        } else {
            None
        };
        // What the connections depend on, normalized (a key set to its default and the key
        // left out give the same fingerprint).
        let mut material = format!("{protocol:?}\n");
        if protocol.uses_sasl() {
            for k in ["sasl.mechanism", "sasl.jaas.config"] {
                material.push_str(&format!("{k}={}\n", get(k).unwrap_or_default()));
            }
            if let Some(login) = sasl.as_ref().and_then(|s| s.oauth.as_ref()) {
                for k in crate::client::oauth::OAUTH_KEYS {
                    material.push_str(&format!("{k}={}\n", get(k).unwrap_or_default()));
                }
                // One owner's settings differ from another's: each keeps its own token.
                material.push_str(&format!("oauth={:p}\n", Arc::as_ptr(login)));
            }
        }
        if protocol.uses_tls() {
            for k in
                SECURITY_KEYS.iter().filter(|k| k.starts_with("ssl.") && **k != "ssl.endpoint.identification.algorithm")
            {
                if let Some(v) = get(k) {
                    material.push_str(&format!("{k}={v}\n"));
                }
            }
            let verify_host = props.get("ssl.endpoint.identification.algorithm").is_none_or(|v| !v.trim().is_empty());
            material.push_str(&format!("verify_host={verify_host}\n"));
        }
        Ok(Self { protocol, tls, sasl, fingerprint: fingerprint(&material), broken: None })
    }
}

fn security_name(p: SecurityProtocol) -> &'static str {
    match p {
        SecurityProtocol::Plaintext => "PLAINTEXT",
        SecurityProtocol::Ssl => "SSL",
        SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
        SecurityProtocol::SaslSsl => "SASL_SSL",
    }
}

/// An HMAC-SHA-256 of `material` under a key drawn once per process: equal settings give
/// equal fingerprints within a process, and nothing about a secret can be learnt from it
/// outside the process.
fn fingerprint(material: &str) -> String {
    static KEY: OnceLock<ring::hmac::Key> = OnceLock::new();
    let key = KEY.get_or_init(|| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &rand::random::<[u8; 32]>()));
    let tag = ring::hmac::sign(key, material.as_bytes());
    tag.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a client `sasl.jaas.config` in Java's JAAS syntax:
/// `<LoginModule class> <flag> key="value" ... ;` (one login module; values quoted with `"`
/// and `\` escapes, or bare tokens), returning `username` and `password`. The module must fit
/// `mechanism`: `org.apache.kafka.common.security.plain.PlainLoginModule` for PLAIN,
/// `org.apache.kafka.common.security.scram.ScramLoginModule` for SCRAM (Kafka's
/// `JaasConfig`, `PlainLoginModule`, `ScramLoginModule`).
///
/// # Errors
/// [`SecurityError`] on `sasl.jaas.config` saying what is wrong; never echoes a value.
pub fn parse_jaas(text: &str, mechanism: SaslMechanism) -> Result<(String, Secret), SecurityError> {
    let bad = |reason: String| sec_err("sasl.jaas.config", reason);
    let (module, mut options) = jaas_options(text)?;
    let short = module.rsplit('.').next().unwrap_or(&module);
    let fits = match mechanism {
        SaslMechanism::Plain => short == "PlainLoginModule",
        SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => short == "ScramLoginModule",
        SaslMechanism::OAuthBearer => short == "OAuthBearerLoginModule",
    };
    if !fits {
        let want = match mechanism {
            SaslMechanism::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
            SaslMechanism::OAuthBearer => "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
            _ => "org.apache.kafka.common.security.scram.ScramLoginModule",
        };
        return Err(bad(format!(
            "login module `{module}` does not fit sasl.mechanism {}; use {want}",
            mechanism.name()
        )));
    }
    let username = options.remove("username").ok_or_else(|| bad("option `username` is missing".into()))?;
    let password = options.remove("password").ok_or_else(|| bad("option `password` is missing".into()))?;
    if username.is_empty() {
        return Err(bad("option `username` is empty".into()));
    }
    Ok((username, Secret::new(password)))
}

/// Splits a client `sasl.jaas.config` (Java's JAAS syntax, one login module) into the
/// login module class and its options.
///
/// # Errors
/// [`SecurityError`] on `sasl.jaas.config` saying what is wrong; never echoes a value.
pub fn jaas_options(text: &str) -> Result<(String, BTreeMap<String, String>), SecurityError> {
    let bad = |reason: String| sec_err("sasl.jaas.config", reason);
    let tokens = jaas_tokens(text).map_err(bad)?;
    let mut it = tokens.iter().peekable();
    let module = match it.next() {
        Some(Tok::Word(w)) => w.clone(),
        _ => return Err(bad("expected a login module class first, e.g. `org.apache.kafka.common.security.scram.ScramLoginModule required username=\"...\" password=\"...\";`".into())),
    };
    match it.next() {
        Some(Tok::Word(f))
            if ["required", "requisite", "sufficient", "optional"].contains(&f.to_ascii_lowercase().as_str()) => {}
        _ => return Err(bad(format!("expected a control flag (`required`) after `{module}`"))),
    }
    let mut options = BTreeMap::new();
    loop {
        match it.next() {
            Some(Tok::Semi) => break,
            Some(Tok::Word(k)) => {
                if it.next() != Some(&Tok::Eq) {
                    return Err(bad(format!("expected `=` after option `{k}`")));
                }
                match it.next() {
                    Some(Tok::Word(v)) | Some(Tok::Quoted(v)) => {
                        options.insert(k.clone(), v.clone());
                    }
                    _ => return Err(bad(format!("option `{k}` has no value"))),
                }
            }
            Some(Tok::Quoted(_)) | Some(Tok::Eq) => return Err(bad("expected an option name".into())),
            None => return Err(bad("missing `;` at the end of the login module".into())),
        }
    }
    if it.next().is_some() {
        return Err(bad("more than one login module; a client uses exactly one".into()));
    }
    Ok((module, options))
}

#[derive(Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Quoted(String),
    Eq,
    Semi,
}

fn jaas_tokens(text: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '=' => {
                chars.next();
                out.push(Tok::Eq);
            }
            ';' => {
                chars.next();
                out.push(Tok::Semi);
            }
            '"' | '\'' => {
                let quote = c;
                chars.next();
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => return Err("a quoted value is not closed".into()),
                        Some('\\') => match chars.next() {
                            Some(e) => s.push(e),
                            None => return Err("a quoted value is not closed".into()),
                        },
                        Some(q) if q == quote => break,
                        Some(ch) => s.push(ch),
                    }
                }
                out.push(Tok::Quoted(s));
            }
            _ => {
                let mut s = String::new();
                while let Some(&ch) = chars.peek() {
                    if ch.is_whitespace() || ch == '=' || ch == ';' || ch == '"' || ch == '\'' {
                        break;
                    }
                    s.push(ch);
                    chars.next();
                }
                out.push(Tok::Word(s));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_java_jaas_lines() {
        let (u, p) = parse_jaas(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cr\"et;=";"#,
            SaslMechanism::ScramSha512,
        )
        .unwrap();
        assert_eq!((u.as_str(), p.expose()), ("alice", "s3cr\"et;="));
        let (u, p) = parse_jaas(
            "org.apache.kafka.common.security.plain.PlainLoginModule required\n  username=bob\n  password='pw' ;  ",
            SaslMechanism::Plain,
        )
        .unwrap();
        assert_eq!((u.as_str(), p.expose()), ("bob", "pw"));
    }

    #[test]
    fn jaas_errors_say_what_is_wrong_without_the_password() {
        let e = |t: &str, m| parse_jaas(t, m).unwrap_err().to_string();
        let scram = SaslMechanism::ScramSha256;
        assert!(e(r#"ScramLoginModule required username="a" password="hunter2""#, scram).contains("missing `;`"));
        assert!(e(r#"ScramLoginModule required username="a" password="hunter2;"#, scram).contains("not closed"));
        assert!(e(r#"ScramLoginModule required username="a";"#, scram).contains("`password` is missing"));
        assert!(e(r#"ScramLoginModule username="a" password="x";"#, scram).contains("control flag"));
        let wrong = e(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="hunter2";"#,
            scram,
        );
        assert!(wrong.contains("does not fit sasl.mechanism SCRAM-SHA-256") && !wrong.contains("hunter2"), "{wrong}");
        assert!(
            e(r#"A required username="a" password="b"; B required;"#, SaslMechanism::Plain).contains("more than one")
        );
    }

    #[test]
    fn debug_hides_secrets_but_changes_with_them() {
        let props = |pw: &str| {
            [
                ("security.protocol", "SASL_PLAINTEXT".to_string()),
                ("sasl.mechanism", "PLAIN".to_string()),
                (
                    "sasl.jaas.config",
                    format!(r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{pw}";"#),
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<BTreeMap<_, _>>()
        };
        let a = ClientSecurity::from_properties(&props("topsecret1")).unwrap();
        let b = ClientSecurity::from_properties(&props("topsecret2")).unwrap();
        let (da, db) = (format!("{a:?}"), format!("{b:?}"));
        assert!(!da.contains("topsecret") && da.contains("\"u\""), "{da}");
        assert_ne!(da, db);
        assert_eq!(da, format!("{:?}", ClientSecurity::from_properties(&props("topsecret1")).unwrap()));
        assert_eq!(format!("{:?}", a.sasl.unwrap().password), "[hidden]");
    }

    #[test]
    fn protocol_and_mechanism_errors_name_the_key() {
        let m = |pairs: &[(&str, &str)]| {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()
        };
        let e = ClientSecurity::from_properties(&m(&[("security.protocol", "TLS")])).unwrap_err();
        assert_eq!(e.key, "security.protocol");
        let e = ClientSecurity::from_properties(&m(&[("security.protocol", "SASL_PLAINTEXT")])).unwrap_err();
        assert_eq!(e.key, "sasl.mechanism", "Kafka's default GSSAPI is refused");
        let e = ClientSecurity::from_properties(&m(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
        ]))
        .unwrap_err();
        assert_eq!(e.key, "sasl.jaas.config");
        assert!(ClientSecurity::from_properties(&m(&[])).unwrap().is_plaintext());
        assert!(ClientSecurity::plaintext_fingerprint_matches());
    }
}
