//! The error every mirror-message decoder and encoder returns. Decoding hostile bytes yields one
//! of these, never a panic; the caller decides whether to answer with a Kafka error code or to
//! close the connection.

use thiserror::Error;

/// Why a mirror RPC body could not be decoded or encoded.
///
/// `what` names the field (in the prototype's JSON spelling) that was being read or written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The body ended before `what` was complete.
    #[error("truncated {what}: needed {needed} bytes, {remaining} remain")]
    Truncated {
        /// Field being read.
        what: &'static str,
        /// Bytes the field needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// An unsigned varint ran past 5 bytes or past 32 bits.
    #[error("malformed varint in {what}")]
    VarIntTooLong {
        /// Field being read.
        what: &'static str,
    },
    /// A string longer than Kafka's limit of 32767 bytes.
    #[error("{what}: string of {len} bytes exceeds 32767")]
    StringTooLong {
        /// Field being read or written.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// A string field is not valid UTF-8.
    #[error("{what}: invalid UTF-8")]
    InvalidUtf8 {
        /// Field being read.
        what: &'static str,
    },
    /// A null where the schema does not allow one (non-nullable string or array).
    #[error("{what}: null in a non-nullable field")]
    UnexpectedNull {
        /// Field being read.
        what: &'static str,
    },
    /// An array or tagged-field count larger than the remaining bytes could hold; refused
    /// before anything is allocated.
    #[error("{what}: count {count} exceeds the {remaining} bytes that remain")]
    CountExceedsRemaining {
        /// Field being read.
        what: &'static str,
        /// Element count read from the wire.
        count: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// An array or tagged field too large to encode (more than `u32::MAX - 1` elements/bytes).
    #[error("{what}: {count} is too large to encode")]
    CountTooLarge {
        /// Field being written.
        what: &'static str,
        /// Its element count or byte length.
        count: usize,
    },
    /// A tag that does not fit Kafka's non-negative `int32` tag space.
    #[error("{what}: invalid tag {tag}")]
    InvalidTag {
        /// Tagged-field section being read or written.
        what: &'static str,
        /// The tag.
        tag: u32,
    },
    /// The same tag would be written twice (a known tagged field that is also present in
    /// `unknown_tagged_fields`).
    #[error("{what}: tag {tag} written twice")]
    DuplicateTag {
        /// Tagged-field section being written.
        what: &'static str,
        /// The tag.
        tag: u32,
    },
    /// Bytes left over after a known tagged field's value or after a whole body.
    #[error("{what}: {remaining} trailing bytes")]
    TrailingBytes {
        /// Field or message being read.
        what: &'static str,
        /// Bytes left over.
        remaining: usize,
    },
    /// The api version is outside the range this codec supports for the message (all mirror
    /// RPCs: 0 only). Brokers answer this with `UNSUPPORTED_VERSION` (35).
    #[error("{message} does not support version {version}")]
    UnsupportedVersion {
        /// Message name, e.g. `CreateClusterMirrorRequest`.
        message: &'static str,
        /// The requested version.
        version: i16,
    },
}
