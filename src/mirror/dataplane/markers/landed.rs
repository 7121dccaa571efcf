//! Where the marker of an EndTxn landed on the destination (the coordinator writes it
//! asynchronously, and may write it more than once), and the hiding of extra markers behind
//! a new offset segment.

use crate::client::cluster::ClusterClient;
use crate::client::txn::{self, Node};
use crate::mirror::model::{self, OffsetSegment};
use crate::wire::batch::{Batch, BatchIter};

use super::super::partition::{fail, retry, Outcome, PartitionTask, Retry, Writer};
use super::MARKER_WAIT;

/// Where the marker of an EndTxn landed.
pub(super) enum Landed {
    /// At the expected offset, once.
    Once,
    /// At the expected offset, then again up to destination offset `end` (exclusive): the
    /// coordinator wrote it more than once.
    Again { end: i64 },
    /// Something else happened: the partition fails.
    Failed(Outcome),
}

/// Waits until the destination partition's high watermark is `marker + 1` after an EndTxn:
/// the coordinator writes the marker asynchronously (T1). A log end beyond it is the same
/// marker written again ([`Landed::Again`], see [`hide_extra_markers`]) or something else
/// appended there ([`Landed::Failed`]).
pub(super) async fn wait_marker(task: &PartitionTask, marker: i64) -> Result<Landed, Retry> {
    let leader = task.dest.leader_for(&task.topic, task.partition).await.map_err(retry)?.node_id;
    let mut conn = Node { client: &task.dest, node_id: leader };
    match txn::wait_for_log_end(&mut conn, &task.topic, task.partition, marker + 1, MARKER_WAIT).await {
        Ok(end) if end == marker + 1 => Ok(Landed::Once),
        Ok(end) if duplicate_markers(task, marker, end).await? => Ok(Landed::Again { end }),
        Ok(end) => Ok(Landed::Failed(fail(
            format!(
                "{}-{}: after mirrorgate's transaction marker at destination offset {marker} the log ends at {end}; something else writes to this mirror partition",
                task.topic, task.partition
            ),
            false,
        ))),
        Err(e) => Err(Retry::new(format!("transaction marker at destination offset {marker}: {e}"))),
    }
}

/// Moves `w` past a marker written at `w.dest_next` ([`wait_marker`]'s answer).
pub(super) async fn landed(task: &PartitionTask, w: &mut Writer<'_>, marker: Landed) -> Result<Option<Outcome>, Retry> {
    match marker {
        Landed::Once => {
            task.control.release_reads(&task.topic, task.partition);
            w.dest_next += 1;
            Ok(None)
        }
        Landed::Again { end } => {
            let segments = task.record().map(|r| r.segments).unwrap_or_default();
            let source_next = w.dest_next + w.shift + 1;
            if let Some(o) = hide_extra_markers(task, segments, w.dest_next + 1, end, source_next).await? {
                return Ok(Some(o));
            }
            // (The offset maps the proxy reads were rebuilt when the segment was persisted.)
            task.control.release_reads(&task.topic, task.partition);
            w.shift = source_next - end;
            w.dest_next = end;
            Ok(None)
        }
        Landed::Failed(o) => Ok(Some(o)),
    }
}

/// Hides destination offsets `[from, end)` — control batches of mirrorgate's producers that
/// stand for no source marker — behind a new offset segment: source offset `source_next` (the
/// next to copy) at destination offset `end`, persisted before anything is appended after it
/// (DESIGN §4.2). Through mirrorgate they are never served ([`model::is_hidden`]) and every
/// offset reads as on the source; a direct reader skips them as any control batch, the
/// destination running `end − from` offsets ahead of the source from there on.
///
/// Kafka's transaction coordinator writes such markers when it re-sends WriteTxnMarkers to a
/// partition's new leader that already holds the marker (`TransactionMarkerChannelManager`
/// retries a request whose leader did not answer), or when it aborts one of mirrorgate's
/// transactions on its timeout while mirrorgate is away.
///
/// # Errors
/// [`Retry`] when the segment cannot be persisted; `Ok(Some(outcome))` (FAILED) when the
/// partition already has [`model::MAX_OFFSET_SEGMENTS`] segments.
pub(super) async fn hide_extra_markers(
    task: &PartitionTask,
    mut segments: Vec<OffsetSegment>,
    from: i64,
    end: i64,
    source_next: i64,
) -> Result<Option<Outcome>, Retry> {
    if segments.len() >= model::MAX_OFFSET_SEGMENTS {
        return Ok(Some(fail(
            format!(
                "{}-{}: the destination's transaction coordinator wrote mirrorgate's transaction markers at destination offsets {from}..{} where the source has none (a marker written twice after a partition leader change, or a transaction ended on its timeout), and the partition already has {} offset segments, the most it keeps; delete the destination topic (or its records) to re-seed it, or use mirror.transaction.markers=placeholder",
                task.topic,
                task.partition,
                end - 1,
                segments.len()
            ),
            false,
        )));
    }
    let seg = OffsetSegment { source_start: source_next, destination_start: end };
    segments.push(seg);
    task.persist_segments(segments).await?;
    crate::mirror::metrics::hidden_markers(&task.mirror, &task.topic, task.partition, end - from);
    tracing::warn!(mirror = %task.mirror, topic = %task.topic, partition = task.partition, from, to = end, source_offset = source_next, shift = seg.shift(), "the destination's transaction coordinator wrote mirrorgate's transaction marker where the source has none (written twice after a leader change, or a transaction ended on its timeout): those destination offsets are hidden behind a new offset segment; reads through mirrorgate are unchanged, a direct reader skips them and sees later offsets shifted");
    Ok(None)
}

/// Whether destination offsets `marker..end` all hold control batches of the producer whose
/// marker is at `marker`: the same marker written more than once.
async fn duplicate_markers(task: &PartitionTask, marker: i64, end: i64) -> Result<bool, Retry> {
    let Some(first) = batch_at(&task.dest, &task.topic, task.partition, marker).await? else { return Ok(false) };
    if !first.is_control() {
        return Ok(false);
    }
    for at in marker + 1..end {
        match batch_at(&task.dest, &task.topic, task.partition, at).await? {
            Some(b) if b.is_control() && b.producer_id() == first.producer_id() => {}
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// The batch of `topic`-`partition` holding `offset` (a raw READ_UNCOMMITTED Fetch), if any.
pub(super) async fn batch_at(
    client: &ClusterClient,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<Batch>, Retry> {
    Ok(batch_and_high_watermark(client, topic, partition, offset).await?.0)
}

/// [`batch_at`] with the high watermark of the same Fetch answer (`None` when `offset` is
/// out of range: below the log start or above the log end).
pub(super) async fn batch_and_high_watermark(
    client: &ClusterClient,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(Option<Batch>, Option<i64>), Retry> {
    let fetched = match client.fetch(topic, partition, offset, 64 << 10).await {
        Ok(f) => f,
        Err(e) if e.kafka_error().is_some_and(|c| c.0 == 1) => return Ok((None, None)), // OFFSET_OUT_OF_RANGE
        Err(e) => return Err(retry(e)),
    };
    let hw = Some(fetched.high_watermark);
    for b in BatchIter::new(fetched.records) {
        let Ok(b) = b else { break };
        if b.base_offset() <= offset && offset <= b.last_offset() {
            return Ok((Some(b), hw));
        }
        if b.base_offset() > offset {
            break;
        }
    }
    Ok((None, hw))
}
