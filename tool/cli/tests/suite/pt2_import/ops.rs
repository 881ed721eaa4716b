//! Every `torch.export` archive of ../shared/testdata/pt2_ops (the portable operator set's
//! small modules in the training IR, one folder per operator): `rbuild export --pt2` must
//! import every one; `rbuild run` must match the case's io within tolerance, and ExecuTorch
//! 1.3.1 must run the same program, except where ExecuTorch itself differs from PyTorch (listed
//! below with the reason). Prints "pt2_ops: N passed, M failed" and every failure.

use std::path::PathBuf;

use safetensors::SafeTensors;

use super::rbuild;
use crate::common::{compare, oracle_python, repo, testdata};

/// Cases where ExecuTorch 1.3.1 itself differs from eager PyTorch (the reference runtimes'
/// known deviations, shared/testdata/README.md "Where the reference runtimes differ").
const EXECUTORCH_DIFFERS: &[(&str, &str)] = &[
    ("aten__remainder.Tensor_out/int64", "ExecuTorch's int64 remainder takes the dividend's sign, PyTorch the divisor's"),
    ("aten__remainder.Scalar_out/int64_neg_divisor", "ExecuTorch's int64 remainder takes the dividend's sign, PyTorch the divisor's"),
    ("aten__max_pool2d_with_indices_backward.grad_input/k2_s2", "ExecuTorch's gradient differs from eager on part of grad_input"),
    ("aten__max_pool2d_with_indices_backward.grad_input/k3_s2_p1_overlap", "ExecuTorch's gradient differs from eager on part of grad_input"),
    ("aten___upsample_bilinear2d_aa.out/down", "the 1.3.1 runtime's antialiased downsampling differs by up to 0.18"),
    ("aten__fill.Tensor_out/float", "the 1.3.1 runtime fails to execute fill.Tensor_out (1.5.1 matches)"),
    ("aten__fill.Tensor_out/int64_from_float", "the 1.3.1 runtime fails to execute fill.Tensor_out (1.5.1 matches)"),
];

fn listed<'a>(list: &'a [(&str, &str)], case: &str) -> Option<&'a str> {
    let folder = case.split('/').next().unwrap_or(case);
    list.iter().find(|(c, _)| *c == case || *c == folder).map(|(_, why)| *why)
}

/// Every `pt2_ops/<folder>/<variant>.pt2`, sorted, as (`folder/variant`, path without `.pt2`).
fn cases() -> Vec<(String, PathBuf)> {
    let root = testdata().join("pt2_ops");
    let mut out = Vec::new();
    for folder in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display())) {
        let folder = folder.unwrap().path();
        if !folder.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&folder).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "pt2") {
                let label = format!("{}/{}", folder.file_name().unwrap().to_string_lossy(), path.file_stem().unwrap().to_string_lossy());
                out.push((label, path.with_extension("")));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_pt2_ops_archive_imports_and_runs_in_rbuild_and_executorch() {
    let cases = cases();
    assert!(cases.len() >= 300, "pt2_ops cases not found under {}", testdata().display());
    let tmp = tempfile::tempdir().unwrap();
    let (mut passed, mut failures, mut import_failures) = (0, Vec::new(), Vec::new());
    let mut oracle_cases = Vec::new();
    for (label, stem) in &cases {
        let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(stem.with_extension("json")).unwrap()).unwrap();
        let io = PathBuf::from(format!("{}.io.safetensors", stem.display()));
        let pte = tmp.path().join(format!("{}.pte", label.replace('/', "__")));
        let export = rbuild(&["export".as_ref(), "--pt2".as_ref(), stem.with_extension("pt2").as_os_str(), "--out".as_ref(), pte.as_os_str()]);
        if !export.status.success() {
            import_failures.push(format!("{label}: import failed: {}", String::from_utf8_lossy(&export.stderr).trim()));
            continue;
        }
        let n_out = meta["outputs"].as_array().map_or(0, |o| o.len());
        oracle_cases.push(serde_json::json!({
            "label": label, "pte": pte, "io": io, "outputs": n_out,
            "atol": meta["atol"].as_f64().unwrap_or(1e-5), "rtol": meta["rtol"].as_f64().unwrap_or(1e-5),
        }));
        let out = tmp.path().join(format!("{}.out.safetensors", label.replace('/', "__")));
        let run = rbuild(&["run".as_ref(), pte.as_os_str(), "--inputs".as_ref(), io.as_os_str(), "--output".as_ref(), out.as_os_str()]);
        let failure = if !run.status.success() {
            Some(format!("run failed: {}", String::from_utf8_lossy(&run.stderr).trim()))
        } else {
            let (got, want) = (std::fs::read(&out).unwrap(), std::fs::read(&io).unwrap());
            let (got, want) = (SafeTensors::deserialize(&got).unwrap(), SafeTensors::deserialize(&want).unwrap());
            let errs: Vec<String> = (0..n_out).filter_map(|i| compare(&format!("output.{i}"), &got, &want, &meta)).collect();
            (!errs.is_empty()).then(|| errs.join("; "))
        };
        match failure {
            None => passed += 1,
            Some(f) => failures.push(format!("{label}: {f}")),
        }
    }
    eprintln!("pt2_ops: {passed} passed, {} failed ({} cases)", failures.len() + import_failures.len(), cases.len());
    for f in import_failures.iter().chain(&failures) {
        eprintln!("  FAIL {f}");
    }
    assert!(import_failures.is_empty(), "{} archive(s) failed to import:\n{}", import_failures.len(), import_failures.join("\n"));
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));

    // ExecuTorch 1.3.1 runs the same programs: every operator and argument list is its own.
    let Some(python) = oracle_python() else { return };
    let manifest = tmp.path().join("pt2_ops_oracle.json");
    std::fs::write(&manifest, serde_json::to_vec(&oracle_cases).unwrap()).unwrap();
    let run = std::process::Command::new(&python).arg(repo().join("tool/python/et_oracle.py")).arg(&manifest).output().unwrap();
    let report = String::from_utf8_lossy(&run.stdout).into_owned();
    let et_failures: Vec<&str> = report.lines().filter_map(|l| l.strip_prefix("FAIL ")).collect();
    let et_passed = oracle_cases.len() - et_failures.len();
    eprintln!("pt2_ops in ExecuTorch 1.3.1: {et_passed} passed, {} failed", et_failures.len());
    for f in &et_failures {
        let label = f.split(':').next().unwrap_or(f);
        match listed(EXECUTORCH_DIFFERS, label) {
            Some(why) => eprintln!("  FAIL (known: {why}) {f}"),
            None => eprintln!("  FAIL {f}"),
        }
    }
    let unexplained: Vec<&&str> = et_failures.iter().filter(|f| listed(EXECUTORCH_DIFFERS, f.split(':').next().unwrap_or(f)).is_none()).collect();
    assert!(unexplained.is_empty(), "ExecuTorch 1.3.1 fails programs rbuild wrote:\n{unexplained:?}\n{}", String::from_utf8_lossy(&run.stderr));
}
