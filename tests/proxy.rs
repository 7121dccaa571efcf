//! The transparent proxy against a real Kafka 4.1 destination: Kafka's Java tools, librdkafka
//! and mirrorgate's own client through mirrorgate; no destination address leaks; bad input
//! closes only the offending connection.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kafka_protocol::messages::{
    DescribeClusterRequest, DescribeClusterResponse, FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest,
    MetadataResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use mirrorgate::client::BrokerConnection;
use support::*;

const V: &str = "4.1.1";

fn values(stdout: &str) -> Vec<String> {
    let mut v: Vec<String> = stdout.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
    v.sort();
    v
}

#[test]
fn java_tools_topics_console_clients_and_consumer_groups() {
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("java-tools");
    let group = unique_name("group");
    let bs = mg.bootstrap.as_str();

    let out = kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", bs, "--create", "--topic", &topic, "--partitions", "2", "--replication-factor", "1"],
        None,
    );
    assert!(out.contains(&format!("Created topic {topic}")), "{out}");
    let list = kafka_tool_ok(V, "topics", &["--bootstrap-server", bs, "--list"], None);
    assert!(list.lines().any(|l| l.trim() == topic), "topic missing from --list: {list}");
    let describe = kafka_tool_ok(V, "topics", &["--bootstrap-server", bs, "--describe", "--topic", &topic], None);
    assert!(describe.contains("PartitionCount: 2"), "{describe}");

    let records: Vec<String> = (0..20).map(|i| format!("record-{i:02}")).collect();
    kafka_tool_ok(
        V,
        "console-producer",
        &["--bootstrap-server", bs, "--topic", &topic],
        Some(&(records.join("\n") + "\n")),
    );
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
            "20",
            "--timeout-ms",
            "60000",
        ],
        None,
    );
    assert_eq!(values(&consumed), records);

    let groups =
        kafka_tool_ok(V, "consumer-groups", &["--bootstrap-server", bs, "--describe", "--group", &group], None);
    let mut committed = 0;
    let mut rows = 0;
    for line in groups.lines().filter(|l| l.split_whitespace().nth(1) == Some(topic.as_str())) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (current, end): (i64, i64) = (cols[3].parse().unwrap(), cols[4].parse().unwrap());
        assert_eq!(current, end, "group lags on a partition: {line}");
        committed += current;
        rows += 1;
    }
    assert_eq!((rows, committed), (2, 20), "consumer-groups --describe: {groups}");
}

#[test]
fn java_transactions_commit_and_abort_read_committed() {
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("txn");
    let bs = mg.bootstrap.as_str();
    kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", bs, "--create", "--topic", &topic, "--partitions", "1", "--replication-factor", "1"],
        None,
    );
    let txn_id = unique_name("txn-id");
    ok(
        java_program(
            V,
            "TxnProducer.java",
            &[
                "--bootstrap-server",
                bs,
                "--topic",
                &topic,
                "--transactional-id",
                &txn_id,
                "--commit",
                "c1,c2,c3",
                "--abort",
                "a1,a2",
                // The aborted transaction first: a1, a2 at offsets 0-1, its ABORT marker at
                // 2, then c1..c3 at 3-5 and the COMMIT marker at 6.
                "--order",
                "abort-first",
            ],
        ),
        "TxnProducer",
    );
    // read_committed sees only the committed transaction...
    let committed = kafka_tool(
        V,
        "console-consumer",
        &[
            "--bootstrap-server",
            bs,
            "--topic",
            &topic,
            "--from-beginning",
            "--consumer-property",
            "isolation.level=read_committed",
            // Aborted records come first in the log (`--order abort-first`): had they
            // leaked, they would be the first 2 of the 3 read.
            "--max-messages",
            "3",
            "--timeout-ms",
            "60000",
        ],
        None,
    );
    assert_eq!(values(&String::from_utf8_lossy(&committed.stdout)), vec!["c1", "c2", "c3"]);
    // ...while the aborted records really are in the log (so the check above can fail).
    let all = kafka_tool(
        V,
        "console-consumer",
        &[
            "--bootstrap-server",
            bs,
            "--topic",
            &topic,
            "--from-beginning",
            "--consumer-property",
            "isolation.level=read_uncommitted",
            "--max-messages",
            "5",
            "--timeout-ms",
            "60000",
        ],
        None,
    );
    // In log order: the aborted records sit below the committed ones.
    let in_order: Vec<String> = String::from_utf8_lossy(&all.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    assert_eq!(in_order, vec!["a1", "a2", "c1", "c2", "c3"]);
}

#[test]
fn librdkafka_idempotent_producer_and_consumer_group() {
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let topic = unique_name("librdkafka");
    let bs = mg.bootstrap.as_str();
    kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", bs, "--create", "--topic", &topic, "--partitions", "3", "--replication-factor", "1"],
        None,
    );
    let produced = ok(
        python_client(&[
            "produce",
            "--bootstrap",
            bs,
            "--topic",
            &topic,
            "--count",
            "300",
            "--idempotent",
            "--prefix",
            "lr",
        ]),
        "librdkafka produce",
    );
    assert!(produced.contains("300"), "{produced}");
    let group = unique_name("lr-group");
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
            "300",
            "--timeout",
            "60",
        ]),
        "librdkafka consume",
    );
    let mut got: Vec<(String, String)> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            (v["key"].as_str().unwrap_or_default().to_string(), v["value"].as_str().unwrap_or_default().to_string())
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, String)> = (0..300).map(|i| (format!("k-{i}"), format!("lr-{i}"))).collect();
    want.sort();
    assert_eq!(got, want);
}

fn assert_no_leak(what: &str, frame: &[u8], dest_ports: &[u16]) {
    let hay = frame;
    let contains = |needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    assert!(!contains(b"127.0.0.1"), "{what} response contains the destination host 127.0.0.1");
    for p in dest_ports {
        assert!(!contains(p.to_string().as_bytes()), "{what} response contains destination port {p} as text");
        assert!(!contains(&i32::from(*p).to_be_bytes()), "{what} response contains destination port {p} as INT32");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_destination_address_in_metadata_find_coordinator_describe_cluster() {
    let dest = cluster("dest");
    let mg = Mirrorgate::start_with(&dest, MirrorgateOptions { advertised_host: "localhost", ..Default::default() });
    let ports = dest.ports();
    let addr = format!("127.0.0.1:{}", mg.first_port);
    let mut conn =
        BrokerConnection::connect(&addr, Duration::from_secs(5), Duration::from_secs(30), 1 << 20).await.unwrap();

    for version in [1i16, 9, 12] {
        let frame = conn.send_raw(&MetadataRequest::default().with_topics(None), version).await.unwrap();
        assert_no_leak(&format!("Metadata v{version}"), &frame, &ports);
        let hv = if version >= 9 { 1 } else { 0 };
        let start = mirrorgate::wire::header::response_header_len(&frame, hv).unwrap();
        let resp = MetadataResponse::decode(&mut frame.slice(start..), version).unwrap();
        assert!(!resp.brokers.is_empty());
        for b in &resp.brokers {
            assert_eq!(b.host.as_str(), "localhost");
            assert_eq!(b.port, i32::from(mg.first_port) + 1 + b.node_id.0);
        }
    }

    let group = unique_name("coord");
    for version in [3i16, 6] {
        let req = if version < 4 {
            FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.clone()))
        } else {
            FindCoordinatorRequest::default().with_coordinator_keys(vec![StrBytes::from_string(group.clone())])
        };
        let frame = eventually(Duration::from_secs(120), || {
            let frame = futures_lite_block(conn.send_raw(&req, version)).map_err(|e| e.to_string())?;
            let start = mirrorgate::wire::header::response_header_len(&frame, 1).unwrap();
            let resp = FindCoordinatorResponse::decode(&mut frame.slice(start..), version).unwrap();
            let (err, port, host) = if version < 4 {
                (resp.error_code, resp.port, resp.host.to_string())
            } else {
                (resp.coordinators[0].error_code, resp.coordinators[0].port, resp.coordinators[0].host.to_string())
            };
            if err != 0 {
                return Err(format!("FindCoordinator v{version} error {err}"));
            }
            assert_eq!(host, "localhost");
            assert!(port > i32::from(mg.first_port), "coordinator port {port}");
            Ok(frame)
        });
        assert_no_leak(&format!("FindCoordinator v{version}"), &frame, &ports);
    }

    let frame = conn.send_raw(&DescribeClusterRequest::default(), 1).await.unwrap();
    assert_no_leak("DescribeCluster v1", &frame, &ports);
    let start = mirrorgate::wire::header::response_header_len(&frame, 1).unwrap();
    let resp = DescribeClusterResponse::decode(&mut frame.slice(start..), 1).unwrap();
    assert_eq!(resp.error_code, 0);
    assert!(resp.brokers.iter().all(|b| b.host.as_str() == "localhost"));
}

/// Runs a future to completion from inside a sync closure running on a tokio test.
fn futures_lite_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// Sends `bytes` on a fresh connection and waits until mirrorgate closes it.
fn send_and_expect_close(port: u16, bytes: &[u8], half_close: bool) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytes).unwrap();
    if half_close {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("mirrorgate answered {n} bytes instead of closing"),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("connection not closed by mirrorgate: {e}"),
    }
}

#[test]
fn bad_input_closes_only_that_connection() {
    let dest = cluster("dest");
    let mut mg = Mirrorgate::start(&dest);
    let topic = unique_name("bad-input");
    let bs = mg.bootstrap.clone();
    kafka_tool_ok(
        V,
        "topics",
        &["--bootstrap-server", &bs, "--create", "--topic", &topic, "--partitions", "1", "--replication-factor", "1"],
        None,
    );
    // A well-behaved client holds a connection open across all the bad ones.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut good = rt
        .block_on(BrokerConnection::connect(
            &format!("127.0.0.1:{}", mg.first_port),
            Duration::from_secs(5),
            Duration::from_secs(30),
            1 << 20,
        ))
        .unwrap();
    let rss_before = mg.rss_kib();
    let broker_port = mg.first_port + 2; // node id 1

    send_and_expect_close(broker_port, &0x7fff_ffffu32.to_be_bytes(), false);
    mg.wait_for_log("frame length 2147483647 bytes exceeds the maximum of 104857600 bytes", Duration::from_secs(30));

    let mut cut = 100i32.to_be_bytes().to_vec();
    cut.extend_from_slice(&[0, 3, 0, 12, 0, 0, 0, 1, 0, 0]);
    send_and_expect_close(broker_port, &cut, true);
    mg.wait_for_log("connection closed mid-frame: 10 of 100 bytes received", Duration::from_secs(30));

    let mut unknown = 10i32.to_be_bytes().to_vec();
    unknown.extend_from_slice(&[0x79, 0x18, 0, 0, 0, 0, 0, 7, 0xff, 0xff]); // api key 31000
    send_and_expect_close(broker_port, &unknown, false);
    mg.wait_for_log("unknown api key 31000 (version 0, correlation id 7)", Duration::from_secs(30));

    // The start of a real TLS 1.2/1.3 ClientHello record.
    let hello = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    send_and_expect_close(mg.first_port, &hello, false);
    mg.wait_for_log("TLS handshake on a plaintext port", Duration::from_secs(30));

    // A request mirrorgate forwards unread (Heartbeat v4: flexible header, no client id) with a
    // body the broker cannot parse: the broker closes its connection (SocketServer closes on an
    // InvalidRequestException), and the response side's reason closes the client's.
    let mut garbled = 17i32.to_be_bytes().to_vec();
    garbled.extend_from_slice(&[0, 12, 0, 4, 0, 0, 0, 9, 0xff, 0xff, 0]);
    garbled.extend_from_slice(&[0xff; 6]);
    send_and_expect_close(broker_port, &garbled, false);
    mg.wait_for_log("destination broker closed the connection", Duration::from_secs(30));
    let log = mg.log();
    assert!(
        log.lines()
            .any(|l| l.contains("client connection closed") && l.contains("destination broker closed the connection")),
        "the client connection's close line does not carry the response side's reason:\n{}",
        tail(&log, 30)
    );

    assert!(mg.is_running(), "mirrorgate exited");
    let meta = rt
        .block_on(good.send(&MetadataRequest::default().with_topics(None), 12))
        .expect("the good connection still works");
    assert!(meta.topics.iter().any(|t| t.name.as_ref().map(|n| n.as_str()) == Some(topic.as_str())));
    ok(
        python_client(&["produce", "--bootstrap", &bs, "--topic", &topic, "--count", "10", "--prefix", "after"]),
        "produce after bad input",
    );
    let rss_after = mg.rss_kib();
    assert!(rss_after < rss_before + 20 * 1024, "memory jumped from {rss_before} KiB to {rss_after} KiB");
    let log = mg.log();
    assert!(log.matches("client connection closed").count() >= 5, "{}", tail(&log, 30));
}

/// Issue 15, item 4: junk connections do not flood the log. 300 connections that each send a
/// bad frame and 300 that open and close write at most the first few unusual closes at info
/// (the rest are counted in the per-minute summary), and no per-connection open line.
#[test]
fn junk_connections_write_a_handful_of_log_lines() {
    let dest = cluster("dest");
    let mg = Mirrorgate::start(&dest);
    let before = mg.log().lines().count();
    for _ in 0..300 {
        send_and_expect_close(mg.first_port, &0x7fff_ffffu32.to_be_bytes(), false);
        drop(TcpStream::connect(("127.0.0.1", mg.first_port)).unwrap());
    }
    // The last closes are logged (or not) right after they happen.
    std::thread::sleep(Duration::from_secs(2));
    let log = mg.log();
    // Test instances log at debug; what an operator sees is info and above.
    let new: Vec<&str> = log
        .lines()
        .skip(before)
        .filter(|l| l.contains(" INFO ") || l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    let closed = new.iter().filter(|l| l.contains("client connection closed")).count();
    let opened = new.iter().filter(|l| l.contains("client connection opened")).count();
    assert!(closed >= 1, "the first unusual close is logged:\n{}", tail(&log, 20));
    assert!(closed <= 5, "{closed} close lines for 600 junk connections:\n{}", tail(&log, 20));
    assert_eq!(opened, 0, "connection opens are debug lines:\n{}", tail(&log, 20));
    assert!(log.lines().skip(before).any(|l| l.contains("DEBUG") && l.contains("client connection opened")));
    assert!(new.len() <= 10, "{} new log lines for 600 junk connections:\n{}", new.len(), tail(&log, 20));
}

/// `GET path` on `addr`: the raw HTTP response.
fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The value of counter `series` (name and labels exactly as scraped) on `/metrics`; 0 when
/// it is not there yet.
fn counter(metrics: &str, series: &str) -> f64 {
    http_get(metrics, "/metrics")
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

/// mirrorgate in front of `dest` serving `/metrics` on the address returned.
fn with_metrics(dest: &Cluster) -> (Mirrorgate, String) {
    let metrics = format!("127.0.0.1:{}", free_port_range(1));
    let yaml = format!("metrics:\n  listen: {metrics}\n");
    let mg = Mirrorgate::start_in_front_of(
        &dest.bootstrap,
        FrontOptions::default(),
        MirrorgateOptions { extra_yaml: &yaml, ..Default::default() },
    );
    (mg, metrics)
}

/// Creates `topic` with `partitions` on `bootstrap`, replication factor 1, `extra` arguments.
fn create_topic(bootstrap: &str, topic: &str, partitions: u32, extra: &[&str]) {
    let partitions = partitions.to_string();
    let mut args = vec!["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", &partitions];
    args.extend(["--replication-factor", "1"]);
    args.extend(extra);
    kafka_tool_ok(V, "topics", &args, None);
}

fn produce_mixed(bootstrap: &str, topic: &str, count: usize, big: usize) {
    let (count, big) = (count.to_string(), big.to_string());
    let args = ["produce-mixed", "--bootstrap", bootstrap, "--topic", topic, "--count", &count, "--big", &big];
    ok(python_client(&args), "produce-mixed");
}

const STREAMED_WHOLE: &str = "mirrorgate_client_fetch_streamed_total{outcome=\"whole\"}";
const STREAMED_CLOSED: &str = "mirrorgate_client_fetch_streamed_total{outcome=\"closed\"}";
const SPLICED_BYTES: &str = "mirrorgate_client_fetch_spliced_bytes_total";

/// Fetch responses of 256 KiB and more go to the client while they arrive (issue 13 item 4):
/// librdkafka and the Java consumer read through mirrorgate exactly what they read from the
/// broker directly (every partition, offset, key, value, header and timestamp), and mirrorgate
/// counts the responses it streamed. The bodies of the large batches move by splice (plain TCP
/// on both sides), which mirrorgate counts too.
#[test]
fn large_fetch_responses_are_forwarded_while_they_arrive_and_read_as_direct() {
    let dest = cluster("dest");
    let (mg, metrics) = with_metrics(&dest);
    let topic = unique_name("streamed");
    create_topic(&dest.bootstrap, &topic, 3, &["--config", "max.message.bytes=4000000"]);
    // Varied records with three values of 1.5 MB: responses of up to 1 MiB a partition, and
    // larger ones for the big records.
    produce_mixed(&dest.bootstrap, &topic, 6000, 3);
    let n = 6003;
    let direct = consume_all(&dest.bootstrap, &topic, n, "read_uncommitted");
    assert_eq!(direct.len(), n);
    let via = consume_all(&mg.bootstrap, &topic, n, "read_uncommitted");
    assert_eq!(via, direct, "librdkafka through mirrorgate vs directly");
    let librdkafka_streamed = counter(&metrics, STREAMED_WHOLE);
    assert!(librdkafka_streamed >= 3.0, "{librdkafka_streamed} Fetch responses streamed to librdkafka");

    let java = |bootstrap: &str| {
        let out = kafka_tool_ok(
            V,
            "console-consumer",
            &[
                "--bootstrap-server",
                bootstrap,
                "--topic",
                &topic,
                "--from-beginning",
                "--max-messages",
                &n.to_string(),
                "--timeout-ms",
                "60000",
                "--property",
                "print.partition=true",
                "--property",
                "print.offset=true",
                "--property",
                "print.key=true",
            ],
            None,
        );
        values(&out)
    };
    let (direct, via) = (java(&dest.bootstrap), java(&mg.bootstrap));
    // One line per record, more where a value holds line breaks.
    assert_eq!(direct.iter().filter(|l| l.starts_with("Partition:")).count(), n);
    assert!(via == direct, "the Java consumer read other records through mirrorgate");
    let java_streamed = counter(&metrics, STREAMED_WHOLE) - librdkafka_streamed;
    assert!(java_streamed >= 3.0, "{java_streamed} Fetch responses streamed to the Java consumer");
    assert_eq!(counter(&metrics, STREAMED_CLOSED), 0.0, "no streamed response was cut off");
    // Plain TCP on both sides: the large batches moved by splice, not through mirrorgate.
    if cfg!(target_os = "linux") {
        let spliced = counter(&metrics, SPLICED_BYTES);
        assert!(spliced > 4_000_000.0, "only {spliced} bytes of the large batches were spliced");
    }
}

/// A streamed Fetch response that turns out to need an edit after part of it went out (a
/// placeholder batch at the end of its second partition, found after the first partition's
/// 1 MB was forwarded) is never completed: mirrorgate closes the connection before its last
/// byte. The retry gets the edited response (the placeholder as a COMMIT control batch, the
/// first partition's batches as the broker wrote them), and a consumer reads every record.
/// Whether the first partition goes out before the placeholder arrives depends on how the
/// broker's bytes come in, so the Fetch is repeated (each answer must be the edited one) until
/// one is cut off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_response_that_needs_a_late_edit_is_cut_off_and_the_retry_is_edited() {
    use bytes::Bytes;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, InitProducerIdRequest, ProducerId};
    use mirrorgate::client::cluster::{Acks, ClusterClient, ClusterOptions};
    use mirrorgate::wire::batch::{placeholder_batch, BatchIter, OwnBatch};

    let dest = cluster("dest");
    let (mg, metrics) = with_metrics(&dest);
    let topic = unique_name("late-edit");
    create_topic(&dest.bootstrap, &topic, 2, &[]);
    let produce = |partition: &str, count: &str, prefix: &str| {
        let args = [
            "produce",
            "--bootstrap",
            &dest.bootstrap,
            "--topic",
            &topic,
            "--partition",
            partition,
            "--count",
            count,
            "--prefix",
            prefix,
        ];
        ok(python_client(&args), "produce");
    };
    produce("0", "40000", "partition-zero-record-value");
    produce("1", "40000", "partition-one-record-value");
    let dst = ClusterClient::connect(ClusterOptions::new(vec![dest.bootstrap.clone()])).await.unwrap();
    // A placeholder is written by an idempotent producer, as a mirror writes it.
    let mut conn = BrokerConnection::connect(&dest.bootstrap, Duration::from_secs(5), Duration::from_secs(30), 1 << 20)
        .await
        .unwrap();
    let init = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(-1)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let pid = eventually(Duration::from_secs(30), || {
        let resp = futures_lite_block(conn.send(&init, 4)).map_err(|e| e.to_string())?;
        match resp.error_code {
            0 => Ok(resp),
            code => Err(format!("InitProducerId error {code}")),
        }
    });
    let own = OwnBatch {
        base_offset: 0,
        count: 2,
        timestamp: 0,
        producer_id: pid.producer_id.0,
        producer_epoch: pid.producer_epoch,
        base_sequence: 0,
    };
    assert_eq!(dst.produce_segments(&topic, 1, vec![placeholder_batch(&own, 7, 0)], Acks::All).await.unwrap(), 40_000);
    produce("1", "10", "after");

    let id = dst.topic(&topic).await.unwrap().topic_id.0;
    let partition = |p: i32| {
        FetchPartition::default()
            .with_partition(p)
            .with_fetch_offset(0)
            .with_partition_max_bytes(4 << 20)
            .with_current_leader_epoch(-1)
            .with_last_fetched_epoch(-1)
            .with_log_start_offset(-1)
    };
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(8 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(uuid::Uuid::from_bytes(id))
            .with_partitions(vec![partition(0), partition(1)])]);
    let fetch = |addr: String, req: FetchRequest| async move {
        let mut conn =
            BrokerConnection::connect(&addr, Duration::from_secs(5), Duration::from_secs(30), 1 << 26).await?;
        conn.send(&req, 16).await
    };
    let direct = fetch(dest.bootstrap.clone(), req.clone()).await.unwrap();
    let p0_direct: Bytes = direct.responses[0].partitions[0].records.clone().unwrap();
    assert!(p0_direct.len() > 512 * 1024, "partition 0 answers {} bytes", p0_direct.len());
    let edited_right = |resp: &FetchResponse| {
        assert_eq!(
            resp.responses[0].partitions[0].records.clone().unwrap(),
            p0_direct,
            "partition 0 as the broker wrote it"
        );
        let p1: Vec<_> =
            BatchIter::new(resp.responses[0].partitions[1].records.clone().unwrap()).map_while(Result::ok).collect();
        assert!(p1.iter().all(|b| !b.is_placeholder()), "a placeholder reached the client");
        let shape: Vec<_> = p1.iter().map(|b| (b.base_offset(), b.next_offset(), b.is_control())).collect();
        assert!(
            p1.iter().any(|b| b.is_control() && b.base_offset() == 40_000),
            "offsets 40000-1 as a control batch: (base, next, control) {:?}",
            &shape[shape.len().saturating_sub(5)..]
        );
        assert_eq!(p1.last().unwrap().next_offset(), 40_012);
    };
    // mirrorgate's port for broker 1 (the bootstrap port + 1 + node id).
    let (host, bootstrap_port) = mg.bootstrap.rsplit_once(':').unwrap();
    let broker = format!("{host}:{}", bootstrap_port.parse::<u16>().unwrap() + 2);

    let mut answered = 0;
    let cut = loop {
        match fetch(broker.clone(), req.clone()).await {
            Ok(resp) => edited_right(&resp),
            Err(e) => break e,
        }
        answered += 1;
        assert!(answered < 10, "10 Fetches answered whole, none streamed and cut off");
    };
    assert_eq!(counter(&metrics, STREAMED_CLOSED), 1.0, "cut off ({cut}) after {answered} whole answers");
    assert!(mg.log().contains("needed an edit after part of it went out"), "no log line for the cut-off response");
    // The retry: this client address gets store-and-forward for a while.
    edited_right(&fetch(broker, req).await.unwrap());

    // A consumer through mirrorgate reads every record, no placeholder among them.
    let got = consume_all(&mg.bootstrap, &topic, 80_010, "read_committed");
    assert_eq!(got.len(), 80_010);
    let odd: Vec<_> = got
        .iter()
        .filter(|r| !r["value"].as_str().is_some_and(|v| v.starts_with("partition-") || v.starts_with("after")))
        .take(5)
        .collect();
    assert!(odd.is_empty(), "records that were not produced: {odd:?}");
    assert_eq!(counter(&metrics, STREAMED_CLOSED), 1.0, "the retries were not streamed");
}
