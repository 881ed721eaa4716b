//! `rbuild export --model whisper` on the shared tiny checkpoint: the Core-ATen program's
//! encoder and decoder run as they are in ExecuTorch 1.3.1 (and in rbuild's runtime) within the
//! testdata's tolerance; the preprocessor is writable as ExecuTorch's separate program; the
//! quantized exports stay close to float32; bad checkpoints fail naming the problem.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{oracle_python, repo, testdata};
use safetensors::SafeTensors;

fn rbuild(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rbuild")).args(args).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn ok(args: &[&str]) -> String {
    let (success, text) = rbuild(args);
    assert!(success, "rbuild {args:?} failed:\n{text}");
    text
}

fn floats(st: &SafeTensors, name: &str) -> Vec<f32> {
    st.tensor(name).unwrap().data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let worst = got.iter().zip(want).map(|(g, w)| (g - w).abs() - rtol * w.abs()).fold(f32::MIN, f32::max);
    eprintln!("{what}: worst excess over rtol {worst:e} (atol {atol})");
    assert!(worst <= atol, "{what}: outside atol {atol} + rtol {rtol}");
}

fn whisper_dir() -> std::path::PathBuf {
    testdata().join("models/whisper_tiny")
}

/// Runs `method` of `pte` in ExecuTorch 1.3.1 on `keys` of `inputs`; returns its outputs file.
fn et_run(python: &Path, pte: &Path, inputs: &Path, keys: &str, method: &str, out: &Path) -> Vec<u8> {
    let run = Command::new(python).arg(repo().join("tool/python/et_run.py")).args([pte, inputs]).arg(keys).arg(out).arg(method).output().unwrap();
    assert!(run.status.success(), "ExecuTorch failed on {} {method}:\n{}", pte.display(), String::from_utf8_lossy(&run.stderr));
    std::fs::read(out).unwrap()
}

#[test]
fn core_aten_encoder_and_decoder_run_in_executorch_and_here() {
    let tmp = tempfile::tempdir().unwrap();
    let pte = tmp.path().join("whisper-core.pte");
    let weights = whisper_dir();
    let report = ok(&["export", "--model", "whisper", "--weights", weights.to_str().unwrap(), "--core-aten", "--max-seq-len", "8", "--out", pte.to_str().unwrap()]);
    eprintln!("{report}");
    assert!(!report.contains("rbuild::") && !report.contains("llama::"), "Core-ATen export uses custom ops:\n{report}");

    for (case, method, keys) in [("encoder", "encoder", "input.0"), ("decoder", "text_decoder", "input.0,input.1")] {
        let io = weights.join(format!("{case}.io.safetensors"));
        let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(weights.join(format!("{case}.json"))).unwrap()).unwrap();
        let (atol, rtol) = (meta["atol"].as_f64().unwrap() as f32, meta["rtol"].as_f64().unwrap() as f32);
        let want_bytes = std::fs::read(&io).unwrap();
        let want = floats(&SafeTensors::deserialize(&want_bytes).unwrap(), "output.0");

        // rbuild's runtime.
        let out = tmp.path().join(format!("{case}.rbuild.safetensors"));
        ok(&["run", pte.to_str().unwrap(), "--method", method, "--inputs", io.to_str().unwrap(), "--output", out.to_str().unwrap()]);
        let got_bytes = std::fs::read(&out).unwrap();
        assert_close(&floats(&SafeTensors::deserialize(&got_bytes).unwrap(), "output.0"), &want, atol, rtol, &format!("{case} (rbuild)"));

        // ExecuTorch 1.3.1, as it is.
        let Some(python) = oracle_python() else { continue };
        let et_out = tmp.path().join(format!("{case}.et.safetensors"));
        let et_bytes = et_run(&python, &pte, &io, keys, method, &et_out);
        assert_close(&floats(&SafeTensors::deserialize(&et_bytes).unwrap(), "output.0"), &want, atol, rtol, &format!("{case} (ExecuTorch 1.3.1)"));
    }
}

#[test]
fn preprocessor_as_a_separate_program_and_quantized_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let weights = whisper_dir();
    let pre = tmp.path().join("preprocessor.pte");
    ok(&["export", "--model", "whisper", "--weights", weights.to_str().unwrap(), "--methods", "preprocessor", "--as-forward", "--out", pre.to_str().unwrap()]);
    let inspect = ok(&["inspect", pre.to_str().unwrap()]);
    assert!(inspect.contains("forward") && !inspect.contains("text_decoder"), "{inspect}");
    assert!(inspect.contains("rbuild::log_mel_spectrogram"), "{inspect}");

    for quant in ["fp16", "int8", "int4", "8da4w"] {
        let pte = tmp.path().join(format!("whisper-{quant}.pte"));
        let report = ok(&["export", "--model", "whisper", "--weights", weights.to_str().unwrap(), "--quant", quant, "--out", pte.to_str().unwrap()]);
        assert!(report.contains(&format!("linears {quant}")), "{report}");
        let quantized_op = match quant {
            "fp16" => "rbuild::linear_f16",
            "int8" => "rbuild::linear_q8",
            "int4" => "rbuild::linear_q4",
            _ => "rbuild::linear_8da4w",
        };
        assert!(report.contains(quantized_op), "{quant}: no {quantized_op} in\n{report}");
        // The encoder stays close to PyTorch's float32 output.
        let io = weights.join("encoder.io.safetensors");
        let out = tmp.path().join(format!("enc-{quant}.safetensors"));
        ok(&["run", pte.to_str().unwrap(), "--method", "encoder", "--inputs", io.to_str().unwrap(), "--output", out.to_str().unwrap()]);
        let (got, want) = (std::fs::read(&out).unwrap(), std::fs::read(&io).unwrap());
        let (got, want) = (floats(&SafeTensors::deserialize(&got).unwrap(), "output.0"), floats(&SafeTensors::deserialize(&want).unwrap(), "output.0"));
        let signal: f64 = want.iter().map(|&w| (w as f64).powi(2)).sum();
        let noise: f64 = got.iter().zip(&want).map(|(&g, &w)| ((g - w) as f64).powi(2)).sum();
        let sqnr = 10.0 * (signal / noise.max(1e-30)).log10();
        eprintln!("{quant}: encoder SQNR {sqnr:.1} dB vs float32 PyTorch");
        // Random weights: float16 weights keep ~60 dB, int8 per channel ~38 dB, 4-bit groups
        // ~15 dB; a broken scheme is ~0 dB.
        let floor = match quant {
            "fp16" => 50.0,
            "int8" => 30.0,
            _ => 10.0,
        };
        assert!(sqnr > floor, "{quant}: encoder SQNR {sqnr:.1} dB");
    }
}

#[test]
fn bad_checkpoints_fail_naming_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ckpt");
    std::fs::create_dir(&dir).unwrap();
    let src = whisper_dir();
    for f in ["config.json", "generation_config.json", "model.safetensors"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let out = tmp.path().join("x.pte");
    let export = |what: &str| {
        let (success, text) = rbuild(&["export", "--model", "whisper", "--weights", dir.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert!(!success, "{what}: export should fail:\n{text}");
        assert!(!out.exists(), "{what}: a failed export left {}", out.display());
        assert!(!text.contains("panicked"), "{what}: {text}");
        text
    };
    let config = std::fs::read_to_string(src.join("config.json")).unwrap();
    std::fs::write(dir.join("config.json"), config.replace("\"num_mel_bins\": 80", "\"num_mel_bins\": 128")).unwrap();
    let text = export("wrong mel count");
    assert!(text.contains("model.encoder.conv1.weight"), "{text}");
    std::fs::write(dir.join("config.json"), config.replace("\"activation_function\": \"gelu\"", "\"activation_function\": \"swish\"")).unwrap();
    assert!(export("activation").contains("activation_function 'swish' is not supported"));
    std::fs::write(dir.join("config.json"), &config).unwrap();
    std::fs::write(dir.join("generation_config.json"), "{ not json").unwrap();
    assert!(export("generation config").contains("generation_config.json: invalid JSON"));
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    std::fs::write(dir.join("generation_config.json"), "{}").unwrap();
    assert!(export("no weights").contains("neither model.safetensors"));
}
