//! Row reductions: `layer_norm`, `rms_norm` (norm.wgsl) and `softmax` (softmax.wgsl).

use rbuild_runtime::backends::gpu::payload::ValueId;

use super::{dim, numel, params, w32, R};
use crate::schedule::{Bind, Plan};
use crate::Kernel;

fn norm(plan: &mut Plan<'_>, x: ValueId, mode: u32, w: Option<ValueId>, b: Option<ValueId>, eps: f32) -> R {
    let dims = plan.float_dims(x)?;
    let d = dims.last().copied().unwrap_or(1);
    for id in [w, b].into_iter().flatten() {
        let pd = plan.float_dims(id)?;
        if pd != [d] {
            let what = if mode == 2 { format!("weight {}", plan.name(id)) } else { plan.name(id) };
            return Err(format!("{what} has shape {pd:?}, expected [{d}] (input {dims:?})"));
        }
    }
    plan.float_out()?;
    let rows = numel(&dims).checked_div(d).unwrap_or(0);
    let mut p = params();
    p[0] = w32(rows, "rows")?;
    p[1] = w32(d, "row length")?;
    p[2] = mode;
    p[3] = plan.code(x);
    p[4] = w.map_or(1, |id| plan.code(id));
    p[5] = b.map_or(1, |id| plan.code(id));
    p[6] = plan.code(plan.output());
    p[7] = eps.to_bits();
    let out = plan.output();
    plan.put(dims)?;
    let grid = plan.grid(rows, 1)?;
    let binds = vec![Bind::Value(x), w.map_or(Bind::Dummy, Bind::Value), b.map_or(Bind::Dummy, Bind::Value), Bind::Value(out)];
    plan.dispatch(Kernel::Norm, p, binds, grid);
    Ok(())
}

pub fn layer_norm(plan: &mut Plan<'_>, ins: &[ValueId], eps: f32, affine: bool) -> R {
    if ins.len() != if affine { 3 } else { 1 } {
        return Err(format!(
            "layer norm (affine: {affine}) takes {}; got {} input(s)",
            if affine { "x, weight, bias" } else { "x" },
            ins.len()
        ));
    }
    if affine {
        norm(plan, ins[0], 1, Some(ins[1]), Some(ins[2]), eps)
    } else {
        norm(plan, ins[0], 0, None, None, eps)
    }
}

pub fn rms_norm(plan: &mut Plan<'_>, ins: &[ValueId], eps: f32) -> R {
    norm(plan, ins[0], 2, Some(ins[1]), None, eps)
}

pub fn softmax(plan: &mut Plan<'_>, x: ValueId, d: i64) -> R {
    let dims = plan.float_dims(x)?;
    plan.float_out()?;
    let ax = dim(d, dims.len())?;
    let n = dims.get(ax).copied().unwrap_or(1);
    let inner: usize = dims.get(ax + 1..).map_or(1, numel);
    let outer: usize = numel(&dims[..ax.min(dims.len())]);
    let lines = if n == 0 { 0 } else { outer * inner };
    let mut p = params();
    p[0] = w32(lines, "rows")?;
    p[1] = w32(n, "row length")?;
    p[2] = w32(inner, "stride")?;
    p[3] = plan.code(x);
    p[4] = plan.code(plan.output());
    let out = plan.output();
    plan.put(dims)?;
    let grid = plan.grid(lines, 1)?;
    plan.dispatch(Kernel::Softmax, p, vec![Bind::Value(x), Bind::Value(out)], grid);
    Ok(())
}
