//! Times the int8 NHWC kernels on MobileNetV2's layer shapes (random weights, 1 thread).
//! `cargo run --release -p rbuild-kernels --example nhwc_qs8_bench`

use rbuild_kernels::nhwc::qs8::*;
use rbuild_kernels::nhwc::{Conv2dGeom, Serial};
use std::time::Instant;

fn geom(h: usize, cin: usize, cout: usize, k: usize, s: usize, dw: bool) -> Conv2dGeom {
    let p = k / 2;
    let o = (h + 2 * p - k) / s + 1;
    Conv2dGeom {
        batch: 1,
        in_h: h,
        in_w: h,
        out_h: o,
        out_w: o,
        kernel_h: k,
        kernel_w: k,
        stride_h: s,
        stride_w: s,
        dilation_h: 1,
        dilation_w: 1,
        pad_top: p,
        pad_left: p,
        groups: if dw { cin } else { 1 },
        group_in: if dw { 1 } else { cin },
        group_out: if dw { 1 } else { cout },
    }
}

enum Op {
    Conv(ConvQs8),
    Dw(DepthwiseQs8),
}

fn main() {
    let mut seed = 1u64;
    let mut rnd = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as i8
    };
    let q = QParams { scale: 0.05, zero_point: -5 };
    let mut ops: Vec<(String, Op, usize, usize)> = Vec::new();
    let mut add = |name: String, g: Conv2dGeom, dw: bool, rnd: &mut dyn FnMut() -> i8| {
        let n = if dw { g.kernel_h * g.kernel_w * g.groups } else { g.out_channels() * g.kernel_h * g.kernel_w * g.group_in };
        let w: Vec<i8> = (0..n).map(|_| rnd() / 4).collect();
        let s = vec![0.004f32; g.out_channels()];
        let b: Vec<i32> = (0..g.out_channels()).map(|i| i as i32 * 10).collect();
        let op = if dw {
            Op::Dw(DepthwiseQs8::new(&g, q, &w, &s, Some(&b), q, -128, 127).unwrap())
        } else {
            Op::Conv(ConvQs8::new(&g, q, &w, &s, Some(&b), q, -128, 127).unwrap())
        };
        ops.push((name, op, g.in_len(), g.out_len()));
    };
    let mut h = 224;
    add("stem 3x3s2 3->32".into(), geom(h, 3, 32, 3, 2, false), false, &mut rnd);
    h = 112;
    let mut cin = 32;
    let cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)];
    for (t, c, n, s) in cfg {
        for i in 0..n {
            let st = if i == 0 { s } else { 1 };
            let hid = cin * t;
            if t != 1 {
                add(format!("pw {h}x{h} {cin}->{hid}"), geom(h, cin, hid, 1, 1, false), false, &mut rnd);
            }
            add(format!("dw {h}x{h} {hid} s{st}"), geom(h, hid, hid, 3, st, true), true, &mut rnd);
            let ho = (h + 2 - 3) / st + 1;
            add(format!("pw {ho}x{ho} {hid}->{c}"), geom(ho, hid, c, 1, 1, false), false, &mut rnd);
            h = ho;
            cin = c;
        }
    }
    add(format!("pw {h}x{h} {cin}->1280"), geom(h, cin, 1280, 1, 1, false), false, &mut rnd);
    let fc_w: Vec<i8> = (0..1280 * 1000).map(|_| rnd() / 4).collect();
    let fc = FullyConnectedQs8::new(1000, 1280, q, &fc_w, &[0.004], None, q, -128, 127).unwrap();

    let bufs: Vec<(Vec<i8>, Vec<i8>)> = ops.iter().map(|(_, _, i, o)| (vec![3i8; *i], vec![0i8; *o])).collect();
    let mut bufs = bufs;
    let reps = 20;
    let mut times = vec![0f64; ops.len()];
    let mut total_best = f64::MAX;
    for _ in 0..reps {
        let t_all = Instant::now();
        for (i, (_, op, _, _)) in ops.iter().enumerate() {
            let (x, y) = &mut bufs[i];
            let t = Instant::now();
            match op {
                Op::Conv(c) => c.run(&Serial, x, y).unwrap(),
                Op::Dw(d) => d.run(&Serial, x, y).unwrap(),
            }
            let e = t.elapsed().as_secs_f64();
            times[i] = if times[i] == 0.0 { e } else { times[i].min(e) };
        }
        let x = vec![1i8; 1280];
        let mut y = vec![0i8; 1000];
        fc.run(&Serial, 1, &x, &mut y).unwrap();
        total_best = total_best.min(t_all.elapsed().as_secs_f64());
    }
    for (i, (name, _, _, _)) in ops.iter().enumerate() {
        println!("{:>8.3} ms  {name}", times[i] * 1e3);
    }
    println!("sum of per-layer bests {:.3} ms; best whole pass (convs + fc) {:.3} ms", times.iter().sum::<f64>() * 1e3, total_best * 1e3);
}
