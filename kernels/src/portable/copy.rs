//! Copies of whole tensors: strided and broadcast copies, views materialized as copies
//! (`diagonal`, `narrow`, `t`, `unfold`), `stack`, `tril`, and the scatters of a selection /
//! slice back into a copy. (Fills and empty outputs are in `fill`, flips and rolls in
//! `rearrange`.)
//!
//! Elements are moved as bytes wherever the dtype does not change, so every dtype works.
//! Inputs may have any dim order; outputs are written in their own dim order.

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::{normalize_dim, KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::rearrange::{copy_strided, View};
use super::shape::{
    check_dtype, copy_convert, dim_order_strides, physical_view, slice_bounds, strides_of,
    wrap_index, write_view,
};
use super::util::{for_each_broadcast, to_sizes, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::as_strided_copy.out" => as_strided_copy_out,
    "aten::copy.out" => copy_out,
    "aten::detach_copy.out" => detach_copy_out,
    "aten::lift_fresh_copy.out" => detach_copy_out,
    "et_copy::_h2d_copy.out" => detach_copy_out,
    "et_copy::_d2h_copy.out" => detach_copy_out,
    "aten::diagonal_copy.out" => diagonal_copy_out,
    "aten::narrow_copy.out" => narrow_copy_out,
    "aten::stack.out" => stack_out,
    "aten::t_copy.out" => t_copy_out,
    "aten::tril.out" => tril_out,
    "aten::unfold_copy.out" => unfold_copy_out,
    "aten::select_scatter.out" => select_scatter_out,
    "aten::slice_scatter.out" => slice_scatter_out,
}

// ---------------------------------------------------------------------------------------------
// Copies
// ---------------------------------------------------------------------------------------------

/// `as_strided_copy.out(Tensor self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None,
/// *, Tensor(a!) out)`: args = [self, size, stride, storage_offset, out, out]. The view reads
/// self's storage directly; every address it touches must lie inside self.
pub fn as_strided_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let sizes = to_sizes(&args.int_list(1)?)?;
    let stride = args.int_list(2)?;
    let offset = args.opt_int(3)?.unwrap_or(0);
    let mut out = args.out(4)?;
    check_dtype(&inp, &out)?;
    if stride.len() != sizes.len() {
        return Err(kerr!("as_strided_copy: size {sizes:?} and stride {stride:?} differ in length"));
    }
    let offset = usize::try_from(offset).map_err(|_| kerr!("as_strided_copy: storage_offset {offset} is negative"))?;
    let mut strides = Vec::with_capacity(stride.len());
    for (&n, &st) in sizes.iter().zip(&stride) {
        let st = usize::try_from(st).map_err(|_| kerr!("as_strided_copy: negative stride in {stride:?}"))?;
        // A stride never matters along a dim of size 1; zero keeps later arithmetic small.
        strides.push(if n == 1 { 0 } else { st });
    }
    if sizes.contains(&0) {
        return out.resize(&sizes);
    }
    let last = sizes
        .iter()
        .zip(&strides)
        .try_fold(offset, |acc, (&n, &st)| acc.checked_add((n - 1).checked_mul(st)?))
        .filter(|&l| l < inp.numel());
    if last.is_none() {
        return Err(kerr!(
            "as_strided_copy: size {sizes:?}, stride {stride:?} and offset {offset} reach past the input's {} elements",
            inp.numel()
        ));
    }
    write_view(&inp, &mut out, &sizes, &strides, offset)
}

/// Element strides that read `src` broadcast to `sizes` (0 along broadcast dims).
fn broadcast_view(src: &TensorRef<'_>, sizes: &[usize], what: &str) -> KernelResult<Vec<usize>> {
    let (src_sizes, src_strides) = (src.sizes(), strides_of(src));
    let fail = || kerr!("{what}: source of shape {src_sizes:?} cannot be broadcast to {sizes:?}");
    if src_sizes.len() > sizes.len() {
        return Err(fail());
    }
    let lead = sizes.len() - src_sizes.len();
    let mut strides = vec![0usize; sizes.len()];
    for (k, (&n, &st)) in src_sizes.iter().zip(&src_strides).enumerate() {
        if n == sizes[lead + k] {
            strides[lead + k] = if n == 1 { 0 } else { st };
        } else if n != 1 {
            return Err(fail());
        }
    }
    Ok(strides)
}

/// Writes the view (`sizes`, `strides`) of `src` into `out` (resized to `sizes`), converting
/// to out's dtype when it differs.
fn write_view_convert(src: &TensorRef<'_>, out: &mut TensorMut<'_>, sizes: &[usize], strides: &[usize]) -> KernelResult {
    if src.dtype == out.dtype {
        return write_view(src, out, sizes, strides, 0);
    }
    out.resize(sizes)?;
    let es = Elems::of(src)?;
    let (psizes, pstrides) = physical_view(sizes, strides, out.dim_order.as_slice());
    let mut eo = ElemsMut::of(out)?;
    for_each_broadcast(&psizes, [&pstrides], |o, [i]| eo.copy_from(o, &es, i));
    Ok(())
}

/// `copy.out(Tensor self, Tensor src, bool non_blocking=False, *, Tensor(a!) out)`: args =
/// [self, src, non_blocking, out, out]. Out gets self's shape and dtype, filled with `src`
/// broadcast to that shape and converted to that dtype.
pub fn copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let this = args.tensor(0)?;
    let src = args.tensor(1)?;
    if args.bool(2)? {
        return Err(kerr!("copy.out: non_blocking copies are not supported"));
    }
    let mut out = args.out(3)?;
    check_dtype(&this, &out)?;
    let sizes = this.sizes().to_vec();
    let strides = broadcast_view(&src, &sizes, "copy.out")?;
    write_view_convert(&src, &mut out, &sizes, &strides)
}

/// `detach_copy.out(Tensor self, *, Tensor(a!) out)`: args = [self, out, out]. Also serves
/// `lift_fresh_copy.out` and ExecuTorch's device copies `et_copy::_h2d_copy.out` /
/// `_d2h_copy.out` (same schema): this runtime's tensors all live in host memory, so moving one
/// to or from "the device" is a plain copy.
pub fn detach_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let mut out = args.out(1)?;
    check_dtype(&inp, &out)?;
    copy_convert(&inp, &mut out)
}

/// `diagonal_copy.out(Tensor self, int offset=0, int dim1=0, int dim2=1, *, Tensor(a!) out)`:
/// args = [self, offset, dim1, dim2, out, out]. Drops dim1 and dim2 and appends the diagonal
/// (above the main one for a positive offset, below for a negative one).
pub fn diagonal_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let offset = args.int(1)?;
    let rank = inp.dim();
    if rank < 2 {
        return Err(kerr!("diagonal_copy: input of shape {:?} needs at least 2 dims", inp.sizes()));
    }
    let d1 = normalize_dim(args.int(2)?, rank)?;
    let d2 = normalize_dim(args.int(3)?, rank)?;
    if d1 == d2 {
        return Err(kerr!("diagonal_copy: dim1 and dim2 are both dim {d1}"));
    }
    let (s1, s2) = (inp.sizes()[d1], inp.sizes()[d2]);
    let st = strides_of(&inp);
    let skip = usize::try_from(offset.unsigned_abs()).unwrap_or(usize::MAX);
    let (len, base) = if offset >= 0 {
        (s2.saturating_sub(skip).min(s1), skip.saturating_mul(st[d2]))
    } else {
        (s1.saturating_sub(skip).min(s2), skip.saturating_mul(st[d1]))
    };
    let mut sizes = Vec::with_capacity(rank - 1);
    let mut strides = Vec::with_capacity(rank - 1);
    for d in (0..rank).filter(|&d| d != d1 && d != d2) {
        sizes.push(inp.sizes()[d]);
        strides.push(st[d]);
    }
    sizes.push(len);
    strides.push(st[d1] + st[d2]);
    let mut out = args.out(4)?;
    write_view(&inp, &mut out, &sizes, &strides, if len == 0 { 0 } else { base })
}

/// `narrow_copy.out(Tensor self, int dim, SymInt start, SymInt length, *, Tensor(a!) out)`:
/// args = [self, dim, start, length, out, out]. A negative start counts from the end.
pub fn narrow_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    if inp.dim() == 0 {
        return Err(kerr!("narrow_copy: cannot narrow a 0-dim tensor"));
    }
    let d = normalize_dim(args.int(1)?, inp.dim())?;
    let (start, length) = (args.int(2)?, args.int(3)?);
    let size = inp.sizes()[d] as i64;
    if start < -size || start > size {
        return Err(kerr!("narrow_copy: start {start} is out of range for dim {d} of size {size}"));
    }
    let start = if start < 0 { start + size } else { start };
    if length < 0 || length > size - start {
        return Err(kerr!("narrow_copy: start {start} + length {length} exceeds dim {d} of size {size}"));
    }
    let mut sizes = inp.sizes().to_vec();
    let strides = strides_of(&inp);
    sizes[d] = length as usize;
    let base = if length == 0 { 0 } else { start as usize * strides[d] };
    let mut out = args.out(4)?;
    write_view(&inp, &mut out, &sizes, &strides, base)
}

/// `t_copy.out(Tensor self, *, Tensor(a!) out)`: transposes a 2-D tensor; 0-D and 1-D are copied.
pub fn t_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let mut out = args.out(1)?;
    match inp.dim() {
        0 | 1 => {
            check_dtype(&inp, &out)?;
            copy_convert(&inp, &mut out)
        }
        2 => {
            let st = strides_of(&inp);
            let s = inp.sizes();
            write_view(&inp, &mut out, &[s[1], s[0]], &[st[1], st[0]], 0)
        }
        r => Err(kerr!("t_copy: input of shape {:?} has {r} dims (at most 2)", inp.sizes())),
    }
}

/// `unfold_copy.out(Tensor self, int dimension, int size, int step, *, Tensor(a!) out)`:
/// windows of `size` elements every `step` along `dimension`, as a new last dim.
pub fn unfold_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let rank = inp.dim();
    let d = normalize_dim(args.int(1)?, rank)?;
    let (size, step) = (args.int(2)?, args.int(3)?);
    // A 0-dim tensor unfolds like one of shape [1].
    let dim_size = if rank == 0 { 1 } else { inp.sizes()[d] };
    if size < 0 || size as u64 > dim_size as u64 {
        return Err(kerr!("unfold_copy: size {size} must lie in [0, {dim_size}] (dim {d})"));
    }
    if step <= 0 {
        return Err(kerr!("unfold_copy: step {step} must be positive"));
    }
    let (size, step) = (size as usize, usize::try_from(step).unwrap_or(usize::MAX));
    let mut sizes = inp.sizes().to_vec();
    let mut strides = strides_of(&inp);
    let inner = if rank == 0 { 1 } else { strides[d] };
    if rank > 0 {
        let windows = (dim_size - size) / step + 1;
        sizes[d] = windows;
        // With one window the step never applies (and could be huge).
        strides[d] = if windows > 1 { strides[d] * step } else { 0 };
    }
    sizes.push(size);
    strides.push(inner);
    let mut out = args.out(4)?;
    write_view(&inp, &mut out, &sizes, &strides, 0)
}

// ---------------------------------------------------------------------------------------------
// stack and tril
// ---------------------------------------------------------------------------------------------

/// Whether PyTorch lets an `out=` of dtype `to` take a result of dtype `from`: no float into
/// an integer, nothing but bool into bool.
fn can_cast(from: ScalarType, to: ScalarType) -> bool {
    !(from.is_floating() && to.is_integral(true)) && !(from != ScalarType::Bool && to == ScalarType::Bool)
}

/// Writes `src` (all of it) onto the view (`src`'s sizes, `dst_strides` from `dst_base`) of
/// `out`'s storage, converting to out's dtype when it differs.
fn scatter_into(src: &TensorRef<'_>, out: &mut TensorMut<'_>, dst_base: usize, dst_strides: &[usize]) -> KernelResult {
    let sizes = src.sizes();
    let src_strides = strides_of(src);
    if src.dtype == out.dtype {
        let esize = out.dtype.size();
        let from = View { base: 0, strides: &src_strides };
        let to = View { base: dst_base, strides: dst_strides };
        return copy_strided(src.bytes(), from, out.bytes_mut(), to, sizes, esize);
    }
    if sizes.contains(&0) {
        return Ok(());
    }
    let last = sizes.iter().zip(dst_strides).try_fold(dst_base, |acc, (&n, &st)| acc.checked_add((n - 1).checked_mul(st)?));
    if !last.is_some_and(|l| l < out.numel()) {
        return Err(kerr!("scatter writes past its output of {} elements", out.numel()));
    }
    let es = Elems::of(src)?;
    let mut eo = ElemsMut::of(out)?;
    for_each_broadcast(sizes, [&src_strides, dst_strides], |_, [i, o]| eo.copy_from(dst_base + o, &es, i));
    Ok(())
}

/// `stack.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out)`: args = [tensors, dim, out, out].
/// Joins same-shaped tensors along a new dim; inputs are converted to out's dtype.
pub fn stack_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let tensors = args.tensor_list(0)?;
    let Some(first) = tensors.first() else {
        return Err(kerr!("stack: expects a non-empty list of tensors"));
    };
    let rank = first.dim();
    let d = normalize_dim(args.int(1)?, rank + 1)?;
    let mut out = args.out(2)?;
    for (i, t) in tensors.iter().enumerate() {
        if t.sizes() != first.sizes() {
            return Err(kerr!("stack: tensor {i} has shape {:?} but tensor 0 has {:?}", t.sizes(), first.sizes()));
        }
        if !can_cast(t.dtype, out.dtype) {
            return Err(kerr!("stack: tensor {i} of dtype {} cannot be written to an output of dtype {}", t.dtype, out.dtype));
        }
    }
    let mut sizes = first.sizes().to_vec();
    sizes.insert(d, tensors.len());
    out.resize(&sizes)?;
    let mut strides = dim_order_strides(&sizes, out.dim_order.as_slice());
    let step = strides.remove(d);
    for (i, t) in tensors.iter().enumerate() {
        scatter_into(t, &mut out, i * step, &strides)?;
    }
    Ok(())
}

/// `tril.out(Tensor self, int diagonal=0, *, Tensor(a!) out)`: keeps element (i, j) of each
/// matrix (the last two dims) where j - i <= diagonal, zeroes the rest.
pub fn tril_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let diagonal = args.int(1)?;
    let mut out = args.out(2)?;
    let rank = inp.dim();
    if rank < 2 {
        return Err(kerr!("tril: input of shape {:?} needs at least 2 dims", inp.sizes()));
    }
    check_dtype(&inp, &out)?;
    copy_convert(&inp, &mut out)?;
    let sizes = inp.sizes().to_vec();
    let strides = dim_order_strides(&sizes, out.dim_order.as_slice());
    let (rows, cols) = (sizes[rank - 2], sizes[rank - 1]);
    let (rs, cs) = (strides[rank - 2], strides[rank - 1]);
    let esize = out.dtype.size();
    let bytes = out.bytes_mut();
    for_each_broadcast(&sizes[..rank - 2], [&strides[..rank - 2]], |_, [base]| {
        for i in 0..rows {
            // First column above the kept band in row i.
            let first = (i as i64).saturating_add(diagonal).saturating_add(1).clamp(0, cols as i64) as usize;
            let row = base + i * rs;
            if cs == 1 {
                bytes[(row + first) * esize..(row + cols) * esize].fill(0);
            } else {
                for j in first..cols {
                    let at = (row + j * cs) * esize;
                    bytes[at..at + esize].fill(0);
                }
            }
        }
    });
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Scatters of a selection / slice
// ---------------------------------------------------------------------------------------------

/// Copies `this` into `out` and returns out's element strides (in its dim order).
fn copy_base(this: &TensorRef<'_>, out: &mut TensorMut<'_>) -> KernelResult<Vec<usize>> {
    check_dtype(this, out)?;
    copy_convert(this, out)?;
    Ok(dim_order_strides(this.sizes(), out.dim_order.as_slice()))
}

/// `select_scatter.out(Tensor self, Tensor src, int dim, SymInt index, *, Tensor(a!) out)`:
/// args = [self, src, dim, index, out, out]. A copy of self with self.select(dim, index)
/// replaced by src (converted to self's dtype).
pub fn select_scatter_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let this = args.tensor(0)?;
    let src = args.tensor(1)?;
    if this.dim() == 0 {
        return Err(kerr!("select_scatter: cannot select from a 0-dim tensor"));
    }
    let d = normalize_dim(args.int(2)?, this.dim())?;
    let index = wrap_index(args.int(3)?, this.sizes()[d])?;
    let mut want = this.sizes().to_vec();
    want.remove(d);
    if src.sizes() != want.as_slice() {
        return Err(kerr!("select_scatter: src of shape {:?} does not match the selection's shape {want:?}", src.sizes()));
    }
    let mut out = args.out(4)?;
    let mut strides = copy_base(&this, &mut out)?;
    let step = strides.remove(d);
    scatter_into(&src, &mut out, index * step, &strides)
}

/// `slice_scatter.out(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None,
/// SymInt step=1, *, Tensor(a!) out)`: args = [self, src, dim, start, end, step, out, out].
/// A copy of self with the slice replaced by src (converted to self's dtype).
pub fn slice_scatter_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let this = args.tensor(0)?;
    let src = args.tensor(1)?;
    if this.dim() == 0 {
        return Err(kerr!("slice_scatter: cannot slice a 0-dim tensor"));
    }
    let d = normalize_dim(args.int(2)?, this.dim())?;
    let step = args.int(5)?;
    let (start, len) = slice_bounds(this.sizes()[d], args.opt_int(3)?, args.opt_int(4)?, step)?;
    let mut want = this.sizes().to_vec();
    want[d] = len;
    if src.sizes() != want.as_slice() {
        return Err(kerr!("slice_scatter: src of shape {:?} does not match the slice's shape {want:?}", src.sizes()));
    }
    let mut out = args.out(6)?;
    let mut strides = copy_base(&this, &mut out)?;
    if len == 0 {
        return Ok(());
    }
    let base = start * strides[d];
    // With one element the step never applies (and could be huge).
    strides[d] = if len > 1 { strides[d] * step as usize } else { 0 };
    scatter_into(&src, &mut out, base, &strides)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portable::test_util::{iota, set_dim_order};
    use half::bf16;
    use rbuild_runtime::harness::OpHarness;

    #[test]
    fn as_strided_reads_overlapping_windows_and_checks_bounds() {
        let mut h = OpHarness::new();
        let x = h.i64(&[6], &[0, 1, 2, 3, 4, 5]);
        let (size, stride, off) = (h.int_list(&[3, 2]), h.int_list(&[1, 2]), h.int(1));
        let out = h.out(ScalarType::Long, &[3, 2]);
        h.call(as_strided_copy_out, &[x, size, stride, off, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![1, 3, 2, 4, 3, 5]);
        // A size-1 dim may carry any stride.
        let (s1, st1, none) = (h.int_list(&[1, 2]), h.int_list(&[i64::MAX, 5]), h.none());
        let o1 = h.out(ScalarType::Long, &[1, 2]);
        h.call(as_strided_copy_out, &[x, s1, st1, none, o1, o1]).unwrap();
        assert_eq!(h.read::<i64>(o1), vec![0, 5]);

        let two = h.int(2);
        let e = h.call(as_strided_copy_out, &[x, size, stride, two, out, out]).unwrap_err();
        assert!(e.message.contains("reach past"), "{e}");
        let (s3, huge) = (h.int_list(&[3]), h.int_list(&[i64::MAX]));
        let o3 = h.out(ScalarType::Long, &[3]);
        assert!(h.call(as_strided_copy_out, &[x, s3, huge, none, o3, o3]).is_err());
        let neg = h.int_list(&[-1]);
        assert!(h.call(as_strided_copy_out, &[x, s3, neg, none, o3, o3]).is_err());
        let one = h.int_list(&[1]);
        let minus = h.int(-1);
        assert!(h.call(as_strided_copy_out, &[x, s3, one, minus, o3, o3]).is_err());
        assert!(h.call(as_strided_copy_out, &[x, size, one, none, out, out]).is_err());
        let neg_size = h.int_list(&[-3]);
        assert!(h.call(as_strided_copy_out, &[x, neg_size, one, none, o3, o3]).is_err());
    }

    #[test]
    fn copy_out_broadcasts_and_converts() {
        let mut h = OpHarness::new();
        let this = h.f32(&[2, 3], &[0.0; 6]);
        let src = h.i64(&[3], &[1, 2, 3]);
        let nb = h.bool(false);
        let out = h.out(ScalarType::Float, &[2, 3]);
        h.call(copy_out, &[this, src, nb, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![1., 2., 3., 1., 2., 3.]);

        let col = h.tensor(ScalarType::BFloat16, &[2, 1], &[bf16::from_f32(1.5), bf16::from_f32(-2.0)]);
        let ob = h.out(ScalarType::BFloat16, &[2, 3]);
        let this_b = h.tensor(ScalarType::BFloat16, &[2, 3], &[bf16::ZERO; 6]);
        h.call(copy_out, &[this_b, col, nb, ob, ob]).unwrap();
        let want: Vec<bf16> = [1.5f32, 1.5, 1.5, -2.0, -2.0, -2.0].iter().map(|&v| bf16::from_f32(v)).collect();
        assert_eq!(h.read::<bf16>(ob), want);

        let bad = h.f32(&[2], &[1., 2.]);
        let e = h.call(copy_out, &[this, bad, nb, out, out]).unwrap_err();
        assert!(e.message.contains("cannot be broadcast"), "{e}");
        let yes = h.bool(true);
        assert!(h.call(copy_out, &[this, src, yes, out, out]).is_err());
        let wrong = h.out(ScalarType::Long, &[2, 3]);
        assert!(h.call(copy_out, &[this, src, nb, wrong, wrong]).is_err());
    }

    #[test]
    fn detach_copy_any_dtype() {
        let mut h = OpHarness::new();
        let x = h.bool_tensor(&[3], &[true, false, true]);
        let out = h.out(ScalarType::Bool, &[3]);
        h.call(detach_copy_out, &[x, out, out]).unwrap();
        assert_eq!(h.read_bool(out), vec![true, false, true]);
        let wrong = h.out(ScalarType::Byte, &[3]);
        assert!(h.call(detach_copy_out, &[x, wrong, wrong]).is_err());
    }

    #[test]
    fn diagonal_offsets_and_dims() {
        let mut h = OpHarness::new();
        let x = h.f32(&[3, 4], &iota(12));
        let (zero, one) = (h.int(0), h.int(1));
        let (up, down, far) = (h.int(2), h.int(-1), h.int(i64::MIN));
        let o = h.out_dynamic(ScalarType::Float, &[3]);
        h.call(diagonal_copy_out, &[x, up, zero, one, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![2., 7.]);
        h.call(diagonal_copy_out, &[x, down, zero, one, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![4., 9.]);
        // dim1 = 1, dim2 = 0 walks the transpose.
        h.call(diagonal_copy_out, &[x, down, one, zero, o, o]).unwrap();
        assert_eq!(h.read::<f32>(o), vec![1., 6., 11.]);
        h.call(diagonal_copy_out, &[x, far, zero, one, o, o]).unwrap();
        assert_eq!(h.sizes(o), vec![0]);

        // Batched: dims (-2, -1) of [2, 2, 2], the batch dim first.
        let y = h.i64(&[2, 2, 2], &[0, 1, 2, 3, 4, 5, 6, 7]);
        let (m2, m1) = (h.int(-2), h.int(-1));
        let oy = h.out(ScalarType::Long, &[2, 2]);
        h.call(diagonal_copy_out, &[y, zero, m2, m1, oy, oy]).unwrap();
        assert_eq!(h.read::<i64>(oy), vec![0, 3, 4, 7]);

        assert!(h.call(diagonal_copy_out, &[x, zero, one, m1, o, o]).is_err());
        let v = h.f32(&[3], &[1., 2., 3.]);
        assert!(h.call(diagonal_copy_out, &[v, zero, zero, one, o, o]).is_err());
    }

    #[test]
    fn narrow_wraps_negative_start() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 4], &iota(8));
        let (d, s, l) = (h.int(-1), h.int(-3), h.int(2));
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(narrow_copy_out, &[x, d, s, l, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![1., 2., 5., 6.]);
        let (end, zero) = (h.int(4), h.int(0));
        let empty = h.out(ScalarType::Float, &[2, 0]);
        h.call(narrow_copy_out, &[x, d, end, zero, empty, empty]).unwrap();
        let (bad_start, three, neg) = (h.int(5), h.int(3), h.int(-1));
        assert!(h.call(narrow_copy_out, &[x, d, bad_start, zero, empty, empty]).is_err());
        assert!(h.call(narrow_copy_out, &[x, d, l, three, out, out]).is_err());
        assert!(h.call(narrow_copy_out, &[x, d, l, neg, out, out]).is_err());
        let scalar = h.f32(&[], &[1.]);
        assert!(h.call(narrow_copy_out, &[scalar, zero, zero, zero, out, out]).is_err());
    }

    #[test]
    fn t_copy_ranks() {
        let mut h = OpHarness::new();
        let m = h.tensor(ScalarType::Short, &[2, 3], &[0i16, 1, 2, 3, 4, 5]);
        let out = h.out(ScalarType::Short, &[3, 2]);
        h.call(t_copy_out, &[m, out, out]).unwrap();
        assert_eq!(h.read::<i16>(out), vec![0, 3, 1, 4, 2, 5]);
        let v = h.f32(&[3], &[1., 2., 3.]);
        let ov = h.out(ScalarType::Float, &[3]);
        h.call(t_copy_out, &[v, ov, ov]).unwrap();
        assert_eq!(h.read::<f32>(ov), vec![1., 2., 3.]);
        let cube = h.f32(&[1, 1, 1], &[1.]);
        assert!(h.call(t_copy_out, &[cube, ov, ov]).is_err());
    }

    #[test]
    fn unfold_windows() {
        let mut h = OpHarness::new();
        let x = h.f32(&[5], &iota(5));
        let (d, size, step) = (h.int(0), h.int(2), h.int(2));
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(unfold_copy_out, &[x, d, size, step, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 1., 2., 3.]);
        // One window with a huge step; a 0-dim input unfolds to [size].
        let (five, big) = (h.int(5), h.int(i64::MAX));
        let one_window = h.out(ScalarType::Float, &[1, 5]);
        h.call(unfold_copy_out, &[x, d, five, big, one_window, one_window]).unwrap();
        assert_eq!(h.read::<f32>(one_window), iota(5));
        let s = h.i64(&[], &[7]);
        let (one, minus) = (h.int(1), h.int(-1));
        let os = h.out(ScalarType::Long, &[1]);
        h.call(unfold_copy_out, &[s, minus, one, one, os, os]).unwrap();
        assert_eq!(h.read::<i64>(os), vec![7]);

        let (six, zero, neg) = (h.int(6), h.int(0), h.int(-1));
        assert!(h.call(unfold_copy_out, &[x, d, six, one, out, out]).is_err());
        assert!(h.call(unfold_copy_out, &[x, d, size, zero, out, out]).is_err());
        assert!(h.call(unfold_copy_out, &[x, d, neg, one, out, out]).is_err());
        assert!(h.call(unfold_copy_out, &[x, one, size, one, out, out]).is_err());
    }

    #[test]
    fn stack_dims_and_dtypes() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2], &[1., 2.]);
        let b = h.i64(&[2], &[3, 4]);
        let list = h.tensor_list(&[a, b]);
        let (last, zero) = (h.int(-1), h.int(0));
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(stack_out, &[list, last, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![1., 3., 2., 4.]);
        h.call(stack_out, &[list, zero, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![1., 2., 3., 4.]);

        // Channels-last output: logical [1, 2, 1, 2] stored (n, h, w, c).
        let c0 = h.f32(&[1, 1, 2], &[1., 2.]);
        let c1 = h.f32(&[1, 1, 2], &[3., 4.]);
        let chans = h.tensor_list(&[c0, c1]);
        let one = h.int(1);
        let cl = h.out(ScalarType::Float, &[1, 2, 1, 2]);
        set_dim_order(&mut h, cl, &[0, 2, 3, 1]);
        h.call(stack_out, &[chans, one, cl, cl]).unwrap();
        assert_eq!(h.read::<f32>(cl), vec![1., 3., 2., 4.]);

        let int_out = h.out(ScalarType::Long, &[2, 2]);
        assert!(h.call(stack_out, &[list, zero, int_out, int_out]).is_err());
        let c = h.f32(&[3], &[1., 2., 3.]);
        let mismatched = h.tensor_list(&[a, c]);
        assert!(h.call(stack_out, &[mismatched, zero, out, out]).is_err());
        let empty = h.tensor_list(&[]);
        assert!(h.call(stack_out, &[empty, zero, out, out]).is_err());
        let two = h.int(2);
        assert!(h.call(stack_out, &[list, two, out, out]).is_err());
    }

    #[test]
    fn tril_diagonals() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::Byte, &[3, 3], &[1u8; 9]);
        let out = h.out(ScalarType::Byte, &[3, 3]);
        let (zero, minus, big, small) = (h.int(0), h.int(-1), h.int(i64::MAX), h.int(i64::MIN));
        h.call(tril_out, &[x, zero, out, out]).unwrap();
        assert_eq!(h.read::<u8>(out), vec![1, 0, 0, 1, 1, 0, 1, 1, 1]);
        h.call(tril_out, &[x, minus, out, out]).unwrap();
        assert_eq!(h.read::<u8>(out), vec![0, 0, 0, 1, 0, 0, 1, 1, 0]);
        h.call(tril_out, &[x, big, out, out]).unwrap();
        assert_eq!(h.read::<u8>(out), vec![1; 9]);
        h.call(tril_out, &[x, small, out, out]).unwrap();
        assert_eq!(h.read::<u8>(out), vec![0; 9]);

        // Batched, wide, channels-last output (columns not unit-stride).
        let y = h.f32(&[1, 2, 2, 2], &iota(8));
        let oy = h.out(ScalarType::Float, &[1, 2, 2, 2]);
        set_dim_order(&mut h, oy, &[0, 2, 3, 1]);
        h.call(tril_out, &[y, zero, oy, oy]).unwrap();
        // Per channel [[0, 0], [2, 3]] and [[4, 0], [6, 7]], stored (h, w, c).
        assert_eq!(h.read::<f32>(oy), vec![0., 4., 0., 0., 2., 6., 3., 7.]);

        let v = h.f32(&[3], &[1., 2., 3.]);
        assert!(h.call(tril_out, &[v, zero, out, out]).is_err());
    }

    #[test]
    fn select_scatter_replaces_one_slice() {
        let mut h = OpHarness::new();
        let x = h.i64(&[2, 3], &[0; 6]);
        let src = h.i64(&[2], &[7, 8]);
        let (d, i) = (h.int(1), h.int(-1));
        let out = h.out(ScalarType::Long, &[2, 3]);
        h.call(select_scatter_out, &[x, src, d, i, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![0, 0, 7, 0, 0, 8]);
        // src converted to self's dtype.
        let fsrc = h.f32(&[2], &[1.9, -2.5]);
        h.call(select_scatter_out, &[x, fsrc, d, i, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![0, 0, 1, 0, 0, -2]);

        let v = h.f32(&[3], &[0., 0., 0.]);
        let s0 = h.f32(&[], &[5.]);
        let zero = h.int(0);
        let ov = h.out(ScalarType::Float, &[3]);
        h.call(select_scatter_out, &[v, s0, zero, d, ov, ov]).unwrap();
        assert_eq!(h.read::<f32>(ov), vec![0., 5., 0.]);

        let three = h.int(3);
        assert!(h.call(select_scatter_out, &[x, src, d, three, out, out]).is_err());
        let wrong = h.i64(&[3], &[1, 2, 3]);
        assert!(h.call(select_scatter_out, &[x, wrong, d, i, out, out]).is_err());
    }

    #[test]
    fn slice_scatter_with_steps() {
        let mut h = OpHarness::new();
        let x = h.f32(&[6], &[0.; 6]);
        let src = h.f32(&[2], &[1., 2.]);
        let (d, start, none, step) = (h.int(0), h.int(-5), h.none(), h.int(3));
        let out = h.out(ScalarType::Float, &[6]);
        h.call(slice_scatter_out, &[x, src, d, start, none, step, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 1., 0., 0., 2., 0.]);
        let one = h.f32(&[1], &[9.]);
        let (s5, big) = (h.int(5), h.int(i64::MAX));
        h.call(slice_scatter_out, &[x, one, d, s5, none, big, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 0., 0., 0., 0., 9.]);
        let (s9, empty_src) = (h.int(9), h.f32(&[0], &[]));
        let unit = h.int(1);
        h.call(slice_scatter_out, &[x, empty_src, d, s9, none, unit, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0.; 6]);

        let zero = h.int(0);
        assert!(h.call(slice_scatter_out, &[x, src, d, start, none, zero, out, out]).is_err());
        assert!(h.call(slice_scatter_out, &[x, one, d, start, none, step, out, out]).is_err());
    }
}
