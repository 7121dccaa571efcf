//! SASL authentication of a new broker connection, as Kafka's `SaslClientAuthenticator`
//! does it: SaslHandshake v1 naming the mechanism, then SaslAuthenticate v1 round trips
//! carrying the mechanism's tokens. PLAIN (RFC 4616) sends `\0user\0password` once; SCRAM
//! (RFC 5802, RFC 7677; Kafka's `ScramSaslClient`) is client-first, server-first,
//! client-final with the proof, server-final with the server signature, which is checked.
//! HMAC, hashes and PBKDF2 are ring's; the message flow is ours.

use std::num::NonZeroU32;

use base64::Engine as _;
use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::conn::{BrokerConnection, ClientError};
use crate::client::security::{SaslCredentials, SaslMechanism};

/// Kafka error code SASL_AUTHENTICATION_FAILED.
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// Kafka error code UNSUPPORTED_SASL_MECHANISM.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// Kafka error code ILLEGAL_SASL_STATE.
pub const ILLEGAL_SASL_STATE: i16 = 34;

/// Fewest PBKDF2 iterations a SCRAM server may ask for (Kafka's `ScramMechanism`
/// `minIterations`, 4096 as RFC 7677 recommends).
const MIN_ITERATIONS: u32 = 4096;
/// Most PBKDF2 iterations accepted from a server (a hostile server could otherwise make
/// every connect burn CPU); Kafka's brokers refuse more than 16384 when users are created.
const MAX_ITERATIONS: u32 = 1 << 20;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A connection that can carry the SASL requests (SaslHandshake v1, SaslAuthenticate v1).
#[allow(async_fn_in_trait)]
pub trait SaslTransport {
    /// The peer's `host:port`, for errors.
    fn peer(&self) -> String;
    /// Sends SaslHandshake v1 and returns its response.
    async fn sasl_handshake(&mut self, req: &SaslHandshakeRequest) -> Result<SaslHandshakeResponse, ClientError>;
    /// Sends SaslAuthenticate v1 and returns its response.
    async fn sasl_authenticate(
        &mut self,
        req: &SaslAuthenticateRequest,
    ) -> Result<SaslAuthenticateResponse, ClientError>;
}

impl SaslTransport for BrokerConnection {
    fn peer(&self) -> String {
        self.addr().to_string()
    }

    async fn sasl_handshake(&mut self, req: &SaslHandshakeRequest) -> Result<SaslHandshakeResponse, ClientError> {
        self.send_now(req, 1).await
    }

    async fn sasl_authenticate(
        &mut self,
        req: &SaslAuthenticateRequest,
    ) -> Result<SaslAuthenticateResponse, ClientError> {
        let resp: SaslAuthenticateResponse = self.send_now(req, 1).await?;
        // KIP-368: the session lifetime, for re-authentication (`crate::client::reauth`).
        self.note_session_lifetime(resp.session_lifetime_ms);
        Ok(resp)
    }
}

/// Authenticates `conn` with `creds`: a new connection, or an authenticated one again
/// (KIP-368 re-authentication, the same exchange; see [`crate::client::reauth`]).
///
/// # Errors
/// [`ClientError::Authentication`] with the broker's error (SASL_AUTHENTICATION_FAILED and
/// its message for a wrong password, UNSUPPORTED_SASL_MECHANISM with the broker's list), or
/// a bad server-final signature; [`ClientError`] transport errors as for any request.
pub async fn authenticate<T: SaslTransport>(conn: &mut T, creds: &SaslCredentials) -> Result<(), ClientError> {
    let addr = conn.peer();
    let fail = |error: i16, message: String| ClientError::Authentication { addr: addr.clone(), error, message };
    let hs = conn
        .sasl_handshake(
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(creds.mechanism.name())),
        )
        .await?;
    if hs.error_code != 0 {
        let offered: Vec<String> = hs.mechanisms.iter().map(|m| m.to_string()).collect();
        return Err(fail(
            hs.error_code,
            format!("the broker does not enable {} (it offers {})", creds.mechanism.name(), offered.join(", ")),
        ));
    }
    match creds.mechanism {
        SaslMechanism::Plain => {
            let mut token = Vec::with_capacity(2 + creds.username.len() + creds.password.expose().len());
            token.push(0);
            token.extend_from_slice(creds.username.as_bytes());
            token.push(0);
            token.extend_from_slice(creds.password.expose().as_bytes());
            round_trip(conn, token, &fail).await?;
            Ok(())
        }
        SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
            let mut scram = Scram::new(creds);
            let server_first = round_trip(conn, scram.client_first().into_bytes(), &fail).await?;
            let client_final = scram.client_final(&server_first).map_err(|m| fail(SASL_AUTHENTICATION_FAILED, m))?;
            let server_final = round_trip(conn, client_final.into_bytes(), &fail).await?;
            scram.check_server_final(&server_final).map_err(|m| fail(SASL_AUTHENTICATION_FAILED, m))
        }
        SaslMechanism::OAuthBearer => match &creds.oauth {
            Some(login) => crate::client::oauth::authenticate(conn, login).await,
            None => Err(fail(SASL_AUTHENTICATION_FAILED, "OAUTHBEARER without a token source".into())),
        },
    }
}

async fn round_trip<T: SaslTransport>(
    conn: &mut T,
    token: Vec<u8>,
    fail: &impl Fn(i16, String) -> ClientError,
) -> Result<Bytes, ClientError> {
    let resp = conn.sasl_authenticate(&SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token))).await?;
    if resp.error_code != 0 {
        let message = resp.error_message.map(|m| m.to_string()).unwrap_or_else(|| "no message".into());
        return Err(fail(resp.error_code, message));
    }
    Ok(resp.auth_bytes)
}

/// One SCRAM exchange (client side).
struct Scram<'a> {
    creds: &'a SaslCredentials,
    client_nonce: String,
    client_first_bare: String,
    /// The server key and auth message the server-final signature is checked with.
    server_check: Option<(ring::hmac::Key, String)>,
}

impl<'a> Scram<'a> {
    fn new(creds: &'a SaslCredentials) -> Self {
        let nonce: [u8; 24] = rand::random();
        Self::with_nonce(creds, B64.encode(nonce))
    }

    fn with_nonce(creds: &'a SaslCredentials, client_nonce: String) -> Self {
        // RFC 5802 §5.1: `=` and `,` in the user name are escaped as =3D and =2C.
        let user = creds.username.replace('=', "=3D").replace(',', "=2C");
        let client_first_bare = format!("n={user},r={client_nonce}");
        Self { creds, client_nonce, client_first_bare, server_check: None }
    }

    fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    fn algorithms(&self) -> (ring::pbkdf2::Algorithm, ring::hmac::Algorithm, &'static ring::digest::Algorithm) {
        match self.creds.mechanism {
            SaslMechanism::ScramSha512 => {
                (ring::pbkdf2::PBKDF2_HMAC_SHA512, ring::hmac::HMAC_SHA512, &ring::digest::SHA512)
            }
            _ => (ring::pbkdf2::PBKDF2_HMAC_SHA256, ring::hmac::HMAC_SHA256, &ring::digest::SHA256),
        }
    }

    /// The client-final message for `server_first` (`r=<nonce>,s=<salt>,i=<iterations>`).
    fn client_final(&mut self, server_first: &[u8]) -> Result<String, String> {
        let text =
            std::str::from_utf8(server_first).map_err(|_| "SCRAM server-first message is not UTF-8".to_string())?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!("SCRAM server error: {e}"));
        }
        let attr = |name: &str| text.split(',').find_map(|a| a.strip_prefix(name)).map(str::to_string);
        let nonce = attr("r=").ok_or("SCRAM server-first message has no nonce")?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err("SCRAM server nonce does not extend the client nonce".into());
        }
        let salt = B64
            .decode(attr("s=").ok_or("SCRAM server-first message has no salt")?)
            .map_err(|_| "SCRAM salt is not base64".to_string())?;
        let iterations: u32 =
            attr("i=").and_then(|i| i.parse().ok()).ok_or("SCRAM server-first message has no iteration count")?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(format!("SCRAM iteration count {iterations} outside [{MIN_ITERATIONS}, {MAX_ITERATIONS}]"));
        }
        let (pbkdf2, hmac, digest) = self.algorithms();
        let mut salted = vec![0u8; digest.output_len()];
        ring::pbkdf2::derive(
            pbkdf2,
            NonZeroU32::new(iterations).expect("checked above"),
            &salt,
            self.creds.password.expose().as_bytes(),
            &mut salted,
        );
        let salted_key = ring::hmac::Key::new(hmac, &salted);
        let client_key = ring::hmac::sign(&salted_key, b"Client Key");
        let stored_key = ring::digest::digest(digest, client_key.as_ref());
        // c = base64 of the GS2 header "n,," (no channel binding, no authzid).
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_signature =
            ring::hmac::sign(&ring::hmac::Key::new(hmac, stored_key.as_ref()), auth_message.as_bytes());
        let proof: Vec<u8> = client_key.as_ref().iter().zip(client_signature.as_ref()).map(|(k, s)| k ^ s).collect();
        let server_key = ring::hmac::sign(&salted_key, b"Server Key");
        self.server_check = Some((ring::hmac::Key::new(hmac, server_key.as_ref()), auth_message));
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Checks the server-final message (`v=<server signature>`): the server knew the
    /// password too.
    fn check_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let text =
            std::str::from_utf8(server_final).map_err(|_| "SCRAM server-final message is not UTF-8".to_string())?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!("SCRAM server error: {e}"));
        }
        let v = text
            .split(',')
            .find_map(|a| a.strip_prefix("v="))
            .and_then(|v| B64.decode(v).ok())
            .ok_or("SCRAM server-final message has no signature")?;
        let (server_key, auth_message) = self.server_check.as_ref().ok_or("SCRAM server-final before server-first")?;
        if ring::hmac::verify(server_key, auth_message.as_bytes(), &v).is_err() {
            return Err(
                "SCRAM server signature does not match: the broker does not know this user's credentials".into()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::security::Secret;

    /// RFC 7677 §3's SCRAM-SHA-256 example exchange.
    #[test]
    fn rfc7677_example() {
        let creds = SaslCredentials {
            mechanism: SaslMechanism::ScramSha256,
            username: "user".into(),
            password: Secret::new("pencil"),
            oauth: None,
        };
        let mut s = Scram::with_nonce(&creds, "rOprNGfwEbeRWgbNEkqO".into());
        assert_eq!(s.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        assert_eq!(
            s.client_final(server_first).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(s.check_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="), Ok(()));
        assert!(s.check_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").is_err());
    }

    #[test]
    fn hostile_server_first_messages_are_refused() {
        let creds = SaslCredentials {
            mechanism: SaslMechanism::ScramSha512,
            username: "a,b=c".into(),
            password: Secret::new("p"),
            oauth: None,
        };
        let mut s = Scram::with_nonce(&creds, "abc".into());
        assert_eq!(s.client_first(), "n,,n=a=2Cb=3Dc,r=abc");
        assert!(s.client_final(b"r=xyz123,s=AAAA,i=4096").unwrap_err().contains("nonce"));
        assert!(s.client_final(b"r=abc,s=AAAA,i=4096").unwrap_err().contains("nonce"));
        assert!(s.client_final(b"r=abcd,s=AAAA,i=10").unwrap_err().contains("iteration"));
        assert!(s.client_final(b"r=abcd,s=AAAA,i=999999999").unwrap_err().contains("iteration"));
        assert!(s.client_final(b"r=abcd,s=!!,i=4096").unwrap_err().contains("base64"));
        assert!(s.client_final(b"e=invalid-proof").unwrap_err().contains("invalid-proof"));
        assert!(s.check_server_final(b"v=AAAA").is_err(), "no server-first yet");
    }
}
