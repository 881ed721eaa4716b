//! [`CudaGpuBackend`]: the runtime `Backend` for `RbuildGpuBackend` delegates on a CUDA device,
//! with the CPU reference's `KernelArgs` conventions (shared `execute_call`).

use rbuild_kernels::gpu_reference::execute_call;
use rbuild_runtime::backend::{Backend, BackendInitContext, CompileSpec, DelegateHandle};
use rbuild_runtime::backends::gpu::payload::Payload;
use rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};

use crate::program::{CudaDevice, CudaProgram};

/// `RbuildGpuBackend` on one CUDA device.
#[derive(Clone, Debug)]
pub struct CudaGpuBackend {
    dev: CudaDevice,
}

impl CudaGpuBackend {
    pub fn new(dev: CudaDevice) -> CudaGpuBackend {
        CudaGpuBackend { dev }
    }
}

impl Backend for CudaGpuBackend {
    fn id(&self) -> &str {
        RBUILD_GPU_BACKEND_ID
    }

    fn init(&self, ctx: &BackendInitContext<'_>, processed: &[u8], _specs: &[CompileSpec<'_>]) -> Result<Box<dyn DelegateHandle>, String> {
        let who = format!("{RBUILD_GPU_BACKEND_ID} (CUDA, {})", self.dev.info);
        let payload = Payload::from_bytes(processed).map_err(|e| format!("{who}: {e}"))?;
        let program = CudaProgram::new(&self.dev, &payload, ctx.named_data).map_err(|e| format!("{who}: init: {e}"))?;
        Ok(Box::new(CudaGpuHandle { program }))
    }
}

/// An initialized delegate; its state (KV caches) stays on the device across calls.
pub struct CudaGpuHandle {
    pub program: CudaProgram,
}

impl DelegateHandle for CudaGpuHandle {
    fn execute(&mut self, _ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
        let (ni, no) = (self.program.payload().inputs.len(), self.program.payload().outputs.len());
        execute_call(ni, no, args, |inputs| self.program.run(inputs))
    }
}
