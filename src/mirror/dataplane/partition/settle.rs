//! Settling a walked chunk, the end of each round of the copy: the merged small batches go
//! out (merging never waits for the next Fetch), the progress is recorded, the destination
//! log start follows the source's (retention, DeleteRecords) and a parked loop waits before
//! it fetches again.

use tokio_util::sync::CancellationToken;

use super::super::source::SourceChunk;
use super::copy::CopyState;
use super::{delete_records, progress, Outcome, PartitionTask, Retry, Writer};

impl PartitionTask {
    /// Settles the chunk just walked: flushes the merged run, moves the next Fetch past what
    /// was written, resets the retry count once the copy has passed where it aligned,
    /// records the progress, follows the source log start, and waits the fetch backoff when
    /// `parked` (the walk waits for the source LSO to pass an ABORT marker).
    pub(super) async fn settle_chunk(
        &self,
        stop: &CancellationToken,
        w: &mut Writer<'_>,
        c: &mut CopyState,
        chunk: &SourceChunk,
        parked: bool,
    ) -> Result<Option<Outcome>, Retry> {
        // The chunk's last small batches go out now: merging never waits for the next Fetch.
        if let Some(o) = self.flush_run(w).await? {
            return Ok(Some(o));
        }
        c.fetch_at = c.fetch_at.max(c.next_src);
        // Copying again after FAILED retries: the next incident starts its retry count (and
        // backoff) from zero, so unrelated outages over a mirror's life never add up to the
        // retry cap.
        if !c.retries_reset && c.next_src > c.aligned_at {
            c.retries_reset = true;
            if c.retry_attempt > 0 {
                self.control
                    .update_partition(&self.topic, self.partition, |r| r.retry_attempt = 0)
                    .await
                    .map_err(|e| Retry::new(e.to_string()))?;
            }
        }
        self.control.set_progress_of(&c.progress_key, progress(chunk, w, c.next_src));
        if let Some(o) = self.follow_log_start(w, c, chunk.log_start_offset).await? {
            return Ok(Some(o));
        }
        if parked {
            tokio::select! {
                _ = stop.cancelled() => return Ok(Some(Outcome::Stopped)),
                _ = tokio::time::sleep(self.fetch.backoff) => {}
            }
        }
        Ok(None)
    }

    /// Follows the source log start `log_start` (retention) on the destination: its log start
    /// moves to the destination offset `log_start` maps to, once that offset is written and
    /// acknowledged. A refusal is logged, not retried until the source's moves again.
    async fn follow_log_start(
        &self,
        w: &mut Writer<'_>,
        c: &mut CopyState,
        log_start: i64,
    ) -> Result<Option<Outcome>, Retry> {
        if log_start <= c.dest_log_start_followed {
            return Ok(None);
        }
        let (topic, p) = (self.topic.as_str(), self.partition);
        let target = self.destination_offset_of(log_start);
        if target > 0 && target <= w.dest_next {
            // (DeleteRecords above the high watermark is refused: the appends in
            // flight are answered first.)
            if w.inflight.acknowledged_end().is_some_and(|end| target > end) {
                if let Some(o) = self.settle_all(w).await? {
                    return Ok(Some(o));
                }
            }
            match delete_records(&self.dest, topic, p, target).await {
                Ok(()) => c.dest_log_start_followed = log_start,
                Err(e) => {
                    tracing::warn!(topic, partition = p, error = %e, "cannot move the destination log start")
                }
            }
        } else {
            c.dest_log_start_followed = log_start;
        }
        Ok(None)
    }
}
