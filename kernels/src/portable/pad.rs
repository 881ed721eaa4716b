//! Padding: `constant_pad_nd` (negative pads crop) and the reflection / replication pads over
//! the last 1, 2 or 3 dims, batched or not. Every dtype: elements are moved as bytes.

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::kerr;

use super::fill::{fill_with, scalar_bytes};
use super::rearrange::{copy_strided, write_tables, View};
use super::shape::{check_dtype, dim_order_strides, strides_of};

rbuild_runtime::kernel_table! {
    "aten::constant_pad_nd.out" => constant_pad_nd_out,
    "aten::reflection_pad1d.out" => reflection_pad1d_out,
    "aten::reflection_pad2d.out" => reflection_pad2d_out,
    "aten::reflection_pad3d.out" => reflection_pad3d_out,
    "aten::replication_pad1d.out" => replication_pad1d_out,
    "aten::replication_pad2d.out" => replication_pad2d_out,
    "aten::replication_pad3d.out" => replication_pad3d_out,
}

/// `constant_pad_nd.out(Tensor self, SymInt[] pad, Scalar value=0, *, Tensor(a!) out)`: args =
/// [self, pad, value, out, out]. `pad` holds (before, after) pairs starting from the last dim;
/// negative entries remove elements.
pub fn constant_pad_nd_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let pad = args.int_list(1)?;
    let value = args.scalar(2)?;
    let mut out = args.out(3)?;
    check_dtype(&inp, &out)?;
    let rank = inp.dim();
    if pad.len() % 2 != 0 {
        return Err(kerr!("constant_pad_nd: pad {pad:?} must have an even length"));
    }
    if pad.len() / 2 > rank {
        return Err(kerr!("constant_pad_nd: pad {pad:?} covers more than the input's {rank} dims"));
    }
    // Per dim: the output size, and where the kept input range starts in the input / output.
    let in_sizes = inp.sizes();
    let mut out_sizes = in_sizes.to_vec();
    let mut in_start = alloc::vec![0usize; rank];
    let mut out_start = alloc::vec![0usize; rank];
    let mut kept = in_sizes.to_vec();
    for (i, pair) in pad.chunks_exact(2).enumerate() {
        let d = rank - 1 - i;
        let (before, after) = (pair[0], pair[1]);
        let n = in_sizes[d] as i64;
        let size = n.checked_add(before).and_then(|s| s.checked_add(after)).filter(|&s| s >= 0).ok_or_else(|| {
            kerr!("constant_pad_nd: pad ({before}, {after}) on dim {d} of size {n} gives a negative output size")
        })?;
        out_sizes[d] = usize::try_from(size).map_err(|_| kerr!("constant_pad_nd: output size {size} is too large"))?;
        // The input range [lo, hi) survives, placed at max(before, 0) in the output.
        let lo = before.saturating_neg().clamp(0, n);
        let hi = (n + after.min(0)).max(lo);
        in_start[d] = lo as usize;
        out_start[d] = before.max(0) as usize;
        kept[d] = (hi - lo) as usize;
    }
    let elem = scalar_bytes(out.dtype, value, "constant_pad_nd")?;
    out.resize(&out_sizes)?;
    fill_with(out.bytes_mut(), &elem);
    if kept.contains(&0) {
        return Ok(());
    }
    let in_strides = strides_of(&inp);
    let out_strides = dim_order_strides(&out_sizes, out.dim_order.as_slice());
    let from = View { base: (0..rank).map(|d| in_start[d] * in_strides[d]).sum(), strides: &in_strides };
    let to = View { base: (0..rank).map(|d| out_start[d] * out_strides[d]).sum(), strides: &out_strides };
    let esize = out.dtype.size();
    copy_strided(inp.bytes(), from, out.bytes_mut(), to, &kept, esize)
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Reflect,
    Replicate,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Reflect => "reflection_pad",
            Mode::Replicate => "replication_pad",
        }
    }

    /// The input index read by output index `j` along a dim of `size` padded by `before`
    /// (negative `before` crops): mirrored without repeating the edge, or clamped to it.
    fn source(self, j: i64, size: i64, before: i64) -> i64 {
        match self {
            Mode::Replicate => j.saturating_sub(before).clamp(0, size - 1),
            Mode::Reflect if j < before => before - j,
            Mode::Reflect if j < size + before => j - before,
            Mode::Reflect => 2 * size + before - j - 2,
        }
    }
}

/// Pads the last `n` dims of a rank n+1 (unbatched) or n+2 (batched) input; args =
/// [self, padding (2n entries, last dim first), out, out].
fn pad_nd(args: &KernelArgs<'_>, n: usize, mode: Mode) -> KernelResult {
    let name = mode.name();
    let inp = args.tensor(0)?;
    let pad = args.int_list(1)?;
    let mut out = args.out(2)?;
    check_dtype(&inp, &out)?;
    let rank = inp.dim();
    if pad.len() != 2 * n {
        return Err(kerr!("{name}{n}d: padding {pad:?} must have {} entries", 2 * n));
    }
    if rank != n + 1 && rank != n + 2 {
        return Err(kerr!("{name}{n}d: input of shape {:?} must have {} or {} dims", inp.sizes(), n + 1, n + 2));
    }
    // Only a batch dim may be empty (PyTorch's rule).
    let first_nonbatch = rank - n - 1;
    if inp.sizes()[first_nonbatch..].contains(&0) {
        return Err(kerr!("{name}{n}d: input of shape {:?} may only have an empty batch dim", inp.sizes()));
    }
    let mut sizes = inp.sizes().to_vec();
    for i in 0..n {
        let d = rank - 1 - i;
        let (before, after) = (pad[2 * i], pad[2 * i + 1]);
        let size = inp.sizes()[d] as i64;
        if mode == Mode::Reflect && (before >= size || after >= size) {
            return Err(kerr!(
                "{name}{n}d: padding ({before}, {after}) must be smaller than dim {d} of size {size}"
            ));
        }
        let padded = size.checked_add(before).and_then(|s| s.checked_add(after)).filter(|&s| s >= 1);
        let padded = padded.ok_or_else(|| kerr!("{name}{n}d: padding ({before}, {after}) leaves dim {d} of size {size} empty"))?;
        sizes[d] = usize::try_from(padded).map_err(|_| kerr!("{name}{n}d: output size {padded} is too large"))?;
    }
    // Resizing first bounds the tables by the output's capacity.
    out.resize(&sizes)?;
    let strides = strides_of(&inp);
    let mut tables: Vec<Vec<usize>> = Vec::with_capacity(rank);
    for d in 0..rank {
        let st = strides[d];
        if d + n < rank {
            tables.push((0..sizes[d]).map(|j| j * st).collect());
            continue;
        }
        let i = rank - 1 - d;
        let (size, before) = (inp.sizes()[d] as i64, pad[2 * i]);
        let mut table = Vec::with_capacity(sizes[d]);
        for j in 0..sizes[d] as i64 {
            let src = mode.source(j, size, before);
            if !(0..size).contains(&src) {
                return Err(kerr!("{name}{n}d: padding {pad:?} reads outside dim {d} of size {size}"));
            }
            table.push(src as usize * st);
        }
        tables.push(table);
    }
    write_tables(&inp, &mut out, &sizes, tables)
}

/// `reflection_pad1d.out(Tensor self, SymInt[2] padding, *, Tensor(a!) out)`.
pub fn reflection_pad1d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    pad_nd(args, 1, Mode::Reflect)
}

/// `reflection_pad2d.out(Tensor self, SymInt[4] padding, *, Tensor(a!) out)`.
pub fn reflection_pad2d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    pad_nd(args, 2, Mode::Reflect)
}

/// `reflection_pad3d.out(Tensor self, SymInt[6] padding, *, Tensor(a!) out)`.
pub fn reflection_pad3d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    pad_nd(args, 3, Mode::Reflect)
}

/// `replication_pad1d.out(Tensor self, SymInt[2] padding, *, Tensor(a!) out)`.
pub fn replication_pad1d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    pad_nd(args, 1, Mode::Replicate)
}

/// `replication_pad2d.out(Tensor self, SymInt[4] padding, *, Tensor(a!) out)`.
pub fn replication_pad2d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    pad_nd(args, 2, Mode::Replicate)
}

/// `replication_pad3d.out(Tensor self, SymInt[6] padding, *, Tensor(a!) out)`.
pub fn replication_pad3d_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    pad_nd(args, 3, Mode::Replicate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portable::test_util::iota;
    use alloc::vec;
    use half::f16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    #[test]
    fn constant_pad_grows_and_crops() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &iota(6));
        // Last dim: 1 before, crop 1 after; dim 0: crop 1 before, 1 after.
        let pad = h.int_list(&[1, -1, -1, 1]);
        let v = h.double(9.0);
        let out = h.out(ScalarType::Float, &[2, 3]);
        h.call(constant_pad_nd_out, &[x, pad, v, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![9., 3., 4., 9., 9., 9.]);

        // Cropping more than a dim holds leaves only padding.
        let pad2 = h.int_list(&[-3, 2]);
        let out2 = h.out(ScalarType::Float, &[2, 2]);
        h.call(constant_pad_nd_out, &[x, pad2, v, out2, out2]).unwrap();
        assert_eq!(h.read::<f32>(out2), vec![9.; 4]);

        let b = h.bool_tensor(&[2], &[true, false]);
        let pad3 = h.int_list(&[1, 0]);
        let t = h.bool(true);
        let ob = h.out(ScalarType::Bool, &[3]);
        h.call(constant_pad_nd_out, &[b, pad3, t, ob, ob]).unwrap();
        assert_eq!(h.read_bool(ob), vec![true, true, false]);
    }

    #[test]
    fn constant_pad_checks_arguments() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::Char, &[2], &[1i8, 2]);
        let out = h.out(ScalarType::Char, &[4]);
        let (pad, big, zero) = (h.int_list(&[1, 1]), h.int(300), h.int(0));
        let e = h.call(constant_pad_nd_out, &[x, pad, big, out, out]).unwrap_err();
        assert!(e.message.contains("overflow"), "{e}");
        h.call(constant_pad_nd_out, &[x, pad, zero, out, out]).unwrap();
        assert_eq!(h.read::<i8>(out), vec![0, 1, 2, 0]);
        let odd = h.int_list(&[1]);
        assert!(h.call(constant_pad_nd_out, &[x, odd, zero, out, out]).is_err());
        let many = h.int_list(&[1, 1, 1, 1]);
        assert!(h.call(constant_pad_nd_out, &[x, many, zero, out, out]).is_err());
        let negative = h.int_list(&[-2, -1]);
        assert!(h.call(constant_pad_nd_out, &[x, negative, zero, out, out]).is_err());
        let extreme = h.int_list(&[i64::MIN, i64::MAX]);
        assert!(h.call(constant_pad_nd_out, &[x, extreme, zero, out, out]).is_err());
        let wrong_dtype = h.out(ScalarType::Float, &[4]);
        assert!(h.call(constant_pad_nd_out, &[x, pad, zero, wrong_dtype, wrong_dtype]).is_err());
        let wrong_shape = h.out(ScalarType::Char, &[5]);
        assert!(h.call(constant_pad_nd_out, &[x, pad, zero, wrong_shape, wrong_shape]).is_err());
    }

    #[test]
    fn reflection_pad1d_unbatched_and_cropping() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 4], &[0., 1., 2., 3.]);
        let pad = h.int_list(&[3, 2]);
        let out = h.out(ScalarType::Float, &[1, 9]);
        h.call(reflection_pad1d_out, &[x, pad, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![3., 2., 1., 0., 1., 2., 3., 2., 1.]);
        // A negative pad crops, the other side still reflects the whole input.
        let crop = h.int_list(&[-1, 2]);
        let oc = h.out(ScalarType::Float, &[1, 5]);
        h.call(reflection_pad1d_out, &[x, crop, oc, oc]).unwrap();
        assert_eq!(h.read::<f32>(oc), vec![1., 2., 3., 2., 1.]);
        let too_far = h.int_list(&[4, 0]);
        let e = h.call(reflection_pad1d_out, &[x, too_far, out, out]).unwrap_err();
        assert!(e.message.contains("smaller"), "{e}");
        let short = h.int_list(&[1]);
        assert!(h.call(reflection_pad1d_out, &[x, short, out, out]).is_err());
    }

    #[test]
    fn reflection_pad2d_int64_batched() {
        let mut h = OpHarness::new();
        let x = h.i64(&[1, 1, 2, 3], &[0, 1, 2, 3, 4, 5]);
        let pad = h.int_list(&[1, 1, 1, 0]);
        let out = h.out(ScalarType::Long, &[1, 1, 3, 5]);
        h.call(reflection_pad2d_out, &[x, pad, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![4, 3, 4, 5, 4, 1, 0, 1, 2, 1, 4, 3, 4, 5, 4]);
        let rank2 = h.i64(&[2, 3], &[0, 1, 2, 3, 4, 5]);
        assert!(h.call(reflection_pad2d_out, &[rank2, pad, out, out]).is_err());
    }

    #[test]
    fn replication_pads_clamp_to_the_edge() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::Half, &[1, 3], &[1.0f32, 2.0, 3.0].map(f16::from_f32));
        let pad = h.int_list(&[2, 1]);
        let out = h.out(ScalarType::Half, &[1, 6]);
        h.call(replication_pad1d_out, &[x, pad, out, out]).unwrap();
        let want = [1.0f32, 1.0, 1.0, 2.0, 3.0, 3.0].map(f16::from_f32).to_vec();
        assert_eq!(h.read::<f16>(out), want);

        // 3-D, unbatched [C=1, D=1, H=1, W=2], padding only depth.
        let y = h.f32(&[1, 1, 1, 2], &[5., 6.]);
        let pad3 = h.int_list(&[0, 0, 0, 0, 1, 1]);
        let o3 = h.out(ScalarType::Float, &[1, 3, 1, 2]);
        h.call(replication_pad3d_out, &[y, pad3, o3, o3]).unwrap();
        assert_eq!(h.read::<f32>(o3), vec![5., 6., 5., 6., 5., 6.]);

        // Negative pads crop; an empty batch is fine, an empty spatial dim is not.
        let z = h.f32(&[2, 2, 2], &iota(8));
        let pad2 = h.int_list(&[-1, 1, 0, -1]);
        let o2 = h.out(ScalarType::Float, &[2, 1, 2]);
        h.call(replication_pad2d_out, &[z, pad2, o2, o2]).unwrap();
        assert_eq!(h.read::<f32>(o2), vec![1., 1., 5., 5.]);
        let batch0 = h.f32(&[0, 1, 2], &[]);
        let pad1 = h.int_list(&[1, 1]);
        let ob = h.out(ScalarType::Float, &[0, 1, 4]);
        h.call(replication_pad1d_out, &[batch0, pad1, ob, ob]).unwrap();
        let width0 = h.f32(&[1, 1, 0], &[]);
        let ow = h.out(ScalarType::Float, &[1, 1, 2]);
        assert!(h.call(replication_pad1d_out, &[width0, pad1, ow, ow]).is_err());
        let gone = h.int_list(&[-1, -1]);
        let o0 = h.out(ScalarType::Float, &[1, 1, 0]);
        let w2 = h.f32(&[1, 1, 2], &[1., 2.]);
        assert!(h.call(replication_pad1d_out, &[w2, gone, o0, o0]).is_err());
        let huge = h.int_list(&[i64::MIN, i64::MAX]);
        assert!(h.call(replication_pad1d_out, &[w2, huge, o0, o0]).is_err());
    }
}
