//! Where a model's config and weights come from: an HF folder (one `model.safetensors` or
//! shards listed in `model.safetensors.index.json`), or the built-in demo.

use std::path::Path;

use rbuild_export::error::Result;
use rbuild_export::ExportError;
use serde_json::Value;

use super::config::{Arch, LlamaConfig};
use crate::Weights;

/// Reads `config.json` and maps the weights of an HF checkpoint folder.
pub fn open_checkpoint(dir: &Path) -> Result<(LlamaConfig, Weights)> {
    if !dir.is_dir() {
        return Err(ExportError::Io { path: dir.display().to_string(), message: "not a checkpoint folder (expected config.json and *.safetensors)".into() });
    }
    let config = LlamaConfig::load(&dir.join("config.json"))?;
    let index = dir.join("model.safetensors.index.json");
    let weights = if index.exists() {
        open_sharded(dir, &index)?
    } else {
        let single = dir.join("model.safetensors");
        if !single.exists() {
            return Err(ExportError::Io {
                path: dir.display().to_string(),
                message: "neither model.safetensors nor model.safetensors.index.json is there".into(),
            });
        }
        Weights::open(&single)?
    };
    Ok((config, weights))
}

/// The shards an index names (each once, in sorted order), merged into one state dict.
fn open_sharded(dir: &Path, index: &Path) -> Result<Weights> {
    let io = |m: String| ExportError::Io { path: index.display().to_string(), message: m };
    let text = std::fs::read_to_string(index).map_err(|e| io(e.to_string()))?;
    let j: Value = serde_json::from_str(&text).map_err(|e| io(format!("invalid JSON: {e}")))?;
    let map = j.get("weight_map").and_then(Value::as_object).ok_or_else(|| io("weight_map is missing".into()))?;
    let mut files: Vec<&str> = map.values().filter_map(Value::as_str).collect();
    files.sort();
    files.dedup();
    if files.is_empty() {
        return Err(io("weight_map names no files".into()));
    }
    let mut all = Weights::default();
    for f in &files {
        if f.contains('/') || f.contains('\\') || f.starts_with('.') {
            return Err(io(format!("shard name '{f}' must be a file in the same folder")));
        }
        all.merge(Weights::open(&dir.join(f))?)?;
    }
    for (name, file) in map {
        if !all.contains(name) {
            return Err(io(format!("'{name}' is listed in {} but not found there", file.as_str().unwrap_or("?"))));
        }
    }
    all.source = format!("{} ({} shards)", dir.display(), files.len());
    Ok(all)
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
