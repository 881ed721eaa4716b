//! `cargo build` of a generated crate; the binary's path comes from cargo's artifact messages.

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

/// Builds the crate at `dir` and returns the path of its binary named `bin`.
pub fn compile(dir: &Path, bin: &str, o: &CompileOptions) -> Result<PathBuf, String> {
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
