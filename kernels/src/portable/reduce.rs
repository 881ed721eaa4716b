//! Reductions (sum, mean, any, amax/amin, argmax/argmin), scans (cumsum) and softmax.
//!
//! Floating results accumulate in f64 (as PyTorch's CPU kernels accumulate float in double for
//! sums and scans), except f32 means, which sum in f32 in memory order as ExecuTorch's portable
//! mean does (global average pooling then matches it bit for bit); integer results accumulate
//! in i64 with wrapping. Contiguous inputs only.

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::{normalize_dim, KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::complex_arith::is_complex;
use super::util::{for_each_broadcast, normalize_dims, require_contiguous, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::mean.out" => mean_out,
    "aten::mean.dtype_out" => mean_dtype_out,
    "aten::sum.IntList_out" => sum_intlist_out,
    "aten::sum.out" => sum_out,
    "aten::any.out" => any_out,
    "aten::any.dims_out" => any_dims_out,
    "aten::any.all_out" => any_all_out,
    "aten::amax.out" => amax_out,
    "aten::amin.out" => amin_out,
    "aten::argmax.out" => argmax_out,
    "aten::argmin.out" => argmin_out,
    "aten::cumsum.out" => cumsum_out,
    "aten::_softmax.out" => softmax_out,
    "aten::_log_softmax.out" => log_softmax_out,
}

fn contiguous_strides(sizes: &[usize]) -> Vec<usize> {
    let mut st = vec![1usize; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * sizes[d + 1];
    }
    st
}

pub(crate) fn check_layouts(inp: &TensorRef<'_>, out: &TensorMut<'_>, what: &str) -> KernelResult {
    require_contiguous(inp, what)?;
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("{what}: output dim order {:?} is not supported (contiguous only)", out.dim_order));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reduction plan
// ---------------------------------------------------------------------------------------------

/// How a reduction walks its input: for every output element (row-major over the kept dims)
/// a base offset, plus the offsets of the reduced elements relative to it.
pub(crate) struct Plan {
    pub(crate) out_sizes: Vec<usize>,
    kept_sizes: Vec<usize>,
    kept_strides: Vec<usize>,
    pub(crate) red_offs: Vec<usize>,
    /// The reduced dims are exactly the trailing ones: group `o` is the chunk
    /// `[o * n, (o + 1) * n)` with `n = red_offs.len()`.
    pub(crate) trailing: bool,
}

impl Plan {
    /// `dims` None or empty reduces every dim (PyTorch's convention for `int[1]? dim`).
    pub(crate) fn new(sizes: &[usize], dims: Option<&[i64]>, keepdim: bool) -> KernelResult<Plan> {
        let rank = sizes.len();
        let mut reduce = vec![true; rank];
        if let Some(ds) = dims.filter(|d| !d.is_empty()) {
            if rank == 0 {
                for &d in ds {
                    normalize_dim(d, 0)?;
                }
            } else {
                reduce = vec![false; rank];
                for d in normalize_dims(ds, rank)? {
                    reduce[d] = true;
                }
            }
        }
        let st = contiguous_strides(sizes);
        let mut out_sizes = Vec::with_capacity(rank);
        let (mut kept_sizes, mut kept_strides) = (Vec::new(), Vec::new());
        let (mut red_sizes, mut red_strides) = (Vec::new(), Vec::new());
        for d in 0..rank {
            if reduce[d] {
                if keepdim {
                    out_sizes.push(1);
                }
                red_sizes.push(sizes[d]);
                red_strides.push(st[d]);
            } else {
                out_sizes.push(sizes[d]);
                kept_sizes.push(sizes[d]);
                kept_strides.push(st[d]);
            }
        }
        let mut red_offs = Vec::with_capacity(red_sizes.iter().product());
        for_each_broadcast(&red_sizes, [&red_strides], |_, [off]| red_offs.push(off));
        let first_reduced = reduce.iter().position(|&r| r).unwrap_or(rank);
        let trailing = reduce[first_reduced..].iter().all(|&r| r);
        Ok(Plan { out_sizes, kept_sizes, kept_strides, red_offs, trailing })
    }

    /// Calls `f(out_index, base_offset)` for every output element.
    pub(crate) fn for_each_group(&self, mut f: impl FnMut(usize, usize)) {
        for_each_broadcast(&self.kept_sizes, [&self.kept_strides], |o, [base]| f(o, base));
    }
}

/// Reads `int[1]? dim` (None, or a list).
pub(crate) fn opt_dims(args: &KernelArgs<'_>, i: usize) -> KernelResult<Option<Vec<i64>>> {
    args.opt_int_list(i)
}

// ---------------------------------------------------------------------------------------------
// sum / mean
// ---------------------------------------------------------------------------------------------

fn sum_mean(args: &KernelArgs<'_>, dims: Option<Vec<i64>>, keepdim: bool, dtype: Option<ScalarType>, out: usize, mean: bool) -> KernelResult {
    let what = if mean { "mean" } else { "sum" };
    let inp = args.tensor(0)?;
    let mut out = args.out(out)?;
    check_layouts(&inp, &out, what)?;
    if let Some(dt) = dtype.filter(|&dt| dt != out.dtype) {
        return Err(kerr!("{what}: dtype argument {dt} differs from the output dtype {}", out.dtype));
    }
    if mean && !out.dtype.is_floating() {
        return Err(kerr!("mean: output dtype {} is not floating point", out.dtype));
    }
    // ExecuTorch sums one reduced dim from 0, several from their first element (which only
    // tells apart a sum of negative zeros).
    let single_dim = dims.as_ref().is_some_and(|d| d.len() == 1);
    let p = Plan::new(inp.sizes(), dims.as_deref(), keepdim)?;
    out.resize(&p.out_sizes)?;
    let n = p.red_offs.len();
    let scale = if mean { 1.0 / n as f64 } else { 1.0 };
    // Fast path: f32 in/out over a trailing block (RMSNorm's mean(-1), pooling's mean(-1,-2)).
    if inp.dtype == ScalarType::Float && out.dtype == ScalarType::Float && p.trailing && n > 0 {
        let x: &[f32] = inp.data()?;
        let o: &mut [f32] = out.data_mut()?;
        if mean {
            // ExecuTorch's portable mean: an f32 sum in memory order, divided by the count.
            for (dst, chunk) in o.iter_mut().zip(x.chunks_exact(n)) {
                *dst = et_f32_sum(chunk.iter().copied(), single_dim) / n as f32;
            }
        } else {
            for (dst, chunk) in o.iter_mut().zip(x.chunks_exact(n)) {
                let s: f64 = chunk.iter().map(|&v| v as f64).sum();
                *dst = (s * scale) as f32;
            }
        }
        return Ok(());
    }
    if mean && inp.dtype == ScalarType::Float && out.dtype == ScalarType::Float {
        let x: &[f32] = inp.data()?;
        let o: &mut [f32] = out.data_mut()?;
        let offs = &p.red_offs;
        p.for_each_group(|i, base| o[i] = et_f32_sum(offs.iter().map(|&r| x[base + r]), single_dim) / n as f32);
        return Ok(());
    }
    if cfg!(feature = "complex") && !mean && (is_complex(inp.dtype) || is_complex(out.dtype)) {
        return super::complex_arith::sum(&inp, &mut out, &p);
    }
    let x = Elems::of(&inp)?;
    let mut eo = ElemsMut::of(&mut out)?;
    if eo.is_floating() {
        let offs = &p.red_offs;
        p.for_each_group(|o, base| {
            let s: f64 = offs.iter().map(|&r| x.f64(base + r)).sum();
            // 0/0 gives NaN for an empty mean, as PyTorch does.
            eo.set_f64(o, if mean { s / n as f64 } else { s });
        });
    } else {
        let offs = &p.red_offs;
        p.for_each_group(|o, base| {
            let s = offs.iter().fold(0i64, |a, &r| a.wrapping_add(x.i64(base + r)));
            eo.set_i64(o, s);
        });
    }
    Ok(())
}

/// An f32 sum in the given order, as ExecuTorch's portable mean computes it: from 0 over one
/// reduced dim, else from the first element.
fn et_f32_sum(mut v: impl Iterator<Item = f32>, from_zero: bool) -> f32 {
    let first = if from_zero { 0.0 } else { v.next().unwrap_or(0.0) };
    v.fold(first, |acc, x| acc + x)
}

/// `mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None,
/// Tensor(a!) out)`: args = [self, dim, keepdim, dtype, out, out].
pub fn mean_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    sum_mean(args, opt_dims(args, 1)?, args.bool(2)?, args.opt_scalar_type(3)?, 4, true)
}

/// `mean.dtype_out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)`.
pub fn mean_dtype_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    sum_mean(args, None, false, args.opt_scalar_type(1)?, 2, true)
}

/// `sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None,
/// Tensor(a!) out)`.
pub fn sum_intlist_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    sum_mean(args, opt_dims(args, 1)?, args.bool(2)?, args.opt_scalar_type(3)?, 4, false)
}

/// `sum.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)`.
pub fn sum_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    sum_mean(args, None, false, args.opt_scalar_type(1)?, 2, false)
}

// ---------------------------------------------------------------------------------------------
// any
// ---------------------------------------------------------------------------------------------

fn any_impl(args: &KernelArgs<'_>, dims: Option<Vec<i64>>, keepdim: bool, out: usize) -> KernelResult {
    let inp = args.tensor(0)?;
    let mut out = args.out(out)?;
    check_layouts(&inp, &out, "any")?;
    let p = Plan::new(inp.sizes(), dims.as_deref(), keepdim)?;
    out.resize(&p.out_sizes)?;
    let x = Elems::of(&inp)?;
    let mut eo = ElemsMut::of(&mut out)?;
    let offs = &p.red_offs;
    p.for_each_group(|o, base| eo.set_bool(o, offs.iter().any(|&r| x.bool(base + r))));
    Ok(())
}

/// `any.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out)`.
pub fn any_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let d = args.int(1)?;
    any_impl(args, Some(vec![d]), args.bool(2)?, 3)
}

/// `any.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out)`.
pub fn any_dims_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    any_impl(args, opt_dims(args, 1)?, args.bool(2)?, 3)
}

/// `any.all_out(Tensor self, *, Tensor(a!) out)`.
pub fn any_all_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    any_impl(args, None, false, 1)
}

// ---------------------------------------------------------------------------------------------
// amax / amin, argmax / argmin
// ---------------------------------------------------------------------------------------------

/// `a` should replace the current best `b` (NaN wins and sticks, as in PyTorch).
pub(crate) fn better_f(a: f64, b: f64, max: bool) -> bool {
    if b.is_nan() {
        false
    } else if a.is_nan() {
        true
    } else if max {
        a > b
    } else {
        a < b
    }
}

fn amax_amin(args: &KernelArgs<'_>, max: bool) -> KernelResult {
    let what = if max { "amax" } else { "amin" };
    let inp = args.tensor(0)?;
    let dims = args.int_list(1)?;
    let keepdim = args.bool(2)?;
    let mut out = args.out(3)?;
    check_layouts(&inp, &out, what)?;
    if inp.dtype != out.dtype {
        return Err(kerr!("{what}: input dtype {} differs from output dtype {}", inp.dtype, out.dtype));
    }
    let p = Plan::new(inp.sizes(), Some(&dims), keepdim)?;
    out.resize(&p.out_sizes)?;
    if p.red_offs.is_empty() && out.numel() > 0 {
        return Err(kerr!("{what}: cannot reduce over an empty dimension of input shape {:?}", inp.sizes()));
    }
    let x = Elems::of(&inp)?;
    let mut eo = ElemsMut::of(&mut out)?;
    let offs = &p.red_offs;
    if inp.dtype.is_floating() {
        p.for_each_group(|o, base| {
            let mut vals = offs.iter().map(|&r| x.f64(base + r));
            let first = vals.next().unwrap_or(f64::NAN);
            eo.set_f64(o, vals.fold(first, |b, v| if better_f(v, b, max) { v } else { b }));
        });
    } else {
        p.for_each_group(|o, base| {
            let vals = offs.iter().map(|&r| x.i64(base + r));
            let best = if max { vals.max() } else { vals.min() };
            eo.set_i64(o, best.unwrap_or(0));
        });
    }
    Ok(())
}

/// `amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)`.
pub fn amax_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    amax_amin(args, true)
}

/// `amin.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)`.
pub fn amin_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    amax_amin(args, false)
}

/// argmax/argmin: the first position of the extreme value (the first NaN for floats).
fn arg_extreme(args: &KernelArgs<'_>, max: bool) -> KernelResult {
    let what = if max { "argmax" } else { "argmin" };
    let inp = args.tensor(0)?;
    let dim = args.opt_int(1)?;
    let keepdim = args.bool(2)?;
    let mut out = args.out(3)?;
    check_layouts(&inp, &out, what)?;
    if out.dtype != ScalarType::Long {
        return Err(kerr!("{what}: output dtype must be int64, got {}", out.dtype));
    }
    let p = match dim {
        Some(d) => Plan::new(inp.sizes(), Some(&[d]), keepdim)?,
        None => {
            // Over the flattened input; keepdim keeps every dim as 1.
            let mut p = Plan::new(inp.sizes(), None, keepdim)?;
            if !keepdim {
                p.out_sizes.clear();
            }
            p
        }
    };
    if p.red_offs.is_empty() {
        return Err(kerr!("{what}: cannot reduce over an empty dimension of input shape {:?}", inp.sizes()));
    }
    out.resize(&p.out_sizes)?;
    let x = Elems::of(&inp)?;
    let o: &mut [i64] = out.data_mut()?;
    let offs = &p.red_offs;
    p.for_each_group(|g, base| o[g] = extreme_position(&x, offs.iter().map(|&r| base + r), max).0 as i64);
    Ok(())
}

/// The position among `indices` (and the element index) of the first maximum (`max`) or
/// minimum; floats stop at the first NaN, as PyTorch's max/argmax do. `indices` must not be
/// empty (position 0 is returned otherwise).
pub(crate) fn extreme_position(x: &Elems<'_>, mut indices: impl Iterator<Item = usize>, max: bool) -> (usize, usize) {
    let Some(first) = indices.next() else { return (0, 0) };
    let (mut best, mut best_at) = (0usize, first);
    if matches!(x, Elems::F32(_) | Elems::F64(_) | Elems::F16(_) | Elems::BF16(_)) {
        let mut bv = x.f64(first);
        for (k, at) in indices.enumerate() {
            if bv.is_nan() {
                break;
            }
            let v = x.f64(at);
            if better_f(v, bv, max) {
                (best, best_at, bv) = (k + 1, at, v);
            }
        }
    } else {
        let mut bv = x.i64(first);
        for (k, at) in indices.enumerate() {
            let v = x.i64(at);
            if (max && v > bv) || (!max && v < bv) {
                (best, best_at, bv) = (k + 1, at, v);
            }
        }
    }
    (best, best_at)
}

/// `argmax.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)`.
pub fn argmax_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    arg_extreme(args, true)
}

/// `argmin.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)`.
pub fn argmin_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    arg_extreme(args, false)
}

// ---------------------------------------------------------------------------------------------
// cumsum
// ---------------------------------------------------------------------------------------------

/// (outer, dim size, inner) of a tensor split around `d`.
fn split_at_dim(sizes: &[usize], d: usize) -> (usize, usize, usize) {
    if sizes.is_empty() {
        return (1, 1, 1);
    }
    (sizes[..d].iter().product(), sizes[d], sizes[d + 1..].iter().product())
}

/// `cumsum.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out)`: args = [self,
/// dim, dtype, out, out]. The output dtype decides the arithmetic (bool/int → int64 in PyTorch).
pub fn cumsum_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let d = normalize_dim(args.int(1)?, inp.dim())?;
    let dtype = args.opt_scalar_type(2)?;
    let mut out = args.out(3)?;
    check_layouts(&inp, &out, "cumsum")?;
    if let Some(dt) = dtype.filter(|&dt| dt != out.dtype) {
        return Err(kerr!("cumsum: dtype argument {dt} differs from the output dtype {}", out.dtype));
    }
    out.resize(inp.sizes())?;
    let (outer, n, inner) = split_at_dim(inp.sizes(), d);
    let x = Elems::of(&inp)?;
    let mut eo = ElemsMut::of(&mut out)?;
    let floating = eo.is_floating();
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let (mut fa, mut ia) = (0f64, 0i64);
            for k in 0..n {
                let at = base + k * inner;
                if floating {
                    fa += x.f64(at);
                    eo.set_f64(at, fa);
                } else {
                    ia = ia.wrapping_add(x.i64(at));
                    eo.set_i64(at, ia);
                }
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// softmax / log_softmax
// ---------------------------------------------------------------------------------------------

/// Softmax (or log-softmax) of one strided row of f32 values, max-subtracted for stability.
/// A row of all -inf yields NaN, as in PyTorch.
pub(crate) fn softmax_row_f32(x: &[f32], o: &mut [f32], base: usize, n: usize, stride: usize, log: bool) {
    let at = |k: usize| base + k * stride;
    let m = (0..n).map(|k| x[at(k)]).fold(f32::NEG_INFINITY, |a, v| if v > a || v.is_nan() { v } else { a });
    let mut sum = 0f64;
    for k in 0..n {
        let e = libm::expf(x[at(k)] - m);
        sum += e as f64;
        if !log {
            o[at(k)] = e;
        }
    }
    if log {
        let ls = libm::log(sum) as f32;
        for k in 0..n {
            o[at(k)] = x[at(k)] - m - ls;
        }
    } else {
        let inv = (1.0 / sum) as f32;
        for k in 0..n {
            o[at(k)] *= inv;
        }
    }
}

fn softmax_impl(args: &KernelArgs<'_>, log: bool) -> KernelResult {
    let what = if log { "_log_softmax" } else { "_softmax" };
    let inp = args.tensor(0)?;
    let d = normalize_dim(args.int(1)?, inp.dim())?;
    let half_to_float = args.bool(2)?;
    let mut out = args.out(3)?;
    check_layouts(&inp, &out, what)?;
    if !inp.dtype.is_floating() || !out.dtype.is_floating() {
        return Err(kerr!("{what}: expects floating tensors, got input {} and output {}", inp.dtype, out.dtype));
    }
    if half_to_float && !(inp.dtype == ScalarType::Half && out.dtype == ScalarType::Float) {
        return Err(kerr!("{what}: half_to_float needs a Half input and a Float output"));
    }
    if !half_to_float && inp.dtype != out.dtype {
        return Err(kerr!("{what}: input dtype {} differs from output dtype {}", inp.dtype, out.dtype));
    }
    out.resize(inp.sizes())?;
    let (outer, n, inner) = split_at_dim(inp.sizes(), d);
    if n == 0 {
        return Ok(());
    }
    if inp.dtype == ScalarType::Float && out.dtype == ScalarType::Float {
        let x: &[f32] = inp.data()?;
        let o: &mut [f32] = out.data_mut()?;
        for g in 0..outer {
            for i in 0..inner {
                softmax_row_f32(x, o, g * n * inner + i, n, inner, log);
            }
        }
        return Ok(());
    }
    // Other float dtypes compute in f64.
    let x = Elems::of(&inp)?;
    let mut eo = ElemsMut::of(&mut out)?;
    let mut row = vec![0f64; n];
    for g in 0..outer {
        for i in 0..inner {
            let base = g * n * inner + i;
            for (k, r) in row.iter_mut().enumerate() {
                *r = x.f64(base + k * inner);
            }
            let m = row.iter().copied().fold(f64::NEG_INFINITY, |a, v| if v > a || v.is_nan() { v } else { a });
            let sum: f64 = row.iter().map(|&v| libm::exp(v - m)).sum();
            for (k, &v) in row.iter().enumerate() {
                let y = if log { v - m - libm::log(sum) } else { libm::exp(v - m) / sum };
                eo.set_f64(base + k * inner, y);
            }
        }
    }
    Ok(())
}

/// `_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)`: args = [self,
/// dim, half_to_float, out, out].
pub fn softmax_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    softmax_impl(args, false)
}

/// `_log_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)`.
pub fn log_softmax_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    softmax_impl(args, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portable::test_util::iota;
    use rbuild_runtime::harness::OpHarness;

    fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= tol || (x.is_nan() && y.is_nan()), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn mean_last_and_spatial_keepdim() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &iota(6));
        let dims = h.int_list(&[-1]);
        let (f, none) = (h.bool(false), h.none());
        let out = h.out(ScalarType::Float, &[2]);
        h.call(mean_out, &[x, dims, f, none, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![1., 4.]);

        let y = h.f32(&[1, 2, 2, 2], &iota(8));
        let hw = h.int_list(&[-1, -2]);
        let t = h.bool(true);
        let out2 = h.out(ScalarType::Float, &[1, 2, 1, 1]);
        h.call(mean_out, &[y, hw, t, none, out2, out2]).unwrap();
        assert_eq!(h.read::<f32>(out2), vec![1.5, 5.5]);

        // dim 0 (not trailing) and dim=None (all)
        let d0 = h.int_list(&[0]);
        let out3 = h.out(ScalarType::Float, &[3]);
        h.call(mean_out, &[x, d0, f, none, out3, out3]).unwrap();
        assert_eq!(h.read::<f32>(out3), vec![1.5, 2.5, 3.5]);
        let out4 = h.out(ScalarType::Double, &[]);
        let x64 = h.tensor::<f64>(ScalarType::Double, &[4], &[1., 2., 3., 4.]);
        h.call(mean_out, &[x64, none, f, none, out4, out4]).unwrap();
        assert_eq!(h.read::<f64>(out4), vec![2.5]);
    }

    /// f32 means sum in f32 in memory order, as ExecuTorch's portable kernel does: 1e8 + 1
    /// rounds back to 1e8, so [1e8, 1, −1e8] averages to 0 (f64 would give 1/3).
    #[test]
    fn f32_mean_sums_in_f32_like_executorch() {
        let mut h = OpHarness::new();
        let (f, none) = (h.bool(false), h.none());
        let x = h.f32(&[3, 2], &[1e8, 0., 1., 0., -1e8, 0.]);
        let dim0 = h.int_list(&[0]);
        let out = h.out(ScalarType::Float, &[2]);
        h.call(mean_out, &[x, dim0, f, none, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 0.]);
        let y = h.f32(&[1, 3], &[1e8, 1., -1e8]);
        let last = h.int_list(&[-1]);
        let out2 = h.out(ScalarType::Float, &[1]);
        h.call(mean_out, &[y, last, f, none, out2, out2]).unwrap();
        assert_eq!(h.read::<f32>(out2), vec![0.]);
    }

    #[test]
    fn mean_rejects_integer_output() {
        let mut h = OpHarness::new();
        let x = h.i64(&[2], &[1, 2]);
        let (none, f) = (h.none(), h.bool(false));
        let out = h.out(ScalarType::Long, &[]);
        let e = h.call(mean_out, &[x, none, f, none, out, out]).unwrap_err();
        assert!(e.message.contains("not floating"), "{e}");
    }

    #[test]
    fn sum_bool_to_int64_and_middle_dim() {
        let mut h = OpHarness::new();
        let m = h.bool_tensor(&[2, 3], &[true, true, false, false, true, true]);
        let dims = h.int_list(&[1]);
        let (f, none) = (h.bool(false), h.none());
        let out = h.out(ScalarType::Long, &[2]);
        h.call(sum_intlist_out, &[m, dims, f, none, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![2, 2]);
        let x = h.f32(&[2, 3, 2], &iota(12));
        let out2 = h.out(ScalarType::Float, &[2, 2]);
        h.call(sum_intlist_out, &[x, dims, f, none, out2, out2]).unwrap();
        assert_eq!(h.read::<f32>(out2), vec![6., 9., 24., 27.]);
    }

    #[test]
    fn any_variants() {
        let mut h = OpHarness::new();
        let m = h.bool_tensor(&[2, 3], &[false, true, false, false, false, false]);
        let (d, t) = (h.int(-1), h.bool(true));
        let out = h.out(ScalarType::Bool, &[2, 1]);
        h.call(any_out, &[m, d, t, out, out]).unwrap();
        assert_eq!(h.read_bool(out), vec![true, false]);
        let x = h.f32(&[3, 2], &[0., 0., 0.5, 0., 0., 0.]);
        let (d0, f) = (h.int(0), h.bool(false));
        let out2 = h.out(ScalarType::Bool, &[2]);
        h.call(any_out, &[x, d0, f, out2, out2]).unwrap();
        assert_eq!(h.read_bool(out2), vec![true, false]);
        let out3 = h.out(ScalarType::Bool, &[]);
        h.call(any_all_out, &[x, out3, out3]).unwrap();
        assert_eq!(h.read_bool(out3), vec![true]);
    }

    #[test]
    fn amax_amin_propagate_nan() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[1., 5., -2., 3., f32::NAN, 0.]);
        let (dims, f) = (h.int_list(&[1]), h.bool(false));
        let out = h.out(ScalarType::Float, &[2]);
        h.call(amax_out, &[x, dims, f, out, out]).unwrap();
        let got = h.read::<f32>(out);
        assert_eq!(got[0], 5.);
        assert!(got[1].is_nan());
        let y = h.i64(&[2, 2], &[4, -7, 2, 9]);
        let all = h.int_list(&[]);
        let out2 = h.out(ScalarType::Long, &[]);
        h.call(amin_out, &[y, all, f, out2, out2]).unwrap();
        assert_eq!(h.read::<i64>(out2), vec![-7]);
    }

    #[test]
    fn argmax_first_occurrence() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[1., 7., 7., 9., 0., 9.]);
        let (d, f, none) = (h.int(1), h.bool(false), h.none());
        let out = h.out(ScalarType::Long, &[2]);
        h.call(argmax_out, &[x, d, f, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![1, 0]);
        let out2 = h.out(ScalarType::Long, &[]);
        h.call(argmin_out, &[x, none, f, out2, out2]).unwrap();
        assert_eq!(h.read::<i64>(out2), vec![4]);
    }

    #[test]
    fn cumsum_int_and_float() {
        let mut h = OpHarness::new();
        let m = h.bool_tensor(&[2, 3], &[true, false, true, true, true, false]);
        let (d, none) = (h.int(-1), h.none());
        let out = h.out(ScalarType::Long, &[2, 3]);
        h.call(cumsum_out, &[m, d, none, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![1, 1, 2, 1, 2, 2]);
        let x = h.f32(&[3, 2], &iota(6));
        let d0 = h.int(0);
        let out2 = h.out(ScalarType::Float, &[3, 2]);
        h.call(cumsum_out, &[x, d0, none, out2, out2]).unwrap();
        assert_eq!(h.read::<f32>(out2), vec![0., 1., 2., 4., 6., 9.]);
    }

    #[test]
    fn softmax_rows_and_inf() {
        let mut h = OpHarness::new();
        let ninf = f32::NEG_INFINITY;
        let x = h.f32(&[3, 3], &[0., 0., 0., 1000., 0., ninf, ninf, ninf, ninf]);
        let (d, f) = (h.int(-1), h.bool(false));
        let out = h.out(ScalarType::Float, &[3, 3]);
        h.call(softmax_out, &[x, d, f, out, out]).unwrap();
        let got = h.read::<f32>(out);
        close(&got[..6], &[1. / 3., 1. / 3., 1. / 3., 1., 0., 0.], 1e-7);
        assert!(got[6..].iter().all(|v| v.is_nan()));

        // dim 0 on [2, 2]: columns
        let y = h.f32(&[2, 2], &[0., 1., 2., 1.]);
        let d0 = h.int(0);
        let out2 = h.out(ScalarType::Float, &[2, 2]);
        h.call(softmax_out, &[y, d0, f, out2, out2]).unwrap();
        let e2 = (2f32).exp();
        close(&h.read::<f32>(out2), &[1. / (1. + e2), 0.5, e2 / (1. + e2), 0.5], 1e-6);
        let out3 = h.out(ScalarType::Float, &[2, 2]);
        h.call(log_softmax_out, &[y, d0, f, out3, out3]).unwrap();
        close(&h.read::<f32>(out3), &[-(1. + e2).ln(), -(2f32).ln(), 2. - (1. + e2).ln(), -(2f32).ln()], 1e-6);
    }

    #[test]
    fn softmax_double_matches_f32_formula() {
        let mut h = OpHarness::new();
        let x = h.tensor::<f64>(ScalarType::Double, &[2], &[0., 2f64.ln()]);
        let (d, f) = (h.int(0), h.bool(false));
        let out = h.out(ScalarType::Double, &[2]);
        h.call(softmax_out, &[x, d, f, out, out]).unwrap();
        let got = h.read::<f64>(out);
        assert!((got[0] - 1. / 3.).abs() < 1e-15 && (got[1] - 2. / 3.).abs() < 1e-15, "{got:?}");
        let i = h.i64(&[2], &[1, 2]);
        let out2 = h.out(ScalarType::Long, &[2]);
        assert!(h.call(softmax_out, &[i, d, f, out2, out2]).is_err());
    }
}
