//! The export step of a `backend "gpu"` recipe: the family's program with every method's GPU
//! subgraphs delegated to `RbuildGpuBackend` (weights in the program's named data), the
//! recipe's fallback policy, and the delegation report (printed, and `delegation.json` beside
//! the program, which the manifest embeds).

use std::path::{Path, PathBuf};

use rbuild_export::Graph;
use rbuild_gpu::{GpuOptions, MethodReport, Placement, WeightDtype};
use rbuild_models::family::{self, ExportOptions, Source};
use rbuild_planner::cache::write_atomic;
use rbuild_recipe::{Dtype, Fallback, GpuApi};

/// The report's path beside `program`.
pub fn report_path(program: &Path) -> PathBuf {
    program.parent().unwrap_or(Path::new(".")).join("delegation.json")
}

pub fn weight_dtype(d: Dtype) -> WeightDtype {
    match d {
        Dtype::Float16 => WeightDtype::F16,
        Dtype::BFloat16 => WeightDtype::BF16,
        _ => WeightDtype::F32,
    }
}

/// Exports `arch` from `source` with GPU delegation and writes the program and its report.
pub fn export(arch: &str, source: &Source, o: &ExportOptions, api: GpuApi, weights: WeightDtype, fallback: Fallback, program: &Path) -> Result<(), String> {
    let f = crate::family::family(arch).map_err(|e| e.0)?;
    let options = GpuOptions { weights };
    let mut reports: Vec<MethodReport> = Vec::new();
    let mut hook = |method: &str, g: &mut Graph| {
        let r = rbuild_gpu::delegate_method(method, g, &options).map_err(rbuild_export::ExportError::Invalid)?;
        reports.push(r);
        Ok(())
    };
    let (bytes, report) = family::export_with(f, source, o, &mut hook).map_err(|e| format!("{}: {e}", source.describe()))?;
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    let cpu: Vec<String> = reports
        .iter()
        .flat_map(|r| r.cpu_ops().into_iter().map(move |o| (r, o)))
        .map(|(r, o)| format!("  {}: {} `{}`: {}", r.method, o.op, o.name, reason(&o.placement)))
        .collect();
    if fallback == Fallback::Deny && !cpu.is_empty() {
        return Err(format!(
            "backend gpu with `fallback \"deny\"`: {} op(s) would run on the CPU:\n{}\n(`fallback \"allow\"` runs them on the CPU kernels)",
            cpu.len(),
            cpu.join("\n")
        ));
    }
    for r in &reports {
        eprintln!("gpu delegation: {}", r.summary());
    }
    let json = report_json(&reports, api, weights);
    let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
    let report_out = report_path(program);
    write_atomic(&report_out, text.as_bytes()).map_err(|e| format!("{}: {e}", report_out.display()))?;
    write_atomic(program, &bytes).map_err(|e| format!("{}: {e}", program.display()))
}

fn reason(p: &Placement) -> &str {
    match p {
        Placement::Cpu(r) => r,
        Placement::Delegated(_) => "",
        Placement::Scalar => "run-time scalar",
    }
}

fn report_json(reports: &[MethodReport], api: GpuApi, weights: WeightDtype) -> serde_json::Value {
    serde_json::json!({
        "backend": "gpu",
        "delegate_id": rbuild_runtime::backends::gpu::RBUILD_GPU_BACKEND_ID,
        "api": api.as_str(),
        "weights": match weights { WeightDtype::F16 => "float16", WeightDtype::BF16 => "bfloat16", WeightDtype::F32 => "float32" },
        "methods": reports.iter().map(|r| serde_json::json!({
            "method": r.method,
            "gpu_ops": r.delegated_ops(),
            "cpu_ops": r.cpu_ops().len(),
            "subgraphs": r.partitioning.partitions.len(),
            "payload_bytes": r.payload_bytes,
            "ops": r.partitioning.ops.iter().map(|o| serde_json::json!({
                "node": o.node,
                "op": o.op,
                "name": o.name,
                "target": match &o.placement { Placement::Delegated(k) => format!("gpu:{k}"), Placement::Cpu(_) => "cpu".into(), Placement::Scalar => "scalar".into() },
                "reason": reason(&o.placement),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
