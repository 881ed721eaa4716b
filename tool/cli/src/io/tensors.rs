//! safetensors ⇄ runtime tensors (`input.N` / `output.N` naming).

use std::collections::HashMap;
use std::path::Path;

use rbuild_runtime::ScalarType;
use safetensors::{Dtype, SafeTensors};

use crate::error::{bail, CliResult, InFile};

/// An owned tensor read from or written to a file.
#[derive(Clone, Debug)]
pub struct HostTensor {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

pub fn dtype_to_scalar(d: Dtype) -> Option<ScalarType> {
    Some(match d {
        Dtype::BOOL => ScalarType::Bool,
        Dtype::U8 => ScalarType::Byte,
        Dtype::I8 => ScalarType::Char,
        Dtype::I16 => ScalarType::Short,
        Dtype::U16 => ScalarType::UInt16,
        Dtype::I32 => ScalarType::Int,
        Dtype::U32 => ScalarType::UInt32,
        Dtype::I64 => ScalarType::Long,
        Dtype::U64 => ScalarType::UInt64,
        Dtype::F16 => ScalarType::Half,
        Dtype::BF16 => ScalarType::BFloat16,
        Dtype::F32 => ScalarType::Float,
        Dtype::F64 => ScalarType::Double,
        _ => return None,
    })
}

pub fn scalar_to_dtype(s: ScalarType) -> Option<Dtype> {
    Some(match s {
        ScalarType::Bool => Dtype::BOOL,
        ScalarType::Byte | ScalarType::QUInt8 => Dtype::U8,
        ScalarType::Char | ScalarType::QInt8 => Dtype::I8,
        ScalarType::Short => Dtype::I16,
        ScalarType::UInt16 => Dtype::U16,
        ScalarType::Int | ScalarType::QInt32 => Dtype::I32,
        ScalarType::UInt32 => Dtype::U32,
        ScalarType::Long => Dtype::I64,
        ScalarType::UInt64 => Dtype::U64,
        ScalarType::Half => Dtype::F16,
        ScalarType::BFloat16 => Dtype::BF16,
        ScalarType::Float => Dtype::F32,
        ScalarType::Double => Dtype::F64,
        _ => return None,
    })
}

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
