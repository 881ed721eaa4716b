//! Graph rewrites before building: dynamic quantization folded into its readers, Clamps fused
//! into the operator before them (as XNNPACK's subgraph optimizer does), an f32 hardswish
//! fused into the convolution before it, and `dequantize → float unary op → quantize` replaced
//! by an int8 lookup table.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::{NodeKind, NodeParams, Quant, XnnDatatype, XnnGraph, XnnNode, XnnValue};

use super::compile::{is_float, qparams, range, usize_of, value};
use super::ops::UnOp;
use super::plan::Op;
use crate::nhwc::qs8::QParams;
use crate::nhwc::PostOp;

/// A working copy of a node (Clamp fusion rewrites outputs and ranges).
pub struct Node {
    pub kind: NodeKind,
    pub params: NodeParams,
    pub range: Option<(f32, f32)>,
    /// Set when this float unary node absorbed the int8→f32 Convert before it and the
    /// f32→int8 Convert after it: (input, output) quantization. It then maps int8 to int8.
    pub lut: Option<(QParams, QParams)>,
    /// A FullyConnected, Conv2d or ConvTranspose2d whose input is dynamically quantized: it reads the float
    /// value the qdint8 `Convert` read and quantizes it itself (per row / per image).
    pub dynamic: bool,
    /// An f32 convolution that absorbed the activation node after it ([`fuse_post_ops`]).
    pub post: PostOp,
}

impl From<&XnnNode> for Node {
    fn from(n: &XnnNode) -> Node {
        Node { kind: n.kind, params: n.params.clone(), range: n.output_min_max, lut: None, dynamic: false, post: PostOp::None }
    }
}

fn set_output(p: &mut NodeParams, out: u32) {
    match p {
        NodeParams::Conv(c) => c.output = out,
        NodeParams::FullyConnected { output, .. } | NodeParams::Binary { output, .. } => *output = out,
        _ => {}
    }
}

/// The range of clamping to `producer` then to `clamp`, as XNNPACK merges them
/// (`min' = min(max(min_p, min_c), max_c)`, `max' = min(max(max_p, min_c), max_c)`): the same
/// clamp, and never an empty range.
fn intersect(producer: Option<(f32, f32)>, clamp: Option<(f32, f32)>) -> Option<(f32, f32)> {
    match (producer, clamp) {
        (None, x) | (x, None) => x,
        (Some((p0, p1)), Some((c0, c1))) => Some((p0.max(c0).min(c1), p1.max(c0).min(c1))),
    }
}

/// Every node's output range must be a range: bounds not NaN, min ≤ max (XNNPACK's check).
pub fn check_ranges(nodes: &[Node]) -> Result<(), String> {
    for (i, n) in nodes.iter().enumerate() {
        if let Some((lo, hi)) = n.range {
            if lo.is_nan() || hi.is_nan() || lo > hi {
                return Err(format!("node {i} ({}): output range [{lo}, {hi}] is not a range", n.kind.name()));
            }
        }
    }
    Ok(())
}

fn without(nodes: Vec<Node>, dead: &[bool]) -> Vec<Node> {
    nodes.into_iter().zip(dead).filter(|(_, d)| !**d).map(|(n, _)| n).collect()
}

/// Dynamic quantization (`Convert` float → qdint8, parameters computed at run time) feeds fully
/// connected layers (per-token: `num_nonbatch_dims` 1) and convolutions, transposed ones included
/// (per image: `num_nonbatch_dims` 3 of an NHWC tensor) only: each such Convert is dropped and its readers
/// take the float value with `dynamic` set. The older form, a float external input marked
/// `dq_datatype = qint8`, sets `dynamic` on the fully connected layers reading it.
pub fn fold_dynamic_quantization(graph: &XnnGraph, mut nodes: Vec<Node>) -> Result<Vec<Node>, String> {
    // For each qdint8 value a Convert writes: (the float value it quantizes, num_nonbatch_dims).
    let mut source: Vec<Option<(u32, i32)>> = vec![None; graph.values.len()];
    let mut dead = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if let (NodeKind::Convert, NodeParams::Unary { input, output, .. }) = (n.kind, &n.params) {
            let (x, y) = (value(graph, *input), value(graph, *output));
            if y.datatype != XnnDatatype::QdInt8 {
                continue;
            }
            if !is_float(x) {
                return Err(format!("node {i} (Convert): dynamic quantization of {} values is not supported (fp32, fp16, bf16)", x.datatype.name()));
            }
            let Quant::PerTokenDynamic { num_nonbatch_dims } = y.quant else {
                return Err(format!("node {i} (Convert): qdint8 value {output} has quantization {:?}, not per-token dynamic", y.quant));
            };
            if x.dims != y.dims || y.flags & 3 != 0 {
                return Err(format!("node {i} (Convert): qdint8 value {output} must be internal with the input's dims {:?}", x.dims));
            }
            source[usize_of(*output)] = Some((*input, num_nonbatch_dims));
            dead[i] = true;
        }
    }
    for (i, n) in nodes.iter_mut().enumerate() {
        if dead[i] {
            continue;
        }
        let kind = n.kind;
        let (reader_input, want_dims) = match &mut n.params {
            NodeParams::FullyConnected { input, .. } => (Some(input), 1),
            NodeParams::Conv(c) if matches!(kind, NodeKind::Conv2d | NodeKind::ConvTranspose2d) => (Some(&mut c.input), 3),
            _ => (None, 0),
        };
        if let Some(input) = reader_input {
            if let Some((src, dims)) = source[usize_of(*input)] {
                if dims != want_dims || (want_dims == 3 && value(graph, src).dims.len() != 4) {
                    return Err(format!(
                        "node {i} ({}) reads value {input} dynamically quantized with num_nonbatch_dims {dims}; it takes {want_dims} ({})",
                        kind.name(),
                        if want_dims == 1 { "one scale per row" } else { "one scale per NHWC image" }
                    ));
                }
                *input = src;
                n.dynamic = true;
            } else if kind == NodeKind::FullyConnected && value(graph, *input).dq_datatype == Some(XnnDatatype::QInt8) {
                n.dynamic = true;
            }
            continue;
        }
        if let Some(v) = n.params.inputs().into_iter().find(|&v| source[usize_of(v)].is_some()) {
            return Err(format!(
                "node {i} ({}) reads the dynamically quantized value {v}; only FullyConnected, Conv2d and ConvTranspose2d take qdint8 inputs",
                kind.name()
            ));
        }
    }
    Ok(without(nodes, &dead))
}

/// Folds unary nodes of kind `kind` into the node producing their input when nothing else
/// reads that value (and it is not a delegate output) and `absorb(producer, unary, input value,
/// output value)` takes it (updating the producer): the producer then writes the unary node's
/// output and the unary node goes.
fn fold_into_producer(graph: &XnnGraph, mut nodes: Vec<Node>, kind: NodeKind, absorb: impl Fn(&mut Node, &Node, &XnnValue, &XnnValue) -> bool) -> Vec<Node> {
    let mut readers = vec![0usize; graph.values.len()];
    for n in &nodes {
        for i in n.params.inputs() {
            readers[usize_of(i)] += 1;
        }
    }
    let mut producer: Vec<Option<usize>> = vec![None; graph.values.len()];
    let mut dead = vec![false; nodes.len()];
    for j in 0..nodes.len() {
        if let (true, NodeParams::Unary { input, output, .. }) = (nodes[j].kind == kind, &nodes[j].params) {
            let (input, output) = (*input, *output);
            let (vi, vo) = (value(graph, input), value(graph, output));
            if let Some(i) = producer[usize_of(input)].filter(|_| readers[usize_of(input)] == 1 && vi.flags & 2 == 0) {
                // The producer comes before its reader: i < j.
                let (head, tail) = nodes.split_at_mut(j);
                if absorb(&mut head[i], &tail[0], vi, vo) {
                    set_output(&mut head[i].params, output);
                    producer[usize_of(output)] = Some(i);
                    dead[j] = true;
                    continue;
                }
            }
        }
        for o in nodes[j].params.outputs() {
            producer[usize_of(o)] = Some(j);
        }
    }
    without(nodes, &dead)
}

/// Folds `Clamp` nodes into the operator producing their input, when that operator applies an
/// output range itself and nothing else reads the intermediate value.
pub fn fuse_clamps(graph: &XnnGraph, nodes: Vec<Node>) -> Vec<Node> {
    fold_into_producer(graph, nodes, NodeKind::Clamp, |p, clamp, vi, vo| {
        let fusable = vi.datatype == vo.datatype
            && vi.quant == vo.quant
            && matches!(
                (p.kind, vi.datatype),
                (NodeKind::Conv2d | NodeKind::DepthwiseConv2d | NodeKind::FullyConnected, _)
                    | (NodeKind::Add | NodeKind::Multiply | NodeKind::Subtract, _)
                    | (NodeKind::Div | NodeKind::Minimum | NodeKind::Maximum, XnnDatatype::Fp32)
            );
        if fusable {
            p.range = intersect(p.range, clamp.range.or(Some((f32::NEG_INFINITY, f32::INFINITY))));
        }
        fusable
    })
}

/// An f32 `Hardswish` node without an output range whose input comes from a convolution
/// (regular or depthwise) that nothing else reads joins that convolution as its [`PostOp`]: it
/// then runs on each tile while the tile is in L1 instead of as a pass over the whole tensor.
/// Runs after [`fuse_clamps`], so the convolution's range still applies before the activation,
/// as in the graph.
pub fn fuse_post_ops(graph: &XnnGraph, nodes: Vec<Node>) -> Vec<Node> {
    // `RBUILD_XNNPACK_NO_FUSE` set: keep the nodes apart (A/B timing).
    #[cfg(feature = "std")]
    if std::env::var_os("RBUILD_XNNPACK_NO_FUSE").is_some() {
        return nodes;
    }
    fold_into_producer(graph, nodes, NodeKind::Hardswish, |p, hswish, vi, vo| {
        let unbounded = hswish.range.is_none_or(|(lo, hi)| lo == f32::NEG_INFINITY && hi == f32::INFINITY);
        let fusable = vi.datatype == XnnDatatype::Fp32
            && vo.datatype == XnnDatatype::Fp32
            && unbounded
            && hswish.lut.is_none()
            && !p.dynamic
            && matches!(p.kind, NodeKind::Conv2d | NodeKind::DepthwiseConv2d)
            && p.post == PostOp::None;
        if fusable {
            p.post = PostOp::Hardswish;
        }
        fusable
    })
}

/// The float unary ops a 256-entry table may replace (pure functions of one value).
fn table_op(kind: NodeKind) -> Option<UnOp> {
    use NodeKind as K;
    Some(match kind {
        K::Hardswish => UnOp::Hardswish,
        K::Sigmoid => UnOp::Sigmoid,
        K::Tanh => UnOp::Tanh,
        K::Gelu => UnOp::Gelu,
        K::Clamp => UnOp::Identity,
        K::Abs => UnOp::Abs,
        K::Negate => UnOp::Neg,
        K::Square => UnOp::Square,
        K::Exp => UnOp::Exp,
        _ => return None,
    })
}

/// `Convert(qint8 → f32) → unary f32 op → Convert(f32 → qint8)`, with nothing else reading the
/// float values, becomes one int8 → int8 node computed by table: the table is built with the
/// very dequantize, op and quantize functions the three nodes would run, so the results are
/// the same bits (MobileNetV3's int8 hardswish is this pattern).
pub fn fuse_int8_unary(graph: &XnnGraph, nodes: Vec<Node>) -> Vec<Node> {
    let mut readers = vec![0usize; graph.values.len()];
    let mut reader_of = vec![None::<usize>; graph.values.len()];
    for (i, n) in nodes.iter().enumerate() {
        for v in n.params.inputs() {
            readers[usize_of(v)] += 1;
            reader_of[usize_of(v)] = Some(i);
        }
    }
    let private = |v: u32| readers[usize_of(v)] == 1 && graph.values[usize_of(v)].flags & 2 == 0;
    let unary_io = |n: &Node| match n.params {
        NodeParams::Unary { input, output, .. } => Some((input, output)),
        _ => None,
    };
    let mut dead = vec![false; nodes.len()];
    let mut nodes = nodes;
    for i in 0..nodes.len() {
        if nodes[i].kind != NodeKind::Convert || dead[i] {
            continue;
        }
        let Some((q_in, f_in)) = unary_io(&nodes[i]) else { continue };
        let (vq, vf) = (value(graph, q_in), value(graph, f_in));
        if vq.datatype != XnnDatatype::QInt8 || vf.datatype != XnnDatatype::Fp32 || !private(f_in) {
            continue;
        }
        let Some(j) = reader_of[usize_of(f_in)] else { continue };
        if table_op(nodes[j].kind).is_none() || nodes[j].lut.is_some() {
            continue;
        }
        let Some((_, f_out)) = unary_io(&nodes[j]) else { continue };
        if value(graph, f_out).datatype != XnnDatatype::Fp32 || !private(f_out) {
            continue;
        }
        let Some(k) = reader_of[usize_of(f_out)] else { continue };
        let Some((_, q_out)) = unary_io(&nodes[k]) else { continue };
        if nodes[k].kind != NodeKind::Convert || value(graph, q_out).datatype != XnnDatatype::QInt8 {
            continue;
        }
        let (Ok(qi), Ok(qo)) = (qparams(q_in, vq), qparams(q_out, value(graph, q_out))) else { continue };
        nodes[j].params = NodeParams::Unary { input: q_in, output: q_out, flags: 0 };
        nodes[j].lut = Some((qi, qo));
        dead[i] = true;
        dead[k] = true;
    }
    without(nodes, &dead)
}

/// The table op of a node [`fuse_int8_unary`] rewrote: `dequantize → op (clamped to the node's
/// range) → quantize` for each of the 256 inputs. `None` for other nodes.
pub fn table_for(node: &Node) -> Result<Option<Op>, String> {
    let (Some((qi, qo)), Some(op)) = (node.lut, table_op(node.kind)) else { return Ok(None) };
    super::build_elementwise::table(op, range(node.range, None), qi, qo).map(Some)
}
