//! Shape inference of pooling (2-D and 3-D), resampling, grid sampling and col2im over
//! channels-first inputs (with or without a batch dim).

use rbuild_runtime::ScalarType;

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, TensorMeta};
use crate::shape::{fixed, flag, ints, opt_ints, require_float, tensor};

/// Output metas of the pooling/resampling `op`, or None when `op` is not one of them.
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg]) -> Option<Result<Vec<TensorMeta>>> {
    let r = match op {
        "aten::max_pool2d_with_indices" | "aten::max_pool3d_with_indices" => {
            let n = if op.contains("3d") { 3 } else { 2 };
            pool(g, op, args, n, Some(4), 5).map(|out| {
                let indices = TensorMeta::new(ScalarType::Long, out.shape.clone());
                vec![out, indices]
            })
        }
        "aten::avg_pool2d" => avg_pool_options(op, args).and_then(|_| pool(g, op, args, 2, None, 4)).map(|out| vec![out]),
        "aten::avg_pool3d" => avg_pool_options(op, args).and_then(|_| pool(g, op, args, 3, None, 4)).map(|out| vec![out]),
        "aten::max_pool2d_with_indices_backward" => pool_backward(g, op, args),
        "aten::_adaptive_avg_pool3d" => adaptive3d(g, op, args),
        "aten::grid_sampler_2d" => grid_sampler(g, op, args),
        "aten::col2im" => col2im(g, op, args),
        "aten::_upsample_bilinear2d_aa" => upsample_aa(g, op, args),
        "aten::upsample_nearest2d.vec" => upsample(g, op, args, 2),
        "aten::upsample_bilinear2d.vec" => flag(op, args, 2).and_then(|_| upsample(g, op, args, 3)),
        _ => return None,
    };
    Some(r)
}

/// A per-spatial-dim argument given as one value (every dim) or `n`; `empty` stands in for `[]`.
fn tuple(op: &str, args: &[Arg], i: usize, name: &str, empty: Option<&[i64]>, n: usize) -> Result<Vec<i64>> {
    match (ints(op, args, i)?, empty) {
        (&[], Some(e)) => Ok(e.to_vec()),
        (&[v], _) => Ok(vec![v; n]),
        (v, _) if v.len() == n => Ok(v.to_vec()),
        (v, _) => Err(shape_err(op, format!("{name} {v:?} must have one or {n} values"))),
    }
}

fn avg_pool_options(op: &str, args: &[Arg]) -> Result<()> {
    flag(op, args, 5)?;
    match args.get(6) {
        Some(Arg::None) => Ok(()),
        Some(Arg::Int(d)) if *d != 0 => Ok(()),
        other => Err(shape_err(op, format!("divisor_override must be None or a nonzero int, got {other:?}"))),
    }
}

/// The pooled output of `self` [N,]C,spatial… (`n` spatial dims) given `kernel_size, stride,
/// padding[, dilation]` at arguments 1–3 (and `dilation_at`) and `ceil_mode` at `ceil_at`,
/// sized as ATen's `pooling_output_shape`.
fn pool(g: &Graph, op: &str, args: &[Arg], n: usize, dilation_at: Option<usize>, ceil_at: usize) -> Result<TensorMeta> {
    let x = tensor(g, op, args, 0)?;
    if !(n + 1..=n + 2).contains(&x.rank()) {
        return Err(shape_err(op, format!("needs a {}-D or {}-D input, got {:?}", n + 1, n + 2, x.shape)));
    }
    let kernel = tuple(op, args, 1, "kernel_size", None, n)?;
    let stride = tuple(op, args, 2, "stride", Some(&kernel), n)?;
    let padding = tuple(op, args, 3, "padding", None, n)?;
    let dilation = match dilation_at {
        Some(i) => tuple(op, args, i, "dilation", None, n)?,
        None => vec![1; n],
    };
    let ceil = flag(op, args, ceil_at)?;
    let spatial = x.rank() - n;
    let mut shape = x.shape.clone();
    for k in 0..n {
        let Dim::Fixed(size) = x.shape[spatial + k] else {
            return Err(shape_err(op, format!("needs static spatial sizes, got {:?}", x.shape)));
        };
        // i128: user integers times sizes cannot overflow.
        let (size, kk, s, p, d) = (size as i128, kernel[k] as i128, stride[k] as i128, padding[k] as i128, dilation[k] as i128);
        if kk <= 0 || s <= 0 || d <= 0 || p < 0 || p > kk / 2 {
            return Err(shape_err(
                op,
                format!("kernel {kernel:?}, stride {stride:?}, padding {padding:?}, dilation {dilation:?}: sizes must be positive and padding at most half the kernel"),
            ));
        }
        let span = size + 2 * p - d * (kk - 1) - 1 + if ceil { s - 1 } else { 0 };
        let mut out = span.div_euclid(s) + 1;
        // The last window must start inside the input or its left padding.
        if ceil && (out - 1) * s >= size + p {
            out -= 1;
        }
        if out < 1 {
            return Err(shape_err(op, format!("input {:?} is too small for kernel {kernel:?} (dilation {dilation:?}, padding {padding:?})", x.shape)));
        }
        shape[spatial + k] = Dim::Fixed(out as usize);
    }
    Ok(TensorMeta::new(x.dtype, shape))
}

/// `upsample_*2d.vec(input, output_size?, …, scale_factors?)`: exactly one of the two; a scale
/// gives `floor(size * scale)`.
fn upsample(g: &Graph, op: &str, args: &[Arg], scales_at: usize) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    if x.rank() != 4 {
        return Err(shape_err(op, format!("needs a 4-D NCHW input, got {:?}", x.shape)));
    }
    let nearest_ok = op.contains("nearest") && x.dtype == ScalarType::Byte;
    if !nearest_ok {
        require_float(op, x)?;
    }
    let hw = fixed(op, &TensorMeta::new(x.dtype, x.shape[2..].to_vec()))?;
    let scales = match args.get(scales_at) {
        Some(Arg::Floats(v)) => Some(v.as_slice()),
        Some(Arg::None) => None,
        other => return Err(shape_err(op, format!("scale_factors must be a float list or None, got {other:?}"))),
    };
    let out: Vec<i64> = match (opt_ints(op, args, 1)?, scales) {
        (Some(size), None) if size.len() == 2 => size.to_vec(),
        (None, Some(s)) if s.len() == 2 && s.iter().all(|v| v.is_finite() && *v > 0.0) => {
            hw.iter().zip(s).map(|(&n, &s)| (n as f64 * s) as i64).collect()
        }
        (size, scales) => {
            return Err(shape_err(op, format!("needs either 2 output sizes or 2 positive scale factors, got {size:?} and {scales:?}")))
        }
    };
    if out.iter().any(|&n| n <= 0) {
        return Err(shape_err(op, format!("output size {out:?} of input {:?} is empty", x.shape)));
    }
    let shape = x.shape[..2].iter().copied().chain(out.iter().map(|&n| Dim::Fixed(n as usize))).collect();
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `max_pool2d_with_indices_backward(grad_output, self, kernel, stride, padding, dilation,
/// ceil_mode, indices)`: the gradient of `self`, shaped like it.
fn pool_backward(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (grad, x, indices) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?, tensor(g, op, args, 7)?);
    let pooled = pool(g, op, &args[1..], 2, Some(4), 5).map_err(|e| shape_err(op, e.to_string()))?;
    if grad.shape != pooled.shape || indices.shape != pooled.shape || indices.dtype != ScalarType::Long || grad.dtype != x.dtype {
        return Err(shape_err(op, format!("grad_output {:?} and int64 indices {:?} must be the pooled shape {:?}", grad.shape, indices.shape, pooled.shape)));
    }
    Ok(vec![x.clone()])
}

/// `_adaptive_avg_pool3d(self, output_size)`: the last 3 dims become output_size.
fn adaptive3d(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let o = ints(op, args, 1)?;
    if !(4..=5).contains(&x.rank()) || o.len() != 3 || o.iter().any(|&n| n <= 0) {
        return Err(shape_err(op, format!("needs a 4-D or 5-D input and 3 positive output sizes, got {:?} and {o:?}", x.shape)));
    }
    let mut shape = x.shape[..x.rank() - 3].to_vec();
    shape.extend(o.iter().map(|&n| Dim::Fixed(n as usize)));
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `grid_sampler_2d(input [N,C,H,W], grid [N,Ho,Wo,2], mode, padding_mode, align_corners)`.
fn grid_sampler(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let (x, grid) = (tensor(g, op, args, 0)?, tensor(g, op, args, 1)?);
    require_float(op, x)?;
    let ok = x.rank() == 4 && grid.rank() == 4 && grid.shape[0] == x.shape[0] && grid.shape[3] == Dim::Fixed(2) && grid.dtype == x.dtype;
    let (mode, padding) = (crate::shape::int(op, args, 2)?, crate::shape::int(op, args, 3)?);
    if !ok || !(0..=2).contains(&mode) || !(0..=2).contains(&padding) {
        return Err(shape_err(op, format!("needs input [N,C,H,W] {:?}, grid [N,H,W,2] {:?} of its dtype, mode and padding_mode in 0..=2", x.shape, grid.shape)));
    }
    flag(op, args, 4)?;
    Ok(vec![TensorMeta::new(x.dtype, vec![x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]])])
}

/// `col2im(self [N,]C·kh·kw,L, output_size, kernel_size, dilation, padding, stride)`: sums the
/// columns back into [N,]C,H,W; L must be the number of sliding blocks.
fn col2im(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    let sizes = crate::shape::fixed(op, x)?;
    let [size, kernel, dilation, padding, stride] = [1, 2, 3, 4, 5].map(|i| ints(op, args, i).map(<[i64]>::to_vec));
    let (size, kernel, dilation, padding, stride) = (size?, kernel?, dilation?, padding?, stride?);
    let all_two = [&size, &kernel, &dilation, &padding, &stride].iter().all(|v| v.len() == 2);
    if !(2..=3).contains(&sizes.len()) || !all_two || kernel.iter().chain(&dilation).chain(&stride).chain(&size).any(|&v| v <= 0) || padding.iter().any(|&v| v < 0) {
        return Err(shape_err(op, format!("needs a 2-D or 3-D input and positive pairs, got {:?}, size {size:?}, kernel {kernel:?}, dilation {dilation:?}, padding {padding:?}, stride {stride:?}", x.shape)));
    }
    let batched = sizes.len() == 3;
    let (cols, blocks) = (sizes[sizes.len() - 2] as i64, sizes[sizes.len() - 1] as i64);
    // i128: user integers cannot overflow.
    let w = |v: &[i64], k: usize| v[k] as i128;
    let per = w(&kernel, 0) * w(&kernel, 1);
    let count = |k: usize| (w(&size, k) + 2 * w(&padding, k) - w(&dilation, k) * (w(&kernel, k) - 1) - 1) / w(&stride, k) + 1;
    let (cols, blocks) = (cols as i128, blocks as i128);
    if cols % per != 0 || count(0) * count(1) != blocks {
        return Err(shape_err(op, format!("input {:?} does not hold C·{per} rows of {} blocks for output size {size:?}", x.shape, count(0) * count(1))));
    }
    let mut shape: Vec<Dim> = if batched { vec![x.shape[0]] } else { vec![] };
    shape.extend([(cols / per) as usize, size[0] as usize, size[1] as usize].map(Dim::Fixed));
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}

/// `_upsample_bilinear2d_aa(self, output_size, align_corners, scales_h?, scales_w?)`.
fn upsample_aa(g: &Graph, op: &str, args: &[Arg]) -> Result<Vec<TensorMeta>> {
    let x = tensor(g, op, args, 0)?;
    require_float(op, x)?;
    let size = ints(op, args, 1)?;
    flag(op, args, 2)?;
    if x.rank() != 4 || size.len() != 2 || size.iter().any(|&n| n <= 0) {
        return Err(shape_err(op, format!("needs a 4-D input and 2 positive output sizes, got {:?} and {size:?}", x.shape)));
    }
    let shape = x.shape[..2].iter().copied().chain(size.iter().map(|&n| Dim::Fixed(n as usize))).collect();
    Ok(vec![TensorMeta::new(x.dtype, shape)])
}
