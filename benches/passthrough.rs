//! The pass-through hot path, sans I/O: what mirrorgate does to every client request before
//! its bytes go upstream unchanged.
//!
//! - `decode`: [`FrameDecoder::decode`] splitting a buffer of many pipelined frames (what one
//!   `read` from a busy client socket holds);
//! - `prefix_route`: [`ParsedRequest::parse`] (the header read once: prefix, client id, header
//!   length) and [`route::decide`] on each frame (for Produce
//!   this includes reading `acks` with [`route::produce_acks`]);
//! - `pipeline`: both, frame after frame, as `proxy::connection` runs them;
//! - `pipeline_spans`: `pipeline` plus the request span `proxy::connection` makes per
//!   request ([`RequestSpan`] start and finish against a fixed response), first with traces
//!   off (`off`: the flag check only), then with OTLP traces installed at the sampling ratio
//!   `MIRRORGATE_BENCH_SAMPLING_RATIO` (default 1.0, the default of `traces.sampling_ratio`;
//!   `on_ratio_R`). The HTTP exporter points at a closed port, so the batch thread's export
//!   fails and sampled spans are dropped after being built and queued.
//! - `fetch_response`: the response side of a consumer's Fetch, [`intercept::apply`] with
//!   [`ResponseAction::Fetch`] as `proxy::connection` runs it on every Fetch answer: a Fetch
//!   v17 response of 6 partitions holding 1 MiB of record batches (16 KiB uncompressed v2
//!   batches, no placeholder, no `node_endpoints`), which goes back to the client unchanged;
//!   throughput in bytes and in frames.
//! - `produce_response`: the response side of a producer's acks=all Produce, [`intercept::apply`]
//!   with [`ResponseAction::Produce`] on a Produce v13 answer of one topic (by id) and one
//!   partition without KIP-951 `node_endpoints`, which goes back unchanged (`walk`), beside
//!   kafka-protocol's `ProduceResponse::decode` of the same body (`decode`, what `apply` did
//!   for every Produce v10+ response before it walked them).
//!
//! Inputs are real requests encoded with kafka-protocol: a small Fetch v12 (~100 bytes, a
//! consumer's long poll) and a large Produce v9 (1 MiB of opaque `records`, a flexible request
//! header so that `produce_acks` walks the compact `transactional_id`). Throughput is reported
//! both in bytes and in elements (= frames).
//!
//! Future work: an end-to-end side-by-side harness (client → mirrorgate → broker vs.
//! client → broker, over loopback TCP) needs a real or fake destination that answers
//! ApiVersions and Metadata at startup; it belongs in its own bench once `proxy::run` can be
//! pointed at such a fake. These benches measure only the CPU mirrorgate adds per frame.
//!
//! `cargo bench --bench passthrough` (add `-- --quick` for a short run).

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::FetchResponse;
use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest, RequestHeader, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use mirrorgate::proxy::brokers::BrokerDirectory;
use mirrorgate::proxy::intercept;
use mirrorgate::proxy::request_span::RequestSpan;
use mirrorgate::proxy::rewrite::AddressMap;
use mirrorgate::proxy::route::ResponseAction;
use mirrorgate::proxy::route::{self, Decision};
use mirrorgate::wire::frame::{length_prefix, FrameDecoder, DEFAULT_MAX_FRAME_BYTES};
use mirrorgate::wire::request::ParsedRequest;
use std::hint::black_box;

/// One frame body (header + request, no length prefix) of `api_key` at `version`.
fn encode_request(api_key: ApiKey, version: i16, correlation_id: i32, body: &impl Encodable) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("bench")));
    let mut out = BytesMut::new();
    header.encode(&mut out, api_key.request_header_version(version)).expect("encode header");
    body.encode(&mut out, version).expect("encode body");
    out.freeze()
}

/// A Fetch v12 request for one partition: the small, frequent request of a consumer.
fn fetch_frame(correlation_id: i32) -> Bytes {
    let req = FetchRequest::default()
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(52_428_800)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("bench-topic-small")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(123_456)
                .with_partition_max_bytes(1_048_576)])]);
    encode_request(ApiKey::Fetch, 12, correlation_id, &req)
}

/// A Produce v9 request (flexible header, compact `transactional_id`, acks=-1) carrying
/// `records_bytes` of opaque record-batch bytes: the large request of a producer.
fn produce_frame(correlation_id: i32, records_bytes: usize) -> Bytes {
    let records = Bytes::from(vec![0x5a; records_bytes]);
    let topic = TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_static_str("bench-topic-large")))
        .with_partition_data(vec![PartitionProduceData::default().with_index(0).with_records(Some(records))]);
    let req = ProduceRequest::default()
        .with_transactional_id(None)
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![topic]);
    encode_request(ApiKey::Produce, 9, correlation_id, &req)
}

/// `count` frames made by `make`, length-prefixed back to back, as one read buffer.
fn pipelined(count: usize, make: impl Fn(i32) -> Bytes) -> (BytesMut, Vec<Bytes>) {
    let frames: Vec<Bytes> = (0..count).map(|i| make(i as i32)).collect();
    let mut buf = BytesMut::with_capacity(frames.iter().map(|f| f.len() + 4).sum());
    for f in &frames {
        buf.put_slice(&length_prefix(f.len()));
        buf.put_slice(f);
    }
    (buf, frames)
}

fn route_one(frame: Bytes) -> bool {
    route_parsed(&ParsedRequest::parse(frame).expect("valid prefix"))
}

fn route_parsed(request: &ParsedRequest) -> bool {
    match route::decide(request, |_| true) {
        Decision::Upstream { expect_response, .. } => expect_response,
        Decision::Close(reason) => panic!("bench frame refused: {reason}"),
    }
}

struct Case {
    name: &'static str,
    buf: BytesMut,
    frames: Vec<Bytes>,
}

fn cases() -> Vec<Case> {
    let (buf, frames) = pipelined(1000, fetch_frame);
    let small = Case { name: "fetch_small", buf, frames };
    let (buf, frames) = pipelined(16, |c| produce_frame(c, 1024 * 1024));
    let large = Case { name: "produce_1mib", buf, frames };
    for c in [&small, &large] {
        let f = &c.frames[0];
        let p = ParsedRequest::parse(f.clone()).expect("prefix");
        if p.api_key() == ApiKey::Produce as i16 {
            assert_eq!(route::produce_acks(&p), Some(-1), "Produce acks must be readable");
        }
        assert!(route_one(f.clone()), "{} expects a response", c.name);
    }
    vec![small, large]
}

/// Splits every frame off `buf`; returns how many there were.
fn decode_all(decoder: &FrameDecoder, mut buf: BytesMut) -> usize {
    let mut n = 0;
    while let Some(frame) = decoder.decode(&mut buf).expect("valid frames") {
        black_box(frame);
        n += 1;
    }
    n
}

/// Splits every frame off `buf` and routes it, as `proxy::connection` does; returns how many
/// frames expect a response.
fn decode_and_route_all(decoder: &FrameDecoder, mut buf: BytesMut) -> usize {
    let mut n = 0;
    while let Some(frame) = decoder.decode(&mut buf).expect("valid frames") {
        n += usize::from(route_one(frame));
    }
    n
}

/// Both throughput units for one case: bytes (frame bodies plus prefixes) and frames.
fn units(case: &Case) -> [(&'static str, Throughput); 2] {
    [("bytes", Throughput::Bytes(case.buf.len() as u64)), ("frames", Throughput::Elements(case.frames.len() as u64))]
}

fn benches(c: &mut Criterion) {
    let cases = cases();
    let decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_BYTES);
    for case in &cases {
        eprintln!(
            "{}: {} frames of {} bytes (+4 prefix) = {} bytes per buffer",
            case.name,
            case.frames.len(),
            case.frames[0].len(),
            case.buf.len()
        );
    }

    let mut g = c.benchmark_group("decode");
    for case in &cases {
        for (unit, tp) in units(case) {
            g.throughput(tp);
            g.bench_with_input(BenchmarkId::new(unit, case.name), case, |b, case| {
                b.iter_batched(|| case.buf.clone(), |buf| decode_all(&decoder, buf), BatchSize::LargeInput)
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("prefix_route");
    for case in &cases {
        for (unit, tp) in units(case) {
            g.throughput(tp);
            g.bench_with_input(BenchmarkId::new(unit, case.name), case, |b, case| {
                b.iter(|| case.frames.iter().filter(|f| route_one(black_box((*f).clone()))).count())
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("pipeline");
    for case in &cases {
        for (unit, tp) in units(case) {
            g.throughput(tp);
            g.bench_with_input(BenchmarkId::new(unit, case.name), case, |b, case| {
                b.iter_batched(|| case.buf.clone(), |buf| decode_and_route_all(&decoder, buf), BatchSize::LargeInput)
            });
        }
    }
    g.finish();
}

/// `decode_and_route_all` plus one request span per frame, finished against `response`.
fn decode_route_and_span_all(decoder: &FrameDecoder, mut buf: BytesMut, response: &[u8]) -> usize {
    let mut n = 0;
    while let Some(frame) = decoder.decode(&mut buf).expect("valid frames") {
        let request = ParsedRequest::parse(frame).expect("prefix");
        let prefix = *request.header();
        let mut span = RequestSpan::start(&request);
        if let Some(s) = span.as_mut() {
            s.forwarded(None);
        }
        n += usize::from(route_parsed(&request));
        if let Some(s) = span {
            let at = std::time::SystemTime::now();
            let error_code =
                mirrorgate::wire::header::response_error_code(prefix.api_key, prefix.api_version, response);
            s.finish(&prefix, "bench", None, error_code, at, response.len());
        }
    }
    n
}

fn span_benches(c: &mut Criterion) {
    let cases = cases();
    let decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_BYTES);
    // A response header (correlation id, no tags) and a few body bytes.
    let response = [0u8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut g = c.benchmark_group("pipeline_spans");
    let run = |g: &mut criterion::BenchmarkGroup<'_, _>, label: &str| {
        for case in &cases {
            g.throughput(Throughput::Elements(case.frames.len() as u64));
            g.bench_with_input(BenchmarkId::new(format!("{label}/frames"), case.name), case, |b, case| {
                b.iter_batched(
                    || case.buf.clone(),
                    |buf| decode_route_and_span_all(&decoder, buf, &response),
                    BatchSize::LargeInput,
                )
            });
        }
    };
    run(&mut g, "off");
    let ratio: f64 = std::env::var("MIRRORGATE_BENCH_SAMPLING_RATIO").ok().and_then(|r| r.parse().ok()).unwrap_or(1.0);
    let settings = mirrorgate::config::TracesSettings {
        protocol: mirrorgate::config::OtlpProtocol::HttpProtobuf,
        endpoint: "http://127.0.0.1:9/v1/traces".into(),
        headers: Vec::new(),
        sampling_ratio: ratio,
        service_name: "bench".into(),
        resource_attributes: Vec::new(),
    };
    let _guard = mirrorgate::telemetry::traces::install(&settings).expect("install OTLP traces");
    run(&mut g, &format!("on_ratio_{ratio}"));
    g.finish();
}

/// `bytes` of uncompressed v2 record batches of about 16 KiB each (1 KiB values), from
/// offset `base`.
fn record_batches(bytes: usize, base: i64) -> Bytes {
    let mut out = BytesMut::with_capacity(bytes + 16 * 1024);
    let mut offset = base;
    while out.len() < bytes {
        let records: Vec<Record> = (0..16)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 3,
                producer_id: 1234,
                producer_epoch: 0,
                timestamp_type: TimestampType::Creation,
                offset: offset + i,
                sequence: (offset + i) as i32,
                timestamp: 1_700_000_000_000 + offset + i,
                key: Some(Bytes::from_static(b"key")),
                value: Some(Bytes::from(vec![(i % 251) as u8; 1024])),
                headers: Default::default(),
            })
            .collect();
        let options = RecordEncodeOptions { version: 2, compression: Compression::None };
        RecordBatchEncoder::encode(&mut out, &records, &options).expect("encode batch");
        offset += 16;
    }
    out.freeze()
}

/// A Fetch v17 response frame (header v1 + body) of one topic with 6 partitions sharing
/// 1 MiB of record batches: what a consumer's Fetch brings back under load.
fn fetch_response_frame() -> Bytes {
    use kafka_protocol::messages::fetch_response::LeaderIdAndEpoch;
    let partitions = (0..6)
        .map(|p| {
            PartitionData::default()
                .with_partition_index(p)
                .with_high_watermark(10_000_000)
                .with_last_stable_offset(10_000_000)
                .with_log_start_offset(0)
                .with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(kafka_protocol::messages::BrokerId(1))
                        .with_leader_epoch(3),
                )
                .with_records(Some(record_batches(1024 * 1024 / 6, 1_000_000)))
        })
        .collect();
    let resp = FetchResponse::default().with_session_id(77).with_responses(vec![FetchableTopicResponse::default()
        .with_topic_id(uuid::Uuid::from_bytes([5; 16]))
        .with_partitions(partitions)]);
    let mut out = BytesMut::new();
    out.put_i32(42); // correlation id
    out.put_u8(0); // header v1: no tagged fields
    resp.encode(&mut out, 17).expect("encode Fetch response");
    out.freeze()
}

/// Broker addresses as mirrorgate advertises them (unused: no `node_endpoints`).
struct Advertised;

impl AddressMap for Advertised {
    fn advertised(&self, node_id: i32) -> (StrBytes, i32) {
        (StrBytes::from_static_str("127.0.0.1"), 9000 + node_id)
    }
}

fn fetch_response_benches(c: &mut Criterion) {
    let frame = fetch_response_frame();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let directory = BrokerDirectory::new(vec!["127.0.0.1:9092".into()], tx);
    let apply = |f: Bytes| {
        intercept::apply(ResponseAction::Fetch, ApiKey::Fetch as i16, 17, f, &Advertised, &directory, &[], None)
            .expect("a valid Fetch response")
    };
    let out = apply(frame.clone());
    assert_eq!(out, frame, "nothing to change: the broker's bytes");
    eprintln!("fetch_response: one frame of {} bytes", frame.len());
    let mut g = c.benchmark_group("fetch_response");
    for (unit, tp) in [("bytes", Throughput::Bytes(frame.len() as u64)), ("frames", Throughput::Elements(1))] {
        g.throughput(tp);
        g.bench_function(BenchmarkId::new(unit, "v17_6x_1mib"), |b| b.iter(|| apply(black_box(frame.clone()))));
    }
    g.finish();
}

/// A Produce v13 response frame (header v1 + body): one topic by id, one partition appended at
/// base offset 41, no errors, no `node_endpoints`: what an acks=all producer gets back.
fn produce_response_frame() -> Bytes {
    use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
    use kafka_protocol::messages::ProduceResponse;
    let resp = ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
        .with_topic_id(uuid::Uuid::from_bytes([5; 16]))
        .with_partition_responses(vec![PartitionProduceResponse::default()
            .with_index(3)
            .with_base_offset(41)
            .with_log_append_time_ms(-1)])]);
    let mut out = BytesMut::new();
    out.put_i32(42); // correlation id
    out.put_u8(0); // header v1: no tagged fields
    resp.encode(&mut out, 13).expect("encode Produce response");
    out.freeze()
}

fn produce_response_benches(c: &mut Criterion) {
    use kafka_protocol::messages::ProduceResponse;
    use kafka_protocol::protocol::Decodable;
    let frame = produce_response_frame();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let directory = BrokerDirectory::new(vec!["127.0.0.1:9092".into()], tx);
    let apply = |f: Bytes| {
        intercept::apply(ResponseAction::Produce, ApiKey::Produce as i16, 13, f, &Advertised, &directory, &[], None)
            .expect("a valid Produce response")
    };
    assert_eq!(apply(frame.clone()), frame, "nothing to change: the broker's bytes");
    let body = frame.slice(5..);
    let mut g = c.benchmark_group("produce_response");
    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::new("frames", "v13_walk"), |b| b.iter(|| apply(black_box(frame.clone()))));
    g.bench_function(BenchmarkId::new("frames", "v13_decode"), |b| {
        b.iter(|| ProduceResponse::decode(&mut black_box(body.clone()), 13).expect("decodes"))
    });
    g.finish();
}

criterion_group!(passthrough, benches, span_benches, fetch_response_benches, produce_response_benches);
criterion_main!(passthrough);
