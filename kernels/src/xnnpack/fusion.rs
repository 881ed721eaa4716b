//! The fused pointwise → depthwise (→ pointwise) step of f32 inverted-residual blocks: which
//! nodes form a group ([`fusion_groups`]) and the steps merged into one
//! [`Op::ExpandDwF32`] ([`fuse_expand_depthwise`]).

use alloc::vec;
use alloc::vec::Vec;

use rbuild_runtime::backends::xnnpack::graph::ConvParams;
use rbuild_runtime::backends::xnnpack::{NodeKind, NodeParams, XnnDatatype, XnnGraph};

use super::compile::usize_of;
use super::plan::{Op, Step};
use super::rewrite::Node;
/// Which nodes run as one [`Op::ExpandDwF32`] step: at each node index, 0 or the length of
/// the group starting there: an f32 convolution (batch 1; pointwise in inverted-residual
/// blocks, any shape for a network's first layer) whose output only a multiplier-1 depthwise
/// convolution reads (2), and the pointwise convolution that alone reads the depthwise output
/// (3). The expanded tensor (MobileNetV2's 112×112×96 is 4.8 MB) is then produced and consumed
/// a band of rows at a time instead of going through memory. Same kernels, same arithmetic per
/// element: same bits. The one place this is decided: the buffer allocation and
/// [`fuse_expand_depthwise`] both follow it.
pub fn fusion_groups(graph: &XnnGraph, nodes: &[Node]) -> Vec<usize> {
    let mut groups = vec![0; nodes.len()];
    // `RBUILD_XNNPACK_NO_FUSE` set: run the steps apart (A/B timing).
    #[cfg(feature = "std")]
    if std::env::var_os("RBUILD_XNNPACK_NO_FUSE").is_some() {
        return groups;
    }
    let mut readers = vec![0usize; graph.values.len()];
    for n in nodes {
        for v in n.params.inputs() {
            readers[usize_of(v)] += 1;
        }
    }
    let f32_value = |v: u32| graph.values.get(usize_of(v)).is_some_and(|x| x.datatype == XnnDatatype::Fp32);
    // Read by one node only and not a delegate output.
    let private = |v: u32| readers[usize_of(v)] == 1 && graph.values.get(usize_of(v)).is_some_and(|x| x.flags & 2 == 0);
    let conv = |n: &Node, kind: NodeKind| match (&n.params, n.kind) {
        (NodeParams::Conv(c), k) if k == kind && !n.dynamic && f32_value(c.input) && f32_value(c.output) => Some(*c),
        _ => None,
    };
    let pointwise = |c: &ConvParams| {
        (c.kernel_height, c.kernel_width, c.subsampling_height, c.subsampling_width) == (1, 1, 1, 1)
            && (c.padding_top, c.padding_right, c.padding_bottom, c.padding_left) == (0, 0, 0, 0)
    };
    let batch1 = |v: u32| graph.values.get(usize_of(v)).is_some_and(|x| x.dims.first() == Some(&1));
    let mut i = 0;
    while i + 1 < nodes.len() {
        let (Some(e), Some(d)) = (conv(&nodes[i], NodeKind::Conv2d), conv(&nodes[i + 1], NodeKind::DepthwiseConv2d)) else {
            i += 1;
            continue;
        };
        if !(batch1(e.input) && d.input == e.output && private(e.output) && d.group_output_channels == 1 && d.output != e.input) {
            i += 1;
            continue;
        }
        let project = nodes.get(i + 2).and_then(|n| conv(n, NodeKind::Conv2d));
        let len = match project {
            Some(p) if pointwise(&p) && p.input == d.output && private(d.output) && p.output != e.input => 3,
            _ => 2,
        };
        groups[i] = len;
        i += len;
    }
    groups
}

/// Runs each group [`fusion_groups`] found as one [`Op::ExpandDwF32`] step (steps are the
/// nodes, one for one), its former intermediate buffers serving as the step's scratch. A group
/// whose operators were not built as the f32 NHWC kernels stays apart.
pub fn fuse_expand_depthwise(steps: Vec<Step>, groups: &[usize]) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len());
    let mut it = steps.into_iter().enumerate().peekable();
    while let Some((i, a)) = it.next() {
        let n = groups.get(i).copied().unwrap_or(0);
        let fusable = |s: Option<&(usize, Step)>, dw: bool| match s.map(|(_, s)| &s.op) {
            Some(Op::DepthwiseF32 { .. }) => dw,
            Some(Op::ConvF32 { op, .. }) => !dw && op.is_pointwise(),
            _ => false,
        };
        if n < 2 || !matches!(a.op, Op::ConvF32 { .. }) || !fusable(it.peek(), true) {
            out.push(a);
            continue;
        }
        let Some((_, b)) = it.next() else { break };
        let c = if n == 3 && fusable(it.peek(), false) { it.next().map(|(_, c)| c) } else { None };
        let (expand, e_min, e_max, dw, min, max) = match (a.op, b.op) {
            (Op::ConvF32 { op: expand, min: e_min, max: e_max }, Op::DepthwiseF32 { op: dw, min, max }) => (expand, e_min, e_max, dw, min, max),
            // Not reached (both kinds were checked above); kept apart if it were.
            (a_op, b_op) => {
                out.push(Step { op: a_op, ..a });
                out.push(Step { op: b_op, ..b });
                out.extend(c);
                continue;
            }
        };
        let mut scratch = vec![a.output.0];
        let (project, output, kind) = match c {
            Some(Step { op: Op::ConvF32 { op, min, max }, output, kind, .. }) => {
                scratch.push(b.output.0);
                (Some((op, min, max)), output, kind)
            }
            _ => (None, b.output, b.kind),
        };
        out.push(Step { kind, op: Op::ExpandDwF32 { expand, e_min, e_max, dw, min, max, project }, inputs: a.inputs, output, scratch, round: None });
    }
    out
}

