//! The access token: what its JWT payload says ([`AccessToken::parse`]) and the GS2
//! client-first message that carries it ([`initial_response`]).

use std::collections::BTreeMap;

use base64::Engine as _;

use crate::client::security::Secret;

/// Whether `token` is an RFC 6750 §2.1 b64token, as Kafka's `OAuthBearerClientInitialResponse`
/// requires (`[-_~+/.a-zA-Z0-9]+=*`).
pub(super) fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty() && body.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_~+/.".contains(&b))
}

/// The GS2 client-first message (Kafka's `OAuthBearerClientInitialResponse.toBytes`, no
/// authorization id): `n,,\x01auth=Bearer <token>[\x01<name>=<value>...]\x01\x01`.
pub fn initial_response(token: &str, extensions: &BTreeMap<String, String>) -> Vec<u8> {
    let mut m = format!("n,,\u{1}auth=Bearer {token}");
    for (k, v) in extensions {
        m.push_str(&format!("\u{1}{k}={v}"));
    }
    m.push_str("\u{1}\u{1}");
    m.into_bytes()
}

/// An access token with what its JWT payload says (`Debug` hides the token).
#[derive(Clone, Debug)]
pub struct AccessToken {
    pub(super) value: Secret,
    /// The subject claim.
    pub principal: String,
    /// `iat`, epoch ms.
    pub issued_at_ms: Option<i64>,
    /// `exp`, epoch ms.
    pub expires_at_ms: i64,
}

impl AccessToken {
    /// Reads the JWT `token` without verifying its signature (Kafka's
    /// `LoginAccessTokenValidator`: the broker verifies it).
    ///
    /// # Errors
    /// What is wrong with the token (never the token itself).
    pub fn parse(token: &str, sub_claim: &str, scope_claim: &str) -> Result<Self, String> {
        if !is_b64token(token.trim()) {
            return Err("the access token has characters a bearer token may not have (RFC 6750 b64token)".into());
        }
        let parts: Vec<&str> = token.trim().split('.').collect();
        if parts.len() != 3 || parts.iter().take(2).any(|p| p.is_empty()) {
            return Err(format!(
                "the access token is not a JWT (expected 3 dot-separated parts, found {})",
                parts.len()
            ));
        }
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(parts[1].trim_end_matches('='))
            .map_err(|_| "the access token's JWT payload is not base64url".to_string())?;
        let claims: serde_json::Value =
            serde_json::from_slice(&payload).map_err(|_| "the access token's JWT payload is not JSON".to_string())?;
        let secs = |name: &str| -> Result<Option<i64>, String> {
            match claims.get(name) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(v) => v
                    .as_f64()
                    .filter(|s| *s >= 0.0 && *s < 1e13)
                    .map(|s| Some((s * 1000.0) as i64))
                    .ok_or_else(|| format!("the access token's `{name}` claim is not a number of seconds")),
            }
        };
        let expires_at_ms = secs("exp")?.ok_or("the access token has no `exp` claim")?;
        let issued_at_ms = secs("iat")?;
        let principal = claims
            .get(sub_claim)
            .and_then(|v| v.as_str())
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("the access token has no `{sub_claim}` claim (sasl.oauthbearer.sub.claim.name)"))?
            .to_string();
        match claims.get(scope_claim) {
            None | Some(serde_json::Value::String(_)) => {}
            Some(serde_json::Value::Array(a)) if a.iter().all(|s| s.is_string()) => {}
            Some(_) => {
                return Err(format!("the access token's `{scope_claim}` claim is not a string or a list of strings"))
            }
        }
        Ok(Self { value: Secret::new(token.trim()), principal, issued_at_ms, expires_at_ms })
    }
}
