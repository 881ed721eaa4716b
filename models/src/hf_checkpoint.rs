//! The weights of a Hugging Face checkpoint folder: one `model.safetensors`, or the shards
//! `model.safetensors.index.json` lists, merged into one state dict. Every family reads its
//! folder through here.

use std::path::Path;

use rbuild_export::error::Result;
use rbuild_export::ExportError;
use serde_json::Value;

use crate::Weights;

/// The error for a checkpoint path that is not a folder.
pub fn not_a_checkpoint(dir: &Path) -> ExportError {
    ExportError::Io { path: dir.display().to_string(), message: "not a checkpoint folder (expected config.json and *.safetensors)".into() }
}

/// Maps the weights of the checkpoint folder `dir`.
pub fn open_weights(dir: &Path) -> Result<Weights> {
    let index = dir.join("model.safetensors.index.json");
    if index.exists() {
        return open_sharded(dir, &index);
    }
    let single = dir.join("model.safetensors");
    if !single.exists() {
        return Err(ExportError::Io {
            path: dir.display().to_string(),
            message: "neither model.safetensors nor model.safetensors.index.json is there".into(),
        });
    }
    Weights::open(&single)
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

