//! `attention` (attention.wgsl, fused) and `rope` (rope.wgsl). Positions are read on the device;
//! when a position is a delegate input its value is also checked on the host, with the
//! reference's errors.

use rbuild_runtime::backends::gpu::payload::{Dim, Op, Payload, ValueId};

use super::{numel, params, w32, R};
use crate::schedule::{Bind, Plan};
use crate::Kernel;

/// Largest value head dim the kernel holds in registers (8 per thread × 64 threads).
const MAX_DV: usize = 512;
/// Keys are split across workgroups only when a call has at most this many (batch, row, head)
/// rows (decode), so the scratch for partials stays small.
const SPLIT_MAX_ROWS: usize = 64;
/// At most this many key ranges per row, each of at least `SPLIT_MIN_KEYS` keys.
const SPLIT_MAX: usize = 16;
const SPLIT_MIN_KEYS: usize = 128;

/// How many key ranges a call with `rows` (batch × query rows × heads) and `lk` keys uses: one
/// workgroup per row leaves most of a GPU idle in decode, so long caches are split.
fn splits(rows: usize, lk: usize) -> usize {
    if rows > SPLIT_MAX_ROWS {
        1
    } else {
        (lk / SPLIT_MIN_KEYS).clamp(1, SPLIT_MAX)
    }
}

/// Bytes of split-attention scratch the payload can need: partial records of
/// `[max, sum, Dv values]` for up to `SPLIT_MAX_ROWS × SPLIT_MAX` workgroups.
pub fn attention_scratch_bytes(payload: &Payload) -> u64 {
    payload
        .ops
        .iter()
        .filter(|n| matches!(n.op, Op::Attention { .. }))
        .filter_map(|n| {
            let v = &payload.values[*n.inputs.get(2)? as usize];
            let dv = match v.meta.dims.last()? {
                Dim::Fixed(d) => *d,
                Dim::Symbol(s) => payload.symbols.get(*s as usize)?.max,
            };
            Some((SPLIT_MAX_ROWS * SPLIT_MAX) as u64 * (dv.min(MAX_DV as u64) + 2) * 4)
        })
        .max()
        .unwrap_or(0)
}

pub fn attention(plan: &mut Plan<'_>, ins: &[ValueId], causal: bool, scale: f32, heads: usize, kv_heads: usize) -> R {
    let qd = plan.float_dims(ins[0])?;
    let kd = plan.float_dims(ins[1])?;
    let vd = plan.float_dims(ins[2])?;
    let (&[b, lq, h, d], &[kb, lk, kh, kdim], &[vb, vl, vh, dv]) = (qd.as_slice(), kd.as_slice(), vd.as_slice()) else {
        return Err(format!("q {qd:?}, k {kd:?}, v {vd:?} must all be rank 4 [B, L, H, D]"));
    };
    if h != heads || kh != kv_heads || vh != kv_heads || kb != b || vb != b || kdim != d || vl != lk {
        return Err(format!(
            "q {qd:?}, k {kd:?}, v {vd:?} do not match num_heads {heads}, num_kv_heads {kv_heads} (q [B, Lq, H, D], k/v [B, Lk, Hkv, D])"
        ));
    }
    let pos = match ins.get(3) {
        Some(&p) => {
            if let Some(pos) = plan.position(p)? {
                if pos.checked_add(lq).is_none_or(|e| e > lk) {
                    return Err(format!("position {pos} + {lq} query row(s) exceeds the cache length {lk}"));
                }
            }
            Some(p)
        }
        None => None,
    };
    if lk == 0 {
        return Err(format!("k {kd:?} has no key rows"));
    }
    if d > MAX_DV || dv > MAX_DV {
        return Err(format!("head dims {d} / {dv} exceed the GPU kernel's {MAX_DV}"));
    }
    plan.float_out()?;
    let max = plan.max_groups as usize;
    let split = splits(b * lq * h, lk);
    if h > max || lq > max || b * split > max {
        return Err(format!("q {qd:?} exceeds the adapter's dispatch limit"));
    }
    let mut p = params();
    p[0] = w32(b, "batch")?;
    p[1] = w32(lq, "query rows")?;
    p[2] = w32(h, "heads")?;
    p[3] = w32(kv_heads, "kv heads")?;
    p[4] = w32(d, "head dim")?;
    p[5] = w32(lk, "key rows")?;
    p[6] = causal as u32;
    p[7] = pos.is_some() as u32;
    p[8] = scale.to_bits();
    p[9] = plan.code(ins[0]);
    p[10] = plan.code(ins[1]);
    p[11] = plan.code(ins[2]);
    let out = plan.output();
    p[12] = plan.code(out);
    p[13] = plan.index as u32;
    p[14] = dv as u32;
    p[15] = split as u32;
    plan.put(vec![b, lq, h, dv])?;
    let binds = vec![
        Bind::Value(ins[0]),
        Bind::Value(ins[1]),
        Bind::Value(ins[2]),
        pos.map_or(Bind::Dummy, Bind::Value),
        Bind::Value(out),
        Bind::Status,
        Bind::Scratch,
    ];
    plan.dispatch(Kernel::Attention, p, binds, [h as u32, lq as u32, (b * split) as u32]);
    if split > 1 {
        let n = b * lq * h * dv;
        let mut c = params();
        c[0] = w32(n, "elements")?;
        c[1] = dv as u32;
        c[2] = split as u32;
        c[3] = plan.code(out);
        let grid = plan.grid(n, 256)?;
        plan.dispatch(Kernel::AttentionCombine, c, vec![Bind::Scratch, Bind::Value(out)], grid);
    }
    Ok(())
}

pub fn rope(plan: &mut Plan<'_>, ins: &[ValueId], head_dim: usize, interleaved: bool) -> R {
    let dims = plan.float_dims(ins[0])?;
    plan.position(ins[1])?;
    let &[_, l, h, d] = dims.as_slice() else {
        return Err(format!("input {} has shape {dims:?}, rope needs [B, L, H, head_dim]", plan.name(ins[0])));
    };
    if d != head_dim || d % 2 != 0 {
        return Err(format!("input last dim {d} must equal head_dim {head_dim} and be even"));
    }
    plan.float_out()?;
    let pairs = numel(&dims) / 2;
    let mut p = params();
    p[0] = w32(pairs, "elements")?;
    p[1] = w32(l, "rows")?;
    p[2] = w32(h, "heads")?;
    p[3] = w32(d, "head dim")?;
    p[4] = interleaved as u32;
    // p[5] (theta) is unused: the frequencies come from the op's table (rope_table).
    p[6] = plan.code(ins[0]);
    let out = plan.output();
    p[7] = plan.code(out);
    p[8] = plan.index as u32;
    plan.put(dims)?;
    let grid = plan.grid(pairs, 256)?;
    let binds = vec![Bind::Value(ins[0]), Bind::Value(ins[1]), Bind::Value(out), Bind::Status, Bind::OpTable(plan.index)];
    plan.dispatch(Kernel::Rope, p, binds, grid);
    Ok(())
}

/// rope.wgsl's frequency table, computed in f64 like the reference: per pair `i`,
/// `g = theta^(-2i/D) / 2π` (turns per position) as `[g0, g1, g2]` f32 bits with `g0`, `g1`
/// of 12 significant bits, so the kernel's products with 12-bit halves of the position are exact.
pub fn rope_table(theta: f32, head_dim: u32) -> Vec<u32> {
    let d = head_dim as f64;
    (0..head_dim / 2)
        .flat_map(|i| {
            let g = (theta as f64).powf(-(2.0 * i as f64) / d) / std::f64::consts::TAU;
            let top12 = |v: f64| f32::from_bits((v as f32).to_bits() & !0xfff);
            let g0 = top12(g);
            let g1 = top12(g - g0 as f64);
            let g2 = (g - g0 as f64 - g1 as f64) as f32;
            [g0.to_bits(), g1.to_bits(), g2.to_bits()]
        })
        .collect()
}
