//! The gate's Produce handler: the partitions of read-only mirror topics (POLICY_VIOLATION)
//! and of the state topic (TOPIC_AUTHORIZATION_FAILED) are taken out of the request by
//! copying byte ranges ([`scan::produce_without`]); the rest is written, and the refusals are
//! added to the broker's answer ([`produce_rejections`]).

use std::sync::Arc;

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceResponse};

use super::{encode_response, s, uuid_of, GateDecision, MirrorGate, Rejected, POLICY_VIOLATION};
use crate::wire::request::ParsedRequest;
use crate::wire::scan::{self, TopicRef};

impl MirrorGate {
    /// Produce: refused partitions out, the others forwarded; all refused: answered here
    /// (or dropped for acks=0).
    pub(super) async fn produce(&self, request: &ParsedRequest) -> Result<GateDecision, String> {
        let (prefix, frame) = (request.header(), request.frame());
        let scan = scan::produce_topics(request, prefix.api_version)
            .map_err(|e| format!("malformed Produce v{} request: {e}", prefix.api_version))?;
        let mut rejected = Vec::new();
        for t in &scan.topics {
            // By name (v3–12) without a copy; by id (v13) through the learned ids.
            let refusal = match &t.topic {
                TopicRef::Name(n) => self.refusal(&n.0),
                TopicRef::Id(id) => match self.topic_name_for_id(id).await {
                    Some(name) => self.refusal(&name),
                    None => continue,
                },
            };
            if let Some((code, message)) = refusal {
                for p in &t.partitions {
                    rejected.push(Rejected {
                        topic: t.topic.clone(),
                        partition: p.index,
                        message: message.clone(),
                        code,
                    });
                }
            }
        }
        if rejected.is_empty() {
            return Ok(GateDecision::Pass);
        }
        // One line per refused request (not per partition): operators see who writes to a
        // mirror topic, and tests count the Produce requests a client sent (no retries).
        let code_name =
            if rejected[0].code == POLICY_VIOLATION { "POLICY_VIOLATION" } else { "TOPIC_AUTHORIZATION_FAILED" };
        crate::proxy::request_metrics::error("Produce", rejected[0].code);
        tracing::info!(
            client_id = request.client_id().unwrap_or(""),
            correlation_id = prefix.correlation_id,
            partitions = rejected.len(),
            "Produce refused with {code_name}: {}",
            rejected[0].message
        );
        let expect_response = scan.acks != 0;
        if !expect_response {
            for r in &rejected {
                tracing::warn!(partition = r.partition, "acks=0 Produce to a mirror partition dropped: {}", r.message);
            }
        }
        if rejected.len() == scan.partition_count() {
            if !expect_response {
                return Ok(GateDecision::Drop);
            }
            let resp = produce_rejections(ProduceResponse::default(), &rejected);
            return Ok(GateDecision::Local(encode_response(ApiKey::Produce, prefix, &resp)?));
        }
        let filtered = scan::produce_without(frame, prefix.api_version, &scan, |t, p| {
            rejected.iter().any(|r| &r.topic == t && r.partition == p)
        })
        .map_err(|e| format!("cannot filter Produce request: {e}"))?;
        Ok(GateDecision::ForwardProduce { frame: filtered, expect_response, rejected: Arc::new(rejected) })
    }
}

/// Adds an entry with the refusal's code (POLICY_VIOLATION (44) for a mirror topic,
/// TOPIC_AUTHORIZATION_FAILED (29) for the state topic) and message for each of `rejected`
/// to a Produce response. POLICY_VIOLATION is non-retriable in every client (Java's
/// `PolicyViolationException` is an `ApiException`, not a `RetriableException`; librdkafka,
/// franz-go and sarama fail the batch at once), and Java clients and librdkafka show the
/// message (Produce v8+, KIP-467).
pub fn produce_rejections(mut resp: ProduceResponse, rejected: &[Rejected]) -> ProduceResponse {
    for r in rejected {
        let part = PartitionProduceResponse::default()
            .with_index(r.partition)
            .with_error_code(r.code)
            .with_base_offset(-1)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(-1)
            .with_error_message(Some(s(r.message.clone())));
        let matches = |t: &TopicProduceResponse| match &r.topic {
            TopicRef::Name(n) => t.name == *n,
            TopicRef::Id(id) => t.topic_id == uuid_of(id),
        };
        if let Some(t) = resp.responses.iter_mut().find(|t| matches(t)) {
            t.partition_responses.push(part);
        } else {
            let mut t = TopicProduceResponse::default().with_partition_responses(vec![part]);
            match &r.topic {
                TopicRef::Name(n) => t.name = n.clone(),
                TopicRef::Id(id) => t.topic_id = uuid_of(id),
            }
            resp.responses.push(t);
        }
    }
    resp
}
