//! Matrix-product nodes (`FullyConnected`, `BatchMatrixMultiply`) → ops. A fully connected
//! layer with constant weights is packed: float (fp32; fp16/bf16 computed in f32; fp32 input
//! with qcint8/qcint4 weights), 8-bit (qint8/quint8 × qcint8/qint8/qcint4, or quint8 weights
//! with a zero point; int32 bias) or
//! dynamically quantized (qdint8 × qcint8/qcint4/qbint4, float bias and output); with weights that are activations it runs as a
//! float GEMM at each call, as does a batch matrix multiply.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::{NodeParams, Quant, XnnDatatype, XnnGraph, XnnValue};

use super::build_conv::{asymmetric_weights, float_weights, int32_bias, weight_scales};
use super::compile::{check_len, is_float, is_q8, qparams, qrange, range, value};
use super::constants::Constants;
use super::matmul::{BatchMatMul, FullyConnectedRuntime};
use super::plan::{Op, Round};
use super::rewrite::Node;
use crate::nhwc::fc_f32::FullyConnectedF32;
use crate::nhwc::qs8::dynamic::{self as qd8, FullyConnectedQd8, WeightScales};
use crate::nhwc::qs8::{ConvQu8, FullyConnectedQs8};
use crate::nhwc::Conv2dGeom;

/// XNNPACK's `XNN_FLAG_TRANSPOSE_WEIGHTS` / `XNN_FLAG_TRANSPOSE_B`.
const TRANSPOSE_WEIGHTS: u32 = 1;

/// Whether a fully connected layer's weights (and bias) are constants packed at init.
pub fn packs_weights(graph: &XnnGraph, filter: u32, bias: Option<u32>) -> bool {
    value(graph, filter).constant.is_some() && bias.is_none_or(|b| value(graph, b).constant.is_some())
}

fn transpose2<T: Copy>(a: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len());
    for c in 0..cols {
        for r in 0..rows {
            out.push(a[r * cols + c]);
        }
    }
    out
}

pub fn fully_connected(graph: &XnnGraph, consts: &Constants<'_, '_>, node: &Node, round: Option<Round>) -> Result<Op, String> {
    let NodeParams::FullyConnected { input, filter, bias, output, flags } = node.params else {
        return Err(String::from("not a fully connected node"));
    };
    let (x, w, y) = (value(graph, input), value(graph, filter), value(graph, output));
    let [a, b] = match w.dims[..] {
        [a, b] => [a, b],
        _ => return Err(format!("filter dims {:?}: expected rank 2", w.dims)),
    };
    let transposed = flags & TRANSPOSE_WEIGHTS != 0;
    let (n, k) = if transposed { (b, a) } else { (a, b) };
    let xk = *x.dims.last().unwrap_or(&0);
    if xk != k || k == 0 || x.numel() % k != 0 {
        return Err(format!("input dims {:?} do not end in the filter's {k} input channels", x.dims));
    }
    let m = x.numel() / k;
    if y.numel() != m * n || y.dims.last() != Some(&n) {
        return Err(format!("output dims {:?}, expected {m} rows of {n}", y.dims));
    }
    if let Some(b) = bias {
        if value(graph, b).numel() != n {
            return Err(format!("bias value {b} has {} elements, expected {n}", value(graph, b).numel()));
        }
    }
    let (min, max) = range(node.range, round);
    if node.dynamic {
        return dynamic_fully_connected(graph, consts, (filter, w), bias, (x, y), (n, k, m), transposed, (min, max));
    }
    if !packs_weights(graph, filter, bias) {
        let floats = [Some(x), Some(w), Some(y), bias.map(|b| value(graph, b))];
        if floats.iter().flatten().any(|v| !is_float(v) || v.datatype != x.datatype) {
            return Err(String::from("weights that are not constants need float input, filter, bias and output of one type"));
        }
        return Ok(Op::FullyConnectedRuntime { op: FullyConnectedRuntime { m, k, n, transposed }, bias: bias.is_some(), min, max });
    }
    if is_float(x) && x.datatype == y.datatype && is_float(w) {
        let mut f = float_weights(consts, filter, w, round)?;
        if transposed {
            f = transpose2(&f, k, n);
        }
        let bias = bias.map(|b| float_weights(consts, b, value(graph, b), round)).transpose()?;
        check_len("bias", bias.as_deref(), n)?;
        return Ok(Op::FullyConnectedF32 { op: FullyConnectedF32::new(n, k, &f, bias.as_deref())?, m, min, max });
    }
    if x.datatype == XnnDatatype::Fp32 && y.datatype == XnnDatatype::Fp32 && matches!(w.datatype, XnnDatatype::QcInt8 | XnnDatatype::QcInt4) {
        // Weights-only quantization (XNNPACK's f32-qc8w / f32-qc4w): the weights dequantized
        // once, each channel's values times its scale.
        let values = if w.datatype == XnnDatatype::QcInt4 { int4_weights(consts, filter, w)? } else { consts.i8s(filter, w)? };
        let scales = weight_scales(consts, filter, w, n, if transposed { 1 } else { 0 })?;
        let at = |r: usize, c: usize| if transposed { values[c * n + r] } else { values[r * k + c] };
        let f: Vec<f32> = (0..n * k).map(|i| at(i / k, i % k) as f32 * scales[i / k]).collect();
        let bias = bias.map(|b| consts.floats(b, value(graph, b))).transpose()?;
        check_len("bias", bias.as_deref(), n)?;
        return Ok(Op::FullyConnectedF32 { op: FullyConnectedF32::new(n, k, &f, bias.as_deref())?, m, min, max });
    }
    if is_q8(x) && x.datatype == y.datatype {
        let (xq, yq) = (qparams(input, x)?, qparams(output, y)?);
        if let Some((mut f, wq)) = asymmetric_weights(consts, filter, w)? {
            // A 1×1 convolution over `m` one-pixel images.
            if transposed {
                f = transpose2(&f, k, n);
            }
            let bias = bias.map(|b| int32_bias(consts, b, value(graph, b))).transpose()?;
            check_len("bias", bias.as_deref(), n)?;
            let (lo, hi) = qrange(node.range, yq);
            let g = Conv2dGeom { batch: m, in_h: 1, in_w: 1, out_h: 1, out_w: 1, kernel_h: 1, kernel_w: 1, stride_h: 1, stride_w: 1, dilation_h: 1, dilation_w: 1, pad_top: 0, pad_left: 0, groups: 1, group_in: k, group_out: n };
            return Ok(Op::ConvQu8(ConvQu8::new(&g, false, xq, &f, wq, bias.as_deref(), yq, lo, hi)?));
        }
        let mut f = match w.datatype {
            XnnDatatype::QcInt8 | XnnDatatype::QInt8 => consts.i8s(filter, w)?,
            XnnDatatype::QcInt4 => int4_weights(consts, filter, w)?,
            d => return Err(format!("filter value {filter}: {} weights with int8 activations are not supported (qcint8, qint8, qcint4)", d.name())),
        };
        if transposed {
            f = transpose2(&f, k, n);
        }
        let scales = weight_scales(consts, filter, w, n, if transposed { 1 } else { 0 })?;
        let bias = bias.map(|b| int32_bias(consts, b, value(graph, b))).transpose()?;
        check_len("bias", bias.as_deref(), n)?;
        let (lo, hi) = qrange(node.range, yq);
        return Ok(Op::FullyConnectedQs8 { op: FullyConnectedQs8::new(n, k, xq, &f, &scales, bias.as_deref(), yq, lo, hi)?, m });
    }
    Err(format!("input/filter/output datatypes {}/{}/{} are not supported", x.datatype.name(), w.datatype.name(), y.datatype.name()))
}

/// int4 weights (rows of the stored `[rows, cols]` shape padded to whole bytes) as int8 values.
fn int4_weights(consts: &Constants<'_, '_>, id: u32, w: &XnnValue) -> Result<Vec<i8>, String> {
    let [rows, cols] = [w.dims[0], w.dims[1]];
    let len = rows.checked_mul(cols.div_ceil(2)).ok_or_else(|| format!("filter value {id}: dims {:?} are too large", w.dims))?;
    let bytes = consts.raw(id, w, len)?;
    qd8::unpack_int4(bytes, rows, cols).map_err(|e| format!("filter value {id}: {e}"))
}

/// A fully connected layer on dynamically quantized input: qc8w / qc4w (per output channel) or
/// qb4w (per block of input channels, bf16 scales) weights, float bias and output.
#[allow(clippy::too_many_arguments)]
fn dynamic_fully_connected(
    graph: &XnnGraph,
    consts: &Constants<'_, '_>,
    (id, w): (u32, &XnnValue),
    bias: Option<u32>,
    (x, y): (&XnnValue, &XnnValue),
    (n, k, m): (usize, usize, usize),
    transposed: bool,
    (min, max): (f32, f32),
) -> Result<Op, String> {
    if !is_float(x) || x.datatype != y.datatype {
        return Err(format!("dynamically quantized input: input/output datatypes {}/{} (one float type expected)", x.datatype.name(), y.datatype.name()));
    }
    if w.constant.is_none() || bias.is_some_and(|b| value(graph, b).constant.is_none()) {
        return Err(String::from("dynamically quantized input: the weights and bias must be constants"));
    }
    let bias = bias.map(|b| consts.floats(b, value(graph, b))).transpose()?;
    check_len("bias", bias.as_deref(), n)?;
    let (values, scales) = match w.datatype {
        XnnDatatype::QcInt8 | XnnDatatype::QInt8 => {
            let f = consts.i8s(id, w)?;
            let scales = weight_scales(consts, id, w, n, if transposed { 1 } else { 0 })?;
            (f, WeightScales::PerChannel(scales))
        }
        XnnDatatype::QcInt4 => {
            let f = int4_weights(consts, id, w)?;
            let scales = weight_scales(consts, id, w, n, if transposed { 1 } else { 0 })?;
            (f, WeightScales::PerChannel(scales))
        }
        XnnDatatype::QbInt4 => {
            let Quant::PerChannelGroup { channel_dim, group_size, .. } = w.quant else {
                return Err(format!("filter value {id}: qbint4 weights need per-channel-group quantization, got {:?}", w.quant));
            };
            if transposed || channel_dim != 0 {
                return Err(format!("filter value {id}: blockwise int4 weights must be [output, input] with channel dim 0"));
            }
            let block = usize::try_from(group_size).ok().filter(|&b| b > 0 && k % b == 0).ok_or_else(|| format!("filter value {id}: group size {group_size} does not divide {k} input channels"))?;
            let f = int4_weights(consts, id, w)?;
            (f, WeightScales::Blockwise { block, scales: consts.group_scales(id, w, n * (k / block))? })
        }
        d => return Err(format!("dynamically quantized input with {} weights is not supported (qcint8, qcint4, qbint4)", d.name())),
    };
    let at = |r: usize, c: usize| if transposed { values[c * n + r] } else { values[r * k + c] };
    Ok(Op::FullyConnectedQd8 { op: FullyConnectedQd8::new(n, k, at, scales, bias.as_deref())?, m, min, max })
}

/// `BatchMatrixMultiply` of two float values (constants are read as activations).
pub fn batch_matmul(graph: &XnnGraph, node: &Node, [a, b, out]: [u32; 3], flags: u32, round: Option<Round>) -> Result<Op, String> {
    let (va, vb, vy) = (value(graph, a), value(graph, b), value(graph, out));
    if !is_float(va) || va.datatype != vb.datatype || va.datatype != vy.datatype {
        return Err(format!("datatypes {}/{}/{} are not supported (one float type)", va.datatype.name(), vb.datatype.name(), vy.datatype.name()));
    }
    if flags & !TRANSPOSE_WEIGHTS != 0 {
        return Err(format!("flags {flags:#x} are not supported (XNN_FLAG_TRANSPOSE_B only)"));
    }
    let (min, max) = range(node.range, round);
    Ok(Op::BatchMatMulF32 { op: BatchMatMul::new(&va.dims, &vb.dims, &vy.dims, flags & TRANSPOSE_WEIGHTS != 0)?, min, max })
}
