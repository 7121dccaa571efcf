//! No replication loops (issue 9, item 13): a topic mirrored A→B by one mirrorgate cannot be
//! started B→A by another (same topic name), and the refusal names the loop; a failback
//! (the A→B topic stopped first) is allowed.

mod support;

use std::time::Duration;

use support::*;

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

    // Failback: once A→B is stopped (B took over), B→A may start.
    ok(mirrors_cli(&x.bootstrap, &["--stop", "--mirror", &a_to_b, "--topics", &topic]), "--stop A->B");
    eventually(Duration::from_secs(60), || {
        let out = mirrors_cli(&y.bootstrap, &["--start", "--mirror", &b_to_a, "--topics", &topic]);
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).to_string())
        }
    });
}
