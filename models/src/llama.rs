//! Llama (Hugging Face `LlamaForCausalLM`), full-sequence forward without a KV cache: int64
//! token ids [1, S] (static S) → float32 logits [1, S, vocab], with HF's parameter names,
//! HF's rotate_half RoPE layout and HF's arithmetic order.

use std::path::Path;

use rbuild_export::error::Result;
use rbuild_export::{ConstData, ExportError, Graph, GraphBuilder, TensorMeta, ValueId};
use rbuild_runtime::ScalarType;
use serde_json::Value;

use crate::params::{Init, Params};
use crate::Weights;

/// The `config.json` fields the forward needs.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub intermediate_size: usize,
    pub vocab_size: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub tie_word_embeddings: bool,
}

fn config_err(source: &str, message: impl Into<String>) -> ExportError {
    ExportError::Invalid(format!("{source}: {}", message.into()))
}

impl LlamaConfig {
    /// Reads `config.json`.
    pub fn load(path: &Path) -> Result<LlamaConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ExportError::Io { path: path.display().to_string(), message: e.to_string() })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses an HF Llama config; `source` names it in errors. Settings the forward does not
    /// implement (another model type or activation, biases, RoPE scaling) are errors.
    pub fn parse(text: &str, source: &str) -> Result<LlamaConfig> {
        let j: Value = serde_json::from_str(text).map_err(|e| config_err(source, format!("invalid JSON: {e}")))?;
        let obj = j.as_object().ok_or_else(|| config_err(source, "config must be a JSON object"))?;
        match obj.get("model_type").and_then(Value::as_str) {
            Some("llama") => {}
            Some(t) => return Err(config_err(source, format!("model_type '{t}' is not supported (expected 'llama')"))),
            None => return Err(config_err(source, "model_type is missing (expected 'llama')")),
        }
        let usize_field = |key: &str| -> Result<Option<usize>> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if n > 0 => Ok(Some(n as usize)),
                    _ => Err(config_err(source, format!("{key} must be a positive integer, got {v}"))),
                },
            }
        };
        let required = |key: &str| -> Result<usize> {
            usize_field(key)?.ok_or_else(|| config_err(source, format!("{key} is missing")))
        };
        let hidden_size = required("hidden_size")?;
        let num_hidden_layers = required("num_hidden_layers")?;
        let num_attention_heads = required("num_attention_heads")?;
        let num_key_value_heads = usize_field("num_key_value_heads")?.unwrap_or(num_attention_heads);
        let head_dim = usize_field("head_dim")?.unwrap_or(hidden_size / num_attention_heads);
        let intermediate_size = required("intermediate_size")?;
        let vocab_size = required("vocab_size")?;
        if num_attention_heads % num_key_value_heads != 0 {
            return Err(config_err(
                source,
                format!("num_attention_heads {num_attention_heads} is not a multiple of num_key_value_heads {num_key_value_heads}"),
            ));
        }
        if head_dim % 2 != 0 {
            return Err(config_err(source, format!("head_dim {head_dim} must be even for RoPE")));
        }
        let float = |key: &str| obj.get(key).and_then(Value::as_f64);
        let rms_norm_eps = float("rms_norm_eps").unwrap_or(1e-6);
        if let Some(act) = obj.get("hidden_act").and_then(Value::as_str) {
            if act != "silu" {
                return Err(config_err(source, format!("hidden_act '{act}' is not supported (only 'silu')")));
            }
        }
        for key in ["attention_bias", "mlp_bias"] {
            if obj.get(key).and_then(Value::as_bool) == Some(true) {
                return Err(config_err(source, format!("{key}=true is not supported")));
            }
        }
        // RoPE: transformers ≥ 5 keeps it under `rope_parameters`; older configs use a top-level
        // `rope_theta` and an optional `rope_scaling`.
        let rope = match obj.get("rope_parameters") {
            Some(Value::Object(r)) => Some(r),
            None | Some(Value::Null) => match obj.get("rope_scaling") {
                Some(Value::Object(r)) => Some(r),
                None | Some(Value::Null) => None,
                Some(v) => return Err(config_err(source, format!("rope_scaling must be an object, got {v}"))),
            },
            Some(v) => return Err(config_err(source, format!("rope_parameters must be an object, got {v}"))),
        };
        if let Some(r) = rope {
            let ty = r.get("rope_type").or_else(|| r.get("type")).and_then(Value::as_str).unwrap_or("default");
            if ty != "default" {
                return Err(config_err(source, format!("rope_type '{ty}' is not supported (only 'default')")));
            }
        }
        let rope_theta = rope.and_then(|r| r.get("rope_theta")).and_then(Value::as_f64).or_else(|| float("rope_theta")).unwrap_or(10000.0);
        if rope_theta <= 0.0 || rms_norm_eps < 0.0 {
            return Err(config_err(source, format!("rope_theta {rope_theta} / rms_norm_eps {rms_norm_eps} out of range")));
        }
        let tie_word_embeddings = obj.get("tie_word_embeddings").and_then(Value::as_bool).unwrap_or(false);
        Ok(LlamaConfig {
            hidden_size,
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            intermediate_size,
            vocab_size,
            rms_norm_eps,
            rope_theta,
            tie_word_embeddings,
        })
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// HF's default RoPE tables for positions `0..seq_len`, each [seq_len, head_dim] laid out as
/// `cat(freqs, freqs)`. HF computes `inv_freq` and `freqs = inv_freq * pos` in float32; those
/// roundings are reproduced, and cos/sin are then taken in f64 and rounded once.
pub fn rope_tables(head_dim: usize, theta: f64, seq_len: usize) -> (Vec<f32>, Vec<f32>) {
    let half = head_dim / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| {
            let exponent = (2 * i) as f32 / head_dim as f32;
            let denom = (theta as f32).powf(exponent);
            1.0f32 / denom
        })
        .collect();
    let (mut cos, mut sin) = (Vec::with_capacity(seq_len * head_dim), Vec::with_capacity(seq_len * head_dim));
    for pos in 0..seq_len {
        for j in 0..head_dim {
            let angle = inv_freq[j % half] * pos as f32;
            cos.push((angle as f64).cos() as f32);
            sin.push((angle as f64).sin() as f32);
        }
    }
    (cos, sin)
}

/// The additive causal mask [seq_len, seq_len]: 0 where key ≤ query, −inf above the diagonal.
pub fn causal_mask(seq_len: usize) -> Vec<f32> {
    (0..seq_len).flat_map(|q| (0..seq_len).map(move |k| if k <= q { 0.0 } else { f32::NEG_INFINITY })).collect()
}

/// HF `LlamaRMSNorm`: `weight * (x * rsqrt(mean(x², -1, keepdim) + eps))`.
fn rms_norm(b: &mut GraphBuilder, p: &mut Params, x: ValueId, name: &str, dim: usize, eps: f64) -> Result<ValueId> {
    let w = p.tensor(b, name, &[dim], Init::BnGamma)?;
    let sq = b.pow_scalar(x, 2.0)?;
    let var = b.mean(sq, &[-1], true)?;
    let var = b.add_scalar(var, eps)?;
    let r = b.rsqrt(var)?;
    let y = b.mul(x, r)?;
    b.mul(w, y)
}

/// A bias-free `nn.Linear(cin, cout)` named `name` (the weight's full name).
fn proj(b: &mut GraphBuilder, p: &mut Params, x: ValueId, name: &str, cin: usize, cout: usize) -> Result<ValueId> {
    let w = p.tensor(b, name, &[cout, cin], Init::LinearWeight { fan_in: cin })?;
    b.linear(x, w, None)
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
        let y = proj(b, p, x, &format!("{prefix}.{name}.weight"), e, n * d)?;
        let y = b.view(y, &[1, si, n as i64, di])?;
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
    proj(b, p, o, &format!("{prefix}.o_proj.weight"), h * d, e)
}

fn mlp(b: &mut GraphBuilder, p: &mut Params, c: &LlamaConfig, x: ValueId, prefix: &str) -> Result<ValueId> {
    let (e, f) = (c.hidden_size, c.intermediate_size);
    let gate = proj(b, p, x, &format!("{prefix}.gate_proj.weight"), e, f)?;
    let sg = b.sigmoid(gate)?;
    let act = b.mul(gate, sg)?;
    let up = proj(b, p, x, &format!("{prefix}.up_proj.weight"), e, f)?;
    let y = b.mul(act, up)?;
    proj(b, p, y, &format!("{prefix}.down_proj.weight"), f, e)
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
    let (cos, sin) = rope_tables(c.head_dim, c.rope_theta, s);
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
    // Tied embeddings: HF drops `lm_head.weight` from the file and reuses the embedding.
    let head = if c.tie_word_embeddings && !p.weights().contains("lm_head.weight") {
        embed
    } else {
        p.tensor(b, "lm_head.weight", &[c.vocab_size, e], Init::LinearWeight { fan_in: e })?
    };
    b.linear(x, head, None)
}

/// Builds the forward for `seq_len` tokens from a config and state dict. Every tensor in `w`
/// must be consumed.
pub fn build(c: &LlamaConfig, w: &Weights, seq_len: usize) -> Result<Graph> {
    if seq_len == 0 {
        return Err(ExportError::Invalid("llama: seq_len must be at least 1".into()));
    }
    let mut b = GraphBuilder::new();
    let ids = b.input("input_ids", TensorMeta::fixed(ScalarType::Long, &[1, seq_len]));
    let mut p = Params::new(w);
    let logits = llama(&mut b, &mut p, c, ids)?;
    p.check_all_used("llama")?;
    b.output(logits);
    Ok(b.finish())
}

/// Builds from an HF checkpoint directory (`config.json` and `model.safetensors`).
pub fn build_from_dir(dir: &Path, seq_len: usize) -> Result<Graph> {
    let c = LlamaConfig::load(&dir.join("config.json"))?;
    let w = Weights::open(&dir.join("model.safetensors"))?;
    build(&c, &w, seq_len)
}
