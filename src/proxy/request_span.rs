//! The span of one proxied request (OTLP traces): what the client asked (api key, version,
//! client id, correlation id), on which listener, to which destination broker, the bytes each
//! way, the broker's latency and the response's top-level error code. Made only while traces
//! are on ([`crate::telemetry::traces::enabled`]); recorded once the response has gone to the
//! client, as a `SERVER` span with one `CLIENT` child for the wait on the broker. Never reads
//! a request body (a SaslAuthenticate body holds credentials) beyond the header.

use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::trace::SpanKind;

use crate::telemetry::traces::{error_type, Attr, Timed};
use crate::wire::mirror::MirrorApiTable;
use crate::wire::request::{ParsedRequest, RequestHeader};

/// A request on its way, while traces are on.
#[derive(Debug)]
pub struct RequestSpan {
    timed: Timed,
    client_id: Option<String>,
    request_bytes: usize,
    upstream: Option<Arc<str>>,
    forwarded: Option<Timed>,
}

impl RequestSpan {
    /// Starts the span of `request` (its parsed header and size only) when traces are on.
    #[inline]
    pub fn start(request: &ParsedRequest) -> Option<Box<Self>> {
        let timed = Timed::start()?;
        let client_id = request.client_id().map(str::to_string);
        Some(Box::new(Self { timed, client_id, request_bytes: request.frame().len(), upstream: None, forwarded: None }))
    }

    /// The request is being written to destination broker `upstream` (`host:port`).
    pub fn forwarded(&mut self, upstream: Option<Arc<str>>) {
        self.upstream = upstream;
        self.forwarded = Timed::start();
    }

    /// Records the span: the broker answered at `answered`, with the top-level `error_code`
    /// of its response when the API has one; `response_bytes` went to the client.
    pub fn finish(
        self,
        request: &RequestHeader,
        listener: &str,
        mirror_apis: Option<&MirrorApiTable>,
        error_code: Option<i16>,
        answered: SystemTime,
        response_bytes: usize,
    ) {
        let RequestHeader { api_key, api_version, correlation_id, .. } = *request;
        let failed = error_code.filter(|c| *c != 0);
        // A request without an error that the ratio drops costs a trace id and no more.
        let trace_id = match failed {
            Some(_) => None,
            None => match crate::telemetry::traces::sample_root() {
                Some(id) => Some(id),
                None => return,
            },
        };
        let name = api_name(api_key, mirror_apis);
        let mut attrs = vec![
            Attr::new("kafka.api_key", i64::from(api_key)),
            Attr::new("kafka.api_name", name),
            Attr::new("kafka.api_version", i64::from(api_version)),
            Attr::new("kafka.correlation_id", i64::from(correlation_id)),
            Attr::new("mirrorgate.listener", listener.to_string()),
            Attr::new("kafka.request.bytes", self.request_bytes as i64),
            Attr::new("kafka.response.bytes", response_bytes as i64),
        ];
        if let Some(c) = self.client_id {
            attrs.push(Attr::new("kafka.client_id", c));
        }
        if let Some(u) = &self.upstream {
            attrs.push(Attr::new("server.address", u.to_string()));
        }
        if let Some(f) = &self.forwarded {
            let ms = answered.duration_since(f.start_time()).map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0);
            attrs.push(Attr::new("mirrorgate.upstream_latency_ms", ms));
        }
        if let Some(c) = error_code {
            attrs.push(Attr::new("kafka.error_code", i64::from(c)));
        }
        let cx = match trace_id {
            Some(id) => self.timed.finish_root(id, name, SpanKind::Server, attrs),
            None => self.timed.finish(name, SpanKind::Server, attrs, failed.map(error_type), None),
        };
        if let Some(f) = self.forwarded {
            let mut attrs = vec![Attr::new("kafka.api_name", name)];
            if let Some(u) = self.upstream {
                attrs.push(Attr::new("server.address", u.to_string()));
            }
            f.finish_at("upstream", SpanKind::Client, attrs, None, Some(&cx), answered);
        }
    }
}

/// Kafka's name of an api key (`Produce`, `Fetch`, ...), the KIP-1279 name of a mirror RPC,
/// or `Unknown` for a key neither knows.
pub fn api_name(api_key: i16, mirror_apis: Option<&MirrorApiTable>) -> &'static str {
    if let Some(api) = mirror_apis.and_then(|t| t.lookup(api_key)) {
        return api.name();
    }
    api_key_name(api_key)
}

/// Kafka's name of a standard api key (the enum's `Debug`), from a table built once.
fn api_key_name(api_key: i16) -> &'static str {
    use kafka_protocol::messages::ApiKey;
    static NAMES: std::sync::OnceLock<Vec<Option<&'static str>>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        (0..256i16).map(|k| ApiKey::try_from(k).ok().map(|a| &*Box::leak(format!("{a:?}").into_boxed_str()))).collect()
    });
    usize::try_from(api_key).ok().and_then(|i| names.get(i).copied().flatten()).unwrap_or("Unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_names_are_kafka_and_kip_names() {
        let table = MirrorApiTable::default();
        assert_eq!(api_name(0, Some(&table)), "Produce");
        assert_eq!(api_name(18, None), "ApiVersions");
        assert_eq!(api_name(94, Some(&table)), "CreateClusterMirror");
        assert_eq!(api_name(94, None), "Unknown");
    }
}
