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

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use crate::client::stream::BrokerStream;

use crate::client::SecurityProtocol;
use crate::config::Listener;
use crate::wire::frame::{FrameDecoder, LENGTH_PREFIX_BYTES};
use crate::wire::header;
use crate::wire::request::{ParsedRequest, RequestHeader};

use super::frame_io::{read_more, write_frame};
use super::identity::{ClientIdentity, SaslAnswer};
use super::limits::{Expired, FrameCharge, ReadClock, SMALL_FRAME_BYTES};
use super::write_deadline::StallLimit;

/// Api keys SaslHandshake (17) and SaslAuthenticate (36): watched for the client's principal.
const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;
/// Api key Fetch (1): large responses are forwarded while they arrive.
const FETCH: i16 = 1;
/// The request side's close reason when the response side has ended (its channel closed).
const RESPONSE_PATH_CLOSED: &str = "response path closed";

use super::fetch_pass::FetchContext;
use super::fetch_stream::{FetchStream, DENIAL_TTL, FETCH_SPLICED_BYTES, FETCH_STREAMED, SHORT_READ_BYTES};
use super::halves::{split_any, split_tcp, Reader, Writer};
use super::mirror_gate::GateDecision;
use super::open_count::OpenCount;
use super::request_metrics::ConnectionMetrics;
use super::request_span::RequestSpan;
use super::rewrite::AddressMap;
use super::route::{self, Decision, ResponseAction};
use super::splice;
use super::{intercept, Shared};

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
            responses(client_w, rx, outstanding, &identity, &listener, &shared, &metrics).await
        }))
    };
    let requests = requests(client_r, target, tx, clock, &identity, &shared, listener.admin, &metrics);
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

/// Client → upstream. Returns the close reason.
///
/// Reads are bounded by the resource limits of `limits.rs`: a request larger than
/// [`SMALL_FRAME_BYTES`] is charged to the global request memory as its bytes arrive, a
/// partial frame must complete within `client_frame_timeout_ms`, and a connection with nothing
/// to read and no response due is closed after `connections_max_idle_ms`. Before SASL
/// authentication on a SASL destination, a frame larger than `sasl_server_max_receive_size`
/// closes the connection.
// The connection's parts, each used on its own; a struct for them would only be unpacked here.
#[allow(clippy::too_many_arguments)]
async fn requests<R>(
    mut client_r: R,
    target: Target,
    tx: mpsc::Sender<Pending>,
    mut clock: ReadClock,
    identity: &Arc<ClientIdentity>,
    shared: &Shared,
    admin: bool,
    metrics: &ConnectionMetrics,
) -> String
where
    R: AsyncRead + Unpin,
{
    let decoder = FrameDecoder::new(shared.settings.max_frame_bytes);
    let mut buf = BytesMut::with_capacity(8192);
    let mut upstream: Option<BufWriter<Writer>> = None;
    // The request memory charged for the (large) frame at the front of `buf`.
    let mut charge = FrameCharge::default();
    // The broker's cap on frames before SASL authentication (`sasl.server.max.receive.size`).
    let pre_auth_cap = matches!(
        shared.settings.destination_security.protocol,
        SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
    )
    .then_some(shared.settings.sasl_server_max_receive_size);
    // The destination broker's address, for request spans.
    let mut upstream_addr: Option<Arc<str>> = None;
    let outstanding = clock.outstanding.clone();
    let due = || outstanding.fetch_add(1, Ordering::AcqRel);
    // Registered once with the shutdown token, not once per read (its waiter list is shared by
    // every connection on every network thread).
    let draining = shared.drain.cancelled();
    tokio::pin!(draining);
    // The read deadline's timer, armed once and moved only when it fires or a deadline comes
    // earlier (a partial frame's): a read moves the idle deadline later, which `clock.expired()`
    // finds when the timer fires, so reads do not register a timer each.
    let timer = tokio::time::sleep_until(clock.deadline());
    tokio::pin!(timer);
    loop {
        loop {
            let frame = match decoder.decode(&mut buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) if looks_like_tls(&buf) => {
                    return format!("TLS handshake on a plaintext port ({e}); use a TLS listener or a plaintext client")
                }
                Err(e) => return format!("bad frame from client: {e}"),
            };
            clock.frame_done();
            let read = Instant::now();
            metrics.received.increment(frame.len() as u64 + 4);
            // Released when this frame has been handled (forwarded or answered).
            let _charge = std::mem::take(&mut charge);
            if let Err(reason) = identity.frame_allowed(frame.len(), pre_auth_cap) {
                return reason;
            }
            let request = match ParsedRequest::parse_with(frame, |k, v| request_header_version(shared, k, v)) {
                Ok(r) => r,
                Err(e) => return format!("bad request from client: {e}"),
            };
            let prefix = *request.header();
            shared.api_names.request(prefix.api_key, prefix.api_version);
            if prefix.api_key == SASL_HANDSHAKE || prefix.api_key == SASL_AUTHENTICATE {
                if let Err(reason) = identity.on_request(&request) {
                    return reason;
                }
            }
            // An ended SASL session (KIP-368, or an OAUTHBEARER token that expired before its
            // exchange ended): the broker closes the connection at its next request other than
            // a re-authentication (`SocketServer`: SaslHandshake begins one, its SaslAuthenticate
            // requests go to the authenticator; `identity` allows them only in that order), and
            // so does mirrorgate, before the mirror gate acts on it.
            let sasl = prefix.api_key == SASL_HANDSHAKE || prefix.api_key == SASL_AUTHENTICATE;
            if !sasl && identity.sasl_authenticated() && identity.session_expired() {
                return format!(
                    "the client's SASL session expired without a re-authentication (connections.max.reauth.ms on the destination, or the credential's expiry); api key {} not answered",
                    prefix.api_key
                );
            }
            let mut span = RequestSpan::start(&request);
            let decision = match &shared.gate {
                None => GateDecision::Pass,
                Some(gate) if gate.runs_on_main(prefix.api_key) => {
                    let (gate, request, identity) = (gate.clone(), request.clone(), identity.clone());
                    let handled = shared.main.spawn(async move { gate.intercept(&request, admin, &identity).await });
                    match handled.await {
                        Ok(Ok(d)) => d,
                        Ok(Err(reason)) => return reason,
                        Err(e) => return format!("api key {} not answered: {e}", prefix.api_key),
                    }
                }
                Some(gate) => match gate.intercept(&request, admin, identity).await {
                    Ok(d) => d,
                    Err(reason) => return reason,
                },
            };
            let decision = match decision {
                GateDecision::Pass => route::decide(&request, |k| shared.directory.supports_api(k)),
                GateDecision::Drop => continue,
                GateDecision::Local(response) => {
                    due();
                    if tx.send(Pending::Local { frame: response, api_key: prefix.api_key, read }).await.is_err() {
                        return RESPONSE_PATH_CLOSED.into();
                    }
                    continue;
                }
                GateDecision::ForwardProduce { frame, expect_response, rejected } => {
                    Decision::Upstream { frame, expect_response, action: ResponseAction::ProduceMerge(rejected) }
                }
                GateDecision::ForwardMerge { frame, merge } => {
                    match route::decide(&request.with_frame(frame), |k| shared.directory.supports_api(k)) {
                        Decision::Upstream { frame, expect_response, action } => Decision::Upstream {
                            frame,
                            expect_response,
                            action: ResponseAction::Merged(Box::new(action), merge),
                        },
                        close => close,
                    }
                }
            };
            // Source offsets for shifted mirror partitions (a pointer load when there are none).
            let decision = match (decision, &shared.gate) {
                (Decision::Upstream { frame, expect_response, action }, Some(gate)) => {
                    match super::present::request(gate, &request, frame, action) {
                        Ok((frame, action)) => Decision::Upstream { frame, expect_response, action },
                        Err(reason) => return reason,
                    }
                }
                (decision, _) => decision,
            };
            match decision {
                Decision::Close(reason) => return reason,
                Decision::Upstream { frame, expect_response, action } => {
                    if upstream.is_none() {
                        match connect_upstream(target, shared).await {
                            Ok((stream, addr)) => {
                                tracing::debug!(?target, upstream = %addr, "upstream connection opened");
                                if span.is_some() {
                                    upstream_addr = Some(Arc::from(addr.as_str()));
                                }
                                let (up_r, up_w) = match stream {
                                    BrokerStream::Plain(s) => split_tcp(s),
                                    BrokerStream::Tls(s) => split_any(*s),
                                };
                                if tx.send(Pending::Opened(up_r)).await.is_err() {
                                    return RESPONSE_PATH_CLOSED.into();
                                }
                                upstream = Some(BufWriter::with_capacity(64 * 1024, up_w));
                            }
                            Err(reason) => match action {
                                ResponseAction::ApiVersions { fallback } => {
                                    tracing::warn!(?target, %reason, "destination unreachable; ApiVersions answered from the ranges it advertised at startup");
                                    let response = match intercept::local_api_versions(
                                        prefix.correlation_id,
                                        if fallback { 0 } else { prefix.api_version },
                                        fallback,
                                        &shared.directory,
                                        &shared.extra_apis,
                                    ) {
                                        Ok(r) => r,
                                        Err(e) => return e,
                                    };
                                    due();
                                    if tx.send(Pending::Local { frame: response, api_key: prefix.api_key, read }).await.is_err() {
                                        return RESPONSE_PATH_CLOSED.into();
                                    }
                                    continue;
                                }
                                _ => {
                                    return format!(
                                        "destination broker unreachable, cannot forward api key {} (correlation id {}): {reason}",
                                        prefix.api_key, prefix.correlation_id
                                    )
                                }
                            },
                        }
                    }
                    let Some(up_w) = upstream.as_mut() else { return "no upstream connection".into() };
                    if expect_response {
                        if let Some(s) = span.as_mut() {
                            s.forwarded(upstream_addr.clone());
                        }
                        let pending = Pending::Upstream { request: prefix, action, read, span };
                        due();
                        if tx.send(pending).await.is_err() {
                            return RESPONSE_PATH_CLOSED.into();
                        }
                    }
                    if let Err(e) = write_frame(up_w, &frame).await {
                        return format!("write to destination broker failed: {e}");
                    }
                }
            }
        }
        if let Some(up_w) = upstream.as_mut() {
            if let Err(e) = up_w.flush().await {
                return format!("write to destination broker failed: {e}");
            }
        }
        // A large request is charged to the request memory as its bytes arrive: the next step
        // before each read, and no more is read than is charged.
        let (mut granted, mut budget) = (false, None);
        if let Ok(Some(length)) = decoder.peek_length(&buf) {
            if let Err(reason) = identity.frame_allowed(length, pre_auth_cap) {
                return reason;
            }
            if length > SMALL_FRAME_BYTES {
                let arrived = buf.len() - LENGTH_PREFIX_BYTES;
                granted = shared.request_memory.charge(&mut charge, arrived, length, &identity.peer).await;
                budget = Some(charge.covered() - arrived);
            }
        }
        clock.waiting(!buf.is_empty(), granted);
        let read = loop {
            let deadline = clock.deadline();
            if deadline < timer.deadline() {
                timer.as_mut().reset(deadline);
            }
            // In this order: a shutdown first; bytes already there win over a deadline that
            // passed while this thread was busy elsewhere.
            tokio::select! {
                biased;
                // Shutting down: no new request is read (a partial one was never forwarded;
                // the client sends it again on another connection).
                _ = &mut draining => return "mirrorgate is shutting down".into(),
                r = read_more(&mut client_r, &mut buf, &decoder, budget) => break r,
                () = &mut timer => match clock.expired() {
                    Expired::No => timer.as_mut().reset(clock.deadline()),
                    Expired::Close(reason) => return reason,
                },
            }
        };
        clock.read();
        match read {
            Ok(0) => {
                return match decoder.check_eof(&buf) {
                    Ok(()) => "client closed the connection".into(),
                    Err(e) => format!("bad frame from client: {e}"),
                }
            }
            Ok(_) => {}
            Err(e) => return format!("read from client failed: {e}"),
        }
    }
}

/// Upstream → client, in request order. Returns the close reason.
async fn responses(
    client_w: Writer,
    mut rx: mpsc::Receiver<Pending>,
    outstanding: Arc<AtomicUsize>,
    identity: &ClientIdentity,
    listener: &Listener,
    shared: &Shared,
    metrics: &ConnectionMetrics,
) -> String {
    let mut up_r: Option<Reader> = None;
    let decoder = FrameDecoder::new(shared.settings.max_frame_bytes);
    let mut buf = BytesMut::with_capacity(8192);
    let write_timeout = shared.settings.client_write_timeout;
    let mut client_w = BufWriter::with_capacity(64 * 1024, StallLimit::new(client_w, write_timeout));
    let map = ListenerMap { listener };
    loop {
        let Some(pending) = rx.recv().await else {
            return "request path closed".into();
        };
        let (request, action, read, span) = match pending {
            Pending::Local { frame, api_key, read } => {
                if let Err(e) = write_frame(&mut client_w, &frame).await {
                    return format!("write to client failed: {e}");
                }
                metrics.sent.increment(frame.len() as u64 + 4);
                shared.api_names.responded(api_key, read);
                outstanding.fetch_sub(1, Ordering::AcqRel);
                if rx.is_empty() {
                    if let Err(e) = client_w.flush().await {
                        return format!("write to client failed: {e}");
                    }
                }
                continue;
            }
            Pending::Opened(r) => {
                up_r = Some(r);
                continue;
            }
            Pending::Upstream { request, action, read, span } => (request, action, read, span),
        };
        let RequestHeader { api_key, api_version, correlation_id, .. } = request;
        let Some(up_r) = up_r.as_mut() else {
            return "response due from a destination broker that was never connected".into();
        };
        // A large Fetch response goes to the client while it arrives (fetch_stream).
        let min_bytes = shared.settings.fetch_stream_min_bytes;
        let mut stream: Option<FetchStream<'_>> = None;
        // Its batches spliced (plain TCP both sides, Linux): the pipe, made on the first
        // splice.
        let mut zero_copy = splice::enabled()
            && shared.settings.fetch_stream_zero_copy
            && up_r.tcp().is_some()
            && client_w.get_ref().get_ref().tcp().is_some();
        let mut pipe = splice::Pipe::default();
        let mut stream_decided = !(api_key == FETCH && matches!(action, ResponseAction::Fetch) && min_bytes > 0);
        let frame = loop {
            if !stream_decided {
                if let Ok(Some(len)) = decoder.peek_length(&buf) {
                    stream_decided = true;
                    // Large enough, not already whole (read with the previous response), and
                    // this client's address not held back; the mirror state read only then.
                    if len >= min_bytes
                        && buf.len() < LENGTH_PREFIX_BYTES + len
                        && !shared.fetch_stream_denials.denied(identity.host)
                    {
                        let ctx = shared.gate.as_deref().map(FetchContext::of);
                        stream = FetchStream::start(
                            min_bytes,
                            api_version,
                            fetch_header_version(api_version),
                            correlation_id,
                            len,
                            ctx,
                        )
                        .map(|s| s.splicing(zero_copy));
                    }
                }
            }
            if let Some(s) = stream.as_mut() {
                let ready = s.ready(&buf);
                if !ready.is_empty() {
                    let end = ready.end;
                    if let Err(e) = client_w.write_all(&buf[ready]).await {
                        return format!("write to client failed: {e}");
                    }
                    if let Err(e) = client_w.flush().await {
                        return format!("write to client failed: {e}");
                    }
                    s.wrote(end);
                }
                let n = if zero_copy { s.splice_len(buf.len()) } else { 0 };
                if n >= splice::MIN_SPLICE_BYTES {
                    // Whatever is still buffered for the client goes first.
                    if let Err(e) = client_w.flush().await {
                        return format!("write to client failed: {e}");
                    }
                    let (Some(from), Some(to)) = (up_r.tcp(), client_w.get_ref().get_ref().tcp()) else {
                        return "zero-copy forwarding without TCP sockets".into();
                    };
                    match splice::forward(from, to, &mut pipe, n, write_timeout).await {
                        Ok(()) => {
                            // Zeros in their place: the frame keeps its length and shape for
                            // the final look, which reads batch headers, not these bytes.
                            buf.resize(buf.len() + n, 0);
                            s.spliced(buf.len());
                            metrics::counter!(FETCH_SPLICED_BYTES).increment(n as u64);
                            continue;
                        }
                        // Nothing taken from the broker: this response (and, after a
                        // refusal, every later one) is copied instead.
                        Err(e) if e.taken == 0 => {
                            if e.failure == splice::Failure::Refused {
                                splice::disable(&e.error);
                            } else {
                                tracing::debug!(error = %e, "splice failed before taking a byte; copying this Fetch response");
                            }
                            zero_copy = false;
                            s.set_splicing(false);
                        }
                        Err(e) => {
                            metrics.sent.increment((s.sent() + e.moved) as u64);
                            return format!("zero-copy forwarding of a Fetch response failed: {e}");
                        }
                    }
                }
            }
            match decoder.decode(&mut buf) {
                Ok(Some(f)) => break f,
                Ok(None) => {}
                Err(e) => return format!("bad frame from destination broker: {e}"),
            }
            // While batches are large (or none was seen yet), read only a batch's first bytes:
            // the rest of it can be spliced.
            let short = zero_copy && stream.as_ref().is_some_and(FetchStream::wants_short_reads);
            let read = if short {
                read_more(&mut (&mut *up_r).take(SHORT_READ_BYTES as u64), &mut buf, &decoder, None).await
            } else {
                read_more(up_r, &mut buf, &decoder, None).await
            };
            match read {
                Ok(0) => return "destination broker closed the connection".into(),
                Ok(_) => {}
                Err(e) => return format!("read from destination broker failed: {e}"),
            }
        };
        match header::response_correlation_id(&frame) {
            Ok(id) if id == correlation_id => {}
            Ok(id) => return format!("destination broker answered correlation id {id}, expected {correlation_id}"),
            Err(e) => return format!("bad response from destination broker: {e}"),
        }
        // The broker's word on the client's SASL exchange (`identity`, `sasl_inspect`).
        let close_after = if api_key == SASL_HANDSHAKE || api_key == SASL_AUTHENTICATE {
            match identity.on_response(&request, &frame) {
                SaslAnswer::Forward => None,
                SaslAnswer::ForwardThenClose(reason) => Some(reason),
                SaslAnswer::Close(reason) => return reason,
            }
        } else {
            identity.on_other_response(api_key);
            None
        };
        // When the broker answered and its top-level error code, for the span (read before
        // the response is rewritten).
        let answered = span
            .as_ref()
            .map(|_| (std::time::SystemTime::now(), header::response_error_code(api_key, api_version, &frame)));
        let original = (frame.as_ptr() as usize, frame.len());
        let frame = match intercept::apply(
            action,
            api_key,
            api_version,
            frame,
            &map,
            &shared.directory,
            &shared.extra_apis,
            shared.gate.as_deref(),
        ) {
            Ok(f) => f,
            Err(e) => return format!("cannot rewrite response: {e}"),
        };
        let sent = stream.as_ref().map_or(0, FetchStream::sent);
        let written = if sent == 0 {
            write_frame(&mut client_w, &frame).await
        } else if (frame.as_ptr() as usize, frame.len()) == original {
            // The rest of the broker's bytes, the held-back last byte among them.
            let rest = client_w.write_all(&frame[sent - LENGTH_PREFIX_BYTES..]).await;
            if rest.is_ok() {
                metrics::counter!(FETCH_STREAMED, "outcome" => "whole").increment(1);
            }
            rest
        } else {
            metrics::counter!(FETCH_STREAMED, "outcome" => "closed").increment(1);
            metrics.sent.increment(sent as u64);
            // An edit was due after part of the response went out: the client never gets
            // its last byte, so it never parses it; it fetches again, served whole.
            shared.fetch_stream_denials.deny(identity.host);
            let why =
                stream.as_ref().and_then(FetchStream::stopped).unwrap_or("node_endpoints or a mirror state change");
            tracing::warn!(
                client = %identity.peer,
                correlation_id,
                sent_bytes = sent,
                reason = why,
                "a Fetch response forwarded while it arrived needed an edit after part of it went out; closing the client connection so that the client fetches again (store-and-forward for this client address for {} s)",
                DENIAL_TTL.as_secs()
            );
            return format!(
                "Fetch response {correlation_id} needed an edit after {sent} bytes of it were forwarded ({why})"
            );
        };
        if let Err(e) = written {
            return format!("write to client failed: {e}");
        }
        metrics.sent.increment(frame.len() as u64 + 4);
        shared.api_names.responded(api_key, read);
        if let (Some(span), Some((at, error_code))) = (span, answered) {
            let mirror_apis = shared.gate.as_deref().map(|g| &g.table);
            span.finish(&request, &listener.name, mirror_apis, error_code, at, frame.len());
        }
        outstanding.fetch_sub(1, Ordering::AcqRel);
        // Flush unless the next response is already buffered and due: never hold a response
        // back while waiting on the broker (the next one may be a long-polling Fetch).
        let next_ready = !rx.is_empty() && matches!(decoder.peek_length(&buf), Ok(Some(n)) if buf.len() >= n + 4);
        if !next_ready || close_after.is_some() {
            if let Err(e) = client_w.flush().await {
                return format!("write to client failed: {e}");
            }
        }
        if let Some(reason) = close_after {
            return reason;
        }
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
