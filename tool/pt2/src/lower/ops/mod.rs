//! Which export-IR calls each ATen target becomes. One table ([`TABLE`]) answers both "is this
//! op mapped" (the up-front check that lists every unmapped op) and "how".

mod attention;
mod create;
mod direct;
mod elementwise;
mod layout;
mod nn;
mod norm;
mod pad;
mod reduce;
mod sym;

pub(crate) use layout::broadcast_to;

use super::context::{Call, Cx, Lowered, OpResult};

/// Lowers one node; returns its outputs in the node's order.
pub(crate) type Handler = fn(&mut Cx, &Call<'_>) -> OpResult;

/// Every mapped target key (`aten::conv2d`, `aten::add.Tensor`; in-place forms go through
/// their functional twin, see `super::functional_twin`) with its handler.
pub(crate) const TABLE: &[(&[&str], Handler)] = &[
    // The export IR's own ops (or their copy/core form under another name, `direct::RENAMED`):
    // every argument converted by the IR schema's type.
    (
        &[
            // Unary math and activations.
            "aten::relu", "aten::sigmoid", "aten::tanh", "aten::exp", "aten::log", "aten::sqrt", "aten::rsqrt", "aten::sin",
            "aten::cos", "aten::erf", "aten::reciprocal", "aten::abs", "aten::neg", "aten::floor", "aten::ceil", "aten::round",
            "aten::logical_not", "aten::hardswish", "aten::hardsigmoid", "aten::silu", "aten::acos", "aten::acosh", "aten::asin",
            "aten::asinh", "aten::atan", "aten::atanh", "aten::cosh", "aten::sinh", "aten::tan", "aten::expm1", "aten::log10",
            "aten::log1p", "aten::log2", "aten::trunc", "aten::sign", "aten::bitwise_not", "aten::isinf", "aten::isnan",
            "aten::elu", "aten::glu", "aten::logit",
            // Arithmetic, with a tensor or a number as the second operand.
            "aten::atan2", "aten::fmod.Tensor", "aten::fmod.Scalar", "aten::remainder.Tensor", "aten::remainder.Scalar",
            "aten::div.Tensor_mode", "aten::div.Scalar_mode", "aten::floor_divide", "aten::pow.Scalar", "aten::rsub.Scalar",
            "aten::bitwise_and.Scalar", "aten::bitwise_or.Scalar", "aten::bitwise_xor.Scalar", "aten::bitwise_left_shift.Tensor",
            "aten::bitwise_left_shift.Tensor_Scalar", "aten::bitwise_right_shift.Tensor", "aten::bitwise_right_shift.Tensor_Scalar",
            "aten::__lshift__.Tensor", "aten::__lshift__.Scalar", "aten::__rshift__.Tensor", "aten::__rshift__.Scalar",
            "aten::__and__.Scalar", "aten::__or__.Scalar", "aten::__xor__.Scalar", "aten::masked_fill.Scalar",
            // Reductions, statistics and selections.
            "aten::mean.dim", "aten::mean", "aten::sum.dim_IntList", "aten::amax", "aten::amin", "aten::argmax", "aten::argmin",
            "aten::any", "aten::any.dim", "aten::any.dims", "aten::prod", "aten::prod.dim_int", "aten::max", "aten::min",
            "aten::max.dim", "aten::min.dim", "aten::var.dim", "aten::var.correction", "aten::var_mean.correction", "aten::topk",
            "aten::sort", "aten::cumsum",
            // Layout, gathers, scatters and padding.
            "aten::repeat", "aten::index.Tensor", "aten::index_select", "aten::flip", "aten::roll", "aten::tril", "aten::stack",
            "aten::pixel_shuffle", "aten::pixel_unshuffle", "aten::constant_pad_nd", "aten::reflection_pad1d",
            "aten::reflection_pad2d", "aten::reflection_pad3d", "aten::replication_pad1d", "aten::replication_pad2d",
            "aten::replication_pad3d", "aten::gather", "aten::scatter.src", "aten::scatter.value", "aten::scatter_add",
            "aten::scatter_reduce.two", "aten::select_scatter", "aten::slice_scatter", "aten::index_put", "aten::masked_scatter",
            "aten::copy", "aten::fill.Scalar", "aten::fill.Tensor", "aten::detach_copy", "aten::narrow_copy", "aten::alias_copy",
            "aten::diagonal", "aten::as_strided", "aten::unfold", "aten::narrow", "aten::t", "aten::squeeze.dim",
            "aten::split.Tensor", "aten::unbind.int",
            // Data-dependent sizes (bounded by the archive's range for the size).
            "aten::nonzero", "aten::masked_select", "aten::repeat_interleave.Tensor",
            // Creation.
            "aten::arange", "aten::arange.start_step", "aten::zeros", "aten::ones", "aten::empty.memory_format", "aten::rand",
            "aten::randn", "aten::randperm",
            // Layers, distances, pooling, transforms and the gradients ExecuTorch runs.
            "aten::addmm", "aten::embedding", "aten::native_group_norm", "aten::_native_batch_norm_legit.no_stats",
            "aten::_cdist_forward", "aten::cdist", "aten::_pdist_forward", "aten::pdist", "aten::native_dropout",
            "aten::grid_sampler_2d", "aten::grid_sampler", "aten::avg_pool2d", "aten::avg_pool3d", "aten::max_pool3d_with_indices",
            "aten::_adaptive_avg_pool3d", "aten::adaptive_avg_pool3d", "aten::col2im", "aten::_embedding_bag",
            "aten::_embedding_bag_forward_only", "aten::_fft_r2c",
            "aten::_fft_c2r", "aten::convolution_backward", "aten::max_pool2d_with_indices_backward",
            "aten::_upsample_bilinear2d_aa",
        ],
        direct::direct,
    ),
    (&["aten::hardtanh", "aten::relu6"], elementwise::hardtanh),
    (&["aten::leaky_relu"], elementwise::leaky_relu),
    (&["aten::gelu"], elementwise::gelu),
    (&["aten::clamp", "aten::clamp_min", "aten::clamp_max", "aten::clamp.Tensor"], elementwise::clamp),
    (&["aten::add.Tensor", "aten::add.Scalar", "aten::sub.Tensor", "aten::sub.Scalar", "aten::mul.Tensor", "aten::mul.Scalar", "aten::div.Tensor", "aten::div.Scalar", "aten::pow.Tensor_Scalar", "aten::pow.Tensor_Tensor", "aten::maximum", "aten::minimum", "aten::eq.Tensor", "aten::eq.Scalar", "aten::ne.Tensor", "aten::ne.Scalar", "aten::lt.Tensor", "aten::lt.Scalar", "aten::le.Tensor", "aten::le.Scalar", "aten::gt.Tensor", "aten::gt.Scalar", "aten::ge.Tensor", "aten::ge.Scalar", "aten::logical_and", "aten::logical_or", "aten::logical_xor", "aten::bitwise_and.Tensor", "aten::bitwise_or.Tensor", "aten::bitwise_xor.Tensor", "aten::__and__.Tensor", "aten::__or__.Tensor", "aten::__xor__.Tensor"], elementwise::binary),
    (&["aten::where.self"], elementwise::where_self),
    (&["aten::masked_fill.Tensor"], elementwise::masked_fill_tensor),
    (&["aten::isfinite"], elementwise::isfinite),
    (&["aten::_to_copy", "aten::to.dtype", "aten::to.dtype_layout", "aten::to.device", "aten::to.other", "aten::type_as"], create::convert),
    (&["aten::alias", "aten::detach", "aten::contiguous", "aten::clone", "aten::lift_fresh_copy"], identity),
    (&["aten::dropout", "aten::feature_dropout", "aten::alpha_dropout"], nn::dropout),
    (&["aten::_assert_tensor_metadata", "aten::_assert_scalar", "aten::sym_constrain_range_for_size", "aten::sym_constrain_range"], checks_only),
    (&["aten::sym_size.int"], create::sym_size),
    (&["aten::sym_numel"], sym::numel),
    (&["aten::sym_stride.int", "aten::sym_storage_offset"], sym::layout_query),
    (&["aten::_local_scalar_dense"], sym::item),
    (sym::PYTHON_OPS, sym::python_op),
    (&["aten::arange.start"], create::arange),
    (&["aten::full", "aten::new_ones", "aten::new_zeros", "aten::new_full"], create::full),
    (&["aten::full_like", "aten::zeros_like", "aten::ones_like"], create::full_like),
    (&["aten::empty_strided"], create::empty_strided),
    (&["aten::scalar_tensor"], create::scalar_tensor),
    (&["aten::copy_"], create::copy),
    (&["aten::fill_.Scalar", "aten::zero_"], create::fill),
    (&["aten::view", "aten::_unsafe_view", "aten::reshape", "aten::flatten.using_ints"], layout::reshape),
    (&["aten::permute"], layout::permute),
    (&["aten::transpose.int"], layout::transpose),
    (&["aten::unsqueeze"], layout::unsqueeze),
    (&["aten::squeeze", "aten::squeeze.dims"], layout::squeeze),
    (&["aten::expand"], layout::expand),
    (&["aten::slice.Tensor"], layout::slice),
    (&["aten::select.int"], layout::select),
    (&["aten::cat"], layout::cat),
    (&["aten::split_with_sizes", "aten::chunk"], layout::split),
    (&["aten::diff"], layout::diff),
    (&["aten::pad"], pad::pad),
    (&["aten::conv1d", "aten::conv2d", "aten::conv2d.padding", "aten::conv_transpose1d", "aten::conv_transpose2d.input", "aten::convolution"], nn::convolution),
    (&["aten::batch_norm", "aten::_native_batch_norm_legit_no_training", "aten::_native_batch_norm_legit"], norm::batch_norm),
    (&["aten::layer_norm", "aten::native_layer_norm"], norm::layer_norm),
    (&["aten::group_norm"], norm::group_norm),
    (&["aten::instance_norm"], norm::instance_norm),
    (&["aten::linear"], nn::linear),
    (&["aten::mm", "aten::bmm", "aten::matmul"], nn::matmul),
    (&["aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::max_pool3d"], nn::max_pool),
    (&["aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d"], nn::adaptive_avg_pool2d),
    (&["aten::avg_pool1d", "aten::max_pool1d", "aten::adaptive_avg_pool1d"], nn::pool1d),
    (&["aten::std.dim", "aten::std.correction"], std_dev),
    (&["aten::upsample_nearest2d.vec", "aten::upsample_bilinear2d.vec"], nn::upsample),
    (&["aten::_upsample_bilinear2d_aa.vec"], nn::upsample_aa),
    (&["aten::softmax.int", "aten::_softmax", "aten::log_softmax.int", "aten::_log_softmax"], nn::softmax),
    (&["aten::scaled_dot_product_attention"], attention::scaled_dot_product_attention),
    (&["aten::sum"], reduce::sum_all),
    (&["aten::all", "aten::all.dim", "aten::all.dims"], reduce::all),
    (&["aten::linalg_vector_norm"], reduce::vector_norm),
    (&["aten::new_empty", "aten::empty_like", "aten::rand_like", "aten::randn_like"], create::like),
];

/// Core ATen operators rbuild maps to no runtime operator, by design, with the reason: the
/// gradients of training that ExecuTorch's portable library has no kernel for either (those
/// it has, `convolution_backward` and `max_pool2d_with_indices_backward`, are mapped).
pub const EXCEPTIONS: &[(&str, &str)] = &[
    ("aten::_adaptive_avg_pool2d_backward", TRAINING_GRADIENT),
    ("aten::avg_pool2d_backward", TRAINING_GRADIENT),
    ("aten::embedding_dense_backward", TRAINING_GRADIENT),
    ("aten::native_group_norm_backward", TRAINING_GRADIENT),
    ("aten::native_layer_norm_backward", TRAINING_GRADIENT),
];

const TRAINING_GRADIENT: &str = "a training gradient: inference programs compute no gradients, and ExecuTorch's portable \
                                 library has no kernel for it";

/// The handler of a target key.
pub(crate) fn handler(key: &str) -> Option<Handler> {
    TABLE.iter().find(|(keys, _)| keys.contains(&key)).map(|(_, h)| *h)
}

/// Every mapped target key, sorted (in-place forms map through their functional twin and are
/// not listed).
pub fn mapped_targets() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = TABLE.iter().flat_map(|(keys, _)| keys.iter().copied()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Why a target is a named exception, if it is one.
pub(crate) fn exception(key: &str) -> Option<&'static str> {
    EXCEPTIONS.iter().find(|(k, _)| *k == key).map(|(_, why)| *why)
}

/// Targets whose result aliases (a part of) their `self` argument, for tracking writes
/// through views.
pub(crate) fn is_view(key: &str) -> bool {
    matches!(
        key,
        "aten::view"
            | "aten::_unsafe_view"
            | "aten::reshape"
            | "aten::flatten.using_ints"
            | "aten::permute"
            | "aten::transpose.int"
            | "aten::t"
            | "aten::diagonal"
            | "aten::as_strided"
            | "aten::unfold"
            | "aten::narrow"
            | "aten::unsqueeze"
            | "aten::squeeze"
            | "aten::squeeze.dim"
            | "aten::squeeze.dims"
            | "aten::expand"
            | "aten::slice.Tensor"
            | "aten::select.int"
            | "aten::split.Tensor"
            | "aten::split_with_sizes"
            | "aten::chunk"
            | "aten::unbind.int"
    )
}

/// Targets whose result is the same whole tensor as `self` (writes through it reach `self`).
pub(crate) fn is_whole_alias(key: &str) -> bool {
    matches!(key, "aten::alias" | "aten::detach" | "aten::contiguous" | "aten::to.dtype" | "aten::to.dtype_layout" | "aten::to.device" | "aten::to.other" | "aten::type_as")
}

fn one(v: rbuild_export::ValueId) -> OpResult {
    Ok(vec![Lowered::Tensor(v)])
}

/// Ops that compute their input unchanged (aliases, copies: values are immutable here).
fn identity(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    one(cx.tensor(&c.args, "self")?)
}

/// `std.dim`/`std.correction`: the square root of the variance (ExecuTorch has no `std`).
fn std_dev(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let var_key = if c.key == "aten::std.dim" { "aten::var.dim" } else { "aten::var.correction" };
    let var = direct::direct(cx, &Call { key: var_key, args: c.args.clone(), out_dims: None, data_bound: None, self_meta: None })?;
    let [Lowered::Tensor(v)] = var[..] else { return Err("var gives one tensor".into()) };
    one(cx.call1("aten::sqrt", vec![rbuild_export::graph::Arg::Tensor(v)])?)
}

/// Run-time checks of the exported program (metadata and range asserts): the lowering checks
/// shapes and dtypes itself, so they compute nothing.
fn checks_only(_: &mut Cx, _: &Call<'_>) -> OpResult {
    Ok(vec![])
}
