//! One connection to one broker (plain TCP or TLS, authenticated with SASL when the
//! cluster's [`ClientSecurity`] says so): framed request/response with correlation ids and
//! timeouts. Requests on a connection are answered in order (Kafka guarantees per-connection
//! ordering), so a mismatched correlation id is a protocol error that ends the connection.
//! When the broker limits SASL sessions (`connections.max.reauth.ms`), a request first
//! re-authenticates in-band once the session is near its end ([`crate::client::reauth`]).

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::connect::{open_stream, SocketOptions};
use crate::client::reauth::Session;
use crate::client::security::ClientSecurity;
use crate::client::stream::BrokerStream;

use crate::wire::frame::{FrameDecoder, FrameError};
use crate::wire::header;

/// Why a request to a broker failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// TCP connect or I/O failure (includes connection refused and reset).
    #[error("{addr}: {source}")]
    Io {
        /// Broker address.
        addr: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// No connection or no response within the timeout.
    #[error("{addr}: {what} timed out after {ms} ms")]
    Timeout {
        /// Broker address.
        addr: String,
        /// `connect` or the api key name.
        what: String,
        /// The timeout, ms.
        ms: u128,
    },
    /// The broker sent bytes that are not a valid response.
    #[error("{addr}: bad response: {reason}")]
    Protocol {
        /// Broker address.
        addr: String,
        /// What was wrong.
        reason: String,
    },
    /// The broker closed the connection.
    #[error("{addr}: connection closed by the broker")]
    Closed {
        /// Broker address.
        addr: String,
    },
    /// The TLS handshake failed (untrusted, expired or wrong-host certificate, a plaintext
    /// port, our certificate refused).
    #[error("{addr}: TLS handshake failed: {reason}")]
    Tls {
        /// Broker address.
        addr: String,
        /// rustls' reason.
        reason: String,
    },
    /// SASL authentication failed: the broker's error code (SASL_AUTHENTICATION_FAILED (58),
    /// UNSUPPORTED_SASL_MECHANISM (33), ...) and message.
    #[error("{addr}: SASL authentication failed: {} : {message}", crate::client::KafkaErrorCode(*error))]
    Authentication {
        /// Broker address.
        addr: String,
        /// Kafka error code.
        error: i16,
        /// The broker's message (Kafka's never holds the password).
        message: String,
    },
}

impl ClientError {
    /// An I/O error on the connection to `addr`: a TLS alert from the broker (e.g. our
    /// certificate refused, which TLS 1.3 reports at the first read) becomes
    /// [`ClientError::Tls`], anything else [`ClientError::Io`].
    pub fn from_io(addr: &str, source: std::io::Error) -> Self {
        if let Some(tls) = source.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
            let hint = match tls {
                rustls::Error::AlertReceived(rustls::AlertDescription::BadCertificate)
                | rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired)
                | rustls::Error::AlertReceived(rustls::AlertDescription::UnknownCA) => {
                    " (the broker refused our client certificate or needs one: check ssl.keystore.*)"
                }
                _ => "",
            };
            if let Some(validity) = crate::client::stream::validity_hint(tls) {
                return Self::Tls { addr: addr.into(), reason: format!("{validity} ({tls})") };
            }
            return Self::Tls { addr: addr.into(), reason: format!("{tls}{hint}") };
        }
        Self::Io { addr: addr.into(), source }
    }

    /// Whether the connection was refused for its credentials or certificates (TLS or SASL):
    /// retrying at once with the same settings cannot help.
    pub fn is_security(&self) -> bool {
        matches!(self, Self::Tls { .. } | Self::Authentication { .. })
    }
}

impl Drop for BrokerConnection {
    fn drop(&mut self) {
        crate::client::metrics::broker_connection(&self.addr, false);
    }
}

/// A Produce written by [`BrokerConnection::write_produce`] whose response is still to be
/// read (with [`BrokerConnection::read_produce`], in the order the requests were written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceInFlight {
    /// The request's correlation id (checked in the response).
    pub correlation_id: i32,
    /// The request's api version (the response is decoded at it).
    pub version: i16,
    /// `acks` != 0: the broker sends a response.
    pub expects_response: bool,
}

/// A connection to one broker.
#[derive(Debug)]
pub struct BrokerConnection {
    addr: String,
    stream: BrokerStream,
    buf: BytesMut,
    decoder: FrameDecoder,
    next_correlation_id: i32,
    client_id: StrBytes,
    request_timeout: Duration,
    /// Longest wait for more bytes of an awaited response (`socket.timeout.ms`).
    read_timeout: Option<Duration>,
    /// `session_lifetime_ms` of the last SaslAuthenticate response (0 = none or unlimited).
    session_lifetime_ms: i64,
    /// The security to re-authenticate with and the SASL session, when the broker limits
    /// the session's lifetime (KIP-368, [`crate::client::reauth`]).
    reauth: Option<(ClientSecurity, Session)>,
    /// Set by a failed re-authentication: the connection is not used again.
    failed: Option<(i16, String)>,
}

impl BrokerConnection {
    /// Connects to `addr` (`host:port`) within `connect_timeout`, with the OS's socket
    /// defaults, in PLAINTEXT.
    ///
    /// # Errors
    /// [`ClientError::Io`] or [`ClientError::Timeout`].
    pub async fn connect(
        addr: &str,
        connect_timeout: Duration,
        request_timeout: Duration,
        max_frame_bytes: usize,
    ) -> Result<Self, ClientError> {
        Self::connect_with(
            addr,
            connect_timeout,
            request_timeout,
            max_frame_bytes,
            &SocketOptions::default(),
            &ClientSecurity::plaintext(),
        )
        .await
    }

    /// Connects to `addr` (`host:port`) within `connect_timeout` (TCP, then the TLS handshake
    /// within the same bound again), with `socket`'s buffer sizes and read timeout, and
    /// authenticates with SASL when `security` says so (a fresh exchange on every
    /// connection, each step within the request timeout). A TLS or SASL refusal is
    /// remembered for [`crate::client::security::SECURITY_FAILURE_HOLD`] per broker and
    /// settings: connects in that window fail at once with the same error, so a wrong
    /// password never turns into a storm of attempts against the broker.
    ///
    /// # Errors
    /// [`ClientError::Io`], [`ClientError::Timeout`], [`ClientError::Tls`] or
    /// [`ClientError::Authentication`].
    pub async fn connect_with(
        addr: &str,
        connect_timeout: Duration,
        request_timeout: Duration,
        max_frame_bytes: usize,
        socket: &SocketOptions,
        security: &ClientSecurity,
    ) -> Result<Self, ClientError> {
        if let Some(remembered) = security.recent_failure(addr) {
            return Err(remembered);
        }
        let result =
            Self::open_secured(addr, connect_timeout, request_timeout, max_frame_bytes, socket, security).await;
        if let Err(e) = &result {
            security.remember_failure(addr, e);
        }
        result
    }

    async fn open_secured(
        addr: &str,
        connect_timeout: Duration,
        request_timeout: Duration,
        max_frame_bytes: usize,
        socket: &SocketOptions,
        security: &ClientSecurity,
    ) -> Result<Self, ClientError> {
        let tcp = open_stream(addr, connect_timeout, socket).await?;
        let _ = tcp.set_nodelay(true);
        let stream = match &security.tls {
            Some(config) => BrokerStream::tls(tcp, addr, config.clone(), connect_timeout).await?,
            None => BrokerStream::Plain(tcp),
        };
        let mut conn = Self::from_stream(addr, stream, request_timeout, max_frame_bytes, socket);
        crate::client::metrics::broker_connection(addr, true);
        if let Some(creds) = &security.sasl {
            let started = std::time::Instant::now();
            let result = crate::client::sasl::authenticate(&mut conn, creds).await;
            crate::client::metrics::broker_authentication(addr, creds.mechanism.name(), result.is_ok());
            result?;
            let session = Session::random(started, conn.session_lifetime_ms);
            tracing::debug!(broker = addr, mechanism = creds.mechanism.name(), user = %creds.username, session_lifetime_ms = conn.session_lifetime_ms, "SASL authenticated");
            conn.reauth = session.map(|s| (security.clone(), s));
        }
        Ok(conn)
    }

    /// Records the `session_lifetime_ms` of a SaslAuthenticate response (v1+; ms, 0 = the
    /// broker does not limit the session), for [`crate::client::sasl::SaslTransport`].
    pub(crate) fn note_session_lifetime(&mut self, session_lifetime_ms: i64) {
        self.session_lifetime_ms = session_lifetime_ms;
    }

    /// The SASL session's lifetime the broker gave at the last authentication, if it limits
    /// it (`connections.max.reauth.ms`, KIP-368), and when it expires at the earliest.
    pub fn session_expiry(&self) -> Option<(Duration, std::time::Instant)> {
        self.reauth.as_ref().map(|(_, s)| (s.lifetime, s.expires_at()))
    }

    /// Before a request: re-authenticates in-band (SaslHandshake + SaslAuthenticate with the
    /// same credentials, on the same connection; KIP-368) when the session is in its
    /// re-authentication window ([`crate::client::reauth`]). Counted in
    /// `mirrorgate_broker_reauthentications_total` with its latency.
    ///
    /// Must not be called with a Produce of [`BrokerConnection::write_produce`] in flight.
    ///
    /// # Errors
    /// [`ClientError::Authentication`] when the broker refuses the re-authentication (or
    /// refused an earlier one: the connection is then never used again, and connects with
    /// the same settings are held back as after a failed authentication); transport errors
    /// of the exchange as for any request.
    pub async fn reauthenticate_if_due(&mut self) -> Result<(), ClientError> {
        if let Some((error, message)) = &self.failed {
            return Err(ClientError::Authentication {
                addr: self.addr.clone(),
                error: *error,
                message: message.clone(),
            });
        }
        let now = std::time::Instant::now();
        let Some((security, _)) = self.reauth.as_ref().filter(|(_, s)| s.is_due(now)) else { return Ok(()) };
        let security = security.clone();
        let Some(creds) = security.sasl.as_ref() else { return Ok(()) };
        let mechanism = creds.mechanism.name();
        self.reauth = None;
        self.session_lifetime_ms = 0;
        let result = crate::client::sasl::authenticate(self, creds).await;
        let latency = now.elapsed();
        // Counted as Kafka's `Selector` counts them: a success, or a refusal of the
        // credentials or certificate; a transport error is neither (the connection just ends).
        if result.as_ref().map_or_else(ClientError::is_security, |_| true) {
            crate::client::metrics::broker_reauthentication(&self.addr, mechanism, result.is_ok(), latency);
        }
        match result {
            Ok(()) => {
                let session = Session::random(now, self.session_lifetime_ms);
                tracing::debug!(broker = %self.addr, mechanism, latency_ms = latency.as_millis() as u64, session_lifetime_ms = self.session_lifetime_ms, "SASL re-authenticated (KIP-368)");
                self.reauth = session.map(|s| (security.clone(), s));
                Ok(())
            }
            Err(e) if !e.is_security() => {
                // The exchange broke off (timeout, reset): not a refusal. The connection is
                // ended; the next connect authenticates afresh.
                tracing::info!(broker = %self.addr, mechanism, error = %e, "SASL re-authentication interrupted (KIP-368): closing the connection");
                let _ = tokio::time::timeout(Duration::from_secs(1), self.stream.shutdown()).await;
                Err(e)
            }
            Err(e) => {
                tracing::warn!(broker = %self.addr, mechanism, error = %e, "SASL re-authentication failed (KIP-368): closing the connection");
                let (error, message) = match &e {
                    ClientError::Authentication { error, message, .. } => (*error, message.clone()),
                    other => {
                        (crate::client::sasl::SASL_AUTHENTICATION_FAILED, format!("re-authentication failed: {other}"))
                    }
                };
                security.remember_failure(&self.addr, &e);
                self.failed = Some((error, message));
                let _ = tokio::time::timeout(Duration::from_secs(1), self.stream.shutdown()).await;
                Err(e)
            }
        }
    }

    fn from_stream(
        addr: &str,
        stream: BrokerStream,
        request_timeout: Duration,
        max_frame_bytes: usize,
        socket: &SocketOptions,
    ) -> Self {
        Self {
            addr: addr.into(),
            stream,
            buf: BytesMut::with_capacity(64 * 1024),
            decoder: FrameDecoder::new(max_frame_bytes),
            next_correlation_id: 1,
            client_id: StrBytes::from_static_str("mirrorgate"),
            request_timeout,
            read_timeout: socket.read_timeout,
            session_lifetime_ms: 0,
            reauth: None,
            failed: None,
        }
    }

    /// Sets the `client_id` of the request headers sent from now on (default `mirrorgate`).
    pub fn set_client_id(&mut self, client_id: &str) {
        self.client_id = StrBytes::from_string(client_id.to_string());
    }

    /// The `host:port` this connection goes to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Closes the connection at once with a TCP reset (`SO_LINGER` 0): bytes written to it
    /// that the broker has not acknowledged are discarded by the kernel instead of being
    /// retransmitted — and acted on by the broker — after a network cut heals. A plain close
    /// would leave them in the socket's send queue.
    pub fn abort(self) {
        if let Err(e) = socket2::SockRef::from(self.stream.tcp()).set_linger(Some(Duration::ZERO)) {
            tracing::debug!(addr = %self.addr, error = %e, "cannot set SO_LINGER 0 before closing a connection");
        }
    }

    /// Sends `request` at `version` and waits for its response (within the request timeout),
    /// re-authenticating first when the SASL session is about to expire (KIP-368).
    ///
    /// # Errors
    /// [`ClientError`] for I/O failures, timeouts, a closed connection or an undecodable or
    /// mismatched response; [`ClientError::Authentication`] for a refused re-authentication.
    pub async fn send<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response, ClientError> {
        self.reauthenticate_if_due().await?;
        self.send_now(request, version).await
    }

    /// [`BrokerConnection::send`] without the re-authentication check: for the SASL
    /// exchange itself.
    pub(crate) async fn send_now<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response, ClientError> {
        let frame = self.exchange(request, version).await?;
        let addr = self.addr.clone();
        let bad = |reason: String| ClientError::Protocol { addr: addr.clone(), reason };
        let resp_header_version = <R::Response as kafka_protocol::protocol::HeaderVersion>::header_version(version);
        let body_start = header::response_header_len(&frame, resp_header_version).map_err(|e| bad(e.to_string()))?;
        let mut body = frame.slice(body_start..);
        R::Response::decode(&mut body, version).map_err(|e| bad(format!("api key {} v{version}: {e}", R::KEY)))
    }

    /// Sends `request` at `version` and returns the whole response frame (header and body,
    /// without the length prefix), its correlation id already checked; re-authenticates
    /// first as [`BrokerConnection::send`] does.
    ///
    /// # Errors
    /// As [`BrokerConnection::send`].
    pub async fn send_raw<R: Request>(&mut self, request: &R, version: i16) -> Result<bytes::Bytes, ClientError> {
        self.reauthenticate_if_due().await?;
        self.exchange(request, version).await
    }

    async fn exchange<R: Request>(&mut self, request: &R, version: i16) -> Result<bytes::Bytes, ClientError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        let api_key = R::KEY;
        let mut hdr = RequestHeader::default();
        hdr.request_api_key = api_key;
        hdr.request_api_version = version;
        hdr.correlation_id = correlation_id;
        hdr.client_id = Some(self.client_id.clone());
        let header_version = R::header_version(version);
        let mut out = BytesMut::new();
        out.put_i32(0);
        let protocol = |e: anyhow::Error| ClientError::Protocol { addr: self.addr.clone(), reason: e.to_string() };
        hdr.encode(&mut out, header_version).map_err(protocol)?;
        request.encode(&mut out, version).map_err(protocol)?;
        let len = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&len.to_be_bytes());

        let timeout = self.request_timeout;
        let what = format!("api key {api_key} v{version}");
        let addr = self.addr.clone();
        let fut = async {
            let io = |source| ClientError::from_io(&addr, source);
            self.stream.write_all(&out).await.map_err(io)?;
            self.stream.flush().await.map_err(io)?;
            self.read_frame().await
        };
        let frame = tokio::time::timeout(timeout, fut).await.map_err(|_| ClientError::Timeout {
            addr: addr.clone(),
            what,
            ms: timeout.as_millis(),
        })??;
        let bad = |reason: String| ClientError::Protocol { addr: addr.clone(), reason };
        let got = header::response_correlation_id(&frame).map_err(|e| bad(e.to_string()))?;
        if got != correlation_id {
            return Err(bad(format!("correlation id {got}, expected {correlation_id}")));
        }
        Ok(frame)
    }

    /// Sends a Produce request built by [`ProduceFrameBuilder`](crate::wire::produce::ProduceFrameBuilder)
    /// and decodes its `ProduceResponse` (at the frame's `api_version`, response header v1),
    /// within the request timeout: [`BrokerConnection::write_produce`] then
    /// [`BrokerConnection::read_produce`], re-authenticating first when due (KIP-368).
    /// With `acks` = 0 the broker sends no response: this returns an empty
    /// `ProduceResponse` as soon as the frame is written.
    ///
    /// # Errors
    /// As [`BrokerConnection::write_produce`] and [`BrokerConnection::read_produce`];
    /// [`ClientError::Timeout`] when both together take longer than the request timeout.
    /// After an error the frame may be partly written: drop the connection.
    pub async fn send_produce(
        &mut self,
        frame: crate::wire::produce::ProduceFrame,
    ) -> Result<kafka_protocol::messages::ProduceResponse, ClientError> {
        self.reauthenticate_if_due().await?;
        let timeout = self.request_timeout;
        let addr = self.addr.clone();
        let what = format!("api key 0 v{}", frame.api_version());
        let fut = async {
            let sent = self.write_produce(frame).await?;
            self.read_produce(&sent).await
        };
        tokio::time::timeout(timeout, fut).await.map_err(|_| ClientError::Timeout {
            addr,
            what,
            ms: timeout.as_millis(),
        })?
    }

    /// Writes a Produce request built by [`ProduceFrameBuilder`](crate::wire::produce::ProduceFrameBuilder)
    /// without waiting for its response, so that several can be in flight on the connection
    /// (Kafka answers the requests of one connection in order, one at a time). Read the
    /// responses in the same order with [`BrokerConnection::read_produce`].
    ///
    /// The segments go out with vectored writes straight from their buffers: the `records`
    /// slices (patched batch headers and untouched payloads) are never copied into a send
    /// buffer. Does not re-authenticate (see [`BrokerConnection::reauthentication_due`]).
    ///
    /// # Errors
    /// [`ClientError::Io`] (a write of zero bytes is `WriteZero`), or [`ClientError::Timeout`]
    /// when the write takes longer than the request timeout. The frame may then be partly
    /// written: drop the connection.
    pub async fn write_produce(
        &mut self,
        frame: crate::wire::produce::ProduceFrame,
    ) -> Result<ProduceInFlight, ClientError> {
        /// Segments handed to one `writev` (well under Linux's `IOV_MAX` of 1024).
        const MAX_IOVECS: usize = 64;
        let sent = ProduceInFlight {
            correlation_id: frame.correlation_id(),
            version: frame.api_version(),
            expects_response: frame.acks() != 0,
        };
        let mut segments = frame.segments;
        let timeout = self.request_timeout;
        let addr = self.addr.clone();
        let fut = async {
            let io = |source: std::io::Error| ClientError::from_io(&addr, source);
            let mut next = 0;
            while next < segments.len() {
                let mut slices = [std::io::IoSlice::new(&[]); MAX_IOVECS];
                let batch = &segments[next..(next + MAX_IOVECS).min(segments.len())];
                for (slot, s) in slices.iter_mut().zip(batch) {
                    *slot = std::io::IoSlice::new(s);
                }
                let mut written = self.stream.write_vectored(&slices[..batch.len()]).await.map_err(io)?;
                if written == 0 {
                    return Err(io(std::io::ErrorKind::WriteZero.into()));
                }
                // Skip whole segments, then advance (a pointer bump) into a partly written one.
                while written > 0 {
                    let seg = &mut segments[next];
                    if written >= seg.len() {
                        written -= seg.len();
                        next += 1;
                    } else {
                        bytes::Buf::advance(seg, written);
                        written = 0;
                    }
                }
            }
            self.stream.flush().await.map_err(io)
        };
        tokio::time::timeout(timeout, fut).await.map_err(|_| ClientError::Timeout {
            addr: addr.clone(),
            what: format!("api key 0 v{} (write)", sent.version),
            ms: timeout.as_millis(),
        })??;
        Ok(sent)
    }

    /// Reads the response of `sent`, which must be the oldest Produce written by
    /// [`BrokerConnection::write_produce`] whose response was not read yet, and decodes it
    /// (at its `api_version`, response header v1). An `acks` = 0 Produce has no response:
    /// an empty `ProduceResponse` at once.
    ///
    /// Cancel-safe: bytes already read stay buffered for the next call. Bounded only by
    /// `socket.timeout.ms` per read; callers bound the whole wait.
    ///
    /// # Errors
    /// [`ClientError::Io`], [`ClientError::Closed`], [`ClientError::Timeout`]
    /// (`socket.timeout.ms`), or [`ClientError::Protocol`] for a correlation id other than
    /// `sent`'s or an undecodable response.
    pub async fn read_produce(
        &mut self,
        sent: &ProduceInFlight,
    ) -> Result<kafka_protocol::messages::ProduceResponse, ClientError> {
        use kafka_protocol::messages::{ApiKey, ProduceResponse};
        if !sent.expects_response {
            return Ok(ProduceResponse::default());
        }
        let frame = self.read_frame().await?;
        let addr = self.addr.clone();
        let bad = |reason: String| ClientError::Protocol { addr: addr.clone(), reason };
        let got = header::response_correlation_id(&frame).map_err(|e| bad(e.to_string()))?;
        if got != sent.correlation_id {
            return Err(bad(format!("correlation id {got}, expected {}", sent.correlation_id)));
        }
        let version = sent.version;
        let body_start = header::response_header_len(&frame, ApiKey::Produce.response_header_version(version))
            .map_err(|e| bad(e.to_string()))?;
        let mut body = frame.slice(body_start..);
        ProduceResponse::decode(&mut body, version).map_err(|e| bad(format!("api key 0 v{version}: {e}")))
    }

    /// Whether the SASL session ends soon enough that the connection must re-authenticate
    /// (KIP-368) before its next request, or a re-authentication failed: a caller with
    /// requests in flight ([`BrokerConnection::write_produce`]) reads their responses first,
    /// then sends (re-authenticating) or drops the connection.
    pub fn reauthentication_due(&self) -> bool {
        self.failed.is_some() || self.reauth.as_ref().is_some_and(|(_, s)| s.is_due(std::time::Instant::now()))
    }

    /// Whether re-authentication (KIP-368) falls due within `within`: a caller about to
    /// pipeline a request behind others stops while the broker might read it only after the
    /// session ends (a broker reads a connection's next request only after answering the one
    /// before, and closes the connection on a request that arrives after expiry).
    pub fn reauthentication_due_within(&self, within: std::time::Duration) -> bool {
        self.failed.is_some() || self.reauth.as_ref().is_some_and(|(_, s)| s.is_due(std::time::Instant::now() + within))
    }

    async fn read_frame(&mut self) -> Result<bytes::Bytes, ClientError> {
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(frame)) => return Ok(frame),
                Ok(None) => {}
                Err(e) => return Err(self.frame_error(e)),
            }
            let read = self.stream.read_buf(&mut self.buf);
            let n = match self.read_timeout {
                None => read.await,
                Some(t) => tokio::time::timeout(t, read).await.map_err(|_| ClientError::Timeout {
                    addr: self.addr.clone(),
                    what: "socket read (socket.timeout.ms)".into(),
                    ms: t.as_millis(),
                })?,
            }
            .map_err(|source| ClientError::from_io(&self.addr, source))?;
            if n == 0 {
                return Err(ClientError::Closed { addr: self.addr.clone() });
            }
        }
    }

    fn frame_error(&self, e: FrameError) -> ClientError {
        ClientError::Protocol { addr: self.addr.clone(), reason: e.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// `abort` resets the connection: the peer reads ECONNRESET, not an orderly end of
    /// stream (which a plain close gives, after delivering whatever was still queued).
    #[tokio::test]
    async fn abort_resets_the_connection() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let secs = Duration::from_secs(5);
        let conn = BrokerConnection::connect(&addr, secs, secs, 1 << 20).await.unwrap();
        let (mut peer, _) = listener.accept().await.unwrap();
        conn.abort();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(secs, peer.read(&mut buf)).await.unwrap();
        assert_eq!(read.map_err(|e| e.kind()), Err(std::io::ErrorKind::ConnectionReset));

        // A plain drop ends the stream in order.
        let conn = BrokerConnection::connect(&addr, secs, secs, 1 << 20).await.unwrap();
        let (mut peer, _) = listener.accept().await.unwrap();
        drop(conn);
        let read = tokio::time::timeout(secs, peer.read(&mut buf)).await.unwrap();
        assert_eq!(read.map_err(|e| e.kind()), Ok(0));
    }
}
