//! Which ops of a method the GPU takes. Every op the payload can express ([`crate::lower::parse`]
//! accepts it) goes to the GPU; runs of such ops, contiguous in the graph's (topological)
//! order, form one subgraph each, so every subgraph is convex and a single delegate call
//! replaces it. Run-time scalars (`sym_size`, `_local_scalar_dense`) stay on the CPU and do not
//! break a run: the payload reads sizes from its inputs' dims and positions from the tensors
//! they came from.

use rbuild_export::graph::{Graph, ValueId};

use crate::lower::{self, Parsed};

pub use rbuild_export::delegation::{OpPlacement, Partition, Partitioning, Placement};

pub fn partition(g: &Graph) -> Partitioning {
    let producers = g.producers();
    let mut parts = Partitioning::default();
    let mut open: Option<usize> = None;
    let mut members: Vec<Option<usize>> = vec![None; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        let name = n.outputs.first().map(|&o| g.values[o].name.clone()).unwrap_or_default();
        let parsed = lower::parse(g, n);
        let placement = match parsed {
            Ok(Parsed::Scalar) => {
                // A scalar computed from a value of the open subgraph would need that value on
                // the CPU before the delegate call: close the subgraph first.
                let reads_open = n.tensor_inputs().any(|v| producer_in(&producers, &members, v, open));
                if reads_open {
                    open = None;
                }
                Placement::Scalar
            }
            Ok(_) => {
                let k = parts.join(&mut open, i);
                members[i] = Some(k);
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

fn producer_in(producers: &[Option<usize>], members: &[Option<usize>], v: ValueId, part: Option<usize>) -> bool {
    part.is_some() && producers[v].and_then(|p| members[p]) == part
}
