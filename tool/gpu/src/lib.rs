//! The GPU delegate's compiler (`backend "gpu"`): which ops of a float method the GPU takes
//! ([`partition`]), each GPU subgraph lowered to an `RbuildGpuBackend` payload ([`lower`]), and
//! the rewrite that calls the payloads as delegates with their weights in the program's
//! named data ([`delegate_method`]). One payload runs unchanged on every rbuild GPU runtime
//! (wgpu: Metal/Vulkan/DX12; the CPU reference), so nothing here depends on the GPU API.
//!
//! It runs on the functional graph (after constant folding and dead-code removal, before the
//! out-variant conversion), like the Ethos-U partitioner.

pub mod lower;
pub mod partition;

use rbuild_export::delegation::{rewrite, LoweredPartition};
use rbuild_export::graph::Graph;
use rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID;

pub use rbuild_export::delegation::MethodReport;
pub use partition::{OpPlacement, Partitioning, Placement};

/// How weights are stored in the payload's named data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightDtype {
    F32,
    /// Float matrices (linear, conv, embedding and position tables) as IEEE half; vectors
    /// (biases, norm weights) stay f32. Compute stays f32.
    F16,
    /// The same matrices as bfloat16 (float32's range, 8-bit mantissa), the usual dtype of
    /// checkpoints and of NVIDIA's tensor cores.
    BF16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuOptions {
    pub weights: WeightDtype,
}

/// Partitions `g` (the functional graph of `method`), lowers every GPU subgraph to a payload
/// and replaces it with a delegate call. The weights the payloads name are added to
/// `g.named_data`. Returns the placement report; the caller applies its fallback policy.
pub fn delegate_method(method: &str, g: &mut Graph, options: &GpuOptions) -> Result<MethodReport, String> {
    let parts = partition::partition(g);
    let mut payloads = Vec::new();
    for (k, p) in parts.partitions.iter().enumerate() {
        let lowered = lower::lower(g, p, options).map_err(|e| format!("{method}: GPU subgraph {k}: {e}"))?;
        payloads.push(LoweredPartition { bytes: lowered.bytes, inputs: lowered.inputs, outputs: lowered.outputs, named_data: lowered.named_data });
    }
    let payload_bytes = payloads.iter().map(|l| l.bytes.len()).collect();
    rewrite(g, RBUILD_GPU_BACKEND_ID, &parts, payloads);
    rbuild_export::passes::dce::eliminate_dead_code(g);
    Ok(MethodReport { method: method.to_string(), target: "the GPU", partitioning: parts, payload_bytes })
}
