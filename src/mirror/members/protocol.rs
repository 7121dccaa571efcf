//! The bytes mirrorgate puts in the group protocol's opaque fields: the member metadata of a
//! JoinGroup request (`Protocols[].Metadata`, handed by the group coordinator to the leader in
//! `Members[].Metadata`) and the assignment of a SyncGroup request (`Assignments[].Assignment`,
//! handed to each member in the SyncGroup response). The coordinator never reads them (it only
//! compares protocol names), so the format is mirrorgate's own: a JSON object with a `version`
//! field. Decoding never panics; bytes of an unknown version are refused with
//! [`ProtocolError::UnknownVersion`], never half-read.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::assign::TopicPartition;

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Why bytes from the group could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// Not JSON, or not the shape of this version (a missing or mistyped field).
    #[error("malformed {what}: {source}")]
    Malformed {
        /// `member metadata` or `assignment`.
        what: &'static str,
        /// The parser's complaint.
        #[source]
        source: serde_json::Error,
    },
    /// Written by a mirrorgate with another format (a newer build in a rolling upgrade).
    #[error("{what} has format version {found}; this mirrorgate reads version {FORMAT_VERSION} only")]
    UnknownVersion {
        /// `member metadata` or `assignment`.
        what: &'static str,
        /// The version found in the bytes.
        found: u64,
    },
}

/// What a member tells the leader in JoinGroup: who it is and what it owned in the previous
/// generation (for sticky assignment).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberMetadata {
    /// Instance name (`instances.name`).
    pub instance: String,
    /// Mirror partitions `(topic, partition)` it copied.
    pub owned_partitions: BTreeSet<TopicPartition>,
    /// Mirrors whose metadata sync it ran.
    pub owned_mirrors: BTreeSet<String>,
}

/// What the leader gives one member in SyncGroup. It carries no generation: the generation is
/// the one of the SyncGroup that delivered it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberAssignment {
    /// Mirror partitions `(topic, partition)` this member copies.
    pub partitions: BTreeSet<TopicPartition>,
    /// Mirrors whose metadata sync this member runs.
    pub mirrors: BTreeSet<String>,
    /// Every assigned partition of the group → the instance name of its owner.
    pub owners: BTreeMap<TopicPartition, String>,
}

#[derive(Serialize, Deserialize)]
struct MetadataV1 {
    version: u32,
    instance: String,
    partitions: Vec<(String, i32)>,
    mirrors: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct AssignmentV1 {
    version: u32,
    partitions: Vec<(String, i32)>,
    mirrors: Vec<String>,
    /// `[topic, partition, instance]` triples (JSON object keys must be strings).
    owners: Vec<(String, i32, String)>,
}

#[derive(Deserialize)]
struct VersionOnly {
    version: u64,
}

fn check_version(what: &'static str, bytes: &[u8]) -> Result<(), ProtocolError> {
    let v: VersionOnly = serde_json::from_slice(bytes).map_err(|source| ProtocolError::Malformed { what, source })?;
    if v.version != u64::from(FORMAT_VERSION) {
        return Err(ProtocolError::UnknownVersion { what, found: v.version });
    }
    Ok(())
}

impl MemberMetadata {
    /// The JoinGroup `Protocols[].Metadata` bytes.
    pub fn encode(&self) -> Vec<u8> {
        let v = MetadataV1 {
            version: FORMAT_VERSION,
            instance: self.instance.clone(),
            partitions: self.owned_partitions.iter().cloned().collect(),
            mirrors: self.owned_mirrors.iter().cloned().collect(),
        };
        serde_json::to_vec(&v).expect("strings and integers always serialize")
    }

    /// Reads a JoinGroup response's `Members[].Metadata`.
    ///
    /// # Errors
    /// [`ProtocolError::Malformed`], [`ProtocolError::UnknownVersion`].
    pub fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        const WHAT: &str = "member metadata";
        check_version(WHAT, bytes)?;
        let v: MetadataV1 =
            serde_json::from_slice(bytes).map_err(|source| ProtocolError::Malformed { what: WHAT, source })?;
        Ok(Self {
            instance: v.instance,
            owned_partitions: v.partitions.into_iter().collect(),
            owned_mirrors: v.mirrors.into_iter().collect(),
        })
    }
}

impl MemberAssignment {
    /// The SyncGroup `Assignments[].Assignment` bytes.
    pub fn encode(&self) -> Vec<u8> {
        let v = AssignmentV1 {
            version: FORMAT_VERSION,
            partitions: self.partitions.iter().cloned().collect(),
            mirrors: self.mirrors.iter().cloned().collect(),
            owners: self.owners.iter().map(|((t, p), i)| (t.clone(), *p, i.clone())).collect(),
        };
        serde_json::to_vec(&v).expect("strings and integers always serialize")
    }

    /// Reads a SyncGroup response's `Assignment`. Empty bytes (what the coordinator sends a
    /// member the leader gave nothing, e.g. after a leader failure) are the empty assignment.
    ///
    /// # Errors
    /// [`ProtocolError::Malformed`], [`ProtocolError::UnknownVersion`].
    pub fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        const WHAT: &str = "assignment";
        if bytes.is_empty() {
            return Ok(Self::default());
        }
        check_version(WHAT, bytes)?;
        let v: AssignmentV1 =
            serde_json::from_slice(bytes).map_err(|source| ProtocolError::Malformed { what: WHAT, source })?;
        Ok(Self {
            partitions: v.partitions.into_iter().collect(),
            mirrors: v.mirrors.into_iter().collect(),
            owners: v.owners.into_iter().map(|(t, p, i)| ((t, p), i)).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_assignment() -> MemberAssignment {
        MemberAssignment {
            partitions: [("orders".to_string(), 0), ("orders".to_string(), 3)].into(),
            mirrors: ["a-to-b".to_string()].into(),
            owners: [
                (("orders".to_string(), 0), "mg-1".to_string()),
                (("orders".to_string(), 1), "mg-2".to_string()),
                (("orders".to_string(), 3), "mg-1".to_string()),
            ]
            .into(),
        }
    }

    #[test]
    fn metadata_round_trips() {
        let m = MemberMetadata {
            instance: "host-a-4242".into(),
            owned_partitions: [("t".to_string(), 2), ("u\"é".to_string(), 0)].into(),
            owned_mirrors: ["m".to_string()].into(),
        };
        let bytes = m.encode();
        assert!(std::str::from_utf8(&bytes).unwrap().contains("\"version\":1"));
        assert_eq!(MemberMetadata::decode(&bytes).unwrap(), m);
        assert_eq!(MemberMetadata::decode(&MemberMetadata::default().encode()).unwrap(), MemberMetadata::default());
    }

    #[test]
    fn assignment_round_trips_and_empty_bytes_are_empty() {
        let a = sample_assignment();
        assert_eq!(MemberAssignment::decode(&a.encode()).unwrap(), a);
        assert_eq!(MemberAssignment::decode(b"").unwrap(), MemberAssignment::default());
    }

    #[test]
    fn unknown_versions_are_refused_by_name() {
        let meta = br#"{"version":2,"instance":"x","partitions":[],"mirrors":[],"new":true}"#;
        let err = MemberMetadata::decode(meta).unwrap_err();
        assert!(matches!(err, ProtocolError::UnknownVersion { found: 2, .. }), "{err:?}");
        assert!(err.to_string().contains("format version 2"), "{err}");
        let err = MemberAssignment::decode(br#"{"version":99999999999}"#).unwrap_err();
        assert!(matches!(err, ProtocolError::UnknownVersion { found: 99_999_999_999, .. }), "{err:?}");
    }

    #[test]
    fn garbage_never_panics() {
        let cases: [&[u8]; 8] = [
            b"\x00\x01\x02",
            b"{",
            b"[]",
            b"null",
            br#"{"version":"1"}"#,
            br#"{"version":1}"#,
            br#"{"version":1,"partitions":[["t"]],"mirrors":[],"owners":[]}"#,
            br#"{"version":1,"partitions":[["t",99999999999]],"mirrors":[],"owners":[]}"#,
        ];
        for c in cases {
            assert!(MemberMetadata::decode(c).is_err(), "{c:?}");
            assert!(MemberAssignment::decode(c).is_err(), "{c:?}");
        }
        // Random bytes, and every prefix of a valid encoding.
        let good = sample_assignment().encode();
        for n in 0..good.len() {
            let _ = MemberAssignment::decode(&good[..n]);
        }
        let mut x: u32 = 7;
        for _ in 0..2000 {
            let bytes: Vec<u8> = (0..(x % 64))
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    (x >> 16) as u8
                })
                .collect();
            let _ = MemberMetadata::decode(&bytes);
            let _ = MemberAssignment::decode(&bytes);
        }
    }
}
