//! Entering MIRRORING, the step between recovery and the copy: a failback must find the
//! destination ending exactly where mirroring stopped, the partition goes from
//! LOG_ALIGNMENT to MIRRORING, and a `--start-position` head below the copy start is filled
//! (or re-segmented) before the first Fetch.

use std::ops::ControlFlow;

use crate::wire::mirror::MirrorPartitionState;

use super::align::Alignment;
use super::{delete_records, fail, Flow, PartitionTask, Retry, Writer};

impl PartitionTask {
    /// Starts copying at the aligned position: checks a failback, transitions the partition
    /// to MIRRORING, fills the offsets below the copy start and moves the destination log
    /// start up to it. Returns the next source offset to copy (offset identity: the
    /// destination offset `w.dest_next` plus the segment's shift, or the copy start above it).
    pub(super) async fn start_copying(&self, w: &mut Writer<'_>, a: &Alignment) -> Flow<i64> {
        let (topic, p, rec, dest_end) = (self.topic.as_str(), self.partition, &a.rec, a.dest_end);
        let mut next_src = dest_end + w.shift;
        // Failback (start after STOPPED): the destination must end where mirroring stopped;
        // records written after the failover are reported, never kept or overwritten silently.
        if rec.state == MirrorPartitionState::LogAlignment
            && rec.previous_state == Some(MirrorPartitionState::Stopped)
            && rec.last_mirrored_offset >= 0
            && next_src != rec.last_mirrored_offset + 1
        {
            let message = if next_src > rec.last_mirrored_offset + 1 {
                format!(
                    "destination {topic}-{p} ends at offset {dest_end} (source offset {next_src}) but mirroring stopped after source offset {}: {} offset(s) were written on the destination after the failover; delete the destination topic (or its records) to re-seed it",
                    rec.last_mirrored_offset,
                    next_src - rec.last_mirrored_offset - 1
                )
            } else {
                format!(
                    "destination {topic}-{p} ends at offset {dest_end} (source offset {next_src}) but mirroring stopped after source offset {}: the destination lost records after the failover; delete the destination topic to re-seed it",
                    rec.last_mirrored_offset
                )
            };
            return Ok(ControlFlow::Break(fail(message, false)));
        }

        if rec.state == MirrorPartitionState::LogAlignment {
            self.control
                .transition_owned(topic, p, MirrorPartitionState::Mirroring, None)
                .await
                .map_err(|e| Retry::new(e.to_string()))?;
        }
        tracing::info!(mirror = %self.mirror, topic, partition = p, source_offset = next_src, destination_offset = dest_end, shift = w.shift, "mirroring partition");
        // Aligned: whatever made the loop retry is behind it.
        self.control.set_retrying(topic, p, None);

        // Below a start position nothing is copied: the offsets before it are a gap, filled
        // (or re-segmented) now, so the destination ends where the source does even before a
        // new record arrives. Placeholders of a skipped head carry timestamp 0: a lookup by
        // timestamp on the destination never lands on them.
        if let Some(start) = a.copy_start.filter(|s| *s > next_src) {
            if let Some(o) = self.gap(w, next_src, start, 0).await? {
                return Ok(ControlFlow::Break(o));
            }
            next_src = start;
        }
        // Nothing below the copy start is readable data: the destination log start moves up to
        // it, as for a removed head (asked once per run; DeleteRecords is idempotent).
        if let Some(start) = a.copy_start {
            let target = self.destination_offset_of(start);
            if target > 0 && target <= w.dest_next {
                if let Err(e) = delete_records(&self.dest, topic, p, target).await {
                    tracing::warn!(topic, partition = p, error = %e, destination_offset = target, "cannot move the destination log start to the copy start; the placeholders below it stay (a topic whose cleanup.policy has no delete)");
                }
            }
        }
        Ok(ControlFlow::Continue(next_src))
    }
}
