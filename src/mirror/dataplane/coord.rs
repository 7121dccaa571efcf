//! Coordinator fencing of a mirror partition's marker and slot transactions (issue 33 item 4;
//! design in docs/control-plane.md §4, the transactions in docs/real-markers.md).
//!
//! - Every transactional request of a partition (InitProducerId, AddPartitionsToTxn, EndTxn,
//!   DescribeTransactions, the slot Produce) goes through [`Leased`]: it is sent only while
//!   this instance owns the partition under a valid lease (`ControlPlane::owns_partition`),
//!   over connections of the partition's own ([`CoordConns`]); when the lease runs out while a
//!   request is being written or unanswered, that connection is reset (RST), so a request held
//!   in the socket's send queue by a network cut is discarded instead of landing after the new
//!   owner's requests — as the data producer's connections are (`produce::ProduceMux`).
//! - [`end_open_transactions`]: a stop (STOPPING → STOPPED) aborts every transaction of the
//!   partition's transactional ids still open on the destination with InitProducerId, which
//!   needs no source, so a failed-over topic's last stable offset is not pinned until the
//!   coordinator's timeout.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use kafka_protocol::messages::ProduceResponse;
use kafka_protocol::protocol::Request;

use crate::client::cluster::{ClusterClient, DedicatedConnection};
use crate::client::txn::{self, AnyBroker, TxnError, TxnProducer, TxnProtocol, TxnTransport};
use crate::mirror::control::ControlPlane;
use crate::mirror::model::{self, OffsetSegment};
use crate::wire::produce::{ProduceFrame, ProduceFrameError};

use super::produce::LeaseToken;

/// How often a request being written or unanswered checks the lease it was sent under (as the
/// data producer's connections do).
const LEASE_CHECK: Duration = Duration::from_millis(200);

/// `mirrorgate.<length of the mirror name>.<mirror>.<topic>.<partition>.<suffix>`: a mirror
/// partition's transactional ids (`m`: lone markers, `a<i>`: aborted-record slots); the length
/// keeps ids of different mirror/topic pairs apart when names contain dots.
pub(super) fn txn_id(mirror: &str, topic: &str, partition: i32, suffix: &str) -> String {
    format!("mirrorgate.{}.{mirror}.{topic}.{partition}.{suffix}", mirror.len())
}

/// The destination connections of one partition's transactional requests, by broker id.
/// Dropping them resets them (RST): nothing this partition wrote can reach a broker later.
#[derive(Default)]
pub(super) struct CoordConns {
    conns: HashMap<i32, DedicatedConnection>,
}

impl std::fmt::Debug for CoordConns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordConns").field("brokers", &self.conns.keys().collect::<Vec<_>>()).finish()
    }
}

impl CoordConns {
    fn reset(&mut self, node_id: i32) {
        if let Some(c) = self.conns.remove(&node_id) {
            c.conn.abort();
        }
    }

    async fn connect(&mut self, dest: &ClusterClient, node_id: i32) -> Result<&mut DedicatedConnection, String> {
        use std::collections::hash_map::Entry;
        match self.conns.entry(node_id) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => Ok(e.insert(dest.open_dedicated(node_id).await.map_err(|e| e.to_string())?)),
        }
    }
}

impl Drop for CoordConns {
    fn drop(&mut self) {
        for (_, c) in self.conns.drain() {
            c.conn.abort();
        }
    }
}

/// Broker `node_id` of the destination as a [`TxnTransport`] for `topic`-`partition`'s
/// transactional requests, checked against the partition's ownership and lease (module docs).
pub(super) struct Leased<'a> {
    /// Ownership and lease.
    pub control: &'a ControlPlane,
    /// The destination.
    pub dest: &'a ClusterClient,
    /// The mirror partition whose transaction this is.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Its connections.
    pub conns: &'a mut CoordConns,
    /// The broker (coordinator or partition leader).
    pub node_id: i32,
}

/// Why a slot Produce got no answer.
pub(super) enum ProduceFailed {
    /// Not written: nothing can land.
    NotSent(String),
    /// Written (maybe partly) and not answered: it may have landed.
    Ambiguous(String),
}

impl Leased<'_> {
    /// The lease to send under, or why nothing may be sent.
    fn permission(&self) -> Result<Option<LeaseToken>, String> {
        if !self.control.owns_partition(self.topic, self.partition) {
            return Err(format!(
                "this instance does not own {}-{} any more (work moved, or its lease ran out): no transactional request",
                self.topic, self.partition
            ));
        }
        Ok(self.control.lease_token())
    }

    fn lease_ended(&self) -> String {
        format!(
            "this instance's lease ran out while a transactional request to broker {} was unanswered: the connection is reset",
            self.node_id
        )
    }

    /// Sends one Produce of `build(version)` (version at most `max_version`) for the slot
    /// transaction and waits for its answer.
    ///
    /// # Errors
    /// [`ProduceFailed`].
    pub(super) async fn produce(
        &mut self,
        max_version: i16,
        build: impl FnOnce(i16) -> Result<ProduceFrame, ProduceFrameError>,
    ) -> Result<ProduceResponse, ProduceFailed> {
        let lease = self.permission().map_err(ProduceFailed::NotSent)?;
        let conn = self.conns.connect(self.dest, self.node_id).await.map_err(ProduceFailed::NotSent)?;
        let version = conn.produce_version(max_version).map_err(|e| ProduceFailed::NotSent(e.to_string()))?;
        let frame = build(version).map_err(|e| ProduceFailed::NotSent(e.to_string()))?;
        match under_lease(lease, conn.conn.send_produce(frame)).await {
            Some(Ok(resp)) => Ok(resp),
            Some(Err(e)) => {
                self.conns.reset(self.node_id);
                Err(ProduceFailed::Ambiguous(e.to_string()))
            }
            None => {
                self.conns.reset(self.node_id);
                Err(ProduceFailed::Ambiguous(self.lease_ended()))
            }
        }
    }
}

impl TxnTransport for Leased<'_> {
    async fn send_request<R: Request + Clone + Send + Sync>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, TxnError> {
        let lease = self.permission().map_err(TxnError::NotSent)?;
        let conn = self.conns.connect(self.dest, self.node_id).await.map_err(TxnError::NotSent)?;
        match under_lease(lease, conn.send(req, version)).await {
            Some(Ok(resp)) => Ok(resp),
            Some(Err(e)) => {
                self.conns.reset(self.node_id);
                Err(TxnError::Cluster(Box::new(e)))
            }
            None => {
                self.conns.reset(self.node_id);
                Err(TxnError::NotSent(self.lease_ended()))
            }
        }
    }
}

/// Runs `f` while `lease` (if any) holds, checked every [`LEASE_CHECK`]: `None` when it ran
/// out first (`f` is dropped; the caller resets its connection).
async fn under_lease<F: Future>(lease: Option<LeaseToken>, f: F) -> Option<F::Output> {
    tokio::pin!(f);
    loop {
        tokio::select! {
            r = &mut f => return Some(r),
            _ = tokio::time::sleep(LEASE_CHECK), if lease.is_some() => {
                if lease.as_ref().is_some_and(|holds| !holds()) {
                    return None;
                }
            }
        }
    }
}

/// At a stop (STOPPING → STOPPED) of `mirror`'s `topic`-`partition`: aborts every transaction
/// of its marker and slot transactional ids still open on the destination (a slot left open by
/// a crash, or by a loop that could not resume it because the source is down) with
/// InitProducerId, which fences the id and makes the coordinator write the ABORT marker at the
/// log end (docs/real-markers.md T4), and needs nothing from the source. Returns how many it
/// aborted; each has put one control batch at the destination log end. Without it the
/// topic's last stable offset would stay at the open transaction's first record until the
/// coordinator's timeout (`transaction.max.timeout.ms`, 15 min by default), and read_committed
/// consumers of the failed-over topic would see none of the new writes.
///
/// # Errors
/// The first coordinator failure, as text (the stop is retried on the next pass).
pub async fn end_open_transactions(
    control: &ControlPlane,
    dest: &ClusterClient,
    mirror: &str,
    topic: &str,
    partition: i32,
) -> Result<usize, String> {
    if !control.partition(topic, partition).is_some_and(|r| r.transactions_used) {
        tracing::debug!(
            mirror,
            topic,
            partition,
            "stop: no transaction of mirrorgate's was ever used on the partition"
        );
        return Ok(0);
    }
    let mut conns = CoordConns::default();
    let mut aborted = 0;
    // The marker id, then the slots a0, a1, … up to the first the coordinator does not know.
    let mut slot = None::<u32>;
    loop {
        let id = txn_id(mirror, topic, partition, &slot.map_or("m".to_string(), |i| format!("a{i}")));
        let (node_id, _, _) =
            txn::find_coordinator(&mut AnyBroker(dest), &id).await.map_err(|e| format!("{id}: {e}"))?;
        let mut conn = Leased { control, dest, topic, partition, conns: &mut conns, node_id };
        let described = txn::describe(&mut conn, &id).await.map_err(|e| format!("{id}: {e}"))?;
        tracing::debug!(mirror, topic, partition, transactional_id = %id, state = ?described.as_ref().map(|d| &d.state), "stop: mirrorgate's destination transaction");
        match described {
            None if slot.is_some() => break,
            Some(d) if d.state == "Ongoing" || d.state.starts_with("Prepare") => {
                let timeout_ms = d.timeout_ms.max(1);
                TxnProducer::init(&mut conn, &id, timeout_ms, TxnProtocol::V1)
                    .await
                    .map_err(|e| format!("InitProducerId of {id}: {e}"))?;
                tracing::info!(mirror, topic, partition, transactional_id = %id, state = %d.state, "stop: mirrorgate's open destination transaction aborted (fenced with InitProducerId)");
                aborted += 1;
            }
            _ => {}
        }
        slot = Some(slot.map_or(0, |i| i + 1));
    }
    Ok(aborted)
}

/// After [`end_open_transactions`] put ABORT markers at destination offsets `[from, to)` of a
/// stopped partition where the copy had reached source offset `source_next`: those offsets
/// are hidden behind a new offset segment (as any marker of mirrorgate's where the source has
/// none, `markers::hide_extra_markers`), so a failback resumes at `source_next` after them
/// and the failback check does not take them for writes after the failover.
///
/// # Errors
/// The state write's failure, as text.
pub async fn hide_stop_markers(
    control: &ControlPlane,
    topic: &str,
    partition: i32,
    from: i64,
    to: i64,
    source_next: i64,
) -> Result<(), String> {
    let segments = control.partition(topic, partition).map(|r| r.segments).unwrap_or_default();
    if segments.len() >= model::MAX_OFFSET_SEGMENTS {
        tracing::warn!(topic, partition, from, to, "stop: the ABORT markers of mirrorgate's open transactions cannot be hidden (the partition has the most offset segments it keeps); a failback will report them as written after the failover");
        return Ok(());
    }
    let mut segments = segments;
    segments.push(OffsetSegment { source_start: source_next, destination_start: to });
    control.update_partition(topic, partition, |r| r.segments = segments).await.map(|_| ()).map_err(|e| e.to_string())
}
