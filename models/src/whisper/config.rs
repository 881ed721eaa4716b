//! `config.json` + `generation_config.json` of an HF `WhisperForConditionalGeneration`
//! checkpoint → [`WhisperConfig`]. Every special id comes from the files (large-v3 and `.en`
//! models shift them); what rbuild does not implement is a clear error.

use std::path::Path;

use rbuild_export::error::Result;
use rbuild_export::ExportError;
use serde_json::{Map, Value};

use crate::config_json;

/// A Whisper encoder's dimensions. Voxtral's audio tower is the same encoder under another
/// module name, so both families describe theirs with this.
#[derive(Clone, Debug, PartialEq)]
pub struct EncoderDims {
    pub d_model: usize,
    pub layers: usize,
    pub heads: usize,
    pub ffn: usize,
    pub num_mel_bins: usize,
    /// Encoder positions: the input has `2 ×` this many mel frames.
    pub max_source_positions: usize,
}

impl EncoderDims {
    /// Mel frames one encoder window takes.
    pub fn frames_per_window(&self) -> usize {
        2 * self.max_source_positions
    }
}

/// The architecture and the decoding ids a runner needs.
#[derive(Clone, Debug, PartialEq)]
pub struct WhisperConfig {
    pub d_model: usize,
    pub encoder_layers: usize,
    pub encoder_heads: usize,
    pub encoder_ffn: usize,
    pub decoder_layers: usize,
    pub decoder_heads: usize,
    pub decoder_ffn: usize,
    pub num_mel_bins: usize,
    /// Encoder positions: the input has `2 ×` this many mel frames.
    pub max_source_positions: usize,
    pub max_target_positions: usize,
    pub vocab_size: usize,
    pub scale_embedding: bool,
    pub tie_word_embeddings: bool,
    pub ids: SpecialIds,
}

/// Token ids from `generation_config.json` / `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecialIds {
    pub eos: i64,
    pub decoder_start: i64,
    pub sot_prev: Option<i64>,
    pub no_speech: Option<i64>,
    pub no_timestamps: Option<i64>,
    pub transcribe: Option<i64>,
    pub translate: Option<i64>,
    /// (code, id), e.g. ("en", 50259), in id order.
    pub languages: Vec<(String, i64)>,
    pub suppress_tokens: Vec<i64>,
    pub begin_suppress_tokens: Vec<i64>,
    pub is_multilingual: bool,
}

impl WhisperConfig {
    /// Mel frames one encoder window takes.
    pub fn frames_per_window(&self) -> usize {
        2 * self.max_source_positions
    }

    /// The encoder's dimensions (shared with Voxtral's audio tower).
    pub fn encoder_dims(&self) -> EncoderDims {
        EncoderDims {
            d_model: self.d_model,
            layers: self.encoder_layers,
            heads: self.encoder_heads,
            ffn: self.encoder_ffn,
            num_mel_bins: self.num_mel_bins,
            max_source_positions: self.max_source_positions,
        }
    }

    /// The first timestamp id (`<|0.00|>`), when the vocabulary has timestamp tokens: they
    /// follow `<|notimestamps|>`.
    pub fn timestamp_begin(&self) -> Option<i64> {
        self.ids.no_timestamps.map(|n| n + 1).filter(|&t| (t as usize) < self.vocab_size)
    }

    /// Reads `config.json` in `dir`, and `generation_config.json` when present.
    pub fn load(dir: &Path) -> Result<WhisperConfig> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| ExportError::Io { path: path.display().to_string(), message: e.to_string() })?;
        let gen_path = dir.join("generation_config.json");
        let gen = match std::fs::read_to_string(&gen_path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(ExportError::Io { path: gen_path.display().to_string(), message: e.to_string() }),
        };
        Self::parse(&text, &path.display().to_string(), gen.as_deref().map(|g| (g, gen_path.display().to_string())))
    }

    /// Parses the config text (`source` names it in errors) and the generation config.
    pub fn parse(text: &str, source: &str, generation: Option<(&str, String)>) -> Result<WhisperConfig> {
        let err = |m: String| ExportError::Invalid(format!("{source}: {m}"));
        let j: Value = serde_json::from_str(text).map_err(|e| err(format!("invalid JSON: {e}")))?;
        let c = j.as_object().ok_or_else(|| err("config must be a JSON object".into()))?;
        match c.get("model_type").and_then(Value::as_str) {
            Some("whisper") => {}
            Some(t) => return Err(err(format!("model_type '{t}' is not whisper"))),
            None => return Err(err("model_type is missing (expected \"whisper\")".into())),
        }
        let g: Map<String, Value> = match &generation {
            Some((t, gsource)) => match serde_json::from_str::<Value>(t) {
                Ok(Value::Object(m)) => m,
                Ok(_) => return Err(ExportError::Invalid(format!("{gsource}: must be a JSON object"))),
                Err(e) => return Err(ExportError::Invalid(format!("{gsource}: invalid JSON: {e}"))),
            },
            None => Map::new(),
        };
        let count = |key: &str| -> Result<usize> { config_json::positive(c, key, source) };
        // Values a forward pass depends on that rbuild implements one way only.
        config_json::require_gelu(c, "activation_function", source)?;
        if c.get("use_weighted_layer_sum").and_then(Value::as_bool) == Some(true) {
            return Err(err("use_weighted_layer_sum is for audio classification heads, not supported".into()));
        }
        let id = |key: &str| -> Option<i64> { g.get(key).or_else(|| c.get(key)).and_then(Value::as_i64) };
        let ids_list = |v: Option<&Value>| -> Result<Vec<i64>> {
            match v {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(a)) => a.iter().map(|x| x.as_i64().ok_or_else(|| err(format!("token list entry {x} is not an integer")))).collect(),
                Some(other) => Err(err(format!("expected a list of token ids, got {other}"))),
            }
        };
        let list = |key: &str| -> Result<Vec<i64>> { ids_list(g.get(key).filter(|v| !v.is_null()).or_else(|| c.get(key))) };
        let eos = match g.get("eos_token_id").or_else(|| c.get("eos_token_id")) {
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::Array(a)) => a.first().and_then(Value::as_i64),
            _ => None,
        }
        .ok_or_else(|| err("eos_token_id is missing".into()))?;
        let decoder_start = id("decoder_start_token_id").ok_or_else(|| err("decoder_start_token_id is missing".into()))?;
        let mut languages = Vec::new();
        if let Some(m) = g.get("lang_to_id").and_then(Value::as_object) {
            for (tok, v) in m {
                let code = tok.strip_prefix("<|").and_then(|t| t.strip_suffix("|>")).filter(|c| !c.is_empty() && c.len() <= 8 && c.is_ascii());
                let (Some(code), Some(v)) = (code, v.as_i64()) else {
                    return Err(err(format!("lang_to_id entry {tok}: {v} is not `\"<|xx|>\": id`")));
                };
                languages.push((code.to_string(), v));
            }
        }
        languages.sort_by_key(|(_, id)| *id);
        let task = |name: &str| g.get("task_to_id").and_then(|t| t.get(name)).and_then(Value::as_i64);
        let vocab_size = count("vocab_size")?;
        let ids = SpecialIds {
            eos,
            decoder_start,
            sot_prev: id("prev_sot_token_id"),
            // HF's generation config has no entry for it; in every Whisper vocabulary
            // `<|nospeech|>` directly precedes `<|notimestamps|>`.
            no_speech: id("no_speech_token_id").or_else(|| id("no_timestamps_token_id").map(|n| n - 1)),
            no_timestamps: id("no_timestamps_token_id"),
            transcribe: task("transcribe"),
            translate: task("translate"),
            is_multilingual: g.get("is_multilingual").and_then(Value::as_bool).unwrap_or(languages.len() > 1),
            languages,
            suppress_tokens: list("suppress_tokens")?,
            begin_suppress_tokens: list("begin_suppress_tokens")?,
        };
        let in_vocab = |what: &str, v: i64| -> Result<()> {
            if v < 0 || v as usize >= vocab_size {
                return Err(err(format!("{what} {v} is outside the vocabulary (vocab_size {vocab_size})")));
            }
            Ok(())
        };
        in_vocab("eos_token_id", ids.eos)?;
        in_vocab("decoder_start_token_id", ids.decoder_start)?;
        for (what, v) in [("prev_sot_token_id", ids.sot_prev), ("no_timestamps_token_id", ids.no_timestamps), ("transcribe", ids.transcribe), ("translate", ids.translate)] {
            if let Some(v) = v {
                in_vocab(what, v)?;
            }
        }
        for (code, v) in &ids.languages {
            in_vocab(&format!("<|{code}|>"), *v)?;
        }
        let cfg = WhisperConfig {
            d_model: count("d_model")?,
            encoder_layers: count("encoder_layers")?,
            encoder_heads: count("encoder_attention_heads")?,
            encoder_ffn: count("encoder_ffn_dim")?,
            decoder_layers: count("decoder_layers")?,
            decoder_heads: count("decoder_attention_heads")?,
            decoder_ffn: count("decoder_ffn_dim")?,
            num_mel_bins: count("num_mel_bins")?,
            max_source_positions: count("max_source_positions")?,
            max_target_positions: count("max_target_positions")?,
            vocab_size,
            scale_embedding: c.get("scale_embedding").and_then(Value::as_bool).unwrap_or(false),
            tie_word_embeddings: c.get("tie_word_embeddings").and_then(Value::as_bool).unwrap_or(true),
            ids,
        };
        for (heads, what) in [(cfg.encoder_heads, "encoder_attention_heads"), (cfg.decoder_heads, "decoder_attention_heads")] {
            if cfg.d_model % heads != 0 {
                return Err(err(format!("d_model {} is not a multiple of {what} {heads}", cfg.d_model)));
            }
        }
        Ok(cfg)
    }
}
