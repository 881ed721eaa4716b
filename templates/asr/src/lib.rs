//! rbuild's speech-recognition runner for Whisper programs: WAV → 16 kHz mono samples →
//! the program's preprocessor (log-mel features), encoder and text decoder → openai-whisper's
//! decoding and long-form rules → text, subtitles or JSON.
//!
//! The binary (`src/main.rs`) is the command line; this library holds the parts tests check.

pub mod decode;
pub mod kernels;
pub mod output;
pub mod program;
pub mod tokenizer;
pub mod transcribe;
pub mod verify;
pub mod stats;

/// WAV reading and resampling: `rbuild_runner_support::audio` (shared with the Voxtral runner).
pub use rbuild_runner_support::audio;
