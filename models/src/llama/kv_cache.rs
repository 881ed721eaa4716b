//! The LLM program a runner drives token by token, laid out as ExecuTorch's
//! `export_llama` lays it out so runners and programs stay interchangeable:
//!
//! - `forward(tokens: int64 [1, S], input_pos: int64 [1]) -> logits`, S dynamic in
//!   [1, max_seq_len] (DYNAMIC_BOUND); logits are [1, vocab] for the last token, or
//!   [1, S, vocab] with `full_logits`.
//! - per layer, the K and V caches [1, max_seq_len, kv_heads, head_dim] as mutable state,
//!   updated and attended by `llama::sdpa_with_kv_cache`;
//! - RMSNorm, RoPE and the SiLU-gated MLP as fused `rbuild::` ops, projections as
//!   `aten::linear` (quantization passes may swap in the quantized linears);
//! - metadata getters: `get_max_seq_len`, `get_vocab_size`, `get_bos_id`, `get_eos_ids`,
//!   `use_kv_cache`, `enable_dynamic_shape`, …

use rbuild_export::emit::Getter;
use rbuild_export::error::Result;
use rbuild_export::graph::Arg;
use rbuild_export::{ConstData, Dim, ExportError, Graph, GraphBuilder, TensorMeta, ValueId};
use rbuild_runtime::ScalarType;

use super::config::LlamaConfig;
use super::{f32_bytes, head_weight, proj, rope};
use crate::params::{Init, Params};

/// Export settings of the LLM program.
#[derive(Clone, Debug, PartialEq)]
pub struct KvExport {
    /// Longest prompt + generation the program serves (cache length).
    pub max_seq_len: usize,
    /// Logits for every position of the call instead of the last one only.
    pub full_logits: bool,
}

/// The forward graph and the metadata methods to emit with it.
pub struct LlmProgram {
    pub graph: Graph,
    pub getters: Vec<Getter>,
}

/// What every layer of the KV-cache decoder reads: the call's positions and the rotary tables.
pub struct Ctx {
    start_pos: ValueId,
    seq_len: ValueId,
    s: Dim,
    cos: ValueId,
    sin: ValueId,
}

fn rms_norm(b: &mut GraphBuilder, p: &mut Params, x: ValueId, name: &str, dim: usize, eps: f64) -> Result<ValueId> {
    let w = p.tensor(b, name, &[dim], Init::BnGamma)?;
    b.call1("rbuild::rms_norm", vec![Arg::Tensor(x), Arg::Tensor(w), Arg::Float(eps)])
}

fn attention(b: &mut GraphBuilder, p: &mut Params, c: &LlamaConfig, x: ValueId, layer: usize, o: &KvExport, k: &Ctx) -> Result<ValueId> {
    let prefix = format!("model.layers.{layer}.self_attn");
    let (e, h, kvh, d) = (c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim);
    // [1, S, n*D] → [1, S, n, D], ExecuTorch's cache layout (no transposes needed).
    let heads = |b: &mut GraphBuilder, p: &mut Params, name: &str, n: usize| -> Result<ValueId> {
        let y = proj(b, p, x, &format!("{prefix}.{name}"), e, n * d, c.qkv_bias)?;
        let y = b.view_dims(y, &[Dim::Fixed(1), k.s, Dim::Fixed(n), Dim::Fixed(d)])?;
        if c.qk_norm && name != "v_proj" {
            let norm = if name == "q_proj" { "q_norm" } else { "k_norm" };
            return rms_norm(b, p, y, &format!("{prefix}.{norm}.weight"), d, c.rms_norm_eps);
        }
        Ok(y)
    };
    let q = heads(b, p, "q_proj", h)?;
    let kk = heads(b, p, "k_proj", kvh)?;
    let v = heads(b, p, "v_proj", kvh)?;
    let rope = |b: &mut GraphBuilder, t: ValueId| {
        b.call1("rbuild::rope", vec![Arg::Tensor(t), Arg::Tensor(k.cos), Arg::Tensor(k.sin), Arg::SymInt(k.start_pos)])
    };
    let q = rope(b, q)?;
    let kk = rope(b, kk)?;
    let cache = [1, o.max_seq_len, kvh, d];
    let k_cache = b.state(&format!("k_cache_{layer}"), ScalarType::Float, &cache);
    let v_cache = b.state(&format!("v_cache_{layer}"), ScalarType::Float, &cache);
    let attn = b.call1(
        "llama::sdpa_with_kv_cache",
        vec![
            Arg::Tensor(q),
            Arg::Tensor(kk),
            Arg::Tensor(v),
            Arg::Tensor(k_cache),
            Arg::Tensor(v_cache),
            Arg::SymInt(k.start_pos),
            Arg::SymInt(k.seq_len),
            Arg::None,
            Arg::Float(0.0),
            Arg::Bool(true),
            Arg::None,
        ],
    )?;
    let attn = b.view_dims(attn, &[Dim::Fixed(1), k.s, Dim::Fixed(h * d)])?;
    proj(b, p, attn, &format!("{prefix}.o_proj"), h * d, e, c.o_bias)
}

fn mlp(b: &mut GraphBuilder, p: &mut Params, c: &LlamaConfig, x: ValueId, layer: usize) -> Result<ValueId> {
    let prefix = format!("model.layers.{layer}.mlp");
    let (e, f) = (c.hidden_size, c.intermediate_size);
    let gate = proj(b, p, x, &format!("{prefix}.gate_proj"), e, f, c.mlp_bias)?;
    let up = proj(b, p, x, &format!("{prefix}.up_proj"), e, f, c.mlp_bias)?;
    let y = b.call1("rbuild::silu_mul", vec![Arg::Tensor(gate), Arg::Tensor(up)])?;
    proj(b, p, y, &format!("{prefix}.down_proj"), f, e, c.mlp_bias)
}

/// Builds the KV-cache forward and its getters from a config and weights (or seeded random
/// weights: `Params::random`). Every tensor of a real checkpoint must be consumed.
pub fn build_kv(c: &LlamaConfig, p: &mut Params, o: &KvExport) -> Result<LlmProgram> {
    check_cache_len(c, o)?;
    let mut b = GraphBuilder::new();
    let s = b.sym("seq_len", 1, o.max_seq_len);
    let tokens = b.input("tokens", TensorMeta::new(ScalarType::Long, vec![Dim::Fixed(1), s]));
    let input_pos = b.input("input_pos", TensorMeta::fixed(ScalarType::Long, &[1]));
    let ctx = decoder_context(&mut b, c, o, tokens, input_pos)?;
    let embed = embedding_table(&mut b, p, c)?;
    let x = b.embedding(embed, tokens)?;
    let logits = decoder_stack(&mut b, p, c, o, &ctx, x, Some(embed))?;
    if !p.is_random() {
        p.check_all_used(c.arch.name())?;
    }
    b.output(logits);
    Ok(LlmProgram { graph: b.finish(), getters: getters(c, o) })
}

/// The cache length `o` asks for, checked against the model.
pub fn check_cache_len(c: &LlamaConfig, o: &KvExport) -> Result<()> {
    c.check_max_seq_len(o.max_seq_len)?;
    if let Some(trained) = c.max_position_embeddings {
        if o.max_seq_len > trained {
            return Err(ExportError::Invalid(format!(
                "max_seq_len {} exceeds the model's max_position_embeddings {trained}",
                o.max_seq_len
            )));
        }
    }
    Ok(())
}

/// `model.embed_tokens.weight` [vocab, hidden].
pub fn embedding_table(b: &mut GraphBuilder, p: &mut Params, c: &LlamaConfig) -> Result<ValueId> {
    p.tensor(b, "model.embed_tokens.weight", &[c.vocab_size, c.hidden_size], Init::LinearWeight { fan_in: 1 })
}

/// The decoder's [`Ctx`] for a call on `input` (`[1, S, …]`: the tokens, or their
/// embeddings; S a symbol bounded by the cache) at `input_pos` `[1]`.
pub fn decoder_context(b: &mut GraphBuilder, c: &LlamaConfig, o: &KvExport, input: ValueId, input_pos: ValueId) -> Result<Ctx> {
    let s = b.meta(input).shape[1];
    let seq_len = b.sym_size(input, 1)?;
    let start_pos = b.item(input_pos)?;
    let (cos, sin) = rope::tables(&c.inv_freq(), o.max_seq_len);
    let table = [o.max_seq_len, c.head_dim];
    let cos = b.constant("rope_cos", ScalarType::Float, &table, ConstData::owned(f32_bytes(&cos)))?;
    let sin = b.constant("rope_sin", ScalarType::Float, &table, ConstData::owned(f32_bytes(&sin)))?;
    Ok(Ctx { start_pos, seq_len, s, cos, sin })
}

/// The decoder layers, final norm and output head on embeddings `x` `[1, S, hidden]`: logits
/// of the last position, or of all with `full_logits`. `embed` is the embedding table when
/// this graph holds it (a tied head reuses it; otherwise the head loads it itself).
pub fn decoder_stack(b: &mut GraphBuilder, p: &mut Params, c: &LlamaConfig, o: &KvExport, ctx: &Ctx, x: ValueId, embed: Option<ValueId>) -> Result<ValueId> {
    let e = c.hidden_size;
    let mut x = x;
    for i in 0..c.num_hidden_layers {
        let h = rms_norm(b, p, x, &format!("model.layers.{i}.input_layernorm.weight"), e, c.rms_norm_eps)?;
        let a = attention(b, p, c, h, i, o, ctx)?;
        x = b.add(x, a)?;
        let h = rms_norm(b, p, x, &format!("model.layers.{i}.post_attention_layernorm.weight"), e, c.rms_norm_eps)?;
        let m = mlp(b, p, c, h, i)?;
        x = b.add(x, m)?;
    }
    let mut x = rms_norm(b, p, x, "model.norm.weight", e, c.rms_norm_eps)?;
    if !o.full_logits {
        x = b.select(x, 1, -1)?;
    }
    let head = head_weight(b, p, c, embed)?;
    b.linear(x, head, None)
}

/// ExecuTorch's LLM metadata getters for the KV-cache program.
pub fn getters(c: &LlamaConfig, o: &KvExport) -> Vec<Getter> {
    let mut getters = vec![
        Getter::int("get_max_seq_len", o.max_seq_len as i64),
        Getter::int("get_max_context_len", o.max_seq_len as i64),
        Getter::int("get_vocab_size", c.vocab_size as i64),
        Getter::int("get_n_layers", c.num_hidden_layers as i64),
        Getter::bool("use_kv_cache", true),
        Getter::bool("use_sdpa_with_kv_cache", true),
        Getter::bool("enable_dynamic_shape", true),
        Getter::bool("get_full_logits", o.full_logits),
    ];
    if let Some(bos) = c.bos_token_id {
        getters.push(Getter::int("get_bos_id", bos));
    }
    if !c.eos_token_ids.is_empty() {
        getters.push(Getter::ints("get_eos_ids", &c.eos_token_ids));
    }
    getters
}
