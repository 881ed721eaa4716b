//! `rbuild whisper-metal` on this machine: the host platform builds the GPU-delegated program
//! and a runner with the wgpu runtime, which runs on the machine's Vulkan device (Mesa's
//! lavapipe in CI) or, without an adapter, on the payload's CPU reference runtime (announced).
//! The shared whisper_tiny checkpoint reproduces Hugging Face's 16 greedy ids; the manifest
//! carries the delegation report; ExecuTorch 1.3.1 loads the program and stops at the missing
//! backend by name; `fallback "deny"` fails listing the op the GPU lacks; `rbuild verify`
//! compares the runner with the CPU reference.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::testdata;

fn rbuild(out: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild")).env("RBUILD_OUT", out).env_remove("RBUILD_TEST_HOLD").args(args).output().unwrap();
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn hf_ids(dir: &Path) -> Vec<i64> {
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("greedy.json")).unwrap()).unwrap();
    meta["hf_generate_sequences"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect()
}

fn transcribe_ids(host: &Path, device: &str) -> (Vec<i64>, String) {
    let fox = testdata().join("models/audio/fox_16k.wav");
    let o = Command::new(host.join("whisper_runner"))
        .arg("--model")
        .arg(host.join("model.pte"))
        .args(["--audio", fox.to_str().unwrap(), "--no-fallback", "--max-new-tokens", "16", "--json", "--device", device])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "whisper_runner --device {device} failed:\n{stderr}");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    (j["tokens"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect(), stderr)
}

#[test]
fn whisper_metal_host_build_runs_the_gpu_delegate() {
    let out = tempfile::tempdir().unwrap();
    let host = out.path().join("whisper-metal/host");
    let dir = testdata().join("models/whisper_tiny");
    let weights = format!("weights={}", dir.display());

    // fallback "deny": the log-mel front end has no GPU kernel, so the build fails naming it.
    let (ok, log) = rbuild(out.path(), &["whisper-metal", &weights, "platform=host", "fallback=deny"]);
    assert!(!ok, "{log}");
    assert!(log.contains("fallback \"deny\"") && log.contains("preprocessor: rbuild::log_mel_spectrogram"), "{log}");

    let (ok, log) = rbuild(out.path(), &["whisper-metal", &weights, "platform=host"]);
    assert!(ok, "{log}");
    assert!(log.contains("encoder: 39 op(s) on the GPU in 1 subgraph(s), 0 on the CPU"), "{log}");
    assert!(log.contains("text_decoder: 51 op(s) on the GPU in 1 subgraph(s), 0 on the CPU"), "{log}");
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(host.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["backend"], "gpu");
    let methods = manifest["delegation"]["methods"].as_array().unwrap();
    let cpu_ops: Vec<&str> = methods.iter().flat_map(|m| m["ops"].as_array().unwrap()).filter(|o| o["target"] == "cpu").map(|o| o["op"].as_str().unwrap()).collect();
    assert_eq!(cpu_ops, ["rbuild::log_mel_spectrogram"], "only the FFT front end stays on the CPU");
    assert_eq!(manifest["delegation"]["weights"], "float16");

    // The runner: the GPU when the machine has an adapter (lavapipe in CI), else the CPU
    // reference with a notice; either way HF's ids.
    let (ids, stderr) = transcribe_ids(&host, "auto");
    if stderr.contains("notice:") {
        eprintln!("notice: no GPU adapter on this machine; the delegate ran on the CPU reference runtime:\n{stderr}");
    }
    assert_eq!(ids, hf_ids(&dir), "greedy ids (device auto) vs Hugging Face generate");
    let (ids, _) = transcribe_ids(&host, "cpu");
    assert_eq!(ids, hf_ids(&dir), "greedy ids (device cpu) vs Hugging Face generate");

    // ExecuTorch 1.3.1 reads the program and stops at our backend by name, not a format error.
    if let Some(python) = common::oracle_python() {
        let o = Command::new(python)
            .arg(common::repo().join("tool/python/et_load_check.py"))
            .arg(host.join("model.pte"))
            .arg("1,80,300")
            .arg("encoder")
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{text}");
        assert!(text.contains("program: loaded"), "{text}");
        assert!(text.contains("Backend RbuildGpuBackend is not registered"), "{text}");
        assert!(!text.contains("method: ran"), "{text}");
    }

    // verify: the runner (device auto) against the in-process CPU reference of the same program.
    let (ok, verified) = rbuild(out.path(), &["verify", "whisper-metal", &weights, "platform=host"]);
    assert!(ok, "{verified}");
    let row = verified.lines().find(|l| l.starts_with("host")).unwrap_or_else(|| panic!("{verified}"));
    assert!(row.ends_with("pass"), "{verified}");
}
