//! Conformance tests every GPU runtime of the `RbuildGpuBackend` delegate passes: each kernel
//! against the CPU reference twin over a grid of shapes and dtypes, a transformer block over
//! several calls with persistent state, `if_zero` gating. A runtime's test crate defines
//! `mod dut` (the device under test: `Device`, `Program`, `open`, `program`, `backend`,
//! `kernel_file`, `NAME`) and includes this folder with `#[path]`; without a device every test
//! prints a notice and passes.

pub mod common;
mod block;
mod control;
mod kernels;
