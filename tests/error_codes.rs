//! mirrorgate's error codes against Kafka's own table, read from the newest kafka-clients jar
//! (`org.apache.kafka.common.protocol.Errors` via `tests/java/ErrorCodes.java`, no broker).
//! KIP-1279's provisional codes (134–146) may be taken by Kafka for other errors; this test
//! names exactly which are, so that a new Kafka release that takes more fails it.

mod support;

use std::collections::BTreeMap;

use mirrorgate::mirror::config_rpc::INVALID_REQUEST;
use mirrorgate::proxy::mirror_gate::{POLICY_VIOLATION, TOPIC_AUTHORIZATION_FAILED};
use mirrorgate::wire::mirror::{MirrorErrorCode, KAFKA_ALLOCATED};

use support::{java_program, ok};

/// The newest Kafka release in the jar cache.
const NEWEST: &str = "4.4.0";

/// `code → (name, retriable)` from the kafka-clients jar of `version`.
fn kafka_errors(version: &str) -> BTreeMap<i16, (String, bool)> {
    let out = ok(java_program(version, "ErrorCodes.java", &[]), "ErrorCodes.java");
    let table: BTreeMap<i16, (String, bool)> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let code = f.next()?.parse().ok()?;
            let name = f.next()?.to_string();
            Some((code, (name, f.next()? == "retriable")))
        })
        .collect();
    assert!(table.len() > 100, "Errors enum of {version} not read: {out}");
    table
}

#[test]
fn kip_codes_that_the_newest_kafka_allocates_are_exactly_the_documented_ones() {
    let kafka = kafka_errors(NEWEST);
    let collisions: Vec<(i16, &str)> = MirrorErrorCode::ALL
        .iter()
        .filter_map(|e| kafka.get(&e.code()).map(|(name, _)| (e.code(), name.as_str())))
        .collect();
    assert_eq!(
        collisions,
        KAFKA_ALLOCATED.to_vec(),
        "Kafka {NEWEST} allocates these KIP-1279 codes; update KAFKA_ALLOCATED and docs/protocol.md"
    );
    // The code the KIP meant for refused writes is one of them: it must never reach a client
    // that does not speak the mirror RPCs.
    assert_eq!(kafka[&MirrorErrorCode::ReadOnlyTopic.code()].0, "GROUP_DELETION_FAILED");
}

#[test]
fn stock_codes_mirrorgate_sends_outside_the_mirror_rpcs_mean_what_it_assumes() {
    let kafka = kafka_errors(NEWEST);
    // Produce, DeleteRecords, CreatePartitions, DeleteTopics, (Incremental)AlterConfigs on a
    // mirror topic: a final refusal in every client.
    assert_eq!(kafka[&POLICY_VIOLATION], ("POLICY_VIOLATION".to_string(), false));
    // AddPartitionsToTxn naming a mirror topic: the client aborts the transaction.
    assert_eq!(kafka[&TOPIC_AUTHORIZATION_FAILED], ("TOPIC_AUTHORIZATION_FAILED".to_string(), false));
    assert_eq!(kafka[&INVALID_REQUEST], ("INVALID_REQUEST".to_string(), false));
    assert!(MirrorErrorCode::from_code(POLICY_VIOLATION).is_none());
}
