//! XNNGraph → [`Plan`]: constants resolved, shapes and dtypes checked, weights packed for the
//! NHWC kernels, Clamps fused, activation buffers shared by liveness.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::graph::{ConvParams, PoolParams};
use rbuild_runtime::backends::xnnpack::{NodeKind, NodeParams, Quant, Scales, XnnDatatype, XnnGraph, XnnValue};

use super::aligned::Aligned;
use super::ops::{BinOp, Broadcast, UnOp};
use crate::nhwc::conv_f32::ConvF32;
use crate::nhwc::dwconv_f32::DepthwiseF32;
use crate::nhwc::fc_f32::FullyConnectedF32;
use crate::nhwc::qs8::dynamic::{self as qd8, FullyConnectedQd8, WeightScales};
use crate::nhwc::qs8::{self, AddQs8, ConvQs8, DepthwiseQs8, FullyConnectedQs8, MulQs8, QParams};
use crate::nhwc::{Conv2dGeom, PostOp};

/// Element type of an activation buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    I8,
    I32,
}

/// Activation storage (64-byte aligned: [`Aligned`]).
pub enum Buf {
    F32(Aligned<f32>),
    I8(Aligned<i8>),
    I32(Aligned<i32>),
}

impl Buf {
    fn new(elem: Elem, len: usize) -> Result<Buf, String> {
        Ok(match elem {
            Elem::F32 => Buf::F32(Aligned::zeros(len)?),
            Elem::I8 => Buf::I8(Aligned::zeros(len)?),
            Elem::I32 => Buf::I32(Aligned::zeros(len)?),
        })
    }
    fn elem(&self) -> Elem {
        match self {
            Buf::F32(_) => Elem::F32,
            Buf::I8(_) => Elem::I8,
            Buf::I32(_) => Elem::I32,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Buf::F32(v) => v.len(),
            Buf::I8(v) => v.len(),
            Buf::I32(v) => v.len(),
        }
    }
    fn grow(&mut self, len: usize) -> Result<(), String> {
        match self {
            Buf::F32(v) => v.grow(len),
            Buf::I8(v) => v.grow(len),
            Buf::I32(v) => v.grow(len),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Buf::F32(v) => 4 * v.len(),
            Buf::I8(v) => v.len(),
            Buf::I32(v) => 4 * v.len(),
        }
    }
}

/// A delegate input or output: which buffer holds it and what the call's tensor must be.
pub struct Extern {
    pub buf: usize,
    pub dims: Vec<usize>,
    pub elem: Elem,
}

/// One operator, ready to run.
pub enum Op {
    ConvF32 { op: ConvF32, min: f32, max: f32 },
    DepthwiseF32 { op: DepthwiseF32, min: f32, max: f32 },
    /// A convolution (pointwise, or a network's first layer) whose output only a depthwise one
    /// reads, run together in bands of rows so the expanded tensor stays in cache
    /// ([`fuse_expand_depthwise`]).
    /// With `project`, the pointwise convolution reading the depthwise output joins too.
    ExpandDwF32 { expand: ConvF32, e_min: f32, e_max: f32, dw: DepthwiseF32, min: f32, max: f32, project: Option<(ConvF32, f32, f32)> },
    FullyConnectedF32 { op: FullyConnectedF32, m: usize, min: f32, max: f32 },
    ConvQs8(ConvQs8),
    DepthwiseQs8(DepthwiseQs8),
    FullyConnectedQs8 { op: FullyConnectedQs8, m: usize },
    /// f32 rows quantized per row at run time (the qdint8 `Convert` folded in), int8/int4 weights.
    FullyConnectedQd8 { op: FullyConnectedQd8, m: usize, min: f32, max: f32 },
    DeconvF32 { geom: Conv2dGeom, filter: Vec<f32>, bias: Option<Vec<f32>>, min: f32, max: f32 },
    BinaryF32 { op: BinOp, bc: Broadcast, min: f32, max: f32 },
    AddQs8 { op: AddQs8, bc: Broadcast },
    MulQs8 { op: MulQs8, bc: Broadcast },
    UnaryF32 { op: UnOp, min: f32, max: f32 },
    ClampI8 { lo: i8, hi: i8 },
    /// int8 → int8 through a 256-entry table indexed by `q + 128`.
    TableI8(Vec<i8>),
    Quantize(QParams),
    Dequantize(QParams),
    GlobalAvgPoolF32 { batch: usize, pixels: usize, channels: usize, min: f32, max: f32 },
    GlobalAvgPoolQs8 { batch: usize, pixels: usize, channels: usize, input: QParams, output: QParams, lo: i8, hi: i8 },
    PoolF32 { max_pool: bool, geom: Conv2dGeom, min: f32, max: f32 },
    SoftmaxF32 { rows: usize, cols: usize },
    BatchMatMulF32 { batch_a: usize, batch_b: usize, m: usize, k: usize, n: usize },
    Transpose { dims: Vec<usize>, perm: Vec<usize> },
    /// Reshape and Copy: the same elements.
    Copy,
    Slice { dims: Vec<usize>, offsets: Vec<usize>, sizes: Vec<usize> },
    Pad { dims: Vec<usize>, pre: Vec<usize>, post: Vec<usize>, value_f32: f32, value_i8: i8 },
    Concat { outer: usize, inner_sizes: Vec<usize> },
}

impl Op {
    /// Short shape summary for profiles.
    pub fn describe(&self) -> String {
        let g = |g: &Conv2dGeom| format!("{}x{}x{}->{}x{}x{} k{}x{} s{}", g.in_h, g.in_w, g.in_channels(), g.out_h, g.out_w, g.out_channels(), g.kernel_h, g.kernel_w, g.stride_h);
        let post = |p: PostOp| if p == PostOp::None { "" } else { " +hardswish" };
        let conv = |op: &ConvF32| format!("{}{}", g(op.geom()), post(op.post()));
        let dwc = |op: &DepthwiseF32| format!("{}{}", g(op.geom()), post(op.post()));
        match self {
            Op::ConvF32 { op, .. } => conv(op),
            Op::DepthwiseF32 { op, .. } => dwc(op),
            Op::ExpandDwF32 { expand, dw, project, .. } => match project {
                Some((p, _, _)) => format!("{} then {} then {}", conv(expand), dwc(dw), conv(p)),
                None => format!("{} then {}", conv(expand), dwc(dw)),
            },
            Op::ConvQs8(op) => g(op.geom()),
            Op::DepthwiseQs8(op) => g(op.geom()),
            Op::FullyConnectedF32 { op, m, .. } => format!("{m}x{}->{}", op.k(), op.n()),
            Op::FullyConnectedQs8 { op, m } => format!("{m}x{}->{}", op.k(), op.n()),
            Op::FullyConnectedQd8 { op, m, .. } => format!("{m}x{}->{} qd8", op.k(), op.n()),
            Op::BinaryF32 { .. } | Op::UnaryF32 { .. } | Op::GlobalAvgPoolF32 { .. } | Op::PoolF32 { .. } => "f32".into(),
            Op::AddQs8 { .. } | Op::MulQs8 { .. } | Op::GlobalAvgPoolQs8 { .. } | Op::ClampI8 { .. } => "qs8".into(),
            Op::TableI8(_) => "qs8 table".into(),
            Op::Quantize(_) => "f32->qs8".into(),
            Op::Dequantize(_) => "qs8->f32".into(),
            _ => String::new(),
        }
    }
}

pub struct Step {
    pub kind: NodeKind,
    pub op: Op,
    /// (buffer, element count) of each activation input, in the node's order.
    pub inputs: Vec<(usize, usize)>,
    pub output: (usize, usize),
    /// Buffers the step may use as scratch (a fused step's former intermediate values).
    pub scratch: Vec<usize>,
}

/// A compiled payload: what `execute` runs.
pub struct Plan {
    /// The threads [`Plan::run_in_place`] / [`Plan::run_timed`] run on (kept across runs).
    pub(crate) workers: super::exec::Workers,
    pub(crate) bufs: Vec<Buf>,
    pub(crate) steps: Vec<Step>,
    pub(crate) inputs: Vec<Extern>,
    pub(crate) outputs: Vec<Extern>,
}

type NamedData<'a> = &'a dyn Fn(&str) -> Option<&'a [u8]>;

/// Constant bytes of value `id`.
struct Constants<'a, 'f> {
    graph: &'a XnnGraph,
    region: &'a [u8],
    named: &'f dyn Fn(&str) -> Option<&'a [u8]>,
}

impl<'a> Constants<'a, '_> {
    fn entry(&self, index: u32, want: usize, what: &str) -> Result<&'a [u8], String> {
        let c = self.graph.constants.get(index as usize).ok_or_else(|| format!("{what}: constant entry {index} out of range"))?;
        let bytes: &'a [u8] = if let Some(inline) = &c.inline {
            inline.as_slice()
        } else if let Some(key) = &c.named_key {
            (self.named)(key).ok_or_else(|| format!("{what}: named data '{key}' is not in the program"))?
        } else {
            let start = usize::try_from(c.offset).ok();
            let end = start.and_then(|s| s.checked_add(usize::try_from(c.size).ok()?));
            match (start, end) {
                (Some(s), Some(e)) if e <= self.region.len() => &self.region[s..e],
                _ => return Err(format!("{what}: constant {index} (offset {}, size {}) lies outside the payload's {} bytes of constant data", c.offset, c.size, self.region.len())),
            }
        };
        if bytes.len() < want {
            return Err(format!("{what}: constant {index} holds {} bytes, {want} needed", bytes.len()));
        }
        Ok(&bytes[..want])
    }

    fn value_bytes(&self, id: u32, v: &XnnValue) -> Result<&'a [u8], String> {
        let what = format!("value {id}");
        let c = v.constant.ok_or_else(|| format!("{what} must be a constant"))?;
        let bits = v.numel() * v.datatype.bits();
        self.entry(c, bits.div_ceil(8), &what)
    }

    fn f32s(&self, id: u32, v: &XnnValue) -> Result<Vec<f32>, String> {
        if v.datatype != XnnDatatype::Fp32 {
            return Err(format!("value {id}: expected fp32 constant, got {}", v.datatype.name()));
        }
        Ok(self.value_bytes(id, v)?.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    /// The first `len` bytes of a constant (packed int4 rows are padded to whole bytes).
    fn raw(&self, id: u32, v: &XnnValue, len: usize) -> Result<&'a [u8], String> {
        let what = format!("value {id}");
        let c = v.constant.ok_or_else(|| format!("{what} must be a constant"))?;
        self.entry(c, len, &what)
    }

    /// Block scales of a per-channel-group value, as the bf16 values ExecuTorch hands XNNPACK
    /// (f32 scales are rounded to bf16 as ExecuTorch's compiler does).
    fn group_scales(&self, id: u32, v: &XnnValue, want: usize) -> Result<Vec<f32>, String> {
        let Quant::PerChannelGroup { scales, .. } = &v.quant else {
            return Err(format!("value {id}: expected per-channel-group quantization"));
        };
        let widen = |h: u16| f32::from_bits((h as u32) << 16);
        let out: Vec<f32> = match scales {
            Scales::InlineBf16(h) => h.iter().map(|&h| widen(h)).collect(),
            Scales::Buffer { index, count } => {
                let b = self.entry(*index, *count as usize * 2, &format!("value {id} block scales"))?;
                b.chunks_exact(2).map(|c| widen(u16::from_le_bytes([c[0], c[1]]))).collect()
            }
            Scales::Inline(f) => f.iter().map(|&x| widen(((x * 1.003_891_05f32).to_bits() >> 16) as u16)).collect(),
        };
        if out.len() != want {
            return Err(format!("value {id}: {} block scales, {want} expected", out.len()));
        }
        if out.iter().any(|s| !s.is_finite()) {
            return Err(format!("value {id}: block scales must be finite"));
        }
        Ok(out)
    }

    fn i8s(&self, id: u32, v: &XnnValue) -> Result<Vec<i8>, String> {
        Ok(self.value_bytes(id, v)?.iter().map(|&b| b as i8).collect())
    }

    fn i32s(&self, id: u32, v: &XnnValue) -> Result<Vec<i32>, String> {
        Ok(self.value_bytes(id, v)?.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    fn scales(&self, id: u32, v: &XnnValue) -> Result<Vec<f32>, String> {
        let scales = match &v.quant {
            Quant::PerChannel { scales, .. } => scales,
            Quant::PerTensor { scale, .. } => return Ok(vec![*scale]),
            q => return Err(format!("value {id}: quantization {q:?} is not supported here")),
        };
        let out = match scales {
            Scales::Inline(s) => s.clone(),
            Scales::InlineBf16(h) => h.iter().map(|&h| f32::from_bits((h as u32) << 16)).collect(),
            Scales::Buffer { index, count } => {
                let b = self.entry(*index, *count as usize * 4, &format!("value {id} scales"))?;
                b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
            }
        };
        if out.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(format!("value {id}: scales must be finite and positive"));
        }
        Ok(out)
    }
}

fn elem_of(id: u32, v: &XnnValue) -> Result<Elem, String> {
    match v.datatype {
        XnnDatatype::Fp32 => Ok(Elem::F32),
        XnnDatatype::QInt8 => Ok(Elem::I8),
        XnnDatatype::Int32 | XnnDatatype::QInt32 => Ok(Elem::I32),
        d => Err(format!("value {id}: activations of datatype {} are not supported", d.name())),
    }
}

fn qparams(id: u32, v: &XnnValue) -> Result<QParams, String> {
    match v.quant {
        Quant::PerTensor { scale, zero_point } if scale.is_finite() && scale > 0.0 && (-128..=127).contains(&zero_point) => {
            Ok(QParams { scale, zero_point })
        }
        _ => Err(format!("value {id}: expected per-tensor int8 quantization (finite scale > 0, zero point in -128..=127), got {:?}", v.quant)),
    }
}

fn range(mm: Option<(f32, f32)>) -> (f32, f32) {
    mm.unwrap_or((f32::NEG_INFINITY, f32::INFINITY))
}

fn qrange(mm: Option<(f32, f32)>, q: QParams) -> (i8, i8) {
    match mm {
        Some((lo, hi)) => (qs8::quantize_bound(lo, q), qs8::quantize_bound(hi, q)),
        None => (i8::MIN, i8::MAX),
    }
}

fn usize_of(v: u32) -> usize {
    v as usize
}

/// A working copy of a node (Clamp fusion rewrites outputs and ranges).
struct Node {
    kind: NodeKind,
    params: NodeParams,
    range: Option<(f32, f32)>,
    /// Set when this float unary node absorbed the int8→f32 Convert before it and the
    /// f32→int8 Convert after it: (input, output) quantization. It then maps int8 to int8.
    lut: Option<(QParams, QParams)>,
    /// A FullyConnected whose input is dynamically quantized: it reads the f32 value the
    /// qdint8 `Convert` read and quantizes each row itself.
    dynamic: bool,
    /// An f32 convolution that absorbed the activation node after it ([`fuse_post_ops`]).
    post: PostOp,
}

fn set_output(p: &mut NodeParams, out: u32) {
    match p {
        NodeParams::Conv(c) => c.output = out,
        NodeParams::FullyConnected { output, .. } | NodeParams::Binary { output, .. } => *output = out,
        _ => {}
    }
}

fn intersect(a: Option<(f32, f32)>, b: Option<(f32, f32)>) -> Option<(f32, f32)> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some((a0, a1)), Some((b0, b1))) => Some((a0.max(b0), a1.min(b1))),
    }
}

/// Dynamic quantization (`Convert` f32 → qdint8, per-token parameters) feeds fully connected
/// layers only: each such Convert is dropped and its readers take the f32 value with
/// `dynamic` set. The older form, an f32 external input marked `dq_datatype = qint8`, sets
/// `dynamic` on the fully connected layers reading it.
fn fold_dynamic_quantization(graph: &XnnGraph, mut nodes: Vec<Node>) -> Result<Vec<Node>, String> {
    let mut source: Vec<Option<u32>> = vec![None; graph.values.len()];
    let mut dead = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if let (NodeKind::Convert, NodeParams::Unary { input, output, .. }) = (n.kind, &n.params) {
            let (x, y) = (value(graph, *input), value(graph, *output));
            if y.datatype != XnnDatatype::QdInt8 {
                continue;
            }
            if x.datatype != XnnDatatype::Fp32 {
                return Err(format!("node {i} (Convert): dynamic quantization of {} values is not supported (fp32 only)", x.datatype.name()));
            }
            match y.quant {
                Quant::PerTokenDynamic { num_nonbatch_dims: 1 } => {}
                ref q => return Err(format!("node {i} (Convert): qdint8 value {output} has quantization {q:?}; per-token (num_nonbatch_dims 1) only")),
            }
            if x.dims != y.dims || y.flags & 3 != 0 {
                return Err(format!("node {i} (Convert): qdint8 value {output} must be internal with the input's dims {:?}", x.dims));
            }
            source[usize_of(*output)] = Some(*input);
            dead[i] = true;
        }
    }
    for (i, n) in nodes.iter_mut().enumerate() {
        if dead[i] {
            continue;
        }
        let fc_input = match &mut n.params {
            NodeParams::FullyConnected { input, .. } => Some(input),
            _ => None,
        };
        if let Some(input) = fc_input {
            if let Some(src) = source[usize_of(*input)] {
                *input = src;
                n.dynamic = true;
            } else if value(graph, *input).dq_datatype == Some(XnnDatatype::QInt8) {
                n.dynamic = true;
            }
            continue;
        }
        if let Some(v) = n.params.inputs().into_iter().find(|&v| source[usize_of(v)].is_some()) {
            return Err(format!("node {i} ({}) reads the dynamically quantized value {v}; only FullyConnected takes qdint8 inputs", n.kind.name()));
        }
    }
    Ok(nodes.into_iter().zip(dead).filter(|(_, d)| !d).map(|(n, _)| n).collect())
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
    nodes.into_iter().zip(dead).filter(|(_, d)| !d).map(|(n, _)| n).collect()
}

/// Folds `Clamp` nodes into the operator producing their input, when that operator applies an
/// output range itself and nothing else reads the intermediate value.
fn fuse_clamps(graph: &XnnGraph, nodes: Vec<Node>) -> Vec<Node> {
    fold_into_producer(graph, nodes, NodeKind::Clamp, |p, clamp, vi, vo| {
        let fusable = vi.datatype == vo.datatype
            && vi.quant == vo.quant
            && matches!(
                (p.kind, vi.datatype),
                (NodeKind::Conv2d | NodeKind::DepthwiseConv2d | NodeKind::FullyConnected, _)
                    | (NodeKind::Add | NodeKind::Multiply, _)
                    | (NodeKind::Subtract | NodeKind::Div | NodeKind::Minimum | NodeKind::Maximum, XnnDatatype::Fp32)
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
fn fuse_post_ops(graph: &XnnGraph, nodes: Vec<Node>) -> Vec<Node> {
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
fn fuse_int8_unary(graph: &XnnGraph, nodes: Vec<Node>) -> Vec<Node> {
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
    nodes.into_iter().zip(dead).filter(|(_, d)| !d).map(|(n, _)| n).collect()
}

/// The int8 → int8 table of `dequantize → op (clamped to [min, max]) → quantize`.
fn int8_table(op: UnOp, min: f32, max: f32, qi: QParams, qo: QParams) -> Result<Vec<i8>, String> {
    let q: Vec<i8> = (i8::MIN..=i8::MAX).collect();
    let mut x = vec![0.0f32; 256];
    qs8::dequantize_f32(&q, qi, &mut x)?;
    let mut y = vec![0.0f32; 256];
    super::ops::unary_f32(op, &x, &mut y, min, max);
    let mut out = vec![0i8; 256];
    qs8::quantize_f32(&y, qo, &mut out)?;
    Ok(out)
}

/// Buffer assignment by liveness: a value's buffer returns to the free list after its last reader.
struct Alloc {
    bufs: Vec<Buf>,
    free: Vec<usize>,
    slot: Vec<Option<usize>>,
    /// Activation bytes allocated so far, and the most allowed.
    bytes: usize,
    limit: usize,
}

impl Alloc {
    /// Checks that growing the activations by `more` bytes stays within the limit.
    fn charge(&mut self, more: usize) -> Result<(), String> {
        match self.bytes.checked_add(more) {
            Some(total) if total <= self.limit => {
                self.bytes = total;
                Ok(())
            }
            _ => Err(format!("activations need more than the {} MiB this delegate may allocate", self.limit >> 20)),
        }
    }

    fn take(&mut self, elem: Elem, len: usize) -> Result<usize, String> {
        // Best fit among free buffers of the same type, else the largest one grown, else new.
        let mut best: Option<(usize, usize)> = None;
        for (k, &b) in self.free.iter().enumerate() {
            if self.bufs[b].elem() != elem {
                continue;
            }
            let cap = self.bufs[b].len();
            let better = match best {
                None => true,
                Some((_, bc)) => {
                    let (fits, best_fits) = (cap >= len, bc >= len);
                    (fits && (!best_fits || cap < bc)) || (!fits && !best_fits && cap > bc)
                }
            };
            if better {
                best = Some((k, cap));
            }
        }
        let size = match elem {
            Elem::I8 => len,
            _ => len.saturating_mul(4),
        };
        match best {
            Some((k, _)) => {
                let b = self.free.swap_remove(k);
                self.charge(size.saturating_sub(self.bufs[b].bytes()))?;
                self.bufs[b].grow(len)?;
                Ok(b)
            }
            None => {
                self.charge(size)?;
                self.bufs.push(Buf::new(elem, len)?);
                Ok(self.bufs.len() - 1)
            }
        }
    }
}

/// Activation memory a delegate may allocate unless told otherwise (4 GiB).
pub const DEFAULT_ACTIVATION_LIMIT: usize = 4 << 30;

pub fn compile<'g, 'n: 'g>(graph: &'g XnnGraph, region: &'g [u8], named: NamedData<'n>, activation_limit: usize) -> Result<Plan, String> {
    // The lookup again, returning slices of the graph's (shorter) lifetime.
    let lookup = move |key: &str| -> Option<&'g [u8]> { named(key) };
    let consts = Constants { graph, region, named: &lookup };
    let nodes: Vec<Node> = graph.nodes.iter().map(|n| Node { kind: n.kind, params: n.params.clone(), range: n.output_min_max, lut: None, dynamic: false, post: PostOp::None }).collect();
    let nodes = fold_dynamic_quantization(graph, nodes)?;
    let nodes = fuse_clamps(graph, nodes);
    let nodes = fuse_int8_unary(graph, nodes);
    let nodes = fuse_post_ops(graph, nodes);

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
    let groups = fusion_groups(graph, &nodes);
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
    let mut alloc = Alloc { bufs: Vec::new(), free: Vec::new(), slot: vec![None; n_values], bytes: 0, limit: activation_limit };
    let mut pinned = vec![false; n_values];
    for &id in &graph.output_ids {
        pinned[usize_of(id)] = true;
    }

    let mut inputs = Vec::new();
    for &id in &graph.input_ids {
        let v = &graph.values[usize_of(id)];
        if v.constant.is_some() {
            return Err(format!("input value {id} is a constant"));
        }
        let elem = elem_of(id, v)?;
        let buf = alloc.take(elem, v.numel())?;
        alloc.slot[usize_of(id)] = Some(buf);
        inputs.push(Extern { buf, dims: v.dims.clone(), elem });
    }

    let mut steps = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let name = node.kind.name();
        let ctx = |e: String| format!("node {i} ({name}): {e}");
        // Constant inputs that the op reads as activations (not packed weights) get a buffer.
        let packed = packed_inputs(node);
        let mut in_bufs = Vec::new();
        for v in node.params.inputs() {
            if packed.contains(&v) {
                continue;
            }
            let value = &graph.values[usize_of(v)];
            let buf = match alloc.slot[usize_of(v)] {
                Some(b) => b,
                None if value.constant.is_some() => {
                    let b = materialize(&consts, v, value, &mut alloc).map_err(ctx)?;
                    pinned[usize_of(v)] = true;
                    b
                }
                None => return Err(ctx(format!("reads value {v} before any node writes it"))),
            };
            in_bufs.push((buf, value.numel()));
        }
        let outs = node.params.outputs();
        if outs.len() != 1 {
            return Err(ctx(String::from("nodes with several outputs are not supported")));
        }
        let out_id = outs[0];
        let out_v = &graph.values[usize_of(out_id)];
        if out_v.constant.is_some() || alloc.slot[usize_of(out_id)].is_some() {
            return Err(ctx(format!("output value {out_id} is a constant or written twice")));
        }
        let op = build_op(graph, &consts, node).map_err(ctx)?;
        let out_elem = elem_of(out_id, out_v).map_err(ctx)?;
        let out_buf = alloc.take(out_elem, out_v.numel()).map_err(ctx)?;
        alloc.slot[usize_of(out_id)] = Some(out_buf);
        // Values whose last reader this is go back to the free list (after the output took its
        // buffer).
        for &v in &dying[i] {
            let vi = usize_of(v);
            if last_read[vi] == Some(i) && !pinned[vi] {
                if let Some(b) = alloc.slot[vi] {
                    if !alloc.free.contains(&b) {
                        alloc.free.push(b);
                    }
                }
            }
        }
        if last_read[usize_of(out_id)].is_none() && !pinned[usize_of(out_id)] {
            alloc.free.push(out_buf);
        }
        steps.push(Step { kind: node.kind, op, inputs: in_bufs, output: (out_buf, out_v.numel()), scratch: Vec::new() });
    }

    let mut outputs = Vec::new();
    for &id in &graph.output_ids {
        let v = &graph.values[usize_of(id)];
        let buf = alloc.slot[usize_of(id)].ok_or_else(|| format!("output value {id} is never written"))?;
        outputs.push(Extern { buf, dims: v.dims.clone(), elem: elem_of(id, v)? });
    }
    let steps = fuse_expand_depthwise(steps, &groups);
    Ok(Plan { workers: Default::default(), bufs: alloc.bufs, steps, inputs, outputs })
}

/// Which nodes run as one [`Op::ExpandDwF32`] step: at each node index, 0 or the length of
/// the group starting there: an f32 convolution (batch 1; pointwise in inverted-residual
/// blocks, any shape for a network's first layer) whose output only a multiplier-1 depthwise
/// convolution reads (2), and the pointwise convolution that alone reads the depthwise output
/// (3). The expanded tensor (MobileNetV2's 112×112×96 is 4.8 MB) is then produced and consumed
/// a band of rows at a time instead of going through memory. Same kernels, same arithmetic per
/// element: same bits. The one place this is decided: the buffer allocation and
/// [`fuse_expand_depthwise`] both follow it.
fn fusion_groups(graph: &XnnGraph, nodes: &[Node]) -> Vec<usize> {
    let mut groups = vec![0; nodes.len()];
    // `RBUILD_XNNPACK_NO_FUSE` set: run the steps apart (A/B timing).
    #[cfg(feature = "std")]
    if std::env::var_os("RBUILD_XNNPACK_NO_FUSE").is_some() {
        return groups;
    }
    let mut readers = vec![0usize; graph.values.len()];
    for n in nodes {
        for v in n.params.inputs() {
            readers[usize_of(v)] += 1;
        }
    }
    let f32_value = |v: u32| graph.values.get(usize_of(v)).is_some_and(|x| x.datatype == XnnDatatype::Fp32);
    // Read by one node only and not a delegate output.
    let private = |v: u32| readers[usize_of(v)] == 1 && graph.values.get(usize_of(v)).is_some_and(|x| x.flags & 2 == 0);
    let conv = |n: &Node, kind: NodeKind| match (&n.params, n.kind) {
        (NodeParams::Conv(c), k) if k == kind && f32_value(c.input) && f32_value(c.output) => Some(*c),
        _ => None,
    };
    let pointwise = |c: &ConvParams| {
        (c.kernel_height, c.kernel_width, c.subsampling_height, c.subsampling_width) == (1, 1, 1, 1)
            && (c.padding_top, c.padding_right, c.padding_bottom, c.padding_left) == (0, 0, 0, 0)
    };
    let batch1 = |v: u32| graph.values.get(usize_of(v)).is_some_and(|x| x.dims.first() == Some(&1));
    let mut i = 0;
    while i + 1 < nodes.len() {
        let (Some(e), Some(d)) = (conv(&nodes[i], NodeKind::Conv2d), conv(&nodes[i + 1], NodeKind::DepthwiseConv2d)) else {
            i += 1;
            continue;
        };
        if !(batch1(e.input) && d.input == e.output && private(e.output) && d.group_output_channels == 1 && d.output != e.input) {
            i += 1;
            continue;
        }
        let project = nodes.get(i + 2).and_then(|n| conv(n, NodeKind::Conv2d));
        let len = match project {
            Some(p) if pointwise(&p) && p.input == d.output && private(d.output) && p.output != e.input => 3,
            _ => 2,
        };
        groups[i] = len;
        i += len;
    }
    groups
}

/// Runs each group [`fusion_groups`] found as one [`Op::ExpandDwF32`] step (steps are the
/// nodes, one for one), its former intermediate buffers serving as the step's scratch. A group
/// whose operators were not built as the f32 NHWC kernels stays apart.
fn fuse_expand_depthwise(steps: Vec<Step>, groups: &[usize]) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len());
    let mut it = steps.into_iter().enumerate().peekable();
    while let Some((i, a)) = it.next() {
        let n = groups.get(i).copied().unwrap_or(0);
        let fusable = |s: Option<&(usize, Step)>, dw: bool| match s.map(|(_, s)| &s.op) {
            Some(Op::DepthwiseF32 { .. }) => dw,
            Some(Op::ConvF32 { op, .. }) => !dw && op.is_pointwise(),
            _ => false,
        };
        if n < 2 || !matches!(a.op, Op::ConvF32 { .. }) || !fusable(it.peek(), true) {
            out.push(a);
            continue;
        }
        let Some((_, b)) = it.next() else { break };
        let c = if n == 3 && fusable(it.peek(), false) { it.next().map(|(_, c)| c) } else { None };
        let (expand, e_min, e_max, dw, min, max) = match (a.op, b.op) {
            (Op::ConvF32 { op: expand, min: e_min, max: e_max }, Op::DepthwiseF32 { op: dw, min, max }) => (expand, e_min, e_max, dw, min, max),
            // Not reached (both kinds were checked above); kept apart if it were.
            (a_op, b_op) => {
                out.push(Step { op: a_op, ..a });
                out.push(Step { op: b_op, ..b });
                out.extend(c);
                continue;
            }
        };
        let mut scratch = vec![a.output.0];
        let (project, output, kind) = match c {
            Some(Step { op: Op::ConvF32 { op, min, max }, output, kind, .. }) => {
                scratch.push(b.output.0);
                (Some((op, min, max)), output, kind)
            }
            _ => (None, b.output, b.kind),
        };
        out.push(Step { kind, op: Op::ExpandDwF32 { expand, e_min, e_max, dw, min, max, project }, inputs: a.inputs, output, scratch });
    }
    out
}

/// Values an op packs at compile time (weights, biases) instead of reading from a buffer.
fn packed_inputs(node: &Node) -> Vec<u32> {
    match &node.params {
        NodeParams::Conv(c) => [Some(c.filter), c.bias].into_iter().flatten().collect(),
        NodeParams::FullyConnected { filter, bias, .. } => [Some(*filter), *bias].into_iter().flatten().collect(),
        _ => Vec::new(),
    }
}

fn materialize(consts: &Constants<'_, '_>, id: u32, v: &XnnValue, alloc: &mut Alloc) -> Result<usize, String> {
    let elem = elem_of(id, v)?;
    alloc.charge(v.numel().saturating_mul(4))?;
    let buf = match elem {
        Elem::F32 => Buf::F32(Aligned::from_slice(&consts.f32s(id, v)?)?),
        Elem::I8 => Buf::I8(Aligned::from_slice(&consts.i8s(id, v)?)?),
        Elem::I32 => Buf::I32(Aligned::from_slice(&consts.i32s(id, v)?)?),
    };
    alloc.bufs.push(buf);
    let b = alloc.bufs.len() - 1;
    alloc.slot[usize_of(id)] = Some(b);
    Ok(b)
}

fn value(graph: &XnnGraph, id: u32) -> &XnnValue {
    &graph.values[usize_of(id)]
}

fn dims4(id: u32, v: &XnnValue) -> Result<[usize; 4], String> {
    match v.dims[..] {
        [n, h, w, c] => Ok([n, h, w, c]),
        _ => Err(format!("value {id}: expected an NHWC tensor of rank 4, got dims {:?}", v.dims)),
    }
}

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

fn build_op(graph: &XnnGraph, consts: &Constants<'_, '_>, node: &Node) -> Result<Op, String> {
    use NodeKind as K;
    let (min, max) = range(node.range);
    if let (Some((qi, qo)), Some(op)) = (node.lut, table_op(node.kind)) {
        return Ok(Op::TableI8(int8_table(op, min, max, qi, qo)?));
    }
    match (&node.params, node.kind) {
        (NodeParams::Conv(p), K::Conv2d | K::DepthwiseConv2d) => {
            let depthwise = node.kind == K::DepthwiseConv2d;
            let g = conv_geom(graph, p, depthwise)?;
            let (x, w, y) = (value(graph, p.input), value(graph, p.filter), value(graph, p.output));
            let want_filter = if depthwise {
                vec![1, g.kernel_h, g.kernel_w, g.out_channels()]
            } else {
                vec![g.out_channels(), g.kernel_h, g.kernel_w, g.group_in]
            };
            if w.dims != want_filter {
                return Err(format!("filter dims {:?}, expected {want_filter:?}", w.dims));
            }
            match (x.datatype, w.datatype, y.datatype) {
                (XnnDatatype::Fp32, XnnDatatype::Fp32, XnnDatatype::Fp32) => {
                    let filter = consts.f32s(p.filter, w)?;
                    let bias = p.bias.map(|b| consts.f32s(b, value(graph, b))).transpose()?;
                    check_len("bias", bias.as_deref(), g.out_channels())?;
                    if depthwise {
                        Ok(Op::DepthwiseF32 { op: DepthwiseF32::new(&g, &filter, bias.as_deref())?.with_post(node.post), min, max })
                    } else {
                        Ok(Op::ConvF32 { op: ConvF32::new(&g, &filter, bias.as_deref())?.with_post(node.post), min, max })
                    }
                }
                (XnnDatatype::QInt8, XnnDatatype::QcInt8 | XnnDatatype::QInt8, XnnDatatype::QInt8) => {
                    let (xq, yq) = (qparams(p.input, x)?, qparams(p.output, y)?);
                    let filter = consts.i8s(p.filter, w)?;
                    let scales = weight_scales(consts, p.filter, w, g.out_channels(), if depthwise { 3 } else { 0 })?;
                    let bias = p.bias.map(|b| int32_bias(consts, b, value(graph, b))).transpose()?;
                    check_len("bias", bias.as_deref(), g.out_channels())?;
                    let (lo, hi) = qrange(node.range, yq);
                    if depthwise {
                        Ok(Op::DepthwiseQs8(DepthwiseQs8::new(&g, xq, &filter, &scales, bias.as_deref(), yq, lo, hi)?))
                    } else {
                        Ok(Op::ConvQs8(ConvQs8::new(&g, xq, &filter, &scales, bias.as_deref(), yq, lo, hi)?))
                    }
                }
                (a, b, c) => Err(format!("input/filter/output datatypes {}/{}/{} are not supported", a.name(), b.name(), c.name())),
            }
        }
        (NodeParams::Conv(p), K::ConvTranspose2d) => deconv(graph, consts, p, min, max),
        (NodeParams::FullyConnected { input, filter, bias, output, flags }, K::FullyConnected) => {
            let (x, w, y) = (value(graph, *input), value(graph, *filter), value(graph, *output));
            let [a, b] = match w.dims[..] {
                [a, b] => [a, b],
                _ => return Err(format!("filter dims {:?}: expected rank 2", w.dims)),
            };
            // XNN_FLAG_TRANSPOSE_WEIGHTS: the filter is [k, n].
            let transposed = flags & 1 != 0;
            let (n, k) = if transposed { (b, a) } else { (a, b) };
            let xk = *x.dims.last().unwrap_or(&0);
            if xk != k || k == 0 || x.numel() % k != 0 {
                return Err(format!("input dims {:?} do not end in the filter's {k} input channels", x.dims));
            }
            let m = x.numel() / k;
            if y.numel() != m * n || y.dims.last() != Some(&n) {
                return Err(format!("output dims {:?}, expected {m} rows of {n}", y.dims));
            }
            if node.dynamic {
                return dynamic_fully_connected(graph, consts, (*filter, w), *bias, (x, y), (n, k, m), transposed, (min, max));
            }
            match (x.datatype, w.datatype, y.datatype) {
                (XnnDatatype::Fp32, XnnDatatype::Fp32, XnnDatatype::Fp32) => {
                    let mut f = consts.f32s(*filter, w)?;
                    if transposed {
                        f = transpose2(&f, k, n);
                    }
                    let bias = bias.map(|b| consts.f32s(b, value(graph, b))).transpose()?;
                    check_len("bias", bias.as_deref(), n)?;
                    Ok(Op::FullyConnectedF32 { op: FullyConnectedF32::new(n, k, &f, bias.as_deref())?, m, min, max })
                }
                (XnnDatatype::QInt8, XnnDatatype::QcInt8 | XnnDatatype::QInt8, XnnDatatype::QInt8) => {
                    let (xq, yq) = (qparams(*input, x)?, qparams(*output, y)?);
                    let mut f = consts.i8s(*filter, w)?;
                    if transposed {
                        f = transpose2(&f, k, n);
                    }
                    let scales = weight_scales(consts, *filter, w, n, if transposed { 1 } else { 0 })?;
                    let bias = bias.map(|b| int32_bias(consts, b, value(graph, b))).transpose()?;
                    check_len("bias", bias.as_deref(), n)?;
                    let (lo, hi) = qrange(node.range, yq);
                    Ok(Op::FullyConnectedQs8 { op: FullyConnectedQs8::new(n, k, xq, &f, &scales, bias.as_deref(), yq, lo, hi)?, m })
                }
                (a, b, c) => Err(format!("input/filter/output datatypes {}/{}/{} are not supported", a.name(), b.name(), c.name())),
            }
        }
        (NodeParams::Binary { input1, input2, output, .. }, kind) => binary(graph, node, kind, *input1, *input2, *output, min, max),
        (NodeParams::Unary { input, output, .. }, kind) => unary(graph, node, kind, *input, *output, min, max),
        (NodeParams::UnaryParam { param, input, output }, kind) => {
            let (x, y) = (value(graph, *input), value(graph, *output));
            same_f32(*input, x, *output, y)?;
            let op = if kind == K::Elu { UnOp::Elu(*param) } else { UnOp::LeakyRelu(*param) };
            Ok(Op::UnaryF32 { op, min, max })
        }
        (NodeParams::Pool(p), K::AvgPooling2d | K::MaxPooling2d) => pool(graph, p, node.kind == K::MaxPooling2d, min, max),
        (NodeParams::Transpose { perm, input, output }, _) => {
            let (x, y) = (value(graph, *input), value(graph, *output));
            let mut seen = vec![false; x.dims.len()];
            if perm.len() != x.dims.len() || perm.iter().any(|&p| p >= seen.len() || core::mem::replace(&mut seen[p], true)) {
                return Err(format!("perm {perm:?} is not a permutation of {} dims", x.dims.len()));
            }
            let want: Vec<usize> = perm.iter().map(|&p| x.dims[p]).collect();
            same_type(*input, x, *output, y)?;
            if y.dims != want {
                return Err(format!("output dims {:?}, expected {want:?}", y.dims));
            }
            Ok(Op::Transpose { dims: x.dims.clone(), perm: perm.clone() })
        }
        (NodeParams::Reshape { input, output, .. }, _) => {
            let (x, y) = (value(graph, *input), value(graph, *output));
            same_type(*input, x, *output, y)?;
            if x.numel() != y.numel() {
                return Err(format!("reshape of {:?} to {:?} changes the element count", x.dims, y.dims));
            }
            Ok(Op::Copy)
        }
        (NodeParams::Slice { offsets, sizes, input, output }, _) => {
            let (x, y) = (value(graph, *input), value(graph, *output));
            same_type(*input, x, *output, y)?;
            let r = x.dims.len();
            let sizes: Vec<usize> = sizes.iter().zip(offsets).zip(&x.dims).map(|((&s, &o), &d)| if s == 0 { d.saturating_sub(o) } else { s }).collect();
            if offsets.len() != r || sizes.len() != r || (0..r).any(|i| offsets[i].checked_add(sizes[i]).is_none_or(|e| e > x.dims[i])) || y.dims != sizes {
                return Err(format!("slice offsets {offsets:?} sizes {sizes:?} of {:?} to {:?} are out of range", x.dims, y.dims));
            }
            Ok(Op::Slice { dims: x.dims.clone(), offsets: offsets.clone(), sizes })
        }
        (NodeParams::ConstantPad { pre, post, value: pad, input, output }, _) => {
            let (x, y) = (value(graph, *input), value(graph, *output));
            same_type(*input, x, *output, y)?;
            let r = x.dims.len();
            if pre.len() != r || post.len() != r || (0..r).any(|i| Some(y.dims[i]) != x.dims[i].checked_add(pre[i]).and_then(|s| s.checked_add(post[i]))) {
                return Err(format!("padding {pre:?}/{post:?} of {:?} does not give {:?}", x.dims, y.dims));
            }
            let value_i8 = match x.datatype {
                XnnDatatype::QInt8 => qs8::quantize_bound(*pad, qparams(*input, x)?),
                _ => 0,
            };
            Ok(Op::Pad { dims: x.dims.clone(), pre: pre.clone(), post: post.clone(), value_f32: *pad, value_i8 })
        }
        (NodeParams::Concat { axis, inputs, output }, _) => {
            let y = value(graph, *output);
            let axis = *axis as usize;
            if axis >= y.dims.len() {
                return Err(format!("axis {axis} out of range for rank {}", y.dims.len()));
            }
            let outer: usize = y.dims[..axis].iter().product();
            let inner: usize = y.dims[axis + 1..].iter().product();
            let mut total = 0;
            let mut inner_sizes = Vec::new();
            for &i in inputs {
                let x = value(graph, i);
                same_type(i, x, *output, y)?;
                if x.dims.len() != y.dims.len() || (0..y.dims.len()).any(|d| d != axis && x.dims[d] != y.dims[d]) {
                    return Err(format!("input {:?} does not fit output {:?} along axis {axis}", x.dims, y.dims));
                }
                total += x.dims[axis];
                inner_sizes.push(x.dims[axis] * inner);
            }
            if total != y.dims[axis] {
                return Err(format!("inputs add up to {total} along axis {axis}, the output has {}", y.dims[axis]));
            }
            Ok(Op::Concat { outer, inner_sizes })
        }
        (_, kind) => Err(format!("node type {} is not supported by rbuild's XNNPACK runtime", kind.name())),
    }
}

fn check_len<T>(what: &str, v: Option<&[T]>, n: usize) -> Result<(), String> {
    match v {
        Some(v) if v.len() != n => Err(format!("{what} has {} elements, expected {n}", v.len())),
        _ => Ok(()),
    }
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

/// Per-output-channel weight scales (`n` of them); a per-tensor scale is repeated.
fn weight_scales(consts: &Constants<'_, '_>, id: u32, w: &XnnValue, n: usize, channel_dim: i32) -> Result<Vec<f32>, String> {
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

/// A fully connected layer on dynamically quantized input: qc8w / qc4w (per output channel) or
/// qb4w (per block of input channels, bf16 scales) weights, f32 bias and output.
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
    if x.datatype != XnnDatatype::Fp32 || y.datatype != XnnDatatype::Fp32 {
        return Err(format!("dynamically quantized input: input/output datatypes {}/{} (fp32 expected)", x.datatype.name(), y.datatype.name()));
    }
    let bias = bias.map(|b| consts.f32s(b, value(graph, b))).transpose()?;
    check_len("bias", bias.as_deref(), n)?;
    let [rows, cols] = [w.dims[0], w.dims[1]];
    let (values, scales) = match w.datatype {
        XnnDatatype::QcInt8 | XnnDatatype::QInt8 => {
            let f = consts.i8s(id, w)?;
            let scales = weight_scales(consts, id, w, n, if transposed { 1 } else { 0 })?;
            (f, WeightScales::PerChannel(scales))
        }
        XnnDatatype::QcInt4 => {
            let bytes = consts.raw(id, w, rows * cols.div_ceil(2))?;
            let f = qd8::unpack_int4(bytes, rows, cols).map_err(|e| format!("filter value {id}: {e}"))?;
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
            let bytes = consts.raw(id, w, rows * cols.div_ceil(2))?;
            let f = qd8::unpack_int4(bytes, rows, cols).map_err(|e| format!("filter value {id}: {e}"))?;
            (f, WeightScales::Blockwise { block, scales: consts.group_scales(id, w, n * (k / block))? })
        }
        d => return Err(format!("dynamically quantized input with {} weights is not supported (qcint8, qcint4, qbint4)", d.name())),
    };
    let at = |r: usize, c: usize| if transposed { values[c * n + r] } else { values[r * k + c] };
    Ok(Op::FullyConnectedQd8 { op: FullyConnectedQd8::new(n, k, at, scales, bias.as_deref())?, m, min, max })
}

fn int32_bias(consts: &Constants<'_, '_>, id: u32, v: &XnnValue) -> Result<Vec<i32>, String> {
    match v.datatype {
        XnnDatatype::QcInt32 | XnnDatatype::QInt32 | XnnDatatype::Int32 => consts.i32s(id, v),
        d => Err(format!("bias value {id}: datatype {} (int8 convolutions take int32 biases)", d.name())),
    }
}

fn same_type(a: u32, x: &XnnValue, b: u32, y: &XnnValue) -> Result<(), String> {
    if x.datatype != y.datatype || (x.datatype == XnnDatatype::QInt8 && x.quant != y.quant) {
        return Err(format!("value {a} ({}) and value {b} ({}) must have the same type and quantization", x.datatype.name(), y.datatype.name()));
    }
    elem_of(a, x).map(|_| ())
}

fn same_f32(a: u32, x: &XnnValue, b: u32, y: &XnnValue) -> Result<(), String> {
    if x.datatype != XnnDatatype::Fp32 || y.datatype != XnnDatatype::Fp32 {
        return Err(format!("values {a}/{b}: datatypes {}/{} (this node runs on fp32 only)", x.datatype.name(), y.datatype.name()));
    }
    if x.dims != y.dims {
        return Err(format!("input dims {:?} differ from output dims {:?}", x.dims, y.dims));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn binary(graph: &XnnGraph, node: &Node, kind: NodeKind, a: u32, b: u32, out: u32, min: f32, max: f32) -> Result<Op, String> {
    use NodeKind as K;
    let (va, vb, vy) = (value(graph, a), value(graph, b), value(graph, out));
    let bc = Broadcast::new(&va.dims, &vb.dims, &vy.dims)?;
    match (va.datatype, vb.datatype, vy.datatype) {
        (XnnDatatype::Fp32, XnnDatatype::Fp32, XnnDatatype::Fp32) => {
            let op = match kind {
                K::Add => BinOp::Add,
                K::Subtract => BinOp::Sub,
                K::Multiply => BinOp::Mul,
                K::Div => BinOp::Div,
                K::Minimum => BinOp::Min,
                K::Maximum => BinOp::Max,
                K::PReLU => BinOp::Prelu,
                K::BatchMatrixMultiply => return bmm(va, vb, vy),
                k => return Err(format!("node type {} is not supported", k.name())),
            };
            Ok(Op::BinaryF32 { op, bc, min, max })
        }
        (XnnDatatype::QInt8, XnnDatatype::QInt8, XnnDatatype::QInt8) => {
            let (qa, qb, qy) = (qparams(a, va)?, qparams(b, vb)?, qparams(out, vy)?);
            let (lo, hi) = qrange(node.range, qy);
            match kind {
                K::Add => Ok(Op::AddQs8 { op: AddQs8::new(qa, qb, qy, lo, hi)?, bc }),
                K::Multiply => Ok(Op::MulQs8 { op: MulQs8::new(qa, qb, qy, lo, hi)?, bc }),
                k => Err(format!("node type {} on qint8 values is not supported", k.name())),
            }
        }
        (x, y, z) => Err(format!("datatypes {}/{}/{} are not supported", x.name(), y.name(), z.name())),
    }
}

fn bmm(a: &XnnValue, b: &XnnValue, y: &XnnValue) -> Result<Op, String> {
    let (ra, rb) = (a.dims.len(), b.dims.len());
    if ra < 2 || rb < 2 || y.dims.len() != ra.max(rb) {
        return Err(format!("batch matrix multiply of {:?} by {:?} into {:?}", a.dims, b.dims, y.dims));
    }
    let (m, k, k2, n) = (a.dims[ra - 2], a.dims[ra - 1], b.dims[rb - 2], b.dims[rb - 1]);
    let (batch_a, batch_b): (usize, usize) = (a.dims[..ra - 2].iter().product(), b.dims[..rb - 2].iter().product());
    let batch = batch_a.max(batch_b);
    if k != k2 || (batch_a != batch_b && batch_a != 1 && batch_b != 1) || y.numel() != batch * m * n {
        return Err(format!("batch matrix multiply of {:?} by {:?} into {:?}: sizes do not match", a.dims, b.dims, y.dims));
    }
    Ok(Op::BatchMatMulF32 { batch_a, batch_b, m, k, n })
}

#[allow(clippy::too_many_arguments)]
fn unary(graph: &XnnGraph, node: &Node, kind: NodeKind, input: u32, output: u32, min: f32, max: f32) -> Result<Op, String> {
    use NodeKind as K;
    let (x, y) = (value(graph, input), value(graph, output));
    match kind {
        K::Convert => {
            if x.dims != y.dims {
                return Err(format!("input dims {:?} differ from output dims {:?}", x.dims, y.dims));
            }
            match (x.datatype, y.datatype) {
                (XnnDatatype::Fp32, XnnDatatype::QInt8) => Ok(Op::Quantize(qparams(output, y)?)),
                (XnnDatatype::QInt8, XnnDatatype::Fp32) => Ok(Op::Dequantize(qparams(input, x)?)),
                (a, b) => Err(format!("conversion from {} to {} is not supported", a.name(), b.name())),
            }
        }
        K::GlobalAvgPooling2d => {
            let [n, h, w, c] = dims4(input, x)?;
            if y.numel() != n * c {
                return Err(format!("output dims {:?}, expected {n} × {c} elements", y.dims));
            }
            match (x.datatype, y.datatype) {
                (XnnDatatype::Fp32, XnnDatatype::Fp32) => Ok(Op::GlobalAvgPoolF32 { batch: n, pixels: h * w, channels: c, min, max }),
                (XnnDatatype::QInt8, XnnDatatype::QInt8) => {
                    let (xq, yq) = (qparams(input, x)?, qparams(output, y)?);
                    let (lo, hi) = qrange(node.range, yq);
                    Ok(Op::GlobalAvgPoolQs8 { batch: n, pixels: h * w, channels: c, input: xq, output: yq, lo, hi })
                }
                (a, b) => Err(format!("datatypes {}/{} are not supported", a.name(), b.name())),
            }
        }
        K::Copy => {
            same_type(input, x, output, y)?;
            if x.numel() != y.numel() {
                return Err(format!("copy of {:?} into {:?}", x.dims, y.dims));
            }
            Ok(Op::Copy)
        }
        K::Clamp if x.datatype == XnnDatatype::QInt8 => {
            same_type(input, x, output, y)?;
            if x.dims != y.dims {
                return Err(format!("input dims {:?} differ from output dims {:?}", x.dims, y.dims));
            }
            let (lo, hi) = qrange(node.range, qparams(output, y)?);
            Ok(Op::ClampI8 { lo, hi })
        }
        K::Softmax => {
            same_f32(input, x, output, y)?;
            let cols = *x.dims.last().unwrap_or(&1);
            Ok(Op::SoftmaxF32 { rows: if cols == 0 { 0 } else { x.numel() / cols }, cols })
        }
        _ => {
            same_f32(input, x, output, y)?;
            let op = match kind {
                K::Clamp => UnOp::Identity,
                K::Hardswish => UnOp::Hardswish,
                K::Sigmoid => UnOp::Sigmoid,
                K::Tanh => UnOp::Tanh,
                K::Gelu => UnOp::Gelu,
                K::Abs => UnOp::Abs,
                K::Negate => UnOp::Neg,
                K::Square => UnOp::Square,
                K::SquareRoot => UnOp::Sqrt,
                K::ReciprocalSquareRoot => UnOp::Rsqrt,
                K::Floor => UnOp::Floor,
                K::Ceiling => UnOp::Ceil,
                K::Log => UnOp::Log,
                K::Exp => UnOp::Exp,
                K::Sin => UnOp::Sin,
                K::Cos => UnOp::Cos,
                k => return Err(format!("node type {} is not supported by rbuild's XNNPACK runtime", k.name())),
            };
            Ok(Op::UnaryF32 { op, min, max })
        }
    }
}

fn pool(graph: &XnnGraph, p: &PoolParams, max_pool: bool, min: f32, max: f32) -> Result<Op, String> {
    let (x, y) = (value(graph, p.input), value(graph, p.output));
    if x.datatype != XnnDatatype::Fp32 || y.datatype != XnnDatatype::Fp32 {
        return Err(format!("pooling on {} values is not supported (fp32 only)", x.datatype.name()));
    }
    let [n, h, w, c] = dims4(p.input, x)?;
    let [on, oh, ow, oc] = dims4(p.output, y)?;
    let u = |v: u32| v as usize;
    let geom = Conv2dGeom {
        batch: n,
        in_h: h,
        in_w: w,
        out_h: oh,
        out_w: ow,
        kernel_h: u(p.pooling_height),
        kernel_w: u(p.pooling_width),
        stride_h: u(p.stride_height).max(1),
        stride_w: u(p.stride_width).max(1),
        dilation_h: u(p.dilation_height).max(1),
        dilation_w: u(p.dilation_width).max(1),
        pad_top: u(p.padding_top),
        pad_left: u(p.padding_left),
        groups: c,
        group_in: 1,
        group_out: 1,
    };
    if on != n || oc != c || geom.kernel_h == 0 || geom.kernel_w == 0 {
        return Err(format!("pooling {:?} → {:?} with a {}x{} window", x.dims, y.dims, geom.kernel_h, geom.kernel_w));
    }
    Ok(Op::PoolF32 { max_pool, geom, min, max })
}

fn deconv(graph: &XnnGraph, consts: &Constants<'_, '_>, p: &ConvParams, min: f32, max: f32) -> Result<Op, String> {
    let (x, w, y) = (value(graph, p.input), value(graph, p.filter), value(graph, p.output));
    if [x.datatype, w.datatype, y.datatype] != [XnnDatatype::Fp32; 3] {
        return Err(format!("transposed convolution on {} values is not supported (fp32 only)", x.datatype.name()));
    }
    let [n, h, wd, c] = dims4(p.input, x)?;
    let [on, oh, ow, oc] = dims4(p.output, y)?;
    let u = |v: u32| v as usize;
    let geom = params_geom(p, [n, h, wd], [oh, ow])?;
    let full = |size: usize, k: usize, s: usize, d: usize, adj: u32| (size.saturating_sub(1)) * s + d * (k - 1) + 1 + adj as usize;
    let fh = full(h, geom.kernel_h, geom.stride_h, geom.dilation_h, p.adjustment_height);
    let fw = full(wd, geom.kernel_w, geom.stride_w, geom.dilation_w, p.adjustment_width);
    let pads_h = u(p.padding_top) + u(p.padding_bottom);
    let pads_w = u(p.padding_left) + u(p.padding_right);
    if on != n || c != geom.groups * geom.group_in || oc != geom.groups * geom.group_out || fh < pads_h || fw < pads_w || fh - pads_h != oh || fw - pads_w != ow {
        return Err(format!("transposed convolution {:?} → {:?} does not match its parameters", x.dims, y.dims));
    }
    let want = vec![oc, geom.kernel_h, geom.kernel_w, geom.group_in];
    if w.dims != want {
        return Err(format!("filter dims {:?}, expected {want:?}", w.dims));
    }
    let filter = consts.f32s(p.filter, w)?;
    let bias = p.bias.map(|b| consts.f32s(b, value(graph, b))).transpose()?;
    check_len("bias", bias.as_deref(), oc)?;
    Ok(Op::DeconvF32 { geom, filter, bias, min, max })
}
