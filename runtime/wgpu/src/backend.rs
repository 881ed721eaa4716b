//! [`WgpuGpuBackend`]: the runtime `Backend` for `RbuildGpuBackend` delegates on a wgpu device,
//! with the CPU reference backend's `KernelArgs` conventions (inputs, then outputs; dynamic
//! outputs resized; the program's dtype must equal the payload value's).

use rbuild_kernels::gpu_reference::execute_call;
use rbuild_runtime::backend::{Backend, BackendInitContext, CompileSpec, DelegateHandle};
use rbuild_runtime::backends::gpu::payload::Payload;
use rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID;
use rbuild_runtime::kernel::{KernelArgs, KernelContext, KernelResult};

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

impl DelegateHandle for WgpuGpuHandle {
    fn execute(&mut self, _ctx: &mut KernelContext, args: &KernelArgs<'_>) -> KernelResult {
        let (ni, no) = (self.program.payload().inputs.len(), self.program.payload().outputs.len());
        execute_call(ni, no, args, |inputs| self.program.run(inputs))
    }
}

