//! Row-block dot products of GGUF's block formats that rbuild keeps as they are, on float
//! activations: the file's weights are used exactly as stored and nothing else is rounded, so
//! a kept Q4_1/Q8_0 program computes what its dequantized float twin computes. (Rounding the
//! activations to int8 per block, as llama.cpp's q8_1 path does, moved SmolLM2-135M-Instruct's
//! perplexity by 1.4 % on the Q4_1 file.)
//!
//! - grouped int8 (`rbuild::linear_q8g`, Q8_0 at group 32): `w = s_g · q`, so
//!   `out[r] = Σ_g s[r, g] · Σ_{i∈g} q[r, i] · x[i]`.
//! - int4 with minimums (`rbuild::linear_q4_1`, Q4_1 at group 32): `w = d_g · u + m_g`, u the
//!   unsigned nibble, so `out[r] = Σ_g (d[r, g] · Σ_{i∈g} u[r, i] · x[i] + m[r, g] · Σ_{i∈g} x[i])`;
//!   the group sums of `x` are taken once per activation row ([`prep_q4_1`]).
//!
//! Codes are widened to i32 and converted to f32 in registers (8 per AVX2 vector, 4 per NEON
//! one) and multiplied into per-block f32 sums; the SIMD paths are checked against the portable
//! kernels within float summation-order error.

use alloc::vec::Vec;

use super::simd::Isa;

/// Elements per block: the weights' codes are walked 32 at a time.
pub const BLOCK: usize = 32;

/// One activation row prepared for int4 with minimums.
#[derive(Default)]
pub struct ActQ4Min {
    /// `x` with each 32-element block's even elements first, then its odd ones: the order of a
    /// block's low nibbles, then its high nibbles.
    pub xp: Vec<f32>,
    /// Per group: Σ x.
    pub xsum: Vec<f32>,
}

/// Prepares `x` (a multiple of `group`, itself a multiple of [`BLOCK`], long).
pub fn prep_q4_1(x: &[f32], group: usize, a: &mut ActQ4Min) {
    a.xp.clear();
    for b in x.chunks_exact(BLOCK) {
        a.xp.extend(b.iter().step_by(2));
        a.xp.extend(b.iter().skip(1).step_by(2));
    }
    a.xsum.clear();
    a.xsum.extend(x.chunks_exact(group).map(|g| g.iter().sum::<f32>()));
}

/// grouped int8 rows: `out[r] = Σ_g s[r*G + g] · Σ_{i∈g} w[r*k + i] · x[i]` (`G = k / group`).
pub fn rows_q8g(isa: Isa, w: &[i8], k: usize, s: &[f32], group: usize, x: &[f32], out: &mut [f32]) {
    assert!(
        group % BLOCK == 0 && k % group == 0 && w.len() >= out.len() * k && s.len() >= out.len() * (k / group) && x.len() >= k,
        "rows_q8g: operand sizes"
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Isa::Avx2 means AVX2/FMA are present; sizes checked above.
        Isa::Avx2 => unsafe { avx2::rows_q8g(w, k, s, group, x, out) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: NEON is part of the aarch64 baseline; sizes checked above.
        Isa::Neon => unsafe { neon::rows_q8g(w, k, s, group, x, out) },
        _ => {
            let groups = k / group;
            for (r, o) in out.iter_mut().enumerate() {
                let row = &w[r * k..(r + 1) * k];
                let mut y = 0.0f32;
                for (g, (wg, xg)) in row.chunks_exact(group).zip(x.chunks_exact(group)).enumerate() {
                    let dot: f32 = wg.iter().zip(xg).map(|(&q, &xv)| q as f32 * xv).sum();
                    y += s[r * groups + g] * dot;
                }
                *o = y;
            }
        }
    }
}

/// int4-with-minimums rows: `out[r] = Σ_g (d[r*G + g] · Σ_{i∈g} u[r, i] · x[i] + m[r*G + g] ·
/// Σ_{i∈g} x[i])`, `a` from [`prep_q4_1`].
#[allow(clippy::too_many_arguments)]
pub fn rows_q4_1(isa: Isa, w: &[u8], k: usize, d: &[f32], m: &[f32], group: usize, a: &ActQ4Min, out: &mut [f32]) {
    let groups = k / group;
    assert!(
        group % BLOCK == 0
            && k % group == 0
            && w.len() >= out.len() * k / 2
            && d.len() >= out.len() * groups
            && m.len() >= out.len() * groups
            && a.xp.len() >= k
            && a.xsum.len() >= groups,
        "rows_q4_1: operand sizes"
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Isa::Avx2 means AVX2/FMA are present; sizes checked above.
        Isa::Avx2 => unsafe { avx2::rows_q4_1(w, k, d, group, &a.xp, out) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: NEON is part of the aarch64 baseline; sizes checked above.
        Isa::Neon => unsafe { neon::rows_q4_1(w, k, d, group, &a.xp, out) },
        _ => {
            for (r, o) in out.iter_mut().enumerate() {
                let row = &w[r * k / 2..(r + 1) * k / 2];
                let mut y = 0.0f32;
                for (g, (wg, xg)) in row.chunks_exact(group / 2).zip(a.xp.chunks_exact(group)).enumerate() {
                    let mut dot = 0.0f32;
                    for (wb, xb) in wg.chunks_exact(BLOCK / 2).zip(xg.chunks_exact(BLOCK)) {
                        let (even, odd) = xb.split_at(BLOCK / 2);
                        for (j, &byte) in wb.iter().enumerate() {
                            dot += (byte & 0x0F) as f32 * even[j] + (byte >> 4) as f32 * odd[j];
                        }
                    }
                    y += d[r * groups + g] * dot;
                }
                *o = y;
            }
        }
    }
    // The minimums' term: one short float dot per row.
    for (r, o) in out.iter_mut().enumerate() {
        *o += m[r * groups..(r + 1) * groups].iter().zip(&a.xsum[..groups]).map(|(mv, xs)| mv * xs).sum::<f32>();
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use core::arch::x86_64::*;

    use super::super::gemv::avx2::hsum;
    use super::BLOCK;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load_x(x: *const f32) -> [__m256; 4] {
        [_mm256_loadu_ps(x), _mm256_loadu_ps(x.add(8)), _mm256_loadu_ps(x.add(16)), _mm256_loadu_ps(x.add(24))]
    }

    /// 8 int8 codes at `p` as floats.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn i8x8(p: *const i8) -> __m256 {
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p as *const __m128i)))
    }

    /// The low 8 bytes of `v` as floats.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn u8x8(v: __m128i) -> __m256 {
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v))
    }

    /// Σ of 32 int8 codes at `p` times `x`, as 8 partial sums.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_i8(p: *const i8, x: &[__m256; 4]) -> __m256 {
        let s = _mm256_fmadd_ps(i8x8(p), x[0], _mm256_mul_ps(i8x8(p.add(8)), x[1]));
        _mm256_fmadd_ps(i8x8(p.add(16)), x[2], _mm256_fmadd_ps(i8x8(p.add(24)), x[3], s))
    }

    /// Σ of the 32 nibbles of 16 bytes at `p` times `x` (low nibbles against its first 16
    /// floats, high nibbles against the last 16), as 8 partial sums.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_u4(p: *const u8, x: &[__m256; 4]) -> __m256 {
        let bytes = _mm_loadu_si128(p as *const __m128i);
        let mask = _mm_set1_epi8(0x0F);
        let lo = _mm_and_si128(bytes, mask);
        let hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
        let s = _mm256_fmadd_ps(u8x8(lo), x[0], _mm256_mul_ps(u8x8(_mm_srli_si128::<8>(lo)), x[1]));
        _mm256_fmadd_ps(u8x8(hi), x[2], _mm256_fmadd_ps(u8x8(_mm_srli_si128::<8>(hi)), x[3], s))
    }

    /// `R` rows from `r0` of a block format (`NIBBLES`: int4 codes, two per byte; else int8),
    /// each 32-element block's dot product scaled by its group's scale.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_rows<const R: usize, const NIBBLES: bool>(r0: usize, w: *const u8, k: usize, s: &[f32], group: usize, x: &[f32]) -> [f32; R] {
        let (groups, stride, block_bytes) = (k / group, if NIBBLES { k / 2 } else { k }, if NIBBLES { BLOCK / 2 } else { BLOCK });
        let (w, s, x) = (w.add(r0 * stride), s.as_ptr().add(r0 * groups), x.as_ptr());
        let mut acc = [_mm256_setzero_ps(); R];
        for b in 0..k / BLOCK {
            let xv = load_x(x.add(b * BLOCK));
            let g = b * BLOCK / group;
            for (r, acc) in acc.iter_mut().enumerate() {
                let p = w.add(r * stride + b * block_bytes);
                let dot = if NIBBLES { dot_u4(p, &xv) } else { dot_i8(p as *const i8, &xv) };
                *acc = _mm256_fmadd_ps(dot, _mm256_set1_ps(*s.add(r * groups + g)), *acc);
            }
        }
        let mut o = [0.0f32; R];
        for r in 0..R {
            o[r] = hsum(acc[r]);
        }
        o
    }

    /// Every row of `out`, four at a time.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows<const NIBBLES: bool>(w: *const u8, k: usize, s: &[f32], group: usize, x: &[f32], out: &mut [f32]) {
        let n = out.len();
        let mut r = 0;
        while r + 4 <= n {
            out[r..r + 4].copy_from_slice(&block_rows::<4, NIBBLES>(r, w, k, s, group, x));
            r += 4;
        }
        while r < n {
            out[r] = block_rows::<1, NIBBLES>(r, w, k, s, group, x)[0];
            r += 1;
        }
    }

    /// # Safety
    /// AVX2/FMA present; sizes as checked by `super::rows_q8g`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows_q8g(w: &[i8], k: usize, s: &[f32], group: usize, x: &[f32], out: &mut [f32]) {
        rows::<false>(w.as_ptr() as *const u8, k, s, group, x, out)
    }

    /// The scaled nibble sums only (the caller adds the minimums' term).
    ///
    /// # Safety
    /// AVX2/FMA present; sizes as checked by `super::rows_q4_1`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows_q4_1(w: &[u8], k: usize, d: &[f32], group: usize, xp: &[f32], out: &mut [f32]) {
        rows::<true>(w.as_ptr(), k, d, group, xp, out)
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use core::arch::aarch64::*;

    use super::BLOCK;

    /// Σ of 16 codes (as four vectors of 4 floats) times 16 floats at `x`.
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn dot16(c: [float32x4_t; 4], x: *const f32) -> float32x4_t {
        let s = vmulq_f32(c[0], vld1q_f32(x));
        let s = vfmaq_f32(s, c[1], vld1q_f32(x.add(4)));
        let s = vfmaq_f32(s, c[2], vld1q_f32(x.add(8)));
        vfmaq_f32(s, c[3], vld1q_f32(x.add(12)))
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn widen_s8(v: int8x16_t) -> [float32x4_t; 4] {
        let (lo, hi) = (vmovl_s8(vget_low_s8(v)), vmovl_high_s8(v));
        [
            vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))),
            vcvtq_f32_s32(vmovl_high_s16(lo)),
            vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))),
            vcvtq_f32_s32(vmovl_high_s16(hi)),
        ]
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn widen_u8(v: uint8x16_t) -> [float32x4_t; 4] {
        let (lo, hi) = (vmovl_u8(vget_low_u8(v)), vmovl_high_u8(v));
        [
            vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo))),
            vcvtq_f32_u32(vmovl_high_u16(lo)),
            vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi))),
            vcvtq_f32_u32(vmovl_high_u16(hi)),
        ]
    }

    /// # Safety
    /// Sizes as checked by `super::rows_q8g`.
    #[target_feature(enable = "neon")]
    pub unsafe fn rows_q8g(w: &[i8], k: usize, s: &[f32], group: usize, x: &[f32], out: &mut [f32]) {
        let groups = k / group;
        for (r, o) in out.iter_mut().enumerate() {
            let row = w.as_ptr().add(r * k);
            let mut acc = vdupq_n_f32(0.0);
            for b in 0..k / BLOCK {
                let (p, xb) = (row.add(b * BLOCK), x.as_ptr().add(b * BLOCK));
                let sum = vaddq_f32(dot16(widen_s8(vld1q_s8(p)), xb), dot16(widen_s8(vld1q_s8(p.add(16))), xb.add(16)));
                acc = vfmaq_f32(acc, sum, vdupq_n_f32(s[r * groups + b * BLOCK / group]));
            }
            *o = vaddvq_f32(acc);
        }
    }

    /// The scaled nibble sums only (the caller adds the minimums' term).
    ///
    /// # Safety
    /// Sizes as checked by `super::rows_q4_1`.
    #[target_feature(enable = "neon")]
    pub unsafe fn rows_q4_1(w: &[u8], k: usize, d: &[f32], group: usize, xp: &[f32], out: &mut [f32]) {
        let groups = k / group;
        for (r, o) in out.iter_mut().enumerate() {
            let row = w.as_ptr().add(r * k / 2);
            let mut acc = vdupq_n_f32(0.0);
            for b in 0..k / BLOCK {
                let bytes = vld1q_u8(row.add(b * BLOCK / 2));
                let xb = xp.as_ptr().add(b * BLOCK);
                let (lo, hi) = (vandq_u8(bytes, vdupq_n_u8(0x0F)), vshrq_n_u8::<4>(bytes));
                let sum = vaddq_f32(dot16(widen_u8(lo), xb), dot16(widen_u8(hi), xb.add(16)));
                acc = vfmaq_f32(acc, sum, vdupq_n_f32(d[r * groups + b * BLOCK / group]));
            }
            *o = vaddvq_f32(acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::vec;
    use alloc::vec::Vec;

    use half::f16;
    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::kernel::KernelFn;
    use rbuild_runtime::ScalarType;

    use super::super::{linear, simd};
    use crate::optimized::test_util::{assert_close, Lcg};
    use crate::portable::quant_linear::{self as reference, Kind, Linear, Scales, Weights, GROUP_SIZES};

    /// Random weights of both formats for `[n, k]`, with per-group scales and minimums.
    struct Blocks {
        q8: Vec<i8>,
        q4: Vec<u8>,
        scales: Vec<f32>,
        mins: Vec<f32>,
        scales_h: Vec<f16>,
        mins_h: Vec<f16>,
    }

    impl Blocks {
        fn new(r: &mut Lcg, n: usize, k: usize, group: usize) -> Blocks {
            let q8 = (0..n * k).map(|_| (r.next() * 128.0).clamp(-128.0, 127.0) as i8).collect();
            let q4 = (0..n * k / 2).map(|_| ((r.next() + 1.0) * 127.99) as u8).collect();
            let scales: Vec<f32> = (0..n * k / group).map(|_| 0.01 + 0.05 * r.next().abs()).collect();
            let mins: Vec<f32> = (0..n * k / group).map(|_| 0.2 * r.next()).collect();
            let half = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
            Blocks { scales_h: half(&scales), mins_h: half(&mins), q8, q4, scales, mins }
        }

        fn weights(&self, kind: Kind, group: usize, half: bool) -> Weights<'_> {
            let (scales, mins) =
                if half { (Scales::F16(&self.scales_h), Scales::F16(&self.mins_h)) } else { (Scales::F32(&self.scales), Scales::F32(&self.mins)) };
            match kind {
                Kind::Q8Group => Weights::Q8Group { w: &self.q8, scales, group },
                _ => Weights::Q4Min { w: &self.q4, scales, mins, group },
            }
        }
    }

    /// Σ |w·x| over row `j`: float summation-order error scales with it.
    fn magnitude(w: &Weights<'_>, x: &[f32], j: usize) -> f64 {
        let k = x.len();
        match *w {
            Weights::Q8Group { w, scales, group } => {
                x.iter().enumerate().map(|(i, &xv)| (scales.get(j * (k / group) + i / group) * w[j * k + i] as f32 * xv).abs() as f64).sum()
            }
            Weights::Q4Min { w, scales, mins, group } => x
                .iter()
                .enumerate()
                .map(|(i, &xv)| {
                    let e = j * k + i;
                    let u = (if e % 2 == 0 { w[e / 2] & 0x0F } else { w[e / 2] >> 4 }) as f32;
                    let g = j * (k / group) + i / group;
                    ((scales.get(g) * u + mins.get(g)) * xv).abs() as f64
                })
                .sum(),
            _ => unreachable!("block formats only"),
        }
    }

    fn check(kind: Kind, m: usize, k: usize, n: usize, group: usize, bias: bool, half: bool) {
        let mut r = Lcg::new((m * 7919 + k * 31 + n * 3 + group) as u64);
        let x = r.vec(m * k);
        let blocks = Blocks::new(&mut r, n, k, group);
        let b = r.vec(n);
        let p = Linear { x: &x, m, k, n, bias: bias.then_some(&b[..]), w: blocks.weights(kind, group, half) };
        let mut want = vec![0.0; m * n];
        reference::linear_reference(&Default::default(), &p, &mut want);
        for isa in simd::all() {
            for threads in [1, 2, 3] {
                let mut got = vec![f32::NAN; m * n];
                linear::compute_with(isa, threads, &p, &mut got);
                for i in 0..m {
                    for j in 0..n {
                        let mag = magnitude(&p.w, &x[i * k..(i + 1) * k], j);
                        let (g, w) = (got[i * n + j] as f64, want[i * n + j] as f64);
                        let err = (g - w).abs();
                        assert!(
                            err <= 1e-6 * (mag + 1.0),
                            "{kind:?} {isa:?} threads={threads} m={m} k={k} n={n} group={group} bias={bias} half={half} [{i}, {j}]: \
                             {g} vs {w}, error {err} (Σ|w·x| = {mag})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn q8g_and_q4_1_equal_the_portable_kernels_over_shapes() {
        for kind in [Kind::Q8Group, Kind::Q4Min] {
            for &(m, k, n) in &[(1, 32, 1), (1, 64, 7), (3, 96, 9), (1, 256, 33), (17, 128, 13), (3, 576, 67), (1, 4096, 5), (17, 512, 3)] {
                for group in GROUP_SIZES.into_iter().filter(|g| k % g == 0) {
                    check(kind, m, k, n, group, n % 3 == 0 || m == 17, (k / group) % 2 == 1);
                }
            }
        }
    }

    #[test]
    fn extreme_codes_widen_exactly() {
        // The extreme codes (q = −128 / 127, u = 0 / 15) widen to their exact values.
        let (n, k) = (5, 256);
        let q8: Vec<i8> = (0..n * k).map(|i| if i % 3 == 0 { -128 } else { 127 }).collect();
        let q4: Vec<u8> = (0..n * k / 2).map(|i| if i % 5 == 0 { 0x00 } else { 0xFF }).collect();
        let x: Vec<f32> = (0..k).map(|i| if i % 3 == 0 { -1.0 } else { 1.0 }).collect();
        for group in GROUP_SIZES {
            let s = vec![0.5f32; n * k / group];
            let mins = vec![-0.25f32; n * k / group];
            for w in [
                Weights::Q8Group { w: &q8, scales: Scales::F32(&s), group },
                Weights::Q4Min { w: &q4, scales: Scales::F32(&s), mins: Scales::F32(&mins), group },
            ] {
                let p = Linear { x: &x, m: 1, k, n, bias: None, w };
                let mut want = vec![0.0; n];
                reference::linear_reference(&Default::default(), &p, &mut want);
                for isa in simd::all() {
                    let mut got = vec![0.0; n];
                    linear::compute_with(isa, 1, &p, &mut got);
                    assert_close(&got, &want, 1e-6, &format!("{isa:?} group={group}"));
                }
            }
        }
    }

    /// The registered kernels (argument parsing included) against the portable ones.
    #[test]
    fn kernels_match_portable_through_the_harness() {
        let cases: [(KernelFn, KernelFn, Kind); 2] = [
            (linear::linear_q8g_out, reference::linear_q8g_out, Kind::Q8Group),
            (linear::linear_q4_1_out, reference::linear_q4_1_out, Kind::Q4Min),
        ];
        for (fast, slow, kind) in cases {
            for (k, n, group, threads, half) in [(64, 10, 32, 1, true), (256, 7, 64, 2, false), (576, 33, 32, 3, true), (512, 9, 256, 2, true)] {
                let run = |f: KernelFn| {
                    let mut h = OpHarness::new();
                    h.ctx.threads = threads;
                    let mut r = Lcg::new(k as u64);
                    let x = h.f32(&[1, 3, k], &r.vec(3 * k));
                    let blocks = Blocks::new(&mut r, n, k, group);
                    let params = |h: &mut OpHarness, v: &[f32], vh: &[f16]| {
                        if half {
                            h.tensor::<f16>(ScalarType::Half, &[n, k / group], vh)
                        } else {
                            h.f32(&[n, k / group], v)
                        }
                    };
                    let s = params(&mut h, &blocks.scales, &blocks.scales_h);
                    let b = h.f32(&[n], &r.vec(n));
                    let g = h.int(group as i64);
                    let out = h.out_dynamic(ScalarType::Float, &[1, 8, n]);
                    let ids = if kind == Kind::Q8Group {
                        let w = h.tensor::<i8>(ScalarType::Char, &[n, k], &blocks.q8);
                        vec![x, w, s, b, g, out, out]
                    } else {
                        let w = h.tensor::<u8>(ScalarType::Byte, &[n, k / 2], &blocks.q4);
                        let mins = params(&mut h, &blocks.mins, &blocks.mins_h);
                        vec![x, w, s, mins, b, g, out, out]
                    };
                    h.call(f, &ids).unwrap();
                    assert_eq!(h.sizes(out), vec![1, 3, n]);
                    h.read::<f32>(out)
                };
                assert_close(&run(fast), &run(slow), 1e-5, &format!("{kind:?} k={k} group={group} threads={threads}"));
            }
        }
    }
}
