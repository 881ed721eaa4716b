//! `unary`, `gelu`, `silu` (unary.wgsl) and broadcasting `binary` (binary.wgsl).

use rbuild_runtime::backends::gpu::payload::{BinaryOp, ValueId};

use super::{numel, params, w32, R};
use crate::schedule::{Bind, Plan};
use crate::Kernel;

/// `op`: a unary code (0..=11), 100 gelu erf, 101 gelu tanh, 102 silu.
pub fn unary(plan: &mut Plan<'_>, x: ValueId, op: u32) -> R {
    let dims = plan.float_dims(x)?;
    plan.float_out()?;
    let n = numel(&dims);
    let mut p = params();
    p[0] = w32(n, "elements")?;
    p[1] = op;
    p[2] = plan.code(x);
    p[3] = plan.code(plan.output());
    let out = plan.output();
    plan.put(dims)?;
    let grid = plan.grid(n, 256)?;
    plan.dispatch(Kernel::Unary, p, vec![Bind::Value(x), Bind::Value(out)], grid);
    Ok(())
}

/// NumPy broadcast of two shapes (trailing dims aligned, size-1 dims stretch).
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> R<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() { 1 } else { a[i - (rank - a.len())] };
        let db = if i < rank - b.len() { 1 } else { b[i - (rank - b.len())] };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        };
    }
    Ok(out)
}

/// Element strides of `dims` (contiguous) seen through the broadcast shape `to` (0 where stretched).
pub fn broadcast_strides(dims: &[usize], to: &[usize]) -> Vec<usize> {
    let mut s = vec![0; to.len()];
    let mut acc = 1;
    for i in (0..dims.len()).rev() {
        let o = i + to.len() - dims.len();
        s[o] = if dims[i] == 1 { 0 } else { acc };
        acc *= dims[i];
    }
    s
}

pub fn binary(plan: &mut Plan<'_>, ins: &[ValueId], op: BinaryOp) -> R {
    let (a, b) = (ins[0], ins[1]);
    let (ad, bd) = (plan.dims(a)?, plan.dims(b)?);
    let dims = broadcast_shapes(&ad, &bd)?;
    if dims.len() > 8 {
        return Err(format!("broadcast shape {dims:?} has rank above 8"));
    }
    let (ta, tb, to) = (plan.dtype(a), plan.dtype(b), plan.out_dtype());
    let int_mode = if ta.is_index() && tb.is_index() && to.is_index() {
        if matches!(op, BinaryOp::Div | BinaryOp::Pow) {
            return Err(format!("integer {op:?} is not supported (only add/sub/mul/max/min)"));
        }
        1
    } else if ta.is_float() && tb.is_float() {
        plan.float_out()?;
        0
    } else {
        return Err(format!(
            "{op:?} of {} and {} into {} is not supported (both float, or both integer into an integer output)",
            ta.name(),
            tb.name(),
            to.name()
        ));
    };
    let n = numel(&dims);
    let mut p = params();
    p[0] = w32(n, "elements")?;
    p[1] = op as u32;
    p[2] = dims.len() as u32;
    p[3] = plan.code(a);
    p[4] = plan.code(b);
    p[5] = plan.code(plan.output());
    p[6] = int_mode;
    let (sa, sb) = (broadcast_strides(&ad, &dims), broadcast_strides(&bd, &dims));
    for i in 0..dims.len() {
        p[8 + i] = w32(dims[i], "dim")?;
        p[16 + i] = w32(sa[i], "stride")?;
        p[24 + i] = w32(sb[i], "stride")?;
    }
    let out = plan.output();
    plan.put(dims)?;
    let grid = plan.grid(n, 256)?;
    plan.dispatch(Kernel::Binary, p, vec![Bind::Value(a), Bind::Value(b), Bind::Value(out)], grid);
    Ok(())
}
