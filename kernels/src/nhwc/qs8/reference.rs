//! Plain scalar int8 twins of the fast kernels (the tests' oracles).
//!
//! Each accumulates `bias + Σ (x − input_zp)·w` in (wrapping) int32 in the natural order,
//! with padding taps skipped, and requantizes with XNNPACK's fp32 rule written the way the
//! AVX2 kernels do it (`min` against `max − zp`, round half to even with `rintf`, add the zero
//! point with saturation, clamp). Sizes are assumed valid (callers are tests and checked ops).

use super::{OutParams, QParams};
use crate::nhwc::Conv2dGeom;
use alloc::vec;
use alloc::vec::Vec;

/// XNNPACK's fp32 requantization (AVX2 formulation).
pub(crate) fn requantize_ref(acc: i32, scale: f32, o: &OutParams) -> i8 {
    let f = (acc as f32 * scale).min(o.fmax);
    let r = libm::rintf(f) as i32; // saturating cast, like cvtps2dq's out-of-range → i32::MIN
    (r.saturating_add(o.zp)).clamp(o.min as i32, o.max as i32) as i8
}

fn src(o: usize, t: usize, stride: usize, dil: usize, pad: usize, size: usize) -> Option<usize> {
    let p = (o * stride + t * dil).checked_sub(pad)?;
    (p < size).then_some(p)
}

fn scale_of(input: QParams, fs: &[f32], c: usize, output: QParams) -> f32 {
    input.scale * fs[if fs.len() == 1 { 0 } else { c }] / output.scale
}

/// 2-D convolution, NHWC; `filter` is `[groups·group_out, kh, kw, group_in]`.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_qs8(
    g: &Conv2dGeom,
    input: QParams,
    x: &[i8],
    filter: &[i8],
    filter_scales: &[f32],
    bias: Option<&[i32]>,
    output: QParams,
    out_min: i8,
    out_max: i8,
) -> Vec<i8> {
    let o = OutParams::new(output, out_min, out_max).unwrap();
    let (ci, co) = (g.in_channels(), g.out_channels());
    let mut y = vec![0i8; g.out_len()];
    for b in 0..g.batch {
        for oy in 0..g.out_h {
            for ox in 0..g.out_w {
                for gr in 0..g.groups {
                    for oo in 0..g.group_out {
                        let oc = gr * g.group_out + oo;
                        let mut acc = bias.map_or(0, |bi| bi[oc]);
                        for ky in 0..g.kernel_h {
                            let Some(iy) = src(oy, ky, g.stride_h, g.dilation_h, g.pad_top, g.in_h) else {
                                continue;
                            };
                            for kx in 0..g.kernel_w {
                                let Some(ix) = src(ox, kx, g.stride_w, g.dilation_w, g.pad_left, g.in_w)
                                else {
                                    continue;
                                };
                                for i in 0..g.group_in {
                                    let xv = x[((b * g.in_h + iy) * g.in_w + ix) * ci + gr * g.group_in + i] as i32;
                                    let wv = filter[((oc * g.kernel_h + ky) * g.kernel_w + kx) * g.group_in + i] as i32;
                                    acc = acc.wrapping_add((xv - input.zero_point) * wv);
                                }
                            }
                        }
                        y[((b * g.out_h + oy) * g.out_w + ox) * co + oc] =
                            requantize_ref(acc, scale_of(input, filter_scales, oc, output), &o);
                    }
                }
            }
        }
    }
    y
}

/// Depthwise convolution, NHWC: `filter` `[kh, kw, C·M]`, output channel `c·M + m` reads input
/// channel `c` (`g.groups` = C, `g.group_in` = 1, `g.group_out` = M).
#[allow(clippy::too_many_arguments)]
pub fn depthwise_qs8(
    g: &Conv2dGeom,
    input: QParams,
    x: &[i8],
    filter: &[i8],
    filter_scales: &[f32],
    bias: Option<&[i32]>,
    output: QParams,
    out_min: i8,
    out_max: i8,
) -> Vec<i8> {
    let o = OutParams::new(output, out_min, out_max).unwrap();
    let (c_in, m) = (g.groups, g.group_out);
    let co = c_in * m;
    let mut y = vec![0i8; g.out_len()];
    for b in 0..g.batch {
        for oy in 0..g.out_h {
            for ox in 0..g.out_w {
                for oc in 0..co {
                    let c = oc / m;
                    let mut acc = bias.map_or(0, |bi| bi[oc]);
                    for ky in 0..g.kernel_h {
                        let Some(iy) = src(oy, ky, g.stride_h, g.dilation_h, g.pad_top, g.in_h) else {
                            continue;
                        };
                        for kx in 0..g.kernel_w {
                            let Some(ix) = src(ox, kx, g.stride_w, g.dilation_w, g.pad_left, g.in_w) else {
                                continue;
                            };
                            let xv = x[((b * g.in_h + iy) * g.in_w + ix) * c_in + c] as i32;
                            let wv = filter[(ky * g.kernel_w + kx) * co + oc] as i32;
                            acc = acc.wrapping_add((xv - input.zero_point) * wv);
                        }
                    }
                    y[((b * g.out_h + oy) * g.out_w + ox) * co + oc] =
                        requantize_ref(acc, scale_of(input, filter_scales, oc, output), &o);
                }
            }
        }
    }
    y
}

/// Fully connected: `x` `[m, k]`, `filter` `[n, k]`, `y` `[m, n]`.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_qs8(
    m: usize,
    n: usize,
    k: usize,
    input: QParams,
    x: &[i8],
    filter: &[i8],
    filter_scales: &[f32],
    bias: Option<&[i32]>,
    output: QParams,
    out_min: i8,
    out_max: i8,
) -> Vec<i8> {
    let o = OutParams::new(output, out_min, out_max).unwrap();
    let mut y = vec![0i8; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = bias.map_or(0, |b| b[j]);
            for kk in 0..k {
                acc = acc.wrapping_add((x[i * k + kk] as i32 - input.zero_point) * filter[j * k + kk] as i32);
            }
            y[i * n + j] = requantize_ref(acc, scale_of(input, filter_scales, j, output), &o);
        }
    }
    y
}
