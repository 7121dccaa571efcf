//! The write side of a client connection, bounded in time (issue 32 item 6): a write or flush
//! that makes no progress for `client_write_timeout_ms` fails with `TimedOut`, and the
//! connection is closed. A client that stops reading its responses would otherwise hold its
//! responses, its upstream connection and its request memory for ever (a broker has no such
//! limit; its responses wait in the socket until `connections.max.idle.ms`, which counts only
//! reads). Progress restarts the clock, so a slow reader taking a large response bit by bit is
//! not cut.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::time::{Instant, Sleep};

/// The reason a connection closes when its client read nothing for `limit`.
pub fn stalled_reason(limit: Duration) -> String {
    format!("the client read none of its responses for {} ms (client_write_timeout_ms)", limit.as_millis())
}

/// A writer whose writes fail with [`io::ErrorKind::TimedOut`] after `limit` without progress.
pub struct StallLimit<W> {
    inner: W,
    limit: Duration,
    timer: Pin<Box<Sleep>>,
    armed: bool,
}

impl<W> StallLimit<W> {
    /// `inner` with writes bounded by `limit` without progress.
    pub fn new(inner: W, limit: Duration) -> Self {
        Self { inner, limit, timer: Box::pin(tokio::time::sleep(limit)), armed: false }
    }

    /// The writer inside.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The limit.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// `inner` is not ready: start the clock if it is not running, and fail once it ran out.
    fn stalled(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        if !self.armed {
            self.timer.as_mut().reset(Instant::now() + self.limit);
            self.armed = true;
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                metrics::counter!("mirrorgate_client_connections_timed_out_total", "reason" => "write").increment(1);
                Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, stalled_reason(self.limit)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn settle<T>(&mut self, cx: &mut Context<'_>, p: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match p {
            Poll::Ready(r) => {
                self.armed = false;
                Poll::Ready(r)
            }
            Poll::Pending => self.stalled(cx).map(Err),
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for StallLimit<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let p = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.settle(cx, p)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let p = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.settle(cx, p)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let p = Pin::new(&mut this.inner).poll_flush(cx);
        this.settle(cx, p)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let p = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.settle(cx, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A peer that reads nothing: the write stalls and fails after the limit; one that reads
    /// slowly keeps the connection, however long the whole write takes.
    #[tokio::test]
    async fn no_progress_for_the_limit_fails_slow_progress_does_not() {
        let limit = Duration::from_millis(1000);
        let (a, _b) = tokio::io::duplex(1024);
        let mut w = StallLimit::new(a, limit);
        let started = Instant::now();
        let e = w.write_all(&[7u8; 4096]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("client_write_timeout_ms"), "{e}");
        assert!(started.elapsed() >= limit);

        let (a, mut b) = tokio::io::duplex(1024);
        let mut w = StallLimit::new(a, limit);
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0u8; 1024];
            while got < 16384 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                got += b.read(&mut buf).await.unwrap();
            }
            got
        });
        let started = Instant::now();
        w.write_all(&[7u8; 16384]).await.unwrap();
        assert!(started.elapsed() > limit, "the whole write outlasted the limit");
        assert_eq!(reader.await.unwrap(), 16384);
    }
}
