//! The LLM export: checkpoint (or the built-in demo) → model graph → quantization → passes →
//! memory plan → program with metadata getters. Shared by `rbuild export --model llama` and
//! the recipe build's export step.

use std::path::PathBuf;
use std::time::Instant;

use rbuild_export::emit::{self, Getter, MethodSpec};
use rbuild_export::passes::quantize::{self, EmbeddingQuant, LinearQuant};
use rbuild_export::passes::{self, Options};
use rbuild_export::plan;
use rbuild_models::llama::{self, KvExport};
use rbuild_models::Params;

use crate::error::{CliError, CliResult};

/// What to export.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmExport {
    /// HF checkpoint folder; None: the built-in demo model with random weights of `seed`.
    pub checkpoint: Option<PathBuf>,
    pub seed: u64,
    pub max_seq_len: usize,
    pub full_logits: bool,
    pub linear: Option<LinearQuant>,
    pub embedding: Option<EmbeddingQuant>,
    /// Core ATen only: the full-sequence forward without a cache, static `max_seq_len`
    /// tokens, no custom ops (ExecuTorch runs it as is).
    pub core_aten: bool,
}

/// What the export did, for the report.
pub struct LlmReport {
    pub description: String,
    pub ops: std::collections::BTreeMap<String, usize>,
    pub arena_bytes: usize,
    pub constant_bytes: usize,
    pub program_bytes: usize,
    pub notes: Vec<String>,
    pub millis: f64,
}

/// Parses a linear quantization mode: `fp32`, `int8`, `int4`, `8da4w` (group size separate).
pub fn parse_linear_quant(mode: &str, group: usize) -> CliResult<Option<LinearQuant>> {
    Ok(match mode {
        "fp32" | "none" => None,
        "int8" => Some(LinearQuant::Int8),
        "int4" => Some(LinearQuant::Int4 { group: check_group(group)? }),
        "8da4w" => Some(LinearQuant::Int8DynInt4 { group: check_group(group)? }),
        other => return Err(CliError(format!("quantization '{other}' is not known (fp32, int8, int4, 8da4w)"))),
    })
}

/// Parses an embedding quantization mode: `none`, `int8`, `int4`.
pub fn parse_embedding_quant(mode: &str, group: usize) -> CliResult<Option<EmbeddingQuant>> {
    Ok(match mode {
        "none" | "fp32" => None,
        "int8" | "8" => Some(EmbeddingQuant::Int8),
        "int4" | "4" => Some(EmbeddingQuant::Int4 { group: check_group(group)? }),
        other => return Err(CliError(format!("embedding quantization '{other}' is not known (none, int8, int4)"))),
    })
}

fn check_group(g: usize) -> CliResult<usize> {
    if [32, 64, 128, 256].contains(&g) {
        Ok(g)
    } else {
        Err(CliError(format!("group size {g} is not supported (32, 64, 128, 256)")))
    }
}

/// Exports the program; returns its bytes and a report.
pub fn export_llm(o: &LlmExport) -> CliResult<(Vec<u8>, LlmReport)> {
    let t0 = Instant::now();
    let mut notes = Vec::new();
    let source = o.checkpoint.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "demo".into());
    let err = |e: rbuild_export::ExportError| CliError(format!("{source}: {e}"));
    let (config, mut params) = match &o.checkpoint {
        Some(dir) => {
            let (c, w) = llama::open_checkpoint(dir).map_err(err)?;
            (c, Params::new(&w))
        }
        None => {
            notes.push(format!("demo model: a tiny Llama with random weights (seed {}), not a trained model", o.seed));
            (llama::demo_config(), Params::random(o.seed))
        }
    };
    let (mut graph, getters) = if o.core_aten {
        if o.linear.is_some() || o.embedding.is_some() {
            return Err(CliError("the Core-ATen-only export is float32 (drop quantization)".into()));
        }
        let g = llama::build_with(&config, &mut params, o.max_seq_len).map_err(err)?;
        let mut getters = vec![
            Getter::int("get_max_seq_len", o.max_seq_len as i64),
            Getter::int("get_vocab_size", config.vocab_size as i64),
            Getter::bool("use_kv_cache", false),
            Getter::bool("enable_dynamic_shape", false),
        ];
        if let Some(bos) = config.bos_token_id {
            getters.push(Getter::int("get_bos_id", bos));
        }
        if !config.eos_token_ids.is_empty() {
            getters.push(Getter::ints("get_eos_ids", &config.eos_token_ids));
        }
        (g, getters)
    } else {
        let p = llama::build_kv(&config, &mut params, &KvExport { max_seq_len: o.max_seq_len, full_logits: o.full_logits }).map_err(err)?;
        (p.graph, p.getters)
    };
    let mut description = format!("{} ({} layers, dim {}, vocab {})", config.arch.name(), config.num_hidden_layers, config.hidden_size, config.vocab_size);
    if let Some(mode) = o.linear {
        let r = quantize::quantize_linears(&mut graph, mode).map_err(err)?;
        description += &format!(", linears {} ({} layers)", mode.name(), r.quantized);
        notes.extend(r.skipped.iter().map(|s| format!("kept float32: {s}")));
    }
    if let Some(mode) = o.embedding {
        let r = quantize::quantize_embeddings(&mut graph, mode).map_err(err)?;
        description += &format!(", embedding {}", match mode {
            EmbeddingQuant::Int8 => "int8".to_string(),
            EmbeddingQuant::Int4 { group } => format!("int4-g{group}"),
        });
        notes.extend(r.skipped.iter().map(|s| format!("kept float32: {s}")));
    }
    let options = Options { decompose_linear: o.core_aten };
    passes::optimize_with(&mut graph, &options).map_err(err)?;
    let mem = plan::plan_memory(&graph);
    let bytes = emit::emit_program(&[MethodSpec { name: "forward", graph: &graph, plan: &mem }], &getters).map_err(err)?;
    let mut ops = std::collections::BTreeMap::new();
    for n in &graph.nodes {
        *ops.entry(n.op.clone()).or_default() += 1;
    }
    let report = LlmReport {
        description,
        ops,
        arena_bytes: mem.arena_bytes,
        constant_bytes: graph.constant_bytes(),
        program_bytes: bytes.len(),
        notes,
        millis: t0.elapsed().as_secs_f64() * 1e3,
    };
    Ok((bytes, report))
}

impl LlmReport {
    pub fn print(&self, out: &std::path::Path) {
        println!("exported {} → {} ({} bytes)", self.description, out.display(), self.program_bytes);
        for n in &self.notes {
            println!("  note: {n}");
        }
        println!("  operators:");
        for (op, n) in &self.ops {
            println!("    {op:<55} x{n}");
        }
        println!("  planned arena (activations + KV cache): {} bytes", self.arena_bytes);
        println!("  constants: {} bytes", self.constant_bytes);
        println!("  time: {:.1} ms", self.millis);
    }
}

/// GPT-2's byte → printable-character map, which byte-level BPE vocabularies are written in.
fn byte_symbols() -> Vec<char> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut extra = 0;
    (0u32..256)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).unwrap_or('?')
            } else {
                extra += 1;
                char::from_u32(255 + extra).unwrap_or('?')
            }
        })
        .collect()
}

/// The demo model's tokenizer: byte-level BPE with no merges (every byte is a token), the
/// specials `<unk>`=0, `<s>`=1, `</s>`=2 and the 256 bytes at 3..=258, `<s>` prepended.
pub fn demo_tokenizer_json() -> String {
    let mut vocab = serde_json::Map::new();
    for (i, s) in ["<unk>", "<s>", "</s>"].iter().enumerate() {
        vocab.insert(s.to_string(), serde_json::json!(i));
    }
    for (b, c) in byte_symbols().into_iter().enumerate() {
        vocab.insert(c.to_string(), serde_json::json!(b + 3));
    }
    let special = |id: usize, content: &str| {
        serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true})
    };
    let doc = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": []}
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
