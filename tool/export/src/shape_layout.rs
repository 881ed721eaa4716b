//! Shape inference of the copy forms of view ops (transpose, squeeze, …) and of indexing.

use rbuild_runtime::ScalarType;

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, TensorMeta};
use crate::graph::IntOrSym;
use crate::shape::{broadcast, int, ints, norm_dim, size_dims, sym_of_value, tensor, wrap_dim};

/// Output metas of the layout/indexing `op`, or None when `op` is not one of them.
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg]) -> Option<Result<Vec<TensorMeta>>> {
    let r = match op {
        "aten::alias_copy" => tensor(g, op, args, 0).map(|x| vec![x.clone()]),
        "aten::slice_copy.Tensor" => slice(g, op, args),
        "aten::expand_copy" => expand(g, op, args),
        "aten::transpose_copy.int" => transpose(g, op, args),
        "aten::unsqueeze_copy" => unsqueeze(g, op, args),
        "aten::squeeze_copy.dims" => squeeze(g, op, args),
        "aten::repeat" => repeat(g, op, args),
        "aten::split_with_sizes_copy" => split_with_sizes(g, op, args),
        "aten::index_select" => index_select(g, op, args),
        "aten::index.Tensor" => index(g, op, args),
        _ => return None,
    };
    Some(r)
}

/// `slice(self, dim, start?, end?, step)`: PyTorch's clamped bounds on a static dim; a
/// run-time `end` (a symbol's value) from 0 by 1 gives that symbol's length, and a symbolic
/// dim can only be kept whole.
fn slice(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let dim = norm_dim(op, int(op, args, 1)?, x.rank())?;
    let step = int(op, args, 4)?;
    if step <= 0 {
        return Err(shape_err(op, format!("step must be positive, got {step}")));
    }
    let bound = |i: usize| -> Result<Option<i64>> {
        match args.get(i) {
            Some(Arg::Int(v)) => Ok(Some(*v)),
            Some(Arg::None) => Ok(None),
            other => Err(shape_err(op, format!("argument {i} must be an int or None, got {other:?}"))),
        }
    };
    let mut shape = x.shape.clone();
    shape[dim] = match (x.shape[dim], args.get(3)) {
        (d, Some(Arg::SymInt(end))) => {
            let s = sym_of_value(g, *end).ok_or_else(|| shape_err(op, "end is a run-time value that is not a known dimension"))?;
            let fits = match d {
                Dim::Fixed(n) => n >= g.syms[s].max,
                Dim::Sym(t) => t == s,
            };
            if !matches!(bound(2)?, None | Some(0)) || step != 1 || !fits {
                return Err(shape_err(op, format!("a run-time end needs start 0, step 1 and a dim {d:?} of at least {}", g.syms[s].max)));
            }
            Dim::Sym(s)
        }
        (Dim::Fixed(n), _) => {
            let n = n as i64;
            // PyTorch's clamping: negative indices count from the end, then clamp to [0, n].
            let clamp = |v: i64| (if v < 0 { v.saturating_add(n) } else { v }).clamp(0, n);
            let start = clamp(bound(2)?.unwrap_or(0));
            let end = clamp(bound(3)?.unwrap_or(n)).max(start);
            Dim::Fixed(if end > start { ((end - start - 1) / step + 1) as usize } else { 0 })
        }
        (d @ Dim::Sym(_), _) => {
            let whole = matches!(bound(2)?, None | Some(0)) && step == 1 && bound(3)?.is_none_or(|e| e >= g.dim_max(d) as i64);
            if !whole {
                return Err(shape_err(op, format!("dim {dim} is a run-time size {d:?}: only the whole of it can be sliced")));
            }
            d
        }
    };
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `expand(self, size)`: -1 keeps a dim; size-1 dims stretch to fixed sizes or to run-time ones.
fn expand(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let size: Vec<IntOrSym> = match args.get(1) {
        Some(Arg::Ints(v)) => v.iter().map(|&n| IntOrSym::Int(n)).collect(),
        Some(Arg::SymInts(v)) => v.clone(),
        other => return Err(shape_err(op, format!("argument 1 must be a size list, got {other:?}"))),
    };
    if size.len() < x.rank() {
        return Err(shape_err(op, format!("size {size:?} has fewer dims than the input {:?}", x.shape)));
    }
    let lead = size.len() - x.rank();
    let bad = || shape_err(op, format!("cannot expand {:?} to {size:?}", x.shape));
    let shape = size
        .iter()
        .enumerate()
        .map(|(i, &item)| {
            let to = match item {
                IntOrSym::Int(-1) if i >= lead => return Ok(x.shape[i - lead]),
                IntOrSym::Int(n) => Dim::Fixed(usize::try_from(n).map_err(|_| bad())?),
                IntOrSym::Sym(v) => Dim::Sym(sym_of_value(g, v).ok_or_else(bad)?),
            };
            match i.checked_sub(lead).map(|j| x.shape[j]) {
                None => Ok(to),
                Some(d) if d == to || d == Dim::Fixed(1) => Ok(to),
                Some(_) => Err(bad()),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

fn transpose(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let (a, b) = (wrap_dim(op, int(op, args, 1)?, x.rank())?, wrap_dim(op, int(op, args, 2)?, x.rank())?);
    let mut shape = x.shape.clone();
    if !shape.is_empty() {
        shape.swap(a, b);
    }
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `unsqueeze(self, dim)`: dim in [-rank-1, rank].
fn unsqueeze(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let d = int(op, args, 1)?;
    let r = x.rank() as i64;
    let at = if d < 0 { d + r + 1 } else { d };
    if !(0..=r).contains(&at) {
        return Err(shape_err(op, format!("dim {d} out of range for rank {r}")));
    }
    let mut shape = x.shape.clone();
    shape.insert(at as usize, Dim::Fixed(1));
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `squeeze(self, dims)`: listed dims of size 1 go away; others stay.
fn squeeze(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let mut drop = vec![false; x.rank()];
    for &d in ints(op, args, 1)? {
        let i = wrap_dim(op, d, x.rank())?;
        if let Some(slot) = drop.get_mut(i) {
            *slot = x.shape[i] == Dim::Fixed(1);
        }
    }
    let shape = x.shape.iter().zip(&drop).filter(|(_, &d)| !d).map(|(&s, _)| s).collect();
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `repeat(self, repeats)`: leading repeats add dims; each dim is multiplied by its count.
fn repeat(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let reps = ints(op, args, 1)?;
    if reps.len() < x.rank() || reps.iter().any(|&r| r < 0) {
        return Err(shape_err(op, format!("repeats {reps:?} must be non-negative and at least as many as the dims of {:?}", x.shape)));
    }
    let lead = reps.len() - x.rank();
    let shape = reps
        .iter()
        .enumerate()
        .map(|(i, &r)| match (i.checked_sub(lead).map(|j| x.shape[j]), r) {
            (None, r) => Ok(Dim::Fixed(r as usize)),
            (Some(d), 1) => Ok(d),
            (Some(Dim::Fixed(n)), r) => n.checked_mul(r as usize).map(Dim::Fixed).ok_or_else(|| shape_err(op, format!("repeats {reps:?} overflow"))),
            (Some(d), r) => Err(shape_err(op, format!("cannot repeat the run-time dim {d:?} {r} times"))),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `split_with_sizes(self, sizes, dim)`: one output per size; the sizes must cover the dim.
fn split_with_sizes(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    if x.rank() == 0 {
        return Err(shape_err(op, "cannot split a rank-0 tensor"));
    }
    let d = wrap_dim(op, int(op, args, 2)?, x.rank())?;
    let sizes = size_dims(g, op, args, 1)?;
    let total = sizes.iter().try_fold(0usize, |acc, s| if let Dim::Fixed(n) = s { acc.checked_add(*n) } else { None });
    if total.map(Dim::Fixed) != Some(x.shape[d]) {
        return Err(shape_err(op, format!("sizes {sizes:?} do not add up to dim {d} of {:?}", x.shape)));
    }
    Ok(sizes
        .into_iter()
        .map(|s| {
            let mut shape = x.shape.clone();
            shape[d] = s;
            TensorMeta::new(x.dtype, shape)
        })
        .collect())
}

fn require_index(op: &str, m: &TensorMeta) -> Result<()> {
    if matches!(m.dtype, ScalarType::Long | ScalarType::Int) {
        Ok(())
    } else {
        Err(shape_err(op, format!("indices must be int64 or int32, got {}", m.dtype)))
    }
}

/// `index_select(self, dim, index)`: dim becomes the index's length.
fn index_select(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (x, index) = (tensor(g, op, args, 0)?, tensor(g, op, args, 2)?);
    require_index(op, index)?;
    if x.rank() == 0 || index.rank() > 1 {
        return Err(shape_err(op, format!("needs an input of rank >= 1 and a 1-D index, got {:?} and {:?}", x.shape, index.shape)));
    }
    let d = wrap_dim(op, int(op, args, 1)?, x.rank())?;
    let mut shape = x.shape.clone();
    shape[d] = index.shape.first().copied().unwrap_or(Dim::Fixed(1));
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `index(self, indices)` (advanced indexing with integer tensors): the indexed dims are
/// replaced by the indices' broadcast shape — in place when they are adjacent, else in front.
fn index(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let Some(Arg::OptTensors(indices)) = args.get(1) else {
        return Err(shape_err(op, format!("argument 1 must be a list of optional tensors, got {:?}", args.get(1))));
    };
    if indices.len() > x.rank() {
        return Err(shape_err(op, format!("{} indices for a tensor of rank {}", indices.len(), x.rank())));
    }
    let mut indexed_shape: Vec<Dim> = Vec::new();
    let mut positions = Vec::new();
    for (i, idx) in indices.iter().enumerate() {
        let Some(v) = idx else { continue };
        let m = g.meta(*v);
        if matches!(m.dtype, ScalarType::Bool | ScalarType::Byte) {
            // Masks give data-dependent sizes, inferred in shape_dynamic.rs before this rule.
            return Err(shape_err(op, format!("index {i} is a mask: its result size depends on the data")));
        }
        require_index(op, m)?;
        indexed_shape = broadcast(op, &indexed_shape, &m.shape)?;
        positions.push(i);
    }
    let (Some(&first), Some(&last)) = (positions.first(), positions.last()) else {
        return Err(shape_err(op, "needs at least one index tensor"));
    };
    let kept = |range: std::ops::Range<usize>| range.filter(|i| !positions.contains(i)).map(|i| x.shape[i]);
    let shape: Vec<Dim> = if last - first + 1 == positions.len() {
        kept(0..first).chain(indexed_shape).chain(kept(last + 1..x.rank())).collect()
    } else {
        indexed_shape.into_iter().chain(kept(0..x.rank())).collect()
    };
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}
