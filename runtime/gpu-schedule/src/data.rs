//! Host <-> device encodings of tensor elements.
//!
//! On the device every tensor is an array of 32-bit words: f32 as f32; f16 and bf16 as packed
//! halves (element `i` in the low half of word `i/2` when `i` is even); i32 and i64 as i32 (an
//! i64 that does not fit is an error at upload); bool as one u32 (0/1) per element; grouped
//! int8/int4 weights as their packed bytes (4 per word, little-endian), scales in their own value.

use half::{bf16, f16};
use rbuild_kernels::gpu_reference::{round_to, HostData, HostTensor};
use rbuild_runtime::backends::gpu::payload::DType;

/// The dtype code kernels see (params words): 1 f32, 2 f16, 3 bf16, 4 i32 (i32/i64), 6 bool.
pub fn device_code(d: DType) -> u32 {
    match d {
        DType::F32 => 1,
        DType::F16 => 2,
        DType::BF16 => 3,
        DType::I32 | DType::I64 => 4,
        DType::Bool => 6,
        // Packed bytes, dequantized in the kernel with the weight's grouped scales.
        DType::QInt8Grouped => 16,
        DType::QInt4Grouped => 17,
    }
}

/// 32-bit words that hold `n` elements of `d` on the device.
pub fn words(d: DType, n: usize) -> usize {
    match d {
        DType::F16 | DType::BF16 => n.div_ceil(2),
        _ => n,
    }
}

fn pack_halves(bits: impl Iterator<Item = u16>, n: usize) -> Vec<u32> {
    let mut out = vec![0u32; n.div_ceil(2)];
    for (i, b) in bits.enumerate() {
        out[i / 2] |= (b as u32) << (16 * (i % 2));
    }
    out
}

/// Encodes float values into device words of `d` (f16/bf16 rounded to nearest).
pub fn floats_to_words(d: DType, v: &[f32]) -> Vec<u32> {
    match d {
        DType::F16 => pack_halves(v.iter().map(|&x| f16::from_f32(x).to_bits()), v.len()),
        DType::BF16 => pack_halves(v.iter().map(|&x| bf16::from_f32(x).to_bits()), v.len()),
        _ => v.iter().map(|x| x.to_bits()).collect(),
    }
}

/// Encodes integers as i32 words; `what` names the tensor in the error.
pub fn ints_to_words(v: &[i64], what: &str) -> Result<Vec<u32>, String> {
    v.iter()
        .enumerate()
        .map(|(i, &x)| {
            i32::try_from(x).map(|y| y as u32).map_err(|_| format!("{what}: element {i} = {x} does not fit in i32 (the GPU stores index tensors as i32)"))
        })
        .collect()
}

/// Device words of a host tensor whose dtype is `d`.
pub fn tensor_to_words(t: &HostTensor, what: &str) -> Result<Vec<u32>, String> {
    match &t.data {
        HostData::F32(v) => {
            let rounded: Vec<f32> = v.iter().map(|&x| round_to(t.dtype, x)).collect();
            Ok(floats_to_words(t.dtype, &rounded))
        }
        HostData::I64(v) => ints_to_words(v, what),
        HostData::Bool(v) => Ok(v.iter().map(|&b| (b != 0) as u32).collect()),
    }
}

/// Device words of little-endian bytes of `d` (constants and state initial values); the byte
/// count must already be checked.
pub fn bytes_to_words(d: DType, bytes: &[u8], what: &str) -> Result<Vec<u32>, String> {
    Ok(match d {
        DType::F32 | DType::I32 => bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        DType::F16 | DType::BF16 => {
            let n = bytes.len() / 2;
            pack_halves(bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])), n)
        }
        DType::I64 => {
            let v: Vec<i64> = bytes.chunks_exact(8).map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect();
            ints_to_words(&v, what)?
        }
        DType::Bool => {
            if let Some(b) = bytes.iter().find(|&&b| b > 1) {
                return Err(format!("{what}: bool byte {b} is not 0 or 1"));
            }
            bytes.iter().map(|&b| b as u32).collect()
        }
        q => return Err(format!("{what}: dtype {} is not supported by the wgpu runtime", q.name())),
    })
}

/// Bytes per element of a dense dtype in `named_data`.
pub fn element_bytes(d: DType) -> Option<usize> {
    match d {
        DType::F32 | DType::I32 => Some(4),
        DType::F16 | DType::BF16 => Some(2),
        DType::I64 => Some(8),
        DType::Bool => Some(1),
        DType::QInt8Grouped | DType::QInt4Grouped => None,
    }
}

/// Decodes device words into a host tensor of `dtype` and `dims`.
pub fn words_to_tensor(dtype: DType, dims: &[usize], w: &[u32]) -> HostTensor {
    let n: usize = dims.iter().product();
    let half = |i: usize| (w[i / 2] >> (16 * (i % 2))) as u16;
    let data = match dtype {
        DType::F16 => HostData::F32((0..n).map(|i| f16::from_bits(half(i)).to_f32()).collect()),
        DType::BF16 => HostData::F32((0..n).map(|i| bf16::from_bits(half(i)).to_f32()).collect()),
        DType::I32 | DType::I64 => HostData::I64(w[..n].iter().map(|&x| x as i32 as i64).collect()),
        DType::Bool => HostData::Bool(w[..n].iter().map(|&x| (x != 0) as u8).collect()),
        _ => HostData::F32(w[..n].iter().map(|&x| f32::from_bits(x)).collect()),
    };
    HostTensor { dtype, dims: dims.to_vec(), data }
}
