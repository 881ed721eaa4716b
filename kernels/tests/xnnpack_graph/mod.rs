//! Building XNNPACK payloads by hand for the backend tests (`xnnpack_payloads`,
//! `xnnpack_support`): a graph under construction ([`G`]), quantization and byte helpers, and
//! deterministic pseudo-random numbers. Each test crate uses a part of it.
#![allow(dead_code)]

use rbuild_kernels::xnnpack::{compile_payload, Plan, DEFAULT_ACTIVATION_LIMIT};
use rbuild_runtime::backends::xnnpack::graph::ConvParams;
use rbuild_runtime::backends::xnnpack::{write_payload, ConstantRef, NodeKind, NodeParams, Quant, Scales, XnnDatatype as D, XnnGraph, XnnNode, XnnValue};

/// A graph under construction: values, nodes, constant bytes.
pub struct G {
    pub values: Vec<XnnValue>,
    pub nodes: Vec<XnnNode>,
    pub region: Vec<u8>,
    pub refs: Vec<ConstantRef>,
}

impl G {
    pub fn new() -> G {
        G { values: Vec::new(), nodes: Vec::new(), region: Vec::new(), refs: vec![ConstantRef { offset: 0, size: 0, named_key: None, inline: None }] }
    }
    pub fn value(&mut self, datatype: D, dims: &[usize], quant: Quant, flags: u32, constant: Option<u32>) -> u32 {
        self.values.push(XnnValue { datatype, dims: dims.to_vec(), constant, external_id: None, flags, dq_datatype: None, quant });
        (self.values.len() - 1) as u32
    }
    pub fn input(&mut self, datatype: D, dims: &[usize], quant: Quant) -> u32 {
        self.value(datatype, dims, quant, 1, None)
    }
    pub fn output(&mut self, datatype: D, dims: &[usize], quant: Quant) -> u32 {
        self.value(datatype, dims, quant, 2, None)
    }
    pub fn internal(&mut self, datatype: D, dims: &[usize], quant: Quant) -> u32 {
        self.value(datatype, dims, quant, 0, None)
    }
    pub fn constant(&mut self, datatype: D, dims: &[usize], quant: Quant, bytes: &[u8]) -> u32 {
        let offset = self.region.len() as u64;
        self.region.extend_from_slice(bytes);
        self.region.resize(self.region.len().div_ceil(16) * 16, 0);
        self.refs.push(ConstantRef { offset, size: bytes.len() as u64, named_key: None, inline: None });
        let c = (self.refs.len() - 1) as u32;
        self.value(datatype, dims, quant, 0, Some(c))
    }
    pub fn node(&mut self, kind: NodeKind, params: NodeParams, range: Option<(f32, f32)>) {
        self.nodes.push(XnnNode { kind, params, debug_handle: self.nodes.len() as u32, output_min_max: range });
    }
    /// External ids: inputs first, then outputs, in value order.
    pub fn payload(mut self) -> Vec<u8> {
        let mut next = 0;
        for flag in [1, 2] {
            for v in self.values.iter_mut().filter(|v| v.flags == flag) {
                v.external_id = Some(next);
                next += 1;
            }
        }
        let ids = |flag: u32| self.values.iter().enumerate().filter(|(_, v)| v.flags == flag).map(|(i, _)| i as u32).collect::<Vec<_>>();
        let graph = XnnGraph { version: "0".into(), input_ids: ids(1), output_ids: ids(2), num_externs: next, values: self.values.clone(), nodes: self.nodes, constants: self.refs };
        write_payload(&graph, &self.region)
    }
    pub fn compile(self) -> Result<Plan, String> {
        let bytes = self.payload();
        let none = |_: &str| None;
        compile_payload(&bytes, &none, DEFAULT_ACTIVATION_LIMIT)
    }
}

pub fn pt(scale: f32, zero_point: i32) -> Quant {
    Quant::PerTensor { scale, zero_point }
}
pub fn pc(scales: Vec<f32>, channel_dim: i32) -> Quant {
    Quant::PerChannel { scales: Scales::Inline(scales), channel_dim }
}
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}
pub fn i8_bytes(v: &[i8]) -> Vec<u8> {
    v.iter().map(|&x| x as u8).collect()
}
pub fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Deterministic pseudo-random numbers.
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    pub fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| self.next() as i8).collect()
    }
    pub fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| lo + (hi - lo) * (self.next() as f32 / 4294967296.0)).collect()
    }
}

pub fn conv_params(k: u32, pad: u32, cin: u32, cout: u32, input: u32, filter: u32, bias: Option<u32>, output: u32) -> ConvParams {
    ConvParams {
        padding_top: pad,
        padding_right: pad,
        padding_bottom: pad,
        padding_left: pad,
        kernel_height: k,
        kernel_width: k,
        subsampling_height: 1,
        subsampling_width: 1,
        dilation_height: 1,
        dilation_width: 1,
        group_input_channels: cin,
        group_output_channels: cout,
        groups: 1,
        adjustment_height: 0,
        adjustment_width: 0,
        input,
        filter,
        bias,
        output,
        flags: 0,
    }
}
