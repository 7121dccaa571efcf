//! Which Kafka api key carries which KIP-1279 mirror RPC. The prototype's keys are temporary
//! (they moved between commits and upstream numbering may differ), so they live in a plain,
//! deserializable struct whose `Default` holds the prototype numbers and which `proxy.yaml`
//! can override. Pure data: no I/O.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::VersionRange;
use serde::Deserialize;
use thiserror::Error;

use super::SUPPORTED_VERSIONS;

/// The eight KIP-1279 admin RPCs mirrorgate implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MirrorApi {
    /// CreateClusterMirror: create a named mirror and its configs (prototype key 94).
    CreateClusterMirror,
    /// DeleteClusterMirror: delete an empty mirror (prototype key 104).
    DeleteClusterMirror,
    /// ListClusterMirrors: list mirrors, optionally with topic names (prototype key 98).
    ListClusterMirrors,
    /// DescribeClusterMirrors: per-partition mirror state and lag, and the failback
    /// last-mirror-epoch lookup (prototype key 99).
    DescribeClusterMirrors,
    /// StartMirrorTopics: add include/exclude patterns, start mirroring (prototype key 95).
    StartMirrorTopics,
    /// StopMirrorTopics: failover; partitions go STOPPING → STOPPED, writable (prototype key 96).
    StopMirrorTopics,
    /// PauseMirrorTopics: stop fetching, stay read-only (prototype key 102).
    PauseMirrorTopics,
    /// ResumeMirrorTopics: back to MIRRORING from the local log end (prototype key 103).
    ResumeMirrorTopics,
}

impl MirrorApi {
    /// All eight RPCs, in prototype api-key order.
    pub const ALL: [MirrorApi; 8] = [
        MirrorApi::CreateClusterMirror,
        MirrorApi::StartMirrorTopics,
        MirrorApi::StopMirrorTopics,
        MirrorApi::ListClusterMirrors,
        MirrorApi::DescribeClusterMirrors,
        MirrorApi::PauseMirrorTopics,
        MirrorApi::ResumeMirrorTopics,
        MirrorApi::DeleteClusterMirror,
    ];

    /// The RPC's name as in the prototype's JSON (`name` minus `Request`).
    pub fn name(self) -> &'static str {
        match self {
            MirrorApi::CreateClusterMirror => "CreateClusterMirror",
            MirrorApi::DeleteClusterMirror => "DeleteClusterMirror",
            MirrorApi::ListClusterMirrors => "ListClusterMirrors",
            MirrorApi::DescribeClusterMirrors => "DescribeClusterMirrors",
            MirrorApi::StartMirrorTopics => "StartMirrorTopics",
            MirrorApi::StopMirrorTopics => "StopMirrorTopics",
            MirrorApi::PauseMirrorTopics => "PauseMirrorTopics",
            MirrorApi::ResumeMirrorTopics => "ResumeMirrorTopics",
        }
    }

    /// The key of this RPC in `mirror_api_keys` (proxy.yaml), e.g. `create_cluster_mirror`.
    pub fn config_key(self) -> &'static str {
        match self {
            MirrorApi::CreateClusterMirror => "create_cluster_mirror",
            MirrorApi::DeleteClusterMirror => "delete_cluster_mirror",
            MirrorApi::ListClusterMirrors => "list_cluster_mirrors",
            MirrorApi::DescribeClusterMirrors => "describe_cluster_mirrors",
            MirrorApi::StartMirrorTopics => "start_mirror_topics",
            MirrorApi::StopMirrorTopics => "stop_mirror_topics",
            MirrorApi::PauseMirrorTopics => "pause_mirror_topics",
            MirrorApi::ResumeMirrorTopics => "resume_mirror_topics",
        }
    }

    /// The api key the authors' prototype assigns (`"apiKey"` in showuon/kafka
    /// `clients/src/main/resources/common/message/<Name>Request.json`).
    pub const fn prototype_api_key(self) -> i16 {
        match self {
            MirrorApi::CreateClusterMirror => 94,
            MirrorApi::StartMirrorTopics => 95,
            MirrorApi::StopMirrorTopics => 96,
            MirrorApi::ListClusterMirrors => 98,
            MirrorApi::DescribeClusterMirrors => 99,
            MirrorApi::PauseMirrorTopics => 102,
            MirrorApi::ResumeMirrorTopics => 103,
            MirrorApi::DeleteClusterMirror => 104,
        }
    }

    /// Versions this codec supports (the prototype's `validVersions "0"`, flexible from 0).
    pub const fn supported_versions(self) -> VersionRange {
        SUPPORTED_VERSIONS
    }
}

/// One row of the table: an RPC, the api key it travels under and its supported versions,
/// e.g. for an ApiVersions response.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MirrorApiEntry {
    /// The RPC.
    pub api: MirrorApi,
    /// Its api key in this deployment.
    pub api_key: i16,
    /// Versions supported (min..=max).
    pub versions: VersionRange,
}

/// Api keys of the mirror RPCs. `Default` is the prototype's numbering; every field can be
/// overridden from configuration (`#[serde(default)]` per field, unknown keys rejected), e.g.
///
/// ```yaml
/// mirror_api_keys:
///   create_cluster_mirror: 1094
/// ```
///
/// Call [`MirrorApiTable::validate`] after loading.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MirrorApiTable {
    /// CreateClusterMirror (prototype 94).
    pub create_cluster_mirror: i16,
    /// StartMirrorTopics (prototype 95).
    pub start_mirror_topics: i16,
    /// StopMirrorTopics (prototype 96).
    pub stop_mirror_topics: i16,
    /// ListClusterMirrors (prototype 98).
    pub list_cluster_mirrors: i16,
    /// DescribeClusterMirrors (prototype 99).
    pub describe_cluster_mirrors: i16,
    /// PauseMirrorTopics (prototype 102).
    pub pause_mirror_topics: i16,
    /// ResumeMirrorTopics (prototype 103).
    pub resume_mirror_topics: i16,
    /// DeleteClusterMirror (prototype 104).
    pub delete_cluster_mirror: i16,
}

impl Default for MirrorApiTable {
    fn default() -> Self {
        Self {
            create_cluster_mirror: MirrorApi::CreateClusterMirror.prototype_api_key(),
            start_mirror_topics: MirrorApi::StartMirrorTopics.prototype_api_key(),
            stop_mirror_topics: MirrorApi::StopMirrorTopics.prototype_api_key(),
            list_cluster_mirrors: MirrorApi::ListClusterMirrors.prototype_api_key(),
            describe_cluster_mirrors: MirrorApi::DescribeClusterMirrors.prototype_api_key(),
            pause_mirror_topics: MirrorApi::PauseMirrorTopics.prototype_api_key(),
            resume_mirror_topics: MirrorApi::ResumeMirrorTopics.prototype_api_key(),
            delete_cluster_mirror: MirrorApi::DeleteClusterMirror.prototype_api_key(),
        }
    }
}

/// A [`MirrorApiTable`] that cannot be used for routing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MirrorApiTableError {
    /// Two RPCs share one api key, so a request could not be routed.
    #[error("api key {api_key} is assigned to both {first} and {second}")]
    DuplicateKey {
        /// The shared key.
        api_key: i16,
        /// One RPC using it.
        first: &'static str,
        /// The other.
        second: &'static str,
    },
    /// A negative api key.
    #[error("api key {api_key} for {api} is negative")]
    NegativeKey {
        /// The RPC.
        api: &'static str,
        /// Its key.
        api_key: i16,
    },
    /// The key is a standard Kafka api known to kafka-protocol (e.g. 1 = Fetch); mirror
    /// routing would hijack it.
    #[error("api key {api_key} for {api} is the standard Kafka api {standard}")]
    StandardKey {
        /// The RPC.
        api: &'static str,
        /// Its key.
        api_key: i16,
        /// kafka-protocol's name for the standard api.
        standard: String,
    },
}

impl MirrorApiTable {
    /// The api key `api` travels under.
    pub fn api_key(&self, api: MirrorApi) -> i16 {
        match api {
            MirrorApi::CreateClusterMirror => self.create_cluster_mirror,
            MirrorApi::StartMirrorTopics => self.start_mirror_topics,
            MirrorApi::StopMirrorTopics => self.stop_mirror_topics,
            MirrorApi::ListClusterMirrors => self.list_cluster_mirrors,
            MirrorApi::DescribeClusterMirrors => self.describe_cluster_mirrors,
            MirrorApi::PauseMirrorTopics => self.pause_mirror_topics,
            MirrorApi::ResumeMirrorTopics => self.resume_mirror_topics,
            MirrorApi::DeleteClusterMirror => self.delete_cluster_mirror,
        }
    }

    /// Which mirror RPC `api_key` is, if any (first match in [`MirrorApi::ALL`] order; a
    /// validated table has no duplicates).
    pub fn lookup(&self, api_key: i16) -> Option<MirrorApi> {
        MirrorApi::ALL.into_iter().find(|&api| self.api_key(api) == api_key)
    }

    /// All eight rows (RPC, api key, supported versions), in [`MirrorApi::ALL`] order.
    pub fn entries(&self) -> [MirrorApiEntry; 8] {
        MirrorApi::ALL.map(|api| MirrorApiEntry { api, api_key: self.api_key(api), versions: api.supported_versions() })
    }

    /// Checks that every key is non-negative, unique, and not a standard Kafka api key known
    /// to kafka-protocol 0.18 (which ends at 92, so the prototype's 94–104 pass).
    ///
    /// Errors: [`MirrorApiTableError`].
    pub fn validate(&self) -> Result<(), MirrorApiTableError> {
        for (i, &a) in MirrorApi::ALL.iter().enumerate() {
            let key = self.api_key(a);
            if key < 0 {
                return Err(MirrorApiTableError::NegativeKey { api: a.name(), api_key: key });
            }
            if let Ok(standard) = ApiKey::try_from(key) {
                return Err(MirrorApiTableError::StandardKey {
                    api: a.name(),
                    api_key: key,
                    standard: format!("{standard:?}"),
                });
            }
            if let Some(&b) = MirrorApi::ALL[..i].iter().find(|&&b| self.api_key(b) == key) {
                return Err(MirrorApiTableError::DuplicateKey { api_key: key, first: b.name(), second: a.name() });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_the_prototype_numbering() {
        let t = MirrorApiTable::default();
        t.validate().unwrap();
        let keys: Vec<(i16, &str)> = t.entries().iter().map(|e| (e.api_key, e.api.name())).collect();
        assert_eq!(
            keys,
            vec![
                (94, "CreateClusterMirror"),
                (95, "StartMirrorTopics"),
                (96, "StopMirrorTopics"),
                (98, "ListClusterMirrors"),
                (99, "DescribeClusterMirrors"),
                (102, "PauseMirrorTopics"),
                (103, "ResumeMirrorTopics"),
                (104, "DeleteClusterMirror"),
            ]
        );
        for e in t.entries() {
            assert_eq!(e.versions, VersionRange { min: 0, max: 0 });
            assert_eq!(t.lookup(e.api_key), Some(e.api));
        }
        assert_eq!(t.lookup(97), None);
        assert_eq!(t.lookup(1), None);
    }

    #[test]
    fn overrides_deserialize_and_validate() {
        let t: MirrorApiTable =
            serde_json::from_str(r#"{"create_cluster_mirror": 1094, "delete_cluster_mirror": 1104}"#).unwrap();
        assert_eq!(t.lookup(1094), Some(MirrorApi::CreateClusterMirror));
        assert_eq!(t.lookup(94), None);
        assert_eq!(t.api_key(MirrorApi::StartMirrorTopics), 95);
        t.validate().unwrap();

        assert!(serde_json::from_str::<MirrorApiTable>(r#"{"create_mirror": 1}"#).is_err());

        let dup = MirrorApiTable { delete_cluster_mirror: 94, ..Default::default() };
        assert!(matches!(dup.validate(), Err(MirrorApiTableError::DuplicateKey { api_key: 94, .. })));
        let fetch = MirrorApiTable { create_cluster_mirror: 1, ..Default::default() };
        assert!(matches!(fetch.validate(), Err(MirrorApiTableError::StandardKey { api_key: 1, .. })));
        let neg = MirrorApiTable { create_cluster_mirror: -5, ..Default::default() };
        assert!(matches!(neg.validate(), Err(MirrorApiTableError::NegativeKey { .. })));
    }
}
