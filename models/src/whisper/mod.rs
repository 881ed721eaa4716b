//! Whisper (HF `WhisperForConditionalGeneration`) from a checkpoint folder: every released
//! size, 80 or 128 mel bins, any `max_source_positions`, special ids from the checkpoint.
//!
//! - [`config`]: `config.json` + `generation_config.json` → [`WhisperConfig`];
//! - [`features`]: the log-mel front end's constants (Hann window, Slaney mel filters);
//! - [`graph`]: the methods (`preprocessor`, `encoder`, `text_decoder`) on the builder;
//! - [`family`]: the [`crate::family::Family`] entry: program layout, getters, the demo.

pub mod config;
pub mod demo_audio;
pub mod family;
pub mod features;
pub mod graph;

pub use config::{EncoderDims, SpecialIds, WhisperConfig};
