//! `rbuild inspect MODEL.pt2 [--json]`: a `torch.export.save` archive's programs — user
//! inputs with their dynamic dims and bounds, outputs, parameters/buffers/constants, state
//! updates, the graph's nodes by target, and every target the import would reject
//! (`unmapped: …`, and the ones not imported by design with the reason) before a build starts.

use std::collections::BTreeMap;
use std::path::Path;

use rbuild_pt2::{Dim, ExportedModel, Pt2Archive, TensorView, UserTensor};
use serde_json::{json, Value as Json};

use crate::error::{CliError, CliResult};

/// Whether `path` is a `.pt2` archive: by extension, else by the zip magic (a `.pte` starts
/// with a flatbuffer root offset, never `PK\x03\x04`).
pub fn is_pt2(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("pt2")) {
        return true;
    }
    let mut magic = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic)).is_ok()
        && magic == *b"PK\x03\x04"
}

pub fn inspect_pt2(path: &Path, as_json: bool, backend: Option<&str>, max_dims: &[String]) -> CliResult {
    // Reader errors already name the archive and the member.
    let archive = Pt2Archive::open(path).map_err(|e| CliError(e.to_string()))?;
    let mut report = describe(&archive).map_err(|e| CliError(e.to_string()))?;
    if let Some(backend) = backend {
        let model = archive.default_model().map_err(|e| CliError(e.to_string()))?;
        let options = rbuild_pt2::LowerOptions { max_dims: super::export_pt2::parse_max_dims(max_dims)? };
        let lowered = rbuild_pt2::lower(&model, &options).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
        let placement = super::placement::placement(lowered.graph, backend).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
        report["placement"] = placement;
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    } else {
        print_text(path, &report);
        if report.get("placement").is_some() {
            super::placement::print(&report["placement"]);
        }
    }
    Ok(())
}

pub fn describe(archive: &Pt2Archive) -> rbuild_pt2::Result<Json> {
    let mut models = Vec::new();
    for name in archive.model_names() {
        models.push(describe_model(&archive.model(name)?));
    }
    Ok(json!({
        "format": "pt2",
        "root": archive.root().trim_end_matches('/'),
        "archive_version": archive.archive_version(),
        "models": models,
    }))
}

fn dim_json(dim: &Dim) -> Json {
    match dim {
        Dim::Static(n) => json!(n),
        Dim::Dynamic { symbol, min, max, hint } => json!({"symbol": symbol, "min": min, "max": max, "hint": hint}),
        Dim::Derived { expr, hint } => json!({"expr": expr, "hint": hint}),
    }
}

fn tensor_json(t: &UserTensor) -> Json {
    json!({"name": t.name, "dtype": t.dtype.name(), "dims": t.dims.iter().map(dim_json).collect::<Vec<_>>()})
}

/// Count, element bytes, dtypes and distinct storages of a group of stored tensors.
fn stored_json<'v>(views: impl Iterator<Item = &'v TensorView<'v>>) -> Json {
    let mut count = 0;
    let mut bytes = 0usize;
    let mut dtypes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut storages: BTreeMap<&str, usize> = BTreeMap::new();
    for view in views {
        count += 1;
        bytes += view.nbytes();
        *dtypes.entry(view.dtype.name()).or_default() += 1;
        storages.insert(&view.storage_member, view.storage.len());
    }
    json!({
        "count": count,
        "bytes": bytes,
        "dtypes": dtypes,
        "storages": storages.len(),
        "storage_bytes": storages.values().sum::<usize>(),
    })
}

fn describe_model(model: &ExportedModel<'_>) -> Json {
    let program = &model.program;
    let mut targets: BTreeMap<String, usize> = BTreeMap::new();
    for node in &model.graph().nodes {
        *targets.entry(node.op_name()).or_default() += 1;
    }
    let buffers: Vec<_> = model.buffers().collect();
    // What an import would reject before it starts: targets without a mapping, and those
    // mapped to nothing by design (with the reason).
    let (unmapped, excluded) = rbuild_pt2::unmapped_targets(model);
    json!({
        "name": model.name,
        "schema_version": format!("{}.{}", program.schema_version.major, program.schema_version.minor),
        "opset_version": program.opset_version,
        "ir": program.verifiers,
        "torch_version": program.torch_version,
        "inputs": model.inputs.iter().map(tensor_json).collect::<Vec<_>>(),
        "outputs": model.outputs.iter().map(tensor_json).collect::<Vec<_>>(),
        "range_constraints": program.range_constraints.iter()
            .map(|(s, r)| (s.clone(), json!({"min": r.min_val, "max": r.max_val})))
            .collect::<serde_json::Map<_, _>>(),
        "parameters": stored_json(model.parameters().map(|p| p.1)),
        "buffers": {
            "persistent": stored_json(buffers.iter().filter(|b| b.1).map(|b| b.2)),
            "non_persistent": stored_json(buffers.iter().filter(|b| !b.1).map(|b| b.2)),
        },
        "constants": stored_json(model.constants().map(|c| c.1)),
        "buffer_mutations": model.buffer_mutations.iter()
            .map(|m| json!({"output": m.output, "buffer": m.buffer})).collect::<Vec<_>>(),
        "user_input_mutations": model.user_input_mutations.iter()
            .map(|m| json!({"output": m.output, "user_input": m.user_input})).collect::<Vec<_>>(),
        "in_place_buffer_writes": model.in_place_buffer_writes().iter()
            .map(|w| json!({"buffer": w.buffer, "op": w.op, "node": w.node})).collect::<Vec<_>>(),
        "nodes": model.graph().nodes.len(),
        "targets": targets.iter().map(|(op, n)| json!({"op": op, "calls": n, "mapped": rbuild_pt2::is_mapped(op)})).collect::<Vec<_>>(),
        "unmapped": unmapped.iter().map(|(op, n)| json!({"op": op, "calls": n})).collect::<Vec<_>>(),
        "not_imported": excluded.iter().map(|(op, why)| json!({"op": op, "reason": why})).collect::<Vec<_>>(),
    })
}

/// `12`, `s27<2..=64>`, `s88<2..>` (no upper bound), or a derived size's expression.
fn dim_text(dim: &Json) -> String {
    if let Some(n) = dim.as_u64() {
        return n.to_string();
    }
    match dim["symbol"].as_str() {
        Some(symbol) => {
            let min = dim["min"].as_i64().map_or(String::new(), |m| m.to_string());
            let max = dim["max"].as_i64().map_or(String::new(), |m| format!("={m}"));
            format!("{symbol}<{min}..{max}>")
        }
        None => dim["expr"].as_str().unwrap_or("?").to_string(),
    }
}

fn stored_text(label: &str, s: &Json) {
    if s["count"].as_u64() == Some(0) {
        return;
    }
    let dtypes: Vec<String> = s["dtypes"].as_object().into_iter().flatten().map(|(d, n)| format!("{d} x{n}")).collect();
    println!(
        "  {label}: {} tensors, {} bytes ({}; {} storages, {} bytes)",
        s["count"],
        s["bytes"],
        dtypes.join(", "),
        s["storages"],
        s["storage_bytes"]
    );
}

fn print_text(path: &Path, r: &Json) {
    println!("{}: torch.export archive ({})", path.display(), r["root"].as_str().unwrap_or(""));
    for m in r["models"].as_array().into_iter().flatten() {
        let opsets: Vec<String> =
            m["opset_version"].as_object().into_iter().flatten().map(|(k, v)| format!("{k} {v}")).collect();
        let ir: Vec<&str> = m["ir"].as_array().into_iter().flatten().filter_map(Json::as_str).collect();
        println!(
            "program {}: schema {}, opset {}, IR {}, torch {}",
            m["name"].as_str().unwrap_or(""),
            m["schema_version"].as_str().unwrap_or(""),
            opsets.join(", "),
            ir.join(", "),
            m["torch_version"].as_str().unwrap_or("?")
        );
        for (kind, key) in [("input", "inputs"), ("output", "outputs")] {
            for (i, t) in m[key].as_array().into_iter().flatten().enumerate() {
                let dims: Vec<String> = t["dims"].as_array().into_iter().flatten().map(dim_text).collect();
                println!(
                    "  {kind} {i} {}: {} [{}]",
                    t["name"].as_str().unwrap_or(""),
                    t["dtype"].as_str().unwrap_or(""),
                    dims.join(", ")
                );
            }
        }
        let symbols: Vec<String> = m["range_constraints"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(s, r)| dim_text(&json!({"symbol": s, "min": r["min"], "max": r["max"]})))
            .collect();
        if !symbols.is_empty() {
            println!("  symbols: {}", symbols.join(", "));
        }
        stored_text("parameters", &m["parameters"]);
        stored_text("buffers", &m["buffers"]["persistent"]);
        stored_text("non-persistent buffers", &m["buffers"]["non_persistent"]);
        stored_text("tensor constants", &m["constants"]);
        for w in m["buffer_mutations"].as_array().into_iter().flatten() {
            println!("  buffer mutation: {} <- {}", w["buffer"].as_str().unwrap_or(""), w["output"].as_str().unwrap_or(""));
        }
        for w in m["user_input_mutations"].as_array().into_iter().flatten() {
            println!("  input mutation: {} <- {}", w["user_input"].as_str().unwrap_or(""), w["output"].as_str().unwrap_or(""));
        }
        for w in m["in_place_buffer_writes"].as_array().into_iter().flatten() {
            println!("  in-place buffer write: {} by {}", w["buffer"].as_str().unwrap_or(""), w["op"].as_str().unwrap_or(""));
        }
        println!("  {} nodes", m["nodes"]);
        for op in m["targets"].as_array().into_iter().flatten() {
            let mark = if op["mapped"].as_bool() == Some(false) { "  (unmapped)" } else { "" };
            println!("  op {:<50} x{}{mark}", op["op"].as_str().unwrap_or(""), op["calls"]);
        }
        let unmapped: Vec<String> = m["unmapped"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|op| format!("{} (x{})", op["op"].as_str().unwrap_or(""), op["calls"]))
            .collect();
        if unmapped.is_empty() {
            println!("  unmapped: none (every target has an rbuild mapping)");
        } else {
            println!("  unmapped: {}", unmapped.join(", "));
        }
        for op in m["not_imported"].as_array().into_iter().flatten() {
            println!("  not imported: {}: {}", op["op"].as_str().unwrap_or(""), op["reason"].as_str().unwrap_or(""));
        }
    }
}
