//! Whisper through the GPU delegate, on the CPU reference runtime of the payload (the twin
//! every GPU runtime is tested against) and on the wgpu runtime (the machine's GPU, or Mesa's
//! lavapipe Vulkan driver in CI; skipped with a notice when no adapter exists): the shared tiny
//! checkpoint exported with every encoder and decoder op delegated, its outputs against
//! PyTorch's, greedy ids against HF's, and the same in f16 weights within a stated tolerance.
//! Also: the placement report and what stays on the CPU.

use std::path::{Path, PathBuf};

use rbuild_export::Graph;
use rbuild_gpu::{delegate_method, GpuOptions, MethodReport, Placement, WeightDtype};
use rbuild_gpu_wgpu::{DeviceChoice, GpuDevice, WgpuGpuBackend};
use rbuild_kernels::gpu_reference::ReferenceGpuBackend;
use rbuild_models::family::{self, ExportOptions, Source};
use rbuild_models::Weights;
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, Method, Program, ScalarType};

const VOCAB: usize = 512;

fn model_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/models").join(name)
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn longs(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

fn argmax(v: &[f32]) -> i64 {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0 as i64
}

/// Every element within `atol + rtol |want|`; returns the largest absolute error (reported).
fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32, what: &str) -> f32 {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let mut worst = 0f32;
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(a.is_finite() && (a - b).abs() <= atol + rtol * b.abs(), "{what}: element {i}: got {a}, want {b}");
        worst = worst.max((a - b).abs());
    }
    worst
}

fn export(weights: WeightDtype) -> (AlignedBuf, Vec<MethodReport>) {
    let f = family::family("whisper").unwrap();
    let mut reports = Vec::new();
    let options = GpuOptions { weights };
    let mut hook = |method: &str, g: &mut Graph| {
        let r = delegate_method(method, g, &options).map_err(rbuild_export::ExportError::Invalid)?;
        reports.push(r);
        Ok(())
    };
    let (bytes, _) = family::export_with(f, &Source::Checkpoint(model_dir("whisper_tiny")), &ExportOptions::default(), &mut hook).unwrap();
    (AlignedBuf::from_bytes(&bytes), reports)
}

/// The GPU delegate's runtimes to test: the CPU reference, and wgpu when an adapter exists.
fn runtimes() -> Vec<(String, BackendRegistry)> {
    let mut reference = BackendRegistry::new();
    reference.register(Box::new(ReferenceGpuBackend));
    let mut all = vec![("cpu reference".to_string(), reference)];
    match GpuDevice::new(&DeviceChoice::Auto) {
        Ok(gpu) => {
            let name = format!("wgpu {}", gpu.adapter());
            let mut b = BackendRegistry::new();
            b.register(Box::new(WgpuGpuBackend::new(gpu)));
            all.push((name, b));
        }
        Err(e) => eprintln!("notice: {e}; skipping the wgpu runtime"),
    }
    all
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

/// Encoder and decoder against PyTorch (tolerances `tol`), then 16 greedy steps from HF's
/// prompt: the ids must be HF's.
fn check_against_pytorch(buf: &AlignedBuf, tol: f32, greedy_tol: f32, what: &str) {
    for (name, backends) in runtimes() {
        check_on(buf, &backends, tol, greedy_tol, &format!("{what} on {name}"));
        println!("{what}: {name}: encoder, decoder and 16 greedy ids match");
    }
}

fn check_on(buf: &AlignedBuf, backends: &BackendRegistry, tol: f32, greedy_tol: f32, what: &str) {
    let program = Program::load(buf.as_slice()).unwrap();
    let reg = rbuild_kernels::registry();
    let dir = model_dir("whisper_tiny");
    let enc_io = Weights::open(&dir.join("encoder.io.safetensors")).unwrap();
    let mut enc = program.load_method("encoder", &reg, backends).unwrap();
    let hidden = run_encoder(&mut enc, &enc_io.f32s("input.0", &[1, 80, 300]).unwrap());
    let enc_err = assert_close(&hidden, &enc_io.f32s("output.0", &[1, 150, 64]).unwrap(), tol, tol, &format!("{what}: encoder vs PyTorch"));

    let dec_io = Weights::open(&dir.join("decoder.io.safetensors")).unwrap();
    let ids = longs(&dec_io.get("input.0", ScalarType::Long, &[1, 8]).unwrap().bytes());
    let memory = dec_io.f32s("input.1", &[1, 150, 64]).unwrap();
    let want = dec_io.f32s("output.0", &[1, 8, VOCAB]).unwrap();
    let mut dec = program.load_method("text_decoder", &reg, backends).unwrap();
    let mut dec_err = 0f32;
    for (i, &id) in ids.iter().enumerate() {
        let logits = decode(&mut dec, &[id], &memory, i as i64);
        dec_err = dec_err.max(assert_close(&logits, &want[i * VOCAB..(i + 1) * VOCAB], tol, tol, &format!("{what}: decoder step {i} vs PyTorch")));
    }
    println!("{what}: max |error| vs PyTorch: encoder {enc_err:.2e}, decoder logits {dec_err:.2e}");
    let logits = decode(&mut dec, &ids, &memory, 0);
    assert_close(&logits, &want[7 * VOCAB..], tol, tol, &format!("{what}: decoder prefill vs PyTorch"));

    let greedy = Weights::open(&dir.join("greedy.io.safetensors")).unwrap();
    let want_ids = longs(&greedy.get("output.0", ScalarType::Long, &[1, 20]).unwrap().bytes());
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
fn whisper_tiny_runs_delegated_and_matches_pytorch() {
    let (buf, reports) = export(WeightDtype::F32);
    let by_method = |m: &str| reports.iter().find(|r| r.method == m).unwrap_or_else(|| panic!("no report for {m}"));
    for m in ["encoder", "text_decoder"] {
        let r = by_method(m);
        println!("{}", r.summary());
        assert!(r.cpu_ops().is_empty(), "{m}: every op on the GPU:\n{}", r.summary());
        assert_eq!(r.partitioning.partitions.len(), 1, "{m}: one subgraph");
    }
    // The log-mel front end stays on the CPU, with its reason.
    let pre = by_method("preprocessor");
    let cpu = pre.cpu_ops();
    assert_eq!(cpu.len(), 1, "{}", pre.summary());
    assert_eq!(cpu[0].op, "rbuild::log_mel_spectrogram");
    assert!(matches!(&cpu[0].placement, Placement::Cpu(r) if r.contains("FFT")));
    check_against_pytorch(&buf, 1e-4, 1e-3, "f32");
}

/// f16 weights (what `dtype "float16"` ships): measured worst errors vs PyTorch 2.0e-3 (encoder)
/// and 4.1e-3 (decoder logits), on both runtimes; the tolerance is 1e-2 and the greedy ids stay
/// HF's.
#[test]
fn whisper_tiny_with_f16_weights_stays_within_its_tolerance() {
    let (buf, _) = export(WeightDtype::F16);
    let (f32_buf, _) = export(WeightDtype::F32);
    assert!(buf.as_slice().len() < f32_buf.as_slice().len() * 7 / 10, "f16 weights shrink the program");
    check_against_pytorch(&buf, 1e-2, 1e-2, "f16");
}
