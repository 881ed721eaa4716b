//! The Ethos-U partitioner: which ops of a fused int8 graph the NPU takes, grouped into
//! subgraphs; each subgraph as an [`Int8Graph`] (NHWC, TFLite semantics) for Vela; and the
//! rewrite that calls the lowered subgraphs as `EthosUBackend` delegates.
//!
//! It reads the graph after `fuse_int8` (still functional) together with the fusion's matches,
//! so the NPU and the CPU kernels lower one and the same pattern: the CPU lowering of a
//! subgraph is exactly the fused ops it replaces (what `rbuild verify` runs in QEMU).
//!
//! Placement of each op:
//! - `npu`: a fused int8 op or an int8 reshape with an Ethos-U (TFLite) form;
//! - `cpu`: anything else, with the reason (the recipe's `fallback "deny"` rejects these);
//! - `boundary`: the float↔int8 conversions at the program's inputs and outputs and the
//!   NCHW↔NHWC transposes around a delegate; as in ExecuTorch's Arm flow they run on the CPU.

use std::collections::{BTreeMap, HashMap, HashSet};

use rbuild_export::graph::{Arg, Delegate, Graph, Node, Origin, TensorMeta, ValueId, DELEGATE_CALL};
use rbuild_export::passes::fuse_int8::{Matched, MatchedOp};
use rbuild_export::passes::quantize_static::{ActQ, QMAX, QMIN};
use rbuild_runtime::ScalarType;

use crate::graph::{Activation, Int8Graph, OpKind, Padding, TensorId};

/// Where one op runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// On the NPU, in subgraph n.
    Npu(usize),
    /// On the CPU, because of the reason given.
    Cpu(String),
    /// On the CPU at a delegate's or the program's edge (conversions, layout).
    Boundary(String),
}

/// One op of the graph and its placement (the delegation report's row).
#[derive(Clone, Debug, PartialEq)]
pub struct OpPlacement {
    pub node: usize,
    /// The operator (`rbuild::qconv2d`, `aten::view_copy`, …).
    pub op: String,
    /// The value it writes (the float op's name for fused ops).
    pub name: String,
    pub target: Target,
}

/// A subgraph for the NPU: node indices in execution order and its int8 inputs and outputs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partition {
    pub nodes: Vec<usize>,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partitioning {
    pub ops: Vec<OpPlacement>,
    pub partitions: Vec<Partition>,
}

impl Partitioning {
    /// Model ops left on the CPU (not boundary conversions).
    pub fn cpu_ops(&self) -> Vec<&OpPlacement> {
        self.ops.iter().filter(|o| matches!(o.target, Target::Cpu(_))).collect()
    }
    pub fn npu_ops(&self) -> usize {
        self.ops.iter().filter(|o| matches!(o.target, Target::Npu(_))).count()
    }
}

/// Every op the partitioner can place on the NPU (each may still stay on the CPU for a reason
/// the report gives, e.g. a stride Ethos-U lacks), with the TFLite operator it becomes: the
/// Ethos-U row of `rbuild ops`. All are int8 (per-tensor activations, per-channel weights);
/// the fused ops come from `fuse_int8`. `rbuild::qmul` and `rbuild::qlookup` (hardswish,
/// hardsigmoid tables) have no NPU form yet.
pub const LOWERED_OPS: &[(&str, &str)] = &[
    ("rbuild::qconv2d", "CONV_2D / DEPTHWISE_CONV_2D"),
    ("rbuild::qlinear", "FULLY_CONNECTED"),
    ("rbuild::qadd", "ADD"),
    ("rbuild::qmean_hw", "MEAN"),
    ("aten::view_copy", "RESHAPE"),
];

const QUANTIZE: &str = "quantized_decomposed::quantize_per_tensor";
const DEQUANTIZE: &str = "quantized_decomposed::dequantize_per_tensor";

/// The int8 parameters of every value a match reads or writes (reshapes keep their input's).
fn int8_params(g: &Graph, matches: &BTreeMap<ValueId, Matched>) -> HashMap<ValueId, ActQ> {
    let mut p = HashMap::new();
    for m in matches.values() {
        p.insert(m.output, m.out);
        match &m.op {
            MatchedOp::Conv { x, xq, .. } | MatchedOp::Linear { x, xq, .. } | MatchedOp::MeanHw { x, xq } => {
                p.insert(*x, *xq);
            }
            MatchedOp::Add { a, aq, b, bq } | MatchedOp::Mul { a, aq, b, bq } => {
                p.insert(*a, *aq);
                p.insert(*b, *bq);
            }
            MatchedOp::Lookup { .. } => {}
        }
    }
    for n in &g.nodes {
        if n.op == "aten::view_copy" {
            if let (Some(Arg::Tensor(x)), Some(&y)) = (n.args.first(), n.outputs.first()) {
                if let Some(q) = p.get(x).copied() {
                    p.insert(y, q);
                }
            }
        }
    }
    p
}

fn sizes(g: &Graph, v: ValueId) -> Vec<usize> {
    g.meta(v).sizes().unwrap_or_default()
}

/// NCHW sizes → the NHWC shape the NPU sees (other ranks unchanged).
fn nhwc(s: &[usize]) -> Vec<usize> {
    match s {
        [n, c, h, w] => vec![*n, *h, *w, *c],
        _ => s.to_vec(),
    }
}

/// Whether a value's NCHW bytes already are its NHWC bytes (no transpose at a delegate edge).
fn layout_free(s: &[usize]) -> bool {
    match s {
        [_, c, h, w] => *c == 1 || h * w == 1,
        _ => true,
    }
}

/// The TFLite fused activation whose clamp equals the match's int8 output range.
fn fused_activation(m: &Matched) -> Result<Activation, String> {
    let q = |x: f32| m.out.quantize(x).clamp(QMIN, QMAX);
    match m.range {
        (QMIN, QMAX) => Ok(Activation::None),
        (lo, QMAX) if lo == q(0.0) => Ok(Activation::Relu),
        (lo, hi) if lo == q(0.0) && hi == q(6.0) => Ok(Activation::Relu6),
        (lo, hi) => Err(format!("its output clamp [{lo}, {hi}] is no TFLite fused activation (none, ReLU, ReLU6)")),
    }
}

/// Why a fused op has no Ethos-U form, if it has none.
fn npu_form(g: &Graph, m: &Matched) -> Result<(), String> {
    fused_activation(m)?;
    match &m.op {
        MatchedOp::Conv { x, weight_sizes, stride, dilation, groups, .. } => {
            let xs = sizes(g, *x);
            if xs.len() != 4 || weight_sizes.len() != 4 {
                return Err("only 2-D convolutions on NCHW tensors are lowered".into());
            }
            let depthwise = *groups > 1 && *groups as usize == xs[1] && weight_sizes[1] == 1;
            if *groups != 1 && !depthwise {
                return Err(format!("grouped convolution ({groups} groups) has no TFLite form (only groups 1 and depthwise)"));
            }
            if stride.iter().any(|&s| !(1..=3).contains(&s)) {
                return Err(format!("stride {stride:?}: Ethos-U takes strides 1 to 3"));
            }
            if dilation.iter().any(|&d| !(1..=2).contains(&d)) {
                return Err(format!("dilation {dilation:?}: Ethos-U takes dilations 1 and 2"));
            }
            Ok(())
        }
        MatchedOp::Linear { .. } | MatchedOp::Add { .. } | MatchedOp::MeanHw { .. } => Ok(()),
        MatchedOp::Mul { .. } => Err("int8 mul is not lowered to Ethos-U yet".into()),
        MatchedOp::Lookup { .. } => Err("int8 lookup tables (hardswish, hardsigmoid) are not lowered to Ethos-U yet".into()),
    }
}

/// Where node `i` runs, before grouping.
fn classify(g: &Graph, n: &Node, matches: &BTreeMap<ValueId, Matched>, params: &HashMap<ValueId, ActQ>) -> Target {
    let npu = Target::Npu(usize::MAX);
    if let Some(m) = n.outputs.first().and_then(|o| matches.get(o)).filter(|_| n.op.starts_with("rbuild::q")) {
        return match npu_form(g, m) {
            Ok(()) => npu,
            Err(why) => Target::Cpu(why),
        };
    }
    match n.op.as_str() {
        "aten::view_copy" => {
            let (x, y) = match (n.args.first(), n.outputs.first()) {
                (Some(Arg::Tensor(x)), Some(&y)) => (*x, y),
                _ => return Target::Cpu("malformed view_copy".into()),
            };
            if g.meta(x).dtype != ScalarType::Char || !params.contains_key(&x) {
                return Target::Cpu("reshape of a tensor that is not a quantized int8 activation".into());
            }
            if !layout_free(&sizes(g, x)) || !layout_free(&sizes(g, y)) {
                return Target::Cpu("reshape that mixes channels with height/width (NCHW and NHWC orders differ)".into());
            }
            npu
        }
        QUANTIZE if matches!(n.args.first(), Some(Arg::Tensor(x)) if g.inputs.contains(x)) => {
            Target::Boundary("float → int8 conversion of a program input".into())
        }
        DEQUANTIZE if n.outputs.iter().all(|o| g.outputs.contains(o)) => Target::Boundary("int8 → float conversion of a program output".into()),
        QUANTIZE | DEQUANTIZE => Target::Cpu("a float op the int8 fusion left unfused surrounds this conversion".into()),
        op => Target::Cpu(format!("no Ethos-U lowering for {op}")),
    }
}

/// The int8 values an NPU-placed node reads (activations; constants live in the subgraph).
fn npu_inputs(n: &Node, matches: &BTreeMap<ValueId, Matched>) -> Vec<ValueId> {
    match n.outputs.first().and_then(|o| matches.get(o)) {
        Some(m) => match &m.op {
            MatchedOp::Conv { x, .. } | MatchedOp::Linear { x, .. } | MatchedOp::MeanHw { x, .. } | MatchedOp::Lookup { x, .. } => vec![*x],
            MatchedOp::Add { a, b, .. } | MatchedOp::Mul { a, b, .. } => vec![*a, *b],
        },
        None => n.tensor_inputs().collect(),
    }
}

/// Places every op and groups the NPU ops into subgraphs: runs in execution order, a run ending
/// where a CPU op reads something the run produced (so collapsing a run never makes a cycle).
pub fn partition(g: &Graph, matches: &BTreeMap<ValueId, Matched>) -> Partitioning {
    let params = int8_params(g, matches);
    let mut ops = Vec::new();
    let mut partitions: Vec<Partition> = Vec::new();
    let mut current: Option<Partition> = None;
    let mut produced: HashSet<ValueId> = HashSet::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let mut target = classify(g, n, matches, &params);
        let name = n.outputs.first().and_then(|o| matches.get(o)).map(|m| m.name.clone()).unwrap_or_else(|| {
            n.outputs.first().map(|&o| g.values[o].name.clone()).unwrap_or_default()
        });
        if matches!(target, Target::Npu(_)) {
            let p = current.get_or_insert_with(Partition::default);
            p.nodes.push(i);
            produced.extend(n.outputs.iter().copied());
            target = Target::Npu(partitions.len());
        } else if n.tensor_inputs().any(|v| produced.contains(&v)) {
            if let Some(p) = current.take() {
                partitions.push(p);
            }
            produced.clear();
        }
        ops.push(OpPlacement { node: i, op: n.op.clone(), name, target });
    }
    if let Some(p) = current.take() {
        partitions.push(p);
    }
    // Subgraph numbers follow the runs: recount from the node lists.
    for (k, p) in partitions.iter().enumerate() {
        for &i in &p.nodes {
            ops[i].target = Target::Npu(k);
        }
    }
    for p in &mut partitions {
        // What the rest of the graph reads: a subgraph's outputs are the values it writes there.
        let inside: HashSet<usize> = p.nodes.iter().copied().collect();
        let read_outside: HashSet<ValueId> = g
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| !inside.contains(i))
            .flat_map(|(_, n)| n.tensor_inputs())
            .chain(g.outputs.iter().copied())
            .collect();
        let mut made = HashSet::new();
        for &i in &p.nodes {
            for v in npu_inputs(&g.nodes[i], matches) {
                if !made.contains(&v) && !p.inputs.contains(&v) && !matches!(g.values[v].origin, Origin::Const(_)) {
                    p.inputs.push(v);
                }
            }
            made.extend(g.nodes[i].outputs.iter().copied());
        }
        p.outputs = p.nodes.iter().flat_map(|&i| g.nodes[i].outputs.clone()).filter(|v| read_outside.contains(v)).collect();
    }
    Partitioning { ops, partitions }
}

fn dims(s: &[usize]) -> Vec<i32> {
    s.iter().map(|&d| d as i32).collect()
}

/// TFLite SAME padding (before, after) for one dimension.
fn same_pads(input: usize, kernel: usize, stride: usize, dilation: usize, output: usize) -> (usize, usize) {
    let effective = (kernel - 1) * dilation + 1;
    let total = ((output - 1) * stride + effective).saturating_sub(input);
    (total / 2, total - total / 2)
}

/// int32 bias in units of `x_scale · w_scale[c]` (as the CPU lowering rounds it) and its scales.
fn bias_i32(bias: Option<&[f32]>, xq: ActQ, w_scales: &[f32]) -> (Vec<i32>, Vec<f32>) {
    let mut b = vec![0i32; w_scales.len()];
    if let Some(bias) = bias {
        for (c, v) in b.iter_mut().enumerate() {
            let acc = xq.scale as f64 * w_scales[c] as f64;
            *v = (bias[c] as f64 / acc).round().clamp(i32::MIN as f64, i32::MAX as f64) as i32;
        }
    }
    (b, w_scales.iter().map(|s| s * xq.scale).collect())
}

/// Subgraph `p` as an NHWC int8 network in TFLite's terms, for Vela.
pub fn subgraph(g: &Graph, matches: &BTreeMap<ValueId, Matched>, p: &Partition) -> Result<Int8Graph, String> {
    let params = int8_params(g, matches);
    let mut ig = Int8Graph::default();
    let mut ids: HashMap<ValueId, TensorId> = HashMap::new();
    let mut tensor = |ig: &mut Int8Graph, v: ValueId| -> Result<TensorId, String> {
        if let Some(&t) = ids.get(&v) {
            return Ok(t);
        }
        let q = params.get(&v).ok_or_else(|| format!("`{}` has no int8 parameters", g.values[v].name))?;
        let t = ig.activation(&g.values[v].name, &dims(&nhwc(&sizes(g, v))), q.scale, q.zero_point);
        ids.insert(v, t);
        Ok(t)
    };
    for &v in &p.inputs {
        let t = tensor(&mut ig, v)?;
        ig.inputs.push(t);
    }
    for &i in &p.nodes {
        let n = &g.nodes[i];
        let Some(m) = n.outputs.first().and_then(|o| matches.get(o)) else {
            // An int8 reshape.
            let (Some(Arg::Tensor(x)), Some(&y)) = (n.args.first(), n.outputs.first()) else {
                return Err(format!("node {i} ({}) cannot be lowered", n.op));
            };
            let (tx, ty) = (tensor(&mut ig, *x)?, tensor(&mut ig, y)?);
            ig.op(OpKind::Reshape, &[tx], &[ty]);
            continue;
        };
        let act = fused_activation(m)?;
        let name = &m.name;
        let out = tensor(&mut ig, m.output)?;
        match &m.op {
            MatchedOp::Conv { x, xq, weight, weight_sizes, weight_scales, bias, stride, padding, dilation, groups } => {
                let xs = sizes(g, *x);
                let ys = sizes(g, m.output);
                let (o, ipg, kh, kw) = (weight_sizes[0], weight_sizes[1], weight_sizes[2], weight_sizes[3]);
                let depthwise = *groups > 1;
                // [O, I, KH, KW] → [O, KH, KW, I]; depthwise [O, 1, KH, KW] → [1, KH, KW, O].
                let mut w = vec![0i8; weight.len()];
                for oc in 0..o {
                    for ic in 0..ipg {
                        for y in 0..kh {
                            for xx in 0..kw {
                                let src = weight[((oc * ipg + ic) * kh + y) * kw + xx];
                                let dst = if depthwise { (y * kw + xx) * o + oc } else { ((oc * kh + y) * kw + xx) * ipg + ic };
                                w[dst] = src;
                            }
                        }
                    }
                }
                let (wshape, axis) = if depthwise { (vec![1, kh, kw, o], 3) } else { (vec![o, kh, kw, ipg], 0) };
                let wt = ig.weight(&format!("{name}.weight"), &dims(&wshape), &w, weight_scales.clone(), axis);
                let (b, bs) = bias_i32(bias.as_deref(), *xq, weight_scales);
                let bt = ig.bias(&format!("{name}.bias"), &b, bs);
                let [s, d, pd] = [stride, dilation, padding].map(|v| [v[0] as usize, v[1] as usize]);
                let same = (0..2).all(|k| {
                    let (inp, outp) = (xs[2 + k], ys[2 + k]);
                    outp == inp.div_ceil(s[k]) && same_pads(inp, [kh, kw][k], s[k], d[k], outp) == (pd[k], pd[k])
                });
                let mut xin = tensor(&mut ig, *x)?;
                let pad_mode = if pd == [0, 0] {
                    Padding::Valid
                } else if same {
                    Padding::Same
                } else {
                    // Explicit padding (PyTorch pads both sides alike; TFLite's SAME does not
                    // at stride 2 on even sizes): PAD with the zero point, then VALID.
                    let padded = ig.activation(
                        &format!("{name}.padded"),
                        &dims(&[xs[0], xs[2] + 2 * pd[0], xs[3] + 2 * pd[1], xs[1]]),
                        xq.scale,
                        xq.zero_point,
                    );
                    let pads = [0, 0, pd[0] as i32, pd[0] as i32, pd[1] as i32, pd[1] as i32, 0, 0];
                    let pt = ig.int32_const(&format!("{name}.paddings"), &pads);
                    ig.tensors[pt].shape = vec![4, 2];
                    ig.op(OpKind::Pad, &[xin, pt], &[padded]);
                    xin = padded;
                    Padding::Valid
                };
                let (stride, dilation) = ([s[0] as i32, s[1] as i32], [d[0] as i32, d[1] as i32]);
                let kind = if depthwise {
                    OpKind::DepthwiseConv2d { stride, dilation, padding: pad_mode, depth_multiplier: (o / xs[1]) as i32, act }
                } else {
                    OpKind::Conv2d { stride, dilation, padding: pad_mode, act }
                };
                ig.op(kind, &[xin, wt, bt], &[out]);
            }
            MatchedOp::Linear { x, xq, weight, n, k, weight_scales, bias } => {
                let wt = ig.weight(&format!("{name}.weight"), &[*n as i32, *k as i32], weight, weight_scales.clone(), 0);
                let (b, bs) = bias_i32(bias.as_deref(), *xq, weight_scales);
                let bt = ig.bias(&format!("{name}.bias"), &b, bs);
                let xt = tensor(&mut ig, *x)?;
                ig.op(OpKind::FullyConnected { act }, &[xt, wt, bt], &[out]);
            }
            MatchedOp::Add { a, b, .. } => {
                let (ta, tb) = (tensor(&mut ig, *a)?, tensor(&mut ig, *b)?);
                ig.op(OpKind::Add { act }, &[ta, tb], &[out]);
            }
            MatchedOp::MeanHw { x, .. } => {
                let xt = tensor(&mut ig, *x)?;
                let axes = ig.int32_const(&format!("{name}.axes"), &[1, 2]);
                ig.op(OpKind::Mean { keep_dims: true }, &[xt, axes], &[out]);
                if act != Activation::None {
                    return Err(format!("{name}: MEAN takes no fused activation"));
                }
            }
            MatchedOp::Mul { .. } | MatchedOp::Lookup { .. } => return Err(format!("{name}: not lowered to Ethos-U")),
        }
    }
    for &v in &p.outputs {
        let t = tensor(&mut ig, v)?;
        ig.outputs.push(t);
    }
    ig.validate().map_err(|e| e.to_string())?;
    Ok(ig)
}

/// Replaces each subgraph by a call of its delegate (`blobs[k]` for partition k, backend `id`),
/// transposing 4-D inputs NCHW → NHWC before the call and outputs back after it; the values
/// downstream keep their ids. Dead constants are dropped.
pub fn delegate(g: &mut Graph, parts: &Partitioning, blobs: Vec<Vec<u8>>, id: &str) -> Result<(), String> {
    if blobs.len() != parts.partitions.len() {
        return Err(format!("{} delegate blobs for {} subgraphs", blobs.len(), parts.partitions.len()));
    }
    let mut in_part: HashSet<usize> = HashSet::new();
    let mut last: HashMap<usize, usize> = HashMap::new();
    for (k, p) in parts.partitions.iter().enumerate() {
        in_part.extend(p.nodes.iter().copied());
        if let Some(&l) = p.nodes.last() {
            last.insert(l, k);
        }
    }
    let first_index = g.delegates.len();
    for blob in blobs {
        g.delegates.push(Delegate { id: id.to_string(), processed: blob, compile_specs: vec![] });
    }
    let old = std::mem::take(&mut g.nodes);
    for (i, n) in old.into_iter().enumerate() {
        if !in_part.contains(&i) {
            g.nodes.push(n);
            continue;
        }
        let Some(&k) = last.get(&i) else { continue };
        let p = &parts.partitions[k];
        let mut args = vec![Arg::Int((first_index + k) as i64)];
        for &v in &p.inputs {
            let s = sizes(g, v);
            if layout_free(&s) {
                args.push(Arg::Tensor(v));
                continue;
            }
            let t = g.add_value(TensorMeta::fixed(ScalarType::Char, &nhwc(&s)), Origin::Computed, format!("{}.nhwc", g.values[v].name));
            g.nodes.push(Node { op: "aten::permute_copy".into(), args: vec![Arg::Tensor(v), Arg::Ints(vec![0, 2, 3, 1])], outputs: vec![t] });
            args.push(Arg::Tensor(t));
        }
        let mut outs = Vec::new();
        let mut after = Vec::new();
        for &v in &p.outputs {
            let s = sizes(g, v);
            if layout_free(&s) {
                outs.push(v);
                continue;
            }
            let t = g.add_value(TensorMeta::fixed(ScalarType::Char, &nhwc(&s)), Origin::Computed, format!("{}.nhwc", g.values[v].name));
            outs.push(t);
            after.push(Node { op: "aten::permute_copy".into(), args: vec![Arg::Tensor(t), Arg::Ints(vec![0, 3, 1, 2])], outputs: vec![v] });
        }
        g.nodes.push(Node { op: DELEGATE_CALL.into(), args, outputs: outs });
        g.nodes.extend(after);
    }
    rbuild_export::passes::dce::eliminate_dead_code(g);
    Ok(())
}
