//! The operators the pipeline knows: exact PyTorch/ExecuTorch schemas (checked against
//! `shared/spec/*_schemas.txt` by a test), parsed once into argument lists.
//!
//! A graph node names its functional schema (`aten::add.Tensor`); the out-variant pass maps it
//! to the schema ExecuTorch runs (`aten::add.out`), whose extra keyword-only `Tensor(a!)`
//! arguments are the outputs.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::graph::Arg;

/// (functional schema, out-variant schema or "" when the op must be decomposed first).
const SCHEMAS: &[(&str, &str)] = &[
    (
        "aten::convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
        "aten::convolution.out(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
        "aten::_native_batch_norm_legit_no_training.out(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
    ),
    (
        "aten::hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor",
        "aten::hardtanh.out(Tensor self, Scalar min_val=-1, Scalar max_val=1, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::relu(Tensor self) -> Tensor", "aten::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor",
        "aten::clamp.out(Tensor self, Scalar? min=None, Scalar? max=None, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
        "aten::add.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        "aten::sub.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::mul.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::mul.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::div.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::div.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::div.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::div.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::sigmoid(Tensor self) -> Tensor", "aten::sigmoid.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        "aten::mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
        "aten::addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::mm(Tensor self, Tensor mat2) -> Tensor", "aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::permute_copy(Tensor self, int[] dims) -> Tensor",
        "aten::permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::view_copy(Tensor self, SymInt[] size) -> Tensor",
        "aten::view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
        "aten::clone.out(Tensor self, *, MemoryFormat? memory_format=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::cat(Tensor[] tensors, int dim=0) -> Tensor",
        "aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
        "aten::embedding.out(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::bmm(Tensor self, Tensor mat2) -> Tensor", "aten::bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
        "aten::_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::rsqrt(Tensor self) -> Tensor", "aten::rsqrt.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::neg(Tensor self) -> Tensor", "aten::neg.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor",
        "aten::pow.Tensor_Scalar_out(Tensor self, Scalar exponent, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::slice_copy.Tensor(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor",
        "aten::slice_copy.Tensor_out(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::expand_copy(Tensor self, SymInt[] size, *, bool implicit=False) -> Tensor",
        "aten::expand_copy.out(Tensor self, SymInt[] size, *, bool implicit=False, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::select_copy.int(Tensor self, int dim, SymInt index) -> Tensor",
        "aten::select_copy.int_out(Tensor self, int dim, SymInt index, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Run-time integers (emitted as ExecuTorch's prim ops: arguments, then the result value).
    ("aten::sym_size.int(Tensor self, int dim) -> SymInt", "aten::sym_size.int(Tensor self, int dim) -> SymInt"),
    ("aten::_local_scalar_dense(Tensor self) -> Scalar", "aten::_local_scalar_dense(Tensor self) -> Scalar"),
    // Stores a value into mutable state (ExecuTorch's write-back of a mutated buffer); emitted
    // under its own in-place schema, its result being the state it writes.
    (
        "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
        "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
    ),
    // Not Core ATen, but ExecuTorch runs it (optimized and portable libraries); the decomposition
    // pass rewrites it into permute_copy + mm/addmm unless the export keeps it.
    (
        "aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
        "aten::linear.out(Tensor input, Tensor weight, Tensor? bias=None, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // ExecuTorch's LLM custom op (extension/llm/custom_ops): KV-cache update + causal SDPA.
    (
        "llama::sdpa_with_kv_cache(Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len, Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None) -> Tensor",
        "llama::sdpa_with_kv_cache.out(Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len, Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None, *, Tensor(c!) out) -> Tensor(c!)",
    ),
    // ExecuTorch's quantized library: dequantizing embedding lookups.
    (
        "quantized_decomposed::embedding_byte(Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, int weight_quant_min, int weight_quant_max, Tensor indices) -> Tensor",
        "quantized_decomposed::embedding_byte.out(Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, int weight_quant_min, int weight_quant_max, Tensor indices, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "quantized_decomposed::embedding_4bit(Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, int weight_quant_min, int weight_quant_max, Tensor indices) -> Tensor",
        "quantized_decomposed::embedding_4bit.out(Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, int weight_quant_min, int weight_quant_max, Tensor indices, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // ExecuTorch's affine (de)quantization (kernels/quantized/quantized.yaml), the reference
    // representation of statically quantized programs (passes/quantize_static.rs).
    (
        "quantized_decomposed::quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype) -> Tensor",
        "quantized_decomposed::quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "quantized_decomposed::dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor",
        "quantized_decomposed::dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "quantized_decomposed::dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor",
        "quantized_decomposed::dequantize_per_channel.out(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    // rbuild's fused int8 ops (kernels/src/portable/qint8.rs; passes/fuse_int8.rs makes them):
    // int8 activations with one zero point each, int8 weights per output channel, int32 bias,
    // and requantization by fixed-point multiplier + shift (CMSIS-NN's arm_nn_requantize).
    (
        "rbuild::qconv2d(Tensor input, Tensor weight, Tensor bias, Tensor multiplier, Tensor shift, int input_zero_point, int output_zero_point, int activation_min, int activation_max, int[] stride, int[] padding, int[] dilation, int groups) -> Tensor",
        "rbuild::qconv2d.out(Tensor input, Tensor weight, Tensor bias, Tensor multiplier, Tensor shift, int input_zero_point, int output_zero_point, int activation_min, int activation_max, int[] stride, int[] padding, int[] dilation, int groups, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::qlinear(Tensor input, Tensor weight, Tensor bias, Tensor multiplier, Tensor shift, int input_zero_point, int output_zero_point, int activation_min, int activation_max) -> Tensor",
        "rbuild::qlinear.out(Tensor input, Tensor weight, Tensor bias, Tensor multiplier, Tensor shift, int input_zero_point, int output_zero_point, int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::qadd(Tensor self, Tensor other, int self_zero_point, int self_multiplier, int self_shift, int other_zero_point, int other_multiplier, int other_shift, int left_shift, int output_zero_point, int output_multiplier, int output_shift, int activation_min, int activation_max) -> Tensor",
        "rbuild::qadd.out(Tensor self, Tensor other, int self_zero_point, int self_multiplier, int self_shift, int other_zero_point, int other_multiplier, int other_shift, int left_shift, int output_zero_point, int output_multiplier, int output_shift, int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::qmul(Tensor self, Tensor other, int self_zero_point, int other_zero_point, int output_zero_point, int output_multiplier, int output_shift, int activation_min, int activation_max) -> Tensor",
        "rbuild::qmul.out(Tensor self, Tensor other, int self_zero_point, int other_zero_point, int output_zero_point, int output_multiplier, int output_shift, int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::qmean_hw(Tensor input, int input_zero_point, int output_zero_point, int multiplier, int shift, int activation_min, int activation_max) -> Tensor",
        "rbuild::qmean_hw.out(Tensor input, int input_zero_point, int output_zero_point, int multiplier, int shift, int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::qlookup(Tensor input, Tensor table) -> Tensor",
        "rbuild::qlookup.out(Tensor input, Tensor table, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::qmax_pool2d(Tensor input, int[] kernel_size, int[] stride, int[] padding, int activation_min, int activation_max) -> Tensor",
        "rbuild::qmax_pool2d.out(Tensor input, int[] kernel_size, int[] stride, int[] padding, int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::qavg_pool2d(Tensor input, int[] kernel_size, int[] stride, int[] padding, int input_zero_point, int output_zero_point, int multiplier, int shift, int activation_min, int activation_max) -> Tensor",
        "rbuild::qavg_pool2d.out(Tensor input, int[] kernel_size, int[] stride, int[] padding, int input_zero_point, int output_zero_point, int multiplier, int shift, int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Core ATen ops of the Whisper-style encoders and decoders.
    (
        "aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor",
        "aten::gelu.out(Tensor self, *, str approximate=\"none\", Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)",
        "aten::native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
    ),
    // ExecuTorch's LLM custom op: SDPA over already-filled key/value tensors (non-causal over
    // `start_pos + S` keys, or causal). Whisper's encoder self-attention uses it.
    (
        "llama::custom_sdpa(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None) -> Tensor",
        "llama::custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // rbuild's speech ops (kernels/src/portable/speech.rs): the log-mel front end, decoder
    // positions from the cache position, cross-attention whose keys/values are projected once
    // per audio window into state.
    (
        "rbuild::log_mel_spectrogram(Tensor pcm, Tensor window, Tensor mel_filters, int hop_length) -> Tensor",
        "rbuild::log_mel_spectrogram.out(Tensor pcm, Tensor window, Tensor mel_filters, int hop_length, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Voxtral's front end: the log-mel of the audio padded to a multiple of `pad_to` samples,
    // cut into `[n_chunks, n_mels, chunk_frames]`.
    (
        "rbuild::log_mel_chunks(Tensor pcm, Tensor window, Tensor mel_filters, int hop_length, int pad_to, int chunk_frames) -> Tensor",
        "rbuild::log_mel_chunks.out(Tensor pcm, Tensor window, Tensor mel_filters, int hop_length, int pad_to, int chunk_frames, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::add_positions(Tensor input, Tensor table, SymInt start_pos) -> Tensor",
        "rbuild::add_positions.out(Tensor input, Tensor table, SymInt start_pos, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::cross_attention(Tensor query, Tensor memory, Tensor k_weight, Tensor? k_bias, Tensor v_weight, Tensor? v_bias, Tensor(a!) key_cache, Tensor(b!) value_cache, SymInt start_pos) -> Tensor",
        "rbuild::cross_attention.out(Tensor query, Tensor memory, Tensor k_weight, Tensor? k_bias, Tensor v_weight, Tensor? v_bias, Tensor(a!) key_cache, Tensor(b!) value_cache, SymInt start_pos, *, Tensor(c!) out) -> Tensor(c!)",
    ),
    // rbuild's fused LLM ops (kernels/src/portable/llm.rs and quant_linear.rs define them).
    (
        "rbuild::rms_norm(Tensor input, Tensor weight, float eps) -> Tensor",
        "rbuild::rms_norm.out(Tensor input, Tensor weight, float eps, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::rope(Tensor input, Tensor cos, Tensor sin, SymInt start_pos) -> Tensor",
        "rbuild::rope.out(Tensor input, Tensor cos, Tensor sin, SymInt start_pos, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("rbuild::silu_mul(Tensor gate, Tensor up) -> Tensor", "rbuild::silu_mul.out(Tensor gate, Tensor up, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "rbuild::linear_f16(Tensor input, Tensor weight, Tensor? bias) -> Tensor",
        "rbuild::linear_f16.out(Tensor input, Tensor weight, Tensor? bias, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::linear_q8(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias) -> Tensor",
        "rbuild::linear_q8.out(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::linear_q4(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, int group_size) -> Tensor",
        "rbuild::linear_q4.out(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, int group_size, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::linear_8da4w(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, int group_size) -> Tensor",
        "rbuild::linear_8da4w.out(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, int group_size, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Core ATen ops of imported `torch.export` programs (tool/export/src/shape_*.rs infer them).
    // Elementwise math; integer inputs of the float functions give float32, as in ATen.
    ("aten::cos(Tensor self) -> Tensor", "aten::cos.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::sin(Tensor self) -> Tensor", "aten::sin.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::exp(Tensor self) -> Tensor", "aten::exp.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::tanh(Tensor self) -> Tensor", "aten::tanh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::erf(Tensor self) -> Tensor", "aten::erf.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::sqrt(Tensor self) -> Tensor", "aten::sqrt.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::log(Tensor self) -> Tensor", "aten::log.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::reciprocal(Tensor self) -> Tensor", "aten::reciprocal.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::abs(Tensor self) -> Tensor", "aten::abs.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::floor(Tensor self) -> Tensor", "aten::floor.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::ceil(Tensor self) -> Tensor", "aten::ceil.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    ("aten::round(Tensor self) -> Tensor", "aten::round.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor",
        "aten::leaky_relu.out(Tensor self, Scalar negative_slope=0.01, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor",
        "aten::clamp.Tensor_out(Tensor self, Tensor? min=None, Tensor? max=None, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
        "aten::sub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor",
        "aten::pow.Tensor_Tensor_out(Tensor self, Tensor exponent, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::minimum(Tensor self, Tensor other) -> Tensor",
        "aten::minimum.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::maximum(Tensor self, Tensor other) -> Tensor",
        "aten::maximum.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Comparisons and logic: bool results.
    (
        "aten::eq.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::eq.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::eq.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::eq.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::ne.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::ne.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::ne.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::ne.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::lt.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::lt.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::lt.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::lt.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::le.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::le.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::le.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::le.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::gt.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::gt.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::gt.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::gt.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::ge.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::ge.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::ge.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::ge.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::logical_and(Tensor self, Tensor other) -> Tensor",
        "aten::logical_and.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::logical_or(Tensor self, Tensor other) -> Tensor",
        "aten::logical_or.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::logical_xor(Tensor self, Tensor other) -> Tensor",
        "aten::logical_xor.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    ("aten::logical_not(Tensor self) -> Tensor", "aten::logical_not.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "aten::bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::bitwise_and.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::bitwise_or.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::bitwise_xor.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::where.self(Tensor condition, Tensor self, Tensor other) -> Tensor",
        "aten::where.self_out(Tensor condition, Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Tensor creation: the output tensor carries dtype (the out variants drop it, layout, device).
    (
        "aten::arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
        "aten::arange.start_out(Scalar start, Scalar end, Scalar step=1, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
        "aten::full.out(SymInt[] size, Scalar fill_value, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
        "aten::full_like.out(Tensor self, Scalar fill_value, *, MemoryFormat? memory_format=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
        "aten::scalar_tensor.out(Scalar s, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::ones(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
        "aten::ones.out(SymInt[] size, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
        "aten::zeros.out(SymInt[] size, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor",
        "aten::_to_copy.out(Tensor self, *, bool non_blocking=False, MemoryFormat? memory_format=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "dim_order_ops::_to_dim_order_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, int[]? dim_order=None) -> Tensor",
        "dim_order_ops::_to_dim_order_copy.out(Tensor self, *, bool non_blocking=False, int[]? dim_order=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "dim_order_ops::_clone_dim_order(Tensor self, *, bool non_blocking=False, int[]? dim_order=None) -> Tensor",
        "dim_order_ops::_clone_dim_order.out(Tensor self, *, bool non_blocking=False, int[]? dim_order=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Reductions and scans.
    (
        "aten::cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
        "aten::cumsum.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor",
        "aten::any.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor",
        "aten::any.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
        "aten::amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
        "aten::amin.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        "aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
        "aten::argmax.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
        "aten::_log_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Layout and indexing.
    (
        "aten::transpose_copy.int(Tensor self, int dim0, int dim1) -> Tensor",
        "aten::transpose_copy.int_out(Tensor self, int dim0, int dim1, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::unsqueeze_copy(Tensor self, int dim) -> Tensor",
        "aten::unsqueeze_copy.out(Tensor self, int dim, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::squeeze_copy.dims(Tensor self, int[] dim) -> Tensor",
        "aten::squeeze_copy.dims_out(Tensor self, int[] dim, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::alias_copy(Tensor self) -> Tensor",
        "aten::alias_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::repeat(Tensor self, SymInt[] repeats) -> Tensor",
        "aten::repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::split_with_sizes_copy(Tensor self, SymInt[] split_sizes, int dim=0) -> Tensor[]",
        "aten::split_with_sizes_copy.out(Tensor self, SymInt[] split_sizes, int dim=0, *, Tensor(a!)[] out) -> ()",
    ),
    (
        "aten::index_select(Tensor self, int dim, Tensor index) -> Tensor",
        "aten::index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
        "aten::index.Tensor_out(Tensor self, Tensor?[] indices, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Pooling and resampling (NCHW).
    (
        "aten::max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
        "aten::max_pool2d_with_indices.out(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False, *, Tensor(a!) out, Tensor(b!) indices) -> (Tensor(a!), Tensor(b!))",
    ),
    (
        "aten::avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
        "aten::avg_pool2d.out(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor",
        "aten::_adaptive_avg_pool2d.out(Tensor self, SymInt[2] output_size, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor",
        "aten::upsample_nearest2d.vec_out(Tensor input, SymInt[]? output_size, float[]? scale_factors, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "aten::upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor",
        "aten::upsample_bilinear2d.vec_out(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    // Not Core ATen: the builder may use these; the decomposition pass rewrites them.
    ("aten::hardswish(Tensor self) -> Tensor", ""),
    ("aten::hardsigmoid(Tensor self) -> Tensor", ""),
    ("aten::silu(Tensor self) -> Tensor", ""),
    ("aten::adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor", ""),
    ("aten::flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)", ""),
    ("aten::dropout(Tensor input, float p, bool train) -> Tensor", ""),
];

/// One argument of a schema.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaArg {
    /// Type as written, without alias annotation: `Tensor`, `Tensor?`, `int[]`, `Scalar`, …
    pub ty: String,
    pub name: String,
    pub default: Option<String>,
    pub kwarg_only: bool,
    /// A `Tensor(a!)` argument after `*`: an output of an out variant.
    pub is_out: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    /// `namespace::name`
    pub name: String,
    /// Overload, empty for the default.
    pub overload: String,
    pub args: Vec<SchemaArg>,
    pub returns: usize,
}

impl Schema {
    /// `name.overload` (or `name`), as graphs and registries key it.
    pub fn key(&self) -> String {
        rbuild_runtime::kernel::op_key(&self.name, &self.overload)
    }

    /// Arguments that are not outputs.
    pub fn inputs(&self) -> impl Iterator<Item = &SchemaArg> {
        self.args.iter().filter(|a| !a.is_out)
    }
}

/// Parses `ns::name.overload(args) -> returns`.
pub fn parse_schema(text: &str) -> Option<Schema> {
    let open = text.find('(')?;
    let close = text.rfind(") ->")?;
    let full = &text[..open];
    let (name, overload) = match full.split_once('.') {
        Some((n, o)) => (n.to_string(), o.to_string()),
        None => (full.to_string(), String::new()),
    };
    let mut args = Vec::new();
    let mut kw = false;
    for part in split_top(&text[open + 1..close]) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        if part == "*" {
            kw = true;
            continue;
        }
        let (decl, default) = match part.split_once('=') {
            Some((d, v)) => (d.trim(), Some(v.trim().to_string())),
            None => (part, None),
        };
        let (ty, name) = decl.rsplit_once(' ')?;
        let is_out = kw && ty.contains('!');
        // Drop alias annotations: `Tensor(a!)` → `Tensor`, `Tensor(a)?` → `Tensor?`.
        let ty: String = {
            let mut t = String::new();
            let mut depth = 0;
            for c in ty.chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ if depth == 0 => t.push(c),
                    _ => {}
                }
            }
            t
        };
        args.push(SchemaArg { ty, name: name.to_string(), default, kwarg_only: kw, is_out });
    }
    let ret = text[close + 4..].trim();
    let returns = match ret {
        "()" => 0,
        _ if ret.starts_with('(') => split_top(&ret[1..ret.len() - 1]).len(),
        _ => 1,
    };
    Some(Schema { name, overload, args, returns })
}

/// Splits on commas outside parentheses/brackets.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A known operator: its functional schema and, when it has one, its out variant.
#[derive(Debug)]
pub struct OpDef {
    pub functional: Schema,
    pub out: Option<Schema>,
    pub functional_text: &'static str,
    pub out_text: &'static str,
}

fn table() -> &'static HashMap<String, OpDef> {
    static TABLE: OnceLock<HashMap<String, OpDef>> = OnceLock::new();
    TABLE.get_or_init(|| {
        SCHEMAS
            .iter()
            .map(|&(f, o)| {
                let functional = parse_schema(f).expect("valid built-in schema");
                let out = (!o.is_empty()).then(|| parse_schema(o).expect("valid built-in schema"));
                (functional.key(), OpDef { functional, out, functional_text: f, out_text: o })
            })
            .collect()
    })
}

/// Ops whose result is a run-time integer (emitted as prim calls, no tensor output).
pub fn returns_int(key: &str) -> bool {
    matches!(key, "aten::sym_size.int" | "aten::_local_scalar_dense")
}

/// In-place ops: emitted under their own schema, with no output values of their own; their
/// effect is the write into their first argument (mutable state), so passes must keep them.
pub fn writes_in_place(key: &str) -> bool {
    key == "aten::copy_"
}

/// Looks an operator up by its functional key (`aten::add.Tensor`, `aten::relu`).
pub fn op(key: &str) -> Option<&'static OpDef> {
    table().get(key)
}

/// Every known operator.
pub fn all() -> impl Iterator<Item = &'static OpDef> {
    table().values()
}

/// The out-variant schema a node runs as: its functional op's out variant, or the node's own
/// op when the out-variant pass already renamed it.
pub fn out_schema(key: &str) -> Option<&'static Schema> {
    if let Some(def) = op(key) {
        return def.out.as_ref();
    }
    all().filter_map(|d| d.out.as_ref()).find(|s| s.key() == key)
}

/// The arguments of a node's out variant: a functional node (`key`) drops the arguments its
/// out schema lacks — the dtype/layout/device/pin_memory of factory ops and `_to_copy`, which
/// the output tensor carries. Out-variant nodes keep theirs.
pub fn out_variant_args(key: &str, args: &[Arg]) -> Vec<Arg> {
    let Some(OpDef { functional, out: Some(out), .. }) = op(key) else { return args.to_vec() };
    functional.args.iter().zip(args).filter(|(f, _)| out.inputs().any(|o| o.name == f.name)).map(|(_, a)| a.clone()).collect()
}

/// Whether an out variant writes its outputs through one `Tensor(a!)[] out` list
/// (`split_with_sizes_copy.out`), one list entry per node output.
pub fn writes_output_list(out: &Schema) -> bool {
    let mut outs = out.args.iter().filter(|a| a.is_out);
    matches!((outs.next(), outs.next()), (Some(a), None) if a.ty == "Tensor[]")
}
