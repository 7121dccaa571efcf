//! `mirror_state.*`: the `__mirror_state` topic and the key of secret mirror configs.

use serde::Deserialize;

use super::{invalid, ConfigError, Secret};

/// Where mirrorgate keeps its state (KIP-1279 `mirror.state.topic.*` broker configs).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorStateConfig {
    /// Compacted state topic name (default `__mirror_state`).
    #[serde(default = "default_state_topic")]
    pub topic: String,
    /// Partitions when mirrorgate creates it (`mirror.state.topic.num.partitions`, default 50).
    #[serde(default = "default_state_partitions")]
    pub num_partitions: i32,
    /// Replication factor when mirrorgate creates it (`mirror.state.topic.replication.factor`,
    /// default 3; lowered to the destination's broker count with a warning).
    #[serde(default = "default_state_rf")]
    pub replication_factor: i16,
    /// Key that encrypts secret mirror configs in the state topic (like the broker's
    /// `password.encoder.secret`); without it a mirror config holding a secret is refused.
    #[serde(default)]
    pub password_encoder_secret: Option<Secret>,
    /// The previous key while rotating (`password.encoder.old.secret`): values it opens are
    /// written again under `password_encoder_secret` at startup.
    #[serde(default)]
    pub password_encoder_old_secret: Option<Secret>,
}

/// Fewest characters `mirror_state.password_encoder_secret` may have. Anyone who can read
/// `__mirror_state` holds each secret's salt and ciphertext and can try keys offline, and
/// PBKDF2 with 4096 iterations costs a guesser little: 16 random characters (about 95 bits
/// from letters and digits) put that out of reach, where a word or a short phrase does not.
pub const MIN_ENCODER_SECRET_CHARS: usize = 16;

impl MirrorStateConfig {
    /// Checks the section: a topic name, at least one partition, usable encoder secrets
    /// ([`Self::check_encoder_secrets`]) and a replication factor of at least 1.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key.
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        if self.topic.is_empty() {
            return Err(invalid("mirror_state.topic", "must not be empty"));
        }
        if self.num_partitions < 1 {
            return Err(invalid("mirror_state.num_partitions", "must be at least 1"));
        }
        self.check_encoder_secrets()?;
        if self.replication_factor < 1 {
            return Err(invalid("mirror_state.replication_factor", "must be at least 1"));
        }
        Ok(())
    }

    /// Checks `password_encoder_secret` (at least [`MIN_ENCODER_SECRET_CHARS`] characters) and
    /// `password_encoder_old_secret` (not empty: it only has to open what an earlier, maybe
    /// shorter, secret wrote).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key.
    fn check_encoder_secrets(&self) -> Result<(), ConfigError> {
        if let Some(s) = &self.password_encoder_secret {
            let n = s.expose().chars().count();
            if n < MIN_ENCODER_SECRET_CHARS {
                return Err(invalid(
                    "mirror_state.password_encoder_secret",
                    format!(
                        "has {n} characters; at least {MIN_ENCODER_SECRET_CHARS} are required (a long random string, e.g. `openssl rand -base64 24`): whoever can read the state topic can try short keys offline"
                    ),
                ));
            }
        }
        if self.password_encoder_old_secret.as_ref().is_some_and(Secret::is_empty) {
            return Err(invalid("mirror_state.password_encoder_old_secret", "must not be empty (unset it instead)"));
        }
        Ok(())
    }
}

impl Default for MirrorStateConfig {
    fn default() -> Self {
        Self {
            topic: default_state_topic(),
            num_partitions: default_state_partitions(),
            replication_factor: default_state_rf(),
            password_encoder_secret: None,
            password_encoder_old_secret: None,
        }
    }
}

fn default_state_topic() -> String {
    "__mirror_state".into()
}
fn default_state_partitions() -> i32 {
    50
}
fn default_state_rf() -> i16 {
    3
}
