//! The record-batch toolkit on the mirror's write path, sans I/O:
//!
//! - `patch_header`: [`patch_header`] on one v2 batch — copy the 61-byte header, set producer
//!   id / epoch / base sequence, clear the transactional bit and recompute the CRC32C over the
//!   new header and the untouched payload. Payloads of 1 KiB, 64 KiB and 1 MiB; throughput in
//!   batch bytes (the CRC reads every one of them), i.e. the "header patch + CRC" GB/s figure.
//! - `batch_iter`: [`BatchIter`] over a 10 MiB Fetch `records` buffer of 16 KiB batches
//!   (header walk only, payloads untouched); throughput in buffer bytes.
//! - `produce_frame`: [`ProduceFrameBuilder`] for 100 partitions × one batch given as
//!   `[patched header, payload]` (1 topic × 100 partitions, and 10 topics × 10 partitions);
//!   throughput in partitions. The payloads are shared, never copied, so the cost does not
//!   depend on their size.
//! - `present_patch`: [`patch_base_offsets`] over a Fetch `records` buffer of a shifted
//!   partition (1 MiB of 16 KiB batches, and 1 MiB of 1 KiB batches): the copy of the buffer
//!   plus an 8-byte base-offset patch per batch that the proxy adds to a Fetch response of a
//!   shifted partition (`proxy::present`, docs/protocol.md); throughput in buffer bytes.
//!
//! - `placeholder_check`: the check the proxy runs on every partition of every Fetch response
//!   (`batch::has_placeholder`, DESIGN §4.3) over 10 MiB of 16 KiB data batches with no
//!   placeholder — uncompressed (worst case: the first record's key is read) and with the
//!   compression bit set (header only); throughput in batches. And the whole response path
//!   for a Fetch v12 response of 100 partitions × one 16 KiB batch without placeholders
//!   (`intercept::apply`: decode, check, forward the broker's bytes), which a Fetch below v16
//!   of a non-mirror topic did not pay before; throughput in partitions.
//!
//! Batches are real v2 batches (kafka-protocol's `RecordBatchEncoder`, uncompressed — for the
//! CRC and the header walk a compressed payload is just bytes).
//!
//! `cargo bench --bench batch` (add `-- --quick` for a short run).

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use mirrorgate::mirror::model::OffsetSegment;
use mirrorgate::proxy::present::fetch::patch_base_offsets;
use mirrorgate::wire::batch::{patch_header, Batch, BatchIter, HeaderPatch, HEADER_LEN};
use mirrorgate::wire::produce::ProduceFrameBuilder;

/// One uncompressed v2 batch whose payload (records after the 61-byte header) is close to
/// `payload_bytes`: records of at most 16 KiB of value each.
fn batch_with_payload(payload_bytes: usize, base_offset: i64) -> Batch {
    const VALUE: usize = 16 * 1024;
    let count = payload_bytes.div_ceil(VALUE).max(1);
    let per = payload_bytes / count - 16; // ~16 bytes of record framing each
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 3,
            producer_id: 1234,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: base_offset + i as i64,
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from(vec![(i % 251) as u8; per])),
            headers: IndexMap::new(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(&mut out, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .expect("encode batch");
    let mut it = BatchIter::new(out.freeze());
    let b = it.next().expect("one batch").expect("valid batch");
    assert!(it.next().is_none(), "records split into more than one batch");
    b
}

const PATCH: HeaderPatch = HeaderPatch {
    base_offset: Some(1_000_000),
    producer_id: Some(42_000),
    producer_epoch: Some(0),
    base_sequence: Some(12_345),
    clear_transactional: true,
    base_timestamp: None,
};

fn bench_patch_header(c: &mut Criterion) {
    let mut g = c.benchmark_group("patch_header");
    for (label, payload) in [("1KiB", 1024), ("64KiB", 64 * 1024), ("1MiB", 1024 * 1024)] {
        let batch = batch_with_payload(payload, 0);
        g.throughput(Throughput::Bytes(batch.bytes().len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(label), &batch, |b, batch| {
            b.iter(|| patch_header(black_box(batch), black_box(&PATCH)))
        });
    }
    g.finish();
}

fn bench_batch_iter(c: &mut Criterion) {
    let mut buf = BytesMut::with_capacity(10 << 20);
    let mut offset = 0;
    while buf.len() + 16 * 1024 <= 10 << 20 {
        let b = batch_with_payload(16 * 1024 - HEADER_LEN, offset);
        offset = b.next_offset();
        buf.extend_from_slice(b.bytes());
    }
    let buf = buf.freeze();
    let batches = BatchIter::new(buf.clone()).count();
    let mut g = c.benchmark_group("batch_iter");
    g.throughput(Throughput::Bytes(buf.len() as u64));
    g.bench_function(BenchmarkId::new("10MiB_of_16KiB", batches), |b| {
        b.iter(|| {
            let mut last = 0;
            for batch in BatchIter::new(black_box(buf.clone())) {
                last = batch.expect("valid").next_offset();
            }
            last
        })
    });
    g.finish();
}

fn bench_produce_frame(c: &mut Criterion) {
    let batch = batch_with_payload(64 * 1024, 0);
    let header = Bytes::copy_from_slice(&patch_header(&batch, &PATCH));
    let payload = batch.payload();
    let mut g = c.benchmark_group("produce_frame");
    g.throughput(Throughput::Elements(100));
    for (topics, per_topic) in [(1, 100), (10, 10)] {
        let names: Vec<String> = (0..topics).map(|t| format!("mirror.orders-{t:03}")).collect();
        g.bench_function(BenchmarkId::new("100_partitions", format!("{topics}x{per_topic}")), |b| {
            b.iter(|| {
                let mut builder = ProduceFrameBuilder::new(12, 7, "mirrorgate", -1, 30_000);
                for name in &names {
                    for p in 0..per_topic {
                        builder.partition(name.as_str(), p, vec![header.clone(), payload.clone()]);
                    }
                }
                builder.finish().expect("frame")
            })
        });
    }
    g.finish();
}

fn bench_placeholder_check(c: &mut Criterion) {
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use mirrorgate::proxy::brokers::BrokerDirectory;
    use mirrorgate::proxy::intercept;
    use mirrorgate::proxy::rewrite::AddressMap;
    use mirrorgate::proxy::route::ResponseAction;
    use mirrorgate::wire::batch::has_placeholder;

    let mut plain = BytesMut::with_capacity(10 << 20);
    let mut offset = 0;
    while plain.len() + 16 * 1024 <= 10 << 20 {
        let b = batch_with_payload(16 * 1024 - HEADER_LEN, offset);
        offset = b.next_offset();
        plain.extend_from_slice(b.bytes());
    }
    let mut compressed = plain.clone();
    let mut pos = 0;
    while pos < compressed.len() {
        let len = 12 + i32::from_be_bytes(compressed[pos + 8..pos + 12].try_into().unwrap()) as usize;
        compressed[pos + 22] |= 4; // zstd bit (the CRC is not checked here)
        pos += len;
    }
    let batches = BatchIter::new(plain.clone().freeze()).count() as u64;
    let mut g = c.benchmark_group("placeholder_check");
    g.throughput(Throughput::Elements(batches));
    for (label, buf) in [("uncompressed", plain.freeze()), ("compressed", compressed.freeze())] {
        g.bench_function(BenchmarkId::new("10MiB_of_16KiB", label), |b| b.iter(|| has_placeholder(black_box(&buf))));
    }

    struct Map;
    impl AddressMap for Map {
        fn advertised(&self, node_id: i32) -> (StrBytes, i32) {
            (StrBytes::from_static_str("127.0.0.1"), 9000 + node_id)
        }
    }
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let directory = BrokerDirectory::new(vec!["b:9092".into()], tx);
    let batch = batch_with_payload(16 * 1024 - HEADER_LEN, 0);
    let resp = FetchResponse::default().with_responses(
        (0..10)
            .map(|t| {
                FetchableTopicResponse::default()
                    .with_topic(TopicName(StrBytes::from_string(format!("orders-{t}"))))
                    .with_partitions(
                        (0..10)
                            .map(|p| {
                                PartitionData::default()
                                    .with_partition_index(p)
                                    .with_high_watermark(1000)
                                    .with_records(Some(batch.bytes().clone()))
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    let mut frame = BytesMut::new();
    frame.extend_from_slice(&7i32.to_be_bytes()); // response header v1: correlation id,
    frame.extend_from_slice(&[0]); // no tagged fields (Fetch v12 is flexible)
    resp.encode(&mut frame, 12).expect("encode");
    let frame = frame.freeze();
    g.throughput(Throughput::Elements(100));
    g.bench_function(BenchmarkId::new("fetch_response_v12", "100_partitions_of_16KiB"), |b| {
        b.iter(|| {
            intercept::apply(ResponseAction::Fetch, 1, 12, black_box(frame.clone()), &Map, &directory, &[], None)
                .expect("apply")
        })
    });
    g.finish();
}

fn bench_present_patch(c: &mut Criterion) {
    let segments = [OffsetSegment { source_start: 3_000_000_000, destination_start: 0 }];
    let mut g = c.benchmark_group("present_patch");
    for batch_bytes in [16 * 1024, 1024] {
        let mut buf = BytesMut::with_capacity(1 << 20);
        let mut offset = 0;
        while buf.len() + batch_bytes <= 1 << 20 {
            let b = batch_with_payload(batch_bytes - HEADER_LEN, offset);
            offset = b.next_offset();
            buf.extend_from_slice(b.bytes());
        }
        let buf = buf.freeze();
        let batches = BatchIter::new(buf.clone()).count();
        g.throughput(Throughput::Bytes(buf.len() as u64));
        g.bench_function(BenchmarkId::new("1MiB", format!("{batches}_batches")), |b| {
            b.iter(|| patch_base_offsets(black_box(&buf), &segments).expect("shifted"))
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_patch_header,
    bench_batch_iter,
    bench_produce_frame,
    bench_present_patch,
    bench_placeholder_check
);
criterion_main!(benches);
