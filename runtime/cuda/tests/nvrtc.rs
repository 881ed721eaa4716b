//! Checks that hold without a GPU: every CUDA kernel compiles with NVRTC for sm_80 and sm_90 and
//! its PTX assembles with ptxas (both from NVIDIA's PyPI wheels, installed by
//! tool/ci/setup.sh); each entry point takes the parameters the schedule passes (P, GATE, then
//! one pointer per binding of the WGSL twin); the compile cache is used on the second compile.

use std::path::PathBuf;
use std::process::Command;

use rbuild_gpu_cuda::{compile_kernel, kernel_sources, CHECKED_ARCHS};
use rbuild_gpu_schedule::Kernel;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// ptxas: `RBUILD_PTXAS`, else the repository venv's `nvidia-cuda-nvcc-cu12` wheel, else PATH.
fn ptxas() -> PathBuf {
    if let Some(p) = std::env::var_os("RBUILD_PTXAS") {
        return PathBuf::from(p);
    }
    if let Ok(entries) = std::fs::read_dir(repo().join(".venv/lib")) {
        for e in entries.flatten() {
            let p = e.path().join("site-packages/nvidia/cuda_nvcc/bin/ptxas");
            if p.is_file() {
                return p;
            }
        }
    }
    PathBuf::from("ptxas")
}

/// Parameters of the `.entry` named `function` in `ptx`.
fn entry_params(ptx: &str, function: &str) -> usize {
    let start = ptx.find(&format!(".entry {function}(")).unwrap_or_else(|| panic!("no .entry {function} in the PTX"));
    let body = &ptx[start..];
    let end = body.find(')').expect("entry parameter list ends");
    body[..end].matches(".param").count()
}

/// Storage bindings of the WGSL twin's file (binding 0, the parameters, is declared in its
/// prelude; it is `P` in CUDA).
fn wgsl_bindings(k: Kernel) -> usize {
    let file = rbuild_gpu_cuda::kernel_sources().iter().find(|s| s.kernel == k).unwrap().file.replace(".cu", ".wgsl");
    let src = std::fs::read_to_string(repo().join("runtime/wgpu/shaders").join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    src.matches("@binding(").count()
}

#[test]
fn every_kernel_compiles_for_ampere_and_hopper_and_assembles() {
    let cache = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread of this test binary reads the environment.
    unsafe { std::env::set_var("RBUILD_CUDA_CACHE", cache.path()) };
    let ptxas = ptxas();
    let version = Command::new(&ptxas).arg("--version").output();
    assert!(
        version.as_ref().is_ok_and(|o| o.status.success()),
        "ptxas not found at {} (run tool/ci/setup.sh, which installs nvidia-cuda-nvcc-cu12, or set RBUILD_PTXAS)",
        ptxas.display()
    );
    let mut names: Vec<Kernel> = kernel_sources().iter().map(|s| s.kernel).collect();
    names.sort_by_key(|k| Kernel::ALL.iter().position(|a| a == k));
    assert_eq!(names, Kernel::ALL, "one CUDA kernel per schedule kernel");
    for k in kernel_sources() {
        for arch in CHECKED_ARCHS {
            let compiled = compile_kernel(k, arch).unwrap_or_else(|e| panic!("{e}"));
            assert!(!compiled.cached, "{} {arch}: the first compile cannot come from an empty cache", k.file);
            assert_eq!(
                entry_params(&compiled.ptx, k.function),
                2 + wgsl_bindings(k.kernel),
                "kernels/{}: parameters are P, GATE and one pointer per binding of the WGSL twin",
                k.file
            );
            let dir = tempfile::tempdir().unwrap();
            let ptx = dir.path().join(format!("{}.ptx", k.function));
            std::fs::write(&ptx, &compiled.ptx).unwrap();
            let out = Command::new(&ptxas).arg(format!("-arch={arch}")).arg(&ptx).arg("-o").arg(dir.path().join("k.cubin")).output().unwrap();
            assert!(out.status.success(), "ptxas -arch={arch} kernels/{}:\n{}", k.file, String::from_utf8_lossy(&out.stderr));
            let again = compile_kernel(k, arch).unwrap();
            assert!(again.cached && again.ptx == compiled.ptx, "{} {arch}: the second compile reads the cache", k.file);
        }
    }
    let err = compile_kernel(&kernel_sources()[0], "compute_80").unwrap_err();
    assert!(err.contains("sm_XY"), "{err}");
}
