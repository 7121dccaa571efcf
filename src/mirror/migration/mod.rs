//! Zero-downtime migration (issue 36, design in `docs/migration.md`): while a mirror topic is
//! in migration, clients connected to mirrorgate use it as if it were the source — their
//! writes and consumer groups are routed to the source cluster — until one cutover command
//! moves them to the destination without a restart.
//!
//! This module holds what the control plane and the proxy share about it: a topic's
//! [`routing::TopicRouting`] and the rules between its states ([`routing`]), where each
//! request kind goes in each state ([`routing::route`]), the safety checks a cutover runs
//! against the source before it starts ([`safety`]), and how the first batches of a producer
//! after the switch are judged ([`producers`]). It never touches a client connection:
//! the proxy asks it, and acts.

pub mod producers;
pub mod routing;
pub mod safety;
