//! Fusion of the reference representation into int8 kernels: each
//! `dequantize → float op [→ relu/hardtanh/clamp] → quantize` becomes one `rbuild::q*` op
//! (kernels/src/portable/qint8.rs) reading and writing int8, with integer requantization
//! (fixed-point multiplier + shift) computed here from the quantize/dequantize parameters:
//!
//! | float pattern | int8 op |
//! |---|---|
//! | `convolution(dq(x), dq_per_channel(w), bias)` (incl. depthwise/grouped) | `rbuild::qconv2d` |
//! | `addmm(bias, dq(x), dq_per_channel(wᵀ, axis 1))`, `mm(dq(x), …)` | `rbuild::qlinear` |
//! | `add.Tensor(dq(a), dq(b))` (same shapes) | `rbuild::qadd` |
//! | `mul.Tensor(dq(a), dq(b))` (same shapes, or one `[N, C, 1, 1]`) | `rbuild::qmul` |
//! | `mean.dim(dq(x), [-1, -2], keepdim)` | `rbuild::qmean_hw` |
//! | hardswish / hardsigmoid chain of `dq(x)` (add, clamp, [mul], div) | `rbuild::qlookup` (256-entry table) |
//!
//! The activation's bounds become the int8 output clamp (quantizing is monotonic, so
//! `q(clamp(y, a, b)) = clamp(q(y), q(a), q(b))`). The fused op writes the quantize node's
//! output value, so everything downstream stays as it was; the program's float input quantize
//! and final dequantize remain, so its inputs and outputs are float32 like the reference's.
//! Patterns that do not match stay as they are (still correct, just not fused).

use rbuild_kernels::portable::qint8::quantize_multiplier;
use rbuild_runtime::ScalarType;

use super::quantize_static::{ActQ, QMAX, QMIN};
use super::{append_into, dce, f32s};
use crate::error::Result;
use crate::graph::{Arg, ConstData, Graph, Node, Origin, TensorMeta, ValueId};

/// What fusion did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FuseReport {
    /// Fused ops by name.
    pub fused: std::collections::BTreeMap<String, usize>,
    /// Quantize nodes left unfused (their producer did not match a pattern).
    pub unfused: usize,
}

struct View<'a> {
    g: &'a Graph,
    producer: Vec<Option<usize>>,
    uses: Vec<usize>,
}

impl View<'_> {
    fn node(&self, v: ValueId) -> Option<&Node> {
        self.producer[v].map(|i| &self.g.nodes[i])
    }

    /// `v`'s producer when it is `op` and `v` is read exactly once.
    fn single_use_producer(&self, v: ValueId, ops: &[&str]) -> Option<&Node> {
        let n = self.node(v)?;
        (ops.contains(&n.op.as_str()) && self.uses[v] == 1 && !self.g.outputs.contains(&v)).then_some(n)
    }

    /// `v = dequantize_per_tensor(q, scale, zp, -128, 127, int8)`: (q, parameters).
    fn dequantized(&self, v: ValueId) -> Option<(ValueId, ActQ)> {
        let n = self.node(v)?;
        if n.op != "quantized_decomposed::dequantize_per_tensor" {
            return None;
        }
        let q = tensor(n, 0)?;
        let p = int8_params(n)?;
        (self.g.meta(q).dtype == ScalarType::Char).then_some((q, p))
    }

    /// `v = dequantize_per_channel(w_int8 const, scales const, zero points all 0 or None, axis,
    /// -127..127, int8)`: (codes, sizes, scales, axis).
    fn per_channel_weight(&self, v: ValueId) -> Option<(Vec<i8>, Vec<usize>, Vec<f32>, usize)> {
        let n = self.node(v)?;
        if n.op != "quantized_decomposed::dequantize_per_channel" {
            return None;
        }
        let (w, s) = (tensor(n, 0)?, tensor(n, 1)?);
        let (wc, sc) = (self.g.constant(w)?, self.g.constant(s)?);
        if self.g.meta(w).dtype != ScalarType::Char || self.g.meta(s).dtype != ScalarType::Float {
            return None;
        }
        match n.args.get(2) {
            Some(Arg::None) => {}
            Some(Arg::Tensor(z)) => {
                if !self.g.constant(*z)?.bytes().iter().all(|&b| b == 0) {
                    return None;
                }
            }
            _ => return None,
        }
        let axis = match n.args.get(3) {
            Some(Arg::Int(a)) if *a >= 0 => *a as usize,
            _ => return None,
        };
        let codes = wc.bytes().iter().map(|&b| b as i8).collect();
        Some((codes, self.g.meta(w).sizes()?, f32s(&sc.bytes()), axis))
    }
}

fn tensor(n: &Node, i: usize) -> Option<ValueId> {
    match n.args.get(i) {
        Some(Arg::Tensor(v)) => Some(*v),
        _ => None,
    }
}

/// Scale and zero point of a per-tensor (de)quantize node with the int8 range.
fn int8_params(n: &Node) -> Option<ActQ> {
    match (n.args.get(1), n.args.get(2), n.args.get(3), n.args.get(4), n.args.get(5)) {
        (Some(Arg::Float(s)), Some(Arg::Int(z)), Some(Arg::Int(QMIN)), Some(Arg::Int(QMAX)), Some(Arg::ScalarType(ScalarType::Char))) => {
            Some(ActQ { scale: *s as f32, zero_point: *z })
        }
        _ => None,
    }
}

fn scalar_f64(a: Option<&Arg>) -> Option<Option<f64>> {
    use rbuild_runtime::Scalar;
    match a {
        Some(Arg::Scalar(Scalar::Double(d))) => Some(Some(*d)),
        Some(Arg::Scalar(Scalar::Int(i))) => Some(Some(*i as f64)),
        Some(Arg::Float(d)) => Some(Some(*d)),
        Some(Arg::None) | None => Some(None),
        _ => None,
    }
}

/// The int8 output clamp of an activation (or the full range without one).
fn activation_range(act: Option<&Node>, out: ActQ) -> Option<(i64, i64)> {
    let (lo, hi) = match act {
        None => (None, None),
        Some(n) => match n.op.as_str() {
            "aten::relu" => (Some(0.0), None),
            "aten::hardtanh" | "aten::clamp" => (scalar_f64(n.args.get(1))?, scalar_f64(n.args.get(2))?),
            _ => return None,
        },
    };
    let q = |x: Option<f64>, default: i64| x.map_or(default, |x| out.quantize(x as f32).clamp(QMIN, QMAX));
    let (lo, hi) = (q(lo, QMIN), q(hi, QMAX));
    (lo <= hi).then_some((lo, hi))
}

fn add_const(g: &mut Graph, name: String, dtype: ScalarType, sizes: &[usize], bytes: Vec<u8>) -> ValueId {
    g.add_value(TensorMeta::fixed(dtype, sizes), Origin::Const(ConstData::owned(bytes)), name)
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// int32 bias, multipliers and shifts per output channel for accumulators in units of
/// `input_scale · weight_scale[c]`.
fn channel_requant(g: &mut Graph, name: &str, bias: Option<&[f32]>, x: ActQ, w_scales: &[f32], out: ActQ) -> [ValueId; 3] {
    let n = w_scales.len();
    let (mut b, mut m, mut s) = (vec![0i32; n], vec![0i32; n], vec![0i32; n]);
    for c in 0..n {
        let acc_scale = x.scale as f64 * w_scales[c] as f64;
        if let Some(bias) = bias {
            b[c] = (bias[c] as f64 / acc_scale).round().clamp(i32::MIN as f64, i32::MAX as f64) as i32;
        }
        (m[c], s[c]) = quantize_multiplier(acc_scale / out.scale as f64);
    }
    [
        add_const(g, format!("{name}.bias_i32"), ScalarType::Int, &[n], i32_bytes(&b)),
        add_const(g, format!("{name}.multiplier"), ScalarType::Int, &[n], i32_bytes(&m)),
        add_const(g, format!("{name}.shift"), ScalarType::Int, &[n], i32_bytes(&s)),
    ]
}

/// One matched `dequantize → float op [→ activation] → quantize` pattern, in the terms every
/// lowering needs: rbuild's int8 CPU kernels ([`lower_cpu`]) and delegates (the Ethos-U
/// partitioner reads the same matches, so both see one definition of what a pattern means).
#[derive(Clone, Debug)]
pub struct Matched {
    pub op: MatchedOp,
    /// The quantize node's output: what the fused op writes.
    pub output: ValueId,
    pub out: ActQ,
    /// The int8 output clamp from the activation (`QMIN..=QMAX` without one).
    pub range: (i64, i64),
    /// The float op's output name, for constants and reports.
    pub name: String,
}

/// The float op of a [`Matched`] pattern with its int8 inputs (codes and parameters).
#[derive(Clone, Debug)]
pub enum MatchedOp {
    /// `convolution` (NCHW), weight codes `[O, I/groups, KH, KW]` per output channel.
    Conv {
        x: ValueId,
        xq: ActQ,
        weight: Vec<i8>,
        weight_sizes: Vec<usize>,
        weight_scales: Vec<f32>,
        bias: Option<Vec<f32>>,
        stride: [i64; 2],
        padding: [i64; 2],
        dilation: [i64; 2],
        groups: i64,
    },
    /// `addmm` / `mm` on `[M, K]`; weight codes `[N, K]` (transposed from the graph's `[K, N]`).
    Linear { x: ValueId, xq: ActQ, weight: Vec<i8>, n: usize, k: usize, weight_scales: Vec<f32>, bias: Option<Vec<f32>> },
    /// Elementwise add of two same-shaped int8 tensors.
    Add { a: ValueId, aq: ActQ, b: ValueId, bq: ActQ },
    /// Elementwise mul; `b` is the same shape or a per-channel `[N, C, 1, 1]` factor.
    Mul { a: ValueId, aq: ActQ, b: ValueId, bq: ActQ },
    /// A unary float chain (hardswish, hardsigmoid) as the int8 output of each int8 input code.
    Lookup { x: ValueId, table: Vec<u8> },
    /// `mean.dim(x, [-1, -2], keepdim=True)` on NCHW.
    MeanHw { x: ValueId, xq: ActQ },
}

/// Every pattern of the graph, keyed by the quantize output each one writes.
pub fn match_all(g: &Graph) -> std::collections::BTreeMap<ValueId, Matched> {
    let view = View { g, producer: g.producers(), uses: g.use_counts() };
    (0..g.nodes.len())
        .filter(|&i| g.nodes[i].op == "quantized_decomposed::quantize_per_tensor")
        .filter_map(|qi| match_one(&view, qi))
        .map(|m| (m.output, m))
        .collect()
}

fn match_one(view: &View<'_>, qi: usize) -> Option<Matched> {
    let qn = &view.g.nodes[qi];
    let out = int8_params(qn)?;
    let output = *qn.outputs.first()?;
    let t = tensor(qn, 0)?;
    // Optional activation between the op and the quantize.
    let (act, y) = match view.single_use_producer(t, &["aten::relu", "aten::hardtanh", "aten::clamp"]) {
        Some(a) => (Some(a), tensor(a, 0)?),
        None => (None, t),
    };
    let op = if act.is_some() { view.single_use_producer(y, &["aten::convolution", "aten::addmm", "aten::mm", "aten::add.Tensor", "aten::mul.Tensor"])? } else { view.node(y)? };
    if act.is_none() && (view.uses[y] != 1 || view.g.outputs.contains(&y)) {
        return None;
    }
    let range = activation_range(act, out)?;
    let name = view.g.values[y].name.clone();
    let matched = |op: MatchedOp| Some(Matched { op, output, out, range, name: name.clone() });
    match op.op.as_str() {
        "aten::convolution" => {
            let (x, xq) = view.dequantized(tensor(op, 0)?)?;
            let (weight, weight_sizes, weight_scales, axis) = view.per_channel_weight(tensor(op, 1)?)?;
            if axis != 0 || weight_sizes.len() != 4 || matches!(op.args.get(6), Some(Arg::Bool(true))) {
                return None;
            }
            let bias = match op.args.get(2) {
                Some(Arg::Tensor(b)) => Some(f32s(&view.g.constant(*b)?.bytes())),
                Some(Arg::None) => None,
                _ => return None,
            };
            let pair = |i: usize| match op.args.get(i) {
                Some(Arg::Ints(v)) if v.len() == 2 => Some([v[0], v[1]]),
                Some(Arg::Ints(v)) if v.len() == 1 => Some([v[0], v[0]]),
                _ => None,
            };
            let (stride, padding, dilation) = (pair(3)?, pair(4)?, pair(5)?);
            let groups = match op.args.get(8) {
                Some(Arg::Int(g)) if *g >= 1 => *g,
                _ => return None,
            };
            matched(MatchedOp::Conv { x, xq, weight, weight_sizes, weight_scales, bias, stride, padding, dilation, groups })
        }
        "aten::addmm" | "aten::mm" => {
            let (xi, wi) = if op.op == "aten::addmm" { (1, 2) } else { (0, 1) };
            let (x, xq) = view.dequantized(tensor(op, xi)?)?;
            let (codes, wsizes, weight_scales, axis) = view.per_channel_weight(tensor(op, wi)?)?;
            if axis != 1 || wsizes.len() != 2 || view.g.meta(x).rank() != 2 {
                return None;
            }
            let bias = if op.op == "aten::addmm" {
                let b = tensor(op, 0)?;
                if view.g.meta(b).sizes()? != [wsizes[1]] || !default_scalars(op) {
                    return None;
                }
                Some(f32s(&view.g.constant(b)?.bytes()))
            } else {
                None
            };
            // [K, N] codes → [N, K], one output channel per row.
            let (k, n) = (wsizes[0], wsizes[1]);
            let mut weight = vec![0i8; k * n];
            for r in 0..k {
                for c in 0..n {
                    weight[c * k + r] = codes[r * n + c];
                }
            }
            matched(MatchedOp::Linear { x, xq, weight, n, k, weight_scales, bias })
        }
        "aten::add.Tensor" | "aten::mul.Tensor" => {
            let (mut a, mut aq) = view.dequantized(tensor(op, 0)?)?;
            let (mut b, mut bq) = view.dequantized(tensor(op, 1)?)?;
            if op.op == "aten::mul.Tensor" {
                // A per-channel factor [N, C, 1, 1] goes second.
                let per_channel = |a: ValueId, b: ValueId| {
                    let (sa, sb) = (view.g.meta(a).sizes(), view.g.meta(b).sizes());
                    matches!((sa.as_deref(), sb.as_deref()), (Some(&[n, c, _, _]), Some(&[bn, bc, 1, 1])) if n == bn && c == bc)
                };
                if per_channel(b, a) && view.g.meta(a).shape != view.g.meta(b).shape {
                    (a, aq, b, bq) = (b, bq, a, aq);
                }
                if view.g.meta(a).shape != view.g.meta(b).shape && !per_channel(a, b) {
                    return None;
                }
                return matched(MatchedOp::Mul { a, aq, b, bq });
            }
            if view.g.meta(a).shape != view.g.meta(b).shape {
                return None;
            }
            if !matches!(op.args.get(2), Some(Arg::Scalar(rbuild_runtime::Scalar::Int(1))) | None) {
                return None;
            }
            matched(MatchedOp::Add { a, aq, b, bq })
        }
        "aten::div.Scalar" => {
            let (x, table) = lookup_table(view, y, out)?;
            matched(MatchedOp::Lookup { x, table })
        }
        "aten::mean.dim" => {
            let (x, xq) = view.dequantized(tensor(op, 0)?)?;
            let sizes = view.g.meta(x).sizes()?;
            let dims = match op.args.get(1) {
                Some(Arg::Ints(d)) => {
                    let mut d: Vec<i64> = d.iter().map(|&x| if x < 0 { x + 4 } else { x }).collect();
                    d.sort();
                    d
                }
                _ => return None,
            };
            if sizes.len() != 4 || dims != [2, 3] || !matches!(op.args.get(2), Some(Arg::Bool(true))) {
                return None;
            }
            matched(MatchedOp::MeanHw { x, xq })
        }
        _ => None,
    }
}

/// The `rbuild::q*` CPU kernel call for a match (kernels/src/portable/qint8.rs), with its
/// integer requantization parameters; new constants are added to `g`.
pub fn lower_cpu(g: &mut Graph, m: &Matched) -> (&'static str, Vec<Arg>) {
    let (out, (lo, hi), name) = (m.out, m.range, m.name.as_str());
    let ints = |v: [i64; 2]| Arg::Ints(v.to_vec());
    match &m.op {
        MatchedOp::Conv { x, xq, weight, weight_sizes, weight_scales, bias, stride, padding, dilation, groups } => {
            let w = add_const(g, format!("{name}.weight_int8"), ScalarType::Char, weight_sizes, weight.iter().map(|&c| c as u8).collect());
            let [b, mu, s] = channel_requant(g, name, bias.as_deref(), *xq, weight_scales, out);
            let mut args = requant_prefix(*x, w, [b, mu, s], *xq, out, (lo, hi));
            args.extend([ints(*stride), ints(*padding), ints(*dilation), Arg::Int(*groups)]);
            ("rbuild::qconv2d", args)
        }
        MatchedOp::Linear { x, xq, weight, n, k, weight_scales, bias } => {
            let w = add_const(g, format!("{name}.weight_int8"), ScalarType::Char, &[*n, *k], weight.iter().map(|&c| c as u8).collect());
            let [b, mu, s] = channel_requant(g, name, bias.as_deref(), *xq, weight_scales, out);
            ("rbuild::qlinear", requant_prefix(*x, w, [b, mu, s], *xq, out, (lo, hi)))
        }
        MatchedOp::Mul { a, aq, b, bq } => {
            let (mu, s) = quantize_multiplier(aq.scale as f64 * bq.scale as f64 / out.scale as f64);
            let args = vec![
                Arg::Tensor(*a),
                Arg::Tensor(*b),
                Arg::Int(aq.zero_point),
                Arg::Int(bq.zero_point),
                Arg::Int(out.zero_point),
                Arg::Int(mu as i64),
                Arg::Int(s as i64),
                Arg::Int(lo),
                Arg::Int(hi),
            ];
            ("rbuild::qmul", args)
        }
        MatchedOp::Add { a, aq, b, bq } => {
            // TFLite's int8 add: both inputs to twice the larger scale, 20 bits of headroom.
            const LEFT_SHIFT: i64 = 20;
            let twice_max = 2.0 * (aq.scale as f64).max(bq.scale as f64);
            let (ma, sa) = quantize_multiplier(aq.scale as f64 / twice_max);
            let (mb, sb) = quantize_multiplier(bq.scale as f64 / twice_max);
            let (mo, so) = quantize_multiplier(twice_max / ((1i64 << LEFT_SHIFT) as f64 * out.scale as f64));
            let args = vec![
                Arg::Tensor(*a),
                Arg::Tensor(*b),
                Arg::Int(aq.zero_point),
                Arg::Int(ma as i64),
                Arg::Int(sa as i64),
                Arg::Int(bq.zero_point),
                Arg::Int(mb as i64),
                Arg::Int(sb as i64),
                Arg::Int(LEFT_SHIFT),
                Arg::Int(out.zero_point),
                Arg::Int(mo as i64),
                Arg::Int(so as i64),
                Arg::Int(lo),
                Arg::Int(hi),
            ];
            ("rbuild::qadd", args)
        }
        MatchedOp::Lookup { x, table } => {
            let t = add_const(g, format!("{name}.table"), ScalarType::Char, &[256], table.clone());
            ("rbuild::qlookup", vec![Arg::Tensor(*x), Arg::Tensor(t)])
        }
        MatchedOp::MeanHw { x, xq } => {
            let sizes = g.meta(*x).sizes().unwrap_or_default();
            let count = sizes.iter().skip(2).product::<usize>().max(1) as f64;
            let (mu, s) = quantize_multiplier(xq.scale as f64 / (out.scale as f64 * count));
            let args = vec![
                Arg::Tensor(*x),
                Arg::Int(xq.zero_point),
                Arg::Int(out.zero_point),
                Arg::Int(mu as i64),
                Arg::Int(s as i64),
                Arg::Int(lo),
                Arg::Int(hi),
            ];
            ("rbuild::qmean_hw", args)
        }
    }
}

/// The leading arguments of `qconv2d` / `qlinear`: x, weight, bias, multipliers, shifts, zero
/// points and clamp.
fn requant_prefix(x: ValueId, w: ValueId, [b, m, s]: [ValueId; 3], xq: ActQ, out: ActQ, (lo, hi): (i64, i64)) -> Vec<Arg> {
    vec![
        Arg::Tensor(x),
        Arg::Tensor(w),
        Arg::Tensor(b),
        Arg::Tensor(m),
        Arg::Tensor(s),
        Arg::Int(xq.zero_point),
        Arg::Int(out.zero_point),
        Arg::Int(lo),
        Arg::Int(hi),
    ]
}

/// A hardswish / hardsigmoid chain ending at `y` (see `quantize_static::unary_chain`) as a table
/// of its int8 output for each of the 256 int8 input codes: the chain's own float ops, run with
/// rbuild's kernels on the dequantized codes, then quantized — exactly what the reference
/// representation computes for each code.
fn lookup_table(view: &View<'_>, y: ValueId, out: ActQ) -> Option<(ValueId, Vec<u8>)> {
    let root = view.producer[y]?;
    let producer: std::collections::HashMap<ValueId, usize> =
        view.producer.iter().enumerate().filter_map(|(v, p)| p.map(|i| (v, i))).collect();
    let (x, mut inner) = super::quantize_static::unary_chain(&view.g.nodes, &producer, &view.uses, root)?;
    let (xq, xp) = view.dequantized(x)?;
    inner.push(root);
    inner.sort();
    let mut t = Graph::default();
    let codes = t.add_value(TensorMeta::fixed(ScalarType::Char, &[256]), Origin::Input(0), "codes");
    t.inputs.push(codes);
    let qargs = |p: ActQ| [Arg::Float(p.scale as f64), Arg::Int(p.zero_point), Arg::Int(QMIN), Arg::Int(QMAX), Arg::ScalarType(ScalarType::Char)];
    let mut args = vec![Arg::Tensor(codes)];
    args.extend(qargs(xp));
    args.push(Arg::None);
    let xf = super::append1(&mut t, "quantized_decomposed::dequantize_per_tensor", args).ok()?;
    let mut map = std::collections::HashMap::from([(x, xf)]);
    for i in inner {
        let n = &view.g.nodes[i];
        let mut args = n.args.clone();
        for a in &mut args {
            if let Arg::Tensor(v) = a {
                *v = *map.get(v)?;
            }
        }
        let o = super::append1(&mut t, &n.op, args).ok()?;
        map.insert(n.outputs[0], o);
    }
    let mut args = vec![Arg::Tensor(map[&y])];
    args.extend(qargs(out));
    let q = super::append1(&mut t, "quantized_decomposed::quantize_per_tensor", args).ok()?;
    t.outputs.push(q);
    let input: Vec<u8> = (-128i32..=127).map(|c| c as i8 as u8).collect();
    let table = crate::eval::evaluate(&t, &[input]).ok()?.pop()?;
    Some((xq, table))
}

/// `addmm` with beta = alpha = 1.
fn default_scalars(n: &Node) -> bool {
    (3..5).all(|i| matches!(scalar_f64(n.args.get(i)), Some(Some(v)) if v == 1.0) || n.args.get(i).is_none())
}

/// Fuses every matching pattern; dead float ops and dequantizes are removed afterwards.
pub fn fuse_int8(g: &mut Graph) -> Result<FuseReport> {
    Ok(fuse_int8_matched(g)?.0)
}

/// [`fuse_int8`], also returning the matches by the value each fused op writes (delegates
/// partition the fused graph and lower the matches their own way).
pub fn fuse_int8_matched(g: &mut Graph) -> Result<(FuseReport, std::collections::BTreeMap<ValueId, Matched>)> {
    let mut report = FuseReport::default();
    let quantizes = g.nodes.iter().filter(|n| n.op == "quantized_decomposed::quantize_per_tensor").count();
    let matches = match_all(g);
    report.unfused = quantizes - matches.len();
    // Rebuild the node list: each fused op takes its quantize node's place and output.
    let old = std::mem::take(&mut g.nodes);
    for n in old {
        let m = n.outputs.first().and_then(|o| matches.get(o)).filter(|_| n.op == "quantized_decomposed::quantize_per_tensor");
        match m {
            Some(m) => {
                let (op, args) = lower_cpu(g, m);
                append_into(g, op, args, &n.outputs)?;
                *report.fused.entry(op.to_string()).or_default() += 1;
            }
            None => g.nodes.push(n),
        }
    }
    dce::eliminate_dead_code(g);
    Ok((report, matches))
}
