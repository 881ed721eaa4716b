//! Shape inference of gathers, scatters and the functional forms of writes into a tensor
//! (`index_put`, `masked_scatter`, `select_scatter`, `slice_scatter`, `copy`, `fill`): the
//! result is the written tensor, so it keeps `self`'s dtype and shape.

use rbuild_runtime::ScalarType;

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, TensorMeta};
use crate::shape::{broadcast, int, norm_dim, scalar, tensor, wrap_dim};

/// Output metas of the indexing `op`, or None when `op` is not one of them.
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg]) -> Option<Result<Vec<TensorMeta>>> {
    let r = match op {
        "aten::gather" => gather(g, op, args),
        "aten::scatter.src" | "aten::scatter.value" | "aten::scatter_add" | "aten::scatter_reduce.two" => scatter(g, op, args),
        "aten::select_scatter" => select_scatter(g, op, args),
        "aten::slice_scatter" => slice_scatter(g, op, args),
        "aten::index_put" => index_put(g, op, args),
        "aten::masked_scatter" => masked_scatter(g, op, args),
        "aten::copy" => written(g, op, args, |src, x| {
            if broadcast(op, &src.shape, &x.shape)? != x.shape {
                return Err(shape_err(op, format!("src {:?} does not broadcast to self {:?}", src.shape, x.shape)));
            }
            Ok(())
        }),
        "aten::fill.Tensor" => written(g, op, args, |value, _| {
            if value.rank() != 0 {
                return Err(shape_err(op, format!("value must be a rank-0 tensor, got {:?}", value.shape)));
            }
            Ok(())
        }),
        "aten::fill.Scalar" => scalar(op, args, 1).and_then(|_| tensor(g, op, args, 0)).map(|x| vec![x.clone()]),
        _ => return None,
    };
    Some(r)
}

fn require_long(op: &str, name: &str, m: &TensorMeta) -> Result<()> {
    if m.dtype != ScalarType::Long {
        return Err(shape_err(op, format!("{name} must be int64, got {}", m.dtype)));
    }
    Ok(())
}

/// `gather(self, dim, index)`: index's shape, self's dtype; index may not exceed self outside dim.
fn gather(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (x, index) = (tensor(g, op, args, 0)?, tensor(g, op, args, 2)?);
    require_long(op, "index", index)?;
    let d = wrap_dim(op, int(op, args, 1)?, x.rank())?;
    fits_outside(g, op, index, x, d, "index", "self")?;
    Ok(vec![TensorMeta::new(x.dtype, index.shape.clone())])
}

/// Each dim of `small` (but `skip`) is at most the same dim of `big`, ranks equal (or 0-D).
fn fits_outside(g: &Graph, op: &str, small: &TensorMeta, big: &TensorMeta, skip: usize, a: &str, b: &str) -> Result<()> {
    let ranks_ok = small.rank() == big.rank() || small.rank().max(1) == big.rank().max(1);
    let fits = (0..small.rank()).all(|i| i == skip || big.shape.get(i).is_some_and(|&n| g.dim_max(small.shape[i]) <= g.dim_max(n)));
    if !ranks_ok || !fits {
        return Err(shape_err(op, format!("{a} {:?} must not exceed {b} {:?} outside dim {skip}", small.shape, big.shape)));
    }
    Ok(())
}

/// `scatter(self, dim, index, src|value[, reduce])`, `scatter_add`: self's dtype and shape.
fn scatter(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (x, index) = (tensor(g, op, args, 0)?, tensor(g, op, args, 2)?);
    require_long(op, "index", index)?;
    let d = wrap_dim(op, int(op, args, 1)?, x.rank())?;
    fits_outside(g, op, index, x, d, "index", "self")?;
    if op == "aten::scatter.value" {
        scalar(op, args, 3)?;
    } else {
        let src = tensor(g, op, args, 3)?;
        if src.dtype != x.dtype {
            return Err(shape_err(op, format!("src must have self's dtype {}, got {}", x.dtype, src.dtype)));
        }
        fits_outside(g, op, index, src, usize::MAX, "index", "src")?;
    }
    if op == "aten::scatter_reduce.two" {
        match args.get(4) {
            Some(Arg::Str(r)) if ["sum", "prod", "mean", "amax", "amin"].contains(&r.as_str()) => {}
            other => return Err(shape_err(op, format!("reduce must be sum, prod, mean, amax or amin, got {other:?}"))),
        }
    }
    Ok(vec![x.clone()])
}

/// `select_scatter(self, src, dim, index)`: src is self without dim.
fn select_scatter(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (x, src) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
    let d = norm_dim(op, int(op, args, 2)?, x.rank())?;
    let mut want = x.shape.clone();
    let n = want.remove(d);
    let index = int(op, args, 3)?;
    let n = g.dim_max(n) as i64;
    if src.shape != want || index < -n || index >= n {
        return Err(shape_err(op, format!("src {:?} must be {want:?} and index {index} inside dim {d} of {:?}", src.shape, x.shape)));
    }
    Ok(vec![x.clone()])
}

/// `slice_scatter(self, src, dim, start?, end?, step)`: src has the slice's shape.
fn slice_scatter(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (x, src) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
    let d = norm_dim(op, int(op, args, 2)?, x.rank())?;
    let step = int(op, args, 5)?;
    let Dim::Fixed(n) = x.shape[d] else { return Err(shape_err(op, format!("dim {d} must be fixed, got {:?}", x.shape))) };
    let bound = |i: usize| -> Result<Option<i64>> {
        match args.get(i) {
            Some(Arg::Int(v)) => Ok(Some(*v)),
            Some(Arg::None) => Ok(None),
            other => Err(shape_err(op, format!("argument {i} must be an int or None, got {other:?}"))),
        }
    };
    let n = n as i64;
    let clamp = |v: i64| (if v < 0 { v.saturating_add(n) } else { v }).clamp(0, n);
    let start = clamp(bound(3)?.unwrap_or(0));
    let end = clamp(bound(4)?.unwrap_or(n)).max(start);
    if step <= 0 {
        return Err(shape_err(op, format!("step must be positive, got {step}")));
    }
    let mut want = x.shape.clone();
    want[d] = Dim::Fixed(if end > start { ((end - start - 1) / step + 1) as usize } else { 0 });
    if src.shape != want {
        return Err(shape_err(op, format!("src {:?} must have the slice's shape {want:?}", src.shape)));
    }
    Ok(vec![x.clone()])
}

/// `index_put(self, indices, values, accumulate)`: values broadcast to the indexed region.
fn index_put(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (x, values) = (tensor(g, op, args, 0)?, tensor(g, op, args, 2)?);
    let Some(Arg::OptTensors(indices)) = args.get(1) else {
        return Err(shape_err(op, format!("argument 1 must be a list of optional tensors, got {:?}", args.get(1))));
    };
    if indices.len() > x.rank() || indices.iter().all(Option::is_none) {
        return Err(shape_err(op, format!("needs 1 to {} indices, got {}", x.rank(), indices.len())));
    }
    for m in indices.iter().flatten().map(|&i| g.meta(i)) {
        if !matches!(m.dtype, ScalarType::Long | ScalarType::Int | ScalarType::Bool | ScalarType::Byte) {
            return Err(shape_err(op, format!("indices must be integer or bool tensors, got {}", m.dtype)));
        }
    }
    if values.dtype != x.dtype {
        return Err(shape_err(op, format!("values must have self's dtype {}, got {}", x.dtype, values.dtype)));
    }
    crate::shape::flag(op, args, 3)?;
    Ok(vec![x.clone()])
}

/// `masked_scatter(self, mask, source)`: the broadcast of self and the bool mask.
fn masked_scatter(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (x, mask, source) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?, tensor(g, op, args, 2)?);
    if mask.dtype != ScalarType::Bool || source.dtype != x.dtype {
        return Err(shape_err(op, format!("needs a bool mask and a source of self's dtype {}, got {} and {}", x.dtype, mask.dtype, source.dtype)));
    }
    Ok(vec![TensorMeta::new(x.dtype, broadcast(op, &x.shape, &mask.shape)?)])
}

/// `copy(self, src)`, `fill.Tensor(self, value)`: self's dtype and shape, `check(other, self)`.
fn written(g: &Graph, op: &str, args: &[Arg], check: impl Fn(&TensorMeta, &TensorMeta) -> Result<()>) -> Result<Vec<TensorMeta>> {
    let (x, other) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
    check(other, x)?;
    Ok(vec![x.clone()])
}
