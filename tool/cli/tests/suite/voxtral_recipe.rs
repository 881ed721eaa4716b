//! `rbuild voxtral-cpu` end to end: the offline demo (tiny random Voxtral + Tekken-format
//! tokenizer + demo WAV) transcribes and answers through `voxtral_runner`; the shared HF
//! checkpoint `voxtral_tiny` through `weights=…` gives Hugging Face's 8 greedy ids on
//! `fox_16k.wav` (log-mel in the program, prompt ids as `greedy.json` lays them out); the
//! cross-built runner verifies under qemu-aarch64. Runners compile for real (release).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::testdata;

fn rbuild(out: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild")).env("RBUILD_OUT", out).env_remove("RBUILD_TEST_HOLD").args(args).output().unwrap();
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn runner(dir: &Path, args: &[&str]) -> serde_json::Value {
    let o = Command::new(dir.join("voxtral_runner")).args(["--model", "model.pte", "--json"]).args(args).current_dir(dir).output().unwrap();
    assert!(o.status.success(), "voxtral_runner {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

fn ids(v: &serde_json::Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

/// The prompt ids HF generated from (`greedy.io.safetensors` `input.0`).
fn hf_prompt_ids(dir: &Path) -> Vec<i64> {
    let bytes = std::fs::read(dir.join("greedy.io.safetensors")).unwrap();
    let io = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let input = io.tensor("input.0").unwrap();
    assert_eq!(input.dtype(), safetensors::Dtype::I64);
    input.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
}

/// `ids` for `--prompt-ids`, each run of audio placeholders written as the runner's `audio` word.
fn prompt_ids_flag(ids: &[i64], audio_token_id: i64) -> String {
    let mut words: Vec<String> = Vec::new();
    for &id in ids {
        if id != audio_token_id {
            words.push(id.to_string());
        } else if words.last().is_none_or(|w| w != "audio") {
            words.push("audio".into());
        }
    }
    words.join(",")
}

#[test]
fn voxtral_cpu_demo_and_voxtral_tiny_match_hugging_face() {
    let out = tempfile::tempdir().unwrap();
    let host = out.path().join("voxtral-cpu/host");

    // Offline, no arguments: the demo, announced as such, for every platform (--strict).
    let (ok, log) = rbuild(out.path(), &["voxtral-cpu", "--strict"]);
    assert!(ok && log.contains("demo"), "{log}");
    assert!(host.join("tekken.json").is_file() && host.join("demo.wav").is_file(), "{log}");
    let transcript = runner(&host, &["--tokenizer", "tekken.json", "--audio", "demo.wav", "--max-new-tokens", "6", "-l", "en"]);
    let n = ids(&transcript["generated_token_ids"]).len();
    assert!((1..=6).contains(&n), "{transcript}");
    assert_eq!(transcript["audio"]["audio_tokens"], 40 * transcript["audio"]["chunks"].as_i64().unwrap());
    let prompt = ids(&transcript["prompt_token_ids"]);
    assert_eq!(&prompt[..3], &[1, 3, 25], "<s>[INST][BEGIN_AUDIO]");
    assert_eq!(prompt.last(), Some(&34), "…[TRANSCRIBE]");
    let answer = runner(&host, &["--tokenizer", "tekken.json", "--audio", "demo.wav", "--prompt", "What is said?", "--max-new-tokens", "4"]);
    assert_eq!(ids(&answer["prompt_token_ids"]).last(), Some(&4), "…[/INST]");

    // The cross-built runner under qemu-aarch64 against the host reference.
    let (ok, log) = rbuild(out.path(), &["verify", "voxtral-cpu", "platform=linux-arm64"]);
    assert!(ok && log.contains("pass"), "{log}");

    // The shared checkpoint: HF's 8 greedy ids after the greedy.json prompt, on the WAV.
    let dir = testdata().join("models/voxtral_tiny");
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("greedy.json")).unwrap()).unwrap();
    let weights = format!("weights={}", dir.display());
    // No size overrides: the recipe's defaults are lowered to what the checkpoint holds.
    let (ok, log) = rbuild(out.path(), &["voxtral-cpu", &weights, "platform=host"]);
    assert!(ok, "{log}");
    assert!(log.contains("note: voxtral-cpu: max-seq-len 1024 (recipe default) lowered to 256, the model's max_position_embeddings"), "{log}");
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(host.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["llm"]["max_seq_len"], 256, "the manifest records the size the program has");
    let fox = testdata().join("models/audio/fox_16k.wav");
    let hf_prompt = hf_prompt_ids(&dir);
    let flag = prompt_ids_flag(&hf_prompt, meta["audio_token_id"].as_i64().unwrap());
    let got = runner(&host, &["--audio", fox.to_str().unwrap(), "--prompt-ids", &flag, "--max-new-tokens", "8"]);
    assert_eq!(ids(&got["prompt_token_ids"]), hf_prompt, "the prompt HF generated from");
    assert_eq!(ids(&got["generated_token_ids"]), ids(&meta["hf_generate_new_tokens"]), "greedy ids vs Hugging Face");
}
