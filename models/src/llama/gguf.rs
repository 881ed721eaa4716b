//! A Llama-family model from a GGUF file (llama.cpp's format): the config from the
//! `{arch}.*` metadata, the weights under their Hugging Face names, with llama.cpp's Q/K row
//! permutation undone, so the same forward builds it as from a checkpoint folder.
//!
//! Tensors are dequantized to float32 here; the linears whose GGUF type rbuild stores as it is
//! (Q4_0, Q4_1, Q8_0) are also kept as blocks ([`Weights::prequantized`]), which the export
//! uses when it quantizes linears.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use half::f16;

use rbuild_export::error::Result;
use rbuild_export::passes::prequantized::{Blocks, PreQuantized};
use rbuild_export::ExportError;
use rbuild_gguf::{GgmlType, GgufFile, TensorInfo};
use rbuild_runtime::ScalarType;
use serde_json::{json, Map, Value};

use super::config::LlamaConfig;
use crate::Weights;

/// The GGUF architectures the Llama forward implements, and the HF `model_type` each is.
const ARCHITECTURES: &[(&str, &str)] = &[("llama", "llama"), ("mistral", "mistral"), ("qwen2", "qwen2"), ("qwen3", "qwen3")];

/// Whether `path` is a GGUF file (by its magic, so a renamed file still counts).
pub fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    path.is_file() && std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"GGUF"
}

fn gguf_err(e: rbuild_gguf::GgufError) -> ExportError {
    ExportError::Io { path: e.path, message: e.message }
}

fn invalid(file: &GgufFile, message: impl std::fmt::Display) -> ExportError {
    ExportError::Invalid(format!("{}: {message}", file.path()))
}

/// Opens `path` and reads its config and weights (every tensor dequantized to float32).
pub fn open_gguf(path: &Path) -> Result<(LlamaConfig, Weights)> {
    let file = GgufFile::open(path).map_err(gguf_err)?;
    let config = config(&file)?;
    let weights = weights(&file, &config)?;
    Ok((config, weights))
}

/// The config of the GGUF file at `path` (its metadata only).
pub fn read_config(path: &Path) -> Result<LlamaConfig> {
    config(&GgufFile::open(path).map_err(gguf_err)?)
}

/// `general.architecture`, checked against the ones the Llama forward implements.
fn architecture(file: &GgufFile) -> Result<&str> {
    let arch = file.get_str("general.architecture").map_err(gguf_err)?.ok_or_else(|| invalid(file, "general.architecture is missing"))?;
    if !ARCHITECTURES.iter().any(|(a, _)| *a == arch) {
        let known: Vec<&str> = ARCHITECTURES.iter().map(|(a, _)| *a).collect();
        return Err(invalid(file, format!("architecture '{arch}' is not supported by the llama family (supported: {})", known.join(", "))));
    }
    Ok(arch)
}

/// The model's config from the GGUF metadata, as the `config.json` HF would have written,
/// read by the same parser (so the same checks apply).
pub fn config(file: &GgufFile) -> Result<LlamaConfig> {
    let arch = architecture(file)?;
    let model_type = ARCHITECTURES.iter().find(|(a, _)| *a == arch).map(|(_, t)| *t).unwrap_or("llama");
    let key = |k: &str| format!("{arch}.{k}");
    let uint = |k: &str| -> Result<Option<u64>> { file.get_u64(&key(k)).map_err(gguf_err) };
    let required = |k: &str| -> Result<u64> { uint(k)?.ok_or_else(|| invalid(file, format!("{} is missing", key(k)))) };
    let float = |k: &str| -> Result<Option<f64>> { file.get_f64(&key(k)).map_err(gguf_err) };

    let hidden = required("embedding_length")?;
    let heads = required("attention.head_count")?;
    let mut obj = Map::new();
    obj.insert("model_type".into(), json!(model_type));
    obj.insert("hidden_size".into(), json!(hidden));
    obj.insert("num_hidden_layers".into(), json!(required("block_count")?));
    obj.insert("num_attention_heads".into(), json!(heads));
    obj.insert("num_key_value_heads".into(), json!(uint("attention.head_count_kv")?.unwrap_or(heads)));
    obj.insert("intermediate_size".into(), json!(required("feed_forward_length")?));
    if let Some(d) = uint("attention.key_length")? {
        obj.insert("head_dim".into(), json!(d));
    }
    let vocab = match uint("vocab_size")? {
        Some(v) => v,
        None => file.tensor("token_embd.weight").and_then(|t| t.shape().first().copied()).ok_or_else(|| invalid(file, "no vocab_size and no token_embd.weight"))? as u64,
    };
    obj.insert("vocab_size".into(), json!(vocab));
    if let Some(eps) = float("attention.layer_norm_rms_epsilon")? {
        obj.insert("rms_norm_eps".into(), json!(eps));
    }
    if let Some(theta) = float("rope.freq_base")? {
        obj.insert("rope_theta".into(), json!(theta));
    }
    if let Some(n) = uint("context_length")? {
        obj.insert("max_position_embeddings".into(), json!(n));
    }
    if let Some(w) = uint("attention.sliding_window")? {
        obj.insert("sliding_window".into(), json!(w));
        obj.insert("use_sliding_window".into(), json!(true));
    }
    match file.get_str(&key("rope.scaling.type")).map_err(gguf_err)? {
        None | Some("none") => {}
        Some(t) => return Err(invalid(file, format!("{} '{t}' is not supported (RoPE scaling: none, or Llama 3's rope_freqs)", key("rope.scaling.type")))),
    }
    if let Some(dims) = uint("rope.dimension_count")? {
        let head_dim = obj.get("head_dim").and_then(Value::as_u64).unwrap_or(hidden / heads.max(1));
        if dims != head_dim {
            return Err(invalid(file, format!("{} {dims} rotates part of each head (head dim {head_dim}): partial RoPE is not supported", key("rope.dimension_count"))));
        }
    }
    // No separate output matrix: the embedding is tied to the head.
    obj.insert("tie_word_embeddings".into(), json!(file.tensor("output.weight").is_none()));
    let id = |k: &str| file.get_u64(k).map_err(gguf_err);
    if let Some(bos) = id("tokenizer.ggml.bos_token_id")? {
        obj.insert("bos_token_id".into(), json!(bos));
    }
    // The end-of-generation ids: eos, and the end-of-turn token chat models stop at.
    let mut eos: Vec<u64> = Vec::new();
    for k in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"] {
        if let Some(e) = id(k)? {
            if !eos.contains(&e) {
                eos.push(e);
            }
        }
    }
    if !eos.is_empty() {
        obj.insert("eos_token_id".into(), json!(eos));
    }
    if arch == "llama" && file.tensor("blk.0.attn_q.bias").is_some() {
        obj.insert("attention_bias".into(), json!(true));
    }
    let mut config = LlamaConfig::from_object(&obj, file.path())?;
    if let Some(t) = file.tensor("rope_freqs.weight") {
        let factors = file.dequantize(t).map_err(gguf_err)?;
        if factors.len() != config.head_dim / 2 || factors.iter().any(|f| !(f.is_finite() && *f > 0.0)) {
            return Err(invalid(file, format!("rope_freqs.weight must hold head_dim/2 = {} positive factors", config.head_dim / 2)));
        }
        config.rope_freq_factors = Some(factors);
    }
    Ok(config)
}

/// GGUF tensor name → HF name (layer tensors `blk.N.*`).
fn hf_name(name: &str) -> Option<String> {
    let fixed = match name {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(f.into());
    }
    let rest = name.strip_prefix("blk.")?;
    let (layer, part) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, kind) = part.rsplit_once('.')?;
    let hf = match module {
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}.{kind}"))
}

/// How many heads a tensor's rows are permuted over: llama.cpp's converter interleaves the two
/// rotary halves of each q/k head (`permute`) for the `llama` architecture only.
fn permuted_heads(arch: &str, gguf_name: &str, c: &LlamaConfig) -> Option<usize> {
    if arch != "llama" {
        return None;
    }
    let module = gguf_name.rsplit_once('.')?.0.rsplit('.').next()?;
    match module {
        "attn_q" => Some(c.num_attention_heads),
        "attn_k" => Some(c.num_key_value_heads),
        _ => None,
    }
}

/// Undoes llama.cpp's q/k permutation on whole rows: within each head, GGUF row `2j + p`
/// holds HF row `p·(head_dim/2) + j`. Returns the row order (HF row r = GGUF row `order[r]`).
pub fn unpermuted_rows(rows: usize, heads: usize) -> Option<Vec<usize>> {
    if heads == 0 || rows % heads != 0 || (rows / heads) % 2 != 0 {
        return None;
    }
    let head_dim = rows / heads;
    let half = head_dim / 2;
    let mut order = Vec::with_capacity(rows);
    for h in 0..heads {
        for p in 0..2 {
            for j in 0..half {
                order.push(h * head_dim + 2 * j + p);
            }
        }
    }
    Some(order)
}

/// Reorders the rows (of `row_len` items of any size `unit`) of `data` by `order`.
pub fn reorder_rows(data: &[u8], row_bytes: usize, order: &[usize]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    for &r in order {
        out.extend_from_slice(&data[r * row_bytes..(r + 1) * row_bytes]);
    }
    out
}

/// Every tensor under its HF name, dequantized to float32 and un-permuted; the linear
/// weights stored in a block format rbuild keeps are also kept as blocks
/// ([`Weights::prequantized`]).
fn weights(file: &GgufFile, c: &LlamaConfig) -> Result<Weights> {
    let arch = architecture(file)?;
    let mut w = Weights::default();
    w.source = file.path().to_string();
    let mut blocks = HashMap::new();
    let mut converted: BTreeMap<&'static str, usize> = BTreeMap::new();
    for t in file.tensors() {
        if t.name == "rope_freqs.weight" {
            continue; // read into the config
        }
        let name = hf_name(&t.name).ok_or_else(|| invalid(file, format!("tensor '{}' is not part of the {arch} architecture", t.name)))?;
        let shape = t.shape();
        let heads = permuted_heads(arch, &t.name, c);
        if t.ggml_type.is_quantized() {
            if shape.len() == 2 && native_type(t.ggml_type) {
                blocks.insert(name.clone(), prequantized(file, t, heads)?);
            } else {
                *converted.entry(t.ggml_type.name()).or_default() += 1;
            }
        }
        let values = file.dequantize(t).map_err(gguf_err)?;
        let mut bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        if let Some(heads) = heads {
            bytes = unpermute(file, t, &bytes, heads, 4)?;
        }
        w.insert(&name, ScalarType::Float, &shape, bytes);
    }
    for (ty, n) in converted {
        w.import_notes.push(format!("{n} {ty} tensors dequantized (rbuild has no {ty} kernel): the recipe's quantize applies to them"));
    }
    w.prequantized = Arc::new(blocks);
    Ok(w)
}

/// The blocks of a Q4_0 / Q4_1 / Q8_0 linear weight in rbuild's layouts (group 32), rows
/// un-permuted like the float values.
fn prequantized(file: &GgufFile, t: &TensorInfo, heads: Option<usize>) -> Result<PreQuantized> {
    let shape = t.shape();
    let (rows, cols) = (shape[0], shape[1]);
    let bytes = file.tensor_bytes(t);
    // A block's 16 bytes hold elements j (low nibble) and j + 16 (high nibble); rbuild packs
    // neighbours: element k in byte k/2, low nibble for even k.
    let repack = |qs: &[u8; 16], out: &mut Vec<u8>| {
        let code = |k: usize| if k < 16 { qs[k] & 0x0f } else { qs[k - 16] >> 4 };
        out.extend((0..16).map(|i| code(2 * i) | (code(2 * i + 1) << 4)));
    };
    let mut blocks = match t.ggml_type {
        GgmlType::Q4_0 => {
            let (mut packed, mut scales) = (Vec::with_capacity(rows * cols / 2), Vec::with_capacity(rows * cols / 32));
            for (d, qs) in rbuild_gguf::blocks::q4_0(bytes) {
                scales.push(d);
                repack(&qs, &mut packed);
            }
            Blocks::Q4 { packed, scales }
        }
        GgmlType::Q4_1 => {
            let (mut packed, mut scales, mut mins) = (Vec::with_capacity(rows * cols / 2), Vec::new(), Vec::new());
            for (d, m, qs) in rbuild_gguf::blocks::q4_1(bytes) {
                scales.push(d);
                mins.push(m);
                repack(&qs, &mut packed);
            }
            Blocks::Q4Min { packed, scales, mins }
        }
        GgmlType::Q8_0 => {
            let (mut q, mut scales) = (Vec::with_capacity(rows * cols), Vec::new());
            for (d, qs) in rbuild_gguf::blocks::q8_0(bytes) {
                scales.push(d);
                q.extend(qs);
            }
            Blocks::Q8Group { q, scales }
        }
        other => return Err(invalid(file, format!("tensor '{}': {other} is not kept as blocks", t.name))),
    };
    if let Some(heads) = heads {
        let order = unpermuted_rows(rows, heads)
            .ok_or_else(|| invalid(file, format!("tensor '{}' has {rows} rows, not {heads} heads of an even size", t.name)))?;
        let per_row = |len: usize| len / rows.max(1);
        let reorder_f16 = |v: &[f16]| -> Vec<f16> { order.iter().flat_map(|&r| v[r * per_row(v.len())..(r + 1) * per_row(v.len())].iter().copied()).collect() };
        blocks = match blocks {
            Blocks::Q4 { packed, scales } => Blocks::Q4 { packed: reorder_rows(&packed, per_row(packed.len()), &order), scales: reorder_f16(&scales) },
            Blocks::Q4Min { packed, scales, mins } => Blocks::Q4Min {
                packed: reorder_rows(&packed, per_row(packed.len()), &order),
                scales: reorder_f16(&scales),
                mins: reorder_f16(&mins),
            },
            Blocks::Q8Group { q, scales } => {
                let bytes: Vec<u8> = q.iter().map(|&v| v as u8).collect();
                let q = reorder_rows(&bytes, cols, &order).into_iter().map(|b| b as i8).collect();
                Blocks::Q8Group { q, scales: reorder_f16(&scales) }
            }
        };
    }
    let w = PreQuantized { rows, cols, group: 32, blocks };
    w.check(&t.name)?;
    Ok(w)
}

/// `bytes` (rows of `t`, `elem` bytes per element after dequantization) with the q/k
/// permutation undone.
fn unpermute(file: &GgufFile, t: &TensorInfo, bytes: &[u8], heads: usize, elem: usize) -> Result<Vec<u8>> {
    let shape = t.shape();
    let rows = shape[0];
    let order = unpermuted_rows(rows, heads)
        .ok_or_else(|| invalid(file, format!("tensor '{}' has {rows} rows, not {heads} heads of an even size", t.name)))?;
    let row_len: usize = shape[1..].iter().product();
    Ok(reorder_rows(bytes, row_len * elem, &order))
}

/// Whether rbuild keeps tensors of `ty` as they are (the block formats it has kernels for).
pub fn native_type(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q8_0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_inverts_llama_cpp_permutation() {
        // llama.cpp: w.reshape(heads, 2, half, ...).swapaxes(1, 2): GGUF row h·d + 2j + p is
        // HF row h·d + p·half + j.
        let (heads, head_dim) = (3, 8);
        let rows = heads * head_dim;
        let half = head_dim / 2;
        let hf: Vec<usize> = (0..rows).collect();
        let mut gguf = vec![0; rows];
        for h in 0..heads {
            for p in 0..2 {
                for j in 0..half {
                    gguf[h * head_dim + 2 * j + p] = hf[h * head_dim + p * half + j];
                }
            }
        }
        let order = unpermuted_rows(rows, heads).unwrap();
        let back: Vec<usize> = order.iter().map(|&r| gguf[r]).collect();
        assert_eq!(back, hf);
        assert!(unpermuted_rows(10, 3).is_none());
        assert!(unpermuted_rows(9, 3).is_none());
    }

    #[test]
    fn names_map_to_hugging_face() {
        assert_eq!(hf_name("blk.12.attn_q.weight").unwrap(), "model.layers.12.self_attn.q_proj.weight");
        assert_eq!(hf_name("blk.0.ffn_down.weight").unwrap(), "model.layers.0.mlp.down_proj.weight");
        assert_eq!(hf_name("blk.3.attn_k.bias").unwrap(), "model.layers.3.self_attn.k_proj.bias");
        assert_eq!(hf_name("token_embd.weight").unwrap(), "model.embed_tokens.weight");
        assert!(hf_name("blk.x.attn_q.weight").is_none());
        assert!(hf_name("blk.0.ssm_conv.weight").is_none());
    }
}
