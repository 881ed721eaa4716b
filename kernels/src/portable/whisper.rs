//! Whisper's operators: the log-mel front end (`rbuild::log_mel_spectrogram`, and Voxtral's
//! chunked `rbuild::log_mel_chunks`), decoder
//! cross-attention whose keys/values are projected once per audio window
//! (`rbuild::cross_attention`), and position tables added at an offset (`rbuild::add_positions`).
//! f32 only.
//!
//! The argument checks live in `parse_*`/`run_*` functions that the optimized twins share, so both
//! accept and reject exactly the same calls; the computations here are the plain references.

use alloc::vec;
use alloc::vec::Vec;

use half::f16;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut};
use rbuild_runtime::{kerr, ScalarType};

use super::llm::{f32_arg, f32_out, require_rank, usize_arg};

rbuild_runtime::kernel_table! {
    "rbuild::log_mel_spectrogram.out" => log_mel_spectrogram_out,
    "rbuild::log_mel_chunks.out" => log_mel_chunks_out,
    "rbuild::cross_attention.out" => cross_attention_out,
    "rbuild::add_positions.out" => add_positions_out,
}

// ---------------------------------------------------------------------------------------------
// Log-mel spectrogram
// ---------------------------------------------------------------------------------------------

/// Checked `log_mel_spectrogram` operands.
pub(crate) struct LogMel<'a> {
    pub pcm: &'a [f32],
    pub window: &'a [f32],
    /// `[n_mels, n_fft / 2 + 1]` row-major.
    pub filters: &'a [f32],
    pub n_fft: usize,
    pub n_mels: usize,
    pub hop: usize,
    /// `N / hop`: the STFT's frames without its last one.
    pub frames: usize,
}

impl LogMel<'_> {
    /// Frequency bins of the real DFT.
    pub fn bins(&self) -> usize {
        self.n_fft / 2 + 1
    }

    /// The signal reflect-padded by `n_fft / 2` on both sides (torch.stft, center=True).
    pub fn padded(&self) -> Vec<f32> {
        let (n, p) = (self.pcm.len(), self.n_fft / 2);
        let mut out = Vec::with_capacity(n + 2 * p);
        // Left: pcm[p], pcm[p-1], …, pcm[1]; right: pcm[n-2], …, pcm[n-1-p] (p < n checked).
        out.extend((1..=p).rev().map(|i| self.pcm[i]));
        out.extend_from_slice(self.pcm);
        out.extend((1..=p).map(|i| self.pcm[n - 1 - i]));
        out
    }

    /// Frame `t` of the padded signal times the window, in f64.
    fn frame_f64(&self, padded: &[f32], t: usize, dst: &mut [f64]) {
        let src = &padded[t * self.hop..][..self.n_fft];
        for ((d, &x), &w) in dst.iter_mut().zip(src).zip(self.window) {
            *d = x as f64 * w as f64;
        }
    }
}

/// `log_mel_spectrogram.out(Tensor pcm, Tensor window, Tensor mel_filters, int hop_length, *,
/// Tensor(a!) out)`: args = [pcm, window, mel_filters, hop_length, out, out]. Checks the operands,
/// resizes `out` to `[1, n_mels, N / hop_length]` and calls `f` with its elements
/// (`[n_mels, frames]` row-major).
pub(crate) fn run_log_mel(ctx: &KernelContext, args: &KernelArgs<'_>, f: fn(&KernelContext, &LogMel<'_>, &mut [f32])) -> KernelResult {
    const OP: &str = "rbuild::log_mel_spectrogram";
    let p = log_mel_operands(args, OP)?;
    let mut out = args.out(4)?;
    f32_out(&out, OP, "out")?;
    out.resize(&[1, p.n_mels, p.frames])?;
    f(ctx, &p, out.data_mut()?);
    Ok(())
}

/// The checked pcm/window/mel_filters/hop_length operands (args 0–3) of a log-mel op.
fn log_mel_operands<'a>(args: &KernelArgs<'a>, op: &str) -> KernelResult<LogMel<'a>> {
    let (pcm, window, filters) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    let hop = usize_arg(args, 3, op, "hop_length")?;
    let (pd, wd, fd) = (f32_arg(&pcm, op, "pcm")?, f32_arg(&window, op, "window")?, f32_arg(&filters, op, "mel_filters")?);
    require_rank(pcm.sizes(), 1, op, "pcm")?;
    require_rank(window.sizes(), 1, op, "window")?;
    require_rank(filters.sizes(), 2, op, "mel_filters")?;
    if hop == 0 {
        return Err(kerr!("{op}: hop_length must be positive, got 0"));
    }
    let (n, n_fft) = (pd.len(), wd.len());
    if n_fft == 0 {
        return Err(kerr!("{op}: window must not be empty (its length is n_fft)"));
    }
    let bins = n_fft / 2 + 1;
    let n_mels = filters.sizes()[0];
    if filters.sizes()[1] != bins {
        return Err(kerr!("{op}: mel_filters must be [n_mels, n_fft/2+1 = {bins}] for a window of {n_fft}, got {:?}", filters.sizes()));
    }
    if n <= n_fft / 2 {
        return Err(kerr!("{op}: pcm has {n} samples; reflect padding by n_fft/2 = {} needs more than that", n_fft / 2));
    }
    Ok(LogMel { pcm: pd, window: wd, filters: fd, n_fft, n_mels, hop, frames: n / hop })
}

/// `log_mel_chunks.out(Tensor pcm, Tensor window, Tensor mel_filters, int hop_length, int
/// pad_to, int chunk_frames, *, Tensor(a!) out)`: args = [pcm, window, mel_filters,
/// hop_length, pad_to, chunk_frames, out, out]. Voxtral's front end (HF's feature extractor on
/// long audio): the pcm zero-padded to a multiple of `pad_to` samples covering `n_chunks =
/// ceil(N / (chunk_frames · hop))` chunks, one log-mel with one normalisation over all of it,
/// then its first `n_chunks · chunk_frames` frames as `out` `[n_chunks, n_mels, chunk_frames]`.
pub(crate) fn run_log_mel_chunks(ctx: &KernelContext, args: &KernelArgs<'_>, f: fn(&KernelContext, &LogMel<'_>, &mut [f32])) -> KernelResult {
    const OP: &str = "rbuild::log_mel_chunks";
    let p = log_mel_operands(args, OP)?;
    let pad_to = usize_arg(args, 4, OP, "pad_to")?;
    let chunk_frames = usize_arg(args, 5, OP, "chunk_frames")?;
    if pad_to == 0 || chunk_frames == 0 {
        return Err(kerr!("{OP}: pad_to ({pad_to}) and chunk_frames ({chunk_frames}) must be positive"));
    }
    let chunk_samples = chunk_frames * p.hop;
    let n_chunks = p.pcm.len().div_ceil(chunk_samples).max(1);
    let mut padded = p.pcm.to_vec();
    padded.resize((n_chunks * chunk_samples).div_ceil(pad_to) * pad_to, 0.0);
    let frames = padded.len() / p.hop;
    let mut mel = vec![0.0f32; p.n_mels * frames];
    f(ctx, &LogMel { pcm: &padded, frames, ..p }, &mut mel);
    let mut out = args.out(6)?;
    f32_out(&out, OP, "out")?;
    out.resize(&[n_chunks, p.n_mels, chunk_frames])?;
    let dst = out.data_mut()?;
    for (k, chunk) in dst.chunks_exact_mut(p.n_mels * chunk_frames).enumerate() {
        for (m, row) in chunk.chunks_exact_mut(chunk_frames).enumerate() {
            row.copy_from_slice(&mel[m * frames + k * chunk_frames..][..chunk_frames]);
        }
    }
    Ok(())
}

/// Whisper's normalisation of log10 mel energies `x`: `max(x, max(x) - 8)`, then `(x + 4) / 4`.
pub(crate) fn normalize_log_mel(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let floor = max - 8.0;
    for v in x.iter_mut() {
        *v = (v.max(floor) + 4.0) / 4.0;
    }
}

/// `log10(max(mel, 1e-10))` of one frame's mel energies (f64 in), written to column `t` of
/// `out` (`[n_mels, frames]`).
pub(crate) fn store_log_mel(mel: impl Iterator<Item = f64>, out: &mut [f32], frames: usize, t: usize) {
    for (m, e) in mel.enumerate() {
        out[m * frames + t] = libm::log10(e.max(1e-10)) as f32;
    }
}

/// The reference: an exact real DFT per frame in f64 with a precomputed twiddle table, power,
/// mel projection in f64, log10, Whisper's normalisation.
pub(crate) fn log_mel_reference(_: &KernelContext, p: &LogMel<'_>, out: &mut [f32]) {
    let (n_fft, bins) = (p.n_fft, p.bins());
    if p.frames == 0 || p.n_mels == 0 {
        return;
    }
    let padded = p.padded();
    // cos/sin(2π m / n_fft); bin k, sample n uses index (k·n) mod n_fft.
    let tw: Vec<(f64, f64)> = (0..n_fft)
        .map(|m| {
            let a = 2.0 * core::f64::consts::PI * m as f64 / n_fft as f64;
            (libm::cos(a), libm::sin(a))
        })
        .collect();
    let mut x = vec![0.0f64; n_fft];
    let mut power = vec![0.0f64; bins];
    for t in 0..p.frames {
        p.frame_f64(&padded, t, &mut x);
        for (k, pw) in power.iter_mut().enumerate() {
            let (mut re, mut im, mut idx) = (0.0f64, 0.0f64, 0usize);
            for &xv in &x {
                let (c, s) = tw[idx];
                re += xv * c;
                im -= xv * s;
                idx += k;
                if idx >= n_fft {
                    idx -= n_fft;
                }
            }
            *pw = re * re + im * im;
        }
        let mel = p.filters.chunks_exact(bins).map(|f| f.iter().zip(&power).map(|(&w, &pv)| w as f64 * pv).sum::<f64>());
        store_log_mel(mel, out, p.frames, t);
    }
    normalize_log_mel(out);
}

/// `log_mel_spectrogram.out(Tensor pcm, Tensor window, Tensor mel_filters, int hop_length, *,
/// Tensor(a!) out)`: Whisper's log-mel features `[1, n_mels, N / hop_length]`.
pub fn log_mel_spectrogram_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_log_mel(ctx, args, log_mel_reference)
}

/// `log_mel_chunks.out(…)`: see [`run_log_mel_chunks`].
pub fn log_mel_chunks_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_log_mel_chunks(ctx, args, log_mel_reference)
}

// ---------------------------------------------------------------------------------------------
// Cross-attention
// ---------------------------------------------------------------------------------------------

/// One linear projection `out [rows, n] = x [rows, k] · wᵀ (+ bias)`, `w` `[n, k]`.
#[derive(Clone, Copy)]
pub(crate) struct Proj<'a> {
    pub x: &'a [f32],
    pub rows: usize,
    pub k: usize,
    pub n: usize,
    pub w: &'a [f32],
    pub bias: Option<&'a [f32]>,
}

/// A cross-attention cache: float32, or float16 (half the bytes every decoder step reads).
#[derive(Clone, Copy)]
pub(crate) enum Cache<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
}

impl Cache<'_> {
    #[inline]
    pub fn at(&self, i: usize) -> f32 {
        match self {
            Cache::F32(c) => c[i],
            Cache::F16(c) => c[i].to_f32(),
        }
    }
}

/// Attention of queries `[B, S, H, D]` over all `keys` positions of caches `[B, keys, H, D]`.
#[derive(Clone, Copy)]
pub(crate) struct CrossAttn<'a> {
    pub q: &'a [f32],
    pub k: Cache<'a>,
    pub v: Cache<'a>,
    pub batch: usize,
    pub seq: usize,
    pub heads: usize,
    pub dim: usize,
    pub keys: usize,
    /// `D^-0.5`.
    pub scale: f32,
}

/// A projection weight `[H·D, E]` and its optional bias `[H·D]`.
fn weight_and_bias<'a>(args: &KernelArgs<'a>, wi: usize, n: usize, e: usize, op: &str, wname: &str, bname: &str) -> KernelResult<(&'a [f32], Option<&'a [f32]>)> {
    let w = args.tensor(wi)?;
    let wd = f32_arg(&w, op, wname)?;
    if w.sizes() != [n, e] {
        return Err(kerr!("{op}: {wname} must be [heads*head_dim = {n}, embed = {e}] (Linear [out, in]), got {:?}", w.sizes()));
    }
    let bias = match args.opt_tensor(wi + 1).map_err(|er| kerr!("{op}: {bname}: {er}"))? {
        None => None,
        Some(b) => {
            let bd = f32_arg(&b, op, bname)?;
            if b.sizes() != [n] {
                return Err(kerr!("{op}: {bname} must be [{n}], got {:?}", b.sizes()));
            }
            Some(bd)
        }
    };
    Ok((wd, bias))
}

/// `cross_attention.out(Tensor query, Tensor memory, Tensor k_weight, Tensor? k_bias,
/// Tensor v_weight, Tensor? v_bias, Tensor(a!) key_cache, Tensor(b!) value_cache,
/// SymInt start_pos, *, Tensor(c!) out)`: args = [query, memory, k_weight, k_bias, v_weight,
/// v_bias, key_cache, value_cache, start_pos, out, out].
///
/// With `start_pos == 0` the caches are first filled with `project(memory)`; otherwise memory
/// is not read. Then `out = attend(query, caches)`.
pub(crate) fn run_cross_attention(
    ctx: &KernelContext,
    args: &KernelArgs<'_>,
    project: fn(&KernelContext, &Proj<'_>, &mut [f32]),
    attend: fn(&KernelContext, &CrossAttn<'_>, &mut [f32]),
) -> KernelResult {
    const OP: &str = "rbuild::cross_attention";
    let q = args.tensor(0)?;
    let qd = f32_arg(&q, OP, "query")?;
    let start = usize_arg(args, 8, OP, "start_pos")?;
    require_rank(q.sizes(), 4, OP, "query")?;
    let [b, s, h, d] = [q.sizes()[0], q.sizes()[1], q.sizes()[2], q.sizes()[3]];
    let mut kc = args.out(6)?;
    let mut vc = args.out(7)?;
    let half = kc.dtype == ScalarType::Half;
    for (c, name) in [(&kc, "key_cache"), (&vc, "value_cache")] {
        if !(c.dtype == ScalarType::Float || c.dtype == ScalarType::Half) || c.dtype != kc.dtype || !c.dim_order.is_contiguous() {
            return Err(kerr!("{OP}: key_cache and value_cache must both be contiguous Float or Half, got {name} {} {:?}", c.dtype, c.dim_order));
        }
    }
    require_rank(kc.sizes(), 4, OP, "key_cache")?;
    let t = kc.sizes()[1];
    if kc.sizes() != [b, t, h, d] || vc.sizes() != kc.sizes() {
        return Err(kerr!(
            "{OP}: key_cache {:?} and value_cache {:?} must both be [batch, T, heads, head_dim] matching query {:?}",
            kc.sizes(),
            vc.sizes(),
            q.sizes()
        ));
    }
    if t == 0 {
        return Err(kerr!("{OP}: key_cache has no positions (T = 0): nothing to attend to"));
    }
    let hd = h * d;
    let mem = args.tensor(1)?;
    let m = if start == 0 {
        let md = f32_arg(&mem, OP, "memory")?;
        require_rank(mem.sizes(), 3, OP, "memory")?;
        if mem.sizes()[..2] != [b, t] {
            return Err(kerr!("{OP}: memory {:?} must be [batch = {b}, T = {t}, embed] like key_cache {:?}", mem.sizes(), kc.sizes()));
        }
        Some((md, mem.sizes()[2]))
    } else {
        None
    };
    // The weights are checked on every call (not only when projecting).
    let e = match m {
        Some((_, e)) => e,
        None => args.tensor(2)?.sizes().get(1).copied().unwrap_or(0),
    };
    let (kw, kb) = weight_and_bias(args, 2, hd, e, OP, "k_weight", "k_bias")?;
    let (vw, vb) = weight_and_bias(args, 4, hd, e, OP, "v_weight", "v_bias")?;
    let mut out = args.out(9)?;
    f32_out(&out, OP, "out")?;
    out.resize(&[b, s, h, d])?;
    if let Some((md, e)) = m {
        let rows = b * t;
        let mut f32_rows = if half { vec![0.0f32; rows * hd] } else { Vec::new() };
        for (cache, w, bias) in [(&mut kc, kw, kb), (&mut vc, vw, vb)] {
            let p = Proj { x: md, rows, k: e, n: hd, w, bias };
            if half {
                project(ctx, &p, &mut f32_rows);
                for (h, &x) in cache.data_mut::<f16>()?.iter_mut().zip(&f32_rows) {
                    *h = f16::from_f32(x);
                }
            } else {
                project(ctx, &p, cache.data_mut()?);
            }
        }
    }
    let a = CrossAttn {
        q: qd,
        k: cache_of(&kc, half)?,
        v: cache_of(&vc, half)?,
        batch: b,
        seq: s,
        heads: h,
        dim: d,
        keys: t,
        scale: (1.0 / libm::sqrt(d as f64)) as f32,
    };
    attend(ctx, &a, out.data_mut()?);
    Ok(())
}

fn cache_of<'t>(c: &'t TensorMut<'_>, half: bool) -> KernelResult<Cache<'t>> {
    Ok(if half { Cache::F16(c.data::<f16>()?) } else { Cache::F32(c.data::<f32>()?) })
}

/// Plain projection with f64 sums.
pub(crate) fn project_reference(_: &KernelContext, p: &Proj<'_>, out: &mut [f32]) {
    for (x, o) in p.x.chunks_exact(p.k.max(1)).take(p.rows).zip(out.chunks_exact_mut(p.n.max(1))) {
        for (j, ov) in o.iter_mut().enumerate() {
            let w = &p.w[j * p.k..(j + 1) * p.k];
            let acc: f64 = x.iter().zip(w).map(|(&a, &b)| a as f64 * b as f64).sum();
            *ov = (acc + p.bias.map_or(0.0, |b| b[j] as f64)) as f32;
        }
    }
    if p.k == 0 {
        for o in out.chunks_exact_mut(p.n.max(1)).take(p.rows) {
            for (j, ov) in o.iter_mut().enumerate() {
                *ov = p.bias.map_or(0.0, |b| b[j]);
            }
        }
    }
}

/// Plain attention: per (batch, row, head) scores over every key in f64, max-subtracted
/// softmax, weighted sum of values.
pub(crate) fn cross_attend_reference(_: &KernelContext, a: &CrossAttn<'_>, out: &mut [f32]) {
    let (h, d) = (a.heads, a.dim);
    let mut p = vec![0.0f64; a.keys];
    for b in 0..a.batch {
        for i in 0..a.seq {
            for hh in 0..h {
                let qo = ((b * a.seq + i) * h + hh) * d;
                let q = &a.q[qo..qo + d];
                let kv = |j: usize| ((b * a.keys + j) * h + hh) * d;
                for (j, pj) in p.iter_mut().enumerate() {
                    *pj = q.iter().enumerate().map(|(c, &x)| x as f64 * a.k.at(kv(j) + c) as f64).sum::<f64>() * a.scale as f64;
                }
                let mx = p.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let mut sum = 0.0;
                for pj in p.iter_mut() {
                    *pj = libm::exp(*pj - mx);
                    sum += *pj;
                }
                for (c, o) in out[qo..qo + d].iter_mut().enumerate() {
                    let acc: f64 = p.iter().enumerate().map(|(j, &w)| w * a.v.at(kv(j) + c) as f64).sum();
                    *o = (acc / sum) as f32;
                }
            }
        }
    }
}

/// `cross_attention.out(…)`: see [`run_cross_attention`].
pub fn cross_attention_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_cross_attention(ctx, args, project_reference, cross_attend_reference)
}

// ---------------------------------------------------------------------------------------------
// Position table
// ---------------------------------------------------------------------------------------------

/// `add_positions.out(Tensor input, Tensor table, SymInt start_pos, *, Tensor(a!) out)`:
/// args = [input, table, start_pos, out, out]. `out[b, s, :] = input[b, s, :] +
/// table[start_pos + s, :]` for input `[B, S, E]`, table `[P, E]`.
pub fn add_positions_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "rbuild::add_positions";
    let (x, table) = (args.tensor(0)?, args.tensor(1)?);
    let start = usize_arg(args, 2, OP, "start_pos")?;
    let (xd, td) = (f32_arg(&x, OP, "input")?, f32_arg(&table, OP, "table")?);
    require_rank(x.sizes(), 3, OP, "input")?;
    require_rank(table.sizes(), 2, OP, "table")?;
    let [s, e] = [x.sizes()[1], x.sizes()[2]];
    let p = table.sizes()[0];
    if table.sizes()[1] != e {
        return Err(kerr!("{OP}: table {:?} must have input's embedding size {e} (input {:?})", table.sizes(), x.sizes()));
    }
    if start.checked_add(s).is_none_or(|end| end > p) {
        return Err(kerr!("{OP}: start_pos {start} + S {s} exceeds the table's {p} positions (P = {p})"));
    }
    let mut out = args.out(3)?;
    f32_out(&out, OP, "out")?;
    out.resize(x.sizes())?;
    let o: &mut [f32] = out.data_mut()?;
    if s == 0 || e == 0 {
        return Ok(());
    }
    let rows = &td[start * e..(start + s) * e];
    for (xb, ob) in xd.chunks_exact(s * e).zip(o.chunks_exact_mut(s * e)) {
        // Three equal-length slices: the compiler vectorizes this loop.
        for ((ov, &xv), &tv) in ob.iter_mut().zip(xb).zip(rows) {
            *ov = xv + tv;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use half::f16;
    use alloc::vec;
    use alloc::vec::Vec;

    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    use crate::optimized::test_util::{assert_close, Lcg};

    /// Tensors of `../shared/testdata/models/audio/fox_16k.features.safetensors` by name.
    pub(crate) fn fox_features() -> Option<(Vec<u8>, fn(&[u8], &str) -> (Vec<usize>, Vec<f32>))> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/models/audio/fox_16k.features.safetensors");
        let bytes = std::fs::read(&path).ok()?;
        fn get(bytes: &[u8], name: &str) -> (Vec<usize>, Vec<f32>) {
            let st = safetensors::SafeTensors::deserialize(bytes).unwrap();
            let t = st.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(t.dtype(), safetensors::Dtype::F32, "{name}");
            let v = t.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            (t.shape().to_vec(), v)
        }
        Some((bytes, get))
    }

    /// The waveform zero-padded to 30 s, the window and the `[n_mels, 201]` filters.
    pub(crate) fn fox_inputs(n_mels: usize) -> Option<(Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>)> {
        let Some((bytes, get)) = fox_features() else {
            std::eprintln!("skipping: fox_16k.features.safetensors not found");
            return None;
        };
        let (_, mut pcm) = get(&bytes, "waveform");
        pcm.resize(480_000, 0.0);
        let (_, window) = get(&bytes, "hann_window_400");
        let (fs, f) = get(&bytes, &alloc::format!("mel_filters_{n_mels}"));
        assert_eq!(fs, [201, n_mels]);
        let mut filters = vec![0.0; n_mels * 201];
        for k in 0..201 {
            for m in 0..n_mels {
                filters[m * 201 + k] = f[k * n_mels + m];
            }
        }
        let (ws, want) = get(&bytes, &alloc::format!("mel{n_mels}.full"));
        assert_eq!(ws, [1, n_mels, 3000]);
        Some((pcm, window, filters, want))
    }

    /// Runs a log-mel kernel; returns (out sizes, out).
    pub(crate) fn run_log_mel(f: rbuild_runtime::kernel::KernelFn, threads: usize, pcm: &[f32], window: &[f32], filters: &[f32], n_mels: usize, hop: i64) -> (Vec<usize>, Vec<f32>) {
        let mut h = OpHarness::new();
        h.ctx.threads = threads;
        let n_fft = window.len();
        let p = h.f32(&[pcm.len()], pcm);
        let w = h.f32(&[n_fft], window);
        let fl = h.f32(&[n_mels, n_fft / 2 + 1], filters);
        let hop = h.int(hop);
        let out = h.out_dynamic(ScalarType::Float, &[1, n_mels, pcm.len()]);
        h.call(f, &[p, w, fl, hop, out, out]).unwrap();
        (h.sizes(out), h.read::<f32>(out))
    }

    #[test]
    fn log_mel_matches_whisper_features_of_fox() {
        for n_mels in [80, 128] {
            let Some((pcm, window, filters, want)) = fox_inputs(n_mels) else { return };
            let (sizes, got) = run_log_mel(super::log_mel_spectrogram_out, 1, &pcm, &window, &filters, n_mels, 160);
            assert_eq!(sizes, [1, n_mels, 3000]);
            let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
            std::eprintln!("mel{n_mels}: max abs diff vs transformers {worst:e}");
            assert!(worst <= 1e-4, "mel{n_mels}: max abs diff {worst}");
        }
    }

    /// Voxtral's chunked front end on the fox (2.9 s): one chunk of 320 frames is the first 320
    /// frames of the 30 s features (one normalisation over the padded 30 s); 3000-frame
    /// chunks give exactly the 30 s features.
    #[test]
    fn log_mel_chunks_match_whisper_features_of_fox() {
        let Some((bytes, get)) = fox_features() else { return };
        let Some((_, window, filters, full)) = fox_inputs(128) else { return };
        let (_, pcm) = get(&bytes, "waveform");
        for (chunk_frames, n_chunks) in [(320usize, 1usize), (3000, 1), (100, 3)] {
            let mut h = OpHarness::new();
            let p = h.f32(&[pcm.len()], &pcm);
            let w = h.f32(&[400], &window);
            let fl = h.f32(&[128, 201], &filters);
            let (hop, pad_to, cf) = (h.int(160), h.int(480_000), h.int(chunk_frames as i64));
            let out = h.out_dynamic(ScalarType::Float, &[n_chunks.max(1), 128, chunk_frames]);
            h.call(super::log_mel_chunks_out, &[p, w, fl, hop, pad_to, cf, out, out]).unwrap();
            assert_eq!(h.sizes(out), [n_chunks, 128, chunk_frames]);
            let got = h.read::<f32>(out);
            let want: Vec<f32> = (0..n_chunks)
                .flat_map(|k| (0..128).flat_map(move |m| (0..chunk_frames).map(move |t| (k, m, t))))
                .map(|(k, m, t)| full[m * 3000 + k * chunk_frames + t])
                .collect();
            let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
            std::eprintln!("log_mel_chunks {chunk_frames} frames: max abs diff vs transformers {worst:e}");
            assert!(worst <= 1e-4, "{chunk_frames}: max abs diff {worst}");
        }
        let (ws, first320) = get(&bytes, "mel128.first320");
        assert_eq!(ws, [1, 128, 320]);
        assert_eq!(first320, (0..128).flat_map(|m| full[m * 3000..m * 3000 + 320].to_vec()).collect::<Vec<_>>());
    }

    /// A pure tone's energy lands in the mel band of its bin; the reflect padding and frame
    /// count follow torch.stft(center=True) with the last frame dropped.
    #[test]
    fn log_mel_small_hand_checked() {
        // n_fft 8, hop 2, N 9: padded 17 samples, frames 0..=4 → 4 kept.
        let pcm: Vec<f32> = (0..9).map(|i| i as f32).collect();
        let window = vec![1.0f32; 8];
        // Two "mels": bin 0 only, and bins 1..=4 summed.
        let mut filters = vec![0.0f32; 2 * 5];
        filters[0] = 1.0;
        for k in 1..5 {
            filters[5 + k] = 1.0;
        }
        let (sizes, got) = run_log_mel(super::log_mel_spectrogram_out, 1, &pcm, &window, &filters, 2, 2);
        assert_eq!(sizes, [1, 2, 4]);
        // Padded: [4 3 2 1 | 0 … 8 | 7 6 5 4]; frame t = padded[2t..2t+8].
        let padded: Vec<f64> = [4., 3., 2., 1., 0., 1., 2., 3., 4., 5., 6., 7., 8., 7., 6., 5., 4.].to_vec();
        let mut logs = Vec::new();
        for m in 0..2 {
            for t in 0..4 {
                let x = &padded[2 * t..2 * t + 8];
                let dc: f64 = x.iter().sum();
                // Parseval: Σ_k |X_k|² over all 8 bins = 8 Σ x²; bins 1..=3 appear twice, 4 once.
                let total = 8.0 * x.iter().map(|v| v * v).sum::<f64>();
                let nyq: f64 = x.iter().enumerate().map(|(n, v)| if n % 2 == 0 { *v } else { -v }).sum();
                let e = if m == 0 { dc * dc } else { (total - dc * dc - nyq * nyq) / 2.0 + nyq * nyq };
                logs.push(e.max(1e-10).log10() as f32);
            }
        }
        let mx = logs.iter().copied().fold(f32::MIN, f32::max);
        let want: Vec<f32> = logs.iter().map(|&v| (v.max(mx - 8.0) + 4.0) / 4.0).collect();
        assert_close(&got, &want, 1e-6, "log mel 8-point");
    }

    #[test]
    fn log_mel_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let p = h.f32(&[4], &[0.0; 4]);
        let w = h.f32(&[8], &[1.0; 8]);
        let fl = h.f32(&[2, 5], &[0.0; 10]);
        let bad_fl = h.f32(&[2, 4], &[0.0; 8]);
        let (hop, zero) = (h.int(2), h.int(0));
        let out = h.out_dynamic(ScalarType::Float, &[1, 2, 64]);
        let e = h.call(super::log_mel_spectrogram_out, &[p, w, fl, hop, out, out]).unwrap_err();
        assert!(e.message.contains("rbuild::log_mel_spectrogram") && e.message.contains("pcm has 4 samples"), "{e}");
        let p = h.f32(&[20], &[0.0; 20]);
        let e = h.call(super::log_mel_spectrogram_out, &[p, w, bad_fl, hop, out, out]).unwrap_err();
        assert!(e.message.contains("mel_filters must be [n_mels, n_fft/2+1 = 5]"), "{e}");
        let e = h.call(super::log_mel_spectrogram_out, &[p, w, fl, zero, out, out]).unwrap_err();
        assert!(e.message.contains("hop_length must be positive"), "{e}");
        h.call(super::log_mel_spectrogram_out, &[p, w, fl, hop, out, out]).unwrap();
        assert_eq!(h.sizes(out), [1, 2, 10]);
    }

    /// Builds a cross-attention call; returns (out, key_cache, value_cache).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_cross(
        f: rbuild_runtime::kernel::KernelFn,
        threads: usize,
        (b, s, h, d, t, e): (usize, usize, usize, usize, usize, usize),
        bias: bool,
        start: i64,
        seed: u64,
        caches: Option<(&[f32], &[f32])>,
        half: bool,
    ) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let mut hs = OpHarness::new();
        hs.ctx.threads = threads;
        let mut r = Lcg::new(seed);
        let q = hs.f32(&[b, s, h, d], &r.vec(b * s * h * d));
        let mem = hs.f32(&[b, t, e], &r.vec(b * t * e));
        let kw = hs.f32(&[h * d, e], &r.vec(h * d * e));
        let vw = hs.f32(&[h * d, e], &r.vec(h * d * e));
        let (kb, vb) = if bias { (hs.f32(&[h * d], &r.vec(h * d)), hs.f32(&[h * d], &r.vec(h * d))) } else { (hs.none(), hs.none()) };
        let (kc0, vc0) = caches.map_or_else(|| (vec![f32::NAN; b * t * h * d], vec![f32::NAN; b * t * h * d]), |(k, v)| (k.to_vec(), v.to_vec()));
        let cache = |hs: &mut OpHarness, v: &[f32]| {
            if half {
                let h16: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
                hs.tensor::<f16>(ScalarType::Half, &[b, t, h, d], &h16)
            } else {
                hs.f32(&[b, t, h, d], v)
            }
        };
        let (kc, vc) = (cache(&mut hs, &kc0), cache(&mut hs, &vc0));
        let sp = hs.int(start);
        let out = hs.out_dynamic(ScalarType::Float, &[b, s + 3, h, d]);
        hs.call(f, &[q, mem, kw, kb, vw, vb, kc, vc, sp, out, out]).unwrap();
        assert_eq!(hs.sizes(out), [b, s, h, d]);
        let read = |hs: &OpHarness, c| if half { hs.read::<f16>(c).iter().map(|x| x.to_f32()).collect() } else { hs.read::<f32>(c) };
        (hs.read(out), read(&hs, kc), read(&hs, vc))
    }

    #[test]
    fn cross_attention_hand_computed() {
        let mut h = OpHarness::new();
        // B=1, S=1, H=1, D=2, T=2, E=2; k = memory·Wkᵀ + bk, v = memory (identity, no bias).
        let q = h.f32(&[1, 1, 1, 2], &[1.0, 2.0]);
        let mem = h.f32(&[1, 2, 2], &[1.0, 0.0, 0.0, 1.0]);
        let kw = h.f32(&[2, 2], &[2.0, 0.0, 1.0, 1.0]);
        let kb = h.f32(&[2], &[0.5, -0.5]);
        let vw = h.f32(&[2, 2], &[1.0, 0.0, 0.0, 1.0]);
        let none = h.none();
        let kc = h.f32(&[1, 2, 1, 2], &[0.0; 4]);
        let vc = h.f32(&[1, 2, 1, 2], &[0.0; 4]);
        let sp = h.int(0);
        let out = h.out(ScalarType::Float, &[1, 1, 1, 2]);
        h.call(super::cross_attention_out, &[q, mem, kw, kb, vw, none, kc, vc, sp, out, out]).unwrap();
        // k0 = [2, 1] + b = [2.5, 0.5]; k1 = [0, 1] + b = [0.5, 0.5].
        assert_eq!(h.read::<f32>(kc), [2.5, 0.5, 0.5, 0.5]);
        assert_eq!(h.read::<f32>(vc), [1.0, 0.0, 0.0, 1.0]);
        let sc = 1.0 / 2f32.sqrt();
        let (s0, s1) = ((2.5 + 1.0) * sc, (0.5 + 1.0) * sc);
        let (e0, e1) = (1.0f32, (s1 - s0).exp());
        let want = [e0 / (e0 + e1), e1 / (e0 + e1)];
        assert_close(&h.read::<f32>(out), &want, 1e-6, "cross attention");

        // start_pos > 0: memory is not read (even a wrong-shaped one), the caches are used as
        // they are.
        let junk = h.f32(&[3], &[9.0; 3]);
        let sp = h.int(5);
        let kc2 = h.f32(&[1, 2, 1, 2], &[2.5, 0.5, 0.5, 0.5]);
        let vc2 = h.f32(&[1, 2, 1, 2], &[1.0, 0.0, 0.0, 1.0]);
        h.call(super::cross_attention_out, &[q, junk, kw, kb, vw, none, kc2, vc2, sp, out, out]).unwrap();
        assert_close(&h.read::<f32>(out), &want, 1e-6, "cross attention from the cache");
    }

    /// Decode steps (start_pos > 0) reuse exactly what the first step projected.
    #[test]
    fn cross_attention_decode_reuses_projected_caches() {
        let dims = (2, 3, 2, 4, 5, 6);
        let (out0, kc, vc) = run_cross(super::cross_attention_out, 1, dims, true, 0, 7, None, false);
        assert!(kc.iter().chain(&vc).all(|v| v.is_finite()));
        let (out1, kc1, vc1) = run_cross(super::cross_attention_out, 1, dims, true, 3, 7, Some((&kc, &vc)), false);
        assert_eq!((out0, kc, vc), (out1, kc1, vc1));
    }

    #[test]
    fn cross_attention_rejects_bad_arguments() {
        let mut h = OpHarness::new();
        let q = h.f32(&[1, 1, 2, 2], &[0.0; 4]);
        let mem = h.f32(&[1, 3, 5], &[0.0; 15]);
        let w = h.f32(&[4, 5], &[0.0; 20]);
        let bad_w = h.f32(&[4, 6], &[0.0; 24]);
        let bad_b = h.f32(&[3], &[0.0; 3]);
        let none = h.none();
        let kc = h.f32(&[1, 3, 2, 2], &[0.0; 12]);
        let vc = h.f32(&[1, 3, 2, 2], &[0.0; 12]);
        let bad_c = h.f32(&[1, 4, 2, 2], &[0.0; 16]);
        let bad_c2 = h.f32(&[1, 4, 2, 2], &[0.0; 16]);
        let sp = h.int(0);
        let neg = h.int(-1);
        let out = h.out_dynamic(ScalarType::Float, &[1, 4, 2, 2]);
        let call = |h: &mut OpHarness, ids: &[u32]| h.call(super::cross_attention_out, ids).unwrap_err().message;
        let e = call(&mut h, &[q, mem, bad_w, none, w, none, kc, vc, sp, out, out]);
        assert!(e.contains("rbuild::cross_attention") && e.contains("k_weight must be"), "{e}");
        let e = call(&mut h, &[q, mem, w, none, w, bad_b, kc, vc, sp, out, out]);
        assert!(e.contains("v_bias must be [4]"), "{e}");
        let e = call(&mut h, &[q, mem, w, none, w, none, kc, bad_c, sp, out, out]);
        assert!(e.contains("value_cache"), "{e}");
        let e = call(&mut h, &[q, mem, w, none, w, none, bad_c, bad_c2, sp, out, out]);
        assert!(e.contains("memory [1, 3, 5] must be"), "{e}");
        let e = call(&mut h, &[q, mem, w, none, w, none, kc, vc, neg, out, out]);
        assert!(e.contains("start_pos must be non-negative"), "{e}");
    }

    #[test]
    fn add_positions_adds_table_rows_at_offset() {
        let mut h = OpHarness::new();
        let x = h.f32(&[2, 2, 3], &[1.0; 12]);
        let table: Vec<f32> = (0..15).map(|i| i as f32).collect();
        let t = h.f32(&[5, 3], &table);
        let sp = h.int(2);
        let out = h.out(ScalarType::Float, &[2, 2, 3]);
        h.call(super::add_positions_out, &[x, t, sp, out, out]).unwrap();
        let rows: Vec<f32> = (6..12).map(|i| i as f32 + 1.0).collect();
        let want: Vec<f32> = rows.iter().chain(&rows).copied().collect();
        assert_eq!(h.read::<f32>(out), want);
        let sp = h.int(4);
        let e = h.call(super::add_positions_out, &[x, t, sp, out, out]).unwrap_err();
        assert!(
            e.message.contains("rbuild::add_positions") && e.message.contains("start_pos 4") && e.message.contains("S 2") && e.message.contains("P = 5"),
            "{e}"
        );
        let bad = h.f32(&[5, 2], &[0.0; 10]);
        let sp = h.int(0);
        assert!(h.call(super::add_positions_out, &[x, bad, sp, out, out]).is_err());
    }
}
