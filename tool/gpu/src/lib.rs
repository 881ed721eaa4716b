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

use rbuild_export::graph::{Arg, Delegate, Graph, Node, DELEGATE_CALL};
use rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID;

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

/// What delegation did to one method: the placement report's rows and the payload sizes.
#[derive(Clone, Debug)]
pub struct MethodReport {
    pub method: String,
    pub partitioning: Partitioning,
    pub payload_bytes: Vec<usize>,
}

impl MethodReport {
    pub fn gpu_ops(&self) -> usize {
        self.partitioning.ops.iter().filter(|o| matches!(o.placement, Placement::Gpu(_))).count()
    }

    /// Model ops left on the CPU, with their reasons (not the scalar bookkeeping).
    pub fn cpu_ops(&self) -> Vec<&OpPlacement> {
        self.partitioning.ops.iter().filter(|o| matches!(o.placement, Placement::Cpu(_))).collect()
    }

    /// One line per method plus one per CPU op: what every build prints.
    pub fn summary(&self) -> String {
        let cpu = self.cpu_ops();
        let mut s = format!(
            "{}: {} op(s) on the GPU in {} subgraph(s), {} on the CPU",
            self.method,
            self.gpu_ops(),
            self.partitioning.partitions.len(),
            cpu.len()
        );
        for o in cpu {
            if let Placement::Cpu(reason) = &o.placement {
                s += &format!("\n  cpu: {} `{}`: {reason}", o.op, o.name);
            }
        }
        s
    }
}

/// Partitions `g` (the functional graph of `method`), lowers every GPU subgraph to a payload
/// and replaces it with a delegate call. The weights the payloads name are added to
/// `g.named_data`. Returns the placement report; the caller applies its fallback policy.
pub fn delegate_method(method: &str, g: &mut Graph, options: &GpuOptions) -> Result<MethodReport, String> {
    let parts = partition::partition(g);
    let mut payloads = Vec::new();
    for (k, p) in parts.partitions.iter().enumerate() {
        let lowered = lower::lower(g, p, options).map_err(|e| format!("{method}: GPU subgraph {k}: {e}"))?;
        payloads.push(lowered);
    }
    let payload_bytes = payloads.iter().map(|l| l.bytes.len()).collect();
    rewrite(g, &parts, payloads);
    rbuild_export::passes::dce::eliminate_dead_code(g);
    Ok(MethodReport { method: method.to_string(), partitioning: parts, payload_bytes })
}

/// Replaces each partition's nodes with one delegate call at its last node's place.
fn rewrite(g: &mut Graph, parts: &Partitioning, payloads: Vec<lower::Lowered>) {
    let mut owner = vec![None; g.nodes.len()];
    for (k, p) in parts.partitions.iter().enumerate() {
        for &n in &p.nodes {
            owner[n] = Some(k);
        }
    }
    let first = g.delegates.len();
    let mut calls: Vec<Option<Node>> = Vec::new();
    for (k, l) in payloads.into_iter().enumerate() {
        g.delegates.push(Delegate { id: RBUILD_GPU_BACKEND_ID.to_string(), processed: l.bytes, compile_specs: vec![] });
        for (key, data) in l.named_data {
            g.add_named_data(key, data);
        }
        let mut args = vec![Arg::Int((first + k) as i64)];
        args.extend(l.inputs.iter().map(|&v| Arg::Tensor(v)));
        calls.push(Some(Node { op: DELEGATE_CALL.into(), args, outputs: l.outputs }));
    }
    let old = std::mem::take(&mut g.nodes);
    for (i, n) in old.into_iter().enumerate() {
        match owner[i] {
            None => g.nodes.push(n),
            Some(k) if parts.partitions[k].nodes.last() == Some(&i) => {
                if let Some(call) = calls[k].take() {
                    g.nodes.push(call);
                }
            }
            Some(_) => {}
        }
    }
}
