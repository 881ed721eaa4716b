//! Whisper encoder and 64-token decode: rbuild's GPU runtime (wgpu) against rbuild's CPU runtime
//! (all cores), on the same checkpoint, in the same run; prints milliseconds and ratios.
//! Driven by `tool/bench/whisper_gpu.sh` (which makes a base-shaped random checkpoint).
//!
//! Usage: whisper_gpu_bench CHECKPOINT_DIR [--tokens 64] [--repeat 3] [--threads N]
//!        [--weights f32|f16] [--device auto|gpu|NAME]

use std::time::Instant;

use rbuild_export::Graph;
use rbuild_gpu::{delegate_method, GpuOptions, WeightDtype};
use rbuild_gpu_wgpu::{DeviceChoice, GpuDevice, WgpuGpuBackend};
use rbuild_models::family::{self, ExportOptions, Source};
use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::buffer::AlignedBuf;
use rbuild_runtime::{KernelContext, KernelRegistry, Method, Program, ScalarType};

struct Args {
    dir: std::path::PathBuf,
    tokens: usize,
    repeat: usize,
    threads: usize,
    weights: WeightDtype,
    device: String,
}

fn args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        dir: Default::default(),
        tokens: 64,
        repeat: 3,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        weights: WeightDtype::F32,
        device: "auto".into(),
    };
    let mut dir = None;
    while let Some(x) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match x.as_str() {
            "--tokens" => a.tokens = val("--tokens")?.parse().map_err(|e| format!("--tokens: {e}"))?,
            "--repeat" => a.repeat = val("--repeat")?.parse().map_err(|e| format!("--repeat: {e}"))?,
            "--threads" => a.threads = val("--threads")?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--weights" => {
                a.weights = match val("--weights")?.as_str() {
                    "f32" => WeightDtype::F32,
                    "f16" => WeightDtype::F16,
                    w => return Err(format!("--weights {w}: f32 or f16")),
                }
            }
            "--device" => a.device = val("--device")?,
            d if dir.is_none() && !d.starts_with('-') => dir = Some(d.into()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    a.dir = dir.ok_or("usage: whisper_gpu_bench CHECKPOINT_DIR [--tokens 64] [--repeat 3] [--threads N] [--weights f32|f16] [--device auto]")?;
    Ok(a)
}

fn export(dir: &std::path::Path, gpu: Option<WeightDtype>) -> Result<AlignedBuf, String> {
    let f = family::family("whisper").ok_or("no whisper family")?;
    let source = Source::Checkpoint(dir.to_path_buf());
    let o = ExportOptions::default();
    let bytes = match gpu {
        None => family::export(f, &source, &o).map_err(|e| e.to_string())?.0,
        Some(weights) => {
            let options = GpuOptions { weights };
            let mut hook = |m: &str, g: &mut Graph| {
                let r = delegate_method(m, g, &options).map_err(rbuild_export::ExportError::Invalid)?;
                eprintln!("gpu delegation: {}", r.summary());
                Ok(())
            };
            family::export_with(f, &source, &o, &mut hook).map_err(|e| e.to_string())?.0
        }
    };
    Ok(AlignedBuf::from_bytes(&bytes))
}

fn load<'p>(p: &Program<'p>, m: &str, kernels: &KernelRegistry, b: &BackendRegistry) -> Result<Method<'p>, String> {
    p.load_method(m, kernels, b).map_err(|e| format!("{m}: {e}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Encoder milliseconds (median of `repeat` after one warm-up) and decode milliseconds per
/// token (`tokens` single-token steps after a 4-token prompt), plus the last logits.
fn run(enc: &mut Method<'_>, dec: &mut Method<'_>, ctx: &mut KernelContext, shape: &[usize], hidden_shape: &[usize], a: &Args) -> Result<(f64, f64, Vec<f32>), String> {
    let n: usize = shape.iter().product();
    let features: Vec<f32> = (0..n).map(|i| ((i * 7919 % 1000) as f32 / 1000.0) - 0.5).collect();
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut times = Vec::new();
    for i in 0..=a.repeat {
        enc.set_input_tensor(0, ScalarType::Float, shape, &f32_bytes(&features)).map_err(|x| e(&x))?;
        let t = Instant::now();
        enc.execute(ctx).map_err(|x| e(&x))?;
        if i > 0 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    let hidden = enc.output_bytes(0).ok_or("no encoder output")?.to_vec();
    let prompt: Vec<i64> = vec![1, 2, 3, 4];
    let step = |dec: &mut Method<'_>, ctx: &mut KernelContext, ids: &[i64], pos: i64| -> Result<Vec<f32>, String> {
        let b: Vec<u8> = ids.iter().flat_map(|x| x.to_le_bytes()).collect();
        dec.set_input_tensor(0, ScalarType::Long, &[1, ids.len()], &b).map_err(|x| e(&x))?;
        dec.set_input_tensor(1, ScalarType::Float, hidden_shape, &hidden).map_err(|x| e(&x))?;
        dec.set_input_tensor(2, ScalarType::Long, &[1], &pos.to_le_bytes()).map_err(|x| e(&x))?;
        dec.execute(ctx).map_err(|x| e(&x))?;
        Ok(dec.output_bytes(0).ok_or("no logits")?.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    };
    let mut logits = step(dec, ctx, &prompt, 0)?;
    let t = Instant::now();
    for k in 0..a.tokens {
        let next = logits.iter().enumerate().fold((0, f32::MIN), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0 as i64;
        logits = step(dec, ctx, &[next], 4 + k as i64)?;
    }
    let per_token = t.elapsed().as_secs_f64() * 1e3 / a.tokens.max(1) as f64;
    Ok((median(times), per_token, logits))
}

fn main() -> Result<(), String> {
    let a = args()?;
    let cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(a.dir.join("config.json")).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let mels = cfg["num_mel_bins"].as_u64().unwrap_or(80) as usize;
    let frames = 2 * cfg["max_source_positions"].as_u64().unwrap_or(1500) as usize;
    let d = cfg["d_model"].as_u64().unwrap_or(512) as usize;
    let (shape, hidden_shape) = ([1, mels, frames], [1, frames / 2, d]);

    let kernels = rbuild_kernels::registry();
    let cpu_prog = export(&a.dir, None)?;
    let gpu_prog = export(&a.dir, Some(a.weights))?;
    let choice = DeviceChoice::parse(&a.device).ok_or("--device cpu: the CPU side is always measured")?;
    let gpu = GpuDevice::new(&choice)?;
    let adapter = gpu.adapter().to_string();
    let mut backends = BackendRegistry::new();
    backends.register(Box::new(WgpuGpuBackend::new(gpu)));

    let cpu = Program::load(cpu_prog.as_slice()).map_err(|e| e.to_string())?;
    let gp = Program::load(gpu_prog.as_slice()).map_err(|e| e.to_string())?;
    let none = BackendRegistry::new();
    let mut ctx = KernelContext { threads: a.threads };
    let (mut ce, mut cd) = (load(&cpu, "encoder", &kernels, &none)?, load(&cpu, "text_decoder", &kernels, &none)?);
    let (cpu_enc, cpu_tok, cpu_logits) = run(&mut ce, &mut cd, &mut ctx, &shape, &hidden_shape, &a)?;
    let (mut ge, mut gd) = (load(&gp, "encoder", &kernels, &backends)?, load(&gp, "text_decoder", &kernels, &backends)?);
    let (gpu_enc, gpu_tok, gpu_logits) = run(&mut ge, &mut gd, &mut ctx, &shape, &hidden_shape, &a)?;
    let diff = cpu_logits.iter().zip(&gpu_logits).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);

    println!("whisper {} (d_model {d}, {} frames), {} weights on the GPU", a.dir.display(), frames / 2, if a.weights == WeightDtype::F16 { "f16" } else { "f32" });
    println!("GPU: {adapter}; CPU: rbuild kernels, {} thread(s)", a.threads);
    println!("{:<28} {:>12} {:>12} {:>10}", "", "CPU ms", "GPU ms", "CPU/GPU");
    println!("{:<28} {:>12.1} {:>12.1} {:>9.2}x", "encoder (median)", cpu_enc, gpu_enc, cpu_enc / gpu_enc);
    println!("{:<28} {:>12.2} {:>12.2} {:>9.2}x", format!("decode ms/token ({} tokens)", a.tokens), cpu_tok, gpu_tok, cpu_tok / gpu_tok);
    println!("last logits: max |CPU - GPU| = {diff:.3e}");
    Ok(())
}
