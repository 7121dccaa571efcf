//! `--verify`: compares a mirror partition on the source and the destination batch by batch
//! (DESIGN §4.12). Every committed source data batch must sit on the destination at its
//! source offset minus the segment's shift, with the same offsets, record count, timestamps
//! and byte-identical (still compressed) payload; a compacted source batch with holes inside
//! (split into runs on the destination), and consecutive small source batches merged into one
//! destination batch (`mirror.coalesce.max.bytes`; compressed ones recompressed with
//! `mirror.coalesce.recompress`), must have the same
//! records, compared byte for byte (offsets, timestamps, keys, values, headers as raw bytes
//! in order); every other
//! destination batch must be a placeholder, a transaction marker or an aborted transactional
//! batch (`mirror.transaction.markers = real`). The destination must reach the source's LSO and
//! must not end beyond the source's log end (offsets through the offset map): extra offsets
//! at its end, data or placeholders, are a difference. Reports the first difference.

use bytes::Bytes;

use crate::client::cluster::{ClusterClient, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::wire::batch::{Batch, BatchIter, ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL};
use crate::wire::{records, split};

use super::dataplane::source::{self, FetchSettings};
use super::model::OffsetSegment;

/// What a verified partition holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Committed data batches compared.
    pub data_batches: usize,
    /// Records in them.
    pub records: i64,
    /// Source offsets (from the first compared one) that carry no committed data.
    pub skipped_offsets: i64,
    /// Source offset up to which the destination was compared (exclusive): the source LSO
    /// (or the `source_end` asked for).
    pub source_end: i64,
    /// Destination log end (its high watermark, read after the comparison), in destination
    /// offsets: at least `source_end` mapped through the offset map, never above the source's
    /// log end (mapped); equal to `source_end` when the source is idle and has no open
    /// transaction.
    pub destination_end: i64,
}

#[derive(Debug)]
struct Summary {
    base: i64,
    last: i64,
    record_count: i32,
    attributes: i16,
    base_ts: i64,
    max_ts: i64,
    payload: Bytes,
    whole: Bytes,
    /// The batch stamps LogAppendTime.
    log_append_time: bool,
}

impl Summary {
    /// Offsets holding no record (a compacted batch).
    fn has_holes(&self) -> bool {
        i64::from(self.record_count) != self.last - self.base + 1
    }
}

/// One record as a consumer reads it, byte for byte: offset, timestamp, key, value and
/// headers (raw keys, in order, duplicates kept).
#[derive(Debug, Clone, PartialEq, Eq)]
struct RecordRow {
    offset: i64,
    /// The record's own attributes byte (unused by Kafka today; merging keeps it as it is).
    attributes: i8,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// Largest decompressed records section `--verify` reads, bytes.
const MAX_SECTION: usize = 256 << 20;

/// Every record of the batch `whole` (decompressing it), offsets shifted by `-shift`. With
/// `log_append_time` (the source batch stamps LogAppendTime) every record reads as the
/// batch's max timestamp, as a consumer reads it (the destination keeps the append time as
/// the max timestamp, DESIGN §4.10).
fn records(whole: &Bytes, shift: i64, log_append_time: bool) -> Result<Vec<RecordRow>, String> {
    let b = BatchIter::new(whole.clone()).next().ok_or("truncated batch")?.map_err(|e| e.to_string())?;
    let section = split::records_section(&b, MAX_SECTION).map_err(|e| e.to_string())?;
    let views = records::walk(&section, b.record_count()).map_err(|e| e.to_string())?;
    let lat = log_append_time || b.is_log_append_time();
    Ok(views
        .iter()
        .map(|r| RecordRow {
            attributes: r.attributes,
            offset: b.base_offset().saturating_add(i64::from(r.offset_delta)).saturating_sub(shift),
            timestamp: if lat { b.max_timestamp() } else { b.base_timestamp().saturating_add(r.timestamp_delta) },
            key: r.key.map(<[u8]>::to_vec),
            value: r.value.map(<[u8]>::to_vec),
            headers: r.headers.iter().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))).collect(),
        })
        .collect())
}

/// What differs between two records, for the report.
fn record_difference(want: &RecordRow, got: &RecordRow) -> &'static str {
    if want.offset != got.offset {
        "offset"
    } else if want.timestamp != got.timestamp {
        "timestamp"
    } else if want.key != got.key {
        "key"
    } else if want.value != got.value {
        "value"
    } else if want.attributes != got.attributes {
        "record attributes"
    } else {
        "headers"
    }
}

fn summary(b: &Batch) -> Summary {
    Summary {
        base: b.base_offset(),
        last: b.last_offset(),
        record_count: b.record_count(),
        // The destination holds committed data outside transactions, and CreateTime batches
        // for a LogAppendTime source (restored by the proxy on Fetch).
        attributes: b.attributes() & !ATTR_TRANSACTIONAL & !ATTR_LOG_APPEND_TIME,
        base_ts: b.base_timestamp(),
        max_ts: b.max_timestamp(),
        payload: b.payload(),
        whole: b.bytes().clone(),
        log_append_time: b.is_log_append_time(),
    }
}

fn shift_at(segments: &[OffsetSegment], source_offset: i64) -> i64 {
    segments.iter().rev().find(|s| s.source_start <= source_offset).map_or(0, OffsetSegment::shift)
}

const SETTINGS: FetchSettings = FetchSettings {
    max_wait: std::time::Duration::from_millis(0),
    backoff: std::time::Duration::from_millis(0),
    min_bytes: 0,
    response_max_bytes: 8 << 20,
    partition_max_bytes: 4 << 20,
    inflight_max_bytes: 8 << 20,
    throttled_rate: None,
    fetchers: 1,
};

/// Committed data batches of the source partition from its log start up to `end` (or its
/// LSO when `None`), with the LSO.
async fn source_batches(
    client: &ClusterClient,
    topic: &str,
    p: i32,
    end: Option<i64>,
) -> Result<(Vec<Summary>, i64, i64), String> {
    let mut offset = client.list_offsets(topic, p, EARLIEST_TIMESTAMP).await.map_err(|e| e.to_string())?;
    let start = offset;
    let mut out = Vec::new();
    loop {
        let c = source::fetch(client, topic, p, offset, -1, &SETTINGS).await.map_err(|e| e.to_string())?;
        if c.error_code != 0 {
            return Err(format!("source fetch {topic}-{p}@{offset}: error {}", c.error_code));
        }
        let stop = end.unwrap_or(c.last_stable_offset);
        if offset >= stop {
            return Ok((out, start, stop));
        }
        let mut aborted_pending = c.aborted.clone();
        let mut aborted = std::collections::HashSet::new();
        let before = offset;
        for b in BatchIter::new(c.records.clone()) {
            let b = b.map_err(|e| e.to_string())?;
            if b.next_offset() <= offset || b.base_offset() >= stop {
                continue;
            }
            aborted_pending.retain(|(pid, first)| {
                if *first <= b.last_offset() {
                    aborted.insert(*pid);
                    false
                } else {
                    true
                }
            });
            if b.is_control() {
                aborted.remove(&b.producer_id());
            } else if !(b.is_transactional() && aborted.contains(&b.producer_id())) {
                out.push(summary(&b));
            }
            offset = b.next_offset();
        }
        if offset == before {
            return Err(format!("source fetch {topic}-{p}@{offset} made no progress (LSO {stop})"));
        }
    }
}

/// Compares `topic`-`p` on `source` and `dest` up to the source's LSO (or `source_end`),
/// which the destination must have reached, then checks that the destination's log end (high
/// watermark) is not beyond the source's log end read after it (the mirror copies only what
/// the source holds, so a live mirror may still grow, but never past the source).
///
/// # Errors
/// The first difference, naming offsets (extra destination offsets at its end included), or
/// a read failure.
pub async fn verify_partition(
    source: &ClusterClient,
    dest: &ClusterClient,
    topic: &str,
    p: i32,
    segments: &[OffsetSegment],
    source_end: Option<i64>,
) -> Result<VerifyReport, String> {
    let (src, src_start, src_end) = source_batches(source, topic, p, source_end).await?;
    let dest_end_limit = src_end - shift_at(segments, src_end);
    // Destination: every batch from its log start to the mapped end.
    let mut offset = dest.list_offsets(topic, p, EARLIEST_TIMESTAMP).await.map_err(|e| e.to_string())?;
    let mut dest_data = Vec::new();
    while offset < dest_end_limit {
        let f = dest.fetch(topic, p, offset, 4 << 20).await.map_err(|e| e.to_string())?;
        let before = offset;
        for b in BatchIter::new(f.records.clone()) {
            let b = b.map_err(|e| e.to_string())?;
            if b.next_offset() <= offset || b.base_offset() >= dest_end_limit {
                continue;
            }
            // Placeholders (read directly), control batches (real markers, or the ones
            // mirrorgate serves in place of placeholders) and transactional batches (aborted
            // source records written as aborted records: the mirror writes committed data
            // with the transactional bit cleared) hold no committed data.
            if !b.is_placeholder() && !b.is_control() && !b.is_transactional() {
                dest_data.push(summary(&b));
            }
            offset = b.next_offset();
        }
        if offset == before {
            // No batch at `offset`: fine when the source holds no data from there to its end
            // (a gap at the end, e.g. an aborted transaction: the mirror starts a segment
            // and writes nothing, and through mirrorgate the end is presented as the end of
            // the segment before it, `model::source_end_offset`), a difference otherwise.
            if src.iter().any(|s| s.last - shift_at(segments, s.base) >= offset) {
                return Err(format!(
                    "destination {topic}-{p} ends at {offset}, source data up to {src_end} maps to {dest_end_limit}"
                ));
            }
            break;
        }
    }
    // The destination's log end, then the source's: the destination only grows by copying
    // what the source already holds, so an end beyond the source's (read later) is extra.
    let dest_log_end = dest.list_offsets(topic, p, LATEST_TIMESTAMP).await.map_err(|e| e.to_string())?;
    let src_log_end = source.list_offsets(topic, p, LATEST_TIMESTAMP).await.map_err(|e| e.to_string())?;
    let src_log_end_mapped = src_log_end - shift_at(segments, src_log_end);
    if dest_log_end > src_log_end_mapped.max(dest_end_limit) {
        return Err(format!(
            "destination {topic}-{p} ends at offset {dest_log_end}, beyond the source's log end {src_log_end} (destination offset {src_log_end_mapped}): {} offset(s) at the destination's end that the source does not have",
            dest_log_end - src_log_end_mapped.max(dest_end_limit)
        ));
    }
    let mut report = VerifyReport { source_end: src_end, destination_end: dest_log_end, ..Default::default() };
    let compacted = source
        .describe_topic_configs(topic)
        .await
        .map(|c| c.get("cleanup.policy").is_some_and(|v| v.split(',').any(|x| x.trim() == "compact")))
        .unwrap_or(false);
    if compacted {
        // Each side's cleaner rewrites batches on its own schedule: compare what a consumer
        // reads, record by record.
        compare_compacted(&src, &dest_data, segments, topic, p, &mut report)?;
        let covered: i64 = src.iter().map(|s| s.last - s.base + 1).sum();
        report.skipped_offsets = (src_end - src_start) - covered;
        return Ok(report);
    }
    let mut cursor = 0;
    let mut i = 0;
    while let Some(s) = src.get(i) {
        i += 1;
        let shift = shift_at(segments, s.base);
        if s.has_holes() {
            // A compacted batch is split into dense runs on the destination: compare its
            // records byte for byte (a merged or reordered header is a difference).
            let lat = s.log_append_time;
            let want = records(&s.whole, shift, false)?;
            let mut got = Vec::new();
            while let Some(d) = dest_data.get(cursor).filter(|d| d.base <= s.last - shift) {
                got.extend(records(&d.whole, 0, lat)?);
                cursor += 1;
            }
            if got != want {
                let detail = match want.iter().zip(&got).find(|(w, g)| w != g) {
                    Some((w, g)) => format!(
                        "{} of the record at source offset {} (destination {})",
                        record_difference(w, g),
                        w.offset + shift,
                        g.offset
                    ),
                    None => format!("{} records on the destination, {} on the source", got.len(), want.len()),
                };
                return Err(format!(
                    "records of compacted source batch {}..{} of {topic}-{p} differ on the destination: {detail}",
                    s.base, s.last
                ));
            }
            report.data_batches += 1;
            report.records += i64::from(s.record_count);
            continue;
        }
        let Some(d) = dest_data.get(cursor) else {
            return Err(format!("source batch {}..{} of {topic}-{p} is missing on the destination", s.base, s.last));
        };
        cursor += 1;
        if d.base == s.base - shift && d.last > s.last - shift {
            let (group, count) = compare_merged(&src[i - 1..], d, segments, topic, p)?;
            i += group - 1;
            report.data_batches += group;
            report.records += count;
            continue;
        }
        let what = |field: &str| {
            format!(
                "source batch {}..{} of {topic}-{p} differs on the destination at {}..{}: {field}",
                s.base, s.last, d.base, d.last
            )
        };
        if d.base != s.base - shift || d.last != s.last - shift {
            return Err(what(&format!("expected offsets {}..{}", s.base - shift, s.last - shift)));
        }
        if d.record_count != s.record_count || d.attributes != s.attributes {
            return Err(what("record count or attributes"));
        }
        if d.base_ts != s.base_ts || d.max_ts != s.max_ts {
            return Err(what("timestamps"));
        }
        if d.payload != s.payload {
            return Err(what("payload bytes"));
        }
        report.data_batches += 1;
        report.records += i64::from(s.record_count);
    }
    if let Some(extra) = dest_data.get(cursor) {
        return Err(format!(
            "destination {topic}-{p} has data at {}..{} that the source does not have",
            extra.base, extra.last
        ));
    }
    let covered: i64 = src.iter().map(|s| s.last - s.base + 1).sum();
    report.skipped_offsets = (src_end - src_start) - covered;
    Ok(report)
}

/// Small source batches merged into one destination batch `d` (`mirror.coalesce.max.bytes`;
/// compressed ones recompressed with `mirror.coalesce.recompress`): the records of `src[0]`
/// (which starts where `d` does) and of the source batches after it up to `d`'s last offset,
/// compared with `d`'s byte for byte (offsets, timestamps, keys, values, headers), whatever
/// either side's compression. Returns how many source batches `d` holds and their records.
///
/// # Errors
/// The first difference (or `d` ending inside a source batch), or a batch that cannot be read.
fn compare_merged(
    src: &[Summary],
    d: &Summary,
    segments: &[OffsetSegment],
    topic: &str,
    p: i32,
) -> Result<(usize, i64), String> {
    let s = src.first().ok_or("no source batch")?;
    let shift = shift_at(segments, s.base);
    let mut want = records(&s.whole, shift, false)?;
    let mut count = i64::from(s.record_count);
    let mut group = 1;
    let mut last = s.last - shift;
    while let Some(n) = src.get(group).filter(|n| !n.has_holes() && n.last - shift_at(segments, n.base) <= d.last) {
        let n_shift = shift_at(segments, n.base);
        want.extend(records(&n.whole, n_shift, false)?);
        count += i64::from(n.record_count);
        last = n.last - n_shift;
        group += 1;
    }
    let got = records(&d.whole, 0, false)?;
    let detail = if last != d.last {
        Some(format!("it ends at {} inside source batch {}..", d.last, last + 1))
    } else if got != want {
        Some(match want.iter().zip(&got).find(|(w, g)| w != g) {
            Some((w, g)) => format!("{} of the record at destination offset {}", record_difference(w, g), g.offset),
            None => format!("{} records on the destination, {} on the source", got.len(), want.len()),
        })
    } else {
        None
    };
    if let Some(detail) = detail {
        return Err(format!(
            "destination batch {}..{} of {topic}-{p}, merged from source batches {}..{}, differs: {detail}",
            d.base, d.last, s.base, s.last
        ));
    }
    Ok((group, count))
}

/// Compacted topics (issue 9, item 7): the records a consumer reads on both sides, compared
/// by offset. A record both sides hold must be identical byte for byte (timestamp, key,
/// value, headers). A record only one side holds is fine when that side's cleaner may have
/// removed it from the other: the other side holds a later record with the same key, or it is
/// a tombstone (removed after `delete.retention.ms`). Anything else is a difference.
fn compare_compacted(
    src: &[Summary],
    dest: &[Summary],
    segments: &[OffsetSegment],
    topic: &str,
    p: i32,
    report: &mut VerifyReport,
) -> Result<(), String> {
    let mut want = std::collections::BTreeMap::new();
    for s in src {
        for r in records(&s.whole, shift_at(segments, s.base), false)? {
            want.insert(r.offset, (r, s.log_append_time));
        }
        report.data_batches += 1;
        report.records += i64::from(s.record_count);
    }
    let mut got = std::collections::BTreeMap::new();
    for d in dest {
        // The destination stamps the append time as max timestamp for a LogAppendTime source;
        // read its records with the source batch's type (looked up by the first offset).
        let lat = want.range(d.base..=d.last).next().is_some_and(|(_, (_, lat))| *lat);
        for r in records(&d.whole, 0, lat)? {
            got.insert(r.offset, r);
        }
    }
    // The last offset of each key on each side.
    let last_of = |rows: &mut dyn Iterator<Item = (i64, &RecordRow)>| {
        let mut m: std::collections::HashMap<Vec<u8>, i64> = std::collections::HashMap::new();
        for (o, r) in rows {
            if let Some(k) = &r.key {
                m.insert(k.clone(), o);
            }
        }
        m
    };
    let want_last = last_of(&mut want.iter().map(|(o, (r, _))| (*o, r)));
    let got_last = last_of(&mut got.iter().map(|(o, r)| (*o, r)));
    let superseded = |r: &RecordRow, on: &std::collections::HashMap<Vec<u8>, i64>| {
        r.value.is_none() || r.key.as_ref().is_some_and(|k| on.get(k).is_some_and(|last| *last > r.offset))
    };
    for (o, (w, _)) in &want {
        match got.get(o) {
            Some(g) if g != w => {
                return Err(format!(
                    "record at source offset {} of compacted {topic}-{p} differs on the destination (offset {o}): {}",
                    o + shift_at(segments, *o),
                    record_difference(w, g)
                ))
            }
            Some(_) => {}
            None if superseded(w, &got_last) => {}
            None => {
                return Err(format!(
                    "record at source offset {} of compacted {topic}-{p} is missing on the destination (offset {o}) and no later record of its key is there",
                    o + shift_at(segments, *o)
                ))
            }
        }
    }
    for (o, g) in &got {
        if !want.contains_key(o) && !superseded(g, &want_last) {
            return Err(format!(
                "destination {topic}-{p} has a record at offset {o} that the source neither has nor superseded"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};

    use super::*;
    use crate::wire::records::{codec, put_record, NewRecord};

    fn batch(base: i64, attrs: i16, headers: Vec<(&[u8], Option<&[u8]>)>) -> Bytes {
        let mut section = BytesMut::new();
        put_record(
            &mut section,
            &NewRecord { timestamp_delta: 4, key: None, value: Some(b"v"), headers, ..Default::default() },
        );
        let payload = records::compress(codec::GZIP, &section).unwrap();
        let mut out = BytesMut::new();
        out.put_i64(base);
        out.put_i32(49 + payload.len() as i32);
        out.put_i32(0);
        out.put_i8(2);
        out.put_u32(0);
        out.put_i16(codec::GZIP | attrs);
        out.put_i32(0);
        out.put_i64(1000);
        out.put_i64(2000);
        out.put_i64(-1);
        out.put_i16(-1);
        out.put_i32(-1);
        out.put_i32(1);
        out.put_slice(&payload);
        out.freeze()
    }

    /// A one-record batch at `base` compressed with `codec`, CreateTime `ts`, value `value`.
    fn one(base: i64, codec: i16, ts: i64, value: &[u8]) -> Batch {
        let headers: Vec<(&[u8], Option<&[u8]>)> = vec![(b"h", Some(b"x")), (b"h", None)];
        let mut section = BytesMut::new();
        put_record(&mut section, &NewRecord { key: Some(b"k"), value: Some(value), headers, ..Default::default() });
        let payload = records::compress(codec, &section).unwrap();
        let producer = split::RunHeader { producer_id: 7, producer_epoch: 0, base_sequence: 0 };
        let mut b = BytesMut::from(&split::new_batch(codec, ts, ts, &producer, 1, &payload)[..]);
        b[..8].copy_from_slice(&base.to_be_bytes());
        BatchIter::new(b.freeze()).next().unwrap().unwrap()
    }

    /// `merged` as the destination holds it: at base offset `base`.
    fn at(base: i64, merged: &Bytes) -> Summary {
        let mut b = BytesMut::from(&merged[..]);
        b[..8].copy_from_slice(&base.to_be_bytes());
        summary(&BatchIter::new(b.freeze()).next().unwrap().unwrap())
    }

    #[test]
    fn recompressed_merged_batches_are_compared_record_by_record() {
        use crate::wire::coalesce;
        let producer = split::RunHeader { producer_id: 1, producer_epoch: 0, base_sequence: 0 };
        for codec in [codec::GZIP, codec::SNAPPY, codec::LZ4, codec::ZSTD] {
            let src: Vec<Batch> = (0..5).map(|n| one(10 + n, codec, 1000 + n, format!("v{n}").as_bytes())).collect();
            let merged = coalesce::recompress(&src, &producer, 1 << 20).unwrap();
            assert_eq!(merged.merged, 5);
            let d = at(10, &merged.batch);
            assert_eq!(d.attributes, codec, "recompressed with the source's codec");
            assert_ne!(d.payload, src[0].payload(), "payload bytes are not the source's");
            let sums: Vec<Summary> = src.iter().map(summary).collect();
            // Another source batch after the merged ones is left for the next comparison.
            let mut more = sums;
            more.push(summary(&one(15, codec, 1005, b"next")));
            assert_eq!(compare_merged(&more, &d, &[], "t", 0), Ok((5, 5)));
            // One value differs: named.
            let mut other = src.clone();
            other[3] = one(13, codec, 1003, b"changed");
            let bad = at(10, &coalesce::recompress(&other, &producer, 1 << 20).unwrap().batch);
            let e = compare_merged(&more, &bad, &[], "t", 0).unwrap_err();
            assert!(e.contains("value of the record at destination offset 13"), "{e}");
            // A timestamp differs.
            other[3] = one(13, codec, 999, b"v3");
            let bad = at(10, &coalesce::recompress(&other, &producer, 1 << 20).unwrap().batch);
            let e = compare_merged(&more, &bad, &[], "t", 0).unwrap_err();
            assert!(e.contains("timestamp"), "{e}");
            // A merged batch holding offsets the source batches compared do not reach.
            let short = at(10, &coalesce::recompress(&src[..3], &producer, 1 << 20).unwrap().batch);
            let two = [summary(&src[0]), summary(&src[1])];
            assert!(compare_merged(&two, &short, &[], "t", 0).is_err());
        }
    }

    #[test]
    fn a_merged_header_is_a_difference() {
        let dup: Vec<(&[u8], Option<&[u8]>)> = vec![(b"k", None), (b"dup", Some(b"a")), (b"dup", Some(b"a"))];
        let want = records(&batch(10, 0, dup.clone()), 0, false).unwrap();
        assert_eq!(want[0].headers.len(), 3);
        assert_eq!((want[0].offset, want[0].timestamp, want[0].key.clone()), (10, 1004, None));
        let merged = records(&batch(10, 0, dup[..2].to_vec()), 0, false).unwrap();
        assert_ne!(want, merged);
        assert_eq!(record_difference(&want[0], &merged[0]), "headers");
        // Shifted offsets; a LogAppendTime source batch reads as its max timestamp.
        let lat = records(&batch(15, ATTR_LOG_APPEND_TIME, dup.clone()), 5, false).unwrap();
        assert_eq!((lat[0].offset, lat[0].timestamp), (10, 2000));
        let cleared = records(&batch(10, 0, dup), 0, true).unwrap();
        assert_eq!(lat, cleared);
    }
}
