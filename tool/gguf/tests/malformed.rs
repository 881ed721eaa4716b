//! Malformed files fail with an error naming the file and the problem: never a panic, and
//! never an allocation sized by an unchecked count (the huge counts below would abort the
//! test process if they reached `Vec::with_capacity`).

mod common;

use common::{array, string, vt, GgufBuilder};
use rbuild_gguf::{GgmlType, GgufFile, MAX_ARRAY_NESTING};

/// The error message for `bytes`, which must not parse.
fn error(bytes: Vec<u8>) -> String {
    match GgufFile::parse(bytes, "bad.gguf") {
        Ok(_) => panic!("parsed a malformed file"),
        Err(e) => {
            assert_eq!(e.path, "bad.gguf");
            assert!(e.to_string().starts_with("bad.gguf: "), "{e}");
            e.message
        }
    }
}

fn assert_error(builder: &GgufBuilder, expected: &str) {
    let message = error(builder.build());
    assert!(message.contains(expected), "expected '{expected}' in: {message}");
}

/// A small valid file with metadata of several types and three tensors; its last byte is
/// tensor data, so every strict prefix is malformed.
fn small_valid_file() -> GgufBuilder {
    GgufBuilder::new()
        .kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 1)
        .kv("tokenizer.ggml.tokens", vt::ARRAY, &array(vt::STRING, 2, &[string(b"<s>"), string(b"hi")].concat()))
        .kv("nested", vt::ARRAY, &array(vt::ARRAY, 1, &array(vt::U16, 1, &[7, 0])))
        .kv("flag", vt::BOOL, &[0])
        .tensor("token_embd.weight", &[32, 2], GgmlType::Q8_0.id(), &[1; 68])
        .tensor("norm", &[3], GgmlType::F32.id(), &[0; 12])
        .tensor("q4", &[32], GgmlType::Q4_1.id(), &[2; 20])
}

#[test]
fn every_truncation_of_a_valid_file_fails() {
    let bytes = small_valid_file().build();
    let file = GgufFile::parse(bytes.clone(), "ok.gguf").unwrap();
    assert_eq!(file.tensors().len(), 3);
    for len in 0..bytes.len() {
        let message = error(bytes[..len].to_vec());
        assert!(!message.is_empty(), "prefix of {len} bytes");
    }
}

#[test]
fn magic_and_version() {
    assert_eq!(error(b"GGU".to_vec()), "not a GGUF file: only 3 bytes long");
    let mut builder = small_valid_file();
    builder.magic = *b"GGML";
    assert_error(&builder, "not a GGUF file: it starts with \"GGML\", not \"GGUF\"");
    for (version, expected) in [
        (1, "GGUF version 1 is not supported (only versions 2 and 3 are)"),
        (0, "GGUF version 0 is not supported"),
        (4, "GGUF version 4 is not supported"),
        (3u32.swap_bytes(), "big-endian GGUF files are not supported (the version field reads 0x03000000, version 3 byte-swapped)"),
        (2u32.swap_bytes(), "big-endian GGUF files are not supported"),
    ] {
        builder = small_valid_file();
        builder.version = version;
        assert_error(&builder, expected);
    }
}

#[test]
fn huge_counts_and_lengths_fail_before_allocating() {
    let mut builder = small_valid_file();
    builder.tensor_count = Some(1 << 40);
    assert_error(&builder, "the tensor count is 1099511627776, but");
    builder = small_valid_file();
    builder.metadata_count = Some(1 << 40);
    assert_error(&builder, "the metadata entry count is 1099511627776, but");
    builder.metadata_count = Some(u64::MAX);
    assert_error(&builder, "the metadata entry count is 18446744073709551615");

    // A key claiming 2^60 bytes.
    let mut bytes = GgufBuilder::new().build();
    bytes[16] = 1; // one metadata entry
    bytes.extend((1u64 << 60).to_le_bytes());
    bytes.extend([b'k'; 16]);
    assert!(error(bytes).contains("metadata entry 0: a metadata key at byte 24 claims 1152921504606846976 bytes"));

    assert_error(
        &GgufBuilder::new().kv("s", vt::STRING, &(1u64 << 60).to_le_bytes()),
        "metadata key 's': a string value at byte",
    );
    for element_type in [vt::U8, vt::U64, vt::STRING, vt::ARRAY] {
        let huge = array(element_type, 1 << 62, &[0; 16]);
        assert_error(&GgufBuilder::new().kv("a", vt::ARRAY, &huge), "metadata key 'a': the length of an array of");
    }
    assert_error(&GgufBuilder::new().kv("a", vt::ARRAY, &array(vt::U8, 5, &[1, 2, 3])), "metadata key 'a'");
    let mut bytes = GgufBuilder::new().kv("x", vt::U8, &[0]).build();
    bytes[8] = 1; // one tensor info, which would be the name length u64::MAX
    bytes.extend(u64::MAX.to_le_bytes());
    bytes.extend([0; 24]);
    assert!(error(bytes).contains("tensor info 0: a tensor name at byte"));
}

#[test]
fn arrays_nest_at_most_max_array_nesting_deep() {
    let nest = |depth: usize| {
        let mut value = array(vt::U8, 1, &[5]);
        for _ in 1..depth {
            value = array(vt::ARRAY, 1, &value);
        }
        GgufBuilder::new().kv("deep", vt::ARRAY, &value)
    };
    let file = GgufFile::parse(nest(MAX_ARRAY_NESTING).build(), "ok.gguf").unwrap();
    assert!(file.get("deep").unwrap().describe_type().contains("[u8]"));
    assert_error(&nest(MAX_ARRAY_NESTING + 1), "metadata key 'deep': arrays nest deeper than 8 levels");
}

#[test]
fn bad_value_types_bools_and_utf8() {
    assert_error(
        &GgufBuilder::new().kv("k", 13, &[0; 8]),
        "metadata key 'k': the value type at byte 33 is 13, which is not a GGUF value type (0..=12)",
    );
    assert_error(&GgufBuilder::new().kv("k", vt::ARRAY, &array(99, 1, &[0; 8])), "an array's element type at byte");
    assert_error(&GgufBuilder::new().kv("k", vt::BOOL, &[2]), "metadata key 'k': bool value at byte 37 is 2, not 0 or 1");
    assert_error(&GgufBuilder::new().kv("k", vt::ARRAY, &array(vt::BOOL, 2, &[1, 255])), "is 255, not 0 or 1");
    assert_error(&GgufBuilder::new().kv_raw_key(b"bad\xff", vt::U8, &[0]), "metadata entry 0: a metadata key at byte 24 is not valid UTF-8");
    assert_error(
        &GgufBuilder::new().kv("tokenizer.ggml.model", vt::STRING, &string(b"\xc3\x28")),
        "metadata key 'tokenizer.ggml.model': a string value at byte 56 is not valid UTF-8",
    );
    assert_error(
        &GgufBuilder::new().kv("tokens", vt::ARRAY, &array(vt::STRING, 2, &[string(b"ok"), string(b"\x80")].concat())),
        "metadata key 'tokens': a string value",
    );
    assert_error(&GgufBuilder::new().tensor_at(b"w\xfe", &[1], 0, 0).data(&[0; 4]), "tensor info 0: a tensor name at byte 24 is not valid UTF-8");
}

#[test]
fn keys_and_tensor_names_are_unique_and_keys_non_empty() {
    assert_error(&GgufBuilder::new().kv_u32("a", 1).kv_u32("b", 2).kv_u32("a", 3), "metadata key 'a' appears twice (entries 0 and 2)");
    assert_error(&GgufBuilder::new().kv_raw_key(b"", vt::U8, &[0]), "metadata entry 0 has an empty key");
    assert_error(
        &GgufBuilder::new().tensor("w", &[1], 0, &[0; 4]).tensor("w", &[1], 0, &[0; 4]),
        "tensor name 'w' appears twice (tensors 0 and 1)",
    );
}

#[test]
fn alignment_must_be_a_u32_power_of_two() {
    let with = |value_type: u32, value: &[u8]| GgufBuilder::new().kv("general.alignment", value_type, value).tensor("w", &[1], 0, &[0; 4]);
    assert_error(&with(vt::U32, &0u32.to_le_bytes()), "general.alignment is 0, not a power of two");
    assert_error(&with(vt::U32, &48u32.to_le_bytes()), "general.alignment is 48, not a power of two");
    assert_error(&with(vt::U64, &32u64.to_le_bytes()), "general.alignment has type u64, expected u32");
}

#[test]
fn tensor_dims_types_and_sizes() {
    let f32_id = GgmlType::F32.id();
    assert_error(&GgufBuilder::new().tensor("w", &[1, 1, 1, 1, 1], f32_id, &[0; 4]), "tensor 'w' has 5 dims; GGUF allows at most 4");
    assert_error(&GgufBuilder::new().tensor_at(b"w", &[1 << 63], f32_id, 0), "tensor 'w' dim 0 is 9223372036854775808, more than the largest int64");
    assert_error(
        &GgufBuilder::new().tensor_at(b"w", &[1 << 32, 1 << 32, 1 << 32], f32_id, 0),
        "tensor 'w' with dims [4294967296, 4294967296, 4294967296] has more elements than this machine can address",
    );
    assert_error(&GgufBuilder::new().tensor_at(b"w", &[1 << 62, 4], GgmlType::I8.id(), 0), "has more elements");
    assert_error(&GgufBuilder::new().tensor_at(b"w", &[1 << 62], f32_id, 0), "is too large for this machine");
    assert_error(
        &GgufBuilder::new().tensor("w", &[33, 2], GgmlType::Q4_0.id(), &[0; 36]),
        "tensor 'w' of type Q4_0 has rows of 33 elements, not a multiple of the block size 32",
    );
    assert_error(&GgufBuilder::new().tensor_at(b"w", &[], GgmlType::Q8_0.id(), 0), "has rows of 1 elements");
    for unknown in [4, 31, 42, 1 << 31] {
        assert_error(
            &GgufBuilder::new().tensor("blk.3.attn_q.weight", &[32], unknown, &[0; 32]),
            &format!("tensor 'blk.3.attn_q.weight' has type id {unknown}, which is not a ggml type this reader knows"),
        );
    }
}

#[test]
fn tensor_offsets_are_aligned_inside_the_file_and_disjoint() {
    let f32_id = GgmlType::F32.id();
    assert_error(
        &GgufBuilder::new().tensor_at(b"w", &[1], f32_id, 16).data(&[0; 64]),
        "tensor 'w' has data offset 16, not a multiple of the alignment 32",
    );
    assert_error(
        &GgufBuilder::new().tensor_at(b"w", &[16], f32_id, 32).data(&[0; 64]),
        "tensor 'w' (64 bytes at data offset 32) extends past the end of the file (the data section holds 64 bytes)",
    );
    assert_error(&GgufBuilder::new().tensor_at(b"w", &[8], f32_id, u64::MAX - 31).data(&[0; 64]), "extends past the end of the file");
    assert_error(
        &GgufBuilder::new().tensor_at(b"a", &[16], f32_id, 0).tensor_at(b"b", &[8], f32_id, 32).data(&[0; 128]),
        "tensors 'a' (data bytes 0..64) and 'b' (data bytes 32..64) overlap",
    );
    // Out of order is fine as long as nothing overlaps; so are empty tensors anywhere.
    let file = GgufFile::parse(
        GgufBuilder::new()
            .tensor_at(b"b", &[8], f32_id, 32)
            .tensor_at(b"a", &[8], f32_id, 0)
            .tensor_at(b"empty", &[0], f32_id, 32)
            .data(&[0; 64])
            .build(),
        "ok.gguf",
    )
    .unwrap();
    assert_eq!(file.tensors().len(), 3);
    // Tensors need the data section to exist, even empty ones.
    let mut bytes = GgufBuilder::new().tensor_at(b"e", &[0], f32_id, 0).build();
    bytes.truncate(bytes.len() - 1);
    assert!(error(bytes).contains("the data section would start at byte"));
}
