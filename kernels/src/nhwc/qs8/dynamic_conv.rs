//! Dynamically quantized 2-D convolution (XNNPACK's `qd8-f32-qc8w` IGEMM): what ExecuTorch's
//! partitioner emits for a convolution under dynamic quantization (`Convert` f32 → qdint8 with
//! `num_nonbatch_dims` 3, then `Conv2d` qdint8 × qcint8 → f32).
//!
//! # The arithmetic
//! Each image (`H·W·C` values, the 3 non-batch dims) gets one zero point and scale, computed and
//! applied as for the per-token rows of [`super::dynamic`] ([`super::dynamic::quantize_row`]).
//! Padding taps read a buffer of the image's zero point, so they add exactly 0:
//! `acc = Σ_valid (q − zp)·w` (int32), then `y = (acc · scale) · w_scale[c] + bias[c]`, clamped
//! to the node's output range.
//!
//! [`ConvQd8::run`] gathers each output pixel's taps, centred on the zero point, as i16 and
//! takes dot products with the weight rows (parallel over output rows);
//! [`reference::conv_qd8`] is the same sum in plain nested loops (the tests compare the two
//! bit for bit).

use super::dynamic::{quantize_row, Qd8Params};
use crate::nhwc::{Conv2dGeom, Parallel};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

#[derive(Clone, Debug)]
pub struct ConvQd8 {
    geom: Conv2dGeom,
    /// `[out_channels, kh, kw, group_in]`.
    filter: Vec<i8>,
    scales: Vec<f32>,
    bias: Vec<f32>,
}

impl ConvQd8 {
    /// `filter` `[groups·group_out, kh, kw, group_in]` int8 values, one scale per output
    /// channel, f32 bias.
    pub fn new(g: &Conv2dGeom, filter: &[i8], scales: &[f32], bias: Option<&[f32]>) -> Result<Self, String> {
        super::conv::check_geom(g)?;
        let co = g.out_channels();
        let k = g.kernel_h * g.kernel_w * g.group_in;
        if filter.len() != co * k {
            return Err(format!("dynamically quantized convolution: filter has {} values, expected {}", filter.len(), co * k));
        }
        if scales.len() != co || scales.iter().any(|s| !s.is_finite()) {
            return Err(format!("dynamically quantized convolution: {} weight scales (finite) for {co} output channels", scales.len()));
        }
        if bias.is_some_and(|b| b.len() != co) {
            return Err(format!("dynamically quantized convolution: bias for {co} output channels expected"));
        }
        Ok(ConvQd8 { geom: *g, filter: filter.to_vec(), scales: scales.to_vec(), bias: bias.map_or_else(|| vec![0.0; co], <[f32]>::to_vec) })
    }

    pub fn geom(&self) -> &Conv2dGeom {
        &self.geom
    }

    pub fn run(&self, par: &dyn Parallel, x: &[f32], y: &mut [f32], min: f32, max: f32) -> Result<(), String> {
        let g = &self.geom;
        if x.len() != g.in_len() || y.len() != g.out_len() {
            return Err(format!("dynamically quantized convolution: {} inputs / {} outputs, expected {} / {}", x.len(), y.len(), g.in_len(), g.out_len()));
        }
        let image = g.in_h * g.in_w * g.in_channels();
        let mut q = vec![0i8; x.len()];
        let params: Vec<Qd8Params> = q.chunks_exact_mut(image.max(1)).zip(x.chunks_exact(image.max(1))).map(|(qi, xi)| quantize_row(xi, qi)).collect();
        g.for_each_output_row(par, &q, y, &|n, image, oy, out| self.row(image, &params[n], oy, out, min, max))
    }

    /// Output row `oy` of one image (`q` its quantized values).
    fn row(&self, q: &[i8], p: &Qd8Params, oy: usize, out: &mut [f32], min: f32, max: f32) {
        let g = &self.geom;
        let (ci, co, gi) = (g.in_channels(), g.out_channels(), g.group_in);
        let k = g.kernel_h * g.kernel_w * gi;
        let mut patch = vec![0i16; k];
        for (ox, pixel) in out.chunks_exact_mut(co).enumerate() {
            for grp in 0..g.groups {
                // The group's taps, centred on the zero point; padding stays 0.
                patch.fill(0);
                for ky in 0..g.kernel_h {
                    let Some(iy) = tap(oy, ky, g.stride_h, g.dilation_h, g.pad_top, g.in_h) else { continue };
                    for kx in 0..g.kernel_w {
                        let Some(ix) = tap(ox, kx, g.stride_w, g.dilation_w, g.pad_left, g.in_w) else { continue };
                        let src = &q[(iy * g.in_w + ix) * ci + grp * gi..][..gi];
                        for (d, &v) in patch[(ky * g.kernel_w + kx) * gi..][..gi].iter_mut().zip(src) {
                            *d = (v as i32 - p.zero_point) as i16;
                        }
                    }
                }
                for oc in grp * g.group_out..(grp + 1) * g.group_out {
                    let acc = dot_i16_i8(&patch, &self.filter[oc * k..(oc + 1) * k]);
                    pixel[oc] = ((acc as f32 * p.scale) * self.scales[oc] + self.bias[oc]).max(min).min(max);
                }
            }
        }
    }
}

/// The input coordinate tap `t` of output coordinate `o` reads, if not padding.
#[inline]
fn tap(o: usize, t: usize, stride: usize, dilation: usize, pad: usize, size: usize) -> Option<usize> {
    let p = (o * stride + t * dilation).checked_sub(pad)?;
    (p < size).then_some(p)
}

/// `Σ a·b` (exact: |a| ≤ 255, so any `k` below 2¹⁵ fits; wrapping beyond, as XNNPACK's int32).
#[inline]
fn dot_i16_i8(a: &[i16], b: &[i8]) -> i32 {
    #[inline(always)]
    fn plain(a: &[i16], b: &[i8]) -> i32 {
        a.iter().zip(b).fold(0i32, |s, (&x, &w)| s.wrapping_add(x as i32 * w as i32))
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(a: &[i16], b: &[i8]) -> i32 {
            plain(a, b)
        }
        if super::Isa::best().has_avx2() {
            // SAFETY: AVX2 is present (checked at run time); the body is safe code.
            return unsafe { avx2(a, b) };
        }
    }
    plain(a, b)
}

/// The plain twin.
pub mod reference {
    use super::super::dynamic::quantize_row;
    use crate::nhwc::Conv2dGeom;
    use alloc::vec;
    use alloc::vec::Vec;

    #[allow(clippy::too_many_arguments)]
    pub fn conv_qd8(g: &Conv2dGeom, x: &[f32], filter: &[i8], scales: &[f32], bias: Option<&[f32]>, min: f32, max: f32) -> Vec<f32> {
        let (ci, co) = (g.in_channels(), g.out_channels());
        let image = g.in_h * g.in_w * ci;
        let mut y = vec![0.0f32; g.out_len()];
        for n in 0..g.batch {
            let mut q = vec![0i8; image];
            let p = quantize_row(&x[n * image..(n + 1) * image], &mut q);
            for oy in 0..g.out_h {
                for ox in 0..g.out_w {
                    for oc in 0..co {
                        let grp = oc / g.group_out;
                        let mut acc = 0i32;
                        for ky in 0..g.kernel_h {
                            for kx in 0..g.kernel_w {
                                let (iy, ix) = ((oy * g.stride_h + ky * g.dilation_h) as isize - g.pad_top as isize, (ox * g.stride_w + kx * g.dilation_w) as isize - g.pad_left as isize);
                                if iy < 0 || ix < 0 || iy as usize >= g.in_h || ix as usize >= g.in_w {
                                    continue;
                                }
                                for i in 0..g.group_in {
                                    let v = q[(iy as usize * g.in_w + ix as usize) * ci + grp * g.group_in + i] as i32 - p.zero_point;
                                    acc += v * filter[((oc * g.kernel_h + ky) * g.kernel_w + kx) * g.group_in + i] as i32;
                                }
                            }
                        }
                        let v = (acc as f32 * p.scale) * scales[oc] + bias.map_or(0.0, |b| b[oc]);
                        y[((n * g.out_h + oy) * g.out_w + ox) * co + oc] = v.max(min).min(max);
                    }
                }
            }
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nhwc::qs8::test_util::{FakePar, Lcg};
    use crate::nhwc::Serial;

    #[test]
    fn fast_path_matches_reference_bit_for_bit() {
        let mut r = Lcg(23);
        for &(n, h, w, k, s, p, d, groups, gi, go) in &[
            (1usize, 8usize, 8usize, 3usize, 1usize, 1usize, 1usize, 1usize, 3usize, 8usize),
            (2, 7, 5, 3, 2, 1, 1, 2, 4, 3),
            (1, 6, 6, 1, 1, 0, 1, 1, 16, 5),
            (1, 9, 9, 3, 1, 2, 2, 1, 2, 2),
        ] {
            let out = |i: usize| (i + 2 * p - d * (k - 1) - 1) / s + 1;
            let g = Conv2dGeom { batch: n, in_h: h, in_w: w, out_h: out(h), out_w: out(w), kernel_h: k, kernel_w: k, stride_h: s, stride_w: s, dilation_h: d, dilation_w: d, pad_top: p, pad_left: p, groups, group_in: gi, group_out: go };
            let x: Vec<f32> = (0..g.in_len()).map(|_| r.f32(-2.0, 3.0)).collect();
            let filter = r.i8s(g.out_channels() * k * k * gi);
            let scales: Vec<f32> = (0..g.out_channels()).map(|_| r.f32(0.001, 0.01)).collect();
            let bias: Vec<f32> = (0..g.out_channels()).map(|_| r.f32(-1.0, 1.0)).collect();
            let op = ConvQd8::new(&g, &filter, &scales, Some(&bias)).unwrap();
            let want = reference::conv_qd8(&g, &x, &filter, &scales, Some(&bias), -0.5, 4.0);
            for par in [&Serial as &dyn Parallel, &FakePar] {
                let mut y = vec![f32::NAN; g.out_len()];
                op.run(par, &x, &mut y, -0.5, 4.0).unwrap();
                assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{g:?}");
            }
            // Close to the float convolution (within the quantization error).
            let exact = crate::nhwc::reference::conv2d_f32(&g, &x, &filter.iter().enumerate().map(|(i, &v)| v as f32 * scales[i / (k * k * gi)]).collect::<Vec<_>>(), Some(&bias), -0.5, 4.0);
            let worst = want.iter().zip(&exact).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(worst < 0.1, "{g:?}: {worst}");
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        let g = Conv2dGeom { batch: 1, in_h: 3, in_w: 3, out_h: 1, out_w: 1, kernel_h: 3, kernel_w: 3, stride_h: 1, stride_w: 1, dilation_h: 1, dilation_w: 1, pad_top: 0, pad_left: 0, groups: 1, group_in: 2, group_out: 2 };
        assert!(ConvQd8::new(&g, &[0; 35], &[0.1; 2], None).is_err());
        assert!(ConvQd8::new(&g, &[0; 36], &[0.1; 3], None).is_err());
        assert!(ConvQd8::new(&g, &[0; 36], &[0.1; 2], Some(&[0.0])).is_err());
        let op = ConvQd8::new(&g, &[0; 36], &[0.1; 2], None).unwrap();
        assert!(op.run(&Serial, &[0.0; 17], &mut [0.0; 2], f32::NEG_INFINITY, f32::INFINITY).is_err());
    }
}
