//! The gate's topic handlers: CreatePartitions, DeleteTopics and DeleteRecords on a read-only
//! mirror topic are refused with POLICY_VIOLATION, on the state topic with
//! TOPIC_AUTHORIZATION_FAILED; a mixed request is refused as a whole
//! ([`MirrorGate::refusals`]).

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsResponse, DeleteRecordsResponse, DeleteTopicsResponse, TopicName,
};

use super::{bad, encode_response, s, uuid_of, GateDecision, MirrorGate};
use crate::wire::request::ParsedRequest;
use crate::wire::scan;

impl MirrorGate {
    /// CreatePartitions naming a mirror topic or the state topic: refused.
    pub(super) fn create_partitions(&self, request: &ParsedRequest) -> Result<GateDecision, String> {
        let key = ApiKey::CreatePartitions;
        let topics: Vec<String> = scan::create_partitions_topics(request, request.api_version())
            .map_err(bad(key, request))?
            .into_iter()
            .map(|t| t.0.to_string())
            .collect();
        let Some(results) = self.refusals(&topics, "add partitions to") else { return Ok(GateDecision::Pass) };
        let resp = CreatePartitionsResponse::default().with_results(
            results
                .into_iter()
                .map(|(n, c, m)| {
                    CreatePartitionsTopicResult::default()
                        .with_name(TopicName(s(n)))
                        .with_error_code(c)
                        .with_error_message(Some(s(m)))
                })
                .collect(),
        );
        Ok(GateDecision::Local(encode_response(key, request.header(), &resp)?))
    }

    /// DeleteTopics naming (by name, or by id from v6) a mirror topic or the state topic:
    /// refused.
    pub(super) async fn delete_topics(&self, request: &ParsedRequest) -> Result<GateDecision, String> {
        let key = ApiKey::DeleteTopics;
        let entries = scan::delete_topics_topics(request, request.api_version()).map_err(bad(key, request))?;
        let mut topics = Vec::new();
        for e in &entries {
            let name = match (&e.name, &e.topic_id) {
                (Some(n), _) => Some(n.0.to_string()),
                (None, Some(id)) => self.topic_name_for_id(id).await.map(|n| n.to_string()),
                (None, None) => None,
            };
            topics.push(name.unwrap_or_default());
        }
        let Some(results) = self.refusals(&topics, "delete") else { return Ok(GateDecision::Pass) };
        let resp = DeleteTopicsResponse::default().with_responses(
            results
                .into_iter()
                .zip(&entries)
                .map(|((n, c, m), e)| {
                    DeletableTopicResult::default()
                        .with_name(Some(TopicName(s(n))))
                        .with_topic_id(e.topic_id.map(|u| uuid_of(&u)).unwrap_or_default())
                        .with_error_code(c)
                        .with_error_message(Some(s(m)))
                })
                .collect(),
        );
        Ok(GateDecision::Local(encode_response(key, request.header(), &resp)?))
    }

    /// DeleteRecords naming a mirror topic or the state topic: refused, each partition with
    /// the refusal's code and `low_watermark` -1.
    pub(super) fn delete_records(&self, request: &ParsedRequest) -> Result<GateDecision, String> {
        let key = ApiKey::DeleteRecords;
        let tps = scan::delete_records_topics(request, request.api_version()).map_err(bad(key, request))?;
        let names: Vec<String> = tps.iter().map(|t| t.name.0.to_string()).collect();
        let Some(results) = self.refusals(&names, "delete records of") else { return Ok(GateDecision::Pass) };
        for (n, _, m) in &results {
            tracing::warn!(topic = %n, "DeleteRecords refused: {m}");
        }
        let resp = DeleteRecordsResponse::default().with_topics(
            results
                .into_iter()
                .zip(&tps)
                .map(|((n, c, _), t)| {
                    DeleteRecordsTopicResult::default().with_name(TopicName(s(n))).with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                DeleteRecordsPartitionResult::default()
                                    .with_partition_index(*p)
                                    .with_low_watermark(-1)
                                    .with_error_code(c)
                            })
                            .collect(),
                    )
                })
                .collect(),
        );
        Ok(GateDecision::Local(encode_response(key, request.header(), &resp)?))
    }
}
