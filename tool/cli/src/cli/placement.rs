//! `rbuild inspect MODEL.pt2 --backend cpu|xnnpack|gpu` (or `--recipe NAME`, whose backend it
//! takes): where each operator of the imported program would run, before any build. The
//! archive is imported and put through the same passes and partitioner the build runs; nothing
//! is lowered or written. Ops on the CPU name the kernel that would run them (optimized,
//! portable, or none: the build would fail at load).

use std::collections::BTreeMap;

use rbuild_export::delegation::{Partitioning, Placement};
use rbuild_export::graph::Graph;
use rbuild_export::passes;
use serde_json::{json, Value as Json};

/// The backends whose placement can be told from the float graph. Ethos-U places the fused
/// int8 graph, which needs calibration: its build prints that report.
pub const BACKENDS: &[&str] = &["cpu", "xnnpack", "gpu"];

/// The kernel that runs out-variant op `key` on the CPU.
fn cpu_kernel(catalog: &BTreeMap<&str, &str>, key: &str) -> String {
    match catalog.get(key) {
        Some(path) if path.contains("::optimized::") => format!("cpu: {key} (optimized kernel)"),
        Some(_) => format!("cpu: {key} (portable kernel)"),
        None => format!("NO KERNEL for {key}: the program would not load"),
    }
}

/// The out variant a functional op runs as on the CPU (itself when it has none: prim ops).
fn out_key(op: &str) -> String {
    rbuild_export::ops::op(op).and_then(|d| d.out.as_ref()).map_or_else(|| op.to_string(), |s| s.key())
}

/// Per-op placement rows for `backend`, and a one-line summary.
pub fn placement(mut g: Graph, backend: &str) -> Result<Json, String> {
    let catalog: BTreeMap<&str, &str> = rbuild_kernels::catalog().into_iter().collect();
    let name_of = |g: &Graph, outputs: &[usize]| outputs.first().map(|&o| g.values[o].name.clone()).unwrap_or_default();
    let mut rows = Vec::new();
    match backend {
        "cpu" => {
            passes::optimize(&mut g).map_err(|e| e.to_string())?;
            for n in &g.nodes {
                rows.push(json!({"op": n.op, "value": name_of(&g, &n.outputs), "runs_on": cpu_kernel(&catalog, &n.op)}));
            }
        }
        "xnnpack" | "gpu" => {
            let parts: Partitioning = if backend == "xnnpack" {
                passes::optimize_functional(&mut g, &passes::Options::for_xnnpack()).map_err(|e| e.to_string())?;
                rbuild_xnnpack::partition::partition(&g)
            } else {
                passes::optimize_functional(&mut g, &passes::Options::default()).map_err(|e| e.to_string())?;
                rbuild_gpu::partition::partition(&g)
            };
            let target = if backend == "xnnpack" { "XnnpackBackend" } else { "RbuildGpuBackend" };
            for p in &parts.ops {
                let runs_on = match &p.placement {
                    Placement::Delegated(k) => format!("{target} (delegate {k})"),
                    Placement::Scalar => "cpu: run-time scalar (no tensor work)".to_string(),
                    Placement::Cpu(reason) => format!("{} ({reason})", cpu_kernel(&catalog, &out_key(&p.op))),
                };
                rows.push(json!({"op": p.op, "value": p.name, "runs_on": runs_on}));
            }
        }
        other => return Err(format!("--backend {other}: placement is told for {} (Ethos-U places the calibrated int8 graph: its build prints that report)", BACKENDS.join(", "))),
    }
    let count = |pred: &dyn Fn(&str) -> bool| rows.iter().filter(|r| r["runs_on"].as_str().is_some_and(pred)).count();
    let delegated = count(&|s| !s.starts_with("cpu") && !s.starts_with("NO KERNEL"));
    let missing = count(&|s| s.starts_with("NO KERNEL"));
    let summary = format!("{backend}: {} op(s), {delegated} delegated, {} on the CPU, {missing} without a kernel", rows.len(), rows.len() - delegated - missing);
    Ok(json!({"backend": backend, "summary": summary, "ops": rows}))
}

/// Prints the rows under a heading.
pub fn print(p: &Json) {
    println!("placement for backend {}: {}", p["backend"].as_str().unwrap_or(""), p["summary"].as_str().unwrap_or(""));
    for r in p["ops"].as_array().into_iter().flatten() {
        println!("  {:<44} {:<28} {}", r["op"].as_str().unwrap_or(""), r["value"].as_str().unwrap_or(""), r["runs_on"].as_str().unwrap_or(""));
    }
}
