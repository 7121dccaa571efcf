//! The state guard's OffsetCommit and TxnOffsetCommit handlers: the state topic's entries are taken out of the
//! request and answered with TOPIC_AUTHORIZATION_FAILED ([`super::filter`]).

use super::*;

impl StateTopicGuard {
    /// OffsetCommit (by name, or by id from v10): the state topic's partitions taken out; each answered with 29.
    pub(super) fn offset_commit(&self, request: &ParsedRequest) -> Result<Guarded, String> {
        let key = ApiKey::OffsetCommit;
        filter(
            &self.log,
            key,
            request,
            |req: &mut OffsetCommitRequest| {
                take(
                    &mut req.topics,
                    |t| self.named(&t.name, &t.topic_id),
                    |t| Taken {
                        name: t.name.clone(),
                        id: t.topic_id,
                        partitions: t.partitions.iter().map(|p| p.partition_index).collect(),
                    },
                )
            },
            |resp: &mut OffsetCommitResponse, taken| {
                for t in taken {
                    resp.topics.push(
                        OffsetCommitResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_topic_id(t.id)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetCommitResponsePartition::default()
                                            .with_partition_index(*p)
                                            .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                                    })
                                    .collect(),
                            ),
                    );
                }
            },
        )
    }

    /// TxnOffsetCommit: the state topic's partitions taken out; each answered with 29.
    pub(super) fn txn_offset_commit(&self, request: &ParsedRequest) -> Result<Guarded, String> {
        let key = ApiKey::TxnOffsetCommit;
        filter(
            &self.log,
            key,
            request,
            |req: &mut TxnOffsetCommitRequest| {
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
            |resp: &mut TxnOffsetCommitResponse, taken| {
                for t in taken {
                    resp.topics.push(
                        TxnOffsetCommitResponseTopic::default().with_name(t.name.clone()).with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    TxnOffsetCommitResponsePartition::default()
                                        .with_partition_index(*p)
                                        .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                                })
                                .collect(),
                        ),
                    );
                }
            },
        )
    }
}
