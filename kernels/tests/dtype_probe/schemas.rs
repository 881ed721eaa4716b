//! The elementwise operators the probe calls from their schemas.

use super::R;

/// PyTorch's schemas of the probed operators (`torch.ops.<ns>.<op>.<overload>._schema`).
pub const PROBED_SCHEMAS: &[&str] = &[
    "aten::_conj_physical.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::abs.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::acos.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::acosh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::add.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    "aten::alias_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::any.all_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::asin.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::asinh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::atan.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::atan2.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::atanh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_and.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_and.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_left_shift.Tensor_Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_left_shift.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_not.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_or.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_or.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_right_shift.Tensor_Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_right_shift.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_xor.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::bitwise_xor.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::ceil.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::cos.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::cosh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::detach_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::div.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::div.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::eq.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::eq.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::erf.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::exp.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::expm1.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::floor.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::floor_divide.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::fmod.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::fmod.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::ge.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::ge.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::gt.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::gt.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::hardsigmoid.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::hardswish.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::isinf.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::isnan.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::le.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::le.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::lift_fresh_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::log.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::log10.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::log1p.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::log2.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::logical_and.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::logical_not.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::logical_or.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::logical_xor.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::lt.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::lt.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::max.unary_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::maximum.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::min.unary_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::minimum.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::mul.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::ne.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::ne.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::neg.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::nonzero.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::reciprocal.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::remainder.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::remainder.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::round.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::rsqrt.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::rsub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::sigmoid.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::sign.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::silu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::sin.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::sinh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::sqrt.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::squeeze_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::sub.Scalar_out(Tensor self, Scalar other, Scalar alpha=1, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::sub.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    "aten::t_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::tan.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::tanh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::trunc.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "aten::view_as_real_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "et_copy::_d2h_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "et_copy::_h2d_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
];

/// The recipe for `schema` if it has one of the probed shapes `(Tensor self, *, out)`,
/// `(Tensor self, Tensor other, *, out)`, `(Tensor self, Scalar other, *, out)`, optionally
/// with `Scalar alpha=1`: ([2, 3] inputs, the Scalar tried as int, float and bool, alpha 1).
pub fn probed_recipe(schema: &str) -> Option<(&str, Vec<R>)> {
    let (op, rest) = schema.split_once('(')?;
    let (params, ret) = rest.rsplit_once(") -> ")?;
    if ret != "Tensor(a!)" {
        return None;
    }
    let mut recipe = Vec::new();
    let mut shape = String::new();
    for p in params.split(", ").filter(|p| *p != "*") {
        let (r, letter) = match p {
            "Tensor self" => (R::X(&[2, 3]), 'T'),
            "Tensor other" => (R::Like(&[2, 3]), 'T'),
            "Scalar other" => (R::S, 'S'),
            "Scalar alpha=1" => (R::I(1), 'A'),
            "Tensor(a!) out" => (out(op), 'O'),
            _ => return None,
        };
        recipe.push(r);
        shape.push(letter);
    }
    if !["TO", "TTO", "TSO", "TTAO", "TSAO"].contains(&shape.as_str()) {
        return None;
    }
    recipe.push(R::Ret(recipe.len() - 1));
    Some((op, recipe))
}

/// The out of a [2, 3] input's result.
fn out(op: &str) -> R {
    match op {
        "aten::max.unary_out" | "aten::min.unary_out" | "aten::any.all_out" => R::Os(&[]),
        "aten::t_copy.out" => R::Os(&[3, 2]),
        "aten::view_as_real_copy.out" => R::Os(&[2, 3, 2]),
        "aten::nonzero.out" => R::O(2),
        _ => R::Os(&[2, 3]),
    }
}
