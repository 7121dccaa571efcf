use bytes::BytesMut;
use kafka_protocol::records::RecordBatchDecoder;

use super::records::{decode_value, split_batches};
use super::*;
use crate::mirror::model::{DesiredState, OffsetSegment};
use crate::wire::mirror::MirrorPartitionState;

fn partition_record() -> PartitionStateRecord {
    PartitionStateRecord {
        mirror: "m1".into(),
        topic: "orders".into(),
        partition: 3,
        state: MirrorPartitionState::Mirroring,
        state_epoch: 2,
        last_mirrored_offset: 41,
        error_message: None,
        retry_attempt: 0,
        retryable: false,
        previous_state: None,
        segments: vec![OffsetSegment { source_start: 0, destination_start: 0 }],
        source_epochs: Vec::new(),
        producer_id: Some(7),
        producer_epoch: Some(0),
        destination_topic_id: None,
        copy_start: None,
        placeholder_end: None,
        transactions_used: false,
        owner_generation: None,
        aligned_generation: None,
        updated_ms: 1,
    }
}

#[test]
fn keys_are_deterministic_bytes_and_round_trip() {
    let k = StateKey::Partition { mirror: "m1".into(), topic: "orders".into(), partition: 3 };
    assert_eq!(
        String::from_utf8(k.encode()).unwrap(),
        r#"{"v":1,"type":"partition","mirror":"m1","topic":"orders","partition":3}"#
    );
    assert_eq!(
        String::from_utf8(StateKey::Mirror { name: "m1".into() }.encode()).unwrap(),
        r#"{"v":1,"type":"mirror","name":"m1"}"#
    );
    for k in
        [StateKey::Mirror { name: "m".into() }, StateKey::Topic { mirror: "m".into(), topic: "t".into() }, k.clone()]
    {
        assert_eq!(StateKey::decode(&k.encode()).unwrap(), k);
    }
}

#[test]
fn unknown_version_or_type_is_refused() {
    let e = StateKey::decode(br#"{"v":2,"type":"mirror","name":"m"}"#).unwrap_err();
    assert!(e.contains("v=2"), "{e}");
    let e = StateKey::decode(br#"{"v":1,"type":"group","name":"m"}"#).unwrap_err();
    assert!(e.contains("group"), "{e}");
    let e = StateKey::decode(br#"{"type":"mirror","name":"m"}"#).unwrap_err();
    assert!(e.contains("no `v`"), "{e}");
    let e = decode_value::<MirrorTopic>(br#"{"v":1,"type":"mirror"}"#, "topic").unwrap_err();
    assert!(e.contains("under a `topic` key"), "{e}");
}

#[test]
fn values_round_trip_and_model_fields_do_not_collide_with_the_envelope() {
    let p = partition_record();
    let bytes = encode_value("partition", &p).unwrap();
    assert!(bytes.starts_with(br#"{"v":1,"type":"partition","mirror":"m1""#));
    assert_eq!(decode_value::<PartitionStateRecord>(&bytes, "partition").unwrap(), p);
    let t = MirrorTopic {
        mirror: "m1".into(),
        topic: "orders".into(),
        source_topic_id: None,
        desired: DesiredState::Paused,
        partitions: Some(4),
        source_log_append_time: false,
        start_position: crate::mirror::model::StartPosition::Latest,
        migration: None,
        updated_ms: 5,
    };
    let m = MirrorDefinition {
        name: "m1".into(),
        configs: BTreeMap::from([("bootstrap.servers".into(), "src:9092".into())]),
        created_ms: 1,
        source_cluster_id: None,
        include_patterns: vec![],
        exclude_patterns: vec![],
        start_position: crate::mirror::model::StartPosition::Timestamp(7),
    };
    for body in
        [serde_json::to_value(&p).unwrap(), serde_json::to_value(&t).unwrap(), serde_json::to_value(&m).unwrap()]
    {
        let obj = body.as_object().unwrap();
        assert!(!obj.contains_key("v") && !obj.contains_key("type"), "{body}");
    }
}

#[test]
fn placement_is_crc32c_mod_partitions() {
    assert_eq!(partition_for("m1", 50), (crc32c::crc32c(b"m1") % 50) as i32);
    assert_eq!(partition_for("anything", 1), 0);
}

#[test]
fn batches_are_split_and_a_partial_tail_is_left_out() {
    let a = encode_batch(b"k1".to_vec(), Some(b"v".to_vec())).unwrap();
    let b = encode_batch(b"k2".to_vec(), None).unwrap();
    let mut all = BytesMut::new();
    all.extend_from_slice(&a);
    all.extend_from_slice(&b);
    all.extend_from_slice(&a[..20]);
    let batches = split_batches(all.freeze()).unwrap();
    assert_eq!(batches.len(), 2);
    assert_eq!((batches[0].base_offset, batches[0].last_offset), (0, 0));
    let mut bytes = batches[1].bytes.clone();
    let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
    assert_eq!(set.records[0].key.as_deref(), Some(&b"k2"[..]));
    assert_eq!(set.records[0].value, None);
}
