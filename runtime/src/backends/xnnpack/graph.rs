//! The `XNNGraph` flatbuffer (ExecuTorch `backends/xnnpack/serialization/schema.fbs`), decoded
//! into owned types with every cross-reference checked.
//!
//! Checked here: the identifier, every table/vector bound (through the `.pte` reader's
//! bounds-checked flatbuffer code), value ids (`id_out`) forming `0..n` exactly once, every id a
//! node or the graph's input/output lists names, constant and scale buffer indices, dims whose
//! element count fits in memory. Node kinds this decoder does not know are errors naming the
//! union tag; what each kind means (shapes, dtypes) is the executor's to check.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use crate::format::flatbuf::{string, vector, DecodeResult, Reader, State, Table};

use super::INVALID_VALUE_ID;

/// Element types of XNNPACK values (`XNNDatatype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XnnDatatype {
    Fp32,
    Fp16,
    /// Per-tensor quantized int8 (activations).
    QInt8,
    QUInt8,
    QInt32,
    /// Per-channel quantized int8 (weights, zero point 0).
    QcInt8,
    /// Per-channel quantized int32 (biases).
    QcInt32,
    QcInt4,
    /// Dynamically quantized int8 (per-token parameters computed at run time).
    QdInt8,
    /// Blockwise (per-channel-group) quantized int4.
    QbInt4,
    QpInt8,
    Int32,
    Pfp32,
    Bf16,
}

impl XnnDatatype {
    fn from_code(c: i16) -> Option<XnnDatatype> {
        use XnnDatatype::*;
        Some(match c {
            1 => Fp32,
            2 => Fp16,
            3 => QInt8,
            4 => QUInt8,
            5 => QInt32,
            6 => QcInt8,
            7 => QcInt32,
            8 => QcInt4,
            9 => QdInt8,
            10 => QbInt4,
            11 => QpInt8,
            12 => Int32,
            13 => Pfp32,
            14 => Bf16,
            _ => return None,
        })
    }

    /// XNNPACK's name (`xnn_datatype_…` without the prefix).
    pub fn name(self) -> &'static str {
        use XnnDatatype::*;
        match self {
            Fp32 => "fp32",
            Fp16 => "fp16",
            QInt8 => "qint8",
            QUInt8 => "quint8",
            QInt32 => "qint32",
            QcInt8 => "qcint8",
            QcInt32 => "qcint32",
            QcInt4 => "qcint4",
            QdInt8 => "qdint8",
            QbInt4 => "qbint4",
            QpInt8 => "qpint8",
            Int32 => "int32",
            Pfp32 => "pfp32",
            Bf16 => "bf16",
        }
    }

    /// Bits per stored element.
    pub fn bits(self) -> usize {
        use XnnDatatype::*;
        match self {
            Fp32 | QInt32 | QcInt32 | Int32 | Pfp32 => 32,
            Fp16 | Bf16 => 16,
            QInt8 | QUInt8 | QcInt8 | QdInt8 | QpInt8 => 8,
            QcInt4 | QbInt4 => 4,
        }
    }
}

/// Where per-channel scales are: inline in the flatbuffer, or a constant-data entry.
#[derive(Clone, Debug, PartialEq)]
pub enum Scales {
    Inline(Vec<f32>),
    /// Per-channel-group (blockwise) scales given as bf16 bits (`scale_bf16`).
    InlineBf16(Vec<u16>),
    /// `constant_data[index]` holds `count` little-endian f32s (per-channel) or bf16s
    /// (per-channel-group, as ExecuTorch serializes block scales).
    Buffer { index: u32, count: u32 },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Quant {
    None,
    PerTensor { scale: f32, zero_point: i32 },
    PerChannel { scales: Scales, channel_dim: i32 },
    PerTokenDynamic { num_nonbatch_dims: i32 },
    PerChannelGroup { scales: Scales, channel_dim: i32, group_size: i32 },
}

/// One `XValue` (a tensor or quantized tensor value).
#[derive(Clone, Debug, PartialEq)]
pub struct XnnValue {
    pub datatype: XnnDatatype,
    pub dims: Vec<usize>,
    /// Index into [`XnnGraph::constants`]; `None` for activations.
    pub constant: Option<u32>,
    /// `Some` for the graph's external inputs/outputs.
    pub external_id: Option<u32>,
    /// 1 = external input, 2 = external output.
    pub flags: u32,
    /// Runtime dynamic quantization target (`dq_datatype`), if any.
    pub dq_datatype: Option<XnnDatatype>,
    pub quant: Quant,
}

impl XnnValue {
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }
}

/// A constant-data entry: bytes from the program's named data (by key) or from the payload's
/// constant region (by offset), or (old `XN00` payloads) bytes stored in the flatbuffer.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstantRef {
    pub offset: u64,
    pub size: u64,
    pub named_key: Option<String>,
    pub inline: Option<Vec<u8>>,
}

/// Every `XNodeUnion` member, in union order (tag = index + 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Add,
    FullyConnected,
    Softmax,
    Sigmoid,
    StaticTranspose,
    Clamp,
    Conv2d,
    Div,
    StaticResizeBilinear2D,
    StaticConstantPad,
    AvgPooling2d,
    Minimum,
    DepthwiseConv2d,
    MaxPooling2d,
    Multiply,
    Subtract,
    Floor,
    Convert,
    GlobalAvgPooling2d,
    StaticReshape,
    ArgMaxPooling2d,
    SquareRoot,
    Ceiling,
    Hardswish,
    LeakyReLU,
    Maximum,
    Negate,
    Square,
    Elu,
    Abs,
    PReLU,
    Concatenate2,
    Concatenate3,
    Concatenate4,
    StaticSlice,
    ScaledDotProductAttention,
    BatchMatrixMultiply,
    Concatenate5,
    ConvTranspose2d,
    ReciprocalSquareRoot,
    Log,
    Gelu,
    Tanh,
    Exp,
    Sin,
    Copy,
    Cos,
}

const KINDS: [NodeKind; 47] = {
    use NodeKind::*;
    [
        Add, FullyConnected, Softmax, Sigmoid, StaticTranspose, Clamp, Conv2d, Div, StaticResizeBilinear2D, StaticConstantPad,
        AvgPooling2d, Minimum, DepthwiseConv2d, MaxPooling2d, Multiply, Subtract, Floor, Convert, GlobalAvgPooling2d, StaticReshape,
        ArgMaxPooling2d, SquareRoot, Ceiling, Hardswish, LeakyReLU, Maximum, Negate, Square, Elu, Abs, PReLU, Concatenate2,
        Concatenate3, Concatenate4, StaticSlice, ScaledDotProductAttention, BatchMatrixMultiply, Concatenate5, ConvTranspose2d,
        ReciprocalSquareRoot, Log, Gelu, Tanh, Exp, Sin, Copy, Cos,
    ]
};

impl NodeKind {
    pub fn from_tag(tag: u8) -> Option<NodeKind> {
        KINDS.get((tag as usize).checked_sub(1)?).copied()
    }

    /// The schema's name (`XNNConv2d` → `Conv2d`).
    pub fn name(self) -> &'static str {
        use NodeKind::*;
        match self {
            Add => "Add",
            FullyConnected => "FullyConnected",
            Softmax => "Softmax",
            Sigmoid => "Sigmoid",
            StaticTranspose => "StaticTranspose",
            Clamp => "Clamp",
            Conv2d => "Conv2d",
            Div => "Div",
            StaticResizeBilinear2D => "StaticResizeBilinear2D",
            StaticConstantPad => "StaticConstantPad",
            AvgPooling2d => "AvgPooling2d",
            Minimum => "Minimum",
            DepthwiseConv2d => "DepthwiseConv2d",
            MaxPooling2d => "MaxPooling2d",
            Multiply => "Multiply",
            Subtract => "Subtract",
            Floor => "Floor",
            Convert => "Convert",
            GlobalAvgPooling2d => "GlobalAvgPooling2d",
            StaticReshape => "StaticReshape",
            ArgMaxPooling2d => "ArgMaxPooling2d",
            SquareRoot => "SquareRoot",
            Ceiling => "Ceiling",
            Hardswish => "Hardswish",
            LeakyReLU => "LeakyReLU",
            Maximum => "Maximum",
            Negate => "Negate",
            Square => "Square",
            Elu => "ELU",
            Abs => "Abs",
            PReLU => "PReLU",
            Concatenate2 => "Concatenate2",
            Concatenate3 => "Concatenate3",
            Concatenate4 => "Concatenate4",
            StaticSlice => "StaticSlice",
            ScaledDotProductAttention => "ScaledDotProductAttention",
            BatchMatrixMultiply => "BatchMatrixMultiply",
            Concatenate5 => "Concatenate5",
            ConvTranspose2d => "ConvTranspose2d",
            ReciprocalSquareRoot => "ReciprocalSquareRoot",
            Log => "Log",
            Gelu => "Gelu",
            Tanh => "Tanh",
            Exp => "Exp",
            Sin => "Sin",
            Copy => "Copy",
            Cos => "Cos",
        }
    }
}

/// Convolution and transposed-convolution parameters (`_XNNNodeConv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvParams {
    pub padding_top: u32,
    pub padding_right: u32,
    pub padding_bottom: u32,
    pub padding_left: u32,
    pub kernel_height: u32,
    pub kernel_width: u32,
    pub subsampling_height: u32,
    pub subsampling_width: u32,
    pub dilation_height: u32,
    pub dilation_width: u32,
    pub group_input_channels: u32,
    pub group_output_channels: u32,
    pub groups: u32,
    pub adjustment_height: u32,
    pub adjustment_width: u32,
    pub input: u32,
    pub filter: u32,
    pub bias: Option<u32>,
    pub output: u32,
    pub flags: u32,
}

/// Pooling parameters (`_XNNPooling2D`; `ArgMaxPooling2d` has no stride/dilation: 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolParams {
    pub padding_top: u32,
    pub padding_right: u32,
    pub padding_bottom: u32,
    pub padding_left: u32,
    pub pooling_height: u32,
    pub pooling_width: u32,
    pub stride_height: u32,
    pub stride_width: u32,
    pub dilation_height: u32,
    pub dilation_width: u32,
    pub input: u32,
    pub output: u32,
    pub flags: u32,
}

/// The fields of a node, by table shape.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeParams {
    /// `_XNNNode1x1`.
    Unary { input: u32, output: u32, flags: u32 },
    /// `_XNNNode2x1`.
    Binary { input1: u32, input2: u32, output: u32, flags: u32 },
    FullyConnected { input: u32, filter: u32, bias: Option<u32>, output: u32, flags: u32 },
    Conv(ConvParams),
    Pool(PoolParams),
    ArgMaxPool { pool: PoolParams, output_index: u32 },
    Transpose { perm: Vec<usize>, input: u32, output: u32 },
    Reshape { new_shape: Vec<usize>, input: u32, output: u32 },
    Slice { offsets: Vec<usize>, sizes: Vec<usize>, input: u32, output: u32 },
    ConstantPad { pre: Vec<usize>, post: Vec<usize>, value: f32, input: u32, output: u32 },
    ResizeBilinear { new_height: u32, new_width: u32, input: u32, output: u32, flags: u32 },
    Concat { axis: u32, inputs: Vec<u32>, output: u32 },
    /// ELU (`alpha`) and LeakyReLU (`negative_slope`).
    UnaryParam { param: f32, input: u32, output: u32 },
    Sdpa { query: u32, key: u32, value: u32, scale: u32, mask: u32, output: u32 },
}

impl NodeParams {
    /// Every value id the node reads, in order (absent bias excluded).
    pub fn inputs(&self) -> Vec<u32> {
        use NodeParams::*;
        match self {
            Unary { input, .. } | Transpose { input, .. } | Reshape { input, .. } | Slice { input, .. } => vec![*input],
            ConstantPad { input, .. } | ResizeBilinear { input, .. } | UnaryParam { input, .. } => vec![*input],
            Pool(p) | ArgMaxPool { pool: p, .. } => vec![p.input],
            Binary { input1, input2, .. } => vec![*input1, *input2],
            FullyConnected { input, filter, bias, .. } => [Some(*input), Some(*filter), *bias].into_iter().flatten().collect(),
            Conv(c) => [Some(c.input), Some(c.filter), c.bias].into_iter().flatten().collect(),
            Concat { inputs, .. } => inputs.clone(),
            Sdpa { query, key, value, scale, mask, .. } => vec![*query, *key, *value, *scale, *mask],
        }
    }

    /// Every value id the node writes.
    pub fn outputs(&self) -> Vec<u32> {
        use NodeParams::*;
        match self {
            Unary { output, .. } | Binary { output, .. } | FullyConnected { output, .. } | Transpose { output, .. } => vec![*output],
            Reshape { output, .. } | Slice { output, .. } | ConstantPad { output, .. } | ResizeBilinear { output, .. } => vec![*output],
            Concat { output, .. } | UnaryParam { output, .. } | Sdpa { output, .. } => vec![*output],
            Conv(c) => vec![c.output],
            Pool(p) => vec![p.output],
            ArgMaxPool { pool, output_index } => vec![pool.output, *output_index],
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct XnnNode {
    pub kind: NodeKind,
    pub params: NodeParams,
    pub debug_handle: u32,
    /// Fused output range (`output_min_max`); `None` = unbounded.
    pub output_min_max: Option<(f32, f32)>,
}

/// A decoded, cross-checked `XNNGraph`. `values[id]` is the value whose `id_out` is `id`.
#[derive(Clone, Debug, PartialEq)]
pub struct XnnGraph {
    pub version: String,
    pub values: Vec<XnnValue>,
    pub nodes: Vec<XnnNode>,
    pub num_externs: u32,
    pub input_ids: Vec<u32>,
    pub output_ids: Vec<u32>,
    /// `constants[0]` is the reserved "not a constant" entry.
    pub constants: Vec<ConstantRef>,
}

/// Largest element count a value may declare (2^40: far beyond any real model, small enough
/// that byte sizes of every datatype stay inside `usize` on 64-bit hosts).
const MAX_NUMEL: u128 = 1 << 40;

/// Decodes and cross-checks an `XNNGraph` flatbuffer.
pub fn decode_graph(fb: &[u8]) -> Result<XnnGraph, String> {
    if fb.len() < 8 {
        return Err(format!("XNNPACK payload: flatbuffer of {} bytes is too short", fb.len()));
    }
    let ident = &fb[4..8];
    if ident != b"XN01" && ident != b"XN00" {
        return Err(format!("XNNPACK payload: flatbuffer identifier {:?} is not XN01 or XN00", String::from_utf8_lossy(ident)));
    }
    let st = State::new(fb.len().saturating_mul(4).max(1 << 16));
    let r = Reader::new(fb, &st);
    let (graph, id_outs) = match read_graph(&r) {
        Ok(g) => g,
        Err(Bad::Format) => return Err(format!("XNNPACK payload: {}", st.take_error())),
        Err(Bad::Message(m)) => return Err(m),
    };
    graph.ordered_by_id(id_outs)?.checked()
}

fn u32_slice(b: &[u8]) -> impl Iterator<Item = u32> + '_ {
    b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

fn f32_slice(b: &[u8]) -> Vec<f32> {
    u32_slice(b).map(f32::from_bits).collect()
}

fn u32s(t: &Table<'_, '_>, slot: usize) -> DecodeResult<Vec<u32>> {
    Ok(t.scalar_vector(slot, 4)?.map(|b| u32_slice(b).collect()).unwrap_or_default())
}

fn usizes(t: &Table<'_, '_>, slot: usize) -> DecodeResult<Vec<usize>> {
    Ok(u32s(t, slot)?.into_iter().map(|v| v as usize).collect())
}

fn u32f(t: &Table<'_, '_>, slot: usize) -> DecodeResult<u32> {
    Ok(t.scalar(slot, 4)? as u32)
}

fn f32f(t: &Table<'_, '_>, slot: usize) -> DecodeResult<f32> {
    Ok(f32::from_bits(t.scalar(slot, 4)? as u32))
}

fn i32f(t: &Table<'_, '_>, slot: usize) -> DecodeResult<i32> {
    Ok(t.scalar(slot, 4)? as u32 as i32)
}

/// The tables of a vector-of-tables field.
fn tables<'a, 'c>(t: &Table<'a, 'c>, slot: usize, ctx: &'static str) -> DecodeResult<Vec<Table<'a, 'c>>> {
    let Some(p) = t.offset(slot)? else { return Ok(Vec::new()) };
    let (start, len) = vector(&t.r, p, 4, ctx)?;
    (0..len).map(|i| t.r.table_at(start + 4 * i, ctx)).collect()
}

/// A union member: (type tag, table) from the tag slot and the value slot after it.
fn union<'a, 'c>(t: &Table<'a, 'c>, tag_slot: usize, ctx: &'static str) -> DecodeResult<Option<(u8, Table<'a, 'c>)>> {
    let tag = t.scalar(tag_slot, 1)? as u8;
    match t.offset(tag_slot + 1)? {
        Some(p) if tag != 0 => Ok(Some((tag, t.r.table(p, ctx)?))),
        _ => Ok(None),
    }
}

/// Decoding: a structural failure is recorded in the reader's state ([`DecodeResult`]); a
/// semantic one (unknown union tag, bad enum) is returned as a message right away.
enum Bad {
    Format,
    Message(String),
}

impl From<crate::format::flatbuf::Failed> for Bad {
    fn from(_: crate::format::flatbuf::Failed) -> Bad {
        Bad::Format
    }
}

/// The graph as stored, plus each value's `id_out`.
fn read_graph(r: &Reader<'_, '_>) -> Result<(XnnGraph, Vec<usize>), Bad> {
    let root = r.table_at(0, "XNNGraph")?;
    let version = match root.offset(0)? {
        Some(p) => string(r, p, "XNNGraph.version")?.to_string(),
        None => String::new(),
    };
    let (mut values, mut id_outs) = (Vec::new(), Vec::new());
    for (i, v) in tables(&root, 2, "XNNGraph.xvalues")?.iter().enumerate() {
        let (id, value) = read_value(v, i)?;
        id_outs.push(id);
        values.push(value);
    }
    let mut nodes = Vec::new();
    for (i, n) in tables(&root, 1, "XNNGraph.xnodes")?.iter().enumerate() {
        nodes.push(read_node(n, i)?);
    }
    let mut constants = Vec::new();
    for c in tables(&root, 8, "XNNGraph.constant_data")? {
        let named_key = match c.offset(2)? {
            Some(p) => Some(string(r, p, "ConstantDataOffset.named_key")?.to_string()).filter(|k| !k.is_empty()),
            None => None,
        };
        constants.push(ConstantRef { offset: c.scalar(0, 8)?, size: c.scalar(1, 8)?, named_key, inline: None });
    }
    if constants.is_empty() {
        // XN00: constants stored in the flatbuffer (`constant_buffer: [Buffer]`).
        for b in tables(&root, 6, "XNNGraph.constant_buffer")? {
            let bytes = b.scalar_vector(0, 1)?.unwrap_or(&[]);
            constants.push(ConstantRef { offset: 0, size: bytes.len() as u64, named_key: None, inline: Some(bytes.to_vec()) });
        }
    }
    let graph = XnnGraph {
        version,
        values,
        nodes,
        num_externs: u32f(&root, 3)?,
        input_ids: u32s(&root, 4)?,
        output_ids: u32s(&root, 5)?,
        constants,
    };
    Ok((graph, id_outs))
}

/// (index in the values list, `id_out`, value).
fn read_value(v: &Table<'_, '_>, index: usize) -> Result<(usize, XnnValue), Bad> {
    let Some((tag, body)) = union(v, 0, "XValue")? else {
        return Err(Bad::Message(format!("XNNPACK payload: xvalue {index} has no value")));
    };
    let (tensor, quant) = match tag {
        1 => (body, Quant::None),
        2 => {
            let Some(p) = body.offset(0)? else {
                return Err(Bad::Message(format!("XNNPACK payload: xvalue {index}: quantized tensor without tensor_value")));
            };
            let tensor = body.r.table(p, "XNNTensorValue")?;
            let quant = match union(&body, 1, "XNNQuantParams")? {
                None => Quant::None,
                Some((1, q)) => Quant::PerChannel { scales: read_scales(&q, 0, 2, 3)?, channel_dim: i32f(&q, 1)? },
                Some((2, q)) => Quant::PerTensor { scale: f32f(&q, 0)?, zero_point: i32f(&q, 1)? },
                Some((3, q)) => Quant::PerTokenDynamic { num_nonbatch_dims: i32f(&q, 0)? },
                Some((4, q)) => Quant::PerChannelGroup { scales: read_group_scales(&q)?, channel_dim: i32f(&q, 1)?, group_size: i32f(&q, 2)? },
                Some((t, _)) => return Err(Bad::Message(format!("XNNPACK payload: xvalue {index}: unknown quantization kind {t}"))),
            };
            (tensor, quant)
        }
        t => return Err(Bad::Message(format!("XNNPACK payload: xvalue {index}: unknown value kind {t}"))),
    };
    let code = tensor.scalar(0, 2)? as u16 as i16;
    let datatype = XnnDatatype::from_code(code)
        .ok_or_else(|| Bad::Message(format!("XNNPACK payload: xvalue {index}: unknown datatype {code}")))?;
    let dq = tensor.scalar(7, 2)? as u16 as i16;
    let dq_datatype = if dq == 0 {
        None
    } else {
        Some(XnnDatatype::from_code(dq).ok_or_else(|| Bad::Message(format!("XNNPACK payload: xvalue {index}: unknown dq_datatype {dq}")))?)
    };
    let dims = usizes(&tensor, 2)?;
    let constant = match u32f(&tensor, 3)? {
        0 => None,
        c => Some(c),
    };
    let external_id = match u32f(&tensor, 4)? {
        INVALID_VALUE_ID => None,
        e => Some(e),
    };
    let flags = u32f(&tensor, 5)?;
    let id_out = u32f(&tensor, 6)? as usize;
    // A value that is neither external input nor output has no external id, whatever the field says.
    let external_id = if flags & 3 != 0 { external_id } else { None };
    Ok((id_out, XnnValue { datatype, dims, constant, external_id, flags, dq_datatype, quant }))
}

fn read_scales(q: &Table<'_, '_>, inline_slot: usize, buffer_slot: usize, count_slot: usize) -> Result<Scales, Bad> {
    let inline = q.scalar_vector(inline_slot, 4)?.map(f32_slice).unwrap_or_default();
    let index = u32f(q, buffer_slot)?;
    if inline.is_empty() && index != 0 {
        Ok(Scales::Buffer { index, count: u32f(q, count_slot)? })
    } else {
        Ok(Scales::Inline(inline))
    }
}

/// `PerChannelGroupQuant`: a bf16 constant entry, else inline bf16 (`scale_bf16`), else inline f32.
fn read_group_scales(q: &Table<'_, '_>) -> Result<Scales, Bad> {
    let bf16: Vec<u16> = q.scalar_vector(3, 2)?.map(|b| b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()).unwrap_or_default();
    match read_scales(q, 0, 4, 5)? {
        Scales::Inline(f) if f.is_empty() && !bf16.is_empty() => Ok(Scales::InlineBf16(bf16)),
        other => Ok(other),
    }
}

fn id_opt(v: u32) -> Option<u32> {
    (v != INVALID_VALUE_ID).then_some(v)
}

fn read_node(n: &Table<'_, '_>, index: usize) -> Result<XnnNode, Bad> {
    let Some((tag, t)) = union(n, 0, "XNode")? else {
        return Err(Bad::Message(format!("XNNPACK payload: xnode {index} has no operation")));
    };
    let kind = NodeKind::from_tag(tag).ok_or_else(|| Bad::Message(format!("XNNPACK payload: xnode {index}: unknown node type {tag}")))?;
    let u = |slot| u32f(&t, slot);
    use NodeKind::*;
    let params = match kind {
        Add | Div | Minimum | Multiply | Subtract | Maximum | PReLU | BatchMatrixMultiply => {
            NodeParams::Binary { input1: u(0)?, input2: u(1)?, output: u(2)?, flags: u(3)? }
        }
        Softmax | Sigmoid | Clamp | Floor | Convert | GlobalAvgPooling2d | SquareRoot | Ceiling | Hardswish | Negate | Square | Abs
        | ReciprocalSquareRoot | Log | Gelu | Tanh | Exp | Sin | Copy | Cos => NodeParams::Unary { input: u(0)?, output: u(1)?, flags: u(2)? },
        FullyConnected => NodeParams::FullyConnected { input: u(0)?, filter: u(1)?, bias: id_opt(u(2)?), output: u(3)?, flags: u(4)? },
        Conv2d | DepthwiseConv2d | ConvTranspose2d => NodeParams::Conv(ConvParams {
            padding_top: u(0)?,
            padding_right: u(1)?,
            padding_bottom: u(2)?,
            padding_left: u(3)?,
            kernel_height: u(4)?,
            kernel_width: u(5)?,
            subsampling_height: u(6)?,
            subsampling_width: u(7)?,
            dilation_height: u(8)?,
            dilation_width: u(9)?,
            group_input_channels: u(10)?,
            group_output_channels: u(11)?,
            groups: u(12)?,
            adjustment_height: u(13)?,
            adjustment_width: u(14)?,
            input: u(15)?,
            filter: u(16)?,
            bias: id_opt(u(17)?),
            output: u(18)?,
            flags: u(19)?,
        }),
        AvgPooling2d | MaxPooling2d => NodeParams::Pool(PoolParams {
            padding_top: u(0)?,
            padding_right: u(1)?,
            padding_bottom: u(2)?,
            padding_left: u(3)?,
            pooling_height: u(4)?,
            pooling_width: u(5)?,
            stride_height: u(6)?,
            stride_width: u(7)?,
            dilation_height: u(8)?,
            dilation_width: u(9)?,
            input: u(10)?,
            output: u(11)?,
            flags: u(12)?,
        }),
        ArgMaxPooling2d => NodeParams::ArgMaxPool {
            pool: PoolParams {
                padding_top: u(0)?,
                padding_right: u(1)?,
                padding_bottom: u(2)?,
                padding_left: u(3)?,
                pooling_height: u(4)?,
                pooling_width: u(5)?,
                stride_height: u(4)?,
                stride_width: u(5)?,
                dilation_height: 1,
                dilation_width: 1,
                input: u(6)?,
                output: u(7)?,
                flags: u(9)?,
            },
            output_index: u(8)?,
        },
        StaticTranspose => NodeParams::Transpose { perm: usizes(&t, 1)?, input: u(2)?, output: u(3)? },
        StaticReshape => NodeParams::Reshape { new_shape: usizes(&t, 1)?, input: u(2)?, output: u(3)? },
        StaticSlice => NodeParams::Slice { offsets: usizes(&t, 1)?, sizes: usizes(&t, 2)?, input: u(3)?, output: u(4)? },
        StaticConstantPad => NodeParams::ConstantPad { pre: usizes(&t, 0)?, post: usizes(&t, 1)?, value: f32f(&t, 2)?, input: u(3)?, output: u(4)? },
        StaticResizeBilinear2D => NodeParams::ResizeBilinear { new_height: u(0)?, new_width: u(1)?, input: u(2)?, output: u(3)?, flags: u(4)? },
        Concatenate2 | Concatenate3 | Concatenate4 | Concatenate5 => {
            let count = match kind {
                Concatenate2 => 2,
                Concatenate3 => 3,
                Concatenate4 => 4,
                _ => 5,
            };
            let slots = [1usize, 2, 3, 4, 7];
            let inputs = slots[..count].iter().map(|&s| u(s)).collect::<DecodeResult<Vec<u32>>>()?;
            NodeParams::Concat { axis: u(0)?, inputs, output: u(5)? }
        }
        Elu | LeakyReLU => NodeParams::UnaryParam { param: f32f(&t, 0)?, input: u(1)?, output: u(2)? },
        ScaledDotProductAttention => NodeParams::Sdpa { query: u(0)?, key: u(1)?, value: u(2)?, scale: u(3)?, mask: u(4)?, output: u(5)? },
    };
    let output_min_max = match n.offset(3)? {
        Some(p) => {
            let mm = n.r.table(p, "OutputMinMax")?;
            Some((f32f(&mm, 0)?, f32f(&mm, 1)?))
        }
        None => None,
    };
    Ok(XnnNode { kind, params, debug_handle: u32f(n, 2)?, output_min_max })
}

impl XnnGraph {
    /// Values reordered so that `values[id]` has `id_out == id`; the ids must be `0..n`.
    fn ordered_by_id(mut self, id_outs: Vec<usize>) -> Result<XnnGraph, String> {
        let n = self.values.len();
        let mut slots: Vec<Option<XnnValue>> = (0..n).map(|_| None).collect();
        for (i, (value, id)) in self.values.drain(..).zip(id_outs).enumerate() {
            match slots.get_mut(id) {
                Some(slot @ None) => *slot = Some(value),
                Some(Some(_)) => return Err(format!("XNNPACK payload: xvalue {i}: id_out {id} is used twice")),
                None => return Err(format!("XNNPACK payload: xvalue {i}: id_out {id} out of range (the graph has {n} values)")),
            }
        }
        self.values = slots.into_iter().flatten().collect();
        Ok(self)
    }

    /// Cross-references: value ids, constant indices, element counts, external ids.
    fn checked(self) -> Result<XnnGraph, String> {
        let n_values = self.values.len();
        let n_consts = self.constants.len();
        for (id, v) in self.values.iter().enumerate() {
            let numel = v.dims.iter().try_fold(1u128, |acc, &d| Some(acc * d as u128).filter(|&x| x <= MAX_NUMEL));
            if numel.is_none() {
                return Err(format!("XNNPACK payload: value {id}: dims {:?} hold too many elements", v.dims));
            }
            if let Some(c) = v.constant {
                if c as usize >= n_consts {
                    return Err(format!("XNNPACK payload: value {id}: constant_buffer_idx {c} out of range ({n_consts} constant entries)"));
                }
            }
            let scales = match &v.quant {
                Quant::PerChannel { scales, .. } | Quant::PerChannelGroup { scales, .. } => Some(scales),
                _ => None,
            };
            if let Some(Scales::Buffer { index, .. }) = scales {
                if *index as usize >= n_consts {
                    return Err(format!("XNNPACK payload: value {id}: scale_buffer_idx {index} out of range ({n_consts} constant entries)"));
                }
            }
        }
        let check_id = |what: &str, id: u32| {
            if (id as usize) < n_values {
                Ok(())
            } else {
                Err(format!("XNNPACK payload: {what} names value {id}, out of range (the graph has {n_values} values)"))
            }
        };
        for (i, node) in self.nodes.iter().enumerate() {
            for id in node.params.inputs().into_iter().chain(node.params.outputs()) {
                check_id(&format!("xnode {i} ({})", node.kind.name()), id)?;
            }
        }
        for &id in &self.input_ids {
            check_id("input_ids", id)?;
        }
        for &id in &self.output_ids {
            check_id("output_ids", id)?;
        }
        Ok(self)
    }
}
