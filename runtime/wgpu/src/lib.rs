//! wgpu/WGSL runtime of rbuild's GPU delegate (`RbuildGpuBackend`, payload format in
//! `runtime/src/backends/gpu/PAYLOAD.md`): [`GpuDevice`] picks an adapter (Vulkan, Metal,
//! DX12), [`GpuProgram`] executes a payload with WGSL compute kernels, and
//! [`WgpuGpuBackend`] exposes it as a runtime [`rbuild_runtime::backend::Backend`]. Tested
//! against the CPU reference interpreter `rbuild_kernels::gpu_reference` (its twin).

extern crate alloc; // the runtime's `kerr!` expands to `alloc::format!`

mod backend;
mod device;
mod program;
mod shaders;

pub use backend::{WgpuGpuBackend, WgpuGpuHandle};
pub use device::{list_adapters, AdapterSummary, DeviceChoice, GpuDevice};
pub use program::GpuProgram;
pub use rbuild_gpu_schedule::DispatchTime;
pub use rbuild_kernels::gpu_reference::{HostData, HostTensor};

/// File names of the embedded WGSL kernels (`shaders/`), for diagnostics.
pub fn shader_files() -> Vec<&'static str> {
    shaders::SHADERS.iter().map(|s| s.1).collect()
}

/// The WGSL file implementing a schedule kernel.
pub fn kernel_file(k: rbuild_gpu_schedule::Kernel) -> &'static str {
    shaders::file_of(k)
}

/// Every embedded kernel as compiled: `(file name, the shared files before it under `shaders/`,
/// prelude first, e.g. `["common/prelude.wgsl"]`, the exact source handed to wgpu)`. The source
/// is those files then the kernel file, each followed by a newline except the last.
pub fn shader_sources() -> Vec<(&'static str, Vec<String>, &'static str)> {
    shaders::SHADERS
        .iter()
        .map(|&(_, file, extras, source)| {
            let mut shared = vec![shaders::PRELUDE.to_string()];
            shared.extend(extras.iter().map(|e| format!("common/{e}")));
            (file, shared, source)
        })
        .collect()
}
