//! The WGSL kernels, embedded at build time, and their compiled pipelines.

use std::collections::HashMap;

use crate::device::GpuDevice;

/// One compute kernel (one file under `shaders/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kernel {
    Unary,
    Binary,
    Copy,
    Gemm,
    Gemv,
    Norm,
    Softmax,
    Attention,
    AttentionCombine,
    Rope,
    Embedding,
    Conv1d,
    Positions,
    Gate,
}

/// `(kernel, file name, source)` for every shader.
pub(crate) const SHADERS: &[(Kernel, &str, &str)] = &[
    (Kernel::Unary, "unary.wgsl", include_str!("../shaders/unary.wgsl")),
    (Kernel::Binary, "binary.wgsl", include_str!("../shaders/binary.wgsl")),
    (Kernel::Copy, "copy.wgsl", include_str!("../shaders/copy.wgsl")),
    (Kernel::Gemm, "gemm.wgsl", include_str!("../shaders/gemm.wgsl")),
    (Kernel::Gemv, "gemv.wgsl", include_str!("../shaders/gemv.wgsl")),
    (Kernel::Norm, "norm.wgsl", include_str!("../shaders/norm.wgsl")),
    (Kernel::Softmax, "softmax.wgsl", include_str!("../shaders/softmax.wgsl")),
    (Kernel::Attention, "attention.wgsl", include_str!("../shaders/attention.wgsl")),
    (Kernel::AttentionCombine, "attention_combine.wgsl", include_str!("../shaders/attention_combine.wgsl")),
    (Kernel::Rope, "rope.wgsl", include_str!("../shaders/rope.wgsl")),
    (Kernel::Embedding, "embedding.wgsl", include_str!("../shaders/embedding.wgsl")),
    (Kernel::Conv1d, "conv1d.wgsl", include_str!("../shaders/conv1d.wgsl")),
    (Kernel::Positions, "positions.wgsl", include_str!("../shaders/positions.wgsl")),
    (Kernel::Gate, "gate.wgsl", include_str!("../shaders/gate.wgsl")),
];

/// The shader file of a kernel.
pub(crate) fn file_of(k: Kernel) -> &'static str {
    SHADERS.iter().find(|s| s.0 == k).map_or("?", |s| s.1)
}

pub(crate) struct Pipelines {
    map: HashMap<Kernel, wgpu::ComputePipeline>,
}

impl Pipelines {
    /// Compiles every shader; an error names the file and the adapter.
    pub(crate) fn compile(gpu: &GpuDevice) -> Result<Pipelines, String> {
        let mut map = HashMap::new();
        for &(kernel, file, source) in SHADERS {
            map.insert(kernel, compile_one(gpu, file, source)?);
        }
        Ok(Pipelines { map })
    }

    pub(crate) fn get(&self, k: Kernel) -> &wgpu::ComputePipeline {
        // Every kernel is compiled in `compile`, so the entry exists.
        &self.map[&k]
    }
}

/// One shader's pipeline (entry point `main`); an error names the file and the adapter.
pub(crate) fn compile_one(gpu: &GpuDevice, file: &str, source: &str) -> Result<wgpu::ComputePipeline, String> {
    let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = gpu.device.create_shader_module(wgpu::ShaderModuleDescriptor { label: Some(file), source: wgpu::ShaderSource::Wgsl(source.into()) });
    let pipeline = gpu.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(file),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    match pollster::block_on(scope.pop()) {
        Some(e) => Err(format!("shader {file} does not compile on adapter {}: {e}", gpu.info)),
        None => Ok(pipeline),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceChoice;

    #[test]
    fn a_compile_failure_names_the_shader_and_the_adapter() {
        let gpu = match GpuDevice::new(&DeviceChoice::Auto) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("notice: no GPU adapter ({e}); skipping");
                return;
            }
        };
        let err = compile_one(&gpu, "broken.wgsl", "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }").unwrap_err();
        assert!(err.contains("shader broken.wgsl") && err.contains(&gpu.info.name), "{err}");
        assert!(compile_one(&gpu, "ok.wgsl", "@compute @workgroup_size(1) fn main() {}").is_ok());
    }
}
