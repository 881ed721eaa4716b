//! The parser on hand-built files: every metadata value type (arrays, nested and empty ones
//! included), versions 2 and 3, the typed accessors, tensor infos and the data section's
//! alignment.

mod common;

use common::{array, string, temp_dir, vt, GgufBuilder};
use half::{bf16, f16};
use rbuild_gguf::{GgmlType, GgufFile, Value};

fn parse(builder: &GgufBuilder) -> GgufFile {
    GgufFile::parse(builder.build(), "test.gguf").unwrap_or_else(|e| panic!("{e}"))
}

/// One entry of every value type, in type id order, then arrays.
fn every_value_type() -> GgufBuilder {
    let strings: Vec<u8> = [string(b"a"), string("é🦀".as_bytes()), string(b"")].concat();
    let nested = [array(vt::I32, 2, &[1i32.to_le_bytes(), (-2i32).to_le_bytes()].concat()), array(vt::I32, 0, &[])].concat();
    let nested_strings = array(vt::ARRAY, 1, &array(vt::STRING, 1, &string(b"deep")));
    GgufBuilder::new()
        .kv("t.u8", vt::U8, &[200])
        .kv("t.i8", vt::I8, &(-100i8).to_le_bytes())
        .kv("t.u16", vt::U16, &60000u16.to_le_bytes())
        .kv("t.i16", vt::I16, &(-30000i16).to_le_bytes())
        .kv("t.u32", vt::U32, &4_000_000_000u32.to_le_bytes())
        .kv("t.i32", vt::I32, &(-2_000_000_000i32).to_le_bytes())
        .kv("t.f32", vt::F32, &1.5f32.to_le_bytes())
        .kv("t.bool", vt::BOOL, &[1])
        .kv("t.string", vt::STRING, &string("ünïcode".as_bytes()))
        .kv("t.array_u8", vt::ARRAY, &array(vt::U8, 3, &[1, 2, 3]))
        .kv("t.u64", vt::U64, &u64::MAX.to_le_bytes())
        .kv("t.i64", vt::I64, &i64::MIN.to_le_bytes())
        .kv("t.f64", vt::F64, &(-0.25f64).to_le_bytes())
        .kv("t.array_str", vt::ARRAY, &array(vt::STRING, 3, &strings))
        .kv("t.array_f32", vt::ARRAY, &array(vt::F32, 2, &[0.5f32.to_le_bytes(), 2f32.to_le_bytes()].concat()))
        .kv("t.array_bool", vt::ARRAY, &array(vt::BOOL, 2, &[0, 1]))
        .kv("t.array_u64", vt::ARRAY, &array(vt::U64, 1, &u64::MAX.to_le_bytes()))
        .kv("t.nested", vt::ARRAY, &array(vt::ARRAY, 2, &nested))
        .kv("t.nested_str", vt::ARRAY, &array(vt::ARRAY, 1, &nested_strings))
        .kv("t.empty", vt::ARRAY, &array(vt::F64, 0, &[]))
}

#[test]
fn every_value_type_reads_back_in_file_order() {
    let file = parse(&every_value_type());
    let expect: Vec<(&str, Value)> = vec![
        ("t.u8", Value::U8(200)),
        ("t.i8", Value::I8(-100)),
        ("t.u16", Value::U16(60000)),
        ("t.i16", Value::I16(-30000)),
        ("t.u32", Value::U32(4_000_000_000)),
        ("t.i32", Value::I32(-2_000_000_000)),
        ("t.f32", Value::F32(1.5)),
        ("t.bool", Value::Bool(true)),
        ("t.string", Value::String("ünïcode".into())),
        ("t.array_u8", Value::Array(vec![Value::U8(1), Value::U8(2), Value::U8(3)])),
        ("t.u64", Value::U64(u64::MAX)),
        ("t.i64", Value::I64(i64::MIN)),
        ("t.f64", Value::F64(-0.25)),
        ("t.array_str", Value::Array(vec![Value::String("a".into()), Value::String("é🦀".into()), Value::String("".into())])),
        ("t.array_f32", Value::Array(vec![Value::F32(0.5), Value::F32(2.0)])),
        ("t.array_bool", Value::Array(vec![Value::Bool(false), Value::Bool(true)])),
        ("t.array_u64", Value::Array(vec![Value::U64(u64::MAX)])),
        (
            "t.nested",
            Value::Array(vec![Value::Array(vec![Value::I32(1), Value::I32(-2)]), Value::Array(vec![])]),
        ),
        ("t.nested_str", Value::Array(vec![Value::Array(vec![Value::Array(vec![Value::String("deep".into())])])])),
        ("t.empty", Value::Array(vec![])),
    ];
    let got: Vec<(&str, &Value)> = file.metadata().iter().map(|(k, v)| (k.as_str(), v)).collect();
    let want: Vec<(&str, &Value)> = expect.iter().map(|(k, v)| (*k, v)).collect();
    assert_eq!(got, want);
    assert_eq!(file.version(), 3);
    assert!(file.tensors().is_empty());
    let names: Vec<&str> = file.metadata().iter().map(|(_, v)| v.type_name()).collect();
    assert_eq!(
        names,
        ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64", "arr", "arr", "arr", "arr", "arr", "arr", "arr"]
    );
    assert_eq!(file.get("t.nested_str").unwrap().describe_type(), "arr[arr[arr[str]]]");
    assert_eq!(file.get("t.empty").unwrap().describe_type(), "arr (empty)");
}

#[test]
fn version_2_reads_like_version_3() {
    let mut builder = every_value_type().tensor("w", &[4], GgmlType::F32.id(), &[0; 16]);
    let v3 = parse(&builder);
    builder.version = 2;
    let v2 = parse(&builder);
    assert_eq!(v2.version(), 2);
    assert_eq!(v2.metadata(), v3.metadata());
    assert_eq!(v2.tensors(), v3.tensors());
}

#[test]
fn typed_accessors_convert_and_name_wrong_types() {
    let file = parse(
        &every_value_type()
            .kv("t.positive_i32", vt::I32, &7i32.to_le_bytes())
            .kv("t.scores", vt::ARRAY, &array(vt::I16, 2, &[(-3i16).to_le_bytes(), 4i16.to_le_bytes()].concat())),
    );
    assert_eq!(file.get_u64("t.u8").unwrap(), Some(200));
    assert_eq!(file.get_u64("t.u64").unwrap(), Some(u64::MAX));
    assert_eq!(file.get_u64("t.positive_i32").unwrap(), Some(7));
    assert_eq!(file.get_u64("missing").unwrap(), None);
    let err = file.get_u64("t.i8").unwrap_err();
    assert_eq!(err.to_string(), "test.gguf: metadata key 't.i8' is -100 (i8), expected a non-negative integer");
    let err = file.get_u64("t.f32").unwrap_err();
    assert_eq!(err.message, "metadata key 't.f32' has type f32, expected an unsigned integer");

    assert_eq!(file.get_f64("t.f32").unwrap(), Some(1.5));
    assert_eq!(file.get_f64("t.f64").unwrap(), Some(-0.25));
    assert_eq!(file.get_f64("t.u32").unwrap(), Some(4e9));
    assert!(file.get_f64("t.string").unwrap_err().message.contains("'t.string' has type str"));

    assert_eq!(file.get_bool("t.bool").unwrap(), Some(true));
    assert!(file.get_bool("t.u8").is_err());

    assert_eq!(file.get_str("t.string").unwrap(), Some("ünïcode"));
    let err = file.get_str("t.u32").unwrap_err();
    assert_eq!(err.to_string(), "test.gguf: metadata key 't.u32' has type u32, expected str");
    assert_eq!(file.get_str("missing").unwrap(), None);

    assert_eq!(file.get_str_array("t.array_str").unwrap(), Some(vec!["a", "é🦀", ""]));
    let err = file.get_str_array("t.array_u8").unwrap_err();
    assert_eq!(err.message, "metadata key 't.array_u8' has type arr[u8], expected arr[str]");
    assert!(file.get_str_array("t.string").unwrap_err().message.contains("has type str, expected arr[str]"));
    assert_eq!(file.get_str_array("t.empty").unwrap(), Some(vec![]));

    assert_eq!(file.get_f64_array("t.array_f32").unwrap(), Some(vec![0.5, 2.0]));
    assert_eq!(file.get_f64_array("t.scores").unwrap(), Some(vec![-3.0, 4.0]));
    assert!(file.get_f64_array("t.array_bool").is_err());
    assert!(file.get_f64_array("t.nested").unwrap_err().message.contains("arr[arr[i32]]"));

    assert_eq!(file.get_i64_array("t.scores").unwrap(), Some(vec![-3, 4]));
    assert_eq!(file.get_i64_array("t.array_u8").unwrap(), Some(vec![1, 2, 3]));
    let err = file.get_i64_array("t.array_u64").unwrap_err();
    assert_eq!(err.message, "element 0 of metadata key 't.array_u64' is 18446744073709551615, which does not fit an i64");
    assert!(file.get_i64_array("t.array_f32").is_err());
    assert_eq!(file.get_i64_array("missing").unwrap(), None);
    assert!(file.get_i64_array("t.u8").unwrap_err().message.contains("has type u8"));
}

#[test]
fn tensors_lie_at_aligned_offsets_of_the_data_section() {
    let values: Vec<f32> = (0..6).map(|i| i as f32 * 0.5 - 1.0).collect();
    let f32_bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let f16_bytes: Vec<u8> = values.iter().flat_map(|v| f16::from_f32(*v).to_le_bytes()).collect();
    let bf16_bytes: Vec<u8> = values.iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect();
    let i8_bytes: Vec<u8> = [-128i8, -1, 0, 1, 2, 127].iter().map(|v| *v as u8).collect();
    let q8_0: Vec<u8> = [f16::from_f32(0.5).to_le_bytes().to_vec(), (0..32).map(|i| (i as i8 - 16) as u8).collect()].concat();
    for alignment in [1u32, 8, 32, 64, 4096] {
        let builder = GgufBuilder::new()
            .kv_str("general.architecture", "test")
            .alignment(alignment)
            .tensor("f32", &[3, 2], GgmlType::F32.id(), &f32_bytes)
            .tensor("f16", &[6], GgmlType::F16.id(), &f16_bytes)
            .tensor("bf16", &[2, 1, 3], GgmlType::BF16.id(), &bf16_bytes)
            .tensor("i8", &[1, 2, 1, 3], GgmlType::I8.id(), &i8_bytes)
            .tensor("q8_0", &[32], GgmlType::Q8_0.id(), &q8_0);
        let file = parse(&builder);
        assert_eq!(file.alignment(), alignment as usize);
        assert_eq!(file.data_start() % alignment as usize, 0);
        let names: Vec<&str> = file.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["f32", "f16", "bf16", "i8", "q8_0"]);

        let t = file.tensor("f32").unwrap();
        assert_eq!((t.shape(), t.n_elements(), t.n_bytes()), (vec![2, 3], 6, 24));
        assert_eq!(file.tensor_bytes(t), &f32_bytes[..]);
        assert_eq!(file.dequantize(t).unwrap(), values);
        assert_eq!(file.dequantize(file.tensor("f16").unwrap()).unwrap(), values);
        let t = file.tensor("bf16").unwrap();
        assert_eq!(t.shape(), [3, 1, 2]);
        assert_eq!(file.dequantize(t).unwrap(), values);
        let t = file.tensor("i8").unwrap();
        assert_eq!(t.shape(), [3, 1, 2, 1]);
        assert_eq!(file.dequantize(t).unwrap(), [-128.0, -1.0, 0.0, 1.0, 2.0, 127.0]);
        let t = file.tensor("q8_0").unwrap();
        assert_eq!((t.n_elements(), t.n_bytes(), t.ggml_type.name()), (32, 34, "Q8_0"));
        let expect: Vec<f32> = (0..32).map(|i| (i as f32 - 16.0) * 0.5).collect();
        assert_eq!(file.dequantize(t).unwrap(), expect);
        assert!(file.tensor("missing").is_none());
    }
}

#[test]
fn default_alignment_is_32() {
    let file = parse(&GgufBuilder::new().kv_str("x", "odd length!").tensor("w", &[1], GgmlType::F32.id(), &[0, 0, 128, 63]));
    assert_eq!(file.alignment(), 32);
    assert_eq!(file.data_start() % 32, 0);
    assert_eq!(file.dequantize(&file.tensors()[0]).unwrap(), [1.0]);
}

#[test]
fn zero_dim_and_zero_element_tensors_are_valid_as_in_llama_cpp() {
    let file = parse(
        &GgufBuilder::new()
            .tensor("scalar", &[], GgmlType::F32.id(), &2.5f32.to_le_bytes())
            .tensor("empty", &[4, 0], GgmlType::F16.id(), &[])
            .tensor("empty_q", &[0, 3], GgmlType::Q4_K.id(), &[]),
    );
    let scalar = file.tensor("scalar").unwrap();
    assert_eq!((scalar.shape(), scalar.n_elements()), (vec![], 1));
    assert_eq!(file.dequantize(scalar).unwrap(), [2.5]);
    let empty = file.tensor("empty").unwrap();
    assert_eq!((empty.shape(), empty.n_elements(), empty.n_bytes()), (vec![0, 4], 0, 0));
    assert!(file.dequantize(empty).unwrap().is_empty());
    assert!(file.dequantize(file.tensor("empty_q").unwrap()).unwrap().is_empty());
}

#[test]
fn known_types_rbuild_cannot_decode_fail_at_dequantize_naming_tensor_and_type() {
    let file = parse(
        &GgufBuilder::new()
            .tensor("blk.0.ffn_up.weight", &[256], GgmlType::IQ2_XXS.id(), &[0; 66])
            .tensor("mx", &[32], GgmlType::MXFP4.id(), &[0; 17]),
    );
    let t = file.tensor("blk.0.ffn_up.weight").unwrap();
    assert_eq!(file.tensor_bytes(t).len(), 66);
    let err = file.dequantize(t).unwrap_err();
    assert_eq!(err.to_string(), "test.gguf: tensor 'blk.0.ffn_up.weight' has type IQ2_XXS, which rbuild cannot read");
    assert!(file.dequantize(file.tensor("mx").unwrap()).unwrap_err().message.contains("type MXFP4"));
}

#[test]
fn a_file_without_tensors_may_end_right_after_its_metadata() {
    let file = parse(&GgufBuilder::new().kv_str("general.architecture", "llama"));
    assert_eq!(file.get_str("general.architecture").unwrap(), Some("llama"));
    let file = parse(&GgufBuilder::new());
    assert!(file.metadata().is_empty() && file.tensors().is_empty());
}

#[test]
fn open_maps_a_file_and_names_it_in_errors() {
    let dir = temp_dir("open");
    let path = dir.join("small.gguf");
    let builder = every_value_type().tensor("w", &[2], GgmlType::F32.id(), &[0, 0, 128, 63, 0, 0, 0, 64]);
    std::fs::write(&path, builder.build()).unwrap();
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.path(), path.display().to_string());
    assert_eq!(file.dequantize(file.tensor("w").unwrap()).unwrap(), [1.0, 2.0]);
    assert_eq!(file.metadata(), parse(&builder).metadata());

    let missing = dir.join("missing.gguf");
    let err = GgufFile::open(&missing).unwrap_err();
    assert_eq!(err.path, missing.display().to_string());
    let empty = dir.join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    let err = GgufFile::open(&empty).unwrap_err();
    assert_eq!(err.to_string(), format!("{}: not a GGUF file: only 0 bytes long", empty.display()));
    std::fs::remove_dir_all(dir).unwrap();
}
