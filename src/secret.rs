//! The one type for secret text: passwords, JAAS lines (`sasl.jaas.config`), OAuth client
//! secrets and access tokens, private keys, `password_encoder_secret`, exporter headers.
//! Its `Debug` and `Display` print [`HIDDEN`], never the value, so a struct holding one can
//! derive `Debug` and be logged without leaking it; the value is read only through
//! [`Secret::expose`], which makes every use visible in the code.
//!
//! It never decides what is secret in a key/value map (mirror configs are such a map): see
//! [`is_secret_key`] and `mirror::configs::is_sensitive` for that, and [`RedactedConfigs`] to
//! show such a map.

use std::collections::BTreeMap;
use std::fmt;

/// What `Debug` and `Display` print instead of a secret.
pub const HIDDEN: &str = "[hidden]";

/// Secret text. Compared and cloned as a string; shown as [`HIDDEN`]. Deserializes from a
/// plain string (YAML, JSON).
#[derive(Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps `s`.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The secret itself: use it, never log or format it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(HIDDEN)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(HIDDEN)
    }
}

/// Whether a Java client property or mirror config named `key` holds a secret by its name
/// alone: a name containing `password`, `jaas` or `secret` (`ssl.key.password`,
/// `sasl.jaas.config`, `sasl.oauthbearer.client.credentials.client.secret`), or the private
/// key `ssl.keystore.key`. Case-insensitive.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password") || k.contains("jaas") || k.contains("secret") || k == "ssl.keystore.key"
}

/// `Debug` of a config map (`key → value`) with the values of keys that `sensitive` names
/// shown as [`HIDDEN`].
pub struct RedactedConfigs<'a> {
    configs: &'a BTreeMap<String, String>,
    sensitive: fn(&str) -> bool,
}

impl<'a> RedactedConfigs<'a> {
    /// Shows `configs`, hiding the values of keys for which `sensitive` is true.
    pub fn new(configs: &'a BTreeMap<String, String>, sensitive: fn(&str) -> bool) -> Self {
        Self { configs, sensitive }
    }
}

impl fmt::Debug for RedactedConfigs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.configs.iter().map(|(k, v)| (k, if (self.sensitive)(k) { HIDDEN } else { v.as_str() })))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_hide_the_value() {
        let s = Secret::new("hunter2-pw");
        assert_eq!(format!("{s:?}"), HIDDEN);
        assert_eq!(format!("{s}"), HIDDEN);
        assert_eq!(format!("{:?}", Some(&s)), format!("Some({HIDDEN})"));
        assert_eq!(s.expose(), "hunter2-pw");
        let parsed: Secret = serde_json::from_str("\"from-json\"").unwrap();
        assert_eq!(parsed, Secret::new("from-json"));
    }

    #[test]
    fn secret_keys_by_name() {
        for k in [
            "sasl.jaas.config",
            "ssl.key.password",
            "SSL.TRUSTSTORE.PASSWORD",
            "ssl.keystore.key",
            "sasl.oauthbearer.client.credentials.client.secret",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in ["bootstrap.servers", "ssl.keystore.location", "sasl.mechanism", "ssl.keystore.certificate.chain"] {
            assert!(!is_secret_key(k), "{k}");
        }
    }

    #[test]
    fn redacted_configs_hide_sensitive_values_only() {
        let m: BTreeMap<String, String> =
            [("bootstrap.servers", "a:1"), ("sasl.jaas.config", "x password=\"pw-123\";")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let shown = format!("{:?}", RedactedConfigs::new(&m, is_secret_key));
        assert!(shown.contains("a:1") && shown.contains(HIDDEN) && !shown.contains("pw-123"), "{shown}");
    }
}
