//! The reader against gguf-py (tests/python/gguf_oracle.py): a file gguf-py writes with a
//! tensor of every type and metadata of every value type must read back with the same
//! metadata, dims and types, and dequantize to exactly gguf-py's values; and a real model
//! (SmolLM2-135M Q4_1, from env RBUILD_SMOLLM2_GGUF) must agree with gguf-py row by row.
//!
//! Needs the oracle venv (env RBUILD_PYTHON, else the repository's `.venv`) with `gguf`;
//! without one the tests say "skipped" (CI must have it: tool/ci/setup.sh installs it).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::temp_dir;
use rbuild_gguf::{GgmlType, GgufFile, Value};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn oracle_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/gguf_oracle.py")
}

/// The oracle venv's Python, if it exists and has gguf-py; None after a notice otherwise
/// (which CI does not allow).
fn oracle_python() -> Option<PathBuf> {
    let python = std::env::var_os("RBUILD_PYTHON").map(PathBuf::from).unwrap_or_else(|| repo().join(".venv/bin/python"));
    let why = if !python.exists() {
        format!("no Python at {}", python.display())
    } else {
        let check = Command::new(&python).args(["-c", "import gguf, numpy"]).output();
        match check {
            Ok(out) if out.status.success() => return Some(python),
            Ok(out) => format!("{} cannot import gguf: {}", python.display(), String::from_utf8_lossy(&out.stderr).trim()),
            Err(e) => format!("cannot run {}: {e}", python.display()),
        }
    };
    assert!(std::env::var_os("CI").is_none(), "CI must provide the oracle venv with gguf: {why}");
    eprintln!("skipped: {why} (run tool/ci/setup.sh)");
    None
}

fn run_oracle(python: &Path, args: &[&str]) {
    let out = Command::new(python).arg(oracle_script()).args(args).output().expect("run gguf_oracle.py");
    assert!(out.status.success(), "gguf_oracle.py {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

fn read_f32s(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// A value as gguf_oracle.py's `render` writes it.
fn render(value: &Value) -> String {
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    match value {
        Value::U8(v) => format!("u8:{v}"),
        Value::I8(v) => format!("i8:{v}"),
        Value::U16(v) => format!("u16:{v}"),
        Value::I16(v) => format!("i16:{v}"),
        Value::U32(v) => format!("u32:{v}"),
        Value::I32(v) => format!("i32:{v}"),
        Value::U64(v) => format!("u64:{v}"),
        Value::I64(v) => format!("i64:{v}"),
        Value::F32(v) => format!("f32:{:08x}", v.to_bits()),
        Value::F64(v) => format!("f64:{:016x}", v.to_bits()),
        Value::Bool(v) => format!("bool:{}", u8::from(*v)),
        Value::String(v) => format!("str:{}", hex(v.as_bytes())),
        Value::Array(items) => format!("[{}]", items.iter().map(render).collect::<Vec<_>>().join(",")),
    }
}

/// Every value equal to gguf-py's bit for bit (the decoders do gguf-py's f32 operations in its
/// order, and f16/bf16/int conversions are exact or correctly rounded on both sides).
fn assert_bit_identical(name: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{name}: value count");
    let mismatches: Vec<(usize, f32, f32)> =
        got.iter().zip(want).enumerate().filter(|(_, (g, w))| g.to_bits() != w.to_bits()).map(|(i, (g, w))| (i, *g, *w)).collect();
    assert!(mismatches.is_empty(), "{name}: {} of {} values differ, first ones (index, rbuild, gguf-py): {:?}", mismatches.len(), got.len(), &mismatches[..mismatches.len().min(8)]);
}

#[test]
fn every_type_and_value_type_matches_gguf_py() {
    let Some(python) = oracle_python() else { return };
    let dir = temp_dir("gguf-py");
    run_oracle(&python, &["all-types", dir.to_str().unwrap()]);
    let file = GgufFile::open(&dir.join("all_types.gguf")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((file.version(), file.alignment()), (3, 64));

    let metadata = std::fs::read_to_string(dir.join("metadata.tsv")).unwrap();
    let want: Vec<&str> = metadata.lines().collect();
    let got: Vec<String> = file.metadata().iter().map(|(key, value)| format!("{key}\t{}", render(value))).collect();
    assert_eq!(got, want);
    assert_eq!(file.get_str("general.architecture").unwrap(), Some("testarch"));
    assert_eq!(file.get_str("test.string").unwrap(), Some("gguf ✓ ünïcode\ttab\nnewline"));
    assert_eq!(file.get_u64("test.u64").unwrap(), Some(u64::MAX));
    assert_eq!(file.get_str_array("test.array_str").unwrap(), Some(vec!["a", "", "é🦀"]));

    let manifest = std::fs::read_to_string(dir.join("tensors.tsv")).unwrap();
    assert_eq!(manifest.lines().count(), file.tensors().len());
    let mut checked_types = Vec::new();
    for (line, tensor) in manifest.lines().zip(file.tensors()) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [name, type_name, dims, expected] = fields[..] else { panic!("bad manifest line {line:?}") };
        let dims: Vec<u64> = dims.split(',').map(|d| d.parse().unwrap()).collect();
        assert_eq!((tensor.name.as_str(), tensor.ggml_type.name(), &tensor.dims), (name, type_name, &dims));
        assert_eq!(tensor.shape(), dims.iter().rev().map(|&d| d as usize).collect::<Vec<_>>(), "{name}");
        assert_eq!(file.tensor_bytes(tensor).len(), tensor.n_bytes(), "{name}");
        if expected == "-" {
            let err = file.dequantize(tensor).unwrap_err();
            assert_eq!(err.message, format!("tensor '{name}' has type {type_name}, which rbuild cannot read"));
            continue;
        }
        let got = file.dequantize(tensor).unwrap_or_else(|e| panic!("{e}"));
        assert_bit_identical(name, &got, &read_f32s(&dir.join(expected)));
        checked_types.push(tensor.ggml_type);
    }
    use GgmlType::*;
    for ty in [F32, F16, BF16, F64, I8, I16, I32, I64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K] {
        assert!(checked_types.contains(&ty), "no {ty} tensor was compared");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// SmolLM2-135M-Instruct Q4_1 (llama.cpp's file: Q8_0 token embeddings, Q4_1 matrices,
/// F32 norms): metadata listed, and rows of a Q8_0 and a Q4_1 tensor against gguf-py.
#[test]
fn smollm2_q4_1_matches_gguf_py() {
    let Some(path) = std::env::var_os("RBUILD_SMOLLM2_GGUF").map(PathBuf::from) else {
        eprintln!("skipped: set RBUILD_SMOLLM2_GGUF to SmolLM2-135M-Instruct.Q4_1.gguf to compare it with gguf-py");
        return;
    };
    if !path.exists() {
        eprintln!("skipped: RBUILD_SMOLLM2_GGUF={} does not exist", path.display());
        return;
    }
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let arch = file.get_str("general.architecture").unwrap().unwrap();
    println!("{}: GGUF v{}, architecture {arch}, {} tensors, {} metadata entries", file.path(), file.version(), file.tensors().len(), file.metadata().len());
    for (key, value) in file.metadata() {
        match value {
            Value::Array(items) => println!("  {key}: {} [{} elements]", value.describe_type(), items.len()),
            Value::String(s) if s.len() > 60 => println!("  {key}: str ({} bytes)", s.len()),
            other => println!("  {key}: {} = {other:?}", other.type_name()),
        }
    }
    for t in file.tensors().iter().filter(|t| !t.name.starts_with("blk.") || t.name.starts_with("blk.0.")) {
        println!("  tensor {}: {} dims {:?} shape {:?}", t.name, t.ggml_type, t.dims, t.shape());
    }
    assert_eq!(arch, "llama");
    assert_eq!(file.get_u64("llama.block_count").unwrap(), Some(30));
    assert_eq!(file.get_str_array("tokenizer.ggml.tokens").unwrap().map(|t| t.len()), Some(49152));
    assert_eq!(file.tensors().len(), 272);

    let Some(python) = oracle_python() else { return };
    let dir = temp_dir("smollm2");
    for (name, ty, rows) in [("token_embd.weight", GgmlType::Q8_0, [0, 1, 2, 1000, 49151]), ("blk.0.attn_q.weight", GgmlType::Q4_1, [0, 1, 100, 300, 575])] {
        let tensor = file.tensor(name).unwrap();
        assert_eq!(tensor.ggml_type, ty);
        let values = file.dequantize(tensor).unwrap();
        let row_len = tensor.dims[0] as usize;
        let out = dir.join(format!("{name}.f32"));
        let row_args: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
        let mut args = vec!["rows", path.to_str().unwrap(), out.to_str().unwrap(), name];
        args.extend(row_args.iter().map(String::as_str));
        run_oracle(&python, &args);
        let want = read_f32s(&out);
        let got: Vec<f32> = rows.iter().flat_map(|&r| values[r * row_len..(r + 1) * row_len].iter().copied()).collect();
        assert_bit_identical(name, &got, &want);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// The fuzzing seeds (gguf-py files: version 2, a 64-byte alignment, a llama-shaped header
/// with tokenizer arrays) parse, and each of their tensors dequantizes.
#[test]
fn fuzz_seeds_parse() {
    let Some(python) = oracle_python() else { return };
    let dir = temp_dir("seeds");
    run_oracle(&python, &["seeds", dir.to_str().unwrap()]);
    let mut names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["aligned_64.gguf", "k_quants.gguf", "legacy.gguf", "llama.gguf", "metadata.gguf", "version_2.gguf"]);
    for name in &names {
        let file = GgufFile::open(&dir.join(name)).unwrap_or_else(|e| panic!("{e}"));
        for tensor in file.tensors() {
            assert_eq!(file.dequantize(tensor).unwrap_or_else(|e| panic!("{e}")).len(), tensor.n_elements());
        }
    }
    let v2 = GgufFile::open(&dir.join("version_2.gguf")).unwrap();
    assert_eq!((v2.version(), v2.alignment()), (2, 64));
    let llama = GgufFile::open(&dir.join("llama.gguf")).unwrap();
    assert_eq!(llama.get_str("tokenizer.ggml.pre").unwrap(), Some("smollm"));
    assert_eq!(llama.get_i64_array("tokenizer.ggml.token_type").unwrap(), Some(vec![3, 3, 1, 1, 1]));
    assert_eq!(llama.tensor("blk.0.attn_q.weight").unwrap().ggml_type, GgmlType::Q4_1);
    std::fs::remove_dir_all(dir).unwrap();
}
