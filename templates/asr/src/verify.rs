//! `--verify-input FILE`: the protocol shared by runners and `rbuild verify` (as the image
//! classifier speaks it). The file is a safetensors file whose `input.0` is the f32 PCM at the
//! program's sample rate; each output is printed as
//! `RBUILD_OUTPUT index=<i> dtype=<name> shape=<d0,d1,…> hex=<little-endian bytes>` and one
//! `RBUILD_STATS key=value …` line follows.

use rbuild_runner_support::tensors;
use rbuild_runtime::ScalarType;

use crate::decode::{self, DecodeOptions, Rng, Task};
use crate::program::WhisperProgram;
use crate::transcribe::WindowModel;

/// One output of the verify run.
pub struct VerifyOutput {
    pub index: usize,
    /// The protocol's name: "float32" or "int64".
    pub dtype: &'static str,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

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

/// `input.0` as f32 samples (any shape; its elements in order).
pub fn read_pcm(bytes: &[u8]) -> Result<Vec<f32>, String> {
    let all = tensors::parse(bytes)?;
    let pcm = all.get("input.0").ok_or("no tensor named input.0")?;
    if pcm.dtype != ScalarType::Float {
        return Err(format!("input.0 is {}; the audio must be float32 PCM", pcm.dtype));
    }
    if pcm.data.is_empty() {
        return Err("input.0 holds no samples".into());
    }
    Ok(pcm.data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}
