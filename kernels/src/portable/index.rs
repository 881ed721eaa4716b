//! Indexing operators: advanced indexing (`index.Tensor`), embedding lookup, `index_select`
//! and `gather`. All copy raw elements, so they work for every dtype.

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::{normalize_dim, KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::util::{broadcast_shapes, broadcast_strides, for_each_broadcast, require_contiguous, Elems};

rbuild_runtime::kernel_table! {
    "aten::index.Tensor_out" => index_tensor_out,
    "aten::embedding.out" => embedding_out,
    "aten::index_select.out" => index_select_out,
    "aten::gather.out" => gather_out,
}

pub(crate) fn contiguous_strides(sizes: &[usize]) -> Vec<usize> {
    let mut st = vec![1usize; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * sizes[d + 1];
    }
    st
}

/// Checks the shared preconditions: same dtype, contiguous layouts.
pub(crate) fn check_io(inp: &TensorRef<'_>, out: &TensorMut<'_>, what: &str) -> KernelResult {
    if inp.dtype != out.dtype {
        return Err(kerr!("{what}: input dtype {} differs from output dtype {}", inp.dtype, out.dtype));
    }
    require_contiguous(inp, what)?;
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("{what}: output dim order {:?} is not supported (contiguous only)", out.dim_order));
    }
    Ok(())
}

/// An integer index tensor's values as i64 (Long/Int and other integer dtypes).
pub(crate) fn index_values(t: &TensorRef<'_>, what: &str) -> KernelResult<Vec<i64>> {
    if !t.dtype.is_integral(false) {
        return Err(kerr!("{what}: index tensor must be an integer tensor, got {}", t.dtype));
    }
    require_contiguous(t, what)?;
    let e = Elems::of(t)?;
    Ok((0..e.len()).map(|i| e.i64(i)).collect())
}

fn wrap(i: i64, size: usize, what: &str) -> KernelResult<usize> {
    wrap_once(i, size).ok_or_else(|| kerr!("{what}: index {i} is out of bounds for a dim of size {size}"))
}

// ---------------------------------------------------------------------------------------------
// index.Tensor
// ---------------------------------------------------------------------------------------------

/// An output axis of advanced indexing: a plain input dim (by stride) or the broadcast index
/// block, whose source offsets come from a precomputed table.
#[derive(Clone, Copy)]
enum Axis {
    Stride(usize),
    Table,
}

/// Where `self[indices]` (NumPy-style advanced indexing) reads from: the result's shape and,
/// for each contiguous block of the result, the element offset it starts at in `self`.
/// Shared by `index.Tensor` (gathers the blocks) and `index_put` (writes into them).
///
/// Integer index tensors (Long/Int) broadcast together and negative indices wrap once; bool
/// (or byte) masks stand for their nonzero positions; None entries keep their dim. When the
/// indexed dims are adjacent the broadcast block replaces them in place, otherwise it leads the
/// result.
pub(crate) struct IndexPlan {
    /// The shape of `self[indices]`.
    pub out_sizes: Vec<usize>,
    /// Elements per contiguous block (the dims after the last indexed one).
    pub block: usize,
    axes: Vec<(usize, Axis)>,
    table: Vec<usize>,
}

/// One resolved index: integer positions with their shape, and where it came from in the list.
struct IndexVals {
    sizes: Vec<usize>,
    vals: Vec<i64>,
    arg: usize,
}

impl IndexPlan {
    /// Resolves `indices` (a `Tensor?[]`) against a contiguous tensor of `sizes`; errors name
    /// `what`, the offending `indices[k]` entry and value.
    pub fn new(sizes: &[usize], raw: &[Option<TensorRef<'_>>], what: &str) -> KernelResult<IndexPlan> {
        let rank = sizes.len();
        // Resolve masks into one integer index per masked dim.
        let mut resolved: Vec<Option<IndexVals>> = Vec::new();
        for (arg, t) in raw.iter().enumerate() {
            let Some(t) = t else {
                resolved.push(None);
                continue;
            };
            match t.dtype {
                ScalarType::Bool | ScalarType::Byte => {
                    let at = resolved.len();
                    let k = t.dim();
                    if at + k > rank || t.sizes() != &sizes[at..at + k] {
                        return Err(kerr!(
                            "{what}: mask indices[{arg}] of shape {:?} does not match the indexed tensor's shape {sizes:?} at dim {at}",
                            t.sizes()
                        ));
                    }
                    require_contiguous(t, what)?;
                    let mask: &[u8] = t.data()?;
                    for vals in nonzero(mask, t.sizes()) {
                        resolved.push(Some(IndexVals { sizes: vec![vals.len()], vals, arg }));
                    }
                }
                ScalarType::Long | ScalarType::Int => {
                    let vals = index_values(t, what)?;
                    resolved.push(Some(IndexVals { sizes: t.sizes().to_vec(), vals, arg }));
                }
                d => {
                    return Err(kerr!("{what}: indices[{arg}] has dtype {d}; index tensors must be Long, Int, Byte or Bool"))
                }
            }
        }
        if resolved.len() > rank {
            return Err(kerr!("{what}: too many indices ({}) for a tensor of rank {rank}", resolved.len()));
        }
        resolved.resize_with(rank, || None);

        let indexed: Vec<usize> = (0..rank).filter(|&d| resolved[d].is_some()).collect();
        let strides = contiguous_strides(sizes);
        let (Some(&first), Some(&last)) = (indexed.first(), indexed.last()) else {
            // No index tensors: the whole tensor is one block.
            let numel = checked_numel(sizes, what)?;
            return Ok(IndexPlan { out_sizes: sizes.to_vec(), block: numel, axes: Vec::new(), table: Vec::new() });
        };

        // Broadcast the index tensors and turn every block position into a source offset.
        let mut bshape: Vec<usize> = Vec::new();
        for iv in resolved.iter().flatten() {
            bshape = broadcast_shapes(&bshape, &iv.sizes)
                .map_err(|_| kerr!("{what}: index tensors of shapes {bshape:?} and {:?} (indices[{}]) cannot be broadcast together", iv.sizes, iv.arg))?;
        }
        let nb = checked_numel(&bshape, what)?;
        let mut table = vec![0usize; nb];
        for &d in &indexed {
            let Some(iv) = resolved[d].as_ref() else { continue };
            let st = broadcast_strides(&iv.sizes, &bshape)?;
            let mut bad: Option<i64> = None;
            for_each_broadcast(&bshape, [&st], |o, [i]| match wrap_once(iv.vals[i], sizes[d]) {
                Some(w) => table[o] += w * strides[d],
                None => {
                    bad.get_or_insert(iv.vals[i]);
                }
            });
            if let Some(v) = bad {
                return Err(kerr!(
                    "{what}: index {v} in indices[{}] is out of bounds for dim {d} of size {}",
                    iv.arg,
                    sizes[d]
                ));
            }
        }

        // Result axes; the dims after the last indexed one stay a contiguous block.
        let adjacent = last - first + 1 == indexed.len();
        let block: usize = sizes[last + 1..].iter().product();
        let mut axes: Vec<(usize, Axis)> = Vec::new();
        let plain_before = (0..last).filter(|d| resolved[*d].is_none());
        if adjacent {
            axes.extend(plain_before.map(|d| (sizes[d], Axis::Stride(strides[d]))));
            axes.push((nb, Axis::Table));
        } else {
            axes.push((nb, Axis::Table));
            axes.extend(plain_before.map(|d| (sizes[d], Axis::Stride(strides[d]))));
        }
        let mut out_sizes: Vec<usize> = Vec::new();
        for &(n, a) in &axes {
            match a {
                Axis::Table => out_sizes.extend_from_slice(&bshape),
                Axis::Stride(_) => out_sizes.push(n),
            }
        }
        out_sizes.extend_from_slice(&sizes[last + 1..]);
        checked_numel(&out_sizes, what)?;
        Ok(IndexPlan { out_sizes, block, axes, table })
    }

    /// Elements of the result.
    pub fn numel(&self) -> usize {
        self.out_sizes.iter().product()
    }

    /// Calls `f(block number, source element offset)` for every block of the result, in
    /// row-major order (block `b` covers result elements `b * block .. (b + 1) * block`).
    pub fn for_each_block(&self, mut f: impl FnMut(usize, usize)) {
        let outer: usize = self.axes.iter().map(|a| a.0).product();
        if self.block == 0 || outer == 0 {
            return;
        }
        let mut idx = vec![0usize; self.axes.len()];
        for o in 0..outer {
            let off: usize = self
                .axes
                .iter()
                .zip(&idx)
                .map(|(&(_, a), &i)| match a {
                    Axis::Stride(s) => i * s,
                    Axis::Table => self.table[i],
                })
                .sum();
            f(o, off);
            for k in (0..self.axes.len()).rev() {
                idx[k] += 1;
                if idx[k] < self.axes[k].0 {
                    break;
                }
                idx[k] = 0;
            }
        }
    }
}

/// `index.Tensor_out(Tensor self, Tensor?[] indices, *, Tensor(a!) out)`: args = [self, indices,
/// out, out]. See [`IndexPlan`] for the indexing rules.
pub fn index_tensor_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let raw = args.opt_tensor_list(1)?;
    let mut out = args.out(2)?;
    check_io(&inp, &out, "index.Tensor")?;
    let plan = IndexPlan::new(inp.sizes(), &raw, "index.Tensor")?;
    out.resize(&plan.out_sizes)?;
    let esize = inp.dtype.size();
    let bb = plan.block * esize;
    let src = inp.bytes();
    let dst = out.bytes_mut();
    plan.for_each_block(|o, off| {
        dst[o * bb..(o + 1) * bb].copy_from_slice(&src[off * esize..off * esize + bb]);
    });
    Ok(())
}

/// A possibly negative index wrapped once into `0..size`, or None when out of range.
pub(crate) fn wrap_once(i: i64, size: usize) -> Option<usize> {
    let n = i64::try_from(size).ok()?;
    let w = if i < 0 { i.checked_add(n)? } else { i };
    (0..n).contains(&w).then_some(w as usize)
}

/// The product of `sizes`, or an error when it overflows.
pub(crate) fn checked_numel(sizes: &[usize], what: &str) -> KernelResult<usize> {
    sizes
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| kerr!("{what}: shape {sizes:?} has too many elements"))
}

/// Row-major coordinates of the nonzero entries of a mask: one vector per mask dim.
pub(crate) fn nonzero(mask: &[u8], sizes: &[usize]) -> Vec<Vec<i64>> {
    let k = sizes.len();
    let mut coords = vec![Vec::new(); k];
    let strides = contiguous_strides(sizes);
    for (i, &m) in mask.iter().enumerate() {
        if m != 0 {
            for d in 0..k {
                coords[d].push(((i / strides[d]) % sizes[d]) as i64);
            }
        }
    }
    coords
}

// ---------------------------------------------------------------------------------------------
// embedding, index_select, gather
// ---------------------------------------------------------------------------------------------

/// `embedding.out(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False,
/// bool sparse=False, *, Tensor(a!) out)`: args = [weight, indices, padding_idx, scale_grad_by_freq,
/// sparse, out, out]. Output shape = indices.shape + [embedding_dim].
pub fn embedding_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let weight = args.tensor(0)?;
    let indices = args.tensor(1)?;
    let mut out = args.out(5)?;
    check_io(&weight, &out, "embedding")?;
    if weight.dim() != 2 {
        return Err(kerr!("embedding: weight must be 2-D, got shape {:?}", weight.sizes()));
    }
    let (rows, dim) = (weight.sizes()[0], weight.sizes()[1]);
    let ids = index_values(&indices, "embedding")?;
    let mut sizes = indices.sizes().to_vec();
    sizes.push(dim);
    out.resize(&sizes)?;
    let rb = dim * weight.dtype.size();
    let src = weight.bytes();
    let dst = out.bytes_mut();
    for (j, &id) in ids.iter().enumerate() {
        if id < 0 || id as usize >= rows {
            return Err(kerr!("embedding: index {id} is out of range for {rows} rows"));
        }
        let r = id as usize;
        dst[j * rb..(j + 1) * rb].copy_from_slice(&src[r * rb..(r + 1) * rb]);
    }
    Ok(())
}

/// `index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out)`: args = [self, dim,
/// index, out, out].
pub fn index_select_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let index = args.tensor(2)?;
    let mut out = args.out(3)?;
    check_io(&inp, &out, "index_select")?;
    if index.dim() > 1 {
        return Err(kerr!("index_select: index must be 0-D or 1-D, got shape {:?}", index.sizes()));
    }
    let ids = index_values(&index, "index_select")?;
    let esize = inp.dtype.size();
    if inp.dim() == 0 {
        normalize_dim(args.int(1)?, 0)?;
        if ids.len() != 1 {
            return Err(kerr!("index_select: a 0-dim input takes exactly one index, got {}", ids.len()));
        }
        wrap(ids[0], 1, "index_select")?;
        out.resize(&[])?;
        out.bytes_mut().copy_from_slice(inp.bytes());
        return Ok(());
    }
    let d = normalize_dim(args.int(1)?, inp.dim())?;
    let sizes = inp.sizes();
    let mut out_sizes = sizes.to_vec();
    out_sizes[d] = ids.len();
    out.resize(&out_sizes)?;
    let outer: usize = sizes[..d].iter().product();
    let ib: usize = sizes[d + 1..].iter().product::<usize>() * esize;
    let rows = ids.iter().map(|&i| wrap(i, sizes[d], "index_select")).collect::<KernelResult<Vec<_>>>()?;
    let src = inp.bytes();
    let dst = out.bytes_mut();
    for o in 0..outer {
        for (j, &r) in rows.iter().enumerate() {
            let s = (o * sizes[d] + r) * ib;
            let t = (o * rows.len() + j) * ib;
            dst[t..t + ib].copy_from_slice(&src[s..s + ib]);
        }
    }
    Ok(())
}

/// `gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False, Tensor(a!) out)`:
/// args = [self, dim, index, sparse_grad, out, out]. out[p] = self[p with p[dim] = index[p]].
pub fn gather_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let inp = args.tensor(0)?;
    let index = args.tensor(2)?;
    let mut out = args.out(4)?;
    check_io(&inp, &out, "gather")?;
    let rank = inp.dim();
    let d = normalize_dim(args.int(1)?, rank)?;
    let isizes = index.sizes().to_vec();
    if index.dim() != rank && !(rank == 0 && index.dim() <= 1) {
        return Err(kerr!("gather: index rank {} differs from input rank {rank}", index.dim()));
    }
    let ids = index_values(&index, "gather")?;
    if rank > 0 {
        for k in 0..rank {
            if k != d && isizes[k] > inp.sizes()[k] {
                return Err(kerr!("gather: index shape {isizes:?} exceeds input shape {:?} at dim {k}", inp.sizes()));
            }
        }
    }
    out.resize(&isizes)?;
    let esize = inp.dtype.size();
    let (src, dst) = (inp.bytes(), out.bytes_mut());
    if rank == 0 {
        for (o, &i) in ids.iter().enumerate() {
            wrap(i, 1, "gather")?;
            dst[o * esize..(o + 1) * esize].copy_from_slice(src);
        }
        return Ok(());
    }
    let sst = contiguous_strides(inp.sizes());
    let partial: Vec<usize> = (0..rank).map(|k| if k == d { 0 } else { sst[k] }).collect();
    let dsize = inp.sizes()[d];
    let mut bad = None;
    for_each_broadcast(&isizes, [&partial], |o, [off]| {
        let v = ids[o];
        if v < 0 || v as usize >= dsize {
            bad.get_or_insert(v);
            return;
        }
        let s = (off + v as usize * sst[d]) * esize;
        dst[o * esize..(o + 1) * esize].copy_from_slice(&src[s..s + esize]);
    });
    match bad {
        Some(v) => Err(kerr!("gather: index {v} is out of bounds for dim {d} of size {dsize}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::portable::test_util::iota;
    use rbuild_runtime::harness::OpHarness;

    #[test]
    fn index_rows_with_negative() {
        let mut h = OpHarness::new();
        let x = h.f32(&[6, 3], &iota(18));
        let i = h.i64(&[4], &[5, 0, -1, 2]);
        let list = h.opt_tensor_list(&[Some(i)]);
        let out = h.out(ScalarType::Float, &[4, 3]);
        h.call(index_tensor_out, &[x, list, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![15., 16., 17., 0., 1., 2., 15., 16., 17., 6., 7., 8.]);
    }

    #[test]
    fn index_none_prefix() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 4, 2], &iota(16));
        let i = h.i64(&[3], &[3, 1, 1]);
        let list = h.opt_tensor_list(&[None, Some(i)]);
        let out = h.out(ScalarType::Float, &[2, 3, 2]);
        h.call(index_tensor_out, &[x, list, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![6., 7., 2., 3., 2., 3., 14., 15., 10., 11., 10., 11.]);
    }

    #[test]
    fn index_broadcast_pair() {
        let mut h = OpHarness::new();
        let x = h.f32(&[5, 6], &iota(30));
        let i = h.i64(&[2, 1], &[1, 4]);
        let j = h.tensor::<i32>(ScalarType::Int, &[1, 3], &[0, 5, -2]);
        let list = h.opt_tensor_list(&[Some(i), Some(j)]);
        let out = h.out(ScalarType::Float, &[2, 3]);
        h.call(index_tensor_out, &[x, list, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![6., 11., 10., 24., 29., 28.]);
    }

    #[test]
    fn index_non_adjacent_moves_block_first() {
        let mut h = OpHarness::new();
        // x[i, :, j] on [3, 2, 4] with i, j of shape [2]: result [2, 2].
        let x = h.f32(&[3, 2, 4], &iota(24));
        let i = h.i64(&[2], &[0, 2]);
        let j = h.i64(&[2], &[1, 3]);
        let list = h.opt_tensor_list(&[Some(i), None, Some(j)]);
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(index_tensor_out, &[x, list, out, out]).unwrap();
        // (0, :, 1) = [1, 5]; (2, :, 3) = [19, 23]
        assert_eq!(h.read::<f32>(out), vec![1., 5., 19., 23.]);
    }

    #[test]
    fn index_bool_mask_and_int64_data() {
        let mut h = OpHarness::new();
        let x = h.i64(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let m = h.bool_tensor(&[2, 3], &[true, false, true, false, false, true]);
        let list = h.opt_tensor_list(&[Some(m)]);
        let out = h.out_dynamic(ScalarType::Long, &[6]);
        h.call(index_tensor_out, &[x, list, out, out]).unwrap();
        assert_eq!(h.sizes(out), vec![3]);
        assert_eq!(h.read::<i64>(out), vec![1, 3, 6]);
    }

    #[test]
    fn index_higher_rank_indices_broadcast() {
        // The causal-mask pattern of LLM exports: a [1, 3] table indexed by [1,1,1,1] and
        // [1,1,3,1] index tensors gives a [1,1,3,1] result.
        let mut h = OpHarness::new();
        let x = h.i64(&[1, 3], &[10, 20, 30]);
        let i = h.i64(&[1, 1, 1, 1], &[0]);
        let j = h.i64(&[1, 1, 3, 1], &[2, 0, 1]);
        let list = h.opt_tensor_list(&[Some(i), Some(j)]);
        let out = h.out(ScalarType::Long, &[1, 1, 3, 1]);
        h.call(index_tensor_out, &[x, list, out, out]).unwrap();
        assert_eq!(h.read::<i64>(out), vec![30, 10, 20]);
    }

    #[test]
    fn index_out_of_range_errors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[3], &[1., 2., 3.]);
        let i = h.i64(&[1], &[3]);
        let list = h.opt_tensor_list(&[Some(i)]);
        let out = h.out(ScalarType::Float, &[1]);
        let e = h.call(index_tensor_out, &[x, list, out, out]).unwrap_err();
        assert!(e.message.contains("out of bounds"), "{e}");
    }

    #[test]
    fn embedding_gathers_rows() {
        let mut h = OpHarness::new();
        let w = h.f32(&[4, 2], &iota(8));
        let ids = h.i64(&[2, 2], &[3, 0, 3, 1]);
        let (p, f) = (h.int(-1), h.bool(false));
        let out = h.out(ScalarType::Float, &[2, 2, 2]);
        h.call(embedding_out, &[w, ids, p, f, f, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![6., 7., 0., 1., 6., 7., 2., 3.]);
        let bad = h.i64(&[1], &[4]);
        let out2 = h.out(ScalarType::Float, &[1, 2]);
        assert!(h.call(embedding_out, &[w, bad, p, f, f, out2, out2]).is_err());
    }

    #[test]
    fn index_select_dim1() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &iota(6));
        let d = h.int(1);
        let i = h.i64(&[2], &[2, 0]);
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(index_select_out, &[x, d, i, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![2., 0., 5., 3.]);
    }

    #[test]
    fn gather_dim1() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &iota(6));
        let d = h.int(1);
        let i = h.i64(&[2, 2], &[2, 0, 1, 1]);
        let sg = h.bool(false);
        let out = h.out(ScalarType::Float, &[2, 2]);
        h.call(gather_out, &[x, d, i, sg, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), vec![2., 0., 4., 4.]);
        let bad = h.i64(&[2, 2], &[3, 0, 1, 1]);
        assert!(h.call(gather_out, &[x, d, bad, sg, out, out]).is_err());
    }
}
