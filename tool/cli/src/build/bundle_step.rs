//! The `bundle:<platform>` step: `out/<recipe>/<platform>/bundle/` and
//! `<recipe>-<platform>.tar.gz` from the packaged files (see `rbuild-bundle`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rbuild_bundle::{BundleSpec, FirmwareSpec, MemoryRegion};
use rbuild_planner::{Dag, KeyHasher, StepSpec};
use rbuild_recipe::{Board, Platform, Probes, Recipe};

use crate::error::{CliError, CliResult};

/// A bare-metal target (`thumbv8m.main-none-eabihf`): its artifact is firmware.
pub fn is_firmware(p: &Platform) -> bool {
    p.rust_target.as_deref().is_some_and(|t| t.contains("-none"))
}

/// Board facts for a firmware bundle, from the platform file: each memory region with what the
/// firmware layout puts there, and the Corstone FVP for boards with an Ethos-U NPU. probe-rs and
/// pyOCD names are not in board files yet, so their flash commands carry placeholders.
pub fn firmware_spec(p: &Platform) -> FirmwareSpec {
    let Some(board) = &p.board else { return FirmwareSpec::default() };
    FirmwareSpec {
        regions: board_regions(board),
        fvp: match (board.cpu.as_deref(), board.npu.as_ref().map(|n| n.name.as_str())) {
            (Some("cortex-m55"), Some(npu)) if npu.starts_with("ethos-u55") => Some("FVP_Corstone_SSE-300_Ethos-U55".into()),
            (Some("cortex-m55"), Some(npu)) if npu.starts_with("ethos-u65") => Some("FVP_Corstone_SSE-300_Ethos-U65".into()),
            _ => None,
        },
        ..FirmwareSpec::default()
    }
}

/// The board's memory regions, each with what the firmware layout puts there.
pub fn board_regions(board: &Board) -> Vec<MemoryRegion> {
    let usage = |region: &str| -> String {
        let Some(l) = &board.firmware else { return String::new() };
        let mut uses = Vec::new();
        if l.code == region {
            uses.push("code");
        }
        if l.data == region {
            uses.push("data");
        }
        if l.program.iter().any(|r| r == region) {
            uses.push("program");
        }
        if l.arenas.iter().any(|r| r == region) {
            uses.push("arenas");
        }
        if l.heap.0 == region {
            uses.push("heap");
        }
        if l.stack.0 == region {
            uses.push("stack");
        }
        uses.join(", ")
    };
    board.memory.iter().map(|r| MemoryRegion { name: r.name.clone(), origin: r.origin, length: r.length, usage: usage(&r.name) }).collect()
}

/// The bundle folder and tarball of a platform's build.
pub fn paths(platform_dir: &Path, recipe: &str, platform: &str) -> (PathBuf, PathBuf) {
    (platform_dir.join("bundle"), platform_dir.join(format!("{recipe}-{platform}.tar.gz")))
}

/// What `add` needs from the build.
pub struct Inputs {
    pub platform_dir: PathBuf,
    /// The runner (hosted) or firmware ELF.
    pub artifact: PathBuf,
    pub artifact_name: String,
    /// The packaged `model.pte` (shipped unless the program is embedded).
    pub program: PathBuf,
    pub kernels_json: PathBuf,
    pub extra: Vec<PathBuf>,
    /// Steps whose outputs the bundle reads.
    pub deps: Vec<String>,
    pub rustc: String,
    pub version: String,
    /// The NPU export's `delegation.json`, recorded in the manifest.
    pub delegation: Option<PathBuf>,
    /// The int8 export's `int8-quality.json`, recorded in the manifest.
    pub int8_quality: Option<PathBuf>,
    /// The CPU-lowering twin of an NPU firmware, shipped for QEMU as `firmware-cpu-lowering.elf`.
    pub qemu_firmware: Option<PathBuf>,
}

pub fn add(dag: &mut Dag<'_>, r: &Recipe, p: &Platform, probes: &Probes, i: Inputs) -> CliResult<PathBuf> {
    let (dir, tarball) = paths(&i.platform_dir, &r.name, &p.name);
    let mut versions = BTreeMap::from([("rbuild".to_string(), env!("CARGO_PKG_VERSION").to_string()), ("rustc".to_string(), i.rustc.clone())]);
    // The platform's own tools (linker, emulator) with the version they report.
    for s in p.check_with(probes) {
        if let Some((_, v)) = s.found {
            if p.tools.iter().any(|t| t.name == s.tool) {
                versions.insert(s.tool, v);
            }
        }
    }
    let mut firmware = is_firmware(p).then(|| firmware_spec(p));
    if let (Some(fw), Some(npu)) = (&mut firmware, &r.backend.npu) {
        fw.npu_macs = Some(npu.accelerator.macs());
        fw.qemu_firmware = i.qemu_firmware.clone();
    }
    let spec = BundleSpec {
        recipe: r.name.clone(),
        recipe_sha256: rbuild_planner::hash::sha256_file(Path::new(r.source.name())).unwrap_or_default(),
        platform: p.name.clone(),
        rust_target: p.rust_target.clone().unwrap_or_else(|| "host".into()),
        model: serde_json::json!({
            "name": r.model.arch,
            "weights": r.model.weights.to_string(),
            "input_shape": r.model.input_shape,
            "dtype": format!("{:?}", r.model.dtype).to_lowercase(),
            "quantize": format!("{:?}", r.model.quantize).to_lowercase(),
        }),
        ops: vec![],
        versions,
        artifact: i.artifact.clone(),
        artifact_name: i.artifact_name.clone(),
        program: (!r.runner.embed_program).then(|| i.program.clone()),
        extra: i.extra.clone(),
        run_prefix: p.run.prefix(),
        run_args: {
            let mut args: Vec<String> = if r.runner.embed_program { vec![] } else { vec!["--model".into(), "model.pte".into()] };
            // The LLM runners read their tokenizer from the bundle too.
            for name in ["tekken.json", "tokenizer.json"] {
                if i.extra.iter().any(|p| p.file_name().is_some_and(|n| n == name)) {
                    args.extend(["--tokenizer".to_string(), name.to_string()]);
                    break;
                }
            }
            args
        },
        run_example: match r.runner.template.as_str() {
            "image-classifier" => "--image photo.png".into(),
            "llm" => "--prompt \"Once upon a time\" --max-new-tokens 32".into(),
            "audio-llm" => "--audio speech.wav".into(),
            // The generic runner on the bundled verify input (without --inputs: made-up inputs).
            rbuild_recipe::GENERIC_RUNNER if i.extra.iter().any(|p| p.file_name().is_some_and(|n| n == super::VERIFY_INPUT)) => {
                format!("--inputs {} --output outputs.safetensors", super::VERIFY_INPUT)
            }
            rbuild_recipe::GENERIC_RUNNER => "--output outputs.safetensors".into(),
            _ => "--help".into(),
        },
        size_report: None,
        delegation: None,
        int8_quality: None,
        firmware,
    };
    let key = KeyHasher::new().add("tool", &i.version).add("spec", &format!("{spec:?}")).clone();
    let kernels_json = i.kernels_json.clone();
    let delegation = i.delegation.clone();
    let int8_quality = i.int8_quality.clone();
    dag.add(
        StepSpec {
            id: format!("bundle:{}", p.name),
            label: format!("bundle out/{}/{}/bundle + {}", r.name, p.name, tarball.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()),
            deps: i.deps.clone(),
            key,
            outputs: vec![dir.join("manifest.json"), dir.join("SHA256SUMS"), tarball.clone()],
        },
        move |_| {
            let mut spec = spec;
            spec.ops = super::steps::selected_ops(&kernels_json)?;
            if let Some(path) = &delegation {
                let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
                spec.delegation = Some(serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))?);
            }
            if let Some(path) = &int8_quality {
                let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
                spec.int8_quality = Some(serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))?);
            }
            rbuild_bundle::write(&spec, &dir, &tarball).map(|_| ())
        },
    )
    .map_err(CliError)?;
    Ok(i.platform_dir.join(format!("{}-{}.tar.gz", r.name, p.name)))
}
