//! A cursor over one Kafka response body, shared by the validating response walks
//! ([`super::fetch_scan`], [`super::produce_response_scan`]): every length and count is checked
//! against the bytes left before anything is read or reserved, strings are borrowed and UTF-8
//! checked, and tagged-field sections are walked with the tags the caller knows checked for
//! their exact size. Never panics, never allocates.

use std::ops::Range;

use super::mirror::codec;
use super::mirror::WireError;
use super::scan::{string_len, ScanError};

/// A cursor over one body; `rest` is always a suffix of the `len` bytes walked. `total` is
/// the body's whole length: `len` itself, or more when only a prefix of the body has arrived
/// ([`super::fetch_scan::fetch_response_prefix`]); counts are checked against what the whole body has left.
pub(crate) struct Cursor<'a> {
    rest: &'a [u8],
    len: usize,
    total: usize,
    flexible: bool,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8], flexible: bool) -> Self {
        Self { rest: bytes, len: bytes.len(), total: bytes.len(), flexible }
    }

    /// The body's whole length is `total` bytes, of which the cursor holds the first ones.
    pub(crate) fn set_total(&mut self, total: usize) {
        self.total = total.max(self.len);
    }

    /// The body's whole length.
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    pub(crate) fn pos(&self) -> usize {
        self.len - self.rest.len()
    }

    /// Bytes the whole body has left after the cursor (those arrived and those to come).
    pub(crate) fn remaining(&self) -> usize {
        self.total.saturating_sub(self.pos())
    }

    pub(crate) fn skip(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ScanError> {
        if self.rest.len() < n {
            return Err(WireError::Truncated { what, needed: n, remaining: self.rest.len() }.into());
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, ScanError> {
        Ok(codec::get_i32(&mut self.rest, what)?)
    }

    pub(crate) fn i16(&mut self, what: &'static str) -> Result<i16, ScanError> {
        Ok(codec::get_i16(&mut self.rest, what)?)
    }

    pub(crate) fn uvarint(&mut self, what: &'static str) -> Result<u32, ScanError> {
        Ok(codec::get_uvarint(&mut self.rest, what)?)
    }

    /// A string (compact when flexible), UTF-8 checked, borrowed; `None` for null.
    pub(crate) fn str(&mut self, what: &'static str) -> Result<Option<&'a str>, ScanError> {
        let Some(len) = string_len(&mut self.rest, self.flexible, what)? else { return Ok(None) };
        let raw = self.skip(len, what)?;
        std::str::from_utf8(raw).map(Some).map_err(|_| WireError::InvalidUtf8 { what }.into())
    }

    /// A nullable length (compact when flexible: `n + 1`, 0 for null; else `i32`, -1 for null).
    pub(crate) fn nullable_len(&mut self, what: &'static str) -> Result<Option<usize>, ScanError> {
        if self.flexible {
            return Ok(match self.uvarint(what)? {
                0 => None,
                n => Some((n - 1) as usize),
            });
        }
        match self.i32(what)? {
            -1 => Ok(None),
            n if n < -1 => Err(ScanError::NegativeLength { what, len: n }),
            n => Ok(Some(n as usize)),
        }
    }

    /// A nullable array's count (compact when flexible), refused unless `count × min_elem`
    /// bytes remain.
    pub(crate) fn nullable_array_len(
        &mut self,
        min_elem: usize,
        what: &'static str,
    ) -> Result<Option<usize>, ScanError> {
        let Some(count) = self.nullable_len(what)? else { return Ok(None) };
        if count.saturating_mul(min_elem.max(1)) > self.remaining() {
            return Err(WireError::CountExceedsRemaining { what, count, remaining: self.remaining() }.into());
        }
        Ok(Some(count))
    }

    pub(crate) fn array_len(&mut self, min_elem: usize, what: &'static str) -> Result<usize, ScanError> {
        Ok(self.nullable_array_len(min_elem, what)?.ok_or(WireError::UnexpectedNull { what })?)
    }

    /// Nullable `bytes` (compact when flexible): the byte range of the payload, `None` for null.
    /// `at_length` is told the range once the length has been read, before the payload is.
    pub(crate) fn nullable_bytes(
        &mut self,
        what: &'static str,
        at_length: impl FnOnce(&Range<usize>),
    ) -> Result<Option<Range<usize>>, ScanError> {
        let Some(len) = self.nullable_len(what)? else { return Ok(None) };
        let start = self.pos();
        at_length(&(start..start.saturating_add(len)));
        self.skip(len, what)?;
        Ok(Some(start..start + len))
    }

    /// A tagged-field section (flexible only): each field's tag and value are handed to
    /// `field`, which checks the tags it knows and ignores the others (opaque).
    pub(crate) fn tagged_fields(
        &mut self,
        what: &'static str,
        mut field: impl FnMut(u32, &'a [u8]) -> Result<(), ScanError>,
    ) -> Result<(), ScanError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint(what)? as usize;
        // Each field takes at least two bytes: its tag and its size.
        if count.saturating_mul(2) > self.remaining() {
            return Err(WireError::CountExceedsRemaining { what, count, remaining: self.remaining() }.into());
        }
        for _ in 0..count {
            let tag = self.uvarint(what)?;
            if i32::try_from(tag).is_err() {
                return Err(WireError::InvalidTag { what, tag }.into());
            }
            let size = self.uvarint(what)? as usize;
            let value = self.skip(size, what)?;
            field(tag, value)?;
        }
        Ok(())
    }

    /// A tagged-field section with no known field.
    pub(crate) fn opaque_tagged_fields(&mut self, what: &'static str) -> Result<(), ScanError> {
        self.tagged_fields(what, |_, _| Ok(()))
    }

    /// Requires every byte to have been read.
    pub(crate) fn end(&self, what: &'static str) -> Result<(), ScanError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(WireError::TrailingBytes { what, remaining: self.rest.len() }.into())
        }
    }
}

/// Walks a flexible tagged struct `value` made of `fixed` bytes of fixed-width fields and
/// its own tagged fields, which must end exactly at the end of `value`.
pub(crate) fn fixed_tagged_struct(value: &[u8], fixed: usize, what: &'static str) -> Result<(), ScanError> {
    let mut c = Cursor::new(value, true);
    c.skip(fixed, what)?;
    c.opaque_tagged_fields(what)?;
    c.end(what)
}

/// Walks the `node_endpoints` tagged field (a compact array of `NodeEndpoint`: `node_id`,
/// `host`, `port`, `rack`, tagged fields) filling exactly `value`; whether it has an entry.
pub(crate) fn node_endpoints(value: &[u8]) -> Result<bool, ScanError> {
    const WHAT: &str = "node_endpoints";
    let mut c = Cursor::new(value, true);
    // node_id, host (≥ 1), port, rack (≥ 1), tags (≥ 1)
    let n = c.array_len(4 + 1 + 4 + 1 + 1, WHAT)?;
    for _ in 0..n {
        c.skip(4, "node_endpoints.node_id")?;
        c.str("node_endpoints.host")?.ok_or(WireError::UnexpectedNull { what: "node_endpoints.host" })?;
        c.skip(4, "node_endpoints.port")?;
        c.str("node_endpoints.rack")?;
        c.opaque_tagged_fields(WHAT)?;
    }
    c.end(WHAT)?;
    Ok(n > 0)
}
