//! A Llama-family KV-cache decoder through the GPU delegate: the shared llama_tiny checkpoint
//! with every op of its `forward` delegated (RMS norm, table RoPE, grouped-query attention over
//! the cache, the gated MLP), prefill and 24 greedy steps against Hugging Face's logits and ids,
//! on the CPU reference runtime and on wgpu (skipped with a notice without an adapter).

use std::path::{Path, PathBuf};

use rbuild_export::Graph;
use rbuild_gpu::{delegate_method, GpuOptions, WeightDtype};
use rbuild_gpu_wgpu::{DeviceChoice, GpuDevice, WgpuGpuBackend};
use rbuild_kernels::gpu_reference::ReferenceGpuBackend;
use rbuild_models::family::{self, ExportOptions, SizeRequest, Source};
use rbuild_models::Weights;
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, Method, Program, ScalarType};

const VOCAB: usize = 512;

fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/models/llama_tiny")
}

fn longs(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

fn argmax(v: &[f32]) -> i64 {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0 as i64
}

fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(a.is_finite() && (a - b).abs() <= tol + tol * b.abs(), "{what}: element {i}: got {a}, want {b}");
    }
}

fn step(m: &mut Method<'_>, ids: &[i64], pos: i64) -> Vec<f32> {
    let b: Vec<u8> = ids.iter().flat_map(|i| i.to_le_bytes()).collect();
    m.set_input_tensor(0, ScalarType::Long, &[1, ids.len()], &b).unwrap();
    m.set_input_tensor(1, ScalarType::Long, &[1], &pos.to_le_bytes()).unwrap();
    m.execute(&mut KernelContext::default()).unwrap();
    m.output_bytes(0).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn llama_tiny_decoder_runs_delegated_and_matches_hf() {
    let f = family::family("llama").unwrap();
    let options = GpuOptions { weights: WeightDtype::F32 };
    let mut reports = Vec::new();
    let mut hook = |m: &str, g: &mut Graph| {
        reports.push(delegate_method(m, g, &options).map_err(rbuild_export::ExportError::Invalid)?);
        Ok(())
    };
    let o = ExportOptions { max_seq_len: Some(SizeRequest::Exactly(64)), ..ExportOptions::default() };
    let (bytes, _) = family::export_with(f, &Source::Checkpoint(model_dir()), &o, &mut hook).unwrap();
    let forward = reports.iter().find(|r| r.method == "forward").unwrap();
    println!("{}", forward.summary());
    assert!(forward.cpu_ops().is_empty(), "every op on the GPU:\n{}", forward.summary());
    assert_eq!(forward.partitioning.partitions.len(), 1);
    let buf = AlignedBuf::from_bytes(&bytes);

    let io = Weights::open(&model_dir().join("greedy.io.safetensors")).unwrap();
    let prompt = longs(&io.get("input.0", ScalarType::Long, &[1, 12]).unwrap().bytes());
    let want_new = longs(&io.get("output.0", ScalarType::Long, &[1, 24]).unwrap().bytes());
    let want_steps = io.f32s("output.2", &[1, 24, VOCAB]).unwrap();

    let mut reference = BackendRegistry::new();
    reference.register(Box::new(ReferenceGpuBackend));
    let mut runtimes = vec![("cpu reference".to_string(), reference)];
    match GpuDevice::new(&DeviceChoice::Auto) {
        Ok(gpu) => {
            let name = format!("wgpu {}", gpu.adapter());
            let mut b = BackendRegistry::new();
            b.register(Box::new(WgpuGpuBackend::new(gpu)));
            runtimes.push((name, b));
        }
        Err(e) => eprintln!("notice: {e}; skipping the wgpu runtime"),
    }
    let program = Program::load(buf.as_slice()).unwrap();
    let kernels = rbuild_kernels::registry();
    for (name, backends) in &runtimes {
        let mut m = program.load_method("forward", &kernels, backends).unwrap();
        let mut logits = step(&mut m, &prompt, 0);
        let mut got = Vec::new();
        for i in 0..24 {
            assert_close(&logits, &want_steps[i * VOCAB..(i + 1) * VOCAB], 1e-4, &format!("{name}: step {i} logits vs HF"));
            let next = argmax(&logits);
            got.push(next);
            logits = step(&mut m, &[next], (12 + i) as i64);
        }
        assert_eq!(got, want_new, "{name}: greedy ids vs HF");
        println!("{name}: prefill and 24 greedy steps match HF");
    }
}
