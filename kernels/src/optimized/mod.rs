//! Optimized CPU kernels; each replaces a portable twin and is tested against it.
//!
//! f32 fast paths only: GEMM (`matrixmultiply`) for matrix products and convolutions, a direct
//! vectorizable loop for depthwise convolution. Anything else (other dtypes, dim orders,
//! transposed convolution) is handed to the portable reference, so registering these never
//! narrows what an op accepts. `KernelContext::threads > 1` splits work over scoped threads
//! (std builds only).


pub mod act_norm;
pub mod conv;
pub mod cortex_m;
pub mod depthwise;
pub mod gemm;
pub mod linalg;
pub mod llm;
pub mod whisper;

rbuild_runtime::kernel_table! {
    "aten::mm.out" => linalg::mm_out,
    "aten::bmm.out" => linalg::bmm_out,
    "aten::addmm.out" => linalg::addmm_out,
    "aten::convolution.out" => conv::convolution_out,
    "aten::linear.out" => llm::linear::linear_out,
    "rbuild::linear_f16.out" => llm::linear::linear_f16_out,
    "rbuild::linear_q8.out" => llm::linear::linear_q8_out,
    "rbuild::linear_q4.out" => llm::linear::linear_q4_out,
    "rbuild::linear_8da4w.out" => llm::linear::linear_8da4w_out,
    "rbuild::linear_q8g.out" => llm::linear::linear_q8g_out,
    "rbuild::linear_q4_1.out" => llm::linear::linear_q4_1_out,
    "llama::sdpa_with_kv_cache.out" => llm::attention::sdpa_with_kv_cache_out,
    "llama::custom_sdpa.out" => llm::attention::custom_sdpa_out,
    "rbuild::rms_norm.out" => llm::norm::rms_norm_out,
    "rbuild::rope.out" => llm::norm::rope_out,
    "rbuild::silu_mul.out" => llm::norm::silu_mul_out,
    "aten::gelu.out" => act_norm::gelu_out,
    "aten::native_layer_norm.out" => act_norm::native_layer_norm_out,
    "rbuild::log_mel_spectrogram.out" => whisper::log_mel_spectrogram_out,
    "rbuild::log_mel_chunks.out" => whisper::log_mel_chunks_out,
    "rbuild::cross_attention.out" => whisper::cross_attention_out,
}

#[cfg(test)]
mod tests {
    #[test]
    fn registry_has_every_linalg_conv_and_pool_op() {
        let r = crate::registry();
        for op in [
            "aten::mm.out",
            "aten::mm.dtype_out",
            "aten::bmm.out",
            "aten::bmm.dtype_out",
            "aten::addmm.out",
            "aten::addmm.dtype_out",
            "aten::convolution.out",
            "aten::avg_pool2d.out",
            "aten::max_pool2d_with_indices.out",
            "aten::_adaptive_avg_pool2d.out",
        ] {
            assert!(r.lookup(op).is_some(), "{op} missing");
        }
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    /// A deterministic generator of test values in [-1, 1).
    pub struct Lcg(u64);

    impl Lcg {
        pub fn new(seed: u64) -> Lcg {
            Lcg(seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407))
        }
        pub fn next(&mut self) -> f32 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
        pub fn vec(&mut self, n: usize) -> alloc::vec::Vec<f32> {
            (0..n).map(|_| self.next()).collect()
        }
    }

    /// `|got - want| <= rtol · (1 + |want|)` elementwise (NaN matches NaN).
    pub fn assert_close(got: &[f32], want: &[f32], rtol: f32, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: lengths differ");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= rtol * (1.0 + w.abs());
            assert!(ok, "{what}: element {i} is {g}, expected {w}");
        }
    }
}
