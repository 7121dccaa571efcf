//! Mirrors: the control plane (definitions, per-partition state, the state machine, the
//! `__mirror_state` store, admin RPC handlers) and, later, the data plane.

pub mod model;
pub mod store;
pub mod configs;
pub mod state_machine;
pub mod topics;
pub mod control;
pub mod admin;
pub mod config_rpc;
pub mod persist;
pub mod dataplane;
pub mod verify;
