//! Unit tests of [`super`] (`state_guard`) (kept apart to keep the module short).
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::RequestHeader;

use super::*;

const ID: [u8; 16] = [7; 16];
const PEER: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 40000));

fn request<R: Encodable>(key: ApiKey, v: i16, body: &R) -> ParsedRequest {
    let mut out = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(v)
        .with_correlation_id(5)
        .with_client_id(Some(StrBytes::from_static_str("t")))
        .encode(&mut out, key.request_header_version(v))
        .unwrap();
    body.encode(&mut out, v).unwrap();
    let frame = out.freeze();
    ParsedRequest::parse(frame).unwrap()
}

fn fetch_topic(name: &str, id: [u8; 16]) -> FetchTopic {
    FetchTopic::default()
        .with_topic(TopicName(StrBytes::from_string(name.into())))
        .with_topic_id(Uuid::from_bytes(id))
        .with_partitions(vec![FetchPartition::default().with_partition(0), FetchPartition::default().with_partition(1)])
}

#[test]
fn fetch_by_id_loses_the_state_topic_and_its_answer_gets_29() {
    let guard = StateTopicGuard::new("__mirror_state");
    guard.learn(&ID, "__mirror_state");
    guard.learn(&[9; 16], "other");
    assert!(!guard.is_state_topic_id(&[9; 16]));
    let req = FetchRequest::default().with_topics(vec![fetch_topic("", ID), fetch_topic("", [3; 16])]);
    let parsed = request(ApiKey::Fetch, 16, &req);
    let Guarded::Forward { frame: sent, merge } = guard.check(&parsed, PEER).unwrap() else { panic!("passed") };
    let body = sent.slice(header::request_header_len(&sent, 2).unwrap()..);
    let forwarded = FetchRequest::decode(&mut body.clone(), 16).unwrap();
    assert_eq!(forwarded.topics.len(), 1);
    assert_eq!(forwarded.topics[0].topic_id, Uuid::from_bytes([3; 16]));
    // The broker's answer for the other topic, then the merge.
    let mut answer = BytesMut::new();
    header::put_response_header(&mut answer, 5, 1);
    FetchResponse::default().encode(&mut answer, 16).unwrap();
    let merged = merge.apply(&answer.freeze()).unwrap();
    let resp =
        FetchResponse::decode(&mut merged.slice(header::response_header_len(&merged, 1).unwrap()..), 16).unwrap();
    assert_eq!(resp.responses.len(), 1);
    assert_eq!(resp.responses[0].topic_id, Uuid::from_bytes(ID));
    let codes: Vec<(i32, i16)> =
        resp.responses[0].partitions.iter().map(|p| (p.partition_index, p.error_code)).collect();
    assert_eq!(codes, vec![(0, 29), (1, 29)]);
}

#[test]
fn requests_not_naming_the_state_topic_pass_untouched() {
    let guard = StateTopicGuard::new("__mirror_state");
    guard.learn(&ID, "__mirror_state");
    // A longer name that starts with the state topic's passes the byte search, not the check.
    let req = FetchRequest::default().with_topics(vec![fetch_topic("__mirror_state_x", [0; 16])]);
    let parsed = request(ApiKey::Fetch, 12, &req);
    assert!(matches!(guard.check(&parsed, PEER).unwrap(), Guarded::Pass));
    let req = FetchRequest::default().with_topics(vec![fetch_topic("orders", [0; 16])]);
    let parsed = request(ApiKey::Fetch, 12, &req);
    assert!(matches!(guard.check(&parsed, PEER).unwrap(), Guarded::Pass));
    // By name at v12.
    let req = FetchRequest::default().with_topics(vec![fetch_topic("__mirror_state", [0; 16])]);
    let parsed = request(ApiKey::Fetch, 12, &req);
    assert!(matches!(guard.check(&parsed, PEER).unwrap(), Guarded::Forward { .. }));
}

#[test]
fn metadata_answers_never_list_the_state_topic() {
    let guard = StateTopicGuard::new("__mirror_state");
    let mut resp = MetadataResponse::default().with_topics(vec![
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("__mirror_state"))))
            .with_topic_id(Uuid::from_bytes(ID)),
        MetadataResponseTopic::default().with_name(Some(TopicName(StrBytes::from_static_str("orders")))),
    ]);
    assert!(guard.hide_in_metadata(&mut resp));
    assert_eq!(resp.topics.len(), 1);
    assert!(guard.is_state_topic_id(&ID), "the id is learned before the entry is dropped");
}

/// ApiVersions keeps the broker's minimums for these APIs (an old client that never
/// names the state topic keeps working); one that names it at a version kafka-protocol
/// cannot decode is refused, never forwarded.
#[test]
fn state_topic_at_an_undecodable_version_fails_closed() {
    let guard = StateTopicGuard::new("__mirror_state");
    let body = ListOffsetsRequest::default()
        .with_topics(vec![kafka_protocol::messages::list_offsets_request::ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("__mirror_state")))]);
    let frame = request(ApiKey::ListOffsets, 1, &body).into_frame();
    // The same bytes claiming v0 (below kafka-protocol's baseline).
    let mut raw = BytesMut::from(&frame[..]);
    raw[2..4].copy_from_slice(&0i16.to_be_bytes());
    let raw = raw.freeze();
    assert!(guard.check(&ParsedRequest::parse(raw).unwrap(), PEER).is_err());
    let (min, _) = super::super::versions::intercepted_range(ApiKey::ListOffsets as i16).unwrap();
    assert_eq!(min, 0, "ApiVersions keeps the broker's minimum");
}

/// Answers `sent` as a broker would with an empty FetchResponse for session
/// `session_id`, through `merge`; returns the (topic id, partition, error) entries.
fn answer_fetch(guarded: Guarded, session_id: i32) -> Vec<(Uuid, i32, i16)> {
    let Guarded::Forward { merge, .. } = guarded else { panic!("passed") };
    let mut answer = BytesMut::new();
    header::put_response_header(&mut answer, 5, 1);
    FetchResponse::default().with_session_id(session_id).encode(&mut answer, 16).unwrap();
    let merged = merge.apply(&answer.freeze()).unwrap();
    let resp =
        FetchResponse::decode(&mut merged.slice(header::response_header_len(&merged, 1).unwrap()..), 16).unwrap();
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p.partition_index, p.error_code)))
        .collect()
}

/// KIP-227: the state topic's partitions are answered with 29 in every response of the
/// session that listed them, until forgotten or the session closes.
#[test]
fn fetch_sessions_keep_answering_29() {
    use kafka_protocol::messages::fetch_request::ForgottenTopic;
    let guard = StateTopicGuard::new("__mirror_state");
    guard.learn(&ID, "__mirror_state");
    let state = Uuid::from_bytes(ID);
    let other = [3; 16];
    let fetch = |sid: i32, epoch: i32, topics: Vec<FetchTopic>, forgotten: Vec<ForgottenTopic>| {
        let req = FetchRequest::default()
            .with_session_id(sid)
            .with_session_epoch(epoch)
            .with_topics(topics)
            .with_forgotten_topics_data(forgotten);
        request(ApiKey::Fetch, 16, &req)
    };
    // Full request opening a session: the broker answers with session id 77.
    let p = fetch(0, 0, vec![fetch_topic("", ID), fetch_topic("", other)], vec![]);
    assert_eq!(answer_fetch(guard.check(&p, PEER).unwrap(), 77), vec![(state, 0, 29), (state, 1, 29)]);
    // Incremental requests of session 77 that do not mention the state topic.
    let p = fetch(77, 1, vec![], vec![]);
    assert_eq!(answer_fetch(guard.check(&p, PEER).unwrap(), 77), vec![(state, 0, 29), (state, 1, 29)]);
    // Another connection, same session id: nothing remembered there.
    let p = fetch(77, 1, vec![], vec![]);
    let elsewhere: SocketAddr = "127.0.0.1:40001".parse().unwrap();
    assert!(matches!(guard.check(&p, elsewhere).unwrap(), Guarded::Pass));
    // The client forgets partition 0.
    let forget = ForgottenTopic::default().with_topic_id(state).with_partitions(vec![0]);
    let p = fetch(77, 2, vec![], vec![forget]);
    let guarded = guard.check(&p, PEER).unwrap();
    let Guarded::Forward { frame: sent, .. } = &guarded else { panic!("passed") };
    let forwarded = FetchRequest::decode(&mut sent.slice(header::request_header_len(sent, 2).unwrap()..), 16).unwrap();
    assert!(forwarded.forgotten_topics_data.is_empty(), "the broker never knew the state topic");
    assert_eq!(answer_fetch(guarded, 77), vec![(state, 1, 29)]);
    // Closing the session ends it.
    let p = fetch(77, -1, vec![], vec![]);
    assert!(matches!(guard.check(&p, PEER).unwrap(), Guarded::Pass));
    let p = fetch(77, 3, vec![], vec![]);
    assert!(matches!(guard.check(&p, PEER).unwrap(), Guarded::Pass));
}

#[test]
fn describe_cursor_moves_past_the_state_topic() {
    let s = "__mirror_state";
    assert_eq!(cursor_past(s, &[]).as_deref(), Some("__mirror_state-"));
    let req = ["b".to_string(), s.to_string(), "__mirror_state_x".into(), "zz".into()];
    assert_eq!(cursor_past(s, &req).as_deref(), Some("__mirror_state_x"));
    // Upper case sorts before `_`.
    assert_eq!(cursor_past(s, &["A".to_string(), s.to_string()]), None);
}
