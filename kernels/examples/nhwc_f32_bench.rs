//! Times the NHWC f32 kernels on MobileNetV2's convolution / depthwise / FC layers (fp32,
//! 224×224, batch 1), per layer (minimum of several runs) and summed.
//!
//! ```sh
//! cargo run --release -p rbuild-kernels --example nhwc_f32_bench            # 1 and 2 threads
//! cargo run --release -p rbuild-kernels --example nhwc_f32_bench -- --threads 2 --runs 30
//! ```

use rbuild_kernels::nhwc::conv_f32::ConvF32;
use rbuild_kernels::nhwc::dwconv_f32::DepthwiseF32;
use rbuild_kernels::nhwc::fc_f32::FullyConnectedF32;
use rbuild_kernels::nhwc::pool::ThreadPool;
use rbuild_kernels::nhwc::{Conv2dGeom, Parallel, Serial};
use std::time::Instant;

enum Op {
    Conv(ConvF32),
    Dw(DepthwiseF32),
    Fc(FullyConnectedF32),
}

struct Layer {
    name: String,
    op: Op,
    macs: usize,
    x: Vec<f32>,
    y: Vec<f32>,
}

fn lcg_vec(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 0.2 - 0.1
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn geom(hw: usize, k: usize, s: usize, groups: usize, gi: usize, go: usize) -> Conv2dGeom {
    let p = k / 2;
    let out = (hw + 2 * p - k) / s + 1;
    Conv2dGeom {
        batch: 1,
        in_h: hw,
        in_w: hw,
        out_h: out,
        out_w: out,
        kernel_h: k,
        kernel_w: k,
        stride_h: s,
        stride_w: s,
        dilation_h: 1,
        dilation_w: 1,
        pad_top: p,
        pad_left: p,
        groups,
        group_in: gi,
        group_out: go,
    }
}

fn conv(name: String, g: Conv2dGeom) -> Layer {
    let k = g.kernel_h * g.kernel_w * g.group_in;
    let f = lcg_vec(1, g.out_channels() * k);
    let b = lcg_vec(2, g.out_channels());
    let macs = g.batch * g.out_h * g.out_w * g.out_channels() * k;
    Layer { name, op: Op::Conv(ConvF32::new(&g, &f, Some(&b)).unwrap()), macs, x: lcg_vec(3, g.in_len()), y: vec![0.0; g.out_len()] }
}

fn pw(hw: usize, ci: usize, co: usize) -> Layer {
    conv(format!("pw {ci}→{co} @{hw}²"), geom(hw, 1, 1, 1, ci, co))
}

fn dw(hw: usize, c: usize, s: usize) -> Layer {
    let g = geom(hw, 3, s, c, 1, 1);
    let f = lcg_vec(4, 9 * c);
    let b = lcg_vec(5, c);
    let macs = g.out_h * g.out_w * c * 9;
    Layer {
        name: format!("dw {c} s{s} @{hw}²"),
        op: Op::Dw(DepthwiseF32::new(&g, &f, Some(&b)).unwrap()),
        macs,
        x: lcg_vec(6, g.in_len()),
        y: vec![0.0; g.out_len()],
    }
}

fn mobilenet_v2() -> Vec<Layer> {
    let mut l = vec![conv("conv 3×3 s2 3→32 @224²".into(), geom(224, 3, 2, 1, 3, 32))];
    l.push(dw(112, 32, 1));
    l.push(pw(112, 32, 16));
    // (expansion t, output channels c, repeats n, first stride s), as in the paper.
    let settings = [(6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)];
    let (mut hw, mut cin) = (112, 16);
    for (t, c, n, s) in settings {
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            let hid = cin * t;
            l.push(pw(hw, cin, hid));
            l.push(dw(hw, hid, stride));
            hw = (hw + 2 - 3) / stride + 1;
            l.push(pw(hw, hid, c));
            cin = c;
        }
    }
    l.push(pw(7, 320, 1280));
    let (n, k) = (1000, 1280);
    l.push(Layer {
        name: "fc 1280→1000".into(),
        op: Op::Fc(FullyConnectedF32::new(n, k, &lcg_vec(7, n * k), Some(&lcg_vec(8, n))).unwrap()),
        macs: n * k,
        x: lcg_vec(9, k),
        y: vec![0.0; n],
    });
    l
}

fn run(layer: &mut Layer, par: &dyn Parallel) {
    let (min, max) = (0.0, 6.0);
    match &layer.op {
        Op::Conv(c) => c.run(par, &layer.x, &mut layer.y, min, max).unwrap(),
        Op::Dw(d) => d.run(par, &layer.x, &mut layer.y, min, max).unwrap(),
        Op::Fc(f) => f.run(par, 1, &layer.x, &mut layer.y, min, max).unwrap(),
    }
}

/// Peak f32 FLOP/s of one core: a tight loop of independent FMAs (12 chains) on the widest
/// vectors the kernels use here (16 lanes with AVX-512F, else 8 with AVX2+FMA); with the lane
/// count.
#[cfg(target_arch = "x86_64")]
fn peak_gflops() -> Option<(f64, usize)> {
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
        return None;
    }
    #[target_feature(enable = "avx2,fma")]
    unsafe fn fma_loop(iters: usize) -> f32 {
        use std::arch::x86_64::*;
        let mut acc = [_mm256_set1_ps(0.0); 12];
        let a = _mm256_set1_ps(0.999_999);
        let b = _mm256_set1_ps(1e-7);
        for _ in 0..iters {
            for v in acc.iter_mut() {
                *v = _mm256_fmadd_ps(*v, a, b);
            }
        }
        let mut s = _mm256_setzero_ps();
        for v in acc {
            s = _mm256_add_ps(s, v);
        }
        _mm256_cvtss_f32(s)
    }
    #[target_feature(enable = "avx512f")]
    unsafe fn fma_loop512(iters: usize) -> f32 {
        use std::arch::x86_64::*;
        let mut acc = [_mm512_set1_ps(0.0); 12];
        let a = _mm512_set1_ps(0.999_999);
        let b = _mm512_set1_ps(1e-7);
        for _ in 0..iters {
            for v in acc.iter_mut() {
                *v = _mm512_fmadd_ps(*v, a, b);
            }
        }
        let mut s = _mm512_setzero_ps();
        for v in acc {
            s = _mm512_add_ps(s, v);
        }
        _mm512_reduce_add_ps(s)
    }
    // The kernels' own choice (RBUILD_KERNELS_NO_AVX512 set: AVX2).
    let wide = is_x86_feature_detected!("avx512f") && std::env::var_os("RBUILD_KERNELS_NO_AVX512").is_none();
    let lanes = if wide { 16 } else { 8 };
    let iters = 2_000_000;
    let mut best = f64::MAX;
    for _ in 0..40 {
        let t = Instant::now();
        // SAFETY: AVX2 and FMA were detected above, AVX-512F when `wide`.
        std::hint::black_box(unsafe { if wide { fma_loop512(iters) } else { fma_loop(iters) } });
        best = best.min(t.elapsed().as_secs_f64());
    }
    Some(((iters * 12 * lanes * 2) as f64 / best / 1e9, lanes))
}

#[cfg(not(target_arch = "x86_64"))]
fn peak_gflops() -> Option<(f64, usize)> {
    None
}

fn bench(layers: &mut [Layer], threads: usize, runs: usize, peak: Option<f64>) {
    let pool = ThreadPool::new(threads);
    let par: &dyn Parallel = if threads == 1 { &Serial } else { &pool };
    println!("\n== {threads} thread(s), min of {runs} runs ==");
    println!("{:<26} {:>9} {:>9} {:>8} {:>7}", "layer", "MMAC", "µs", "GFLOP/s", "%peak");
    let (mut total, mut macs) = (0.0f64, 0usize);
    let mut by_kind = [(0.0f64, 0usize); 3];
    for layer in layers.iter_mut() {
        run(layer, par); // warm up
        let mut best = f64::MAX;
        for _ in 0..runs {
            let t = Instant::now();
            run(layer, par);
            best = best.min(t.elapsed().as_secs_f64());
        }
        let gf = 2.0 * layer.macs as f64 / best / 1e9;
        let pct = peak.map_or(String::from("-"), |p| format!("{:.0}%", 100.0 * gf / (p * threads as f64)));
        println!("{:<26} {:>9.2} {:>9.1} {:>8.1} {:>7}", layer.name, layer.macs as f64 / 1e6, best * 1e6, gf, pct);
        total += best;
        macs += layer.macs;
        let kind = match layer.op {
            Op::Conv(_) => 0,
            Op::Dw(_) => 1,
            Op::Fc(_) => 2,
        };
        by_kind[kind].0 += best;
        by_kind[kind].1 += layer.macs;
    }
    for (name, (t, m)) in ["conv (incl. 1×1)", "depthwise", "fc"].iter().zip(by_kind) {
        println!("  {name:<20} {:>8.3} ms  {:>6.1} GFLOP/s", t * 1e3, 2.0 * m as f64 / t / 1e9);
    }
    println!(
        "TOTAL ({threads} thread(s)): {:.3} ms for {:.1} MMAC = {:.1} GFLOP/s",
        total * 1e3,
        macs as f64 / 1e6,
        2.0 * macs as f64 / total / 1e9
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut threads: Vec<usize> = vec![1, 2];
    let mut runs = 20;
    let mut peak_only = false;
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--threads" => {
                threads = vec![args[i + 1].parse().expect("--threads N")];
                i += 1;
            }
            "--runs" => {
                runs = args[i + 1].parse().expect("--runs N");
                i += 1;
            }
            "--peak-only" => peak_only = true,
            a => panic!("unknown argument {a} (use --threads N, --runs N, --peak-only)"),
        }
        i += 1;
    }
    let measured = peak_gflops();
    let peak = measured.map(|(p, _)| p);
    match measured {
        Some((p, lanes)) => println!(
            "peak (one core, measured {}-lane FMA loop, best of 40): {p:.1} GFLOP/s = {:.2} GHz × 2 FMA ports × {lanes} lanes × 2 flops",
            lanes,
            p / (4 * lanes) as f64
        ),
        None => println!("peak: not measured on this target"),
    }
    if peak_only {
        // One machine-readable line for scripts (tool/bench/mobilenet_v2.sh).
        println!("peak_gflops {:.1}", peak.unwrap_or(0.0));
        return;
    }
    let mut layers = mobilenet_v2();
    for t in threads {
        bench(&mut layers, t, runs, peak);
    }
}
