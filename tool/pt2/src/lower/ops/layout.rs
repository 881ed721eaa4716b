//! Views and indexing: the IR's `_copy` forms of ATen's views (values are immutable here, so a
//! copy computes the same), concatenation, splitting, gathers.

use rbuild_export::graph::{Arg, Dim, IntOrSym, ValueId};
use rbuild_export::promote::{result_type, Operand as Promoted};
use rbuild_runtime::{Scalar, ScalarType};

use super::{one, Call, Cx, Lowered, OpResult};

/// A dim index of a rank-`rank` tensor, negative ones counted from the end.
pub(super) fn wrap(d: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let i = if d < 0 { d + r } else { d };
    if (0..r.max(1)).contains(&i) {
        Ok(i as usize)
    } else {
        Err(format!("dim {d} out of range for rank {rank}"))
    }
}

fn size_arg(v: Option<IntOrSym>) -> Arg {
    match v {
        None => Arg::None,
        Some(IntOrSym::Int(i)) => Arg::Int(i),
        Some(IntOrSym::Sym(s)) => Arg::SymInt(s),
    }
}

/// `view`, `reshape`, `_unsafe_view`, `flatten`: to the result's shape as the archive records
/// it (its `-1` and symbolic entries resolved).
pub(super) fn reshape(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let dims = c.out_dims.clone().ok_or("the result's shape is not recorded in the archive")?;
    one(cx.view(x, &dims)?)
}

pub(super) fn permute(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let dims = cx.ints(&c.args, "dims")?;
    one(cx.call1("aten::permute_copy", vec![Arg::Tensor(x), Arg::Ints(dims)])?)
}

/// `transpose.int(self, dim0, dim1)`.
pub(super) fn transpose(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let (a, b) = (cx.int(&c.args, "dim0")?, cx.int(&c.args, "dim1")?);
    one(cx.call1("aten::transpose_copy.int", vec![Arg::Tensor(x), Arg::Int(a), Arg::Int(b)])?)
}

pub(super) fn unsqueeze(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let dim = cx.int(&c.args, "dim")?;
    one(cx.call1("aten::unsqueeze_copy", vec![Arg::Tensor(x), Arg::Int(dim)])?)
}

/// `squeeze` (every size-1 dim), `squeeze.dims`.
pub(super) fn squeeze(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let dims = match c.key {
        "aten::squeeze.dims" => cx.ints(&c.args, "dim")?,
        _ => cx.meta(x).shape.iter().enumerate().filter(|(_, &d)| d == Dim::Fixed(1)).map(|(i, _)| i as i64).collect(),
    };
    one(cx.call1("aten::squeeze_copy.dims", vec![Arg::Tensor(x), Arg::Ints(dims)])?)
}

/// `x` broadcast to `target` (`expand_copy`; a symbolic dim may only be kept, not created).
pub(crate) fn broadcast_to(cx: &mut Cx, x: ValueId, target: &[Dim]) -> Result<ValueId, String> {
    let shape = cx.meta(x).shape.clone();
    if shape == target {
        return Ok(x);
    }
    let lead = target.len().checked_sub(shape.len()).ok_or_else(|| format!("cannot expand {shape:?} to fewer dims {target:?}"))?;
    let sizes = target
        .iter()
        .enumerate()
        .map(|(i, &t)| match (i.checked_sub(lead).map(|j| shape[j]), t) {
            (Some(s), t) if s == t => Ok(-1),
            (None | Some(Dim::Fixed(1)), Dim::Fixed(n)) => Ok(n as i64),
            _ => Err(format!("cannot expand {shape:?} to {target:?} (a run-time size can only be kept)")),
        })
        .collect::<Result<Vec<i64>, String>>()?;
    cx.call1("aten::expand_copy", vec![Arg::Tensor(x), Arg::Ints(sizes), Arg::Bool(false)])
}

pub(super) fn expand(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let dims = c.out_dims.clone().ok_or("the result's shape is not recorded in the archive")?;
    one(broadcast_to(cx, x, &dims)?)
}

/// `slice.Tensor(self, dim, start, end, step)`; a slice covering the whole dim is the input.
pub(super) fn slice(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let d = cx.int(&c.args, "dim")?;
    let (start, end, step) = (cx.opt_sym_int(&c.args, "start")?, cx.opt_sym_int(&c.args, "end")?, cx.int(&c.args, "step")?);
    let size = cx.meta(x).shape[wrap(d, cx.meta(x).rank())?];
    let max = cx.b.graph.dim_max(size) as i64;
    let whole_end = match end {
        None => true,
        Some(IntOrSym::Int(e)) => e >= max,
        Some(IntOrSym::Sym(v)) => matches!(size, Dim::Sym(s) if cx.b.graph.syms[s].value == Some(v)),
    };
    if matches!(start, None | Some(IntOrSym::Int(0))) && step == 1 && whole_end {
        return one(x);
    }
    let args = vec![Arg::Tensor(x), Arg::Int(d), size_arg(start), size_arg(end), Arg::Int(step)];
    one(cx.call1("aten::slice_copy.Tensor", args)?)
}

pub(super) fn select(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let d = cx.int(&c.args, "dim")?;
    let index = cx.sym_int(&c.args, "index")?;
    one(cx.call1("aten::select_copy.int", vec![Arg::Tensor(x), Arg::Int(d), size_arg(Some(index))])?)
}

/// `cat(tensors, dim)`, operands promoted to one dtype as ATen does.
pub(super) fn cat(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let tensors = cx.tensors(&c.args, "tensors")?;
    let dim = cx.int(&c.args, "dim")?;
    one(concat(cx, &tensors, dim)?)
}

fn concat(cx: &mut Cx, tensors: &[ValueId], dim: i64) -> Result<ValueId, String> {
    let operands: Vec<Promoted> = tensors.iter().map(|&t| Promoted::Tensor(cx.meta(t).dtype, 1)).collect();
    let dtype = result_type(&operands)?;
    let cast = tensors.iter().map(|&t| cx.cast(t, dtype)).collect::<Result<Vec<_>, _>>()?;
    cx.call1("aten::cat", vec![Arg::Tensors(cast), Arg::Int(dim)])
}

/// The fixed size of dim `d` of `x`.
fn fixed_dim(cx: &Cx, x: ValueId, d: i64, what: &str) -> Result<(usize, usize), String> {
    let m = cx.meta(x);
    let i = wrap(d, m.rank())?;
    match m.shape.get(i) {
        Some(Dim::Fixed(n)) => Ok((i, *n)),
        other => Err(format!("{what} needs a fixed dim {d}, got {other:?}")),
    }
}

/// `split_with_sizes(self, split_sizes, dim)`, `chunk(self, chunks, dim)`: one output per
/// piece.
pub(super) fn split(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let (dim, n) = fixed_dim(cx, x, cx.int(&c.args, "dim")?, c.key)?;
    let pieces = |size: usize| -> Vec<i64> {
        let size = size.max(1);
        (0..n.div_ceil(size).max(1)).map(|k| size.min(n - (k * size).min(n)) as i64).collect()
    };
    let sizes = match c.key {
        "aten::chunk" => {
            let chunks = cx.int(&c.args, "chunks")?;
            if chunks <= 0 {
                return Err(format!("chunks must be positive, got {chunks}"));
            }
            pieces(n.div_ceil(chunks as usize))
        }
        _ => cx.ints(&c.args, "split_sizes")?,
    };
    let outs = cx.call("aten::split_with_sizes_copy", vec![Arg::Tensor(x), Arg::Ints(sizes), Arg::Int(dim as i64)])?;
    Ok(outs.into_iter().map(Lowered::Tensor).collect())
}

/// `diff(self, n, dim, prepend, append)`: n times `x[1:] - x[:-1]` along dim (`!=` for bool)
/// after concatenating prepend and append.
pub(super) fn diff(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let mut x = cx.tensor(&c.args, "self")?;
    let d = cx.int(&c.args, "dim")?;
    let (prepend, append) = (cx.opt_tensor(&c.args, "prepend")?, cx.opt_tensor(&c.args, "append")?);
    if prepend.is_some() || append.is_some() {
        let parts: Vec<ValueId> = prepend.into_iter().chain([x]).chain(append).collect();
        x = concat(cx, &parts, d)?;
    }
    let n = cx.int(&c.args, "n")?;
    for _ in 0..n.max(0) {
        fixed_dim(cx, x, d, c.key)?;
        let slice = |cx: &mut Cx, start: i64, end: Option<i64>| {
            let end = end.map_or(Arg::None, Arg::Int);
            cx.call1("aten::slice_copy.Tensor", vec![Arg::Tensor(x), Arg::Int(d), Arg::Int(start), end, Arg::Int(1)])
        };
        let (hi, lo) = (slice(cx, 1, None)?, slice(cx, 0, Some(-1))?);
        x = if cx.meta(x).dtype == ScalarType::Bool {
            cx.call1("aten::logical_xor", vec![Arg::Tensor(hi), Arg::Tensor(lo)])?
        } else {
            cx.call1("aten::sub.Tensor", vec![Arg::Tensor(hi), Arg::Tensor(lo), Arg::Scalar(Scalar::Int(1))])?
        };
    }
    one(x)
}
