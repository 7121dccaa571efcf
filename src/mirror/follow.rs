//! Following `__mirror_state`: every instance reads the state topic continuously from where
//! its load ended, so that a mirror created, started, stopped or reconfigured through another
//! instance takes effect here too (read-only enforcement, offset presentation, admin
//! answers, the copy loops this instance owns), usually within tens of milliseconds and at
//! most [`FOLLOW_WAIT_MS`] plus one round trip after the record is acknowledged.
//!
//! One Fetch per state-topic leader, every partition of that leader in it, long-polled with
//! `max_wait_ms` = [`FOLLOW_WAIT_MS`] (the broker answers as soon as a record arrives). It
//! uses a connection of its own, so the long poll never delays the store's writes.
//! Records are applied by [`ControlPlane::apply_followed`] (log order per key, stale owners
//! ignored).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::control::ControlPlane;
use super::store::{decode_fetched, StateStore, StateValue};
use crate::client::cluster::{ClusterClient, EARLIEST_TIMESTAMP};
use crate::client::KafkaErrorCode;

/// How long the broker may hold a follow Fetch when nothing new is there, ms.
pub const FOLLOW_WAIT_MS: i32 = 500;

/// Kafka error OFFSET_OUT_OF_RANGE (1).
const OFFSET_OUT_OF_RANGE: i16 = 1;

/// How far the follower has applied each state-topic partition: per partition index, the
/// offset after the last record applied (shared with [`super::sharing`], whose barrier waits
/// for it to reach the high watermark before a new assignment takes effect).
#[derive(Debug, Clone, Default)]
pub struct FollowPosition(Arc<Vec<std::sync::atomic::AtomicI64>>);

impl FollowPosition {
    /// Starting at `next` (per partition index).
    pub fn new(next: &[i64]) -> Self {
        Self(Arc::new(next.iter().map(|&o| std::sync::atomic::AtomicI64::new(o)).collect()))
    }

    fn set(&self, partition: usize, offset: i64) {
        if let Some(a) = self.0.get(partition) {
            a.store(offset, std::sync::atomic::Ordering::Release);
        }
    }

    /// Whether every partition has been applied up to at least `high_watermarks`.
    pub fn reached(&self, high_watermarks: &[i64]) -> bool {
        high_watermarks
            .iter()
            .enumerate()
            .all(|(p, hw)| self.0.get(p).is_some_and(|a| a.load(std::sync::atomic::Ordering::Acquire) >= *hw))
    }
}

/// Follows `store`'s topic with `client` (a connection of its own) from `next` (per
/// partition index, the offset after the last record loaded) until `shutdown`, publishing
/// how far it got in `position`.
pub async fn run(
    control: Arc<ControlPlane>,
    store: Arc<StateStore>,
    client: ClusterClient,
    mut next: Vec<i64>,
    position: FollowPosition,
    shutdown: CancellationToken,
) {
    let topic = store.topic().name.clone();
    let partitions = store.topic().partitions;
    if next.len() != partitions as usize {
        tracing::error!(topic = %topic, "cannot follow the state topic: its load did not cover every partition");
        return;
    }
    let max_bytes = store.settings().fetch_max_bytes;
    let mut failures = 0u32;
    while !shutdown.is_cancelled() {
        // Group the partitions by leader (cached metadata; refreshed when a leader moved).
        let mut by_leader: BTreeMap<i32, Vec<(i32, i64)>> = BTreeMap::new();
        let mut leaderless = false;
        for p in 0..partitions {
            match client.leader_for(&topic, p).await {
                Ok(l) => by_leader.entry(l.node_id).or_default().push((p, next[p as usize])),
                Err(_) => leaderless = true,
            }
        }
        let mut rounds = tokio::task::JoinSet::new();
        for (node, parts) in by_leader {
            let (client, topic) = (client.clone(), topic.clone());
            rounds.spawn(async move {
                (node, client.fetch_from_node(node, &topic, &parts, FOLLOW_WAIT_MS, max_bytes).await)
            });
        }
        let answers = tokio::select! {
            a = rounds.join_all() => a,
            _ = shutdown.cancelled() => return,
        };
        let mut refresh = leaderless;
        let mut failed = leaderless;
        for (node, answer) in answers {
            let answer = match answer {
                Ok(a) => a,
                Err(e) => {
                    if failures == 0 {
                        tracing::warn!(topic = %topic, broker = node, error = %e, "cannot follow the state topic on this broker; retrying");
                    }
                    failed = true;
                    refresh = true;
                    continue;
                }
            };
            for (p, result) in answer {
                let Some(at) = next.get(p as usize).copied() else { continue };
                match result {
                    Ok(fetched) => match decode_fetched(partitions, p, at, fetched.records.clone()) {
                        Ok(Some((mut changes, after))) => {
                            for c in &mut changes {
                                if let Some(StateValue::Mirror(def)) = &mut c.value {
                                    store.open_mirror_secrets(def);
                                }
                            }
                            let again = control.apply_followed(changes).await;
                            next[p as usize] = after;
                            position.set(p as usize, after);
                            for (t, part) in again {
                                if let Err(e) = control.reassert_partition(&t, part).await {
                                    tracing::warn!(topic = %t, partition = part, error = %e, "cannot write the owner's partition state again");
                                }
                            }
                        }
                        Ok(None) => {
                            // Nothing past `at`: caught up to the high watermark it reported.
                            if fetched.high_watermark <= at {
                                position.set(p as usize, at);
                            }
                        }
                        Err((offset, reason)) => {
                            tracing::error!(topic = %topic, partition = p, offset, %reason, "cannot apply a state record written by another instance (a newer version?); following this partition is stuck at it, retried with backoff; upgrade this instance");
                            // Never skip a record: the same offset is read again after a
                            // pause (a newer build may have written it; an operator must act).
                            failed = true;
                        }
                    },
                    Err(KafkaErrorCode(OFFSET_OUT_OF_RANGE)) => {
                        // Only with cleanup.policy=compact,delete: the log start passed us.
                        match client.list_offsets(&topic, p, EARLIEST_TIMESTAMP).await {
                            Ok(start) if start > at => {
                                tracing::warn!(topic = %topic, partition = p, from = at, to = start, "the state topic's log start moved past the follower; records in between were deleted");
                                next[p as usize] = start;
                                position.set(p as usize, start);
                            }
                            _ => failed = true,
                        }
                    }
                    Err(_) => {
                        refresh = true;
                        failed = true;
                    }
                }
            }
        }
        if refresh {
            let _ = client.refresh_metadata(Some(&[&topic])).await;
        }
        if failed {
            failures += 1;
            let backoff = Duration::from_millis(200 * u64::from(failures.min(10)));
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = shutdown.cancelled() => return,
            }
        } else {
            if failures > 0 {
                tracing::info!(topic = %topic, "following the state topic again");
            }
            failures = 0;
        }
    }
}
