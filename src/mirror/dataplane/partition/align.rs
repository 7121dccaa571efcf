//! Alignment, the first phase of a copy loop (DESIGN §4): before anything is copied, the loop
//! finds where the destination partition really ends — its settled log end, nothing of ours
//! above the high watermark — and which source offset that is through the partition's offset
//! map. It never appends: it only reads the destination and the source, and records what a
//! new mirror partition starts with (producer id, first offset segment, copy start) in the
//! partition's state before the first append.

use std::ops::ControlFlow;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::cluster::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::mirror::model::{OffsetSegment, PartitionStateRecord, StartPosition};
use crate::wire::batch::BatchIter;
use crate::wire::mirror::MirrorPartitionState;

use super::super::pipeline::{Pipeline, Run};
use super::super::source::{self, FetchSettings};
use super::super::{dest_topic, log_end};
use super::{fail, init_producer_id, retry, sequence_for, Flow, Outcome, PartitionTask, Retry, Writer};

/// What alignment found: where the destination ends and how that maps to the source.
pub(super) struct Alignment {
    /// The partition's state record as alignment left it (after a re-seed, if one happened).
    pub(super) rec: PartitionStateRecord,
    /// The idempotent producer of the data appends (DESIGN §4.5).
    pub(super) producer_id: i64,
    /// Its epoch.
    pub(super) producer_epoch: i16,
    /// The destination's settled log end: the offset of the next append.
    pub(super) dest_end: i64,
    /// The source log start when alignment read it.
    pub(super) src_start: i64,
    /// The partition's offset map; the last segment maps `dest_end` to a source offset
    /// (`dest_end` is at or above its destination start).
    pub(super) segments: Vec<OffsetSegment>,
    /// `--start-position`: the source offset below which nothing is copied (None: all).
    pub(super) copy_start: Option<i64>,
    /// The first source batch of a mirror partition created by this alignment (offsets below
    /// it were never going to be copied).
    pub(super) created_at: Option<i64>,
}

impl PartitionTask {
    /// Aligns the partition: its data producer, the destination topic (still the one copied
    /// into), the settled destination log end, a re-seed of an emptied destination, and the
    /// first offset segment of a new mirror partition (persisted before the first append).
    /// Ends the loop (`Break`) when the destination holds offsets the mirror did not write or
    /// lost some it did.
    pub(super) async fn align(&self, stop: &CancellationToken) -> Flow<Alignment> {
        let (topic, p) = (self.topic.as_str(), self.partition);
        let rec = self.record().ok_or_else(|| Retry::new("partition state missing".into()))?;
        let (producer_id, producer_epoch) = self.data_producer(&rec).await?;
        let (dest_id, dest_end) = proceed!(self.destination_end(stop).await);
        let src_start = self.source.list_offsets(topic, p, EARLIEST_TIMESTAMP).await.map_err(retry)?;
        let rec = proceed!(self.reseed_if_empty(rec, dest_id, dest_end).await);
        // The first segment: identical (delta 0) when the source head can be filled, else
        // shifted to start where the source starts (DESIGN §4.2). Persisted before the first append.
        let (segments, copy_start, created_at) = if rec.segments.is_empty() {
            let (first, copy_start, first_base) = proceed!(self.first_segment(dest_end, src_start).await);
            (vec![first], copy_start, Some(first_base))
        } else {
            (rec.segments.clone(), rec.copy_start, None)
        };
        let seg = *segments.last().expect("at least one segment");
        if dest_end < seg.destination_start {
            return Ok(ControlFlow::Break(fail(
                format!("destination log end {dest_end} of {topic}-{p} is below the offset map's segment start {}; the destination lost data", seg.destination_start),
                false,
            )));
        }
        Ok(ControlFlow::Continue(Alignment {
            rec,
            producer_id,
            producer_epoch,
            dest_end,
            src_start,
            segments,
            copy_start,
            created_at,
        }))
    }

    /// The producer id and epoch of the data appends (DESIGN §4.5): created once
    /// (InitProducerId) and kept in the partition's state.
    async fn data_producer(&self, rec: &PartitionStateRecord) -> Result<(i64, i16), Retry> {
        match (rec.producer_id, rec.producer_epoch) {
            (Some(id), Some(e)) => Ok((id, e)),
            _ => {
                let (id, e) =
                    init_producer_id(&self.dest).await.map_err(|e| Retry::new(format!("InitProducerId: {e}")))?;
                self.control
                    .update_partition(&self.topic, self.partition, |r| {
                        r.producer_id = Some(id);
                        r.producer_epoch = Some(e);
                    })
                    .await
                    .map_err(|e| Retry::new(e.to_string()))?;
                Ok((id, e))
            }
        }
    }

    /// The destination topic's id and the partition's settled log end (nothing of ours
    /// above its high watermark, [`log_end::settled_log_end`]). A destination topic that is
    /// gone (deleted behind the mirror) is a retry.
    async fn destination_end(&self, stop: &CancellationToken) -> Flow<(String, i64)> {
        let (topic, p) = (self.topic.as_str(), self.partition);
        // Still the destination topic this partition copies into? (Deleted, or deleted and
        // re-created, directly on the brokers: a new topic id.)
        let dest_id = match dest_topic::topic_id(&self.dest, topic).await {
            Ok(Some(id)) => id,
            Ok(None) => {
                return Err(Retry::new(format!(
                    "destination topic {topic} does not exist (deleted behind the mirror?); re-create it, or stop the mirror topic"
                )))
            }
            Err(e) => return Err(Retry::new(format!("destination metadata of {topic}: {e}"))),
        };
        // Where the destination really ends: nothing of ours above its high watermark.
        match log_end::settled_log_end(&self.dest, topic, p, stop, self.request_timeout).await {
            Ok(end) => Ok(ControlFlow::Continue((dest_id, end))),
            Err(log_end::Unsettled::Stopped) => Ok(ControlFlow::Break(Outcome::Stopped)),
            Err(e) => Err(Retry::new(format!("destination {topic}-{p}: {e}"))),
        }
    }

    /// Records the destination topic id `dest_id` in the partition's state, and starts over
    /// as a new mirror partition (offset map, epochs and positions cleared) when the
    /// destination partition is empty after a failback, or its topic was re-created empty.
    /// A re-created topic that holds offsets fails the partition (permanent). Returns the
    /// state record as it now is.
    async fn reseed_if_empty(
        &self,
        rec: PartitionStateRecord,
        dest_id: String,
        dest_end: i64,
    ) -> Flow<PartitionStateRecord> {
        let (topic, p) = (self.topic.as_str(), self.partition);
        let recreated = match &rec.destination_topic_id {
            Some(old) if *old != dest_id => {
                if dest_end != 0 {
                    return Ok(ControlFlow::Break(fail(
                        format!("destination topic {topic} was deleted and re-created behind the mirror (topic id {old} -> {dest_id}) and partition {p} holds {dest_end} offsets written outside the mirror; delete the topic (or its records) to re-seed it, or stop the mirror topic"),
                        false,
                    )));
                }
                tracing::warn!(mirror = %self.mirror, topic, partition = p, old_topic_id = %old, topic_id = %dest_id, "destination topic was re-created behind the mirror and is empty: re-seeding from the source");
                if let Err(e) = dest_topic::set_mirroring_configs(&self.dest, topic).await {
                    return Err(Retry::new(format!(
                        "cannot set the mirror's configs on the re-created destination topic {topic}: {e}"
                    )));
                }
                true
            }
            _ => false,
        };

        // Re-seed: a failback onto an empty destination partition (the operator deleted and
        // re-created the topic after the failover), or a re-created empty destination topic,
        // starts over as a new mirror partition.
        let failback_onto_empty = rec.state == MirrorPartitionState::LogAlignment
            && rec.previous_state == Some(MirrorPartitionState::Stopped)
            && dest_end == 0
            && !rec.segments.is_empty();
        let rec = if failback_onto_empty || recreated {
            tracing::info!(mirror = %self.mirror, topic, partition = p, "destination partition is empty: re-seeding from the source");
            self.control
                .update_partition(topic, p, |r| {
                    r.segments.clear();
                    r.source_epochs.clear();
                    r.last_mirrored_offset = -1;
                    r.placeholder_end = None;
                    r.destination_topic_id = Some(dest_id);
                })
                .await
                .map_err(|e| Retry::new(e.to_string()))?
        } else if rec.destination_topic_id.is_none() {
            self.control
                .update_partition(topic, p, |r| r.destination_topic_id = Some(dest_id))
                .await
                .map_err(|e| Retry::new(e.to_string()))?
        } else {
            rec
        };
        Ok(ControlFlow::Continue(rec))
    }

    /// The first offset segment of a new mirror partition, persisted with its copy start:
    /// `(segment, copy start, base offset of the first source batch)`. The destination
    /// partition must be empty (permanent failure otherwise).
    async fn first_segment(&self, dest_end: i64, src_start: i64) -> Flow<(OffsetSegment, Option<i64>, i64)> {
        let (topic, p) = (self.topic.as_str(), self.partition);
        if dest_end != 0 {
            return Ok(ControlFlow::Break(fail(
                format!("destination partition {topic}-{p} already holds {dest_end} offsets written outside the mirror; delete and re-create the topic, or stop the mirror"),
                false,
            )));
        }
        // Where copying starts (`--start-position`): the log start, the end, or the first
        // record at or after a timestamp (the end when there is none).
        let position = self.control.start_position(topic);
        let start = match position {
            StartPosition::Earliest => src_start,
            StartPosition::Latest => self.source.list_offsets(topic, p, LATEST_TIMESTAMP).await.map_err(retry)?,
            StartPosition::Timestamp(ms) => match self.source.list_offsets(topic, p, ms).await.map_err(retry)? {
                -1 => self.source.list_offsets(topic, p, LATEST_TIMESTAMP).await.map_err(retry)?,
                offset => offset,
            },
        }
        .max(src_start);
        // The first source batch still on disk may start below the start (DeleteRecords,
        // retention and a timestamp inside a batch keep whole batches): the mirror starts at
        // that batch, and follows the log start with DeleteRecords once it is copied.
        let first_base = self.first_batch_base(start).await?;
        let first = if first_base <= self.fill_max_gap {
            OffsetSegment { source_start: 0, destination_start: 0 }
        } else {
            OffsetSegment { source_start: first_base, destination_start: 0 }
        };
        let from = (position != StartPosition::Earliest).then_some(first_base);
        if from.is_some() {
            tracing::info!(mirror = %self.mirror, topic, partition = p, %position, source_offset = first_base, "start position: copying from this source offset; offsets below it are never copied");
        }
        self.control
            .update_partition(topic, p, |r| {
                r.segments = vec![first];
                r.copy_start = from;
                // (`Some`: written by a version that records placeholders; see
                // `note_legacy_placeholders`.)
                r.placeholder_end = Some(0);
            })
            .await
            .map_err(|e| Retry::new(e.to_string()))?;
        Ok(ControlFlow::Continue((first, from, first_base)))
    }

    /// The writer of this alignment: the next append lands at the destination log end, in
    /// the last offset segment, with sequence = destination offset (mod 2^31; the markers
    /// recovery corrects it where real markers took offsets, `markers::resume_sequence`).
    pub(super) async fn aligned_writer<'a>(&self, a: &Alignment, inflight: &'a mut Pipeline) -> Writer<'a> {
        let seg = *a.segments.last().expect("at least one segment");
        let (coalesce_max, max_message_bytes, producer_expiry_ms) =
            self.write_limits(&self.topic, self.partition).await;
        Writer {
            producer_id: a.producer_id,
            producer_epoch: a.producer_epoch,
            dest_next: a.dest_end,
            shift: seg.shift(),
            next_seq: sequence_for(a.dest_end),
            inflight,
            run: Run::default(),
            coalesce_max,
            recompress: self.coalesce_recompress,
            state_ts: None,
            max_message_bytes,
            producer_expiry_ms,
        }
    }

    /// A partition copied by a version that did not record where its placeholders end (it
    /// wrote markers as placeholders): everything below its end may be one.
    pub(super) async fn note_legacy_placeholders(&self, a: &Alignment) -> Result<(), Retry> {
        if a.rec.placeholder_end.is_none() && a.dest_end > 0 {
            self.control
                .update_partition(&self.topic, self.partition, |r| r.placeholder_end = Some(a.dest_end))
                .await
                .map_err(|e| Retry::new(e.to_string()))?;
        }
        Ok(())
    }

    /// Base offset of the source batch that holds `log_start` (or `log_start` itself when
    /// the log is empty there).
    async fn first_batch_base(&self, log_start: i64) -> Result<i64, Retry> {
        let chunk = source::fetch(
            &self.source,
            &self.topic,
            self.partition,
            log_start,
            -1,
            &FetchSettings { max_wait: Duration::ZERO, min_bytes: 0, ..self.fetch },
        )
        .await
        .map_err(retry)?;
        if chunk.error_code != 0 {
            return Err(Retry::new(format!("source fetch error {} at log start {log_start}", chunk.error_code)));
        }
        Ok(BatchIter::new(chunk.records)
            .next()
            .and_then(Result::ok)
            .map_or(log_start, |b| b.base_offset().min(log_start)))
    }

    /// What bounds the writes of this alignment: the largest merged batch
    /// (`mirror.coalesce.max.bytes`, kept below the destination topic's `max.message.bytes`
    /// less a batch header) and the destination leader's `producer.id.expiration.ms` (None
    /// when it cannot be read: appends then go one at a time).
    async fn write_limits(&self, topic: &str, p: i32) -> (usize, Option<usize>, Option<i64>) {
        let mut coalesce = self.coalesce_max_bytes;
        let mut max_message = None;
        if coalesce > 0 {
            match self.dest.describe_topic_configs(topic).await {
                Ok(c) => {
                    if let Some(max) = c.get("max.message.bytes").and_then(|v| v.parse::<usize>().ok()) {
                        coalesce = coalesce.min(max.saturating_sub(crate::wire::batch::HEADER_LEN + 1024));
                        max_message = Some(max);
                    }
                }
                Err(e) => {
                    tracing::debug!(mirror = %self.mirror, topic, partition = p, error = %e, "destination topic configs not read: merged batches use mirror.coalesce.max.bytes as it is")
                }
            }
        }
        let expiry = match self.dest.leader_for(topic, p).await {
            Ok(leader) => match self.dest.describe_broker_config(leader.node_id, "producer.id.expiration.ms").await {
                Ok(v) => v.and_then(|v| v.parse::<i64>().ok()),
                Err(e) => {
                    static ONCE: std::sync::Once = std::sync::Once::new();
                    ONCE.call_once(|| tracing::info!(mirror = %self.mirror, error = %e, "the destination's producer.id.expiration.ms cannot be read (DescribeConfigs on the broker): appends go one at a time (no pipelining)"));
                    None
                }
            },
            Err(_) => None,
        };
        (coalesce, max_message, expiry)
    }
}
