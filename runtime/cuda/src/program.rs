//! [`CudaDevice`] (a context, a stream and the compiled kernels) and [`CudaProgram`]: one
//! payload on one device. Constants and state are uploaded once at [`CudaProgram::new`];
//! [`CudaProgram::run`] plans the call with the shared schedule, uploads the inputs and the
//! launches' parameter words, launches every kernel on one stream and reads the outputs and
//! the kernels' status words back with one synchronization.
//!
//! Decode steps repeat the same launches (kernels, grids, buffers) with different parameter
//! words: the first such sequence is captured into a CUDA graph and replayed while the
//! launches are unchanged; only the inputs and parameter words are copied before each replay.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use rbuild_gpu_schedule::schedule::{check_quantized_uses, const_scalar, initial_words, max_dims, plan_activations, plan_call, quantized_bytes, storage_roots};
use rbuild_gpu_schedule::{data, ops, Bind, Dispatch, DispatchTime, Kernel, PARAM_WORDS};
use rbuild_kernels::gpu_reference::HostTensor;
use rbuild_runtime::backends::gpu::payload::{describe, DType, Op, Payload, ValueId, ValueKind};

use crate::compile::compile_kernel;
use crate::kernels::{block_of, kernel_sources, source_of};

type R<T = ()> = Result<T, String>;

/// Largest grid dimension the schedule may use (CUDA's y/z limit; x allows more).
const MAX_GROUPS: u32 = 65_535;

/// Device memory owned by one allocation, freed on drop.
struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Arc<cudarc::driver::CudaContext>,
}

impl DeviceBuffer {
    fn zeroed(ctx: &Arc<cudarc::driver::CudaContext>, bytes: usize, what: &str) -> R<DeviceBuffer> {
        let bytes = bytes.max(4);
        ctx.bind_to_thread().map_err(|e| format!("CUDA: {e}"))?;
        // SAFETY: the context is current on this thread; the pointer is owned by the returned
        // buffer and freed exactly once in Drop.
        let ptr = unsafe { cudarc::driver::result::malloc_sync(bytes) }.map_err(|e| format!("CUDA: cannot allocate {bytes} bytes for {what}: {e}"))?;
        let buffer = DeviceBuffer { ptr, bytes, ctx: ctx.clone() };
        // SAFETY: ptr is a live allocation of `bytes` bytes.
        unsafe { sys::cuMemsetD8_v2(ptr, 0, bytes) }.result().map_err(|e| format!("CUDA: clearing {what}: {e}"))?;
        Ok(buffer)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: ptr came from malloc_sync in this context and is freed only here.
        let _ = unsafe { cudarc::driver::result::free_sync(self.ptr) };
    }
}

/// One CUDA device with the kernels compiled for it.
#[derive(Clone)]
pub struct CudaDevice {
    ctx: Arc<cudarc::driver::CudaContext>,
    stream: Arc<cudarc::driver::CudaStream>,
    functions: Arc<HashMap<Kernel, cudarc::driver::CudaFunction>>,
    /// e.g. `NVIDIA H200 (sm_90, CUDA driver 12.8)`.
    pub info: String,
    /// `sm_XY`.
    pub arch: String,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice({})", self.info)
    }
}

impl CudaDevice {
    /// Probes the driver (a clear error when there is none), opens device `ordinal` and
    /// compiles (or loads from the cache) every kernel for its compute capability.
    pub fn open(ordinal: usize) -> R<CudaDevice> {
        let driver = crate::libs::probe_driver()?;
        if ordinal >= driver.devices as usize {
            return Err(format!("CUDA device {ordinal} does not exist ({} device(s))", driver.devices));
        }
        let ctx = cudarc::driver::CudaContext::new(ordinal).map_err(|e| format!("CUDA: cannot open device {ordinal}: {e}"))?;
        let (major, minor) = ctx.compute_capability().map_err(|e| format!("CUDA: {e}"))?;
        let arch = format!("sm_{major}{minor}");
        let name = ctx.name().unwrap_or_else(|_| format!("CUDA device {ordinal}"));
        let info = format!("{name} ({arch}, CUDA driver {}.{})", driver.driver_version / 1000, driver.driver_version % 1000 / 10);
        let mut functions = HashMap::new();
        for k in kernel_sources() {
            let compiled = compile_kernel(k, &arch)?;
            let module = ctx
                .load_module(cudarc::nvrtc::Ptx::from_src(compiled.ptx))
                .map_err(|e| format!("CUDA: loading kernels/{} on {info}: {e}", k.file))?;
            let f = module.load_function(k.function).map_err(|e| format!("CUDA: kernels/{}: {e}", k.file))?;
            functions.insert(k.kernel, f);
        }
        let stream = ctx.new_stream().map_err(|e| format!("CUDA: {e}"))?;
        Ok(CudaDevice { ctx, stream, functions: Arc::new(functions), info, arch })
    }
}

/// The launches of a captured graph: replayed while a call's launches are the same.
type LaunchKey = Vec<(Kernel, [u32; 3], Vec<Bind>, Option<u32>)>;

/// A payload compiled for one CUDA device.
pub struct CudaProgram {
    dev: CudaDevice,
    payload: Payload,
    /// Allocations; `slot_of[value]` indexes them (activations share by liveness, reshape
    /// outputs alias their input).
    buffers: Vec<DeviceBuffer>,
    slot_of: Vec<Option<usize>>,
    dummy: DeviceBuffer,
    scratch: DeviceBuffer,
    status: DeviceBuffer,
    params: DeviceBuffer,
    indirect: DeviceBuffer,
    const_scalars: Vec<Option<i64>>,
    op_tables: Vec<Option<DeviceBuffer>>,
    graph: Option<(LaunchKey, cudarc::driver::CudaGraph)>,
    use_graphs: bool,
    activation_bytes: u64,
    profiling: bool,
    profile: Vec<DispatchTime>,
}

impl CudaProgram {
    /// Validates the payload, uploads constants and state, allocates activations for each
    /// symbol's max (shared by liveness).
    pub fn new<'d>(dev: &CudaDevice, payload: &Payload, named_data: &dyn Fn(&str) -> Option<&'d [u8]>) -> R<CudaProgram> {
        payload.validate().map_err(|e| format!("{e}"))?;
        check_quantized_uses(payload, "CUDA")?;
        let ctx = &dev.ctx;
        let n = payload.values.len();
        let mut buffers = Vec::new();
        let mut slot_of = vec![None; n];
        let mut act_bytes = vec![0u64; n];
        let mut const_scalars = vec![None; n];
        for (i, v) in payload.values.iter().enumerate() {
            let id = i as ValueId;
            let what = describe(v, id);
            let dims = max_dims(payload, v);
            if let (ValueKind::Constant { .. }, Some(_)) = (&v.kind, v.meta.quant) {
                let bytes = quantized_bytes(payload, id, named_data)?;
                let b = DeviceBuffer::zeroed(ctx, bytes.len().next_multiple_of(4), &what)?;
                upload(&b, bytes, &what)?;
                slot_of[i] = Some(buffers.len());
                buffers.push(b);
                continue;
            }
            let elems = dims.iter().try_fold(1u128, |a, &d| a.checked_mul(d as u128)).unwrap_or(u128::MAX);
            let bytes = elems.div_ceil(if matches!(v.meta.dtype, DType::F16 | DType::BF16) { 2 } else { 1 }) * 4;
            let bytes = u64::try_from(bytes).ok().filter(|&b| b < (1 << 40)).ok_or_else(|| format!("{what}: shape {dims:?} is too large"))?.max(4);
            if matches!(v.kind, ValueKind::Activation) {
                act_bytes[i] = bytes;
                continue;
            }
            let b = DeviceBuffer::zeroed(ctx, bytes as usize, &what)?;
            if let Some(words) = initial_words(payload, id, named_data)? {
                const_scalars[i] = const_scalar(v, &words);
                upload(&b, words_as_bytes(&words), &what)?;
            }
            slot_of[i] = Some(buffers.len());
            buffers.push(b);
        }
        let storage_of = storage_roots(payload);
        let mut activation_bytes = 0;
        for (roots, size) in plan_activations(payload, &storage_of, &act_bytes) {
            activation_bytes += size;
            let b = DeviceBuffer::zeroed(ctx, size as usize, "activations")?;
            for id in roots {
                slot_of[id as usize] = Some(buffers.len());
            }
            buffers.push(b);
        }
        let op_tables = payload
            .ops
            .iter()
            .map(|node| match node.op {
                Op::Rope { theta, head_dim, .. } => {
                    let words = ops::rope_table(theta, head_dim);
                    let b = DeviceBuffer::zeroed(ctx, words.len() * 4, "rope frequencies")?;
                    upload(&b, words_as_bytes(&words), "rope frequencies")?;
                    Ok(Some(b))
                }
                _ => Ok(None),
            })
            .collect::<R<Vec<_>>>()?;
        Ok(CudaProgram {
            dummy: DeviceBuffer::zeroed(ctx, 16, "dummy")?,
            scratch: DeviceBuffer::zeroed(ctx, ops::attention_scratch_bytes(payload).max(16) as usize, "attention partials")?,
            status: DeviceBuffer::zeroed(ctx, payload.ops.len().max(1) * 4, "status")?,
            params: DeviceBuffer::zeroed(ctx, 64 * PARAM_WORDS * 4, "params")?,
            indirect: DeviceBuffer::zeroed(ctx, 64 * 12, "guarded grids")?,
            dev: dev.clone(),
            payload: payload.clone(),
            buffers,
            slot_of,
            const_scalars,
            op_tables,
            graph: None,
            use_graphs: std::env::var_os("RBUILD_CUDA_GRAPHS").is_none_or(|v| v != "0"),
            activation_bytes,
            profiling: false,
            profile: Vec::new(),
        })
    }

    /// Device bytes of all activation buffers (shared by liveness), for diagnostics.
    pub fn activation_bytes(&self) -> u64 {
        self.activation_bytes
    }

    /// Times every launch of the following runs with CUDA events (graphs are not used while
    /// profiling); see [`CudaProgram::last_profile`].
    pub fn set_profiling(&mut self, on: bool) -> R {
        self.profiling = on;
        Ok(())
    }

    /// Per-launch GPU times of the last run made with profiling on (empty otherwise).
    pub fn last_profile(&self) -> &[DispatchTime] {
        &self.profile
    }

    /// The current contents of a state value (KV caches), read back from the device: for tests
    /// and debugging, like the reference's `Interpreter::state`.
    pub fn read_state(&self, id: ValueId) -> R<HostTensor> {
        let v = self.payload.values.get(id as usize).ok_or_else(|| format!("value {id} does not exist"))?;
        if !matches!(v.kind, ValueKind::State { .. }) {
            return Err(format!("{} is not a state value", describe(v, id)));
        }
        let dims: Vec<usize> = max_dims(&self.payload, v).iter().map(|&d| d as usize).collect();
        let mut words = vec![0u32; data::words(v.meta.dtype, dims.iter().product())];
        self.dev.ctx.bind_to_thread().map_err(|e| format!("CUDA: {e}"))?;
        let stream = self.dev.stream.cu_stream();
        if !words.is_empty() {
            // SAFETY: the state's buffer holds exactly its words; `words` lives until the
            // synchronization below.
            unsafe { cudarc::driver::result::memcpy_dtoh_async(words.as_mut_slice(), self.value_ptr(id)?, stream) }.map_err(|e| format!("CUDA: {e}"))?;
        }
        self.dev.stream.synchronize().map_err(|e| format!("CUDA: reading {} failed: {e}", describe(v, id)))?;
        Ok(data::words_to_tensor(v.meta.dtype, &dims, &words))
    }

    pub fn payload(&self) -> &Payload {
        &self.payload
    }

    pub fn device(&self) -> &CudaDevice {
        &self.dev
    }

    fn value_ptr(&self, id: ValueId) -> R<sys::CUdeviceptr> {
        let slot = self.slot_of.get(id as usize).copied().flatten();
        slot.map(|s| self.buffers[s].ptr).ok_or_else(|| format!("{} has no device buffer", describe(&self.payload.values[id as usize], id)))
    }

    fn bind_ptr(&self, b: &Bind) -> R<sys::CUdeviceptr> {
        Ok(match b {
            Bind::Value(id) => self.value_ptr(*id)?,
            Bind::Dummy => self.dummy.ptr,
            Bind::Scratch => self.scratch.ptr,
            Bind::Status => self.status.ptr,
            Bind::Indirect => self.indirect.ptr,
            Bind::OpTable(op) => self.op_tables.get(*op).and_then(|t| t.as_ref()).map(|t| t.ptr).ok_or_else(|| format!("op {op} has no table"))?,
        })
    }

    /// Runs the graph on `inputs` (delegate-input order) and returns the delegate outputs, with
    /// the same checks and errors as the CPU reference's `Interpreter::run`.
    pub fn run(&mut self, inputs: &[HostTensor]) -> R<Vec<HostTensor>> {
        let call = plan_call(&self.payload, &self.const_scalars, MAX_GROUPS, inputs)?;
        self.dev.ctx.bind_to_thread().map_err(|e| format!("CUDA: {e}"))?;
        let stream = self.dev.stream.cu_stream();
        for (id, words) in &call.uploads {
            let ptr = self.value_ptr(*id)?;
            // SAFETY: the buffer holds the value at its largest shape, which bounds `words`
            // (the schedule checked the input's shape against the value's symbols); pageable
            // source memory is staged before the call returns.
            unsafe { cudarc::driver::result::memcpy_htod_async(ptr, words.as_slice(), stream) }.map_err(|e| format!("CUDA: input upload: {e}"))?;
        }
        self.ensure_capacity(&call.dispatches)?;
        let mut params = Vec::with_capacity(call.dispatches.len() * PARAM_WORDS);
        let mut grids = vec![0u32; call.indirect_slots as usize * 3];
        for d in &call.dispatches {
            params.extend_from_slice(&d.params);
            if let Some(slot) = d.indirect {
                grids[slot as usize * 3..slot as usize * 3 + 3].copy_from_slice(&d.groups);
            }
        }
        // SAFETY: ensure_capacity sized params and indirect for these launches. The host
        // slices are pageable memory, which the driver stages before the call returns, so
        // dropping them early (on an error below) is sound.
        unsafe {
            if !params.is_empty() {
                cudarc::driver::result::memcpy_htod_async(self.params.ptr, params.as_slice(), stream).map_err(|e| format!("CUDA: {e}"))?;
            }
            if !grids.is_empty() {
                cudarc::driver::result::memcpy_htod_async(self.indirect.ptr, grids.as_slice(), stream).map_err(|e| format!("CUDA: {e}"))?;
            }
            cudarc::driver::result::memset_d8_async(self.status.ptr, 0, self.status.bytes, stream).map_err(|e| format!("CUDA: {e}"))?;
        }
        let key: LaunchKey = call.dispatches.iter().map(|d| (d.kernel, d.groups, d.binds.clone(), d.indirect)).collect();
        let mut events = Vec::new();
        self.profile.clear();
        match &self.graph {
            _ if self.profiling => events = self.launch_profiled(&call.dispatches)?,
            Some((k, graph)) if *k == key => graph.launch().map_err(|e| format!("CUDA: graph replay: {e}"))?,
            _ if self.use_graphs && call.indirect_slots == 0 && !call.dispatches.is_empty() => {
                self.graph = None;
                let s = &self.dev.stream;
                s.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).map_err(|e| format!("CUDA: {e}"))?;
                let launched = self.launch_all(&call.dispatches);
                let captured = s.end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
                launched?;
                match captured.map_err(|e| format!("CUDA: graph capture: {e}"))? {
                    Some(graph) => {
                        graph.launch().map_err(|e| format!("CUDA: graph launch: {e}"))?;
                        self.graph = Some((key, graph));
                    }
                    None => self.launch_all(&call.dispatches)?,
                }
            }
            _ => self.launch_all(&call.dispatches)?,
        }
        let mut outs = Vec::with_capacity(call.out_dims.len());
        let mut host_words = Vec::with_capacity(call.out_dims.len());
        for (&id, dims) in self.payload.outputs.iter().zip(&call.out_dims) {
            let n = data::words(self.payload.values[id as usize].meta.dtype, dims.iter().product());
            let mut w = vec![0u32; n];
            if n > 0 {
                // SAFETY: the output's buffer holds at least n words (largest shape); a copy to
                // pageable memory completes before the call returns.
                unsafe { cudarc::driver::result::memcpy_dtoh_async(w.as_mut_slice(), self.value_ptr(id)?, stream) }.map_err(|e| format!("CUDA: {e}"))?;
            }
            host_words.push(w);
        }
        let mut status = vec![0u32; self.payload.ops.len().max(1)];
        // SAFETY: the status buffer has one word per op; the copy to pageable memory completes
        // before the call returns.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(status.as_mut_slice(), self.status.ptr, stream) }.map_err(|e| format!("CUDA: {e}"))?;
        self.dev.stream.synchronize().map_err(|e| format!("CUDA: the run failed on {}: {e}", self.dev.info))?;
        for (d, (start, end)) in call.dispatches.iter().zip(&events) {
            let ms = start.elapsed_ms(end).map_err(|e| format!("CUDA: {e}"))?;
            self.profile.push(DispatchTime {
                op: d.op,
                op_name: self.payload.ops[d.op].op.name(),
                kernel: source_of(d.kernel).file,
                nanos: ms as f64 * 1e6,
            });
        }
        if let Some((index, &code)) = status.iter().enumerate().find(|(_, &c)| c != 0) {
            let why = match code {
                1 => "the position (read on the device) is negative or past the cache".to_string(),
                2 => "an index is out of range for the table".to_string(),
                c => format!("kernel error code {c}"),
            };
            return Err(format!("op {index} (`{}`): {why}", self.payload.ops[index].op.name()));
        }
        for ((&id, dims), w) in self.payload.outputs.iter().zip(&call.out_dims).zip(host_words) {
            outs.push(data::words_to_tensor(self.payload.values[id as usize].meta.dtype, dims, &w));
        }
        Ok(outs)
    }

    /// Grows the params and guarded-grid buffers for `dispatches` (dropping a captured graph,
    /// whose launches point into the old ones).
    fn ensure_capacity(&mut self, dispatches: &[Dispatch]) -> R {
        let need = dispatches.len().max(1) * PARAM_WORDS * 4;
        if need > self.params.bytes {
            self.graph = None;
            self.params = DeviceBuffer::zeroed(&self.dev.ctx, need.next_power_of_two(), "params")?;
        }
        let slots = dispatches.iter().filter_map(|d| d.indirect).max().map_or(0, |s| s as usize + 1);
        if slots * 12 > self.indirect.bytes {
            self.graph = None;
            self.indirect = DeviceBuffer::zeroed(&self.dev.ctx, (slots * 12).next_power_of_two(), "guarded grids")?;
        }
        Ok(())
    }

    /// Each launch between two recorded events.
    fn launch_profiled(&self, dispatches: &[Dispatch]) -> R<Vec<(cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)>> {
        let mut events = Vec::with_capacity(dispatches.len());
        for k in 0..dispatches.len() {
            let event = || self.dev.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(|e| format!("CUDA: {e}"));
            let (start, end) = (event()?, event()?);
            start.record(&self.dev.stream).map_err(|e| format!("CUDA: {e}"))?;
            self.launch_range(dispatches, k..k + 1)?;
            end.record(&self.dev.stream).map_err(|e| format!("CUDA: {e}"))?;
            events.push((start, end));
        }
        Ok(events)
    }

    fn launch_all(&self, dispatches: &[Dispatch]) -> R {
        self.launch_range(dispatches, 0..dispatches.len())
    }

    /// Launches `dispatches[range]`; parameter words are indexed by position in `dispatches`.
    fn launch_range(&self, dispatches: &[Dispatch], range: std::ops::Range<usize>) -> R {
        let stream = self.dev.stream.cu_stream();
        for (k, d) in dispatches.iter().enumerate().take(range.end).skip(range.start) {
            let f = self.dev.functions.get(&d.kernel).ok_or_else(|| format!("kernel {:?} was not compiled", d.kernel))?;
            let mut ptrs: Vec<sys::CUdeviceptr> = Vec::with_capacity(d.binds.len() + 2);
            ptrs.push(self.params.ptr + (k * PARAM_WORDS * 4) as u64);
            ptrs.push(match d.indirect {
                Some(slot) => self.indirect.ptr + slot as u64 * 12,
                None => 0,
            });
            for b in &d.binds {
                ptrs.push(self.bind_ptr(b)?);
            }
            let mut args: Vec<*mut c_void> = ptrs.iter_mut().map(|p| p as *mut sys::CUdeviceptr as *mut c_void).collect();
            let block = block_of(d.kernel);
            let grid = (d.groups[0], d.groups[1], d.groups[2]);
            // SAFETY: the kernel's parameters are (P, GATE, one pointer per binding), matching
            // `args` (checked by the kernel table test); every pointer is a live allocation
            // sized by the schedule; `ptrs` outlives the launch call, which copies the values.
            unsafe { cudarc::driver::result::launch_kernel(f.cu_function(), grid, block, 0, stream, &mut args) }
                .map_err(|e| format!("CUDA: launching kernels/{} (op {}): {e}", source_of(d.kernel).file, d.op))?;
        }
        Ok(())
    }
}

fn words_as_bytes(words: &[u32]) -> &[u8] {
    // SAFETY: u32 has no padding and any byte pattern is a valid u8; the length is exact.
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, std::mem::size_of_val(words)) }
}

/// Synchronous upload of `bytes` into the start of `b`.
fn upload(b: &DeviceBuffer, bytes: &[u8], what: &str) -> R {
    if bytes.len() > b.bytes {
        return Err(format!("{what}: {} bytes do not fit its {}-byte buffer", bytes.len(), b.bytes));
    }
    if bytes.is_empty() {
        return Ok(());
    }
    b.ctx.bind_to_thread().map_err(|e| format!("CUDA: {e}"))?;
    // SAFETY: the destination holds at least bytes.len() bytes (checked above).
    unsafe { sys::cuMemcpyHtoD_v2(b.ptr, bytes.as_ptr() as *const c_void, bytes.len()) }
        .result()
        .map_err(|e| format!("CUDA: uploading {what}: {e}"))
}
