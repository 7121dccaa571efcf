//! Recovery, the second phase of a copy loop: what a previous loop (of this instance or of
//! one that owned the partition before) left open is finished before anything is copied —
//! destination transactions of ours that hold aborted records are ended
//! (docs/real-markers.md), the data producer's next sequence is read back from the
//! destination, and the log end is read again to prove that the producer state belongs to it.

use std::ops::ControlFlow;

use tokio_util::sync::CancellationToken;

use super::super::{log_end, markers};
use super::align::Alignment;
use super::{Flow, Outcome, PartitionTask, Retry, Writer};

impl PartitionTask {
    /// Finishes the open destination transactions of ours (whatever the markers mode now: a
    /// switch to placeholders, or a refusal, must not leave one to the coordinator's
    /// timeout), resumes the data producer's sequence, confirms the log end and releases the
    /// reads held at a marker of ours. Returns whether the copy writes real markers.
    pub(super) async fn recover(
        &self,
        stop: &CancellationToken,
        w: &mut Writer<'_>,
        txns: &mut markers::Txns,
        a: &Alignment,
    ) -> Flow<bool> {
        let (topic, p) = (self.topic.as_str(), self.partition);
        if let Some(o) = txns.recover(self, w, &a.segments).await? {
            return Ok(ControlFlow::Break(o));
        }
        let real_markers =
            (self.real_markers && !self.markers_refused.load(std::sync::atomic::Ordering::Relaxed)) || txns.any_open();
        markers::resume_sequence(self, w, real_markers).await?;
        proceed!(self.confirm_log_end(stop, a.dest_end).await);
        // The log end is checked: reads held at a marker of ours end (`ControlPlane::hold_reads`),
        // here and, told through the state topic, on instances that copied it before.
        self.control.release_reads(topic, p);
        self.control.note_aligned(topic, p).await.map_err(|e| Retry::new(e.message))?;
        Ok(ControlFlow::Continue(real_markers))
    }

    /// The log end is read again: the producer state just read must belong to it. Anything
    /// that landed since the first read — a marker of ours that was still being written
    /// (its transaction completing), or an append another writer had on the wire (an
    /// instance that lost the partition, whose request TCP delivered after a network cut
    /// healed) — would otherwise put the next sequence after records the offset count
    /// does not know of, and the next append would land that many offsets late. A moved log
    /// end is a retry (re-align).
    async fn confirm_log_end(&self, stop: &CancellationToken, dest_end: i64) -> Flow<()> {
        let (topic, p) = (self.topic.as_str(), self.partition);
        match log_end::settled_log_end(&self.dest, topic, p, stop, self.request_timeout).await {
            Ok(end) if end == dest_end => Ok(ControlFlow::Continue(())),
            Ok(end) => Err(Retry::new(format!(
                "destination {topic}-{p} log end moved from {dest_end} to {end} while the partition was aligned (a marker of ours completing, or an append another writer had in flight)"
            ))),
            Err(log_end::Unsettled::Stopped) => Ok(ControlFlow::Break(Outcome::Stopped)),
            Err(e) => Err(Retry::new(format!("destination {topic}-{p}: {e}"))),
        }
    }
}
