//! Typed views of the blocks of Q4_0, Q4_1 and Q8_0 tensors, for importing them in their
//! native quantization (no dequantize/requantize round trip). Each item is one block exactly
//! as ggml lays it out; pass [`crate::GgufFile::tensor_bytes`] (whole blocks; a trailing
//! partial block, which a parsed tensor never has, is ignored).

use half::f16;

fn f16_at(block: &[u8], at: usize) -> f16 {
    f16::from_le_bytes([block[at], block[at + 1]])
}

fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

/// Q4_0 blocks: (scale `d`, `qs`). Element `j < 16` is `(qs[j] & 0xf) - 8`, element `j + 16`
/// is `(qs[j] >> 4) - 8`, each times `d`.
pub fn q4_0(bytes: &[u8]) -> impl Iterator<Item = (f16, [u8; 16])> + '_ {
    bytes.chunks_exact(18).map(|block| (f16_at(block, 0), array(&block[2..])))
}

/// Q4_1 blocks: (scale `d`, minimum `m`, `qs`). Element `j < 16` is `d * (qs[j] & 0xf) + m`,
/// element `j + 16` is `d * (qs[j] >> 4) + m`.
pub fn q4_1(bytes: &[u8]) -> impl Iterator<Item = (f16, f16, [u8; 16])> + '_ {
    bytes.chunks_exact(20).map(|block| (f16_at(block, 0), f16_at(block, 2), array(&block[4..])))
}

/// Q8_0 blocks: (scale `d`, the 32 quants); element `j` is `qs[j] * d`.
pub fn q8_0(bytes: &[u8]) -> impl Iterator<Item = (f16, [i8; 32])> + '_ {
    bytes.chunks_exact(34).map(|block| (f16_at(block, 0), array::<32>(&block[2..]).map(|q| q as i8)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dequant::dequantize;
    use crate::GgmlType;

    /// Bytes that look like blocks: finite f16 scales in front, varied quants after.
    fn fake_blocks(block_bytes: usize, count: usize, scale_fields: usize) -> Vec<u8> {
        let mut bytes: Vec<u8> = (0..block_bytes * count).map(|i| (i * 37 % 251) as u8).collect();
        for block in bytes.chunks_exact_mut(block_bytes) {
            for field in 0..scale_fields {
                block[2 * field..2 * field + 2].copy_from_slice(&f16::from_f32(0.25 + field as f32).to_le_bytes());
            }
        }
        bytes
    }

    #[test]
    fn views_agree_with_dequantize() {
        let bytes = fake_blocks(18, 3, 1);
        let mut values = vec![0f32; 96];
        dequantize(GgmlType::Q4_0, &bytes, &mut values).unwrap();
        let mut rebuilt = Vec::new();
        for (d, qs) in q4_0(&bytes) {
            let d = d.to_f32();
            rebuilt.extend(qs.iter().map(|q| d * f32::from((q & 0xf) as i8 - 8)));
            rebuilt.extend(qs.iter().map(|q| d * f32::from((q >> 4) as i8 - 8)));
        }
        assert_eq!(rebuilt, values);

        let bytes = fake_blocks(20, 2, 2);
        dequantize(GgmlType::Q4_1, &bytes, &mut values[..64]).unwrap();
        let mut rebuilt = Vec::new();
        for (d, m, qs) in q4_1(&bytes) {
            let (d, m) = (d.to_f32(), m.to_f32());
            rebuilt.extend(qs.iter().map(|q| d * f32::from(q & 0xf) + m));
            rebuilt.extend(qs.iter().map(|q| d * f32::from(q >> 4) + m));
        }
        assert_eq!(rebuilt, values[..64]);

        let bytes = fake_blocks(34, 2, 1);
        dequantize(GgmlType::Q8_0, &bytes, &mut values[..64]).unwrap();
        let rebuilt: Vec<f32> =
            q8_0(&bytes).flat_map(|(d, qs)| qs.map(|q| d.to_f32() * f32::from(q))).collect();
        assert_eq!(rebuilt, values[..64]);
        assert_eq!(q8_0(&bytes[..67]).count(), 1, "a trailing partial block is ignored");
    }
}
