//! Credentials bound to where they were given (issue 32). A mirror's stored secrets — the
//! PLAIN or SCRAM password and the OAuth client secret in `sasl.jaas.config`,
//! `sasl.oauthbearer.client.credentials.client.secret`, the mutual-TLS key and its passwords —
//! are sent, or used, only where the mirror's configs pointed when they were given. Whoever
//! may alter a mirror's configs need not know its secrets (DescribeConfigs never returns
//! them); without this rule, changing `bootstrap.servers` alone would make the next
//! connection send the stored password to a host of their choice.
//!
//! Two rules, checked by CreateClusterMirror and IncrementalAlterConfigs (and its
//! `validate_only` form) before anything is stored; refusals are INVALID_CONFIG (40) naming
//! the key and the rule:
//! - An alter that changes where the credentials go ([`DESTINATION_KEYS`]: the source
//!   address, protocol, mechanism, token endpoint, trust and host-name verification) must
//!   set, or delete, every stored credential ([`CREDENTIAL_KEYS`]) in the same request.
//! - OAuth token endpoints follow an allow-list, as Kafka 4.0's
//!   `org.apache.kafka.sasl.oauthbearer.allowed.urls` (CVE-2025-27817): proxy.yaml's
//!   `mirrors.sasl_oauthbearer_allowed_urls`, exact URLs, checked at create, at alter and
//!   whenever a mirror's client is built ([`check_token_url`]). Without it, each mirror's list
//!   is the endpoint it was created with: an alter may not name another one.
//!
//! This module never reads or stores a secret value; it only looks at which keys are set.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::configs::{canonical, effective, set_value, ConfigValueError};
use crate::client::SecurityError;

/// Mirror configs whose value decides where the stored credentials are sent or whom they
/// are shown to: the source address, the protocol (TLS or not), the SASL mechanism (PLAIN
/// sends the password itself, SCRAM a proof), the token endpoint, the trusted CAs and host
/// name verification (who may pose as the source).
pub const DESTINATION_KEYS: &[&str] = &[
    "bootstrap.servers",
    "security.protocol",
    "sasl.mechanism",
    "sasl.oauthbearer.token.endpoint.url",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.endpoint.identification.algorithm",
];

/// Mirror configs holding a credential of the mirror towards its source: the SASL password
/// or OAuth client secret, and the mutual-TLS private key with the passwords that open it.
/// (`ssl.truststore.password` only guards the trusted CAs' integrity: not a credential.)
pub const CREDENTIAL_KEYS: &[&str] = &[
    "sasl.jaas.config",
    "sasl.oauthbearer.client.credentials.client.secret",
    "ssl.keystore.key",
    "ssl.keystore.password",
    "ssl.key.password",
];

/// The token endpoint key.
const TOKEN_URL: &str = "sasl.oauthbearer.token.endpoint.url";

/// proxy.yaml's key for the allow-list, as messages name it.
pub const ALLOWED_URLS_SETTING: &str = "mirrors.sasl_oauthbearer_allowed_urls";

fn installed() -> &'static RwLock<Option<Arc<[String]>>> {
    static ALLOWED: RwLock<Option<Arc<[String]>>> = RwLock::new(None);
    &ALLOWED
}

/// Installs proxy.yaml's `mirrors.sasl_oauthbearer_allowed_urls` for this process (`None`:
/// not set). Called once at startup, before any mirror is loaded.
pub fn install_allowed_urls(urls: Option<Vec<String>>) {
    *installed().write().unwrap_or_else(|e| e.into_inner()) = urls.map(Arc::from);
}

/// The installed allow-list (`None`: not set).
pub fn allowed_urls() -> Option<Arc<[String]>> {
    installed().read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `url` as messages show it: without `user:password@` (unparsable text is not shown).
fn shown(url: &str) -> String {
    reqwest::Url::parse(url).map(|u| crate::client::oauth::shown_url(&u)).unwrap_or_else(|_| "the URL".into())
}

fn not_listed(url: &str) -> String {
    format!(
        "`{}` is not in proxy.yaml's {ALLOWED_URLS_SETTING} (mirrorgate's org.apache.kafka.sasl.oauthbearer.allowed.urls, CVE-2025-27817: a token endpoint receives the client credentials, so only the operator may name one); add it there and restart mirrorgate",
        shown(url)
    )
}

/// Checks a mirror's token endpoint against the installed allow-list, when both are set.
/// Called whenever a mirror's client security is built, so a mirror stored before the list
/// was narrowed never requests a token from an endpoint the list no longer holds.
///
/// # Errors
/// [`SecurityError`] on `sasl.oauthbearer.token.endpoint.url`.
pub fn check_token_url(configs: &BTreeMap<String, String>) -> Result<(), SecurityError> {
    check_token_url_with(configs, allowed_urls().as_deref())
}

fn check_token_url_with(configs: &BTreeMap<String, String>, allowed: Option<&[String]>) -> Result<(), SecurityError> {
    let url = effective(configs, TOKEN_URL).map(str::trim).filter(|u| !u.is_empty());
    match (url, allowed) {
        (Some(url), Some(list)) if !list.iter().any(|a| a == url) => {
            Err(SecurityError { key: TOKEN_URL.into(), reason: not_listed(url) })
        }
        _ => Ok(()),
    }
}

/// Checks an IncrementalAlterConfigs change (`Some` sets, `None` deletes) of a mirror whose
/// configs are `current`, against both rules of this module with the installed allow-list.
///
/// # Errors
/// [`ConfigValueError::Invalid`] on the key that breaks a rule.
pub fn validate_changes(
    current: &BTreeMap<String, String>,
    changes: &[(String, Option<String>)],
) -> Result<(), ConfigValueError> {
    validate_changes_with(current, changes, allowed_urls().as_deref())
}

/// [`validate_changes`] with the allow-list `allowed` (`None`: proxy.yaml sets none, so the
/// endpoint a mirror was created with is its only one).
///
/// # Errors
/// As [`validate_changes`].
pub fn validate_changes_with(
    current: &BTreeMap<String, String>,
    changes: &[(String, Option<String>)],
    allowed: Option<&[String]>,
) -> Result<(), ConfigValueError> {
    let mut after = current.clone();
    for (k, v) in changes {
        match v {
            Some(v) => after.insert(k.clone(), v.clone()),
            None => after.remove(k),
        };
    }
    let value = |m: &BTreeMap<String, String>, k: &str| -> Option<String> {
        let v = effective(m, k)?;
        // A list compares entry by entry (`a:1, b:2` is `a:1,b:2`); other values trimmed.
        let v: Vec<&str> =
            if k == "bootstrap.servers" { v.split(',').map(str::trim).collect() } else { vec![v.trim()] };
        Some(v.join(",")).filter(|v| !v.is_empty())
    };
    let invalid = |key: &str, reason: String| ConfigValueError::Invalid { key: key.into(), reason };
    // The token endpoint: only one the operator allowed.
    let (url_before, url_after) = (value(current, TOKEN_URL), value(&after, TOKEN_URL));
    if let Some(url) = url_after.as_deref().filter(|_| url_before != url_after) {
        match allowed {
            Some(list) if !list.iter().any(|a| a == url) => return Err(invalid(TOKEN_URL, not_listed(url))),
            Some(_) => {}
            None => {
                return Err(invalid(
                    TOKEN_URL,
                    format!(
                        "a mirror keeps the token endpoint it was created with ({}) unless proxy.yaml's {ALLOWED_URLS_SETTING} lists another (mirrorgate's org.apache.kafka.sasl.oauthbearer.allowed.urls, CVE-2025-27817)",
                        url_before.as_deref().map_or_else(|| "none".into(), shown)
                    ),
                ))
            }
        }
    }
    // Every stored credential must be set anew (or deleted) by a request that moves it.
    let given = |k: &str| changes.iter().any(|(c, _)| canonical(c) == k);
    let stale: Vec<&str> = CREDENTIAL_KEYS
        .iter()
        .copied()
        .filter(|k| set_value(current, k).is_some_and(|v| !v.is_empty()) && !given(k))
        .collect();
    if stale.is_empty() {
        return Ok(());
    }
    let moved: Vec<&str> = DESTINATION_KEYS.iter().copied().filter(|k| value(current, k) != value(&after, k)).collect();
    match moved.first() {
        None => Ok(()),
        Some(key) => Err(invalid(
            key,
            format!(
                "credentials are bound to where they were given: changing {} would send or use the mirror's stored {} there; set {} again in the same request (or delete {})",
                moved.join(" and "),
                stale.join(" and "),
                stale.join(" and "),
                if stale.len() == 1 { "it" } else { "them" }
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn set(k: &str, v: &str) -> (String, Option<String>) {
        (k.to_string(), Some(v.to_string()))
    }

    const PLAIN_JAAS: &str =
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="pw";"#;

    fn sasl_mirror() -> BTreeMap<String, String> {
        map(&[
            ("bootstrap.servers", "src-1:9092,src-2:9092"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", PLAIN_JAAS),
            ("ssl.truststore.location", "/etc/ca.pem"),
        ])
    }

    #[test]
    fn moving_the_credentials_needs_them_in_the_same_request() {
        let cur = sasl_mirror();
        for (k, v) in [
            ("bootstrap.servers", "evil:9092"),
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("ssl.truststore.location", "/tmp/evil-ca.pem"),
            ("ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.endpoint.identification.algorithm", ""),
        ] {
            let e = validate_changes_with(&cur, &[set(k, v)], None).unwrap_err();
            assert!(
                matches!(&e, ConfigValueError::Invalid { key, reason }
                    if key == k && reason.contains("bound to where they were given") && reason.contains("sasl.jaas.config")),
                "{k}: {e}"
            );
            assert!(!e.to_string().contains("pw"), "{e}");
            // With the password given again (or removed), the same change is accepted.
            assert_eq!(validate_changes_with(&cur, &[set(k, v), set("sasl.jaas.config", PLAIN_JAAS)], None), Ok(()));
            assert_eq!(validate_changes_with(&cur, &[set(k, v), ("sasl.jaas.config".into(), None)], None), Ok(()));
        }
        // Deleting a destination key moves it too (security.protocol back to PLAINTEXT).
        assert!(validate_changes_with(&cur, &[("ssl.truststore.location".into(), None)], None).is_err());
    }

    #[test]
    fn unchanged_destinations_and_other_keys_need_nothing() {
        let cur = sasl_mirror();
        for change in [
            vec![set("bootstrap.servers", " src-1:9092 , src-2:9092 ")],
            vec![set("security.protocol", "SASL_SSL")],
            vec![set("ssl.endpoint.identification.algorithm", "https")],
            vec![set("fetch.max.bytes", "2048"), set("replica.fetch.wait.max.ms", "100")],
            vec![set("sasl.jaas.config", PLAIN_JAAS)],
        ] {
            assert_eq!(validate_changes_with(&cur, &change, None), Ok(()), "{change:?}");
        }
        // No stored credential: nothing to move.
        let bare = map(&[("bootstrap.servers", "s:9092")]);
        assert_eq!(validate_changes_with(&bare, &[set("bootstrap.servers", "t:9092")], None), Ok(()));
    }

    #[test]
    fn every_stored_credential_is_named_and_needed() {
        let mut cur = sasl_mirror();
        cur.insert("ssl.keystore.key".into(), "-----BEGIN PRIVATE KEY-----".into());
        cur.insert("ssl.key.password".into(), "kp".into());
        cur.insert("ssl.truststore.password".into(), "tp".into());
        let e =
            validate_changes_with(&cur, &[set("bootstrap.servers", "evil:9092"), set("sasl.jaas.config", "x")], None)
                .unwrap_err()
                .to_string();
        assert!(e.contains("ssl.keystore.key") && e.contains("ssl.key.password"), "{e}");
        assert!(!e.contains("truststore.password") && !e.contains("sasl.jaas.config and"), "{e}");
        let all = [
            set("bootstrap.servers", "evil:9092"),
            set("sasl.jaas.config", "x"),
            set("ssl.keystore.key", "y"),
            ("ssl.key.password".to_string(), None),
        ];
        assert_eq!(validate_changes_with(&cur, &all, None), Ok(()));
    }

    fn oauth_mirror() -> BTreeMap<String, String> {
        map(&[
            ("bootstrap.servers", "s:9092"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.jaas.config", "OAuthBearerLoginModule required clientId=\"a\" clientSecret=\"s\";"),
            (TOKEN_URL, "https://idp/token"),
        ])
    }

    #[test]
    fn without_an_allow_list_a_mirror_keeps_its_token_endpoint() {
        let cur = oauth_mirror();
        let jaas = set("sasl.jaas.config", "x");
        let e = validate_changes_with(&cur, &[set(TOKEN_URL, "https://evil/token"), jaas.clone()], None).unwrap_err();
        assert!(
            matches!(&e, ConfigValueError::Invalid { key, reason } if key == TOKEN_URL
                && reason.contains("created with (https://idp/token)") && reason.contains(ALLOWED_URLS_SETTING)),
            "{e}"
        );
        // The same URL again, or none any more: allowed.
        assert_eq!(validate_changes_with(&cur, &[set(TOKEN_URL, " https://idp/token ")], None), Ok(()));
        assert_eq!(validate_changes_with(&cur, &[(TOKEN_URL.into(), None), jaas.clone()], None), Ok(()));
        // A mirror created without one cannot get one.
        let plain = map(&[("bootstrap.servers", "s:9092")]);
        assert!(validate_changes_with(&plain, &[set(TOKEN_URL, "https://idp/token")], None).is_err());
    }

    #[test]
    fn with_an_allow_list_only_listed_endpoints_and_with_the_credentials() {
        let cur = oauth_mirror();
        let list = vec!["https://idp/token".to_string(), "https://idp2/token".to_string()];
        let allowed = Some(list.as_slice());
        let jaas = set("sasl.jaas.config", "x");
        let e = validate_changes_with(&cur, &[set(TOKEN_URL, "http://169.254.169.254/latest"), jaas.clone()], allowed)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not in proxy.yaml's mirrors.sasl_oauthbearer_allowed_urls"), "{e}");
        assert_eq!(validate_changes_with(&cur, &[set(TOKEN_URL, "https://idp2/token"), jaas], allowed), Ok(()));
        // Listed, but the stored client secret would go there: the credentials rule.
        let e = validate_changes_with(&cur, &[set(TOKEN_URL, "https://idp2/token")], allowed).unwrap_err().to_string();
        assert!(e.contains("bound to where they were given") && e.contains("sasl.jaas.config"), "{e}");
        // The check of a built client.
        assert!(check_token_url_with(&cur, allowed).is_ok());
        assert!(check_token_url_with(&cur, None).is_ok());
        let e = check_token_url_with(&cur, Some(&["https://other/token".to_string()])).unwrap_err();
        assert_eq!(e.key, TOKEN_URL);
        assert!(check_token_url_with(&cur, Some(&[])).is_err(), "an empty list allows nothing");
        assert!(check_token_url_with(&map(&[("bootstrap.servers", "s:9092")]), Some(&[])).is_ok());
    }

    #[test]
    fn urls_are_shown_without_their_user_info() {
        let cur = oauth_mirror();
        let e = validate_changes_with(&cur, &[set(TOKEN_URL, "https://user:pw123@evil/token")], Some(&[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("https://evil/token") && !e.contains("pw123"), "{e}");
    }
}
