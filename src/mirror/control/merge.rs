//! Concurrent admin changes through several instances: no update is lost.
//!
//! Two instances can answer admin requests about the same mirror or mirror topic at once
//! (say `mirror.failed.retry.max.attempts` set through A while `fetch.max.bytes` is set
//! through B). Each reads the record, changes its copy and writes the whole record to
//! `__mirror_state`; the log keeps the later one, which was computed without the other.
//! The instance that wrote the later record finds out when it follows the earlier one back
//! (a record of another instance below a key offset of its own), and writes a three-way
//! merge: what it wrote, plus every field the other instance changed and it did not
//! (fields compared by their JSON form, nested maps such as a mirror's configs per entry).
//! A field both changed keeps the later write's value, as a single instance would have.
//!
//! Partition state records are not merged here: their owner and admin writes have their own
//! rules (`follow_ops`, `keep_data_fields`).

use serde_json::{Map, Value};

use super::super::store::{StateKey, StateValue};
use super::{ControlPlane, StateWrite};

/// Bases of this instance's writes not yet followed back, per key: `(offset, the key's value before the write)`, oldest first.
pub(super) type OwnBases = std::collections::HashMap<StateKey, Vec<(i64, Option<Value>, std::time::Instant)>>;

/// How long the base of a write is kept at most: a concurrent write through another
/// instance is followed back within a second or two.
const BASE_KEPT: std::time::Duration = std::time::Duration::from_secs(60);
/// Bases kept per key at most (the oldest go first).
const BASES_PER_KEY: usize = 32;

impl ControlPlane {
    /// The JSON form of the value held in memory for a mirror or mirror-topic `key` (`None`:
    /// absent, or a partition key, which is not merged).
    pub(super) fn mergeable_value(&self, key: &StateKey) -> Option<Value> {
        self.with_state(|s| match key {
            StateKey::Mirror { name } => s.mirrors.get(name).and_then(|d| serde_json::to_value(d).ok()),
            StateKey::Topic { mirror, topic } => {
                s.topics.get(topic).filter(|t| &t.mirror == mirror).and_then(|t| serde_json::to_value(t).ok())
            }
            StateKey::Partition { .. } => None,
        })
    }

    /// Remembers the base of a write of this instance at `offset` (in a group only).
    pub(super) fn remember_base(&self, key: &StateKey, offset: i64, base: Option<Value>) {
        if matches!(key, StateKey::Partition { .. }) {
            return;
        }
        let mut bases = self.own_bases.lock().unwrap_or_else(|e| e.into_inner());
        let v = bases.entry(key.clone()).or_default();
        v.retain(|(_, _, at)| at.elapsed() < BASE_KEPT);
        if v.len() >= BASES_PER_KEY {
            v.remove(0);
        }
        v.push((offset, base, std::time::Instant::now()));
    }

    /// This instance's record of `key` at `offset` was followed back: bases of it and of
    /// older writes are not needed any more (a record below them can no longer arrive).
    pub(super) fn forget_bases(&self, key: &StateKey, offset: i64) {
        let mut bases = self.own_bases.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = bases.get_mut(key) {
            v.retain(|(o, _, _)| *o > offset);
            if v.is_empty() {
                bases.remove(key);
            }
        }
    }

    /// Another instance's record of `key` at `offset` (`theirs`) arrived after a later write
    /// of this instance computed without it. Writes the three-way merge when it differs from what
    /// this instance wrote: `Some(true)` when it did, `Some(false)` when nothing of theirs was
    /// missing, `None` when it cannot merge (a deletion, both created the record, a partition
    /// record, a store failure). Callers hold `write_lock`.
    pub(super) async fn merge_concurrent(
        &self,
        key: &StateKey,
        offset: i64,
        theirs: Option<&StateValue>,
    ) -> Option<bool> {
        // The base: the value before this instance's first write after theirs in the log (the
        // one computed without it). (Known limit: when this instance wrote the key more than
        // once around theirs, a field it changed in a write before theirs, which theirs was
        // computed without, counts as changed by theirs and is reverted. Exact merging needs
        // each record to name the record it was computed from.) A creation of ours has no
        // base: both created the record at once, and two unrelated definitions are not merged
        // into one (a mirror's connection and credentials belong together); the later stands.
        let base = {
            let bases = self.own_bases.lock().unwrap_or_else(|e| e.into_inner());
            match bases.get(key).and_then(|v| v.iter().find(|(o, _, _)| *o > offset)) {
                Some((_, Some(base), _)) => base.clone(),
                _ => return None,
            }
        };
        let (Some(ours), Some(theirs)) = (self.mergeable_value(key), theirs.and_then(json_of)) else {
            // One side deleted the record: the later write stands (a delete is not merged).
            return None;
        };
        let merged = merge3(Some(&base), &ours, &theirs);
        if merged == ours {
            return Some(false);
        }
        let write = match key {
            StateKey::Mirror { .. } => serde_json::from_value(merged).map(StateWrite::Mirror),
            StateKey::Topic { .. } => serde_json::from_value(merged).map(StateWrite::Topic),
            StateKey::Partition { .. } => return None,
        };
        let write = match write {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(?key, error = %e, "cannot merge a concurrent state change through another instance");
                return None;
            }
        };
        match self.persist(write.clone()).await {
            Ok(()) => {
                self.update_state(|s| match write {
                    StateWrite::Mirror(d) => {
                        s.mirrors.insert(d.name.clone(), d);
                    }
                    StateWrite::Topic(t) => {
                        s.topics.insert(t.topic.clone(), t);
                    }
                    _ => {}
                });
                Some(true)
            }
            Err(e) => {
                tracing::warn!(?key, error = %e.message, "cannot write the merge of a concurrent state change through another instance");
                None
            }
        }
    }
}

/// The JSON form of a mirror or mirror-topic value.
fn json_of(v: &StateValue) -> Option<Value> {
    match v {
        StateValue::Mirror(d) => serde_json::to_value(d).ok(),
        StateValue::Topic(t) => serde_json::to_value(t).ok(),
        StateValue::Partition(_) => None,
    }
}

/// Three-way merge of JSON values: `ours` where it changed `base` or both sides did;
/// `theirs` where only it changed `base`. Objects merge per member (a member missing on a
/// side counts as a value: removed); anything else is taken whole. `base` `None`: the
/// record did not exist before (both created it: members only one side has are kept).
pub(super) fn merge3(base: Option<&Value>, ours: &Value, theirs: &Value) -> Value {
    match (ours, theirs) {
        (Value::Object(o), Value::Object(t)) => {
            let empty = Map::new();
            let b = match base {
                Some(Value::Object(b)) => b,
                _ => &empty,
            };
            let mut out = Map::new();
            let keys: std::collections::BTreeSet<&String> = o.keys().chain(t.keys()).chain(b.keys()).collect();
            for k in keys {
                if let Some(v) = merge_member(b.get(k), o.get(k), t.get(k)) {
                    out.insert(k.clone(), v);
                }
            }
            Value::Object(out)
        }
        _ if base == Some(ours) => theirs.clone(),
        _ => ours.clone(),
    }
}

/// One member of an object: `None` when the merge removes it.
fn merge_member(base: Option<&Value>, ours: Option<&Value>, theirs: Option<&Value>) -> Option<Value> {
    match (ours, theirs) {
        (Some(o), Some(t)) => Some(merge3(base, o, t)),
        // Only one side has it: kept, unless the other removed it while this side left it.
        (Some(o), None) => (base != Some(o)).then(|| o.clone()),
        // Only they have it: added by them (kept), or removed by us (gone, whatever they did).
        (None, Some(t)) => base.is_none().then(|| t.clone()),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changes_of_both_sides_are_kept() {
        let base = json!({"name": "m", "configs": {"a": "1", "b": "2"}, "created_ms": 5});
        let ours = json!({"name": "m", "configs": {"a": "10", "b": "2"}, "created_ms": 5});
        let theirs = json!({"name": "m", "configs": {"a": "1", "b": "20", "c": "3"}, "created_ms": 5});
        assert_eq!(
            merge3(Some(&base), &ours, &theirs),
            json!({"name": "m", "configs": {"a": "10", "b": "20", "c": "3"}, "created_ms": 5})
        );
    }

    #[test]
    fn a_field_both_changed_keeps_ours() {
        let base = json!({"desired": "MIRRORING", "updated_ms": 1});
        let ours = json!({"desired": "PAUSED", "updated_ms": 3});
        let theirs = json!({"desired": "STOPPED", "updated_ms": 2});
        assert_eq!(merge3(Some(&base), &ours, &theirs), ours);
    }

    #[test]
    fn removals_are_merged_too() {
        let base = json!({"configs": {"a": "1", "b": "2"}});
        // They removed `b`; we changed `a`.
        let ours = json!({"configs": {"a": "10", "b": "2"}});
        let theirs = json!({"configs": {"a": "1"}});
        assert_eq!(merge3(Some(&base), &ours, &theirs), json!({"configs": {"a": "10"}}));
        // We removed `b`; they changed `a`.
        let ours = json!({"configs": {"a": "1"}});
        let theirs = json!({"configs": {"a": "10", "b": "2"}});
        assert_eq!(merge3(Some(&base), &ours, &theirs), json!({"configs": {"a": "10"}}));
        // They removed `b`, which we changed: ours stands.
        let ours = json!({"configs": {"a": "1", "b": "20"}});
        let theirs = json!({"configs": {"a": "1"}});
        assert_eq!(merge3(Some(&base), &ours, &theirs), json!({"configs": {"a": "1", "b": "20"}}));
    }

    #[test]
    fn both_created_the_record() {
        let ours = json!({"configs": {"a": "1"}, "x": 1});
        let theirs = json!({"configs": {"b": "2"}, "x": 2});
        assert_eq!(merge3(None, &ours, &theirs), json!({"configs": {"a": "1", "b": "2"}, "x": 1}));
    }
}
