//! The shared GPU-runtime conformance tests (kernels, transformer block, `if_zero`) on wgpu.

mod dut;
#[path = "../../gpu-schedule/conformance/mod.rs"]
mod conformance;
