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
];

/// Error code `UNSUPPORTED_VERSION` (Kafka protocol error 35).
pub const UNSUPPORTED_VERSION: i16 = 35;

/// Versions of `api_key` mirrorgate can decode, `None` if it does not intercept that API.
/// APIs that can write to a topic (Produce, DeleteRecords, CreatePartitions, DeleteTopics,
/// AlterConfigs, IncrementalAlterConfigs, DescribeConfigs, AddPartitionsToTxn) are limited to
/// the versions `wire::scan` walks, so the read-only check sees every such request. The
/// APIs the state topic guard decodes ([`super::state_guard::GUARDED`]) are limited to
/// what kafka-protocol decodes.
pub fn intercepted_range(api_key: i16) -> Option<(i16, i16)> {
    let key = ApiKey::try_from(api_key).ok()?;
    let decoded = (INTERCEPTED.contains(&key) || super::state_guard::GUARDED.contains(&key)).then(|| {
        let r = key.valid_versions();
        (r.min, r.max)
    });
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
}
