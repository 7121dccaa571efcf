//! The destination log end a copy loop resumes from (DESIGN §4.6–4.7, issue 9 item 2).
//!
//! On a replicated destination an append can sit in the leader's log above the high
//! watermark: acknowledged by the leader, not yet by the whole ISR. A consumer's ListOffsets
//! answers the high watermark, so a loop that resumed there would resend that batch; the
//! broker's de-duplication cannot be relied on (it forgets a producer whose batches carry
//! timestamps older than `producer.id.expiration.ms`, the normal case for old history), so the
//! resend could land twice. Resuming is only safe once the high watermark has reached the
//! leader's log end offset: the tail is then either replicated (and counted) or truncated by
//! a leader change (and resent). This module waits for that. It never writes.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::cluster::{ClusterClient, LATEST_TIMESTAMP};

/// How often the high watermark is compared with the leader's log end while they differ.
const POLL: Duration = Duration::from_millis(100);

/// Why no settled log end could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsettled {
    /// `stop` was cancelled while waiting.
    Stopped,
    /// A ListOffsets failed (transport or Kafka error, as text).
    Read(String),
    /// The high watermark stayed below the leader's log end for all of `patience`.
    Behind {
        /// Last high watermark read, offsets.
        high_watermark: i64,
        /// Last leader log end offset read, offsets.
        log_end: i64,
        /// How long it was waited for.
        waited: Duration,
    },
}

impl std::fmt::Display for Unsettled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsettled::Stopped => write!(f, "stopped"),
            Unsettled::Read(e) => write!(f, "cannot read the destination log end: {e}"),
            Unsettled::Behind { high_watermark, log_end, waited } => write!(
                f,
                "the destination leader's log ends at {log_end} but its high watermark stayed at {high_watermark} for {} ms (the ISR does not acknowledge the last appends)",
                waited.as_millis()
            ),
        }
    }
}

/// The destination log end offset of `topic`-`partition` once nothing above the high
/// watermark remains on the leader: the high watermark (ListOffsets, replica id -1) read when
/// it equals the leader's log end offset (ListOffsets, replica id -2), polled every 100 ms
/// for up to `patience`.
///
/// # Errors
/// [`Unsettled`]: cancelled, a ListOffsets failure, or still behind after `patience`.
pub async fn settled_log_end(
    dest: &ClusterClient,
    topic: &str,
    partition: i32,
    stop: &CancellationToken,
    patience: Duration,
) -> Result<i64, Unsettled> {
    let start = tokio::time::Instant::now();
    loop {
        let log_end = dest.leader_log_end(topic, partition).await.map_err(|e| Unsettled::Read(e.to_string()))?;
        let high_watermark =
            dest.list_offsets(topic, partition, LATEST_TIMESTAMP).await.map_err(|e| Unsettled::Read(e.to_string()))?;
        // (Read in this order, a high watermark at or above the log end read before it means
        // nothing was above it then; a leader change in between shows as a difference and is
        // read again.)
        if high_watermark >= log_end {
            return Ok(high_watermark);
        }
        let waited = start.elapsed();
        if waited >= patience {
            return Err(Unsettled::Behind { high_watermark, log_end, waited });
        }
        tracing::debug!(
            topic,
            partition,
            high_watermark,
            log_end,
            "destination appends above the high watermark: waiting for the ISR"
        );
        tokio::select! {
            _ = stop.cancelled() => return Err(Unsettled::Stopped),
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}
