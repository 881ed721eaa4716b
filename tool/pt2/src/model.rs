//! The resolved view of one exported program: every graph placeholder classified by the
//! signature (user input, parameter, buffer, constant, …) with its weights viewed in place,
//! user inputs and outputs with dtypes and (dynamic) dims, and the state the program mutates.

use std::collections::BTreeMap;

use rbuild_runtime::ScalarType;

use crate::archive::{PayloadKind, Pt2Archive};
use crate::error::{ErrorKind, Pt2Error, Result};
use crate::schema::{
    Argument, ConstantValue, ExportedProgram, Graph, InputSpec, OutputSpec, PayloadConfig, PayloadMeta,
    RangeConstraint, SymInt, TensorMeta,
};
use crate::tensor::TensorView;

/// One dimension of a user input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    Static(usize),
    /// A dimension that is one symbol, with the symbol's `range_constraints` (inclusive).
    /// `max: None` is unbounded (PyTorch's `int_oo`): the lowering must get a bound elsewhere
    /// (the recipe) before it can plan memory. A symbol with no recorded constraint gets
    /// `min: 0, max: None`. `hint` is the size seen at export.
    Dynamic {
        symbol: String,
        min: usize,
        max: Option<usize>,
        hint: Option<usize>,
    },
    /// A size that is an expression of symbols (`Mul(Integer(2), Symbol('s0', …))`), kept as
    /// text with the value seen at export.
    Derived {
        expr: String,
        hint: Option<usize>,
    },
}

impl Dim {
    /// The size seen at export (the static size, or the symbol's hint).
    pub fn hint(&self) -> Option<usize> {
        match self {
            Dim::Static(n) => Some(*n),
            Dim::Dynamic { hint, .. } | Dim::Derived { hint, .. } => *hint,
        }
    }
}

/// A tensor the caller passes in or gets back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserTensor {
    /// The graph's name for it (the placeholder, or the returned value).
    pub name: String,
    pub dtype: ScalarType,
    pub dims: Vec<Dim>,
}

/// A graph placeholder, as the signature classifies it (graph input order).
#[derive(Debug, Clone)]
pub enum GraphInput<'a> {
    /// A tensor argument of the caller: `ExportedModel::inputs[index]`.
    User {
        placeholder: String,
        index: usize,
    },
    /// A non-tensor argument of the caller (int, float, bool, string, None): export fixed its
    /// value, the graph uses it as a constant.
    UserConstant {
        value: Argument,
    },
    Parameter {
        placeholder: String,
        fqn: String,
        tensor: TensorView<'a>,
    },
    /// Persistent buffers come from `data/weights/`, non-persistent ones from `data/constants/`.
    Buffer {
        placeholder: String,
        fqn: String,
        persistent: bool,
        tensor: TensorView<'a>,
    },
    TensorConstant {
        placeholder: String,
        fqn: String,
        tensor: TensorView<'a>,
    },
    /// A script object; its payload is a pickle and is not read.
    CustomObj {
        placeholder: String,
        fqn: String,
        class_fqn: String,
    },
    /// An effect token (orders side effects; carries no data).
    Token {
        placeholder: String,
    },
    ConstantInput {
        placeholder: String,
        value: ConstantValue,
    },
}

impl<'a> GraphInput<'a> {
    pub fn placeholder(&self) -> Option<&str> {
        match self {
            GraphInput::User { placeholder, .. }
            | GraphInput::Parameter { placeholder, .. }
            | GraphInput::Buffer { placeholder, .. }
            | GraphInput::TensorConstant { placeholder, .. }
            | GraphInput::CustomObj { placeholder, .. }
            | GraphInput::Token { placeholder }
            | GraphInput::ConstantInput { placeholder, .. } => Some(placeholder),
            GraphInput::UserConstant { .. } => None,
        }
    }

    /// The stored tensor of a parameter, buffer or tensor constant.
    pub fn tensor(&self) -> Option<&TensorView<'a>> {
        match self {
            GraphInput::Parameter { tensor, .. }
            | GraphInput::Buffer { tensor, .. }
            | GraphInput::TensorConstant { tensor, .. } => Some(tensor),
            _ => None,
        }
    }
}

/// A graph output that becomes a buffer's new value (`buffer_mutation` output spec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferMutation {
    /// The graph value returned.
    pub output: String,
    /// The buffer's fully qualified name.
    pub buffer: String,
}

/// A graph output written back into a user input (`user_input_mutation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInputMutation {
    pub output: String,
    pub user_input: String,
}

/// An in-place op (`mul_`, `add_`, `copy_`, …) writing a buffer, as the training IR keeps
/// them instead of `buffer_mutation` outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InPlaceBufferWrite {
    pub buffer: String,
    /// Index into the graph's `nodes`.
    pub node: usize,
    /// `aten::mul_.Tensor`.
    pub op: String,
}

/// One program of an archive, resolved. Borrows the archive for its weight views.
#[derive(Debug, Clone)]
pub struct ExportedModel<'a> {
    /// The model's name in `models/` (`model`).
    pub name: String,
    pub program: ExportedProgram,
    /// Every placeholder, in `program.graph_module.graph.inputs` order.
    pub graph_inputs: Vec<GraphInput<'a>>,
    /// The caller's tensor arguments, in order.
    pub inputs: Vec<UserTensor>,
    /// The caller's results, in order.
    pub outputs: Vec<UserTensor>,
    pub buffer_mutations: Vec<BufferMutation>,
    pub user_input_mutations: Vec<UserInputMutation>,
}

impl<'a> ExportedModel<'a> {
    pub(crate) fn resolve(archive: &'a Pt2Archive, name: &str) -> Result<Self> {
        let program = archive.program(name)?;
        let weights = archive.payload_config(PayloadKind::Weights, name)?;
        let constants = archive.payload_config(PayloadKind::Constants, name)?;
        let model_member = format!("models/{name}.json");
        let program_error = |message: String| archive.member_error(&model_member, ErrorKind::Program, message);
        let graph = &program.graph_module.graph;
        let signature = &program.graph_module.signature;
        let resolver = Resolver { archive, name, weights: &weights, constants: &constants, program: &program };

        if graph.inputs.len() != signature.input_specs.len() {
            return Err(program_error(format!(
                "the graph has {} inputs but the signature {} input specs",
                graph.inputs.len(),
                signature.input_specs.len()
            )));
        }
        let mut graph_inputs = Vec::with_capacity(graph.inputs.len());
        let mut inputs = Vec::new();
        for (position, (spec, arg)) in signature.input_specs.iter().zip(&graph.inputs).enumerate() {
            // Tokens and constant inputs may be serialized without a name; a named graph
            // input must match its spec.
            let check_name = |spec_name: &str, name_required: bool| -> Result<String> {
                let graph_name = graph_value_name(arg);
                if graph_name != Some(spec_name) && (name_required || graph_name.is_some()) {
                    return Err(program_error(format!(
                        "graph input {position} is {} but its input spec names '{spec_name}'",
                        graph_name.map_or_else(|| arg.kind_name().to_string(), |n| format!("'{n}'"))
                    )));
                }
                Ok(spec_name.to_string())
            };
            let input = match spec {
                InputSpec::UserInput { arg: Argument::Tensor(t) } => {
                    let placeholder = check_name(&t.name, true)?;
                    let meta = resolver.graph_meta(&t.name, "user input")?;
                    inputs.push(resolver.user_tensor(&t.name, meta)?);
                    GraphInput::User { placeholder, index: inputs.len() - 1 }
                }
                InputSpec::UserInput {
                    arg:
                        value @ (Argument::None(_)
                        | Argument::Int(_)
                        | Argument::Float(_)
                        | Argument::Bool(_)
                        | Argument::String(_)),
                } => GraphInput::UserConstant { value: value.clone() },
                InputSpec::UserInput { arg } => {
                    return Err(archive.member_error(
                        &model_member,
                        ErrorKind::Unsupported,
                        format!(
                            "user input {position} is {}; rbuild imports tensor and constant inputs",
                            arg.kind_name()
                        ),
                    ))
                }
                InputSpec::Parameter { arg, parameter_name } => GraphInput::Parameter {
                    placeholder: check_name(&arg.name, true)?,
                    fqn: parameter_name.clone(),
                    tensor: resolver.stored_tensor(parameter_name, &arg.name, PayloadKind::Weights)?,
                },
                InputSpec::Buffer { arg, buffer_name, persistent } => GraphInput::Buffer {
                    placeholder: check_name(&arg.name, true)?,
                    fqn: buffer_name.clone(),
                    persistent: *persistent,
                    tensor: resolver.stored_tensor(
                        buffer_name,
                        &arg.name,
                        if *persistent { PayloadKind::Weights } else { PayloadKind::Constants },
                    )?,
                },
                InputSpec::TensorConstant { arg, tensor_constant_name } => GraphInput::TensorConstant {
                    placeholder: check_name(&arg.name, true)?,
                    fqn: tensor_constant_name.clone(),
                    tensor: resolver.stored_tensor(tensor_constant_name, &arg.name, PayloadKind::Constants)?,
                },
                InputSpec::CustomObj { arg, custom_obj_name } => GraphInput::CustomObj {
                    placeholder: check_name(&arg.name, true)?,
                    fqn: custom_obj_name.clone(),
                    class_fqn: arg.class_fqn.clone(),
                },
                InputSpec::Token { arg } => GraphInput::Token { placeholder: check_name(&arg.name, false)? },
                InputSpec::ConstantInput { name, value } => {
                    GraphInput::ConstantInput { placeholder: check_name(name, false)?, value: value.clone() }
                }
            };
            graph_inputs.push(input);
        }

        if graph.outputs.len() != signature.output_specs.len() {
            return Err(program_error(format!(
                "the graph has {} outputs but the signature {} output specs",
                graph.outputs.len(),
                signature.output_specs.len()
            )));
        }
        let mut outputs = Vec::new();
        let mut buffer_mutations = Vec::new();
        let mut user_input_mutations = Vec::new();
        for (position, spec) in signature.output_specs.iter().enumerate() {
            match spec {
                OutputSpec::UserOutput { arg: Argument::Tensor(t) } => {
                    let meta = resolver.graph_meta(&t.name, "user output")?;
                    outputs.push(resolver.user_tensor(&t.name, meta)?);
                }
                OutputSpec::BufferMutation { arg, buffer_name } => {
                    let known =
                        graph_inputs.iter().any(|i| matches!(i, GraphInput::Buffer { fqn, .. } if fqn == buffer_name));
                    if !known {
                        return Err(program_error(format!(
                            "output {position} mutates buffer '{buffer_name}', which is not an input buffer"
                        )));
                    }
                    buffer_mutations.push(BufferMutation { output: arg.name.clone(), buffer: buffer_name.clone() });
                }
                OutputSpec::UserInputMutation { arg, user_input_name } => user_input_mutations
                    .push(UserInputMutation { output: arg.name.clone(), user_input: user_input_name.clone() }),
                // Tokens only order side effects; they carry no data.
                OutputSpec::Token { .. } => {}
                OutputSpec::UserOutput { arg } => {
                    return Err(archive.member_error(
                        &model_member,
                        ErrorKind::Unsupported,
                        format!("user output {position} is {}; rbuild imports tensor outputs", arg.kind_name()),
                    ))
                }
                other => {
                    return Err(archive.member_error(
                        &model_member,
                        ErrorKind::Unsupported,
                        format!(
                            "output {position} is a {} (training only); rbuild imports inference programs",
                            other.kind_name()
                        ),
                    ))
                }
            }
        }

        Ok(ExportedModel {
            name: name.to_string(),
            graph_inputs,
            inputs,
            outputs,
            buffer_mutations,
            user_input_mutations,
            program,
        })
    }

    pub fn graph(&self) -> &Graph {
        &self.program.graph_module.graph
    }

    /// Parameters by fully qualified name, in signature order.
    pub fn parameters(&self) -> impl Iterator<Item = (&str, &TensorView<'a>)> {
        self.graph_inputs.iter().filter_map(|i| match i {
            GraphInput::Parameter { fqn, tensor, .. } => Some((fqn.as_str(), tensor)),
            _ => None,
        })
    }

    /// Buffers by fully qualified name with their `persistent` flag.
    pub fn buffers(&self) -> impl Iterator<Item = (&str, bool, &TensorView<'a>)> {
        self.graph_inputs.iter().filter_map(|i| match i {
            GraphInput::Buffer { fqn, persistent, tensor, .. } => Some((fqn.as_str(), *persistent, tensor)),
            _ => None,
        })
    }

    /// Tensor constants by fully qualified name.
    pub fn constants(&self) -> impl Iterator<Item = (&str, &TensorView<'a>)> {
        self.graph_inputs.iter().filter_map(|i| match i {
            GraphInput::TensorConstant { fqn, tensor, .. } => Some((fqn.as_str(), tensor)),
            _ => None,
        })
    }

    /// The placeholder named `name`.
    pub fn graph_input(&self, placeholder: &str) -> Option<&GraphInput<'a>> {
        self.graph_inputs.iter().find(|i| i.placeholder() == Some(placeholder))
    }

    /// A symbol's inclusive range, if `range_constraints` records it.
    pub fn range(&self, symbol: &str) -> Option<RangeConstraint> {
        self.program.range_constraints.get(symbol).copied()
    }

    /// The dims of a tensor's metadata, symbols resolved against `range_constraints`.
    pub fn dims(&self, meta: &TensorMeta) -> std::result::Result<Vec<Dim>, String> {
        dims_of(meta, &self.program.range_constraints)
    }

    /// In-place ops whose target is a buffer (directly or through earlier in-place results),
    /// in graph order. Writes through views (`buffer.view(…).add_(…)`) are not traced.
    pub fn in_place_buffer_writes(&self) -> Vec<InPlaceBufferWrite> {
        let mut aliases: BTreeMap<&str, &str> = BTreeMap::new();
        for input in &self.graph_inputs {
            if let GraphInput::Buffer { placeholder, fqn, .. } = input {
                aliases.insert(placeholder, fqn);
            }
        }
        let mut writes = Vec::new();
        for (index, node) in self.graph().nodes.iter().enumerate() {
            let op = node.op_name();
            let Some(self_name) = node.inputs.first().and_then(|a| a.arg.tensor_name()) else { continue };
            let Some(&buffer) = aliases.get(self_name) else { continue };
            if !is_in_place(&op) {
                continue;
            }
            writes.push(InPlaceBufferWrite { buffer: buffer.to_string(), node: index, op });
            // The result of an in-place op is the buffer itself.
            if let Some(out) = node.outputs.first().and_then(Argument::tensor_name) {
                aliases.insert(out, buffer);
            }
        }
        writes
    }
}

/// `aten::mul_.Tensor` is in place; dunder ops (`aten::__and__.Tensor`) are not.
fn is_in_place(op: &str) -> bool {
    let name = op.split("::").nth(1).unwrap_or(op);
    let name = name.split('.').next().unwrap_or(name);
    name.ends_with('_') && !name.starts_with("__")
}

/// A graph input's name, when its kind has one.
fn graph_value_name(arg: &Argument) -> Option<&str> {
    match arg {
        Argument::Tensor(t) => Some(&t.name),
        Argument::CustomObj(c) => Some(&c.name),
        Argument::SymInt(crate::schema::SymIntArgument::Name(n)) => Some(n),
        _ => None,
    }
}

pub(crate) fn dims_of(
    meta: &TensorMeta,
    ranges: &BTreeMap<String, RangeConstraint>,
) -> std::result::Result<Vec<Dim>, String> {
    let as_size = |v: i64| usize::try_from(v).map_err(|_| format!("negative size {v}"));
    meta.sizes
        .iter()
        .map(|size| match size {
            SymInt::Int(n) => Ok(Dim::Static(as_size(*n)?)),
            SymInt::Expr(e) => {
                let hint = e.int_hint().and_then(|h| usize::try_from(h).ok());
                Ok(match e.symbol() {
                    Some(symbol) => {
                        let range = ranges.get(symbol);
                        let bound = |v: Option<i64>| v.map(|v| usize::try_from(v.max(0)).unwrap_or(usize::MAX));
                        Dim::Dynamic {
                            symbol: symbol.to_string(),
                            min: bound(range.and_then(|r| r.min_val)).unwrap_or(0),
                            max: bound(range.and_then(|r| r.max_val)),
                            hint,
                        }
                    }
                    None => Dim::Derived { expr: e.expr_str.clone(), hint },
                })
            }
        })
        .collect()
}

/// Looks weights and graph metadata up for one program.
struct Resolver<'r, 'a> {
    archive: &'a Pt2Archive,
    name: &'r str,
    weights: &'r PayloadConfig,
    constants: &'r PayloadConfig,
    program: &'r ExportedProgram,
}

impl<'r, 'a> Resolver<'r, 'a> {
    fn model_error(&self, kind: ErrorKind, message: String) -> Pt2Error {
        self.archive.member_error(&format!("models/{}.json", self.name), kind, message)
    }

    fn graph_meta(&self, tensor: &str, role: &str) -> Result<&'r TensorMeta> {
        self.program.graph_module.graph.tensor_values.get(tensor).ok_or_else(|| {
            self.model_error(ErrorKind::Program, format!("{role} '{tensor}' has no entry in graph.tensor_values"))
        })
    }

    fn user_tensor(&self, name: &str, meta: &TensorMeta) -> Result<UserTensor> {
        let dtype = meta.dtype.scalar_type().ok_or_else(|| {
            self.model_error(
                ErrorKind::Unsupported,
                format!("tensor '{name}' has dtype {}, which rbuild lacks", meta.dtype.schema_name()),
            )
        })?;
        let dims = dims_of(meta, &self.program.range_constraints)
            .map_err(|m| self.model_error(ErrorKind::Program, format!("tensor '{name}': {m}")))?;
        Ok(UserTensor { name: name.to_string(), dtype, dims })
    }

    /// The stored tensor `fqn` (looked up in `preferred`'s config first, then the other),
    /// checked against the graph's metadata for its placeholder.
    fn stored_tensor(&self, fqn: &str, placeholder: &str, preferred: PayloadKind) -> Result<TensorView<'a>> {
        let other = match preferred {
            PayloadKind::Weights => PayloadKind::Constants,
            PayloadKind::Constants => PayloadKind::Weights,
        };
        let config = |kind| match kind {
            PayloadKind::Weights => self.weights,
            PayloadKind::Constants => self.constants,
        };
        let (kind, meta) = [preferred, other]
            .into_iter()
            .find_map(|kind| config(kind).config.get(fqn).map(|meta| (kind, meta)))
            .ok_or_else(|| {
                self.archive.member_error(
                    &preferred.config_member(self.name),
                    ErrorKind::Tensor,
                    format!("'{fqn}' (graph input '{placeholder}') is in neither the weights nor the constants config"),
                )
            })?;
        let view = payload_view(self.archive, kind, self.name, fqn, meta)?;
        if let Some(graph_meta) = self.program.graph_module.graph.tensor_values.get(placeholder) {
            let graph_sizes: Vec<Option<i64>> =
                graph_meta.sizes.iter().map(|s| if let SymInt::Int(n) = s { Some(*n) } else { None }).collect();
            let view_sizes: Vec<Option<i64>> = view.sizes.iter().map(|&n| i64::try_from(n).ok()).collect();
            if graph_meta.dtype.scalar_type() != Some(view.dtype) || graph_sizes != view_sizes {
                return Err(self.archive.member_error(
                    &kind.config_member(self.name),
                    ErrorKind::Tensor,
                    format!(
                        "'{fqn}' is {} {:?} in the config but {} {:?} in the graph ('{placeholder}')",
                        view.dtype.name(),
                        view.sizes,
                        graph_meta.dtype.schema_name(),
                        graph_sizes
                    ),
                ));
            }
        }
        Ok(view)
    }
}

/// The view of one payload config entry (`fqn` in `kind`'s config of `model`).
pub fn payload_view<'a>(
    archive: &'a Pt2Archive,
    kind: PayloadKind,
    model: &str,
    fqn: &str,
    meta: &PayloadMeta,
) -> Result<TensorView<'a>> {
    let config_member = kind.config_member(model);
    if meta.use_pickle {
        return Err(archive.member_error(
            &config_member,
            ErrorKind::Unsupported,
            format!("'{fqn}' is pickled (a custom object or tensor subclass); rbuild never unpickles"),
        ));
    }
    let Some(tensor_meta) = &meta.tensor_meta else {
        return Err(archive.member_error(&config_member, ErrorKind::Tensor, format!("'{fqn}' has no tensor_meta")));
    };
    if meta.path_name.contains("..") || meta.path_name.contains('/') {
        return Err(archive.member_error(
            &config_member,
            ErrorKind::Layout,
            format!("'{fqn}' names the payload {:?}, not a file of {}", meta.path_name, kind.folder()),
        ));
    }
    let relative = format!("{}{}", kind.folder(), meta.path_name);
    let storage = archive.member(&relative).map_err(|e| Pt2Error {
        message: format!("{} (the storage of '{fqn}', named in {config_member})", e.message),
        ..e
    })?;
    TensorView::new(archive.error_context(), fqn, tensor_meta, storage, &archive.full_name(&relative))
}
