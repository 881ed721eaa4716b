//! Constant folding: a node that reads only constants is evaluated once, at export time, with
//! rbuild's kernels; its outputs become constants and the node goes away. Nodes are visited in
//! order, so chains of such nodes (permute then view of a weight) fold completely.
//!
//! Skipped: ops without an out variant or kernel, random ones (`rand`: each run draws anew),
//! outputs with symbolic sizes or over
//! [`MAX_FOLDED_BYTES`] (folding would bloat the program), and nodes producing a graph output
//! (an output must stay a planned, computed value).

use std::collections::HashMap;
use std::sync::OnceLock;

use rbuild_runtime::KernelRegistry;

use crate::error::{ExportError, Result};
use crate::eval;
use crate::graph::{ConstData, Graph, Node, Origin};
use crate::ops;

/// Largest tensor a fold may create.
pub const MAX_FOLDED_BYTES: usize = 64 << 20;

fn kernels() -> &'static KernelRegistry {
    static K: OnceLock<KernelRegistry> = OnceLock::new();
    K.get_or_init(rbuild_kernels::registry)
}

/// Folds every foldable node; returns how many were folded.
pub fn fold_constants(g: &mut Graph) -> Result<usize> {
    let mut keep = vec![true; g.nodes.len()];
    for i in 0..g.nodes.len() {
        if !foldable(g, &g.nodes[i]) {
            continue;
        }
        let outs = eval::eval_node(g, &g.nodes[i], &HashMap::new())?;
        for (&o, bytes) in g.nodes[i].outputs.iter().zip(outs) {
            if bytes.len() != g.max_bytes(o) {
                return Err(ExportError::Invalid(format!(
                    "folding {}: {} bytes computed for {:?} {}",
                    g.nodes[i].op,
                    bytes.len(),
                    g.meta(o).shape,
                    g.meta(o).dtype
                )));
            }
            g.values[o].origin = Origin::Const(ConstData::owned(bytes));
        }
        keep[i] = false;
    }
    let folded = keep.iter().filter(|k| !**k).count();
    let mut k = keep.into_iter();
    g.nodes.retain(|_| k.next().unwrap_or(true));
    Ok(folded)
}

fn foldable(g: &Graph, n: &Node) -> bool {
    let runnable = ops::out_schema(&n.op).is_some_and(|s| kernels().lookup(&s.key()).is_some());
    runnable
        && !ops::draws_random(&n.op)
        && n.tensor_inputs().all(|v| g.constant(v).is_some())
        && n.outputs.iter().all(|&o| {
            !g.outputs.contains(&o) && g.meta(o).sizes().is_some() && g.max_bytes(o) <= MAX_FOLDED_BYTES
        })
}
