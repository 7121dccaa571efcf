//! TLS configuration from Kafka's `ssl.*` properties (rustls, ring provider): trust stores
//! and key stores as PEM files, PEM strings or PKCS12 files; JKS refused with the command
//! that converts it; `ssl.endpoint.identification.algorithm` (`https` = the broker's
//! certificate must name the host connected to, empty = only its chain is checked).
//! Also the server side of TLS client listeners.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::client::security::{sec_err, SecurityError};

/// The crypto provider of every TLS config mirrorgate builds (ring).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// `ssl.enabled.protocols` (Kafka's default `TLSv1.2,TLSv1.3`): the TLS versions offered.
///
/// # Errors
/// An unknown or unsupported name (TLSv1 and TLSv1.1 are not implemented by rustls).
fn protocol_versions(list: Option<&str>) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, SecurityError> {
    let Some(list) = list else { return Ok(rustls::DEFAULT_VERSIONS.to_vec()) };
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        out.push(match name {
            "TLSv1.3" => &rustls::version::TLS13,
            "TLSv1.2" => &rustls::version::TLS12,
            "TLSv1" | "TLSv1.1" | "SSLv3" => {
                return Err(sec_err(
                    "ssl.enabled.protocols",
                    format!("`{name}` is obsolete and not supported; use TLSv1.2 and/or TLSv1.3"),
                ))
            }
            other => return Err(sec_err("ssl.enabled.protocols", format!("`{other}` is not TLSv1.2 or TLSv1.3"))),
        });
    }
    if out.is_empty() {
        return Err(sec_err("ssl.enabled.protocols", "lists no protocol"));
    }
    Ok(out)
}

/// The IANA name of a rustls cipher suite, as Java and Kafka write it (`TLS_AES_128_GCM_SHA256`,
/// `TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384`).
fn iana_name(suite: &rustls::SupportedCipherSuite) -> String {
    format!("{:?}", suite.suite()).replacen("TLS13_", "TLS_", 1)
}

/// The ring provider limited to `ssl.cipher.suites` (IANA names, comma-separated; unset = all
/// of rustls' suites).
///
/// # Errors
/// A name rustls does not implement, with the names it does.
fn restricted_provider(list: Option<&str>) -> Result<rustls::crypto::CryptoProvider, SecurityError> {
    let mut provider = rustls::crypto::ring::default_provider();
    let Some(list) = list else { return Ok(provider) };
    let mut chosen = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match provider.cipher_suites.iter().find(|s| iana_name(s) == name) {
            Some(s) => chosen.push(*s),
            None => {
                let known: Vec<String> = provider.cipher_suites.iter().map(iana_name).collect();
                return Err(sec_err(
                    "ssl.cipher.suites",
                    format!("`{name}` is not supported; supported: {}", known.join(", ")),
                ));
            }
        }
    }
    if chosen.is_empty() {
        return Err(sec_err("ssl.cipher.suites", "lists no cipher suite"));
    }
    provider.cipher_suites = chosen;
    Ok(provider)
}

/// The leading bytes of a Java KeyStore (JKS) file.
const JKS_MAGIC: [u8; 4] = [0xfe, 0xed, 0xfe, 0xed];

/// Store format, from `ssl.*.type` or guessed from the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreType {
    Pem,
    Pkcs12,
}

fn store_type(
    type_key: &str,
    declared: Option<&str>,
    data: Option<&[u8]>,
    location_key: &str,
) -> Result<StoreType, SecurityError> {
    let jks = || {
        sec_err(
            location_key,
            "is a JKS store, which mirrorgate does not read; convert it to PKCS12 with \
             `keytool -importkeystore -srcstoretype JKS -srckeystore <file.jks> -deststoretype PKCS12 -destkeystore <file.p12>` \
             and set the .type to PKCS12 (or export PEM)",
        )
    };
    match declared.map(|t| t.trim().to_ascii_uppercase()) {
        Some(t) if t == "PEM" => Ok(StoreType::Pem),
        Some(t) if t == "PKCS12" => Ok(StoreType::Pkcs12),
        Some(t) if t == "JKS" => {
            if data.is_some_and(|d| !d.starts_with(&JKS_MAGIC)) {
                // Kafka's default type with a store that is not JKS: read what it is.
                guess(data)
            } else {
                Err(jks())
            }
        }
        Some(t) => Err(sec_err(type_key, format!("`{t}` is not one of PEM, PKCS12"))),
        None => {
            if data.is_some_and(|d| d.starts_with(&JKS_MAGIC)) {
                return Err(jks());
            }
            guess(data)
        }
    }
}

fn guess(data: Option<&[u8]>) -> Result<StoreType, SecurityError> {
    Ok(match data {
        Some(d) if d.starts_with(&JKS_MAGIC) => StoreType::Pkcs12,
        Some(d) if d.first() == Some(&0x30) => StoreType::Pkcs12,
        _ => StoreType::Pem,
    })
}

fn read_file(key: &str, path: &str) -> Result<Vec<u8>, SecurityError> {
    std::fs::read(path.trim()).map_err(|e| sec_err(key, format!("cannot read `{path}`: {e}")))
}

fn pem_certs(key: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, SecurityError> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| sec_err(key, format!("bad PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(sec_err(key, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
    }
    Ok(certs)
}

fn pem_key(key: &str, pem: &[u8]) -> Result<PrivateKeyDer<'static>, SecurityError> {
    if std::str::from_utf8(pem).is_ok_and(|s| s.contains("ENCRYPTED PRIVATE KEY")) {
        return Err(sec_err(
            key,
            "holds an encrypted private key, which mirrorgate does not decrypt; \
             write it unencrypted with `openssl pkcs8 -topk8 -nocrypt -in <key.pem> -out <plain.pem>` and protect the file instead, \
             or use a PKCS12 key store",
        ));
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| sec_err(key, format!("holds no usable PEM private key: {e}")))
}

fn pkcs12(
    key: &str,
    data: &[u8],
    password: Option<&str>,
    policy: p12_keystore::Pkcs12ImportPolicy,
) -> Result<p12_keystore::KeyStore, SecurityError> {
    p12_keystore::KeyStore::from_pkcs12(data, password.unwrap_or(""), policy)
        .map_err(|e| sec_err(key, format!("cannot open the PKCS12 store (wrong password?): {e}")))
}

/// Trust anchors from `ssl.truststore.*`; `None` when none is set (then the system's).
fn trust_roots<'a>(get: &impl Fn(&str) -> Option<&'a str>) -> Result<Option<RootCertStore>, SecurityError> {
    let mut certs = Vec::new();
    if let Some(pem) = get("ssl.truststore.certificates") {
        certs.extend(pem_certs("ssl.truststore.certificates", pem.as_bytes())?);
    }
    if let Some(path) = get("ssl.truststore.location") {
        let key = "ssl.truststore.location";
        let data = read_file(key, path)?;
        match store_type("ssl.truststore.type", get("ssl.truststore.type"), Some(&data), key)? {
            StoreType::Pem => certs.extend(pem_certs(key, &data)?),
            StoreType::Pkcs12 => {
                let ks = pkcs12(key, &data, get("ssl.truststore.password"), p12_keystore::Pkcs12ImportPolicy::Raw)?;
                for (_, e) in ks.entries() {
                    match e {
                        p12_keystore::KeyStoreEntry::Certificate(c) => {
                            certs.push(CertificateDer::from(c.as_der().to_vec()))
                        }
                        p12_keystore::KeyStoreEntry::PrivateKeyChain(ch) => {
                            certs.extend(ch.certs().iter().map(|c| CertificateDer::from(c.as_der().to_vec())))
                        }
                        p12_keystore::KeyStoreEntry::Secret(_) => {}
                    }
                }
                if certs.is_empty() {
                    return Err(sec_err(key, "the PKCS12 trust store holds no certificate"));
                }
            }
        }
    } else if let Some(t) = get("ssl.truststore.type") {
        if get("ssl.truststore.certificates").is_none() && !t.eq_ignore_ascii_case("JKS") {
            return Err(sec_err("ssl.truststore.location", format!("is required with ssl.truststore.type {t}")));
        }
    }
    if certs.is_empty() {
        return Ok(None);
    }
    let mut roots = RootCertStore::empty();
    for c in certs {
        roots.add(c).map_err(|e| sec_err("ssl.truststore.location", format!("unusable trust certificate: {e}")))?;
    }
    Ok(Some(roots))
}

fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for c in found.certs {
        let _ = roots.add(c);
    }
    roots
}

/// The leaf (first) certificate of `ssl.keystore.*` (`raw` as for [`client_config`]), if a
/// key store is set: what a broker derives the client's principal from.
///
/// # Errors
/// [`SecurityError`] naming the property that cannot be used.
pub fn keystore_leaf<'a>(
    raw: &impl Fn(&str) -> Option<&'a str>,
) -> Result<Option<CertificateDer<'static>>, SecurityError> {
    let get = &|k: &str| raw(k).filter(|v| !v.trim().is_empty());
    Ok(client_identity(get)?.and_then(|(certs, _)| certs.into_iter().next()))
}

/// The client certificate chain and key from `ssl.keystore.*`, if set.
#[allow(clippy::type_complexity)]
fn client_identity<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, SecurityError> {
    match (get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")) {
        (Some(k), Some(c)) => {
            return Ok(Some((
                pem_certs("ssl.keystore.certificate.chain", c.as_bytes())?,
                pem_key("ssl.keystore.key", k.as_bytes())?,
            )))
        }
        (Some(_), None) => return Err(sec_err("ssl.keystore.certificate.chain", "is required with ssl.keystore.key")),
        (None, Some(_)) => return Err(sec_err("ssl.keystore.key", "is required with ssl.keystore.certificate.chain")),
        (None, None) => {}
    }
    let Some(path) = get("ssl.keystore.location") else { return Ok(None) };
    let key = "ssl.keystore.location";
    let data = read_file(key, path)?;
    match store_type("ssl.keystore.type", get("ssl.keystore.type"), Some(&data), key)? {
        StoreType::Pem => Ok(Some((pem_certs(key, &data)?, pem_key(key, &data)?))),
        StoreType::Pkcs12 => {
            let ks = pkcs12(key, &data, get("ssl.keystore.password"), p12_keystore::Pkcs12ImportPolicy::Strict)?;
            let (_, chain) = ks
                .private_key_chain()
                .ok_or_else(|| sec_err(key, "the PKCS12 key store holds no private key with its certificate"))?;
            let certs = chain.certs().iter().map(|c| CertificateDer::from(c.as_der().to_vec())).collect::<Vec<_>>();
            if certs.is_empty() {
                return Err(sec_err(key, "the private key in the PKCS12 key store has no certificate"));
            }
            let pk = PrivateKeyDer::try_from(chain.key().as_der().to_vec())
                .map_err(|e| sec_err(key, format!("unusable private key: {e}")))?;
            Ok(Some((certs, pk)))
        }
    }
}

/// A rustls client config from Kafka's `ssl.*` properties (`raw` returns the value set,
/// blank or not; a blank value counts as unset except for
/// `ssl.endpoint.identification.algorithm`, where empty turns host name checks off).
///
/// # Errors
/// [`SecurityError`] naming the property that cannot be used.
pub fn client_config<'a>(raw: &impl Fn(&str) -> Option<&'a str>) -> Result<rustls::ClientConfig, SecurityError> {
    let get = &|k: &str| raw(k).filter(|v| !v.trim().is_empty());
    let roots = match trust_roots(get)? {
        Some(r) => r,
        None => system_roots(),
    };
    let roots = Arc::new(roots);
    let verify_host = match raw("ssl.endpoint.identification.algorithm").map(str::trim) {
        None | Some("https") | Some("HTTPS") => true,
        Some("") => false,
        Some(other) => {
            return Err(sec_err("ssl.endpoint.identification.algorithm", format!("`{other}` is not `https` or empty")))
        }
    };
    let provider = Arc::new(restricted_provider(get("ssl.cipher.suites"))?);
    let versions = protocol_versions(get("ssl.enabled.protocols"))?;
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| sec_err("ssl.enabled.protocols", format!("cannot be used with ssl.cipher.suites: {e}")))?;
    let builder = if verify_host {
        builder.with_root_certificates(roots)
    } else {
        let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| sec_err("ssl.truststore.location", e.to_string()))?;
        builder.dangerous().with_custom_certificate_verifier(Arc::new(ChainOnly { roots, inner, provider }))
    };
    match client_identity(get)? {
        Some((certs, key)) => builder
            .with_client_auth_cert(certs, key)
            .map_err(|e| sec_err("ssl.keystore.location", format!("certificate and key do not go together: {e}"))),
        None => Ok(builder.with_no_client_auth()),
    }
}

/// Checks the broker's chain against the trust anchors, its validity dates and the
/// handshake signature, but not the host name (`ssl.endpoint.identification.algorithm=`).
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Whether a client listener asks for client certificates (`client_auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// Not asked for.
    #[default]
    None,
    /// Asked for; a client without one is accepted, one with an untrusted one is not.
    Requested,
    /// A trusted client certificate is required.
    Required,
}

/// How often a listener looks at its certificate files for a change, at most.
const RELOAD_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

fn certified_key(
    cert_file: &str,
    key_file: &str,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<Arc<rustls::sign::CertifiedKey>, SecurityError> {
    let certs = pem_certs("cert_file", &read_file("cert_file", cert_file)?)?;
    let key = pem_key("key_file", &read_file("key_file", key_file)?)?;
    rustls::sign::CertifiedKey::from_der(certs, key, provider)
        .map(Arc::new)
        .map_err(|e| sec_err("key_file", format!("does not fit cert_file: {e}")))
}

fn modified(path: &str) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// A listener's certificate and key, re-read when either file changes (checked at most once
/// a second, at a handshake): a renewed certificate is served to new connections while
/// established ones keep theirs. A changed pair that cannot be used is logged and the
/// previous one kept.
#[derive(Debug)]
struct ReloadingCert {
    cert_file: String,
    key_file: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
    state: std::sync::Mutex<CertState>,
}

#[derive(Debug)]
struct CertState {
    checked: std::time::Instant,
    stamps: (Option<std::time::SystemTime>, Option<std::time::SystemTime>),
    key: Arc<rustls::sign::CertifiedKey>,
}

impl rustls::server::ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.checked.elapsed() >= RELOAD_CHECK {
            st.checked = std::time::Instant::now();
            let stamps = (modified(&self.cert_file), modified(&self.key_file));
            if stamps != st.stamps {
                match certified_key(&self.cert_file, &self.key_file, &self.provider) {
                    Ok(key) => {
                        tracing::info!(cert_file = %self.cert_file, "listener certificate reloaded");
                        st.key = key;
                        st.stamps = stamps;
                    }
                    Err(e) => {
                        tracing::warn!(cert_file = %self.cert_file, error = %e, "changed listener certificate not usable; keeping the previous one");
                    }
                }
            }
        }
        Some(st.key.clone())
    }
}

/// A rustls server config for a client listener: the certificate chain and key from PEM
/// files (re-read when they change, see `ReloadingCert`), and client certificates checked
/// against `ca_file` (PEM) per `client_auth`.
///
/// # Errors
/// A message naming the file or setting that cannot be used.
pub fn server_config(
    cert_file: &str,
    key_file: &str,
    client_auth: ClientAuth,
    ca_file: Option<&str>,
) -> Result<rustls::ServerConfig, SecurityError> {
    let provider = provider();
    let stamps = (modified(cert_file), modified(key_file));
    let key = certified_key(cert_file, key_file, &provider)?;
    let resolver = ReloadingCert {
        cert_file: cert_file.to_string(),
        key_file: key_file.to_string(),
        provider: provider.clone(),
        state: std::sync::Mutex::new(CertState { checked: std::time::Instant::now(), stamps, key }),
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| sec_err("tls", e.to_string()))?;
    let builder = match client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Requested | ClientAuth::Required => {
            let ca =
                ca_file.ok_or_else(|| sec_err("ca_file", "is required when client_auth is requested or required"))?;
            let mut roots = RootCertStore::empty();
            for c in pem_certs("ca_file", &read_file("ca_file", ca)?)? {
                roots.add(c).map_err(|e| sec_err("ca_file", format!("unusable CA certificate: {e}")))?;
            }
            let v = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let v = if client_auth == ClientAuth::Requested { v.allow_unauthenticated() } else { v };
            builder.with_client_cert_verifier(v.build().map_err(|e| sec_err("ca_file", e.to_string()))?)
        }
    };
    Ok(builder.with_cert_resolver(Arc::new(resolver)))
}

/// Kafka's principal for a TLS client certificate (`DefaultKafkaPrincipalBuilder` with the
/// DEFAULT `ssl.principal.mapping.rules`): `User:` + the subject DN as Java's
/// `X500Principal.getName()` writes it (RFC 2253: last RDN first, `CN=alice,OU=eng,O=corp`,
/// special characters escaped with `\`). `None` if the certificate does not parse.
pub fn tls_principal(cert_der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der).ok()?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter_rdn() {
        let mut parts = Vec::new();
        for atv in rdn.iter() {
            let oid = atv.attr_type().to_id_string();
            let key = match oid.as_str() {
                "2.5.4.3" => "CN".to_string(),
                "2.5.4.6" => "C".to_string(),
                "2.5.4.7" => "L".to_string(),
                "2.5.4.8" => "ST".to_string(),
                "2.5.4.9" => "STREET".to_string(),
                "2.5.4.10" => "O".to_string(),
                "2.5.4.11" => "OU".to_string(),
                "0.9.2342.19200300.100.1.25" => "DC".to_string(),
                "0.9.2342.19200300.100.1.1" => "UID".to_string(),
                other => other.to_string(),
            };
            let value = atv.as_str().ok()?;
            parts.push(format!("{key}={}", rfc2253_escape(value)));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(format!("User:{}", rdns.join(",")))
}

fn rfc2253_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let edge = (i == 0 && (c == ' ' || c == '#')) || (i + 1 == v.chars().count() && c == ' ');
        if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') || edge {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jks_is_refused_with_the_conversion_command() {
        let dir = std::env::temp_dir().join(format!("mg-jks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trust.jks");
        std::fs::write(&path, [0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2]).unwrap();
        let p = path.to_string_lossy().to_string();
        let get = |k: &str| match k {
            "ssl.truststore.location" => Some(p.as_str()),
            _ => None,
        };
        let e = client_config(&get).unwrap_err();
        assert_eq!(e.key, "ssl.truststore.location");
        assert!(e.reason.contains("keytool -importkeystore -srcstoretype JKS"), "{e}");
        let get = |k: &str| match k {
            "ssl.truststore.location" => Some(p.as_str()),
            "ssl.truststore.type" => Some("JKS"),
            _ => None,
        };
        assert!(client_config(&get).unwrap_err().reason.contains("-deststoretype PKCS12"));
    }

    #[test]
    fn encrypted_pem_keys_and_lone_halves_are_refused() {
        let get = |k: &str| match k {
            "ssl.keystore.key" => {
                Some("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")
            }
            "ssl.keystore.certificate.chain" => Some("x"),
            _ => None,
        };
        let e = client_config(&get).unwrap_err();
        assert!(e.key.starts_with("ssl.keystore"), "{e}");
        let get = |k: &str| (k == "ssl.keystore.key").then_some("k");
        assert_eq!(client_config(&get).unwrap_err().key, "ssl.keystore.certificate.chain");
        let get = |k: &str| (k == "ssl.endpoint.identification.algorithm").then_some("ldap");
        assert_eq!(client_config(&get).unwrap_err().key, "ssl.endpoint.identification.algorithm");
    }
}
