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
