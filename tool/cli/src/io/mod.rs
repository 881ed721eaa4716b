//! File I/O shared by commands: program bytes, safetensors tensors, atomic writes.

pub mod program;
pub mod tensors;

use std::path::Path;

use crate::error::{CliResult, InFile};

/// Writes `bytes` to `path` via a temporary file in the same folder and a rename, so an
/// interrupted write never leaves a half-written file (the planner's writer, with the file
/// named in the error).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> CliResult {
    rbuild_planner::cache::write_atomic(path, bytes).in_file(path)
}
