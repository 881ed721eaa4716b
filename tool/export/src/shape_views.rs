//! Shape inference of the copy forms of more views (diagonal, as_strided, narrow, unfold, t,
//! split, unbind) and of ops that move elements without changing them (stack, roll, flip,
//! tril, pixel (un)shuffle).

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, IntOrSym, TensorMeta};
use crate::shape::{fixed, int, ints, norm_dim, tensor, wrap_dim};

/// Most results one node may have (a program lists each as a value).
const MAX_OUTPUTS: usize = 1 << 16;

/// Output metas of the view-copy `op`, or None when `op` is not one of them.
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg]) -> Option<Result<Vec<TensorMeta>>> {
    let r = match op {
        "aten::detach_copy" | "aten::roll" | "aten::flip" => same(g, op, args),
        "aten::tril" => tensor(g, op, args, 0).and_then(|x| {
            int(op, args, 1)?;
            if x.rank() < 2 {
                return Err(shape_err(op, format!("needs at least 2 dims, got {:?}", x.shape)));
            }
            Ok(vec![x.clone()])
        }),
        "aten::t_copy" => t(g, op, args),
        "aten::squeeze_copy.dim" => squeeze_dim(g, op, args),
        "aten::diagonal_copy" => diagonal(g, op, args),
        "aten::as_strided_copy" => as_strided(g, op, args),
        "aten::narrow_copy" => narrow(g, op, args),
        "aten::unfold_copy" => unfold(g, op, args),
        "aten::split_copy.Tensor" => split(g, op, args),
        "aten::unbind_copy.int" => unbind(g, op, args),
        "aten::stack" => stack(g, op, args),
        "aten::pixel_shuffle" | "aten::pixel_unshuffle" => pixel_shuffle(g, op, args),
        _ => return None,
    };
    Some(r)
}

/// Ops whose result has the input's dtype and shape; `roll` and `flip` check their dims.
fn same(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let dims = match op {
        "aten::roll" => {
            let (shifts, dims) = (int_list(op, args, 1)?, ints(op, args, 2)?);
            if dims.is_empty() && shifts.len() != 1 || !dims.is_empty() && dims.len() != shifts.len() {
                return Err(shape_err(op, format!("shifts {shifts:?} and dims {dims:?} must pair up (or one shift of the flattened tensor)")));
            }
            dims.to_vec()
        }
        "aten::flip" => ints(op, args, 1)?.to_vec(),
        _ => vec![],
    };
    let mut seen = vec![false; x.rank().max(1)];
    for d in dims {
        let i = wrap_dim(op, d, x.rank())?;
        if op == "aten::flip" && std::mem::replace(&mut seen[i], true) {
            return Err(shape_err(op, format!("dim {d} appears twice")));
        }
    }
    Ok(vec![x.clone()])
}

/// A `SymInt[]` argument known at export.
fn int_list(op: &str, args: &[Arg], i: usize) -> Result<Vec<i64>> {
    match args.get(i) {
        Some(Arg::Ints(v)) => Ok(v.clone()),
        Some(Arg::SymInts(items)) => items
            .iter()
            .map(|item| match item {
                IntOrSym::Int(n) => Ok(*n),
                IntOrSym::Sym(_) => Err(shape_err(op, format!("argument {i} must be known at export"))),
            })
            .collect(),
        other => Err(shape_err(op, format!("argument {i} must be an int list, got {other:?}"))),
    }
}

/// `t(self)`: at most 2 dims, swapped.
fn t(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    if x.rank() > 2 {
        return Err(shape_err(op, format!("needs at most 2 dims, got {:?}", x.shape)));
    }
    let shape = x.shape.iter().rev().copied().collect();
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `squeeze(self, dim)`: the dim goes away when its size is 1.
fn squeeze_dim(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let d = wrap_dim(op, int(op, args, 1)?, x.rank())?;
    let mut shape = x.shape.clone();
    if shape.get(d) == Some(&Dim::Fixed(1)) {
        shape.remove(d);
    }
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `diagonal(self, offset, dim1, dim2)`: both dims go, the diagonal's length is appended.
fn diagonal(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let offset = int(op, args, 1)?;
    let (a, b) = (norm_dim(op, int(op, args, 2)?, x.rank())?, norm_dim(op, int(op, args, 3)?, x.rank())?);
    if a == b {
        return Err(shape_err(op, format!("dim1 and dim2 are the same dim {a}")));
    }
    let sizes = fixed(op, x)?;
    let (rows, cols) = (sizes[a] as i64, sizes[b] as i64);
    let len = if offset >= 0 { rows.min(cols.saturating_sub(offset)) } else { cols.min(rows.saturating_add(offset)) };
    let mut shape: Vec<Dim> = (0..x.rank()).filter(|&i| i != a && i != b).map(|i| x.shape[i]).collect();
    shape.push(Dim::Fixed(len.max(0) as usize));
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `as_strided(self, size, stride, storage_offset?)`: every element it reads must lie inside
/// the input's (contiguous) storage.
fn as_strided(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let (size, stride) = (int_list(op, args, 1)?, int_list(op, args, 2)?);
    let offset = match args.get(3) {
        Some(Arg::None) => 0,
        Some(Arg::Int(o)) => *o,
        other => return Err(shape_err(op, format!("storage_offset must be an int or None, got {other:?}"))),
    };
    if size.len() != stride.len() || size.iter().chain(&stride).any(|&v| v < 0) || offset < 0 {
        return Err(shape_err(op, format!("size {size:?}, stride {stride:?} and offset {offset} must be non-negative and of one length")));
    }
    let numel = fixed(op, x)?.iter().product::<usize>() as i128;
    let last = size.iter().zip(&stride).try_fold(offset as i128, |acc, (&n, &s)| acc.checked_add((n as i128 - 1).max(0) * s as i128));
    if size.iter().all(|&n| n > 0) && last.is_none_or(|last| last >= numel) {
        return Err(shape_err(op, format!("size {size:?} with stride {stride:?} and offset {offset} reads past the input's {numel} elements")));
    }
    Ok(vec![TensorMeta::fixed(x.dtype, &size.iter().map(|&n| n as usize).collect::<Vec<_>>())])
}

/// `narrow(self, dim, start, length)`.
fn narrow(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let d = norm_dim(op, int(op, args, 1)?, x.rank())?;
    let (start, length) = (int(op, args, 2)?, int(op, args, 3)?);
    let Dim::Fixed(n) = x.shape[d] else { return Err(shape_err(op, format!("dim {d} must be fixed, got {:?}", x.shape))) };
    let n = n as i64;
    let start = if start < 0 { start + n } else { start };
    if start < 0 || length < 0 || start.checked_add(length).is_none_or(|end| end > n) {
        return Err(shape_err(op, format!("start {start} and length {length} do not fit dim {d} of size {n}")));
    }
    let mut shape = x.shape.clone();
    shape[d] = Dim::Fixed(length as usize);
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `unfold(self, dimension, size, step)`: windows along the dim, the window appended last.
fn unfold(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let d = wrap_dim(op, int(op, args, 1)?, x.rank())?;
    let (size, step) = (int(op, args, 2)?, int(op, args, 3)?);
    let n = match x.shape.get(d) {
        Some(Dim::Fixed(n)) => *n as i64,
        None => 1,
        Some(other) => return Err(shape_err(op, format!("dim {d} must be fixed, got {other:?}"))),
    };
    if size < 0 || step <= 0 || size > n {
        return Err(shape_err(op, format!("size {size} and step {step} do not fit dim {d} of size {n}")));
    }
    let mut shape = x.shape.clone();
    if let Some(slot) = shape.get_mut(d) {
        *slot = Dim::Fixed(((n - size) / step + 1) as usize);
    }
    shape.push(Dim::Fixed(size as usize));
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `split(self, split_size, dim)`: pieces of split_size, the last one shorter.
fn split(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let d = norm_dim(op, int(op, args, 2)?, x.rank())?;
    let size = int(op, args, 1)?;
    let Dim::Fixed(n) = x.shape[d] else { return Err(shape_err(op, format!("dim {d} must be fixed, got {:?}", x.shape))) };
    if size < 0 || size == 0 && n > 0 {
        return Err(shape_err(op, format!("split_size {size} must be positive")));
    }
    let size = size as usize;
    let pieces = if n == 0 { 1 } else { n.div_ceil(size) };
    if pieces > MAX_OUTPUTS {
        return Err(shape_err(op, format!("splitting {n} by {size} gives more than {MAX_OUTPUTS} results")));
    }
    Ok((0..pieces)
        .map(|k| {
            let mut shape = x.shape.clone();
            shape[d] = Dim::Fixed(size.min(n - (k * size).min(n)));
            TensorMeta::new(x.dtype, shape)
        })
        .collect())
}

/// `unbind(self, dim)`: one result per index, without the dim.
fn unbind(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let d = norm_dim(op, int(op, args, 1)?, x.rank())?;
    let Dim::Fixed(n) = x.shape[d] else { return Err(shape_err(op, format!("dim {d} must be fixed, got {:?}", x.shape))) };
    if n > MAX_OUTPUTS {
        return Err(shape_err(op, format!("unbinding {n} entries gives more than {MAX_OUTPUTS} results")));
    }
    let mut shape = x.shape.clone();
    shape.remove(d);
    Ok(vec![TensorMeta::new(x.dtype, shape); n])
}

/// `stack(tensors, dim)`: same-shaped tensors along a new dim; dtypes promote as in `cat`.
fn stack(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let Some(Arg::Tensors(ts)) = args.first() else { return Err(shape_err(op, "argument 0 must be a tensor list")) };
    let first = ts.first().map(|&t| g.meta(t)).ok_or_else(|| shape_err(op, "needs at least one tensor"))?;
    let d = wrap_dim(op, int(op, args, 1)?, first.rank() + 1)?;
    let mut dtype = first.dtype;
    for &t in ts {
        let m = g.meta(t);
        if m.shape != first.shape {
            return Err(shape_err(op, format!("{:?} does not match {:?}", m.shape, first.shape)));
        }
        dtype = crate::promote::promote_types(dtype, m.dtype).ok_or_else(|| shape_err(op, format!("cannot promote {dtype} and {}", m.dtype)))?;
    }
    let mut shape = first.shape.clone();
    shape.insert(d, Dim::Fixed(ts.len()));
    Ok(vec![TensorMeta::new(dtype, shape)])
}

/// `pixel_shuffle(self, r)`: [.., C·r², H, W] → [.., C, H·r, W·r]; `pixel_unshuffle` undoes it.
fn pixel_shuffle(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let r = int(op, args, 1)?;
    let sizes = fixed(op, x)?;
    if sizes.len() < 3 || r <= 0 {
        return Err(shape_err(op, format!("needs a factor > 0 and at least 3 dims, got {r} and {:?}", x.shape)));
    }
    let r = r as usize;
    let k = sizes.len();
    let (c, h, w) = (sizes[k - 3], sizes[k - 2], sizes[k - 1]);
    let too_big = || shape_err(op, format!("factor {r} is too large for {:?}", x.shape));
    let rr = r.checked_mul(r).ok_or_else(too_big)?;
    let (c, h, w) = if op == "aten::pixel_shuffle" {
        if c % rr != 0 {
            return Err(shape_err(op, format!("channels {c} are not a multiple of {r}²")));
        }
        (c / rr, h.checked_mul(r).ok_or_else(too_big)?, w.checked_mul(r).ok_or_else(too_big)?)
    } else {
        if h % r != 0 || w % r != 0 {
            return Err(shape_err(op, format!("height {h} and width {w} must be multiples of {r}")));
        }
        (c.checked_mul(rr).ok_or_else(too_big)?, h / r, w / r)
    };
    let mut shape = x.shape.clone();
    shape[k - 3..].copy_from_slice(&[Dim::Fixed(c), Dim::Fixed(h), Dim::Fixed(w)]);
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}
