//! Voxtral (HF `VoxtralForConditionalGeneration`): a Whisper large-v3 encoder (`audio_tower`),
//! a projector (4 encoder frames → one audio token: Linear, GELU, Linear) and a Llama decoder
//! (`language_model`), exported as one program with ExecuTorch's multimodal method names.
//!
//! - [`config`]: `config.json` → [`VoxtralConfig`];
//! - [`graph`]: the methods on the builder, reusing the Whisper encoder and Llama decoder;
//! - [`family`]: the [`crate::family::Family`] entry, the getters and the demo.
//!
//! # Program contract (what a runner relies on)
//!
//! Methods:
//! - `audio_encoder(features f32 [n_chunks, n_mels, chunk_frames]) -> f32 [n_chunks,
//!   tokens_per_chunk, hidden]`: n_chunks dynamic in `[1, get_max_chunks]`; each 30 s chunk is
//!   encoded on its own. Row-major, the output is the `[n_chunks · tokens_per_chunk, hidden]`
//!   audio embeddings in order (one chunk gives `[1, 375, hidden]`, what `text_decoder` takes).
//! - `token_embedding(tokens i64 [1, S]) -> f32 [1, S, hidden]`, S in `[1, get_max_seq_len]`.
//! - `text_decoder(embeddings f32 [1, S, hidden], input_pos i64 [1]) -> logits f32 [1, vocab]`
//!   (last position; `[1, S, vocab]` when `get_full_logits`), KV cache as mutable state: feed
//!   the prompt's embeddings (text embeddings with the `[AUDIO]` positions replaced by the
//!   audio embeddings, in order) at input_pos 0, then one token's embedding per call.
//! - `preprocessor(waveform f32 [N]) -> f32 [n_chunks, n_mels, chunk_frames]`, N in `[201,
//!   get_max_audio_samples]`:
//!   16 kHz mono in [-1, 1]; HF's log-mel over the audio zero-padded to a multiple of 30 s,
//!   normalized over the whole padded signal, cut into `n_chunks = ceil(N / (chunk_frames ·
//!   hop))` chunks.
//!
//! Getters: llama's (`get_max_seq_len`, `get_max_context_len`, `get_vocab_size`,
//! `get_n_layers`, `get_bos_id`, `get_eos_ids`, `use_kv_cache`, `use_sdpa_with_kv_cache`,
//! `enable_dynamic_shape`, `get_full_logits`) and `get_audio_token_id`,
//! `get_tokens_per_chunk` (audio tokens per chunk), `get_chunk_frames` (mel frames per chunk),
//! `get_max_chunks`, `get_max_audio_samples`, `get_n_mels`, `get_sample_rate`, `get_hop_length`, `get_n_fft`,
//! `get_hidden_size`.

pub mod config;
pub mod demo_tokenizer;
pub mod family;
pub mod graph;

pub use config::VoxtralConfig;
