//! What `gpu "cuda"` platforms need at run time, for `rbuild doctor`, the build's closing note
//! and `rbuild verify`: the NVIDIA driver (with a device) and NVRTC. Probes only: the CLI never
//! runs CUDA kernels itself.

/// Ok when a runner could use CUDA on this machine; else what is missing and how to get it.
pub fn ready() -> Result<(), String> {
    rbuild_gpu_cuda::probe_driver()?;
    rbuild_gpu_cuda::load_nvrtc()
}

/// `(what, found or how to get it)` rows for `rbuild doctor`.
pub fn doctor() -> Vec<(&'static str, Result<String, String>)> {
    let driver = rbuild_gpu_cuda::probe_driver().map(|d| {
        format!("CUDA driver {}.{}, {} device(s)", d.driver_version / 1000, d.driver_version % 1000 / 10, d.devices)
    });
    let nvrtc = rbuild_gpu_cuda::load_nvrtc().map(|()| "loadable".to_string());
    vec![("NVIDIA driver (libcuda)", driver), ("NVRTC (libnvrtc.so.12)", nvrtc)]
}
