//! DeleteClusterMirror (KIP-1279 §3.1; prototype api key 104, listeners broker + controller):
//! deletes a mirror that has no active or non-stopped topics. Schema: showuon/kafka
//! `clients/src/main/resources/common/message/DeleteClusterMirror{Request,Response}.json`
//! (validVersions 0, flexibleVersions 0+).

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes};
use kafka_protocol::protocol::StrBytes;

use super::codec::*;
use super::{MirrorMessage, WireError};

/// DeleteClusterMirrorRequest body, version 0.
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteClusterMirrorRequest {
    /// `MirrorName`: the cluster mirror to delete.
    pub mirror_name: StrBytes,
    /// `StateOffset` (default -1): the per-topic cluster-metadata offset at which the broker
    /// validated the partition-state preconditions; -1 skips validation. A mismatch is
    /// `INVALID_CLUSTER_MIRROR_STATES` (145).
    pub state_offset: i64,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl Default for DeleteClusterMirrorRequest {
    fn default() -> Self {
        Self { mirror_name: StrBytes::default(), state_offset: -1, unknown_tagged_fields: BTreeMap::new() }
    }
}

/// DeleteClusterMirrorResponse body, version 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeleteClusterMirrorResponse {
    /// `ThrottleTimeMs`: how long the request was throttled for a quota, in ms (0 if not).
    pub throttle_time_ms: i32,
    /// `ErrorCode`: 0, or e.g. `UNKNOWN_CLUSTER_MIRROR` (137), `CLUSTER_MIRROR_NOT_EMPTY`
    /// (143), `CLUSTER_MIRROR_AUTHORIZATION_FAILED` (144), `INVALID_CLUSTER_MIRROR_STATES` (145).
    pub error_code: i16,
    /// `ErrorMessage`: the error message, or null if there was no error.
    pub error_message: Option<StrBytes>,
    /// Tagged fields this version does not know, kept for re-encoding.
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl DeleteClusterMirrorRequest {
    fn read<B: Buf>(buf: &mut B) -> Result<Self, WireError> {
        Ok(Self {
            mirror_name: get_compact_string(buf, "MirrorName")?,
            state_offset: get_i64(buf, "StateOffset")?,
            unknown_tagged_fields: get_tagged_fields(buf, Self::NAME, |_, _| Ok(false))?,
        })
    }

    fn write<B: BufMut>(&self, buf: &mut B) -> Result<(), WireError> {
        put_compact_string(buf, &self.mirror_name, "MirrorName")?;
        buf.put_i64(self.state_offset);
        put_tagged_fields(buf, &[], &self.unknown_tagged_fields, Self::NAME)
    }
}

impl DeleteClusterMirrorResponse {
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

mirror_message!(DeleteClusterMirrorRequest, "DeleteClusterMirrorRequest", DeleteClusterMirror, request);
mirror_message!(DeleteClusterMirrorResponse, "DeleteClusterMirrorResponse", DeleteClusterMirror, response);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mirror::testutil::*;

    fn request() -> DeleteClusterMirrorRequest {
        DeleteClusterMirrorRequest {
            mirror_name: StrBytes::from_static_str("a-to-b"),
            state_offset: 1234,
            unknown_tagged_fields: unknown_tag(),
        }
    }

    fn response() -> DeleteClusterMirrorResponse {
        DeleteClusterMirrorResponse {
            throttle_time_ms: 0,
            error_code: 143,
            error_message: Some(StrBytes::from_static_str("not empty")),
            unknown_tagged_fields: unknown_tag(),
        }
    }

    #[test]
    fn round_trips() {
        round_trip_all_versions(&request());
        round_trip_all_versions(&DeleteClusterMirrorRequest::default());
        round_trip_all_versions(&response());
        round_trip_all_versions(&DeleteClusterMirrorResponse::default());
    }

    #[test]
    fn default_state_offset_skips_validation() {
        assert_eq!(DeleteClusterMirrorRequest::default().state_offset, -1);
        let bytes = encode(&DeleteClusterMirrorRequest::default(), 0);
        assert_eq!(bytes, vec![1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0]);
    }

    #[test]
    fn hostile_input_is_an_error() {
        truncations_fail::<DeleteClusterMirrorRequest>(&request());
        truncations_fail::<DeleteClusterMirrorResponse>(&response());
        mutations_never_panic::<DeleteClusterMirrorRequest>(&request());
        mutations_never_panic::<DeleteClusterMirrorResponse>(&response());
        // A tagged-field count of u32::MAX - 1 after the fixed fields.
        huge_count_fails::<DeleteClusterMirrorRequest>(&[2, b'm', 0, 0, 0, 0, 0, 0, 0, 0]);
    }
}
