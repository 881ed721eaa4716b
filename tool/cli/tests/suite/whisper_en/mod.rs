//! English-only Whisper (`*.en`: a 51864-id vocabulary, <|endoftext|> 50256,
//! <|startoftranscript|> 50257, no language or task tokens, <|notimestamps|> 50362) through
//! `rbuild whisper-cpu weights=…`: the runner gives Hugging Face's greedy ids
//! (`hf_greedy.json`, written by `models/tests/python/whisper_en_greedy.py`) and refuses another
//! language or translation. The checkpoint is random, written here by the same counter-based
//! generator as the Python script (so the two hold the same float32 weights bit for bit).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::testdata;

const VOCAB: usize = 51864;
const EOT: i64 = 50256;
const SOT: i64 = 50257;

fn splitmix(x: u64) -> u64 {
    let z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The script's weights: `whisper_tiny`'s tensor names and shapes (the token table grown to
/// the `.en` vocabulary), tensor `t` of the sorted names, element `i`.
fn weights(seed: u64) -> Vec<(String, Vec<usize>, Vec<u8>)> {
    let bytes = std::fs::read(testdata().join("models/whisper_tiny/model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
    names.sort();
    names
        .into_iter()
        .enumerate()
        .map(|(t, name)| {
            let mut shape = st.tensor(&name).unwrap().shape().to_vec();
            if name == "model.decoder.embed_tokens.weight" {
                shape[0] = VOCAB;
            }
            let n: usize = shape.iter().product();
            let data: Vec<u8> = (0..n as u64)
                .flat_map(|i| {
                    let u = (splitmix(seed ^ ((t as u64) << 40) ^ i) >> 40) as f32 / 16_777_216.0;
                    let v = u * 2.0 - 1.0;
                    let v = if name.contains("layer_norm.weight") { 1.0 + v * 0.1 } else { v * 0.2 };
                    v.to_le_bytes()
                })
                .collect();
            (name, shape, data)
        })
        .collect()
}

/// A Hugging Face `.en` checkpoint folder: config, generation config (no language or task ids),
/// weights.
fn write_checkpoint(dir: &Path, seed: u64) {
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(testdata().join("models/whisper_tiny/config.json")).unwrap()).unwrap();
    for (k, v) in [("vocab_size", VOCAB as i64), ("bos_token_id", EOT), ("eos_token_id", EOT), ("pad_token_id", EOT), ("decoder_start_token_id", SOT)] {
        config[k] = v.into();
    }
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let generation = serde_json::json!({
        "bos_token_id": EOT, "eos_token_id": EOT, "pad_token_id": EOT, "decoder_start_token_id": SOT,
        "is_multilingual": false, "no_timestamps_token_id": 50362, "prev_sot_token_id": 50360, "max_length": 64,
    });
    std::fs::write(dir.join("generation_config.json"), generation.to_string()).unwrap();
    let tensors = weights(seed);
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, shape, data)| (name.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data).unwrap()))
        .collect();
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
}

fn runner(host: &Path, args: &[&str]) -> std::process::Output {
    Command::new(host.join("whisper_runner")).arg("--model").arg(host.join("model.pte")).args(args).output().unwrap()
}

#[test]
fn english_only_checkpoint_gives_hugging_faces_greedy_ids() {
    let reference: serde_json::Value = serde_json::from_str(include_str!("hf_greedy.json")).unwrap();
    let checkpoint = tempfile::tempdir().unwrap();
    write_checkpoint(checkpoint.path(), reference["seed"].as_u64().unwrap());
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild"))
        .env("RBUILD_OUT", out.path())
        .env_remove("RBUILD_TEST_HOLD")
        .args(["whisper-cpu", &format!("weights={}", checkpoint.path().display()), "platform=host"])
        .output()
        .unwrap();
    let log = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{log}");
    let host = out.path().join("whisper-cpu/host");
    let fox = testdata().join("models/audio/fox_16k.wav");
    let fox = fox.to_str().unwrap();
    let o = runner(&host, &["--audio", fox, "--no-fallback", "--max-new-tokens", "16", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<i64> = j["tokens"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    let want: Vec<i64> = reference["generated"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(ids, want, "greedy ids vs Hugging Face");
    // English only: another language or translation is refused, naming why.
    for args in [["-l", "de"], ["--task", "translate"]] {
        let o = runner(&host, &["--audio", fox, args[0], args[1]]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("English-only"), "{args:?}: {err}");
    }
}
