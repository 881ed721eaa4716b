//! How close an int8 program is to its float original, measured on the calibration samples
//! (a report, not a pass): output SQNR, top-1 agreement with fp32's margins, and the model's
//! *sensitivity floor* — the float graph with only its input rounded to int8. A model whose
//! floor is low amplifies input rounding so much that no int8 program can track it closely,
//! whatever the calibration. [`sensitivity`] ranks the quantized activations by the error each
//! one causes alone, to show where precision is lost.

use crate::error::{ExportError, Result};
use crate::eval;
use crate::graph::{Graph, ValueId};
use crate::passes::quantize_static::{ActQ, QMAX, QMIN};

/// Samples the report runs at most (each costs two graph evaluations).
pub const MAX_SAMPLES: usize = 16;

/// fp32's and int8's best class on one sample, and fp32's lead over its runner-up.
#[derive(Clone, Debug, PartialEq)]
pub struct Top1 {
    pub fp32: usize,
    pub int8: usize,
    pub fp32_margin: f32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SampleQuality {
    /// int8 outputs against fp32's, all float outputs together.
    pub sqnr_db: f64,
    /// When the first output is a vector of scores ([C] or [1, C]).
    pub top1: Option<Top1>,
    /// The float graph with only its input quantized, against fp32 (None: the input stays float).
    pub input_floor_db: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Int8Quality {
    pub samples: Vec<SampleQuality>,
}

impl Int8Quality {
    /// (samples whose int8 top-1 equals fp32's, samples with a top-1).
    pub fn top1_agreement(&self) -> Option<(usize, usize)> {
        let t: Vec<&Top1> = self.samples.iter().filter_map(|s| s.top1.as_ref()).collect();
        (!t.is_empty()).then(|| (t.iter().filter(|t| t.fp32 == t.int8).count(), t.len()))
    }

    /// One line for build logs: SQNR range, top-1 agreement (with fp32's margins where it
    /// differs) and the input-rounding floor.
    pub fn summary(&self) -> String {
        let (lo, hi) = min_max(self.samples.iter().map(|s| s.sqnr_db));
        let mut line = format!("int8 vs fp32 on {} calibration sample(s): output SQNR {}", self.samples.len(), db_range(lo, hi));
        if let Some((agree, n)) = self.top1_agreement() {
            line += &format!(", top-1 agrees on {agree}/{n}");
            let margins: Vec<String> =
                self.samples.iter().filter_map(|s| s.top1.as_ref()).filter(|t| t.fp32 != t.int8).map(|t| format!("{:.2}", t.fp32_margin)).collect();
            if !margins.is_empty() {
                line += &format!(" (fp32's lead where it differs: {})", margins.join(", "));
            }
        }
        let floors: Vec<f64> = self.samples.iter().filter_map(|s| s.input_floor_db).collect();
        if !floors.is_empty() {
            let (lo, hi) = min_max(floors.into_iter());
            line += &format!("; input rounding alone: {}", db_range(lo, hi));
        }
        line
    }
}

fn min_max(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)))
}

fn db_range(lo: f64, hi: f64) -> String {
    if (hi - lo).abs() < 0.05 {
        format!("{lo:.1} dB")
    } else {
        format!("{lo:.1}–{hi:.1} dB")
    }
}

fn f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

/// The float outputs of a graph run, concatenated (int outputs are not compared).
fn float_outputs(g: &Graph, outs: &[Vec<u8>]) -> Vec<f32> {
    g.outputs
        .iter()
        .zip(outs)
        .filter(|(&o, _)| g.meta(o).dtype == rbuild_runtime::ScalarType::Float)
        .flat_map(|(_, b)| f32s(b).collect::<Vec<_>>())
        .collect()
}

/// 10·log10(‖reference‖² / ‖reference − test‖²); +inf when they are equal.
pub fn sqnr_db(reference: &[f32], test: &[f32]) -> f64 {
    let signal: f64 = reference.iter().map(|&x| (x as f64).powi(2)).sum();
    let noise: f64 = reference.iter().zip(test).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum();
    if noise == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (signal / noise).log10()
    }
}

/// `x` through ExecuTorch's quantize_per_tensor and dequantize_per_tensor.
fn fake_quantize(q: ActQ, bytes: &mut [u8]) {
    for c in bytes.chunks_exact_mut(4) {
        let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        let code = q.quantize(x).clamp(QMIN, QMAX);
        c.copy_from_slice(&(((code - q.zero_point) as i32) as f32 * q.scale).to_le_bytes());
    }
}

fn top1(fp32: &[f32], int8: &[f32], first_len: usize) -> Option<Top1> {
    if first_len < 2 {
        return None;
    }
    let (f, q) = (&fp32[..first_len], &int8[..first_len]);
    let argmax = |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0);
    let best = argmax(f);
    let runner_up = f.iter().enumerate().filter(|&(i, _)| i != best).map(|(_, &v)| v).fold(f32::NEG_INFINITY, f32::max);
    Some(Top1 { fp32: best, int8: argmax(q), fp32_margin: f[best] - runner_up })
}

/// Measures `int8_graph` against `float_graph` on up to [`MAX_SAMPLES`] samples.
/// `float_outputs_per_sample` are the float graph's outputs (calibration already computed
/// them); `activations` are the quantized float values and their parameters.
pub fn measure(
    float_graph: &Graph,
    int8_graph: &Graph,
    samples: &[Vec<Vec<u8>>],
    float_outputs_per_sample: &[Vec<Vec<u8>>],
    activations: &[(ValueId, ActQ)],
) -> Result<Int8Quality> {
    let first_len = match float_graph.outputs.first().map(|&o| float_graph.meta(o)) {
        Some(m) if m.dtype == rbuild_runtime::ScalarType::Float => match m.sizes().as_deref() {
            Some([c]) | Some([1, c]) => *c,
            _ => 0,
        },
        _ => 0,
    };
    let input_q: Vec<(ValueId, ActQ)> = activations.iter().filter(|(v, _)| float_graph.inputs.contains(v)).copied().collect();
    let mut out = Vec::new();
    for (i, (sample, fp32_out)) in samples.iter().zip(float_outputs_per_sample).take(MAX_SAMPLES).enumerate() {
        let context = |e: ExportError| ExportError::Invalid(format!("int8 quality, sample {i}: {e}"));
        let fp32 = float_outputs(float_graph, fp32_out);
        let int8 = float_outputs(int8_graph, &eval::evaluate(int8_graph, sample).map_err(context)?);
        let input_floor_db = if input_q.is_empty() {
            None
        } else {
            let rounded = eval::evaluate_with(float_graph, sample, |v, bytes| {
                if let Some((_, q)) = input_q.iter().find(|(x, _)| *x == v) {
                    fake_quantize(*q, bytes);
                }
            })
            .map_err(context)?;
            Some(sqnr_db(&fp32, &float_outputs(float_graph, &rounded)))
        };
        out.push(SampleQuality { sqnr_db: sqnr_db(&fp32, &int8), top1: top1(&fp32, &int8, first_len), input_floor_db });
    }
    Ok(Int8Quality { samples: out })
}

/// Each quantized activation alone fake-quantized in the float graph: (value, output SQNR in dB
/// over the samples together), worst first. Costs one graph evaluation per activation and sample.
pub fn sensitivity(
    float_graph: &Graph,
    samples: &[Vec<Vec<u8>>],
    float_outputs_per_sample: &[Vec<Vec<u8>>],
    activations: &[(ValueId, ActQ)],
) -> Result<Vec<(ValueId, f64)>> {
    let fp32: Vec<Vec<f32>> = float_outputs_per_sample.iter().take(MAX_SAMPLES).map(|o| float_outputs(float_graph, o)).collect();
    let mut rows = Vec::with_capacity(activations.len());
    for &(v, q) in activations {
        let (mut reference, mut test) = (Vec::new(), Vec::new());
        for (sample, f) in samples.iter().zip(&fp32) {
            let outs = eval::evaluate_with(float_graph, sample, |x, bytes| {
                if x == v {
                    fake_quantize(q, bytes);
                }
            })
            .map_err(|e| ExportError::Invalid(format!("sensitivity of '{}': {e}", float_graph.values[v].name)))?;
            reference.extend_from_slice(f);
            test.extend(float_outputs(float_graph, &outs));
        }
        rows.push((v, sqnr_db(&reference, &test)));
    }
    rows.sort_by(|a, b| a.1.total_cmp(&b.1));
    Ok(rows)
}
