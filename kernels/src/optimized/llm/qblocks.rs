//! Row-block dot products of GGUF's block formats that rbuild keeps as they are:
//!
//! - grouped int8 (`rbuild::linear_q8g`, Q8_0 at group 32): `w = d_g · q`. Activations are
//!   quantized to int8 per 32-element block ([`prep_q8`]), as llama.cpp multiplies Q8_0 weights
//!   by Q8_0 activations, so each block is one integer dot product:
//!   `out[r] = Σ_b sx_b · d[r, b/(group/32)] · Σ_{i∈b} q[r, i] · xq[i]`. Per 32 elements rather
//!   than per group, so larger groups round activations no coarser than group 32.
//! - int4 with minimums (`rbuild::linear_q4_1`, Q4_1 at group 32): `w = d_g · u + m_g`, u the
//!   unsigned nibble. `Σ x·w = d_g · Σ u·x + m_g · Σ x` per group: the first term is the int4
//!   kernel of [`super::qgemv`] with no nibble offset (activations int8 per group, as for
//!   `linear_q4`), the second an f32 dot of each row's minimums with the group sums of `x`
//!   (exact float sums, so the minimums see no activation rounding).
//!
//! On AVX2, `_mm256_maddubs_epi16` multiplies unsigned by signed bytes: int8 × int8 goes in as
//! `|q|` times `xq` carrying q's sign (`_mm256_sign_epi8`, llama.cpp's trick); |q| ≤ 128 and
//! |xq| ≤ 127 keep each pair sum (≤ 32,512) inside i16.

use alloc::vec::Vec;

use super::qgemv::{self, Act8};
use super::simd::Isa;
use crate::portable::quant_linear::quantize_group;

/// Elements per activation block of the grouped int8 format.
pub const BLOCK: usize = 32;

/// One activation row quantized to int8 per 32-element block, in element order.
#[derive(Default)]
pub struct ActQ8 {
    pub xq: Vec<i8>,
    /// Per block: sx_b.
    pub sx: Vec<f32>,
}

/// Quantizes `x` (a multiple of [`BLOCK`] long) per block with the portable kernels' rounding.
pub fn prep_q8(x: &[f32], a: &mut ActQ8) {
    a.xq.clear();
    a.xq.resize(x.len(), 0);
    a.sx.clear();
    for (xb, qb) in x.chunks_exact(BLOCK).zip(a.xq.chunks_exact_mut(BLOCK)) {
        a.sx.push(quantize_group(xb, qb));
    }
}

/// grouped int8 rows: `out[r] = Σ_b sx_b · s[r*G + b/(group/32)] · Σ_{i∈b} w[r*k + i] · xq[i]`
/// (`G = k / group`), `a` from [`prep_q8`].
pub fn rows_q8g(isa: Isa, w: &[i8], k: usize, s: &[f32], group: usize, a: &ActQ8, out: &mut [f32]) {
    assert!(
        k % group == 0
            && group % BLOCK == 0
            && w.len() >= out.len() * k
            && s.len() >= out.len() * (k / group)
            && a.xq.len() >= k
            && a.sx.len() >= k / BLOCK,
        "rows_q8g: operand sizes"
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Isa::Avx2 means AVX2/FMA are present; sizes checked above.
        Isa::Avx2 => unsafe { avx2::rows_q8g(w, k, s, group, a, out) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: NEON is part of the aarch64 baseline; sizes checked above.
        Isa::Neon => unsafe { neon::rows_q8g(w, k, s, group, a, out) },
        _ => {
            let (groups, per) = (k / group, group / BLOCK);
            for (r, o) in out.iter_mut().enumerate() {
                let row = &w[r * k..(r + 1) * k];
                let mut y = 0.0f32;
                for (b, (wb, xb)) in row.chunks_exact(BLOCK).zip(a.xq.chunks_exact(BLOCK)).enumerate() {
                    let isum: i32 = wb.iter().zip(xb).map(|(&q, &xq)| q as i32 * xq as i32).sum();
                    y += (a.sx[b] * s[r * groups + b / per]) * isum as f32;
                }
                *o = y;
            }
        }
    }
}

/// One activation row prepared for int4 with minimums.
#[derive(Default)]
pub struct ActQ4Min {
    /// int8 per group, laid out for the int4 kernel, no nibble offset.
    pub act: Act8,
    /// Per group: Σ x (f32).
    pub xsum: Vec<f32>,
}

pub fn prep_q4_1(x: &[f32], group: usize, a: &mut ActQ4Min, scratch: &mut Vec<i8>) {
    qgemv::prep_unsigned4(x, group, &mut a.act, scratch);
    a.xsum.clear();
    a.xsum.extend(x.chunks_exact(group).map(|g| g.iter().sum::<f32>()));
}

/// int4-with-minimums rows: `out[r] = Σ_g (d[r*G + g] · Σ_{i∈g} u[r, i] · x[i] + m[r*G + g] ·
/// Σ_{i∈g} x[i])`, the first sum over int8 activations; `tmp` is scratch.
#[allow(clippy::too_many_arguments)]
pub fn rows_q4_1(isa: Isa, w: &[u8], k: usize, d: &[f32], m: &[f32], group: usize, a: &ActQ4Min, out: &mut [f32], tmp: &mut Vec<f32>) {
    let groups = k / group;
    assert!(m.len() >= out.len() * groups && a.xsum.len() >= groups, "rows_q4_1: operand sizes");
    qgemv::rows_8da4w(isa, w, k, d, group, &a.act, out);
    tmp.clear();
    tmp.resize(out.len(), 0.0);
    super::gemv::rows_f32(isa, m, groups, &a.xsum, tmp);
    for (o, t) in out.iter_mut().zip(tmp.iter()) {
        *o += t;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use core::arch::x86_64::*;

    use super::super::gemv::avx2::hsum;
    use super::{ActQ8, BLOCK};

    /// `R` rows from `r0`: one 32-byte load of weights per block and row.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn q8g_block<const R: usize>(r0: usize, w: &[i8], k: usize, s: &[f32], group: usize, a: &ActQ8) -> [f32; R] {
        let (groups, per) = (k / group, group / BLOCK);
        let (w, s, xq) = (w.as_ptr().add(r0 * k), s.as_ptr().add(r0 * groups), a.xq.as_ptr());
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); R];
        for b in 0..k / BLOCK {
            let x = _mm256_loadu_si256(xq.add(b * BLOCK) as *const __m256i);
            let (sx, g) = (*a.sx.get_unchecked(b), b / per);
            for (r, acc) in acc.iter_mut().enumerate() {
                if b % 2 == 0 {
                    // Next row block, same line: rows are too short for the hardware prefetcher.
                    _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add((r + R) * k + b * BLOCK));
                }
                let v = _mm256_loadu_si256(w.add(r * k + b * BLOCK) as *const __m256i);
                let p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(x, v));
                let i = _mm256_madd_epi16(p, ones);
                *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(sx * *s.add(r * groups + g)), *acc);
            }
        }
        let mut o = [0.0f32; R];
        for r in 0..R {
            o[r] = hsum(acc[r]);
        }
        o
    }

    /// # Safety
    /// AVX2/FMA present; sizes as checked by `super::rows_q8g`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn rows_q8g(w: &[i8], k: usize, s: &[f32], group: usize, a: &ActQ8, out: &mut [f32]) {
        let n = out.len();
        let mut r = 0;
        while r + 4 <= n {
            out[r..r + 4].copy_from_slice(&q8g_block::<4>(r, w, k, s, group, a));
            r += 4;
        }
        while r < n {
            out[r] = q8g_block::<1>(r, w, k, s, group, a)[0];
            r += 1;
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use core::arch::aarch64::*;

    use super::{ActQ8, BLOCK};

    /// # Safety
    /// Sizes as checked by `super::rows_q8g`.
    #[target_feature(enable = "neon")]
    pub unsafe fn rows_q8g(w: &[i8], k: usize, s: &[f32], group: usize, a: &ActQ8, out: &mut [f32]) {
        let (groups, per) = (k / group, group / BLOCK);
        let xq = a.xq.as_ptr();
        for (r, o) in out.iter_mut().enumerate() {
            let row = w.as_ptr().add(r * k);
            let mut acc = vdupq_n_f32(0.0);
            for b in 0..k / BLOCK {
                let (w0, w1) = (vld1q_s8(row.add(b * BLOCK)), vld1q_s8(row.add(b * BLOCK + 16)));
                let (x0, x1) = (vld1q_s8(xq.add(b * BLOCK)), vld1q_s8(xq.add(b * BLOCK + 16)));
                // Two products of |q·xq| ≤ 128·127 per i16 lane: no overflow.
                let p0 = vmlal_high_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)), w0, x0);
                let p1 = vmlal_high_s8(vmull_s8(vget_low_s8(w1), vget_low_s8(x1)), w1, x1);
                let i = vpadalq_s16(vpaddlq_s16(p0), p1);
                let d = a.sx[b] * s[r * groups + b / per];
                acc = vfmaq_f32(acc, vcvtq_f32_s32(i), vdupq_n_f32(d));
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
    use super::BLOCK;
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

    /// Σ |error| the int8 rounding of activations may add to row `j`: each element of
    /// activation block `b` moves by at most sx_b / 2 (sx_b = max|x_b| / 127; blocks of 32 for
    /// grouped int8, of `group` for int4 with minimums), times |its weight code × scale|.
    fn rounding_bound(w: &Weights<'_>, x: &[f32], j: usize) -> (f64, f64) {
        let k = x.len();
        let sx = |xs: &[f32]| xs.iter().fold(0f32, |a, v| a.max(v.abs())) as f64 / 127.0;
        let (mut bound, mut mag) = (0f64, 0f64);
        match *w {
            Weights::Q8Group { w, scales, group } => {
                for (b, xb) in x.chunks(BLOCK).enumerate() {
                    let s = scales.get(j * (k / group) + b * BLOCK / group).abs() as f64;
                    for (i, &xv) in xb.iter().enumerate() {
                        let q = w[j * k + b * BLOCK + i].unsigned_abs() as f64;
                        bound += s * q * sx(xb) / 2.0;
                        mag += s * q * xv.abs() as f64;
                    }
                }
            }
            Weights::Q4Min { w, scales, mins, group } => {
                for (g, xg) in x.chunks(group).enumerate() {
                    let (d, m) = (scales.get(j * (k / group) + g).abs() as f64, mins.get(j * (k / group) + g).abs() as f64);
                    for (i, &xv) in xg.iter().enumerate() {
                        let e = j * k + g * group + i;
                        let u = (if e % 2 == 0 { w[e / 2] & 0x0F } else { w[e / 2] >> 4 }) as f64;
                        bound += d * u * sx(xg) / 2.0;
                        mag += (d * u + m) * xv.abs() as f64;
                    }
                }
            }
            _ => unreachable!("block formats only"),
        }
        (bound, mag)
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
                        let (bound, mag) = rounding_bound(&p.w, &x[i * k..(i + 1) * k], j);
                        let (g, w) = (got[i * n + j] as f64, want[i * n + j] as f64);
                        let err = (g - w).abs();
                        assert!(
                            err <= bound + 1e-5 * (mag + w.abs() + 1.0),
                            "{kind:?} {isa:?} threads={threads} m={m} k={k} n={n} group={group} bias={bias} half={half} [{i}, {j}]: \
                             {g} vs {w}, error {err} > bound {bound}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn q8g_and_q4_1_stay_inside_the_activation_rounding_bound_over_shapes() {
        for kind in [Kind::Q8Group, Kind::Q4Min] {
            for &(m, k, n) in &[(1, 32, 1), (1, 64, 7), (3, 96, 9), (1, 256, 33), (17, 128, 13), (3, 576, 67), (1, 4096, 5), (17, 512, 3)] {
                for group in GROUP_SIZES.into_iter().filter(|g| k % g == 0) {
                    check(kind, m, k, n, group, n % 3 == 0 || m == 17, (k / group) % 2 == 1);
                }
            }
        }
    }

    /// Activations that are exactly int8 per block (integers with a ±127 in every 32 elements,
    /// times a power of two), so the optimized kernels' integer sums are the reference's.
    fn int8_exact(r: &mut Lcg, len: usize, scale: f32) -> Vec<f32> {
        (0..len).map(|i| if i % 32 == 5 { 127.0 * scale } else { (r.next() * 127.0).round() * scale }).collect()
    }

    #[test]
    fn integer_sums_are_exact_on_extreme_codes() {
        // q = −128 / 127 and u = 0 / 15 against |xq| = 127: no i16 pair sum saturates.
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

    /// The registered kernels (argument parsing included) against the portable ones, on
    /// activations the int8 rounding keeps exact.
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
                    let x = h.f32(&[1, 3, k], &int8_exact(&mut r, 3 * k, 1.0 / 64.0));
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
