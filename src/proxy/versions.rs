//! Version negotiation policy, in one place: which APIs mirrorgate decodes (and so which
//! versions it can accept for them), and how a destination broker's ApiVersions answer is
//! narrowed before a client sees it.
//!
//! Rule: for an API the proxy intercepts, advertise the intersection of the broker's range and
//! the range kafka-protocol decodes; for any other API, advertise the broker's range unchanged
//! (those requests are forwarded as raw bytes). Extra APIs served by mirrorgate itself (the
//! mirror RPCs) are appended by the caller.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

/// APIs whose requests or responses mirrorgate decodes. Keep [`crate::proxy::route`] in step.
pub const INTERCEPTED: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::Metadata,
    ApiKey::FindCoordinator,
    ApiKey::DescribeCluster,
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ShareFetch,
    ApiKey::ShareAcknowledge,
];

/// Error code `UNSUPPORTED_VERSION` (Kafka protocol error 35).
pub const UNSUPPORTED_VERSION: i16 = 35;

/// Versions of `api_key` mirrorgate can accept, `None` if it does not intercept that API.
/// APIs that can write to a topic (Produce, DeleteRecords, CreatePartitions, DeleteTopics,
/// AlterConfigs, IncrementalAlterConfigs, DescribeConfigs, AddPartitionsToTxn) are limited to
/// the versions `wire::scan` walks, so the read-only check sees every such request.
///
/// The APIs only the state topic guard decodes ([`super::state_guard::GUARDED`], not in
/// [`INTERCEPTED`]) keep the broker's minimum: an old client that never names the state
/// topic must keep working (ListOffsets v0, OffsetCommit v0-1, OffsetForLeaderEpoch v0-1 and
/// CreateTopics v0-1 are below kafka-protocol's baseline). A request naming the state topic
/// at a version kafka-protocol cannot decode closes the connection (fail closed). Only their
/// maximum is capped at what kafka-protocol decodes, so a current client gets a proper
/// TOPIC_AUTHORIZATION_FAILED rather than a closed connection, and DescribeTopicPartitions
/// answers (always filtered) can be decoded.
pub fn intercepted_range(api_key: i16) -> Option<(i16, i16)> {
    let key = ApiKey::try_from(api_key).ok()?;
    let r = key.valid_versions();
    let decoded = if INTERCEPTED.contains(&key) {
        Some((r.min, r.max))
    } else if super::state_guard::GUARDED.contains(&key) || super::present::DECODED.contains(&key) {
        Some((0, r.max))
    } else {
        None
    };
    let walked = crate::wire::scan::supported_versions(api_key).map(|r| (r.min, r.max));
    match (decoded, walked) {
        (Some((a, b)), Some((c, d))) => Some((a.max(c), b.min(d))),
        (x, None) | (None, x) => x,
    }
}

/// Highest ApiVersions request version mirrorgate decodes; above it, the KIP-511 fallback
/// applies (answer in the v0 schema with `UNSUPPORTED_VERSION` and the supported ranges).
pub fn max_api_versions_version() -> i16 {
    ApiKey::ApiVersions.valid_versions().max
}

/// Narrows a broker's ApiVersions answer in place: intersects intercepted APIs with what
/// mirrorgate decodes (dropping those with an empty intersection), drops the api keys in
/// `reserved` (served by mirrorgate itself), then appends `extra` `(api_key, min, max)`.
pub fn negotiate(resp: &mut ApiVersionsResponse, reserved: &[i16], extra: &[(i16, i16, i16)]) {
    resp.api_keys.retain_mut(|v| {
        if reserved.contains(&v.api_key) {
            return false;
        }
        match intercepted_range(v.api_key) {
            None => true,
            Some((min, max)) => {
                v.min_version = v.min_version.max(min);
                v.max_version = v.max_version.min(max);
                v.min_version <= v.max_version
            }
        }
    });
    for &(api_key, min, max) in extra {
        resp.api_keys.push(ApiVersion::default().with_api_key(api_key).with_min_version(min).with_max_version(max));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(k: i16, min: i16, max: i16) -> ApiVersion {
        ApiVersion::default().with_api_key(k).with_min_version(min).with_max_version(max)
    }

    #[test]
    fn intersects_intercepted_and_keeps_passthrough_ranges() {
        let mut resp = ApiVersionsResponse::default();
        let fetch_max = ApiKey::Fetch.valid_versions().max;
        resp.api_keys = vec![v(1, 4, fetch_max + 5), v(11, 0, 99), v(9999, 0, 3), v(94, 0, 0)];
        negotiate(&mut resp, &[94], &[(94, 0, 0), (95, 0, 1)]);
        let got: Vec<_> = resp.api_keys.iter().map(|a| (a.api_key, a.min_version, a.max_version)).collect();
        assert_eq!(got, vec![(1, 4, fetch_max), (11, 0, 99), (9999, 0, 3), (94, 0, 0), (95, 0, 1)]);
    }

    #[test]
    fn drops_intercepted_api_without_common_version() {
        let mut resp = ApiVersionsResponse::default();
        let meta_max = ApiKey::Metadata.valid_versions().max;
        resp.api_keys = vec![v(3, meta_max + 1, meta_max + 3)];
        negotiate(&mut resp, &[], &[]);
        assert!(resp.api_keys.is_empty());
    }

    /// A 3.9 broker's ranges for the APIs the state topic guard decodes: the minimums an old
    /// client needs stay, only maximums above kafka-protocol's are capped.
    #[test]
    fn guarded_apis_keep_the_brokers_minimums() {
        let broker = [
            (ApiKey::ListOffsets, 0, 9),
            (ApiKey::OffsetCommit, 0, 9),
            (ApiKey::OffsetForLeaderEpoch, 0, 4),
            (ApiKey::TxnOffsetCommit, 0, 4),
            (ApiKey::CreateTopics, 0, 7),
            (ApiKey::DescribeTopicPartitions, 0, 0),
            (ApiKey::DescribeConfigs, 0, 4),
            (ApiKey::Fetch, 4, 17),
        ];
        let mut resp = ApiVersionsResponse::default();
        resp.api_keys = broker.iter().map(|(k, min, max)| v(*k as i16, *min, *max)).collect();
        // One more: a version above what kafka-protocol decodes is capped.
        let lo_max = ApiKey::ListOffsets.valid_versions().max;
        resp.api_keys.push(v(ApiKey::ListOffsets as i16 + 1000, 0, 1));
        resp.api_keys[0].max_version = lo_max + 3;
        negotiate(&mut resp, &[], &[]);
        let got: Vec<_> = resp.api_keys.iter().map(|a| (a.api_key, a.min_version, a.max_version)).collect();
        let scan_dc = crate::wire::scan::supported_versions(ApiKey::DescribeConfigs as i16).unwrap();
        assert_eq!(
            got,
            vec![
                (ApiKey::ListOffsets as i16, 0, lo_max),
                (ApiKey::OffsetCommit as i16, 0, 9),
                (ApiKey::OffsetForLeaderEpoch as i16, 0, 4),
                (ApiKey::TxnOffsetCommit as i16, 0, 4),
                (ApiKey::CreateTopics as i16, 0, 7),
                (ApiKey::DescribeTopicPartitions as i16, 0, 0),
                (ApiKey::DescribeConfigs as i16, scan_dc.min, 4.min(scan_dc.max)),
                // Fetch is decoded by the proxy itself: kafka-protocol's minimum applies.
                (
                    ApiKey::Fetch as i16,
                    4.max(ApiKey::Fetch.valid_versions().min),
                    17.min(ApiKey::Fetch.valid_versions().max)
                ),
                (ApiKey::ListOffsets as i16 + 1000, 0, 1),
            ]
        );
    }
}
