//! Per-source-broker Fetch batching for the copy loops (issue: "many partitions per
//! request"). Every copy loop has at most one Fetch outstanding; the loops of a mirror hand
//! them to one task per source broker, which sends everything queued as one request and hands
//! each loop its partition's answer. While a request is in flight the next one's partitions
//! queue up, so a broker sees one Fetch at a time per mirror, carrying every partition that is
//! ready. Fetches run in an incremental fetch session (KIP-227): after the first request only
//! changed partitions are listed, and the broker answers only partitions with something new.
//! (The destination side, Produce, is [`super::produce`].)

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use crate::client::cluster::{ClusterClient, ClusterError, DedicatedConnection, KafkaErrorCode};

use super::session::{
    FetchParams, FetchSession, PartitionKey, FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
};
use super::source::{FetchSettings, SourceChunk};
use super::throttle::ByteRate;

/// Why a multiplexed request did not give a partition its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MuxError {
    /// The broker answered this partition with a Kafka error.
    Kafka(i16, Option<String>),
    /// The request went out and no answer came back: a Produce may have been appended.
    Ambiguous(String),
    /// Nothing was sent (no leader, no connection, ...).
    NotSent(String),
}

impl std::fmt::Display for MuxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MuxError::Kafka(code, msg) => {
                write!(f, "{}{}", KafkaErrorCode(*code), msg.as_ref().map(|m| format!(": {m}")).unwrap_or_default())
            }
            MuxError::Ambiguous(m) => write!(f, "no answer: {m}"),
            MuxError::NotSent(m) => write!(f, "not sent: {m}"),
        }
    }
}

struct FetchJob {
    topic: String,
    partition: i32,
    params: FetchParams,
    reply: oneshot::Sender<Result<SourceChunk, MuxError>>,
}

/// Counters of one mirror's Fetch requests, across its source brokers.
#[derive(Debug, Default)]
pub struct FetchStats {
    /// Full requests sent (no session yet, or after a reset).
    pub full: AtomicU64,
    /// Incremental requests sent (KIP-227 session epoch >= 1).
    pub incremental: AtomicU64,
    /// Partitions listed in requests, summed.
    pub partitions_listed: AtomicU64,
    /// Partition answers handed to copy loops, summed (listed or not).
    pub partitions_answered: AtomicU64,
    /// Sessions dropped after an error (the next request is full).
    pub session_resets: AtomicU64,
    /// Fetches a source quota throttled (answered empty; asked again after the throttle time).
    pub throttled: AtomicU64,
}

/// Source-side batching: one Fetch per source broker carrying every waiting partition, in an
/// incremental fetch session ([`super::session`]).
pub struct FetchMux {
    client: ClusterClient,
    settings: FetchSettings,
    mirror: String,
    stats: Arc<FetchStats>,
    budget: Arc<Semaphore>,
    rate: Arc<ByteRate>,
    /// One fetcher per (source broker, fetcher index < `mirror.num.replica.fetchers`).
    brokers: Mutex<HashMap<(i32, usize), mpsc::UnboundedSender<FetchJob>>>,
}

impl FetchMux {
    /// A multiplexer over `client` with the fetch settings of mirror `mirror`.
    pub fn new(client: ClusterClient, settings: FetchSettings, mirror: &str) -> Arc<Self> {
        crate::mirror::metrics::register_mirror(mirror);
        Arc::new(Self {
            client,
            settings,
            mirror: mirror.to_string(),
            stats: Arc::default(),
            budget: Arc::new(Semaphore::new(settings.inflight_max_bytes.max(1) as usize)),
            rate: Arc::new(ByteRate::new(mirror, settings.throttled_rate)),
            brokers: Mutex::new(HashMap::new()),
        })
    }

    /// Request counters so far.
    pub fn stats(&self) -> &FetchStats {
        &self.stats
    }

    /// Bytes of the in-flight budget (`mirror.inflight.max.bytes`) taken right now: by
    /// requests on the wire and by fetched records not yet dropped by their copy loop.
    pub fn inflight_bytes(&self) -> usize {
        (self.settings.inflight_max_bytes.max(1) as usize).saturating_sub(self.budget.available_permits())
    }

    /// The whole in-flight budget (`mirror.inflight.max.bytes`), bytes.
    pub fn budget_total(&self) -> usize {
        self.settings.inflight_max_bytes.max(1) as usize
    }

    /// Takes `bytes` of the in-flight budget for memory a copy loop allocates itself (the
    /// decompressed records of a compacted batch it splits) if that much is free now;
    /// `None` otherwise, or when `bytes` exceeds [`Self::budget_total`].
    pub fn try_take_budget(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let n = u32::try_from(bytes).ok().filter(|n| *n as usize <= self.budget_total())?;
        self.budget.clone().try_acquire_many_owned(n).ok()
    }

    /// Like [`Self::try_take_budget`], waiting until `bytes` are free; `None` only when
    /// `bytes` exceeds [`Self::budget_total`] (it could never be granted). A caller holding
    /// fetched records should drop their room first, or two waiting loops can block each other.
    pub async fn take_budget(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let n = u32::try_from(bytes).ok().filter(|n| *n as usize <= self.budget_total())?;
        self.budget.clone().acquire_many_owned(n).await.ok()
    }

    /// Fetches `topic`-`partition` at `offset` (READ_COMMITTED, `LastFetchedEpoch`
    /// `last_epoch`) in the next request to its leader.
    ///
    /// # Errors
    /// [`MuxError`]; partition-level Kafka errors come back in [`SourceChunk::error_code`].
    pub async fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        last_epoch: i32,
    ) -> Result<SourceChunk, MuxError> {
        let leader = self.client.leader_for(topic, partition).await.map_err(|e| MuxError::NotSent(e.to_string()))?;
        let (reply, rx) = oneshot::channel();
        let params = FetchParams {
            offset,
            last_fetched_epoch: last_epoch,
            current_leader_epoch: leader.leader_epoch,
            max_bytes: self.settings.partition_max_bytes,
        };
        let job = FetchJob { topic: topic.to_string(), partition, params, reply };
        // A partition always goes to the same fetcher of its leader.
        let index = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (topic, partition).hash(&mut h);
            (h.finish() % self.settings.fetchers.max(1) as u64) as usize
        };
        self.broker(leader.node_id, index).send(job).map_err(|_| MuxError::NotSent("fetcher stopped".into()))?;
        rx.await.map_err(|_| MuxError::NotSent("fetcher stopped".into()))?
    }

    fn broker(&self, node_id: i32, index: usize) -> mpsc::UnboundedSender<FetchJob> {
        let mut brokers = self.brokers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = brokers.get(&(node_id, index)).filter(|tx| !tx.is_closed()) {
            return tx.clone();
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let fetcher = Fetcher {
            client: self.client.clone(),
            node_id,
            settings: self.settings,
            mirror: self.mirror.clone(),
            stats: self.stats.clone(),
            budget: self.budget.clone(),
            rate: self.rate.clone(),
            conn: None,
            session: FetchSession::new(),
            metrics: crate::mirror::metrics::SourceFetchMetrics::new(&self.mirror, node_id),
        };
        // A fetcher that panics is counted (KIP-1279 DeadThreadCount); the next fetch for its
        // broker finds the channel closed and starts another.
        let mirror = self.mirror.clone();
        let task = tokio::spawn(fetcher.run(rx));
        tokio::spawn(async move {
            if let Err(e) = task.await {
                if e.is_panic() {
                    tracing::error!(%mirror, broker = node_id, error = %e, "source fetcher panicked; the next fetch starts another");
                    crate::mirror::metrics::dead_task(&mirror, "fetcher");
                }
            }
        });
        brokers.insert((node_id, index), tx.clone());
        tx
    }
}

/// The span of one Fetch round to a source broker (`mirror.fetch`, `CLIENT`): the mirror, the
/// partitions asked for, the record bytes answered and the first error.
fn fetch_span(
    timed: crate::telemetry::traces::Timed,
    mirror: &str,
    node_id: i32,
    wants: &[(PartitionKey, FetchParams)],
    long_poll: bool,
    throttled: u32,
    outcome: &Result<Sent, MuxError>,
) {
    use crate::telemetry::traces::{error_type, Attr};
    use opentelemetry::{StringValue, Value};
    let mut topics: Vec<StringValue> = Vec::new();
    for ((t, _), _) in wants {
        if !topics.iter().any(|x| x.as_str() == t) {
            topics.push(t.clone().into());
        }
    }
    let partitions: Vec<StringValue> = wants.iter().map(|((t, p), _)| format!("{t}-{p}").into()).collect();
    let mut attrs = vec![
        Attr::new("mirror.name", mirror.to_string()),
        Attr::new("mirrorgate.source_broker", i64::from(node_id)),
        Attr::new("mirror.partition_count", wants.len() as i64),
        Attr::new("mirrorgate.long_poll", long_poll),
        Attr::new("mirrorgate.throttled_answers", i64::from(throttled)),
    ];
    if topics.len() == 1 {
        attrs.push(Attr::new("mirror.topic", topics[0].clone()));
    }
    if let [((_, p), _)] = wants {
        attrs.push(Attr::new("mirror.partition", i64::from(*p)));
    }
    attrs.push(Attr::new("mirror.topics", Value::Array(topics.into())));
    attrs.push(Attr::new("mirror.partitions", Value::Array(partitions.into())));
    let error = match outcome {
        Err(e) => Some(mux_error_type(e)),
        Ok(Sent::Throttled(_)) => None,
        Ok(Sent::Answered(answers)) => {
            let bytes: usize = answers.values().map(|c| c.records.len()).sum();
            attrs.push(Attr::new("kafka.response.records_bytes", bytes as i64));
            answers.values().map(|c| c.error_code).find(|c| *c != 0).map(|c| {
                attrs.push(Attr::new("kafka.error_code", i64::from(c)));
                error_type(c)
            })
        }
    };
    timed.finish("mirror.fetch", opentelemetry::trace::SpanKind::Client, attrs, error, None);
}

/// A low-cardinality `error.type` for a [`MuxError`].
pub(crate) fn mux_error_type(e: &MuxError) -> String {
    match e {
        MuxError::Kafka(code, _) => crate::telemetry::traces::error_type(*code),
        MuxError::Ambiguous(_) => "NO_ANSWER".into(),
        MuxError::NotSent(_) => "NOT_SENT".into(),
    }
}

/// How long a round waits for the copy loops whose last answer was empty (they re-ask at
/// once) so that an idle partition is not dropped from the session and re-added every round.
const GATHER_IDLE: Duration = Duration::from_millis(5);

/// What the fetcher of one source broker knows of the copy loops it serves, to shape its
/// rounds (issue 13, "a stall"): a caught-up partition re-asks within microseconds of its
/// empty answer, while a partition that got records comes back only once its appends are
/// done. A round of caught-up partitions alone would make the broker hold the request for
/// `fetch.wait.max.ms` (nothing new for them) while the busy partitions queue behind it, so:
///
/// * a round made only of caught-up partitions waits for a busy partition to re-ask (at most
///   `fetch.wait.max.ms` per round; a busy partition that has not come back after
///   [`BUSY_EXPIRY_ROUNDS`] such waits is forgotten: its copy loop ended or is failing);
/// * the broker may wait (`MaxWaitMs`) only when no busy partition of this broker is missing
///   from the round, otherwise the request asks for an immediate answer;
/// * the response room is shrunk to [`MIN_RESERVATION`] only when every listed partition was
///   caught up at its last answer.
#[derive(Debug, Default)]
struct RoundShape {
    /// Partitions whose last answer was empty (caught up): expected back at once; with the
    /// round they were last listed in (a partition absent for [`IDLE_EXPIRY_ROUNDS`] rounds
    /// left this broker: its leader moved, or its loop stopped).
    idle: HashMap<PartitionKey, u64>,
    /// Rounds answered so far.
    rounds: u64,
    /// Partitions whose last answer carried records: expected back after their appends;
    /// with the time of that answer.
    busy: HashMap<PartitionKey, tokio::time::Instant>,
}

/// Rounds a caught-up partition may be absent before the fetcher stops waiting for it.
const IDLE_EXPIRY_ROUNDS: u64 = 3;

/// How many `fetch.wait.max.ms` a busy partition may stay away before the fetcher stops
/// waiting for it (at least [`BUSY_EXPIRY_MIN`]).
const BUSY_EXPIRY_ROUNDS: u32 = 10;
/// The shortest time a busy partition is waited for, whatever `fetch.wait.max.ms` is.
const BUSY_EXPIRY_MIN: Duration = Duration::from_secs(5);

impl RoundShape {
    /// True when the partitions of `keys` are all caught up while another partition is busy:
    /// such a round waits for a busy partition to re-ask.
    fn should_wait_for_busy(&self, keys: &HashSet<PartitionKey>) -> bool {
        !self.busy.is_empty() && self.all_caught_up(keys)
    }

    /// Whether the broker may hold a request listing `keys` (no busy partition left out).
    fn may_long_poll(&self, keys: &HashSet<PartitionKey>) -> bool {
        self.busy.keys().all(|k| keys.contains(k))
    }

    /// Forgets the busy partitions answered before `before`.
    fn expire_busy(&mut self, before: tokio::time::Instant) {
        self.busy.retain(|_, at| *at >= before);
    }

    /// Whether every partition of `keys` was caught up at its last answer.
    fn all_caught_up(&self, keys: &HashSet<PartitionKey>) -> bool {
        keys.iter().all(|k| self.idle.contains_key(k))
    }

    /// Whether `key` was caught up at its last answer.
    fn is_idle(&self, key: &PartitionKey) -> bool {
        self.idle.contains_key(key)
    }

    /// Records the answers of a round: partitions answered empty are idle, with records busy;
    /// partitions answered with an error (their loops re-align after a backoff) are neither.
    fn answered(&mut self, keys: &HashSet<PartitionKey>, idle: HashSet<PartitionKey>, busy: HashSet<PartitionKey>) {
        self.rounds += 1;
        let round = self.rounds;
        self.idle.retain(|k, last| !keys.contains(k) && round - *last < IDLE_EXPIRY_ROUNDS);
        self.busy.retain(|k, _| !keys.contains(k));
        self.idle.extend(idle.into_iter().map(|k| (k, round)));
        let now = tokio::time::Instant::now();
        self.busy.extend(busy.into_iter().map(|k| (k, now)));
    }
}

/// What one Fetch brought back.
enum Sent {
    /// The partitions the broker answered.
    Answered(HashMap<PartitionKey, SourceChunk>),
    /// Throttled by a quota: nothing read; ask again after this long.
    Throttled(Duration),
}

/// Consecutive throttled answers after which a round gives its loops an error.
const THROTTLED_ROUNDS: u32 = 20;

/// The smallest Fetch response room a fetcher asks for when the budget is short, bytes.
const MIN_RESERVATION: u32 = 64 << 10;

/// The Fetch task of one mirror and source broker.
struct Fetcher {
    client: ClusterClient,
    node_id: i32,
    settings: FetchSettings,
    mirror: String,
    stats: Arc<FetchStats>,
    budget: Arc<Semaphore>,
    rate: Arc<ByteRate>,
    /// The fetcher's own connection to its broker (opened on first use, dropped on error).
    conn: Option<DedicatedConnection>,
    session: FetchSession,
    /// Its source broker's series (requests, bytes, errors, latency).
    metrics: crate::mirror::metrics::SourceFetchMetrics,
}

impl Fetcher {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<FetchJob>) {
        let mut shape = RoundShape::default();
        while let Some(first) = rx.recv().await {
            let mut jobs = vec![first];
            while let Ok(j) = rx.try_recv() {
                jobs.push(j);
            }
            let mut keys: HashSet<PartitionKey> = jobs.iter().map(|j| (j.topic.clone(), j.partition)).collect();
            // The caught-up partitions not asking yet re-ask at once: wait a moment for them.
            let deadline = tokio::time::Instant::now() + GATHER_IDLE;
            while shape.idle.keys().any(|k| !keys.contains(k)) {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(j)) => {
                        keys.insert((j.topic.clone(), j.partition));
                        jobs.push(j);
                    }
                    _ => break,
                }
            }
            // Only caught-up partitions, while others are appending what they fetched: wait
            // for one of those (they come back with work), rather than a long poll that holds
            // them up. Busy partitions that stay away for long are forgotten.
            if shape.should_wait_for_busy(&keys) {
                let deadline = tokio::time::Instant::now() + self.settings.max_wait;
                loop {
                    match tokio::time::timeout_at(deadline, rx.recv()).await {
                        Ok(Some(j)) => {
                            let key = (j.topic.clone(), j.partition);
                            let done = !shape.is_idle(&key);
                            keys.insert(key);
                            jobs.push(j);
                            if done {
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {
                            let expiry = (self.settings.max_wait * BUSY_EXPIRY_ROUNDS).max(BUSY_EXPIRY_MIN);
                            if let Some(before) = tokio::time::Instant::now().checked_sub(expiry) {
                                shape.expire_busy(before);
                            }
                            break;
                        }
                    }
                }
                // The partitions that re-ask together join this round.
                while let Ok(j) = rx.try_recv() {
                    keys.insert((j.topic.clone(), j.partition));
                    jobs.push(j);
                }
            }
            // One answer per partition and request. A copy loop has one fetch outstanding,
            // but a loop stopped and started again quickly may have left a job behind: the
            // jobs nobody waits for go, and of the rest the newest wins.
            let mut seen = HashSet::with_capacity(jobs.len());
            let mut jobs: Vec<FetchJob> = jobs
                .into_iter()
                .rev()
                .filter(|j| !j.reply.is_closed() && seen.insert((j.topic.clone(), j.partition)))
                .collect();
            jobs.reverse();
            if jobs.is_empty() {
                continue;
            }
            let keys: HashSet<PartitionKey> = jobs.iter().map(|j| (j.topic.clone(), j.partition)).collect();
            let long_poll = shape.may_long_poll(&keys);
            let small = shape.all_caught_up(&keys);
            let (idle, busy) = self.round(jobs, long_poll, small).await;
            shape.answered(&keys, idle, busy);
        }
        self.close().await;
    }

    /// Sends one Fetch for `jobs` and answers each; returns the partitions answered without
    /// records or error (caught up) and those answered with records. `long_poll` lets the
    /// broker wait up to `fetch.wait.max.ms`; `small` reserves only [`MIN_RESERVATION`].
    async fn round(
        &mut self,
        jobs: Vec<FetchJob>,
        long_poll: bool,
        small: bool,
    ) -> (HashSet<PartitionKey>, HashSet<PartitionKey>) {
        let wants: Vec<(PartitionKey, FetchParams)> =
            jobs.iter().map(|j| ((j.topic.clone(), j.partition), j.params)).collect();
        let timed = crate::telemetry::traces::Timed::start();
        let mut throttled = 0u32;
        let outcome = loop {
            let mut outcome = self.send(&wants, long_poll, small).await;
            if matches!(outcome, Err(MuxError::Kafka(FETCH_SESSION_ID_NOT_FOUND | INVALID_FETCH_SESSION_EPOCH, _))) {
                // The broker lost or rejected the session: start a new one with a full request.
                outcome = self.send(&wants, long_poll, small).await;
            }
            match outcome {
                // A quota throttled us (KIP-219): the broker read nothing and keeps this
                // connection muted for the throttle time. Ask again after it, for the loops
                // still waiting.
                Ok(Sent::Throttled(wait)) if throttled >= THROTTLED_ROUNDS => {
                    // A quota that never lets one answer through (an answer larger than
                    // quota × window is throttled every time): the loops see it as an error,
                    // and fail visibly if it lasts.
                    break Err(MuxError::NotSent(format!(
                        "throttled by a quota on the source ({throttled} answers in a row, {} ms each); a quota below the size of one record batch never passes",
                        wait.as_millis()
                    )));
                }
                Ok(Sent::Throttled(wait)) if jobs.iter().any(|j| !j.reply.is_closed()) => {
                    throttled += 1;
                    self.stats.throttled.fetch_add(1, Ordering::Relaxed);
                    crate::mirror::metrics::record_fetch_throttled(&self.mirror, wait.as_millis() as u64);
                    tokio::time::sleep(wait).await;
                }
                other => break other,
            }
        };
        if let Some(t) = timed {
            fetch_span(t, &self.mirror, self.node_id, &wants, long_poll, throttled, &outcome);
        }
        let mut idle = HashSet::with_capacity(jobs.len());
        let mut busy = HashSet::new();
        match outcome {
            Err(e) => {
                for j in jobs {
                    let _ = j.reply.send(Err(e.clone()));
                }
            }
            Ok(Sent::Throttled(_)) => {}
            Ok(Sent::Answered(mut answers)) => {
                for (j, (key, _)) in jobs.into_iter().zip(&wants) {
                    let answer = match answers.remove(key) {
                        Some(chunk) => Ok(chunk),
                        None => match self.session.unchanged(key) {
                            Some(chunk) => Ok(chunk),
                            None => Err(MuxError::NotSent(format!(
                                "broker {} did not answer for {}-{}",
                                self.node_id, j.topic, j.partition
                            ))),
                        },
                    };
                    if let Ok(c) = &answer {
                        if c.error_code == 0 && c.records.is_empty() {
                            idle.insert(key.clone());
                        } else if c.error_code == 0 {
                            busy.insert(key.clone());
                        }
                    }
                    self.stats.partitions_answered.fetch_add(1, Ordering::Relaxed);
                    let _ = j.reply.send(answer);
                }
            }
        }
        (idle, busy)
    }

    /// Closes the broker's session when the fetcher ends (the mirror was deleted or its
    /// configs changed): `SessionEpoch` -1 (FINAL_EPOCH) removes it from the broker's cache.
    async fn close(&mut self) {
        let id = self.session.id();
        if id == 0 {
            return;
        }
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_isolation_level(1)
            .with_session_id(id)
            .with_session_epoch(-1)
            .with_rack_id(StrBytes::default());
        let _ = self.request(&req).await;
        self.session.reset(false);
    }

    /// Sends the request for `wants` in the session; returns the partitions the broker
    /// answered. Any error resets the session.
    async fn send(
        &mut self,
        wants: &[(PartitionKey, FetchParams)],
        long_poll: bool,
        small: bool,
    ) -> Result<Sent, MuxError> {
        let waited = self.rate.wait().await;
        if !waited.is_zero() {
            crate::mirror::metrics::mirror_rate_throttled(&self.mirror, waited);
        }
        let mut room = self.reserve(small).await;
        let plan = self.session.plan(wants);
        let s = &self.settings;
        let mut topics: Vec<FetchTopic> = Vec::new();
        for ((topic, partition), p) in &plan.send {
            let part = FetchPartition::default()
                .with_partition(*partition)
                .with_current_leader_epoch(p.current_leader_epoch)
                .with_fetch_offset(p.offset)
                .with_last_fetched_epoch(p.last_fetched_epoch)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(p.max_bytes);
            match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
                Some(t) => t.partitions.push(part),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                        .with_partitions(vec![part]),
                ),
            }
        }
        let mut forgotten: Vec<ForgottenTopic> = Vec::new();
        for (topic, partition) in &plan.forget {
            match forgotten.iter_mut().find(|t| t.topic.0.as_str() == topic) {
                Some(t) => t.partitions.push(*partition),
                None => forgotten.push(
                    ForgottenTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                        .with_partitions(vec![*partition]),
                ),
            }
        }
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            // A busy partition left out of this request comes back with work soon: the broker
            // must not hold the request for the caught-up ones listed.
            .with_max_wait_ms(if long_poll { s.max_wait.as_millis().min(i32::MAX as u128) as i32 } else { 0 })
            .with_min_bytes(s.min_bytes)
            // No more than the room reserved (Kafka still returns a first batch that is larger).
            // (And no more than one second of `mirror.replication.throttled.rate`.)
            .with_max_bytes(
                room.num_permits().min(self.rate.max_request_bytes().unwrap_or(usize::MAX)).min(i32::MAX as usize)
                    as i32,
            )
            .with_isolation_level(1)
            .with_session_id(plan.session_id)
            .with_session_epoch(plan.session_epoch)
            .with_rack_id(StrBytes::default())
            .with_topics(topics)
            .with_forgotten_topics_data(forgotten);
        let counter = if plan.full { &self.stats.full } else { &self.stats.incremental };
        counter.fetch_add(1, Ordering::Relaxed);
        self.stats.partitions_listed.fetch_add(plan.send.len() as u64, Ordering::Relaxed);
        crate::mirror::metrics::record_fetch(&self.mirror, plan.full, plan.send.len());
        self.metrics.requests.increment(1);
        let sent_at = std::time::Instant::now();
        let resp = match self.request(&req).await {
            Ok(resp) => resp,
            Err(e) => {
                self.metrics.errors.increment(1);
                self.reset(&e.to_string(), true);
                return Err(MuxError::NotSent(e.to_string()));
            }
        };
        self.metrics.duration.record(sent_at.elapsed().as_secs_f64());
        if resp.error_code != 0 {
            self.metrics.errors.increment(1);
            let known = resp.error_code != FETCH_SESSION_ID_NOT_FOUND;
            self.reset(&KafkaErrorCode(resp.error_code).to_string(), known);
            return Err(MuxError::Kafka(resp.error_code, None));
        }
        if resp.throttle_time_ms > 0 && resp.responses.is_empty() {
            // Kafka answers a throttled Fetch empty and without a session id; like Kafka's
            // own consumer, start a new session (closing this one) with the next request.
            self.reset("throttled", true);
            return Ok(Sent::Throttled(Duration::from_millis(resp.throttle_time_ms.max(0) as u64)));
        }
        if !plan.full && resp.session_id == 0 {
            // The broker closed the session: its answer stands, the next request is full.
            self.session.reset(false);
        }
        // The records stay in memory until the copy loops drop them: keep the room they take
        // (all of a response's records share its buffer) and give back the rest now.
        let fetched: usize = resp
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
            .sum();
        self.metrics.bytes.increment(fetched as u64);
        self.rate.fetched(fetched);
        let unused = room.num_permits().saturating_sub(fetched);
        drop(room.split(unused));
        let hold = (room.num_permits() > 0).then(|| Arc::new(room));
        let wanted: HashSet<&PartitionKey> = wants.iter().map(|(k, _)| k).collect();
        let answers: HashMap<PartitionKey, SourceChunk> = resp
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| ((t.topic.0.to_string(), p.partition_index), p)))
            .filter(|(k, _)| wanted.contains(k))
            .map(|(k, p)| {
                let mut chunk = super::source::chunk_of(p);
                if !chunk.records.is_empty() {
                    chunk.hold = hold.clone();
                }
                (k, chunk)
            })
            .collect();
        if plan.full || self.session.id() != 0 {
            self.session.answered(&plan, resp.session_id, &answers);
        }
        Ok(Sent::Answered(answers))
    }

    /// Reserves room in the mirror's in-flight budget for one response: as much as
    /// `fetch.response.max.bytes` when it is free (only [`MIN_RESERVATION`] when `small`:
    /// every listed partition was caught up at its last answer), less when it is not (halving
    /// down to [`MIN_RESERVATION`]), and waits for that much when even this is taken.
    async fn reserve(&self, small: bool) -> OwnedSemaphorePermit {
        let total = self.settings.inflight_max_bytes.max(1) as u32;
        let floor = MIN_RESERVATION.min(total);
        // A long poll of caught-up partitions usually comes back empty: it asks for little;
        // a round with any partition that had records asks for the full size.
        let full = if small { MIN_RESERVATION } else { self.settings.response_max_bytes.max(1) as u32 };
        let mut want = full.min(total);
        loop {
            match self.budget.clone().try_acquire_many_owned(want) {
                Ok(permit) => return permit,
                Err(_) if want > floor => want = (want / 2).max(floor),
                Err(_) => {
                    tracing::debug!(mirror = %self.mirror, broker = self.node_id, bytes = want, "in-flight budget full: the fetcher waits for the destination");
                    return self
                        .budget
                        .clone()
                        .acquire_many_owned(want)
                        .await
                        .expect("the in-flight budget semaphore is never closed");
                }
            }
        }
    }

    /// Sends `req` (Fetch v12) on the fetcher's own connection, opening it first when needed;
    /// a failed request drops the connection.
    async fn request(&mut self, req: &FetchRequest) -> Result<kafka_protocol::messages::FetchResponse, ClusterError> {
        if self.conn.is_none() {
            self.conn = Some(self.client.open_dedicated(self.node_id).await?);
        }
        let conn = self.conn.as_mut().expect("opened above");
        let resp = conn.send(req, super::source::FETCH_VERSION).await;
        if resp.is_err() {
            self.conn = None;
        }
        resp
    }

    /// Drops the session after an error; `close` asks the broker to remove it with the next
    /// (full) request, unless the broker no longer has it.
    fn reset(&mut self, why: &str, close: bool) {
        if self.session.id() != 0 {
            tracing::debug!(mirror = %self.mirror, broker = self.node_id, session_id = self.session.id(), reason = why, "fetch session dropped; the next Fetch is full");
            self.stats.session_resets.fetch_add(1, Ordering::Relaxed);
        }
        self.session.reset(close);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> PartitionKey {
        ("t".to_string(), p)
    }
    fn keys(ps: &[i32]) -> HashSet<PartitionKey> {
        ps.iter().map(|p| key(*p)).collect()
    }

    #[test]
    fn a_round_of_caught_up_partitions_waits_for_a_busy_one_and_never_long_polls_without_it() {
        let mut shape = RoundShape::default();
        // First round: 0 caught up, 1 and 2 got records.
        shape.answered(&keys(&[0, 1, 2]), keys(&[0]), keys(&[1, 2]));
        // The caught-up partition re-asks alone: it waits, and may not make the broker wait.
        assert!(shape.should_wait_for_busy(&keys(&[0])));
        assert!(!shape.may_long_poll(&keys(&[0])));
        assert!(shape.all_caught_up(&keys(&[0])));
        // A busy partition joins: the round goes, still without a long poll (2 is out), and
        // with the full reservation.
        assert!(!shape.should_wait_for_busy(&keys(&[0, 1])));
        assert!(!shape.may_long_poll(&keys(&[0, 1])));
        assert!(!shape.all_caught_up(&keys(&[0, 1])));
        // Everyone listed: the broker may wait.
        assert!(shape.may_long_poll(&keys(&[0, 1, 2])));
    }

    #[test]
    fn when_everyone_is_caught_up_the_round_long_polls_with_a_small_reservation() {
        let mut shape = RoundShape::default();
        shape.answered(&keys(&[0, 1]), keys(&[0]), keys(&[1]));
        shape.answered(&keys(&[0, 1]), keys(&[0, 1]), keys(&[]));
        assert!(!shape.should_wait_for_busy(&keys(&[0])));
        assert!(shape.may_long_poll(&keys(&[0])));
        assert!(shape.all_caught_up(&keys(&[0, 1])));
    }

    #[test]
    fn a_new_or_failed_partition_is_neither_idle_nor_busy() {
        let mut shape = RoundShape::default();
        shape.answered(&keys(&[0, 1]), keys(&[0]), keys(&[1]));
        // 1 answered with an error: its loop re-aligns, nobody waits for it.
        shape.answered(&keys(&[1]), keys(&[]), keys(&[]));
        assert!(!shape.should_wait_for_busy(&keys(&[0])));
        assert!(shape.may_long_poll(&keys(&[0])));
        // A partition never answered gets the full reservation.
        assert!(!shape.all_caught_up(&keys(&[0, 7])));
    }

    #[test]
    fn a_caught_up_partition_that_left_is_not_waited_for_after_a_few_rounds() {
        let mut shape = RoundShape::default();
        shape.answered(&keys(&[0, 1]), keys(&[0, 1]), keys(&[]));
        for _ in 0..IDLE_EXPIRY_ROUNDS {
            shape.answered(&keys(&[0]), keys(&[0]), keys(&[]));
        }
        assert!(shape.is_idle(&key(0)));
        assert!(!shape.is_idle(&key(1)), "partition 1 left this broker");
    }

    #[test]
    fn busy_partitions_that_stay_away_are_forgotten() {
        let mut shape = RoundShape::default();
        shape.answered(&keys(&[0, 1]), keys(&[0]), keys(&[1]));
        shape.expire_busy(tokio::time::Instant::now() + Duration::from_secs(1));
        assert!(!shape.should_wait_for_busy(&keys(&[0])));
        assert!(shape.may_long_poll(&keys(&[0])));
    }
}
