//! Writes an [`Int8Graph`] as a TFLite flatbuffer (schema v3, identifier `TFL3`), the network
//! format Vela reads best.
//!
//! Field slots and enum values follow TensorFlow Lite's `schema.fbs` (as bundled in Vela's
//! generated `ethosu/vela/tflite/*.py` readers): Model{version 0, operator_codes 1, subgraphs 2,
//! description 3, buffers 4}, SubGraph{tensors 0, inputs 1, outputs 2, operators 3, name 4},
//! Tensor{shape 0, type 1, buffer 2, name 3, quantization 4}, QuantizationParameters{scale 2,
//! zero_point 3, quantized_dimension 6}, Operator{opcode_index 0, inputs 1, outputs 2,
//! builtin_options_type 3, builtin_options 4}, OperatorCode{deprecated_builtin_code 0, version 2,
//! builtin_code 3}, Buffer{data 0}. Buffer 0 is the empty sentinel activations point at.

use rbuild_runtime::format::flatbuf::Builder;

use crate::graph::{Activation, DType, GraphError, Int8Graph, OpKind, Padding};

/// BuiltinOperator codes.
pub mod builtin {
    pub const ADD: i32 = 0;
    pub const AVERAGE_POOL_2D: i32 = 1;
    pub const CONV_2D: i32 = 3;
    pub const DEPTHWISE_CONV_2D: i32 = 4;
    pub const FULLY_CONNECTED: i32 = 9;
    pub const RESHAPE: i32 = 22;
    pub const PAD: i32 = 34;
    pub const MEAN: i32 = 40;
}

/// BuiltinOptions union tags.
mod options {
    pub const CONV2D: u8 = 1;
    pub const DEPTHWISE_CONV2D: u8 = 2;
    pub const POOL2D: u8 = 5;
    pub const FULLY_CONNECTED: u8 = 8;
    pub const ADD: u8 = 11;
    pub const RESHAPE: u8 = 17;
    pub const PAD: u8 = 22;
    pub const REDUCER: u8 = 27;
}

const TYPE_INT32: u8 = 2;
const TYPE_INT8: u8 = 9;

fn code_of(k: &OpKind) -> i32 {
    match k {
        OpKind::Conv2d { .. } => builtin::CONV_2D,
        OpKind::DepthwiseConv2d { .. } => builtin::DEPTHWISE_CONV_2D,
        OpKind::Add { .. } => builtin::ADD,
        OpKind::FullyConnected { .. } => builtin::FULLY_CONNECTED,
        OpKind::AveragePool2d { .. } => builtin::AVERAGE_POOL_2D,
        OpKind::Mean { .. } => builtin::MEAN,
        OpKind::Reshape => builtin::RESHAPE,
        OpKind::Pad => builtin::PAD,
    }
}

fn pad(p: Padding) -> [u8; 1] {
    [match p {
        Padding::Same => 0,
        Padding::Valid => 1,
    }]
}

fn act(a: Activation) -> [u8; 1] {
    [match a {
        Activation::None => 0,
        Activation::Relu => 1,
        Activation::Relu6 => 3,
    }]
}

fn i32s(b: &mut Builder, v: &[i32]) -> usize {
    let items: Vec<[u8; 4]> = v.iter().map(|x| x.to_le_bytes()).collect();
    let refs: Vec<&[u8]> = items.iter().map(|x| &x[..]).collect();
    b.create_scalars(&refs, 4)
}

/// Serializes the graph (validated first).
pub fn write(g: &Int8Graph) -> Result<Vec<u8>, GraphError> {
    g.validate()?;
    let mut b = Builder::new();

    // Buffers: 0 = empty sentinel, then one per constant tensor.
    let mut buffers = Vec::new();
    b.start_table();
    buffers.push(b.end_table());
    let mut buffer_of = vec![0u32; g.tensors.len()];
    for (i, t) in g.tensors.iter().enumerate() {
        if let Some(d) = &t.data {
            let data = b.create_bytes(d);
            b.start_table();
            b.add_offset(0, data);
            buffers.push(b.end_table());
            buffer_of[i] = (buffers.len() - 1) as u32;
        }
    }

    // Tensors.
    let mut tensors = Vec::new();
    for (i, t) in g.tensors.iter().enumerate() {
        let shape = i32s(&mut b, &t.shape);
        let name = b.create_string(&t.name);
        let quant = if t.quant.scale.is_empty() {
            None
        } else {
            let sc: Vec<[u8; 4]> = t.quant.scale.iter().map(|x| x.to_le_bytes()).collect();
            let sc: Vec<&[u8]> = sc.iter().map(|x| &x[..]).collect();
            let scale = b.create_scalars(&sc, 4);
            let zp: Vec<[u8; 8]> = t.quant.zero_point.iter().map(|x| x.to_le_bytes()).collect();
            let zp: Vec<&[u8]> = zp.iter().map(|x| &x[..]).collect();
            let zero = b.create_scalars(&zp, 8);
            b.start_table();
            b.add_offset(2, scale);
            b.add_offset(3, zero);
            b.add_scalar(6, &t.quant.axis.to_le_bytes());
            Some(b.end_table())
        };
        b.start_table();
        b.add_offset(0, shape);
        b.add_scalar(
            1,
            &[match t.dtype {
                DType::I8 => TYPE_INT8,
                DType::I32 => TYPE_INT32,
            }],
        );
        b.add_scalar(2, &buffer_of[i].to_le_bytes());
        b.add_offset(3, name);
        if let Some(q) = quant {
            b.add_offset(4, q);
        }
        tensors.push(b.end_table());
    }

    // Operator codes (deduplicated, in first-use order).
    let mut codes: Vec<i32> = Vec::new();
    for op in &g.ops {
        let c = code_of(&op.kind);
        if !codes.contains(&c) {
            codes.push(c);
        }
    }
    let mut code_tables = Vec::new();
    for &c in &codes {
        b.start_table();
        b.add_scalar(0, &[c as u8]);
        b.add_scalar(2, &1i32.to_le_bytes());
        b.add_scalar(3, &c.to_le_bytes());
        code_tables.push(b.end_table());
    }

    // Operators.
    let mut ops = Vec::new();
    for op in &g.ops {
        let (tag, opts) = match &op.kind {
            OpKind::Conv2d { stride, dilation, padding, act: a } => {
                b.start_table();
                b.add_scalar(0, &pad(*padding));
                b.add_scalar(1, &stride[1].to_le_bytes());
                b.add_scalar(2, &stride[0].to_le_bytes());
                b.add_scalar(3, &act(*a));
                b.add_scalar(4, &dilation[1].to_le_bytes());
                b.add_scalar(5, &dilation[0].to_le_bytes());
                (options::CONV2D, b.end_table())
            }
            OpKind::DepthwiseConv2d { stride, dilation, padding, depth_multiplier, act: a } => {
                b.start_table();
                b.add_scalar(0, &pad(*padding));
                b.add_scalar(1, &stride[1].to_le_bytes());
                b.add_scalar(2, &stride[0].to_le_bytes());
                b.add_scalar(3, &depth_multiplier.to_le_bytes());
                b.add_scalar(4, &act(*a));
                b.add_scalar(5, &dilation[1].to_le_bytes());
                b.add_scalar(6, &dilation[0].to_le_bytes());
                (options::DEPTHWISE_CONV2D, b.end_table())
            }
            OpKind::Add { act: a } => {
                b.start_table();
                b.add_scalar(0, &act(*a));
                (options::ADD, b.end_table())
            }
            OpKind::FullyConnected { act: a } => {
                b.start_table();
                b.add_scalar(0, &act(*a));
                (options::FULLY_CONNECTED, b.end_table())
            }
            OpKind::AveragePool2d { filter, stride, padding, act: a } => {
                b.start_table();
                b.add_scalar(0, &pad(*padding));
                b.add_scalar(1, &stride[1].to_le_bytes());
                b.add_scalar(2, &stride[0].to_le_bytes());
                b.add_scalar(3, &filter[1].to_le_bytes());
                b.add_scalar(4, &filter[0].to_le_bytes());
                b.add_scalar(5, &act(*a));
                (options::POOL2D, b.end_table())
            }
            OpKind::Mean { keep_dims } => {
                b.start_table();
                b.add_scalar(0, &[*keep_dims as u8]);
                (options::REDUCER, b.end_table())
            }
            OpKind::Reshape => {
                let shape = g.tensors[op.outputs[0]].shape.clone();
                let ns = i32s(&mut b, &shape);
                b.start_table();
                b.add_offset(0, ns);
                (options::RESHAPE, b.end_table())
            }
            OpKind::Pad => {
                b.start_table();
                (options::PAD, b.end_table())
            }
        };
        let ins: Vec<i32> = op.inputs.iter().map(|&i| i as i32).collect();
        let outs: Vec<i32> = op.outputs.iter().map(|&i| i as i32).collect();
        let ins = i32s(&mut b, &ins);
        let outs = i32s(&mut b, &outs);
        let idx = codes.iter().position(|&c| c == code_of(&op.kind)).unwrap_or(0) as u32;
        b.start_table();
        b.add_scalar(0, &idx.to_le_bytes());
        b.add_offset(1, ins);
        b.add_offset(2, outs);
        b.add_scalar(3, &[tag]);
        b.add_offset(4, opts);
        ops.push(b.end_table());
    }

    let tensors_v = b.create_offsets(&tensors);
    let gin: Vec<i32> = g.inputs.iter().map(|&i| i as i32).collect();
    let gout: Vec<i32> = g.outputs.iter().map(|&i| i as i32).collect();
    let gin = i32s(&mut b, &gin);
    let gout = i32s(&mut b, &gout);
    let ops_v = b.create_offsets(&ops);
    let sg_name = b.create_string("main");
    b.start_table();
    b.add_offset(0, tensors_v);
    b.add_offset(1, gin);
    b.add_offset(2, gout);
    b.add_offset(3, ops_v);
    b.add_offset(4, sg_name);
    let sg = b.end_table();

    let codes_v = b.create_offsets(&code_tables);
    let sgs = b.create_offsets(&[sg]);
    let desc = b.create_string("rbuild-ethosu");
    let bufs = b.create_offsets(&buffers);
    b.start_table();
    b.add_scalar(0, &3u32.to_le_bytes());
    b.add_offset(1, codes_v);
    b.add_offset(2, sgs);
    b.add_offset(3, desc);
    b.add_offset(4, bufs);
    let model = b.end_table();
    Ok(b.finish(model, b"TFL3"))
}
