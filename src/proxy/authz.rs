//! Authorization of what mirrorgate answers itself (issue 11 item 5): the mirror RPCs and the
//! CLUSTER_MIRROR (64) config resource.
//!
//! - **Who asks.** Each client connection's principal comes from the SASL exchange it runs
//!   with the destination broker through mirrorgate ([`ClientIdentity`]): the user name in the
//!   client's first SaslAuthenticate message (PLAIN authcid, SCRAM `n=`, OAUTHBEARER token
//!   `sub`), trusted only once the broker has answered every round of the mechanism without
//!   error (1 for PLAIN and OAUTHBEARER, 2 for SCRAM). A connection without SASL is
//!   `User:ANONYMOUS`, as on a broker's PLAINTEXT or SSL listener without a principal builder.
//! - **What is allowed.** Until brokers know the KIP's ClusterMirror resource, the
//!   destination's ACLs on the CLUSTER resource decide ([`AclView`]), evaluated with the
//!   rules of Kafka's `StandardAuthorizer`: super users (`authorization.super_users`, the destination's `super.users`) may do anything; a
//!   matching DENY wins; otherwise a matching ALLOW allows; ALL implies every operation and
//!   READ, WRITE, DELETE and ALTER imply DESCRIBE; principal `User:*` and host `*` are
//!   wildcards; LITERAL names match `kafka-cluster` or `*`, PREFIXED names match a prefix of
//!   it; with no ACL at all on the cluster, `allow.everyone.if.no.acl.found` decides. Changes
//!   need ALTER, reads DESCRIBE. A destination without an authorizer (DescribeAcls answers
//!   SECURITY_DISABLED) allows everything, as Kafka does.
//! - **Refusal.** CLUSTER_AUTHORIZATION_FAILED (31) with a message naming principal and
//!   operation.

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsRequest, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use crate::client::cluster::ClusterClient;
use crate::wire::header::{self, RequestPrefix};

/// Kafka error CLUSTER_AUTHORIZATION_FAILED (31).
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
/// The principal of a connection that did not authenticate.
pub const ANONYMOUS: &str = "User:ANONYMOUS";
/// How long a read of the destination's ACLs is used before it is read again.
pub const ACL_REFRESH: Duration = Duration::from_secs(5);
/// How long a read of the destination's ACLs may take before the last view is used (so the
/// mirror RPCs answer promptly while the destination is down).
pub const ACL_READ_TIMEOUT: Duration = Duration::from_secs(3);

/// Kafka's AclOperation codes used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// DESCRIBE (8): `--list`, `--describe`, DescribeConfigs on a mirror.
    Describe,
    /// ALTER (7): create, delete, start, stop, pause, resume, mirror config changes.
    Alter,
}

impl Operation {
    fn code(self) -> i8 {
        match self {
            Operation::Describe => 8,
            Operation::Alter => 7,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Operation::Describe => "DESCRIBE",
            Operation::Alter => "ALTER",
        }
    }
}

const OP_ALL: i8 = 2;
const IMPLIES_DESCRIBE: [i8; 4] = [3, 4, 6, 7]; // READ, WRITE, DELETE, ALTER
const DENY: i8 = 2;
const ALLOW: i8 = 3;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const RESOURCE_CLUSTER: i8 = 4;
const CLUSTER_NAME: &str = "kafka-cluster";

/// One ACL on the CLUSTER resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAcl {
    /// Pattern type (3 LITERAL, 4 PREFIXED).
    pub pattern: i8,
    /// Resource name (`kafka-cluster`, `*`, or a prefix).
    pub name: String,
    /// `User:name` or `User:*`.
    pub principal: String,
    /// Client host (IP) or `*`.
    pub host: String,
    /// AclOperation code.
    pub operation: i8,
    /// 2 DENY, 3 ALLOW.
    pub permission: i8,
}

impl ClusterAcl {
    fn applies(&self, principal: &str, host: &str) -> bool {
        let resource = match self.pattern {
            LITERAL => self.name == CLUSTER_NAME || self.name == "*",
            PREFIXED => CLUSTER_NAME.starts_with(self.name.as_str()),
            _ => false,
        };
        resource
            && (self.principal == principal || self.principal == "User:*")
            && (self.host == "*" || self.host == host)
    }

    fn allows(&self, op: Operation) -> bool {
        self.operation == OP_ALL
            || self.operation == op.code()
            || (op == Operation::Describe && IMPLIES_DESCRIBE.contains(&self.operation))
    }

    fn denies(&self, op: Operation) -> bool {
        self.operation == OP_ALL || self.operation == op.code()
    }
}

/// What the destination's authorizer says, as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclView {
    /// No authorizer (DescribeAcls answered SECURITY_DISABLED): everything is allowed.
    NoAuthorizer,
    /// The CLUSTER ACLs and the broker settings that change their meaning.
    Acls {
        /// ACLs on the CLUSTER resource.
        cluster: Vec<ClusterAcl>,
        /// Super users (`authorization.super_users`, e.g. `User:admin`).
        super_users: Vec<String>,
        /// `allow.everyone.if.no.acl.found`.
        allow_if_none: bool,
    },
}

impl AclView {
    /// Whether `principal` connecting from `host` may do `op`.
    ///
    /// # Errors
    /// The refusal message (for CLUSTER_AUTHORIZATION_FAILED).
    pub fn authorize(&self, principal: &str, host: &str, op: Operation) -> Result<(), String> {
        let AclView::Acls { cluster, super_users, allow_if_none } = self else { return Ok(()) };
        if super_users.iter().any(|s| s == principal) {
            return Ok(());
        }
        let refused = || {
            format!(
                "principal {principal} (host {host}) is not authorized to {} the cluster mirrors: the destination's ACLs on the CLUSTER resource grant it no {} (mirrorgate authorizes mirror requests like the broker, from those ACLs)",
                if op == Operation::Alter { "change" } else { "describe" },
                op.name()
            )
        };
        let matching: Vec<&ClusterAcl> = cluster.iter().filter(|a| a.applies(principal, host)).collect();
        if matching.iter().any(|a| a.permission == DENY && a.denies(op)) {
            return Err(refused());
        }
        if matching.iter().any(|a| a.permission == ALLOW && a.allows(op)) {
            return Ok(());
        }
        if cluster.is_empty() && *allow_if_none {
            return Ok(());
        }
        Err(refused())
    }
}

/// Reads the destination's CLUSTER ACLs and `allow.everyone.if.no.acl.found`; super users
/// are left empty (the broker does not return `super.users` in DescribeConfigs: they come
/// from `authorization.super_users`).
///
/// # Errors
/// The destination cannot be asked, or refuses (for example mirrorgate's own principal lacks
/// DESCRIBE on the cluster), as text.
pub async fn read_acls(client: &ClusterClient) -> Result<AclView, String> {
    let Some(bindings) = crate::mirror::sync::acls::describe(client).await? else {
        return Ok(AclView::NoAuthorizer);
    };
    let cluster = bindings
        .into_iter()
        .filter(|b| b.0 == RESOURCE_CLUSTER)
        .map(|(_, name, pattern, principal, host, operation, permission)| ClusterAcl {
            pattern,
            name,
            principal,
            host,
            operation,
            permission,
        })
        .collect();
    // A live broker's id (node ids need not start at 0), asked for a static broker config.
    if client.metadata().brokers.is_empty() {
        client.refresh_metadata(Some(&[])).await.map_err(|e| format!("Metadata: {e}"))?;
    }
    let node = client.metadata().brokers.keys().next().copied().ok_or("the destination lists no broker")?;
    let req = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(RESOURCE_CLUSTER)
        .with_resource_name(StrBytes::from_string(node.to_string()))
        .with_configuration_keys(Some(vec![StrBytes::from_static_str("allow.everyone.if.no.acl.found")]))]);
    let resp = client.send_any(&req, 1).await.map_err(|e| format!("DescribeConfigs of broker {node}: {e}"))?;
    let mut allow_if_none = false;
    for r in &resp.results {
        if r.error_code != 0 {
            return Err(format!(
                "DescribeConfigs of broker {node}: {}{}",
                crate::client::cluster::KafkaErrorCode(r.error_code),
                r.error_message.as_ref().map(|m| format!(" ({m})")).unwrap_or_default()
            ));
        }
        for c in &r.configs {
            if c.name.as_str() == "allow.everyone.if.no.acl.found" {
                allow_if_none = c.value.as_ref().is_some_and(|v| v.eq_ignore_ascii_case("true"));
            }
        }
    }
    Ok(AclView::Acls { cluster, super_users: Vec::new(), allow_if_none })
}

/// The destination's ACLs, read at most every [`ACL_REFRESH`].
pub struct AclCache {
    client: ClusterClient,
    /// `authorization.super_users` from proxy.yaml.
    super_users: Vec<String>,
    last: tokio::sync::Mutex<Option<(Instant, AclView)>>,
}

impl std::fmt::Debug for AclCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclCache").finish_non_exhaustive()
    }
}

impl AclCache {
    /// A cache reading through `client` (mirrorgate's own destination connection), with the
    /// configured `super_users`.
    pub fn new(client: ClusterClient, super_users: Vec<String>) -> Self {
        Self { client, super_users, last: tokio::sync::Mutex::new(None) }
    }

    /// Decides `op` for `identity`.
    ///
    /// When the destination cannot be asked, the last view read is used; with none ever read,
    /// DESCRIBE is allowed (so `--describe` works while the destination is down) and ALTER is
    /// refused with the reason.
    ///
    /// # Errors
    /// The refusal message.
    pub async fn authorize(&self, identity: &ClientIdentity, op: Operation) -> Result<(), String> {
        let view = {
            let mut last = self.last.lock().await;
            let fresh = last.as_ref().is_some_and(|(at, _)| at.elapsed() < ACL_REFRESH);
            if !fresh {
                let read = tokio::time::timeout(ACL_READ_TIMEOUT, read_acls(&self.client))
                    .await
                    .unwrap_or_else(|_| Err(format!("no answer within {} ms", ACL_READ_TIMEOUT.as_millis())));
                match read {
                    Ok(mut v) => {
                        if let AclView::Acls { super_users, .. } = &mut v {
                            super_users.extend(self.super_users.iter().cloned());
                        }
                        *last = Some((Instant::now(), v));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the destination's ACLs; using the last ones read");
                        if last.is_none() {
                            return match op {
                                Operation::Describe => Ok(()),
                                Operation::Alter => {
                                    Err(format!("cannot read the destination's ACLs to authorize this change: {e}"))
                                }
                            };
                        }
                    }
                }
            }
            last.as_ref().map(|(_, v)| v.clone()).unwrap_or(AclView::NoAuthorizer)
        };
        let principal = identity.principal();
        let host = identity.host.to_string();
        view.authorize(&principal, &host, op)
            .inspect_err(|m| tracing::warn!(%principal, %host, operation = op.name(), "mirror request refused: {m}"))
    }
}

/// Who a client connection is, as far as mirrorgate can tell.
#[derive(Debug)]
pub struct ClientIdentity {
    /// The client's address and port.
    pub peer: SocketAddr,
    /// The client's address.
    pub host: IpAddr,
    /// `User:<subject DN>` of the client certificate on a TLS listener, if one was presented.
    pub tls_principal: Option<String>,
    sasl: Mutex<SaslProgress>,
}

/// Kafka's principal for a TLS client certificate (`DefaultKafkaPrincipalBuilder` with the
/// DEFAULT `ssl.principal.mapping.rules`): `User:` + the subject DN as Java's
/// `X500Principal.getName()` writes it (RFC 2253: last RDN first, `CN=alice,OU=eng,O=corp`,
/// special characters escaped with `\`). `None` if the certificate does not parse.
pub fn tls_principal(cert_der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der).ok()?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter_rdn() {
        let mut parts = Vec::new();
        for atv in rdn.iter() {
            let oid = atv.attr_type().to_id_string();
            let key = match oid.as_str() {
                "2.5.4.3" => "CN".to_string(),
                "2.5.4.6" => "C".to_string(),
                "2.5.4.7" => "L".to_string(),
                "2.5.4.8" => "ST".to_string(),
                "2.5.4.9" => "STREET".to_string(),
                "2.5.4.10" => "O".to_string(),
                "2.5.4.11" => "OU".to_string(),
                "0.9.2342.19200300.100.1.25" => "DC".to_string(),
                "0.9.2342.19200300.100.1.1" => "UID".to_string(),
                other => other.to_string(),
            };
            let value = atv.as_str().ok()?;
            parts.push(format!("{key}={}", rfc2253_escape(value)));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(format!("User:{}", rdns.join(",")))
}

fn rfc2253_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let edge = (i == 0 && (c == ' ' || c == '#')) || (i + 1 == v.chars().count() && c == ' ');
        if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') || edge {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[derive(Debug, Default)]
struct SaslProgress {
    mechanism: Option<String>,
    /// User name from the client's first SaslAuthenticate message of this exchange.
    claimed: Option<String>,
    /// SaslAuthenticate responses without error in this exchange.
    rounds_ok: u8,
    /// `User:name` once an exchange completed.
    principal: Option<String>,
    /// Whether an exchange completed on this connection before: the current one is a
    /// KIP-368 re-authentication.
    reauthenticating: bool,
    /// `session_lifetime_ms` of the last accepted SaslAuthenticate response of this exchange
    /// (v1+; 0 = the broker sets no limit).
    lifetime_ms: i64,
    /// When the broker ends the session (KIP-368: the last completed exchange's response
    /// plus its `session_lifetime_ms`); `None` without a limit.
    expires_at: Option<std::time::Instant>,
}

fn rounds_needed(mechanism: &str) -> u8 {
    if mechanism.starts_with("SCRAM-") {
        2
    } else {
        1
    }
}

impl ClientIdentity {
    /// A connection from `peer` that has not authenticated, with the principal of its TLS
    /// client certificate if it presented one.
    pub fn new(peer: SocketAddr, tls_principal: Option<String>) -> Self {
        Self { peer, host: peer.ip(), tls_principal, sasl: Mutex::new(SaslProgress::default()) }
    }

    /// The SASL principal (`User:name`) once an exchange completed, else the TLS client
    /// certificate's, else [`ANONYMOUS`] (a broker's order on SASL_SSL and SSL listeners).
    pub fn principal(&self) -> String {
        self.lock().principal.clone().or_else(|| self.tls_principal.clone()).unwrap_or_else(|| ANONYMOUS.to_string())
    }

    /// Whether the client's SASL session has ended (`connections.max.reauth.ms` on the
    /// destination, KIP-368) without a re-authentication. A broker closes such a connection
    /// at its next request other than SaslHandshake (`SocketServer`, "expired channel");
    /// mirrorgate does the same before answering a request itself (the mirror RPCs), which
    /// the broker never sees.
    pub fn session_expired(&self) -> bool {
        self.lock().expires_at.is_some_and(|t| std::time::Instant::now() > t)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SaslProgress> {
        self.sasl.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Looks at a forwarded SaslHandshake (17) or SaslAuthenticate (36) request. A request
    /// that does not decode is left to the broker (it answers it).
    pub fn on_request(&self, prefix: &RequestPrefix, frame: &Bytes) {
        match ApiKey::try_from(prefix.api_key) {
            Ok(ApiKey::SaslHandshake) => {
                if let Some(req) = decode::<SaslHandshakeRequest>(ApiKey::SaslHandshake, prefix, frame) {
                    let mut s = self.lock();
                    // A handshake after a completed exchange is a re-authentication
                    // (KIP-368): the principal stays the one the broker accepted until the
                    // new exchange completes (the broker refuses a change of principal).
                    s.reauthenticating = s.principal.is_some();
                    s.mechanism = Some(req.mechanism.to_string());
                    s.claimed = None;
                    s.rounds_ok = 0;
                }
            }
            Ok(ApiKey::SaslAuthenticate) => {
                if let Some(req) = decode::<SaslAuthenticateRequest>(ApiKey::SaslAuthenticate, prefix, frame) {
                    let mut s = self.lock();
                    if s.claimed.is_none() {
                        s.claimed = s.mechanism.as_deref().and_then(|m| claimed_user(m, &req.auth_bytes));
                    }
                }
            }
            _ => {}
        }
    }

    /// Looks at the broker's SaslAuthenticate response (after the response header).
    pub fn on_authenticate_response(&self, frame: &Bytes, api_version: i16) {
        let hv = ApiKey::SaslAuthenticate.response_header_version(api_version);
        let Ok(start) = header::response_header_len(frame, hv) else { return };
        let Ok(resp) = SaslAuthenticateResponse::decode(&mut frame.slice(start..), api_version) else { return };
        let mut s = self.lock();
        let count = |ok: bool, reauthenticating: bool| {
            if reauthenticating {
                crate::telemetry::metrics::client_reauthentication(ok);
            } else {
                crate::telemetry::metrics::client_authentication(ok);
            }
        };
        // An OAUTHBEARER refusal comes as error 0 with a JSON error challenge; the client's
        // `\x01` then gets SASL_AUTHENTICATION_FAILED (RFC 7628 §3.2.2, Kafka's
        // `OAuthBearerSaslServer`). The token's `sub` is not trusted on such an answer.
        let challenge = s.mechanism.as_deref() == Some("OAUTHBEARER") && !resp.auth_bytes.is_empty();
        if resp.error_code != 0 || challenge {
            if !challenge {
                count(false, s.reauthenticating);
            }
            s.claimed = None;
            s.rounds_ok = 0;
            return;
        }
        s.rounds_ok = s.rounds_ok.saturating_add(1);
        if api_version >= 1 {
            s.lifetime_ms = resp.session_lifetime_ms;
        }
        let needed = s.mechanism.as_deref().map(rounds_needed).unwrap_or(u8::MAX);
        if s.rounds_ok == needed {
            count(true, s.reauthenticating);
            // The broker's `sessionExpirationTimeNanos` is the end of its authentication
            // plus the lifetime; this response left it after that, so this bound is never
            // earlier than the broker's.
            s.expires_at = u64::try_from(s.lifetime_ms)
                .ok()
                .filter(|ms| *ms > 0)
                .and_then(|ms| std::time::Instant::now().checked_add(std::time::Duration::from_millis(ms)));
        }
        if s.rounds_ok >= needed {
            match (s.claimed.clone(), s.principal.clone()) {
                (Some(user), Some(before)) if s.reauthenticating && before != format!("User:{user}") => {
                    // The broker refuses a change of principal on re-authentication, so an
                    // accepted one naming another user means our reading of the exchange is
                    // not the broker's: keep the principal it accepted first.
                    tracing::warn!(peer = %self.peer, principal = %before, claimed = %user, "a re-authentication the broker accepted names another user; the connection keeps its first principal");
                }
                (Some(user), _) => s.principal = Some(format!("User:{user}")),
                (None, _) => {}
            }
        }
    }
}

fn decode<T: Decodable>(key: ApiKey, prefix: &RequestPrefix, frame: &Bytes) -> Option<T> {
    let start = header::request_header_len(frame, key.request_header_version(prefix.api_version)).ok()?;
    T::decode(&mut frame.slice(start..), prefix.api_version).ok()
}

/// The user a client's first SASL message names. PLAIN: `authzid NUL authcid NUL password`,
/// the authcid (RFC 4616; Kafka refuses an authzid that differs). SCRAM: `n,,n=user,r=...`
/// with `=2C`/`=3D` unescaped (RFC 5802). OAUTHBEARER: the `sub` claim of the bearer token
/// in the `auth` key (RFC 7628 §3.1; scheme `Bearer` in any case followed by one or more
/// spaces, as Kafka's `OAuthBearerClientInitialResponse.AUTH_PATTERN`). Always `sub`, Kafka's
/// default `sasl.oauthbearer.sub.claim.name`: mirrorgate cannot know a broker that sets
/// another claim, and then names a principal the broker may not use (docs/security.md).
pub fn claimed_user(mechanism: &str, auth: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(auth).ok()?;
    match mechanism {
        "PLAIN" => {
            let mut parts = text.split('\0');
            let _authzid = parts.next()?;
            let authcid = parts.next()?;
            (!authcid.is_empty()).then(|| authcid.to_string())
        }
        m if m.starts_with("SCRAM-") => {
            let bare = text.splitn(3, ',').nth(2)?;
            let user = bare.split(',').find_map(|kv| kv.strip_prefix("n="))?;
            Some(user.replace("=2C", ",").replace("=3D", "="))
        }
        "OAUTHBEARER" => {
            let auth = text.split('\u{1}').find_map(|kv| kv.strip_prefix("auth="))?;
            let (scheme, token) = auth.split_once(' ')?;
            if !scheme.eq_ignore_ascii_case("bearer") {
                return None;
            }
            let token = token.trim_start_matches(' ').trim_end();
            let payload = token.split('.').nth(1)?;
            let json = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
            let v: serde_json::Value = serde_json::from_slice(&json).ok()?;
            v.get("sub")?.as_str().map(String::from)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(pattern: i8, name: &str, principal: &str, host: &str, operation: i8, permission: i8) -> ClusterAcl {
        ClusterAcl { pattern, name: name.into(), principal: principal.into(), host: host.into(), operation, permission }
    }

    fn view(cluster: Vec<ClusterAcl>) -> AclView {
        AclView::Acls { cluster, super_users: vec!["User:admin".into()], allow_if_none: false }
    }

    #[test]
    fn kafka_rules_deny_wins_implications_wildcards_prefixes() {
        let v = view(vec![
            acl(LITERAL, "kafka-cluster", "User:alice", "*", 7, ALLOW),
            acl(PREFIXED, "kafka-", "User:bob", "*", 8, ALLOW),
            acl(LITERAL, "*", "User:*", "10.0.0.9", OP_ALL, DENY),
            acl(LITERAL, "kafka-cluster", "User:carol", "*", 3, ALLOW),
        ]);
        assert!(v.authorize("User:alice", "127.0.0.1", Operation::Alter).is_ok());
        assert!(v.authorize("User:alice", "127.0.0.1", Operation::Describe).is_ok(), "ALTER implies DESCRIBE");
        assert!(v.authorize("User:bob", "127.0.0.1", Operation::Describe).is_ok(), "prefixed");
        assert!(v.authorize("User:bob", "127.0.0.1", Operation::Alter).is_err());
        assert!(v.authorize("User:carol", "127.0.0.1", Operation::Describe).is_ok(), "READ implies DESCRIBE");
        assert!(v.authorize("User:carol", "127.0.0.1", Operation::Alter).is_err());
        assert!(v.authorize("User:alice", "10.0.0.9", Operation::Alter).is_err(), "deny wins");
        assert!(v.authorize("User:admin", "10.0.0.9", Operation::Alter).is_ok(), "super user");
        let e = v.authorize(ANONYMOUS, "127.0.0.1", Operation::Describe).unwrap_err();
        assert!(e.contains("User:ANONYMOUS") && e.contains("DESCRIBE"), "{e}");
        assert!(AclView::NoAuthorizer.authorize(ANONYMOUS, "x", Operation::Alter).is_ok());
        let open = AclView::Acls { cluster: vec![], super_users: vec![], allow_if_none: true };
        assert!(open.authorize(ANONYMOUS, "x", Operation::Alter).is_ok());
        let topic_only = view(vec![acl(LITERAL, "other-name", "User:dave", "*", OP_ALL, ALLOW)]);
        assert!(topic_only.authorize("User:dave", "h", Operation::Describe).is_err());
    }

    /// `openssl req -x509 -subj "/C=US/O=corp/OU=eng/CN=alice, jr"`; openssl's RFC 2253 form
    /// of its subject is `CN=alice\\, jr,OU=eng,O=corp,C=US`, as Java prints it.
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB0TCCAXegAwIBAgIUHNFwoiKCWdYkRvNSGj/fBSlkrWkwCgYIKoZIzj0EAwIw\nPjELMAkGA1UEBhMCVVMxDTALBgNVBAoMBGNvcnAxDDAKBgNVBAsMA2VuZzESMBAG\nA1UEAwwJYWxpY2UsIGpyMB4XDTI2MTIwMTE4MjUyNloXDTM2MTEyODE4MjUyNlow\nPjELMAkGA1UEBhMCVVMxDTALBgNVBAoMBGNvcnAxDDAKBgNVBAsMA2VuZzESMBAG\nA1UEAwwJYWxpY2UsIGpyMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAErmCmAdCj\nJhmuzbfHwE99+Jfq1v0AmgTTFB+0qdW0E3FKO5m4GZhxUHVLSimnWlOL7KHew7cA\nNTdswyy6ViomLaNTMFEwHQYDVR0OBBYEFEdJmXInnhJQTqcAA/2L0Rc9JodnMB8G\nA1UdIwQYMBaAFEdJmXInnhJQTqcAA/2L0Rc9JodnMA8GA1UdEwEB/wQFMAMBAf8w\nCgYIKoZIzj0EAwIDSAAwRQIgdq6SnJarErbbMmWIkPe1C5wC5vSsOzlnQ0q9W+eW\ntUcCIQDGGmdQxYILFQhC+XUWPwGNxADjM5Jj6hviTdk5rBGpoQ==\n-----END CERTIFICATE-----";

    #[test]
    fn tls_principal_is_the_rfc2253_subject() {
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(CERT.as_bytes()).unwrap();
        assert_eq!(tls_principal(der.as_ref()).as_deref(), Some("User:CN=alice\\, jr,OU=eng,O=corp,C=US"));
        assert_eq!(tls_principal(b"not a certificate"), None);
        let id = ClientIdentity::new("127.0.0.1:1".parse().unwrap(), Some("User:CN=x".into()));
        assert_eq!(id.principal(), "User:CN=x");
    }

    /// A client request frame as the proxy sees it (without the length prefix).
    fn request_frame<R: kafka_protocol::protocol::Encodable>(
        key: ApiKey,
        version: i16,
        req: &R,
    ) -> (RequestPrefix, Bytes) {
        use kafka_protocol::protocol::Encodable;
        let mut b = bytes::BytesMut::new();
        let mut h = kafka_protocol::messages::RequestHeader::default();
        h.request_api_key = key as i16;
        h.request_api_version = version;
        h.correlation_id = 7;
        h.encode(&mut b, key.request_header_version(version)).unwrap();
        req.encode(&mut b, version).unwrap();
        let b = b.freeze();
        (RequestPrefix::parse(&b).unwrap(), b)
    }

    fn handshake(mechanism: &str) -> (RequestPrefix, Bytes) {
        let req = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
        request_frame(ApiKey::SaslHandshake, 1, &req)
    }

    fn authenticate(auth: &[u8]) -> (RequestPrefix, Bytes) {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(auth));
        request_frame(ApiKey::SaslAuthenticate, 2, &req)
    }

    /// The broker's SaslAuthenticate v2 response frame with `error`.
    fn response(error: i16) -> Bytes {
        use kafka_protocol::protocol::Encodable;
        let mut b = bytes::BytesMut::new();
        let mut h = kafka_protocol::messages::ResponseHeader::default();
        h.correlation_id = 7;
        h.encode(&mut b, ApiKey::SaslAuthenticate.response_header_version(2)).unwrap();
        let mut r = SaslAuthenticateResponse::default();
        r.error_code = error;
        r.session_lifetime_ms = 5000;
        r.encode(&mut b, 2).unwrap();
        b.freeze()
    }

    /// KIP-368 re-authentication through the proxy: the principal stays the accepted one
    /// while a re-authentication runs and after one the broker refuses (it then closes the
    /// connection); a claimed user is never trusted before the broker accepted every round.
    #[test]
    fn reauthentication_keeps_the_accepted_principal() {
        let id = ClientIdentity::new("127.0.0.1:1".parse().unwrap(), None);
        let step = |req: (RequestPrefix, Bytes)| id.on_request(&req.0, &req.1);
        step(handshake("SCRAM-SHA-512"));
        step(authenticate(b"n,,n=frank,r=abc"));
        id.on_authenticate_response(&response(0), 2);
        assert_eq!(id.principal(), ANONYMOUS, "one SCRAM round of two");
        step(authenticate(b"c=biws,r=abcdef,p=xyz"));
        id.on_authenticate_response(&response(0), 2);
        assert_eq!(id.principal(), "User:frank");
        // Re-authentication as another user: while it runs, and after the broker refuses
        // it, the principal is still frank's.
        step(handshake("SCRAM-SHA-512"));
        step(authenticate(b"n,,n=admin,r=abc"));
        assert_eq!(id.principal(), "User:frank");
        id.on_authenticate_response(&response(0), 2);
        assert_eq!(id.principal(), "User:frank", "first round only");
        step(authenticate(b"c=biws,r=abcdef,p=xyz"));
        id.on_authenticate_response(&response(58), 2);
        assert_eq!(id.principal(), "User:frank");
        // A re-authentication the broker accepts keeps frank.
        step(handshake("SCRAM-SHA-512"));
        step(authenticate(b"n,,n=frank,r=abc"));
        id.on_authenticate_response(&response(0), 2);
        step(authenticate(b"c=biws,r=abcdef,p=xyz"));
        id.on_authenticate_response(&response(0), 2);
        assert_eq!(id.principal(), "User:frank");
        // Even an accepted one naming another user (our reading differs from the broker's)
        // does not change it.
        step(handshake("PLAIN"));
        step(authenticate(b"\0admin\0pw"));
        id.on_authenticate_response(&response(0), 2);
        assert_eq!(id.principal(), "User:frank");
    }

    #[test]
    fn users_from_first_sasl_messages() {
        assert_eq!(claimed_user("PLAIN", b"\0alice\0pw").as_deref(), Some("alice"));
        assert_eq!(claimed_user("PLAIN", b"alice\0alice\0pw").as_deref(), Some("alice"));
        assert_eq!(claimed_user("PLAIN", b"garbage"), None);
        assert_eq!(claimed_user("SCRAM-SHA-512", b"n,,n=al=2Cice,r=abc").as_deref(), Some("al,ice"));
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"sub":"svc-1","exp":1}"#);
        let msg = format!("n,,\u{1}auth=Bearer eyJhbGciOiJub25lIn0.{payload}.sig\u{1}\u{1}");
        assert_eq!(claimed_user("OAUTHBEARER", msg.as_bytes()).as_deref(), Some("svc-1"));
        // Kafka accepts the scheme in any case and any number of spaces after it.
        let msg = format!("n,,\u{1}auth=bEaReR   eyJhbGciOiJub25lIn0.{payload}.sig\u{1}\u{1}");
        assert_eq!(claimed_user("OAUTHBEARER", msg.as_bytes()).as_deref(), Some("svc-1"));
        let msg = format!("n,,\u{1}auth=Basic eyJhbGciOiJub25lIn0.{payload}.sig\u{1}\u{1}");
        assert_eq!(claimed_user("OAUTHBEARER", msg.as_bytes()), None);
        assert_eq!(claimed_user("GSSAPI", b"x"), None);
    }

    /// A frame of `msg` after a request header v2 (SaslHandshake/SaslAuthenticate v1) or a
    /// response header v0.
    fn frame<T: kafka_protocol::protocol::Encodable>(msg: &T, request: Option<i16>) -> Bytes {
        use kafka_protocol::protocol::Encodable as _;
        let mut b = bytes::BytesMut::new();
        match request {
            Some(key) => kafka_protocol::messages::RequestHeader::default()
                .with_request_api_key(key)
                .with_request_api_version(1)
                .encode(&mut b, 1)
                .unwrap(),
            None => kafka_protocol::messages::ResponseHeader::default().encode(&mut b, 0).unwrap(),
        }
        msg.encode(&mut b, 1).unwrap();
        b.freeze()
    }

    /// A token the broker refuses is answered with error 0 and a JSON error challenge
    /// (Kafka's `OAuthBearerSaslServer`); its `sub` must not become the principal, or a
    /// client could send a mirror RPC in place of the `\x01` and be taken for `sub`.
    #[test]
    fn an_oauthbearer_error_challenge_does_not_authenticate() {
        use kafka_protocol::messages::SaslAuthenticateResponse as Resp;
        let id = ClientIdentity::new("127.0.0.1:1".parse().unwrap(), None);
        let prefix = |key: i16| RequestPrefix { api_key: key, api_version: 1, correlation_id: 1 };
        let hs = SaslHandshakeRequest::default().with_mechanism("OAUTHBEARER".into());
        id.on_request(&prefix(17), &frame(&hs, Some(17)));
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"sub":"admin","exp":1}"#);
        let first = format!("n,,\u{1}auth=Bearer eyJhbGciOiJub25lIn0.{payload}.forged\u{1}\u{1}");
        let auth = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(first));
        id.on_request(&prefix(36), &frame(&auth, Some(36)));
        let challenge = Resp::default().with_auth_bytes(Bytes::from_static(br#"{"status":"invalid_token"}"#));
        id.on_authenticate_response(&frame(&challenge, None), 1);
        assert_eq!(id.principal(), ANONYMOUS);
        // The same token accepted (empty server answer) is trusted.
        id.on_request(&prefix(17), &frame(&hs, Some(17)));
        id.on_request(&prefix(36), &frame(&auth, Some(36)));
        id.on_authenticate_response(&frame(&Resp::default(), None), 1);
        assert_eq!(id.principal(), "User:admin");
    }
}
