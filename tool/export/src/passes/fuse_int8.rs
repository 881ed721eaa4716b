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
        Some((codes, self.g.meta(w).sizes()?, f32s(sc.bytes()), axis))
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

/// The fused node for quantize node `qi`, or None when its producer matches no pattern.
fn fuse_one(g: &mut Graph, view: &View<'_>, qi: usize) -> Option<(&'static str, Vec<Arg>)> {
    let qn = &view.g.nodes[qi];
    let out = int8_params(qn)?;
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
    let (lo, hi) = activation_range(act, out)?;
    let name = view.g.values[y].name.clone();
    match op.op.as_str() {
        "aten::convolution" => {
            let (xq, xp) = view.dequantized(tensor(op, 0)?)?;
            let (codes, wsizes, scales, axis) = view.per_channel_weight(tensor(op, 1)?)?;
            if axis != 0 || wsizes.len() != 4 || matches!(op.args.get(6), Some(Arg::Bool(true))) {
                return None;
            }
            let bias = match op.args.get(2) {
                Some(Arg::Tensor(b)) => Some(f32s(view.g.constant(*b)?.bytes())),
                Some(Arg::None) => None,
                _ => return None,
            };
            let list2 = |i: usize| match op.args.get(i) {
                Some(Arg::Ints(v)) if v.len() == 2 => Some(Arg::Ints(v.clone())),
                Some(Arg::Ints(v)) if v.len() == 1 => Some(Arg::Ints(vec![v[0], v[0]])),
                _ => None,
            };
            let (stride, padding, dilation) = (list2(3)?, list2(4)?, list2(5)?);
            let groups = op.args.get(8)?.clone();
            let w = add_const(g, format!("{name}.weight_int8"), ScalarType::Char, &wsizes, codes.iter().map(|&c| c as u8).collect());
            let [b, m, s] = channel_requant(g, &name, bias.as_deref(), xp, &scales, out);
            Some((
                "rbuild::qconv2d",
                vec![
                    Arg::Tensor(xq),
                    Arg::Tensor(w),
                    Arg::Tensor(b),
                    Arg::Tensor(m),
                    Arg::Tensor(s),
                    Arg::Int(xp.zero_point),
                    Arg::Int(out.zero_point),
                    Arg::Int(lo),
                    Arg::Int(hi),
                    stride,
                    padding,
                    dilation,
                    groups,
                ],
            ))
        }
        "aten::addmm" | "aten::mm" => {
            let (xi, wi) = if op.op == "aten::addmm" { (1, 2) } else { (0, 1) };
            let (xq, xp) = view.dequantized(tensor(op, xi)?)?;
            let (codes, wsizes, scales, axis) = view.per_channel_weight(tensor(op, wi)?)?;
            if axis != 1 || wsizes.len() != 2 || view.g.meta(xq).rank() != 2 {
                return None;
            }
            let bias = if op.op == "aten::addmm" {
                let b = tensor(op, 0)?;
                if view.g.meta(b).sizes()? != [wsizes[1]] || !default_scalars(op) {
                    return None;
                }
                Some(f32s(view.g.constant(b)?.bytes()))
            } else {
                None
            };
            // [K, N] codes → the kernel's [N, K].
            let (k, n) = (wsizes[0], wsizes[1]);
            let mut t = vec![0u8; k * n];
            for r in 0..k {
                for c in 0..n {
                    t[c * k + r] = codes[r * n + c] as u8;
                }
            }
            let w = add_const(g, format!("{name}.weight_int8"), ScalarType::Char, &[n, k], t);
            let [b, m, s] = channel_requant(g, &name, bias.as_deref(), xp, &scales, out);
            let args = vec![
                Arg::Tensor(xq),
                Arg::Tensor(w),
                Arg::Tensor(b),
                Arg::Tensor(m),
                Arg::Tensor(s),
                Arg::Int(xp.zero_point),
                Arg::Int(out.zero_point),
                Arg::Int(lo),
                Arg::Int(hi),
            ];
            Some(("rbuild::qlinear", args))
        }
        "aten::add.Tensor" | "aten::mul.Tensor" => {
            let (mut aq, mut ap) = view.dequantized(tensor(op, 0)?)?;
            let (mut bq, mut bp) = view.dequantized(tensor(op, 1)?)?;
            if op.op == "aten::mul.Tensor" {
                // A per-channel factor [N, C, 1, 1] goes second.
                let per_channel = |a: ValueId, b: ValueId| {
                    let (sa, sb) = (view.g.meta(a).sizes(), view.g.meta(b).sizes());
                    matches!((sa.as_deref(), sb.as_deref()), (Some(&[n, c, _, _]), Some(&[bn, bc, 1, 1])) if n == bn && c == bc)
                };
                if per_channel(bq, aq) && view.g.meta(aq).shape != view.g.meta(bq).shape {
                    (aq, ap, bq, bp) = (bq, bp, aq, ap);
                }
                if view.g.meta(aq).shape != view.g.meta(bq).shape && !per_channel(aq, bq) {
                    return None;
                }
            } else if view.g.meta(aq).shape != view.g.meta(bq).shape {
                return None;
            }
            if op.op == "aten::mul.Tensor" {
                let (m, s) = quantize_multiplier(ap.scale as f64 * bp.scale as f64 / out.scale as f64);
                let args = vec![
                    Arg::Tensor(aq),
                    Arg::Tensor(bq),
                    Arg::Int(ap.zero_point),
                    Arg::Int(bp.zero_point),
                    Arg::Int(out.zero_point),
                    Arg::Int(m as i64),
                    Arg::Int(s as i64),
                    Arg::Int(lo),
                    Arg::Int(hi),
                ];
                return Some(("rbuild::qmul", args));
            }
            if !matches!(op.args.get(2), Some(Arg::Scalar(rbuild_runtime::Scalar::Int(1))) | None) {
                return None;
            }
            // TFLite's int8 add: both inputs to twice the larger scale, 20 bits of headroom.
            const LEFT_SHIFT: i64 = 20;
            let twice_max = 2.0 * (ap.scale as f64).max(bp.scale as f64);
            let (ma, sa) = quantize_multiplier(ap.scale as f64 / twice_max);
            let (mb, sb) = quantize_multiplier(bp.scale as f64 / twice_max);
            let (mo, so) = quantize_multiplier(twice_max / ((1i64 << LEFT_SHIFT) as f64 * out.scale as f64));
            let args = vec![
                Arg::Tensor(aq),
                Arg::Tensor(bq),
                Arg::Int(ap.zero_point),
                Arg::Int(ma as i64),
                Arg::Int(sa as i64),
                Arg::Int(bp.zero_point),
                Arg::Int(mb as i64),
                Arg::Int(sb as i64),
                Arg::Int(LEFT_SHIFT),
                Arg::Int(out.zero_point),
                Arg::Int(mo as i64),
                Arg::Int(so as i64),
                Arg::Int(lo),
                Arg::Int(hi),
            ];
            Some(("rbuild::qadd", args))
        }
        "aten::div.Scalar" => {
            let (xq, table) = lookup_table(view, y, out)?;
            let t = add_const(g, format!("{name}.table"), ScalarType::Char, &[256], table);
            Some(("rbuild::qlookup", vec![Arg::Tensor(xq), Arg::Tensor(t)]))
        }
        "aten::mean.dim" => {
            let (xq, xp) = view.dequantized(tensor(op, 0)?)?;
            let sizes = view.g.meta(xq).sizes()?;
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
            let count = (sizes[2] * sizes[3]) as f64;
            let (m, s) = quantize_multiplier(xp.scale as f64 / (out.scale as f64 * count));
            let args = vec![
                Arg::Tensor(xq),
                Arg::Int(xp.zero_point),
                Arg::Int(out.zero_point),
                Arg::Int(m as i64),
                Arg::Int(s as i64),
                Arg::Int(lo),
                Arg::Int(hi),
            ];
            Some(("rbuild::qmean_hw", args))
        }
        _ => None,
    }
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
    let mut report = FuseReport::default();
    let quantize_nodes: Vec<usize> =
        g.nodes.iter().enumerate().filter(|(_, n)| n.op == "quantized_decomposed::quantize_per_tensor").map(|(i, _)| i).collect();
    let mut replacements: Vec<(usize, &'static str, Vec<Arg>)> = Vec::new();
    {
        // Patterns are read from a snapshot; new constants go to a scratch copy of the values.
        let snapshot = g.clone();
        let view = View { g: &snapshot, producer: snapshot.producers(), uses: snapshot.use_counts() };
        for qi in quantize_nodes {
            match fuse_one(g, &view, qi) {
                Some((op, args)) => replacements.push((qi, op, args)),
                None => report.unfused += 1,
            }
        }
    }
    // Rebuild the node list: each fused op takes its quantize node's place and output.
    let old = std::mem::take(&mut g.nodes);
    let mut fused_at: std::collections::HashMap<usize, (&'static str, Vec<Arg>)> =
        replacements.into_iter().map(|(i, op, args)| (i, (op, args))).collect();
    for (i, n) in old.into_iter().enumerate() {
        match fused_at.remove(&i) {
            Some((op, args)) => {
                append_into(g, op, args, &n.outputs)?;
                *report.fused.entry(op.to_string()).or_default() += 1;
            }
            None => g.nodes.push(n),
        }
    }
    dce::eliminate_dead_code(g);
    Ok(report)
}
