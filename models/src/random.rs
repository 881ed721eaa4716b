//! Deterministic, well-conditioned random state dicts with torchvision's names and shapes, for
//! tests and benchmarks without downloaded weights.
//!
//! The model itself lists its parameters: it is built once with [`Params::random`], which
//! invents each tensor on first request, so names and shapes cannot drift from the model code.
//! The recipe follows the one behind the shared reference weights (testdata README,
//! `well_conditioned`).

use std::collections::HashMap;

use rbuild_export::error::Result;
use rbuild_export::graph::Origin;
use rbuild_export::passes::decompose;
use rbuild_export::{eval, Arg, ConstData, ExportError, Graph, GraphBuilder, TensorMeta, ValueId};
use rbuild_runtime::ScalarType;

use crate::params::{Init, Params};
use crate::Weights;

/// SplitMix64 with Box–Muller normals: tiny and fast. The integer stream is the same everywhere;
/// normals use f64 `ln`/`sin`/`cos`, whose last bit may vary between math libraries (rarely
/// visible after rounding to f32).
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
    spare: Option<f64>,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed, spare: None }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal.
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        // 1 - u lies in (0, 1], so the log is finite.
        let r = (-2.0 * (1.0 - self.uniform()).ln()).sqrt();
        let theta = std::f64::consts::TAU * self.uniform();
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }

    fn normals(&mut self, n: usize, std: f64) -> Vec<f32> {
        (0..n).map(|_| (self.normal() * std) as f32).collect()
    }

    fn uniforms(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f32> {
        (0..n).map(|_| (lo + (hi - lo) * self.uniform()) as f32).collect()
    }

    /// `n` values drawn for a parameter of kind `init`: conv weights N(0, 2/fan_in), conv biases
    /// N(0, 0.1²), linear weights N(0, 1/fan_in), linear biases N(0, 0.01²), BatchNorm gamma
    /// U(0.6, 1.4), beta and running mean N(0, 0.1²), running variance U(0.5, 1.5).
    pub fn init(&mut self, init: Init, n: usize) -> Vec<f32> {
        match init {
            Init::ConvWeight { fan_in } => self.normals(n, (2.0 / fan_in.max(1) as f64).sqrt()),
            Init::ConvBias => self.normals(n, 0.1),
            Init::LinearWeight { fan_in } => self.normals(n, 1.0 / (fan_in.max(1) as f64).sqrt()),
            Init::LinearBias => self.normals(n, 0.01),
            Init::BnGamma => self.uniforms(n, 0.6, 1.4),
            Init::BnBeta | Init::BnMean => self.normals(n, 0.1),
            Init::BnVar => self.uniforms(n, 0.5, 1.5),
        }
    }
}

/// The calibration batch: smooth random images, large enough that the last feature maps still
/// give each BatchNorm channel dozens of samples.
const CALIBRATION_INPUT: [usize; 4] = [4, 3, 128, 128];
/// Standard deviation the final Linear is scaled to give on the calibration batch (the shared
/// reference models use 2).
const TARGET_LOGIT_STD: f64 = 2.0;

/// A random state dict for model `name` (see [`crate::names`]).
///
/// Parameters are drawn as described in [`Rng::init`]; then, as for the shared reference
/// weights, BatchNorm running statistics are replaced by the true statistics of each BatchNorm's
/// input on a batch of smooth random images (so activations stay O(1) through the depth instead
/// of drifting by orders of magnitude) and the final Linear is rescaled so the logits have std 2.
/// The same seed gives identical bytes on a given platform (the calibration runs rbuild's own
/// kernels, whose results do not depend on timing; another CPU's float rounding could shift
/// the last bits).
pub fn random_weights(name: &str, seed: u64) -> Result<Weights> {
    let model = crate::model(name)?;
    let mut b = GraphBuilder::new();
    let x = b.input("input", TensorMeta::fixed(ScalarType::Float, &CALIBRATION_INPUT));
    let mut p = Params::random(seed);
    let logits = (model.build)(&mut b, &mut p, x)?;
    b.output(logits);
    let mut w = p.into_weights();
    let mut g = b.finish();
    decompose::decompose(&mut g, &Default::default())?;
    let images = image_like(seed ^ 0xC0FF_EE00_D15E_A5E5, CALIBRATION_INPUT);
    calibrate(&mut g, &mut w, model.classifier, images)?;
    Ok(w)
}

/// Image-like NCHW input: smooth Gaussian fields (bilinear upsamplings of random grids, coarser
/// to finer across the batch) with roughly unit variance, like normalised natural images.
/// White noise is a poor stand-in: its high frequencies drive conv stems far harder.
pub fn image_like(seed: u64, shape: [usize; 4]) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let [n, c, h, w] = shape;
    let mut out = Vec::with_capacity(n * c * h * w);
    for i in 0..n {
        let cells = 4usize << (i % 4);
        for _ in 0..c {
            let grid: Vec<f64> = (0..(cells + 1) * (cells + 1)).map(|_| rng.normal()).collect();
            for y in 0..h {
                let fy = y as f64 * cells as f64 / h as f64;
                let (y0, ty) = (fy as usize, fy.fract());
                for x in 0..w {
                    let fx = x as f64 * cells as f64 / w as f64;
                    let (x0, tx) = (fx as usize, fx.fract());
                    let at = |yy: usize, xx: usize| grid[yy * (cells + 1) + xx];
                    let top = at(y0, x0) * (1.0 - tx) + at(y0, x0 + 1) * tx;
                    let bottom = at(y0 + 1, x0) * (1.0 - tx) + at(y0 + 1, x0 + 1) * tx;
                    // Bilinear blending shrinks the variance; 1.5 brings it back near 1.
                    out.push((1.5 * (top * (1.0 - ty) + bottom * ty)) as f32);
                }
            }
        }
    }
    out
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

pub(crate) fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs `g` (decomposed, built from `w`) node by node on `images`: each BatchNorm first gets its
/// input's per-channel mean and (unbiased) variance as running statistics, in `w` and in the
/// graph, so later layers see the normalised activations. Finally the classifier is rescaled.
fn calibrate(g: &mut Graph, w: &mut Weights, classifier: &str, images: Vec<f32>) -> Result<()> {
    let invalid = |m: String| ExportError::Invalid(format!("calibrating random weights: {m}"));
    let mut env: HashMap<ValueId, Vec<u8>> = HashMap::new();
    env.insert(g.inputs[0], f32_bytes(&images));
    for i in 0..g.nodes.len() {
        if g.nodes[i].op == "aten::_native_batch_norm_legit_no_training" {
            let args = &g.nodes[i].args;
            let (Some(Arg::Tensor(x)), Some(Arg::Tensor(mean)), Some(Arg::Tensor(var))) = (args.first(), args.get(3), args.get(4)) else {
                return Err(invalid(format!("unexpected batch norm arguments {args:?}")));
            };
            let (x, mean, var) = (*x, *mean, *var);
            let sizes = g.meta(x).sizes().unwrap_or_default();
            let data = env.get(&x).map(|b| f32s(b)).ok_or_else(|| invalid(format!("batch norm input {x} not computed")))?;
            let (m, v) = channel_stats(&data, &sizes);
            for (id, stat) in [(mean, m), (var, v)] {
                let name = g.values[id].name.clone();
                let bytes = f32_bytes(&stat);
                w.insert(&name, ScalarType::Float, &[stat.len()], bytes.clone());
                g.values[id].origin = Origin::Const(ConstData::owned(bytes));
            }
        }
        let outs = eval::eval_node(g, &g.nodes[i], &env)?;
        env.extend(g.nodes[i].outputs.iter().copied().zip(outs));
    }
    let logits = g.outputs.first().and_then(|o| env.get(o)).map(|b| f32s(b)).ok_or_else(|| invalid("no logits".into()))?;

    // Scale the weight's share of the logits; the bias stays as drawn.
    let shape = w.shape(classifier).map(<[usize]>::to_vec).unwrap_or_default();
    let bias = w.f32s(&classifier.replace(".weight", ".bias"), &shape[..shape.len().min(1)])?;
    let wx: Vec<f64> = logits.iter().enumerate().map(|(i, &l)| l as f64 - bias[i % bias.len()] as f64).collect();
    let mean = wx.iter().sum::<f64>() / wx.len().max(1) as f64;
    let std = (wx.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / wx.len().max(1) as f64).sqrt();
    if !std.is_finite() || std == 0.0 {
        return Err(invalid(format!("logits have std {std}")));
    }
    let gain = (TARGET_LOGIT_STD / std) as f32;
    let scaled: Vec<f32> = w.f32s(classifier, &shape)?.iter().map(|v| v * gain).collect();
    w.insert(classifier, ScalarType::Float, &shape, f32_bytes(&scaled));
    Ok(())
}

/// Per-channel mean and unbiased variance of an [N, C, ...] tensor. Channels that are (nearly)
/// constant on the batch get a variance floor, so other inputs do not blow them up.
fn channel_stats(data: &[f32], sizes: &[usize]) -> (Vec<f32>, Vec<f32>) {
    let (n, c) = (sizes.first().copied().unwrap_or(1), sizes.get(1).copied().unwrap_or(1));
    let inner: usize = sizes.iter().skip(2).product();
    let count = (n * inner).max(2) as f64;
    let mut means = vec![0f64; c];
    let mut vars = vec![0f64; c];
    for ch in 0..c {
        let values = || (0..n).flat_map(move |b| data[(b * c + ch) * inner..(b * c + ch + 1) * inner].iter().map(|&v| v as f64));
        let m = values().sum::<f64>() / count;
        means[ch] = m;
        vars[ch] = values().map(|v| (v - m) * (v - m)).sum::<f64>() / (count - 1.0);
    }
    let floor = (vars.iter().sum::<f64>() / c.max(1) as f64 * 1e-2).max(1e-6);
    (means.iter().map(|&m| m as f32).collect(), vars.iter().map(|&v| v.max(floor) as f32).collect())
}
