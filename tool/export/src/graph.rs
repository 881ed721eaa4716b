//! The export IR: values (tensors with dtype and shape) and nodes calling Core ATen operators.

use std::ops::Range;
use std::sync::Arc;

use rbuild_runtime::{Scalar, ScalarType};

pub type ValueId = usize;

/// One dimension: fixed, or a symbol with declared bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    Fixed(usize),
    Sym(usize),
}

/// A symbolic size (e.g. sequence length) and its inclusive bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Sym {
    pub name: String,
    pub min: usize,
    pub max: usize,
    /// The `SymInt` value holding this size at run time (set by `GraphBuilder::sym_size`);
    /// size lists that mention the symbol refer to it.
    pub value: Option<ValueId>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TensorMeta {
    pub dtype: ScalarType,
    pub shape: Vec<Dim>,
    /// Memory order of the dimensions, outermost first (ExecuTorch's dim_order); contiguous
    /// (`0..rank`) unless a layout pass says otherwise.
    pub dim_order: Vec<u8>,
}

impl TensorMeta {
    /// A contiguous tensor.
    pub fn new(dtype: ScalarType, shape: Vec<Dim>) -> Self {
        let dim_order = (0..shape.len() as u8).collect();
        TensorMeta { dtype, shape, dim_order }
    }

    pub fn fixed(dtype: ScalarType, sizes: &[usize]) -> Self {
        Self::new(dtype, sizes.iter().map(|&d| Dim::Fixed(d)).collect())
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Sizes when every dimension is fixed.
    pub fn sizes(&self) -> Option<Vec<usize>> {
        self.shape.iter().map(|d| if let Dim::Fixed(n) = d { Some(*n) } else { None }).collect()
    }
}

/// Constant bytes, borrowed from a memory-mapped weights file or owned (a folded result).
#[derive(Clone)]
pub enum ConstData {
    Mapped(Arc<memmap2::Mmap>, Range<usize>),
    Owned(Arc<Vec<u8>>),
    /// A float16 / bfloat16 tensor of a mapped file read as float32, widened each time its
    /// bytes are read: a checkpoint's weights (most ship in 16 bits) are never held in memory
    /// as float32 all at once, so quantizing a 3B model's weights one tensor at a time fits in
    /// a few GB instead of four bytes per parameter.
    Widened { map: Arc<memmap2::Mmap>, range: Range<usize>, bf16: bool },
}

impl ConstData {
    pub fn owned(bytes: Vec<u8>) -> Self {
        ConstData::Owned(Arc::new(bytes))
    }

    /// The bytes as stored (widened ones converted now).
    pub fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        match self {
            ConstData::Mapped(m, r) => std::borrow::Cow::Borrowed(&m[r.clone()]),
            ConstData::Owned(v) => std::borrow::Cow::Borrowed(v),
            ConstData::Widened { map, range, bf16 } => std::borrow::Cow::Owned(widen_halves(&map[range.clone()], *bf16)),
        }
    }

    /// Number of bytes [`ConstData::bytes`] gives, without converting.
    pub fn len(&self) -> usize {
        match self {
            ConstData::Mapped(_, r) => r.len(),
            ConstData::Owned(v) => v.len(),
            ConstData::Widened { range, .. } => range.len() / 2 * 4,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Little-endian float16 (or bfloat16) elements as little-endian float32 bytes.
pub fn widen_halves(halves: &[u8], bf16: bool) -> Vec<u8> {
    halves
        .chunks_exact(2)
        .flat_map(|c| {
            let bits = u16::from_le_bytes([c[0], c[1]]);
            let v = if bf16 { half::bf16::from_bits(bits).to_f32() } else { half::f16::from_bits(bits).to_f32() };
            v.to_le_bytes()
        })
        .collect()
}

impl std::fmt::Debug for ConstData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConstData({} bytes)", self.len())
    }
}

#[derive(Clone, Debug)]
pub enum Origin {
    /// The method's input number n.
    Input(usize),
    Const(ConstData),
    /// Produced by a node.
    Computed,
    /// Mutable state that lives across executions (a KV cache, an imported module's buffer):
    /// planned memory of its own for the whole method, zero at load or its initial bytes (the
    /// program's mutable data segment), written in place by ops whose schema marks it `(a!)`.
    State(Option<ConstData>),
    /// A scalar integer produced by a node at run time (`aten::sym_size.int`,
    /// `aten::_local_scalar_dense`); no tensor memory. Its meta is int64 [].
    SymInt,
}

#[derive(Clone, Debug)]
pub struct Value {
    pub meta: TensorMeta,
    pub origin: Origin,
    /// A readable name (weight name, or op-derived) for errors and debugging.
    pub name: String,
}

/// A node argument, in the order of the op's functional schema.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Tensor(ValueId),
    Tensors(Vec<ValueId>),
    /// A `Tensor?[]` argument (`index.Tensor`'s indices): absent entries are `None`.
    OptTensors(Vec<Option<ValueId>>),
    Int(i64),
    Ints(Vec<i64>),
    /// A `SymInt` argument computed at run time (a value with `Origin::SymInt`).
    SymInt(ValueId),
    /// A `SymInt[]` argument mixing fixed sizes and run-time values.
    SymInts(Vec<IntOrSym>),
    Float(f64),
    /// A `float[]` argument (`upsample_*.vec`'s scale factors).
    Floats(Vec<f64>),
    Bool(bool),
    /// A `bool[]` argument (`convolution_backward`'s output mask).
    Bools(Vec<bool>),
    Scalar(Scalar),
    ScalarType(ScalarType),
    Str(String),
    /// An absent optional argument.
    None,
}

impl Arg {
    /// Rewrites every value this argument reads (tensors and run-time integers) through `f`.
    pub fn map_values(&mut self, mut f: impl FnMut(ValueId) -> ValueId) {
        match self {
            Arg::Tensor(v) | Arg::SymInt(v) => *v = f(*v),
            Arg::Tensors(vs) => vs.iter_mut().for_each(|v| *v = f(*v)),
            Arg::OptTensors(vs) => vs.iter_mut().flatten().for_each(|v| *v = f(*v)),
            Arg::SymInts(items) => {
                for i in items.iter_mut() {
                    if let IntOrSym::Sym(v) = i {
                        *v = f(*v);
                    }
                }
            }
            _ => {}
        }
    }
}

/// One entry of a [`Arg::SymInts`] list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrSym {
    Int(i64),
    Sym(ValueId),
}

#[derive(Clone, Debug)]
pub struct Node {
    /// Functional schema key (`aten::add.Tensor`) until the out-variant pass, then the out
    /// variant's key (`aten::add.out`).
    pub op: String,
    pub args: Vec<Arg>,
    pub outputs: Vec<ValueId>,
}

impl Node {
    /// Argument `i` as a tensor, or why it is not one (the delegate compilers' parsers).
    pub fn tensor_arg(&self, i: usize) -> Result<ValueId, String> {
        match self.args.get(i) {
            Some(Arg::Tensor(v)) => Ok(*v),
            other => Err(format!("argument {i} is {other:?}, a tensor is needed")),
        }
    }

    /// Argument `i` as an optional tensor (`None` or absent), or why it is neither.
    pub fn opt_tensor_arg(&self, i: usize) -> Result<Option<ValueId>, String> {
        match self.args.get(i) {
            Some(Arg::Tensor(v)) => Ok(Some(*v)),
            Some(Arg::None) | None => Ok(None),
            other => Err(format!("argument {i} is {other:?}, a tensor or None is needed")),
        }
    }

    /// Values this node reads: tensors and run-time integers.
    pub fn tensor_inputs(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.args.iter().flat_map(|a| match a {
            Arg::Tensor(v) | Arg::SymInt(v) => vec![*v],
            Arg::Tensors(vs) => vs.clone(),
            Arg::OptTensors(vs) => vs.iter().flatten().copied().collect(),
            Arg::SymInts(items) => items.iter().filter_map(|i| if let IntOrSym::Sym(v) = i { Some(*v) } else { None }).collect(),
            _ => vec![],
        })
    }
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub values: Vec<Value>,
    pub nodes: Vec<Node>,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    pub syms: Vec<Sym>,
    /// Subgraphs handed to backends; [`DELEGATE_CALL`] nodes run them by index.
    pub delegates: Vec<Delegate>,
    /// Blobs the delegates look up by key at init (their weights): the program's
    /// `named_data`, each stored once in its own segment.
    pub named_data: Vec<(String, ConstData)>,
}

/// The op of a node that runs a delegate (ExecuTorch's `executorch_call_delegate`): arguments
/// `[Int(index into Graph::delegates), Tensor(input)…]`, outputs the delegate's outputs. It is
/// emitted as a `DelegateCall` instruction, not a kernel call.
pub const DELEGATE_CALL: &str = "executorch_call_delegate";

/// A lowered subgraph: the backend's id (`EthosUBackend`), its processed blob and compile specs.
#[derive(Clone, PartialEq)]
pub struct Delegate {
    pub id: String,
    pub processed: Vec<u8>,
    pub compile_specs: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for Delegate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Delegate({}, {} bytes, {} compile specs)", self.id, self.processed.len(), self.compile_specs.len())
    }
}

impl Graph {
    /// Adds a named-data blob; the same key with the same bytes is stored once, the same key
    /// with other bytes is a caller bug reported when the program is emitted.
    pub fn add_named_data(&mut self, key: String, data: ConstData) {
        if !self.named_data.iter().any(|(k, d)| *k == key && d.bytes() == data.bytes()) {
            self.named_data.push((key, data));
        }
    }

    pub fn add_value(&mut self, meta: TensorMeta, origin: Origin, name: impl Into<String>) -> ValueId {
        self.values.push(Value { meta, origin, name: name.into() });
        self.values.len() - 1
    }

    pub fn meta(&self, v: ValueId) -> &TensorMeta {
        &self.values[v].meta
    }

    pub fn constant(&self, v: ValueId) -> Option<&ConstData> {
        match &self.values[v].origin {
            Origin::Const(c) => Some(c),
            _ => None,
        }
    }

    /// The node index producing each value (None for inputs and constants).
    pub fn producers(&self) -> Vec<Option<usize>> {
        let mut p = vec![None; self.values.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &o in &n.outputs {
                p[o] = Some(i);
            }
        }
        p
    }

    /// How many node arguments and graph outputs read each value.
    pub fn use_counts(&self) -> Vec<usize> {
        let mut c = vec![0; self.values.len()];
        for n in &self.nodes {
            for v in n.tensor_inputs() {
                c[v] += 1;
            }
        }
        for &o in &self.outputs {
            c[o] += 1;
        }
        c
    }

    /// Replaces every use of `old` (node arguments and graph outputs) with `new`.
    pub fn replace_uses(&mut self, old: ValueId, new: ValueId) {
        for n in &mut self.nodes {
            for a in &mut n.args {
                a.map_values(|v| if v == old { new } else { v });
            }
        }
        for o in &mut self.outputs {
            if *o == old {
                *o = new;
            }
        }
    }

    /// Upper bound of a dimension (a symbol's max).
    pub fn dim_max(&self, d: Dim) -> usize {
        match d {
            Dim::Fixed(n) => n,
            Dim::Sym(s) => self.syms[s].max,
        }
    }

    /// Bytes of a value at its upper-bound shape.
    pub fn max_bytes(&self, v: ValueId) -> usize {
        let m = self.meta(v);
        m.shape.iter().map(|&d| self.dim_max(d)).product::<usize>() * m.dtype.size()
    }

    /// Bytes of the constants the graph still uses (replaced ones, e.g. pre-folding weights,
    /// do not count).
    pub fn constant_bytes(&self) -> usize {
        let uses = self.use_counts();
        self.values
            .iter()
            .zip(uses)
            .filter_map(|(v, n)| match &v.origin {
                Origin::Const(c) if n > 0 => Some(c.len()),
                _ => None,
            })
            .sum()
    }

    /// Distinct operators used, sorted.
    pub fn ops(&self) -> Vec<String> {
        let mut ops: Vec<String> = self.nodes.iter().map(|n| n.op.clone()).collect();
        ops.sort();
        ops.dedup();
        ops
    }
}
