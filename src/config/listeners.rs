//! `listeners[*]`: client-facing listeners, their port ranges, TLS and connection limits.

use std::net::IpAddr;

use serde::Deserialize;

use super::{invalid, ConfigError};

/// TLS termination of a client listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerTlsConfig {
    /// PEM file with the listener's certificate chain (leaf first).
    pub cert_file: String,
    /// PEM file with its private key (unencrypted PKCS#8, PKCS#1 or SEC1).
    pub key_file: String,
    /// Client certificates: `none` (default), `requested` or `required`.
    #[serde(default)]
    pub client_auth: crate::client::tls::ClientAuth,
    /// PEM file with the CAs client certificates must chain to (with `requested`/`required`).
    #[serde(default)]
    pub ca_file: Option<String>,
}

/// One client-facing listener: a bootstrap port and one port per destination broker.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// Name used in logs (default `"default"`).
    #[serde(default = "default_listener_name")]
    pub name: String,
    /// Address to bind, e.g. `127.0.0.1` or `0.0.0.0`.
    pub bind_host: String,
    /// Host name clients are told to connect to (Metadata, FindCoordinator, DescribeCluster).
    /// Defaults to `bind_host`.
    #[serde(default)]
    pub advertised_host: Option<String>,
    /// Port range `FIRST-LAST` (inclusive). `FIRST` is the bootstrap port; destination broker
    /// with node id `N` is served on `FIRST + 1 + N`.
    pub port_range: String,
    /// Whether mirror admin RPCs are answered on this listener (default false).
    #[serde(default)]
    pub admin: bool,
    /// TLS termination; unset = plaintext.
    #[serde(default)]
    pub tls: Option<ListenerTlsConfig>,
    /// Client connections this listener holds at most, over all its ports (the broker's
    /// `max.connections`); unset = unlimited. A connection over the limit is closed at
    /// accept, with a warning (at most one per second) and
    /// `mirrorgate_client_connections_refused_total{reason="max_connections"}`.
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// Client connections one source IP address holds at most on this listener (the
    /// broker's `max.connections.per.ip`); unset = unlimited.
    #[serde(default)]
    pub max_connections_per_ip: Option<usize>,
}

/// A listener with its port range parsed.
#[derive(Debug, Clone)]
pub struct Listener {
    /// Name used in logs.
    pub name: String,
    /// Address to bind.
    pub bind_ip: IpAddr,
    /// Host name written into rewritten responses.
    pub advertised_host: String,
    /// Bootstrap port (first of the range).
    pub bootstrap_port: u16,
    /// Last port of the range, inclusive.
    pub last_port: u16,
    /// Whether mirror admin RPCs are answered here.
    pub admin: bool,
    /// TLS termination, `None` = plaintext.
    pub tls: Option<ListenerTls>,
    /// Client connections this listener holds at most over all its ports (`None`: unlimited;
    /// enforced by `crate::proxy::limits::ConnectionLimits`).
    pub max_connections: Option<usize>,
    /// Client connections one source IP address holds at most on this listener (`None`:
    /// unlimited).
    pub max_connections_per_ip: Option<usize>,
}

/// A listener's TLS server config, loaded from its files.
#[derive(Clone)]
pub struct ListenerTls {
    /// The rustls config.
    pub config: std::sync::Arc<rustls::ServerConfig>,
    /// Client certificate policy (for logs).
    pub client_auth: crate::client::tls::ClientAuth,
}

impl std::fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls").field("client_auth", &self.client_auth).finish_non_exhaustive()
    }
}

impl Listener {
    /// Port that serves destination broker `node_id`: `bootstrap_port + 1 + node_id`, or
    /// `None` when that falls outside the configured range.
    pub fn broker_port(&self, node_id: i32) -> Option<u16> {
        let port = i64::from(self.bootstrap_port) + 1 + i64::from(node_id);
        (node_id >= 0 && port <= i64::from(self.last_port)).then_some(port as u16)
    }
}

fn default_listener_name() -> String {
    "default".into()
}

/// Checks every listener (at least one; port ranges of the same address must not overlap) and
/// returns them with their port ranges parsed and TLS configs loaded.
///
/// # Errors
/// [`ConfigError::Invalid`] naming `listeners` or the key of the listener at fault.
pub(super) fn validate(configs: &[ListenerConfig]) -> Result<Vec<Listener>, ConfigError> {
    if configs.is_empty() {
        return Err(invalid("listeners", "at least one listener is required"));
    }
    let mut listeners: Vec<Listener> = Vec::new();
    for (i, l) in configs.iter().enumerate() {
        let listener = l.validate(i, &listeners)?;
        listeners.push(listener);
    }
    Ok(listeners)
}

impl ListenerConfig {
    /// Checks listener `i` against the ones before it (`earlier`).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `listeners[i].<key>`.
    fn validate(&self, i: usize, earlier: &[Listener]) -> Result<Listener, ConfigError> {
        let l = self;
        let key = |k: &str| format!("listeners[{i}].{k}");
        let bind_ip: IpAddr = l
            .bind_host
            .parse()
            .map_err(|_| invalid(key("bind_host"), format!("`{}` is not an IP address", l.bind_host)))?;
        let (first, last) = parse_port_range(&l.port_range).map_err(|r| invalid(key("port_range"), r))?;
        for other in earlier {
            if first <= other.last_port && other.bootstrap_port <= last && other.bind_ip == bind_ip {
                return Err(invalid(
                    key("port_range"),
                    format!("overlaps the port range of listener `{}`", other.name),
                ));
            }
        }
        let advertised_host = l.advertised_host.clone().unwrap_or_else(|| {
            if bind_ip.is_unspecified() {
                "127.0.0.1".into()
            } else {
                l.bind_host.clone()
            }
        });
        if advertised_host.is_empty() {
            return Err(invalid(key("advertised_host"), "must not be empty"));
        }
        let tls = match &l.tls {
            None => None,
            Some(t) => Some(ListenerTls {
                config: std::sync::Arc::new(
                    crate::client::tls::server_config(&t.cert_file, &t.key_file, t.client_auth, t.ca_file.as_deref())
                        .map_err(|e| invalid(key(&format!("tls.{}", e.key)), e.reason))?,
                ),
                client_auth: t.client_auth,
            }),
        };
        let listener = Listener {
            name: l.name.clone(),
            bind_ip,
            advertised_host,
            bootstrap_port: first,
            last_port: last,
            admin: l.admin,
            tls,
            max_connections: l.max_connections,
            max_connections_per_ip: l.max_connections_per_ip,
        };
        for (k, v) in [("max_connections", l.max_connections), ("max_connections_per_ip", l.max_connections_per_ip)] {
            if v == Some(0) {
                return Err(invalid(key(k), "must be at least 1 (unset = unlimited)"));
            }
        }
        Ok(listener)
    }
}

fn parse_port_range(s: &str) -> Result<(u16, u16), String> {
    let (a, b) = s.split_once('-').ok_or_else(|| format!("`{s}` is not `FIRST-LAST` (e.g. `19092-19191`)"))?;
    let first: u16 = a.trim().parse().map_err(|_| format!("`{a}` is not a port"))?;
    let last: u16 = b.trim().parse().map_err(|_| format!("`{b}` is not a port"))?;
    if first == 0 || last < first {
        return Err(format!("`{s}`: FIRST must be > 0 and LAST >= FIRST"));
    }
    if last - first < 1 {
        return Err(format!(
            "`{s}` holds {} port(s); at least 2 are needed (a bootstrap port and one per broker)",
            last - first + 1
        ));
    }
    Ok((first, last))
}
