//! Convolution nodes (`Conv2d`, `DepthwiseConv2d`, `ConvTranspose2d`) → ops: geometry checked
//! against the values' shapes, weights packed. Float (fp32; fp16/bf16 computed in f32 with the
//! weights rounded to the compute format, as XNNPACK packs them), 8-bit (qint8/quint8
//! activations; qcint8/qint8 weights, or quint8 weights with a zero point; int32 bias) and
//! dynamically quantized (qdint8 × qcint8 → float).

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::graph::ConvParams;
use rbuild_runtime::backends::xnnpack::{Quant, XnnDatatype, XnnGraph, XnnValue};

use super::compile::{check_len, dims4, is_float, is_q8, qparams, qrange, range, value};
use super::constants::Constants;
use super::plan::{Op, Round};
use super::rewrite::Node;
use crate::nhwc::conv_f32::ConvF32;
use crate::nhwc::dwconv_f32::DepthwiseF32;
use crate::nhwc::qs8::{ConvQd8, ConvQs8, ConvQu8, DeconvQd8, DeconvQs8, DepthwiseQs8, QParams};
use crate::nhwc::Conv2dGeom;

/// The geometry a convolution node's parameters give for input `[n, h, w, ·]` and output
/// `[·, oh, ow, ·]` (shapes are checked by the caller); kernel, strides, dilations and groups
/// must be nonzero.
fn params_geom(p: &ConvParams, [n, h, w]: [usize; 3], [oh, ow]: [usize; 2]) -> Result<Conv2dGeom, String> {
    let u = |x: u32| x as usize;
    let g = Conv2dGeom {
        batch: n,
        in_h: h,
        in_w: w,
        out_h: oh,
        out_w: ow,
        kernel_h: u(p.kernel_height),
        kernel_w: u(p.kernel_width),
        stride_h: u(p.subsampling_height),
        stride_w: u(p.subsampling_width),
        dilation_h: u(p.dilation_height),
        dilation_w: u(p.dilation_width),
        pad_top: u(p.padding_top),
        pad_left: u(p.padding_left),
        groups: u(p.groups),
        group_in: u(p.group_input_channels),
        group_out: u(p.group_output_channels),
    };
    if g.kernel_h == 0 || g.kernel_w == 0 || g.stride_h == 0 || g.stride_w == 0 || g.dilation_h == 0 || g.dilation_w == 0 || g.groups == 0 {
        return Err(format!("kernel {}x{}, stride {}x{}, dilation {}x{}, groups {}: all must be nonzero", g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.groups));
    }
    // Channel counts and spans must stay far from overflow (dims are bounded, parameters not).
    let limit = 1usize << 31;
    let big = [g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.groups, g.group_in, g.group_out, g.pad_top, g.pad_left];
    if big.iter().any(|&v| v >= limit) || g.groups.checked_mul(g.group_in.max(g.group_out)).is_none_or(|c| c >= limit) {
        return Err(format!("convolution parameters out of range: {g:?}"));
    }
    Ok(g)
}

fn conv_geom(graph: &XnnGraph, p: &ConvParams, depthwise: bool) -> Result<Conv2dGeom, String> {
    let [n, h, w, c] = dims4(p.input, value(graph, p.input))?;
    let [on, oh, ow, oc] = dims4(p.output, value(graph, p.output))?;
    let g = params_geom(p, [n, h, w], [oh, ow])?;
    if depthwise && g.group_in != 1 && g.groups * g.group_in == c {
        return Err(format!("depthwise convolution with {} input channels per group", g.group_in));
    }
    let want_c = if depthwise { g.groups } else { g.groups * g.group_in };
    if c != want_c || on != n || oc != g.groups * g.group_out {
        return Err(format!(
            "input {:?} / output {:?} do not match groups {} × ({} in, {} out)",
            [n, h, w, c],
            [on, oh, ow, oc],
            g.groups,
            g.group_in,
            g.group_out
        ));
    }
    let out = |size: usize, pa: u32, pb: u32, k: usize, d: usize, s: usize| {
        let eff = d * (k - 1) + 1;
        let padded = size + pa as usize + pb as usize;
        (padded >= eff).then(|| (padded - eff) / s + 1)
    };
    let want_h = out(h, p.padding_top, p.padding_bottom, g.kernel_h, g.dilation_h, g.stride_h);
    let want_w = out(w, p.padding_left, p.padding_right, g.kernel_w, g.dilation_w, g.stride_w);
    if want_h != Some(oh) || want_w != Some(ow) {
        return Err(format!("output {oh}x{ow} does not follow from input {h}x{w}, kernel, stride, dilation and padding"));
    }
    Ok(g)
}

/// Per-output-channel weight scales (`n` of them); a per-tensor scale is repeated.
pub fn weight_scales(consts: &Constants<'_, '_>, id: u32, w: &XnnValue, n: usize, channel_dim: i32) -> Result<Vec<f32>, String> {
    match &w.quant {
        Quant::PerTensor { zero_point, .. } if *zero_point != 0 => Err(format!("filter value {id}: zero point {zero_point} (only symmetric int8 weights are supported)")),
        Quant::PerChannel { channel_dim: d, .. } if *d != channel_dim => {
            Err(format!("filter value {id}: per-channel scales along dim {d}, expected the output-channel dim {channel_dim}"))
        }
        _ => {
            let s = consts.scales(id, w)?;
            match s.len() {
                1 => Ok(vec![s[0]; n]),
                l if l == n => Ok(s),
                l => Err(format!("filter value {id}: {l} scales for {n} output channels")),
            }
        }
    }
}

pub fn int32_bias(consts: &Constants<'_, '_>, id: u32, v: &XnnValue) -> Result<Vec<i32>, String> {
    match v.datatype {
        XnnDatatype::QcInt32 | XnnDatatype::QInt32 | XnnDatatype::Int32 => consts.i32s(id, v),
        d => Err(format!("bias value {id}: datatype {} (int8 convolutions take int32 biases)", d.name())),
    }
}

/// Float weights (any float datatype) of a node whose output is rounded to `round`: a half
/// node's are rounded to half, as XNNPACK packs fp32 static weights and biases for its fp16
/// kernels; bfloat16 kernels (fully connected only) keep f32 biases and bf16 weights as given.
pub fn float_weights(consts: &Constants<'_, '_>, id: u32, v: &XnnValue, round: Option<Round>) -> Result<Vec<f32>, String> {
    let mut w = consts.floats(id, v)?;
    if round == Some(Round::F16) {
        Round::F16.apply(&mut w);
    }
    Ok(w)
}

/// Weights with a zero point (quint8, or qint8 with a nonzero one): their int8-form values and
/// per-tensor quantization, for [`ConvQu8`]; `None` for symmetric weights.
pub fn asymmetric_weights(consts: &Constants<'_, '_>, id: u32, w: &XnnValue) -> Result<Option<(Vec<i8>, QParams)>, String> {
    let asymmetric = match (w.datatype, &w.quant) {
        (XnnDatatype::QUInt8, _) => true,
        (XnnDatatype::QInt8, Quant::PerTensor { zero_point, .. }) => *zero_point != 0,
        _ => false,
    };
    if !asymmetric {
        return Ok(None);
    }
    Ok(Some((consts.i8s(id, w)?, qparams(id, w)?)))
}

/// The int8 weights of a quantized convolution: qcint8 (per channel, zero point 0) or qint8
/// (per tensor).
fn int8_weights(consts: &Constants<'_, '_>, id: u32, w: &XnnValue) -> Result<Vec<i8>, String> {
    match w.datatype {
        XnnDatatype::QcInt8 | XnnDatatype::QInt8 => consts.i8s(id, w),
        d => Err(format!("filter value {id}: {} weights (int8 convolutions take qcint8 or qint8)", d.name())),
    }
}

/// XNNPACK's `XNN_FLAG_TENSORFLOW_SAME_PADDING` (ExecuTorch writes explicit padding instead).
const SAME_PADDING: u32 = 4;

pub fn conv(graph: &XnnGraph, consts: &Constants<'_, '_>, node: &Node, p: &ConvParams, round: Option<Round>) -> Result<Op, String> {
    if p.flags & SAME_PADDING != 0 {
        return Err(String::from("TensorFlow SAME padding (flag 0x4) is not supported; give the padding explicitly"));
    }
    let depthwise = node.kind == rbuild_runtime::backends::xnnpack::NodeKind::DepthwiseConv2d;
    let g = conv_geom(graph, p, depthwise)?;
    let (x, w, y) = (value(graph, p.input), value(graph, p.filter), value(graph, p.output));
    let want_filter = if depthwise { vec![1, g.kernel_h, g.kernel_w, g.out_channels()] } else { vec![g.out_channels(), g.kernel_h, g.kernel_w, g.group_in] };
    if w.dims != want_filter {
        return Err(format!("filter dims {:?}, expected {want_filter:?}", w.dims));
    }
    let (min, max) = range(node.range, round);
    if node.dynamic {
        return dynamic_conv(graph, consts, p, &g, (x, w, y), (min, max));
    }
    if is_float(x) && x.datatype == y.datatype && is_float(w) {
        let filter = float_weights(consts, p.filter, w, round)?;
        let bias = p.bias.map(|b| float_weights(consts, b, value(graph, b), round)).transpose()?;
        check_len("bias", bias.as_deref(), g.out_channels())?;
        return if depthwise {
            Ok(Op::DepthwiseF32 { op: DepthwiseF32::new(&g, &filter, bias.as_deref())?.with_post(node.post), min, max })
        } else {
            Ok(Op::ConvF32 { op: ConvF32::new(&g, &filter, bias.as_deref())?.with_post(node.post), min, max })
        };
    }
    if is_q8(x) && x.datatype == y.datatype {
        let (xq, yq) = (qparams(p.input, x)?, qparams(p.output, y)?);
        let (lo, hi) = qrange(node.range, yq);
        if let Some((mut filter, wq)) = asymmetric_weights(consts, p.filter, w)? {
            if depthwise {
                // [1, kh, kw, C·M] → the grouped layout [C·M, kh, kw, 1].
                let (taps, co) = (g.kernel_h * g.kernel_w, g.out_channels());
                filter = (0..co * taps).map(|i| filter[(i % taps) * co + i / taps]).collect();
            }
            let bias = p.bias.map(|b| int32_bias(consts, b, value(graph, b))).transpose()?;
            check_len("bias", bias.as_deref(), g.out_channels())?;
            return Ok(Op::ConvQu8(ConvQu8::new(&g, false, xq, &filter, wq, bias.as_deref(), yq, lo, hi)?));
        }
        let filter = int8_weights(consts, p.filter, w)?;
        let scales = weight_scales(consts, p.filter, w, g.out_channels(), if depthwise { 3 } else { 0 })?;
        let bias = p.bias.map(|b| int32_bias(consts, b, value(graph, b))).transpose()?;
        check_len("bias", bias.as_deref(), g.out_channels())?;
        return if depthwise {
            Ok(Op::DepthwiseQs8(DepthwiseQs8::new(&g, xq, &filter, &scales, bias.as_deref(), yq, lo, hi)?))
        } else {
            Ok(Op::ConvQs8(ConvQs8::new(&g, xq, &filter, &scales, bias.as_deref(), yq, lo, hi)?))
        };
    }
    Err(format!("input/filter/output datatypes {}/{}/{} are not supported", x.datatype.name(), w.datatype.name(), y.datatype.name()))
}

/// A convolution on a dynamically quantized input (the float value the qdint8 `Convert` read):
/// qcint8 weights, float bias and output.
fn dynamic_conv(graph: &XnnGraph, consts: &Constants<'_, '_>, p: &ConvParams, g: &Conv2dGeom, (x, w, y): (&XnnValue, &XnnValue, &XnnValue), (min, max): (f32, f32)) -> Result<Op, String> {
    if !is_float(x) || x.datatype != y.datatype {
        return Err(format!("dynamically quantized input: input/output datatypes {}/{} (one float type expected)", x.datatype.name(), y.datatype.name()));
    }
    if w.datatype != XnnDatatype::QcInt8 {
        return Err(format!("dynamically quantized convolution with {} weights is not supported (qcint8)", w.datatype.name()));
    }
    let filter = consts.i8s(p.filter, w)?;
    let scales = weight_scales(consts, p.filter, w, g.out_channels(), 0)?;
    let bias = p.bias.map(|b| consts.floats(b, value(graph, b))).transpose()?;
    check_len("bias", bias.as_deref(), g.out_channels())?;
    Ok(Op::ConvQd8 { op: ConvQd8::new(g, &filter, &scales, bias.as_deref())?, min, max })
}

/// `ConvTranspose2d`: output `(in − 1)·stride + dilation·(k − 1) + 1 + adjustment − padding`
/// along each axis; filter `[groups·group_out, kh, kw, group_in]`.
pub fn deconv(graph: &XnnGraph, consts: &Constants<'_, '_>, node: &Node, p: &ConvParams, round: Option<Round>) -> Result<Op, String> {
    if p.flags & SAME_PADDING != 0 {
        return Err(String::from("TensorFlow SAME padding (flag 0x4) is not supported; give the padding explicitly"));
    }
    let (x, w, y) = (value(graph, p.input), value(graph, p.filter), value(graph, p.output));
    let [n, h, wd, c] = dims4(p.input, x)?;
    let [on, oh, ow, oc] = dims4(p.output, y)?;
    let u = |v: u32| v as usize;
    let geom = params_geom(p, [n, h, wd], [oh, ow])?;
    let full = |size: usize, k: usize, s: usize, d: usize, adj: u32| size.saturating_sub(1).checked_mul(s)?.checked_add(d.checked_mul(k - 1)?)?.checked_add(1 + adj as usize);
    let fh = full(h, geom.kernel_h, geom.stride_h, geom.dilation_h, p.adjustment_height);
    let fw = full(wd, geom.kernel_w, geom.stride_w, geom.dilation_w, p.adjustment_width);
    let pads_h = u(p.padding_top) + u(p.padding_bottom);
    let pads_w = u(p.padding_left) + u(p.padding_right);
    let fits = |full: Option<usize>, pads: usize, out: usize| full.is_some_and(|f| f >= pads && f - pads == out);
    if on != n || c != geom.groups * geom.group_in || oc != geom.groups * geom.group_out || !fits(fh, pads_h, oh) || !fits(fw, pads_w, ow) {
        return Err(format!("transposed convolution {:?} → {:?} does not match its parameters", x.dims, y.dims));
    }
    let want = vec![oc, geom.kernel_h, geom.kernel_w, geom.group_in];
    if w.dims != want {
        return Err(format!("filter dims {:?}, expected {want:?}", w.dims));
    }
    let (min, max) = range(node.range, round);
    if node.dynamic {
        if !is_float(x) || x.datatype != y.datatype || w.datatype != XnnDatatype::QcInt8 {
            return Err(format!("dynamically quantized input: input/filter/output datatypes {}/{}/{} (float, qcint8, float expected)", x.datatype.name(), w.datatype.name(), y.datatype.name()));
        }
        let filter = consts.i8s(p.filter, w)?;
        let scales = weight_scales(consts, p.filter, w, oc, 0)?;
        let bias = p.bias.map(|b| consts.floats(b, value(graph, b))).transpose()?;
        check_len("bias", bias.as_deref(), oc)?;
        return Ok(Op::DeconvQd8 { op: DeconvQd8::new(&geom, &filter, &scales, bias.as_deref())?, min, max });
    }
    if is_float(x) && x.datatype == y.datatype && is_float(w) {
        let filter = float_weights(consts, p.filter, w, round)?;
        let bias = p.bias.map(|b| float_weights(consts, b, value(graph, b), round)).transpose()?;
        check_len("bias", bias.as_deref(), oc)?;
        return Ok(Op::DeconvF32 { geom, filter, bias, min, max });
    }
    if is_q8(x) && x.datatype == y.datatype {
        let (xq, yq) = (qparams(p.input, x)?, qparams(p.output, y)?);
        let bias = p.bias.map(|b| int32_bias(consts, b, value(graph, b))).transpose()?;
        check_len("bias", bias.as_deref(), oc)?;
        let (lo, hi) = qrange(node.range, yq);
        if let Some((filter, wq)) = asymmetric_weights(consts, p.filter, w)? {
            return Ok(Op::ConvQu8(ConvQu8::new(&geom, true, xq, &filter, wq, bias.as_deref(), yq, lo, hi)?));
        }
        let filter = int8_weights(consts, p.filter, w)?;
        let scales = weight_scales(consts, p.filter, w, oc, 0)?;
        return Ok(Op::DeconvQs8(DeconvQs8::new(&geom, xq, &filter, &scales, bias.as_deref(), yq, lo, hi)?));
    }
    Err(format!("transposed convolution on {}/{}/{} values is not supported", x.datatype.name(), w.datatype.name(), y.datatype.name()))
}
