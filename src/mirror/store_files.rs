//! Which host files a mirror's TLS store configs may name (issue 32 review finding R5). A
//! mirror's `ssl.truststore.location` and `ssl.keystore.location` (and those options inside
//! its `sasl.jaas.config`, for the token endpoint's TLS) are read on mirrorgate's host, yet they are set over the Kafka protocol by whoever may alter mirrors. Unchecked,
//! they let that principal make mirrorgate open any file it can read: probe which files
//! exist, block a thread on a FIFO, fill memory from `/dev/zero`, or present a key store of
//! mirrorgate's own (its destination client certificate) to a source of their choice.
//!
//! The operator names one directory, proxy.yaml's `mirrors.ssl_files_dir`; a location must
//! resolve (symbolic links and `..` followed) to a regular file inside it. Unset, no mirror may
//! name a file: PEM text (`ssl.truststore.certificates`, `ssl.keystore.certificate.chain` and
//! `ssl.keystore.key`) still works. Checked whenever a mirror's client security is built (at
//! `--create`, at IncrementalAlterConfigs and before every connection), before the file is
//! opened.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use super::configs::effective;
use crate::client::SecurityError;

/// proxy.yaml's key, as messages name it.
pub const FILES_DIR_SETTING: &str = "mirrors.ssl_files_dir";

/// The mirror configs naming a file on mirrorgate's host.
pub const LOCATION_KEYS: &[&str] = &["ssl.truststore.location", "ssl.keystore.location"];

fn installed() -> &'static RwLock<Option<PathBuf>> {
    static DIR: RwLock<Option<PathBuf>> = RwLock::new(None);
    &DIR
}

/// Installs proxy.yaml's `mirrors.ssl_files_dir`, canonical (`None`: unset). Called once at
/// startup, before any mirror is loaded.
pub fn install_files_dir(dir: Option<PathBuf>) {
    *installed().write().unwrap_or_else(|e| e.into_inner()) = dir;
}

/// Checks the `*.location` configs of a mirror against the installed directory.
///
/// # Errors
/// [`SecurityError`] naming the location key and the rule.
pub fn check_locations(configs: &BTreeMap<String, String>) -> Result<(), SecurityError> {
    let dir = installed().read().unwrap_or_else(|e| e.into_inner()).clone();
    check_locations_in(configs, dir.as_deref())
}

fn check_locations_in(configs: &BTreeMap<String, String>, dir: Option<&Path>) -> Result<(), SecurityError> {
    for key in LOCATION_KEYS {
        if let Some(path) = effective(configs, key) {
            check_path(path, dir).map_err(|reason| SecurityError { key: (*key).to_string(), reason })?;
        }
    }
    // The OAuth token endpoint's TLS reads the same options from the JAAS line (Kafka's
    // `JaasOptionsUtils`); a line that does not parse reads no file.
    let jaas = effective(configs, "sasl.jaas.config").and_then(|j| crate::client::security::jaas_options(j).ok());
    for (option, path) in jaas.iter().flat_map(|(_, o)| o).filter(|(k, _)| LOCATION_KEYS.contains(&k.as_str())) {
        check_path(path, dir).map_err(|reason| SecurityError {
            key: "sasl.jaas.config".into(),
            reason: format!("JAAS option {option}: {reason}"),
        })?;
    }
    Ok(())
}

/// Whether `path` may be read: a regular file inside `dir`; the reason otherwise.
fn check_path(path: &str, dir: Option<&Path>) -> Result<(), String> {
    let path = path.trim();
    if path.is_empty() {
        return Ok(());
    }
    let Some(dir) = dir else {
        return Err(format!(
            "mirrors may name files on mirrorgate's host only inside proxy.yaml's {FILES_DIR_SETTING}, which is not set; set it to the directory holding the mirrors' stores, or give the certificates as PEM text (ssl.truststore.certificates; ssl.keystore.certificate.chain and ssl.keystore.key)"
        ));
    };
    let outside = || format!("`{path}` is not a file inside proxy.yaml's {FILES_DIR_SETTING}");
    // Resolved before the check (links, `..`); a path that does not resolve is refused the
    // same way, so the answer tells nothing about files outside the directory.
    let real = std::fs::canonicalize(path).map_err(|_| outside())?;
    if !real.starts_with(dir) || !std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
        return Err(outside());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_files_dir;

    fn configs(key: &str, value: &str) -> BTreeMap<String, String> {
        [(key.to_string(), value.to_string())].into_iter().collect()
    }

    #[test]
    fn locations_must_be_regular_files_inside_the_directory() {
        let base = std::env::temp_dir().join(format!("mg-store-files-{}", std::process::id()));
        let dir = base.join("stores");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), "x").unwrap();
        std::fs::write(base.join("secret.pem"), "x").unwrap();
        let dir = parse_files_dir(dir.to_str().unwrap()).unwrap();
        let inside = dir.join("ca.pem");
        let ok = |k: &str, p: &Path| check_locations_in(&configs(k, p.to_str().unwrap()), Some(&dir));
        assert!(ok("ssl.truststore.location", &inside).is_ok());
        assert!(ok("ssl.keystore.location", &inside).is_ok());
        let e = ok("ssl.truststore.location", &base.join("secret.pem")).unwrap_err();
        assert!(e.key == "ssl.truststore.location" && e.reason.contains(FILES_DIR_SETTING), "{e:?}");
        assert!(ok("ssl.keystore.location", &dir.join("../secret.pem")).is_err(), "`..` out of it");
        assert!(ok("ssl.keystore.location", &dir.join("missing.pem")).is_err());
        assert!(ok("ssl.truststore.location", &dir).is_err(), "a directory");
        assert!(ok("ssl.truststore.location", Path::new("/dev/zero")).is_err());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(base.join("secret.pem"), dir.join("link.pem")).unwrap();
            assert!(ok("ssl.truststore.location", &dir.join("link.pem")).is_err(), "a link out of it");
        }
        // Unset: no file at all, PEM text and no location need nothing.
        let e = check_locations_in(&configs("ssl.truststore.location", inside.to_str().unwrap()), None).unwrap_err();
        assert!(e.reason.contains("not set"), "{e:?}");
        assert!(check_locations_in(&configs("ssl.truststore.certificates", "-----BEGIN"), None).is_ok());
        // The token endpoint's TLS options in the JAAS line.
        let jaas = |p: &Path| {
            configs("sasl.jaas.config", &format!("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"a\" clientSecret=\"s\" ssl.truststore.location=\"{}\";", p.display()))
        };
        assert!(check_locations_in(&jaas(&inside), Some(&dir)).is_ok());
        let e = check_locations_in(&jaas(&base.join("secret.pem")), Some(&dir)).unwrap_err();
        assert!(e.key == "sasl.jaas.config" && e.reason.starts_with("JAAS option ssl.truststore.location"), "{e:?}");
        assert!(!e.reason.contains("clientSecret"), "the JAAS line is not shown");
        assert!(parse_files_dir("relative/dir").is_err());
        assert!(parse_files_dir(inside.to_str().unwrap()).is_err(), "a file");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
