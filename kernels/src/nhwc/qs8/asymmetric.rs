//! 8-bit convolutions whose weights have a zero point: XNNPACK's `qu8` convolution, depthwise
//! convolution, transposed convolution and fully connected operators (quint8 activations and
//! weights, qint32 bias). quint8 values are held shifted into int8 here (value and zero point −
//! 128), which leaves every `(q − zero_point)` unchanged, so these are the qs8 formulas with a
//! weight zero point: `acc = bias + Σ (x − x_zp)·(w − w_zp)` (wrapping int32, padding taps
//! adding 0), requantized with the per-tensor scale `x_scale · w_scale / y_scale` by the fp32
//! rule ([`super::requantize`]).
//!
//! [`ConvQu8`] gathers each output pixel's taps centred on the zero points as i16 and takes
//! dot products with the centred weight rows (parallel over output rows); a depthwise
//! convolution is the grouped case and a fully connected layer the 1×1 case. The plain twin
//! [`reference::conv_qu8`] sums in nested loops; the tests compare the two bit for bit.

use super::{channel_scales, requantize, OutParams, QParams};
use crate::nhwc::{Conv2dGeom, Parallel};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// A convolution (or transposed convolution) with zero-point weights.
#[derive(Clone, Debug)]
pub struct ConvQu8 {
    geom: Conv2dGeom,
    transposed: bool,
    input_zp: i32,
    /// `[out_channels, kh, kw, group_in]`, each `w − w_zp`.
    filter: Vec<i16>,
    bias: Vec<i32>,
    scale: f32,
    out: OutParams,
}

/// The input coordinate tap `t` of output coordinate `o` reads, if any: `o·s + t·d − pad` for a
/// convolution; for a transposed one, the `i` with `i·s + t·d − pad = o`.
#[inline]
fn source(transposed: bool, o: usize, t: usize, stride: usize, dilation: usize, pad: usize, size: usize) -> Option<usize> {
    if transposed {
        let p = (o + pad).checked_sub(t * dilation)?;
        (p % stride == 0 && p / stride < size).then_some(p / stride)
    } else {
        let p = (o * stride + t * dilation).checked_sub(pad)?;
        (p < size).then_some(p)
    }
}

impl ConvQu8 {
    /// `filter` `[groups·group_out, kh, kw, group_in]` int8-form values with zero point
    /// `filter_zp` (in the same form) and one scale; `transposed`: `g` describes a transposed
    /// convolution (output position `i·stride + t·dilation − pad`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(g: &Conv2dGeom, transposed: bool, input: QParams, filter: &[i8], filter_q: QParams, bias: Option<&[i32]>, output: QParams, out_min: i8, out_max: i8) -> Result<Self, String> {
        let nonzero = [g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.groups, g.group_in, g.group_out];
        if nonzero.contains(&0) {
            return Err(format!("convolution geometry has a zero size ({g:?})"));
        }
        let co = g.out_channels();
        let k = g.kernel_h * g.kernel_w * g.group_in;
        if filter.len() != co * k {
            return Err(format!("filter has {} values, expected {}", filter.len(), co * k));
        }
        if bias.is_some_and(|b| b.len() != co) {
            return Err(format!("bias for {co} output channels expected"));
        }
        filter_q.check("filter")?;
        let scale = channel_scales(1, input, &[filter_q.scale], output)?[0];
        let out = OutParams::new(output, out_min, out_max)?;
        let filter = filter.iter().map(|&w| (w as i32 - filter_q.zero_point) as i16).collect();
        Ok(ConvQu8 { geom: *g, transposed, input_zp: input.zero_point, filter, bias: bias.map_or_else(|| vec![0; co], <[i32]>::to_vec), scale, out })
    }

    pub fn geom(&self) -> &Conv2dGeom {
        &self.geom
    }

    pub fn run(&self, par: &dyn Parallel, x: &[i8], y: &mut [i8]) -> Result<(), String> {
        self.geom.for_each_output_row(par, x, y, &|_, image, oy, out| self.row(image, oy, out))
    }

    /// Output row `oy` of one image.
    fn row(&self, x: &[i8], oy: usize, out: &mut [i8]) {
        let g = &self.geom;
        let (ci, co, gi) = (g.in_channels(), g.out_channels(), g.group_in);
        let k = g.kernel_h * g.kernel_w * gi;
        let mut patch = vec![0i16; k];
        for (ox, pixel) in out.chunks_exact_mut(co).enumerate() {
            for grp in 0..g.groups {
                patch.fill(0);
                for ky in 0..g.kernel_h {
                    let Some(iy) = source(self.transposed, oy, ky, g.stride_h, g.dilation_h, g.pad_top, g.in_h) else { continue };
                    for kx in 0..g.kernel_w {
                        let Some(ix) = source(self.transposed, ox, kx, g.stride_w, g.dilation_w, g.pad_left, g.in_w) else { continue };
                        let src = &x[(iy * g.in_w + ix) * ci + grp * gi..][..gi];
                        for (d, &v) in patch[(ky * g.kernel_w + kx) * gi..][..gi].iter_mut().zip(src) {
                            *d = (v as i32 - self.input_zp) as i16;
                        }
                    }
                }
                for oc in grp * g.group_out..(grp + 1) * g.group_out {
                    let w = &self.filter[oc * k..(oc + 1) * k];
                    let acc = patch.iter().zip(w).fold(self.bias[oc], |s, (&a, &b)| s.wrapping_add(a as i32 * b as i32));
                    pixel[oc] = requantize(acc, self.scale, &self.out);
                }
            }
        }
    }
}

/// The plain twin.
pub mod reference {
    use super::super::reference::requantize_ref;
    use super::super::{OutParams, QParams};
    use crate::nhwc::Conv2dGeom;
    use alloc::vec::Vec;

    /// `filter` as given to [`super::ConvQu8::new`]; scatters every input pixel for a
    /// transposed convolution, gathers otherwise.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_qu8(g: &Conv2dGeom, transposed: bool, input: QParams, x: &[i8], filter: &[i8], filter_q: QParams, bias: Option<&[i32]>, output: QParams, out_min: i8, out_max: i8) -> Vec<i8> {
        let o = OutParams::new(output, out_min, out_max).unwrap();
        let (ci, co) = (g.in_channels(), g.out_channels());
        let mut acc: Vec<i32> = (0..g.out_len()).map(|i| bias.map_or(0, |b| b[i % co])).collect();
        let w_at = |oc: usize, ky: usize, kx: usize, i: usize| filter[((oc * g.kernel_h + ky) * g.kernel_w + kx) * g.group_in + i] as i32 - filter_q.zero_point;
        for n in 0..g.batch {
            for iy in 0..g.in_h {
                for ix in 0..g.in_w {
                    for ky in 0..g.kernel_h {
                        for kx in 0..g.kernel_w {
                            // The output this input pixel reaches through tap (ky, kx), if any.
                            let reach = |i: usize, t: usize, s: usize, d: usize, pad: usize, size: usize| -> Option<usize> {
                                if transposed {
                                    (i * s + t * d).checked_sub(pad).filter(|&v| v < size)
                                } else {
                                    let p = (i + pad).checked_sub(t * d)?;
                                    (p % s == 0 && p / s < size).then_some(p / s)
                                }
                            };
                            let (Some(oy), Some(ox)) = (reach(iy, ky, g.stride_h, g.dilation_h, g.pad_top, g.out_h), reach(ix, kx, g.stride_w, g.dilation_w, g.pad_left, g.out_w)) else { continue };
                            for oc in 0..co {
                                let grp = oc / g.group_out;
                                for i in 0..g.group_in {
                                    let xv = x[((n * g.in_h + iy) * g.in_w + ix) * ci + grp * g.group_in + i] as i32 - input.zero_point;
                                    let a = &mut acc[((n * g.out_h + oy) * g.out_w + ox) * co + oc];
                                    *a = a.wrapping_add(xv * w_at(oc, ky, kx, i));
                                }
                            }
                        }
                    }
                }
            }
        }
        let scale = input.scale * filter_q.scale / output.scale;
        acc.iter().map(|&a| requantize_ref(a, scale, &o)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nhwc::qs8::test_util::{FakePar, Lcg};
    use crate::nhwc::Serial;

    #[test]
    fn gather_matches_the_reference_bit_for_bit() {
        let mut r = Lcg(29);
        // (transposed, batch, h, w, k, stride, pad, dilation, groups, group_in, group_out)
        for &(tr, n, h, w, k, s, p, d, groups, gi, go) in &[
            (false, 1usize, 6usize, 5usize, 3usize, 1usize, 1usize, 1usize, 1usize, 3usize, 4usize),
            (false, 2, 7, 7, 3, 2, 1, 1, 5, 1, 2),
            (false, 1, 5, 5, 3, 1, 2, 2, 2, 2, 3),
            (false, 3, 1, 1, 1, 1, 0, 1, 1, 16, 5),
            (true, 1, 4, 3, 3, 2, 1, 1, 1, 3, 2),
            (true, 2, 3, 3, 2, 2, 0, 1, 2, 2, 2),
        ] {
            let (oh, ow) = if tr { ((h - 1) * s + d * (k - 1) + 1 - 2 * p, (w - 1) * s + d * (k - 1) + 1 - 2 * p) } else { ((h + 2 * p - d * (k - 1) - 1) / s + 1, (w + 2 * p - d * (k - 1) - 1) / s + 1) };
            let g = Conv2dGeom { batch: n, in_h: h, in_w: w, out_h: oh, out_w: ow, kernel_h: k, kernel_w: k, stride_h: s, stride_w: s, dilation_h: d, dilation_w: d, pad_top: p, pad_left: p, groups, group_in: gi, group_out: go };
            let x = r.i8s(g.in_len());
            let filter = r.i8s(g.out_channels() * k * k * gi);
            let bias: Vec<i32> = (0..g.out_channels()).map(|_| r.next() as i32 >> 20).collect();
            let (qi, qw, qo) = (QParams { scale: 0.04, zero_point: r.i8() as i32 / 2 }, QParams { scale: 0.01, zero_point: r.i8() as i32 }, QParams { scale: 0.3, zero_point: r.i8() as i32 / 2 });
            let op = ConvQu8::new(&g, tr, qi, &filter, qw, Some(&bias), qo, -100, 120).unwrap();
            let want = reference::conv_qu8(&g, tr, qi, &x, &filter, qw, Some(&bias), qo, -100, 120);
            for par in [&Serial as &dyn Parallel, &FakePar] {
                let mut y = vec![0i8; g.out_len()];
                op.run(par, &x, &mut y).unwrap();
                assert_eq!(y, want, "{g:?} transposed {tr}");
            }
            assert!(want.iter().any(|&v| v != want[0]), "a constant output tests nothing");
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        let g = Conv2dGeom { batch: 1, in_h: 3, in_w: 3, out_h: 1, out_w: 1, kernel_h: 3, kernel_w: 3, stride_h: 1, stride_w: 1, dilation_h: 1, dilation_w: 1, pad_top: 0, pad_left: 0, groups: 1, group_in: 2, group_out: 2 };
        let q = QParams { scale: 0.1, zero_point: 0 };
        assert!(ConvQu8::new(&g, false, q, &[0; 35], q, None, q, -128, 127).is_err());
        assert!(ConvQu8::new(&g, false, q, &[0; 36], q, Some(&[0]), q, -128, 127).is_err());
        assert!(ConvQu8::new(&g, false, q, &[0; 36], QParams { scale: 0.0, zero_point: 0 }, None, q, -128, 127).is_err());
        let op = ConvQu8::new(&g, false, q, &[0; 36], q, None, q, -128, 127).unwrap();
        assert!(op.run(&Serial, &[0; 17], &mut [0; 2]).is_err());
    }
}
