//! Upstream → client: the response pump of one connection, in steps. [`responses`] takes the
//! responses due in request order; [`ResponseSide::answer`] reads the broker's answer to one
//! forwarded request ([`ResponseSide::read_response`], a large Fetch response forwarded while
//! it arrives by [`FetchForward`]), checks it ([`ResponseSide::check_response`]), applies the
//! request's response action ([`intercept::apply`]) and writes it to the client
//! ([`ResponseSide::write_response`]). Every step returns the close reason as its error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

use super::{fetch_header_version, ListenerMap, Pending, FETCH, SASL_AUTHENTICATE, SASL_HANDSHAKE};
use crate::config::Listener;
use crate::proxy::fetch_pass::FetchContext;
use crate::proxy::fetch_stream::{FetchStream, DENIAL_TTL, FETCH_SPLICED_BYTES, FETCH_STREAMED, SHORT_READ_BYTES};
use crate::proxy::frame_io::{read_more, write_frame};
use crate::proxy::halves::{Reader, Writer};
use crate::proxy::identity::{ClientIdentity, SaslAnswer};
use crate::proxy::request_metrics::ConnectionMetrics;
use crate::proxy::request_span::RequestSpan;
use crate::proxy::route::ResponseAction;
use crate::proxy::write_deadline::StallLimit;
use crate::proxy::{intercept, splice, Shared};
use crate::wire::frame::{FrameDecoder, LENGTH_PREFIX_BYTES};
use crate::wire::header;
use crate::wire::request::RequestHeader;

/// A step's outcome: `Err` is the reason to close the connection.
type Step<T = ()> = Result<T, String>;

/// The client's write half, buffered, with the stall limit (`client_write_timeout_ms`).
type ClientWriter = BufWriter<StallLimit<Writer>>;

fn write_failed(e: std::io::Error) -> String {
    format!("write to client failed: {e}")
}

/// Upstream → client, in request order. Returns the close reason.
pub(super) async fn responses(
    client_w: Writer,
    rx: mpsc::Receiver<Pending>,
    outstanding: Arc<AtomicUsize>,
    identity: &ClientIdentity,
    listener: &Listener,
    shared: &Shared,
    metrics: &ConnectionMetrics,
) -> String {
    let write_timeout = shared.settings.client_write_timeout;
    let mut side = ResponseSide {
        rx,
        outstanding,
        identity,
        listener,
        shared,
        metrics,
        write_timeout,
        up_r: None,
        decoder: FrameDecoder::new(shared.settings.max_frame_bytes),
        buf: BytesMut::with_capacity(8192),
        client_w: BufWriter::with_capacity(64 * 1024, StallLimit::new(client_w, write_timeout)),
    };
    side.run().await.err().unwrap_or_default()
}

/// The response side's state across responses.
struct ResponseSide<'a> {
    /// Responses due, in request order, from the request side.
    rx: mpsc::Receiver<Pending>,
    /// Responses due to the client (for the idle deadline).
    outstanding: Arc<AtomicUsize>,
    identity: &'a ClientIdentity,
    listener: &'a Listener,
    shared: &'a Shared,
    metrics: &'a ConnectionMetrics,
    write_timeout: Duration,
    /// The upstream connection's read half, once opened.
    up_r: Option<Reader>,
    decoder: FrameDecoder,
    /// Bytes read from the broker and not yet forwarded.
    buf: BytesMut,
    client_w: ClientWriter,
}

impl<'a> ResponseSide<'a> {
    /// Takes each response due, in request order, until a step closes the connection.
    async fn run(&mut self) -> Step {
        loop {
            match self.rx.recv().await {
                None => return Err("request path closed".into()),
                Some(Pending::Local { frame, api_key, read }) => self.write_local(&frame, api_key, read).await?,
                Some(Pending::Opened(r)) => self.up_r = Some(r),
                Some(Pending::Upstream { request, action, read, span }) => {
                    self.answer(request, action, read, span).await?
                }
            }
        }
    }

    /// A response mirrorgate made itself: written, and flushed unless another is due.
    async fn write_local(&mut self, frame: &Bytes, api_key: i16, read: Instant) -> Step {
        write_frame(&mut self.client_w, frame).await.map_err(write_failed)?;
        self.metrics.sent.increment(frame.len() as u64 + 4);
        self.shared.api_names.responded(api_key, read);
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
        if self.rx.is_empty() {
            self.client_w.flush().await.map_err(write_failed)?;
        }
        Ok(())
    }

    /// The broker's answer to one forwarded `request`: read, checked, rewritten by `action`,
    /// written to the client; its span recorded. Flushed unless the next response is already
    /// buffered and due (never held back while waiting on the broker: the next one may be a
    /// long-polling Fetch).
    async fn answer(
        &mut self,
        request: RequestHeader,
        action: ResponseAction,
        read: Instant,
        span: Option<Box<RequestSpan>>,
    ) -> Step {
        let Some(up_r) = self.up_r.as_ref() else {
            return Err("response due from a destination broker that was never connected".into());
        };
        let shared = self.shared;
        let mut fetch = FetchForward {
            stream: None,
            // Its batches spliced (plain TCP both sides, Linux): the pipe, made on the first
            // splice.
            zero_copy: splice::enabled()
                && shared.settings.fetch_stream_zero_copy
                && up_r.tcp().is_some()
                && self.client_w.get_ref().get_ref().tcp().is_some(),
            pipe: splice::Pipe::default(),
            // A large Fetch response goes to the client while it arrives (fetch_stream).
            decided: !(request.api_key == FETCH
                && matches!(action, ResponseAction::Fetch)
                && shared.settings.fetch_stream_min_bytes > 0),
        };
        let frame = self.read_response(&request, &mut fetch).await?;
        let close_after = self.check_response(&request, &frame)?;
        // When the broker answered and its top-level error code, for the span (read before
        // the response is rewritten).
        let answered = span.as_ref().map(|_| {
            (std::time::SystemTime::now(), header::response_error_code(request.api_key, request.api_version, &frame))
        });
        let original = (frame.as_ptr() as usize, frame.len());
        let map = ListenerMap { listener: self.listener };
        let gate = shared.gate.as_deref();
        let (key, version) = (request.api_key, request.api_version);
        let frame = intercept::apply(action, key, version, frame, &map, &shared.directory, &shared.extra_apis, gate)
            .map_err(|e| format!("cannot rewrite response: {e}"))?;
        self.write_response(&request, &fetch, &frame, original).await?;
        self.metrics.sent.increment(frame.len() as u64 + 4);
        shared.api_names.responded(request.api_key, read);
        if let (Some(span), Some((at, error_code))) = (span, answered) {
            let mirror_apis = gate.map(|g| &g.table);
            span.finish(&request, &self.listener.name, mirror_apis, error_code, at, frame.len());
        }
        self.outstanding.fetch_sub(1, Ordering::AcqRel);
        let next_ready = !self.rx.is_empty()
            && matches!(self.decoder.peek_length(&self.buf), Ok(Some(n)) if self.buf.len() >= n + 4);
        if !next_ready || close_after.is_some() {
            self.client_w.flush().await.map_err(write_failed)?;
        }
        close_after.map_or(Ok(()), Err)
    }

    /// Reads the broker's whole response frame; a large Fetch response's bytes go to the
    /// client while they arrive ([`FetchForward`]), all but its last byte.
    async fn read_response(&mut self, request: &RequestHeader, fetch: &mut FetchForward<'a>) -> Step<Bytes> {
        let Some(up_r) = self.up_r.as_mut() else { return Err("no upstream connection".into()) };
        loop {
            if !fetch.decided {
                fetch.decide(self.shared, self.identity, request, &self.decoder, &self.buf);
            }
            if fetch.stream.is_some()
                && fetch
                    .forward_arrived(&mut self.buf, &mut self.client_w, up_r, self.write_timeout, self.metrics)
                    .await?
            {
                continue;
            }
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(f)) => return Ok(f),
                Ok(None) => {}
                Err(e) => return Err(format!("bad frame from destination broker: {e}")),
            }
            // While batches are large (or none was seen yet), read only a batch's first bytes:
            // the rest of it can be spliced.
            let short = fetch.zero_copy && fetch.stream.as_ref().is_some_and(FetchStream::wants_short_reads);
            let read = if short {
                read_more(&mut (&mut *up_r).take(SHORT_READ_BYTES as u64), &mut self.buf, &self.decoder, None).await
            } else {
                read_more(up_r, &mut self.buf, &self.decoder, None).await
            };
            match read {
                Ok(0) => return Err("destination broker closed the connection".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("read from destination broker failed: {e}")),
            }
        }
    }

    /// The response answers `request` (its correlation id); for the SASL requests, the
    /// broker's word on the client's exchange (`identity`, `sasl_inspect`). Returns the reason
    /// to close the connection once this response has gone out, if any.
    fn check_response(&self, request: &RequestHeader, frame: &Bytes) -> Step<Option<String>> {
        let expected = request.correlation_id;
        match header::response_correlation_id(frame) {
            Ok(id) if id == expected => {}
            Ok(id) => return Err(format!("destination broker answered correlation id {id}, expected {expected}")),
            Err(e) => return Err(format!("bad response from destination broker: {e}")),
        }
        if request.api_key != SASL_HANDSHAKE && request.api_key != SASL_AUTHENTICATE {
            self.identity.on_other_response(request.api_key);
            return Ok(None);
        }
        match self.identity.on_response(request, frame) {
            SaslAnswer::Forward => Ok(None),
            SaslAnswer::ForwardThenClose(reason) => Ok(Some(reason)),
            SaslAnswer::Close(reason) => Err(reason),
        }
    }

    /// Writes the (rewritten) response `frame`: whole; or, when part of the broker's bytes
    /// went out while they arrived, the rest of them; or, if an edit was due after part went
    /// out, nothing more: the client never gets its last byte, so it never parses it; it
    /// fetches again, served whole (this client's address is then held back from streaming).
    async fn write_response(
        &mut self,
        request: &RequestHeader,
        fetch: &FetchForward<'_>,
        frame: &Bytes,
        original: (usize, usize),
    ) -> Step {
        let sent = fetch.stream.as_ref().map_or(0, FetchStream::sent);
        if sent == 0 {
            return write_frame(&mut self.client_w, frame).await.map_err(write_failed);
        }
        if (frame.as_ptr() as usize, frame.len()) == original {
            // The rest of the broker's bytes, the held-back last byte among them.
            self.client_w.write_all(&frame[sent - LENGTH_PREFIX_BYTES..]).await.map_err(write_failed)?;
            metrics::counter!(FETCH_STREAMED, "outcome" => "whole").increment(1);
            return Ok(());
        }
        metrics::counter!(FETCH_STREAMED, "outcome" => "closed").increment(1);
        self.metrics.sent.increment(sent as u64);
        self.shared.fetch_stream_denials.deny(self.identity.host);
        let why =
            fetch.stream.as_ref().and_then(FetchStream::stopped).unwrap_or("node_endpoints or a mirror state change");
        let correlation_id = request.correlation_id;
        tracing::warn!(
            client = %self.identity.peer,
            correlation_id,
            sent_bytes = sent,
            reason = why,
            "a Fetch response forwarded while it arrived needed an edit after part of it went out; closing the client connection so that the client fetches again (store-and-forward for this client address for {} s)",
            DENIAL_TTL.as_secs()
        );
        Err(format!("Fetch response {correlation_id} needed an edit after {sent} bytes of it were forwarded ({why})"))
    }
}

/// A Fetch response on its way: forwarded to the client while it arrives when large
/// ([`FetchStream`]), its record batches spliced socket to socket when both sides are plain
/// TCP on Linux.
struct FetchForward<'a> {
    stream: Option<FetchStream<'a>>,
    /// Whether batches may be spliced (turned off for the rest of this response, or for good
    /// after the kernel refused, when a splice fails before taking a byte).
    zero_copy: bool,
    pipe: splice::Pipe,
    /// Whether streaming was decided (it is, once the response's length is known).
    decided: bool,
}

impl<'a> FetchForward<'a> {
    /// Once the response's length is known: streamed if it is large enough, not already whole
    /// (read with the previous response), and this client's address not held back; the mirror
    /// state read only then.
    fn decide(
        &mut self,
        shared: &'a Shared,
        identity: &ClientIdentity,
        request: &RequestHeader,
        decoder: &FrameDecoder,
        buf: &BytesMut,
    ) {
        let Ok(Some(len)) = decoder.peek_length(buf) else { return };
        self.decided = true;
        let min_bytes = shared.settings.fetch_stream_min_bytes;
        if len >= min_bytes
            && buf.len() < LENGTH_PREFIX_BYTES + len
            && !shared.fetch_stream_denials.denied(identity.host)
        {
            let ctx = shared.gate.as_deref().map(FetchContext::of);
            let version = request.api_version;
            self.stream =
                FetchStream::start(min_bytes, version, fetch_header_version(version), request.correlation_id, len, ctx)
                    .map(|s| s.splicing(self.zero_copy));
        }
    }

    /// Writes what has arrived and may go out; splices the next batch when it is large enough.
    /// Returns `true` when bytes were spliced (read again from the top).
    async fn forward_arrived(
        &mut self,
        buf: &mut BytesMut,
        client_w: &mut ClientWriter,
        up_r: &mut Reader,
        write_timeout: Duration,
        conn: &ConnectionMetrics,
    ) -> Step<bool> {
        let Some(s) = self.stream.as_mut() else { return Ok(false) };
        let ready = s.ready(buf);
        if !ready.is_empty() {
            let end = ready.end;
            client_w.write_all(&buf[ready]).await.map_err(write_failed)?;
            client_w.flush().await.map_err(write_failed)?;
            s.wrote(end);
        }
        let n = if self.zero_copy { s.splice_len(buf.len()) } else { 0 };
        if n < splice::MIN_SPLICE_BYTES {
            return Ok(false);
        }
        // Whatever is still buffered for the client goes first.
        client_w.flush().await.map_err(write_failed)?;
        let (Some(from), Some(to)) = (up_r.tcp(), client_w.get_ref().get_ref().tcp()) else {
            return Err("zero-copy forwarding without TCP sockets".into());
        };
        match splice::forward(from, to, &mut self.pipe, n, write_timeout).await {
            Ok(()) => {
                // Zeros in their place: the frame keeps its length and shape for the final
                // look, which reads batch headers, not these bytes.
                buf.resize(buf.len() + n, 0);
                s.spliced(buf.len());
                metrics::counter!(FETCH_SPLICED_BYTES).increment(n as u64);
                Ok(true)
            }
            // Nothing taken from the broker: this response (and, after a refusal, every
            // later one) is copied instead.
            Err(e) if e.taken == 0 => {
                if e.failure == splice::Failure::Refused {
                    splice::disable(&e.error);
                } else {
                    tracing::debug!(error = %e, "splice failed before taking a byte; copying this Fetch response");
                }
                self.zero_copy = false;
                s.set_splicing(false);
                Ok(false)
            }
            Err(e) => {
                conn.sent.increment((s.sent() + e.moved) as u64);
                Err(format!("zero-copy forwarding of a Fetch response failed: {e}"))
            }
        }
    }
}
