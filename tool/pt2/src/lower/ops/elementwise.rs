//! Elementwise ops: activations, arithmetic and comparisons (numbers given where ATen takes a
//! tensor become the op's `.Scalar` form or a rank-0 constant), `where`, `clamp`.

use rbuild_export::graph::Arg;
use rbuild_export::promote::{result_type, Operand as Promoted};
use rbuild_runtime::Scalar;

use super::{one, Call, Cx, OpResult};
use crate::lower::context::Operand;

/// `hardtanh(self, min_val, max_val)`; `relu6` is hardtanh to [0, 6].
pub(super) fn hardtanh(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let (lo, hi) = match c.key {
        "aten::relu6" => (Scalar::Int(0), Scalar::Int(6)),
        _ => (cx.scalar(&c.args, "min_val")?, cx.scalar(&c.args, "max_val")?),
    };
    one(cx.call1("aten::hardtanh", vec![Arg::Tensor(x), Arg::Scalar(lo), Arg::Scalar(hi)])?)
}

pub(super) fn leaky_relu(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let slope = cx.scalar(&c.args, "negative_slope")?;
    one(cx.call1("aten::leaky_relu", vec![Arg::Tensor(x), Arg::Scalar(slope)])?)
}

pub(super) fn gelu(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let approximate = cx.string(&c.args, "approximate")?;
    one(cx.call1("aten::gelu", vec![Arg::Tensor(x), Arg::Str(approximate)])?)
}

/// `clamp(self, min?, max?)` with numbers, `clamp_min`/`clamp_max`, and `clamp.Tensor`.
pub(super) fn clamp(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let scalar = |v: Option<Scalar>| v.map_or(Arg::None, Arg::Scalar);
    let args = match c.key {
        "aten::clamp_min" => vec![Arg::Tensor(x), Arg::Scalar(cx.scalar(&c.args, "min")?), Arg::None],
        "aten::clamp_max" => vec![Arg::Tensor(x), Arg::None, Arg::Scalar(cx.scalar(&c.args, "max")?)],
        "aten::clamp.Tensor" => {
            let bound = |name| cx.opt_tensor(&c.args, name).map(|t| t.map_or(Arg::None, Arg::Tensor));
            let (lo, hi) = (bound("min")?, bound("max")?);
            return one(cx.call1("aten::clamp.Tensor", vec![Arg::Tensor(x), lo, hi])?);
        }
        _ => vec![Arg::Tensor(x), scalar(cx.opt_scalar(&c.args, "min")?), scalar(cx.opt_scalar(&c.args, "max")?)],
    };
    one(cx.call1("aten::clamp", args)?)
}

/// The IR forms of a binary target: with a tensor second operand, with a number (None: the
/// number becomes a rank-0 tensor), and whether it takes `alpha`.
fn binary_forms(key: &str) -> (&'static str, Option<&'static str>, bool) {
    let name = key.split('.').next().unwrap_or(key);
    match name {
        "aten::add" => ("aten::add.Tensor", Some("aten::add.Scalar"), true),
        "aten::sub" => ("aten::sub.Tensor", Some("aten::sub.Scalar"), true),
        "aten::mul" => ("aten::mul.Tensor", Some("aten::mul.Scalar"), false),
        "aten::div" => ("aten::div.Tensor", Some("aten::div.Scalar"), false),
        "aten::pow" => ("aten::pow.Tensor_Tensor", Some("aten::pow.Tensor_Scalar"), false),
        "aten::eq" => ("aten::eq.Tensor", Some("aten::eq.Scalar"), false),
        "aten::ne" => ("aten::ne.Tensor", Some("aten::ne.Scalar"), false),
        "aten::lt" => ("aten::lt.Tensor", Some("aten::lt.Scalar"), false),
        "aten::le" => ("aten::le.Tensor", Some("aten::le.Scalar"), false),
        "aten::gt" => ("aten::gt.Tensor", Some("aten::gt.Scalar"), false),
        "aten::ge" => ("aten::ge.Tensor", Some("aten::ge.Scalar"), false),
        "aten::maximum" => ("aten::maximum", None, false),
        "aten::minimum" => ("aten::minimum", None, false),
        "aten::logical_and" => ("aten::logical_and", None, false),
        "aten::logical_or" => ("aten::logical_or", None, false),
        "aten::logical_xor" => ("aten::logical_xor", None, false),
        "aten::bitwise_and" | "aten::__and__" => ("aten::bitwise_and.Tensor", None, false),
        "aten::bitwise_or" | "aten::__or__" => ("aten::bitwise_or.Tensor", None, false),
        _ => ("aten::bitwise_xor.Tensor", None, false),
    }
}

pub(super) fn binary(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let (tensor_op, number_op, has_alpha) = binary_forms(c.key);
    let x = cx.tensor(&c.args, "self")?;
    // `exponent` is pow's name for the second operand.
    let other_name = if c.key.starts_with("aten::pow") { "exponent" } else { "other" };
    let other = cx.operand(&c.args, other_name)?;
    let alpha = if has_alpha { vec![Arg::Scalar(cx.scalar(&c.args, "alpha")?)] } else { vec![] };
    let (op, second) = match (other, number_op) {
        (Operand::Tensor(t), _) => (tensor_op, Arg::Tensor(t)),
        (Operand::Number(n), Some(op)) => (op, Arg::Scalar(n)),
        (Operand::Number(n), None) => (tensor_op, Arg::Tensor(super::direct::number_tensor(cx, n, &[x])?)),
    };
    let mut args = vec![Arg::Tensor(x), second];
    args.extend(alpha);
    one(cx.call1(op, args)?)
}

/// `where(condition, self, other)`, either branch possibly a number.
pub(super) fn where_self(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let cond = cx.tensor(&c.args, "condition")?;
    let (a, b) = (cx.operand(&c.args, "self")?, cx.operand(&c.args, "other")?);
    let promoted = |cx: &Cx, o: &Operand| match *o {
        Operand::Tensor(t) => Promoted::Tensor(cx.meta(t).dtype, cx.meta(t).rank()),
        Operand::Number(n) => Promoted::Number(n),
    };
    let dtype = result_type(&[promoted(cx, &a), promoted(cx, &b)])?;
    let mut branch = |o: Operand| match o {
        Operand::Tensor(t) => Ok(t),
        Operand::Number(n) => cx.scalar_constant(n, dtype),
    };
    let (a, b) = (branch(a)?, branch(b)?);
    one(cx.call1("aten::where.self", vec![Arg::Tensor(cond), Arg::Tensor(a), Arg::Tensor(b)])?)
}

/// `masked_fill.Tensor(self, mask, value)` (a rank-0 value tensor) = `where(mask, value, self)`
/// in self's dtype; ExecuTorch has the `.Scalar` form only.
pub(super) fn masked_fill_tensor(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let (x, mask, value) = (cx.tensor(&c.args, "self")?, cx.tensor(&c.args, "mask")?, cx.tensor(&c.args, "value")?);
    if cx.meta(value).rank() != 0 {
        return Err(format!("value must be a rank-0 tensor, got {:?}", cx.meta(value).shape));
    }
    let fill = cx.cast(value, cx.meta(x).dtype)?;
    one(cx.call1("aten::where.self", vec![Arg::Tensor(mask), Arg::Tensor(fill), Arg::Tensor(x)])?)
}

/// `isfinite(self)`, as ExecuTorch decomposes it: not NaN (`x == x`) and not infinite
/// (`|x| != inf`); integers and bools are always finite.
pub(super) fn isfinite(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    if !cx.meta(x).dtype.is_floating() {
        let args = vec![Arg::Tensor(x), Arg::Scalar(Scalar::Bool(true)), Arg::ScalarType(rbuild_runtime::ScalarType::Bool), Arg::None, Arg::None, Arg::None, Arg::None];
        return one(cx.call1("aten::full_like", args)?);
    }
    let not_nan = cx.call1("aten::eq.Tensor", vec![Arg::Tensor(x), Arg::Tensor(x)])?;
    let magnitude = cx.call1("aten::abs", vec![Arg::Tensor(x)])?;
    let bounded = cx.call1("aten::ne.Scalar", vec![Arg::Tensor(magnitude), Arg::Scalar(Scalar::Double(f64::INFINITY))])?;
    one(cx.call1("aten::logical_and", vec![Arg::Tensor(not_nan), Arg::Tensor(bounded)])?)
}
