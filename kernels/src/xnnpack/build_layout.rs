//! Data-movement and spatial nodes → ops: transpose, reshape, slice, constant padding,
//! concatenation (any element type; 8-bit values must keep their quantization), bilinear
//! resizing, and average / max / global average pooling.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::graph::PoolParams;
use rbuild_runtime::backends::xnnpack::{NodeKind, XnnGraph};

use super::compile::{dims4, is_float, is_q8, qparams, qrange, range, same_type, storage, value};
use super::plan::{Op, Round};
use super::rewrite::Node;
use crate::nhwc::qs8;
use crate::nhwc::resize::{ResizeBilinear, ResizeMode};
use crate::nhwc::Conv2dGeom;

/// XNNPACK's `XNN_FLAG_TENSORFLOW_SAME_PADDING`, `XNN_FLAG_TENSORFLOW_LEGACY_MODE` and
/// `XNN_FLAG_ALIGN_CORNERS`.
const SAME_PADDING: u32 = 4;
const TENSORFLOW_LEGACY: u32 = 4;
const ALIGN_CORNERS: u32 = 8;

pub fn transpose(graph: &XnnGraph, perm: &[usize], input: u32, output: u32) -> Result<Op, String> {
    let (x, y) = (value(graph, input), value(graph, output));
    let mut seen = vec![false; x.dims.len()];
    if perm.len() != x.dims.len() || perm.iter().any(|&p| p >= seen.len() || core::mem::replace(&mut seen[p], true)) {
        return Err(format!("perm {perm:?} is not a permutation of {} dims", x.dims.len()));
    }
    let want: Vec<usize> = perm.iter().map(|&p| x.dims[p]).collect();
    same_type(input, x, output, y)?;
    if y.dims != want {
        return Err(format!("output dims {:?}, expected {want:?}", y.dims));
    }
    Ok(Op::Transpose { dims: x.dims.clone(), perm: perm.to_vec() })
}

/// `StaticReshape` (`new_shape` may hold one 0, "inferred"; the output value's dims are what
/// counts).
pub fn reshape(graph: &XnnGraph, new_shape: &[usize], input: u32, output: u32) -> Result<Op, String> {
    let (x, y) = (value(graph, input), value(graph, output));
    same_type(input, x, output, y)?;
    if x.numel() != y.numel() {
        return Err(format!("reshape of {:?} to {:?} changes the element count", x.dims, y.dims));
    }
    let fits = new_shape.len() == y.dims.len() && new_shape.iter().zip(&y.dims).all(|(&s, &d)| s == 0 || s == d);
    if !new_shape.is_empty() && !fits {
        return Err(format!("new shape {new_shape:?} does not describe the output dims {:?}", y.dims));
    }
    Ok(Op::Copy)
}

pub fn slice(graph: &XnnGraph, offsets: &[usize], sizes: &[usize], input: u32, output: u32) -> Result<Op, String> {
    let (x, y) = (value(graph, input), value(graph, output));
    same_type(input, x, output, y)?;
    let r = x.dims.len();
    let sizes: Vec<usize> = sizes.iter().zip(offsets).zip(&x.dims).map(|((&s, &o), &d)| if s == 0 { d.saturating_sub(o) } else { s }).collect();
    if offsets.len() != r || sizes.len() != r || (0..r).any(|i| offsets[i].checked_add(sizes[i]).is_none_or(|e| e > x.dims[i])) || y.dims != sizes {
        return Err(format!("slice offsets {offsets:?} sizes {sizes:?} of {:?} to {:?} are out of range", x.dims, y.dims));
    }
    Ok(Op::Slice { dims: x.dims.clone(), offsets: offsets.to_vec(), sizes })
}

pub fn pad(graph: &XnnGraph, pre: &[usize], post: &[usize], pad: f32, input: u32, output: u32) -> Result<Op, String> {
    let (x, y) = (value(graph, input), value(graph, output));
    same_type(input, x, output, y)?;
    let r = x.dims.len();
    if pre.len() != r || post.len() != r || y.dims.len() != r || (0..r).any(|i| Some(y.dims[i]) != x.dims[i].checked_add(pre[i]).and_then(|s| s.checked_add(post[i]))) {
        return Err(format!("padding {pre:?}/{post:?} of {:?} does not give {:?}", x.dims, y.dims));
    }
    let value_i8 = if is_q8(x) { qs8::quantize_bound(pad, qparams(input, x)?) } else { 0 };
    let value_f32 = match storage(input, x)?.round {
        Some(r) => r.one(pad),
        None => pad,
    };
    Ok(Op::Pad { dims: x.dims.clone(), pre: pre.to_vec(), post: post.to_vec(), value_f32, value_i8 })
}

pub fn concat(graph: &XnnGraph, axis: u32, inputs: &[u32], output: u32) -> Result<Op, String> {
    let y = value(graph, output);
    let axis = axis as usize;
    if axis >= y.dims.len() {
        return Err(format!("axis {axis} out of range for rank {}", y.dims.len()));
    }
    let outer: usize = y.dims[..axis].iter().product();
    let inner: usize = y.dims[axis + 1..].iter().product();
    let mut total = 0usize;
    let mut inner_sizes = Vec::new();
    for &i in inputs {
        let x = value(graph, i);
        same_type(i, x, output, y)?;
        if x.dims.len() != y.dims.len() || (0..y.dims.len()).any(|d| d != axis && x.dims[d] != y.dims[d]) {
            return Err(format!("input {:?} does not fit output {:?} along axis {axis}", x.dims, y.dims));
        }
        total = total.saturating_add(x.dims[axis]);
        inner_sizes.push(x.dims[axis] * inner);
    }
    if total != y.dims[axis] {
        return Err(format!("inputs add up to {total} along axis {axis}, the output has {}", y.dims[axis]));
    }
    Ok(Op::Concat { outer, inner_sizes })
}

/// `StaticResizeBilinear2D` of an NHWC tensor to `new_height × new_width`: float, or 8-bit with
/// the same quantization in and out.
pub fn resize(graph: &XnnGraph, [new_h, new_w]: [u32; 2], input: u32, output: u32, flags: u32) -> Result<Op, String> {
    let (x, y) = (value(graph, input), value(graph, output));
    let [n, h, w, c] = dims4(input, x)?;
    let out = [n, new_h as usize, new_w as usize, c];
    if y.dims != out {
        return Err(format!("output dims {:?}, expected {out:?}", y.dims));
    }
    same_type(input, x, output, y)?;
    if !is_float(x) && !is_q8(x) {
        return Err(format!("resizing {} values is not supported (float or 8-bit quantized)", x.datatype.name()));
    }
    if flags & ALIGN_CORNERS != 0 && flags & TENSORFLOW_LEGACY != 0 {
        return Err(String::from("align-corners and TensorFlow legacy mode exclude each other"));
    }
    let mode = ResizeMode { align_corners: flags & ALIGN_CORNERS != 0, tensorflow_legacy: flags & TENSORFLOW_LEGACY != 0 };
    let op = ResizeBilinear::new(n, [h, w], c, [out[1], out[2]], mode)?;
    if is_q8(x) {
        Ok(Op::ResizeQs8(op))
    } else {
        Ok(Op::ResizeF32(op))
    }
}

/// The padding (before, after) XNNPACK's TensorFlow SAME mode gives an axis.
fn same_padding(size: usize, eff: usize, stride: usize) -> (usize, usize) {
    let out = size.div_ceil(stride);
    let total = ((out.max(1) - 1) * stride + eff).saturating_sub(size);
    (total / 2, total - total / 2)
}

/// `AvgPooling2d` (float; padding left out of the average, as XNNPACK) or `MaxPooling2d`
/// (float or 8-bit with the same quantization in and out).
pub fn pool(graph: &XnnGraph, node: &Node, p: &PoolParams, round: Option<Round>) -> Result<Op, String> {
    let max_pool = node.kind == NodeKind::MaxPooling2d;
    let (x, y) = (value(graph, p.input), value(graph, p.output));
    let [n, h, w, c] = dims4(p.input, x)?;
    let [on, oh, ow, oc] = dims4(p.output, y)?;
    let u = |v: u32| v as usize;
    // Average pooling has no dilation (the field is 0).
    let (dh, dw) = if max_pool { (u(p.dilation_height), u(p.dilation_width)) } else { (1, 1) };
    let (kh, kw, sh, sw) = (u(p.pooling_height), u(p.pooling_width), u(p.stride_height), u(p.stride_width));
    let limit = 1usize << 31;
    if [kh, kw, sh, sw, dh, dw].iter().any(|&v| v == 0 || v >= limit) {
        return Err(format!("pooling window {kh}x{kw}, stride {sh}x{sw}, dilation {dh}x{dw}: all must be nonzero (and below 2^31)"));
    }
    let (eh, ew) = ((kh - 1) * dh + 1, (kw - 1) * dw + 1);
    let (pads_h, pads_w) = if p.flags & SAME_PADDING != 0 {
        if (p.padding_top | p.padding_bottom | p.padding_left | p.padding_right) != 0 {
            return Err(String::from("TensorFlow SAME padding with explicit padding"));
        }
        (same_padding(h, eh, sh), same_padding(w, ew, sw))
    } else {
        ((u(p.padding_top), u(p.padding_bottom)), (u(p.padding_left), u(p.padding_right)))
    };
    let out = |size: usize, (a, b): (usize, usize), eff: usize, s: usize| {
        let padded = size + a + b;
        (padded >= eff).then(|| (padded - eff) / s + 1)
    };
    if on != n || oc != c || out(h, pads_h, eh, sh) != Some(oh) || out(w, pads_w, ew, sw) != Some(ow) {
        return Err(format!("pooling {:?} → {:?} does not follow from the window, stride and padding", x.dims, y.dims));
    }
    let geom = Conv2dGeom {
        batch: n,
        in_h: h,
        in_w: w,
        out_h: oh,
        out_w: ow,
        kernel_h: kh,
        kernel_w: kw,
        stride_h: sh,
        stride_w: sw,
        dilation_h: dh,
        dilation_w: dw,
        pad_top: pads_h.0,
        pad_left: pads_w.0,
        groups: c,
        group_in: 1,
        group_out: 1,
    };
    same_type(p.input, x, p.output, y)?;
    if is_float(x) {
        let (min, max) = range(node.range, round);
        return Ok(Op::PoolF32 { max_pool, geom, min, max });
    }
    if max_pool && is_q8(x) {
        let (lo, hi) = qrange(node.range, qparams(p.output, y)?);
        return Ok(Op::MaxPoolQs8 { geom, lo, hi });
    }
    Err(format!("{} on {} values is not supported", node.kind.name(), x.datatype.name()))
}

/// `GlobalAvgPooling2d` over the H and W of an NHWC tensor (output `[N, 1, 1, C]` or `[N, C]`).
pub fn global_avg_pool(graph: &XnnGraph, node: &Node, input: u32, output: u32, round: Option<Round>) -> Result<Op, String> {
    let (x, y) = (value(graph, input), value(graph, output));
    let [n, h, w, c] = dims4(input, x)?;
    if y.numel() != n * c {
        return Err(format!("output dims {:?}, expected {n} × {c} elements", y.dims));
    }
    if x.datatype != y.datatype {
        return Err(format!("datatypes {}/{} differ", x.datatype.name(), y.datatype.name()));
    }
    if is_float(x) {
        let (min, max) = range(node.range, round);
        return Ok(Op::GlobalAvgPoolF32 { batch: n, pixels: h * w, channels: c, min, max });
    }
    if is_q8(x) {
        let (xq, yq) = (qparams(input, x)?, qparams(output, y)?);
        let (lo, hi) = qrange(node.range, yq);
        return Ok(Op::GlobalAvgPoolQs8 { batch: n, pixels: h * w, channels: c, input: xq, output: yq, lo, hi });
    }
    Err(format!("datatype {} is not supported", x.datatype.name()))
}
