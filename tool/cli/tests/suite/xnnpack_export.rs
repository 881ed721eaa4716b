//! `rbuild export --backend xnnpack`: MobileNetV2 and V3-small with the testdata weights, their
//! float ops in `XnnpackBackend` delegates. The program must (a) show the delegate in `rbuild
//! inspect`, (b) match the case's reference output in `rbuild run` (rbuild's NHWC kernels) and
//! (c) match it in ExecuTorch's own runtime with its XNNPACK backend.

use std::process::Command;

use safetensors::SafeTensors;

use crate::common;

fn rbuild(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rbuild")).args(args).output().unwrap()
}

/// Largest |got - want| over output.0.
fn max_abs_err(got: &SafeTensors, want: &SafeTensors) -> f64 {
    let (g, w) = (got.tensor("output.0").unwrap(), want.tensor("output.0").unwrap());
    let (gv, wv) = (common::values(g.dtype(), g.data()), common::values(w.dtype(), w.data()));
    gv.iter().zip(&wv).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max)
}

fn exported_with_xnnpack(folder: &str, arch: &str) {
    let case = common::testdata().join("models").join(folder);
    let weights = case.join("model.safetensors");
    if !weights.is_file() {
        eprintln!("SKIPPED: no testdata weights at {}", weights.display());
        return;
    }
    let meta = common::case_meta(&case.join("model.pte")).expect("case json");
    let io = case.join("model.io.safetensors");
    let dir = tempfile::tempdir().unwrap();
    let pte = dir.path().join(format!("{arch}.xnnpack.pte"));
    let export = rbuild(&["export".as_ref(), "--model".as_ref(), arch.as_ref(), "--weights".as_ref(), weights.as_os_str(), "--backend".as_ref(), "xnnpack".as_ref(), "--out".as_ref(), pte.as_os_str()]);
    let stderr = String::from_utf8_lossy(&export.stderr);
    assert!(export.status.success(), "{arch}: export failed:\n{stderr}");
    assert!(stderr.contains("0 on the CPU"), "{arch}: ops left on the CPU:\n{stderr}");

    // (a) inspect names the delegate.
    let inspect = rbuild(&["inspect".as_ref(), pte.as_os_str()]);
    let text = format!("{}{}", String::from_utf8_lossy(&inspect.stdout), String::from_utf8_lossy(&inspect.stderr));
    assert!(inspect.status.success() && text.contains("XnnpackBackend"), "{arch}: inspect:\n{text}");

    let want_bytes = std::fs::read(&io).unwrap();
    let want = SafeTensors::deserialize(&want_bytes).unwrap();

    // (b) rbuild's runtime (the XnnpackBackend CPU delegate).
    let out = dir.path().join("rbuild.out.safetensors");
    let run = rbuild(&["run".as_ref(), pte.as_os_str(), "--inputs".as_ref(), io.as_os_str(), "--output".as_ref(), out.as_os_str()]);
    assert!(run.status.success(), "{arch}: rbuild run failed:\n{}", String::from_utf8_lossy(&run.stderr));
    let got_bytes = std::fs::read(&out).unwrap();
    let got = SafeTensors::deserialize(&got_bytes).unwrap();
    let mismatch = common::compare("output.0", &got, &want, &meta);
    eprintln!("{arch}: rbuild max abs err {:.3e}", max_abs_err(&got, &want));
    assert!(mismatch.is_none(), "{arch}: rbuild: {}", mismatch.unwrap_or_default());

    // (c) ExecuTorch's runtime with its XNNPACK backend.
    let Some(python) = common::oracle_python() else { return };
    let et_out = dir.path().join("et.out.safetensors");
    let et = Command::new(&python)
        .arg(common::repo().join("tool/python/et_run.py"))
        .args([pte.as_os_str(), io.as_os_str(), "input.0".as_ref(), et_out.as_os_str()])
        .output()
        .unwrap();
    assert!(et.status.success(), "{arch}: ExecuTorch rejected the program:\n{}{}", String::from_utf8_lossy(&et.stdout), String::from_utf8_lossy(&et.stderr));
    let et_bytes = std::fs::read(&et_out).unwrap();
    let et_got = SafeTensors::deserialize(&et_bytes).unwrap();
    let mismatch = common::compare("output.0", &et_got, &want, &meta);
    eprintln!("{arch}: ExecuTorch max abs err {:.3e}", max_abs_err(&et_got, &want));
    assert!(mismatch.is_none(), "{arch}: ExecuTorch: {}", mismatch.unwrap_or_default());
}

#[test]
fn mobilenet_v2_xnnpack_runs_in_rbuild_and_executorch() {
    exported_with_xnnpack("mobilenet_v2", "mobilenet_v2");
}

#[test]
fn mobilenet_v3_small_xnnpack_runs_in_rbuild_and_executorch() {
    exported_with_xnnpack("mobilenet_v3_small", "mobilenet_v3_small");
}
