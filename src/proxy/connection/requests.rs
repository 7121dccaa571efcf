//! Client → upstream: the request pump of one connection, in steps. [`requests`] reads
//! frames under the limits of `limits.rs`; [`RequestSide::handle`] takes each frame from its
//! bytes to its destination (parsed once, SASL watched, the gate's decision, routing and
//! presentation) and [`RequestSide::forward`] writes it upstream, opening the upstream
//! connection on first use ([`RequestSide::open_upstream`]). Every step returns the close
//! reason as its error.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio::time::Sleep;

use super::{
    connect_upstream, looks_like_tls, request_header_version, Pending, Target, RESPONSE_PATH_CLOSED, SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
};
use crate::client::stream::BrokerStream;
use crate::client::SecurityProtocol;
use crate::proxy::frame_io::{read_more, write_frame};
use crate::proxy::halves::{split_any, split_tcp, Writer};
use crate::proxy::identity::ClientIdentity;
use crate::proxy::limits::{Expired, FrameCharge, ReadClock, SMALL_FRAME_BYTES};
use crate::proxy::mirror_gate::GateDecision;
use crate::proxy::request_metrics::ConnectionMetrics;
use crate::proxy::request_span::RequestSpan;
use crate::proxy::route::{self, Decision, ResponseAction};
use crate::proxy::{intercept, Shared};
use crate::wire::frame::{FrameDecoder, LENGTH_PREFIX_BYTES};
use crate::wire::request::ParsedRequest;

/// A step's outcome: `Err` is the reason to close the connection.
type Step<T = ()> = Result<T, String>;

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
pub(super) async fn requests<R>(
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
    // The request memory charged for the (large) frame at the front of `buf`.
    let mut charge = FrameCharge::default();
    // The broker's cap on frames before SASL authentication (`sasl.server.max.receive.size`).
    let pre_auth_cap = matches!(
        shared.settings.destination_security.protocol,
        SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
    )
    .then_some(shared.settings.sasl_server_max_receive_size);
    let outstanding = clock.outstanding.clone();
    let mut side = RequestSide {
        target,
        tx,
        identity,
        shared,
        admin,
        metrics,
        pre_auth_cap,
        outstanding,
        upstream: None,
        upstream_addr: None,
    };
    // Registered once with the shutdown token, not once per read (its waiter list is shared by
    // every connection on every network thread).
    let draining = shared.drain.cancelled();
    tokio::pin!(draining);
    // The read deadline's timer, armed once and moved only when it fires or a deadline comes
    // earlier (a partial frame's): a read moves the idle deadline later, which `clock.expired()`
    // finds when the timer fires, so reads do not register a timer each.
    let timer = tokio::time::sleep_until(clock.deadline());
    tokio::pin!(timer);
    let closed: Step = async {
        loop {
            while let Some(frame) = next_frame(&decoder, &mut buf)? {
                clock.frame_done();
                // Released when this frame has been handled (forwarded or answered).
                let _charge = std::mem::take(&mut charge);
                side.handle(frame).await?;
            }
            side.flush().await?;
            let (granted, budget) = side.charge_next(&decoder, &buf, &mut charge).await?;
            clock.waiting(!buf.is_empty(), granted);
            read_client(&mut client_r, &mut buf, &decoder, budget, &mut clock, &mut draining, &mut timer).await?;
        }
    }
    .await;
    closed.err().unwrap_or_default()
}

/// The next whole frame in `buf`, `None` when more bytes are needed.
///
/// # Errors
/// A bad length prefix, named as a TLS handshake when it looks like one (a TLS client on a
/// plaintext port).
fn next_frame(decoder: &FrameDecoder, buf: &mut BytesMut) -> Step<Option<Bytes>> {
    match decoder.decode(buf) {
        Ok(f) => Ok(f),
        Err(e) if looks_like_tls(buf) => {
            Err(format!("TLS handshake on a plaintext port ({e}); use a TLS listener or a plaintext client"))
        }
        Err(e) => Err(format!("bad frame from client: {e}")),
    }
}

/// Reads more of the client's bytes into `buf` (at most `budget` when a large frame is being
/// charged), unless shutdown begins or the read deadline passes first.
///
/// # Errors
/// Shutdown, an expired deadline (idle connection or a partial frame too slow), end of
/// stream (clean or mid-frame) or a failed read.
async fn read_client<R, D>(
    client_r: &mut R,
    buf: &mut BytesMut,
    decoder: &FrameDecoder,
    budget: Option<usize>,
    clock: &mut ReadClock,
    draining: &mut Pin<&mut D>,
    timer: &mut Pin<&mut Sleep>,
) -> Step
where
    R: AsyncRead + Unpin,
    D: Future<Output = ()>,
{
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
            _ = draining.as_mut() => return Err("mirrorgate is shutting down".into()),
            r = read_more(client_r, buf, decoder, budget) => break r,
            () = timer.as_mut() => match clock.expired() {
                Expired::No => timer.as_mut().reset(clock.deadline()),
                Expired::Close(reason) => return Err(reason),
            },
        }
    };
    clock.read();
    match read {
        Ok(0) => Err(match decoder.check_eof(buf) {
            Ok(()) => "client closed the connection".into(),
            Err(e) => format!("bad frame from client: {e}"),
        }),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("read from client failed: {e}")),
    }
}

/// The request side's state across frames.
struct RequestSide<'a> {
    target: Target,
    /// Responses due, in request order, to the response side.
    tx: mpsc::Sender<Pending>,
    identity: &'a Arc<ClientIdentity>,
    shared: &'a Shared,
    /// Whether the listener answers the mirror admin RPCs (`admin: true`).
    admin: bool,
    metrics: &'a ConnectionMetrics,
    /// The broker's cap on frames before SASL authentication, on a SASL destination.
    pre_auth_cap: Option<usize>,
    /// Responses due to the client (for the idle deadline).
    outstanding: Arc<AtomicUsize>,
    /// The upstream connection's write half, once opened.
    upstream: Option<BufWriter<Writer>>,
    /// The destination broker's address, for request spans.
    upstream_addr: Option<Arc<str>>,
}

impl RequestSide<'_> {
    /// One request frame, from its bytes to its destination: its header parsed once (the
    /// value every later step reads), the client's SASL exchange watched, an ended SASL
    /// session refused, then the gate's decision, routing and forwarding.
    async fn handle(&mut self, frame: Bytes) -> Step {
        let read = Instant::now();
        self.metrics.received.increment(frame.len() as u64 + 4);
        self.identity.frame_allowed(frame.len(), self.pre_auth_cap)?;
        let shared = self.shared;
        let request = ParsedRequest::parse_with(frame, |k, v| request_header_version(shared, k, v))
            .map_err(|e| format!("bad request from client: {e}"))?;
        let api_key = request.api_key();
        shared.api_names.request(api_key, request.api_version());
        let sasl = api_key == SASL_HANDSHAKE || api_key == SASL_AUTHENTICATE;
        if sasl {
            self.identity.on_request(&request)?;
        }
        // An ended SASL session (KIP-368, or an OAUTHBEARER token that expired before its
        // exchange ended): the broker closes the connection at its next request other than
        // a re-authentication (`SocketServer`: SaslHandshake begins one, its SaslAuthenticate
        // requests go to the authenticator; `identity` allows them only in that order), and
        // so does mirrorgate, before the mirror gate acts on it.
        if !sasl && self.identity.sasl_authenticated() && self.identity.session_expired() {
            return Err(format!(
                "the client's SASL session expired without a re-authentication (connections.max.reauth.ms on the destination, or the credential's expiry); api key {api_key} not answered"
            ));
        }
        let span = RequestSpan::start(&request);
        let decision = match self.gate(&request).await? {
            GateDecision::Drop => return Ok(()),
            GateDecision::Local(response) => return self.answered(api_key, response, read).await,
            decision => self.route(&request, decision)?,
        };
        match decision {
            Decision::Close(reason) => Err(reason),
            Decision::Upstream { frame, expect_response, action } => {
                self.forward(&request, frame, expect_response, action, span, read).await
            }
        }
    }

    /// The mirror gate's decision ([`crate::proxy::mirror_gate::MirrorGate::intercept`]): on
    /// the main runtime for the APIs it handles there, on this network thread otherwise;
    /// `Pass` without a gate.
    async fn gate(&mut self, request: &ParsedRequest) -> Step<GateDecision> {
        let Some(gate) = &self.shared.gate else { return Ok(GateDecision::Pass) };
        if !gate.runs_on_main(request.api_key()) {
            return gate.intercept(request, self.admin, self.identity).await;
        }
        let (gate, owned, identity, admin) = (gate.clone(), request.clone(), self.identity.clone(), self.admin);
        let handled = self.shared.main.spawn(async move { gate.intercept(&owned, admin, &identity).await });
        handled.await.map_err(|e| format!("api key {} not answered: {e}", request.api_key()))?
    }

    /// Where a request the gate lets through goes ([`route::decide`]), with the gate's edits
    /// (Produce without refused partitions, a request without the state topic) and their
    /// response actions, then source offsets for shifted mirror partitions
    /// ([`crate::proxy::present`]; a pointer load when there are none).
    fn route(&self, request: &ParsedRequest, gate: GateDecision) -> Step<Decision> {
        let supports = |k| self.shared.directory.supports_api(k);
        let decision = match gate {
            GateDecision::ForwardProduce { frame, expect_response, rejected } => {
                Decision::Upstream { frame, expect_response, action: ResponseAction::ProduceMerge(rejected) }
            }
            GateDecision::ForwardMerge { frame, merge } => match route::decide(&request.with_frame(frame), supports) {
                Decision::Upstream { frame, expect_response, action } => Decision::Upstream {
                    frame,
                    expect_response,
                    action: ResponseAction::Merged(Box::new(action), merge),
                },
                close => close,
            },
            _ => route::decide(request, supports),
        };
        match (decision, &self.shared.gate) {
            (Decision::Upstream { frame, expect_response, action }, Some(gate)) => {
                let (frame, action) = crate::proxy::present::request(gate, request, frame, action)?;
                Ok(Decision::Upstream { frame, expect_response, action })
            }
            (decision, _) => Ok(decision),
        }
    }

    /// A response mirrorgate made itself, due to the client in request order.
    async fn answered(&mut self, api_key: i16, frame: Bytes, read: Instant) -> Step {
        self.outstanding.fetch_add(1, Ordering::AcqRel);
        self.tx.send(Pending::Local { frame, api_key, read }).await.map_err(|_| RESPONSE_PATH_CLOSED.to_string())
    }

    /// Writes `frame` to the destination broker (opening the connection first if needed) and,
    /// when the broker will answer, tells the response side what to do with the answer.
    async fn forward(
        &mut self,
        request: &ParsedRequest,
        frame: Bytes,
        expect_response: bool,
        action: ResponseAction,
        mut span: Option<Box<RequestSpan>>,
        read: Instant,
    ) -> Step {
        if self.upstream.is_none() && !self.open_upstream(request, &action, span.is_some(), read).await? {
            return Ok(());
        }
        if expect_response {
            if let Some(s) = span.as_mut() {
                s.forwarded(self.upstream_addr.clone());
            }
            let pending = Pending::Upstream { request: *request.header(), action, read, span };
            self.outstanding.fetch_add(1, Ordering::AcqRel);
            self.tx.send(pending).await.map_err(|_| RESPONSE_PATH_CLOSED.to_string())?;
        }
        let Some(up_w) = self.upstream.as_mut() else { return Err("no upstream connection".into()) };
        write_frame(up_w, &frame).await.map_err(|e| format!("write to destination broker failed: {e}"))
    }

    /// Opens the upstream connection and hands its read half to the response side. Returns
    /// `false` when the destination is unreachable and the request was answered locally
    /// instead (ApiVersions, from the ranges the destination advertised at startup).
    ///
    /// # Errors
    /// The destination is unreachable for any other request, or the response side is gone.
    async fn open_upstream(
        &mut self,
        request: &ParsedRequest,
        action: &ResponseAction,
        traced: bool,
        read: Instant,
    ) -> Step<bool> {
        let target = self.target;
        let (stream, addr) = match connect_upstream(target, self.shared).await {
            Ok(opened) => opened,
            Err(reason) => {
                let &ResponseAction::ApiVersions { fallback } = action else {
                    return Err(format!(
                        "destination broker unreachable, cannot forward api key {} (correlation id {}): {reason}",
                        request.api_key(),
                        request.correlation_id()
                    ));
                };
                tracing::warn!(?target, %reason, "destination unreachable; ApiVersions answered from the ranges it advertised at startup");
                let response = intercept::local_api_versions(
                    request.correlation_id(),
                    if fallback { 0 } else { request.api_version() },
                    fallback,
                    &self.shared.directory,
                    &self.shared.extra_apis,
                )?;
                self.answered(request.api_key(), response, read).await?;
                return Ok(false);
            }
        };
        tracing::debug!(?target, upstream = %addr, "upstream connection opened");
        if traced {
            self.upstream_addr = Some(Arc::from(addr.as_str()));
        }
        let (up_r, up_w) = match stream {
            BrokerStream::Plain(s) => split_tcp(s),
            BrokerStream::Tls(s) => split_any(*s),
        };
        self.tx.send(Pending::Opened(up_r)).await.map_err(|_| RESPONSE_PATH_CLOSED.to_string())?;
        self.upstream = Some(BufWriter::with_capacity(64 * 1024, up_w));
        Ok(true)
    }

    /// Sends what was written upstream for the frames read so far.
    async fn flush(&mut self) -> Step {
        match self.upstream.as_mut() {
            Some(up_w) => up_w.flush().await.map_err(|e| format!("write to destination broker failed: {e}")),
            None => Ok(()),
        }
    }

    /// Before each read: the next frame's announced length is checked (before SASL
    /// authentication) and, for a large one, charged to the request memory as its bytes
    /// arrive. Returns whether memory was granted and how many bytes may be read.
    async fn charge_next(
        &mut self,
        decoder: &FrameDecoder,
        buf: &BytesMut,
        charge: &mut FrameCharge,
    ) -> Step<(bool, Option<usize>)> {
        let Ok(Some(length)) = decoder.peek_length(buf) else { return Ok((false, None)) };
        self.identity.frame_allowed(length, self.pre_auth_cap)?;
        if length <= SMALL_FRAME_BYTES {
            return Ok((false, None));
        }
        let arrived = buf.len() - LENGTH_PREFIX_BYTES;
        let granted = self.shared.request_memory.charge(charge, arrived, length, &self.identity.peer).await;
        Ok((granted, Some(charge.covered() - arrived)))
    }
}
