//! 2-D resampling of NCHW tensors: `upsample_nearest2d.vec` and `upsample_bilinear2d.vec`.
//!
//! Source coordinates follow ExecuTorch's portable kernels (ported from ATen's UpSample.h):
//! the step between output pixels is computed in f64 from the scale factor (or the size ratio)
//! and then used in f32, and bilinear weights are f32. f32 outputs therefore equal ExecuTorch's
//! bit for bit; f64 outputs blend in f64 with those f32 weights, other dtypes in f32.

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::util::{require_contiguous, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::upsample_nearest2d.vec_out" => upsample_nearest2d_vec_out,
    "aten::upsample_bilinear2d.vec_out" => upsample_bilinear2d_vec_out,
}

/// One resampling call: input and output planes and the f32 source step per output pixel.
struct Resample<'a> {
    input: TensorRef<'a>,
    out: TensorMut<'a>,
    planes: usize,
    in_hw: [usize; 2],
    out_hw: [usize; 2],
    /// Output size over input size per axis: the scale factor when given, else the ratio.
    scales: [f64; 2],
}

/// Reads `input, output_size?, …, scale_factors? (at scales_at), out (at out_at)` and sizes
/// the output: exactly one of output_size and scale_factors, a scale giving
/// `floor(size * scale)` pixels.
fn resample_call<'a>(args: &KernelArgs<'a>, op: &str, scales_at: usize, out_at: usize) -> KernelResult<Resample<'a>> {
    let input = args.tensor(0)?;
    require_contiguous(&input, op)?;
    let &[n, c, h, w] = input.sizes() else {
        return Err(kerr!("{op}: input must be 4-D NCHW, got {:?}", input.sizes()));
    };
    let in_hw = [h, w];
    let (out_hw, scales) = match (args.opt_int_list(1)?, args.opt_double_list(scales_at)?) {
        (Some(size), None) if size.len() == 2 && size.iter().all(|&s| s > 0) => {
            let out_hw = [size[0] as usize, size[1] as usize];
            (out_hw, [0, 1].map(|d| out_hw[d] as f64 / in_hw[d] as f64))
        }
        (None, Some(s)) if s.len() == 2 && s.iter().all(|v| v.is_finite() && *v > 0.0) => {
            ([0, 1].map(|d| (in_hw[d] as f64 * s[d]) as usize), [s[0], s[1]])
        }
        (size, scales) => {
            return Err(kerr!("{op}: needs either 2 positive output sizes or 2 positive scale factors, got {size:?} and {scales:?}"))
        }
    };
    if out_hw.contains(&0) || in_hw.contains(&0) {
        return Err(kerr!("{op}: input {:?} resampled to {out_hw:?} is empty", input.sizes()));
    }
    let mut out = args.out(out_at)?;
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("{op}: out must be contiguous NCHW"));
    }
    if out.dtype != input.dtype {
        return Err(kerr!("{op}: out dtype {} differs from input dtype {}", out.dtype, input.dtype));
    }
    out.resize(&[n, c, out_hw[0], out_hw[1]])?;
    Ok(Resample { input, out, planes: n * c, in_hw, out_hw, scales })
}

/// Source pixels per output pixel along axis `d` (ATen's `area_pixel_compute_scale`).
fn source_step(r: &Resample<'_>, d: usize, align_corners: bool) -> f32 {
    let (inp, out) = (r.in_hw[d], r.out_hw[d]);
    if !align_corners {
        (1.0 / r.scales[d]) as f32
    } else if out > 1 {
        ((inp - 1) as f64 / (out - 1) as f64) as f32
    } else {
        0.0
    }
}

/// `upsample_nearest2d.vec_out(Tensor input, SymInt[]? output_size, float[]? scale_factors, *,
/// Tensor(a!) out)`: args = [input, output_size, scale_factors, out, out]. Each output pixel
/// copies `floor(o * step)` (clamped), as OpenCV's INTER_NEAREST does.
pub fn upsample_nearest2d_vec_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let mut r = resample_call(args, "upsample_nearest2d", 2, 3)?;
    let step = [source_step(&r, 0, false), source_step(&r, 1, false)];
    let source = |d: usize, o: usize, len: usize| ((o as f32 * step[d]).floor() as usize).min(len - 1);
    let rows: Vec<usize> = (0..r.out_hw[0]).map(|o| source(0, o, r.in_hw[0])).collect();
    let cols: Vec<usize> = (0..r.out_hw[1]).map(|o| source(1, o, r.in_hw[1])).collect();
    let [ih, iw] = r.in_hw;
    let x = Elems::of(&r.input)?;
    let mut y = ElemsMut::of(&mut r.out)?;
    let mut k = 0;
    for p in 0..r.planes {
        for &row in &rows {
            for &col in &cols {
                y.copy_from(k, &x, (p * ih + row) * iw + col);
                k += 1;
            }
        }
    }
    Ok(())
}

/// The two source pixels and their weights for output pixel `o` along one axis (ATen's
/// `compute_source_index_and_lambda`, in f32).
fn bilinear_taps(step: f32, o: usize, inp: usize, out: usize, align_corners: bool) -> (usize, usize, f32, f32) {
    if inp == out {
        return (o, o, 1.0, 0.0);
    }
    let real = if align_corners { step * o as f32 } else { (step * (o as f32 + 0.5) - 0.5).max(0.0) };
    let i0 = (real.floor() as usize).min(inp - 1);
    let far = (real - i0 as f32).clamp(0.0, 1.0);
    let i1 = if i0 < inp - 1 { i0 + 1 } else { i0 };
    (i0, i1, 1.0 - far, far)
}

/// `upsample_bilinear2d.vec_out(Tensor input, SymInt[]? output_size, bool align_corners,
/// float[]? scale_factors, *, Tensor(a!) out)`: args = [input, output_size, align_corners,
/// scale_factors, out, out].
pub fn upsample_bilinear2d_vec_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let align = args.bool(2)?;
    let mut r = resample_call(args, "upsample_bilinear2d", 3, 4)?;
    if r.input.dtype == ScalarType::Bool {
        return Err(kerr!("upsample_bilinear2d: bool tensors cannot be interpolated"));
    }
    let taps = |d: usize| -> Vec<(usize, usize, f32, f32)> {
        let step = source_step(&r, d, align);
        (0..r.out_hw[d]).map(|o| bilinear_taps(step, o, r.in_hw[d], r.out_hw[d], align)).collect()
    };
    let (rows, cols) = (taps(0), taps(1));
    let [ih, iw] = r.in_hw;
    let wide = r.input.dtype == ScalarType::Double;
    let x = Elems::of(&r.input)?;
    let mut y = ElemsMut::of(&mut r.out)?;
    let mut k = 0;
    for p in 0..r.planes {
        let at = |row: usize, col: usize| (p * ih + row) * iw + col;
        for &(r0, r1, h0, h1) in &rows {
            for &(c0, c1, w0, w1) in &cols {
                let (tl, tr, bl, br) = (at(r0, c0), at(r0, c1), at(r1, c0), at(r1, c1));
                // ExecuTorch: top = tl·w0 + tr·w1, bottom likewise, then top·h0 + bottom·h1.
                let v = if wide {
                    let (w0, w1, h0, h1) = (w0 as f64, w1 as f64, h0 as f64, h1 as f64);
                    (x.f64(tl) * w0 + x.f64(tr) * w1) * h0 + (x.f64(bl) * w0 + x.f64(br) * w1) * h1
                } else {
                    let v = |i: usize| x.f64(i) as f32;
                    ((v(tl) * w0 + v(tr) * w1) * h0 + (v(bl) * w0 + v(br) * w1) * h1) as f64
                };
                y.set_f64(k, v);
                k += 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rbuild_runtime::harness::OpHarness;

    #[test]
    fn nearest_doubles_and_shrinks_by_floor_of_the_step() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let (size, none) = (h.none(), h.none());
        let scales = h.double_list(&[2.0, 1.0]);
        let out = h.out(ScalarType::Float, &[1, 1, 4, 3]);
        h.call(upsample_nearest2d_vec_out, &[x, size, scales, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 4.0, 5.0, 6.0]);
        // 3 → 2 columns: step 1.5 picks columns 0 and 1.
        let size = h.int_list(&[2, 2]);
        let out = h.out(ScalarType::Float, &[1, 1, 2, 2]);
        h.call(upsample_nearest2d_vec_out, &[x, size, none, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), [1.0, 2.0, 4.0, 5.0]);
    }

    #[test]
    fn bilinear_half_pixel_and_align_corners() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 1, 2], &[0.0, 4.0]);
        let (none, size) = (h.none(), h.int_list(&[1, 4]));
        let (half_pixel, corners) = (h.bool(false), h.bool(true));
        let out = h.out(ScalarType::Float, &[1, 1, 1, 4]);
        // Half-pixel centres: sources -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to the edge).
        h.call(upsample_bilinear2d_vec_out, &[x, size, half_pixel, none, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), [0.0, 1.0, 3.0, 4.0]);
        // Corners aligned: sources 0, 1/3, 2/3, 1.
        h.call(upsample_bilinear2d_vec_out, &[x, size, corners, none, out, out]).unwrap();
        let got = h.read::<f32>(out);
        for (g, w) in got.iter().zip([0.0, 4.0 / 3.0, 8.0 / 3.0, 4.0]) {
            assert!((g - w).abs() < 1e-6, "{got:?}");
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 2, 2], &[0.0; 4]);
        let none = h.none();
        let out = h.out(ScalarType::Float, &[1, 1, 4, 4]);
        let e = h.call(upsample_nearest2d_vec_out, &[x, none, none, out, out]).unwrap_err();
        assert!(e.message.contains("either"), "{e}");
        let size = h.int_list(&[4, 4]);
        let scales = h.double_list(&[2.0, 2.0]);
        let e = h.call(upsample_nearest2d_vec_out, &[x, size, scales, out, out]).unwrap_err();
        assert!(e.message.contains("either"), "{e}");
        let flat = h.f32(&[4], &[0.0; 4]);
        let e = h.call(upsample_nearest2d_vec_out, &[flat, size, none, out, out]).unwrap_err();
        assert!(e.message.contains("4-D"), "{e}");
        let wrong = h.out(ScalarType::Long, &[1, 1, 4, 4]);
        let t = h.bool(false);
        let e = h.call(upsample_bilinear2d_vec_out, &[x, size, t, none, wrong, wrong]).unwrap_err();
        assert!(e.message.contains("dtype"), "{e}");
    }
}
