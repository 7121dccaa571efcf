//! Broker address rewriting: every host and port a destination broker puts in a response is
//! replaced by the mirrorgate listener that serves that broker, so no upstream address reaches
//! a client. Broker ids stay the destination's.
//!
//! Covered: Metadata `brokers`, FindCoordinator v0–3 (`host`/`port`) and v4+ (`coordinators`),
//! DescribeCluster `brokers`, and the KIP-951 `node_endpoints` of Produce (v10+) and Fetch
//! (v16+) responses. Pure functions over decoded responses; no I/O.

use kafka_protocol::messages::{
    DescribeClusterResponse, FetchResponse, FindCoordinatorResponse, MetadataResponse, ProduceResponse,
};
use kafka_protocol::protocol::StrBytes;

/// Where clients must go for a given destination broker.
pub trait AddressMap {
    /// The advertised `(host, port)` for destination broker `node_id`.
    fn advertised(&self, node_id: i32) -> (StrBytes, i32);
}

/// Rewrites Metadata `brokers`. Returns the destination `(node_id, host, port)` seen, so the
/// caller can open listeners for brokers it did not know.
pub fn metadata(resp: &mut MetadataResponse, map: &impl AddressMap) -> Vec<(i32, String, i32)> {
    let mut seen = Vec::with_capacity(resp.brokers.len());
    for b in &mut resp.brokers {
        seen.push((b.node_id.0, b.host.to_string(), b.port));
        (b.host, b.port) = map.advertised(b.node_id.0);
    }
    seen
}

/// Rewrites a FindCoordinator response of `version`: v0–3 carry one top-level
/// `node_id`/`host`/`port`, v4+ a `coordinators` array (KIP-699). A coordinator with an error
/// (node id -1) carries no usable address and is blanked rather than mapped.
pub fn find_coordinator(resp: &mut FindCoordinatorResponse, version: i16, map: &impl AddressMap) {
    if version < 4 {
        if resp.node_id.0 >= 0 {
            (resp.host, resp.port) = map.advertised(resp.node_id.0);
        } else {
            resp.host = StrBytes::default();
            resp.port = -1;
        }
        return;
    }
    for c in &mut resp.coordinators {
        if c.node_id.0 >= 0 {
            (c.host, c.port) = map.advertised(c.node_id.0);
        } else {
            c.host = StrBytes::default();
            c.port = -1;
        }
    }
}

/// Rewrites DescribeCluster `brokers`.
pub fn describe_cluster(resp: &mut DescribeClusterResponse, map: &impl AddressMap) {
    for b in &mut resp.brokers {
        (b.host, b.port) = map.advertised(b.broker_id.0);
    }
}

/// Rewrites Produce `node_endpoints`; returns whether anything changed (re-encode needed).
pub fn produce(resp: &mut ProduceResponse, map: &impl AddressMap) -> bool {
    for e in &mut resp.node_endpoints {
        (e.host, e.port) = map.advertised(e.node_id.0);
    }
    !resp.node_endpoints.is_empty()
}

/// Rewrites Fetch `node_endpoints`; returns whether anything changed (re-encode needed).
pub fn fetch(resp: &mut FetchResponse, map: &impl AddressMap) -> bool {
    for e in &mut resp.node_endpoints {
        (e.host, e.port) = map.advertised(e.node_id.0);
    }
    !resp.node_endpoints.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::find_coordinator_response::Coordinator;
    use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
    use kafka_protocol::messages::BrokerId;

    struct Map;
    impl AddressMap for Map {
        fn advertised(&self, node_id: i32) -> (StrBytes, i32) {
            (StrBytes::from_static_str("proxy.example"), 20000 + node_id)
        }
    }

    #[test]
    fn metadata_brokers_point_at_the_proxy() {
        let mut r = MetadataResponse::default();
        r.brokers = vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(2))
            .with_host(StrBytes::from_static_str("10.0.0.9"))
            .with_port(9092)];
        let seen = metadata(&mut r, &Map);
        assert_eq!(seen, vec![(2, "10.0.0.9".to_string(), 9092)]);
        assert_eq!((r.brokers[0].host.as_str(), r.brokers[0].port), ("proxy.example", 20002));
    }

    #[test]
    fn find_coordinator_both_layouts() {
        let mut v3 = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("10.0.0.9"))
            .with_port(9092);
        find_coordinator(&mut v3, 3, &Map);
        assert_eq!((v3.host.as_str(), v3.port), ("proxy.example", 20001));

        let mut v4 = FindCoordinatorResponse::default();
        v4.coordinators = vec![
            Coordinator::default().with_node_id(BrokerId(3)).with_host(StrBytes::from_static_str("h")).with_port(1),
            Coordinator::default().with_node_id(BrokerId(-1)).with_host(StrBytes::from_static_str("h")).with_port(1),
        ];
        find_coordinator(&mut v4, 4, &Map);
        assert_eq!((v4.host.as_str(), v4.port), ("", 0), "v4+ has no top-level address");
        assert_eq!((v4.coordinators[0].host.as_str(), v4.coordinators[0].port), ("proxy.example", 20003));
        assert_eq!((v4.coordinators[1].host.as_str(), v4.coordinators[1].port), ("", -1));
    }
}
