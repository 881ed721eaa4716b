//! f32 convolution: pointwise (1×1) as one GEMM per image and group, k×k through im2col +
//! GEMM, channel-wise (depthwise) groups through [`super::depthwise`]. Transposed convolution,
//! other dtypes and layouts go to the portable reference.

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::ScalarType;

use super::depthwise;
use super::gemm::{par_sgemm, Mat};
use super::linalg::all_f32_contiguous;
use crate::portable::conv::{self as reference, conv_call, ConvGeom};

/// `convolution.out(input, weight, bias?, stride, padding, dilation, transposed,
/// output_padding, groups, *, out)`: args = [.., out(9), out].
pub fn convolution_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let call = conv_call(args)?;
    let bias_ok = match &call.bias {
        None => true,
        Some(b) => b.dtype == ScalarType::Float,
    };
    if call.geom.transposed || !bias_ok || !all_f32_contiguous(args, &[0, 1, 9])? {
        return reference::convolution_out(ctx, args);
    }
    let g = call.geom;
    let x = call.input.data::<f32>()?;
    let w = call.weight.data::<f32>()?;
    let bias = call.bias.as_ref().map(|b| b.data::<f32>()).transpose()?;
    let mut out = args.out(9)?;
    out.resize(&g.out_sizes())?;
    let o = out.data_mut::<f32>()?;
    if o.is_empty() {
        return Ok(());
    }
    if g.cig() == 1 && g.groups > 1 {
        depthwise::conv(ctx.threads, &g, x, w, bias, o)
    } else {
        gemm_conv(ctx.threads, &g, x, w, bias, o)
    }
}

/// Each (image, group): `out[cog, OH·OW] = W[cog, cig·KH·KW] × cols[cig·KH·KW, OH·OW]`, where
/// `cols` is the input itself for a stride-1 unpadded 1×1 kernel, else its im2col expansion.
fn gemm_conv(threads: usize, g: &ConvGeom, x: &[f32], w: &[f32], bias: Option<&[f32]>, o: &mut [f32]) -> KernelResult {
    let ([ih, iw], [kh, kw], [oh, ow]) = (g.in_hw, g.kernel, g.out_hw);
    let (cig, cog, ohw) = (g.cig(), g.cog(), oh * ow);
    let kk = cig * kh * kw;
    let pointwise = kh == 1 && kw == 1 && g.stride == [1, 1] && g.padding == [0, 0];
    let mut cols: Vec<f32> = if pointwise { Vec::new() } else { vec![0.0; kk * ohw] };
    for b in 0..g.batch {
        for grp in 0..g.groups {
            let xg = &x[(b * g.c_in + grp * cig) * ih * iw..][..cig * ih * iw];
            let og = &mut o[(b * g.c_out + grp * cog) * ohw..][..cog * ohw];
            let rhs = if pointwise {
                Mat::row_major(xg, cig, ohw)
            } else {
                im2col(g, xg, &mut cols);
                Mat::row_major(&cols, kk, ohw)
            };
            // Bias goes in as C's initial value (beta = 1); without one C is just overwritten.
            let beta = match bias {
                Some(bv) => {
                    for (row, &bc) in og.chunks_mut(ohw).zip(&bv[grp * cog..][..cog]) {
                        row.fill(bc);
                    }
                    1.0
                }
                None => 0.0,
            };
            par_sgemm(threads, 1.0, Mat::row_major(&w[grp * cog * kk..], cog, kk), rhs, beta, og)?;
        }
    }
    Ok(())
}

/// Output positions `o` in `0..n` with `0 <= o*stride + offset < len`, as `lo..hi`.
#[inline]
pub(crate) fn valid_range(n: usize, stride: usize, offset: isize, len: usize) -> (usize, usize) {
    let s = stride as isize;
    let lo = if offset >= 0 { 0 } else { ((-offset + s - 1) / s) as usize };
    let room = len as isize - offset; // o*stride must stay below this
    let hi = if room <= 0 { 0 } else { (((room - 1) / s) as usize + 1).min(n) };
    (lo.min(hi), hi)
}

/// Writes `dst[j] = src[j*stride + offset]` where that index is inside `src`, 0 elsewhere.
#[inline]
pub(crate) fn gather_row(dst: &mut [f32], src: &[f32], stride: usize, offset: isize) {
    let (lo, hi) = valid_range(dst.len(), stride, offset, src.len());
    dst[..lo].fill(0.0);
    dst[hi..].fill(0.0);
    if lo < hi {
        let start = (lo as isize * stride as isize + offset) as usize;
        if stride == 1 {
            dst[lo..hi].copy_from_slice(&src[start..start + (hi - lo)]);
        } else if stride == 2 {
            // Pairwise (vectorizable) except possibly a last element without its pair.
            let (s, n) = (&src[start..], hi - lo);
            let paired = n.min(s.len() / 2);
            for (d, pair) in dst[lo..lo + paired].iter_mut().zip(s.chunks_exact(2)) {
                *d = pair[0];
            }
            if paired < n {
                dst[lo + paired] = s[2 * paired];
            }
        } else {
            // A plain indexed loop: `step_by` iterators compile to a call per element here.
            for (j, d) in dst[lo..hi].iter_mut().enumerate() {
                *d = src[start + j * stride];
            }
        }
    }
}

/// `cols[(ci·KH + ky)·KW + kx, oy·OW + ox] = x[ci, oy·sh + ky·dh - ph, ox·sw + kx·dw - pw]`
/// (0 in the padding), for one group's `cig` input planes.
fn im2col(g: &ConvGeom, x: &[f32], cols: &mut [f32]) {
    let ([ih, iw], [kh, kw], [oh, ow]) = (g.in_hw, g.kernel, g.out_hw);
    let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.padding, g.dilation);
    let ohw = oh * ow;
    for (row, dst) in cols.chunks_mut(ohw).enumerate() {
        let (ci, ky, kx) = (row / (kh * kw), (row / kw) % kh, row % kw);
        let plane = &x[ci * ih * iw..][..ih * iw];
        let (y0, y1) = valid_range(oh, sh, (ky * dh) as isize - ph as isize, ih);
        let x_off = (kx * dw) as isize - pw as isize;
        for (oy, drow) in dst.chunks_mut(ow).enumerate() {
            if oy < y0 || oy >= y1 {
                drow.fill(0.0);
            } else {
                let iy = oy * sh + ky * dh - ph;
                gather_row(drow, &plane[iy * iw..][..iw], sw, x_off);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::vec::Vec;

    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::kernel::KernelFn;
    use rbuild_runtime::ScalarType;

    use super::super::test_util::{assert_close, Lcg};
    use crate::portable::conv as reference;

    /// One convolution case in 2-D (or 1-D when `one_d`) form.
    #[derive(Clone, Copy, Debug)]
    struct Case {
        n: usize,
        c_in: usize,
        c_out: usize,
        groups: usize,
        hw: [usize; 2],
        k: [usize; 2],
        stride: usize,
        pad: usize,
        dil: usize,
        bias: bool,
        one_d: bool,
    }

    impl Case {
        fn out_hw(&self) -> [usize; 2] {
            let f = |i: usize, k: usize| (i + 2 * self.pad - self.dil * (k - 1) - 1) / self.stride + 1;
            if self.one_d {
                [1, f(self.hw[1], self.k[1])]
            } else {
                [f(self.hw[0], self.k[0]), f(self.hw[1], self.k[1])]
            }
        }
        fn valid(&self) -> bool {
            let fits = |i: usize, k: usize| i + 2 * self.pad > self.dil * (k - 1);
            fits(self.hw[1], self.k[1]) && (self.one_d || fits(self.hw[0], self.k[0]))
        }
        fn sp(&self, v: &[usize]) -> Vec<usize> {
            if self.one_d {
                v[1..].to_vec()
            } else {
                v.to_vec()
            }
        }
    }

    fn run(c: Case, kernel: KernelFn, threads: usize) -> Vec<f32> {
        let mut h = OpHarness::new();
        h.ctx.threads = threads;
        let mut r = Lcg::new((c.c_in * 131 + c.c_out * 17 + c.hw[1] * 7 + c.k[1]) as u64);
        let mut xs = alloc::vec![c.n, c.c_in];
        xs.extend(c.sp(&c.hw));
        let mut ws = alloc::vec![c.c_out, c.c_in / c.groups];
        ws.extend(c.sp(&c.k));
        let mut os = alloc::vec![c.n, c.c_out];
        os.extend(c.sp(&c.out_hw()));
        let x = h.f32(&xs, &r.vec(xs.iter().product()));
        let w = h.f32(&ws, &r.vec(ws.iter().product()));
        let b = if c.bias { h.f32(&[c.c_out], &r.vec(c.c_out)) } else { h.none() };
        let nsp = if c.one_d { 1 } else { 2 };
        let s = h.int_list(&alloc::vec![c.stride as i64; nsp]);
        let p = h.int_list(&alloc::vec![c.pad as i64; nsp]);
        let d = h.int_list(&alloc::vec![c.dil as i64; nsp]);
        let t = h.bool(false);
        let op = h.int_list(&alloc::vec![0; nsp]);
        let g = h.int(c.groups as i64);
        let out = h.out(ScalarType::Float, &os);
        h.call(kernel, &[x, w, b, s, p, d, t, op, g, out, out]).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        h.read::<f32>(out)
    }

    fn check(c: Case) {
        let want = run(c, reference::convolution_out, 1);
        let got = run(c, super::convolution_out, 1);
        assert_close(&got, &want, 1e-4, &format!("{c:?}"));
        let got2 = run(c, super::convolution_out, 2);
        assert_eq!(got, got2, "threads=2 differs from threads=1 for {c:?}");
    }

    #[test]
    fn conv2d_matches_reference_over_shapes() {
        let mut count = 0;
        for &(c_in, c_out, groups) in &[(3, 8, 1), (4, 6, 2), (6, 6, 3), (1, 5, 1), (8, 4, 1)] {
            for &k in &[1, 3, 5, 7] {
                for &stride in &[1, 2] {
                    for &pad in &[0, 1, 2] {
                        for &dil in &[1, 2] {
                            for &(n, hw, bias) in &[(1, [9, 11], true), (2, [7, 6], false)] {
                                let c = Case { n, c_in, c_out, groups, hw, k: [k, k], stride, pad, dil, bias, one_d: false };
                                if c.valid() {
                                    check(c);
                                    count += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(count > 300, "{count}");
    }

    #[test]
    fn depthwise_matches_reference_over_shapes() {
        for &(c_in, mult) in &[(6, 1), (5, 2), (1, 3), (16, 1)] {
            for &k in &[1, 3, 5] {
                for &stride in &[1, 2, 3] {
                    for &pad in &[0, 1, 2] {
                        for &dil in &[1, 2] {
                            for &(n, hw, bias) in &[(1, [13, 17], true), (2, [6, 5], false), (1, [1, 9], true)] {
                                let c = Case {
                                    n,
                                    c_in,
                                    c_out: c_in * mult,
                                    groups: c_in,
                                    hw,
                                    k: [k, k],
                                    stride,
                                    pad,
                                    dil,
                                    bias,
                                    one_d: false,
                                };
                                if c.valid() {
                                    check(c);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn rectangular_kernels_and_1d() {
        let base = Case {
            n: 2,
            c_in: 4,
            c_out: 6,
            groups: 1,
            hw: [6, 9],
            k: [1, 3],
            stride: 1,
            pad: 1,
            dil: 1,
            bias: true,
            one_d: false,
        };
        check(base);
        check(Case { k: [3, 1], ..base });
        check(Case { k: [2, 4], stride: 2, ..base });
        for &(c_in, c_out, groups) in &[(8, 12, 1), (4, 4, 4), (6, 4, 2)] {
            for &(k, stride, pad, dil) in &[(3, 2, 1, 1), (1, 1, 0, 1), (5, 1, 2, 2), (3, 3, 0, 1)] {
                check(Case { c_in, c_out, groups, hw: [1, 20], k: [1, k], stride, pad, dil, one_d: true, ..base });
            }
        }
    }

    #[test]
    fn mobilenet_like_layers_match() {
        let base = Case {
            n: 1,
            c_in: 3,
            c_out: 32,
            groups: 1,
            hw: [32, 32],
            k: [3, 3],
            stride: 2,
            pad: 1,
            dil: 1,
            bias: true,
            one_d: false,
        };
        check(base); // stem
        check(Case { hw: [64, 64], ..base }); // stem, large enough to split over threads
        check(Case { c_in: 144, c_out: 144, groups: 144, stride: 1, hw: [28, 28], ..base }); // dw, threaded
        check(Case { c_in: 32, c_out: 32, groups: 32, stride: 1, hw: [16, 16], ..base }); // dw s1
        check(Case { c_in: 96, c_out: 96, groups: 96, stride: 2, hw: [16, 16], bias: false, ..base }); // dw s2
        check(Case { c_in: 96, c_out: 24, k: [1, 1], stride: 1, pad: 0, hw: [14, 14], ..base }); // project
        check(Case { c_in: 24, c_out: 144, k: [1, 1], stride: 1, pad: 0, hw: [14, 14], n: 2, ..base }); // expand
    }

    #[test]
    fn transposed_and_other_dtypes_fall_back() {
        let mut h = OpHarness::new();
        let x = h.f32(&[1, 1, 2], &[1., 10.]);
        let w = h.f32(&[1, 1, 3], &[1., 2., 3.]);
        let b = h.none();
        let (s, p, d) = (h.int_list(&[2]), h.int_list(&[1]), h.int_list(&[1]));
        let (t, op, g) = (h.bool(true), h.int_list(&[1]), h.int(1));
        let out = h.out(ScalarType::Float, &[1, 1, 4]);
        h.call(super::convolution_out, &[x, w, b, s, p, d, t, op, g, out, out]).unwrap();
        assert_eq!(h.read::<f32>(out), alloc::vec![2., 13., 20., 30.]);

        let x = h.tensor::<f64>(ScalarType::Double, &[1, 1, 3], &[1., 2., 3.]);
        let w = h.tensor::<f64>(ScalarType::Double, &[1, 1, 2], &[1., -1.]);
        let (s, p) = (h.int_list(&[1]), h.int_list(&[0]));
        let t = h.bool(false);
        let out = h.out(ScalarType::Double, &[1, 1, 2]);
        h.call(super::convolution_out, &[x, w, b, s, p, d, t, op, g, out, out]).unwrap();
        assert_eq!(h.read::<f64>(out), alloc::vec![-1., -1.]);
    }

    #[test]
    fn valid_range_edges() {
        use super::valid_range;
        assert_eq!(valid_range(5, 1, -1, 5), (1, 5));
        assert_eq!(valid_range(5, 1, 1, 5), (0, 4));
        assert_eq!(valid_range(3, 2, -1, 5), (1, 3));
        assert_eq!(valid_range(4, 2, 0, 7), (0, 4));
        assert_eq!(valid_range(4, 3, 9, 5), (0, 0));
        assert_eq!(valid_range(2, 1, -5, 3), (2, 2));
    }
}
