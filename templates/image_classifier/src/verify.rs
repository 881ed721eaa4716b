//! `--verify-input FILE`: the shared protocol between runners and `rbuild verify`. The file is
//! a safetensors file holding `input.0`, `input.1`, …; each output is printed as
//! `RBUILD_OUTPUT index=<i> dtype=<name> shape=<d0,d1,…> hex=<little-endian bytes>` and one
//! `RBUILD_STATS key=value …` line follows.

use rbuild_runtime::ScalarType;
use safetensors::{Dtype, SafeTensors};

/// An input tensor read from the verify file.
pub struct InputTensor {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

fn scalar_type(d: Dtype) -> Option<ScalarType> {
    Some(match d {
        Dtype::F32 => ScalarType::Float,
        Dtype::F64 => ScalarType::Double,
        Dtype::F16 => ScalarType::Half,
        Dtype::BF16 => ScalarType::BFloat16,
        Dtype::I8 => ScalarType::Char,
        Dtype::U8 => ScalarType::Byte,
        Dtype::I16 => ScalarType::Short,
        Dtype::I32 => ScalarType::Int,
        Dtype::I64 => ScalarType::Long,
        Dtype::BOOL => ScalarType::Bool,
        _ => return None,
    })
}

/// The protocol's dtype names.
pub fn dtype_name(t: ScalarType) -> &'static str {
    match t {
        ScalarType::Float => "float32",
        ScalarType::Double => "float64",
        ScalarType::Half => "float16",
        ScalarType::BFloat16 => "bfloat16",
        ScalarType::Char => "int8",
        ScalarType::Byte => "uint8",
        ScalarType::Short => "int16",
        ScalarType::Int => "int32",
        ScalarType::Long => "int64",
        ScalarType::Bool => "bool",
        _ => "unsupported",
    }
}

/// `input.0`, `input.1`, … of a safetensors file, in order (at least one).
pub fn read_inputs(bytes: &[u8]) -> Result<Vec<InputTensor>, String> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| format!("not a safetensors file: {e}"))?;
    let mut out = Vec::new();
    while let Ok(view) = st.tensor(&format!("input.{}", out.len())) {
        let dtype = scalar_type(view.dtype()).ok_or_else(|| format!("input.{}: unsupported dtype {:?}", out.len(), view.dtype()))?;
        out.push(InputTensor { dtype, shape: view.shape().to_vec(), data: view.data().to_vec() });
    }
    if out.is_empty() {
        return Err("no tensor named input.0".into());
    }
    Ok(out)
}

/// One `RBUILD_OUTPUT` line.
pub fn output_line(index: usize, dtype: ScalarType, shape: &[usize], bytes: &[u8]) -> String {
    let shape: Vec<String> = shape.iter().map(usize::to_string).collect();
    let mut line = format!("RBUILD_OUTPUT index={index} dtype={} shape={} hex=", dtype_name(dtype), shape.join(","));
    line.reserve(bytes.len() * 2);
    for b in bytes {
        line.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        line.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    line
}
