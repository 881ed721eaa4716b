//! Strided byte gathers: a tensor's element strides from its dim order, a view (sizes, strides,
//! start) copied element by element as bytes, so every dtype works. Shared by the shape, copy,
//! pad and rearrange kernels.

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelResult, TensorMut, TensorRef};
use rbuild_runtime::kerr;

use super::util::for_each_broadcast;


/// Element strides of a tensor of `sizes` stored in dim order `order` (outermost first).
/// A missing or mismatched order is treated as contiguous.
pub(super) fn dim_order_strides(sizes: &[usize], order: &[u8]) -> Vec<usize> {
    let rank = sizes.len();
    let mut strides = vec![0usize; rank];
    let mut acc = 1usize;
    if order.len() == rank {
        for &d in order.iter().rev() {
            strides[d as usize] = acc;
            acc = acc.saturating_mul(sizes[d as usize]);
        }
    } else {
        for d in (0..rank).rev() {
            strides[d] = acc;
            acc = acc.saturating_mul(sizes[d]);
        }
    }
    strides
}

/// Logical element strides of an input tensor (honouring its dim order).
pub(super) fn strides_of(t: &TensorRef<'_>) -> Vec<usize> {
    dim_order_strides(t.sizes(), t.dim_order.as_slice())
}

/// Drops size-1 dims and merges dims that are contiguous with each other in the source, so the
/// gather loops over as few, as long runs as possible.
fn coalesce(sizes: &[usize], strides: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut sz: Vec<usize> = Vec::with_capacity(sizes.len());
    let mut st: Vec<usize> = Vec::with_capacity(sizes.len());
    for (&s, &t) in sizes.iter().zip(strides) {
        if s == 1 {
            continue;
        }
        match (sz.last_mut(), st.last_mut()) {
            (Some(ps), Some(pt)) if *pt == t * s => {
                *ps *= s;
                *pt = t;
            }
            _ => {
                sz.push(s);
                st.push(t);
            }
        }
    }
    (sz, st)
}

/// Fills the contiguous `dst` with the view of `src` given by `sizes` and element `strides`.
fn gather<T: Copy>(src: &[T], dst: &mut [T], sizes: &[usize], strides: &[usize]) -> KernelResult {
    let n: usize = sizes.iter().product();
    if n == 0 {
        return Ok(());
    }
    if dst.len() < n {
        return Err(kerr!("output holds {} elements but the copy needs {n}", dst.len()));
    }
    let (sz, st) = coalesce(sizes, strides);
    // The largest source offset the view touches; everything below is then in bounds.
    let max_off: usize = sz.iter().zip(&st).map(|(&s, &t)| (s - 1) * t).sum();
    if max_off >= src.len() {
        return Err(kerr!("view of sizes {sizes:?} strides {strides:?} exceeds its source of {} elements", src.len()));
    }
    let rank = sz.len();
    if rank == 0 {
        dst[0] = src[0];
        return Ok(());
    }
    // A plain 2-D-tail transpose (inner dim strided, the one before it unit-stride) reads
    // column-wise; tiling keeps both sides cache-friendly (weight transposes in linear layers).
    if rank >= 2 && st[rank - 1] != 1 && st[rank - 2] == 1 {
        let (rows, cols) = (sz[rank - 2], sz[rank - 1]);
        let cs = st[rank - 1];
        for_each_broadcast(&sz[..rank - 2], [&st[..rank - 2]], |o, [off]| {
            let d = &mut dst[o * rows * cols..(o + 1) * rows * cols];
            const TILE: usize = 32;
            for r0 in (0..rows).step_by(TILE) {
                for c0 in (0..cols).step_by(TILE) {
                    for r in r0..(r0 + TILE).min(rows) {
                        for c in c0..(c0 + TILE).min(cols) {
                            d[r * cols + c] = src[off + r + c * cs];
                        }
                    }
                }
            }
        });
        return Ok(());
    }
    let inner = sz[rank - 1];
    let ist = st[rank - 1];
    for_each_broadcast(&sz[..rank - 1], [&st[..rank - 1]], |o, [off]| {
        let d = &mut dst[o * inner..(o + 1) * inner];
        if ist == 1 {
            d.copy_from_slice(&src[off..off + inner]);
        } else {
            for (k, x) in d.iter_mut().enumerate() {
                *x = src[off + k * ist];
            }
        }
    });
    Ok(())
}

/// Byte-level gather of elements of `esize` bytes: uses a word type when the buffers allow it,
/// else treats each element as `esize` contiguous bytes.
pub(super) fn gather_bytes(src: &[u8], dst: &mut [u8], esize: usize, sizes: &[usize], strides: &[usize]) -> KernelResult {
    fn typed<T: bytemuck::Pod>(src: &[u8], dst: &mut [u8], sizes: &[usize], strides: &[usize]) -> Option<KernelResult> {
        let s = bytemuck::try_cast_slice::<u8, T>(src).ok()?;
        let d = bytemuck::try_cast_slice_mut::<u8, T>(dst).ok()?;
        Some(gather(s, d, sizes, strides))
    }
    let r = match esize {
        1 => Some(gather(src, dst, sizes, strides)),
        2 => typed::<u16>(src, dst, sizes, strides),
        4 => typed::<u32>(src, dst, sizes, strides),
        8 => typed::<u64>(src, dst, sizes, strides),
        _ => None,
    };
    if let Some(r) = r {
        return r;
    }
    let mut bsizes = sizes.to_vec();
    bsizes.push(esize);
    let mut bstrides: Vec<usize> = strides.iter().map(|&s| s * esize).collect();
    bstrides.push(1);
    gather(src, dst, &bsizes, &bstrides)
}

/// Writes the view (`sizes`, `strides`, element offset `base`) of `src` into `out`, resizing it
/// to `sizes` and laying the data out in `out`'s dim order. Dtypes must match.
pub(super) fn write_view(src: &TensorRef<'_>, out: &mut TensorMut<'_>, sizes: &[usize], strides: &[usize], base: usize) -> KernelResult {
    if src.dtype != out.dtype {
        return Err(kerr!("input dtype {} differs from output dtype {}", src.dtype, out.dtype));
    }
    out.resize(sizes)?;
    let esize = out.dtype.size();
    let (psizes, pstrides) = physical_view(sizes, strides, out.dim_order.as_slice());
    let bytes = src.bytes();
    let start = base.checked_mul(esize).filter(|&b| b <= bytes.len()).ok_or_else(|| kerr!("view offset {base} is out of range"))?;
    gather_bytes(&bytes[start..], out.bytes_mut(), esize, &psizes, &pstrides)
}

/// Reorders logical `sizes`/`strides` into the physical (storage) order of an output with dim
/// order `order`, so that a contiguous gather fills it.
pub(super) fn physical_view(sizes: &[usize], strides: &[usize], order: &[u8]) -> (Vec<usize>, Vec<usize>) {
    if order.len() != sizes.len() || order.iter().enumerate().all(|(i, &o)| i == o as usize) {
        return (sizes.to_vec(), strides.to_vec());
    }
    order.iter().map(|&d| (sizes[d as usize], strides[d as usize])).unzip()
}

pub(super) fn check_dtype(inp: &TensorRef<'_>, out: &TensorMut<'_>) -> KernelResult {
    if inp.dtype != out.dtype {
        return Err(kerr!("input dtype {} differs from output dtype {}", inp.dtype, out.dtype));
    }
    Ok(())
}

pub(super) fn require_contiguous_out(out: &TensorMut<'_>, what: &str) -> KernelResult {
    if out.dim_order.is_contiguous() {
        Ok(())
    } else {
        Err(kerr!("{what}: output dim order {:?} is not supported (contiguous only)", out.dim_order))
    }
}
