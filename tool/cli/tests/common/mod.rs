//! Helpers shared by the integration tests: where the shared test data is, and how to list it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
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
pub fn et_run_one(python: &Path, pte: &Path, input: (safetensors::Dtype, Vec<usize>, &[u8]), dir: &Path, label: &str) -> (safetensors::Dtype, Vec<u8>) {
    let (inp, out) = (dir.join(format!("{label}.in.safetensors")), dir.join(format!("{label}.out.safetensors")));
    let view = safetensors::tensor::TensorView::new(input.0, input.1, input.2).unwrap();
    std::fs::write(&inp, safetensors::serialize([("input.0", view)], None).unwrap()).unwrap();
    let run = std::process::Command::new(python).arg(repo().join("tool/python/et_run.py")).args([pte, &inp]).arg("input.0").arg(&out).output().unwrap();
    assert!(run.status.success(), "{label}: ExecuTorch failed on {}:\n{}", pte.display(), String::from_utf8_lossy(&run.stderr));
    let data = std::fs::read(&out).unwrap();
    let st = safetensors::SafeTensors::deserialize(&data).unwrap();
    let t = st.tensor("output.0").unwrap();
    (t.dtype(), t.data().to_vec())
}
