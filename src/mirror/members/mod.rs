//! Mirror work shared through Kafka group membership (issue 14, DESIGN §6 "Scale-out and high
//! availability"): several mirrorgate instances with one configuration join one group on the
//! destination cluster's group coordinator, under a protocol type of mirrorgate's own, and the
//! leader of each generation splits the copy loops (per mirror partition) and the metadata syncs
//! (per mirror) across the live members. This module decides and publishes who owns what; it
//! never starts or stops a copy loop itself (the data plane follows the published assignment).
//!
//! - [`assign`]: the pure, balanced and sticky assignor.
//! - [`protocol`]: the versioned bytes of member metadata and assignments.
//! - [`group`]: the JoinGroup / SyncGroup / Heartbeat / LeaveGroup loop, with self-fencing.

pub mod assign;
pub mod group;
pub mod protocol;

pub use crate::config::MembershipSettings;
pub use group::{spawn, Assignment, Membership, WorkSet};
