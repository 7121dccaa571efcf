//! `authorization.*` and `mirrors.*`: who may run the mirror RPCs mirrorgate answers itself,
//! and what mirror configs may point at (docs/security.md).

use serde::Deserialize;

use super::{invalid, ConfigError};

/// Authorization of what mirrorgate answers itself (docs/security.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationConfig {
    /// The destination's `super.users` (principals such as `User:admin`): they may run every
    /// mirror RPC whatever the ACLs say. Kafka does not expose this broker setting over the
    /// protocol, so it is repeated here.
    #[serde(default)]
    pub super_users: Vec<String>,
}

/// Limits on what mirror configs (set over the Kafka protocol by whoever may alter mirrors)
/// may point at; only the operator sets these (docs/security.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorsConfig {
    /// OAuth token endpoints mirrors may use: comma-separated exact URLs, as Kafka 4.0's
    /// `org.apache.kafka.sasl.oauthbearer.allowed.urls` (CVE-2025-27817). Unset: each mirror
    /// keeps the endpoint it was created with; empty: no mirror may use OAUTHBEARER.
    #[serde(default)]
    pub sasl_oauthbearer_allowed_urls: Option<String>,
    /// The one directory whose files mirrors' `ssl.truststore.location` and
    /// `ssl.keystore.location` may name (an absolute path to an existing directory). Unset:
    /// mirrors may name no file on mirrorgate's host (PEM text still works).
    #[serde(default)]
    pub ssl_files_dir: Option<String>,
}

impl AuthorizationConfig {
    /// Checks that each of `super_users` is a principal like `User:admin`.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `authorization.super_users[i]`.
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        for (i, p) in self.super_users.iter().enumerate() {
            if !p.split_once(':').is_some_and(|(t, n)| !t.is_empty() && !n.is_empty()) {
                return Err(invalid(
                    format!("authorization.super_users[{i}]"),
                    format!("`{p}` is not a principal like `User:admin`"),
                ));
            }
        }
        Ok(())
    }
}

impl MirrorsConfig {
    /// `ssl_files_dir`, canonical (`None`: unset).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `mirrors.ssl_files_dir`.
    pub(super) fn files_dir(&self) -> Result<Option<std::path::PathBuf>, ConfigError> {
        self.ssl_files_dir.as_deref().map(parse_files_dir).transpose().map_err(|r| invalid("mirrors.ssl_files_dir", r))
    }

    /// `sasl_oauthbearer_allowed_urls`, parsed (`None`: unset).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `mirrors.sasl_oauthbearer_allowed_urls`.
    pub(super) fn allowed_urls(&self) -> Result<Option<Vec<String>>, ConfigError> {
        match &self.sasl_oauthbearer_allowed_urls {
            None => Ok(None),
            Some(text) => {
                Ok(Some(parse_allowed_urls(text).map_err(|r| invalid("mirrors.sasl_oauthbearer_allowed_urls", r))?))
            }
        }
    }
}

/// Parses the allow-list as Kafka reads `org.apache.kafka.sasl.oauthbearer.allowed.urls`:
/// comma-separated, each entry trimmed; empty entries are dropped, so an empty text allows no
/// URL. Each entry must be an http or https URL.
///
/// # Errors
/// The first entry that is not an http(s) URL, in a message.
pub fn parse_allowed_urls(text: &str) -> Result<Vec<String>, String> {
    let urls: Vec<String> = text.split(',').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect();
    for u in &urls {
        if !reqwest::Url::parse(u).is_ok_and(|p| matches!(p.scheme(), "http" | "https")) {
            return Err(format!("`{u}` is not an http:// or https:// URL"));
        }
    }
    Ok(urls)
}

/// Checks proxy.yaml's `mirrors.ssl_files_dir`: an existing directory, made canonical.
///
/// # Errors
/// The reason, as text.
pub fn parse_files_dir(text: &str) -> Result<std::path::PathBuf, String> {
    let p = std::path::Path::new(text.trim());
    if !p.is_absolute() {
        return Err(format!("`{text}` is not an absolute path"));
    }
    let real = std::fs::canonicalize(p).map_err(|e| format!("`{text}`: {e}"))?;
    if !real.is_dir() {
        return Err(format!("`{text}` is not a directory"));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allow_list_is_read_as_kafka_reads_it() {
        assert_eq!(
            parse_allowed_urls(" https://a/token , http://b:8080/t ,").unwrap(),
            vec!["https://a/token", "http://b:8080/t"]
        );
        assert_eq!(parse_allowed_urls("").unwrap(), Vec::<String>::new());
        assert!(parse_allowed_urls("https://a/token,file:///etc/passwd").unwrap_err().contains("file:///etc/passwd"));
    }
}
