//! The Llama family from a Hugging Face checkpoint folder (`config.json`, `*.safetensors`):
//! Llama 2/3/3.x, Mistral, Qwen2, Qwen3.
//!
//! - [`config`]: `config.json` → [`LlamaConfig`], with errors for what is not implemented.
//! - [`checkpoint`]: the weights, one file or sharded (`model.safetensors.index.json`), and
//!   the built-in tiny demo model.
//! - [`gguf`]: the same from a GGUF file (llama.cpp's format): config from its metadata,
//!   weights renamed and un-permuted.
//! - [`kv_cache`]: the exported LLM program — `forward(tokens [1, S], input_pos [1])` with S
//!   dynamic, the KV cache as mutable state, ExecuTorch's metadata getters, fused ops.
//! - [`full_sequence`]: a Core-ATen-only forward without a cache (runs in ExecuTorch as is).
//! - [`rope`]: rotary tables.

pub mod checkpoint;
pub mod config;
pub mod family;
pub mod full_sequence;
pub mod gguf;
pub mod kv_cache;
pub mod rope;

pub use checkpoint::{config_of, demo_config, open_checkpoint};
pub use config::{Arch, Llama3Scaling, LlamaConfig};
pub use full_sequence::{build, build_with, causal_mask, llama};
pub use kv_cache::{build_kv, KvExport, LlmProgram};

use rbuild_export::error::Result;
use rbuild_export::{GraphBuilder, ValueId};

use crate::params::{Init, Params};
pub(crate) use crate::random::f32_bytes;

/// `nn.Linear(cin, cout)` named `module` (`….q_proj`), with `module.bias` when `bias`.
pub fn proj(b: &mut GraphBuilder, p: &mut Params, x: ValueId, module: &str, cin: usize, cout: usize, bias: bool) -> Result<ValueId> {
    let w = p.tensor(b, &format!("{module}.weight"), &[cout, cin], Init::LinearWeight { fan_in: cin })?;
    let bias = if bias { Some(p.tensor(b, &format!("{module}.bias"), &[cout], Init::LinearBias)?) } else { None };
    b.linear(x, w, bias)
}

/// The output projection: `lm_head.weight`, or the embedding when the checkpoint ties them
/// (HF then leaves `lm_head.weight` out of the file): `embed` when the graph already holds the
/// table, else loaded here.
pub(crate) fn head_weight(b: &mut GraphBuilder, p: &mut Params, c: &LlamaConfig, embed: Option<ValueId>) -> Result<ValueId> {
    if c.tie_word_embeddings && (p.is_random() || !p.contains("lm_head.weight")) {
        return match embed {
            Some(table) => Ok(table),
            None => kv_cache::embedding_table(b, p, c),
        };
    }
    p.tensor(b, "lm_head.weight", &[c.vocab_size, c.hidden_size], Init::LinearWeight { fan_in: c.hidden_size })
}
