//! The operator set and its attribute schemas.
//!
//! On the wire an op is a code plus a list of typed attributes ([`Attr`]); each code has a fixed
//! schema (attribute names and kinds, in order) in [`SCHEMAS`], so a reader can reject a wrong
//! attribute count or kind by name before building the typed [`Op`].

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Wire kinds of attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    Int = 1,
    Float = 2,
    Bool = 3,
    Ints = 4,
}

impl AttrKind {
    pub fn from_code(code: u8) -> Option<AttrKind> {
        [AttrKind::Int, AttrKind::Float, AttrKind::Bool, AttrKind::Ints].into_iter().find(|k| *k as u8 == code)
    }
    pub fn name(self) -> &'static str {
        match self {
            AttrKind::Int => "int",
            AttrKind::Float => "float",
            AttrKind::Bool => "bool",
            AttrKind::Ints => "ints",
        }
    }
}

/// One encoded attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Int(i64),
    Float(f32),
    Bool(bool),
    Ints(Vec<i64>),
}

impl Attr {
    pub fn kind(&self) -> AttrKind {
        match self {
            Attr::Int(_) => AttrKind::Int,
            Attr::Float(_) => AttrKind::Float,
            Attr::Bool(_) => AttrKind::Bool,
            Attr::Ints(_) => AttrKind::Ints,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeluApproximation {
    /// `x/2 * (1 + erf(x/sqrt(2)))`.
    Erf = 0,
    /// `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`.
    Tanh = 1,
}

/// Elementwise binary ops; operands broadcast NumPy-style (trailing dims aligned, size-1 dims stretch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add = 0,
    Sub = 1,
    Mul = 2,
    Div = 3,
    Max = 4,
    Min = 5,
    Pow = 6,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    Neg = 0,
    Exp = 1,
    Log = 2,
    Sqrt = 3,
    Rsqrt = 4,
    Tanh = 5,
    Sigmoid = 6,
    Relu = 7,
    Abs = 8,
    Reciprocal = 9,
    Sin = 10,
    Cos = 11,
}

const BINARY_OPS: [BinaryOp; 7] =
    [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Max, BinaryOp::Min, BinaryOp::Pow];
const UNARY_OPS: [UnaryOp; 12] = [
    UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Tanh,
    UnaryOp::Sigmoid, UnaryOp::Relu, UnaryOp::Abs, UnaryOp::Reciprocal, UnaryOp::Sin, UnaryOp::Cos,
];

/// The typed operator. Inputs/outputs are in [`super::OpNode`]; arities are in [`Op::arity`].
/// Dims (`dim`, `dim0`, ...) may be negative (counted from the end, as in PyTorch).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `y = x @ W^T (+ b)`; inputs `x, w[, b]`. `w` is `[out, in]`, or `[in, out]` when
    /// `weight_transposed`. A quantized `w` carries its group scales in its metadata.
    Linear { weight_transposed: bool },
    /// Batched `a @ b` over the last two dims; inputs `a, b`.
    MatMul,
    /// `x [N, C_in, L]`, `w [C_out, C_in/groups, K]`, optional `b [C_out]`.
    Conv1d { stride: u32, padding: u32, dilation: u32, groups: u32 },
    /// Over the last dim; inputs `x` or `x, weight, bias` when `affine`.
    LayerNorm { eps: f32, affine: bool },
    /// Over the last dim; inputs `x, weight`.
    RmsNorm { eps: f32 },
    Gelu { approximation: GeluApproximation },
    Silu,
    Softmax { dim: i64 },
    /// Scaled dot-product attention. Inputs `q, k, v[, position]`: `q [B, Lq, num_heads, D]`,
    /// `k, v [B, Lk, num_kv_heads, D]`, output like `q`. With `position` (an i32/i64 scalar,
    /// the cache row of q's first row) `k, v` are caches and only rows `< position + Lq` are
    /// attended; `causal` masks key rows after each query's own row.
    Attention { causal: bool, scale: f32, num_heads: u32, num_kv_heads: u32 },
    Binary(BinaryOp),
    Unary(UnaryOp),
    /// Inputs `table [V, D]` (float or quantized), `indices` (i32/i64); output `[..indices, D]`.
    Embedding,
    /// Rotary embedding over the last dim (`head_dim` wide) of `x [B, L, H, head_dim]`; inputs
    /// `x, position` (the row of x's first row). `interleaved` pairs (2i, 2i+1), else (i, i+D/2).
    Rope { theta: f32, head_dim: u32, interleaved: bool },
    /// Same elements, the output value's shape.
    Reshape,
    Permute { dims: Vec<u8> },
    Transpose { dim0: i64, dim1: i64 },
    /// `end` is clamped to the dim's size at run time (i64::MAX means "to the end").
    Slice { dim: i64, start: i64, end: i64, step: i64 },
    /// Concatenates all inputs along `dim`.
    Cat { dim: i64 },
    /// Converts to the output value's dtype.
    Cast,
    /// Writes `rows` into the state tensor `cache` along `seq_dim` starting at `position`;
    /// inputs `cache, rows, position`; no outputs (the state is updated in place).
    CacheUpdate { seq_dim: i64 },
    /// Runs the next `count` ops only when the integer scalar `flag` (its one element) is 0;
    /// inputs `flag`; no outputs. What a guarded op produces is used only inside the guarded
    /// range (or written to state), so skipping it leaves nothing undefined: e.g. cross-attention
    /// keys/values projected into state once per audio window, at position 0.
    IfZero { count: u32 },
    /// `out[i] = position + i` for `i < L` (the output's one dim, often a symbol); inputs
    /// `position` (an i32/i64 scalar): the position ids of a call's rows (learned position
    /// tables gathered with `embedding`).
    Positions,
}

/// Wire schema of one op code.
pub(crate) struct OpSchema {
    pub code: u16,
    pub name: &'static str,
    pub attrs: &'static [(&'static str, AttrKind)],
}

use AttrKind::{Bool as B, Float as F, Int as I, Ints as IS};

pub(crate) const SCHEMAS: &[OpSchema] = &[
    OpSchema { code: 1, name: "linear", attrs: &[("weight_transposed", B)] },
    OpSchema { code: 2, name: "matmul", attrs: &[] },
    OpSchema { code: 3, name: "conv1d", attrs: &[("stride", I), ("padding", I), ("dilation", I), ("groups", I)] },
    OpSchema { code: 4, name: "layer_norm", attrs: &[("eps", F), ("affine", B)] },
    OpSchema { code: 5, name: "rms_norm", attrs: &[("eps", F)] },
    OpSchema { code: 6, name: "gelu", attrs: &[("approximation", I)] },
    OpSchema { code: 7, name: "silu", attrs: &[] },
    OpSchema { code: 8, name: "softmax", attrs: &[("dim", I)] },
    OpSchema { code: 9, name: "attention", attrs: &[("causal", B), ("scale", F), ("num_heads", I), ("num_kv_heads", I)] },
    OpSchema { code: 10, name: "binary", attrs: &[("op", I)] },
    OpSchema { code: 11, name: "unary", attrs: &[("op", I)] },
    OpSchema { code: 12, name: "embedding", attrs: &[] },
    OpSchema { code: 13, name: "rope", attrs: &[("theta", F), ("head_dim", I), ("interleaved", B)] },
    OpSchema { code: 14, name: "reshape", attrs: &[] },
    OpSchema { code: 15, name: "permute", attrs: &[("dims", IS)] },
    OpSchema { code: 16, name: "transpose", attrs: &[("dim0", I), ("dim1", I)] },
    OpSchema { code: 17, name: "slice", attrs: &[("dim", I), ("start", I), ("end", I), ("step", I)] },
    OpSchema { code: 18, name: "cat", attrs: &[("dim", I)] },
    OpSchema { code: 19, name: "cast", attrs: &[] },
    OpSchema { code: 20, name: "cache_update", attrs: &[("seq_dim", I)] },
    OpSchema { code: 21, name: "if_zero", attrs: &[("count", I)] },
    OpSchema { code: 22, name: "positions", attrs: &[] },
];

pub(crate) fn schema(code: u16) -> Option<&'static OpSchema> {
    SCHEMAS.iter().find(|s| s.code == code)
}

impl Op {
    pub fn code(&self) -> u16 {
        match self {
            Op::Linear { .. } => 1,
            Op::MatMul => 2,
            Op::Conv1d { .. } => 3,
            Op::LayerNorm { .. } => 4,
            Op::RmsNorm { .. } => 5,
            Op::Gelu { .. } => 6,
            Op::Silu => 7,
            Op::Softmax { .. } => 8,
            Op::Attention { .. } => 9,
            Op::Binary(_) => 10,
            Op::Unary(_) => 11,
            Op::Embedding => 12,
            Op::Rope { .. } => 13,
            Op::Reshape => 14,
            Op::Permute { .. } => 15,
            Op::Transpose { .. } => 16,
            Op::Slice { .. } => 17,
            Op::Cat { .. } => 18,
            Op::Cast => 19,
            Op::CacheUpdate { .. } => 20,
            Op::IfZero { .. } => 21,
            Op::Positions => 22,
        }
    }

    pub fn name(&self) -> &'static str {
        schema(self.code()).map_or("?", |s| s.name)
    }

    /// `(min inputs, max inputs, outputs)`.
    pub fn arity(&self) -> (usize, usize, usize) {
        match self {
            Op::Linear { .. } | Op::Conv1d { .. } => (2, 3, 1),
            Op::LayerNorm { affine: true, .. } => (3, 3, 1),
            Op::LayerNorm { affine: false, .. } => (1, 1, 1),
            Op::MatMul | Op::RmsNorm { .. } | Op::Binary(_) | Op::Embedding | Op::Rope { .. } => (2, 2, 1),
            Op::Attention { .. } => (3, 4, 1),
            Op::Cat { .. } => (1, u8::MAX as usize, 1),
            Op::CacheUpdate { .. } => (3, 3, 0),
            Op::IfZero { .. } => (1, 1, 0),
            Op::Positions => (1, 1, 1),
            Op::Gelu { .. } | Op::Silu | Op::Softmax { .. } | Op::Unary(_) | Op::Reshape | Op::Permute { .. }
            | Op::Transpose { .. } | Op::Slice { .. } | Op::Cast => (1, 1, 1),
        }
    }

    /// The wire attributes, in schema order.
    pub fn attrs(&self) -> Vec<Attr> {
        use Attr::{Bool, Float, Int, Ints};
        match self {
            Op::Linear { weight_transposed } => alloc::vec![Bool(*weight_transposed)],
            Op::Conv1d { stride, padding, dilation, groups } => {
                alloc::vec![Int(*stride as i64), Int(*padding as i64), Int(*dilation as i64), Int(*groups as i64)]
            }
            Op::LayerNorm { eps, affine } => alloc::vec![Float(*eps), Bool(*affine)],
            Op::RmsNorm { eps } => alloc::vec![Float(*eps)],
            Op::Gelu { approximation } => alloc::vec![Int(*approximation as i64)],
            Op::Softmax { dim } | Op::Cat { dim } => alloc::vec![Int(*dim)],
            Op::Attention { causal, scale, num_heads, num_kv_heads } => {
                alloc::vec![Bool(*causal), Float(*scale), Int(*num_heads as i64), Int(*num_kv_heads as i64)]
            }
            Op::Binary(op) => alloc::vec![Int(*op as i64)],
            Op::Unary(op) => alloc::vec![Int(*op as i64)],
            Op::Rope { theta, head_dim, interleaved } => alloc::vec![Float(*theta), Int(*head_dim as i64), Bool(*interleaved)],
            Op::Permute { dims } => alloc::vec![Ints(dims.iter().map(|&d| d as i64).collect())],
            Op::Transpose { dim0, dim1 } => alloc::vec![Int(*dim0), Int(*dim1)],
            Op::Slice { dim, start, end, step } => alloc::vec![Int(*dim), Int(*start), Int(*end), Int(*step)],
            Op::CacheUpdate { seq_dim } => alloc::vec![Int(*seq_dim)],
            Op::IfZero { count } => alloc::vec![Int(*count as i64)],
            Op::MatMul | Op::Silu | Op::Embedding | Op::Reshape | Op::Cast | Op::Positions => Vec::new(),
        }
    }

    /// Builds the typed op from a code and its attributes. The error names the attribute.
    pub fn decode(code: u16, attrs: &[Attr]) -> Result<Op, String> {
        let schema = schema(code).ok_or_else(|| format!("unknown op code {code}"))?;
        let name = schema.name;
        if attrs.len() != schema.attrs.len() {
            return Err(format!("op `{name}` takes {} attribute(s), found {}", schema.attrs.len(), attrs.len()));
        }
        for (i, ((attr_name, kind), attr)) in schema.attrs.iter().zip(attrs).enumerate() {
            if attr.kind() != *kind {
                return Err(format!(
                    "op `{name}` attribute {i} (`{attr_name}`) must be {}, found {}",
                    kind.name(),
                    attr.kind().name()
                ));
            }
        }
        // Kinds match the schema from here on, so the accessors only check value ranges.
        let int = |i: usize| match &attrs[i] {
            Attr::Int(v) => *v,
            _ => 0,
        };
        let float = |i: usize| -> Result<f32, String> {
            match &attrs[i] {
                Attr::Float(v) if v.is_finite() => Ok(*v),
                Attr::Float(v) => Err(format!("op `{name}` attribute `{}` = {v} is not finite", schema.attrs[i].0)),
                _ => Ok(0.0),
            }
        };
        let boolean = |i: usize| matches!(attrs[i], Attr::Bool(true));
        // Sizes (stride, heads, ...) are positive and fit u32; `zero_ok` allows 0 (padding).
        let size = |i: usize, zero_ok: bool| -> Result<u32, String> {
            let v = int(i);
            match u32::try_from(v) {
                Ok(x) if x > 0 || zero_ok => Ok(x),
                _ => Err(format!("op `{name}` attribute `{}` = {v} is out of range", schema.attrs[i].0)),
            }
        };
        let positive_float = |i: usize| -> Result<f32, String> {
            let v = float(i)?;
            if v > 0.0 {
                Ok(v)
            } else {
                Err(format!("op `{name}` attribute `{}` = {v} must be positive", schema.attrs[i].0))
            }
        };
        Ok(match code {
            1 => Op::Linear { weight_transposed: boolean(0) },
            2 => Op::MatMul,
            3 => Op::Conv1d { stride: size(0, false)?, padding: size(1, true)?, dilation: size(2, false)?, groups: size(3, false)? },
            4 => Op::LayerNorm { eps: positive_float(0)?, affine: boolean(1) },
            5 => Op::RmsNorm { eps: positive_float(0)? },
            6 => Op::Gelu {
                approximation: match int(0) {
                    0 => GeluApproximation::Erf,
                    1 => GeluApproximation::Tanh,
                    v => return Err(format!("op `gelu` attribute `approximation` = {v} is not 0 (erf) or 1 (tanh)")),
                },
            },
            7 => Op::Silu,
            8 => Op::Softmax { dim: int(0) },
            9 => Op::Attention { causal: boolean(0), scale: positive_float(1)?, num_heads: size(2, false)?, num_kv_heads: size(3, false)? },
            10 => Op::Binary(
                *BINARY_OPS.iter().find(|o| **o as i64 == int(0)).ok_or_else(|| format!("op `binary`: unknown binary op code {}", int(0)))?,
            ),
            11 => Op::Unary(
                *UNARY_OPS.iter().find(|o| **o as i64 == int(0)).ok_or_else(|| format!("op `unary`: unknown unary op code {}", int(0)))?,
            ),
            12 => Op::Embedding,
            13 => Op::Rope { theta: positive_float(0)?, head_dim: size(1, false)?, interleaved: boolean(2) },
            14 => Op::Reshape,
            15 => {
                let Attr::Ints(raw) = &attrs[0] else { return Err(format!("op `{name}`: `dims` must be ints")) };
                let mut dims = Vec::with_capacity(raw.len());
                for &d in raw {
                    match u8::try_from(d) {
                        Ok(d) if (d as usize) < raw.len() && !dims.contains(&d) => dims.push(d),
                        _ => return Err(format!("op `permute` attribute `dims` = {raw:?} is not a permutation of 0..{}", raw.len())),
                    }
                }
                Op::Permute { dims }
            }
            16 => Op::Transpose { dim0: int(0), dim1: int(1) },
            17 => {
                if int(3) <= 0 {
                    return Err(format!("op `slice` attribute `step` = {} must be positive", int(3)));
                }
                Op::Slice { dim: int(0), start: int(1), end: int(2), step: int(3) }
            }
            18 => Op::Cat { dim: int(0) },
            19 => Op::Cast,
            20 => Op::CacheUpdate { seq_dim: int(0) },
            21 => Op::IfZero { count: size(0, false)? },
            22 => Op::Positions,
            _ => return Err(format!("unknown op code {code}")),
        })
    }
}
