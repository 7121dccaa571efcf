//! The state guard's Fetch handler: the state topic's partitions are taken out (by name, or
//! by id from v13), and answered with TOPIC_AUTHORIZATION_FAILED, also for those a fetch
//! session still holds (KIP-227, [`super::super::fetch_sessions`]).

use super::*;

impl StateTopicGuard {
    /// Fetch: the state topic's partitions are taken out, and 29 entries are added to the
    /// answer for them and for those the client's fetch session still holds (KIP-227,
    /// [`super::super::fetch_sessions`]).
    pub(super) fn fetch(&self, request: &ParsedRequest, peer: SocketAddr) -> Result<Guarded, String> {
        let key = ApiKey::Fetch;
        let v = request.api_version();
        let mut req: FetchRequest = decode(key, request)?;
        let taken = take(
            &mut req.topics,
            |t| self.named(&t.topic, &t.topic_id),
            |t| Taken {
                name: t.topic.clone(),
                id: t.topic_id,
                partitions: t.partitions.iter().map(|p| p.partition).collect(),
            },
        );
        let forgotten = take(
            &mut req.forgotten_topics_data,
            |t| self.named(&t.topic, &t.topic_id),
            |t| Taken { name: t.topic.clone(), id: t.topic_id, partitions: t.partitions.clone() },
        );
        let (session_id, epoch) = (req.session_id, req.session_epoch);
        let answer = self.sessions.on_request(peer, session_id, epoch, &taken, &forgotten);
        if answer.is_empty() && taken.is_empty() && forgotten.is_empty() {
            return Ok(Guarded::Pass);
        }
        self.log.note(key, request.client_id(), answer.iter().map(|t| t.partitions.len()).sum());
        let sent = if taken.is_empty() && forgotten.is_empty() {
            request.frame().clone()
        } else {
            reencoded(key, request, &req)?
        };
        let sessions = self.sessions.clone();
        let merge = response_merge(key, v, move |resp: &mut FetchResponse| {
            if resp.error_code != 0 {
                // FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH...: no partitions
                // are answered and the client starts a new session.
                sessions.forget(peer, session_id);
                return;
            }
            if epoch == 0 {
                sessions.remember(peer, resp.session_id, &answer);
            }
            resp.responses.extend(answer.iter().map(fetch_refusal));
        });
        Ok(Guarded::Forward { frame: sent, merge })
    }
}

/// A Fetch answer for a refused topic: 29 for each partition, no records.
fn fetch_refusal(t: &Taken) -> FetchableTopicResponse {
    FetchableTopicResponse::default().with_topic(t.name.clone()).with_topic_id(t.id).with_partitions(
        t.partitions
            .iter()
            .map(|p| {
                PartitionData::default()
                    .with_partition_index(*p)
                    .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                    .with_high_watermark(-1)
                    .with_last_stable_offset(-1)
                    .with_log_start_offset(-1)
                    .with_preferred_read_replica((-1).into())
                    .with_records(Some(Bytes::new()))
            })
            .collect(),
    )
}
