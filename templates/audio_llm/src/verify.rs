//! `--verify-input FILE` (the protocol `rbuild verify` reads, as the Whisper runner speaks it):
//! `input.0` of the safetensors file is f32 PCM at the program's sample rate. Printed outputs:
//! 0 the log-mel chunks, 1 the audio embeddings, 2 up to 8 greedy tokens after the prompt
//! `<s>` + the audio tokens (ids only, so no tokenizer is needed and the prompt does not depend
//! on one).

use rbuild_runner_support::text::generate::{self, GenConfig, Model};
use rbuild_runner_support::text::sampling::Sampler;

use crate::program::VoxtralProgram;

pub use rbuild_runner_support::protocol::VerifyOutput;

/// Greedy tokens the verify run decodes.
pub const VERIFY_TOKENS: usize = 8;

/// The verify run, shared by the runner and `rbuild verify`'s host reference.
pub fn outputs(model: &mut VoxtralProgram<'_>, pcm: &[f32]) -> Result<Vec<VerifyOutput>, String> {
    let (shape, features) = model.features(pcm)?;
    let audio = model.encode_audio(&shape, &features)?;
    let n_audio = shape[0] * model.audio.tokens_per_chunk;
    let mut prompt: Vec<u32> = model.text.bos_id.into_iter().collect();
    prompt.extend(std::iter::repeat_n(model.audio.audio_token_id, n_audio));
    let cfg = GenConfig {
        max_new_tokens: VERIFY_TOKENS,
        max_context: model.max_context()?,
        eos_ids: model.text.eos_ids.clone(),
        ignore_eos: false,
    };
    let hidden = model.audio.hidden_size;
    let mut decoder = model.decoder(&audio);
    let gen = generate::generate(&mut decoder as &mut dyn Model, &prompt, &mut Sampler::new(0.0, 1.0, 0), &cfg, &mut |_| Ok(()))?;
    let f32_bytes = |x: &[f32]| x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    Ok(vec![
        VerifyOutput { index: 0, dtype: "float32", shape, bytes: f32_bytes(&features) },
        VerifyOutput { index: 1, dtype: "float32", shape: vec![n_audio, hidden], bytes: f32_bytes(&audio) },
        VerifyOutput {
            index: 2,
            dtype: "int64",
            shape: vec![gen.generated.len()],
            bytes: gen.generated.iter().flat_map(|&t| i64::from(t).to_le_bytes()).collect(),
        },
    ])
}
