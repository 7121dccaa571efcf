//! mirrorgate: a Kafka-protocol proxy that fronts a destination cluster and gives it the
//! cluster mirroring of KIP-1279 without changing a broker.
//!
//! Data flows one way: `wire` (sans-IO framing and messages) ← `proxy` (client listeners,
//! routing, interceptors) and `config` / `telemetry` at the edges.
#![forbid(unsafe_code)]

pub mod client;
pub mod config;
pub mod mirror;
pub mod proxy;
pub mod sabotage;
pub mod secret;
pub mod telemetry;
pub mod wire;
