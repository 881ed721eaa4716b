//! Data movement on copy.wgsl: `reshape` (aliases its input's buffer: no dispatch), `permute`
//! / `transpose`, `slice`, `cat`, `cast` and `cache_update`.

use rbuild_runtime::backends::gpu::payload::{DType, ValueId};

use super::{dim, numel, params, w32, R};
use crate::schedule::{Bind, Plan};
use crate::Kernel;

fn contiguous_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// One strided copy: for every index `c` of `dims`, `dst[dst_base + c·ds] = src[src_base + c·ss]`.
struct Copy<'a> {
    src: ValueId,
    dst: ValueId,
    dims: &'a [usize],
    ss: &'a [usize],
    ds: &'a [usize],
    src_base: usize,
    dst_base: usize,
    /// `(position value, dst stride per position step, largest valid position)`.
    pos: Option<(ValueId, usize, usize)>,
}

fn copy(plan: &mut Plan<'_>, c: Copy<'_>) -> R {
    if c.dims.len() > 8 {
        return Err(format!("rank {} is above 8", c.dims.len()));
    }
    let n = numel(c.dims);
    let mut p = params();
    p[0] = w32(n, "elements")?;
    p[1] = c.dims.len() as u32;
    p[2] = plan.code(c.src);
    p[3] = plan.code(c.dst);
    p[4] = w32(c.src_base, "offset")?;
    p[5] = w32(c.dst_base, "offset")?;
    for i in 0..c.dims.len() {
        p[8 + i] = w32(c.dims[i], "dim")?;
        p[16 + i] = w32(c.ss[i], "stride")?;
        p[24 + i] = w32(c.ds[i], "stride")?;
    }
    let pos_bind = match c.pos {
        Some((id, stride, limit)) => {
            p[6] = 1;
            p[7] = w32(stride, "stride")?;
            p[32] = w32(limit, "cache length")?;
            Bind::Value(id)
        }
        None => Bind::Dummy,
    };
    p[33] = plan.index as u32;
    let grid = plan.grid(n, 256)?;
    plan.dispatch(Kernel::Copy, p, vec![Bind::Value(c.src), Bind::Value(c.dst), pos_bind, Bind::Status], grid);
    Ok(())
}

fn check_same_dtype(plan: &Plan<'_>, dtype: DType) -> R {
    let out = plan.out_dtype();
    if out != dtype {
        return Err(format!("output is {}, input is {}", out.name(), dtype.name()));
    }
    Ok(())
}

pub fn reshape(plan: &mut Plan<'_>, x: ValueId) -> R {
    let d = plan.dims(x)?;
    let dims = plan.output_dims(numel(&d))?;
    let (from, to) = (plan.dtype(x), plan.out_dtype());
    if from != to {
        return Err(format!("reshape changes dtype {} to {}", from.name(), to.name()));
    }
    // Same elements in the same order: the output aliases the input's buffer (see GpuProgram::new).
    plan.put(dims)
}

pub fn permute(plan: &mut Plan<'_>, x: ValueId, perm: &[usize]) -> R {
    let d = plan.dims(x)?;
    if perm.len() != d.len() {
        return Err(format!("permutation {perm:?} does not match rank {}", d.len()));
    }
    check_same_dtype(plan, plan.dtype(x))?;
    let cs = contiguous_strides(&d);
    let dims: Vec<usize> = perm.iter().map(|&i| d[i]).collect();
    let ss: Vec<usize> = perm.iter().map(|&i| cs[i]).collect();
    let ds = contiguous_strides(&dims);
    let out = plan.output();
    plan.put(dims.clone())?;
    copy(plan, Copy { src: x, dst: out, dims: &dims, ss: &ss, ds: &ds, src_base: 0, dst_base: 0, pos: None })
}

pub fn slice(plan: &mut Plan<'_>, x: ValueId, d: i64, start: i64, end: i64, step: i64) -> R {
    let xd = plan.dims(x)?;
    let ax = dim(d, xd.len())?;
    check_same_dtype(plan, plan.dtype(x))?;
    let size = xd.get(ax).copied().unwrap_or(1) as i64;
    let clamp = |v: i64| if v < 0 { (v + size).max(0) } else { v.min(size) };
    let (s, e) = (clamp(start), clamp(end));
    let len = if e > s { (e - s - 1) / step + 1 } else { 0 } as usize;
    let cs = contiguous_strides(&xd);
    let mut dims = xd.clone();
    let mut ss = cs.clone();
    if !dims.is_empty() {
        dims[ax] = len;
        ss[ax] = if len > 1 { cs[ax] * step as usize } else { 0 };
    }
    let base = if len > 0 && !cs.is_empty() { s as usize * cs[ax] } else { 0 };
    let ds = contiguous_strides(&dims);
    let out = plan.output();
    plan.put(dims.clone())?;
    copy(plan, Copy { src: x, dst: out, dims: &dims, ss: &ss, ds: &ds, src_base: base, dst_base: 0, pos: None })
}

pub fn cat(plan: &mut Plan<'_>, ins: &[ValueId], d: i64) -> R {
    let first = plan.dims(ins[0])?;
    let ft = plan.dtype(ins[0]);
    let ax = dim(d, first.len())?;
    let mut total = 0;
    for &id in ins {
        let t = plan.dims(id)?;
        let same = plan.dtype(id) == ft && t.len() == first.len() && t.iter().zip(&first).enumerate().all(|(i, (a, b))| i == ax || a == b);
        if !same {
            return Err(format!(
                "{} is {} {:?}, not compatible with {} {:?} along dim {ax}",
                plan.name(id),
                plan.dtype(id).name(),
                t,
                ft.name(),
                first
            ));
        }
        total += t[ax];
    }
    check_same_dtype(plan, ft)?;
    let mut dims = first.clone();
    dims[ax] = total;
    let ds = contiguous_strides(&dims);
    let out = plan.output();
    plan.put(dims.clone())?;
    let mut at = 0;
    for &id in ins {
        let t = plan.dims(id)?;
        let ss = contiguous_strides(&t);
        copy(plan, Copy { src: id, dst: out, dims: &t, ss: &ss, ds: &ds, src_base: 0, dst_base: at * ds[ax], pos: None })?;
        at += t[ax];
    }
    Ok(())
}

pub fn cast(plan: &mut Plan<'_>, x: ValueId) -> R {
    let dims = plan.dims(x)?;
    let (from, to) = (plan.dtype(x), plan.out_dtype());
    let supported = from.is_float() || from.is_index() || from == DType::Bool;
    if !supported || !(to.is_float() || to.is_index() || to == DType::Bool) {
        return Err(format!("cast from {} to {} is not supported", from.name(), to.name()));
    }
    let cs = contiguous_strides(&dims);
    let out = plan.output();
    plan.put(dims.clone())?;
    copy(plan, Copy { src: x, dst: out, dims: &dims, ss: &cs, ds: &cs, src_base: 0, dst_base: 0, pos: None })
}

pub fn cache_update(plan: &mut Plan<'_>, ins: &[ValueId], seq_dim: i64) -> R {
    let (cache, rows, pos) = (ins[0], ins[1], ins[2]);
    let host_pos = plan.position(pos)?;
    let rd = plan.float_dims(rows)?;
    let cd = plan.dims(cache)?;
    let cache_name = plan.name(cache);
    if !plan.dtype(cache).is_float() {
        return Err(format!("cache {cache_name} is not a float tensor"));
    }
    let ax = dim(seq_dim, cd.len())?;
    let same = rd.len() == cd.len() && rd.iter().zip(&cd).enumerate().all(|(i, (a, b))| i == ax || a == b);
    if !same {
        return Err(format!("rows {rd:?} do not match cache {cache_name} {cd:?} outside seq_dim {ax}"));
    }
    let (max, n) = (cd[ax], rd[ax]);
    if let Some(p) = host_pos {
        if p.checked_add(n).is_none_or(|e| e > max) {
            return Err(format!("position {p} + {n} row(s) exceeds cache {cache_name} length {max} along dim {ax}"));
        }
    } else if n > max {
        return Err(format!("{n} row(s) exceed cache {cache_name} length {max} along dim {ax}"));
    }
    let cs = contiguous_strides(&cd);
    let ss = contiguous_strides(&rd);
    copy(plan, Copy { src: rows, dst: cache, dims: &rd, ss: &ss, ds: &cs, src_base: 0, dst_base: 0, pos: Some((pos, cs[ax], max - n)) })
}
