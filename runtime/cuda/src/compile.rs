//! NVRTC compilation of the kernels, cached on disk by content hash: a runner's first start on
//! a machine compiles (a few seconds), later starts read the PTX back. The driver JIT-compiles
//! the PTX for the exact device (and keeps its own cache of that step).

use std::path::PathBuf;

use crate::kernels::KernelSource;

/// One kernel compiled for one architecture.
#[derive(Clone, Debug)]
pub struct CompiledKernel {
    pub function: &'static str,
    pub arch: String,
    pub ptx: String,
    /// Whether it came from the disk cache.
    pub cached: bool,
}

/// Where compiled PTX is kept: `RBUILD_CUDA_CACHE`, else `$XDG_CACHE_HOME/rbuild/cuda`, else
/// `~/.cache/rbuild/cuda`; `None` (no caching) when none can be named.
pub fn ptx_cache_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RBUILD_CUDA_CACHE") {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("rbuild").join("cuda"))
}

/// 64-bit FNV-1a: stable across builds and platforms (std's hasher is not), enough to key a
/// cache whose entries are also checked by content (the PTX names its entry point).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for part in parts {
        for &b in *part {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// NVRTC options: `arch` is `sm_XY` (the virtual `compute_XY` is what PTX targets). No fast
/// math: the kernels must match their CPU twins to float32 rounding.
fn options(arch: &str) -> Result<Vec<String>, String> {
    let digits = arch.strip_prefix("sm_").filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    let Some(cc) = digits else { return Err(format!("CUDA architecture `{arch}` is not of the form sm_XY (e.g. sm_80)")) };
    Ok(vec![format!("--gpu-architecture=compute_{cc}"), "--fmad=true".into(), "--std=c++14".into()])
}

/// Compiles one kernel for `arch` with NVRTC (loaded on first use), or reads it from the cache.
pub fn compile_kernel(k: &KernelSource, arch: &str) -> Result<CompiledKernel, String> {
    let opts = options(arch)?;
    let key = fnv1a(&[k.source.as_bytes(), opts.join(" ").as_bytes(), nvrtc_version().as_bytes()]);
    let cache = ptx_cache_dir().map(|d| d.join(format!("{}-{arch}-{key:016x}.ptx", k.function)));
    if let Some(path) = &cache {
        if let Ok(ptx) = std::fs::read_to_string(path) {
            if ptx.contains(k.function) {
                return Ok(CompiledKernel { function: k.function, arch: arch.into(), ptx, cached: true });
            }
        }
    }
    crate::libs::load_nvrtc()?;
    let ptx = nvrtc_compile(k, &opts)?;
    if let Some(path) = &cache {
        // Best effort: a read-only home only costs the next start a compile.
        let _ = write_atomically(path, ptx.as_bytes());
    }
    Ok(CompiledKernel { function: k.function, arch: arch.into(), ptx, cached: false })
}

fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("ptx"), std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// NVRTC's version as `major.minor` (part of the cache key); empty when it is not loadable.
fn nvrtc_version() -> String {
    if crate::libs::load_nvrtc().is_err() {
        return String::new();
    }
    let (mut major, mut minor) = (0i32, 0i32);
    // SAFETY: NVRTC is loaded (checked above); both pointers are to live i32s.
    match unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }.result() {
        Ok(()) => format!("{major}.{minor}"),
        Err(_) => String::new(),
    }
}

fn nvrtc_compile(k: &KernelSource, opts: &[String]) -> Result<String, String> {
    let opts = cudarc::nvrtc::CompileOptions { options: opts.to_vec(), name: Some(k.file.into()), ..Default::default() };
    match cudarc::nvrtc::compile_ptx_with_opts(k.source, opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => {
            Err(format!("NVRTC could not compile kernels/{}:\n{}", k.file, log.to_string_lossy()))
        }
        Err(e) => Err(format!("NVRTC could not compile kernels/{}: {e:?}", k.file)),
    }
}
