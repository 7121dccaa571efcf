//! Unit tests of the cluster client (no broker).

use super::*;

#[test]
fn kafka_error_names_are_kafkas() {
    assert_eq!(KafkaErrorCode(6).name(), "NOT_LEADER_OR_FOLLOWER");
    assert_eq!(KafkaErrorCode(100).name(), "UNKNOWN_TOPIC_ID");
    assert_eq!(KafkaErrorCode(36).to_string(), "TOPIC_ALREADY_EXISTS (36)");
    assert_eq!(KafkaErrorCode(0).name(), "NONE");
    assert_eq!(KafkaErrorCode(-1).name(), "UNKNOWN_SERVER_ERROR");
    assert_eq!(KafkaErrorCode(31000).name(), "UNKNOWN_ERROR_CODE");
}

#[test]
fn refresh_and_retry_classification() {
    for code in [6, 74, 100, 3] {
        assert!(KafkaErrorCode(code).needs_metadata_refresh(), "{code}");
    }
    assert!(!KafkaErrorCode(1).needs_metadata_refresh());
    let timed_out = ClusterError::Kafka {
        api: ApiKey::Produce,
        broker: "b:1".into(),
        resource: "t-0".into(),
        error: KafkaErrorCode(7),
        message: None,
    };
    assert!(timed_out.is_retriable() && timed_out.is_ambiguous());
    let not_leader = ClusterError::Kafka {
        api: ApiKey::Produce,
        broker: "b:1".into(),
        resource: "t-0".into(),
        error: KafkaErrorCode(6),
        message: None,
    };
    assert!(not_leader.is_retriable() && !not_leader.is_ambiguous());
    assert!(not_leader.to_string().contains("NOT_LEADER_OR_FOLLOWER"), "{not_leader}");
    assert!(not_leader.to_string().contains("b:1"), "{not_leader}");
}

#[test]
fn uuid_round_trip_without_naming_the_type() {
    let id = KafkaUuid([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    let mut t = FetchTopic::default();
    t.topic_id = to_proto_uuid(id);
    assert_eq!(KafkaUuid(*t.topic_id.as_bytes()), id);
}
