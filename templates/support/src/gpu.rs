//! The backends a runner registers for programs with GPU delegates (`RbuildGpuBackend`), from
//! its `--device` flag:
//!
//! - `auto` (default): CUDA when the runner was built with it and an NVIDIA driver and GPU are
//!   present, else the GPU through wgpu when built with it and an adapter exists, else the
//!   payload's CPU reference runtime; each fallback says why;
//! - `cuda`: the CUDA runtime, or an error naming what is missing ("no NVIDIA driver found…");
//! - `gpu`: the wgpu runtime, or an error naming what was tried;
//! - `cpu`: the CPU reference runtime (the twin the GPU kernels are tested against);
//! - any other word: the wgpu adapter whose name contains it (case-insensitive).
//!
//! The program is the same file on every device. A program without delegates never calls the
//! backend, so registering it costs nothing.

use rbuild_kernels::gpu_reference::ReferenceGpuBackend;
use rbuild_runtime::backend::{Backend, BackendRegistry};

/// What `--device` chose, for the runner's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Why `auto` fell back from a faster runtime, when it did.
    pub registry_note: Option<String>,
    /// e.g. `CUDA: NVIDIA H200 (sm_90, CUDA driver 12.8)`, `llvmpipe (Vulkan)` or `cpu (reference)`.
    pub name: String,
}

/// A registry holding the GPU delegate's runtime chosen by `device`.
pub fn backends(device: &str) -> Result<(BackendRegistry, Device), String> {
    let device = device.trim();
    let lower = device.to_ascii_lowercase();
    let (backend, chosen): (Box<dyn Backend>, Device) = match lower.as_str() {
        "cpu" => (Box::new(ReferenceGpuBackend), Device { registry_note: None, name: CPU.into() }),
        "cuda" => {
            let (b, name) = cuda_backend().map_err(|e| format!("--device cuda: {e}"))?;
            (b, Device { registry_note: None, name })
        }
        "auto" => {
            let mut why = Vec::new();
            // Only a runner built with CUDA tries it (and mentions it when it falls back).
            let cuda = if cfg!(feature = "cuda") { cuda_backend() } else { Err(String::new()) };
            match cuda {
                Ok((b, name)) => (b, Device { registry_note: None, name }),
                Err(e) => {
                    if !e.is_empty() {
                        why.push(format!("CUDA: {e}"));
                    }
                    match wgpu_backend(device) {
                        Ok((b, name)) => (b, Device { registry_note: Some(format!("notice: {}; GPU delegates run on {name}", why.join("; "))), name }),
                        Err(e) => {
                            why.push(e);
                            let note = format!("notice: {}; GPU delegates run on the CPU reference runtime", why.join("; "));
                            (Box::new(ReferenceGpuBackend), Device { registry_note: Some(note), name: CPU.into() })
                        }
                    }
                }
            }
        }
        _ => {
            let (b, name) = wgpu_backend(device).map_err(|e| format!("--device {device}: {e}"))?;
            (b, Device { registry_note: None, name })
        }
    };
    let mut registry = BackendRegistry::new();
    registry.register(backend);
    Ok((registry, chosen))
}

const CPU: &str = "cpu (reference)";

/// [`backends`] for `program`: when the program holds a GPU delegate (the only case in which
/// the choice matters) the runner says on stderr which runtime runs it, and why `auto` fell
/// back when it did.
pub fn backends_for(device: &str, program: &rbuild_runtime::Program<'_>) -> Result<(BackendRegistry, Device), String> {
    let (registry, chosen) = backends(device)?;
    if uses_gpu_delegate(program) {
        match &chosen.registry_note {
            Some(note) => eprintln!("{note}"),
            None => eprintln!("GPU delegates run on {}", chosen.name),
        }
    }
    Ok((registry, chosen))
}

#[cfg(feature = "cuda")]
fn cuda_backend() -> Result<(Box<dyn Backend>, String), String> {
    let dev = rbuild_gpu_cuda::CudaDevice::open(0)?;
    let name = format!("CUDA: {}", dev.info);
    Ok((Box::new(rbuild_gpu_cuda::CudaGpuBackend::new(dev)), name))
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend() -> Result<(Box<dyn Backend>, String), String> {
    Err("this runner was built without the CUDA runtime (a `backend \"gpu\" { api \"cuda\" }` recipe builds it in)".into())
}

#[cfg(feature = "gpu")]
fn wgpu_backend(device: &str) -> Result<(Box<dyn Backend>, String), String> {
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
fn wgpu_backend(_device: &str) -> Result<(Box<dyn Backend>, String), String> {
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
