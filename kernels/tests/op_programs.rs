//! Every single-operator program of the shared testdata (`ops/` and `ops_portable/`, found by
//! walking the folders, so new cases run without code changes) on rbuild's kernel table, in
//! process: each output against the PyTorch reference (`output.N`) under the case's tolerance,
//! integer and bool outputs exactly. Prints `N passed, M failed` per walk.
//!
//! `RBUILD_OPS_FILTER=substring` runs only the cases whose path contains it (kernel work);
//! `RBUILD_OPS_VERBOSE=1` prints each failure in full.

use std::path::Path;

use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::value::Value;
use rbuild_runtime::{KernelContext, KernelRegistry, Program, ScalarType};
use safetensors::{Dtype, SafeTensors};

mod testdata;
use testdata::{pte_files, testdata};


fn dtype_of(d: Dtype) -> Option<ScalarType> {
    Some(match d {
        Dtype::F32 => ScalarType::Float,
        Dtype::F64 => ScalarType::Double,
        Dtype::F16 => ScalarType::Half,
        Dtype::BF16 => ScalarType::BFloat16,
        Dtype::I8 => ScalarType::Char,
        Dtype::U8 => ScalarType::Byte,
        Dtype::I16 => ScalarType::Short,
        Dtype::I32 => ScalarType::Int,
        Dtype::I64 => ScalarType::Long,
        Dtype::BOOL => ScalarType::Bool,
        Dtype::U16 => ScalarType::UInt16,
        Dtype::U32 => ScalarType::UInt32,
        Dtype::U64 => ScalarType::UInt64,
        _ => return None,
    })
}

/// Elements as f64 (exact for the integer ranges the cases use).
fn values(dtype: ScalarType, data: &[u8]) -> Vec<f64> {
    macro_rules! conv {
        ($t:ty) => {
            data.chunks_exact(std::mem::size_of::<$t>()).map(|c| <$t>::from_le_bytes(c.try_into().unwrap()) as f64).collect()
        };
    }
    match dtype {
        ScalarType::Float => conv!(f32),
        ScalarType::Double => conv!(f64),
        ScalarType::Long => conv!(i64),
        ScalarType::Int => conv!(i32),
        ScalarType::Short => conv!(i16),
        ScalarType::Char => conv!(i8),
        ScalarType::Byte | ScalarType::Bool => conv!(u8),
        ScalarType::UInt16 => conv!(u16),
        ScalarType::UInt32 => conv!(u32),
        ScalarType::UInt64 => conv!(u64),
        ScalarType::Half => data.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        ScalarType::BFloat16 => data.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        d => panic!("dtype {d} not handled by the test"),
    }
}

fn meta_f64(meta: &serde_json::Value, key: &str, default: f64) -> f64 {
    meta[key].as_f64().unwrap_or(default)
}

/// Runs one case; Err describes the failure.
fn run_case(pte_path: &Path, kernels: &KernelRegistry) -> Result<(), String> {
    let stem = pte_path.file_stem().unwrap().to_str().unwrap();
    let text = std::fs::read_to_string(pte_path.with_file_name(format!("{stem}.json"))).map_err(|e| format!("json: {e}"))?;
    let text = text.replace("-Infinity", "null").replace("Infinity", "null").replace("NaN", "null");
    let meta: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("json: {e}"))?;
    let io_bytes = std::fs::read(pte_path.with_file_name(format!("{stem}.io.safetensors"))).map_err(|e| format!("io: {e}"))?;
    let io = SafeTensors::deserialize(&io_bytes).map_err(|e| format!("io: {e}"))?;
    let pte = std::fs::read(pte_path).unwrap();
    let program = Program::load(&pte).map_err(|e| format!("load: {e}"))?;
    let mut m = program.load_method("forward", kernels, &BackendRegistry::new()).map_err(|e| format!("load: {e}"))?;
    let n_in = meta["inputs"].as_array().map_or(0, |v| v.len());
    for i in 0..n_in {
        let t = io.tensor(&format!("input.{i}")).map_err(|e| format!("input.{i}: {e}"))?;
        let dtype = dtype_of(t.dtype()).ok_or_else(|| format!("input.{i}: dtype {:?}", t.dtype()))?;
        m.set_input_tensor(i, dtype, t.shape(), t.data()).map_err(|e| format!("input.{i}: {e:?}"))?;
    }
    m.execute(&mut KernelContext::default()).map_err(|e| format!("execute: {e}"))?;
    let n_out = meta["outputs"].as_array().map_or(0, |v| v.len());
    let (atol, rtol) = (meta_f64(&meta, "atol", 1e-5), meta_f64(&meta, "rtol", 0.0));
    let mut errs = Vec::new();
    for i in 0..n_out {
        let want = io.tensor(&format!("output.{i}")).map_err(|e| format!("output.{i}: {e}"))?;
        let want_dtype = dtype_of(want.dtype()).unwrap();
        let Some(Value::Tensor(t)) = m.output_value(i) else {
            errs.push(format!("output.{i}: not a tensor"));
            continue;
        };
        let (dtype, shape) = (t.dtype, t.shape.as_slice().to_vec());
        if dtype != want_dtype || shape != want.shape() {
            errs.push(format!("output.{i}: got {dtype} {shape:?}, want {want_dtype} {:?}", want.shape()));
            continue;
        }
        let got = values(dtype, m.output_bytes(i).unwrap_or(&[]));
        let exp = values(want_dtype, want.data());
        if got.len() != exp.len() {
            errs.push(format!("output.{i}: {} elements, want {}", got.len(), exp.len()));
            continue;
        }
        if !dtype.is_floating() {
            let bad = got.iter().zip(&exp).filter(|(a, b)| a != b).count();
            if bad > 0 {
                let first = got.iter().zip(&exp).position(|(a, b)| a != b).unwrap();
                errs.push(format!("output.{i}: {bad} of {} elements differ (first at {first}: {} vs {})", exp.len(), got[first], exp[first]));
            }
            continue;
        }
        let mut bad = 0;
        let mut worst = (0.0f64, 0usize);
        for (k, (&a, &b)) in got.iter().zip(&exp).enumerate() {
            let same = (a.is_nan() && b.is_nan()) || a == b;
            let err = (a - b).abs();
            if !same && !(err <= atol + rtol * b.abs()) {
                bad += 1;
                if !(err <= worst.0) {
                    worst = (err, k);
                }
            }
        }
        if bad > 0 {
            let k = worst.1;
            errs.push(format!("output.{i}: {bad} of {} elements out of tolerance (worst at {k}: {} vs {})", exp.len(), got[k], exp[k]));
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs.join("; ")) }
}

fn walk_cases(folder: &str) -> (usize, Vec<String>) {
    let td = testdata();
    let cases = pte_files(&td.join(folder));
    let filter = std::env::var("RBUILD_OPS_FILTER").ok();
    let verbose = std::env::var_os("RBUILD_OPS_VERBOSE").is_some();
    let kernels = rbuild_kernels::registry();
    let (mut passed, mut failed) = (0, Vec::new());
    for pte in &cases {
        let label = pte.strip_prefix(&td).unwrap().display().to_string();
        if filter.as_deref().is_some_and(|f| !label.contains(f)) {
            continue;
        }
        // A kernel that panics is a failure of this case, reported like the others.
        match std::panic::catch_unwind(|| run_case(pte, &kernels)) {
            Ok(Ok(())) => passed += 1,
            Ok(Err(e)) => failed.push(format!("{label}: {e}")),
            Err(_) => failed.push(format!("{label}: PANICKED")),
        }
    }
    eprintln!("{folder}: {passed} passed, {} failed", failed.len());
    for f in &failed {
        if verbose {
            eprintln!("  FAIL {f}");
        } else {
            eprintln!("  FAIL {}", f.chars().take(300).collect::<String>());
        }
    }
    (passed + failed.len(), failed)
}

#[test]
fn ops_programs_match_reference() {
    let (n, failed) = walk_cases("ops");
    assert!(n > 0 || std::env::var_os("RBUILD_OPS_FILTER").is_some(), "no cases under {}", testdata().display());
    assert!(failed.is_empty(), "{} of {n} ops/ cases failed", failed.len());
}

#[test]
fn ops_portable_programs_match_reference() {
    let (n, failed) = walk_cases("ops_portable");
    assert!(n > 0 || std::env::var_os("RBUILD_OPS_FILTER").is_some(), "no cases under {}", testdata().display());
    assert!(failed.is_empty(), "{} of {n} ops_portable/ cases failed", failed.len());
}
