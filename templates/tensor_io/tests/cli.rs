//! The built `pte_runner` end to end: every program of the shared testdata on its io file
//! against the PyTorch reference within the case tolerance, made-up inputs for a smoke test,
//! dynamic shapes within their bound, the verify protocol, and bad input that fails cleanly
//! naming the file and the tensor.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_clean_failure, cases, mismatches, run, stderr, stdout, testdata};
use rbuild_export::emit::{self, Getter, MethodSpec};
use rbuild_export::graph::TensorMeta;
use rbuild_export::{passes, plan, ConstData, Dim, GraphBuilder};
use rbuild_runner_support::tensors::{self, HostTensor};
use rbuild_runtime::ScalarType;

const BIN: &str = env!("CARGO_BIN_EXE_pte_runner");

fn bin() -> &'static Path {
    Path::new(BIN)
}

fn base() -> PathBuf {
    testdata().join("bad/base.pte")
}

fn write(path: &Path, named: &[(&str, HostTensor)]) {
    let named: Vec<(String, HostTensor)> = named.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
    tensors::write_file(path, &named).unwrap();
}

fn floats(shape: &[usize]) -> HostTensor {
    let n: usize = shape.iter().product();
    HostTensor { dtype: ScalarType::Float, shape: shape.to_vec(), data: (0..n).flat_map(|i| (i as f32 * 0.1).to_le_bytes()).collect() }
}

#[test]
fn every_testdata_program_matches_its_reference() {
    let all = cases(&testdata());
    assert!(all.len() > 100, "testdata not found at {}", testdata().display());
    let tmp = tempfile::tempdir().unwrap();
    let (mut matched, mut delegated, mut failures) = (0, 0, Vec::new());
    for (k, case) in all.iter().enumerate() {
        let out = tmp.path().join(format!("{k}.safetensors"));
        let o = run(bin(), &[&"--model", &case.pte, &"--inputs", &case.io, &"--output", &out]);
        // XNNPACK programs run on the runner's XnnpackBackend like any program; other delegates
        // have no backend here: the load must fail cleanly, naming the backend.
        if let Some(id) = case.delegates().iter().find(|id| id.as_str() != "XnnpackBackend") {
            if o.status.code() != Some(1) || !stderr(&o).contains(id.as_str()) || stderr(&o).contains("panicked") {
                failures.push(format!("{}: should fail naming {id}: {}", case.label(), stderr(&o)));
            }
            delegated += 1;
            continue;
        }
        if !o.status.success() {
            failures.push(format!("{}: {}", case.label(), stderr(&o).trim()));
            continue;
        }
        let problems = mismatches(&tensors::read_file(&out).unwrap(), &case.expected(), &case.meta);
        if problems.is_empty() {
            matched += 1;
        } else {
            failures.push(format!("{}: {}", case.label(), problems.join("; ")));
        }
    }
    eprintln!("pte_runner: {matched} programs match their reference (XNNPACK ones included), {delegated} other delegated ones rejected cleanly, {} failed", failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Without `--inputs`, every model program runs on made-up inputs of its static shapes and
/// reports outputs of the reference's dtypes and shapes (what a bundle's smoke test sees).
#[test]
fn made_up_inputs_run_every_model_program() {
    let models: Vec<_> = cases(&testdata().join("models")).into_iter().filter(|c| c.delegates().is_empty()).collect();
    assert!(models.len() >= 5);
    for case in &models {
        let o = run(bin(), &[&"--model", &case.pte, &"--json"]);
        assert!(o.status.success(), "{}: {}", case.label(), stderr(&o));
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["inputs_from"], "synthetic");
        let want = case.expected();
        let outputs = report["outputs"].as_array().unwrap();
        assert_eq!(outputs.len(), tensors::numbered(&want, "output").len(), "{}", case.label());
        for out in outputs {
            let w = &want[out["name"].as_str().unwrap()];
            assert_eq!(out["dtype"], w.dtype.name(), "{}", case.label());
            assert_eq!(out["shape"], serde_json::json!(w.shape), "{}", case.label());
            assert_eq!(out["non_finite"], 0, "{}: {out}", case.label());
        }
        for (i, input) in report["inputs"].as_array().unwrap().iter().enumerate() {
            assert_eq!(input["shape"], serde_json::json!(want[&format!("input.{i}")].shape), "{}", case.label());
        }
    }
    // The text report: one line per tensor on stdout, the stats on stderr.
    let o = run(bin(), &[&"--model", &models[0].pte, &"--runs", &"3", &"--threads", &"2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("on synthetic inputs") && stdout(&o).contains("  output.0: float32 ["), "{}", stdout(&o));
    let stats = stderr(&o);
    assert!(stats.contains("3 run(s): median ") && stats.contains("2 thread(s), peak memory "), "{stats}");
}

/// `--runs`, `--threads` and `--json` with a file: the outputs of the last run, the figures of all.
#[test]
fn json_report_counts_runs_and_names_the_files() {
    let case = cases(&testdata().join("models/mobilenet_v2")).into_iter().find(|c| c.delegates().is_empty() && c.pte.ends_with("model.pte")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.safetensors");
    let o = run(bin(), &[&"--model", &case.pte, &"--inputs", &case.io, &"--output", &out, &"--runs", &"3", &"--threads", &"2", &"--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["inputs_from"], case.io.display().to_string());
    assert_eq!(report["output_file"], out.display().to_string());
    assert_eq!((report["stats"]["runs"].as_u64(), report["stats"]["threads"].as_u64()), (Some(3), Some(2)));
    let (median, min) = (report["stats"]["run_ms_median"].as_f64().unwrap(), report["stats"]["run_ms_min"].as_f64().unwrap());
    assert!(min > 0.0 && median >= min, "{report}");
    assert!(report["stats"]["load_ms"].as_f64().unwrap() > 0.0);
    assert!(mismatches(&tensors::read_file(&out).unwrap(), &case.expected(), &case.meta).is_empty());
    // Nothing but the output file in its folder: no temporary file left behind.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}

/// `forward(tokens int64 [1, S ≤ 16]) -> table[tokens]` plus a getter: dynamic-bound inputs
/// take any length up to the bound, each dim checked against it.
fn dynamic_program(dir: &Path) -> (PathBuf, Vec<f32>) {
    const VOCAB: usize = 10;
    const WIDTH: usize = 3;
    let table: Vec<f32> = (0..VOCAB * WIDTH).map(|i| i as f32 * 0.5 - 3.0).collect();
    let mut b = GraphBuilder::new();
    let s = b.sym("seq_len", 1, 16);
    let tokens = b.input("tokens", TensorMeta::new(ScalarType::Long, vec![Dim::Fixed(1), s]));
    let bytes: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
    let w = b.constant("table", ScalarType::Float, &[VOCAB, WIDTH], ConstData::owned(bytes)).unwrap();
    let rows = b.embedding(w, tokens).unwrap();
    b.output(rows);
    let mut g = b.finish();
    passes::optimize(&mut g).unwrap();
    let mem = plan::plan_memory(&g);
    let program = emit::emit_program(&[MethodSpec { name: "forward", graph: &g, plan: &mem }], &[Getter::int("get_vocab_size", VOCAB as i64)]).unwrap();
    let p = dir.join("dynamic.pte");
    std::fs::write(&p, program).unwrap();
    (p, table)
}

fn tokens(ids: &[i64]) -> HostTensor {
    HostTensor { dtype: ScalarType::Long, shape: vec![1, ids.len()], data: ids.iter().flat_map(|v| v.to_le_bytes()).collect() }
}

#[test]
fn dynamic_inputs_take_any_length_within_their_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let (pte, table) = dynamic_program(tmp.path());
    let (inp, out) = (tmp.path().join("in.safetensors"), tmp.path().join("out.safetensors"));
    for ids in [vec![3i64, 0, 9, 3, 1], vec![7; 16], vec![2]] {
        write(&inp, &[("input.0", tokens(&ids))]);
        let o = run(bin(), &[&"--model", &pte, &"--inputs", &inp, &"--output", &out]);
        assert!(o.status.success(), "{}", stderr(&o));
        let got = &tensors::read_file(&out).unwrap()["output.0"];
        assert_eq!(got.shape, [1, ids.len(), 3]);
        let want: Vec<f64> = ids.iter().flat_map(|&t| table[t as usize * 3..t as usize * 3 + 3].iter().map(|&v| f64::from(v))).collect();
        assert_eq!(got.values_f64().unwrap(), want);
    }
    // Above the bound, or the wrong rank: named, with the bound.
    write(&inp, &[("input.0", tokens(&[1; 17]))]);
    let o = run(bin(), &[&"--model", &pte, &"--inputs", &inp]);
    assert_clean_failure(&o, &["in.safetensors", "input.0", "[1, 16]", "dim 1 is above its bound 16"]);
    write(&inp, &[("input.0", HostTensor { dtype: ScalarType::Long, shape: vec![4], data: vec![0; 32] })]);
    assert_clean_failure(&run(bin(), &[&"--model", &pte, &"--inputs", &inp]), &["input.0", "rank 1, not 2"]);
    // Made-up inputs: the bound itself.
    let o = run(bin(), &[&"--model", &pte, &"--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["inputs"][0]["shape"], serde_json::json!([1, 16]));
    assert_eq!(report["outputs"][0]["shape"], serde_json::json!([1, 16, 3]));
    // Another method: a getter's scalar output becomes a 0-d int64 tensor.
    let o = run(bin(), &[&"--model", &pte, &"--method", &"get_vocab_size", &"--output", &out]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = &tensors::read_file(&out).unwrap()["output.0"];
    assert_eq!((got.dtype, got.shape.as_slice(), got.values_f64().unwrap()), (ScalarType::Long, &[][..], vec![10.0]));
    // A method the program lacks: the ones it has are listed.
    let o = run(bin(), &[&"--model", &pte, &"--method", &"decode"]);
    assert_clean_failure(&o, &["dynamic.pte", "'decode'", "forward", "get_vocab_size"]);
}

#[test]
fn bad_input_files_fail_naming_the_file_and_the_tensor() {
    let tmp = tempfile::tempdir().unwrap();
    let inp = tmp.path().join("in.safetensors");
    let model = base(); // takes float32 [2, 8]
    let fails = |names: &[&str]| assert_clean_failure(&run(bin(), &[&"--model", &model, &"--inputs", &inp]), names);
    write(&inp, &[("input.0", floats(&[2, 7]))]);
    fails(&["in.safetensors", "input.0: expected shape [2, 8], got [2, 7]"]);
    write(&inp, &[("input.0", HostTensor { dtype: ScalarType::Int, shape: vec![2, 8], data: vec![0; 64] })]);
    fails(&["in.safetensors", "input.0: expected dtype float32, got int32"]);
    write(&inp, &[("input.0", floats(&[2, 8])), ("input.1", floats(&[1]))]);
    fails(&["in.safetensors", "input.1 is one more than method 'forward' takes (1 input(s))"]);
    write(&inp, &[("x", floats(&[2, 8]))]);
    fails(&["in.safetensors", "no tensor input.0"]);
    // Malformed files from the shared testdata, each named; a wrong header names its tensor.
    let bad = testdata().join("bad");
    let mut n = 0;
    for entry in std::fs::read_dir(&bad).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("st_") {
            assert_clean_failure(&run(bin(), &[&"--model", &model, &"--inputs", &p]), &[&name, "not a valid safetensors file"]);
            n += 1;
        }
    }
    assert!(n >= 7, "only {n} malformed safetensors files");
    let st = bad.join("st_shape_mismatch.safetensors");
    assert_clean_failure(&run(bin(), &[&"--model", &model, &"--inputs", &st]), &["tensor 'a'", "needs 36 bytes"]);
    // The input file is read before the program: a bad file is reported even with a bad program.
    let o = run(bin(), &[&"--model", &bad.join("random_bytes.pte"), &"--inputs", &st]);
    assert_clean_failure(&o, &["st_shape_mismatch.safetensors"]);
    let missing = tmp.path().join("missing.safetensors");
    assert_clean_failure(&run(bin(), &[&"--model", &model, &"--inputs", &missing]), &["missing.safetensors"]);
}

#[test]
fn bad_programs_and_arguments_fail_cleanly() {
    let bad = testdata().join("bad");
    let mut n = 0;
    for entry in std::fs::read_dir(&bad).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        // Both reference runtimes accept a wrong extended-header magic; so may this one.
        if name.ends_with(".pte") && name != "base.pte" && name != "bad_ext_header_magic.pte" {
            assert_clean_failure(&run(bin(), &[&"--model", &p]), &[&name]);
            n += 1;
        }
    }
    assert!(n >= 15, "only {n} malformed programs");
    if !cfg!(feature = "embed-program") {
        assert_clean_failure(&run(bin(), &[&"--inputs", &testdata().join("bad/base.io.safetensors")]), &["--model is required"]);
    }
    assert_clean_failure(&run(bin(), &[&"--model", &base(), &"--runs", &"0"]), &["--runs must be at least 1"]);
    assert_clean_failure(&run(bin(), &[&"--model", &base(), &"--threads", &"0"]), &["--threads must be at least 1"]);
    // An output folder that does not exist: named, and no file appears.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("no/such/dir/out.safetensors");
    assert_clean_failure(&run(bin(), &[&"--model", &base(), &"--output", &out]), &["no/such/dir/out.safetensors"]);
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    // Usage errors exit 1 as well; --help succeeds.
    assert_eq!(run(bin(), &[&"--no-such-flag"]).status.code(), Some(1));
    let help = run(bin(), &[&"--help"]);
    assert!(help.status.success() && stdout(&help).contains("--inputs"));
}

/// `--verify-input`: the lines `rbuild verify` reads, equal to the reference bytes' values.
#[test]
fn verify_input_prints_outputs_in_the_protocol() {
    let io = testdata().join("bad/base.io.safetensors");
    let o = run(bin(), &[&"--model", &base(), &"--verify-input", &io]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let hex = lines[0].strip_prefix("RBUILD_OUTPUT index=0 dtype=float32 shape=2,4 hex=").unwrap_or_else(|| panic!("{out}"));
    let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    let got = HostTensor { dtype: ScalarType::Float, shape: vec![2, 4], data: bytes };
    let case = cases(&testdata().join("bad")).into_iter().find(|c| c.pte == base()).unwrap();
    let got = [("output.0".to_string(), got)].into_iter().collect();
    assert!(mismatches(&got, &case.expected(), &case.meta).is_empty());
    assert!(lines[1].starts_with("RBUILD_STATS elapsed_us=") && lines[1].ends_with("threads=1"), "{}", lines[1]);
    // A verify file that does not fit the method: named.
    let o = run(bin(), &[&"--model", &base(), &"--verify-input", &testdata().join("bad/valid_small.safetensors")]);
    assert_clean_failure(&o, &["valid_small.safetensors", "no tensor input.0"]);
}

#[test]
fn list_kernels_prints_the_registered_ops() {
    let o = run(bin(), &[&"--list-kernels"]);
    assert!(o.status.success());
    let listed: Vec<String> = stdout(&o).lines().map(String::from).collect();
    let want: Vec<String> = rbuild_tensor_io_runner::kernels::OPS.iter().map(|s| s.to_string()).collect();
    assert_eq!(listed, want);
}
