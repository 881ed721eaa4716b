//! `config.json` of an HF `VoxtralForConditionalGeneration` checkpoint → [`VoxtralConfig`]:
//! `audio_config` is a Whisper encoder's (read into [`EncoderDims`]), `text_config` a Llama
//! decoder's (read by [`LlamaConfig::from_object`]). What rbuild does not implement is an
//! error naming the field.

use std::path::Path;

use rbuild_export::error::Result;
use rbuild_export::ExportError;
use serde_json::{Map, Value};

use crate::config_json::{self, invalid};
use crate::llama::{Arch, LlamaConfig};
use crate::whisper::config::EncoderDims;

/// The architecture and the ids a runner needs.
#[derive(Clone, Debug, PartialEq)]
pub struct VoxtralConfig {
    /// The audio tower (a Whisper encoder).
    pub audio: EncoderDims,
    /// The width of the projector's input: `audio_config.intermediate_size`, by which HF
    /// reshapes the encoder output (4 consecutive frames of 1280 in every Voxtral).
    pub projector_input: usize,
    /// The language model.
    pub text: LlamaConfig,
    /// `[AUDIO]`: the placeholder the audio embeddings replace.
    pub audio_token_id: i64,
}

impl VoxtralConfig {
    /// Encoder frames concatenated into one audio token.
    pub fn frames_per_token(&self) -> usize {
        self.projector_input / self.audio.d_model
    }

    /// Audio tokens one window (chunk) of audio becomes (375 for 30 s).
    pub fn tokens_per_chunk(&self) -> usize {
        self.audio.max_source_positions / self.frames_per_token()
    }

    /// Mel frames of one window (3000 for 30 s).
    pub fn chunk_frames(&self) -> usize {
        self.audio.frames_per_window()
    }

    /// Reads `config.json` in `dir`; `generation_config.json` supplies bos/eos ids the text
    /// config leaves out.
    pub fn load(dir: &Path) -> Result<VoxtralConfig> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| ExportError::Io { path: path.display().to_string(), message: e.to_string() })?;
        let mut c = Self::parse(&text, &path.display().to_string())?;
        c.text.fill_ids_from_generation_config(dir);
        Ok(c)
    }

    /// Parses the config text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<VoxtralConfig> {
        let j: Value = serde_json::from_str(text).map_err(|e| invalid(source, format!("invalid JSON: {e}")))?;
        let c = j.as_object().ok_or_else(|| invalid(source, "config must be a JSON object"))?;
        match c.get("model_type").and_then(Value::as_str) {
            Some("voxtral") => {}
            Some(t) => return Err(invalid(source, format!("model_type '{t}' is not voxtral"))),
            None => return Err(invalid(source, "model_type is missing (expected \"voxtral\")")),
        }
        config_json::require_gelu(c, "projector_hidden_act", source)?;
        let audio_source = format!("{source}: audio_config");
        let (audio, projector_input) = audio_config(config_json::section(c, "audio_config", source)?, &audio_source)?;
        let text_source = format!("{source}: text_config");
        let text = LlamaConfig::from_object(config_json::section(c, "text_config", source)?, &text_source)?;
        if !matches!(text.arch, Arch::Llama | Arch::Mistral) {
            return Err(invalid(&text_source, format!("model_type '{}' is not a Llama decoder", text.arch.name())));
        }
        let audio_token_id = c.get("audio_token_id").and_then(Value::as_i64).ok_or_else(|| invalid(source, "audio_token_id is missing"))?;
        if audio_token_id < 0 || audio_token_id as usize >= text.vocab_size {
            return Err(invalid(source, format!("audio_token_id {audio_token_id} is outside the vocabulary (vocab_size {})", text.vocab_size)));
        }
        Ok(VoxtralConfig { audio, projector_input, text, audio_token_id })
    }
}

/// The audio tower's dimensions and the projector's input width.
fn audio_config(a: &Map<String, Value>, source: &str) -> Result<(EncoderDims, usize)> {
    let count = |key: &str| config_json::positive(a, key, source);
    config_json::require_gelu(a, "activation_function", source)?;
    if a.get("scale_embedding").and_then(Value::as_bool) == Some(true) {
        return Err(invalid(source, "scale_embedding true is not supported"));
    }
    let dims = EncoderDims {
        d_model: count("hidden_size")?,
        layers: count("num_hidden_layers")?,
        heads: count("num_attention_heads")?,
        ffn: count("intermediate_size")?,
        num_mel_bins: count("num_mel_bins")?,
        max_source_positions: count("max_source_positions")?,
    };
    if dims.d_model % dims.heads != 0 {
        return Err(invalid(source, format!("hidden_size {} is not a multiple of num_attention_heads {}", dims.d_model, dims.heads)));
    }
    for (key, want) in [("head_dim", dims.d_model / dims.heads), ("num_key_value_heads", dims.heads)] {
        if let Some(v) = a.get(key).filter(|v| !v.is_null()) {
            if v.as_u64() != Some(want as u64) {
                return Err(invalid(source, format!("{key} {v} is not supported (the Whisper encoder has {want})")));
            }
        }
    }
    // HF reshapes the encoder output by intermediate_size: whole frames per audio token, and
    // whole tokens per window.
    let projector_input = dims.ffn;
    if projector_input % dims.d_model != 0 || dims.max_source_positions % (projector_input / dims.d_model) != 0 {
        return Err(invalid(
            source,
            format!(
                "intermediate_size {projector_input} must be a multiple of hidden_size {} that divides max_source_positions {} (frames per audio token)",
                dims.d_model, dims.max_source_positions
            ),
        ));
    }
    Ok((dims, projector_input))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mistralai/Voxtral-Mini-3B-2507`'s config.json (transformers ≥ 4.54 layout).
    const MINI_3B: &str = r#"{
      "architectures": ["VoxtralForConditionalGeneration"],
      "audio_config": {"activation_dropout": 0.0, "activation_function": "gelu", "attention_dropout": 0.0, "dropout": 0.0,
        "head_dim": 64, "hidden_size": 1280, "initializer_range": 0.02, "intermediate_size": 5120, "layerdrop": 0.0,
        "max_source_positions": 1500, "model_type": "voxtral_encoder", "num_attention_heads": 20, "num_hidden_layers": 32,
        "num_key_value_heads": 20, "num_mel_bins": 128, "scale_embedding": false, "vocab_size": 51866},
      "audio_token_id": 24, "hidden_size": 3072, "model_type": "voxtral", "projector_hidden_act": "gelu",
      "text_config": {"attention_bias": false, "attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "hidden_size": 3072,
        "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
        "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 30, "num_key_value_heads": 8,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 100000000.0, "sliding_window": null,
        "use_cache": true, "vocab_size": 131072},
      "torch_dtype": "bfloat16", "transformers_version": "4.54.0.dev0"
    }"#;

    /// `mistralai/Voxtral-Small-24B-2507`'s, with transformers 5's `rope_parameters`.
    const SMALL_24B: &str = r#"{
      "architectures": ["VoxtralForConditionalGeneration"],
      "audio_config": {"activation_function": "gelu", "head_dim": 64, "hidden_size": 1280, "intermediate_size": 5120,
        "max_source_positions": 1500, "model_type": "voxtral_encoder", "num_attention_heads": 20, "num_hidden_layers": 32,
        "num_key_value_heads": 20, "num_mel_bins": 128, "scale_embedding": false, "vocab_size": 51866},
      "audio_token_id": 24, "hidden_size": 5120, "model_type": "voxtral", "projector_hidden_act": "gelu",
      "text_config": {"attention_bias": false, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
        "intermediate_size": 32768, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
        "rope_parameters": {"rope_theta": 100000000.0, "rope_type": "default"}, "sliding_window": null, "vocab_size": 131072},
      "dtype": "bfloat16"
    }"#;

    #[test]
    fn released_configs_parse() {
        for (text, hidden, layers, ffn) in [(MINI_3B, 3072, 30, 8192), (SMALL_24B, 5120, 40, 32768)] {
            let c = VoxtralConfig::parse(text, "config.json").unwrap();
            assert_eq!(c.audio, EncoderDims { d_model: 1280, layers: 32, heads: 20, ffn: 5120, num_mel_bins: 128, max_source_positions: 1500 });
            assert_eq!((c.frames_per_token(), c.tokens_per_chunk(), c.chunk_frames()), (4, 375, 3000));
            assert_eq!((c.text.hidden_size, c.text.num_hidden_layers, c.text.intermediate_size), (hidden, layers, ffn));
            assert_eq!((c.text.num_attention_heads, c.text.num_key_value_heads, c.text.head_dim), (32, 8, 128));
            assert_eq!((c.text.rope_theta, c.text.rope_scaling, c.text.vocab_size), (1e8, None, 131072));
            assert_eq!(c.audio_token_id, 24);
        }
    }

    #[test]
    fn unsupported_values_name_the_field() {
        let bad = |from: &str, to: &str| {
            let text = MINI_3B.replacen(from, to, 1);
            assert_ne!(text, MINI_3B, "{from}");
            VoxtralConfig::parse(&text, "config.json").unwrap_err().to_string()
        };
        assert!(bad(r#""projector_hidden_act": "gelu""#, r#""projector_hidden_act": "relu""#).contains("projector_hidden_act 'relu'"));
        assert!(bad(r#""activation_function": "gelu""#, r#""activation_function": "gelu_new""#).contains("audio_config: activation_function 'gelu_new'"));
        assert!(bad(r#""rope_scaling": null"#, r#""rope_scaling": {"rope_type": "yarn", "factor": 4.0}"#).contains("text_config: rope_type 'yarn'"));
        assert!(bad(r#""hidden_act": "silu""#, r#""hidden_act": "gelu""#).contains("text_config: hidden_act 'gelu'"));
        assert!(bad(r#""intermediate_size": 5120"#, r#""intermediate_size": 5000"#).contains("intermediate_size 5000"));
        assert!(bad(r#""audio_token_id": 24"#, r#""audio_token_id": 131072"#).contains("audio_token_id 131072"));
        assert!(bad(r#""model_type": "voxtral""#, r#""model_type": "whisper""#).contains("model_type 'whisper'"));
        assert!(bad(r#""num_hidden_layers": 32"#, r#""num_hidden_layers": 0"#).contains("audio_config: num_hidden_layers must be a positive integer"));
    }
}
