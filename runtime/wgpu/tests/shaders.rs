//! Shader portability: every kernel `shaders/*.wgsl` (walked, so new shaders are picked up) parses
//! and validates with naga and translates to MSL (Metal) and SPIR-V (Vulkan), as the exact source
//! the runtime compiles: the shared `shaders/common/*.wgsl` (prelude first) + the kernel file.
//! The shared files are not kernels; they are checked as part of every kernel that uses them.
//! Needs no adapter.

use std::path::Path;

use naga::back::{msl, spv};
use naga::valid::{Capabilities, ValidationFlags, Validator};

/// Checks one kernel's compiled `source`; `what` names it (kernel file and its shared parts).
fn check_source(what: &str, source: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| format!("{what}: WGSL parse error:\n{}", e.emit_to_string(source)))?;
    // What wgpu grants every Vulkan/Metal/DX12 adapter: the defaults plus f16 pack/unpack in f32
    // (`pack2x16float` is core WGSL; naga gates it only for old GL). No f16 arithmetic, no
    // subgroups.
    let caps = Capabilities::default() | Capabilities::SHADER_FLOAT16_IN_FLOAT32;
    let info = Validator::new(ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| format!("{what}: validation error:\n{}", e.emit_to_string(source)))?;
    // MSL 1.0 (naga's default), the oldest version wgpu targets on Metal.
    let pipeline = msl::PipelineOptions::default();
    msl::write_string(&module, &info, &msl::Options::default(), &pipeline).map_err(|e| format!("{what}: MSL translation failed: {e}"))?;
    spv::write_vec(&module, &info, &spv::Options::default(), None).map_err(|e| format!("{what}: SPIR-V translation failed: {e}"))?;
    Ok(())
}

fn wgsl_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "wgsl"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_shader_validates_and_translates_to_msl_and_spirv() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let read = |rel: &str| std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("shaders/{rel}: {e}"));
    // Kernels: the .wgsl files directly under shaders/ (shaders/common/ holds shared parts).
    let files = wgsl_files(&dir);
    assert!(!files.is_empty(), "no shaders under {}", dir.display());
    let embedded = rbuild_gpu_wgpu::shader_sources();
    let mut errors = Vec::new();
    for p in &files {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        let Some((_, shared, source)) = embedded.iter().find(|e| e.0 == name) else {
            errors.push(format!("shaders/{name} is not embedded in shaders.rs"));
            continue;
        };
        // The embedded source is exactly the shared files (prelude first) + the file on disk.
        assert_eq!(shared.first().map(String::as_str), Some("common/prelude.wgsl"), "{name}: {shared:?}");
        let mut expected = String::new();
        for s in shared {
            expected.push_str(&read(s));
            expected.push('\n');
        }
        expected.push_str(&read(name));
        assert!(*source == expected, "{name}: the embedded source is not {shared:?} + {name} as on disk (rebuild?)");
        let what = format!("{name} (compiled as {} + {name}; line numbers count from the top of {})", shared.join(" + "), shared[0]);
        if let Err(e) = check_source(&what, source) {
            errors.push(e);
        }
    }
    assert!(errors.is_empty(), "{} shader(s) failed:\n{}", errors.len(), errors.join("\n\n"));
    // Every embedded name exists as a kernel file.
    assert_eq!(embedded.len(), files.len(), "shaders.rs embeds {:?}", embedded.iter().map(|e| e.0).collect::<Vec<_>>());
    // Every shared file is part of some kernel (so none goes unchecked).
    for p in wgsl_files(&dir.join("common")) {
        let rel = format!("common/{}", p.file_name().and_then(|n| n.to_str()).unwrap_or("?"));
        assert!(embedded.iter().any(|e| e.1.contains(&rel)), "shaders/{rel} is used by no kernel");
    }
}

#[test]
fn a_broken_kernel_is_reported_with_its_file_and_the_prelude() {
    let prelude = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders/common/prelude.wgsl")).unwrap();
    let source = format!("{prelude}\n@compute @workgroup_size(1) fn main() {{ let x: u32 = pf(0u); }}\n");
    let err = check_source("broken.wgsl (compiled as common/prelude.wgsl + broken.wgsl)", &source).unwrap_err();
    assert!(err.starts_with("broken.wgsl (compiled as common/prelude.wgsl"), "{err}");
}
