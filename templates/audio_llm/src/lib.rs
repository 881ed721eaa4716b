//! rbuild's audio-LLM runner for Voxtral-style programs: WAV → 16 kHz mono samples → the
//! program's `preprocessor` (log-mel chunks) → `audio_encoder` (audio embeddings) → a prompt
//! whose `[AUDIO]` placeholders take those embeddings in order → `token_embedding` +
//! `text_decoder` with the KV cache → sampled, streamed text.
//!
//! The binary (`src/main.rs`) is the command line; this library holds the parts tests and
//! `rbuild verify` use. Tokenizers, sampling, streaming and the generation loop are
//! `rbuild_runner_support::text`'s; WAV reading is `rbuild_runner_support::audio`'s.

pub mod kernels;
pub mod program;
pub mod prompt;
pub mod verify;
