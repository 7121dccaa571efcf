//! Startup check of the TLS identity client connections use towards the destination
//! (`destination.client_upstream`, [`crate::config::ClientUpstream`]).
//!
//! Client connections never present mirrorgate's own certificate. A destination listener
//! with `ssl.client.auth=required` refuses a TLS connection without a certificate, so without
//! a separate `client_upstream` certificate every client connection would fail; mirrorgate
//! then refuses to start, saying why and what to configure, instead of serving clients that
//! can only be closed. It never falls back to mirrorgate's own certificate.

use std::time::Duration;

use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::protocol::StrBytes;

use crate::client::conn::{BrokerConnection, ClientError};
use crate::config::Settings;

/// Attempts over the bootstrap servers before a non-TLS failure is reported.
const ATTEMPTS: u32 = 3;

/// Opens a TLS connection to a destination bootstrap server with the client-upstream identity
/// and exchanges ApiVersions (allowed before SASL on SASL_SSL listeners): `Ok` when the broker
/// accepts the identity, or when the destination does not use TLS.
///
/// # Errors
/// The broker refused the TLS connection (its alert, e.g. `CertificateRequired`, or a close
/// right after the handshake) on every bootstrap server, with the explanation for the
/// operator; or no bootstrap server could be reached in [`ATTEMPTS`] rounds.
pub async fn check(settings: &Settings) -> anyhow::Result<()> {
    let Some(upstream) = &settings.client_upstream else {
        return Ok(());
    };
    let mut last = None;
    for attempt in 1..=ATTEMPTS {
        for addr in &settings.destination_bootstrap {
            match probe(addr, settings, &upstream.security).await {
                Ok(()) => {
                    let who = upstream.principal.as_deref().unwrap_or("no client certificate");
                    tracing::info!(upstream = %addr, identity = who, "client connections reach the destination over TLS with their own identity, never mirrorgate's certificate");
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(upstream = %addr, attempt, error = %e, "the destination did not accept the client connections' TLS identity");
                    let refused = matches!(e, ClientError::Tls { .. } | ClientError::Closed { .. });
                    last = Some(e);
                    if refused {
                        break;
                    }
                }
            }
        }
        if matches!(last, Some(ClientError::Tls { .. } | ClientError::Closed { .. })) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let e = last.map_or_else(|| "no destination bootstrap server".to_string(), |e| e.to_string());
    match &upstream.principal {
        None => anyhow::bail!(
            "the destination refused a TLS connection without a client certificate ({e}): its listener requires client \
             certificates (ssl.client.auth=required). Client connections through mirrorgate never present mirrorgate's \
             own certificate (destination.ssl_keystore_*), since every client would then act at the broker as \
             mirrorgate's principal. Configure a separate, low-privilege certificate for them under \
             destination.client_upstream (ssl_keystore_location, ...), or let the listener only request client \
             certificates (docs/security.md, \"Client connections\")"
        ),
        Some(p) => anyhow::bail!(
            "the destination refused the certificate of destination.client_upstream ({p}) for client connections: {e}"
        ),
    }
}

async fn probe(addr: &str, settings: &Settings, security: &crate::client::ClientSecurity) -> Result<(), ClientError> {
    let mut conn = BrokerConnection::connect_with(
        addr,
        settings.connect_timeout,
        settings.request_timeout,
        settings.max_frame_bytes,
        &crate::client::SocketOptions::default(),
        security,
    )
    .await?;
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("mirrorgate"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    conn.send(&req, 3).await.map(|_| ())
}
