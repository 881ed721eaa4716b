//! The XNNPACK delegate's compiler (`backend "xnnpack"`): which ops of a float CNN method
//! XNNPACK takes ([`partition`]), each run lowered to an `XnnpackBackend` payload in
//! ExecuTorch's format ([`lower`]), and the rewrite that calls the payloads as delegates with
//! their weights in the program's named data ([`delegate_method`]). The payloads run on
//! rbuild's NHWC kernels (`rbuild-kernels`' `xnnpack` module) and in ExecuTorch's XNNPACK
//! backend alike.
//!
//! It runs on the functional graph (after batch-norm folding, constant folding and dead-code
//! removal, before the out-variant conversion), like the GPU and Ethos-U partitioners.

pub mod lower;
pub mod partition;

use rbuild_export::delegation::{rewrite, LoweredPartition};
use rbuild_export::graph::Graph;
use rbuild_runtime::backends::xnnpack::XNNPACK_BACKEND_ID;

pub use rbuild_export::delegation::MethodReport;
pub use partition::{OpPlacement, Partitioning, Placement};

/// Delegation settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XnnpackOptions {
    /// How linear layers (`linear`, `addmm`, `mm` with constant weights) are lowered.
    pub linear: LinearMode,
}

/// Linear layers in float32, or dynamically quantized as ExecuTorch's
/// `XnnpackDynamicallyQuantizedPartitioner` writes them: `Convert` (f32 → qdint8, per-token
/// parameters computed at run time) then `FullyConnected` with int8 or int4 weights and f32
/// output. Weights are quantized symmetrically here (convolutions stay float32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinearMode {
    #[default]
    Fp32,
    /// "8da8w": int8 weights, one scale per output channel (qcint8).
    DynamicInt8,
    /// "8da4w": int4 weights, one scale per output channel (`group` 0, qcint4) or per block
    /// of `group` input channels (qbint4, bf16 scales).
    DynamicInt4 { group: usize },
}

/// Partitions `g` (the functional graph of `method`), lowers every run to a payload and
/// replaces it with a delegate call; the constants the payloads name are added to
/// `g.named_data`. Returns the placement report; the caller applies its fallback policy.
pub fn delegate_method(method: &str, g: &mut Graph, options: &XnnpackOptions) -> Result<MethodReport, String> {
    let parts = partition::partition(g);
    let mut payloads = Vec::new();
    for (k, p) in parts.partitions.iter().enumerate() {
        payloads.push(lower::lower(g, p, options).map_err(|e| format!("{method}: XNNPACK delegate {k}: {e}"))?);
    }
    let payload_bytes = payloads.iter().map(|l| l.bytes.len()).collect();
    let payloads = payloads.into_iter().map(|l| LoweredPartition { bytes: l.bytes, inputs: l.inputs, outputs: l.outputs, named_data: l.named_data }).collect();
    rewrite(g, XNNPACK_BACKEND_ID, &parts, payloads);
    rbuild_export::passes::dce::eliminate_dead_code(g);
    Ok(MethodReport { method: method.to_string(), target: "XNNPACK", partitioning: parts, payload_bytes })
}
