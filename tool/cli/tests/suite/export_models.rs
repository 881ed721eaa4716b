//! `rbuild export` of the MobileNet family: the emitted programs match the PyTorch references
//! in our runtime and in ExecuTorch 1.3.1, plan no more memory than ExecuTorch's own programs,
//! and are byte-for-byte reproducible.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{case_meta, oracle_python, run_oracle, testdata};
use rbuild_runtime::format::PteFile;
use safetensors::SafeTensors;

fn rbuild(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rbuild")).args(args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "rbuild {args:?} failed:\n{text}");
    text
}

fn floats(st: &SafeTensors, name: &str) -> Vec<f32> {
    st.tensor(name).unwrap().data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn planned_bytes(pte: &Path) -> i64 {
    let data = std::fs::read(pte).unwrap();
    let file = PteFile::parse(&data).unwrap();
    let plan = &file.program.execution_plan.as_ref().unwrap()[0];
    plan.non_const_buffer_sizes.as_ref().unwrap().iter().sum()
}

fn export(model: &str, weights: &[&str], out: &Path) -> String {
    let mut args = vec!["export", "--model", model, "--out", out.to_str().unwrap()];
    args.extend_from_slice(weights);
    rbuild(&args)
}

#[test]
fn shared_mobilenets_match_pytorch_here_and_in_executorch() {
    let tmp = tempfile::tempdir().unwrap();
    let mut oracle_cases = Vec::new();
    for model in ["mobilenet_v2", "mobilenet_v3_small"] {
        let dir = testdata().join("models").join(model);
        let weights = dir.join("model.safetensors");
        let io = dir.join("model.io.safetensors");
        let meta = case_meta(&dir.join("model.pte")).unwrap();
        let (atol, rtol) = (meta["atol"].as_f64().unwrap(), meta["rtol"].as_f64().unwrap());
        let pte = tmp.path().join(format!("{model}.pte"));
        let report = export(model, &["--weights", weights.to_str().unwrap()], &pte);
        eprintln!("{report}");

        // Reproducible: a second export is byte-identical.
        let again = tmp.path().join(format!("{model}.again.pte"));
        export(model, &["--weights", weights.to_str().unwrap()], &again);
        assert_eq!(std::fs::read(&pte).unwrap(), std::fs::read(&again).unwrap(), "{model}: export not deterministic");

        // Our runtime vs the PyTorch reference.
        let out = tmp.path().join(format!("{model}.out.safetensors"));
        rbuild(&["run", pte.to_str().unwrap(), "--inputs", io.to_str().unwrap(), "--output", out.to_str().unwrap()]);
        let (got, want) = (std::fs::read(&out).unwrap(), std::fs::read(&io).unwrap());
        let (got, want) = (SafeTensors::deserialize(&got).unwrap(), SafeTensors::deserialize(&want).unwrap());
        let (g, w) = (floats(&got, "output.0"), floats(&want, "output.0"));
        assert_eq!(g.len(), 1000);
        let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        for (a, b) in g.iter().zip(&w) {
            assert!(((a - b).abs() as f64) <= atol + rtol * (*b as f64).abs(), "{model}: {a} vs {b} (max err {worst})");
        }

        // No more planned memory than ExecuTorch's own program for the same model.
        let (ours, theirs) = (planned_bytes(&pte), planned_bytes(&dir.join("model.pte")));
        eprintln!("{model}: max |err| vs PyTorch {worst:.2e}; planned arena {ours} bytes (ExecuTorch: {theirs})");
        assert!(ours <= theirs, "{model}: planned {ours} bytes > ExecuTorch's {theirs}");

        oracle_cases.push(serde_json::json!({
            "label": format!("exported {model}"), "pte": pte, "io": io, "atol": atol, "rtol": rtol, "outputs": 1,
        }));
    }
    if let Some(python) = oracle_python() {
        eprintln!("{}", run_oracle(&python, &oracle_cases, tmp.path()));
    }
}

/// No reference weights exist for v3_large: export random seeded weights and cross-run the
/// program in ExecuTorch against our runtime's output.
#[test]
fn random_mobilenet_v3_large_runs_the_same_in_executorch() {
    let tmp = tempfile::tempdir().unwrap();
    let pte: PathBuf = tmp.path().join("v3_large.pte");
    let report = export("mobilenet_v3_large", &["--random-weights", "11"], &pte);
    assert!(report.contains("random weights"), "random weights must be announced:\n{report}");
    // A deterministic image-like input.
    let input: Vec<u8> = (0..3 * 224 * 224)
        .flat_map(|i| (((i % 224) as f32 * 0.05).sin() + ((i / 224 % 224) as f32 * 0.03).cos()).to_le_bytes())
        .collect();
    let io = tmp.path().join("in.safetensors");
    let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1, 3, 224, 224], &input).unwrap();
    std::fs::write(&io, safetensors::serialize([("input.0", view)], None).unwrap()).unwrap();
    let out = tmp.path().join("out.safetensors");
    rbuild(&["run", pte.to_str().unwrap(), "--inputs", io.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    let ours = std::fs::read(&out).unwrap();
    let ours = SafeTensors::deserialize(&ours).unwrap();
    let logits = ours.tensor("output.0").unwrap();
    assert_eq!(logits.shape(), [1, 1000]);
    let spread = floats(&ours, "output.0").iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(spread > 0.1 && spread.is_finite(), "random-weight logits should be O(1), got max |x| = {spread}");
    // Reference file for the oracle: our input and our output.
    let both = tmp.path().join("io.safetensors");
    let out_view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1, 1000], logits.data()).unwrap();
    let in_view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1, 3, 224, 224], &input).unwrap();
    std::fs::write(&both, safetensors::serialize([("input.0", in_view), ("output.0", out_view)], None).unwrap()).unwrap();
    if let Some(python) = oracle_python() {
        let case = serde_json::json!({"label": "exported mobilenet_v3_large (random)", "pte": pte, "io": both,
            "atol": 1e-4, "rtol": 1e-4, "outputs": 1});
        eprintln!("{}", run_oracle(&python, &[case], tmp.path()));
    }
}

/// The Llama full-sequence export (Core ATen only) matches Hugging Face's prefill logits here
/// and runs as-is in ExecuTorch 1.3.1.
#[test]
fn llama_tiny_prefill_matches_here_and_in_executorch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = testdata().join("models/llama_tiny");
    let pte = tmp.path().join("llama.pte");
    rbuild(&["export", "--model", "llama", "--weights", dir.to_str().unwrap(), "--core-aten", "--max-seq-len", "12", "--out", pte.to_str().unwrap()]);
    let io = dir.join("prefill.io.safetensors");
    let out = tmp.path().join("out.safetensors");
    rbuild(&["run", pte.to_str().unwrap(), "--inputs", io.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    let (got, want) = (std::fs::read(&out).unwrap(), std::fs::read(&io).unwrap());
    let (got, want) = (SafeTensors::deserialize(&got).unwrap(), SafeTensors::deserialize(&want).unwrap());
    let (g, w) = (floats(&got, "output.0"), floats(&want, "output.0"));
    assert_eq!(g.len(), 12 * 512);
    let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    eprintln!("llama_tiny prefill: max |err| vs Hugging Face {worst:.2e}");
    assert!(worst <= 1e-4, "max err {worst}");
    if let Some(python) = oracle_python() {
        let case = serde_json::json!({"label": "exported llama_tiny prefill", "pte": pte, "io": io, "atol": 1e-4, "rtol": 1e-4, "outputs": 1});
        eprintln!("{}", run_oracle(&python, &[case], tmp.path()));
    }
}
