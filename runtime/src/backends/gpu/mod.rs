//! rbuild's GPU delegate (`RbuildGpuBackend`).
//!
//! This is rbuild's own delegate format, not ExecuTorch's `MetalBackend`/`CudaBackend` (those
//! carry AOTInductor shared objects that need PyTorch to produce). One payload, described in
//! `PAYLOAD.md` next to this file, is meant to be executed by every GPU runtime rbuild grows
//! (a CPU reference, wgpu/WGSL, CUDA):
//!
//! - [`payload`]: the versioned binary payload — a small operator graph with tensor metadata,
//!   delegate inputs/outputs, GPU-resident state (KV caches) and constants referenced by
//!   `named_data` key — with its reader, writer and well-formedness checks.

pub mod payload;

/// The delegate id (`BackendDelegate.id`) the GPU partitioner emits and the GPU runtimes register.
pub const RBUILD_GPU_BACKEND_ID: &str = "RbuildGpuBackend";
