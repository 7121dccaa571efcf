//! The client towards a mirror's source cluster, from its configs: TLS and SASL
//! ([`source_security`]) and the connection options ([`source_options`]).

use std::collections::BTreeMap;

use super::{effective, split_list};

/// How long a built [`source_security`] is reused for the same settings before the stores
/// it names are read again (callers ask several times a second).
const SECURITY_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(60);

type SecurityCache = std::sync::Mutex<
    std::collections::HashMap<(String, BTreeMap<String, String>), (std::time::Instant, crate::client::ClientSecurity)>,
>;

/// The TLS and SASL settings towards the source of mirror `mirror` with `configs` (effective
/// values of `security.protocol`, `sasl.*`, `ssl.*`). The same mirror and settings give the
/// same result for [`SECURITY_CACHE_TTL`] (60 s) once built: store files are re-read after
/// that. An OAUTHBEARER token is the mirror's own, shared by its connections, never by
/// another mirror's.
///
/// # Errors
/// [`crate::client::SecurityError`] naming the key that cannot be used, including a token
/// endpoint outside proxy.yaml's allow-list ([`crate::mirror::bound_credentials::check_token_url`]).
pub fn source_security(
    mirror: &str,
    configs: &BTreeMap<String, String>,
) -> Result<crate::client::ClientSecurity, crate::client::SecurityError> {
    static CACHE: std::sync::OnceLock<SecurityCache> = std::sync::OnceLock::new();
    // Never a token request to an endpoint the operator's allow-list does not hold.
    crate::mirror::bound_credentials::check_token_url(configs)?;
    // Never a file outside proxy.yaml's mirrors.ssl_files_dir.
    crate::mirror::store_files::check_locations(configs)?;
    let props: BTreeMap<String, String> = crate::client::security::security_keys()
        .filter_map(|k| effective(configs, k).map(|v| (k.to_string(), v.to_string())))
        .collect();
    let owner = format!("mirror:{mirror}");
    let key = (owner.clone(), props);
    let cache = CACHE.get_or_init(Default::default);
    {
        let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
        c.retain(|_, (at, _)| at.elapsed() < SECURITY_CACHE_TTL);
        // Held for the TTL only: a deleted or reconfigured mirror's OAUTHBEARER token source
        // (and its refresher) dies with its clients and this entry, while a failing one keeps
        // its 10 s failure hold across connects.
        if let Some((_, built)) = c.get(&key) {
            return Ok(built.clone());
        }
    }
    // Only usable settings are kept: a fixed store file is seen at the next call.
    let built = crate::client::ClientSecurity::from_properties_for(&owner, &key.1)?;
    cache.lock().unwrap_or_else(|e| e.into_inner()).insert(key, (std::time::Instant::now(), built.clone()));
    Ok(built)
}

/// Options of a client towards the source cluster of mirror `mirror` with `configs` (keys or their
/// aliases): `bootstrap.servers`, `client.id`, `request.timeout.ms`,
/// `socket.connection.setup.timeout.ms` and `.max.ms`, `reconnect.backoff.ms`,
/// `connections.max.idle.ms` (-1 = never), `socket.timeout.ms` and
/// `socket.send.buffer.bytes` / `socket.receive.buffer.bytes` (-1 = OS default), and TLS and
/// SASL ([`source_security`]; settings that stopped being usable give a client whose every
/// connect fails naming them, never a plaintext one). `None` when `bootstrap.servers` is
/// missing.
pub fn source_options(mirror: &str, configs: &BTreeMap<String, String>) -> Option<crate::client::ClusterOptions> {
    let bootstrap: Vec<String> = split_list(effective(configs, "bootstrap.servers")?).map(String::from).collect();
    let security = source_security(mirror, configs).unwrap_or_else(crate::client::ClientSecurity::broken);
    let long = |k: &str| effective(configs, k).and_then(|v| v.trim().parse::<i64>().ok());
    let ms = |k: &str| long(k).and_then(|v| u64::try_from(v).ok()).map(std::time::Duration::from_millis);
    let bytes = |k: &str| long(k).and_then(|v| u32::try_from(v).ok()).filter(|v| *v > 0);
    let mut opts = crate::client::ClusterOptions::new(bootstrap);
    if let Some(t) = ms("request.timeout.ms") {
        opts.request_timeout = t;
    }
    if let Some(t) = ms("socket.connection.setup.timeout.ms") {
        opts.connect_timeout = t;
    }
    opts.connect_timeout_max = ms("socket.connection.setup.timeout.max.ms").unwrap_or(opts.connect_timeout);
    if let Some(t) = ms("reconnect.backoff.ms") {
        opts.reconnect_backoff = t;
    }
    opts.connections_max_idle = ms("connections.max.idle.ms");
    opts.socket = crate::client::SocketOptions {
        send_buffer_bytes: bytes("socket.send.buffer.bytes"),
        receive_buffer_bytes: bytes("socket.receive.buffer.bytes"),
        read_timeout: ms("socket.timeout.ms"),
    };
    if let Some(id) = effective(configs, "client.id") {
        opts.client_id = id.to_string();
    }
    opts.security = security;
    Some(opts)
}
