//! Shape and dtype inference of elementwise ops: operands broadcast together and the result
//! dtype follows ATen's type promotion ([`crate::promote`]).

use rbuild_runtime::{Scalar, ScalarType};

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, TensorMeta};
use crate::promote::{result_type, to_float, Operand};
use crate::shape::{broadcast, require_float, scalar, tensor};

/// Output metas of the elementwise `op`, or None when `op` is not one of them.
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg]) -> Option<Result<Vec<TensorMeta>>> {
    let r = match op {
        "aten::cos" | "aten::sin" | "aten::exp" | "aten::tanh" | "aten::erf" | "aten::sqrt" | "aten::rsqrt" | "aten::log"
        | "aten::reciprocal" | "aten::sigmoid" | "aten::acos" | "aten::acosh" | "aten::asin" | "aten::asinh" | "aten::atan"
        | "aten::atanh" | "aten::cosh" | "aten::sinh" | "aten::tan" | "aten::expm1" | "aten::log10" | "aten::log1p"
        | "aten::log2" | "aten::logit" => float_unary(g, op, args),
        "aten::abs" | "aten::floor" | "aten::ceil" | "aten::round" | "aten::trunc" => unary_same(g, op, args, false),
        "aten::silu" | "aten::leaky_relu" | "aten::elu" => unary_same(g, op, args, true),
        "aten::sign" => tensor(g, op, args, 0).map(|x| vec![x.clone()]),
        "aten::bitwise_not" => tensor(g, op, args, 0).and_then(|x| {
            if !x.dtype.is_integral(true) {
                return Err(shape_err(op, format!("needs an integer or bool tensor, got {}", x.dtype)));
            }
            Ok(vec![x.clone()])
        }),
        "aten::isinf" | "aten::isnan" => tensor(g, op, args, 0).map(|x| vec![TensorMeta::new(ScalarType::Bool, x.shape.clone())]),
        "aten::glu" => glu(g, op, args),
        "aten::add.Tensor" | "aten::sub.Tensor" | "aten::mul.Tensor" | "aten::div.Tensor" | "aten::minimum" | "aten::maximum"
        | "aten::pow.Tensor_Tensor" | "aten::bitwise_and.Tensor" | "aten::bitwise_or.Tensor" | "aten::bitwise_xor.Tensor"
        | "aten::atan2" | "aten::fmod.Tensor" | "aten::remainder.Tensor" | "aten::floor_divide" | "aten::div.Tensor_mode"
        | "aten::bitwise_left_shift.Tensor" | "aten::bitwise_right_shift.Tensor" => binary(g, op, args, Second::Tensor),
        "aten::add.Scalar" | "aten::sub.Scalar" | "aten::mul.Scalar" | "aten::div.Scalar" | "aten::pow.Tensor_Scalar"
        | "aten::fmod.Scalar" | "aten::remainder.Scalar" | "aten::div.Scalar_mode" | "aten::bitwise_and.Scalar"
        | "aten::bitwise_or.Scalar" | "aten::bitwise_xor.Scalar" | "aten::bitwise_left_shift.Tensor_Scalar"
        | "aten::bitwise_right_shift.Tensor_Scalar" | "aten::rsub.Scalar" => binary(g, op, args, Second::Number),
        "aten::pow.Scalar" => pow_scalar(g, op, args),
        "aten::masked_fill.Scalar" => masked_fill(g, op, args),
        "aten::eq.Tensor" | "aten::ne.Tensor" | "aten::lt.Tensor" | "aten::le.Tensor" | "aten::gt.Tensor" | "aten::ge.Tensor"
        | "aten::logical_and" | "aten::logical_or" | "aten::logical_xor" => {
            broadcast_all(g, op, args, &[0, 1]).map(|shape| vec![TensorMeta::new(ScalarType::Bool, shape)])
        }
        "aten::eq.Scalar" | "aten::ne.Scalar" | "aten::lt.Scalar" | "aten::le.Scalar" | "aten::gt.Scalar" | "aten::ge.Scalar" => {
            scalar(op, args, 1).and_then(|_| tensor(g, op, args, 0)).map(|x| vec![TensorMeta::new(ScalarType::Bool, x.shape.clone())])
        }
        "aten::logical_not" => tensor(g, op, args, 0).map(|x| vec![TensorMeta::new(ScalarType::Bool, x.shape.clone())]),
        "aten::where.self" => where_self(g, op, args),
        "aten::clamp" | "aten::clamp.Tensor" => clamp(g, op, args),
        _ => return None,
    };
    Some(r)
}

fn unary_same(g: &Graph, op: &str, args: &[Arg], float_only: bool) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    if float_only {
        require_float(op, x)?;
    } else if x.dtype == ScalarType::Bool {
        return Err(shape_err(op, "is not defined for bool tensors"));
    }
    if op == "aten::leaky_relu" {
        scalar(op, args, 1)?;
    }
    Ok(vec![x.clone()])
}

/// The broadcast shape of the tensor arguments at `indices` (absent optional ones skipped).
fn broadcast_all(g: &Graph, op: &str, args: &[Arg], indices: &[usize]) -> Result<Vec<Dim>> {
    let mut shape: Vec<Dim> = Vec::new();
    for &i in indices {
        match args.get(i) {
            Some(Arg::None) => {}
            _ => shape = broadcast(op, &shape, &tensor(g, op, args, i)?.shape)?,
        }
    }
    Ok(shape)
}

fn operand(g: &Graph, op: &str, args: &[Arg], i: usize) -> Result<Operand> {
    let m = tensor(g, op, args, i)?;
    Ok(Operand::Tensor(m.dtype, m.rank()))
}

fn promoted(op: &str, operands: &[Operand]) -> Result<ScalarType> {
    result_type(operands).map_err(|e| shape_err(op, e))
}

/// Whether the second operand of a binary op is a tensor or a number.
#[derive(PartialEq)]
enum Second {
    Tensor,
    Number,
}

fn binary(g: &Graph, op: &str, args: &[Arg], second: Second) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let (other, shape) = match second {
        Second::Tensor => (operand(g, op, args, 1)?, broadcast_all(g, op, args, &[0, 1])?),
        Second::Number => (Operand::Number(scalar(op, args, 1)?), x.shape.clone()),
    };
    let dtype = promoted(op, &[Operand::Tensor(x.dtype, x.rank()), other])?;
    let is_bool = |o: &Operand| matches!(o, Operand::Tensor(ScalarType::Bool, _) | Operand::Number(Scalar::Bool(_)));
    let name = op.split('.').next().unwrap_or(op);
    let dtype = match name {
        // A rounding mode keeps integers integral; plain division is true division.
        "aten::div" if matches!(args.get(2), Some(Arg::Str(_))) => dtype,
        "aten::div" | "aten::atan2" => to_float(dtype),
        "aten::sub" | "aten::rsub" if x.dtype == ScalarType::Bool || is_bool(&other) => {
            return Err(shape_err(op, "subtraction with a bool operand is not supported (use logical_not to invert a mask)"))
        }
        "aten::bitwise_and" | "aten::bitwise_or" | "aten::bitwise_xor" if !dtype.is_integral(true) => {
            return Err(shape_err(op, format!("needs integer or bool operands, got {dtype}")))
        }
        "aten::bitwise_left_shift" | "aten::bitwise_right_shift" if !dtype.is_integral(false) => {
            return Err(shape_err(op, format!("needs integer operands, got {dtype}")))
        }
        _ => dtype,
    };
    Ok(vec![TensorMeta::new(dtype, shape)])
}

fn where_self(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let cond = tensor(g, op, args, 0)?;
    if !matches!(cond.dtype, ScalarType::Bool | ScalarType::Byte) {
        return Err(shape_err(op, format!("condition must be bool, got {}", cond.dtype)));
    }
    let dtype = promoted(op, &[operand(g, op, args, 1)?, operand(g, op, args, 2)?])?;
    Ok(vec![TensorMeta::new(dtype, broadcast_all(g, op, args, &[0, 1, 2])?)])
}

/// `clamp(self, min?, max?)` with numbers or (`clamp.Tensor`) tensors: bounds take part in the
/// promotion, so an integer tensor clamped to 0.5 becomes float.
fn clamp(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let mut operands = vec![Operand::Tensor(x.dtype, x.rank())];
    for i in [1, 2] {
        match args.get(i) {
            Some(Arg::None) => {}
            _ if op == "aten::clamp" => operands.push(Operand::Number(scalar(op, args, i)?)),
            _ => operands.push(operand(g, op, args, i)?),
        }
    }
    if operands.len() == 1 {
        return Err(shape_err(op, "at least one of min and max must be given"));
    }
    let dtype = promoted(op, &operands)?;
    let shape = if op == "aten::clamp" { x.shape.clone() } else { broadcast_all(g, op, args, &[0, 1, 2])? };
    Ok(vec![TensorMeta::new(dtype, shape)])
}

/// Float math of one tensor: integer and bool inputs give float32, as in ATen.
fn float_unary(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    Ok(vec![TensorMeta::new(to_float(x.dtype), x.shape.clone())])
}

/// `glu(self, dim)`: the first half of `dim` times the sigmoid of the second half.
fn glu(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    require_float(op, x)?;
    let d = crate::shape::norm_dim(op, crate::shape::int(op, args, 1)?, x.rank())?;
    let mut shape = x.shape.clone();
    match x.shape[d] {
        Dim::Fixed(n) if n % 2 == 0 => shape[d] = Dim::Fixed(n / 2),
        other => return Err(shape_err(op, format!("dim {d} of {:?} must have an even, fixed size, got {other:?}", x.shape))),
    }
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `pow.Scalar(self: number, exponent: tensor)`.
fn pow_scalar(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let base = scalar(op, args, 0)?;
    let e = tensor(g, op, args, 1)?;
    let dtype = promoted(op, &[Operand::Number(base), Operand::Tensor(e.dtype, e.rank())])?;
    Ok(vec![TensorMeta::new(dtype, e.shape.clone())])
}

/// `masked_fill(self, mask, value)`: self's dtype over the broadcast of self and the bool mask.
fn masked_fill(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (x, mask) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
    if mask.dtype != ScalarType::Bool {
        return Err(shape_err(op, format!("mask must be bool, got {}", mask.dtype)));
    }
    scalar(op, args, 2)?;
    Ok(vec![TensorMeta::new(x.dtype, broadcast(op, &x.shape, &mask.shape)?)])
}
