//! Several instances, one state: what this instance owns (group membership, `mirror::members`)
//! and how records other instances wrote to `__mirror_state` are applied here
//! (`mirror::follow` reads them).
//!
//! Rules (docs/operations.md, "Several instances"):
//! - Records are applied in log order per key: a followed record at or below the offset of
//!   the last record applied for its key (written here or followed) is older and skipped.
//! - A partition record carries the owner generation of the instance that wrote it as the
//!   partition's owner. One older than a generation already seen for that partition comes
//!   from a stale owner (a paused process that lost its work): it is not applied, and if
//!   this instance owns the partition it writes its own record again, so that compaction
//!   keeps the owner's.
//! - The data fields of a partition record (offset segments, producer id, source epochs, …)
//!   belong to its owner: a record written without an owner generation (an admin request
//!   through another instance stepping the state) keeps the owner's data fields here, and the
//!   owner writes the merged record. A new assignment takes effect only once this instance
//!   has followed the state topic to its end (`sharing::catch_up`), so it starts from what
//!   the previous owner wrote.
//! - Data-plane writes of a partition ([`ControlPlane::update_partition`],
//!   [`ControlPlane::transition_owned`]) are refused unless this instance owns it and its
//!   lease (the last heartbeat + session timeout) has not run out.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::{ControlPlane, MirrorError, StateWrite, UNKNOWN_SERVER_ERROR};
use crate::mirror::model::PartitionStateRecord;
use crate::mirror::store::{StateChange, StateKey, StateValue};
use crate::wire::mirror::MirrorPartitionState;

/// The instant leases are counted from.
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Until when an instance may act on its assignment without a fresh heartbeat: renewed by
/// each successful heartbeat to `now + session timeout − heartbeat interval`, so it runs out
/// before the group coordinator can hand the work to another member. Monotonic clock: a
/// process paused (SIGSTOP) past it finds it expired the moment it resumes.
#[derive(Debug, Clone, Default)]
pub struct Lease(Arc<LeaseInner>);

#[derive(Debug, Default)]
struct LeaseInner {
    /// Nanoseconds since [`base`] until which the lease holds (0: expired).
    until: AtomicU64,
    /// The group generation it was last renewed for.
    generation: std::sync::atomic::AtomicI32,
}

impl Lease {
    /// A lease valid for `d` from now, for generation 0.
    #[cfg(test)]
    fn for_duration(d: Duration) -> Self {
        let lease = Self::default();
        lease.renew(d);
        lease
    }

    /// Extends the lease to `d` from now (same generation).
    fn renew(&self, d: Duration) {
        let until = (Instant::now() + d).saturating_duration_since(base()).as_nanos();
        self.0.until.store(u64::try_from(until).unwrap_or(u64::MAX), Ordering::Release);
    }

    /// Extends the lease to `d` from now for group generation `generation`: an ownership of
    /// another generation does not hold through it.
    pub fn renew_for(&self, generation: i32, d: Duration) {
        self.0.generation.store(generation, Ordering::Release);
        self.renew(d);
    }

    /// Ends the lease now.
    pub fn expire(&self) {
        self.0.until.store(0, Ordering::Release);
    }

    /// Whether the lease still holds.
    pub fn is_valid(&self) -> bool {
        let now = u64::try_from(Instant::now().saturating_duration_since(base()).as_nanos()).unwrap_or(u64::MAX);
        now < self.0.until.load(Ordering::Acquire)
    }

    /// Whether the lease holds for group generation `generation`.
    pub fn is_valid_for(&self, generation: i32) -> bool {
        self.0.generation.load(Ordering::Acquire) == generation && self.is_valid()
    }
}

/// The mirror work one instance owns in one group generation.
#[derive(Debug, Clone, Default)]
pub struct Ownership {
    /// Group generation id of the assignment.
    pub generation: i32,
    /// Mirror partitions `(topic, partition)` whose copy loop runs here.
    pub partitions: BTreeSet<(String, i32)>,
    /// Mirrors whose metadata sync runs here.
    pub mirrors: BTreeSet<String>,
    /// Every assigned mirror partition's owner (instance name), as the leader assigned them.
    pub owners: BTreeMap<(String, i32), String>,
    /// While it holds.
    pub lease: Lease,
}

/// Waits until this instance has applied `__mirror_state` up to its end as of the call
/// (bounded); see [`ControlPlane::set_follow_barrier`].
pub type FollowBarrier = Arc<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

impl ControlPlane {
    /// Installs the barrier admin requests pass before they are answered.
    pub fn set_follow_barrier(&self, barrier: FollowBarrier) {
        *self.follow_barrier.write().unwrap_or_else(|e| e.into_inner()) = Some(barrier);
    }

    /// Waits until what other instances wrote to `__mirror_state` before now is applied here
    /// (no-op without a barrier: a single instance, or tests of the control plane alone).
    pub async fn follow_barrier(&self) {
        let barrier = self.follow_barrier.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(b) = barrier {
            b().await;
        }
    }

    /// Installs the work this instance owns (`None`: not in a group, owns everything).
    pub fn set_ownership(&self, ownership: Option<Ownership>) {
        // From now on a record of an earlier owner is stale (the assignment takes effect
        // after following the state topic to its end). Set, not raised: a group the
        // coordinator deleted and re-created starts its generations again at 1.
        if let Some(o) = &ownership {
            for (topic, p) in &o.partitions {
                self.generations.insert((topic.clone(), *p), o.generation);
            }
        }
        *self.ownership.write().unwrap_or_else(|e| e.into_inner()) = ownership.map(Arc::new);
    }

    fn ownership(&self) -> Option<Arc<Ownership>> {
        self.ownership.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether this instance may copy `topic`-`partition` now: not in a group, or assigned
    /// it with a lease that holds.
    pub fn owns_partition(&self, topic: &str, partition: i32) -> bool {
        match self.ownership() {
            None => true,
            Some(o) => o.lease.is_valid_for(o.generation) && o.partitions.contains(&(topic.to_string(), partition)),
        }
    }

    /// The write permission of this instance now, to be asked later whether it still holds:
    /// the lease of the current group generation (`None`: not in a group, always holds).
    /// A rebalance does not end it; only the lease running out (or being renewed for another
    /// generation) does.
    pub fn lease_token(&self) -> Option<crate::mirror::dataplane::produce::LeaseToken> {
        let o = self.ownership()?;
        let (lease, generation) = (o.lease.clone(), o.generation);
        Some(Arc::new(move || lease.is_valid_for(generation)))
    }

    /// Whether this instance runs the metadata sync of `mirror` now.
    pub fn owns_mirror(&self, mirror: &str) -> bool {
        match self.ownership() {
            None => true,
            Some(o) => o.lease.is_valid_for(o.generation) && o.mirrors.contains(mirror),
        }
    }

    /// Whether other instances may serve clients of this state topic: this instance is in a
    /// group (its members are not all known here: one with no work is in no owner map).
    pub(super) fn other_instances(&self) -> bool {
        self.ownership().is_some()
    }

    /// The instance that copies `topic`-`partition` per the last assignment this instance
    /// received (`None`: not in a group, or not assigned).
    pub fn owner_of(&self, topic: &str, partition: i32) -> Option<String> {
        self.ownership().and_then(|o| o.owners.get(&(topic.to_string(), partition)).cloned())
    }

    /// The owner generation to stamp on a partition record written now: this instance's
    /// group generation when it owns the partition.
    pub(super) fn write_generation(&self, topic: &str, partition: i32) -> Option<i32> {
        self.ownership()
            .filter(|o| o.lease.is_valid_for(o.generation) && o.partitions.contains(&(topic.to_string(), partition)))
            .map(|o| o.generation)
    }

    pub(super) fn note_generation(&self, topic: &str, partition: i32, generation: i32) {
        let mut e = self.generations.entry((topic.to_string(), partition)).or_insert(generation);
        *e = (*e).max(generation);
    }

    /// Refuses a data-plane write of a partition this instance does not own (fencing).
    pub(super) fn check_owner(&self, topic: &str, partition: i32) -> Result<(), MirrorError> {
        if self.owns_partition(topic, partition) {
            return Ok(());
        }
        Err(MirrorError {
            code: UNKNOWN_SERVER_ERROR,
            message: format!(
                "{topic}-{partition} is not owned by this instance any more (group rebalance, or its lease ran out): write refused"
            ),
        })
    }

    /// [`ControlPlane::transition`] for the copy loop and the data plane: refused unless this
    /// instance owns the partition ([`ControlPlane::owns_partition`]).
    ///
    /// # Errors
    /// Not the owner; a store failure.
    pub async fn transition_owned(
        &self,
        topic: &str,
        partition: i32,
        to: MirrorPartitionState,
        error: Option<(String, bool)>,
    ) -> Result<bool, MirrorError> {
        self.check_owner(topic, partition)?;
        self.transition(topic, partition, to, error).await
    }

    /// Applies records read from `__mirror_state` (in log order, any writer) that are newer
    /// than what this instance holds for their keys. Mirror definitions arrive with their
    /// secret configs already decrypted. Returns the partitions `(topic, partition)` this
    /// instance owns whose record it must write again (a stale owner's or a merged one).
    pub async fn apply_followed(&self, changes: Vec<StateChange>) -> Vec<(String, i32)> {
        let _w = self.write_lock.lock().await;
        let mut reassert = Vec::new();
        for change in changes {
            let overwritten_by = {
                let mut offsets = self.key_offsets.lock().unwrap_or_else(|e| e.into_inner());
                let own = self
                    .own_writes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&(change.key.clone(), change.offset));
                if own {
                    self.forget_bases(&change.key, change.offset);
                }
                match offsets.get(&change.key).filter(|&&o| o >= change.offset) {
                    Some(&latest) if !own && latest > change.offset => Some(latest),
                    Some(_) => continue,
                    None => {
                        offsets.insert(change.key.clone(), change.offset);
                        None
                    }
                }
            };
            if let Some(latest) = overwritten_by {
                // Another instance wrote this key before a write of this instance that was
                // computed without it (two admin requests at once): the log keeps this
                // instance's value. Mirrors and mirror topics get a merge of both written
                // (`merge`); what cannot be merged is said, never silent.
                match self.merge_concurrent(&change.key, change.offset, change.value.as_ref()).await {
                    Some(true) => {
                        tracing::info!(key = ?change.key, offset = change.offset, later = latest, "merged a concurrent state change through another instance with this instance's later write");
                        metrics::counter!("mirrorgate_state_concurrent_overwrites_total", "result" => "merged")
                            .increment(1);
                    }
                    Some(false) => {}
                    None => {
                        tracing::warn!(
                            key = ?change.key,
                            offset = change.offset,
                            overwritten_by = latest,
                            "a concurrent state change through another instance was overwritten by this instance's write; check the result and repeat the request if needed"
                        );
                        metrics::counter!("mirrorgate_state_concurrent_overwrites_total", "result" => "overwritten")
                            .increment(1);
                    }
                }
                continue;
            }
            metrics::counter!("mirrorgate_state_records_followed_total").increment(1);
            match (change.key, change.value) {
                (StateKey::Mirror { name }, Some(StateValue::Mirror(def))) => {
                    tracing::debug!(mirror = %name, offset = change.offset, "followed a mirror definition");
                    self.update_state(|s| {
                        s.mirrors.insert(name, def);
                    });
                }
                (StateKey::Mirror { name }, _) => {
                    tracing::debug!(mirror = %name, offset = change.offset, "followed a mirror deletion");
                    self.update_state(|s| {
                        s.mirrors.remove(&name);
                    });
                }
                (StateKey::Topic { topic, .. }, Some(StateValue::Topic(t))) => {
                    tracing::debug!(mirror = %t.mirror, topic = %topic, desired = ?t.desired, "followed a mirror topic");
                    self.update_state(|s| {
                        s.topics.insert(topic, t);
                    });
                }
                (StateKey::Topic { mirror, topic }, _) => {
                    self.update_state(|s| {
                        if s.topics.get(&topic).is_some_and(|t| t.mirror == mirror) {
                            s.topics.remove(&topic);
                        }
                    });
                }
                (StateKey::Partition { topic, partition, .. }, Some(StateValue::Partition(rec))) => {
                    if let Some(again) = self.apply_followed_partition(topic, partition, rec) {
                        reassert.push(again);
                    }
                }
                (StateKey::Partition { mirror, topic, partition }, _) => {
                    self.update_state(|s| {
                        if s.partitions.get(&(topic.clone(), partition)).is_some_and(|p| p.mirror == mirror) {
                            s.partitions.remove(&(topic.clone(), partition));
                        }
                        self.read_caps.retain(|(t, p), _| s.partitions.contains_key(&(t.clone(), *p)));
                    });
                }
            }
        }
        reassert
    }

    /// Applies one followed partition record (see the module rules); returns the partition
    /// when this instance, its owner, must write its record again.
    fn apply_followed_partition(
        &self,
        topic: String,
        partition: i32,
        mut rec: PartitionStateRecord,
    ) -> Option<(String, i32)> {
        let key = (topic.clone(), partition);
        let seen = self.generations.get(&key).map(|g| *g);
        let ours = self.write_generation(&topic, partition);
        if let (Some(g), Some(seen)) = (rec.owner_generation, seen) {
            if g < seen {
                tracing::warn!(
                    topic = %topic,
                    partition,
                    generation = g,
                    current = seen,
                    "ignored a partition state written by a stale owner (an older group generation)"
                );
                metrics::counter!("mirrorgate_state_stale_owner_records_total").increment(1);
                return ours.map(|_| key);
            }
        }
        if let Some(g) = rec.owner_generation {
            self.note_generation(&topic, partition, g);
        }
        let mut again = None;
        if ours.is_some() && rec.owner_generation.is_none() {
            // An admin request through another instance stepped the state while this one
            // owns the partition: keep the owner's data fields. (A record of an earlier
            // owner, written before the handover, applies in full: the assignment took
            // effect only after following the state topic to its end, `sharing::catch_up`,
            // and once this owner has written, older generations are stale.)
            if let Some(current) = self.partition(&topic, partition) {
                let merged = keep_data_fields(&current, rec.clone());
                if merged != rec {
                    again = Some(key.clone());
                }
                rec = merged;
            }
        }
        // A read hold this instance keeps at a marker of a partition it no longer copies
        // ends once the partition's owner has aligned it (marker transactions complete,
        // duplicates hidden) or it is stopped: the hold was for a marker only the copy loop
        // can check, and the loop runs elsewhere now.
        let aligned_elsewhere =
            ours.is_none() && rec.aligned_generation.is_some() && rec.aligned_generation == rec.owner_generation;
        if (aligned_elsewhere || rec.state == MirrorPartitionState::Stopped) && self.read_caps.remove(&key).is_some() {
            tracing::info!(topic = %topic, partition, generation = ?rec.aligned_generation, state = rec.state.as_str(), "read hold at a marker ended: the partition's owner aligned it");
        }
        tracing::debug!(topic = %topic, partition, state = rec.state.as_str(), "followed a mirror partition state");
        self.update_state(|s| {
            s.partitions.insert(key, rec);
        });
        again
    }

    /// Records, once per group generation, that this instance's copy loop finished aligning
    /// `topic`-`partition` (`PartitionStateRecord::aligned_generation`), so other instances
    /// end read holds they keep at its markers. Only in a group, and only for partitions
    /// that use transactions (only those have holds).
    ///
    /// # Errors
    /// Not the owner any more; a store failure.
    pub async fn note_aligned(&self, topic: &str, partition: i32) -> Result<(), MirrorError> {
        let Some(generation) = self.write_generation(topic, partition) else { return Ok(()) };
        let due = self
            .partition(topic, partition)
            .is_some_and(|r| r.transactions_used && r.aligned_generation != Some(generation));
        if !due {
            return Ok(());
        }
        self.update_partition(topic, partition, |r| r.aligned_generation = Some(generation)).await.map(|_| ())
    }

    /// Writes the in-memory record of a partition this instance owns again (after a stale
    /// owner's or a merged record was followed).
    ///
    /// # Errors
    /// Not the owner any more; a store failure.
    pub async fn reassert_partition(&self, topic: &str, partition: i32) -> Result<(), MirrorError> {
        self.check_owner(topic, partition)?;
        let _w = self.write_lock.lock().await;
        let Some(rec) = self.partition(topic, partition) else { return Ok(()) };
        self.persist(StateWrite::Partition(rec.clone())).await?;
        Ok(())
    }
}

/// `theirs` with the data fields (what the copy loop alone writes) of `ours`.
fn keep_data_fields(ours: &PartitionStateRecord, theirs: PartitionStateRecord) -> PartitionStateRecord {
    PartitionStateRecord {
        segments: ours.segments.clone(),
        source_epochs: ours.source_epochs.clone(),
        producer_id: ours.producer_id,
        producer_epoch: ours.producer_epoch,
        destination_topic_id: ours.destination_topic_id.clone(),
        copy_start: ours.copy_start,
        placeholder_end: ours.placeholder_end,
        transactions_used: ours.transactions_used,
        last_mirrored_offset: ours.last_mirrored_offset.max(theirs.last_mirrored_offset),
        ..theirs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_runs_out() {
        let lease = Lease::for_duration(Duration::from_millis(30));
        assert!(lease.is_valid());
        std::thread::sleep(Duration::from_millis(40));
        assert!(!lease.is_valid());
        lease.renew(Duration::from_secs(5));
        assert!(lease.is_valid());
        lease.expire();
        assert!(!lease.is_valid());
        assert!(!Lease::default().is_valid());
        lease.renew_for(7, Duration::from_secs(5));
        assert!(lease.is_valid_for(7));
        assert!(!lease.is_valid_for(6), "an ownership of another generation does not hold");
    }

    #[test]
    fn another_writer_keeps_the_owners_data_fields() {
        let mut ours = PartitionStateRecord::new("m", "t", 0, MirrorPartitionState::Mirroring);
        ours.segments = vec![crate::mirror::model::OffsetSegment { source_start: 10, destination_start: 0 }];
        ours.producer_id = Some(7);
        ours.last_mirrored_offset = 99;
        let mut theirs = PartitionStateRecord::new("m", "t", 0, MirrorPartitionState::Stopping);
        theirs.state_epoch = 4;
        theirs.last_mirrored_offset = 50;
        let merged = keep_data_fields(&ours, theirs);
        assert_eq!(merged.state, MirrorPartitionState::Stopping);
        assert_eq!(merged.state_epoch, 4);
        assert_eq!(merged.segments, ours.segments);
        assert_eq!(merged.producer_id, Some(7));
        assert_eq!(merged.last_mirrored_offset, 99);
    }
}
