//! CPU reference runtime of the `RbuildGpuBackend` payload (`runtime/src/backends/gpu/PAYLOAD.md`).
//!
//! [`Interpreter`] executes a validated [`Payload`] on host memory, op by op in list order,
//! computing in f32 (sums in f64 where the portable kernels do) with the portable kernels' plain
//! functions where they exist. It is the "CPU twin" the wgpu and CUDA runtimes are tested
//! against, and the fallback when no GPU exists. [`ReferenceGpuBackend`] wraps it as a runtime
//! [`Backend`] registered under [`RBUILD_GPU_BACKEND_ID`].
//!
//! Storage: every float tensor (f32, f16, bf16) is held as f32, rounded through its dtype when
//! written (so an f16 KV cache holds exactly the f16 values a GPU would); i32/i64 as i64; bool as
//! u8; grouped int8/int4 constants stay packed with f32 scales and are dequantized per row when
//! used. int4 rows are packed separately: a `[rows, cols]` weight is `rows × ceil(cols/2)` bytes.

mod ops;

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use half::{bf16, f16};
use rbuild_runtime::backend::{Backend, BackendInitContext, CompileSpec, DelegateHandle};
pub(crate) use rbuild_runtime::backends::gpu::payload::describe;
use rbuild_runtime::backends::gpu::payload::{checked_numel, DType, Dim, Op, Payload, StateInit, ValueDef, ValueId, ValueKind};
use rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, ScalarType};

/// Elements of a host tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    /// f32, f16 and bf16 tensors (f16/bf16 values are exactly representable in their dtype).
    F32(Vec<f32>),
    /// i32 and i64 tensors.
    I64(Vec<i64>),
    /// bool tensors (0/1).
    Bool(Vec<u8>),
}

impl HostData {
    pub fn len(&self) -> usize {
        match self {
            HostData::F32(v) => v.len(),
            HostData::I64(v) => v.len(),
            HostData::Bool(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A dense, contiguous tensor on the host: a delegate input or output.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub dtype: DType,
    pub dims: Vec<usize>,
    pub data: HostData,
}

impl HostTensor {
    pub fn f32(dims: &[usize], data: Vec<f32>) -> HostTensor {
        HostTensor { dtype: DType::F32, dims: dims.to_vec(), data: HostData::F32(data) }
    }
    pub fn i64(dims: &[usize], data: Vec<i64>) -> HostTensor {
        HostTensor { dtype: DType::I64, dims: dims.to_vec(), data: HostData::I64(data) }
    }
    pub fn i32(dims: &[usize], data: Vec<i64>) -> HostTensor {
        HostTensor { dtype: DType::I32, dims: dims.to_vec(), data: HostData::I64(data) }
    }
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }
    /// The f32 elements, or `None` for a non-float tensor.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            HostData::F32(v) => Some(v),
            _ => None,
        }
    }
}

/// Rounds `v` to the nearest value of a float dtype (identity for f32).
pub fn round_to(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F16 => f16::from_f32(v).to_f32(),
        DType::BF16 => bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// A grouped weight-only quantized constant, kept packed.
#[derive(Clone, Debug)]
pub(crate) struct QuantTensor {
    pub dims: Vec<usize>,
    pub rows: usize,
    pub cols: usize,
    pub bits: u8,
    pub group: usize,
    pub bytes: Vec<u8>,
    /// `[rows, ceil(cols / group)]`.
    pub scales: Vec<f32>,
}

impl QuantTensor {
    /// Writes row `r`, dequantized, into `out` (`cols` long).
    pub fn row(&self, r: usize, out: &mut [f32]) {
        let groups = self.cols.div_ceil(self.group);
        let s = &self.scales[r * groups..(r + 1) * groups];
        if self.bits == 8 {
            let row = &self.bytes[r * self.cols..(r + 1) * self.cols];
            for (c, o) in out.iter_mut().enumerate() {
                *o = row[c] as i8 as f32 * s[c / self.group];
            }
        } else {
            let stride = self.cols.div_ceil(2);
            let row = &self.bytes[r * stride..(r + 1) * stride];
            for (c, o) in out.iter_mut().enumerate() {
                let b = row[c / 2];
                let nib = if c % 2 == 0 { b & 0x0F } else { b >> 4 };
                // Sign-extend the 4-bit two's-complement value.
                let q = ((nib << 4) as i8) >> 4;
                *o = q as f32 * s[c / self.group];
            }
        }
    }

    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.rows * self.cols];
        if self.cols > 0 {
            for (r, o) in out.chunks_exact_mut(self.cols).enumerate() {
                self.row(r, o);
            }
        }
        out
    }
}

/// What a value slot holds while the interpreter runs.
#[derive(Clone, Debug)]
pub(crate) enum Slot {
    Empty,
    Dense(HostTensor),
    Quant(QuantTensor),
}

/// Executes one payload on the host. Constants and state are loaded at [`Interpreter::new`];
/// state (KV caches) persists across [`Interpreter::run`] calls.
pub struct Interpreter {
    pub(crate) payload: Payload,
    pub(crate) slots: Vec<Slot>,
    /// Sizes of the symbols in the current run.
    pub(crate) env: Vec<Option<usize>>,
}

/// Fixed dims of a constant/state value (validation guarantees they are fixed).
fn fixed_dims(v: &ValueDef, id: ValueId) -> Result<Vec<usize>, String> {
    v.meta
        .dims
        .iter()
        .map(|d| match *d {
            Dim::Fixed(n) => usize::try_from(n).map_err(|_| format!("{}: dim {n} does not fit in memory", describe(v, id))),
            Dim::Symbol(_) => Err(format!("{}: constant/state with a dynamic dim", describe(v, id))),
        })
        .collect()
}

/// Decodes little-endian bytes of a dense dtype.
pub(crate) fn decode(dtype: DType, dims: &[usize], bytes: &[u8], what: &str) -> Result<HostTensor, String> {
    let n = checked_numel(dims).ok_or_else(|| format!("{what}: shape {dims:?} overflows"))?;
    let esize = match dtype {
        DType::F32 | DType::I32 => 4,
        DType::F16 | DType::BF16 => 2,
        DType::I64 => 8,
        DType::Bool => 1,
        q => return Err(format!("{what}: dtype {} is not a dense dtype", q.name())),
    };
    let need = n.checked_mul(esize).ok_or_else(|| format!("{what}: shape {dims:?} overflows"))?;
    if bytes.len() != need {
        return Err(format!("{what}: has {} bytes, dtype {} shape {dims:?} needs {need}", bytes.len(), dtype.name()));
    }
    let data = match dtype {
        DType::F32 => HostData::F32(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()),
        DType::F16 => HostData::F32(bytes.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()),
        DType::BF16 => HostData::F32(bytes.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect()),
        DType::I32 => HostData::I64(bytes.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).collect()),
        DType::I64 => HostData::I64(bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect()),
        DType::Bool => {
            if let Some(b) = bytes.iter().find(|&&b| b > 1) {
                return Err(format!("{what}: bool byte {b} is not 0 or 1"));
            }
            HostData::Bool(bytes.to_vec())
        }
        DType::QInt8Grouped | DType::QInt4Grouped => return Err(format!("{what}: dtype {} is not a dense dtype", dtype.name())),
    };
    Ok(HostTensor { dtype, dims: dims.to_vec(), data })
}

/// Encodes a host tensor as little-endian bytes of `dtype` (its elements rounded / truncated).
pub(crate) fn encode(t: &HostTensor, dtype: DType, out: &mut [u8]) -> Result<(), String> {
    let n = t.data.len();
    let esize = match dtype {
        DType::F32 | DType::I32 => 4,
        DType::F16 | DType::BF16 => 2,
        DType::I64 => 8,
        DType::Bool => 1,
        q => return Err(format!("cannot write dtype {}", q.name())),
    };
    if out.len() != n * esize {
        return Err(format!("output buffer has {} bytes, {} element(s) of {} need {}", out.len(), n, dtype.name(), n * esize));
    }
    let f = |i: usize| -> f32 {
        match &t.data {
            HostData::F32(v) => v[i],
            HostData::I64(v) => v[i] as f32,
            HostData::Bool(v) => v[i] as f32,
        }
    };
    let int = |i: usize| -> i64 {
        match &t.data {
            HostData::F32(v) => v[i] as i64,
            HostData::I64(v) => v[i],
            HostData::Bool(v) => v[i] as i64,
        }
    };
    for (i, c) in out.chunks_exact_mut(esize).enumerate() {
        match dtype {
            DType::F32 => c.copy_from_slice(&f(i).to_le_bytes()),
            DType::F16 => c.copy_from_slice(&f16::from_f32(f(i)).to_le_bytes()),
            DType::BF16 => c.copy_from_slice(&bf16::from_f32(f(i)).to_le_bytes()),
            DType::I32 => c.copy_from_slice(&(int(i) as i32).to_le_bytes()),
            DType::I64 => c.copy_from_slice(&int(i).to_le_bytes()),
            _ => c[0] = (int(i) != 0 || f(i) != 0.0) as u8,
        }
    }
    Ok(())
}

impl Interpreter {
    /// Loads constants (from `named_data`, size-checked against their metadata) and state
    /// (zeros or a named initial value). The payload should come from `Payload::from_bytes`
    /// (or have passed `Payload::validate`); it is validated again here.
    pub fn new<'d>(payload: &Payload, named_data: &dyn Fn(&str) -> Option<&'d [u8]>) -> Result<Interpreter, String> {
        payload.validate().map_err(|e| format!("{e}"))?;
        let mut slots = vec![Slot::Empty; payload.values.len()];
        let lookup = |key: &str, what: &str| -> Result<&'d [u8], String> {
            named_data(key).ok_or_else(|| format!("{what}: named_data key `{key}` is not in the program"))
        };
        // Dense constants and state first (quantized constants need their scales).
        for (i, v) in payload.values.iter().enumerate() {
            let id = i as ValueId;
            let what = describe(v, id);
            match &v.kind {
                ValueKind::Constant { key } if !v.meta.dtype.is_quantized() => {
                    let dims = fixed_dims(v, id)?;
                    let bytes = lookup(key, &what)?;
                    let t = decode(v.meta.dtype, &dims, bytes, &format!("{what} (named_data `{key}`)"))?;
                    slots[i] = Slot::Dense(t);
                }
                ValueKind::State { init } => {
                    let dims = fixed_dims(v, id)?;
                    let t = match init {
                        StateInit::Zeros => {
                            let n = checked_numel(&dims).ok_or_else(|| format!("{what}: shape {dims:?} overflows"))?;
                            let mut zeros = Vec::new();
                            zeros.try_reserve_exact(n).map_err(|_| format!("{what}: cannot allocate {n} elements for state {dims:?}"))?;
                            zeros.resize(n, 0.0);
                            HostTensor { dtype: v.meta.dtype, dims, data: HostData::F32(zeros) }
                        }
                        StateInit::Named(key) => {
                            let bytes = lookup(key, &what)?;
                            decode(v.meta.dtype, &dims, bytes, &format!("{what} initial value (named_data `{key}`)"))?
                        }
                    };
                    slots[i] = Slot::Dense(t);
                }
                _ => {}
            }
        }
        for (i, v) in payload.values.iter().enumerate() {
            let id = i as ValueId;
            let (ValueKind::Constant { key }, Some(q)) = (&v.kind, v.meta.quant) else { continue };
            let what = describe(v, id);
            let dims = fixed_dims(v, id)?;
            let cols = dims.last().copied().unwrap_or(1);
            let rows = if dims.is_empty() { 1 } else { checked_numel(&dims[..dims.len() - 1]).ok_or_else(|| format!("{what}: shape overflows"))? };
            let bits = if v.meta.dtype == DType::QInt8Grouped { 8 } else { 4 };
            let row_bytes = if bits == 8 { cols } else { cols.div_ceil(2) };
            let need = rows.checked_mul(row_bytes).ok_or_else(|| format!("{what}: shape overflows"))?;
            let bytes = lookup(key, &what)?;
            if bytes.len() != need {
                return Err(format!(
                    "{what} (named_data `{key}`): has {} bytes, {} shape {dims:?} needs {need} ({rows} row(s) of {row_bytes})",
                    bytes.len(),
                    v.meta.dtype.name()
                ));
            }
            let group = q.group_size as usize;
            let groups = cols.div_ceil(group);
            let scales = match &slots[q.scales as usize] {
                Slot::Dense(HostTensor { data: HostData::F32(s), dims: sd, .. }) => {
                    if sd.len() != 2 || sd[0] != rows || sd[1] != groups {
                        return Err(format!("{what}: scales have shape {sd:?}, expected [{rows}, {groups}] (group size {group})"));
                    }
                    s.clone()
                }
                _ => return Err(format!("{what}: scales value {} is not a float constant", q.scales)),
            };
            slots[i] = Slot::Quant(QuantTensor { dims, rows, cols, bits, group, bytes: bytes.to_vec(), scales });
        }
        Ok(Interpreter { payload: payload.clone(), env: vec![None; payload.symbols.len()], slots })
    }

    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    /// The current contents of a state value (for tests and debugging).
    pub fn state(&self, id: ValueId) -> Option<&HostTensor> {
        match (self.payload.values.get(id as usize)?.kind.clone(), self.slots.get(id as usize)?) {
            (ValueKind::State { .. }, Slot::Dense(t)) => Some(t),
            _ => None,
        }
    }

    /// Binds `dims` to a value's declared dims: fixed sizes must match, symbols must lie in their
    /// bounds and agree with earlier bindings of the same symbol in this run.
    pub(crate) fn bind(&mut self, id: ValueId, dims: &[usize], what: &str) -> Result<(), String> {
        self.payload.bind_dims(&mut self.env, id, dims, what)
    }

    /// Checks op shape agreement ahead of any call: runs the graph once on zero inputs with every
    /// symbol at `max(min, 1)`, then restores the state. Opt-in (the backend does not call it):
    /// a payload whose ops only fit at other sizes (e.g. a slice that empties a dim at the
    /// minimum) would be rejected although real calls succeed.
    pub fn check_shapes(&mut self) -> Result<(), String> {
        let mut inputs = Vec::with_capacity(self.payload.inputs.len());
        for &id in &self.payload.inputs {
            let v = &self.payload.values[id as usize];
            let mut dims = Vec::with_capacity(v.meta.dims.len());
            for d in &v.meta.dims {
                let n = match *d {
                    Dim::Fixed(n) => n,
                    Dim::Symbol(s) => self.payload.symbols[s as usize].min.max(1),
                };
                dims.push(usize::try_from(n).map_err(|_| format!("{}: dim {n} does not fit in memory", describe(v, id)))?);
            }
            let n = checked_numel(&dims).ok_or_else(|| format!("{}: shape {dims:?} overflows", describe(v, id)))?;
            let data = match v.meta.dtype {
                d if d.is_float() => HostData::F32(vec![0.0; n]),
                d if d.is_index() => HostData::I64(vec![0; n]),
                _ => HostData::Bool(vec![0; n]),
            };
            inputs.push(HostTensor { dtype: v.meta.dtype, dims, data });
        }
        let saved: Vec<(usize, Slot)> = self
            .payload
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v.kind, ValueKind::State { .. }))
            .map(|(i, _)| (i, self.slots[i].clone()))
            .collect();
        let result = self.run(&inputs).map(|_| ());
        for (i, slot) in saved {
            self.slots[i] = slot;
        }
        result.map_err(|e| format!("shape check (symbols at their minimum, zero inputs): {e}"))
    }

    /// Runs the graph on `inputs` (in delegate-input order) and returns the delegate outputs.
    pub fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
        let ni = self.payload.inputs.len();
        if inputs.len() != ni {
            return Err(format!("the payload takes {ni} input(s), got {}", inputs.len()));
        }
        self.env.iter_mut().for_each(|e| *e = None);
        for (i, v) in self.payload.values.iter().enumerate() {
            if matches!(v.kind, ValueKind::Activation | ValueKind::Input) {
                self.slots[i] = Slot::Empty;
            }
        }
        for (pos, t) in inputs.iter().enumerate() {
            let id = self.payload.inputs[pos];
            let v = &self.payload.values[id as usize];
            let what = format!("delegate input {pos}");
            if t.dtype != v.meta.dtype {
                return Err(format!("{what}: {} is {}, got {}", describe(v, id), v.meta.dtype.name(), t.dtype.name()));
            }
            if checked_numel(&t.dims) != Some(t.data.len()) {
                return Err(format!("{what}: shape {:?} does not match its {} element(s)", t.dims, t.data.len()));
            }
            let kind_ok = matches!(
                (&t.data, t.dtype.is_float(), t.dtype.is_index()),
                (HostData::F32(_), true, _) | (HostData::I64(_), _, true) | (HostData::Bool(_), false, false)
            );
            if !kind_ok {
                return Err(format!("{what}: elements do not match dtype {}", t.dtype.name()));
            }
            self.bind(id, &t.dims, &what)?;
            let mut t = t.clone();
            if let HostData::F32(d) = &mut t.data {
                d.iter_mut().for_each(|x| *x = round_to(t.dtype, *x));
            }
            self.slots[id as usize] = Slot::Dense(t);
        }
        let mut index = 0;
        while index < self.payload.ops.len() {
            let node = &self.payload.ops[index];
            let err = |m: String| format!("op {index} (`{}`): {m}", node.op.name());
            if let Op::IfZero { count } = node.op {
                let flag = self.flag(node.inputs[0]).map_err(err)?;
                index += 1 + if flag == 0 { 0 } else { count as usize };
                continue;
            }
            ops::run_op(self, index).map_err(|m| format!("op {index} (`{}`): {m}", self.payload.ops[index].op.name()))?;
            index += 1;
        }
        let mut outs = Vec::with_capacity(self.payload.outputs.len());
        for (pos, &id) in self.payload.outputs.iter().enumerate() {
            match &self.slots[id as usize] {
                Slot::Dense(t) => outs.push(t.clone()),
                _ => return Err(format!("delegate output {pos} ({}) was not produced", describe(&self.payload.values[id as usize], id))),
            }
        }
        Ok(outs)
    }
}

// ---------------------------------------------------------------------------------------------
// Backend wrapper
// ---------------------------------------------------------------------------------------------

/// `RbuildGpuBackend` on the CPU: parses the payload, loads named data, runs [`Interpreter`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceGpuBackend;

impl Backend for ReferenceGpuBackend {
    fn id(&self) -> &str {
        RBUILD_GPU_BACKEND_ID
    }

    fn init(&self, ctx: &BackendInitContext<'_>, processed: &[u8], _specs: &[CompileSpec<'_>]) -> Result<Box<dyn DelegateHandle>, String> {
        let payload = Payload::from_bytes(processed).map_err(|e| format!("{RBUILD_GPU_BACKEND_ID} (cpu reference): {e}"))?;
        let interp = Interpreter::new(&payload, ctx.named_data).map_err(|e| format!("{RBUILD_GPU_BACKEND_ID} (cpu reference): init: {e}"))?;
        Ok(Box::new(ReferenceGpuHandle { interp }))
    }
}

/// An initialized reference delegate; its state persists across `execute` calls.
pub struct ReferenceGpuHandle {
    pub interp: Interpreter,
}

fn dtype_of(t: ScalarType) -> Option<DType> {
    Some(match t {
        ScalarType::Float => DType::F32,
        ScalarType::Half => DType::F16,
        ScalarType::BFloat16 => DType::BF16,
        ScalarType::Int => DType::I32,
        ScalarType::Long => DType::I64,
        ScalarType::Bool => DType::Bool,
        _ => return None,
    })
}

impl DelegateHandle for ReferenceGpuHandle {
    fn execute(&mut self, _ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
        let (ni, no) = (self.interp.payload.inputs.len(), self.interp.payload.outputs.len());
        execute_call(ni, no, args, |inputs| self.interp.run(inputs))
    }
}

/// One delegate call of a payload with `ni` inputs and `no` outputs, through `run`: the call's
/// input tensors as host tensors (contiguous, of dtypes the payload knows), `run`'s outputs
/// written into the call's output tensors (resized for dynamic shapes; the program's dtype
/// must be the payload value's). The argument conventions every runtime of the payload shares.
pub fn execute_call(
    ni: usize,
    no: usize,
    args: &KernelArgs<'_>,
    run: impl FnOnce(&[HostTensor]) -> Result<Vec<HostTensor>, String>,
) -> KernelResult {
    const ID: &str = RBUILD_GPU_BACKEND_ID;
    if args.len() != ni + no {
        return Err(kerr!("{ID}: delegate call has {} arguments, the payload takes {ni} inputs + {no} outputs", args.len()));
    }
    let mut inputs = Vec::with_capacity(ni);
    for i in 0..ni {
        let t = args.tensor(i).map_err(|e| kerr!("{ID}: input {i}: {e}"))?;
        if !t.dim_order.is_contiguous() {
            return Err(kerr!("{ID}: input {i}: dim order {:?} is not supported (contiguous only)", t.dim_order));
        }
        let dtype = dtype_of(t.dtype).ok_or_else(|| kerr!("{ID}: input {i}: dtype {} is not supported", t.dtype))?;
        inputs.push(decode(dtype, t.sizes(), t.bytes(), &format!("{ID}: input {i}")).map_err(|m| kerr!("{m}"))?);
    }
    let outs = run(&inputs).map_err(|m| kerr!("{ID}: {m}"))?;
    for (j, o) in outs.iter().enumerate() {
        let mut t = args.out(ni + j).map_err(|e| kerr!("{ID}: output {j}: {e}"))?;
        let dtype = dtype_of(t.dtype).ok_or_else(|| kerr!("{ID}: output {j}: dtype {} is not supported", t.dtype))?;
        if dtype != o.dtype {
            return Err(kerr!("{ID}: output {j}: the program's tensor is {}, the payload's value is {}", dtype.name(), o.dtype.name()));
        }
        t.resize(&o.dims).map_err(|e| kerr!("{ID}: output {j}: {e}"))?;
        encode(o, dtype, t.bytes_mut()).map_err(|m| kerr!("{ID}: output {j}: {m}"))?;
    }
    Ok(())
}
