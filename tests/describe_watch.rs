//! Issue 15, item 5: `mirrorgate mirrors --describe --watch` in a real terminal (tmux): the
//! table refreshes in place, shows the lag of a paused mirror, and the lag falling to 0 after
//! `--resume`; Ctrl-C ends it. Real Kafka 4.1 source and destination.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

const V: &str = "4.1.1";

fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux").args(args).output().expect("tmux is needed for this test (Debian package `tmux`)")
}

/// The visible pane of tmux session `session`.
fn pane(session: &str) -> String {
    String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", session]).stdout).to_string()
}

fn wait_for_pane(session: &str, what: &str, timeout: Duration, f: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let p = pane(session);
        if f(&p) {
            return p;
        }
        assert!(Instant::now() < deadline, "the watch never showed {what} within {timeout:?}; pane:\n{p}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn watch_shows_the_lag_of_a_paused_mirror_fall_to_zero_after_resume() {
    let source = cluster("source");
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("watched");
    kafka_tool_ok(
        V,
        "topics",
        &[
            "--bootstrap-server",
            &source.bootstrap,
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
    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    ok(mirrors_cli(&mg.bootstrap, &["--pause", "--mirror", &mirror, "--topics", &topic]), "--pause");
    // Records produced once the partition is PAUSED stay behind: a lag of 300.
    eventually(Duration::from_secs(60), || {
        let rows = describe_json(&mg, &mirror);
        match rows.first().and_then(|r| r["state"].as_str()) {
            Some("PAUSED") => Ok(()),
            other => Err(format!("state {other:?}")),
        }
    });
    produce_to_partition_0(&source.bootstrap, &topic, 300, "w");

    let session = unique_name("watch");
    let command = format!(
        "{} mirrors --bootstrap-server {} --describe --watch 1 --mirror {mirror}",
        env!("CARGO_BIN_EXE_mirrorgate"),
        mg.bootstrap
    );
    let started = tmux(&["new-session", "-d", "-s", &session, "-x", "220", "-y", "40", &command]);
    assert!(started.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&started.stderr));
    struct Kill<'a>(&'a str);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = Command::new("tmux").args(["kill-session", "-t", self.0]).output();
        }
    }
    let _kill = Kill(&session);

    let paused = wait_for_pane(&session, "a lag of 300 while paused", Duration::from_secs(30), |p| {
        p.contains("total lag 300,") && p.contains("PAUSED")
    });
    // One screen, refreshed in place: the title line appears once.
    assert_eq!(paused.matches("(Ctrl-C to stop)").count(), 1, "{paused}");
    assert!(paused.contains(&topic) && paused.contains("RATE/S") && paused.contains("ETA"), "{paused}");
    // Nothing is copied while paused: no estimate.
    assert!(paused.contains("caught up in -,"), "{paused}");

    ok(mirrors_cli(&mg.bootstrap, &["--resume", "--mirror", &mirror, "--topics", &topic]), "--resume");
    let caught_up = wait_for_pane(&session, "the lag fall to 0", Duration::from_secs(60), |p| {
        p.contains("total lag 0,") && p.contains("MIRRORING")
    });
    assert!(caught_up.contains("caught up in 0s,"), "{caught_up}");
    assert_eq!(caught_up.matches("(Ctrl-C to stop)").count(), 1, "{caught_up}");

    // Ctrl-C ends the watch (and with it the tmux session).
    tmux(&["send-keys", "-t", &session, "C-c"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tmux(&["has-session", "-t", &session]).status.success() {
        assert!(Instant::now() < deadline, "--watch still running after Ctrl-C; pane:\n{}", pane(&session));
        std::thread::sleep(Duration::from_millis(100));
    }
}
