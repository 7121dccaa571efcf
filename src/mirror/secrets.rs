//! Secret mirror configs at rest (issue 11 item 6): the values of sensitive mirror configs
//! (`sasl.jaas.config`, passwords, private keys; [`super::configs::is_sensitive`]) are stored
//! in `__mirror_state` encrypted with a key the operator provides, like the broker's
//! `password.encoder.secret` for dynamic password configs.
//!
//! Format of a stored value: `enc:v1:` + base64 (standard, padded) of
//! `salt (16 bytes) | nonce (12 bytes) | AES-256-GCM ciphertext and tag`. The AES key is
//! PBKDF2-HMAC-SHA256 of the operator's secret with that salt, 4096 iterations (the broker's
//! `password.encoder.iterations` default). The associated data is `mirror/config-key`, so a
//! ciphertext cannot be moved to another mirror or key. Crypto is `ring` (the TLS provider
//! already in the build); nothing here is hand-rolled beyond the framing.
//!
//! Rotation: set the new secret as `password_encoder_secret` and the previous one as
//! `password_encoder_old_secret`; at startup every value readable only with the old secret
//! (or stored in clear by an older build) is written again under the new one.

use std::num::NonZeroU32;

use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

/// Prefix of an encrypted value.
pub const PREFIX: &str = "enc:v1:";
const SALT_LEN: usize = 16;
const ITERATIONS: u32 = 4096;

/// Encrypts and decrypts secret config values with the operator's secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretCodec {
    current: Vec<u8>,
    old: Option<Vec<u8>>,
}

impl std::fmt::Debug for SecretCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretCodec").field("old_secret", &self.old.is_some()).finish_non_exhaustive()
    }
}

/// Which secret opened a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// The value was stored in clear (an older build, or before a secret was set).
    Clear,
    /// `password_encoder_secret`.
    Current,
    /// `password_encoder_old_secret`: write it again under the current secret.
    Old,
}

/// Whether a stored value is encrypted.
pub fn is_encrypted(value: &str) -> bool {
    value.starts_with(PREFIX)
}

fn aead_key(secret: &[u8], salt: &[u8]) -> LessSafeKey {
    let mut key = [0u8; 32];
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA256,
        NonZeroU32::new(ITERATIONS).expect("non-zero"),
        salt,
        secret,
        &mut key,
    );
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &key).expect("a 32-byte key fits AES-256-GCM"))
}

impl SecretCodec {
    /// A codec for `secret` (and, while rotating, the previous `old` secret).
    pub fn new(secret: &str, old: Option<&str>) -> Self {
        Self { current: secret.as_bytes().to_vec(), old: old.map(|o| o.as_bytes().to_vec()) }
    }

    /// The codec of proxy.yaml's `mirror_state.password_encoder_secret` (and
    /// `password_encoder_old_secret` while rotating); `None` when no key is set.
    pub fn from_config(cfg: &crate::config::MirrorStateConfig) -> Option<std::sync::Arc<Self>> {
        cfg.password_encoder_secret.as_ref().map(|s| {
            std::sync::Arc::new(Self::new(
                s.expose(),
                cfg.password_encoder_old_secret.as_ref().map(crate::secret::Secret::expose),
            ))
        })
    }

    /// Encrypts `plaintext` for config `aad` (`mirror/key`).
    ///
    /// # Errors
    /// The system random source failed (no value is stored then).
    pub fn encrypt(&self, aad: &str, plaintext: &str) -> Result<String, String> {
        let rng = SystemRandom::new();
        let mut head = [0u8; SALT_LEN + NONCE_LEN];
        rng.fill(&mut head).map_err(|_| "the system random source failed".to_string())?;
        let key = aead_key(&self.current, &head[..SALT_LEN]);
        let nonce = Nonce::try_assume_unique_for_key(&head[SALT_LEN..]).map_err(|_| "bad nonce length".to_string())?;
        let mut buf = plaintext.as_bytes().to_vec();
        key.seal_in_place_append_tag(nonce, Aad::from(aad.as_bytes()), &mut buf)
            .map_err(|_| "encryption failed".to_string())?;
        let mut out = head.to_vec();
        out.extend(buf);
        Ok(format!("{PREFIX}{}", base64::engine::general_purpose::STANDARD.encode(out)))
    }

    /// Opens a stored value for config `aad`: clear text as is, `enc:v1:` values with the
    /// current secret, then the old one.
    ///
    /// # Errors
    /// A message (without the value) when the value is malformed or neither secret opens it.
    pub fn decrypt(&self, aad: &str, stored: &str) -> Result<(String, Opened), String> {
        let Some(encoded) = stored.strip_prefix(PREFIX) else {
            return Ok((stored.to_string(), Opened::Clear));
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| "the stored value is not valid base64".to_string())?;
        if raw.len() < SALT_LEN + NONCE_LEN + AES_256_GCM.tag_len() {
            return Err("the stored value is too short".into());
        }
        let (salt, rest) = raw.split_at(SALT_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let candidates = [(Some(&self.current), Opened::Current), (self.old.as_ref(), Opened::Old)];
        for (secret, which) in candidates {
            let Some(secret) = secret else { continue };
            let key = aead_key(secret, salt);
            let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| "bad nonce length".to_string())?;
            let mut buf = sealed.to_vec();
            if let Ok(plain) = key.open_in_place(nonce, Aad::from(aad.as_bytes()), &mut buf) {
                let text = String::from_utf8(plain.to_vec()).map_err(|_| "the decrypted value is not UTF-8")?;
                return Ok((text, which));
            }
        }
        Err("neither password_encoder_secret nor password_encoder_old_secret opens it (wrong secret?)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bound_to_its_slot() {
        let c = SecretCodec::new("s3cret-key", None);
        let stored = c.encrypt("m1/sasl.jaas.config", "password=\"hunter2\"").unwrap();
        assert!(is_encrypted(&stored));
        assert!(!stored.contains("hunter2"));
        assert_eq!(
            c.decrypt("m1/sasl.jaas.config", &stored).unwrap(),
            ("password=\"hunter2\"".into(), Opened::Current)
        );
        assert!(c.decrypt("m2/sasl.jaas.config", &stored).is_err(), "moved to another mirror");
        // Two encryptions of one value differ (fresh salt and nonce).
        assert_ne!(stored, c.encrypt("m1/sasl.jaas.config", "password=\"hunter2\"").unwrap());
    }

    #[test]
    fn rotation_opens_old_values_and_flags_them() {
        let old = SecretCodec::new("old-key", None);
        let stored = old.encrypt("m/ssl.truststore.password", "pw").unwrap();
        let rotated = SecretCodec::new("new-key", Some("old-key"));
        assert_eq!(rotated.decrypt("m/ssl.truststore.password", &stored).unwrap(), ("pw".into(), Opened::Old));
        let wrong = SecretCodec::new("new-key", None);
        let e = wrong.decrypt("m/ssl.truststore.password", &stored).unwrap_err();
        assert!(!e.contains("pw"), "{e}");
        assert_eq!(wrong.decrypt("k", "plain").unwrap(), ("plain".into(), Opened::Clear));
    }

    #[test]
    fn malformed_values_are_errors_not_panics() {
        let c = SecretCodec::new("k", None);
        for v in ["enc:v1:", "enc:v1:!!!", "enc:v1:AAAA", &format!("{PREFIX}{}", "A".repeat(80))] {
            assert!(c.decrypt("a", v).is_err(), "{v}");
        }
    }
}
