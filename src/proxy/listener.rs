//! Client listeners: per configured listener, a bootstrap port and one port per destination
//! broker (`bootstrap_port + 1 + node_id`). A broker discovered later gets its port when it
//! is first seen.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Listener;

use super::connection::{self, Target};
use super::limits::ConnectionLimits;
use super::Shared;

/// Binds `port` of `listener` and serves `target` on it until `shutdown`, admitting
/// connections within the listener's `limits` (shared by all its ports).
///
/// # Errors
/// The bind error, with the address (e.g. address already in use).
pub async fn bind(
    listener: Arc<Listener>,
    limits: Arc<ConnectionLimits>,
    port: u16,
    target: Target,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) -> anyhow::Result<SocketAddr> {
    let addr = SocketAddr::new(listener.bind_ip, port);
    let tcp = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (listener `{}`): {e}", listener.name))?;
    let local = tcp.local_addr()?;
    tracing::info!(listener = %listener.name, addr = %local, ?target, "listening");
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                accepted = tcp.accept() => match accepted {
                    Ok((stream, peer)) => {
                        // `max_connections` / `max_connections_per_ip`: refused before any
                        // byte is read or any upstream connection is opened.
                        let slot = match limits.admit(peer.ip(), &listener.name) {
                            Ok(slot) => slot,
                            Err(_) => {
                                drop(stream);
                                continue;
                            }
                        };
                        // As brokers do (`socket.setTcpNoDelay(true)` in Kafka's Acceptor): small
                        // responses go out at once instead of waiting for Nagle's delayed ACK.
                        if let Err(e) = stream.set_nodelay(true) {
                            tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY on a client connection");
                        }
                        // Served on a network thread from here on: the socket leaves this
                        // runtime's I/O driver and joins that thread's.
                        let stream = match stream.into_std() {
                            Ok(s) => s,
                            Err(e) => {
                                tracing::warn!(%peer, listener = %listener.name, error = %e, "cannot hand a client connection to a network thread; closed");
                                continue;
                            }
                        };
                        let (listener, shared2) = (listener.clone(), shared.clone());
                        shared.network.spawn(async move {
                            match tokio::net::TcpStream::from_std(stream) {
                                Ok(stream) => connection::serve(stream, peer, listener, target, shared2).await,
                                Err(e) => tracing::warn!(%peer, listener = %listener.name, error = %e, "cannot register a client connection on its network thread; closed"),
                            }
                            drop(slot);
                        });
                    }
                    Err(e) => {
                        tracing::warn!(listener = %listener.name, addr = %local, error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                }
            }
        }
    });
    Ok(local)
}

/// Opens broker ports on every listener for node ids not yet served.
#[derive(Default)]
pub struct BrokerPorts {
    served: HashSet<(usize, i32)>,
}

impl BrokerPorts {
    /// Ensures `node_id` has a port on every listener; logs (does not fail) when a node id
    /// falls outside a listener's range or its port cannot be bound.
    pub async fn ensure(&mut self, node_id: i32, shared: &Arc<Shared>, shutdown: &CancellationToken) {
        for (i, l) in shared.settings.listeners.iter().enumerate() {
            if self.served.contains(&(i, node_id)) {
                continue;
            }
            let Some(port) = l.broker_port(node_id) else {
                tracing::error!(
                    node_id,
                    listener = %l.name,
                    range = %format!("{}-{}", l.bootstrap_port, l.last_port),
                    "destination broker's node id does not fit the listener's port range; widen `port_range`"
                );
                continue;
            };
            let listener = Arc::new(l.clone());
            let limits = shared.listener_limits[i].clone();
            match bind(listener, limits, port, Target::Broker(node_id), shared.clone(), shutdown.clone()).await {
                Ok(_) => {
                    self.served.insert((i, node_id));
                }
                Err(e) => tracing::error!(node_id, error = %e, "cannot open broker port"),
            }
        }
    }
}
