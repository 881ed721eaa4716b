//! Shape inference of padding: `constant_pad_nd` (any trailing dims, negative pads crop) and
//! the reflection/replication pads of 1-3 spatial dims (with or without a batch dim).

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, IntOrSym, TensorMeta};
use crate::shape::tensor;

/// Output metas of the padding `op`, or None when `op` is not one of them.
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg]) -> Option<Result<Vec<TensorMeta>>> {
    let spatial = match op {
        "aten::constant_pad_nd" => return Some(constant_pad(g, op, args)),
        "aten::reflection_pad1d" | "aten::replication_pad1d" => 1,
        "aten::reflection_pad2d" | "aten::replication_pad2d" => 2,
        "aten::reflection_pad3d" | "aten::replication_pad3d" => 3,
        _ => return None,
    };
    Some(mode_pad(g, op, args, spatial))
}

fn pads(op: &str, args: &[Arg]) -> Result<Vec<i64>> {
    match args.get(1) {
        Some(Arg::Ints(v)) => Ok(v.clone()),
        Some(Arg::SymInts(items)) => items
            .iter()
            .map(|i| match i {
                IntOrSym::Int(n) => Ok(*n),
                IntOrSym::Sym(_) => Err(shape_err(op, "padding must be known at export")),
            })
            .collect(),
        other => Err(shape_err(op, format!("padding must be an int list, got {other:?}"))),
    }
}

/// `shape` with its trailing dims grown by (before, after) pairs, last dim first.
fn padded(op: &str, shape: &[Dim], pad: &[i64]) -> Result<Vec<Dim>> {
    let mut out = shape.to_vec();
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = shape.len() - 1 - k;
        let Dim::Fixed(n) = shape[d] else { return Err(shape_err(op, format!("dim {d} of {shape:?} must be fixed to pad it"))) };
        let size = n as i128 + pair[0] as i128 + pair[1] as i128;
        if !(0..=i64::MAX as i128).contains(&size) {
            return Err(shape_err(op, format!("padding {pad:?} leaves dim {d} of {shape:?} with a negative or too large size")));
        }
        out[d] = Dim::Fixed(size as usize);
    }
    Ok(out)
}

/// `constant_pad_nd(self, pad, value)`.
fn constant_pad(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let pad = pads(op, args)?;
    if pad.len() % 2 != 0 || pad.len() > 2 * x.rank() {
        return Err(shape_err(op, format!("pad {pad:?} must have an even length of at most twice the rank of {:?}", x.shape)));
    }
    crate::shape::scalar(op, args, 2)?;
    Ok(vec![TensorMeta::new(x.dtype, padded(op, &x.shape, &pad)?)])
}

/// `reflection_padNd` / `replication_padNd(self, padding)`: a 2N-entry padding over the last N
/// dims of an input with N+1 or N+2 dims. Reflection needs each pad smaller than its dim;
/// replication needs non-empty dims.
fn mode_pad(g: &Graph, op: &str, args: &[Arg], spatial: usize) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let pad = pads(op, args)?;
    if pad.len() != 2 * spatial || !(spatial + 1..=spatial + 2).contains(&x.rank()) {
        return Err(shape_err(op, format!("needs {} pads and a {}-D or {}-D input, got {pad:?} and {:?}", 2 * spatial, spatial + 1, spatial + 2, x.shape)));
    }
    let reflect = op.contains("reflection");
    for (k, pair) in pad.chunks(2).enumerate() {
        let n = g.dim_max(x.shape[x.rank() - 1 - k]) as i64;
        let ok = if reflect { pair.iter().all(|&p| p < n) } else { n > 0 };
        if !ok {
            let rule = if reflect { "each pad must be smaller than its dim" } else { "padded dims must not be empty" };
            return Err(shape_err(op, format!("padding {pad:?} of {:?}: {rule}", x.shape)));
        }
    }
    Ok(vec![TensorMeta::new(x.dtype, padded(op, &x.shape, &pad)?)])
}
