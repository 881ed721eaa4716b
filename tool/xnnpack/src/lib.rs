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

use rbuild_export::graph::{Arg, Delegate, Graph, Node, DELEGATE_CALL};
use rbuild_runtime::backends::xnnpack::XNNPACK_BACKEND_ID;

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

/// What delegation did to one method: the placement report's rows and the payload sizes.
#[derive(Clone, Debug)]
pub struct MethodReport {
    pub method: String,
    pub partitioning: Partitioning,
    pub payload_bytes: Vec<usize>,
}

impl MethodReport {
    pub fn delegated_ops(&self) -> usize {
        self.partitioning.ops.iter().filter(|o| matches!(o.placement, Placement::Xnnpack(_))).count()
    }

    /// Ops left on the CPU, with their reasons.
    pub fn cpu_ops(&self) -> Vec<&OpPlacement> {
        self.partitioning.ops.iter().filter(|o| matches!(o.placement, Placement::Cpu(_))).collect()
    }

    /// One line per method plus one per CPU op.
    pub fn summary(&self) -> String {
        let cpu = self.cpu_ops();
        let mut s = format!(
            "{}: {} op(s) in {} XNNPACK delegate(s), {} on the CPU",
            self.method,
            self.delegated_ops(),
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
    rewrite(g, &parts, payloads);
    rbuild_export::passes::dce::eliminate_dead_code(g);
    Ok(MethodReport { method: method.to_string(), partitioning: parts, payload_bytes })
}

/// Replaces each run's nodes with one delegate call at its last node's place.
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
        g.delegates.push(Delegate { id: XNNPACK_BACKEND_ID.to_string(), processed: l.bytes, compile_specs: vec![] });
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
