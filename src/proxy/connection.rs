//! One client connection: frames read from the client are routed and written to one upstream
//! connection to the destination broker this port serves; responses come back in request
//! order (Kafka answers in order per connection), are matched by correlation id, intercepted
//! where needed and written to the client. Requests are pipelined up to a cap; when the cap is
//! reached mirrorgate stops reading from the client (backpressure instead of buffering).
//!
//! The upstream connection is opened lazily, by the first request that must be forwarded, so
//! that what mirrorgate answers itself (the mirror RPCs, mirror configs) works while no
//! destination broker is reachable. While it cannot be opened, ApiVersions is answered
//! locally from the api ranges the destination advertised at startup (so an admin client can
//! proceed to the mirror RPCs), and any other forwarded request closes the client connection
//! at once with a logged reason — what a client sees when a broker is down, and retries.
//!
//! The two directions are pumps in steps of their own: `connection/requests.rs` (read,
//! parse once, gate, route, forward) and `connection/responses.rs` (read the answer, check,
//! rewrite, write).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use crate::client::stream::BrokerStream;
use crate::config::Listener;
use crate::wire::header;
use crate::wire::request::RequestHeader;

use super::halves::{split_any, split_tcp, Reader, Writer};
use super::identity::ClientIdentity;
use super::limits::ReadClock;
use super::open_count::OpenCount;
use super::request_metrics::ConnectionMetrics;
use super::request_span::RequestSpan;
use super::rewrite::AddressMap;
use super::route::ResponseAction;
use super::Shared;

mod requests;
mod responses;

/// Api keys SaslHandshake (17) and SaslAuthenticate (36): watched for the client's principal.
const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;
/// Api key Fetch (1): large responses are forwarded while they arrive.
const FETCH: i16 = 1;
/// The request side's close reason when the response side has ended (its channel closed).
const RESPONSE_PATH_CLOSED: &str = "response path closed";

/// Which destination broker a listener port stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The bootstrap port: any reachable destination broker.
    Bootstrap,
    /// The port of destination broker `node_id`.
    Broker(i32),
}

/// A response still due to the client, in request order.
enum Pending {
    /// The destination broker will answer this request (`read`: when it was read from the
    /// client, for its latency).
    Upstream {
        /// The request's parsed header (no bytes of its frame are kept).
        request: RequestHeader,
        action: ResponseAction,
        read: Instant,
        /// Its span, while traces are on.
        span: Option<Box<RequestSpan>>,
    },
    /// mirrorgate answered a request of `api_key` itself.
    Local { frame: Bytes, api_key: i16, read: Instant },
    /// The upstream connection was opened; its responses follow from here on.
    Opened(Reader),
}

/// Advertised addresses of one listener.
struct ListenerMap<'a> {
    listener: &'a Listener,
}

impl AddressMap for ListenerMap<'_> {
    fn advertised(&self, node_id: i32) -> (StrBytes, i32) {
        let port = self.listener.broker_port(node_id).unwrap_or_else(|| {
            tracing::error!(
                node_id,
                listener = %self.listener.name,
                "destination node id outside the listener's port range; advertising the bootstrap port"
            );
            self.listener.bootstrap_port
        });
        (StrBytes::from_string(self.listener.advertised_host.clone()), i32::from(port))
    }
}

/// Serves one accepted client connection until either side closes; logs open and close. On a
/// TLS listener the TLS handshake comes first (a client that does not start one is closed
/// with a logged reason). The upstream connection is opened by the first request that needs
/// it.
pub async fn serve(client: TcpStream, peer: SocketAddr, listener: Arc<Listener>, target: Target, shared: Arc<Shared>) {
    let local = client.local_addr().map(|a| a.port()).unwrap_or(0);
    let (client_r, client_w, tls_principal) = match &listener.tls {
        None => {
            let (r, w) = split_tcp(client);
            (r, w, None)
        }
        Some(tls) => match accept_tls(client, tls, shared.settings.connect_timeout).await {
            Ok(halves) => halves,
            Err(reason) => {
                super::conn_log::opened();
                if super::conn_log::closed(&reason) {
                    tracing::warn!(%peer, listener = %listener.name, port = local, ?target, %reason, "client connection refused");
                } else {
                    tracing::debug!(%peer, listener = %listener.name, port = local, ?target, %reason, "client connection refused");
                }
                return;
            }
        },
    };
    tracing::debug!(%peer, listener = %listener.name, port = local, ?target, tls = listener.tls.is_some(), "client connection opened");
    super::conn_log::opened();
    let metrics = Arc::new(ConnectionMetrics::open(&listener.name));
    // Counted in `Shared::connections`, which the shutdown's drain waits on.
    let open = OpenCount::hold(&shared.connections);
    let identity = Arc::new(ClientIdentity::new(peer, tls_principal));
    let reason = pump(client_r, client_w, identity, target, listener.clone(), shared.clone(), metrics.clone()).await;
    drop(open);
    drop(metrics);
    if super::conn_log::closed(&reason) {
        tracing::info!(%peer, listener = %listener.name, port = local, ?target, %reason, "client connection closed");
    } else {
        tracing::debug!(%peer, listener = %listener.name, port = local, ?target, %reason, "client connection closed");
    }
}

/// The TLS handshake of a client on a TLS listener, within `timeout`. A first byte that is
/// not a TLS handshake record (0x16) is a plaintext client: refused without a handshake.
async fn accept_tls(
    client: TcpStream,
    tls: &crate::config::ListenerTls,
    timeout: std::time::Duration,
) -> Result<(Reader, Writer, Option<String>), String> {
    let handshake = async {
        let mut first = [0u8; 1];
        match client.peek(&mut first).await {
            Ok(0) => return Err("client closed the connection before the TLS handshake".to_string()),
            Ok(_) if first[0] != 0x16 => {
                return Err("plaintext client on a TLS listener (no TLS handshake); the client needs security.protocol SSL or SASL_SSL and this listener's CA".to_string())
            }
            Ok(_) => {}
            Err(e) => return Err(format!("read from client failed: {e}")),
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
        let stream = acceptor.accept(client).await.map_err(|e| format!("TLS handshake with the client failed: {e}"))?;
        let principal = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|leaf| super::identity::tls_principal(leaf.as_ref()));
        if let Some(p) = &principal {
            tracing::debug!(principal = %p, "client presented a certificate");
        }
        let (r, w) = split_any(stream);
        Ok((r, w, principal))
    };
    tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| format!("TLS handshake with the client timed out after {} ms", timeout.as_millis()))?
}

/// Opens the upstream connection: TCP, then TLS when the destination's security protocol
/// uses it, with the client-upstream identity (`destination.client_upstream`, or no
/// certificate) and never mirrorgate's own certificate. The destination's SASL credentials
/// are NOT used here: clients authenticate themselves (their SaslHandshake/SaslAuthenticate
/// are forwarded).
async fn connect_upstream(target: Target, shared: &Shared) -> Result<(BrokerStream, String), String> {
    let candidates = match target {
        Target::Bootstrap => shared.directory.bootstrap_candidates(),
        Target::Broker(id) => {
            vec![shared.directory.addr(id).ok_or_else(|| format!("destination broker {id} is not known (yet)"))?]
        }
    };
    let mut last = String::from("no destination address");
    let tls = shared.settings.client_upstream.as_ref().and_then(|u| u.security.tls.clone());
    for addr in candidates {
        match tokio::time::timeout(shared.settings.connect_timeout, TcpStream::connect(&addr)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                let stream = match &tls {
                    None => BrokerStream::Plain(s),
                    Some(config) => {
                        match BrokerStream::tls(s, &addr, config.clone(), shared.settings.connect_timeout).await {
                            Ok(t) => t,
                            Err(e) => {
                                last = e.to_string();
                                continue;
                            }
                        }
                    }
                };
                return Ok((stream, addr));
            }
            Ok(Err(e)) => last = format!("{addr}: {e}"),
            Err(_) => last = format!("{addr}: connect timed out"),
        }
    }
    Err(last)
}

/// Runs both directions; returns why the connection ended. The response side is a task of
/// its own on the same network thread (`network_threads`): the request side hands it each
/// response due through a channel, and its wake is a push to that thread's run queue. (On a
/// multi-thread runtime, one task holding both sides woke itself during its own poll with
/// every request; tokio 1.54 requeues such a task as a yield and wakes a parked worker to
/// steal it: docs/performance.md, "Against a bare TCP relay".)
async fn pump(
    client_r: Reader,
    client_w: Writer,
    identity: Arc<ClientIdentity>,
    target: Target,
    listener: Arc<Listener>,
    shared: Arc<Shared>,
    metrics: Arc<ConnectionMetrics>,
) -> String {
    // One slot more than the pipelining cap for the `Opened` message.
    let (tx, rx) = mpsc::channel::<Pending>(shared.settings.max_in_flight_requests + 1);
    let clock = ReadClock::new(shared.settings.read_timeouts);
    let outstanding = clock.outstanding.clone();
    // Aborted when dropped: if this connection's task ends any other way (a panic on the
    // request side), the response side does not live on with the client's write half.
    let mut responses = {
        let (identity, listener, shared, metrics) =
            (identity.clone(), listener.clone(), shared.clone(), metrics.clone());
        AbortOnDropHandle::new(tokio::spawn(async move {
            responses::responses(client_w, rx, outstanding, &identity, &listener, &shared, &metrics).await
        }))
    };
    let requests = requests::requests(client_r, target, tx, clock, &identity, &shared, listener.admin, &metrics);
    tokio::pin!(requests);
    let joined = |r: Result<String, tokio::task::JoinError>| r.unwrap_or_else(|e| format!("response path failed: {e}"));
    tokio::select! {
        r = &mut requests => {
            if shared.drain.is_cancelled() {
                // Shutting down: the responses already due still go out (the request side
                // closed its channel, so the response side ends after the last of them).
                if tokio::time::timeout(super::DRAIN_TIMEOUT, &mut responses).await.is_ok() {
                    return r;
                }
            }
            // The response side goes with the connection: stopped, and awaited, so that its
            // socket half and its handles are dropped before this returns. When the request
            // side only saw the response side gone (its channel closed), the response side's
            // own reason is the connection's.
            responses.abort();
            match responses.await {
                Ok(reason) if r == RESPONSE_PATH_CLOSED => reason,
                _ => r,
            }
        }
        r = &mut responses => joined(r),
    }
}

/// The request header version of `api_key` v`api_version`: v2 for the mirror RPCs (KIP-1279,
/// flexible from v0), kafka-protocol's for the others, `None` for an api key neither knows.
fn request_header_version(shared: &Shared, api_key: i16, api_version: i16) -> Option<i16> {
    if shared.gate.as_ref().is_some_and(|g| g.table.lookup(api_key).is_some()) {
        return Some(2);
    }
    header::request_header_version(api_key, api_version)
}

/// The response header version of Fetch `api_version` (flexible from v12).
fn fetch_header_version(api_version: i16) -> i16 {
    ApiKey::Fetch.response_header_version(api_version)
}

/// A TLS record header for a handshake (`0x16 0x03 0x0[0-4]`) where a Kafka length prefix
/// should be: a TLS client talking to a plaintext port.
fn looks_like_tls(buf: &[u8]) -> bool {
    matches!(buf, [0x16, 0x03, minor, ..] if *minor <= 4)
}
