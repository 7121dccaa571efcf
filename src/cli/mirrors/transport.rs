//! The Kafka-protocol connection `mirrorgate mirrors` uses to reach a mirrorgate admin
//! listener: an ApiVersions handshake that checks the mirror RPCs are advertised, then mirror
//! requests whose api keys come from the runtime [`MirrorApiTable`] (so they cannot go through
//! `BrokerConnection::send`, whose api key is a compile-time constant).
//!
//! Framing, header encoding, response checks and version negotiation are pure functions
//! tested with byte slices; only [`AdminConnection`] touches the socket. Every response length
//! is checked against a cap before it sizes a buffer.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader};
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use mirrorgate::client::sasl::SaslTransport;
use mirrorgate::client::stream::BrokerStream;
use mirrorgate::client::{ClientError, ClientSecurity};

use mirrorgate::wire::frame::FrameDecoder;
use mirrorgate::wire::header;
use mirrorgate::wire::mirror::{self, MirrorApi, MirrorApiTable, MirrorRequest, MirrorResponse, SUPPORTED_VERSIONS};

/// ApiVersions request version sent first (v3: flexible, request header v2; every Kafka
/// since 2.4 and mirrorgate answer it). Its response header is always v0.
const API_VERSIONS_VERSION: i16 = 3;
/// Cap on one response frame, in bytes (admin responses are small; describe of a large mirror
/// is the biggest).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Request header version of every mirror RPC (flexible from v0).
const MIRROR_REQUEST_HEADER_VERSION: i16 = 2;
/// Response header version of every mirror RPC.
const MIRROR_RESPONSE_HEADER_VERSION: i16 = 1;

/// A whole request frame: length prefix, request header of `header_version` (api key, version,
/// correlation id, `client_id`), then `body`.
///
/// Errors: the header cannot be encoded (e.g. a `client_id` over 32767 bytes) or the frame
/// exceeds `i32::MAX` bytes.
pub fn encode_frame(
    api_key: i16,
    api_version: i16,
    header_version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &[u8],
) -> anyhow::Result<BytesMut> {
    let mut hdr = RequestHeader::default();
    hdr.request_api_key = api_key;
    hdr.request_api_version = api_version;
    hdr.correlation_id = correlation_id;
    hdr.client_id = Some(StrBytes::from_string(client_id.to_string()));
    let mut out = BytesMut::with_capacity(64 + body.len());
    out.put_i32(0);
    hdr.encode(&mut out, header_version).context("encoding the request header")?;
    out.put_slice(body);
    let len = i32::try_from(out.len() - 4).map_err(|_| anyhow!("request of {} bytes is too large", out.len()))?;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out)
}

/// The body of a response `frame` (without its length prefix) after checking its correlation
/// id and skipping a response header of `header_version`.
///
/// Errors: truncated header, or a correlation id other than `expected`.
pub fn response_body(frame: Bytes, expected: i32, header_version: i16) -> anyhow::Result<Bytes> {
    let got = header::response_correlation_id(&frame).map_err(|e| anyhow!("bad response header: {e}"))?;
    if got != expected {
        bail!("response has correlation id {got}, expected {expected}");
    }
    let start = header::response_header_len(&frame, header_version).map_err(|e| anyhow!("bad response header: {e}"))?;
    Ok(frame.slice(start..))
}

/// The message for a server that does not serve the mirror RPCs.
pub fn not_served(addr: &str) -> String {
    format!("{addr} does not serve the KIP-1279 mirror APIs (is it mirrorgate with an admin listener?)")
}

/// Picks the version to use for each of `needed` from the server's ApiVersions answer: the
/// highest version both the server and this codec ([`SUPPORTED_VERSIONS`]) support.
///
/// Errors: an api key from `table` is not advertised (the [`not_served`] message, naming the
/// missing RPCs), or its advertised range does not overlap ours.
pub fn negotiate(
    addr: &str,
    advertised: &[ApiVersion],
    table: &MirrorApiTable,
    needed: &[MirrorApi],
) -> anyhow::Result<HashMap<MirrorApi, i16>> {
    let mut versions = HashMap::new();
    let mut missing = Vec::new();
    for &api in needed {
        let key = table.api_key(api);
        let Some(v) = advertised.iter().find(|v| v.api_key == key) else {
            missing.push(format!("{} (api key {key})", api.name()));
            continue;
        };
        let max = v.max_version.min(SUPPORTED_VERSIONS.max);
        if max < v.min_version.max(SUPPORTED_VERSIONS.min) {
            bail!(
                "{addr} serves {} (api key {key}) at versions {}-{}, but this tool speaks versions {}-{}",
                api.name(),
                v.min_version,
                v.max_version,
                SUPPORTED_VERSIONS.min,
                SUPPORTED_VERSIONS.max
            );
        }
        versions.insert(api, max);
    }
    if !missing.is_empty() {
        bail!("{}; missing: {}", not_served(addr), missing.join(", "));
    }
    Ok(versions)
}

/// A connection to a mirrorgate admin listener that has passed the ApiVersions check.
#[derive(Debug)]
pub struct AdminConnection {
    addr: String,
    stream: BrokerStream,
    buf: BytesMut,
    decoder: FrameDecoder,
    next_correlation_id: i32,
    client_id: String,
    request_timeout: Duration,
    table: MirrorApiTable,
    versions: HashMap<MirrorApi, i16>,
}

/// Timeouts of [`AdminConnection`].
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// TCP connect, per address.
    pub connect: Duration,
    /// One request and its response.
    pub request: Duration,
}

impl AdminConnection {
    /// Connects to the first reachable address of `bootstrap` (TLS when `security` says so),
    /// sends ApiVersions, authenticates with SASL when `security` says so (the exchange is
    /// forwarded by mirrorgate to the destination broker, which checks the credentials), and
    /// checks that every RPC in `needed` is advertised under its `table` api key.
    ///
    /// Errors: no address reachable (every failure listed), a timeout, a TLS or SASL refusal,
    /// an ApiVersions error code, or the RPCs not served (see [`negotiate`]).
    pub async fn open(
        bootstrap: &[String],
        client_id: &str,
        timeouts: Timeouts,
        table: MirrorApiTable,
        needed: &[MirrorApi],
        security: &ClientSecurity,
    ) -> anyhow::Result<Self> {
        let mut failures = Vec::new();
        let mut found = None;
        for addr in bootstrap {
            match tokio::time::timeout(timeouts.connect, TcpStream::connect(addr.as_str())).await {
                Ok(Ok(s)) => {
                    found = Some((addr.clone(), s));
                    break;
                }
                Ok(Err(e)) => failures.push(format!("{addr}: {e}")),
                Err(_) => failures.push(format!("{addr}: connect timed out after {} ms", timeouts.connect.as_millis())),
            }
        }
        let Some((addr, tcp)) = found else {
            bail!("cannot connect to the destination: {}", failures.join("; "));
        };
        let _ = tcp.set_nodelay(true);
        let stream = match &security.tls {
            Some(config) => BrokerStream::tls(tcp, &addr, config.clone(), timeouts.connect).await?,
            None => BrokerStream::Plain(tcp),
        };
        let mut conn = Self {
            addr,
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
            decoder: FrameDecoder::new(MAX_RESPONSE_BYTES),
            next_correlation_id: 1,
            client_id: client_id.to_string(),
            request_timeout: timeouts.request,
            table,
            versions: HashMap::new(),
        };
        let advertised = conn.api_versions().await?;
        if let Some(creds) = &security.sasl {
            mirrorgate::client::sasl::authenticate(&mut conn, creds).await?;
        }
        conn.versions = negotiate(&conn.addr, &advertised, &conn.table, needed)?;
        Ok(conn)
    }

    async fn sasl_call(&mut self, key: ApiKey, body: &[u8], what: &str) -> Result<Bytes, ClientError> {
        // SaslHandshake and SaslAuthenticate v1: request header v1, response header v0.
        self.round_trip(key as i16, 1, 1, 0, body, what)
            .await
            .map_err(|e| ClientError::Protocol { addr: self.addr.clone(), reason: format!("{e:#}") })
    }

    async fn api_versions(&mut self) -> anyhow::Result<Vec<ApiVersion>> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("mirrorgate-mirrors"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut body = BytesMut::new();
        req.encode(&mut body, API_VERSIONS_VERSION).context("encoding ApiVersions")?;
        let mut resp =
            self.round_trip(ApiKey::ApiVersions as i16, API_VERSIONS_VERSION, 2, 0, &body, "ApiVersions").await?;
        let resp = ApiVersionsResponse::decode(&mut resp, API_VERSIONS_VERSION)
            .map_err(|e| anyhow!("{}: undecodable ApiVersions response: {e}", self.addr))?;
        if resp.error_code != 0 {
            bail!("{}: ApiVersions failed: {}", self.addr, super::output::format_error(resp.error_code, None, None));
        }
        Ok(resp.api_keys)
    }

    /// The `host:port` this connection goes to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends a mirror request under its table api key and decodes the response.
    ///
    /// Errors: the RPC was not negotiated in [`AdminConnection::open`], I/O failure, timeout,
    /// closed connection, or an undecodable response.
    pub async fn call(&mut self, req: &MirrorRequest) -> anyhow::Result<MirrorResponse> {
        let api = req.api();
        let version = *self.versions.get(&api).ok_or_else(|| anyhow!("{} was not negotiated", api.name()))?;
        let mut body = BytesMut::new();
        mirror::encode_request(req, version, &mut body).with_context(|| format!("encoding {}", api.name()))?;
        let key = self.table.api_key(api);
        let mut resp = self
            .round_trip(key, version, MIRROR_REQUEST_HEADER_VERSION, MIRROR_RESPONSE_HEADER_VERSION, &body, api.name())
            .await?;
        mirror::decode_response(api, version, &mut resp)
            .map_err(|e| anyhow!("{}: undecodable {} response: {e}", self.addr, api.name()))
    }

    async fn round_trip(
        &mut self,
        api_key: i16,
        version: i16,
        request_header_version: i16,
        response_header_version: i16,
        body: &[u8],
        what: &str,
    ) -> anyhow::Result<Bytes> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        let frame = encode_frame(api_key, version, request_header_version, correlation_id, &self.client_id, body)?;
        let timeout = self.request_timeout;
        let addr = self.addr.clone();
        let fut = async {
            self.stream.write_all(&frame).await.with_context(|| format!("{addr}: sending {what}"))?;
            self.stream.flush().await.with_context(|| format!("{addr}: sending {what}"))?;
            self.read_frame().await
        };
        let frame = tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| anyhow!("{addr}: {what} timed out after {} ms", timeout.as_millis()))??;
        response_body(frame, correlation_id, response_header_version).map_err(|e| anyhow!("{addr}: {what}: {e}"))
    }

    async fn read_frame(&mut self) -> anyhow::Result<Bytes> {
        loop {
            if let Some(frame) = self.decoder.decode(&mut self.buf).map_err(|e| anyhow!("{}: {e}", self.addr))? {
                return Ok(frame);
            }
            let n = self.stream.read_buf(&mut self.buf).await.with_context(|| format!("{}: reading", self.addr))?;
            if n == 0 {
                bail!("{}: connection closed by the server", self.addr);
            }
        }
    }
}

impl SaslTransport for AdminConnection {
    fn peer(&self) -> String {
        self.addr.clone()
    }

    async fn sasl_handshake(&mut self, req: &SaslHandshakeRequest) -> Result<SaslHandshakeResponse, ClientError> {
        let mut body = BytesMut::new();
        let bad = |reason: String, addr: &str| ClientError::Protocol { addr: addr.to_string(), reason };
        req.encode(&mut body, 1).map_err(|e| bad(e.to_string(), &self.addr))?;
        let mut resp = self.sasl_call(ApiKey::SaslHandshake, &body, "SaslHandshake").await?;
        SaslHandshakeResponse::decode(&mut resp, 1).map_err(|e| bad(format!("SaslHandshake: {e}"), &self.addr))
    }

    async fn sasl_authenticate(
        &mut self,
        req: &SaslAuthenticateRequest,
    ) -> Result<SaslAuthenticateResponse, ClientError> {
        let mut body = BytesMut::new();
        let bad = |reason: String, addr: &str| ClientError::Protocol { addr: addr.to_string(), reason };
        req.encode(&mut body, 1).map_err(|e| bad(e.to_string(), &self.addr))?;
        let mut resp = self.sasl_call(ApiKey::SaslAuthenticate, &body, "SaslAuthenticate").await?;
        SaslAuthenticateResponse::decode(&mut resp, 1).map_err(|e| bad(format!("SaslAuthenticate: {e}"), &self.addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn advertised(keys: &[(i16, i16, i16)]) -> Vec<ApiVersion> {
        keys.iter()
            .map(|&(k, min, max)| ApiVersion::default().with_api_key(k).with_min_version(min).with_max_version(max))
            .collect()
    }

    #[test]
    fn frame_has_length_prefix_and_v2_header() {
        let f = encode_frame(99, 0, 2, 7, "ops", &[0xAA, 0xBB]).unwrap();
        let mut want = vec![0, 0, 0, 16];
        want.extend_from_slice(&[0, 99, 0, 0, 0, 0, 0, 7]); // api key, version, correlation id
        want.extend_from_slice(&[0, 3, b'o', b'p', b's']); // client id (nullable string, not compact)
        want.push(0); // no tagged fields
        want.extend_from_slice(&[0xAA, 0xBB]);
        assert_eq!(&f[..], &want[..]);
    }

    #[test]
    fn response_body_checks_correlation_and_skips_header() {
        // correlation id 7, empty tagged fields, body [1, 2]
        let frame = Bytes::from_static(&[0, 0, 0, 7, 0, 1, 2]);
        assert_eq!(&response_body(frame.clone(), 7, 1).unwrap()[..], &[1, 2]);
        assert_eq!(&response_body(frame.clone(), 7, 0).unwrap()[..], &[0, 1, 2]);
        assert_eq!(response_body(frame, 8, 1).unwrap_err().to_string(), "response has correlation id 7, expected 8");
        assert!(response_body(Bytes::from_static(&[0, 0]), 7, 1).is_err());
    }

    #[test]
    fn negotiation_requires_the_table_keys() {
        let table = MirrorApiTable::default();
        let needed = [MirrorApi::StartMirrorTopics, MirrorApi::DescribeClusterMirrors];
        let v = negotiate("mg:9094", &advertised(&[(18, 0, 4), (95, 0, 0), (99, 0, 3)]), &table, &needed).unwrap();
        assert_eq!(v[&MirrorApi::StartMirrorTopics], 0);
        assert_eq!(v[&MirrorApi::DescribeClusterMirrors], 0);

        let e = negotiate("mg:9094", &advertised(&[(18, 0, 4), (0, 0, 11)]), &table, &needed).unwrap_err();
        assert_eq!(
            e.to_string(),
            "mg:9094 does not serve the KIP-1279 mirror APIs (is it mirrorgate with an admin listener?); missing: \
             StartMirrorTopics (api key 95), DescribeClusterMirrors (api key 99)"
        );
        let e = negotiate("mg:9094", &advertised(&[(95, 1, 2), (99, 0, 0)]), &table, &needed).unwrap_err();
        assert_eq!(
            e.to_string(),
            "mg:9094 serves StartMirrorTopics (api key 95) at versions 1-2, but this tool speaks versions 0-0"
        );

        let moved = MirrorApiTable { start_mirror_topics: 1095, ..Default::default() };
        let e = negotiate("mg:9094", &advertised(&[(95, 0, 0), (99, 0, 0)]), &moved, &needed).unwrap_err();
        assert!(e.to_string().ends_with("missing: StartMirrorTopics (api key 1095)"), "{e}");
    }
}
