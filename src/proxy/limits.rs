//! Resource limits on client connections, as brokers have them (issue 11 item 7):
//!
//! - [`RequestMemory`]: a global cap on request bytes buffered across all client connections
//!   (the broker's `queued.max.request.bytes` memory pool). A connection whose next request is
//!   larger than [`SMALL_FRAME_BYTES`] reserves the whole frame before it reads the frame's
//!   body; while the pool is used up it stops reading (TCP backpressure), it is not closed.
//!   Small requests never wait, so a hostile client holding large half-sent frames cannot
//!   stall a well-behaved one sending ordinary requests.
//! - [`ConnectionLimits`]: `max_connections` and `max_connections_per_ip` per listener (the
//!   broker's `max.connections` and `max.connections.per.ip`). A connection over a limit is
//!   closed at accept, with a rate-limited warning.
//! - [`ReadTimeouts`]: `connections_max_idle_ms` (the broker's `connections.max.idle.ms`: no
//!   request bytes and no response due for that long closes the connection) and
//!   `client_frame_timeout_ms` (a request frame must arrive whole within that long of its
//!   first byte: a client sending 1 byte per second is closed).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Requests up to this size (bytes, excluding the length prefix) are read without a
/// reservation from [`RequestMemory`]: their memory is bounded by the connection limits and
/// the per-connection pipelining cap, and ordinary clients must never wait behind a hostile
/// client's large frames.
pub const SMALL_FRAME_BYTES: usize = 64 * 1024;

/// The global pool of request bytes (`queued_max_request_bytes`).
#[derive(Debug)]
pub struct RequestMemory {
    pool: Arc<Semaphore>,
    capacity: usize,
}

impl RequestMemory {
    /// A pool of `capacity` bytes. `capacity` must be at least the largest frame accepted
    /// (validated in `config.rs`), or a frame of that size would wait for ever.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.min(Semaphore::MAX_PERMITS).min(u32::MAX as usize);
        Self { pool: Arc::new(Semaphore::new(capacity)), capacity }
    }

    /// The pool's size, in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Reserves `bytes` for one request frame; waits (FIFO among waiting connections) while
    /// the pool is used up, logging once per wait. The reservation is released when the
    /// returned permit is dropped, after the frame has been forwarded.
    pub async fn reserve(&self, bytes: usize, peer: &std::net::SocketAddr) -> OwnedSemaphorePermit {
        let n = bytes.min(self.capacity) as u32;
        if let Ok(p) = self.pool.clone().try_acquire_many_owned(n) {
            self.publish();
            return p;
        }
        tracing::warn!(
            %peer,
            frame_bytes = bytes,
            queued_max_request_bytes = self.capacity,
            in_use = self.capacity - self.pool.available_permits(),
            "queued_max_request_bytes reached: reads from this client pause until request memory is freed"
        );
        metrics::counter!("mirrorgate_client_request_memory_waits_total").increment(1);
        let started = Instant::now();
        // The semaphore is never closed, so acquire only fails if it were.
        let permit = self.pool.clone().acquire_many_owned(n).await.expect("request memory pool is never closed");
        tracing::info!(%peer, frame_bytes = bytes, waited_ms = started.elapsed().as_millis() as u64, "request memory granted");
        self.publish();
        permit
    }

    /// Bytes reserved right now.
    pub fn in_use(&self) -> usize {
        self.capacity - self.pool.available_permits()
    }

    fn publish(&self) {
        metrics::gauge!("mirrorgate_client_request_memory_bytes").set(self.in_use() as f64);
    }
}

/// Why a connection was refused at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The listener holds `max_connections` connections.
    MaxConnections(usize),
    /// The peer's address holds `max_connections_per_ip` connections on this listener.
    MaxConnectionsPerIp(usize),
}

impl Refusal {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::MaxConnections(_) => "max_connections",
            Refusal::MaxConnectionsPerIp(_) => "max_connections_per_ip",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::MaxConnections(n) => write!(f, "listener already holds max_connections ({n}) client connections"),
            Refusal::MaxConnectionsPerIp(n) => {
                write!(f, "this address already holds max_connections_per_ip ({n}) connections to the listener")
            }
        }
    }
}

/// Connection counts of one listener (all its ports), shared by its clones.
#[derive(Debug, Default)]
pub struct ConnectionLimits {
    /// `max_connections`; `None` = unlimited.
    pub max_connections: Option<usize>,
    /// `max_connections_per_ip`; `None` = unlimited.
    pub max_per_ip: Option<usize>,
    counts: Mutex<Counts>,
    refused: AtomicU64,
    last_warning_ms: AtomicU64,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// One admitted connection; gives its slot back when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut c = self.limits.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.per_ip.remove(&self.ip);
            }
        }
    }
}

impl ConnectionLimits {
    /// Limits of one listener (`None` = unlimited).
    pub fn new(max_connections: Option<usize>, max_per_ip: Option<usize>) -> Self {
        Self { max_connections, max_per_ip, ..Self::default() }
    }

    /// Admits a connection from `ip`, or says which limit refuses it (counted in
    /// `mirrorgate_client_connections_refused_total{listener,reason}`).
    ///
    /// # Errors
    /// The [`Refusal`] when a limit is reached.
    pub fn admit(self: &Arc<Self>, ip: IpAddr, listener: &str) -> Result<ConnectionSlot, Refusal> {
        let refusal = {
            let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            let here = c.per_ip.get(&ip).copied().unwrap_or(0);
            match (self.max_connections, self.max_per_ip) {
                (Some(max), _) if c.total >= max => Some(Refusal::MaxConnections(max)),
                (_, Some(max)) if here >= max => Some(Refusal::MaxConnectionsPerIp(max)),
                _ => {
                    c.total += 1;
                    *c.per_ip.entry(ip).or_insert(0) += 1;
                    None
                }
            }
        };
        match refusal {
            None => Ok(ConnectionSlot { limits: self.clone(), ip }),
            Some(r) => {
                metrics::counter!("mirrorgate_client_connections_refused_total", "listener" => listener.to_string(), "reason" => r.label())
                    .increment(1);
                let refused = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
                self.warn_rate_limited(listener, ip, r, refused);
                Err(r)
            }
        }
    }

    /// Connections open on the listener now.
    pub fn open(&self) -> usize {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// At most one warning per second per listener, with the running count of refusals; the
    /// others at debug.
    fn warn_rate_limited(&self, listener: &str, ip: IpAddr, r: Refusal, refused_total: u64) {
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let now = EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1_000;
        let last = self.last_warning_ms.load(Ordering::Relaxed);
        if now >= last + 1_000
            && self.last_warning_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            tracing::warn!(listener, peer_ip = %ip, reason = %r, refused_total, "client connection refused");
        } else {
            tracing::debug!(listener, peer_ip = %ip, reason = %r, refused_total, "client connection refused");
        }
    }
}

/// The read deadlines of one client connection.
#[derive(Debug, Clone, Copy)]
pub struct ReadTimeouts {
    /// `connections_max_idle_ms`.
    pub idle: Duration,
    /// `client_frame_timeout_ms`.
    pub frame: Duration,
}

/// Where a client connection is in reading its requests, for [`ReadTimeouts`].
#[derive(Debug)]
pub struct ReadClock {
    timeouts: ReadTimeouts,
    last_activity: Instant,
    frame_started: Option<Instant>,
    /// Responses still due to the client (incremented when a request is queued, decremented
    /// when its response is written). While any is due the connection is not idle.
    pub outstanding: Arc<AtomicUsize>,
}

/// What a read deadline found.
#[derive(Debug, PartialEq, Eq)]
pub enum Expired {
    /// Not expired: wait again (a response is due, so the client is not idle).
    No,
    /// The reason to close the connection.
    Close(String),
}

impl ReadClock {
    /// A clock that starts now.
    pub fn new(timeouts: ReadTimeouts) -> Self {
        Self {
            timeouts,
            last_activity: Instant::now(),
            frame_started: None,
            outstanding: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Records a read of request bytes from the client.
    pub fn read(&mut self) {
        self.last_activity = Instant::now();
    }

    /// Records a whole request frame taken off the buffer: the frame clock stops.
    pub fn frame_done(&mut self) {
        self.frame_started = None;
    }

    /// Called before waiting for more bytes: `partial` = an incomplete frame is buffered.
    /// Restarts the frame clock when a reservation was just granted (the wait was ours).
    pub fn waiting(&mut self, partial: bool, restart_frame: bool) {
        match (partial, self.frame_started) {
            (false, _) => self.frame_started = None,
            (true, None) => self.frame_started = Some(Instant::now()),
            (true, Some(_)) if restart_frame => self.frame_started = Some(Instant::now()),
            (true, Some(_)) => {}
        }
    }

    /// The instant the next read must complete by.
    pub fn deadline(&self) -> tokio::time::Instant {
        let at = match self.frame_started {
            Some(start) => start + self.timeouts.frame,
            None => self.last_activity + self.timeouts.idle,
        };
        tokio::time::Instant::from_std(at)
    }

    /// Called when a read deadline passed without a read: one taken from
    /// [`ReadClock::deadline`] earlier, which a read since may have moved later (the caller
    /// arms its timer once and re-arms it only when it fires, rather than once per read).
    /// [`Expired::No`] when the current deadline has not passed yet.
    pub fn expired(&mut self) -> Expired {
        if tokio::time::Instant::now() < self.deadline() {
            return Expired::No;
        }
        if let Some(start) = self.frame_started {
            metrics::counter!("mirrorgate_client_connections_timed_out_total", "reason" => "partial_frame")
                .increment(1);
            return Expired::Close(format!(
                "request frame not complete {} ms after its first byte (client_frame_timeout_ms {})",
                start.elapsed().as_millis(),
                self.timeouts.frame.as_millis()
            ));
        }
        if self.outstanding.load(Ordering::Acquire) > 0 {
            // The client waits on a response (a long-polling Fetch, a slow broker): not idle.
            self.last_activity = Instant::now();
            return Expired::No;
        }
        metrics::counter!("mirrorgate_client_connections_timed_out_total", "reason" => "idle").increment(1);
        Expired::Close(format!(
            "idle for {} ms with no request and no response due (connections_max_idle_ms {})",
            self.last_activity.elapsed().as_millis(),
            self.timeouts.idle.as_millis()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_ip_and_total_limits_count_and_release() {
        let limits = Arc::new(ConnectionLimits::new(Some(3), Some(2)));
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let s1 = limits.admit(a, "l").unwrap();
        let _s2 = limits.admit(a, "l").unwrap();
        assert_eq!(limits.admit(a, "l").unwrap_err(), Refusal::MaxConnectionsPerIp(2));
        let _s3 = limits.admit(b, "l").unwrap();
        assert_eq!(limits.admit(b, "l").unwrap_err(), Refusal::MaxConnections(3));
        drop(s1);
        assert_eq!(limits.open(), 2);
        let _s4 = limits.admit(b, "l").unwrap();
        assert_eq!(limits.open(), 3);
    }

    #[test]
    fn unlimited_admits_everything() {
        let limits = Arc::new(ConnectionLimits::new(None, None));
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let slots: Vec<_> = (0..1000).map(|_| limits.admit(ip, "l").unwrap()).collect();
        assert_eq!(limits.open(), 1000);
        drop(slots);
        assert_eq!(limits.open(), 0);
    }

    #[test]
    fn idle_expiry_waits_while_a_response_is_due_and_partial_frames_expire() {
        // Budgets far above a test thread's scheduling delays on a loaded machine.
        let mut clock =
            ReadClock::new(ReadTimeouts { idle: Duration::from_millis(400), frame: Duration::from_millis(300) });
        // A timer armed before the last read fires early: not expired yet.
        assert_eq!(clock.expired(), Expired::No);
        std::thread::sleep(Duration::from_millis(410));
        clock.outstanding.store(1, Ordering::Release);
        assert_eq!(clock.expired(), Expired::No);
        std::thread::sleep(Duration::from_millis(410));
        clock.outstanding.store(0, Ordering::Release);
        assert!(matches!(clock.expired(), Expired::Close(r) if r.contains("idle")));
        clock.waiting(true, false);
        assert_eq!(clock.expired(), Expired::No, "the frame clock has just started");
        std::thread::sleep(Duration::from_millis(310));
        assert!(matches!(clock.expired(), Expired::Close(r) if r.contains("not complete")));
        clock.read();
        clock.frame_done();
        clock.waiting(false, false);
        clock.outstanding.store(1, Ordering::Release);
        assert_eq!(clock.expired(), Expired::No);
    }

    #[tokio::test]
    async fn request_memory_waits_until_released() {
        let mem = Arc::new(RequestMemory::new(100));
        let peer: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let p = mem.reserve(80, &peer).await;
        assert_eq!(mem.in_use(), 80);
        let m2 = mem.clone();
        let waiter = tokio::spawn(async move { m2.reserve(50, &peer).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "a reservation beyond the pool must wait");
        drop(p);
        let p2 = waiter.await.unwrap();
        assert_eq!(mem.in_use(), 50);
        drop(p2);
        assert_eq!(mem.in_use(), 0);
    }
}
