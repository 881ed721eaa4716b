//! safetensors ⇄ runtime tensors, with the `input.N` / `output.N` naming of rbuild's tensor
//! files (verify inputs, `rbuild run`, the generic runner, the testdata `*.io.safetensors`).

use std::collections::BTreeMap;
use std::path::Path;

use rbuild_runtime::ScalarType;
use safetensors::{Dtype, SafeTensors};

use crate::cli::{Failure, Outcome};

/// An owned tensor read from or written to a file (little-endian element bytes, contiguous).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

impl HostTensor {
    /// A 0-d tensor holding one element's bytes.
    pub fn scalar(dtype: ScalarType, data: Vec<u8>) -> HostTensor {
        HostTensor { dtype, shape: vec![], data }
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The elements as f64 (exact for every integer the tests and summaries meet); None for
    /// dtypes without a numeric reading here (complex, packed, float8).
    pub fn values_f64(&self) -> Option<Vec<f64>> {
        values_f64(self.dtype, &self.data)
    }
}

/// `data` (little-endian elements of `dtype`) as f64; None for dtypes without a numeric reading
/// here. Quantized integer types read as their stored integers.
pub fn values_f64(dtype: ScalarType, data: &[u8]) -> Option<Vec<f64>> {
    fn each<const N: usize>(data: &[u8], f: impl Fn([u8; N]) -> f64) -> Vec<f64> {
        data.chunks_exact(N).map(|c| f(c.try_into().unwrap_or([0; N]))).collect()
    }
    use ScalarType as S;
    Some(match dtype {
        S::Float => each(data, |b| f64::from(f32::from_le_bytes(b))),
        S::Double => each(data, f64::from_le_bytes),
        S::Half => each(data, |b| half::f16::from_le_bytes(b).to_f64()),
        S::BFloat16 => each(data, |b| half::bf16::from_le_bytes(b).to_f64()),
        S::Char | S::QInt8 => each(data, |b: [u8; 1]| f64::from(b[0] as i8)),
        S::Byte | S::QUInt8 | S::Bool => each(data, |b: [u8; 1]| f64::from(b[0])),
        S::Short => each(data, |b| f64::from(i16::from_le_bytes(b))),
        S::UInt16 => each(data, |b| f64::from(u16::from_le_bytes(b))),
        S::Int | S::QInt32 => each(data, |b| f64::from(i32::from_le_bytes(b))),
        S::UInt32 => each(data, |b| f64::from(u32::from_le_bytes(b))),
        S::Long => each(data, |b| i64::from_le_bytes(b) as f64),
        S::UInt64 => each(data, |b| u64::from_le_bytes(b) as f64),
        _ => return None,
    })
}

/// The runtime dtype of a safetensors dtype.
pub fn scalar_type(d: Dtype) -> Option<ScalarType> {
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

/// The safetensors dtype that stores a runtime dtype (quantized types as their integers).
pub fn safetensors_dtype(s: ScalarType) -> Option<Dtype> {
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

/// Every tensor of a safetensors file's bytes by name; header, offsets and shapes are
/// validated (errors name the tensor where one is at fault).
pub fn parse(bytes: &[u8]) -> Result<BTreeMap<String, HostTensor>, String> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| match tensor_problem(bytes) {
        Some(problem) => format!("not a valid safetensors file: {problem}"),
        None => format!("not a valid safetensors file: {e}"),
    })?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let dtype = scalar_type(view.dtype()).ok_or_else(|| format!("tensor '{name}' has unsupported dtype {:?}", view.dtype()))?;
        out.insert(name, HostTensor { dtype, shape: view.shape().to_vec(), data: view.data().to_vec() });
    }
    Ok(out)
}

/// Bits per element of a safetensors dtype name (the ones rbuild reads).
fn dtype_bits(name: &str) -> Option<usize> {
    Some(match name {
        "BOOL" | "U8" | "I8" => 8,
        "F16" | "BF16" | "I16" | "U16" => 16,
        "F32" | "I32" | "U32" => 32,
        "F64" | "I64" | "U64" => 64,
        _ => return None,
    })
}

/// The tensor a rejected file's header describes wrongly, named: the safetensors crate reports
/// a size mismatch or a data range past the end without saying which tensor it is.
fn tensor_problem(bytes: &[u8]) -> Option<String> {
    let header_len = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let header = bytes.get(8..8usize.checked_add(header_len)?)?;
    let data_len = bytes.len() - 8 - header_len;
    let entries: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(header).ok()?;
    for (name, info) in entries.iter().filter(|(name, _)| *name != "__metadata__") {
        let dtype = info["dtype"].as_str()?;
        let shape: Vec<u64> = info["shape"].as_array()?.iter().map(serde_json::Value::as_u64).collect::<Option<_>>()?;
        let [start, end] = info["data_offsets"].as_array()?.iter().map(serde_json::Value::as_u64).collect::<Option<Vec<_>>>()?[..] else {
            return None;
        };
        let need = shape.iter().try_fold(dtype_bits(dtype)? as u64, |n, &d| n.checked_mul(d)).map(|bits| bits / 8);
        if end < start || need != Some(end - start) {
            let need = need.map_or("more than 2^64".to_string(), |n| n.to_string());
            return Some(format!("tensor '{name}': {dtype} {shape:?} needs {need} bytes, its data_offsets [{start}, {end}] give {}", end.saturating_sub(start)));
        }
        if end > data_len as u64 {
            return Some(format!("tensor '{name}': data_offsets [{start}, {end}] run past the file's {data_len} bytes of data"));
        }
    }
    None
}

/// Every tensor of the safetensors file at `path`; errors name the file.
pub fn read_file(path: &Path) -> Outcome<BTreeMap<String, HostTensor>> {
    let bytes = std::fs::read(path).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    parse(&bytes).map_err(|e| Failure(format!("{}: {e}", path.display())))
}

/// The tensors named `{prefix}.0`, `{prefix}.1`, … in order (stops at the first gap).
pub fn numbered(tensors: &BTreeMap<String, HostTensor>, prefix: &str) -> Vec<HostTensor> {
    (0..).map_while(|i| tensors.get(&format!("{prefix}.{i}")).cloned()).collect()
}

/// `{prefix}.0`, `{prefix}.1`, … of the file at `path`; errors name the file.
pub fn read_numbered(path: &Path, prefix: &str) -> Outcome<Vec<HostTensor>> {
    Ok(numbered(&read_file(path)?, prefix))
}

/// The safetensors bytes of (name, tensor) pairs; errors name the tensor.
pub fn serialize(tensors: &[(String, HostTensor)]) -> Result<Vec<u8>, String> {
    let mut views = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        let dt = safetensors_dtype(t.dtype).ok_or_else(|| format!("tensor '{name}' has dtype {} which safetensors cannot store", t.dtype))?;
        let view = safetensors::tensor::TensorView::new(dt, t.shape.clone(), &t.data).map_err(|e| format!("tensor '{name}': {e}"))?;
        views.push((name.clone(), view));
    }
    safetensors::serialize(views, None).map_err(|e| e.to_string())
}

/// Writes (name, tensor) pairs to `path`, whole or not at all; errors name the file.
pub fn write_file(path: &Path, tensors: &[(String, HostTensor)]) -> Outcome {
    let bytes = serialize(tensors).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    crate::fs::write_atomic(path, &bytes).map_err(Failure)
}
