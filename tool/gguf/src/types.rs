//! ggml tensor types: ids, names and block geometry, as gguf-py's `GGMLQuantizationType` and
//! `GGML_QUANT_SIZES` list them (ids are what a GGUF tensor info stores).

/// A ggml tensor element type. Every id gguf-py knows is recognised (so messages can name
/// it); [`GgmlType::can_dequantize`] says which ones this crate decodes.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // the names are ggml's, as llama.cpp prints them
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
    NVFP4,
    Q1_0,
}

/// Elements per K-quant super-block (ggml's `QK_K`).
pub const QK_K: usize = 256;

/// Per type: id, name, elements per block, bytes per block.
const TABLE: &[(GgmlType, u32, &str, usize, usize)] = {
    use GgmlType::*;
    &[
        (F32, 0, "F32", 1, 4),
        (F16, 1, "F16", 1, 2),
        (Q4_0, 2, "Q4_0", 32, 2 + 16),
        (Q4_1, 3, "Q4_1", 32, 2 + 2 + 16),
        // ids 4 and 5 were Q4_2/Q4_3, removed from ggml before GGUF existed.
        (Q5_0, 6, "Q5_0", 32, 2 + 4 + 16),
        (Q5_1, 7, "Q5_1", 32, 2 + 2 + 4 + 16),
        (Q8_0, 8, "Q8_0", 32, 2 + 32),
        // ggml's block_q8_1 is {f16 d, f16 s, i8 qs[32]} (static_assert in ggml-common.h);
        // gguf-py 0.19 still says 4 + 4 + 32, the layout of before d and s became f16.
        (Q8_1, 9, "Q8_1", 32, 2 + 2 + 32),
        (Q2_K, 10, "Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4),
        (Q3_K, 11, "Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12),
        (Q4_K, 12, "Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12),
        (Q5_K, 13, "Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12),
        (Q6_K, 14, "Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16),
        (Q8_K, 15, "Q8_K", QK_K, 4 + QK_K + QK_K / 8),
        (IQ2_XXS, 16, "IQ2_XXS", QK_K, 2 + QK_K / 4),
        (IQ2_XS, 17, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32),
        (IQ3_XXS, 18, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8),
        (IQ1_S, 19, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16),
        (IQ4_NL, 20, "IQ4_NL", 32, 2 + 16),
        (IQ3_S, 21, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4),
        (IQ2_S, 22, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16),
        (IQ4_XS, 23, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64),
        (I8, 24, "I8", 1, 1),
        (I16, 25, "I16", 1, 2),
        (I32, 26, "I32", 1, 4),
        (I64, 27, "I64", 1, 8),
        (F64, 28, "F64", 1, 8),
        (IQ1_M, 29, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32),
        (BF16, 30, "BF16", 1, 2),
        // ids 31..=33 and 36..=38 were the Q4_0_4_4-style repacked types, removed from ggml.
        (TQ1_0, 34, "TQ1_0", QK_K, 2 + 4 * 13),
        (TQ2_0, 35, "TQ2_0", QK_K, 2 + 64),
        (MXFP4, 39, "MXFP4", 32, 1 + 16),
        (NVFP4, 40, "NVFP4", 64, 4 + 32),
        (Q1_0, 41, "Q1_0", 128, 2 + 16),
    ]
};

// One TABLE row per variant; `ids_round_trip_and_are_unique` checks the order.
const _: () = assert!(TABLE.len() == GgmlType::Q1_0 as usize + 1);

impl GgmlType {
    fn entry(self) -> &'static (GgmlType, u32, &'static str, usize, usize) {
        // TABLE lists the variants in declaration order (checked below and by a test).
        &TABLE[self as usize]
    }

    /// The type with this GGUF/ggml id; None for ids no ggml version defines (or that it
    /// removed).
    pub fn from_id(id: u32) -> Option<Self> {
        TABLE.iter().find(|entry| entry.1 == id).map(|entry| entry.0)
    }

    pub fn id(self) -> u32 {
        self.entry().1
    }

    /// The name as llama.cpp prints it (`"Q4_0"`, `"BF16"`).
    pub fn name(self) -> &'static str {
        self.entry().2
    }

    /// Elements per block (1 for plain element types).
    pub fn block_size(self) -> usize {
        self.entry().3
    }

    /// Bytes per block.
    pub fn type_size(self) -> usize {
        self.entry().4
    }

    /// True for block-quantized types (everything whose block holds more than one element).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Whether [`crate::dequant::dequantize`] decodes this type.
    pub fn can_dequantize(self) -> bool {
        use GgmlType::*;
        matches!(
            self,
            F32 | F16 | BF16 | F64 | I8 | I16 | I32 | I64 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q8_1 | Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | Q8_K
        )
    }

    /// Every known type, in id order.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TABLE.iter().map(|entry| entry.0)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_unique() {
        for ty in GgmlType::all() {
            assert_eq!(GgmlType::from_id(ty.id()), Some(ty), "{ty}");
        }
        for (index, entry) in TABLE.iter().enumerate() {
            assert_eq!(entry.0 as usize, index, "{} is out of declaration order", entry.2);
        }
        for removed in [4, 5, 31, 32, 33, 36, 37, 38, 42, u32::MAX] {
            assert_eq!(GgmlType::from_id(removed), None, "{removed}");
        }
    }

    #[test]
    fn block_geometry_matches_ggml() {
        let expect = [
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q4_1, 32, 20),
            (GgmlType::Q5_0, 32, 22),
            (GgmlType::Q5_1, 32, 24),
            (GgmlType::Q8_0, 32, 34),
            (GgmlType::Q8_1, 32, 36),
            (GgmlType::Q2_K, 256, 84),
            (GgmlType::Q3_K, 256, 110),
            (GgmlType::Q4_K, 256, 144),
            (GgmlType::Q5_K, 256, 176),
            (GgmlType::Q6_K, 256, 210),
            (GgmlType::Q8_K, 256, 292),
            (GgmlType::BF16, 1, 2),
        ];
        for (ty, block, size) in expect {
            assert_eq!((ty.block_size(), ty.type_size()), (block, size), "{ty}");
        }
        assert!(GgmlType::Q4_0.is_quantized() && !GgmlType::F16.is_quantized());
    }
}
