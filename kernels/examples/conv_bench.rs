//! Times the optimized f32 convolution on MobileNetV2-shaped layers, and the whole MobileNetV2
//! convolution + classifier stack (1x3x224x224), single-threaded unless THREADS is set.
//!
//! `cargo run --release -p rbuild-kernels --example conv_bench` (env: THREADS=n, FILTER=name, VERBOSE=1 for
//! per-layer times)

use std::time::Instant;

use rbuild_runtime::harness::OpHarness;
use rbuild_runtime::kernel::KernelFn;
use rbuild_runtime::ScalarType;

/// One conv layer: input [1, c_in, hw, hw], square kernel `k`, padding k/2, no bias (the
/// exported MobileNetV2 keeps batch norm separate).
#[derive(Clone, Copy)]
struct Layer {
    c_in: usize,
    c_out: usize,
    hw: usize,
    k: usize,
    stride: usize,
    groups: usize,
}

impl Layer {
    fn out_hw(&self) -> usize {
        (self.hw + 2 * (self.k / 2) - self.k) / self.stride + 1
    }
    fn macs(&self) -> usize {
        let o = self.out_hw();
        self.c_out * o * o * (self.c_in / self.groups) * self.k * self.k
    }
}

/// Prepared call of one layer in its own harness.
struct Prepared {
    h: OpHarness,
    ids: Vec<u32>,
}

fn prepare(l: Layer, threads: usize) -> Prepared {
    let mut h = OpHarness::new();
    h.ctx.threads = threads;
    let fill = |n: usize, seed: usize| (0..n).map(|i| ((i * 7919 + seed) % 251) as f32 / 251.0 - 0.5).collect::<Vec<_>>();
    let x = h.f32(&[1, l.c_in, l.hw, l.hw], &fill(l.c_in * l.hw * l.hw, 1));
    let wn = l.c_out * (l.c_in / l.groups) * l.k * l.k;
    let w = h.f32(&[l.c_out, l.c_in / l.groups, l.k, l.k], &fill(wn, 2));
    let b = h.none();
    let p = (l.k / 2) as i64;
    let (s, pad, d) = (h.int_list(&[l.stride as i64; 2]), h.int_list(&[p, p]), h.int_list(&[1, 1]));
    let (t, op, g) = (h.bool(false), h.int_list(&[0, 0]), h.int(l.groups as i64));
    let o = l.out_hw();
    let out = h.out(ScalarType::Float, &[1, l.c_out, o, o]);
    Prepared { h, ids: vec![x, w, b, s, pad, d, t, op, g, out, out] }
}

/// Best-of-`reps` milliseconds of `f`.
fn best_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm up caches and allocations
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

/// MobileNetV2's convolutions in order: stem, inverted residual blocks (t, c, n, s), last 1x1.
fn mobilenet_v2() -> Vec<Layer> {
    let mut v = vec![Layer { c_in: 3, c_out: 32, hw: 224, k: 3, stride: 2, groups: 1 }];
    let (mut c, mut hw) = (32, 112);
    for &(t, c_out, n, s) in &[(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)] {
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            let mid = c * t;
            if t != 1 {
                v.push(Layer { c_in: c, c_out: mid, hw, k: 1, stride: 1, groups: 1 });
            }
            v.push(Layer { c_in: mid, c_out: mid, hw, k: 3, stride, groups: mid });
            hw = (hw + 2 - 3) / stride + 1;
            v.push(Layer { c_in: mid, c_out, hw, k: 1, stride: 1, groups: 1 });
            c = c_out;
        }
    }
    v.push(Layer { c_in: 320, c_out: 1280, hw: 7, k: 1, stride: 1, groups: 1 });
    v
}

fn main() {
    let threads: usize = std::env::var("THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let registry = rbuild_kernels::registry();
    let conv: KernelFn = registry.lookup("aten::convolution.out").expect("convolution registered");
    let addmm: KernelFn = registry.lookup("aten::addmm.out").expect("addmm registered");
    println!("threads = {threads}");

    let named = [
        ("stem 3x3 s2 3->32 @224", Layer { c_in: 3, c_out: 32, hw: 224, k: 3, stride: 2, groups: 1 }),
        ("1x1 96->24 @56", Layer { c_in: 96, c_out: 24, hw: 56, k: 1, stride: 1, groups: 1 }),
        ("1x1 24->144 @56", Layer { c_in: 24, c_out: 144, hw: 56, k: 1, stride: 1, groups: 1 }),
        ("dw 3x3 s1 144 @56", Layer { c_in: 144, c_out: 144, hw: 56, k: 3, stride: 1, groups: 144 }),
        ("dw 3x3 s2 144 @56", Layer { c_in: 144, c_out: 144, hw: 56, k: 3, stride: 2, groups: 144 }),
        ("dw 3x3 s1 32 @112", Layer { c_in: 32, c_out: 32, hw: 112, k: 3, stride: 1, groups: 32 }),
        ("dw 3x3 s1 960 @7", Layer { c_in: 960, c_out: 960, hw: 7, k: 3, stride: 1, groups: 960 }),
        ("1x1 320->1280 @7", Layer { c_in: 320, c_out: 1280, hw: 7, k: 1, stride: 1, groups: 1 }),
    ];
    // FILTER=substring runs only the matching named layers (for profiling one shape).
    let filter = std::env::var("FILTER").ok();
    for (name, l) in named {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let mut p = prepare(l, threads);
        let reps = if filter.is_some() { 2000 } else { 50 };
        let ms = best_ms(reps, || p.h.call(conv, &p.ids).expect("conv runs"));
        println!("{name:<24} {ms:8.3} ms  {:6.1} GFLOP/s", 2.0 * l.macs() as f64 / ms / 1e6);
    }

    if filter.is_some() {
        return;
    }
    // Whole MobileNetV2 conv stack + classifier (addmm 1x1280 @ 1280x1000 + bias).
    let layers = mobilenet_v2();
    let mut prepared: Vec<Prepared> = layers.iter().map(|&l| prepare(l, threads)).collect();
    let mut h = OpHarness::new();
    h.ctx.threads = threads;
    let bias = h.f32(&[1000], &vec![0.01; 1000]);
    let feat = h.f32(&[1, 1280], &vec![0.5; 1280]);
    let wt = h.f32(&[1280, 1000], &vec![0.001; 1280 * 1000]);
    let (beta, alpha) = (h.int(1), h.int(1));
    let logits = h.out(ScalarType::Float, &[1, 1000]);
    let cls = [bias, feat, wt, beta, alpha, logits, logits];
    let macs: usize = layers.iter().map(Layer::macs).sum::<usize>() + 1280 * 1000;
    let (mut dw_ms, mut pw_ms, mut other_ms) = (0.0, 0.0, 0.0);
    for (l, p) in layers.iter().zip(prepared.iter_mut()) {
        let ms = best_ms(20, || p.h.call(conv, &p.ids).expect("conv runs"));
        if std::env::var("VERBOSE").is_ok() {
            println!("  {:>4}->{:<4} k{} s{} g{:<4} @{:<3} {ms:7.3} ms", l.c_in, l.c_out, l.k, l.stride, l.groups, l.hw);
        }
        match (l.groups > 1, l.k) {
            (true, _) => dw_ms += ms,
            (false, 1) => pw_ms += ms,
            _ => other_ms += ms,
        }
    }
    let cls_ms = best_ms(5, || h.call(addmm, &cls).expect("addmm runs"));
    let total = best_ms(20, || {
        for p in prepared.iter_mut() {
            p.h.call(conv, &p.ids).expect("conv runs");
        }
        h.call(addmm, &cls).expect("addmm runs");
    });
    println!(
        "MobileNetV2: {} convs, {:.0}M MACs: total {total:.2} ms (per-layer best: pointwise {pw_ms:.2}, depthwise {dw_ms:.2}, stem {other_ms:.2}, classifier {cls_ms:.3})",
        layers.len(),
        macs as f64 / 1e6
    );
}
