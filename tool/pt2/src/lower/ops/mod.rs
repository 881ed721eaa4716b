//! Which export-IR calls each ATen target becomes. One table ([`TABLE`]) answers both "is this
//! op mapped" (the up-front check that lists every unmapped op) and "how".

mod attention;
mod create;
mod elementwise;
mod layout;
mod nn;
mod reduce;

pub(crate) use layout::broadcast_to;

use super::context::{Call, Cx, Lowered, OpResult};

/// Lowers one node; returns its outputs in the node's order.
pub(crate) type Handler = fn(&mut Cx, &Call<'_>) -> OpResult;

/// Every mapped target key (`aten::conv2d`, `aten::add.Tensor`; in-place forms go through
/// their functional twin, see `super::functional_twin`) with its handler.
pub(crate) const TABLE: &[(&[&str], Handler)] = &[
    (
        &[
            "aten::relu", "aten::sigmoid", "aten::tanh", "aten::exp", "aten::log", "aten::sqrt", "aten::rsqrt", "aten::sin",
            "aten::cos", "aten::erf", "aten::reciprocal", "aten::abs", "aten::neg", "aten::floor", "aten::ceil", "aten::round",
            "aten::logical_not", "aten::hardswish", "aten::hardsigmoid", "aten::silu",
        ],
        elementwise::unary,
    ),
    (&["aten::hardtanh", "aten::relu6"], elementwise::hardtanh),
    (&["aten::leaky_relu"], elementwise::leaky_relu),
    (&["aten::gelu"], elementwise::gelu),
    (&["aten::clamp", "aten::clamp_min", "aten::clamp_max", "aten::clamp.Tensor"], elementwise::clamp),
    (&["aten::add.Tensor", "aten::add.Scalar", "aten::sub.Tensor", "aten::sub.Scalar", "aten::mul.Tensor", "aten::mul.Scalar", "aten::div.Tensor", "aten::div.Scalar", "aten::pow.Tensor_Scalar", "aten::pow.Tensor_Tensor", "aten::maximum", "aten::minimum", "aten::eq.Tensor", "aten::eq.Scalar", "aten::ne.Tensor", "aten::ne.Scalar", "aten::lt.Tensor", "aten::lt.Scalar", "aten::le.Tensor", "aten::le.Scalar", "aten::gt.Tensor", "aten::gt.Scalar", "aten::ge.Tensor", "aten::ge.Scalar", "aten::logical_and", "aten::logical_or", "aten::logical_xor", "aten::bitwise_and.Tensor", "aten::bitwise_or.Tensor", "aten::bitwise_xor.Tensor", "aten::__and__.Tensor", "aten::__or__.Tensor", "aten::__xor__.Tensor"], elementwise::binary),
    (&["aten::rsub.Scalar"], elementwise::rsub),
    (&["aten::where.self"], elementwise::where_self),
    (&["aten::masked_fill.Scalar"], elementwise::masked_fill),
    (&["aten::_to_copy", "aten::to.dtype", "aten::to.dtype_layout", "aten::to.device", "aten::to.other", "aten::type_as"], create::convert),
    (&["aten::alias", "aten::detach", "aten::contiguous", "aten::clone", "aten::lift_fresh_copy"], identity),
    (&["aten::dropout", "aten::feature_dropout", "aten::alpha_dropout"], nn::dropout),
    (&["aten::_assert_tensor_metadata", "aten::_assert_scalar", "aten::sym_constrain_range_for_size"], checks_only),
    (&["aten::sym_size.int"], create::sym_size),
    (&["aten::arange", "aten::arange.start", "aten::arange.start_step"], create::arange),
    (&["aten::full", "aten::zeros", "aten::ones", "aten::new_ones", "aten::new_zeros", "aten::new_full"], create::full),
    (&["aten::full_like", "aten::zeros_like", "aten::ones_like"], create::full_like),
    (&["aten::scalar_tensor"], create::scalar_tensor),
    (&["aten::copy_"], create::copy),
    (&["aten::fill_.Scalar", "aten::zero_"], create::fill),
    (&["aten::view", "aten::_unsafe_view", "aten::reshape", "aten::flatten.using_ints"], layout::reshape),
    (&["aten::permute"], layout::permute),
    (&["aten::transpose.int", "aten::t"], layout::transpose),
    (&["aten::unsqueeze"], layout::unsqueeze),
    (&["aten::squeeze", "aten::squeeze.dim", "aten::squeeze.dims"], layout::squeeze),
    (&["aten::expand"], layout::expand),
    (&["aten::slice.Tensor"], layout::slice),
    (&["aten::select.int"], layout::select),
    (&["aten::cat"], layout::cat),
    (&["aten::stack"], layout::stack),
    (&["aten::split.Tensor", "aten::split_with_sizes", "aten::chunk"], layout::split),
    (&["aten::unbind.int"], layout::unbind),
    (&["aten::repeat"], layout::repeat),
    (&["aten::index.Tensor"], layout::index),
    (&["aten::index_select"], layout::index_select),
    (&["aten::diff"], layout::diff),
    (&["aten::embedding"], nn::embedding),
    (&["aten::conv1d", "aten::conv2d", "aten::conv2d.padding", "aten::conv_transpose1d", "aten::conv_transpose2d.input", "aten::convolution"], nn::convolution),
    (&["aten::batch_norm", "aten::_native_batch_norm_legit_no_training"], nn::batch_norm),
    (&["aten::layer_norm", "aten::native_layer_norm"], nn::layer_norm),
    (&["aten::linear"], nn::linear),
    (&["aten::mm", "aten::bmm", "aten::matmul"], nn::matmul),
    (&["aten::addmm"], nn::addmm),
    (&["aten::max_pool2d", "aten::max_pool2d_with_indices"], nn::max_pool2d),
    (&["aten::avg_pool2d"], nn::avg_pool2d),
    (&["aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d"], nn::adaptive_avg_pool2d),
    (&["aten::upsample_nearest2d.vec", "aten::upsample_bilinear2d.vec"], nn::upsample),
    (&["aten::softmax.int", "aten::_softmax", "aten::log_softmax.int", "aten::_log_softmax"], nn::softmax),
    (&["aten::scaled_dot_product_attention"], attention::scaled_dot_product_attention),
    (&["aten::mean.dim", "aten::mean", "aten::sum.dim_IntList", "aten::sum", "aten::amax", "aten::amin", "aten::argmax", "aten::any.dim", "aten::any.dims", "aten::any"], reduce::reduce),
    (&["aten::cumsum"], reduce::cumsum),
];

/// The handler of a target key.
pub(crate) fn handler(key: &str) -> Option<Handler> {
    TABLE.iter().find(|(keys, _)| keys.contains(&key)).map(|(_, h)| *h)
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

/// Run-time checks of the exported program (metadata and range asserts): the lowering checks
/// shapes and dtypes itself, so they compute nothing.
fn checks_only(_: &mut Cx, _: &Call<'_>) -> OpResult {
    Ok(vec![])
}
