//! A validating walk over a Produce response body (api key 0, versions 3–13), in the manner of
//! [`super::fetch_scan`]: it reads the body field by field, checks every length and count
//! against the bytes that remain, requires the walk to end exactly at the end of the body, and
//! answers the one question the proxy has of every Produce response from v10 on: whether the
//! KIP-951 `node_endpoints` (top-level tagged field 0) are present and non-empty, so that a
//! response without them goes back to the client as the broker's own bytes instead of being
//! decoded and dropped. It allocates nothing, copies nothing, never panics.
//!
//! The walk is at least as strict as kafka-protocol's `ProduceResponse` decoder: a body it
//! accepts decodes, with the same answer (the tests check this on mutated bodies), and a
//! known tagged field (`current_leader`, `node_endpoints`) must fill exactly the size its tag
//! announces. Field order: Apache Kafka's `ProduceResponse.json` (kafka-protocol's generated
//! `produce_response.rs`).

use super::mirror::WireError;
use super::response_cursor::{fixed_tagged_struct, node_endpoints, Cursor};
use super::scan::ScanError;

/// Lowest Produce response version walked (the proxy refuses Produce below v3, as Kafka 4.0).
pub const MIN_VERSION: i16 = 3;
/// Highest Produce response version walked (kafka-protocol 0.18's maximum).
pub const MAX_VERSION: i16 = 13;
/// First version with KIP-951's `node_endpoints` and `current_leader`.
pub const FIRST_NODE_ENDPOINTS_VERSION: i16 = 10;

const NAME: &str = "ProduceResponse";

/// Walks a Produce response body (after the response header) of `version` 3–13; whether its
/// `node_endpoints` (KIP-951, v10+) hold at least one broker. Topic names and ids, partition
/// results, record errors and error messages are walked and checked, never copied.
///
/// # Errors
/// [`ScanError::UnsupportedVersion`] outside v3–13; any other [`ScanError`] for a truncated or
/// malformed body: a length or count beyond the bytes left, a negative length, invalid UTF-8,
/// a null topic name or array, a tag number above `i32::MAX`, a known tagged field whose value
/// does not fill its announced size, tag 0 below v10, bytes after the body. A caller that gets
/// an error decodes the body instead (and gets the decoder's verdict).
pub fn has_node_endpoints(body: &[u8], version: i16) -> Result<bool, ScanError> {
    if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
        return Err(ScanError::UnsupportedVersion { api: NAME, version });
    }
    let flexible = version >= 9;
    let by_id = version >= 13;
    let kip_951 = version >= FIRST_NODE_ENDPOINTS_VERSION;
    let mut c = Cursor::new(body, flexible);
    let (min_str, min_array, min_tags) = if flexible { (1, 1, 1) } else { (2, 4, 0) };
    // index, error_code, base_offset, log_append_time_ms, log_start_offset (v5+)
    let fixed = 4 + 2 + 8 + 8 + if version >= 5 { 8 } else { 0 };
    // record_errors, error_message (v8+)
    let errors_min = if version >= 8 { min_array + min_str } else { 0 };
    let partition_min = fixed + errors_min + min_tags;
    let topic_min = if by_id { 16 } else { min_str } + min_array + min_tags;
    let record_error_min = 4 + min_str + min_tags;

    let topics = c.array_len(topic_min, "responses")?;
    for _ in 0..topics {
        if by_id {
            c.skip(16, "responses.topic_id")?;
        } else {
            c.str("responses.name")?.ok_or(WireError::UnexpectedNull { what: "responses.name" })?;
        }
        let partitions = c.array_len(partition_min, "responses.partition_responses")?;
        for _ in 0..partitions {
            c.skip(fixed, "partition_responses.index..log_start_offset")?;
            if version >= 8 {
                let errors = c.array_len(record_error_min, "partition_responses.record_errors")?;
                for _ in 0..errors {
                    c.skip(4, "record_errors.batch_index")?;
                    c.str("record_errors.batch_index_error_message")?;
                    c.opaque_tagged_fields("record_errors")?;
                }
                c.str("partition_responses.error_message")?;
            }
            c.tagged_fields("partition_responses", |tag, value| match tag {
                // current_leader: leader_id, leader_epoch
                0 if kip_951 => fixed_tagged_struct(value, 4 + 4, "partition_responses.current_leader"),
                // kafka-protocol refuses tag 0 before `current_leader` exists.
                0 => Err(WireError::InvalidTag { what: "partition_responses", tag }.into()),
                _ => Ok(()),
            })?;
        }
        c.opaque_tagged_fields("responses")?;
    }
    c.skip(4, "throttle_time_ms")?;
    let mut endpoints = false;
    c.tagged_fields(NAME, |tag, value| {
        if tag != 0 {
            return Ok(());
        }
        if !kip_951 {
            return Err(WireError::InvalidTag { what: NAME, tag }.into());
        }
        // The last tag 0 wins, as in kafka-protocol's decoder (Kafka writes each tag once).
        endpoints = node_endpoints(value)?;
        Ok(())
    })?;
    c.end(NAME)?;
    Ok(endpoints)
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::produce_response::{
        BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::{BrokerId, ProduceResponse, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    use super::*;

    /// A response using every field of `version`: two topics, record errors with and without
    /// a message, error messages, `current_leader` and an unknown partition tag (v10+), node
    /// endpoints (when asked, v10+) and an unknown top-level tag.
    fn rich(version: i16, endpoints: bool) -> ProduceResponse {
        let partition = |index: i32, error_code: i16| {
            let mut p = PartitionProduceResponse::default()
                .with_index(index)
                .with_error_code(error_code)
                .with_base_offset(1_000 + i64::from(index))
                .with_log_append_time_ms(-1)
                .with_log_start_offset(7);
            if version >= 8 && error_code != 0 {
                p = p
                    .with_record_errors(vec![
                        BatchIndexAndErrorMessage::default().with_batch_index(0),
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(3)
                            .with_batch_index_error_message(Some(StrBytes::from_static_str("bad record"))),
                    ])
                    .with_error_message(Some(StrBytes::from_static_str("batch refused")));
            }
            if version >= 10 && error_code == 6 {
                p.current_leader = LeaderIdAndEpoch::default().with_leader_id(BrokerId(2)).with_leader_epoch(9);
                p.unknown_tagged_fields.insert(5, Bytes::from_static(b"xyz"));
            }
            p
        };
        let topic = |name: &'static str, id: u8, partitions: Vec<PartitionProduceResponse>| {
            let t = TopicProduceResponse::default().with_partition_responses(partitions);
            if version >= 13 {
                t.with_topic_id(uuid::Uuid::from_bytes([id; 16]))
            } else {
                t.with_name(TopicName(StrBytes::from_static_str(name)))
            }
        };
        let mut resp = ProduceResponse::default()
            .with_responses(vec![
                topic("orders", 1, vec![partition(0, 0), partition(1, 6)]),
                topic("clicks", 2, vec![partition(4, 87)]),
            ])
            .with_throttle_time_ms(3);
        if version >= 10 && endpoints {
            resp.node_endpoints = vec![NodeEndpoint::default()
                .with_node_id(BrokerId(2))
                .with_host(StrBytes::from_static_str("broker-2"))
                .with_port(9092)
                .with_rack(Some(StrBytes::from_static_str("r1")))];
        }
        if version >= 9 {
            resp.unknown_tagged_fields.insert(7, Bytes::from_static(b"ab"));
        }
        resp
    }

    fn encode(resp: &ProduceResponse, version: i16) -> Bytes {
        let mut out = BytesMut::new();
        resp.encode(&mut out, version).unwrap();
        out.freeze()
    }

    /// Whatever the walk accepts, kafka-protocol decodes, with the same answer.
    fn assert_agrees(body: &[u8], version: i16) {
        if let Ok(endpoints) = has_node_endpoints(body, version) {
            let resp = ProduceResponse::decode(&mut Bytes::copy_from_slice(body), version)
                .unwrap_or_else(|e| panic!("v{version}: walked but does not decode: {e}"));
            assert_eq!(endpoints, !resp.node_endpoints.is_empty(), "v{version}");
        }
    }

    #[test]
    fn agrees_with_kafka_protocol_at_every_version() {
        for version in MIN_VERSION..=MAX_VERSION {
            for endpoints in [false, true] {
                let body = encode(&rich(version, endpoints), version);
                let got = has_node_endpoints(&body, version).unwrap_or_else(|e| panic!("v{version}: {e}"));
                assert_eq!(got, endpoints && version >= FIRST_NODE_ENDPOINTS_VERSION, "v{version}");
                let empty = encode(&ProduceResponse::default(), version);
                assert_eq!(has_node_endpoints(&empty, version), Ok(false), "v{version}");
            }
        }
    }

    /// A Produce v13 response laid out byte by byte from the schema, as a broker answers a
    /// producer's successful append (one topic by id, one partition, no errors): walked, no
    /// node endpoints; one byte short or one byte over is refused.
    #[test]
    fn a_hand_laid_v13_response_walks() {
        let mut body = vec![2]; // one topic
        body.extend_from_slice(&[0x5a; 16]); // topic_id
        body.push(2); // one partition
        body.extend_from_slice(&0i32.to_be_bytes()); // index
        body.extend_from_slice(&0i16.to_be_bytes()); // error_code
        body.extend_from_slice(&41i64.to_be_bytes()); // base_offset
        body.extend_from_slice(&(-1i64).to_be_bytes()); // log_append_time_ms
        body.extend_from_slice(&0i64.to_be_bytes()); // log_start_offset
        body.push(1); // record_errors: empty
        body.push(0); // error_message: null
        body.push(0); // partition tags
        body.push(0); // topic tags
        body.extend_from_slice(&0i32.to_be_bytes()); // throttle_time_ms
        body.push(0); // top-level tags
        assert_eq!(has_node_endpoints(&body, 13), Ok(false));
        assert_agrees(&body, 13);
        assert!(has_node_endpoints(&body[..body.len() - 1], 13).is_err(), "truncated");
        let mut longer = body.clone();
        longer.push(0);
        assert!(has_node_endpoints(&longer, 13).is_err(), "trailing bytes");
    }

    #[test]
    fn versions_outside_3_to_13_are_refused() {
        let body = encode(&ProduceResponse::default(), 3);
        for version in [-1, 0, 2, 14] {
            assert_eq!(
                has_node_endpoints(&body, version),
                Err(ScanError::UnsupportedVersion { api: NAME, version }),
                "v{version}"
            );
        }
    }

    /// Every truncation and every single-byte change of a rich body: either refused, or
    /// decoded by kafka-protocol with the same answer.
    #[test]
    fn truncated_and_mutated_bodies() {
        for version in MIN_VERSION..=MAX_VERSION {
            let body = encode(&rich(version, true), version).to_vec();
            for len in 0..body.len() {
                assert!(has_node_endpoints(&body[..len], version).is_err(), "v{version}: prefix of {len} accepted");
            }
            for i in 0..body.len() {
                for v in [0u8, 1, 2, 0x7f, 0x80, 0xff, body[i].wrapping_add(1), body[i].wrapping_sub(1)] {
                    let mut m = body.clone();
                    m[i] = v;
                    assert_agrees(&m, version);
                }
            }
        }
    }

    /// `current_leader` and `node_endpoints` must fill exactly the size their tags announce
    /// (the decoder would otherwise read the next field from the wrong place), and tag 0 is
    /// refused before v10, where the decoder refuses it too.
    #[test]
    fn known_tagged_fields_must_fill_their_size() {
        // v10, no topics, throttle, one top-level tag 0 of size 1 holding an empty array ...
        let mut body = vec![1, 0, 0, 0, 0, 1, 0, 1, 1];
        assert_eq!(has_node_endpoints(&body, 10), Ok(false));
        assert_agrees(&body, 10);
        // ... announced as 2 bytes with a stray byte inside it.
        body = vec![1, 0, 0, 0, 0, 1, 0, 2, 1, 0];
        assert!(has_node_endpoints(&body, 10).is_err());
        // tag 0 at v9: refused by both.
        body = vec![1, 0, 0, 0, 0, 1, 0, 1, 1];
        assert!(has_node_endpoints(&body, 9).is_err());
        assert!(ProduceResponse::decode(&mut Bytes::from(body), 9).is_err());
    }

    #[test]
    fn huge_counts_are_errors() {
        // v13: `responses` as a compact array of 2^32 - 2 entries in a few bytes.
        let body = [0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0];
        let err = has_node_endpoints(&body, 13).unwrap_err();
        assert!(err.to_string().contains("exceeds"), "{err}");
        // v8: `responses` as an array of i32::MAX entries.
        let mut body = i32::MAX.to_be_bytes().to_vec();
        body.extend_from_slice(&[0, 0, 0, 0]);
        assert!(has_node_endpoints(&body, 8).unwrap_err().to_string().contains("exceeds"));
    }
}
