//! ACL sync (KIP-1279 §6 "ACLs"): source ACLs selected by the mirror's `acls.include` rules are
//! created on the destination, under the mirror's `acls.sync.mode` ([`AclSyncMode`]).
//!
//! `safe` (the default) is MirrorMaker 2's rule set (KIP-382, `MirrorSourceConnector.
//! syncTopicAcls`: LITERAL topic bindings of replicated topics, ALL as READ, no WRITE), made
//! read-only: only ALLOW bindings with a LITERAL name other than `*` are copied — on topics
//! this mirror mirrors, READ, DESCRIBE and DESCRIBE_CONFIGS; on groups, READ and DESCRIBE —
//! ALL becomes READ, and nothing is ever deleted on the destination. So whoever controls the
//! source's ACLs can grant no CLUSTER, write, create, delete or alter right on the
//! destination, reach no destination topic outside the mirror (no PREFIXED or `*` pattern),
//! nor lift a destination DENY. `full` is the KIP prototype's mirror of every selected binding (CLUSTER, DENY,
//! WRITE included), where destination ACLs the rules cover that the source no longer has are
//! deleted. Destination ACLs no rule covers are never touched in either mode. Skipped cleanly
//! when either cluster has no authorizer (SECURITY_DISABLED).

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
/// Kafka `ResourceType.TOPIC`.
const TOPIC: i8 = 2;
/// Kafka `ResourceType.GROUP`.
const GROUP: i8 = 3;
/// Kafka `AclOperation.ALL`.
const OP_ALL: i8 = 2;
/// Kafka `AclOperation.READ`.
const OP_READ: i8 = 3;
/// Kafka `AclOperation.WRITE`.
#[cfg(test)]
const OP_WRITE: i8 = 4;
/// Kafka `AclOperation.DESCRIBE`.
const OP_DESCRIBE: i8 = 8;
/// Kafka `AclOperation.DESCRIBE_CONFIGS`.
const OP_DESCRIBE_CONFIGS: i8 = 10;
/// Kafka `AclPermissionType.ALLOW`.
const ALLOW: i8 = 3;
/// Kafka `PatternType.LITERAL`.
const LITERAL: i8 = 3;

/// How far the ACL sync follows the source: the mirror config `acls.sync.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclSyncMode {
    /// `safe` (default): MirrorMaker 2's rules, read-only — LITERAL ALLOW bindings on this
    /// mirror's topics (READ, DESCRIBE, DESCRIBE_CONFIGS) and on groups (READ, DESCRIBE),
    /// ALL copied as READ, nothing deleted on the destination.
    Safe,
    /// `full`: every selected binding as the source has it (CLUSTER, DENY, WRITE, ALL
    /// included), and destination bindings the rules cover that the source lacks are deleted.
    Full,
}

impl AclSyncMode {
    /// The mode of a mirror's configs (`acls.sync.mode`, default `safe`).
    ///
    /// # Errors
    /// A value other than `safe` or `full`, as text.
    pub fn of(configs: &std::collections::BTreeMap<String, String>) -> Result<Self, String> {
        match configs::effective(configs, "acls.sync.mode").unwrap_or("safe") {
            "safe" => Ok(Self::Safe),
            "full" => Ok(Self::Full),
            other => Err(format!("acls.sync.mode `{other}` is not safe or full")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Safe => "safe",
            Self::Full => "full",
        }
    }
}

/// What `mode` makes of a selected source binding on the destination (`mirrored`: the topics
/// of this mirror): `None` when it is not copied.
fn destination_binding(mode: AclSyncMode, b: &Binding, mirrored: &BTreeSet<String>) -> Option<Binding> {
    match mode {
        AclSyncMode::Full => Some(b.clone()),
        AclSyncMode::Safe => {
            if b.6 != ALLOW || b.2 != LITERAL || b.1 == "*" {
                return None;
            }
            let operation = if b.5 == OP_ALL { OP_READ } else { b.5 };
            let copied = match b.0 {
                TOPIC => mirrored.contains(&b.1) && matches!(operation, OP_READ | OP_DESCRIBE | OP_DESCRIBE_CONFIGS),
                GROUP => matches!(operation, OP_READ | OP_DESCRIBE),
                _ => false,
            };
            copied.then(|| {
                let mut copy = b.clone();
                copy.5 = operation;
                copy
            })
        }
    }
}

/// One round's changes on the destination.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct AclPlan {
    /// Bindings to create.
    pub create: Vec<Binding>,
    /// Bindings to delete (always empty in [`AclSyncMode::Safe`]).
    pub delete: Vec<Binding>,
    /// Source bindings the rules select that `mode` does not copy.
    pub skipped: usize,
}

/// Plans one round: `src` and `dst` are every ACL of each cluster, `rules` the mirror's
/// `acls.include`, `mirrored` the mirror's topics.
pub fn plan(
    mode: AclSyncMode,
    rules: &[AclRule],
    src: &BTreeSet<Binding>,
    dst: &BTreeSet<Binding>,
    mirrored: &BTreeSet<String>,
) -> AclPlan {
    let covered = |b: &Binding| rules.iter().any(|r| r.matches(b));
    let selected: Vec<&Binding> = src.iter().filter(|b| covered(b)).collect();
    let want: BTreeSet<Binding> = selected.iter().filter_map(|b| destination_binding(mode, b, mirrored)).collect();
    let skipped = selected.iter().filter(|b| destination_binding(mode, b, mirrored).is_none()).count();
    let create = want.iter().filter(|b| !dst.contains(*b)).cloned().collect();
    let delete = match mode {
        AclSyncMode::Safe => Vec::new(),
        AclSyncMode::Full => dst.iter().filter(|b| covered(b) && !want.contains(*b)).cloned().collect(),
    };
    AclPlan { create, delete, skipped }
}

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
/// Bad rules or mode, unreachable clusters or refused changes, as text.
pub(super) async fn sync_acls(
    source: &ClusterClient,
    dest: &ClusterClient,
    def: &MirrorDefinition,
    mirrored: &BTreeSet<String>,
) -> Result<(usize, usize), String> {
    let rules = configs::split_list(configs::effective(&def.configs, "acls.include").unwrap_or("*"))
        .map(AclRule::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let mode = AclSyncMode::of(&def.configs)?;
    let (Some(src), Some(dst)) = (describe(source).await?, describe(dest).await?) else {
        tracing::debug!(mirror = %def.name, "ACL sync skipped: no authorizer on the source or the destination");
        return Ok((0, 0));
    };
    let AclPlan { create, delete, skipped } = plan(mode, &rules, &src, &dst, mirrored);
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
    tracing::debug!(
        mirror = %def.name,
        mode = mode.name(),
        source = src.len(),
        destination = dst.len(),
        rules = rules.len(),
        create = create.len(),
        delete = delete.len(),
        not_copied = skipped,
        "ACL sync round done"
    );
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

    fn set(bindings: &[Binding]) -> BTreeSet<Binding> {
        bindings.iter().cloned().collect()
    }

    /// The source of the issue-32 attack: a CLUSTER ALLOW, a topic WRITE ALLOW, a topic ALL
    /// ALLOW, a topic DENY and a group READ ALLOW; the destination has a DENY of its own.
    fn attack() -> (BTreeSet<Binding>, BTreeSet<Binding>) {
        let src = set(&[
            b(4, "kafka-cluster", OP_ALL, ALLOW, "User:ops"),
            b(TOPIC, "orders", OP_WRITE, ALLOW, "User:writer"),
            b(TOPIC, "orders", OP_ALL, ALLOW, "User:app"),
            b(TOPIC, "orders", OP_READ, 2, "User:banned"),
            b(GROUP, "billing", OP_READ, ALLOW, "User:app"),
        ]);
        let dst = set(&[b(TOPIC, "orders", OP_READ, 2, "User:mallory")]);
        (src, dst)
    }

    fn mirrored() -> BTreeSet<String> {
        ["orders".to_string()].into_iter().collect()
    }

    #[test]
    fn safe_mode_copies_topic_and_group_allows_only_with_all_as_read_and_deletes_nothing() {
        let (src, dst) = attack();
        let p = plan(AclSyncMode::Safe, &[AclRule::parse("*").unwrap()], &src, &dst, &mirrored());
        assert_eq!(
            p.create,
            vec![b(TOPIC, "orders", OP_READ, ALLOW, "User:app"), b(GROUP, "billing", OP_READ, ALLOW, "User:app")]
        );
        assert!(p.delete.is_empty(), "safe mode deleted {:?}", p.delete);
        assert_eq!(p.skipped, 3, "CLUSTER, WRITE and DENY are not copied");
        // Already there: nothing more to create, still nothing deleted.
        let after: BTreeSet<Binding> = dst.iter().cloned().chain(p.create.iter().cloned()).collect();
        assert_eq!(
            plan(AclSyncMode::Safe, &[AclRule::parse("*").unwrap()], &src, &after, &mirrored()),
            AclPlan { skipped: 3, ..AclPlan::default() }
        );
    }

    /// Found by the adversarial review of issue 32: safe mode copied every topic and group
    /// operation but WRITE (CREATE, DELETE, ALTER, ALTER_CONFIGS...), on any pattern, for any
    /// topic name: the source's ACL administrators could grant deleting or reconfiguring
    /// destination topics, or reading destination topics outside the mirror.
    #[test]
    fn safe_mode_copies_read_only_operations_of_literal_mirror_topics_and_groups() {
        let mut src = BTreeSet::new();
        for op in [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] {
            src.insert(b(TOPIC, "orders", op, ALLOW, "User:app"));
            src.insert(b(GROUP, "billing", op, ALLOW, "User:app"));
        }
        src.insert(b(TOPIC, "payroll", OP_READ, ALLOW, "User:eve"));
        src.insert(b(TOPIC, "*", OP_READ, ALLOW, "User:eve"));
        src.insert((TOPIC, "ord".into(), 4, "User:eve".into(), "*".into(), OP_READ, ALLOW));
        src.insert(b(GROUP, "*", OP_READ, ALLOW, "User:eve"));
        let p = plan(AclSyncMode::Safe, &[AclRule::parse("*").unwrap()], &src, &BTreeSet::new(), &mirrored());
        let ops = |t: i8| p.create.iter().filter(|x| x.0 == t).map(|x| (x.1.as_str(), x.5)).collect::<Vec<_>>();
        assert_eq!(ops(TOPIC), vec![("orders", OP_READ), ("orders", OP_DESCRIBE), ("orders", OP_DESCRIBE_CONFIGS)]);
        assert_eq!(ops(GROUP), vec![("billing", OP_READ), ("billing", OP_DESCRIBE)]);
        assert!(p.create.iter().all(|x| x.3 == "User:app" && x.2 == LITERAL), "{:?}", p.create);
        // Full mode is the opt-in that copies them all.
        let p = plan(AclSyncMode::Full, &[AclRule::parse("*").unwrap()], &src, &BTreeSet::new(), &mirrored());
        assert_eq!(p.create.len(), src.len());
    }

    #[test]
    fn full_mode_mirrors_every_selected_binding_and_deletes_uncovered_destination_ones() {
        let (src, dst) = attack();
        let p = plan(AclSyncMode::Full, &[AclRule::parse("*").unwrap()], &src, &dst, &mirrored());
        assert_eq!(p.create, src.iter().cloned().collect::<Vec<_>>());
        assert_eq!(p.delete, dst.iter().cloned().collect::<Vec<_>>());
        assert_eq!(p.skipped, 0);
        // Rules still bound both: a rule for User:ops alone leaves the rest alone.
        let p = plan(AclSyncMode::Full, &[AclRule::parse("*;*;*;*;User:ops").unwrap()], &src, &dst, &mirrored());
        assert_eq!(p.create, vec![b(4, "kafka-cluster", OP_ALL, ALLOW, "User:ops")]);
        assert!(p.delete.is_empty());
    }

    #[test]
    fn the_mode_comes_from_acls_sync_mode_with_safe_as_default() {
        let mut c = std::collections::BTreeMap::new();
        assert_eq!(AclSyncMode::of(&c), Ok(AclSyncMode::Safe));
        c.insert("acls.sync.mode".to_string(), "full".to_string());
        assert_eq!(AclSyncMode::of(&c), Ok(AclSyncMode::Full));
        c.insert("acls.sync.mode".to_string(), "FULL".to_string());
        assert!(AclSyncMode::of(&c).is_err());
    }
}
