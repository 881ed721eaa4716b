//! The Llama family behind the [`crate::family::Family`] interface: one `forward` method (the
//! KV-cache program, or the Core-ATen full-sequence forward) and ExecuTorch's LLM getters.

use rbuild_export::emit::Getter;
use rbuild_export::error::Result;

use super::{build_kv, build_with, config_of, demo_config, open_checkpoint, KvExport, LlamaConfig};
use crate::family::{ExportOptions, Family, FamilyProgram, Fitted, MethodGraph, Source};
use crate::fit::SizeRequest;
use crate::Params;

/// The cache length when the export does not say (the CLI's long-standing default), lowered
/// to the model's trained context where that is shorter.
pub const DEFAULT_MAX_SEQ_LEN: usize = 128;

pub struct Llama;

/// `o`'s sizes fitted to model `c`.
fn fit_config(c: &LlamaConfig, o: &ExportOptions) -> Result<Fitted> {
    let (max_seq_len, lowered) = c.fit_seq_len(o.max_seq_len.unwrap_or(SizeRequest::UpTo(DEFAULT_MAX_SEQ_LEN)))?;
    Ok(Fitted { max_seq_len, max_audio_seconds: None, lowered: lowered.into_iter().collect() })
}

impl Family for Llama {
    fn name(&self) -> &'static str {
        "llama"
    }

    fn summary(&self) -> &'static str {
        "Llama, Mistral, Qwen2, Qwen3; --weights HF_FOLDER or --random-weights SEED, --max-seq-len N, --quant …"
    }

    fn fit(&self, source: &Source, o: &ExportOptions) -> Result<Fitted> {
        fit_config(&config_of(source)?, o)
    }

    fn build(&self, source: &Source, o: &ExportOptions) -> Result<FamilyProgram> {
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
        let fitted = fit_config(&config, o)?;
        notes.extend(fitted.lowered.iter().map(|l| l.describe("default")));
        let max_seq_len = fitted.max_seq_len;
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

    fn demo_tokenizer_config_json(&self) -> Option<String> {
        // A plain role-per-turn template over the demo's own special tokens.
        let template = "{% for message in messages %}<s>{{ message['role'] }}\n{{ message['content'] }}</s>\n{% endfor %}\
                        {% if add_generation_prompt %}<s>assistant\n{% endif %}";
        let config = serde_json::json!({ "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "chat_template": template });
        Some(format!("{config:#}\n"))
    }
}
