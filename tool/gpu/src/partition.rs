//! Which ops of a method the GPU takes. Every op the payload can express ([`crate::lower::parse`]
//! accepts it) goes to the GPU; runs of such ops, contiguous in the graph's (topological)
//! order, form one subgraph each, so every subgraph is convex and a single delegate call
//! replaces it. Run-time scalars (`sym_size`, `_local_scalar_dense`) stay on the CPU and do not
//! break a run: the payload reads sizes from its inputs' dims and positions from the tensors
//! they came from.

use rbuild_export::graph::{Graph, ValueId};

use crate::lower::{self, Parsed};

pub use rbuild_export::delegation::{OpPlacement, Partition, Partitioning, Placement};

/// Every export-IR op [`lower::parse`] has a GPU kernel for (it may still refuse a particular
/// node, giving the reason): the partitioner's row of `rbuild ops`. Tensors are float32 in the
/// graph; the payload computes in the recipe's `dtype` (float32 or float16 weights and
/// activations). Run-time scalars (`sym_size`, `_local_scalar_dense`) stay on the CPU without
/// breaking a subgraph. The test below checks the list against `parse` itself.
pub const LOWERED_OPS: &[&str] = &[
    "aten::_local_scalar_dense",
    "aten::_softmax",
    "aten::abs",
    "aten::add.Tensor",
    "aten::alias_copy",
    "aten::bmm",
    "aten::cat",
    "aten::clone",
    "aten::convolution",
    "aten::cos",
    "aten::div.Tensor",
    "aten::embedding",
    "aten::exp",
    "aten::gelu",
    "aten::linear",
    "aten::log",
    "aten::maximum",
    "aten::minimum",
    "aten::mm",
    "aten::mul.Tensor",
    "aten::native_layer_norm",
    "aten::neg",
    "aten::permute_copy",
    "aten::pow.Tensor_Tensor",
    "aten::reciprocal",
    "aten::relu",
    "aten::rsqrt",
    "aten::select_copy.int",
    "aten::sigmoid",
    "aten::silu",
    "aten::sin",
    "aten::slice_copy.Tensor",
    "aten::sqrt",
    "aten::squeeze_copy.dims",
    "aten::sub.Tensor",
    "aten::sym_size.int",
    "aten::tanh",
    "aten::unsqueeze_copy",
    "aten::view_copy",
    "llama::custom_sdpa",
    "llama::sdpa_with_kv_cache",
    "rbuild::add_positions",
    "rbuild::cross_attention",
    "rbuild::rms_norm",
    "rbuild::rope",
    "rbuild::silu_mul",
];

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

#[cfg(test)]
mod tests {
    use rbuild_export::delegation::probe_lowered_ops;

    /// `LOWERED_OPS` is exactly the set of export-IR ops `parse` has a GPU kernel for.
    #[test]
    fn lowered_ops_list_matches_parse() {
        let found = probe_lowered_ops(|g, n| crate::lower::parse(g, n).map(|_| ()), |e| e == "no GPU kernel for this operator" || e.contains("has no GPU kernel"));
        let mut listed: Vec<String> = super::LOWERED_OPS.iter().map(|op| op.to_string()).collect();
        listed.sort();
        assert_eq!(found, listed);
    }
}
