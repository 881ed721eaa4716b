//! `linear` and `matmul` on gemm.wgsl (tiled, batched) and gemv.wgsl (single-row linear).

use rbuild_runtime::backends::gpu::payload::ValueId;

use super::elementwise::{broadcast_shapes, broadcast_strides};
use super::{numel, params, w32, R};
use crate::schedule::{Bind, Plan};
use crate::Kernel;

/// Operand addressing of one GEMM: `A(i, p) = a[a0 + i·a_rs + p·a_cs]`, same for B.
struct Gemm {
    m: usize,
    n: usize,
    k: usize,
    a_rs: usize,
    a_cs: usize,
    b_rs: usize,
    b_cs: usize,
    /// Batch dims of the output with the A and B strides of each (0 where broadcast).
    batch: Vec<usize>,
    sa: Vec<usize>,
    sb: Vec<usize>,
}

fn dispatch(plan: &mut Plan<'_>, g: &Gemm, a: ValueId, b: ValueId, bias: Option<ValueId>) -> R {
    let out = plan.output();
    let mut p = params();
    p[0] = w32(g.m, "rows")?;
    p[1] = w32(g.n, "columns")?;
    p[2] = w32(g.k, "inner dim")?;
    p[3] = plan.code(a);
    p[4] = plan.code(b);
    p[5] = plan.code(out);
    if let Some(bias) = bias {
        p[6] = 1;
        p[7] = plan.code(bias);
    }
    p[8] = w32(g.a_rs, "stride")?;
    p[9] = w32(g.a_cs, "stride")?;
    p[10] = w32(g.b_rs, "stride")?;
    p[11] = w32(g.b_cs, "stride")?;
    if g.batch.len() > 6 {
        return Err(format!("batch dims {:?} have rank above 6", g.batch));
    }
    p[12] = g.batch.len() as u32;
    for i in 0..g.batch.len() {
        p[16 + i] = w32(g.batch[i], "batch dim")?;
        p[24 + i] = w32(g.sa[i], "stride")?;
        p[32 + i] = w32(g.sb[i], "stride")?;
    }
    let nb = numel(&g.batch);
    let (q, scales) = plan.quant(b);
    p[40..43].copy_from_slice(&q);
    // Batch-free single rows: a GEMV (decode).
    let binds = vec![Bind::Value(a), Bind::Value(b), bias.map_or(Bind::Dummy, Bind::Value), Bind::Value(out), scales];
    if g.m == 1 && nb == 1 {
        let grid = plan.grid(g.n, 1)?;
        plan.dispatch(Kernel::Gemv, p, binds, grid);
    } else {
        let max = plan.max_groups as usize;
        let (gx, gy) = (g.n.div_ceil(64), g.m.div_ceil(64));
        if gx > max || gy > max || nb > max {
            return Err(format!("[{nb}, {}, {}] outputs exceed the adapter's dispatch limit", g.m, g.n));
        }
        plan.dispatch(Kernel::Gemm, p, binds, [gx as u32, gy as u32, nb as u32]);
    }
    Ok(())
}

pub fn linear(plan: &mut Plan<'_>, ins: &[ValueId], transposed: bool) -> R {
    let xd = plan.float_dims(ins[0])?;
    let k = *xd.last().ok_or_else(|| format!("input {} is a scalar", plan.name(ins[0])))?;
    let m = numel(&xd[..xd.len() - 1]);
    let wd = plan.weight_dims(ins[1])?;
    let (wk, n) = match (wd.as_slice(), transposed) {
        ([o, i], false) => (*i, *o),
        ([i, o], true) => (*i, *o),
        _ => return Err(format!("weight {} has shape {wd:?}, a 2-D weight is needed", plan.name(ins[1]))),
    };
    if wk != k {
        return Err(format!("weight {} has shape {wd:?} (transposed: {transposed}), input {xd:?} has {k} features", plan.name(ins[1])));
    }
    if let Some(&b) = ins.get(2) {
        let bd = plan.float_dims(b)?;
        if bd[..] != [n] {
            return Err(format!("bias {} has shape {bd:?}, expected [{n}]", plan.name(b)));
        }
    }
    plan.float_out()?;
    // B(p, j) = W[j, p] for `[out, in]`, W[p, j] for `[in, out]`.
    let (b_rs, b_cs) = if transposed { (n, 1) } else { (1, k) };
    let g = Gemm { m, n, k, a_rs: k, a_cs: 1, b_rs, b_cs, batch: Vec::new(), sa: Vec::new(), sb: Vec::new() };
    let mut dims = xd.clone();
    if let Some(last) = dims.last_mut() {
        *last = n;
    }
    plan.put(dims)?;
    dispatch(plan, &g, ins[0], ins[1], ins.get(2).copied())
}

pub fn matmul(plan: &mut Plan<'_>, ins: &[ValueId]) -> R {
    let ad = plan.float_dims(ins[0])?;
    let bd = plan.float_dims(ins[1])?;
    if ad.len() < 2 || bd.len() < 2 {
        return Err(format!("operands must have rank >= 2, got {ad:?} and {bd:?}"));
    }
    let (m, k) = (ad[ad.len() - 2], ad[ad.len() - 1]);
    let (k2, n) = (bd[bd.len() - 2], bd[bd.len() - 1]);
    if k != k2 {
        return Err(format!("inner dims differ: {ad:?} @ {bd:?}"));
    }
    plan.float_out()?;
    let (abat, bbat) = (&ad[..ad.len() - 2], &bd[..bd.len() - 2]);
    let batch = broadcast_shapes(abat, bbat)?;
    // Batch strides in elements of whole matrices, scaled to elements.
    let sa: Vec<usize> = broadcast_strides(abat, &batch).iter().map(|s| s * m * k).collect();
    let sb: Vec<usize> = broadcast_strides(bbat, &batch).iter().map(|s| s * k * n).collect();
    let g = Gemm { m, n, k, a_rs: k, a_cs: 1, b_rs: n, b_cs: 1, batch: batch.clone(), sa, sb };
    let mut dims = batch;
    dims.extend([m, n]);
    plan.put(dims)?;
    // A batched single row still goes through gemm.wgsl (gemv ignores batches).
    dispatch(plan, &g, ins[0], ins[1], None)
}
