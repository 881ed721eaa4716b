//! `XnnpackBackend`: runs ExecuTorch's XNNPACK-delegated subgraphs on rbuild's NHWC kernels.
//!
//! [`XnnpackBackend::init`] decodes the payload (`rbuild_runtime::backends::xnnpack`), resolves
//! every constant (named data by key, else the payload's constant region: [`constants`]),
//! rewrites the graph (dynamic quantization folded into its readers, Clamps fused into the
//! operator before them as XNNPACK's subgraph optimizer does: [`rewrite`], [`fusion`]), checks
//! each node's shapes and dtypes and builds its op, packing weights for the NHWC kernels
//! ([`crate::nhwc`]; `build_*` modules), and plans activation memory ([`memory`]), all driven
//! by [`compile`]. `execute` copies the call's inputs in (bound by external id), runs the steps
//! ([`exec`]) and copies the outputs out. A node kind or dtype combination it cannot run fails
//! at init naming it.
//!
//! Every node kind of ExecuTorch's schema that its runtime defines runs, with the datatypes
//! XNNPACK takes for it: fp32; fp16 and bf16 (held in f32 buffers and rounded to their format
//! after each node, as XNNPACK's x86 kernels compute them in f32); qint8 and quint8 (quint8 held
//! shifted into int8, which XNNPACK's arithmetic treats identically) with qcint8/qint8/qcint4
//! weights and int32 biases; qdint8 (dynamic quantization) feeding fully connected layers
//! (qcint8, qcint4, qbint4 weights) and convolutions (qcint8). [`SUPPORTED_NODES`] is that list as data
//! (for `rbuild ops`), checked against the compiler by `tests/xnnpack_support.rs`.

mod aligned;
mod build_conv;
mod build_elementwise;
mod build_fc;
mod build_layout;
mod compile;
mod constants;
mod exec;
mod fusion;
mod matmul;
mod memory;
pub(crate) mod ops;
mod plan;
mod rewrite;
mod support;

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;

use rbuild_runtime::backend::{Backend, BackendInitContext, CompileSpec, DelegateHandle};
use rbuild_runtime::backends::xnnpack::{parse_payload, XNNPACK_BACKEND_ID};
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};

pub use plan::Plan;
pub use support::SUPPORTED_NODES;

/// The backend to register for programs with `XnnpackBackend` delegates.
#[derive(Clone, Copy, Debug, Default)]
pub struct XnnpackBackend;

impl Backend for XnnpackBackend {
    fn id(&self) -> &str {
        XNNPACK_BACKEND_ID
    }

    fn init(&self, ctx: &BackendInitContext<'_>, processed: &[u8], _specs: &[CompileSpec<'_>]) -> Result<Box<dyn DelegateHandle>, String> {
        let payload = parse_payload(processed)?;
        let plan = compile::compile(&payload.graph, payload.constants, ctx.named_data, compile::DEFAULT_ACTIVATION_LIMIT).map_err(|e| format!("XNNPACK payload: {e}"))?;
        Ok(Box::new(XnnpackHandle { plan, workers: exec::Workers::default() }))
    }
}

struct XnnpackHandle {
    plan: Plan,
    workers: exec::Workers,
}

impl DelegateHandle for XnnpackHandle {
    fn execute(&mut self, ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
        exec::execute(&mut self.plan, &mut self.workers, ctx.threads.max(1), args)
    }
}

/// What `rbuild inspect` shows of an XNNPACK payload.
#[derive(Clone, Debug, PartialEq)]
pub struct PayloadSummary {
    /// Node kinds with their counts, in first-use order.
    pub nodes: alloc::vec::Vec<(&'static str, usize)>,
    /// Multiply-accumulates of the convolutions, fully-connected and matrix-multiply nodes.
    pub macs: u64,
}

/// Decodes a payload far enough to summarize it (no constants needed).
pub fn summarize(processed: &[u8]) -> Result<PayloadSummary, String> {
    use rbuild_runtime::backends::xnnpack::{NodeKind, NodeParams};
    let payload = parse_payload(processed)?;
    let g = &payload.graph;
    let mut nodes: alloc::vec::Vec<(&'static str, usize)> = alloc::vec::Vec::new();
    let mut macs = 0u64;
    let numel = |id: u32| g.values.get(id as usize).map_or(0, |v| v.numel() as u64);
    for n in &g.nodes {
        match nodes.iter_mut().find(|(k, _)| *k == n.kind.name()) {
            Some(e) => e.1 += 1,
            None => nodes.push((n.kind.name(), 1)),
        }
        macs += match (&n.params, n.kind) {
            (NodeParams::Conv(c), NodeKind::Conv2d | NodeKind::DepthwiseConv2d) => {
                numel(c.output) * c.kernel_height as u64 * c.kernel_width as u64 * c.group_input_channels.max(1) as u64
            }
            (NodeParams::Conv(c), _) => numel(c.input) * c.kernel_height as u64 * c.kernel_width as u64 * c.group_output_channels as u64,
            (NodeParams::FullyConnected { input, filter, .. }, _) => {
                let k = g.values.get(*input as usize).and_then(|v| v.dims.last().copied()).unwrap_or(0) as u64;
                if k == 0 { 0 } else { numel(*input) / k * numel(*filter) }
            }
            (NodeParams::Binary { input1, output, .. }, NodeKind::BatchMatrixMultiply) => {
                let k = g.values.get(*input1 as usize).and_then(|v| v.dims.last().copied()).unwrap_or(0) as u64;
                numel(*output) * k
            }
            _ => 0,
        };
    }
    Ok(PayloadSummary { nodes, macs })
}

/// A payload compiled outside a program, for tests and fuzzing: `named_data` stands in for the
/// program's named data; activations may take at most `activation_limit` bytes.
pub fn compile_payload<'a>(processed: &'a [u8], named_data: &'a dyn Fn(&str) -> Option<&'a [u8]>, activation_limit: usize) -> Result<Plan, String> {
    let payload = parse_payload(processed)?;
    compile::compile(&payload.graph, payload.constants, named_data, activation_limit).map_err(|e| format!("XNNPACK payload: {e}"))
}

pub use compile::DEFAULT_ACTIVATION_LIMIT;

impl Plan {
    /// Elements of all activation buffers together (what running the plan touches).
    pub fn activation_elements(&self) -> usize {
        self.bufs.iter().map(plan::Buf::len).sum()
    }

    /// [`Plan::run_in_place`], timing each step with `now()` (seconds): (node kind, seconds).
    pub fn run_timed(&mut self, threads: usize, now: &dyn Fn() -> f64) -> Result<alloc::vec::Vec<(&'static str, f64)>, String> {
        let mut workers = core::mem::take(&mut self.workers);
        let r = exec::run_steps_timed(self, &mut workers, threads, now).map_err(|e| e.message);
        self.workers = workers;
        r
    }

    /// A description of each step (node kind and the operator's shape), in order.
    pub fn step_names(&self) -> alloc::vec::Vec<String> {
        let counts = |s: &plan::Step| s.inputs.iter().map(|(_, n)| alloc::format!("{n}")).collect::<alloc::vec::Vec<_>>().join(",");
        self.steps
            .iter()
            .map(|s| format!("{} {} [{} -> {}]", s.kind.name(), s.op.describe(), counts(s), s.output.1))
            .collect()
    }

    /// The delegate's inputs, in argument order: (dtype, dims).
    pub fn input_types(&self) -> alloc::vec::Vec<(rbuild_runtime::ScalarType, alloc::vec::Vec<usize>)> {
        self.inputs.iter().map(|e| (e.dtype, e.dims.clone())).collect()
    }

    /// The delegate's outputs, in argument order: (dtype, dims).
    pub fn output_types(&self) -> alloc::vec::Vec<(rbuild_runtime::ScalarType, alloc::vec::Vec<usize>)> {
        self.outputs.iter().map(|e| (e.dtype, e.dims.clone())).collect()
    }

    /// Runs the plan on `inputs` (each the little-endian bytes of the input's dtype and dims, in
    /// argument order) on `threads` threads; the outputs' bytes, in argument order.
    pub fn run_bytes(&mut self, threads: usize, inputs: &[&[u8]]) -> Result<alloc::vec::Vec<alloc::vec::Vec<u8>>, String> {
        if inputs.len() != self.inputs.len() {
            return Err(format!("{} inputs given, the payload takes {}", inputs.len(), self.inputs.len()));
        }
        for (k, (ext, bytes)) in self.inputs.iter().zip(inputs).enumerate() {
            exec::copy_in(ext, bytes, &mut self.bufs[ext.buf]).map_err(|e| format!("input {k}: {e}"))?;
        }
        self.run_in_place(threads)?;
        self.outputs
            .iter()
            .enumerate()
            .map(|(k, ext)| {
                let mut out = alloc::vec![0u8; ext.dims.iter().product::<usize>() * ext.dtype.size()];
                exec::copy_out(ext, &self.bufs[ext.buf], &mut out).map_err(|e| format!("output {k}: {e}"))?;
                Ok(out)
            })
            .collect()
    }

    /// Runs every step on whatever the buffers hold (zeros after compile), on `threads` threads.
    pub fn run_in_place(&mut self, threads: usize) -> Result<(), String> {
        let mut workers = core::mem::take(&mut self.workers);
        let r = exec::run_steps(self, &mut workers, threads).map_err(|e| e.message);
        self.workers = workers;
        r
    }
}
