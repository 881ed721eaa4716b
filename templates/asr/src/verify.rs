//! `--verify-input FILE`: the protocol shared by runners and `rbuild verify` (as the image
//! classifier speaks it). The file is a safetensors file whose `input.0` is the f32 PCM at the
//! program's sample rate; each output is printed as
//! `RBUILD_OUTPUT index=<i> dtype=<name> shape=<d0,d1,…> hex=<little-endian bytes>` and one
//! `RBUILD_STATS key=value …` line follows.

use safetensors::{Dtype, SafeTensors};

/// `input.0` as f32 samples (any shape; its elements in order).
pub fn read_pcm(bytes: &[u8]) -> Result<Vec<f32>, String> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| format!("not a safetensors file: {e}"))?;
    let view = st.tensor("input.0").map_err(|_| "no tensor named input.0".to_string())?;
    if view.dtype() != Dtype::F32 {
        return Err(format!("input.0 is {:?}; the audio must be float32 PCM", view.dtype()));
    }
    let data = view.data();
    if data.is_empty() {
        return Err("input.0 holds no samples".into());
    }
    Ok(data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// One `RBUILD_OUTPUT` line; `dtype` is the protocol's name ("float32", "int64").
pub fn output_line(index: usize, dtype: &str, shape: &[usize], bytes: &[u8]) -> String {
    let shape: Vec<String> = shape.iter().map(usize::to_string).collect();
    let mut line = format!("RBUILD_OUTPUT index={index} dtype={dtype} shape={} hex=", shape.join(","));
    line.reserve(bytes.len() * 2);
    for b in bytes {
        line.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        line.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    line
}
