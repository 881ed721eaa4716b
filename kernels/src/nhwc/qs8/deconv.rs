//! int8 transposed convolution (XNNPACK's `deconvolution2d_nhwc_qs8_qc8w`: qs8 activations,
//! per-output-channel int8 weights, int32 bias), NHWC.
//!
//! # The arithmetic
//! XNNPACK splits the deconvolution into one sub-convolution per stride phase (IGEMM), with taps
//! outside the input reading a buffer of the input zero point and the bias packed as
//! `b − izp·Σw`; that is `acc = b + Σ_valid (x − izp)·w` (wrapping int32), requantized per
//! output channel with the convolution's fp32 rule ([`super::requantize`], scale
//! `input_scale · w_scale[c] / output_scale`). Output pixel `(oy, ox)` takes input `(iy, ix)`
//! through tap `(ky, kx)` when `oy + pad_top = iy·stride_h + ky·dilation_h` (likewise `x`).
//!
//! [`DeconvQd8`] is the dynamically quantized form (`qd8-f32-qc8w`: each image quantized with
//! its own zero point and scale at run time, as [`super::dynamic_conv`];
//! `y = (acc · scale) · w_scale[c] + bias[c]` in f32).
//!
//! Both gather each output pixel's taps (parallel over output rows); [`reference`] scatters
//! every input pixel instead (the tests compare the two bit for bit).

use super::dynamic::{quantize_row, Qd8Params};
use super::{channel_scales, requantize, OutParams, QParams};
use crate::nhwc::{Conv2dGeom, Parallel};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

#[derive(Clone, Debug)]
pub struct DeconvQs8 {
    geom: Conv2dGeom,
    input_zp: i32,
    /// `[out_channels, kh, kw, group_in]`.
    filter: Vec<i8>,
    bias: Vec<i32>,
    scales: Vec<f32>,
    out: OutParams,
}

/// The input coordinate tap `t` of output coordinate `o` reads, if any.
#[inline]
fn source(o: usize, t: usize, stride: usize, dilation: usize, pad: usize, size: usize) -> Option<usize> {
    let p = (o + pad).checked_sub(t * dilation)?;
    (p % stride == 0 && p / stride < size).then_some(p / stride)
}

impl DeconvQs8 {
    /// `g`: input `in_h × in_w`, output `out_h × out_w`, kernel, stride (upsampling), dilation,
    /// top/left padding, groups; `filter` `[groups·group_out, kh, kw, group_in]`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(g: &Conv2dGeom, input: QParams, filter: &[i8], filter_scales: &[f32], bias: Option<&[i32]>, output: QParams, out_min: i8, out_max: i8) -> Result<Self, String> {
        let nonzero = [g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.groups, g.group_in, g.group_out];
        if nonzero.contains(&0) {
            return Err(format!("transposed convolution geometry has a zero size ({g:?})"));
        }
        let co = g.out_channels();
        let k = g.kernel_h * g.kernel_w * g.group_in;
        if filter.len() != co * k {
            return Err(format!("transposed convolution filter has {} values, expected {}", filter.len(), co * k));
        }
        if let Some(b) = bias {
            if b.len() != co {
                return Err(format!("transposed convolution bias has {} values for {co} output channels", b.len()));
            }
        }
        let scales = channel_scales(co, input, filter_scales, output)?;
        let out = OutParams::new(output, out_min, out_max)?;
        let bias = bias.map_or_else(|| vec![0; co], <[i32]>::to_vec);
        Ok(DeconvQs8 { geom: *g, input_zp: input.zero_point, filter: filter.to_vec(), bias, scales, out })
    }

    pub fn geom(&self) -> &Conv2dGeom {
        &self.geom
    }

    pub fn run(&self, par: &dyn Parallel, x: &[i8], y: &mut [i8]) -> Result<(), String> {
        let g = &self.geom;
        g.for_each_output_row(par, x, y, &|_, image, oy, out| {
            gather_row(g, &self.filter, image, self.input_zp, oy, &self.bias, |ox, acc| {
                for ((v, &a), &s) in out[ox * acc.len()..][..acc.len()].iter_mut().zip(acc).zip(&self.scales) {
                    *v = requantize(a, s, &self.out);
                }
            });
        })
    }
}

/// Output row `oy` of one image `x`: for each output pixel `ox`, `acc[c] = init[c] + Σ (x −
/// zp)·w` over the taps that reach it (wrapping int32), handed to `finish(ox, acc)`.
fn gather_row(g: &Conv2dGeom, filter: &[i8], x: &[i8], zp: i32, oy: usize, init: &[i32], mut finish: impl FnMut(usize, &[i32])) {
    let (ci, co, gi) = (g.in_channels(), g.out_channels(), g.group_in);
    let taps_y: Vec<(usize, usize)> = (0..g.kernel_h).filter_map(|ky| Some((ky, source(oy, ky, g.stride_h, g.dilation_h, g.pad_top, g.in_h)?))).collect();
    let mut acc = vec![0i32; co];
    let mut centred = vec![0i32; gi];
    for ox in 0..g.out_w {
        acc.copy_from_slice(init);
        for kx in 0..g.kernel_w {
            let Some(ix) = source(ox, kx, g.stride_w, g.dilation_w, g.pad_left, g.in_w) else { continue };
            for &(ky, iy) in &taps_y {
                let xin = &x[(iy * g.in_w + ix) * ci..][..ci];
                for grp in 0..g.groups {
                    for (c, &v) in centred.iter_mut().zip(&xin[grp * gi..(grp + 1) * gi]) {
                        *c = v as i32 - zp;
                    }
                    for o in grp * g.group_out..(grp + 1) * g.group_out {
                        let w = &filter[((o * g.kernel_h + ky) * g.kernel_w + kx) * gi..][..gi];
                        let s = centred.iter().zip(w).fold(0i32, |s, (&a, &b)| s.wrapping_add(a * b as i32));
                        acc[o] = acc[o].wrapping_add(s);
                    }
                }
            }
        }
        finish(ox, &acc);
    }
}

/// A transposed convolution on a dynamically quantized f32 input (per-image parameters),
/// per-output-channel int8 weights, f32 bias and output.
#[derive(Clone, Debug)]
pub struct DeconvQd8 {
    geom: Conv2dGeom,
    /// `[out_channels, kh, kw, group_in]`.
    filter: Vec<i8>,
    scales: Vec<f32>,
    bias: Vec<f32>,
    zeros: Vec<i32>,
}

impl DeconvQd8 {
    pub fn new(g: &Conv2dGeom, filter: &[i8], scales: &[f32], bias: Option<&[f32]>) -> Result<Self, String> {
        let nonzero = [g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.groups, g.group_in, g.group_out];
        if nonzero.contains(&0) {
            return Err(format!("transposed convolution geometry has a zero size ({g:?})"));
        }
        let co = g.out_channels();
        if filter.len() != co * g.kernel_h * g.kernel_w * g.group_in {
            return Err(format!("transposed convolution filter has {} values, expected {}", filter.len(), co * g.kernel_h * g.kernel_w * g.group_in));
        }
        if scales.len() != co || scales.iter().any(|s| !s.is_finite()) || bias.is_some_and(|b| b.len() != co) {
            return Err(format!("transposed convolution: scales (finite) and bias for {co} output channels expected"));
        }
        let bias = bias.map_or_else(|| vec![0.0; co], <[f32]>::to_vec);
        Ok(DeconvQd8 { geom: *g, filter: filter.to_vec(), scales: scales.to_vec(), bias, zeros: vec![0; co] })
    }

    pub fn geom(&self) -> &Conv2dGeom {
        &self.geom
    }

    pub fn run(&self, par: &dyn Parallel, x: &[f32], y: &mut [f32], min: f32, max: f32) -> Result<(), String> {
        let g = &self.geom;
        if x.len() != g.in_len() || y.len() != g.out_len() {
            return Err(format!("transposed convolution: {} inputs / {} outputs, expected {} / {}", x.len(), y.len(), g.in_len(), g.out_len()));
        }
        let image = g.in_h * g.in_w * g.in_channels();
        let mut q = vec![0i8; x.len()];
        let params: Vec<Qd8Params> = q.chunks_exact_mut(image.max(1)).zip(x.chunks_exact(image.max(1))).map(|(qi, xi)| quantize_row(xi, qi)).collect();
        g.for_each_output_row(par, &q, y, &|n, image, oy, out| {
            let p = &params[n];
            gather_row(g, &self.filter, image, p.zero_point, oy, &self.zeros, |ox, acc| {
                for (c, (v, &a)) in out[ox * acc.len()..][..acc.len()].iter_mut().zip(acc).enumerate() {
                    *v = ((a as f32 * p.scale) * self.scales[c] + self.bias[c]).max(min).min(max);
                }
            });
        })
    }
}

/// The plain twins: every input pixel scattered into the outputs its taps reach.
pub mod reference {
    use super::super::dynamic::quantize_row;
    use super::super::reference::requantize_ref;
    use super::super::{OutParams, QParams};
    use crate::nhwc::Conv2dGeom;
    use alloc::vec::Vec;

    /// `bias[c] + Σ (x − zp)·w` at every output (wrapping int32).
    fn scatter(g: &Conv2dGeom, zp: i32, x: &[i8], filter: &[i8], bias: Option<&[i32]>) -> Vec<i32> {
        let (ci, co) = (g.in_channels(), g.out_channels());
        let mut acc: Vec<i32> = (0..g.out_len()).map(|i| bias.map_or(0, |b| b[i % co])).collect();
        for n in 0..g.batch {
            for iy in 0..g.in_h {
                for ix in 0..g.in_w {
                    for ky in 0..g.kernel_h {
                        let Some(oy) = (iy * g.stride_h + ky * g.dilation_h).checked_sub(g.pad_top).filter(|&v| v < g.out_h) else { continue };
                        for kx in 0..g.kernel_w {
                            let Some(ox) = (ix * g.stride_w + kx * g.dilation_w).checked_sub(g.pad_left).filter(|&v| v < g.out_w) else { continue };
                            for oc in 0..co {
                                let grp = oc / g.group_out;
                                for i in 0..g.group_in {
                                    let xv = x[((n * g.in_h + iy) * g.in_w + ix) * ci + grp * g.group_in + i] as i32 - zp;
                                    let wv = filter[((oc * g.kernel_h + ky) * g.kernel_w + kx) * g.group_in + i] as i32;
                                    let a = &mut acc[((n * g.out_h + oy) * g.out_w + ox) * co + oc];
                                    *a = a.wrapping_add(xv * wv);
                                }
                            }
                        }
                    }
                }
            }
        }
        acc
    }

    #[allow(clippy::too_many_arguments)]
    pub fn deconv_qs8(g: &Conv2dGeom, input: QParams, x: &[i8], filter: &[i8], filter_scales: &[f32], bias: Option<&[i32]>, output: QParams, out_min: i8, out_max: i8) -> Vec<i8> {
        let o = OutParams::new(output, out_min, out_max).unwrap();
        let co = g.out_channels();
        scatter(g, input.zero_point, x, filter, bias)
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let ks = filter_scales[if filter_scales.len() == 1 { 0 } else { i % co }];
                requantize_ref(a, input.scale * ks / output.scale, &o)
            })
            .collect()
    }

    /// The dynamically quantized form: each image quantized as XNNPACK does, then scattered.
    #[allow(clippy::too_many_arguments)]
    pub fn deconv_qd8(g: &Conv2dGeom, x: &[f32], filter: &[i8], scales: &[f32], bias: Option<&[f32]>, min: f32, max: f32) -> Vec<f32> {
        let image = g.in_h * g.in_w * g.in_channels();
        let co = g.out_channels();
        let mut y = Vec::with_capacity(g.out_len());
        for n in 0..g.batch {
            let mut q = alloc::vec![0i8; image];
            let p = quantize_row(&x[n * image..(n + 1) * image], &mut q);
            let acc = scatter(&Conv2dGeom { batch: 1, ..*g }, p.zero_point, &q, filter, None);
            y.extend(acc.iter().enumerate().map(|(i, &a)| ((a as f32 * p.scale) * scales[i % co] + bias.map_or(0.0, |b| b[i % co])).max(min).min(max)));
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nhwc::qs8::test_util::{FakePar, Lcg};
    use crate::nhwc::Serial;

    fn geom(n: usize, (h, w): (usize, usize), k: usize, s: usize, d: usize, p: usize, adj: usize, (groups, gi, go): (usize, usize, usize)) -> Conv2dGeom {
        let out = |i: usize| (i - 1) * s + d * (k - 1) + 1 + adj - 2 * p;
        Conv2dGeom { batch: n, in_h: h, in_w: w, out_h: out(h), out_w: out(w), kernel_h: k, kernel_w: k, stride_h: s, stride_w: s, dilation_h: d, dilation_w: d, pad_top: p, pad_left: p, groups, group_in: gi, group_out: go }
    }

    #[test]
    fn gather_matches_scatter_bit_for_bit() {
        let mut r = Lcg(17);
        for g in [
            geom(1, (8, 8), 3, 2, 1, 1, 1, (1, 6, 4)),
            geom(1, (5, 7), 2, 2, 1, 0, 0, (1, 3, 5)),
            geom(2, (4, 3), 3, 1, 1, 0, 0, (2, 2, 3)),
            geom(1, (3, 3), 3, 3, 2, 2, 2, (1, 4, 2)),
            geom(1, (6, 5), 4, 2, 1, 1, 0, (3, 1, 1)),
        ] {
            let x = r.i8s(g.in_len());
            let w = r.i8s(g.out_channels() * g.kernel_h * g.kernel_w * g.group_in);
            let scales: Vec<f32> = (0..g.out_channels()).map(|_| r.f32(0.002, 0.02)).collect();
            let bias: Vec<i32> = (0..g.out_channels()).map(|_| r.next() as i32 >> 20).collect();
            let (qi, qo) = (QParams { scale: 0.05, zero_point: r.i8() as i32 / 2 }, QParams { scale: 0.07, zero_point: r.i8() as i32 / 2 });
            for (lo, hi) in [(-128i8, 127i8), (-20, 90)] {
                let op = DeconvQs8::new(&g, qi, &w, &scales, Some(&bias), qo, lo, hi).unwrap();
                let want = reference::deconv_qs8(&g, qi, &x, &w, &scales, Some(&bias), qo, lo, hi);
                for par in [&Serial as &dyn Parallel, &FakePar] {
                    let mut y = vec![0i8; g.out_len()];
                    op.run(par, &x, &mut y).unwrap();
                    assert_eq!(y, want, "{g:?}");
                }
            }
        }
    }

    #[test]
    fn dynamic_gather_matches_scatter_bit_for_bit() {
        let mut r = Lcg(19);
        for g in [geom(2, (5, 4), 3, 2, 1, 1, 1, (1, 3, 4)), geom(1, (4, 4), 2, 2, 1, 0, 0, (2, 2, 3))] {
            let x: Vec<f32> = (0..g.in_len()).map(|_| r.f32(-2.0, 3.0)).collect();
            let w = r.i8s(g.out_channels() * g.kernel_h * g.kernel_w * g.group_in);
            let scales: Vec<f32> = (0..g.out_channels()).map(|_| r.f32(0.002, 0.02)).collect();
            let bias: Vec<f32> = (0..g.out_channels()).map(|_| r.f32(-1.0, 1.0)).collect();
            let op = DeconvQd8::new(&g, &w, &scales, Some(&bias)).unwrap();
            let want = reference::deconv_qd8(&g, &x, &w, &scales, Some(&bias), -1.0, 5.0);
            for par in [&Serial as &dyn Parallel, &FakePar] {
                let mut y = vec![f32::NAN; g.out_len()];
                op.run(par, &x, &mut y, -1.0, 5.0).unwrap();
                assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{g:?}");
            }
        }
        let g = geom(1, (4, 4), 2, 2, 1, 0, 0, (1, 2, 3));
        assert!(DeconvQd8::new(&g, &[0; 24], &[0.1; 2], None).is_err());
        assert!(DeconvQd8::new(&g, &[0; 24], &[0.1; 3], Some(&[0.0; 2])).is_err());
        let op = DeconvQd8::new(&g, &[0; 24], &[0.1; 3], None).unwrap();
        assert!(op.run(&Serial, &[0.0; 3], &mut [0.0; 192], f32::NEG_INFINITY, f32::INFINITY).is_err());
    }

    #[test]
    fn bad_arguments_are_errors() {
        let g = geom(1, (4, 4), 2, 2, 1, 0, 0, (1, 2, 3));
        let q = QParams { scale: 0.1, zero_point: 0 };
        assert!(DeconvQs8::new(&g, q, &[0; 5], &[0.1], None, q, -128, 127).is_err());
        assert!(DeconvQs8::new(&g, q, &[0; 24], &[0.1], Some(&[0; 2]), q, -128, 127).is_err());
        assert!(DeconvQs8::new(&Conv2dGeom { stride_h: 0, ..g }, q, &[0; 24], &[0.1], None, q, -128, 127).is_err());
        let op = DeconvQs8::new(&g, q, &[0; 24], &[0.1], None, q, -128, 127).unwrap();
        assert!(op.run(&Serial, &[0; 3], &mut [0; 192]).is_err());
    }
}
