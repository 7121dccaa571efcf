//! The admin listener while the destination cluster is down: `mirrors --describe` and
//! `--list` answer from mirrorgate's memory, `--stop` fails with a clear error (the state
//! topic lives on the destination, and a failover that is not recorded there would be
//! undone by a restart), forwarded requests get a closed connection at once instead of a
//! hang, and everything works again when the destination is back. Real Kafka 4.1 clusters.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use kafka_protocol::messages::MetadataRequest;
use mirrorgate::client::BrokerConnection;
use support::*;

const V: &str = "4.1.1";

fn text(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `(state, destinationOffset)` of each partition of `mirror` from `--describe --json`.
fn describe(mg: &Mirrorgate, mirror: &str) -> Result<Vec<(String, i64)>, String> {
    let out = mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", mirror, "--json"]);
    if !out.status.success() {
        return Err(format!("--describe failed: {}", text(&out)));
    }
    let rows: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("--describe --json: {e}: {}", text(&out)))?;
    Ok(rows
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    (r["state"].as_str().unwrap_or("?").to_string(), r["destinationOffset"].as_i64().unwrap_or(-2))
                })
                .collect()
        })
        .unwrap_or_default())
}

fn kafka_sh(args: &[&str]) {
    let out = Command::new(repo().join("scripts/kafka.sh")).args(args).output().unwrap();
    assert!(out.status.success(), "kafka.sh {args:?}: {}", text(&out));
}

#[test]
fn describe_and_list_answer_while_the_destination_is_down() {
    let source = cluster("source");
    let dest = owned_cluster("dest-offline", 1, V, &[]);
    let topic = unique_name("orders");
    kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", &source.bootstrap, "--create", "--topic", &topic, "--partitions", "2"],
        None,
    );
    ok(
        python_client(&["produce", "--bootstrap", &source.bootstrap, "--topic", &topic, "--count", "20"]),
        "produce to source",
    );
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { extra_yaml: "", ..Default::default() });
    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start");
    let before = eventually(Duration::from_secs(90), || {
        let rows = describe(&mg, &mirror)?;
        let total: i64 = rows.iter().map(|r| r.1).sum();
        if rows.len() == 2 && rows.iter().all(|r| r.0 == "MIRRORING") && total == 20 {
            Ok(rows)
        } else {
            Err(format!("{rows:?}"))
        }
    });

    // Every destination broker down.
    kafka_sh(&["stop-node", &dest.name, "1"]);

    // --describe and --list answer from memory: the states and offsets last seen.
    let rows = describe(&mg, &mirror).unwrap_or_else(|e| panic!("{e}\nmirrorgate log:\n{}", tail(&mg.log(), 30)));
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        rows.iter().map(|r| r.1).sum::<i64>(),
        20,
        "destination offsets from memory: {rows:?} (before: {before:?})"
    );
    let list = ok(mirrors_cli(&mg.bootstrap, &["--list"]), "--list with the destination down");
    let row = list.lines().find(|l| l.starts_with(&mirror)).unwrap_or_else(|| panic!("{list}"));
    assert!(row.contains(&source.bootstrap), "{row}");
    let plain = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror]), "--describe (table)");
    assert!(plain.contains(&topic), "{plain}");

    // --stop cannot record the failover in __mirror_state: a clear error, and the topic stays
    // a read-only mirror topic.
    let started = Instant::now();
    let stop = mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &topic]);
    let stop_text = text(&stop);
    assert!(!stop.status.success(), "--stop succeeded with the destination down: {stop_text}");
    assert!(stop_text.contains("cannot write __mirror_state"), "--stop error: {stop_text}");
    eprintln!("--stop with the destination down: {stop_text}");
    assert!(started.elapsed() < Duration::from_secs(60), "--stop took {:?}", started.elapsed());
    let rows = describe(&mg, &mirror).unwrap();
    // The refused --stop changed nothing: both partitions are still in the active states
    // they were in (not STOPPING, STOPPED, FAILED or PAUSED).
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.0 == "MIRRORING" || r.0 == "LOG_ALIGNMENT"), "{rows:?}");

    // A forwarded request (Metadata) is not left hanging: the connection is closed at once.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    let metadata = rt.block_on(async {
        let mut conn =
            // A request timeout far beyond the test's bounds: an error can only be mirrorgate
            // closing the connection, not the client giving up on a hanging request.
            BrokerConnection::connect(&mg.bootstrap, Duration::from_secs(5), Duration::from_secs(600), 1 << 20)
                .await
                .map_err(|e| e.to_string())?;
        conn.send(&MetadataRequest::default().with_topics(None), 12).await.map_err(|e| e.to_string())
    });
    let error = metadata.expect_err("Metadata answered with no destination");
    assert!(!error.contains("timed out"), "Metadata was left hanging: {error}");
    eprintln!("Metadata with no destination: {error} after {:?}", started.elapsed());
    mg.wait_for_log("destination broker unreachable, cannot forward api key 3", Duration::from_secs(10));

    // The destination is back: the stop goes through.
    kafka_sh(&["start-node", &dest.name, "1"]);
    eventually(Duration::from_secs(120), || {
        let out = mirrors_cli(&mg.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &topic]);
        if out.status.success() {
            Ok(())
        } else {
            Err(text(&out))
        }
    });
    let rows = eventually(Duration::from_secs(60), || {
        let rows = describe(&mg, &mirror)?;
        if rows.iter().all(|r| r.0 == "STOPPED") {
            Ok(rows)
        } else {
            Err(format!("{rows:?}"))
        }
    });
    assert_eq!(rows.iter().map(|r| r.1).sum::<i64>(), 20, "{rows:?}");
}
