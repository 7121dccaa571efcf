//! Mirror work shared through Kafka group membership (issue 14) against a real broker's group
//! coordinator: three memberships of one group in this process split a static work set
//! (disjoint, complete, balanced, one generation, one owner map); a LeaveGroup moves the
//! leaver's work at once; a member that stops heartbeating fences itself before the
//! coordinator gives its work away; new work gets an owner within a few heartbeats. At no
//! sampled moment do two members own the same partition or mirror.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};
use mirrorgate::mirror::members::{self, Assignment, Membership, MembershipSettings, WorkSet};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const SESSION: Duration = Duration::from_secs(6);
const HEARTBEAT: Duration = Duration::from_secs(1);

fn work(topics: &[(&str, &str, i32)]) -> WorkSet {
    WorkSet {
        partitions: topics
            .iter()
            .flat_map(|(m, t, n)| (0..*n).map(move |p| (m.to_string(), t.to_string(), p)))
            .collect(),
        mirrors: topics.iter().map(|(m, _, _)| m.to_string()).collect(),
    }
}

fn tps(w: &WorkSet) -> BTreeSet<(String, i32)> {
    w.partitions.iter().map(|(_, t, p)| (t.clone(), *p)).collect()
}

struct Member {
    instance: String,
    membership: Membership,
    shutdown: CancellationToken,
}

impl Member {
    fn now(&self) -> Assignment {
        self.membership.assignment.borrow().clone()
    }
}

fn start(client: &ClusterClient, group: &str, instance: &str, work: &watch::Receiver<WorkSet>) -> Member {
    let shutdown = CancellationToken::new();
    let settings = MembershipSettings {
        group_id: group.to_string(),
        instance: instance.to_string(),
        session_timeout: SESSION,
        heartbeat_interval: HEARTBEAT,
        rebalance_timeout: Duration::from_secs(10),
    };
    let membership = members::spawn(client.clone(), settings, work.clone(), shutdown.clone());
    Member { instance: instance.to_string(), membership, shutdown }
}

/// Panics if two members own the same partition or mirror right now.
fn assert_no_overlap(ms: &[&Member]) {
    let mut parts: BTreeMap<(String, i32), &str> = BTreeMap::new();
    let mut mirrors: BTreeMap<String, &str> = BTreeMap::new();
    for m in ms {
        let a = m.now();
        for p in a.partitions {
            if let Some(other) = parts.insert(p.clone(), &m.instance) {
                panic!("{p:?} owned by both {other} and {} at once", m.instance);
            }
        }
        for x in a.mirrors {
            if let Some(other) = mirrors.insert(x.clone(), &m.instance) {
                panic!("mirror {x} owned by both {other} and {} at once", m.instance);
            }
        }
    }
}

/// Polls `f` every 50 ms (checking that no two of `all` overlap each time) until it returns
/// `Ok` or `timeout` passes; panics with the last value seen.
async fn until<T>(
    what: &str,
    all: &[&Member],
    timeout: Duration,
    mut f: impl FnMut() -> Result<T, String>,
) -> (T, Duration) {
    let start = Instant::now();
    loop {
        assert_no_overlap(all);
        match f() {
            Ok(v) => return (v, start.elapsed()),
            Err(e) if start.elapsed() > timeout => panic!("{what}: not within {timeout:?}; last seen: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

fn summary(ms: &[&Member]) -> String {
    ms.iter()
        .map(|m| {
            let a = m.now();
            format!(
                "{}: gen {} leader {} {}p {}m",
                m.instance,
                a.generation,
                a.leader,
                a.partitions.len(),
                a.mirrors.len()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Waits until every member of `ms` published an assignment of one generation ≥ `after` with
/// work in it, then checks that together they own exactly `w`, disjointly and balanced, with
/// one leader and one owner map that matches. Returns the generation.
async fn settled(what: &str, all: &[&Member], ms: &[&Member], w: &WorkSet, after: i32, timeout: Duration) -> i32 {
    let (gen, took) = until(what, all, timeout, || {
        let now: Vec<Assignment> = ms.iter().map(|m| m.now()).collect();
        let g = now[0].generation;
        let all_in = now.iter().all(|a| a.generation == g && !a.is_empty());
        if g > after && all_in {
            Ok(g)
        } else {
            Err(summary(ms))
        }
    })
    .await;
    eprintln!("{what}: generation {gen} after {took:?}: {}", summary(ms));
    let now: Vec<Assignment> = ms.iter().map(|m| m.now()).collect();
    let mut union = BTreeSet::new();
    let mut mirrors = BTreeSet::new();
    for (m, a) in ms.iter().zip(&now) {
        assert_eq!(a.generation, gen, "{what}: {} is in another generation", m.instance);
        for p in &a.partitions {
            assert!(union.insert(p.clone()), "{what}: {p:?} assigned twice");
            assert_eq!(a.owners.get(p), Some(&m.instance), "{what}: owner map of {} for {p:?}", m.instance);
        }
        for x in &a.mirrors {
            assert!(mirrors.insert(x.clone()), "{what}: mirror {x} assigned twice");
        }
        assert_eq!(a.owners, now[0].owners, "{what}: owner maps differ between members");
    }
    assert_eq!(union, tps(w), "{what}: the partitions owned are not exactly the work set");
    assert_eq!(mirrors, w.mirrors, "{what}: the mirrors owned are not exactly the work set's");
    assert_eq!(now[0].owners.keys().cloned().collect::<BTreeSet<_>>(), tps(w), "{what}: owner map incomplete");
    let counts: Vec<usize> = now.iter().map(|a| a.partitions.len()).collect();
    let (lo, hi) = (w.partitions.len() / ms.len(), w.partitions.len().div_ceil(ms.len()));
    assert!(counts.iter().all(|c| (lo..=hi).contains(c)), "{what}: unbalanced partition counts {counts:?}");
    let mcounts: Vec<usize> = now.iter().map(|a| a.mirrors.len()).collect();
    assert!(mcounts.iter().max().unwrap() - mcounts.iter().min().unwrap() <= 1, "{what}: mirrors {mcounts:?}");
    assert_eq!(now.iter().filter(|a| a.leader).count(), 1, "{what}: exactly one leader");
    gen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_share_mirror_work_through_the_group_coordinator() {
    let cluster = support::cluster("dest");
    let bootstrap = cluster.bootstrap.split(',').map(String::from).collect();
    let client = ClusterClient::connect(ClusterOptions::new(bootstrap)).await.expect("connect to the test cluster");
    let group = support::unique_name("mirrorgate.members");
    let first = work(&[("m1", "m1.orders", 10), ("m2", "m2.events", 10)]);
    let (work_tx, work_rx) = watch::channel(first.clone());

    let a = start(&client, &group, "inst-a", &work_rx);
    let b = start(&client, &group, "inst-b", &work_rx);
    let c = start(&client, &group, "inst-c", &work_rx);
    let all = [&a, &b, &c];

    // 1. Three members: 20 partitions as 7/7/6, 2 mirrors, one generation, one owner map.
    let gen1 = settled("three members", &all, &all, &first, -1, Duration::from_secs(40)).await;
    let before_leave: Vec<Assignment> = [&a, &b].iter().map(|m| m.now()).collect();

    // 2. c shuts down: empty assignment, LeaveGroup; a and b cover everything well before the
    //    session timeout would have expired c, keeping what they had (sticky).
    c.shutdown.cancel();
    until("c stops", &all, Duration::from_secs(10), || {
        c.membership.task.is_finished().then_some(()).ok_or_else(|| summary(&[&c]))
    })
    .await;
    assert!(c.membership.assignment.borrow().is_empty(), "c owns nothing after shutdown");
    let gen2 = settled("after c left", &all, &[&a, &b], &first, gen1, 3 * HEARTBEAT).await;
    for (m, old) in [&a, &b].iter().zip(&before_leave) {
        assert!(old.partitions.is_subset(&m.now().partitions), "{} lost partitions it could keep", m.instance);
    }

    // 3. b stops heartbeating: it owns nothing within session timeout − heartbeat interval,
    //    and only after that does a own b's work (after the coordinator expires b).
    b.membership.pause_heartbeats(true);
    let ((), fenced_after) =
        until("b self-fences", &all, SESSION, || if b.now().is_empty() { Ok(()) } else { Err(summary(&[&b])) }).await;
    eprintln!("b self-fenced {fenced_after:?} after its heartbeats stopped");
    assert!(fenced_after <= SESSION - HEARTBEAT + Duration::from_millis(300), "b fenced after {fenced_after:?}");
    let gen3 = settled("after b expired", &all, &[&a], &first, gen2, SESSION + Duration::from_secs(10)).await;
    assert!(b.now().is_empty(), "b stays fenced while paused");

    // 4. New work (a new mirror, partitions added to a topic): the leader rebalances at once.
    let more = work(&[("m1", "m1.orders", 12), ("m2", "m2.events", 10), ("m3", "m3.logs", 5)]);
    work_tx.send_replace(more.clone());
    let gen4 = settled("after the work grew", &all, &[&a], &more, gen3, 3 * HEARTBEAT).await;
    assert!(a.now().leader);

    // 5. b heartbeats again: it rejoins as a new member and gets half of the work.
    b.membership.pause_heartbeats(false);
    settled("after b came back", &all, &[&a, &b], &more, gen4, Duration::from_secs(20)).await;

    for m in [&a, &b] {
        m.shutdown.cancel();
    }
    for m in [a, b, c] {
        tokio::time::timeout(Duration::from_secs(10), m.membership.task).await.expect("stops").expect("task");
        assert!(m.membership.assignment.borrow().is_empty(), "{} owns nothing after shutdown", m.instance);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_while_a_join_waits_at_the_coordinator_returns_promptly_owning_nothing() {
    let cluster = support::cluster("dest");
    let bootstrap = cluster.bootstrap.split(',').map(String::from).collect();
    let client = ClusterClient::connect(ClusterOptions::new(bootstrap)).await.expect("connect to the test cluster");
    let group = support::unique_name("mirrorgate.members");
    let w = work(&[("m1", "m1.orders", 4)]);
    let (_work_tx, work_rx) = watch::channel(w.clone());
    let x = start(&client, &group, "inst-x", &work_rx);
    let gen1 = settled("one member", &[&x], &[&x], &w, -1, Duration::from_secs(20)).await;

    // x stops heartbeating, so it does not rejoin: y's JoinGroup waits at the coordinator
    // (until x rejoins, x's session expires or the rebalance times out). Shut y down inside it.
    x.membership.pause_heartbeats(true);
    let y = start(&client, &group, "inst-y", &work_rx);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!y.membership.task.is_finished());
    assert!(y.now().is_empty(), "y owns nothing while its join is pending: {}", summary(&[&y]));
    y.shutdown.cancel();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(3), y.membership.task)
        .await
        .expect("the loop returns at once, not after the pending JoinGroup")
        .expect("task");
    eprintln!("y stopped {:?} after the shutdown", started.elapsed());
    assert!(y.membership.assignment.borrow().is_empty());

    // x heartbeats again, hears of the rebalance y started, rejoins, and is alone again.
    x.membership.pause_heartbeats(false);
    let gen2 = settled("x alone again", &[&x], &[&x], &w, gen1, Duration::from_secs(15)).await;
    assert!(gen2 > gen1);
    x.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(8), x.membership.task).await.expect("stops").expect("task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_carries_on_when_its_coordinator_broker_stops() {
    use kafka_protocol::messages::FindCoordinatorRequest;
    use kafka_protocol::protocol::StrBytes;

    let cluster = support::cluster_with("ha3", 3, "4.1.1", &[]);
    let bootstrap = cluster.bootstrap.split(',').map(String::from).collect();
    let client = ClusterClient::connect(ClusterOptions::new(bootstrap)).await.expect("connect to the test cluster");
    let group = support::unique_name("mirrorgate.members");
    let coordinator = || async {
        let req = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.clone())).with_key_type(0);
        // None while no broker answers or the coordinator is not known yet.
        let resp = client.send_any(&req, 3).await.ok()?;
        (resp.error_code == 0).then_some(resp.node_id.0)
    };
    let w = work(&[("m1", "m1.orders", 6), ("m2", "m2.events", 6)]);
    let (_work_tx, work_rx) = watch::channel(w.clone());
    let x = start(&client, &group, "inst-x", &work_rx);
    let y = start(&client, &group, "inst-y", &work_rx);
    let all = [&x, &y];
    let gen1 = settled("two members", &all, &all, &w, -1, Duration::from_secs(40)).await;
    let old = coordinator().await.expect("the group has a coordinator");

    let out = std::process::Command::new(support::repo().join("scripts/kafka.sh"))
        .args(["stop-node", &cluster.name, &old.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "stop-node: {}", String::from_utf8_lossy(&out.stderr));
    let (new, took) =
        until("another coordinator", &all, Duration::from_secs(30), || match support::block(coordinator()) {
            Some(n) if n != old => Ok(n),
            other => Err(format!("{other:?}")),
        })
        .await;
    eprintln!("coordinator {old} stopped; {new} took over after {took:?}: {}", summary(&all));
    // Past the session timeout, a member that had not reached the new coordinator would own
    // nothing (self-fenced). Both find it and own everything between them: in the same
    // generation if a heartbeat reached it before they fenced themselves, else in a new one.
    let stopped = Instant::now();
    let mut emptied = BTreeSet::new();
    until("a session timeout to pass", &all, SESSION + Duration::from_secs(3), || {
        for m in &all {
            if m.now().is_empty() {
                emptied.insert(m.instance.clone());
            }
        }
        (stopped.elapsed() > SESSION + Duration::from_secs(1)).then_some(()).ok_or_else(String::new)
    })
    .await;
    eprintln!("members that owned nothing for a while after the move: {emptied:?}");
    let gen2 = settled("after the coordinator moved", &all, &all, &w, gen1 - 1, Duration::from_secs(30)).await;
    assert!(gen2 >= gen1);
    for m in [&x, &y] {
        m.shutdown.cancel();
    }
    for m in [x, y] {
        tokio::time::timeout(Duration::from_secs(10), m.membership.task).await.expect("stops").expect("task");
    }
    let out = std::process::Command::new(support::repo().join("scripts/kafka.sh"))
        .args(["start-node", &cluster.name, &old.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "start-node: {}", String::from_utf8_lossy(&out.stderr));
}
