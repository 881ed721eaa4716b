//! Reductions the IR has under another form.

use rbuild_export::graph::Arg;

use super::{one, Call, Cx, OpResult};

/// `sum(self, dtype)` over every element: ExecuTorch's `sum.IntList_out` with no dims.
pub(super) fn sum_all(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let dtype = cx.dtype(&c.args, "dtype")?.map_or(Arg::None, Arg::ScalarType);
    one(cx.call1("aten::sum.dim_IntList", vec![Arg::Tensor(x), Arg::None, Arg::Bool(false), dtype])?)
}
