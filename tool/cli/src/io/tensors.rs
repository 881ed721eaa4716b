//! safetensors ⇄ runtime tensors (`input.N` / `output.N` naming).

use std::collections::HashMap;
use std::path::Path;

use rbuild_runtime::ScalarType;
use safetensors::SafeTensors;

use crate::error::{bail, CliResult, InFile};

/// An owned tensor read from or written to a file.
#[derive(Clone, Debug)]
pub struct HostTensor {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

pub use rbuild_export::weights::{safetensors_dtype as scalar_to_dtype, scalar_type as dtype_to_scalar};

/// Reads every tensor of a safetensors file, validating header, offsets and shapes.
pub fn read_safetensors(path: &Path) -> CliResult<HashMap<String, HostTensor>> {
    let bytes = std::fs::read(path).in_file(path)?;
    let st = SafeTensors::deserialize(&bytes).in_file(path)?;
    let mut out = HashMap::new();
    for (name, view) in st.tensors() {
        let Some(dtype) = dtype_to_scalar(view.dtype()) else {
            bail!("{}: tensor '{name}' has unsupported dtype {:?}", path.display(), view.dtype());
        };
        out.insert(name, HostTensor { dtype, shape: view.shape().to_vec(), data: view.data().to_vec() });
    }
    Ok(out)
}

/// The tensors named `{prefix}.0`, `{prefix}.1`, … in order (stops at the first gap).
pub fn numbered(tensors: &HashMap<String, HostTensor>, prefix: &str) -> Vec<HostTensor> {
    (0..).map_while(|i| tensors.get(&format!("{prefix}.{i}")).cloned()).collect()
}

/// Writes tensors (name, tensor) to a safetensors file atomically.
pub fn write_safetensors(path: &Path, tensors: &[(String, HostTensor)]) -> CliResult {
    let mut views = Vec::new();
    for (name, t) in tensors {
        let Some(dt) = scalar_to_dtype(t.dtype) else {
            bail!("{}: tensor '{name}' has dtype {} which safetensors cannot store", path.display(), t.dtype);
        };
        let view = safetensors::tensor::TensorView::new(dt, t.shape.clone(), &t.data).in_file(path)?;
        views.push((name.clone(), view));
    }
    let bytes = safetensors::serialize(views, None).in_file(path)?;
    super::write_atomic(path, &bytes)
}
