//! 2-D resampling of NCHW tensors: `upsample_nearest2d.vec`, `upsample_bilinear2d.vec` and the
//! antialiased `_upsample_bilinear2d_aa.out`.
//!
//! Source coordinates of the first two follow ExecuTorch's portable kernels (ported from ATen's
//! UpSample.h): the step between output pixels is computed in f64 from the scale factor (or the
//! size ratio) and then used in f32, and bilinear weights are f32. f32 outputs therefore equal
//! ExecuTorch's bit for bit; f64 outputs blend in f64 with those f32 weights, other dtypes in
//! f32. The antialiased resize follows PyTorch's CPU kernel (see [`upsample_bilinear2d_aa_out`]).

use alloc::vec::Vec;
use core::ops::{Add, Div, Mul, Sub};

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

use super::util::{require_contiguous, Elems, ElemsMut};

rbuild_runtime::kernel_table! {
    "aten::upsample_nearest2d.vec_out" => upsample_nearest2d_vec_out,
    "aten::upsample_bilinear2d.vec_out" => upsample_bilinear2d_vec_out,
    "aten::_upsample_bilinear2d_aa.out" => upsample_bilinear2d_aa_out,
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
    let source = |d: usize, o: usize, len: usize| (libm::floorf(o as f32 * step[d]) as usize).min(len - 1);
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
    let i0 = (libm::floorf(real) as usize).min(inp - 1);
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

// ---------------------------------------------------------------------------------------------
// Antialiased bilinear resize
// ---------------------------------------------------------------------------------------------

/// The precision of an antialiased resize (f32 for Float, Half and BFloat16, f64 for Double
/// and for Byte's weights), with the conversions that PyTorch's mixed float/double steps need.
trait AaReal: Copy + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> {
    fn of(v: f64) -> Self;
    fn get(self) -> f64;
}

impl AaReal for f32 {
    fn of(v: f64) -> f32 {
        v as f32
    }
    fn get(self) -> f64 {
        self as f64
    }
}

impl AaReal for f64 {
    fn of(v: f64) -> f64 {
        v
    }
    fn get(self) -> f64 {
        self
    }
}

/// One axis of an antialiased resize: for each output pixel, the first input pixel it reads
/// and the normalized triangle-filter weights of the input pixels from there on.
struct AaTaps<T> {
    starts: Vec<usize>,
    weights: Vec<Vec<T>>,
}

impl<T: AaReal> AaTaps<T> {
    /// ATen's `_compute_indices_min_size_weights_aa` for the bilinear filter: the filter
    /// support widens by the downscale factor; `scale` is input pixels per output pixel
    /// (the given `scales_*` only count without align_corners, as `area_pixel_compute_scale`).
    fn new(inp: usize, out: usize, align_corners: bool, given_scale: Option<f64>) -> Self {
        let scale = if align_corners {
            if out > 1 {
                T::of((inp - 1) as f64) / T::of((out - 1) as f64)
            } else {
                T::of(0.0)
            }
        } else {
            match given_scale {
                Some(s) if s > 0.0 => T::of(1.0 / s),
                _ => T::of(inp as f64) / T::of(out as f64),
            }
        };
        let one = T::of(1.0);
        let (support, invscale) = if scale >= one { (scale, T::of(1.0 / scale.get())) } else { (one, one) };
        let max_taps = libm::ceil(support.get()) as usize * 2 + 1;
        let mut starts = Vec::with_capacity(out);
        let mut weights = Vec::with_capacity(out);
        for i in 0..out {
            let center = T::of(scale.get() * (i as f64 + 0.5));
            // Truncation toward zero, as the C++ casts do.
            let start = (((center - support).get() + 0.5) as i64).max(0);
            let end = (((center + support).get() + 0.5) as i64).min(inp as i64);
            let len = (end - start).clamp(0, max_taps as i64) as usize;
            let start = start as usize;
            let mut w: Vec<T> = (0..len)
                .map(|j| {
                    let x = T::of(((T::of((j + start) as f64) - center).get() + 0.5) * invscale.get());
                    let x = if x < T::of(0.0) { T::of(0.0) - x } else { x };
                    if x < one {
                        one - x
                    } else {
                        T::of(0.0)
                    }
                })
                .collect();
            let total = w.iter().fold(T::of(0.0), |acc, &v| acc + v);
            if total != T::of(0.0) {
                w.iter_mut().for_each(|v| *v = *v / total);
            }
            starts.push(start);
            weights.push(w);
        }
        AaTaps { starts, weights }
    }
}

/// A tensor viewed as `outer` blocks of `len` lines of `inner` elements; an axis pass
/// resamples the `len` axis.
#[derive(Clone, Copy)]
struct AxisPass {
    outer: usize,
    inner: usize,
}

impl AxisPass {
    /// `dst[o, i, k] = f(src[o, start_i .., k], weights_i)` for every output position `i`.
    fn run<V: Copy, W>(
        self,
        src: &[V],
        in_len: usize,
        starts: &[usize],
        weights: &[Vec<W>],
        combine: impl Fn(&mut dyn Iterator<Item = (V, &W)>) -> V,
    ) -> KernelResult<Vec<V>> {
        let out_len = starts.len();
        let mut dst = Vec::new();
        // The intermediate of a two-pass resize can exceed both tensors (a tall input made
        // wide): its size comes from the program, so a failed allocation is an error.
        let len = self.outer.checked_mul(out_len).and_then(|n| n.checked_mul(self.inner));
        if len.is_none_or(|n| dst.try_reserve_exact(n).is_err()) {
            return Err(kerr!("_upsample_bilinear2d_aa: the {}x{out_len}x{} intermediate does not fit in memory", self.outer, self.inner));
        }
        for o in 0..self.outer {
            for (&start, w) in starts.iter().zip(weights) {
                for k in 0..self.inner {
                    let at = |j: usize| src[(o * in_len + start + j) * self.inner + k];
                    dst.push(combine(&mut w.iter().enumerate().map(|(j, w)| (at(j), w))));
                }
            }
        }
        Ok(dst)
    }
}

/// Separable resize: the width pass first, then the height pass, skipping an axis whose size
/// does not change (PyTorch's order, which fixes where intermediate rounding happens).
fn separable<V: Copy, W>(
    input: Vec<V>,
    planes: usize,
    in_hw: [usize; 2],
    out_hw: [usize; 2],
    taps: [&(Vec<usize>, Vec<Vec<W>>); 2],
    combine: impl Fn(&mut dyn Iterator<Item = (V, &W)>) -> V + Copy,
) -> KernelResult<Vec<V>> {
    let mut data = input;
    if out_hw[1] != in_hw[1] {
        let pass = AxisPass { outer: planes * in_hw[0], inner: 1 };
        data = pass.run(&data, in_hw[1], &taps[1].0, &taps[1].1, combine)?;
    }
    if out_hw[0] != in_hw[0] {
        let pass = AxisPass { outer: planes, inner: out_hw[1] };
        data = pass.run(&data, in_hw[0], &taps[0].0, &taps[0].1, combine)?;
    }
    Ok(data)
}

/// Byte weights: PyTorch's int16 fixed point (f64 weights times `2^precision`, rounded half
/// away from zero, with the largest precision that keeps the largest weight below 2^15).
fn fixed_point_taps(t: AaTaps<f64>) -> ((Vec<usize>, Vec<Vec<i64>>), u32) {
    let w_max = t.weights.iter().flatten().fold(0.0f64, |m, &w| if w > m { w } else { m });
    let mut precision = 0u32;
    while precision < 22 && ((0.5 + w_max * (1u64 << (precision + 1)) as f64) as i64) < (1 << 15) {
        precision += 1;
    }
    let unit = (1u64 << precision) as f64;
    let quantize = |w: &f64| {
        let v = w * unit;
        if v < 0.0 {
            (-0.5 + v) as i64
        } else {
            (0.5 + v) as i64
        }
    };
    let weights = t.weights.iter().map(|ws| ws.iter().map(quantize).collect()).collect();
    ((t.starts, weights), precision)
}

/// `_upsample_bilinear2d_aa.out(Tensor self, SymInt[2] output_size, bool align_corners,
/// float? scales_h=None, float? scales_w=None, *, Tensor(a!) out)`: args = [self,
/// output_size, align_corners, scales_h, scales_w, out, out].
///
/// PyTorch's CPU kernel: each axis is a 1-D triangle filter whose support is scaled by the
/// downscale factor (PIL's antialiased bilinear), centred at `scale * (i + 0.5)` whatever
/// align_corners says. Float/Double weigh and sum in their own precision with a Float/Double
/// intermediate; Byte uses int16 fixed-point weights and rounds to uint8 after each axis, as
/// PyTorch does. Half and BFloat16 (which PyTorch's CPU kernel does not take) run as Float.
pub fn upsample_bilinear2d_aa_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "_upsample_bilinear2d_aa";
    let input = args.tensor(0)?;
    require_contiguous(&input, OP)?;
    let &[n, c, ih, iw] = input.sizes() else {
        return Err(kerr!("{OP}: input must be 4-D NCHW, got {:?}", input.sizes()));
    };
    let size = args.int_list(1)?;
    let &[oh, ow] = size.as_slice() else {
        return Err(kerr!("{OP}: output_size must have 2 values, got {size:?}"));
    };
    if oh <= 0 || ow <= 0 || ih == 0 || iw == 0 {
        return Err(kerr!("{OP}: input {:?} and output_size {size:?} must have sizes greater than 0", input.sizes()));
    }
    let (out_hw, in_hw) = ([oh as usize, ow as usize], [ih, iw]);
    let align_corners = args.bool(2)?;
    let scales = [args.opt_double(3)?, args.opt_double(4)?];
    let dtype = input.dtype;
    let mut out = args.out(5)?;
    if out.dtype != dtype {
        return Err(kerr!("{OP}: out dtype {} differs from input dtype {dtype}", out.dtype));
    }
    if !out.dim_order.is_contiguous() {
        return Err(kerr!("{OP}: out must be contiguous NCHW"));
    }
    let planes = n * c;
    let out_sizes = [n, c, out_hw[0], out_hw[1]];
    // The out tensor's planned size bounds output_size before anything is allocated for it.
    out.resize(&out_sizes)?;
    match dtype {
        ScalarType::Byte => {
            let taps = [0, 1].map(|d| fixed_point_taps(AaTaps::<f64>::new(in_hw[d], out_hw[d], align_corners, scales[d])));
            let x = input.data::<u8>()?.to_vec();
            let ([rows, cols], [p_rows, p_cols]) = (taps.clone().map(|t| t.0), taps.map(|t| t.1));
            // Each pass rounds (adding half a unit) and saturates to uint8; the two axes may
            // have different precisions, so the passes run one at a time.
            let fixed = |precision: u32| {
                move |it: &mut dyn Iterator<Item = (u8, &i64)>| {
                    let sum = it.fold((1i64 << precision) >> 1, |acc, (v, &w)| acc + v as i64 * w);
                    (sum >> precision).clamp(0, 255) as u8
                }
            };
            let wide = separable(x, planes, in_hw, [in_hw[0], out_hw[1]], [&rows, &cols], fixed(p_cols))?;
            let y = separable(wide, planes, [in_hw[0], out_hw[1]], out_hw, [&rows, &cols], fixed(p_rows))?;
            out.data_mut::<u8>()?.copy_from_slice(&y);
        }
        ScalarType::Double => {
            let taps = [0, 1].map(|d| {
                let t = AaTaps::<f64>::new(in_hw[d], out_hw[d], align_corners, scales[d]);
                (t.starts, t.weights)
            });
            let x = Elems::of(&input)?;
            let x: Vec<f64> = (0..input.numel()).map(|i| x.f64(i)).collect();
            let y = separable(x, planes, in_hw, out_hw, [&taps[0], &taps[1]], weighted_sum::<f64>)?;
            out.data_mut::<f64>()?.copy_from_slice(&y);
        }
        ScalarType::Float | ScalarType::Half | ScalarType::BFloat16 => {
            let taps = [0, 1].map(|d| {
                let t = AaTaps::<f32>::new(in_hw[d], out_hw[d], align_corners, scales[d]);
                (t.starts, t.weights)
            });
            let x = Elems::of(&input)?;
            let x: Vec<f32> = (0..input.numel()).map(|i| x.f64(i) as f32).collect();
            let y = separable(x, planes, in_hw, out_hw, [&taps[0], &taps[1]], weighted_sum::<f32>)?;
            let mut o = ElemsMut::of(&mut out)?;
            for (i, &v) in y.iter().enumerate() {
                o.set_f64(i, v as f64);
            }
        }
        d => return Err(kerr!("{OP}: dtype {d} is not supported (Float, Double, Half, BFloat16 or Byte)")),
    }
    Ok(())
}

/// `t0*w0 + t1*w1 + ...` accumulated left to right in `T` (ATen's `interpolate_aa_single_dim`).
fn weighted_sum<T: AaReal>(it: &mut dyn Iterator<Item = (T, &T)>) -> T {
    match it.next() {
        Some((v, &w)) => it.fold(v * w, |acc, (v, &w)| acc + v * w),
        None => T::of(0.0),
    }
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

    /// Calls `_upsample_bilinear2d_aa.out` on an input id; returns the output id.
    fn aa(h: &mut OpHarness, x: u32, size: [i64; 2], align: bool, scales: [Option<f64>; 2], out_sizes: &[usize], dtype: ScalarType) -> Result<u32, rbuild_runtime::KernelError> {
        let (s, a) = (h.int_list(&size), h.bool(align));
        let [sh, sw] = scales.map(|v| match v {
            Some(v) => h.double(v),
            None => h.none(),
        });
        let out = h.out(dtype, out_sizes);
        h.call(upsample_bilinear2d_aa_out, &[x, s, a, sh, sw, out, out]).map(|_| out)
    }

    fn close(got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-5, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn aa_downscale_widens_the_triangle() {
        let mut h = OpHarness::new();
        // 4 -> 2: support 2 input pixels each side, weights (3,3,1)/7 and (1,3,3)/7.
        let x = h.f32(&[1, 1, 1, 4], &[0., 7., 14., 21.]);
        let o = aa(&mut h, x, [1, 2], false, [None, None], &[1, 1, 1, 2], ScalarType::Float).unwrap();
        close(&h.read::<f32>(o), &[5., 16.]);
        // align_corners only changes the scale (3): weights (2,3,2,1)/8 and (1,2)/3.
        let x8 = h.f32(&[1, 1, 1, 4], &[0., 8., 16., 24.]);
        let o = aa(&mut h, x8, [1, 2], true, [None, None], &[1, 1, 1, 2], ScalarType::Float).unwrap();
        close(&h.read::<f32>(o), &[10., 64. / 3.]);
        // A given scale factor (0.25: 4 input pixels per output) replaces the size ratio.
        let o = aa(&mut h, x8, [1, 2], false, [None, Some(0.25)], &[1, 1, 1, 2], ScalarType::Float).unwrap();
        close(&h.read::<f32>(o), &[12., 22.]);
        // Both axes, batch of two planes: rows average after the width pass.
        let xs = [0., 7., 14., 21., 7., 14., 21., 28.];
        let x2: Vec<f32> = xs.iter().chain(xs.iter()).map(|v| v * 2.0).collect();
        let x = h.f32(&[2, 1, 2, 4], &x2);
        let o = aa(&mut h, x, [1, 2], false, [None, None], &[2, 1, 1, 2], ScalarType::Float).unwrap();
        close(&h.read::<f32>(o), &[17., 39., 17., 39.]);
    }

    #[test]
    fn aa_upscale_is_plain_bilinear_and_same_size_copies() {
        let mut h = OpHarness::new();
        let x = h.tensor(ScalarType::Double, &[1, 1, 2, 1], &[0f64, 4.]);
        let o = aa(&mut h, x, [4, 1], false, [None, None], &[1, 1, 4, 1], ScalarType::Double).unwrap();
        assert_eq!(h.read::<f64>(o), vec![0., 1., 3., 4.]);
        let o = aa(&mut h, x, [2, 1], true, [Some(3.0), None], &[1, 1, 2, 1], ScalarType::Double).unwrap();
        assert_eq!(h.read::<f64>(o), vec![0., 4.]);
        let hf = |v: f32| half::f16::from_f32(v);
        let x = h.tensor(ScalarType::Half, &[1, 1, 1, 2], &[hf(0.), hf(4.)]);
        let o = aa(&mut h, x, [1, 4], false, [None, None], &[1, 1, 1, 4], ScalarType::Half).unwrap();
        assert_eq!(h.read::<half::f16>(o), [0., 1., 3., 4.].map(hf).to_vec());
    }

    #[test]
    fn aa_byte_uses_fixed_point_and_rounds() {
        let mut h = OpHarness::new();
        // Weights 3/7 and 1/7 at 16 bits: 28087 and 9362; 255 * 3/7 = 109.29 rounds to 109.
        let x = h.tensor(ScalarType::Byte, &[1, 1, 1, 4], &[0u8, 7, 14, 21]);
        let o = aa(&mut h, x, [1, 2], false, [None, None], &[1, 1, 1, 2], ScalarType::Byte).unwrap();
        assert_eq!(h.read::<u8>(o), vec![5, 16]);
        let x = h.tensor(ScalarType::Byte, &[1, 1, 1, 4], &[0u8, 0, 0, 255]);
        let o = aa(&mut h, x, [1, 2], false, [None, None], &[1, 1, 1, 2], ScalarType::Byte).unwrap();
        assert_eq!(h.read::<u8>(o), vec![0, 109]);
        // Two axes round after each pass: rows [0, 0, 0, 255] and [255, 255, 255, 255].
        let x = h.tensor(ScalarType::Byte, &[1, 1, 2, 4], &[0u8, 0, 0, 255, 255, 255, 255, 255]);
        let o = aa(&mut h, x, [1, 2], false, [None, None], &[1, 1, 1, 2], ScalarType::Byte).unwrap();
        // Width pass: [0, 109] and [255, 255]; height pass averages (half up): [128, 182].
        assert_eq!(h.read::<u8>(o), vec![128, 182]);
    }

    #[test]
    fn aa_bad_arguments_are_errors() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 2, 2], &[0.; 4]);
        let e = aa(&mut h, x, [0, 2], false, [None, None], &[1, 1, 0, 2], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("greater than 0"), "{e}");
        let e = aa(&mut h, x, [2, 2], false, [None, None], &[1, 1, 2, 2], ScalarType::Double).unwrap_err();
        assert!(e.message.contains("dtype"), "{e}");
        let e = aa(&mut h, x, [3, 3], false, [None, None], &[1, 1, 2, 2], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("static shape"), "{e}");
        let flat = h.f32(&[1, 2, 2], &[0.; 4]);
        let e = aa(&mut h, flat, [2, 2], false, [None, None], &[1, 2, 2], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("4-D"), "{e}");
        let xi = h.i64(&[1, 1, 2, 2], &[0; 4]);
        let e = aa(&mut h, xi, [1, 1], false, [None, None], &[1, 1, 1, 1], ScalarType::Long).unwrap_err();
        assert!(e.message.contains("not supported"), "{e}");
        let (s, a, none) = (h.int_list(&[2]), h.bool(false), h.none());
        let out = h.out(ScalarType::Float, &[1, 1, 2, 2]);
        let e = h.call(upsample_bilinear2d_aa_out, &[x, s, a, none, none, out, out]).unwrap_err();
        assert!(e.message.contains("2 values"), "{e}");
        // An output_size the out tensor cannot hold fails before anything is allocated for it
        // (a fuzzed program asked for 2^40 columns).
        let e = aa(&mut h, x, [2, 1 << 40], false, [None, None], &[1, 1, 2, 2], ScalarType::Float).unwrap_err();
        assert!(e.message.contains("static shape"), "{e}");
    }
}
