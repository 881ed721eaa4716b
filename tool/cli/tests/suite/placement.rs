//! `rbuild inspect` tells where each operator would run before any build: a `.pt2` archive
//! through the passes and partitioner of a backend (`--backend`, or a recipe's), a `.pte`
//! program by the kernel each operator gets and whether the program loads in rbuild.

use std::process::Command;

use crate::common::testdata;

fn inspect(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rbuild")).arg("inspect").args(args).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn archive_placement_per_backend() {
    let archive = testdata().join("pt2/mobilenet_v2.pt2");
    let archive = archive.to_str().unwrap();
    // XNNPACK takes MobileNetV2 whole.
    let (ok, text) = inspect(&[archive, "--backend", "xnnpack", "--json"]);
    assert!(ok, "{text}");
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ops = report["placement"]["ops"].as_array().unwrap();
    assert!(ops.len() > 50, "{}", report["placement"]);
    let cpu: Vec<&serde_json::Value> = ops.iter().filter(|o| !o["runs_on"].as_str().unwrap().starts_with("XnnpackBackend")).collect();
    assert!(cpu.is_empty(), "ops left on the CPU: {cpu:?}");
    // On the CPU every op names its kernel; none is missing.
    let (ok, text) = inspect(&[archive, "--backend", "cpu"]);
    assert!(ok, "{text}");
    assert!(text.contains("cpu: aten::convolution.out") && !text.contains("NO KERNEL"), "{text}");
    assert!(text.contains("0 without a kernel"), "{text}");
    // A recipe's backend, and the backends placement cannot be told for.
    let (ok, text) = inspect(&[archive, "--recipe", "mobilenet-pt2-cpu"]);
    assert!(ok && text.contains("placement for backend cpu"), "{text}");
    let (ok, text) = inspect(&[archive, "--backend", "ethos-u"]);
    assert!(!ok && text.contains("calibrated int8"), "{text}");
    let (ok, text) = inspect(&[archive, "--recipe", "no-such-recipe"]);
    assert!(!ok && text.contains("no-such-recipe"), "{text}");
}

#[test]
fn program_placement_names_kernels_and_load_status() {
    let pte = testdata().join("ops_portable/aten__topk.values/smallest_dim0.pte");
    let (ok, text) = inspect(&[pte.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(text.contains("aten::topk.values") && text.contains("cpu (portable kernel)"), "{text}");
    assert!(text.contains("runs in rbuild: yes"), "{text}");
    // A program with an XNNPACK delegate: the payload is checked by the delegate's init.
    let pte = testdata().join("xnnpack_ops/bmm.fp32.pte");
    let (ok, text) = inspect(&[pte.to_str().unwrap(), "--json"]);
    assert!(ok, "{text}");
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["methods"][0]["loads_in_rbuild"], "yes", "{text}");
    // --backend is for archives.
    let (ok, text) = inspect(&[pte.to_str().unwrap(), "--backend", "xnnpack"]);
    assert!(!ok && text.contains(".pt2"), "{text}");
}
