//! Eager evaluation of graph nodes with rbuild's kernels: used to fold constants and as a
//! graph-level reference to compare emitted programs with.

use std::collections::HashMap;
use std::sync::OnceLock;

use rbuild_runtime::harness::OpHarness;
use rbuild_runtime::{KernelRegistry, Scalar, Value};

use crate::error::{ExportError, Result};
use crate::graph::{Arg, Graph, Node, Origin, ValueId};
use crate::ops;

fn kernels() -> &'static KernelRegistry {
    static K: OnceLock<KernelRegistry> = OnceLock::new();
    K.get_or_init(rbuild_kernels::registry)
}

/// Runs one node on the given input bytes (every tensor it reads must be in `env` or constant);
/// returns the bytes of each output.
pub fn eval_node(g: &Graph, node: &Node, env: &HashMap<ValueId, Vec<u8>>) -> Result<Vec<Vec<u8>>> {
    let schema = ops::out_schema(&node.op)
        .ok_or_else(|| ExportError::Invalid(format!("{} has no out variant to evaluate (decompose it first)", node.op)))?;
    let key = schema.key();
    let kernel = kernels().lookup(&key).ok_or_else(|| ExportError::Invalid(format!("no kernel for {key}")))?;
    let mut h = OpHarness::new();
    let tensor = |h: &mut OpHarness, v: ValueId| -> Result<u32> {
        let m = g.meta(v);
        let sizes = m.sizes().ok_or_else(|| ExportError::Invalid(format!("{}: evaluation needs static shapes", node.op)))?;
        let bytes: std::borrow::Cow<[u8]> = match &g.values[v].origin {
            Origin::Const(c) => c.bytes(),
            _ => std::borrow::Cow::Borrowed(env.get(&v).ok_or_else(|| ExportError::Invalid(format!("{}: input value {v} not computed", node.op)))?),
        };
        let shape = rbuild_runtime::tensor::Shape::new(&sizes)
            .ok_or_else(|| ExportError::Invalid(format!("{}: rank {} above 16", node.op, sizes.len())))?;
        let id = h.tensor::<u8>(rbuild_runtime::ScalarType::Byte, &[bytes.len()], &bytes);
        // Retag the byte buffer with the real dtype and shape.
        if let Value::Tensor(t) = &mut h.frame.values[id as usize] {
            t.dtype = m.dtype;
            t.shape = shape;
            t.dim_order = rbuild_runtime::tensor::DimOrder::contiguous(sizes.len());
        }
        Ok(id)
    };
    let mut ids = Vec::new();
    for a in &ops::out_variant_args(&node.op, &node.args) {
        ids.push(match a {
            Arg::Tensor(v) => tensor(&mut h, *v)?,
            Arg::Tensors(vs) => {
                let items = vs.iter().map(|&v| tensor(&mut h, v)).collect::<Result<Vec<_>>>()?;
                h.tensor_list(&items)
            }
            Arg::OptTensors(vs) => {
                let items = vs.iter().map(|v| v.map(|v| tensor(&mut h, v)).transpose()).collect::<Result<Vec<_>>>()?;
                h.opt_tensor_list(&items)
            }
            Arg::Int(i) => h.int(*i),
            Arg::Ints(v) => h.int_list(v),
            Arg::SymInt(_) | Arg::SymInts(_) => {
                return Err(ExportError::Invalid(format!("{}: cannot evaluate with run-time sizes", node.op)))
            }
            Arg::Float(f) => h.double(*f),
            Arg::Floats(v) => h.double_list(v),
            Arg::Bool(b) => h.bool(*b),
            Arg::Bools(v) => h.bool_list(v),
            Arg::Scalar(Scalar::Int(i)) => h.int(*i),
            Arg::Scalar(Scalar::Double(d)) => h.double(*d),
            Arg::Scalar(Scalar::Bool(b)) => h.bool(*b),
            Arg::ScalarType(t) => h.scalar_type(*t),
            Arg::Str(s) => {
                h.frame.values.push(Value::String(s.clone()));
                (h.frame.values.len() - 1) as u32
            }
            Arg::None => h.none(),
        });
    }
    let mut outs = Vec::new();
    for &o in &node.outputs {
        let m = g.meta(o);
        let sizes = m.sizes().ok_or_else(|| ExportError::Invalid(format!("{}: evaluation needs static shapes", node.op)))?;
        if sizes.len() > rbuild_runtime::tensor::MAX_RANK {
            return Err(ExportError::Invalid(format!("{}: output rank {} above 16", node.op, sizes.len())));
        }
        outs.push(h.out(m.dtype, &sizes));
    }
    if ops::writes_output_list(schema) {
        let list = h.tensor_list(&outs);
        ids.extend([list, list]);
    } else {
        ids.extend(&outs);
        let ret = if outs.len() == 1 { outs[0] } else { h.tensor_list(&outs) };
        ids.push(ret);
    }
    h.call(kernel, &ids).map_err(|e| ExportError::Invalid(format!("evaluating {}: {e}", node.op)))?;
    Ok(outs.iter().map(|&o| h.frame.tensor_bytes(o).expect("output bytes").to_vec()).collect())
}

/// Runs the whole graph on `inputs` (bytes per graph input); returns each output's bytes.
pub fn evaluate(g: &Graph, inputs: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
    evaluate_observed(g, inputs, |_, _| {})
}

/// [`evaluate`], handing every graph input and node output to `observe` as it is computed
/// (calibration records activation ranges this way). Values are dropped after their last use.
pub fn evaluate_observed(g: &Graph, inputs: &[Vec<u8>], mut observe: impl FnMut(ValueId, &[u8])) -> Result<Vec<Vec<u8>>> {
    evaluate_with(g, inputs, |v, bytes| observe(v, bytes))
}

/// [`evaluate`], letting `hook` read and rewrite every graph input and node output before
/// later nodes read it (quantization-sensitivity analysis fake-quantizes values this way).
pub fn evaluate_with(g: &Graph, inputs: &[Vec<u8>], mut hook: impl FnMut(ValueId, &mut Vec<u8>)) -> Result<Vec<Vec<u8>>> {
    if inputs.len() != g.inputs.len() {
        return Err(ExportError::Invalid(format!("graph takes {} inputs, {} given", g.inputs.len(), inputs.len())));
    }
    let mut env: HashMap<ValueId, Vec<u8>> = HashMap::new();
    for (&v, bytes) in g.inputs.iter().zip(inputs) {
        let mut bytes = bytes.clone();
        hook(v, &mut bytes);
        env.insert(v, bytes);
    }
    // The last node reading each value; graph outputs are kept to the end.
    let mut last_use = vec![None; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for v in n.tensor_inputs() {
            last_use[v] = Some(i);
        }
    }
    for &o in &g.outputs {
        last_use[o] = Some(usize::MAX);
    }
    for (i, node) in g.nodes.iter().enumerate() {
        let mut outs = eval_node(g, node, &env)?;
        for (&o, bytes) in node.outputs.iter().zip(&mut outs) {
            hook(o, bytes);
        }
        env.extend(node.outputs.iter().copied().zip(outs));
        for v in node.tensor_inputs() {
            if last_use[v] == Some(i) {
                env.remove(&v);
            }
        }
    }
    g.outputs
        .iter()
        .map(|o| match &g.values[*o].origin {
            Origin::Const(c) => Ok(c.bytes().to_vec()),
            _ => env.get(o).cloned().ok_or_else(|| ExportError::Invalid(format!("output {o} not computed"))),
        })
        .collect()
}
