//! Kafka's length-prefixed framing: every request and response is an `INT32` size followed by
//! that many bytes. The decoder checks the size against a cap *before* it buffers anything, so
//! a hostile length prefix (say 2 GiB) costs nothing but the four bytes that carried it.
//!
//! This module never touches a socket: it takes a `BytesMut` that an I/O loop fills and returns
//! whole frames as `Bytes` (zero-copy splits of that buffer).

use bytes::{Buf, Bytes, BytesMut};

/// Default cap on one frame, in bytes: 100 MiB, the broker's own `socket.request.max.bytes`.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;

/// Size of the length prefix, in bytes.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// Why a byte stream is not a valid sequence of Kafka frames. Each variant closes the
/// connection it came from; none of them is retryable on that connection.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// The length prefix is negative (a Kafka size is a non-negative `INT32`).
    #[error("negative frame length {0}")]
    NegativeLength(i32),
    /// The length prefix exceeds the configured cap (`max_frame_bytes`).
    #[error("frame length {length} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Length announced by the prefix, in bytes.
        length: usize,
        /// The cap in force, in bytes.
        max: usize,
    },
    /// The peer closed the stream in the middle of a frame.
    #[error("connection closed mid-frame: {received} of {expected} bytes received")]
    Truncated {
        /// Bytes of the frame (after the prefix) that did arrive.
        received: usize,
        /// Bytes the length prefix announced.
        expected: usize,
    },
    /// A frame too short to hold the header it must carry.
    #[error("frame of {0} bytes is too short for a Kafka header")]
    TooShort(usize),
}

/// Splits a byte stream into frames, enforcing a maximum frame size.
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    max_frame_bytes: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_BYTES)
    }
}

impl FrameDecoder {
    /// A decoder that refuses frames longer than `max_frame_bytes` (bytes, excluding the prefix).
    pub fn new(max_frame_bytes: usize) -> Self {
        Self { max_frame_bytes }
    }

    /// The cap in force, in bytes.
    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// Takes the next whole frame (without its length prefix) off the front of `buf`.
    ///
    /// Returns `Ok(None)` when more bytes are needed; in that case it reserves at most what the
    /// (already checked) length prefix announced, capped at 64 KiB per call. The proxy's reader
    /// (`proxy::connection::read_more`) then makes room for the whole frame, after a large
    /// request's memory permit has been granted.
    ///
    /// # Errors
    /// [`FrameError::NegativeLength`] or [`FrameError::TooLarge`] for a bad length prefix.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let Some(length) = self.peek_length(buf)? else {
            return Ok(None);
        };
        let total = LENGTH_PREFIX_BYTES + length;
        if buf.len() < total {
            buf.reserve((total - buf.len()).min(64 * 1024));
            return Ok(None);
        }
        buf.advance(LENGTH_PREFIX_BYTES);
        Ok(Some(buf.split_to(length).freeze()))
    }

    /// Reads and checks the length prefix at the front of `buf` without consuming it.
    ///
    /// # Errors
    /// As [`FrameDecoder::decode`].
    pub fn peek_length(&self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        if buf.len() < LENGTH_PREFIX_BYTES {
            return Ok(None);
        }
        let length = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if length < 0 {
            return Err(FrameError::NegativeLength(length));
        }
        let length = length as usize;
        if length > self.max_frame_bytes {
            return Err(FrameError::TooLarge { length, max: self.max_frame_bytes });
        }
        Ok(Some(length))
    }

    /// Called when the stream ended: `Ok(())` if it ended on a frame boundary.
    ///
    /// # Errors
    /// [`FrameError::Truncated`] if a partial frame is buffered, or a length-prefix error.
    pub fn check_eof(&self, buf: &[u8]) -> Result<(), FrameError> {
        if buf.is_empty() {
            return Ok(());
        }
        match self.peek_length(buf)? {
            None => Err(FrameError::Truncated { received: 0, expected: LENGTH_PREFIX_BYTES }),
            Some(expected) => Err(FrameError::Truncated { received: buf.len() - LENGTH_PREFIX_BYTES, expected }),
        }
    }
}

/// Writes the 4-byte length prefix for a frame of `len` bytes.
///
/// # Panics
/// Never for frames the decoder accepted; callers building frames keep them under `i32::MAX`.
pub fn length_prefix(len: usize) -> [u8; LENGTH_PREFIX_BYTES] {
    (i32::try_from(len).unwrap_or(i32::MAX)).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = length_prefix(body.len()).to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn splits_pipelined_frames_and_waits_for_partial_ones() {
        let d = FrameDecoder::new(1024);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&framed(b"hello"));
        buf.extend_from_slice(&framed(b"world!"));
        buf.extend_from_slice(&framed(b"partial")[..6]);
        assert_eq!(d.decode(&mut buf).unwrap().unwrap(), Bytes::from_static(b"hello"));
        assert_eq!(d.decode(&mut buf).unwrap().unwrap(), Bytes::from_static(b"world!"));
        assert_eq!(d.decode(&mut buf).unwrap(), None);
        assert_eq!(d.check_eof(&buf), Err(FrameError::Truncated { received: 2, expected: 7 }));
    }

    #[test]
    fn refuses_oversized_and_negative_prefixes_before_buffering() {
        let d = FrameDecoder::new(DEFAULT_MAX_FRAME_BYTES);
        let mut buf = BytesMut::from(&0x7fff_ffffu32.to_be_bytes()[..]);
        let cap_before = buf.capacity();
        assert_eq!(d.decode(&mut buf), Err(FrameError::TooLarge { length: 0x7fff_ffff, max: DEFAULT_MAX_FRAME_BYTES }));
        assert_eq!(buf.capacity(), cap_before, "no allocation for a refused frame");
        let mut buf = BytesMut::from(&(-5i32).to_be_bytes()[..]);
        assert_eq!(d.decode(&mut buf), Err(FrameError::NegativeLength(-5)));
    }

    #[test]
    fn empty_stream_and_frame_boundary_eof_are_clean() {
        let d = FrameDecoder::default();
        assert_eq!(d.check_eof(&[]), Ok(()));
        assert_eq!(d.check_eof(&[0, 0]), Err(FrameError::Truncated { received: 0, expected: 4 }));
    }
}
