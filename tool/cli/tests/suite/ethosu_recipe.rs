//! `rbuild mobilenet-ethosu` end to end: MobileNetV2 int8 partitioned for the Ethos-U55-128,
//! compiled by Vela, stored as an `EthosUBackend` delegate; the bundle's delegation report and
//! manifest; the delegate blob against our parser; ExecuTorch 1.3.1's loader on the program;
//! `rbuild verify` booting the CPU-lowering firmware in QEMU; and `fallback "deny"` naming the
//! ops an NPU cannot take. Needs Vela (`tool/ci/setup.sh` installs it into `.venv`) and
//! qemu-system-arm; without them it prints SKIPPED locally and fails in CI.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use rbuild_runtime::backends::ethosu::blob::{self, BlockData, VelaBlobBuf};
use rbuild_runtime::format::PteFile;

fn vela() -> Option<PathBuf> {
    let v = common::repo().join(".venv/bin/vela");
    if v.is_file() {
        return Some(v);
    }
    assert!(std::env::var_os("CI").is_none(), "CI must install Vela (tool/ci/setup.sh)");
    println!("SKIPPED: no .venv/bin/vela");
    None
}

fn rbuild(out: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild")).env("RBUILD_OUT", out).args(args).output().unwrap();
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

#[test]
fn mobilenet_ethosu_builds_delegates_everything_and_verifies() {
    if vela().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let (ok, log) = rbuild(&out, &["mobilenet-ethosu", "--strict"]);
    assert!(ok, "{log}");
    assert!(log.contains("65 ops on the NPU in 1 subgraph(s), 0 on the CPU"), "{log}");
    // A cached build prints the report too.
    let (ok, again) = rbuild(&out, &["mobilenet-ethosu"]);
    assert!(ok && again.contains("0 ran") && again.contains("65 ops on the NPU"), "{again}");

    // The delegation report: every op placed, none on the CPU, Vela's summary says the same.
    let report = json(&out.join("mobilenet-ethosu/program/delegation.json"));
    assert_eq!(report["cpu_ops"], 0, "{report}");
    assert_eq!(report["npu_ops"], 65);
    assert_eq!(report["accelerator"], "ethos-u55-128");
    let sub = &report["subgraphs"][0];
    assert_eq!(sub["cpu_operators"], 0, "Vela's summary: {sub}");
    assert_eq!(sub["npu_operators"], 65, "{sub}");
    assert!(sub["npu_cycles"].as_u64().unwrap() > 0);
    let ops = report["ops"].as_array().unwrap();
    assert!(ops.iter().all(|o| o["placement"] != "cpu"));
    assert!(ops.iter().filter(|o| o["placement"] == "cpu-boundary").all(|o| o["reason"].as_str().is_some_and(|r| !r.is_empty())));

    // The bundle records it; the FVP script takes the NPU's MAC count; QEMU boots the twin.
    let bundle = out.join("mobilenet-ethosu/corstone-300/bundle");
    let manifest = json(&bundle.join("manifest.json"));
    assert_eq!(manifest["delegation"], report);
    let fvp = std::fs::read_to_string(bundle.join("run-fvp.sh")).unwrap();
    assert!(fvp.contains("FVP_Corstone_SSE-300_Ethos-U55") && fvp.contains("ethosu.num_macs=128"), "{fvp}");
    let qemu = std::fs::read_to_string(bundle.join("run-qemu.sh")).unwrap();
    assert!(qemu.contains("firmware-cpu-lowering.elf"), "{qemu}");
    let (ok, log) = rbuild(&out, &["bundle", "--check", bundle.to_str().unwrap()]);
    assert!(ok, "{log}");

    // The program: one EthosUBackend delegate whose blob parses and re-writes to the same bytes.
    let bytes = std::fs::read(out.join("mobilenet-ethosu/program/model.pte")).unwrap();
    let pte = PteFile::parse(&bytes).unwrap();
    let plan = &pte.program.execution_plan.as_ref().unwrap()[0];
    let delegates = plan.delegates.as_ref().unwrap();
    assert_eq!(delegates.len(), 1);
    assert_eq!(delegates[0].id, Some("EthosUBackend"));
    let data = pte.delegate_data(&delegates[0]).unwrap();
    let parsed = blob::parse(data).unwrap();
    let (BlockData::Inline(cmd), BlockData::Inline(weights)) = (parsed.cmd_data, parsed.weight_data) else { panic!("external blocks") };
    let again = blob::write(&VelaBlobBuf {
        cmd_data: cmd.to_vec(),
        weight_data: weights.to_vec(),
        weight_key: None,
        scratch_size: parsed.scratch_size,
        inputs: parsed.inputs.clone(),
        outputs: parsed.outputs.clone(),
    });
    assert_eq!(again, data, "the blob round-trips through our parser and writer");
    assert_eq!(parsed.inputs.len(), 1);
    assert_eq!(parsed.inputs[0].shape, [1, 1, 1, 224, 224, 3], "NHWC int8 input");
    assert_eq!(parsed.outputs[0].byte_len(), Some(1000));

    // ExecuTorch 1.3.1 parses the program and stops at the missing backend.
    if let Some(python) = common::oracle_python() {
        let pte_path = out.join("mobilenet-ethosu/program/model.pte");
        let o = Command::new(python).arg(common::repo().join("tool/python/et_load_check.py")).arg(&pte_path).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{text}");
        assert!(text.contains("program: loaded"), "{text}");
        assert!(text.contains("Backend EthosUBackend is not registered"), "{text}");
        assert!(!text.contains("method: ran"), "{text}");
    }

    // QEMU: the CPU lowering of the same subgraph, equal to the host bit for bit.
    if Command::new("qemu-system-arm").arg("--version").output().is_ok_and(|o| o.status.success()) {
        let (ok, log) = rbuild(&out, &["verify", "--strict", "mobilenet-ethosu"]);
        assert!(ok, "{log}");
        assert!(log.contains("pass") && log.contains("CPU lowering"), "{log}");
    } else {
        assert!(std::env::var_os("CI").is_none(), "CI must have qemu-system-arm");
        println!("SKIPPED verify: no qemu-system-arm");
    }
}

#[test]
fn fallback_deny_lists_the_ops_left_on_the_cpu() {
    let Some(vela) = vela() else { return };
    // A project of its own: MobileNetV3 (hardswish lookups, squeeze-excite muls) on the NPU.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir(root.join("recipes")).unwrap();
    for d in ["toolchains", "templates"] {
        std::os::unix::fs::symlink(common::repo().join(d), root.join(d)).unwrap();
    }
    let recipe = std::fs::read_to_string(common::repo().join("recipes/mobilenet-ethosu.kdl")).unwrap();
    let recipe = recipe.replace("model \"mobilenet_v2\"", "model \"mobilenet_v3_small\"").replace("input-shape 1 3 224 224", "input-shape 1 3 64 64");
    std::fs::write(root.join("recipes/v3-ethosu.kdl"), &recipe).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild"))
        .env("RBUILD_ROOT", root)
        .env("RBUILD_VELA", &vela)
        .args(["v3-ethosu"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "{text}");
    assert!(text.contains("fallback \"deny\"") && text.contains("would run on the CPU"), "{text}");
    assert!(text.contains("rbuild::qlookup") && text.contains("hardswish"), "the unsupported op and why: {text}");
    assert!(!root.join("out/v3-ethosu/program/model.pte").exists(), "nothing half-written");

    // With `fallback "allow"` the same model builds, those ops on the CPU, reported.
    std::fs::write(root.join("recipes/v3-ethosu.kdl"), recipe.replace("fallback \"deny\"", "fallback \"allow\"")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild"))
        .env("RBUILD_ROOT", root)
        .env("RBUILD_VELA", &vela)
        .args(["plan", "v3-ethosu"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
