//! Host side of each kernel family: shape checks (as the CPU reference does them, with the
//! same errors), output shapes, and the dispatches (params, bindings, grid) of one op.

mod attention;
mod conv;
mod copy;
mod elementwise;
mod gather;
mod gemm;
mod norm;

use rbuild_runtime::backends::gpu::payload::{GeluApproximation, Op};

use crate::schedule::{Plan, PARAM_WORDS};

pub type R<T = ()> = Result<T, String>;

pub use attention::{attention_scratch_bytes, rope_table};

/// Zeroed parameter words of one dispatch.
pub fn params() -> [u32; PARAM_WORDS] {
    [0; PARAM_WORDS]
}

pub fn numel(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// A size as a kernel parameter word.
pub fn w32(n: usize, what: &str) -> R<u32> {
    u32::try_from(n).map_err(|_| format!("{what} = {n} exceeds the GPU kernels' 32-bit indexing"))
}

/// `d` normalized to `0..rank`, with the runtime's error text.
pub fn dim(d: i64, rank: usize) -> R<usize> {
    rbuild_runtime::kernel::normalize_dim(d, rank).map_err(|e| e.message)
}

pub fn plan_op(plan: &mut Plan<'_>) -> R {
    let node = plan.payload.ops[plan.index].clone();
    let ins = &node.inputs;
    match &node.op {
        Op::Linear { weight_transposed } => gemm::linear(plan, ins, *weight_transposed),
        Op::MatMul => gemm::matmul(plan, ins),
        Op::Conv1d { stride, padding, dilation, groups } => conv::conv1d(plan, ins, [*stride, *padding, *dilation, *groups]),
        Op::LayerNorm { eps, affine } => norm::layer_norm(plan, ins, *eps, *affine),
        Op::RmsNorm { eps } => norm::rms_norm(plan, ins, *eps),
        Op::Softmax { dim } => norm::softmax(plan, ins[0], *dim),
        Op::Gelu { approximation } => {
            let code = match approximation {
                GeluApproximation::Erf => 100,
                GeluApproximation::Tanh => 101,
            };
            elementwise::unary(plan, ins[0], code)
        }
        Op::Silu => elementwise::unary(plan, ins[0], 102),
        Op::Unary(op) => elementwise::unary(plan, ins[0], *op as u32),
        Op::Binary(op) => elementwise::binary(plan, ins, *op),
        Op::Attention { causal, scale, num_heads, num_kv_heads } => {
            attention::attention(plan, ins, *causal, *scale, *num_heads as usize, *num_kv_heads as usize)
        }
        Op::Rope { head_dim, interleaved, .. } => attention::rope(plan, ins, *head_dim as usize, *interleaved),
        Op::Embedding => gather::embedding(plan, ins),
        Op::Reshape => copy::reshape(plan, ins[0]),
        Op::Permute { dims } => {
            let p: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            copy::permute(plan, ins[0], &p)
        }
        Op::Transpose { dim0, dim1 } => {
            let rank = plan.dims(ins[0])?.len();
            let (a, b) = (dim(*dim0, rank)?, dim(*dim1, rank)?);
            let mut p: Vec<usize> = (0..rank).collect();
            p.swap(a, b);
            copy::permute(plan, ins[0], &p)
        }
        Op::Slice { dim, start, end, step } => copy::slice(plan, ins[0], *dim, *start, *end, *step),
        Op::Cat { dim } => copy::cat(plan, ins, *dim),
        Op::Cast => copy::cast(plan, ins[0]),
        Op::CacheUpdate { seq_dim } => copy::cache_update(plan, ins, *seq_dim),
        Op::Positions => gather::positions(plan, ins[0]),
        // Handled by the run loop (program.rs), which skips or gates the guarded range.
        Op::IfZero { .. } => Ok(()),
    }
}

/// An `if_zero` flag: an integer tensor of one element; its value when known on the host.
pub fn flag(plan: &Plan<'_>, id: rbuild_runtime::backends::gpu::payload::ValueId) -> R<Option<i64>> {
    let d = plan.dims(id)?;
    if !plan.dtype(id).is_index() {
        return Err(format!("{} is {}, an i32/i64 tensor is needed", plan.name(id), plan.dtype(id).name()));
    }
    if numel(&d) != 1 {
        return Err(format!("flag {} has {} elements, needs 1", plan.name(id), numel(&d)));
    }
    Ok(plan.host_scalars[id as usize])
}
