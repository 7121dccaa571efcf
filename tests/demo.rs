//! `make demo` in CI: runs `DEMO_NONINTERACTIVE=1 scripts/demo.sh` from start to end (two real
//! Kafka clusters, mirrorgate with the repository's proxy.yaml on a free port range) and checks
//! what it prints: records mirrored, lag 0, verify OK, the same records read from both sides,
//! the refused write to a mirror topic, and the write after failover at the next offset.
//!
//! The script is the product here, so the test asserts on its output the way a reader would
//! look at it. It uses this build's binary (`DEMO_MIRRORGATE_BIN`) instead of a release build,
//! its own cluster names (`DEMO_NAME`) and directory (`DEMO_DIR`), so that it runs next to
//! other test binaries and next to a `make demo` on the default ports.

mod support;

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(600);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs scripts/demo.sh with `env`, output (stdout and stderr, interleaved) to `log`; kills
/// its process group (the script's trap then stops mirrorgate and the clusters) on timeout.
fn run_demo(env: &[(&str, String)], log: &Path) -> (ExitStatus, String) {
    let out = File::create(log).unwrap();
    let mut cmd = Command::new(repo().join("scripts/demo.sh"));
    cmd.env("DEMO_NONINTERACTIVE", "1")
        .env_remove("DEMO_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn scripts/demo.sh");
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let pgid = child.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &format!("-{pgid}")]).status();
            std::thread::sleep(Duration::from_secs(20));
            let _ = Command::new("kill").args(["-KILL", &format!("-{pgid}")]).status();
            let _ = child.wait();
            panic!(
                "scripts/demo.sh did not finish within {TIMEOUT:?}; output so far:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    (status, std::fs::read_to_string(log).unwrap())
}

/// The text after `prefix` on the first line containing it, up to the next blank.
fn word_after<'a>(out: &'a str, prefix: &str) -> Option<&'a str> {
    let line = out.lines().find(|l| l.contains(prefix))?;
    let rest = &line[line.find(prefix)? + prefix.len()..];
    rest.split_whitespace().next().map(|w| w.trim_end_matches([',', '.', ')']))
}

#[test]
fn demo_runs_end_to_end_and_shows_every_step() {
    let first = support::free_port_range(12);
    let name = format!("demotest{}", std::process::id());
    let dir = repo().join("target/test-demo").join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    let started = Instant::now();
    let (status, out) = run_demo(
        &[
            ("DEMO_MIRRORGATE_BIN", env!("CARGO_BIN_EXE_mirrorgate").to_string()),
            ("DEMO_PORT_RANGE", format!("{first}-{}", first + 11)),
            // Generous on a loaded CI machine (the script's defaults suit an idle laptop).
            ("DEMO_READY_TIMEOUT", "180".to_string()),
            ("DEMO_LAG_TIMEOUT", "300".to_string()),
            ("DEMO_NAME", name.clone()),
            ("DEMO_DIR", dir.display().to_string()),
        ],
        &dir.join("demo.out"),
    );
    let ctx = |what: &str| format!("{what}\n--- scripts/demo.sh output ---\n{out}");
    assert!(status.success(), "{}", ctx(&format!("scripts/demo.sh failed: {status}")));
    eprintln!("scripts/demo.sh finished in {:.1}s", started.elapsed().as_secs_f64());

    // mirrorgate ran on the port range given, with the repository's proxy.yaml otherwise.
    assert!(out.contains(&format!("addr=127.0.0.1:{first} target=Bootstrap")), "{}", ctx("bootstrap port"));
    let used = std::fs::read_to_string(dir.join("proxy.yaml")).unwrap();
    let repo_yaml = std::fs::read_to_string(repo().join("proxy.yaml")).unwrap();
    assert_eq!(used.replace(&format!("{first}-{}", first + 11), "19092-19191"), repo_yaml);

    // Mirror created, both topics started, records produced with progress.
    assert!(out.contains("Created mirror demo."), "{}", ctx("--create"));
    assert!(
        out.contains("Started mirroring 2 topic(s) on mirror demo: demo-orders, demo-payments"),
        "{}",
        ctx("--start")
    );
    for t in ["demo-orders", "demo-payments"] {
        assert!(out.contains(&format!("{t}:    2000/10000 records delivered")), "{}", ctx("progress"));
        assert!(out.contains(&format!("{t}:   10000/10000 records delivered")), "{}", ctx("produced"));
    }

    // --describe converged: lag 0 everywhere, destination offsets = source offsets.
    assert!(out.contains("source=20000  destination=20000  lag=0  state=MIRRORING"), "{}", ctx("lag 0"));
    assert!(out.contains("all 20000 records mirrored"), "{}", ctx("records mirrored"));
    let table_rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("    | demo ") && l.contains("MIRRORING") && l.contains("identical"))
        .collect();
    assert!(table_rows.len() >= 6, "{}", ctx("describe table with 6 MIRRORING rows"));
    for row in &table_rows {
        let cells: Vec<&str> = row.trim_start_matches("    | ").split_whitespace().collect();
        assert_eq!(cells[3], cells[4], "source offset = destination offset: {row}");
        assert_eq!(cells[5], "0", "lag 0: {row}");
    }

    // --verify: every partition identical.
    assert!(out.contains("Verified 6 partition(s) of mirror demo: 6 identical, 0 different."), "{}", ctx("verify"));
    assert!(out.contains("verify OK"), "{}", ctx("verify OK"));

    // The same records from the source and through mirrorgate.
    assert!(out.contains("read 20000 records from each side: same offsets"), "{}", ctx("read back"));
    assert!(out.contains("     0  key-0 = orders-0"), "{}", ctx("side-by-side records"));

    // The console producer's write to the mirror topic is refused as read-only.
    assert!(
        out.contains("refused: topic demo-orders is a read-only mirror topic of mirror demo"),
        "{}",
        ctx("refused write")
    );

    // Failover, then a write that lands at the next offset.
    assert!(out.contains("Stopped mirroring 1 topic(s) on mirror demo: demo-orders"), "{}", ctx("--stop"));
    assert!(out.contains("demo-orders is STOPPED (writable)"), "{}", ctx("STOPPED"));
    let end: i64 = word_after(&out, "partition 0 ends at offset ").and_then(|w| w.parse().ok()).expect("end offset");
    let landed: i64 =
        word_after(&out, "written to demo-orders[0] at offset ").and_then(|w| w.parse().ok()).expect("landed offset");
    assert!(end > 0, "{}", ctx("partition 0 has mirrored records"));
    assert_eq!(landed, end, "{}", ctx("the write after failover lands at the next offset"));
    assert!(out.contains(&format!("write after failover OK: it landed at offset {end}")), "{}", ctx("write OK"));

    // Everything it started is stopped again.
    assert!(out.contains("Demo done in"), "{}", ctx("done"));
    assert!(out.contains(&format!("cluster {name}-source stopped")), "{}", ctx("source stopped"));
    assert!(out.contains(&format!("cluster {name}-dest stopped")), "{}", ctx("dest stopped"));
    assert!(TcpListener::bind(("127.0.0.1", first)).is_ok(), "mirrorgate's bootstrap port is still taken");
}

#[test]
fn demo_refuses_a_busy_bootstrap_port_at_once() {
    let first = support::free_port_range(2);
    let _held = TcpListener::bind(("127.0.0.1", first)).unwrap();
    let dir = repo().join("target/test-demo").join(format!("busy{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let started = Instant::now();
    let (status, out) = run_demo(
        &[
            ("DEMO_MIRRORGATE_BIN", env!("CARGO_BIN_EXE_mirrorgate").to_string()),
            ("DEMO_PORT_RANGE", format!("{first}-{}", first + 1)),
            ("DEMO_NAME", format!("busy{}", std::process::id())),
            ("DEMO_DIR", dir.display().to_string()),
        ],
        &dir.join("demo.out"),
    );
    assert_eq!(status.code(), Some(2), "{out}");
    assert!(out.contains(&format!("port {first} is busy")), "{out}");
    eprintln!("the busy port was reported after {:?}", started.elapsed());
}
