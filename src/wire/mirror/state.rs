//! Mirror partition states (KIP-1279 §4.1, prototype
//! `org.apache.kafka.server.mirror.MirrorPartitionState`): numeric ids as stored in
//! `__mirror_state` and names as shown in DescribeClusterMirrors `StateValue`. The ids changed
//! between prototype commits, so map by name where the wire carries one. Pure data.

/// The state of one mirror partition on the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[repr(i8)]
pub enum MirrorPartitionState {
    /// -1 `UNKNOWN`: no cached state (e.g. just became leader); never API-driven.
    Unknown = -1,
    /// 0 `LOG_ALIGNMENT`: initial/recovery step — loop check, last-mirror-epoch lookup,
    /// truncate the local log to match the source. Read-only.
    LogAlignment = 0,
    /// 1 `EPOCH_FENCING`: bump the local leader epoch to ≥ the source's before appending more.
    /// Read-only.
    EpochFencing = 1,
    /// 2 `ULE_RECOVERY`: the source had an unclean leader election; wait for replicas to
    /// converge on the truncated log (KIP text: `ULE_LOG_TRUNCATION`). Read-only.
    UleRecovery = 2,
    /// 3 `MIRRORING`: fetcher running. Read-only.
    Mirroring = 3,
    /// 4 `PAUSING`: fetchers being removed (transient). Read-only.
    Pausing = 4,
    /// 5 `PAUSED`: no fetching, no metadata sync. Read-only.
    Paused = 5,
    /// 6 `STOPPING`: failover in progress (transient). Read-only.
    Stopping = 6,
    /// 7 `STOPPED`: mirroring ended; the partition is writable.
    Stopped = 7,
    /// 8 `FAILED`: error; carries a message, a retry attempt (-1 = non-retryable) and the
    /// previous state.
    Failed = 8,
}

impl MirrorPartitionState {
    /// Every state, `UNKNOWN` first then by id.
    pub const ALL: [MirrorPartitionState; 10] = [
        MirrorPartitionState::Unknown,
        MirrorPartitionState::LogAlignment,
        MirrorPartitionState::EpochFencing,
        MirrorPartitionState::UleRecovery,
        MirrorPartitionState::Mirroring,
        MirrorPartitionState::Pausing,
        MirrorPartitionState::Paused,
        MirrorPartitionState::Stopping,
        MirrorPartitionState::Stopped,
        MirrorPartitionState::Failed,
    ];

    /// The prototype's numeric id.
    pub const fn id(self) -> i8 {
        self as i8
    }

    /// The state with prototype id `id`, if any.
    pub fn from_i8(id: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The prototype's name, e.g. `MIRRORING` (DescribeClusterMirrors `StateValue`).
    pub const fn as_str(self) -> &'static str {
        match self {
            MirrorPartitionState::Unknown => "UNKNOWN",
            MirrorPartitionState::LogAlignment => "LOG_ALIGNMENT",
            MirrorPartitionState::EpochFencing => "EPOCH_FENCING",
            MirrorPartitionState::UleRecovery => "ULE_RECOVERY",
            MirrorPartitionState::Mirroring => "MIRRORING",
            MirrorPartitionState::Pausing => "PAUSING",
            MirrorPartitionState::Paused => "PAUSED",
            MirrorPartitionState::Stopping => "STOPPING",
            MirrorPartitionState::Stopped => "STOPPED",
            MirrorPartitionState::Failed => "FAILED",
        }
    }

    /// The state named `name` (exact, upper case); also accepts the KIP's alias
    /// `ULE_LOG_TRUNCATION` for [`MirrorPartitionState::UleRecovery`].
    pub fn from_name(name: &str) -> Option<Self> {
        if name == "ULE_LOG_TRUNCATION" {
            return Some(MirrorPartitionState::UleRecovery);
        }
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the partition rejects writes (`READ_ONLY_TOPIC`): every state but `STOPPED`
    /// (`FAILED` and `UNKNOWN` read-only as inferred in kip-1279.md §4.1).
    pub const fn is_read_only(self) -> bool {
        !matches!(self, MirrorPartitionState::Stopped)
    }
}

impl std::fmt::Display for MirrorPartitionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip() {
        for s in MirrorPartitionState::ALL {
            assert_eq!(MirrorPartitionState::from_i8(s.id()), Some(s));
            assert_eq!(MirrorPartitionState::from_name(s.as_str()), Some(s));
        }
        assert_eq!(MirrorPartitionState::Mirroring.id(), 3);
        assert_eq!(MirrorPartitionState::Failed.as_str(), "FAILED");
        assert_eq!(MirrorPartitionState::from_i8(9), None);
        assert_eq!(MirrorPartitionState::from_i8(16), None);
        assert_eq!(MirrorPartitionState::from_name("ULE_LOG_TRUNCATION"), Some(MirrorPartitionState::UleRecovery));
        assert_eq!(MirrorPartitionState::from_name("mirroring"), None);
        assert!(!MirrorPartitionState::Stopped.is_read_only());
        assert!(MirrorPartitionState::Paused.is_read_only());
    }
}
