//! The mirror partition state machine (KIP-1279 §4.2, prototype
//! `MirrorPartitionMetadata.isValidStateTransition`) and the step a partition takes towards
//! its topic's desired state (§4.3). Pure functions: the control plane persists, the data
//! plane acts.

use crate::wire::mirror::MirrorPartitionState as S;

use super::model::DesiredState;

/// Whether `from → to` is a valid transition. `None` stands for "no state yet".
/// Re-asserting the same state and moving to FAILED are always valid.
pub fn is_valid_transition(from: Option<S>, to: S) -> bool {
    use S::*;
    if Some(to) == from || to == Failed {
        return true;
    }
    let from = from.unwrap_or(Unknown);
    match to {
        LogAlignment => matches!(from, Unknown | Stopped | Failed),
        EpochFencing | UleRecovery => from == Mirroring,
        Mirroring => matches!(from, LogAlignment | EpochFencing | Paused | UleRecovery | Failed),
        Pausing => from == Mirroring,
        Paused => from == Pausing,
        Stopping => matches!(from, LogAlignment | EpochFencing | Mirroring | Pausing | Paused | UleRecovery | Failed),
        Stopped => from == Stopping,
        Failed | Unknown => false,
    }
}

/// The next state a partition in `current` takes for `desired` (KIP-1279 §4.3): stop →
/// STOPPING (STOPPED once there); pause → PAUSING (PAUSED once there); a PAUSED partition
/// without a pause request → MIRRORING; UNKNOWN or STOPPED with a start request →
/// LOG_ALIGNMENT; FAILED stays FAILED (retries are scheduled separately) unless stopped.
/// Returns `None` when the partition should stay where it is.
pub fn next_step(current: Option<S>, desired: DesiredState) -> Option<S> {
    use S::*;
    let current_or_unknown = current.unwrap_or(Unknown);
    let next = match (desired, current_or_unknown) {
        (DesiredState::Stopped, Stopped) => return None,
        (DesiredState::Stopped, Stopping) => Stopped,
        (DesiredState::Stopped, Unknown) => Stopped,
        (DesiredState::Stopped, _) => Stopping,
        (_, Failed) => return None,
        (DesiredState::Paused, Paused) => return None,
        (DesiredState::Paused, Pausing) => Paused,
        (DesiredState::Paused, Mirroring) => Pausing,
        (DesiredState::Paused, Unknown | Stopped) => LogAlignment,
        (DesiredState::Paused, _) => return None,
        (DesiredState::Mirroring, Paused) => Mirroring,
        // PAUSING may only end in PAUSED; the resume follows from there.
        (DesiredState::Mirroring, Pausing) => Paused,
        (DesiredState::Mirroring, Unknown | Stopped) => LogAlignment,
        (DesiredState::Mirroring, _) => return None,
    };
    debug_assert!(is_valid_transition(current, next) || current_or_unknown == Unknown, "{current:?} -> {next:?}");
    Some(next)
}

/// Whether clients may write to a partition in `state`: only STOPPED is writable
/// (KIP-1279 §9); a topic with no state yet is read-only as soon as it is a mirror topic.
pub fn is_writable(state: Option<S>) -> bool {
    state == Some(S::Stopped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use S::*;

    #[test]
    fn kip_transition_table() {
        assert!(is_valid_transition(None, LogAlignment));
        assert!(is_valid_transition(Some(LogAlignment), Mirroring));
        assert!(is_valid_transition(Some(Mirroring), Pausing));
        assert!(is_valid_transition(Some(Pausing), Paused));
        assert!(is_valid_transition(Some(Paused), Mirroring));
        assert!(is_valid_transition(Some(Paused), Stopping));
        assert!(is_valid_transition(Some(Stopping), Stopped));
        assert!(is_valid_transition(Some(Stopped), LogAlignment));
        assert!(is_valid_transition(Some(Stopped), Failed));
        assert!(!is_valid_transition(Some(Mirroring), Stopped), "STOPPED only via STOPPING");
        assert!(!is_valid_transition(Some(Paused), Pausing));
        assert!(!is_valid_transition(Some(Stopped), Mirroring), "failback goes through LOG_ALIGNMENT");
        assert!(!is_valid_transition(Some(LogAlignment), Paused));
    }

    #[test]
    fn steps_towards_desired_state_are_valid_transitions() {
        let all =
            [Unknown, LogAlignment, EpochFencing, UleRecovery, Mirroring, Pausing, Paused, Stopping, Stopped, Failed];
        for desired in [DesiredState::Mirroring, DesiredState::Paused, DesiredState::Stopped] {
            for s in all {
                if let Some(next) = next_step(Some(s), desired) {
                    assert!(is_valid_transition(Some(s), next) || s == Unknown, "{s:?} -> {next:?} for {desired:?}");
                }
            }
        }
        assert_eq!(next_step(Some(Mirroring), DesiredState::Stopped), Some(Stopping));
        assert_eq!(next_step(Some(Stopping), DesiredState::Stopped), Some(Stopped));
        assert_eq!(next_step(Some(Failed), DesiredState::Stopped), Some(Stopping));
        assert_eq!(next_step(Some(Failed), DesiredState::Mirroring), None);
        assert_eq!(next_step(Some(Paused), DesiredState::Mirroring), Some(Mirroring));
        assert_eq!(next_step(None, DesiredState::Mirroring), Some(LogAlignment));
    }

    #[test]
    fn only_stopped_is_writable() {
        assert!(is_writable(Some(Stopped)));
        for s in [Mirroring, Paused, Failed, Stopping, LogAlignment] {
            assert!(!is_writable(Some(s)));
        }
        assert!(!is_writable(None));
    }
}
