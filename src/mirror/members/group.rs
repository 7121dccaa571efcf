//! The membership loop: this instance as a member of the mirrorgate group on the destination
//! cluster's group coordinator (FindCoordinator key type 0), with the classic group protocol
//! (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) under the protocol type `mirrorgate`, like
//! Kafka Connect's workers. The leader of each generation assigns the work set it reads
//! ([`super::assign`]); every member publishes what it owns on a watch channel.
//!
//! Rebalances are eager: before every JoinGroup the member publishes an empty assignment, so no
//! two members own a partition in the same generation. A member that cannot heartbeat for
//! `session timeout − heartbeat interval` publishes an empty assignment at once (self-fencing),
//! before the coordinator can give its work to others. The loop never writes data; it only
//! says what this instance may write.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use crate::client::cluster::{ClusterClient, ClusterError, ClusterOptions, KafkaErrorCode};

use super::assign::{self, MemberInput, TopicPartition};
use super::protocol::{MemberAssignment, MemberMetadata};
use super::MembershipSettings;
use crate::mirror::control::Lease;

/// The JoinGroup `ProtocolType` of mirrorgate's group: the coordinator refuses members of
/// another protocol type (`INCONSISTENT_GROUP_PROTOCOL`), so consumers cannot join by mistake.
pub const PROTOCOL_TYPE: &str = "mirrorgate";
/// The one JoinGroup protocol name mirrorgate offers: the balanced, sticky assignor of
/// [`super::assign`] with the v1 formats of [`super::protocol`].
pub const PROTOCOL_NAME: &str = "balanced-sticky-v1";

// Kafka error codes the loop acts on (Kafka's `Errors` enum).
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;

/// Highest versions built here (Kafka 4.x: JoinGroup v9, SyncGroup v5, Heartbeat v4,
/// LeaveGroup v5); lower ones are used when the coordinator supports no more.
const JOIN_GROUP_MAX: i16 = 9;
const SYNC_GROUP_MAX: i16 = 5;
const HEARTBEAT_MAX: i16 = 4;
const LEAVE_GROUP_MAX: i16 = 5;
/// FindCoordinator v3: the single-key layout (v4+ batch keys), supported by Kafka 2.4 to 4.x.
const FIND_COORDINATOR_VERSION: i16 = 3;

/// Pause after a failed step before trying again, growing to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// How long a leader waits for the work set to stop changing before it rebalances for it:
/// `mirrors --create` and `--start` run back to back are one rebalance, not two (the second
/// would wait a heartbeat interval behind the first).
const WORK_SETTLE: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How long a LeaveGroup at shutdown may take.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The work the leader assigns: read from the watch given to [`spawn`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkSet {
    /// Mirror partitions to copy: `(mirror name, destination topic, partition index)`.
    pub partitions: BTreeSet<(String, String, i32)>,
    /// Mirrors whose metadata sync must run somewhere (DESIGN §5).
    pub mirrors: BTreeSet<String>,
}

/// What this instance owns, as published by the membership loop. The empty assignment
/// (generation -1 or any generation with empty sets) means "copy nothing".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The generation id of the SyncGroup that delivered it (JoinGroup `GenerationId`); -1
    /// when this instance is not a member of a generation.
    pub generation: i32,
    /// This member's id in the group (JoinGroup `MemberId`); empty before the first join.
    pub member_id: String,
    /// Whether this member was the leader of the generation (it computed the assignment).
    pub leader: bool,
    /// Mirror partitions `(topic, partition)` whose copy loop this instance runs.
    pub partitions: BTreeSet<TopicPartition>,
    /// Mirrors whose metadata sync this instance runs.
    pub mirrors: BTreeSet<String>,
    /// Every assigned partition of the group → instance name of its owner (for `--describe`).
    pub owners: BTreeMap<TopicPartition, String>,
}

impl Assignment {
    /// Nothing owned, outside any generation.
    pub fn empty() -> Self {
        Self {
            generation: -1,
            member_id: String::new(),
            leader: false,
            partitions: BTreeSet::new(),
            mirrors: BTreeSet::new(),
            owners: BTreeMap::new(),
        }
    }

    /// Whether this instance owns nothing.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty() && self.mirrors.is_empty()
    }
}

impl Default for Assignment {
    fn default() -> Self {
        Self::empty()
    }
}

/// A running membership ([`spawn`]).
#[derive(Debug)]
pub struct Membership {
    /// The current assignment of this instance; starts empty. Rebalances are eager: every
    /// rebalance first publishes the empty assignment, then the new one. Whatever leaves the
    /// published sets must stop being written at once (another instance may own it next).
    pub assignment: watch::Receiver<Assignment>,
    /// The loop; it returns after shutdown (empty assignment published, LeaveGroup sent).
    pub task: JoinHandle<()>,
    /// Renewed by every successful heartbeat (and SyncGroup) to the self-fencing deadline,
    /// counted from when it was sent; expired when the work is dropped. The control plane
    /// refuses data-plane writes once it runs out ([`crate::mirror::control::Ownership`]).
    pub lease: Lease,
    /// Copy loops still running here (kept up to date by the data plane): a rejoin waits
    /// for 0 (revocation barrier).
    pub busy: Arc<std::sync::atomic::AtomicUsize>,
    paused: Arc<AtomicBool>,
}

impl Membership {
    /// Test hook: while paused the loop sends no heartbeat (and does not rejoin), as a hung
    /// instance would; self-fencing still applies.
    #[doc(hidden)]
    pub fn pause_heartbeats(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }
}

/// Starts this instance's membership in the group `settings.group_id` of the cluster `client`
/// points at. `work` is the current work set; the leader of a generation assigns what it reads
/// there and starts a rebalance when it changes. On `shutdown` the loop publishes an empty
/// assignment, sends LeaveGroup (so the work moves at once) and returns.
///
/// Must be called inside a Tokio runtime (the loop is a Tokio task). The loop opens
/// connections of its own with `client`'s options (TLS, SASL): a JoinGroup
/// waits at the coordinator up to the rebalance timeout, which must neither block the client's
/// other requests nor time out at the client's request timeout.
pub fn spawn(
    client: ClusterClient,
    settings: MembershipSettings,
    work: watch::Receiver<WorkSet>,
    shutdown: CancellationToken,
) -> Membership {
    let (tx, rx) = watch::channel(Assignment::empty());
    let paused = Arc::new(AtomicBool::new(false));
    let lease = Lease::default();
    let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let member = Member {
        lease: lease.clone(),
        busy: busy.clone(),
        settings,
        work,
        shutdown,
        tx,
        paused: paused.clone(),
        member_id: String::new(),
        generation: -1,
        leader: false,
        coordinator: None,
        owned: MemberMetadata::default(),
        assigned_work: None,
    };
    let task = tokio::spawn(member.run(client.options().clone()));
    Membership { assignment: rx, task, lease, busy, paused }
}

/// Why the heartbeat phase ended.
enum Next {
    Shutdown,
    /// Join again with the same member id (rebalance in progress, work changed, recovered).
    Rejoin(String),
}

/// What a failed group request asks for.
enum Failure {
    /// Join again at once (MEMBER_ID_REQUIRED with the id now known, REBALANCE_IN_PROGRESS).
    Rejoin,
    /// Forget member id and generation, then join (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION).
    Reset,
    /// Find the coordinator again after a pause (coordinator errors, disconnects).
    Coordinator(String),
    /// Anything else: pause, then try again.
    Other(String),
}

/// A Heartbeat in flight: resolves to the coordinator used (if found), when the request was
/// sent, and the response's error code.
type HeartbeatFuture = Pin<Box<dyn Future<Output = (Option<i32>, Instant, Result<i16, ClusterError>)> + Send>>;

/// The two clients of the loop: `join` for JoinGroup and SyncGroup (request timeout above the
/// rebalance timeout), `short` for the rest.
#[derive(Clone)]
struct Clients {
    join: ClusterClient,
    short: ClusterClient,
}

struct Member {
    lease: Lease,
    busy: Arc<std::sync::atomic::AtomicUsize>,
    settings: MembershipSettings,
    work: watch::Receiver<WorkSet>,
    shutdown: CancellationToken,
    tx: watch::Sender<Assignment>,
    paused: Arc<AtomicBool>,
    member_id: String,
    generation: i32,
    leader: bool,
    coordinator: Option<i32>,
    /// What this member owned last (sent as metadata for sticky assignment).
    owned: MemberMetadata,
    /// The work set this member assigned as leader of the current generation.
    assigned_work: Option<WorkSet>,
}

fn group_id(s: &str) -> GroupId {
    GroupId(StrBytes::from_string(s.to_string()))
}

fn ms(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

fn classify_code(code: i16) -> Failure {
    match code {
        REBALANCE_IN_PROGRESS => Failure::Rejoin,
        UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION => Failure::Reset,
        NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS => {
            Failure::Coordinator(KafkaErrorCode(code).to_string())
        }
        c => Failure::Other(KafkaErrorCode(c).to_string()),
    }
}

fn classify_err(e: &ClusterError) -> Failure {
    match e {
        ClusterError::Kafka { error, .. } => classify_code(error.0),
        ClusterError::UnsupportedVersion { .. } | ClusterError::InvalidArgument(_) => Failure::Other(e.to_string()),
        // Transport, connect, unknown broker: the coordinator may have moved or died.
        other => Failure::Coordinator(other.to_string()),
    }
}

/// FindCoordinator (key type 0, GROUP) for `group` through any broker; makes sure both
/// clients know the coordinator's address.
async fn find_coordinator(clients: &Clients, group: &str) -> Result<i32, ClusterError> {
    let req = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_string())).with_key_type(0);
    let resp = clients.short.send_any(&req, FIND_COORDINATOR_VERSION).await?;
    if resp.error_code != 0 {
        return Err(ClusterError::Kafka {
            api: kafka_protocol::messages::ApiKey::FindCoordinator,
            broker: "any".into(),
            resource: group.to_string(),
            error: KafkaErrorCode(resp.error_code),
            message: resp.error_message.map(|m| m.to_string()),
        });
    }
    let node = resp.node_id.0;
    for c in [&clients.short, &clients.join] {
        if !c.metadata().brokers.contains_key(&node) {
            c.refresh_metadata(Some(&[])).await?;
        }
    }
    Ok(node)
}

/// One Heartbeat round, finding the coordinator first when it is not known. Returns the
/// coordinator used (if found), when the Heartbeat was sent (the coordinator's session clock
/// restarts no earlier than that) and the response's error code.
async fn heartbeat(
    clients: Clients,
    group: String,
    coordinator: Option<i32>,
    generation: i32,
    member_id: String,
) -> (Option<i32>, Instant, Result<i16, ClusterError>) {
    let node = match coordinator {
        Some(n) => n,
        None => match find_coordinator(&clients, &group).await {
            Ok(n) => n,
            Err(e) => return (None, Instant::now(), Err(e)),
        },
    };
    let c = &clients.short;
    let sent = Instant::now();
    let result = async {
        let v = c.version_for::<HeartbeatRequest>(node, HEARTBEAT_MAX).await?;
        let req = HeartbeatRequest::default()
            .with_group_id(group_id(&group))
            .with_generation_id(generation)
            .with_member_id(StrBytes::from_string(member_id));
        Ok(c.send_to_node(node, &req, v).await?.error_code)
    }
    .await;
    (Some(node), sent, result)
}

impl Member {
    fn publish(&self, a: Assignment) {
        self.tx.send_replace(a);
    }

    /// Publishes the empty assignment (keeping `owned` for the next metadata).
    fn drop_work(&self) {
        self.lease.expire();
        if !self.tx.borrow().is_empty() || self.tx.borrow().generation != -1 {
            self.publish(Assignment { member_id: self.member_id.clone(), ..Assignment::empty() });
        }
    }

    fn reset(&mut self) {
        self.member_id.clear();
        self.generation = -1;
        self.leader = false;
        self.assigned_work = None;
    }

    async fn run(mut self, opts: ClusterOptions) {
        let Some(clients) = self.connect(opts).await else {
            self.drop_work();
            return;
        };
        let group = self.settings.group_id.clone();
        let mut backoff = BACKOFF_MIN;
        let mut why = String::from("starting");
        'outer: loop {
            if self.shutdown.is_cancelled() {
                break;
            }
            // Eager protocol: own nothing while (re)joining.
            self.drop_work();
            while self.paused.load(Ordering::SeqCst) {
                tokio::select! {
                    _ = self.shutdown.cancelled() => break 'outer,
                    _ = sleep(self.settings.heartbeat_interval) => {}
                }
            }
            let shutdown = self.shutdown.clone();
            let step = tokio::select! {
                _ = shutdown.cancelled() => break,
                r = self.join_and_sync(&clients, &why) => r,
            };
            let sync_sent = match step {
                Ok(sent) => {
                    backoff = BACKOFF_MIN;
                    sent
                }
                Err(f) => {
                    let pause = match f {
                        Failure::Rejoin => Duration::ZERO,
                        Failure::Reset => {
                            self.reset();
                            Duration::ZERO
                        }
                        Failure::Coordinator(e) => {
                            tracing::debug!(group = %group, error = %e, "group coordinator unavailable, finding it again");
                            self.coordinator = None;
                            backoff
                        }
                        Failure::Other(e) => {
                            tracing::warn!(group = %group, error = %e, "joining the mirrorgate group failed; retrying");
                            backoff
                        }
                    };
                    if !pause.is_zero() {
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                        tokio::select! {
                            _ = self.shutdown.cancelled() => break,
                            _ = sleep(pause) => {}
                        }
                    }
                    why = "retrying the join".into();
                    continue;
                }
            };
            match self.heartbeats(&clients, sync_sent).await {
                Next::Shutdown => break,
                Next::Rejoin(reason) => why = reason,
            }
        }
        self.drop_work();
        self.leave(&clients).await;
    }

    /// The loop's clients, connected (retrying until shutdown).
    async fn connect(&self, opts: ClusterOptions) -> Option<Clients> {
        let short_opts =
            ClusterOptions { request_timeout: opts.request_timeout.min(self.settings.session_timeout), ..opts.clone() };
        let join_opts = ClusterOptions {
            request_timeout: opts.request_timeout.max(self.settings.rebalance_timeout + Duration::from_secs(5)),
            ..opts
        };
        let mut backoff = BACKOFF_MIN;
        loop {
            let attempt = async {
                Ok::<_, ClusterError>(Clients {
                    join: ClusterClient::connect(join_opts.clone()).await?,
                    short: ClusterClient::connect(short_opts.clone()).await?,
                })
            };
            tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                r = attempt => match r {
                    Ok(c) => return Some(c),
                    Err(e) => tracing::warn!(group = %self.settings.group_id, error = %e, "cannot reach the destination for group membership; retrying"),
                },
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                _ = sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    async fn coordinator(&mut self, clients: &Clients) -> Result<i32, Failure> {
        if let Some(c) = self.coordinator {
            return Ok(c);
        }
        let node = find_coordinator(clients, &self.settings.group_id).await.map_err(|e| classify_err(&e))?;
        self.coordinator = Some(node);
        Ok(node)
    }

    /// One JoinGroup + SyncGroup round; publishes the assignment on success and returns when
    /// the SyncGroup was sent (the start of the member's session as far as it can know).
    async fn join_and_sync(&mut self, clients: &Clients, why: &str) -> Result<Instant, Failure> {
        // Revocation barrier: the work of the last generation was dropped (empty assignment
        // published); join only once the copy loops have stopped, so that no new owner
        // starts while an append of this instance is still under way. Bounded by the
        // rebalance timeout (the coordinator waits that long for this JoinGroup); appends
        // are refused anyway once the lease is gone.
        if self.busy.load(Ordering::SeqCst) > 0 {
            let deadline = Instant::now() + self.settings.rebalance_timeout / 2;
            while self.busy.load(Ordering::SeqCst) > 0 && Instant::now() < deadline && !self.shutdown.is_cancelled() {
                sleep(Duration::from_millis(20)).await;
            }
            let left = self.busy.load(Ordering::SeqCst);
            if left > 0 {
                tracing::warn!(group = %self.settings.group_id, loops = left, "copy loops still running at the rejoin; their appends are refused (lease ended)");
            }
        }
        let node = self.coordinator(clients).await?;
        let c = &clients.join;
        let jv = c.version_for::<JoinGroupRequest>(node, JOIN_GROUP_MAX).await.map_err(|e| classify_err(&e))?;
        let metadata = MemberMetadata { instance: self.settings.instance.clone(), ..self.owned.clone() };
        let mut req = JoinGroupRequest::default()
            .with_group_id(group_id(&self.settings.group_id))
            .with_session_timeout_ms(ms(self.settings.session_timeout))
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str(PROTOCOL_NAME))
                .with_metadata(Bytes::from(metadata.encode()))]);
        if jv >= 1 {
            req.rebalance_timeout_ms = ms(self.settings.rebalance_timeout);
        }
        if jv >= 8 {
            req.reason = Some(StrBytes::from_string(format!("{}: {why}", self.settings.instance)));
        }
        tracing::debug!(group = %self.settings.group_id, member_id = %self.member_id, reason = why, "JoinGroup");
        let resp = c.send_to_node(node, &req, jv).await.map_err(|e| classify_err(&e))?;
        if resp.error_code == MEMBER_ID_REQUIRED {
            // KIP-394: the coordinator names our member id; join again with it.
            self.member_id = resp.member_id.to_string();
            return Err(Failure::Rejoin);
        }
        if resp.error_code != 0 {
            return Err(classify_code(resp.error_code));
        }
        self.member_id = resp.member_id.to_string();
        self.generation = resp.generation_id;
        self.leader = resp.leader.as_str() == self.member_id;

        let mut assignments = Vec::new();
        let mut work_used = None;
        if self.leader {
            let work = self.work.borrow_and_update().clone();
            let plan = self.plan(&resp.members, &work);
            for (member_id, w) in plan.members {
                let a = MemberAssignment { partitions: w.partitions, mirrors: w.mirrors, owners: plan.owners.clone() };
                assignments.push(
                    SyncGroupRequestAssignment::default()
                        .with_member_id(StrBytes::from_string(member_id))
                        .with_assignment(Bytes::from(a.encode())),
                );
            }
            work_used = Some(work);
        }
        let sv = c.version_for::<SyncGroupRequest>(node, SYNC_GROUP_MAX).await.map_err(|e| classify_err(&e))?;
        let mut sync = SyncGroupRequest::default()
            .with_group_id(group_id(&self.settings.group_id))
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_assignments(assignments);
        if sv >= 5 {
            sync.protocol_type = Some(StrBytes::from_static_str(PROTOCOL_TYPE));
            sync.protocol_name = Some(StrBytes::from_static_str(PROTOCOL_NAME));
        }
        let sync_sent = Instant::now();
        let resp = c.send_to_node(node, &sync, sv).await.map_err(|e| classify_err(&e))?;
        if resp.error_code != 0 {
            return Err(classify_code(resp.error_code));
        }
        if sync_sent.elapsed() >= self.settings.self_fence_after() {
            // The coordinator may have expired this member while the answer travelled.
            return Err(Failure::Other(format!(
                "SyncGroup took {} ms, longer than session timeout − heartbeat interval",
                sync_sent.elapsed().as_millis()
            )));
        }
        let mine = match MemberAssignment::decode(&resp.assignment) {
            Ok(a) => a,
            Err(e) => {
                // A leader of another format: own nothing in this generation rather than guess.
                tracing::warn!(group = %self.settings.group_id, generation = self.generation, error = %e,
                    "cannot read the assignment from the group leader; owning nothing in this generation");
                MemberAssignment::default()
            }
        };
        self.assigned_work = work_used;
        self.owned = MemberMetadata {
            instance: self.settings.instance.clone(),
            owned_partitions: mine.partitions.clone(),
            owned_mirrors: mine.mirrors.clone(),
        };
        tracing::info!(
            group = %self.settings.group_id,
            instance = %self.settings.instance,
            member_id = %self.member_id,
            "joined generation {} as {} with {} partitions and {} mirrors",
            self.generation,
            if self.leader { "leader" } else { "follower" },
            mine.partitions.len(),
            mine.mirrors.len(),
        );
        self.publish(Assignment {
            generation: self.generation,
            member_id: self.member_id.clone(),
            leader: self.leader,
            partitions: mine.partitions,
            mirrors: mine.mirrors,
            owners: mine.owners,
        });
        Ok(sync_sent)
    }

    /// The leader's plan for the JoinGroup `members` over `work`.
    fn plan(
        &self,
        members: &[kafka_protocol::messages::join_group_response::JoinGroupResponseMember],
        work: &WorkSet,
    ) -> assign::Plan {
        let inputs: Vec<MemberInput> = members
            .iter()
            .map(|m| {
                let member_id = m.member_id.to_string();
                match MemberMetadata::decode(&m.metadata) {
                    Ok(md) => MemberInput {
                        member_id,
                        instance: md.instance,
                        owned_partitions: md.owned_partitions,
                        owned_mirrors: md.owned_mirrors,
                    },
                    Err(e) => {
                        tracing::warn!(group = %self.settings.group_id, member_id = %member_id, error = %e,
                            "cannot read a member's metadata; assigning it work as a new member");
                        MemberInput { instance: member_id.clone(), member_id, ..MemberInput::default() }
                    }
                }
            })
            .collect();
        let partitions: BTreeSet<TopicPartition> = work.partitions.iter().map(|(_, t, p)| (t.clone(), *p)).collect();
        assign::assign(&inputs, &partitions, &work.mirrors)
    }

    /// Heartbeats until a rejoin is needed or shutdown; self-fences when no heartbeat sent in
    /// the last `session timeout − heartbeat interval` succeeded (counting from `sync_sent`,
    /// the SyncGroup that started the generation).
    async fn heartbeats(&mut self, clients: &Clients, sync_sent: Instant) -> Next {
        let interval = self.settings.heartbeat_interval;
        let fence_after = self.settings.self_fence_after();
        let mut last_ok = sync_sent;
        self.lease.renew_for(self.generation, fence_after.saturating_sub(last_ok.elapsed()));
        let mut fenced = false;
        let mut next = Instant::now() + interval;
        let mut inflight: Option<HeartbeatFuture> = None;
        let mut watch_work = self.leader;
        // A leader rebalances for a changed work set at most once per heartbeat interval, so a
        // work set that changes in bursts does not stop every instance's work again and again.
        // A change is acted on once the work set has been quiet for WORK_SETTLE (at most a
        // heartbeat interval after the change was first seen), so commands run back to back
        // make one rebalance.
        let rebalance_after = sync_sent + interval;
        let mut change_pending = false;
        let mut first_seen: Option<Instant> = None;
        let mut settled_at = Instant::now();
        let mut last_error = String::from("none");
        loop {
            if watch_work && self.assigned_work.as_ref() != Some(&*self.work.borrow()) {
                let now = Instant::now();
                let first = *first_seen.get_or_insert(now);
                settled_at = settled_at.max(first + WORK_SETTLE).min(first + interval);
                if now >= rebalance_after && now >= settled_at {
                    return Next::Rejoin("the work set changed".into());
                }
                change_pending = true;
            } else {
                first_seen = None;
            }
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => return Next::Shutdown,
                _ = sleep_until(last_ok + fence_after), if !fenced => {
                    fenced = true;
                    tracing::warn!(
                        group = %self.settings.group_id,
                        instance = %self.settings.instance,
                        generation = self.generation,
                        last_error = %last_error,
                        "self-fenced: no successful heartbeat for {} ms (session timeout − heartbeat interval); owning nothing until the group is rejoined",
                        fence_after.as_millis(),
                    );
                    self.drop_work();
                }
                _ = sleep_until(rebalance_after.max(settled_at)), if change_pending => change_pending = false,
                r = self.work.changed(), if watch_work => {
                    if r.is_err() {
                        watch_work = false; // the sender is gone: the work set stays as it is
                    } else if let Some(first) = first_seen {
                        // Changed again: wait for it to settle (never past a heartbeat
                        // interval from the first change).
                        settled_at = (Instant::now() + WORK_SETTLE).min(first + interval);
                    }
                }
                (node, sent, r) = async { inflight.as_mut().expect("guarded").await }, if inflight.is_some() => {
                    inflight = None;
                    self.coordinator = node;
                    let failure = match r {
                        Ok(0) => None,
                        Ok(code) => Some(classify_code(code)),
                        Err(e) => Some(classify_err(&e)),
                    };
                    match failure {
                        None if fenced => return Next::Rejoin("heartbeats succeed again after self-fencing".into()),
                        None => {
                            last_ok = last_ok.max(sent);
                            self.lease.renew_for(self.generation, fence_after.saturating_sub(last_ok.elapsed()));
                        }
                        Some(Failure::Rejoin) => return Next::Rejoin("the coordinator started a rebalance".into()),
                        Some(Failure::Reset) => {
                            tracing::info!(group = %self.settings.group_id, generation = self.generation,
                                "the coordinator no longer knows this member or generation; dropping work and rejoining");
                            self.drop_work();
                            self.reset();
                            return Next::Rejoin("member reset".into());
                        }
                        Some(Failure::Coordinator(e)) => {
                            self.coordinator = None;
                            last_error = e;
                            // Try again soon, at another coordinator if it moved.
                            next = Instant::now() + BACKOFF_MIN.max(interval / 4);
                        }
                        Some(Failure::Other(e)) => {
                            tracing::warn!(group = %self.settings.group_id, error = %e, "heartbeat failed");
                            last_error = e;
                        }
                    }
                }
                _ = sleep_until(next), if inflight.is_none() => {
                    next = Instant::now() + interval;
                    if !self.paused.load(Ordering::SeqCst) {
                        inflight = Some(Box::pin(heartbeat(
                            clients.clone(),
                            self.settings.group_id.clone(),
                            self.coordinator,
                            self.generation,
                            self.member_id.clone(),
                        )));
                    }
                }
            }
        }
    }

    /// LeaveGroup (best effort, bounded by [`LEAVE_TIMEOUT`]) so the coordinator rebalances at
    /// once instead of after the session timeout.
    async fn leave(&mut self, clients: &Clients) {
        if self.member_id.is_empty() {
            return;
        }
        let attempt = async {
            // A request cut off by the shutdown may have left the connection out of step:
            // the first attempt then fails on it and the second uses a new connection.
            let mut last = None;
            for _ in 0..2 {
                match self.leave_once(clients).await {
                    Ok(()) => return Ok(()),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.expect("two attempts"))
        };
        match tokio::time::timeout(LEAVE_TIMEOUT, attempt).await {
            Ok(Ok(())) => {
                tracing::info!(group = %self.settings.group_id, member_id = %self.member_id, "left the mirrorgate group")
            }
            Ok(Err(e)) => {
                tracing::warn!(group = %self.settings.group_id, error = %e, "LeaveGroup failed; the coordinator will expire this member after the session timeout")
            }
            Err(_) => {
                tracing::warn!(group = %self.settings.group_id, "LeaveGroup timed out; the coordinator will expire this member after the session timeout")
            }
        }
    }

    async fn leave_once(&mut self, clients: &Clients) -> Result<(), String> {
        let node = match self.coordinator(clients).await {
            Ok(n) => n,
            Err(Failure::Coordinator(e) | Failure::Other(e)) => return Err(e),
            Err(_) => return Err("cannot find the group coordinator".into()),
        };
        let c = &clients.short;
        let fail = |e: ClusterError| e.to_string();
        let v = c.version_for::<LeaveGroupRequest>(node, LEAVE_GROUP_MAX).await.map_err(fail)?;
        let mut req = LeaveGroupRequest::default().with_group_id(group_id(&self.settings.group_id));
        if v >= 3 {
            let mut m = MemberIdentity::default().with_member_id(StrBytes::from_string(self.member_id.clone()));
            if v >= 5 {
                m.reason = Some(StrBytes::from_string(format!("{} is shutting down", self.settings.instance)));
            }
            req.members = vec![m];
        } else {
            req.member_id = StrBytes::from_string(self.member_id.clone());
        }
        let resp = c.send_to_node(node, &req, v).await.map_err(|e| {
            self.coordinator = None;
            fail(e)
        })?;
        let code = if resp.error_code != 0 {
            resp.error_code
        } else {
            resp.members.iter().map(|m| m.error_code).find(|c| *c != 0).unwrap_or(0)
        };
        match code {
            0 | UNKNOWN_MEMBER_ID => Ok(()),
            c => {
                if matches!(classify_code(c), Failure::Coordinator(_)) {
                    self.coordinator = None;
                }
                Err(format!("LeaveGroup: {}", KafkaErrorCode(c)))
            }
        }
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
