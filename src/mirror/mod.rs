//! Mirrors: the control plane (definitions, per-partition state, the state machine, the
//! `__mirror_state` store, admin RPC handlers) and, later, the data plane.

pub mod admin;
pub mod adopt;
pub mod bound_credentials;
pub mod config_rpc;
pub mod configs;
pub mod control;
pub mod dataplane;
pub mod follow;
pub mod loops;
pub mod members;
pub mod metrics;
pub mod migration;
pub mod model;
pub mod offset_maps;
pub mod persist;
pub mod secrets;
pub mod sharing;
pub mod state_machine;
pub mod store;
pub mod store_files;
pub mod sync;
pub mod topic_configs;
pub mod topics;
pub mod verify;
