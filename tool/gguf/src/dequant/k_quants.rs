//! ggml's K-quants: 256-element super-blocks of 16 or 32-element sub-blocks, each with its
//! own small integer scale (and for Q2_K/Q4_K/Q5_K a minimum) multiplied by the super-block's
//! f16 factors. Block layouts are ggml-common.h's `block_q*_K`, field by field.

use super::f16_at;
use crate::types::QK_K;

/// Q2_K (84 bytes): `scales[16]` (low nibble: scale, high nibble: minimum, per 16 elements),
/// `qs[64]` (2-bit quants), f16 `d`, f16 `dmin`; x = d * scale * q - dmin * min.
///
/// Each half of the block (128 elements) takes 32 quant bytes; bit pair `k` (shift `2k`) of
/// byte `l` is element `32k + l` of that half.
pub fn q2_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(84).zip(out.chunks_exact_mut(QK_K)) {
        let scales = &block[0..16];
        let qs = &block[16..80];
        let (d, dmin) = (f16_at(block, 80), f16_at(block, 82));
        for (i, value) in y.iter_mut().enumerate() {
            let (half, k, l) = (i / 128, (i % 128) / 32, i % 32);
            let q = (qs[32 * half + l] >> (2 * k)) & 3;
            let scale = scales[i / 16];
            let dl = d * f32::from(scale & 0x0f);
            let ml = dmin * f32::from(scale >> 4);
            *value = dl * f32::from(q) - ml;
        }
    }
}

/// Q3_K (110 bytes): `hmask[32]` (each element's third bit, set meaning "no -4"), `qs[64]`
/// (low 2 bits, arranged as in Q2_K), `scales[12]` (sixteen 6-bit scales, biased by 32),
/// f16 `d`; x = d * (scale - 32) * (low - (bit set ? 0 : 4)).
///
/// Bit `b` of hmask byte `l` belongs to element `32b + l`.
pub fn q3_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(110).zip(out.chunks_exact_mut(QK_K)) {
        let hmask = &block[0..32];
        let qs = &block[32..96];
        let scales = q3_k_scales(&block[96..108]);
        let d = f16_at(block, 108);
        for (i, value) in y.iter_mut().enumerate() {
            let (half, k, l) = (i / 128, (i % 128) / 32, i % 32);
            let low = ((qs[32 * half + l] >> (2 * k)) & 3) as i8;
            let high_bit_set = (hmask[l] >> (i / 32)) & 1 == 1;
            let q = low - if high_bit_set { 0 } else { 4 };
            let dl = d * f32::from(scales[i / 16]);
            *value = dl * f32::from(q);
        }
    }
}

/// Unpacks Q3_K's sixteen 6-bit scales: the low 4 bits of scale `i` are the low (i < 8) or
/// high (i >= 8) nibble of byte `i % 8`; the top 2 bits are bits `2 * (i / 4)` of byte
/// `8 + i % 4`. Returned with the bias of 32 removed.
fn q3_k_scales(packed: &[u8]) -> [i8; 16] {
    let mut scales = [0i8; 16];
    for (i, scale) in scales.iter_mut().enumerate() {
        let low = (packed[i % 8] >> (4 * (i / 8))) & 0x0f;
        let high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
        *scale = (low | (high << 4)) as i8 - 32;
    }
    scales
}

/// Q4_K's and Q5_K's eight 6-bit (scale, minimum) pairs in 12 bytes: pairs 0..4 are the low
/// 6 bits of bytes 0..4 (scales) and 4..8 (minimums); pairs 4..8 take their low 4 bits from
/// the nibbles of bytes 8..12 and their top 2 bits from the top bits of bytes 0..8.
fn k_scale_min(packed: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (packed[j] & 63, packed[j + 4] & 63)
    } else {
        let scale = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
        let min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
        (scale, min)
    }
}

/// Q4_K (144 bytes): f16 `d`, f16 `dmin`, `scales[12]` (eight 6-bit scale/minimum pairs, one
/// per 32 elements), `qs[128]`; x = d * scale * q - dmin * min.
///
/// Quant byte chunk `c` (32 bytes) holds sub-block `2c` in its low nibbles and `2c + 1` in
/// its high nibbles.
pub fn q4_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(144).zip(out.chunks_exact_mut(QK_K)) {
        let (d, dmin) = (f16_at(block, 0), f16_at(block, 2));
        let packed = &block[4..16];
        let qs = &block[16..144];
        for (sub, y) in y.chunks_exact_mut(32).enumerate() {
            let (scale, min) = k_scale_min(packed, sub);
            let (d1, m1) = (d * f32::from(scale), dmin * f32::from(min));
            let chunk = &qs[32 * (sub / 2)..32 * (sub / 2) + 32];
            for (value, &byte) in y.iter_mut().zip(chunk) {
                let q = (byte >> (4 * (sub % 2))) & 0x0f;
                *value = d1 * f32::from(q) - m1;
            }
        }
    }
}

/// Q5_K (176 bytes): as Q4_K, plus `qh[32]` between the scales and `qs` with each element's
/// fifth bit: bit `s` of byte `l` for element `l` of sub-block `s`.
pub fn q5_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(176).zip(out.chunks_exact_mut(QK_K)) {
        let (d, dmin) = (f16_at(block, 0), f16_at(block, 2));
        let packed = &block[4..16];
        let qh = &block[16..48];
        let qs = &block[48..176];
        for (sub, y) in y.chunks_exact_mut(32).enumerate() {
            let (scale, min) = k_scale_min(packed, sub);
            let (d1, m1) = (d * f32::from(scale), dmin * f32::from(min));
            let chunk = &qs[32 * (sub / 2)..32 * (sub / 2) + 32];
            for (l, value) in y.iter_mut().enumerate() {
                let low = (chunk[l] >> (4 * (sub % 2))) & 0x0f;
                let high = (qh[l] >> sub) & 1;
                *value = d1 * f32::from(low | (high << 4)) - m1;
            }
        }
    }
}

/// Q6_K (210 bytes): `ql[128]` (low 4 bits), `qh[64]` (high 2 bits), `scales[16]` (signed,
/// one per 16 elements), f16 `d`; x = d * scale * (q - 32).
///
/// In each half (128 elements; 64 `ql` bytes, 32 `qh` bytes), element `32k + l` takes the
/// low (k < 2) or high (k >= 2) nibble of `ql[l + 32 * (k % 2)]` and bit pair `k` of `qh[l]`.
pub fn q6_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(210).zip(out.chunks_exact_mut(QK_K)) {
        let ql = &block[0..128];
        let qh = &block[128..192];
        let scales = &block[192..208];
        let d = f16_at(block, 208);
        for (i, value) in y.iter_mut().enumerate() {
            let (half, k, l) = (i / 128, (i % 128) / 32, i % 32);
            let low = (ql[64 * half + l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
            let high = (qh[32 * half + l] >> (2 * k)) & 3;
            let q = (low | (high << 4)) as i8 - 32;
            let scale = scales[i / 16] as i8;
            *value = d * f32::from(scale) * f32::from(q);
        }
    }
}

/// Q8_K (292 bytes): f32 `d`, 256 signed bytes, then sixteen i16 sums of 16 quants (for dot
/// products; decoding ignores them); x = d * q.
pub fn q8_k(bytes: &[u8], out: &mut [f32]) {
    for (block, y) in bytes.chunks_exact(292).zip(out.chunks_exact_mut(QK_K)) {
        let d = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        for (value, &q) in y.iter_mut().zip(&block[4..4 + QK_K]) {
            *value = d * f32::from(q as i8);
        }
    }
}
