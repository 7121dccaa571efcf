//! The destination's brokers as mirrorgate knows them: node id → upstream `host:port`, learned
//! at startup and from every Metadata response that passes through, plus the api version
//! ranges the destination advertised. A broker seen for the first time is announced on a
//! channel so that a listener port is opened for it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::RwLock;

use dashmap::DashMap;
use tokio::sync::mpsc;

/// Known destination brokers and their advertised API ranges.
#[derive(Debug)]
pub struct BrokerDirectory {
    bootstrap: Vec<String>,
    brokers: DashMap<i32, String>,
    api_ranges: RwLock<HashMap<i16, (i16, i16)>>,
    new_brokers: mpsc::UnboundedSender<i32>,
    rotation: AtomicUsize,
}

impl BrokerDirectory {
    /// A directory seeded with the configured destination bootstrap list; new node ids are
    /// sent to `new_brokers`.
    pub fn new(bootstrap: Vec<String>, new_brokers: mpsc::UnboundedSender<i32>) -> Self {
        Self {
            bootstrap,
            brokers: DashMap::new(),
            api_ranges: RwLock::new(HashMap::new()),
            new_brokers,
            rotation: AtomicUsize::new(0),
        }
    }

    /// Records destination broker `node_id` at `host:port` (from a Metadata response).
    pub fn observe(&self, node_id: i32, host: &str, port: i32) {
        let addr = format!("{host}:{port}");
        match self.brokers.insert(node_id, addr.clone()) {
            None => {
                tracing::info!(node_id, upstream = %addr, "destination broker discovered");
                let _ = self.new_brokers.send(node_id);
            }
            Some(old) if old != addr => {
                tracing::info!(node_id, upstream = %addr, previous = %old, "destination broker moved");
            }
            Some(_) => {}
        }
    }

    /// Upstream `host:port` of destination broker `node_id`, if known.
    pub fn addr(&self, node_id: i32) -> Option<String> {
        self.brokers.get(&node_id).map(|a| a.clone())
    }

    /// Node ids known so far, sorted.
    pub fn node_ids(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self.brokers.iter().map(|e| *e.key()).collect();
        ids.sort_unstable();
        ids
    }

    /// Addresses to try, in order, for a bootstrap-port connection: known brokers in rotation
    /// (spreading clients), then the configured bootstrap list.
    pub fn bootstrap_candidates(&self) -> Vec<String> {
        let mut known: Vec<String> = self.node_ids().into_iter().filter_map(|id| self.addr(id)).collect();
        if !known.is_empty() {
            let start = self.rotation.fetch_add(1, Ordering::Relaxed) % known.len();
            known.rotate_left(start);
        }
        known.extend(self.bootstrap.iter().cloned());
        known
    }

    /// Stores the destination's advertised `api_key → (min, max)` ranges.
    pub fn set_api_ranges(&self, ranges: HashMap<i16, (i16, i16)>) {
        *self.api_ranges.write().unwrap_or_else(|e| e.into_inner()) = ranges;
    }

    /// Whether the destination advertised `api_key` at all.
    pub fn supports_api(&self, api_key: i16) -> bool {
        self.api_ranges.read().unwrap_or_else(|e| e.into_inner()).contains_key(&api_key)
    }

    /// Every `api_key → (min, max)` the destination advertised, ascending by api key.
    pub fn api_ranges(&self) -> Vec<(i16, (i16, i16))> {
        let mut all: Vec<(i16, (i16, i16))> =
            self.api_ranges.read().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, r)| (*k, *r)).collect();
        all.sort_unstable();
        all
    }

    /// The destination's range for `api_key`.
    pub fn api_range(&self, api_key: i16) -> Option<(i16, i16)> {
        self.api_ranges.read().unwrap_or_else(|e| e.into_inner()).get(&api_key).copied()
    }
}
