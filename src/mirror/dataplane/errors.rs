//! What a copy loop does with a Kafka error, and when retrying has to stop (issue 9, item 4).
//!
//! Errors are sorted by whether waiting can heal them: leader moves, timeouts and unreachable
//! brokers heal by themselves (re-align and retry); an authorization failure heals only when
//! an operator grants the ACL (FAILED, retried with the `mirror.failed.retry.*` backoff);
//! a record the destination refuses for its shape or size never heals by waiting (FAILED, not
//! retried: the operator changes a topic config, then pauses and resumes). And any error that
//! repeats without progress for longer than [`StallGuard`]'s bound puts the partition in
//! FAILED (retryable), so nothing loops silently for ever.

use std::time::Duration;

use tokio::time::Instant;

use crate::client::cluster::KafkaErrorCode;

/// What to do with a partition-level Kafka error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Re-align and try again after the fetch backoff.
    Transient,
    /// FAILED, retried automatically with backoff (an operator can fix it without touching
    /// the mirror, e.g. an ACL).
    FailRetryable,
    /// FAILED, not retried: the record or request can never pass as it is.
    FailPermanent,
}

/// Classifies a Kafka error code answered to a mirror's Fetch (source) or Produce
/// (destination). Codes from Kafka's `Errors` (protocol guide, "Error Codes").
pub fn classify(code: i16) -> ErrorClass {
    match code {
        // MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_REQUIRED_ACKS, INVALID_TIMESTAMP,
        // UNSUPPORTED_FOR_MESSAGE_FORMAT, POLICY_VIOLATION, UNSUPPORTED_COMPRESSION_TYPE,
        // INVALID_RECORD, UNSUPPORTED_VERSION (35). (CORRUPT_MESSAGE (2) is retriable in Kafka,
        // `CorruptRecordException extends RetriableException`: a corruption on the wire heals
        // on resend; one that repeats fails through the stall bound.)
        10 | 18 | 21 | 32 | 35 | 43 | 44 | 76 | 87 => ErrorClass::FailPermanent,
        // TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
        // TRANSACTIONAL_ID_AUTHORIZATION_FAILED, SASL_AUTHENTICATION_FAILED.
        29 | 30 | 31 | 53 | 58 => ErrorClass::FailRetryable,
        _ => ErrorClass::Transient,
    }
}

/// The message a FAILED partition shows for a refused append or fetch: the broker's error
/// by name, its message, and where.
pub fn refusal(side: &str, code: i16, message: Option<&str>, topic: &str, partition: i32, offset: i64) -> String {
    let hint = match code {
        10 | 18 => ": raise max.message.bytes on the destination topic (and message.max.bytes on its brokers) to at least the source's, then pause and resume the mirror topic",
        29 | 30 | 31 | 53 | 58 => ": grant the mirror's principal the ACL it needs; the partition retries with backoff",
        32 => ": the destination topic's message.timestamp.* limits refuse the source's timestamps",
        _ => "",
    };
    format!(
        "{side} refused {topic}-{partition} at offset {offset}: {}{}{hint}",
        KafkaErrorCode(code),
        message.map(|m| format!(" ({m})")).unwrap_or_default()
    )
}

/// Consecutive retries without progress after which a copy loop gives up: the partition goes
/// FAILED (retryable) with the last error, and the data plane's FAILED retries take over.
pub const STALL_ATTEMPTS: u32 = 10;
/// And the shortest time without progress before that, so a brief outage (a broker restart,
/// a leader election) never fails a partition.
pub const STALL_MIN: Duration = Duration::from_secs(60);

/// Counts a copy loop's retries that made no progress.
#[derive(Debug, Default)]
pub struct StallGuard {
    attempts: u32,
    since: Option<Instant>,
    mark: Option<i64>,
}

impl StallGuard {
    /// Records a retry at `position` (the next source offset to copy): returns the time
    /// without progress once [`STALL_ATTEMPTS`] retries and [`STALL_MIN`] have passed at the
    /// same position.
    pub fn retried_at(&mut self, position: i64, now: Instant) -> Option<Duration> {
        if self.mark != Some(position) {
            *self = Self { attempts: 0, since: Some(now), mark: Some(position) };
        }
        self.attempts += 1;
        let stalled = now.duration_since(self.since.unwrap_or(now));
        (self.attempts >= STALL_ATTEMPTS && stalled >= STALL_MIN).then_some(stalled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_shape_errors_are_permanent_authorization_retryable_leader_moves_transient() {
        assert_eq!(classify(10), ErrorClass::FailPermanent);
        assert_eq!(classify(87), ErrorClass::FailPermanent);
        assert_eq!(classify(32), ErrorClass::FailPermanent);
        assert_eq!(classify(29), ErrorClass::FailRetryable);
        assert_eq!(classify(6), ErrorClass::Transient);
        assert_eq!(classify(7), ErrorClass::Transient);
        assert_eq!(classify(19), ErrorClass::Transient);
    }

    #[test]
    fn a_refusal_names_the_error_the_partition_and_what_to_do() {
        let m = refusal("destination", 10, Some("too big"), "orders", 3, 42);
        assert!(
            m.contains("MESSAGE_TOO_LARGE")
                && m.contains("orders-3")
                && m.contains("42")
                && m.contains("max.message.bytes"),
            "{m}"
        );
    }

    #[test]
    fn retries_without_progress_fail_only_after_both_bounds() {
        let t0 = Instant::now();
        let mut g = StallGuard::default();
        for i in 0..STALL_ATTEMPTS - 1 {
            assert_eq!(g.retried_at(5, t0 + Duration::from_secs(u64::from(i) * 10)), None);
        }
        // 10 attempts but only 90 s: fails (>= 60 s).
        assert!(g.retried_at(5, t0 + Duration::from_secs(90)).is_some());
        // Progress resets the count.
        assert_eq!(g.retried_at(6, t0 + Duration::from_secs(91)), None);
        // Many quick retries alone do not fail.
        let mut g = StallGuard::default();
        for _ in 0..50 {
            assert_eq!(g.retried_at(7, t0 + Duration::from_secs(1)), None);
        }
    }
}
