//! Routing by api key: the decision for each client request, made from its header alone
//! (plus, for Produce, its `acks`). The default is to forward raw bytes to the same broker;
//! only the APIs listed in [`crate::proxy::versions::INTERCEPTED`] get a response action.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;

use crate::wire::header;
use crate::wire::request::ParsedRequest;

use super::versions;

/// What to do with a response from the destination before it goes back to the client.
#[derive(Debug, Clone)]
pub enum ResponseAction {
    /// Forward unchanged.
    Forward,
    /// Narrow ApiVersions ranges (KIP-511: decode in the v0 schema when `fallback`).
    ApiVersions {
        /// The client asked for a version above what mirrorgate decodes; the request was sent
        /// upstream as v0 and the answer goes back in the v0 schema with UNSUPPORTED_VERSION.
        fallback: bool,
    },
    /// Rewrite broker addresses in Metadata.
    Metadata,
    /// Rewrite the coordinator address(es).
    FindCoordinator,
    /// Rewrite broker addresses in DescribeCluster.
    DescribeCluster,
    /// Rewrite KIP-951 `node_endpoints` (Produce v10+).
    Produce,
    /// Rewrite KIP-951 `node_endpoints` (Fetch v16+) and replace placeholder batches with
    /// control batches in every partition (DESIGN §4.3).
    Fetch,
    /// Replace placeholder batches with control batches in every partition of a ShareFetch
    /// response (KIP-932), so a share consumer acknowledges those offsets as gaps.
    ShareFetch,
    /// Rewrite the `node_endpoints` of a ShareAcknowledge response (KIP-932; Kafka fills them
    /// with NOT_LEADER_OR_FOLLOWER) to mirrorgate's listeners.
    ShareAcknowledge,
    /// Add POLICY_VIOLATION results for the mirror partitions taken out of the request (and
    /// rewrite `node_endpoints`).
    ProduceMerge(std::sync::Arc<Vec<super::mirror_gate::Rejected>>),
    /// The inner action, then the offsets of shifted mirror partitions mapped destination →
    /// source ([`super::present`]).
    Present(Box<ResponseAction>),
    /// The inner action, then a rewrite adding the state topic's refusals
    /// ([`super::state_guard`]).
    Merged(Box<ResponseAction>, super::state_guard::ResponseMerge),
}

impl PartialEq for ResponseAction {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && match (self, other) {
                (Self::ApiVersions { fallback: a }, Self::ApiVersions { fallback: b }) => a == b,
                (Self::ProduceMerge(a), Self::ProduceMerge(b)) => std::sync::Arc::ptr_eq(a, b),
                (Self::Merged(a, _), Self::Merged(b, _)) => a == b,
                (Self::Present(a), Self::Present(b)) => a == b,
                _ => true,
            }
    }
}

/// The routing decision for one request.
#[derive(Debug)]
pub enum Decision {
    /// Send `frame` to the destination broker; expect a response unless `expect_response` is
    /// false (Produce with acks=0).
    Upstream {
        /// The request frame to send (the original bytes unless rewritten).
        frame: Bytes,
        /// Whether the broker will answer.
        expect_response: bool,
        /// What to do with the answer.
        action: ResponseAction,
    },
    /// Close the client connection with this reason.
    Close(String),
}

/// Decides what to do with one client request.
///
/// `supports_api` says whether the destination advertised the api key; requests for api keys
/// neither the destination nor mirrorgate knows close the connection (as a broker would)
/// with a logged reason.
///
/// Every Fetch (v4 and up) and ShareFetch response is decoded to replace placeholder batches
/// with control batches, whatever the topic: placeholders are recognised by content (a topic
/// id the proxy has not seen, a mirror deleted since). Fetch below v4 closes the connection:
/// a broker that still serves it (Kafka 3.x) down-converts placeholder batches into v0/v1
/// messages that a client would read as data (docs/broker-behaviour.md), and mirrorgate
/// advertises Fetch from v4 only ([`versions::intercepted_range`]), as Kafka 4.0 does (KIP-896).
pub fn decide(request: &ParsedRequest, supports_api: impl Fn(i16) -> bool) -> Decision {
    let prefix = request.header();
    let frame = request.frame().clone();
    let key = ApiKey::try_from(prefix.api_key).ok();
    if key.is_none() && !supports_api(prefix.api_key) {
        return Decision::Close(format!(
            "unknown api key {} (version {}, correlation id {})",
            prefix.api_key, prefix.api_version, prefix.correlation_id
        ));
    }
    let upstream = |frame, action| Decision::Upstream { frame, expect_response: true, action };
    match key {
        Some(ApiKey::ApiVersions) => {
            if prefix.api_version > versions::max_api_versions_version() {
                match api_versions_v0_request(request) {
                    Some(f) => upstream(f, ResponseAction::ApiVersions { fallback: true }),
                    None => Decision::Close("malformed ApiVersions request header".into()),
                }
            } else {
                upstream(frame, ResponseAction::ApiVersions { fallback: false })
            }
        }
        // After a v0 handshake the SASL tokens travel without Kafka request headers, which
        // the frame router cannot tell from requests; Kafka clients since 1.0 use v1.
        Some(ApiKey::SaslHandshake) if prefix.api_version == 0 => Decision::Close(
            "SaslHandshake v0 (unframed SASL tokens) is not supported through mirrorgate; use a client that sends SaslHandshake v1 (any Kafka client since 1.0)".into(),
        ),
        Some(ApiKey::Metadata) => upstream(frame, ResponseAction::Metadata),
        Some(ApiKey::FindCoordinator) => upstream(frame, ResponseAction::FindCoordinator),
        Some(ApiKey::DescribeCluster) => upstream(frame, ResponseAction::DescribeCluster),
        Some(ApiKey::Produce) => {
            let acks = produce_acks(request);
            match acks {
                Some(acks) => Decision::Upstream {
                    frame,
                    expect_response: acks != 0,
                    action: if prefix.api_version >= 10 { ResponseAction::Produce } else { ResponseAction::Forward },
                },
                None => Decision::Close("malformed Produce request (cannot read acks)".into()),
            }
        }
        Some(ApiKey::Fetch) if prefix.api_version < 4 => Decision::Close(format!(
            "Fetch v{} (message format v0/v1, down-converted by the broker) is not supported through mirrorgate: mirrorgate advertises Fetch v4 and up, as Kafka 4.0 does; use a client from Kafka 0.11 on",
            prefix.api_version
        )),
        Some(ApiKey::Fetch) => upstream(frame, ResponseAction::Fetch),
        Some(ApiKey::ShareFetch) => upstream(frame, ResponseAction::ShareFetch),
        Some(ApiKey::ShareAcknowledge) => upstream(frame, ResponseAction::ShareAcknowledge),
        _ => upstream(frame, ResponseAction::Forward),
    }
}

/// `acks` of a Produce request: after the header comes `transactional_id` (nullable string,
/// compact from v9) and then `acks: INT16`.
pub fn produce_acks(request: &ParsedRequest) -> Option<i16> {
    let frame = &request.frame()[..];
    let mut pos = request.header_len().ok()?;
    if request.api_version() >= 9 {
        let (len_plus_one, p) = header::read_uvarint(frame, pos).ok()?;
        pos = p.checked_add(len_plus_one.saturating_sub(1) as usize)?;
    } else {
        let len = i16::from_be_bytes([*frame.get(pos)?, *frame.get(pos + 1)?]);
        pos += 2 + usize::try_from(len.max(0)).ok()?;
    }
    Some(i16::from_be_bytes([*frame.get(pos)?, *frame.get(pos + 1)?]))
}

/// Rebuilds an ApiVersions request as v0 (header v1: api key, version 0, correlation id,
/// client id; empty body) for the KIP-511 fallback.
fn api_versions_v0_request(request: &ParsedRequest) -> Option<Bytes> {
    let client_id = request.client_id().unwrap_or("mirrorgate");
    let mut out = BytesMut::with_capacity(10 + client_id.len());
    out.put_i16(request.api_key());
    out.put_i16(0);
    out.put_i32(request.correlation_id());
    out.put_i16(i16::try_from(client_id.len()).ok()?);
    out.extend_from_slice(client_id.as_bytes());
    Some(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(api_key: i16, version: i16, body: &[u8], header_v: i16) -> Bytes {
        let mut f = BytesMut::new();
        f.put_i16(api_key);
        f.put_i16(version);
        f.put_i32(42);
        f.put_i16(2);
        f.extend_from_slice(b"id");
        if header_v >= 2 {
            f.put_u8(0);
        }
        f.extend_from_slice(body);
        f.freeze()
    }

    #[test]
    fn reads_produce_acks_in_both_layouts() {
        let f = req(0, 7, &[0xff, 0xff, 0, 0, 0, 0, 0x75, 0x30], 1);
        assert_eq!(produce_acks(&ParsedRequest::parse(f).unwrap()), Some(0));
        let f = req(0, 9, &[4, b'a', b'b', b'c', 0xff, 0xff], 2);
        assert_eq!(produce_acks(&ParsedRequest::parse(f).unwrap()), Some(-1));
        let f = req(0, 9, &[4, b'a'], 2);
        assert_eq!(produce_acks(&ParsedRequest::parse(f).unwrap()), None);
    }

    /// Fetch below v4 is refused (a 3.x broker would down-convert placeholders into data
    /// messages); Fetch v4+ and ShareFetch responses are always looked at.
    #[test]
    fn fetch_below_v4_closes_and_reads_are_always_decoded() {
        for (key, version, want) in [
            (1, 3, None),
            (1, 0, None),
            (1, 4, Some(ResponseAction::Fetch)),
            (1, 17, Some(ResponseAction::Fetch)),
            (78, 1, Some(ResponseAction::ShareFetch)),
            (79, 1, Some(ResponseAction::ShareAcknowledge)),
        ] {
            let f = req(key, version, &[], 2);
            match (decide(&ParsedRequest::parse(f).unwrap(), |_| true), want) {
                (Decision::Close(r), None) => assert!(r.contains(&format!("Fetch v{version}")), "{r}"),
                (Decision::Upstream { action, .. }, Some(w)) => assert!(action == w, "{key} v{version}: {action:?}"),
                (d, w) => panic!("{key} v{version}: {d:?}, expected {w:?}"),
            }
        }
    }

    #[test]
    fn acks_zero_expects_no_response() {
        let f = req(0, 7, &[0xff, 0xff, 0, 0, 0, 0, 0x75, 0x30], 1);
        match decide(&ParsedRequest::parse(f).unwrap(), |_| true) {
            Decision::Upstream { expect_response, .. } => assert!(!expect_response),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn unknown_api_key_closes_unless_destination_knows_it() {
        let f = req(31000, 0, &[], 1);
        let p = ParsedRequest::parse(f).unwrap();
        assert!(matches!(decide(&p, |_| false), Decision::Close(r) if r.contains("unknown api key 31000")));
        assert!(matches!(decide(&p, |k| k == 31000), Decision::Upstream { action: ResponseAction::Forward, .. }));
    }

    #[test]
    fn sasl_is_forwarded_except_unframed_v0() {
        for (key, version) in [(17, 1), (36, 0), (36, 2)] {
            let f = req(key, version, &[], 1);
            assert!(matches!(
                decide(&ParsedRequest::parse(f).unwrap(), |_| true),
                Decision::Upstream { action: ResponseAction::Forward, expect_response: true, .. }
            ));
        }
        let f = req(17, 0, &[], 1);
        assert!(matches!(decide(&ParsedRequest::parse(f).unwrap(), |_| true), Decision::Close(r) if r.contains("v0")));
    }

    #[test]
    fn api_versions_above_ours_falls_back_to_v0() {
        let f = req(18, 99, &[], 2);
        match decide(&ParsedRequest::parse(f).unwrap(), |_| true) {
            Decision::Upstream { frame, action, .. } => {
                assert_eq!(action, ResponseAction::ApiVersions { fallback: true });
                assert_eq!(&frame[..], &[0, 18, 0, 0, 0, 0, 0, 42, 0, 2, b'i', b'd']);
            }
            d => panic!("{d:?}"),
        }
    }
}
