//! A broker connection's byte stream: plain TCP or TLS over TCP, behind one
//! `AsyncRead + AsyncWrite` type so framing code does not care which.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::client::conn::ClientError;

/// Plain TCP or TLS.
#[derive(Debug)]
pub enum BrokerStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl BrokerStream {
    /// Runs the TLS handshake over `tcp` to `addr` (`host:port`; the host is the name the
    /// certificate must carry when host names are verified) within `timeout`.
    ///
    /// # Errors
    /// [`ClientError::Tls`] with rustls' reason (untrusted, expired or wrong-host certificate,
    /// no shared protocol, a plaintext port), [`ClientError::Timeout`].
    pub async fn tls(
        tcp: TcpStream,
        addr: &str,
        config: Arc<rustls::ClientConfig>,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let host = host_of(addr);
        let name = ServerName::try_from(host.to_string()).map_err(|e| ClientError::Tls {
            addr: addr.into(),
            reason: format!("`{host}` is not a valid server name: {e}"),
        })?;
        let connector = tokio_rustls::TlsConnector::from(config);
        let handshake = connector.connect(name, tcp);
        match tokio::time::timeout(timeout, handshake).await {
            Err(_) => {
                Err(ClientError::Timeout { addr: addr.into(), what: "TLS handshake".into(), ms: timeout.as_millis() })
            }
            Ok(Err(e)) => Err(ClientError::Tls { addr: addr.into(), reason: tls_reason(&e) }),
            Ok(Ok(s)) => Ok(Self::Tls(Box::new(s))),
        }
    }

    /// The TCP stream under it.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(s) => s,
            Self::Tls(s) => s.get_ref().0,
        }
    }
}

/// The host part of `host:port` (brackets of an IPv6 literal removed).
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

fn tls_reason(e: &std::io::Error) -> String {
    let inner = e.get_ref().map(ToString::to_string).unwrap_or_else(|| e.to_string());
    if let Some(hint) = e.get_ref().and_then(|r| r.downcast_ref::<rustls::Error>()).and_then(validity_hint) {
        format!("{hint} ({inner})")
    } else if e.kind() == std::io::ErrorKind::InvalidData && inner.contains("corrupt message") {
        format!("{inner} (is this a plaintext listener? check security.protocol)")
    } else if e.kind() == std::io::ErrorKind::UnexpectedEof {
        format!("{e}: the broker closed the connection during the TLS handshake (plaintext listener, or it refused our certificate?)")
    } else {
        inner
    }
}

/// A clear sentence for a broker certificate outside its validity period, with the dates
/// (rustls gives them as UNIX seconds only); `None` for any other TLS error.
pub fn validity_hint(e: &rustls::Error) -> Option<String> {
    use rustls::CertificateError as C;
    let date = |t: &rustls::pki_types::UnixTime| {
        httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_secs(t.as_secs()))
    };
    let rustls::Error::InvalidCertificate(c) = e else { return None };
    Some(match c {
        C::ExpiredContext { time, not_after } => format!(
            "the broker's certificate expired on {} ({} days ago): renew the broker's certificate",
            date(not_after),
            time.as_secs().saturating_sub(not_after.as_secs()) / 86_400
        ),
        C::Expired => "the broker's certificate has expired: renew the broker's certificate".into(),
        C::NotValidYetContext { not_before, .. } => format!(
            "the broker's certificate is not valid before {}: check the broker's certificate and this machine's clock",
            date(not_before)
        ),
        C::NotValidYet => {
            "the broker's certificate is not valid yet: check the broker's certificate and this machine's clock".into()
        }
        _ => return None,
    })
}

impl AsyncRead for BrokerStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for BrokerStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_of_strips_port_and_brackets() {
        assert_eq!(host_of("broker-1.example:9093"), "broker-1.example");
        assert_eq!(host_of("[::1]:9093"), "::1");
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
    }
}

#[cfg(test)]
mod validity_tests {
    use rustls::pki_types::UnixTime;
    use rustls::CertificateError;

    use super::*;

    #[test]
    fn expired_and_not_yet_valid_certificates_get_dates_in_the_reason() {
        let expired = rustls::Error::InvalidCertificate(CertificateError::ExpiredContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(1_706_745_600 + 10 * 86_400)),
            not_after: UnixTime::since_unix_epoch(Duration::from_secs(1_706_745_600)),
        });
        assert_eq!(
            validity_hint(&expired).unwrap(),
            "the broker's certificate expired on Thu, 01 Feb 2024 00:00:00 GMT (10 days ago): renew the broker's certificate"
        );
        let early = rustls::Error::InvalidCertificate(CertificateError::NotValidYetContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(0)),
            not_before: UnixTime::since_unix_epoch(Duration::from_secs(1_706_745_600)),
        });
        assert!(validity_hint(&early).unwrap().contains("not valid before Thu, 01 Feb 2024"));
        assert!(validity_hint(&rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)).is_none());
    }
}
