//! `instances.*`: how several instances share the mirror work (group membership).

use std::time::Duration;

use serde::Deserialize;

use super::{invalid, ConfigError};

/// Scale-out: the instances fronting one destination share the mirror work through a group on
/// the destination's group coordinator (`crate::mirror::members`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstancesConfig {
    /// This instance's name in logs and `--describe` (default: host name, `-`, process id).
    #[serde(default)]
    pub name: Option<String>,
    /// The group id the instances join (default `mirrorgate.` + `mirror_state.topic`).
    #[serde(default)]
    pub group_id: Option<String>,
    /// JoinGroup session timeout, in ms (default 10000).
    #[serde(default = "default_session_timeout_ms")]
    pub session_timeout_ms: u64,
    /// Time between heartbeats, in ms (default 3000); less than half the session timeout.
    #[serde(default = "default_heartbeat_interval_ms")]
    pub heartbeat_interval_ms: u64,
    /// JoinGroup rebalance timeout, in ms (default 30000).
    #[serde(default = "default_rebalance_timeout_ms")]
    pub rebalance_timeout_ms: u64,
}

impl Default for InstancesConfig {
    fn default() -> Self {
        Self {
            name: None,
            group_id: None,
            session_timeout_ms: default_session_timeout_ms(),
            heartbeat_interval_ms: default_heartbeat_interval_ms(),
            rebalance_timeout_ms: default_rebalance_timeout_ms(),
        }
    }
}

fn default_session_timeout_ms() -> u64 {
    10_000
}
fn default_heartbeat_interval_ms() -> u64 {
    3_000
}
fn default_rebalance_timeout_ms() -> u64 {
    30_000
}

/// The default instance name: the host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`,
/// else `mirrorgate`), `-`, the process id.
pub fn default_instance_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "mirrorgate".into());
    format!("{host}-{}", std::process::id())
}

/// Membership settings (`instances.*` in proxy.yaml, defaults filled in), for
/// `crate::mirror::members`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipSettings {
    /// The group id on the destination (JoinGroup `GroupId`).
    pub group_id: String,
    /// This instance's name, sent in the member metadata and shown as partition owner.
    pub instance: String,
    /// JoinGroup `SessionTimeoutMs`: the coordinator removes a member that sent no heartbeat
    /// for this long. Must lie within the broker's `group.min.session.timeout.ms` (6 s by
    /// default) and `group.max.session.timeout.ms` or JoinGroup fails with
    /// `INVALID_SESSION_TIMEOUT`.
    pub session_timeout: Duration,
    /// Time between two Heartbeat requests; less than half the session timeout.
    pub heartbeat_interval: Duration,
    /// JoinGroup `RebalanceTimeoutMs`: how long the coordinator waits for every member to
    /// rejoin in a rebalance; a member that has not rejoined by then is dropped from the
    /// generation. At least the session timeout, so a stalled member has fenced itself first.
    pub rebalance_timeout: Duration,
}

impl MembershipSettings {
    /// How long after its last successful heartbeat a member stops owning work:
    /// `session_timeout − heartbeat_interval`, so it stops before the coordinator can expire
    /// it and hand its work to another member.
    pub fn self_fence_after(&self) -> Duration {
        self.session_timeout.saturating_sub(self.heartbeat_interval)
    }
}

impl InstancesConfig {
    /// The membership settings, defaults filled in.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`]: an empty name or group id, a timeout of 0 or above
    /// 2147483647 ms (JoinGroup's INT32 fields), a heartbeat interval not less than half the
    /// session timeout, or a rebalance timeout less than the session timeout.
    pub(super) fn validate(&self, state_topic: &str) -> Result<MembershipSettings, ConfigError> {
        for (k, v) in [("instances.name", &self.name), ("instances.group_id", &self.group_id)] {
            if v.as_ref().is_some_and(|s| s.trim().is_empty()) {
                return Err(invalid(k, "must not be empty (unset it for the default)"));
            }
        }
        for (k, v) in [
            ("instances.session_timeout_ms", self.session_timeout_ms),
            ("instances.heartbeat_interval_ms", self.heartbeat_interval_ms),
            ("instances.rebalance_timeout_ms", self.rebalance_timeout_ms),
        ] {
            if v == 0 || v > i32::MAX as u64 {
                return Err(invalid(k, "must be between 1 and 2147483647 ms"));
            }
        }
        if self.heartbeat_interval_ms.saturating_mul(2) >= self.session_timeout_ms {
            return Err(invalid(
                "instances.heartbeat_interval_ms",
                format!(
                    "{} ms must be less than half of instances.session_timeout_ms ({} ms): an instance stops \
                     its mirror work when no heartbeat succeeded for the session timeout minus one interval",
                    self.heartbeat_interval_ms, self.session_timeout_ms
                ),
            ));
        }
        if self.rebalance_timeout_ms < self.session_timeout_ms {
            return Err(invalid(
                "instances.rebalance_timeout_ms",
                format!(
                    "{} ms is less than instances.session_timeout_ms ({} ms): the coordinator drops an \
                     instance that has not rejoined within the rebalance timeout, which must not happen \
                     before that instance stops its work (session timeout − heartbeat interval)",
                    self.rebalance_timeout_ms, self.session_timeout_ms
                ),
            ));
        }
        Ok(MembershipSettings {
            group_id: self.group_id.clone().unwrap_or_else(|| format!("mirrorgate.{state_topic}")),
            instance: self.name.clone().unwrap_or_else(default_instance_name),
            session_timeout: Duration::from_millis(self.session_timeout_ms),
            heartbeat_interval: Duration::from_millis(self.heartbeat_interval_ms),
            rebalance_timeout: Duration::from_millis(self.rebalance_timeout_ms),
        })
    }
}
