//! The gate's AddPartitionsToTxn handler: a transaction adding a partition of a read-only
//! mirror topic or of the state topic is refused with TOPIC_AUTHORIZATION_FAILED for those
//! partitions and OPERATION_NOT_ATTEMPTED for the others (clients abort the transaction).

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnResponse, ApiKey, TransactionalId};

use super::{bad, encode_response, GateDecision, MirrorGate, OPERATION_NOT_ATTEMPTED, TOPIC_AUTHORIZATION_FAILED};
use crate::wire::request::ParsedRequest;
use crate::wire::scan;

impl MirrorGate {
    /// AddPartitionsToTxn (v0–v3: one transaction; v4+: a batch of them).
    pub(super) fn add_partitions_to_txn(&self, request: &ParsedRequest) -> Result<GateDecision, String> {
        let key = ApiKey::AddPartitionsToTxn;
        let txns = scan::add_partitions_to_txn_topics(request, request.api_version()).map_err(bad(key, request))?;
        let hit = txns
            .iter()
            .flat_map(|t| &t.topics)
            .find_map(|t| self.refusal(&t.name.0).map(|(_, m)| (t.name.0.to_string(), m)));
        let Some((topic, reason)) = hit else { return Ok(GateDecision::Pass) };
        tracing::warn!(topic = %topic, "AddPartitionsToTxn refused: {reason}");
        let topic_results = |t: &scan::TxnTopics| -> Vec<AddPartitionsToTxnTopicResult> {
            t.topics
                .iter()
                .map(|tp| {
                    let code = if self.refusal(&tp.name.0).is_some() {
                        TOPIC_AUTHORIZATION_FAILED
                    } else {
                        OPERATION_NOT_ATTEMPTED
                    };
                    AddPartitionsToTxnTopicResult::default().with_name(tp.name.clone()).with_results_by_partition(
                        tp.partitions
                            .iter()
                            .map(|p| {
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(*p)
                                    .with_partition_error_code(code)
                            })
                            .collect(),
                    )
                })
                .collect()
        };
        let mut resp = AddPartitionsToTxnResponse::default();
        if request.api_version() >= 4 {
            resp.results_by_transaction = txns
                .iter()
                .map(|t| {
                    AddPartitionsToTxnResult::default()
                        .with_transactional_id(TransactionalId(t.transactional_id.clone()))
                        .with_topic_results(topic_results(t))
                })
                .collect();
        } else if let Some(t) = txns.first() {
            resp.results_by_topic_v3_and_below = topic_results(t);
        }
        Ok(GateDecision::Local(encode_response(key, request.header(), &resp)?))
    }
}
