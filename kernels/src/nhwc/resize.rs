//! Bilinear resizing of NHWC images, XNNPACK's `static_resize_bilinear_2d` (what ExecuTorch's
//! partitioner makes of `upsample_bilinear2d`): f32 (`f32-ibilinear`) and int8
//! (`s8-ibilinear`, the same quantization in and out).
//!
//! # The arithmetic (XNNPACK `src/indirection.c`, `xnn_indirection_init_resize_bilinear2d_hwc_*`)
//! Per axis, with `adj = align_corners && out > 1`: `scale = (in − adj) / (out − adj)` (f32).
//! - `align_corners` or TensorFlow legacy mode: `src = o · scale`.
//! - otherwise (half-pixel centres): `src = clamp(o · scale + (0.5·scale − 0.5), 0, in − 1)`.
//!
//! Then `lo = (int) src`, `hi = min(lo + 1, in − 1)`, `alpha = src − lo`.
//! - f32: `t = tl + (tr − tl)·αx`, `b = bl + (br − bl)·αx`, `y = t + (b − t)·αy` (separate
//!   multiplies and adds, as the SSE kernel).
//! - int8: `α` in Q11 (`lrintf(α · 2048)`); `t = (tl << 11) + (tr − tl)·αx` (likewise `b`),
//!   `acc = (t << 11) + (b − t)·αy`, `y = (acc + 2²¹) >> 22` (arithmetic shift).
//!
//! [`ResizeBilinear`] precomputes each output row's and column's source pair and weights;
//! [`reference`] recomputes them per pixel from the formulas (the tests compare the two).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// One output coordinate's source pair and weights along an axis.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tap {
    lo: usize,
    hi: usize,
    alpha: f32,
    alpha_q11: i32,
}

/// How output coordinates map to input ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResizeMode {
    pub align_corners: bool,
    pub tensorflow_legacy: bool,
}

/// The taps of one axis (`input` → `output` samples).
fn axis_taps(input: usize, output: usize, mode: ResizeMode) -> Vec<Tap> {
    (0..output).map(|o| source(o, input, output, mode)).collect()
}

/// XNNPACK's source coordinate of output `o` along an axis (see the module docs).
fn source(o: usize, input: usize, output: usize, mode: ResizeMode) -> Tap {
    let adj = (mode.align_corners && output != 1) as i32;
    let scale = (input as i32 - adj) as f32 / (output as i32 - adj) as f32;
    let max = input as u32 - 1;
    let src = if mode.align_corners || mode.tensorflow_legacy {
        o as i32 as f32 * scale
    } else {
        let offset = 0.5 * scale - 0.5;
        (o as i32 as f32 * scale + offset).max(0.0).min(max as f32)
    };
    let lo = (src as i32 as u32).min(max);
    let hi = (lo + 1).min(max);
    let alpha = src - lo as f32;
    Tap { lo: lo as usize, hi: hi as usize, alpha, alpha_q11: libm::rintf(alpha * 2048.0) as i16 as u16 as i32 }
}

/// A bilinear resize of `batch` images `in_h × in_w × channels` to `out_h × out_w`.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeBilinear {
    batch: usize,
    in_h: usize,
    in_w: usize,
    channels: usize,
    rows: Vec<Tap>,
    cols: Vec<Tap>,
}

impl ResizeBilinear {
    pub fn new(batch: usize, [in_h, in_w]: [usize; 2], channels: usize, [out_h, out_w]: [usize; 2], mode: ResizeMode) -> Result<Self, String> {
        // XNNPACK's limits (coordinates are computed in f32 and i32).
        let limit = 1 << 24;
        if [in_h, in_w, out_h, out_w].iter().any(|&d| d >= limit) {
            return Err(format!("resize {in_h}x{in_w} -> {out_h}x{out_w}: sizes must be below 2^24"));
        }
        let empty_out = batch == 0 || channels == 0 || out_h == 0 || out_w == 0;
        if (in_h == 0 || in_w == 0) && !empty_out {
            return Err(format!("resize of an empty {in_h}x{in_w} image to {out_h}x{out_w}"));
        }
        let (rows, cols) = if empty_out { (Vec::new(), Vec::new()) } else { (axis_taps(in_h, out_h, mode), axis_taps(in_w, out_w, mode)) };
        Ok(ResizeBilinear { batch, in_h, in_w, channels, rows, cols })
    }

    pub fn in_len(&self) -> usize {
        self.batch * self.in_h * self.in_w * self.channels
    }

    pub fn out_len(&self) -> usize {
        self.batch * self.rows.len() * self.cols.len() * self.channels
    }

    fn check(&self, x: usize, y: usize) -> Result<(), String> {
        if x != self.in_len() || y != self.out_len() {
            return Err(format!("resize: {x} inputs / {y} outputs, expected {} / {}", self.in_len(), self.out_len()));
        }
        Ok(())
    }

    /// Calls `pixel(out_offset, tl, tr, bl, br, row tap, column tap)` (offsets of the four
    /// source pixels' first channel) for every output pixel.
    fn for_each_pixel(&self, mut pixel: impl FnMut(usize, [usize; 4], &Tap, &Tap)) {
        let c = self.channels;
        let mut out = 0;
        for n in 0..self.batch {
            let image = n * self.in_h * self.in_w;
            for r in &self.rows {
                let (top, bottom) = ((image + r.lo * self.in_w) * c, (image + r.hi * self.in_w) * c);
                for col in &self.cols {
                    let (l, rt) = (col.lo * c, col.hi * c);
                    pixel(out, [top + l, top + rt, bottom + l, bottom + rt], r, col);
                    out += c;
                }
            }
        }
    }

    pub fn run_f32(&self, x: &[f32], y: &mut [f32]) -> Result<(), String> {
        self.check(x.len(), y.len())?;
        let c = self.channels;
        self.for_each_pixel(|o, [tl, tr, bl, br], r, col| {
            let (ah, av) = (col.alpha, r.alpha);
            let out = &mut y[o..o + c];
            for (k, v) in out.iter_mut().enumerate() {
                *v = lerp_f32([x[tl + k], x[tr + k], x[bl + k], x[br + k]], ah, av);
            }
        });
        Ok(())
    }

    pub fn run_s8(&self, x: &[i8], y: &mut [i8]) -> Result<(), String> {
        self.check(x.len(), y.len())?;
        let c = self.channels;
        self.for_each_pixel(|o, [tl, tr, bl, br], r, col| {
            let (ah, av) = (col.alpha_q11, r.alpha_q11);
            let out = &mut y[o..o + c];
            for (k, v) in out.iter_mut().enumerate() {
                *v = lerp_s8([x[tl + k], x[tr + k], x[bl + k], x[br + k]], ah, av);
            }
        });
        Ok(())
    }
}

#[inline(always)]
fn lerp_f32([tl, tr, bl, br]: [f32; 4], ah: f32, av: f32) -> f32 {
    let t = tl + (tr - tl) * ah;
    let b = bl + (br - bl) * ah;
    t + (b - t) * av
}

#[inline(always)]
fn lerp_s8([tl, tr, bl, br]: [i8; 4], ah: i32, av: i32) -> i8 {
    let (tl, tr, bl, br) = (tl as i32, tr as i32, bl as i32, br as i32);
    let t = (tl << 11) + (tr - tl) * ah;
    let b = (bl << 11) + (br - bl) * ah;
    let acc = (t << 11).wrapping_add((b - t).wrapping_mul(av));
    (acc.wrapping_add(1 << 21) >> 22) as i8
}

/// Plain twins: every output pixel's sources and weights recomputed from the formulas.
pub mod reference {
    use super::{lerp_f32, lerp_s8, source, ResizeMode};
    use alloc::vec;
    use alloc::vec::Vec;

    fn resize<T: Copy + Default>(x: &[T], n: usize, [h, w]: [usize; 2], c: usize, [oh, ow]: [usize; 2], mode: ResizeMode, f: impl Fn([T; 4], &super::Tap, &super::Tap) -> T) -> Vec<T> {
        let mut y = vec![T::default(); n * oh * ow * c];
        for b in 0..n {
            for oy in 0..oh {
                let r = source(oy, h, oh, mode);
                for ox in 0..ow {
                    let col = source(ox, w, ow, mode);
                    for k in 0..c {
                        let at = |yy: usize, xx: usize| x[((b * h + yy) * w + xx) * c + k];
                        let v = [at(r.lo, col.lo), at(r.lo, col.hi), at(r.hi, col.lo), at(r.hi, col.hi)];
                        y[((b * oh + oy) * ow + ox) * c + k] = f(v, &r, &col);
                    }
                }
            }
        }
        y
    }

    pub fn resize_f32(x: &[f32], n: usize, in_hw: [usize; 2], c: usize, out_hw: [usize; 2], mode: ResizeMode) -> Vec<f32> {
        resize(x, n, in_hw, c, out_hw, mode, |v, r, col| lerp_f32(v, col.alpha, r.alpha))
    }

    pub fn resize_s8(x: &[i8], n: usize, in_hw: [usize; 2], c: usize, out_hw: [usize; 2], mode: ResizeMode) -> Vec<i8> {
        resize(x, n, in_hw, c, out_hw, mode, |v, r, col| lerp_s8(v, col.alpha_q11, r.alpha_q11))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nhwc::qs8::test_util::Lcg;

    const MODES: [ResizeMode; 3] = [
        ResizeMode { align_corners: false, tensorflow_legacy: false },
        ResizeMode { align_corners: true, tensorflow_legacy: false },
        ResizeMode { align_corners: false, tensorflow_legacy: true },
    ];

    #[test]
    fn table_form_matches_the_per_pixel_formulas() {
        let mut r = Lcg(5);
        for &(n, h, w, c, oh, ow) in &[(1usize, 5usize, 6usize, 3usize, 9usize, 11usize), (2, 4, 4, 5, 8, 8), (1, 7, 3, 2, 3, 7), (1, 1, 1, 4, 3, 2), (1, 6, 5, 1, 1, 1), (3, 2, 9, 17, 5, 4)] {
            for mode in MODES {
                let x: Vec<f32> = (0..n * h * w * c).map(|_| r.f32(-4.0, 4.0)).collect();
                let op = ResizeBilinear::new(n, [h, w], c, [oh, ow], mode).unwrap();
                let mut y = vec![f32::NAN; op.out_len()];
                op.run_f32(&x, &mut y).unwrap();
                let want = reference::resize_f32(&x, n, [h, w], c, [oh, ow], mode);
                assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "f32 {h}x{w} -> {oh}x{ow} {mode:?}");
                let q = r.i8s(n * h * w * c);
                let mut yq = vec![0i8; op.out_len()];
                op.run_s8(&q, &mut yq).unwrap();
                assert_eq!(yq, reference::resize_s8(&q, n, [h, w], c, [oh, ow], mode), "s8 {h}x{w} -> {oh}x{ow} {mode:?}");
            }
        }
    }

    #[test]
    fn matches_pytorch_bilinear_on_known_values() {
        // 2x2 → 4x4, half-pixel centres (PyTorch align_corners=False): rows 0, 0.25, 0.75, 1.
        let x = [0.0f32, 1.0, 2.0, 3.0];
        let op = ResizeBilinear::new(1, [2, 2], 1, [4, 4], MODES[0]).unwrap();
        let mut y = [0.0f32; 16];
        op.run_f32(&x, &mut y).unwrap();
        assert_eq!(&y[..4], &[0.0, 0.25, 0.75, 1.0]);
        assert_eq!(&y[12..], &[2.0, 2.25, 2.75, 3.0]);
        // align_corners: 2 → 3 samples at 0, 0.5, 1.
        let op = ResizeBilinear::new(1, [1, 2], 1, [1, 3], MODES[1]).unwrap();
        let mut y = [0.0f32; 3];
        op.run_f32(&[0.0, 1.0], &mut y).unwrap();
        assert_eq!(y, [0.0, 0.5, 1.0]);
        // int8: the midpoint of 10 and 20 rounds exactly; constant images stay constant.
        let mut yq = [0i8; 3];
        op.run_s8(&[10, 20], &mut yq).unwrap();
        assert_eq!(yq, [10, 15, 20]);
        op.run_s8(&[-128, -128], &mut yq).unwrap();
        assert_eq!(yq, [-128; 3]);
    }

    #[test]
    fn bad_sizes_are_errors() {
        assert!(ResizeBilinear::new(1, [0, 3], 2, [4, 4], MODES[0]).is_err());
        assert!(ResizeBilinear::new(1, [1 << 24, 3], 2, [4, 4], MODES[0]).is_err());
        let op = ResizeBilinear::new(1, [2, 2], 1, [3, 3], MODES[0]).unwrap();
        assert!(op.run_f32(&[0.0; 3], &mut [0.0; 9]).is_err());
        assert!(op.run_s8(&[0; 4], &mut [0; 8]).is_err());
        // An empty output needs no input.
        assert_eq!(ResizeBilinear::new(1, [0, 0], 2, [0, 4], MODES[0]).unwrap().out_len(), 0);
    }
}
