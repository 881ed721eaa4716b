//! Conversion to out variants: every node is renamed to the `.out` schema ExecuTorch runs; its
//! outputs become that schema's keyword-only `out` arguments (memory-planned later).

use crate::error::{ExportError, Result};
use crate::graph::Graph;
use crate::ops;

pub fn to_out_variants(g: &mut Graph) -> Result<()> {
    for n in &mut g.nodes {
        if ops::returns_int(&n.op) || ops::writes_in_place(&n.op) || n.op == crate::graph::DELEGATE_CALL {
            continue;
        }
        let Some(def) = ops::op(&n.op) else {
            // Already an out variant (the pass is idempotent).
            if ops::out_schema(&n.op).is_some() {
                continue;
            }
            return Err(ExportError::UnknownOp(n.op.clone()));
        };
        let out = def.out.as_ref().ok_or_else(|| {
            ExportError::Invalid(format!("{} has no out variant: it must be decomposed before emission", n.op))
        })?;
        let outs = out.args.iter().filter(|a| a.is_out).count();
        let args = ops::out_variant_args(&n.op, &n.args);
        let outputs_ok = outs == n.outputs.len() || ops::writes_output_list(out);
        if !outputs_ok || def.functional.args.len() != n.args.len() || out.inputs().count() != args.len() {
            return Err(ExportError::Invalid(format!("{} does not line up with {}", n.op, out.key())));
        }
        n.args = args;
        n.op = out.key();
    }
    Ok(())
}
