//! Round trip against the reference runtime: every shared `.pte` is re-written by our writer
//! and must still load and run in ExecuTorch 1.3.1 (executorch-numpy-runtime), giving exactly
//! the original program's outputs. Needs the Python venv the README's test command creates;
//! without it the test is skipped locally and fails in CI.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{case_io, case_meta, pte_files, repo, testdata};

use rbuild_runtime::format::{rewrite, PteFile};

/// The oracle's Python: $RBUILD_PYTHON, else the repo's .venv.
fn oracle_python() -> Option<PathBuf> {
    let p = std::env::var_os("RBUILD_PYTHON").map(PathBuf::from).unwrap_or_else(|| repo().join(".venv/bin/python"));
    p.exists().then_some(p)
}

#[test]
fn rewritten_programs_run_in_executorch() {
    let Some(python) = oracle_python() else {
        assert!(std::env::var_os("CI").is_none(), "CI must provide the ExecuTorch oracle venv (.venv)");
        eprintln!("SKIPPED: no oracle venv (.venv/bin/python); run the README test command");
        return;
    };
    let td = testdata();
    let mut files = pte_files(&td.join("ops"));
    files.extend(pte_files(&td.join("models")));
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for (n, pte) in files.iter().enumerate() {
        let Some(meta) = case_meta(pte) else { continue };
        let data = std::fs::read(pte).unwrap();
        let file = PteFile::parse(&data).unwrap();
        let out = tmp.path().join(format!("{n}.pte"));
        std::fs::write(&out, rewrite(&file).unwrap()).unwrap();
        cases.push(serde_json::json!({
            "label": pte.strip_prefix(&td).unwrap().display().to_string(),
            "pte": out,
            "original": pte,
            "io": case_io(pte),
            "atol": meta["atol"].as_f64().unwrap_or(1e-5),
            "rtol": meta["rtol"].as_f64().unwrap_or(1e-5),
            "outputs": meta["outputs"].as_array().map_or(0, |o| o.len()),
        }));
    }
    let manifest = tmp.path().join("cases.json");
    std::fs::write(&manifest, serde_json::to_vec(&cases).unwrap()).unwrap();
    let run = Command::new(python).arg(repo().join("tool/python/et_oracle.py")).arg(&manifest).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "rewritten programs failed in ExecuTorch");
    assert!(stdout.contains(&format!("{} passed, 0 failed", cases.len())));
}
