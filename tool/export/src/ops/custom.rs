//! Ops outside Core ATen that ExecuTorch or rbuild runs: `aten::linear`, ExecuTorch's LLM and
//! quantized libraries, and rbuild's own fused kernels.

pub(super) const SCHEMAS: &[(&str, &str)] = &[
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
    ("rbuild::qlookup(Tensor input, Tensor table) -> Tensor", "rbuild::qlookup.out(Tensor input, Tensor table, *, Tensor(a!) out) -> Tensor(a!)"),
    (
        "rbuild::qmax_pool2d(Tensor input, int[] kernel_size, int[] stride, int[] padding, int activation_min, int activation_max) -> Tensor",
        "rbuild::qmax_pool2d.out(Tensor input, int[] kernel_size, int[] stride, int[] padding, int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::qavg_pool2d(Tensor input, int[] kernel_size, int[] stride, int[] padding, int input_zero_point, int output_zero_point, int multiplier, int shift, int activation_min, int activation_max) -> Tensor",
        "rbuild::qavg_pool2d.out(Tensor input, int[] kernel_size, int[] stride, int[] padding, int input_zero_point, int output_zero_point, int multiplier, int shift, int activation_min, int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
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
    // GGUF's block formats kept as the file stores them: Q8_0 (int8, a scale per group) and Q4_1
    // (unsigned int4, a scale and a minimum per group).
    (
        "rbuild::linear_q8g(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, int group_size) -> Tensor",
        "rbuild::linear_q8g.out(Tensor input, Tensor weight, Tensor weight_scales, Tensor? bias, int group_size, *, Tensor(a!) out) -> Tensor(a!)",
    ),
    (
        "rbuild::linear_q4_1(Tensor input, Tensor weight, Tensor weight_scales, Tensor weight_mins, Tensor? bias, int group_size) -> Tensor",
        "rbuild::linear_q4_1.out(Tensor input, Tensor weight, Tensor weight_scales, Tensor weight_mins, Tensor? bias, int group_size, *, Tensor(a!) out) -> Tensor(a!)",
    ),
];
