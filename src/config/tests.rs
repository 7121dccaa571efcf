use std::time::Duration;

use super::limits::MAX_NETWORK_THREADS;
use super::*;

const GOOD: &str = "
destination:
  bootstrap_servers: 127.0.0.1:9092, 127.0.0.1:9093
listeners:
  - name: clients
    bind_host: 127.0.0.1
    port_range: 19092-19100
    admin: true
";

#[test]
fn good_config_validates_with_defaults() {
    let s = ProxyConfig::from_yaml(GOOD).unwrap().validate().unwrap();
    assert_eq!(s.destination_bootstrap, vec!["127.0.0.1:9092", "127.0.0.1:9093"]);
    assert_eq!(s.max_frame_bytes, 100 * 1024 * 1024);
    let l = &s.listeners[0];
    assert_eq!((l.bootstrap_port, l.advertised_host.as_str(), l.admin), (19092, "127.0.0.1", true));
    assert_eq!(l.broker_port(1), Some(19094));
    assert_eq!(l.broker_port(7), Some(19100));
    assert_eq!(l.broker_port(8), None);
}

#[test]
fn instances_defaults_and_limits() {
    let s = ProxyConfig::from_yaml(GOOD).unwrap().validate().unwrap();
    let m = &s.membership;
    assert_eq!(m.group_id, "mirrorgate.__mirror_state");
    assert!(m.instance.ends_with(&format!("-{}", std::process::id())), "{}", m.instance);
    assert_eq!(
        (m.session_timeout, m.heartbeat_interval, m.rebalance_timeout),
        (Duration::from_secs(10), Duration::from_secs(3), Duration::from_secs(30))
    );
    let text = format!(
        "{GOOD}instances:\n  name: mg-a\n  group_id: g1\n  session_timeout_ms: 6000\n  heartbeat_interval_ms: 1000\n"
    );
    let m = ProxyConfig::from_yaml(&text).unwrap().validate().unwrap().membership;
    assert_eq!(
        (m.instance.as_str(), m.group_id.as_str(), m.self_fence_after()),
        ("mg-a", "g1", Duration::from_secs(5))
    );
    for (yaml, key) in [
        ("heartbeat_interval_ms: 5000", "instances.heartbeat_interval_ms"),
        ("session_timeout_ms: 0", "instances.session_timeout_ms"),
        ("rebalance_timeout_ms: 3000000000", "instances.rebalance_timeout_ms"),
        ("name: ''", "instances.name"),
        ("rebalance_timeout_ms: 9000", "instances.rebalance_timeout_ms"),
    ] {
        let text = format!("{GOOD}instances:\n  {yaml}\n");
        let err = ProxyConfig::from_yaml(&text).unwrap().validate().unwrap_err();
        assert!(err.to_string().contains(key), "{yaml}: {err}");
    }
}

#[test]
fn network_threads_default_to_the_cpus_and_are_bounded() {
    let s = ProxyConfig::from_yaml(GOOD).unwrap().validate().unwrap();
    assert_eq!(s.num_network_threads, std::thread::available_parallelism().unwrap().get().min(MAX_NETWORK_THREADS));
    let s = ProxyConfig::from_yaml(&format!("{GOOD}num_network_threads: 3\n")).unwrap().validate().unwrap();
    assert_eq!(s.num_network_threads, 3);
    for n in [0, 257] {
        let err = ProxyConfig::from_yaml(&format!("{GOOD}num_network_threads: {n}\n"))
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(err.contains("num_network_threads") && err.contains("between 1 and 256"), "{n}: {err}");
    }
}

#[test]
fn secrets_never_show_in_debug() {
    let secrets = ["pw-dest-1", "tp-2", "ksp-3", "keymaterial-4", "kp-5", "encoder-secret-0123456789", "old-6"];
    let [pw, tp, ksp, key, kp, enc, old] = secrets;
    let text = format!(
        "destination:
  bootstrap_servers: 127.0.0.1:9092
  sasl_jaas_config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"{pw}\";'
  ssl_truststore_password: {tp}
  ssl_keystore_password: {ksp}
  ssl_keystore_key: '-----BEGIN PRIVATE KEY----- {key}'
  ssl_key_password: {kp}
listeners:
  - bind_host: 127.0.0.1
    port_range: 19092-19100
mirror_state:
  password_encoder_secret: {enc}
  password_encoder_old_secret: {old}
"
    );
    let cfg = ProxyConfig::from_yaml(&text).unwrap();
    assert_eq!(cfg.destination.ssl_key_password.as_ref().map(Secret::expose), Some(kp));
    let jaas = cfg.destination.sasl_jaas_config.as_ref().unwrap();
    let shown = format!("{cfg:?} {:?} {jaas}", cfg.mirror_state);
    for s in secrets {
        assert!(!shown.contains(s), "`{s}` shown: {shown}");
    }
    let settings = ProxyConfig::from_yaml(&format!("{GOOD}mirror_state:\n  password_encoder_secret: {enc}\n"))
        .unwrap()
        .validate()
        .unwrap();
    assert!(!format!("{settings:?}").contains(enc));
}

#[test]
fn a_short_password_encoder_secret_is_refused() {
    let with = |secret: &str, old: &str| {
        ProxyConfig::from_yaml(&format!(
            "{GOOD}mirror_state:\n  password_encoder_secret: '{secret}'\n  password_encoder_old_secret: '{old}'\n"
        ))
        .unwrap()
        .validate()
    };
    let err = with("fifteen-chars-x", "old").unwrap_err().to_string();
    assert!(
        err.contains("mirror_state.password_encoder_secret")
            && err.contains("15 characters")
            && err.contains("at least 16"),
        "{err}"
    );
    assert!(!err.contains("fifteen-chars-x"), "the secret is echoed: {err}");
    // 16 characters (not bytes) are enough; the old secret only has to be non-empty.
    assert!(with("sixteen-chars-xy", "old").is_ok());
    assert!(with("ééééééééééééééé", "old").is_err(), "15 characters in 30 bytes");
    let err = with("sixteen-chars-xy", "").unwrap_err().to_string();
    assert!(err.contains("password_encoder_old_secret"), "{err}");
}

#[test]
fn unknown_key_is_refused_by_name() {
    let err = ProxyConfig::from_yaml(&format!("{GOOD}\nmax_frame_byte: 5\n")).unwrap_err();
    assert!(err.to_string().contains("max_frame_byte"), "{err}");
}

#[test]
fn bad_values_name_their_key() {
    let cases = [
        ("127.0.0.1:9092, 127.0.0.1:9093", "bootstrap_servers: nohost", "destination.bootstrap_servers"),
        ("bind_host: 127.0.0.1", "bind_host: not-an-ip", "listeners[0].bind_host"),
        ("port_range: 19092-19100", "port_range: 19092-19092", "listeners[0].port_range"),
        ("port_range: 19092-19100", "port_range: abc", "listeners[0].port_range"),
    ];
    for (from, to, key) in cases {
        let text = GOOD.replacen(from, to, 1).replace("bootstrap_servers: bootstrap_servers:", "bootstrap_servers:");
        let text =
            if from.starts_with("127") { GOOD.replacen(&format!("bootstrap_servers: {from}"), to, 1) } else { text };
        let err = ProxyConfig::from_yaml(&text).unwrap().validate().unwrap_err();
        assert!(err.to_string().contains(key), "{to}: {err}");
    }
}
