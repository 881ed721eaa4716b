//! The `XH00` header in front of an XNNPACK payload.
//!
//! Layout (little-endian): 4 padding bytes, magic `XH00`, u16 header length, u32 flatbuffer
//! offset, u32 flatbuffer size, u32 constant-data offset, u64 constant-data size. A blob without
//! the magic at bytes 4..8 is a bare flatbuffer (older payloads) with no constant region.

use alloc::format;
use alloc::string::String;

pub const MAGIC: &[u8; 4] = b"XH00";
/// Bytes the header's fields occupy (the header length field may say more).
pub const MIN_HEADER_LEN: usize = 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XnnHeader {
    pub header_len: usize,
    pub flatbuffer_offset: usize,
    pub flatbuffer_size: usize,
    pub constant_offset: usize,
    pub constant_size: usize,
}

fn u16_at(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes([b[at], b[at + 1]]) as usize
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

impl XnnHeader {
    /// The header, if the blob has one (`None`: a bare flatbuffer).
    pub fn parse(blob: &[u8]) -> Result<Option<XnnHeader>, String> {
        if blob.len() < 8 || &blob[4..8] != MAGIC {
            return Ok(None);
        }
        if blob.len() < MIN_HEADER_LEN {
            return Err(format!("XNNPACK payload: XH00 header truncated ({} of {MIN_HEADER_LEN} bytes)", blob.len()));
        }
        let mut size = [0u8; 8];
        size.copy_from_slice(&blob[22..30]);
        let constant_size = u64::from_le_bytes(size);
        let h = XnnHeader {
            header_len: u16_at(blob, 8),
            flatbuffer_offset: u32_at(blob, 10),
            flatbuffer_size: u32_at(blob, 14),
            constant_offset: u32_at(blob, 18),
            constant_size: usize::try_from(constant_size).map_err(|_| format!("XNNPACK payload: constant-data size {constant_size} does not fit in memory"))?,
        };
        if h.header_len < MIN_HEADER_LEN {
            return Err(format!("XNNPACK payload: header length {} is shorter than the {MIN_HEADER_LEN} bytes of its fields", h.header_len));
        }
        Ok(Some(h))
    }
}

/// The flatbuffer and the constant-data region of a payload, checked against the blob's size.
pub fn split_payload(blob: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let Some(h) = XnnHeader::parse(blob)? else {
        return Ok((blob, &[]));
    };
    let region = |what: &str, off: usize, len: usize| {
        off.checked_add(len).and_then(|end| blob.get(off..end)).ok_or_else(|| {
            format!("XNNPACK payload: {what} (bytes {off}..{}) extends past the payload's {} bytes", off as u128 + len as u128, blob.len())
        })
    };
    if h.flatbuffer_offset < h.header_len.min(MIN_HEADER_LEN) {
        return Err(format!("XNNPACK payload: flatbuffer offset {} overlaps the header", h.flatbuffer_offset));
    }
    let fb = region("flatbuffer", h.flatbuffer_offset, h.flatbuffer_size)?;
    let constants = region("constant data", h.constant_offset, h.constant_size)?;
    Ok((fb, constants))
}
