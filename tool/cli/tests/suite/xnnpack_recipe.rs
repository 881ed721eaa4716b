//! `recipes/mobilenet-xnnpack-cpu.kdl` end to end: rbuild exports MobileNetV2 with every op in
//! an `XnnpackBackend` delegate, the runner links the backend and no kernel, and `rbuild verify`
//! passes on the host and (where the cross tools exist) under qemu-aarch64, where the
//! delegate runs on the NEON micro-kernels.

use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success())
}

#[test]
fn mobilenet_xnnpack_recipe_verifies_on_host_and_aarch64() {
    let out = tempfile::tempdir().unwrap();
    let cross = have("aarch64-linux-gnu-gcc") && have("qemu-aarch64");
    let mut args = vec!["verify", "mobilenet-xnnpack-cpu", "input-shape=1,3,96,96"];
    if !cross {
        eprintln!("NOTICE: linux-arm64 left out: needs aarch64-linux-gnu-gcc and qemu-aarch64");
        args.push("platform=host");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild")).env("RBUILD_OUT", out.path()).env_remove("RBUILD_ROOT").args(&args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "rbuild {args:?}:\n{text}");
    let platforms: &[&str] = if cross { &["host", "linux-arm64"] } else { &["host"] };
    for p in platforms {
        let row = text.lines().find(|l| l.starts_with(p)).unwrap_or_else(|| panic!("no {p} row:\n{text}"));
        assert!(row.ends_with("pass"), "{p}:\n{text}");
    }
    let kernels: serde_json::Value = serde_json::from_slice(&std::fs::read(out.path().join("mobilenet-xnnpack-cpu/program/kernels.json")).unwrap()).unwrap();
    let ops: Vec<&str> = kernels["kernels"].as_array().unwrap().iter().filter_map(|k| k["op"].as_str()).collect();
    assert_eq!(ops, ["delegate::XnnpackBackend"], "the whole network is one delegate: {kernels}");
}
