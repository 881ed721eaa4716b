//! Shape inference of normalizations with statistics (group norm, training batch norm),
//! distances, dropout, embedding bags, FFTs and the convolution gradient.

use rbuild_runtime::ScalarType;

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, IntOrSym, TensorMeta};
use crate::shape::{fixed, flag, int, ints, require_float, tensor, wrap_dim};

/// Output metas of `op`, or None when `op` is not one of these.
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg]) -> Option<Result<Vec<TensorMeta>>> {
    let r = match op {
        "aten::native_group_norm" => group_norm(g, op, args),
        "aten::_native_batch_norm_legit.no_stats" => batch_norm_no_stats(g, op, args),
        "aten::_cdist_forward" => cdist(g, op, args),
        "aten::_pdist_forward" => tensor(g, op, args, 0).and_then(|x| {
            require_float(op, x)?;
            let s = fixed(op, x)?;
            if s.len() != 2 {
                return Err(shape_err(op, format!("needs a 2-D input, got {:?}", x.shape)));
            }
            let pairs = s[0].checked_mul(s[0].saturating_sub(1)).ok_or_else(|| shape_err(op, format!("{} rows have too many pairs", s[0])))?;
            Ok(vec![TensorMeta::fixed(x.dtype, &[pairs / 2])])
        }),
        "aten::native_dropout" => tensor(g, op, args, 0).map(|x| vec![x.clone(), TensorMeta::new(ScalarType::Bool, x.shape.clone())]),
        "aten::_embedding_bag" => embedding_bag(g, op, args),
        "aten::convolution_backward" => convolution_backward(g, op, args),
        "aten::_fft_r2c" | "aten::_fft_c2r" => fft(g, op, args),
        _ => return None,
    };
    Some(r)
}

/// A `SymInt` argument known at export.
fn fixed_int(op: &str, args: &[Arg], i: usize) -> Result<i64> {
    match args.get(i) {
        Some(Arg::Int(v)) => Ok(*v),
        other => Err(shape_err(op, format!("argument {i} must be an int known at export, got {other:?}"))),
    }
}

/// `[C]` (or absent) affine parameters of a normalization over `c` channels.
fn check_affine(g: &Graph, op: &str, args: &[Arg], c: Dim) -> Result<()> {
    for i in [1, 2] {
        if let Some(Arg::Tensor(v)) = args.get(i) {
            if g.meta(*v).shape != [c] {
                return Err(shape_err(op, format!("weight/bias {:?} must be [{c:?}]", g.meta(*v).shape)));
            }
        }
    }
    Ok(())
}

/// `native_group_norm(input, weight?, bias?, N, C, HxW, group, eps)`: the result, and mean and
/// rstd of shape [N, group].
fn group_norm(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    require_float(op, x)?;
    let [n, c, hxw, groups] = [3, 4, 5, 6].map(|i| fixed_int(op, args, i));
    let (n, c, hxw, groups) = (n?, c?, hxw?, groups?);
    let numel: usize = fixed(op, x)?.iter().product();
    let ok = x.rank() >= 2
        && x.shape[1] == Dim::Fixed(c.max(0) as usize)
        && groups > 0
        && c % groups == 0
        && (n as i128).checked_mul(c as i128).and_then(|nc| nc.checked_mul(hxw as i128)) == Some(numel as i128);
    if !ok {
        return Err(shape_err(op, format!("input {:?} must be [N={n}, C={c}, …] with {hxw} elements per channel and C a multiple of {groups} groups", x.shape)));
    }
    check_affine(g, op, args, Dim::Fixed(c as usize))?;
    let stat = TensorMeta::fixed(x.dtype, &[n as usize, groups as usize]);
    Ok(vec![x.clone(), stat.clone(), stat])
}

/// `_native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps)`: batch
/// statistics over every dim but 1; save_mean and save_invstd are [C].
fn batch_norm_no_stats(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    require_float(op, x)?;
    let c = *x.shape.get(1).ok_or_else(|| shape_err(op, format!("input {:?} needs a channel dimension", x.shape)))?;
    check_affine(g, op, args, c)?;
    if !flag(op, args, 3)? {
        return Err(shape_err(op, "without running statistics, batch norm needs training=True"));
    }
    let stat = TensorMeta::new(x.dtype, vec![c]);
    Ok(vec![x.clone(), stat.clone(), stat])
}

/// `_cdist_forward(x1 [..,P,M], x2 [..,R,M], p, compute_mode?)`: [broadcast batch.., P, R].
fn cdist(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (a, b) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
    require_float(op, a)?;
    if a.rank() < 2 || b.rank() < 2 || a.shape[a.rank() - 1] != b.shape[b.rank() - 1] || a.dtype != b.dtype {
        return Err(shape_err(op, format!("x1 {:?} and x2 {:?} must be [.., P, M] and [.., R, M] of one dtype", a.shape, b.shape)));
    }
    let mut shape = crate::shape::broadcast(op, &a.shape[..a.rank() - 2], &b.shape[..b.rank() - 2])?;
    shape.extend([a.shape[a.rank() - 2], b.shape[b.rank() - 2]]);
    Ok(vec![TensorMeta::new(a.dtype, shape)])
}

/// `_embedding_bag(weight [V,D], indices [L], offsets [B], scale_grad_by_freq, mode,
/// sparse, per_sample_weights?, include_last_offset, padding_idx)`: the bags [B', D] and the
/// bookkeeping tensors, sized as PyTorch's meta function does (offset2bag is empty on the
/// float sum fast path; max_indices is [B', D] for max bags).
fn embedding_bag(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (w, indices, offsets) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?, tensor(g, op, args, 2)?);
    let ws = fixed(op, w)?;
    let index_type = |m: &TensorMeta| matches!(m.dtype, ScalarType::Long | ScalarType::Int);
    if ws.len() != 2 || indices.rank() != 1 || offsets.rank() != 1 || !index_type(indices) || offsets.dtype != indices.dtype {
        return Err(shape_err(op, format!("needs weight [V,D] {:?}, 1-D indices {:?} and offsets {:?} of one integer dtype", w.shape, indices.shape, offsets.shape)));
    }
    let mode = int(op, args, 4)?;
    let include_last = flag(op, args, 7)?;
    let padding_idx = int(op, args, 8)?;
    let bags = g.dim_max(offsets.shape[0]).checked_sub(include_last as usize).ok_or_else(|| shape_err(op, "include_last_offset needs at least one offset"))?;
    if !(0..=2).contains(&mode) {
        return Err(shape_err(op, format!("mode must be 0 (sum), 1 (mean) or 2 (max), got {mode}")));
    }
    let fast_sum = mode == 0 && padding_idx < 0 && matches!(w.dtype, ScalarType::Float | ScalarType::Half | ScalarType::BFloat16);
    let long = |shape: &[usize]| TensorMeta::fixed(indices.dtype, shape);
    let offset2bag = if fast_sum { long(&[0]) } else { TensorMeta::new(indices.dtype, indices.shape.clone()) };
    let max_indices = if mode == 2 { long(&[bags, ws[1]]) } else { long(&[bags]) };
    Ok(vec![TensorMeta::fixed(w.dtype, &[bags, ws[1]]), offset2bag, long(&[bags]), max_indices])
}

/// `convolution_backward(grad_output, input, weight, bias_sizes?, …, output_mask)`: gradients
/// shaped like input, weight and the bias.
fn convolution_backward(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (grad, x, w) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?, tensor(g, op, args, 2)?);
    require_float(op, x)?;
    if grad.dtype != x.dtype || w.dtype != x.dtype || grad.rank() != x.rank() || w.rank() != x.rank() {
        return Err(shape_err(op, format!("grad_output {:?}, input {:?} and weight {:?} must share rank and dtype", grad.shape, x.shape, w.shape)));
    }
    match args.get(10) {
        Some(Arg::Bools(mask)) if mask.len() == 3 => {}
        other => return Err(shape_err(op, format!("output_mask must be 3 bools, got {other:?}"))),
    }
    let bias: Vec<Dim> = match args.get(3) {
        Some(Arg::None) => vec![Dim::Fixed(0)],
        Some(Arg::Ints(v)) => v.iter().map(|&n| usize::try_from(n).map(Dim::Fixed).map_err(|_| shape_err(op, "bias_sizes must be non-negative"))).collect::<Result<_>>()?,
        Some(Arg::SymInts(v)) if v.iter().all(|i| matches!(i, IntOrSym::Int(n) if *n >= 0)) => {
            v.iter().map(|i| if let IntOrSym::Int(n) = i { Dim::Fixed(*n as usize) } else { Dim::Fixed(0) }).collect()
        }
        other => return Err(shape_err(op, format!("bias_sizes must be an int list or None, got {other:?}"))),
    };
    Ok(vec![x.clone(), w.clone(), TensorMeta::new(x.dtype, bias)])
}

/// `_fft_r2c(self, dim, normalization, onesided)`: complex, the last transformed dim halved
/// (+1) when one-sided; `_fft_c2r(self, dim, normalization, last_dim_size)`: real, that dim
/// `last_dim_size` long.
fn fft(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    use ScalarType::*;
    let x = tensor(g, op, args, 0)?;
    let dims = ints(op, args, 1)?;
    let last = *dims.last().ok_or_else(|| shape_err(op, "needs at least one dim"))?;
    let d = crate::shape::norm_dim(op, last, x.rank())?;
    for &k in dims {
        wrap_dim(op, k, x.rank())?;
    }
    int(op, args, 2)?;
    let mut shape = x.shape.clone();
    let n = fixed(op, x)?.get(d).copied().unwrap_or(1);
    let dtype = if op == "aten::_fft_r2c" {
        if flag(op, args, 3)? {
            shape[d] = Dim::Fixed(n / 2 + 1);
        }
        match x.dtype {
            Float => ComplexFloat,
            Double => ComplexDouble,
            Half => ComplexHalf,
            t => return Err(shape_err(op, format!("needs a float input, got {t}"))),
        }
    } else {
        let last_size = fixed_int(op, args, 3)?;
        shape[d] = Dim::Fixed(usize::try_from(last_size).map_err(|_| shape_err(op, format!("last_dim_size {last_size} is negative")))?);
        match x.dtype {
            ComplexFloat => Float,
            ComplexDouble => Double,
            ComplexHalf => Half,
            t => return Err(shape_err(op, format!("needs a complex input, got {t}"))),
        }
    };
    Ok(vec![TensorMeta::new(dtype, shape)])
}
