//! Static int8 quantization in ExecuTorch's reference representation: the float ops stay, with
//! `quantized_decomposed::quantize_per_tensor` / `dequantize_per_tensor` around activations and
//! `dequantize_per_channel` on int8 weights — the graph PT2E's `convert_pt2e` produces with
//! `XNNPACKQuantizer(get_symmetric_quantization_config(is_per_channel=True))`, which ExecuTorch
//! runs with its portable + quantized kernels:
//!
//! - activations: per-tensor affine int8 [−128, 127], parameters from the calibrated min/max
//!   widened to include 0 (torch's `MinMaxObserver`, eps = f32 epsilon);
//! - weights of convolutions and linears: per output channel, symmetric int8 [−127, 127],
//!   scale = max|w| / 127 (at least 2^−12), zero point 0; biases stay float32;
//! - an activation (relu, hardtanh/relu6, clamp) directly after a convolution, linear or add is
//!   part of that op: the quantize comes after it;
//! - hardswish / hardsigmoid (as decomposed: add, clamp, [mul], div) are one quantized op: input
//!   and output quantized, float in between;
//! - `mean` over H, W shares its input's parameters (XNNPACK's adaptive_avg_pool2d annotation);
//!   `view_copy` runs on the int8 tensor and keeps its parameters;
//! - other ops stay float between a dequantize and a quantize.
//!
//! The program's inputs and outputs stay float32: the first op quantizes the input, the last
//! dequantizes the logits, as in ExecuTorch's `model.int8.pte`.

use std::collections::HashMap;

use rbuild_runtime::{Scalar, ScalarType};

use super::calibrate::Ranges;
use super::{append1, f32_bytes, f32s};
use crate::error::{ExportError, Result};
use crate::graph::{Arg, ConstData, Graph, Node, Origin, TensorMeta, ValueId};

pub const QMIN: i64 = -128;
pub const QMAX: i64 = 127;
/// Symmetric weight range (XNNPACKQuantizer's `quant_min=-127`).
pub const WQMIN: i64 = -127;
pub const WQMAX: i64 = 127;
/// Smallest weight scale (XNNPACKQuantizer's weight observer eps).
pub const WEIGHT_EPS: f32 = 1.0 / 4096.0;

/// Per-tensor affine int8 parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActQ {
    pub scale: f32,
    pub zero_point: i64,
}

impl ActQ {
    /// torch's `MinMaxObserver._calculate_qparams` for `per_tensor_affine`, int8 [−128, 127].
    pub fn from_range(min: f32, max: f32) -> ActQ {
        let lo = min.min(0.0);
        let hi = max.max(0.0);
        let scale = ((hi - lo) / (QMAX - QMIN) as f32).max(f32::EPSILON);
        let zp = QMIN - (lo / scale).round_ties_even() as i64;
        ActQ { scale, zero_point: zp.clamp(QMIN, QMAX) }
    }

    /// ExecuTorch's `quantize_per_tensor` of one value.
    pub fn quantize(&self, x: f32) -> i64 {
        let inv = 1.0f32 / self.scale;
        (self.zero_point as f32 + (x * inv).round_ties_even()) as i64
    }
}

/// Per-output-channel symmetric int8 weights: codes (same layout as `w`) and one scale per
/// channel along `axis` of `sizes`.
pub fn quantize_weight_per_channel(w: &[f32], sizes: &[usize], axis: usize) -> (Vec<i8>, Vec<f32>) {
    let channels = sizes[axis];
    let inner: usize = sizes[axis + 1..].iter().product();
    let channel_of = |i: usize| (i / inner) % channels;
    let mut amax = vec![0f32; channels];
    for (i, &x) in w.iter().enumerate() {
        let c = channel_of(i);
        amax[c] = amax[c].max(x.abs());
    }
    let scales: Vec<f32> = amax.iter().map(|&a| (a / ((WQMAX - WQMIN) as f32 / 2.0)).max(WEIGHT_EPS)).collect();
    let q = w
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let inv = 1.0f32 / scales[channel_of(i)];
            (x * inv).round_ties_even().clamp(WQMIN as f32, WQMAX as f32) as i8
        })
        .collect();
    (q, scales)
}

/// What the pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StaticQuantReport {
    /// Activations given a quantize/dequantize pair: the float value and its parameters.
    pub activations: Vec<(ValueId, ActQ)>,
    /// Weights stored as int8.
    pub weights: usize,
    /// Ops left in float with no quantized neighbours worth noting (name: reason).
    pub float_ops: Vec<String>,
    /// The output's parameters, per graph output (None: the output is not quantized).
    pub output_qparams: Vec<Option<ActQ>>,
    /// Layers kept in float32 on request (their weight names, without `.weight…`).
    pub kept_float: Vec<String>,
}

/// Whether weight `name` belongs to layer `prefix` (`features.1` holds `features.1.conv.0.weight`,
/// not `features.10.…`).
fn in_layer(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// A weight's layer name: `features.0.0.weight.bn_folded` → `features.0.0`.
pub(crate) fn layer_name(weight: &str) -> &str {
    weight.split(".weight").next().unwrap_or(weight)
}

/// The name of a convolution's or linear's weight.
fn weight_name<'g>(g: &'g Graph, n: &Node) -> Option<&'g str> {
    let (wi, _) = weight_arg(g, n)?;
    Some(&g.values[tensor_at(n, wi)?].name)
}

/// `hardswish(x) = x · clamp(x + 3, 0, 6) / 6` and `hardsigmoid(x) = clamp(x + 3, 0, 6) / 6` as
/// the decomposition pass writes them, ending at node `root` (the `div.Scalar`): their one
/// activation input and the inner nodes. Such a chain is quantized as one op (input and output
/// only) and fuses into a 256-entry lookup table.
pub(crate) fn unary_chain(nodes: &[Node], producer: &HashMap<ValueId, usize>, uses: &[usize], root: usize) -> Option<(ValueId, Vec<usize>)> {
    let n = &nodes[root];
    let scalar_is = |a: Option<&Arg>, v: f64| match a {
        Some(Arg::Scalar(Scalar::Double(d))) => *d == v,
        Some(Arg::Scalar(Scalar::Int(i))) => *i as f64 == v,
        Some(Arg::Float(d)) => *d == v,
        _ => false,
    };
    if n.op != "aten::div.Scalar" || !scalar_is(n.args.get(1), 6.0) {
        return None;
    }
    let single = |v: ValueId, op: &str| -> Option<usize> {
        let i = *producer.get(&v)?;
        (nodes[i].op == op && uses[v] == 1).then_some(i)
    };
    let tensor = |n: &Node, i: usize| match n.args.get(i) {
        Some(Arg::Tensor(v)) => Some(*v),
        _ => None,
    };
    // clamp(x + 3, 0, 6) → (x, [add, clamp]).
    let gate = |v: ValueId| -> Option<(ValueId, Vec<usize>)> {
        let c = single(v, "aten::clamp")?;
        if !scalar_is(nodes[c].args.get(1), 0.0) || !scalar_is(nodes[c].args.get(2), 6.0) {
            return None;
        }
        let a = single(tensor(&nodes[c], 0)?, "aten::add.Scalar")?;
        if !scalar_is(nodes[a].args.get(1), 3.0) || !scalar_is(nodes[a].args.get(2), 1.0) {
            return None;
        }
        Some((tensor(&nodes[a], 0)?, vec![a, c]))
    };
    let v = tensor(n, 0)?;
    if let Some(found) = gate(v) {
        return Some(found);
    }
    let m = single(v, "aten::mul.Tensor")?;
    let (p, q) = (tensor(&nodes[m], 0)?, tensor(&nodes[m], 1)?);
    for (x, g) in [(p, q), (q, p)] {
        if let Some((gx, mut inner)) = gate(g) {
            if gx == x {
                inner.push(m);
                return Some((x, inner));
            }
        }
    }
    None
}

/// Activations folded into the op before them.
fn is_activation(op: &str) -> bool {
    matches!(op, "aten::relu" | "aten::hardtanh" | "aten::clamp")
}

fn const_f32(g: &Graph, v: ValueId) -> Option<(Vec<usize>, Vec<f32>)> {
    let m = g.meta(v);
    match (&g.values[v].origin, m.dtype, m.sizes()) {
        (Origin::Const(c), ScalarType::Float, Some(s)) => Some((s, f32s(&c.bytes()))),
        _ => None,
    }
}

fn add_const(g: &mut Graph, name: String, dtype: ScalarType, sizes: &[usize], bytes: Vec<u8>) -> ValueId {
    g.add_value(TensorMeta::fixed(dtype, sizes), Origin::Const(ConstData::owned(bytes)), name)
}

fn qargs(q: ActQ) -> [Arg; 5] {
    [Arg::Float(q.scale as f64), Arg::Int(q.zero_point), Arg::Int(QMIN), Arg::Int(QMAX), Arg::ScalarType(ScalarType::Char)]
}

/// `dequantize_per_tensor(q)` (float32 out).
fn dequantize(g: &mut Graph, q: ValueId, p: ActQ) -> Result<ValueId> {
    let mut args = vec![Arg::Tensor(q)];
    args.extend(qargs(p));
    args.push(Arg::None);
    append1(g, "quantized_decomposed::dequantize_per_tensor", args)
}

fn quantize(g: &mut Graph, x: ValueId, p: ActQ) -> Result<ValueId> {
    let mut args = vec![Arg::Tensor(x)];
    args.extend(qargs(p));
    append1(g, "quantized_decomposed::quantize_per_tensor", args)
}

/// The rewrite state: for each original float value, its int8 twin and parameters, and the
/// value consumers read instead of it (its dequantized copy).
struct Rewrite<'a> {
    ranges: &'a Ranges,
    quantized: HashMap<ValueId, (ValueId, ActQ)>,
    replace: HashMap<ValueId, ValueId>,
    report: StaticQuantReport,
}

impl Rewrite<'_> {
    fn params_of(&self, g: &Graph, v: ValueId) -> Result<ActQ> {
        let (lo, hi) = self
            .ranges
            .get(v)
            .ok_or_else(|| ExportError::Invalid(format!("int8 quantization: no calibrated range for '{}'", g.values[v].name)))?;
        Ok(ActQ::from_range(lo, hi))
    }

    /// Appends quantize + dequantize of `v` (the original value) computed as `current`.
    fn quantize_value(&mut self, g: &mut Graph, v: ValueId, current: ValueId, p: ActQ) -> Result<()> {
        let q = quantize(g, current, p)?;
        let dq = dequantize(g, q, p)?;
        self.quantized.insert(v, (q, p));
        self.replace.insert(v, dq);
        self.report.activations.push((v, p));
        Ok(())
    }

    /// Makes sure activation input `v` of a quantized op is quantized (inserting the pair
    /// before the op when its producer left it float).
    fn require_quantized(&mut self, g: &mut Graph, v: ValueId) -> Result<()> {
        if self.quantized.contains_key(&v) || g.constant(v).is_some() || g.meta(v).dtype != ScalarType::Float {
            return Ok(());
        }
        let p = self.params_of(g, v)?;
        let current = self.arg_value(v);
        self.quantize_value(g, v, current, p)
    }

    fn arg_value(&self, v: ValueId) -> ValueId {
        self.replace.get(&v).copied().unwrap_or(v)
    }

    fn remap(&self, n: &Node) -> Node {
        let mut n = n.clone();
        for a in &mut n.args {
            a.map_values(|v| self.arg_value(v));
        }
        n
    }

    /// Replaces float constant weight `w` (argument `i` of `n`) with `dequantize_per_channel` of
    /// its int8 codes along `axis`.
    fn quantize_weight(&mut self, g: &mut Graph, n: &mut Node, i: usize, axis: usize) -> Result<()> {
        let Some(Arg::Tensor(w)) = n.args.get(i).cloned() else { return Ok(()) };
        let Some((sizes, vals)) = const_f32(g, w) else {
            return Err(ExportError::Invalid(format!("int8 quantization: {} weight '{}' is not a float constant", n.op, g.values[w].name)));
        };
        let (codes, scales) = quantize_weight_per_channel(&vals, &sizes, axis);
        let name = g.values[w].name.clone();
        let qw = add_const(g, format!("{name}.int8"), ScalarType::Char, &sizes, codes.iter().map(|&c| c as u8).collect());
        let sc = add_const(g, format!("{name}.scales"), ScalarType::Float, &[sizes[axis]], f32_bytes(&scales));
        let zp = add_const(g, format!("{name}.zero_points"), ScalarType::Long, &[sizes[axis]], vec![0u8; sizes[axis] * 8]);
        let dq = append1(
            g,
            "quantized_decomposed::dequantize_per_channel",
            vec![
                Arg::Tensor(qw),
                Arg::Tensor(sc),
                Arg::Tensor(zp),
                Arg::Int(axis as i64),
                Arg::Int(WQMIN),
                Arg::Int(WQMAX),
                Arg::ScalarType(ScalarType::Char),
                Arg::None,
            ],
        )?;
        n.args[i] = Arg::Tensor(dq);
        self.report.weights += 1;
        Ok(())
    }
}

fn tensor_at(n: &Node, i: usize) -> Option<ValueId> {
    match n.args.get(i) {
        Some(Arg::Tensor(v)) => Some(*v),
        _ => None,
    }
}

/// Which weight argument (index, channel axis) an anchor quantizes.
fn weight_arg(g: &Graph, n: &Node) -> Option<(usize, usize)> {
    let is_const = |i: usize| tensor_at(n, i).is_some_and(|v| const_f32(g, v).is_some());
    match n.op.as_str() {
        "aten::convolution" if is_const(1) && !matches!(n.args.get(6), Some(Arg::Bool(true))) => Some((1, 0)),
        // mat2 is [K, N]: output channels along axis 1.
        "aten::addmm" if is_const(2) => Some((2, 1)),
        "aten::mm" if is_const(1) => Some((1, 1)),
        _ => None,
    }
}

/// Whether `n` is an anchor this pass quantizes (constant weights where it has any; mean only
/// over H and W with keepdim, the form the int8 kernels take).
fn quantizable(g: &Graph, n: &Node) -> bool {
    match n.op.as_str() {
        // Transposed convolutions keep output channels on weight axis 1: left float.
        "aten::convolution" => weight_arg(g, n).is_some() && !matches!(n.args.get(6), Some(Arg::Bool(true))),
        "aten::addmm" | "aten::mm" => weight_arg(g, n).is_some(),
        "aten::add.Tensor" => {
            matches!(n.args.get(2), Some(Arg::Scalar(Scalar::Int(1))) | Some(Arg::Scalar(Scalar::Double(1.0))) | None)
                && (0..2).all(|i| tensor_at(n, i).is_some_and(|v| g.constant(v).is_none()))
        }
        "aten::mul.Tensor" => (0..2).all(|i| tensor_at(n, i).is_some_and(|v| g.constant(v).is_none())),
        "aten::mean.dim" => {
            let rank = tensor_at(n, 0).map_or(0, |v| g.meta(v).rank());
            let dims = match n.args.get(1) {
                Some(Arg::Ints(d)) => {
                    let mut d: Vec<i64> = d.iter().map(|&x| if x < 0 { x + rank as i64 } else { x }).collect();
                    d.sort();
                    d
                }
                _ => vec![],
            };
            rank == 4 && dims == [2, 3] && matches!(n.args.get(2), Some(Arg::Bool(true)))
        }
        _ => false,
    }
}

/// Rewrites the float graph `g` (functional ops, after the float passes) into the reference
/// representation, with activation parameters from `ranges` (see [`super::calibrate`]).
///
/// Ops whose weight lies in a layer named by `keep_float` (a prefix such as `features.0`) stay
/// float32: their int8 neighbours dequantize into them and quantize what they produce. A prefix
/// that names no layer is an error listing the layers there are.
pub fn quantize_static(g: &mut Graph, ranges: &Ranges, keep_float: &[String]) -> Result<StaticQuantReport> {
    let kept_layer = |g: &Graph, n: &Node| -> Option<String> {
        let name = weight_name(g, n)?;
        keep_float.iter().any(|p| in_layer(name, p)).then(|| layer_name(name).to_string())
    };
    let layers: Vec<&str> = g.nodes.iter().filter_map(|n| weight_name(g, n)).map(layer_name).collect();
    for prefix in keep_float {
        if !layers.iter().any(|l| in_layer(l, prefix)) {
            let shown: Vec<&str> = layers.iter().copied().take(6).collect();
            return Err(ExportError::Invalid(format!(
                "keep-float \"{prefix}\" names no layer with weights; the layers are named like {}, … {}",
                shown.join(", "),
                layers.last().copied().unwrap_or("")
            )));
        }
    }
    let mut kept_float = Vec::new();
    let old = std::mem::take(&mut g.nodes);
    let uses = {
        let mut c = vec![0usize; g.values.len()];
        for n in &old {
            for v in n.tensor_inputs() {
                c[v] += 1;
            }
        }
        for &o in &g.outputs {
            c[o] += 1;
        }
        c
    };
    let consumer: HashMap<ValueId, usize> =
        old.iter().enumerate().flat_map(|(i, n)| n.tensor_inputs().map(move |v| (v, i)).collect::<Vec<_>>()).collect();
    // Activation nodes folded into the anchor before them: their outputs are the quantized ones.
    let mut folded_activation = vec![false; old.len()];
    let mut anchor = vec![false; old.len()];
    let mut kept = vec![false; old.len()];
    // hardswish / hardsigmoid chains: the root is an anchor with one activation input; the
    // inner nodes stay float between that input's dequantize and the root's quantize.
    let producer: HashMap<ValueId, usize> = old.iter().enumerate().flat_map(|(i, n)| n.outputs.iter().map(move |&o| (o, i))).collect();
    let mut chain_input: HashMap<usize, ValueId> = HashMap::new();
    let mut in_chain = vec![false; old.len()];
    // Every node of a chain (inner ones and the root) → the chain's input, which must be
    // quantized before the chain's first node reads it.
    let mut chain_of: HashMap<usize, ValueId> = HashMap::new();
    for i in 0..old.len() {
        if let Some((x, inner)) = unary_chain(&old, &producer, &uses, i) {
            chain_input.insert(i, x);
            chain_of.insert(i, x);
            anchor[i] = true;
            for k in inner {
                in_chain[k] = true;
                chain_of.insert(k, x);
            }
        }
    }
    for (i, n) in old.iter().enumerate() {
        if in_chain[i] || chain_input.contains_key(&i) || !quantizable(g, n) {
            continue;
        }
        if let Some(layer) = kept_layer(g, n) {
            kept_float.push(layer);
            kept[i] = true;
            continue;
        }
        anchor[i] = true;
        if n.op == "aten::mean.dim" {
            continue;
        }
        if let [out] = n.outputs[..] {
            if uses[out] == 1 && !g.outputs.contains(&out) {
                if let Some(&c) = consumer.get(&out) {
                    if is_activation(&old[c].op) && tensor_at(&old[c], 0) == Some(out) {
                        folded_activation[c] = true;
                    }
                }
            }
        }
    }

    let mut rw = Rewrite { ranges, quantized: HashMap::new(), replace: HashMap::new(), report: StaticQuantReport::default() };
    let float_inputs: Vec<ValueId> = g.inputs.iter().copied().filter(|&v| g.meta(v).dtype == ScalarType::Float).collect();
    for v in float_inputs {
        if old.iter().enumerate().any(|(i, n)| anchor[i] && n.tensor_inputs().any(|x| x == v)) {
            let p = rw.params_of(g, v)?;
            rw.quantize_value(g, v, v, p)?;
        }
    }
    for (i, n) in old.iter().enumerate() {
        if let Some(&x) = chain_of.get(&i) {
            rw.require_quantized(g, x)?;
        }
        // view_copy of a quantized tensor runs on the int8 codes.
        if n.op == "aten::view_copy" {
            if let (Some(x), [out]) = (tensor_at(n, 0), &n.outputs[..]) {
                if let Some(&(q, p)) = rw.quantized.get(&x) {
                    let mut args = n.args.clone();
                    args[0] = Arg::Tensor(q);
                    let qv = append1(g, "aten::view_copy", args)?;
                    let dq = dequantize(g, qv, p)?;
                    rw.quantized.insert(*out, (qv, p));
                    rw.replace.insert(*out, dq);
                    continue;
                }
            }
        }
        if anchor[i] {
            let activations: Vec<ValueId> = match n.op.as_str() {
                _ if chain_input.contains_key(&i) => vec![chain_input[&i]],
                "aten::convolution" | "aten::mm" | "aten::mean.dim" => tensor_at(n, 0).into_iter().collect(),
                "aten::addmm" => tensor_at(n, 1).into_iter().collect(),
                _ => (0..2).filter_map(|k| tensor_at(n, k)).collect(),
            };
            for v in activations {
                rw.require_quantized(g, v)?;
            }
        }
        let mut node = rw.remap(n);
        if anchor[i] {
            if let Some((wi, axis)) = weight_arg(g, n) {
                rw.quantize_weight(g, &mut node, wi, axis)?;
            }
        }
        let outputs = node.outputs.clone();
        g.nodes.push(node);
        let quantize_output = (anchor[i] && !n.outputs.iter().any(|o| consumer.get(o).is_some_and(|&c| folded_activation[c])))
            || folded_activation[i];
        if quantize_output {
            let [out] = outputs[..] else {
                return Err(ExportError::Invalid(format!("int8 quantization: {} has {} outputs", n.op, outputs.len())));
            };
            let p = if n.op == "aten::mean.dim" {
                let x = tensor_at(n, 0).expect("checked by quantizable");
                rw.quantized.get(&x).map(|&(_, p)| p).ok_or_else(|| ExportError::Invalid("mean input not quantized".into()))?
            } else {
                rw.params_of(g, out)?
            };
            rw.quantize_value(g, out, out, p)?;
        } else if !anchor[i] && !kept[i] && !in_chain[i] && !is_activation(&n.op) && n.op != "aten::view_copy" {
            rw.report.float_ops.push(n.op.clone());
        }
    }
    for o in g.outputs.iter_mut() {
        *o = rw.replace.get(o).copied().unwrap_or(*o);
    }
    rw.report.output_qparams = g
        .outputs
        .iter()
        .map(|&o| {
            g.nodes.iter().find(|n| n.outputs.contains(&o) && n.op == "quantized_decomposed::dequantize_per_tensor").and_then(|n| {
                match (n.args.get(1), n.args.get(2)) {
                    (Some(Arg::Float(s)), Some(Arg::Int(z))) => Some(ActQ { scale: *s as f32, zero_point: *z }),
                    _ => None,
                }
            })
        })
        .collect();
    rw.report.float_ops.sort();
    rw.report.float_ops.dedup();
    rw.report.kept_float = kept_float;
    Ok(rw.report)
}
