//! Dead-code elimination: nodes none of whose outputs are read (by a node or as a graph output)
//! are removed. Every op in the IR is functional except the in-place writes into mutable state
//! (`aten::copy_`), which are kept with everything they read.
//!
//! Values stay in `Graph::values` (ids remain stable for callers); planning and emission only
//! see the values nodes and graph inputs/outputs reference, so unreferenced ones cost nothing.

use crate::graph::Graph;

/// Removes dead nodes; returns how many were removed.
pub fn eliminate_dead_code(g: &mut Graph) -> usize {
    let mut uses = g.use_counts();
    let mut keep = vec![true; g.nodes.len()];
    // Nodes are in topological order, so one backward sweep sees every use of a node's outputs
    // before the node itself and catches whole dead chains.
    for (i, n) in g.nodes.iter().enumerate().rev() {
        if !crate::ops::writes_in_place(&n.op) && n.outputs.iter().all(|&o| uses[o] == 0) {
            keep[i] = false;
            for v in n.tensor_inputs() {
                uses[v] = uses[v].saturating_sub(1);
            }
        }
    }
    let removed = keep.iter().filter(|k| !**k).count();
    let mut k = keep.into_iter();
    g.nodes.retain(|_| k.next().unwrap_or(true));
    removed
}
