//! Quantized row-block dot products for decode/prefill linear layers.
//!
//! - int8 weight-only (per channel): weights widened to f32 on the fly, FMA with x; the caller
//!   applies the channel scale.
//! - int4 weight-only (groupwise) and 8da4w share one kernel: activations are quantized to
//!   int8 per 32..256-element group ([`prep_8da4w`]: `x ≈ sx_g · xq`, |xq| ≤ 127), as
//!   llama.cpp's q4_0 (q8_0 activations) and XNNPACK's qd8 4-bit kernels do. For int4 weight-only
//!   this rounding is the kernel's approximation of its float-activation reference (at most
//!   sx_g / 2 per element, checked against that bound in the tests); for 8da4w it is the op's
//!   own definition. An int16-activation kernel (rounding 256× finer) measured 9–12 % slower
//!   per token on AVX2, slower than llama.cpp's q4_0, and was dropped.
//! - The int8 activations are permuted per 64-element chunk into [32 evens | 32 odds], so one
//!   32-byte load of weights serves 64 elements; on AVX2 `_mm256_maddubs_epi16(nibbles, xq)` multiplies unsigned nibbles (0..15) by signed
//!   xq and sums pairs into i16 (|Σ| ≤ 2·15·127, no saturation), `_mm256_madd_epi16` widens to
//!   i32. The nibble offset is removed exactly per group: Σ q·xq = Σ u·xq − 8·Σ xq.

use alloc::vec;
use alloc::vec::Vec;

use super::simd::Isa;
use crate::portable::quant_linear::quantize_group;

/// Elements per packed block: 16 bytes of weights.
pub const BLOCK: usize = 32;

/// One activation row quantized to int8 per group: each 64-element chunk (and a final
/// 32-element one) as [evens | odds], so byte `j` of the chunk's packed weights (elements 2j,
/// 2j+1) meets `xq[j]` and `xq[len/2 + j]`.
#[derive(Default)]
pub struct Act8 {
    /// Quantized values in the chunk layout (see [`prep_8da4w`]).
    pub xq: Vec<i8>,
    /// Per group: sx_g.
    pub sx: Vec<f32>,
    /// Per group: 8 · Σ xq (the nibble-offset correction).
    pub corr: Vec<i32>,
    /// Per lane-unit (a 64-chunk when group = 32, else a group): the correction placed in the
    /// first i32 lane of each group's lanes, others 0.
    pub lane_corr: Vec<i32>,
    /// group = 32 only, per 64-chunk: [sx_a × 4 | sx_b × 4].
    pub lane_sx: Vec<f32>,
}

impl Act8 {
    /// The per-lane copies of `corr` and `sx` the AVX2 loops add and multiply in one step.
    fn fill_lanes(&mut self, group: usize, k: usize) {
        self.lane_corr.clear();
        self.lane_sx.clear();
        if group == 32 {
            for c in 0..k.div_ceil(64) {
                let (ga, gb) = (2 * c, 2 * c + 1);
                let cb = self.corr.get(gb).copied().unwrap_or(0);
                self.lane_corr.extend([self.corr[ga], 0, 0, 0, cb, 0, 0, 0]);
                let sb = self.sx.get(gb).copied().unwrap_or(0.0);
                self.lane_sx.extend([self.sx[ga]; 4]);
                self.lane_sx.extend([sb; 4]);
            }
        } else {
            for &c in &self.corr {
                self.lane_corr.extend([c, 0, 0, 0, 0, 0, 0, 0]);
            }
        }
    }
}

/// Chunk length at element `e0` of a `k`-element row: 64, or 32 for a final half chunk.
#[inline]
pub fn chunk_len(e0: usize, k: usize) -> usize {
    (k - e0).min(64)
}

/// Quantizes `x` per group (the portable kernel's exact rounding) and lays it out for the dot
/// products of signed nibbles (stored `q + 8`).
pub fn prep_8da4w(x: &[f32], group: usize, a: &mut Act8, scratch: &mut Vec<i8>) {
    let k = x.len();
    scratch.clear();
    scratch.resize(k, 0);
    a.sx.clear();
    a.corr.clear();
    for (xg, qg) in x.chunks_exact(group).zip(scratch.chunks_exact_mut(group)) {
        a.sx.push(quantize_group(xg, qg));
        // The dot products multiply by stored nibbles q + 8: 8 · Σ xq comes off again.
        a.corr.push(8 * qg.iter().map(|&q| q as i32).sum::<i32>());
    }
    a.xq.clear();
    let mut e0 = 0;
    while e0 < k {
        let c = &scratch[e0..e0 + chunk_len(e0, k)];
        a.xq.extend(c.iter().step_by(2));
        a.xq.extend(c.iter().skip(1).step_by(2));
        e0 += c.len();
    }
    a.fill_lanes(group, k);
}

/// int8 rows: `out[r] = Σ_i w[r*k + i] · x[i]` (unscaled).
pub fn rows_q8(isa: Isa, w: &[i8], k: usize, x: &[f32], out: &mut [f32]) {
    assert!(w.len() >= out.len() * k && x.len() >= k, "rows_q8: operand sizes");
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Isa::Avx2 means AVX2/FMA are present; sizes checked above.
        Isa::Avx2 => unsafe { avx2::rows_q8(w, k, x, out) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: NEON is baseline on aarch64; sizes checked above.
        Isa::Neon => unsafe { neon::rows_q8(w, k, x, out) },
        _ => {
            for (r, o) in out.iter_mut().enumerate() {
                let row = &w[r * k..(r + 1) * k];
                let mut acc = [0.0f32; 8];
                for (wc, xc) in row.chunks_exact(8).zip(x.chunks_exact(8)) {
                    for l in 0..8 {
                        acc[l] += wc[l] as f32 * xc[l];
                    }
                }
                let k8 = k & !7;
                *o = acc.iter().sum::<f32>() + row[k8..].iter().zip(&x[k8..k]).map(|(&a, &b)| a as f32 * b).sum::<f32>();
            }
        }
    }
}

/// int4 rows (weight-only and 8da4w): `out[r] = Σ_g sx_g · s[r*G + g] · Σ_{i∈g} q[r, i] · xq[i]`,
/// with `a` from [`prep_8da4w`] and `s` the rows' scales as f32 (`G = k / group`).
pub fn rows_8da4w(isa: Isa, w: &[u8], k: usize, s: &[f32], group: usize, a: &Act8, out: &mut [f32]) {
    let groups = k / group;
    assert!(
        k % group == 0 && group % BLOCK == 0 && w.len() >= out.len() * k / 2 && s.len() >= out.len() * groups && a.xq.len() >= k
            && a.sx.len() >= groups
            && a.corr.len() >= groups
            && a.lane_corr.len() >= 8 * if group == 32 { k.div_ceil(64) } else { groups }
            && (group != 32 || a.lane_sx.len() >= 8 * k.div_ceil(64)),
        "rows_8da4w: operand sizes"
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 present; sizes checked above.
        Isa::Avx2 => unsafe { avx2::rows_8da4w(w, k, s, group, a, out) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: NEON is part of the aarch64 baseline; sizes checked above.
        Isa::Neon => unsafe { neon::rows_8da4w(w, k, s, group, a, out) },
        _ => {
            for (r, o) in out.iter_mut().enumerate() {
                let row = &w[r * k / 2..(r + 1) * k / 2];
                let mut isum = vec![0i32; groups];
                let mut e0 = 0;
                while e0 < k {
                    let len = chunk_len(e0, k);
                    let (wb, xc) = (&row[e0 / 2..(e0 + len) / 2], &a.xq[e0..e0 + len]);
                    for (j, &b) in wb.iter().enumerate() {
                        isum[(e0 + 2 * j) / group] += (b & 0x0F) as i32 * xc[j] as i32 + (b >> 4) as i32 * xc[len / 2 + j] as i32;
                    }
                    e0 += len;
                }
                *o = (0..groups).map(|g| (a.sx[g] * s[r * groups + g]) * (isum[g] - a.corr[g]) as f32).sum();
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use core::arch::x86_64::*;

    use super::super::gemv::avx2::hsum;
    use super::Act8;

    /// Runs `block::<4>` over groups of four rows and `block::<1>` over the rest.
    macro_rules! by_fours {
        ($out:ident, $f:ident, $($arg:expr),*) => {{
            let n = $out.len();
            let mut r = 0;
            while r + 4 <= n {
                $out[r..r + 4].copy_from_slice(&$f::<4>(r, $($arg),*));
                r += 4;
            }
            while r < n {
                $out[r] = $f::<1>(r, $($arg),*)[0];
                r += 1;
            }
        }};
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn q8_block<const R: usize>(r0: usize, w: &[i8], k: usize, x: &[f32]) -> [f32; R] {
        let (w, x) = (w.as_ptr().add(r0 * k), x.as_ptr());
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        let k16 = k & !15;
        let mut i = 0;
        while i < k16 {
            let x0 = _mm256_loadu_ps(x.add(i));
            let x1 = _mm256_loadu_ps(x.add(i + 8));
            for (r, a) in acc.iter_mut().enumerate() {
                if i % 64 == 0 {
                    // Next row block, same line: rows are too short for the hardware prefetcher.
                    _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add((r + R) * k + i) as *const i8);
                }
                let p = w.add(r * k + i);
                let w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p as *const __m128i)));
                let w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p.add(8) as *const __m128i)));
                a[0] = _mm256_fmadd_ps(w0, x0, a[0]);
                a[1] = _mm256_fmadd_ps(w1, x1, a[1]);
            }
            i += 16;
        }
        let mut s = [0.0f32; R];
        for r in 0..R {
            s[r] = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));
            for j in k16..k {
                s[r] += *w.add(r * k + j) as f32 * *x.add(j);
            }
        }
        s
    }

    /// # Safety
    /// AVX2/FMA present; `w` holds `out.len()` rows of `k`, `x` at least `k`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows_q8(w: &[i8], k: usize, x: &[f32], out: &mut [f32]) {
        by_fours!(out, q8_block, w, k, x)
    }

    /// group = 32: each 32-byte load covers two groups (low 128-bit lane = group a, high =
    /// group b), so scales go in as [s_a × 4 | s_b × 4].
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn da_block32<const R: usize>(r0: usize, w: &[u8], k: usize, s: &[f32], a: &Act8) -> [f32; R] {
        let groups = k / 32;
        let half = k / 2;
        let (w, s, xq) = (w.as_ptr().add(r0 * half), s.as_ptr().add(r0 * groups), a.xq.as_ptr());
        let m0f = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        let mut acc = [_mm256_setzero_ps(); R];
        let full = k / 64;
        for c in 0..full {
            let xe = _mm256_loadu_si256(xq.add(c * 64) as *const __m256i);
            let xo = _mm256_loadu_si256(xq.add(c * 64 + 32) as *const __m256i);
            let corr = _mm256_loadu_si256(a.lane_corr.as_ptr().add(c * 8) as *const __m256i);
            let sx = _mm256_loadu_ps(a.lane_sx.as_ptr().add(c * 8));
            for r in 0..R {
                if c % 2 == 0 {
                    // Next row block, same line: rows are too short for the hardware prefetcher.
                    _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add((r + R) * half + c * 32) as *const i8);
                }
                let v = _mm256_loadu_si256(w.add(r * half + c * 32) as *const __m256i);
                let lo = _mm256_and_si256(v, m0f);
                let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
                let p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
                let i = _mm256_sub_epi32(_mm256_madd_epi16(p, ones), corr);
                let s2 = _mm_castpd_ps(_mm_load_sd(s.add(r * groups + 2 * c) as *const f64));
                let d = _mm256_mul_ps(sx, _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s2), spread));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), d, acc[r]);
            }
        }
        let mut o = [0.0f32; R];
        for r in 0..R {
            o[r] = hsum(acc[r]);
        }
        if k % 64 != 0 {
            // A final 32-element chunk (one group), in 128-bit halves.
            let c = full;
            let g = 2 * c;
            let xe = _mm_loadu_si128(xq.add(c * 64) as *const __m128i);
            let xo = _mm_loadu_si128(xq.add(c * 64 + 16) as *const __m128i);
            let m = _mm_set1_epi8(0x0F);
            for r in 0..R {
                let v = _mm_loadu_si128(w.add(r * half + c * 32) as *const __m128i);
                let lo = _mm_and_si128(v, m);
                let hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
                let p = _mm_add_epi16(_mm_maddubs_epi16(lo, xe), _mm_maddubs_epi16(hi, xo));
                let i = _mm_madd_epi16(p, _mm_set1_epi16(1));
                let i = _mm_add_epi32(i, _mm_shuffle_epi32(i, 0b01_00_11_10));
                let i = _mm_add_epi32(i, _mm_shuffle_epi32(i, 0b10_11_00_01));
                let isum = _mm_cvtsi128_si32(i) - *a.corr.get_unchecked(g);
                o[r] += (*a.sx.get_unchecked(g) * *s.add(r * groups + g)) * isum as f32;
            }
        }
        o
    }

    /// group ≥ 64: whole 64-element chunks per group; i16 sums across a group's chunks (≤ 4
    /// chunks · 2 · 3810 per lane, below i16::MAX).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn da_block_big<const R: usize>(r0: usize, w: &[u8], k: usize, s: &[f32], group: usize, a: &Act8) -> [f32; R] {
        let groups = k / group;
        let half = k / 2;
        let (w, s, xq) = (w.as_ptr().add(r0 * half), s.as_ptr().add(r0 * groups), a.xq.as_ptr());
        let m0f = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); R];
        let chunks = group / 64;
        for g in 0..groups {
            let mut p = [_mm256_setzero_si256(); R];
            for c in g * chunks..(g + 1) * chunks {
                let xe = _mm256_loadu_si256(xq.add(c * 64) as *const __m256i);
                let xo = _mm256_loadu_si256(xq.add(c * 64 + 32) as *const __m256i);
                for r in 0..R {
                    if c % 2 == 0 {
                        _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add((r + R) * half + c * 32) as *const i8);
                    }
                    let v = _mm256_loadu_si256(w.add(r * half + c * 32) as *const __m256i);
                    let lo = _mm256_and_si256(v, m0f);
                    let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
                    p[r] = _mm256_add_epi16(p[r], _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo)));
                }
            }
            let corr = _mm256_loadu_si256(a.lane_corr.as_ptr().add(g * 8) as *const __m256i);
            let sx = *a.sx.get_unchecked(g);
            for r in 0..R {
                let i = _mm256_sub_epi32(_mm256_madd_epi16(p[r], ones), corr);
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(sx * *s.add(r * groups + g)), acc[r]);
            }
        }
        let mut o = [0.0f32; R];
        for r in 0..R {
            o[r] = hsum(acc[r]);
        }
        o
    }

    /// # Safety
    /// AVX2 present; sizes as checked by `super::rows_8da4w`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows_8da4w(w: &[u8], k: usize, s: &[f32], group: usize, a: &Act8, out: &mut [f32]) {
        if group == 32 {
            by_fours!(out, da_block32, w, k, s, a)
        } else {
            by_fours!(out, da_block_big, w, k, s, group, a)
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use core::arch::aarch64::*;

    use super::{chunk_len, Act8};

    /// Rows of a 4-bit format: `chunk` gives each chunk's integer sums for its first and second
    /// 32 elements; they are summed per group, offset-corrected and scaled.
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn rows_by_chunks(
        w: &[u8],
        k: usize,
        s: &[f32],
        group: usize,
        a: &Act8,
        out: &mut [f32],
        chunk: unsafe fn(*const u8, *const i8, usize) -> (int32x4_t, int32x4_t),
    ) {
        let groups = k / group;
        for (r, o) in out.iter_mut().enumerate() {
            let row = w.as_ptr().add(r * k / 2);
            let mut isum = vdupq_n_s32(0);
            let mut y = 0.0f32;
            let mut e0 = 0;
            // Adds group g's integer sum (lanes of `v`) to y.
            let flush = |g: usize, v: int32x4_t, y: &mut f32| {
                *y += (a.sx[g] * s[r * groups + g]) * (vaddvq_s32(v) - a.corr[g]) as f32;
            };
            while e0 < k {
                let len = chunk_len(e0, k);
                let (lo, hi) = chunk(row.add(e0 / 2), a.xq.as_ptr().add(e0), len);
                if group == 32 {
                    flush(e0 / 32, lo, &mut y);
                    if len == 64 {
                        flush(e0 / 32 + 1, hi, &mut y);
                    }
                } else {
                    isum = vaddq_s32(isum, vaddq_s32(lo, hi));
                    if (e0 + len) % group == 0 {
                        flush(e0 / group, isum, &mut y);
                        isum = vdupq_n_s32(0);
                    }
                }
                e0 += len;
            }
            *o = y;
        }
    }

    /// Σ u·xq of one 8da4w chunk: i32 lanes for its first and second 32 elements. Bytes
    /// 0..len/2 hold (even, odd) element pairs; `xq` holds [evens | odds].
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn da_chunk(wp: *const u8, xq: *const i8, len: usize) -> (int32x4_t, int32x4_t) {
        let m = vdupq_n_u8(0x0F);
        let odds = len / 2;
        let half = |at: usize| {
            let v = vld1q_u8(wp.add(at));
            let lo = vreinterpretq_s8_u8(vandq_u8(v, m));
            let hi = vreinterpretq_s8_u8(vshrq_n_u8::<4>(v));
            let (xe, xo) = (vld1q_s8(xq.add(at)), vld1q_s8(xq.add(odds + at)));
            // 4 products of |u·xq| ≤ 15·127 per i16 lane: no overflow.
            let p = vmull_s8(vget_low_s8(lo), vget_low_s8(xe));
            let p = vmlal_high_s8(p, lo, xe);
            let p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(xo));
            let p = vmlal_high_s8(p, hi, xo);
            vpaddlq_s16(p)
        };
        let a = half(0);
        let b = if len == 64 { half(16) } else { vdupq_n_s32(0) };
        (a, b)
    }

    /// # Safety
    /// Sizes as checked by `super::rows_8da4w`.
    #[target_feature(enable = "neon")]
    pub unsafe fn rows_8da4w(w: &[u8], k: usize, s: &[f32], group: usize, a: &Act8, out: &mut [f32]) {
        rows_by_chunks(w, k, s, group, a, out, da_chunk)
    }

    /// # Safety
    /// `w` holds `out.len()` rows of `k`, `x` at least `k`.
    #[target_feature(enable = "neon")]
    pub unsafe fn rows_q8(w: &[i8], k: usize, x: &[f32], out: &mut [f32]) {
        let k8 = k & !7;
        for (r, o) in out.iter_mut().enumerate() {
            let p = w.as_ptr().add(r * k);
            let (mut a0, mut a1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
            let mut i = 0;
            while i < k8 {
                let v = vmovl_s8(vld1_s8(p.add(i)));
                a0 = vfmaq_f32(a0, vcvtq_f32_s32(vmovl_s16(vget_low_s16(v))), vld1q_f32(x.as_ptr().add(i)));
                a1 = vfmaq_f32(a1, vcvtq_f32_s32(vmovl_s16(vget_high_s16(v))), vld1q_f32(x.as_ptr().add(i + 4)));
                i += 8;
            }
            let mut s = vaddvq_f32(vaddq_f32(a0, a1));
            while i < k {
                s += *p.add(i) as f32 * x[i];
                i += 1;
            }
            *o = s;
        }
    }
}
