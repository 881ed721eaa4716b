//! `rbuild whisper-cpu` end to end: the offline demo prints text, the shared whisper_tiny
//! checkpoint through `weights=…` (WAV → in-program log-mel → encoder → decoder) reproduces
//! Hugging Face's 16 greedy ids, and `rbuild verify whisper-cpu platform=linux-arm64` runs the
//! cross-built runner under qemu-aarch64 against the host. Builds land in a temporary out/
//! (RBUILD_OUT); runners compile for real (release).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::testdata;

fn rbuild(out: &Path, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild")).env("RBUILD_OUT", out).env_remove("RBUILD_TEST_HOLD").args(args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "rbuild {args:?} failed:\n{text}");
    text
}

fn transcribe(dir: &Path, args: &[&str]) -> (String, String) {
    let o = Command::new(dir.join("whisper_runner")).arg("--model").arg(dir.join("model.pte")).args(args).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(o.status.success(), "whisper_runner {args:?} failed:\n{stderr}");
    (stdout, stderr)
}

#[test]
fn whisper_cpu_demo_checkpoint_and_arm64_verify() {
    let out = tempfile::tempdir().unwrap();
    let host = out.path().join("whisper-cpu/host");

    // The cross-built runner under qemu-aarch64 against the in-process host reference.
    let verified = rbuild(out.path(), &["verify", "whisper-cpu", "platform=linux-arm64"]);
    let row = verified.lines().find(|l| l.starts_with("linux-arm64")).unwrap_or_else(|| panic!("{verified}"));
    assert!(row.contains("qemu-aarch64") && row.ends_with("pass"), "{verified}");

    // Offline, no arguments: the demo (announced), its WAV and tokenizer; text comes out.
    let first = rbuild(out.path(), &["whisper-cpu", "platform=host", "--strict"]);
    assert!(first.contains("demo"), "{first}");
    for f in ["model.pte", "tokenizer.json", "demo.wav", "whisper_runner", "manifest.json"] {
        assert!(host.join(f).is_file(), "{f} missing:\n{first}");
    }
    let (text, stats) = transcribe(&host, &["--tokenizer", host.join("tokenizer.json").to_str().unwrap(), "--audio", host.join("demo.wav").to_str().unwrap()]);
    assert!(text.trim().chars().count() > 0 && text.trim().chars().all(|c| c.is_ascii_lowercase() || c.is_whitespace()), "demo text: {text:?}");
    assert!(stats.contains("real-time factor"), "{stats}");

    // The shared checkpoint (no tokenizer.json: the runner prints ids).
    let dir = testdata().join("models/whisper_tiny");
    let weights = format!("weights={}", dir.display());
    let built = rbuild(out.path(), &["whisper-cpu", &weights, "platform=host"]);
    assert!(built.contains("no tokenizer.json"), "{built}");
    assert!(!host.join("tokenizer.json").exists(), "the demo's tokenizer must not stay beside a real checkpoint's program");
    let fox = testdata().join("models/audio/fox_16k.wav");
    let (json, _) = transcribe(&host, &["--audio", fox.to_str().unwrap(), "--no-fallback", "--max-new-tokens", "16", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    let ids: Vec<i64> = j["tokens"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("greedy.json")).unwrap()).unwrap();
    let hf: Vec<i64> = meta["hf_generate_sequences"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(ids, hf, "greedy ids vs Hugging Face generate");
}
