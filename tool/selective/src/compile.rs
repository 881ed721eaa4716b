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
}

/// Builds the crate at `dir` and hands its binary named `bin` to `install` (which copies it
/// out) while the target directory is still locked.
pub fn compile(dir: &Path, bin: &str, o: &CompileOptions, install: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    std::fs::create_dir_all(&o.target_dir).map_err(|e| format!("{}: {e}", o.target_dir.display()))?;
    let lock_path = o.target_dir.join(".rbuild-build.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    lock.lock().map_err(|e| format!("{}: cannot lock: {e}", lock_path.display()))?;
    // Released when `lock` is dropped, on every path out of this function.
    install(&build(dir, bin, o)?)
}

fn build(dir: &Path, bin: &str, o: &CompileOptions) -> Result<PathBuf, String> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.arg("build").arg("--manifest-path").arg(dir.join("Cargo.toml")).arg("--bin").arg(bin);
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
