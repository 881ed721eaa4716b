//! Normalization: layer norm and group norm (with their mean/rstd outputs), inference-mode
//! batch norm and batch norm over batch statistics.
//!
//! Statistics are computed in f64; f32 tensors take direct loops that apply the normalization
//! in f32, other float dtypes go through the dtype-erased path.

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::util::{require_contiguous, to_sizes, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::native_layer_norm.out" => native_layer_norm_out,
    "aten::_native_batch_norm_legit_no_training.out" => batch_norm_no_training_out,
    "aten::_native_batch_norm_legit.no_stats_out" => batch_norm_no_stats_out,
    "aten::_native_batch_norm_legit.out" => batch_norm_legit_out,
    "aten::native_group_norm.out" => native_group_norm_out,
}

fn require_contiguous_out(out: &TensorMut<'_>, what: &str) -> KernelResult {
    if out.dim_order.is_contiguous() {
        Ok(())
    } else {
        Err(kerr!("{what}: output dim order {:?} is not supported (contiguous only)", out.dim_order))
    }
}

fn require_floating(dtype: ScalarType, what: &str, name: &str) -> KernelResult {
    if dtype.is_floating() {
        Ok(())
    } else {
        Err(kerr!("{what}: {name} must be a floating tensor, got {dtype}"))
    }
}

/// An optional per-feature parameter (weight/bias), checked to hold `n` elements.
fn param<'a>(t: Option<TensorRef<'a>>, n: usize, what: &str, name: &str) -> KernelResult<Option<Elems<'a>>> {
    let Some(t) = t else { return Ok(None) };
    if t.numel() != n {
        return Err(kerr!("{what}: {name} has {} elements, expected {n}", t.numel()));
    }
    require_floating(t.dtype, what, name)?;
    Elems::of(&t).map(Some)
}

/// A per-channel parameter of batch/group norm: also required to be 1-D, as PyTorch does.
fn vector_param<'a>(t: Option<TensorRef<'a>>, n: usize, what: &str, name: &str) -> KernelResult<Option<Elems<'a>>> {
    if let Some(t) = &t {
        if t.dim() != 1 {
            return Err(kerr!("{what}: {name} must be a vector of {n} elements, got shape {:?}", t.sizes()));
        }
    }
    param(t, n, what, name)
}

fn f32_of<'a>(e: &Option<Elems<'a>>) -> Option<&'a [f32]> {
    match e {
        Some(Elems::F32(s)) => Some(s),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Layer norm
// ---------------------------------------------------------------------------------------------

/// Mean and 1/sqrt(var + eps) of one row (biased variance, two passes in f64).
pub(crate) fn row_stats(row: impl Iterator<Item = f64> + Clone, n: usize, eps: f64) -> (f64, f64) {
    let mean = row.clone().sum::<f64>() / n as f64;
    let var = row.map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    (mean, 1.0 / libm::sqrt(var + eps))
}

/// `native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias,
/// float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)`: args = [input,
/// normalized_shape, weight, bias, eps, out0, out1, out2, (out0, out1, out2)]. out1/out2 (mean,
/// rstd) have shape input.shape[:axis] + [1] * len(normalized_shape).
pub fn native_layer_norm_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "native_layer_norm";
    let inp = args.tensor(0)?;
    let ns = to_sizes(&args.int_list(1)?)?;
    let eps = args.double(4)?;
    require_contiguous(&inp, WHAT)?;
    require_floating(inp.dtype, WHAT, "input")?;
    let rank = inp.dim();
    if ns.len() > rank || inp.sizes()[rank - ns.len()..] != ns[..] {
        return Err(kerr!("{WHAT}: normalized_shape {ns:?} does not match the trailing dims of input {:?}", inp.sizes()));
    }
    let axis = rank - ns.len();
    let m: usize = inp.sizes()[..axis].iter().product();
    let n: usize = ns.iter().product();
    let weight = param(args.opt_tensor(2)?, n, WHAT, "weight")?;
    let bias = param(args.opt_tensor(3)?, n, WHAT, "bias")?;

    let mut out = args.out(5)?;
    let mut mean_out = args.out(6)?;
    let mut rstd_out = args.out(7)?;
    let mut stat_sizes: Vec<usize> = inp.sizes()[..axis].to_vec();
    stat_sizes.resize(rank, 1);
    for (o, sizes) in [(&mut out, inp.sizes()), (&mut mean_out, &stat_sizes[..]), (&mut rstd_out, &stat_sizes[..])] {
        require_contiguous_out(o, WHAT)?;
        require_floating(o.dtype, WHAT, "output")?;
        o.resize(sizes)?;
    }

    if n == 0 {
        // Nothing to normalize: PyTorch reports mean 0 and rstd NaN.
        let mut em = ElemsMut::of(&mut mean_out)?;
        let mut er = ElemsMut::of(&mut rstd_out)?;
        for i in 0..m {
            em.set_f64(i, 0.0);
            er.set_f64(i, f64::NAN);
        }
        return Ok(());
    }

    let all_f32 = [inp.dtype, out.dtype, mean_out.dtype, rstd_out.dtype].iter().all(|&d| d == ScalarType::Float)
        && weight.as_ref().is_none_or(|w| matches!(w, Elems::F32(_)))
        && bias.as_ref().is_none_or(|b| matches!(b, Elems::F32(_)));
    if all_f32 {
        let x: &[f32] = inp.data()?;
        let (w, b) = (f32_of(&weight), f32_of(&bias));
        let mo: &mut [f32] = mean_out.data_mut()?;
        let ro: &mut [f32] = rstd_out.data_mut()?;
        let y: &mut [f32] = out.data_mut()?;
        for (r, (xr, yr)) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)).enumerate() {
            let (mean, rstd) = row_stats(xr.iter().map(|&v| v as f64), n, eps);
            let (mf, rf) = (mean as f32, rstd as f32);
            for (k, (yv, &xv)) in yr.iter_mut().zip(xr).enumerate() {
                let mut v = (xv - mf) * rf;
                if let Some(w) = w {
                    v *= w[k];
                }
                if let Some(b) = b {
                    v += b[k];
                }
                *yv = v;
            }
            mo[r] = mf;
            ro[r] = rf;
        }
        return Ok(());
    }

    let x = Elems::of(&inp)?;
    let mut y = ElemsMut::of(&mut out)?;
    let mut em = ElemsMut::of(&mut mean_out)?;
    let mut er = ElemsMut::of(&mut rstd_out)?;
    for r in 0..m {
        let base = r * n;
        let (mean, rstd) = row_stats((0..n).map(|k| x.f64(base + k)), n, eps);
        for k in 0..n {
            let mut v = (x.f64(base + k) - mean) * rstd;
            if let Some(w) = &weight {
                v *= w.f64(k);
            }
            if let Some(b) = &bias {
                v += b.f64(k);
            }
            y.set_f64(base + k, v);
        }
        em.set_f64(r, mean);
        er.set_f64(r, rstd);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Batch norm (inference)
// ---------------------------------------------------------------------------------------------

/// `_native_batch_norm_legit_no_training.out(Tensor input, Tensor? weight, Tensor? bias,
/// Tensor running_mean, Tensor running_var, float momentum, float eps, *, Tensor(a!) out0,
/// Tensor(b!) out1, Tensor(c!) out2)`: args = [input, weight, bias, running_mean, running_var,
/// momentum, eps, out0, out1, out2, (out0, out1, out2)].
///
/// y = (x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c] over channel dim 1 ([N, C, ...]).
/// out1/out2 are the (empty) saved statistics: they are resized to [0] when their planned
/// shape allows it and otherwise left untouched.
pub fn batch_norm_no_training_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "_native_batch_norm_legit_no_training";
    let inp = args.tensor(0)?;
    require_contiguous(&inp, WHAT)?;
    require_floating(inp.dtype, WHAT, "input")?;
    if inp.dim() < 2 {
        return Err(kerr!("{WHAT}: input must have at least 2 dims ([N, C, ...]), got {:?}", inp.sizes()));
    }
    let sizes = inp.sizes();
    let c = sizes[1];
    let inner: usize = sizes[2..].iter().product();
    let weight = param(args.opt_tensor(1)?, c, WHAT, "weight")?;
    let bias = param(args.opt_tensor(2)?, c, WHAT, "bias")?;
    let mean = param(Some(args.tensor(3)?), c, WHAT, "running_mean")?.ok_or_else(|| kerr!("{WHAT}: running_mean missing"))?;
    let var = param(Some(args.tensor(4)?), c, WHAT, "running_var")?.ok_or_else(|| kerr!("{WHAT}: running_var missing"))?;
    let eps = args.double(6)?;

    let mut out = args.out(7)?;
    require_contiguous_out(&out, WHAT)?;
    require_floating(out.dtype, WHAT, "output")?;
    out.resize(sizes)?;
    for i in [8, 9] {
        // Saved statistics are empty in inference; a differently planned output is left as is.
        let mut o = args.out(i)?;
        let _ = o.resize(&[0]);
    }

    if inner == 0 {
        return Ok(());
    }
    if inp.dtype == ScalarType::Float && out.dtype == ScalarType::Float {
        // ExecuTorch's portable arithmetic, bit for bit: invstd = 1 / sqrt(var + eps) in double
        // rounded to f32, then ((x − mean) · invstd) · w + b in f32.
        let x: &[f32] = inp.data()?;
        let y: &mut [f32] = out.data_mut()?;
        for (k, (xs, ys)) in x.chunks_exact(inner).zip(y.chunks_exact_mut(inner)).enumerate() {
            let ch = k % c;
            let m = mean.f64(ch) as f32;
            let invstd = (1.0 / libm::sqrt(var.f64(ch) + eps)) as f32;
            let w = weight.as_ref().map_or(1.0, |w| w.f64(ch) as f32);
            let b = bias.as_ref().map_or(0.0, |b| b.f64(ch) as f32);
            for (yv, &xv) in ys.iter_mut().zip(xs) {
                *yv = (xv - m) * invstd * w + b;
            }
        }
        return Ok(());
    }
    // Other dtypes in f64, per channel: y = (x - mean) * scale + shift with
    // scale = w / sqrt(var + eps), shift = b.
    let per_channel: Vec<(f64, f64, f64)> = (0..c)
        .map(|ch| {
            let inv = 1.0 / libm::sqrt(var.f64(ch) + eps);
            let w = weight.as_ref().map_or(1.0, |w| w.f64(ch));
            let b = bias.as_ref().map_or(0.0, |b| b.f64(ch));
            (mean.f64(ch), inv * w, b)
        })
        .collect();
    let x = Elems::of(&inp)?;
    let mut y = ElemsMut::of(&mut out)?;
    for i in 0..x.len() {
        let (m, s, b) = per_channel[(i / inner) % c];
        y.set_f64(i, (x.f64(i) - m) * s + b);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Batch norm over batch statistics / group norm
// ---------------------------------------------------------------------------------------------

/// y = x · scale[c] + shift[c] over `blocks` contiguous blocks of `inner` elements, block `k`
/// having channel `channel_of(k)`. f32 tensors take a direct loop (arithmetic in f64, one
/// rounding), others the dtype-erased path.
fn apply_affine(inp: &TensorRef<'_>, out: &mut TensorMut<'_>, inner: usize, coeffs: &[(f64, f64)], channel_of: impl Fn(usize) -> usize) -> KernelResult {
    if inner == 0 {
        return Ok(());
    }
    if inp.dtype == ScalarType::Float && out.dtype == ScalarType::Float {
        let x: &[f32] = inp.data()?;
        let y: &mut [f32] = out.data_mut()?;
        for (k, (xs, ys)) in x.chunks_exact(inner).zip(y.chunks_exact_mut(inner)).enumerate() {
            let (scale, shift) = coeffs[channel_of(k)];
            for (yv, &xv) in ys.iter_mut().zip(xs) {
                *yv = (xv as f64 * scale + shift) as f32;
            }
        }
        return Ok(());
    }
    let x = Elems::of(inp)?;
    let mut y = ElemsMut::of(out)?;
    for i in 0..x.len() {
        let (scale, shift) = coeffs[channel_of(i / inner)];
        y.set_f64(i, x.f64(i) * scale + shift);
    }
    Ok(())
}

/// Per-channel (scale, shift) for y = (x − mean) · rstd · w + b.
fn affine_coeffs(mean: f64, rstd: f64, w: Option<&Elems<'_>>, b: Option<&Elems<'_>>, c: usize) -> (f64, f64) {
    let scale = rstd * w.map_or(1.0, |w| w.f64(c));
    (scale, b.map_or(0.0, |b| b.f64(c)) - mean * scale)
}

/// A batch norm's [N, C, ...] input, checked: the tensor, N, C and the elements per (n, c).
fn batch_input<'a>(args: &KernelArgs<'a>, what: &str) -> KernelResult<(TensorRef<'a>, usize, usize, usize)> {
    let inp = args.tensor(0)?;
    require_contiguous(&inp, what)?;
    require_floating(inp.dtype, what, "input")?;
    if inp.dim() < 2 {
        return Err(kerr!("{what}: input must have at least 2 dims ([N, C, ...]), got {:?}", inp.sizes()));
    }
    let sizes = inp.sizes();
    Ok((inp, sizes[0], sizes[1], sizes[2..].iter().product()))
}

/// Each channel's batch statistics over N and the spatial dims: (mean, 1/sqrt(var + eps),
/// biased var), in f64.
fn channel_stats(x: &Elems<'_>, n: usize, c: usize, inner: usize, eps: f64) -> Vec<(f64, f64, f64)> {
    (0..c)
        .map(|ch| {
            // Channel ch: blocks b * C + ch of `inner` elements, for every b in the batch.
            let values = (0..n).flat_map(move |b| (b * c + ch) * inner..(b * c + ch + 1) * inner).map(|i| x.f64(i));
            let (mean, invstd) = row_stats(values.clone(), n * inner, eps);
            let var = values.map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n * inner) as f64;
            (mean, invstd, var)
        })
        .collect()
}

/// Writes the saved mean and invstd and returns each channel's (scale, shift).
fn save_stats(
    stats: &[(f64, f64, f64)],
    mean_out: &mut TensorMut<'_>,
    invstd_out: &mut TensorMut<'_>,
    weight: Option<&Elems<'_>>,
    bias: Option<&Elems<'_>>,
) -> KernelResult<Vec<(f64, f64)>> {
    let mut em = ElemsMut::of(mean_out)?;
    let mut ei = ElemsMut::of(invstd_out)?;
    Ok(stats
        .iter()
        .enumerate()
        .map(|(ch, &(mean, invstd, _))| {
            em.set_f64(ch, mean);
            ei.set_f64(ch, invstd);
            affine_coeffs(mean, invstd, weight, bias, ch)
        })
        .collect())
}

/// `_native_batch_norm_legit.no_stats_out(Tensor input, Tensor? weight, Tensor? bias, bool
/// training, float momentum, float eps, *, Tensor(a!) out, Tensor(b!) save_mean, Tensor(c!)
/// save_invstd)`: args = [input, weight, bias, training, momentum, eps, out, save_mean,
/// save_invstd, (out, save_mean, save_invstd)].
///
/// Normalizes [N, C, ...] with each channel's batch mean and biased variance (there are no
/// running statistics to use or update, so `training` and `momentum` change nothing);
/// save_mean/save_invstd are [C]: the mean and 1/sqrt(var + eps).
pub fn batch_norm_no_stats_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "_native_batch_norm_legit.no_stats";
    let (inp, n, c, inner) = batch_input(args, WHAT)?;
    let sizes = inp.sizes();
    let weight = vector_param(args.opt_tensor(1)?, c, WHAT, "weight")?;
    let bias = vector_param(args.opt_tensor(2)?, c, WHAT, "bias")?;
    args.bool(3)?;
    let eps = args.double(5)?;

    let mut out = args.out(6)?;
    let mut mean_out = args.out(7)?;
    let mut invstd_out = args.out(8)?;
    for (o, sz) in [(&mut out, sizes), (&mut mean_out, &[c][..]), (&mut invstd_out, &[c][..])] {
        require_contiguous_out(o, WHAT)?;
        require_floating(o.dtype, WHAT, "output")?;
        o.resize(sz)?;
    }

    let stats = channel_stats(&Elems::of(&inp)?, n, c, inner, eps);
    let coeffs = save_stats(&stats, &mut mean_out, &mut invstd_out, weight.as_ref(), bias.as_ref())?;
    apply_affine(&inp, &mut out, inner, &coeffs, |k| k % c)
}

/// A float tensor that the op also writes (running statistics), as f64 values.
fn read_stats(t: &TensorMut<'_>, what: &str, name: &str) -> KernelResult<Vec<f64>> {
    Ok(match t.dtype {
        ScalarType::Float => t.data::<f32>()?.iter().map(|&v| v as f64).collect(),
        ScalarType::Double => t.data::<f64>()?.to_vec(),
        ScalarType::Half => t.data::<half::f16>()?.iter().map(|v| v.to_f64()).collect(),
        ScalarType::BFloat16 => t.data::<half::bf16>()?.iter().map(|v| v.to_f64()).collect(),
        d => return Err(kerr!("{what}: {name} must be a floating tensor, got {d}")),
    })
}

/// `_native_batch_norm_legit.out(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)
/// running_mean, Tensor(b!) running_var, bool training, float momentum, float eps, *, Tensor(d!)
/// out, Tensor(e!) save_mean, Tensor(f!) save_invstd)`: args = [input, weight, bias,
/// running_mean, running_var, training, momentum, eps, out, save_mean, save_invstd, (out,
/// save_mean, save_invstd)].
///
/// Training: normalizes with each channel's batch mean and biased variance, saves them ([C]),
/// and updates the running statistics in place as PyTorch does (`running = (1 − momentum) ·
/// running + momentum · batch`, the variance unbiased). Inference: normalizes with the running
/// statistics; the saved ones are empty. (ExecuTorch's portable kernel takes inference only.)
pub fn batch_norm_legit_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "_native_batch_norm_legit";
    let (inp, n, c, inner) = batch_input(args, WHAT)?;
    let sizes = inp.sizes();
    let weight = vector_param(args.opt_tensor(1)?, c, WHAT, "weight")?;
    let bias = vector_param(args.opt_tensor(2)?, c, WHAT, "bias")?;
    let mut running_mean = args.out(3)?;
    let mut running_var = args.out(4)?;
    for (t, name) in [(&running_mean, "running_mean"), (&running_var, "running_var")] {
        if t.numel() != c || t.dim() != 1 {
            return Err(kerr!("{WHAT}: {name} of shape {:?} must be [{c}]", t.sizes()));
        }
    }
    let training = args.bool(5)?;
    let momentum = args.double(6)?;
    let eps = args.double(7)?;
    let mut out = args.out(8)?;
    let mut mean_out = args.out(9)?;
    let mut invstd_out = args.out(10)?;
    let saved = if training { c } else { 0 };
    for (o, sz) in [(&mut out, sizes), (&mut mean_out, &[saved][..]), (&mut invstd_out, &[saved][..])] {
        require_contiguous_out(o, WHAT)?;
        require_floating(o.dtype, WHAT, "output")?;
        o.resize(sz)?;
    }
    let (rm, rv) = (read_stats(&running_mean, WHAT, "running_mean")?, read_stats(&running_var, WHAT, "running_var")?);
    if !training {
        let coeffs: Vec<(f64, f64)> =
            (0..c).map(|ch| affine_coeffs(rm[ch], 1.0 / libm::sqrt(rv[ch] + eps), weight.as_ref(), bias.as_ref(), ch)).collect();
        return apply_affine(&inp, &mut out, inner, &coeffs, |k| k % c);
    }
    let count = n * inner;
    if count < 2 && c > 0 {
        return Err(kerr!("{WHAT}: training needs more than 1 value per channel, input is {sizes:?}"));
    }
    let stats = channel_stats(&Elems::of(&inp)?, n, c, inner, eps);
    let coeffs = save_stats(&stats, &mut mean_out, &mut invstd_out, weight.as_ref(), bias.as_ref())?;
    // The running variance moves toward the unbiased batch variance.
    let unbias = count as f64 / (count - 1) as f64;
    let new_mean: Vec<f64> = stats.iter().zip(&rm).map(|(&(mean, _, _), &r)| (1.0 - momentum) * r + momentum * mean).collect();
    let new_var: Vec<f64> = stats.iter().zip(&rv).map(|(&(_, _, var), &r)| (1.0 - momentum) * r + momentum * var * unbias).collect();
    apply_affine(&inp, &mut out, inner, &coeffs, |k| k % c)?;
    let mut em = ElemsMut::of(&mut running_mean)?;
    new_mean.iter().enumerate().for_each(|(i, &v)| em.set_f64(i, v));
    let mut ev = ElemsMut::of(&mut running_var)?;
    new_var.iter().enumerate().for_each(|(i, &v)| ev.set_f64(i, v));
    Ok(())
}

/// Reads a non-negative SymInt argument.
fn size_arg(args: &KernelArgs<'_>, i: usize, what: &str, name: &str) -> KernelResult<usize> {
    let v = args.int(i)?;
    usize::try_from(v).map_err(|_| kerr!("{what}: {name} must be non-negative, got {v}"))
}

/// `native_group_norm.out(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C,
/// SymInt HxW, int group, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)`:
/// args = [input, weight, bias, N, C, HxW, group, eps, out0, out1, out2, (out0, out1, out2)].
///
/// Each of the `group` groups of C / group channels of each sample is normalized with its own
/// mean and biased variance, then scaled per channel; out1/out2 (mean, rstd) are [N, group].
pub fn native_group_norm_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const WHAT: &str = "native_group_norm";
    let inp = args.tensor(0)?;
    require_contiguous(&inp, WHAT)?;
    require_floating(inp.dtype, WHAT, "input")?;
    let n = size_arg(args, 3, WHAT, "N")?;
    let c = size_arg(args, 4, WHAT, "C")?;
    let hxw = size_arg(args, 5, WHAT, "HxW")?;
    let group = args.int(6)?;
    let eps = args.double(7)?;
    if inp.dim() < 2 || inp.sizes()[0] != n || inp.sizes()[1] != c {
        return Err(kerr!("{WHAT}: input of shape {:?} does not start with [N, C] = [{n}, {c}]", inp.sizes()));
    }
    if n.checked_mul(c).and_then(|v| v.checked_mul(hxw)) != Some(inp.numel()) {
        return Err(kerr!("{WHAT}: input of shape {:?} does not hold N * C * HxW = {n} * {c} * {hxw} elements", inp.sizes()));
    }
    if group <= 0 || c % group as usize != 0 {
        return Err(kerr!("{WHAT}: group must be positive and divide C = {c}, got {group}"));
    }
    let g = group as usize;
    let weight = vector_param(args.opt_tensor(1)?, c, WHAT, "weight")?;
    let bias = vector_param(args.opt_tensor(2)?, c, WHAT, "bias")?;

    let mut out = args.out(8)?;
    let mut mean_out = args.out(9)?;
    let mut rstd_out = args.out(10)?;
    let stat_sizes = [n, g];
    for (o, sz) in [(&mut out, inp.sizes()), (&mut mean_out, &stat_sizes[..]), (&mut rstd_out, &stat_sizes[..])] {
        require_contiguous_out(o, WHAT)?;
        require_floating(o.dtype, WHAT, "output")?;
        o.resize(sz)?;
    }

    // Group (b, k) is the contiguous run of D = C / group channels starting at channel k * D.
    let d = c / g;
    let group_len = d * hxw;
    let x = Elems::of(&inp)?;
    let mut coeffs = Vec::with_capacity(n * c);
    {
        let mut em = ElemsMut::of(&mut mean_out)?;
        let mut er = ElemsMut::of(&mut rstd_out)?;
        for i in 0..n * g {
            if group_len == 0 {
                // Nothing to normalize: mean 0 and rstd NaN, as layer norm reports.
                em.set_f64(i, 0.0);
                er.set_f64(i, f64::NAN);
                continue;
            }
            let start = i * group_len;
            let (mean, rstd) = row_stats((start..start + group_len).map(|i| x.f64(i)), group_len, eps);
            em.set_f64(i, mean);
            er.set_f64(i, rstd);
            let first_channel = (i % g) * d;
            coeffs.extend((first_channel..first_channel + d).map(|ch| affine_coeffs(mean, rstd, weight.as_ref(), bias.as_ref(), ch)));
        }
    }
    // Block k of HxW elements is channel k % C of sample k / C: coefficient row k.
    apply_affine(&inp, &mut out, hxw, &coeffs, |k| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rbuild_runtime::harness::OpHarness;

    fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= tol, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn layer_norm_last_dim_with_affine() {
        let mut h = OpHarness::new();
        // Rows [1, 2, 3] and [2, 4, 6]: means 2 and 4, biased variances 2/3 and 8/3.
        let x = h.f32(&[2, 3], &[1., 2., 3., 2., 4., 6.]);
        let ns = h.int_list(&[3]);
        let w = h.f32(&[3], &[1., 2., 3.]);
        let b = h.f32(&[3], &[0., 1., -1.]);
        let eps = h.double(0.0);
        let (o0, o1, o2) = (h.out(ScalarType::Float, &[2, 3]), h.out(ScalarType::Float, &[2, 1]), h.out(ScalarType::Float, &[2, 1]));
        let list = h.tensor_list(&[o0, o1, o2]);
        h.call(native_layer_norm_out, &[x, ns, w, b, eps, o0, o1, o2, list]).unwrap();
        let r = (1.5f32).sqrt(); // 1/sqrt(2/3)
        close(&h.read::<f32>(o0), &[-r, 1., 3. * r - 1., -r, 1., 3. * r - 1.], 1e-6);
        close(&h.read::<f32>(o1), &[2., 4.], 1e-6);
        close(&h.read::<f32>(o2), &[r, r / 2.], 1e-6);
    }

    #[test]
    fn layer_norm_two_dims_double_without_affine() {
        let mut h = OpHarness::new();
        let x = h.tensor::<f64>(ScalarType::Double, &[1, 2, 2], &[0., 2., 4., 6.]);
        let ns = h.int_list(&[2, 2]);
        let none = h.none();
        let eps = h.double(1e-12);
        let (o0, o1, o2) = (h.out(ScalarType::Double, &[1, 2, 2]), h.out(ScalarType::Double, &[1, 1, 1]), h.out(ScalarType::Double, &[1, 1, 1]));
        let list = h.tensor_list(&[o0, o1, o2]);
        h.call(native_layer_norm_out, &[x, ns, none, none, eps, o0, o1, o2, list]).unwrap();
        // mean 3, var 5
        let s = 5f64.sqrt();
        let got = h.read::<f64>(o0);
        for (g, w) in got.iter().zip([-3. / s, -1. / s, 1. / s, 3. / s]) {
            assert!((g - w).abs() < 1e-9, "{got:?}");
        }
        assert_eq!(h.read::<f64>(o1), vec![3.]);
    }

    #[test]
    fn layer_norm_rejects_shape_mismatch() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[0.; 6]);
        let ns = h.int_list(&[2]);
        let none = h.none();
        let eps = h.double(1e-5);
        let (o0, o1, o2) = (h.out(ScalarType::Float, &[2, 3]), h.out(ScalarType::Float, &[2, 1]), h.out(ScalarType::Float, &[2, 1]));
        let list = h.tensor_list(&[o0, o1, o2]);
        let e = h.call(native_layer_norm_out, &[x, ns, none, none, eps, o0, o1, o2, list]).unwrap_err();
        assert!(e.message.contains("normalized_shape"), "{e}");
    }

    #[test]
    fn batch_norm_nchw_and_ncl() {
        let mut h = OpHarness::new();
        // [N=2, C=2, L=2]
        let x = h.f32(&[2, 2, 2], &[1., 3., 10., 20., 5., 7., 30., 40.]);
        let w = h.f32(&[2], &[2., 1.]);
        let b = h.f32(&[2], &[1., -1.]);
        let mean = h.f32(&[2], &[3., 20.]);
        let var = h.f32(&[2], &[4., 100.]);
        let (mom, eps) = (h.double(0.1), h.double(0.0));
        let (o0, o1, o2) = (h.out(ScalarType::Float, &[2, 2, 2]), h.out(ScalarType::Float, &[0]), h.out(ScalarType::Float, &[0]));
        let list = h.tensor_list(&[o0, o1, o2]);
        h.call(batch_norm_no_training_out, &[x, w, b, mean, var, mom, eps, o0, o1, o2, list]).unwrap();
        // c0: (x-3)/2*2+1 = x-2 ; c1: (x-20)/10 - 1
        close(&h.read::<f32>(o0), &[-1., 1., -2., -1., 3., 5., 0., 1.], 1e-6);
        assert_eq!(h.sizes(o1), vec![0]);

        // 4-D NCHW without affine, f64 path via Half input
        let xh = h.tensor::<half::f16>(ScalarType::Half, &[1, 2, 1, 2], &[1., 2., 3., 4.].map(half::f16::from_f32));
        let none = h.none();
        let mean2 = h.tensor::<half::f16>(ScalarType::Half, &[2], &[1., 3.].map(half::f16::from_f32));
        let var2 = h.tensor::<half::f16>(ScalarType::Half, &[2], &[1., 4.].map(half::f16::from_f32));
        let (p0, p1, p2) = (h.out(ScalarType::Half, &[1, 2, 1, 2]), h.out(ScalarType::Half, &[0]), h.out(ScalarType::Half, &[0]));
        let list2 = h.tensor_list(&[p0, p1, p2]);
        h.call(batch_norm_no_training_out, &[xh, none, none, mean2, var2, mom, eps, p0, p1, p2, list2]).unwrap();
        let got: Vec<f32> = h.read::<half::f16>(p0).iter().map(|v| v.to_f32()).collect();
        assert_eq!(got, vec![0., 1., 0., 0.5]);
    }

    #[test]
    fn batch_norm_rejects_wrong_channel_count() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 3, 2], &[0.; 6]);
        let none = h.none();
        let mean = h.f32(&[2], &[0.; 2]);
        let var = h.f32(&[2], &[1.; 2]);
        let (mom, eps) = (h.double(0.1), h.double(1e-5));
        let (o0, o1, o2) = (h.out(ScalarType::Float, &[1, 3, 2]), h.out(ScalarType::Float, &[0]), h.out(ScalarType::Float, &[0]));
        let list = h.tensor_list(&[o0, o1, o2]);
        let e = h.call(batch_norm_no_training_out, &[x, none, none, mean, var, mom, eps, o0, o1, o2, list]).unwrap_err();
        assert!(e.message.contains("running_mean"), "{e}");
    }

    fn bn_no_stats(h: &mut OpHarness, x: u32, w: u32, b: u32, eps: f64, sizes: &[usize], c: usize) -> Result<(u32, u32, u32), rbuild_runtime::kernel::KernelError> {
        let (train, mom, e) = (h.bool(true), h.double(0.1), h.double(eps));
        let (o0, o1, o2) = (h.out(ScalarType::Float, sizes), h.out(ScalarType::Float, &[c]), h.out(ScalarType::Float, &[c]));
        let list = h.tensor_list(&[o0, o1, o2]);
        h.call(batch_norm_no_stats_out, &[x, w, b, train, mom, e, o0, o1, o2, list]).map(|_| (o0, o1, o2))
    }

    #[test]
    fn batch_norm_no_stats_uses_batch_statistics() {
        let mut h = OpHarness::new();
        // [N=2, C=2, L=2]: channel 0 holds 1, 3, 5, 7 (mean 4, var 5); channel 1 all 10.
        let x = h.f32(&[2, 2, 2], &[1., 3., 10., 10., 5., 7., 10., 10.]);
        let none = h.none();
        let (o, m, r) = bn_no_stats(&mut h, x, none, none, 0.0, &[2, 2, 2], 2).unwrap();
        let s = 5f32.sqrt();
        close(&h.read::<f32>(o)[..2], &[-3. / s, -1. / s], 1e-6);
        close(&h.read::<f32>(m), &[4., 10.], 1e-6);
        let rs = h.read::<f32>(r);
        assert!((rs[0] - 1. / s).abs() < 1e-6 && rs[1].is_infinite(), "{rs:?}");
        // with affine and eps: channel 1 has zero variance, so it is exactly its bias
        let w = h.f32(&[2], &[2., 3.]);
        let b = h.f32(&[2], &[1., -1.]);
        let (o, _, r) = bn_no_stats(&mut h, x, w, b, 1.0, &[2, 2, 2], 2).unwrap();
        let k = 2. / 6f32.sqrt();
        close(&h.read::<f32>(o), &[1. - 3. * k, 1. - k, -1., -1., 1. + k, 1. + 3. * k, -1., -1.], 1e-6);
        close(&h.read::<f32>(r), &[1. / 6f32.sqrt(), 1.], 1e-6);
        // 2-D input [N, C], double
        let xd = h.tensor::<f64>(ScalarType::Double, &[2, 1], &[0., 2.]);
        let (train, mom, e) = (h.bool(false), h.double(0.1), h.double(0.0));
        let (o0, o1, o2) = (h.out(ScalarType::Double, &[2, 1]), h.out(ScalarType::Double, &[1]), h.out(ScalarType::Double, &[1]));
        let list = h.tensor_list(&[o0, o1, o2]);
        h.call(batch_norm_no_stats_out, &[xd, none, none, train, mom, e, o0, o1, o2, list]).unwrap();
        assert_eq!(h.read::<f64>(o0), vec![-1., 1.]);
        assert_eq!(h.read::<f64>(o1), vec![1.]);
    }

    #[test]
    fn batch_norm_no_stats_errors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 3], &[0.; 6]);
        let none = h.none();
        let w = h.f32(&[2], &[1.; 2]);
        assert!(bn_no_stats(&mut h, x, w, none, 1e-5, &[2, 3], 3).is_err());
        assert!(bn_no_stats(&mut h, x, none, w, 1e-5, &[2, 3], 3).is_err());
        assert!(bn_no_stats(&mut h, x, none, none, 1e-5, &[2, 3], 2).is_err()); // stats shape
        let v = h.f32(&[3], &[0.; 3]);
        assert!(bn_no_stats(&mut h, v, none, none, 1e-5, &[3], 3).is_err());
        let i = h.i64(&[1, 2], &[1, 2]);
        assert!(bn_no_stats(&mut h, i, none, none, 1e-5, &[1, 2], 2).is_err());
    }

    fn group_norm(h: &mut OpHarness, x: u32, w: u32, b: u32, dims: [i64; 4], eps: f64, sizes: &[usize]) -> Result<(u32, u32, u32), rbuild_runtime::kernel::KernelError> {
        let [n, c, hxw, g] = dims.map(|v| h.int(v));
        let e = h.double(eps);
        let stat = [dims[0].max(0) as usize, dims[3].max(0) as usize];
        let (o0, o1, o2) = (h.out(ScalarType::Float, sizes), h.out(ScalarType::Float, &stat), h.out(ScalarType::Float, &stat));
        let list = h.tensor_list(&[o0, o1, o2]);
        h.call(native_group_norm_out, &[x, w, b, n, c, hxw, g, e, o0, o1, o2, list]).map(|_| (o0, o1, o2))
    }

    #[test]
    fn group_norm_groups_and_affine() {
        let mut h = OpHarness::new();
        // [N=1, C=4, HxW=2], 2 groups: group 0 = [0, 2, 4, 6] (mean 3, var 5), group 1 all 1.
        let x = h.f32(&[1, 4, 2], &[0., 2., 4., 6., 1., 1., 1., 1.]);
        let none = h.none();
        let (o, m, r) = group_norm(&mut h, x, none, none, [1, 4, 2, 2], 0.0, &[1, 4, 2]).unwrap();
        let s = 5f32.sqrt();
        close(&h.read::<f32>(o)[..4], &[-3. / s, -1. / s, 1. / s, 3. / s], 1e-6);
        close(&h.read::<f32>(m), &[3., 1.], 1e-6);
        assert!((h.read::<f32>(r)[0] - 1. / s).abs() < 1e-6);
        let w = h.f32(&[4], &[1., 2., 3., 4.]);
        let b = h.f32(&[4], &[0., 0., 5., -5.]);
        let (o, _, r) = group_norm(&mut h, x, w, b, [1, 4, 2, 2], 1.0, &[1, 4, 2]).unwrap();
        let k = 1. / 6f32.sqrt();
        close(&h.read::<f32>(o), &[-3. * k, -k, 2. * k, 6. * k, 5., 5., -5., -5.], 1e-6);
        close(&h.read::<f32>(r), &[k, 1.], 1e-6);
        // one group per channel over a 4-D input, Half through the generic path
        let xh = h.tensor::<half::f16>(ScalarType::Half, &[2, 1, 1, 2], &[1., 3., -2., 2.].map(half::f16::from_f32));
        let [n, c, hxw, g] = [2, 1, 2, 1].map(|v| h.int(v));
        let e = h.double(0.0);
        let (p0, p1, p2) = (h.out(ScalarType::Half, &[2, 1, 1, 2]), h.out(ScalarType::Half, &[2, 1]), h.out(ScalarType::Half, &[2, 1]));
        let list = h.tensor_list(&[p0, p1, p2]);
        h.call(native_group_norm_out, &[xh, none, none, n, c, hxw, g, e, p0, p1, p2, list]).unwrap();
        let got: Vec<f32> = h.read::<half::f16>(p0).iter().map(|v| v.to_f32()).collect();
        assert_eq!(got, vec![-1., 1., -1., 1.]);
        let means: Vec<f32> = h.read::<half::f16>(p1).iter().map(|v| v.to_f32()).collect();
        assert_eq!(means, vec![2., 0.]);
    }

    #[test]
    fn group_norm_errors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 4, 3], &[0.; 24]);
        let none = h.none();
        let sizes = [2, 4, 3];
        assert!(group_norm(&mut h, x, none, none, [2, 4, 3, 3], 1e-5, &sizes).is_err()); // C % group
        assert!(group_norm(&mut h, x, none, none, [2, 4, 3, 0], 1e-5, &sizes).is_err());
        assert!(group_norm(&mut h, x, none, none, [2, 4, 3, -2], 1e-5, &sizes).is_err());
        assert!(group_norm(&mut h, x, none, none, [2, 4, 4, 2], 1e-5, &sizes).is_err()); // HxW
        assert!(group_norm(&mut h, x, none, none, [1, 4, 6, 2], 1e-5, &sizes).is_err()); // N
        assert!(group_norm(&mut h, x, none, none, [2, -4, 3, 2], 1e-5, &sizes).is_err());
        assert!(group_norm(&mut h, x, none, none, [2, 4, 3, 2], 1e-5, &[2, 4, 4]).is_err()); // out shape
        let w = h.f32(&[3], &[1.; 3]);
        assert!(group_norm(&mut h, x, w, none, [2, 4, 3, 2], 1e-5, &sizes).is_err());
        let w2 = h.f32(&[2, 2], &[1.; 4]);
        assert!(group_norm(&mut h, x, w2, none, [2, 4, 3, 2], 1e-5, &sizes).is_err());
        assert!(group_norm(&mut h, x, none, w, [2, 4, 3, 2], 1e-5, &sizes).is_err());
        let v = h.f32(&[4], &[0.; 4]);
        assert!(group_norm(&mut h, v, none, none, [4, 1, 1, 1], 1e-5, &[4]).is_err()); // rank 1
        // a huge HxW overflows N * C * HxW: an error, not a panic
        assert!(group_norm(&mut h, x, none, none, [2, 4, i64::MAX, 2], 1e-5, &sizes).is_err());
    }

    /// Training batch norm with running statistics: batch-normalized output, saved mean and
    /// invstd, running stats moved by `momentum` toward the batch's (variance unbiased).
    #[test]
    fn batch_norm_legit_trains_and_updates_running_stats() {
        let mut h = OpHarness::new();
        // [N=2, C=1, 2]: values 1, 3, 5, 7 → mean 4, biased var 5, unbiased 20/3.
        let x = h.f32(&[2, 1, 2], &[1.0, 3.0, 5.0, 7.0]);
        let rm = h.f32(&[1], &[1.0]);
        let rv = h.f32(&[1], &[2.0]);
        let none = h.none();
        let (train, momentum, eps) = (h.bool(true), h.double(0.25), h.double(0.0));
        let (out, m, s) = (h.out(ScalarType::Float, &[2, 1, 2]), h.out(ScalarType::Float, &[1]), h.out(ScalarType::Float, &[1]));
        h.call(batch_norm_legit_out, &[x, none, none, rm, rv, train, momentum, eps, out, m, s, out, m, s]).unwrap();
        let inv = 1.0 / 5f32.sqrt();
        close(&h.read::<f32>(out), &[-3.0 * inv, -inv, inv, 3.0 * inv], 1e-6);
        close(&h.read::<f32>(m), &[4.0], 1e-6);
        close(&h.read::<f32>(s), &[inv], 1e-6);
        close(&h.read::<f32>(rm), &[0.75 * 1.0 + 0.25 * 4.0], 1e-6);
        close(&h.read::<f32>(rv), &[0.75 * 2.0 + 0.25 * 20.0 / 3.0], 1e-6);

        // Inference: the running statistics normalize, saved ones are empty, nothing moves.
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 2], &[3.0, 3.0]);
        let rm = h.f32(&[2], &[1.0, 2.0]);
        let rv = h.f32(&[2], &[4.0, 1.0]);
        let none = h.none();
        let (train, momentum, eps) = (h.bool(false), h.double(0.1), h.double(0.0));
        let (out, m, s) = (h.out_dynamic(ScalarType::Float, &[1, 2]), h.out_dynamic(ScalarType::Float, &[2]), h.out_dynamic(ScalarType::Float, &[2]));
        h.call(batch_norm_legit_out, &[x, none, none, rm, rv, train, momentum, eps, out, m, s, out, m, s]).unwrap();
        close(&h.read::<f32>(out), &[1.0, 1.0], 1e-6);
        assert_eq!(h.sizes(m), vec![0]);
        close(&h.read::<f32>(rm), &[1.0, 2.0], 0.0);

        // A single value per channel cannot train; a wrongly sized running stat is an error.
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 2], &[3.0, 3.0]);
        let rm = h.f32(&[2], &[0.0, 0.0]);
        let rv = h.f32(&[3], &[1.0, 1.0, 1.0]);
        let none = h.none();
        let (train, momentum, eps) = (h.bool(true), h.double(0.1), h.double(1e-5));
        let (out, m, s) = (h.out(ScalarType::Float, &[1, 2]), h.out(ScalarType::Float, &[2]), h.out(ScalarType::Float, &[2]));
        assert!(h.call(batch_norm_legit_out, &[x, none, none, rm, rv, train, momentum, eps, out, m, s, out, m, s]).is_err());
        let rv = h.f32(&[2], &[1.0, 1.0]);
        let err = h.call(batch_norm_legit_out, &[x, none, none, rm, rv, train, momentum, eps, out, m, s, out, m, s]).unwrap_err();
        assert!(err.message.contains("more than 1 value"), "{err}");
    }

}
