//! The HTTP endpoints of `metrics.listen`, served with `hyper` (HTTP/1.x):
//!
//! | Path | Answer |
//! |---|---|
//! | `/metrics` | 200, the Prometheus text format (`metrics-exporter-prometheus`) |
//! | `/health` | 200 `ok` while the process serves (a liveness probe) |
//! | `/ready` | 200 `ready` once every client listener is bound and the mirror state is loaded; 503 with the reason before that (waiting for the destination cluster, loading the state) and from the start of a shutdown, so a load balancer stops sending new connections first (a readiness probe) |
//! | anything else | 404 |

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Mutex;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;

/// Why the process is not ready, `None` once it is.
static NOT_READY: Mutex<Option<&'static str>> = Mutex::new(Some("starting"));

/// Marks the process ready (`None`) or not ready with a reason shown by `/ready`.
pub fn set_not_ready(reason: Option<&'static str>) {
    *NOT_READY.lock().unwrap_or_else(|e| e.into_inner()) = reason;
}

fn not_ready() -> Option<&'static str> {
    *NOT_READY.lock().unwrap_or_else(|e| e.into_inner())
}

fn answer(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
    r
}

fn route(path: &str, metrics: &PrometheusHandle) -> Response<Full<Bytes>> {
    match path {
        "/metrics" => answer(StatusCode::OK, "text/plain; version=0.0.4", metrics.render()),
        "/health" => answer(StatusCode::OK, "text/plain", "ok\n"),
        "/ready" => match not_ready() {
            None => answer(StatusCode::OK, "text/plain", "ready\n"),
            Some(why) => answer(StatusCode::SERVICE_UNAVAILABLE, "text/plain", format!("not ready: {why}\n")),
        },
        _ => answer(StatusCode::NOT_FOUND, "text/plain", "not found: /metrics, /health or /ready\n"),
    }
}

/// Serves the endpoints on `listener` until the process ends; one task per connection.
pub async fn serve(listener: tokio::net::TcpListener, metrics: PrometheusHandle) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "metrics listener: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let r = route(req.uri().path(), &metrics);
                async move { Ok::<_, Infallible>(r) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await {
                tracing::debug!(error = %e, "metrics listener: connection ended with an error");
            }
        });
    }
}

/// Binds `addr` (blocking, at startup).
///
/// # Errors
/// The address cannot be bound.
pub fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(std_listener)
}
