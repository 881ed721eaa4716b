//! Without an NVIDIA driver, opening a device is a clear error (never a panic from a missing
//! library); with one, the device opens and says what it is.

#[test]
fn opening_a_device_without_a_driver_is_a_clear_error() {
    match rbuild_gpu_cuda::CudaDevice::open(0) {
        Ok(dev) => eprintln!("notice: CUDA device present ({}); the no-driver path cannot be checked here", dev.info),
        Err(e) => {
            let has_driver = rbuild_gpu_cuda::probe_driver().is_ok();
            if !has_driver {
                assert!(e.starts_with("no NVIDIA driver found") || e.contains("cuInit") || e.contains("no CUDA device"), "{e}");
                assert!(e.contains("install the NVIDIA driver") || e.contains("no CUDA device"), "{e}");
            }
            eprintln!("CudaDevice::open(0): {e}");
        }
    }
    let err = match rbuild_gpu_cuda::CudaDevice::open(1 << 20) {
        Ok(_) => panic!("device 2^20 cannot exist"),
        Err(e) => e,
    };
    assert!(!err.is_empty());
}
