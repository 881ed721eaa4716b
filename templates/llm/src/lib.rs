//! rbuild's LLM runner: tokenize a prompt (Hugging Face `tokenizer.json` or tiktoken), run an
//! ExecuTorch-compatible LLM program (KV cache inside the program, metadata from its getter
//! methods), sample and stream the generated text.
//!
//! The binary (`src/main.rs`) is the command line; this library holds the parts tests check.
//! Tokenizers, streamed output, sampling and the generation loop are `rbuild_runner_support::text`'s.

pub mod chat;
pub mod kernels;
pub mod program;

pub use rbuild_runner_support::text::generate;
