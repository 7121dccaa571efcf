//! ACL sync (KIP-1279 §6 "ACLs"): source ACLs selected by the mirror's `acls.include` rules are
//! created on the destination; destination ACLs the rules cover that the source no longer has
//! are deleted; destination ACLs no rule covers are never touched. Skipped cleanly when either
//! cluster has no authorizer (SECURITY_DISABLED).

use std::collections::BTreeSet;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;
use regex::Regex;

use crate::client::cluster::{ClusterClient, KafkaErrorCode};
use crate::mirror::configs;
use crate::mirror::model::MirrorDefinition;

use super::send;

/// Kafka error SECURITY_DISABLED: the cluster has no authorizer.
const SECURITY_DISABLED: i16 = 54;
/// Filter value ANY for resource type, pattern type, operation and permission type.
const ANY: i8 = 1;

/// One ACL binding: (resource type, resource name, pattern type, principal, host, operation,
/// permission type), Kafka's codes.
pub type Binding = (i8, String, i8, String, String, i8, i8);

fn resource_type(name: &str) -> Option<i8> {
    Some(match name.to_ascii_uppercase().as_str() {
        "TOPIC" => 2,
        "GROUP" => 3,
        "CLUSTER" => 4,
        "TRANSACTIONAL_ID" => 5,
        "DELEGATION_TOKEN" => 6,
        "USER" => 7,
        _ => return None,
    })
}

fn operation(name: &str) -> Option<i8> {
    Some(match name.to_ascii_uppercase().as_str() {
        "ALL" => 2,
        "READ" => 3,
        "WRITE" => 4,
        "CREATE" => 5,
        "DELETE" => 6,
        "ALTER" => 7,
        "DESCRIBE" => 8,
        "CLUSTER_ACTION" => 9,
        "DESCRIBE_CONFIGS" => 10,
        "ALTER_CONFIGS" => 11,
        "IDEMPOTENT_WRITE" => 12,
        "CREATE_TOKENS" => 13,
        "DESCRIBE_TOKENS" => 14,
        _ => return None,
    })
}

/// One `acls.include` rule: `resourceType;resourceName;operation;permissionType;principal`,
/// `*` for any, trailing fields optional, name and principal full-match regexes.
#[derive(Debug)]
pub struct AclRule {
    resource_type: Option<i8>,
    name: Option<Regex>,
    operation: Option<i8>,
    permission: Option<i8>,
    principal: Option<Regex>,
}

impl AclRule {
    /// Parses one rule.
    ///
    /// # Errors
    /// An unknown resource type, operation or permission type, or a bad regex, as text.
    pub fn parse(rule: &str) -> Result<Self, String> {
        let f: Vec<&str> = rule.split(';').map(str::trim).collect();
        let field = |i: usize| f.get(i).copied().filter(|v| !v.is_empty() && *v != "*");
        let regex = |v: &str| Regex::new(&format!("^(?:{v})$")).map_err(|e| format!("`{rule}`: {e}"));
        Ok(Self {
            resource_type: field(0)
                .map(|v| resource_type(v).ok_or(format!("`{rule}`: unknown resource type {v}")))
                .transpose()?,
            name: field(1).map(regex).transpose()?,
            operation: field(2).map(|v| operation(v).ok_or(format!("`{rule}`: unknown operation {v}"))).transpose()?,
            permission: field(3)
                .map(|v| match v.to_ascii_uppercase().as_str() {
                    "DENY" => Ok(2),
                    "ALLOW" => Ok(3),
                    _ => Err(format!("`{rule}`: unknown permission type {v}")),
                })
                .transpose()?,
            principal: field(4).map(regex).transpose()?,
        })
    }

    /// Whether the rule selects `b`.
    pub fn matches(&self, b: &Binding) -> bool {
        self.resource_type.is_none_or(|t| t == b.0)
            && self.name.as_ref().is_none_or(|r| r.is_match(&b.1))
            && self.operation.is_none_or(|o| o == b.5)
            && self.permission.is_none_or(|p| p == b.6)
            && self.principal.as_ref().is_none_or(|r| r.is_match(&b.3))
    }
}

/// Every ACL of the cluster, or `None` when it has no authorizer.
pub(crate) async fn describe(c: &ClusterClient) -> Result<Option<BTreeSet<Binding>>, String> {
    let mut req = DescribeAclsRequest::default();
    req.resource_type_filter = ANY;
    req.resource_name_filter = None;
    req.principal_filter = None;
    req.host_filter = None;
    req.pattern_type_filter = ANY;
    req.operation = ANY;
    req.permission_type = ANY;
    let resp = send(c, None, &req, 3).await.map_err(|e| e.to_string())?;
    match resp.error_code {
        0 => {}
        SECURITY_DISABLED => return Ok(None),
        e => return Err(format!("DescribeAcls: error {}", KafkaErrorCode(e))),
    }
    Ok(Some(
        resp.resources
            .iter()
            .flat_map(|r| {
                r.acls.iter().map(move |a| {
                    (
                        r.resource_type,
                        r.resource_name.to_string(),
                        r.pattern_type,
                        a.principal.to_string(),
                        a.host.to_string(),
                        a.operation,
                        a.permission_type,
                    )
                })
            })
            .collect(),
    ))
}

/// One ACL sync round for `def`: returns `(created, deleted)` counts.
///
/// # Errors
/// Bad rules, unreachable clusters or refused changes, as text.
pub(super) async fn sync_acls(
    source: &ClusterClient,
    dest: &ClusterClient,
    def: &MirrorDefinition,
) -> Result<(usize, usize), String> {
    let rules = configs::split_list(configs::effective(&def.configs, "acls.include").unwrap_or("*"))
        .map(AclRule::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let (Some(src), Some(dst)) = (describe(source).await?, describe(dest).await?) else {
        tracing::debug!(mirror = %def.name, "ACL sync skipped: no authorizer on the source or the destination");
        return Ok((0, 0));
    };
    tracing::debug!(mirror = %def.name, source = src.len(), destination = dst.len(), rules = rules.len(), "ACLs described");
    let covered = |b: &Binding| rules.iter().any(|r| r.matches(b));
    let want: BTreeSet<&Binding> = src.iter().filter(|b| covered(b)).collect();
    let create: Vec<&Binding> = want.iter().filter(|b| !dst.contains(**b)).copied().collect();
    let delete: Vec<&Binding> = dst.iter().filter(|b| covered(b) && !want.contains(b)).collect();
    if !create.is_empty() {
        let mut req = CreateAclsRequest::default();
        req.creations = create
            .iter()
            .map(|b| {
                let mut c = AclCreation::default();
                c.resource_type = b.0;
                c.resource_name = StrBytes::from_string(b.1.clone());
                c.resource_pattern_type = b.2;
                c.principal = StrBytes::from_string(b.3.clone());
                c.host = StrBytes::from_string(b.4.clone());
                c.operation = b.5;
                c.permission_type = b.6;
                c
            })
            .collect();
        let resp = send(dest, None, &req, 3).await.map_err(|e| e.to_string())?;
        if let Some(r) = resp.results.iter().find(|r| r.error_code != 0) {
            return Err(format!(
                "CreateAcls: error {}{}",
                KafkaErrorCode(r.error_code),
                r.error_message.as_ref().map(|m| format!(": {m}")).unwrap_or_default()
            ));
        }
    }
    if !delete.is_empty() {
        let mut req = DeleteAclsRequest::default();
        req.filters = delete
            .iter()
            .map(|b| {
                let mut f = DeleteAclsFilter::default();
                f.resource_type_filter = b.0;
                f.resource_name_filter = Some(StrBytes::from_string(b.1.clone()));
                f.pattern_type_filter = b.2;
                f.principal_filter = Some(StrBytes::from_string(b.3.clone()));
                f.host_filter = Some(StrBytes::from_string(b.4.clone()));
                f.operation = b.5;
                f.permission_type = b.6;
                f
            })
            .collect();
        let resp = send(dest, None, &req, 3).await.map_err(|e| e.to_string())?;
        if let Some(r) = resp.filter_results.iter().find(|r| r.error_code != 0) {
            return Err(format!("DeleteAcls: error {}", KafkaErrorCode(r.error_code)));
        }
    }
    Ok((create.len(), delete.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(t: i8, name: &str, op: i8, perm: i8, principal: &str) -> Binding {
        (t, name.into(), 3, principal.into(), "*".into(), op, perm)
    }

    #[test]
    fn rules_select_by_field_with_wildcards_and_regexes() {
        let topic_orders = AclRule::parse("TOPIC;orders.*").unwrap();
        assert!(topic_orders.matches(&b(2, "orders-eu", 3, 3, "User:a")));
        assert!(!topic_orders.matches(&b(2, "payments", 3, 3, "User:a")));
        assert!(!topic_orders.matches(&b(3, "orders-eu", 3, 3, "User:a")), "GROUP is not TOPIC");
        let all = AclRule::parse("*").unwrap();
        assert!(all.matches(&b(4, "kafka-cluster", 2, 2, "User:x")));
        let alice = AclRule::parse("*;*;*;*;User:app-.*").unwrap();
        assert!(alice.matches(&b(3, "g", 3, 3, "User:app-1")) && !alice.matches(&b(3, "g", 3, 3, "User:bob")));
        let read_allow = AclRule::parse("TOPIC;*;READ;ALLOW").unwrap();
        assert!(read_allow.matches(&b(2, "t", 3, 3, "User:a")) && !read_allow.matches(&b(2, "t", 4, 3, "User:a")));
        assert!(AclRule::parse("QUEUE;x").is_err());
        assert!(AclRule::parse("TOPIC;(bad").is_err());
    }
}
