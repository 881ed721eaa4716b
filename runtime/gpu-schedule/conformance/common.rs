//! Shared test helpers of the GPU runtimes' conformance tests: a payload builder, the device
//! under test (`crate::dut`, defined by the including test crate: wgpu or CUDA), or a skip
//! notice, and a runner that executes a payload on it and on the CPU reference twin and
//! compares the outputs.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::OnceLock;

pub use crate::dut::{Device, Program};
pub use rbuild_kernels::gpu_reference::{HostData, HostTensor};
use rbuild_kernels::gpu_reference::Interpreter;
use rbuild_runtime::backends::gpu::payload::*;

/// The device for GPU tests, or `None` after printing a notice (machines without one).
pub fn gpu() -> Option<Device> {
    static DEV: OnceLock<Result<Device, String>> = OnceLock::new();
    match DEV.get_or_init(crate::dut::open) {
        Ok(d) => Some(d.clone()),
        Err(e) => {
            eprintln!("notice: no {} device ({e}); skipping", crate::dut::NAME);
            None
        }
    }
}

#[derive(Default)]
pub struct B {
    pub p: Payload,
    pub named: HashMap<String, Vec<u8>>,
}

pub fn fx(d: &[usize]) -> Vec<Dim> {
    d.iter().map(|&n| Dim::Fixed(n as u64)).collect()
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect()
}

impl B {
    pub fn sym(&mut self, name: &str, min: u64, max: u64) -> Dim {
        self.p.symbols.push(Symbol { name: name.into(), min, max });
        Dim::Symbol(self.p.symbols.len() as u32 - 1)
    }
    pub fn value(&mut self, name: &str, dtype: DType, dims: &[Dim], kind: ValueKind) -> ValueId {
        self.p.values.push(ValueDef { name: name.into(), meta: TensorMeta { dtype, dims: dims.to_vec(), quant: None }, kind });
        self.p.values.len() as ValueId - 1
    }
    pub fn input(&mut self, name: &str, dtype: DType, dims: &[Dim]) -> ValueId {
        let id = self.value(name, dtype, dims, ValueKind::Input);
        self.p.inputs.push(id);
        id
    }
    pub fn constant(&mut self, name: &str, dtype: DType, dims: &[usize], bytes: Vec<u8>) -> ValueId {
        self.named.insert(name.into(), bytes);
        self.value(name, dtype, &fx(dims), ValueKind::Constant { key: name.into() })
    }
    /// A float constant stored as `dtype` (f32 or f16).
    pub fn cf(&mut self, name: &str, dtype: DType, dims: &[usize], data: &[f32]) -> ValueId {
        let bytes = if dtype == DType::F16 { f16_bytes(data) } else { f32_bytes(data) };
        self.constant(name, dtype, dims, bytes)
    }
    pub fn state(&mut self, name: &str, dtype: DType, dims: &[usize]) -> ValueId {
        self.value(name, dtype, &fx(dims), ValueKind::State { init: StateInit::Zeros })
    }
    pub fn op(&mut self, op: Op, ins: &[ValueId], name: &str, dtype: DType, dims: &[Dim]) -> ValueId {
        let id = self.value(name, dtype, dims, ValueKind::Activation);
        self.p.ops.push(OpNode { op, inputs: ins.to_vec(), outputs: vec![id] });
        id
    }
    pub fn op0(&mut self, op: Op, ins: &[ValueId]) {
        self.p.ops.push(OpNode { op, inputs: ins.to_vec(), outputs: vec![] });
    }
    pub fn out(&mut self, id: ValueId) {
        self.p.outputs.push(id);
    }
    /// Through the wire format, as a delegate would see it.
    pub fn payload(&self) -> Payload {
        let bytes = self.p.to_bytes().expect("payload writes");
        Payload::from_bytes(&bytes).expect("payload reads")
    }
    pub fn reference(&self) -> Result<Interpreter, String> {
        Interpreter::new(&self.payload(), &|k: &str| self.named.get(k).map(|v| v.as_slice()))
    }
    pub fn program(&self, gpu: &Device) -> Result<Program, String> {
        crate::dut::program(gpu, &self.payload(), &|k: &str| self.named.get(k).map(|v| v.as_slice()))
    }
}

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

pub fn tensor(dtype: DType, dims: &[usize], data: Vec<f32>) -> HostTensor {
    HostTensor { dtype, dims: dims.to_vec(), data: HostData::F32(data) }
}

/// Element-wise closeness: `|g - w| <= tol · max(|w|, 1)`, NaN matching NaN.
pub fn close(got: &HostTensor, want: &HostTensor, tol: f32, what: &str) {
    assert_eq!(got.dtype, want.dtype, "{what}: dtype");
    assert_eq!(got.dims, want.dims, "{what}: dims");
    match (&got.data, &want.data) {
        (HostData::F32(g), HostData::F32(w)) => {
            for (i, (&g, &w)) in g.iter().zip(w).enumerate() {
                let ok = (g - w).abs() <= tol * w.abs().max(1.0) || (g.is_nan() && w.is_nan()) || g == w;
                assert!(ok, "{what}: element {i}: gpu {g}, reference {w} (tol {tol})");
            }
        }
        (g, w) => assert_eq!(g, w, "{what}: elements"),
    }
}

/// Runs `calls` (each a list of inputs) through both runtimes in order and compares every
/// output. Returns false (after a notice) when there is no adapter.
pub fn check_calls(b: &B, calls: &[Vec<HostTensor>], tol: f32, what: &str) -> bool {
    let Some(gpu) = gpu() else { return false };
    let mut reference = b.reference().unwrap_or_else(|e| panic!("{what}: reference init: {e}"));
    let mut program = b.program(&gpu).unwrap_or_else(|e| panic!("{what}: gpu init: {e}"));
    for (c, inputs) in calls.iter().enumerate() {
        let want = reference.run(inputs).unwrap_or_else(|e| panic!("{what}: call {c}: reference: {e}"));
        let got = program.run(inputs).unwrap_or_else(|e| panic!("{what}: call {c}: gpu: {e}"));
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            close(g, w, tol, &format!("{what}: call {c} output {i}"));
        }
    }
    true
}

pub fn check(b: &B, inputs: Vec<HostTensor>, tol: f32, what: &str) -> bool {
    check_calls(b, &[inputs], tol, what)
}

/// f32 storage tolerance and f16 storage tolerance (one f16 rounding of the output, plus inputs
/// rounded the same way on both sides).
pub fn tol(dtype: DType) -> f32 {
    if dtype == DType::F16 { 2e-3 } else { 2e-5 }
}

/// A grouped quantized constant `[rows, cols]` (int8 or int4, int4 rows packed separately, low
/// nibble first) with random values and f32 scales `[rows, ceil(cols / group)]`.
pub fn quantized(b: &mut B, name: &str, dtype: DType, rows: usize, cols: usize, group: usize, rng: &mut Rng) -> ValueId {
    let groups = cols.div_ceil(group);
    let scales: Vec<f32> = (0..rows * groups).map(|_| rng.next().abs() * 0.1 + 0.01).collect();
    let s = b.cf(&format!("{name}.scales"), DType::F32, &[rows, groups], &scales);
    let bytes = if dtype == DType::QInt8Grouped {
        (0..rows * cols).map(|_| (rng.next() * 127.0) as i8 as u8).collect()
    } else {
        let stride = cols.div_ceil(2);
        let mut packed = vec![0u8; rows * stride];
        for r in 0..rows {
            for c in 0..cols {
                let q = ((rng.next() * 8.0) as i8).clamp(-8, 7);
                packed[r * stride + c / 2] |= ((q as u8) & 0x0F) << (4 * (c % 2));
            }
        }
        packed
    };
    b.named.insert(name.into(), bytes);
    b.p.values.push(ValueDef {
        name: name.into(),
        meta: TensorMeta { dtype, dims: fx(&[rows, cols]), quant: Some(GroupQuant { group_size: group as u32, scales: s }) },
        kind: ValueKind::Constant { key: name.into() },
    });
    b.p.values.len() as ValueId - 1
}
