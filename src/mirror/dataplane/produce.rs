//! Destination-side batching and pipelining for the copy loops. The loops of a mirror hand
//! their appends to one task per destination leader, which sends one Produce (acks=all)
//! carrying one batch of every partition that has one queued, and keeps up to
//! [`MAX_REQUESTS_IN_FLIGHT`] such requests in flight on a connection of its own, so that a
//! partition may have several appends in flight (issue 13, item 1).
//!
//! Ordering is what keeps this correct: Kafka reads the requests of one connection in order
//! and answers them in order (it handles one request per connection at a time), the appends
//! of a partition are queued, sent and answered in the order the copy loop submitted them, and
//! each carries the next producer sequence. When one of them fails, a broker that holds the
//! producer's state refuses every later one as OUT_OF_ORDER_SEQUENCE_NUMBER (45) without
//! appending it (docs/broker-behaviour.md, pipelined Produce): the copy loop takes the first
//! failure in submission order as the outcome and re-aligns from the destination log end. (A
//! broker without the state would take them: the copy loop keeps several appends in flight
//! only when the state is surely there, `super::pipeline`.)

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::client::cluster::{ClusterClient, DedicatedConnection, KafkaErrorCode};
use crate::client::conn::ProduceInFlight;
use crate::telemetry::traces::Timed;
use crate::wire::mirror::KafkaUuid;
use crate::wire::produce::{ProduceFrameBuilder, ProduceTopic};

use super::mux::MuxError;

/// Produce requests in flight at once on one destination connection. Each carries at most
/// one batch per partition, so a partition has at most this many appends in flight: within
/// the 5 batches per producer that the broker remembers for de-duplication (Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`, the Java producer's
/// `max.in.flight.requests.per.connection` limit with idempotence).
pub const MAX_REQUESTS_IN_FLIGHT: usize = 5;

/// Largest Produce request this writes, bytes of batches: jobs beyond it wait for the next
/// request (well under the broker's `socket.request.max.bytes`, 100 MiB by default).
const MAX_REQUEST_BYTES: usize = 32 << 20;

/// Partition errors of a Produce answer after which the batch may have been appended:
/// REQUEST_TIMED_OUT (7) and NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) (Kafka `Errors`;
/// `ReplicaManager.appendRecords` appends first, then waits for the ISR in purgatory).
pub const AMBIGUOUS_PRODUCE_ERRORS: [i16; 2] = [7, 20];

/// The Produce `timeout_ms` (how long the leader waits for the ISR) for a client whose
/// round trips time out after `request_timeout_ms`: shorter, so that a partition the ISR is
/// slow to acknowledge comes back as its own REQUEST_TIMED_OUT while the other partitions of
/// the request keep their answers, instead of the whole request timing out on the client.
pub fn produce_timeout_ms(request_timeout_ms: i32) -> i32 {
    (request_timeout_ms - 5_000).max(request_timeout_ms / 2).max(1)
}

struct ProduceJob {
    /// The mirror the append is for, for its span (only while traces are on).
    mirror: Option<Arc<str>>,
    topic: String,
    partition: i32,
    segments: Vec<Bytes>,
    /// Submitted while an earlier append of the partition was unanswered.
    behind: bool,
    reply: oneshot::Sender<Result<i64, MuxError>>,
}

impl ProduceJob {
    fn len(&self) -> usize {
        self.segments.iter().map(Bytes::len).sum()
    }
}

/// An append handed to a [`ProduceMux`]: its answer, the base offset the broker assigned.
#[derive(Debug)]
pub struct PendingAppend {
    rx: oneshot::Receiver<Result<i64, MuxError>>,
}

impl PendingAppend {
    /// Waits for the broker's answer: the base offset, or why there is none
    /// ([`MuxError::Ambiguous`] when the append may or may not have landed).
    ///
    /// # Errors
    /// [`MuxError`].
    pub async fn outcome(mut self) -> Result<i64, MuxError> {
        self.answer().await
    }

    /// As [`PendingAppend::outcome`], cancel-safe; must not be awaited again once it returned.
    ///
    /// # Errors
    /// [`MuxError`].
    pub async fn answer(&mut self) -> Result<i64, MuxError> {
        (&mut self.rx).await.map_err(|_| MuxError::Ambiguous("writer stopped".into()))?
    }
}

/// How often a writer with a Produce being written or unanswered checks the lease it was
/// written under. An instance that lost its lease (cut off from the group coordinator)
/// resets the connection well before the group gives the partitions to another instance
/// (the lease ends a heartbeat interval before the session does), so a request held in the
/// socket's send queue by a network cut is discarded instead of landing after the new
/// owner's appends. (A rebalance does not reset anything: the loops finish their appends
/// under the lease of the generation they were written in.)
const OWNERSHIP_CHECK: Duration = Duration::from_millis(200);

/// Destination-side batching: per destination leader, Produce requests (acks=all) carrying one
/// batch for every waiting partition, up to [`MAX_REQUESTS_IN_FLIGHT`] in flight.
pub struct ProduceMux {
    client: ClusterClient,
    timeout_ms: i32,
    request_timeout: Duration,
    brokers: Mutex<HashMap<i32, mpsc::UnboundedSender<ProduceJob>>>,
    guard: Option<WriteGuard>,
    lease: Option<LeaseWatch>,
}

/// Decides, right before a Produce is written, whether `topic`-`partition` may still be
/// appended to by this instance (its ownership and lease, `ControlPlane::owns_partition`).
pub type WriteGuard = Arc<dyn Fn(&str, i32) -> bool + Send + Sync>;

/// Whether the permission to write that held when a Produce was written still holds: the
/// lease of the group generation it was written in (`None`: no lease, a single instance).
pub type LeaseToken = Arc<dyn Fn() -> bool + Send + Sync>;

/// The lease token of this instance now (`ControlPlane::lease_token`).
pub type LeaseWatch = Arc<dyn Fn() -> Option<LeaseToken> + Send + Sync>;

impl ProduceMux {
    /// A multiplexer over the destination `client`.
    /// `request_timeout_ms` is the client's round-trip timeout; each Produce asks the leader
    /// to answer within [`produce_timeout_ms`] of it.
    pub fn new(client: ClusterClient, request_timeout_ms: i32) -> Arc<Self> {
        let timeout_ms = produce_timeout_ms(request_timeout_ms);
        let request_timeout = Duration::from_millis(request_timeout_ms.max(1) as u64);
        Arc::new(Self {
            client,
            timeout_ms,
            request_timeout,
            brokers: Mutex::new(HashMap::new()),
            guard: None,
            lease: None,
        })
    }

    /// [`ProduceMux::new`] whose appends are checked against `guard` just before each
    /// Produce is written: an append of a partition the guard refuses is not sent
    /// ([`MuxError::NotSent`]), so an instance whose work moved (or whose lease ran out) never
    /// writes after it. Each request written keeps the `lease` token of that moment: when it
    /// stops holding while the request is unanswered, or while it is still being written, the
    /// connection is reset ([`OWNERSHIP_CHECK`]).
    pub fn with_guard(
        client: ClusterClient,
        request_timeout_ms: i32,
        guard: WriteGuard,
        lease: LeaseWatch,
    ) -> Arc<Self> {
        let timeout_ms = produce_timeout_ms(request_timeout_ms);
        let request_timeout = Duration::from_millis(request_timeout_ms.max(1) as u64);
        Arc::new(Self {
            client,
            timeout_ms,
            request_timeout,
            brokers: Mutex::new(HashMap::new()),
            guard: Some(guard),
            lease: Some(lease),
        })
    }

    /// Queues one batch (as segments) for `topic`-`partition` behind the appends queued for
    /// it before, without waiting for the answer. `behind`: an earlier append of the
    /// partition is still unanswered (it is refused, not sent, when that one's connection was
    /// cut).
    ///
    /// # Errors
    /// [`MuxError::NotSent`] when the partition's leader is not known.
    pub async fn submit(
        &self,
        mirror: &str,
        topic: &str,
        partition: i32,
        segments: Vec<Bytes>,
        behind: bool,
    ) -> Result<PendingAppend, MuxError> {
        let leader = self.client.leader_for(topic, partition).await.map_err(|e| MuxError::NotSent(e.to_string()))?;
        let (reply, rx) = oneshot::channel();
        let mirror = crate::telemetry::traces::enabled().then(|| Arc::from(mirror));
        let job = ProduceJob { mirror, topic: topic.to_string(), partition, segments, behind, reply };
        self.broker(leader.node_id).send(job).map_err(|_| MuxError::NotSent("writer stopped".into()))?;
        Ok(PendingAppend { rx })
    }

    /// Appends one batch (as segments) to `topic`-`partition` and waits; returns its base
    /// offset.
    ///
    /// # Errors
    /// [`MuxError`]: [`MuxError::Ambiguous`] when the outcome is unknown.
    pub async fn append(
        &self,
        mirror: &str,
        topic: &str,
        partition: i32,
        segments: Vec<Bytes>,
    ) -> Result<i64, MuxError> {
        self.submit(mirror, topic, partition, segments, false).await?.outcome().await
    }

    fn broker(&self, node_id: i32) -> mpsc::UnboundedSender<ProduceJob> {
        let mut brokers = self.brokers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = brokers.get(&node_id).filter(|tx| !tx.is_closed()) {
            return tx.clone();
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = BrokerWriter {
            client: self.client.clone(),
            node_id,
            timeout_ms: self.timeout_ms,
            request_timeout: self.request_timeout,
            conn: None,
            queue: VecDeque::new(),
            sent: VecDeque::new(),
            cut: HashSet::new(),
            next_correlation_id: 1,
            guard: self.guard.clone(),
            lease: self.lease.clone(),
        };
        tokio::spawn(writer.run(rx));
        brokers.insert(node_id, tx.clone());
        tx
    }
}

/// A Produce on the wire: the jobs it carries (with the topic ids it named them by, when
/// it did), and when the client gives up on its answer.
struct Sent {
    request: ProduceInFlight,
    jobs: Vec<(ProduceJob, KafkaUuid)>,
    by_id: bool,
    /// The write permission it was written under.
    lease: Option<LeaseToken>,
    /// Its span (`mirror.append`), while traces are on.
    span: Option<Timed>,
}

/// The task of one destination broker.
struct BrokerWriter {
    client: ClusterClient,
    node_id: i32,
    timeout_ms: i32,
    request_timeout: Duration,
    conn: Option<DedicatedConnection>,
    /// Jobs not sent yet, in submission order.
    queue: VecDeque<ProduceJob>,
    /// Requests in flight, oldest first.
    sent: VecDeque<Sent>,
    /// Partitions whose appends were cut off with a connection: their appends submitted
    /// behind the cut ones are refused until one comes with nothing ahead of it.
    cut: HashSet<(String, i32)>,
    /// Checked for every job right before its Produce is written.
    guard: Option<WriteGuard>,
    /// The write permission each request is written under.
    lease: Option<LeaseWatch>,
    next_correlation_id: i32,
}

impl BrokerWriter {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<ProduceJob>) {
        let mut closed = false;
        // When the client gives up on the oldest request in flight: a request timeout after it
        // was written, or after the answer before it (the broker handles them one at a time).
        let mut deadline = tokio::time::Instant::now();
        let mut ownership_check = tokio::time::Instant::now() + OWNERSHIP_CHECK;
        loop {
            self.send_queued(&mut deadline).await;
            if closed && self.queue.is_empty() && self.sent.is_empty() {
                return;
            }
            let room = self.sent.len() < MAX_REQUESTS_IN_FLIGHT;
            let (conn, front) = (self.conn.as_mut(), self.sent.front().map(|s| s.request));
            let read = async {
                match (conn, front) {
                    (Some(c), Some(request)) => c.conn.read_produce(&request).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                answer = read => {
                    let sent = self.sent.pop_front().expect("a request in flight");
                    deadline = tokio::time::Instant::now() + self.request_timeout;
                    match answer {
                        Ok(resp) => self.dispatch(sent, &resp),
                        Err(e) => {
                            tracing::debug!(broker = self.node_id, error = %e, "destination connection lost with Produce requests in flight");
                            let m = e.to_string();
                            self.sent.push_front(sent);
                            self.abandon(&m);
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline), if !self.sent.is_empty() => {
                    let m = format!("no Produce answer from broker {} within {} ms", self.node_id, self.request_timeout.as_millis());
                    self.abandon(&m);
                }
                _ = tokio::time::sleep_until(ownership_check), if self.lease.is_some() && !self.sent.is_empty() => {
                    ownership_check = tokio::time::Instant::now() + OWNERSHIP_CHECK;
                    if self.sent.iter().any(|s| s.lease.as_ref().is_some_and(|holds| !holds())) {
                        let m = format!("this instance's lease ran out while a Produce was unanswered: the connection to broker {} is reset", self.node_id);
                        tracing::info!(broker = self.node_id, "destination connection reset: the lease ran out with a Produce in flight");
                        self.abandon(&m);
                    }
                }
                job = rx.recv(), if !closed && room => match job {
                    Some(job) => {
                        self.accept(job);
                        while let Ok(job) = rx.try_recv() {
                            self.accept(job);
                        }
                    }
                    None => closed = true,
                },
            }
        }
    }

    /// Writes requests while there is room and something queued. Connects (or
    /// re-authenticates, KIP-368) only with nothing in flight.
    async fn send_queued(&mut self, deadline: &mut tokio::time::Instant) {
        while self.sent.len() < MAX_REQUESTS_IN_FLIGHT && !self.queue.is_empty() {
            // Behind k requests in flight, a new one may be read by the broker only after k
            // request timeouts: stop pipelining while that could pass the re-authentication
            // time (the appends would be cut with the connection and become ambiguous).
            let behind = self.request_timeout * self.sent.len() as u32;
            if self.conn.as_ref().is_some_and(|c| c.conn.reauthentication_due_within(behind)) {
                if !self.sent.is_empty() {
                    return;
                }
                let c = self.conn.as_mut().expect("checked");
                if let Err(e) = c.conn.reauthenticate_if_due().await {
                    tracing::debug!(broker = self.node_id, error = %e, "destination connection dropped: re-authentication failed");
                    self.conn = None;
                }
            }
            if self.conn.is_none() {
                match self.client.open_dedicated(self.node_id).await {
                    Ok(c) => self.conn = Some(c),
                    Err(e) => {
                        not_sent(self.queue.drain(..), &e.to_string());
                        return;
                    }
                }
            }
            let mut jobs = self.take_round();
            if let Some(guard) = &self.guard {
                let (allowed, refused): (Vec<ProduceJob>, Vec<ProduceJob>) =
                    jobs.into_iter().partition(|j| guard(&j.topic, j.partition));
                // Appends queued behind a refused one must not go out later (were the
                // partition owned here again): they are refused like those behind a cut.
                self.cut.extend(refused.iter().map(|j| (j.topic.clone(), j.partition)));
                not_sent(
                    refused,
                    "this instance does not own the partition any more (work moved, or its lease ran out)",
                );
                jobs = allowed;
                if jobs.is_empty() {
                    continue;
                }
            }
            let ids: Vec<KafkaUuid> = jobs.iter().map(|j| self.client.cached_topic_id(&j.topic)).collect();
            // (Produce v13 names topics by id only: with an id not known yet, v12 by name.)
            let by_id = ids.iter().all(|id| *id != KafkaUuid::ZERO);
            let conn = self.conn.as_mut().expect("connected above");
            let version = match conn.produce_version(if by_id { i16::MAX } else { 12 }) {
                Ok(v) => v,
                Err(e) => {
                    not_sent(jobs, &e.to_string());
                    continue;
                }
            };
            let correlation_id = self.next_correlation_id;
            self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
            let mut b = ProduceFrameBuilder::new(
                version,
                correlation_id,
                &self.client.options().client_id,
                -1,
                self.timeout_ms,
            );
            for (j, id) in jobs.iter().zip(&ids) {
                if version >= 13 && by_id {
                    b.partition(ProduceTopic::Id(uuid::Uuid::from_bytes(id.0)), j.partition, j.segments.clone());
                } else {
                    b.partition(j.topic.as_str(), j.partition, j.segments.clone());
                }
            }
            let frame = match b.finish() {
                Ok(f) => f,
                Err(e) => {
                    not_sent(jobs, &e.to_string());
                    continue;
                }
            };
            let jobs: Vec<(ProduceJob, KafkaUuid)> = jobs.into_iter().zip(ids).collect();
            let lease = self.lease.as_ref().and_then(|watch| watch());
            let span = Timed::start();
            // A write blocked by a full send buffer (a network cut) must not finish after the
            // lease ran out: it is given up and the connection reset, like a request in flight.
            let written = {
                let write = conn.conn.write_produce(frame);
                tokio::pin!(write);
                loop {
                    tokio::select! {
                        r = &mut write => break Some(r),
                        _ = tokio::time::sleep(OWNERSHIP_CHECK), if lease.is_some() => {
                            if lease.as_ref().is_some_and(|holds| !holds()) {
                                break None;
                            }
                        }
                    }
                }
            };
            match written {
                Some(Ok(request)) => {
                    if self.sent.is_empty() {
                        *deadline = tokio::time::Instant::now() + self.request_timeout;
                    }
                    self.sent.push_back(Sent { request, jobs, by_id, lease, span });
                }
                failed => {
                    // Partly written, maybe read and appended: unknown, as everything before it.
                    let m = match failed {
                        Some(Err(e)) => e.to_string(),
                        _ => format!("this instance's lease ran out while a Produce to broker {} was being written: the connection is reset", self.node_id),
                    };
                    self.sent.push_back(Sent {
                        request: ProduceInFlight { correlation_id, version, expects_response: true },
                        jobs,
                        by_id,
                        lease: None,
                        span,
                    });
                    self.abandon(&m);
                }
            }
        }
    }

    /// The next request's jobs: the first queued job of each partition, in queue order (the
    /// broker takes one batch per partition per request), up to [`MAX_REQUEST_BYTES`].
    fn take_round(&mut self) -> Vec<ProduceJob> {
        let mut seen = HashSet::new();
        let mut now = Vec::new();
        let mut rest = VecDeque::new();
        let mut bytes = 0usize;
        for j in self.queue.drain(..) {
            let fits = now.is_empty() || bytes + j.len() <= MAX_REQUEST_BYTES;
            // (A partition seen once keeps its later jobs behind its first, even one that
            // did not fit.)
            if seen.insert((j.topic.clone(), j.partition)) && fits {
                bytes += j.len();
                now.push(j);
            } else {
                rest.push_back(j);
            }
        }
        self.queue = rest;
        now
    }

    /// Queues `job`, unless its partition was cut off and it was submitted behind an append
    /// that was.
    fn accept(&mut self, job: ProduceJob) {
        if !self.cut.is_empty() {
            let key = (job.topic.clone(), job.partition);
            if self.cut.contains(&key) {
                if job.behind {
                    let _ = job.reply.send(Err(MuxError::NotSent("an earlier append was cut off".into())));
                    return;
                }
                self.cut.remove(&key);
            }
        }
        self.queue.push_back(job);
    }

    /// The connection is gone with requests in flight: each may or may not have been
    /// appended. Their jobs get [`MuxError::Ambiguous`]; the next request reconnects.
    /// The queued jobs of those partitions are answered [`MuxError::NotSent`]: sent on a new
    /// connection they could race what the broker still does with the abandoned requests.
    fn abandon(&mut self, why: &str) {
        // Reset, not closed: a Produce still in the socket's send queue (a network cut) must
        // not reach the broker later, after this instance re-aligned or another took over.
        if let Some(c) = self.conn.take() {
            c.conn.abort();
        }
        let mut hit = HashSet::new();
        for sent in self.sent.drain(..) {
            for (job, _) in sent.jobs {
                hit.insert((job.topic.clone(), job.partition));
                let _ = job.reply.send(Err(MuxError::Ambiguous(why.to_string())));
            }
        }
        let queue = std::mem::take(&mut self.queue);
        for job in queue {
            if hit.contains(&(job.topic.clone(), job.partition)) {
                let _ = job.reply.send(Err(MuxError::NotSent(format!("an earlier append was cut off: {why}"))));
            } else {
                self.queue.push_back(job);
            }
        }
        self.cut.extend(hit);
    }

    /// Hands each job of `sent` its partition's answer.
    fn dispatch(&self, sent: Sent, resp: &kafka_protocol::messages::ProduceResponse) {
        let node_id = self.node_id;
        let version = sent.request.version;
        if let Some(timed) = sent.span {
            append_span(timed, node_id, &sent, resp);
        }
        for (j, id) in sent.jobs {
            let p = resp
                .responses
                .iter()
                .filter(|t| {
                    if version >= 13 && sent.by_id {
                        KafkaUuid(*t.topic_id.as_bytes()) == id
                    } else {
                        t.name.0.as_str() == j.topic
                    }
                })
                .flat_map(|t| t.partition_responses.iter())
                .find(|p| p.index == j.partition);
            let answer = match p {
                None => {
                    Err(MuxError::Ambiguous(format!("broker {node_id} did not answer for {}-{}", j.topic, j.partition)))
                }
                Some(p) if p.error_code == 0 => Ok(p.base_offset),
                // The batch may sit in the leader's log (above the high watermark):
                // REQUEST_TIMED_OUT when the ISR did not acknowledge it within the request's
                // timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
                // min.insync.replicas after the append.
                Some(p) if AMBIGUOUS_PRODUCE_ERRORS.contains(&p.error_code) => Err(MuxError::Ambiguous(format!(
                    "{} for {}-{}",
                    KafkaErrorCode(p.error_code),
                    j.topic,
                    j.partition
                ))),
                Some(p) => {
                    if KafkaErrorCode(p.error_code).needs_metadata_refresh() {
                        self.client.forget_topic(&j.topic);
                    }
                    Err(MuxError::Kafka(p.error_code, p.error_message.as_ref().map(|m| m.to_string())))
                }
            };
            let _ = j.reply.send(answer);
        }
    }
}

/// The span of one Produce to a destination leader (`mirror.append`, `CLIENT`): the
/// partitions it carried, its bytes, and the first partition error.
fn append_span(timed: Timed, node_id: i32, sent: &Sent, resp: &kafka_protocol::messages::ProduceResponse) {
    use crate::telemetry::traces::{error_type, Attr};
    let mut mirrors: Vec<opentelemetry::StringValue> = Vec::new();
    let mut topics: Vec<opentelemetry::StringValue> = Vec::new();
    let mut partitions = Vec::with_capacity(sent.jobs.len());
    let mut bytes = 0usize;
    for (j, _) in &sent.jobs {
        if let Some(m) = &j.mirror {
            if !mirrors.iter().any(|x| x.as_str() == &**m) {
                mirrors.push(m.to_string().into());
            }
        }
        if !topics.iter().any(|t| t.as_str() == j.topic) {
            topics.push(j.topic.clone().into());
        }
        partitions.push(opentelemetry::StringValue::from(format!("{}-{}", j.topic, j.partition)));
        bytes += j.len();
    }
    let error =
        resp.responses.iter().flat_map(|t| t.partition_responses.iter()).map(|p| p.error_code).find(|c| *c != 0);
    let mut attrs = vec![
        Attr::new("mirrorgate.destination_broker", i64::from(node_id)),
        Attr::new("kafka.api_version", i64::from(sent.request.version)),
        Attr::new("kafka.correlation_id", i64::from(sent.request.correlation_id)),
        Attr::new("mirror.partition_count", sent.jobs.len() as i64),
        Attr::new("kafka.request.bytes", bytes as i64),
    ];
    if topics.len() == 1 {
        attrs.push(Attr::new("mirror.topic", topics[0].clone()));
    }
    if mirrors.len() == 1 {
        attrs.push(Attr::new("mirror.name", mirrors[0].clone()));
    }
    attrs.push(Attr::new("mirror.names", opentelemetry::Value::Array(mirrors.into())));
    attrs.push(Attr::new("mirror.topics", opentelemetry::Value::Array(topics.into())));
    attrs.push(Attr::new("mirror.partitions", opentelemetry::Value::Array(partitions.into())));
    if let Some(c) = error {
        attrs.push(Attr::new("kafka.error_code", i64::from(c)));
    }
    timed.finish("mirror.append", opentelemetry::trace::SpanKind::Client, attrs, error.map(error_type), None);
}

/// Answers every job of `jobs` [`MuxError::NotSent`] with `why`.
fn not_sent(jobs: impl IntoIterator<Item = ProduceJob>, why: &str) {
    for job in jobs {
        let _ = job.reply.send(Err(MuxError::NotSent(why.to_string())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_answers_a_produce_before_the_client_gives_up_on_it() {
        assert_eq!(produce_timeout_ms(30_000), 25_000);
        assert_eq!(produce_timeout_ms(6_000), 3_000);
        assert_eq!(produce_timeout_ms(1), 1);
    }
}
