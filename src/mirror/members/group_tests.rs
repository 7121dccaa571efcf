use super::*;

#[test]
fn group_errors_map_to_kafkas_recovery_steps() {
    assert!(matches!(classify_code(REBALANCE_IN_PROGRESS), Failure::Rejoin));
    assert!(matches!(classify_code(UNKNOWN_MEMBER_ID), Failure::Reset));
    assert!(matches!(classify_code(ILLEGAL_GENERATION), Failure::Reset));
    for c in [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS] {
        assert!(matches!(classify_code(c), Failure::Coordinator(_)), "{c}");
    }
    // INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL, GROUP_AUTHORIZATION_FAILED.
    for c in [26, 23, 30] {
        match classify_code(c) {
            Failure::Other(m) => assert!(m.contains(&format!("({c})")), "{m}"),
            _ => panic!("{c} is neither a rejoin nor a coordinator error"),
        }
    }
    let transport = ClusterError::UnknownBroker { node_id: 3 };
    assert!(matches!(classify_err(&transport), Failure::Coordinator(_)));
}

#[test]
fn self_fencing_comes_one_heartbeat_before_the_session_expires() {
    let s = MembershipSettings {
        group_id: "g".into(),
        instance: "i".into(),
        session_timeout: Duration::from_millis(10_000),
        heartbeat_interval: Duration::from_millis(3_000),
        rebalance_timeout: Duration::from_millis(30_000),
    };
    assert_eq!(s.self_fence_after(), Duration::from_millis(7_000));
    assert!(Assignment::empty().is_empty());
    assert_eq!(Assignment::default().generation, -1);
}
