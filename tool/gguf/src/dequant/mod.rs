//! Decoding tensor data to f32, one plain scalar function per type.
//!
//! Every decoder does its f32 arithmetic in the order ggml's reference `dequantize_row_*`
//! (and gguf-py's numpy port) does, without fused multiply-adds, so results match those
//! bit for bit.

mod k_quants;
mod legacy;
mod plain;

use crate::types::GgmlType;

/// Decodes `bytes` (whole blocks of `ty`) into `out`, one f32 per element. `bytes` must hold
/// exactly `out.len() / ty.block_size()` blocks; Err when the sizes disagree or the type is
/// one this crate does not decode ([`GgmlType::can_dequantize`]).
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), String> {
    let (block, block_bytes) = (ty.block_size(), ty.type_size());
    if out.len() % block != 0 {
        return Err(format!("{} values are not whole {ty} blocks of {block}", out.len()));
    }
    let blocks = out.len() / block;
    if blocks.checked_mul(block_bytes) != Some(bytes.len()) {
        return Err(format!("{} bytes are not the {blocks} {ty} blocks of {block_bytes} bytes that {} values take", bytes.len(), out.len()));
    }
    use GgmlType::*;
    match ty {
        F32 => plain::f32(bytes, out),
        F16 => plain::f16(bytes, out),
        BF16 => plain::bf16(bytes, out),
        F64 => plain::f64(bytes, out),
        I8 => plain::i8(bytes, out),
        I16 => plain::i16(bytes, out),
        I32 => plain::i32(bytes, out),
        I64 => plain::i64(bytes, out),
        Q4_0 => legacy::q4_0(bytes, out),
        Q4_1 => legacy::q4_1(bytes, out),
        Q5_0 => legacy::q5_0(bytes, out),
        Q5_1 => legacy::q5_1(bytes, out),
        Q8_0 => legacy::q8_0(bytes, out),
        Q8_1 => legacy::q8_1(bytes, out),
        Q2_K => k_quants::q2_k(bytes, out),
        Q3_K => k_quants::q3_k(bytes, out),
        Q4_K => k_quants::q4_k(bytes, out),
        Q5_K => k_quants::q5_k(bytes, out),
        Q6_K => k_quants::q6_k(bytes, out),
        Q8_K => k_quants::q8_k(bytes, out),
        other => return Err(format!("type {other} cannot be dequantized by rbuild")),
    }
    Ok(())
}

/// The little-endian f16 at `bytes[at..at + 2]`, widened (exactly) to f32.
fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_must_agree() {
        let mut out = [0f32; 32];
        assert!(dequantize(GgmlType::Q4_0, &[0; 18], &mut out).is_ok());
        assert!(dequantize(GgmlType::Q4_0, &[0; 17], &mut out).unwrap_err().contains("17 bytes"));
        assert!(dequantize(GgmlType::Q4_0, &[0; 18], &mut out[..31]).unwrap_err().contains("whole Q4_0 blocks"));
        let err = dequantize(GgmlType::IQ2_XXS, &[0; 66], &mut [0f32; 256]).unwrap_err();
        assert!(err.contains("IQ2_XXS"), "{err}");
    }

    #[test]
    fn q4_0_block_by_hand() {
        // d = 0.5; nibbles: element j is byte j's low half, element j + 16 its high half.
        let mut block = [0u8; 18];
        block[..2].copy_from_slice(&half::f16::from_f32(0.5).to_le_bytes());
        block[2] = 0x9f; // element 0: 15 - 8 = 7; element 16: 9 - 8 = 1
        block[3] = 0x08; // element 1: 0; element 17: -8
        let mut out = [0f32; 32];
        dequantize(GgmlType::Q4_0, &block, &mut out).unwrap();
        assert_eq!((out[0], out[16], out[1], out[17], out[2]), (3.5, 0.5, 0.0, -4.0, -4.0));
    }

    #[test]
    fn plain_types() {
        let mut out = [0f32; 2];
        dequantize(GgmlType::I16, &[0xff, 0xff, 0x10, 0x00], &mut out).unwrap();
        assert_eq!(out, [-1.0, 16.0]);
        dequantize(GgmlType::BF16, &[0x80, 0x3f, 0x00, 0xc0], &mut out).unwrap();
        assert_eq!(out, [1.0, -2.0]);
        let mut one = [0f32; 1];
        dequantize(GgmlType::I64, &((1i64 << 40) + 1).to_le_bytes(), &mut one).unwrap();
        assert_eq!(one[0], (1u64 << 40) as f32);
    }
}
