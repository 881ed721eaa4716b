//! rbuild's generic runner: any method of any program, inputs from a safetensors file
//! (`input.0`, `input.1`, …) or made up in the method's shapes, outputs to a safetensors file
//! (`output.0`, …), a summary of each output and timing. The runner for models without a
//! dedicated one, with `rbuild run`'s file contract.
//!
//! The binary (`src/main.rs`) is the command line; this library holds the parts tests check.

pub mod kernels;
pub mod report;
pub mod synthetic;
