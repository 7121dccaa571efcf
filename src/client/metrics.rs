//! Prometheus series of mirrorgate's own broker connections (source and destination):
//! connections opened and closed, SASL authentications and KIP-368 re-authentications (the
//! KIP-1279 per-broker connection metrics).

use std::time::Duration;

/// One of mirrorgate's own connections to a broker (source or destination) was opened
/// (`created`) or closed; KIP-1279 `connection-creation-total` / `connection-close-total`
/// per source broker.
pub fn broker_connection(broker: &str, created: bool) {
    let name = if created {
        "mirrorgate_broker_connections_created_total"
    } else {
        "mirrorgate_broker_connections_closed_total"
    };
    metrics::counter!(name, "broker" => broker.to_string()).increment(1);
}

/// A SASL exchange of mirrorgate's own connection to `broker` ended (`ok` or not); KIP-1279
/// `successful-authentication-total` / `failed-authentication-total` per source broker
/// (rates: Prometheus `rate()`).
pub fn broker_authentication(broker: &str, mechanism: &'static str, ok: bool) {
    let result = if ok { "success" } else { "failure" };
    metrics::counter!("mirrorgate_broker_authentications_total", "broker" => broker.to_string(), "mechanism" => mechanism, "result" => result)
        .increment(1);
}

/// An in-band re-authentication (KIP-368) of mirrorgate's own connection to `broker` ended
/// (`ok` or not) after `latency`; KIP-1279 `successful-reauthentication-total` /
/// `failed-reauthentication-total` and `reauthentication-latency-avg` / `-max` per source
/// broker (the latency is a summary in seconds: avg = `_sum` / `_count`, max =
/// `quantile="1"`).
pub fn broker_reauthentication(broker: &str, mechanism: &'static str, ok: bool, latency: Duration) {
    let result = if ok { "success" } else { "failure" };
    metrics::counter!("mirrorgate_broker_reauthentications_total", "broker" => broker.to_string(), "mechanism" => mechanism, "result" => result)
        .increment(1);
    metrics::histogram!("mirrorgate_broker_reauthentication_latency_seconds", "broker" => broker.to_string(), "mechanism" => mechanism)
        .record(latency.as_secs_f64());
}
