//! The full-sequence forward without a KV cache, in Core ATen only: int64 token ids [1, S]
//! (static S) → float32 logits [1, S, vocab], with HF's parameter names, rotate_half RoPE
//! layout and arithmetic order. ExecuTorch's portable kernels run it as is (its llama runner
//! accepts such `use_kv_cache=false` programs).

use rbuild_export::error::Result;
use rbuild_export::{ConstData, ExportError, Graph, GraphBuilder, TensorMeta, ValueId};
use rbuild_runtime::ScalarType;

use super::config::LlamaConfig;
use super::{f32_bytes, head_weight, proj};
use crate::params::{Init, Params};
use crate::Weights;

/// The additive causal mask [seq_len, seq_len]: 0 where key ≤ query, −inf above the diagonal.
pub fn causal_mask(seq_len: usize) -> Vec<f32> {
    (0..seq_len).flat_map(|q| (0..seq_len).map(move |k| if k <= q { 0.0 } else { f32::NEG_INFINITY })).collect()
}

/// HF `LlamaRMSNorm` in Core ATen: `weight * (x * rsqrt(mean(x², -1, keepdim) + eps))`.
fn rms_norm(b: &mut GraphBuilder, p: &mut Params, x: ValueId, name: &str, dim: usize, eps: f64) -> Result<ValueId> {
    let w = p.tensor(b, name, &[dim], Init::BnGamma)?;
    let sq = b.pow_scalar(x, 2.0)?;
    let var = b.mean(sq, &[-1], true)?;
    let var = b.add_scalar(var, eps)?;
    let r = b.rsqrt(var)?;
    let y = b.mul(x, r)?;
    b.mul(w, y)
}

/// `cat(-x[..., D/2:], x[..., :D/2])`.
fn rotate_half(b: &mut GraphBuilder, x: ValueId, d: usize) -> Result<ValueId> {
    let half = (d / 2) as i64;
    let x1 = b.slice(x, -1, 0, half)?;
    let x2 = b.slice(x, -1, half, d as i64)?;
    let n2 = b.neg(x2)?;
    b.cat(&[n2, x1], -1)
}

/// `x * cos + rotate_half(x) * sin` for x [1, heads, S, D].
fn apply_rope(b: &mut GraphBuilder, x: ValueId, cos: ValueId, sin: ValueId, d: usize) -> Result<ValueId> {
    let xc = b.mul(x, cos)?;
    let r = rotate_half(b, x, d)?;
    let rs = b.mul(r, sin)?;
    b.add(xc, rs)
}

/// Constants shared by every layer.
struct Shared {
    cos: ValueId,
    sin: ValueId,
    mask: ValueId,
}

fn attention(b: &mut GraphBuilder, p: &mut Params, c: &LlamaConfig, x: ValueId, prefix: &str, s: usize, k: &Shared) -> Result<ValueId> {
    let (e, h, kvh, d) = (c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim);
    let (si, hi, kvi, di) = (s as i64, h as i64, kvh as i64, d as i64);
    // [1, S, heads*D] → [1, heads, S, D]
    let heads = |b: &mut GraphBuilder, p: &mut Params, name: &str, n: usize| -> Result<ValueId> {
        let y = proj(b, p, x, &format!("{prefix}.{name}"), e, n * d, c.qkv_bias)?;
        let y = b.view(y, &[1, si, n as i64, di])?;
        // Qwen3 normalizes each head of q and k before RoPE.
        let y = if c.qk_norm && name != "v_proj" {
            let norm = if name == "q_proj" { "q_norm" } else { "k_norm" };
            rms_norm(b, p, y, &format!("{prefix}.{norm}.weight"), d, c.rms_norm_eps)?
        } else {
            y
        };
        b.permute(y, &[0, 2, 1, 3])
    };
    let q = heads(b, p, "q_proj", h)?;
    let kk = heads(b, p, "k_proj", kvh)?;
    let v = heads(b, p, "v_proj", kvh)?;
    let q = apply_rope(b, q, k.cos, k.sin, d)?;
    let kk = apply_rope(b, kk, k.cos, k.sin, d)?;
    // GQA: HF's repeat_kv, [1, kvh, S, D] → [1, kvh, rep, S, D] → [1, h, S, D].
    let rep = (h / kvh) as i64;
    let repeat = |b: &mut GraphBuilder, t: ValueId| -> Result<ValueId> {
        if rep == 1 {
            return Ok(t);
        }
        let t = b.view(t, &[1, kvi, 1, si, di])?;
        let t = b.expand(t, &[1, kvi, rep, si, di])?;
        b.view(t, &[1, hi, si, di])
    };
    let kk = repeat(b, kk)?;
    let v = repeat(b, v)?;
    let q3 = b.view(q, &[hi, si, di])?;
    let k3 = b.view(kk, &[hi, si, di])?;
    let v3 = b.view(v, &[hi, si, di])?;
    let kt = b.permute(k3, &[0, 2, 1])?;
    let scores = b.bmm(q3, kt)?;
    let scores = b.mul_scalar(scores, 1.0 / (d as f64).sqrt())?;
    let scores = b.add(scores, k.mask)?;
    let probs = b.softmax(scores, -1)?;
    let o = b.bmm(probs, v3)?;
    let o = b.view(o, &[1, hi, si, di])?;
    let o = b.permute(o, &[0, 2, 1, 3])?;
    let o = b.view(o, &[1, si, hi * di])?;
    proj(b, p, o, &format!("{prefix}.o_proj"), h * d, e, c.o_bias)
}

fn mlp(b: &mut GraphBuilder, p: &mut Params, c: &LlamaConfig, x: ValueId, prefix: &str) -> Result<ValueId> {
    let (e, f) = (c.hidden_size, c.intermediate_size);
    let gate = proj(b, p, x, &format!("{prefix}.gate_proj"), e, f, c.mlp_bias)?;
    let sg = b.sigmoid(gate)?;
    let act = b.mul(gate, sg)?;
    let up = proj(b, p, x, &format!("{prefix}.up_proj"), e, f, c.mlp_bias)?;
    let y = b.mul(act, up)?;
    proj(b, p, y, &format!("{prefix}.down_proj"), f, e, c.mlp_bias)
}

/// Appends the Llama forward on `ids` (int64 [1, S]); returns logits [1, S, vocab].
pub fn llama(b: &mut GraphBuilder, p: &mut Params, c: &LlamaConfig, ids: ValueId) -> Result<ValueId> {
    let s = match b.meta(ids).sizes().as_deref() {
        Some([1, s]) if *s > 0 && b.meta(ids).dtype == ScalarType::Long => *s,
        _ => {
            return Err(ExportError::Invalid(format!(
                "llama takes int64 token ids [1, S], got {} {:?}",
                b.meta(ids).dtype,
                b.meta(ids).shape
            )))
        }
    };
    let e = c.hidden_size;
    let (cos, sin) = super::rope::tables(&c.inv_freq(), s);
    let table = [s, c.head_dim];
    let shared = Shared {
        cos: b.constant("rope_cos", ScalarType::Float, &table, ConstData::owned(f32_bytes(&cos)))?,
        sin: b.constant("rope_sin", ScalarType::Float, &table, ConstData::owned(f32_bytes(&sin)))?,
        mask: b.constant("causal_mask", ScalarType::Float, &[s, s], ConstData::owned(f32_bytes(&causal_mask(s))))?,
    };
    let embed = p.tensor(b, "model.embed_tokens.weight", &[c.vocab_size, e], Init::LinearWeight { fan_in: 1 })?;
    let mut x = b.embedding(embed, ids)?;
    for i in 0..c.num_hidden_layers {
        let prefix = format!("model.layers.{i}");
        let h = rms_norm(b, p, x, &format!("{prefix}.input_layernorm.weight"), e, c.rms_norm_eps)?;
        let a = attention(b, p, c, h, &format!("{prefix}.self_attn"), s, &shared)?;
        x = b.add(x, a)?;
        let h = rms_norm(b, p, x, &format!("{prefix}.post_attention_layernorm.weight"), e, c.rms_norm_eps)?;
        let m = mlp(b, p, c, h, &format!("{prefix}.mlp"))?;
        x = b.add(x, m)?;
    }
    let x = rms_norm(b, p, x, "model.norm.weight", e, c.rms_norm_eps)?;
    let head = head_weight(b, p, c, Some(embed))?;
    b.linear(x, head, None)
}

/// Builds the forward for `seq_len` tokens from a config and state dict. Every tensor in `w`
/// must be consumed.
pub fn build(c: &LlamaConfig, w: &Weights, seq_len: usize) -> Result<Graph> {
    build_with(c, &mut Params::new(w), seq_len)
}

/// [`build`] from parameters (a checkpoint's, or seeded random ones); a checkpoint's tensors
/// must all be consumed.
pub fn build_with(c: &LlamaConfig, p: &mut Params, seq_len: usize) -> Result<Graph> {
    if seq_len == 0 {
        return Err(ExportError::Invalid("llama: seq_len must be at least 1".into()));
    }
    let mut b = GraphBuilder::new();
    let ids = b.input("input_ids", TensorMeta::fixed(ScalarType::Long, &[1, seq_len]));
    let logits = llama(&mut b, p, c, ids)?;
    if !p.is_random() {
        p.check_all_used("llama")?;
    }
    b.output(logits);
    Ok(b.finish())
}
