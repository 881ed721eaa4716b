//! What rbuild's hosted runner templates (`templates/image_classifier`, `llm`, `asr`,
//! `tensor_io`, `voxtral`) share, so each template holds only what is particular to its models.
//!
//! Templates depend on this crate by path (`../support`); rbuild's selective build makes that
//! path absolute in the runner crate it generates, so the crate travels with every template
//! build, cross builds included. A template's `build.rs` calls [`build::embed_program`] (this
//! crate without default features: no runtime in the build script).

pub mod build;

#[cfg(feature = "audio")]
pub mod audio;

#[cfg(feature = "runner")]
pub mod all_kernels;
#[cfg(feature = "runner")]
pub mod binding;
#[cfg(feature = "runner")]
pub mod cli;
#[cfg(feature = "runner")]
pub mod fs;
#[cfg(feature = "runner")]
pub mod getters;
#[cfg(feature = "runner")]
pub mod gpu;
#[cfg(feature = "runner")]
pub mod program;
#[cfg(feature = "runner")]
pub mod protocol;
#[cfg(feature = "runner")]
pub mod stats;
#[cfg(feature = "runner")]
pub mod tensors;

#[cfg(feature = "text")]
pub mod text;

#[cfg(feature = "runner")]
pub use cli::{in_file, Failure, Outcome};
