//! Decode-shaped linear layers (M = 1) per weight format: achieved weight bandwidth (GB/s) of
//! the optimized kernels at 1 and 2 threads, on stories110M's shapes (dim 768, hidden 2048,
//! vocab 32000), plus a plain memory-read bandwidth for scale and the linear-layer time of
//! one stories110M decode token.
//!
//! `cargo run --release -p rbuild-kernels --example gemv_bench` (env: THREADS=1,2 to choose,
//! SECS=0.5 per case, FORMATS=f32,q8,q4,8da4w,q8g,q4_1, SHAPES=1536x576,49152x576 for other
//! N x K shapes; q8g and q4_1 are GGUF's Q8_0 and Q4_1 blocks)
//!
//! Weights cycle through enough copies (≥ 128 MiB in all) that each call reads them from DRAM,
//! as in a real decode, where the whole model is far larger than the caches.

use std::time::Instant;

use half::f16;
use rbuild_runtime::harness::OpHarness;
use rbuild_runtime::kernel::KernelFn;
use rbuild_runtime::ScalarType;

const SHAPES: [(usize, usize, &str); 4] = [(768, 768, "768x768 (wq/wk/wv/wo)"), (2048, 768, "2048x768 (w1/w3)"), (768, 2048, "768x2048 (w2)"), (32000, 768, "32000x768 (classifier)")];
const GROUP: usize = 32;

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// One prepared call: its harness and argument ids; weight bytes (incl. scales).
struct Call {
    h: OpHarness,
    ids: Vec<u32>,
    kernel: KernelFn,
}

fn prepare(format: &str, n: usize, k: usize, threads: usize, r: &mut Lcg) -> (Call, usize) {
    use rbuild_kernels::optimized::llm::linear as l;
    let mut h = OpHarness::new();
    h.ctx.threads = threads;
    let xs: Vec<f32> = (0..k).map(|_| r.next()).collect();
    let x = h.f32(&[1, 1, k], &xs);
    let none = h.none();
    let out = h.out(ScalarType::Float, &[1, 1, n]);
    let (ids, kernel, bytes) = match format {
        "f32" => {
            let w: Vec<f32> = (0..n * k).map(|_| r.next()).collect();
            let w = h.f32(&[n, k], &w);
            (vec![x, w, none, out, out], l::linear_out as KernelFn, n * k * 4)
        }
        "q8" => {
            let w: Vec<i8> = (0..n * k).map(|_| (r.next() * 127.0) as i8).collect();
            let w = h.tensor::<i8>(ScalarType::Char, &[n, k], &w);
            let s = h.f32(&[n], &vec![0.01; n]);
            (vec![x, w, s, none, out, out], l::linear_q8_out as KernelFn, n * k + n * 4)
        }
        "q8g" => {
            let w: Vec<i8> = (0..n * k).map(|_| (r.next() * 127.0) as i8).collect();
            let w = h.tensor::<i8>(ScalarType::Char, &[n, k], &w);
            let s = h.tensor::<f16>(ScalarType::Half, &[n, k / GROUP], &vec![f16::from_f32(0.01); n * k / GROUP]);
            let g = h.int(GROUP as i64);
            (vec![x, w, s, none, g, out, out], l::linear_q8g_out as KernelFn, n * k + n * k / GROUP * 2)
        }
        "q4_1" => {
            let w: Vec<u8> = (0..n * k / 2).map(|_| ((r.next() + 1.0) * 127.9) as u8).collect();
            let w = h.tensor::<u8>(ScalarType::Byte, &[n, k / 2], &w);
            let s = h.tensor::<f16>(ScalarType::Half, &[n, k / GROUP], &vec![f16::from_f32(0.01); n * k / GROUP]);
            let m = h.tensor::<f16>(ScalarType::Half, &[n, k / GROUP], &vec![f16::from_f32(-0.05); n * k / GROUP]);
            let g = h.int(GROUP as i64);
            (vec![x, w, s, m, none, g, out, out], l::linear_q4_1_out as KernelFn, n * k / 2 + n * k / GROUP * 4)
        }
        _ => {
            let w: Vec<u8> = (0..n * k / 2).map(|_| ((r.next() + 1.0) * 127.9) as u8).collect();
            let w = h.tensor::<u8>(ScalarType::Byte, &[n, k / 2], &w);
            let s = h.tensor::<f16>(ScalarType::Half, &[n, k / GROUP], &vec![f16::from_f32(0.01); n * k / GROUP]);
            let g = h.int(GROUP as i64);
            let f = if format == "q4" { l::linear_q4_out as KernelFn } else { l::linear_8da4w_out as KernelFn };
            (vec![x, w, s, none, g, out, out], f, n * k / 2 + n * k / GROUP * 2)
        }
    };
    (Call { h, ids, kernel }, bytes)
}

/// CPU time of the calling thread (Linux `CLOCK_THREAD_CPUTIME_ID`), in seconds: on a busy
/// machine this, unlike wall time, leaves out the time other processes held the core.
fn thread_cpu() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `ts`; clock 3 is CLOCK_THREAD_CPUTIME_ID.
    let rc = unsafe { clock_gettime(3, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

/// (wall seconds per call, caller-thread CPU seconds per call, weight bytes), cycling through
/// copies of the weights (one copy when `COPIES=1`: cache-resident, compute-bound).
fn time(format: &str, n: usize, k: usize, threads: usize, secs: f64) -> (f64, f64, usize) {
    let mut r = Lcg(n as u64 * 31 + k as u64);
    let (first, bytes) = prepare(format, n, k, threads, &mut r);
    let copies = match std::env::var("COPIES") {
        Ok(c) => c.parse().expect("COPIES"),
        Err(_) => ((128usize << 20) / bytes).max(1),
    };
    let mut calls = vec![first];
    for _ in 1..copies {
        calls.push(prepare(format, n, k, threads, &mut r).0);
    }
    let mut run_all = || {
        for c in calls.iter_mut() {
            c.h.call(c.kernel, &c.ids).expect("kernel call");
        }
    };
    run_all();
    let (start, cpu) = (Instant::now(), thread_cpu());
    let mut rounds = 0;
    while start.elapsed().as_secs_f64() < secs || rounds < 3 {
        run_all();
        rounds += 1;
    }
    let calls = (rounds * copies) as f64;
    (start.elapsed().as_secs_f64() / calls, (thread_cpu() - cpu) / calls, bytes)
}

/// Plain read bandwidth: summing a 512 MiB buffer of u64 on `threads` threads.
fn read_bandwidth(threads: usize) -> f64 {
    let buf: Vec<u64> = (0..(512usize << 20) / 8).map(|i| i as u64).collect();
    let pass = || {
        let per = buf.len().div_ceil(threads);
        std::thread::scope(|s| {
            let hs: Vec<_> = buf.chunks(per).map(|c| s.spawn(move || c.iter().fold(0u64, |a, &b| a.wrapping_add(b)))).collect();
            hs.into_iter().map(|h| h.join().unwrap()).fold(0u64, u64::wrapping_add)
        })
    };
    std::hint::black_box(pass());
    let start = Instant::now();
    for _ in 0..3 {
        std::hint::black_box(pass());
    }
    3.0 * (buf.len() * 8) as f64 / start.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let threads: Vec<usize> = std::env::var("THREADS").unwrap_or("1,2".into()).split(',').map(|t| t.parse().expect("THREADS")).collect();
    let secs: f64 = std::env::var("SECS").ok().map_or(0.5, |s| s.parse().expect("SECS"));
    let formats: Vec<String> = std::env::var("FORMATS").unwrap_or("f32,q8,q4,8da4w".into()).split(',').map(String::from).collect();
    // Other shapes than stories110M's: "NxK,…" (no per-token total then).
    let custom: Option<Vec<(usize, usize, &'static str)>> = std::env::var("SHAPES").ok().map(|v| {
        v.split(',')
            .map(|s| {
                let (n, k) = s.split_once('x').expect("SHAPES: NxK");
                (n.parse().expect("SHAPES: N"), k.parse().expect("SHAPES: K"), &*String::leak(s.to_string()))
            })
            .collect()
    });
    let shapes: &[(usize, usize, &str)] = custom.as_deref().unwrap_or(&SHAPES);
    println!("isa: {:?}", rbuild_kernels::optimized::llm::simd::isa());
    for &t in &threads {
        println!("memory read bandwidth, {t} thread(s): {:.1} GB/s", read_bandwidth(t));
    }
    println!("{:<7} {:<24} {:>7} {:>10} {:>8} {:>12}", "format", "shape (N x K)", "threads", "us/call", "GB/s", "GB/s per CPU");
    for f in &formats {
        for &t in &threads {
            let mut token = 0.0;
            for &(n, k, name) in shapes {
                let (s, cpu, bytes) = time(f, n, k, t, secs);
                // Per CPU-second of the calling thread: meaningful at 1 thread on a busy machine.
                println!("{f:<7} {name:<24} {t:>7} {:>10.1} {:>8.2} {:>12.2}", s * 1e6, bytes as f64 / s / 1e9, bytes as f64 / cpu / 1e9);
                // stories110M per token: 12 × (4 dim×dim + 2 hidden×dim + dim×hidden) + classifier.
                token += match (n, k) {
                    (768, 768) => 48.0 * s,
                    (2048, 768) => 24.0 * s,
                    (768, 2048) => 12.0 * s,
                    _ => s,
                };
            }
            if custom.is_none() {
                println!("{f:<7} stories110M linear layers per token, {t} thread(s): {:.2} ms ({:.0} tok/s bound)", token * 1e3, 1.0 / token);
            }
        }
    }
}
