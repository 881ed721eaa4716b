//! Shape and dtype inference for rbuild's fused int8 operators (`rbuild::q*`, defined by
//! `kernels/src/portable/qint8.rs`): int8 activations, int8 weights, int32 bias and
//! requantization tensors.

use rbuild_runtime::ScalarType;

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Graph, TensorMeta};

fn tensor<'a>(g: &'a Graph, op: &str, args: &[Arg], i: usize) -> Result<&'a TensorMeta> {
    match args.get(i) {
        Some(Arg::Tensor(v)) => Ok(g.meta(*v)),
        other => Err(shape_err(op, format!("argument {i} must be a tensor, got {other:?}"))),
    }
}

fn sizes(op: &str, m: &TensorMeta) -> Result<Vec<usize>> {
    m.sizes().ok_or_else(|| shape_err(op, format!("needs static sizes, got {:?}", m.shape)))
}

fn int8(op: &str, what: &str, m: &TensorMeta) -> Result<Vec<usize>> {
    if m.dtype != ScalarType::Char {
        return Err(shape_err(op, format!("{what} must be int8, got {}", m.dtype)));
    }
    sizes(op, m)
}

fn ints<'a>(op: &str, args: &'a [Arg], i: usize, n: usize) -> Result<&'a [i64]> {
    match args.get(i) {
        Some(Arg::Ints(v)) if v.len() == n => Ok(v),
        other => Err(shape_err(op, format!("argument {i} must be a list of {n} ints, got {other:?}"))),
    }
}

/// int32 tensors `[n]` at `idx` (bias, multiplier, shift).
fn per_channel_i32(g: &Graph, op: &str, args: &[Arg], idx: &[usize], n: usize) -> Result<()> {
    for &i in idx {
        let m = tensor(g, op, args, i)?;
        if m.dtype != ScalarType::Int || m.sizes() != Some(vec![n]) {
            return Err(shape_err(op, format!("argument {i} must be int32 [{n}], got {} {:?}", m.dtype, m.shape)));
        }
    }
    Ok(())
}

fn pool_out(op: &str, in_hw: &[usize], kernel: &[i64], stride: &[i64], padding: &[i64]) -> Result<[usize; 2]> {
    let mut out = [0; 2];
    for k in 0..2 {
        let (kk, s, p) = (kernel[k], stride[k], padding[k]);
        let n = (in_hw[k] as i64 + 2 * p - kk) / s + 1;
        if kk <= 0 || s <= 0 || p < 0 || 2 * p > kk || n <= 0 {
            return Err(shape_err(op, format!("input {in_hw:?} with kernel {kernel:?}, stride {stride:?}, padding {padding:?} is invalid")));
        }
        out[k] = n as usize;
    }
    Ok(out)
}

pub fn infer(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    match op {
        "rbuild::qconv2d" => {
            let xs = int8(op, "input", tensor(g, op, args, 0)?)?;
            let ws = int8(op, "weight", tensor(g, op, args, 1)?)?;
            let (stride, padding, dilation) = (ints(op, args, 9, 2)?, ints(op, args, 10, 2)?, ints(op, args, 11, 2)?);
            let groups = match args.get(12) {
                Some(Arg::Int(n)) if *n > 0 => *n as usize,
                other => return Err(shape_err(op, format!("groups must be a positive int, got {other:?}"))),
            };
            if xs.len() != 4 || ws.len() != 4 || xs[1] != ws[1] * groups || ws[0] % groups != 0 {
                return Err(shape_err(op, format!("input {xs:?} does not match weight {ws:?} with groups {groups}")));
            }
            per_channel_i32(g, op, args, &[2, 3, 4], ws[0])?;
            let mut out = vec![xs[0], ws[0]];
            for k in 0..2 {
                let (s, p, d) = (stride[k], padding[k], dilation[k]);
                let n = (xs[2 + k] as i64 + 2 * p - (d * (ws[2 + k] as i64 - 1) + 1)) / s.max(1) + 1;
                if s <= 0 || d <= 0 || p < 0 || n <= 0 {
                    return Err(shape_err(op, format!("input {xs:?} too small for weight {ws:?} (stride {s}, padding {p}, dilation {d})")));
                }
                out.push(n as usize);
            }
            Ok(vec![TensorMeta::fixed(ScalarType::Char, &out)])
        }
        "rbuild::qlinear" => {
            let xs = int8(op, "input", tensor(g, op, args, 0)?)?;
            let ws = int8(op, "weight", tensor(g, op, args, 1)?)?;
            if ws.len() != 2 || xs.last() != Some(&ws[1]) {
                return Err(shape_err(op, format!("input {xs:?} does not match weight {ws:?} ([out, in])")));
            }
            per_channel_i32(g, op, args, &[2, 3, 4], ws[0])?;
            let mut out = xs.clone();
            *out.last_mut().expect("checked above") = ws[0];
            Ok(vec![TensorMeta::fixed(ScalarType::Char, &out)])
        }
        "rbuild::qadd" | "rbuild::qmul" => {
            let (a, b) = (int8(op, "self", tensor(g, op, args, 0)?)?, int8(op, "other", tensor(g, op, args, 1)?)?);
            let channel_factor = op == "rbuild::qmul" && a.len() == 4 && b == [a[0], a[1], 1, 1];
            if a != b && !channel_factor {
                return Err(shape_err(op, format!("operands {a:?} and {b:?} must have the same shape (no broadcasting)")));
            }
            Ok(vec![TensorMeta::fixed(ScalarType::Char, &a)])
        }
        "rbuild::qmean_hw" => {
            let xs = int8(op, "input", tensor(g, op, args, 0)?)?;
            if xs.len() != 4 {
                return Err(shape_err(op, format!("input {xs:?} must be [N, C, H, W]")));
            }
            Ok(vec![TensorMeta::fixed(ScalarType::Char, &[xs[0], xs[1], 1, 1])])
        }
        "rbuild::qlookup" => {
            let xs = int8(op, "input", tensor(g, op, args, 0)?)?;
            let ts = int8(op, "table", tensor(g, op, args, 1)?)?;
            if ts != [256] {
                return Err(shape_err(op, format!("table {ts:?} must be [256]")));
            }
            Ok(vec![TensorMeta::fixed(ScalarType::Char, &xs)])
        }
        "rbuild::qmax_pool2d" | "rbuild::qavg_pool2d" => {
            let xs = int8(op, "input", tensor(g, op, args, 0)?)?;
            if xs.len() != 4 {
                return Err(shape_err(op, format!("input {xs:?} must be [N, C, H, W]")));
            }
            let hw = pool_out(op, &xs[2..], ints(op, args, 1, 2)?, ints(op, args, 2, 2)?, ints(op, args, 3, 2)?)?;
            Ok(vec![TensorMeta::fixed(ScalarType::Char, &[xs[0], xs[1], hw[0], hw[1]])])
        }
        _ => Err(shape_err(op, "not an rbuild int8 operator")),
    }
}
