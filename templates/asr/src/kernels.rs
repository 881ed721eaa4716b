//! The runner's kernel table: every kernel rbuild has.
//!
//! All kernel selection lives in this file and nowhere else: rbuild's selective build replaces
//! it, in a generated copy of this crate, with a table of just the program's operators. Any
//! replacement must keep the interface: `registry()`, `backends()` and `OPS` (the op names it registers).

pub use rbuild_runner_support::all_kernels::{backends, registry, OPS};
