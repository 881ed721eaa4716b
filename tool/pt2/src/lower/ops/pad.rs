//! `F.pad` (`aten::pad`) by mode: `constant_pad_nd`, the reflection and replication pads of
//! 1-3 dims (ExecuTorch's portable kernels), and circular padding as slices wrapped around
//! with `cat`.

use rbuild_export::graph::{Arg, Dim, ValueId};
use rbuild_runtime::Scalar;

use super::{one, Call, Cx, OpResult};

/// `pad(self, pad, mode, value)`.
pub(super) fn pad(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let x = cx.tensor(a, "self")?;
    let pads = cx.ints(a, "pad")?;
    let mode = cx.string(a, "mode")?;
    let value = cx.opt_float(a, "value")?;
    if pads.len() % 2 != 0 {
        return Err(format!("pad {pads:?} must have an even length"));
    }
    let spatial = pads.len() / 2;
    let rank = cx.meta(x).rank();
    if mode != "constant" && value.is_some_and(|v| v != 0.0) {
        return Err(format!("a fill value applies to constant padding only, not {mode:?}"));
    }
    let op = match mode.as_str() {
        "constant" => {
            let fill = value.map_or(Scalar::Int(0), Scalar::Double);
            return one(cx.call1("aten::constant_pad_nd", vec![Arg::Tensor(x), Arg::Ints(pads), Arg::Scalar(fill)])?);
        }
        "circular" => return one(circular(cx, x, &pads)?),
        "reflect" => ["aten::reflection_pad1d", "aten::reflection_pad2d", "aten::reflection_pad3d"].get(spatial.wrapping_sub(1)),
        "replicate" => ["aten::replication_pad1d", "aten::replication_pad2d", "aten::replication_pad3d"].get(spatial.wrapping_sub(1)),
        other => return Err(format!("padding mode {other:?} is not one of constant, reflect, replicate, circular")),
    };
    let op = op.ok_or_else(|| format!("{mode} padding covers 1 to 3 dims, got {} pads", pads.len()))?;
    if rank != spatial + 1 && rank != spatial + 2 {
        return Err(format!("{mode} padding of {spatial} dims needs a {}-D or {}-D input, got rank {rank}", spatial + 1, spatial + 2));
    }
    one(cx.call1(op, vec![Arg::Tensor(x), Arg::Ints(pads)])?)
}

/// Circular padding: each padded dim (last first) gets its last `before` entries in front and
/// its first `after` entries behind.
fn circular(cx: &mut Cx, mut x: ValueId, pads: &[i64]) -> Result<ValueId, String> {
    let rank = cx.meta(x).rank();
    for (k, pair) in pads.chunks(2).enumerate() {
        let d = rank.checked_sub(k + 1).ok_or_else(|| format!("pad {pads:?} covers more dims than the input's {rank}"))? as i64;
        let Dim::Fixed(n) = cx.meta(x).shape[d as usize] else { return Err(format!("circular padding needs a fixed dim {d}")) };
        let (before, after) = (pair[0], pair[1]);
        if before < 0 || after < 0 || before > n as i64 || after > n as i64 {
            return Err(format!("circular pads {pair:?} must be between 0 and the dim's size {n}"));
        }
        let slice = |cx: &mut Cx, start: i64, end: i64| {
            cx.call1("aten::slice_copy.Tensor", vec![Arg::Tensor(x), Arg::Int(d), Arg::Int(start), Arg::Int(end), Arg::Int(1)])
        };
        let mut parts = Vec::new();
        if before > 0 {
            parts.push(slice(cx, n as i64 - before, n as i64)?);
        }
        parts.push(x);
        if after > 0 {
            parts.push(slice(cx, 0, after)?);
        }
        if parts.len() > 1 {
            x = cx.call1("aten::cat", vec![Arg::Tensors(parts), Arg::Int(d)])?;
        }
    }
    Ok(x)
}
