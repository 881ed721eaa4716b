//! `rbuild export --pt2 model.pt2 --out model.pte [--max-dim SYMBOL_OR_INPUT=N …]`: a
//! `torch.export.save` archive lowered to the export IR, then the normal passes, memory plan
//! and emission (`--quant int8`: static int8, calibrated with `--calibration`). Errors name
//! the archive.

use std::path::Path;
use std::time::Instant;

use rbuild_pt2::{lower, LowerOptions, Pt2Archive};

use super::export::{finish, finish_int8, ExportArgs};
use crate::error::{bail, CliError, CliResult};

pub fn export_pt2(archive_path: &Path, a: &ExportArgs) -> CliResult {
    if a.out.is_none() {
        bail!("--out is required");
    }
    let int8 = match a.quant.as_str() {
        "fp32" => false,
        "8da8w" | "8da4w" if a.backend == "xnnpack" => false,
        "int8" => true,
        q => bail!("--pt2 --quant {q}: imported programs export as fp32, int8 (static, calibrated with --calibration), or with --backend xnnpack 8da8w / 8da4w"),
    };
    if !int8 && (a.calibration.is_some() || a.reference_only || a.sensitivity.is_some() || !a.keep_float.is_empty()) {
        bail!("--calibration, --reference-only, --sensitivity and --keep-float need --quant int8");
    }
    let options = LowerOptions { max_dims: parse_max_dims(&a.max_dims)? };
    let t0 = Instant::now();
    // Reader errors name the archive and the member already.
    let archive = Pt2Archive::open(archive_path).map_err(|e| CliError(e.to_string()))?;
    let model = archive.default_model().map_err(|e| CliError(e.to_string()))?;
    let t_load = t0.elapsed();
    let lowered = lower(&model, &options).map_err(|e| CliError(format!("{}: {e}", archive_path.display())))?;
    let t_build = t0.elapsed();

    let report = &lowered.report;
    println!("imported {} ({} nodes)", archive_path.display(), report.ops.values().sum::<usize>());
    for input in &report.inputs {
        println!("  input {input}");
    }
    println!(
        "  {} constants ({} shared with another name){}",
        report.constants,
        report.shared_constants,
        if report.state.is_empty() { String::new() } else { format!("; mutable state: {}", report.state.join(", ")) }
    );
    println!("  archive operators:");
    for (op, n) in &report.ops {
        println!("    {op:<55} x{n}");
    }
    let label = archive_path.display().to_string();
    if int8 {
        return finish_int8(&label, lowered.graph, a, t0);
    }
    finish(&label, lowered.graph, a, t0, t_load, t_build)
}

/// `SYMBOL_OR_INPUT=N` pairs.
pub(super) fn parse_max_dims(items: &[String]) -> CliResult<std::collections::BTreeMap<String, usize>> {
    items
        .iter()
        .map(|item| {
            let parsed = item.split_once('=').and_then(|(k, v)| Some((k.trim(), v.trim().parse::<usize>().ok()?)));
            match parsed {
                Some((k, n)) if !k.is_empty() && n > 0 => Ok((k.to_string(), n)),
                _ => Err(CliError(format!("--max-dim {item}: expected SYMBOL_OR_INPUT=N with N > 0"))),
            }
        })
        .collect()
}
