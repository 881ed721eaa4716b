//! Shape and copy operators: views materialized as copies (`*_copy`), concatenation, repeat,
//! splitting and ExecuTorch's dim-order copies.
//!
//! Most of these ops describe their result as a strided view of the input (sizes, element
//! strides and a start offset) and share one byte-level gather, so they work for every dtype.
//! Inputs and outputs may have any dim order: input strides come from the input's dim order,
//! and the output is written in its own dim order.

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::{normalize_dim, KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr};

use super::util::{for_each_broadcast, normalize_dims, to_sizes, Elems, ElemsMut};
// The strided helpers moved to their own module; other kernel modules still name them here.
pub(super) use super::strided::{check_dtype, dim_order_strides, gather_bytes, physical_view, strides_of, write_view};
use super::strided::require_contiguous_out;

rbuild_runtime::kernel_table! {
    "aten::view_copy.out" => view_copy_out,
    "aten::permute_copy.out" => permute_copy_out,
    "aten::transpose_copy.int_out" => transpose_copy_int_out,
    "aten::unsqueeze_copy.out" => unsqueeze_copy_out,
    "aten::squeeze_copy.out" => squeeze_copy_out,
    "aten::squeeze_copy.dim_out" => squeeze_copy_dim_out,
    "aten::squeeze_copy.dims_out" => squeeze_copy_dims_out,
    "aten::expand_copy.out" => expand_copy_out,
    "aten::slice_copy.Tensor_out" => slice_copy_tensor_out,
    "aten::select_copy.int_out" => select_copy_int_out,
    "aten::cat.out" => cat_out,
    "aten::repeat.out" => repeat_out,
    "aten::alias_copy.out" => alias_copy_out,
    "aten::clone.out" => clone_out,
    "aten::split_with_sizes_copy.out" => split_with_sizes_copy_out,
    "aten::split_copy.Tensor_out" => split_copy_tensor_out,
    "aten::unbind_copy.int_out" => unbind_copy_int_out,
    "dim_order_ops::_clone_dim_order.out" => clone_dim_order_out,
    "dim_order_ops::_to_dim_order_copy.out" => to_dim_order_copy_out,
    "aten::_to_copy.out" => to_copy_out,
    "aten::copy_" => copy_,
}

// ---------------------------------------------------------------------------------------------
// View-like copies
// ---------------------------------------------------------------------------------------------

/// Resolves a `view` size list (at most one -1) against `numel`.
fn infer_view_sizes(size: &[i64], numel: usize) -> KernelResult<Vec<usize>> {
    let mut infer = None;
    let mut known = 1usize;
    for (i, &s) in size.iter().enumerate() {
        if s == -1 {
            if infer.replace(i).is_some() {
                return Err(kerr!("view size {size:?} has more than one -1"));
            }
        } else if s < 0 {
            return Err(kerr!("view size {size:?} has a negative entry"));
        } else {
            known = known.checked_mul(s as usize).ok_or_else(|| kerr!("view size {size:?} overflows"))?;
        }
    }
    let mut out: Vec<usize> = size.iter().map(|&s| s.max(0) as usize).collect();
    if let Some(i) = infer {
        if known == 0 || numel / known * known != numel {
            return Err(kerr!("view size {size:?} is invalid for {numel} elements"));
        }
        out[i] = numel / known;
    } else if known != numel {
        return Err(kerr!("view size {size:?} is invalid for {numel} elements"));
    }
    Ok(out)
}

/// Copies `inp` into `out` with new sizes: the row-major element order is kept.
fn reshape_into(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, sizes: &[usize], what: &str) -> KernelResult {
    check_dtype(inp, out)?;
    if !inp.dim_order.is_contiguous() {
        return Err(kerr!("{what}: input dim order {:?} is not supported (contiguous only)", inp.dim_order));
    }
    require_contiguous_out(out, what)?;
    out.resize(sizes)?;
    let n = inp.bytes().len();
    let dst = out.bytes_mut();
    if dst.len() != n {
        return Err(kerr!("{what}: output holds {} bytes, input {n}", dst.len()));
    }
    dst.copy_from_slice(inp.bytes());
    Ok(())
}

/// `view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out)`: args = [self, size, out, out].
pub fn view_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let sizes = infer_view_sizes(&args.int_list(1)?, inp.numel())?;
    let mut out = args.out(2)?;
    reshape_into(&inp, &mut out, &sizes, "view_copy")
}

/// `permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out)`: args = [self, dims, out, out].
pub fn permute_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let dims = args.int_list(1)?;
    let rank = inp.dim();
    if dims.len() != rank {
        return Err(kerr!("permute dims {dims:?} do not match input rank {rank}"));
    }
    let dims = normalize_dims(&dims, rank)?;
    let st = strides_of(&inp);
    let sizes: Vec<usize> = dims.iter().map(|&d| inp.sizes()[d]).collect();
    let strides: Vec<usize> = dims.iter().map(|&d| st[d]).collect();
    let mut out = args.out(2)?;
    write_view(&inp, &mut out, &sizes, &strides, 0)
}

/// `transpose_copy.int_out(Tensor self, int dim0, int dim1, *, Tensor(a!) out)`.
pub fn transpose_copy_int_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let rank = inp.dim();
    let d0 = normalize_dim(args.int(1)?, rank)?;
    let d1 = normalize_dim(args.int(2)?, rank)?;
    let mut sizes = inp.sizes().to_vec();
    let mut strides = strides_of(&inp);
    if rank > 0 {
        sizes.swap(d0, d1);
        strides.swap(d0, d1);
    }
    let mut out = args.out(3)?;
    write_view(&inp, &mut out, &sizes, &strides, 0)
}

/// `unsqueeze_copy.out(Tensor self, int dim, *, Tensor(a!) out)`.
pub fn unsqueeze_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let d = normalize_dim(args.int(1)?, inp.dim() + 1)?;
    let mut sizes = inp.sizes().to_vec();
    let mut strides = strides_of(&inp);
    sizes.insert(d, 1);
    strides.insert(d, 0);
    let mut out = args.out(2)?;
    write_view(&inp, &mut out, &sizes, &strides, 0)
}

/// Removes the dims in `drop` that have size 1 (others are kept, as PyTorch does).
fn squeeze_into(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, drop: &[usize]) -> KernelResult {
    let st = strides_of(inp);
    let (mut sizes, mut strides) = (Vec::new(), Vec::new());
    for (d, &s) in inp.sizes().iter().enumerate() {
        if !(s == 1 && drop.contains(&d)) {
            sizes.push(s);
            strides.push(st[d]);
        }
    }
    write_view(inp, out, &sizes, &strides, 0)
}

/// `squeeze_copy.out(Tensor self, *, Tensor(a!) out)`: drops every size-1 dim.
pub fn squeeze_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let all: Vec<usize> = (0..inp.dim()).collect();
    squeeze_into(&inp, &mut args.out(1)?, &all)
}

/// `squeeze_copy.dim_out(Tensor self, int dim, *, Tensor(a!) out)`.
pub fn squeeze_copy_dim_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let d = normalize_dim(args.int(1)?, inp.dim())?;
    squeeze_into(&inp, &mut args.out(2)?, &[d])
}

/// `squeeze_copy.dims_out(Tensor self, int[] dim, *, Tensor(a!) out)`.
pub fn squeeze_copy_dims_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let dims = if inp.dim() == 0 { Vec::new() } else { normalize_dims(&args.int_list(1)?, inp.dim())? };
    squeeze_into(&inp, &mut args.out(2)?, &dims)
}

/// `expand_copy.out(Tensor self, SymInt[] size, *, bool implicit=False, Tensor(a!) out)`:
/// args = [self, size, implicit, out, out]. -1 keeps a dim; new dims may only lead.
pub fn expand_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let target = args.int_list(1)?;
    let rank = inp.dim();
    if target.len() < rank {
        return Err(kerr!("expand size {target:?} has fewer dims than the input {:?}", inp.sizes()));
    }
    let lead = target.len() - rank;
    let st = strides_of(&inp);
    let mut sizes = Vec::with_capacity(target.len());
    let mut strides = Vec::with_capacity(target.len());
    for (i, &t) in target.iter().enumerate() {
        if i < lead {
            if t < 0 {
                return Err(kerr!("expand size {target:?}: new leading dim {i} must be non-negative"));
            }
            sizes.push(t as usize);
            strides.push(0);
            continue;
        }
        let s = inp.sizes()[i - lead];
        if t == -1 || t as usize == s && t >= 0 {
            sizes.push(s);
            strides.push(st[i - lead]);
        } else if s == 1 && t >= 0 {
            sizes.push(t as usize);
            strides.push(0);
        } else {
            return Err(kerr!("cannot expand input of shape {:?} to {target:?}", inp.sizes()));
        }
    }
    let mut out = args.out(3)?;
    write_view(&inp, &mut out, &sizes, &strides, 0)
}

/// PyTorch's clamping of slice bounds: returns (start, length).
pub(super) fn slice_bounds(size: usize, start: Option<i64>, end: Option<i64>, step: i64) -> KernelResult<(usize, usize)> {
    if step <= 0 {
        return Err(kerr!("slice step must be positive, got {step}"));
    }
    let n = size as i64;
    let clamp = |v: i64| -> i64 {
        let v = if v < 0 { v.saturating_add(n) } else { v };
        v.clamp(0, n)
    };
    let s = clamp(start.unwrap_or(0));
    let e = clamp(end.unwrap_or(i64::MAX)).max(s);
    // ceil((e - s) / step) without overflowing for a huge step.
    let len = if e > s { (e - s - 1) / step + 1 } else { 0 };
    Ok((s as usize, len as usize))
}

/// `slice_copy.Tensor_out(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None,
/// SymInt step=1, *, Tensor(a!) out)`: args = [self, dim, start, end, step, out, out].
pub fn slice_copy_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    if inp.dim() == 0 {
        return Err(kerr!("slice_copy: cannot slice a 0-dim tensor"));
    }
    let d = normalize_dim(args.int(1)?, inp.dim())?;
    let step = args.int(4)?;
    let (start, len) = slice_bounds(inp.sizes()[d], args.opt_int(2)?, args.opt_int(3)?, step)?;
    let mut sizes = inp.sizes().to_vec();
    let mut strides = strides_of(&inp);
    let base = if len == 0 { 0 } else { start * strides[d] };
    sizes[d] = len;
    // The step only applies between two elements (and may be huge otherwise).
    strides[d] = if len > 1 { strides[d] * step as usize } else { 0 };
    let mut out = args.out(5)?;
    write_view(&inp, &mut out, &sizes, &strides, base)
}

/// `select_copy.int_out(Tensor self, int dim, SymInt index, *, Tensor(a!) out)`.
pub fn select_copy_int_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    if inp.dim() == 0 {
        return Err(kerr!("select_copy: cannot select from a 0-dim tensor"));
    }
    let d = normalize_dim(args.int(1)?, inp.dim())?;
    let i = wrap_index(args.int(2)?, inp.sizes()[d])?;
    let mut out = args.out(3)?;
    select_into(&inp, &mut out, d, i)
}

fn select_into(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, d: usize, i: usize) -> KernelResult {
    let mut sizes = inp.sizes().to_vec();
    let mut strides = strides_of(inp);
    let base = i * strides[d];
    sizes.remove(d);
    strides.remove(d);
    write_view(inp, out, &sizes, &strides, base)
}

pub(super) fn wrap_index(i: i64, size: usize) -> KernelResult<usize> {
    let n = size as i64;
    let w = if i < 0 { i + n } else { i };
    if w < 0 || w >= n {
        return Err(kerr!("index {i} is out of range for a dim of size {size}"));
    }
    Ok(w as usize)
}

/// `repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out)`: args = [self, repeats, out, out].
pub fn repeat_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let reps = args.int_list(1)?;
    if reps.len() < inp.dim() {
        return Err(kerr!("repeat dims {reps:?} fewer than the input's {} dims", inp.dim()));
    }
    let reps = to_sizes(&reps)?;
    let lead = reps.len() - inp.dim();
    let st = strides_of(&inp);
    // The contiguous result of sizes r_i*s_i is the contiguous layout of [r0, s0, r1, s1, ..]
    // where each repeat axis re-reads the source (stride 0).
    let mut vsizes = Vec::with_capacity(2 * reps.len());
    let mut vstrides = Vec::with_capacity(2 * reps.len());
    let mut out_sizes = Vec::with_capacity(reps.len());
    for (i, &r) in reps.iter().enumerate() {
        let (s, t) = if i < lead { (1, 0) } else { (inp.sizes()[i - lead], st[i - lead]) };
        vsizes.extend([r, s]);
        vstrides.extend([0, t]);
        out_sizes.push(r * s);
    }
    let mut out = args.out(2)?;
    check_dtype(&inp, &out)?;
    require_contiguous_out(&out, "repeat")?;
    out.resize(&out_sizes)?;
    if out.numel() == 0 {
        return Ok(());
    }
    let esize = out.dtype.size();
    gather_bytes(inp.bytes(), out.bytes_mut(), esize, &vsizes, &vstrides)
}

// ---------------------------------------------------------------------------------------------
// Concatenation and splitting
// ---------------------------------------------------------------------------------------------

/// `cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out)`: args = [tensors, dim, out, out].
/// 1-D empty inputs are skipped (PyTorch's legacy rule); inputs are converted to out's dtype.
pub fn cat_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let all = args.tensor_list(0)?;
    let dim = args.int(1)?;
    let mut out = args.out(2)?;
    let parts: Vec<&TensorRef<'_>> = all.iter().filter(|t| !(t.dim() == 1 && t.numel() == 0)).collect();
    let Some(first) = parts.first() else {
        return out.resize(&[0]);
    };
    let rank = first.dim();
    if rank == 0 {
        return Err(kerr!("cat: zero-dim tensors cannot be concatenated"));
    }
    let d = normalize_dim(dim, rank)?;
    let mut sizes = first.sizes().to_vec();
    sizes[d] = 0;
    for t in &parts {
        let ok = t.dim() == rank && t.sizes().iter().enumerate().all(|(k, &s)| k == d || s == first.sizes()[k]);
        if !ok {
            return Err(kerr!("cat: shape {:?} does not match {:?} outside dim {d}", t.sizes(), first.sizes()));
        }
        if !t.dim_order.is_contiguous() {
            return Err(kerr!("cat: input dim order {:?} is not supported (contiguous only)", t.dim_order));
        }
        sizes[d] += t.sizes()[d];
    }
    require_contiguous_out(&out, "cat")?;
    out.resize(&sizes)?;
    let outer: usize = sizes[..d].iter().product();
    let inner: usize = sizes[d + 1..].iter().product();
    let row = sizes[d] * inner;
    if parts.iter().all(|t| t.dtype == out.dtype) {
        let esize = out.dtype.size();
        let dst = out.bytes_mut();
        let mut col = 0;
        for t in &parts {
            let chunk = t.sizes()[d] * inner * esize;
            let src = t.bytes();
            for o in 0..outer {
                let at = (o * row + col) * esize;
                dst[at..at + chunk].copy_from_slice(&src[o * chunk..(o + 1) * chunk]);
            }
            col += t.sizes()[d] * inner;
        }
    } else {
        let mut eo = ElemsMut::of(&mut out)?;
        let mut col = 0;
        for t in &parts {
            let chunk = t.sizes()[d] * inner;
            let src = Elems::of(t)?;
            for o in 0..outer {
                for k in 0..chunk {
                    eo.copy_from(o * row + col + k, &src, o * chunk + k);
                }
            }
            col += chunk;
        }
    }
    Ok(())
}

/// Writes consecutive slices of `inp` along `d` with the given lengths into `outs`.
fn split_into(inp: &TensorRef<'_>, outs: &mut [TensorMut<'_>], d: usize, lens: &[usize]) -> KernelResult {
    if outs.len() != lens.len() {
        return Err(kerr!("split produces {} pieces but {} outputs were given", lens.len(), outs.len()));
    }
    let total: usize = lens.iter().sum();
    if total != inp.sizes()[d] {
        return Err(kerr!("split sizes {lens:?} do not sum to dim {d} of size {}", inp.sizes()[d]));
    }
    let strides = strides_of(inp);
    let mut start = 0;
    for (out, &len) in outs.iter_mut().zip(lens) {
        let mut sizes = inp.sizes().to_vec();
        sizes[d] = len;
        let base = if len == 0 { 0 } else { start * strides[d] };
        write_view(inp, out, &sizes, &strides, base)?;
        start += len;
    }
    Ok(())
}

/// `split_with_sizes_copy.out(Tensor self, SymInt[] split_sizes, int dim=0, *, Tensor(a!)[] out)`:
/// args = [self, split_sizes, dim, out_list, ..].
pub fn split_with_sizes_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    if inp.dim() == 0 {
        return Err(kerr!("split_with_sizes_copy: cannot split a 0-dim tensor"));
    }
    let lens = to_sizes(&args.int_list(1)?)?;
    let d = normalize_dim(args.int(2)?, inp.dim())?;
    let mut outs = args.out_list(3)?;
    split_into(&inp, &mut outs, d, &lens)
}

/// `split_copy.Tensor_out(Tensor self, SymInt split_size, int dim=0, *, Tensor(a!)[] out)`.
pub fn split_copy_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    if inp.dim() == 0 {
        return Err(kerr!("split_copy: cannot split a 0-dim tensor"));
    }
    let split = args.int(1)?;
    let d = normalize_dim(args.int(2)?, inp.dim())?;
    let size = inp.sizes()[d];
    if split < 0 || (split == 0 && size != 0) {
        return Err(kerr!("split_copy: split_size {split} is invalid for a dim of size {size}"));
    }
    let split = split as usize;
    let lens: Vec<usize> = if size == 0 {
        vec![0]
    } else {
        (0..size.div_ceil(split)).map(|i| split.min(size - i * split)).collect()
    };
    let mut outs = args.out_list(3)?;
    split_into(&inp, &mut outs, d, &lens)
}

/// `unbind_copy.int_out(Tensor self, int dim=0, *, Tensor(a!)[] out)`.
pub fn unbind_copy_int_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    if inp.dim() == 0 {
        return Err(kerr!("unbind_copy: cannot unbind a 0-dim tensor"));
    }
    let d = normalize_dim(args.int(1)?, inp.dim())?;
    let mut outs = args.out_list(2)?;
    if outs.len() != inp.sizes()[d] {
        return Err(kerr!("unbind_copy: {} outputs for a dim of size {}", outs.len(), inp.sizes()[d]));
    }
    for (i, out) in outs.iter_mut().enumerate() {
        select_into(&inp, out, d, i)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Plain and dim-order copies
// ---------------------------------------------------------------------------------------------

/// Copies `inp` into `out` (same sizes), converting the dtype and the memory layout (dim order)
/// as needed.
pub(super) fn copy_convert(inp: &TensorRef<'_>, out: &mut TensorMut<'_>) -> KernelResult {
    let sizes = inp.sizes().to_vec();
    if out.dim_order.as_slice().len() != sizes.len() {
        return Err(kerr!("output dim order {:?} does not match rank {}", out.dim_order, sizes.len()));
    }
    if inp.dtype == out.dtype {
        let st = strides_of(inp);
        return write_view(inp, out, &sizes, &st, 0);
    }
    out.resize(&sizes)?;
    let ei = Elems::of(inp)?;
    if inp.dim_order == out.dim_order {
        let mut eo = ElemsMut::of(out)?;
        convert_linear(&ei, &mut eo);
        return Ok(());
    }
    let (psizes, pstrides) = physical_view(&sizes, &strides_of(inp), out.dim_order.as_slice());
    let mut eo = ElemsMut::of(out)?;
    for_each_broadcast(&psizes, [&pstrides], |o, [i]| eo.copy_from(o, &ei, i));
    Ok(())
}

/// Element-by-element dtype conversion in storage order, with direct loops for the common
/// casts (int64/bool <-> float) and the generic converter otherwise.
fn convert_linear(src: &Elems<'_>, dst: &mut ElemsMut<'_>) {
    match (src, &mut *dst) {
        (Elems::I64(s), ElemsMut::F32(d)) => d.iter_mut().zip(s.iter()).for_each(|(d, &s)| *d = s as f32),
        (Elems::F32(s), ElemsMut::I64(d)) => d.iter_mut().zip(s.iter()).for_each(|(d, &s)| *d = s as i64),
        (Elems::Bool(s), ElemsMut::F32(d)) => d.iter_mut().zip(s.iter()).for_each(|(d, &s)| *d = (s != 0) as u8 as f32),
        (Elems::I32(s), ElemsMut::F32(d)) => d.iter_mut().zip(s.iter()).for_each(|(d, &s)| *d = s as f32),
        _ => {
            for i in 0..src.len() {
                dst.copy_from(i, src, i);
            }
        }
    }
}

/// Checks an explicit `dim_order` argument against the output's dim order.
pub(super) fn check_dim_order_arg(arg: Option<Vec<i64>>, out: &TensorMut<'_>, rank: usize) -> KernelResult {
    let Some(order) = arg else { return Ok(()) };
    let valid = order.len() == rank && {
        let mut seen = vec![false; rank];
        order.iter().all(|&d| d >= 0 && (d as usize) < rank && !core::mem::replace(&mut seen[d as usize], true))
    };
    if !valid {
        return Err(kerr!("dim_order {order:?} is not a permutation of 0..{rank}"));
    }
    let matches = out.dim_order.as_slice().iter().zip(&order).all(|(&a, &b)| a as i64 == b) && out.dim_order.as_slice().len() == rank;
    if !matches {
        return Err(kerr!("dim_order {order:?} does not match the output's dim order {:?}", out.dim_order));
    }
    Ok(())
}

/// `alias_copy.out(Tensor self, *, Tensor(a!) out)`.
pub fn alias_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let mut out = args.out(1)?;
    check_dtype(&inp, &out)?;
    copy_convert(&inp, &mut out)
}

/// `clone.out(Tensor self, *, MemoryFormat? memory_format=None, Tensor(a!) out)`: the output's
/// dim order decides the layout.
pub fn clone_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let mut out = args.out(2)?;
    check_dtype(&inp, &out)?;
    copy_convert(&inp, &mut out)
}

/// `_clone_dim_order.out(Tensor self, *, bool non_blocking=False, int[]? dim_order=None,
/// Tensor(a!) out)`: args = [self, non_blocking, dim_order, out, out].
pub fn clone_dim_order_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let mut out = args.out(3)?;
    check_dtype(&inp, &out)?;
    check_dim_order_arg(args.opt_int_list(2)?, &out, inp.dim())?;
    copy_convert(&inp, &mut out)
}

/// `_to_dim_order_copy.out(Tensor self, *, bool non_blocking=False, int[]? dim_order=None,
/// Tensor(a!) out)`: ExecuTorch's `.to(dtype/memory_format)`; out's dtype may differ (floats
/// truncate toward zero into integers, bools become 0/1).
pub fn to_dim_order_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let mut out = args.out(3)?;
    check_dim_order_arg(args.opt_int_list(2)?, &out, inp.dim())?;
    copy_convert(&inp, &mut out)
}

/// `_to_copy.out(Tensor self, *, bool non_blocking=False, MemoryFormat? memory_format=None,
/// Tensor(a!) out)`: args = [self, non_blocking, memory_format, out, out]. ATen's
/// `.to(dtype)`: floats truncate toward zero into integers, nonzero becomes true; the output's
/// dim order decides the layout.
pub fn to_copy_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    if args.bool(1)? {
        return Err(kerr!("_to_copy: non_blocking copies are not supported"));
    }
    // MemoryFormat codes: 0 contiguous, 1 preserve (the output's layout either way).
    if let Some(format) = args.opt_int(2)?.filter(|f| !matches!(f, 0 | 1)) {
        return Err(kerr!("_to_copy: memory_format {format} is not supported (contiguous or preserve)"));
    }
    let mut out = args.out(3)?;
    copy_convert(&inp, &mut out)
}

/// `copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)`: args = [self,
/// src, non_blocking, self again]. Writes `src`, broadcast to self's shape, into self: how a
/// program stores a buffer's new value into its mutable state.
pub fn copy_(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let src = args.tensor(1)?;
    if args.bool(2)? {
        return Err(kerr!("copy_: non_blocking copies are not supported"));
    }
    let mut dst = args.out(0)?;
    let sizes = dst.sizes().to_vec();
    let (src_sizes, src_strides) = (src.sizes(), strides_of(&src));
    if src_sizes.len() > sizes.len() {
        return Err(kerr!("copy_: source of shape {src_sizes:?} cannot be broadcast to {sizes:?}"));
    }
    // Source strides over the destination's dims: 0 where the source is broadcast.
    let lead = sizes.len() - src_sizes.len();
    let mut strides = vec![0usize; sizes.len()];
    for (k, (&n, &st)) in src_sizes.iter().zip(&src_strides).enumerate() {
        match n {
            _ if n == sizes[lead + k] => strides[lead + k] = st,
            1 => {}
            _ => return Err(kerr!("copy_: source of shape {src_sizes:?} cannot be broadcast to {sizes:?}")),
        }
    }
    write_view(&src, &mut dst, &sizes, &strides, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portable::test_util::{iota, set_dim_order};
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    #[test]
    fn view_infers_minus_one() {
        let mut h = OpHarness::new();
        let x = h.f32(&[3, 2, 5], &iota(30));
        let size = h.int_list(&[-1, 10]);
        let out = h.out(ScalarType::Float, &[3, 10]);
        h.call(view_copy_out, &[x, size, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), iota(30));
        let bad = h.int_list(&[-1, 7]);
        let e = h.call(view_copy_out, &[x, bad, out, out]).unwrap_err();
        assert!(e.message.contains("invalid for 30"), "{e}");
    }

    #[test]
    fn permute_with_negative_dims() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3, 4], &iota(24));
        let dims = h.int_list(&[-1, 0, 1]);
        let out = h.out(ScalarType::Float, &[4, 2, 3]);
        h.call(permute_copy_out, &[x, dims, out, out]).unwrap();
        // out[k][i][j] = x[i][j][k] = 12i + 4j + k
        let mut want = Vec::new();
        for k in 0..4 {
            for i in 0..2 {
                for j in 0..3 {
                    want.push((12 * i + 4 * j + k) as f32);
                }
            }
        }
        assert_eq!(h.read::<f32>(out), want);
    }

    #[test]
    fn large_transpose_int64_uses_tiles_correctly() {
        let mut h = OpHarness::new();
        let (r, c) = (37usize, 70usize);
        let data: Vec<i64> = (0..(r * c) as i64).collect();
        let x = h.i64(&[r, c], &data);
        let d0 = h.int(0);
        let d1 = h.int(-1);
        let out = h.out(ScalarType::Long, &[c, r]);
        h.call(transpose_copy_int_out, &[x, d0, d1, out, out]).unwrap();
        let got = h.read::<i64>(out);
        for j in 0..c {
            for i in 0..r {
                assert_eq!(got[j * r + i], (i * c + j) as i64);
            }
        }
    }

    #[test]
    fn unsqueeze_squeeze_int64() {
        let mut h = OpHarness::new();
        let x = h.i64(&[2, 5], &(0..10).collect::<Vec<i64>>());
        let d = h.int(-1);
        let out = h.out(ScalarType::Long, &[2, 5, 1]);
        h.call(unsqueeze_copy_out, &[x, d, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), (0..10).collect::<Vec<i64>>());
        let y = h.i64(&[1, 3, 1], &[7, 8, 9]);
        let dims = h.int_list(&[0, -1, 1]);
        let out2 = h.out(ScalarType::Long, &[3]);
        h.call(squeeze_copy_dims_out, &[y, dims, out2, out2]).unwrap();
        assert_eq!(h.read::<i64>(out2), vec![7, 8, 9]);
        let dim = h.int(2);
        let out3 = h.out(ScalarType::Long, &[1, 3]);
        h.call(squeeze_copy_dim_out, &[y, dim, out3, out3]).unwrap();
        assert_eq!(h.sizes(out3), vec![1, 3]);
    }

    #[test]
    fn expand_new_leading_and_minus_one() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 4], &[1., 2., 3., 4.]);
        let size = h.int_list(&[2, 3, -1]);
        let imp = h.bool(false);
        let out = h.out(ScalarType::Float, &[2, 3, 4]);
        h.call(expand_copy_out, &[x, size, imp, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), [1., 2., 3., 4.].repeat(6));
        let y = h.f32(&[3, 1], &[1., 2., 3.]);
        let size = h.int_list(&[3, 2]);
        let out2 = h.out(ScalarType::Float, &[3, 2]);
        h.call(expand_copy_out, &[y, size, imp, out2, out2]).unwrap();
        assert_eq!(h.read::<f32>(out2), vec![1., 1., 2., 2., 3., 3.]);
        let bad = h.int_list(&[3, 4, 2]);
        assert!(h.call(expand_copy_out, &[x, bad, imp, out, out]).is_err());
    }

    #[test]
    fn slice_clamps_like_pytorch() {
        let mut h = OpHarness::new();
        let x = h.f32(&[7, 2], &iota(14));
        let (d, s, e, st) = (h.int(0), h.int(-3), h.int(i64::MAX), h.int(1));
        let out = h.out(ScalarType::Float, &[3, 2]);
        h.call(slice_copy_tensor_out, &[x, d, s, e, st, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![8., 9., 10., 11., 12., 13.]);
        let (s2, e2) = (h.int(2), h.int(100));
        let out2 = h.out(ScalarType::Float, &[5, 2]);
        h.call(slice_copy_tensor_out, &[x, d, s2, e2, st, out2, out2]).unwrap();
        assert_eq!(h.read::<f32>(out2), iota(14)[4..].to_vec());
        // x[..., ::2] on [2, 5] with None bounds
        let y = h.f32(&[2, 5], &iota(10));
        let (d1, none, two) = (h.int(-1), h.none(), h.int(2));
        let out3 = h.out(ScalarType::Float, &[2, 3]);
        h.call(slice_copy_tensor_out, &[y, d1, none, none, two, out3, out3]).unwrap();
        assert_eq!(h.read::<f32>(out3), vec![0., 2., 4., 5., 7., 9.]);
        let zero = h.int(0);
        assert!(h.call(slice_copy_tensor_out, &[y, d1, none, none, zero, out3, out3]).is_err());
    }

    #[test]
    fn select_negative_index() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &iota(6));
        let (d, i) = (h.int(1), h.int(-1));
        let out = h.out(ScalarType::Float, &[2]);
        h.call(select_copy_int_out, &[x, d, i, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![2., 5.]);
        let i3 = h.int(3);
        assert!(h.call(select_copy_int_out, &[x, d, i3, out, out]).is_err());
    }

    #[test]
    fn cat_skips_empty_and_converts() {
        let mut h = OpHarness::new();
        let a = h.f32(&[2, 1], &[1., 2.]);
        let empty = h.f32(&[0], &[]);
        let b = h.i64(&[2, 2], &[3, 4, 5, 6]);
        let list = h.tensor_list(&[a, empty, b]);
        let d = h.int(-1);
        let out = h.out(ScalarType::Float, &[2, 3]);
        h.call(cat_out, &[list, d, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![1., 3., 4., 2., 5., 6.]);

        let c = h.i64(&[1, 2], &[7, 8]);
        let list2 = h.tensor_list(&[b, c]);
        let d0 = h.int(0);
        let out2 = h.out(ScalarType::Long, &[3, 2]);
        h.call(cat_out, &[list2, d0, out2, out2]).unwrap();
        assert_eq!(h.read::<i64>(out2), vec![3, 4, 5, 6, 7, 8]);
        let bad = h.tensor_list(&[a, c]);
        let e = h.call(cat_out, &[bad, d0, out2, out2]).unwrap_err();
        assert!(e.message.contains("does not match"), "{e}");
    }

    #[test]
    fn repeat_adds_dims() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 2], &[1., 2., 3., 4.]);
        let reps = h.int_list(&[2, 1, 2]);
        let out = h.out(ScalarType::Float, &[2, 2, 4]);
        h.call(repeat_out, &[x, reps, out, out]).unwrap();
        let one = vec![1., 2., 1., 2., 3., 4., 3., 4.];
        assert_eq!(h.read::<f32>(out), [one.clone(), one].concat());
    }

    #[test]
    fn split_with_sizes_into_list() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 5], &iota(10));
        let sizes = h.int_list(&[2, 3]);
        let d = h.int(1);
        let o1 = h.out(ScalarType::Float, &[2, 2]);
        let o2 = h.out(ScalarType::Float, &[2, 3]);
        let outs = h.tensor_list(&[o1, o2]);
        h.call(split_with_sizes_copy_out, &[x, sizes, d, outs]).unwrap();
        assert_eq!(h.read::<f32>(o1), vec![0., 1., 5., 6.]);
        assert_eq!(h.read::<f32>(o2), vec![2., 3., 4., 7., 8., 9.]);
        let bad = h.int_list(&[2, 2]);
        assert!(h.call(split_with_sizes_copy_out, &[x, bad, d, outs]).is_err());
    }

    #[test]
    fn to_dim_order_copy_casts() {
        let mut h = OpHarness::new();
        let x = h.f32(&[4], &[1.7, -1.7, 2.5, -0.2]);
        let nb = h.bool(false);
        let order = h.int_list(&[0]);
        let out = h.out(ScalarType::Long, &[4]);
        h.call(to_dim_order_copy_out, &[x, nb, order, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![1, -1, 2, 0]);

        let m = h.bool_tensor(&[3], &[true, false, true]);
        let out2 = h.out(ScalarType::Float, &[3]);
        h.call(to_dim_order_copy_out, &[m, nb, order, out2, out2]).unwrap();
        assert_eq!(h.read::<f32>(out2), vec![1., 0., 1.]);

        // 0-dim int64 -> float with an empty dim order
        let s = h.i64(&[], &[3]);
        let empty = h.int_list(&[]);
        let out3 = h.out(ScalarType::Float, &[]);
        h.call(to_dim_order_copy_out, &[s, nb, empty, out3, out3]).unwrap();
        assert_eq!(h.read::<f32>(out3), vec![3.]);
    }

    #[test]
    fn to_copy_casts_and_checks_its_options() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 2], &[1.7, -1.7, 0.0, -0.2]);
        let (nb, none) = (h.bool(false), h.none());
        let out = h.out(ScalarType::Long, &[2, 2]);
        h.call(to_copy_out, &[x, nb, none, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![1, -1, 0, 0]);
        let preserve = h.int(1);
        let flags = h.out(ScalarType::Bool, &[2, 2]);
        h.call(to_copy_out, &[x, nb, preserve, flags, flags]).unwrap();
        assert_eq!(h.read_bool(flags), vec![true, true, false, true]);
        let channels_last = h.int(2);
        let e = h.call(to_copy_out, &[x, nb, channels_last, out, out]).unwrap_err();
        assert!(e.message.contains("memory_format 2"), "{e}");
        let blocking = h.bool(true);
        assert!(h.call(to_copy_out, &[x, blocking, none, out, out]).is_err());
    }

    #[test]
    fn clone_dim_order_to_channels_last_and_back() {
        let mut h = OpHarness::new();
        // NCHW [1, 2, 2, 3]; channels-last stores (n, h, w, c).
        let x = h.f32(&[1, 2, 2, 3], &iota(12));
        let nb = h.bool(false);
        let cl = h.int_list(&[0, 2, 3, 1]);
        let out = h.out(ScalarType::Float, &[1, 2, 2, 3]);
        set_dim_order(&mut h, out, &[0, 2, 3, 1]);
        h.call(clone_dim_order_out, &[x, nb, cl, out, out]).unwrap();
        let mut want = Vec::new();
        for hh in 0..2 {
            for w in 0..3 {
                for c in 0..2 {
                    want.push((c * 6 + hh * 3 + w) as f32);
                }
            }
        }
        assert_eq!(h.read::<f32>(out), want);

        // Back to contiguous, converting to f64 on the way.
        let y = h.f32(&[1, 2, 2, 3], &want);
        set_dim_order(&mut h, y, &[0, 2, 3, 1]);
        let contig = h.int_list(&[0, 1, 2, 3]);
        let back = h.out(ScalarType::Double, &[1, 2, 2, 3]);
        h.call(to_dim_order_copy_out, &[y, nb, contig, back, back]).unwrap();
        assert_eq!(h.read::<f64>(back), (0..12).map(|i| i as f64).collect::<Vec<_>>());

        // A dim_order argument that disagrees with the output is an error.
        let plain = h.out(ScalarType::Float, &[1, 2, 2, 3]);
        let e = h.call(clone_dim_order_out, &[x, nb, cl, plain, plain]).unwrap_err();
        assert!(e.message.contains("does not match"), "{e}");
    }

    #[test]
    fn clone_rejects_dtype_mismatch() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2], &[1., 2.]);
        let none = h.none();
        let out = h.out(ScalarType::Long, &[2]);
        let e = h.call(clone_out, &[x, none, out, out]).unwrap_err();
        assert!(e.message.contains("dtype"), "{e}");
        let out2 = h.out(ScalarType::Float, &[2]);
        h.call(alias_copy_out, &[x, out2, out2]).unwrap();
        assert_eq!(h.read::<f32>(out2), vec![1., 2.]);
    }

    #[test]
    fn copy_in_place_broadcasts_the_source_into_the_destination() {
        let mut h = OpHarness::new();
        let dst = h.f32(&[2, 3], &[0.0; 6]);
        let row = h.f32(&[3], &[1.0, 2.0, 3.0]);
        let no = h.bool(false);
        h.call(copy_, &[dst, row, no, dst]).unwrap();
        assert_eq!(h.read::<f32>(dst), [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        let wrong = h.f32(&[2], &[1.0, 2.0]);
        let e = h.call(copy_, &[dst, wrong, no, dst]).unwrap_err();
        assert!(e.message.contains("cannot be broadcast"), "{e}");
    }
}
