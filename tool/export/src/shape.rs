//! Shape and dtype inference for each known functional operator.

use rbuild_runtime::{Scalar, ScalarType};

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, IntOrSym, Sym, TensorMeta};

pub(crate) fn tensor<'a>(g: &'a Graph, op: &str, args: &[Arg], i: usize) -> Result<&'a TensorMeta> {
    match args.get(i) {
        Some(Arg::Tensor(v)) => Ok(g.meta(*v)),
        other => Err(shape_err(op, format!("argument {i} must be a tensor, got {other:?}"))),
    }
}

pub(crate) fn ints<'a>(op: &str, args: &'a [Arg], i: usize) -> Result<&'a [i64]> {
    match args.get(i) {
        Some(Arg::Ints(v)) => Ok(v),
        other => Err(shape_err(op, format!("argument {i} must be an int list, got {other:?}"))),
    }
}

pub(crate) fn int(op: &str, args: &[Arg], i: usize) -> Result<i64> {
    match args.get(i) {
        Some(Arg::Int(v)) => Ok(*v),
        other => Err(shape_err(op, format!("argument {i} must be an int, got {other:?}"))),
    }
}

pub(crate) fn fixed(op: &str, m: &TensorMeta) -> Result<Vec<usize>> {
    m.sizes().ok_or_else(|| shape_err(op, format!("needs static sizes, got {:?}", m.shape)))
}

/// A dim index in [-rank, rank) naming an existing dim.
pub(crate) fn norm_dim(op: &str, d: i64, rank: usize) -> Result<usize> {
    match wrap_dim(op, d, rank)? {
        n if n < rank => Ok(n),
        _ => Err(shape_err(op, format!("dim {d} out of range for rank {rank}"))),
    }
}

/// A dim index in [-rank, rank), where a rank-0 tensor counts as rank 1 (as ATen wraps dims
/// for reductions and softmax over scalars).
pub(crate) fn wrap_dim(op: &str, d: i64, rank: usize) -> Result<usize> {
    let r = rank.max(1) as i64;
    let n = if d < 0 { d.saturating_add(r) } else { d };
    if !(0..r).contains(&n) {
        return Err(shape_err(op, format!("dim {d} out of range for rank {rank}")));
    }
    Ok(n as usize)
}

/// A `Scalar` argument (numbers may also come as plain int/float/bool arguments).
pub(crate) fn scalar(op: &str, args: &[Arg], i: usize) -> Result<Scalar> {
    match args.get(i) {
        Some(Arg::Scalar(s)) => Ok(*s),
        Some(Arg::Int(v)) => Ok(Scalar::Int(*v)),
        Some(Arg::Float(v)) => Ok(Scalar::Double(*v)),
        Some(Arg::Bool(v)) => Ok(Scalar::Bool(*v)),
        other => Err(shape_err(op, format!("argument {i} must be a number, got {other:?}"))),
    }
}

pub(crate) fn flag(op: &str, args: &[Arg], i: usize) -> Result<bool> {
    match args.get(i) {
        Some(Arg::Bool(b)) => Ok(*b),
        other => Err(shape_err(op, format!("argument {i} must be a bool, got {other:?}"))),
    }
}

/// An optional `int[]` argument.
pub(crate) fn opt_ints<'a>(op: &str, args: &'a [Arg], i: usize) -> Result<Option<&'a [i64]>> {
    match args.get(i) {
        Some(Arg::None) => Ok(None),
        _ => ints(op, args, i).map(Some),
    }
}

/// An optional `ScalarType` argument.
pub(crate) fn opt_dtype(op: &str, args: &[Arg], i: usize) -> Result<Option<ScalarType>> {
    match args.get(i) {
        Some(Arg::ScalarType(t)) => Ok(Some(*t)),
        Some(Arg::None) => Ok(None),
        other => Err(shape_err(op, format!("argument {i} must be a dtype or None, got {other:?}"))),
    }
}

/// A size list (`SymInt[]`): fixed sizes, or run-time values of declared symbols.
pub(crate) fn size_dims(g: &Graph, op: &str, args: &[Arg], i: usize) -> Result<Vec<Dim>> {
    let dim = |n: i64| usize::try_from(n).map(Dim::Fixed).map_err(|_| shape_err(op, format!("size {n} is negative")));
    match args.get(i) {
        Some(Arg::Ints(v)) => v.iter().map(|&n| dim(n)).collect(),
        Some(Arg::SymInts(items)) => items
            .iter()
            .map(|item| match *item {
                IntOrSym::Int(n) => dim(n),
                IntOrSym::Sym(v) => sym_of_value(g, v).map(Dim::Sym).ok_or_else(|| {
                    shape_err(op, format!("size entry {item:?} is a run-time value that is not a known dimension"))
                }),
            })
            .collect(),
        other => Err(shape_err(op, format!("argument {i} must be a size list, got {other:?}"))),
    }
}

/// The symbol whose run-time value is `v` (see `GraphBuilder::sym_size`).
pub(crate) fn sym_of_value(g: &Graph, v: usize) -> Option<usize> {
    g.syms.iter().position(|s| s.value == Some(v))
}

/// NumPy broadcasting over dims (symbols broadcast only with themselves or 1).
pub fn broadcast(op: &str, a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|i| {
            let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { Dim::Fixed(1) };
            let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { Dim::Fixed(1) };
            match (da, db) {
                (x, y) if x == y => Ok(x),
                (Dim::Fixed(1), y) => Ok(y),
                (x, Dim::Fixed(1)) => Ok(x),
                _ => Err(shape_err(op, format!("shapes {a:?} and {b:?} cannot be broadcast"))),
            }
        })
        .collect()
}

/// Output metas of `op` (functional key) applied to `args`. Ops whose result size depends on
/// the data (`nonzero`) need [`infer_with_syms`].
pub fn infer(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let inferred = infer_with_syms(g, op, args, None)?;
    if !inferred.new_syms.is_empty() {
        return Err(shape_err(op, "its result size depends on the data: add it through GraphBuilder::call"));
    }
    Ok(inferred.metas)
}

/// What inference found: the output metas, and the symbols they introduce.
#[derive(Clone, Debug, PartialEq)]
pub struct Inferred {
    pub metas: Vec<TensorMeta>,
    /// Data-dependent sizes (`nonzero`'s row count): new symbols, numbered from
    /// `g.syms.len()` in order, which the caller declares; each is bounded by a worst case.
    pub new_syms: Vec<Sym>,
}

/// [`infer`], also for ops whose result size depends on the data: such a size becomes a new
/// symbol bounded by the op's worst case, narrowed to `bound` when given (a worst case the
/// inputs do not give, such as `repeat_interleave`'s total count, must be given).
pub fn infer_with_syms(g: &Graph, op: &str, args: &[Arg], bound: Option<usize>) -> Result<Inferred> {
    let inferred = match crate::shape_dynamic::infer(g, op, args, bound) {
        Some(r) => r?,
        None => Inferred { metas: infer_op(g, op, args)?, new_syms: vec![] },
    };
    let dim_max = |d: Dim| match d {
        Dim::Sym(s) if s >= g.syms.len() => inferred.new_syms.get(s - g.syms.len()).map_or(0, |sym| sym.max),
        d => g.dim_max(d),
    };
    // Sizes come from user integers: an output must be addressable in bytes.
    for m in &inferred.metas {
        let bytes = m.shape.iter().try_fold(m.dtype.size(), |acc, &d| acc.checked_mul(dim_max(d)));
        if !bytes.is_some_and(|b| b <= isize::MAX as usize) {
            return Err(shape_err(op, format!("output {:?} of {} is too large", m.shape, m.dtype)));
        }
    }
    Ok(inferred)
}

fn infer_op(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let same = |i: usize| -> Result<Vec<TensorMeta>> { Ok(vec![tensor(g, op, args, i)?.clone()]) };
    match op {
        "aten::relu" | "aten::hardtanh" | "aten::hardswish" | "aten::hardsigmoid" | "aten::clone" | "aten::dropout" | "aten::neg" => {
            same(0)
        }
        "aten::_softmax" | "aten::_log_softmax" => {
            let x = tensor(g, op, args, 0)?;
            wrap_dim(op, int(op, args, 1)?, x.rank())?;
            require_float(op, x)?;
            Ok(vec![x.clone()])
        }
        "aten::embedding" => {
            let (w, idx) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            if w.rank() != 2 {
                return Err(shape_err(op, format!("weight {:?} must be 2-D [num_embeddings, dim]", w.shape)));
            }
            if !matches!(idx.dtype, ScalarType::Long | ScalarType::Int) {
                return Err(shape_err(op, format!("indices must be int64 or int32, got {}", idx.dtype)));
            }
            let mut shape = idx.shape.clone();
            shape.push(w.shape[1]);
            Ok(vec![TensorMeta::new(w.dtype, shape)])
        }
        "aten::bmm" => {
            let (a, b) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            if a.rank() != 3 || b.rank() != 3 || a.shape[0] != b.shape[0] || a.shape[2] != b.shape[1] || a.dtype != b.dtype {
                return Err(shape_err(op, format!("cannot batch-multiply {:?} {} by {:?} {}", a.shape, a.dtype, b.shape, b.dtype)));
            }
            Ok(vec![TensorMeta::new(a.dtype, vec![a.shape[0], a.shape[1], b.shape[2]])])
        }
        "aten::convolution" => {
            let (x, w) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            // The batch may be a symbol (Voxtral encodes a dynamic number of audio windows);
            // every other size is fixed.
            let batch = *x.shape.first().ok_or_else(|| shape_err(op, "input has no batch dimension"))?;
            let mut unbatched = x.clone();
            unbatched.shape[0] = Dim::Fixed(g.dim_max(batch));
            let (xs, ws) = (fixed(op, &unbatched)?, fixed(op, w)?);
            let groups = int(op, args, 8)?;
            if !(xs.len() == 4 && ws.len() == 4 || xs.len() == 3 && ws.len() == 3) {
                return Err(shape_err(op, format!("input {xs:?} and weight {ws:?} must both be 3-D or 4-D")));
            }
            let spatial = xs.len() - 2;
            let list = |i: usize| -> Result<Vec<i64>> {
                let v = ints(op, args, i)?;
                Ok(if v.len() == 1 { vec![v[0]; spatial] } else { v.to_vec() })
            };
            let (stride, padding, dilation) = (list(3)?, list(4)?, list(5)?);
            let transposed = matches!(args.get(6), Some(Arg::Bool(true)));
            // Weights are [out, in/groups, k…], transposed ones [in, out/groups, k…].
            // i128: sizes times user integers cannot overflow.
            let (groups, wide) = (groups as i128, |v: usize| v as i128);
            let (in_channels, out_channels) = if transposed { (wide(ws[0]), wide(ws[1]) * groups) } else { (wide(ws[1]) * groups, wide(ws[0])) };
            let per_group_ok = wide(ws[0]) % groups.max(1) == 0;
            if groups <= 0 || wide(xs[1]) != in_channels || !per_group_ok {
                let rule = if transposed { "in_channels = weight[0]" } else { "in_channels = weight[1] * groups" };
                return Err(shape_err(op, format!("input {xs:?} does not match weight {ws:?} with groups {groups} ({rule})")));
            }
            if let Some(Arg::Tensor(b)) = args.get(2) {
                if g.meta(*b).sizes() != Some(vec![out_channels as usize]) {
                    return Err(shape_err(op, format!("bias {:?} must be [{out_channels}]", g.meta(*b).shape)));
                }
            }
            let output_padding = if transposed { list(7)? } else { vec![0; spatial] };
            let mut out = vec![xs[0], out_channels as usize];
            for k in 0..spatial {
                let (s, p, d, o) = (stride.get(k), padding.get(k), dilation.get(k), output_padding.get(k));
                let (Some(&s), Some(&p), Some(&d), Some(&o)) = (s, p, d, o) else {
                    return Err(shape_err(op, "stride/padding/dilation/output_padding lists are too short"));
                };
                let (s, p, d, o) = (s as i128, p as i128, d as i128, o as i128);
                let eff = d * (wide(ws[2 + k]) - 1) + 1;
                let n = if transposed { (wide(xs[2 + k]) - 1) * s - 2 * p + eff + o } else { (wide(xs[2 + k]) + 2 * p - eff) / s.max(1) + 1 };
                if s <= 0 || d <= 0 || p < 0 || o < 0 || (transposed && o >= s.max(d)) || n <= 0 || n > i64::MAX as i128 {
                    return Err(shape_err(
                        op,
                        format!("input {xs:?} too small for weight {ws:?} (stride {s}, padding {p}, dilation {d}, output padding {o})"),
                    ));
                }
                out.push(n as usize);
            }
            let mut dims: Vec<Dim> = out.iter().map(|&n| Dim::Fixed(n)).collect();
            dims[0] = batch;
            Ok(vec![TensorMeta::new(x.dtype, dims)])
        }
        "aten::_native_batch_norm_legit_no_training" => {
            let x = tensor(g, op, args, 0)?;
            let c = *x.shape.get(1).ok_or_else(|| shape_err(op, "input needs a channel dimension"))?;
            for (i, name) in [(1, "weight"), (2, "bias"), (3, "running_mean"), (4, "running_var")] {
                if let Some(Arg::Tensor(v)) = args.get(i) {
                    if g.meta(*v).shape != [c] {
                        return Err(shape_err(op, format!("{name} {:?} must be [{c:?}] for input {:?}", g.meta(*v).shape, x.shape)));
                    }
                }
            }
            let empty = TensorMeta::fixed(x.dtype, &[0]);
            Ok(vec![x.clone(), empty.clone(), empty])
        }
        "aten::adaptive_avg_pool2d" | "aten::_adaptive_avg_pool2d" => {
            let x = tensor(g, op, args, 0)?;
            let o = ints(op, args, 1)?;
            if x.rank() != 4 || o.len() != 2 || o.iter().any(|&n| n <= 0) {
                return Err(shape_err(op, format!("needs a 4-D input and 2 positive output sizes, got {:?} and {o:?}", x.shape)));
            }
            let mut shape = x.shape[..2].to_vec();
            shape.extend(o.iter().map(|&n| Dim::Fixed(n as usize)));
            Ok(vec![TensorMeta::new(x.dtype, shape)])
        }
        "aten::addmm" => {
            let (b, m1, m2) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?, tensor(g, op, args, 2)?);
            if m1.rank() != 2 || m2.rank() != 2 || m1.shape[1] != m2.shape[0] {
                return Err(shape_err(op, format!("cannot multiply {:?} by {:?}", m1.shape, m2.shape)));
            }
            let out = vec![m1.shape[0], m2.shape[1]];
            broadcast(op, &b.shape, &out)?;
            Ok(vec![TensorMeta::new(m1.dtype, out)])
        }
        "aten::mm" => {
            let (m1, m2) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            if m1.rank() != 2 || m2.rank() != 2 || m1.shape[1] != m2.shape[0] {
                return Err(shape_err(op, format!("cannot multiply {:?} by {:?}", m1.shape, m2.shape)));
            }
            Ok(vec![TensorMeta::new(m1.dtype, vec![m1.shape[0], m2.shape[1]])])
        }
        "aten::linear" => {
            let (x, w) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            if w.rank() != 2 || x.rank() == 0 || x.shape[x.rank() - 1] != w.shape[1] {
                return Err(shape_err(op, format!("input {:?} does not match weight {:?} ([out, in])", x.shape, w.shape)));
            }
            if let Some(Arg::Tensor(b)) = args.get(2) {
                if g.meta(*b).shape != [w.shape[0]] {
                    return Err(shape_err(op, format!("bias {:?} must be [{:?}]", g.meta(*b).shape, w.shape[0])));
                }
            }
            let mut shape = x.shape.clone();
            *shape.last_mut().unwrap() = w.shape[0];
            Ok(vec![TensorMeta::new(x.dtype, shape)])
        }
        "aten::permute_copy" => {
            let x = tensor(g, op, args, 0)?;
            let dims = ints(op, args, 1)?;
            if dims.len() != x.rank() {
                return Err(shape_err(op, format!("{} dims given for rank {}", dims.len(), x.rank())));
            }
            let mut seen = vec![false; x.rank()];
            let mut shape = Vec::new();
            for &d in dims {
                let n = norm_dim(op, d, x.rank())?;
                if std::mem::replace(&mut seen[n], true) {
                    return Err(shape_err(op, format!("dims {dims:?} repeat {d}")));
                }
                shape.push(x.shape[n]);
            }
            Ok(vec![TensorMeta::new(x.dtype, shape)])
        }
        "aten::view_copy" if matches!(args.get(1), Some(Arg::SymInts(_))) => {
            let x = tensor(g, op, args, 0)?;
            let Some(Arg::SymInts(size)) = args.get(1) else { unreachable!() };
            Ok(vec![TensorMeta::new(x.dtype, view_sym(g, op, &x.shape, size)?)])
        }
        "aten::view_copy" => {
            let x = tensor(g, op, args, 0)?;
            let numel: usize = fixed(op, x)?.iter().product();
            let size = ints(op, args, 1)?;
            let known = size.iter().filter(|&&d| d != -1).try_fold(1i64, |acc, &d| acc.checked_mul(d));
            let (Some(known), false) = (known, size.iter().filter(|&&d| d == -1).count() > 1 || size.iter().any(|&d| d < -1)) else {
                return Err(shape_err(op, format!("invalid size {size:?}")));
            };
            let sizes: Vec<usize> = size
                .iter()
                .map(|&d| if d == -1 { numel / known.max(1) as usize } else { d as usize })
                .collect();
            if sizes.iter().product::<usize>() != numel {
                return Err(shape_err(op, format!("cannot view {:?} ({numel} elements) as {size:?}", x.shape)));
            }
            Ok(vec![TensorMeta::fixed(x.dtype, &sizes)])
        }
        "aten::flatten.using_ints" => {
            let x = tensor(g, op, args, 0)?;
            let xs = fixed(op, x)?;
            let (s, e) = (wrap_dim(op, int(op, args, 1)?, xs.len())?, wrap_dim(op, int(op, args, 2)?, xs.len())?);
            if xs.is_empty() {
                // A scalar flattens to one element.
                return Ok(vec![TensorMeta::fixed(x.dtype, &[1])]);
            }
            if s > e {
                return Err(shape_err(op, format!("start_dim {s} after end_dim {e}")));
            }
            let mut out = xs[..s].to_vec();
            out.push(xs[s..=e].iter().product());
            out.extend_from_slice(&xs[e + 1..]);
            Ok(vec![TensorMeta::fixed(x.dtype, &out)])
        }
        "aten::cat" => {
            let Some(Arg::Tensors(ts)) = args.first() else { return Err(shape_err(op, "argument 0 must be a tensor list")) };
            let first = ts.first().map(|&t| g.meta(t)).ok_or_else(|| shape_err(op, "needs at least one tensor"))?;
            let dim = norm_dim(op, int(op, args, 1)?, first.rank())?;
            let mut total = 0usize;
            for &t in ts {
                let m = g.meta(t);
                let ok = m.rank() == first.rank()
                    && m.dtype == first.dtype
                    && (0..m.rank()).all(|i| i == dim || m.shape[i] == first.shape[i]);
                if !ok {
                    return Err(shape_err(op, format!("{:?} {} does not match {:?} {} outside dim {dim}", m.shape, m.dtype, first.shape, first.dtype)));
                }
                total += g.dim_max(m.shape[dim]);
            }
            let mut shape = first.shape.clone();
            shape[dim] = Dim::Fixed(total);
            Ok(vec![TensorMeta::new(first.dtype, shape)])
        }
        "aten::select_copy.int" => {
            let x = tensor(g, op, args, 0)?;
            let dim = norm_dim(op, int(op, args, 1)?, x.rank())?;
            if let Some(Arg::Int(i)) = args.get(2) {
                let n = g.dim_max(x.shape[dim]) as i64;
                if let Dim::Fixed(_) = x.shape[dim] {
                    if *i >= n || *i < -n {
                        return Err(shape_err(op, format!("index {i} out of range for dim {dim} of {:?}", x.shape)));
                    }
                }
            } else if !matches!(args.get(2), Some(Arg::SymInt(_))) {
                return Err(shape_err(op, format!("argument 2 must be an int, got {:?}", args.get(2))));
            }
            let mut shape = x.shape.clone();
            shape.remove(dim);
            Ok(vec![TensorMeta::new(x.dtype, shape)])
        }
        "aten::sym_size.int" => {
            let x = tensor(g, op, args, 0)?;
            norm_dim(op, int(op, args, 1)?, x.rank())?;
            Ok(vec![TensorMeta::fixed(ScalarType::Long, &[])])
        }
        "aten::sym_numel" => tensor(g, op, args, 0).map(|_| vec![TensorMeta::fixed(ScalarType::Long, &[])]),
        _ if op.starts_with("executorch_prim::") => {
            let def = crate::ops::op(op).ok_or_else(|| crate::ExportError::UnknownOp(op.to_string()))?;
            for i in 0..def.functional.args.len() {
                if !matches!(args.get(i), Some(Arg::Int(_) | Arg::SymInt(_) | Arg::Scalar(Scalar::Int(_) | Scalar::Bool(_)) | Arg::Bool(_))) {
                    return Err(shape_err(op, format!("argument {i} must be an integer, got {:?}", args.get(i))));
                }
            }
            Ok(vec![TensorMeta::fixed(ScalarType::Long, &[])])
        }
        "aten::copy_" => {
            let (state, src) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            if state.dtype != src.dtype || state.shape != src.shape {
                return Err(shape_err(op, format!("cannot store {} {:?} into {} {:?}", src.dtype, src.shape, state.dtype, state.shape)));
            }
            // The write is the effect; the node defines no new values.
            Ok(vec![])
        }
        "aten::_local_scalar_dense" => {
            let x = tensor(g, op, args, 0)?;
            if !matches!(x.dtype, ScalarType::Long | ScalarType::Int) || x.shape.iter().any(|&d| d != Dim::Fixed(1)) {
                return Err(shape_err(op, format!("needs a one-element integer tensor, got {} {:?}", x.dtype, x.shape)));
            }
            Ok(vec![TensorMeta::fixed(ScalarType::Long, &[])])
        }
        "llama::sdpa_with_kv_cache" => {
            let q = tensor(g, op, args, 0)?;
            let (k, v) = (tensor(g, op, args, 1)?, tensor(g, op, args, 2)?);
            let (kc, vc) = (tensor(g, op, args, 3)?, tensor(g, op, args, 4)?);
            let ok = q.rank() == 4
                && k.shape == v.shape
                && kc.shape == vc.shape
                && k.rank() == 4
                && kc.rank() == 4
                && q.shape[0] == k.shape[0]
                && q.shape[1] == k.shape[1]
                && q.shape[3] == k.shape[3]
                && kc.shape[0] == k.shape[0]
                && kc.shape[2] == k.shape[2]
                && kc.shape[3] == k.shape[3]
                && [q, k, v, kc, vc].iter().all(|m| m.dtype == ScalarType::Float);
            if !ok {
                return Err(shape_err(
                    op,
                    format!(
                        "needs float q [B,S,H,D] {:?}, k/v [B,S,KVH,D] {:?}/{:?}, caches [B,max_seq_len,KVH,D] {:?}/{:?}",
                        q.shape, k.shape, v.shape, kc.shape, vc.shape
                    ),
                ));
            }
            let (h, kvh) = (g.dim_max(q.shape[2]), g.dim_max(k.shape[2]));
            if kvh == 0 || h % kvh != 0 {
                return Err(shape_err(op, format!("{h} query heads are not a multiple of {kvh} kv heads")));
            }
            for i in [5, 6] {
                if !matches!(args.get(i), Some(Arg::Int(_) | Arg::SymInt(_))) {
                    return Err(shape_err(op, format!("argument {i} must be an int, got {:?}", args.get(i))));
                }
            }
            Ok(vec![q.clone()])
        }
        "quantized_decomposed::quantize_per_tensor" => {
            let x = tensor(g, op, args, 0)?;
            require_float(op, x)?;
            let dtype = match args.get(5) {
                Some(Arg::ScalarType(t)) => *t,
                other => return Err(shape_err(op, format!("argument 5 must be a dtype, got {other:?}"))),
            };
            Ok(vec![TensorMeta::new(dtype, x.shape.clone())])
        }
        "quantized_decomposed::dequantize_per_tensor" | "quantized_decomposed::dequantize_per_channel" => {
            let x = tensor(g, op, args, 0)?;
            let out_dtype = match args.last() {
                Some(Arg::ScalarType(t)) => *t,
                _ => ScalarType::Float,
            };
            if op.ends_with("per_channel") {
                let axis = norm_dim(op, int(op, args, 3)?, x.rank())?;
                let scales = tensor(g, op, args, 1)?;
                if scales.shape != [x.shape[axis]] {
                    return Err(shape_err(op, format!("scales {:?} must be [{:?}] (axis {axis} of {:?})", scales.shape, x.shape[axis], x.shape)));
                }
            }
            Ok(vec![TensorMeta::new(out_dtype, x.shape.clone())])
        }
        "rbuild::qconv2d" | "rbuild::qlinear" | "rbuild::qadd" | "rbuild::qmul" | "rbuild::qmean_hw" | "rbuild::qlookup"
        | "rbuild::qmax_pool2d" | "rbuild::qavg_pool2d" => crate::shape_qint8::infer(g, op, args),
        "aten::gelu" => {
            match args.get(1) {
                Some(Arg::Str(a)) if a == "none" || a == "tanh" => {}
                other => return Err(shape_err(op, format!("approximate must be \"none\" or \"tanh\", got {other:?}"))),
            }
            same(0)
        }
        "aten::native_layer_norm" => {
            let x = tensor(g, op, args, 0)?;
            let ns = ints(op, args, 1)?;
            let r = x.rank();
            let fits = ns.len() <= r
                && ns.iter().zip(&x.shape[r - ns.len()..]).all(|(&n, &d)| n >= 0 && d == Dim::Fixed(n as usize));
            if ns.is_empty() || !fits || x.dtype != ScalarType::Float {
                return Err(shape_err(op, format!("normalized_shape {ns:?} must be the trailing (fixed) dims of float input {:?}", x.shape)));
            }
            for i in [2, 3] {
                if let Some(Arg::Tensor(w)) = args.get(i) {
                    if g.meta(*w).shape.iter().map(|&d| g.dim_max(d) as i64).collect::<Vec<_>>() != *ns {
                        return Err(shape_err(op, format!("weight/bias {:?} must have shape {ns:?}", g.meta(*w).shape)));
                    }
                }
            }
            // mean and rstd keep the leading dims with the normalized ones set to 1.
            let mut stat = x.shape.clone();
            for d in &mut stat[r - ns.len()..] {
                *d = Dim::Fixed(1);
            }
            Ok(vec![x.clone(), TensorMeta::new(ScalarType::Float, stat.clone()), TensorMeta::new(ScalarType::Float, stat)])
        }
        "llama::custom_sdpa" => {
            let (q, k, v) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?, tensor(g, op, args, 2)?);
            let ok = q.rank() == 4
                && k.rank() == 4
                && k.shape == v.shape
                && q.shape[0] == k.shape[0]
                && q.shape[3] == k.shape[3]
                && [q, k, v].iter().all(|m| m.dtype == ScalarType::Float);
            if !ok {
                return Err(shape_err(op, format!("needs float q [B,S,H,D] {:?} and k/v [B,L,KVH,D] {:?}/{:?}", q.shape, k.shape, v.shape)));
            }
            if !matches!(args.get(3), Some(Arg::Int(_) | Arg::SymInt(_))) {
                return Err(shape_err(op, format!("start_pos must be an int, got {:?}", args.get(3))));
            }
            Ok(vec![q.clone()])
        }
        "rbuild::log_mel_spectrogram" => {
            let (pcm, n_mels, ints) = log_mel_inputs(g, op, args, &["hop"])?;
            let hop = ints[0];
            // A dynamic N gives frames up to max(N) / hop; the model builder names that symbol.
            let frames = match pcm.shape[0] {
                Dim::Fixed(n) => Dim::Fixed(n / hop),
                d => Dim::Fixed(g.dim_max(d) / hop),
            };
            Ok(vec![TensorMeta::new(ScalarType::Float, vec![Dim::Fixed(1), Dim::Fixed(n_mels), frames])])
        }
        "rbuild::log_mel_chunks" => {
            let (pcm, n_mels, ints) = log_mel_inputs(g, op, args, &["hop", "pad_to", "chunk_frames"])?;
            let (hop, chunk_frames) = (ints[0], ints[2]);
            // Up to ceil(max N / chunk samples) chunks; the model builder names that symbol.
            let chunks = g.dim_max(pcm.shape[0]).div_ceil(chunk_frames * hop).max(1);
            Ok(vec![TensorMeta::fixed(ScalarType::Float, &[chunks, n_mels, chunk_frames])])
        }
        "rbuild::add_positions" => {
            let (x, t) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            if x.rank() != 3 || t.rank() != 2 || x.shape[2] != t.shape[1] || x.dtype != ScalarType::Float || t.dtype != x.dtype {
                return Err(shape_err(op, format!("input {:?} must be [B,S,E] float and table {:?} [P,E]", x.shape, t.shape)));
            }
            Ok(vec![x.clone()])
        }
        "rbuild::cross_attention" => {
            let (q, mem) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            let (wk, wv) = (tensor(g, op, args, 2)?, tensor(g, op, args, 4)?);
            let (kc, vc) = (tensor(g, op, args, 6)?, tensor(g, op, args, 7)?);
            let (hd, e) = (q.shape.get(2).map(|&d| g.dim_max(d)).unwrap_or(0) * q.shape.get(3).map(|&d| g.dim_max(d)).unwrap_or(0), mem.shape.get(2).map(|&d| g.dim_max(d)).unwrap_or(0));
            let ok = q.rank() == 4
                && mem.rank() == 3
                && kc.rank() == 4
                && kc.shape == vc.shape
                && kc.shape[1] == mem.shape[1]
                && kc.shape[2] == q.shape[2]
                && kc.shape[3] == q.shape[3]
                && wk.shape == [Dim::Fixed(hd), Dim::Fixed(e)]
                && wv.shape == wk.shape
                && [q, mem, wk, wv].iter().all(|m| m.dtype == ScalarType::Float)
                && matches!(kc.dtype, ScalarType::Float | ScalarType::Half)
                && vc.dtype == kc.dtype;
            if !ok {
                return Err(shape_err(
                    op,
                    format!("needs float q [1,S,H,D] {:?}, memory [1,T,E] {:?}, weights [H*D,E] {:?}/{:?}, Float or Half caches [1,T,H,D] {:?}/{:?}", q.shape, mem.shape, wk.shape, wv.shape, kc.shape, vc.shape),
                ));
            }
            Ok(vec![q.clone()])
        }
        "rbuild::rms_norm" => {
            let (x, w) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            if x.rank() == 0 || w.shape != [x.shape[x.rank() - 1]] || x.dtype != ScalarType::Float || w.dtype != x.dtype {
                return Err(shape_err(op, format!("weight {:?} must match the last dim of input {:?} (float)", w.shape, x.shape)));
            }
            Ok(vec![x.clone()])
        }
        "rbuild::rope" => {
            let (x, c, sn) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?, tensor(g, op, args, 2)?);
            if x.rank() != 4 || c.rank() != 2 || c.shape != sn.shape || c.shape[1] != x.shape[3] || x.dtype != ScalarType::Float {
                return Err(shape_err(op, format!("input {:?} must be [B,S,H,D] float and cos/sin {:?}/{:?} [max_seq_len, D]", x.shape, c.shape, sn.shape)));
            }
            Ok(vec![x.clone()])
        }
        "rbuild::silu_mul" => {
            let (a, b) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            if a.shape != b.shape || a.dtype != b.dtype {
                return Err(shape_err(op, format!("gate {:?} and up {:?} must match", a.shape, b.shape)));
            }
            Ok(vec![a.clone()])
        }
        "rbuild::linear_f16" => {
            let (x, w) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
            let ws = fixed(op, w)?;
            let k = match x.shape.last() {
                Some(&d) => g.dim_max(d),
                None => return Err(shape_err(op, "input must have a last dim")),
            };
            if x.dtype != ScalarType::Float || w.dtype != ScalarType::Half || ws.len() != 2 || ws[1] != k {
                return Err(shape_err(op, format!("input {:?} {} does not match weight {:?} {} (Half [N, K])", x.shape, x.dtype, w.shape, w.dtype)));
            }
            let mut shape = x.shape.clone();
            *shape.last_mut().unwrap() = Dim::Fixed(ws[0]);
            Ok(vec![TensorMeta::new(ScalarType::Float, shape)])
        }
        "rbuild::linear_q8" | "rbuild::linear_q4" | "rbuild::linear_8da4w" | "rbuild::linear_q8g" | "rbuild::linear_q4_1" => {
            let (x, w, sc) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?, tensor(g, op, args, 2)?);
            let ws = fixed(op, w)?;
            let k = match x.shape.last() {
                Some(&d) => g.dim_max(d),
                None => return Err(shape_err(op, "input must have a last dim")),
            };
            let n = *ws.first().unwrap_or(&0);
            let ok = if op == "rbuild::linear_q8" {
                w.dtype == ScalarType::Char && ws == [n, k] && sc.shape == [Dim::Fixed(n)]
            } else {
                // Groupwise: [N, K/group] scales (and minimums for q4_1, read before the bias).
                let with_mins = op == "rbuild::linear_q4_1";
                let gs = int(op, args, if with_mins { 5 } else { 4 })?;
                let groups = if gs > 0 && k % gs as usize == 0 { Some(k / gs as usize) } else { None };
                let per_group = groups.map(|gc| vec![Dim::Fixed(n), Dim::Fixed(gc)]);
                let mins_ok = !with_mins || Some(&tensor(g, op, args, 3)?.shape) == per_group.as_ref();
                let weight_ok = if op == "rbuild::linear_q8g" {
                    w.dtype == ScalarType::Char && ws == [n, k]
                } else {
                    w.dtype == ScalarType::Byte && ws == [n, k / 2]
                };
                weight_ok && mins_ok && per_group.is_some_and(|pg| sc.shape == pg)
            };
            if !ok || x.dtype != ScalarType::Float {
                return Err(shape_err(op, format!("input {:?} {} does not match weight {:?} {} / scales {:?}", x.shape, x.dtype, w.shape, w.dtype, sc.shape)));
            }
            let mut shape = x.shape.clone();
            *shape.last_mut().unwrap() = Dim::Fixed(n);
            Ok(vec![TensorMeta::new(ScalarType::Float, shape)])
        }
        "quantized_decomposed::embedding_byte" | "quantized_decomposed::embedding_4bit" => {
            let (w, idx) = (tensor(g, op, args, 0)?, tensor(g, op, args, 5)?);
            let ws = fixed(op, w)?;
            let packed = op.ends_with("4bit");
            let ok_dtype = if packed { w.dtype == ScalarType::Byte } else { matches!(w.dtype, ScalarType::Char | ScalarType::Byte) };
            if ws.len() != 2 || !ok_dtype || !matches!(idx.dtype, ScalarType::Long | ScalarType::Int) {
                return Err(shape_err(op, format!("weight {:?} {} / indices {} are not a quantized table and ids", w.shape, w.dtype, idx.dtype)));
            }
            let dim = if packed { ws[1] * 2 } else { ws[1] };
            let mut shape = idx.shape.clone();
            shape.push(Dim::Fixed(dim));
            Ok(vec![TensorMeta::new(ScalarType::Float, shape)])
        }
        _ => crate::shape_elementwise::infer(g, op, args)
            .or_else(|| crate::shape_create::infer(g, op, args))
            .or_else(|| crate::shape_reduce::infer(g, op, args))
            .or_else(|| crate::shape_layout::infer(g, op, args))
            .or_else(|| crate::shape_views::infer(g, op, args))
            .or_else(|| crate::shape_index::infer(g, op, args))
            .or_else(|| crate::shape_spatial::infer(g, op, args))
            .or_else(|| crate::shape_pad::infer(g, op, args))
            .or_else(|| crate::shape_norm::infer(g, op, args))
            .unwrap_or_else(|| Err(crate::ExportError::UnknownOp(op.to_string()))),
    }
}

/// `view_copy` to a size list with run-time entries: fixed element counts must agree and the
/// symbols must be the same on both sides (so the view is valid for every symbol value).
/// The inputs the log-mel ops share: float pcm [N], window [n_fft], mel_filters
/// [n_mels, n_fft/2+1], then one positive integer per name from argument 3 on. Returns pcm,
/// n_mels and the integers.
fn log_mel_inputs<'a>(g: &'a Graph, op: &str, args: &[Arg], names: &[&str]) -> Result<(&'a TensorMeta, usize, Vec<usize>)> {
    let (pcm, win, filt) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?, tensor(g, op, args, 2)?);
    let ints = (0..names.len()).map(|k| int(op, args, 3 + k)).collect::<Result<Vec<i64>>>()?;
    let (ws, fs) = (fixed(op, win)?, fixed(op, filt)?);
    let ok = pcm.rank() == 1
        && ws.len() == 1
        && fs.len() == 2
        && fs[1] == ws[0] / 2 + 1
        && ints.iter().all(|&v| v > 0)
        && [pcm, win, filt].iter().all(|m| m.dtype == ScalarType::Float);
    if !ok {
        let given: Vec<String> = names.iter().zip(&ints).map(|(n, v)| format!("{n} {v}")).collect();
        return Err(shape_err(
            op,
            format!(
                "needs float pcm [N] {:?}, window [n_fft] {:?}, mel_filters [n_mels, n_fft/2+1] {:?} and positive {}",
                pcm.shape,
                win.shape,
                filt.shape,
                given.join(", ")
            ),
        ));
    }
    Ok((pcm, fs[0], ints.into_iter().map(|v| v as usize).collect()))
}

fn view_sym(g: &Graph, op: &str, from: &[Dim], size: &[IntOrSym]) -> Result<Vec<Dim>> {
    let sym_of = |v: usize| sym_of_value(g, v);
    let mut syms_in: Vec<usize> = from.iter().filter_map(|d| if let Dim::Sym(s) = d { Some(*s) } else { None }).collect();
    let fixed_in: usize = from.iter().map(|d| if let Dim::Fixed(n) = d { *n } else { 1 }).product();
    let mut out = Vec::with_capacity(size.len());
    let mut syms_out = Vec::new();
    let mut fixed_out = 1usize;
    let mut infer = None;
    for (i, item) in size.iter().enumerate() {
        match *item {
            IntOrSym::Int(-1) if infer.is_none() => {
                infer = Some(i);
                out.push(Dim::Fixed(0));
            }
            IntOrSym::Int(n) if n >= 0 => {
                fixed_out = fixed_out.saturating_mul(n as usize);
                out.push(Dim::Fixed(n as usize));
            }
            IntOrSym::Sym(v) => {
                let s = sym_of(v).ok_or_else(|| shape_err(op, format!("size entry {i} is a run-time value that is not a known dimension")))?;
                syms_out.push(s);
                out.push(Dim::Sym(s));
            }
            IntOrSym::Int(n) => return Err(shape_err(op, format!("invalid size entry {n}"))),
        }
    }
    syms_in.sort();
    syms_out.sort();
    if let Some(i) = infer {
        if fixed_out == 0 || fixed_in % fixed_out != 0 {
            return Err(shape_err(op, format!("cannot view {from:?} as {size:?}")));
        }
        out[i] = Dim::Fixed(fixed_in / fixed_out);
        fixed_out = fixed_in;
    }
    if syms_in != syms_out || fixed_in != fixed_out {
        return Err(shape_err(op, format!("cannot view {from:?} as {size:?}")));
    }
    Ok(out)
}

/// Dtype check helper for builders: float tensors only.
pub fn require_float(op: &str, m: &TensorMeta) -> Result<()> {
    if matches!(m.dtype, ScalarType::Float | ScalarType::Double | ScalarType::Half | ScalarType::BFloat16) {
        Ok(())
    } else {
        Err(shape_err(op, format!("needs a floating tensor, got {}", m.dtype)))
    }
}
