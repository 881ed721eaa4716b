//! Lowering of an imported `torch.export` program to rbuild's export IR: one `forward`
//! [`Graph`] that the normal passes, memory planner and emitter turn into a `.pte`.
//!
//! - User inputs become graph inputs; a dynamic dim becomes a symbol bounded by the archive's
//!   `range_constraints`, narrowed by [`LowerOptions::max_dims`] (an unbounded one needs it).
//! - Parameters, constants and buffers become constants (tied weights: one constant);
//!   buffers the program writes — `buffer_mutation` outputs of the core-ATen IR, in-place ops
//!   of the training IR — become mutable state starting from their stored value, written
//!   back at the end of each call (`aten::copy_`), so the next call sees the update.
//! - Each node goes through the op table ([`ops::handler`]) with its omitted arguments filled
//!   from the op's schema ([`schemas`]); in-place ops compute functionally and rebind every
//!   name of the tensor they write. An archive with unmapped ops fails once, listing them all.
//! - Every result is checked against the dtype and shape the archive records for it.

mod context;
mod ops;
mod schemas;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

use rbuild_export::graph::{Arg, ConstData, Dim, Graph, IntOrSym, TensorMeta, ValueId};

use crate::model::{Dim as ArchiveDim, ExportedModel, GraphInput};
use crate::schema::{Argument, Node, OptionalTensorArgument, OutputSpec, SymBoolArgument, SymInt, SymIntArgument, TensorMeta as ArchiveMeta};
use crate::tensor::TensorView;
use context::{Call, Cx, Lowered};
use ops::broadcast_to;

/// Choices the caller makes about an import.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LowerOptions {
    /// Largest size of a dynamic dim, by symbol (`s27`) or by input name (every dynamic dim
    /// of that input). Narrows the archive's bound; required where the archive has none.
    pub max_dims: BTreeMap<String, usize>,
}

impl LowerOptions {
    /// Options from bounds given per input dim (`(input name, dim index, max)`, a recipe's
    /// `dim-max`): each must name a dynamic dim of a user input; bounds that reach the same
    /// symbol through several inputs keep the smallest.
    pub fn from_input_dims(model: &ExportedModel<'_>, bounds: &[(String, usize, usize)]) -> Result<LowerOptions, LowerError> {
        let mut max_dims: BTreeMap<String, usize> = BTreeMap::new();
        for (input, d, max) in bounds {
            let names = || model.inputs.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ");
            let t = model.inputs.iter().find(|t| t.name == *input).ok_or_else(|| {
                LowerError::Program(format!("dim-max \"{input}\": the archive has no input of that name (inputs: {})", names()))
            })?;
            match t.dims.get(*d) {
                Some(ArchiveDim::Dynamic { symbol, .. }) => {
                    let slot = max_dims.entry(symbol.clone()).or_insert(*max);
                    *slot = (*slot).min(*max);
                }
                Some(_) => return Err(LowerError::Program(format!("dim-max \"{input}\" {d}: that dim is not dynamic in the archive"))),
                None => return Err(LowerError::Program(format!("dim-max \"{input}\" {d}: the input has {} dims", t.dims.len()))),
            }
        }
        Ok(LowerOptions { max_dims })
    }
}

/// The lowered program and what the import found.
#[derive(Debug, Clone)]
pub struct LoweredProgram {
    pub graph: Graph,
    pub report: ImportReport,
}

/// What was imported, for the export report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Archive call targets (`aten::conv2d.default`) by node count.
    pub ops: BTreeMap<String, usize>,
    /// User inputs as `name: dtype [dims]`, dynamic dims as `symbol<=max`.
    pub inputs: Vec<String>,
    /// Parameters, buffers and constants that became program constants.
    pub constants: usize,
    /// Names stored once for several tensors (tied weights).
    pub shared_constants: usize,
    /// Buffers kept as mutable state.
    pub state: Vec<String>,
}

/// Why an import failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LowerError {
    /// Call targets rbuild has no mapping for, with their node counts, and the targets it
    /// maps to nothing by design ([`ops::EXCEPTIONS`]), with the reason.
    Unmapped(Vec<(String, usize)>, Vec<(String, &'static str)>),
    /// A node that could not be lowered: its name (first output), target and the reason.
    Node { node: String, op: String, message: String },
    /// The program's signature: inputs, dims, buffers, outputs.
    Program(String),
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LowerError::Unmapped(ops, excluded) => {
                let list: Vec<String> = ops.iter().map(|(op, n)| format!("{op} ({n} node{})", if *n == 1 { "" } else { "s" })).collect();
                if !ops.is_empty() {
                    write!(f, "{} operator(s) have no rbuild mapping: {}", ops.len(), list.join(", "))?;
                }
                for (i, (op, why)) in excluded.iter().enumerate() {
                    let sep = if i == 0 && ops.is_empty() { "" } else { "; " };
                    write!(f, "{sep}{op} is not imported: {why}")?;
                }
                Ok(())
            }
            LowerError::Node { node, op, message } => write!(f, "node '{node}' ({op}): {message}"),
            LowerError::Program(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for LowerError {}

/// How one target is lowered.
struct Mapping {
    /// The key the handler and schema go by (an in-place op's functional twin).
    key: String,
    schema: &'static rbuild_export::ops::Schema,
    handler: ops::Handler,
    /// The argument the op writes: `self` for an in-place op (`add_`), `out` for a call of an
    /// out variant (`atan2.out(…, out=buf)`).
    writes: Option<&'static str>,
}

/// `aten::add_.Tensor` → `aten::add.Tensor`; None for functional ops and dunders.
fn functional_twin(key: &str) -> Option<String> {
    let (ns, rest) = key.split_once("::")?;
    let (name, overload) = rest.split_once('.').map_or((rest, None), |(n, o)| (n, Some(o)));
    let base = name.strip_suffix('_').filter(|_| !name.starts_with("__"))?;
    Some(match overload {
        Some(o) => format!("{ns}::{base}.{o}"),
        None => format!("{ns}::{base}"),
    })
}

fn mapping(op_name: &str) -> Option<Mapping> {
    let key = schemas::schema_key(op_name);
    let in_place = functional_twin(key);
    if let (Some(handler), Some(schema)) = (ops::handler(key), schemas::schema(key)) {
        return Some(Mapping { key: key.to_string(), schema, handler, writes: in_place.map(|_| "self") });
    }
    if let Some(twin) = in_place {
        let (handler, schema) = (ops::handler(&twin)?, schemas::schema(&twin)?);
        return Some(Mapping { key: twin, schema, handler, writes: Some("self") });
    }
    // An out variant called with `out=`: the functional op, stored into `out`.
    let def = rbuild_export::ops::all().find(|d| d.out.as_ref().is_some_and(|o| o.key() == key && o.key() != d.functional.key()))?;
    let twin = def.functional.key();
    let handler = ops::handler(&twin)?;
    Some(Mapping { key: twin, schema: def.out.as_ref()?, handler, writes: Some("out") })
}

/// Lowers `model` to one `forward` graph.
pub fn lower(model: &ExportedModel<'_>, options: &LowerOptions) -> Result<LoweredProgram, LowerError> {
    let graph = model.graph();
    let mut report = ImportReport::default();
    let (unmapped, excluded) = unmapped_targets(model);
    if !unmapped.is_empty() || !excluded.is_empty() {
        return Err(LowerError::Unmapped(unmapped, excluded));
    }
    for node in &graph.nodes {
        *report.ops.entry(node.op_name()).or_default() += 1;
    }
    if let Some(m) = model.user_input_mutations.first() {
        return Err(LowerError::Program(format!("the program writes its input '{}' in place; rbuild programs do not change their inputs", m.user_input)));
    }

    let mut cx = Cx::new();
    let mut aliases = Aliases::default();
    let state = declare_inputs(model, options, &mut cx, &mut aliases, &mut report)?;
    let last_read = last_reads(model);
    let mut writes = StateWrites::default();
    for (index, node) in graph.nodes.iter().enumerate() {
        lower_node(model, options, &mut cx, &mut aliases, &mut writes, &last_read, index, node)?;
    }
    finish_outputs(model, &mut cx, &mut writes)?;
    for (fqn, value) in writes.0 {
        let state_value = *state.get(&fqn).ok_or_else(|| {
            LowerError::Program(format!("buffer '{fqn}' is written in a way the archive's signature does not declare (through an alias?)"))
        })?;
        store_state(&mut cx, state_value, value).map_err(|m| LowerError::Program(format!("buffer '{fqn}': {m}")))?;
    }
    report.state = state.keys().cloned().collect();
    Ok(LoweredProgram { graph: cx.b.finish(), report })
}

/// The call targets of `model` that rbuild does not map, with their node counts, and those it
/// maps to nothing by design, with the reason: what an import would reject, before it starts.
pub fn unmapped_targets(model: &ExportedModel<'_>) -> (Vec<(String, usize)>, Vec<(String, &'static str)>) {
    let mut unmapped: BTreeMap<String, usize> = BTreeMap::new();
    let mut excluded: BTreeMap<String, &'static str> = BTreeMap::new();
    for node in &model.graph().nodes {
        let op = node.op_name();
        match ops::exception(schemas::schema_key(&op)) {
            Some(why) => {
                excluded.insert(op, why);
            }
            None if mapping(&op).is_none() => *unmapped.entry(op).or_default() += 1,
            None => {}
        }
    }
    (unmapped.into_iter().collect(), excluded.into_iter().collect())
}

/// Every call target key the import maps (`aten::conv2d`, `aten::add.Tensor`, `_operator.ge`),
/// sorted; an in-place form (`aten::add_.Tensor`) is mapped when its functional twin is.
pub fn mapped_targets() -> Vec<&'static str> {
    ops::mapped_targets()
}

/// The Core ATen targets mapped to nothing by design, with the reason.
pub fn exceptions() -> &'static [(&'static str, &'static str)] {
    ops::EXCEPTIONS
}

/// Whether the import maps the call target `op` (`aten::add_.Tensor`, `aten::conv2d.default`).
pub fn is_mapped(op: &str) -> bool {
    mapping(op).is_some()
}

/// Graph inputs, constants and state; returns the state values by buffer name.
fn declare_inputs(
    model: &ExportedModel<'_>,
    options: &LowerOptions,
    cx: &mut Cx,
    aliases: &mut Aliases,
    report: &mut ImportReport,
) -> Result<BTreeMap<String, ValueId>, LowerError> {
    let program_err = LowerError::Program;
    let mut mutable: BTreeSet<String> = model.buffer_mutations.iter().map(|m| m.buffer.clone()).collect();
    mutable.extend(model.in_place_buffer_writes().into_iter().map(|w| w.buffer));
    check_overrides(model, options)?;
    let mut shared: HashMap<(usize, usize, Vec<usize>, Vec<usize>, u8), ValueId> = HashMap::new();
    let mut state = BTreeMap::new();
    for input in &model.graph_inputs {
        match input {
            GraphInput::User { placeholder, index } => {
                let t = &model.inputs[*index];
                let mut dims = Vec::with_capacity(t.dims.len());
                for (d, dim) in t.dims.iter().enumerate() {
                    dims.push(input_dim(cx, options, &t.name, d, dim)?);
                }
                report.inputs.push(format!("{}: {} {}", t.name, t.dtype.name(), describe_dims(cx, &dims)));
                let v = cx.b.input(placeholder, TensorMeta::new(t.dtype, dims.clone()));
                for (d, dim) in dims.iter().enumerate() {
                    if let Dim::Sym(s) = dim {
                        cx.sym_source(*s, v, d);
                    }
                }
                cx.bind_tensor(placeholder, v);
                aliases.fixed.insert(placeholder.clone(), format!("input '{}'", t.name));
            }
            GraphInput::Buffer { placeholder, fqn, tensor, .. } if mutable.contains(fqn) => {
                let data = ConstData::owned(tensor.contiguous_bytes().into_owned());
                let v = cx.b.state_with_init(fqn, tensor.dtype, &tensor.sizes, data).map_err(|e| program_err(e.to_string()))?;
                cx.bind_tensor(placeholder, v);
                aliases.buffers.insert(placeholder.clone(), fqn.clone());
                state.insert(fqn.clone(), v);
            }
            GraphInput::Parameter { placeholder, fqn, tensor }
            | GraphInput::Buffer { placeholder, fqn, tensor, .. }
            | GraphInput::TensorConstant { placeholder, fqn, tensor } => {
                let key = storage_key(tensor);
                let v = match shared.get(&key) {
                    Some(&v) => {
                        report.shared_constants += 1;
                        v
                    }
                    None => {
                        let data = ConstData::owned(tensor.contiguous_bytes().into_owned());
                        let v = cx.b.constant(fqn, tensor.dtype, &tensor.sizes, data).map_err(|e| program_err(e.to_string()))?;
                        shared.insert(key, v);
                        report.constants += 1;
                        v
                    }
                };
                cx.bind_tensor(placeholder, v);
                aliases.fixed.insert(placeholder.clone(), format!("'{fqn}' (not a mutable buffer)"));
            }
            GraphInput::ConstantInput { placeholder, value: crate::schema::ConstantValue::Int(i) } => {
                cx.bind_sym_int(placeholder, rbuild_export::graph::IntOrSym::Int(*i));
            }
            GraphInput::CustomObj { fqn, class_fqn, .. } => {
                return Err(program_err(format!("input '{fqn}' is a script object ({class_fqn}); rbuild imports tensors")))
            }
            GraphInput::UserConstant { .. } | GraphInput::Token { .. } | GraphInput::ConstantInput { .. } => {}
        }
    }
    Ok(state)
}

/// Views of the same bytes share one constant (tied weights).
fn storage_key(t: &TensorView<'_>) -> (usize, usize, Vec<usize>, Vec<usize>, u8) {
    (t.storage.as_ptr() as usize, t.storage_offset, t.sizes.clone(), t.strides.clone(), t.dtype.code())
}

/// Every `max_dims` key must name a symbol or an input with a dynamic dim.
fn check_overrides(model: &ExportedModel<'_>, options: &LowerOptions) -> Result<(), LowerError> {
    // Input dims, and data-dependent sizes (`u0`): those with a range and those of results.
    let mut known: BTreeSet<&str> = model.program.range_constraints.keys().map(String::as_str).collect();
    for meta in model.graph().tensor_values.values() {
        known.extend(meta.sizes.iter().filter_map(|s| if let SymInt::Expr(e) = s { e.symbol() } else { None }));
    }
    for t in &model.inputs {
        for d in &t.dims {
            if let ArchiveDim::Dynamic { symbol, .. } = d {
                known.insert(symbol);
                known.insert(&t.name);
            }
        }
    }
    match options.max_dims.keys().find(|k| !known.contains(k.as_str())) {
        Some(k) => Err(LowerError::Program(format!(
            "--max-dim {k}: no input has a dynamic dim of that symbol or name (dynamic: {})",
            if known.is_empty() { "none".to_string() } else { known.into_iter().collect::<Vec<_>>().join(", ") }
        ))),
        None => Ok(()),
    }
}

/// A user input's dim in the graph: fixed, or its symbol with bounds.
fn input_dim(cx: &mut Cx, options: &LowerOptions, input: &str, d: usize, dim: &ArchiveDim) -> Result<Dim, LowerError> {
    match dim {
        ArchiveDim::Static(n) => Ok(Dim::Fixed(*n)),
        ArchiveDim::Dynamic { symbol, min, max, .. } => {
            let wanted = options.max_dims.get(symbol).or_else(|| options.max_dims.get(input)).copied();
            let bound = match (wanted, max) {
                (Some(w), _) if w < *min || max.is_some_and(|m| w > m) => {
                    return Err(LowerError::Program(format!(
                        "input '{input}' dim {d} ({symbol}): max {w} is outside the archive's range {min}..={}",
                        max.map_or("unbounded".to_string(), |m| m.to_string())
                    )))
                }
                (Some(w), _) => w,
                (None, Some(m)) => *m,
                (None, None) => {
                    return Err(LowerError::Program(format!(
                        "input '{input}' dim {d} ({symbol}) has no upper bound in the archive: give one (--max-dim {symbol}=N)"
                    )))
                }
            };
            Ok(cx.symbol(symbol, *min, bound))
        }
        ArchiveDim::Derived { expr, .. } => Err(LowerError::Program(format!(
            "input '{input}' dim {d} is the expression {expr}; rbuild takes inputs whose dims are fixed or one symbol"
        ))),
    }
}

fn describe_dims(cx: &Cx, dims: &[Dim]) -> String {
    let items: Vec<String> = dims
        .iter()
        .map(|d| match *d {
            Dim::Fixed(n) => n.to_string(),
            Dim::Sym(s) => {
                let sym = &cx.b.graph.syms[s];
                format!("{}<={}", sym.name, sym.max)
            }
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// The last node index reading each tensor name (graph outputs: past the end).
fn last_reads(model: &ExportedModel<'_>) -> HashMap<String, usize> {
    let mut last = HashMap::new();
    for (i, node) in model.graph().nodes.iter().enumerate() {
        for a in &node.inputs {
            for name in tensor_names(&a.arg) {
                last.insert(name.to_string(), i);
            }
        }
    }
    for out in &model.graph().outputs {
        for name in tensor_names(out) {
            last.insert(name.to_string(), usize::MAX);
        }
    }
    last
}

fn tensor_names(arg: &Argument) -> Vec<&str> {
    match arg {
        Argument::Tensor(t) | Argument::OptionalTensor(OptionalTensorArgument::Tensor(t)) => vec![&t.name],
        Argument::Tensors(ts) => ts.iter().map(|t| t.name.as_str()).collect(),
        Argument::OptionalTensors(ts) => {
            ts.iter().filter_map(|t| if let OptionalTensorArgument::Tensor(t) = t { Some(t.name.as_str()) } else { None }).collect()
        }
        _ => vec![],
    }
}

/// One node output as the archive names it.
enum Slot<'n> {
    Tensor(&'n str),
    SymInt(&'n str),
    Unused,
}

fn output_slots(node: &Node) -> Vec<Slot<'_>> {
    node.outputs
        .iter()
        .flat_map(|o| match o {
            Argument::Tensor(t) | Argument::OptionalTensor(OptionalTensorArgument::Tensor(t)) => vec![Slot::Tensor(&t.name)],
            Argument::Tensors(ts) => ts.iter().map(|t| Slot::Tensor(&t.name)).collect(),
            Argument::OptionalTensors(ts) => ts
                .iter()
                .map(|t| if let OptionalTensorArgument::Tensor(t) = t { Slot::Tensor(&t.name) } else { Slot::Unused })
                .collect(),
            Argument::SymInt(SymIntArgument::Name(n)) | Argument::SymBool(SymBoolArgument::Name(n)) => vec![Slot::SymInt(n)],
            _ => vec![Slot::Unused],
        })
        .collect()
}

fn node_label(node: &Node, index: usize) -> String {
    output_slots(node)
        .into_iter()
        .find_map(|s| match s {
            Slot::Tensor(n) | Slot::SymInt(n) => Some(n.to_string()),
            Slot::Unused => None,
        })
        .or_else(|| node.name.clone())
        .unwrap_or_else(|| format!("#{index}"))
}

/// An archive tensor's dims in the graph's terms (None for sizes that are expressions).
fn archive_dims(cx: &Cx, meta: &ArchiveMeta) -> Result<Vec<Dim>, String> {
    meta.sizes
        .iter()
        .map(|s| match s {
            SymInt::Int(n) => usize::try_from(*n).map(Dim::Fixed).map_err(|_| format!("negative size {n}")),
            SymInt::Expr(e) => match e.symbol() {
                Some(sym) => cx.symbols.get(sym).map(|&s| Dim::Sym(s)).ok_or_else(|| {
                    format!("size {sym} is not an input dim (a data-dependent size, which rbuild cannot plan)")
                }),
                None => Err(format!("size {} is an expression of symbols, which rbuild's shapes cannot carry", e.expr_str)),
            },
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn lower_node(
    model: &ExportedModel<'_>,
    options: &LowerOptions,
    cx: &mut Cx,
    aliases: &mut Aliases,
    writes: &mut StateWrites,
    last_read: &HashMap<String, usize>,
    index: usize,
    node: &Node,
) -> Result<(), LowerError> {
    let op = node.op_name();
    let fail = |message: String| LowerError::Node { node: node_label(node, index), op: op.clone(), message };
    let m = mapping(&op).ok_or_else(|| fail("no mapping".into()))?;
    let args = schemas::NodeArgs::resolve(node, m.schema).map_err(fail)?;
    let slots = output_slots(node);
    let tensor_values = &model.graph().tensor_values;
    let first_meta = slots.iter().find_map(|s| if let Slot::Tensor(n) = s { tensor_values.get(*n) } else { None });
    let out_dims = first_meta.and_then(|meta| archive_dims(cx, meta).ok());
    let data_bound = first_meta.and_then(|meta| data_dependent_bound(model, options, cx, meta));
    let self_name = node.input("self").and_then(Argument::tensor_name);
    let self_meta = self_name.and_then(|n| tensor_values.get(n));
    let call = Call { key: &m.key, args, out_dims, data_bound, self_meta };
    let mut outs = (m.handler)(cx, &call).map_err(fail)?;
    let written = m.writes.and_then(|arg| node.input(arg)).and_then(Argument::tensor_name);
    if let Some(arg) = m.writes {
        let target = written.ok_or_else(|| fail(format!("an op writing its '{arg}' argument without that tensor")))?;
        let Some(Lowered::Tensor(result)) = outs.first().copied() else { return Err(fail("an in-place op without a result".into())) };
        let stored = store_in_place(cx, aliases, last_read, index, target, result).map_err(fail)?;
        if let Some((fqn, value)) = stored {
            writes.set(fqn, value);
        }
        outs[0] = Lowered::Tensor(cx.tensor_named(target).map_err(fail)?);
    }
    if outs.len() != slots.len() {
        return Err(fail(format!("lowered to {} outputs but the archive lists {}", outs.len(), slots.len())));
    }
    for (slot, out) in slots.iter().zip(&outs) {
        match (slot, *out) {
            (Slot::Tensor(name), Lowered::Tensor(v)) => {
                if let Some(meta) = tensor_values.get(*name) {
                    bind_data_dependent(cx, v, meta);
                    check_meta(cx, v, meta).map_err(|e| fail(format!("result '{name}': {e}")))?;
                }
                cx.bind_tensor(name, v);
                if let Some(of) = if m.writes.is_some() { written } else { self_name } {
                    let whole = m.writes.is_some() || (ops::is_whole_alias(&m.key) && cx.tensor_named(of).ok() == Some(v));
                    if whole || ops::is_view(&m.key) {
                        aliases.link(name, of, whole);
                    }
                }
            }
            (Slot::SymInt(name), Lowered::Int(i)) => {
                bind_run_time_int(model, options, cx, name, i);
                cx.bind_sym_int(name, i)
            }
            (Slot::Unused, _) => {}
            _ => return Err(fail(format!("lowered output {out:?} does not fit the archive's output kind"))),
        }
    }
    Ok(())
}

/// The archive's bound for a size of `meta` that is a new (data-dependent) symbol: its range,
/// narrowed by `--max-dim`.
fn data_dependent_bound(model: &ExportedModel<'_>, options: &LowerOptions, cx: &Cx, meta: &ArchiveMeta) -> Option<usize> {
    meta.sizes.iter().find_map(|size| {
        let SymInt::Expr(e) = size else { return None };
        let symbol = e.symbol().filter(|s| !cx.symbols.contains_key(*s))?;
        symbol_bound(model, options, symbol)
    })
}

/// A symbol's largest value: its archive range's, narrowed by `--max-dim`.
fn symbol_bound(model: &ExportedModel<'_>, options: &LowerOptions, symbol: &str) -> Option<usize> {
    let archive = model.range(symbol).and_then(|r| r.max_val).and_then(|m| usize::try_from(m).ok());
    match (archive, options.max_dims.get(symbol).copied()) {
        (Some(a), Some(o)) => Some(a.min(o)),
        (a, o) => a.or(o),
    }
}

/// Names the graph's new symbols after the archive's: a result dim the lowering made a fresh
/// (data-dependent) symbol is the archive's `u0`, whose run-time value is that dim's size.
fn bind_data_dependent(cx: &mut Cx, v: ValueId, meta: &ArchiveMeta) {
    for (d, size) in meta.sizes.iter().enumerate() {
        let (SymInt::Expr(e), Some(&Dim::Sym(s))) = (size, cx.meta(v).shape.get(d)) else { continue };
        let Some(symbol) = e.symbol() else { continue };
        let named = cx.symbols.values().any(|&t| t == s);
        if !cx.symbols.contains_key(symbol) && !named {
            cx.symbols.insert(symbol.to_string(), s);
            cx.sym_source(s, v, d);
        }
    }
}

/// A run-time integer the archive names with a new symbol (`u0 = x.item()`) becomes that
/// symbol, bounded by its range, so sizes can refer to it.
fn bind_run_time_int(model: &ExportedModel<'_>, options: &LowerOptions, cx: &mut Cx, name: &str, value: IntOrSym) {
    let IntOrSym::Sym(v) = value else { return };
    let Some(SymInt::Expr(e)) = model.graph().sym_int_values.get(name) else { return };
    let Some(symbol) = e.symbol() else { return };
    if cx.symbols.contains_key(symbol) || cx.b.graph.syms.iter().any(|s| s.value == Some(v)) {
        return;
    }
    let Some(max) = symbol_bound(model, options, symbol) else { return };
    let min = model.range(symbol).and_then(|r| r.min_val).and_then(|m| usize::try_from(m).ok()).unwrap_or(0);
    if let Dim::Sym(s) = cx.symbol(symbol, min, max) {
        cx.b.graph.syms[s].value = Some(v);
    }
}

/// The graph's dtype and shape for `v` against the archive's record.
fn check_meta(cx: &Cx, v: ValueId, meta: &ArchiveMeta) -> Result<(), String> {
    let got = cx.meta(v);
    let dtype = meta.dtype.scalar_type().ok_or_else(|| format!("dtype {} has no rbuild equivalent", meta.dtype.schema_name()))?;
    let dims = archive_dims(cx, meta)?;
    if got.dtype != dtype || got.shape != dims {
        return Err(format!("the lowering gives {} {:?} where the archive has {} {:?}", got.dtype, got.shape, dtype, dims));
    }
    Ok(())
}

/// An in-place result: cast to the target's dtype, bound to every name of the tensor written.
/// Returns the buffer to update when the tensor is a mutable buffer.
fn store_in_place(
    cx: &mut Cx,
    aliases: &Aliases,
    last_read: &HashMap<String, usize>,
    index: usize,
    target: &str,
    result: ValueId,
) -> Result<Option<(String, ValueId)>, String> {
    let old = cx.tensor_named(target)?;
    let (dtype, shape) = (cx.meta(old).dtype, cx.meta(old).shape.clone());
    let value = cx.cast(result, dtype)?;
    if cx.meta(value).shape != shape {
        return Err(format!("the result {:?} does not fit the tensor written, {shape:?}", cx.meta(value).shape));
    }
    aliases.write(cx, last_read, index, target, value)
}

/// User outputs (cloned when they are inputs, constants, state or repeated) and the core-ATen
/// IR's buffer mutations.
fn finish_outputs(model: &ExportedModel<'_>, cx: &mut Cx, writes: &mut StateWrites) -> Result<(), LowerError> {
    let graph = model.graph();
    let mut seen = HashSet::new();
    for (spec, arg) in model.program.graph_module.signature.output_specs.iter().zip(&graph.outputs) {
        let err = |m: String| LowerError::Program(format!("output: {m}"));
        match spec {
            OutputSpec::UserOutput { .. } => {
                let name = arg.tensor_name().ok_or_else(|| err(format!("{} is not a tensor", arg.kind_name())))?;
                let mut v = cx.tensor_named(name).map_err(err)?;
                if cx.is_leaf(v) || !seen.insert(v) {
                    v = cx.call1("aten::clone", vec![Arg::Tensor(v), Arg::None]).map_err(err)?;
                }
                cx.b.output(v);
            }
            OutputSpec::BufferMutation { arg, buffer_name } => {
                writes.set(buffer_name.clone(), cx.tensor_named(&arg.name).map_err(err)?);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Appends the write of `value` into `state`, converted to its dtype and shape.
fn store_state(cx: &mut Cx, state: ValueId, value: ValueId) -> Result<(), String> {
    if state == value {
        return Ok(());
    }
    let meta = cx.meta(state).clone();
    let value = cx.cast(value, meta.dtype)?;
    let value = broadcast_to(cx, value, &meta.shape)?;
    cx.b.write_state(state, value).map_err(|e| e.to_string())
}

/// The latest value written into each buffer, in first-write order.
#[derive(Default)]
struct StateWrites(Vec<(String, ValueId)>);

impl StateWrites {
    fn set(&mut self, fqn: String, value: ValueId) {
        match self.0.iter_mut().find(|(f, _)| *f == fqn) {
            Some(slot) => slot.1 = value,
            None => self.0.push((fqn, value)),
        }
    }
}

/// Which archive names are the same tensor (a whole alias, such as an in-place op's result)
/// or a part of it (a view), so that an in-place write reaches every name that sees it.
#[derive(Default)]
struct Aliases {
    /// name → (the name of the tensor it aliases, whether it is the whole tensor).
    group: HashMap<String, (String, bool)>,
    members: HashMap<String, Vec<String>>,
    /// Placeholders of mutable buffers → buffer name.
    buffers: HashMap<String, String>,
    /// Placeholders that must never be written (user inputs, parameters, constants), with a
    /// description.
    fixed: HashMap<String, String>,
}

impl Aliases {
    fn root(&self, name: &str) -> (String, bool) {
        self.group.get(name).cloned().unwrap_or_else(|| (name.to_string(), true))
    }

    fn link(&mut self, name: &str, of: &str, whole: bool) {
        let (root, of_whole) = self.root(of);
        self.members.entry(root.clone()).or_default().push(name.to_string());
        self.group.insert(name.to_string(), (root, of_whole && whole));
    }

    /// Rebinds the names of the tensor `name` (written at node `at`) to `value`; fails where a
    /// view would go stale. Returns the buffer written, if any.
    fn write(&self, cx: &mut Cx, last_read: &HashMap<String, usize>, at: usize, name: &str, value: ValueId) -> Result<Option<(String, ValueId)>, String> {
        let (root, whole) = self.root(name);
        if let Some(what) = self.fixed.get(&root) {
            return Err(format!("writes {what} in place; rbuild programs keep their inputs and weights unchanged"));
        }
        let members: Vec<&String> = std::iter::once(&root).chain(self.members.get(&root).into_iter().flatten()).collect();
        let read_later = |m: &str| last_read.get(m).is_some_and(|&r| r > at);
        for m in &members {
            let m_whole = self.root(m).1;
            // Other names keep their value unless they are the whole tensor written as a whole.
            let stale = m.as_str() != name && !(whole && m_whole);
            if stale && read_later(m) {
                return Err(format!(
                    "writes '{name}' in place while '{m}', {} of the same tensor, is read later; rbuild imports in-place writes to whole tensors",
                    if m_whole { "another name" } else { "a view" }
                ));
            }
        }
        if !whole {
            if let Some(fqn) = self.buffers.get(&root) {
                return Err(format!("writes buffer '{fqn}' through a view ('{name}'); rbuild imports in-place writes to whole buffers"));
            }
            cx.bind_tensor(name, value);
            return Ok(None);
        }
        for m in members.iter().filter(|m| self.root(m).1) {
            cx.bind_tensor(m, value);
        }
        Ok(self.buffers.get(&root).map(|fqn| (fqn.clone(), value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_targets_map_through_their_functional_twin() {
        assert_eq!(functional_twin("aten::add_.Tensor").as_deref(), Some("aten::add.Tensor"));
        assert_eq!(functional_twin("aten::relu_").as_deref(), Some("aten::relu"));
        assert_eq!(functional_twin("aten::__and__.Tensor"), None);
        assert_eq!(functional_twin("aten::relu"), None);
        let m = mapping("aten::hardtanh_.default").unwrap();
        assert_eq!(m.writes, Some("self"));
        assert_eq!(m.key, "aten::hardtanh");
        assert_eq!(mapping("aten::copy_.default").unwrap().writes, Some("self"));
        assert_eq!(mapping("aten::conv2d.default").unwrap().writes, None);
        let out = mapping("aten::atan2.out").unwrap();
        assert_eq!((out.key.as_str(), out.writes), ("aten::atan2", Some("out")));
        assert!(mapping("aten::no_such_op.default").is_none());
    }

    #[test]
    fn every_handled_key_has_a_schema() {
        for key in ops::TABLE.iter().flat_map(|(keys, _)| keys.iter()) {
            assert!(schemas::schema(key).is_some(), "{key} has a handler but no schema");
        }
    }
}
