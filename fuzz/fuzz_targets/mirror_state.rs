//! `__mirror_state` records as mirrorgate reads them back at startup
//! (src/mirror/store.rs `apply_fetched`: batch split, kafka-protocol's batch decoder,
//! `StateKey::decode`, the JSON values of src/mirror/model.rs).
//!
//! Input: byte 0 = mode. Even: bytes 1 and 2 are the state topic's partition count and the
//! partition read, the rest is a Fetch answer's raw `records` bytes (real batches from the
//! capture). Odd: the rest is `key 0xFF value` (no 0xFF: a tombstone for `key`), wrapped into
//! one valid batch so the fuzzer reaches the JSON decoders past the CRC.
//! Invariants beyond "no panic": a decoded key encodes to bytes that decode to the same key;
//! an applied record is in the snapshot under its key (or gone, for a tombstone); loading
//! never moves backwards.
#![no_main]

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use libfuzzer_sys::fuzz_target;
use mirrorgate::mirror::store::{apply_fetched, StateKey, StateSnapshot};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    if data[0] & 1 == 0 {
        let partitions = i32::from(data[1].max(1));
        let partition = i32::from(data[2]) % partitions;
        let mut snap = StateSnapshot::default();
        let records = Bytes::copy_from_slice(&data[3..]);
        if let Ok(Some(next)) = apply_fetched(&mut snap, partitions, partition, 0, records) {
            assert!(next >= 0, "next offset {next} below the start offset 0");
        }
        for name in snap.mirrors.keys() {
            key_round_trip(&StateKey::Mirror { name: name.clone() });
        }
        return;
    }
    let body = &data[1..];
    let (key, value) = match body.iter().position(|b| *b == 0xFF) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let decoded = StateKey::decode(key);
    if let Ok(k) = &decoded {
        key_round_trip(k);
    }
    let mut snap = StateSnapshot::default();
    let applied = apply_fetched(&mut snap, 1, 0, 0, batch(key, value)).map(|n| n.expect("one complete batch"));
    match (&decoded, applied) {
        (Ok(k), Ok(next)) => {
            assert_eq!(next, 1);
            let present = match k {
                StateKey::Mirror { name } => snap.mirrors.contains_key(name),
                StateKey::Topic { mirror, topic } => snap.topics.contains_key(&(mirror.clone(), topic.clone())),
                StateKey::Partition { mirror, topic, partition } => {
                    snap.partitions.contains_key(&(mirror.clone(), topic.clone(), *partition))
                }
            };
            assert_eq!(present, value.is_some(), "record not applied as written");
        }
        (Err(_), Ok(_)) => panic!("a record whose key does not decode was applied"),
        (_, Err(_)) => {}
    }
});

fn key_round_trip(k: &StateKey) {
    let bytes = k.encode();
    assert_eq!(&StateKey::decode(&bytes).expect("an encoded key decodes"), k);
}

/// One uncompressed v2 batch at offset 0 holding `key`/`value` (as the store writes them).
fn batch(key: &[u8], value: Option<&[u8]>) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 0,
        key: Some(Bytes::copy_from_slice(key)),
        value: value.map(Bytes::copy_from_slice),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&record],
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .expect("a one-record batch encodes");
    buf.freeze()
}
