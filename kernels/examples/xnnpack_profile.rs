//! Per-node time of an XNNPACK-delegated program on rbuild's `XnnpackBackend`:
//! `cargo run --release -p rbuild-kernels --example xnnpack_profile -- PROGRAM.pte [--threads N] [--runs N]`.
//! Steps run on zeros (timings do not depend on values); prints the slowest steps and totals
//! per node kind.

use std::collections::BTreeMap;
use std::time::Instant;

use rbuild_runtime::backends::xnnpack::XNNPACK_BACKEND_ID;
use rbuild_runtime::format::PteFile;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: xnnpack_profile PROGRAM.pte [--threads N] [--runs N]");
    let opt = |name: &str, default: usize| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map_or(default, |v| v.parse().expect(name));
    let (threads, runs) = (opt("--threads", 1), opt("--runs", 20));
    let bytes = std::fs::read(path).expect("read program");
    let file = PteFile::parse(&bytes).expect("parse program");
    let named = |k: &str| file.named_data(k).ok().flatten();
    let start = Instant::now();
    let now = || start.elapsed().as_secs_f64();
    for plan in file.program.execution_plan.as_deref().unwrap_or(&[]) {
        for d in plan.delegates.as_deref().unwrap_or(&[]) {
            if d.id != Some(XNNPACK_BACKEND_ID) {
                continue;
            }
            let blob = file.delegate_data(d).expect("delegate data");
            let mut p = rbuild_kernels::xnnpack::compile_payload(blob, &named, rbuild_kernels::xnnpack::DEFAULT_ACTIVATION_LIMIT).expect("compile");
            let names = p.step_names();
            let mut total = vec![f64::INFINITY; names.len()];
            let mut whole = Vec::with_capacity(runs);
            for _ in 0..runs {
                let t0 = now();
                for (k, (_, t)) in p.run_timed(threads, &now).expect("run").into_iter().enumerate() {
                    total[k] = total[k].min(t);
                }
                whole.push(now() - t0);
            }
            whole.sort_by(f64::total_cmp);
            let sum: f64 = total.iter().sum();
            println!(
                "{path}: {} steps, sum of per-step minima {:.3} ms; whole runs: median {:.3} ms, min {:.3} ms; {threads} thread(s)",
                names.len(),
                sum * 1e3,
                whole[whole.len() / 2] * 1e3,
                whole[0] * 1e3
            );
            let mut by_kind: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
            for (n, t) in names.iter().zip(&total) {
                let e = by_kind.entry(n.split(' ').next().unwrap_or("")).or_default();
                e.0 += 1;
                e.1 += t;
            }
            for (k, (c, t)) in &by_kind {
                println!("  {k:<22} x{c:<4} {:8.3} ms {:5.1}%", t * 1e3, 100.0 * t / sum);
            }
            let mut order: Vec<usize> = (0..names.len()).collect();
            order.sort_by(|a, b| total[*b].total_cmp(&total[*a]));
            println!("  slowest steps:");
            for &k in order.iter().take(std::env::var("TOP").ok().and_then(|v| v.parse().ok()).unwrap_or(15)) {
                println!("    {:4} {:<50} {:8.3} ms", k, names[k], total[k] * 1e3);
            }
        }
    }
}
