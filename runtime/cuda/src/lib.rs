//! CUDA runtime of rbuild's GPU delegate (`RbuildGpuBackend`, payload format in
//! `runtime/src/backends/gpu/PAYLOAD.md`). The schedule (shape checks, kernel launches and
//! their parameter words) is `rbuild-gpu-schedule`, shared with the wgpu runtime; this crate
//! holds the same kernels in CUDA C (`kernels/`), compiled at init with NVRTC for the device's
//! compute capability and cached on disk, and runs them through the CUDA driver.
//!
//! Nothing links against CUDA: the driver (`libcuda`) and NVRTC are opened at run time, after a
//! probe that turns their absence into an error message ([`probe_driver`]), so a runner built
//! with this crate starts on any machine.

mod backend;
mod compile;
mod kernels;
mod libs;
mod program;

pub use backend::{CudaGpuBackend, CudaGpuHandle};
pub use compile::{compile_kernel, ptx_cache_dir, CompiledKernel};
pub use kernels::{kernel_sources, KernelSource};
pub use libs::{load_nvrtc, probe_driver, DriverInfo};
pub use program::{CudaDevice, CudaProgram};
pub use rbuild_kernels::gpu_reference::{HostData, HostTensor};

/// The compute capabilities the kernels are checked for in CI (Ampere, Hopper); at run time
/// they are compiled for whatever device is present.
pub const CHECKED_ARCHS: [&str; 2] = ["sm_80", "sm_90"];
