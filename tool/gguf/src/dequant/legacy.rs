//! ggml's original 32-element block types. In each, element `j < 16` sits in the low nibble
//! of quant byte `j` and element `j + 16` in its high nibble; the 5-bit types keep each
//! element's fifth bit in a u32 (`qh`, bit `j` for element `j`).

use super::f16_at;

const BLOCK: usize = 32;

/// Q4_0 (18 bytes): f16 scale `d`, 16 bytes of 4-bit quants; x = (q - 8) * d.
pub fn q4_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(18).zip(out.chunks_exact_mut(BLOCK)) {
        let d = f16_at(block, 0);
        let qs = &block[2..18];
        for j in 0..16 {
            y[j] = d * f32::from((qs[j] & 0x0f) as i8 - 8);
            y[j + 16] = d * f32::from((qs[j] >> 4) as i8 - 8);
        }
    }
}

/// Q4_1 (20 bytes): f16 scale `d`, f16 minimum `m`, 4-bit quants; x = d * q + m.
pub fn q4_1(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(20).zip(out.chunks_exact_mut(BLOCK)) {
        let (d, m) = (f16_at(block, 0), f16_at(block, 2));
        let qs = &block[4..20];
        for j in 0..16 {
            y[j] = d * f32::from(qs[j] & 0x0f) + m;
            y[j + 16] = d * f32::from(qs[j] >> 4) + m;
        }
    }
}

/// The fifth bits of a 5-bit block: bit `j` of the little-endian u32 belongs to element `j`.
fn high_bits(block: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([block[at], block[at + 1], block[at + 2], block[at + 3]])
}

/// Q5_0 (22 bytes): f16 `d`, u32 fifth bits, 4-bit low quants; x = (q - 16) * d.
pub fn q5_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(22).zip(out.chunks_exact_mut(BLOCK)) {
        let d = f16_at(block, 0);
        let qh = high_bits(block, 2);
        let qs = &block[6..22];
        for j in 0..16 {
            let low = ((qs[j] & 0x0f) | (((qh >> j) & 1) << 4) as u8) as i8 - 16;
            let high = ((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4) as u8) as i8 - 16;
            y[j] = d * f32::from(low);
            y[j + 16] = d * f32::from(high);
        }
    }
}

/// Q5_1 (24 bytes): f16 `d`, f16 `m`, u32 fifth bits, 4-bit low quants; x = d * q + m.
pub fn q5_1(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(24).zip(out.chunks_exact_mut(BLOCK)) {
        let (d, m) = (f16_at(block, 0), f16_at(block, 2));
        let qh = high_bits(block, 4);
        let qs = &block[8..24];
        for j in 0..16 {
            let low = (qs[j] & 0x0f) | (((qh >> j) & 1) << 4) as u8;
            let high = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4) as u8;
            y[j] = d * f32::from(low) + m;
            y[j + 16] = d * f32::from(high) + m;
        }
    }
}

/// Q8_0 (34 bytes): f16 `d`, 32 signed bytes; x = q * d.
pub fn q8_0(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(34).zip(out.chunks_exact_mut(BLOCK)) {
        let d = f16_at(block, 0);
        for (value, &q) in y.iter_mut().zip(&block[2..34]) {
            *value = d * f32::from(q as i8);
        }
    }
}

/// Q8_1 (36 bytes): f16 `d`, f16 `s` (d times the quants' sum, a dot-product helper that
/// decoding ignores), 32 signed bytes; x = q * d. ggml has no reference decoder for it
/// (it is the activations' type in dot products) and gguf-py none either; this is Q8_0's.
pub fn q8_1(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(36).zip(out.chunks_exact_mut(BLOCK)) {
        let d = f16_at(block, 0);
        for (value, &q) in y.iter_mut().zip(&block[4..36]) {
            *value = d * f32::from(q as i8);
        }
    }
}
