//! LLM operators: attention over a KV cache (`llama::sdpa_with_kv_cache`, `llama::custom_sdpa`),
//! the cache write (`llama::update_cache`), and the fused `rbuild::` RMSNorm, RoPE and SiLU-gated
//! product. f32 only (the cache update copies any dtype).
//!
//! Layouts follow ExecuTorch: q/k/v `[B, S, H, D]`, caches `[B, max_seq_len, KVH, D]`. Query head
//! `h` reads kv head `h / (H / KVH)` (GQA). Query row `i` sits at absolute position
//! `start_pos + i`; with `is_causal` it attends to cache positions `0..=start_pos + i`, otherwise
//! to all of `0..start_pos + S`.
//!
//! The argument checks live in `parse_*` functions that the optimized twins share, so both accept
//! and reject exactly the same calls.

use alloc::vec::Vec;

use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult, TensorMut, TensorRef};
use rbuild_runtime::{kerr, ScalarType};

rbuild_runtime::kernel_table! {
    "llama::sdpa_with_kv_cache.out" => sdpa_with_kv_cache_out,
    "llama::custom_sdpa.out" => custom_sdpa_out,
    "llama::update_cache.out" => update_cache_out,
    "rbuild::rms_norm.out" => rms_norm_out,
    "rbuild::rope.out" => rope_out,
    "rbuild::silu_mul.out" => silu_mul_out,
}

// ---------------------------------------------------------------------------------------------
// Argument checks shared with the optimized kernels
// ---------------------------------------------------------------------------------------------

/// A contiguous Float input's elements.
pub(crate) fn f32_arg<'a>(t: &TensorRef<'a>, op: &str, name: &str) -> KernelResult<&'a [f32]> {
    if t.dtype != ScalarType::Float {
        return Err(kerr!("{op}: {name} must be Float, got {}", t.dtype));
    }
    if !t.dim_order.is_contiguous() {
        return Err(kerr!("{op}: {name} must be contiguous, got dim order {:?}", t.dim_order));
    }
    t.data::<f32>().map_err(|e| kerr!("{op}: {name}: {e}"))
}

/// Checks that a writable tensor is a contiguous Float tensor.
pub(crate) fn f32_out(t: &TensorMut<'_>, op: &str, name: &str) -> KernelResult {
    if t.dtype != ScalarType::Float {
        return Err(kerr!("{op}: {name} must be Float, got {}", t.dtype));
    }
    if !t.dim_order.is_contiguous() {
        return Err(kerr!("{op}: {name} must be contiguous, got dim order {:?}", t.dim_order));
    }
    Ok(())
}

pub(crate) fn require_rank(sizes: &[usize], rank: usize, op: &str, name: &str) -> KernelResult {
    if sizes.len() != rank {
        return Err(kerr!("{op}: {name} must be {rank}-D, got shape {sizes:?}"));
    }
    Ok(())
}

/// A non-negative `SymInt` argument.
pub(crate) fn usize_arg(args: &KernelArgs<'_>, i: usize, op: &str, name: &str) -> KernelResult<usize> {
    let v = args.int(i).map_err(|e| kerr!("{op}: {name}: {e}"))?;
    usize::try_from(v).map_err(|_| kerr!("{op}: {name} must be non-negative, got {v}"))
}

/// `[B, S, heads, D]` sizes of a rank-4 tensor.
fn bshd(sizes: &[usize], op: &str, name: &str) -> KernelResult<[usize; 4]> {
    require_rank(sizes, 4, op, name)?;
    Ok([sizes[0], sizes[1], sizes[2], sizes[3]])
}

/// Checks that `value` `[B, S, KVH, D]` fits into `cache` `[B, max_seq_len, KVH, D]` at
/// `start_pos`.
fn check_cache_write(value: &[usize], cache: &[usize], start: usize, op: &str, vname: &str, cname: &str) -> KernelResult {
    let [b, s, kvh, d] = bshd(value, op, vname)?;
    let [cb, max, ckvh, cd] = bshd(cache, op, cname)?;
    if (cb, ckvh, cd) != (b, kvh, d) {
        return Err(kerr!(
            "{op}: {vname} of shape {value:?} does not match {cname} of shape {cache:?} (batch, heads and head dim must agree)"
        ));
    }
    if start.checked_add(s).is_none_or(|end| end > max) {
        return Err(kerr!("{op}: start_pos {start} + seq_len {s} exceeds {cname}'s max_seq_len {max}"));
    }
    Ok(())
}

/// Copies `value` `[B, S, KVH, D]` into `cache[:, start..start + S]` (any dtype, as bytes).
fn write_cache(value: &TensorRef<'_>, cache: &mut TensorMut<'_>, start: usize, op: &str, cname: &str) -> KernelResult {
    if value.dtype != cache.dtype {
        return Err(kerr!("{op}: value dtype {} differs from {cname} dtype {}", value.dtype, cache.dtype));
    }
    if !value.dim_order.is_contiguous() || !cache.dim_order.is_contiguous() {
        return Err(kerr!("{op}: value and {cname} must be contiguous"));
    }
    let (vs, cs) = (value.sizes(), cache.sizes());
    let (b, s, max) = (vs[0], vs[1], cs[1]);
    let row = vs[2] * vs[3] * value.dtype.size();
    let src = value.bytes();
    let dst = cache.bytes_mut();
    for bi in 0..b {
        let from = &src[bi * s * row..(bi + 1) * s * row];
        let at = (bi * max + start) * row;
        dst[at..at + s * row].copy_from_slice(from);
    }
    Ok(())
}

/// One attention problem over a filled cache prefix.
#[derive(Clone, Copy)]
pub(crate) struct Attn<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub batch: usize,
    pub seq: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub dim: usize,
    pub v_dim: usize,
    /// The caches' second dim (max_seq_len).
    pub cache_len: usize,
    pub start: usize,
    pub causal: bool,
    pub mask: Option<Mask<'a>>,
    pub scale: f32,
}

/// A 2-D attention mask `[S, L]` (L ≥ start_pos + S; later columns are ignored).
#[derive(Clone, Copy)]
pub(crate) enum Mask<'a> {
    /// Added to the scores.
    Add(&'a [f32], usize),
    /// `false` masks the position out.
    Keep(&'a [u8], usize),
}

impl Attn<'_> {
    /// Keys query row `i` attends to: `0..keys(i)`.
    pub fn keys(&self, i: usize) -> usize {
        if self.causal {
            self.start + i + 1
        } else {
            self.start + self.seq
        }
    }

    /// What the mask adds to score (row i, key j).
    #[inline]
    pub fn bias(&self, i: usize, j: usize) -> f32 {
        match self.mask {
            None => 0.0,
            Some(Mask::Add(m, l)) => m[i * l + j],
            Some(Mask::Keep(m, l)) => {
                if m[i * l + j] != 0 {
                    0.0
                } else {
                    f32::NEG_INFINITY
                }
            }
        }
    }

    /// Output sizes `[B, S, H, Dv]`.
    pub fn out_sizes(&self) -> [usize; 4] {
        [self.batch, self.seq, self.heads, self.v_dim]
    }

    /// Offset of key (or value, with `v_dim`) row for batch `b`, position `j`, kv head `kh`.
    #[inline]
    pub fn kv_at(&self, b: usize, j: usize, kh: usize, d: usize) -> usize {
        ((b * self.cache_len + j) * self.kv_heads + kh) * d
    }
}

/// Checks the attention arguments shared by both sdpa ops: q `[B,S,H,D]`, caches
/// `[B,maxS,KVH,D]`, mask, dropout, is_causal, scale (argument indices `im`..`im+3`).
fn parse_attention<'a>(
    args: &KernelArgs<'a>,
    op: &str,
    q: &'a [f32],
    qs: &[usize],
    (k, ks): (&'a [f32], &[usize]),
    (v, vs): (&'a [f32], &[usize]),
    start: usize,
    im: usize,
) -> KernelResult<Attn<'a>> {
    let [b, s, h, d] = bshd(qs, op, "query")?;
    let [kb, kmax, kvh, kd] = bshd(ks, op, "key_cache")?;
    let [vb, vmax, vkvh, vd] = bshd(vs, op, "value_cache")?;
    if kb != b || vb != b {
        return Err(kerr!("{op}: batch sizes differ: query {qs:?}, key_cache {ks:?}, value_cache {vs:?}"));
    }
    if kd != d {
        return Err(kerr!("{op}: query head dim {d} differs from key_cache head dim {kd} ({qs:?} vs {ks:?})"));
    }
    if (vmax, vkvh) != (kmax, kvh) {
        return Err(kerr!("{op}: key_cache {ks:?} and value_cache {vs:?} differ in max_seq_len or heads"));
    }
    if kvh == 0 || h % kvh != 0 {
        return Err(kerr!("{op}: {h} query heads cannot be grouped over {kvh} kv heads"));
    }
    if start.checked_add(s).is_none_or(|end| end > kmax) {
        return Err(kerr!("{op}: start_pos {start} + seq_len {s} exceeds the caches' max_seq_len {kmax}"));
    }
    let dropout = args.double(im + 1).map_err(|e| kerr!("{op}: drpout_p: {e}"))?;
    if dropout != 0.0 {
        return Err(kerr!("{op}: drpout_p must be 0 at inference, got {dropout}"));
    }
    let causal = args.bool(im + 2).map_err(|e| kerr!("{op}: is_causal: {e}"))?;
    let scale = match args.opt_double(im + 3).map_err(|e| kerr!("{op}: scale: {e}"))? {
        Some(v) => v as f32,
        None => 1.0 / libm::sqrtf(d as f32),
    };
    let mask = match args.opt_tensor(im).map_err(|e| kerr!("{op}: attn_mask: {e}"))? {
        None => None,
        Some(m) => {
            if causal {
                return Err(kerr!("{op}: attn_mask and is_causal cannot both be given"));
            }
            let ms = m.sizes();
            if ms.len() != 2 || ms[0] != s || ms[1] < start + s {
                return Err(kerr!("{op}: attn_mask must be [seq_len={s}, >= start_pos + seq_len = {}], got {ms:?}", start + s));
            }
            if !m.dim_order.is_contiguous() {
                return Err(kerr!("{op}: attn_mask must be contiguous"));
            }
            Some(match m.dtype {
                ScalarType::Float => Mask::Add(m.data::<f32>()?, ms[1]),
                ScalarType::Bool => Mask::Keep(m.data::<u8>()?, ms[1]),
                t => return Err(kerr!("{op}: attn_mask must be Float or Bool, got {t}")),
            })
        }
    };
    Ok(Attn {
        q,
        k,
        v,
        batch: b,
        seq: s,
        heads: h,
        kv_heads: kvh,
        dim: d,
        v_dim: vd,
        cache_len: kmax,
        start,
        causal,
        mask,
        scale,
    })
}

/// Runs `attend(attn, out)` for `sdpa_with_kv_cache.out`: args = [query, key, value, key_cache,
/// value_cache, start_pos, seq_len, attn_mask, drpout_p, is_causal, scale, out, out]. Writes
/// key/value into the caches first.
pub(crate) fn run_sdpa_with_kv_cache(ctx: &KernelContext, args: &KernelArgs<'_>, attend: fn(&KernelContext, &Attn<'_>, &mut [f32])) -> KernelResult {
    const OP: &str = "llama::sdpa_with_kv_cache";
    let (q, k, v) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    let start = usize_arg(args, 5, OP, "start_pos")?;
    let seq_len = usize_arg(args, 6, OP, "seq_len")?;
    let qd = f32_arg(&q, OP, "query")?;
    f32_arg(&k, OP, "key")?;
    f32_arg(&v, OP, "value")?;
    let [_, s, _, _] = bshd(q.sizes(), OP, "query")?;
    if seq_len != s {
        return Err(kerr!("{OP}: seq_len {seq_len} differs from query's sequence length {s} ({:?})", q.sizes()));
    }
    let mut kc = args.out(3)?;
    let mut vc = args.out(4)?;
    f32_out(&kc, OP, "key_cache")?;
    f32_out(&vc, OP, "value_cache")?;
    check_cache_write(k.sizes(), kc.sizes(), start, OP, "key", "key_cache")?;
    check_cache_write(v.sizes(), vc.sizes(), start, OP, "value", "value_cache")?;
    if k.sizes()[1] != s || v.sizes()[1] != s {
        return Err(kerr!("{OP}: key {:?} / value {:?} and query {:?} differ in sequence length", k.sizes(), v.sizes(), q.sizes()));
    }
    // Validate everything (including the attention arguments) before writing the caches.
    {
        let (ks, vs) = (kc.shape(), vc.shape());
        let zero = [0.0f32; 0];
        parse_attention(args, OP, qd, q.sizes(), (&zero, ks.as_slice()), (&zero, vs.as_slice()), start, 7)?;
    }
    write_cache(&k, &mut kc, start, OP, "key_cache")?;
    write_cache(&v, &mut vc, start, OP, "value_cache")?;
    let (ks, vs) = (kc.shape(), vc.shape());
    let a = parse_attention(args, OP, qd, q.sizes(), (kc.data::<f32>()?, ks.as_slice()), (vc.data::<f32>()?, vs.as_slice()), start, 7)?;
    let mut out = args.out(11)?;
    f32_out(&out, OP, "out")?;
    out.resize(&a.out_sizes())?;
    attend(ctx, &a, out.data_mut()?);
    Ok(())
}

/// `custom_sdpa.out`: args = [query, key_cache, value_cache, start_pos, attn_mask, drpout_p,
/// is_causal, scale, out, out].
pub(crate) fn run_custom_sdpa(ctx: &KernelContext, args: &KernelArgs<'_>, attend: fn(&KernelContext, &Attn<'_>, &mut [f32])) -> KernelResult {
    const OP: &str = "llama::custom_sdpa";
    let (q, k, v) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    let start = usize_arg(args, 3, OP, "start_pos")?;
    let qd = f32_arg(&q, OP, "query")?;
    let kd = f32_arg(&k, OP, "key")?;
    let vd = f32_arg(&v, OP, "value")?;
    let a = parse_attention(args, OP, qd, q.sizes(), (kd, k.sizes()), (vd, v.sizes()), start, 4)?;
    let mut out = args.out(8)?;
    f32_out(&out, OP, "out")?;
    out.resize(&a.out_sizes())?;
    attend(ctx, &a, out.data_mut()?);
    Ok(())
}

/// Plain attention: per (batch, row, head) scores in f64, max-subtracted softmax, weighted sum.
pub(crate) fn attend_reference(_: &KernelContext, a: &Attn<'_>, out: &mut [f32]) {
    let group = a.heads / a.kv_heads;
    let mut p = Vec::new();
    for b in 0..a.batch {
        for i in 0..a.seq {
            let n = a.keys(i);
            for h in 0..a.heads {
                let kh = h / group;
                let qo = ((b * a.seq + i) * a.heads + h) * a.dim;
                let qv = &a.q[qo..qo + a.dim];
                p.clear();
                for j in 0..n {
                    let ko = a.kv_at(b, j, kh, a.dim);
                    let dot: f64 = qv.iter().zip(&a.k[ko..ko + a.dim]).map(|(&x, &y)| x as f64 * y as f64).sum();
                    p.push(dot * a.scale as f64 + a.bias(i, j) as f64);
                }
                let m = p.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let mut sum = 0.0;
                for e in p.iter_mut() {
                    *e = libm::exp(*e - m);
                    sum += *e;
                }
                let oo = ((b * a.seq + i) * a.heads + h) * a.v_dim;
                for (c, o) in out[oo..oo + a.v_dim].iter_mut().enumerate() {
                    let acc: f64 = p.iter().enumerate().map(|(j, &w)| w * a.v[a.kv_at(b, j, kh, a.v_dim) + c] as f64).sum();
                    *o = (acc / sum) as f32;
                }
            }
        }
    }
}

/// `sdpa_with_kv_cache.out(Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache,
/// Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len, Tensor? attn_mask=None,
/// float drpout_p=0., bool is_causal=False, float? scale=None, *, Tensor(c!) out)`.
pub fn sdpa_with_kv_cache_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_sdpa_with_kv_cache(ctx, args, attend_reference)
}

/// `custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos,
/// Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None, *,
/// Tensor(a!) out)`: key/value are the already updated caches.
pub fn custom_sdpa_out(ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_custom_sdpa(ctx, args, attend_reference)
}

/// `update_cache.out(Tensor value, Tensor(a!) cache, SymInt start_pos, *, Tensor(b!) out)`:
/// args = [value, cache, start_pos, out, out]. `out` is a placeholder and is left untouched.
pub fn update_cache_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    const OP: &str = "llama::update_cache";
    let value = args.tensor(0)?;
    let start = usize_arg(args, 2, OP, "start_pos")?;
    let mut cache = args.out(1)?;
    check_cache_write(value.sizes(), cache.sizes(), start, OP, "value", "cache")?;
    write_cache(&value, &mut cache, start, OP, "cache")
}

// ---------------------------------------------------------------------------------------------
// RMSNorm, RoPE, SiLU-gated product
// ---------------------------------------------------------------------------------------------

/// Checked `rms_norm` operands: input rows of `dim` elements, the weight, eps.
pub(crate) struct RmsNorm<'a> {
    pub x: &'a [f32],
    pub w: &'a [f32],
    pub eps: f32,
}

/// `rms_norm.out(Tensor input, Tensor weight, float eps, *, Tensor(a!) out)`: args = [input,
/// weight, eps, out, out]. Returns the operands and the resized output.
pub(crate) fn run_rms_norm(args: &KernelArgs<'_>, f: fn(&RmsNorm<'_>, &mut [f32])) -> KernelResult {
    const OP: &str = "rbuild::rms_norm";
    let (x, w) = (args.tensor(0)?, args.tensor(1)?);
    let eps = args.double(2).map_err(|e| kerr!("{OP}: eps: {e}"))? as f32;
    let (xd, wd) = (f32_arg(&x, OP, "input")?, f32_arg(&w, OP, "weight")?);
    let dim = x.sizes().last().copied().ok_or_else(|| kerr!("{OP}: input must have at least one dim"))?;
    if w.sizes() != [dim] {
        return Err(kerr!("{OP}: weight must be [{dim}] (input's last dim), got {:?}", w.sizes()));
    }
    let mut out = args.out(3)?;
    f32_out(&out, OP, "out")?;
    out.resize(x.sizes())?;
    f(&RmsNorm { x: xd, w: wd, eps }, out.data_mut()?);
    Ok(())
}

/// `weight * (x * 1/sqrt(mean(x²) + eps))` per row; the mean accumulates in f64.
pub(crate) fn rms_norm_reference(p: &RmsNorm<'_>, out: &mut [f32]) {
    let d = p.w.len();
    if d == 0 {
        return;
    }
    for (x, o) in p.x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        let ss: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
        let r = 1.0 / libm::sqrtf((ss / d as f64) as f32 + p.eps);
        for ((o, &x), &w) in o.iter_mut().zip(x).zip(p.w) {
            *o = w * (x * r);
        }
    }
}

pub fn rms_norm_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_rms_norm(args, rms_norm_reference)
}

/// Checked `rope` operands: x `[B, S, H, D]`, the cos/sin tables `[max_seq_len, D]`.
pub(crate) struct Rope<'a> {
    pub x: &'a [f32],
    pub cos: &'a [f32],
    pub sin: &'a [f32],
    pub seq: usize,
    pub heads: usize,
    pub dim: usize,
    pub start: usize,
}

/// `rope.out(Tensor input, Tensor cos, Tensor sin, SymInt start_pos, *, Tensor(a!) out)`:
/// args = [input, cos, sin, start_pos, out, out].
pub(crate) fn run_rope(args: &KernelArgs<'_>, f: fn(&Rope<'_>, &mut [f32])) -> KernelResult {
    const OP: &str = "rbuild::rope";
    let (x, c, s) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    let start = usize_arg(args, 3, OP, "start_pos")?;
    let (xd, cd, sd) = (f32_arg(&x, OP, "input")?, f32_arg(&c, OP, "cos")?, f32_arg(&s, OP, "sin")?);
    let [_, seq, heads, dim] = bshd(x.sizes(), OP, "input")?;
    if dim % 2 != 0 {
        return Err(kerr!("{OP}: head dim must be even, got {dim} (input {:?})", x.sizes()));
    }
    require_rank(c.sizes(), 2, OP, "cos")?;
    if c.sizes()[1] != dim || s.sizes() != c.sizes() {
        return Err(kerr!("{OP}: cos {:?} and sin {:?} must both be [max_seq_len, {dim}]", c.sizes(), s.sizes()));
    }
    let max = c.sizes()[0];
    if start.checked_add(seq).is_none_or(|e| e > max) {
        return Err(kerr!("{OP}: start_pos {start} + seq_len {seq} exceeds the tables' max_seq_len {max}"));
    }
    let mut out = args.out(4)?;
    f32_out(&out, OP, "out")?;
    out.resize(x.sizes())?;
    f(&Rope { x: xd, cos: cd, sin: sd, seq, heads, dim, start }, out.data_mut()?);
    Ok(())
}

/// HF rotate_half: `out = x·cos[p] + cat(-x[D/2:], x[:D/2])·sin[p]`, p = start_pos + s.
pub(crate) fn rope_reference(p: &Rope<'_>, out: &mut [f32]) {
    let (d, half) = (p.dim, p.dim / 2);
    if d == 0 {
        return;
    }
    for (r, (x, o)) in p.x.chunks_exact(d).zip(out.chunks_exact_mut(d)).enumerate() {
        let pos = p.start + (r / p.heads) % p.seq;
        let (c, s) = (&p.cos[pos * d..(pos + 1) * d], &p.sin[pos * d..(pos + 1) * d]);
        for j in 0..d {
            let rot = if j < half { -x[j + half] } else { x[j - half] };
            o[j] = x[j] * c[j] + rot * s[j];
        }
    }
}

pub fn rope_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_rope(args, rope_reference)
}

/// `silu_mul.out(Tensor gate, Tensor up, *, Tensor(a!) out)`: args = [gate, up, out, out].
pub(crate) fn run_silu_mul(args: &KernelArgs<'_>, f: fn(&[f32], &[f32], &mut [f32])) -> KernelResult {
    const OP: &str = "rbuild::silu_mul";
    let (g, u) = (args.tensor(0)?, args.tensor(1)?);
    let (gd, ud) = (f32_arg(&g, OP, "gate")?, f32_arg(&u, OP, "up")?);
    if g.sizes() != u.sizes() {
        return Err(kerr!("{OP}: gate {:?} and up {:?} must have the same shape", g.sizes(), u.sizes()));
    }
    let mut out = args.out(2)?;
    f32_out(&out, OP, "out")?;
    out.resize(g.sizes())?;
    f(gd, ud, out.data_mut()?);
    Ok(())
}

/// `gate · sigmoid(gate) · up`.
pub(crate) fn silu_mul_reference(g: &[f32], u: &[f32], out: &mut [f32]) {
    for ((o, &g), &u) in out.iter_mut().zip(g).zip(u) {
        *o = g / (1.0 + libm::expf(-g)) * u;
    }
}

pub fn silu_mul_out(_: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
    run_silu_mul(args, silu_mul_reference)
}

#[cfg(test)]
mod tests {
    use alloc::vec;
    use alloc::vec::Vec;

    use rbuild_runtime::harness::OpHarness;
    use rbuild_runtime::ScalarType;

    fn close(got: &[f32], want: &[f32], tol: f32) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn rms_norm_hand_computed() {
        let mut h = OpHarness::new();
        // Row [3, 4]: mean square 12.5, r = 1/sqrt(12.5) ≈ 0.282843.
        let x = h.f32(&[2, 2], &[3.0, 4.0, 0.0, 0.0]);
        let w = h.f32(&[2], &[1.0, 2.0]);
        let eps = h.double(0.0);
        let out = h.out_dynamic(ScalarType::Float, &[2, 2]);
        h.call(super::rms_norm_out, &[x, w, eps, out, out]).unwrap();
        let r = 1.0 / 12.5f32.sqrt();
        let got = h.read::<f32>(out);
        close(&got[..2], &[3.0 * r, 8.0 * r], 1e-6);
        assert!(got[2..].iter().all(|v| v.is_nan()), "0/0 with eps 0 is NaN, as in PyTorch: {got:?}");
        let bad = h.f32(&[3], &[1.0; 3]);
        let e = h.call(super::rms_norm_out, &[x, bad, eps, out, out]).unwrap_err();
        assert!(e.message.contains("rbuild::rms_norm") && e.message.contains("weight"), "{e}");
    }

    #[test]
    fn rope_hand_computed() {
        let mut h = OpHarness::new();
        // D = 4, positions 0..3; x at position 2 (start_pos 1, s = 1).
        let cos: Vec<f32> = (0..12).map(|i| i as f32 * 0.1).collect();
        let sin: Vec<f32> = (0..12).map(|i| 1.0 - i as f32 * 0.05).collect();
        let x = h.f32(&[1, 2, 1, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        let (c, s) = (h.f32(&[3, 4], &cos), h.f32(&[3, 4], &sin));
        let sp = h.int(1);
        let out = h.out(ScalarType::Float, &[1, 2, 1, 4]);
        h.call(super::rope_out, &[x, c, s, sp, out, out]).unwrap();
        let got = h.read::<f32>(out);
        // Row 0 at position 1: rot = [-3, -4, 1, 2].
        let (c1, s1) = (&cos[4..8], &sin[4..8]);
        let want0 = [1.0 * c1[0] - 3.0 * s1[0], 2.0 * c1[1] - 4.0 * s1[1], 3.0 * c1[2] + 1.0 * s1[2], 4.0 * c1[3] + 2.0 * s1[3]];
        close(&got[..4], &want0, 1e-6);
        let (c2, s2) = (&cos[8..12], &sin[8..12]);
        let want1 = [5.0 * c2[0] - 7.0 * s2[0], 6.0 * c2[1] - 8.0 * s2[1], 7.0 * c2[2] + 5.0 * s2[2], 8.0 * c2[3] + 6.0 * s2[3]];
        close(&got[4..], &want1, 1e-6);
        let sp = h.int(2);
        let e = h.call(super::rope_out, &[x, c, s, sp, out, out]).unwrap_err();
        assert!(e.message.contains("start_pos 2 + seq_len 2 exceeds"), "{e}");
    }

    #[test]
    fn silu_mul_hand_computed() {
        let mut h = OpHarness::new();
        let g = h.f32(&[3], &[0.0, 1.0, -2.0]);
        let u = h.f32(&[3], &[5.0, 2.0, 3.0]);
        let out = h.out(ScalarType::Float, &[3]);
        h.call(super::silu_mul_out, &[g, u, out, out]).unwrap();
        let s = |x: f32| x / (1.0 + (-x).exp());
        close(&h.read::<f32>(out), &[0.0, s(1.0) * 2.0, s(-2.0) * 3.0], 1e-6);
    }

    /// q·k scores for one query against keys; softmax; weighted values (independent of the
    /// kernel's code path).
    fn softmax_attend(q: &[f32], keys: &[&[f32]], vals: &[&[f32]], scale: f32) -> Vec<f32> {
        let s: Vec<f32> = keys.iter().map(|k| q.iter().zip(*k).map(|(a, b)| a * b).sum::<f32>() * scale).collect();
        let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = s.iter().map(|v| (v - m).exp()).collect();
        let z: f32 = e.iter().sum();
        (0..vals[0].len()).map(|c| e.iter().zip(vals).map(|(w, v)| w * v[c]).sum::<f32>() / z).collect()
    }

    #[test]
    fn sdpa_with_kv_cache_writes_cache_and_attends_causally_with_gqa() {
        let mut h = OpHarness::new();
        // B=1, S=2, H=2, KVH=1, D=2, max_seq_len 4, start_pos 1 (position 0 already cached).
        let q = h.f32(&[1, 2, 2, 2], &[1.0, 0.0, 0.0, 1.0, 0.5, 0.5, -1.0, 2.0]);
        let k = h.f32(&[1, 2, 1, 2], &[0.0, 1.0, 1.0, 1.0]);
        let v = h.f32(&[1, 2, 1, 2], &[10.0, 20.0, 30.0, 40.0]);
        let mut kc0 = vec![0.0f32; 8];
        kc0[..2].copy_from_slice(&[1.0, 0.0]);
        let mut vc0 = vec![0.0f32; 8];
        vc0[..2].copy_from_slice(&[1.0, 2.0]);
        let kc = h.f32(&[1, 4, 1, 2], &kc0);
        let vc = h.f32(&[1, 4, 1, 2], &vc0);
        let (sp, sl, none, drop, causal, scale) = (h.int(1), h.int(2), h.none(), h.double(0.0), h.bool(true), h.none());
        let out = h.out(ScalarType::Float, &[1, 2, 2, 2]);
        h.call(super::sdpa_with_kv_cache_out, &[q, k, v, kc, vc, sp, sl, none, drop, causal, scale, out, out]).unwrap();
        assert_eq!(h.read::<f32>(kc), vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
        assert_eq!(h.read::<f32>(vc), vec![1.0, 2.0, 10.0, 20.0, 30.0, 40.0, 0.0, 0.0]);
        let scale = 1.0 / 2f32.sqrt();
        let keys: [&[f32]; 3] = [&[1.0, 0.0], &[0.0, 1.0], &[1.0, 1.0]];
        let vals: [&[f32]; 3] = [&[1.0, 2.0], &[10.0, 20.0], &[30.0, 40.0]];
        let mut want = Vec::new();
        // Row 0 (position 1) sees keys 0..=1; row 1 (position 2) sees 0..=2; both heads share kv head 0.
        want.extend(softmax_attend(&[1.0, 0.0], &keys[..2], &vals[..2], scale));
        want.extend(softmax_attend(&[0.0, 1.0], &keys[..2], &vals[..2], scale));
        want.extend(softmax_attend(&[0.5, 0.5], &keys, &vals, scale));
        want.extend(softmax_attend(&[-1.0, 2.0], &keys, &vals, scale));
        close(&h.read::<f32>(out), &want, 1e-5);

        // start_pos + S past max_seq_len: rejected before touching the caches.
        let sp = h.int(3);
        let scale = h.none();
        let e = h.call(super::sdpa_with_kv_cache_out, &[q, k, v, kc, vc, sp, sl, none, drop, causal, scale, out, out]).unwrap_err();
        assert!(e.message.contains("llama::sdpa_with_kv_cache") && e.message.contains("max_seq_len"), "{e}");
        assert_eq!(h.read::<f32>(kc)[6..], [0.0, 0.0]);
    }

    #[test]
    fn custom_sdpa_non_causal_mask_and_explicit_scale() {
        let mut h = OpHarness::new();
        // B=1, S=1, H=1, D=1, cache of 3 with start_pos 1: attends to positions 0..2.
        let q = h.f32(&[1, 1, 1, 1], &[2.0]);
        let kc = h.f32(&[1, 3, 1, 1], &[1.0, -1.0, 100.0]);
        let vc = h.f32(&[1, 3, 1, 1], &[3.0, 5.0, 1000.0]);
        let (sp, drop, causal, scale) = (h.int(1), h.double(0.0), h.bool(false), h.double(0.5));
        let none = h.none();
        let out = h.out(ScalarType::Float, &[1, 1, 1, 1]);
        h.call(super::custom_sdpa_out, &[q, kc, vc, sp, none, drop, causal, scale, out, out]).unwrap();
        let (a, b) = (1.0f32.exp(), (-1.0f32).exp());
        close(&h.read::<f32>(out), &[(3.0 * a + 5.0 * b) / (a + b)], 1e-6);
        // A Bool mask dropping position 0 leaves position 1 only.
        let m = h.bool_tensor(&[1, 2], &[false, true]);
        h.call(super::custom_sdpa_out, &[q, kc, vc, sp, m, drop, causal, scale, out, out]).unwrap();
        close(&h.read::<f32>(out), &[5.0], 1e-6);
        let causal = h.bool(true);
        let e = h.call(super::custom_sdpa_out, &[q, kc, vc, sp, m, drop, causal, scale, out, out]).unwrap_err();
        assert!(e.message.contains("attn_mask and is_causal"), "{e}");
    }

    #[test]
    fn update_cache_copies_rows_and_checks_bounds() {
        let mut h = OpHarness::new();
        let v = h.f32(&[1, 2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
        let c = h.f32(&[1, 3, 1, 2], &[9.0; 6]);
        let sp = h.int(1);
        let out = h.out(ScalarType::Float, &[1]);
        h.call(super::update_cache_out, &[v, c, sp, out, out]).unwrap();
        assert_eq!(h.read::<f32>(c), vec![9.0, 9.0, 1.0, 2.0, 3.0, 4.0]);
        let sp = h.int(2);
        let e = h.call(super::update_cache_out, &[v, c, sp, out, out]).unwrap_err();
        assert!(e.message.contains("llama::update_cache") && e.message.contains("max_seq_len 3"), "{e}");
        let neg = h.int(-1);
        let e = h.call(super::update_cache_out, &[v, c, neg, out, out]).unwrap_err();
        assert!(e.message.contains("start_pos must be non-negative"), "{e}");
    }
}
