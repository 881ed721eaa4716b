//! What a compiled payload is: activation buffers, the steps that run on them (one [`Op`] each)
//! and where the delegate's inputs and outputs live.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::NodeKind;
use rbuild_runtime::ScalarType;

use super::aligned::Aligned;
use super::matmul::{BatchMatMul, FullyConnectedRuntime};
use super::ops::{BinOp, Broadcast, UnOp};
use crate::nhwc::conv_f32::ConvF32;
use crate::nhwc::dwconv_f32::DepthwiseF32;
use crate::nhwc::fc_f32::FullyConnectedF32;
use crate::nhwc::qs8::dynamic::FullyConnectedQd8;
use crate::nhwc::qs8::{AddQs8, ConvQd8, ConvQs8, ConvQu8, DeconvQd8, DeconvQs8, DepthwiseQs8, FullyConnectedQs8, MulQs8, QParams, RequantizeQs8};
use crate::nhwc::resize::ResizeBilinear;
use crate::nhwc::{Conv2dGeom, PostOp};

/// Element type of an activation buffer. Half and bfloat16 values live in f32 buffers, rounded
/// to their format after every step that writes them ([`Round`]); quint8 values live in int8
/// buffers shifted by 128 (`q ^ 0x80`, zero point − 128), which every quantized kernel treats
/// exactly as the unsigned form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    I8,
    I32,
}

/// The narrower float format a step's f32 output stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    F16,
    Bf16,
}

impl Round {
    /// Rounds each value to the nearest representable one (ties to even, as XNNPACK's
    /// conversions), in place.
    pub fn apply(self, v: &mut [f32]) {
        match self {
            Round::F16 => v.iter_mut().for_each(|x| *x = half::f16::from_f32(*x).to_f32()),
            Round::Bf16 => v.iter_mut().for_each(|x| *x = half::bf16::from_f32(*x).to_f32()),
        }
    }

    pub fn one(self, x: f32) -> f32 {
        let mut v = [x];
        self.apply(&mut v);
        v[0]
    }
}

/// Activation storage (64-byte aligned: [`Aligned`]).
pub enum Buf {
    F32(Aligned<f32>),
    I8(Aligned<i8>),
    I32(Aligned<i32>),
}

impl Buf {
    pub(super) fn new(elem: Elem, len: usize) -> Result<Buf, String> {
        Ok(match elem {
            Elem::F32 => Buf::F32(Aligned::zeros(len)?),
            Elem::I8 => Buf::I8(Aligned::zeros(len)?),
            Elem::I32 => Buf::I32(Aligned::zeros(len)?),
        })
    }
    pub(super) fn elem(&self) -> Elem {
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
    pub(super) fn grow(&mut self, len: usize) -> Result<(), String> {
        match self {
            Buf::F32(v) => v.grow(len),
            Buf::I8(v) => v.grow(len),
            Buf::I32(v) => v.grow(len),
        }
    }

    pub(super) fn bytes(&self) -> usize {
        match self {
            Buf::F32(v) => 4 * v.len(),
            Buf::I8(v) => v.len(),
            Buf::I32(v) => 4 * v.len(),
        }
    }
}

/// A delegate input or output: the call's argument it binds to (its external id, as
/// ExecuTorch's `XNNExecutor` indexes the delegate's arguments), the buffer that holds it, and
/// what the call's tensor must be.
pub struct Extern {
    pub arg: usize,
    pub buf: usize,
    pub dims: Vec<usize>,
    /// The tensor's dtype at the delegate boundary (Half, BFloat16 and Byte are converted to
    /// and from the buffer's representation).
    pub dtype: ScalarType,
}

/// One operator, ready to run.
pub enum Op {
    ConvF32 { op: ConvF32, min: f32, max: f32 },
    DepthwiseF32 { op: DepthwiseF32, min: f32, max: f32 },
    /// A convolution (pointwise, or a network's first layer) whose output only a depthwise one
    /// reads, run together in bands of rows so the expanded tensor stays in cache
    /// (`fusion::fuse_expand_depthwise`).
    /// With `project`, the pointwise convolution reading the depthwise output joins too.
    ExpandDwF32 { expand: ConvF32, e_min: f32, e_max: f32, dw: DepthwiseF32, min: f32, max: f32, project: Option<(ConvF32, f32, f32)> },
    FullyConnectedF32 { op: FullyConnectedF32, m: usize, min: f32, max: f32 },
    /// A fully connected layer whose filter (input 1) and bias (input 2, if any) are activations.
    FullyConnectedRuntime { op: FullyConnectedRuntime, bias: bool, min: f32, max: f32 },
    ConvQs8(ConvQs8),
    /// An 8-bit convolution, depthwise, transposed convolution or fully connected layer whose
    /// weights have a zero point (quint8 weights).
    ConvQu8(ConvQu8),
    DepthwiseQs8(DepthwiseQs8),
    FullyConnectedQs8 { op: FullyConnectedQs8, m: usize },
    /// f32 rows quantized per row at run time (the qdint8 `Convert` folded in), int8/int4 weights.
    FullyConnectedQd8 { op: FullyConnectedQd8, m: usize, min: f32, max: f32 },
    /// f32 images quantized per image at run time, int8 weights.
    ConvQd8 { op: ConvQd8, min: f32, max: f32 },
    DeconvF32 { geom: Conv2dGeom, filter: Vec<f32>, bias: Option<Vec<f32>>, min: f32, max: f32 },
    DeconvQs8(DeconvQs8),
    /// f32 images quantized per image at run time, int8 weights.
    DeconvQd8 { op: DeconvQd8, min: f32, max: f32 },
    BinaryF32 { op: BinOp, bc: Broadcast, min: f32, max: f32 },
    /// Add, and Subtract (`AddQs8::new_subtract`).
    AddQs8 { op: AddQs8, bc: Broadcast },
    MulQs8 { op: MulQs8, bc: Broadcast },
    UnaryF32 { op: UnOp, min: f32, max: f32 },
    ClampI8 { lo: i8, hi: i8 },
    /// int8 → int8 through a 256-entry table indexed by `q + 128`.
    TableI8(Vec<i8>),
    Quantize(QParams),
    Dequantize(QParams),
    Requantize(RequantizeQs8),
    GlobalAvgPoolF32 { batch: usize, pixels: usize, channels: usize, min: f32, max: f32 },
    GlobalAvgPoolQs8 { batch: usize, pixels: usize, channels: usize, input: QParams, output: QParams, lo: i8, hi: i8 },
    PoolF32 { max_pool: bool, geom: Conv2dGeom, min: f32, max: f32 },
    MaxPoolQs8 { geom: Conv2dGeom, lo: i8, hi: i8 },
    ResizeF32(ResizeBilinear),
    ResizeQs8(ResizeBilinear),
    SoftmaxF32 { rows: usize, cols: usize },
    BatchMatMulF32 { op: BatchMatMul, min: f32, max: f32 },
    Transpose { dims: Vec<usize>, perm: Vec<usize> },
    /// Reshape, Copy and conversions between float formats: the same elements.
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
            Op::ConvQu8(op) => format!("{} qu8", g(op.geom())),
            Op::DepthwiseQs8(op) => g(op.geom()),
            Op::DeconvQs8(op) => format!("{} qs8", g(op.geom())),
            Op::DeconvQd8 { op, .. } => format!("{} qd8", g(op.geom())),
            Op::DeconvF32 { geom, .. } => g(geom),
            Op::ConvQd8 { op, .. } => format!("{} qd8", g(op.geom())),
            Op::FullyConnectedF32 { op, m, .. } => format!("{m}x{}->{}", op.k(), op.n()),
            Op::FullyConnectedRuntime { op, .. } => format!("{}x{}->{} runtime weights", op.m, op.k, op.n),
            Op::FullyConnectedQs8 { op, m } => format!("{m}x{}->{}", op.k(), op.n()),
            Op::FullyConnectedQd8 { op, m, .. } => format!("{m}x{}->{} qd8", op.k(), op.n()),
            Op::BatchMatMulF32 { op, .. } => op.describe(),
            Op::BinaryF32 { .. } | Op::UnaryF32 { .. } | Op::GlobalAvgPoolF32 { .. } | Op::PoolF32 { .. } | Op::ResizeF32(_) => "f32".into(),
            Op::AddQs8 { .. } | Op::MulQs8 { .. } | Op::GlobalAvgPoolQs8 { .. } | Op::ClampI8 { .. } | Op::MaxPoolQs8 { .. } | Op::ResizeQs8(_) => "qs8".into(),
            Op::TableI8(_) => "qs8 table".into(),
            Op::Quantize(_) => "f32->qs8".into(),
            Op::Dequantize(_) => "qs8->f32".into(),
            Op::Requantize(_) => "qs8->qs8".into(),
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
    /// The output is half or bfloat16: rounded after the op.
    pub round: Option<Round>,
}

/// A compiled payload: what `execute` runs.
pub struct Plan {
    /// The threads [`Plan::run_in_place`] / [`Plan::run_timed`] run on (kept across runs).
    pub(crate) workers: super::exec::Workers,
    pub(crate) bufs: Vec<Buf>,
    pub(crate) steps: Vec<Step>,
    /// Ordered by argument index.
    pub(crate) inputs: Vec<Extern>,
    pub(crate) outputs: Vec<Extern>,
}
