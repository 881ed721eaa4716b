//! [`GpuProgram`]: one payload on one device. Constants and state are uploaded once at
//! [`GpuProgram::new`]; [`GpuProgram::run`] uploads the inputs, records every op into one
//! command encoder (one submission, per-dispatch parameters in one uniform buffer written
//! before it) and reads the outputs back at the end.

use rbuild_gpu_schedule::schedule::{check_quantized_uses, const_scalar, initial_words, max_dims, plan_activations, plan_call, quantized_bytes, storage_roots};
use rbuild_gpu_schedule::{data, ops, Bind, Dispatch, DispatchTime, Kernel, PARAM_BYTES, PARAM_WORDS};
use rbuild_kernels::gpu_reference::HostTensor;
use rbuild_runtime::backends::gpu::payload::{describe, DType, Op, Payload, ValueId, ValueKind};

use crate::device::GpuDevice;
use crate::shaders::Pipelines;

type R<T = ()> = Result<T, String>;

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
        check_quantized_uses(payload, "wgpu")?;
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
            if let (ValueKind::Constant { .. }, Some(_)) = (&v.kind, v.meta.quant) {
                buffers.push(Some(Self::upload_quantized(gpu, payload, id, named_data)?));
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
            let words = initial_words(payload, id, named_data)?;
            let buffer = dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&what),
                size: bytes,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            const_scalars[i] = words.as_deref().and_then(|w| const_scalar(v, w));
            if let Some(w) = words {
                if !w.is_empty() {
                    gpu.queue.write_buffer(&buffer, 0, bytemuck::cast_slice(&w));
                }
            }
            buffers.push(Some(buffer));
        }
        let storage_of = storage_roots(payload);
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
    fn upload_quantized<'d>(gpu: &GpuDevice, payload: &Payload, id: ValueId, named_data: &dyn Fn(&str) -> Option<&'d [u8]>) -> R<wgpu::Buffer> {
        let what = describe(&payload.values[id as usize], id);
        let bytes = quantized_bytes(payload, id, named_data)?;
        let need = bytes.len();
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
        let max_groups = self.gpu.limits.max_compute_workgroups_per_dimension;
        let call = plan_call(&self.payload, &self.const_scalars, max_groups, inputs)?;
        self.submit(&call.uploads, &call.dispatches, &call.out_dims)
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
