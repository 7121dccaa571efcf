//! The user a client's first SaslAuthenticate message names, read exactly as the destination
//! broker's SASL server reads it (issue 32 item 1), so that the principal mirrorgate binds to a
//! connection is the one the broker authenticated:
//!
//! - PLAIN: Kafka's `PlainSaslServer` (RFC 4616): `authzid NUL authcid NUL passwd`, exactly
//!   three tokens, user and password not empty, an authzid other than the user refused.
//! - SCRAM-SHA-256/512: Kafka's `ScramMessages.ClientFirstMessage` pattern and
//!   `ScramFormatter.username` (`=2C` → `,`, `=3D` → `=`). A delegation token login
//!   (`tokenauth=true` extension) authenticates the token's owner, which the message does not
//!   name: no user.
//! - OAUTHBEARER: Kafka's `OAuthBearerClientInitialResponse` patterns (RFC 7628 §3.1), then the
//!   `sub` claim of the bearer token's JWS payload (Kafka's default
//!   `sasl.oauthbearer.sub.claim.name`). Kafka keeps the **last** value of a key named twice;
//!   mirrorgate refuses such a message ([`OAuthRead::DuplicateKey`]), and reads no user from a
//!   payload naming a claim twice.
//!
//! `None` means "no user mirrorgate can name": the broker refuses the message, or authenticates
//! someone the message does not name. These readers never allocate from a wire count and never
//! panic on input.

use std::sync::LazyLock;

use base64::Engine as _;
use regex::Regex;

/// Kafka's SASLNAME: `(?:[\x01-\x7F&&[^=,]]|=2C|=3D)+`.
const SASLNAME: &str = r"(?:[\x01-\x7F&&[^=,]]|=2C|=3D)+";

/// `ScramMessages.ClientFirstMessage.PATTERN`: gs2 header, optional reserved `m=`, user, nonce,
/// extensions.
static SCRAM_CLIENT_FIRST: LazyLock<Regex> = LazyLock::new(|| {
    let value = r"[\x01-\x7F&&[^,]]+";
    let printable = r"[\x21-\x7E&&[^,]]+";
    Regex::new(&format!(
        r"\An,(a=(?P<authzid>{SASLNAME}))?,(m={value},)?n=(?P<saslname>{SASLNAME}),r=(?P<nonce>{printable})(?P<extensions>(,[A-Za-z]+={value})*)\z"
    ))
    .expect("valid pattern")
});

/// `OAuthBearerClientInitialResponse.CLIENT_INITIAL_RESPONSE_PATTERN`.
static OAUTH_INITIAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\An,(a=(?P<authzid>{SASLNAME}))?,\x01(?P<kvpairs>([A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01\z"
    ))
    .expect("valid pattern")
});

/// `OAuthBearerClientInitialResponse.AUTH_PATTERN` (Java's `\w` is ASCII).
static OAUTH_AUTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\A(?P<scheme>[A-Za-z0-9_]+)[ ]+(?P<token>[-_~+/\.a-zA-Z0-9]+(=*))\z").expect("valid pattern")
});

/// The user of a PLAIN message (Kafka's `PlainSaslServer.evaluateResponse`), or `None` when
/// the broker refuses its form.
pub fn plain_user(auth: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(auth).ok()?;
    let tokens: Vec<&str> = text.splitn(4, '\0').collect();
    let [authzid, user, password] = tokens.as_slice() else { return None };
    if user.is_empty() || password.is_empty() || (!authzid.is_empty() && authzid != user) {
        return None;
    }
    Some((*user).to_string())
}

/// The user of a SCRAM client-first message, or `None` when the broker refuses its form or
/// it is a delegation token login (`tokenauth` extension true, last value wins as in Kafka's
/// `ScramExtensions`).
pub fn scram_user(auth: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(auth).ok()?;
    let m = SCRAM_CLIENT_FIRST.captures(text)?;
    let extensions = m.name("extensions").map_or("", |e| e.as_str());
    let token_auth = extensions
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .rfind(|(k, _)| *k == "tokenauth")
        .is_some_and(|(_, v)| v.eq_ignore_ascii_case("true"));
    if token_auth {
        return None;
    }
    let user = m.name("saslname")?.as_str().replace("=2C", ",");
    if user.replace("=3D", "").contains('=') {
        return None;
    }
    let user = user.replace("=3D", "=");
    let authzid = m.name("authzid").map_or("", |a| a.as_str());
    (authzid.is_empty() || authzid == user).then_some(user)
}

/// What an OAUTHBEARER initial response names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthRead {
    /// The token's `sub`, or `None` when the broker refuses the message's form or mirrorgate
    /// cannot read the token's payload.
    Sub(Option<String>),
    /// A key named twice: Kafka would take its last value, mirrorgate refuses the message.
    DuplicateKey(String),
}

/// Reads an OAUTHBEARER client initial response (`n,[a=authzid],\x01auth=Bearer TOKEN\x01
/// [key=value\x01...]\x01`).
pub fn oauthbearer_sub(auth: &[u8]) -> OAuthRead {
    let Ok(text) = std::str::from_utf8(auth) else { return OAuthRead::Sub(None) };
    let Some(m) = OAUTH_INITIAL.captures(text) else { return OAuthRead::Sub(None) };
    let kvpairs = m.name("kvpairs").map_or("", |k| k.as_str());
    let mut auth_value = None;
    let mut seen = std::collections::HashSet::new();
    for kv in kvpairs.split('\u{1}').filter(|kv| !kv.is_empty()) {
        let Some((key, value)) = kv.split_once('=') else { return OAuthRead::Sub(None) };
        if !seen.insert(key) {
            return OAuthRead::DuplicateKey(key.to_string());
        }
        if key == "auth" {
            auth_value = Some(value);
        }
    }
    let Some(auth) = auth_value.and_then(|a| OAUTH_AUTH.captures(a)) else { return OAuthRead::Sub(None) };
    if !auth.name("scheme").is_some_and(|s| s.as_str().eq_ignore_ascii_case("bearer")) {
        return OAuthRead::Sub(None);
    }
    OAuthRead::Sub(auth.name("token").and_then(|t| jws_sub(t.as_str())))
}

/// The `sub` claim of a JWS in compact form (`header.payload.signature`), from a payload that
/// names no claim twice.
fn jws_sub(token: &str) -> Option<String> {
    let parts: Vec<&str> = token.split('.').collect();
    let [_, payload, _] = parts.as_slice() else { return None };
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let claims: UniqueClaims = serde_json::from_slice(&json).ok()?;
    claims.0.get("sub")?.as_str().map(String::from)
}

/// A JSON object whose members have distinct names.
struct UniqueClaims(serde_json::Map<String, serde_json::Value>);

impl<'de> serde::Deserialize<'de> for UniqueClaims {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = UniqueClaims;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object of claims")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<UniqueClaims, A::Error> {
                let mut claims = serde_json::Map::new();
                while let Some((k, v)) = a.next_entry::<String, serde_json::Value>()? {
                    if claims.contains_key(&k) {
                        return Err(serde::de::Error::custom(format!("claim `{k}` named twice")));
                    }
                    claims.insert(k, v);
                }
                Ok(UniqueClaims(claims))
            }
        }
        d.deserialize_map(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(payload: &str) -> String {
        let p = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload);
        format!("eyJhbGciOiJub25lIn0.{p}.sig")
    }

    #[test]
    fn plain_as_kafka_reads_it() {
        assert_eq!(plain_user(b"\0alice\0pw").as_deref(), Some("alice"));
        assert_eq!(plain_user(b"alice\0alice\0pw").as_deref(), Some("alice"));
        // Refused by the broker: another authzid, an empty user or password, 2 or 4 tokens.
        assert_eq!(plain_user(b"admin\0alice\0pw"), None);
        assert_eq!(plain_user(b"\0\0pw"), None);
        assert_eq!(plain_user(b"\0alice\0"), None);
        assert_eq!(plain_user(b"\0alice"), None);
        assert_eq!(plain_user(b"\0alice\0pw\0"), None);
        assert_eq!(plain_user(b"\0al\xffice\0pw"), None);
    }

    #[test]
    fn scram_client_first_as_kafka_reads_it() {
        assert_eq!(scram_user(b"n,,n=frank,r=abc").as_deref(), Some("frank"));
        assert_eq!(scram_user(b"n,,n=al=2Cice=3D,r=abc").as_deref(), Some("al,ice="));
        assert_eq!(scram_user(b"n,a=frank,n=frank,r=abc").as_deref(), Some("frank"));
        assert_eq!(scram_user(b"n,,m=ext,n=frank,r=abc,x=1").as_deref(), Some("frank"));
        assert_eq!(scram_user(b"n,a=admin,n=frank,r=abc"), None, "authzid differs: refused");
        assert_eq!(scram_user(b"y,,n=frank,r=abc"), None, "only gs2 header n");
        assert_eq!(scram_user(b"n,,n=fr=ank,r=abc"), None, "a bare = in the name");
        assert_eq!(scram_user(b"n,,n=frank,r=abc,tokenauth=true"), None, "the token's owner, unnamed");
        assert_eq!(scram_user(b"n,,n=frank,r=abc,tokenauth=true,tokenauth=false").as_deref(), Some("frank"));
        assert_eq!(scram_user(b"n,,n=frank,r=abc,tokenauth=false,tokenauth=TRUE"), None, "the last value counts");
        assert_eq!(scram_user(b"n,,n=frank,r=a b"), None, "nonce is printable");
    }

    #[test]
    fn oauthbearer_as_kafka_reads_it() {
        let t = token(r#"{"sub":"svc-1","exp":1}"#);
        let msg = format!("n,,\u{1}auth=Bearer {t}\u{1}\u{1}");
        assert_eq!(oauthbearer_sub(msg.as_bytes()), OAuthRead::Sub(Some("svc-1".into())));
        // The scheme in any case, spaces after it, padding after the token, extensions.
        let msg = format!("n,a=svc-1,\u{1}auth=bEaReR   {t}==\u{1}logicalCluster=lkc-1\u{1}\u{1}");
        assert_eq!(oauthbearer_sub(msg.as_bytes()), OAuthRead::Sub(Some("svc-1".into())));
        let msg = format!("n,,\u{1}auth=Basic {t}\u{1}\u{1}");
        assert_eq!(oauthbearer_sub(msg.as_bytes()), OAuthRead::Sub(None));
        assert_eq!(oauthbearer_sub(b"n,,\x01x=1\x01\x01"), OAuthRead::Sub(None), "no auth key");
        let msg = format!("n,,auth=Bearer {t}\u{1}\u{1}");
        assert_eq!(oauthbearer_sub(msg.as_bytes()), OAuthRead::Sub(None), "no separator after the header");
        assert_eq!(oauthbearer_sub(b"\x01"), OAuthRead::Sub(None), "the client's answer to an error challenge");
        // A key twice: Kafka validates the last `auth`, so the first must never be read.
        let forged = token(r#"{"sub":"admin"}"#);
        let msg = format!("n,,\u{1}auth=Bearer {forged}\u{1}auth=Bearer {t}\u{1}\u{1}");
        assert_eq!(oauthbearer_sub(msg.as_bytes()), OAuthRead::DuplicateKey("auth".into()));
        let msg = format!("n,,\u{1}auth=Bearer {t}\u{1}ext=a\u{1}ext=b\u{1}\u{1}");
        assert_eq!(oauthbearer_sub(msg.as_bytes()), OAuthRead::DuplicateKey("ext".into()));
        // A payload naming `sub` twice names nobody.
        let twice = token(r#"{"sub":"admin","sub":"eve"}"#);
        let msg = format!("n,,\u{1}auth=Bearer {twice}\u{1}\u{1}");
        assert_eq!(oauthbearer_sub(msg.as_bytes()), OAuthRead::Sub(None));
        let not_string = token(r#"{"sub":7}"#);
        let msg = format!("n,,\u{1}auth=Bearer {not_string}\u{1}\u{1}");
        assert_eq!(oauthbearer_sub(msg.as_bytes()), OAuthRead::Sub(None));
    }
}
