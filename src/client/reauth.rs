//! KIP-368 re-authentication of mirrorgate's own broker connections.
//!
//! A broker with `connections.max.reauth.ms` > 0 answers SaslAuthenticate v1+ with
//! `session_lifetime_ms` (the smaller of that setting and the credential's own lifetime,
//! e.g. an OAUTHBEARER token's expiry; 0 = no limit). Once the session has expired the broker
//! closes the connection when the next request other than SaslHandshake arrives
//! (`SocketServer.Processor.processCompletedReceives`: `serverAuthenticationSessionExpired`
//! is checked when a request has been read completely, so a long-polling Fetch read before
//! the expiry is answered normally). A SaslHandshake on an authenticated connection starts an
//! in-band re-authentication instead (`KafkaChannel.maybeBeginServerReauthentication`, at
//! most one per second), with the same mechanism and principal
//! (`SaslServerAuthenticator.ReauthInfo.ensurePrincipalUnchanged`; a change is refused with
//! SASL_AUTHENTICATION_FAILED).
//!
//! The client side follows Kafka's `SaslClientAuthenticator.ReauthInfo`
//! (`setAuthenticationEndAndSessionReauthenticationTimes`): re-authenticate at a random point
//! between 85 % and 95 % of the session lifetime, before the next request on the connection.
//! Two differences, both on the safe side: the session is timed from when the exchange
//! started (Kafka: when it ended; the broker starts its clock in between), and a request is
//! never sent within [`expiry_margin`] of the expiry (so even a large Produce is read by the
//! broker before the session ends).

use std::time::{Duration, Instant};

/// Share of the session lifetime after which re-authentication starts, lowest (Kafka's
/// `pctWindowFactorToTakeNetworkLatencyAndClockDriftIntoAccount`).
const WINDOW_FACTOR: f64 = 0.85;
/// Random share added to [`WINDOW_FACTOR`], at most (Kafka's
/// `pctWindowJitterToAvoidReauthenticationStormAcrossManyChannelsSimultaneously`).
const WINDOW_JITTER: f64 = 0.10;
/// Largest margin kept before the session's expiry (see [`expiry_margin`]).
const MAX_EXPIRY_MARGIN: Duration = Duration::from_secs(2);

/// The time kept free before a session's expiry: no request is sent in it. A tenth of the
/// lifetime, at most 2 s: room for the request to be written and read by the broker.
pub fn expiry_margin(lifetime: Duration) -> Duration {
    (lifetime / 10).min(MAX_EXPIRY_MARGIN)
}

/// The SASL session of one connection, when the broker limits its lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// When the exchange that opened the session started.
    pub started: Instant,
    /// The broker's `session_lifetime_ms`.
    pub lifetime: Duration,
    /// When the next request must re-authenticate first.
    pub reauthenticate_at: Instant,
}

impl Session {
    /// The session opened by an exchange that started at `started` and was answered with
    /// `session_lifetime_ms` (ms; 0 or less, or too far for an `Instant` = the broker does
    /// not limit it: `None`).
    /// `jitter` in [0, 1) picks the point in the 85–95 % window.
    pub fn new(started: Instant, session_lifetime_ms: i64, jitter: f64) -> Option<Self> {
        if session_lifetime_ms <= 0 {
            return None;
        }
        let lifetime = Duration::from_millis(session_lifetime_ms as u64);
        let share = WINDOW_FACTOR + jitter.clamp(0.0, 1.0) * WINDOW_JITTER;
        let by_share = lifetime.mul_f64(share);
        let by_margin = lifetime.saturating_sub(expiry_margin(lifetime));
        // A lifetime beyond what an `Instant` can hold (not on Linux, but where it counts
        // u64 nanoseconds) is as good as none.
        started.checked_add(lifetime)?;
        Some(Self { started, lifetime, reauthenticate_at: started + by_share.min(by_margin) })
    }

    /// [`Session::new`] with a random point in the window.
    pub fn random(started: Instant, session_lifetime_ms: i64) -> Option<Self> {
        Self::new(started, session_lifetime_ms, rand::random::<f64>())
    }

    /// When the broker ends the session, at the earliest.
    pub fn expires_at(&self) -> Instant {
        self.started + self.lifetime
    }

    /// Whether a request sent at `now` must re-authenticate first.
    pub fn is_due(&self, now: Instant) -> bool {
        now >= self.reauthenticate_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_session_without_a_positive_lifetime() {
        let now = Instant::now();
        assert_eq!(Session::new(now, 0, 0.5), None);
        assert_eq!(Session::new(now, -1, 0.5), None);
    }

    #[test]
    fn reauthentication_falls_between_85_and_95_percent_and_before_the_margin() {
        let t0 = Instant::now();
        let at = |ms: i64, jitter: f64| Session::new(t0, ms, jitter).unwrap().reauthenticate_at - t0;
        // An hour: 85 % .. 95 %, the 2 s margin far away.
        assert_eq!(at(3_600_000, 0.0), Duration::from_millis(3_060_000));
        assert_eq!(at(3_600_000, 1.0), Duration::from_millis(3_420_000));
        // 5 s: the margin (500 ms) caps the window at 4.5 s.
        assert_eq!(at(5_000, 0.0), Duration::from_millis(4_250));
        assert_eq!(at(5_000, 1.0), Duration::from_millis(4_500));
        // 100 s: the margin is 2 s at most, below the 5 % the window leaves.
        assert_eq!(at(100_000, 1.0), Duration::from_millis(95_000));
        let s = Session::new(t0, 5_000, 0.3).unwrap();
        assert!(!s.is_due(t0 + Duration::from_millis(4_000)));
        assert!(s.is_due(t0 + Duration::from_millis(4_600)));
        assert_eq!(s.expires_at() - t0, Duration::from_secs(5));
        for _ in 0..100 {
            let r = Session::random(t0, 10_000).unwrap().reauthenticate_at - t0;
            assert!(r >= Duration::from_millis(8_500) && r <= Duration::from_millis(9_000), "{r:?}");
        }
    }
}
