//! No replication loops (issue 9, item 13): a topic mirrored A→B by one mirrorgate cannot be
//! started B→A by another (same topic name), and the refusal names the loop; a failback
//! (the A→B topic stopped first) is allowed once A's old copy is deleted. An existing
//! destination topic is adopted only when empty.

mod support;

use std::time::Duration;

use support::*;

use mirrorgate::client::cluster::{ClusterClient, ClusterOptions};

fn client(bootstrap: &str) -> ClusterClient {
    let rt = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| {
        rt.block_on(ClusterClient::connect(ClusterOptions::new(vec![bootstrap.to_string()])))
    })
    .unwrap()
}

const V: &str = "4.1.1";

fn create_topic(bootstrap: &str, topic: &str) {
    kafka_tool_ok(
        V,
        "topics",
        &[
            "--bootstrap-server",
            bootstrap,
            "--create",
            "--topic",
            topic,
            "--replication-factor",
            "1",
            "--partitions",
            "1",
        ],
        None,
    );
}

fn create_mirror(mg: &Mirrorgate, source: &Cluster) -> String {
    let mirror = unique_name("m");
    let cfg = mirror_config_file(source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    mirror
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirroring_a_topic_back_into_the_cluster_it_comes_from_is_refused() {
    let a = cluster("a");
    let b = cluster("b");
    // X fronts B with the default state topic name (what a real deployment reads); Y fronts A.
    let x = Mirrorgate::start_with(&b, MirrorgateOptions { state_topic: Some("__mirror_state"), ..Default::default() });
    let y = Mirrorgate::start(&a);
    let topic = unique_name("loop");
    create_topic(&a.bootstrap, &topic);
    ok(
        python_client(&["produce", "--bootstrap", &a.bootstrap, "--topic", &topic, "--count", "5", "--prefix", "a"]),
        "produce",
    );
    let a_to_b = create_mirror(&x, &a);
    ok(mirrors_cli(&x.bootstrap, &["--start", "--mirror", &a_to_b, "--topics", &topic]), "--start A->B");
    eventually(Duration::from_secs(120), || {
        let out = ok(mirrors_cli(&x.bootstrap, &["--describe", "--mirror", &a_to_b, "--json"]), "--describe");
        if out.contains("\"destinationOffset\": 5") {
            Ok(())
        } else {
            Err(out)
        }
    });

    // B→A of the same topic: refused, naming the loop.
    let b_to_a = create_mirror(&y, &b);
    let out = mirrors_cli(&y.bootstrap, &["--start", "--mirror", &b_to_a, "--topics", &topic]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "B->A start must be refused: {stderr}");
    assert!(stderr.contains("replication loop") && stderr.contains(&topic) && stderr.contains(&a_to_b), "{stderr}");
    let described = ok(mirrors_cli(&y.bootstrap, &["--describe", "--mirror", &b_to_a, "--json"]), "--describe B->A");
    assert!(!described.contains(&topic), "nothing of the refused topic was started: {described}");

    // Failback: once A→B is stopped (B took over), B→A is no longer a loop. A's copy of the
    // topic still holds its records, so it is not adopted (item 13) until it is deleted; then
    // B→A starts and re-seeds A.
    ok(mirrors_cli(&x.bootstrap, &["--stop", "--mirror", &a_to_b, "--topics", &topic]), "--stop A->B");
    let not_adopted = eventually(Duration::from_secs(60), || {
        let out = mirrors_cli(&y.bootstrap, &["--start", "--mirror", &b_to_a, "--topics", &topic]);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if !out.status.success() && stderr.contains("TOPIC_ALREADY_EXISTS") {
            Ok(stderr)
        } else {
            Err(stderr)
        }
    });
    assert!(!not_adopted.contains("replication loop"), "{not_adopted}");
    assert!(not_adopted.contains("holds records at offsets 0..4"), "{not_adopted}");
    kafka_tool_ok(V, "topics", &["--bootstrap-server", &a.bootstrap, "--delete", "--topic", &topic], None);
    eventually(Duration::from_secs(60), || {
        let out = mirrors_cli(&y.bootstrap, &["--start", "--mirror", &b_to_a, "--topics", &topic]);
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).to_string())
        }
    });
}

/// Start positions (issue 9, item 9): `latest` copies nothing old and `--describe` says where
/// copying started; a timestamp starts at the first record at or after it; a timestamp after
/// the last record starts at the end. Offsets stay identical (the skipped head is filled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_positions_latest_and_timestamp_copy_nothing_older() {
    let a = cluster("a");
    let b = cluster("b");
    let mg = Mirrorgate::start(&b);
    let produce = |topic: &str, prefix: &str, n: &str| {
        ok(
            python_client(&[
                "produce",
                "--bootstrap",
                &a.bootstrap,
                "--topic",
                topic,
                "--count",
                n,
                "--prefix",
                prefix,
            ]),
            "produce",
        );
    };
    let latest = unique_name("latest");
    let by_time = unique_name("bytime");
    let future = unique_name("future");
    for t in [&latest, &by_time, &future] {
        create_topic(&a.bootstrap, t);
        produce(t, "old", "50");
    }
    std::thread::sleep(Duration::from_millis(1500));
    let cut = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    std::thread::sleep(Duration::from_millis(1500));
    produce(&by_time, "new", "7");
    let mirror = create_mirror(&mg, &a);
    ok(
        mirrors_cli(
            &mg.bootstrap,
            &["--start", "--mirror", &mirror, "--topics", &latest, "--start-position", "latest"],
        ),
        "--start latest",
    );
    ok(
        mirrors_cli(
            &mg.bootstrap,
            &["--start", "--mirror", &mirror, "--topics", &by_time, "--start-position", &cut.to_string()],
        ),
        "--start ts",
    );
    let later = (cut + 3_600_000).to_string();
    ok(
        mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &future, "--start-position", &later]),
        "--start future",
    );
    // Wait until every topic mirrors, then write 5 new records to the `latest` topic.
    eventually(Duration::from_secs(120), || {
        let out = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror, "--json"]), "--describe");
        let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        let rows = v.as_array().cloned().unwrap_or_default();
        if rows.len() == 3
            && rows.iter().all(|r| {
                r["state"] == "MIRRORING" && r["destinationOffset"] == 50
                    || r["topic"] == by_time.as_str() && r["destinationOffset"] == 57
            })
        {
            Ok(())
        } else {
            Err(out)
        }
    });
    // Nothing below the copy start is readable data: the destination log start is moved up
    // to it (issue 12 review item 2), so the skipped head's placeholders do not stay.
    let dst = client(&b.bootstrap);
    for t in [&latest, &by_time, &future] {
        eventually(Duration::from_secs(60), || match block(dst.list_offsets(t, 0, -2)) {
            Ok(50) => Ok(()),
            other => Err(format!("{t}: destination log start {other:?}, copy start 50")),
        });
    }
    produce(&latest, "fresh", "5");
    let consume = |topic: &str, n: &str| -> Vec<String> {
        let out = ok(
            python_client(&[
                "consume",
                "--bootstrap",
                &mg.bootstrap,
                "--topic",
                topic,
                "--group",
                &unique_name("g"),
                "--count",
                n,
                "--timeout",
                "60",
                "--no-commit",
            ]),
            "consume",
        );
        out.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| format!("{}:{}", v["offset"], v["value"].as_str().unwrap_or("")))
            .collect()
    };
    let got = consume(&latest, "5");
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(
        got.iter().all(|r| r.contains(":fresh")) && got[0].starts_with("50:"),
        "only the new records, at their source offsets: {got:?}"
    );
    let got = consume(&by_time, "7");
    assert!(got.iter().all(|r| r.contains(":new")) && got[0].starts_with("50:"), "from the timestamp on: {got:?}");
    let out = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror]), "--describe");
    assert!(out.contains("copied from source offset 50"), "{out}");
}

/// An existing destination topic is adopted only when nothing else writes to it (issue 9,
/// item 13): an empty pre-created topic becomes the mirror topic (with the mirror's topic
/// configs) and mirrors identically; a pre-created topic holding one record is refused at
/// `--start` with TOPIC_ALREADY_EXISTS naming the topic, the partition and the offsets found,
/// and nothing of it is started. (Old code: the start was accepted and the partition went
/// FAILED later.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_destination_topic_is_adopted_only_when_empty() {
    let a = cluster("a");
    let b = cluster("b");
    let mg = Mirrorgate::start(&b);
    let empty = unique_name("adopt-empty");
    let written = unique_name("adopt-written");
    for t in [&empty, &written] {
        create_topic(&a.bootstrap, t);
        create_topic(&b.bootstrap, t);
        ok(
            python_client(&["produce", "--bootstrap", &a.bootstrap, "--topic", t, "--count", "5", "--prefix", "a"]),
            "produce",
        );
    }
    ok(
        python_client(&["produce", "--bootstrap", &b.bootstrap, "--topic", &written, "--count", "1", "--prefix", "b"]),
        "produce on the destination",
    );
    let mirror = create_mirror(&mg, &a);

    let out = mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &written]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "a destination topic holding a record must not be adopted: {stderr}");
    assert!(
        stderr.contains("TOPIC_ALREADY_EXISTS")
            && stderr.contains(&written)
            && stderr.contains("partition 0 holds records at offsets 0..0"),
        "{stderr}"
    );
    let described = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror, "--json"]), "--describe");
    assert!(!described.contains(&written), "nothing of the refused topic was started: {described}");
    // A foreign topic with another partition count is refused too, and not taken over.
    let other_count = unique_name("adopt-partitions");
    create_topic(&a.bootstrap, &other_count);
    kafka_tool_ok(
        V,
        "topics",
        &[
            "--bootstrap-server",
            &b.bootstrap,
            "--create",
            "--topic",
            &other_count,
            "--partitions",
            "2",
            "--replication-factor",
            "1",
        ],
        None,
    );
    let out = mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &other_count]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success() && stderr.contains("TOPIC_ALREADY_EXISTS") && stderr.contains("2 partition(s)"),
        "{stderr}"
    );
    let described = ok(mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", &mirror, "--json"]), "--describe");
    assert!(!described.contains(&other_count), "the foreign topic became a mirror topic: {described}");
    // The empty one is adopted even though someone set gzip on it: the mirror's configs
    // replace that (a recompressing broker would rewrite the mirrored batches).
    kafka_tool_ok(
        V,
        "configs",
        &[
            "--bootstrap-server",
            &b.bootstrap,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            &empty,
            "--add-config",
            "compression.type=gzip,message.timestamp.type=LogAppendTime",
        ],
        None,
    );

    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", &empty]), "--start (empty topic)");
    let configs = kafka_tool_ok(
        V,
        "configs",
        &["--bootstrap-server", &b.bootstrap, "--describe", "--entity-type", "topics", "--entity-name", &empty],
        None,
    );
    assert!(configs.contains("retention.ms=-1"), "the adopted topic has the mirror's configs: {configs}");
    assert!(configs.contains("compression.type=producer"), "{configs}");
    assert!(configs.contains("message.timestamp.type=CreateTime"), "{configs}");
    let source = consume_all(&a.bootstrap, &empty, 5, "read_committed");
    let mirrored = consume_all(&mg.bootstrap, &empty, 5, "read_committed");
    assert_eq!(source.len(), 5);
    assert_eq!(mirrored, source, "the adopted topic mirrors identically");
}
