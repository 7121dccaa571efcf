//! Resource limits on client connections, as brokers have them (issue 11 item 7):
//!
//! - [`RequestMemory`]: a global cap on request bytes buffered across all client connections
//!   (the broker's `queued.max.request.bytes` memory pool). A request larger than
//!   [`SMALL_FRAME_BYTES`] is charged to it as its bytes arrive, before each read (not when its
//!   length prefix announces them); while the pool is used up the connection stops reading
//!   (TCP backpressure), it is not closed. Small requests never wait, so a hostile client
//!   announcing or half-sending large frames cannot stall a well-behaved one.
//! - [`ConnectionLimits`]: `max_connections` and `max_connections_per_ip` per listener (the
//!   broker's `max.connections` and `max.connections.per.ip`). A connection over a limit is
//!   closed at accept, with a rate-limited warning.
//! - [`ReadTimeouts`]: `connections_max_idle_ms` (the broker's `connections.max.idle.ms`: no
//!   request bytes and no response due for that long closes the connection) and
//!   `client_frame_timeout_ms` (a request frame must arrive whole within that long of its
//!   first byte: a client sending 1 byte per second is closed).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Requests up to this size (bytes, excluding the length prefix) are read without a
/// reservation from [`RequestMemory`]: their memory is bounded by the connection limits and
/// the per-connection pipelining cap, and ordinary clients must never wait behind a hostile
/// client's large frames.
pub const SMALL_FRAME_BYTES: usize = 64 * 1024;

/// The global pool of request bytes (`queued_max_request_bytes`), charged as a large request's
/// bytes arrive (issue 32 item 6), not when its length prefix announces them: a client that
/// announces 100 MiB and sends nothing holds one step of the pool, not 100 MiB.
///
/// Charging as bytes arrive lets two connections each hold part of a frame and wait for the
/// rest, for ever. So the pool is two parts: the **shared** part (the pool less the largest
/// frame, `max_frame_bytes`) is charged in steps as bytes arrive and never waited on; when it
/// cannot give the next step, the connection takes the whole rest of its frame from the
/// **finisher** part (the largest frame's size), waiting in FIFO order. A connection holding
/// finisher bytes can always complete its frame, so waits always end, and the bytes charged
/// never exceed `queued_max_request_bytes`.
#[derive(Debug)]
pub struct RequestMemory {
    shared: Arc<Semaphore>,
    finisher: Arc<Semaphore>,
    capacity: usize,
    finisher_capacity: usize,
}

/// The request memory charged for the frame at the front of one connection's buffer, given
/// back when dropped (after the frame was forwarded or answered).
#[derive(Debug, Default)]
pub struct FrameCharge {
    shared: Option<OwnedSemaphorePermit>,
    finisher: Option<OwnedSemaphorePermit>,
    covered: usize,
}

impl FrameCharge {
    /// Bytes of the frame (after its length prefix) charged so far.
    pub fn covered(&self) -> usize {
        self.covered
    }
}

impl RequestMemory {
    /// A pool of `capacity` bytes for frames of at most `max_frame_bytes`. `capacity` must be
    /// at least `max_frame_bytes` (validated in `config.rs`), or a frame of that size would
    /// wait for ever.
    pub fn new(capacity: usize, max_frame_bytes: usize) -> Self {
        let capacity = capacity.min(Semaphore::MAX_PERMITS).min(u32::MAX as usize);
        let finisher_capacity = max_frame_bytes.min(capacity);
        Self {
            shared: Arc::new(Semaphore::new(capacity - finisher_capacity)),
            finisher: Arc::new(Semaphore::new(finisher_capacity)),
            capacity,
            finisher_capacity,
        }
    }

    /// The pool's size, in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Makes `charge` cover more than the `arrived` bytes of a frame of `length` bytes (after
    /// its length prefix), so that at least one more byte may be read: a step of
    /// max([`SMALL_FRAME_BYTES`], what is charged already) from the shared part (so a frame
    /// is never charged more than twice what arrived plus 64 KiB), else the rest of the frame
    /// from the finisher part, waiting (FIFO among waiting connections, logging once per
    /// wait). Returns whether it waited. Nothing to do while `charge` covers more than
    /// `arrived`.
    pub async fn charge(&self, charge: &mut FrameCharge, arrived: usize, length: usize, peer: &SocketAddr) -> bool {
        if charge.covered > arrived || charge.covered >= length {
            return false;
        }
        let step = charge.covered.max(SMALL_FRAME_BYTES).min(length - charge.covered);
        if let Ok(p) = self.shared.clone().try_acquire_many_owned(step as u32) {
            match charge.shared.as_mut() {
                Some(held) => held.merge(p),
                None => charge.shared = Some(p),
            }
            charge.covered += step;
            self.publish();
            return false;
        }
        let rest = (length - charge.covered).min(self.finisher_capacity);
        let waited = match self.finisher.clone().try_acquire_many_owned(rest as u32) {
            Ok(p) => {
                charge.finisher = Some(p);
                false
            }
            Err(_) => {
                tracing::warn!(
                    %peer,
                    frame_bytes = length,
                    queued_max_request_bytes = self.capacity,
                    in_use = self.in_use(),
                    "queued_max_request_bytes reached: reads from this client pause until request memory is freed"
                );
                metrics::counter!("mirrorgate_client_request_memory_waits_total").increment(1);
                let started = Instant::now();
                // The semaphore is never closed, so acquire only fails if it were.
                let p = self
                    .finisher
                    .clone()
                    .acquire_many_owned(rest as u32)
                    .await
                    .expect("request memory pool is never closed");
                tracing::info!(%peer, frame_bytes = length, waited_ms = started.elapsed().as_millis() as u64, "request memory granted");
                charge.finisher = Some(p);
                true
            }
        };
        charge.covered = length;
        self.publish();
        waited
    }

    /// Bytes charged right now.
    pub fn in_use(&self) -> usize {
        self.capacity - self.shared.available_permits() - self.finisher.available_permits()
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

    /// The limits of a configured listener (`max_connections`, `max_connections_per_ip`),
    /// one value shared by every port of it.
    pub fn from_config(listener: &crate::config::Listener) -> Arc<Self> {
        Arc::new(Self::new(listener.max_connections, listener.max_connections_per_ip))
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

pub use crate::config::ReadTimeouts;

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
    use std::time::Duration;

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

    const KIB: usize = 1024;

    /// Charges as bytes arrive: an announced frame holds one step, steps double with what
    /// arrived, and a frame the shared part cannot cover takes the rest of itself from the
    /// finisher part, in turn.
    #[tokio::test]
    async fn request_memory_is_charged_as_bytes_arrive_and_waits_end() {
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        // 1 MiB pool for frames of at most 512 KiB: 512 KiB shared, 512 KiB finisher.
        let mem = Arc::new(RequestMemory::new(1024 * KIB, 512 * KIB));
        let mut hostile: Vec<FrameCharge> = (0..3).map(|_| FrameCharge::default()).collect();
        for h in &mut hostile {
            assert!(!mem.charge(h, 0, 512 * KIB, &peer).await, "an announced frame never waits");
            assert_eq!(h.covered(), SMALL_FRAME_BYTES, "one step, not the announced 512 KiB");
        }
        assert_eq!(mem.in_use(), 3 * SMALL_FRAME_BYTES);
        assert!(!mem.charge(&mut hostile[0], 10, 512 * KIB, &peer).await);
        assert_eq!(hostile[0].covered(), SMALL_FRAME_BYTES, "nothing more while bytes are still covered");
        // A frame arriving whole, step by step: 64, 128, 256 KiB charged.
        let mut good = FrameCharge::default();
        let mut steps = vec![];
        while good.covered() < 256 * KIB {
            let arrived = good.covered();
            mem.charge(&mut good, arrived, 256 * KIB, &peer).await;
            steps.push(good.covered() / KIB);
        }
        assert_eq!(steps, [64, 128, 256]);
        // The shared part (512 KiB) is used up: the rest of a frame comes from the finisher.
        let mut big = FrameCharge::default();
        assert!(!mem.charge(&mut big, 0, 500 * KIB, &peer).await);
        assert_eq!(big.covered(), 64 * KIB, "the last step the shared part had");
        assert_eq!(mem.in_use(), 512 * KIB);
        assert!(!mem.charge(&mut big, 64 * KIB, 500 * KIB, &peer).await);
        assert_eq!(big.covered(), 500 * KIB, "the whole rest, from the finisher");
        assert_eq!(mem.in_use(), 948 * KIB);
        // Another one waits for it, and gets it when the first is done.
        let (m2, p2) = (mem.clone(), peer);
        let waiter = tokio::spawn(async move {
            let mut c = FrameCharge::default();
            let waited = m2.charge(&mut c, 0, 400 * KIB, &p2).await;
            (waited, c.covered())
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the finisher part is taken");
        drop(big);
        assert_eq!(waiter.await.unwrap(), (true, 400 * KIB));
        drop(hostile);
        drop(good);
        assert_eq!(mem.in_use(), 0);
    }
}
