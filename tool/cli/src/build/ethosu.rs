//! The `ethos-u` backend's export: the fused int8 graph is partitioned for the NPU
//! (`rbuild-ethosu`), each subgraph is compiled by Vela into an `EthosUBackend` delegate, and
//! three files come out of the `export` step:
//!
//! - `model.pte`: the program with its delegates (what the firmware runs on the NPU);
//! - `model-cpu-lowering.pte`: the same program with each delegate replaced by its CPU lowering
//!   (the fused int8 ops it stands for): the host reference, and what `rbuild verify` boots in
//!   QEMU, which has no NPU;
//! - `delegation.json`: every op, where it runs and why, and Vela's summary per subgraph.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rbuild_ethosu::partition::{self, Partitioning, Target};
use rbuild_ethosu::vela::{Vela, VelaOptions};
use rbuild_export::graph::ValueId;
use rbuild_export::passes::fuse_int8::Matched;
use rbuild_export::passes::to_out;
use rbuild_export::{emit, plan, Graph};
use rbuild_planner::cache::write_atomic;
use rbuild_recipe::{Fallback, NpuOptions};

use crate::project::Project;

/// Locates Vela (the project's `.venv`, `$RBUILD_VELA`, PATH) with its `--version` answered
/// by the project's probe cache: Vela is Python, and starting it costs more than a whole
/// no-op rebuild.
pub fn locate_vela(project: &Project) -> Result<Vela, rbuild_ethosu::vela::VelaError> {
    let probe = |path: &Path| {
        project
            .probes()
            .run(path, &["--version".to_string()])
            .map(|c| (c.success, c.stdout, c.stderr))
            .map_err(std::io::Error::other)
    };
    Vela::locate_probed(&[&project.root], &probe)
}

/// The backend id ExecuTorch's Arm flow gives Ethos-U delegates.
pub const BACKEND_ID: &str = rbuild_runtime::backends::ethosu::ETHOSU_BACKEND_ID;

/// What the NPU export needs from the recipe and the machine.
#[derive(Clone, Debug)]
pub struct NpuExport {
    pub vela: Vela,
    pub options: VelaOptions,
    pub fallback: Fallback,
}

impl NpuExport {
    /// Locates Vela (the project's `.venv`, `$RBUILD_VELA`, PATH) and resolves the recipe's
    /// NPU settings into Vela options.
    pub fn resolve(project: &Project, npu: &NpuOptions, fallback: Fallback) -> Result<NpuExport, String> {
        let vela = locate_vela(project).map_err(|e| format!("backend ethos-u: {e}"))?;
        let mut options = VelaOptions::for_accelerator(npu.accelerator.0).map_err(|e| format!("backend ethos-u: {e}"))?;
        if let Some(s) = &npu.system_config {
            options.system_config = s.clone();
        }
        if let Some(m) = &npu.memory_mode {
            options.memory_mode = m.clone();
        }
        Ok(NpuExport { vela, options, fallback })
    }

    /// What keys the export step: a different Vela or setting compiles differently.
    pub fn key(&self) -> String {
        format!("vela {} {:?} fallback {:?}", self.vela.version, self.options, self.fallback)
    }
}

/// The files the NPU export writes next to `model.pte`.
pub fn outputs(program: &Path) -> [PathBuf; 2] {
    let dir = program.parent().unwrap_or(Path::new("."));
    [dir.join("model-cpu-lowering.pte"), dir.join("delegation.json")]
}

fn emit_program(g: &Graph) -> Result<Vec<u8>, String> {
    let mem = plan::plan_memory(g);
    emit::emit(g, &mem, "forward").map_err(|e| e.to_string())
}

/// Partitions, lowers and writes `program` plus [`outputs`]; `g` is the fused functional graph.
pub fn export(mut g: Graph, matches: &BTreeMap<ValueId, Matched>, npu: &NpuExport, program: &Path) -> Result<(), String> {
    let parts = partition::partition(&g, matches);
    let cpu = parts.cpu_ops();
    if npu.fallback == Fallback::Deny && !cpu.is_empty() {
        let list: Vec<String> = cpu.iter().map(|o| format!("  {} `{}`: {}", o.op, o.name, reason(&o.target))).collect();
        return Err(format!(
            "backend ethos-u with `fallback \"deny\"`: {} op(s) would run on the CPU:\n{}\n(`fallback \"allow\"` runs them on the CPU kernels)",
            cpu.len(),
            list.join("\n")
        ));
    }
    // The CPU lowering: the same fused graph, no delegates.
    let mut cpu_graph = g.clone();
    to_out::to_out_variants(&mut cpu_graph).map_err(|e| e.to_string())?;
    let cpu_bytes = emit_program(&cpu_graph)?;

    let mut blobs = Vec::new();
    let mut summaries = Vec::new();
    for (k, p) in parts.partitions.iter().enumerate() {
        let sub = partition::subgraph(&g, matches, p).map_err(|e| format!("NPU subgraph {k}: {e}"))?;
        let lowered = rbuild_ethosu::lower::lower(&sub, &npu.vela, &npu.options).map_err(|e| format!("NPU subgraph {k}: {e}"))?;
        summaries.push(serde_json::json!({
            "subgraph": k,
            "ops": p.nodes.len(),
            "blob_bytes": lowered.blob.len(),
            "command_stream_bytes": lowered.raw.cmd_data.len(),
            "weight_bytes": lowered.raw.weight_data.len(),
            "scratch_bytes": lowered.raw.scratch_size,
            "cpu_operators": lowered.summary.cpu_operators,
            "npu_operators": lowered.summary.npu_operators,
            "npu_cycles": lowered.summary.npu_cycles,
            "total_cycles": lowered.summary.total_cycles,
            "sram_used_kib": lowered.summary.sram_used_kib,
            "offchip_used_kib": lowered.summary.offchip_used_kib,
            "inference_time_ms": lowered.summary.inference_time_ms,
            "summary": lowered.summary.fields.iter().cloned().collect::<BTreeMap<_, _>>(),
        }));
        blobs.push(lowered.blob);
    }
    partition::delegate(&mut g, &parts, blobs, BACKEND_ID)?;
    to_out::to_out_variants(&mut g).map_err(|e| e.to_string())?;
    let bytes = emit_program(&g)?;

    let report = report_json(&parts, npu, summaries);
    let [cpu_out, report_out] = outputs(program);
    write_atomic(&cpu_out, &cpu_bytes).map_err(|e| format!("{}: {e}", cpu_out.display()))?;
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    write_atomic(&report_out, text.as_bytes()).map_err(|e| format!("{}: {e}", report_out.display()))?;
    write_atomic(program, &bytes).map_err(|e| format!("{}: {e}", program.display()))
}

fn reason(t: &Target) -> &str {
    match t {
        Target::Npu(_) => "",
        Target::Cpu(r) | Target::Boundary(r) => r,
    }
}

fn report_json(parts: &Partitioning, npu: &NpuExport, subgraphs: Vec<serde_json::Value>) -> serde_json::Value {
    let ops: Vec<serde_json::Value> = parts
        .ops
        .iter()
        .map(|o| {
            let (placement, subgraph) = match &o.target {
                Target::Npu(k) => ("npu", Some(*k)),
                Target::Cpu(_) => ("cpu", None),
                Target::Boundary(_) => ("cpu-boundary", None),
            };
            let mut v = serde_json::json!({"op": o.op, "name": o.name, "placement": placement});
            if let Some(k) = subgraph {
                v["subgraph"] = k.into();
            } else {
                v["reason"] = reason(&o.target).into();
            }
            v
        })
        .collect();
    serde_json::json!({
        "backend": BACKEND_ID,
        "accelerator": npu.options.accelerator,
        "system_config": npu.options.system_config,
        "memory_mode": npu.options.memory_mode,
        "vela": {"path": npu.vela.path.display().to_string(), "version": npu.vela.version},
        "fallback": format!("{:?}", npu.fallback).to_lowercase(),
        "npu_ops": parts.npu_ops(),
        "cpu_ops": parts.cpu_ops().len(),
        "boundary_ops": parts.ops.iter().filter(|o| matches!(o.target, Target::Boundary(_))).count(),
        "subgraphs": subgraphs,
        "ops": ops,
    })
}

/// The build's delegation report, from `delegation.json` (so a cached build prints it too):
/// counts, Vela's verdict per subgraph, and every op that does not run on the NPU with the reason.
pub fn print_report(report_file: &Path) {
    let Ok(text) = std::fs::read(report_file) else { return };
    let Ok(r) = serde_json::from_slice::<serde_json::Value>(&text) else { return };
    let subgraphs = r["subgraphs"].as_array().map_or(0, |s| s.len());
    eprintln!(
        "delegation ({} on {}): {} ops on the NPU in {subgraphs} subgraph(s), {} on the CPU, {} at the program's edges ({})",
        r["backend"].as_str().unwrap_or("?"),
        r["accelerator"].as_str().unwrap_or("?"),
        r["npu_ops"],
        r["cpu_ops"],
        r["boundary_ops"],
        report_file.display()
    );
    for s in r["subgraphs"].as_array().into_iter().flatten() {
        eprintln!(
            "  subgraph {}: {} ops; Vela: CPU operators {}, NPU operators {}, {} NPU cycles, SRAM {} KiB, off-chip {} KiB",
            s["subgraph"], s["ops"], s["cpu_operators"], s["npu_operators"], s["npu_cycles"], s["sram_used_kib"], s["offchip_used_kib"]
        );
    }
    for o in r["ops"].as_array().into_iter().flatten() {
        let (op, name, why) = (o["op"].as_str().unwrap_or("?"), o["name"].as_str().unwrap_or("?"), o["reason"].as_str().unwrap_or(""));
        match o["placement"].as_str() {
            Some("cpu") => eprintln!("  cpu       {op} `{name}`: {why}"),
            Some("cpu-boundary") => eprintln!("  cpu edge  {op} `{name}`: {why}"),
            _ => {}
        }
    }
}
