//! The error codes KIP-1279's prototype adds to Kafka's `Errors` enum (134–146), with their
//! names and default messages. Provisional: upstream numbering may differ, and Kafka 4.4 has
//! already allocated 134–136 to errors of its own ([`KAFKA_ALLOCATED`]). These codes are
//! therefore sent only in the responses of the mirror RPCs, whose clients know the KIP; a
//! write to a mirror topic is refused with a stock Kafka code (POLICY_VIOLATION 44, see
//! `proxy::mirror_gate`). Pure data.

/// A KIP-1279 error code (prototype numbering, `clients/.../common/protocol/Errors.java` in
/// showuon/kafka). Codes the proxy also reuses from stock Kafka (e.g. `INVALID_CONFIG` 40,
/// `TOPIC_ALREADY_EXISTS` 36, `INVALID_REGULAR_EXPRESSION` 128) are not listed here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i16)]
pub enum MirrorErrorCode {
    /// 134 `READ_ONLY_TOPIC`: in the KIP, a write (Produce, …) to a mirror topic that is not
    /// STOPPED. mirrorgate never sends it: no released client knows it and Kafka 4.4 reads 134
    /// as `GROUP_DELETION_FAILED`; Produce gets POLICY_VIOLATION (44) with the mirror named.
    ReadOnlyTopic = 134,
    /// 135 `INVALID_CLUSTER_MIRROR_NAME`: the name breaks the topic-like naming rules
    /// (CreateClusterMirror). Not in the prototype's latest `Errors.java` (135 is a gap
    /// there); name and message from kip-1279.md §12.
    InvalidClusterMirrorName = 135,
    /// 136 `CLUSTER_MIRROR_ALREADY_EXISTS` (CreateClusterMirror).
    ClusterMirrorAlreadyExists = 136,
    /// 137 `UNKNOWN_CLUSTER_MIRROR`: no mirror of that name (all mirror RPCs).
    UnknownClusterMirror = 137,
    /// 138 `TOPIC_ALREADY_IN_CLUSTER_MIRROR`: the topic belongs to another mirror
    /// (StartMirrorTopics).
    TopicAlreadyInClusterMirror = 138,
    /// 139 `TOPIC_NOT_IN_CLUSTER_MIRROR` (Stop/Pause/ResumeMirrorTopics).
    TopicNotInClusterMirror = 139,
    /// 140 `MIRROR_TOPIC_ALREADY_PAUSED` (PauseMirrorTopics).
    MirrorTopicAlreadyPaused = 140,
    /// 141 `MIRROR_TOPIC_NOT_PAUSED` (ResumeMirrorTopics).
    MirrorTopicNotPaused = 141,
    /// 142 `MIRROR_TOPIC_BEING_STOPPED` (Pause/Resume/StopMirrorTopics).
    MirrorTopicBeingStopped = 142,
    /// 143 `CLUSTER_MIRROR_NOT_EMPTY`: the mirror still has active or non-stopped topics
    /// (DeleteClusterMirror).
    ClusterMirrorNotEmpty = 143,
    /// 144 `CLUSTER_MIRROR_AUTHORIZATION_FAILED`: no permission on the ClusterMirror resource.
    ClusterMirrorAuthorizationFailed = 144,
    /// 145 `INVALID_CLUSTER_MIRROR_STATES`: partition states are not as expected at the
    /// request's `StateOffset` (Stop/Pause/Resume/Delete).
    InvalidClusterMirrorStates = 145,
    /// 146 `MIRROR_TOPIC_NOT_STOPPED`.
    MirrorTopicNotStopped = 146,
}

/// KIP-1279 prototype codes that the newest Kafka release allocates to errors of its own,
/// `(code, Kafka's name)`, from `org.apache.kafka.common.protocol.Errors` in kafka-clients
/// 4.4.0 (`tests/error_codes.rs` reads the jar and fails when this list is out of date). A
/// client that does not know KIP-1279 reads these codes with Kafka's meaning; Kafka 4.1 and
/// 3.9 end at 133 and 127, so they have no collision.
pub const KAFKA_ALLOCATED: [(i16, &str); 3] = [
    (134, "GROUP_DELETION_FAILED"),
    (135, "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED"),
    (136, "CONTROLLER_ID_NOT_REGISTERED"),
];

impl MirrorErrorCode {
    /// All codes, ascending.
    pub const ALL: [MirrorErrorCode; 13] = [
        MirrorErrorCode::ReadOnlyTopic,
        MirrorErrorCode::InvalidClusterMirrorName,
        MirrorErrorCode::ClusterMirrorAlreadyExists,
        MirrorErrorCode::UnknownClusterMirror,
        MirrorErrorCode::TopicAlreadyInClusterMirror,
        MirrorErrorCode::TopicNotInClusterMirror,
        MirrorErrorCode::MirrorTopicAlreadyPaused,
        MirrorErrorCode::MirrorTopicNotPaused,
        MirrorErrorCode::MirrorTopicBeingStopped,
        MirrorErrorCode::ClusterMirrorNotEmpty,
        MirrorErrorCode::ClusterMirrorAuthorizationFailed,
        MirrorErrorCode::InvalidClusterMirrorStates,
        MirrorErrorCode::MirrorTopicNotStopped,
    ];

    /// The wire value of the `ErrorCode` field.
    pub const fn code(self) -> i16 {
        self as i16
    }

    /// The code's mirror error, if it is one of 134–146.
    pub fn from_code(code: i16) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.code() == code)
    }

    /// Kafka's name for the error, e.g. `UNKNOWN_CLUSTER_MIRROR`.
    pub const fn name(self) -> &'static str {
        match self {
            MirrorErrorCode::ReadOnlyTopic => "READ_ONLY_TOPIC",
            MirrorErrorCode::InvalidClusterMirrorName => "INVALID_CLUSTER_MIRROR_NAME",
            MirrorErrorCode::ClusterMirrorAlreadyExists => "CLUSTER_MIRROR_ALREADY_EXISTS",
            MirrorErrorCode::UnknownClusterMirror => "UNKNOWN_CLUSTER_MIRROR",
            MirrorErrorCode::TopicAlreadyInClusterMirror => "TOPIC_ALREADY_IN_CLUSTER_MIRROR",
            MirrorErrorCode::TopicNotInClusterMirror => "TOPIC_NOT_IN_CLUSTER_MIRROR",
            MirrorErrorCode::MirrorTopicAlreadyPaused => "MIRROR_TOPIC_ALREADY_PAUSED",
            MirrorErrorCode::MirrorTopicNotPaused => "MIRROR_TOPIC_NOT_PAUSED",
            MirrorErrorCode::MirrorTopicBeingStopped => "MIRROR_TOPIC_BEING_STOPPED",
            MirrorErrorCode::ClusterMirrorNotEmpty => "CLUSTER_MIRROR_NOT_EMPTY",
            MirrorErrorCode::ClusterMirrorAuthorizationFailed => "CLUSTER_MIRROR_AUTHORIZATION_FAILED",
            MirrorErrorCode::InvalidClusterMirrorStates => "INVALID_CLUSTER_MIRROR_STATES",
            MirrorErrorCode::MirrorTopicNotStopped => "MIRROR_TOPIC_NOT_STOPPED",
        }
    }

    /// The prototype's default message (what a Java client shows when `ErrorMessage` is null).
    pub const fn default_message(self) -> &'static str {
        match self {
            MirrorErrorCode::ReadOnlyTopic => "The topic is read-only.",
            MirrorErrorCode::InvalidClusterMirrorName => "The cluster mirror name does not meet the naming rules.",
            MirrorErrorCode::ClusterMirrorAlreadyExists => "The cluster mirror already exists.",
            MirrorErrorCode::UnknownClusterMirror => "The cluster mirror does not exist.",
            MirrorErrorCode::TopicAlreadyInClusterMirror => "The topic is already assigned to a cluster mirror.",
            MirrorErrorCode::TopicNotInClusterMirror => "The topic does not belong to the specified cluster mirror.",
            MirrorErrorCode::MirrorTopicAlreadyPaused => "The mirror topic is already paused.",
            MirrorErrorCode::MirrorTopicNotPaused => "The mirror topic is not paused.",
            MirrorErrorCode::MirrorTopicBeingStopped => "The mirror topic is being stopped.",
            MirrorErrorCode::ClusterMirrorNotEmpty => "The cluster mirror still has active or non-stopped topics.",
            MirrorErrorCode::ClusterMirrorAuthorizationFailed => "Cluster mirror authorization failed.",
            MirrorErrorCode::InvalidClusterMirrorStates => {
                "Cluster mirror partition states are not in the expected states."
            }
            MirrorErrorCode::MirrorTopicNotStopped => "The mirror topic is not stopped.",
        }
    }

    /// Whether a client may retry the same request; none of the KIP-1279 codes is retriable in
    /// the prototype (none of their exceptions extends `RetriableException`).
    pub const fn is_retriable(self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_contiguous_and_round_trip() {
        for (i, e) in MirrorErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(e.code(), 134 + i as i16);
            assert_eq!(MirrorErrorCode::from_code(e.code()), Some(e));
            assert!(!e.default_message().is_empty());
        }
        assert_eq!(MirrorErrorCode::from_code(133), None);
        assert_eq!(MirrorErrorCode::from_code(147), None);
        assert_eq!(MirrorErrorCode::UnknownClusterMirror.name(), "UNKNOWN_CLUSTER_MIRROR");
        assert_eq!(MirrorErrorCode::ClusterMirrorNotEmpty.code(), 143);
    }
}
