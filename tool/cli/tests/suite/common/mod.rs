//! Helpers shared by the integration tests: where the shared test data is, and how to list it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A temporary project folder whose `linked` folders are symlinks to the repository's own.
pub fn project_linking(linked: &[&str]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let repo = repo().canonicalize().unwrap();
    for dir in linked {
        std::os::unix::fs::symlink(repo.join(dir), root.path().join(dir)).unwrap();
    }
    root
}

/// Copies the files of the repository's folder `name` into `root/name`, for a test to edit;
/// returns the copy's path.
pub fn copy_repo_folder(root: &Path, name: &str) -> PathBuf {
    let (from, to) = (repo().join(name), root.join(name));
    std::fs::create_dir(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
    to
}

/// `../shared/testdata` beside the checkout.
pub fn testdata() -> PathBuf {
    repo().join("../shared/testdata")
}

/// Every `.pte` below `dir`, sorted, so new cases are picked up without code changes.
pub fn pte_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        let mut entries: Vec<_> = rd.map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "pte") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out
}

/// A case's metadata: `NAME.json` beside `NAME.pte` (Python JSON may hold bare Infinity/NaN).
pub fn case_meta(pte: &Path) -> Option<serde_json::Value> {
    let stem = pte.file_stem()?.to_str()?;
    let text = std::fs::read_to_string(pte.with_file_name(format!("{stem}.json"))).ok()?;
    let text = text.replace("-Infinity", "null").replace("Infinity", "null").replace("NaN", "null");
    Some(serde_json::from_str(&text).expect("case json"))
}

/// `NAME.io.safetensors` beside `NAME.pte`.
pub fn case_io(pte: &Path) -> PathBuf {
    let stem = pte.file_stem().unwrap().to_str().unwrap();
    pte.with_file_name(format!("{stem}.io.safetensors"))
}

/// The ExecuTorch oracle's Python: $RBUILD_PYTHON, else the repo's .venv. None locally without
/// it (the caller skips); in CI its absence is a failure.
pub fn oracle_python() -> Option<PathBuf> {
    let p = std::env::var_os("RBUILD_PYTHON").map(PathBuf::from).unwrap_or_else(|| repo().join(".venv/bin/python"));
    if p.exists() {
        return Some(p);
    }
    assert!(std::env::var_os("CI").is_none(), "CI must provide the ExecuTorch oracle venv (.venv)");
    eprintln!("SKIPPED: no oracle venv (.venv/bin/python); run the README test command");
    None
}

/// Runs tool/python/et_oracle.py on `cases` (see that script); returns its report, panicking
/// with it when any case fails.
pub fn run_oracle(python: &Path, cases: &[serde_json::Value], dir: &Path) -> String {
    let manifest = dir.join("oracle_cases.json");
    std::fs::write(&manifest, serde_json::to_vec(cases).unwrap()).unwrap();
    let run = std::process::Command::new(python).arg(repo().join("tool/python/et_oracle.py")).arg(&manifest).output().unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "ExecuTorch oracle failed:\n{report}");
    assert!(report.contains(&format!("{} passed, 0 failed", cases.len())), "{report}");
    report
}

/// Runs `forward` of the program at `pte` in ExecuTorch 1.3.1 (tool/python/et_run.py) on one
/// input tensor; returns output 0 (its dtype and bytes). The files go in `dir`, named `label.*`.
pub fn et_run_one(python: &Path, pte: &Path, input: (Dtype, Vec<usize>, &[u8]), dir: &Path, label: &str) -> (Dtype, Vec<u8>) {
    let (inp, out) = (dir.join(format!("{label}.in.safetensors")), dir.join(format!("{label}.out.safetensors")));
    let view = safetensors::tensor::TensorView::new(input.0, input.1, input.2).unwrap();
    std::fs::write(&inp, safetensors::serialize([("input.0", view)], None).unwrap()).unwrap();
    let run = std::process::Command::new(python).arg(repo().join("tool/python/et_run.py")).args([pte, &inp]).arg("input.0").arg(&out).output().unwrap();
    assert!(run.status.success(), "{label}: ExecuTorch failed on {}:\n{}", pte.display(), String::from_utf8_lossy(&run.stderr));
    let data = std::fs::read(&out).unwrap();
    let st = SafeTensors::deserialize(&data).unwrap();
    let t = st.tensor("output.0").unwrap();
    (t.dtype(), t.data().to_vec())
}

/// Elements of a tensor as f64 (bool/int exact in f64 for the ranges tests use).
pub fn values(dtype: Dtype, data: &[u8]) -> Vec<f64> {
    macro_rules! conv {
        ($t:ty, $n:expr) => {
            data.chunks_exact($n).map(|c| <$t>::from_le_bytes(c.try_into().unwrap()) as f64).collect()
        };
    }
    match dtype {
        Dtype::F32 => conv!(f32, 4),
        Dtype::F64 => conv!(f64, 8),
        Dtype::I64 => conv!(i64, 8),
        Dtype::I32 => conv!(i32, 4),
        Dtype::I16 => conv!(i16, 2),
        Dtype::I8 => conv!(i8, 1),
        Dtype::U8 | Dtype::BOOL => conv!(u8, 1),
        Dtype::F16 => data.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        Dtype::BF16 => data.chunks_exact(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        d => panic!("dtype {d:?} not handled by the test"),
    }
}

pub fn is_float(d: Dtype) -> bool {
    matches!(d, Dtype::F32 | Dtype::F64 | Dtype::F16 | Dtype::BF16)
}

/// Compares one output; returns a description of the mismatch, if any.
pub fn compare(name: &str, got: &SafeTensors, want: &SafeTensors, meta: &serde_json::Value) -> Option<String> {
    let w = want.tensor(name).ok()?;
    let g = match got.tensor(name) {
        Ok(g) => g,
        Err(_) => return Some(format!("{name} missing from our outputs")),
    };
    if g.dtype() != w.dtype() || g.shape() != w.shape() {
        return Some(format!("{name}: got {:?} {:?}, want {:?} {:?}", g.dtype(), g.shape(), w.dtype(), w.shape()));
    }
    let (gv, wv) = (values(g.dtype(), g.data()), values(w.dtype(), w.data()));
    if !is_float(w.dtype()) {
        let bad = gv.iter().zip(&wv).filter(|(a, b)| a != b).count();
        return (bad > 0).then(|| format!("{name}: {bad} of {} integer elements differ", wv.len()));
    }
    let atol = meta["atol"].as_f64().unwrap_or(1e-5);
    let rtol = meta["rtol"].as_f64().unwrap_or(1e-5);
    let mut worst = 0.0f64;
    let mut bad = 0;
    for (a, b) in gv.iter().zip(&wv) {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        if !ok {
            bad += 1;
        }
        if a.is_finite() && b.is_finite() {
            worst = worst.max((a - b).abs());
        }
    }
    if bad > 0 {
        return Some(format!("{name}: {bad} of {} elements outside atol {atol} rtol {rtol} (max abs err {worst:.3e})", wv.len()));
    }
    // Quantized programs must also reach the case's SQNR against the eager reference.
    if let Some(min_db) = meta["min_sqnr_db"].as_f64() {
        let signal: f64 = wv.iter().map(|x| x * x).sum();
        let noise: f64 = gv.iter().zip(&wv).map(|(a, b)| (a - b) * (a - b)).sum();
        let db = 10.0 * (signal / noise.max(1e-30)).log10();
        if db < min_db {
            return Some(format!("{name}: SQNR {db:.1} dB below {min_db} dB"));
        }
    }
    None
}
