//! Decomposition: rewrites the non-Core-ATen ops the builder may record into core ops with out
//! variants, so ExecuTorch's portable kernels can run the result.
//!
//! Each rewrite appends its core nodes where the original stood; the last one writes into the
//! original node's output value, so later uses and graph outputs stay as they are.

use rbuild_runtime::Scalar;

use super::{append1, append_into, bool_arg, int_arg, ints_arg, opt_tensor_arg, tensor_arg, Renames};
use crate::error::{ExportError, Result};
use crate::graph::{Arg, ConstData, Dim, Graph, Node, Origin, TensorMeta};

/// Rewrites every decomposable node; returns how many were rewritten.
pub fn decompose(g: &mut Graph, options: &super::Options) -> Result<usize> {
    let old = std::mem::take(&mut g.nodes);
    let mut renames = Renames::default();
    let mut count = 0;
    for n in old {
        let rewritten = match n.op.as_str() {
            "aten::linear" if options.decompose_linear => linear(g, &n)?,
            "aten::hardswish" if !options.keep_hardswish => hardswish(g, &n)?,
            "aten::hardsigmoid" => hardsigmoid(g, &n)?,
            "aten::adaptive_avg_pool2d" => adaptive_avg_pool2d(g, &n, &mut renames)?,
            "aten::flatten.using_ints" => flatten(g, &n)?,
            "aten::dropout" => dropout(g, &n, &mut renames)?,
            "aten::silu" => silu(g, &n)?,
            "aten::add.Scalar" | "aten::sub.Scalar" | "aten::mul.Scalar" | "aten::div.Scalar" => promoting_scalar(g, &n)?,
            _ => false,
        };
        if rewritten {
            count += 1;
        } else {
            g.nodes.push(n);
        }
    }
    renames.apply(g);
    Ok(count)
}

fn single_output(n: &Node) -> Result<crate::graph::ValueId> {
    match n.outputs.as_slice() {
        [o] => Ok(*o),
        _ => Err(ExportError::Invalid(format!("{} must have one output, has {}", n.op, n.outputs.len()))),
    }
}

fn double(v: f64) -> Arg {
    Arg::Scalar(Scalar::Double(v))
}

/// The node computes its input unchanged. Its uses read the input instead; a graph output
/// keeps a `clone` (an output must be its own planned value, not an input or a constant).
fn identity(g: &mut Graph, n: &Node, x: usize, renames: &mut Renames) -> Result<()> {
    let out = single_output(n)?;
    if g.outputs.contains(&out) {
        append_into(g, "aten::clone", vec![Arg::Tensor(x), Arg::None], &[out])
    } else {
        renames.add(out, x);
        Ok(())
    }
}

/// `x @ w.T + b` → `permute_copy(w)` and `addmm`/`mm`, through a 2-D view when x is not 2-D.
fn linear(g: &mut Graph, n: &Node) -> Result<bool> {
    let (x, w, b) = (tensor_arg(n, 0)?, tensor_arg(n, 1)?, opt_tensor_arg(n, 2)?);
    let out = single_output(n)?;
    let wt = append1(g, "aten::permute_copy", vec![Arg::Tensor(w), Arg::Ints(vec![1, 0])])?;
    let product = |x2d: usize| -> (&'static str, Vec<Arg>) {
        match b {
            Some(b) => (
                "aten::addmm",
                vec![Arg::Tensor(b), Arg::Tensor(x2d), Arg::Tensor(wt), Arg::Scalar(Scalar::Int(1)), Arg::Scalar(Scalar::Int(1))],
            ),
            None => ("aten::mm", vec![Arg::Tensor(x2d), Arg::Tensor(wt)]),
        }
    };
    if g.meta(x).rank() == 2 {
        let (op, args) = product(x);
        append_into(g, op, args, &[out])?;
        return Ok(true);
    }
    // Flattening the leading dims needs static sizes; with run-time ones the node stays
    // `aten::linear`, which ExecuTorch runs as well.
    let (Some(xs), Some(ys)) = (g.meta(x).sizes(), g.meta(out).sizes()) else { return Ok(false) };
    let features = *xs.last().unwrap_or(&1);
    let rows: usize = xs.iter().rev().skip(1).product();
    let x2d = append1(g, "aten::view_copy", vec![Arg::Tensor(x), Arg::Ints(vec![rows as i64, features as i64])])?;
    let (op, args) = product(x2d);
    let y2d = append1(g, op, args)?;
    append_into(g, "aten::view_copy", vec![Arg::Tensor(y2d), Arg::Ints(ys.iter().map(|&d| d as i64).collect())], &[out])?;
    Ok(true)
}

/// `clamp(x + 3, 0, 6)`, shared by hardswish and hardsigmoid.
fn relu6_shifted(g: &mut Graph, x: usize) -> Result<usize> {
    let shifted = append1(g, "aten::add.Scalar", vec![Arg::Tensor(x), double(3.0), Arg::Scalar(Scalar::Int(1))])?;
    append1(g, "aten::clamp", vec![Arg::Tensor(shifted), double(0.0), double(6.0)])
}

/// `x * clamp(x + 3, 0, 6) / 6` (multiply before dividing, as PyTorch's kernel does).
fn hardswish(g: &mut Graph, n: &Node) -> Result<bool> {
    let (x, out) = (tensor_arg(n, 0)?, single_output(n)?);
    let gate = relu6_shifted(g, x)?;
    let scaled = append1(g, "aten::mul.Tensor", vec![Arg::Tensor(x), Arg::Tensor(gate)])?;
    append_into(g, "aten::div.Scalar", vec![Arg::Tensor(scaled), double(6.0)], &[out])?;
    Ok(true)
}

/// `clamp(x + 3, 0, 6) / 6`.
fn hardsigmoid(g: &mut Graph, n: &Node) -> Result<bool> {
    let (x, out) = (tensor_arg(n, 0)?, single_output(n)?);
    let gate = relu6_shifted(g, x)?;
    append_into(g, "aten::div.Scalar", vec![Arg::Tensor(gate), double(6.0)], &[out])?;
    Ok(true)
}

/// `x * sigmoid(x)` (ExecuTorch's portable library has no silu kernel).
fn silu(g: &mut Graph, n: &Node) -> Result<bool> {
    let (x, out) = (tensor_arg(n, 0)?, single_output(n)?);
    let gate = append1(g, "aten::sigmoid", vec![Arg::Tensor(x)])?;
    append_into(g, "aten::mul.Tensor", vec![Arg::Tensor(x), Arg::Tensor(gate)], &[out])?;
    Ok(true)
}

/// An arithmetic op with a number whose result dtype differs from the tensor's (an int64
/// tensor plus 0.5, int64 true division) becomes the tensor op with a rank-0 constant, as
/// ExecuTorch's export does: its `.Scalar` kernels do not promote the tensor.
fn promoting_scalar(g: &mut Graph, n: &Node) -> Result<bool> {
    let (x, out) = (tensor_arg(n, 0)?, single_output(n)?);
    if g.meta(x).dtype == g.meta(out).dtype {
        return Ok(false);
    }
    let Some(Arg::Scalar(s)) = n.args.get(1).cloned() else {
        return Err(ExportError::Invalid(format!("{}: argument 1 must be a number, got {:?}", n.op, n.args.get(1))));
    };
    let dtype = crate::promote::number_dtype(s);
    let bytes = match s {
        Scalar::Bool(b) => vec![b as u8],
        Scalar::Int(i) => i.to_le_bytes().to_vec(),
        Scalar::Double(d) => (d as f32).to_le_bytes().to_vec(),
    };
    let name = format!("{}_operand_{}", n.op, g.values.len());
    let operand = g.add_value(TensorMeta::fixed(dtype, &[]), Origin::Const(ConstData::owned(bytes)), name);
    let mut args = vec![Arg::Tensor(x), Arg::Tensor(operand)];
    args.extend(n.args.get(2).cloned());
    let op = n.op.replace(".Scalar", ".Tensor");
    append_into(g, &op, args, &[out])?;
    Ok(true)
}

/// Global pooling (output 1×1) is a mean over H and W; output = input size is the identity.
fn adaptive_avg_pool2d(g: &mut Graph, n: &Node, renames: &mut Renames) -> Result<bool> {
    let (x, out) = (tensor_arg(n, 0)?, single_output(n)?);
    let size = ints_arg(n, 1)?;
    if size == [1, 1] {
        let args = vec![Arg::Tensor(x), Arg::Ints(vec![-1, -2]), Arg::Bool(true), Arg::None];
        append_into(g, "aten::mean.dim", args, &[out])?;
        return Ok(true);
    }
    let m = g.meta(x);
    if m.rank() == 4 && size.len() == 2 && (0..2).all(|i| m.shape[2 + i] == Dim::Fixed(size[i].max(0) as usize)) {
        identity(g, n, x, renames)?;
        return Ok(true);
    }
    append_into(g, "aten::_adaptive_avg_pool2d", vec![Arg::Tensor(x), Arg::Ints(size.to_vec())], &[out])?;
    Ok(true)
}

/// Flattening a contiguous tensor is a view to the output sizes.
fn flatten(g: &mut Graph, n: &Node) -> Result<bool> {
    let (x, out) = (tensor_arg(n, 0)?, single_output(n)?);
    // Validate the argument shape even though the output meta already holds the answer.
    int_arg(n, 1)?;
    int_arg(n, 2)?;
    let sizes = g
        .meta(out)
        .sizes()
        .ok_or_else(|| ExportError::Invalid(format!("aten::flatten.using_ints: output {:?} needs static sizes", g.meta(out).shape)))?;
    append_into(g, "aten::view_copy", vec![Arg::Tensor(x), Arg::Ints(sizes.iter().map(|&d| d as i64).collect())], &[out])?;
    Ok(true)
}

/// Inference dropout is the identity; training dropout is random and not exported.
fn dropout(g: &mut Graph, n: &Node, renames: &mut Renames) -> Result<bool> {
    let x = tensor_arg(n, 0)?;
    if bool_arg(n, 2)? {
        return Err(ExportError::Invalid("aten::dropout with train=True cannot be exported (it is random)".into()));
    }
    identity(g, n, x, renames)?;
    Ok(true)
}
