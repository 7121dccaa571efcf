//! DescribeConfigs and IncrementalAlterConfigs on config resource type CLUSTER_MIRROR (64):
//! mirror configs read and changed through Kafka's own config RPCs (KIP-1279 §3.1 "Mirror
//! configs via existing config RPCs"). Secrets come back as null with `is_sensitive` set,
//! as the broker does for sensitive configs.

use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::configs::{self, CLUSTER_MIRROR_RESOURCE_TYPE};
use super::control::{ControlPlane, INVALID_CONFIG};

/// Kafka error INVALID_REQUEST (42).
pub const INVALID_REQUEST: i16 = 42;
/// `config_source` DYNAMIC_TOPIC_CONFIG-like "set on the resource" (1).
const SOURCE_DYNAMIC: i8 = 1;
/// `config_source` DEFAULT_CONFIG (5).
const SOURCE_DEFAULT: i8 = 5;
/// IncrementalAlterConfigs operations (Kafka `AlterConfigOp.OpType`).
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// Whether any resource of the request is a cluster mirror (resource type 64).
pub fn names_mirror_resource(types: impl IntoIterator<Item = i8>) -> bool {
    types.into_iter().any(|t| t == CLUSTER_MIRROR_RESOURCE_TYPE)
}

/// Answers a DescribeConfigs request. Resources that are not cluster mirrors get
/// INVALID_REQUEST (mirrorgate answers mirror resources itself; send broker and topic
/// resources in a separate request).
pub fn describe(cp: &ControlPlane, req: &DescribeConfigsRequest) -> DescribeConfigsResponse {
    let results = req
        .resources
        .iter()
        .map(|r| {
            let mut out = DescribeConfigsResult::default()
                .with_error_message(None)
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            if r.resource_type != CLUSTER_MIRROR_RESOURCE_TYPE {
                return out.with_error_code(INVALID_REQUEST).with_error_message(Some(s(
                    "CLUSTER_MIRROR resources must be described in their own DescribeConfigs request",
                )));
            }
            let def = match cp.mirror(&r.resource_name) {
                Ok(d) => d,
                Err(e) => return out.with_error_code(e.code).with_error_message(Some(s(e.message))),
            };
            // Null (and, leniently, an empty list) asks for every config.
            let wanted = |name: &str| {
                r.configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == name))
            };
            let mut entries = Vec::new();
            // Keys with their effective values (set under an alias counts as set), then the
            // KIP-1279 aliases the operator set, as they were given.
            let aliases = configs::ALIASES
                .iter()
                .filter_map(|(a, _)| def.configs.get(*a).map(|v| (*a, v)))
                .filter_map(|(a, v)| configs::key(a).map(|k| (a, k, v)));
            for (name, key, set) in configs::KEYS
                .iter()
                .map(|k| (k.name, k, configs::set_value(&def.configs, k.name)))
                .chain(aliases.map(|(a, k, v)| (a, k, Some(v.as_str()))))
                .filter(|(n, _, _)| wanted(n))
            {
                let value = match set {
                    Some(v) => configs::displayed(key.name, v),
                    None => key.default.map(String::from),
                };
                entries.push(
                    DescribeConfigsResourceResult::default()
                        .with_name(s(name))
                        .with_value(if key.sensitive { None } else { value.map(s) })
                        .with_read_only(false)
                        .with_config_source(if set.is_some() { SOURCE_DYNAMIC } else { SOURCE_DEFAULT })
                        .with_is_sensitive(key.sensitive)
                        .with_documentation(req.include_documentation.then(|| s(key.doc))),
                );
            }
            out.configs = entries;
            out
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Answers an IncrementalAlterConfigs request on cluster mirrors: SET and DELETE, each
/// validated (unknown key or bad value → INVALID_CONFIG with a message). APPEND and SUBTRACT
/// are refused as INVALID_REQUEST. With `validate_only` nothing is changed.
pub async fn incremental_alter(
    cp: &ControlPlane,
    req: &IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::new();
    for r in &req.resources {
        let base = AlterConfigsResourceResponse::default()
            .with_error_message(None)
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone());
        if r.resource_type != CLUSTER_MIRROR_RESOURCE_TYPE {
            responses.push(base.with_error_code(INVALID_REQUEST).with_error_message(Some(s(
                "CLUSTER_MIRROR resources must be altered in their own IncrementalAlterConfigs request",
            ))));
            continue;
        }
        let mut changes = Vec::new();
        let mut bad = None;
        for c in &r.configs {
            match c.config_operation {
                OP_SET => changes
                    .push((c.name.to_string(), Some(c.value.as_ref().map(|v| v.to_string()).unwrap_or_default()))),
                OP_DELETE => changes.push((c.name.to_string(), None)),
                op => {
                    bad = Some(format!(
                        "operation {op} on `{}` is not supported for mirror configs (use SET or DELETE)",
                        c.name
                    ))
                }
            }
        }
        if let Some(m) = bad {
            responses.push(base.with_error_code(INVALID_REQUEST).with_error_message(Some(s(m))));
            continue;
        }
        let result = if req.validate_only {
            changes
                .iter()
                .try_for_each(|(k, v)| match v {
                    Some(v) => configs::validate(k, v),
                    None => Ok(()),
                })
                .map_err(|e| (INVALID_CONFIG, e.to_string()))
                .and_then(|()| cp.mirror(&r.resource_name).map_err(|e| (e.code, e.message)))
                .and_then(|def| {
                    super::bound_credentials::validate_changes(&def.configs, &changes)
                        .map_err(|e| (INVALID_CONFIG, e.to_string()))
                })
        } else {
            cp.alter_mirror_configs(&r.resource_name, changes).await.map_err(|e| (e.code, e.message))
        };
        responses.push(match result {
            Ok(()) => base,
            Err((code, message)) => base.with_error_code(code).with_error_message(Some(s(message))),
        });
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// A DescribeConfigs answer refusing every resource with `code` and `message` (for example
/// CLUSTER_AUTHORIZATION_FAILED); no config is returned.
pub fn refuse_describe(req: &DescribeConfigsRequest, code: i16, message: &str) -> DescribeConfigsResponse {
    DescribeConfigsResponse::default().with_results(
        req.resources
            .iter()
            .map(|r| {
                DescribeConfigsResult::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name.clone())
                    .with_error_code(code)
                    .with_error_message(Some(s(message)))
            })
            .collect(),
    )
}

/// An IncrementalAlterConfigs answer refusing every resource with `code` and `message`;
/// nothing is changed.
pub fn refuse_alter(req: &IncrementalAlterConfigsRequest, code: i16, message: &str) -> IncrementalAlterConfigsResponse {
    IncrementalAlterConfigsResponse::default().with_responses(
        req.resources
            .iter()
            .map(|r| {
                AlterConfigsResourceResponse::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name.clone())
                    .with_error_code(code)
                    .with_error_message(Some(s(message)))
            })
            .collect(),
    )
}
