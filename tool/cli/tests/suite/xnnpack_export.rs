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

/// Signal-to-quantization-noise ratio of `got` against `want`, in dB.
fn sqnr_db(got: &[f64], want: &[f64]) -> f64 {
    let signal: f64 = want.iter().map(|w| w * w).sum();
    let noise: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    10.0 * (signal / noise.max(1e-30)).log10()
}

fn output0(path: &std::path::Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor("output.0").unwrap();
    common::values(t.dtype(), t.data())
}

/// Dynamically quantized linear layers (`--quant 8da8w`, `8da4w` per channel and in blocks of
/// 32): every `torch.export` archive of the testdata with linear layers, exported with
/// `--backend xnnpack`, runs in rbuild and in ExecuTorch 1.3.1's XNNPACK backend. The two
/// runtimes must agree far more closely than either agrees with PyTorch's float output (the
/// integer part is exact; a row whose float input differs by an ulp after upstream float ops
/// may pick another scale), and both must stay close to the float output.
#[test]
fn dynamically_quantized_linear_layers_run_like_executorch() {
    let dir = common::testdata().join("pt2");
    if !dir.is_dir() {
        eprintln!("SKIPPED: no testdata at {}", dir.display());
        return;
    }
    let python = common::oracle_python();
    let mut jsons: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
    jsons.sort();
    let mut checked = 0;
    for json in jsons {
        let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let stem = json.file_stem().unwrap().to_string_lossy().into_owned();
        let Some(archive) = meta["archive"].as_str() else { continue };
        // One io case per archive (the one named after it), archives with linear layers.
        let has_linear = meta["ops"].as_array().is_some_and(|ops| ops.iter().any(|o| matches!(o.as_str(), Some("aten::linear.default" | "aten::linear" | "aten::addmm.default" | "aten::mm.default"))));
        if format!("{stem}.pt2") != archive || !has_linear {
            continue;
        }
        let io = dir.join(format!("{stem}.io.safetensors"));
        let keys: Vec<String> = meta["inputs"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap().to_string()).collect();
        let want = output0(&io);
        let tmp = tempfile::tempdir().unwrap();
        for (mode, group) in [("8da8w", "32"), ("8da4w", "0"), ("8da4w", "32")] {
            let label = format!("{stem} {mode} group {group}");
            let pte = tmp.path().join(format!("{mode}-{group}.pte"));
            let export = rbuild(&[
                "export".as_ref(),
                "--pt2".as_ref(),
                dir.join(archive).as_os_str(),
                "--backend".as_ref(),
                "xnnpack".as_ref(),
                "--quant".as_ref(),
                mode.as_ref(),
                "--group-size".as_ref(),
                group.as_ref(),
                "--out".as_ref(),
                pte.as_os_str(),
            ]);
            let stderr = String::from_utf8_lossy(&export.stderr);
            if !export.status.success() && (stderr.contains("dynamic dims") || stderr.contains("not a multiple of the 8da4w group size")) {
                eprintln!("{label}: not exportable this way, skipped: {}", stderr.lines().last().unwrap_or(""));
                continue;
            }
            assert!(export.status.success(), "{label}: export failed:\n{stderr}");
            let inspect = rbuild(&["inspect".as_ref(), pte.as_os_str()]);
            let text = String::from_utf8_lossy(&inspect.stdout);
            if !(text.contains("Convert") && text.contains("FullyConnected")) {
                eprintln!("{label}: no linear layer reached the XNNPACK delegate, skipped");
                continue;
            }
            let out = tmp.path().join(format!("{mode}-{group}.rbuild.safetensors"));
            let run = rbuild(&["run".as_ref(), pte.as_os_str(), "--inputs".as_ref(), io.as_os_str(), "--output".as_ref(), out.as_os_str()]);
            assert!(run.status.success(), "{label}: rbuild run failed:\n{}", String::from_utf8_lossy(&run.stderr));
            let got = output0(&out);
            let ours = sqnr_db(&got, &want);
            // 4-bit weights cost far more accuracy than 8-bit ones, on random weights too.
            let floor = if mode == "8da8w" { 25.0 } else { 8.0 };
            eprintln!("{label}: rbuild SQNR vs PyTorch float {ours:.1} dB");
            assert!(ours >= floor, "{label}: rbuild's output is {ours:.1} dB from PyTorch's float output (at least {floor} dB expected)");
            checked += 1;
            let Some(python) = &python else { continue };
            let et_out = tmp.path().join(format!("{mode}-{group}.et.safetensors"));
            let et = Command::new(python).arg(common::repo().join("tool/python/et_run.py")).args([pte.as_os_str(), io.as_os_str(), keys.join(",").as_ref(), et_out.as_os_str()]).output().unwrap();
            assert!(et.status.success(), "{label}: ExecuTorch rejected the program:\n{}{}", String::from_utf8_lossy(&et.stdout), String::from_utf8_lossy(&et.stderr));
            let theirs_v = output0(&et_out);
            let close = got.iter().zip(&theirs_v).filter(|(a, b)| (*a - *b).abs() <= 1e-5 * a.abs().max(1.0)).count();
            let theirs = sqnr_db(&theirs_v, &want);
            // The runtimes must agree far better than either agrees with float: a row whose
            // float input differs by an ulp upstream may pick another scale, nothing more.
            let between = sqnr_db(&got, &theirs_v);
            eprintln!("{label}: ExecuTorch SQNR {theirs:.1} dB; rbuild vs ExecuTorch {between:.1} dB, {close} of {} elements within 1e-5", got.len());
            assert!(between >= theirs + 10.0, "{label}: rbuild and ExecuTorch differ by {between:.1} dB SQNR, not much less than their error against float ({theirs:.1} dB)");
            assert!((ours - theirs).abs() <= 1.0, "{label}: SQNR {ours:.1} dB here, {theirs:.1} dB in ExecuTorch");
        }
    }
    assert!(checked > 0, "no testdata archive with linear layers was exported with dynamic quantization");
}
