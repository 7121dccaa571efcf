//! Sharing the mirror work between instances: what the control plane holds becomes the work
//! set the group leader assigns ([`work_set`]), and each assignment this instance receives
//! becomes the [`Ownership`] its data plane and metadata sync act on ([`run`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::control::{ControlPlane, ControlState, Ownership};
use super::members::{Assignment, WorkSet};
use super::model::DesiredState;
use crate::wire::mirror::MirrorPartitionState;

/// How often the work set is recomputed from the control plane.
const WORK_POLL: Duration = Duration::from_millis(200);

/// The work of a control state: every mirror (its metadata sync), and every mirror partition
/// that has something to do — all but STOPPED partitions of topics meant to stay stopped.
pub fn work_set(state: &ControlState) -> WorkSet {
    let mut work = WorkSet::default();
    work.mirrors.extend(state.mirrors.keys().cloned());
    for ((topic, p), rec) in &state.partitions {
        let Some(t) = state.topics.get(topic) else { continue };
        if rec.state == MirrorPartitionState::Stopped && t.desired == DesiredState::Stopped {
            continue;
        }
        work.partitions.insert((t.mirror.clone(), topic.clone(), *p));
    }
    work
}

/// How long a new assignment waits for this instance to have followed `__mirror_state` up
/// to its current end before it takes effect.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(10);
/// The same wait for an admin request, shorter: an answer must not hang on a follower that
/// cannot move on.
pub const ADMIN_BARRIER_TIMEOUT: Duration = Duration::from_secs(2);

/// Publishes the work set to `work` when it changes, and installs every assignment from
/// `assignments` into the control plane, until `shutdown`. `lease` is renewed by the
/// membership's heartbeats. With `barrier`, a non-empty assignment takes effect only once
/// the follower has applied the state topic up to the high watermark read when it arrived
/// (what the previous owners wrote before the handover, e.g. their last offset segment).
pub async fn run(
    control: Arc<ControlPlane>,
    work: watch::Sender<WorkSet>,
    mut assignments: watch::Receiver<Assignment>,
    lease: super::control::Lease,
    barrier: Option<(Arc<super::store::StateStore>, super::follow::FollowPosition)>,
    shutdown: CancellationToken,
) {
    let mut fresh = true;
    loop {
        let current = work_set(&control.snapshot());
        work.send_if_modified(|w| {
            if *w == current {
                false
            } else {
                *w = current;
                true
            }
        });
        if fresh {
            fresh = false;
            let a = assignments.borrow_and_update().clone();
            if let (Some((store, position)), false) = (&barrier, a.partitions.is_empty()) {
                control.set_ownership(Some(Ownership::default()));
                catch_up(store, position, BARRIER_TIMEOUT, &shutdown).await;
            }
            tracing::info!(
                generation = a.generation,
                partitions = a.partitions.len(),
                mirrors = a.mirrors.len(),
                leader = a.leader,
                "mirror work assigned to this instance"
            );
            control.set_ownership(Some(Ownership {
                generation: a.generation,
                partitions: a.partitions,
                mirrors: a.mirrors,
                owners: a.owners,
                lease: lease.clone(),
            }));
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(WORK_POLL) => {}
            r = assignments.changed() => {
                if r.is_err() {
                    return;
                }
                fresh = true;
            }
        }
    }
}

/// Waits (up to `timeout`) until `position` has reached the state topic's high
/// watermarks as read now. Also the barrier admin requests pass (read-your-writes across
/// instances).
pub async fn catch_up(
    store: &super::store::StateStore,
    position: &super::follow::FollowPosition,
    timeout: Duration,
    shutdown: &CancellationToken,
) {
    let hws = match store.high_watermarks().await {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the state topic's end before taking over work; going on");
            return;
        }
    };
    let deadline = tokio::time::Instant::now() + timeout;
    while !position.reached(&hws) {
        if tokio::time::Instant::now() > deadline || shutdown.is_cancelled() {
            tracing::warn!(
                timeout_s = BARRIER_TIMEOUT.as_secs(),
                "the state topic was not followed to its end in time; taking over work anyway"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
