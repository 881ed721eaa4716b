//! Every `torch.export` archive case of ../shared/testdata/pt2 (each `NAME.json` with an
//! `archive` field): `rbuild export --pt2` imports the archive once, `rbuild run` matches every
//! io case of that archive (several lengths of one dynamic program among them) within the
//! case tolerance, a case with `second_call_output.0` returns it on its second call (mutable
//! buffers kept as state), and ExecuTorch 1.3.1 runs the same programs within tolerance.
//! New archives and cases dropped into the folder are picked up without code changes.

mod ops;

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{compare, oracle_python, run_oracle, testdata};
use safetensors::{tensor::TensorView, Dtype, SafeTensors};

/// One io case: its json, io file and label.
struct IoCase {
    label: String,
    meta: serde_json::Value,
    io: PathBuf,
}

/// io cases grouped by the archive they belong to.
fn cases_by_archive(dir: &Path) -> BTreeMap<PathBuf, Vec<IoCase>> {
    let mut by_archive: BTreeMap<PathBuf, Vec<IoCase>> = BTreeMap::new();
    let mut jsons: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    jsons.sort();
    for json in jsons {
        let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let Some(archive) = meta["archive"].as_str() else { continue };
        let stem = json.file_stem().unwrap().to_string_lossy().into_owned();
        let io = dir.join(format!("{stem}.io.safetensors"));
        if !io.exists() {
            continue;
        }
        by_archive.entry(dir.join(archive)).or_default().push(IoCase { label: stem, meta, io });
    }
    by_archive
}

pub(super) fn rbuild(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rbuild")).args(args).output().unwrap()
}

/// `second_call_output.0` of the json as f32 safetensors named `output.0`, shaped like the
/// first call's output.
fn second_call_reference(meta: &serde_json::Value) -> Option<Vec<u8>> {
    let rows = meta.get("second_call_output.0")?;
    fn flatten(v: &serde_json::Value, out: &mut Vec<f32>) {
        match v {
            serde_json::Value::Array(items) => items.iter().for_each(|i| flatten(i, out)),
            v => out.push(v.as_f64().expect("a number") as f32),
        }
    }
    let mut vals = Vec::new();
    flatten(rows, &mut vals);
    let shape: Vec<usize> = meta["outputs"][0]["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let view = TensorView::new(Dtype::F32, shape, &bytes).unwrap();
    Some(safetensors::serialize([("output.0", view)], None).unwrap())
}

#[test]
fn every_archive_imports_and_matches_its_io_in_rbuild_and_executorch() {
    let dir = testdata().join("pt2");
    let archives = cases_by_archive(&dir);
    assert!(archives.len() >= 9, "pt2 cases not found in {}", dir.display());
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut oracle_cases = Vec::new();
    let (mut matched, mut second_calls) = (0, 0);
    for (archive, cases) in &archives {
        let name = archive.file_stem().unwrap().to_string_lossy().into_owned();
        let pte = tmp.path().join(format!("{name}.pte"));
        let export = rbuild(&["export".as_ref(), "--pt2".as_ref(), archive.as_os_str(), "--out".as_ref(), pte.as_os_str()]);
        if !export.status.success() {
            failures.push(format!("{name}: export failed: {}", String::from_utf8_lossy(&export.stderr).trim()));
            continue;
        }
        for case in cases {
            let out = tmp.path().join(format!("{}.out.safetensors", case.label));
            let run = rbuild(&["run".as_ref(), pte.as_os_str(), "--inputs".as_ref(), case.io.as_os_str(), "--output".as_ref(), out.as_os_str()]);
            if !run.status.success() {
                failures.push(format!("{}: run failed: {}", case.label, String::from_utf8_lossy(&run.stderr).trim()));
                continue;
            }
            let (got, want) = (std::fs::read(&out).unwrap(), std::fs::read(&case.io).unwrap());
            let (got, want) = (SafeTensors::deserialize(&got).unwrap(), SafeTensors::deserialize(&want).unwrap());
            let n_out = case.meta["outputs"].as_array().map_or(0, |o| o.len());
            let errs: Vec<String> = (0..n_out).filter_map(|i| compare(&format!("output.{i}"), &got, &want, &case.meta)).collect();
            if errs.is_empty() {
                matched += 1;
            } else {
                failures.push(format!("{}: {}", case.label, errs.join("; ")));
            }
            if let Some(second) = second_call_reference(&case.meta) {
                let out2 = tmp.path().join(format!("{}.second.safetensors", case.label));
                let run = rbuild(&["run".as_ref(), pte.as_os_str(), "--inputs".as_ref(), case.io.as_os_str(), "--repeat".as_ref(), "2".as_ref(), "--output".as_ref(), out2.as_os_str()]);
                assert!(run.status.success(), "{}: {}", case.label, String::from_utf8_lossy(&run.stderr));
                let got = std::fs::read(&out2).unwrap();
                let (got, want) = (SafeTensors::deserialize(&got).unwrap(), SafeTensors::deserialize(&second).unwrap());
                match compare("output.0", &got, &want, &case.meta) {
                    None => second_calls += 1,
                    Some(e) => failures.push(format!("{} (second call): {e}", case.label)),
                }
            }
            oracle_cases.push(serde_json::json!({
                "label": case.label,
                "pte": pte,
                "io": case.io,
                "atol": case.meta["atol"].as_f64().unwrap_or(1e-5),
                "rtol": case.meta["rtol"].as_f64().unwrap_or(1e-5),
                "outputs": n_out,
            }));
        }
    }
    eprintln!("pt2: {} archives, {matched} io cases match, {second_calls} second calls match, {} failed", archives.len(), failures.len());
    for f in &failures {
        eprintln!("  FAIL {f}");
    }
    assert!(failures.is_empty(), "{} pt2 case(s) failed:\n{}", failures.len(), failures.join("\n"));
    if let Some(python) = oracle_python() {
        eprintln!("{}", run_oracle(&python, &oracle_cases, tmp.path()));
    }
}

/// `--quant int8` on an imported CNN, calibrated on a safetensors file of sample inputs
/// (`input.0` = [N, ...input shape]): the program runs and stays close to the float reference.
#[test]
fn an_imported_cnn_exports_int8_calibrated_on_sample_inputs() {
    let dir = testdata().join("pt2");
    let io_path = dir.join("zoo_resblock_cnn.io.safetensors");
    let io_bytes = std::fs::read(&io_path).unwrap();
    let io = SafeTensors::deserialize(&io_bytes).unwrap();
    let x = io.tensor("input.0").unwrap();
    let mut stacked = vec![1];
    stacked.extend_from_slice(x.shape());
    let tmp = tempfile::tempdir().unwrap();
    let calibration = tmp.path().join("calibration.safetensors");
    let view = TensorView::new(x.dtype(), stacked, x.data()).unwrap();
    std::fs::write(&calibration, safetensors::serialize([("input.0", view)], None).unwrap()).unwrap();

    let pte = tmp.path().join("int8.pte");
    let export = rbuild(&[
        "export".as_ref(),
        "--pt2".as_ref(),
        dir.join("zoo_resblock_cnn.pt2").as_os_str(),
        "--quant".as_ref(),
        "int8".as_ref(),
        "--calibration".as_ref(),
        calibration.as_os_str(),
        "--out".as_ref(),
        pte.as_os_str(),
    ]);
    let log = format!("{}{}", String::from_utf8_lossy(&export.stdout), String::from_utf8_lossy(&export.stderr));
    assert!(export.status.success(), "{log}");
    assert!(log.contains("calibration: 1 sample(s)"), "{log}");
    let out = tmp.path().join("int8.out.safetensors");
    let run = rbuild(&["run".as_ref(), pte.as_os_str(), "--inputs".as_ref(), io_path.as_os_str(), "--output".as_ref(), out.as_os_str()]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let got_bytes = std::fs::read(&out).unwrap();
    let got = SafeTensors::deserialize(&got_bytes).unwrap();
    let floats = |d: &[u8]| -> Vec<f64> { d.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect() };
    let (g, w) = (floats(got.tensor("output.0").unwrap().data()), floats(io.tensor("output.0").unwrap().data()));
    let signal: f64 = w.iter().map(|v| v * v).sum();
    let noise: f64 = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum();
    let sqnr = 10.0 * (signal / noise.max(1e-30)).log10();
    eprintln!("zoo_resblock_cnn int8 vs eager fp32: SQNR {sqnr:.1} dB");
    assert!(sqnr > 15.0, "int8 SQNR {sqnr:.1} dB");
}
