//! `XnnpackBackend`: runs ExecuTorch's XNNPACK-delegated subgraphs on rbuild's NHWC kernels.
//!
//! [`XnnpackBackend::init`] decodes the payload (`rbuild_runtime::backends::xnnpack`), resolves
//! every constant (named data by key, else the payload's constant region), checks each node's
//! shapes and dtypes, packs weights for the NHWC kernels ([`crate::nhwc`]), fuses a Clamp into
//! the operator before it (as XNNPACK's subgraph optimizer does) and plans activation memory
//! ([`compile`]). `execute` copies the call's inputs in, runs the steps ([`exec`]) and copies
//! the outputs out. A node kind or dtype combination it cannot run fails at init naming it.

mod aligned;
mod compile;
mod exec;
mod ops;

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;

use rbuild_runtime::backend::{Backend, BackendInitContext, CompileSpec, DelegateHandle};
use rbuild_runtime::backends::xnnpack::{parse_payload, XNNPACK_BACKEND_ID};
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};

pub use compile::Plan;

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
        self.bufs.iter().map(compile::Buf::len).sum()
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
        let counts = |s: &compile::Step| s.inputs.iter().map(|(_, n)| alloc::format!("{n}")).collect::<alloc::vec::Vec<_>>().join(",");
        self.steps
            .iter()
            .map(|s| format!("{} {} [{} -> {}]", s.kind.name(), s.op.describe(), counts(s), s.output.1))
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
