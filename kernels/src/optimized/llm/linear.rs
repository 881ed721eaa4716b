//! Optimized linear layers: the portable kernels' argument checks, then SIMD row-block dot
//! products split over output columns on the persistent pool.
//!
//! Decode (M = 1) streams each weight row once. For M > 1 the columns are walked in small row
//! blocks so a block of weights stays in cache while every activation row uses it; f32 with
//! M ≥ [`SGEMM_MIN_M`] goes to `matrixmultiply`'s packed sgemm instead.

use alloc::vec::Vec;

use half::f16;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};

use super::pool;
use super::qblocks::{self, ActQ4Min};
use super::qgemv::{self, Act8};
use super::simd::{self, Isa};
use crate::optimized::gemm::{sgemm, Mat};
use crate::portable::quant_linear::{run_linear, Kind, Linear, Scales, Weights};

/// From this many activation rows on, f32 linear uses the packed sgemm.
pub const SGEMM_MIN_M: usize = 16;

pub fn linear_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::F32, compute)
}

pub fn linear_f16_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::F16, compute)
}

pub fn linear_q8_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::Q8, compute)
}

pub fn linear_q4_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::Q4, compute)
}

pub fn linear_8da4w_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::Da4w, compute)
}

pub fn linear_q8g_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::Q8Group, compute)
}

pub fn linear_q4_1_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_linear(ctx, args, Kind::Q4Min, compute)
}

fn compute(ctx: &KernelContext, p: &Linear<'_>, out: &mut [f32]) {
    compute_with(simd::isa(), ctx.threads, p, out)
}

/// Activation rows prepared for the weight format: int8 per group for rbuild's int4, reordered
/// with group sums for GGUF's Q4_1 (kept at float precision).
enum Prepared {
    Plain,
    Int8(Vec<Act8>),
    WithSums(Vec<ActQ4Min>),
}

/// `out [M, N] = x [M, K] · Wᵀ (+ bias)` on instruction set `isa` with up to `threads` threads.
pub(crate) fn compute_with(isa: Isa, threads: usize, p: &Linear<'_>, out: &mut [f32]) {
    let (m, k, n) = (p.m, p.k, p.n);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for row in out.chunks_exact_mut(n) {
            match p.bias {
                Some(b) => row.copy_from_slice(b),
                None => row.fill(0.0),
            }
        }
        return;
    }
    if m >= SGEMM_MIN_M {
        match p.w {
            Weights::F32(w) => return sgemm_path(threads, p, w, out),
            // Converted once per call: M rows of sgemm dwarf N·K conversions.
            Weights::F16(w) => {
                let mut wf = alloc::vec![0.0f32; w.len()];
                f16_to_f32(isa, w, &mut wf);
                return sgemm_path(threads, p, &wf, out);
            }
            _ => {}
        }
    }
    let prepared = match p.w {
        Weights::Q4 { group, .. } => {
            let mut scratch = Vec::new();
            Prepared::Int8(
                p.x.chunks_exact(k)
                    .map(|x| {
                        let mut a = Act8::default();
                        qgemv::prep_8da4w(x, group, &mut a, &mut scratch);
                        a
                    })
                    .collect(),
            )
        }
        Weights::Q4Min { group, .. } => Prepared::WithSums(
            p.x.chunks_exact(k)
                .map(|x| {
                    let mut a = ActQ4Min::default();
                    qblocks::prep_q4_1(x, group, &mut a);
                    a
                })
                .collect(),
        ),
        _ => Prepared::Plain,
    };
    // Weight rows per sub-block: ~32 KiB of weights, so M > 1 reuses them from cache.
    let row_bytes = match p.w {
        Weights::F32(_) => 4 * k,
        Weights::F16(_) => 2 * k,
        Weights::Q8 { .. } | Weights::Q8Group { .. } => k,
        Weights::Q4 { .. } | Weights::Q4Min { .. } => k / 2,
    };
    let sub = ((32 << 10) / row_bytes.max(1)).clamp(4, 256) & !3;
    pool::for_col_blocks(threads, out, m, n, 4, &|mut blk| {
        let (mut scale_buf, mut min_buf): (Vec<f32>, Vec<f32>) = Default::default();
        let mut nb = blk.start;
        while nb < blk.end {
            let ne = (nb + sub).min(blk.end);
            let (lo, hi) = (nb - blk.start, ne - blk.start);
            match p.w {
                Weights::F32(w) => {
                    for i in 0..m {
                        super::gemv::rows_f32(isa, &w[nb * k..ne * k], k, &p.x[i * k..(i + 1) * k], &mut blk.row(i)[lo..hi]);
                    }
                }
                Weights::F16(w) => {
                    for i in 0..m {
                        super::gemv::rows_f16(isa, &w[nb * k..ne * k], k, &p.x[i * k..(i + 1) * k], &mut blk.row(i)[lo..hi]);
                    }
                }
                Weights::Q8 { w, scales } => {
                    for i in 0..m {
                        let o = &mut blk.row(i)[lo..hi];
                        qgemv::rows_q8(isa, &w[nb * k..ne * k], k, &p.x[i * k..(i + 1) * k], o);
                        for (v, s) in o.iter_mut().zip(&scales[nb..ne]) {
                            *v *= s;
                        }
                    }
                }
                Weights::Q4 { w, scales, group, .. } => {
                    let groups = k / group;
                    let s = row_scales(isa, scales, nb * groups, ne * groups, &mut scale_buf);
                    let wr = &w[nb * k / 2..ne * k / 2];
                    for i in 0..m {
                        let o = &mut blk.row(i)[lo..hi];
                        match &prepared {
                            Prepared::Int8(acts) => qgemv::rows_8da4w(isa, wr, k, s, group, &acts[i], o),
                            _ => unreachable!("int4 weights always prepare int8 activations"),
                        }
                    }
                }
                Weights::Q8Group { w, scales, group } => {
                    let groups = k / group;
                    let s = row_scales(isa, scales, nb * groups, ne * groups, &mut scale_buf);
                    for i in 0..m {
                        qblocks::rows_q8g(isa, &w[nb * k..ne * k], k, s, group, &p.x[i * k..(i + 1) * k], &mut blk.row(i)[lo..hi]);
                    }
                }
                Weights::Q4Min { w, scales, mins, group } => {
                    let groups = k / group;
                    let d = row_scales(isa, scales, nb * groups, ne * groups, &mut scale_buf);
                    let mn = row_scales(isa, mins, nb * groups, ne * groups, &mut min_buf);
                    let Prepared::WithSums(acts) = &prepared else { unreachable!("int4 with minimums prepares sums") };
                    for (i, a) in acts.iter().enumerate() {
                        qblocks::rows_q4_1(isa, &w[nb * k / 2..ne * k / 2], k, d, mn, group, a, &mut blk.row(i)[lo..hi]);
                    }
                }
            }
            if let Some(b) = p.bias {
                for i in 0..m {
                    for (v, bv) in blk.row(i)[lo..hi].iter_mut().zip(&b[nb..ne]) {
                        *v += bv;
                    }
                }
            }
            nb = ne;
        }
    });
}

/// Scales `start..end` as f32: borrowed when Float, converted (F16C on AVX2) when Half.
fn row_scales<'a>(isa: Isa, s: Scales<'a>, start: usize, end: usize, buf: &'a mut Vec<f32>) -> &'a [f32] {
    match s {
        Scales::F32(v) => &v[start..end],
        Scales::F16(v) => {
            let src = &v[start..end];
            buf.clear();
            buf.resize(src.len(), 0.0);
            f16_to_f32(isa, src, buf);
            buf
        }
    }
}

fn f16_to_f32(isa: Isa, src: &[f16], dst: &mut [f32]) {
    // Without x86-64 SIMD nothing runs before the scalar tail.
    #[allow(unused_mut)]
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 {
        use core::arch::x86_64::*;
        // SAFETY: Isa::Avx2 includes F16C; each step reads 8 halves inside `src` and writes 8
        // floats inside `dst` (i + 8 <= len of both).
        unsafe {
            // One call per slice: a target_feature function is not inlined into its caller.
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn cvt(s: *const f16, d: *mut f32, n: usize) -> usize {
                let mut i = 0;
                while i + 8 <= n {
                    _mm256_storeu_ps(d.add(i), _mm256_cvtph_ps(_mm_loadu_si128(s.add(i) as *const __m128i)));
                    i += 8;
                }
                i
            }
            i = cvt(src.as_ptr(), dst.as_mut_ptr(), src.len().min(dst.len()));
        }
    }
    let _ = isa;
    for (d, s) in dst[i..].iter_mut().zip(&src[i..]) {
        *d = s.to_f32();
    }
}

/// f32 prefill: packed sgemm per chunk of activation rows (one chunk per thread).
fn sgemm_path(threads: usize, p: &Linear<'_>, w: &[f32], out: &mut [f32]) {
    let (m, k, n) = (p.m, p.k, p.n);
    let wt = Mat { data: w, rows: k, cols: n, row_stride: 1, col_stride: k };
    let beta = if let Some(b) = p.bias {
        for row in out.chunks_exact_mut(n) {
            row.copy_from_slice(b);
        }
        1.0
    } else {
        0.0
    };
    let per = m.div_ceil(threads.max(1));
    pool::for_col_blocks(threads, out, 1, m * n, per * n, &|mut blk| {
        let (first, rows) = (blk.start / n, (blk.end - blk.start) / n);
        let c = blk.row(0);
        let a = Mat::row_major(&p.x[first * k..(first + rows) * k], rows, k);
        if sgemm(1.0, a, wt, beta, c).is_err() {
            // Unreachable: every view was sized from the checked problem above.
            c.fill(f32::NAN);
        }
    });
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

    use super::super::simd;
    use crate::optimized::test_util::{assert_close, Lcg};
    use crate::portable::quant_linear::{self as reference, Kind, Linear, Scales, Weights};

    /// Random int4 weights packed as the kernels expect, plus scales.
    fn q4_weights(r: &mut Lcg, n: usize, k: usize, group: usize) -> (Vec<u8>, Vec<f32>) {
        let w = (0..n * k / 2).map(|_| ((r.next() + 1.0) * 127.99) as u8).collect();
        let s = (0..n * k / group).map(|_| 0.01 + 0.05 * r.next().abs()).collect();
        (w, s)
    }

    fn check(kind: Kind, m: usize, k: usize, n: usize, group: usize, bias: bool, half: bool) {
        let mut r = Lcg::new((m * 7919 + k * 31 + n * 3 + group) as u64);
        let x = r.vec(m * k);
        let wf = r.vec(n * k);
        let w8: Vec<i8> = (0..n * k).map(|_| (r.next() * 127.0) as i8).collect();
        let s8: Vec<f32> = (0..n).map(|_| 0.01 + 0.02 * r.next().abs()).collect();
        let (w4, s4) = q4_weights(&mut r, n, k, group);
        let s4h: Vec<f16> = s4.iter().map(|&v| f16::from_f32(v)).collect();
        let wh: Vec<f16> = wf.iter().map(|&v| f16::from_f32(v)).collect();
        let b = r.vec(n);
        let scales = if half { Scales::F16(&s4h) } else { Scales::F32(&s4) };
        let w = match kind {
            Kind::F32 => Weights::F32(&wf),
            Kind::F16 => Weights::F16(&wh),
            Kind::Q8 => Weights::Q8 { w: &w8, scales: &s8 },
            Kind::Q4 => Weights::Q4 { w: &w4, scales, group, da: false },
            Kind::Da4w => Weights::Q4 { w: &w4, scales, group, da: true },
            // Held to their own rounding bounds in `qblocks`' tests.
            Kind::Q8Group | Kind::Q4Min => unreachable!("not checked here"),
        };
        let p = Linear { x: &x, m, k, n, bias: bias.then_some(&b[..]), w };
        let mut want = vec![0.0; m * n];
        reference::linear_reference(&Default::default(), &p, &mut want);
        let s4_used: Vec<f32> = if half { s4h.iter().map(|v| v.to_f32()).collect() } else { s4.clone() };
        for isa in simd::all() {
            for threads in [1, 2, 3] {
                let mut got = vec![f32::NAN; m * n];
                super::compute_with(isa, threads, &p, &mut got);
                let what = format!("{kind:?} {isa:?} threads={threads} m={m} k={k} n={n} group={group} bias={bias} half={half}");
                if kind == Kind::Q4 {
                    // Float activations in the reference, int8 per group here: inside the bound.
                    let bias = bias.then_some(&b[..]);
                    for i in 0..m {
                        let row = &got[i * n..(i + 1) * n];
                        assert_within_int8_bound(&x[i * k..(i + 1) * k], &w4, &s4_used, group, bias, row, &what);
                    }
                } else {
                    // 8da4w reorders f32 sums of exact integer group sums only.
                    assert_close(&got, &want, if matches!(kind, Kind::F32 | Kind::F16) { 2e-5 } else { 1e-4 }, &what);
                }
            }
        }
    }

    /// int4 weight-only rounds activations to int8 per group: row j's error against the exact
    /// float-activation product must stay inside Σ_g s_jg · (sx_g / 2) · Σ_{i∈g} |q_ji| (plus
    /// f32 noise), where sx_g = max|x_g| / 127.
    fn assert_within_int8_bound(x: &[f32], w: &[u8], s: &[f32], group: usize, bias: Option<&[f32]>, got: &[f32], what: &str) {
        let k = x.len();
        for (j, &g_out) in got.iter().enumerate() {
            let (mut exact, mut bound, mut mag) = (bias.map_or(0.0, |b| b[j] as f64), 0f64, 0f64);
            for (g, xg) in x.chunks(group).enumerate() {
                let sg = s[j * (k / group) + g] as f64;
                let sx = xg.iter().fold(0f32, |a, v| a.max(v.abs())) as f64 / 127.0;
                for (i, &xv) in xg.iter().enumerate() {
                    let e = g * group + i;
                    let byte = w[j * k / 2 + e / 2];
                    let q = (if e % 2 == 0 { byte & 0x0F } else { byte >> 4 }) as f64 - 8.0;
                    exact += sg * q * xv as f64;
                    bound += sg * q.abs() * sx / 2.0;
                    mag += (sg * q * xv as f64).abs();
                }
            }
            let err = (g_out as f64 - exact).abs();
            assert!(err <= bound + 1e-5 * (mag + exact.abs()), "{what} row {j}: error {err} > bound {bound}");
        }
    }

    #[test]
    fn f32_f16_and_q8_match_reference_over_shapes() {
        for kind in [Kind::F32, Kind::F16, Kind::Q8] {
            for &(m, k, n) in &[(1, 1, 1), (1, 7, 5), (1, 16, 4), (1, 33, 9), (2, 64, 13), (3, 100, 37), (1, 768, 67), (17, 40, 23), (20, 129, 50)] {
                check(kind, m, k, n, 32, n % 2 == 1, false);
            }
        }
    }

    #[test]
    fn q4_and_8da4w_match_reference_for_every_group_size() {
        for kind in [Kind::Q4, Kind::Da4w] {
            for group in crate::portable::quant_linear::GROUP_SIZES {
                for &(m, kg, n) in &[(1, 1, 1), (1, 2, 7), (2, 3, 9), (1, 4, 33), (5, 1, 12)] {
                    check(kind, m, kg * group, n, group, n % 3 == 0, m % 2 == 0);
                }
            }
        }
    }

    #[test]
    fn q4_and_da4w_integer_sums_are_exact_on_extreme_values() {
        // All-max magnitudes: nibble 0 (q = −8) and 15 (q = 7) against xq = ±127 (x = ±1 is
        // exact in int8, so both formats must equal the reference).
        for (k, group, da) in [(256, 256, true), (256, 32, true), (96, 32, true), (128, 64, true), (256, 256, false), (96, 32, false), (256, 128, false)] {
            let (m, n) = (1, 4);
            let x: Vec<f32> = (0..k).map(|i| if i % 3 == 0 { -1.0 } else { 1.0 }).collect();
            let w: Vec<u8> = (0..n * k / 2).map(|i| if i % 5 == 0 { 0x00 } else { 0xFF }).collect();
            let s = vec![1.0f32; n * k / group];
            let p = Linear { x: &x, m, k, n, bias: None, w: Weights::Q4 { w: &w, scales: Scales::F32(&s), group, da } };
            let mut want = vec![0.0; n];
            reference::linear_reference(&Default::default(), &p, &mut want);
            for isa in simd::all() {
                let mut got = vec![0.0; n];
                super::compute_with(isa, 1, &p, &mut got);
                assert_close(&got, &want, 1e-6, &format!("{isa:?} k={k} group={group} da={da}"));
            }
        }
    }

    /// The int8 rounding bound holds even when one large element sets a group's scale and the
    /// rest are tiny (they round to zero: the bound, not the relative error, is what is kept).
    #[test]
    fn q4_activation_rounding_stays_inside_its_bound() {
        let (k, n) = (256, 8);
        for group in crate::portable::quant_linear::GROUP_SIZES {
            let mut r = Lcg::new(group as u64);
            let x: Vec<f32> = (0..k).map(|i| if i % 37 == 0 { 50.0 } else { 1e-3 * r.next() }).collect();
            let (w, s) = q4_weights(&mut r, n, k, group);
            let p = Linear { x: &x, m: 1, k, n, bias: None, w: Weights::Q4 { w: &w, scales: Scales::F32(&s), group, da: false } };
            for isa in simd::all() {
                let mut got = vec![0.0; n];
                super::compute_with(isa, 1, &p, &mut got);
                assert_within_int8_bound(&x, &w, &s, group, None, &got, &format!("{isa:?} group={group}"));
            }
        }
    }

    /// The registered kernels (argument parsing included) against the portable ones.
    #[test]
    fn kernels_match_portable_through_the_harness() {
        let cases: [(KernelFn, KernelFn, Kind); 5] = [
            (super::linear_out, reference::linear_out, Kind::F32),
            (super::linear_f16_out, reference::linear_f16_out, Kind::F16),
            (super::linear_q8_out, reference::linear_q8_out, Kind::Q8),
            // The fast int4 weight-only kernel computes exactly what the portable 8da4w one
            // defines (int8 activations per group); against its float-activation reference it
            // is held to the rounding bound (`q4_activation_rounding_stays_inside_its_bound`).
            (super::linear_q4_out, reference::linear_8da4w_out, Kind::Q4),
            (super::linear_8da4w_out, reference::linear_8da4w_out, Kind::Da4w),
        ];
        let (k, n) = (64, 10);
        for (fast, slow, kind) in cases {
            for threads in [1, 2] {
                let run = |f: KernelFn| {
                    let mut h = OpHarness::new();
                    h.ctx.threads = threads;
                    let mut r = Lcg::new(5);
                    let x = h.f32(&[1, 3, k], &r.vec(3 * k));
                    let none = h.none();
                    let out = h.out_dynamic(ScalarType::Float, &[1, 8, n]);
                    let ids = match kind {
                        Kind::F32 => {
                            let w = h.f32(&[n, k], &r.vec(n * k));
                            vec![x, w, none, out, out]
                        }
                        Kind::F16 => {
                            let wh: Vec<f16> = r.vec(n * k).iter().map(|&v| f16::from_f32(v)).collect();
                            let w = h.tensor::<f16>(ScalarType::Half, &[n, k], &wh);
                            vec![x, w, none, out, out]
                        }
                        Kind::Q8 => {
                            let w8: Vec<i8> = (0..n * k).map(|_| (r.next() * 100.0) as i8).collect();
                            let w = h.tensor::<i8>(ScalarType::Char, &[n, k], &w8);
                            let s = h.f32(&[n], &vec![0.02; n]);
                            vec![x, w, s, none, out, out]
                        }
                        _ => {
                            let (w4, s4) = q4_weights(&mut r, n, k, 32);
                            let w = h.tensor::<u8>(ScalarType::Byte, &[n, k / 2], &w4);
                            let s = h.f32(&[n, k / 32], &s4);
                            let g = h.int(32);
                            vec![x, w, s, none, g, out, out]
                        }
                    };
                    h.call(f, &ids).unwrap();
                    assert_eq!(h.sizes(out), vec![1, 3, n]);
                    h.read::<f32>(out)
                };
                assert_close(&run(fast), &run(slow), 1e-4, &format!("{kind:?} threads={threads}"));
            }
        }
    }
}
