//! Which ops of a float method XNNPACK takes. Every op [`crate::lower::parse`] accepts goes to
//! the delegate; runs of such ops, contiguous in the graph's (topological) order, form one
//! delegate each, so every run is convex and one delegate call replaces it.

use rbuild_export::graph::Graph;

use crate::lower;

pub use rbuild_export::delegation::{OpPlacement, Partition, Partitioning, Placement};

pub fn partition(g: &Graph) -> Partitioning {
    let mut parts = Partitioning::default();
    let mut open: Option<usize> = None;
    for (i, n) in g.nodes.iter().enumerate() {
        let name = n.outputs.first().map(|&o| g.values[o].name.clone()).unwrap_or_default();
        let placement = match lower::parse(g, n) {
            Ok(_) => {
                let k = parts.join(&mut open, i);
                Placement::Delegated(k)
            }
            Err(reason) => {
                open = None;
                Placement::Cpu(reason)
            }
        };
        parts.ops.push(OpPlacement { node: i, op: n.op.clone(), name, placement });
    }
    parts
}
