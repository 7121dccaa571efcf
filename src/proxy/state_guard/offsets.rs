//! The state guard's ListOffsets and OffsetForLeaderEpoch handlers: the state topic's entries are taken out of the
//! request and answered with TOPIC_AUTHORIZATION_FAILED ([`super::filter`]).

use super::*;

impl StateTopicGuard {
    /// ListOffsets: the state topic's partitions taken out; each answered with 29, offset -1.
    pub(super) fn list_offsets(&self, request: &ParsedRequest) -> Result<Guarded, String> {
        let key = ApiKey::ListOffsets;
        filter(
            &self.log,
            key,
            request,
            |req: &mut ListOffsetsRequest| {
                take(
                    &mut req.topics,
                    |t| self.named(&t.name, &Uuid::nil()),
                    |t| Taken {
                        name: t.name.clone(),
                        id: Uuid::nil(),
                        partitions: t.partitions.iter().map(|p| p.partition_index).collect(),
                    },
                )
            },
            |resp: &mut ListOffsetsResponse, taken| {
                for t in taken {
                    resp.topics.push(
                        ListOffsetsTopicResponse::default().with_name(t.name.clone()).with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    ListOffsetsPartitionResponse::default()
                                        .with_partition_index(*p)
                                        .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                                        .with_timestamp(-1)
                                        .with_offset(-1)
                                        .with_leader_epoch(-1)
                                })
                                .collect(),
                        ),
                    );
                }
            },
        )
    }

    /// OffsetForLeaderEpoch: the state topic's partitions taken out; each answered with 29, end offset -1.
    pub(super) fn offset_for_leader_epoch(&self, request: &ParsedRequest) -> Result<Guarded, String> {
        let key = ApiKey::OffsetForLeaderEpoch;
        filter(
            &self.log,
            key,
            request,
            |req: &mut OffsetForLeaderEpochRequest| {
                take(
                    &mut req.topics,
                    |t| self.named(&t.topic, &Uuid::nil()),
                    |t| Taken {
                        name: t.topic.clone(),
                        id: Uuid::nil(),
                        partitions: t.partitions.iter().map(|p| p.partition).collect(),
                    },
                )
            },
            |resp: &mut OffsetForLeaderEpochResponse, taken| {
                for t in taken {
                    resp.topics.push(
                        OffsetForLeaderTopicResult::default().with_topic(t.name.clone()).with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    EpochEndOffset::default()
                                        .with_partition(*p)
                                        .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                                        .with_leader_epoch(-1)
                                        .with_end_offset(-1)
                                })
                                .collect(),
                        ),
                    );
                }
            },
        )
    }
}
