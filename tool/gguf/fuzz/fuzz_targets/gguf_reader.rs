//! Fuzzes the GGUF reader: header, metadata (every value type, nested arrays), tensor infos
//! and the data layout checks, then every metadata accessor on every key, and the
//! dequantization of every tensor (up to 2^20 elements) and of the raw input as each type.
//! Any panic, hang or oversized allocation is a bug; errors are the expected outcome.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rbuild_gguf::{blocks, dequant, GgmlType, GgufFile};

/// Tensors with more elements are not dequantized (a valid but large tensor is not a bug).
const MAX_ELEMENTS: usize = 1 << 20;

/// Decodes the input's whole blocks as `ty` (reaching the decoders with arbitrary bytes,
/// which parsed files mostly do not).
fn dequantize_raw(ty: GgmlType, data: &[u8]) {
    let blocks = (data.len() / ty.type_size()).min(64);
    let mut out = vec![0f32; blocks * ty.block_size()];
    let result = dequant::dequantize(ty, &data[..blocks * ty.type_size()], &mut out);
    assert_eq!(result.is_ok(), ty.can_dequantize(), "{ty}");
}

fuzz_target!(|data: &[u8]| {
    for ty in GgmlType::all() {
        dequantize_raw(ty, data);
    }
    let Ok(file) = GgufFile::parse(data.to_vec(), "fuzz.gguf") else { return };
    for (key, value) in file.metadata() {
        // The same entry (by address: a NaN value never equals itself).
        assert!(file.get(key).is_some_and(|v| std::ptr::eq(v, value)), "{key}");
        let _ = file.get_str(key);
        let _ = file.get_u64(key);
        let _ = file.get_f64(key);
        let _ = file.get_bool(key);
        let _ = file.get_str_array(key);
        let _ = file.get_f64_array(key);
        let _ = file.get_i64_array(key);
        let _ = value.describe_type();
    }
    for tensor in file.tensors() {
        assert_eq!(file.tensor(&tensor.name), Some(tensor));
        let bytes = file.tensor_bytes(tensor);
        assert_eq!(bytes.len(), tensor.n_bytes(), "{}", tensor.name);
        let _ = tensor.shape();
        match tensor.ggml_type {
            GgmlType::Q4_0 => assert_eq!(blocks::q4_0(bytes).count() * 32, tensor.n_elements()),
            GgmlType::Q4_1 => assert_eq!(blocks::q4_1(bytes).count() * 32, tensor.n_elements()),
            GgmlType::Q8_0 => assert_eq!(blocks::q8_0(bytes).count() * 32, tensor.n_elements()),
            _ => {}
        }
        if tensor.n_elements() <= MAX_ELEMENTS {
            match file.dequantize(tensor) {
                Ok(values) => assert_eq!(values.len(), tensor.n_elements()),
                Err(e) => assert!(!tensor.ggml_type.can_dequantize(), "{e}"),
            }
        }
    }
});
