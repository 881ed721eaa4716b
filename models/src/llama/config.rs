//! `config.json` of a Hugging Face decoder-only checkpoint, for the Llama family and its close
//! variants. Anything the forward does not implement is an error naming the field, never a
//! silently different model.

use std::path::Path;

use rbuild_export::error::Result;
use rbuild_export::ExportError;
use serde_json::{Map, Value};

use crate::fit::{self, Limit, Lowered, SizeRequest};

/// The architectures the forward implements (HF `model_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Llama 2/3/3.1/3.2 (`LlamaForCausalLM`).
    Llama,
    /// Mistral (Llama layout; sliding window only when it never binds).
    Mistral,
    /// Qwen2: q/k/v projections carry biases.
    Qwen2,
    /// Qwen3: RMSNorm over each head of q and k before RoPE.
    Qwen3,
}

impl Arch {
    pub const ALL: [(&'static str, Arch); 4] =
        [("llama", Arch::Llama), ("mistral", Arch::Mistral), ("qwen2", Arch::Qwen2), ("qwen3", Arch::Qwen3)];

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, a)| *a == self).map(|(n, _)| *n).unwrap_or("llama")
    }
}

/// Llama 3.1's frequency-dependent RoPE rescaling (`rope_type: "llama3"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Llama3Scaling {
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: f64,
}

/// The `config.json` fields the forward needs.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    pub arch: Arch,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub intermediate_size: usize,
    pub vocab_size: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub rope_scaling: Option<Llama3Scaling>,
    /// Per-frequency divisors of the inverse frequencies (a GGUF file's `rope_freqs.weight`:
    /// how llama.cpp stores Llama 3.1's rescaling).
    pub rope_freq_factors: Option<Vec<f32>>,
    pub tie_word_embeddings: bool,
    /// Biases on the q/k/v projections (Qwen2; Llama's `attention_bias` also adds o_proj's).
    pub qkv_bias: bool,
    pub o_bias: bool,
    pub mlp_bias: bool,
    /// Per-head RMSNorm of q and k (Qwen3).
    pub qk_norm: bool,
    pub max_position_embeddings: Option<usize>,
    /// Mistral/Qwen sliding window, when the config enables it.
    pub sliding_window: Option<usize>,
    pub bos_token_id: Option<i64>,
    pub eos_token_ids: Vec<i64>,
}

fn config_err(source: &str, message: impl Into<String>) -> ExportError {
    ExportError::Invalid(format!("{source}: {}", message.into()))
}

/// Token ids given as a number or a list of numbers.
fn token_ids(v: Option<&Value>) -> Vec<i64> {
    match v {
        Some(Value::Number(n)) => n.as_i64().into_iter().collect(),
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_i64).collect(),
        _ => vec![],
    }
}

impl LlamaConfig {
    /// Reads `config.json`; `generation_config.json` next to it supplies bos/eos ids the config
    /// leaves out.
    pub fn load(path: &Path) -> Result<LlamaConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ExportError::Io { path: path.display().to_string(), message: e.to_string() })?;
        let mut c = Self::parse(&text, &path.display().to_string())?;
        if let Some(dir) = path.parent() {
            c.fill_ids_from_generation_config(dir);
        }
        Ok(c)
    }

    /// Takes the bos/eos ids the config leaves out from `generation_config.json` in `dir`.
    pub fn fill_ids_from_generation_config(&mut self, dir: &Path) {
        if self.bos_token_id.is_some() && !self.eos_token_ids.is_empty() {
            return;
        }
        let Ok(gen) = std::fs::read_to_string(dir.join("generation_config.json")) else { return };
        if let Ok(Value::Object(g)) = serde_json::from_str::<Value>(&gen) {
            if self.bos_token_id.is_none() {
                self.bos_token_id = g.get("bos_token_id").and_then(Value::as_i64);
            }
            if self.eos_token_ids.is_empty() {
                self.eos_token_ids = token_ids(g.get("eos_token_id"));
            }
        }
    }

    /// Parses an HF config; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<LlamaConfig> {
        let j: Value = serde_json::from_str(text).map_err(|e| config_err(source, format!("invalid JSON: {e}")))?;
        let obj = j.as_object().ok_or_else(|| config_err(source, "config must be a JSON object"))?;
        Self::from_object(obj, source)
    }

    /// The config from its parsed JSON object: a whole `config.json`, or the `text_config` a
    /// multimodal checkpoint (Voxtral) nests.
    pub fn from_object(obj: &Map<String, Value>, source: &str) -> Result<LlamaConfig> {
        let known: Vec<&str> = Arch::ALL.iter().map(|(n, _)| *n).collect();
        let arch = match obj.get("model_type").and_then(Value::as_str) {
            Some(t) => Arch::ALL.iter().find(|(n, _)| *n == t).map(|(_, a)| *a).ok_or_else(|| {
                config_err(source, format!("model_type '{t}' is not supported (supported: {})", known.join(", ")))
            })?,
            None => return Err(config_err(source, format!("model_type is missing (supported: {})", known.join(", ")))),
        };
        let usize_field = |key: &str| -> Result<Option<usize>> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if n > 0 => Ok(Some(n as usize)),
                    _ => Err(config_err(source, format!("{key} must be a positive integer, got {v}"))),
                },
            }
        };
        let required = |key: &str| -> Result<usize> { usize_field(key)?.ok_or_else(|| config_err(source, format!("{key} is missing"))) };
        let flag = |key: &str| obj.get(key).and_then(Value::as_bool);
        let hidden_size = required("hidden_size")?;
        let num_hidden_layers = required("num_hidden_layers")?;
        let num_attention_heads = required("num_attention_heads")?;
        let num_key_value_heads = usize_field("num_key_value_heads")?.unwrap_or(num_attention_heads);
        let head_dim = usize_field("head_dim")?.unwrap_or(hidden_size / num_attention_heads);
        let intermediate_size = required("intermediate_size")?;
        let vocab_size = required("vocab_size")?;
        if num_attention_heads % num_key_value_heads != 0 {
            return Err(config_err(
                source,
                format!("num_attention_heads {num_attention_heads} is not a multiple of num_key_value_heads {num_key_value_heads}"),
            ));
        }
        if head_dim % 2 != 0 {
            return Err(config_err(source, format!("head_dim {head_dim} must be even for RoPE")));
        }
        let float = |key: &str| obj.get(key).and_then(Value::as_f64);
        let rms_norm_eps = float("rms_norm_eps").unwrap_or(1e-6);
        if let Some(act) = obj.get("hidden_act").or_else(|| obj.get("hidden_activation")).and_then(Value::as_str) {
            if act != "silu" {
                return Err(config_err(source, format!("hidden_act '{act}' is not supported (only 'silu')")));
            }
        }
        let attention_bias = flag("attention_bias").unwrap_or(false);
        let (qkv_bias, o_bias) = match arch {
            Arch::Qwen2 => (true, false),
            _ => (attention_bias, attention_bias),
        };
        let mlp_bias = flag("mlp_bias").unwrap_or(false);
        let (rope_theta, rope_scaling) = rope(obj, source)?;
        let max_position_embeddings = usize_field("max_position_embeddings")?;
        // Qwen configs carry a window but switch it off with use_sliding_window=false.
        let sliding_window = match (arch, flag("use_sliding_window")) {
            (Arch::Qwen2 | Arch::Qwen3, Some(false) | None) => None,
            _ => usize_field("sliding_window")?,
        };
        let tie_word_embeddings = flag("tie_word_embeddings").unwrap_or(false);
        if rms_norm_eps < 0.0 {
            return Err(config_err(source, format!("rms_norm_eps {rms_norm_eps} is negative")));
        }
        Ok(LlamaConfig {
            arch,
            hidden_size,
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            intermediate_size,
            vocab_size,
            rms_norm_eps,
            rope_theta,
            rope_scaling,
            rope_freq_factors: None,
            tie_word_embeddings,
            qkv_bias,
            o_bias,
            mlp_bias,
            qk_norm: arch == Arch::Qwen3,
            max_position_embeddings,
            sliding_window,
            bos_token_id: obj.get("bos_token_id").and_then(Value::as_i64),
            eos_token_ids: token_ids(obj.get("eos_token_id")),
        })
    }

    /// The RoPE inverse frequencies of this model.
    pub fn inv_freq(&self) -> Vec<f32> {
        let base = super::rope::inv_freq(self.head_dim, self.rope_theta, self.rope_scaling.as_ref());
        match &self.rope_freq_factors {
            Some(f) => base.iter().zip(f).map(|(b, f)| b / f).collect(),
            None => base,
        }
    }

    /// The longest cache this model can serve: its trained context, or a sliding window we do
    /// not implement when that is shorter; None when the config names neither.
    pub fn seq_len_limit(&self) -> Option<Limit> {
        let trained = self.max_position_embeddings.map(|n| Limit::new(n, "the model's max_position_embeddings"));
        let window = self.sliding_window.map(|w| Limit::new(w, "the model's sliding_window"));
        fit::tighter(trained, window)
    }

    /// Cache length `requested` fitted to [`LlamaConfig::seq_len_limit`]: a default is lowered
    /// to it, an exact value beyond it is an error.
    pub fn fit_seq_len(&self, requested: SizeRequest<usize>) -> Result<(usize, Option<Lowered>)> {
        if let SizeRequest::Exactly(n) = requested {
            // Its message explains why a sliding window limits the cache.
            self.check_max_seq_len(n)?;
        }
        let (n, lowered) = fit::seq_len_within(requested, self.seq_len_limit().as_ref())?;
        self.check_max_seq_len(n)?;
        Ok((n, lowered))
    }

    /// The longest sequence this export can serve: `requested`, checked against the
    /// checkpoint's trained context and a sliding window we do not implement.
    pub fn check_max_seq_len(&self, requested: usize) -> Result<()> {
        if requested == 0 {
            return Err(ExportError::Invalid("max_seq_len must be at least 1".into()));
        }
        if let Some(w) = self.sliding_window {
            if requested > w {
                return Err(ExportError::Invalid(format!(
                    "max_seq_len {requested} exceeds the sliding window {w}: sliding-window attention is not implemented; export with max_seq_len <= {w}"
                )));
            }
        }
        Ok(())
    }
}

/// RoPE settings: transformers ≥ 5 keeps them under `rope_parameters`; older configs use a
/// top-level `rope_theta` and an optional `rope_scaling`.
fn rope(obj: &Map<String, Value>, source: &str) -> Result<(f64, Option<Llama3Scaling>)> {
    let params = match obj.get("rope_parameters") {
        Some(Value::Object(r)) => Some(r),
        None | Some(Value::Null) => match obj.get("rope_scaling") {
            Some(Value::Object(r)) => Some(r),
            None | Some(Value::Null) => None,
            Some(v) => return Err(config_err(source, format!("rope_scaling must be an object, got {v}"))),
        },
        Some(v) => return Err(config_err(source, format!("rope_parameters must be an object, got {v}"))),
    };
    let theta = params
        .and_then(|r| r.get("rope_theta"))
        .and_then(Value::as_f64)
        .or_else(|| obj.get("rope_theta").and_then(Value::as_f64))
        .unwrap_or(10000.0);
    if theta <= 0.0 {
        return Err(config_err(source, format!("rope_theta {theta} must be positive")));
    }
    let Some(r) = params else { return Ok((theta, None)) };
    let ty = r.get("rope_type").or_else(|| r.get("type")).and_then(Value::as_str).unwrap_or("default");
    match ty {
        "default" => Ok((theta, None)),
        "llama3" => {
            let num = |key: &str| -> Result<f64> {
                r.get(key)
                    .and_then(Value::as_f64)
                    .filter(|v| *v > 0.0)
                    .ok_or_else(|| config_err(source, format!("rope_type 'llama3' needs a positive {key}")))
            };
            let s = Llama3Scaling {
                factor: num("factor")?,
                low_freq_factor: num("low_freq_factor")?,
                high_freq_factor: num("high_freq_factor")?,
                original_max_position_embeddings: num("original_max_position_embeddings")?,
            };
            if s.high_freq_factor <= s.low_freq_factor {
                return Err(config_err(source, "rope llama3: high_freq_factor must exceed low_freq_factor"));
            }
            Ok((theta, Some(s)))
        }
        t => Err(config_err(source, format!("rope_type '{t}' is not supported (supported: default, llama3)"))),
    }
}
