//! CreateClusterMirror (KIP-1279 §3.1; prototype api key 94, listeners broker + controller):
//! creates a named cluster mirror on the destination and stores its configs as a
//! `CLUSTER_MIRROR` config resource. Schema: showuon/kafka
//! `clients/src/main/resources/common/message/CreateClusterMirror{Request,Response}.json`
//! (validVersions 0, flexibleVersions 0+).

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::protocol::StrBytes;

use super::codec::*;
use super::{MirrorMessage, WireError};

/// CreateClusterMirrorRequest body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CreateClusterMirrorRequest {
    /// `MirrorName`: the cluster mirror name (KIP naming rules: 1–249 chars of
    /// `[a-zA-Z0-9._-]`, not `.`/`..`; violations are `INVALID_CLUSTER_MIRROR_NAME`).
    pub mirror_name: StrBytes,
    /// `Config`: the mirror's configs (`bootstrap.servers` is required by the broker, plus
    /// `topics.include`/`topics.exclude`, `sasl.*`, `ssl.*`, …). `mapKey` on `Name` in the
    /// prototype; kept as a list so the wire order round-trips.
    pub config: Vec<ClusterMirrorConfig>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

/// One `Config` entry of [`CreateClusterMirrorRequest`]. `Debug` hides the value of a key
/// that names a secret ([`crate::secret::is_secret_key`]: passwords, JAAS lines, keys).
#[derive(Clone, PartialEq, Default)]
pub struct ClusterMirrorConfig {
    /// `Name`: the configuration key name.
    pub name: StrBytes,
    /// `Value`: the value to set for the key (nullable).
    pub value: Option<StrBytes>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl std::fmt::Debug for ClusterMirrorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = crate::secret::is_secret_key(&self.name);
        f.debug_struct("ClusterMirrorConfig")
            .field("name", &self.name)
            .field("value", &self.value.as_ref().map(|v| if secret { crate::secret::HIDDEN } else { v.as_str() }))
            .field("unknown_tagged_fields", &self.unknown_tagged_fields)
            .finish()
    }
}

/// CreateClusterMirrorResponse body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CreateClusterMirrorResponse {
    /// `ThrottleTimeMs`: how long the request was throttled for a quota, in ms (0 if not).
    pub throttle_time_ms: i32,
    /// `ErrorCode`: 0, or e.g. `CLUSTER_MIRROR_ALREADY_EXISTS` (136),
    /// `INVALID_CLUSTER_MIRROR_NAME` (135), `INVALID_CONFIG` (40),
    /// `CLUSTER_MIRROR_AUTHORIZATION_FAILED` (144).
    pub error_code: i16,
    /// `ErrorMessage`: the error message, or null if there was no error.
    pub error_message: Option<StrBytes>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl ClusterMirrorConfig {
    /// Smallest encoding: two one-byte strings and an empty tag section.
    const MIN_BYTES: usize = 3;

    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            name: get_compact_string(buf, "Config.Name")?,
            value: get_compact_nullable_string(buf, "Config.Value")?,
            unknown_tagged_fields: get_tagged_fields(buf, "Config", |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.name, "Config.Name")?;
        put_compact_nullable_string(buf, self.value.as_deref(), "Config.Value")?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, "Config")
    }
}

impl CreateClusterMirrorRequest {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            mirror_name: get_compact_string(buf, "MirrorName")?,
            config: get_compact_array(buf, ClusterMirrorConfig::MIN_BYTES, "Config", ClusterMirrorConfig::read)?,
            unknown_tagged_fields: get_tagged_fields(buf, Self::NAME, |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.mirror_name, "MirrorName")?;
        put_compact_array(buf, &self.config, "Config", |b, c| c.write(b))?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, Self::NAME)
    }
}

impl CreateClusterMirrorResponse {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            throttle_time_ms: get_i32(buf, "ThrottleTimeMs")?,
            error_code: get_i16(buf, "ErrorCode")?,
            error_message: get_compact_nullable_string(buf, "ErrorMessage")?,
            unknown_tagged_fields: get_tagged_fields(buf, Self::NAME, |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        put_compact_nullable_string(buf, self.error_message.as_deref(), "ErrorMessage")?;
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, Self::NAME)
    }
}

mirror_message!(CreateClusterMirrorRequest, "CreateClusterMirrorRequest", CreateClusterMirror, request);
mirror_message!(CreateClusterMirrorResponse, "CreateClusterMirrorResponse", CreateClusterMirror, response);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mirror::testutil::*;

    fn request() -> CreateClusterMirrorRequest {
        CreateClusterMirrorRequest {
            mirror_name: StrBytes::from_static_str("a-to-b"),
            config: vec![
                ClusterMirrorConfig {
                    name: StrBytes::from_static_str("bootstrap.servers"),
                    value: Some(StrBytes::from_static_str("src:9092")),
                    unknown_tagged_fields: unknown_tag(),
                },
                ClusterMirrorConfig {
                    name: StrBytes::from_static_str("topics.include"),
                    value: None,
                    ..Default::default()
                },
            ],
            unknown_tagged_fields: unknown_tag(),
        }
    }

    fn response() -> CreateClusterMirrorResponse {
        CreateClusterMirrorResponse {
            throttle_time_ms: 7,
            error_code: 136,
            error_message: Some(StrBytes::from_static_str("The cluster mirror already exists.")),
            unknown_tagged_fields: unknown_tag(),
        }
    }

    #[test]
    fn round_trips() {
        round_trip_all_versions(&request());
        round_trip_all_versions(&CreateClusterMirrorRequest::default());
        round_trip_all_versions(&response());
        round_trip_all_versions(&CreateClusterMirrorResponse::default());
    }

    #[test]
    fn debug_hides_secret_config_values() {
        let mut req = request();
        req.config.push(ClusterMirrorConfig {
            name: StrBytes::from_static_str("sasl.jaas.config"),
            value: Some(StrBytes::from_static_str("PlainLoginModule required username=\"u\" password=\"pw-wire-1\";")),
            ..Default::default()
        });
        let shown = format!("{req:?}");
        assert!(shown.contains("src:9092") && shown.contains("[hidden]") && !shown.contains("pw-wire-1"), "{shown}");
    }

    #[test]
    fn min_bytes_match_the_smallest_encoding() {
        let mut v = Vec::new();
        ClusterMirrorConfig::default().write(&mut v).unwrap();
        assert_eq!(v.len(), ClusterMirrorConfig::MIN_BYTES);
    }

    #[test]
    fn golden_request_bytes() {
        let req = CreateClusterMirrorRequest {
            mirror_name: StrBytes::from_static_str("m"),
            config: vec![ClusterMirrorConfig {
                name: StrBytes::from_static_str("k"),
                value: None,
                ..Default::default()
            }],
            ..Default::default()
        };
        // "m" | 1 entry | "k" | null | no tags | no tags
        assert_eq!(encode(&req, 0), vec![2, b'm', 2, 2, b'k', 0, 0, 0]);
    }

    #[test]
    fn hostile_input_is_an_error() {
        truncations_fail::<CreateClusterMirrorRequest>(&request());
        truncations_fail::<CreateClusterMirrorResponse>(&response());
        mutations_never_panic::<CreateClusterMirrorRequest>(&request());
        mutations_never_panic::<CreateClusterMirrorResponse>(&response());
        // MirrorName "m", then a Config count of u32::MAX - 1.
        huge_count_fails::<CreateClusterMirrorRequest>(&[2, b'm']);
    }
}
