//! The device under test of the shared conformance tests (`runtime/gpu-schedule/conformance`):
//! CUDA device 0, or a skip notice where there is no NVIDIA driver or GPU.
#![allow(dead_code)] // each including test crate uses a different subset

use rbuild_gpu_cuda::{CudaDevice, CudaGpuBackend, CudaProgram};
use rbuild_runtime::backends::gpu::payload::Payload;

pub const NAME: &str = "CUDA";
pub type Device = CudaDevice;
pub type Program = CudaProgram;

pub fn open() -> Result<Device, String> {
    CudaDevice::open(0)
}

pub fn program<'d>(dev: &Device, p: &Payload, named: &dyn Fn(&str) -> Option<&'d [u8]>) -> Result<Program, String> {
    CudaProgram::new(dev, p, named)
}

pub fn backend(dev: Device) -> Box<dyn rbuild_runtime::backend::Backend> {
    Box::new(CudaGpuBackend::new(dev))
}

pub fn kernel_file(k: rbuild_gpu_schedule::Kernel) -> &'static str {
    rbuild_gpu_cuda::kernel_sources().iter().find(|s| s.kernel == k).map_or("?", |s| s.file)
}
