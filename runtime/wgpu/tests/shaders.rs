//! Shader portability: every `shaders/*.wgsl` (walked, so new shaders are picked up) parses and
//! validates with naga and translates to MSL (Metal) and SPIR-V (Vulkan). Needs no adapter.

use std::path::Path;

use naga::back::{msl, spv};
use naga::valid::{Capabilities, ValidationFlags, Validator};

fn check_shader(path: &Path) -> Result<(), String> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string();
    let source = std::fs::read_to_string(path).map_err(|e| format!("{name}: cannot read: {e}"))?;
    let module = naga::front::wgsl::parse_str(&source).map_err(|e| format!("{name}: WGSL parse error:\n{}", e.emit_to_string(&source)))?;
    // What wgpu grants every Vulkan/Metal/DX12 adapter: the defaults plus f16 pack/unpack in f32
    // (`pack2x16float` is core WGSL; naga gates it only for old GL). No f16 arithmetic, no
    // subgroups.
    let caps = Capabilities::default() | Capabilities::SHADER_FLOAT16_IN_FLOAT32;
    let info = Validator::new(ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| format!("{name}: validation error:\n{}", e.emit_to_string(&source)))?;
    // MSL 1.0 (naga's default), the oldest version wgpu targets on Metal.
    let pipeline = msl::PipelineOptions::default();
    msl::write_string(&module, &info, &msl::Options::default(), &pipeline).map_err(|e| format!("{name}: MSL translation failed: {e}"))?;
    spv::write_vec(&module, &info, &spv::Options::default(), None).map_err(|e| format!("{name}: SPIR-V translation failed: {e}"))?;
    Ok(())
}

#[test]
fn every_shader_validates_and_translates_to_msl_and_spirv() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wgsl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no shaders under {}", dir.display());
    let errors: Vec<String> = files.iter().filter_map(|p| check_shader(p).err()).collect();
    assert!(errors.is_empty(), "{} shader(s) failed:\n{}", errors.len(), errors.join("\n\n"));
    // Every file is embedded in the crate (and every embedded name exists).
    let embedded = rbuild_gpu_wgpu::shader_files();
    for p in &files {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        assert!(embedded.contains(&name), "shaders/{name} is not embedded in shaders.rs");
    }
    assert_eq!(embedded.len(), files.len(), "shaders.rs embeds {embedded:?}");
}
