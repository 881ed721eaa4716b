//! Aligned heap blocks (arenas, owned tensors, loaded program bytes).

use alloc::vec;
use alloc::vec::Vec;

/// Buffers are allocated in u128 units: 16-byte aligned on x86-64 and AArch64 (ExecuTorch
/// plans and pads to 16), 8 on 32-bit Arm, enough for every element type.
type Chunk = u128;
const CHUNK: usize = core::mem::size_of::<Chunk>();

/// A zero-initialised byte buffer with an aligned start.
#[derive(Clone, Default)]
pub struct AlignedBuf {
    chunks: Vec<Chunk>,
    len: usize,
}

impl AlignedBuf {
    /// Panics (aborts) if memory runs out; see [`AlignedBuf::try_zeroed`].
    pub fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf { chunks: vec![0; len.div_ceil(CHUNK)], len }
    }

    /// None when the allocator refuses `len` bytes (a hostile size in a program, say).
    pub fn try_zeroed(len: usize) -> Option<AlignedBuf> {
        let n = len.div_ceil(CHUNK);
        // Probe first: `vec!` of zeros uses calloc (no page touching) but aborts on failure.
        let mut probe: Vec<Chunk> = Vec::new();
        probe.try_reserve_exact(n).ok()?;
        drop(probe);
        Some(AlignedBuf { chunks: vec![0; n], len })
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
