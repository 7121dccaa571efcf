//! A mirror topic's migration routing (issue 36, `docs/migration.md`): the state stored in
//! its `topic` record of `__mirror_state` (field `migration`), the commands that change it,
//! and where each kind of client request for the topic goes in each state. Pure functions:
//! the control plane persists, the proxy routes.

use serde::{Deserialize, Serialize};

/// Where clients' requests for a mirror topic in migration go (`docs/migration.md`, "Routing
/// states"). A mirror topic without a migration has no routing: it is read-only until
/// `--stop`, as every mirror topic (KIP-1279).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TopicRouting {
    /// Writes and consumer groups go to the source cluster; reads are served from the
    /// destination with a read cap (`docs/migration.md`, "Reads").
    Migrating,
    /// A cutover runs: new writes are held, in-flight ones drain, the topic fails over.
    CuttingOver,
    /// The cutover completed: the topic is STOPPED (writable) and everything goes to the
    /// destination.
    CutOver,
}

impl TopicRouting {
    /// The name `--describe` shows (`MIGRATING`, `CUTTING_OVER`, `CUT_OVER`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Migrating => "MIGRATING",
            Self::CuttingOver => "CUTTING_OVER",
            Self::CutOver => "CUT_OVER",
        }
    }
}

impl std::fmt::Display for TopicRouting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The migration of a mirror topic, stored in its `topic` record (`"migration"`, an optional
/// field of record format v1: a build without it ignores it and keeps the topic read-only,
/// which refuses writes but never sends them to the wrong cluster).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migration {
    /// Where the topic's client requests go.
    pub routing: TopicRouting,
    /// When the topic entered `routing`, ms since the epoch.
    pub since_ms: i64,
    /// The cutover command that set CUTTING_OVER (an id chosen by the instance that received
    /// it), so that a retried command is recognised instead of starting a second cutover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutover_id: Option<String>,
    /// When the cutover reached its fail-over step (ms since the epoch): from then on it can
    /// only be completed, not aborted. `None` before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_started_ms: Option<i64>,
    /// What the safety checks named when the cutover was forced past them (`--force`), kept
    /// for `--describe` and the cutover report; empty when nothing was forced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forced_past: Vec<String>,
}

/// An operator command (or a cutover step) that changes a topic's routing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoutingCommand {
    /// `--start --migrate`: route the topic's writes and groups to the source.
    StartMigration,
    /// `--cutover` begins: hold new writes of the topic.
    BeginCutover {
        /// The cutover command's id.
        cutover_id: String,
        /// What the safety checks named when `--force` was given (empty otherwise).
        forced_past: Vec<String>,
    },
    /// The cutover reaches its fail-over step (persisted before StopMirrorTopics runs).
    BeginFailover,
    /// `--cutover --abort`, or a cutover step that failed before the fail-over step.
    AbortCutover,
    /// The topic is STOPPED and the held requests are released to the destination.
    CompleteCutover,
}

/// Why a routing command does not apply to a topic; each message names the topic and what
/// to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutingError {
    /// A cutover command for a topic without a migration.
    #[error("topic `{topic}` is not in migration; --stop fails it over, or --start --migrate routes it through the source first")]
    NotMigrating {
        /// Topic name.
        topic: String,
    },
    /// A command for a topic whose cutover is complete.
    #[error("topic `{topic}` is already cut over to the destination")]
    AlreadyCutOver {
        /// Topic name.
        topic: String,
    },
    /// A second cutover while one runs.
    #[error("topic `{topic}` is being cut over by cutover {cutover_id}; wait for it or abort it first")]
    CutoverInProgress {
        /// Topic name.
        topic: String,
        /// The running cutover's id.
        cutover_id: String,
    },
    /// An abort, fail-over or completion for a topic that is not cutting over.
    #[error("topic `{topic}` is not being cut over")]
    NotCuttingOver {
        /// Topic name.
        topic: String,
    },
    /// An abort after the fail-over step began.
    #[error("topic `{topic}`: the cutover began failing over at {at_ms} ms; it can no longer be aborted, run --cutover again to complete it")]
    PastFailover {
        /// Topic name.
        topic: String,
        /// When the fail-over step began, ms since the epoch.
        at_ms: i64,
    },
}

/// The migration of `topic` after `cmd`, from `current` (its migration now, `None` when it
/// has none), at `now_ms`. Re-asserting the state a topic is in is accepted and changes
/// nothing (a retried command): `StartMigration` on a MIGRATING topic, `BeginCutover` with
/// the running cutover's id, `BeginFailover` once begun, `CompleteCutover` on a CUT_OVER one.
///
/// # Errors
/// [`RoutingError`] when the command does not apply in the current state.
pub fn apply(
    topic: &str,
    current: Option<&Migration>,
    cmd: &RoutingCommand,
    now_ms: i64,
) -> Result<Migration, RoutingError> {
    use RoutingCommand as C;
    use TopicRouting as R;
    let topic_s = || topic.to_string();
    let fresh = |routing| Migration {
        routing,
        since_ms: now_ms,
        cutover_id: None,
        failover_started_ms: None,
        forced_past: Vec::new(),
    };
    let Some(cur) = current else {
        return match cmd {
            C::StartMigration => Ok(fresh(R::Migrating)),
            C::BeginCutover { .. } => Err(RoutingError::NotMigrating { topic: topic_s() }),
            C::BeginFailover | C::AbortCutover | C::CompleteCutover => {
                Err(RoutingError::NotCuttingOver { topic: topic_s() })
            }
        };
    };
    let running = |cur: &Migration| RoutingError::CutoverInProgress {
        topic: topic_s(),
        cutover_id: cur.cutover_id.clone().unwrap_or_default(),
    };
    match (cur.routing, cmd) {
        (R::CutOver, C::CompleteCutover) => Ok(cur.clone()),
        (R::CutOver, _) => Err(RoutingError::AlreadyCutOver { topic: topic_s() }),
        (R::Migrating, C::StartMigration) => Ok(cur.clone()),
        (R::Migrating, C::BeginCutover { cutover_id, forced_past }) => Ok(Migration {
            cutover_id: Some(cutover_id.clone()),
            forced_past: forced_past.clone(),
            ..fresh(R::CuttingOver)
        }),
        (R::Migrating, C::BeginFailover | C::AbortCutover | C::CompleteCutover) => {
            Err(RoutingError::NotCuttingOver { topic: topic_s() })
        }
        (R::CuttingOver, C::StartMigration) => Err(running(cur)),
        (R::CuttingOver, C::BeginCutover { cutover_id, .. }) => {
            if cur.cutover_id.as_ref() == Some(cutover_id) {
                Ok(cur.clone())
            } else {
                Err(running(cur))
            }
        }
        (R::CuttingOver, C::BeginFailover) => {
            Ok(Migration { failover_started_ms: Some(cur.failover_started_ms.unwrap_or(now_ms)), ..cur.clone() })
        }
        (R::CuttingOver, C::AbortCutover) => match cur.failover_started_ms {
            Some(at_ms) => Err(RoutingError::PastFailover { topic: topic_s(), at_ms }),
            None => Ok(fresh(R::Migrating)),
        },
        (R::CuttingOver, C::CompleteCutover) => match cur.failover_started_ms {
            Some(_) => Ok(Migration { routing: R::CutOver, since_ms: now_ms, ..cur.clone() }),
            None => Err(RoutingError::NotCuttingOver { topic: topic_s() }),
        },
    }
}

/// A kind of client request that names a topic in migration (or, for InitProducerId and
/// the transaction coordinator, a producer that writes to one), as the proxy classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// Produce (key 0) naming a partition of the topic.
    Produce,
    /// Fetch (1), ListOffsets (2), OffsetForLeaderEpoch (23) of the topic's partitions.
    Read,
    /// FindCoordinator (10) key type GROUP, JoinGroup (11), SyncGroup (14), Heartbeat (12),
    /// LeaveGroup (13), OffsetFetch (9) of a group with the topic's partitions, and the
    /// KIP-848 ConsumerGroupHeartbeat (68).
    Group,
    /// OffsetCommit (8) naming the topic's partitions.
    OffsetCommit,
    /// FindCoordinator key type TRANSACTION, InitProducerId (22) with a transactional id,
    /// AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), TxnOffsetCommit (28) of a
    /// transactional id that writes the topic.
    Transaction,
}

/// Where the proxy sends a request of a topic in migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// To the destination, as for any other topic (Produce: with the producer id mapping of
    /// `docs/migration.md`, "Producer ids").
    Destination,
    /// To the source cluster's partition leader or coordinator over mirrorgate's source
    /// connections, after the destination's ACLs for the client's principal allowed it.
    Source,
    /// Held by mirrorgate until the cutover step that releases it (bounded: past the hold
    /// limit a Produce partition is answered NOT_LEADER_OR_FOLLOWER, which every client
    /// retries). The proxy forwards the transactional Produce of a transaction that was
    /// already open when the cutover began instead (`docs/migration.md`, "Transactional
    /// producers"): the cutover waits for it to end.
    Hold,
}

/// Where a request of `kind` for a topic routed `routing` goes (`docs/migration.md`, table
/// "Routing"). Reads are always served by the destination: the read cap keeps a consumer
/// from reading past what the destination holds, and its lag behind the source is the
/// mirror's lag.
pub fn route(kind: RequestKind, routing: TopicRouting) -> Route {
    use RequestKind as K;
    use TopicRouting as R;
    match (routing, kind) {
        (_, K::Read) => Route::Destination,
        (R::CutOver, _) => Route::Destination,
        (R::Migrating, _) => Route::Source,
        // The cutover holds what changes the source: writes, new transaction parts and group
        // commits (for the final group offset sync); the groups keep their membership and
        // transactions may still end at the source coordinator.
        (R::CuttingOver, K::Produce | K::OffsetCommit) => Route::Hold,
        (R::CuttingOver, K::Group | K::Transaction) => Route::Source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RoutingCommand as C;
    use TopicRouting as R;

    fn begin(id: &str) -> C {
        C::BeginCutover { cutover_id: id.into(), forced_past: Vec::new() }
    }

    #[test]
    fn a_cutover_goes_migrating_cutting_over_cut_over() {
        let m = apply("t", None, &C::StartMigration, 10).unwrap();
        assert_eq!((m.routing, m.since_ms), (R::Migrating, 10));
        let m = apply("t", Some(&m), &begin("c1"), 20).unwrap();
        assert_eq!((m.routing, m.since_ms, m.cutover_id.as_deref()), (R::CuttingOver, 20, Some("c1")));
        assert_eq!(
            apply("t", Some(&m), &C::CompleteCutover, 25),
            Err(RoutingError::NotCuttingOver { topic: "t".into() }),
            "not before the fail-over step"
        );
        let m = apply("t", Some(&m), &C::BeginFailover, 30).unwrap();
        assert_eq!(m.failover_started_ms, Some(30));
        assert_eq!(apply("t", Some(&m), &C::BeginFailover, 31).unwrap().failover_started_ms, Some(30), "kept on retry");
        let m = apply("t", Some(&m), &C::CompleteCutover, 40).unwrap();
        assert_eq!((m.routing, m.since_ms, m.cutover_id.as_deref()), (R::CutOver, 40, Some("c1")));
        assert_eq!(apply("t", Some(&m), &C::CompleteCutover, 50).unwrap(), m, "a retried completion changes nothing");
        for cmd in [C::StartMigration, begin("c2"), C::AbortCutover, C::BeginFailover] {
            assert_eq!(
                apply("t", Some(&m), &cmd, 60),
                Err(RoutingError::AlreadyCutOver { topic: "t".into() }),
                "{cmd:?}"
            );
        }
    }

    #[test]
    fn abort_returns_to_migrating_only_before_the_failover_step() {
        let m = apply("t", None, &C::StartMigration, 1).unwrap();
        let cutting = apply("t", Some(&m), &begin("c1"), 2).unwrap();
        let aborted = apply("t", Some(&cutting), &C::AbortCutover, 3).unwrap();
        assert_eq!(
            aborted,
            Migration {
                routing: R::Migrating,
                since_ms: 3,
                cutover_id: None,
                failover_started_ms: None,
                forced_past: vec![]
            }
        );
        let failing_over = apply("t", Some(&cutting), &C::BeginFailover, 4).unwrap();
        let e = apply("t", Some(&failing_over), &C::AbortCutover, 5).unwrap_err();
        assert_eq!(e, RoutingError::PastFailover { topic: "t".into(), at_ms: 4 });
        assert!(e.to_string().contains("run --cutover again"), "{e}");
        assert_eq!(apply("t", Some(&m), &C::AbortCutover, 6), Err(RoutingError::NotCuttingOver { topic: "t".into() }));
    }

    #[test]
    fn one_cutover_at_a_time_and_retries_are_recognised() {
        let m = apply("t", None, &C::StartMigration, 1).unwrap();
        assert_eq!(apply("t", Some(&m), &C::StartMigration, 2).unwrap(), m, "start again: unchanged");
        let cutting = apply("t", Some(&m), &begin("c1"), 3).unwrap();
        assert_eq!(apply("t", Some(&cutting), &begin("c1"), 4).unwrap(), cutting, "the same cutover retried");
        let e = apply("t", Some(&cutting), &begin("c2"), 4).unwrap_err();
        assert_eq!(e, RoutingError::CutoverInProgress { topic: "t".into(), cutover_id: "c1".into() });
        assert_eq!(apply("t", Some(&cutting), &C::StartMigration, 4), Err(e));
        let forced = apply(
            "t",
            Some(&m),
            &C::BeginCutover { cutover_id: "c3".into(), forced_past: vec!["producer 7".into()] },
            5,
        )
        .unwrap();
        assert_eq!(forced.forced_past, vec!["producer 7".to_string()]);
    }

    #[test]
    fn commands_on_a_topic_without_migration() {
        assert_eq!(apply("t", None, &begin("c"), 1), Err(RoutingError::NotMigrating { topic: "t".into() }));
        assert!(RoutingError::NotMigrating { topic: "t".into() }.to_string().contains("--stop"));
        for cmd in [C::AbortCutover, C::BeginFailover, C::CompleteCutover] {
            assert_eq!(apply("t", None, &cmd, 1), Err(RoutingError::NotCuttingOver { topic: "t".into() }));
        }
    }

    #[test]
    fn routing_table() {
        use RequestKind as K;
        for r in [R::Migrating, R::CuttingOver, R::CutOver] {
            assert_eq!(route(K::Read, r), Route::Destination, "reads always from the destination");
        }
        for k in [K::Produce, K::Group, K::OffsetCommit, K::Transaction] {
            assert_eq!(route(k, R::Migrating), Route::Source, "{k:?}");
            assert_eq!(route(k, R::CutOver), Route::Destination, "{k:?}");
        }
        assert_eq!(route(K::Produce, R::CuttingOver), Route::Hold);
        assert_eq!(route(K::OffsetCommit, R::CuttingOver), Route::Hold);
        assert_eq!(route(K::Group, R::CuttingOver), Route::Source, "members stay in their group at the source");
        assert_eq!(route(K::Transaction, R::CuttingOver), Route::Source, "open transactions end at the source");
    }

    #[test]
    fn topic_records_keep_or_lack_a_migration() {
        let old = r#"{"mirror":"m","topic":"t","desired":"MIRRORING","updated_ms":1}"#;
        let t: crate::mirror::model::MirrorTopic = serde_json::from_str(old).unwrap();
        assert_eq!(t.migration, None, "a record written before issue 36 has none");
        assert!(!serde_json::to_string(&t).unwrap().contains("migration"), "and writes none");
        let mut t = t;
        t.migration = Some(apply("t", None, &RoutingCommand::StartMigration, 9).unwrap());
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.contains(r#""migration":{"routing":"MIGRATING","since_ms":9}"#), "{json}");
        assert_eq!(serde_json::from_str::<crate::mirror::model::MirrorTopic>(&json).unwrap(), t);
    }

    #[test]
    fn stored_form() {
        let m = Migration {
            routing: R::CuttingOver,
            since_ms: 7,
            cutover_id: Some("c1".into()),
            failover_started_ms: None,
            forced_past: vec![],
        };
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, r#"{"routing":"CUTTING_OVER","since_ms":7,"cutover_id":"c1"}"#);
        assert_eq!(serde_json::from_str::<Migration>(&json).unwrap(), m);
        assert_eq!(R::CutOver.to_string(), "CUT_OVER");
    }
}
