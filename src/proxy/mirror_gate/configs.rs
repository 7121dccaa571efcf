//! The gate's config handlers: DescribeConfigs and IncrementalAlterConfigs on a
//! CLUSTER_MIRROR resource are answered by mirrorgate (authorized from the destination's
//! CLUSTER ACLs); AlterConfigs and IncrementalAlterConfigs on a read-only mirror topic or the
//! state topic are refused.

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as AlterResult;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncResult;
use kafka_protocol::messages::{
    AlterConfigsResponse, ApiKey, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{bad, decode_body, encode_any, encode_response, s, BodyEncoder, GateDecision, MirrorGate};
use crate::mirror::config_rpc;
use crate::proxy::authz::Operation;
use crate::proxy::identity::ClientIdentity;
use crate::proxy::state_guard::Guarded;
use crate::wire::header;
use crate::wire::request::{ParsedRequest, RequestHeader};
use crate::wire::scan;

impl MirrorGate {
    /// DescribeConfigs: mirror resources answered here; otherwise the state guard's look
    /// (which the gate runs for DescribeConfigs only once its resources are known).
    pub(super) async fn describe_configs(
        &self,
        request: &ParsedRequest,
        admin_listener: bool,
        identity: &ClientIdentity,
    ) -> Result<GateDecision, String> {
        let key = ApiKey::DescribeConfigs;
        let res = scan::describe_configs_resources(request, request.api_version()).map_err(bad(key, request))?;
        if !config_rpc::names_mirror_resource(res.iter().map(|r| r.resource_type)) {
            return Ok(match self.state.check(request, identity.peer)? {
                Guarded::Forward { frame, merge } => GateDecision::ForwardMerge { frame, merge },
                Guarded::Pass => GateDecision::Pass,
            });
        }
        let req: DescribeConfigsRequest = decode_body(key, request)?;
        let resp = match self.allowed(identity, Operation::Describe, admin_listener).await {
            Ok(()) => config_rpc::describe(&self.control, &req),
            Err((code, m)) => config_rpc::refuse_describe(&req, code, &m),
        };
        Ok(GateDecision::Local(encode_response(key, request.header(), &resp)?))
    }

    /// IncrementalAlterConfigs: mirror resources answered here; a mirror topic or the state
    /// topic refused (the whole request when mixed).
    pub(super) async fn incremental_alter_configs(
        &self,
        request: &ParsedRequest,
        admin_listener: bool,
        identity: &ClientIdentity,
    ) -> Result<GateDecision, String> {
        let key = ApiKey::IncrementalAlterConfigs;
        let res =
            scan::incremental_alter_configs_resources(request, request.api_version()).map_err(bad(key, request))?;
        if config_rpc::names_mirror_resource(res.iter().map(|r| r.resource_type)) {
            let req: IncrementalAlterConfigsRequest = decode_body(key, request)?;
            let resp = match self.allowed(identity, Operation::Alter, admin_listener).await {
                Ok(()) => config_rpc::incremental_alter(&self.control, &req).await,
                Err((code, m)) => config_rpc::refuse_alter(&req, code, &m),
            };
            return Ok(GateDecision::Local(encode_response(key, request.header(), &resp)?));
        }
        let names: Vec<(i8, String)> = res.iter().map(|r| (r.resource_type, r.resource_name.to_string())).collect();
        self.refuse_configs(key, request.header(), names, |responses| {
            encode_any(
                IncrementalAlterConfigsResponse::default().with_responses(
                    responses
                        .into_iter()
                        .map(|(t, n, c, m)| {
                            IncResult::default()
                                .with_resource_type(t)
                                .with_resource_name(s(n))
                                .with_error_code(c)
                                .with_error_message(m)
                        })
                        .collect(),
                ),
            )
        })
    }

    /// AlterConfigs: a mirror topic or the state topic refused (the whole request when mixed).
    pub(super) fn alter_configs(&self, request: &ParsedRequest) -> Result<GateDecision, String> {
        let key = ApiKey::AlterConfigs;
        let res = scan::alter_configs_resources(request, request.api_version()).map_err(bad(key, request))?;
        let names: Vec<(i8, String)> = res.iter().map(|r| (r.resource_type, r.resource_name.to_string())).collect();
        self.refuse_configs(key, request.header(), names, |responses| {
            encode_any(
                AlterConfigsResponse::default().with_responses(
                    responses
                        .into_iter()
                        .map(|(t, n, c, m)| {
                            AlterResult::default()
                                .with_resource_type(t)
                                .with_resource_name(s(n))
                                .with_error_code(c)
                                .with_error_message(m)
                        })
                        .collect(),
                ),
            )
        })
    }

    /// The refusal of a config change naming a read-only mirror topic or the state topic, as
    /// a response `build` encodes from `(resource_type, name, code, message)` rows; `Pass`
    /// when it names neither.
    fn refuse_configs(
        &self,
        key: ApiKey,
        prefix: &RequestHeader,
        resources: Vec<(i8, String)>,
        build: impl FnOnce(Vec<(i8, String, i16, Option<StrBytes>)>) -> BodyEncoder,
    ) -> Result<GateDecision, String> {
        const TOPIC: i8 = 2;
        let topics: Vec<String> =
            resources.iter().map(|(t, n)| if *t == TOPIC { n.clone() } else { String::new() }).collect();
        let Some(results) = self.refusals(&topics, "change the configs of") else { return Ok(GateDecision::Pass) };
        let rows = resources.into_iter().zip(results).map(|((t, n), (_, c, m))| (t, n, c, Some(s(m)))).collect();
        let enc = build(rows);
        let mut out = bytes::BytesMut::new();
        let hv = key.response_header_version(prefix.api_version);
        header::put_response_header(&mut out, prefix.correlation_id, hv);
        enc(&mut out, prefix.api_version).map_err(|e| format!("cannot encode {key:?} response: {e}"))?;
        Ok(GateDecision::Local(out.freeze()))
    }
}
