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
    (Kernel::Rope, "rope.wgsl", include_str!("../shaders/rope.wgsl")),
    (Kernel::Embedding, "embedding.wgsl", include_str!("../shaders/embedding.wgsl")),
    (Kernel::Conv1d, "conv1d.wgsl", include_str!("../shaders/conv1d.wgsl")),
    (Kernel::Positions, "positions.wgsl", include_str!("../shaders/positions.wgsl")),
    (Kernel::Gate, "gate.wgsl", include_str!("../shaders/gate.wgsl")),
];

pub(crate) struct Pipelines {
    map: HashMap<Kernel, wgpu::ComputePipeline>,
}

impl Pipelines {
    /// Compiles every shader; an error names the file and the adapter.
    pub(crate) fn compile(gpu: &GpuDevice) -> Result<Pipelines, String> {
        let mut map = HashMap::new();
        for &(kernel, file, source) in SHADERS {
            let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let module = gpu.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(file),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            let pipeline = gpu.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(file),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(format!("shader {file} does not compile on adapter {}: {e}", gpu.info));
            }
            map.insert(kernel, pipeline);
        }
        Ok(Pipelines { map })
    }

    pub(crate) fn get(&self, k: Kernel) -> &wgpu::ComputePipeline {
        // Every kernel is compiled in `compile`, so the entry exists.
        &self.map[&k]
    }
}
