//! The state guard's CreateTopics and DescribeConfigs handlers: the state topic's entries are taken out of the
//! request and answered with TOPIC_AUTHORIZATION_FAILED ([`super::filter`]).

use super::*;

impl StateTopicGuard {
    /// CreateTopics naming the state topic: taken out; answered with 29 and the refusal message.
    pub(super) fn create_topics(&self, request: &ParsedRequest) -> Result<Guarded, String> {
        let key = ApiKey::CreateTopics;
        let message = self.message();
        filter(
            &self.log,
            key,
            request,
            |req: &mut CreateTopicsRequest| {
                take(
                    &mut req.topics,
                    |t| self.named(&t.name, &Uuid::nil()),
                    |t| Taken { name: t.name.clone(), id: Uuid::nil(), partitions: Vec::new() },
                )
            },
            move |resp: &mut CreateTopicsResponse, taken| {
                for t in taken {
                    resp.topics.push(
                        CreatableTopicResult::default()
                            .with_name(t.name.clone())
                            .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                            .with_error_message(Some(StrBytes::from_string(message.clone())))
                            .with_num_partitions(-1)
                            .with_replication_factor(-1),
                    );
                }
            },
        )
    }

    /// DescribeConfigs of the state topic's TOPIC resource: taken out; answered with 29 and the refusal message.
    pub(super) fn describe_configs(&self, request: &ParsedRequest) -> Result<Guarded, String> {
        let key = ApiKey::DescribeConfigs;
        let message = self.message();
        filter(
            &self.log,
            key,
            request,
            |req: &mut DescribeConfigsRequest| {
                take(
                    &mut req.resources,
                    |r| r.resource_type == TOPIC_RESOURCE && self.is_state_topic(&r.resource_name),
                    |r| Taken { name: TopicName(r.resource_name.clone()), id: Uuid::nil(), partitions: Vec::new() },
                )
            },
            move |resp: &mut DescribeConfigsResponse, taken| {
                for t in taken {
                    resp.results.push(
                        DescribeConfigsResult::default()
                            .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                            .with_error_message(Some(StrBytes::from_string(message.clone())))
                            .with_resource_type(TOPIC_RESOURCE)
                            .with_resource_name(t.name.0.clone()),
                    );
                }
            },
        )
    }
}
