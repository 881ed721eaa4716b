//! `--verify-input FILE`: the protocol shared by runners and `rbuild verify` (as the image
//! classifier speaks it). The file is a safetensors file whose `input.0` is the f32 PCM at the
//! program's sample rate; each output is printed as
//! `RBUILD_OUTPUT index=<i> dtype=<name> shape=<d0,d1,…> hex=<little-endian bytes>` and one
//! `RBUILD_STATS key=value …` line follows.

pub use rbuild_runner_support::protocol::{read_pcm, VerifyOutput};

use crate::decode::{self, DecodeOptions, Rng, Task};
use crate::program::WhisperProgram;
use crate::transcribe::WindowModel;

/// The verify run, shared by the runner's `--verify-input` and `rbuild verify`'s host
/// reference: the whole input's features (padded as a transcription pads them), the first
/// window's features, its encoder output, and up to 8 greedy tokens from the default prompt
/// (the given language, else English, else the first; no detection, so the prompt does not
/// depend on the logits).
pub fn outputs(model: &mut WhisperProgram<'_>, pcm: &[f32], language: Option<u32>, task: Task) -> Result<Vec<VerifyOutput>, String> {
    model.compute_features(pcm)?;
    let window = model.window(0)?;
    model.set_window(0)?;
    let (hidden_shape, hidden) = model.hidden();
    let vocab = model.meta.vocab.clone();
    let language = language.or_else(|| vocab.lang_id("en")).or_else(|| vocab.lang_ids.first().copied());
    let opts = DecodeOptions { task, language, timestamps: false, temperature: 0.0, max_new_tokens: Some(8), max_initial_timestamp: None };
    let res = decode::decode_window(model, &vocab, &opts, &[], &mut Rng::new(0))?;
    let f32_bytes = |x: &[f32]| x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    let m = &model.meta;
    Ok(vec![
        VerifyOutput { index: 0, dtype: "float32", shape: vec![1, m.n_mels, m.frames_per_window], bytes: f32_bytes(&window) },
        VerifyOutput { index: 1, dtype: "float32", shape: hidden_shape, bytes: f32_bytes(&hidden) },
        VerifyOutput { index: 2, dtype: "int64", shape: vec![res.tokens.len()], bytes: res.tokens.iter().flat_map(|&t| (t as i64).to_le_bytes()).collect() },
    ])
}
