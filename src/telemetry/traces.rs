//! OTLP traces: installs an OpenTelemetry tracer provider exporting over gRPC or HTTP/protobuf
//! and offers the few helpers the proxy and the mirror use to emit spans. Spans are built with
//! the OpenTelemetry API directly, behind one flag: while traces are off, [`enabled`] is a
//! relaxed atomic load and no span, attribute or timestamp is ever made. Spans are recorded
//! after the fact ([`Timed::finish`]) with their start time, so the outcome (a Kafka error code)
//! is known when the sampler decides: a span carrying `error.type` is always kept, others are
//! kept by the parent-based trace id ratio. Never puts a secret (SASL credentials, tokens,
//! OTLP headers) in an attribute; callers pass names, ids, sizes and error codes only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::SystemTime;

use opentelemetry::trace::{
    Link, SamplingDecision, SamplingResult, Span as _, SpanBuilder, SpanKind, Status, TraceContextExt, TraceId,
    Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider, ShouldSample};
use opentelemetry_sdk::Resource;

use crate::config::{OtlpProtocol, TracesSettings};

pub use opentelemetry::KeyValue as Attr;

/// The attribute that marks a failed operation (OTel semantic conventions); its presence makes
/// the sampler keep the span whatever the ratio.
pub const ERROR_TYPE: &str = "error.type";

static ENABLED: AtomicBool = AtomicBool::new(false);
static TRACER: OnceLock<SdkTracer> = OnceLock::new();
static SAMPLER: OnceLock<KeepErrors> = OnceLock::new();

/// True once [`install`] has set up an exporter. The only cost of tracing while it is off.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Errors of [`install`].
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    /// The OTLP exporter could not be built (bad endpoint URL, bad header).
    #[error("cannot set up the OTLP trace exporter: {0}")]
    Exporter(String),
}

/// Flushes and stops the exporter when dropped (at shutdown): spans still queued are sent.
pub struct TracesGuard {
    provider: SdkTracerProvider,
}

impl Drop for TracesGuard {
    fn drop(&mut self) {
        ENABLED.store(false, Ordering::Relaxed);
        let _ = self.provider.force_flush();
        let _ = self.provider.shutdown();
    }
}

/// Keeps every span that carries [`ERROR_TYPE`]; others follow the parent's decision, and a
/// root is kept with probability `ratio` (by trace id, so a whole trace is kept or not).
#[derive(Debug, Clone)]
struct KeepErrors(Sampler);

impl ShouldSample for KeepErrors {
    fn should_sample(
        &self,
        parent: Option<&Context>,
        trace_id: TraceId,
        name: &str,
        kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[Link],
    ) -> SamplingResult {
        if attributes.iter().any(|kv| kv.key.as_str() == ERROR_TYPE) {
            return SamplingResult {
                decision: SamplingDecision::RecordAndSample,
                attributes: Vec::new(),
                trace_state: parent.map(|c| c.span().span_context().trace_state().clone()).unwrap_or_default(),
            };
        }
        self.0.should_sample(parent, trace_id, name, kind, attributes, links)
    }
}

/// Installs the global tracer exporting to `settings`; must run inside the tokio runtime
/// (the gRPC channel lives on it). Export happens on the SDK's batch thread: a collector that
/// is down or slow costs dropped spans (queue of 2048), never a stalled request.
///
/// # Errors
/// [`TracesError::Exporter`] when the exporter cannot be built.
pub fn install(settings: &TracesSettings) -> Result<TracesGuard, TracesError> {
    let exporter = match settings.protocol {
        OtlpProtocol::Grpc => {
            let mut headers = http::HeaderMap::new();
            for (k, v) in &settings.headers {
                let name = http::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| TracesError::Exporter(format!("header name `{k}` is not valid")))?;
                // Never echo the value: it may hold a token.
                let value = http::HeaderValue::from_str(v.expose())
                    .map_err(|_| TracesError::Exporter(format!("the value of header `{k}` is not valid")))?;
                headers.insert(name, value);
            }
            let metadata = opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(headers);
            opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(settings.endpoint.clone())
                .with_metadata(metadata)
                .build()
        }
        OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.clone())
            .with_headers(settings.headers.iter().map(|(k, v)| (k.clone(), v.expose().to_string())).collect())
            .build(),
    }
    // The exporter's errors name the endpoint, never a header value.
    .map_err(|e| TracesError::Exporter(e.to_string()))?;
    let resource = Resource::builder_empty()
        .with_service_name(settings.service_name.clone())
        .with_attributes(settings.resource_attributes.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())))
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let sampler = KeepErrors(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(settings.sampling_ratio))));
    let _ = SAMPLER.set(sampler.clone());
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler)
        .with_resource(resource)
        .build();
    let _ = TRACER.set(opentelemetry::trace::TracerProvider::tracer(&provider, "mirrorgate"));
    ENABLED.store(true, Ordering::Relaxed);
    tracing::info!(
        endpoint = %without_userinfo(&settings.endpoint),
        protocol = ?settings.protocol,
        sampling_ratio = settings.sampling_ratio,
        "exporting traces over OTLP"
    );
    Ok(TracesGuard { provider })
}

/// Kafka's name for a non-zero error code, the `error.type` of a failed span: the KIP-1279
/// names for the mirror codes (e.g. `UNKNOWN_CLUSTER_MIRROR`), Kafka's standard names
/// otherwise (e.g. `NOT_LEADER_OR_FOLLOWER`), `ERROR_CODE_n` for codes neither knows.
pub fn error_type(code: i16) -> String {
    use kafka_protocol::error::ResponseError;
    if let Some(m) = crate::wire::mirror::MirrorErrorCode::from_code(code) {
        return m.name().to_string();
    }
    match ResponseError::try_from_code(code) {
        None => "NONE".into(),
        Some(ResponseError::Unknown(c)) => format!("ERROR_CODE_{c}"),
        Some(e) => {
            let camel = e.to_string();
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            out
        }
    }
}

/// Decides, before anything is built, whether a root span without an error is kept: the trace
/// id it must be recorded with ([`Timed::finish_root`]), or `None` when the sampling ratio
/// drops it (then nothing else is spent on it).
pub fn sample_root() -> Option<TraceId> {
    use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
    let sampler = SAMPLER.get()?;
    let trace_id = RandomIdGenerator::default().new_trace_id();
    let d = sampler.should_sample(None, trace_id, "", &SpanKind::Internal, &[], &[]).decision;
    (d == SamplingDecision::RecordAndSample).then_some(trace_id)
}

/// `endpoint` with any `user:password@` replaced, for logs.
fn without_userinfo(endpoint: &str) -> String {
    let Some((scheme, rest)) = endpoint.split_once("://") else { return endpoint.to_string() };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => endpoint.to_string(),
    }
}

/// An operation with child operations: its trace and span ids are chosen when it starts, so
/// that the children, which end first, name it as their parent. Its children are kept when the
/// trace is sampled by ratio (or when they fail themselves); the parent itself is also kept
/// when it fails.
#[derive(Debug)]
pub struct ParentTimed {
    timed: Timed,
    trace_id: TraceId,
    span_id: opentelemetry::trace::SpanId,
    cx: Context,
}

impl ParentTimed {
    /// Starts timing when traces are on.
    pub fn start() -> Option<Self> {
        use opentelemetry::trace::{SpanContext, TraceFlags, TraceState};
        use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
        let timed = Timed::start()?;
        let ids = RandomIdGenerator::default();
        let (trace_id, span_id) = (ids.new_trace_id(), ids.new_span_id());
        let sampled = SAMPLER.get().is_some_and(|s| {
            s.should_sample(None, trace_id, "", &SpanKind::Internal, &[], &[]).decision
                == SamplingDecision::RecordAndSample
        });
        let flags = if sampled { TraceFlags::SAMPLED } else { TraceFlags::default() };
        let cx = Context::new().with_remote_span_context(SpanContext::new(
            trace_id,
            span_id,
            flags,
            false,
            TraceState::default(),
        ));
        Some(Self { timed, trace_id, span_id, cx })
    }

    /// The parent of the children's spans.
    pub fn context(&self) -> &Context {
        &self.cx
    }

    /// Records the parent span (see [`Timed::finish`]).
    pub fn finish(self, name: &'static str, kind: SpanKind, mut attributes: Vec<KeyValue>, error: Option<String>) {
        let Some(tracer) = TRACER.get() else { return };
        if let Some(e) = &error {
            attributes.push(KeyValue::new(ERROR_TYPE, e.clone()));
        }
        let builder = SpanBuilder::from_name(name)
            .with_kind(kind)
            .with_trace_id(self.trace_id)
            .with_span_id(self.span_id)
            .with_start_time(self.timed.start)
            .with_attributes(attributes);
        let mut span = tracer.build_with_context(builder, &Context::new());
        if let Some(e) = error {
            span.set_status(Status::error(e));
        }
        span.end_with_timestamp(SystemTime::now());
    }
}

/// The start of an operation that becomes a span when it ends: `None` (nothing recorded) while
/// traces are off.
#[derive(Debug, Clone, Copy)]
pub struct Timed {
    start: SystemTime,
    started: std::time::Instant,
}

impl Timed {
    /// Starts timing when traces are on.
    #[inline]
    pub fn start() -> Option<Self> {
        enabled().then(|| Self { start: SystemTime::now(), started: std::time::Instant::now() })
    }

    /// Milliseconds since the start.
    pub fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    /// When the operation started.
    pub fn start_time(&self) -> SystemTime {
        self.start
    }

    /// Records the span `name` from the start until now, with `attributes`, as a child of
    /// `parent` (a root when `None`). `error`, when set, becomes `error.type` and an error
    /// status (and the span is kept whatever the sampling ratio). Returns the span's context,
    /// the parent of further spans of the same operation.
    pub fn finish(
        self,
        name: &'static str,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
        error: Option<String>,
        parent: Option<&Context>,
    ) -> Context {
        self.finish_at(name, kind, attributes, error, parent, SystemTime::now())
    }

    /// [`Timed::finish`] for a root span with the trace id [`sample_root`] chose.
    pub fn finish_root(
        self,
        trace_id: TraceId,
        name: &'static str,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> Context {
        let Some(tracer) = TRACER.get() else { return Context::new() };
        let builder = SpanBuilder::from_name(name)
            .with_kind(kind)
            .with_trace_id(trace_id)
            .with_start_time(self.start)
            .with_attributes(attributes);
        let mut span = tracer.build_with_context(builder, &Context::new());
        span.end_with_timestamp(SystemTime::now());
        Context::new().with_span(span)
    }

    /// [`Timed::finish`] ending at `end`.
    pub fn finish_at(
        self,
        name: &'static str,
        kind: SpanKind,
        mut attributes: Vec<KeyValue>,
        error: Option<String>,
        parent: Option<&Context>,
        end: SystemTime,
    ) -> Context {
        let Some(tracer) = TRACER.get() else { return Context::new() };
        if let Some(e) = &error {
            attributes.push(KeyValue::new(ERROR_TYPE, e.clone()));
        }
        let builder =
            SpanBuilder::from_name(name).with_kind(kind).with_start_time(self.start).with_attributes(attributes);
        let root = Context::new();
        let mut span = tracer.build_with_context(builder, parent.unwrap_or(&root));
        if let Some(e) = error {
            span.set_status(Status::error(e));
        }
        span.end_with_timestamp(end);
        Context::new().with_span(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_spans_are_kept_even_when_the_ratio_keeps_nothing() {
        let s = KeepErrors(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(0.0))));
        let id = TraceId::from_bytes([0xff; 16]);
        let kind = SpanKind::Server;
        let plain = s.should_sample(None, id, "Fetch", &kind, &[KeyValue::new("kafka.api_key", 1)], &[]);
        assert_eq!(plain.decision, SamplingDecision::Drop);
        let failed =
            s.should_sample(None, id, "Fetch", &kind, &[KeyValue::new(ERROR_TYPE, "NOT_LEADER_OR_FOLLOWER")], &[]);
        assert_eq!(failed.decision, SamplingDecision::RecordAndSample);
    }

    #[test]
    fn logged_endpoints_hide_credentials() {
        assert_eq!(without_userinfo("http://u:s3cr3t@collector:4318/v1/traces"), "http://***@collector:4318/v1/traces");
        assert_eq!(without_userinfo("http://collector:4317"), "http://collector:4317");
    }

    #[test]
    fn error_types_are_kafka_names() {
        assert_eq!(error_type(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_type(35), "UNSUPPORTED_VERSION");
    }

    #[test]
    fn nothing_is_timed_while_traces_are_off() {
        assert!(!enabled());
        assert!(Timed::start().is_none());
    }
}
