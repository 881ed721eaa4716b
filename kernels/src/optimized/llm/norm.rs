//! RMSNorm, RoPE and the SiLU-gated product, vectorized. Single-threaded: at decode they touch
//! a few thousand floats, less than waking a worker costs.

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};

use super::simd::{self, Isa};
use crate::portable::llm::{run_rms_norm, run_rope, run_silu_mul, RmsNorm, Rope};

pub fn rms_norm_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_rms_norm(args, |p, out| rms_norm_with(simd::isa(), p, out))
}

pub fn rope_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_rope(args, rope_fast)
}

pub fn silu_mul_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_silu_mul(args, |g, u, out| silu_mul_with(simd::isa(), g, u, out))
}

pub(crate) fn rms_norm_with(isa: Isa, p: &RmsNorm<'_>, out: &mut [f32]) {
    let d = p.w.len();
    if d == 0 {
        return;
    }
    for (x, o) in p.x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        let ss = super::gemv::dot(isa, x, x);
        let r = 1.0 / libm::sqrtf(ss / d as f32 + p.eps);
        // Elementwise: the compiler vectorizes this loop.
        for ((o, &x), &w) in o.iter_mut().zip(x).zip(p.w) {
            *o = w * (x * r);
        }
    }
}

/// The two halves of each head rotate against each other; written as two elementwise loops
/// over the halves so they vectorize.
pub(crate) fn rope_fast(p: &Rope<'_>, out: &mut [f32]) {
    let (d, half) = (p.dim, p.dim / 2);
    if d == 0 {
        return;
    }
    for (r, (x, o)) in p.x.chunks_exact(d).zip(out.chunks_exact_mut(d)).enumerate() {
        let pos = p.start + (r / p.heads) % p.seq;
        let (c, s) = (&p.cos[pos * d..(pos + 1) * d], &p.sin[pos * d..(pos + 1) * d]);
        let (x1, x2) = x.split_at(half);
        let (o1, o2) = o.split_at_mut(half);
        for j in 0..half {
            o1[j] = x1[j] * c[j] - x2[j] * s[j];
        }
        for j in 0..half {
            o2[j] = x2[j] * c[half + j] + x1[j] * s[half + j];
        }
    }
}

pub(crate) fn silu_mul_with(isa: Isa, g: &[f32], u: &[f32], out: &mut [f32]) {
    // Without x86-64 SIMD nothing runs before the scalar tail.
    #[allow(unused_mut)]
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 {
        // SAFETY: AVX2/FMA present (Isa::Avx2); 8-element loads/stores stay below `n`, which
        // bounds all three slices.
        unsafe {
            use core::arch::x86_64::*;
            #[target_feature(enable = "avx2,fma")]
            unsafe fn run(g: &[f32], u: &[f32], out: &mut [f32]) -> usize {
                let n = g.len().min(u.len()).min(out.len());
                let one = _mm256_set1_ps(1.0);
                let mut i = 0;
                while i + 8 <= n {
                    let gv = _mm256_loadu_ps(g.as_ptr().add(i));
                    let e = super::gemv::avx2::exp(_mm256_sub_ps(_mm256_setzero_ps(), gv));
                    let silu = _mm256_div_ps(gv, _mm256_add_ps(one, e));
                    _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_mul_ps(silu, _mm256_loadu_ps(u.as_ptr().add(i))));
                    i += 8;
                }
                i
            }
            i = run(g, u, out);
        }
    }
    let _ = isa;
    for ((o, &g), &u) in out[i..].iter_mut().zip(&g[i..]).zip(&u[i..]) {
        *o = g / (1.0 + libm::expf(-g)) * u;
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::vec;

    use super::super::simd;
    use crate::optimized::test_util::{assert_close, Lcg};
    use crate::portable::llm::{self as reference, RmsNorm, Rope};

    #[test]
    fn rms_norm_matches_reference() {
        for &(rows, d) in &[(1, 1), (3, 7), (1, 768), (5, 33), (2, 2048)] {
            let mut r = Lcg::new((rows * 10000 + d) as u64);
            let (x, w) = (r.vec(rows * d), r.vec(d));
            let p = RmsNorm { x: &x, w: &w, eps: 1e-5 };
            let mut want = vec![0.0; rows * d];
            reference::rms_norm_reference(&p, &mut want);
            for isa in simd::all() {
                let mut got = vec![0.0; rows * d];
                super::rms_norm_with(isa, &p, &mut got);
                assert_close(&got, &want, 1e-5, &format!("{isa:?} {rows}x{d}"));
            }
        }
    }

    #[test]
    fn rope_matches_reference() {
        for &(s, h, d, start, max) in &[(1, 1, 2, 0, 1), (3, 4, 8, 2, 8), (1, 12, 64, 100, 128), (5, 3, 18, 0, 5)] {
            let mut r = Lcg::new((s * 1000 + h * 100 + d) as u64);
            let (x, c, sn) = (r.vec(2 * s * h * d), r.vec(max * d), r.vec(max * d));
            let p = Rope { x: &x, cos: &c, sin: &sn, seq: s, heads: h, dim: d, start };
            let mut want = vec![0.0; x.len()];
            reference::rope_reference(&p, &mut want);
            let mut got = vec![0.0; x.len()];
            super::rope_fast(&p, &mut got);
            assert_close(&got, &want, 1e-6, &format!("rope s={s} h={h} d={d}"));
        }
    }

    #[test]
    fn silu_mul_matches_reference() {
        for n in [1, 7, 8, 9, 2048, 2051] {
            let mut r = Lcg::new(n as u64);
            let g: vec::Vec<f32> = r.vec(n).into_iter().map(|v| v * 20.0).collect();
            let u = r.vec(n);
            let mut want = vec![0.0; n];
            reference::silu_mul_reference(&g, &u, &mut want);
            for isa in simd::all() {
                let mut got = vec![0.0; n];
                super::silu_mul_with(isa, &g, &u, &mut got);
                assert_close(&got, &want, 1e-6, &format!("{isa:?} n={n}"));
            }
        }
    }
}
