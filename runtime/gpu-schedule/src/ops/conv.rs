//! `conv1d` on conv1d.wgsl (direct convolution, one thread per output element).

use rbuild_runtime::backends::gpu::payload::ValueId;

use super::{params, w32, R};
use crate::schedule::{Bind, Plan};
use crate::Kernel;

pub fn conv1d(plan: &mut Plan<'_>, ins: &[ValueId], [stride, padding, dilation, groups]: [u32; 4]) -> R {
    let xd = plan.float_dims(ins[0])?;
    let wd = plan.float_dims(ins[1])?;
    let (&[n, cin, len], &[cout, cig, k]) = (xd.as_slice(), wd.as_slice()) else {
        return Err(format!("input {xd:?} must be [N, C_in, L] and weight {wd:?} [C_out, C_in/groups, K]"));
    };
    let (s, pd, dl, g) = (stride as usize, padding as usize, dilation as usize, groups as usize);
    if cin % g != 0 || cout % g != 0 || cig != cin / g {
        return Err(format!("input {xd:?} and weight {wd:?} do not fit groups = {g}"));
    }
    if let Some(&b) = ins.get(2) {
        let bd = plan.float_dims(b)?;
        if bd[..] != [cout] {
            return Err(format!("bias {} has shape {bd:?}, expected [{cout}]", plan.name(b)));
        }
    }
    let span = dl.checked_mul(k.saturating_sub(1)).and_then(|x| x.checked_add(1));
    let padded = len.checked_add(2 * pd);
    let out_len = match (span, padded) {
        (Some(sp), Some(p)) if k > 0 && p >= sp => (p - sp) / s + 1,
        _ => return Err(format!("kernel {k} (dilation {dl}) does not fit input length {len} + 2×padding {pd}")),
    };
    plan.float_out()?;
    let total = n * cout * out_len;
    let mut p = params();
    p[0] = w32(total, "elements")?;
    p[1] = w32(cin, "channels")?;
    p[2] = w32(len, "length")?;
    p[3] = w32(cout, "channels")?;
    p[4] = w32(k, "kernel")?;
    p[5] = w32(out_len, "length")?;
    p[6] = stride;
    p[7] = padding;
    p[8] = dilation;
    p[9] = groups;
    p[10] = ins.len() as u32 - 2;
    p[11] = plan.code(ins[0]);
    p[12] = plan.code(ins[1]);
    p[13] = ins.get(2).map_or(1, |&b| plan.code(b));
    let out = plan.output();
    p[14] = plan.code(out);
    plan.put(vec![n, cout, out_len])?;
    let grid = plan.grid(total, 256)?;
    let binds = vec![Bind::Value(ins[0]), Bind::Value(ins[1]), ins.get(2).map_or(Bind::Dummy, |&b| Bind::Value(b)), Bind::Value(out)];
    plan.dispatch(Kernel::Conv1d, p, binds, grid);
    Ok(())
}
