//! Voxtral's methods on the graph builder, with HF `VoxtralForConditionalGeneration`'s
//! parameter names. The audio tower is Whisper's encoder ([`encoder_stack`] under
//! `audio_tower`), the language model Llama's KV-cache decoder ([`decoder_stack`] under
//! `language_model.`): the same builders, not copies.

use rbuild_export::error::Result;
use rbuild_export::graph::Arg;
use rbuild_export::{Dim, Graph, GraphBuilder, TensorMeta, ValueId};
use rbuild_runtime::ScalarType;

use super::config::VoxtralConfig;
use crate::llama::kv_cache::{decoder_context, decoder_stack, embedding_table};
use crate::llama::{proj, KvExport};
use crate::params::Params;
use crate::whisper::features::{HOP_LENGTH, N_FFT, SAMPLE_RATE};
use crate::whisper::graph::{encoder_stack, front_end_constants, gelu, Ops};

/// Module names in the checkpoint.
const AUDIO_TOWER: &str = "audio_tower";
const PROJECTOR: &str = "multi_modal_projector";
const LANGUAGE_MODEL: &str = "language_model.";

/// Audio samples the log-mel is computed over at once: HF pads to a multiple of 30 s.
pub const PAD_TO_SAMPLES: usize = 30 * SAMPLE_RATE;

/// `features f32 [n_chunks, n_mels, chunk_frames]`, n_chunks in `[1, max_chunks]`.
fn features_input(b: &mut GraphBuilder, c: &VoxtralConfig, max_chunks: usize) -> ValueId {
    let n = b.sym("n_chunks", 1, max_chunks);
    b.input("features", TensorMeta::new(ScalarType::Float, vec![n, Dim::Fixed(c.audio.num_mel_bins), Dim::Fixed(c.chunk_frames())]))
}

/// `audio_encoder(features [n_chunks, n_mels, chunk_frames]) -> [n_chunks, tokens_per_chunk,
/// hidden]`: each chunk through the encoder on its own, then the projector.
pub fn audio_encoder(c: &VoxtralConfig, p: &mut Params, max_chunks: usize) -> Result<Graph> {
    let mut b = GraphBuilder::new();
    let x = features_input(&mut b, c, max_chunks);
    let states = encoder_stack(&mut b, p, &c.audio, AUDIO_TOWER, x, Ops::Fused)?;
    let y = project(&mut b, p, c, states)?;
    b.output(y);
    Ok(b.finish())
}

/// The audio tower alone (`[n_chunks, max_source_positions, d_audio]`): not a method of the
/// program; tests compare it with HF's encoder states.
pub fn audio_encoder_states(c: &VoxtralConfig, p: &mut Params, max_chunks: usize) -> Result<Graph> {
    let mut b = GraphBuilder::new();
    let x = features_input(&mut b, c, max_chunks);
    let states = encoder_stack(&mut b, p, &c.audio, AUDIO_TOWER, x, Ops::Fused)?;
    b.output(states);
    Ok(b.finish())
}

/// HF's `reshape(-1, intermediate_size)` of the encoder states (consecutive frames of a chunk
/// concatenated), then Linear → GELU → Linear, no biases.
fn project(b: &mut GraphBuilder, p: &mut Params, c: &VoxtralConfig, states: ValueId) -> Result<ValueId> {
    let n = b.meta(states).shape[0];
    let hidden = c.text.hidden_size;
    let x = b.view_dims(states, &[n, Dim::Fixed(c.tokens_per_chunk()), Dim::Fixed(c.projector_input)])?;
    let x = proj(b, p, x, &format!("{PROJECTOR}.linear_1"), c.projector_input, hidden, false)?;
    let x = gelu(b, x)?;
    proj(b, p, x, &format!("{PROJECTOR}.linear_2"), hidden, hidden, false)
}

/// `token_embedding(tokens i64 [1, S]) -> f32 [1, S, hidden]`, S in `[1, max_seq_len]`.
pub fn token_embedding(c: &VoxtralConfig, p: &mut Params, max_seq_len: usize) -> Result<Graph> {
    let mut b = GraphBuilder::new();
    let s = b.sym("seq_len", 1, max_seq_len);
    let tokens = b.input("tokens", TensorMeta::new(ScalarType::Long, vec![Dim::Fixed(1), s]));
    let outer = p.set_prefix(LANGUAGE_MODEL);
    let table = embedding_table(&mut b, p, &c.text);
    p.set_prefix(&outer);
    let x = b.embedding(table?, tokens)?;
    b.output(x);
    Ok(b.finish())
}

/// `text_decoder(embeddings f32 [1, S, hidden], input_pos i64 [1]) -> logits`: the Llama
/// KV-cache decoder on embeddings (audio and text alike).
pub fn text_decoder(c: &VoxtralConfig, p: &mut Params, o: &KvExport) -> Result<Graph> {
    let mut b = GraphBuilder::new();
    let s = b.sym("seq_len", 1, o.max_seq_len);
    let x = b.input("embeddings", TensorMeta::new(ScalarType::Float, vec![Dim::Fixed(1), s, Dim::Fixed(c.text.hidden_size)]));
    let input_pos = b.input("input_pos", TensorMeta::fixed(ScalarType::Long, &[1]));
    let ctx = decoder_context(&mut b, &c.text, o, x, input_pos)?;
    let outer = p.set_prefix(LANGUAGE_MODEL);
    let logits = decoder_stack(&mut b, p, &c.text, o, &ctx, x, None);
    p.set_prefix(&outer);
    b.output(logits?);
    Ok(b.finish())
}

/// `preprocessor(waveform f32 [N]) -> f32 [n_chunks, n_mels, chunk_frames]`: Whisper's log-mel
/// (`rbuild::log_mel_chunks`) over the audio padded to a multiple of 30 s, as HF's feature
/// extractor computes it, cut into the chunks `audio_encoder` takes. N is at most
/// `max_chunks` chunks of audio.
pub fn preprocessor(c: &VoxtralConfig, max_chunks: usize) -> Result<Graph> {
    let mut b = GraphBuilder::new();
    let chunk_frames = c.chunk_frames();
    let max_samples = max_chunks * chunk_frames * HOP_LENGTH;
    // Reflect padding by n_fft/2 needs more samples than that.
    let n = b.sym("samples", N_FFT / 2 + 1, max_samples);
    let pcm = b.input("waveform", TensorMeta::new(ScalarType::Float, vec![n]));
    let (window, filters) = front_end_constants(&mut b, c.audio.num_mel_bins)?;
    let mel = b.call1(
        "rbuild::log_mel_chunks",
        vec![
            Arg::Tensor(pcm),
            Arg::Tensor(window),
            Arg::Tensor(filters),
            Arg::Int(HOP_LENGTH as i64),
            Arg::Int(PAD_TO_SAMPLES as i64),
            Arg::Int(chunk_frames as i64),
        ],
    )?;
    // The chunk count follows the sample count: its own symbol.
    let chunks = b.sym("n_chunks", 1, max_chunks);
    b.graph.values[mel].meta = TensorMeta::new(ScalarType::Float, vec![chunks, Dim::Fixed(c.audio.num_mel_bins), Dim::Fixed(chunk_frames)]);
    b.output(mel);
    Ok(b.finish())
}
