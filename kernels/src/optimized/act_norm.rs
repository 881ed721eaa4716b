//! Exact (erf) GELU and layer norm over the last dim, f32, vectorized and split over the pool.
//! Everything else (tanh GELU, other dtypes or layouts, several normalized dims) and every
//! malformed call goes to the portable kernels, so registering these never changes what the ops
//! accept or the errors they give.

use core::sync::atomic::{AtomicU32, Ordering};

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::ScalarType;

use super::linalg::all_f32_contiguous;
use super::llm::pool;
use super::llm::simd::{self, Isa};
use crate::portable::{norm as pnorm, unary as punary};

/// Below this many elements one thread is faster than waking others.
const PAR_MIN_ELEMS: usize = 1 << 14;

// ---------------------------------------------------------------------------------------------
// GELU
// ---------------------------------------------------------------------------------------------

/// `gelu.out(Tensor self, *, str approximate="none", Tensor(a!) out)`: args = [self,
/// approximate, out, out].
pub fn gelu_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    if !matches!(args.string(1), Ok("none")) || !all_f32_contiguous(args, &[0, 2])? {
        return punary::gelu_out(ctx, args);
    }
    let x = args.tensor(0)?;
    let mut out = args.out(2)?;
    out.resize(x.sizes())?;
    gelu_with(simd::isa(), ctx.threads, x.data::<f32>()?, out.data_mut::<f32>()?);
    Ok(())
}

/// `0.5·x·(1 + erf(x/√2))` of `x` into `out` (same length), on up to `threads` threads.
pub(crate) fn gelu_with(isa: Isa, threads: usize, x: &[f32], out: &mut [f32]) {
    let threads = if x.len() < PAR_MIN_ELEMS { 1 } else { threads };
    pool::for_chunks(threads, out, 1, &|first, chunk| gelu_slice(isa, &x[first..first + chunk.len()], chunk));
}

/// The portable kernel's f32 formula (libm's erff).
fn gelu_scalar(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * core::f32::consts::FRAC_1_SQRT_2))
}

// erfc(z) = t·exp(−z² + C(t)), t = 1/(1 + z/2), z ≥ 0, with C the degree-9 Chebyshev-fitted
// polynomial of Numerical Recipes' `erfcc` (relative error < 1.2e-7 for every z ≥ 0). GELU
// needs 1 + erf(x/√2), which is erfc(|z|) for x < 0 and 2 − erfc(|z|) for x ≥ 0: both keep
// that relative accuracy (no cancellation near 0, none in the negative tail).
#[cfg(any(target_arch = "x86_64", all(target_arch = "aarch64", target_feature = "neon")))]
const C: [f32; 10] = [
    -1.265_512_2,
    1.000_023_7,
    0.374_091_96,
    0.096_784_18,
    -0.186_288_06,
    0.278_868_07,
    -1.135_203_98,
    1.488_515_87,
    -0.822_152_23,
    0.170_872_77,
];

fn gelu_slice(isa: Isa, x: &[f32], out: &mut [f32]) {
    // Without x86-64 or aarch64 SIMD nothing runs before the scalar tail.
    #[allow(unused_mut)]
    let mut i = 0;
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Isa::Avx2 means AVX2/FMA are present; the loop stays below min(len).
        Isa::Avx2 => i = unsafe { gelu_avx2(x, out) },
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        // SAFETY: NEON is present (target feature); the loop stays below min(len).
        Isa::Neon => i = unsafe { gelu_neon(x, out) },
        _ => {}
    }
    for (o, &v) in out[i..].iter_mut().zip(&x[i..]) {
        *o = gelu_scalar(v);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_avx2(x: &[f32], out: &mut [f32]) -> usize {
    use core::arch::x86_64::*;
    use super::llm::gemv::avx2::exp;
    let n = x.len().min(out.len());
    let (zero, one, two, half) = (_mm256_setzero_ps(), _mm256_set1_ps(1.0), _mm256_set1_ps(2.0), _mm256_set1_ps(0.5));
    let sign = _mm256_set1_ps(-0.0);
    let mut i = 0;
    while i + 8 <= n {
        let v = _mm256_loadu_ps(x.as_ptr().add(i));
        let z = _mm256_mul_ps(_mm256_andnot_ps(sign, v), _mm256_set1_ps(core::f32::consts::FRAC_1_SQRT_2));
        let t = _mm256_div_ps(one, _mm256_fmadd_ps(half, z, one));
        let mut p = _mm256_set1_ps(C[9]);
        for &c in C[..9].iter().rev() {
            p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(c));
        }
        let q = _mm256_mul_ps(t, exp(_mm256_fnmadd_ps(z, z, p)));
        let s = _mm256_blendv_ps(q, _mm256_sub_ps(two, q), _mm256_cmp_ps(v, zero, _CMP_GE_OQ));
        _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_mul_ps(_mm256_mul_ps(half, v), s));
        i += 8;
    }
    i
}

/// e^x per lane, as the AVX2 `exp` of the LLM kernels (2^n · p(r), |r| ≤ ln2/2). Lanes below
/// −87.3 flush to 0, above 88.7 give +inf; NaN stays NaN.
#[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
#[inline]
#[target_feature(enable = "neon")]
unsafe fn exp_neon(x: core::arch::aarch64::float32x4_t) -> core::arch::aarch64::float32x4_t {
    use core::arch::aarch64::*;
    let hi = vdupq_n_f32(88.722_84);
    let lo = vdupq_n_f32(-87.336_55);
    let xc = vmaxq_f32(vminq_f32(x, hi), lo);
    let n = vrndnq_f32(vmulq_f32(xc, vdupq_n_f32(core::f32::consts::LOG2_E)));
    let r = vfmsq_f32(xc, n, vdupq_n_f32(0.693_359_4));
    let r = vfmsq_f32(r, n, vdupq_n_f32(-2.121_944_4e-4));
    let mut p = vdupq_n_f32(1.987_569_1e-4);
    p = vfmaq_f32(vdupq_n_f32(1.398_199_9e-3), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.333_452e-3), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.166_579_6e-2), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.666_666_5e-1), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0)), p, vmulq_f32(r, r));
    let ni = vcvtq_s32_f32(n);
    let half = vshrq_n_s32::<1>(ni);
    let pow = |e: int32x4_t| vreinterpretq_f32_s32(vshlq_n_s32::<23>(vaddq_s32(e, vdupq_n_s32(127))));
    let y = vmulq_f32(vmulq_f32(p, pow(half)), pow(vsubq_s32(ni, half)));
    let y = vbslq_f32(vcltq_f32(x, lo), vdupq_n_f32(0.0), y);
    let y = vbslq_f32(vcgtq_f32(x, hi), vdupq_n_f32(f32::INFINITY), y);
    vbslq_f32(vceqq_f32(x, x), y, x)
}

#[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
#[target_feature(enable = "neon")]
unsafe fn gelu_neon(x: &[f32], out: &mut [f32]) -> usize {
    use core::arch::aarch64::*;
    let n = x.len().min(out.len());
    let (zero, one, two, half) = (vdupq_n_f32(0.0), vdupq_n_f32(1.0), vdupq_n_f32(2.0), vdupq_n_f32(0.5));
    let mut i = 0;
    while i + 4 <= n {
        let v = vld1q_f32(x.as_ptr().add(i));
        let z = vmulq_f32(vabsq_f32(v), vdupq_n_f32(core::f32::consts::FRAC_1_SQRT_2));
        let t = vdivq_f32(one, vfmaq_f32(one, half, z));
        let mut p = vdupq_n_f32(C[9]);
        for &c in C[..9].iter().rev() {
            p = vfmaq_f32(vdupq_n_f32(c), p, t);
        }
        let q = vmulq_f32(t, exp_neon(vfmsq_f32(p, z, z)));
        let s = vbslq_f32(vcgeq_f32(v, zero), vsubq_f32(two, q), q);
        vst1q_f32(out.as_mut_ptr().add(i), vmulq_f32(vmulq_f32(half, v), s));
        i += 4;
    }
    i
}

// ---------------------------------------------------------------------------------------------
// Layer norm
// ---------------------------------------------------------------------------------------------

/// `native_layer_norm.out(...)`: args = [input, normalized_shape, weight, bias, eps, out0,
/// out1, out2, (out0, out1, out2)] (see the portable kernel). Fast path: f32 contiguous
/// everything, one normalized dim (the last).
pub fn native_layer_norm_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    let Some((n, eps)) = fast_layer_norm(args)? else {
        return pnorm::native_layer_norm_out(ctx, args);
    };
    let x = args.tensor(0)?;
    let w = args.opt_tensor(2)?.map(|t| t.data::<f32>()).transpose()?;
    let b = args.opt_tensor(3)?.map(|t| t.data::<f32>()).transpose()?;
    let (mut out, mut mean_out, mut rstd_out) = (args.out(5)?, args.out(6)?, args.out(7)?);
    let rank = x.dim();
    let mut stat_sizes: Vec<usize> = x.sizes()[..rank - 1].to_vec();
    stat_sizes.push(1);
    out.resize(x.sizes())?;
    mean_out.resize(&stat_sizes)?;
    rstd_out.resize(&stat_sizes)?;
    let stats = layer_norm_with(simd::isa(), ctx.threads, x.data::<f32>()?, n, w, b, eps, out.data_mut::<f32>()?);
    for (o, s) in mean_out.data_mut::<f32>()?.iter_mut().zip(&stats) {
        *o = s.0;
    }
    for (o, s) in rstd_out.data_mut::<f32>()?.iter_mut().zip(&stats) {
        *o = s.1;
    }
    Ok(())
}

/// `Some((n, eps))` when the fast path applies: f32 contiguous input/outputs, normalized_shape
/// `[n]` = the input's last dim (n > 0), weight/bias absent or f32 contiguous of `n` elements.
fn fast_layer_norm(args: &KernelArgs<'_>) -> KernelResult<Option<(usize, f64)>> {
    if !all_f32_contiguous(args, &[0, 5, 6, 7])? {
        return Ok(None);
    }
    let x = args.tensor(0)?;
    let (Ok(ns), Ok(eps)) = (args.int_list(1), args.double(4)) else { return Ok(None) };
    let Some(&last) = x.sizes().last() else { return Ok(None) };
    if ns.len() != 1 || ns[0] != last as i64 || last == 0 {
        return Ok(None);
    }
    for i in [2, 3] {
        match args.opt_tensor(i) {
            Ok(None) => {}
            Ok(Some(t)) if t.dtype == ScalarType::Float && t.dim_order.is_contiguous() && t.numel() == last => {}
            _ => return Ok(None),
        }
    }
    Ok(Some((last, eps)))
}

/// Layer norm of the rows of `x` (`n` each) into `y`; returns each row's (mean, rstd).
#[allow(clippy::too_many_arguments)]
pub(crate) fn layer_norm_with(isa: Isa, threads: usize, x: &[f32], n: usize, w: Option<&[f32]>, b: Option<&[f32]>, eps: f64, y: &mut [f32]) -> Vec<(f32, f32)> {
    let rows = x.len() / n;
    let stats: Vec<[AtomicU32; 2]> = (0..rows).map(|_| [AtomicU32::new(0), AtomicU32::new(0)]).collect();
    let threads = if x.len() < PAR_MIN_ELEMS { 1 } else { threads };
    pool::for_chunks(threads, y, n, &|first, chunk| {
        for (r, yr) in chunk.chunks_exact_mut(n).enumerate() {
            let row = first + r;
            let xr = &x[row * n..(row + 1) * n];
            let (mean, rstd) = match isa {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: Isa::Avx2 means AVX2/FMA are present; the body is safe code.
                Isa::Avx2 => unsafe { ln_row_avx2(xr, w, b, eps, yr) },
                _ => ln_row(xr, w, b, eps, yr),
            };
            stats[row][0].store(mean.to_bits(), Ordering::Relaxed);
            stats[row][1].store(rstd.to_bits(), Ordering::Relaxed);
        }
    });
    stats.iter().map(|s| (f32::from_bits(s[0].load(Ordering::Relaxed)), f32::from_bits(s[1].load(Ordering::Relaxed)))).collect()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn ln_row_avx2(x: &[f32], w: Option<&[f32]>, b: Option<&[f32]>, eps: f64, y: &mut [f32]) -> (f32, f32) {
    ln_row(x, w, b, eps, y)
}

/// `Σ f(v)` over 8 lanes (the lane array keeps the loop vectorizable).
#[inline(always)]
fn sum8(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(v);
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for &v in chunks.remainder() {
        s += f(v);
    }
    s
}

/// One row, two passes (mean, then the mean squared deviation): written as plain loops over
/// lane arrays, compiled for AVX2/FMA by [`ln_row_avx2`] and for NEON by default on aarch64.
#[inline(always)]
fn ln_row(x: &[f32], w: Option<&[f32]>, b: Option<&[f32]>, eps: f64, y: &mut [f32]) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = sum8(x, |v| v) / n;
    let var = sum8(x, |v| (v - mean) * (v - mean)) / n;
    let rstd = (1.0 / libm::sqrt(var as f64 + eps)) as f32;
    match (w, b) {
        (Some(w), Some(b)) => {
            for (((o, &v), &wv), &bv) in y.iter_mut().zip(x).zip(w).zip(b) {
                *o = (v - mean) * rstd * wv + bv;
            }
        }
        (Some(w), None) => {
            for ((o, &v), &wv) in y.iter_mut().zip(x).zip(w) {
                *o = (v - mean) * rstd * wv;
            }
        }
        (None, Some(b)) => {
            for ((o, &v), &bv) in y.iter_mut().zip(x).zip(b) {
                *o = (v - mean) * rstd + bv;
            }
        }
        (None, None) => {
            for (o, &v) in y.iter_mut().zip(x) {
                *o = (v - mean) * rstd;
            }
        }
    }
    (mean, rstd)
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::vec;
    use alloc::vec::Vec;

    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::kernel::KernelFn;
    use rbuild_runtime::ScalarType;

    use super::super::llm::simd;
    use crate::optimized::test_util::{assert_close, Lcg};
    use crate::portable::{norm as pnorm, unary as punary};

    #[test]
    fn gelu_matches_portable_over_sizes_and_isas() {
        for n in [1, 7, 8, 9, 31, 1000, 20_003] {
            let mut r = Lcg::new(n as u64);
            let mut x: Vec<f32> = r.vec(n).into_iter().map(|v| v * 12.0).collect();
            let specials = [0.0, -0.0, f32::NAN, f32::INFINITY, -f32::INFINITY, 90.0, -90.0, 1e-30, -5.5];
            for (xv, s) in x.iter_mut().zip(specials) {
                *xv = s;
            }
            let want: Vec<f32> = x.iter().map(|&v| super::gelu_scalar(v)).collect();
            for isa in simd::all() {
                for threads in [1, 2, 3] {
                    let mut got = vec![0.0; n];
                    super::gelu_with(isa, threads, &x, &mut got);
                    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        let ok = g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-6 * (1.0 + w.abs());
                        assert!(ok, "gelu {isa:?} n={n} threads={threads}: x = {} gives {g}, expected {w}", x[i]);
                    }
                }
            }
        }
    }

    /// Against f64 erf: relative error ~1e-7 for x ≥ −1 (1 + erf ≥ 0.3), absolute error
    /// ≤ 1.5e-7·|x| in the negative tail (the erfc approximation's absolute bound). libm's
    /// erff in the scalar path computes 1 + erf by cancellation, so only the SIMD paths are
    /// held to this in the tail.
    #[test]
    fn gelu_error_against_f64_erf() {
        let x: Vec<f32> = (0..200_000).map(|i| -9.0 + 19.0 * i as f32 / 200_000.0).collect();
        for isa in simd::all() {
            let mut got = vec![0.0; x.len()];
            super::gelu_with(isa, 1, &x, &mut got);
            let (mut rel, mut abs_tail) = (0.0f64, 0.0f64);
            for (&v, &g) in x.iter().zip(&got) {
                let exact = 0.5 * v as f64 * (1.0 + libm::erf(v as f64 / core::f64::consts::SQRT_2));
                if v >= -1.0 && exact != 0.0 {
                    rel = rel.max(((g as f64 - exact) / exact).abs());
                } else if v < -1.0 {
                    abs_tail = abs_tail.max((g as f64 - exact).abs() / v.abs() as f64);
                }
            }
            std::eprintln!("gelu {isa:?}: relative error (x >= -1) {rel:e}, tail |error|/|x| {abs_tail:e}");
            assert!(rel < 5e-7, "{isa:?}: relative error {rel:e}");
            if isa != simd::Isa::Scalar {
                assert!(abs_tail < 1e-7, "{isa:?}: tail error {abs_tail:e}");
            }
        }
    }

    fn run_gelu(f: KernelFn, threads: usize, approx: &str, x: &[f32], sizes: &[usize]) -> Vec<f32> {
        let mut h = OpHarness::new();
        h.ctx.threads = threads;
        let xi = h.f32(sizes, x);
        let a = h.frame.values.len() as u32;
        h.frame.values.push(rbuild_runtime::Value::String(approx.into()));
        let out = h.out(ScalarType::Float, sizes);
        h.call(f, &[xi, a, out, out]).unwrap();
        h.read(out)
    }

    #[test]
    fn gelu_kernel_matches_portable_through_the_harness() {
        let mut r = Lcg::new(5);
        let x: Vec<f32> = r.vec(3 * 1537).into_iter().map(|v| v * 6.0).collect();
        for approx in ["none", "tanh"] {
            let want = run_gelu(punary::gelu_out, 1, approx, &x, &[3, 1537]);
            for threads in [1, 2] {
                let got = run_gelu(super::gelu_out, threads, approx, &x, &[3, 1537]);
                assert_close(&got, &want, 1e-6, &format!("{approx} threads={threads}"));
            }
        }
    }

    /// Runs a layer-norm kernel; returns (out, mean, rstd).
    fn run_ln(f: KernelFn, threads: usize, sizes: &[usize], ns: &[i64], affine: (bool, bool), seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let mut h = OpHarness::new();
        h.ctx.threads = threads;
        let mut r = Lcg::new(seed);
        let numel: usize = sizes.iter().product();
        let n: usize = ns.iter().product::<i64>() as usize;
        let x: Vec<f32> = r.vec(numel).into_iter().enumerate().map(|(i, v)| v * 3.0 + (i % 7) as f32).collect();
        let xi = h.f32(sizes, &x);
        let nsi = h.int_list(ns);
        let w = if affine.0 { h.f32(&[n], &r.vec(n)) } else { h.none() };
        let b = if affine.1 { h.f32(&[n], &r.vec(n)) } else { h.none() };
        let eps = h.double(1e-5);
        let mut stat: Vec<usize> = sizes[..sizes.len() - ns.len()].to_vec();
        stat.resize(sizes.len(), 1);
        let (o0, o1, o2) = (h.out(ScalarType::Float, sizes), h.out(ScalarType::Float, &stat), h.out(ScalarType::Float, &stat));
        let list = h.tensor_list(&[o0, o1, o2]);
        h.call(f, &[xi, nsi, w, b, eps, o0, o1, o2, list]).unwrap();
        (h.read(o0), h.read(o1), h.read(o2))
    }

    #[test]
    fn layer_norm_matches_portable() {
        let cases: [(&[usize], &[i64]); 6] =
            [(&[1, 1500, 384], &[384]), (&[3, 7], &[7]), (&[2, 5, 33], &[33]), (&[1], &[1]), (&[4, 9], &[9]), (&[2, 3, 4], &[3, 4])];
        for (ci, (sizes, ns)) in cases.iter().enumerate() {
            for affine in [(true, true), (false, false), (true, false), (false, true)] {
                let want = run_ln(pnorm::native_layer_norm_out, 1, sizes, ns, affine, ci as u64);
                for threads in [1, 2, 3] {
                    let got = run_ln(super::native_layer_norm_out, threads, sizes, ns, affine, ci as u64);
                    let what = format!("{sizes:?} {affine:?} threads={threads}");
                    assert_close(&got.0, &want.0, 2e-5, &what);
                    assert_close(&got.1, &want.1, 1e-5, &what);
                    assert_close(&got.2, &want.2, 1e-5, &what);
                }
            }
        }
    }

    #[test]
    fn layer_norm_over_isas() {
        let (rows, n) = (5, 385);
        let mut r = Lcg::new(3);
        let (x, w, b) = (r.vec(rows * n), r.vec(n), r.vec(n));
        let mut want = vec![0.0; rows * n];
        let ws = super::layer_norm_with(simd::Isa::Scalar, 1, &x, n, Some(&w), Some(&b), 1e-5, &mut want);
        for isa in simd::all() {
            let mut got = vec![0.0; rows * n];
            let gs = super::layer_norm_with(isa, 2, &x, n, Some(&w), Some(&b), 1e-5, &mut got);
            assert_close(&got, &want, 1e-5, &format!("{isa:?}"));
            assert_eq!(gs.len(), ws.len());
        }
    }
}
