//! Runs every `.pte` case of ../shared/testdata (ops/, ops_portable/, xnnpack_ops/ and models/)
//! through `rbuild run` and
//! compares each output with the PyTorch reference under the case's tolerance: portable
//! programs and XNNPACK-delegated ones (on rbuild's `XnnpackBackend`; int8 ones also within one
//! quantization step of ExecuTorch's own output). Programs for other delegates must fail
//! cleanly naming the backend. New cases dropped into those folders are picked up without code
//! changes.

use crate::common;

use std::process::Command;

use common::{case_io, case_meta, compare, pte_files, testdata, values};

use safetensors::{Dtype, SafeTensors};

/// Every case under `ops/` (single operators of the model programs), `ops_portable/` (the rest
/// of ExecuTorch's portable operator set), `xnnpack_ops/` (XNNPACK-delegated single node kinds)
/// and `models/`, each walk printing its own counts.
#[test]
fn every_case_matches_reference() {
    let td = testdata();
    let mut all_failures = Vec::new();
    let mut total = 0;
    for folder in ["ops", "ops_portable", "xnnpack_ops", "models"] {
        let (n, failures) = walk_folder(folder);
        total += n;
        all_failures.extend(failures);
    }
    assert!(total > 500, "testdata not found at {}", td.display());
    assert!(all_failures.is_empty(), "{} of {total} cases failed:\n{}", all_failures.len(), all_failures.join("\n"));
}

/// Runs every `.pte` case under `folder` through `rbuild run`; returns the case count and the
/// failures (printed with the counts).
fn walk_folder(folder: &str) -> (usize, Vec<String>) {
    let td = testdata();
    let cases = pte_files(&td.join(folder));
    let tmp = tempfile::tempdir().unwrap();
    let (mut passed, mut skipped) = (0, 0);
    let mut failures = Vec::new();
    for pte in &cases {
        let Some(meta) = case_meta(pte) else { continue };
        let io = case_io(pte);
        let label = pte.strip_prefix(&td).unwrap().display().to_string();
        let delegated = meta["delegates"].as_array().is_some_and(|d| !d.is_empty());
        let out = tmp.path().join(format!("{}.safetensors", passed + failures.len() + skipped));
        let run = Command::new(env!("CARGO_BIN_EXE_rbuild"))
            .args(["run".as_ref(), pte.as_os_str(), "--inputs".as_ref(), io.as_os_str(), "--output".as_ref(), out.as_os_str()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        let xnnpack = delegated && meta["delegates"].as_array().is_some_and(|d| d.iter().all(|id| id == "XnnpackBackend"));
        if delegated && !xnnpack {
            // No backend for these here: the load must fail cleanly, naming the backend.
            let id = meta["delegates"][0].as_str().unwrap_or("");
            if run.status.success() || !stderr.contains(id) || stderr.contains("panicked") {
                failures.push(format!("{label}: delegated program should fail naming {id}; got: {stderr}"));
            } else {
                skipped += 1;
            }
            continue;
        }
        if !run.status.success() {
            failures.push(format!("{label}: {}", stderr.trim()));
            continue;
        }
        let (got, want) = (std::fs::read(&out).unwrap(), std::fs::read(&io).unwrap());
        let (got, want) = (SafeTensors::deserialize(&got).unwrap(), SafeTensors::deserialize(&want).unwrap());
        let n_out = meta["outputs"].as_array().map_or(0, |o| o.len());
        let mut errs: Vec<String> = (0..n_out).filter_map(|i| compare(&format!("output.{i}"), &got, &want, &meta)).collect();
        if xnnpack && label.contains("int8") {
            for i in 0..n_out {
                match within_one_step(&got, &want, i) {
                    Ok(note) => eprintln!("  {label} output.{i} vs ExecuTorch's XNNPACK run: {note}"),
                    Err(e) => errs.push(e),
                }
            }
        }
        if errs.is_empty() {
            passed += 1;
        } else {
            failures.push(format!("{label}: {}", errs.join("; ")));
        }
    }
    eprintln!("{folder}: {passed} passed, {} failed ({skipped} programs for other delegates rejected cleanly)", failures.len());
    for f in &failures {
        eprintln!("  FAIL {f}");
    }
    (cases.len(), failures)
}

/// An int8 program's dequantized output against ExecuTorch's (`et_output.N`): every element
/// within one quantization step, the step being the smallest gap between ExecuTorch's distinct
/// output values (they are `scale · (q − zero_point)`). Returns how many elements differ.
fn within_one_step(got: &SafeTensors<'_>, want: &SafeTensors<'_>, i: usize) -> Result<String, String> {
    let (g, e) = match (got.tensor(&format!("output.{i}")), want.tensor(&format!("et_output.{i}"))) {
        (Ok(g), Ok(e)) => (values(g.dtype(), g.data()), values(e.dtype(), e.data())),
        _ => return Err(format!("output.{i}: missing et_output.{i}")),
    };
    let mut levels: Vec<f64> = e.clone();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    let step = levels.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
    if !step.is_finite() || g.len() != e.len() {
        return Err(format!("output.{i}: cannot tell ExecuTorch's quantization step"));
    }
    let steps: Vec<f64> = g.iter().zip(&e).map(|(a, b)| (a - b).abs() / step).collect();
    let worst = steps.iter().copied().fold(0.0, f64::max);
    let differ = steps.iter().filter(|&&s| s > 0.01).count();
    if worst > 1.01 {
        return Err(format!("output.{i}: {differ} of {} values differ from ExecuTorch's, by up to {worst:.2} quantization steps of {step:.5}", g.len()));
    }
    Ok(format!("{differ} of {} values differ by one quantization step ({step:.5}), the rest are equal", g.len()))
}

/// Float bit patterns equal, NaN payloads aside.
fn same_bits(dtype: Dtype, a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (av, bv) = (values(dtype, a), values(dtype, b));
    av.iter().zip(&bv).all(|(x, y)| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits())
}

/// Operators whose portable kernels compute in ExecuTorch's exact f32 order: a program made only
/// of these reproduces ExecuTorch's output bit for bit (MobileNetV2 fp32 and its int8 reference
/// representation among them). Others (libm-based math, ExecuTorch's blocked GEMMs, its
/// reciprocal-multiply division by a scalar) match within tolerance only.
const ET_EXACT_OPS: &[&str] = &[
    "aten::convolution.out",
    "aten::_native_batch_norm_legit_no_training.out",
    "aten::addmm.out",
    "aten::mean.out",
    "aten::hardtanh.out",
    "aten::relu.out",
    "aten::clamp.out",
    "aten::add.out",
    "aten::sub.out",
    "aten::neg.out",
    "aten::permute_copy.out",
    "aten::view_copy.out",
    "aten::expand_copy.out",
    "aten::slice_copy.Tensor_out",
    "aten::unsqueeze_copy.out",
    "aten::cat.out",
    "dim_order_ops::_clone_dim_order.out",
    "dim_order_ops::_to_dim_order_copy.out",
    "quantized_decomposed::quantize_per_tensor.out",
    "quantized_decomposed::dequantize_per_tensor.out",
    "quantized_decomposed::dequantize_per_channel.out",
];

/// The portable kernels alone: every case within its tolerance; every case made only of
/// [`ET_EXACT_OPS`] equal to ExecuTorch's own output (`et_output.N`) bit for bit.
#[test]
fn portable_kernels_against_reference_and_executorch() {
    let td = testdata();
    let mut cases = pte_files(&td.join("ops"));
    cases.extend(pte_files(&td.join("ops_portable")));
    cases.extend(pte_files(&td.join("models")));
    let tmp = tempfile::tempdir().unwrap();
    let (mut exact, mut close) = (Vec::new(), Vec::new());
    let mut failures = Vec::new();
    for (k, pte) in cases.iter().enumerate() {
        let Some(meta) = case_meta(pte) else { continue };
        if meta["delegates"].as_array().is_some_and(|d| !d.is_empty()) {
            continue;
        }
        let io = case_io(pte);
        let label = pte.strip_prefix(&td).unwrap().display().to_string();
        let out = tmp.path().join(format!("{k}.safetensors"));
        let run = Command::new(env!("CARGO_BIN_EXE_rbuild"))
            .args(["run".as_ref(), pte.as_os_str(), "--kernels".as_ref(), "portable".as_ref()])
            .args(["--inputs".as_ref(), io.as_os_str(), "--output".as_ref(), out.as_os_str()])
            .output()
            .unwrap();
        if !run.status.success() {
            failures.push(format!("{label}: {}", String::from_utf8_lossy(&run.stderr).trim()));
            continue;
        }
        let (got, want) = (std::fs::read(&out).unwrap(), std::fs::read(&io).unwrap());
        let (got, want) = (SafeTensors::deserialize(&got).unwrap(), SafeTensors::deserialize(&want).unwrap());
        let n_out = meta["outputs"].as_array().map_or(0, |o| o.len());
        let errs: Vec<String> = (0..n_out).filter_map(|i| compare(&format!("output.{i}"), &got, &want, &meta)).collect();
        if !errs.is_empty() {
            failures.push(format!("{label}: {}", errs.join("; ")));
            continue;
        }
        let bit_exact = (0..n_out).all(|i| match (got.tensor(&format!("output.{i}")), want.tensor(&format!("et_output.{i}"))) {
            (Ok(g), Ok(e)) => g.dtype() == e.dtype() && same_bits(g.dtype(), g.data(), e.data()),
            _ => false,
        });
        let claimed = meta["ops"].as_array().is_some_and(|ops| ops.iter().all(|o| o.as_str().is_some_and(|o| ET_EXACT_OPS.contains(&o))));
        if bit_exact {
            exact.push(label)
        } else if claimed {
            failures.push(format!("{label}: only ExecuTorch-exact ops, yet differs from et_output bit-wise"));
        } else {
            close.push(label)
        }
    }
    eprintln!(
        "portable kernels: {} cases equal ExecuTorch's output bit for bit, {} within tolerance only, {} failed",
        exact.len(),
        close.len(),
        failures.len()
    );
    for c in &close {
        eprintln!("  within tolerance, not bit-exact: {c}");
    }
    for f in &failures {
        eprintln!("  FAIL {f}");
    }
    assert!(failures.is_empty(), "{} cases failed on the portable kernels", failures.len());
}
