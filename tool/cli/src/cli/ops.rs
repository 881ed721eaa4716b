//! `rbuild ops [FILTER] [--json]`: the operator coverage table, read from the code itself —
//! the runtime's kernel table (what selective builds link from), the `.pt2` importer's op
//! table and each delegate compiler's list of the ops it lowers — so a regression shows as a
//! missing row (the suite checks the table against Core ATen and ExecuTorch's portable set).

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use crate::error::CliResult;

#[derive(clap::Args)]
pub struct OpsArgs {
    /// Only rows whose operator contains this text (`topk`, `aten::add`).
    pub filter: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn ops(a: OpsArgs) -> CliResult {
    let table = coverage();
    let keep = |op: &str| a.filter.as_deref().is_none_or(|f| op.contains(f));
    let table = filtered(table, &keep);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&table).expect("json"));
    } else {
        print_text(&table);
    }
    Ok(())
}

/// The whole table as JSON: `runtime.kernels`, `importer.targets` / `importer.not_mapped`,
/// `delegates.{xnnpack,gpu,ethos-u}`.
pub fn coverage() -> Json {
    json!({
        "runtime": runtime_rows(),
        "importer": importer_rows(),
        "delegates": {
            "xnnpack": xnnpack_rows(),
            "gpu": gpu_rows(),
            "ethos-u": ethosu_rows(),
        },
    })
}

/// Every kernel the runtime registers: which library serves it (optimized replaces portable)
/// and the dtypes it accepts where the kernel table declares them.
fn runtime_rows() -> Json {
    let portable: BTreeMap<&str, &str> = rbuild_kernels::portable::KERNEL_PATH_SETS.iter().flat_map(|s| s.iter().copied()).collect();
    let kernels: Vec<Json> = rbuild_kernels::catalog()
        .into_iter()
        .map(|(op, path)| {
            let library = if path.contains("::optimized::") { "optimized" } else { "portable" };
            let dtypes: Vec<&str> = rbuild_kernels::dtypes::declared(op).iter().map(|d| d.name()).collect();
            json!({
                "op": op,
                "library": library,
                "portable_twin": portable.contains_key(op),
                "dtypes": dtypes,
            })
        })
        .collect();
    json!({ "kernels": kernels })
}

fn importer_rows() -> Json {
    let targets: Vec<&str> = rbuild_pt2::mapped_targets();
    // Calls of an out variant (`torch.atan2(a, b, out=buf)`) import as their functional op
    // writing into `out`.
    let mut out_calls: Vec<String> =
        rbuild_export::ops::all().filter_map(|d| d.out.as_ref()).map(|o| o.key()).filter(|k| rbuild_pt2::is_mapped(k)).collect();
    out_calls.sort();
    out_calls.dedup();
    let not_mapped: Vec<Json> = rbuild_pt2::exceptions().iter().map(|(op, why)| json!({"op": op, "reason": why})).collect();
    json!({ "targets": targets, "out_variant_calls": out_calls, "not_mapped": not_mapped })
}

fn xnnpack_rows() -> Json {
    let export: Vec<Json> = rbuild_xnnpack::partition::LOWERED_OPS
        .iter()
        .map(|(op, node)| json!({"op": op, "node": node, "dtypes": ["float32"]}))
        .collect();
    let runtime: Vec<Json> = rbuild_kernels::xnnpack::SUPPORTED_NODES
        .iter()
        .map(|(node, dtypes)| json!({"node": node, "dtypes": dtypes}))
        .collect();
    json!({
        "backend_id": rbuild_runtime::backends::xnnpack::XNNPACK_BACKEND_ID,
        "export": export,
        "export_note": "linear layers also as qdint8 activations with qcint8/qcint4/qbint4 weights (quantize 8da8w / 8da4w)",
        "runtime_nodes": runtime,
    })
}

fn gpu_rows() -> Json {
    let export: Vec<Json> = rbuild_gpu::partition::LOWERED_OPS.iter().map(|op| json!({"op": op, "dtypes": ["float32", "float16"]})).collect();
    json!({ "backend_id": "RbuildGpuBackend", "export": export })
}

fn ethosu_rows() -> Json {
    let export: Vec<Json> = rbuild_ethosu::partition::LOWERED_OPS
        .iter()
        .map(|(op, tflite)| json!({"op": op, "tflite": tflite, "dtypes": ["int8"]}))
        .collect();
    json!({ "backend_id": "EthosUBackend", "export": export })
}

/// The table with only the rows whose op (or node) `keep` accepts.
fn filtered(mut table: Json, keep: &dyn Fn(&str) -> bool) -> Json {
    fn retain(list: &mut Json, key: &str, keep: &dyn Fn(&str) -> bool) {
        if let Some(items) = list.as_array_mut() {
            items.retain(|row| match row {
                Json::String(s) => keep(s),
                row => row[key].as_str().is_some_and(keep),
            });
        }
    }
    retain(&mut table["runtime"]["kernels"], "op", keep);
    retain(&mut table["importer"]["targets"], "op", keep);
    retain(&mut table["importer"]["out_variant_calls"], "op", keep);
    retain(&mut table["importer"]["not_mapped"], "op", keep);
    for d in ["xnnpack", "gpu", "ethos-u"] {
        retain(&mut table["delegates"][d]["export"], "op", keep);
    }
    retain(&mut table["delegates"]["xnnpack"]["runtime_nodes"], "node", keep);
    table
}

fn print_text(t: &Json) {
    let rows = |v: &Json| v.as_array().cloned().unwrap_or_default();
    let dtypes = |row: &Json| {
        let d: Vec<&str> = row["dtypes"].as_array().into_iter().flatten().filter_map(|d| d.as_str()).collect();
        if d.is_empty() { "-".to_string() } else { d.join(" ") }
    };
    let kernels = rows(&t["runtime"]["kernels"]);
    println!("runtime kernels ({}; selective builds link only a program's own):", kernels.len());
    for k in &kernels {
        let twin = if k["library"] == "optimized" && k["portable_twin"] == true { " (+ portable twin)" } else { "" };
        println!("  {:<52} {:<9}{twin:<18} {}", k["op"].as_str().unwrap_or(""), k["library"].as_str().unwrap_or(""), dtypes(k));
    }
    let targets = rows(&t["importer"]["targets"]);
    println!("\n.pt2 importer: {} mapped targets", targets.len());
    for op in &targets {
        println!("  {}", op.as_str().unwrap_or(""));
    }
    let out_calls = rows(&t["importer"]["out_variant_calls"]);
    if !out_calls.is_empty() {
        println!("  and {} out-variant calls (`op(…, out=buf)`, imported as the functional op writing buf)", out_calls.len());
    }
    let not_mapped = rows(&t["importer"]["not_mapped"]);
    if !not_mapped.is_empty() {
        println!("  not mapped ({}):", not_mapped.len());
        for r in &not_mapped {
            println!("    {:<48} {}", r["op"].as_str().unwrap_or(""), r["reason"].as_str().unwrap_or(""));
        }
    }
    let x = &t["delegates"]["xnnpack"];
    println!("\nXNNPACK delegate ({}): rbuild's export lowers", x["backend_id"].as_str().unwrap_or(""));
    for r in rows(&x["export"]) {
        println!("  {:<48} {:<28} {}", r["op"].as_str().unwrap_or(""), r["node"].as_str().unwrap_or(""), dtypes(&r));
    }
    println!("  ({})", x["export_note"].as_str().unwrap_or(""));
    println!("  runtime (programs ExecuTorch's XNNPACK partitioner wrote) runs these nodes:");
    for r in rows(&x["runtime_nodes"]) {
        println!("  {:<48} {}", r["node"].as_str().unwrap_or(""), dtypes(&r));
    }
    let g = &t["delegates"]["gpu"];
    println!("\nGPU delegate ({}): the payload expresses", g["backend_id"].as_str().unwrap_or(""));
    for r in rows(&g["export"]) {
        println!("  {:<48} {}", r["op"].as_str().unwrap_or(""), dtypes(&r));
    }
    let e = &t["delegates"]["ethos-u"];
    println!("\nEthos-U delegate ({}): the NPU takes", e["backend_id"].as_str().unwrap_or(""));
    for r in rows(&e["export"]) {
        println!("  {:<48} {:<28} {}", r["op"].as_str().unwrap_or(""), r["tflite"].as_str().unwrap_or(""), dtypes(&r));
    }
}
