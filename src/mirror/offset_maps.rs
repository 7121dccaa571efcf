//! The offset maps of shifted mirror partitions (DESIGN §4.2), indexed for the proxy: every
//! partition whose map has a segment with a shift, by destination topic name and topic id.
//! Partitions without a shift are not in it, so the proxy's check for them is one hash
//! lookup (or, for a whole request, one `memmem` search per shifted topic).
//!
//! Rebuilt from the control state on every state change ([`super::control::ControlPlane`]),
//! after the change is persisted and before the data plane appends anything into a new
//! segment: the proxy's view is at least as new as the destination data it serves.

use std::collections::HashMap;
use std::sync::Arc;

use memchr::memmem;

use super::control::ControlState;
use super::model::{destination_offset, is_shifted, source_end_offset, source_offset, OffsetSegment};
use super::topics::uuid_from_base64;

/// The offset map of one shifted partition, ascending by source start.
pub type Segments = Arc<[OffsetSegment]>;

/// Shifted partitions of one topic: partition index → offset map.
#[derive(Debug, Default, Clone)]
pub struct TopicMaps {
    partitions: HashMap<i32, Segments>,
}

impl TopicMaps {
    /// The offset map of `partition`, `None` when it has no shift.
    pub fn partition(&self, partition: i32) -> Option<&Segments> {
        self.partitions.get(&partition)
    }

    /// Source offset of destination offset `offset` of `partition` ([`source_offset`]);
    /// unchanged for a partition without a shift and for negative offsets.
    pub fn to_source(&self, partition: i32, offset: i64) -> i64 {
        match self.partitions.get(&partition) {
            Some(s) => source_offset(s, offset),
            None => offset,
        }
    }

    /// Source offset of destination END offset `offset` of `partition` (a high watermark,
    /// log end or committed position: [`source_end_offset`]); unchanged for a partition
    /// without a shift and for negative offsets.
    pub fn to_source_end(&self, partition: i32, offset: i64) -> i64 {
        match self.partitions.get(&partition) {
            Some(s) => source_end_offset(s, offset),
            None => offset,
        }
    }

    /// Destination offset of source offset `offset` of `partition` ([`destination_offset`]);
    /// unchanged for a partition without a shift and for negative offsets (Kafka's "none"
    /// or "high watermark" sentinels).
    pub fn to_destination(&self, partition: i32, offset: i64) -> i64 {
        match self.partitions.get(&partition) {
            Some(s) if offset >= 0 => destination_offset(s, offset),
            _ => offset,
        }
    }
}

/// Every shifted mirror partition, by destination topic name and id.
#[derive(Debug, Default)]
pub struct OffsetMaps {
    topics: HashMap<String, TopicMaps>,
    ids: HashMap<[u8; 16], String>,
    /// Some shifted topic has no destination topic id in the state.
    topic_without_id: bool,
}

impl OffsetMaps {
    /// The shifted partitions of `state`: those whose offset map has a segment with a shift.
    pub fn build(state: &ControlState) -> Self {
        let mut maps = Self::default();
        for ((topic, partition), rec) in &state.partitions {
            if !is_shifted(&rec.segments) {
                continue;
            }
            maps.topics.entry(topic.clone()).or_default().partitions.insert(*partition, rec.segments.clone().into());
            if let Some(id) = rec.destination_topic_id.as_deref().and_then(uuid_from_base64) {
                maps.ids.insert(id, topic.clone());
            }
        }
        let named: std::collections::HashSet<&String> = maps.ids.values().collect();
        maps.topic_without_id = maps.topics.keys().any(|t| !named.contains(t));
        maps
    }

    /// Whether some shifted topic has no destination topic id in the state (a request naming
    /// it by id cannot be recognised from the state alone: the proxy then resolves ids it does
    /// not know through the ids Metadata taught it, and fails closed on an id it cannot name).
    pub fn has_topic_without_id(&self) -> bool {
        self.topic_without_id
    }

    /// The shifted partitions of a topic named by `name` or, when the name is empty, by `id`,
    /// which `resolve` (the proxy's Metadata-learned id → name map) names when the state does
    /// not.
    ///
    /// # Errors
    /// An id neither the state nor `resolve` knows while a shifted topic has no known id
    /// ([`Self::has_topic_without_id`]): it may be that topic (fail closed).
    pub fn topic_ref_resolved(
        &self,
        name: &str,
        id: &[u8; 16],
        resolve: &dyn Fn(&[u8; 16]) -> Option<String>,
    ) -> Result<Option<&TopicMaps>, String> {
        if !name.is_empty() || *id == [0; 16] {
            return Ok(self.topic(name));
        }
        if let Some(t) = self.topic_by_id(id) {
            return Ok(Some(t));
        }
        if !self.has_topic_without_id() {
            return Ok(None);
        }
        match resolve(id) {
            Some(n) => Ok(self.topic(&n)),
            None => Err(format!(
                "topic id {} is unknown while a shifted mirror topic's id is not known (source offsets)",
                uuid::Uuid::from_bytes(*id)
            )),
        }
    }

    /// Whether no partition is shifted (the proxy then looks at nothing).
    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// The shifted partitions of topic `name`.
    pub fn topic(&self, name: &str) -> Option<&TopicMaps> {
        if self.topics.is_empty() {
            return None;
        }
        self.topics.get(name)
    }

    /// The shifted partitions of the destination topic with id `id`.
    pub fn topic_by_id(&self, id: &[u8; 16]) -> Option<&TopicMaps> {
        self.ids.get(id).and_then(|n| self.topics.get(n))
    }

    /// The shifted partitions of a topic named by `name` or, when the name is empty (Kafka's
    /// topic-id versions), by `id`.
    pub fn topic_ref(&self, name: &str, id: &[u8; 16]) -> Option<&TopicMaps> {
        if name.is_empty() {
            self.topic_by_id(id)
        } else {
            self.topic(name)
        }
    }

    /// Whether the bytes of a request may name a shifted topic: its name or its id occurs in
    /// them. False positives only cost a decode; a request naming a shifted topic always
    /// matches.
    pub fn mentioned_in(&self, frame: &[u8]) -> bool {
        self.topics.keys().any(|n| memmem::find(frame, n.as_bytes()).is_some())
            || self.ids.keys().any(|id| memmem::find(frame, id).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::model::PartitionStateRecord;
    use crate::wire::mirror::MirrorPartitionState;

    #[test]
    fn only_shifted_partitions_are_indexed() {
        let mut state = ControlState::default();
        let mut id = [0u8; 16];
        id[15] = 7;
        for (p, segs) in [
            (0, vec![]),
            (1, vec![OffsetSegment { source_start: 0, destination_start: 0 }]),
            (2, vec![OffsetSegment { source_start: 3000, destination_start: 0 }]),
        ] {
            let mut r = PartitionStateRecord::new("m", "t", p, MirrorPartitionState::Mirroring);
            r.segments = segs;
            r.destination_topic_id = Some(crate::mirror::topics::base64_uuid(&id));
            state.partitions.insert(("t".into(), p), r);
        }
        let maps = OffsetMaps::build(&state);
        let t = maps.topic("t").expect("a shifted partition");
        assert!(t.partition(0).is_none() && t.partition(1).is_none());
        assert_eq!(t.to_source(2, 1000), 4000);
        assert_eq!(t.to_destination(2, 4000), 1000);
        assert_eq!(t.to_destination(2, -1), -1);
        assert_eq!(t.to_source(1, 1000), 1000);
        assert!(maps.topic_by_id(&id).is_some());
        assert!(maps.topic_ref("", &id).is_some());
        assert!(maps.topic("u").is_none());
        assert!(maps.mentioned_in(b"..\x01t.."));
        assert!(!maps.mentioned_in(b"..."));
        assert!(OffsetMaps::build(&ControlState::default()).is_empty());
    }
}
