//! The schedule shared by rbuild's GPU runtimes of the `RbuildGpuBackend` delegate (payload
//! format: `runtime/src/backends/gpu/PAYLOAD.md`): per call, shapes are bound and checked as the
//! CPU reference does, and each op becomes launches of a small kernel set ([`Kernel`]) whose
//! parameter words and bindings are the contract between this planner and the kernels. The
//! wgpu runtime (`runtime/wgpu`, WGSL) and the CUDA runtime (`runtime/cuda`, CUDA C) each
//! implement every kernel with the same parameters, so a payload plans once and runs on both.

extern crate alloc; // the runtime's `kerr!` expands to `alloc::format!`

pub mod data;
pub mod ops;
pub mod schedule;

pub use schedule::{plan_call, Bind, Call, Dispatch, DispatchTime, Plan, PARAM_BYTES, PARAM_WORDS};

/// One kernel of the shared set; each runtime has one implementation per kernel (WGSL file,
/// CUDA C function) with the parameter words documented at the top of its WGSL source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    Unary,
    Binary,
    Copy,
    Gemm,
    Gemv,
    Norm,
    Softmax,
    Attention,
    AttentionCombine,
    Rope,
    Embedding,
    Conv1d,
    Positions,
    Gate,
}

impl Kernel {
    pub const ALL: [Kernel; 14] = [
        Kernel::Unary,
        Kernel::Binary,
        Kernel::Copy,
        Kernel::Gemm,
        Kernel::Gemv,
        Kernel::Norm,
        Kernel::Softmax,
        Kernel::Attention,
        Kernel::AttentionCombine,
        Kernel::Rope,
        Kernel::Embedding,
        Kernel::Conv1d,
        Kernel::Positions,
        Kernel::Gate,
    ];

    /// Threads per workgroup (CUDA block) the schedule's grids assume; `Gemm` is 16 × 16.
    pub fn threads(self) -> u32 {
        match self {
            Kernel::Gemv | Kernel::Attention | Kernel::Gate => 64,
            _ => 256,
        }
    }
}
