//! The client-facing proxy: listeners, the broker address map, routing by api key and the
//! response interceptors. Traffic for APIs mirrorgate does not need to understand is forwarded
//! as raw bytes to the same destination broker.

pub mod brokers;
pub mod connection;
pub mod intercept;
pub mod listener;
pub mod rewrite;
pub mod route;
pub mod versions;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::client::{BrokerConnection, ClientError};
use crate::config::Settings;

use brokers::BrokerDirectory;
use connection::Target;
use listener::BrokerPorts;

/// State shared by every connection of one proxy.
#[derive(Debug)]
pub struct Shared {
    /// Validated configuration.
    pub settings: Settings,
    /// Destination brokers and their api ranges.
    pub directory: BrokerDirectory,
    /// Api keys served by mirrorgate itself, advertised in ApiVersions: `(key, min, max)`.
    pub extra_apis: Vec<(i16, i16, i16)>,
}

/// What mirrorgate learned about the destination cluster at startup.
#[derive(Debug, Clone)]
pub struct DestinationInfo {
    /// `cluster_id` from Metadata.
    pub cluster_id: Option<String>,
    /// `(node_id, host, port)` of each broker.
    pub brokers: Vec<(i32, String, i32)>,
    /// Advertised `api_key → (min, max)`.
    pub api_ranges: HashMap<i16, (i16, i16)>,
}

/// Asks one of the destination bootstrap servers for its ApiVersions and broker list.
///
/// # Errors
/// The last [`ClientError`] if no bootstrap server answered.
pub async fn discover(settings: &Settings) -> Result<DestinationInfo, ClientError> {
    let mut last = None;
    for addr in &settings.destination_bootstrap {
        match discover_one(addr, settings).await {
            Ok(info) => return Ok(info),
            Err(e) => {
                tracing::warn!(upstream = %addr, error = %e, "destination bootstrap server did not answer");
                last = Some(e);
            }
        }
    }
    Err(last.expect("validated config has at least one bootstrap server"))
}

async fn discover_one(addr: &str, settings: &Settings) -> Result<DestinationInfo, ClientError> {
    let mut conn =
        BrokerConnection::connect(addr, settings.connect_timeout, settings.request_timeout, settings.max_frame_bytes)
            .await?;
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("mirrorgate"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let versions = conn.send(&req, 3).await?;
    if versions.error_code != 0 {
        return Err(ClientError::Protocol {
            addr: addr.into(),
            reason: format!("ApiVersions error code {}", versions.error_code),
        });
    }
    let api_ranges: HashMap<i16, (i16, i16)> =
        versions.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect();
    let meta = conn.send(&MetadataRequest::default().with_topics(Some(vec![])), 12).await?;
    Ok(DestinationInfo {
        cluster_id: meta.cluster_id.map(|s| s.to_string()),
        brokers: meta.brokers.iter().map(|b| (b.node_id.0, b.host.to_string(), b.port)).collect(),
        api_ranges,
    })
}

/// Waits for the destination to answer (retrying every 2 s within `deadline`), opens every
/// listener, and serves until `shutdown` is cancelled.
///
/// # Errors
/// The destination did not answer before `deadline`, or a bootstrap or broker port could not
/// be bound at startup.
pub async fn run(
    settings: Settings,
    extra_apis: Vec<(i16, i16, i16)>,
    deadline: Duration,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let started = tokio::time::Instant::now();
    let info = loop {
        match discover(&settings).await {
            Ok(info) => break info,
            Err(e) if started.elapsed() < deadline => {
                tracing::warn!(error = %e, "destination cluster not reachable yet; retrying in 2 s");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    _ = shutdown.cancelled() => return Ok(()),
                }
            }
            Err(e) => anyhow::bail!(
                "destination cluster unreachable at `{}` after {} s: {e}",
                settings.destination_bootstrap.join(","),
                deadline.as_secs()
            ),
        }
    };
    tracing::info!(cluster_id = ?info.cluster_id, brokers = info.brokers.len(), "connected to destination cluster");
    let (new_tx, mut new_rx) = mpsc::unbounded_channel();
    let directory = BrokerDirectory::new(settings.destination_bootstrap.clone(), new_tx);
    directory.set_api_ranges(info.api_ranges.clone());
    let shared = Arc::new(Shared { settings, directory, extra_apis });
    for l in &shared.settings.listeners {
        listener::bind(Arc::new(l.clone()), l.bootstrap_port, Target::Bootstrap, shared.clone(), shutdown.clone())
            .await?;
    }
    let mut ports = BrokerPorts::default();
    for (node_id, host, port) in &info.brokers {
        shared.directory.observe(*node_id, host, *port);
    }
    while let Ok(node_id) = new_rx.try_recv() {
        ports.ensure(node_id, &shared, &shutdown).await;
    }
    tracing::info!("mirrorgate ready");
    let mut refresh = tokio::time::interval(shared.settings.metadata_refresh_interval);
    refresh.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(node_id) = new_rx.recv() => ports.ensure(node_id, &shared, &shutdown).await,
            _ = refresh.tick() => match discover(&shared.settings).await {
                Ok(info) => for (node_id, host, port) in &info.brokers {
                    shared.directory.observe(*node_id, host, *port);
                },
                Err(e) => tracing::warn!(error = %e, "destination metadata refresh failed"),
            },
        }
    }
    tracing::info!("mirrorgate stopped");
    Ok(())
}
