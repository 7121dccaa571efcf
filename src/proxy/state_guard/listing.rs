//! The state guard's listing handlers: Metadata and DescribeTopicPartitions never list the
//! state topic; a request naming it gets TOPIC_AUTHORIZATION_FAILED for it.

use super::*;

impl StateTopicGuard {
    /// Metadata naming the state topic (by name or id): forwarded as it is (an emptied topic list
    /// means "all topics" in v0); the answer's entry is dropped by `hide_in_metadata` and
    /// replaced with a 29 entry here.
    pub(super) fn metadata(&self, request: &ParsedRequest) -> Result<Guarded, String> {
        let key = ApiKey::Metadata;
        let v = request.api_version();
        // The request goes as it is (an emptied topic list means "all topics" in
        // v0); the answer's entry is dropped by `hide_in_metadata` and replaced here.
        let req: MetadataRequest = decode(key, request)?;
        let named = req.topics.iter().flatten().any(|t| {
            t.name.as_ref().is_some_and(|n| self.is_state_topic(&n.0)) || self.is_state_topic_id(t.topic_id.as_bytes())
        });
        if !named {
            return Ok(Guarded::Pass);
        }
        let name = self.name.clone();
        tracing::info!(topic = %self.name, "Metadata for the state topic answered with TOPIC_AUTHORIZATION_FAILED");
        let merge = response_merge(key, v, move |resp: &mut MetadataResponse| {
            resp.topics.push(
                MetadataResponseTopic::default()
                    .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                    .with_name(Some(TopicName(StrBytes::from_string(name.clone())))),
            );
        });
        Ok(Guarded::Forward { frame: request.frame().clone(), merge })
    }

    /// DescribeTopicPartitions (Kafka 3.8+, used by `kafka-topics --describe`): its answers
    /// are always filtered, as for Metadata, and a `next_cursor` naming the state topic is
    /// moved past it ([`cursor_past`]).
    pub(super) fn describe_topic_partitions(&self, request: &ParsedRequest) -> Result<Guarded, String> {
        let key = ApiKey::DescribeTopicPartitions;
        let v = request.api_version();
        let (named, requested) = if self.mentions(request.frame()) {
            let req: DescribeTopicPartitionsRequest = decode(key, request)?;
            // A page that starts after the state topic does not cover it.
            let in_page = req.cursor.as_ref().is_none_or(|c| c.topic_name.0.as_str() <= self.name.as_str());
            let named = in_page && req.topics.iter().any(|t| self.is_state_topic(&t.name.0));
            (named, req.topics.iter().map(|t| t.name.0.to_string()).collect())
        } else {
            (false, Vec::new())
        };
        let name = self.name.clone();
        let ids = self.ids.read().unwrap_or_else(|e| e.into_inner()).clone();
        let merge = response_merge(key, v, move |resp: &mut DescribeTopicPartitionsResponse| {
            resp.topics.retain(|t| {
                t.name.as_ref().is_none_or(|n| n.0.as_str() != name) && !ids.contains(t.topic_id.as_bytes())
            });
            if named {
                resp.topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                        .with_name(Some(TopicName(StrBytes::from_string(name.clone())))),
                );
            }
            if resp.next_cursor.as_ref().is_some_and(|c| c.topic_name.0.as_str() == name) {
                resp.next_cursor = cursor_past(&name, &requested).map(|t| {
                    describe_topic_partitions_response::Cursor::default()
                        .with_topic_name(TopicName(StrBytes::from_string(t)))
                        .with_partition_index(0)
                });
            }
        });
        Ok(Guarded::Forward { frame: request.frame().clone(), merge })
    }
}

/// The cursor topic that continues a DescribeTopicPartitions listing after the state topic
/// `name`, as a broker that hides the topic would never return a cursor naming it. For all
/// topics (`requested` empty): `name` + `-`, the smallest legal topic name after it (topic
/// names use `[a-zA-Z0-9._-]`, `-` sorts first; the broker lists the topics whose name is
/// not less than the cursor's, Kafka 4.1 `DescribeTopicPartitionsRequestHandler`). For a
/// list: the next requested topic after it (the cursor must be one of the request's
/// topics), `None` when there is none (the listing ends).
pub(super) fn cursor_past(name: &str, requested: &[String]) -> Option<String> {
    if requested.is_empty() {
        return Some(format!("{name}-"));
    }
    requested.iter().filter(|t| t.as_str() > name).min().cloned()
}
