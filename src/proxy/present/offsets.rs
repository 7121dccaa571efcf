//! Per-partition log offsets through the offset map: ListOffsets, OffsetForLeaderEpoch,
//! DeleteRecords, DescribeProducers and Produce (a stopped, writable mirror partition: the
//! base offset of a write continues the source's numbering).

use kafka_protocol::messages::{
    DeleteRecordsRequest, DeleteRecordsResponse, DescribeProducersResponse, ListOffsetsResponse,
    OffsetForLeaderEpochResponse, ProduceResponse,
};

use crate::mirror::offset_maps::OffsetMaps;

/// Maps `offset` with `f`, recording whether it changed.
fn set(offset: &mut i64, f: impl FnOnce(i64) -> i64, changed: &mut bool) {
    let mapped = f(*offset);
    *changed |= mapped != *offset;
    *offset = mapped;
}

/// ListOffsets (earliest -2, latest -1, max timestamp -3, earliest local -4, a timestamp):
/// each answered offset destination → source; -1 (no record at or after the timestamp)
/// stays. The broker answers earliest, earliest local and latest with timestamp -1
/// (`RecordBatch.NO_TIMESTAMP`, Kafka `UnifiedLog.fetchOffsetByTimestamp`) and a record's
/// offset with that record's timestamp: the former are mapped end-style
/// ([`crate::mirror::model::source_end_offset`], so latest is reachable by a consumer and
/// earliest is never above latest), the latter start-style. Returns whether anything changed.
pub fn list_offsets(resp: &mut ListOffsetsResponse, maps: &OffsetMaps) -> bool {
    let mut changed = false;
    for t in &mut resp.topics {
        let Some(tm) = maps.topic(&t.name.0) else { continue };
        for p in &mut t.partitions {
            let ts = p.timestamp;
            if ts < 0 {
                set(&mut p.offset, |o| tm.to_source_end(p.partition_index, o), &mut changed);
            } else {
                set(&mut p.offset, |o| tm.to_source(p.partition_index, o), &mut changed);
            }
        }
    }
    changed
}

/// OffsetForLeaderEpoch (KIP-101/KIP-320, a consumer validating its position after a leader
/// change): each end offset destination → source (end-style), so a position in source offsets is not
/// taken for a truncation. -1 (unknown epoch) stays.
pub fn offset_for_leader_epoch(resp: &mut OffsetForLeaderEpochResponse, maps: &OffsetMaps) -> bool {
    let mut changed = false;
    for t in &mut resp.topics {
        let Some(tm) = maps.topic(&t.topic.0) else { continue };
        for p in &mut t.partitions {
            set(&mut p.end_offset, |o| tm.to_source_end(p.partition, o), &mut changed);
        }
    }
    changed
}

/// DeleteRecords request (a stopped mirror topic; others are refused by the read-only rule):
/// each "delete before" offset source → destination; -1 (the high watermark) stays.
pub fn delete_records_request(req: &mut DeleteRecordsRequest, maps: &OffsetMaps) -> bool {
    let mut changed = false;
    for t in &mut req.topics {
        let Some(tm) = maps.topic(&t.name.0) else { continue };
        for p in &mut t.partitions {
            set(&mut p.offset, |o| tm.to_destination(p.partition_index, o), &mut changed);
        }
    }
    changed
}

/// DeleteRecords response: each new low watermark (log start) destination → source.
pub fn delete_records_response(resp: &mut DeleteRecordsResponse, maps: &OffsetMaps) -> bool {
    let mut changed = false;
    for t in &mut resp.topics {
        let Some(tm) = maps.topic(&t.name.0) else { continue };
        for p in &mut t.partitions {
            set(&mut p.low_watermark, |o| tm.to_source(p.partition_index, o), &mut changed);
        }
    }
    changed
}

/// DescribeProducers (KIP-664): each active producer's current transaction start offset
/// destination → source; -1 (no open transaction) stays.
pub fn describe_producers(resp: &mut DescribeProducersResponse, maps: &OffsetMaps) -> bool {
    let mut changed = false;
    for t in &mut resp.topics {
        let Some(tm) = maps.topic(&t.name.0) else { continue };
        for p in &mut t.partitions {
            for s in &mut p.active_producers {
                set(&mut s.current_txn_start_offset, |o| tm.to_source(p.partition_index, o), &mut changed);
            }
        }
    }
    changed
}

/// Produce response (writes reach a mirror partition only once it is STOPPED): each base
/// offset and log start offset destination → source, so a producer sees its records at the
/// source-numbered offsets a consumer through mirrorgate reads them at. -1 stays.
pub fn produce(resp: &mut ProduceResponse, maps: &OffsetMaps) -> bool {
    let mut changed = false;
    for t in &mut resp.responses {
        let Some(tm) = maps.topic_ref(&t.name.0, t.topic_id.as_bytes()) else { continue };
        for p in &mut t.partition_responses {
            set(&mut p.base_offset, |o| tm.to_source(p.index, o), &mut changed);
            set(&mut p.log_start_offset, |o| tm.to_source(p.index, o), &mut changed);
        }
    }
    changed
}

/// Lowers ListOffsets end answers (latest, earliest: the answer's timestamp is -1) of held
/// partitions ([`super::ReadCaps`], destination offsets) to their cap. A lookup by timestamp
/// that finds an offset at or above it is left alone: mapped start-style, it names the next
/// source record, which a consumer seeking there reads. Returns whether anything changed.
pub fn cap_list_offsets(resp: &mut ListOffsetsResponse, caps: &super::ReadCaps) -> bool {
    let mut changed = false;
    if caps.is_empty() {
        return false;
    }
    for t in &mut resp.topics {
        for p in &mut t.partitions {
            if let Some(cap) = caps.get(&(t.name.0.to_string(), p.partition_index)) {
                if p.timestamp < 0 && p.offset > *cap {
                    p.offset = *cap;
                    changed = true;
                }
            }
        }
    }
    changed
}

/// Lowers OffsetForLeaderEpoch end offsets of held partitions to their cap, as
/// [`cap_list_offsets`].
pub fn cap_offset_for_leader_epoch(resp: &mut OffsetForLeaderEpochResponse, caps: &super::ReadCaps) -> bool {
    let mut changed = false;
    if caps.is_empty() {
        return false;
    }
    for t in &mut resp.topics {
        for p in &mut t.partitions {
            if let Some(cap) = caps.get(&(t.topic.0.to_string(), p.partition)) {
                if p.end_offset > *cap {
                    p.end_offset = *cap;
                    changed = true;
                }
            }
        }
    }
    changed
}
