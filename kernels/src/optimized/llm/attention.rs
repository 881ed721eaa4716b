//! Fused attention over the KV cache: per (batch, query row, head), scores against every
//! visible cached key, max-subtracted softmax, weighted sum of cached values; no [S, L]
//! intermediate. Units split over the pool when there is enough work.
//!
//! Long non-causal unmasked attention (an encoder's self-attention: Whisper's is 1500 × 1500)
//! runs blocked instead ([`use_blocked`]): per head and block of query rows, the score block
//! `Q_blk · Kᵀ` and the output block `P · V` are packed sgemms, with a row softmax between;
//! threads take runs of query rows (all heads).

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};

use super::pool;
use super::simd::{self, Isa};
use crate::optimized::gemm::{sgemm, Mat};
use crate::portable::llm::{run_custom_sdpa, run_sdpa_with_kv_cache, Attn};

/// Below this many multiply-adds, one thread is faster than waking another.
const PAR_MIN_WORK: usize = 1 << 15;

/// From this many query rows and keys on, non-causal unmasked attention runs blocked.
pub(crate) const BLOCKED_MIN_SEQ: usize = 32;

/// Query rows per block of the blocked path.
const QBLOCK: usize = 64;

pub fn sdpa_with_kv_cache_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_sdpa_with_kv_cache(ctx, args, attend)
}

pub fn custom_sdpa_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_custom_sdpa(ctx, args, attend)
}

fn attend(ctx: &KernelContext, a: &Attn<'_>, out: &mut [f32]) {
    attend_with(simd::isa(), ctx.threads, a, out)
}

/// The shape query choosing the blocked path: many query rows against many keys, with no
/// per-row key range (causal) or mask to honour.
pub(crate) fn use_blocked(a: &Attn<'_>) -> bool {
    !a.causal && a.mask.is_none() && a.seq >= BLOCKED_MIN_SEQ && a.keys(0) >= BLOCKED_MIN_SEQ
}

/// Attention on the path [`use_blocked`] picks.
pub(crate) fn attend_with(isa: Isa, threads: usize, a: &Attn<'_>, out: &mut [f32]) {
    if use_blocked(a) {
        attend_blocked(isa, threads, a, out)
    } else {
        attend_rows(isa, threads, a, out)
    }
}

/// Blocked attention for [`use_blocked`] shapes (every row sees keys `0..keys(0)`, no mask).
pub(crate) fn attend_blocked(isa: Isa, threads: usize, a: &Attn<'_>, out: &mut [f32]) {
    let (h, dv, n) = (a.heads, a.v_dim, a.keys(0));
    let row = h * dv;
    if row == 0 || out.is_empty() {
        return;
    }
    let group = a.heads / a.kv_heads;
    let work = (a.batch * a.seq * h).saturating_mul(n).saturating_mul(a.dim + dv);
    let threads = if work < PAR_MIN_WORK { 1 } else { threads };
    pool::for_chunks(threads, out, row, &|first, chunk| {
        let mut scores: Vec<f32> = Vec::new();
        let mut acc: Vec<f32> = Vec::new();
        let mut sums = [0.0f32; QBLOCK];
        let rows = chunk.len() / row;
        let mut r = 0;
        while r < rows {
            let (b, i0) = ((first + r) / a.seq, (first + r) % a.seq);
            let qb = (rows - r).min(a.seq - i0).min(QBLOCK);
            scores.resize(qb * n, 0.0);
            acc.resize(qb * dv, 0.0);
            for hh in 0..h {
                let kh = hh / group;
                let q = Mat { data: &a.q[((b * a.seq + i0) * h + hh) * a.dim..], rows: qb, cols: a.dim, row_stride: h * a.dim, col_stride: 1 };
                let kt = Mat { data: &a.k[a.kv_at(b, 0, kh, a.dim)..], rows: a.dim, cols: n, row_stride: 1, col_stride: a.kv_heads * a.dim };
                let v = Mat { data: &a.v[a.kv_at(b, 0, kh, dv)..], rows: n, cols: dv, row_stride: a.kv_heads * dv, col_stride: 1 };
                let ok = sgemm(a.scale, q, kt, 0.0, &mut scores[..qb * n]).is_ok() && {
                    for (s, sum) in scores[..qb * n].chunks_exact_mut(n).zip(sums.iter_mut()) {
                        *sum = softmax(isa, s);
                    }
                    sgemm(1.0, Mat::row_major(&scores[..qb * n], qb, n), v, 0.0, &mut acc[..qb * dv]).is_ok()
                };
                for (k, (ar, &sum)) in acc[..qb * dv].chunks_exact(dv).zip(&sums).enumerate() {
                    let o = &mut chunk[(r + k) * row + hh * dv..][..dv];
                    // Unreachable failure (every view is sized from the checked problem): NaN.
                    let inv = if ok { 1.0 / sum } else { f32::NAN };
                    for (ov, &x) in o.iter_mut().zip(ar) {
                        *ov = x * inv;
                    }
                }
            }
            r += qb;
        }
    });
}

/// `s ← exp(s − max s)` in place; returns the sum.
pub(crate) fn softmax(isa: Isa, s: &mut [f32]) -> f32 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Isa::Avx2 means AVX2/FMA are present; the function only touches `s`.
        Isa::Avx2 => unsafe { softmax_avx2(s) },
        _ => {
            let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for v in s.iter_mut() {
                *v = libm::expf(*v - m);
                sum += *v;
            }
            sum
        }
    }
}

/// The fused per-row path: one (batch, row, head) unit at a time.
pub(crate) fn attend_rows(isa: Isa, threads: usize, a: &Attn<'_>, out: &mut [f32]) {
    let units = a.batch * a.seq * a.heads;
    if units == 0 || a.v_dim == 0 {
        return;
    }
    let work = units.saturating_mul(a.start + a.seq).saturating_mul(a.dim + a.v_dim);
    let threads = if work < PAR_MIN_WORK { 1 } else { threads };
    pool::for_chunks(threads, out, a.v_dim, &|first, chunk| {
        let mut scores = Vec::new();
        for (u, o) in chunk.chunks_exact_mut(a.v_dim).enumerate() {
            one(isa, a, first + u, &mut scores, o);
        }
    });
}

/// Attention for unit `u` = ((b · S) + i) · H + h into `o` (v_dim elements).
fn one(isa: Isa, a: &Attn<'_>, u: usize, scores: &mut Vec<f32>, o: &mut [f32]) {
    let h = u % a.heads;
    let i = (u / a.heads) % a.seq;
    let b = u / (a.heads * a.seq);
    let kh = h / (a.heads / a.kv_heads);
    let n = a.keys(i);
    let q = &a.q[u * a.dim..(u + 1) * a.dim];
    scores.clear();
    scores.resize(n, 0.0);
    let key = |j: usize| &a.k[a.kv_at(b, j, kh, a.dim)..][..a.dim];
    let val = |j: usize| &a.v[a.kv_at(b, j, kh, a.v_dim)..][..a.v_dim];
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Isa::Avx2 means AVX2/FMA are present; key/val slices are bounds-checked.
        Isa::Avx2 => unsafe { one_avx2(a, (b, i, kh), q, scores, o) },
        _ => {
            for (j, s) in scores.iter_mut().enumerate() {
                *s = super::gemv::dot_scalar(q, key(j)) * a.scale + a.bias(i, j);
            }
            let m = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for s in scores.iter_mut() {
                *s = libm::expf(*s - m);
                sum += *s;
            }
            o.fill(0.0);
            for (j, &p) in scores.iter().enumerate() {
                for (ov, &vv) in o.iter_mut().zip(val(j)) {
                    *ov += p * vv;
                }
            }
            let inv = 1.0 / sum;
            o.iter_mut().for_each(|v| *v *= inv);
        }
    }
}

/// The AVX2 body of [`one`], as one target_feature function so the per-position dot
/// products and axpys inline (a call per cached position and head costs more than its work).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn one_avx2(a: &Attn<'_>, (b, i, kh): (usize, usize, usize), q: &[f32], scores: &mut [f32], o: &mut [f32]) {
    use super::gemv::avx2;
    let key = |j: usize| &a.k[a.kv_at(b, j, kh, a.dim)..][..a.dim];
    let val = |j: usize| &a.v[a.kv_at(b, j, kh, a.v_dim)..][..a.v_dim];
    for (j, s) in scores.iter_mut().enumerate() {
        *s = avx2::dot(q, key(j)) * a.scale + a.bias(i, j);
    }
    let sum = softmax_avx2(scores);
    o.fill(0.0);
    for (j, &p) in scores.iter().enumerate() {
        avx2::axpy(p, val(j), o);
    }
    let inv = 1.0 / sum;
    o.iter_mut().for_each(|v| *v *= inv);
}

/// `s ← exp(s − max s)` in place; returns the sum.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn softmax_avx2(s: &mut [f32]) -> f32 {
    use core::arch::x86_64::*;
    let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mv = _mm256_set1_ps(m);
    let mut acc = _mm256_setzero_ps();
    let mut chunks = s.chunks_exact_mut(8);
    for c in &mut chunks {
        let e = super::gemv::avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(c.as_ptr()), mv));
        _mm256_storeu_ps(c.as_mut_ptr(), e);
        acc = _mm256_add_ps(acc, e);
    }
    let mut sum = super::gemv::avx2::hsum(acc);
    for v in chunks.into_remainder() {
        *v = libm::expf(*v - m);
        sum += *v;
    }
    sum
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::vec;

    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    use super::super::simd;
    use crate::optimized::test_util::{assert_close, Lcg};
    use crate::portable::llm::{self as reference, Attn, Mask};

    #[test]
    fn attention_matches_reference_over_shapes() {
        // (batch, seq, heads, kv_heads, dim, v_dim, cache_len, start, causal)
        let cases = [
            (1, 1, 1, 1, 1, 1, 1, 0, true),
            (1, 1, 12, 12, 64, 64, 128, 37, true),
            (1, 5, 4, 2, 16, 16, 16, 3, true),
            (2, 3, 6, 2, 9, 7, 12, 4, true),
            (1, 7, 8, 1, 33, 33, 40, 0, false),
            (1, 1, 4, 4, 64, 64, 600, 599, true),
            (3, 2, 2, 1, 8, 8, 8, 6, false),
        ];
        for (ci, &(b, s, h, kvh, d, dv, cl, start, causal)) in cases.iter().enumerate() {
            let mut r = Lcg::new(ci as u64 + 1);
            let q = r.vec(b * s * h * d);
            let k = r.vec(b * cl * kvh * d).into_iter().map(|v| v * 3.0).collect::<vec::Vec<_>>();
            let v = r.vec(b * cl * kvh * dv);
            let mask = r.vec(s * (start + s));
            for with_mask in [false, !causal] {
                let a = Attn {
                    q: &q,
                    k: &k,
                    v: &v,
                    batch: b,
                    seq: s,
                    heads: h,
                    kv_heads: kvh,
                    dim: d,
                    v_dim: dv,
                    cache_len: cl,
                    start,
                    causal,
                    mask: with_mask.then_some(Mask::Add(&mask, start + s)),
                    scale: 1.0 / (d as f32).sqrt(),
                };
                let mut want = vec![0.0; b * s * h * dv];
                reference::attend_reference(&Default::default(), &a, &mut want);
                for isa in simd::all() {
                    for threads in [1, 2] {
                        let mut got = vec![f32::NAN; want.len()];
                        super::attend_with(isa, threads, &a, &mut got);
                        assert_close(&got, &want, 1e-5, &format!("case {ci} mask={with_mask} {isa:?} threads={threads}"));
                    }
                }
            }
        }
    }

    #[test]
    fn blocked_attention_matches_reference() {
        // (batch, seq, heads, kv_heads, dim, v_dim, cache_len, start): odd sizes, GQA, a
        // block remainder, start_pos > 0, several batches.
        let cases = [
            (1, 32, 1, 1, 8, 8, 32, 0),
            (1, 100, 6, 6, 64, 64, 100, 0),
            (2, 67, 4, 2, 9, 7, 80, 5),
            (1, 130, 3, 1, 33, 16, 140, 1),
        ];
        for (ci, &(b, s, h, kvh, d, dv, cl, start)) in cases.iter().enumerate() {
            let mut r = Lcg::new(ci as u64 + 40);
            let q = r.vec(b * s * h * d);
            let k = r.vec(b * cl * kvh * d).into_iter().map(|v| v * 3.0).collect::<vec::Vec<_>>();
            let v = r.vec(b * cl * kvh * dv);
            let a = Attn {
                q: &q,
                k: &k,
                v: &v,
                batch: b,
                seq: s,
                heads: h,
                kv_heads: kvh,
                dim: d,
                v_dim: dv,
                cache_len: cl,
                start,
                causal: false,
                mask: None,
                scale: 1.0 / (d as f32).sqrt(),
            };
            assert!(super::use_blocked(&a));
            let mut want = vec![0.0; b * s * h * dv];
            reference::attend_reference(&Default::default(), &a, &mut want);
            for isa in simd::all() {
                for threads in [1, 2, 3] {
                    let mut got = vec![f32::NAN; want.len()];
                    super::attend_with(isa, threads, &a, &mut got);
                    assert_close(&got, &want, 1e-5, &format!("blocked case {ci} {isa:?} threads={threads}"));
                    let mut rows = vec![f32::NAN; want.len()];
                    super::attend_rows(isa, threads, &a, &mut rows);
                    assert_close(&rows, &want, 1e-5, &format!("rows case {ci} {isa:?} threads={threads}"));
                }
            }
        }
    }

    #[test]
    fn sdpa_kernels_match_portable_through_the_harness() {
        for threads in [1, 2] {
            let run = |f: rbuild_runtime::kernel::KernelFn| {
                let mut h = OpHarness::new();
                h.ctx.threads = threads;
                let mut r = Lcg::new(3);
                let (b, s, hq, kvh, d, cl) = (1, 3, 4, 2, 16, 10);
                let q = h.f32(&[b, s, hq, d], &r.vec(b * s * hq * d));
                let k = h.f32(&[b, s, kvh, d], &r.vec(b * s * kvh * d));
                let v = h.f32(&[b, s, kvh, d], &r.vec(b * s * kvh * d));
                let kc = h.f32(&[b, cl, kvh, d], &r.vec(b * cl * kvh * d));
                let vc = h.f32(&[b, cl, kvh, d], &r.vec(b * cl * kvh * d));
                let (sp, sl, none, drop, causal) = (h.int(2), h.int(s as i64), h.none(), h.double(0.0), h.bool(true));
                let out = h.out_dynamic(ScalarType::Float, &[b, 8, hq, d]);
                h.call(f, &[q, k, v, kc, vc, sp, sl, none, drop, causal, none, out, out]).unwrap();
                assert_eq!(h.sizes(out), vec![b, s, hq, d]);
                (h.read::<f32>(out), h.read::<f32>(kc))
            };
            let (got, gk) = run(super::sdpa_with_kv_cache_out);
            let (want, wk) = run(reference::sdpa_with_kv_cache_out);
            assert_eq!(gk, wk);
            assert_close(&got, &want, 1e-5, &format!("sdpa_with_kv_cache threads={threads}"));
        }
    }
}
