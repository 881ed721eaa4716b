//! rbuild's recipe and toolchain loader: KDL files in, typed values out, and for anything
//! wrong a single miette report naming every problem with its file, span, label and help.
//!
//! - [`Recipe::load`] reads `recipes/<name>.kdl` against a [`Catalog`] of known names;
//!   [`Recipe::apply_overrides`] applies command-line `key=value` words.
//! - [`load_platforms`] reads every `toolchains/<platform>.kdl`; [`Platform::check`] probes the
//!   tools a platform needs ([`Probes`] remembers version probes between runs) and
//!   [`Platform::install`] installs the missing ones.
//! - [`render`] turns a report into stable plain text (tests snapshot it).
//!
//! The file formats, from the crate's README:
//!
#![doc = include_str!("../README.md")]

mod accuracy;
pub mod board;
mod choice;
mod decode;
mod diag;
mod llm;
mod overrides;
mod paths;
mod probe;
mod probe_cache;
mod recipe;
mod rejection;
mod size_request;
pub mod suggest;
mod toolchain;
mod weights;

pub use accuracy::{AccuracyMetric, AccuracyReference, AccuracySpec, MIN_CTX};
pub use board::{Board, FirmwareLayout, Npu, Region, RegionKind};
pub use choice::Choice;
pub use diag::{render, LoadError, Problem, Source};
pub use overrides::OVERRIDE_KEYS;
pub use probe::{InstallError, ToolStatus};
pub use probe_cache::{Captured, Probes};
pub use llm::{EmbeddingQuantize, LlmSpec};
pub use recipe::{
    recipe_names, Accelerator, Backend, BackendSpec, Catalog, GpuApi, GpuOptions, DimMax, Dtype, Fallback, NpuOptions, ModelSpec, Pt2Spec, Quantize, Recipe, RunnerSpec,
    VerifyInput, VerifySpec, WeightsSource, PackageFile, PYPI, GENERIC_RUNNER, PT2_MODEL, PTE_MODEL,
};
pub use size_request::{SizeRequest, UP_TO};
pub use toolchain::{load_platform, load_platforms, InstallStep, Platform, PlatformGpu, RunSpec, Tool};
