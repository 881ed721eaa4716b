//! XNNGraph → [`Plan`]: the graph rewritten ([`super::rewrite`]), each node built into an
//! [`Op`] (shapes, dtypes and parameters checked, weights packed: `build_*` modules),
//! activation buffers shared by liveness ([`super::memory`]), delegate inputs and outputs bound
//! to the call's arguments by external id.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::{NodeKind, NodeParams, Quant, XnnDatatype, XnnGraph, XnnValue};
use rbuild_runtime::ScalarType;

use super::aligned::Aligned;
use super::constants::{Constants, NamedData};
use super::memory::Alloc;
use super::plan::{Buf, Elem, Extern, Op, Plan, Round, Step};
use super::rewrite::{self, Node};
use super::{build_conv, build_elementwise, build_fc, build_layout, fusion};
use crate::nhwc::qs8::{self, QParams};

pub use super::memory::DEFAULT_ACTIVATION_LIMIT;

/// How a value is held: its buffer's element type, the rounding after each write (half and
/// bfloat16 in f32 buffers), and its dtype at the delegate boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Storage {
    pub elem: Elem,
    pub round: Option<Round>,
    pub dtype: ScalarType,
}

pub fn storage(id: u32, v: &XnnValue) -> Result<Storage, String> {
    let s = |elem, round, dtype| Ok(Storage { elem, round, dtype });
    match v.datatype {
        XnnDatatype::Fp32 => s(Elem::F32, None, ScalarType::Float),
        XnnDatatype::Fp16 => s(Elem::F32, Some(Round::F16), ScalarType::Half),
        XnnDatatype::Bf16 => s(Elem::F32, Some(Round::Bf16), ScalarType::BFloat16),
        XnnDatatype::QInt8 => s(Elem::I8, None, ScalarType::Char),
        XnnDatatype::QUInt8 => s(Elem::I8, None, ScalarType::Byte),
        XnnDatatype::Int32 | XnnDatatype::QInt32 => s(Elem::I32, None, ScalarType::Int),
        d => Err(format!("value {id}: activations of datatype {} are not supported", d.name())),
    }
}

/// fp32, fp16 or bf16.
pub fn is_float(v: &XnnValue) -> bool {
    matches!(v.datatype, XnnDatatype::Fp32 | XnnDatatype::Fp16 | XnnDatatype::Bf16)
}

/// qint8 or quint8 (per-tensor quantized 8-bit activations).
pub fn is_q8(v: &XnnValue) -> bool {
    matches!(v.datatype, XnnDatatype::QInt8 | XnnDatatype::QUInt8)
}

/// The per-tensor quantization of a qint8 / quint8 value, in the int8 representation (a quint8
/// zero point moves down by 128 with the values).
pub fn qparams(id: u32, v: &XnnValue) -> Result<QParams, String> {
    let shift = match v.datatype {
        XnnDatatype::QInt8 => 0,
        XnnDatatype::QUInt8 => 128,
        d => return Err(format!("value {id}: expected a qint8 or quint8 value, got {}", d.name())),
    };
    match v.quant {
        Quant::PerTensor { scale, zero_point } if scale.is_finite() && scale > 0.0 && (-128 + shift..=127 + shift).contains(&zero_point) => {
            Ok(QParams { scale, zero_point: zero_point - shift })
        }
        _ => Err(format!(
            "value {id}: expected per-tensor {} quantization (finite scale > 0, zero point in range), got {:?}",
            v.datatype.name(),
            v.quant
        )),
    }
}

/// A node's float output range (unbounded without one); half/bfloat16 outputs take the bounds
/// rounded to their format, as XNNPACK stores them.
pub fn range(mm: Option<(f32, f32)>, round: Option<Round>) -> (f32, f32) {
    let (lo, hi) = mm.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
    match round {
        Some(r) => (r.one(lo), r.one(hi)),
        None => (lo, hi),
    }
}

/// A node's output range as int8 bounds of its quantized output.
pub fn qrange(mm: Option<(f32, f32)>, q: QParams) -> (i8, i8) {
    match mm {
        Some((lo, hi)) => (qs8::quantize_bound(lo, q), qs8::quantize_bound(hi, q)),
        None => (i8::MIN, i8::MAX),
    }
}

pub fn usize_of(v: u32) -> usize {
    v as usize
}

/// Value `id` (ids were checked against the graph when it was decoded).
pub fn value(graph: &XnnGraph, id: u32) -> &XnnValue {
    &graph.values[usize_of(id)]
}

pub fn dims4(id: u32, v: &XnnValue) -> Result<[usize; 4], String> {
    match v.dims[..] {
        [n, h, w, c] => Ok([n, h, w, c]),
        _ => Err(format!("value {id}: expected an NHWC tensor of rank 4, got dims {:?}", v.dims)),
    }
}

pub fn check_len<T>(what: &str, v: Option<&[T]>, n: usize) -> Result<(), String> {
    match v {
        Some(v) if v.len() != n => Err(format!("{what} has {} elements, expected {n}", v.len())),
        _ => Ok(()),
    }
}

/// Input and output of the same datatype (and the same quantization, for 8-bit values).
pub fn same_type(a: u32, x: &XnnValue, b: u32, y: &XnnValue) -> Result<(), String> {
    if x.datatype != y.datatype || (is_q8(x) && x.quant != y.quant) {
        return Err(format!("value {a} ({}) and value {b} ({}) must have the same type and quantization", x.datatype.name(), y.datatype.name()));
    }
    storage(a, x).map(|_| ())
}

/// Input and output of one float type and the same dims (elementwise float nodes).
pub fn same_float(a: u32, x: &XnnValue, b: u32, y: &XnnValue) -> Result<(), String> {
    if !is_float(x) || x.datatype != y.datatype {
        return Err(format!("values {a}/{b}: datatypes {}/{} (this node runs on one float type: fp32, fp16 or bf16)", x.datatype.name(), y.datatype.name()));
    }
    if x.dims != y.dims {
        return Err(format!("input dims {:?} differ from output dims {:?}", x.dims, y.dims));
    }
    Ok(())
}

/// The delegate's inputs and outputs: (value id, argument index) of each, ordered by argument.
/// ExecuTorch binds the value with external id `e` to the call's argument `e`, so the ids must
/// number the arguments `0..inputs + outputs` once each.
fn externals(graph: &XnnGraph) -> Result<(Vec<(u32, usize)>, Vec<(u32, usize)>), String> {
    let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
    for (id, v) in graph.values.iter().enumerate() {
        let id = id as u32;
        if v.flags & 3 == 0 {
            continue;
        }
        if v.flags & 3 == 3 {
            return Err(format!("value {id} is both a delegate input and a delegate output"));
        }
        let arg = v.external_id.ok_or_else(|| format!("value {id}: an external value without an external id"))? as usize;
        if v.flags & 1 != 0 {
            if v.constant.is_some() {
                return Err(format!("input value {id} is a constant"));
            }
            inputs.push((id, arg));
        } else {
            outputs.push((id, arg));
        }
    }
    let total = inputs.len() + outputs.len();
    let mut seen = vec![false; total];
    for &(id, arg) in inputs.iter().chain(&outputs) {
        match seen.get_mut(arg) {
            Some(s @ false) => *s = true,
            _ => return Err(format!("value {id}: external id {arg} repeats or lies outside the {total} delegate arguments")),
        }
    }
    inputs.sort_by_key(|&(_, a)| a);
    outputs.sort_by_key(|&(_, a)| a);
    Ok((inputs, outputs))
}

pub fn compile<'g, 'n: 'g>(graph: &'g XnnGraph, region: &'g [u8], named: NamedData<'n>, activation_limit: usize) -> Result<Plan, String> {
    // The lookup again, returning slices of the graph's (shorter) lifetime.
    let lookup = move |key: &str| -> Option<&'g [u8]> { named(key) };
    let consts = Constants { graph, region, named: &lookup };
    let nodes: Vec<Node> = graph.nodes.iter().map(Node::from).collect();
    rewrite::check_ranges(&nodes)?;
    let nodes = rewrite::fold_dynamic_quantization(graph, nodes)?;
    let nodes = rewrite::fuse_clamps(graph, nodes);
    let nodes = rewrite::fuse_int8_unary(graph, nodes);
    let nodes = rewrite::fuse_post_ops(graph, nodes);

    // Liveness: the last step reading each value (external outputs live to the end).
    let n_values = graph.values.len();
    let mut last_read = vec![None::<usize>; n_values];
    for (i, n) in nodes.iter().enumerate() {
        for v in n.params.inputs() {
            last_read[usize_of(v)] = Some(i);
        }
    }
    // Nodes that will run as one fused step keep the group's input and expanded value alive
    // through the group's last node, so no value the group produces takes a buffer the fused
    // step still reads or uses as scratch.
    let groups = fusion::fusion_groups(graph, &nodes);
    for (i, &len) in groups.iter().enumerate() {
        if len == 0 {
            continue;
        }
        let (NodeParams::Conv(expand), last) = (&nodes[i].params, i + len - 1) else { continue };
        for v in [expand.input, expand.output] {
            let r = &mut last_read[usize_of(v)];
            if r.is_some_and(|r| r >= i && r < last) {
                *r = Some(last);
            }
        }
    }
    // Values by the node after which nothing reads them (their buffers go back then).
    let mut dying: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
    for (v, r) in last_read.iter().enumerate() {
        if let Some(r) = *r {
            dying[r].push(v as u32);
        }
    }
    let mut alloc = Alloc::new(n_values, activation_limit);
    let mut pinned = vec![false; n_values];
    let (input_ids, output_ids) = externals(graph)?;
    for &(id, _) in &output_ids {
        pinned[usize_of(id)] = true;
    }

    let mut inputs = Vec::new();
    for &(id, arg) in &input_ids {
        let v = value(graph, id);
        let s = storage(id, v)?;
        let buf = alloc.take(s.elem, v.numel())?;
        alloc.slot[usize_of(id)] = Some(buf);
        inputs.push(Extern { arg, buf, dims: v.dims.clone(), dtype: s.dtype });
    }

    let mut steps = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let name = node.kind.name();
        let ctx = |e: String| format!("node {i} ({name}): {e}");
        // Constant inputs that the op reads as activations (not packed weights) get a buffer.
        let packed = packed_inputs(graph, node);
        let mut in_bufs = Vec::new();
        for v in node.params.inputs() {
            if packed.contains(&v) {
                continue;
            }
            let val = value(graph, v);
            let buf = match alloc.slot[usize_of(v)] {
                Some(b) => b,
                None if val.constant.is_some() => {
                    let b = materialize(&consts, v, val, &mut alloc).map_err(ctx)?;
                    pinned[usize_of(v)] = true;
                    b
                }
                None => return Err(ctx(format!("reads value {v} before any node writes it"))),
            };
            in_bufs.push((buf, val.numel()));
        }
        let outs = node.params.outputs();
        if outs.len() != 1 {
            return Err(ctx(String::from("nodes with several outputs are not supported (ExecuTorch's partitioner emits none)")));
        }
        let out_id = outs[0];
        let out_v = value(graph, out_id);
        if out_v.constant.is_some() || alloc.slot[usize_of(out_id)].is_some() {
            return Err(ctx(format!("output value {out_id} is a constant or written twice")));
        }
        let out_s = storage(out_id, out_v).map_err(ctx)?;
        // The output's memory first: a hostile output size fails here, before the op sizes
        // anything by it.
        let out_buf = alloc.take(out_s.elem, out_v.numel()).map_err(ctx)?;
        let op = build_op(graph, &consts, node, out_s.round).map_err(ctx)?;
        alloc.slot[usize_of(out_id)] = Some(out_buf);
        // Values whose last reader this is go back to the free list (after the output took its
        // buffer).
        for &v in &dying[i] {
            let vi = usize_of(v);
            if last_read[vi] == Some(i) && !pinned[vi] {
                if let Some(b) = alloc.slot[vi] {
                    alloc.release(b);
                }
            }
        }
        if last_read[usize_of(out_id)].is_none() && !pinned[usize_of(out_id)] {
            alloc.release(out_buf);
        }
        steps.push(Step { kind: node.kind, op, inputs: in_bufs, output: (out_buf, out_v.numel()), scratch: Vec::new(), round: out_s.round });
    }

    let mut outputs = Vec::new();
    for &(id, arg) in &output_ids {
        let v = value(graph, id);
        let buf = alloc.slot[usize_of(id)].ok_or_else(|| format!("output value {id} is never written"))?;
        outputs.push(Extern { arg, buf, dims: v.dims.clone(), dtype: storage(id, v)?.dtype });
    }
    let steps = fusion::fuse_expand_depthwise(steps, &groups);
    Ok(Plan { workers: Default::default(), bufs: alloc.bufs, steps, inputs, outputs })
}

/// Values an op packs at compile time (weights, biases) instead of reading from a buffer: a
/// convolution's filter and bias, a fully connected layer's when its filter is a constant.
fn packed_inputs(graph: &XnnGraph, node: &Node) -> Vec<u32> {
    match &node.params {
        NodeParams::Conv(c) => [Some(c.filter), c.bias].into_iter().flatten().collect(),
        NodeParams::FullyConnected { filter, bias, .. } if build_fc::packs_weights(graph, *filter, *bias) => [Some(*filter), *bias].into_iter().flatten().collect(),
        _ => Vec::new(),
    }
}

/// A constant read as an activation (an operand of an elementwise node, say) gets a buffer of
/// its own, filled once.
fn materialize(consts: &Constants<'_, '_>, id: u32, v: &XnnValue, alloc: &mut Alloc) -> Result<usize, String> {
    let elem = storage(id, v)?.elem;
    alloc.charge(v.numel().saturating_mul(4))?;
    let buf = match elem {
        Elem::F32 => Buf::F32(Aligned::from_slice(&consts.floats(id, v)?)?),
        Elem::I8 => Buf::I8(Aligned::from_slice(&consts.i8s(id, v)?)?),
        Elem::I32 => Buf::I32(Aligned::from_slice(&consts.i32s(id, v)?)?),
    };
    Ok(alloc.push_pinned(usize_of(id), buf))
}

fn build_op(graph: &XnnGraph, consts: &Constants<'_, '_>, node: &Node, round: Option<Round>) -> Result<Op, String> {
    use NodeKind as K;
    if let Some(op) = rewrite::table_for(node)? {
        return Ok(op);
    }
    match (&node.params, node.kind) {
        (NodeParams::Conv(p), K::Conv2d | K::DepthwiseConv2d) => build_conv::conv(graph, consts, node, p, round),
        (NodeParams::Conv(p), K::ConvTranspose2d) => build_conv::deconv(graph, consts, node, p, round),
        (NodeParams::FullyConnected { .. }, K::FullyConnected) => build_fc::fully_connected(graph, consts, node, round),
        (NodeParams::Binary { input1, input2, output, flags }, K::BatchMatrixMultiply) => build_fc::batch_matmul(graph, node, [*input1, *input2, *output], *flags, round),
        (NodeParams::Binary { input1, input2, output, .. }, kind) => build_elementwise::binary(graph, node, kind, [*input1, *input2, *output], round),
        (NodeParams::Unary { input, output, .. }, K::GlobalAvgPooling2d) => build_layout::global_avg_pool(graph, node, *input, *output, round),
        (NodeParams::Unary { input, output, .. }, kind) => build_elementwise::unary(graph, node, kind, *input, *output, round),
        (NodeParams::UnaryParam { param, input, output }, kind) => build_elementwise::unary_param(graph, node, kind, *param, *input, *output, round),
        (NodeParams::Pool(p), K::AvgPooling2d | K::MaxPooling2d) => build_layout::pool(graph, node, p, round),
        (NodeParams::ResizeBilinear { new_height, new_width, input, output, flags }, _) => build_layout::resize(graph, [*new_height, *new_width], *input, *output, *flags),
        (NodeParams::Transpose { perm, input, output }, _) => build_layout::transpose(graph, perm, *input, *output),
        (NodeParams::Reshape { new_shape, input, output }, _) => build_layout::reshape(graph, new_shape, *input, *output),
        (NodeParams::Slice { offsets, sizes, input, output }, _) => build_layout::slice(graph, offsets, sizes, *input, *output),
        (NodeParams::ConstantPad { pre, post, value: pad, input, output }, _) => build_layout::pad(graph, pre, post, *pad, *input, *output),
        (NodeParams::Concat { axis, inputs, output }, _) => build_layout::concat(graph, *axis, inputs, *output),
        (_, K::ScaledDotProductAttention) => Err(String::from("ScaledDotProductAttention is not supported (ExecuTorch's XNNPACK runtime does not define it either; its partitioner lowers attention to BatchMatrixMultiply and Softmax)")),
        (_, kind) => Err(format!("node type {} is not supported by rbuild's XNNPACK runtime", kind.name())),
    }
}
