//! Ready-to-run bundles: `out/<recipe>/<platform>/bundle/` and its reproducible tarball.
//!
//! A hosted bundle holds the runner and `model.pte`; a firmware bundle holds `firmware.elf`
//! (symbols kept), flat `.bin` image(s) and Intel HEX made from its LOAD segments, and the
//! program when it is not linked in. Both get `manifest.json` (recipe hash, model, operators,
//! versions, per file size/sha256/format/load address, memory regions and flash commands for
//! firmware), `SHA256SUMS` (`sha256sum -c` format), run/flash scripts, `size-report.txt` and
//! `README.md`. [`check`] verifies a bundle folder or tarball against its own checksums.

pub mod archive;
mod check;
pub mod elf;
pub mod ihex;
mod report;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use check::{check_dir, check_files, check_tarball, Checked};

/// A memory region of a firmware board (from its board file), for the manifest and the size
/// report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRegion {
    pub name: String,
    pub origin: u64,
    pub length: u64,
    /// What the firmware puts there: "code", "program", "arena", "stack", …
    pub usage: String,
}

/// What a firmware bundle adds to a hosted one.
#[derive(Clone, Debug, Default)]
pub struct FirmwareSpec {
    pub regions: Vec<MemoryRegion>,
    /// probe-rs `--chip` name of the board's MCU, when known.
    pub probe_rs_chip: Option<String>,
    /// pyOCD `-t` target name, when known.
    pub pyocd_target: Option<String>,
    /// The Corstone FVP executable for this board (e.g. `FVP_Corstone_SSE-300_Ethos-U55`).
    pub fvp: Option<String>,
    /// Where `model.pte` must be loaded when it is not linked into the firmware.
    pub program_address: Option<u64>,
    /// The NPU's MACs per cycle (the FVP's `ethosu.num_macs`), for firmware with NPU delegates.
    pub npu_macs: Option<u32>,
    /// A second ELF that `run-qemu.sh` boots instead of `firmware.elf`, shipped as
    /// [`QEMU_FIRMWARE`]: QEMU has no NPU, so an NPU build boots its CPU-lowering twin.
    pub qemu_firmware: Option<PathBuf>,
}

/// The bundle name of an NPU firmware's CPU-lowering twin (see [`FirmwareSpec::qemu_firmware`]).
pub const QEMU_FIRMWARE: &str = "firmware-cpu-lowering.elf";

/// Everything a bundle is made from.
#[derive(Clone, Debug)]
pub struct BundleSpec {
    pub recipe: String,
    pub recipe_sha256: String,
    pub platform: String,
    pub rust_target: String,
    /// Model facts for the manifest (name, weights, input shape, dtype, quantization).
    pub model: serde_json::Value,
    /// The program's operators.
    pub ops: Vec<String>,
    /// Tool versions: rbuild, rustc, linker, … (no timestamps: bundles must be reproducible).
    pub versions: BTreeMap<String, String>,
    /// The built binary: the hosted runner, or the firmware ELF.
    pub artifact: PathBuf,
    /// Its name in the bundle (`image_classifier`; firmware is always `firmware.elf`).
    pub artifact_name: String,
    pub firmware: Option<FirmwareSpec>,
    /// `model.pte`, when the binary does not embed it.
    pub program: Option<PathBuf>,
    /// More files to ship as they are (tokenizer, the verify input).
    pub extra: Vec<PathBuf>,
    /// How a binary runs on a development machine: empty for native, else the emulator
    /// command before the binary (`qemu-aarch64 -L /usr/aarch64-linux-gnu`, or
    /// `qemu-system-arm -M mps3-an547 … -kernel`).
    pub run_prefix: Vec<String>,
    /// Arguments after the binary in the run script (`--model model.pte`).
    pub run_args: Vec<String>,
    /// What a user adds to run it, for the README (`--image photo.png`).
    pub run_example: String,
    /// A size report from the firmware's own generator; else one is made from the ELF sections.
    pub size_report: Option<String>,
    /// The delegation report (each op, where it runs and why; the delegate compiler's summary),
    /// recorded in the manifest as `delegation`.
    pub delegation: Option<serde_json::Value>,
    /// How the int8 program compares with its float original on the calibration samples,
    /// recorded in the manifest as `int8_quality`.
    pub int8_quality: Option<serde_json::Value>,
}

/// Where a bundle file's bytes are: made here, or an existing file copied as it is (a
/// program can be gigabytes: it is hashed and copied by streaming, never held in memory).
#[derive(Clone, Debug)]
pub enum Content {
    Bytes(Vec<u8>),
    Copy(PathBuf),
}

/// A file of the bundle before it is written.
#[derive(Clone, Debug)]
pub struct BundleFile {
    pub name: String,
    pub content: Content,
    pub size: u64,
    pub sha256: String,
    pub executable: bool,
    meta: serde_json::Value,
}

type File = BundleFile;

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// (size, sha256) of a file, read in 1 MiB pieces.
fn hash_file(path: &Path) -> Result<(u64, String), String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (mut h, mut size, mut buf) = (Sha256::new(), 0u64, vec![0u8; 1 << 20]);
    loop {
        let n = f.read(&mut buf).map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            return Ok((size, hex(&h.finalize())));
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn hex_addr(a: u64) -> String {
    format!("{a:#010x}")
}

fn format_of(name: &str) -> &'static str {
    match Path::new(name).extension().and_then(|e| e.to_str()) {
        Some("pte") => "executorch-pte",
        Some("safetensors") => "safetensors",
        Some("json") => "json",
        Some("txt") => "text",
        _ => "data",
    }
}

impl File {
    fn new(name: impl Into<String>, bytes: Vec<u8>, executable: bool, role: &str, format: &str) -> File {
        let name = name.into();
        let meta = serde_json::json!({"path": name, "role": role, "format": format, "load_address": null});
        let (size, sha256) = (bytes.len() as u64, sha256_hex(&bytes));
        File { name, content: Content::Bytes(bytes), size, sha256, executable, meta }
    }

    fn copy(name: impl Into<String>, from: &Path, role: &str, format: &str) -> Result<File, String> {
        let name = name.into();
        let meta = serde_json::json!({"path": name, "role": role, "format": format, "load_address": null});
        let (size, sha256) = hash_file(from)?;
        Ok(File { name, content: Content::Copy(from.to_path_buf()), size, sha256, executable: false, meta })
    }
}

/// What was written.
#[derive(Clone, Debug)]
pub struct Written {
    pub dir: PathBuf,
    pub tarball: PathBuf,
    /// (name, bytes) of every file in the bundle folder.
    pub files: Vec<(String, u64)>,
}

/// The bundle's files (small ones in memory, the program and data files by path), sorted.
pub fn build(spec: &BundleSpec) -> Result<Vec<BundleFile>, String> {
    let binary = read(&spec.artifact)?;
    let parsed = elf::Elf::parse(&binary).ok();
    let mut files: Vec<File> = Vec::new();
    let firmware = spec.firmware.as_ref();
    match firmware {
        Some(fw) => {
            let elf = parsed
                .as_ref()
                .ok_or_else(|| format!("{}: firmware is not a readable ELF file", spec.artifact.display()))?;
            let mut f = File::new("firmware.elf", binary.clone(), false, "firmware", &format!("elf32-{}", elf.machine_name()));
            f.meta["entry"] = hex_addr(elf.entry).into();
            f.meta["segments"] = elf
                .segments
                .iter()
                .map(|s| serde_json::json!({"load_address": hex_addr(s.paddr), "run_address": hex_addr(s.vaddr), "file_bytes": s.data.len(), "memory_bytes": s.memsz}))
                .collect();
            files.push(f);
            let images = elf::images(&elf.segments).map_err(|e| format!("{}: {e}", spec.artifact.display()))?;
            if images.is_empty() {
                return Err(format!("{}: the firmware ELF has no loadable bytes", spec.artifact.display()));
            }
            for img in &images {
                // One image: firmware.bin. Several (distant regions): one file per region.
                let name = if images.len() == 1 {
                    "firmware.bin".to_string()
                } else {
                    match fw.regions.iter().find(|r| img.base >= r.origin && img.base < r.origin + r.length) {
                        Some(r) => format!("firmware.{}.bin", r.name.to_lowercase()),
                        None => format!("firmware.{:#010x}.bin", img.base),
                    }
                };
                let mut f = File::new(name, img.bytes.clone(), false, "firmware image", "binary");
                f.meta["load_address"] = hex_addr(img.base).into();
                files.push(f);
            }
            let hex = ihex::intel_hex(&images, Some(elf.entry)).map_err(|e| format!("{}: {e}", spec.artifact.display()))?;
            files.push(File::new("firmware.hex", hex.into_bytes(), false, "firmware image", "intel-hex"));
        }
        None => {
            let format = parsed.as_ref().map_or_else(|| "executable".to_string(), |e| format!("elf{}-{}", if e.class64 { 64 } else { 32 }, e.machine_name()));
            files.push(File::new(spec.artifact_name.clone(), binary.clone(), true, "runner", &format));
        }
    }
    if let Some(p) = &spec.program {
        let mut f = File::copy("model.pte", p, "program", "executorch-pte")?;
        if let Some(a) = firmware.and_then(|f| f.program_address) {
            f.meta["load_address"] = hex_addr(a).into();
        }
        files.push(f);
    }
    if let Some(p) = firmware.and_then(|f| f.qemu_firmware.as_ref()) {
        files.push(File::copy(QEMU_FIRMWARE.to_string(), p, "firmware (CPU lowering, for QEMU)", "elf32-arm")?);
    }
    for p in &spec.extra {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).ok_or_else(|| format!("{}: not a file name", p.display()))?;
        let role = if name.contains("verify-input") { "verify input" } else { "data" };
        files.push(File::copy(name.clone(), p, role, format_of(&name))?);
    }
    let size_report = match (&spec.size_report, &parsed) {
        (Some(text), _) => text.clone(),
        (None, Some(elf)) => report::size_report(elf, firmware.map_or(&[][..], |f| &f.regions), &spec.artifact_name),
        (None, None) => format!("{}: not an ELF file; no section sizes\n", spec.artifact_name),
    };
    files.push(File::new("size-report.txt", size_report.into_bytes(), false, "size report", "text"));
    for (name, text) in report::scripts(spec, &files.iter().map(|f| f.name.clone()).collect::<Vec<_>>()) {
        files.push(File::new(name, text.into_bytes(), true, "script", "shell"));
    }
    let readme = report::readme(spec, &files.iter().map(|f| (f.name.clone(), f.size)).collect::<Vec<_>>());
    files.push(File::new("README.md", readme.into_bytes(), false, "documentation", "markdown"));
    files.sort_by(|a, b| a.name.cmp(&b.name));

    let manifest = manifest(spec, &files);
    files.push(File::new("manifest.json", manifest.into_bytes(), false, "manifest", "json"));
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let sums: String = files.iter().map(|f| format!("{}  {}\n", f.sha256, f.name)).collect();
    files.push(File::new("SHA256SUMS", sums.into_bytes(), false, "checksums", "sha256sum"));
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

fn manifest(spec: &BundleSpec, files: &[File]) -> String {
    let listed: Vec<serde_json::Value> = files
        .iter()
        .map(|f| {
            let mut m = f.meta.clone();
            m["bytes"] = f.size.into();
            m["sha256"] = f.sha256.clone().into();
            m
        })
        .collect();
    let mut v = serde_json::json!({
        "schema": "rbuild-bundle/1",
        "recipe": {"name": spec.recipe, "sha256": spec.recipe_sha256},
        "model": spec.model,
        "ops": spec.ops,
        "platform": {
            "name": spec.platform,
            "rust_target": spec.rust_target,
            "kind": if spec.firmware.is_some() { "firmware" } else { "hosted" },
        },
        "versions": spec.versions,
        "files": listed,
        "run": report::run_command(spec, files.iter().any(|f| f.name == "model.pte")),
    });
    if let Some(fw) = &spec.firmware {
        v["memory_regions"] = fw
            .regions
            .iter()
            .map(|r| serde_json::json!({"name": r.name, "origin": hex_addr(r.origin), "length": r.length, "use": r.usage}))
            .collect();
        v["flash"] = report::flash_commands(fw);
    }
    if let Some(q) = &spec.int8_quality {
        v["int8_quality"] = q.clone();
    }
    if let Some(d) = &spec.delegation {
        v["delegation"] = d.clone();
    }
    let mut text = serde_json::to_string_pretty(&v).expect("JSON values serialize");
    text.push('\n');
    text
}

/// Writes the bundle folder `dir` (replacing it whole) and the tarball `tarball`, whose
/// top folder is `<recipe>-<platform>`.
/// `size-report.txt` of an ELF file on disk: its sections against `regions` (see
/// [`report::size_report`]); the firmware build writes it next to `firmware.elf`.
pub fn size_report_file(elf: &Path, regions: &[MemoryRegion]) -> Result<String, String> {
    let bytes = std::fs::read(elf).map_err(|e| format!("{}: {e}", elf.display()))?;
    let parsed = elf::Elf::parse(&bytes).map_err(|e| format!("{}: {e}", elf.display()))?;
    let name = elf.file_name().map_or_else(|| elf.display().to_string(), |n| n.to_string_lossy().into_owned());
    Ok(report::size_report(&parsed, regions, &name))
}

pub fn write(spec: &BundleSpec, dir: &Path, tarball: &Path) -> Result<Written, String> {
    let files = build(spec)?;
    // Build the new folder next to the old one, then swap, so a reader never sees a mix.
    let parent = dir.parent().ok_or_else(|| format!("{}: no parent folder", dir.display()))?;
    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let staging = parent.join(format!(".bundle.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    for f in &files {
        let p = staging.join(&f.name);
        match &f.content {
            Content::Bytes(bytes) => std::fs::write(&p, bytes).map(drop),
            Content::Copy(from) => std::fs::copy(from, &p).map(drop),
        }
        .map_err(|e| format!("{}: {e}", p.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = if f.executable { 0o755 } else { 0o644 };
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::rename(&staging, dir).map_err(|e| format!("{}: {e}", dir.display()))?;

    // The tarball streams the written files (a copied file may have changed since it was
    // hashed: the size written in its header is checked against what is read).
    let entries: Vec<archive::FileEntry> = files
        .iter()
        .map(|f| archive::FileEntry { name: f.name.clone(), path: dir.join(&f.name), size: f.size, executable: f.executable })
        .collect();
    let top = format!("{}-{}", spec.recipe, spec.platform);
    let name = tarball.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = tarball.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let out = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    archive::write_tar_gz(&top, entries, std::io::BufWriter::new(out)).map_err(|e| format!("{}: {e}", tarball.display()))?;
    std::fs::rename(&tmp, tarball).map_err(|e| format!("{}: {e}", tarball.display()))?;
    Ok(Written {
        dir: dir.to_path_buf(),
        tarball: tarball.to_path_buf(),
        files: files.iter().map(|f| (f.name.clone(), f.size)).collect(),
    })
}
