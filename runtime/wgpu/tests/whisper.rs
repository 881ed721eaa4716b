//! Whisper tiny exported with every encoder and decoder op delegated (`rbuild-gpu`), executed by
//! the wgpu runtime through the runtime's `Backend` registry: the encoder and each decoder step
//! against PyTorch, then 16 greedy steps whose ids must be HF's; and with f16 weights within
//! the reference runtime's stated tolerance. Needs an adapter (else a notice) and the shared
//! test checkpoint (else a notice).

mod common;

use std::path::{Path, PathBuf};

use rbuild_export::Graph;
use rbuild_gpu::{delegate_method, GpuOptions, WeightDtype};
use rbuild_gpu_wgpu::WgpuGpuBackend;
use rbuild_models::family::{self, ExportOptions, Source};
use rbuild_models::Weights;
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, Method, Program, ScalarType};

const VOCAB: usize = 512;

fn model_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/models/whisper_tiny");
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!("notice: no whisper_tiny checkpoint at {}; skipping", d.display());
        None
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn longs(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8).map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect()
}

fn argmax(v: &[f32]) -> i64 {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0 as i64
}

fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(a.is_finite() && (a - b).abs() <= atol + rtol * b.abs(), "{what}: element {i}: got {a}, want {b}");
    }
}

fn export(dir: &Path, weights: WeightDtype) -> AlignedBuf {
    let f = family::family("whisper").unwrap();
    let options = GpuOptions { weights };
    let mut hook = |method: &str, g: &mut Graph| {
        delegate_method(method, g, &options).map_err(rbuild_export::ExportError::Invalid)?;
        Ok(())
    };
    let (bytes, _) = family::export_with(f, &Source::Checkpoint(dir.to_path_buf()), &ExportOptions::default(), &mut hook).unwrap();
    AlignedBuf::from_bytes(&bytes)
}

fn run_encoder(m: &mut Method<'_>, features: &[f32]) -> Vec<f32> {
    m.set_input_tensor(0, ScalarType::Float, &[1, 80, 300], &f32_bytes(features)).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    floats(m.output_bytes(0).unwrap())
}

fn decode(m: &mut Method<'_>, ids: &[i64], hidden: &[f32], pos: i64) -> Vec<f32> {
    let ids_b: Vec<u8> = ids.iter().flat_map(|i| i.to_le_bytes()).collect();
    m.set_input_tensor(0, ScalarType::Long, &[1, ids.len()], &ids_b).unwrap();
    m.set_input_tensor(1, ScalarType::Float, &[1, 150, 64], &f32_bytes(hidden)).unwrap();
    m.set_input_tensor(2, ScalarType::Long, &[1], &pos.to_le_bytes()).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    floats(m.output_bytes(0).unwrap())
}

fn check_against_pytorch(weights: WeightDtype, tol: f32, greedy_tol: f32, what: &str) {
    let Some(gpu) = common::gpu() else { return };
    let Some(dir) = model_dir() else { return };
    let buf = export(&dir, weights);
    let program = Program::load(buf.as_slice()).unwrap();
    let reg = rbuild_kernels::registry();
    let mut backends = BackendRegistry::new();
    backends.register(Box::new(WgpuGpuBackend::new(gpu)));
    let enc_io = Weights::open(&dir.join("encoder.io.safetensors")).unwrap();
    let mut enc = program.load_method("encoder", &reg, &backends).unwrap_or_else(|e| panic!("{what}: encoder: {e}"));
    let hidden = run_encoder(&mut enc, &enc_io.f32s("input.0", &[1, 80, 300]).unwrap());
    assert_close(&hidden, &enc_io.f32s("output.0", &[1, 150, 64]).unwrap(), tol, tol, &format!("{what}: encoder vs PyTorch"));

    let dec_io = Weights::open(&dir.join("decoder.io.safetensors")).unwrap();
    let ids = longs(dec_io.get("input.0", ScalarType::Long, &[1, 8]).unwrap().bytes());
    let memory = dec_io.f32s("input.1", &[1, 150, 64]).unwrap();
    let want = dec_io.f32s("output.0", &[1, 8, VOCAB]).unwrap();
    let mut dec = program.load_method("text_decoder", &reg, &backends).unwrap_or_else(|e| panic!("{what}: decoder: {e}"));
    for (i, &id) in ids.iter().enumerate() {
        let logits = decode(&mut dec, &[id], &memory, i as i64);
        assert_close(&logits, &want[i * VOCAB..(i + 1) * VOCAB], tol, tol, &format!("{what}: decoder step {i} vs PyTorch"));
    }
    let logits = decode(&mut dec, &ids, &memory, 0);
    assert_close(&logits, &want[7 * VOCAB..], tol, tol, &format!("{what}: decoder prefill vs PyTorch"));

    let greedy = Weights::open(&dir.join("greedy.io.safetensors")).unwrap();
    let want_ids = longs(greedy.get("output.0", ScalarType::Long, &[1, 20]).unwrap().bytes());
    let want_steps = greedy.f32s("output.2", &[1, 16, VOCAB]).unwrap();
    let hidden = run_encoder(&mut enc, &greedy.f32s("input.0", &[1, 80, 300]).unwrap());
    let mut logits = decode(&mut dec, &want_ids[..4], &hidden, 0);
    let mut got = Vec::new();
    for step in 0..16 {
        assert_close(&logits, &want_steps[step * VOCAB..(step + 1) * VOCAB], greedy_tol, greedy_tol, &format!("{what}: greedy step {step}"));
        let next = argmax(&logits);
        got.push(next);
        logits = decode(&mut dec, &[next], &hidden, 4 + step as i64);
    }
    assert_eq!(got, want_ids[4..], "{what}: greedy ids vs HF generate");
}

#[test]
fn whisper_tiny_on_the_gpu_matches_pytorch() {
    check_against_pytorch(WeightDtype::F32, 1e-4, 1e-3, "f32");
}

#[test]
fn whisper_tiny_with_f16_weights_on_the_gpu_stays_within_its_tolerance() {
    check_against_pytorch(WeightDtype::F16, 2e-2, 2e-2, "f16");
}

/// Wall time of the encoder and of one decode step, GPU runtime vs the CPU reference runtime
/// (`cargo test -p rbuild-gpu-wgpu --test whisper -- --ignored --nocapture`).
#[test]
#[ignore]
fn whisper_tiny_timing() {
    let Some(gpu) = common::gpu() else { return };
    let Some(dir) = model_dir() else { return };
    let buf = export(&dir, WeightDtype::F32);
    let program = Program::load(buf.as_slice()).unwrap();
    let reg = rbuild_kernels::registry();
    let enc_io = Weights::open(&dir.join("encoder.io.safetensors")).unwrap();
    let features = enc_io.f32s("input.0", &[1, 80, 300]).unwrap();
    for name in ["wgpu", "cpu reference"] {
        let mut backends = BackendRegistry::new();
        if name == "wgpu" {
            backends.register(Box::new(WgpuGpuBackend::new(gpu.clone())));
        } else {
            backends.register(Box::new(rbuild_kernels::gpu_reference::ReferenceGpuBackend));
        }
        let mut enc = program.load_method("encoder", &reg, &backends).unwrap();
        let mut dec = program.load_method("text_decoder", &reg, &backends).unwrap();
        let hidden = run_encoder(&mut enc, &features);
        let t = std::time::Instant::now();
        for _ in 0..3 {
            run_encoder(&mut enc, &features);
        }
        let enc_ms = t.elapsed().as_secs_f64() * 1000.0 / 3.0;
        decode(&mut dec, &[1, 2, 3, 4], &hidden, 0);
        let t = std::time::Instant::now();
        for step in 0..16 {
            decode(&mut dec, &[5], &hidden, 4 + step);
        }
        let dec_ms = t.elapsed().as_secs_f64() * 1000.0 / 16.0;
        eprintln!("{name} ({}): encoder {enc_ms:.1} ms, decode step {dec_ms:.2} ms", gpu.adapter());
    }
}
