//! Logging of client connections an operator can live with: every open and close is a debug
//! line; at info, the first [`NOTABLE_PER_INTERVAL`] closes with an unusual reason (a bad
//! frame, a TLS client on a plaintext port, a timeout) in each [`SUMMARY_INTERVAL`] are logged
//! one by one, and a summary per interval counts the rest: opened, closed, and closes by
//! reason. So 10,000 junk connections write a handful of lines, not 20,000.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often the summary is logged (when anything happened).
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(60);
/// Unusual closes logged one by one at info per interval.
pub const NOTABLE_PER_INTERVAL: u64 = 5;

static OPENED: AtomicU64 = AtomicU64::new(0);
static CLOSED: AtomicU64 = AtomicU64::new(0);
static NOTABLE: AtomicU64 = AtomicU64::new(0);
static REASONS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// Whether a close reason is the ordinary end of a connection.
fn ordinary(reason: &str) -> bool {
    reason == "client closed the connection" || reason == "mirrorgate is shutting down"
}

/// A short class of a close reason for the summary: the text before its first `:` or `(`
/// (the variable part: addresses, sizes, ids), at most 80 characters.
fn class(reason: &str) -> String {
    let end = reason.find([':', '(']).unwrap_or(reason.len());
    reason[..end].trim().chars().take(80).collect()
}

/// Counts a connection opened.
pub fn opened() {
    OPENED.fetch_add(1, Ordering::Relaxed);
}

/// Counts a connection closed for `reason`; `true` when it should be logged at info (an
/// unusual reason within this interval's allowance).
pub fn closed(reason: &str) -> bool {
    CLOSED.fetch_add(1, Ordering::Relaxed);
    *REASONS.lock().unwrap_or_else(|e| e.into_inner()).entry(class(reason)).or_default() += 1;
    !ordinary(reason) && NOTABLE.fetch_add(1, Ordering::Relaxed) < NOTABLE_PER_INTERVAL
}

/// Logs the summary every [`SUMMARY_INTERVAL`] until `shutdown`.
pub async fn run(shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(SUMMARY_INTERVAL);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let opened = OPENED.swap(0, Ordering::Relaxed);
        let closed = CLOSED.swap(0, Ordering::Relaxed);
        let notable = NOTABLE.swap(0, Ordering::Relaxed);
        let reasons = std::mem::take(&mut *REASONS.lock().unwrap_or_else(|e| e.into_inner()));
        if opened == 0 && closed == 0 {
            continue;
        }
        let by_reason: Vec<String> = reasons.iter().map(|(r, n)| format!("{r}: {n}")).collect();
        tracing::info!(
            interval_s = SUMMARY_INTERVAL.as_secs(),
            opened,
            closed,
            unusual_not_logged = notable.saturating_sub(NOTABLE_PER_INTERVAL),
            "client connections: {}",
            by_reason.join("; ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_classed_without_their_variable_part() {
        assert_eq!(class("bad frame from client: frame length 2147483647 bytes"), "bad frame from client");
        assert_eq!(class("client closed the connection"), "client closed the connection");
        assert_eq!(
            class("TLS handshake on a plaintext port (bad length); use TLS"),
            "TLS handshake on a plaintext port"
        );
        assert!(ordinary("client closed the connection"));
        assert!(!ordinary("bad frame from client: x"));
    }
}
