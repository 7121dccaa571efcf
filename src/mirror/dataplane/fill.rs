//! Filling source offsets that carry no committed data (markers, aborted records, compaction
//! holes, a removed head) with placeholder batches (DESIGN §4.2–4.3), or starting a new offset
//! segment when the gap is beyond `mirror.fill.max.gap`.
//!
//! A fill is streamed: one placeholder batch of at most [`PLACEHOLDER_CHUNK`] offsets is built
//! and appended at a time (≈ 160 KB in memory whatever the gap), each append checked like any
//! other. The destination log end is the checkpoint: after a crash mid-fill the copy loop
//! resumes at the source offset the destination end maps to, and the placeholder keys (nonce
//! and source offset) make the bytes written again the same. A large fill logs its progress,
//! moves the partition's progress (`--describe`, lag metrics) after every chunk, and removes a
//! filled head (source offsets below the source log start) with DeleteRecords as it goes.

use std::time::Duration;

use crate::mirror::model::{gap_action, GapAction, OffsetSegment};
use crate::wire::batch::{self, OwnBatch};

use super::partition::{delete_records, failpoint_mid_batch, is_policy_refusal, Outcome, PartitionTask, Retry, Writer};

/// Largest placeholder batch, in offsets (~160 KB; benches/fill_rate.rs measured 5.8M
/// offsets/s with 5000-offset batches against 2.9M/s with 1000).
pub(super) const PLACEHOLDER_CHUNK: i64 = 5000;

/// Gaps of at least this many offsets are filled with progress: INFO log lines, progress
/// for `--describe` and lag after each chunk, and a removed head deleted as it goes.
const FILL_REPORT_OFFSETS: i64 = 1_000_000;
/// How often a large fill logs how far it got.
const FILL_REPORT_EVERY: Duration = Duration::from_secs(10);
/// During a head fill, the destination log start follows the fill every this many offsets
/// (DeleteRecords; ≈ 320 MB of placeholders), so the head's placeholders are removed while
/// the fill runs instead of all at the end.
const FILL_REMOVE_EVERY: i64 = 10_000_000;
/// `placeholder_end` is rounded up to a multiple of this many offsets after the head, so a
/// compacted source's many holes cost one state write per 100,000 offsets.
const PLACEHOLDER_END_STEP: i64 = 100_000;

impl PartitionTask {
    /// Fills source offsets `[from, to)`: placeholders within the fill bound, otherwise a new
    /// offset segment starting at `to` (persisted before anything is appended after it).
    /// Waits for the appends in flight first: the segment and the placeholder bound are
    /// recorded at the acknowledged log end.
    pub(super) async fn gap(&self, w: &mut Writer<'_>, from: i64, to: i64, ts: i64) -> Result<Option<Outcome>, Retry> {
        let n = to - from;
        if n <= 0 {
            return Ok(None);
        }
        if let Some(o) = self.settle_all(w).await? {
            return Ok(Some(o));
        }
        let mut segs = self.record().map(|r| r.segments).unwrap_or_default();
        if let GapAction::NewSegment { replace_last } = gap_action(&segs, w.dest_next, n, self.fill_max_gap) {
            // (A last segment that holds no offset yet is replaced: nothing was written in it,
            // so a run of gaps leaves one segment, and the list stays bounded.)
            if replace_last {
                segs.pop();
            }
            let seg = OffsetSegment { source_start: to, destination_start: w.dest_next };
            segs.push(seg);
            self.persist_segments(segs).await?;
            tracing::info!(mirror = %self.mirror, topic = %self.topic, partition = self.partition, from, to, shift = seg.shift(), replace_last, "source gap beyond mirror.fill.max.gap: new offset segment");
            w.shift = seg.shift();
            return Ok(None);
        }
        // Recorded before anything is appended (see `PartitionStateRecord::placeholder_end`).
        let end = w.dest_next + n;
        if self.record().and_then(|r| r.placeholder_end).unwrap_or(0) < end {
            let mark = if w.dest_next == 0 {
                end
            } else {
                (end + PLACEHOLDER_END_STEP - 1) / PLACEHOLDER_END_STEP * PLACEHOLDER_END_STEP
            };
            self.control
                .update_partition(&self.topic, self.partition, |r| r.placeholder_end = Some(mark))
                .await
                .map_err(|e| Retry::new(e.to_string()))?;
        }
        let mut src = from;
        let large = n >= FILL_REPORT_OFFSETS;
        let started = tokio::time::Instant::now();
        let mut reported = started;
        let mut removed_up_to = from;
        // Set when the destination refused DeleteRecords (a topic whose cleanup.policy has no
        // `delete`): not asked again during this fill.
        let mut removal_refused = false;
        // Nothing below the copy start (`--start-position`) is readable data either.
        let copy_start = self.record().and_then(|r| r.copy_start).unwrap_or(-1);
        if large {
            tracing::info!(mirror = %self.mirror, topic = %self.topic, partition = self.partition, from, to, offsets = n, destination_offset = w.dest_next, "filling a source gap with placeholders (streamed in chunks; resumes from the destination log end after a restart)");
        }
        while src < to {
            if large && src > from {
                self.fill_progress(w, src);
                // A removed head (source offsets below the source log start) is removed on
                // the destination as it is filled, so its placeholders never pile up on disk.
                let source_log_start =
                    self.control.progress(&self.topic, self.partition).map_or(-1, |g| g.source_log_start);
                let removable = src.min(source_log_start.max(copy_start));
                if !removal_refused && removable - removed_up_to >= FILL_REMOVE_EVERY {
                    let target = self.destination_offset_of(removable);
                    // Tried once per FILL_REMOVE_EVERY offsets whatever the answer: a failure is
                    // retried with the next step, not on every chunk.
                    removed_up_to = removable;
                    if let Err(e) = delete_records(&self.dest, &self.topic, self.partition, target).await {
                        removal_refused = is_policy_refusal(&e);
                        tracing::warn!(topic = %self.topic, partition = self.partition, error = %e, refused = removal_refused, "cannot move the destination log start during a fill (not asked again during this fill if refused by the topic's cleanup.policy)");
                    }
                }
                if reported.elapsed() >= FILL_REPORT_EVERY {
                    reported = tokio::time::Instant::now();
                    tracing::info!(mirror = %self.mirror, topic = %self.topic, partition = self.partition, from, to, filled = src - from, remaining = to - src, "filling a source gap with placeholders");
                }
            }
            let count = (to - src).min(PLACEHOLDER_CHUNK) as i32;
            let own = OwnBatch {
                base_offset: 0,
                count,
                timestamp: ts,
                producer_id: w.producer_id,
                producer_epoch: w.producer_epoch,
                base_sequence: w.next_seq,
            };
            let bytes = batch::placeholder_batch(&own, self.nonce, src);
            if let Some(o) = self.append(w, vec![bytes], i64::from(count)).await? {
                return Ok(Some(o));
            }
            src += i64::from(count);
            if src < to {
                failpoint_mid_batch();
            }
        }
        if large {
            self.fill_progress(w, to);
            let secs = started.elapsed().as_secs_f64();
            tracing::info!(mirror = %self.mirror, topic = %self.topic, partition = self.partition, from, to, offsets = n, seconds = format!("{secs:.1}"), "filled a source gap with placeholders");
        }
        Ok(None)
    }

    /// Progress while a large gap is filled: `--describe` and the lag metrics see the
    /// destination end and the next source offset move, not a partition stuck at the gap.
    fn fill_progress(&self, w: &Writer<'_>, next_source: i64) {
        if let Some(mut g) = self.control.progress(&self.topic, self.partition) {
            g.destination_end = w.dest_next;
            g.next_source = next_source;
            g.read_ms = crate::mirror::model::now_ms();
            self.control.set_progress(&self.topic, self.partition, g);
        }
    }
}
