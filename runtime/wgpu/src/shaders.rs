//! The WGSL kernels, embedded at build time, and their compiled pipelines.

use std::collections::HashMap;

use crate::device::GpuDevice;

pub(crate) use rbuild_gpu_schedule::Kernel;

/// The shared WGSL every kernel starts with (`shaders/common/prelude.wgsl`).
pub(crate) const PRELUDE: &str = "common/prelude.wgsl";

/// A kernel's compiled source: `common/prelude.wgsl`, then the listed `common/` extras, then the
/// kernel file, joined at build time (WGSL has no includes).
macro_rules! kernel {
    ($kernel:ident, $file:literal $(, $extra:literal)*) => {
        (
            Kernel::$kernel,
            $file,
            &[$($extra),*],
            concat!(
                include_str!("../shaders/common/prelude.wgsl"),
                "\n",
                $(include_str!(concat!("../shaders/common/", $extra)), "\n",)*
                include_str!(concat!("../shaders/", $file)),
            ),
        )
    };
}

/// `(kernel, file name, common/ extras after the prelude, compiled source)` for every shader.
pub(crate) const SHADERS: &[(Kernel, &str, &[&str], &str)] = &[
    kernel!(Unary, "unary.wgsl"),
    kernel!(Binary, "binary.wgsl"),
    kernel!(Copy, "copy.wgsl"),
    kernel!(Gemm, "gemm.wgsl", "quant.wgsl"),
    kernel!(Gemv, "gemv.wgsl", "quant.wgsl"),
    kernel!(Norm, "norm.wgsl", "reduce256.wgsl"),
    kernel!(Softmax, "softmax.wgsl", "reduce256.wgsl"),
    kernel!(Attention, "attention.wgsl"),
    kernel!(AttentionCombine, "attention_combine.wgsl"),
    kernel!(Rope, "rope.wgsl"),
    kernel!(Embedding, "embedding.wgsl", "quant.wgsl"),
    kernel!(Conv1d, "conv1d.wgsl"),
    kernel!(Positions, "positions.wgsl"),
    kernel!(Gate, "gate.wgsl"),
];

/// How a kernel's source is put together, for error messages: `common/prelude.wgsl + … + file`.
pub(crate) fn parts_of(file: &str, extras: &[&str]) -> String {
    let mut s = PRELUDE.to_string();
    for e in extras {
        s.push_str(" + common/");
        s.push_str(e);
    }
    s.push_str(" + ");
    s.push_str(file);
    s
}

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
        for &(kernel, file, extras, source) in SHADERS {
            map.insert(kernel, compile_one(gpu, file, &parts_of(file, extras), source)?);
        }
        Ok(Pipelines { map })
    }

    pub(crate) fn get(&self, k: Kernel) -> &wgpu::ComputePipeline {
        // Every kernel is compiled in `compile`, so the entry exists.
        &self.map[&k]
    }
}

/// One shader's pipeline (entry point `main`); an error names the file, how its source was put
/// together (`parts`, e.g. `common/prelude.wgsl + norm.wgsl`) and the adapter.
pub(crate) fn compile_one(gpu: &GpuDevice, file: &str, parts: &str, source: &str) -> Result<wgpu::ComputePipeline, String> {
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
        Some(e) => Err(format!("shader {file} (compiled as {parts}) does not compile on adapter {}: {e}", gpu.info)),
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
        let err = compile_one(&gpu, "broken.wgsl", "broken.wgsl", "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }").unwrap_err();
        assert!(err.contains("shader broken.wgsl") && err.contains(&gpu.info.name), "{err}");
        assert!(compile_one(&gpu, "ok.wgsl", "ok.wgsl", "@compute @workgroup_size(1) fn main() {}").is_ok());
    }
}
