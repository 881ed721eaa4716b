//! A plain int8 reference interpreter of an [`Int8Graph`] (NHWC, TFLite semantics), to check
//! that a partition's translation computes what rbuild's int8 CPU kernels compute: Vela
//! compiles a wrong graph as happily as a right one.
//!
//! Requantization is the CPU kernels' integer arithmetic (`kernels/src/portable/qint8.rs`):
//! `quantize_multiplier` on the f64 product of the graph's f32 scales, as
//! `fuse_int8::lower_cpu` computes it, and the single-rounding `requantize`. For the graphs the
//! partitioner writes this is bit-exact with the CPU lowering; TFLite's own reference kernels
//! (double rounding) and the NPU may differ from both by one LSB at rounding midpoints.
//!
//! Ops:
//! - CONV_2D / DEPTHWISE_CONV_2D: stride, dilation, SAME (TFLite: `out = ceil(in / stride)`,
//!   the odd padding pixel after) or VALID; padding reads as the input zero point; per-channel
//!   requantization by `input_scale · weight_scale[c] / output_scale`;
//! - FULLY_CONNECTED: input flattened to `[numel / K, K]`;
//! - ADD: same shapes; TFLite's int8 add (left shift 20, both inputs to twice the larger scale);
//! - MEAN: over any axes of the int32 constant, keep_dims or not; multiplier
//!   `input_scale / (output_scale · count)` (the CPU `qmean_hw`);
//! - AVERAGE_POOL_2D: TFLite's int8 average of the valid window (padding not counted),
//!   rounded half away from zero; input and output quantization must agree;
//! - RESHAPE, PAD (with the input's zero point): input and output quantization must agree;
//! - fused activations: the clamp TFLite computes from the output quantization
//!   (`zero_point + round(x / scale)`, halves away from zero, within int8).

use rbuild_kernels::portable::qint8::{quantize_multiplier, requantize};

use crate::graph::{Activation, DType, Int8Graph, OpKind, Padding, Tensor, TensorId};

/// Runs `g` on `inputs` (NHWC int8 bytes per graph input, in `g.inputs` order); returns each
/// graph output's int8 values.
pub fn evaluate(g: &Int8Graph, inputs: &[Vec<i8>]) -> Result<Vec<Vec<i8>>, String> {
    g.validate().map_err(|e| e.to_string())?;
    if inputs.len() != g.inputs.len() {
        return Err(format!("graph takes {} inputs, {} given", g.inputs.len(), inputs.len()));
    }
    let mut env: Vec<Option<Vec<i8>>> = vec![None; g.tensors.len()];
    for (&t, data) in g.inputs.iter().zip(inputs) {
        let tt = &g.tensors[t];
        if data.len() != tt.numel() {
            return Err(format!("input `{}`: {} values for shape {:?}", tt.name, data.len(), tt.shape));
        }
        env[t] = Some(data.clone());
    }
    for (k, op) in g.ops.iter().enumerate() {
        let out = run_op(g, op.kind.clone(), &op.inputs, op.outputs[0], &env)
            .map_err(|e| format!("op {k} {} (`{}`): {e}", op.kind.name(), g.tensors[op.outputs[0]].name))?;
        env[op.outputs[0]] = Some(out);
    }
    g.outputs
        .iter()
        .map(|&o| env[o].clone().ok_or_else(|| format!("output `{}` was not computed", g.tensors[o].name)))
        .collect()
}

/// Per-tensor (scale, zero point) of an activation.
fn act_q(t: &Tensor) -> Result<(f32, i32), String> {
    match (t.quant.scale.as_slice(), t.quant.zero_point.as_slice()) {
        ([s], [z]) if (-128..=127).contains(z) => Ok((*s, *z as i32)),
        _ => Err(format!("`{}` needs one scale and an int8 zero point, has {:?}", t.name, t.quant)),
    }
}

fn i32s(t: &Tensor) -> Result<Vec<i32>, String> {
    match (&t.data, t.dtype) {
        (Some(d), DType::I32) => Ok(d.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()),
        _ => Err(format!("`{}` must be a constant int32 tensor", t.name)),
    }
}

fn i8s(t: &Tensor) -> Result<Vec<i8>, String> {
    match (&t.data, t.dtype) {
        (Some(d), DType::I8) => Ok(d.iter().map(|&b| b as i8).collect()),
        _ => Err(format!("`{}` must be a constant int8 tensor", t.name)),
    }
}

/// Channel `c`'s scale of a per-channel (or per-tensor) quantized weight.
fn channel_scale(t: &Tensor, c: usize) -> Result<f32, String> {
    match t.quant.scale.as_slice() {
        [s] => Ok(*s),
        s => s.get(c).copied().ok_or_else(|| format!("`{}` has no scale for channel {c}", t.name)),
    }
}

/// `[N, H, W, C]` of a rank-4 tensor.
fn nhwc(t: &Tensor) -> Result<[usize; 4], String> {
    match *t.shape.as_slice() {
        [n, h, w, c] => Ok([n as usize, h as usize, w as usize, c as usize]),
        _ => Err(format!("`{}` must be 4-D NHWC, has shape {:?}", t.name, t.shape)),
    }
}

/// TFLite's `CalculateActivationRangeQuantized`: the int8 clamp of a fused activation.
pub fn activation_range(act: Activation, scale: f32, zero_point: i32) -> (i32, i32) {
    let q = |x: f32| (zero_point as f32 + (x / scale).round()).clamp(-128.0, 127.0) as i32;
    match act {
        Activation::None => (-128, 127),
        Activation::Relu => (q(0.0).max(-128), 127),
        Activation::Relu6 => (q(0.0).max(-128), q(6.0).min(127)),
    }
}

/// (before, after) padding and output size of one spatial dimension, TFLite's way.
fn geometry(padding: Padding, input: usize, kernel: usize, stride: usize, dilation: usize) -> Result<(usize, usize), String> {
    let effective = (kernel - 1) * dilation + 1;
    match padding {
        Padding::Valid => {
            if input < effective {
                return Err(format!("input size {input} is smaller than the (dilated) kernel {effective}"));
            }
            Ok((0, (input - effective) / stride + 1))
        }
        Padding::Same => {
            let out = input.div_ceil(stride);
            let total = ((out - 1) * stride + effective).saturating_sub(input);
            Ok((total / 2, out))
        }
    }
}

fn check_shape(t: &Tensor, want: &[usize]) -> Result<(), String> {
    let want: Vec<i32> = want.iter().map(|&d| d as i32).collect();
    if t.shape != want {
        return Err(format!("output `{}` has shape {:?}, the op computes {:?}", t.name, t.shape, want));
    }
    Ok(())
}

fn positive(v: [i32; 2], what: &str) -> Result<[usize; 2], String> {
    if v.iter().any(|&x| x < 1) {
        return Err(format!("{what} {v:?} must be positive"));
    }
    Ok([v[0] as usize, v[1] as usize])
}

fn clamp8(v: i32, (lo, hi): (i32, i32)) -> i8 {
    v.clamp(lo, hi) as i8
}

fn run_op(g: &Int8Graph, kind: OpKind, inputs: &[TensorId], output: TensorId, env: &[Option<Vec<i8>>]) -> Result<Vec<i8>, String> {
    let t = |j: usize| &g.tensors[inputs[j]];
    // An activation input's values (constant int8 tensors are read from their data).
    let value = |j: usize| -> Result<Vec<i8>, String> {
        let tt = t(j);
        match (&env[inputs[j]], &tt.data) {
            (Some(v), _) => Ok(v.clone()),
            (None, Some(_)) => i8s(tt),
            (None, None) => Err(format!("input `{}` not computed", tt.name)),
        }
    };
    let ot = &g.tensors[output];
    let (os, oz) = act_q(ot)?;
    match kind {
        OpKind::Conv2d { stride, dilation, padding, act } => {
            conv(g, inputs, output, &value(0)?, stride, dilation, padding, None, activation_range(act, os, oz))
        }
        OpKind::DepthwiseConv2d { stride, dilation, padding, depth_multiplier, act } => {
            if depth_multiplier < 1 {
                return Err(format!("depth multiplier {depth_multiplier} must be positive"));
            }
            let m = depth_multiplier as usize;
            conv(g, inputs, output, &value(0)?, stride, dilation, padding, Some(m), activation_range(act, os, oz))
        }
        OpKind::FullyConnected { act } => {
            let (xt, wt, bt) = (t(0), t(1), t(2));
            let (xs, xz) = act_q(xt)?;
            let (x, w, bias) = (value(0)?, i8s(wt)?, i32s(bt)?);
            let (n, k) = (wt.shape[0] as usize, wt.shape[1] as usize);
            if x.len() % k != 0 {
                return Err(format!("input `{}` {:?} does not split into rows of {k}", xt.name, xt.shape));
            }
            let rows = x.len() / k;
            if ot.numel() != rows * n || ot.shape.last() != Some(&(n as i32)) {
                return Err(format!("output `{}` {:?} is not {rows} rows of {n}", ot.name, ot.shape));
            }
            let range = activation_range(act, os, oz);
            let mut out = vec![0i8; rows * n];
            for c in 0..n {
                let (m, s) = quantize_multiplier(xs as f64 * channel_scale(wt, c)? as f64 / os as f64);
                for r in 0..rows {
                    let mut acc = bias[c];
                    for i in 0..k {
                        acc = acc.wrapping_add((x[r * k + i] as i32 - xz) * w[c * k + i] as i32);
                    }
                    out[r * n + c] = clamp8(requantize(acc, m, s).saturating_add(oz), range);
                }
            }
            Ok(out)
        }
        OpKind::Add { act } => {
            let (at, bt) = (t(0), t(1));
            if at.shape != bt.shape || at.shape != ot.shape {
                return Err(format!("shapes {:?} + {:?} → {:?} must all agree (no broadcasting)", at.shape, bt.shape, ot.shape));
            }
            let ((sa, za), (sb, zb)) = (act_q(at)?, act_q(bt)?);
            const LEFT_SHIFT: i32 = 20;
            let twice_max = 2.0 * (sa as f64).max(sb as f64);
            let (ma, sha) = quantize_multiplier(sa as f64 / twice_max);
            let (mb, shb) = quantize_multiplier(sb as f64 / twice_max);
            let (mo, sho) = quantize_multiplier(twice_max / ((1i64 << LEFT_SHIFT) as f64 * os as f64));
            let range = activation_range(act, os, oz);
            let (a, b) = (value(0)?, value(1)?);
            Ok(a.iter()
                .zip(&b)
                .map(|(&x, &y)| {
                    let xs = requantize((x as i32 - za) << LEFT_SHIFT, ma, sha);
                    let ys = requantize((y as i32 - zb) << LEFT_SHIFT, mb, shb);
                    clamp8(requantize(xs.wrapping_add(ys), mo, sho).saturating_add(oz), range)
                })
                .collect())
        }
        OpKind::Mean { keep_dims } => {
            let xt = t(0);
            let (xs, xz) = act_q(xt)?;
            let rank = xt.shape.len();
            let mut reduce = vec![false; rank];
            for a in i32s(t(1))? {
                let a = if a < 0 { a + rank as i32 } else { a };
                if !(0..rank as i32).contains(&a) {
                    return Err(format!("axis {a} out of range for rank {rank}"));
                }
                reduce[a as usize] = true;
            }
            let dims: Vec<usize> = xt.shape.iter().map(|&d| d as usize).collect();
            let out_dims: Vec<usize> = dims.iter().zip(&reduce).map(|(&d, &r)| if r { 1 } else { d }).collect();
            let want: Vec<usize> =
                if keep_dims { out_dims.clone() } else { dims.iter().zip(&reduce).filter(|(_, &r)| !r).map(|(&d, _)| d).collect() };
            check_shape(ot, &want)?;
            let count: usize = dims.iter().zip(&reduce).filter(|(_, &r)| r).map(|(&d, _)| d).product();
            if count > 1 << 23 {
                return Err(format!("{count} elements per mean would overflow the int32 sum"));
            }
            let x = value(0)?;
            let mut sums = vec![0i32; out_dims.iter().product()];
            let mut idx = vec![0usize; rank];
            for &v in &x {
                // The output position: the input index with reduced axes at 0.
                let mut o = 0;
                for d in 0..rank {
                    o = o * out_dims[d] + if reduce[d] { 0 } else { idx[d] };
                }
                sums[o] += v as i32 - xz;
                for d in (0..rank).rev() {
                    idx[d] += 1;
                    if idx[d] < dims[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
            let (m, s) = quantize_multiplier(xs as f64 / (os as f64 * count.max(1) as f64));
            Ok(sums.iter().map(|&acc| clamp8(requantize(acc, m, s).saturating_add(oz), (-128, 127))).collect())
        }
        OpKind::AveragePool2d { filter, stride, padding, act } => {
            let xt = t(0);
            if act_q(xt)? != (os, oz) {
                return Err(format!("input `{}` and output `{}` must share their quantization", xt.name, ot.name));
            }
            let [n, h, w, c] = nhwc(xt)?;
            let (f, s) = (positive(filter, "filter")?, positive(stride, "stride")?);
            let (ph, oh) = geometry(padding, h, f[0], s[0], 1)?;
            let (pw, ow) = geometry(padding, w, f[1], s[1], 1)?;
            check_shape(ot, &[n, oh, ow, c])?;
            let range = activation_range(act, os, oz);
            let x = value(0)?;
            let mut out = vec![0i8; n * oh * ow * c];
            for b in 0..n {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let y0 = (oy * s[0]) as isize - ph as isize;
                        let x0 = (ox * s[1]) as isize - pw as isize;
                        for ch in 0..c {
                            let (mut sum, mut count) = (0i32, 0i32);
                            for ky in 0..f[0] as isize {
                                for kx in 0..f[1] as isize {
                                    let (iy, ix) = (y0 + ky, x0 + kx);
                                    if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                                        sum += x[((b * h + iy as usize) * w + ix as usize) * c + ch] as i32;
                                        count += 1;
                                    }
                                }
                            }
                            if count == 0 {
                                return Err("a pooling window lies entirely in the padding".into());
                            }
                            // TFLite: round half away from zero.
                            let avg = if sum > 0 { (sum + count / 2) / count } else { (sum - count / 2) / count };
                            out[((b * oh + oy) * ow + ox) * c + ch] = clamp8(avg, range);
                        }
                    }
                }
            }
            Ok(out)
        }
        OpKind::Reshape => {
            let xt = t(0);
            if xt.numel() != ot.numel() {
                return Err(format!("{:?} → {:?} changes the element count", xt.shape, ot.shape));
            }
            if act_q(xt)? != (os, oz) {
                return Err(format!("input `{}` and output `{}` must share their quantization", xt.name, ot.name));
            }
            value(0)
        }
        OpKind::Pad => {
            let xt = t(0);
            let (_, xz) = act_q(xt)?;
            if act_q(xt)? != (os, oz) {
                return Err(format!("input `{}` and output `{}` must share their quantization", xt.name, ot.name));
            }
            let [n, h, w, c] = nhwc(xt)?;
            let p = i32s(t(1))?;
            if p.iter().any(|&v| v < 0) {
                return Err(format!("negative paddings {p:?}"));
            }
            let p: Vec<usize> = p.iter().map(|&v| v as usize).collect();
            let dims = [n + p[0] + p[1], h + p[2] + p[3], w + p[4] + p[5], c + p[6] + p[7]];
            check_shape(ot, &dims)?;
            let x = value(0)?;
            let mut out = vec![xz as i8; dims.iter().product()];
            for b in 0..n {
                for y in 0..h {
                    for xx in 0..w {
                        let src = ((b * h + y) * w + xx) * c;
                        let dst = (((b + p[0]) * dims[1] + y + p[2]) * dims[2] + xx + p[4]) * dims[3] + p[6];
                        out[dst..dst + c].copy_from_slice(&x[src..src + c]);
                    }
                }
            }
            Ok(out)
        }
    }
}

/// CONV_2D (`depthwise` None: weight `[O, KH, KW, I]`) or DEPTHWISE_CONV_2D (`Some(multiplier)`:
/// weight `[1, KH, KW, C · multiplier]`, output channel `ic · multiplier + m` reads input
/// channel `ic`).
#[allow(clippy::too_many_arguments)]
fn conv(
    g: &Int8Graph,
    inputs: &[TensorId],
    output: TensorId,
    x: &[i8],
    stride: [i32; 2],
    dilation: [i32; 2],
    padding: Padding,
    depthwise: Option<usize>,
    range: (i32, i32),
) -> Result<Vec<i8>, String> {
    let (xt, wt, bt, ot) = (&g.tensors[inputs[0]], &g.tensors[inputs[1]], &g.tensors[inputs[2]], &g.tensors[output]);
    let ((xs, xz), (os, oz)) = (act_q(xt)?, act_q(ot)?);
    let [n, h, w, c] = nhwc(xt)?;
    let [w0, kh, kw, w3] = nhwc(wt)?;
    let (weights, bias) = (i8s(wt)?, i32s(bt)?);
    let (s, d) = (positive(stride, "stride")?, positive(dilation, "dilation")?);
    let oc = match depthwise {
        None => {
            if w3 != c {
                return Err(format!("weight `{}` {:?} does not match input {:?}", wt.name, wt.shape, xt.shape));
            }
            w0
        }
        Some(m) => {
            if w0 != 1 || w3 != c * m {
                return Err(format!("depthwise weight `{}` {:?} does not match input {:?} × multiplier {m}", wt.name, wt.shape, xt.shape));
            }
            w3
        }
    };
    let (ph, oh) = geometry(padding, h, kh, s[0], d[0])?;
    let (pw, ow) = geometry(padding, w, kw, s[1], d[1])?;
    check_shape(ot, &[n, oh, ow, oc])?;
    let requant: Vec<(i32, i32)> = (0..oc)
        .map(|o| Ok(quantize_multiplier(xs as f64 * channel_scale(wt, o)? as f64 / os as f64)))
        .collect::<Result<_, String>>()?;
    let mut out = vec![0i8; n * oh * ow * oc];
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                for o in 0..oc {
                    let mut acc = bias[o];
                    for ky in 0..kh {
                        let iy = (oy * s[0] + ky * d[0]) as isize - ph as isize;
                        if iy < 0 || iy as usize >= h {
                            continue; // padding: input zero point, contributes 0
                        }
                        for kx in 0..kw {
                            let ix = (ox * s[1] + kx * d[1]) as isize - pw as isize;
                            if ix < 0 || ix as usize >= w {
                                continue;
                            }
                            let px = ((b * h + iy as usize) * w + ix as usize) * c;
                            match depthwise {
                                None => {
                                    let wrow = ((o * kh + ky) * kw + kx) * c;
                                    for i in 0..c {
                                        acc = acc.wrapping_add((x[px + i] as i32 - xz) * weights[wrow + i] as i32);
                                    }
                                }
                                Some(m) => {
                                    let wv = weights[(ky * kw + kx) * oc + o] as i32;
                                    acc = acc.wrapping_add((x[px + o / m] as i32 - xz) * wv);
                                }
                            }
                        }
                    }
                    let (mu, sh) = requant[o];
                    out[((b * oh + oy) * ow + ox) * oc + o] = clamp8(requantize(acc, mu, sh).saturating_add(oz), range);
                }
            }
        }
    }
    Ok(out)
}
