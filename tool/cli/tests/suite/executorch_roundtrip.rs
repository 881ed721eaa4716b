//! Round trip against the reference runtime: every shared `.pte` is re-written by our writer
//! and must still load and run in ExecuTorch 1.3.1 (executorch-numpy-runtime), giving exactly
//! the original program's outputs. Needs the Python venv the README's test command creates;
//! without it the test is skipped locally and fails in CI.

use crate::common;

use common::{case_io, case_meta, oracle_python, pte_files, run_oracle, testdata};

use rbuild_runtime::format::{rewrite, PteFile};

#[test]
fn rewritten_programs_run_in_executorch() {
    let Some(python) = oracle_python() else { return };
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
    eprintln!("{}", run_oracle(&python, &cases, tmp.path()));
}
