//! f32 row-block dot products: `out[r] = W[r, :] · x` for a block of weight rows, the inner loop
//! of decode's linear layers (memory-bound: each weight is read once per token).
//!
//! Four rows at a time share each load of `x`, with two accumulators per row so eight FMA
//! chains are in flight.

use half::f16;

use super::simd::Isa;

/// `out[r] = Σ_i w[r*k + i] · x[i]` for `r < out.len()`.
pub fn rows_f32(isa: Isa, w: &[f32], k: usize, x: &[f32], out: &mut [f32]) {
    assert!(w.len() >= out.len() * k && x.len() >= k, "rows_f32: operand sizes");
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Isa::Avx2 is only returned when the CPU has AVX2 and FMA; sizes checked above.
        Isa::Avx2 => unsafe { avx2::rows(w, k, x, out) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: NEON is part of the aarch64 baseline; sizes checked above.
        Isa::Neon => unsafe { neon::rows(w, k, x, out) },
        _ => rows_scalar(w, k, x, out),
    }
}

/// `out[r] = Σ_i w[r*k + i] · x[i]` with float16 weights, f32 sums.
pub fn rows_f16(isa: Isa, w: &[f16], k: usize, x: &[f32], out: &mut [f32]) {
    rows_f16_strided(isa, w, k, k, x, out)
}

/// `out[r] = Σ_{i<k} w[r*stride + i] · x[i]`: rows `stride` apart (one head's keys in a
/// `[T, H, D]` cache), float16, f32 sums.
pub fn rows_f16_strided(isa: Isa, w: &[f16], stride: usize, k: usize, x: &[f32], out: &mut [f32]) {
    let n = out.len();
    assert!(stride >= k && x.len() >= k && (n == 0 || w.len() >= (n - 1) * stride + k), "rows_f16: operand sizes");
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 {
        // SAFETY: Isa::Avx2 is only returned when the CPU has AVX2, FMA and F16C; sizes checked
        // above.
        return unsafe { avx2::rows_f16(w, stride, k, x, out) };
    }
    rows_f16_converted(isa, w, stride, k, x, out)
}

/// `out[c] = Σ_r p[r] · w[r*stride + c]` for `c < out.len()`: attention's weighted sum of
/// float16 value rows.
pub fn weighted_rows_f16(isa: Isa, p: &[f32], w: &[f16], stride: usize, out: &mut [f32]) {
    let (n, k) = (p.len(), out.len());
    assert!(stride >= k && (n == 0 || w.len() >= (n - 1) * stride + k), "weighted_rows_f16: operand sizes");
    out.fill(0.0);
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 {
        // SAFETY: as above.
        return unsafe { avx2::weighted_rows_f16(p, w, stride, out) };
    }
    let _ = isa;
    for (r, &pr) in p.iter().enumerate() {
        for (o, wv) in out.iter_mut().zip(&w[r * stride..r * stride + k]) {
            *o += pr * wv.to_f32();
        }
    }
}

/// Converts each row in L1-sized chunks and reuses the f32 dot: NEON's float16 vector types
/// are not stable Rust, and `half` converts slices with the CPU's instructions where it can.
fn rows_f16_converted(isa: Isa, w: &[f16], stride: usize, k: usize, x: &[f32], out: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    const CHUNK: usize = 256;
    let mut buf = [0.0f32; CHUNK];
    for (r, o) in out.iter_mut().enumerate() {
        let row = &w[r * stride..r * stride + k];
        let mut acc = 0.0;
        for (wc, xc) in row.chunks(CHUNK).zip(x[..k].chunks(CHUNK)) {
            let b = &mut buf[..wc.len()];
            wc.convert_to_f32_slice(b);
            acc += dot(isa, b, xc);
        }
        *o = acc;
    }
}

/// `a · b` over `a.len()` elements.
#[inline]
pub fn dot(isa: Isa, a: &[f32], b: &[f32]) -> f32 {
    let mut o = [0.0f32];
    rows_f32(isa, a, a.len(), b, &mut o);
    o[0]
}

pub(crate) fn dot_scalar(a: &[f32], b: &[f32]) -> f32 {
    // Eight partial sums so the compiler can vectorize without reassociating.
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ta, tb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = acc.iter().sum::<f32>();
    for (x, y) in ta.iter().zip(tb) {
        s += x * y;
    }
    s
}

fn rows_scalar(w: &[f32], k: usize, x: &[f32], out: &mut [f32]) {
    for (r, o) in out.iter_mut().enumerate() {
        *o = dot_scalar(&w[r * k..(r + 1) * k], &x[..k]);
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use core::arch::x86_64::*;

    /// Horizontal sum of 8 lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
    }

    /// `R` rows starting at `w` (row stride `k`) dotted with `x`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block<const R: usize>(w: *const f32, k: usize, x: *const f32) -> [f32; R] {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        let k16 = k & !15;
        let mut i = 0;
        while i < k16 {
            let x0 = _mm256_loadu_ps(x.add(i));
            let x1 = _mm256_loadu_ps(x.add(i + 8));
            for (r, a) in acc.iter_mut().enumerate() {
                let p = w.add(r * k + i);
                // One line (16 floats) of the next row block: the hardware prefetcher ramps
                // up too slowly on rows this short.
                _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add((r + R) * k + i) as *const i8);
                a[0] = _mm256_fmadd_ps(_mm256_loadu_ps(p), x0, a[0]);
                a[1] = _mm256_fmadd_ps(_mm256_loadu_ps(p.add(8)), x1, a[1]);
            }
            i += 16;
        }
        let mut s = [0.0f32; R];
        for r in 0..R {
            s[r] = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));
            for j in k16..k {
                s[r] += *w.add(r * k + j) * *x.add(j);
            }
        }
        s
    }

    /// # Safety
    /// AVX2 and FMA must be available; `w` holds `out.len()` rows of `k`, `x` at least `k`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows(w: &[f32], k: usize, x: &[f32], out: &mut [f32]) {
        let n = out.len();
        let mut r = 0;
        while r + 4 <= n {
            out[r..r + 4].copy_from_slice(&block::<4>(w.as_ptr().add(r * k), k, x.as_ptr()));
            r += 4;
        }
        while r < n {
            out[r] = block::<1>(w.as_ptr().add(r * k), k, x.as_ptr())[0];
            r += 1;
        }
    }

    /// [`block`] over float16 weights, converted in registers (F16C).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn block_f16<const R: usize>(w: *const half::f16, stride: usize, k: usize, x: *const f32) -> [f32; R] {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        let k16 = k & !15;
        let mut i = 0;
        while i < k16 {
            let x0 = _mm256_loadu_ps(x.add(i));
            let x1 = _mm256_loadu_ps(x.add(i + 8));
            for (r, a) in acc.iter_mut().enumerate() {
                let p = w.add(r * stride + i);
                // As in `block`: the next row block, ahead of the hardware prefetcher.
                _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add((r + R) * stride + i) as *const i8);
                let lo = _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i));
                let hi = _mm256_cvtph_ps(_mm_loadu_si128(p.add(8) as *const __m128i));
                a[0] = _mm256_fmadd_ps(lo, x0, a[0]);
                a[1] = _mm256_fmadd_ps(hi, x1, a[1]);
            }
            i += 16;
        }
        let mut s = [0.0f32; R];
        for r in 0..R {
            s[r] = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));
            for j in k16..k {
                s[r] += (*w.add(r * stride + j)).to_f32() * *x.add(j);
            }
        }
        s
    }

    /// # Safety
    /// AVX2, FMA and F16C must be available; `w` holds `out.len()` rows of `k`, `stride`
    /// apart; `x` at least `k`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn rows_f16(w: &[half::f16], stride: usize, k: usize, x: &[f32], out: &mut [f32]) {
        let n = out.len();
        let mut r = 0;
        while r + 4 <= n {
            out[r..r + 4].copy_from_slice(&block_f16::<4>(w.as_ptr().add(r * stride), stride, k, x.as_ptr()));
            r += 4;
        }
        while r < n {
            out[r] = block_f16::<1>(w.as_ptr().add(r * stride), stride, k, x.as_ptr())[0];
            r += 1;
        }
    }

    /// # Safety
    /// AVX2, FMA and F16C must be available; `w` holds `p.len()` rows of `out.len()`, `stride`
    /// apart; `out` is zeroed.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn weighted_rows_f16(p: &[f32], w: &[half::f16], stride: usize, out: &mut [f32]) {
        let k = out.len();
        let wp = w.as_ptr();
        // 64 columns at a time in eight register accumulators, over every row.
        let mut c = 0;
        while c + 64 <= k {
            let mut acc = [_mm256_setzero_ps(); 8];
            for (r, &pr) in p.iter().enumerate() {
                let pv = _mm256_set1_ps(pr);
                let row = wp.add(r * stride + c);
                for (l, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(pv, _mm256_cvtph_ps(_mm_loadu_si128(row.add(8 * l) as *const __m128i)), *a);
                }
            }
            for (l, a) in acc.iter().enumerate() {
                _mm256_storeu_ps(out.as_mut_ptr().add(c + 8 * l), *a);
            }
            c += 64;
        }
        while c + 8 <= k {
            let mut acc = _mm256_setzero_ps();
            for (r, &pr) in p.iter().enumerate() {
                acc = _mm256_fmadd_ps(_mm256_set1_ps(pr), _mm256_cvtph_ps(_mm_loadu_si128(wp.add(r * stride + c) as *const __m128i)), acc);
            }
            _mm256_storeu_ps(out.as_mut_ptr().add(c), acc);
            c += 8;
        }
        for (cc, o) in out.iter_mut().enumerate().skip(c) {
            *o = p.iter().enumerate().map(|(r, &pr)| pr * (*wp.add(r * stride + cc)).to_f32()).sum();
        }
    }

    /// `y += a · x` over `y.len()` elements.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
        let n = y.len().min(x.len());
        let av = _mm256_set1_ps(a);
        let mut i = 0;
        while i + 8 <= n {
            let p = y.as_mut_ptr().add(i);
            _mm256_storeu_ps(p, _mm256_fmadd_ps(av, _mm256_loadu_ps(x.as_ptr().add(i)), _mm256_loadu_ps(p)));
            i += 8;
        }
        while i < n {
            y[i] += a * x[i];
            i += 1;
        }
    }

    /// `a · b` over `a.len()` elements (`b` at least as long).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (mut s0, mut s1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        while i + 16 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i)), _mm256_loadu_ps(b.as_ptr().add(i)), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i + 8)), _mm256_loadu_ps(b.as_ptr().add(i + 8)), s1);
            i += 16;
        }
        if i + 8 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.as_ptr().add(i)), _mm256_loadu_ps(b.as_ptr().add(i)), s0);
            i += 8;
        }
        let mut s = hsum(_mm256_add_ps(s0, s1));
        while i < n {
            s += a[i] * b[i];
            i += 1;
        }
        s
    }

    /// e^x per lane (Cephes-style: 2^n · p(r), |r| ≤ ln2/2; ~2 ulp). Lanes below −87.3
    /// flush to 0, above 88.7 give +inf; NaN stays NaN.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn exp(x: __m256) -> __m256 {
        let hi = _mm256_set1_ps(88.722_84);
        let lo = _mm256_set1_ps(-87.336_55);
        let xc = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
        let n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(core::f32::consts::LOG2_E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        // r = x − n·ln2 in two steps for accuracy.
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), xc);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
        let mut p = _mm256_set1_ps(1.987_569_1e-4);
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.398_199_9e-3));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.333_452e-3));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.166_579_6e-2));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.666_666_5e-1));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5));
        p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0)));
        // 2^n from the exponent bits; n ∈ [−126, 128]: split so both factors are normal.
        let ni = _mm256_cvtps_epi32(n);
        let half = _mm256_srai_epi32(ni, 1);
        let pow = |e: __m256i| _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
        let y = _mm256_mul_ps(_mm256_mul_ps(p, pow(half)), pow(_mm256_sub_epi32(ni, half)));
        let y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
        let y = _mm256_blendv_ps(y, _mm256_set1_ps(f32::INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
        // NaN in, NaN out.
        _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q))
    }
}

#[cfg(target_arch = "aarch64")]
pub(crate) mod neon {
    use core::arch::aarch64::*;

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn block<const R: usize>(w: *const f32, k: usize, x: *const f32) -> [f32; R] {
        let mut acc = [[vdupq_n_f32(0.0); 2]; R];
        let k8 = k & !7;
        let mut i = 0;
        while i < k8 {
            let x0 = vld1q_f32(x.add(i));
            let x1 = vld1q_f32(x.add(i + 4));
            for (r, a) in acc.iter_mut().enumerate() {
                let p = w.add(r * k + i);
                a[0] = vfmaq_f32(a[0], vld1q_f32(p), x0);
                a[1] = vfmaq_f32(a[1], vld1q_f32(p.add(4)), x1);
            }
            i += 8;
        }
        let mut s = [0.0f32; R];
        for r in 0..R {
            s[r] = vaddvq_f32(vaddq_f32(acc[r][0], acc[r][1]));
            for j in k8..k {
                s[r] += *w.add(r * k + j) * *x.add(j);
            }
        }
        s
    }

    /// # Safety
    /// `w` holds `out.len()` rows of `k`, `x` at least `k`.
    #[target_feature(enable = "neon")]
    pub unsafe fn rows(w: &[f32], k: usize, x: &[f32], out: &mut [f32]) {
        let n = out.len();
        let mut r = 0;
        while r + 4 <= n {
            out[r..r + 4].copy_from_slice(&block::<4>(w.as_ptr().add(r * k), k, x.as_ptr()));
            r += 4;
        }
        while r < n {
            out[r] = block::<1>(w.as_ptr().add(r * k), k, x.as_ptr())[0];
            r += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::simd;
    use crate::optimized::test_util::{assert_close, Lcg};

    #[test]
    fn rows_match_plain_dot_for_odd_sizes() {
        for isa in simd::all() {
            for &(n, k) in &[(1, 1), (3, 7), (4, 16), (5, 17), (9, 33), (8, 768), (7, 100)] {
                let mut r = Lcg::new((n * 1000 + k) as u64);
                let (w, x) = (r.vec(n * k), r.vec(k));
                let mut got = alloc::vec![0.0; n];
                super::rows_f32(isa, &w, k, &x, &mut got);
                let want: alloc::vec::Vec<f32> =
                    (0..n).map(|i| w[i * k..(i + 1) * k].iter().zip(&x).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() as f32).collect();
                assert_close(&got, &want, 1e-5, &alloc::format!("{isa:?} {n}x{k}"));
            }
        }
    }

    #[test]
    fn f16_rows_match_plain_dot_for_odd_sizes() {
        use half::f16;
        for isa in simd::all() {
            for &(n, k) in &[(1, 1), (3, 7), (4, 16), (5, 17), (9, 33), (8, 384), (7, 600)] {
                let mut r = Lcg::new((n * 1000 + k) as u64);
                let (w, x) = (r.vec(n * k), r.vec(k));
                let wh: alloc::vec::Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
                let mut got = alloc::vec![0.0; n];
                super::rows_f16(isa, &wh, k, &x, &mut got);
                let want: alloc::vec::Vec<f32> =
                    (0..n).map(|i| wh[i * k..(i + 1) * k].iter().zip(&x).map(|(a, b)| a.to_f64() * *b as f64).sum::<f64>() as f32).collect();
                assert_close(&got, &want, 1e-5, &alloc::format!("{isa:?} {n}x{k}"));
            }
        }
    }

    #[test]
    fn f16_strided_rows_and_weighted_rows_match_plain_loops() {
        use half::f16;
        for isa in simd::all() {
            for &(n, k, stride) in &[(1, 1, 1), (5, 7, 9), (9, 64, 384), (6, 70, 75), (1500, 64, 384), (3, 130, 130)] {
                let mut r = Lcg::new((n * 31 + k) as u64);
                let w: alloc::vec::Vec<f16> = r.vec((n - 1) * stride + k).iter().map(|&v| f16::from_f32(v)).collect();
                let (x, p) = (r.vec(k), r.vec(n));
                let mut got = alloc::vec![0.0; n];
                super::rows_f16_strided(isa, &w, stride, k, &x, &mut got);
                let want: alloc::vec::Vec<f32> =
                    (0..n).map(|i| (0..k).map(|c| w[i * stride + c].to_f64() * x[c] as f64).sum::<f64>() as f32).collect();
                assert_close(&got, &want, 1e-5, &alloc::format!("rows {isa:?} {n}x{k}/{stride}"));
                let mut got = alloc::vec![f32::NAN; k];
                super::weighted_rows_f16(isa, &p, &w, stride, &mut got);
                let want: alloc::vec::Vec<f32> =
                    (0..k).map(|c| (0..n).map(|i| p[i] as f64 * w[i * stride + c].to_f64()).sum::<f64>() as f32).collect();
                assert_close(&got, &want, 1e-4, &alloc::format!("weighted {isa:?} {n}x{k}/{stride}"));
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_exp_matches_libm() {
        if simd::isa() != simd::Isa::Avx2 {
            return;
        }
        use core::arch::x86_64::*;
        let xs: alloc::vec::Vec<f32> = (-2000..2000).map(|i| i as f32 * 0.0467).chain([-100.0, 100.0, 0.0, -87.0, 88.0, f32::NAN]).collect();
        for c in xs.chunks(8) {
            let mut v = [0.0f32; 8];
            v[..c.len()].copy_from_slice(c);
            let mut o = [0.0f32; 8];
            // SAFETY: AVX2 checked above; 8-element arrays.
            unsafe { _mm256_storeu_ps(o.as_mut_ptr(), super::avx2::exp(_mm256_loadu_ps(v.as_ptr()))) };
            for (x, y) in v.iter().zip(&o) {
                let want = libm::expf(*x);
                let ok = (x.is_nan() && y.is_nan()) || (y - want).abs() <= 4.0 * f32::EPSILON * want.abs() || (want < 1e-37 && *y < 1e-37) || (want.is_infinite() && y.is_infinite());
                assert!(ok, "exp({x}) = {y}, libm {want}");
            }
        }
    }
}
