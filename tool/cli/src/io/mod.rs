//! File I/O shared by commands: program bytes, safetensors tensors, atomic writes.

pub mod program;
pub mod tensors;

use std::path::Path;

use crate::error::{CliResult, InFile};

/// Writes `bytes` to `path` via a temporary file in the same folder and a rename, so an
/// interrupted write never leaves a half-written file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> CliResult {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).in_file(&tmp)?;
    std::fs::rename(&tmp, path).in_file(path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
