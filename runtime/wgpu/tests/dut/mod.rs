//! The device under test of the shared conformance tests (`runtime/gpu-schedule/conformance`):
//! the first wgpu adapter.
#![allow(dead_code)] // each including test crate uses a different subset

use rbuild_gpu_wgpu::{DeviceChoice, GpuDevice, GpuProgram, WgpuGpuBackend};
use rbuild_runtime::backends::gpu::payload::Payload;

pub const NAME: &str = "wgpu adapter";
pub type Device = GpuDevice;
pub type Program = GpuProgram;

pub fn open() -> Result<Device, String> {
    GpuDevice::new(&DeviceChoice::Auto)
}

pub fn program<'d>(dev: &Device, p: &Payload, named: &dyn Fn(&str) -> Option<&'d [u8]>) -> Result<Program, String> {
    GpuProgram::new(dev, p, named)
}

pub fn backend(dev: Device) -> Box<dyn rbuild_runtime::backend::Backend> {
    Box::new(WgpuGpuBackend::new(dev))
}

pub fn kernel_file(k: rbuild_gpu_schedule::Kernel) -> &'static str {
    rbuild_gpu_wgpu::kernel_file(k)
}
