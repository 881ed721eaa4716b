//! Shape and dtype inference of reductions and scans over dims.

use rbuild_runtime::ScalarType;

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, TensorMeta};
use crate::shape::{flag, int, ints, opt_dtype, opt_ints, require_float, tensor, wrap_dim};

/// Output metas of the reduction `op`, or None when `op` is not one of them.
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg]) -> Option<Result<Vec<TensorMeta>>> {
    let r = match op {
        "aten::mean.dim" => reduce(g, op, args, Dims::Optional, |x, dtype| {
            let out = dtype.unwrap_or(x);
            require_float_dtype(op, out).map(|_| out)
        }),
        "aten::sum.dim_IntList" => reduce(g, op, args, Dims::Optional, |x, dtype| Ok(dtype.unwrap_or(widen_integers(x)))),
        "aten::amax" | "aten::amin" => reduce(g, op, args, Dims::List, |x, _| Ok(x)),
        // `any` gives bool, except on uint8 where it keeps uint8.
        "aten::any.dims" => reduce(g, op, args, Dims::Optional, |x, _| Ok(any_dtype(x))),
        "aten::any.dim" => reduce(g, op, args, Dims::One, |x, _| Ok(any_dtype(x))),
        "aten::argmax" | "aten::argmin" => reduce(g, op, args, Dims::OptionalOne, |_, _| Ok(ScalarType::Long)),
        "aten::cumsum" => cumsum(g, op, args),
        // Over every element: a rank-0 result.
        "aten::any" => whole(g, op, args, |x, _| Ok(any_dtype(x))),
        "aten::mean" => whole(g, op, args, |x, dtype| {
            let out = dtype.unwrap_or(x);
            require_float_dtype(op, out).map(|_| out)
        }),
        "aten::prod" => whole(g, op, args, |x, dtype| Ok(dtype.unwrap_or(widen_integers(x)))),
        "aten::max" | "aten::min" => whole(g, op, args, |x, _| Ok(x)),
        "aten::prod.dim_int" => reduce(g, op, args, Dims::One, |x, dtype| Ok(dtype.unwrap_or(widen_integers(x)))),
        "aten::max.dim" | "aten::min.dim" => reduce(g, op, args, Dims::One, |x, _| Ok(x)).map(|mut v| {
            let indices = TensorMeta::new(ScalarType::Long, v[0].shape.clone());
            v.push(indices);
            v
        }),
        "aten::var.dim" | "aten::var.correction" => variance(g, op, args).map(|m| vec![m]),
        "aten::var_mean.correction" => variance(g, op, args).map(|m| vec![m.clone(), m]),
        "aten::topk" => topk(g, op, args),
        "aten::sort" => tensor(g, op, args, 0).and_then(|x| {
            wrap_dim(op, int(op, args, 1)?, x.rank())?;
            flag(op, args, 2)?;
            Ok(vec![x.clone(), TensorMeta::new(ScalarType::Long, x.shape.clone())])
        }),
        _ => return None,
    };
    Some(r)
}

/// How a reduction names its dims.
#[derive(Clone, Copy, PartialEq)]
enum Dims {
    /// `int[1]? dim`: None or [] reduce every dim.
    Optional,
    /// `int[1] dim=[]`: [] reduces every dim.
    List,
    /// `int dim`.
    One,
    /// `int? dim`: None reduces every dim.
    OptionalOne,
}

fn widen_integers(t: ScalarType) -> ScalarType {
    if t.is_integral(true) {
        ScalarType::Long
    } else {
        t
    }
}

fn any_dtype(t: ScalarType) -> ScalarType {
    if t == ScalarType::Byte {
        t
    } else {
        ScalarType::Bool
    }
}

fn require_float_dtype(op: &str, t: ScalarType) -> Result<()> {
    require_float(op, &TensorMeta::new(t, vec![]))
}

/// `reduce(self, dim, keepdim, [dtype])`: the dims named by argument 1 removed (or kept as 1
/// with keepdim); `dtype_of(input dtype, dtype argument)` gives the result dtype.
fn reduce(
    g: &Graph,
    op: &str,
    args: &[Arg],
    dims: Dims,
    dtype_of: impl Fn(ScalarType, Option<ScalarType>) -> Result<ScalarType>,
) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let listed: Option<Vec<i64>> = match dims {
        Dims::Optional => opt_ints(op, args, 1)?.map(<[i64]>::to_vec),
        Dims::List => Some(ints(op, args, 1)?.to_vec()),
        Dims::One => Some(vec![int(op, args, 1)?]),
        Dims::OptionalOne => match args.get(1) {
            Some(Arg::None) => None,
            _ => Some(vec![int(op, args, 1)?]),
        },
    };
    let keepdim = flag(op, args, 2)?;
    let dtype_arg = if args.len() > 3 { opt_dtype(op, args, 3)? } else { None };
    let shape = reduced_shape(op, &x.shape, listed.as_deref().filter(|d| !d.is_empty() || dims == Dims::One), keepdim)?;
    Ok(vec![TensorMeta::new(dtype_of(x.dtype, dtype_arg)?, shape)])
}

/// `shape` with `dims` (None: all) reduced away, or set to 1 with `keepdim`. A rank-0 input
/// takes dim 0 or -1 and stays rank 0.
pub(crate) fn reduced_shape(op: &str, shape: &[Dim], dims: Option<&[i64]>, keepdim: bool) -> Result<Vec<Dim>> {
    let rank = shape.len();
    let mut reduced = vec![dims.is_none(); rank];
    for &d in dims.unwrap_or(&[]) {
        let i = wrap_dim(op, d, rank)?;
        if rank == 0 {
            continue;
        }
        if std::mem::replace(&mut reduced[i], true) {
            return Err(shape_err(op, format!("dim {d} is reduced twice in {dims:?}")));
        }
    }
    Ok(shape
        .iter()
        .zip(&reduced)
        .filter_map(|(&d, &r)| if r { keepdim.then_some(Dim::Fixed(1)) } else { Some(d) })
        .collect())
}

/// `cumsum(self, dim, dtype?)`: same shape; integers and bools accumulate in int64.
fn cumsum(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    wrap_dim(op, int(op, args, 1)?, x.rank())?;
    let dtype = opt_dtype(op, args, 2)?.unwrap_or(widen_integers(x.dtype));
    Ok(vec![TensorMeta::new(dtype, x.shape.clone())])
}

/// A reduction of every element (`any`, `mean`, `prod`, `max`, `min` without dims): rank 0;
/// `dtype_of(input dtype, dtype argument)` gives its dtype.
fn whole(g: &Graph, op: &str, args: &[Arg], dtype_of: impl Fn(ScalarType, Option<ScalarType>) -> Result<ScalarType>) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let dtype_arg = if args.len() > 1 { opt_dtype(op, args, 1)? } else { None };
    Ok(vec![TensorMeta::new(dtype_of(x.dtype, dtype_arg)?, vec![])])
}

/// `var.dim(self, dim?, unbiased, keepdim)`, `var.correction(self, dim?, correction?, keepdim)`
/// and `var_mean.correction`: float input, the listed dims (None or []: all) reduced.
fn variance(g: &Graph, op: &str, args: &[Arg]) -> Result<TensorMeta> {
    let x = tensor(g, op, args, 0)?;
    require_float(op, x)?;
    let dims = opt_ints(op, args, 1)?;
    match (op, args.get(2)) {
        ("aten::var.dim", Some(Arg::Bool(_))) => {}
        (_, Some(Arg::None | Arg::Scalar(_) | Arg::Int(_) | Arg::Float(_))) if op != "aten::var.dim" => {}
        (_, other) => return Err(shape_err(op, format!("argument 2 must be {}, got {other:?}", if op == "aten::var.dim" { "a bool" } else { "a number or None" }))),
    }
    let keepdim = flag(op, args, 3)?;
    let shape = reduced_shape(op, &x.shape, dims.filter(|d| !d.is_empty()), keepdim)?;
    Ok(TensorMeta::new(x.dtype, shape))
}

/// `topk(self, k, dim, largest, sorted)`: values and int64 indices with `dim` cut to k.
fn topk(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let d = wrap_dim(op, int(op, args, 2)?, x.rank())?;
    let k = int(op, args, 1)?;
    let mut shape = x.shape.clone();
    let size = shape.get(d).copied().unwrap_or(Dim::Fixed(1));
    if k < 0 || k as usize > g.dim_max(size) {
        return Err(shape_err(op, format!("k {k} is out of range for dim {d} of {:?}", x.shape)));
    }
    if let Some(slot) = shape.get_mut(d) {
        *slot = Dim::Fixed(k as usize);
    }
    flag(op, args, 3)?;
    flag(op, args, 4)?;
    Ok(vec![TensorMeta::new(x.dtype, shape.clone()), TensorMeta::new(ScalarType::Long, shape)])
}
