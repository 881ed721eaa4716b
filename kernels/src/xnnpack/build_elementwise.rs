//! Elementwise nodes → ops: binary arithmetic with broadcasting, unary math, Clamp, Convert
//! (between float formats, float ↔ 8-bit quantized, 8-bit requantization), Copy and Softmax.
//! Float nodes run on one float type (fp32; fp16/bf16 computed in f32 and rounded); 8-bit
//! quantized ones on qint8 or quint8 (quint8 in the shifted int8 form).

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::{NodeKind, XnnDatatype, XnnGraph};

use super::compile::{is_float, is_q8, qparams, qrange, range, same_float, same_type, value};
use super::ops::{BinOp, Broadcast, UnOp};
use super::plan::{Op, Round};
use super::rewrite::Node;
use crate::nhwc::qs8::{self, AddQs8, MulQs8, QParams, RequantizeQs8};

pub fn binary(graph: &XnnGraph, node: &Node, kind: NodeKind, [a, b, out]: [u32; 3], round: Option<Round>) -> Result<Op, String> {
    use NodeKind as K;
    let (va, vb, vy) = (value(graph, a), value(graph, b), value(graph, out));
    let same = va.datatype == vb.datatype && va.datatype == vy.datatype;
    if !same {
        return Err(format!("datatypes {}/{}/{} are not supported (all three must match)", va.datatype.name(), vb.datatype.name(), vy.datatype.name()));
    }
    let bc = Broadcast::new(&va.dims, &vb.dims, &vy.dims)?;
    if is_float(va) {
        let op = match kind {
            K::Add => BinOp::Add,
            K::Subtract => BinOp::Sub,
            K::Multiply => BinOp::Mul,
            K::Div => BinOp::Div,
            K::Minimum => BinOp::Min,
            K::Maximum => BinOp::Max,
            K::PReLU => BinOp::Prelu,
            k => return Err(format!("node type {} is not supported", k.name())),
        };
        let (min, max) = range(node.range, round);
        return Ok(Op::BinaryF32 { op, bc, min, max });
    }
    if is_q8(va) {
        let (qa, qb, qy) = (qparams(a, va)?, qparams(b, vb)?, qparams(out, vy)?);
        let (lo, hi) = qrange(node.range, qy);
        return match kind {
            K::Add => Ok(Op::AddQs8 { op: AddQs8::new(qa, qb, qy, lo, hi)?, bc }),
            K::Subtract => Ok(Op::AddQs8 { op: AddQs8::new_subtract(qa, qb, qy, lo, hi)?, bc }),
            K::Multiply => Ok(Op::MulQs8 { op: MulQs8::new(qa, qb, qy, lo, hi)?, bc }),
            k => Err(format!("node type {} on {} values is not supported", k.name(), va.datatype.name())),
        };
    }
    Err(format!("datatype {} is not supported", va.datatype.name()))
}

/// The float function of a unary node kind (Clamp's range is applied separately).
fn unary_op(kind: NodeKind) -> Option<UnOp> {
    use NodeKind as K;
    Some(match kind {
        K::Clamp => UnOp::Identity,
        K::Hardswish => UnOp::Hardswish,
        K::Sigmoid => UnOp::Sigmoid,
        K::Tanh => UnOp::Tanh,
        K::Gelu => UnOp::Gelu,
        K::Abs => UnOp::Abs,
        K::Negate => UnOp::Neg,
        K::Square => UnOp::Square,
        K::SquareRoot => UnOp::Sqrt,
        K::ReciprocalSquareRoot => UnOp::Rsqrt,
        K::Floor => UnOp::Floor,
        K::Ceiling => UnOp::Ceil,
        K::Log => UnOp::Log,
        K::Exp => UnOp::Exp,
        K::Sin => UnOp::Sin,
        K::Cos => UnOp::Cos,
        _ => return None,
    })
}

/// An 8-bit node computing a float function: a 256-entry table of `dequantize → op (clamped
/// to [min, max]) → quantize` (within a quantization step of XNNPACK's int8 kernels).
pub fn table(op: UnOp, (min, max): (f32, f32), qi: QParams, qo: QParams) -> Result<Op, String> {
    let q: Vec<i8> = (i8::MIN..=i8::MAX).collect();
    let mut x = vec![0.0f32; 256];
    qs8::dequantize_f32(&q, qi, &mut x)?;
    let mut y = vec![0.0f32; 256];
    super::ops::unary_f32(op, &x, &mut y, min, max);
    let mut out = vec![0i8; 256];
    qs8::quantize_f32(&y, qo, &mut out)?;
    Ok(Op::TableI8(out))
}

/// A unary function node on float values, or on 8-bit values of one datatype (by table).
fn elementwise(graph: &XnnGraph, node: &Node, op: UnOp, input: u32, output: u32, round: Option<Round>) -> Result<Op, String> {
    let (x, y) = (value(graph, input), value(graph, output));
    if is_q8(x) && x.datatype == y.datatype {
        if x.dims != y.dims {
            return Err(format!("input dims {:?} differ from output dims {:?}", x.dims, y.dims));
        }
        return table(op, range(node.range, None), qparams(input, x)?, qparams(output, y)?);
    }
    same_float(input, x, output, y)?;
    let (min, max) = range(node.range, round);
    Ok(Op::UnaryF32 { op, min, max })
}

pub fn unary(graph: &XnnGraph, node: &Node, kind: NodeKind, input: u32, output: u32, round: Option<Round>) -> Result<Op, String> {
    use NodeKind as K;
    let (x, y) = (value(graph, input), value(graph, output));
    match kind {
        K::Convert => convert(graph, input, output),
        K::Copy => {
            same_type(input, x, output, y)?;
            if x.numel() != y.numel() {
                return Err(format!("copy of {:?} into {:?}", x.dims, y.dims));
            }
            Ok(Op::Copy)
        }
        K::Clamp if is_q8(x) && x.datatype == y.datatype && x.quant != y.quant => {
            // Other output parameters: a requantizing table, as XNNPACK's quantized unary ops.
            elementwise(graph, node, UnOp::Identity, input, output, round)
        }
        K::Clamp if is_q8(x) => {
            same_type(input, x, output, y)?;
            if x.dims != y.dims {
                return Err(format!("input dims {:?} differ from output dims {:?}", x.dims, y.dims));
            }
            let (lo, hi) = qrange(node.range, qparams(output, y)?);
            Ok(Op::ClampI8 { lo, hi })
        }
        K::Softmax => {
            same_float(input, x, output, y)?;
            let cols = *x.dims.last().unwrap_or(&1);
            Ok(Op::SoftmaxF32 { rows: if cols == 0 { 0 } else { x.numel() / cols }, cols })
        }
        k => match unary_op(k) {
            Some(op) => elementwise(graph, node, op, input, output, round),
            None => Err(format!("node type {} is not supported by rbuild's XNNPACK runtime", k.name())),
        },
    }
}

/// ELU (`alpha`) and LeakyReLU (`negative_slope`).
pub fn unary_param(graph: &XnnGraph, node: &Node, kind: NodeKind, param: f32, input: u32, output: u32, round: Option<Round>) -> Result<Op, String> {
    if !param.is_finite() {
        return Err(format!("parameter {param} must be finite"));
    }
    let op = if kind == NodeKind::Elu { UnOp::Elu(param) } else { UnOp::LeakyRelu(param) };
    elementwise(graph, node, op, input, output, round)
}

/// `Convert`: float ↔ float (rounding to the narrower format), float → 8-bit (quantize),
/// 8-bit → float (dequantize), 8-bit → 8-bit (requantize). Float → qdint8 was folded into its
/// readers before building.
fn convert(graph: &XnnGraph, input: u32, output: u32) -> Result<Op, String> {
    let (x, y) = (value(graph, input), value(graph, output));
    if x.dims != y.dims {
        return Err(format!("input dims {:?} differ from output dims {:?}", x.dims, y.dims));
    }
    match (is_float(x), is_q8(x), is_float(y), is_q8(y)) {
        (true, _, true, _) => Ok(Op::Copy),
        (true, _, _, true) => Ok(Op::Quantize(qparams(output, y)?)),
        (_, true, true, _) => Ok(Op::Dequantize(qparams(input, x)?)),
        (_, true, _, true) => Ok(Op::Requantize(RequantizeQs8::new(qparams(input, x)?, qparams(output, y)?)?)),
        _ if y.datatype == XnnDatatype::QdInt8 => Err(format!("conversion of {} to qdint8 is not supported", x.datatype.name())),
        _ => Err(format!("conversion from {} to {} is not supported", x.datatype.name(), y.datatype.name())),
    }
}
