//! No-op removal: nodes whose output equals their input (same-shape views, identity permutes,
//! clones, inference dropout, `* 1`, `/ 1`, `+ 0`) are dropped and their uses read the input.
//!
//! A node whose output is a graph output is kept: an output must stay a distinct planned value
//! (its input may be a graph input or a constant).

use rbuild_runtime::{Scalar, ScalarType};

use super::{bool_arg, ints_arg, tensor_arg, Renames};
use crate::error::Result;
use crate::graph::{Arg, Graph, Node, ValueId};

/// Removes every no-op node; returns how many were removed.
pub fn remove_noops(g: &mut Graph) -> Result<usize> {
    let mut renames = Renames::default();
    let mut keep = vec![true; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        let Some(x) = passthrough(g, n)? else { continue };
        let out = n.outputs[0];
        if g.outputs.contains(&out) {
            continue;
        }
        renames.add(out, x);
        keep[i] = false;
    }
    let removed = keep.iter().filter(|k| !**k).count();
    let mut k = keep.into_iter();
    g.nodes.retain(|_| k.next().unwrap_or(true));
    renames.apply(g);
    Ok(removed)
}

/// The input a node passes through unchanged, if it is a no-op.
fn passthrough(g: &Graph, n: &Node) -> Result<Option<ValueId>> {
    let candidate = matches!(
        n.op.as_str(),
        "aten::view_copy"
            | "aten::permute_copy"
            | "aten::clone"
            | "aten::dropout"
            | "aten::mul.Scalar"
            | "aten::div.Scalar"
            | "aten::add.Scalar"
    );
    if !candidate || n.outputs.len() != 1 {
        return Ok(None);
    }
    let x = tensor_arg(n, 0)?;
    let (xm, om) = (g.meta(x), g.meta(n.outputs[0]));
    // Same dtype and shape: a contiguous tensor with the same sizes is the same tensor.
    if xm != om {
        return Ok(None);
    }
    let float = matches!(xm.dtype, ScalarType::Float | ScalarType::Double | ScalarType::Half | ScalarType::BFloat16);
    // A Double scalar on an integer tensor promotes in PyTorch: not a no-op there.
    let is = |a: Option<&Arg>, v: i64| match a {
        Some(Arg::Scalar(Scalar::Int(i))) => *i == v,
        Some(Arg::Scalar(Scalar::Double(d))) => float && *d == v as f64,
        _ => false,
    };
    let noop = match n.op.as_str() {
        "aten::view_copy" => true,
        "aten::permute_copy" => {
            let rank = xm.rank() as i64;
            ints_arg(n, 1)?.iter().enumerate().all(|(i, &d)| (if d < 0 { d + rank } else { d }) == i as i64)
        }
        // MemoryFormat: None, contiguous (0) or preserve (1) keep the contiguous layout.
        "aten::clone" => matches!(n.args.get(1), None | Some(Arg::None) | Some(Arg::Int(0 | 1))),
        "aten::dropout" => !bool_arg(n, 2)?,
        "aten::mul.Scalar" | "aten::div.Scalar" => is(n.args.get(1), 1),
        // Only `other == 0`: `alpha == 0` is not exact when `other` is infinite.
        "aten::add.Scalar" => is(n.args.get(1), 0),
        _ => false,
    };
    Ok(noop.then_some(x))
}
