//! Which ops of a float method XNNPACK takes. Every op [`crate::lower::parse`] accepts goes to
//! the delegate; runs of such ops, contiguous in the graph's (topological) order, form one
//! delegate each, so every run is convex and one delegate call replaces it.

use rbuild_export::graph::Graph;

use crate::lower;

pub use rbuild_export::delegation::{OpPlacement, Partition, Partitioning, Placement};

/// Every export-IR op [`lower::parse`] has a lowering for (it may still refuse a particular
/// node, giving the reason), with the XNNPACK node it becomes: the partitioner's row of
/// `rbuild ops`. Activations and weights are float32; `LinearMode` adds qdint8 activations with
/// qcint8 / qcint4 / qbint4 weights for the linear layers. The test below checks the list
/// against `parse` itself.
pub const LOWERED_OPS: &[(&str, &str)] = &[
    ("aten::convolution", "Conv2d / DepthwiseConv2d"),
    ("aten::add.Tensor", "Add"),
    ("aten::add.Scalar", "Add"),
    ("aten::sub.Tensor", "Subtract"),
    ("aten::sub.Scalar", "Subtract"),
    ("aten::mul.Tensor", "Multiply"),
    ("aten::mul.Scalar", "Multiply"),
    ("aten::div.Tensor", "Divide"),
    ("aten::div.Scalar", "Divide"),
    ("aten::hardtanh", "Clamp"),
    ("aten::relu", "Clamp"),
    ("aten::clamp", "Clamp"),
    ("aten::hardswish", "Hardswish"),
    ("aten::sigmoid", "Sigmoid"),
    ("aten::mean.dim", "GlobalAvgPooling2d"),
    ("aten::linear", "FullyConnected"),
    ("aten::addmm", "FullyConnected"),
    ("aten::mm", "FullyConnected"),
    ("aten::view_copy", "StaticReshape"),
    ("aten::permute_copy", "StaticTranspose"),
    ("aten::clone", "Copy"),
    ("aten::alias_copy", "Copy"),
    ("aten::_to_copy", "Copy"),
    ("dim_order_ops::_clone_dim_order", "Copy"),
    ("dim_order_ops::_to_dim_order_copy", "Copy"),
];

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

#[cfg(test)]
mod tests {
    use rbuild_export::delegation::probe_lowered_ops;

    /// `LOWERED_OPS` is exactly the set of export-IR ops `parse` has an arm for.
    #[test]
    fn lowered_ops_list_matches_parse() {
        let found = probe_lowered_ops(|g, n| crate::lower::parse(g, n).map(|_| ()), |e| e.ends_with("has no XNNPACK lowering"));
        let listed: Vec<String> = super::LOWERED_OPS.iter().map(|(op, _)| op.to_string()).collect();
        assert_eq!(found, { let mut l = listed; l.sort(); l });
    }
}
