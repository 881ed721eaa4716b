//! [`GpuProgram`]: one payload on one device. Constants and state are uploaded once at
//! [`GpuProgram::new`]; [`GpuProgram::run`] uploads the inputs, records every op into one
//! command encoder (one submission, per-dispatch parameters in one uniform buffer written
//! before it) and reads the outputs back at the end.

use rbuild_kernels::gpu_reference::HostTensor;
use rbuild_runtime::backends::gpu::payload::{checked_numel, describe, DType, Dim, Op, Payload, StateInit, ValueDef, ValueId, ValueKind};

use crate::data;
use crate::device::GpuDevice;
use crate::ops;
use crate::shaders::{Kernel, Pipelines};

type R<T = ()> = Result<T, String>;

/// Bytes of one dispatch's parameters in the uniform buffer (the largest offset alignment
/// WebGPU allows, so every adapter accepts the offsets).
pub(crate) const PARAM_BYTES: usize = 256;
pub(crate) const PARAM_WORDS: usize = PARAM_BYTES / 4;

/// What a kernel binding refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Bind {
    Value(ValueId),
    /// A small buffer for an optional operand the kernel ignores (no bias, no position).
    Dummy,
    /// Per-op error flags the kernels set (index out of range, bad position).
    Status,
    /// The indirect grids of dispatches guarded by a device-side `if_zero`.
    Indirect,
    /// The constant table an op built at init (`rope` frequencies), by op index.
    OpTable(usize),
    /// Scratch for split-key attention's partial results.
    Scratch,
}

/// One kernel launch of a run.
pub(crate) struct Dispatch {
    pub kernel: Kernel,
    pub params: [u32; PARAM_WORDS],
    pub binds: Vec<Bind>,
    pub groups: [u32; 3],
    /// Slot of this dispatch's grid in the indirect buffer when an `if_zero` computed on the
    /// device guards it.
    pub indirect: Option<u32>,
    /// The op it belongs to (profiles).
    pub op: usize,
}

/// GPU time of one dispatch of the last profiled run (see [`GpuProgram::set_profiling`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DispatchTime {
    /// Op index and name in the payload.
    pub op: usize,
    pub op_name: &'static str,
    /// The shader file.
    pub kernel: &'static str,
    pub nanos: f64,
}

/// The per-run view the op planners work on: shapes of every value known so far, the symbol
/// sizes of this call, and the dispatches recorded so far.
pub(crate) struct Plan<'a> {
    pub payload: &'a Payload,
    pub dims: Vec<Option<Vec<usize>>>,
    pub env: Vec<Option<usize>>,
    pub dispatches: Vec<Dispatch>,
    /// Values of scalar index inputs, known on the host (used for the reference's position
    /// checks; positions computed on the device are checked by the kernels).
    pub host_scalars: Vec<Option<i64>>,
    /// The op being planned.
    pub index: usize,
    /// Largest dispatch grid dimension.
    pub max_groups: u32,
    /// While planning a range guarded by a device-side `if_zero`: its last op index.
    pub guard_until: Option<usize>,
    /// Indirect grid slots handed out in this run.
    pub indirect_slots: u32,
}

impl Plan<'_> {
    pub fn name(&self, id: ValueId) -> String {
        describe(&self.payload.values[id as usize], id)
    }

    pub fn dtype(&self, id: ValueId) -> DType {
        self.payload.values[id as usize].meta.dtype
    }

    pub fn code(&self, id: ValueId) -> u32 {
        data::device_code(self.dtype(id))
    }

    pub fn dims(&self, id: ValueId) -> R<Vec<usize>> {
        self.dims[id as usize].clone().ok_or_else(|| format!("{} has no contents", self.name(id)))
    }

    pub fn output(&self) -> ValueId {
        self.payload.ops[self.index].outputs[0]
    }

    pub fn out_dtype(&self) -> DType {
        self.dtype(self.output())
    }

    /// A weight's dims: a float tensor, or a grouped quantized constant (`linear` weights and
    /// `embedding` tables, dequantized in the kernel).
    pub fn weight_dims(&self, id: ValueId) -> R<Vec<usize>> {
        if self.dtype(id).is_quantized() {
            self.dims(id)
        } else {
            self.float_dims(id)
        }
    }

    /// Kernel params of a weight: `(columns, group size, scales dtype)` and the scales' binding
    /// (a dummy for a float weight).
    pub fn quant(&self, id: ValueId) -> ([u32; 3], Bind) {
        match self.payload.values[id as usize].meta.quant {
            Some(q) => {
                let cols = self.dims[id as usize].as_ref().and_then(|d| d.last().copied()).unwrap_or(1) as u32;
                ([cols, q.group_size, self.code(q.scales)], Bind::Value(q.scales))
            }
            None => ([0, 1, 1], Bind::Dummy),
        }
    }

    /// A float tensor's dims (quantized values are rejected here).
    pub fn float_dims(&self, id: ValueId) -> R<Vec<usize>> {
        let d = self.dtype(id);
        if !d.is_float() {
            return Err(format!("{} is {}, a float tensor is needed", self.name(id), d.name()));
        }
        self.dims(id)
    }

    pub fn float_out(&self) -> R {
        let id = self.output();
        let d = self.dtype(id);
        if !d.is_float() {
            return Err(format!("output {} is {}, this op produces a float tensor", self.name(id), d.name()));
        }
        Ok(())
    }

    /// Binds `dims` to a value's declared dims (fixed sizes must match, symbols lie in their
    /// bounds and agree with this call's earlier bindings), as the reference does.
    pub fn bind(&mut self, id: ValueId, dims: &[usize], what: &str) -> R {
        self.payload.bind_dims(&mut self.env, id, dims, what)?;
        self.dims[id as usize] = Some(dims.to_vec());
        Ok(())
    }

    /// Binds the op's output to `dims`.
    pub fn put(&mut self, dims: Vec<usize>) -> R {
        let id = self.output();
        self.bind(id, &dims, "output")
    }

    /// The output value's dims with symbols resolved; one unbound symbol is inferred from `total`.
    pub fn output_dims(&self, total: usize) -> R<Vec<usize>> {
        self.payload.resolve_output_dims(&self.env, self.output(), total)
    }

    /// A scalar position operand: checks its shape; its value when it is known on the host.
    pub fn position(&self, id: ValueId) -> R<Option<usize>> {
        let d = self.dims(id)?;
        if !self.dtype(id).is_index() {
            return Err(format!("position {} is {}, an i32/i64 tensor is needed", self.name(id), self.dtype(id).name()));
        }
        if checked_numel(&d) != Some(1) {
            return Err(format!("position {} has {} elements, needs 1", self.name(id), checked_numel(&d).unwrap_or(usize::MAX)));
        }
        match self.host_scalars[id as usize] {
            Some(p) => usize::try_from(p).map(Some).map_err(|_| format!("position {} = {p} is negative", self.name(id))),
            None => Ok(None),
        }
    }

    /// Grid for `n` threads in workgroups of `size` (2-D past the per-dimension limit).
    pub fn grid(&self, n: usize, size: usize) -> R<[u32; 3]> {
        let groups = n.div_ceil(size);
        let max = self.max_groups as usize;
        let x = groups.min(max);
        let y = if x == 0 { 0 } else { groups.div_ceil(x) };
        if y > max {
            return Err(format!("{n} elements exceed the adapter's dispatch limit"));
        }
        Ok([x as u32, y as u32, 1])
    }

    pub fn dispatch(&mut self, kernel: Kernel, params: [u32; PARAM_WORDS], binds: Vec<Bind>, groups: [u32; 3]) {
        if groups.iter().all(|&g| g > 0) {
            let indirect = match self.guard_until {
                Some(last) if self.index <= last => {
                    self.indirect_slots += 1;
                    Some(self.indirect_slots - 1)
                }
                _ => None,
            };
            self.dispatches.push(Dispatch { kernel, params, binds, groups, indirect, op: self.index });
        }
    }
}

/// Ends a device-side `if_zero` range: the gate zeroes the grids of the slots handed out since.
fn close_gate(plan: &mut Plan<'_>, gate: Option<(usize, u32)>) {
    if let Some((at, first)) = gate {
        let d = &mut plan.dispatches[at].params;
        d[0] = first * 3;
        d[1] = (plan.indirect_slots - first) * 3;
    }
    plan.guard_until = None;
}

/// Shares activation buffers by liveness: an activation's buffer is free for outputs of ops
/// after its last use (strictly after, so no op reads and writes one buffer). Reshape outputs
/// alias their input (`storage_of`), so a storage root lives as long as any alias; delegate
/// outputs live to the end. Returns each buffer (size) with the activation roots it holds.
fn plan_activations(payload: &Payload, storage_of: &[ValueId], bytes: &[u64]) -> Vec<(Vec<ValueId>, u64)> {
    let n = payload.values.len();
    let is_act = |id: ValueId| matches!(payload.values[id as usize].kind, ValueKind::Activation);
    let mut last = vec![0usize; n];
    for (index, node) in payload.ops.iter().enumerate() {
        for &id in node.inputs.iter().chain(&node.outputs) {
            let r = storage_of[id as usize] as usize;
            last[r] = last[r].max(index);
        }
    }
    for &id in &payload.outputs {
        last[storage_of[id as usize] as usize] = usize::MAX;
    }
    // (size, last use, roots) per buffer; free ones are reused best-fit, growing if needed.
    let mut pool: Vec<(u64, usize, Vec<ValueId>)> = Vec::new();
    for (index, node) in payload.ops.iter().enumerate() {
        for &out in &node.outputs {
            if storage_of[out as usize] != out || !is_act(out) {
                continue;
            }
            let need = bytes[out as usize];
            let free = pool
                .iter()
                .enumerate()
                .filter(|(_, b)| b.1 < index)
                .min_by_key(|(_, b)| (b.0 < need, b.0.abs_diff(need)))
                .map(|(i, _)| i);
            match free {
                Some(i) => {
                    let b = &mut pool[i];
                    b.0 = b.0.max(need);
                    b.1 = last[out as usize];
                    b.2.push(out);
                }
                None => pool.push((need, last[out as usize], vec![out])),
            }
        }
    }
    // Aliases (reshape outputs) take their root's buffer.
    let mut out: Vec<(Vec<ValueId>, u64)> = pool.into_iter().map(|(size, _, roots)| (roots, size)).collect();
    for (roots, _) in &mut out {
        let extra: Vec<ValueId> =
            (0..n as ValueId).filter(|&id| storage_of[id as usize] != id && roots.contains(&storage_of[id as usize])).collect();
        roots.extend(extra);
    }
    out
}

/// Every dim of a value at its largest (symbols at their max).
fn max_dims(p: &Payload, v: &ValueDef) -> Vec<u64> {
    v.meta.dims.iter().map(|d| match *d {
        Dim::Fixed(n) => n,
        Dim::Symbol(s) => p.symbols[s as usize].max,
    }).collect()
}

/// A payload compiled for one device.
pub struct GpuProgram {
    gpu: GpuDevice,
    payload: Payload,
    pipelines: std::sync::Arc<Pipelines>,
    /// Device buffer of each value (activations share them by liveness; reshape outputs alias
    /// their input through `storage_of`). `None` only for a value no op produces.
    buffers: Vec<Option<wgpu::Buffer>>,
    /// The buffer a value's elements live in (reshape outputs alias their input).
    storage_of: Vec<ValueId>,
    dummy: wgpu::Buffer,
    /// Split-key attention partials (see ops/attention.rs), sized for the largest split.
    scratch: wgpu::Buffer,
    status: wgpu::Buffer,
    params: wgpu::Buffer,
    params_cap: usize,
    indirect: wgpu::Buffer,
    indirect_cap: usize,
    /// Values of one-element integer constants (positions, flags), for host-side checks.
    const_scalars: Vec<Option<i64>>,
    /// Per-op constant tables built at init (`rope`: frequencies), by op index.
    op_tables: Vec<Option<wgpu::Buffer>>,
    activation_bytes: u64,
    /// Bind groups of earlier runs, by (dispatch slot, kernel, bindings): every buffer is fixed
    /// at init, so decode steps reuse them. Cleared when the params or indirect buffer grows.
    bind_groups: std::collections::HashMap<(usize, Kernel, Vec<Bind>), wgpu::BindGroup>,
    /// The readback buffer of earlier runs, reused while it is large enough.
    readback: Option<wgpu::Buffer>,
    profiling: bool,
    profile: Vec<DispatchTime>,
}

impl GpuProgram {
    /// Validates the payload, uploads constants and state (zeros or `named_data`), allocates
    /// activation buffers for each symbol's max and compiles every shader.
    pub fn new<'d>(gpu: &GpuDevice, payload: &Payload, named_data: &dyn Fn(&str) -> Option<&'d [u8]>) -> R<GpuProgram> {
        payload.validate().map_err(|e| format!("{e}"))?;
        let dev = &gpu.device;
        // Quantized constants are dequantized inside `linear` (weight) and `embedding` (table)
        // only; name the op that uses one anywhere else.
        for (index, node) in payload.ops.iter().enumerate() {
            for (slot, &id) in node.inputs.iter().enumerate() {
                let v = &payload.values[id as usize];
                let ok = match node.op {
                    Op::Linear { .. } => slot == 1,
                    Op::Embedding => slot == 0,
                    _ => false,
                };
                if v.meta.dtype.is_quantized() && !ok {
                    return Err(format!(
                        "op {index} (`{}`): {} has dtype {}, which the wgpu runtime takes only as a `linear` weight or an `embedding` table",
                        node.op.name(),
                        describe(v, id),
                        v.meta.dtype.name()
                    ));
                }
            }
        }
        let max_binding = gpu.limits.max_storage_buffer_binding_size as u128;
        let oom = dev.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let invalid = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut buffers: Vec<Option<wgpu::Buffer>> = Vec::with_capacity(payload.values.len());
        let mut act_bytes = vec![0u64; payload.values.len()];
        let mut const_scalars = vec![None; payload.values.len()];
        for (i, v) in payload.values.iter().enumerate() {
            let id = i as ValueId;
            let what = describe(v, id);
            let dims = max_dims(payload, v);
            if let (ValueKind::Constant { key }, Some(q)) = (&v.kind, v.meta.quant) {
                buffers.push(Some(Self::upload_quantized(gpu, payload, v, id, key, q.group_size, q.scales, &dims, named_data)?));
                continue;
            }
            let n = dims.iter().try_fold(1u128, |a, &d| a.checked_mul(d as u128)).unwrap_or(u128::MAX);
            let bytes = (n.div_ceil(if matches!(v.meta.dtype, DType::F16 | DType::BF16) { 2 } else { 1 }) * 4).max(4);
            if bytes > max_binding {
                return Err(format!(
                    "{what}: {} shape {dims:?} (symbols at their max) needs {bytes} bytes, more than adapter {} binds ({max_binding})",
                    v.meta.dtype.name(),
                    gpu.info
                ));
            }
            let bytes = (bytes as u64).next_multiple_of(4);
            if matches!(v.kind, ValueKind::Activation) {
                // Placed after the loop, sharing buffers by liveness.
                act_bytes[i] = bytes;
                buffers.push(None);
                continue;
            }
            let init: Option<(Vec<u32>, String)> = match &v.kind {
                ValueKind::Constant { key } => Some((Vec::new(), key.clone())),
                ValueKind::State { init: StateInit::Named(key) } => Some((Vec::new(), key.clone())),
                _ => None,
            };
            let words = match init {
                Some((_, key)) => {
                    let raw = named_data(&key).ok_or_else(|| format!("{what}: named_data key `{key}` is not in the program"))?;
                    let esize = data::element_bytes(v.meta.dtype).unwrap_or(1) as u128;
                    if raw.len() as u128 != n * esize {
                        return Err(format!(
                            "{what} (named_data `{key}`): has {} bytes, dtype {} shape {dims:?} needs {}",
                            raw.len(),
                            v.meta.dtype.name(),
                            n * esize
                        ));
                    }
                    Some(data::bytes_to_words(v.meta.dtype, raw, &format!("{what} (named_data `{key}`)"))?)
                }
                None => None,
            };
            let buffer = dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&what),
                size: bytes,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            if let (Some(w), ValueKind::Constant { .. }, true) = (&words, &v.kind, v.meta.dtype.is_index()) {
                if w.len() == 1 {
                    const_scalars[i] = Some(w[0] as i32 as i64);
                }
            }
            if let Some(w) = words {
                if !w.is_empty() {
                    gpu.queue.write_buffer(&buffer, 0, bytemuck::cast_slice(&w));
                }
            }
            buffers.push(Some(buffer));
        }
        let mut storage_of: Vec<ValueId> = (0..payload.values.len() as ValueId).collect();
        for node in &payload.ops {
            if matches!(node.op, Op::Reshape) {
                storage_of[node.outputs[0] as usize] = storage_of[node.inputs[0] as usize];
            }
        }
        let mut activation_bytes = 0;
        for (root, size) in plan_activations(payload, &storage_of, &act_bytes) {
            activation_bytes += size;
            let buffer = dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("activations"),
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            for id in root {
                buffers[id as usize] = Some(buffer.clone());
            }
        }
        let small = |label: &str, size: u64| {
            dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            })
        };
        let dummy = small("dummy", 16);
        let scratch = small("attention partials", ops::attention_scratch_bytes(payload).max(16));
        let status = small("status", (payload.ops.len().max(1) * 4) as u64);
        let params_cap = (payload.ops.len().max(1) * 2) * PARAM_BYTES;
        let params = Self::params_buffer(gpu, params_cap);
        let op_tables = payload
            .ops
            .iter()
            .map(|node| match node.op {
                Op::Rope { theta, head_dim, .. } => {
                    let words = ops::rope_table(theta, head_dim);
                    let b = small("rope frequencies", (words.len() * 4).max(8) as u64);
                    gpu.queue.write_buffer(&b, 0, bytemuck::cast_slice(&words));
                    Some(b)
                }
                _ => None,
            })
            .collect();
        let indirect_cap = 64 * 12;
        let indirect = Self::indirect_buffer(gpu, indirect_cap);
        let invalid = pollster::block_on(invalid.pop());
        if let Some(e) = pollster::block_on(oom.pop()).or(invalid) {
            return Err(format!("adapter {}: cannot allocate the program's buffers: {e}", gpu.info));
        }
        let pipelines = gpu.pipelines()?;
        Ok(GpuProgram {
            gpu: gpu.clone(),
            payload: payload.clone(),
            pipelines,
            buffers,
            storage_of,
            dummy,
            scratch,
            status,
            params,
            params_cap,
            indirect,
            indirect_cap,
            const_scalars,
            op_tables,
            activation_bytes,
            bind_groups: Default::default(),
            readback: None,
            profiling: false,
            profile: Vec::new(),
        })
    }

    /// A grouped int8/int4 constant: its packed bytes as words (the reference's size and
    /// scales-shape checks, with its errors).
    #[allow(clippy::too_many_arguments)]
    fn upload_quantized<'d>(
        gpu: &GpuDevice,
        payload: &Payload,
        v: &ValueDef,
        id: ValueId,
        key: &str,
        group: u32,
        scales: ValueId,
        dims: &[u64],
        named_data: &dyn Fn(&str) -> Option<&'d [u8]>,
    ) -> R<wgpu::Buffer> {
        let what = describe(v, id);
        let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        let cols = dims.last().copied().unwrap_or(1);
        let rows = if dims.is_empty() { 1 } else { checked_numel(&dims[..dims.len() - 1]).ok_or_else(|| format!("{what}: shape overflows"))? };
        let row_bytes = if v.meta.dtype == DType::QInt8Grouped { cols } else { cols.div_ceil(2) };
        let need = rows.checked_mul(row_bytes).ok_or_else(|| format!("{what}: shape overflows"))?;
        let bytes = named_data(key).ok_or_else(|| format!("{what}: named_data key `{key}` is not in the program"))?;
        if bytes.len() != need {
            return Err(format!(
                "{what} (named_data `{key}`): has {} bytes, {} shape {dims:?} needs {need} ({rows} row(s) of {row_bytes})",
                bytes.len(),
                v.meta.dtype.name()
            ));
        }
        let groups = cols.div_ceil(group as usize);
        let sv = &payload.values[scales as usize];
        let sd = max_dims(payload, sv);
        if !sv.meta.dtype.is_float() || sd.len() != 2 || sd[0] as usize != rows || sd[1] as usize != groups {
            return Err(format!(
                "{what}: scales {} are {} {sd:?}, expected a float [{rows}, {groups}] (group size {group})",
                describe(sv, scales),
                sv.meta.dtype.name()
            ));
        }
        if need as u128 > gpu.limits.max_storage_buffer_binding_size as u128 {
            return Err(format!("{what}: {need} bytes are more than adapter {} binds", gpu.info));
        }
        let mut padded = bytes.to_vec();
        padded.resize(need.next_multiple_of(4).max(4), 0);
        let buffer = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(&what),
            size: padded.len() as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        gpu.queue.write_buffer(&buffer, 0, &padded);
        Ok(buffer)
    }

    fn indirect_buffer(gpu: &GpuDevice, size: usize) -> wgpu::Buffer {
        gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("indirect grids"),
            size: size as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::INDIRECT | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    fn params_buffer(gpu: &GpuDevice, size: usize) -> wgpu::Buffer {
        gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("params"),
            size: size as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// The current contents of a state value (KV caches), read back from the device: for tests
    /// and debugging, like the reference's `Interpreter::state`.
    pub fn read_state(&self, id: ValueId) -> R<HostTensor> {
        let v = self.payload.values.get(id as usize).ok_or_else(|| format!("value {id} does not exist"))?;
        if !matches!(v.kind, ValueKind::State { .. }) {
            return Err(format!("{} is not a state value", describe(v, id)));
        }
        let dims: Vec<usize> = max_dims(&self.payload, v).iter().map(|&d| d as usize).collect();
        let bytes = (data::words(v.meta.dtype, dims.iter().product()) * 4) as u64;
        let (dev, queue) = (&self.gpu.device, &self.gpu.queue);
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let staging = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("state readback"),
            size: bytes.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("state readback") });
        if bytes > 0 {
            enc.copy_buffer_to_buffer(self.buffer(id)?, 0, &staging, 0, bytes);
        }
        queue.submit([enc.finish()]);
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        dev.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| format!("adapter {}: {e}", self.gpu.info))?;
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(format!("adapter {}: reading {} failed: {e}", self.gpu.info, describe(v, id)));
        }
        rx.recv()
            .map_err(|_| format!("adapter {}: readback was dropped", self.gpu.info))?
            .map_err(|e| format!("adapter {}: cannot read {} back: {e}", self.gpu.info, describe(v, id)))?;
        let view = slice.get_mapped_range().map_err(|e| format!("adapter {}: {e}", self.gpu.info))?;
        let words: Vec<u32> = view.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        drop(view);
        staging.unmap();
        Ok(data::words_to_tensor(v.meta.dtype, &dims, &words))
    }

    /// Records GPU timestamps around every dispatch of the following runs (one compute pass per
    /// dispatch, so slower: for diagnosis only); see [`GpuProgram::last_profile`]. Needs the
    /// adapter's `TIMESTAMP_QUERY`.
    pub fn set_profiling(&mut self, on: bool) -> R {
        if on && !self.gpu.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Err(format!("adapter {} has no TIMESTAMP_QUERY: cannot profile", self.gpu.info));
        }
        self.profiling = on;
        Ok(())
    }

    /// Per-dispatch GPU times of the last run made with profiling on (empty otherwise).
    pub fn last_profile(&self) -> &[DispatchTime] {
        &self.profile
    }

    /// Device bytes of all activation buffers (shared by liveness), for diagnostics.
    pub fn activation_bytes(&self) -> u64 {
        self.activation_bytes
    }

    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    pub fn device(&self) -> &GpuDevice {
        &self.gpu
    }

    fn buffer(&self, id: ValueId) -> R<&wgpu::Buffer> {
        let s = self.storage_of[id as usize];
        self.buffers[s as usize].as_ref().ok_or_else(|| format!("{} has no device buffer", describe(&self.payload.values[id as usize], id)))
    }

    /// Runs the graph on `inputs` (delegate-input order) and returns the delegate outputs, with
    /// the same checks and errors as the CPU reference's `Interpreter::run`.
    pub fn run(&mut self, inputs: &[HostTensor]) -> R<Vec<HostTensor>> {
        let p = &self.payload;
        let ni = p.inputs.len();
        if inputs.len() != ni {
            return Err(format!("the payload takes {ni} input(s), got {}", inputs.len()));
        }
        let mut plan = Plan {
            payload: p,
            dims: vec![None; p.values.len()],
            env: vec![None; p.symbols.len()],
            dispatches: Vec::new(),
            host_scalars: self.const_scalars.clone(),
            index: 0,
            max_groups: self.gpu.limits.max_compute_workgroups_per_dimension,
            guard_until: None,
            indirect_slots: 0,
        };
        for (i, v) in p.values.iter().enumerate() {
            if matches!(v.kind, ValueKind::Constant { .. } | ValueKind::State { .. }) {
                plan.dims[i] = Some(max_dims(p, v).iter().map(|&d| d as usize).collect());
            }
        }
        let mut uploads = Vec::with_capacity(ni);
        for (pos, t) in inputs.iter().enumerate() {
            let id = p.inputs[pos];
            let v = &p.values[id as usize];
            let what = format!("delegate input {pos}");
            if t.dtype != v.meta.dtype {
                return Err(format!("{what}: {} is {}, got {}", describe(v, id), v.meta.dtype.name(), t.dtype.name()));
            }
            if checked_numel(&t.dims) != Some(t.data.len()) {
                return Err(format!("{what}: shape {:?} does not match its {} element(s)", t.dims, t.data.len()));
            }
            use rbuild_kernels::gpu_reference::HostData;
            let kind_ok = matches!(
                (&t.data, t.dtype.is_float(), t.dtype.is_index()),
                (HostData::F32(_), true, _) | (HostData::I64(_), _, true) | (HostData::Bool(_), false, false)
            );
            if !kind_ok {
                return Err(format!("{what}: elements do not match dtype {}", t.dtype.name()));
            }
            plan.bind(id, &t.dims, &what)?;
            if let HostData::I64(d) = &t.data {
                if d.len() == 1 {
                    plan.host_scalars[id as usize] = Some(d[0]);
                }
            }
            uploads.push((id, data::tensor_to_words(t, &format!("{what} ({})", describe(v, id)))?));
        }
        let mut index = 0;
        // The open device-side guard: (its gate dispatch, its first indirect slot).
        let mut gate: Option<(usize, u32)> = None;
        while index < p.ops.len() {
            plan.index = index;
            let err = |m: String| format!("op {index} (`{}`): {m}", p.ops[index].op.name());
            if let Some(last) = plan.guard_until {
                if index > last {
                    close_gate(&mut plan, gate.take());
                }
            }
            if let Op::IfZero { count } = p.ops[index].op {
                let flag = p.ops[index].inputs[0];
                match ops::flag(&plan, flag).map_err(err)? {
                    // Known on the host (a delegate input or constant): skip or run the range
                    // exactly as the reference does.
                    Some(0) => {}
                    Some(_) => {
                        index += 1 + count as usize;
                        continue;
                    }
                    // Computed on the device: the range's dispatches become indirect and a gate
                    // kernel zeroes their grids when the flag is not 0.
                    None => {
                        let mut pr = ops::params();
                        pr[0] = 0;
                        plan.dispatches.push(Dispatch {
                            kernel: Kernel::Gate,
                            params: pr,
                            binds: vec![Bind::Value(flag), Bind::Indirect],
                            groups: [1, 1, 1],
                            indirect: None,
                            op: index,
                        });
                        gate = Some((plan.dispatches.len() - 1, plan.indirect_slots));
                        plan.guard_until = Some(index + count as usize);
                    }
                }
                index += 1;
                continue;
            }
            ops::plan_op(&mut plan).map_err(err)?;
            index += 1;
        }
        close_gate(&mut plan, gate.take());
        let mut out_dims = Vec::with_capacity(p.outputs.len());
        for (pos, &id) in p.outputs.iter().enumerate() {
            match &plan.dims[id as usize] {
                Some(d) => out_dims.push(d.clone()),
                None => return Err(format!("delegate output {pos} ({}) was not produced", describe(&p.values[id as usize], id))),
            }
        }
        let dispatches = std::mem::take(&mut plan.dispatches);
        drop(plan);
        self.submit(&uploads, &dispatches, &out_dims)
    }

    fn bind_group(&self, k: usize, d: &Dispatch) -> R<wgpu::BindGroup> {
        let pipeline = self.pipelines.get(d.kernel);
        let mut entries = Vec::with_capacity(d.binds.len() + 1);
        entries.push(wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.params,
                offset: (k * PARAM_BYTES) as u64,
                size: std::num::NonZeroU64::new(PARAM_BYTES as u64),
            }),
        });
        for (j, b) in d.binds.iter().enumerate() {
            let buffer = match b {
                Bind::Value(id) => self.buffer(*id)?,
                Bind::Dummy => &self.dummy,
                Bind::Scratch => &self.scratch,
                Bind::Status => &self.status,
                Bind::Indirect => &self.indirect,
                Bind::OpTable(op) => self.op_tables[*op].as_ref().ok_or_else(|| format!("op {op} has no table"))?,
            };
            entries.push(wgpu::BindGroupEntry { binding: j as u32 + 1, resource: buffer.as_entire_binding() });
        }
        Ok(self.gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        }))
    }

    fn submit(&mut self, uploads: &[(ValueId, Vec<u32>)], dispatches: &[Dispatch], out_dims: &[Vec<usize>]) -> R<Vec<HostTensor>> {
        let gpu = self.gpu.clone();
        let (dev, queue) = (&gpu.device, &gpu.queue);
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        for (id, words) in uploads {
            if !words.is_empty() {
                queue.write_buffer(self.buffer(*id)?, 0, bytemuck::cast_slice(words));
            }
        }
        let need = dispatches.len().max(1) * PARAM_BYTES;
        if need > self.params_cap {
            self.params_cap = need.next_power_of_two();
            self.params = Self::params_buffer(&gpu, self.params_cap);
            self.bind_groups.clear();
        }
        let mut params = Vec::with_capacity(dispatches.len() * PARAM_WORDS);
        for d in dispatches {
            params.extend_from_slice(&d.params);
        }
        if !params.is_empty() {
            queue.write_buffer(&self.params, 0, bytemuck::cast_slice(&params));
        }
        let mut grids = Vec::new();
        for d in dispatches {
            if let Some(slot) = d.indirect {
                let at = slot as usize * 3;
                grids.resize(grids.len().max(at + 3), 0u32);
                grids[at..at + 3].copy_from_slice(&d.groups);
            }
        }
        if grids.len() * 4 > self.indirect_cap {
            self.indirect_cap = (grids.len() * 4).next_power_of_two();
            self.indirect = Self::indirect_buffer(&gpu, self.indirect_cap);
            self.bind_groups.clear();
        }
        if !grids.is_empty() {
            queue.write_buffer(&self.indirect, 0, bytemuck::cast_slice(&grids));
        }
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("rbuild-gpu run") });
        enc.clear_buffer(&self.status, 0, None);
        for (k, d) in dispatches.iter().enumerate() {
            let key = (k, d.kernel, d.binds.clone());
            if !self.bind_groups.contains_key(&key) {
                let bg = self.bind_group(k, d)?;
                self.bind_groups.insert(key, bg);
            }
        }
        let record = |pass: &mut wgpu::ComputePass<'_>, k: usize, d: &Dispatch| {
            pass.set_pipeline(self.pipelines.get(d.kernel));
            pass.set_bind_group(0, &self.bind_groups[&(k, d.kernel, d.binds.clone())], &[]);
            match d.indirect {
                Some(slot) => pass.dispatch_workgroups_indirect(&self.indirect, slot as u64 * 12),
                None => pass.dispatch_workgroups(d.groups[0], d.groups[1], d.groups[2]),
            }
        };
        // Profiling: one pass per dispatch with timestamps at its start and end.
        let queries = (self.profiling && !dispatches.is_empty()).then(|| {
            let n = (dispatches.len() * 2) as u32;
            let set = dev.create_query_set(&wgpu::QuerySetDescriptor { label: Some("profile"), ty: wgpu::QueryType::Timestamp, count: n });
            let resolve = dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("profile resolve"),
                size: n as u64 * 8,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            (set, resolve, n)
        });
        match &queries {
            Some((set, _, _)) => {
                for (k, d) in dispatches.iter().enumerate() {
                    let writes = wgpu::ComputePassTimestampWrites {
                        query_set: set,
                        beginning_of_pass_write_index: Some(2 * k as u32),
                        end_of_pass_write_index: Some(2 * k as u32 + 1),
                    };
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: Some(writes) });
                    record(&mut pass, k, d);
                }
            }
            None => {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("ops"), timestamp_writes: None });
                for (k, d) in dispatches.iter().enumerate() {
                    record(&mut pass, k, d);
                }
            }
        }
        if let Some((set, resolve, n)) = &queries {
            enc.resolve_query_set(set, 0..*n, resolve, 0);
        }
        // One readback buffer: the outputs, then the status words.
        let mut offsets = Vec::with_capacity(out_dims.len());
        let mut total = 0u64;
        for (&id, dims) in self.payload.outputs.iter().zip(out_dims) {
            let n: usize = dims.iter().product();
            let bytes = (data::words(self.payload.values[id as usize].meta.dtype, n) * 4) as u64;
            offsets.push((total, bytes));
            total += bytes;
        }
        let status_bytes = (self.payload.ops.len().max(1) * 4) as u64;
        let profile_bytes = queries.as_ref().map_or(0, |q| q.2 as u64 * 8);
        let need = total + status_bytes + profile_bytes;
        let readback = match self.readback.take() {
            Some(b) if b.size() >= need => b,
            _ => dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("readback"),
                size: need.next_power_of_two(),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        };
        for (&id, &(off, bytes)) in self.payload.outputs.iter().zip(&offsets) {
            if bytes > 0 {
                enc.copy_buffer_to_buffer(self.buffer(id)?, 0, &readback, off, bytes);
            }
        }
        enc.copy_buffer_to_buffer(&self.status, 0, &readback, total, status_bytes);
        if let Some((_, resolve, _)) = &queries {
            enc.copy_buffer_to_buffer(resolve, 0, &readback, total + status_bytes, profile_bytes);
        }
        queue.submit([enc.finish()]);
        let slice = readback.slice(..need);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        dev.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| format!("adapter {}: waiting for the run failed: {e}", gpu.info))?;
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(format!("adapter {}: the run was rejected: {e}", gpu.info));
        }
        rx.recv()
            .map_err(|_| format!("adapter {}: readback was dropped", gpu.info))?
            .map_err(|e| format!("adapter {}: cannot read the outputs back: {e}", gpu.info))?;
        // Copied out word by word: the mapped bytes carry no u32 alignment guarantee.
        let view = slice.get_mapped_range().map_err(|e| format!("adapter {}: cannot read the outputs back: {e}", gpu.info))?;
        let words: Vec<u32> = view.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        drop(view);
        readback.unmap();
        self.readback = Some(readback);
        let status = &words[(total / 4) as usize..((total + status_bytes) / 4) as usize];
        self.profile.clear();
        if queries.is_some() {
            let ticks = &words[((total + status_bytes) / 4) as usize..];
            let period = queue.get_timestamp_period() as f64;
            for (k, d) in dispatches.iter().enumerate() {
                let at = |i: usize| ticks[2 * i] as u64 | (ticks[2 * i + 1] as u64) << 32;
                let (t0, t1) = (at(2 * k), at(2 * k + 1));
                self.profile.push(DispatchTime {
                    op: d.op,
                    op_name: self.payload.ops[d.op].op.name(),
                    kernel: crate::shaders::file_of(d.kernel),
                    nanos: t1.saturating_sub(t0) as f64 * period,
                });
            }
        }
        if let Some((index, &code)) = status.iter().enumerate().find(|(_, &c)| c != 0) {
            let node = &self.payload.ops[index];
            let why = match code {
                1 => "the position (read on the device) is negative or past the cache".to_string(),
                2 => "an index is out of range for the table".to_string(),
                c => format!("kernel error code {c}"),
            };
            return Err(format!("op {index} (`{}`): {why}", node.op.name()));
        }
        let mut outs = Vec::with_capacity(out_dims.len());
        for ((&id, dims), &(off, bytes)) in self.payload.outputs.iter().zip(out_dims).zip(&offsets) {
            let w = &words[(off / 4) as usize..((off + bytes) / 4) as usize];
            outs.push(data::words_to_tensor(self.payload.values[id as usize].meta.dtype, dims, w));
        }
        Ok(outs)
    }
}
