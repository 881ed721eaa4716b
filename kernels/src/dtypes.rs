//! The dtypes each runtime kernel accepts, as data: one row per operator of
//! [`catalog`](crate::catalog), for coverage tables (`rbuild ops`) and selective builds.
//!
//! A row lists the dtypes of the kernel's **primary argument**: the value tensor (`self`,
//! `input`, `weight` of an embedding, the first of a tensor list; `self` of `where`, the
//! `exponent` tensor of `pow.Scalar_out`), or the out tensor of creation ops (`full`, `arange`,
//! `zeros`, `rand`, `empty`, …). A dtype is listed when some valid call with a primary argument
//! of that dtype succeeds (other arguments and the out may need other dtypes).
//!
//! The dtypes are those programs compute in: the floating, integer and bool types and
//! complex64/complex128. The unsigned 16/32/64-bit, quantized and bit types, which some
//! dtype-erased kernels also read, are not listed. The scalar primitives (`executorch_prim::*`)
//! take no tensor: their rows list the scalar kinds they take, as the dtype a 0-dim tensor of
//! that kind has (int: Long, float: Double, bool: Bool).
//!
//! `kernels/tests/kernel_dtypes.rs` keeps this truthful: it calls every kernel with each of
//! these dtypes and requires the accepted set to equal the row exactly, and checks the dtypes
//! that the shared test programs use.

use rbuild_runtime::ScalarType::{self, *};

/// Float, Double, Half, BFloat16.
pub const FLOATS: &[ScalarType] = &[Float, Double, Half, BFloat16];
/// The signed and unsigned integer types.
pub const INTS: &[ScalarType] = &[Byte, Char, Short, Int, Long];
pub const INTS_AND_BOOL: &[ScalarType] = &[Byte, Char, Short, Int, Long, Bool];
/// [`FLOATS`] and [`INTS`].
pub const REALS: &[ScalarType] = &[Float, Double, Half, BFloat16, Byte, Char, Short, Int, Long];
pub const REALS_AND_BOOL: &[ScalarType] = &[Float, Double, Half, BFloat16, Byte, Char, Short, Int, Long, Bool];
pub const COMPLEX: &[ScalarType] = &[ComplexFloat, ComplexDouble];
pub const REALS_AND_COMPLEX: &[ScalarType] =
    &[Float, Double, Half, BFloat16, Byte, Char, Short, Int, Long, ComplexFloat, ComplexDouble];
/// Every dtype a row can list: [`REALS_AND_BOOL`] and [`COMPLEX`] (byte-moving kernels).
pub const ALL: &[ScalarType] =
    &[Float, Double, Half, BFloat16, Byte, Char, Short, Int, Long, Bool, ComplexFloat, ComplexDouble];
pub const FLOATS_AND_LONG: &[ScalarType] = &[Float, Double, Half, BFloat16, Long];
/// f32-only kernels (LLM and audio kernels, `linear`).
pub const FLOAT32: &[ScalarType] = &[Float];
/// int8-only kernels (the rbuild integer-quantized operators).
pub const INT8: &[ScalarType] = &[Char];
/// Index tensors.
pub const INDEX_INTS: &[ScalarType] = &[Int, Long];
/// The integer types a quantized tensor may have.
pub const QUANTIZED_INTS: &[ScalarType] = &[Byte, Char, Short, Int];
/// The scalar primitives' int, float and bool scalars.
pub const SCALAR_KINDS: &[ScalarType] = &[Long, Double, Bool];

/// (operator, dtypes of its primary argument), sorted by operator.
pub const KERNEL_DTYPES: &[(&str, &[ScalarType])] = &[
    ("aten::_adaptive_avg_pool2d.out", FLOATS_AND_LONG),
    ("aten::_adaptive_avg_pool3d.out", FLOATS),
    ("aten::_cdist_forward.out", FLOATS),
    ("aten::_conj_physical.out", ALL),
    ("aten::_embedding_bag.out", FLOATS),
    ("aten::_fft_c2r.out", COMPLEX),
    ("aten::_fft_r2c.out", &[Float, Double]),
    ("aten::_local_scalar_dense", &[Float, Double, Byte, Char, Short, Int, Long, Bool]),
    ("aten::_log_softmax.out", FLOATS),
    ("aten::_native_batch_norm_legit.no_stats_out", FLOATS),
    ("aten::_native_batch_norm_legit.out", FLOATS),
    ("aten::_native_batch_norm_legit_no_training.out", FLOATS),
    ("aten::_pdist_forward.out", FLOATS),
    ("aten::_softmax.out", FLOATS),
    ("aten::_to_copy.out", ALL),
    ("aten::_upsample_bilinear2d_aa.out", &[Float, Double, Half, BFloat16, Byte]),
    ("aten::abs.out", ALL),
    ("aten::acos.out", REALS_AND_BOOL),
    ("aten::acosh.out", REALS_AND_BOOL),
    ("aten::add.Scalar_out", REALS_AND_BOOL),
    ("aten::add.out", ALL),
    ("aten::addmm.dtype_out", REALS),
    ("aten::addmm.out", REALS),
    ("aten::alias_copy.out", ALL),
    ("aten::amax.out", REALS_AND_BOOL),
    ("aten::amin.out", REALS_AND_BOOL),
    ("aten::any.all_out", REALS_AND_BOOL),
    ("aten::any.dims_out", REALS_AND_BOOL),
    ("aten::any.out", REALS_AND_BOOL),
    ("aten::arange.out", REALS_AND_BOOL),
    ("aten::arange.start_out", REALS_AND_BOOL),
    ("aten::argmax.out", REALS_AND_BOOL),
    ("aten::argmin.out", REALS_AND_BOOL),
    ("aten::as_strided_copy.out", ALL),
    ("aten::asin.out", REALS_AND_BOOL),
    ("aten::asinh.out", REALS_AND_BOOL),
    ("aten::atan.out", REALS_AND_BOOL),
    ("aten::atan2.out", REALS_AND_BOOL),
    ("aten::atanh.out", REALS_AND_BOOL),
    ("aten::avg_pool2d.out", REALS),
    ("aten::avg_pool3d.out", REALS),
    ("aten::bitwise_and.Scalar_out", INTS_AND_BOOL),
    ("aten::bitwise_and.Tensor_out", INTS_AND_BOOL),
    ("aten::bitwise_left_shift.Tensor_Scalar_out", INTS_AND_BOOL),
    ("aten::bitwise_left_shift.Tensor_out", INTS),
    ("aten::bitwise_not.out", INTS_AND_BOOL),
    ("aten::bitwise_or.Scalar_out", INTS_AND_BOOL),
    ("aten::bitwise_or.Tensor_out", INTS_AND_BOOL),
    ("aten::bitwise_right_shift.Tensor_Scalar_out", INTS_AND_BOOL),
    ("aten::bitwise_right_shift.Tensor_out", INTS),
    ("aten::bitwise_xor.Scalar_out", INTS_AND_BOOL),
    ("aten::bitwise_xor.Tensor_out", INTS_AND_BOOL),
    ("aten::bmm.dtype_out", REALS),
    ("aten::bmm.out", REALS_AND_COMPLEX),
    ("aten::cat.out", ALL),
    ("aten::ceil.out", REALS_AND_BOOL),
    ("aten::clamp.Tensor_out", REALS_AND_BOOL),
    ("aten::clamp.out", REALS_AND_BOOL),
    ("aten::clone.out", ALL),
    ("aten::col2im.out", FLOATS),
    ("aten::constant_pad_nd.out", REALS_AND_BOOL),
    ("aten::convolution.out", REALS),
    ("aten::convolution_backward.out", FLOATS),
    ("aten::copy.out", ALL),
    ("aten::copy_", ALL),
    ("aten::cos.out", REALS_AND_BOOL),
    ("aten::cosh.out", REALS_AND_BOOL),
    ("aten::cumsum.out", REALS_AND_BOOL),
    ("aten::detach_copy.out", ALL),
    ("aten::diagonal_copy.out", ALL),
    ("aten::div.Scalar_mode_out", REALS_AND_BOOL),
    ("aten::div.Scalar_out", REALS_AND_BOOL),
    ("aten::div.out", ALL),
    ("aten::div.out_mode", REALS_AND_BOOL),
    ("aten::elu.out", FLOATS),
    ("aten::embedding.out", ALL),
    ("aten::empty.out", ALL),
    ("aten::eq.Scalar_out", REALS_AND_BOOL),
    ("aten::eq.Tensor_out", REALS_AND_BOOL),
    ("aten::erf.out", REALS_AND_BOOL),
    ("aten::exp.out", REALS_AND_BOOL),
    ("aten::expand_copy.out", ALL),
    ("aten::expm1.out", REALS_AND_BOOL),
    ("aten::fill.Scalar_out", REALS_AND_BOOL),
    ("aten::fill.Tensor_out", REALS_AND_BOOL),
    ("aten::flip.out", ALL),
    ("aten::floor.out", REALS_AND_BOOL),
    ("aten::floor_divide.out", REALS),
    ("aten::fmod.Scalar_out", REALS_AND_BOOL),
    ("aten::fmod.Tensor_out", REALS),
    ("aten::full.out", REALS_AND_BOOL),
    ("aten::full_like.out", ALL),
    ("aten::gather.out", ALL),
    ("aten::ge.Scalar_out", REALS_AND_BOOL),
    ("aten::ge.Tensor_out", REALS_AND_BOOL),
    ("aten::gelu.out", REALS_AND_BOOL),
    ("aten::glu.out", FLOATS),
    ("aten::grid_sampler_2d.out", FLOATS),
    ("aten::gt.Scalar_out", REALS_AND_BOOL),
    ("aten::gt.Tensor_out", REALS_AND_BOOL),
    ("aten::hardsigmoid.out", REALS_AND_BOOL),
    ("aten::hardswish.out", REALS_AND_BOOL),
    ("aten::hardtanh.out", REALS_AND_BOOL),
    ("aten::index.Tensor_out", ALL),
    ("aten::index_put.out", ALL),
    ("aten::index_put_", ALL),
    ("aten::index_select.out", ALL),
    ("aten::isinf.out", REALS_AND_BOOL),
    ("aten::isnan.out", REALS_AND_BOOL),
    ("aten::le.Scalar_out", REALS_AND_BOOL),
    ("aten::le.Tensor_out", REALS_AND_BOOL),
    ("aten::leaky_relu.out", REALS_AND_BOOL),
    ("aten::lift_fresh_copy.out", ALL),
    ("aten::linear.out", FLOAT32),
    ("aten::log.out", REALS_AND_BOOL),
    ("aten::log10.out", REALS_AND_BOOL),
    ("aten::log1p.out", REALS_AND_BOOL),
    ("aten::log2.out", REALS_AND_BOOL),
    ("aten::logical_and.out", REALS_AND_BOOL),
    ("aten::logical_not.out", REALS_AND_BOOL),
    ("aten::logical_or.out", REALS_AND_BOOL),
    ("aten::logical_xor.out", REALS_AND_BOOL),
    ("aten::logit.out", REALS_AND_BOOL),
    ("aten::lt.Scalar_out", REALS_AND_BOOL),
    ("aten::lt.Tensor_out", REALS_AND_BOOL),
    ("aten::masked_fill.Scalar_out", REALS_AND_BOOL),
    ("aten::masked_scatter.out", ALL),
    ("aten::masked_select.out", ALL),
    ("aten::max.dim_max", REALS_AND_BOOL),
    ("aten::max.unary_out", REALS_AND_BOOL),
    ("aten::max_pool2d_with_indices.out", REALS),
    ("aten::max_pool2d_with_indices_backward.grad_input", FLOATS),
    ("aten::max_pool3d_with_indices.out", REALS),
    ("aten::maximum.out", REALS_AND_BOOL),
    ("aten::mean.dtype_out", REALS_AND_BOOL),
    ("aten::mean.out", REALS_AND_BOOL),
    ("aten::min.dim_min", REALS_AND_BOOL),
    ("aten::min.unary_out", REALS_AND_BOOL),
    ("aten::minimum.out", REALS_AND_BOOL),
    ("aten::mm.dtype_out", REALS),
    ("aten::mm.out", REALS),
    ("aten::mul.Scalar_out", REALS_AND_BOOL),
    ("aten::mul.out", ALL),
    ("aten::narrow_copy.out", ALL),
    ("aten::native_dropout.out", FLOATS),
    ("aten::native_group_norm.out", FLOATS),
    ("aten::native_layer_norm.out", FLOATS),
    ("aten::ne.Scalar_out", REALS_AND_BOOL),
    ("aten::ne.Tensor_out", REALS_AND_BOOL),
    ("aten::neg.out", REALS),
    ("aten::nonzero.out", REALS_AND_BOOL),
    ("aten::ones.out", REALS_AND_BOOL),
    ("aten::permute_copy.out", ALL),
    ("aten::pixel_shuffle.out", ALL),
    ("aten::pixel_unshuffle.out", ALL),
    ("aten::pow.Scalar_out", REALS_AND_BOOL),
    ("aten::pow.Tensor_Scalar_out", REALS_AND_BOOL),
    ("aten::pow.Tensor_Tensor_out", REALS_AND_BOOL),
    ("aten::prod.int_out", REALS_AND_BOOL),
    ("aten::prod.out", REALS_AND_BOOL),
    ("aten::rand.out", FLOATS),
    ("aten::randn.out", FLOATS),
    ("aten::randperm.out", REALS),
    ("aten::reciprocal.out", REALS_AND_BOOL),
    ("aten::reflection_pad1d.out", ALL),
    ("aten::reflection_pad2d.out", ALL),
    ("aten::reflection_pad3d.out", ALL),
    ("aten::relu.out", REALS_AND_BOOL),
    ("aten::remainder.Scalar_out", REALS_AND_BOOL),
    ("aten::remainder.Tensor_out", REALS),
    ("aten::repeat.out", ALL),
    ("aten::repeat_interleave.Tensor_out", INDEX_INTS),
    ("aten::replication_pad1d.out", ALL),
    ("aten::replication_pad2d.out", ALL),
    ("aten::replication_pad3d.out", ALL),
    ("aten::roll.out", ALL),
    ("aten::round.out", REALS_AND_BOOL),
    ("aten::rsqrt.out", REALS_AND_BOOL),
    ("aten::rsub.Scalar_out", REALS_AND_BOOL),
    ("aten::scalar_tensor.out", REALS_AND_BOOL),
    ("aten::scatter.src_out", ALL),
    ("aten::scatter.value_out", REALS_AND_BOOL),
    ("aten::scatter_add.out", REALS_AND_BOOL),
    ("aten::scatter_reduce.two_out", REALS_AND_BOOL),
    ("aten::select_copy.int_out", ALL),
    ("aten::select_scatter.out", ALL),
    ("aten::sigmoid.out", REALS_AND_BOOL),
    ("aten::sign.out", REALS_AND_BOOL),
    ("aten::silu.out", REALS_AND_BOOL),
    ("aten::sin.out", REALS_AND_BOOL),
    ("aten::sinh.out", REALS_AND_BOOL),
    ("aten::slice_copy.Tensor_out", ALL),
    ("aten::slice_scatter.out", ALL),
    ("aten::sort.values", REALS_AND_BOOL),
    ("aten::sort.values_stable", REALS_AND_BOOL),
    ("aten::split_copy.Tensor_out", ALL),
    ("aten::split_with_sizes_copy.out", ALL),
    ("aten::sqrt.out", REALS_AND_BOOL),
    ("aten::squeeze_copy.dim_out", ALL),
    ("aten::squeeze_copy.dims_out", ALL),
    ("aten::squeeze_copy.out", ALL),
    ("aten::stack.out", ALL),
    ("aten::sub.Scalar_out", REALS_AND_BOOL),
    ("aten::sub.out", REALS),
    ("aten::sum.IntList_out", ALL),
    ("aten::sum.out", ALL),
    ("aten::sym_numel", ALL),
    ("aten::sym_size.int", ALL),
    ("aten::t_copy.out", ALL),
    ("aten::tan.out", REALS_AND_BOOL),
    ("aten::tanh.out", REALS_AND_BOOL),
    ("aten::topk.values", REALS_AND_BOOL),
    ("aten::transpose_copy.int_out", ALL),
    ("aten::tril.out", ALL),
    ("aten::trunc.out", REALS),
    ("aten::unbind_copy.int_out", ALL),
    ("aten::unfold_copy.out", ALL),
    ("aten::unsqueeze_copy.out", ALL),
    ("aten::upsample_bilinear2d.vec_out", REALS),
    ("aten::upsample_nearest2d.vec_out", REALS_AND_BOOL),
    ("aten::var.correction_out", FLOATS),
    ("aten::var.out", FLOATS),
    ("aten::var_mean.correction_out", FLOATS),
    ("aten::view_as_real_copy.out", COMPLEX),
    ("aten::view_copy.out", ALL),
    ("aten::where.self_out", &[Float, Double, Half, BFloat16, Byte, Char, Short, Int, Long, Bool, ComplexFloat]),
    ("aten::zeros.out", REALS_AND_BOOL),
    ("dim_order_ops::_clone_dim_order.out", ALL),
    ("dim_order_ops::_empty_dim_order.out", ALL),
    ("dim_order_ops::_to_dim_order_copy.out", ALL),
    ("et_copy::_d2h_copy.out", ALL),
    ("et_copy::_h2d_copy.out", ALL),
    ("executorch_prim::add.Scalar", SCALAR_KINDS),
    ("executorch_prim::ceil.Scalar", SCALAR_KINDS),
    ("executorch_prim::eq.Scalar", SCALAR_KINDS),
    ("executorch_prim::floordiv.Scalar", SCALAR_KINDS),
    ("executorch_prim::floordiv.int", SCALAR_KINDS),
    ("executorch_prim::ge.Scalar", SCALAR_KINDS),
    ("executorch_prim::gt.Scalar", SCALAR_KINDS),
    ("executorch_prim::le.Scalar", SCALAR_KINDS),
    ("executorch_prim::lt.Scalar", SCALAR_KINDS),
    ("executorch_prim::mod.Scalar", SCALAR_KINDS),
    ("executorch_prim::mod.int", SCALAR_KINDS),
    ("executorch_prim::mul.Scalar", SCALAR_KINDS),
    ("executorch_prim::neg.Scalar", SCALAR_KINDS),
    ("executorch_prim::round.Scalar", SCALAR_KINDS),
    ("executorch_prim::sub.Scalar", SCALAR_KINDS),
    ("executorch_prim::sym_float.Scalar", SCALAR_KINDS),
    ("executorch_prim::sym_int.Scalar", SCALAR_KINDS),
    ("executorch_prim::sym_ite.Scalar", SCALAR_KINDS),
    ("executorch_prim::sym_max.Scalar", SCALAR_KINDS),
    ("executorch_prim::sym_min.Scalar", SCALAR_KINDS),
    ("executorch_prim::sym_not.Scalar", SCALAR_KINDS),
    ("executorch_prim::truediv.Scalar", SCALAR_KINDS),
    ("executorch_prim::trunc.Scalar", SCALAR_KINDS),
    ("llama::custom_sdpa.out", FLOAT32),
    ("llama::sdpa_with_kv_cache.out", FLOAT32),
    ("llama::update_cache.out", ALL),
    ("quantized_decomposed::dequantize_per_channel.out", QUANTIZED_INTS),
    ("quantized_decomposed::dequantize_per_tensor.out", QUANTIZED_INTS),
    ("quantized_decomposed::dequantize_per_tensor.tensor_out", QUANTIZED_INTS),
    ("quantized_decomposed::embedding_4bit.out", &[Byte]),
    ("quantized_decomposed::embedding_byte.out", &[Byte, Char]),
    ("quantized_decomposed::quantize_per_channel.out", FLOATS),
    ("quantized_decomposed::quantize_per_tensor.out", FLOATS),
    ("quantized_decomposed::quantize_per_tensor.tensor_out", FLOATS),
    ("rbuild::add_positions.out", FLOAT32),
    ("rbuild::cross_attention.out", FLOAT32),
    ("rbuild::linear_8da4w.out", FLOAT32),
    ("rbuild::linear_f16.out", FLOAT32),
    ("rbuild::linear_q4.out", FLOAT32),
    ("rbuild::linear_q4_1.out", FLOAT32),
    ("rbuild::linear_q8.out", FLOAT32),
    ("rbuild::linear_q8g.out", FLOAT32),
    ("rbuild::log_mel_chunks.out", FLOAT32),
    ("rbuild::log_mel_spectrogram.out", FLOAT32),
    ("rbuild::qadd.out", INT8),
    ("rbuild::qavg_pool2d.out", INT8),
    ("rbuild::qconv2d.out", INT8),
    ("rbuild::qlinear.out", INT8),
    ("rbuild::qlookup.out", INT8),
    ("rbuild::qmax_pool2d.out", INT8),
    ("rbuild::qmean_hw.out", INT8),
    ("rbuild::qmul.out", INT8),
    ("rbuild::rms_norm.out", FLOAT32),
    ("rbuild::rope.out", FLOAT32),
    ("rbuild::silu_mul.out", FLOAT32),
];

/// The dtypes the kernel of `op` accepts for its primary argument; empty for an unknown op.
pub fn declared(op: &str) -> &'static [ScalarType] {
    KERNEL_DTYPES.binary_search_by(|(o, _)| (*o).cmp(op)).map_or(&[], |i| KERNEL_DTYPES[i].1)
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::{declared, ALL, KERNEL_DTYPES};

    #[test]
    fn one_sorted_row_per_catalog_op() {
        let ops: Vec<&str> = KERNEL_DTYPES.iter().map(|r| r.0).collect();
        let catalog: Vec<&str> = crate::catalog().into_iter().map(|(op, _)| op).collect();
        for w in ops.windows(2) {
            assert!(w[0] < w[1], "rows out of order or repeated: {} then {}", w[0], w[1]);
        }
        let missing: Vec<_> = catalog.iter().filter(|op| !ops.contains(op)).collect();
        let unknown: Vec<_> = ops.iter().filter(|op| !catalog.contains(op)).collect();
        assert!(missing.is_empty(), "kernels without a row: {missing:?}");
        assert!(unknown.is_empty(), "rows without a kernel: {unknown:?}");
    }

    #[test]
    fn rows_are_nonempty_sets_of_listed_dtypes() {
        for (op, dtypes) in KERNEL_DTYPES {
            assert!(!dtypes.is_empty(), "{op}: no dtypes");
            for (i, d) in dtypes.iter().enumerate() {
                assert!(!dtypes[..i].contains(d), "{op}: {d:?} listed twice");
                assert!(ALL.contains(d), "{op}: {d:?} is not a dtype rows list");
            }
        }
    }

    #[test]
    fn lookup() {
        assert_eq!(declared("aten::view_as_real_copy.out"), super::COMPLEX);
        assert!(declared("aten::add.out").contains(&rbuild_runtime::ScalarType::Bool));
        assert!(declared("aten::no_such_op.out").is_empty());
    }
}
