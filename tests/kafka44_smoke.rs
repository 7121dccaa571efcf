//! Smoke run with Apache Kafka 4.4.0 as the destination: clients negotiate versions through
//! mirrorgate and work (Kafka 4.4's own Java tools, librdkafka). Kafka 4.4 uses api key 94 for
//! an API of its own, which the KIP-1279 prototype gives CreateClusterMirror: mirrorgate
//! refuses to start until the mirror keys are moved (`mirror_api_keys`), and the CLI follows
//! them with `mirror.api.key.*` in `--command-config`.

mod support;

use support::*;

const V: &str = "4.4.0";

#[test]
fn kafka_4_4_destination_java_tools_and_librdkafka() {
    let dest = cluster_with("dest44", 1, V, &[]);
    let keys = [
        ("create_cluster_mirror", 1094),
        ("start_mirror_topics", 1095),
        ("stop_mirror_topics", 1096),
        ("list_cluster_mirrors", 1098),
        ("describe_cluster_mirrors", 1099),
        ("pause_mirror_topics", 1102),
        ("resume_mirror_topics", 1103),
        ("delete_cluster_mirror", 1104),
    ];
    let yaml: String = std::iter::once("mirror_api_keys:".to_string())
        .chain(keys.iter().map(|(k, v)| format!("  {k}: {v}")))
        .collect::<Vec<_>>()
        .join("\n");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { extra_yaml: &yaml, ..Default::default() });

    // Without `mirror_api_keys` (the KIP-1279 prototype's keys, 94 for CreateClusterMirror)
    // mirrorgate refuses to start: its config minus the moved keys, on other ports.
    let config = std::fs::read_to_string(&mg.config_path).unwrap();
    let first = free_port_range(12);
    let mut skipping = false;
    let default_keys: String = config
        .lines()
        .filter(|l| {
            if l.starts_with("mirror_api_keys:") {
                skipping = true;
                return false;
            }
            if skipping && l.starts_with("  ") {
                return false;
            }
            skipping = false;
            true
        })
        .map(|l| {
            if l.trim_start().starts_with("port_range: ") {
                format!("    port_range: {first}-{}", first + 11)
            } else if l.starts_with("  topic: __mirror_state") {
                format!("  topic: {}", unique_name("__mirror_state-44-refused"))
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!default_keys.contains("mirror_api_keys") && default_keys.contains("port_range"), "{default_keys}");
    let path = repo().join("target/test-mirrorgate").join(format!("{}.yaml", unique_name("mg44-default-keys")));
    std::fs::write(&path, default_keys + "\n").unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mirrorgate"));
    cmd.args(["run", "--config"]).arg(&path).env_remove("RUST_LOG");
    let refused = run(cmd, None, std::time::Duration::from_secs(120));
    let text = format!("{}{}", String::from_utf8_lossy(&refused.stdout), String::from_utf8_lossy(&refused.stderr));
    assert!(!refused.status.success(), "mirrorgate started on Kafka 4.4 with the default mirror api keys: {text}");
    assert!(
        text.contains("already uses api key 94") && text.contains("mirror_api_keys"),
        "the refusal names api key 94 and the setting that moves it: {}",
        tail(&text, 20)
    );
    // The operator CLI, told where the keys moved.
    let cc = repo().join("target/test-mirrorgate").join(format!("{}.properties", unique_name("cc44")));
    std::fs::write(&cc, keys.iter().map(|(k, v)| format!("mirror.api.key.{k}={v}\n")).collect::<String>()).unwrap();
    let listed = ok(
        mirrors_cli(&mg.bootstrap, &["--list", "--command-config", cc.to_str().unwrap()]),
        "mirrors --list on Kafka 4.4",
    );
    assert!(listed.starts_with("MIRROR"), "{listed}");
    let bs = mg.bootstrap.as_str();
    let topic = unique_name("smoke44");
    let out = kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", bs, "--create", "--topic", &topic, "--partitions", "2", "--replication-factor", "1"],
        None,
    );
    assert!(out.contains(&format!("Created topic {topic}")), "{out}");
    let records: Vec<String> = (0..10).map(|i| format!("v44-{i}")).collect();
    kafka_tool_ok(
        V,
        "console-producer",
        &["--bootstrap-server", bs, "--topic", &topic],
        Some(&(records.join("\n") + "\n")),
    );
    let group = unique_name("g44");
    let consumed = kafka_tool_ok(
        V,
        "console-consumer",
        &[
            "--bootstrap-server",
            bs,
            "--topic",
            &topic,
            "--group",
            &group,
            "--from-beginning",
            "--max-messages",
            "10",
            "--timeout-ms",
            "60000",
        ],
        None,
    );
    let mut got: Vec<String> = consumed.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
    got.sort();
    assert_eq!(got, records);

    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            bs,
            "--topic",
            &topic,
            "--count",
            "50",
            "--idempotent",
            "--prefix",
            "rd44",
        ]),
        "librdkafka produce",
    );
    let group = unique_name("g44-rd");
    let out = ok(
        python_client(&[
            "consume",
            "--bootstrap",
            bs,
            "--topic",
            &topic,
            "--group",
            &group,
            "--count",
            "60",
            "--timeout",
            "60",
        ]),
        "librdkafka consume",
    );
    let n = out.lines().filter(|l| l.contains("\"value\"")).count();
    assert_eq!(n, 60, "{out}");
    assert!(!mg.log().contains("cannot rewrite response"), "{}", tail(&mg.log(), 20));
}
