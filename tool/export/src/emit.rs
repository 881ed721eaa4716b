//! Emission: the only step that knows about `.pte`. Writes a planned, out-variant graph as an
//! ExecuTorch program through the runtime crate's writer. Same graph → same bytes.

use std::collections::HashMap;

use rbuild_runtime::format::schema::{
    self as fb, AllocationDetails, BackendDelegate, BackendDelegateDataReference, Chain, CompileSpec, ContainerMetadata, DelegateCall,
    EValue, ExecutionPlan, Instruction, InstructionArguments, KernelCall, KernelTypes, NamedData, Operator, SubsegmentOffsets,
};
use rbuild_runtime::format::write_pte;
use rbuild_runtime::Scalar;

use crate::error::{ExportError, Result};
use crate::graph::{Arg, Delegate, Dim, Graph, IntOrSym, Origin, ValueId, DELEGATE_CALL};
use crate::ops;
use crate::plan::MemoryPlan;

const LEAF: &str = r#"{"type": null, "context": null, "children_spec": []}"#;

/// pytree specs as torch.export writes them: inputs `((x0, x1, …), {})`, outputs a leaf or a tuple.
fn container_meta(inputs: usize, outputs: usize) -> (String, String) {
    let leaves = vec![LEAF; inputs].join(", ");
    let inp = format!(
        r#"[1, {{"type": "builtins.tuple", "context": "null", "children_spec": [{{"type": "builtins.tuple", "context": "null", "children_spec": [{leaves}]}}, {{"type": "builtins.dict", "context": "[]", "children_spec": []}}]}}]"#
    );
    let out = if outputs == 1 {
        format!("[1, {LEAF}]")
    } else {
        let leaves = vec![LEAF; outputs].join(", ");
        format!(r#"[1, {{"type": "builtins.tuple", "context": "null", "children_spec": [{leaves}]}}]"#)
    };
    (inp, out)
}

/// Data of the whole program: the constants (one segment, 16-aligned entries) and the initial
/// values of mutable state (one segment, unaligned, as ExecuTorch writes it). Offset 0 of each
/// is a placeholder.
struct Constants {
    data: Vec<u8>,
    offsets: Vec<u64>,
    mutable_data: Vec<u8>,
    mutable_offsets: Vec<u64>,
}

struct Emitter<'g> {
    g: &'g Graph,
    plan: &'g MemoryPlan,
    values: Vec<EValue<'static>>,
    value_index: HashMap<ValueId, i32>,
    ints: HashMap<i64, i32>,
    none: Option<i32>,
}

/// Every string argument value an op schema here takes.
static STRING_ARGS: [&str; 9] = ["none", "tanh", "trunc", "floor", "sum", "prod", "mean", "amax", "amin"];

static DIM_ORDERS: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

impl<'g> Emitter<'g> {
    fn push(&mut self, v: KernelTypes<'static>) -> i32 {
        self.values.push(EValue { val: Some(v) });
        (self.values.len() - 1) as i32
    }

    /// Dim orders are borrowed for the program's lifetime: contiguous ones from a static table.
    fn dim_order(&self, order: &[u8]) -> Result<&'static [u8]> {
        if order.iter().enumerate().all(|(i, &d)| d as usize == i) && order.len() <= DIM_ORDERS.len() {
            Ok(&DIM_ORDERS[..order.len()])
        } else {
            Err(ExportError::Invalid(format!("dim order {order:?} is not emitted yet (contiguous only)")))
        }
    }

    fn int(&mut self, i: i64) -> i32 {
        if let Some(&x) = self.ints.get(&i) {
            return x;
        }
        let x = self.push(KernelTypes::Int(fb::Int { int_val: i }));
        self.ints.insert(i, x);
        x
    }

    fn none(&mut self) -> i32 {
        match self.none {
            Some(n) => n,
            None => {
                let n = self.push(KernelTypes::Null);
                self.none = Some(n);
                n
            }
        }
    }

    /// The EValue of a graph value: a tensor, or an Int slot a prim op fills at run time.
    fn value(&mut self, v: ValueId, constants: &mut Constants) -> Result<i32> {
        if let Some(&i) = self.value_index.get(&v) {
            return Ok(i);
        }
        if matches!(self.g.values[v].origin, Origin::SymInt) {
            let i = self.push(KernelTypes::Int(fb::Int { int_val: 0 }));
            self.value_index.insert(v, i);
            return Ok(i);
        }
        let m = self.g.meta(v);
        let sizes: Vec<i32> = m.shape.iter().map(|&d| self.g.dim_max(d) as i32).collect();
        let dynamic = m.shape.iter().any(|d| matches!(d, Dim::Sym(_)));
        let mut t = fb::Tensor {
            scalar_type: m.dtype.code() as i8,
            sizes: Some(sizes),
            dim_order: Some(self.dim_order(&m.dim_order)?),
            shape_dynamism: dynamic as i8,
            ..Default::default()
        };
        match &self.g.values[v].origin {
            Origin::Const(c) => {
                let pad = constants.data.len().div_ceil(16) * 16;
                constants.data.resize(pad, 0);
                constants.offsets.push(pad as u64);
                constants.data.extend_from_slice(&c.bytes());
                t.data_buffer_idx = (constants.offsets.len() - 1) as u32;
            }
            origin => {
                if let Origin::State(Some(init)) = origin {
                    constants.mutable_offsets.push(constants.mutable_data.len() as u64);
                    constants.mutable_data.extend_from_slice(&init.bytes());
                    t.data_buffer_idx = (constants.mutable_offsets.len() - 1) as u32;
                }
                let off = self.plan.offsets.get(v).copied().flatten().ok_or_else(|| {
                    ExportError::Invalid(format!("value {} ({}) has no planned memory", v, self.g.values[v].name))
                })?;
                t.allocation_info = Some(AllocationDetails {
                    memory_id: 1,
                    memory_offset_low: off as u32,
                    memory_offset_high: (off as u64 >> 32) as u32,
                });
            }
        }
        let i = self.push(KernelTypes::Tensor(t));
        self.value_index.insert(v, i);
        Ok(i)
    }

    fn arg(&mut self, a: &Arg, constants: &mut Constants) -> Result<i32> {
        Ok(match a {
            Arg::Tensor(v) | Arg::SymInt(v) => self.value(*v, constants)?,
            Arg::Tensors(vs) => {
                let items = vs.iter().map(|&v| self.value(v, constants)).collect::<Result<Vec<_>>>()?;
                self.push(KernelTypes::TensorList(fb::TensorList { items: Some(items) }))
            }
            // Absent entries are -1, as ExecuTorch's loader reads them.
            Arg::OptTensors(vs) => {
                let items = vs.iter().map(|v| v.map_or(Ok(-1), |v| self.value(v, constants))).collect::<Result<Vec<_>>>()?;
                self.push(KernelTypes::OptionalTensorList(fb::OptionalTensorList { items: Some(items) }))
            }
            Arg::Int(i) | Arg::Scalar(Scalar::Int(i)) => self.int(*i),
            Arg::Ints(v) => {
                let items = v.iter().map(|&i| self.int(i) as i64).collect();
                self.push(KernelTypes::IntList(fb::IntList { items: Some(items) }))
            }
            // An IntList holds EValue indices, so run-time sizes are simply their Int slots.
            Arg::SymInts(v) => {
                let items = v
                    .iter()
                    .map(|item| match *item {
                        IntOrSym::Int(i) => Ok(self.int(i) as i64),
                        IntOrSym::Sym(s) => self.value(s, constants).map(|x| x as i64),
                    })
                    .collect::<Result<Vec<_>>>()?;
                self.push(KernelTypes::IntList(fb::IntList { items: Some(items) }))
            }
            Arg::Float(d) | Arg::Scalar(Scalar::Double(d)) => self.push(KernelTypes::Double(fb::Double { double_val: *d })),
            Arg::Floats(v) => self.push(KernelTypes::DoubleList(fb::DoubleList { items: Some(v.clone()) })),
            Arg::Bool(b) | Arg::Scalar(Scalar::Bool(b)) => self.push(KernelTypes::Bool(fb::Bool { bool_val: *b })),
            Arg::Bools(v) => self.push(KernelTypes::BoolList(fb::BoolList { items: Some(v.clone()) })),
            Arg::ScalarType(t) => self.int(t.code() as i64),
            Arg::Str(text) => {
                // Values live as long as the program; the string arguments ops take come from
                // small fixed vocabularies (gelu's `approximate`), so they are static too.
                let Some(&s) = STRING_ARGS.iter().find(|&&k| k == text) else {
                    return Err(ExportError::Invalid(format!("string argument \"{text}\" is not one rbuild emits ({})", STRING_ARGS.join(", "))));
                };
                self.push(KernelTypes::String(fb::StringValue { string_val: Some(s) }))
            }
            Arg::None => self.none(),
        })
    }
}

/// One planned, out-variant graph to emit as a method.
pub struct MethodSpec<'a> {
    pub name: &'a str,
    pub graph: &'a Graph,
    pub plan: &'a MemoryPlan,
}

/// A constant value a getter method returns.
#[derive(Clone, Debug, PartialEq)]
pub enum GetterValue {
    Int(i64),
    Bool(bool),
    Double(f64),
}

/// A metadata method with no inputs and no instructions (ExecuTorch's `_emit_prim_getters`):
/// `get_max_seq_len`, `use_kv_cache`, …
#[derive(Clone, Debug, PartialEq)]
pub struct Getter {
    pub name: String,
    pub values: Vec<GetterValue>,
}

impl Getter {
    pub fn int(name: &str, v: i64) -> Getter {
        Getter { name: name.into(), values: vec![GetterValue::Int(v)] }
    }
    pub fn ints(name: &str, v: &[i64]) -> Getter {
        Getter { name: name.into(), values: v.iter().map(|&i| GetterValue::Int(i)).collect() }
    }
    pub fn bool(name: &str, v: bool) -> Getter {
        Getter { name: name.into(), values: vec![GetterValue::Bool(v)] }
    }
}

/// A method's parts, owned until the writer has borrowed them.
struct MethodParts<'g> {
    name: String,
    values: Vec<EValue<'static>>,
    inputs: Vec<i32>,
    outputs: Vec<i32>,
    instructions: Vec<Instruction>,
    operators: Vec<(String, String)>,
    container: (String, String),
    buffer_sizes: Vec<i64>,
    /// The graph's delegates, in `DelegateCall` index order (blobs are borrowed, not copied).
    delegates: &'g [Delegate],
}

fn method_parts<'g>(m: &MethodSpec<'g>, constants: &mut Constants) -> Result<MethodParts<'g>> {
    let g = m.graph;
    let mut e = Emitter { g, plan: m.plan, values: Vec::new(), value_index: HashMap::new(), ints: HashMap::new(), none: None };
    let inputs = g.inputs.iter().map(|&v| e.value(v, constants)).collect::<Result<Vec<_>>>()?;
    let mut operators: Vec<(String, String)> = Vec::new();
    let mut instructions = Vec::new();
    for n in &g.nodes {
        if n.op == DELEGATE_CALL {
            instructions.push(delegate_call(&mut e, n, g, constants)?);
            continue;
        }
        let schema = ops::out_schema(&n.op)
            .filter(|s| s.key() == n.op)
            .ok_or_else(|| ExportError::Invalid(format!("{} is not an out variant: run the out-variant pass", n.op)))?;
        let name_ovl = (schema.name.clone(), schema.overload.clone());
        let op_index = match operators.iter().position(|o| *o == name_ovl) {
            Some(i) => i,
            None => {
                operators.push(name_ovl);
                operators.len() - 1
            }
        };
        let mut args = n.args.iter().map(|a| e.arg(a, constants)).collect::<Result<Vec<_>>>()?;
        let outs = n.outputs.iter().map(|&o| e.value(o, constants)).collect::<Result<Vec<_>>>()?;
        // The KernelCall convention: the outputs, then the return value(s) again, several as
        // one TensorList. An op writing an output list takes that list in both places; prim
        // ops (run-time integers) take their result slot once.
        if ops::writes_output_list(schema) {
            let list = e.push(KernelTypes::TensorList(fb::TensorList { items: Some(outs) }));
            args.extend([list, list]);
        } else {
            args.extend(&outs);
            if ops::writes_in_place(&n.op) {
                // An in-place op returns the argument it wrote.
                args.push(args[0]);
            } else if !ops::returns_int(&n.op) {
                let ret = if outs.len() == 1 { outs[0] } else { e.push(KernelTypes::TensorList(fb::TensorList { items: Some(outs) })) };
                args.push(ret);
            }
        }
        instructions.push(Instruction {
            instr_args: Some(InstructionArguments::KernelCall(KernelCall { op_index: op_index as i32, args: Some(args) })),
        });
    }
    let outputs = g.outputs.iter().map(|&v| e.value(v, constants)).collect::<Result<Vec<_>>>()?;
    Ok(MethodParts {
        name: m.name.to_string(),
        container: container_meta(inputs.len(), outputs.len()),
        values: e.values,
        inputs,
        outputs,
        instructions,
        operators,
        buffer_sizes: vec![0, m.plan.arena_bytes as i64],
        delegates: &g.delegates,
    })
}

/// A `DelegateCall`: the delegate's index, then its inputs' and outputs' value indices.
fn delegate_call(e: &mut Emitter<'_>, n: &crate::graph::Node, g: &Graph, constants: &mut Constants) -> Result<Instruction> {
    let index = match n.args.first() {
        Some(Arg::Int(i)) if (*i as usize) < g.delegates.len() => *i as i32,
        other => return Err(ExportError::Invalid(format!("{DELEGATE_CALL}: argument 0 must index one of {} delegates, got {other:?}", g.delegates.len()))),
    };
    let mut args = Vec::new();
    for a in &n.args[1..] {
        match a {
            Arg::Tensor(v) => args.push(e.value(*v, constants)?),
            other => return Err(ExportError::Invalid(format!("{DELEGATE_CALL}: inputs must be tensors, got {other:?}"))),
        }
    }
    for &o in &n.outputs {
        args.push(e.value(o, constants)?);
    }
    Ok(Instruction { instr_args: Some(InstructionArguments::DelegateCall(DelegateCall { delegate_index: index, args: Some(args) })) })
}

fn getter_parts<'g>(gt: &Getter) -> MethodParts<'g> {
    let values = gt
        .values
        .iter()
        .map(|v| EValue {
            val: Some(match *v {
                GetterValue::Int(i) => KernelTypes::Int(fb::Int { int_val: i }),
                GetterValue::Bool(b) => KernelTypes::Bool(fb::Bool { bool_val: b }),
                GetterValue::Double(d) => KernelTypes::Double(fb::Double { double_val: d }),
            }),
        })
        .collect();
    MethodParts {
        name: gt.name.clone(),
        container: container_meta(0, gt.values.len()),
        values,
        inputs: vec![],
        outputs: (0..gt.values.len() as i32).collect(),
        instructions: vec![],
        operators: vec![],
        buffer_sizes: vec![0],
        delegates: &[],
    }
}

/// The program for a planned graph whose nodes are out variants, as one method.
pub fn emit(g: &Graph, plan: &MemoryPlan, method: &str) -> Result<Vec<u8>> {
    emit_program(&[MethodSpec { name: method, graph: g, plan }], &[])
}

/// A program with several methods and constant getters, sharing one constant segment.
/// Methods come out sorted by name (deterministic, and how ExecuTorch lists them).
pub fn emit_program(methods: &[MethodSpec<'_>], getters: &[Getter]) -> Result<Vec<u8>> {
    let mut constants = Constants { data: Vec::new(), offsets: vec![0], mutable_data: Vec::new(), mutable_offsets: vec![0] };
    let mut parts = Vec::new();
    for m in methods {
        parts.push(method_parts(m, &mut constants)?);
    }
    parts.extend(getters.iter().map(getter_parts));
    parts.sort_by(|a, b| a.name.cmp(&b.name));
    for w in parts.windows(2) {
        if w[0].name == w[1].name {
            return Err(ExportError::Invalid(format!("two methods are named {}", w[0].name)));
        }
    }
    // The writer borrows strings for the program's lifetime; `parts` outlives it.
    let operators: Vec<Vec<Operator>> = parts
        .iter()
        .map(|p| p.operators.iter().map(|(n, o)| Operator { name: Some(n.as_str()), overload: Some(o.as_str()) }).collect())
        .collect();
    // Delegate blobs go in segments after the constants (ExecuTorch's default layout), so a
    // backend can read them in place, aligned like every segment.
    let has_constants = constants.offsets.len() > 1;
    let has_mutable = constants.mutable_offsets.len() > 1;
    let any_delegate = parts.iter().any(|p| !p.delegates.is_empty());
    let mut segments: Vec<&[u8]> = if has_constants || any_delegate || has_mutable { vec![&constants.data] } else { vec![] };
    // Initial values of mutable state follow the constants (ExecuTorch's segment order).
    let mutable_data_segments = has_mutable.then(|| {
        segments.push(&constants.mutable_data);
        vec![SubsegmentOffsets { segment_index: (segments.len() - 1) as u32, offsets: Some(constants.mutable_offsets.clone()) }]
    });
    // Named data (delegate weights): one segment per key, after the constants, as
    // ExecuTorch's named data store lays it out. A key two methods share is stored once.
    let mut named: Vec<(&str, std::borrow::Cow<[u8]>)> = Vec::new();
    for m in methods {
        for (key, data) in &m.graph.named_data {
            match named.iter().find(|(k, _)| *k == key.as_str()) {
                Some((_, bytes)) if *bytes == data.bytes() => {}
                Some(_) => return Err(ExportError::Invalid(format!("named data key `{key}` is used for two different blobs"))),
                None => named.push((key.as_str(), data.bytes())),
            }
        }
    }
    if !named.is_empty() && segments.is_empty() {
        segments.push(&constants.data);
    }
    let mut named_data = Vec::with_capacity(named.len());
    for (key, bytes) in &named {
        segments.push(bytes);
        named_data.push(NamedData { key: Some(key), segment_index: (segments.len() - 1) as u32 });
    }
    let mut delegate_lists: Vec<Vec<BackendDelegate>> = Vec::new();
    for p in &parts {
        let mut list = Vec::new();
        for Delegate { id, processed, compile_specs: specs } in p.delegates {
            segments.push(processed);
            list.push(BackendDelegate {
                id: Some(id.as_str()),
                processed: Some(BackendDelegateDataReference { location: 1, index: (segments.len() - 1) as u32 }),
                compile_specs: Some(specs.iter().map(|(k, v)| CompileSpec { key: Some(k.as_str()), value: Some(v.as_slice()) }).collect()),
            });
        }
        delegate_lists.push(list);
    }
    let plans: Vec<ExecutionPlan> = parts
        .iter()
        .zip(operators)
        .zip(delegate_lists)
        .map(|((p, ops), delegates)| ExecutionPlan {
            name: Some(p.name.as_str()),
            container_meta_type: Some(ContainerMetadata {
                encoded_inp_str: Some(p.container.0.as_str()),
                encoded_out_str: Some(p.container.1.as_str()),
            }),
            values: Some(p.values.clone()),
            inputs: Some(p.inputs.clone()),
            outputs: Some(p.outputs.clone()),
            chains: Some(vec![Chain {
                inputs: Some(vec![]),
                outputs: Some(vec![]),
                instructions: Some(p.instructions.clone()),
                stacktrace: None,
            }]),
            operators: Some(ops),
            delegates: Some(delegates),
            non_const_buffer_sizes: Some(p.buffer_sizes.clone()),
            non_const_buffer_device: None,
        })
        .collect();
    let program = fb::Program {
        version: 0,
        execution_plan: Some(plans),
        constant_buffer: Some(vec![]),
        backend_delegate_data: Some(vec![]),
        segments: Some(vec![]),
        constant_segment: Some(SubsegmentOffsets { segment_index: 0, offsets: Some(constants.offsets) }),
        mutable_data_segments,
        named_data: (!named_data.is_empty()).then_some(named_data),
    };
    Ok(write_pte(&program, &segments))
}
