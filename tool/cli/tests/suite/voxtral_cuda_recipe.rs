//! `rbuild voxtral-cuda` with the shared `voxtral_tiny` checkpoint: the program (GPU delegate,
//! bfloat16 weights) and the runner (CUDA + wgpu + CPU reference) build on any machine. Without
//! an NVIDIA GPU: the build says verification needs one, `--device cuda` fails with the clear
//! error, `--device auto` falls back (saying so) and gives the same ids as the CPU reference,
//! and `rbuild verify` skips the platform. With one: the runner on CUDA gives the CPU
//! reference's greedy ids and `rbuild verify` passes. Runners compile for real (release).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::testdata;

fn rbuild(out: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_rbuild")).env("RBUILD_OUT", out).env_remove("RBUILD_TEST_HOLD").args(args).output().unwrap();
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

/// The runner's `--json` report and stderr, or its failure's stderr.
fn runner(dir: &Path, args: &[&str]) -> Result<(serde_json::Value, String), String> {
    let o = Command::new(dir.join("voxtral_runner")).args(["--model", "model.pte", "--json"]).args(args).current_dir(dir).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    if !o.status.success() {
        return Err(stderr);
    }
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    Ok((v, stderr))
}

fn ids(v: &serde_json::Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
}

#[test]
fn voxtral_cuda_builds_anywhere_and_runs_where_there_is_a_gpu() {
    let out = tempfile::tempdir().unwrap();
    let dir = testdata().join("models/voxtral_tiny");
    let weights = format!("weights={}", dir.display());
    // No size overrides: the recipe's defaults are lowered to what the checkpoint holds.
    let (ok, log) = rbuild(out.path(), &["voxtral-cuda", &weights, "--strict"]);
    assert!(ok, "{log}");
    assert!(log.contains("note: voxtral-cuda: max-seq-len 1024 (recipe default) lowered to 256"), "{log}");
    let built = out.path().join("voxtral-cuda/linux-cuda");
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(built.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["delegation"]["weights"], "bfloat16", "{manifest}");

    let fox = testdata().join("models/audio/fox_16k.wav");
    let fox = fox.to_str().unwrap();
    let args = |device: &'static str| ["--audio", fox, "--prompt-ids", "1,3,25,audio,4", "--max-new-tokens", "8", "--device", device];
    let (reference, _) = runner(&built, &args("cpu")).unwrap_or_else(|e| panic!("--device cpu: {e}"));
    let want = ids(&reference["generated_token_ids"]);
    assert_eq!(want.len(), 8, "{reference}");

    match rbuild_gpu_cuda::probe_driver() {
        Err(why) => {
            eprintln!("notice: no NVIDIA GPU here ({why}); checking the no-GPU paths only");
            assert!(log.contains("needs an NVIDIA GPU"), "the build says verification needs a GPU:\n{log}");
            let err = runner(&built, &args("cuda")).expect_err("--device cuda without a driver fails");
            assert!(err.contains("--device cuda: no NVIDIA driver found"), "{err}");
            let (auto, stderr) = runner(&built, &args("auto")).unwrap_or_else(|e| panic!("--device auto: {e}"));
            assert!(stderr.contains("notice: CUDA: no NVIDIA driver found"), "auto says why it fell back:\n{stderr}");
            assert_eq!(ids(&auto["generated_token_ids"]), want, "--device auto (fallback) vs the CPU reference");
            let (ok, log) = rbuild(out.path(), &["verify", "voxtral-cuda", &weights]);
            assert!(ok && log.contains("needs an NVIDIA GPU"), "{log}");
        }
        Ok(driver) => {
            eprintln!("CUDA driver {driver:?}: running voxtral-cuda on the GPU");
            let (cuda, stderr) = runner(&built, &args("cuda")).unwrap_or_else(|e| panic!("--device cuda: {e}"));
            assert!(stderr.contains("GPU delegates run on CUDA"), "{stderr}");
            assert_eq!(ids(&cuda["generated_token_ids"]), want, "CUDA (bfloat16 weights) vs the CPU reference of the same program");
            let (ok, log) = rbuild(out.path(), &["verify", "voxtral-cuda", &weights]);
            assert!(ok && log.contains("pass"), "{log}");
        }
    }
}
