use super::*;

#[test]
fn validates_known_keys_and_refuses_unknown_ones() {
    assert_eq!(validate("fetch.max.bytes", "1024"), Ok(()));
    assert!(matches!(validate("fetch.max.bytes", "lots"), Err(ConfigValueError::Invalid { .. })));
    assert!(matches!(validate("fetch.max.bytes", "0"), Err(ConfigValueError::Invalid { .. })));
    assert_eq!(validate("no.such.key", "1"), Err(ConfigValueError::Unknown("no.such.key".into())));
    assert!(validate("topics.include", "orders.*,(bad").is_err());
    assert_eq!(validate("bootstrap.servers", "a:1,b:2"), Ok(()));
    assert!(validate("bootstrap.servers", "nope").is_err());
    assert!(validate("security.protocol", "TLS").is_err());
    for v in ["true", "false", "TRUE", " False "] {
        assert_eq!(validate("mirror.coalesce.recompress", v), Ok(()), "{v:?}");
    }
    for v in ["yes", "1", ""] {
        assert!(matches!(validate("mirror.coalesce.recompress", v), Err(ConfigValueError::Invalid { .. })), "{v:?}");
    }
    assert_eq!(effective(&BTreeMap::new(), "mirror.coalesce.recompress"), Some("false"));
}

#[test]
fn secrets_are_never_echoed() {
    let err = validate("sasl.mechanism", "secret-value").unwrap_err().to_string();
    assert!(err.contains("secret-value"), "non-secret values may be echoed: {err}");
    assert!(is_sensitive("sasl.jaas.config") && is_sensitive("ssl.key.password"));
    assert_eq!(displayed("sasl.jaas.config", "x"), None);
    assert_eq!(displayed("fetch.max.bytes", "5"), Some("5".into()));
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn source_client_options_apply_every_socket_config() {
    let o = source_options(
        "m",
        &map(&[
            ("bootstrap.servers", "a:1"),
            ("socket.connection.setup.timeout.ms", "100"),
            ("socket.connection.setup.timeout.max.ms", "800"),
            ("reconnect.backoff.ms", "70"),
            ("connections.max.idle.ms", "5000"),
            ("socket.timeout.ms", "9000"),
            ("socket.send.buffer.bytes", "131072"),
            ("socket.receive.buffer.bytes", "-1"),
        ]),
    )
    .unwrap();
    let ms = std::time::Duration::from_millis;
    assert_eq!((o.connect_timeout, o.connect_timeout_max, o.reconnect_backoff), (ms(100), ms(800), ms(70)));
    assert_eq!(o.connections_max_idle, Some(ms(5000)));
    assert_eq!(o.socket.read_timeout, Some(ms(9000)));
    assert_eq!((o.socket.send_buffer_bytes, o.socket.receive_buffer_bytes), (Some(131072), None));
    // Defaults: Kafka's timeouts, OS buffers, idle connections closed after 10 minutes.
    let d = source_options("m", &map(&[("bootstrap.servers", "a:1")])).unwrap();
    assert_eq!((d.connect_timeout, d.connect_timeout_max, d.reconnect_backoff), (ms(10_000), ms(30_000), ms(50)));
    assert_eq!((d.connections_max_idle, d.socket.read_timeout), (Some(ms(600_000)), Some(ms(30_000))));
    assert_eq!((d.socket.send_buffer_bytes, d.socket.receive_buffer_bytes), (None, None));
    let never = source_options("m", &map(&[("bootstrap.servers", "a:1"), ("connections.max.idle.ms", "-1")])).unwrap();
    assert_eq!(never.connections_max_idle, None);
}

#[test]
fn kip_names_are_aliases_and_mirrorgate_names_win() {
    for (alias, k) in ALIASES {
        assert!(key(k).is_some(), "alias `{alias}` of unknown key `{k}`");
        assert_eq!(key(alias).map(|d| d.name), Some(*k));
        assert!(key(alias).map(|d| d.name) != Some(*alias));
    }
    assert!(matches!(validate("replica.fetch.max.bytes", "0"), Err(ConfigValueError::Invalid { .. })));
    assert_eq!(validate("replica.fetch.max.bytes", "2048"), Ok(()));
    let c = map(&[("replica.fetch.max.bytes", "2048"), ("replica.fetch.wait.max.ms", "250")]);
    assert_eq!(effective(&c, "fetch.max.bytes"), Some("2048"));
    assert_eq!(effective(&c, "fetch.wait.max.ms"), Some("250"));
    assert_eq!(effective(&c, "fetch.min.bytes"), Some("1"), "unset: the default");
    let both = map(&[("replica.fetch.max.bytes", "2048"), ("fetch.max.bytes", "4096")]);
    assert_eq!(effective(&both, "fetch.max.bytes"), Some("4096"), "mirrorgate's name wins");
    let sock = map(&[
        ("bootstrap.servers", "a:1"),
        ("replica.socket.receive.buffer.bytes", "65536"),
        ("replica.socket.timeout.ms", "4000"),
    ]);
    let o = source_options("m", &sock).unwrap();
    assert_eq!(o.socket.receive_buffer_bytes, Some(65536));
    assert_eq!(o.socket.read_timeout, Some(std::time::Duration::from_millis(4000)));
}

#[test]
fn socket_timeout_must_cover_the_fetch_wait() {
    let bad = map(&[("bootstrap.servers", "a:1"), ("replica.socket.timeout.ms", "500"), ("fetch.wait.max.ms", "1000")]);
    assert!(matches!(validate_all(&bad), Err(ConfigValueError::Invalid { key, .. }) if key == "socket.timeout.ms"));
    let ok = map(&[("bootstrap.servers", "a:1"), ("socket.timeout.ms", "1000"), ("replica.fetch.wait.max.ms", "1000")]);
    assert_eq!(validate_all(&ok), Ok(()));
}

#[test]
fn bootstrap_servers_is_required() {
    let mut m = BTreeMap::new();
    m.insert("fetch.max.bytes".to_string(), "100".to_string());
    assert_eq!(validate_all(&m), Err(ConfigValueError::Missing("bootstrap.servers".into())));
}
