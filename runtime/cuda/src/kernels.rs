//! The CUDA C kernels (`kernels/*.cu`), embedded at build time: one per schedule [`Kernel`],
//! each compiled as `kernels/common.cuh` followed by its file.

use rbuild_gpu_schedule::Kernel;

/// One kernel's source as NVRTC compiles it.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource {
    pub kernel: Kernel,
    /// The `extern "C"` entry point.
    pub function: &'static str,
    pub file: &'static str,
    /// `common.cuh` + the kernel file.
    pub source: &'static str,
}

macro_rules! kernel {
    ($kernel:ident, $function:literal, $file:literal) => {
        KernelSource {
            kernel: Kernel::$kernel,
            function: $function,
            file: $file,
            source: concat!(include_str!("../kernels/common.cuh"), "\n", include_str!(concat!("../kernels/", $file))),
        }
    };
}

const KERNELS: [KernelSource; 14] = [
    kernel!(Unary, "rb_unary", "unary.cu"),
    kernel!(Binary, "rb_binary", "binary.cu"),
    kernel!(Copy, "rb_copy", "copy.cu"),
    kernel!(Gemm, "rb_gemm", "gemm.cu"),
    kernel!(Gemv, "rb_gemv", "gemv.cu"),
    kernel!(Norm, "rb_norm", "norm.cu"),
    kernel!(Softmax, "rb_softmax", "softmax.cu"),
    kernel!(Attention, "rb_attention", "attention.cu"),
    kernel!(AttentionCombine, "rb_attention_combine", "attention_combine.cu"),
    kernel!(Rope, "rb_rope", "rope.cu"),
    kernel!(Embedding, "rb_embedding", "embedding.cu"),
    kernel!(Conv1d, "rb_conv1d", "conv1d.cu"),
    kernel!(Positions, "rb_positions", "positions.cu"),
    kernel!(Gate, "rb_gate", "gate.cu"),
];

/// Every kernel, in [`Kernel::ALL`] order.
pub fn kernel_sources() -> &'static [KernelSource] {
    &KERNELS
}

pub(crate) fn source_of(k: Kernel) -> &'static KernelSource {
    KERNELS.iter().find(|s| s.kernel == k).expect("every schedule kernel has a CUDA source")
}

/// Block shape of a kernel (the schedule's workgroup size).
pub(crate) fn block_of(k: Kernel) -> (u32, u32, u32) {
    match k {
        Kernel::Gemm => (16, 16, 1),
        k => (k.threads(), 1, 1),
    }
}
