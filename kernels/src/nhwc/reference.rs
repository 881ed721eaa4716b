//! Plain, obviously-correct f32 NHWC twins of the fast kernels (the tests' oracles).
//!
//! Each accumulates in f32 in the natural order: bias first, then the taps/reduction in index
//! order; the result is clamped to `[min, max]`. Sizes are assumed valid (callers are tests).

use super::Conv2dGeom;
use alloc::vec;
use alloc::vec::Vec;

/// Input row/column of tap `t` for output position `o`, or `None` in the padding.
fn src(o: usize, t: usize, stride: usize, dil: usize, pad: usize, size: usize) -> Option<usize> {
    let p = (o * stride + t * dil).checked_sub(pad)?;
    (p < size).then_some(p)
}

/// 2-D convolution, NHWC. `filter` is `[groups·group_out, kernel_h, kernel_w, group_in]`,
/// `bias` `[groups·group_out]`.
pub fn conv2d_f32(
    g: &Conv2dGeom,
    x: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    min: f32,
    max: f32,
) -> Vec<f32> {
    let (ci, co) = (g.in_channels(), g.out_channels());
    let mut y = vec![0.0; g.out_len()];
    for b in 0..g.batch {
        for oy in 0..g.out_h {
            for ox in 0..g.out_w {
                for gr in 0..g.groups {
                    for o in 0..g.group_out {
                        let oc = gr * g.group_out + o;
                        let mut acc = bias.map_or(0.0, |bi| bi[oc]);
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
                                    let xv = x[((b * g.in_h + iy) * g.in_w + ix) * ci + gr * g.group_in + i];
                                    let wv = filter[((oc * g.kernel_h + ky) * g.kernel_w + kx) * g.group_in + i];
                                    acc += xv * wv;
                                }
                            }
                        }
                        y[((b * g.out_h + oy) * g.out_w + ox) * co + oc] = acc.max(min).min(max);
                    }
                }
            }
        }
    }
    y
}

/// Depthwise convolution, NHWC: `g.group_in == 1`, `g.groups` = input channels `C`,
/// `g.group_out` = multiplier `M`. `filter` is `[kernel_h, kernel_w, C·M]`; output channel
/// `c·M + m` reads input channel `c`.
pub fn depthwise_f32(
    g: &Conv2dGeom,
    x: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    min: f32,
    max: f32,
) -> Vec<f32> {
    let (c, m) = (g.groups, g.group_out);
    let co = c * m;
    let mut y = vec![0.0; g.out_len()];
    for b in 0..g.batch {
        for oy in 0..g.out_h {
            for ox in 0..g.out_w {
                for oc in 0..co {
                    let ic = oc / m;
                    let mut acc = bias.map_or(0.0, |bi| bi[oc]);
                    for ky in 0..g.kernel_h {
                        let Some(iy) = src(oy, ky, g.stride_h, g.dilation_h, g.pad_top, g.in_h) else {
                            continue;
                        };
                        for kx in 0..g.kernel_w {
                            let Some(ix) = src(ox, kx, g.stride_w, g.dilation_w, g.pad_left, g.in_w) else {
                                continue;
                            };
                            let xv = x[((b * g.in_h + iy) * g.in_w + ix) * c + ic];
                            acc += xv * filter[(ky * g.kernel_w + kx) * co + oc];
                        }
                    }
                    y[((b * g.out_h + oy) * g.out_w + ox) * co + oc] = acc.max(min).min(max);
                }
            }
        }
    }
    y
}

/// Fully connected: `y[m, n] = clamp(x[m, k] · filterᵀ + bias)`, `filter` `[n, k]`.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_f32(
    m: usize,
    n: usize,
    k: usize,
    x: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    min: f32,
    max: f32,
) -> Vec<f32> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = bias.map_or(0.0, |b| b[j]);
            for kk in 0..k {
                acc += x[i * k + kk] * filter[j * k + kk];
            }
            y[i * n + j] = acc.max(min).min(max);
        }
    }
    y
}
