//! The XNNPACK delegation of an image model's float program (`backend "xnnpack"`, `rbuild
//! export --backend xnnpack`): the functional graph's supported ops replaced by
//! `XnnpackBackend` delegate calls (ExecuTorch's payload format, weights in the program's named
//! data), the recipe's fallback policy, and the report printed.

use rbuild_export::Graph;
use rbuild_recipe::Fallback;
use rbuild_xnnpack::{LinearMode, MethodReport, Placement, XnnpackOptions};

/// The `--quant` spellings the XNNPACK delegation takes: `fp32`, `8da8w` (dynamically quantized
/// linear layers, int8 weights) and `8da4w` (int4 weights in blocks of `group` input features;
/// `--group-size 0`: one scale per output channel). `None` for anything else.
pub fn options_for(quant: &str, group: usize) -> Option<XnnpackOptions> {
    let linear = match quant {
        "fp32" => LinearMode::Fp32,
        "8da8w" => LinearMode::DynamicInt8,
        "8da4w" => LinearMode::DynamicInt4 { group },
        _ => return None,
    };
    Some(XnnpackOptions { linear })
}

/// Delegates `g`'s `forward` (functional, after the graph passes); with `Fallback::Deny` an op
/// left on the CPU is an error naming it.
pub fn delegate(g: &mut Graph, fallback: Fallback, options: &XnnpackOptions) -> Result<MethodReport, String> {
    let report = rbuild_xnnpack::delegate_method("forward", g, options)?;
    let cpu: Vec<String> = report
        .cpu_ops()
        .into_iter()
        .map(|o| format!("  {} `{}`: {}", o.op, o.name, if let Placement::Cpu(r) = &o.placement { r.as_str() } else { "" }))
        .collect();
    if fallback == Fallback::Deny && !cpu.is_empty() {
        return Err(format!(
            "backend xnnpack with `fallback \"deny\"`: {} op(s) would run on the CPU:\n{}\n(`fallback \"allow\"` runs them on the CPU kernels)",
            cpu.len(),
            cpu.join("\n")
        ));
    }
    eprintln!("xnnpack delegation: {}", report.summary());
    Ok(report)
}
