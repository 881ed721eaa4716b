//! Calibration: runs the float graph (after BN folding and the other float passes) on sample
//! inputs with rbuild's kernels and records each float activation's min/max, from which
//! [`super::quantize_static`] chooses int8 parameters.

use std::collections::HashMap;

use rbuild_runtime::ScalarType;

use super::f32s;
use crate::error::{ExportError, Result};
use crate::eval;
use crate::graph::{Graph, ValueId};

/// Observed [min, max] of every float value over all calibration samples.
#[derive(Clone, Debug, Default)]
pub struct Ranges {
    pub ranges: HashMap<ValueId, (f32, f32)>,
    /// How many samples were run.
    pub samples: usize,
    /// The float graph's outputs on each sample (the reference int8 quality is measured against).
    pub outputs: Vec<Vec<Vec<u8>>>,
}

impl Ranges {
    pub fn get(&self, v: ValueId) -> Option<(f32, f32)> {
        self.ranges.get(&v).copied()
    }
}

/// Runs `g` on each sample (one byte buffer per graph input, in the graph's dtypes) and records
/// the range of every float input and node output. NaN values are ignored; a value that is only
/// NaN/inf is an error naming it.
pub fn calibrate(g: &Graph, samples: &[Vec<Vec<u8>>]) -> Result<Ranges> {
    if samples.is_empty() {
        return Err(ExportError::Invalid("calibration needs at least one sample input".into()));
    }
    let mut ranges: HashMap<ValueId, (f32, f32)> = HashMap::new();
    let mut outputs = Vec::with_capacity(samples.len());
    for (i, sample) in samples.iter().enumerate() {
        let out = eval::evaluate_observed(g, sample, |v, bytes| {
            if g.meta(v).dtype != ScalarType::Float {
                return;
            }
            let (mut lo, mut hi) = ranges.get(&v).copied().unwrap_or((f32::INFINITY, f32::NEG_INFINITY));
            for x in f32s(bytes) {
                if x.is_finite() {
                    lo = lo.min(x);
                    hi = hi.max(x);
                }
            }
            ranges.insert(v, (lo, hi));
        })
        .map_err(|e| ExportError::Invalid(format!("calibration sample {i}: {e}")))?;
        outputs.push(out);
    }
    for (&v, &(lo, hi)) in &ranges {
        if lo > hi {
            return Err(ExportError::Invalid(format!("calibration: value '{}' has no finite element", g.values[v].name)));
        }
    }
    Ok(Ranges { ranges, samples: samples.len(), outputs })
}

/// Deterministic inputs for calibration without data: normal(0, 1) floats from a seeded
/// generator (splitmix64 + Box–Muller), one buffer per float graph input.
pub fn random_samples(g: &Graph, count: usize, seed: u64) -> Result<Vec<Vec<Vec<u8>>>> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..count)
        .map(|_| {
            g.inputs
                .iter()
                .map(|&v| {
                    let m = g.meta(v);
                    let sizes = m.sizes().ok_or_else(|| ExportError::Invalid("calibration needs static input sizes".into()))?;
                    if m.dtype != ScalarType::Float {
                        return Err(ExportError::Invalid(format!("random calibration: input '{}' is {}, not float32", g.values[v].name, m.dtype)));
                    }
                    let n: usize = sizes.iter().product();
                    let vals: Vec<f32> = (0..n)
                        .map(|_| {
                            let (u1, u2) = (next().max(1e-12), next());
                            ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
                        })
                        .collect();
                    Ok(super::f32_bytes(&vals))
                })
                .collect()
        })
        .collect()
}
