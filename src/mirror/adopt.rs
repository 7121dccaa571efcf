//! Whether a destination topic that already exists may become a mirror topic (issue 9, item
//! 13): only when nothing else writes to it. Every partition must be empty from offset 0 (its
//! log end, settled on the leader, is 0: identical offsets start there), the leaders must hold
//! no producer state for it (DescribeProducers, KIP-664: an idempotent or transactional
//! producer that wrote to it, or is writing, is listed until `producer.id.expiration.ms`),
//! and the log ends must still be 0 when the check ends. Anything else refuses the start of
//! that topic, naming what was found; mirrorgate never copies on top of foreign data. An
//! adopted topic gets the mirror's topic configs, as a topic mirrorgate creates.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{DescribeProducersRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio_util::sync::CancellationToken;

use crate::client::cluster::{ClusterClient, ClusterOptions, KafkaErrorCode, EARLIEST_TIMESTAMP};
use crate::mirror::dataplane::log_end;
use crate::mirror::topics::ClusterAccess;

/// Why an existing destination topic is not adopted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAdopted {
    /// Data or a writer was found (TOPIC_ALREADY_EXISTS): records at offsets X..Y, offsets
    /// written and deleted, an active producer id, a write during the check.
    Foreign(String),
    /// It could not be checked (a read failed); the start is refused, never adopted
    /// unchecked, and may be retried.
    Unchecked(String),
}

/// Checks that the existing destination topic `topic` (with `partitions` partitions) is empty
/// and unwritten, as described in the module docs, then sets the mirror's topic configs on it
/// (`dest_topic::set_mirroring_configs`: retention off, timestamps of any age accepted,
/// `compression.type=producer`, `message.timestamp.type=CreateTime`).
///
/// # Errors
/// [`NotAdopted`] naming the topic and partition and what was found, or why it could not be
/// checked.
pub async fn check_adoptable(destination: &ClusterAccess, topic: &str, partitions: i32) -> Result<(), NotAdopted> {
    check(destination, topic, partitions).await
}

async fn check(destination: &ClusterAccess, topic: &str, partitions: i32) -> Result<(), NotAdopted> {
    let foreign = NotAdopted::Foreign;
    let opts = ClusterOptions {
        connect_timeout: destination.connect_timeout,
        connect_timeout_max: destination.connect_timeout,
        request_timeout: destination.request_timeout,
        security: destination.bootstrap.security(),
        ..ClusterOptions::new(destination.bootstrap.to_vec())
    };
    let unchecked =
        |e: String| NotAdopted::Unchecked(format!("cannot check that destination topic {topic} is empty: {e}"));
    let dest = ClusterClient::connect(opts).await.map_err(|e| unchecked(e.to_string()))?;
    dest.refresh_metadata(Some(&[topic])).await.map_err(|e| unchecked(e.to_string()))?;
    let stop = CancellationToken::new();
    for p in 0..partitions {
        let end = log_end::settled_log_end(&dest, topic, p, &stop, destination.request_timeout)
            .await
            .map_err(|e| unchecked(e.to_string()))?;
        if end == 0 {
            continue;
        }
        let start = dest.list_offsets(topic, p, EARLIEST_TIMESTAMP).await.map_err(|e| unchecked(e.to_string()))?;
        return Err(foreign(if start < end {
            format!(
                "destination topic {topic} already exists and partition {p} holds records at offsets {start}..{}; mirrorgate adopts only empty topics nothing else writes to (delete the topic, or mirror into another cluster)",
                end - 1
            )
        } else {
            format!(
                "destination topic {topic} already exists and partition {p} ends at offset {end} (offsets 0..{} were written and deleted); identical offsets need a partition that starts at 0 (delete and re-create the topic)",
                end - 1
            )
        }));
    }
    if let Some((p, producer)) = active_producer(&dest, topic, partitions).await.map_err(unchecked)? {
        return Err(foreign(format!(
            "destination topic {topic} already exists and partition {p} has producer state of {producer}: something writes to it; mirrorgate adopts only empty topics nothing else writes to"
        )));
    }
    // Nothing appeared meanwhile (a write during the check).
    for p in 0..partitions {
        let end = dest.leader_log_end(topic, p).await.map_err(|e| unchecked(e.to_string()))?;
        if end != 0 {
            return Err(foreign(format!(
                "destination topic {topic} is being written: partition {p} went from empty to log end {end} while mirrorgate checked it"
            )));
        }
    }
    // Adopted: the mirror's topic configs, as on a topic it creates (retention off,
    // timestamps of any age accepted).
    crate::mirror::dataplane::dest_topic::set_mirroring_configs(&dest, topic)
        .await
        .map_err(|e| unchecked(format!("cannot set the mirror's configs on it: {e}")))
}

/// The first partition of `topic` whose leader reports an active producer
/// (DescribeProducers v0, asked of each leader), described as `producer id P (epoch E, last
/// sequence S)`.
async fn active_producer(dest: &ClusterClient, topic: &str, partitions: i32) -> Result<Option<(i32, String)>, String> {
    let md = dest.metadata();
    let info = md.topics.get(topic).ok_or_else(|| format!("{topic} is not in the destination's Metadata"))?;
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for p in 0..partitions {
        let leader = info.partitions.get(&p).map_or(-1, |x| x.leader_id);
        if leader < 0 {
            return Err(format!("{topic}-{p} has no leader"));
        }
        by_leader.entry(leader).or_default().push(p);
    }
    for (leader, ps) in by_leader {
        let version = dest.version_for::<DescribeProducersRequest>(leader, 0).await.map_err(|e| e.to_string())?;
        let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_indexes(ps)]);
        let resp = dest.send_to_node(leader, &req, version).await.map_err(|e| e.to_string())?;
        for t in &resp.topics {
            for p in &t.partitions {
                if p.error_code != 0 {
                    return Err(format!(
                        "DescribeProducers {topic}-{}: {}",
                        p.partition_index,
                        KafkaErrorCode(p.error_code)
                    ));
                }
                if let Some(s) = p.active_producers.first() {
                    return Ok(Some((
                        p.partition_index,
                        format!(
                            "producer id {} (epoch {}, last sequence {})",
                            s.producer_id.0, s.producer_epoch, s.last_sequence
                        ),
                    )));
                }
            }
        }
    }
    Ok(None)
}
