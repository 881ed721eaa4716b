//! The Llama family behind the [`crate::family::Family`] interface: one `forward` method (the
//! KV-cache program, or the Core-ATen full-sequence forward) and ExecuTorch's LLM getters.

use rbuild_export::emit::Getter;
use rbuild_export::error::Result;

use super::{build_kv, build_with, demo_config, open_checkpoint, KvExport};
use crate::family::{ExportOptions, Family, FamilyProgram, MethodGraph, Source};
use crate::Params;

pub struct Llama;

impl Family for Llama {
    fn name(&self) -> &'static str {
        "llama"
    }

    fn summary(&self) -> &'static str {
        "Llama, Mistral, Qwen2, Qwen3; --weights HF_FOLDER or --random-weights SEED, --max-seq-len N, --quant …"
    }

    fn build(&self, source: &Source, o: &ExportOptions) -> Result<FamilyProgram> {
        // The CLI's long-standing default.
        let max_seq_len = o.max_seq_len.unwrap_or(128);
        let mut notes = Vec::new();
        let (config, mut params) = match source {
            Source::Checkpoint(dir) => {
                let (c, w) = open_checkpoint(dir)?;
                notes.extend(w.import_notes.iter().cloned());
                (c, Params::new(&w))
            }
            Source::Demo { seed } => {
                notes.push(format!("demo model: a tiny Llama with random weights (seed {seed}), not a trained model"));
                (demo_config(), Params::random(*seed))
            }
        };
        let (graph, getters) = if o.core_aten {
            let g = build_with(&config, &mut params, max_seq_len)?;
            let mut getters = vec![
                Getter::int("get_max_seq_len", max_seq_len as i64),
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
            let p = build_kv(&config, &mut params, &KvExport { max_seq_len, full_logits: o.full_logits })?;
            (p.graph, p.getters)
        };
        let description =
            format!("{} ({} layers, dim {}, vocab {})", config.arch.name(), config.num_hidden_layers, config.hidden_size, config.vocab_size);
        let prequantized = params.weights().prequantized.clone();
        if !prequantized.is_empty() && o.linear.is_none() {
            notes.push(format!("{} linears stored as GGUF blocks dequantized to float32 (quantize none)", prequantized.len()));
        }
        Ok(FamilyProgram { methods: vec![MethodGraph { name: "forward".into(), graph }], getters, description, notes, prequantized })
    }

    fn demo_tokenizer_json(&self) -> Option<String> {
        Some(crate::tokenizer_json::byte_level(&["<unk>", "<s>", "</s>"], Some("<s>")))
    }
}
