//! Cut-through forwarding of large Fetch responses (issue 13, item 4): the client gets a
//! Fetch response's bytes while the rest of it is still arriving from the destination broker,
//! instead of after mirrorgate has read all of it (store-and-forward made consume through
//! mirrorgate ×0.82 of direct, docs/performance.md).
//!
//! A Fetch response's edits ([`super::fetch_pass`]) can change its length, and its length
//! prefix goes first, so a byte may go out only once it is known that no edit will touch the
//! response. The walk over the part that has arrived ([`fetch_scan::fetch_response_prefix`])
//! settles that partition by partition: a completed partition may go when its `records` hold
//! no placeholder batch and its topic is not one the mirror state edits (LogAppendTime source,
//! read cap, shifted partition; [`FetchContext::topic_needs_edit`]). The moment one may not,
//! forwarding stops and the response is finished the usual way. **The response's last byte
//! is always held back** until the whole response has been read and looked at exactly as
//! before (`intercept::apply`): a Kafka client parses a response only once it has all of it
//! (Java's `NetworkReceive`, librdkafka's `rd_kafka_transport` read the whole size first), so
//! if that look finds an edit after part of the response went out (`node_endpoints` in the
//! trailing tagged fields after a leader change, or a placeholder in a later partition),
//! mirrorgate closes the client connection instead of sending the last byte. The client
//! never sees the unedited response; it reconnects and fetches again from the same offsets,
//! and its address gets store-and-forward only for [`DENIAL_TTL`], so the retry is served
//! edited.
//!
//! Where both connections are plain TCP, the rest of a batch whose first bytes prove it is no
//! placeholder ([`batch::cleared_by_prefix`]) may go before mirrorgate has read it
//! ([`FetchStream::splice_len`], moved by [`super::splice`]); the final look is unchanged.
//!
//! Only responses of at least `fetch_stream_min_bytes` stream (default
//! [`DEFAULT_STREAM_MIN_BYTES`]; a small one costs little to hold; 0 turns streaming off);
//! never a response whose request was rewritten (`ResponseAction::Present`/`Merged`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::Range;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::wire::batch;
use crate::wire::fetch_scan;
use crate::wire::frame::LENGTH_PREFIX_BYTES;
use crate::wire::header;

use super::fetch_pass::FetchContext;

/// `mirrorgate_client_fetch_streamed_total{outcome}`: Fetch responses forwarded while they
/// arrived; `outcome` = `whole` (sent complete, as the broker wrote it) or `closed` (an edit
/// was due after part of it went out: the connection was closed before its last byte).
pub const FETCH_STREAMED: &str = "mirrorgate_client_fetch_streamed_total";
/// `mirrorgate_client_fetch_spliced_bytes_total`: bytes of streamed Fetch responses moved
/// from the destination broker's socket to the client's by `splice(2)`, never copied through
/// mirrorgate ([`super::splice`]; plain TCP on both sides, Linux).
pub const FETCH_SPLICED_BYTES: &str = "mirrorgate_client_fetch_spliced_bytes_total";
pub use crate::config::DEFAULT_FETCH_STREAM_MIN_BYTES as DEFAULT_STREAM_MIN_BYTES;
/// Fewest new body bytes between two walks of a response being streamed.
const WALK_STEP_BYTES: usize = 64 * 1024;
/// Most bytes a read takes while a streamed response's batches are spliced (bytes): enough
/// for the next batch's first bytes (and a partition header before them), so that the rest
/// of a large batch is spliced, not read.
pub const SHORT_READ_BYTES: usize = 8 * 1024;
/// Most partitions a response may have walked for its large batches to get a walk each
/// (`FetchStream::large`): a walk parses every partition header from the body's start.
const MAX_SPLICE_PARTITIONS: usize = 64;
/// How long a client address gets store-and-forward after a streamed response to it had to
/// be cut off (its retry must get the edited response).
pub const DENIAL_TTL: Duration = Duration::from_secs(600);
/// Most client addresses remembered in [`Denials`]; when full, expired ones are dropped, and
/// if none is, the oldest.
pub const MAX_DENIALS: usize = 4096;

/// Client addresses whose Fetch responses are not streamed, each until its instant.
#[derive(Debug, Default)]
pub struct Denials {
    until: Mutex<HashMap<IpAddr, Instant>>,
}

impl Denials {
    /// Whether responses to `host` must not stream now.
    pub fn denied(&self, host: IpAddr) -> bool {
        let until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        until.get(&host).is_some_and(|t| *t > Instant::now())
    }

    /// Responses to `host` do not stream for [`DENIAL_TTL`].
    pub fn deny(&self, host: IpAddr) {
        let now = Instant::now();
        let mut until = self.until.lock().unwrap_or_else(|e| e.into_inner());
        if until.len() >= MAX_DENIALS && !until.contains_key(&host) {
            until.retain(|_, t| *t > now);
            if until.len() >= MAX_DENIALS {
                if let Some(oldest) = until.iter().min_by_key(|(_, t)| **t).map(|(h, _)| *h) {
                    until.remove(&oldest);
                }
            }
        }
        until.insert(host, now + DENIAL_TTL);
    }
}

/// One Fetch response being forwarded while it arrives.
pub struct FetchStream<'a> {
    version: i16,
    header_version: i16,
    correlation_id: i32,
    /// The frame's length after the prefix.
    frame_len: usize,
    /// Bytes of the frame (length prefix included) written to the client so far.
    sent: usize,
    /// Partitions of the walk checked so far.
    checked: usize,
    /// Body bytes that must have arrived before the next walk ([`FetchStream::ready`]).
    next_walk: usize,
    /// The partition in progress (where its records start in the body) and how many bytes of
    /// its records are whole batches already checked: the next walk goes on from there.
    partial_checked: (usize, usize),
    /// Where (in the frame, length prefix included) the batch of the partition in progress
    /// that its first bytes cleared ends ([`batch::cleared_by_prefix`]; cut at the partition's
    /// end and before the frame's last byte): the bytes up to there may go to the client
    /// before mirrorgate has them ([`FetchStream::splice_len`]). 0: none.
    splice_until: usize,
    /// Whether the last batch cleared by its first bytes was large (at least
    /// [`super::splice::MIN_SPLICE_BYTES`]), or none was looked at yet: the next walk is then
    /// due as soon as the next batch's first bytes can be in ([`batch::CLEAR_PREFIX_BYTES`]),
    /// not after [`WALK_STEP_BYTES`], so that batch after batch each large one is cleared by
    /// its first bytes and can move unseen ([`FetchStream::wants_short_reads`]).
    large: bool,
    /// Whether the connection splices ([`FetchStream::splicing`]): only then do large batches
    /// shorten the walk step and the reads.
    splice: bool,
    /// Where the body starts in the frame (length prefix and response header before it), once
    /// known.
    body_at: usize,
    /// Why forwarding stopped, once it has.
    stopped: Option<&'static str>,
    ctx: Option<FetchContext<'a>>,
}

impl<'a> FetchStream<'a> {
    /// A stream for the Fetch response of `version` to the request with `correlation_id`,
    /// whose length prefix announced `frame_len` bytes; `None` when it is smaller than
    /// `min_bytes` (or `min_bytes` is 0: streaming off). `ctx` is the mirror state its topics
    /// are checked against.
    pub fn start(
        min_bytes: usize,
        version: i16,
        header_version: i16,
        correlation_id: i32,
        frame_len: usize,
        ctx: Option<FetchContext<'a>>,
    ) -> Option<Self> {
        if min_bytes == 0
            || frame_len < min_bytes
            || !(fetch_scan::MIN_VERSION..=fetch_scan::MAX_VERSION).contains(&version)
        {
            return None;
        }
        Some(Self {
            version,
            header_version,
            correlation_id,
            frame_len,
            sent: 0,
            checked: 0,
            next_walk: 0,
            partial_checked: (0, 0),
            splice_until: 0,
            large: false,
            splice: false,
            body_at: 0,
            stopped: None,
            ctx,
        })
    }

    /// The stream for a connection that splices ([`super::splice`]) when `on`: large batches
    /// then get short reads and a walk each, so that the rest of each can move unseen.
    pub fn splicing(mut self, on: bool) -> Self {
        self.set_splicing(on);
        self
    }

    /// [`FetchStream::splicing`] on a stream under way (off: a splice could not be made).
    pub fn set_splicing(&mut self, on: bool) {
        self.splice = on;
        self.large = on;
        if !on {
            self.splice_until = 0;
        }
    }

    /// Bytes of the frame written to the client (length prefix included).
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// Why forwarding stopped early, if it did.
    pub fn stopped(&self) -> Option<&'static str> {
        self.stopped
    }

    /// The range of `buf` (the frame as read so far, length prefix first; it may hold bytes
    /// of the next frame after it) that may be written to the client now. The caller writes
    /// it and then calls [`FetchStream::wrote`]. Empty when nothing more may go.
    pub fn ready(&mut self, buf: &[u8]) -> Range<usize> {
        if self.stopped.is_some() {
            return self.sent..self.sent;
        }
        let end = (LENGTH_PREFIX_BYTES + self.frame_len).min(buf.len());
        let frame = &buf[LENGTH_PREFIX_BYTES.min(end)..end];
        match header::response_correlation_id(frame) {
            Ok(id) if id == self.correlation_id => {}
            Ok(_) => return self.stop("correlation id"),
            Err(_) => return self.sent..self.sent,
        }
        let Ok(header_len) = header::response_header_len(frame, self.header_version) else {
            // Not all of the header yet (or a malformed one, which the whole look refuses).
            return self.sent..self.sent;
        };
        let body_total = self.frame_len.saturating_sub(header_len);
        let Some(body) = frame.get(header_len..) else { return self.sent..self.sent };
        // (Walked once more when complete: a stop is then known, and named in the log.)
        if body.len() < self.next_walk && body.len() < body_total {
            return self.sent..self.sent;
        }
        let prefix = match fetch_scan::fetch_response_prefix(body, body_total, self.version) {
            Ok(p) if !p.refused => p,
            _ => return self.stop("refused by the walk"),
        };
        // Each walk starts at the body's first byte: walk again once the body has grown by 64
        // KiB, and by 1 KiB more per partition walked, so that the walks of a response cost at
        // most one partition header per KiB of it, however many partitions it has. (Inside a
        // partition's records the walk cannot get further before they are complete, but the
        // whole batches that arrived meanwhile can go.) While batches are large, walk again
        // as soon as the next batch's first bytes can be in, and by 16 bytes more per
        // partition walked: at most one walk per large batch.
        self.body_at = LENGTH_PREFIX_BYTES + header_len;
        // (Short steps only for a few partitions: each walk parses every partition header.)
        self.large &= prefix.scan.partitions.len() <= MAX_SPLICE_PARTITIONS;
        let step = if self.large {
            batch::CLEAR_PREFIX_BYTES + prefix.scan.partitions.len() * 16
        } else {
            WALK_STEP_BYTES + prefix.scan.partitions.len() * 1024
        };
        let next = if prefix.partial.is_some() { body.len() } else { prefix.needed };
        self.next_walk = next.max(body.len() + step);
        let scan = &prefix.scan;
        for t in &scan.topics {
            // This topic's partitions not checked yet.
            let from = t.partitions.start.max(self.checked);
            let Some(parts) = scan.partitions.get(from..t.partitions.end.max(from)) else { continue };
            if parts.is_empty() {
                continue;
            }
            if parts
                .iter()
                .any(|p| p.records.as_ref().is_some_and(|r| body.get(r.clone()).is_none_or(batch::has_placeholder)))
            {
                return self.stop("placeholder batch");
            }
            // KIP-951: the broker adds `node_endpoints` (which mirrorgate rewrites) for a
            // partition that answers NOT_LEADER_OR_FOLLOWER (6) or FENCED_LEADER_EPOCH (74) with
            // its new leader (Kafka's `KafkaApis.handleFetchRequest`, Fetch v16+).
            if self.version >= 16 && parts.iter().any(|p| matches!(p.error_code, 6 | 74)) {
                return self.stop("leader change");
            }
            if let Some(ctx) = &self.ctx {
                let (name, id) = t.topic.name_and_id();
                if ctx.topic_needs_edit(name, &id, parts.iter().map(|p| p.partition_index)) {
                    return self.stop("mirror topic edit");
                }
            }
        }
        if scan.node_endpoints {
            return self.stop("node_endpoints");
        }
        // A partition that came whole and small: the batches are not large (any more).
        if prefix.partial.is_none()
            && scan.partitions[self.checked.min(scan.partitions.len())..]
                .last()
                .and_then(|p| p.records.as_ref())
                .is_some_and(|r| r.len() < super::splice::MIN_SPLICE_BYTES)
        {
            self.large = false;
        }
        self.checked = scan.partitions.len();
        // Everything up to the end of the last checked partition, and of the partition in
        // progress its whole batches once checked; never the frame's last byte.
        let mut upto = prefix.walked;
        if let (Some(partial), Some(topic)) = (&prefix.partial, scan.topics.last()) {
            // (Kafka answers 6 and 74 with empty records, so this is only a guard.)
            if self.version >= 16 && matches!(partial.error_code, 6 | 74) {
                return self.stop("leader change");
            }
            if let Some(ctx) = &self.ctx {
                let (name, id) = topic.topic.name_and_id();
                if ctx.topic_needs_edit(name, &id, std::iter::once(partial.partition_index)) {
                    return self.stop("mirror topic edit");
                }
            }
            let arrived = body.get(partial.records.start..body.len().min(partial.records.end)).unwrap_or_default();
            // Go on after the batches an earlier walk checked in this partition (the same
            // bytes, so the same batches), not from its first batch again.
            let (start, done) = self.partial_checked;
            let from = if start == partial.records.start { done.min(arrived.len()) } else { 0 };
            if start != partial.records.start {
                // A new partition in progress: its own batches decide whether they are large.
                self.large = self.splice && scan.partitions.len() <= MAX_SPLICE_PARTITIONS;
            }
            let whole = match batch::leading_batches(&arrived[from..]) {
                Ok(n) => from + n,
                Err(_) => return self.stop("placeholder batch"),
            };
            self.partial_checked = (partial.records.start, whole);
            if whole > 0 {
                upto = partial.records.start + whole;
            }
            // The next batch, still arriving, when its first bytes prove it is no placeholder:
            // what has arrived of it may go, and the rest may go unseen (cut at the records'
            // end: the broker may end them with part of a batch, which clients drop).
            let next_batch = arrived.get(whole..).unwrap_or_default();
            match batch::cleared_by_prefix(next_batch) {
                Some(total) => {
                    let end = (whole + total).min(partial.records.len());
                    upto = partial.records.start + end.min(arrived.len());
                    self.splice_until = LENGTH_PREFIX_BYTES + header_len + partial.records.start + end;
                    // (Large enough that more than a short read of it is left to splice.)
                    self.large = self.splice
                        && total >= super::splice::MIN_SPLICE_BYTES + SHORT_READ_BYTES
                        && scan.partitions.len() <= MAX_SPLICE_PARTITIONS;
                }
                // A placeholder candidate or a strange batch: wait for its partition's end.
                None if next_batch.len() >= batch::CLEAR_PREFIX_BYTES => self.large = false,
                None => {}
            }
        }
        let last = LENGTH_PREFIX_BYTES + self.frame_len - 1;
        self.splice_until = self.splice_until.min(last);
        let may = (LENGTH_PREFIX_BYTES + header_len + upto).min(last);
        if upto == 0 || may <= self.sent {
            return self.sent..self.sent;
        }
        self.sent..may
    }

    /// How many bytes that have not arrived yet may go from the destination broker's socket
    /// to the client's unseen, now that the frame's first `arrived` bytes (length prefix
    /// included) are in and all of them went out: the rest of a batch the walk cleared by its
    /// first bytes ([`batch::cleared_by_prefix`]), never the frame's last byte. 0 when none.
    /// The caller moves them ([`super::splice::forward`]), puts as many zero bytes in their
    /// place (so that the frame keeps its shape for the final look, which needs no content
    /// of them), and calls [`FetchStream::spliced`].
    pub fn splice_len(&self, arrived: usize) -> usize {
        if self.stopped.is_some() || self.sent != arrived {
            return 0;
        }
        self.splice_until.saturating_sub(arrived)
    }

    /// Whether the connection should read only a little at a time (a batch's first bytes) so
    /// that the rest of each batch can move unseen ([`FetchStream::splice_len`]): while the
    /// batches are large, or before any was looked at; not once forwarding stopped.
    pub fn wants_short_reads(&self) -> bool {
        self.large && self.stopped.is_none()
    }

    /// The bytes up to `upto` (frame offset, prefix included) were moved unseen
    /// ([`FetchStream::splice_len`]): they count as sent, and the next walk is due once the
    /// next batch's first bytes can be in.
    pub fn spliced(&mut self, upto: usize) {
        self.wrote(upto);
        self.next_walk = upto.saturating_sub(self.body_at) + batch::CLEAR_PREFIX_BYTES;
    }

    /// `upto` bytes of the frame (prefix included) have been written to the client.
    pub fn wrote(&mut self, upto: usize) {
        self.sent = self.sent.max(upto);
    }

    fn stop(&mut self, why: &'static str) -> Range<usize> {
        self.stopped = Some(why);
        self.sent..self.sent
    }
}

#[cfg(test)]
mod tests;
