//! `cargo build` of a generated crate; the binary's path comes from cargo's artifact messages.
//!
//! One target directory may serve many output folders (`RBUILD_TARGET_DIR`), so runners of
//! different recipes share their compiled dependencies. Cargo writes every runner of a template
//! to the same uplifted path (`release/llama_runner`), so the build and the copy out of the
//! target directory happen under one lock file: a concurrent build cannot swap the binary in
//! between.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cargo_metadata::Message;

#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// Rust target triple; None builds for the host.
    pub target: Option<String>,
    /// Shared target directory (reused across runners and runs).
    pub target_dir: PathBuf,
    pub features: Vec<String>,
    /// Extra environment (e.g. RBUILD_EMBED_PROGRAM, a cross linker).
    pub env: Vec<(String, String)>,
    pub release: bool,
    /// Flags for the binary's own compile only (`cargo rustc … -- FLAGS`), e.g. `-C
    /// strip=symbols`: unlike a profile setting, they leave the dependencies' build
    /// fingerprints alone, so the dependencies compiled for rbuild itself are reused.
    pub bin_rustc_args: Vec<String>,
}

/// Builds the crate at `dir` and hands its binary named `bin` to `install` (which copies it
/// out) while the target directory is still locked.
pub fn compile(dir: &Path, bin: &str, o: &CompileOptions, install: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    std::fs::create_dir_all(&o.target_dir).map_err(|e| format!("{}: {e}", o.target_dir.display()))?;
    // Released when the file is dropped, on every path out of this function.
    let _lock = lock_file(&o.target_dir.join(".rbuild-build.lock"))?;
    install(&build(dir, bin, o)?)
}

/// An exclusive lock on the file at `path` (created when absent), held until the returned file
/// is dropped; waits while another process holds it.
pub fn lock_file(path: &Path) -> Result<std::fs::File, String> {
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    file.lock().map_err(|e| format!("{}: cannot lock: {e}", path.display()))?;
    Ok(file)
}

fn build(dir: &Path, bin: &str, o: &CompileOptions) -> Result<PathBuf, String> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    // `cargo rustc` builds like `cargo build` and passes the flags after `--` to `bin` alone.
    cmd.arg("rustc").arg("--manifest-path").arg(dir.join("Cargo.toml")).arg("--bin").arg(bin);
    cmd.arg("--message-format=json-render-diagnostics").arg("--target-dir").arg(&o.target_dir);
    if o.release {
        cmd.arg("--release");
    }
    if let Some(t) = &o.target {
        cmd.arg("--target").arg(t);
    }
    if !o.features.is_empty() {
        cmd.arg("--features").arg(o.features.join(","));
    }
    if !o.bin_rustc_args.is_empty() {
        cmd.arg("--").args(&o.bin_rustc_args);
    }
    cmd.envs(o.env.iter().map(|(k, v)| (k, v)));
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = cmd.spawn().map_err(|e| format!("cargo: {e}"))?;
    let mut exe = None;
    let stdout = child.stdout.take().expect("piped stdout");
    for msg in Message::parse_stream(BufReader::new(stdout)) {
        if let Ok(Message::CompilerArtifact(a)) = msg {
            if a.target.name == bin {
                if let Some(e) = a.executable {
                    exe = Some(PathBuf::from(e.as_std_path()));
                }
            }
        }
    }
    let status = child.wait().map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build of {} failed ({status})", dir.display()));
    }
    exe.ok_or_else(|| format!("cargo built {} but reported no `{bin}` binary", dir.display()))
}
