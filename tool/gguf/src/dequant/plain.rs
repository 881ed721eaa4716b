//! Element types that are not block-quantized: floats widen or narrow to f32, integers
//! convert as values (rounding to the nearest f32 above 2^24, as numpy's astype does).

use super::f16_at;

pub fn f32(bytes: &[u8], out: &mut [f32]) {
    for (value, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *value = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

pub fn f16(bytes: &[u8], out: &mut [f32]) {
    for (i, value) in out.iter_mut().enumerate() {
        *value = f16_at(bytes, 2 * i);
    }
}

/// bfloat16 is the top half of an f32.
pub fn bf16(bytes: &[u8], out: &mut [f32]) {
    for (value, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *value = f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16);
    }
}

pub fn f64(bytes: &[u8], out: &mut [f32]) {
    for (value, b) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        *value = f64::from_le_bytes(b.try_into().unwrap_or_default()) as f32;
    }
}

pub fn i8(bytes: &[u8], out: &mut [f32]) {
    for (value, &b) in out.iter_mut().zip(bytes) {
        *value = f32::from(b as i8);
    }
}

pub fn i16(bytes: &[u8], out: &mut [f32]) {
    for (value, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *value = f32::from(i16::from_le_bytes([b[0], b[1]]));
    }
}

pub fn i32(bytes: &[u8], out: &mut [f32]) {
    for (value, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *value = i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32;
    }
}

pub fn i64(bytes: &[u8], out: &mut [f32]) {
    for (value, b) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        *value = i64::from_le_bytes(b.try_into().unwrap_or_default()) as f32;
    }
}
