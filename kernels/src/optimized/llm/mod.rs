//! CPU kernels for LLM decode and prefill: linear layers in f32 / int8 / int4 / 8da4w and
//! GGUF's Q8_0 / Q4_1 blocks, fused attention over the KV cache, RMSNorm, RoPE, SiLU-gated MLP
//! product.
//!
//! SIMD is chosen at run time ([`simd::isa`]: AVX2+FMA+F16C on x86-64, NEON on aarch64, scalar
//! otherwise); work splits over output rows on a persistent [`pool`] (std only).

pub mod attention;
pub mod gemv;
pub mod linear;
pub mod norm;
pub mod pool;
pub mod qblocks;
pub mod qgemv;
pub mod simd;
