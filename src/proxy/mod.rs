//! The client-facing proxy: listeners, the broker address map, routing by api key and the
//! response interceptors. Traffic for APIs mirrorgate does not need to understand is forwarded
//! as raw bytes to the same destination broker.

pub mod authz;
pub mod brokers;
pub mod conn_log;
pub mod connection;
pub mod fetch_pass;
pub mod fetch_sessions;
pub mod fetch_stream;
pub mod frame_io;
pub mod halves;
pub mod identity;
pub mod intercept;
pub mod limits;
pub mod listener;
pub mod mirror_gate;
pub mod network_threads;
pub mod open_count;
pub mod present;
pub mod request_metrics;
pub mod request_span;
pub mod rewrite;
pub mod route;
pub mod sasl_claims;
pub mod sasl_inspect;
pub mod splice;
pub mod state_guard;
pub mod upstream_tls;
pub mod versions;
pub mod write_deadline;

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
    /// The mirror side: admin RPCs and read-only mirror topics (absent in a bare proxy).
    pub gate: Option<Arc<mirror_gate::MirrorGate>>,
    /// Request bytes buffered across client connections (`queued_max_request_bytes`).
    pub request_memory: limits::RequestMemory,
    /// Cancelled when mirrorgate shuts down: client connections stop reading requests,
    /// send the responses already due, and close.
    pub drain: CancellationToken,
    /// Open client connections (the shutdown waits for them to drain).
    pub connections: std::sync::atomic::AtomicUsize,
    /// Label names of api keys for the request metrics (mirror RPCs on their configured keys).
    pub api_names: request_metrics::ApiNames,
    /// Client addresses whose Fetch responses are not forwarded while they arrive, for a while
    /// ([`fetch_stream`]).
    pub fetch_stream_denials: fetch_stream::Denials,
    /// The threads client connections are served on (`num_network_threads`).
    pub network: network_threads::NetworkThreads,
    /// The main runtime: the mirror RPCs and the admin work they need run there
    /// ([`mirror_gate::MirrorGate::runs_on_main`]).
    pub main: tokio::runtime::Handle,
    /// `max_connections` / `max_connections_per_ip` and the live counts of each listener, in
    /// the order of `settings.listeners`, shared by every port of that listener.
    pub listener_limits: Vec<Arc<limits::ConnectionLimits>>,
}

/// Stops the network threads when dropped.
struct StopOnDrop<'a>(&'a network_threads::NetworkThreads);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

/// How long a shutdown waits for client connections to send their in-flight responses.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a shutdown waits for the network threads to drop their connections and stop.
pub const NETWORK_STOP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a shutdown waits for the copy loops to finish their in-flight appends.
pub const DATA_PLANE_STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The background work of the mirror side, stopped in order at shutdown.
struct MirrorWork {
    /// Stops the data plane (copy loops finish their in-flight appends).
    data_plane_stop: CancellationToken,
    data_plane: tokio::task::JoinHandle<()>,
    /// Stops the group membership (LeaveGroup), after the data plane stopped.
    membership_stop: CancellationToken,
    membership: tokio::task::JoinHandle<()>,
    control: Arc<crate::mirror::control::ControlPlane>,
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
    let mut conn = BrokerConnection::connect_with(
        addr,
        settings.connect_timeout,
        settings.request_timeout,
        settings.max_frame_bytes,
        &crate::client::SocketOptions::default(),
        &settings.destination_security,
    )
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

/// Api keys of the mirror RPCs that the destination already uses for APIs of its own.
fn shared_table_conflicts(settings: &Settings, info: &DestinationInfo) -> Vec<String> {
    settings
        .mirror_api_keys
        .entries()
        .iter()
        .filter(|e| info.api_ranges.contains_key(&e.api_key))
        .map(|e| {
            format!(
                "the destination cluster already uses api key {} that mirrorgate would serve for {}; \
                 move it with `mirror_api_keys.{}` in proxy.yaml",
                e.api_key,
                e.api.name(),
                e.api.config_key()
            )
        })
        .collect()
}

/// Reads the state topic's id before any client connects: Fetch v13+, Produce v13,
/// DeleteTopics v6 and ShareFetch name topics by id only, and the guard refuses them by that
/// id ([`state_guard`]). Retries for about 30 s (a new topic's metadata may still be
/// propagating), then refuses to start rather than serve clients with an unknown id.
///
/// # Errors
/// The id could not be read (or is zero) after the retries.
async fn learn_state_topic_id(
    client: &crate::client::cluster::ClusterClient,
    state: &state_guard::StateTopicGuard,
) -> anyhow::Result<()> {
    const ATTEMPTS: u32 = 15;
    let topic = state.name().to_string();
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        match client.topic(&topic).await {
            Ok(t) if t.topic_id.0 != [0; 16] => {
                state.learn(&t.topic_id.0, &t.name);
                return Ok(());
            }
            Ok(_) => last = "the destination answered with a zero topic id".into(),
            Err(e) => last = e.to_string(),
        }
        tracing::warn!(%topic, attempt, "cannot read the state topic's id yet: {last}");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    anyhow::bail!(
        "cannot read the topic id of the state topic {topic} after {ATTEMPTS} attempts ({last}); \
         mirrorgate refuses to start, as it could not keep clients from reading it by id"
    )
}

/// Opens `__mirror_state` (creating it if needed), loads every mirror and partition state,
/// and returns the gate the connections use.
///
/// # Errors
/// The state topic cannot be created, read or parsed.
async fn open_mirror_gate(
    settings: &Settings,
    shutdown: &CancellationToken,
) -> anyhow::Result<(Arc<mirror_gate::MirrorGate>, MirrorWork)> {
    use crate::client::cluster::ClusterClient;
    use crate::mirror::control::{ControlPlane, ControlState};
    use crate::mirror::store::{StateStore, StateStoreSettings};
    use crate::mirror::topics::ClusterAccess;

    let client = ClusterClient::connect(crate::mirror::topics::destination_options(settings)).await?;
    let data_client = client.clone();
    let store_settings = StateStoreSettings::from(&settings.mirror_state);
    let store = StateStore::open(client, store_settings).await?;
    let (snapshot, next_offsets) = store.load_and_position().await?;
    tracing::info!(
        topic = %settings.mirror_state.topic,
        mirrors = snapshot.mirrors.len(),
        topics = snapshot.topics.len(),
        partitions = snapshot.partitions.len(),
        "mirror state loaded"
    );
    let state = state_guard::StateTopicGuard::new(&settings.mirror_state.topic);
    learn_state_topic_id(&data_client, &state).await?;
    let destination = ClusterAccess {
        bootstrap: crate::mirror::topics::Bootstrap::secured(
            settings.destination_bootstrap.clone(),
            settings.destination_security.clone(),
        ),
        connect_timeout: settings.connect_timeout,
        request_timeout: settings.request_timeout,
    };
    let store = Arc::new(store);
    crate::mirror::bound_credentials::install_allowed_urls(settings.sasl_oauthbearer_allowed_urls.clone());
    crate::mirror::store_files::install_files_dir(settings.mirror_ssl_files_dir.clone());
    let control = Arc::new(ControlPlane::new(store.clone(), destination.clone()));
    control.load(ControlState::from_records(
        snapshot.mirrors,
        snapshot.topics.into_values(),
        snapshot.partitions.into_values(),
    ));
    // Other instances' writes take effect here too (docs/operations.md, "Several instances").
    let follow_client = ClusterClient::connect(crate::mirror::topics::destination_options(settings)).await?;
    let position = crate::mirror::follow::FollowPosition::new(&next_offsets);
    {
        let (store, position, shutdown) = (store.clone(), position.clone(), shutdown.clone());
        control.set_follow_barrier(Arc::new(move || {
            let (store, position, shutdown) = (store.clone(), position.clone(), shutdown.clone());
            Box::pin(async move {
                crate::mirror::sharing::catch_up(
                    &store,
                    &position,
                    crate::mirror::sharing::ADMIN_BARRIER_TIMEOUT,
                    &shutdown,
                )
                .await
            })
        }));
    }
    tokio::spawn(crate::mirror::follow::run(
        control.clone(),
        store.clone(),
        follow_client,
        next_offsets,
        position.clone(),
        shutdown.clone(),
    ));
    crate::mirror::sync::spawn(control.clone(), settings, shutdown.clone());
    if settings.metrics_listen.is_some() {
        tokio::spawn(crate::mirror::metrics::collect(control.clone(), shutdown.clone()));
    }
    let acl_client = data_client.clone();
    let data_plane =
        crate::mirror::dataplane::DataPlane::new(control.clone(), data_client.clone(), settings.request_timeout);
    // The mirror work is shared with the other instances of this state topic through a
    // group on the destination (docs/operations.md, "Several instances"); nothing is copied
    // here before the first assignment.
    control.set_ownership(Some(crate::mirror::control::Ownership::default()));
    let (work_tx, work_rx) = tokio::sync::watch::channel(crate::mirror::members::WorkSet::default());
    let membership_stop = CancellationToken::new();
    let membership = crate::mirror::members::spawn(
        data_client.clone(),
        settings.membership.clone(),
        work_rx,
        membership_stop.clone(),
    );
    tokio::spawn(crate::mirror::sharing::run(
        control.clone(),
        work_tx,
        membership.assignment.clone(),
        membership.lease.clone(),
        Some((store, position)),
        shutdown.clone(),
    ));
    let data_plane = data_plane.report_busy(membership.busy.clone());
    let data_plane_stop = CancellationToken::new();
    let data_plane = tokio::spawn(data_plane.run(data_plane_stop.clone()));
    let work = MirrorWork {
        data_plane_stop,
        data_plane,
        membership_stop,
        membership: membership.task,
        control: control.clone(),
    };
    let gate = Arc::new(mirror_gate::MirrorGate::new(
        control,
        settings.mirror_api_keys.clone(),
        destination,
        acl_client,
        settings.super_users.clone(),
        authz::destination_authenticates(&settings.destination_security),
        state,
    ));
    Ok((gate, work))
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
    use crate::telemetry::http::set_not_ready;
    // Served from the start: /health answers while the destination is awaited, /ready says why not.
    if let Some(addr) = settings.metrics_listen {
        crate::telemetry::metrics::install(
            addr,
            &[
                (request_metrics::REQUEST_DURATION, request_metrics::REQUEST_DURATION_BUCKETS),
                (crate::mirror::metrics::SOURCE_FETCH_DURATION, request_metrics::REQUEST_DURATION_BUCKETS),
            ],
        )?;
    }
    set_not_ready(Some("waiting for the destination cluster"));
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
                "destination cluster {} at `{}` after {} s: {e}",
                if e.is_security() { "refused mirrorgate's TLS or SASL connection" } else { "unreachable" },
                settings.destination_bootstrap.join(","),
                deadline.as_secs()
            ),
        }
    };
    tracing::info!(cluster_id = ?info.cluster_id, brokers = info.brokers.len(), "connected to destination cluster");
    if let Some(conflict) = shared_table_conflicts(&settings, &info).into_iter().next() {
        anyhow::bail!("{conflict}");
    }
    upstream_tls::check(&settings).await?;
    set_not_ready(Some("loading the mirror state"));
    let (gate, work) = open_mirror_gate(&settings, &shutdown).await?;
    let gate = Some(gate);
    let extra_apis: Vec<(i16, i16, i16)> =
        extra_apis.into_iter().chain(gate.iter().flat_map(|g| g.advertised())).collect();
    let (new_tx, mut new_rx) = mpsc::unbounded_channel();
    let directory = BrokerDirectory::new(settings.destination_bootstrap.clone(), new_tx);
    directory.set_api_ranges(info.api_ranges.clone());
    let request_memory = limits::RequestMemory::new(settings.queued_max_request_bytes, settings.max_frame_bytes);
    let drain = CancellationToken::new();
    let api_names = request_metrics::ApiNames::new(|k| {
        gate.as_ref().and_then(|g| g.table.lookup(k)).map(crate::wire::mirror::MirrorApi::name)
    });
    let network = network_threads::NetworkThreads::start(settings.num_network_threads)
        .map_err(|e| anyhow::anyhow!("cannot start {} network threads: {e}", settings.num_network_threads))?;
    tracing::debug!(threads = network.len(), "network threads started");
    let listener_limits = settings.listeners.iter().map(limits::ConnectionLimits::from_config).collect();
    let shared = Arc::new(Shared {
        listener_limits,
        settings,
        directory,
        extra_apis,
        gate,
        request_memory,
        drain: drain.clone(),
        connections: Default::default(),
        api_names,
        fetch_stream_denials: fetch_stream::Denials::default(),
        network,
        main: tokio::runtime::Handle::current(),
    });
    // The network threads stop when this returns, however it returns (a later listener's
    // bind failing included), not when the last connection lets go of `shared`.
    let _network = StopOnDrop(&shared.network);
    for (i, l) in shared.settings.listeners.iter().enumerate() {
        let limits = shared.listener_limits[i].clone();
        listener::bind(
            Arc::new(l.clone()),
            limits,
            l.bootstrap_port,
            Target::Bootstrap,
            shared.clone(),
            shutdown.clone(),
        )
        .await?;
    }
    let mut ports = BrokerPorts::default();
    for (node_id, host, port) in &info.brokers {
        shared.directory.observe(*node_id, host, *port);
    }
    while let Ok(node_id) = new_rx.try_recv() {
        ports.ensure(node_id, &shared, &shutdown).await;
    }
    tokio::spawn(conn_log::run(shutdown.clone()));
    tracing::info!("mirrorgate ready");
    set_not_ready(None);
    let mut refresh = tokio::time::interval(shared.settings.metadata_refresh_interval);
    refresh.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                set_not_ready(Some("shutting down"));
                break;
            }
            Some(node_id) = new_rx.recv() => ports.ensure(node_id, &shared, &shutdown).await,
            _ = refresh.tick() => match discover(&shared.settings).await {
                Ok(info) => for (node_id, host, port) in &info.brokers {
                    shared.directory.observe(*node_id, host, *port);
                },
                Err(e) => tracing::warn!(error = %e, "destination metadata refresh failed"),
            },
        }
    }
    // Graceful stop (SIGTERM): client connections answer what they already forwarded and
    // close; the copy loops finish their in-flight appends; then the instance leaves.
    drain.cancel();
    work.data_plane_stop.cancel();
    if tokio::time::timeout(DATA_PLANE_STOP_TIMEOUT, work.data_plane).await.is_err() {
        tracing::warn!(timeout_s = DATA_PLANE_STOP_TIMEOUT.as_secs(), "copy loops did not stop in time");
    } else {
        tracing::info!("copy loops stopped");
    }
    // Leave the group only now, so that no other instance starts a copy loop of ours
    // while an append of ours is still in flight; the work then moves at once. A loop that
    // did not stop in time can append no more: this instance owns nothing from here on.
    work.control.set_ownership(Some(crate::mirror::control::Ownership::default()));
    work.membership_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), work.membership).await;
    let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
    while shared.connections.load(std::sync::atomic::Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let open = shared.connections.load(std::sync::atomic::Ordering::Acquire);
    if open > 0 {
        tracing::warn!(open, "client connections still open after the drain timeout; closing them");
    }
    // The network threads drop what is left on them (connections still open close) before the
    // instance says it stopped.
    if !shared.network.stop(NETWORK_STOP_TIMEOUT).await {
        tracing::warn!(timeout_s = NETWORK_STOP_TIMEOUT.as_secs(), "network threads did not stop in time");
    }
    tracing::info!("mirrorgate stopped");
    Ok(())
}
