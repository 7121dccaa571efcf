//! Zero-copy forwarding of a run of bytes from the destination broker's socket to the
//! client's (issue 13, item 4): `splice(2)` moves the socket's received pages into a pipe and
//! from the pipe into the other socket, so the bulk of a large Fetch response (the bodies of
//! its record batches) never passes through mirrorgate's memory. Copying every byte in and out
//! of user space was most of mirrorgate's CPU on the consume path (`_copy_to_iter` and
//! `_copy_from_iter` in a profile of `make bench-fetch-rtt`), taking CPU from the consumer and
//! the broker on a shared machine.
//!
//! Only plain TCP on both sides (TLS needs the bytes in user space to encrypt and decrypt
//! them), only on Linux, and only for bytes whose content mirrorgate has no need to see: the
//! caller ([`super::fetch_stream`]) decides which.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::TcpStream;

/// Fewest bytes worth a splice: below this, reading and writing the bytes costs less than the
/// two `splice` calls and the pipe (a pipe is created per response that splices).
pub const MIN_SPLICE_BYTES: usize = 16 * 1024;

/// Pipe size asked for (`F_SETPIPE_SZ`, bytes): the most bytes moved per pair of `splice`
/// calls. A refusal (`/proc/sys/fs/pipe-max-size`, the per-user pipe budget
/// `pipe-user-pages-soft`, 64 MiB by default) leaves the kernel's default (64 KiB), which
/// only costs more calls.
#[cfg(target_os = "linux")]
const PIPE_BYTES: i32 = 256 * 1024;

/// A pipe for one response's splices, made on its first splice, closed when dropped.
#[derive(Default)]
pub struct Pipe {
    /// Read end, write end, and the pipe's size in bytes.
    #[cfg(target_os = "linux")]
    fds: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd, usize)>,
}

/// Whether splicing can be used at all on this platform.
pub const SUPPORTED: bool = cfg!(target_os = "linux");

/// Turned off for the whole process once the kernel refused a splice itself ([`disable`]).
static DISABLED: AtomicBool = AtomicBool::new(false);

/// Whether splicing is on: on this platform, and not turned off by a refusal.
pub fn enabled() -> bool {
    SUPPORTED && !DISABLED.load(Ordering::Relaxed)
}

/// Turns splicing off for the rest of the process (a kernel or sandbox that refuses
/// `splice(2)` on sockets, e.g. `EINVAL`, `ENOSYS`, `EPERM` from a seccomp filter); logs it
/// once.
pub fn disable(error: &io::Error) {
    if !DISABLED.swap(true, Ordering::Relaxed) {
        tracing::warn!(%error, "splice(2) refused; Fetch responses are copied through mirrorgate from now on (fetch_stream_zero_copy)");
    }
}

/// Why [`forward`] failed, and how many bytes of the run had moved by then.
#[derive(Debug)]
pub struct SpliceError {
    /// Bytes of the run taken from the destination broker's socket (at the client, or lost
    /// in the pipe): with none taken the run can still be copied instead.
    pub taken: usize,
    /// Bytes of the run already at the client.
    pub moved: usize,
    /// What failed.
    pub failure: Failure,
    /// The error.
    pub error: io::Error,
}

/// What part of [`forward`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No pipe could be made (file descriptors or memory used up).
    Pipe,
    /// The kernel refused splicing these descriptors (`EINVAL`, `ENOSYS`, `EPERM`: no splice
    /// support for them, or a seccomp filter), which no connection's state causes: worth
    /// turning splicing off ([`disable`]).
    Refused,
    /// Anything else: a socket failed or closed (`UnexpectedEof`: the broker closed before
    /// the run was in; `EPIPE`, `ECONNRESET`: the client went).
    Connection,
}

impl std::fmt::Display for SpliceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({:?}; {} bytes of the run taken, {} at the client)",
            self.error, self.failure, self.taken, self.moved
        )
    }
}

/// Moves exactly `n` bytes from `from` (the destination broker's socket) to `to` (the
/// client's) through `pipe`, in order, without copying them into mirrorgate. Nothing may be
/// buffered for `to` in user space (the caller flushes first) and the bytes must be the next
/// ones `from` delivers (nothing of them read already). A wait for `to` to take bytes longer
/// than `write_timeout` (`client_write_timeout_ms`) fails with `TimedOut`.
///
/// # Errors
/// [`SpliceError`] with the bytes taken and moved: with none taken from `from`, the caller can
/// copy the run instead; otherwise the connection is unusable (part of the run went, or sits
/// in the pipe) and the caller closes it. Off Linux: `Refused`, nothing taken.
pub async fn forward(
    from: &TcpStream,
    to: &TcpStream,
    pipe: &mut Pipe,
    n: usize,
    write_timeout: Duration,
) -> Result<(), SpliceError> {
    #[cfg(target_os = "linux")]
    {
        linux::forward(from, to, pipe, n, write_timeout).await
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (from, to, pipe, n, write_timeout);
        Err(SpliceError {
            taken: 0,
            moved: 0,
            failure: Failure::Refused,
            error: io::Error::new(io::ErrorKind::Unsupported, "splice is Linux only"),
        })
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::OwnedFd;

    use nix::errno::Errno;
    use nix::fcntl::{fcntl, splice, FcntlArg, OFlag, SpliceFFlags};
    use tokio::io::Interest;
    use tokio::net::TcpStream;

    use super::{Failure, Pipe, SpliceError, PIPE_BYTES};

    fn pipe_of(pipe: &mut Pipe) -> io::Result<(&OwnedFd, &OwnedFd, usize)> {
        if pipe.fds.is_none() {
            let (r, w) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
            // Best effort: the default size works too.
            let _ = fcntl(&w, FcntlArg::F_SETPIPE_SZ(PIPE_BYTES));
            let size = fcntl(&w, FcntlArg::F_GETPIPE_SZ).map(|s| s.max(4096) as usize).unwrap_or(64 * 1024);
            pipe.fds = Some((r, w, size));
        }
        let Some((r, w, size)) = pipe.fds.as_ref() else { unreachable!("set above") };
        Ok((r, w, *size))
    }

    /// A splice error: refused by the kernel, or the sockets' own failure. (A client that went
    /// away gives `EPIPE` and a SIGPIPE, which Rust programs ignore.)
    fn failure(e: &io::Error) -> Failure {
        match nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0)) {
            // (Not EOPNOTSUPP: a socket's stored ICMP error can be that.)
            Errno::EINVAL | Errno::ENOSYS | Errno::EPERM => Failure::Refused,
            _ => Failure::Connection,
        }
    }

    pub(super) async fn forward(
        from: &TcpStream,
        to: &TcpStream,
        pipe: &mut Pipe,
        n: usize,
        write_timeout: std::time::Duration,
    ) -> Result<(), SpliceError> {
        let (pipe_r, pipe_w, size) =
            pipe_of(pipe).map_err(|error| SpliceError { taken: 0, moved: 0, failure: Failure::Pipe, error })?;
        let flags = SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE;
        let mut left = n;
        let mut in_pipe = 0usize;
        let fail = |left: usize, in_pipe: usize, error: io::Error| SpliceError {
            taken: n - left,
            moved: n - left - in_pipe,
            failure: failure(&error),
            error,
        };
        while left > 0 || in_pipe > 0 {
            if in_pipe == 0 {
                // Filled only when empty, so that EAGAIN can only mean "nothing to read" (a
                // full pipe would clear the socket's readiness while it has data: a stall).
                from.readable().await.map_err(|e| fail(left, in_pipe, e))?;
                match from.try_io(Interest::READABLE, || Ok(splice(from, None, pipe_w, None, left.min(size), flags)?)) {
                    Ok(0) => {
                        return Err(SpliceError {
                            taken: n - left,
                            moved: n - left,
                            failure: Failure::Connection,
                            error: io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                format!("the connection closed with {left} of {n} bytes of the run still due"),
                            ),
                        })
                    }
                    Ok(k) => {
                        in_pipe = k;
                        left -= k;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(fail(left, in_pipe, e)),
                }
            }
            // A client that reads nothing for `client_write_timeout_ms` is not waited on.
            match tokio::time::timeout(write_timeout, to.writable()).await {
                Ok(ready) => ready.map_err(|e| fail(left, in_pipe, e))?,
                Err(_) => {
                    metrics::counter!("mirrorgate_client_connections_timed_out_total", "reason" => "write")
                        .increment(1);
                    let reason = crate::proxy::write_deadline::stalled_reason(write_timeout);
                    return Err(fail(left, in_pipe, io::Error::new(io::ErrorKind::TimedOut, reason)));
                }
            }
            match to.try_io(Interest::WRITABLE, || Ok(splice(pipe_r, None, to, None, in_pipe, flags)?)) {
                Ok(k) => in_pipe -= k.min(in_pipe),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(fail(left, in_pipe, e)),
            }
        }
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        (a, b)
    }

    /// The bytes arrive in order and exactly `n` of them move: what follows stays in `from`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exactly_the_run_moves_in_order_and_the_rest_stays() {
        let (mut broker, from) = pair().await;
        let (to, mut client) = pair().await;
        let data: Vec<u8> = (0..5_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let run = 3_000_001;
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            broker.write_all(&sent).await.unwrap();
            broker
        });
        let reader = tokio::spawn(async move {
            let mut got = vec![0u8; run];
            client.read_exact(&mut got).await.unwrap();
            got
        });
        let mut pipe = Pipe::default();
        forward(&from, &to, &mut pipe, run, std::time::Duration::from_secs(30)).await.unwrap();
        assert_eq!(reader.await.unwrap(), data[..run], "the run arrived changed or out of order");
        // The next bytes are still in `from`, unread.
        let mut from = from;
        let mut rest = vec![0u8; data.len() - run];
        from.read_exact(&mut rest).await.unwrap();
        assert_eq!(rest, data[run..]);
        drop(writer.await.unwrap());
    }

    #[tokio::test]
    async fn a_closed_source_is_an_unexpected_eof() {
        let (mut broker, from) = pair().await;
        let (to, _client) = pair().await;
        broker.write_all(&[1u8; 1000]).await.unwrap();
        drop(broker);
        let err =
            forward(&from, &to, &mut Pipe::default(), 5000, std::time::Duration::from_secs(30)).await.unwrap_err();
        assert_eq!(err.error.kind(), io::ErrorKind::UnexpectedEof, "{err}");
        assert_eq!((err.taken, err.moved, err.failure), (1000, 1000, Failure::Connection), "{err}");
    }
}
