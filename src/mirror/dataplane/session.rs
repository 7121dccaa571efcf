//! Incremental fetch sessions (KIP-227) for one source broker's Fetch requests.
//!
//! The first request (session id 0, epoch 0) is *full*: it lists every partition wanted and
//! asks the broker to create a session. Later requests are *incremental*: they carry only the
//! partitions whose fetch parameters changed, plus `forgotten_topics_data` for partitions the
//! mirror no longer waits on, and the broker answers only partitions with records, a changed
//! high watermark or log start offset, an error or a diverging epoch (broker behaviour:
//! `FetchSession.CachedPartition.maybeUpdateResponseData`, pinned in
//! `tests/broker_behaviour.rs`). A partition left out of an incremental answer has nothing
//! new: [`FetchSession::unchanged`] gives its answer from the marks last seen.
//!
//! This type holds no I/O: the fetcher in [`super::mux`] asks it for a [`Plan`], sends it, and
//! reports the outcome back. Any failure resets it, and the next request is full again.

use std::collections::HashMap;

use super::source::SourceChunk;

/// FETCH_SESSION_ID_NOT_FOUND: the broker evicted or never had the session.
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// INVALID_FETCH_SESSION_EPOCH: the epoch does not follow the broker's.
pub const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

/// A mirror partition, by topic name (Fetch v12 names topics).
pub type PartitionKey = (String, i32);

/// The fetch parameters of one partition, as the broker's session caches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchParams {
    /// Fetch offset.
    pub offset: i64,
    /// `LastFetchedEpoch` (KIP-320), -1 when unknown.
    pub last_fetched_epoch: i32,
    /// `CurrentLeaderEpoch`.
    pub current_leader_epoch: i32,
    /// `PartitionMaxBytes`, bytes.
    pub max_bytes: i32,
}

/// What a response said about a partition that the broker leaves out when it has not changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Marks {
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
}

/// One Fetch request to send: the session fields and the partitions to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// `SessionId` (0 = none yet).
    pub session_id: i32,
    /// `SessionEpoch`: 0 creates a session, 1.. continue it.
    pub session_epoch: i32,
    /// True for a full request: every wanted partition is listed and all are answered.
    pub full: bool,
    /// Partitions to list in `topics`.
    pub send: Vec<(PartitionKey, FetchParams)>,
    /// Partitions to list in `forgotten_topics_data`.
    pub forget: Vec<PartitionKey>,
}

/// The client side of one fetch session with one broker.
#[derive(Debug, Default)]
pub struct FetchSession {
    id: i32,
    /// A session to close with the next full request (its id with epoch 0), after an error.
    closing: i32,
    /// The next epoch to send (0 while there is no session).
    epoch: i32,
    /// The partitions (and their parameters) the broker's session holds.
    held: HashMap<PartitionKey, FetchParams>,
    /// The marks of the last answer for each held partition.
    marks: HashMap<PartitionKey, Marks>,
}

impl FetchSession {
    /// A session that does not exist yet: the first plan is full.
    pub fn new() -> Self {
        Self::default()
    }

    /// The broker's session id, 0 when there is none.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// The request for `wants`: full when there is no session, else only the differences.
    pub fn plan(&self, wants: &[(PartitionKey, FetchParams)]) -> Plan {
        if self.id == 0 {
            // (Session id of the one to close, epoch 0: the broker removes it and creates a
            // new one, as Kafka's FetchSessionHandler does after an error.)
            return Plan {
                session_id: self.closing,
                session_epoch: 0,
                full: true,
                send: wants.to_vec(),
                forget: Vec::new(),
            };
        }
        let send = wants.iter().filter(|(k, p)| self.held.get(k) != Some(p)).cloned().collect();
        let wanted: std::collections::HashSet<&PartitionKey> = wants.iter().map(|(k, _)| k).collect();
        let mut forget: Vec<PartitionKey> = self.held.keys().filter(|k| !wanted.contains(k)).cloned().collect();
        forget.sort();
        Plan { session_id: self.id, session_epoch: self.epoch, full: false, send, forget }
    }

    /// Records a successful answer to `plan` (top-level error 0). `session_id` is the
    /// response's; `answered` are the partitions it carried.
    pub fn answered(&mut self, plan: &Plan, session_id: i32, answered: &HashMap<PartitionKey, SourceChunk>) {
        if plan.full {
            self.held.clear();
            self.marks.clear();
            self.closing = 0;
            // Session id 0 in the answer: the broker did not create one (its cache is full);
            // the next request is full again and asks once more.
            self.id = session_id;
            self.epoch = if session_id == 0 { 0 } else { 1 };
        } else {
            self.epoch = if self.epoch == i32::MAX { 1 } else { self.epoch + 1 };
            for k in &plan.forget {
                self.held.remove(k);
                self.marks.remove(k);
            }
        }
        if self.id != 0 {
            for (k, p) in &plan.send {
                self.held.insert(k.clone(), *p);
            }
        }
        for (k, c) in answered {
            let m = Marks {
                high_watermark: c.high_watermark,
                last_stable_offset: c.last_stable_offset,
                log_start_offset: c.log_start_offset,
            };
            match self.marks.get_mut(k) {
                Some(old) => *old = m,
                None => {
                    self.marks.insert(k.clone(), m);
                }
            }
        }
    }

    /// The answer for a partition an incremental response left out: no records, no error,
    /// the marks last seen. `None` when the partition was never answered in this session.
    pub fn unchanged(&self, key: &PartitionKey) -> Option<SourceChunk> {
        let m = self.marks.get(key)?;
        Some(SourceChunk {
            error_code: 0,
            records: bytes::Bytes::new(),
            high_watermark: m.high_watermark,
            last_stable_offset: m.last_stable_offset,
            log_start_offset: m.log_start_offset,
            aborted: Vec::new(),
            diverging: None,
            hold: None,
        })
    }

    /// Forgets the session: the next plan is full and asks for a new one. With `close`, that
    /// request also asks the broker to remove this session (else it lingers in the broker's
    /// cache until evicted).
    pub fn reset(&mut self, close: bool) {
        let closing = if close && self.id != 0 { self.id } else { 0 };
        *self = Self { closing, ..Self::default() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(t: &str, p: i32) -> PartitionKey {
        (t.to_string(), p)
    }
    fn params(offset: i64) -> FetchParams {
        FetchParams { offset, last_fetched_epoch: 0, current_leader_epoch: 0, max_bytes: 1 << 20 }
    }
    fn answers(list: &[(PartitionKey, i64)]) -> HashMap<PartitionKey, SourceChunk> {
        list.iter().map(|(k, hw)| (k.clone(), chunk(*hw))).collect()
    }
    fn chunk(hw: i64) -> SourceChunk {
        SourceChunk {
            error_code: 0,
            records: bytes::Bytes::new(),
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: 0,
            aborted: Vec::new(),
            diverging: None,
            hold: None,
        }
    }

    #[test]
    fn first_request_is_full_and_creates_a_session() {
        let s = FetchSession::new();
        let wants = vec![(key("a", 0), params(5)), (key("a", 1), params(7))];
        let plan = s.plan(&wants);
        assert_eq!((plan.session_id, plan.session_epoch, plan.full), (0, 0, true));
        assert_eq!(plan.send, wants);
        assert!(plan.forget.is_empty());
    }

    #[test]
    fn incremental_requests_list_only_changes_and_forget_what_is_not_wanted() {
        let mut s = FetchSession::new();
        let wants = vec![(key("a", 0), params(5)), (key("a", 1), params(7)), (key("b", 0), params(0))];
        let plan = s.plan(&wants);
        s.answered(&plan, 42, &answers(&[(key("a", 0), 10), (key("a", 1), 7), (key("b", 0), 0)]));
        assert_eq!((s.id(), s.epoch), (42, 1));

        // a-0 moved on, a-1 unchanged, b-0 not wanted this round.
        let plan = s.plan(&[(key("a", 0), params(10)), (key("a", 1), params(7))]);
        assert_eq!((plan.session_id, plan.session_epoch, plan.full), (42, 1, false));
        assert_eq!(plan.send, vec![(key("a", 0), params(10))]);
        assert_eq!(plan.forget, vec![key("b", 0)]);
        s.answered(&plan, 42, &HashMap::new());
        assert_eq!(s.epoch, 2);
        // a-1 was left out: its answer is the last marks, without records.
        let u = s.unchanged(&key("a", 1)).unwrap();
        assert_eq!((u.high_watermark, u.records.len(), u.error_code), (7, 0, 0));
        // b-0 was forgotten: wanting it again lists it again, and its marks are gone.
        assert!(s.unchanged(&key("b", 0)).is_none());
        let plan = s.plan(&[(key("a", 0), params(10)), (key("a", 1), params(7)), (key("b", 0), params(0))]);
        assert_eq!(plan.send, vec![(key("b", 0), params(0))]);
        assert!(plan.forget.is_empty());
    }

    #[test]
    fn a_changed_leader_epoch_or_max_bytes_is_sent_again() {
        let mut s = FetchSession::new();
        let plan = s.plan(&[(key("a", 0), params(5))]);
        s.answered(&plan, 9, &answers(&[(key("a", 0), 5)]));
        let moved = FetchParams { current_leader_epoch: 3, ..params(5) };
        assert_eq!(s.plan(&[(key("a", 0), moved)]).send, vec![(key("a", 0), moved)]);
        let bigger = FetchParams { max_bytes: 8 << 20, ..params(5) };
        assert_eq!(s.plan(&[(key("a", 0), bigger)]).send, vec![(key("a", 0), bigger)]);
    }

    #[test]
    fn no_session_from_the_broker_keeps_requests_full() {
        let mut s = FetchSession::new();
        let wants = vec![(key("a", 0), params(5))];
        let plan = s.plan(&wants);
        s.answered(&plan, 0, &answers(&[(key("a", 0), 5)]));
        let again = s.plan(&wants);
        assert!(again.full);
        assert_eq!((again.session_id, again.session_epoch), (0, 0));
    }

    #[test]
    fn reset_starts_over_with_a_full_request() {
        let mut s = FetchSession::new();
        let plan = s.plan(&[(key("a", 0), params(5))]);
        s.answered(&plan, 9, &answers(&[(key("a", 0), 5)]));
        s.reset(false);
        let plan = s.plan(&[(key("a", 0), params(5))]);
        assert!(plan.full && plan.session_id == 0 && plan.send.len() == 1);
        assert!(s.unchanged(&key("a", 0)).is_none());
    }

    #[test]
    fn a_reset_with_close_names_the_old_session_once_in_the_next_full_request() {
        let mut s = FetchSession::new();
        let plan = s.plan(&[(key("a", 0), params(5))]);
        s.answered(&plan, 9, &HashMap::new());
        s.reset(true);
        let plan = s.plan(&[(key("a", 0), params(5))]);
        assert_eq!((plan.full, plan.session_id, plan.session_epoch), (true, 9, 0));
        s.answered(&plan, 12, &HashMap::new());
        assert_eq!(s.id(), 12);
        s.reset(true);
        let plan = s.plan(&[(key("a", 0), params(5))]);
        assert_eq!(plan.session_id, 12);
        // The broker had no session to give: the next full request names none.
        s.answered(&plan, 0, &HashMap::new());
        assert_eq!(s.plan(&[(key("a", 0), params(5))]).session_id, 0);
    }

    #[test]
    fn the_epoch_wraps_to_one() {
        let mut s = FetchSession::new();
        let plan = s.plan(&[(key("a", 0), params(5))]);
        s.answered(&plan, 9, &HashMap::new());
        s.epoch = i32::MAX;
        let plan = s.plan(&[(key("a", 0), params(5))]);
        s.answered(&plan, 9, &HashMap::new());
        assert_eq!(s.epoch, 1);
    }
}
