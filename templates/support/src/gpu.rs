//! The backends a runner registers for programs with GPU delegates (`RbuildGpuBackend`), from
//! its `--device` flag:
//!
//! - `auto` (default): the GPU through wgpu when the runner was built with it and an adapter
//!   exists, else the payload's CPU reference runtime, with a notice;
//! - `gpu`: the GPU, or an error naming what was tried;
//! - `cpu`: the CPU reference runtime (the twin the GPU kernels are tested against);
//! - any other word: the adapter whose name contains it (case-insensitive).
//!
//! A program without delegates never calls the backend, so registering it costs nothing.

use rbuild_kernels::gpu_reference::ReferenceGpuBackend;
use rbuild_runtime::backend::BackendRegistry;

/// What `--device` chose, for the runner's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub registry_note: Option<String>,
    /// e.g. `llvmpipe (Vulkan)` or `cpu (reference)`.
    pub name: String,
}

/// A registry holding the GPU delegate's runtime chosen by `device`.
pub fn backends(device: &str) -> Result<(BackendRegistry, Device), String> {
    let mut registry = BackendRegistry::new();
    let cpu = |note: Option<String>| Device { registry_note: note, name: "cpu (reference)".into() };
    let device = device.trim();
    if device.eq_ignore_ascii_case("cpu") {
        registry.register(Box::new(ReferenceGpuBackend));
        return Ok((registry, cpu(None)));
    }
    match wgpu_backend(device) {
        Ok((backend, name)) => {
            registry.register(backend);
            Ok((registry, Device { registry_note: None, name }))
        }
        Err(why) if device.eq_ignore_ascii_case("auto") => {
            registry.register(Box::new(ReferenceGpuBackend));
            Ok((registry, cpu(Some(format!("notice: {why}; GPU delegates run on the CPU reference runtime")))))
        }
        Err(why) => Err(format!("--device {device}: {why}")),
    }
}

/// [`backends`] for `program`: `--device auto`'s fallback notice goes to stderr only when the
/// program holds a GPU delegate, the only case in which the choice matters.
pub fn backends_for(device: &str, program: &rbuild_runtime::Program<'_>) -> Result<(BackendRegistry, Device), String> {
    let (registry, chosen) = backends(device)?;
    if let Some(note) = chosen.registry_note.as_ref().filter(|_| uses_gpu_delegate(program)) {
        eprintln!("{note}");
    }
    Ok((registry, chosen))
}

#[cfg(feature = "gpu")]
fn wgpu_backend(device: &str) -> Result<(Box<dyn rbuild_runtime::backend::Backend>, String), String> {
    use rbuild_gpu_wgpu::{DeviceChoice, GpuDevice, WgpuGpuBackend};
    let choice = DeviceChoice::parse(&device.to_ascii_lowercase()).unwrap_or(DeviceChoice::Auto);
    let choice = match choice {
        // Adapter names keep the user's spelling (matching is case-insensitive anyway).
        DeviceChoice::Named(_) => DeviceChoice::Named(device.to_string()),
        c => c,
    };
    let gpu = GpuDevice::new(&choice)?;
    let name = gpu.adapter().to_string();
    Ok((Box::new(WgpuGpuBackend::new(gpu)), name))
}

#[cfg(not(feature = "gpu"))]
fn wgpu_backend(_device: &str) -> Result<(Box<dyn rbuild_runtime::backend::Backend>, String), String> {
    Err("this runner was built without the GPU runtime (a `backend \"gpu\"` recipe builds it in)".into())
}

/// Whether any method of `program` holds a GPU delegate (only then is `--device auto`'s
/// fallback notice worth printing).
pub fn uses_gpu_delegate(program: &rbuild_runtime::Program<'_>) -> bool {
    program
        .plans()
        .iter()
        .flat_map(|p| p.delegates.as_deref().unwrap_or(&[]))
        .any(|d| d.id == Some(rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID))
}
