//! The mirror's source byte rate: measured for the KIP's `byte-rate` metric (KIP-1279
//! "Metrics": MirrorReplication byte-rate, the mirror's replication rate in bytes/s) and,
//! with `mirror.replication.throttled.rate`, capped (KIP-1279 "Throttling").
//!
//! The cap is a token bucket shared by every fetcher of the mirror: a Fetch goes out only when
//! the bucket is not in debt, asks for at most one second's worth of bytes (Kafka still
//! returns a first batch that is larger, KIP-74, so no partition stalls behind a big batch),
//! and what it returns is taken from the bucket. The broker's incremental fetch session
//! answers its partitions in turn (KIP-227), so a capped rate is shared, not starved.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Window over which the byte rate is measured.
const RATE_WINDOW: Duration = Duration::from_secs(5);

/// Byte-rate accounting (and the cap, when set) of one mirror's source fetches.
#[derive(Debug)]
pub struct ByteRate {
    mirror: String,
    /// `mirror.replication.throttled.rate`, bytes/s.
    limit: Option<u64>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Bytes that may be fetched now (negative: in debt).
    tokens: f64,
    refilled: Instant,
    window_start: Instant,
    window_bytes: u64,
}

impl ByteRate {
    /// Accounting for `mirror`, capped at `limit` bytes/s when set (at least 1).
    pub fn new(mirror: &str, limit: Option<u64>) -> Self {
        let now = Instant::now();
        let limit = limit.map(|l| l.max(1));
        Self {
            mirror: mirror.to_string(),
            limit,
            state: Mutex::new(State {
                tokens: limit.unwrap_or(0) as f64,
                refilled: now,
                window_start: now,
                window_bytes: 0,
            }),
        }
    }

    /// The cap, bytes/s.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Most bytes the next Fetch may ask for: one second of the cap (`None` when uncapped).
    pub fn max_request_bytes(&self) -> Option<usize> {
        self.limit.map(|l| l.min(i32::MAX as u64) as usize)
    }

    /// Waits until the bucket is out of debt (at once when uncapped). Returns how long it
    /// waited.
    pub async fn wait(&self) -> Duration {
        let Some(limit) = self.limit else { return Duration::ZERO };
        let mut waited = Duration::ZERO;
        loop {
            let debt = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                refill(&mut s, limit);
                (-s.tokens).max(0.0)
            };
            if debt <= 0.0 {
                return waited;
            }
            let pause = Duration::from_secs_f64(debt / limit as f64).max(Duration::from_millis(1));
            tokio::time::sleep(pause).await;
            waited += pause;
        }
    }

    /// Counts `bytes` fetched: taken from the bucket, and into the measured rate (the
    /// `mirrorgate_mirror_byte_rate` gauge, updated once per window).
    pub fn fetched(&self, bytes: usize) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(limit) = self.limit {
            refill(&mut s, limit);
            s.tokens -= bytes as f64;
        }
        s.window_bytes += bytes as u64;
        let now = Instant::now();
        let elapsed = now.duration_since(s.window_start);
        if elapsed >= RATE_WINDOW {
            let rate = s.window_bytes as f64 / elapsed.as_secs_f64();
            crate::mirror::metrics::mirror_byte_rate(&self.mirror, rate);
            s.window_start = now;
            s.window_bytes = 0;
        }
    }
}

/// Adds the tokens earned since the last refill, up to one second's worth.
fn refill(s: &mut State, limit: u64) {
    let now = Instant::now();
    let earned = now.duration_since(s.refilled).as_secs_f64() * limit as f64;
    s.tokens = (s.tokens + earned).min(limit as f64);
    s.refilled = now;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_capped_rate_makes_the_next_fetch_wait_for_what_the_last_one_took() {
        let rate = ByteRate::new("m", Some(100_000));
        assert_eq!(rate.max_request_bytes(), Some(100_000));
        // One second of burst is free.
        assert_eq!(rate.wait().await, Duration::ZERO);
        rate.fetched(100_000);
        // A first batch larger than the request (KIP-74): the debt (≈ 30,000 bytes, 0.3 s
        // at the cap) is paid by waiting.
        rate.fetched(30_000);
        let started = std::time::Instant::now();
        let waited = rate.wait().await;
        let took = started.elapsed();
        assert!(waited >= Duration::from_millis(250) && waited <= Duration::from_millis(400), "{waited:?}");
        assert!(took >= Duration::from_millis(250), "{took:?}");
    }

    #[tokio::test]
    async fn an_uncapped_rate_never_waits() {
        let rate = ByteRate::new("m", None);
        rate.fetched(1 << 30);
        assert_eq!(rate.wait().await, Duration::ZERO);
        assert_eq!(rate.max_request_bytes(), None);
    }
}
