//! Authorization of what mirrorgate answers itself (issue 11 item 5, issue 32 items 2 and 7):
//! the mirror RPCs and the CLUSTER_MIRROR (64) config resource.
//!
//! - **Who asks.** Each client connection's principal comes from the SASL exchange the
//!   destination broker accepted through mirrorgate, else from the client's TLS certificate on
//!   a TLS listener ([`super::identity`]). A connection without either is `User:ANONYMOUS`, as on
//!   a broker's PLAINTEXT or SSL listener without a principal builder.
//! - **Authentication first.** When the destination's listener authenticates its clients
//!   (SASL_PLAINTEXT, SASL_SSL, or SSL with a client certificate: [`destination_authenticates`]),
//!   an anonymous connection is refused whatever the ACLs say ([`authenticated_principal`]):
//!   such a broker would never serve it. A SASL exchange mirrorgate cannot name is always
//!   refused.
//! - **What is allowed.** Until brokers know the KIP's ClusterMirror resource, the
//!   destination's ACLs on the CLUSTER resource decide ([`AclView`]), evaluated with the
//!   rules of Kafka's `StandardAuthorizer`: super users (`authorization.super_users`, the destination's `super.users`) may do anything; a
//!   matching DENY wins; otherwise a matching ALLOW allows; ALL implies every operation and
//!   READ, WRITE, DELETE and ALTER imply DESCRIBE; principal `User:*` and host `*` are
//!   wildcards, other hosts are compared as addresses (IPv4-mapped IPv6 as IPv4); LITERAL names
//!   match `kafka-cluster` or `*`, PREFIXED names match a prefix of
//!   it; with no ACL at all on the cluster, `allow.everyone.if.no.acl.found` decides. Changes
//!   need ALTER, reads DESCRIBE. A destination without an authorizer (DescribeAcls answers
//!   SECURITY_DISABLED) allows everything, as Kafka does.
//! - **Refusal.** SASL_AUTHENTICATION_FAILED (58) without authentication,
//!   CLUSTER_AUTHORIZATION_FAILED (31) by the ACLs, each with a message naming the principal
//!   and the operation.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::protocol::StrBytes;

use super::identity::Who;
pub use super::identity::ANONYMOUS;
use crate::client::cluster::ClusterClient;
use crate::client::{ClientSecurity, SecurityProtocol};

/// Kafka error CLUSTER_AUTHORIZATION_FAILED (31).
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
/// Kafka error SASL_AUTHENTICATION_FAILED (58).
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
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
    /// Client host (an IP address as Kafka prints it) or `*`.
    pub host: String,
    /// AclOperation code.
    pub operation: i8,
    /// 2 DENY, 3 ALLOW.
    pub permission: i8,
}

impl ClusterAcl {
    fn applies(&self, principal: &str, host: IpAddr) -> bool {
        let resource = match self.pattern {
            LITERAL => self.name == CLUSTER_NAME || self.name == "*",
            PREFIXED => CLUSTER_NAME.starts_with(self.name.as_str()),
            _ => false,
        };
        resource
            && (self.principal == principal || self.principal == "User:*")
            && (self.host == "*" || self.host.parse::<IpAddr>().is_ok_and(|h| h.to_canonical() == host.to_canonical()))
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
    pub fn authorize(&self, principal: &str, host: IpAddr, op: Operation) -> Result<(), String> {
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

    /// Decides `op` for `principal` connecting from `host`.
    ///
    /// When the destination cannot be asked, the last view read is used; with none ever read,
    /// DESCRIBE is allowed (so `--describe` works while the destination is down) and ALTER is
    /// refused with the reason.
    ///
    /// # Errors
    /// The refusal message.
    pub async fn authorize(&self, principal: &str, host: IpAddr, op: Operation) -> Result<(), String> {
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
        view.authorize(principal, host, op)
            .inspect_err(|m| tracing::warn!(%principal, %host, operation = op.name(), "mirror request refused: {m}"))
    }
}

/// Whether the destination's listener authenticates its clients: SASL_PLAINTEXT, SASL_SSL, or
/// SSL with a client certificate configured (mutual TLS).
pub fn destination_authenticates(security: &ClientSecurity) -> bool {
    match security.protocol {
        SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => true,
        SecurityProtocol::Ssl => security.tls.as_ref().is_some_and(|c| c.client_auth_cert_resolver.has_certs()),
        SecurityProtocol::Plaintext => false,
    }
}

/// The principal mirrorgate authorizes `who` as; `required`: the destination authenticates
/// its clients ([`destination_authenticates`]).
///
/// # Errors
/// The message of a SASL_AUTHENTICATION_FAILED refusal: anonymous while authentication is
/// required, or a SASL principal mirrorgate cannot name.
pub fn authenticated_principal(who: &Who, required: bool) -> Result<String, String> {
    match who {
        Who::Principal(p) => Ok(p.clone()),
        Who::Anonymous if !required => Ok(ANONYMOUS.to_string()),
        Who::Anonymous => Err("this connection has not authenticated: the destination cluster authenticates its clients, so mirrorgate answers mirror requests only for an authenticated principal (authenticate with SASL through mirrorgate, e.g. `--command-config` with `security.protocol=SASL_PLAINTEXT` or `SASL_SSL` and `sasl.*`, or present a client certificate on a TLS listener)".into()),
        Who::Unnamed(why) => Err(format!("mirror requests need a principal mirrorgate can name: {why}")),
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
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let listed: IpAddr = "10.0.0.9".parse().unwrap();
        let any: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(v.authorize("User:alice", local, Operation::Alter).is_ok());
        assert!(v.authorize("User:alice", local, Operation::Describe).is_ok(), "ALTER implies DESCRIBE");
        assert!(v.authorize("User:bob", local, Operation::Describe).is_ok(), "prefixed");
        assert!(v.authorize("User:bob", local, Operation::Alter).is_err());
        assert!(v.authorize("User:carol", local, Operation::Describe).is_ok(), "READ implies DESCRIBE");
        assert!(v.authorize("User:carol", local, Operation::Alter).is_err());
        assert!(v.authorize("User:alice", listed, Operation::Alter).is_err(), "deny wins");
        assert!(v.authorize("User:admin", listed, Operation::Alter).is_ok(), "super user");
        let e = v.authorize(ANONYMOUS, local, Operation::Describe).unwrap_err();
        assert!(e.contains("User:ANONYMOUS") && e.contains("DESCRIBE"), "{e}");
        assert!(AclView::NoAuthorizer.authorize(ANONYMOUS, any, Operation::Alter).is_ok());
        let open = AclView::Acls { cluster: vec![], super_users: vec![], allow_if_none: true };
        assert!(open.authorize(ANONYMOUS, any, Operation::Alter).is_ok());
        let topic_only = view(vec![acl(LITERAL, "other-name", "User:dave", "*", OP_ALL, ALLOW)]);
        assert!(topic_only.authorize("User:dave", any, Operation::Describe).is_err());
    }

    /// Hosts are addresses: a client on a dual-stack socket (`bind_host: "::"`) is seen as
    /// `::ffff:10.0.0.9`, which Kafka (Java's `InetAddress`) reports as `10.0.0.9`.
    #[test]
    fn acl_hosts_compare_as_addresses() {
        let v = view(vec![
            acl(LITERAL, "kafka-cluster", "User:*", "10.0.0.9", OP_ALL, DENY),
            acl(LITERAL, "kafka-cluster", "User:ivan", "::ffff:10.0.0.7", OP_ALL, ALLOW),
            acl(LITERAL, "kafka-cluster", "User:judy", "0:0:0:0:0:0:0:1", OP_ALL, ALLOW),
            acl(LITERAL, "kafka-cluster", "User:ivan", "not-an-address", OP_ALL, DENY),
            acl(LITERAL, "kafka-cluster", "User:alice", "*", OP_ALL, ALLOW),
        ]);
        let mapped: IpAddr = "::ffff:10.0.0.9".parse().unwrap();
        assert!(
            v.authorize("User:alice", mapped, Operation::Alter).is_err(),
            "DENY on 10.0.0.9 holds for ::ffff:10.0.0.9"
        );
        assert!(v.authorize("User:alice", "10.0.0.9".parse().unwrap(), Operation::Alter).is_err());
        assert!(v.authorize("User:ivan", "10.0.0.7".parse().unwrap(), Operation::Alter).is_ok());
        assert!(v.authorize("User:judy", "::1".parse().unwrap(), Operation::Alter).is_ok());
        assert!(v.authorize("User:judy", "127.0.0.1".parse().unwrap(), Operation::Alter).is_err());
    }

    #[test]
    fn anonymous_is_refused_where_the_destination_authenticates() {
        assert_eq!(authenticated_principal(&Who::Anonymous, false).as_deref(), Ok(ANONYMOUS));
        let e = authenticated_principal(&Who::Anonymous, true).unwrap_err();
        assert!(e.contains("not authenticated"), "{e}");
        let p = Who::Principal("User:eve".into());
        assert_eq!(authenticated_principal(&p, true).as_deref(), Ok("User:eve"));
        assert!(authenticated_principal(&Who::Unnamed("why".into()), false).is_err());
        assert!(!destination_authenticates(&ClientSecurity::default()));
        let sasl: std::collections::BTreeMap<String, String> = [
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";"#,
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert!(destination_authenticates(&ClientSecurity::from_properties(&sasl).unwrap()));
    }
}
