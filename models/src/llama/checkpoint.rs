//! Where a model's config and weights come from: an HF folder (one `model.safetensors` or
//! shards listed in `model.safetensors.index.json`), a GGUF file, or the built-in demo.

use std::path::Path;

use rbuild_export::error::Result;

use super::config::{Arch, LlamaConfig};
use crate::family::Source;
use crate::hf_checkpoint::not_a_checkpoint;
use crate::Weights;

/// Reads `config.json` and maps the weights of an HF checkpoint folder, or reads a GGUF file.
pub fn open_checkpoint(dir: &Path) -> Result<(LlamaConfig, Weights)> {
    if super::gguf::is_gguf(dir) {
        return super::gguf::open_gguf(dir);
    }
    if !dir.is_dir() {
        return Err(not_a_checkpoint(dir));
    }
    let config = LlamaConfig::load(&dir.join("config.json"))?;
    Ok((config, crate::hf_checkpoint::open_weights(dir)?))
}

/// The config of `source`: a checkpoint folder's `config.json` (no weights read), or the demo's.
pub fn config_of(source: &Source) -> Result<LlamaConfig> {
    match source {
        // Only the metadata: the config of a GGUF file, no tensor read.
        Source::Checkpoint(file) if super::gguf::is_gguf(file) => super::gguf::read_config(file),
        Source::Checkpoint(dir) if !dir.is_dir() => Err(not_a_checkpoint(dir)),
        Source::Checkpoint(dir) => LlamaConfig::load(&dir.join("config.json")),
        Source::Demo { .. } => Ok(demo_config()),
    }
}

/// The built-in demo model: a tiny Llama whose vocabulary is the byte-level demo tokenizer's
/// (3 specials + 256 bytes). Its weights are random (seeded) — it shows the pipeline, it does
/// not know any language.
pub fn demo_config() -> LlamaConfig {
    LlamaConfig {
        arch: Arch::Llama,
        hidden_size: 128,
        num_hidden_layers: 4,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        head_dim: 32,
        intermediate_size: 344,
        vocab_size: 259,
        rms_norm_eps: 1e-5,
        rope_theta: 10000.0,
        rope_scaling: None,
        rope_freq_factors: None,
        tie_word_embeddings: false,
        qkv_bias: false,
        o_bias: false,
        mlp_bias: false,
        qk_norm: false,
        max_position_embeddings: Some(512),
        sliding_window: None,
        bos_token_id: Some(1),
        eos_token_ids: vec![2],
    }
}
