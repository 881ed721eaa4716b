//! Finding CUDA's libraries at run time. cudarc opens them by name on first use and panics when
//! one is missing, so every entry point here probes first and returns an error that says what
//! is missing and how to install it.
//!
//! - The driver (`libcuda.so.1`, `nvcuda.dll`) comes with the NVIDIA driver only.
//! - NVRTC (`libnvrtc.so.12`) comes with the CUDA toolkit or PyPI's `nvidia-cuda-nvrtc-cu12`
//!   wheel. A wheel's library is not on the loader's path, so it is opened here by its full
//!   path first (`RBUILD_NVRTC`, then the active or repository virtual environment, then
//!   `~/.local`); the loader then hands cudarc the already-loaded library for its name.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What the driver reports about the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverInfo {
    /// e.g. 12080 for CUDA 12.8.
    pub driver_version: i32,
    pub devices: i32,
}

const DRIVER_HELP: &str = "install the NVIDIA driver (it provides libcuda.so.1); `nvidia-smi` should list the GPU";

/// Checks that the CUDA driver library loads, initializes and sees at least one device.
pub fn probe_driver() -> Result<DriverInfo, String> {
    // SAFETY: only tries to dlopen the driver under its known names; no symbol is called.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(format!("no NVIDIA driver found: the CUDA driver library (libcuda) cannot be loaded; {DRIVER_HELP}"));
    }
    cudarc::driver::result::init().map_err(|e| format!("the NVIDIA driver is present but cuInit failed: {e}; {DRIVER_HELP}"))?;
    let mut version = 0i32;
    // SAFETY: cuInit succeeded; the pointer is to a live i32.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| format!("cuDriverGetVersion failed: {e}"))?;
    let devices = cudarc::driver::result::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {e}"))?;
    if devices < 1 {
        return Err("the NVIDIA driver reports no CUDA device".into());
    }
    Ok(DriverInfo { driver_version: version, devices })
}

const NVRTC_HELP: &str = "install the CUDA toolkit or `pip install nvidia-cuda-nvrtc-cu12`, or set RBUILD_NVRTC to the path of libnvrtc.so.12";

/// Makes NVRTC loadable (see the module doc); the error names every place that was searched.
pub fn load_nvrtc() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED.get_or_init(find_and_open_nvrtc).clone()
}

fn find_and_open_nvrtc() -> Result<(), String> {
    let mut tried = Vec::new();
    for candidate in nvrtc_candidates() {
        if candidate.is_file() {
            return open_global(&candidate);
        }
        tried.push(candidate.display().to_string());
    }
    // SAFETY: only tries to dlopen NVRTC under its standard names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Ok(());
    }
    tried.push("libnvrtc.so.12 on the loader's search path".into());
    Err(format!("NVRTC (the CUDA runtime compiler) not found; tried {}; {NVRTC_HELP}", tried.join(", ")))
}

/// NVRTC library files to try, in order.
fn nvrtc_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("RBUILD_NVRTC") {
        let p = PathBuf::from(p);
        out.push(if p.is_dir() { p.join("libnvrtc.so.12") } else { p });
        return out;
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        roots.push(PathBuf::from(v));
    }
    // The repository's test venv (tests and `cargo run` start inside the workspace).
    if let Ok(mut dir) = std::env::current_dir() {
        loop {
            roots.push(dir.join(".venv"));
            if !dir.pop() {
                break;
            }
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(PathBuf::from(home).join(".local"));
    }
    for root in roots {
        for site in site_packages(&root) {
            out.push(site.join("nvidia/cuda_nvrtc/lib/libnvrtc.so.12"));
        }
    }
    for cuda in [std::env::var_os("CUDA_PATH").map(PathBuf::from), Some(PathBuf::from("/usr/local/cuda"))].into_iter().flatten() {
        out.push(cuda.join("lib64/libnvrtc.so.12"));
    }
    out
}

/// `root/lib/python3.*/site-packages` folders that exist.
pub(crate) fn site_packages(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join("lib")) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found
}

#[cfg(unix)]
fn open_global(path: &Path) -> Result<(), String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: NVRTC's initializers have no preconditions; the library stays loaded for the life
    // of the process (forgotten below), so symbols cudarc resolves from it stay valid.
    let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| format!("cannot load NVRTC from {}: {e}", path.display()))?;
    std::mem::forget(lib);
    Ok(())
}

#[cfg(not(unix))]
fn open_global(path: &Path) -> Result<(), String> {
    // SAFETY: as above; Windows keeps a loaded DLL for later loads by name.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("cannot load NVRTC from {}: {e}", path.display()))?;
    std::mem::forget(lib);
    Ok(())
}
