//! Gradient operators of ExecuTorch's portable set: `convolution_backward.out` and
//! `max_pool2d_with_indices_backward.grad_input`.
//!
//! Both follow PyTorch eager (the oracle) rather than ExecuTorch's portable kernels where the two
//! differ: the convolution gradients also cover 1-D and transposed convolutions (ExecuTorch takes
//! 2-D, non-transposed only), and the pooling gradient starts from zero (ExecuTorch adds into
//! whatever `grad_input` held). Sums run in f64 and round once into the output dtype.

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::conv::{conv_geom, pool_geom, pool_input, pooled_sizes, tap, ConvGeom};
use super::util::{require_contiguous, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::convolution_backward.out" => convolution_backward_out,
    "aten::max_pool2d_with_indices_backward.grad_input" => max_pool2d_with_indices_backward_grad_input,
}

/// Float, Double, Half and BFloat16: the dtypes both gradients take.
fn require_floating(t: &TensorRef<'_>, op: &str, what: &str) -> KernelResult {
    if t.dtype.is_floating() {
        Ok(())
    } else {
        Err(kerr!("{op}: {what} must be a floating tensor, got {}", t.dtype))
    }
}

/// Resizes `out` to `sizes` (after checking its dtype) and stores `values` into it.
fn store(out: &mut TensorMut<'_>, dtype: ScalarType, sizes: &[usize], values: &[f64], what: &str) -> KernelResult {
    if out.dtype != dtype {
        return Err(kerr!("{what} has dtype {} but must be {dtype}", out.dtype));
    }
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("{what} must be contiguous"));
    }
    out.resize(sizes)?;
    let mut o = ElemsMut::of(out)?;
    for (i, &v) in values.iter().enumerate() {
        o.set_f64(i, v);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// convolution_backward
// ---------------------------------------------------------------------------------------------

/// `convolution_backward.out(grad_output, input, weight, SymInt[]? bias_sizes, stride, padding,
/// dilation, transposed, output_padding, groups, bool[3] output_mask, *, out0, out1, out2)`:
/// args = [.., out0 (11), out1, out2, [out0, out1, out2]]. Writes grad_input, grad_weight and
/// grad_bias where `output_mask` asks for them and leaves the other outputs untouched.
pub fn convolution_backward_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "convolution_backward";
    let grad_out = args.tensor(0)?;
    let input = args.tensor(1)?;
    let weight = args.tensor(2)?;
    let bias_sizes = args.opt_int_list(3)?;
    let lists = [args.int_list(4)?, args.int_list(5)?, args.int_list(6)?, args.int_list(8)?];
    let transposed = args.bool(7)?;
    let groups = args.int(9)?;
    let &[want_input, want_weight, want_bias] = args.bool_list(10)? else {
        return Err(kerr!("{OP}: output_mask must have 3 entries"));
    };
    require_floating(&input, OP, "input")?;
    for (t, what) in [(&grad_out, "grad_output"), (&weight, "weight")] {
        if t.dtype != input.dtype {
            return Err(kerr!("{OP}: {what} dtype {} differs from input dtype {}", t.dtype, input.dtype));
        }
    }
    for (t, what) in [(&grad_out, "grad_output"), (&input, "input"), (&weight, "weight")] {
        require_contiguous(t, what)?;
    }
    let g = conv_geom(&input, &weight, &lists, transposed, groups)?;
    if grad_out.sizes() != g.out_sizes().as_slice() {
        return Err(kerr!(
            "{OP}: grad_output {:?} must have the convolution's output shape {:?}",
            grad_out.sizes(),
            g.out_sizes()
        ));
    }
    if let Some(b) = &bias_sizes {
        if b.as_slice() != [g.c_out as i64] {
            return Err(kerr!("{OP}: bias_sizes {b:?} must be [{}]", g.c_out));
        }
    }

    let (go, x, w) = (Elems::of(&grad_out)?, Elems::of(&input)?, Elems::of(&weight)?);
    let mut grad_input = if want_input { vec![0.0; input.numel()] } else { Vec::new() };
    let mut grad_weight = if want_weight { vec![0.0; weight.numel()] } else { Vec::new() };
    if want_input || want_weight {
        // The strided side (the output of a convolution, the input of a transposed one) pairs
        // each of its pixels with the dense-side pixels its kernel window reaches.
        let (strided, dense) = if transposed { (&x, &go) } else { (&go, &x) };
        for_each_tap(&g, |s, d, k| {
            if want_input {
                // grad_input pairs grad_output with the weight tap on the other side.
                if transposed {
                    grad_input[s] += go.f64(d) * w.f64(k);
                } else {
                    grad_input[d] += go.f64(s) * w.f64(k);
                }
            }
            if want_weight {
                grad_weight[k] += strided.f64(s) * dense.f64(d);
            }
        });
    }
    let dtype = input.dtype;
    if want_input {
        store(&mut args.out(11)?, dtype, input.sizes(), &grad_input, "grad_input (out0)")?;
    }
    if want_weight {
        store(&mut args.out(12)?, dtype, weight.sizes(), &grad_weight, "grad_weight (out1)")?;
    }
    if want_bias {
        let plane = g.out_hw[0] * g.out_hw[1];
        let mut grad_bias = vec![0.0; g.c_out];
        for (i, chunk) in (0..grad_out.numel()).step_by(plane.max(1)).enumerate() {
            let oc = i % g.c_out;
            grad_bias[oc] += (chunk..chunk + plane).map(|j| go.f64(j)).sum::<f64>();
        }
        store(&mut args.out(13)?, dtype, &[g.c_out], &grad_bias, "grad_bias (out2)")?;
    }
    Ok(())
}

/// Calls `f(strided_index, dense_index, weight_index)` for every (pixel, kernel tap) pair of the
/// convolution: the strided side's position `p` meets the dense side's `p * stride - padding +
/// k * dilation`. The weight is `[strided channels, dense channels per group, kh, kw]` in both
/// directions.
fn for_each_tap(g: &ConvGeom, mut f: impl FnMut(usize, usize, usize)) {
    let (s_channels, d_channels, [sh_len, sw_len], [dh_len, dw_len]) = if g.transposed {
        (g.c_in, g.c_out, g.in_hw, g.out_hw)
    } else {
        (g.c_out, g.c_in, g.out_hw, g.in_hw)
    };
    let (s_per_group, d_per_group) = (s_channels / g.groups, d_channels / g.groups);
    let [kh, kw] = g.kernel;
    let ([st_h, st_w], [pad_h, pad_w], [dil_h, dil_w]) = (g.stride, g.padding, g.dilation);
    for b in 0..g.batch {
        for s in 0..s_channels {
            let group = s / s_per_group;
            for sy in 0..sh_len {
                for sx in 0..sw_len {
                    let s_index = ((b * s_channels + s) * sh_len + sy) * sw_len + sx;
                    for dg in 0..d_per_group {
                        let d_plane = (b * d_channels + group * d_per_group + dg) * dh_len;
                        let w_base = (s * d_per_group + dg) * kh;
                        for ky in 0..kh {
                            let Some(dy) = tap(sy * st_h, ky, dil_h, pad_h, dh_len) else { continue };
                            for kx in 0..kw {
                                let Some(dx) = tap(sx * st_w, kx, dil_w, pad_w, dw_len) else { continue };
                                f(s_index, (d_plane + dy) * dw_len + dx, (w_base + ky) * kw + kx);
                            }
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// max_pool2d_with_indices_backward
// ---------------------------------------------------------------------------------------------

/// `max_pool2d_with_indices_backward.grad_input(grad_output, self, kernel_size, stride, padding,
/// dilation, ceil_mode, indices, *, grad_input)`: args = [.., indices (7), grad_input (8),
/// grad_input]. grad_input starts at zero and each grad_output element is added at its plane's
/// flat index from `indices` (overlapping windows accumulate; index -1 is skipped, as PyTorch).
pub fn max_pool2d_with_indices_backward_grad_input(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "max_pool2d_with_indices_backward";
    let grad_out = args.tensor(0)?;
    let input = args.tensor(1)?;
    let indices = args.tensor(7)?;
    require_floating(&input, OP, "self")?;
    if grad_out.dtype != input.dtype {
        return Err(kerr!("{OP}: grad_output dtype {} differs from self dtype {}", grad_out.dtype, input.dtype));
    }
    if indices.dtype != ScalarType::Long {
        return Err(kerr!("{OP}: indices must be Long, got {}", indices.dtype));
    }
    let (planes, in_hw) = pool_input(&input, OP)?;
    let (kernel, stride) = (args.int_list(2)?, args.int_list(3)?);
    let (padding, dilation) = (args.int_list(4)?, args.int_list(5)?);
    let geom = pool_geom(OP, planes, in_hw, &kernel, &stride, &padding, &dilation, args.bool(6)?)?;
    let pooled = pooled_sizes(&input, geom.out_hw);
    for (t, what) in [(&grad_out, "grad_output"), (&indices, "indices")] {
        require_contiguous(t, what)?;
        if t.sizes() != pooled.as_slice() {
            return Err(kerr!("{OP}: {what} {:?} must have the pooled shape {pooled:?}", t.sizes()));
        }
    }
    let plane_in = in_hw[0] * in_hw[1];
    let plane_out = geom.out_hw[0] * geom.out_hw[1];
    let go = Elems::of(&grad_out)?;
    let idx = indices.data::<i64>()?;
    let mut sums = vec![0.0f64; input.numel()];
    for p in 0..planes {
        for o in p * plane_out..(p + 1) * plane_out {
            let i = idx[o];
            if i == -1 {
                continue;
            }
            let at = usize::try_from(i)
                .ok()
                .filter(|&i| i < plane_in)
                .ok_or_else(|| kerr!("{OP}: indices value {i} is outside the {in_hw:?} plane"))?;
            sums[p * plane_in + at] += go.f64(o);
        }
    }
    store(&mut args.out(8)?, input.dtype, input.sizes(), &sums, "grad_input")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rbuild_runtime::harness::OpHarness;

    struct Conv<'a> {
        stride: &'a [i64],
        padding: &'a [i64],
        dilation: &'a [i64],
        transposed: bool,
        output_padding: &'a [i64],
        groups: i64,
        mask: [bool; 3],
    }

    const PLAIN: Conv<'static> = Conv {
        stride: &[1],
        padding: &[0],
        dilation: &[1],
        transposed: false,
        output_padding: &[0],
        groups: 1,
        mask: [true, true, true],
    };

    /// Runs convolution_backward.out with outputs of the given sizes; returns their ids.
    fn conv_bwd(
        h: &mut OpHarness,
        go: u32,
        x: u32,
        w: u32,
        c: &Conv<'_>,
        sizes: [&[usize]; 3],
        dtype: ScalarType,
    ) -> Result<[u32; 3], rbuild_runtime::KernelError> {
        let bias_sizes = h.none();
        let (s, p, d, op) = (h.int_list(c.stride), h.int_list(c.padding), h.int_list(c.dilation), h.int_list(c.output_padding));
        let (t, g, m) = (h.bool(c.transposed), h.int(c.groups), h.bool_list(&c.mask));
        let outs = sizes.map(|s| h.out(dtype, s));
        let list = h.tensor_list(&outs);
        h.call(convolution_backward_out, &[go, x, w, bias_sizes, s, p, d, t, op, g, m, outs[0], outs[1], outs[2], list])
            .map(|_| outs)
    }

    #[test]
    fn conv1d_gradients_hand_computed() {
        let mut h = OpHarness::new();
        // y[j] = w0 x[j] + w1 x[j+1] (+ b), x = [1,2,3], w = [10, 20], dy = [1, 100].
        let x = h.f32(&[1, 1, 3], &[1., 2., 3.]);
        let w = h.f32(&[1, 1, 2], &[10., 20.]);
        let go = h.f32(&[1, 1, 2], &[1., 100.]);
        let [gi, gw, gb] = conv_bwd(&mut h, go, x, w, &PLAIN, [&[1, 1, 3], &[1, 1, 2], &[1]], ScalarType::Float).unwrap();
        // dx = [w0 dy0, w1 dy0 + w0 dy1, w1 dy1]; dw = [x0 dy0 + x1 dy1, x1 dy0 + x2 dy1].
        assert_eq!(h.read::<f32>(gi), vec![10., 1020., 2000.]);
        assert_eq!(h.read::<f32>(gw), vec![201., 302.]);
        assert_eq!(h.read::<f32>(gb), vec![101.]);
    }

    #[test]
    fn conv2d_stride_padding_groups_match_finite_sums() {
        // Checks the gradients against the definition: out = conv(x, w) is linear in each of x
        // and w, so <dy, conv(e_i, w)> is grad_input[i] and <dy, conv(x, e_k)> grad_weight[k].
        use crate::portable::conv::convolution_out;
        let mut h = OpHarness::new();
        let (n, c, hh, ww, oc, groups) = (2usize, 4usize, 5usize, 4usize, 2usize, 2i64);
        let xs: Vec<f64> = (0..n * c * hh * ww).map(|i| ((i * 7 % 11) as f64) - 5.0).collect();
        let wsz = [oc, c / 2, 3, 2];
        let ws: Vec<f64> = (0..wsz.iter().product::<usize>()).map(|i| ((i * 5 % 7) as f64) - 3.0).collect();
        let (stride, pad, dil) = ([2i64, 1], [1i64, 1], [1i64, 2]);
        let out_sizes = [n, oc, (hh + 2 - 3) / 2 + 1, (ww + 2 - 3) + 1];
        let dys: Vec<f64> = (0..out_sizes.iter().product::<usize>()).map(|i| ((i * 3 % 5) as f64) - 2.0).collect();
        let conv = |h: &mut OpHarness, xv: &[f64], wv: &[f64]| -> Vec<f64> {
            let x = h.tensor(ScalarType::Double, &[n, c, hh, ww], xv);
            let w = h.tensor(ScalarType::Double, &wsz, wv);
            let b = h.none();
            let (s, p, d, op) = (h.int_list(&stride), h.int_list(&pad), h.int_list(&dil), h.int_list(&[0, 0]));
            let (t, g) = (h.bool(false), h.int(groups));
            let out = h.out(ScalarType::Double, &out_sizes);
            h.call(convolution_out, &[x, w, b, s, p, d, t, op, g, out, out]).unwrap();
            h.read::<f64>(out)
        };
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let x = h.tensor(ScalarType::Double, &[n, c, hh, ww], &xs);
        let w = h.tensor(ScalarType::Double, &wsz, &ws);
        let go = h.tensor(ScalarType::Double, &out_sizes, &dys);
        let cfg = Conv { stride: &stride, padding: &pad, dilation: &dil, groups, ..PLAIN };
        let [gi, gw, gb] = conv_bwd(&mut h, go, x, w, &cfg, [&[n, c, hh, ww], &wsz, &[oc]], ScalarType::Double).unwrap();
        let (gi, gw, gb) = (h.read::<f64>(gi), h.read::<f64>(gw), h.read::<f64>(gb));
        for i in (0..xs.len()).step_by(7) {
            let mut e = vec![0.0; xs.len()];
            e[i] = 1.0;
            assert_eq!(gi[i], dot(&dys, &conv(&mut h, &e, &ws)), "grad_input[{i}]");
        }
        for k in 0..ws.len() {
            let mut e = vec![0.0; ws.len()];
            e[k] = 1.0;
            assert_eq!(gw[k], dot(&dys, &conv(&mut h, &xs, &e)), "grad_weight[{k}]");
        }
        let plane = out_sizes[2] * out_sizes[3];
        for (o, &g) in gb.iter().enumerate() {
            let want: f64 = (0..n).flat_map(|b| dys[(b * oc + o) * plane..][..plane].iter()).sum();
            assert_eq!(g, want);
        }
    }

    #[test]
    fn transposed_gradients_hand_computed() {
        let mut h = OpHarness::new();
        // Transposed 1-D, stride 2, kernel 2: y = [x0 w0, x0 w1, x1 w0, x1 w1] (length 4).
        let x = h.f32(&[1, 1, 2], &[1., 2.]);
        let w = h.f32(&[1, 1, 2], &[3., 5.]);
        let go = h.f32(&[1, 1, 4], &[1., 10., 100., 1000.]);
        let cfg = Conv { stride: &[2], transposed: true, ..PLAIN };
        let [gi, gw, gb] = conv_bwd(&mut h, go, x, w, &cfg, [&[1, 1, 2], &[1, 1, 2], &[1]], ScalarType::Float).unwrap();
        assert_eq!(h.read::<f32>(gi), vec![3. + 50., 300. + 5000.]);
        assert_eq!(h.read::<f32>(gw), vec![1. + 200., 10. + 2000.]);
        assert_eq!(h.read::<f32>(gb), vec![1111.]);
    }

    #[test]
    fn output_mask_leaves_outputs_alone_and_half_works() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::Half, &[1, 1, 2], &[half::f16::from_f32(1.), half::f16::from_f32(2.)]);
        let w = h.tensor(ScalarType::Half, &[1, 1, 1], &[half::f16::from_f32(4.)]);
        let go = h.tensor(ScalarType::Half, &[1, 1, 2], &[half::f16::from_f32(0.5), half::f16::from_f32(0.25)]);
        let cfg = Conv { mask: [false, true, false], ..PLAIN };
        // Masked-out outputs keep whatever shape and values they had.
        let [gi, gw, gb] = conv_bwd(&mut h, go, x, w, &cfg, [&[7], &[1, 1, 1], &[3]], ScalarType::Half).unwrap();
        assert_eq!(h.read::<half::f16>(gw), vec![half::f16::from_f32(1.0)]);
        assert_eq!(h.sizes(gi), vec![7]);
        assert_eq!(h.sizes(gb), vec![3]);
    }

    #[test]
    fn conv_backward_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 3], &[0.; 3]);
        let w = h.f32(&[1, 1, 2], &[0.; 2]);
        let go = h.f32(&[1, 1, 3], &[0.; 3]);
        let sizes: [&[usize]; 3] = [&[1, 1, 3], &[1, 1, 2], &[1]];
        let e = conv_bwd(&mut h, go, x, w, &PLAIN, sizes, ScalarType::Float).unwrap_err();
        assert!(e.message.contains("grad_output"), "{e}");
        let go = h.f32(&[1, 1, 2], &[0.; 2]);
        let e = conv_bwd(&mut h, go, x, w, &Conv { groups: 0, ..PLAIN }, sizes, ScalarType::Float).unwrap_err();
        assert!(e.message.contains("groups"), "{e}");
        let e = conv_bwd(&mut h, go, x, w, &Conv { stride: &[0], ..PLAIN }, sizes, ScalarType::Float).unwrap_err();
        assert!(e.message.contains("stride"), "{e}");
        let e = conv_bwd(&mut h, go, x, w, &PLAIN, sizes, ScalarType::Double).unwrap_err();
        assert!(e.message.contains("dtype"), "{e}");
        let xi = h.i64(&[1, 1, 3], &[0; 3]);
        let e = conv_bwd(&mut h, go, xi, w, &PLAIN, sizes, ScalarType::Float).unwrap_err();
        assert!(e.message.contains("floating"), "{e}");
        let w5 = h.f32(&[1, 1, 5], &[0.; 5]);
        let e = conv_bwd(&mut h, go, x, w5, &PLAIN, sizes, ScalarType::Float).unwrap_err();
        assert!(e.message.contains("larger"), "{e}");
        // bias_sizes must name the output channels; output_mask needs 3 entries.
        let (bs, s, p, d, t, op, g) =
            (h.int_list(&[2]), h.int_list(&[1]), h.int_list(&[0]), h.int_list(&[1]), h.bool(false), h.int_list(&[0]), h.int(1));
        let outs = sizes.map(|s| h.out(ScalarType::Float, s));
        let list = h.tensor_list(&outs);
        let m = h.bool_list(&[true, true, true]);
        let e = h
            .call(convolution_backward_out, &[go, x, w, bs, s, p, d, t, op, g, m, outs[0], outs[1], outs[2], list])
            .unwrap_err();
        assert!(e.message.contains("bias_sizes"), "{e}");
        let (none, m2) = (h.none(), h.bool_list(&[true, true]));
        let e = h
            .call(convolution_backward_out, &[go, x, w, none, s, p, d, t, op, g, m2, outs[0], outs[1], outs[2], list])
            .unwrap_err();
        assert!(e.message.contains("output_mask"), "{e}");
    }

    fn pool_bwd(
        h: &mut OpHarness,
        go: u32,
        x: u32,
        idx: u32,
        params: [&[i64]; 4],
        out_sizes: &[usize],
        dtype: ScalarType,
    ) -> Result<u32, rbuild_runtime::KernelError> {
        let [k, s, p, d] = params.map(|v| h.int_list(v));
        let c = h.bool(false);
        let out = h.out(dtype, out_sizes);
        h.call(max_pool2d_with_indices_backward_grad_input, &[go, x, k, s, p, d, c, idx, out, out]).map(|_| out)
    }

    #[test]
    fn max_pool_backward_accumulates_overlaps() {
        let mut h = OpHarness::new();
        // 1x3x3 input, kernel 2 stride 1: 4 windows, two of them pick flat index 4.
        let x = h.f32(&[1, 3, 3], &[0.; 9]);
        let go = h.f32(&[1, 2, 2], &[1., 2., 3., 4.]);
        let idx = h.i64(&[1, 2, 2], &[4, 4, 6, -1]);
        let out = pool_bwd(&mut h, go, x, idx, [&[2], &[1], &[0], &[1]], &[1, 3, 3], ScalarType::Float).unwrap();
        assert_eq!(h.read::<f32>(out), vec![0., 0., 0., 0., 3., 0., 3., 0., 0.]);
        // Double, two planes: each plane's indices stay within the plane.
        let x = h.tensor(ScalarType::Double, &[2, 1, 2, 2], &[0f64; 8]);
        let go = h.tensor(ScalarType::Double, &[2, 1, 1, 1], &[5f64, 7.]);
        let idx = h.i64(&[2, 1, 1, 1], &[3, 0]);
        let out = pool_bwd(&mut h, go, x, idx, [&[2, 2], &[], &[0], &[1]], &[2, 1, 2, 2], ScalarType::Double).unwrap();
        assert_eq!(h.read::<f64>(out), vec![0., 0., 0., 5., 7., 0., 0., 0.]);
    }

    #[test]
    fn max_pool_backward_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 2, 2], &[0.; 4]);
        let go = h.f32(&[1, 1, 1], &[1.]);
        let params: [&[i64]; 4] = [&[2], &[2], &[0], &[1]];
        let bad = h.i64(&[1, 1, 1], &[4]);
        let e = pool_bwd(&mut h, go, x, bad, params, &[1, 2, 2], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("outside"), "{e}");
        let neg = h.i64(&[1, 1, 1], &[-2]);
        let e = pool_bwd(&mut h, go, x, neg, params, &[1, 2, 2], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("outside"), "{e}");
        let idx = h.i64(&[1, 1, 1], &[0]);
        let go_wrong = h.f32(&[1, 2, 1], &[1., 1.]);
        let e = pool_bwd(&mut h, go_wrong, x, idx, params, &[1, 2, 2], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("pooled shape"), "{e}");
        let idx32 = h.tensor(ScalarType::Int, &[1, 1, 1], &[0i32]);
        let e = pool_bwd(&mut h, go, x, idx32, params, &[1, 2, 2], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("Long"), "{e}");
        let e = pool_bwd(&mut h, go, x, idx, params, &[1, 2, 2], ScalarType::Double).unwrap_err();
        assert!(e.message.contains("dtype"), "{e}");
        let e = pool_bwd(&mut h, go, x, idx, params, &[1, 2, 3], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("static shape"), "{e}");
        let e = pool_bwd(&mut h, go, x, idx, [&[3], &[2], &[0], &[1]], &[1, 2, 2], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("too small"), "{e}");
        let xi = h.i64(&[1, 2, 2], &[0; 4]);
        let e = pool_bwd(&mut h, go, xi, idx, params, &[1, 2, 2], ScalarType::Long).unwrap_err();
        assert!(e.message.contains("floating"), "{e}");
    }
}
