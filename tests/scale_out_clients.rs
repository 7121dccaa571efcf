//! Issue 14, item 1: clients keep working through several mirrorgate instances while one is
//! killed (kill -9) and another restarted. A real Kafka 4.1 destination, three mirrorgate
//! instances with one configuration and one state topic, and Kafka's Java producer and
//! consumer (`tests/java/HaClients.java`) with every instance in bootstrap.servers and
//! `metadata.recovery.strategy=rebootstrap`; and librdkafka's (confluent-kafka,
//! `tests/python/reauth_clients.py roundtrip`) with every instance in bootstrap.servers. The
//! client-visible pause is printed (a figure, not asserted beyond a generous bound).

mod support;

use std::time::{Duration, Instant};

use support::*;

const V: &str = "4.1.1";

fn instance(dest: &Cluster, state_topic: &str, name: &str) -> Mirrorgate {
    let yaml = format!("instances:\n  name: {name}\n  session_timeout_ms: 6000\n  heartbeat_interval_ms: 1000\n");
    Mirrorgate::start_with(
        dest,
        MirrorgateOptions { state_topic: Some(state_topic), extra_yaml: &yaml, ..Default::default() },
    )
}

/// Client connections an instance has served so far (its debug log lines).
fn connections(mg: &Mirrorgate) -> usize {
    mg.log().matches("client connection opened").count()
}

/// What the client program printed at the end: `produced`, `consumed`, `max_ack_gap_ms`,
/// `max_read_gap_ms`.
struct Figures {
    produced: i64,
    consumed: i64,
    ack_gap: i64,
    read_gap: i64,
}

/// Three instances in front of `dest`, a one-partition topic, and `clients` (given the
/// bootstrap list of every instance and the topic) running while the instance the clients
/// use most is killed (kill -9) after 8 s and another restarted (SIGTERM, start again)
/// `restart_after` later. Returns what the clients printed, once they succeeded and every
/// record produced was consumed.
fn ride_through_kill_and_restart(
    what: &str,
    restart_after: Duration,
    clients: impl FnOnce(String, String) -> std::process::Output + Send + 'static,
) -> Figures {
    let dest = cluster("dest");
    let state_topic = unique_name("__mirror_state-ha-clients");
    let mut instances: Vec<Mirrorgate> = ["a", "b", "c"].iter().map(|n| instance(&dest, &state_topic, n)).collect();
    let topic = unique_name("ha-clients");
    kafka_tool_ok(
        V,
        "topics",
        &[
            "--bootstrap-server",
            &dest.bootstrap,
            "--create",
            "--topic",
            &topic,
            "--partitions",
            "1",
            "--replication-factor",
            "1",
        ],
        None,
    );
    let bootstrap = instances.iter().map(|m| m.bootstrap.clone()).collect::<Vec<_>>().join(",");
    let before: Vec<usize> = instances.iter().map(connections).collect();
    let t = topic.clone();
    let running = std::thread::spawn(move || clients(bootstrap, t));

    // Kill -9 the instance the clients use most, once they are running.
    std::thread::sleep(Duration::from_secs(8));
    let used: Vec<usize> = instances.iter().zip(&before).map(|(m, b)| connections(m) - b).collect();
    let victim = (0..3).max_by_key(|&i| used[i]).unwrap();
    assert!(used[victim] > 0, "the clients connected to no instance: {used:?}");
    let killed_at = Instant::now();
    drop(instances.remove(victim));
    eprintln!("killed instance {victim} (client connections per instance: {used:?})");

    // Then restart another one (SIGTERM, start again) while the clients go on.
    std::thread::sleep(restart_after);
    let status = instances[0].terminate(Duration::from_secs(60));
    assert!(status.success(), "SIGTERM exit status {status:?}");
    std::thread::sleep(Duration::from_secs(2));
    instances[0] = instance(&dest, &state_topic, "a2");
    eprintln!("restarted one instance {} s after the kill", killed_at.elapsed().as_secs());

    let out = running.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{what}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let words: Vec<&str> = stdout.split_whitespace().collect();
    let value = |name: &str| -> i64 {
        let i = words.iter().position(|w| *w == name).unwrap_or_else(|| panic!("{name} in {stdout}"));
        words[i + 1].parse().unwrap()
    };
    let f = Figures {
        produced: value("produced"),
        consumed: value("consumed"),
        ack_gap: value("max_ack_gap_ms"),
        read_gap: value("max_read_gap_ms"),
    };
    assert_eq!(f.produced, f.consumed, "{stdout}");
    assert!(f.produced > 100, "too few records went through: {stdout}");
    assert!(f.ack_gap < 60_000 && f.read_gap < 60_000, "{stdout}");
    f
}

#[test]
fn java_clients_ride_through_a_killed_and_a_restarted_instance() {
    let f = ride_through_kill_and_restart("HaClients", Duration::from_secs(12), |b, t| {
        java_program(V, "HaClients.java", &[&b, &t, "40"])
    });
    eprintln!(
        "client-visible pause: longest wait for a produce acknowledgement {} ms, longest gap between consumed records {} ms ({} records, every one read back at its offset)",
        f.ack_gap, f.read_gap, f.produced
    );
}

/// The same with librdkafka (confluent-kafka): an idempotent producer (acks=all) and a
/// consumer of partition 0, every instance in `bootstrap.servers`; one instance killed
/// (kill -9), another restarted. Every record is read back once, in order, at its offset.
#[test]
fn librdkafka_clients_ride_through_a_killed_and_a_restarted_instance() {
    let f = ride_through_kill_and_restart("librdkafka clients", Duration::from_secs(10), |b, t| {
        python_program(
            "reauth_clients.py",
            &[
                "roundtrip",
                "--bootstrap",
                &b,
                "--topic",
                &t,
                "--seconds",
                "35",
                "--interval-ms",
                "50",
                "--drain-seconds",
                "90",
                "--prop",
                "enable.idempotence=true",
                "--prop",
                "message.timeout.ms=120000",
                "--prop",
                "reconnect.backoff.max.ms=1000",
                "--prop",
                "socket.connection.setup.timeout.ms=3000",
            ],
            Duration::from_secs(180),
        )
    });
    eprintln!(
        "librdkafka client-visible pause: longest wait between delivery reports {} ms, longest gap between consumed records {} ms ({} records, every one read back once at its offset)",
        f.ack_gap, f.read_gap, f.produced
    );
}
