//! One GPU subgraph → an `RbuildGpuBackend` payload. [`parse`] reads a node into the typed form
//! the payload can express (or says why it cannot: the partitioner's reason); [`lower`] emits
//! the payload ops, its inputs (values produced outside the subgraph), outputs (values used
//! outside it) and the weights as named data (keys are the weights' names).

use std::collections::HashMap;

use half::f16;
use rbuild_export::graph::{Arg, ConstData, Dim, Graph, Node, Origin, ValueId};
use rbuild_runtime::backends::gpu::payload::{
    self as pl, BinaryOp, DType, GeluApproximation, Op, OpNode, Payload, StateInit, Symbol, UnaryOp, ValueDef, ValueKind,
};
use rbuild_runtime::{Scalar, ScalarType};

use crate::partition::Partition;
use crate::{GpuOptions, WeightDtype};

type PId = pl::ValueId;

/// A node in the form the payload expresses.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    /// A run-time scalar (`sym_size`, `_local_scalar_dense`): stays on the CPU.
    Scalar,
    Linear { x: ValueId, w: ValueId, b: Option<ValueId> },
    LayerNorm { x: ValueId, affine: Option<(ValueId, ValueId)>, eps: f32 },
    Gelu { x: ValueId, approximation: GeluApproximation },
    Silu { x: ValueId },
    Conv1d { x: ValueId, w: ValueId, b: Option<ValueId>, stride: u32, padding: u32, dilation: u32, groups: u32 },
    Reshape { x: ValueId },
    Permute { x: ValueId, dims: Vec<u8> },
    Binary { a: ValueId, b: ValueId, op: BinaryOp },
    Unary { x: ValueId, op: UnaryOp },
    Softmax { x: ValueId, dim: i64 },
    MatMul { a: ValueId, b: ValueId },
    Embedding { table: ValueId, indices: ValueId },
    Select { x: ValueId, dim: i64, index: i64 },
    Slice { x: ValueId, dim: i64, start: i64, end: i64, step: i64 },
    Cat { xs: Vec<ValueId>, dim: i64 },
    /// Attention without a cache (`llama::custom_sdpa` at position 0).
    Attention { q: ValueId, k: ValueId, v: ValueId, causal: bool, scale: Option<f32> },
    /// `llama::sdpa_with_kv_cache`: the new rows written into the caches at `position`, then
    /// attention over the caches.
    CachedAttention { q: ValueId, k: ValueId, v: ValueId, k_cache: ValueId, v_cache: ValueId, position: ValueId, causal: bool, scale: Option<f32> },
    /// `rbuild::cross_attention`: keys/values projected into state at position 0 only.
    CrossAttention { q: ValueId, memory: ValueId, wk: ValueId, bk: Option<ValueId>, wv: ValueId, bv: Option<ValueId>, k_cache: ValueId, v_cache: ValueId, position: ValueId },
    /// `rbuild::add_positions`: rows `position..position + S` of a table added to `x [B, S, D]`.
    AddPositions { x: ValueId, table: ValueId, position: ValueId },
    RmsNorm { x: ValueId, w: ValueId, eps: f32 },
    /// `rbuild::silu_mul`: `silu(gate) * up` (the gated MLP).
    SiluMul { gate: ValueId, up: ValueId },
    /// `rbuild::rope` with cos/sin tables `[max_seq, D]` (any scaling baked in): rows
    /// `position..` gathered, then `x * cos + rotate_half(x) * sin`.
    TableRope { x: ValueId, cos: ValueId, sin: ValueId, position: ValueId },
}

fn int(n: &Node, i: usize) -> Result<i64, String> {
    match n.args.get(i) {
        Some(Arg::Int(v)) => Ok(*v),
        Some(Arg::Scalar(Scalar::Int(v))) => Ok(*v),
        other => Err(format!("argument {i} is {other:?}, a constant int is needed")),
    }
}

fn opt_float(n: &Node, i: usize) -> Result<Option<f32>, String> {
    match n.args.get(i) {
        Some(Arg::Float(v)) => Ok(Some(*v as f32)),
        Some(Arg::None) | None => Ok(None),
        other => Err(format!("argument {i} is {other:?}, a float or None is needed")),
    }
}

fn ints(n: &Node, i: usize) -> Result<Vec<i64>, String> {
    match n.args.get(i) {
        Some(Arg::Ints(v)) => Ok(v.clone()),
        other => Err(format!("argument {i} is {other:?}, constant ints are needed")),
    }
}

fn flag(n: &Node, i: usize) -> Result<bool, String> {
    match n.args.get(i) {
        Some(Arg::Bool(b)) => Ok(*b),
        other => Err(format!("argument {i} is {other:?}, a bool is needed")),
    }
}

fn one(v: &[i64], what: &str) -> Result<u32, String> {
    match v {
        [x] if *x >= 0 && *x <= u32::MAX as i64 => Ok(*x as u32),
        _ => Err(format!("{what} {v:?} is not one 1-D size")),
    }
}

/// The float activations the GPU computes are f32.
fn f32_value(g: &Graph, v: ValueId, what: &str) -> Result<(), String> {
    match g.meta(v).dtype {
        ScalarType::Float => Ok(()),
        ScalarType::Half if matches!(g.values[v].origin, Origin::Const(_) | Origin::State(_)) => Ok(()),
        d => Err(format!("{what} is {d:?}; the GPU program computes in float32")),
    }
}

/// The tensor a run-time position came from: `_local_scalar_dense(t)` reads `t`, which the
/// payload takes as its position input (so the GPU reads it without a host round trip).
fn position_tensor(g: &Graph, n: &Node, i: usize) -> Result<ValueId, String> {
    let v = match n.args.get(i) {
        Some(Arg::SymInt(v)) => *v,
        other => return Err(format!("argument {i} (the position) is {other:?}; a run-time position read from a tensor is needed")),
    };
    let producer = g.nodes.iter().find(|p| p.outputs.contains(&v)).ok_or("the position has no producer")?;
    if producer.op != "aten::_local_scalar_dense" {
        return Err(format!("the position comes from {}, not from a tensor's item()", producer.op));
    }
    let t = producer.tensor_arg(0)?;
    if !matches!(g.meta(t).dtype, ScalarType::Long | ScalarType::Int) {
        return Err("the position tensor is not an integer tensor".into());
    }
    Ok(t)
}

fn used_elsewhere(g: &Graph, v: ValueId) -> bool {
    g.outputs.contains(&v) || g.nodes.iter().any(|n| n.tensor_inputs().any(|x| x == v))
}

/// What the payload makes of `n`, or why the GPU cannot run it.
pub fn parse(g: &Graph, n: &Node) -> Result<Parsed, String> {
    let binary = |op: BinaryOp| -> Result<Parsed, String> {
        let (a, b) = (n.tensor_arg(0)?, n.tensor_arg(1)?);
        if let Some(Arg::Scalar(alpha)) = n.args.get(2) {
            if alpha.to_f64() != 1.0 {
                return Err(format!("alpha = {} (only 1 is supported)", alpha.to_f64()));
            }
        }
        f32_value(g, a, "the first operand")?;
        f32_value(g, b, "the second operand")?;
        Ok(Parsed::Binary { a, b, op })
    };
    let unary = |op: UnaryOp| -> Result<Parsed, String> {
        let x = n.tensor_arg(0)?;
        f32_value(g, x, "the input")?;
        Ok(Parsed::Unary { x, op })
    };
    let out = n.outputs.first().copied();
    if let Some(o) = out {
        if g.meta(o).rank() > pl::MAX_RANK {
            return Err(format!("rank {} exceeds the payload's {}", g.meta(o).rank(), pl::MAX_RANK));
        }
    }
    Ok(match n.op.as_str() {
        "aten::sym_size.int" | "aten::_local_scalar_dense" => Parsed::Scalar,
        "aten::linear" => {
            let (x, w, b) = (n.tensor_arg(0)?, n.tensor_arg(1)?, n.opt_tensor_arg(2)?);
            f32_value(g, x, "the input")?;
            if g.constant(w).is_none() {
                return Err("the weight is not a constant".into());
            }
            Parsed::Linear { x, w, b }
        }
        "aten::native_layer_norm" => {
            let x = n.tensor_arg(0)?;
            f32_value(g, x, "the input")?;
            if ints(n, 1)?.len() != 1 {
                return Err("normalizes over more than the last dim".into());
            }
            let affine = match (n.opt_tensor_arg(2)?, n.opt_tensor_arg(3)?) {
                (Some(w), Some(b)) => Some((w, b)),
                (None, None) => None,
                _ => return Err("a weight without a bias (or the reverse)".into()),
            };
            if n.outputs[1..].iter().any(|&o| used_elsewhere(g, o)) {
                return Err("its mean/rstd outputs are used".into());
            }
            let eps = match n.args.get(4) {
                Some(Arg::Float(e)) if *e > 0.0 => *e as f32,
                other => return Err(format!("eps {other:?} is not a positive float")),
            };
            Parsed::LayerNorm { x, affine, eps }
        }
        "aten::gelu" => {
            let x = n.tensor_arg(0)?;
            f32_value(g, x, "the input")?;
            let approximation = match n.args.get(1) {
                Some(Arg::Str(s)) if s == "tanh" => GeluApproximation::Tanh,
                Some(Arg::Str(s)) if s == "none" => GeluApproximation::Erf,
                None => GeluApproximation::Erf,
                other => return Err(format!("approximate = {other:?}")),
            };
            Parsed::Gelu { x, approximation }
        }
        "aten::silu" => Parsed::Silu { x: n.tensor_arg(0)? },
        "aten::convolution" => {
            let (x, w, b) = (n.tensor_arg(0)?, n.tensor_arg(1)?, n.opt_tensor_arg(2)?);
            f32_value(g, x, "the input")?;
            if g.meta(x).rank() != 3 {
                return Err(format!("a {}-D convolution (the GPU has conv1d)", g.meta(x).rank().saturating_sub(2)));
            }
            if flag(n, 6)? {
                return Err("a transposed convolution".into());
            }
            let groups = int(n, 8)?;
            Parsed::Conv1d {
                x,
                w,
                b,
                stride: one(&ints(n, 3)?, "stride")?,
                padding: one(&ints(n, 4)?, "padding")?,
                dilation: one(&ints(n, 5)?, "dilation")?,
                groups: u32::try_from(groups).map_err(|_| format!("groups {groups}"))?,
            }
        }
        "aten::view_copy" | "aten::_unsafe_view" | "aten::reshape" | "aten::clone" | "aten::alias_copy" | "aten::squeeze_copy.dims"
        | "aten::unsqueeze_copy" => Parsed::Reshape { x: n.tensor_arg(0)? },
        "aten::permute_copy" => {
            let x = n.tensor_arg(0)?;
            let r = g.meta(x).rank() as i64;
            let dims = ints(n, 1)?
                .iter()
                .map(|&d| u8::try_from(if d < 0 { d + r } else { d }).map_err(|_| format!("dim {d}")))
                .collect::<Result<Vec<u8>, String>>()?;
            Parsed::Permute { x, dims }
        }
        "aten::add.Tensor" => binary(BinaryOp::Add)?,
        "aten::sub.Tensor" => binary(BinaryOp::Sub)?,
        "aten::mul.Tensor" => binary(BinaryOp::Mul)?,
        "aten::div.Tensor" => binary(BinaryOp::Div)?,
        "aten::maximum" => binary(BinaryOp::Max)?,
        "aten::minimum" => binary(BinaryOp::Min)?,
        "aten::pow.Tensor_Tensor" => binary(BinaryOp::Pow)?,
        "aten::neg" => unary(UnaryOp::Neg)?,
        "aten::exp" => unary(UnaryOp::Exp)?,
        "aten::log" => unary(UnaryOp::Log)?,
        "aten::sqrt" => unary(UnaryOp::Sqrt)?,
        "aten::rsqrt" => unary(UnaryOp::Rsqrt)?,
        "aten::tanh" => unary(UnaryOp::Tanh)?,
        "aten::sigmoid" => unary(UnaryOp::Sigmoid)?,
        "aten::relu" => unary(UnaryOp::Relu)?,
        "aten::abs" => unary(UnaryOp::Abs)?,
        "aten::reciprocal" => unary(UnaryOp::Reciprocal)?,
        "aten::sin" => unary(UnaryOp::Sin)?,
        "aten::cos" => unary(UnaryOp::Cos)?,
        "aten::_softmax" => {
            let x = n.tensor_arg(0)?;
            f32_value(g, x, "the input")?;
            Parsed::Softmax { x, dim: int(n, 1)? }
        }
        "aten::bmm" | "aten::mm" | "aten::matmul" => {
            let (a, b) = (n.tensor_arg(0)?, n.tensor_arg(1)?);
            f32_value(g, a, "the first operand")?;
            f32_value(g, b, "the second operand")?;
            Parsed::MatMul { a, b }
        }
        "aten::embedding" => Parsed::Embedding { table: n.tensor_arg(0)?, indices: n.tensor_arg(1)? },
        "aten::select_copy.int" => Parsed::Select { x: n.tensor_arg(0)?, dim: int(n, 1)?, index: int(n, 2)? },
        "aten::slice_copy.Tensor" => {
            let bound = |i: usize, default: i64| match n.args.get(i) {
                Some(Arg::None) | None => Ok(default),
                _ => int(n, i),
            };
            Parsed::Slice { x: n.tensor_arg(0)?, dim: int(n, 1)?, start: bound(2, 0)?, end: bound(3, i64::MAX)?, step: bound(4, 1)? }
        }
        "aten::cat" => match n.args.first() {
            Some(Arg::Tensors(xs)) if !xs.is_empty() && xs.len() <= u8::MAX as usize => Parsed::Cat { xs: xs.clone(), dim: int(n, 1)? },
            _ => return Err("cat of no (or too many) tensors".into()),
        },
        "llama::custom_sdpa" => {
            if int(n, 3).ok() != Some(0) {
                return Err("start_pos is not the constant 0 (a cache-less attention at an offset)".into());
            }
            if !matches!(n.args.get(4), Some(Arg::None)) {
                return Err("an explicit attention mask".into());
            }
            Parsed::Attention { q: n.tensor_arg(0)?, k: n.tensor_arg(1)?, v: n.tensor_arg(2)?, causal: flag(n, 6)?, scale: opt_float(n, 7)? }
        }
        "llama::sdpa_with_kv_cache" => {
            if !matches!(n.args.get(7), Some(Arg::None)) {
                return Err("an explicit attention mask".into());
            }
            Parsed::CachedAttention {
                q: n.tensor_arg(0)?,
                k: n.tensor_arg(1)?,
                v: n.tensor_arg(2)?,
                k_cache: n.tensor_arg(3)?,
                v_cache: n.tensor_arg(4)?,
                position: position_tensor(g, n, 5)?,
                causal: flag(n, 9)?,
                scale: opt_float(n, 10)?,
            }
        }
        "rbuild::cross_attention" => Parsed::CrossAttention {
            q: n.tensor_arg(0)?,
            memory: n.tensor_arg(1)?,
            wk: n.tensor_arg(2)?,
            bk: n.opt_tensor_arg(3)?,
            wv: n.tensor_arg(4)?,
            bv: n.opt_tensor_arg(5)?,
            k_cache: n.tensor_arg(6)?,
            v_cache: n.tensor_arg(7)?,
            position: position_tensor(g, n, 8)?,
        },
        "rbuild::add_positions" => Parsed::AddPositions { x: n.tensor_arg(0)?, table: n.tensor_arg(1)?, position: position_tensor(g, n, 2)? },
        "rbuild::rms_norm" => {
            let (x, w) = (n.tensor_arg(0)?, n.tensor_arg(1)?);
            f32_value(g, x, "the input")?;
            let eps = match n.args.get(2) {
                Some(Arg::Float(e)) if *e > 0.0 => *e as f32,
                other => return Err(format!("eps {other:?} is not a positive float")),
            };
            Parsed::RmsNorm { x, w, eps }
        }
        "rbuild::silu_mul" => Parsed::SiluMul { gate: n.tensor_arg(0)?, up: n.tensor_arg(1)? },
        "rbuild::rope" => {
            let x = n.tensor_arg(0)?;
            f32_value(g, x, "the input")?;
            if g.meta(x).rank() != 4 {
                return Err("the input is not [B, S, H, D]".into());
            }
            Parsed::TableRope { x, cos: n.tensor_arg(1)?, sin: n.tensor_arg(2)?, position: position_tensor(g, n, 3)? }
        }
        "rbuild::log_mel_spectrogram" => return Err("the FFT front end has no GPU kernel (it runs once per audio window)".into()),
        _ => return Err("no GPU kernel for this operator".into()),
    })
}

/// A lowered subgraph: the payload bytes, the graph values it takes and produces (the delegate
/// call's arguments, in order) and the named data it refers to.
pub struct Lowered {
    pub bytes: Vec<u8>,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    pub named_data: Vec<(String, ConstData)>,
}

struct Ctx<'g> {
    g: &'g Graph,
    options: &'g GpuOptions,
    p: Payload,
    map: HashMap<ValueId, PId>,
    symbols: HashMap<usize, u32>,
    inputs: Vec<ValueId>,
    named: Vec<(String, ConstData)>,
}

fn dtype(t: ScalarType) -> Result<DType, String> {
    Ok(match t {
        ScalarType::Float => DType::F32,
        ScalarType::Half => DType::F16,
        ScalarType::BFloat16 => DType::BF16,
        ScalarType::Int => DType::I32,
        ScalarType::Long => DType::I64,
        ScalarType::Bool => DType::Bool,
        other => return Err(format!("dtype {other:?} has no payload form")),
    })
}

impl Ctx<'_> {
    fn dims(&mut self, shape: &[Dim]) -> Vec<pl::Dim> {
        shape
            .iter()
            .map(|d| match *d {
                Dim::Fixed(n) => pl::Dim::Fixed(n as u64),
                Dim::Sym(s) => {
                    let syms = &self.g.syms;
                    let p = &mut self.p;
                    let k = *self.symbols.entry(s).or_insert_with(|| {
                        p.symbols.push(Symbol { name: syms[s].name.clone(), min: syms[s].min as u64, max: syms[s].max as u64 });
                        p.symbols.len() as u32 - 1
                    });
                    pl::Dim::Symbol(k)
                }
            })
            .collect()
    }

    fn push(&mut self, name: String, dtype: DType, dims: Vec<pl::Dim>, kind: ValueKind) -> PId {
        self.p.values.push(ValueDef { name, meta: pl::TensorMeta { dtype, dims, quant: None }, kind });
        self.p.values.len() as PId - 1
    }

    /// A key for `data` in the program's named data: the value's name, made unique.
    fn key(&mut self, name: &str, data: &ConstData) -> String {
        let taken = |k: &str| {
            self.named.iter().chain(&self.g.named_data).any(|(key, d)| key == k && d.bytes() != data.bytes())
        };
        let mut key = name.to_string();
        let mut n = 1;
        while key.is_empty() || taken(&key) {
            key = format!("{name}#{n}");
            n += 1;
        }
        if !self.named.iter().any(|(k, _)| *k == key) {
            self.named.push((key.clone(), data.clone()));
        }
        key
    }

    /// The payload value of graph value `v` read by an op: mapped already, or a new input,
    /// constant or state.
    fn read(&mut self, v: ValueId) -> Result<PId, String> {
        if let Some(&id) = self.map.get(&v) {
            return Ok(id);
        }
        let value = &self.g.values[v];
        let name = value.name.clone();
        let meta = value.meta.clone();
        let dims = self.dims(&meta.shape);
        let id = match &value.origin {
            Origin::Const(data) => {
                let (dt, data) = match (meta.dtype, self.options.weights) {
                    (ScalarType::Float, WeightDtype::F16) if meta.rank() >= 2 => {
                        (DType::F16, ConstData::owned(narrow_floats(&data.bytes(), |v| f16::from_f32(v).to_bits())))
                    }
                    (ScalarType::Float, WeightDtype::BF16) if meta.rank() >= 2 => {
                        (DType::BF16, ConstData::owned(narrow_floats(&data.bytes(), |v| half::bf16::from_f32(v).to_bits())))
                    }
                    (t, _) => (dtype(t)?, data.clone()),
                };
                let key = self.key(&name, &data);
                self.push(name, dt, dims, ValueKind::Constant { key })
            }
            Origin::State(init) => {
                let init = match init {
                    None => StateInit::Zeros,
                    Some(data) => StateInit::Named(self.key(&name, data)),
                };
                self.push(name, dtype(meta.dtype)?, dims, ValueKind::State { init })
            }
            Origin::Input(_) | Origin::Computed => {
                let id = self.push(name, dtype(meta.dtype)?, dims, ValueKind::Input);
                self.p.inputs.push(id);
                self.inputs.push(v);
                id
            }
            Origin::SymInt => return Err(format!("{name} is a run-time scalar, not a tensor")),
        };
        self.map.insert(v, id);
        Ok(id)
    }

    /// The payload activation for graph value `v`, produced by the op about to be pushed.
    fn write(&mut self, v: ValueId) -> Result<PId, String> {
        let meta = self.g.values[v].meta.clone();
        let dims = self.dims(&meta.shape);
        let id = self.push(self.g.values[v].name.clone(), dtype(meta.dtype)?, dims, ValueKind::Activation);
        self.map.insert(v, id);
        Ok(id)
    }

    /// An activation with no graph value (an intermediate of a multi-op lowering).
    fn temp(&mut self, name: String, dtype: DType, shape: &[Dim]) -> PId {
        let dims = self.dims(shape);
        self.push(name, dtype, dims, ValueKind::Activation)
    }

    fn op(&mut self, op: Op, inputs: Vec<PId>, outputs: Vec<PId>) {
        self.p.ops.push(OpNode { op, inputs, outputs });
    }

    fn op1(&mut self, op: Op, inputs: &[ValueId], out: ValueId) -> Result<(), String> {
        let ins = inputs.iter().map(|&v| self.read(v)).collect::<Result<Vec<_>, _>>()?;
        let o = self.write(out)?;
        self.op(op, ins, vec![o]);
        Ok(())
    }

    /// A constant i64 `[1]` zero (the cache row where projected cross-attention keys start).
    fn zero(&mut self) -> PId {
        let data = ConstData::owned(0i64.to_le_bytes().to_vec());
        let key = self.key("rbuild_gpu.zero_i64", &data);
        self.push("zero".into(), DType::I64, vec![pl::Dim::Fixed(1)], ValueKind::Constant { key })
    }

    fn fixed(&self, v: ValueId, i: usize, what: &str) -> Result<usize, String> {
        match self.g.meta(v).shape.get(i) {
            Some(Dim::Fixed(n)) => Ok(*n),
            other => Err(format!("{what} (dim {i} of {}) is {other:?}, a fixed size is needed", self.g.values[v].name)),
        }
    }

    fn lower_node(&mut self, n: &Node) -> Result<(), String> {
        let out = n.outputs.first().copied();
        let o = || out.ok_or_else(|| "the node has no output".to_string());
        match parse(self.g, n)? {
            Parsed::Scalar => {}
            Parsed::Linear { x, w, b } => {
                let ins: Vec<ValueId> = [Some(x), Some(w), b].into_iter().flatten().collect();
                self.op1(Op::Linear { weight_transposed: false }, &ins, o()?)?;
            }
            Parsed::LayerNorm { x, affine, eps } => {
                let ins: Vec<ValueId> = match affine {
                    Some((w, b)) => vec![x, w, b],
                    None => vec![x],
                };
                self.op1(Op::LayerNorm { eps, affine: affine.is_some() }, &ins, o()?)?;
            }
            Parsed::Gelu { x, approximation } => self.op1(Op::Gelu { approximation }, &[x], o()?)?,
            Parsed::Silu { x } => self.op1(Op::Silu, &[x], o()?)?,
            Parsed::Conv1d { x, w, b, stride, padding, dilation, groups } => {
                let ins: Vec<ValueId> = [Some(x), Some(w), b].into_iter().flatten().collect();
                self.op1(Op::Conv1d { stride, padding, dilation, groups }, &ins, o()?)?;
            }
            Parsed::Reshape { x } => self.op1(Op::Reshape, &[x], o()?)?,
            Parsed::Permute { x, dims } => self.op1(Op::Permute { dims }, &[x], o()?)?,
            Parsed::Binary { a, b, op } => self.op1(Op::Binary(op), &[a, b], o()?)?,
            Parsed::Unary { x, op } => self.op1(Op::Unary(op), &[x], o()?)?,
            Parsed::Softmax { x, dim } => self.op1(Op::Softmax { dim }, &[x], o()?)?,
            Parsed::MatMul { a, b } => self.op1(Op::MatMul, &[a, b], o()?)?,
            Parsed::Embedding { table, indices } => self.op1(Op::Embedding, &[table, indices], o()?)?,
            Parsed::Slice { x, dim, start, end, step } => self.op1(Op::Slice { dim, start, end, step }, &[x], o()?)?,
            Parsed::Cat { xs, dim } => self.op1(Op::Cat { dim }, &xs, o()?)?,
            Parsed::Select { x, dim, index } => {
                // select = a one-row slice, then the output's shape (the dim dropped).
                let xi = self.read(x)?;
                let meta = self.g.meta(x).clone();
                let r = meta.rank() as i64;
                let d = if dim < 0 { dim + r } else { dim };
                let mut shape = meta.shape.clone();
                *shape.get_mut(d as usize).ok_or_else(|| format!("select dim {dim} of a rank-{r} tensor"))? = Dim::Fixed(1);
                let row = self.temp(format!("{}.row", self.g.values[x].name), dtype(meta.dtype)?, &shape);
                let end = if index == -1 { i64::MAX } else { index + 1 };
                self.op(Op::Slice { dim: d, start: index, end, step: 1 }, vec![xi], vec![row]);
                let y = self.write(o()?)?;
                self.op(Op::Reshape, vec![row], vec![y]);
            }
            Parsed::Attention { q, k, v, causal, scale } => {
                let (heads, kv_heads, d) = (self.fixed(q, 2, "heads")?, self.fixed(k, 2, "kv heads")?, self.fixed(q, 3, "head dim")?);
                let scale = scale.unwrap_or((1.0 / (d as f64).sqrt()) as f32);
                self.op1(Op::Attention { causal, scale, num_heads: heads as u32, num_kv_heads: kv_heads as u32 }, &[q, k, v], o()?)?;
            }
            Parsed::CachedAttention { q, k, v, k_cache, v_cache, position, causal, scale } => {
                let (heads, kv_heads, d) = (self.fixed(q, 2, "heads")?, self.fixed(k_cache, 2, "kv heads")?, self.fixed(q, 3, "head dim")?);
                let scale = scale.unwrap_or((1.0 / (d as f64).sqrt()) as f32);
                let (kc, vc, ki, vi, pos) = (self.read(k_cache)?, self.read(v_cache)?, self.read(k)?, self.read(v)?, self.read(position)?);
                self.op(Op::CacheUpdate { seq_dim: 1 }, vec![kc, ki, pos], vec![]);
                self.op(Op::CacheUpdate { seq_dim: 1 }, vec![vc, vi, pos], vec![]);
                let qi = self.read(q)?;
                let y = self.write(o()?)?;
                self.op(Op::Attention { causal, scale, num_heads: heads as u32, num_kv_heads: kv_heads as u32 }, vec![qi, kc, vc, pos], vec![y]);
            }
            Parsed::CrossAttention { q, memory, wk, bk, wv, bv, k_cache, v_cache, position } => {
                let (heads, d) = (self.fixed(k_cache, 2, "heads")?, self.fixed(k_cache, 3, "head dim")?);
                let frames = self.fixed(k_cache, 1, "frames")?;
                let pos = self.read(position)?;
                let (mem, kc, vc) = (self.read(memory)?, self.read(k_cache)?, self.read(v_cache)?);
                let zero = self.zero();
                let guard = self.p.ops.len();
                self.op(Op::IfZero { count: 6 }, vec![pos], vec![]);
                for (w, b, cache, what) in [(wk, bk, kc, "k"), (wv, bv, vc, "v")] {
                    let mut ins = vec![mem, self.read(w)?];
                    if let Some(b) = b {
                        ins.push(self.read(b)?);
                    }
                    let name = &self.g.values[memory].name;
                    let flat = self.temp(format!("{name}.cross_{what}"), DType::F32, &[Dim::Fixed(1), Dim::Fixed(frames), Dim::Fixed(heads * d)]);
                    self.op(Op::Linear { weight_transposed: false }, ins, vec![flat]);
                    let name = &self.g.values[memory].name;
                    let split = self.temp(format!("{name}.cross_{what}.heads"), DType::F32, &[Dim::Fixed(1), Dim::Fixed(frames), Dim::Fixed(heads), Dim::Fixed(d)]);
                    self.op(Op::Reshape, vec![flat], vec![split]);
                    self.op(Op::CacheUpdate { seq_dim: 1 }, vec![cache, split, zero], vec![]);
                }
                debug_assert_eq!(self.p.ops.len(), guard + 7);
                let qi = self.read(q)?;
                let y = self.write(o()?)?;
                let scale = (1.0 / (d as f64).sqrt()) as f32;
                self.op(Op::Attention { causal: false, scale, num_heads: heads as u32, num_kv_heads: heads as u32 }, vec![qi, kc, vc], vec![y]);
            }
            Parsed::RmsNorm { x, w, eps } => self.op1(Op::RmsNorm { eps }, &[x, w], o()?)?,
            Parsed::SiluMul { gate, up } => {
                let gi = self.read(gate)?;
                let shape = self.g.meta(gate).shape.clone();
                let act = self.temp(format!("{}.silu", self.g.values[gate].name), DType::F32, &shape);
                self.op(Op::Silu, vec![gi], vec![act]);
                let ui = self.read(up)?;
                let y = self.write(o()?)?;
                self.op(Op::Binary(BinaryOp::Mul), vec![act, ui], vec![y]);
            }
            Parsed::TableRope { x, cos, sin, position } => {
                let shape = self.g.meta(x).shape.clone();
                let (rows, d) = (shape[1], self.fixed(x, 3, "head dim")?);
                if d % 2 != 0 {
                    return Err(format!("head dim {d} is odd"));
                }
                let half = d / 2;
                let name = self.g.values[x].name.clone();
                let pos = self.read(position)?;
                let ids = self.temp(format!("{name}.rope_ids"), DType::I64, &[rows]);
                self.op(Op::Positions, vec![pos], vec![ids]);
                // Table rows [S, D] viewed as [1, S, 1, D] broadcast over the heads.
                let mut tables = Vec::new();
                for (t, what) in [(cos, "cos"), (sin, "sin")] {
                    let ti = self.read(t)?;
                    let gathered = self.temp(format!("{name}.{what}"), DType::F32, &[rows, Dim::Fixed(d)]);
                    self.op(Op::Embedding, vec![ti, ids], vec![gathered]);
                    let b = self.temp(format!("{name}.{what}.b"), DType::F32, &[Dim::Fixed(1), rows, Dim::Fixed(1), Dim::Fixed(d)]);
                    self.op(Op::Reshape, vec![gathered], vec![b]);
                    tables.push(b);
                }
                let xi = self.read(x)?;
                let mut half_shape = shape.clone();
                half_shape[3] = Dim::Fixed(half);
                let lo = self.temp(format!("{name}.lo"), DType::F32, &half_shape);
                self.op(Op::Slice { dim: 3, start: 0, end: half as i64, step: 1 }, vec![xi], vec![lo]);
                let hi = self.temp(format!("{name}.hi"), DType::F32, &half_shape);
                self.op(Op::Slice { dim: 3, start: half as i64, end: d as i64, step: 1 }, vec![xi], vec![hi]);
                let neg_hi = self.temp(format!("{name}.neg_hi"), DType::F32, &half_shape);
                self.op(Op::Unary(UnaryOp::Neg), vec![hi], vec![neg_hi]);
                let rotated = self.temp(format!("{name}.rotated"), DType::F32, &shape);
                self.op(Op::Cat { dim: 3 }, vec![neg_hi, lo], vec![rotated]);
                let xc = self.temp(format!("{name}.xcos"), DType::F32, &shape);
                self.op(Op::Binary(BinaryOp::Mul), vec![xi, tables[0]], vec![xc]);
                let rs = self.temp(format!("{name}.rsin"), DType::F32, &shape);
                self.op(Op::Binary(BinaryOp::Mul), vec![rotated, tables[1]], vec![rs]);
                let y = self.write(o()?)?;
                self.op(Op::Binary(BinaryOp::Add), vec![xc, rs], vec![y]);
            }
            Parsed::AddPositions { x, table, position } => {
                let meta = self.g.meta(x).clone();
                let rows = *meta.shape.get(1).ok_or("add_positions input is not [B, S, D]")?;
                let width = *meta.shape.last().ok_or("add_positions input has no dims")?;
                let pos = self.read(position)?;
                let ids = self.temp(format!("{}.position_ids", self.g.values[x].name), DType::I64, &[rows]);
                self.op(Op::Positions, vec![pos], vec![ids]);
                let t = self.read(table)?;
                let rows_of_table = self.temp(format!("{}.positions", self.g.values[x].name), DType::F32, &[rows, width]);
                self.op(Op::Embedding, vec![t, ids], vec![rows_of_table]);
                let xi = self.read(x)?;
                let y = self.write(o()?)?;
                self.op(Op::Binary(BinaryOp::Add), vec![xi, rows_of_table], vec![y]);
            }
        }
        Ok(())
    }
}

/// Lowers partition `part` of `g`.
pub fn lower(g: &Graph, part: &Partition, options: &GpuOptions) -> Result<Lowered, String> {
    let mut cx = Ctx { g, options, p: Payload::default(), map: HashMap::new(), symbols: HashMap::new(), inputs: Vec::new(), named: Vec::new() };
    for &i in &part.nodes {
        let n = &g.nodes[i];
        cx.lower_node(n).map_err(|e| format!("node {i} ({}): {e}", n.op))?;
    }
    let outputs = rbuild_export::delegation::partition_outputs(g, part);
    for &v in &outputs {
        let id = *cx.map.get(&v).ok_or_else(|| format!("{} is used outside the GPU subgraph but has no payload value", g.values[v].name))?;
        cx.p.outputs.push(id);
    }
    // Every symbol must be bound by an input's dims, or the runtime could not size it.
    for (&s, &k) in &cx.symbols {
        let bound = cx.p.inputs.iter().any(|&i| cx.p.values[i as usize].meta.dims.contains(&pl::Dim::Symbol(k)));
        if !bound {
            return Err(format!("dynamic size `{}` is not a dim of any delegate input", g.syms[s].name));
        }
    }
    let bytes = cx.p.to_bytes().map_err(|e| format!("payload: {e}"))?;
    Ok(Lowered { bytes, inputs: cx.inputs, outputs, named_data: cx.named })
}

/// Little-endian float32 bytes as little-endian 16-bit elements, each rounded by `to_bits`.
fn narrow_floats(floats: &[u8], to_bits: impl Fn(f32) -> u16) -> Vec<u8> {
    floats.chunks_exact(4).flat_map(|c| to_bits(f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes()).collect()
}
