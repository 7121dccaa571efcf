//! The KIP-1279 mirror RPCs, answered by mirrorgate itself: only on an `admin: true`
//! listener and as the destination's CLUSTER ACLs allow (Describe for List and Describe,
//! Alter for the others); the decoded request goes to [`admin::handle`], one handler per RPC.

use bytes::{Bytes, BytesMut};

use super::{MirrorGate, UNSUPPORTED_VERSION};
use crate::mirror::admin;
use crate::proxy::authz::Operation;
use crate::proxy::identity::ClientIdentity;
use crate::wire::header;
use crate::wire::mirror as mwire;
use crate::wire::request::ParsedRequest;

impl MirrorGate {
    /// Answers one mirror RPC `api`: its response frame (header v1 and body).
    ///
    /// # Errors
    /// A request whose header or body cannot be read, or a response that cannot be encoded
    /// (the connection is closed with the reason).
    pub(super) async fn mirror_admin(
        &self,
        api: mwire::MirrorApi,
        request: &ParsedRequest,
        admin_listener: bool,
        identity: &ClientIdentity,
    ) -> Result<Bytes, String> {
        let prefix = request.header();
        let timed = crate::telemetry::traces::Timed::start();
        let mut body = request.body().map_err(|e| format!("malformed {} request header: {e}", api.name()))?;
        let op = match api {
            mwire::MirrorApi::ListClusterMirrors | mwire::MirrorApi::DescribeClusterMirrors => Operation::Describe,
            _ => Operation::Alter,
        };
        let refusal = if admin_listener { self.allowed(identity, op, true).await.err() } else { None };
        let response = if !admin_listener {
            tracing::warn!(api = api.name(), "mirror admin request refused on a listener without `admin: true`");
            admin::unauthorized(api)
        } else if let Some((code, message)) = refusal {
            admin::error_response(api, code, &message)
        } else {
            match mwire::decode_request(api, prefix.api_version, &mut body) {
                Ok(req) => {
                    let resp = admin::handle(&self.control, req).await;
                    if resp.error_code() != 0 {
                        tracing::info!(api = api.name(), error_code = resp.error_code(), "mirror admin request failed");
                    }
                    resp
                }
                Err(mwire::WireError::UnsupportedVersion { .. }) => {
                    admin::error_response(api, UNSUPPORTED_VERSION, "unsupported version")
                }
                Err(e) => return Err(format!("malformed {} request: {e}", api.name())),
            }
        };
        crate::proxy::request_metrics::error(api.name(), response.error_code());
        if let Some(t) = timed {
            admin_span(t, api, request, admin_listener, response.error_code());
        }
        let mut out = BytesMut::new();
        header::put_response_header(&mut out, prefix.correlation_id, 1);
        mwire::encode_response(&response, 0, &mut out)
            .map_err(|e| format!("cannot encode {} response: {e}", api.name()))?;
        Ok(out.freeze())
    }
}

/// The span of a mirror admin RPC mirrorgate answered itself (`SERVER`, named after the RPC).
fn admin_span(
    timed: crate::telemetry::traces::Timed,
    api: mwire::MirrorApi,
    request: &ParsedRequest,
    admin_listener: bool,
    error_code: i16,
) {
    let prefix = request.header();
    use crate::telemetry::traces::{error_type, Attr};
    let mut attrs = vec![
        Attr::new("kafka.api_key", i64::from(prefix.api_key)),
        Attr::new("kafka.api_name", api.name()),
        Attr::new("kafka.api_version", i64::from(prefix.api_version)),
        Attr::new("kafka.correlation_id", i64::from(prefix.correlation_id)),
        Attr::new("mirrorgate.admin_listener", admin_listener),
        Attr::new("kafka.error_code", i64::from(error_code)),
    ];
    if let Some(c) = request.client_id() {
        attrs.push(Attr::new("kafka.client_id", c.to_string()));
    }
    let error = (error_code != 0).then(|| error_type(error_code));
    timed.finish(api.name(), opentelemetry::trace::SpanKind::Server, attrs, error, None);
}
