//! safetensors ⇄ runtime tensors (`input.N` / `output.N` naming): the runners' own code
//! (`rbuild_runner_support::tensors`), with rbuild's errors and its writer (which creates the
//! output folder).

use std::collections::BTreeMap;
use std::path::Path;

pub use rbuild_runner_support::tensors::{numbered, HostTensor};
use rbuild_runner_support::tensors;

use crate::error::{CliError, CliResult, InFile};

/// Reads every tensor of a safetensors file, validating header, offsets and shapes.
pub fn read_safetensors(path: &Path) -> CliResult<BTreeMap<String, HostTensor>> {
    tensors::read_file(path).map_err(|e| CliError(e.0))
}

/// Writes tensors (name, tensor) to a safetensors file atomically.
pub fn write_safetensors(path: &Path, tensors: &[(String, HostTensor)]) -> CliResult {
    let bytes = tensors::serialize(tensors).in_file(path)?;
    super::write_atomic(path, &bytes)
}
