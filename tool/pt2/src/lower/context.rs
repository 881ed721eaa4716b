//! The lowering's state: the graph being built, what each archive name stands for in it, and
//! the typed reading of node arguments shared by every op mapping.

use std::collections::HashMap;

use rbuild_export::graph::{Arg, ConstData, Dim, IntOrSym, Origin, TensorMeta, ValueId};
use rbuild_export::GraphBuilder;
use rbuild_runtime::{Scalar, ScalarType};

use super::schemas::NodeArgs;
use crate::schema::{Argument, OptionalTensorArgument, SymBoolArgument, SymIntArgument};

/// What one archive value became.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Lowered {
    Tensor(ValueId),
    /// A size: fixed, or a run-time integer.
    Int(IntOrSym),
}

/// A binary op's operand: a tensor, or a Python number passed where ATen takes a tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Operand {
    Tensor(ValueId),
    Number(Scalar),
}

/// A node being lowered: its normalized target and its arguments.
pub(crate) struct Call<'n> {
    /// `aten::add.Tensor`, `aten::relu` (the default overload unnamed).
    pub key: &'n str,
    pub args: NodeArgs<'n>,
    /// The first result's shape as the archive records it, when it has graph dims.
    pub out_dims: Option<Vec<Dim>>,
    /// The bound of a data-dependent result size (`nonzero`'s row count): the archive's range
    /// for that size's symbol, narrowed by the caller's `--max-dim`.
    pub data_bound: Option<usize>,
    /// The archive's metadata of the `self` argument (its strides and storage offset).
    pub self_meta: Option<&'n crate::schema::TensorMeta>,
}

pub(crate) type OpResult = Result<Vec<Lowered>, String>;

/// The lowering state.
pub(crate) struct Cx {
    pub b: GraphBuilder,
    tensors: HashMap<String, ValueId>,
    sym_ints: HashMap<String, IntOrSym>,
    /// Archive symbol (`s27`) → the graph's symbol index.
    pub symbols: HashMap<String, usize>,
    /// Where each symbol's run-time value can be read: (user input, dim).
    sym_sources: HashMap<usize, (ValueId, usize)>,
}

impl Cx {
    pub fn new() -> Self {
        Cx { b: GraphBuilder::new(), tensors: HashMap::new(), sym_ints: HashMap::new(), symbols: HashMap::new(), sym_sources: HashMap::new() }
    }

    pub fn bind_tensor(&mut self, name: &str, v: ValueId) {
        self.tensors.insert(name.to_string(), v);
    }

    pub fn bind_sym_int(&mut self, name: &str, v: IntOrSym) {
        self.sym_ints.insert(name.to_string(), v);
    }

    pub fn tensor_named(&self, name: &str) -> Result<ValueId, String> {
        self.tensors.get(name).copied().ok_or_else(|| format!("tensor '{name}' is not defined before its use"))
    }

    /// Declares `symbol` (once) with its bounds; returns the graph's dim for it.
    pub fn symbol(&mut self, symbol: &str, min: usize, max: usize) -> Dim {
        if let Some(&s) = self.symbols.get(symbol) {
            return Dim::Sym(s);
        }
        let dim = self.b.sym(symbol, min, max);
        if let Dim::Sym(s) = dim {
            self.symbols.insert(symbol.to_string(), s);
        }
        dim
    }

    /// Records that dim `dim` of the user input `input` carries symbol `s`.
    pub fn sym_source(&mut self, s: usize, input: ValueId, dim: usize) {
        self.sym_sources.entry(s).or_insert((input, dim));
    }

    /// The run-time value of symbol `s`: read once from a user input with `sym_size`.
    pub fn sym_value(&mut self, s: usize) -> Result<ValueId, String> {
        if let Some(v) = self.b.graph.syms[s].value {
            return Ok(v);
        }
        let (input, dim) =
            *self.sym_sources.get(&s).ok_or_else(|| format!("symbol {} is not the size of any input", self.b.graph.syms[s].name))?;
        self.b.sym_size(input, dim).map_err(|e| e.to_string())
    }

    /// A size entry for `dim`: its fixed size or its symbol's run-time value.
    pub fn size_of(&mut self, dim: Dim) -> Result<IntOrSym, String> {
        match dim {
            Dim::Fixed(n) => Ok(IntOrSym::Int(n as i64)),
            Dim::Sym(s) => self.sym_value(s).map(IntOrSym::Sym),
        }
    }

    /// A size-list argument: plain ints when every entry is fixed.
    pub fn size_list(items: &[IntOrSym]) -> Arg {
        match items.iter().map(|i| if let IntOrSym::Int(n) = i { Some(*n) } else { None }).collect::<Option<Vec<_>>>() {
            Some(ints) => Arg::Ints(ints),
            None => Arg::SymInts(items.to_vec()),
        }
    }

    pub fn meta(&self, v: ValueId) -> &TensorMeta {
        self.b.meta(v)
    }

    /// Calls an export-IR op.
    pub fn call(&mut self, op: &str, args: Vec<Arg>) -> Result<Vec<ValueId>, String> {
        self.b.call(op, args).map_err(|e| e.to_string())
    }

    pub fn call1(&mut self, op: &str, args: Vec<Arg>) -> Result<ValueId, String> {
        self.b.call1(op, args).map_err(|e| e.to_string())
    }

    /// Calls an op whose result size may depend on the data, with that size's bound.
    pub fn call_bounded(&mut self, op: &str, args: Vec<Arg>, bound: Option<usize>) -> Result<Vec<ValueId>, String> {
        self.b.call_bounded(op, args, bound).map_err(|e| e.to_string())
    }

    /// `x` viewed as `dims` (sizes may be symbols).
    pub fn view(&mut self, x: ValueId, dims: &[Dim]) -> Result<ValueId, String> {
        if self.meta(x).shape == dims {
            return Ok(x);
        }
        let items = dims.iter().map(|&d| self.size_of(d)).collect::<Result<Vec<_>, _>>()?;
        self.call1("aten::view_copy", vec![Arg::Tensor(x), Self::size_list(&items)])
    }

    /// `x` converted to `dtype` (itself when it already is).
    pub fn cast(&mut self, x: ValueId, dtype: ScalarType) -> Result<ValueId, String> {
        if self.meta(x).dtype == dtype {
            return Ok(x);
        }
        self.call1(
            "aten::_to_copy",
            vec![Arg::Tensor(x), Arg::ScalarType(dtype), Arg::None, Arg::None, Arg::None, Arg::Bool(false), Arg::None],
        )
    }

    /// A rank-0 constant holding `value` as `dtype`.
    pub fn scalar_constant(&mut self, value: Scalar, dtype: ScalarType) -> Result<ValueId, String> {
        let bytes = scalar_bytes(value, dtype).ok_or_else(|| format!("cannot hold the number {value:?} as {dtype}"))?;
        let name = format!("scalar_{}", self.b.graph.values.len());
        self.b.constant(&name, dtype, &[], ConstData::owned(bytes)).map_err(|e| e.to_string())
    }

    /// A constant tensor from host values (`f32`), for masks computed at import.
    pub fn f32_constant(&mut self, name: &str, sizes: &[usize], values: &[f32]) -> Result<ValueId, String> {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.b.constant(name, ScalarType::Float, sizes, ConstData::owned(bytes)).map_err(|e| e.to_string())
    }

    /// Whether `v` is a graph input, a constant or state (not a node's own result).
    pub fn is_leaf(&self, v: ValueId) -> bool {
        !matches!(self.b.graph.values[v].origin, Origin::Computed)
    }

    // ---- typed arguments -------------------------------------------------------------

    pub fn tensor(&self, a: &NodeArgs<'_>, name: &str) -> Result<ValueId, String> {
        match a.get(name)? {
            arg @ (Argument::Tensor(_) | Argument::OptionalTensor(OptionalTensorArgument::Tensor(_))) => {
                self.tensor_named(arg.tensor_name().expect("a tensor"))
            }
            other => Err(format!("argument '{name}' must be a tensor, got {}", other.kind_name())),
        }
    }

    pub fn opt_tensor(&self, a: &NodeArgs<'_>, name: &str) -> Result<Option<ValueId>, String> {
        match a.get(name)? {
            Argument::None(_) | Argument::OptionalTensor(OptionalTensorArgument::None(_)) => Ok(None),
            _ => self.tensor(a, name).map(Some),
        }
    }

    pub fn tensors(&self, a: &NodeArgs<'_>, name: &str) -> Result<Vec<ValueId>, String> {
        match a.get(name)? {
            Argument::Tensors(ts) => ts.iter().map(|t| self.tensor_named(&t.name)).collect(),
            other => Err(format!("argument '{name}' must be a tensor list, got {}", other.kind_name())),
        }
    }

    /// A `Tensor?[]` argument (absent entries are None).
    pub fn opt_tensors(&self, a: &NodeArgs<'_>, name: &str) -> Result<Vec<Option<ValueId>>, String> {
        match a.get(name)? {
            Argument::Tensors(ts) => ts.iter().map(|t| self.tensor_named(&t.name).map(Some)).collect(),
            Argument::OptionalTensors(ts) => ts
                .iter()
                .map(|t| match t {
                    OptionalTensorArgument::Tensor(t) => self.tensor_named(&t.name).map(Some),
                    OptionalTensorArgument::None(_) => Ok(None),
                })
                .collect(),
            other => Err(format!("argument '{name}' must be a list of optional tensors, got {}", other.kind_name())),
        }
    }

    /// A tensor, or a number given where ATen takes a tensor (`x + 1`).
    pub fn operand(&self, a: &NodeArgs<'_>, name: &str) -> Result<Operand, String> {
        match number(a.get(name)?) {
            Some(s) => Ok(Operand::Number(s)),
            None => self.tensor(a, name).map(Operand::Tensor),
        }
    }

    pub fn scalar(&self, a: &NodeArgs<'_>, name: &str) -> Result<Scalar, String> {
        self.opt_scalar(a, name)?.ok_or_else(|| format!("argument '{name}' must be a number"))
    }

    pub fn opt_scalar(&self, a: &NodeArgs<'_>, name: &str) -> Result<Option<Scalar>, String> {
        match a.get(name)? {
            Argument::None(_) => Ok(None),
            arg => number(arg).map(Some).ok_or_else(|| format!("argument '{name}' must be a number, got {}", arg.kind_name())),
        }
    }

    pub fn int(&self, a: &NodeArgs<'_>, name: &str) -> Result<i64, String> {
        match a.get(name)? {
            Argument::Int(i) => Ok(*i),
            Argument::SymInt(s) => match self.sym_int_arg(s)? {
                IntOrSym::Int(i) => Ok(i),
                IntOrSym::Sym(_) => Err(format!("argument '{name}' must be known at export, got a run-time value")),
            },
            other => Err(format!("argument '{name}' must be an int, got {}", other.kind_name())),
        }
    }

    pub fn ints(&self, a: &NodeArgs<'_>, name: &str) -> Result<Vec<i64>, String> {
        self.sym_ints(a, name)?
            .into_iter()
            .map(|i| match i {
                IntOrSym::Int(n) => Ok(n),
                IntOrSym::Sym(_) => Err(format!("argument '{name}' must be known at export, got a run-time value")),
            })
            .collect()
    }

    pub fn opt_ints(&self, a: &NodeArgs<'_>, name: &str) -> Result<Option<Vec<i64>>, String> {
        match a.get(name)? {
            Argument::None(_) => Ok(None),
            _ => self.ints(a, name).map(Some),
        }
    }

    /// A `SymInt` argument: a plain int or a run-time value.
    pub fn sym_int(&self, a: &NodeArgs<'_>, name: &str) -> Result<IntOrSym, String> {
        match a.get(name)? {
            Argument::Int(i) => Ok(IntOrSym::Int(*i)),
            Argument::SymInt(s) => self.sym_int_arg(s),
            other => Err(format!("argument '{name}' must be an int, got {}", other.kind_name())),
        }
    }

    /// An integer or boolean operand of a Python operator on sizes (`_operator.ge(u0, 0)`): a
    /// plain value, or a run-time one (a SymBool is an integer 0/1).
    pub fn sym_scalar(&self, a: &NodeArgs<'_>, name: &str) -> Result<IntOrSym, String> {
        match a.get(name)? {
            Argument::Int(i) => Ok(IntOrSym::Int(*i)),
            Argument::Bool(b) => Ok(IntOrSym::Int(*b as i64)),
            Argument::SymInt(s) => self.sym_int_arg(s),
            Argument::SymBool(SymBoolArgument::Bool(b)) => Ok(IntOrSym::Int(*b as i64)),
            Argument::SymBool(SymBoolArgument::Name(n)) => {
                self.sym_ints.get(n).copied().ok_or_else(|| format!("symbolic bool '{n}' is not defined before its use"))
            }
            other => Err(format!("argument '{name}' must be an integer or bool size, got {}", other.kind_name())),
        }
    }

    /// A `bool[]` argument.
    pub fn bools(&self, a: &NodeArgs<'_>, name: &str) -> Result<Vec<bool>, String> {
        match a.get(name)? {
            Argument::Bools(v) => Ok(v.clone()),
            other => Err(format!("argument '{name}' must be a bool list, got {}", other.kind_name())),
        }
    }

    /// A `float[]?` argument.
    pub fn opt_floats(&self, a: &NodeArgs<'_>, name: &str) -> Result<Option<Vec<f64>>, String> {
        match a.get(name)? {
            Argument::None(_) => Ok(None),
            Argument::Floats(v) => Ok(Some(v.clone())),
            other => Err(format!("argument '{name}' must be a float list or None, got {}", other.kind_name())),
        }
    }

    pub fn opt_sym_int(&self, a: &NodeArgs<'_>, name: &str) -> Result<Option<IntOrSym>, String> {
        match a.get(name)? {
            Argument::None(_) => Ok(None),
            _ => self.sym_int(a, name).map(Some),
        }
    }

    /// A `SymInt[]` argument.
    pub fn sym_ints(&self, a: &NodeArgs<'_>, name: &str) -> Result<Vec<IntOrSym>, String> {
        match a.get(name)? {
            Argument::Ints(v) => Ok(v.iter().map(|&i| IntOrSym::Int(i)).collect()),
            Argument::SymInts(v) => v.iter().map(|s| self.sym_int_arg(s)).collect(),
            Argument::Int(i) => Ok(vec![IntOrSym::Int(*i)]),
            other => Err(format!("argument '{name}' must be an int list, got {}", other.kind_name())),
        }
    }

    fn sym_int_arg(&self, s: &SymIntArgument) -> Result<IntOrSym, String> {
        match s {
            SymIntArgument::Int(i) => Ok(IntOrSym::Int(*i)),
            SymIntArgument::Name(n) => {
                self.sym_ints.get(n).copied().ok_or_else(|| format!("symbolic int '{n}' is not defined before its use"))
            }
        }
    }

    pub fn float(&self, a: &NodeArgs<'_>, name: &str) -> Result<f64, String> {
        match a.get(name)? {
            Argument::Float(f) => Ok(*f),
            Argument::Int(i) => Ok(*i as f64),
            other => Err(format!("argument '{name}' must be a float, got {}", other.kind_name())),
        }
    }

    pub fn opt_float(&self, a: &NodeArgs<'_>, name: &str) -> Result<Option<f64>, String> {
        match a.get(name)? {
            Argument::None(_) => Ok(None),
            _ => self.float(a, name).map(Some),
        }
    }

    pub fn bool(&self, a: &NodeArgs<'_>, name: &str) -> Result<bool, String> {
        match a.get(name)? {
            Argument::Bool(b) => Ok(*b),
            other => Err(format!("argument '{name}' must be a bool, got {}", other.kind_name())),
        }
    }

    pub fn string(&self, a: &NodeArgs<'_>, name: &str) -> Result<String, String> {
        match a.get(name)? {
            Argument::String(s) => Ok(s.clone()),
            other => Err(format!("argument '{name}' must be a string, got {}", other.kind_name())),
        }
    }

    /// A `ScalarType?` argument in rbuild's numbering.
    pub fn dtype(&self, a: &NodeArgs<'_>, name: &str) -> Result<Option<ScalarType>, String> {
        match a.get(name)? {
            Argument::None(_) => Ok(None),
            Argument::ScalarType(t) => {
                t.scalar_type().map(Some).ok_or_else(|| format!("argument '{name}': dtype {} has no rbuild equivalent", t.schema_name()))
            }
            other => Err(format!("argument '{name}' must be a dtype, got {}", other.kind_name())),
        }
    }
}

/// A number argument as a Scalar (ints, floats, bools), if it is one.
fn number(arg: &Argument) -> Option<Scalar> {
    match arg {
        Argument::Int(i) => Some(Scalar::Int(*i)),
        Argument::Float(f) => Some(Scalar::Double(*f)),
        Argument::Bool(b) => Some(Scalar::Bool(*b)),
        _ => None,
    }
}

/// The little-endian bytes of `value` stored as `dtype` (ATen's conversion: floats truncate
/// into integers, nonzero is true).
fn scalar_bytes(value: Scalar, dtype: ScalarType) -> Option<Vec<u8>> {
    let (f, i) = (value.to_f64(), value.to_i64());
    Some(match dtype {
        ScalarType::Float => (f as f32).to_le_bytes().to_vec(),
        ScalarType::Double => f.to_le_bytes().to_vec(),
        ScalarType::Half => half::f16::from_f64(f).to_le_bytes().to_vec(),
        ScalarType::BFloat16 => half::bf16::from_f64(f).to_le_bytes().to_vec(),
        ScalarType::Long => i.to_le_bytes().to_vec(),
        ScalarType::Int => (i as i32).to_le_bytes().to_vec(),
        ScalarType::Short => (i as i16).to_le_bytes().to_vec(),
        ScalarType::Char => vec![i as i8 as u8],
        ScalarType::Byte => vec![i as u8],
        ScalarType::Bool => vec![(f != 0.0) as u8],
        _ => return None,
    })
}
