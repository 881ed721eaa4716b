//! 16-byte aligned heap blocks (arenas, owned tensors, loaded program bytes).

use alloc::vec;
use alloc::vec::Vec;

/// Alignment every buffer start gets; ExecuTorch plans and pads to 16.
pub const BUFFER_ALIGN: usize = 16;

#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
struct Chunk([u8; BUFFER_ALIGN]);

// SAFETY: Chunk is 16 plain bytes with no padding and no invalid bit patterns.
unsafe impl bytemuck::Zeroable for Chunk {}
// SAFETY: as above; repr(C) with a single [u8; 16] field, so size == align == 16 and no padding.
unsafe impl bytemuck::Pod for Chunk {}

/// A zero-initialised byte buffer whose start is 16-aligned.
#[derive(Clone, Default)]
pub struct AlignedBuf {
    chunks: Vec<Chunk>,
    len: usize,
}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf { chunks: vec![Chunk::default(); len.div_ceil(BUFFER_ALIGN)], len }
    }

    pub fn from_bytes(bytes: &[u8]) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(bytes.len());
        b.as_mut_slice().copy_from_slice(bytes);
        b
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.chunks)[..self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.chunks)[..self.len]
    }
}

impl core::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}
