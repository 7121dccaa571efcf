//! What the data plane reports to the control plane, held in memory only (never persisted):
//! each partition's progress, the last error of a retrying copy loop, the source offset a
//! stopping partition ends at, the live figures, and the source offsets lost to retention.
//! `--describe` and the metrics read them.

use std::sync::atomic::Ordering;

use super::ControlPlane;

impl ControlPlane {
    /// Records what the data plane saw of a partition.
    pub fn set_progress(&self, topic: &str, partition: i32, p: super::super::dataplane::Progress) {
        self.set_progress_of(&(topic.to_string(), partition), p);
    }

    /// [`ControlPlane::set_progress`] by key: no allocation once the partition has progress
    /// (a copy loop records it after every Fetch answer, empty ones included).
    pub fn set_progress_of(&self, key: &(String, i32), p: super::super::dataplane::Progress) {
        let before = match self.progress.get_mut(key) {
            Some(mut e) => Some(std::mem::replace(&mut *e, p)),
            None => self.progress.insert(key.clone(), p),
        };
        if let Some(before) = before {
            if p.next_source > before.next_source {
                self.retrying.remove(key);
            }
        }
    }

    /// Records the last error of a partition whose copy loop re-aligns and retries (shown by
    /// `--describe` until the loop copies again); `None` clears it.
    pub fn set_retrying(&self, topic: &str, partition: i32, error: Option<String>) {
        let key = (topic.to_string(), partition);
        match error {
            Some(e) => {
                self.retrying.insert(key, e);
            }
            None => {
                self.retrying.remove(&key);
            }
        }
    }

    /// Records the last source offset the destination log holds for a partition that is
    /// about to become STOPPED (its destination log end mapped through the offset map, − 1).
    pub fn set_stopped_at(&self, topic: &str, partition: i32, last_mirrored_offset: i64) {
        self.stopped_at.insert((topic.to_string(), partition), last_mirrored_offset);
    }

    /// The last error of a retrying partition, if it is retrying.
    pub fn retrying(&self, topic: &str, partition: i32) -> Option<String> {
        self.retrying.get(&(topic.to_string(), partition)).map(|e| e.clone())
    }

    /// What the live refresher last read of each partition (`dataplane::live`).
    pub fn live(&self) -> &super::super::dataplane::live::LiveFigures {
        &self.live
    }

    /// What the data plane last saw of a partition.
    pub fn progress(&self, topic: &str, partition: i32) -> Option<super::super::dataplane::Progress> {
        self.progress.get(&(topic.to_string(), partition)).map(|p| *p)
    }

    /// Counts source offsets lost to source retention (metric `mirror lost offsets`).
    pub fn count_lost_offsets(&self, n: i64) {
        self.lost_offsets.fetch_add(n, Ordering::Relaxed);
    }

    /// Source offsets lost to source retention so far.
    pub fn lost_offsets(&self) -> i64 {
        self.lost_offsets.load(Ordering::Relaxed)
    }
}
