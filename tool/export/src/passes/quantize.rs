//! Weight quantization of linear layers and embedding tables with constant weights.
//!
//! - float16 weights (`fp16`): the same values rounded to half precision, f32 arithmetic →
//!   `rbuild::linear_f16` (half the bytes a memory-bound decoder streams per token);
//! - int8 weight-only: per output channel, symmetric → `rbuild::linear_q8`;
//! - int4 weight-only: groups of `group` along K, symmetric → `rbuild::linear_q4`;
//! - 8da4w: the same int4 weights with activations quantized to int8 at run time →
//!   `rbuild::linear_8da4w`;
//! - weights that arrive quantized (GGUF blocks): see [`super::prequantized`];
//! - embeddings: 8-bit per row (`quantized_decomposed::embedding_byte`) or 4-bit per group
//!   (`quantized_decomposed::embedding_4bit`, ExecuTorch's packing), both runnable by
//!   ExecuTorch's quantized kernels.
//!
//! int4 codes are q ∈ [−8, 7] with the scale of a group chosen as llama.cpp's q4_0 chooses it
//! (the element of largest magnitude maps to −8), and scales stored as float16, rounded before
//! the codes are computed so codes and stored scale agree.

use half::f16;
use rbuild_runtime::ScalarType;

pub use super::prequantized::{replace_linear_with_blocks, use_prequantized_linears, Blocks, PreQuantized};
use super::{f32_bytes, f32s};
use crate::error::{ExportError, Result};
use crate::graph::{Arg, ConstData, Graph, Origin, TensorMeta, ValueId};

/// How linear weights are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinearQuant {
    F16,
    Int8,
    Int4 { group: usize },
    Int8DynInt4 { group: usize },
}

impl LinearQuant {
    pub fn name(&self) -> String {
        match self {
            LinearQuant::F16 => "fp16".into(),
            LinearQuant::Int8 => "int8".into(),
            LinearQuant::Int4 { group } => format!("int4-g{group}"),
            LinearQuant::Int8DynInt4 { group } => format!("8da4w-g{group}"),
        }
    }
}

/// How embedding tables are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbeddingQuant {
    Int8,
    Int4 { group: usize },
}

/// What a quantization pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuantReport {
    pub quantized: usize,
    /// Layers left in float32, with the reason.
    pub skipped: Vec<String>,
}

fn float_const(g: &Graph, v: ValueId) -> Option<(Vec<usize>, Vec<f32>)> {
    let m = g.meta(v);
    match (&g.values[v].origin, m.dtype, m.sizes()) {
        (Origin::Const(c), ScalarType::Float, Some(s)) if s.len() == 2 => Some((s, f32s(&c.bytes()))),
        _ => None,
    }
}

fn add_const(g: &mut Graph, name: String, dtype: ScalarType, sizes: &[usize], bytes: Vec<u8>) -> ValueId {
    g.add_value(TensorMeta::fixed(dtype, sizes), Origin::Const(ConstData::owned(bytes)), name)
}

/// Per-row symmetric int8: scale = max|w| / 127.
pub fn quantize_rows_int8(w: &[f32], rows: usize, cols: usize) -> (Vec<i8>, Vec<f32>) {
    let mut q = vec![0i8; rows * cols];
    let mut scales = vec![0f32; rows];
    for r in 0..rows {
        let row = &w[r * cols..(r + 1) * cols];
        let max = row.iter().fold(0f32, |m, x| m.max(x.abs()));
        let s = if max > 0.0 { max / 127.0 } else { 1.0 };
        scales[r] = s;
        for (qv, &x) in q[r * cols..(r + 1) * cols].iter_mut().zip(row) {
            *qv = (x / s).round().clamp(-127.0, 127.0) as i8;
        }
    }
    (q, scales)
}

/// Groupwise symmetric int4 codes in [−8, 7] (row-major [rows, cols]) and float16 scales
/// [rows, cols / group].
pub fn quantize_groups_int4(w: &[f32], rows: usize, cols: usize, group: usize) -> (Vec<i8>, Vec<f16>) {
    let groups = cols / group;
    let mut q = vec![0i8; rows * cols];
    let mut scales = vec![f16::ZERO; rows * groups];
    for r in 0..rows {
        for gi in 0..groups {
            let base = r * cols + gi * group;
            let vals = &w[base..base + group];
            let extreme = vals.iter().fold(0f32, |m, &x| if x.abs() > m.abs() { x } else { m });
            let d = f16::from_f32(extreme / -8.0);
            scales[r * groups + gi] = d;
            let d = d.to_f32();
            let inv = if d != 0.0 { 1.0 / d } else { 0.0 };
            for (k, &x) in vals.iter().enumerate() {
                q[base + k] = (x * inv).round().clamp(-8.0, 7.0) as i8;
            }
        }
    }
    (q, scales)
}

/// `rbuild::linear_q4` packing: element k of a row in byte k/2, low nibble for even k, stored
/// as q + 8.
pub fn pack_linear_int4(q: &[i8]) -> Vec<u8> {
    q.chunks(2).map(|p| ((p[0] + 8) as u8 & 0x0F) | ((((p.get(1).copied().unwrap_or(0)) + 8) as u8 & 0x0F) << 4)).collect()
}

/// ExecuTorch's `embedding_4bit` packing: even elements in the high nibble, odd in the low
/// one, stored as q + 8.
pub fn pack_embedding_int4(q: &[i8]) -> Vec<u8> {
    q.chunks(2).map(|p| ((((p[0] + 8) as u8) & 0x0F) << 4) | (((p.get(1).copied().unwrap_or(0)) + 8) as u8 & 0x0F)).collect()
}

fn f16_bytes(v: &[f16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Replaces every `aten::linear` whose weight is a float32 constant with the quantized linear
/// of `mode`. Runs before the out-variant pass (on functional ops).
pub fn quantize_linears(g: &mut Graph, mode: LinearQuant) -> Result<QuantReport> {
    let mut report = QuantReport::default();
    // Weight → (stored weight, scales if the format has them): a tied weight is stored once.
    let mut cache: std::collections::HashMap<ValueId, (ValueId, Option<ValueId>)> = Default::default();
    for i in 0..g.nodes.len() {
        if g.nodes[i].op != "aten::linear" {
            continue;
        }
        let Some(Arg::Tensor(wv)) = g.nodes[i].args.get(1).cloned() else { continue };
        let Some((sizes, w)) = float_const(g, wv) else {
            report.skipped.push(format!("{}: weight is not a float32 constant", g.values[wv].name));
            continue;
        };
        let (n, k) = (sizes[0], sizes[1]);
        let name = g.values[wv].name.clone();
        let group = match mode {
            LinearQuant::F16 | LinearQuant::Int8 => None,
            LinearQuant::Int4 { group } | LinearQuant::Int8DynInt4 { group } => Some(group),
        };
        if let Some(gs) = group {
            if gs == 0 || k % gs != 0 || gs % 2 != 0 {
                report.skipped.push(format!("{name}: in_features {k} is not a multiple of group size {gs}"));
                continue;
            }
        }
        let (qw, qs) = match cache.get(&wv) {
            Some(&pair) => pair,
            None => {
                let pair = match group {
                    None if mode == LinearQuant::F16 => {
                        let h: Vec<f16> = w.iter().map(|&x| f16::from_f32(x)).collect();
                        // No scales: the second slot repeats the weight and is not used.
                        (add_const(g, format!("{name}.f16"), ScalarType::Half, &[n, k], f16_bytes(&h)), None)
                    }
                    None => {
                        let (q, s) = quantize_rows_int8(&w, n, k);
                        let q = add_const(g, format!("{name}.q8"), ScalarType::Char, &[n, k], q.iter().map(|&x| x as u8).collect());
                        let s = add_const(g, format!("{name}.scales"), ScalarType::Float, &[n], f32_bytes(&s));
                        (q, Some(s))
                    }
                    Some(gs) => {
                        let (q, s) = quantize_groups_int4(&w, n, k, gs);
                        let q = add_const(g, format!("{name}.q4"), ScalarType::Byte, &[n, k / 2], pack_linear_int4(&q));
                        let s = add_const(g, format!("{name}.scales"), ScalarType::Half, &[n, k / gs], f16_bytes(&s));
                        (q, Some(s))
                    }
                };
                cache.insert(wv, pair);
                pair
            }
        };
        let x = g.nodes[i].args[0].clone();
        let bias = g.nodes[i].args.get(2).cloned().unwrap_or(Arg::None);
        let op = match mode {
            LinearQuant::F16 => "rbuild::linear_f16",
            LinearQuant::Int8 => "rbuild::linear_q8",
            LinearQuant::Int4 { .. } => "rbuild::linear_q4",
            LinearQuant::Int8DynInt4 { .. } => "rbuild::linear_8da4w",
        };
        let mut args = vec![x, Arg::Tensor(qw)];
        args.extend(qs.map(Arg::Tensor));
        args.push(bias);
        if let Some(gs) = group {
            args.push(Arg::Int(gs as i64));
        }
        replace_op(g, i, op, args, "linear", &name)?;
        report.quantized += 1;
    }
    Ok(report)
}

/// Replaces every `aten::embedding` whose table is a float32 constant with ExecuTorch's
/// dequantizing lookup.
pub fn quantize_embeddings(g: &mut Graph, mode: EmbeddingQuant) -> Result<QuantReport> {
    let mut report = QuantReport::default();
    for i in 0..g.nodes.len() {
        if g.nodes[i].op != "aten::embedding" {
            continue;
        }
        let Some(Arg::Tensor(wv)) = g.nodes[i].args.first().cloned() else { continue };
        let Some((sizes, w)) = float_const(g, wv) else {
            report.skipped.push(format!("{}: table is not a float32 constant", g.values[wv].name));
            continue;
        };
        let (v, e) = (sizes[0], sizes[1]);
        let name = g.values[wv].name.clone();
        let idx = g.nodes[i].args[1].clone();
        let (op, table, scales, qmin, qmax) = match mode {
            EmbeddingQuant::Int8 => {
                let (q, s) = quantize_rows_int8(&w, v, e);
                let t = add_const(g, format!("{name}.q8"), ScalarType::Char, &[v, e], q.iter().map(|&x| x as u8).collect());
                let s = add_const(g, format!("{name}.scales"), ScalarType::Float, &[v], f32_bytes(&s));
                ("quantized_decomposed::embedding_byte", t, s, -128, 127)
            }
            EmbeddingQuant::Int4 { group } => {
                if group == 0 || e % group != 0 || e % 2 != 0 {
                    report.skipped.push(format!("{name}: dim {e} is not a multiple of group size {group}"));
                    continue;
                }
                let (q, s) = quantize_groups_int4(&w, v, e, group);
                let s: Vec<f32> = s.iter().map(|x| x.to_f32()).collect();
                let t = add_const(g, format!("{name}.q4"), ScalarType::Byte, &[v, e / 2], pack_embedding_int4(&q));
                let s = add_const(g, format!("{name}.scales"), ScalarType::Float, &[v, e / group], f32_bytes(&s));
                ("quantized_decomposed::embedding_4bit", t, s, -8, 7)
            }
        };
        let args = vec![Arg::Tensor(table), Arg::Tensor(scales), Arg::None, Arg::Int(qmin), Arg::Int(qmax), idx];
        replace_op(g, i, op, args, "embedding", &name)?;
        report.quantized += 1;
    }
    Ok(report)
}

/// Rewrites node `node` to `op` with `args`, after checking that the new op gives exactly the
/// output the old one did (`was` names the old op in the error, `name` the weight).
pub(crate) fn replace_op(g: &mut Graph, node: usize, op: &str, args: Vec<Arg>, was: &str, name: &str) -> Result<()> {
    let metas = crate::shape::infer(g, op, &args)?;
    let old = &g.values[g.nodes[node].outputs[0]].meta;
    if metas.len() != 1 || metas[0] != *old {
        return Err(ExportError::Invalid(format!("{op} for {name} gives {metas:?}, the {was} gave {old:?}")));
    }
    g.nodes[node].op = op.to_string();
    g.nodes[node].args = args;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int4_groups_round_trip_within_half_a_step() {
        let w: Vec<f32> = (0..128).map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0).collect();
        let (q, s) = quantize_groups_int4(&w, 2, 64, 32);
        for (i, &x) in w.iter().enumerate() {
            let d = s[i / 32].to_f32();
            let back = q[i] as f32 * d;
            // Half a step, or one step where the opposite extreme clips at +7 (as in q4_0).
            let bound = if q[i] == 7 { d.abs() } else { d.abs() * 0.5 };
            assert!((back - x).abs() <= bound + 1e-6, "{i}: {x} vs {back}");
            assert!((-8..=7).contains(&q[i]));
        }
        // The extreme element maps to −8 exactly.
        assert!(q.iter().any(|&c| c == -8));
        let packed = pack_linear_int4(&[-8, 7, 0, -1]);
        assert_eq!(packed, vec![0xF0, 0x78]);
        let packed = pack_embedding_int4(&[-8, 7, 0, -1]);
        assert_eq!(packed, vec![0x0F, 0x87]);
    }

    #[test]
    fn int8_rows_use_the_row_maximum() {
        let (q, s) = quantize_rows_int8(&[0.5, -1.0, 0.25, 0.0, 0.0, 0.0], 2, 3);
        assert_eq!(q, vec![64, -127, 32, 0, 0, 0]);
        assert_eq!(s, vec![1.0 / 127.0, 1.0]);
    }
}
