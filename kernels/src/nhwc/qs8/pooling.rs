//! int8 max pooling, NHWC (XNNPACK's `s8-maxpool`: input and output share one quantization, so
//! the result is the largest input value of the window, clamped to the node's output bounds).
//! Padding never wins: windows take their valid taps only.

use crate::nhwc::{window_taps, Conv2dGeom};
use alloc::format;
use alloc::string::String;

/// `g`: `groups` = channels, kernel = window, stride, dilation, top/left padding.
pub fn max_pool_qs8(g: &Conv2dGeom, x: &[i8], y: &mut [i8], lo: i8, hi: i8) -> Result<(), String> {
    let c = g.groups;
    if x.len() != g.batch * g.in_h * g.in_w * c || y.len() != g.batch * g.out_h * g.out_w * c {
        return Err(format!("max pooling: {} inputs / {} outputs do not fit {g:?}", x.len(), y.len()));
    }
    if lo > hi {
        return Err(format!("max pooling: output bounds [{lo}, {hi}] are empty"));
    }
    if c == 0 {
        return Ok(());
    }
    for (p, out) in y.chunks_exact_mut(c).enumerate() {
        let (n, oy, ox) = (p / (g.out_h * g.out_w), p / g.out_w % g.out_h, p % g.out_w);
        out.fill(i8::MIN);
        for ky in window_taps(oy, g.stride_h, g.dilation_h, g.pad_top, g.in_h, g.kernel_h) {
            let iy = oy * g.stride_h + ky * g.dilation_h - g.pad_top;
            for kx in window_taps(ox, g.stride_w, g.dilation_w, g.pad_left, g.in_w, g.kernel_w) {
                let ix = ox * g.stride_w + kx * g.dilation_w - g.pad_left;
                let row = &x[((n * g.in_h + iy) * g.in_w + ix) * c..][..c];
                for (o, &v) in out.iter_mut().zip(row) {
                    *o = (*o).max(v);
                }
            }
        }
        for o in out.iter_mut() {
            *o = (*o).clamp(lo, hi);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nhwc::qs8::test_util::Lcg;

    #[test]
    fn equals_float_max_pooling_of_the_values() {
        let mut r = Lcg(3);
        for &(h, w, c, k, s, p, d) in &[(12usize, 12usize, 4usize, 2usize, 2usize, 0usize, 1usize), (9, 7, 3, 3, 1, 1, 1), (10, 10, 5, 3, 2, 1, 2), (5, 6, 1, 5, 1, 2, 1)] {
            let out = |i: usize| (i + 2 * p - d * (k - 1) - 1) / s + 1;
            let g = Conv2dGeom { batch: 2, in_h: h, in_w: w, out_h: out(h), out_w: out(w), kernel_h: k, kernel_w: k, stride_h: s, stride_w: s, dilation_h: d, dilation_w: d, pad_top: p, pad_left: p, groups: c, group_in: 1, group_out: 1 };
            let x = r.i8s(2 * h * w * c);
            let mut y = vec![0i8; 2 * g.out_h * g.out_w * c];
            max_pool_qs8(&g, &x, &mut y, -100, 90).unwrap();
            let xf: alloc::vec::Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let mut yf = vec![0.0f32; y.len()];
            crate::xnnpack::ops::pool_f32(true, &g, &xf, &mut yf, -100.0, 90.0);
            assert!(y.iter().zip(&yf).all(|(&a, &b)| a as f32 == b), "{g:?}");
        }
    }

    #[test]
    fn bad_lengths_are_errors() {
        let g = Conv2dGeom { batch: 1, in_h: 2, in_w: 2, out_h: 1, out_w: 1, kernel_h: 2, kernel_w: 2, stride_h: 2, stride_w: 2, dilation_h: 1, dilation_w: 1, pad_top: 0, pad_left: 0, groups: 3, group_in: 1, group_out: 1 };
        assert!(max_pool_qs8(&g, &[0; 11], &mut [0; 3], -128, 127).is_err());
        assert!(max_pool_qs8(&g, &[0; 12], &mut [0; 2], -128, 127).is_err());
    }
}
