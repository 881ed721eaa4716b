//! Linear layers whose weights arrive already quantized: a GGUF file's Q4_0, Q8_0 and Q4_1
//! blocks, repacked by the importer into rbuild's layouts. Each float `aten::linear` reading such
//! a weight becomes the kernel of its block format, so the file's values are kept exactly
//! instead of being dequantized and quantized again.
//!
//! The model families build plain float graphs; the importer maps weight names to
//! [`PreQuantized`] weights and calls [`use_prequantized_linears`] (or
//! [`replace_linear_with_blocks`] for one node).

use std::collections::HashMap;

use half::f16;
use rbuild_kernels::portable::quant_linear::GROUP_SIZES;
use rbuild_runtime::ScalarType;

use super::quantize::{replace_op, QuantReport};
use crate::error::{ExportError, Result};
use crate::graph::{Arg, ConstData, Graph, Origin, TensorMeta, ValueId};

/// A `[rows, cols]` linear weight (out_features × in_features, as `aten::linear` takes it)
/// stored as blocks of `group` consecutive elements of a row, each with its own parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct PreQuantized {
    pub rows: usize,
    pub cols: usize,
    /// Elements per block along a row: one of the kernels' group sizes (GGUF: 32).
    pub group: usize,
    pub blocks: Blocks,
}

/// The codes and per-block parameters (`[rows, cols / group]` row-major) of one format.
#[derive(Clone, Debug, PartialEq)]
pub enum Blocks {
    /// GGUF Q4_0 → `rbuild::linear_q4`: codes q ∈ [−8, 7], `w = d·q`; packed two per byte,
    /// element k of a row in byte k/2, low nibble for even k, stored as q + 8
    /// ([`super::quantize::pack_linear_int4`]).
    Q4 { packed: Vec<u8>, scales: Vec<f16> },
    /// GGUF Q8_0 → `rbuild::linear_q8g`: int8 codes `[rows, cols]`, `w = d·q`.
    Q8Group { q: Vec<i8>, scales: Vec<f16> },
    /// GGUF Q4_1 → `rbuild::linear_q4_1`: codes u ∈ [0, 15] packed as `Q4` but stored as u
    /// itself, `w = d·u + m`.
    Q4Min { packed: Vec<u8>, scales: Vec<f16>, mins: Vec<f16> },
}

impl PreQuantized {
    /// The functional op that computes a linear on these blocks.
    pub fn op(&self) -> &'static str {
        match self.blocks {
            Blocks::Q4 { .. } => "rbuild::linear_q4",
            Blocks::Q8Group { .. } => "rbuild::linear_q8g",
            Blocks::Q4Min { .. } => "rbuild::linear_q4_1",
        }
    }

    /// Checks that the group size is one the kernels take and every buffer has its size.
    pub fn check(&self, name: &str) -> Result<()> {
        let (rows, cols, group) = (self.rows, self.cols, self.group);
        if !GROUP_SIZES.contains(&group) || cols % group != 0 {
            return Err(ExportError::Invalid(format!(
                "{name}: group size {group} must be one of {GROUP_SIZES:?} and divide in_features {cols}"
            )));
        }
        let elems = rows.checked_mul(cols).ok_or_else(|| ExportError::Invalid(format!("{name}: [{rows}, {cols}] overflows")))?;
        let params = elems / group;
        let (codes, want_codes, scales, mins) = match &self.blocks {
            Blocks::Q4 { packed, scales } => (packed.len(), elems / 2, scales.len(), params),
            Blocks::Q8Group { q, scales } => (q.len(), elems, scales.len(), params),
            Blocks::Q4Min { packed, scales, mins } => (packed.len(), elems / 2, scales.len(), mins.len()),
        };
        if codes != want_codes || scales != params || mins != params {
            return Err(ExportError::Invalid(format!(
                "{name}: {} blocks of [{rows}, {cols}] in groups of {group} need {want_codes} code bytes and {params} scales{}, got {codes} and {scales}{}",
                self.op(),
                if matches!(self.blocks, Blocks::Q4Min { .. }) { " and minimums" } else { "" },
                if matches!(self.blocks, Blocks::Q4Min { .. }) { format!(" / {mins}") } else { String::new() },
            )));
        }
        Ok(())
    }

    /// The float weight these blocks stand for, `[rows, cols]` row-major (for a tensor used
    /// outside a linear, such as a tied embedding table; and as the tests' reference).
    pub fn dequantize(&self) -> Vec<f32> {
        let groups = self.cols / self.group.max(1);
        let at = |i: usize| (i / self.cols) * groups + (i % self.cols) / self.group.max(1);
        let nibble = |p: &[u8], i: usize| (if i % 2 == 0 { p[i / 2] & 0x0F } else { p[i / 2] >> 4 }) as f32;
        (0..self.rows * self.cols)
            .map(|i| match &self.blocks {
                Blocks::Q4 { packed, scales } => scales[at(i)].to_f32() * (nibble(packed, i) - 8.0),
                Blocks::Q8Group { q, scales } => scales[at(i)].to_f32() * q[i] as f32,
                Blocks::Q4Min { packed, scales, mins } => scales[at(i)].to_f32() * nibble(packed, i) + mins[at(i)].to_f32(),
            })
            .collect()
    }

    /// Adds the blocks to `g` as constants named after `name`: the op's arguments after
    /// `input` and before `bias` (weight, scales[, minimums]).
    fn add_constants(&self, g: &mut Graph, name: &str) -> Vec<Arg> {
        let (rows, groups) = (self.rows, self.cols / self.group);
        let half = |v: &[f16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let mut add = |suffix: &str, dtype: ScalarType, sizes: &[usize], bytes: Vec<u8>| {
            Arg::Tensor(g.add_value(TensorMeta::fixed(dtype, sizes), Origin::Const(ConstData::owned(bytes)), format!("{name}.{suffix}")))
        };
        match &self.blocks {
            Blocks::Q4 { packed, scales } => vec![
                add("q4", ScalarType::Byte, &[rows, self.cols / 2], packed.clone()),
                add("scales", ScalarType::Half, &[rows, groups], half(scales)),
            ],
            Blocks::Q8Group { q, scales } => vec![
                add("q8g", ScalarType::Char, &[rows, self.cols], q.iter().map(|&c| c as u8).collect()),
                add("scales", ScalarType::Half, &[rows, groups], half(scales)),
            ],
            Blocks::Q4Min { packed, scales, mins } => vec![
                add("q4_1", ScalarType::Byte, &[rows, self.cols / 2], packed.clone()),
                add("scales", ScalarType::Half, &[rows, groups], half(scales)),
                add("mins", ScalarType::Half, &[rows, groups], half(mins)),
            ],
        }
    }
}

/// Rewrites node `node`, an `aten::linear` whose weight is `[w.rows, w.cols]`, into the linear
/// of `w`'s block format, adding the blocks as constants. The output keeps its shape and dtype.
pub fn replace_linear_with_blocks(g: &mut Graph, node: usize, w: &PreQuantized) -> Result<()> {
    let name = match g.nodes.get(node).and_then(|n| n.args.get(1)) {
        Some(Arg::Tensor(wv)) => g.values[*wv].name.clone(),
        _ => return Err(ExportError::Invalid(format!("node {node} is not a linear with a weight tensor"))),
    };
    w.check(&name)?;
    let weight_args = w.add_constants(g, &name);
    rewrite(g, node, w, weight_args, &name)
}

/// Every `aten::linear` whose weight is a constant named in `weights` becomes the linear of
/// that weight's block format; a weight read by several linears (tied) is stored once.
/// `skipped` in the report lists the names no linear reads (an embedding table, say), which
/// the caller must place some other way.
pub fn use_prequantized_linears(g: &mut Graph, weights: &HashMap<String, PreQuantized>) -> Result<QuantReport> {
    let mut report = QuantReport::default();
    let mut stored: HashMap<String, Vec<Arg>> = HashMap::new();
    for i in 0..g.nodes.len() {
        if g.nodes[i].op != "aten::linear" {
            continue;
        }
        let Some(Arg::Tensor(wv)) = g.nodes[i].args.get(1).cloned() else { continue };
        if !matches!(g.values[wv].origin, Origin::Const(_)) {
            continue;
        }
        let name = g.values[wv].name.clone();
        let Some(w) = weights.get(&name) else { continue };
        let weight_args = match stored.get(&name) {
            Some(args) => args.clone(),
            None => {
                w.check(&name)?;
                let args = w.add_constants(g, &name);
                stored.insert(name.clone(), args.clone());
                args
            }
        };
        rewrite(g, i, w, weight_args, &name)?;
        report.quantized += 1;
    }
    let mut unused: Vec<String> = weights.keys().filter(|n| !stored.contains_key(*n)).map(|n| format!("{n}: no aten::linear reads it")).collect();
    unused.sort();
    report.skipped = unused;
    Ok(report)
}

/// Every `aten::embedding` whose table is a constant named in `weights` with Q8_0 blocks
/// becomes ExecuTorch's `quantized_decomposed::embedding_byte` with one float32 scale per
/// block (the same values: `d·q`); the int8 codes are shared with a tied linear already
/// rewritten by [`use_prequantized_linears`] (its `{name}.q8g` constant). Other block formats
/// keep the float table (the lookup has no layout for them).
pub fn use_prequantized_embeddings(g: &mut Graph, weights: &HashMap<String, PreQuantized>) -> Result<QuantReport> {
    let mut report = QuantReport::default();
    let mut tables: HashMap<String, (ValueId, ValueId)> = HashMap::new();
    for i in 0..g.nodes.len() {
        if g.nodes[i].op != "aten::embedding" {
            continue;
        }
        let Some(Arg::Tensor(wv)) = g.nodes[i].args.first().cloned() else { continue };
        let name = g.values[wv].name.clone();
        let Some(w) = weights.get(&name) else { continue };
        let Blocks::Q8Group { q, scales } = &w.blocks else {
            report.skipped.push(format!("{name}: {} blocks have no embedding lookup; the table stays float32", w.op()));
            continue;
        };
        if !matches!(g.values[wv].origin, Origin::Const(_)) || g.meta(wv).sizes().as_deref() != Some(&[w.rows, w.cols][..]) {
            continue;
        }
        w.check(&name)?;
        let (table, scale) = *tables.entry(name.clone()).or_insert_with(|| {
            let codes = g.values.iter().position(|v| v.name == format!("{name}.q8g") && matches!(v.origin, Origin::Const(_)));
            let table = codes.unwrap_or_else(|| {
                g.add_value(TensorMeta::fixed(ScalarType::Char, &[w.rows, w.cols]), Origin::Const(ConstData::owned(q.iter().map(|&c| c as u8).collect())), format!("{name}.q8g"))
            });
            let bytes: Vec<u8> = scales.iter().flat_map(|d| d.to_f32().to_le_bytes()).collect();
            let scale = g.add_value(TensorMeta::fixed(ScalarType::Float, &[w.rows, w.cols / w.group]), Origin::Const(ConstData::owned(bytes)), format!("{name}.embedding_scales"));
            (table, scale)
        });
        let op = "quantized_decomposed::embedding_byte";
        let args = vec![Arg::Tensor(table), Arg::Tensor(scale), Arg::None, Arg::Int(-128), Arg::Int(127), g.nodes[i].args[1].clone()];
        replace_op(g, i, op, args, "embedding", &name)?;
        report.quantized += 1;
    }
    Ok(report)
}

/// Points linear `node` at the stored blocks, after checking that its weight has their shape.
fn rewrite(g: &mut Graph, node: usize, w: &PreQuantized, weight_args: Vec<Arg>, name: &str) -> Result<()> {
    let n = &g.nodes[node];
    if n.op != "aten::linear" {
        return Err(ExportError::Invalid(format!("{name}: node {node} is {}, not aten::linear", n.op)));
    }
    let wv = n.tensor_arg(1).map_err(|e| ExportError::Invalid(format!("{name}: {e}")))?;
    let sizes = g.meta(wv).sizes();
    if sizes.as_deref() != Some(&[w.rows, w.cols][..]) {
        return Err(ExportError::Invalid(format!("{name}: the linear's weight is {sizes:?}, the blocks are [{}, {}]", w.rows, w.cols)));
    }
    let op = w.op();
    let mut args = vec![n.args[0].clone()];
    args.extend(weight_args);
    args.push(n.args.get(2).cloned().unwrap_or(Arg::None));
    args.push(Arg::Int(w.group as i64));
    replace_op(g, node, op, args, "linear", name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::GraphBuilder;
    use crate::eval;

    struct Lcg(u64);

    impl Lcg {
        /// In [-1, 1).
        fn next(&mut self) -> f32 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
    }

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn floats(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    /// Random blocks of each format for a `[rows, cols]` weight.
    fn blocks(format: &str, rows: usize, cols: usize, group: usize, r: &mut Lcg) -> PreQuantized {
        let params = |r: &mut Lcg, lo: f32| (0..rows * cols / group).map(|_| f16::from_f32(lo + 0.05 * r.next())).collect::<Vec<_>>();
        let packed = |r: &mut Lcg| (0..rows * cols / 2).map(|_| ((r.next() + 1.0) * 127.99) as u8).collect::<Vec<_>>();
        let blocks = match format {
            "q4" => Blocks::Q4 { packed: packed(r), scales: params(r, 0.1) },
            "q8g" => Blocks::Q8Group { q: (0..rows * cols).map(|_| (r.next() * 128.0) as i8).collect(), scales: params(r, 0.01) },
            _ => Blocks::Q4Min { packed: packed(r), scales: params(r, 0.1), mins: params(r, -0.3) },
        };
        PreQuantized { rows, cols, group, blocks }
    }

    /// Activations the optimized kernels' int8 rounding keeps exact (integers with a ±127 in
    /// every 32 elements, times a power of two), so the quantized graph must equal the float
    /// one up to f32 summation order.
    fn int8_exact_input(len: usize, r: &mut Lcg) -> Vec<f32> {
        (0..len).map(|i| if i % 32 == 7 { -127.0 / 32.0 } else { (r.next() * 127.0).round() / 32.0 }).collect()
    }

    #[test]
    fn prequantized_linears_compute_the_float_linear_on_their_dequantized_weights() {
        for (format, group, op) in [("q4", 32, "rbuild::linear_q4"), ("q8g", 32, "rbuild::linear_q8g"), ("q8g", 64, "rbuild::linear_q8g"), ("q4_1", 32, "rbuild::linear_q4_1"), ("q4_1", 128, "rbuild::linear_q4_1")] {
            let (k, n1, n2) = (256, 7, 5);
            let mut r = Lcg(group as u64 + format.len() as u64);
            let w1 = blocks(format, n1, k, group, &mut r);
            let w2 = blocks(format, n2, k, group, &mut r);
            let bias: Vec<f32> = (0..n1).map(|_| r.next()).collect();
            // linear(x, w1, bias), the tied linear(x, w1) and linear(x, w2).
            let mut b = GraphBuilder::new();
            let x = b.input("x", TensorMeta::fixed(ScalarType::Float, &[2, 3, k]));
            let konst = |b: &mut GraphBuilder, name: &str, sizes: &[usize], v: &[f32]| {
                b.constant(name, ScalarType::Float, sizes, ConstData::owned(f32_bytes(v))).unwrap()
            };
            let cw1 = konst(&mut b, "l1.weight", &[n1, k], &w1.dequantize());
            let cw2 = konst(&mut b, "l2.weight", &[n2, k], &w2.dequantize());
            let cb = konst(&mut b, "l1.bias", &[n1], &bias);
            let y1 = b.linear(x, cw1, Some(cb)).unwrap();
            let y2 = b.linear(x, cw1, None).unwrap();
            let y3 = b.linear(x, cw2, None).unwrap();
            for y in [y1, y2, y3] {
                b.output(y);
            }
            let mut g = b.finish();
            let xs = int8_exact_input(6 * k, &mut r);
            let before = eval::evaluate(&g, &[f32_bytes(&xs)]).unwrap();

            let mut weights = HashMap::new();
            weights.insert("l1.weight".to_string(), w1);
            weights.insert("l2.weight".to_string(), w2);
            weights.insert("tok_embeddings.weight".to_string(), blocks(format, 3, k, group, &mut r));
            let values = g.values.len();
            let report = use_prequantized_linears(&mut g, &weights).unwrap();
            assert_eq!(report.quantized, 3, "{format}");
            assert_eq!(report.skipped, vec!["tok_embeddings.weight: no aten::linear reads it".to_string()]);
            assert_eq!(g.nodes.iter().filter(|n| n.op == op).count(), 3, "{format}");
            let per_weight = if format == "q4_1" { 3 } else { 2 };
            assert_eq!(g.values.len() - values, 2 * per_weight, "{format}: the tied weight is stored once");

            let after = eval::evaluate(&g, &[f32_bytes(&xs)]).unwrap();
            // Against the float linear on the dequantized weights, summed in f64; the float
            // graph's own f32 sums (`before`) are held to the same test.
            let exact = |w: &PreQuantized, bias: Option<&[f32]>| -> Vec<f32> {
                let wf = w.dequantize();
                let mut y = Vec::new();
                for xr in xs.chunks(k) {
                    for (j, wr) in wf.chunks(k).enumerate() {
                        let dot: f64 = xr.iter().zip(wr).map(|(&a, &b)| a as f64 * b as f64).sum();
                        y.push((dot + bias.map_or(0.0, |b| b[j] as f64)) as f32);
                    }
                }
                y
            };
            let wants = [exact(&weights["l1.weight"], Some(&bias)), exact(&weights["l1.weight"], None), exact(&weights["l2.weight"], None)];
            for (what, outs) in [("quantized", &after), ("float", &before)] {
                for (o, (got, want)) in outs.iter().zip(&wants).enumerate() {
                    for (i, (&got, &want)) in floats(got).iter().zip(want).enumerate() {
                        assert!(
                            (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                            "{what} {format} g{group} output {o}[{i}]: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn dequantize_follows_each_formats_formula() {
        let scales = vec![f16::from_f32(0.5), f16::from_f32(2.0)];
        let mins = vec![f16::from_f32(-1.0), f16::from_f32(0.25)];
        // 64 elements, group 32: element 0 holds nibble 0x3, element 1 nibble 0xC, ...
        let packed = vec![0xC3; 32];
        let q4 = PreQuantized { rows: 1, cols: 64, group: 32, blocks: Blocks::Q4 { packed: packed.clone(), scales: scales.clone() } };
        let d = q4.dequantize();
        assert_eq!((d[0], d[1], d[32], d[33]), (0.5 * -5.0, 0.5 * 4.0, 2.0 * -5.0, 2.0 * 4.0));
        let q41 = PreQuantized { rows: 1, cols: 64, group: 32, blocks: Blocks::Q4Min { packed, scales: scales.clone(), mins } };
        let d = q41.dequantize();
        assert_eq!((d[0], d[1], d[32], d[33]), (0.5 * 3.0 - 1.0, 0.5 * 12.0 - 1.0, 2.0 * 3.0 + 0.25, 2.0 * 12.0 + 0.25));
        let q: Vec<i8> = (0..64).map(|i| i as i8 - 32).collect();
        let q8 = PreQuantized { rows: 1, cols: 64, group: 32, blocks: Blocks::Q8Group { q, scales } };
        let d = q8.dequantize();
        assert_eq!((d[0], d[31], d[32], d[63]), (-16.0, -0.5, 0.0, 62.0));
    }

    #[test]
    fn mismatched_blocks_are_errors_naming_the_weight() {
        let mut r = Lcg(9);
        let mut good = blocks("q4_1", 4, 64, 32, &mut r);
        assert!(good.check("w").is_ok());
        good.group = 48;
        let e = good.check("w").unwrap_err().to_string();
        assert!(e.contains("w: group size 48"), "{e}");
        good.group = 32;
        if let Blocks::Q4Min { mins, .. } = &mut good.blocks {
            mins.pop();
        }
        let e = good.check("w").unwrap_err().to_string();
        assert!(e.contains("rbuild::linear_q4_1") && e.contains("minimums"), "{e}");

        // The linear's weight is [3, 64]; blocks for [4, 64] are refused, the graph unchanged.
        let mut b = GraphBuilder::new();
        let x = b.input("x", TensorMeta::fixed(ScalarType::Float, &[1, 64]));
        let w = b.constant("w", ScalarType::Float, &[3, 64], ConstData::owned(vec![0; 3 * 64 * 4])).unwrap();
        let y = b.linear(x, w, None).unwrap();
        b.output(y);
        let mut g = b.finish();
        let q8 = blocks("q8g", 4, 64, 32, &mut r);
        let e = replace_linear_with_blocks(&mut g, 0, &q8).unwrap_err().to_string();
        assert!(e.contains("w: the linear's weight is Some([3, 64])"), "{e}");
        assert_eq!(g.nodes[0].op, "aten::linear");
        let q8 = blocks("q8g", 3, 64, 32, &mut r);
        replace_linear_with_blocks(&mut g, 0, &q8).unwrap();
        assert_eq!(g.nodes[0].op, "rbuild::linear_q8g");
        assert_eq!(g.nodes[0].args[4], Arg::Int(32));
    }
}
