//! Resource limits against hostile clients (issue 11 item 7, issue 32 item 6), each next to a
//! well-behaved client that must not notice: the global request memory budget
//! (`queued_max_request_bytes`, charged as bytes arrive), the partial-frame, idle and write
//! timeouts, and `max_connections` / `max_connections_per_ip`. One single-node destination shared by the tests; each test runs
//! its own mirrorgate with the limits it checks. Hostile clients connect from loopback
//! aliases (127.0.0.2, 127.0.0.3) so that per-address limits can tell them from the good
//! client on 127.0.0.1.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, FetchRequest, ProduceRequest, RequestHeader, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use mirrorgate::client::conn::BrokerConnection;
use support::*;

const V: &str = "4.1.1";

/// A TCP connection to `127.0.0.1:port` from the loopback address `from`.
fn connect_from(from: &str, port: u16) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    socket.bind(&local.into()).unwrap();
    let remote: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    socket.connect(&remote.into()).unwrap();
    socket.into()
}

/// Waits up to `timeout` for the peer to close `s`; returns how long that took, or `None`
/// if it stayed open (or answered bytes).
fn closed_within(s: &mut TcpStream, timeout: Duration) -> Option<Duration> {
    let start = Instant::now();
    s.set_read_timeout(Some(timeout)).unwrap();
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(0) => Some(start.elapsed()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Some(start.elapsed()),
        _ => None,
    }
}

/// An ApiVersions v0 request frame (correlation id `id`): what proves a connection is served.
fn api_versions_frame(id: i32) -> Vec<u8> {
    let mut body = vec![0, 18, 0, 0];
    body.extend_from_slice(&id.to_be_bytes());
    body.extend_from_slice(&[0xff, 0xff]); // null client id
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend(body);
    frame
}

/// Sends ApiVersions on `s` and checks an answer with the same correlation id comes back.
fn served(s: &mut TcpStream, id: i32) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    if s.write_all(&api_versions_frame(id)).is_err() {
        return false;
    }
    let mut head = [0u8; 8];
    if s.read_exact(&mut head).is_err() {
        return false;
    }
    let len = i32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
    let mut rest = vec![0u8; len - 4];
    s.read_exact(&mut rest).is_ok() && i32::from_be_bytes(head[4..8].try_into().unwrap()) == id
}

/// Produces `count` records through `bootstrap` and reads them back (librdkafka).
fn good_client_round_trip(bootstrap: &str, topic: &str, count: usize, prefix: &str) {
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--count",
            &count.to_string(),
            "--prefix",
            prefix,
        ]),
        "well-behaved produce",
    );
    let recs = consume_all(bootstrap, topic, count, "read_committed");
    let values: Vec<&str> = recs.iter().filter_map(|r| r["value"].as_str()).filter(|v| v.starts_with(prefix)).collect();
    assert_eq!(values.len(), count, "the well-behaved client read back {values:?}");
}

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
            "--partitions",
            "1",
            "--replication-factor",
            "1",
        ],
        None,
    );
}

#[test]
fn request_memory_budget_holds_against_large_half_sent_frames() {
    let dest = cluster("dest");
    // Frames up to 8 MiB, 16 MiB buffered across connections at most.
    let mg = Mirrorgate::start_with(
        &dest,
        MirrorgateOptions {
            extra_yaml: "max_frame_bytes: 8388608\nqueued_max_request_bytes: 16777216\n",
            ..MirrorgateOptions::default()
        },
    );
    let topic = unique_name("limits-memory");
    create_topic(&dest.bootstrap, &topic);
    let rss_before = mg.rss_kib();
    // Ten clients each announce an 8,000,000-byte request and send 6 MB of it, then stall.
    // Unbounded, mirrorgate would buffer ~60 MB; with the budget at most 16 MiB are reserved.
    let port = mg.first_port;
    let hostile: Vec<_> = (0..10)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = connect_from("127.0.0.2", port);
                s.set_write_timeout(Some(Duration::from_secs(8))).unwrap();
                let mut sent = 0usize;
                let _ = s.write_all(&8_000_000i32.to_be_bytes());
                let chunk = vec![0u8; 64 * 1024];
                while sent < 6_000_000 {
                    match s.write(&chunk) {
                        Ok(n) => sent += n,
                        Err(_) => break, // mirrorgate stopped reading: backpressure
                    }
                }
                (s, sent)
            })
        })
        .collect();
    let hostile: Vec<(TcpStream, usize)> = hostile.into_iter().map(|h| h.join().unwrap()).collect();
    let sent: usize = hostile.iter().map(|(_, n)| n).sum();
    mg.wait_for_log("queued_max_request_bytes reached", Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(1)); // let the admitted frames' bytes be read
    let rss_held = mg.rss_kib();
    // While they hold their frames, a well-behaved client produces and consumes.
    good_client_round_trip(&mg.bootstrap, &topic, 50, "good-memory");
    eprintln!("hostile clients pushed {sent} bytes; mirrorgate RSS {rss_before} KiB -> {rss_held} KiB");
    assert!(
        rss_held < rss_before + 32 * 1024,
        "mirrorgate buffered beyond the 16 MiB budget: RSS {rss_before} KiB -> {rss_held} KiB ({sent} bytes pushed)"
    );
    drop(hostile);
    let log = mg.log();
    assert!(
        log.contains("queued_max_request_bytes: 16777216") || log.contains("queued_max_request_bytes=16777216"),
        "{}",
        tail(&log, 20)
    );
}

#[test]
fn trickling_and_idle_clients_are_closed_while_a_long_poll_is_not() {
    let dest = cluster("dest");
    let mg = Mirrorgate::start_with(
        &dest,
        MirrorgateOptions {
            extra_yaml: "client_frame_timeout_ms: 2000\nconnections_max_idle_ms: 3000\n",
            ..MirrorgateOptions::default()
        },
    );
    let topic = unique_name("limits-timeouts");
    create_topic(&dest.bootstrap, &topic);
    let port = mg.first_port;

    // A client that announces 100 bytes and sends one per 500 ms.
    let trickle = std::thread::spawn(move || {
        let mut s = connect_from("127.0.0.2", port);
        s.write_all(&100i32.to_be_bytes()).unwrap();
        let start = Instant::now();
        for _ in 0..40 {
            std::thread::sleep(Duration::from_millis(500));
            if s.write_all(&[0]).is_err() {
                break;
            }
        }
        let closed = closed_within(&mut s, Duration::from_secs(5));
        (start.elapsed(), closed)
    });
    // A client that connects and says nothing.
    let mut idle = connect_from("127.0.0.3", port);
    let idle_closed = closed_within(&mut idle, Duration::from_secs(15)).expect("an idle client must be closed");
    assert!(
        idle_closed >= Duration::from_millis(2500),
        "idle client closed after {idle_closed:?}, before the 3000 ms idle timeout"
    );
    let (trickled, closed) = trickle.join().unwrap();
    assert!(closed.is_some(), "the trickling client was never closed ({trickled:?})");
    assert!(trickled < Duration::from_secs(15), "the trickling client was held {trickled:?}");

    // A long-polling Fetch (max wait 5 s, longer than the idle timeout) is answered, not cut.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fetched = rt.block_on(async {
        let addr = format!("127.0.0.1:{}", mg.first_port + 2); // node id 1
        let mut c = BrokerConnection::connect(&addr, Duration::from_secs(5), Duration::from_secs(30), 1 << 20).await?;
        let _ = c.send(&ApiVersionsRequest::default(), 0).await?;
        let req = FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(5000)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)])]);
        let started = Instant::now();
        let resp = c.send(&req, 12).await?;
        anyhow::Ok((started.elapsed(), resp.responses.len()))
    });
    let (waited, topics) = fetched.expect("a long-polling Fetch must be answered");
    assert_eq!(topics, 1);
    assert!(
        waited >= Duration::from_millis(4000),
        "the broker did not hold the Fetch ({waited:?}); the check proves nothing"
    );

    good_client_round_trip(&mg.bootstrap, &topic, 20, "good-timeouts");
    let log = mg.log();
    assert!(log.contains("request frame not complete"), "{}", tail(&log, 30));
    assert!(log.contains("idle for"), "{}", tail(&log, 30));
}

#[test]
fn connection_limits_refuse_the_extra_connections_only() {
    let dest = cluster("dest");
    let mg = Mirrorgate::start_in_front_of(
        &dest.bootstrap,
        FrontOptions {
            listener_yaml: "    max_connections: 10\n    max_connections_per_ip: 3\n",
            ..FrontOptions::default()
        },
        MirrorgateOptions::default(),
    );
    let topic = unique_name("limits-conns");
    create_topic(&dest.bootstrap, &topic);
    let port = mg.first_port;
    // Three from 127.0.0.2 are served; the fourth from that address is closed at once.
    let mut from2: Vec<TcpStream> = (0..3).map(|_| connect_from("127.0.0.2", port)).collect();
    for (i, s) in from2.iter_mut().enumerate() {
        assert!(served(s, i as i32), "connection {i} from 127.0.0.2 not served");
    }
    let mut extra = connect_from("127.0.0.2", port);
    assert!(closed_within(&mut extra, Duration::from_secs(10)).is_some(), "a 4th connection from 127.0.0.2 was kept");
    // Three more from 127.0.0.3 fill the listener to 6 of 10; the good client (librdkafka
    // opens a bootstrap and a broker connection) still fits and works.
    let mut from3: Vec<TcpStream> = (0..3).map(|_| connect_from("127.0.0.3", port)).collect();
    for (i, s) in from3.iter_mut().enumerate() {
        assert!(served(s, 10 + i as i32), "connection {i} from 127.0.0.3 not served");
    }
    good_client_round_trip(&mg.bootstrap, &topic, 20, "good-conns");
    // Four from other addresses fill the listener to 10 (retried while the good client's
    // closed connections still count); the 11th is refused by max_connections.
    let _more: Vec<TcpStream> = (0..4)
        .map(|i| {
            eventually(Duration::from_secs(20), || {
                let mut s = connect_from(&format!("127.0.0.{}", 4 + i), port);
                if served(&mut s, 20 + i) {
                    Ok(s)
                } else {
                    Err(format!("connection {i} of the last four not served"))
                }
            })
        })
        .collect();
    let mut over = connect_from("127.0.0.9", port);
    assert!(closed_within(&mut over, Duration::from_secs(10)).is_some(), "an 11th connection was kept");
    // Slots come back when connections close.
    drop(from2);
    let mut again = eventually(Duration::from_secs(20), || {
        let mut s = connect_from("127.0.0.9", port);
        if served(&mut s, 30) {
            Ok(s)
        } else {
            Err("still refused after three connections closed".to_string())
        }
    });
    assert!(served(&mut again, 31));
    let log = mg.log();
    assert!(log.contains("max_connections_per_ip (3)"), "{}", tail(&log, 30));
    assert!(log.contains("max_connections (10)"), "{}", tail(&log, 30));
}

/// A Produce request (acks all) of one record of 1,000,000 bytes to partition 0 of `topic`:
/// a request of about 1 MiB, which goes through the request memory.
fn one_mib_produce(topic: &str) -> ProduceRequest {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(vec![b'v'; 1_000_000])),
        headers: IndexMap::new(),
    };
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        &[record],
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    ProduceRequest::default().with_acks(-1).with_timeout_ms(20_000).with_topic_data(vec![TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_partition_data(vec![PartitionProduceData::default().with_index(0).with_records(Some(batch.freeze()))])])
}

/// Sends [`one_mib_produce`] on `addr` (retrying while the new partition has no leader yet):
/// the time the accepted request took and its base offset.
fn produce_one_mib(addr: &str, topic: &str) -> (Duration, i64) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c =
            BrokerConnection::connect(addr, Duration::from_secs(5), Duration::from_secs(30), 1 << 24).await.unwrap();
        for _ in 0..20 {
            let started = Instant::now();
            let resp = c.send(&one_mib_produce(topic), 9).await.expect("the 1 MiB produce was not answered");
            let p = &resp.responses[0].partition_responses[0];
            match p.error_code {
                0 => return (started.elapsed(), p.base_offset),
                5 | 6 => tokio::time::sleep(Duration::from_millis(250)).await,
                e => panic!("produce refused: error {e}: {p:?}"),
            }
        }
        panic!("the partition never got a leader");
    })
}

/// Three clients announce 100 MiB requests (the largest `max_frame_bytes` allows) and send
/// 1 KiB of each: the request memory is charged as bytes arrive, so they hold 64 KiB each,
/// and a well-behaved 1 MiB produce is served while they are pending. On the code before
/// issue 32 each announcement reserved 100 MiB of the 256 MiB budget: the third waited, and
/// the produce queued behind it until the partial-frame timeout (here 5 minutes), so it
/// timed out.
#[test]
fn frames_announced_but_not_sent_hold_no_request_memory() {
    let dest = cluster("dest");
    let mg = Mirrorgate::start_with(
        &dest,
        MirrorgateOptions { extra_yaml: "client_frame_timeout_ms: 300000\n", ..MirrorgateOptions::default() },
    );
    let topic = unique_name("limits-announced");
    create_topic(&dest.bootstrap, &topic);
    let port = mg.first_port;
    let mut hostile: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = connect_from("127.0.0.2", port);
            s.write_all(&(100i32 << 20).to_be_bytes()).unwrap();
            s.write_all(&[0u8; 1024]).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1)); // mirrorgate has read the announcements
    let (took, base_offset) = produce_one_mib(&mg.bootstrap, &topic);
    eprintln!("a 1 MiB produce took {took:?} while three 100 MiB requests were announced");
    assert_eq!(base_offset, 0);
    for (i, s) in hostile.iter_mut().enumerate() {
        assert!(closed_within(s, Duration::from_millis(200)).is_none(), "hostile connection {i} is no longer pending");
    }
    assert!(!mg.log().contains("queued_max_request_bytes reached"), "{}", tail(&mg.log(), 20));
}

/// A request frame without the length prefix, for a raw socket.
fn frame<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, req: &R) -> Vec<u8> {
    let mut b = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .encode(&mut b, key.request_header_version(version))
        .unwrap();
    req.encode(&mut b, version).unwrap();
    let mut out = (b.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&b);
    out
}

/// A client that asks for about 40 MB of Fetch responses and reads none of them is closed
/// after `client_write_timeout_ms`, while a well-behaved client produces and consumes. On the
/// code before issue 32 the connection stayed open, its responses waiting for ever.
#[test]
fn a_client_reading_none_of_its_responses_is_closed_after_the_write_timeout() {
    let dest = cluster("dest");
    let mg = Mirrorgate::start_with(
        &dest,
        MirrorgateOptions { extra_yaml: "client_write_timeout_ms: 3000\n", ..MirrorgateOptions::default() },
    );
    let topic = unique_name("limits-noread");
    create_topic(&dest.bootstrap, &topic);
    for _ in 0..8 {
        produce_one_mib(&dest.bootstrap, &topic);
    }
    // A small receive window, so that mirrorgate's writes stall after a few MB.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.bind(&"127.0.0.2:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    socket.connect(&format!("127.0.0.1:{}", mg.first_port).parse::<SocketAddr>().unwrap().into()).unwrap();
    let mut s: TcpStream = socket.into();
    let fetch = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(2 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.clone())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(2 << 20)])]);
    let mut burst = Vec::new();
    for id in 0..20 {
        burst.extend(frame(ApiKey::Fetch, 12, id, &fetch));
    }
    s.write_all(&burst).unwrap();
    let started = Instant::now();
    mg.wait_for_log("client_write_timeout_ms", Duration::from_secs(60));
    eprintln!("closed {:?} after the requests were sent", started.elapsed());
    // The connection is closed: what was buffered for the client, then the end.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut sink = vec![0u8; 1 << 20];
    loop {
        match s.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the stalled connection is still open: {e}"),
        }
    }
    let good = unique_name("limits-noread-good");
    create_topic(&dest.bootstrap, &good);
    good_client_round_trip(&mg.bootstrap, &good, 10, "good-noread");
}
