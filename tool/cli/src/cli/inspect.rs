//! `rbuild inspect PROGRAM.pte [--json]` (a `.pt2` archive goes to `inspect_pt2`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use rbuild_runtime::format::schema::{ExecutionPlan, InstructionArguments, KernelTypes};
use rbuild_runtime::format::PteFile;
use rbuild_runtime::ScalarType;
use serde_json::{json, Value as Json};

use crate::error::{CliResult, InFile};
use crate::io::program::read_program;

#[derive(clap::Args)]
pub struct InspectArgs {
    pub program: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// A .pt2 archive: also tell where each operator would run for this backend (cpu, xnnpack,
    /// gpu), through the passes and partitioner a build runs.
    #[arg(long, value_name = "BACKEND")]
    pub backend: Option<String>,
    /// A .pt2 archive: the same, for the backend of this recipe (`mobilenet-pt2-cpu`).
    #[arg(long, value_name = "RECIPE", conflicts_with = "backend")]
    pub recipe: Option<String>,
    /// A .pt2 archive with --backend/--recipe: the largest size of a dynamic dim
    /// (`SYMBOL_OR_INPUT=N`), as `rbuild export --pt2` takes it. Repeatable.
    #[arg(long = "max-dim", value_name = "SYMBOL_OR_INPUT=N")]
    pub max_dims: Vec<String>,
}

pub fn inspect(a: InspectArgs) -> CliResult {
    let backend = match (&a.backend, &a.recipe) {
        (Some(b), _) => Some(b.clone()),
        (None, Some(r)) => {
            let project = crate::project::Project::find()?;
            Some(crate::build::load(&project, r, &[])?.recipe.backend.kind.as_str().to_string())
        }
        (None, None) => None,
    };
    if super::inspect_pt2::is_pt2(&a.program) {
        return super::inspect_pt2::inspect_pt2(&a.program, a.json, backend.as_deref(), &a.max_dims);
    }
    if backend.is_some() {
        crate::error::bail!("--backend / --recipe apply to a .pt2 archive; a .pte program's placement is fixed (its delegates are listed below without them)");
    }
    let bytes = read_program(&a.program)?;
    let file = PteFile::parse(bytes.as_slice()).in_file(&a.program)?;
    let mut report = describe(&file).in_file(&a.program)?;
    add_placement(bytes.as_slice(), &mut report);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    } else {
        print_text(&a.program, &report);
    }
    Ok(())
}

fn io_desc(plan: &ExecutionPlan<'_>, ids: &Option<Vec<i32>>) -> Vec<Json> {
    let values = plan.values.as_deref().unwrap_or(&[]);
    ids.as_deref()
        .unwrap_or(&[])
        .iter()
        .map(|&i| match usize::try_from(i).ok().and_then(|i| values.get(i)).and_then(|v| v.val.as_ref()) {
            Some(KernelTypes::Tensor(t)) => json!({
                "value": i,
                "kind": "tensor",
                "dtype": ScalarType::from_code(t.scalar_type as i64).map(|d| d.name()).unwrap_or("unknown"),
                "shape": t.sizes.clone().unwrap_or_default(),
                "dynamism": match t.shape_dynamism { 0 => "static", 1 => "dynamic_bound", _ => "dynamic_unbound" },
                "planned": t.allocation_info.is_some(),
            }),
            Some(KernelTypes::Int(x)) => json!({"value": i, "kind": "int", "int": x.int_val}),
            Some(KernelTypes::Double(x)) => json!({"value": i, "kind": "double", "double": x.double_val}),
            Some(KernelTypes::Bool(x)) => json!({"value": i, "kind": "bool", "bool": x.bool_val}),
            Some(_) => json!({"value": i, "kind": "other"}),
            None => json!({"value": i, "kind": "none"}),
        })
        .collect()
}

pub fn describe(file: &PteFile<'_>) -> Result<Json, rbuild_runtime::format::FormatError> {
    let mut methods = Vec::new();
    for plan in file.program.execution_plan.as_deref().unwrap_or(&[]) {
        let ops = plan.operators.as_deref().unwrap_or(&[]);
        let mut calls: BTreeMap<String, usize> = BTreeMap::new();
        let mut instructions = 0;
        let mut delegate_calls = 0;
        for chain in plan.chains.as_deref().unwrap_or(&[]) {
            for ins in chain.instructions.as_deref().unwrap_or(&[]) {
                instructions += 1;
                match &ins.instr_args {
                    Some(InstructionArguments::KernelCall(k)) => {
                        let name = usize::try_from(k.op_index).ok().and_then(|i| ops.get(i)).map(|o| o.key());
                        *calls.entry(name.unwrap_or_else(|| format!("<bad op {}>", k.op_index))).or_default() += 1;
                    }
                    Some(InstructionArguments::DelegateCall(_)) => delegate_calls += 1,
                    _ => {}
                }
            }
        }
        let mut delegates = Vec::new();
        for d in plan.delegates.as_deref().unwrap_or(&[]) {
            let data = file.delegate_data(d).ok();
            let size = data.map(|b| b.len());
            // XNNPACK payloads: the node kinds (with counts), or why the payload does not decode.
            let xnnpack = (d.id == Some(rbuild_runtime::backends::xnnpack::XNNPACK_BACKEND_ID)).then(|| {
                match data.map(rbuild_kernels::xnnpack::summarize) {
                    Some(Ok(s)) => json!({"nodes": s.nodes.iter().map(|(k, n)| json!({"kind": k, "count": n})).collect::<Vec<_>>(), "macs": s.macs}),
                    Some(Err(e)) => json!({"error": e}),
                    None => json!({"error": "payload not readable"}),
                }
            });
            delegates.push(json!({
                "id": d.id.unwrap_or(""),
                "bytes": size,
                "xnnpack": xnnpack,
                "location": d.processed.as_ref().map(|p| if p.location == 0 { "inline" } else { "segment" }),
                "compile_specs": d.compile_specs.as_deref().unwrap_or(&[]).iter().map(|s| s.key.unwrap_or("")).collect::<Vec<_>>(),
            }));
        }
        let arenas: Vec<i64> = plan.non_const_buffer_sizes.as_deref().unwrap_or(&[]).iter().skip(1).copied().collect();
        methods.push(json!({
            "name": plan.name.unwrap_or(""),
            "inputs": io_desc(plan, &plan.inputs),
            "outputs": io_desc(plan, &plan.outputs),
            "values": plan.values.as_ref().map(|v| v.len()).unwrap_or(0),
            "instructions": instructions,
            "operators": calls.iter().map(|(k, v)| json!({"op": k, "calls": v})).collect::<Vec<_>>(),
            "delegate_calls": delegate_calls,
            "delegates": delegates,
            "planned_buffers": arenas,
            "planned_bytes": arenas.iter().fold(0i64, |a, &s| a.saturating_add(s)),
        }));
    }
    let constant_bytes = file.constant_segment()?.map(|(b, _)| b.len()).unwrap_or(0)
        + file.program.constant_buffer.as_deref().unwrap_or(&[]).iter().map(|b| b.storage.map_or(0, |s| s.len())).sum::<usize>();
    let ident = String::from_utf8_lossy(&file.data[4..8]).into_owned();
    Ok(json!({
        "identifier": ident,
        "file_bytes": file.data.len(),
        "extended_header": file.header.map(|h| json!({
            "length": h.length,
            "program_size": h.program_size,
            "segment_base_offset": h.segment_base_offset,
            "segment_data_size": h.segment_data_size,
        })),
        "segments": file.segments().iter().map(|s| json!({"offset": s.offset, "size": s.size})).collect::<Vec<_>>(),
        "constant_bytes": constant_bytes,
        "named_data": file.program.named_data.as_deref().unwrap_or(&[]).iter().map(|n| n.key.unwrap_or("")).collect::<Vec<_>>(),
        "methods": methods,
    }))
}

/// Where each method would run in rbuild's runtime: each operator's kernel (optimized or
/// portable, or none), and whether the method loads with every kernel and CPU delegate rbuild
/// has (a delegate's init checks its payload, so an unsupported XNNPACK node shows here).
fn add_placement(bytes: &[u8], report: &mut Json) {
    let catalog: BTreeMap<&str, &str> = rbuild_kernels::catalog().into_iter().collect();
    let program = rbuild_runtime::Program::load(bytes).ok();
    let kernels = rbuild_kernels::registry();
    let backends = crate::verify::reference_backends();
    for m in report["methods"].as_array_mut().into_iter().flatten() {
        for op in m["operators"].as_array_mut().into_iter().flatten() {
            let runs = match op["op"].as_str().and_then(|k| catalog.get(k)) {
                Some(path) if path.contains("::optimized::") => "cpu (optimized kernel)",
                Some(_) => "cpu (portable kernel)",
                None => "no kernel in rbuild",
            };
            op["runs_on"] = json!(runs);
        }
        let name = m["name"].as_str().unwrap_or("").to_string();
        let loads = match program.as_ref().map(|p| p.load_method(&name, &kernels, &backends)) {
            Some(Ok(_)) => json!("yes"),
            Some(Err(e)) => json!(e.to_string()),
            None => json!("the program does not load"),
        };
        m["loads_in_rbuild"] = loads;
    }
}

fn print_text(path: &std::path::Path, r: &Json) {
    println!("{}: {} ({} bytes)", path.display(), r["identifier"].as_str().unwrap_or(""), r["file_bytes"]);
    match r["extended_header"].as_object() {
        Some(h) => println!(
            "  header eh00: program {} bytes, segments at {} ({} bytes)",
            h["program_size"], h["segment_base_offset"], h["segment_data_size"]
        ),
        None => println!("  no extended header"),
    }
    println!("  segments: {}, constants: {} bytes", r["segments"].as_array().map_or(0, |s| s.len()), r["constant_bytes"]);
    for m in r["methods"].as_array().into_iter().flatten() {
        println!("method {}: {} values, {} instructions", m["name"].as_str().unwrap_or(""), m["values"], m["instructions"]);
        for (kind, key) in [("input", "inputs"), ("output", "outputs")] {
            for (i, io) in m[key].as_array().into_iter().flatten().enumerate() {
                match io["kind"].as_str() {
                    Some("tensor") => println!(
                        "  {kind} {i}: {} {} {}{}",
                        io["dtype"].as_str().unwrap_or(""),
                        io["shape"],
                        io["dynamism"].as_str().unwrap_or(""),
                        if io["planned"].as_bool() == Some(true) { ", planned" } else { "" }
                    ),
                    _ => println!("  {kind} {i}: {}", io),
                }
            }
        }
        for op in m["operators"].as_array().into_iter().flatten() {
            println!("  op {:<50} x{:<4} {}", op["op"].as_str().unwrap_or(""), op["calls"], op["runs_on"].as_str().unwrap_or(""));
        }
        for d in m["delegates"].as_array().into_iter().flatten() {
            println!("  delegate {} ({} bytes, {})", d["id"].as_str().unwrap_or(""), d["bytes"], d["location"].as_str().unwrap_or(""));
            if let Some(nodes) = d["xnnpack"]["nodes"].as_array() {
                let total: u64 = nodes.iter().filter_map(|n| n["count"].as_u64()).sum();
                let list: Vec<String> = nodes.iter().map(|n| format!("{} x{}", n["kind"].as_str().unwrap_or(""), n["count"])).collect();
                println!("    XNNPACK graph: {total} nodes ({:.1} M multiply-accumulates): {}", d["xnnpack"]["macs"].as_f64().unwrap_or(0.0) / 1e6, list.join(", "));
            }
            if let Some(e) = d["xnnpack"]["error"].as_str() {
                println!("    XNNPACK graph unreadable: {e}");
            }
        }
        println!("  planned memory: {} bytes in buffers {}", m["planned_bytes"], m["planned_buffers"]);
        match m["loads_in_rbuild"].as_str() {
            Some("yes") => println!("  runs in rbuild: yes (every operator has a kernel, every delegate initializes)"),
            Some(why) => println!("  runs in rbuild: no: {why}"),
            None => {}
        }
    }
}
