//! The read and write halves of a client or upstream connection: plain TCP, whose socket the
//! zero-copy path ([`super::splice`]) can use, or any other stream (TLS), boxed.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// The read half of a connection.
pub enum Reader {
    /// Plain TCP, split without a lock.
    Tcp(OwnedReadHalf),
    /// Any other stream (TLS), split with tokio's `split`.
    Other(Box<dyn AsyncRead + Send + Unpin>),
}

/// The write half of a connection.
pub enum Writer {
    /// Plain TCP, split without a lock.
    Tcp(OwnedWriteHalf),
    /// Any other stream (TLS), split with tokio's `split`.
    Other(Box<dyn AsyncWrite + Send + Unpin>),
}

/// Splits a plain TCP stream without a lock.
pub fn split_tcp(s: TcpStream) -> (Reader, Writer) {
    let (r, w) = s.into_split();
    (Reader::Tcp(r), Writer::Tcp(w))
}

/// Splits any other stream with tokio's `split`.
pub fn split_any<S: AsyncRead + AsyncWrite + Send + 'static>(s: S) -> (Reader, Writer) {
    let (r, w) = tokio::io::split(s);
    (Reader::Other(Box::new(r)), Writer::Other(Box::new(w)))
}

impl Reader {
    /// The TCP socket, when the connection is plain TCP.
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Reader::Tcp(r) => Some(r.as_ref()),
            Reader::Other(_) => None,
        }
    }
}

impl Writer {
    /// The TCP socket, when the connection is plain TCP.
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Writer::Tcp(w) => Some(w.as_ref()),
            Writer::Other(_) => None,
        }
    }
}

impl AsyncRead for Reader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Reader::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            Reader::Other(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Writer {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_write(cx, buf),
            Writer::Other(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            Writer::Other(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Writer::Tcp(w) => w.is_write_vectored(),
            Writer::Other(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_flush(cx),
            Writer::Other(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            Writer::Other(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}
