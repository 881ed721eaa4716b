//! Shape inference of ops whose result size depends on the data (`nonzero`, `masked_select`,
//! `repeat_interleave` without `output_size`): that size is a new symbol with the op's worst
//! case as its bound. Memory is planned at the bound and the program's tensor is
//! DYNAMIC_BOUND; the kernel sizes its output from the data, and later ops read the real size
//! (`sym_size` of the result is the symbol's run-time value).

use rbuild_runtime::ScalarType;

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, Sym, TensorMeta};
use crate::shape::{broadcast, sym_of_value, tensor, Inferred};

/// Output metas and new symbols of the data-dependent `op`, or None when `op` is not one of
/// them. `bound` narrows the worst case (and stands in where the inputs give none).
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg], bound: Option<usize>) -> Option<Result<Inferred>> {
    let r = match op {
        "aten::nonzero" => tensor(g, op, args, 0).and_then(|x| {
            let rank = x.rank();
            let size = fresh(g, op, Some(numel_max(g, &x.shape)), bound)?;
            Ok(one(TensorMeta::new(ScalarType::Long, vec![size.0, Dim::Fixed(rank)]), size.1))
        }),
        "aten::masked_select" => masked_select(g, op, args, bound),
        "aten::repeat_interleave.Tensor" => repeat_interleave(g, op, args, bound),
        // Boolean-mask indexing (`x[mask]`); integer indices have static sizes (shape_layout.rs).
        "aten::index.Tensor" if has_mask(g, args) => masked_index(g, op, args, bound),
        _ => return None,
    };
    Some(r)
}

fn one(meta: TensorMeta, sym: Option<Sym>) -> Inferred {
    Inferred { metas: vec![meta], new_syms: sym.into_iter().collect() }
}

/// Largest element count of a tensor of `shape`.
fn numel_max(g: &Graph, shape: &[Dim]) -> usize {
    shape.iter().fold(1usize, |acc, &d| acc.saturating_mul(g.dim_max(d)))
}

/// A new symbol (numbered after the graph's) bounded by the smaller of `worst` and `bound`.
fn fresh(g: &Graph, op: &str, worst: Option<usize>, bound: Option<usize>) -> Result<(Dim, Option<Sym>)> {
    let max = match (worst, bound) {
        (Some(w), Some(b)) => w.min(b),
        (Some(m), None) | (None, Some(m)) => m,
        (None, None) => return Err(shape_err(op, "the result size depends on the data and has no worst case here: give its bound")),
    };
    let short = op.rsplit("::").next().unwrap_or(op).split('.').next().unwrap_or(op);
    let sym = Sym { name: format!("{short}_size{}", g.syms.len()), min: 0, max, value: None };
    Ok((Dim::Sym(g.syms.len()), Some(sym)))
}

/// `masked_select(self, mask)`: the elements of the broadcast pair where the bool mask is true.
fn masked_select(g: &Graph, op: &str, args: &[Arg], bound: Option<usize>) -> Result<Inferred> {
    let (x, mask) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
    if mask.dtype != ScalarType::Bool {
        return Err(shape_err(op, format!("mask must be bool, got {}", mask.dtype)));
    }
    let shape = broadcast(op, &x.shape, &mask.shape)?;
    let (size, sym) = fresh(g, op, Some(numel_max(g, &shape)), bound)?;
    Ok(one(TensorMeta::new(x.dtype, vec![size]), sym))
}

/// `repeat_interleave(repeats, output_size?)`: index i repeated repeats[i] times; the length is
/// `output_size` when given, else the data's sum (a worst case the caller must give).
fn repeat_interleave(g: &Graph, op: &str, args: &[Arg], bound: Option<usize>) -> Result<Inferred> {
    let repeats = tensor(g, op, args, 0)?;
    if repeats.rank() != 1 || !matches!(repeats.dtype, ScalarType::Long | ScalarType::Int) {
        return Err(shape_err(op, format!("repeats must be a 1-D int64 or int32 tensor, got {} {:?}", repeats.dtype, repeats.shape)));
    }
    let (size, sym) = match args.get(1) {
        Some(Arg::Int(n)) => {
            let n = usize::try_from(*n).map_err(|_| shape_err(op, format!("output_size {n} is negative")))?;
            (Dim::Fixed(n), None)
        }
        Some(Arg::SymInt(v)) => {
            let s = sym_of_value(g, *v).ok_or_else(|| shape_err(op, "output_size is a run-time value that is not a known dimension"))?;
            (Dim::Sym(s), None)
        }
        Some(Arg::None) => fresh(g, op, None, bound)?,
        other => return Err(shape_err(op, format!("output_size must be an int or None, got {other:?}"))),
    };
    Ok(one(TensorMeta::new(repeats.dtype, vec![size]), sym))
}

fn is_mask(m: &TensorMeta) -> bool {
    matches!(m.dtype, ScalarType::Bool | ScalarType::Byte)
}

fn has_mask(g: &Graph, args: &[Arg]) -> bool {
    matches!(args.get(1), Some(Arg::OptTensors(ix)) if ix.iter().flatten().any(|&i| is_mask(g.meta(i))))
}

/// `index(self, [None…, mask, None…])`: the mask's dims (which must match self's there) become
/// one dim of the true entries' count, at most the mask's size. A mask mixed with other index
/// tensors is not supported.
fn masked_index(g: &Graph, op: &str, args: &[Arg], bound: Option<usize>) -> Result<Inferred> {
    let x = tensor(g, op, args, 0)?;
    let Some(Arg::OptTensors(indices)) = args.get(1) else { unreachable!("has_mask checked the list") };
    let given: Vec<(usize, &TensorMeta)> = indices.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i, g.meta(v)))).collect();
    let [(at, mask)] = given[..] else {
        return Err(shape_err(op, "a boolean mask index must be the only index tensor (others None)"));
    };
    let end = at + mask.rank();
    if end > x.rank() || x.shape[at..end] != mask.shape[..] {
        return Err(shape_err(op, format!("mask {:?} at dim {at} does not match {:?}", mask.shape, x.shape)));
    }
    let (size, sym) = fresh(g, op, Some(numel_max(g, &mask.shape)), bound)?;
    let shape = x.shape[..at].iter().copied().chain([size]).chain(x.shape[end..].iter().copied()).collect();
    Ok(one(TensorMeta::new(x.dtype, shape), sym))
}
