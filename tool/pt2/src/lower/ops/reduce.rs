//! Reductions the IR has under another form: `sum` of everything, `all` (as ExecuTorch
//! decomposes it, through `any`), and vector norms.

use rbuild_export::graph::{Arg, ValueId};
use rbuild_runtime::Scalar;

use super::{one, Call, Cx, OpResult};

/// `sum(self, dtype)` over every element: ExecuTorch's `sum.IntList_out` with no dims.
pub(super) fn sum_all(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let dtype = cx.dtype(&c.args, "dtype")?.map_or(Arg::None, Arg::ScalarType);
    one(cx.call1("aten::sum.dim_IntList", vec![Arg::Tensor(x), Arg::None, Arg::Bool(false), dtype])?)
}

/// `all(self)`, `all.dim(self, dim, keepdim)`, `all.dims(self, dim?, keepdim)`:
/// `not any(not self)`.
pub(super) fn all(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let negated = cx.call1("aten::logical_not", vec![Arg::Tensor(x)])?;
    let any = match c.key {
        "aten::all" => cx.call1("aten::any", vec![Arg::Tensor(negated)])?,
        "aten::all.dim" => {
            let args = vec![Arg::Tensor(negated), Arg::Int(cx.int(&c.args, "dim")?), Arg::Bool(cx.bool(&c.args, "keepdim")?)];
            cx.call1("aten::any.dim", args)?
        }
        _ => {
            let dims = cx.opt_ints(&c.args, "dim")?.map_or(Arg::None, Arg::Ints);
            cx.call1("aten::any.dims", vec![Arg::Tensor(negated), dims, Arg::Bool(cx.bool(&c.args, "keepdim")?)])?
        }
    };
    let result = cx.call1("aten::logical_not", vec![Arg::Tensor(any)])?;
    // `all` of uint8 stays uint8, as `any` does.
    match cx.meta(x).dtype {
        rbuild_runtime::ScalarType::Byte => one(cx.cast(result, rbuild_runtime::ScalarType::Byte)?),
        _ => one(result),
    }
}

/// `linalg_vector_norm(self, ord, dim, keepdim, dtype)`: `sum(|x|^p)^(1/p)` over the dims
/// (`ord` 2: the square root of the sum of squares; ±inf: the largest/smallest `|x|`; 0: the
/// count of nonzero entries).
pub(super) fn vector_norm(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let mut x = cx.tensor(a, "self")?;
    if let Some(t) = cx.dtype(a, "dtype")? {
        x = cx.cast(x, t)?;
    }
    let ord = cx.scalar(a, "ord")?.to_f64();
    let dims = cx.opt_ints(a, "dim")?;
    let keepdim = cx.bool(a, "keepdim")?;
    let dim_arg = || dims.clone().map_or(Arg::None, Arg::Ints);
    let magnitude = cx.call1("aten::abs", vec![Arg::Tensor(x)])?;
    let reduce = |cx: &mut Cx, op: &str, v: ValueId| -> Result<ValueId, String> {
        match op {
            "aten::amax" | "aten::amin" => cx.call1(op, vec![Arg::Tensor(v), Arg::Ints(dims.clone().unwrap_or_default()), Arg::Bool(keepdim)]),
            _ => cx.call1("aten::sum.dim_IntList", vec![Arg::Tensor(v), dim_arg(), Arg::Bool(keepdim), Arg::None]),
        }
    };
    let y = if ord == f64::INFINITY {
        reduce(cx, "aten::amax", magnitude)?
    } else if ord == f64::NEG_INFINITY {
        reduce(cx, "aten::amin", magnitude)?
    } else if ord == 0.0 {
        let nonzero = cx.call1("aten::ne.Scalar", vec![Arg::Tensor(magnitude), Arg::Scalar(Scalar::Int(0))])?;
        let nonzero = cx.cast(nonzero, cx.meta(x).dtype)?;
        reduce(cx, "sum", nonzero)?
    } else if ord == 1.0 {
        reduce(cx, "sum", magnitude)?
    } else if ord == 2.0 {
        let squares = cx.call1("aten::mul.Tensor", vec![Arg::Tensor(magnitude), Arg::Tensor(magnitude)])?;
        let total = reduce(cx, "sum", squares)?;
        cx.call1("aten::sqrt", vec![Arg::Tensor(total)])?
    } else {
        let powers = cx.call1("aten::pow.Tensor_Scalar", vec![Arg::Tensor(magnitude), Arg::Scalar(Scalar::Double(ord))])?;
        let total = reduce(cx, "sum", powers)?;
        cx.call1("aten::pow.Tensor_Scalar", vec![Arg::Tensor(total), Arg::Scalar(Scalar::Double(1.0 / ord))])?
    };
    one(y)
}
