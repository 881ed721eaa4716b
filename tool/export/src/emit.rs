//! Emission: the only step that knows about `.pte`. Writes a planned, out-variant graph as an
//! ExecuTorch program through the runtime crate's writer. Same graph → same bytes.

use std::collections::HashMap;

use rbuild_runtime::format::schema::{
    self as fb, AllocationDetails, Chain, ContainerMetadata, EValue, ExecutionPlan, Instruction, InstructionArguments, KernelCall,
    KernelTypes, Operator, SubsegmentOffsets,
};
use rbuild_runtime::format::write_pte;
use rbuild_runtime::Scalar;

use crate::error::{ExportError, Result};
use crate::graph::{Arg, Dim, Graph, Origin, ValueId};
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

struct Emitter<'g> {
    g: &'g Graph,
    plan: &'g MemoryPlan,
    values: Vec<EValue<'static>>,
    tensor_index: HashMap<ValueId, i32>,
    ints: HashMap<i64, i32>,
    constant_data: Vec<u8>,
    constant_offsets: Vec<u64>,
    none: Option<i32>,
}

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

    fn tensor(&mut self, v: ValueId) -> Result<i32> {
        if let Some(&i) = self.tensor_index.get(&v) {
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
                // Constants are 16-aligned in one segment; offset index 0 is a placeholder.
                let pad = self.constant_data.len().div_ceil(16) * 16;
                self.constant_data.resize(pad, 0);
                self.constant_offsets.push(pad as u64);
                self.constant_data.extend_from_slice(c.bytes());
                t.data_buffer_idx = (self.constant_offsets.len() - 1) as u32;
            }
            _ => {
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
        self.tensor_index.insert(v, i);
        Ok(i)
    }

    fn arg(&mut self, a: &Arg) -> Result<i32> {
        Ok(match a {
            Arg::Tensor(v) => self.tensor(*v)?,
            Arg::Tensors(vs) => {
                let items = vs.iter().map(|&v| self.tensor(v)).collect::<Result<Vec<_>>>()?;
                self.push(KernelTypes::TensorList(fb::TensorList { items: Some(items) }))
            }
            Arg::Int(i) | Arg::Scalar(Scalar::Int(i)) => self.int(*i),
            Arg::Ints(v) => {
                let items = v.iter().map(|&i| self.int(i) as i64).collect();
                self.push(KernelTypes::IntList(fb::IntList { items: Some(items) }))
            }
            Arg::Float(d) | Arg::Scalar(Scalar::Double(d)) => self.push(KernelTypes::Double(fb::Double { double_val: *d })),
            Arg::Bool(b) | Arg::Scalar(Scalar::Bool(b)) => self.push(KernelTypes::Bool(fb::Bool { bool_val: *b })),
            Arg::ScalarType(t) => self.int(t.code() as i64),
            Arg::Str(_) => return Err(ExportError::Invalid("string arguments are not emitted yet".into())),
            Arg::None => self.none(),
        })
    }
}

/// The program for a planned graph whose nodes are out variants, as one method.
pub fn emit(g: &Graph, plan: &MemoryPlan, method: &str) -> Result<Vec<u8>> {
    let mut e = Emitter {
        g,
        plan,
        values: Vec::new(),
        tensor_index: HashMap::new(),
        ints: HashMap::new(),
        constant_data: Vec::new(),
        constant_offsets: vec![0],
        none: None,
    };
    let inputs = g.inputs.iter().map(|&v| e.tensor(v)).collect::<Result<Vec<_>>>()?;
    let mut operators: Vec<(String, String)> = Vec::new();
    let mut instructions = Vec::new();
    for n in &g.nodes {
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
        let mut args = n.args.iter().map(|a| e.arg(a)).collect::<Result<Vec<_>>>()?;
        let outs = n.outputs.iter().map(|&o| e.tensor(o)).collect::<Result<Vec<_>>>()?;
        args.extend(&outs);
        // The KernelCall convention: the return value(s) again, several as one TensorList.
        let ret = if outs.len() == 1 { outs[0] } else { e.push(KernelTypes::TensorList(fb::TensorList { items: Some(outs) })) };
        args.push(ret);
        instructions.push(Instruction {
            instr_args: Some(InstructionArguments::KernelCall(KernelCall { op_index: op_index as i32, args: Some(args) })),
        });
    }
    let outputs = g.outputs.iter().map(|&v| e.tensor(v)).collect::<Result<Vec<_>>>()?;
    let (inp, out) = container_meta(inputs.len(), outputs.len());
    // The writer borrows strings for the program's lifetime; these live until it returns.
    let operators_fb: Vec<Operator> =
        operators.iter().map(|(n, o)| Operator { name: Some(n.as_str()), overload: Some(o.as_str()) }).collect();
    let plan_fb = ExecutionPlan {
        name: Some(method),
        container_meta_type: Some(ContainerMetadata { encoded_inp_str: Some(&inp), encoded_out_str: Some(&out) }),
        values: Some(e.values),
        inputs: Some(inputs),
        outputs: Some(outputs),
        chains: Some(vec![Chain {
            inputs: Some(vec![]),
            outputs: Some(vec![]),
            instructions: Some(instructions),
            stacktrace: None,
        }]),
        operators: Some(operators_fb),
        delegates: Some(vec![]),
        non_const_buffer_sizes: Some(vec![0, plan.arena_bytes as i64]),
        non_const_buffer_device: None,
    };
    let has_constants = e.constant_offsets.len() > 1;
    let program = fb::Program {
        version: 0,
        execution_plan: Some(vec![plan_fb]),
        constant_buffer: Some(vec![]),
        backend_delegate_data: Some(vec![]),
        segments: Some(vec![]),
        constant_segment: Some(SubsegmentOffsets { segment_index: 0, offsets: Some(e.constant_offsets) }),
        mutable_data_segments: None,
        named_data: None,
    };
    let segments: Vec<&[u8]> = if has_constants { vec![&e.constant_data] } else { vec![] };
    Ok(write_pte(&program, &segments))
}
