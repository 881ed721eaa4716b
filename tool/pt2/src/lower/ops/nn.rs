//! Network layers: convolutions, matrix products, pooling, resampling, embeddings, softmax
//! and (inference) dropout.

use rbuild_export::graph::{Arg, Dim, ValueId};
use rbuild_runtime::Scalar;

use super::layout::{broadcast_to, wrap};
use super::{one, Call, Cx, Lowered, OpResult};

/// `dropout(input, p, train)` at inference: the input.
pub(super) fn dropout(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "input")?;
    if cx.bool(&c.args, "train")? && cx.float(&c.args, "p")? > 0.0 {
        return Err("dropout in training mode (export the module after .eval())".into());
    }
    one(x)
}

/// `conv1d`, `conv2d` (also with `padding="same"|"valid"`), `conv_transpose1d/2d`, and the core
/// `convolution`; unbatched inputs get a batch dim of 1 for the call.
pub(super) fn convolution(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let (x, w) = (cx.tensor(a, "input")?, cx.tensor(a, "weight")?);
    let bias = cx.opt_tensor(a, "bias")?.map_or(Arg::None, Arg::Tensor);
    let spatial = cx.meta(w).rank().checked_sub(2).ok_or("the weight needs at least 3 dims")?;
    let transposed = match c.key {
        "aten::convolution" => cx.bool(a, "transposed")?,
        key => key.starts_with("aten::conv_transpose"),
    };
    let (stride, dilation, groups) = (cx.ints(a, "stride")?, cx.ints(a, "dilation")?, cx.int(a, "groups")?);
    let padding = match c.key {
        "aten::conv2d.padding" => {
            let kernel: Vec<usize> = cx.meta(w).shape[2..].iter().map(|&d| cx.b.graph.dim_max(d)).collect();
            same_or_valid(&cx.string(a, "padding")?, &kernel, &dilation)?
        }
        _ => cx.ints(a, "padding")?,
    };
    let output_padding = if transposed { cx.ints(a, "output_padding")? } else { vec![0; spatial] };
    let unbatched = cx.meta(x).rank() == spatial + 1;
    let input = if unbatched { cx.call1("aten::unsqueeze_copy", vec![Arg::Tensor(x), Arg::Int(0)])? } else { x };
    let args = vec![
        Arg::Tensor(input),
        Arg::Tensor(w),
        bias,
        Arg::Ints(stride),
        Arg::Ints(padding),
        Arg::Ints(dilation),
        Arg::Bool(transposed),
        Arg::Ints(output_padding),
        Arg::Int(groups),
    ];
    let y = cx.call1("aten::convolution", args)?;
    one(if unbatched { cx.call1("aten::squeeze_copy.dims", vec![Arg::Tensor(y), Arg::Ints(vec![0])])? } else { y })
}

/// Explicit padding for `padding="valid"` (none) or `"same"` (half the dilated kernel on each
/// side; an odd total would need asymmetric padding, which convolution cannot express).
fn same_or_valid(mode: &str, kernel: &[usize], dilation: &[i64]) -> Result<Vec<i64>, String> {
    match mode {
        "valid" => Ok(vec![0; kernel.len()]),
        "same" => kernel
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                let d = *dilation.get(i).or(dilation.first()).unwrap_or(&1);
                let total = d * (k as i64 - 1);
                if total % 2 == 0 {
                    Ok(total / 2)
                } else {
                    Err(format!("padding=\"same\" with kernel {kernel:?} and dilation {dilation:?} pads unevenly"))
                }
            })
            .collect(),
        other => Err(format!("padding must be \"same\" or \"valid\", got {other:?}")),
    }
}

pub(super) fn linear(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let (x, w) = (cx.tensor(&c.args, "input")?, cx.tensor(&c.args, "weight")?);
    let bias = cx.opt_tensor(&c.args, "bias")?.map_or(Arg::None, Arg::Tensor);
    one(cx.call1("aten::linear", vec![Arg::Tensor(x), Arg::Tensor(w), bias])?)
}

/// `mm`, `bmm`, `matmul`.
pub(super) fn matmul(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let (a, b) = (cx.tensor(&c.args, "self")?, cx.tensor(&c.args, "mat2").or_else(|_| cx.tensor(&c.args, "other"))?);
    match c.key {
        "aten::mm" => one(cx.call1("aten::mm", vec![Arg::Tensor(a), Arg::Tensor(b)])?),
        "aten::bmm" => one(cx.call1("aten::bmm", vec![Arg::Tensor(a), Arg::Tensor(b)])?),
        _ => one(matmul_values(cx, a, b)?),
    }
}

/// One dim for the product of `dims`, when it is one: fixed sizes multiply; a symbol can only
/// be alone (times 1).
fn fold(dims: &[Dim]) -> Option<Dim> {
    let fixed: usize = dims.iter().map(|d| if let Dim::Fixed(n) = d { *n } else { 1 }).product();
    let syms: Vec<Dim> = dims.iter().copied().filter(|d| matches!(d, Dim::Sym(_))).collect();
    match syms.as_slice() {
        [] => Some(Dim::Fixed(fixed)),
        [s] if fixed == 1 => Some(*s),
        _ => None,
    }
}

/// `torch.matmul`: vectors get a temporary dim; stacks of matrices broadcast their batch dims
/// and multiply as one `bmm`; a stack times a matrix folds into one `mm` when it can.
pub(super) fn matmul_values(cx: &mut Cx, a: ValueId, b: ValueId) -> Result<ValueId, String> {
    let (sa, sb) = (cx.meta(a).shape.clone(), cx.meta(b).shape.clone());
    let squeeze = |cx: &mut Cx, y: ValueId, dim: i64| cx.call1("aten::squeeze_copy.dims", vec![Arg::Tensor(y), Arg::Ints(vec![dim])]);
    let unsqueeze = |cx: &mut Cx, y: ValueId, dim: i64| cx.call1("aten::unsqueeze_copy", vec![Arg::Tensor(y), Arg::Int(dim)]);
    match (sa.len(), sb.len()) {
        (0, _) | (_, 0) => return Err("matmul needs at least 1-D operands".into()),
        (1, _) => {
            let row = unsqueeze(cx, a, 0)?;
            let y = matmul_values(cx, row, b)?;
            return squeeze(cx, y, -2);
        }
        (_, 1) => {
            let column = unsqueeze(cx, b, -1)?;
            let y = matmul_values(cx, a, column)?;
            return squeeze(cx, y, -1);
        }
        (2, 2) => return cx.call1("aten::mm", vec![Arg::Tensor(a), Arg::Tensor(b)]),
        _ => {}
    }
    let (ra, rb) = (sa.len(), sb.len());
    let (n, k, m) = (sa[ra - 2], sa[ra - 1], sb[rb - 1]);
    if rb == 2 {
        if let Some(rows) = fold(&sa[..ra - 1]) {
            let flat = cx.view(a, &[rows, k])?;
            let y = cx.call1("aten::mm", vec![Arg::Tensor(flat), Arg::Tensor(b)])?;
            let out: Vec<Dim> = sa[..ra - 1].iter().copied().chain([m]).collect();
            return cx.view(y, &out);
        }
    }
    let batch = rbuild_export::shape::broadcast("aten::matmul", &sa[..ra - 2], &sb[..rb - 2]).map_err(|e| e.to_string())?;
    let folded = fold(&batch).ok_or_else(|| format!("matmul over batch dims {batch:?} needs them foldable into one"))?;
    let target = |last: [Dim; 2]| -> Vec<Dim> { batch.iter().copied().chain(last).collect() };
    let a3 = broadcast_to(cx, a, &target([n, k]))?;
    let a3 = cx.view(a3, &[folded, n, k])?;
    let b3 = broadcast_to(cx, b, &target([sb[rb - 2], m]))?;
    let b3 = cx.view(b3, &[folded, sb[rb - 2], m])?;
    let y = cx.call1("aten::bmm", vec![Arg::Tensor(a3), Arg::Tensor(b3)])?;
    cx.view(y, &target([n, m]))
}

/// The first result (the composite op's) or all of them (the core op's).
pub(super) fn first_or_all(first: bool, outs: Vec<ValueId>) -> Vec<Lowered> {
    let n = if first { 1 } else { outs.len() };
    outs.into_iter().take(n).map(Lowered::Tensor).collect()
}

/// `max_pool2d`/`max_pool3d` (the values) and `max_pool2d_with_indices` (values and indices).
pub(super) fn max_pool(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let x = cx.tensor(a, "self")?;
    let lists = ["kernel_size", "stride", "padding", "dilation"].map(|n| cx.ints(a, n));
    let mut args = vec![Arg::Tensor(x)];
    for list in lists {
        args.push(Arg::Ints(list?));
    }
    args.push(Arg::Bool(cx.bool(a, "ceil_mode")?));
    let op = if c.key == "aten::max_pool3d" { "aten::max_pool3d_with_indices" } else { "aten::max_pool2d_with_indices" };
    let outs = cx.call(op, args)?;
    Ok(first_or_all(c.key != "aten::max_pool2d_with_indices", outs))
}

/// `avg_pool1d`, `max_pool1d`, `adaptive_avg_pool1d` as ATen computes them: the 2-D pool over
/// the input with a height of 1.
pub(super) fn pool1d(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let x = cx.tensor(a, "self")?;
    let rank = cx.meta(x).rank();
    if !(2..=3).contains(&rank) {
        return Err(format!("needs a 2-D or 3-D input, got {:?}", cx.meta(x).shape));
    }
    let wide = cx.call1("aten::unsqueeze_copy", vec![Arg::Tensor(x), Arg::Int(-2)])?;
    // One value of a 1-D list, widened to (1, value) or (0, value).
    let pair = |cx: &Cx, name: &str, h: i64, empty: Option<i64>| -> Result<Arg, String> {
        Ok(match (cx.ints(a, name)?.as_slice(), empty) {
            ([], Some(_)) => Arg::Ints(vec![]),
            ([v], _) => Arg::Ints(vec![h, *v]),
            (v, _) => return Err(format!("{name} {v:?} must have one value")),
        })
    };
    let y = match c.key {
        "aten::avg_pool1d" => {
            let args = vec![
                Arg::Tensor(wide),
                pair(cx, "kernel_size", 1, None)?,
                pair(cx, "stride", 1, Some(0))?,
                pair(cx, "padding", 0, None)?,
                Arg::Bool(cx.bool(a, "ceil_mode")?),
                Arg::Bool(cx.bool(a, "count_include_pad")?),
                Arg::None,
            ];
            cx.call1("aten::avg_pool2d", args)?
        }
        "aten::max_pool1d" => {
            let args = vec![
                Arg::Tensor(wide),
                pair(cx, "kernel_size", 1, None)?,
                pair(cx, "stride", 1, Some(0))?,
                pair(cx, "padding", 0, None)?,
                pair(cx, "dilation", 1, None)?,
                Arg::Bool(cx.bool(a, "ceil_mode")?),
            ];
            cx.call("aten::max_pool2d_with_indices", args)?[0]
        }
        _ => cx.call1("aten::adaptive_avg_pool2d", vec![Arg::Tensor(wide), pair(cx, "output_size", 1, None)?])?,
    };
    one(cx.call1("aten::squeeze_copy.dims", vec![Arg::Tensor(y), Arg::Ints(vec![-2])])?)
}

/// Both spellings go through the IR's `adaptive_avg_pool2d`, which the decomposition pass turns
/// into a mean or `_adaptive_avg_pool2d`.
pub(super) fn adaptive_avg_pool2d(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let x = cx.tensor(&c.args, "self")?;
    let size = cx.ints(&c.args, "output_size")?;
    one(cx.call1("aten::adaptive_avg_pool2d", vec![Arg::Tensor(x), Arg::Ints(size)])?)
}

/// `upsample_nearest2d.vec` and `upsample_bilinear2d.vec` (what `F.interpolate` exports).
pub(super) fn upsample(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let x = cx.tensor(a, "input")?;
    let size = cx.opt_ints(a, "output_size")?.map_or(Arg::None, Arg::Ints);
    let scales = match a.get("scale_factors")? {
        crate::schema::Argument::Floats(f) => Arg::Floats(f.clone()),
        crate::schema::Argument::None(_) => Arg::None,
        other => return Err(format!("scale_factors must be a float list or None, got {}", other.kind_name())),
    };
    let args = match c.key {
        "aten::upsample_bilinear2d.vec" => vec![Arg::Tensor(x), size, Arg::Bool(cx.bool(a, "align_corners")?), scales],
        _ => vec![Arg::Tensor(x), size, scales],
    };
    one(cx.call1(c.key, args)?)
}

/// `_upsample_bilinear2d_aa.vec(input, output_size?, align_corners, scale_factors?)` as the
/// core op: the output size from the scales when not given, and the scales passed on (they,
/// not the size ratio, place the samples, as in ATen).
pub(super) fn upsample_aa(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let a = &c.args;
    let x = cx.tensor(a, "input")?;
    let align = cx.bool(a, "align_corners")?;
    let scales = cx.opt_floats(a, "scale_factors")?;
    let size = match (cx.opt_ints(a, "output_size")?, &scales) {
        (Some(size), None) if size.len() == 2 => size,
        (None, Some(s)) if s.len() == 2 => {
            let hw = cx.meta(x).shape.iter().skip(2).map(|&d| cx.b.graph.dim_max(d) as f64).collect::<Vec<_>>();
            if hw.len() != 2 {
                return Err(format!("needs a 4-D input, got {:?}", cx.meta(x).shape));
            }
            hw.iter().zip(s).map(|(n, f)| (n * f).floor() as i64).collect()
        }
        (size, scales) => return Err(format!("needs either 2 output sizes or 2 scale factors, got {size:?} and {scales:?}")),
    };
    let scale = |i: usize| scales.as_ref().map_or(Arg::None, |s| Arg::Float(s[i]));
    one(cx.call1("aten::_upsample_bilinear2d_aa", vec![Arg::Tensor(x), Arg::Ints(size), Arg::Bool(align), scale(0), scale(1)])?)
}

/// `softmax.int`/`log_softmax.int` (with an optional dtype) and their core forms.
pub(super) fn softmax(cx: &mut Cx, c: &Call<'_>) -> OpResult {
    let mut x = cx.tensor(&c.args, "self")?;
    let dim = cx.int(&c.args, "dim")?;
    wrap(dim, cx.meta(x).rank())?;
    if c.key.ends_with(".int") {
        if let Some(t) = cx.dtype(&c.args, "dtype")? {
            x = cx.cast(x, t)?;
        }
    } else if cx.bool(&c.args, "half_to_float")? {
        return Err("half_to_float softmax is not supported".into());
    }
    let op = if c.key.contains("log_softmax") { "aten::_log_softmax" } else { "aten::_softmax" };
    one(cx.call1(op, vec![Arg::Tensor(x), Arg::Int(dim), Arg::Bool(false)])?)
}

/// `scale` times `x` (`mul.Scalar`).
pub(super) fn scaled(cx: &mut Cx, x: ValueId, scale: f64) -> Result<ValueId, String> {
    cx.call1("aten::mul.Scalar", vec![Arg::Tensor(x), Arg::Scalar(Scalar::Double(scale))])
}
