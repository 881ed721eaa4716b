//! Voxtral behind the [`crate::family::Family`] interface: `audio_encoder`, `token_embedding`,
//! `text_decoder` (ExecuTorch's multimodal method names) and the getters of the module doc's
//! contract ([`super`]).

use rbuild_export::emit::Getter;
use rbuild_export::error::Result;
use rbuild_export::ExportError;

use super::config::VoxtralConfig;
use super::graph;
use crate::family::{ExportOptions, Family, FamilyProgram, Fitted, MethodGraph, Source};
use crate::fit::{Lowered, SizeRequest};
use crate::llama::{self, Arch, KvExport, LlamaConfig};
use crate::whisper::features::{HOP_LENGTH, N_FFT, SAMPLE_RATE};
use crate::whisper::config::EncoderDims;
use crate::hf_checkpoint::not_a_checkpoint;
use crate::Params;

/// The cache length when the export does not say (lowered to the model's trained context
/// where that is shorter): two 30 s chunks (750 audio tokens) and a reply.
pub const DEFAULT_MAX_SEQ_LEN: usize = 1024;

pub struct Voxtral;

impl Family for Voxtral {
    fn name(&self) -> &'static str {
        "voxtral"
    }

    fn summary(&self) -> &'static str {
        "Voxtral speech understanding (HF VoxtralForConditionalGeneration); --weights HF_FOLDER or --random-weights SEED, --max-seq-len N, --max-audio-seconds S, --quant …"
    }

    fn fit(&self, source: &Source, o: &ExportOptions) -> Result<Fitted> {
        let c = match source {
            Source::Checkpoint(dir) if !dir.is_dir() => return Err(not_a_checkpoint(dir)),
            Source::Checkpoint(dir) => VoxtralConfig::load(dir)?,
            Source::Demo { .. } => demo_config(),
        };
        fit_config(&c, o)
    }

    fn build(&self, source: &Source, o: &ExportOptions) -> Result<FamilyProgram> {
        if o.core_aten {
            return Err(ExportError::Invalid("voxtral has no Core-ATen-only program (its decoder needs the KV-cache ops)".into()));
        }
        let mut notes = Vec::new();
        let (c, mut p) = match source {
            Source::Checkpoint(dir) => {
                if !dir.is_dir() {
                    return Err(not_a_checkpoint(dir));
                }
                let c = VoxtralConfig::load(dir)?;
                let w = crate::hf_checkpoint::open_weights(dir)?;
                (c, Params::new(&w))
            }
            Source::Demo { seed } => {
                notes.push(format!("demo model: a tiny Voxtral with random weights (seed {seed}), not a trained model; its text means nothing"));
                (demo_config(), Params::random(*seed))
            }
        };
        let fitted = fit_config(&c, o)?;
        notes.extend(fitted.lowered.iter().map(|l| l.describe("default")));
        let max_seq_len = fitted.max_seq_len;
        let max_chunks = max_chunks(&c, &fitted);
        let kv = KvExport { max_seq_len, full_logits: o.full_logits };
        llama::kv_cache::check_cache_len(&c.text, &kv)?;
        let methods = vec![
            MethodGraph { name: "preprocessor".into(), graph: graph::preprocessor(&c, max_chunks)? },
            MethodGraph { name: "audio_encoder".into(), graph: graph::audio_encoder(&c, &mut p, max_chunks)? },
            MethodGraph { name: "token_embedding".into(), graph: graph::token_embedding(&c, &mut p, max_seq_len)? },
            MethodGraph { name: "text_decoder".into(), graph: graph::text_decoder(&c, &mut p, &kv)? },
        ];
        if !p.is_random() {
            p.check_all_used("voxtral")?;
        }
        if o.linear.is_some() {
            // As ExecuTorch's Voxtral export with --qlinear_encoder: the encoder's and the
            // projector's linears are most of the audio path's weights.
            notes.push("linear quantization applies to the audio encoder and projector as well as the decoder".into());
        }
        let description = format!(
            "voxtral (encoder {} layers × {}, decoder {} layers × {}, vocab {}, {} audio tokens per {}-frame chunk, up to {max_chunks} chunks)",
            c.audio.layers,
            c.audio.d_model,
            c.text.num_hidden_layers,
            c.text.hidden_size,
            c.text.vocab_size,
            c.tokens_per_chunk(),
            c.chunk_frames()
        );
        Ok(FamilyProgram { methods, getters: getters(&c, &kv, max_chunks), description, notes, prequantized: Default::default() })
    }

    fn takes_audio(&self) -> bool {
        true
    }

    /// Mistral's checkpoints ship `tekken.json`; converted ones may have `tokenizer.json`.
    fn tokenizer_files(&self) -> &'static [&'static str] {
        &["tekken.json", "tokenizer.json"]
    }

    /// Without a tokenizer the runner takes `--prompt-ids` and prints token ids.
    fn tokenizer_required(&self) -> bool {
        false
    }

    fn demo_tokenizer_json(&self) -> Option<String> {
        Some(super::demo_tokenizer::tekken_json(demo_config().text.vocab_size))
    }

    fn runner_files(&self) -> Vec<(&'static str, Vec<u8>)> {
        vec![("demo.wav", crate::whisper::demo_audio::demo_wav())]
    }
}

/// `o`'s sizes fitted to model `c`: the cache to the decoder's trained context (by default
/// [`DEFAULT_MAX_SEQ_LEN`]), then the audio to the chunks whose tokens that cache holds (by
/// default as many as it holds).
fn fit_config(c: &VoxtralConfig, o: &ExportOptions) -> Result<Fitted> {
    let (max_seq_len, seq_lowered) = c.text.fit_seq_len(o.max_seq_len.unwrap_or(SizeRequest::UpTo(DEFAULT_MAX_SEQ_LEN)))?;
    let per_chunk = c.tokens_per_chunk();
    let fit = max_seq_len / per_chunk;
    if fit == 0 {
        return Err(ExportError::Invalid(format!("max_seq_len {max_seq_len} is shorter than one chunk of audio ({per_chunk} tokens)")));
    }
    let mut lowered: Vec<Lowered> = seq_lowered.into_iter().collect();
    let max_audio_seconds = match o.max_audio_seconds {
        None => None,
        Some(requested) => {
            let s = requested.value();
            if !(s > 0.0 && s <= 24.0 * 3600.0) {
                return Err(ExportError::Invalid(format!("max_audio_seconds {s} must be in (0, 86400]")));
            }
            let need = chunks_for(c, s);
            match requested {
                _ if need <= fit => Some(s),
                SizeRequest::Exactly(_) => {
                    return Err(ExportError::Invalid(format!(
                        "max_audio_seconds {s} needs {need} chunks of {per_chunk} audio tokens, more than max_seq_len {max_seq_len} holds"
                    )))
                }
                // Lowered to as many chunks as the cache holds: kept as None (that count), not
                // as seconds a float division could round into one chunk more.
                SizeRequest::UpTo(_) => {
                    let to = (fit * c.chunk_frames() * HOP_LENGTH) as f64 / SAMPLE_RATE as f64;
                    let because = format!("what max-seq-len {max_seq_len} holds ({fit} chunks of {per_chunk} audio tokens)");
                    lowered.push(Lowered { setting: "max-audio-seconds", from: s, to, because });
                    None
                }
            }
        }
    };
    Ok(Fitted { max_seq_len, max_audio_seconds, lowered })
}

/// The chunks audio `seconds` long fills (at least one).
fn chunks_for(c: &VoxtralConfig, seconds: f64) -> usize {
    let chunk_seconds = (c.chunk_frames() * HOP_LENGTH) as f64 / SAMPLE_RATE as f64;
    (seconds / chunk_seconds).ceil().max(1.0) as usize
}

/// Chunks `audio_encoder` accepts: enough for the fitted audio length, else as many as the
/// cache holds.
fn max_chunks(c: &VoxtralConfig, fitted: &Fitted) -> usize {
    match fitted.max_audio_seconds {
        Some(s) => chunks_for(c, s),
        None => fitted.max_seq_len / c.tokens_per_chunk(),
    }
}

fn getters(c: &VoxtralConfig, kv: &KvExport, max_chunks: usize) -> Vec<Getter> {
    let mut g = llama::kv_cache::getters(&c.text, kv);
    g.extend([
        Getter::int("get_audio_token_id", c.audio_token_id),
        Getter::int("get_tokens_per_chunk", c.tokens_per_chunk() as i64),
        Getter::int("get_chunk_frames", c.chunk_frames() as i64),
        Getter::int("get_max_chunks", max_chunks as i64),
        Getter::int("get_n_mels", c.audio.num_mel_bins as i64),
        Getter::int("get_sample_rate", SAMPLE_RATE as i64),
        Getter::int("get_hop_length", HOP_LENGTH as i64),
        Getter::int("get_n_fft", N_FFT as i64),
        Getter::int("get_hidden_size", c.text.hidden_size as i64),
        Getter::int("get_max_audio_samples", (max_chunks * c.chunk_frames() * HOP_LENGTH) as i64),
    ]);
    g
}

/// The built-in demo: a tiny Voxtral (3.2 s chunks of 40 audio tokens) whose vocabulary fits a
/// Tekken-style tokenizer (1000 specials, 256 bytes, a few merges); `[AUDIO]` = 24 as in
/// Voxtral's own vocabulary.
pub fn demo_config() -> VoxtralConfig {
    VoxtralConfig {
        audio: EncoderDims { d_model: 64, layers: 2, heads: 4, ffn: 256, num_mel_bins: 128, max_source_positions: 160 },
        projector_input: 256,
        text: LlamaConfig {
            arch: Arch::Llama,
            hidden_size: 64,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            head_dim: 16,
            intermediate_size: 172,
            vocab_size: 1300,
            rms_norm_eps: 1e-5,
            rope_theta: 1e8,
            rope_scaling: None,
            rope_freq_factors: None,
            tie_word_embeddings: false,
            qkv_bias: false,
            o_bias: false,
            mlp_bias: false,
            qk_norm: false,
            max_position_embeddings: Some(2048),
            sliding_window: None,
            bos_token_id: Some(1),
            eos_token_ids: vec![2],
        },
        audio_token_id: 24,
    }
}
