//! Issue 14 item 3, in part: the metrics listener's `/health` and `/ready` endpoints for load
//! balancers and Kubernetes probes (`src/telemetry/http.rs`), against a real mirrorgate
//! process: not ready (with the reason) while the destination cluster does not answer, ready
//! once it serves in front of a real Kafka 4.1 cluster, and the Prometheus text on
//! `/metrics` from the same listener.

mod support;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

/// `(status code, body)` of `GET path` on `127.0.0.1:port`, or an error while nothing listens.
fn get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    let status =
        out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).ok_or(format!("no status line: {out:?}"))?;
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

#[test]
fn health_answers_at_once_and_ready_waits_for_the_destination() {
    let closed = free_port_range(1); // nothing listens here
    let metrics = free_port_range(1);
    let listen = free_port_range(12);
    let dir = repo().join("target/test-mirrorgate");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join(unique_name("health")).with_extension("yaml");
    std::fs::write(
        &config,
        format!(
            "destination:\n  bootstrap_servers: 127.0.0.1:{closed}\nlisteners:\n  - name: test\n    bind_host: 127.0.0.1\n    advertised_host: 127.0.0.1\n    port_range: {listen}-{}\nmetrics:\n  listen: 127.0.0.1:{metrics}\n",
            listen + 11
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mirrorgate"))
        .args(["run", "--config", config.to_str().unwrap(), "--startup-timeout-secs", "120"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let health = eventually(Duration::from_secs(30), || get(metrics, "/health"));
    let ready = get(metrics, "/ready");
    let missing = get(metrics, "/nothing");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(health, (200, "ok\n".to_string()));
    assert_eq!(ready, Ok((503, "not ready: waiting for the destination cluster\n".to_string())));
    assert_eq!(missing.map(|(s, _)| s), Ok(404));
}

#[test]
fn ready_once_serving_in_front_of_a_real_cluster() {
    let dest = cluster("dest");
    let metrics = free_port_range(1);
    let yaml = format!("metrics:\n  listen: 127.0.0.1:{metrics}\n");
    let mg = Mirrorgate::start_in_front_of(
        &dest.bootstrap,
        FrontOptions::default(),
        MirrorgateOptions {
            state_topic: Some(&unique_name("__mirror_state-health")),
            extra_yaml: &yaml,
            ..Default::default()
        },
    );
    // ("mirrorgate ready" is logged right before /ready turns.)
    let ready = eventually(Duration::from_secs(10), || match get(metrics, "/ready") {
        Ok((200, body)) => Ok(body),
        other => Err(format!("{other:?}")),
    });
    assert_eq!(ready, "ready\n");
    assert_eq!(get(metrics, "/health"), Ok((200, "ok\n".to_string())));
    ok(mirrors_cli(&mg.bootstrap, &["--list"]), "--list"); // a client connection to count
    let (status, text) = get(metrics, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(text.contains("mirrorgate_client_connections"), "{}", tail(&text, 10));
    drop(mg);
}
