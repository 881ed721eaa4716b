//! Whisper behind the [`crate::family::Family`] interface. The program has ExecuTorch's
//! method names (`encoder`, `text_decoder`) plus `preprocessor`, the log-mel front end, so a
//! runner cannot drift from training-time preprocessing; getters carry what the runner needs
//! (sample rate, window, special ids, suppression lists). Method and getter contract:
//! `templates/asr/README.md`.

use rbuild_export::emit::Getter;
use rbuild_runtime::ScalarType;
use rbuild_export::error::Result;
use rbuild_export::ExportError;

use super::config::{SpecialIds, WhisperConfig};
use super::features::{HOP_LENGTH, N_FFT, SAMPLE_RATE};
use super::graph::{self, Ops};
use crate::family::{ExportOptions, Family, FamilyProgram, Fitted, MethodGraph, Source};
use crate::fit::{self, Limit, SizeRequest};
use crate::hf_checkpoint::not_a_checkpoint;
use crate::Params;

/// The longest audio the preprocessor takes when the export does not say (10 minutes).
pub const DEFAULT_MAX_AUDIO_SECONDS: f64 = 600.0;

pub struct Whisper;

impl Family for Whisper {
    fn name(&self) -> &'static str {
        "whisper"
    }

    fn summary(&self) -> &'static str {
        "Whisper speech recognition (HF WhisperForConditionalGeneration); --weights HF_FOLDER or --random-weights SEED, --max-audio-seconds S, --quant …"
    }

    fn fit(&self, source: &Source, o: &ExportOptions) -> Result<Fitted> {
        let c = match source {
            Source::Checkpoint(dir) if !dir.is_dir() => return Err(not_a_checkpoint(dir)),
            Source::Checkpoint(dir) => WhisperConfig::load(dir)?,
            Source::Demo { .. } => demo_config(),
        };
        fit_config(&c, o)
    }

    fn build(&self, source: &Source, o: &ExportOptions) -> Result<FamilyProgram> {
        let mut notes = Vec::new();
        let (c, mut p) = match source {
            Source::Checkpoint(dir) => {
                if !dir.is_dir() {
                    return Err(not_a_checkpoint(dir));
                }
                let c = WhisperConfig::load(dir)?;
                let w = crate::hf_checkpoint::open_weights(dir)?;
                (c, Params::new(&w))
            }
            Source::Demo { seed } => {
                notes.push(format!("demo model: a tiny Whisper with random weights (seed {seed}), not a trained model; its text means nothing"));
                (demo_config(), Params::random(*seed))
            }
        };
        let fitted = fit_config(&c, o)?;
        notes.extend(fitted.lowered.iter().map(|l| l.describe("default")));
        let cache_len = fitted.max_seq_len;
        let seconds = fitted.max_audio_seconds.unwrap_or(DEFAULT_MAX_AUDIO_SECONDS);
        // One window of zeros follows the audio (openai-whisper's padding), so the last window
        // is complete and the log-mel clamp still sees only the file's own maximum.
        let padding = c.frames_per_window() * HOP_LENGTH;
        let max_samples = (seconds * SAMPLE_RATE as f64).ceil() as usize + padding;
        let ops = if o.core_aten { Ops::CoreAten } else { Ops::Fused };
        let mut methods = Vec::new();
        if !o.core_aten {
            methods.push(MethodGraph { name: "preprocessor".into(), graph: graph::preprocessor(&c, max_samples)? });
        }
        methods.push(MethodGraph { name: "encoder".into(), graph: graph::encoder(&c, &mut p, ops)? });
        // Reduced-precision programs keep the cross-attention keys/values in float16 too: each
        // decoder step reads them all (2 × layers × frames × d_model), as much as the weights.
        let cross_cache = if o.linear.is_some() { ScalarType::Half } else { ScalarType::Float };
        let decoder = if o.core_aten { graph::decoder_full(&c, &mut p, cache_len)? } else { graph::decoder_kv(&c, &mut p, cache_len, cross_cache)? };
        methods.push(MethodGraph { name: "text_decoder".into(), graph: decoder });
        if !p.is_random() {
            p.check_all_used("whisper")?;
        }
        let description = format!(
            "whisper ({}+{} layers, d_model {}, {} mels, {} frames per window, vocab {})",
            c.encoder_layers,
            c.decoder_layers,
            c.d_model,
            c.num_mel_bins,
            c.frames_per_window(),
            c.vocab_size
        );
        Ok(FamilyProgram { methods, getters: getters(&c, cache_len, max_samples, o.core_aten), description, notes, prequantized: Default::default() })
    }

    fn tokenizer_required(&self) -> bool {
        false
    }

    fn takes_audio(&self) -> bool {
        true
    }

    fn runner_files(&self) -> Vec<(&'static str, Vec<u8>)> {
        vec![("demo.wav", super::demo_audio::demo_wav())]
    }

    fn demo_tokenizer_json(&self) -> Option<String> {
        let c = demo_config();
        let mut names = vec![String::new(); c.vocab_size - 256];
        let mut set = |id: i64, s: String| names[id as usize - 256] = s;
        set(c.ids.eos, "<|endoftext|>".into());
        set(c.ids.decoder_start, "<|startoftranscript|>".into());
        for (code, id) in &c.ids.languages {
            set(*id, format!("<|{code}|>"));
        }
        let ids = &c.ids;
        for (id, s) in [
            (ids.translate, "<|translate|>"),
            (ids.transcribe, "<|transcribe|>"),
            (ids.sot_prev, "<|startofprev|>"),
            (ids.no_speech, "<|nospeech|>"),
            (ids.no_timestamps, "<|notimestamps|>"),
        ] {
            if let Some(id) = id {
                set(id, s.into());
            }
        }
        if let Some(first) = c.timestamp_begin() {
            for i in first..c.vocab_size as i64 {
                set(i, format!("<|{:.2}|>", (i - first) as f64 * 0.02));
            }
        }
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        Some(crate::tokenizer_json::byte_level_specials_after(&refs))
    }
}

/// `o`'s sizes fitted to model `c`: the decoder's tokens per window to its
/// max_target_positions (by default all of them); the audio length has no model limit (the
/// runner walks any file window by window), only the range a program can serve.
fn fit_config(c: &WhisperConfig, o: &ExportOptions) -> Result<Fitted> {
    let positions = Limit::new(c.max_target_positions, "the decoder's max_target_positions");
    let requested = o.max_seq_len.unwrap_or(SizeRequest::UpTo(c.max_target_positions));
    if requested.value() == 0 {
        return Err(ExportError::Invalid("max_seq_len must be at least 1".into()));
    }
    let (max_seq_len, lowered) = fit::seq_len_within(requested, Some(&positions))?;
    let seconds = o.max_audio_seconds.map_or(DEFAULT_MAX_AUDIO_SECONDS, SizeRequest::value);
    if !(seconds > 0.0 && seconds <= 24.0 * 3600.0) {
        return Err(ExportError::Invalid(format!("max_audio_seconds {seconds} must be in (0, 86400]")));
    }
    Ok(Fitted { max_seq_len, max_audio_seconds: Some(seconds), lowered: lowered.into_iter().collect() })
}

/// Token counts of the demo vocabulary: 256 bytes, the specials, and timestamps for its
/// 3-second window (`<|0.00|>` … `<|3.00|>`).
const DEMO_LANGUAGES: &[&str] = &["en", "de", "fr", "es"];

/// The built-in demo: a tiny multilingual Whisper whose vocabulary is the byte-level demo
/// tokenizer's, with a 3-second window (150 encoder positions) and timestamp tokens.
pub fn demo_config() -> WhisperConfig {
    let first_special = 256i64;
    let languages: Vec<(String, i64)> = DEMO_LANGUAGES.iter().enumerate().map(|(i, l)| (l.to_string(), first_special + 2 + i as i64)).collect();
    let after_langs = first_special + 2 + DEMO_LANGUAGES.len() as i64;
    let (translate, transcribe, sot_prev, no_speech, no_timestamps) =
        (after_langs, after_langs + 1, after_langs + 2, after_langs + 3, after_langs + 4);
    let max_source_positions = 150;
    // Timestamps every 0.02 s over one window: frames_per_window * hop / 16 kHz seconds.
    let window_seconds = (2 * max_source_positions * HOP_LENGTH) as f64 / SAMPLE_RATE as f64;
    let timestamps = (window_seconds / 0.02).round() as i64 + 1;
    let vocab_size = (no_timestamps + 1 + timestamps) as usize;
    WhisperConfig {
        d_model: 64,
        encoder_layers: 2,
        encoder_heads: 4,
        encoder_ffn: 256,
        decoder_layers: 2,
        decoder_heads: 4,
        decoder_ffn: 256,
        num_mel_bins: 80,
        max_source_positions,
        max_target_positions: 96,
        vocab_size,
        scale_embedding: false,
        tie_word_embeddings: true,
        ids: SpecialIds {
            eos: first_special,
            decoder_start: first_special + 1,
            sot_prev: Some(sot_prev),
            no_speech: Some(no_speech),
            no_timestamps: Some(no_timestamps),
            transcribe: Some(transcribe),
            translate: Some(translate),
            languages,
            // Random weights would pick any byte, and most byte strings are not UTF-8: the
            // demo keeps to lowercase letters so its (meaningless) text prints.
            suppress_tokens: (0..first_special).filter(|&b| !(97..=122).contains(&b)).collect(),
            begin_suppress_tokens: vec![first_special],
            is_multilingual: true,
        },
    }
}

/// ASCII bytes of a language code packed little-endian ("en" = 0x6e65): getters carry
/// integers only.
pub fn pack_code(code: &str) -> i64 {
    code.bytes().rev().fold(0i64, |acc, b| (acc << 8) | b as i64)
}

fn getters(c: &WhisperConfig, cache_len: usize, max_samples: usize, core_aten: bool) -> Vec<Getter> {
    let ids = &c.ids;
    let mut g = vec![
        Getter::int("get_sample_rate", SAMPLE_RATE as i64),
        Getter::int("get_n_mels", c.num_mel_bins as i64),
        Getter::int("get_n_fft", N_FFT as i64),
        Getter::int("get_hop_length", HOP_LENGTH as i64),
        Getter::int("get_frames_per_window", c.frames_per_window() as i64),
        Getter::int("get_max_target_positions", cache_len as i64),
        Getter::int("get_vocab_size", c.vocab_size as i64),
        Getter::int("get_d_model", c.d_model as i64),
        Getter::int("get_eos_id", ids.eos),
        Getter::int("get_decoder_start_token_id", ids.decoder_start),
        Getter::bool("get_is_multilingual", ids.is_multilingual),
        Getter::bool("use_kv_cache", !core_aten),
    ];
    if !core_aten {
        g.push(Getter::int("get_max_audio_samples", max_samples as i64));
    }
    for (name, v) in [
        ("get_sot_prev_id", ids.sot_prev),
        ("get_no_speech_id", ids.no_speech),
        ("get_no_timestamps_id", ids.no_timestamps),
        ("get_timestamp_begin", c.timestamp_begin()),
        ("get_transcribe_id", ids.transcribe),
        ("get_translate_id", ids.translate),
    ] {
        if let Some(v) = v {
            g.push(Getter::int(name, v));
        }
    }
    if !ids.languages.is_empty() {
        g.push(Getter::ints("get_lang_ids", &ids.languages.iter().map(|(_, id)| *id).collect::<Vec<_>>()));
        g.push(Getter::ints("get_lang_codes", &ids.languages.iter().map(|(code, _)| pack_code(code)).collect::<Vec<_>>()));
    }
    if !ids.suppress_tokens.is_empty() {
        g.push(Getter::ints("get_suppress_tokens", &ids.suppress_tokens));
    }
    if !ids.begin_suppress_tokens.is_empty() {
        g.push(Getter::ints("get_begin_suppress_tokens", &ids.begin_suppress_tokens));
    }
    g
}
