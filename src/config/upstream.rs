//! The TLS identity of the upstream side of client connections (`destination.client_upstream`).
//!
//! A client's requests reach the destination on an upstream connection mirrorgate opens for
//! that client. Over TLS, that connection uses the destination's trust settings
//! (`destination.ssl_truststore_*`, host name checks, protocols, cipher suites) but **never
//! mirrorgate's own certificate** (`destination.ssl_keystore_*`): with it, every client —
//! authenticated or not — would act at the broker as mirrorgate's principal, which holds CLUSTER
//! ALTER, topic create/delete and the state topic's rights. It presents no certificate, or the
//! separate one configured here; a separate one naming the same principal as mirrorgate's own
//! is refused. Nothing here opens a connection: `crate::proxy::upstream_tls` checks at
//! startup that the destination accepts this identity.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{invalid, ConfigError, DestinationConfig, Secret};
use crate::client::security::{ClientSecurity, SecurityProtocol};

/// `destination.client_upstream`: a certificate for the upstream side of client connections,
/// separate from mirrorgate's own (Java client names with `_` for `.`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientUpstreamConfig {
    /// `ssl.keystore.type`: PEM or PKCS12 (guessed from the file when unset).
    #[serde(default)]
    pub ssl_keystore_type: Option<String>,
    /// `ssl.keystore.location`: PEM (key and chain) or PKCS12 file.
    #[serde(default)]
    pub ssl_keystore_location: Option<String>,
    /// `ssl.keystore.password` (PKCS12 only).
    #[serde(default)]
    pub ssl_keystore_password: Option<Secret>,
    /// `ssl.keystore.key`: PEM private key text.
    #[serde(default)]
    pub ssl_keystore_key: Option<Secret>,
    /// `ssl.keystore.certificate.chain`: PEM certificate chain text.
    #[serde(default)]
    pub ssl_keystore_certificate_chain: Option<String>,
    /// `ssl.key.password` (encrypted PEM keys are refused, as for `destination.ssl_key_password`).
    #[serde(default)]
    pub ssl_key_password: Option<Secret>,
}

impl ClientUpstreamConfig {
    fn properties(&self) -> BTreeMap<String, String> {
        let secret = |s: &Option<Secret>| s.as_ref().map(|s| s.expose().to_string());
        [
            ("ssl.keystore.type", self.ssl_keystore_type.clone()),
            ("ssl.keystore.location", self.ssl_keystore_location.clone()),
            ("ssl.keystore.password", secret(&self.ssl_keystore_password)),
            ("ssl.keystore.key", secret(&self.ssl_keystore_key)),
            ("ssl.keystore.certificate.chain", self.ssl_keystore_certificate_chain.clone()),
            ("ssl.key.password", secret(&self.ssl_key_password)),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
        .collect()
    }
}

/// How client connections' upstream side reaches a TLS destination.
#[derive(Debug, Clone)]
pub struct ClientUpstream {
    /// `SSL` with the destination's trust settings and only the `client_upstream` certificate
    /// (no SASL: clients authenticate themselves).
    pub security: ClientSecurity,
    /// The principal the broker gives the `client_upstream` certificate (`User:` + subject in
    /// RFC 2253 form, Kafka's default `ssl.principal.mapping.rules`); `None` = no certificate.
    pub principal: Option<String>,
}

/// Keys of mirrorgate's own certificate, never used for client connections.
const OWN_IDENTITY_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
];

/// The principal of the leaf certificate in the `ssl.keystore.*` of `props`, if one is set.
fn principal_of(props: &BTreeMap<String, String>, key_prefix: &str) -> Result<Option<String>, ConfigError> {
    let leaf = crate::client::tls::keystore_leaf(&|k: &str| props.get(k).map(String::as_str))
        .map_err(|e| invalid(format!("{key_prefix}{}", e.key.replace('.', "_")), e.reason))?;
    Ok(leaf.map(|der| {
        crate::client::tls::tls_principal(der.as_ref()).unwrap_or_else(|| "(unparsable certificate)".into())
    }))
}

/// The upstream security of client connections, or `None` when the destination does not use
/// TLS.
///
/// # Errors
/// [`ConfigError::Invalid`]: `client_upstream` set while `security_protocol` is not SSL or
/// SASL_SSL, an unusable key store (naming the key), or a `client_upstream` certificate whose
/// principal is that of mirrorgate's own certificate.
pub fn client_upstream(
    dest: &DestinationConfig,
    own: &ClientSecurity,
    upstream: Option<&ClientUpstreamConfig>,
) -> Result<Option<ClientUpstream>, ConfigError> {
    if !own.protocol.uses_tls() {
        return match upstream {
            Some(_) => Err(invalid(
                "destination.client_upstream",
                "is only used with security_protocol SSL or SASL_SSL (client connections do not use TLS towards the destination)",
            )),
            None => Ok(None),
        };
    }
    let all = dest.security_properties();
    let mut props: BTreeMap<String, String> = all
        .iter()
        .filter(|(k, _)| k.starts_with("ssl.") && !OWN_IDENTITY_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let separate = upstream.map(ClientUpstreamConfig::properties).unwrap_or_default();
    props.extend(separate.clone());
    props.insert("security.protocol".into(), "SSL".into());
    let security = ClientSecurity::from_properties(&props)
        .map_err(|e| invalid(format!("destination.client_upstream.{}", e.key.replace('.', "_")), e.reason))?;
    debug_assert_eq!(security.protocol, SecurityProtocol::Ssl);
    let principal = principal_of(&separate, "destination.client_upstream.")?;
    let own_principal = principal_of(&all, "destination.")?;
    if let (Some(p), Some(own_p)) = (&principal, &own_principal) {
        if p == own_p {
            return Err(invalid(
                "destination.client_upstream",
                format!(
                    "its certificate names {p}, the principal of mirrorgate's own certificate (destination.ssl_keystore_*): \
                     every client would act at the broker as mirrorgate; give client connections a separate, \
                     low-privilege certificate (docs/security.md)"
                ),
            ));
        }
    }
    Ok(Some(ClientUpstream { security, principal }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Self-signed P-256 certificates with their PKCS#8 keys (valid until 2126): mirrorgate's
    /// own (`O=corp, CN=mirrorgate`), another key for the same subject, and a separate one
    /// (`O=corp, CN=proxied-clients`).
    const OWN: &str = include_str!("testdata/upstream-own.pem");
    const SAME_SUBJECT: &str = include_str!("testdata/upstream-same.pem");
    const CLIENTS: &str = include_str!("testdata/upstream-clients.pem");

    fn split(pem: &str) -> (String, String) {
        let at = pem.find("-----BEGIN PRIVATE KEY-----").unwrap();
        (pem[..at].to_string(), pem[at..].to_string())
    }

    fn destination(protocol: &str, own: Option<&str>) -> DestinationConfig {
        let mut yaml = format!("bootstrap_servers: 127.0.0.1:9093\nsecurity_protocol: {protocol}\n");
        if let Some(pem) = own {
            let (chain, key) = split(pem);
            yaml += &format!("ssl_keystore_certificate_chain: {chain:?}\nssl_keystore_key: {key:?}\n");
        }
        parse(&yaml)
    }

    /// The YAML through the `config` crate, as `proxy.yaml` is read.
    fn parse(yaml: &str) -> DestinationConfig {
        config::Config::builder()
            .add_source(config::File::from_str(yaml, config::FileFormat::Yaml))
            .build()
            .and_then(config::Config::try_deserialize)
            .unwrap()
    }

    fn separate(pem: &str) -> ClientUpstreamConfig {
        let (chain, key) = split(pem);
        ClientUpstreamConfig {
            ssl_keystore_certificate_chain: Some(chain),
            ssl_keystore_key: Some(Secret::new(key)),
            ..ClientUpstreamConfig::default()
        }
    }

    fn build(
        d: &DestinationConfig,
        upstream: Option<&ClientUpstreamConfig>,
    ) -> Result<Option<ClientUpstream>, ConfigError> {
        let own = ClientSecurity::from_properties(&d.security_properties()).unwrap();
        client_upstream(d, &own, upstream)
    }

    fn presents_a_certificate(u: &ClientUpstream) -> bool {
        u.security.tls.as_ref().unwrap().client_auth_cert_resolver.has_certs()
    }

    #[test]
    fn client_connections_never_present_mirrorgates_own_certificate() {
        let d = destination("SSL", Some(OWN));
        let own = ClientSecurity::from_properties(&d.security_properties()).unwrap();
        assert!(
            own.tls.as_ref().unwrap().client_auth_cert_resolver.has_certs(),
            "mirrorgate's own TLS has its certificate"
        );
        let u = build(&d, None).unwrap().expect("TLS destination");
        assert_eq!(u.security.protocol, SecurityProtocol::Ssl);
        assert!(u.security.sasl.is_none());
        assert!(!presents_a_certificate(&u), "client connections would present mirrorgate's certificate");
        assert_eq!(u.principal, None);
        let u = build(&d, Some(&separate(CLIENTS))).unwrap().unwrap();
        assert!(presents_a_certificate(&u));
        assert_eq!(u.principal.as_deref(), Some("User:CN=proxied-clients,O=corp"));
        // SASL_SSL: TLS only, no SASL credentials of mirrorgate's.
        let mut d = destination("SASL_SSL", None);
        d.sasl_mechanism = Some("PLAIN".into());
        d.sasl_jaas_config = Some(Secret::new(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="mg" password="mg-secret";"#,
        ));
        let u = build(&d, None).unwrap().unwrap();
        assert!(u.security.sasl.is_none() && !presents_a_certificate(&u));
    }

    #[test]
    fn a_separate_identity_with_mirrorgates_principal_or_without_tls_is_refused() {
        let d = destination("SSL", Some(OWN));
        let e = build(&d, Some(&separate(SAME_SUBJECT))).unwrap_err().to_string();
        assert!(e.contains("destination.client_upstream") && e.contains("User:CN=mirrorgate,O=corp"), "{e}");
        let e = build(&destination("PLAINTEXT", None), Some(&separate(CLIENTS))).unwrap_err().to_string();
        assert!(e.contains("destination.client_upstream") && e.contains("SSL or SASL_SSL"), "{e}");
        assert!(build(&destination("PLAINTEXT", None), None).unwrap().is_none());
        let broken = ClientUpstreamConfig { ssl_keystore_key: Some(Secret::new("x")), ..Default::default() };
        let e = build(&d, Some(&broken)).unwrap_err().to_string();
        assert!(e.contains("destination.client_upstream.ssl_keystore_"), "{e}");
    }
}
