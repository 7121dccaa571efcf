//! The `traces:` section of `proxy.yaml` (OTLP trace export) and its resolution against the
//! standard `OTEL_*` environment variables. Explicit configuration wins over the environment;
//! the environment wins over the built-in defaults. Header values are [`Secret`]s: they are
//! never shown by `Debug`, logged, or put in a span.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{invalid, ConfigError, Secret};

/// `traces.*` as written in `proxy.yaml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TracesConfig {
    /// Export spans over OTLP (default false: no span is built at all).
    #[serde(default)]
    pub enabled: bool,
    /// `grpc` or `http/protobuf`; else `OTEL_EXPORTER_OTLP_PROTOCOL`, else `grpc`.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Collector URL; else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Extra request headers (e.g. `authorization`), merged over `OTEL_EXPORTER_OTLP_HEADERS`.
    #[serde(default)]
    pub headers: BTreeMap<String, Secret>,
    /// Fraction of traces kept, 0.0 to 1.0; else `OTEL_TRACES_SAMPLER_ARG`, else 1.0.
    #[serde(default)]
    pub sampling_ratio: Option<f64>,
    /// `service.name`; else `OTEL_SERVICE_NAME`, else `mirrorgate`.
    #[serde(default)]
    pub service_name: Option<String>,
    /// `key=value,key=value` resource attributes, merged over `OTEL_RESOURCE_ATTRIBUTES`.
    #[serde(default)]
    pub resource_attributes: Option<String>,
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (`grpc`), default port 4317.
    Grpc,
    /// OTLP/HTTP with protobuf bodies (`http/protobuf`), default port 4318, path `/v1/traces`.
    HttpProtobuf,
}

/// Validated trace export settings (present only when `traces.enabled`).
#[derive(Debug, Clone, PartialEq)]
pub struct TracesSettings {
    /// Transport.
    pub protocol: OtlpProtocol,
    /// Full URL the exporter sends to (for HTTP including `/v1/traces`).
    pub endpoint: String,
    /// Request headers, lower-case names; values hidden from `Debug`.
    pub headers: Vec<(String, Secret)>,
    /// Ratio of root traces sampled (parent-based); error spans are always kept.
    pub sampling_ratio: f64,
    /// `service.name` resource attribute.
    pub service_name: String,
    /// Further resource attributes.
    pub resource_attributes: Vec<(String, String)>,
}

impl TracesConfig {
    /// Resolves the section against the process environment; `None` when disabled.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for an unknown protocol, a ratio outside 0..=1, a malformed
    /// header or resource attribute list, or an endpoint that is not an `http://` URL (TLS to
    /// the collector is not supported yet).
    pub fn validate(&self) -> Result<Option<TracesSettings>, ConfigError> {
        self.resolve(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
    }

    /// [`TracesConfig::validate`] with `env` in place of the process environment.
    ///
    /// # Errors
    /// As [`TracesConfig::validate`].
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Result<Option<TracesSettings>, ConfigError> {
        if !self.enabled {
            return Ok(None);
        }
        let protocol = match self
            .protocol
            .clone()
            .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
            .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        {
            None => OtlpProtocol::Grpc,
            Some(p) => match p.trim() {
                "grpc" => OtlpProtocol::Grpc,
                "http/protobuf" => OtlpProtocol::HttpProtobuf,
                other => return Err(invalid("traces.protocol", format!("`{other}` is not `grpc` or `http/protobuf`"))),
            },
        };
        // A signal-specific endpoint is used as is; a base endpoint gets `/v1/traces` (HTTP).
        let (base, full) = match (&self.endpoint, env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
            (Some(e), _) => (Some(e.clone()), None),
            (None, Some(e)) => (None, Some(e)),
            (None, None) => (env("OTEL_EXPORTER_OTLP_ENDPOINT"), None),
        };
        let endpoint = match (full, base, protocol) {
            (Some(e), _, _) => e,
            (None, Some(e), OtlpProtocol::Grpc) => e,
            (None, Some(e), OtlpProtocol::HttpProtobuf) => {
                if e.trim_end_matches('/').ends_with("/v1/traces") {
                    e
                } else {
                    format!("{}/v1/traces", e.trim_end_matches('/'))
                }
            }
            (None, None, OtlpProtocol::Grpc) => "http://localhost:4317".into(),
            (None, None, OtlpProtocol::HttpProtobuf) => "http://localhost:4318/v1/traces".into(),
        };
        if endpoint.starts_with("https://") {
            return Err(invalid(
                "traces.endpoint",
                format!("`{endpoint}`: https is not supported by this build's OTLP exporter (use http:// to a local collector or agent)"),
            ));
        }
        if !endpoint.starts_with("http://") {
            return Err(invalid("traces.endpoint", format!("`{endpoint}` is not an http:// URL")));
        }
        let mut headers: BTreeMap<String, Secret> = BTreeMap::new();
        for var in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
            if let Some(list) = env(var) {
                // Never echo the value: it may hold a token.
                for (k, v) in parse_pairs(&list)
                    .map_err(|_| invalid("traces.headers", format!("{var} is not a `key=value,...` list")))?
                {
                    headers.insert(k.to_ascii_lowercase(), Secret::new(v));
                }
            }
        }
        for (k, v) in &self.headers {
            if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)) {
                return Err(invalid("traces.headers", format!("`{k}` is not an HTTP header name")));
            }
            headers.insert(k.to_ascii_lowercase(), v.clone());
        }
        let sampling_ratio = match self.sampling_ratio {
            Some(r) => r,
            None => match env("OTEL_TRACES_SAMPLER_ARG") {
                Some(a) => a.trim().parse().map_err(|_| {
                    invalid("traces.sampling_ratio", format!("OTEL_TRACES_SAMPLER_ARG `{a}` is not a number"))
                })?,
                None => 1.0,
            },
        };
        if !(0.0..=1.0).contains(&sampling_ratio) {
            return Err(invalid("traces.sampling_ratio", format!("{sampling_ratio} is not between 0 and 1")));
        }
        let mut resource: BTreeMap<String, String> = BTreeMap::new();
        if let Some(list) = env("OTEL_RESOURCE_ATTRIBUTES") {
            for (k, v) in parse_pairs(&list)
                .map_err(|e| invalid("traces.resource_attributes", format!("OTEL_RESOURCE_ATTRIBUTES: {e}")))?
            {
                resource.insert(k, v);
            }
        }
        if let Some(list) = &self.resource_attributes {
            for (k, v) in parse_pairs(list).map_err(|e| invalid("traces.resource_attributes", e))? {
                resource.insert(k, v);
            }
        }
        let service_name = self
            .service_name
            .clone()
            .or_else(|| env("OTEL_SERVICE_NAME"))
            .or_else(|| resource.get("service.name").cloned())
            .unwrap_or_else(|| "mirrorgate".into());
        resource.remove("service.name");
        if service_name.is_empty() {
            return Err(invalid("traces.service_name", "must not be empty"));
        }
        Ok(Some(TracesSettings {
            protocol,
            endpoint,
            headers: headers.into_iter().collect(),
            sampling_ratio,
            service_name,
            resource_attributes: resource.into_iter().collect(),
        }))
    }
}

/// Parses the OTel `key=value,key=value` list (W3C baggage style, values may be
/// percent-encoded). Errors name the malformed entry's key only, never a value.
fn parse_pairs(list: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            return Err("an entry has no `=`".into());
        };
        let k = k.trim();
        if k.is_empty() {
            return Err("an entry has an empty key".into());
        }
        out.push((k.to_string(), percent_decode(v.trim())));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or(""), 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    fn on() -> TracesConfig {
        TracesConfig { enabled: true, ..TracesConfig::default() }
    }

    #[test]
    fn disabled_resolves_to_nothing_whatever_the_environment() {
        let cfg = TracesConfig::default();
        assert_eq!(cfg.resolve(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4317")])).unwrap(), None);
    }

    #[test]
    fn defaults_follow_the_otel_spec() {
        let s = on().resolve(env(&[])).unwrap().unwrap();
        assert_eq!(s.protocol, OtlpProtocol::Grpc);
        assert_eq!(s.endpoint, "http://localhost:4317");
        assert_eq!(s.sampling_ratio, 1.0);
        assert_eq!(s.service_name, "mirrorgate");
        assert!(s.headers.is_empty() && s.resource_attributes.is_empty());
    }

    #[test]
    fn environment_is_used_when_the_file_is_silent() {
        let vars = env(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20abc,x-team=kafka"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ("OTEL_SERVICE_NAME", "gate-a"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,service.name=ignored"),
        ]);
        let s = on().resolve(vars).unwrap().unwrap();
        assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(s.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(
            s.headers,
            vec![("authorization".into(), Secret::new("Bearer abc")), ("x-team".into(), Secret::new("kafka"))]
        );
        assert_eq!(s.sampling_ratio, 0.25);
        assert_eq!(s.service_name, "gate-a");
        assert_eq!(s.resource_attributes, vec![("deployment.environment".into(), "prod".into())]);
    }

    #[test]
    fn explicit_configuration_wins_over_the_environment() {
        let vars = env(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=env,x-env=1"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
            ("OTEL_SERVICE_NAME", "env"),
            ("OTEL_RESOURCE_ATTRIBUTES", "a=env,b=env"),
        ]);
        let cfg = TracesConfig {
            enabled: true,
            protocol: Some("grpc".into()),
            endpoint: Some("http://file:4317".into()),
            headers: [("Authorization".to_string(), Secret::new("file"))].into_iter().collect(),
            sampling_ratio: Some(0.1),
            service_name: Some("file".into()),
            resource_attributes: Some("a=file".into()),
        };
        let s = cfg.resolve(vars).unwrap().unwrap();
        assert_eq!(s.protocol, OtlpProtocol::Grpc);
        assert_eq!(s.endpoint, "http://file:4317");
        assert_eq!(s.headers, vec![("authorization".into(), Secret::new("file")), ("x-env".into(), Secret::new("1"))]);
        assert_eq!(s.sampling_ratio, 0.1);
        assert_eq!(s.service_name, "file");
        assert_eq!(s.resource_attributes, vec![("a".into(), "file".into()), ("b".into(), "env".into())]);
    }

    #[test]
    fn bad_values_are_refused_without_echoing_header_values() {
        let bad = |cfg: TracesConfig, vars| cfg.resolve(vars).unwrap_err().to_string();
        assert!(bad(TracesConfig { protocol: Some("http/json".into()), ..on() }, env(&[])).contains("traces.protocol"));
        assert!(bad(TracesConfig { sampling_ratio: Some(1.5), ..on() }, env(&[])).contains("traces.sampling_ratio"));
        assert!(
            bad(TracesConfig { endpoint: Some("collector:4317".into()), ..on() }, env(&[])).contains("traces.endpoint")
        );
        let e = bad(on(), env(&[("OTEL_EXPORTER_OTLP_HEADERS", "s3cr3t-without-equals")]));
        assert!(e.contains("traces.headers") && !e.contains("s3cr3t"), "{e}");
        let s = on().resolve(env(&[("OTEL_EXPORTER_OTLP_HEADERS", "authorization=s3cr3t")])).unwrap().unwrap();
        assert!(!format!("{s:?}").contains("s3cr3t"));
    }
}
