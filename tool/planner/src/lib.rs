//! The planner: a build is a DAG of steps whose outputs are keyed by a hash of their inputs.
//!
//! - [`hash`]: content fingerprints (with a memo so unchanged big files are not re-read).
//! - [`cache`]: one record per step — its key and its outputs' fingerprints — written only
//!   after the outputs are in place, so an interrupted build never leaves a record that lies.
//! - [`dag`]: steps, their dependencies, dry-run planning and execution with a summary.

pub mod cache;
pub mod dag;
pub mod hash;

pub use dag::{Dag, StepCtx, StepOutcome, StepSpec, Summary};
pub use hash::{FileHashes, KeyHasher};
