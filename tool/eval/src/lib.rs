//! Task metrics of built programs on held-out data, computed on the host with rbuild's kernels,
//! for `rbuild eval` and the recipes' accuracy gates (`verify { accuracy { … } }`):
//!
//! - [`lm::perplexity`]: llama.cpp's `llama-perplexity` definition over a text file
//!   ([`perplexity`] holds the arithmetic);
//! - [`images::evaluate`]: top-1 / top-5 accuracy over a folder of class subfolders;
//! - [`speech::evaluate`]: word error rate over WAV files with transcripts, after Whisper's
//!   English text normalization ([`normalize`]).
//!
//! Programs run through the runner templates' libraries, exactly as the runners run them.

pub mod images;
pub mod lm;
pub mod normalize;
pub mod perplexity;
pub mod report;
pub mod speech;
pub mod topk;
pub mod wer;

pub use report::Report;
