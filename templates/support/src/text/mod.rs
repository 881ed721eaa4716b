//! Text-side code that text-generating runners share: tokenizers told apart by content
//! ([`tokenizer::load`]), streamed UTF-8 output, next-token sampling and the generation loop.

pub mod base64;
pub mod bpe;
#[cfg(feature = "runner")]
pub mod generate;
#[cfg(feature = "runner")]
pub mod metadata;
pub mod hf;
pub mod printable;
pub mod sampling;
pub mod stream;
pub mod tekken;
pub mod tiktoken;
pub mod tokenizer;

pub use tokenizer::{load, Tokenizer, TokenizerError};
