//! [`WgpuGpuBackend`]: the runtime `Backend` for `RbuildGpuBackend` delegates on a wgpu device,
//! with the CPU reference backend's `KernelArgs` conventions (inputs, then outputs; dynamic
//! outputs resized; the program's dtype must equal the payload value's).

use half::{bf16, f16};
use rbuild_kernels::gpu_reference::{HostData, HostTensor};
use rbuild_runtime::backend::{Backend, BackendInitContext, CompileSpec, DelegateHandle};
use rbuild_runtime::backends::gpu::payload::{DType, Payload};
use rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};
use rbuild_runtime::{kerr, ScalarType};

use crate::device::GpuDevice;
use crate::program::GpuProgram;

/// `RbuildGpuBackend` on one opened adapter.
#[derive(Clone, Debug)]
pub struct WgpuGpuBackend {
    gpu: GpuDevice,
}

impl WgpuGpuBackend {
    pub fn new(gpu: GpuDevice) -> WgpuGpuBackend {
        WgpuGpuBackend { gpu }
    }
}

impl Backend for WgpuGpuBackend {
    fn id(&self) -> &str {
        RBUILD_GPU_BACKEND_ID
    }

    fn init(&self, ctx: &BackendInitContext<'_>, processed: &[u8], _specs: &[CompileSpec<'_>]) -> Result<Box<dyn DelegateHandle>, String> {
        let who = format!("{RBUILD_GPU_BACKEND_ID} (wgpu, {})", self.gpu.info);
        let payload = Payload::from_bytes(processed).map_err(|e| format!("{who}: {e}"))?;
        let program = GpuProgram::new(&self.gpu, &payload, ctx.named_data).map_err(|e| format!("{who}: init: {e}"))?;
        Ok(Box::new(WgpuGpuHandle { program }))
    }
}

/// An initialized delegate; its state (KV caches) stays on the device across `execute` calls.
pub struct WgpuGpuHandle {
    pub program: GpuProgram,
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

fn element_size(d: DType) -> usize {
    match d {
        DType::F32 | DType::I32 => 4,
        DType::F16 | DType::BF16 => 2,
        DType::I64 => 8,
        _ => 1,
    }
}

/// Little-endian bytes of `dtype` -> host tensor.
fn decode(dtype: DType, dims: &[usize], bytes: &[u8], what: &str) -> Result<HostTensor, String> {
    let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| format!("{what}: shape {dims:?} overflows"))?;
    let need = n.checked_mul(element_size(dtype)).ok_or_else(|| format!("{what}: shape {dims:?} overflows"))?;
    if bytes.len() != need {
        return Err(format!("{what}: has {} bytes, dtype {} shape {dims:?} needs {need}", bytes.len(), dtype.name()));
    }
    let data = match dtype {
        DType::F32 => HostData::F32(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()),
        DType::F16 => HostData::F32(bytes.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()),
        DType::BF16 => HostData::F32(bytes.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect()),
        DType::I32 => HostData::I64(bytes.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64).collect()),
        DType::I64 => HostData::I64(bytes.chunks_exact(8).map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect()),
        _ => {
            if let Some(b) = bytes.iter().find(|&&b| b > 1) {
                return Err(format!("{what}: bool byte {b} is not 0 or 1"));
            }
            HostData::Bool(bytes.to_vec())
        }
    };
    Ok(HostTensor { dtype, dims: dims.to_vec(), data })
}

/// Host tensor -> little-endian bytes of its dtype.
fn encode(t: &HostTensor, out: &mut [u8]) -> Result<(), String> {
    let es = element_size(t.dtype);
    let n = t.data.len();
    if out.len() != n * es {
        return Err(format!("output buffer has {} bytes, {n} element(s) of {} need {}", out.len(), t.dtype.name(), n * es));
    }
    for (i, c) in out.chunks_exact_mut(es).enumerate() {
        match (&t.data, t.dtype) {
            (HostData::F32(v), DType::F16) => c.copy_from_slice(&f16::from_f32(v[i]).to_le_bytes()),
            (HostData::F32(v), DType::BF16) => c.copy_from_slice(&bf16::from_f32(v[i]).to_le_bytes()),
            (HostData::F32(v), _) => c.copy_from_slice(&v[i].to_le_bytes()),
            (HostData::I64(v), DType::I64) => c.copy_from_slice(&v[i].to_le_bytes()),
            (HostData::I64(v), _) => c.copy_from_slice(&(v[i] as i32).to_le_bytes()),
            (HostData::Bool(v), _) => c[0] = v[i],
        }
    }
    Ok(())
}

impl DelegateHandle for WgpuGpuHandle {
    fn execute(&mut self, _ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
        const ID: &str = RBUILD_GPU_BACKEND_ID;
        let (ni, no) = (self.program.payload().inputs.len(), self.program.payload().outputs.len());
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
        let outs = self.program.run(&inputs).map_err(|m| kerr!("{ID}: {m}"))?;
        for (j, o) in outs.iter().enumerate() {
            let mut t = args.out(ni + j).map_err(|e| kerr!("{ID}: output {j}: {e}"))?;
            let dtype = dtype_of(t.dtype).ok_or_else(|| kerr!("{ID}: output {j}: dtype {} is not supported", t.dtype))?;
            if dtype != o.dtype {
                return Err(kerr!("{ID}: output {j}: the program's tensor is {}, the payload's value is {}", dtype.name(), o.dtype.name()));
            }
            t.resize(&o.dims).map_err(|e| kerr!("{ID}: output {j}: {e}"))?;
            encode(o, t.bytes_mut()).map_err(|m| kerr!("{ID}: output {j}: {m}"))?;
        }
        Ok(())
    }
}
