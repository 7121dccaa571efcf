//! Who a client connection is, for what mirrorgate answers itself (the mirror RPCs and mirror
//! configs, [`super::authz`]): the principal of the SASL exchange the destination broker
//! accepted ([`super::sasl_inspect`]), else the subject of the client's TLS certificate on a
//! TLS listener, else `User:ANONYMOUS`. Decodes the client's SaslHandshake/SaslAuthenticate
//! requests and the broker's answers for the inspector; never changes or answers them.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::Decodable;

use super::sasl_inspect::{Answered, SaslInspector, Violation};
use crate::wire::header;
use crate::wire::request::{ParsedRequest, RequestHeader};

/// The principal of a connection that did not authenticate.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Who a client is, for authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// A principal the broker authenticated (`User:name`), or the client certificate's subject.
    Principal(String),
    /// Neither SASL nor a client certificate: `User:ANONYMOUS`.
    Anonymous,
    /// The broker authenticated the client, but mirrorgate cannot name the principal (why).
    Unnamed(String),
}

/// What the proxy does after the broker's answer to a SASL request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslAnswer {
    /// Forward it; nothing else.
    Forward,
    /// Forward it, then close the connection for this reason.
    ForwardThenClose(String),
    /// Close the connection without forwarding it, for this reason.
    Close(String),
}

/// Who a client connection is, as far as mirrorgate can tell.
#[derive(Debug)]
pub struct ClientIdentity {
    /// The client's address and port.
    pub peer: SocketAddr,
    /// The client's address.
    pub host: IpAddr,
    /// `User:<subject DN>` of the client certificate on a TLS listener, if one was presented.
    pub tls_principal: Option<String>,
    sasl: Mutex<SaslInspector>,
    /// Whether the broker authenticated this connection with SASL (read without the lock on
    /// the request path, for the frame cap before authentication).
    sasl_authenticated: AtomicBool,
    /// Whether the exchanges use a mechanism mirrorgate does not read (lock-free copy of the
    /// inspector's state, read with every response).
    opaque: AtomicBool,
}

impl ClientIdentity {
    /// A connection from `peer` that has not authenticated, with the principal of its TLS
    /// client certificate if it presented one.
    pub fn new(peer: SocketAddr, tls_principal: Option<String>) -> Self {
        Self {
            peer,
            host: peer.ip(),
            tls_principal,
            sasl: Mutex::new(SaslInspector::default()),
            sasl_authenticated: AtomicBool::new(false),
            opaque: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SaslInspector> {
        self.sasl.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Who the client is: the SASL principal once the broker accepted an exchange, else the
    /// TLS client certificate's, else anonymous (a broker's order on SASL_SSL and SSL
    /// listeners). A SASL exchange mirrorgate cannot name is never taken for the certificate
    /// or for anonymous.
    pub fn who(&self) -> Who {
        let s = self.lock();
        match s.session() {
            Some(session) => match &session.principal {
                Some(p) => Who::Principal(p.clone()),
                None if session.why_unnamed.is_some() => Who::Unnamed(session.why_unnamed.unwrap_or_default().into()),
                None => Who::Unnamed(format!(
                    "the destination broker authenticated this connection with {}, but mirrorgate cannot tell the principal from the exchange (a delegation token, or a message form only the broker reads)",
                    session.mechanism.name()
                )),
            },
            None if s.opaque() => Who::Unnamed(
                "this connection uses a SASL mechanism mirrorgate does not read (PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER are read), so it has no principal at mirrorgate".into(),
            ),
            None => match &self.tls_principal {
                Some(p) => Who::Principal(p.clone()),
                None => Who::Anonymous,
            },
        }
    }

    /// The principal for logs: [`Who::Principal`]'s, `User:ANONYMOUS`, or `(unnamed SASL
    /// principal)`.
    pub fn principal(&self) -> String {
        match self.who() {
            Who::Principal(p) => p,
            Who::Anonymous => ANONYMOUS.to_string(),
            Who::Unnamed(_) => "(unnamed SASL principal)".to_string(),
        }
    }

    /// Whether the destination broker authenticated this connection with SASL.
    pub fn sasl_authenticated(&self) -> bool {
        self.sasl_authenticated.load(Ordering::Acquire)
    }

    /// Whether a request frame of `length` bytes may be read: before SASL authentication, at
    /// most `cap` bytes (`sasl_server_max_receive_size`, the broker's
    /// `sasl.server.max.receive.size`; `None` when the destination does not use SASL).
    ///
    /// # Errors
    /// The reason to close the connection, logged and counted
    /// (`mirrorgate_client_sasl_refused_total{reason="frame_before_authentication"}`).
    pub fn frame_allowed(&self, length: usize, cap: Option<usize>) -> Result<(), String> {
        match cap {
            Some(cap) if length > cap && !self.sasl_authenticated() => Err(self.refuse(Violation {
                kind: "frame_before_authentication",
                reason: format!(
                    "a request frame of {length} bytes before SASL authentication (sasl_server_max_receive_size {cap})"
                ),
                reauthenticating: false,
            })),
            _ => Ok(()),
        }
    }

    /// Whether the client's SASL session has ended (`connections.max.reauth.ms` on the
    /// destination, KIP-368) without a re-authentication. A broker closes such a connection
    /// at its next request other than SaslHandshake (`SocketServer`, "expired channel");
    /// mirrorgate does the same before it looks at the request, so a mirror request (which
    /// the broker never sees) is neither answered nor acted on.
    pub fn session_expired(&self) -> bool {
        self.lock().expired(Instant::now())
    }

    /// Looks at a client request before it is forwarded: SaslHandshake (17) and
    /// SaslAuthenticate (36) go through the [`SaslInspector`]; others pass.
    ///
    /// # Errors
    /// The reason to close the connection instead of forwarding the request (a SASL request
    /// out of sequence, pipelined, or that does not decode), logged and counted.
    pub fn on_request(&self, request: &ParsedRequest) -> Result<(), String> {
        let prefix = request.header();
        let checked = match ApiKey::try_from(prefix.api_key) {
            Ok(ApiKey::SaslHandshake) => match decode::<SaslHandshakeRequest>(request) {
                Some(req) => {
                    self.lock().on_handshake(prefix.correlation_id, prefix.api_version, req.mechanism.as_str())
                }
                None => Err(unreadable("SaslHandshake request", self.sasl_authenticated())),
            },
            Ok(ApiKey::SaslAuthenticate) => match decode::<SaslAuthenticateRequest>(request) {
                Some(req) => self.lock().on_authenticate(prefix.correlation_id, &req.auth_bytes),
                None => Err(unreadable("SaslAuthenticate request", self.sasl_authenticated())),
            },
            _ => return Ok(()),
        };
        checked.map_err(|v| self.refuse(v))
    }

    /// Looks at the broker's answer (after the length prefix) to the SaslHandshake or
    /// SaslAuthenticate `request`.
    pub fn on_response(&self, request: &RequestHeader, frame: &Bytes) -> SaslAnswer {
        let RequestHeader { api_key, api_version, correlation_id, .. } = *request;
        let answered = match ApiKey::try_from(api_key) {
            Ok(key @ ApiKey::SaslHandshake) => {
                match decode_response::<SaslHandshakeResponse>(key, api_version, frame) {
                    Some(r) => {
                        let mut s = self.lock();
                        let answered = s.on_handshake_answer(correlation_id, r.error_code);
                        self.opaque.store(s.opaque(), Ordering::Release);
                        answered
                    }
                    None => Answered::Close { violation: unreadable("SaslHandshake response", true), forward: false },
                }
            }
            Ok(key @ ApiKey::SaslAuthenticate) => {
                match decode_response::<SaslAuthenticateResponse>(key, api_version, frame) {
                    Some(r) => self.lock().on_authenticate_answer(
                        correlation_id,
                        r.error_code,
                        !r.auth_bytes.is_empty(),
                        if api_version >= 1 { r.session_lifetime_ms.max(0) } else { -1 },
                        Instant::now(),
                    ),
                    None => {
                        Answered::Close { violation: unreadable("SaslAuthenticate response", true), forward: false }
                    }
                }
            }
            _ => return SaslAnswer::Forward,
        };
        match answered {
            Answered::Continue => SaslAnswer::Forward,
            Answered::Ended { ok, reauth } => {
                count(ok, reauth);
                if ok {
                    self.sasl_authenticated.store(true, Ordering::Release);
                }
                SaslAnswer::Forward
            }
            Answered::Close { violation, forward: true } => SaslAnswer::ForwardThenClose(self.refuse(violation)),
            Answered::Close { violation, forward: false } => SaslAnswer::Close(self.refuse(violation)),
        }
    }

    /// The broker answered a request other than ApiVersions and the SASL ones: on a SASL
    /// listener it does so only for an authenticated connection, which is how a mechanism
    /// mirrorgate does not read is seen to have completed (for the frame cap before
    /// authentication; such a connection still has no principal).
    pub fn on_other_response(&self, api_key: i16) {
        if api_key != ApiKey::ApiVersions as i16 && self.opaque.load(Ordering::Acquire) && !self.sasl_authenticated() {
            self.sasl_authenticated.store(true, Ordering::Release);
        }
    }

    /// Logs and counts a refused SASL step; the close reason.
    fn refuse(&self, v: Violation) -> String {
        count(false, v.reauthenticating);
        metrics::counter!("mirrorgate_client_sasl_refused_total", "reason" => v.kind).increment(1);
        tracing::warn!(peer = %self.peer, principal = %self.principal(), reason = v.kind, "client SASL refused: {}", v.reason);
        format!("SASL refused ({}): {}", v.kind, v.reason)
    }
}

fn count(ok: bool, reauth: bool) {
    if reauth {
        crate::telemetry::metrics::client_reauthentication(ok);
    } else {
        crate::telemetry::metrics::client_authentication(ok);
    }
}

fn unreadable(what: &str, reauthenticating: bool) -> Violation {
    Violation { kind: "unreadable", reason: format!("a {what} mirrorgate cannot decode"), reauthenticating }
}

fn decode<T: Decodable>(request: &ParsedRequest) -> Option<T> {
    T::decode(&mut request.body().ok()?, request.api_version()).ok()
}

fn decode_response<T: Decodable>(key: ApiKey, api_version: i16, frame: &Bytes) -> Option<T> {
    let start = header::response_header_len(frame, key.response_header_version(api_version)).ok()?;
    T::decode(&mut frame.slice(start..), api_version).ok()
}

pub use crate::client::tls::tls_principal;

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    /// `openssl req -x509 -subj "/C=US/O=corp/OU=eng/CN=alice, jr"`; openssl's RFC 2253 form
    /// of its subject is `CN=alice\\, jr,OU=eng,O=corp,C=US`, as Java prints it.
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB0TCCAXegAwIBAgIUHNFwoiKCWdYkRvNSGj/fBSlkrWkwCgYIKoZIzj0EAwIw\nPjELMAkGA1UEBhMCVVMxDTALBgNVBAoMBGNvcnAxDDAKBgNVBAsMA2VuZzESMBAG\nA1UEAwwJYWxpY2UsIGpyMB4XDTI2MTIwMTE4MjUyNloXDTM2MTEyODE4MjUyNlow\nPjELMAkGA1UEBhMCVVMxDTALBgNVBAoMBGNvcnAxDDAKBgNVBAsMA2VuZzESMBAG\nA1UEAwwJYWxpY2UsIGpyMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAErmCmAdCj\nJhmuzbfHwE99+Jfq1v0AmgTTFB+0qdW0E3FKO5m4GZhxUHVLSimnWlOL7KHew7cA\nNTdswyy6ViomLaNTMFEwHQYDVR0OBBYEFEdJmXInnhJQTqcAA/2L0Rc9JodnMB8G\nA1UdIwQYMBaAFEdJmXInnhJQTqcAA/2L0Rc9JodnMA8GA1UdEwEB/wQFMAMBAf8w\nCgYIKoZIzj0EAwIDSAAwRQIgdq6SnJarErbbMmWIkPe1C5wC5vSsOzlnQ0q9W+eW\ntUcCIQDGGmdQxYILFQhC+XUWPwGNxADjM5Jj6hviTdk5rBGpoQ==\n-----END CERTIFICATE-----";

    #[test]
    fn tls_principal_is_the_rfc2253_subject() {
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(CERT.as_bytes()).unwrap();
        assert_eq!(tls_principal(der.as_ref()).as_deref(), Some("User:CN=alice\\, jr,OU=eng,O=corp,C=US"));
        assert_eq!(tls_principal(b"not a certificate"), None);
        let id = ClientIdentity::new("127.0.0.1:1".parse().unwrap(), Some("User:CN=x".into()));
        assert_eq!(id.principal(), "User:CN=x");
    }

    /// A request frame as the proxy sees it (without the length prefix).
    fn request<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, req: &R) -> ParsedRequest {
        let mut b = bytes::BytesMut::new();
        kafka_protocol::messages::RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .encode(&mut b, key.request_header_version(version))
            .unwrap();
        req.encode(&mut b, version).unwrap();
        ParsedRequest::parse(b.freeze()).unwrap()
    }

    /// The parsed header of a request of `key` v`version` with `correlation_id`.
    fn header(key: i16, version: i16, correlation_id: i32) -> RequestHeader {
        let mut b = bytes::BytesMut::new();
        kafka_protocol::messages::RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .encode(&mut b, 2)
            .unwrap();
        *ParsedRequest::parse(b.freeze()).unwrap().header()
    }

    fn response<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, resp: &R) -> Bytes {
        let mut b = bytes::BytesMut::new();
        kafka_protocol::messages::ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut b, key.response_header_version(version))
            .unwrap();
        resp.encode(&mut b, version).unwrap();
        b.freeze()
    }

    fn handshake(id: &ClientIdentity, cid: i32, mechanism: &str) -> Result<(), String> {
        let req = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
        id.on_request(&request(ApiKey::SaslHandshake, 1, cid, &req))
    }

    fn authenticate(id: &ClientIdentity, cid: i32, auth: &'static [u8]) -> Result<(), String> {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(auth));
        id.on_request(&request(ApiKey::SaslAuthenticate, 2, cid, &req))
    }

    /// The attack of issue 32 through the frame decoding: eve's exchange and admin's in one
    /// write; the second SaslHandshake closes the connection and the principal stays unset.
    #[test]
    fn frames_of_a_pipelined_spoof_close_the_connection() {
        let id = ClientIdentity::new("127.0.0.1:1".parse().unwrap(), None);
        assert_eq!(id.who(), Who::Anonymous);
        handshake(&id, 1, "PLAIN").unwrap();
        let hs = SaslHandshakeResponse::default();
        assert_eq!(id.on_response(&header(17, 1, 1), &response(ApiKey::SaslHandshake, 1, 1, &hs)), SaslAnswer::Forward);
        authenticate(&id, 2, b"\0eve\0pw").unwrap();
        let refused = handshake(&id, 3, "PLAIN").unwrap_err();
        assert!(refused.contains("pipelined"), "{refused}");
        // eve's own exchange, answered, makes eve the principal (never admin).
        let ok = SaslAuthenticateResponse::default().with_session_lifetime_ms(0);
        assert_eq!(
            id.on_response(&header(36, 2, 2), &response(ApiKey::SaslAuthenticate, 2, 2, &ok)),
            SaslAnswer::Forward
        );
        assert_eq!(id.who(), Who::Principal("User:eve".into()));
        assert!(id.sasl_authenticated());
        assert!(authenticate(&id, 4, b"\0admin\0x").is_err(), "after authentication, outside a re-authentication");
        // An answer that does not decode closes.
        let bad = Bytes::from_static(&[0, 0, 0, 5, 0]);
        assert!(matches!(id.on_response(&header(36, 2, 5), &bad), SaslAnswer::Close(_)));
    }

    /// SaslAuthenticate v0 answers carry no session lifetime: the broker may end the session
    /// without mirrorgate knowing when, so such a session names nobody.
    #[test]
    fn a_v0_exchange_names_nobody() {
        let id = ClientIdentity::new("127.0.0.1:1".parse().unwrap(), None);
        handshake(&id, 1, "PLAIN").unwrap();
        let hs = SaslHandshakeResponse::default();
        id.on_response(&header(17, 1, 1), &response(ApiKey::SaslHandshake, 1, 1, &hs));
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0admin\0pw"));
        id.on_request(&request(ApiKey::SaslAuthenticate, 0, 2, &req)).unwrap();
        let ok = SaslAuthenticateResponse::default();
        assert_eq!(
            id.on_response(&header(36, 0, 2), &response(ApiKey::SaslAuthenticate, 0, 2, &ok)),
            SaslAnswer::Forward
        );
        assert!(id.sasl_authenticated());
        assert!(matches!(id.who(), Who::Unnamed(why) if why.contains("SaslAuthenticate v0")), "{:?}", id.who());
    }

    #[test]
    fn a_certificate_principal_yields_to_sasl() {
        let id = ClientIdentity::new("127.0.0.1:1".parse().unwrap(), Some("User:CN=x".into()));
        assert_eq!(id.who(), Who::Principal("User:CN=x".into()));
        handshake(&id, 1, "GSSAPI").unwrap();
        let hs = SaslHandshakeResponse::default();
        id.on_response(&header(17, 1, 1), &response(ApiKey::SaslHandshake, 1, 1, &hs));
        assert!(matches!(id.who(), Who::Unnamed(_)), "a mechanism mirrorgate does not read names nobody");
        assert!(!id.sasl_authenticated());
        id.on_other_response(ApiKey::ApiVersions as i16);
        assert!(!id.sasl_authenticated());
        id.on_other_response(ApiKey::Metadata as i16);
        assert!(id.sasl_authenticated(), "the broker answered a request only authenticated clients may send");
    }
}
