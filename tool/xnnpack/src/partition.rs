//! Which ops of a float method XNNPACK takes. Every op [`crate::lower::parse`] accepts goes to
//! the delegate; runs of such ops, contiguous in the graph's (topological) order, form one
//! delegate each, so every run is convex and one delegate call replaces it.

use rbuild_export::graph::Graph;

use crate::lower;

/// Where one op runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Placement {
    /// In XNNPACK delegate n.
    Xnnpack(usize),
    /// On the CPU kernels, for the reason given.
    Cpu(String),
}

/// One row of the delegation report.
#[derive(Clone, Debug, PartialEq)]
pub struct OpPlacement {
    pub node: usize,
    pub op: String,
    /// The value the op writes (for the report).
    pub name: String,
    pub placement: Placement,
}

/// One delegated run: node indices in execution order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partition {
    pub nodes: Vec<usize>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partitioning {
    pub ops: Vec<OpPlacement>,
    pub partitions: Vec<Partition>,
}

pub fn partition(g: &Graph) -> Partitioning {
    let mut parts = Partitioning::default();
    let mut open: Option<usize> = None;
    for (i, n) in g.nodes.iter().enumerate() {
        let name = n.outputs.first().map(|&o| g.values[o].name.clone()).unwrap_or_default();
        let placement = match lower::parse(g, n) {
            Ok(_) => {
                let k = *open.get_or_insert_with(|| {
                    parts.partitions.push(Partition::default());
                    parts.partitions.len() - 1
                });
                parts.partitions[k].nodes.push(i);
                Placement::Xnnpack(k)
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
