//! KIP-227 incremental fetch sessions and the state topic guard ([`super::state_guard`]).
//!
//! A broker that denies a partition keeps it in the client's fetch session and answers
//! TOPIC_AUTHORIZATION_FAILED (29) for it in every response of that session (Kafka 4.1
//! `KafkaApis.handleFetchRequest`: the session's partitions are authorized on every request),
//! so a Java consumer raises `TopicAuthorizationException` on every poll. mirrorgate takes the
//! state topic's partitions out of the request before the broker sees them, so the broker's
//! session never holds them; this module remembers them instead, per client connection
//! (peer address) and session id, and the guard adds the 29 entries to every response of
//! that session until the client forgets them (`forgotten_topics_data`), closes the session
//! (epoch -1) or starts a new one (epoch 0).
//!
//! At most [`MAX_SESSIONS`] sessions are remembered (a client naming the state topic in more
//! sessions gets the 29 once per request that names it, as without sessions). Entries of a
//! connection that closes without closing its sessions stay until the bound evicts them
//! (oldest first).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::state_guard::Taken;

/// Most fetch sessions remembered at once, over all connections.
pub const MAX_SESSIONS: usize = 10_000;

type Key = (SocketAddr, i32);

/// The state topic partitions each remembered fetch session asked for.
#[derive(Debug, Default)]
pub struct FetchSessions {
    inner: Mutex<Inner>,
    /// Number of remembered sessions, read without the lock on every Fetch.
    len: AtomicUsize,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<Key, Vec<Taken>>,
    /// Sessions remembered per connection, so `has` needs no scan.
    peers: HashMap<SocketAddr, usize>,
    /// Remembered sessions, oldest first, for eviction.
    order: VecDeque<Key>,
}

impl Inner {
    fn insert(&mut self, key: Key, taken: Vec<Taken>) {
        if self.sessions.insert(key, taken).is_none() {
            self.order.push_back(key);
            *self.peers.entry(key.0).or_default() += 1;
        }
    }

    /// Removes `key`; `in_order` is false when the caller already took it off `order`.
    fn remove(&mut self, key: &Key, in_order: bool) {
        if self.sessions.remove(key).is_none() {
            return;
        }
        if in_order {
            self.order.retain(|k| k != key);
        }
        if let Some(n) = self.peers.get_mut(&key.0) {
            *n -= 1;
            if *n == 0 {
                self.peers.remove(&key.0);
            }
        }
    }
}

impl FetchSessions {
    /// Whether any session of the connection from `peer` is remembered.
    pub fn has(&self, peer: SocketAddr) -> bool {
        self.len.load(Ordering::Relaxed) != 0 && self.lock().peers.contains_key(&peer)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A Fetch request with `session_id` and `epoch` (v7+; `0`, `-1` before) that named
    /// the state topic's partitions `taken` and forgot `forgotten`: updates an incremental
    /// session (epoch > 0) and drops a closed or replaced one (epoch -1 or 0). Returns the
    /// partitions to answer with 29.
    pub fn on_request(
        &self,
        peer: SocketAddr,
        session_id: i32,
        epoch: i32,
        taken: &[Taken],
        forgotten: &[Taken],
    ) -> Vec<Taken> {
        if epoch <= 0 {
            if session_id != 0 {
                self.forget(peer, session_id);
            }
            return taken.to_vec();
        }
        let mut inner = self.lock();
        let mut now = inner.sessions.get(&(peer, session_id)).cloned().unwrap_or_default();
        for f in forgotten {
            if let Some(t) = now.iter_mut().find(|t| t.same_topic(f)) {
                t.partitions.retain(|p| !f.partitions.contains(p));
            }
        }
        for n in taken {
            match now.iter_mut().find(|t| t.same_topic(n)) {
                Some(t) => {
                    for p in &n.partitions {
                        if !t.partitions.contains(p) {
                            t.partitions.push(*p);
                        }
                    }
                }
                None => now.push(n.clone()),
            }
        }
        now.retain(|t| !t.partitions.is_empty());
        let key = (peer, session_id);
        if now.is_empty() {
            inner.remove(&key, true);
            self.len.store(inner.sessions.len(), Ordering::Relaxed);
        } else if let Some(slot) = inner.sessions.get_mut(&key) {
            slot.clone_from(&now);
        } else {
            drop(inner);
            self.remember(peer, session_id, &now);
        }
        now
    }

    /// The broker opened session `session_id` for a full Fetch that named `taken`.
    pub fn remember(&self, peer: SocketAddr, session_id: i32, taken: &[Taken]) {
        if session_id == 0 || taken.is_empty() {
            return;
        }
        let mut inner = self.lock();
        let key = (peer, session_id);
        inner.insert(key, taken.to_vec());
        while inner.sessions.len() > MAX_SESSIONS {
            let Some(old) = inner.order.pop_front() else { break };
            inner.remove(&old, false);
        }
        self.len.store(inner.sessions.len(), Ordering::Relaxed);
    }

    /// Drops session `session_id` of `peer` (closed by the client or unknown to the broker).
    pub fn forget(&self, peer: SocketAddr, session_id: i32) {
        if self.len.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut inner = self.lock();
        inner.remove(&(peer, session_id), true);
        self.len.store(inner.sessions.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::TopicName;
    use uuid::Uuid;

    use super::*;

    #[test]
    fn sessions_are_bounded_oldest_first() {
        let s = FetchSessions::default();
        let t = [Taken { name: TopicName::default(), id: Uuid::from_bytes([7; 16]), partitions: vec![0] }];
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        s.remember(a, 1, &t);
        for sid in 2..=MAX_SESSIONS as i32 + 1 {
            s.remember(b, sid, &t);
        }
        assert!(!s.has(a), "the oldest session was evicted");
        assert!(s.has(b));
        assert_eq!(s.on_request(b, 2, 1, &[], &[]).len(), 1);
        s.forget(b, 2);
        assert!(s.on_request(b, 2, 1, &[], &[]).is_empty());
    }
}
