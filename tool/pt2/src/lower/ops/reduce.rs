//! Reductions and scans over dims.

use rbuild_export::graph::Arg;

use super::{one, Call, Cx, OpResult};

/// `mean`, `sum`, `amax`, `amin`, `argmax`, `any` in their dim-list, one-dim and all-dims forms.
pub(super) fn reduce(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let x = cx.tensor(a, "self")?;
    let opt_ints = |cx: &Cx| cx.opt_ints(a, "dim").map(|d| d.map_or(Arg::None, Arg::Ints));
    let keepdim = |cx: &Cx| cx.bool(a, "keepdim").map(Arg::Bool);
    let dtype = |cx: &Cx| cx.dtype(a, "dtype").map(|t| t.map_or(Arg::None, Arg::ScalarType));
    let (op, args) = match c.key {
        "aten::mean.dim" => ("aten::mean.dim", vec![opt_ints(cx)?, keepdim(cx)?, dtype(cx)?]),
        "aten::mean" => ("aten::mean.dim", vec![Arg::None, Arg::Bool(false), dtype(cx)?]),
        "aten::sum.dim_IntList" => ("aten::sum.dim_IntList", vec![opt_ints(cx)?, keepdim(cx)?, dtype(cx)?]),
        "aten::sum" => ("aten::sum.dim_IntList", vec![Arg::None, Arg::Bool(false), dtype(cx)?]),
        "aten::amax" | "aten::amin" => (c.key, vec![Arg::Ints(cx.ints(a, "dim")?), keepdim(cx)?]),
        "aten::argmax" => ("aten::argmax", vec![cx.opt_int(a, "dim")?.map_or(Arg::None, Arg::Int), keepdim(cx)?]),
        "aten::any.dim" => ("aten::any.dim", vec![Arg::Int(cx.int(a, "dim")?), keepdim(cx)?]),
        "aten::any.dims" => ("aten::any.dims", vec![opt_ints(cx)?, keepdim(cx)?]),
        _ => ("aten::any.dims", vec![Arg::None, Arg::Bool(false)]),
    };
    let mut all = vec![Arg::Tensor(x)];
    all.extend(args);
    one(cx.call1(op, all)?)
}

pub(super) fn cumsum(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let dim = cx.int(&c.args, "dim")?;
    let dtype = cx.dtype(&c.args, "dtype")?.map_or(Arg::None, Arg::ScalarType);
    one(cx.call1("aten::cumsum", vec![Arg::Tensor(x), Arg::Int(dim), dtype])?)
}
