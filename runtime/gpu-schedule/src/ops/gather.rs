//! `embedding` on embedding.wgsl (rows of a float table gathered by i32 indices) and
//! `positions` on positions.wgsl (index generation).

use rbuild_runtime::backends::gpu::payload::{Dim, ValueId};

use super::{numel, params, w32, R};
use crate::schedule::{Bind, Plan};
use crate::Kernel;

pub fn embedding(plan: &mut Plan<'_>, ins: &[ValueId]) -> R {
    let (table, idx) = (ins[0], ins[1]);
    let id_dims = plan.dims(idx)?;
    if !plan.dtype(idx).is_index() {
        return Err(format!("{} is {}, an i32/i64 tensor is needed", plan.name(idx), plan.dtype(idx).name()));
    }
    let td = plan.dims(table)?;
    let dt = plan.dtype(table);
    let (vocab, d) = match td.as_slice() {
        &[v, d] if dt.is_float() || dt.is_quantized() => (v, d),
        _ => return Err(format!("table {} must be a float [V, D] tensor, is {} {:?}", plan.name(table), plan.dtype(table).name(), td)),
    };
    plan.float_out()?;
    let n = numel(&id_dims) * d;
    let mut p = params();
    p[0] = w32(n, "elements")?;
    p[1] = w32(d, "row length")?;
    p[2] = w32(vocab, "rows")?;
    p[3] = plan.code(table);
    let out = plan.output();
    p[4] = plan.code(out);
    p[5] = plan.index as u32;
    let (q, scales) = plan.quant(table);
    p[6..9].copy_from_slice(&q);
    let mut dims = id_dims;
    dims.push(d);
    plan.put(dims)?;
    let grid = plan.grid(n, 256)?;
    plan.dispatch(Kernel::Embedding, p, vec![Bind::Value(table), Bind::Value(idx), Bind::Value(out), Bind::Status, scales], grid);
    Ok(())
}

pub fn positions(plan: &mut Plan<'_>, pos: ValueId) -> R {
    plan.position(pos)?;
    let out = plan.output();
    let v = &plan.payload.values[out as usize];
    let len = match v.meta.dims.first() {
        Some(Dim::Fixed(n)) => *n as usize,
        Some(Dim::Symbol(s)) => plan.env[*s as usize].ok_or_else(|| format!("the length of {} is a symbol no input bound in this call", plan.name(out)))?,
        None => return Err(format!("output {} must have rank 1", plan.name(out))),
    };
    if !plan.out_dtype().is_index() {
        return Err(format!("output {} is {}, positions are i32/i64", plan.name(out), plan.out_dtype().name()));
    }
    let mut p = params();
    p[0] = w32(len, "length")?;
    p[1] = plan.index as u32;
    plan.put(vec![len])?;
    let grid = plan.grid(len, 256)?;
    plan.dispatch(Kernel::Positions, p, vec![Bind::Value(pos), Bind::Value(out), Bind::Status], grid);
    Ok(())
}
