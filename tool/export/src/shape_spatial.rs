//! Shape inference of 2-D pooling and resampling over NCHW (or unbatched CHW) inputs.

use rbuild_runtime::ScalarType;

use crate::error::{shape_err, Result};
use crate::graph::{Arg, Dim, Graph, TensorMeta};
use crate::shape::{fixed, flag, ints, opt_ints, require_float, tensor};

/// Output metas of the pooling/resampling `op`, or None when `op` is not one of them.
pub(crate) fn infer(g: &Graph, op: &str, args: &[Arg]) -> Option<Result<Vec<TensorMeta>>> {
    let r = match op {
        "aten::max_pool2d_with_indices" => pool(g, op, args, Some(4), 5).map(|out| {
            let indices = TensorMeta::new(ScalarType::Long, out.shape.clone());
            vec![out, indices]
        }),
        "aten::avg_pool2d" => avg_pool_options(op, args).and_then(|_| pool(g, op, args, None, 4)).map(|out| vec![out]),
        "aten::upsample_nearest2d.vec" => upsample(g, op, args, 2),
        "aten::upsample_bilinear2d.vec" => flag(op, args, 2).and_then(|_| upsample(g, op, args, 3)),
        _ => return None,
    };
    Some(r)
}

/// A pair argument given as one value (both dims) or two; `empty` stands in for `[]`.
fn pair(op: &str, args: &[Arg], i: usize, name: &str, empty: Option<[i64; 2]>) -> Result<[i64; 2]> {
    match (ints(op, args, i)?, empty) {
        (&[], Some(e)) => Ok(e),
        (&[v], _) => Ok([v, v]),
        (&[a, b], _) => Ok([a, b]),
        (v, _) => Err(shape_err(op, format!("{name} {v:?} must have one or two values"))),
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

/// The pooled output of `self` [N,]C,H,W given `kernel_size, stride, padding[, dilation]` at
/// arguments 1–3 (and `dilation_at`) and `ceil_mode` at `ceil_at`, sized as ATen's
/// `pooling_output_shape`.
fn pool(g: &Graph, op: &str, args: &[Arg], dilation_at: Option<usize>, ceil_at: usize) -> Result<TensorMeta> {
    let x = tensor(g, op, args, 0)?;
    if !(3..=4).contains(&x.rank()) {
        return Err(shape_err(op, format!("needs a 3-D or 4-D input, got {:?}", x.shape)));
    }
    let kernel = pair(op, args, 1, "kernel_size", None)?;
    let stride = pair(op, args, 2, "stride", Some(kernel))?;
    let padding = pair(op, args, 3, "padding", None)?;
    let dilation = match dilation_at {
        Some(i) => pair(op, args, i, "dilation", None)?,
        None => [1, 1],
    };
    let ceil = flag(op, args, ceil_at)?;
    let spatial = x.rank() - 2;
    let mut shape = x.shape.clone();
    for k in 0..2 {
        let Dim::Fixed(n) = x.shape[spatial + k] else {
            return Err(shape_err(op, format!("needs static spatial sizes, got {:?}", x.shape)));
        };
        // i128: user integers times sizes cannot overflow.
        let (n, kk, s, p, d) = (n as i128, kernel[k] as i128, stride[k] as i128, padding[k] as i128, dilation[k] as i128);
        if kk <= 0 || s <= 0 || d <= 0 || p < 0 || p > kk / 2 {
            return Err(shape_err(
                op,
                format!("kernel {kernel:?}, stride {stride:?}, padding {padding:?}, dilation {dilation:?}: sizes must be positive and padding at most half the kernel"),
            ));
        }
        let span = n + 2 * p - d * (kk - 1) - 1 + if ceil { s - 1 } else { 0 };
        let mut out = span.div_euclid(s) + 1;
        // The last window must start inside the input or its left padding.
        if ceil && (out - 1) * s >= n + p {
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
