//! Whisper's operators, fast: the log-mel front end on a real FFT (`realfft`, std builds; the
//! exact DFT of the portable twin without std) split over frames on the pool, and
//! cross-attention with the projection on the f32 linear (packed sgemm over the pool) and the
//! attention on the fused / blocked attention of [`super::llm::attention`] (float16 caches:
//! F16C dot products over the caches in place).

use alloc::vec;

use half::f16;
use half::slice::HalfFloatSliceExt;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};

use super::llm::simd::{self, Isa};
use super::llm::{attention, gemv, linear, pool};
use crate::portable::llm::Attn;
use crate::portable::quant_linear::{Linear, Weights};
use crate::portable::whisper::{run_cross_attention, run_log_mel, run_log_mel_chunks, Cache, CrossAttn, LogMel, Proj};

pub fn log_mel_spectrogram_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_log_mel(ctx, args, |ctx, p, out| log_mel_with(ctx.threads, p, out))
}

pub fn log_mel_chunks_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_log_mel_chunks(ctx, args, |ctx, p, out| log_mel_with(ctx.threads, p, out))
}

pub fn cross_attention_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_cross_attention(ctx, args, project, |ctx, a, out| cross_attend_with(simd::isa(), ctx.threads, a, out))
}

/// Log-mel features into `out` (`[n_mels, frames]`).
pub(crate) fn log_mel_with(threads: usize, p: &LogMel<'_>, out: &mut [f32]) {
    #[cfg(feature = "std")]
    {
        fft::log_mel(threads, p, out)
    }
    #[cfg(not(feature = "std"))]
    {
        let _ = threads;
        crate::portable::whisper::log_mel_reference(&Default::default(), p, out)
    }
}

#[cfg(feature = "std")]
mod fft {
    use alloc::vec;
    use alloc::vec::Vec;

    use super::super::llm::pool;
    use crate::portable::whisper::{normalize_log_mel, LogMel};

    /// Below this many samples' worth of frames one thread is faster.
    const PAR_MIN_WORK: usize = 1 << 15;

    /// f32 real FFT per frame (the plan is made once per call and shared by every task),
    /// power in f32, each mel filter summed in f64 over its nonzero bins only (Whisper's
    /// slaney filters span a few bins each), log10, then the global normalisation.
    pub fn log_mel(threads: usize, p: &LogMel<'_>, out: &mut [f32]) {
        let (n_fft, bins, frames, n_mels) = (p.n_fft, p.bins(), p.frames, p.n_mels);
        if frames == 0 || n_mels == 0 {
            return;
        }
        let padded = p.padded();
        let plan = realfft::RealFftPlanner::<f32>::new().plan_fft_forward(n_fft);
        let spans: Vec<(usize, usize)> = p
            .filters
            .chunks_exact(bins)
            .map(|f| match f.iter().position(|&v| v != 0.0) {
                Some(lo) => (lo, f.iter().rposition(|&v| v != 0.0).map_or(lo, |hi| hi + 1)),
                None => (0, 0),
            })
            .collect();
        // Frame-major features, so each task writes a contiguous run.
        let mut tmp = vec![0.0f32; frames * n_mels];
        let threads = if frames * n_fft < PAR_MIN_WORK { 1 } else { threads };
        pool::for_chunks(threads, &mut tmp, n_mels, &|first, chunk| {
            let mut input = plan.make_input_vec();
            let mut spec = plan.make_output_vec();
            let mut scratch = plan.make_scratch_vec();
            let mut power = vec![0.0f32; bins];
            for (i, row) in chunk.chunks_exact_mut(n_mels).enumerate() {
                let src = &padded[(first + i) * p.hop..][..n_fft];
                for ((d, &x), &w) in input.iter_mut().zip(src).zip(p.window) {
                    *d = x * w;
                }
                if plan.process_with_scratch(&mut input, &mut spec, &mut scratch).is_err() {
                    // Unreachable: the buffers come from the plan itself.
                    row.fill(f32::NAN);
                    continue;
                }
                for (pw, c) in power.iter_mut().zip(&spec) {
                    *pw = c.re * c.re + c.im * c.im;
                }
                for ((o, f), &(lo, hi)) in row.iter_mut().zip(p.filters.chunks_exact(bins)).zip(&spans) {
                    let e: f64 = f[lo..hi].iter().zip(&power[lo..hi]).map(|(&w, &pv)| w as f64 * pv as f64).sum();
                    *o = libm::log10(e.max(1e-10)) as f32;
                }
            }
        });
        for (t, row) in tmp.chunks_exact(n_mels).enumerate() {
            for (m, &v) in row.iter().enumerate() {
                out[m * frames + t] = v;
            }
        }
        normalize_log_mel(out);
    }
}

/// The caches' projection: the optimized f32 linear (packed sgemm split over the pool).
fn project(ctx: &KernelContext, p: &Proj<'_>, out: &mut [f32]) {
    let lin = Linear { x: p.x, m: p.rows, k: p.k, n: p.n, bias: p.bias, w: Weights::F32(p.w) };
    linear::compute_with(simd::isa(), ctx.threads, &lin, out)
}

/// Cross-attention: float32 caches go to the shared attention kernel; float16 caches are read
/// in place by [`cross_attend_f16`] for short query runs (decode), or converted once for long
/// ones, where the blocked sgemm path pays for the conversion.
pub(crate) fn cross_attend_with(isa: Isa, threads: usize, a: &CrossAttn<'_>, out: &mut [f32]) {
    match (a.k, a.v) {
        (Cache::F32(k), Cache::F32(v)) => cross_attend_f32(isa, threads, a, k, v, out),
        (Cache::F16(k), Cache::F16(v)) if a.seq >= attention::BLOCKED_MIN_SEQ => {
            let (mut kf, mut vf) = (vec![0.0f32; k.len()], vec![0.0f32; v.len()]);
            k.convert_to_f32_slice(&mut kf);
            v.convert_to_f32_slice(&mut vf);
            cross_attend_f32(isa, threads, a, &kf, &vf, out)
        }
        (Cache::F16(k), Cache::F16(v)) => cross_attend_f16(isa, threads, a, k, v, out),
        // run_cross_attention checks both caches have one dtype.
        _ => out.fill(f32::NAN),
    }
}

/// Per batch, query rows in runs of at most T, each an [`Attn`] that sees all T cache
/// positions (non-causal with `start = T - rows`).
fn cross_attend_f32(isa: Isa, threads: usize, a: &CrossAttn<'_>, k: &[f32], v: &[f32], out: &mut [f32]) {
    let (t, hd) = (a.keys, a.heads * a.dim);
    if t == 0 || hd == 0 {
        return;
    }
    for b in 0..a.batch {
        let kv = b * t * hd..(b + 1) * t * hd;
        let mut s0 = 0;
        while s0 < a.seq {
            let c = (a.seq - s0).min(t);
            let rows = (b * a.seq + s0) * hd..(b * a.seq + s0 + c) * hd;
            let at = Attn {
                q: &a.q[rows.clone()],
                k: &k[kv.clone()],
                v: &v[kv.clone()],
                batch: 1,
                seq: c,
                heads: a.heads,
                kv_heads: a.heads,
                dim: a.dim,
                v_dim: a.dim,
                cache_len: t,
                start: t - c,
                causal: false,
                mask: None,
                scale: a.scale,
            };
            attention::attend_with(isa, threads, &at, &mut out[rows]);
            s0 += c;
        }
    }
}

/// One (batch, row, head) unit at a time over float16 caches read in place: scores as a
/// strided float16 GEMV, softmax, then the weighted sum of value rows, all in f32.
fn cross_attend_f16(isa: Isa, threads: usize, a: &CrossAttn<'_>, k: &[f16], v: &[f16], out: &mut [f32]) {
    let (t, h, d) = (a.keys, a.heads, a.dim);
    if t == 0 || d == 0 {
        return;
    }
    let threads = if a.batch * a.seq * h * t * d < (1 << 15) { 1 } else { threads };
    pool::for_chunks(threads, out, d, &|first, chunk| {
        let mut scores = vec![0.0f32; t];
        for (u, o) in chunk.chunks_exact_mut(d).enumerate() {
            let u = first + u;
            let (hh, b) = (u % h, u / (h * a.seq));
            let q = &a.q[u * d..(u + 1) * d];
            // This head's keys and values: rows of D, H·D apart.
            let base = (b * t * h + hh) * d;
            gemv::rows_f16_strided(isa, &k[base..], h * d, d, q, &mut scores);
            for s in scores.iter_mut() {
                *s *= a.scale;
            }
            let sum = attention::softmax(isa, &mut scores);
            gemv::weighted_rows_f16(isa, &scores, &v[base..], h * d, o);
            let inv = 1.0 / sum;
            for x in o.iter_mut() {
                *x *= inv;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::vec::Vec;

    use super::super::llm::simd;
    use crate::optimized::test_util::{assert_close, Lcg};
    use crate::portable::whisper::tests::{fox_inputs, run_cross, run_log_mel};
    use half::f16;

    use crate::portable::whisper::{self as reference, Cache, CrossAttn};

    #[test]
    fn log_mel_matches_portable_over_shapes() {
        // (n, n_fft, hop, n_mels): even and odd FFT sizes, hop not dividing n.
        for (ci, &(n, n_fft, hop, n_mels)) in [(9, 8, 2, 2), (1000, 64, 16, 10), (777, 50, 7, 5), (4001, 400, 160, 80), (300, 33, 10, 3)].iter().enumerate() {
            let mut r = Lcg::new(ci as u64 + 11);
            let pcm = r.vec(n);
            let window: Vec<f32> = (0..n_fft).map(|i| 0.5 - 0.5 * libm::cosf(2.0 * core::f32::consts::PI * i as f32 / n_fft as f32)).collect();
            // Triangular-ish sparse filters with some all-zero rows.
            let bins = n_fft / 2 + 1;
            let filters: Vec<f32> = (0..n_mels * bins).map(|i| if (i / bins) % 4 == 3 || (i % bins) % 3 == 0 { 0.0 } else { r.next().abs() }).collect();
            let (ws, want) = run_log_mel(reference::log_mel_spectrogram_out, 1, &pcm, &window, &filters, n_mels, hop as i64);
            for threads in [1, 2, 3] {
                let (gs, got) = run_log_mel(super::log_mel_spectrogram_out, threads, &pcm, &window, &filters, n_mels, hop as i64);
                assert_eq!(gs, ws);
                let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
                assert!(worst <= 1e-4, "case {ci} threads {threads}: max abs diff {worst}");
            }
        }
    }

    #[test]
    fn log_mel_matches_whisper_features_of_fox() {
        for n_mels in [80, 128] {
            let Some((pcm, window, filters, want)) = fox_inputs(n_mels) else { return };
            let (sizes, got) = run_log_mel(super::log_mel_spectrogram_out, 2, &pcm, &window, &filters, n_mels, 160);
            assert_eq!(sizes, [1, n_mels, 3000]);
            let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
            std::eprintln!("optimized mel{n_mels}: max abs diff vs transformers {worst:e}");
            assert!(worst <= 1e-4, "mel{n_mels}: max abs diff {worst}");
        }
    }

    #[test]
    fn cross_attention_matches_portable() {
        // (B, S, H, D, T, E): decode (S = 1), S > T, odd sizes, Whisper-like.
        for (ci, &(dims, bias)) in [
            ((1, 1, 6, 64, 150, 384), true),
            ((2, 3, 2, 5, 7, 9), false),
            ((1, 9, 3, 4, 4, 6), true),
            ((1, 40, 2, 8, 33, 17), true),
            ((1, 17, 4, 16, 20, 30), false),
        ]
        .iter()
        .enumerate()
        {
            for half in [false, true] {
                let (want, wk, wv) = run_cross(reference::cross_attention_out, 1, dims, bias, 0, ci as u64, None, half);
                // float16 caches: the two projections (f32 sgemm, f64 sums) may round to
                // neighbouring halves (2^-11 relative); from the same caches, 1e-5 again.
                let tol = if half { 2e-3 } else { 1e-5 };
                for threads in [1, 2] {
                    let what = format!("case {ci} threads {threads} half {half}");
                    let (got, gk, gv) = run_cross(super::cross_attention_out, threads, dims, bias, 0, ci as u64, None, half);
                    assert_close(&gk, &wk, tol, &what);
                    assert_close(&gv, &wv, tol, &what);
                    assert_close(&got, &want, tol, &what);
                    let (got, ..) = run_cross(super::cross_attention_out, threads, dims, bias, 2, ci as u64, Some((&wk, &wv)), half);
                    assert_close(&got, &want, 1e-5, &format!("{what} from cache"));
                }
            }
        }
    }

    #[test]
    fn cross_attend_over_isas() {
        let (b, s, h, d, t) = (1, 5, 3, 12, 70);
        let mut r = Lcg::new(99);
        let (q, k, v) = (r.vec(b * 40 * h * d), r.vec(b * t * h * d), r.vec(b * t * h * d));
        let (kh, vh): (Vec<f16>, Vec<f16>) = (k.iter().map(|&x| f16::from_f32(x)).collect(), v.iter().map(|&x| f16::from_f32(x)).collect());
        for (k, v) in [(Cache::F32(&k), Cache::F32(&v)), (Cache::F16(&kh), Cache::F16(&vh))] {
            // s = 5 takes the fused float16 path; 40 query rows the converted blocked one.
            for s in [s, 40] {
                let q = &q[..b * s * h * d];
                let a = CrossAttn { q, k, v, batch: b, seq: s, heads: h, dim: d, keys: t, scale: 0.3 };
                let mut want = alloc::vec![0.0; q.len()];
                reference::cross_attend_reference(&Default::default(), &a, &mut want);
                for isa in simd::all() {
                    let mut got = alloc::vec![f32::NAN; q.len()];
                    super::cross_attend_with(isa, 2, &a, &mut got);
                    assert_close(&got, &want, 1e-5, &format!("{isa:?} s={s} half={}", matches!(k, Cache::F16(_))));
                }
            }
        }
    }

    /// Whisper-tiny shapes (d_model 384, 6 heads, T 1500, ffn 1536): each optimized kernel
    /// against its portable twin, 1 and 2 threads. Run with
    /// `cargo test -p rbuild-kernels --release --lib whisper_tiny_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn whisper_tiny_speed() {
        use rbuild_runtime::harness::OpHarness;
        use rbuild_runtime::kernel::KernelFn;
        use rbuild_runtime::{ScalarType, Value};
        use std::time::Instant;

        type Make<'a> = dyn Fn(&mut OpHarness) -> Vec<u32> + 'a;
        fn time(h: &mut OpHarness, f: KernelFn, ids: &[u32], reps: usize) -> f64 {
            h.call(f, ids).unwrap();
            let mut best = f64::INFINITY;
            for _ in 0..reps {
                let t = Instant::now();
                h.call(f, ids).unwrap();
                best = best.min(t.elapsed().as_secs_f64());
            }
            best * 1e3
        }
        fn bench(name: &str, make: &Make<'_>, fast: KernelFn, slow: KernelFn, slow_reps: usize) {
            let mut h = OpHarness::new();
            let ids = make(&mut h);
            let p = time(&mut h, slow, &ids, slow_reps);
            let mut line = format!("{name:<44} portable {p:>9.2} ms");
            for threads in [1, 2] {
                h.ctx.threads = threads;
                let o = time(&mut h, fast, &ids, 5);
                line += &format!(" | optimized t={threads} {o:>8.2} ms ({:>6.1}x)", p / o);
            }
            std::eprintln!("{line}");
        }
        let mut r = Lcg::new(1);
        let mut rv = move |n: usize| r.vec(n);
        let (t, e, heads, d, ffn) = (1500usize, 384usize, 6usize, 64usize, 1536usize);

        let pcm: Vec<f32> = rv(480_000).into_iter().map(|v| v * 0.3).collect();
        let window: Vec<f32> = (0..400).map(|i| 0.5 - 0.5 * libm::cosf(2.0 * core::f32::consts::PI * i as f32 / 400.0)).collect();
        let filters: Vec<f32> = (0..80 * 201).map(|i| if (i % 201) / 2 == (i / 201) { 0.01 } else { 0.0 }).collect();
        bench(
            "log_mel_spectrogram 30 s, 80 mels",
            &|h| {
                let (p, w, f) = (h.f32(&[480_000], &pcm), h.f32(&[400], &window), h.f32(&[80, 201], &filters));
                let hop = h.int(160);
                let out = h.out(ScalarType::Float, &[1, 80, 3000]);
                vec![p, w, f, hop, out, out]
            },
            super::log_mel_spectrogram_out,
            reference::log_mel_spectrogram_out,
            1,
        );

        let x = rv(t * ffn);
        bench(
            "gelu [1500, 1536]",
            &|h| {
                let xi = h.f32(&[t, ffn], &x);
                let a = h.frame.values.len() as u32;
                h.frame.values.push(Value::String("none".into()));
                let out = h.out(ScalarType::Float, &[t, ffn]);
                vec![xi, a, out, out]
            },
            crate::optimized::act_norm::gelu_out,
            crate::portable::unary::gelu_out,
            3,
        );

        let x = rv(t * e);
        let (w, b) = (rv(e), rv(e));
        bench(
            "native_layer_norm [1, 1500, 384]",
            &|h| {
                let xi = h.f32(&[1, t, e], &x);
                let ns = h.int_list(&[e as i64]);
                let (wi, bi, eps) = (h.f32(&[e], &w), h.f32(&[e], &b), h.double(1e-5));
                let (o0, o1, o2) = (h.out(ScalarType::Float, &[1, t, e]), h.out(ScalarType::Float, &[1, t, 1]), h.out(ScalarType::Float, &[1, t, 1]));
                let l = h.tensor_list(&[o0, o1, o2]);
                vec![xi, ns, wi, bi, eps, o0, o1, o2, l]
            },
            crate::optimized::act_norm::native_layer_norm_out,
            crate::portable::norm::native_layer_norm_out,
            3,
        );

        let (q, k, v) = (rv(t * e), rv(t * e), rv(t * e));
        bench(
            "custom_sdpa [1, 1500, 6, 64] non-causal",
            &|h| {
                let (qi, ki, vi) = (h.f32(&[1, t, heads, d], &q), h.f32(&[1, t, heads, d], &k), h.f32(&[1, t, heads, d], &v));
                let (sp, none, drop, causal) = (h.int(0), h.none(), h.double(0.0), h.bool(false));
                let out = h.out(ScalarType::Float, &[1, t, heads, d]);
                vec![qi, ki, vi, sp, none, drop, causal, none, out, out]
            },
            crate::optimized::llm::attention::custom_sdpa_out,
            crate::portable::llm::custom_sdpa_out,
            1,
        );

        let (mem, kw, vw, kb) = (rv(t * e), rv(e * e), rv(e * e), rv(e));
        let q1 = rv(e);
        for (start, name) in [(0, "cross_attention S=1, T=1500 (projects caches)"), (1, "cross_attention S=1, T=1500 (decode step)")] {
            bench(
                name,
                &|h| {
                    let qi = h.f32(&[1, 1, heads, d], &q1);
                    let mi = h.f32(&[1, t, e], &mem);
                    let (kwi, vwi, kbi, none) = (h.f32(&[e, e], &kw), h.f32(&[e, e], &vw), h.f32(&[e], &kb), h.none());
                    let (kc, vc) = (h.f32(&[1, t, heads, d], &mem), h.f32(&[1, t, heads, d], &mem));
                    let sp = h.int(start);
                    let out = h.out(ScalarType::Float, &[1, 1, heads, d]);
                    vec![qi, mi, kwi, kbi, vwi, none, kc, vc, sp, out, out]
                },
                super::cross_attention_out,
                reference::cross_attention_out,
                if start == 0 { 1 } else { 3 },
            );
        }

        let xm = rv(80 * 3000);
        let w1 = rv(e * 80 * 3);
        let x2 = rv(e * 3000);
        let w2 = rv(e * e * 3);
        let bias = rv(e);
        for (name, cin, len, w, x, stride) in [
            ("conv1d 80->384 k3 p1 over 3000", 80usize, 3000usize, &w1, &xm, 1i64),
            ("conv1d 384->384 k3 s2 p1 over 3000", e, 3000, &w2, &x2, 2),
        ] {
            let olen = (len + 2 - 3) / stride as usize + 1;
            bench(
                name,
                &|h| {
                    let xi = h.f32(&[1, cin, len], x);
                    let wi = h.f32(&[e, cin, 3], w);
                    let bi = h.f32(&[e], &bias);
                    let (s, p, dl) = (h.int_list(&[stride]), h.int_list(&[1]), h.int_list(&[1]));
                    let tr = h.bool(false);
                    let op = h.int_list(&[0]);
                    let g = h.int(1);
                    let out = h.out(ScalarType::Float, &[1, e, olen]);
                    vec![xi, wi, bi, s, p, dl, tr, op, g, out, out]
                },
                crate::optimized::conv::convolution_out,
                crate::portable::conv::convolution_out,
                1,
            );
        }

        let xl = rv(t * e);
        let wl = rv(ffn * e);
        let bl = rv(ffn);
        bench(
            "linear [1500, 384] x [1536, 384]^T + b",
            &|h| {
                let xi = h.f32(&[1, t, e], &xl);
                let wi = h.f32(&[ffn, e], &wl);
                let bi = h.f32(&[ffn], &bl);
                let out = h.out(ScalarType::Float, &[1, t, ffn]);
                vec![xi, wi, bi, out, out]
            },
            crate::optimized::llm::linear::linear_out,
            crate::portable::quant_linear::linear_out,
            1,
        );
    }
}
