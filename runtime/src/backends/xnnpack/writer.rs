//! The `XNNGraph` flatbuffer and the `XH00` payload, written from the owned types [`graph`]
//! decodes: what rbuild's exporter emits for `XnnpackBackend` delegates, in the layout
//! ExecuTorch's `XnnpackPartitioner` writes (so ExecuTorch's runtime loads it too).
//!
//! Values are written in id order with `id_out` = their index; a value without an external
//! id gets `0xFFFFFFFF` (what ExecuTorch's compiler expects of internal values). Scalars are
//! always written, defaults included. `decode_graph(encode_graph(g)) == g` for every graph the
//! decoder returns.
//!
//! [`graph`]: super::graph

use alloc::vec::Vec;

use crate::format::flatbuf::Builder;

use super::graph::{ConstantRef, NodeKind, NodeParams, PoolParams, Quant, Scales, XnnDatatype, XnnGraph, XnnNode, XnnValue};
use super::header::{MAGIC, MIN_HEADER_LEN};
use super::INVALID_VALUE_ID;

/// Where the flatbuffer starts in a payload (the header padded to 16 bytes).
const FLATBUFFER_OFFSET: usize = 32;

fn align16(n: usize) -> usize {
    n.div_ceil(16) * 16
}

/// XH00 header + flatbuffer + constant region (each region 16-aligned).
pub fn write_payload(g: &XnnGraph, constants: &[u8]) -> Vec<u8> {
    let fb = encode_graph(g);
    let constant_offset = align16(FLATBUFFER_OFFSET + fb.len());
    let mut out = Vec::with_capacity(constant_offset + constants.len());
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(MIN_HEADER_LEN as u16).to_le_bytes());
    out.extend_from_slice(&(FLATBUFFER_OFFSET as u32).to_le_bytes());
    out.extend_from_slice(&(fb.len() as u32).to_le_bytes());
    out.extend_from_slice(&(constant_offset as u32).to_le_bytes());
    out.extend_from_slice(&(constants.len() as u64).to_le_bytes());
    out.resize(FLATBUFFER_OFFSET, 0);
    out.extend_from_slice(&fb);
    out.resize(constant_offset, 0);
    out.extend_from_slice(constants);
    out
}

/// The `XNNGraph` flatbuffer (identifier `XN01`).
pub fn encode_graph(g: &XnnGraph) -> Vec<u8> {
    let mut b = Builder::new();
    let nodes: Vec<usize> = g.nodes.iter().map(|n| node(&mut b, n)).collect();
    let values: Vec<usize> = g.values.iter().enumerate().map(|(id, v)| value(&mut b, v, id as u32)).collect();
    // XN00 payloads keep their bytes inline (`constant_buffer`); the decoder reads those only
    // when `constant_data` is absent, so a graph writes one list or the other.
    let inline = g.constants.iter().any(|c| c.inline.is_some());
    let constant_list = if inline {
        let buffers: Vec<usize> = g.constants.iter().map(|c| inline_buffer(&mut b, c)).collect();
        b.create_offsets(&buffers)
    } else {
        let entries: Vec<usize> = g.constants.iter().map(|c| constant_entry(&mut b, c)).collect();
        b.create_offsets(&entries)
    };
    let node_list = b.create_offsets(&nodes);
    let value_list = b.create_offsets(&values);
    let inputs = u32_vector(&mut b, &g.input_ids);
    let outputs = u32_vector(&mut b, &g.output_ids);
    let version = b.create_string(&g.version);
    b.start_table();
    b.add_offset(0, version);
    b.add_offset(1, node_list);
    b.add_offset(2, value_list);
    b.add_scalar(3, &g.num_externs.to_le_bytes());
    b.add_offset(4, inputs);
    b.add_offset(5, outputs);
    b.add_offset(if inline { 6 } else { 8 }, constant_list);
    let root = b.end_table();
    b.finish(root, b"XN01")
}

fn u32_vector(b: &mut Builder, items: &[u32]) -> usize {
    let bytes: Vec<[u8; 4]> = items.iter().map(|v| v.to_le_bytes()).collect();
    let refs: Vec<&[u8]> = bytes.iter().map(|x| x.as_slice()).collect();
    b.create_scalars(&refs, 4)
}

fn usize_vector(b: &mut Builder, items: &[usize]) -> usize {
    let as_u32: Vec<u32> = items.iter().map(|&v| v as u32).collect();
    u32_vector(b, &as_u32)
}

fn f32_vector(b: &mut Builder, items: &[f32]) -> usize {
    let as_bits: Vec<u32> = items.iter().map(|v| v.to_bits()).collect();
    u32_vector(b, &as_bits)
}

/// `ConstantDataOffset`: a named entry has offset `u64::MAX` (ExecuTorch's marker for "in the
/// named data map"), as the partitioner writes it; the reserved entry 0 is all zeros.
fn constant_entry(b: &mut Builder, c: &ConstantRef) -> usize {
    let key = c.named_key.as_deref().map(|k| b.create_string(k));
    b.start_table();
    b.add_scalar(0, &c.offset.to_le_bytes());
    b.add_scalar(1, &c.size.to_le_bytes());
    if let Some(k) = key {
        b.add_offset(2, k);
    }
    b.end_table()
}

/// `Buffer { storage: [ubyte] }` of an XN00 graph.
fn inline_buffer(b: &mut Builder, c: &ConstantRef) -> usize {
    let bytes = c.inline.as_deref().unwrap_or(&[]);
    let storage = b.create_bytes(bytes);
    b.start_table();
    b.add_offset(0, storage);
    b.end_table()
}

fn datatype_code(d: XnnDatatype) -> i16 {
    use XnnDatatype::*;
    match d {
        Fp32 => 1,
        Fp16 => 2,
        QInt8 => 3,
        QUInt8 => 4,
        QInt32 => 5,
        QcInt8 => 6,
        QcInt32 => 7,
        QcInt4 => 8,
        QdInt8 => 9,
        QbInt4 => 10,
        QpInt8 => 11,
        Int32 => 12,
        Pfp32 => 13,
        Bf16 => 14,
    }
}

/// Inline scales (slot `inline_slot`) or a constant-buffer reference (index and count slots).
fn add_scales(b: &mut Builder, scales: &Scales, inline: Option<usize>, inline_slot: usize, buffer_slot: usize, count_slot: usize) {
    match (scales, inline) {
        (Scales::Inline(_), Some(v)) => b.add_offset(inline_slot, v),
        // Only per-channel-group quantization has a bf16 slot (3).
        (Scales::InlineBf16(_), Some(v)) => b.add_offset(3, v),
        (Scales::Buffer { index, count }, _) => {
            b.add_scalar(buffer_slot, &index.to_le_bytes());
            b.add_scalar(count_slot, &count.to_le_bytes());
        }
        _ => {}
    }
}

fn inline_scales(b: &mut Builder, scales: &Scales) -> Option<usize> {
    match scales {
        Scales::Inline(s) => Some(f32_vector(b, s)),
        Scales::InlineBf16(s) => {
            let bytes: Vec<[u8; 2]> = s.iter().map(|v| v.to_le_bytes()).collect();
            let refs: Vec<&[u8]> = bytes.iter().map(|x| x.as_slice()).collect();
            Some(b.create_scalars(&refs, 2))
        }
        Scales::Buffer { .. } => None,
    }
}

/// The quantization table and its union tag, or `None` for an unquantized value.
fn quant_params(b: &mut Builder, q: &Quant) -> Option<(u8, usize)> {
    match q {
        Quant::None => None,
        Quant::PerChannel { scales, channel_dim } => {
            // Per-channel quantization has no bf16 slot: bf16 scales widen exactly to f32.
            let widened;
            let scales = match scales {
                Scales::InlineBf16(h) => {
                    widened = Scales::Inline(h.iter().map(|&v| f32::from_bits((v as u32) << 16)).collect());
                    &widened
                }
                s => s,
            };
            let inline = inline_scales(b, scales);
            b.start_table();
            add_scales(b, scales, inline, 0, 2, 3);
            b.add_scalar(1, &channel_dim.to_le_bytes());
            Some((1, b.end_table()))
        }
        Quant::PerTensor { scale, zero_point } => {
            b.start_table();
            b.add_scalar(0, &scale.to_bits().to_le_bytes());
            b.add_scalar(1, &zero_point.to_le_bytes());
            Some((2, b.end_table()))
        }
        Quant::PerTokenDynamic { num_nonbatch_dims } => {
            b.start_table();
            b.add_scalar(0, &num_nonbatch_dims.to_le_bytes());
            Some((3, b.end_table()))
        }
        Quant::PerChannelGroup { scales, channel_dim, group_size } => {
            let inline = inline_scales(b, scales);
            b.start_table();
            add_scales(b, scales, inline, 0, 4, 5);
            b.add_scalar(1, &channel_dim.to_le_bytes());
            b.add_scalar(2, &group_size.to_le_bytes());
            Some((4, b.end_table()))
        }
    }
}

/// `XValue` holding an `XNNTensorValue` (tag 1) or an `XNNQuantizedTensorValue` (tag 2).
fn value(b: &mut Builder, v: &XnnValue, id: u32) -> usize {
    let dims = usize_vector(b, &v.dims);
    b.start_table();
    b.add_scalar(0, &datatype_code(v.datatype).to_le_bytes());
    b.add_scalar(1, &(v.dims.len() as u32).to_le_bytes());
    b.add_offset(2, dims);
    b.add_scalar(3, &v.constant.unwrap_or(0).to_le_bytes());
    b.add_scalar(4, &v.external_id.unwrap_or(INVALID_VALUE_ID).to_le_bytes());
    b.add_scalar(5, &v.flags.to_le_bytes());
    b.add_scalar(6, &id.to_le_bytes());
    if let Some(dq) = v.dq_datatype {
        b.add_scalar(7, &datatype_code(dq).to_le_bytes());
    }
    let tensor = b.end_table();
    let (tag, body) = match quant_params(b, &v.quant) {
        None => (1u8, tensor),
        Some((quant_tag, params)) => {
            b.start_table();
            b.add_offset(0, tensor);
            b.add_scalar(1, &[quant_tag]);
            b.add_offset(2, params);
            (2u8, b.end_table())
        }
    };
    b.start_table();
    b.add_scalar(0, &[tag]);
    b.add_offset(1, body);
    b.end_table()
}

/// Union tag of a node kind (its position in `XNodeUnion`, from 1).
fn node_tag(kind: NodeKind) -> u8 {
    // `NodeKind::from_tag` is the decoder's table; searching it keeps one source of truth.
    (1..=u8::MAX).find(|&t| NodeKind::from_tag(t) == Some(kind)).unwrap_or(0)
}

/// Writes u32 fields `slots[i] = values[i]`.
fn add_u32s(b: &mut Builder, fields: &[(usize, u32)]) {
    for &(slot, v) in fields {
        b.add_scalar(slot, &v.to_le_bytes());
    }
}

fn pool_fields(p: &PoolParams) -> [(usize, u32); 13] {
    [
        (0, p.padding_top),
        (1, p.padding_right),
        (2, p.padding_bottom),
        (3, p.padding_left),
        (4, p.pooling_height),
        (5, p.pooling_width),
        (6, p.stride_height),
        (7, p.stride_width),
        (8, p.dilation_height),
        (9, p.dilation_width),
        (10, p.input),
        (11, p.output),
        (12, p.flags),
    ]
}

/// The node's operation table (field slots as `read_node` reads them).
fn node_body(b: &mut Builder, params: &NodeParams) -> usize {
    use NodeParams::*;
    match params {
        Unary { input, output, flags } => {
            b.start_table();
            add_u32s(b, &[(0, *input), (1, *output), (2, *flags)]);
        }
        Binary { input1, input2, output, flags } => {
            b.start_table();
            add_u32s(b, &[(0, *input1), (1, *input2), (2, *output), (3, *flags)]);
        }
        FullyConnected { input, filter, bias, output, flags } => {
            b.start_table();
            add_u32s(b, &[(0, *input), (1, *filter), (2, bias.unwrap_or(INVALID_VALUE_ID)), (3, *output), (4, *flags)]);
        }
        Conv(c) => {
            b.start_table();
            add_u32s(
                b,
                &[
                    (0, c.padding_top),
                    (1, c.padding_right),
                    (2, c.padding_bottom),
                    (3, c.padding_left),
                    (4, c.kernel_height),
                    (5, c.kernel_width),
                    (6, c.subsampling_height),
                    (7, c.subsampling_width),
                    (8, c.dilation_height),
                    (9, c.dilation_width),
                    (10, c.group_input_channels),
                    (11, c.group_output_channels),
                    (12, c.groups),
                    (13, c.adjustment_height),
                    (14, c.adjustment_width),
                    (15, c.input),
                    (16, c.filter),
                    (17, c.bias.unwrap_or(INVALID_VALUE_ID)),
                    (18, c.output),
                    (19, c.flags),
                ],
            );
        }
        Pool(p) => {
            b.start_table();
            add_u32s(b, &pool_fields(p));
        }
        ArgMaxPool { pool: p, output_index } => {
            b.start_table();
            add_u32s(
                b,
                &[
                    (0, p.padding_top),
                    (1, p.padding_right),
                    (2, p.padding_bottom),
                    (3, p.padding_left),
                    (4, p.pooling_height),
                    (5, p.pooling_width),
                    (6, p.input),
                    (7, p.output),
                    (8, *output_index),
                    (9, p.flags),
                ],
            );
        }
        Transpose { perm, input, output } => {
            let perm_vec = usize_vector(b, perm);
            b.start_table();
            b.add_scalar(0, &(perm.len() as u32).to_le_bytes());
            b.add_offset(1, perm_vec);
            add_u32s(b, &[(2, *input), (3, *output), (4, 0)]);
        }
        Reshape { new_shape, input, output } => {
            let shape_vec = usize_vector(b, new_shape);
            b.start_table();
            b.add_scalar(0, &(new_shape.len() as u32).to_le_bytes());
            b.add_offset(1, shape_vec);
            add_u32s(b, &[(2, *input), (3, *output), (4, 0)]);
        }
        Slice { offsets, sizes, input, output } => {
            let offsets_vec = usize_vector(b, offsets);
            let sizes_vec = usize_vector(b, sizes);
            b.start_table();
            b.add_scalar(0, &(offsets.len() as u32).to_le_bytes());
            b.add_offset(1, offsets_vec);
            b.add_offset(2, sizes_vec);
            add_u32s(b, &[(3, *input), (4, *output), (5, 0)]);
        }
        ConstantPad { pre, post, value, input, output } => {
            let pre_vec = usize_vector(b, pre);
            let post_vec = usize_vector(b, post);
            b.start_table();
            b.add_offset(0, pre_vec);
            b.add_offset(1, post_vec);
            b.add_scalar(2, &value.to_bits().to_le_bytes());
            add_u32s(b, &[(3, *input), (4, *output), (5, 0)]);
        }
        ResizeBilinear { new_height, new_width, input, output, flags } => {
            b.start_table();
            add_u32s(b, &[(0, *new_height), (1, *new_width), (2, *input), (3, *output), (4, *flags)]);
        }
        Concat { axis, inputs, output } => {
            b.start_table();
            b.add_scalar(0, &axis.to_le_bytes());
            // input1..input4 in slots 1..4, input5 (added later to the schema) in slot 7.
            for (slot, id) in [1usize, 2, 3, 4, 7].into_iter().zip(inputs) {
                b.add_scalar(slot, &id.to_le_bytes());
            }
            add_u32s(b, &[(5, *output), (6, 0)]);
        }
        UnaryParam { param, input, output } => {
            b.start_table();
            b.add_scalar(0, &param.to_bits().to_le_bytes());
            add_u32s(b, &[(1, *input), (2, *output), (3, 0)]);
        }
        Sdpa { query, key, value, scale, mask, output } => {
            b.start_table();
            add_u32s(b, &[(0, *query), (1, *key), (2, *value), (3, *scale), (4, *mask), (5, *output), (6, 0)]);
        }
    }
    b.end_table()
}

/// `XNode`: the operation union, the debug handle and the fused output clamp.
fn node(b: &mut Builder, n: &XnnNode) -> usize {
    let body = node_body(b, &n.params);
    let min_max = n.output_min_max.map(|(lo, hi)| {
        b.start_table();
        b.add_scalar(0, &lo.to_bits().to_le_bytes());
        b.add_scalar(1, &hi.to_bits().to_le_bytes());
        b.end_table()
    });
    b.start_table();
    b.add_scalar(0, &[node_tag(n.kind)]);
    b.add_offset(1, body);
    b.add_scalar(2, &n.debug_handle.to_le_bytes());
    if let Some(mm) = min_max {
        b.add_offset(3, mm);
    }
    b.end_table()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::xnnpack::graph::ConvParams;
    use crate::backends::xnnpack::parse_payload;
    use alloc::string::ToString;
    use alloc::vec;

    fn fp32(dims: Vec<usize>, constant: Option<u32>, external_id: Option<u32>, flags: u32) -> XnnValue {
        XnnValue { datatype: XnnDatatype::Fp32, dims, constant, external_id, flags, dq_datatype: None, quant: Quant::None }
    }

    #[test]
    fn a_small_graph_round_trips_through_the_payload() {
        let g = XnnGraph {
            version: "0".to_string(),
            values: vec![
                fp32(vec![1, 4, 4, 2], None, Some(0), 1),
                fp32(vec![3, 1, 1, 2], Some(1), None, 0),
                fp32(vec![3], None, None, 0),
                fp32(vec![1, 4, 4, 3], None, Some(1), 2),
            ],
            nodes: vec![XnnNode {
                kind: NodeKind::Conv2d,
                params: NodeParams::Conv(ConvParams {
                    padding_top: 0,
                    padding_right: 0,
                    padding_bottom: 0,
                    padding_left: 0,
                    kernel_height: 1,
                    kernel_width: 1,
                    subsampling_height: 1,
                    subsampling_width: 1,
                    dilation_height: 1,
                    dilation_width: 1,
                    group_input_channels: 2,
                    group_output_channels: 3,
                    groups: 1,
                    adjustment_height: 0,
                    adjustment_width: 0,
                    input: 0,
                    filter: 1,
                    bias: None,
                    output: 3,
                    flags: 0,
                }),
                debug_handle: 7,
                output_min_max: Some((0.0, 6.0)),
            }],
            num_externs: 2,
            input_ids: vec![0],
            output_ids: vec![3],
            constants: vec![
                ConstantRef { offset: 0, size: 0, named_key: None, inline: None },
                ConstantRef { offset: u64::MAX, size: 24, named_key: Some("abc".to_string()), inline: None },
            ],
        };
        let blob = write_payload(&g, &[1, 2, 3]);
        let p = parse_payload(&blob).unwrap();
        assert_eq!(p.graph, g);
        assert_eq!(p.constants, &[1, 2, 3]);
    }
}
