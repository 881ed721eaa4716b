//! One run of XNNPACK-able ops → an `XnnpackBackend` payload. [`parse`] reads a node into the
//! form XNNPACK expresses (or says why it cannot: the partitioner's reason); [`lower`] builds
//! the `XNNGraph`.
//!
//! Layout: the delegate's inputs and outputs are NCHW (what the rest of the program holds);
//! inside, every rank-4 activation is NHWC, XNNPACK's layout, with StaticTranspose nodes at the
//! run's edges — the form ExecuTorch's partitioner writes. Convolution filters are stored in
//! XNNPACK's layouts (`[OC, KH, KW, IC/groups]`, depthwise `[1, KH, KW, C·mult]`), linear
//! weights as `[OC, IC]`; all constants go to the program's named data, keyed by the sha256 hex
//! of their bytes, so identical tensors are stored once.

use std::collections::HashMap;

use rbuild_export::graph::{Arg, ConstData, Graph, Node, Origin, ValueId};
use rbuild_runtime::backends::xnnpack::graph::ConvParams;
use rbuild_runtime::backends::xnnpack::{write_payload, ConstantRef, NodeKind, NodeParams, Quant, Scales, XnnDatatype, XnnGraph, XnnNode, XnnValue};
use rbuild_runtime::ScalarType;
use sha2::{Digest, Sha256};

use crate::partition::Partition;
use crate::{LinearMode, XnnpackOptions};

/// XNNPACK's `XNN_FLAG_KEEP_DIMS`: global pooling keeps the pooled dims as size 1.
const KEEP_DIMS: u32 = 64;
/// Value flags ExecuTorch's compiler reads: external input / external output.
const EXTERNAL_INPUT: u32 = 1;
const EXTERNAL_OUTPUT: u32 = 2;

/// NCHW → NHWC and back.
const TO_NHWC: [usize; 4] = [0, 2, 3, 1];
const TO_NCHW: [usize; 4] = [0, 3, 1, 2];

/// A node in the form XNNPACK expresses.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    Conv { x: ValueId, w: ValueId, b: Option<ValueId>, stride: [u32; 2], padding: [u32; 2], dilation: [u32; 2], groups: u32 },
    /// An elementwise binary op; `b` is a tensor or a number.
    Binary { a: ValueId, b: Operand, kind: NodeKind },
    Clamp { x: ValueId, min: f32, max: f32 },
    Unary { x: ValueId, kind: NodeKind },
    /// Mean over H and W of an NCHW tensor.
    GlobalMean { x: ValueId, keepdim: bool },
    /// `x @ W^T + b`; `w_is_input_major`: the constant is `[IC, OC]` (addmm/mm's operand).
    Linear { x: ValueId, w: ValueId, b: Option<ValueId>, w_is_input_major: bool },
    Reshape { x: ValueId },
    Permute { x: ValueId, perm: Vec<usize> },
    /// The output is the input (clone, a dtype-preserving copy).
    Alias { x: ValueId },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    Tensor(ValueId),
    Number(f32),
}

fn number(a: Option<&Arg>) -> Option<f64> {
    match a {
        Some(Arg::Scalar(s)) => Some(s.to_f64()),
        Some(Arg::Float(f)) => Some(*f),
        Some(Arg::Int(i)) => Some(*i as f64),
        _ => None,
    }
}

/// An optional bound (`clamp`'s min/max): None is unbounded.
fn bound(n: &Node, i: usize, unbounded: f32) -> Result<f32, String> {
    match n.args.get(i) {
        None | Some(Arg::None) => Ok(unbounded),
        a => number(a).map(|v| v as f32).ok_or_else(|| format!("argument {i} is {a:?}, a number is needed")),
    }
}

fn pair(n: &Node, i: usize, what: &str) -> Result<[u32; 2], String> {
    match n.args.get(i) {
        Some(Arg::Ints(v)) => match v.as_slice() {
            [a, b] if *a >= 0 && *b >= 0 => Ok([*a as u32, *b as u32]),
            [a] if *a >= 0 => Ok([*a as u32, *a as u32]),
            _ => Err(format!("{what} {v:?} is not two non-negative sizes")),
        },
        other => Err(format!("{what} is {other:?}, constant ints are needed")),
    }
}

fn fixed_sizes(g: &Graph, v: ValueId) -> Result<Vec<usize>, String> {
    g.meta(v).sizes().ok_or_else(|| format!("{} has dynamic dims {:?}; the XNNPACK payload is static-shaped", g.values[v].name, g.meta(v).shape))
}

fn is_float(g: &Graph, v: ValueId) -> bool {
    g.meta(v).dtype == ScalarType::Float
}

fn require_float(g: &Graph, v: ValueId) -> Result<(), String> {
    if is_float(g, v) {
        Ok(())
    } else {
        Err(format!("{} is {:?}; the XNNPACK delegate takes float32", g.values[v].name, g.meta(v).dtype))
    }
}

fn numel(g: &Graph, v: ValueId) -> Option<usize> {
    g.meta(v).sizes().map(|s| s.iter().product())
}

/// What XNNPACK makes of `n`, or why it cannot run it.
pub fn parse(g: &Graph, n: &Node) -> Result<Parsed, String> {
    let out = match n.outputs.as_slice() {
        [o] => *o,
        outs => return Err(format!("{} outputs; the delegate takes single-output ops", outs.len())),
    };
    require_float(g, out)?;
    fixed_sizes(g, out)?;
    let out_rank = g.meta(out).rank();
    let parsed = match n.op.as_str() {
        "aten::convolution" => {
            let (x, w, b) = (n.tensor_arg(0)?, n.tensor_arg(1)?, n.opt_tensor_arg(2)?);
            if matches!(n.args.get(6), Some(Arg::Bool(true))) {
                return Err("transposed convolution is not lowered".into());
            }
            if g.meta(x).rank() != 4 || g.meta(w).rank() != 4 {
                return Err("only 2-D convolution (NCHW input, 4-D weight) is lowered".into());
            }
            if g.constant(w).is_none() || b.is_some_and(|b| g.constant(b).is_none()) {
                return Err("the weight or bias is not a constant".into());
            }
            let groups = match n.args.get(8) {
                Some(Arg::Int(k)) if *k >= 1 => *k as u32,
                other => return Err(format!("groups {other:?} is not a positive int")),
            };
            Parsed::Conv { x, w, b, stride: pair(n, 3, "stride")?, padding: pair(n, 4, "padding")?, dilation: pair(n, 5, "dilation")?, groups }
        }
        "aten::add.Tensor" | "aten::sub.Tensor" | "aten::add.Scalar" | "aten::sub.Scalar" | "aten::mul.Tensor" | "aten::mul.Scalar"
        | "aten::div.Tensor" | "aten::div.Scalar" => {
            let kind = match n.op.split(['.', ':']).nth(2) {
                Some("add") => NodeKind::Add,
                Some("sub") => NodeKind::Subtract,
                Some("mul") => NodeKind::Multiply,
                _ => NodeKind::Div,
            };
            if matches!(kind, NodeKind::Add | NodeKind::Subtract) {
                if let Some(alpha) = number(n.args.get(2)) {
                    if alpha != 1.0 {
                        return Err(format!("alpha = {alpha} (only 1 is lowered)"));
                    }
                }
            }
            if n.op == "aten::div.Tensor" && n.args.len() > 2 && !matches!(n.args.get(2), Some(Arg::None)) {
                return Err("a rounding mode is not lowered".into());
            }
            let a = n.tensor_arg(0)?;
            let b = match n.args.get(1) {
                Some(Arg::Tensor(v)) => Operand::Tensor(*v),
                other => Operand::Number(number(other).ok_or_else(|| format!("argument 1 is {other:?}, a tensor or number is needed"))? as f32),
            };
            let operands = [Some(a), if let Operand::Tensor(v) = b { Some(v) } else { None }];
            for v in operands.into_iter().flatten() {
                require_float(g, v)?;
                // Inside the delegate a rank-4 result is NHWC; an operand of lower rank would
                // broadcast against the wrong dims unless it is a single element.
                let rank = g.meta(v).rank();
                if out_rank == 4 && rank != 4 && numel(g, v) != Some(1) {
                    return Err(format!("{} (rank {rank}) broadcasts against a 4-D NCHW tensor", g.values[v].name));
                }
            }
            Parsed::Binary { a, b, kind }
        }
        "aten::hardtanh" => Parsed::Clamp { x: n.tensor_arg(0)?, min: bound(n, 1, -1.0)?, max: bound(n, 2, 1.0)? },
        "aten::relu" => Parsed::Clamp { x: n.tensor_arg(0)?, min: 0.0, max: f32::INFINITY },
        "aten::clamp" => Parsed::Clamp { x: n.tensor_arg(0)?, min: bound(n, 1, f32::NEG_INFINITY)?, max: bound(n, 2, f32::INFINITY)? },
        "aten::hardswish" => Parsed::Unary { x: n.tensor_arg(0)?, kind: NodeKind::Hardswish },
        "aten::sigmoid" => Parsed::Unary { x: n.tensor_arg(0)?, kind: NodeKind::Sigmoid },
        "aten::mean.dim" => {
            let x = n.tensor_arg(0)?;
            if g.meta(x).rank() != 4 {
                return Err("mean of a tensor that is not 4-D (only the global pooling over H, W is lowered)".into());
            }
            let mut dims: Vec<i64> = match n.args.get(1) {
                Some(Arg::Ints(d)) => d.iter().map(|&d| if d < 0 { d + 4 } else { d }).collect(),
                other => return Err(format!("dims {other:?} are not constant ints")),
            };
            dims.sort_unstable();
            if dims != [2, 3] {
                return Err(format!("mean over dims {dims:?} (only H and W are lowered)"));
            }
            if !matches!(n.args.get(3), None | Some(Arg::None)) {
                return Err("mean with a dtype is not lowered".into());
            }
            Parsed::GlobalMean { x, keepdim: matches!(n.args.get(2), Some(Arg::Bool(true))) }
        }
        "aten::linear" => Parsed::Linear { x: n.tensor_arg(0)?, w: n.tensor_arg(1)?, b: n.opt_tensor_arg(2)?, w_is_input_major: false },
        "aten::addmm" => {
            for (i, what) in [(3, "beta"), (4, "alpha")] {
                if let Some(v) = number(n.args.get(i)) {
                    if v != 1.0 {
                        return Err(format!("{what} = {v} (only 1 is lowered)"));
                    }
                }
            }
            Parsed::Linear { x: n.tensor_arg(1)?, w: n.tensor_arg(2)?, b: Some(n.tensor_arg(0)?), w_is_input_major: true }
        }
        "aten::mm" => Parsed::Linear { x: n.tensor_arg(0)?, w: n.tensor_arg(1)?, b: None, w_is_input_major: true },
        "aten::view_copy" | "aten::view" | "aten::reshape" | "aten::_unsafe_view" => Parsed::Reshape { x: n.tensor_arg(0)? },
        "aten::permute_copy" | "aten::permute" => {
            let x = n.tensor_arg(0)?;
            let rank = g.meta(x).rank() as i64;
            let perm: Vec<usize> = match n.args.get(1) {
                Some(Arg::Ints(p)) => p.iter().map(|&d| (if d < 0 { d + rank } else { d }) as usize).collect(),
                other => return Err(format!("dims {other:?} are not constant ints")),
            };
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if sorted != (0..rank as usize).collect::<Vec<_>>() {
                return Err(format!("{perm:?} is not a permutation of the {rank} dims"));
            }
            Parsed::Permute { x, perm }
        }
        "aten::clone" | "aten::alias" | "aten::alias_copy" | "aten::_to_copy" | "dim_order_ops::_clone_dim_order" | "dim_order_ops::_to_dim_order_copy" => {
            let x = n.tensor_arg(0)?;
            if g.meta(x).shape != g.meta(out).shape {
                return Err("the copy changes the shape".into());
            }
            Parsed::Alias { x }
        }
        other => return Err(format!("{other} has no XNNPACK lowering")),
    };
    // Every tensor read is float32 with fixed dims; weights must be constants.
    match &parsed {
        Parsed::Linear { x, w, b, .. } => {
            if g.meta(*x).rank() == 4 || g.meta(*x).rank() == 0 {
                return Err(format!("a linear layer on a {}-D input is not lowered", g.meta(*x).rank()));
            }
            if g.constant(*w).is_none() || b.is_some_and(|b| g.constant(b).is_none()) {
                return Err("the weight or bias is not a constant".into());
            }
            if g.meta(*w).rank() != 2 {
                return Err("the weight is not 2-D".into());
            }
        }
        Parsed::Conv { .. } | Parsed::Binary { .. } => {}
        Parsed::Clamp { x, .. } | Parsed::Unary { x, .. } | Parsed::GlobalMean { x, .. } | Parsed::Reshape { x } | Parsed::Permute { x, .. } | Parsed::Alias { x } => {
            require_float(g, *x)?;
        }
    }
    for v in n.tensor_inputs() {
        require_float(g, v)?;
        fixed_sizes(g, v)?;
    }
    Ok(parsed)
}

/// One lowered run: the payload, the graph values it reads and writes (the delegate call's
/// arguments and results, in payload order) and the constants it names.
pub struct Lowered {
    pub bytes: Vec<u8>,
    pub graph: XnnGraph,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    pub named_data: Vec<(String, ConstData)>,
}

struct Ctx<'g> {
    g: &'g Graph,
    x: XnnGraph,
    /// Graph value → payload value (NHWC when the graph value is 4-D).
    stored: HashMap<ValueId, u32>,
    /// Graph value → payload value in NCHW order (4-D values converted back, cached).
    as_nchw: HashMap<ValueId, u32>,
    inputs: Vec<ValueId>,
    named: Vec<(String, ConstData)>,
    constant_index: HashMap<String, u32>,
    options: XnnpackOptions,
}

fn nhwc_dims(nchw: &[usize]) -> Vec<usize> {
    TO_NHWC.iter().map(|&d| nchw[d]).collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// int4 rows `[−8, 7]` as ExecuTorch stores them: `value + 8` nibbles, even columns in the low
/// nibble, each row padded to whole bytes (with a zero, nibble 8).
fn pack_int4(rows: &[Vec<i8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in rows {
        for pair in r.chunks(2) {
            let lo = (pair[0] + 8) as u8 & 15;
            let hi = pair.get(1).map_or(8, |&v| (v + 8) as u8 & 15);
            out.push(lo | hi << 4);
        }
    }
    out
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `src` of shape `dims` with its axes permuted (`out` dim i = `src` dim `perm[i]`).
fn permuted(src: &[f32], dims: &[usize], perm: &[usize]) -> Vec<f32> {
    let rank = dims.len();
    let mut strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let mut out = Vec::with_capacity(src.len());
    let mut index = vec![0usize; rank];
    for _ in 0..src.len() {
        let at: usize = (0..rank).map(|i| index[i] * strides[perm[i]]).sum();
        out.push(src[at]);
        for i in (0..rank).rev() {
            index[i] += 1;
            if index[i] < out_dims[i] {
                break;
            }
            index[i] = 0;
        }
    }
    out
}

/// NHWC and NCHW hold the same bytes when the spatial size or the channel count is 1.
fn same_memory_order(nchw: &[usize]) -> bool {
    nchw.len() == 4 && (nchw[2] * nchw[3] == 1 || nchw[1] == 1)
}

impl Ctx<'_> {
    fn value(&mut self, dims: Vec<usize>) -> u32 {
        self.x.values.push(XnnValue {
            datatype: XnnDatatype::Fp32,
            dims,
            constant: None,
            external_id: None,
            flags: 0,
            dq_datatype: None,
            quant: Quant::None,
        });
        self.x.values.len() as u32 - 1
    }

    /// A static value whose bytes go to the program's named data under their sha256.
    fn constant(&mut self, dims: Vec<usize>, data: Vec<f32>) -> u32 {
        let index = self.constant_entry(f32_bytes(&data));
        let id = self.value(dims);
        self.x.values[id as usize].constant = Some(index);
        id
    }

    /// The constant-data entry holding `bytes` (stored once per distinct content).
    fn constant_entry(&mut self, bytes: Vec<u8>) -> u32 {
        let key: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        let index = match self.constant_index.get(&key) {
            Some(&i) => i,
            None => {
                self.x.constants.push(ConstantRef { offset: u64::MAX, size: bytes.len() as u64, named_key: Some(key.clone()), inline: None });
                let i = self.x.constants.len() as u32 - 1;
                self.constant_index.insert(key.clone(), i);
                self.named.push((key, ConstData::owned(bytes)));
                i
            }
        };
        index
    }

    /// `[oc, ic]` float weights as a quantized constant for a dynamically quantized
    /// FullyConnected (symmetric: int8 in [−127, 127], int4 in [−8, 7]).
    fn quantized_filter(&mut self, weight: &[f32], oc: usize, ic: usize) -> Result<u32, String> {
        let rows = weight.chunks_exact(ic);
        let amax = |v: &[f32]| v.iter().fold(0.0f32, |a, x| a.max(x.abs()));
        // torch's symmetric observers floor the scale at float32 eps.
        let scale_of = |amax: f32, qmax: f32| (amax / qmax).max(f32::EPSILON);
        let round = |x: f32, lo: f32, hi: f32| x.round_ties_even().clamp(lo, hi) as i8;
        let (datatype, bytes, quant) = match self.options.linear {
            LinearMode::Fp32 => unreachable!("called for quantized modes only"),
            LinearMode::DynamicInt8 => {
                let scales: Vec<f32> = rows.clone().map(|r| scale_of(amax(r), 127.0)).collect();
                let q: Vec<u8> = rows.zip(&scales).flat_map(|(r, &s)| r.iter().map(move |&w| round(w / s, -127.0, 127.0) as u8)).collect();
                (XnnDatatype::QcInt8, q, Quant::PerChannel { scales: Scales::Inline(scales), channel_dim: 0 })
            }
            LinearMode::DynamicInt4 { group: 0 } => {
                let scales: Vec<f32> = rows.clone().map(|r| scale_of(amax(r), 7.0)).collect();
                let q: Vec<Vec<i8>> = rows.zip(&scales).map(|(r, &s)| r.iter().map(|&w| round(w / s, -8.0, 7.0)).collect()).collect();
                (XnnDatatype::QcInt4, pack_int4(&q), Quant::PerChannel { scales: Scales::Inline(scales), channel_dim: 0 })
            }
            LinearMode::DynamicInt4 { group } => {
                if ic % group != 0 {
                    return Err(format!("{ic} input features are not a multiple of the 8da4w group size {group}"));
                }
                // Scales are stored as bf16 (what XNNPACK's blockwise kernels take); quantize with
                // the rounded scale so the stored pair is consistent.
                let mut scales_bf16 = Vec::new();
                let mut q = Vec::new();
                for r in rows {
                    let mut row = Vec::with_capacity(ic);
                    for block in r.chunks_exact(group) {
                        let h = half::bf16::from_f32(scale_of(amax(block), 7.0)).to_bits();
                        scales_bf16.push(h);
                        let s = f32::from_bits((h as u32) << 16);
                        row.extend(block.iter().map(|&w| round(w / s, -8.0, 7.0)));
                    }
                    q.push(row);
                }
                let count = scales_bf16.len() as u32;
                let index = self.constant_entry(scales_bf16.iter().flat_map(|h| h.to_le_bytes()).collect());
                (XnnDatatype::QbInt4, pack_int4(&q), Quant::PerChannelGroup { scales: Scales::Buffer { index, count }, channel_dim: 0, group_size: group as i32 })
            }
        };
        let index = self.constant_entry(bytes);
        let id = self.value(vec![oc, ic]);
        let v = &mut self.x.values[id as usize];
        v.datatype = datatype;
        v.quant = quant;
        v.constant = Some(index);
        Ok(id)
    }

    /// The qdint8 value `Convert` makes of `input` (per-token dynamic quantization).
    fn dynamic_quantize(&mut self, input: u32) -> u32 {
        let dims = self.x.values[input as usize].dims.clone();
        let q = self.value(dims);
        let v = &mut self.x.values[q as usize];
        v.datatype = XnnDatatype::QdInt8;
        v.quant = Quant::PerTokenDynamic { num_nonbatch_dims: 1 };
        self.emit(NodeKind::Convert, NodeParams::Unary { input, output: q, flags: 0 }, None);
        q
    }

    fn emit(&mut self, kind: NodeKind, params: NodeParams, output_min_max: Option<(f32, f32)>) {
        let debug_handle = self.x.nodes.len() as u32;
        self.x.nodes.push(XnnNode { kind, params, debug_handle, output_min_max });
    }

    fn transpose(&mut self, input: u32, perm: &[usize]) -> u32 {
        let dims = self.x.values[input as usize].dims.clone();
        let output = self.value(perm.iter().map(|&p| dims[p]).collect());
        self.emit(NodeKind::StaticTranspose, NodeParams::Transpose { perm: perm.to_vec(), input, output }, None);
        output
    }

    fn reshape(&mut self, input: u32, dims: Vec<usize>) -> u32 {
        let output = self.value(dims.clone());
        self.emit(NodeKind::StaticReshape, NodeParams::Reshape { new_shape: dims, input, output }, None);
        output
    }

    fn const_f32(&self, v: ValueId) -> Result<Vec<f32>, String> {
        let data = self.g.constant(v).ok_or_else(|| format!("{} is not a constant", self.g.values[v].name))?;
        if self.g.meta(v).dtype != ScalarType::Float {
            return Err(format!("constant {} is {:?}, not float32", self.g.values[v].name, self.g.meta(v).dtype));
        }
        Ok(f32s(&data.bytes()))
    }

    /// The payload value holding graph value `v`: computed in the run, a constant, or a new
    /// delegate input (NCHW outside, transposed to NHWC when 4-D).
    fn read(&mut self, v: ValueId) -> Result<u32, String> {
        if let Some(&id) = self.stored.get(&v) {
            return Ok(id);
        }
        let sizes = fixed_sizes(self.g, v)?;
        let id = match &self.g.values[v].origin {
            Origin::Const(_) => {
                let data = self.const_f32(v)?;
                match sizes.len() {
                    0 => self.constant(vec![1], data),
                    4 => {
                        let nhwc = permuted(&data, &sizes, &TO_NHWC);
                        self.constant(nhwc_dims(&sizes), nhwc)
                    }
                    _ => self.constant(sizes, data),
                }
            }
            Origin::Input(_) | Origin::Computed => {
                let external = self.value(sizes.clone());
                let value = &mut self.x.values[external as usize];
                value.external_id = Some(self.inputs.len() as u32);
                value.flags = EXTERNAL_INPUT;
                self.inputs.push(v);
                self.x.input_ids.push(external);
                self.as_nchw.insert(v, external);
                if sizes.len() == 4 {
                    self.transpose(external, &TO_NHWC)
                } else {
                    external
                }
            }
            Origin::State(_) | Origin::SymInt => return Err(format!("{} is mutable state or a run-time scalar", self.g.values[v].name)),
        };
        self.stored.insert(v, id);
        Ok(id)
    }

    /// Graph value `v` in its NCHW (logical) order.
    fn read_nchw(&mut self, v: ValueId) -> Result<u32, String> {
        if let Some(&id) = self.as_nchw.get(&v) {
            return Ok(id);
        }
        let stored = self.read(v)?;
        let sizes = fixed_sizes(self.g, v)?;
        let id = if sizes.len() != 4 {
            stored
        } else if same_memory_order(&sizes) {
            self.reshape(stored, sizes)
        } else {
            self.transpose(stored, &TO_NCHW)
        };
        self.as_nchw.insert(v, id);
        Ok(id)
    }

    /// Records `id` (NCHW order) as graph value `v`, converted to NHWC when 4-D.
    fn store_nchw(&mut self, v: ValueId, id: u32) -> Result<(), String> {
        let sizes = fixed_sizes(self.g, v)?;
        let stored = if sizes.len() != 4 {
            id
        } else {
            self.as_nchw.insert(v, id);
            if same_memory_order(&sizes) {
                self.reshape(id, nhwc_dims(&sizes))
            } else {
                self.transpose(id, &TO_NHWC)
            }
        };
        self.stored.insert(v, stored);
        Ok(())
    }

    /// The payload dims of graph value `v` (NHWC when 4-D).
    fn stored_dims(&self, v: ValueId) -> Result<Vec<usize>, String> {
        let sizes = fixed_sizes(self.g, v)?;
        Ok(if sizes.len() == 4 { nhwc_dims(&sizes) } else { sizes })
    }

    fn lower_node(&mut self, n: &Node) -> Result<(), String> {
        let out = n.outputs[0];
        match parse(self.g, n)? {
            Parsed::Conv { x, w, b, stride, padding, dilation, groups } => {
                let input = self.read(x)?;
                let in_channels = fixed_sizes(self.g, x)?[1];
                let wdims = fixed_sizes(self.g, w)?;
                let (oc, icg, kh, kw) = (wdims[0], wdims[1], wdims[2], wdims[3]);
                let g = groups as usize;
                if in_channels != icg * g || oc % g != 0 {
                    return Err(format!("weight {wdims:?} does not fit {in_channels} input channels in {g} groups"));
                }
                let weight = self.const_f32(w)?;
                let depthwise = g > 1 && icg == 1;
                let (kind, filter) = if depthwise {
                    // [OC, 1, KH, KW] → [1, KH, KW, OC]
                    (NodeKind::DepthwiseConv2d, self.constant(vec![1, kh, kw, oc], permuted(&weight, &wdims, &[1, 2, 3, 0])))
                } else {
                    // [OC, IC/g, KH, KW] → [OC, KH, KW, IC/g]
                    (NodeKind::Conv2d, self.constant(vec![oc, kh, kw, icg], permuted(&weight, &wdims, &[0, 2, 3, 1])))
                };
                let bias = match b {
                    Some(b) => {
                        let data = self.const_f32(b)?;
                        if data.len() != oc {
                            return Err(format!("bias of {} elements for {oc} output channels", data.len()));
                        }
                        Some(self.constant(vec![oc], data))
                    }
                    None => None,
                };
                let output = self.value(self.stored_dims(out)?);
                let params = ConvParams {
                    padding_top: padding[0],
                    padding_right: padding[1],
                    padding_bottom: padding[0],
                    padding_left: padding[1],
                    kernel_height: kh as u32,
                    kernel_width: kw as u32,
                    subsampling_height: stride[0],
                    subsampling_width: stride[1],
                    dilation_height: dilation[0],
                    dilation_width: dilation[1],
                    group_input_channels: icg as u32,
                    group_output_channels: (oc / g) as u32,
                    groups,
                    adjustment_height: 0,
                    adjustment_width: 0,
                    input,
                    filter,
                    bias,
                    output,
                    flags: 0,
                };
                self.emit(kind, NodeParams::Conv(params), None);
                self.stored.insert(out, output);
            }
            Parsed::Binary { a, b, kind } => {
                let input1 = self.read(a)?;
                let input2 = match b {
                    Operand::Tensor(v) => self.read(v)?,
                    Operand::Number(k) => self.constant(vec![1], vec![k]),
                };
                let output = self.value(self.stored_dims(out)?);
                self.emit(kind, NodeParams::Binary { input1, input2, output, flags: 0 }, None);
                self.stored.insert(out, output);
            }
            Parsed::Clamp { x, min, max } => {
                let input = self.read(x)?;
                let output = self.value(self.stored_dims(out)?);
                self.emit(NodeKind::Clamp, NodeParams::Unary { input, output, flags: 0 }, Some((min, max)));
                self.stored.insert(out, output);
            }
            Parsed::Unary { x, kind } => {
                let input = self.read(x)?;
                let output = self.value(self.stored_dims(out)?);
                self.emit(kind, NodeParams::Unary { input, output, flags: 0 }, None);
                self.stored.insert(out, output);
            }
            Parsed::GlobalMean { x, keepdim } => {
                let input = self.read(x)?;
                let s = fixed_sizes(self.g, x)?;
                let pooled = self.value(vec![s[0], 1, 1, s[1]]);
                self.emit(NodeKind::GlobalAvgPooling2d, NodeParams::Unary { input, output: pooled, flags: KEEP_DIMS }, None);
                if keepdim {
                    self.stored.insert(out, pooled);
                } else {
                    let flat = self.reshape(pooled, fixed_sizes(self.g, out)?);
                    self.stored.insert(out, flat);
                }
            }
            Parsed::Linear { x, w, b, w_is_input_major } => {
                let input = self.read(x)?;
                let wdims = fixed_sizes(self.g, w)?;
                let mut weight = self.const_f32(w)?;
                let (oc, ic) = if w_is_input_major {
                    weight = permuted(&weight, &wdims, &[1, 0]);
                    (wdims[1], wdims[0])
                } else {
                    (wdims[0], wdims[1])
                };
                if fixed_sizes(self.g, x)?.last() != Some(&ic) {
                    return Err(format!("input {:?} does not end in the weight's {ic} input features", fixed_sizes(self.g, x)?));
                }
                let (input, filter) = if self.options.linear == LinearMode::Fp32 {
                    (input, self.constant(vec![oc, ic], weight))
                } else {
                    (self.dynamic_quantize(input), self.quantized_filter(&weight, oc, ic)?)
                };
                let bias = match b {
                    Some(b) => {
                        let data = self.const_f32(b)?;
                        if data.len() != oc {
                            return Err(format!("bias of {} elements for {oc} output features", data.len()));
                        }
                        Some(self.constant(vec![oc], data))
                    }
                    None => None,
                };
                let output = self.value(fixed_sizes(self.g, out)?);
                self.emit(NodeKind::FullyConnected, NodeParams::FullyConnected { input, filter, bias, output, flags: 0 }, None);
                self.stored.insert(out, output);
            }
            Parsed::Reshape { x } => {
                let input = self.read_nchw(x)?;
                let output = self.reshape(input, fixed_sizes(self.g, out)?);
                self.store_nchw(out, output)?;
            }
            Parsed::Permute { x, perm } => {
                let input = self.read_nchw(x)?;
                let output = self.transpose(input, &perm);
                self.store_nchw(out, output)?;
            }
            Parsed::Alias { x } => {
                let id = self.read(x)?;
                self.stored.insert(out, id);
                if let Some(&nchw) = self.as_nchw.get(&x) {
                    self.as_nchw.insert(out, nchw);
                }
            }
        }
        Ok(())
    }

    /// Makes graph value `v` a delegate output: NCHW, a value of its own, flagged external.
    fn output(&mut self, v: ValueId) -> Result<(), String> {
        let stored = *self.stored.get(&v).ok_or_else(|| format!("{} is used outside the run but has no payload value", self.g.values[v].name))?;
        let sizes = fixed_sizes(self.g, v)?;
        let reusable = {
            let value = &self.x.values[stored as usize];
            value.constant.is_none() && value.flags == 0
        };
        let external = if sizes.len() == 4 {
            self.transpose(stored, &TO_NCHW)
        } else if reusable {
            stored
        } else {
            // An input, constant or another output passed through: XNNPACK needs a value of its own.
            let copy = self.value(sizes);
            self.emit(NodeKind::Copy, NodeParams::Unary { input: stored, output: copy, flags: 0 }, None);
            copy
        };
        let external_id = (self.x.input_ids.len() + self.x.output_ids.len()) as u32;
        let value = &mut self.x.values[external as usize];
        value.external_id = Some(external_id);
        value.flags = EXTERNAL_OUTPUT;
        self.x.output_ids.push(external);
        Ok(())
    }
}

/// Folds each Clamp into the node producing its input (`output_min_max`), as ExecuTorch does
/// for conv, linear and add, when nothing else reads the unclamped value.
fn fuse_clamps(x: &mut XnnGraph) {
    let mut uses = vec![0usize; x.values.len()];
    for n in &x.nodes {
        for i in n.params.inputs() {
            uses[i as usize] += 1;
        }
    }
    for &o in &x.output_ids {
        uses[o as usize] += 1;
    }
    let mut k = 0;
    while k < x.nodes.len() {
        let (NodeKind::Clamp, NodeParams::Unary { input, output, .. }, Some(range)) = (x.nodes[k].kind, x.nodes[k].params.clone(), x.nodes[k].output_min_max) else {
            k += 1;
            continue;
        };
        let producer = x.nodes[..k].iter().position(|p| p.params.outputs() == [input]);
        let fusable = producer.filter(|&p| {
            let pn = &x.nodes[p];
            matches!(pn.kind, NodeKind::Conv2d | NodeKind::DepthwiseConv2d | NodeKind::FullyConnected | NodeKind::Add)
                && pn.output_min_max.is_none()
                && uses[input as usize] == 1
                && x.values[input as usize].flags == 0
        });
        match fusable {
            Some(p) => {
                let pn = &mut x.nodes[p];
                match &mut pn.params {
                    NodeParams::Conv(c) => c.output = output,
                    NodeParams::FullyConnected { output: o, .. } | NodeParams::Binary { output: o, .. } => *o = output,
                    _ => {}
                }
                pn.output_min_max = Some(range);
                x.nodes.remove(k);
            }
            None => k += 1,
        }
    }
}

/// Drops values no node or external list names and renumbers the rest (ids stay `0..n`).
fn drop_unused_values(x: &mut XnnGraph) {
    let mut used = vec![false; x.values.len()];
    for n in &x.nodes {
        for i in n.params.inputs().into_iter().chain(n.params.outputs()) {
            used[i as usize] = true;
        }
    }
    for &i in x.input_ids.iter().chain(&x.output_ids) {
        used[i as usize] = true;
    }
    let mut new_id = vec![u32::MAX; x.values.len()];
    let mut kept = Vec::new();
    for (i, v) in std::mem::take(&mut x.values).into_iter().enumerate() {
        if used[i] {
            new_id[i] = kept.len() as u32;
            kept.push(v);
        }
    }
    x.values = kept;
    let map = |id: &mut u32| *id = new_id[*id as usize];
    for n in &mut x.nodes {
        use NodeParams::*;
        match &mut n.params {
            Unary { input, output, .. } | Transpose { input, output, .. } | Reshape { input, output, .. } => {
                map(input);
                map(output);
            }
            Binary { input1, input2, output, .. } => {
                map(input1);
                map(input2);
                map(output);
            }
            FullyConnected { input, filter, bias, output, .. } => {
                map(input);
                map(filter);
                if let Some(b) = bias {
                    map(b);
                }
                map(output);
            }
            Conv(c) => {
                map(&mut c.input);
                map(&mut c.filter);
                if let Some(b) = &mut c.bias {
                    map(b);
                }
                map(&mut c.output);
            }
            // The lowering emits no other node shapes.
            _ => {}
        }
    }
    x.input_ids.iter_mut().for_each(map);
    x.output_ids.iter_mut().for_each(map);
}

/// Lowers the run `part` of `g` to a payload.
pub fn lower(g: &Graph, part: &Partition, options: &XnnpackOptions) -> Result<Lowered, String> {
    let empty = XnnGraph {
        version: "0".to_string(),
        values: Vec::new(),
        nodes: Vec::new(),
        num_externs: 0,
        input_ids: Vec::new(),
        output_ids: Vec::new(),
        // Entry 0 is reserved: `constant_buffer_idx` 0 means "not a constant".
        constants: vec![ConstantRef { offset: 0, size: 0, named_key: None, inline: None }],
    };
    let mut cx = Ctx { g, x: empty, stored: HashMap::new(), as_nchw: HashMap::new(), inputs: Vec::new(), named: Vec::new(), constant_index: HashMap::new(), options: *options };
    for &i in &part.nodes {
        let n = &g.nodes[i];
        cx.lower_node(n).map_err(|e| format!("node {i} ({} → {}): {e}", n.op, n.outputs.first().map(|&o| g.values[o].name.as_str()).unwrap_or("?")))?;
    }
    let outputs = rbuild_export::delegation::partition_outputs(g, part);
    for &v in &outputs {
        cx.output(v).map_err(|e| format!("output {}: {e}", g.values[v].name))?;
    }
    let mut x = cx.x;
    x.num_externs = (x.input_ids.len() + x.output_ids.len()) as u32;
    fuse_clamps(&mut x);
    drop_unused_values(&mut x);
    let bytes = write_payload(&x, &[]);
    Ok(Lowered { bytes, graph: x, inputs: cx.inputs, outputs, named_data: cx.named })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permuted_moves_axes() {
        // [2, 3] transposed.
        let src = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(permuted(&src, &[2, 3], &[1, 0]), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        // NCHW [1, 2, 1, 2] → NHWC [1, 1, 2, 2]: element (c, w) moves to (w, c).
        assert_eq!(permuted(&src[..4], &[1, 2, 1, 2], &TO_NHWC), vec![0.0, 2.0, 1.0, 3.0]);
    }

    #[test]
    fn memory_order_matches_for_unit_spatial_or_channel() {
        assert!(same_memory_order(&[1, 1280, 1, 1]));
        assert!(same_memory_order(&[1, 1, 7, 7]));
        assert!(!same_memory_order(&[1, 2, 7, 7]));
    }
}
